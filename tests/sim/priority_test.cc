// Job classes and priorities in `estuary simulate` (issue 4 §1): class defaults, the priority
// queue, HP scheduling delay and allocation ratios (metrics.md §4, no Standby), and bad input.
#include <gtest/gtest.h>

#include "sim/scenario.h"
#include "sim/simulate.h"
#include "tests/testing/sim_run.h"

namespace estuary {
namespace {

using testing::RunScenarioText;
using testing::StartOf;

const std::string kCluster = std::string(ESTUARY_SOURCE_DIR) + "/examples/clusters/two-asw.yaml";

// The two-ASW example: eight 8-GPU H800 nodes, three 1-GPU A10 nodes, a CPU node. `fill` holds
// seven H800 nodes all run long; `one` holds the eighth until 1000 s. An LP job (10 s) and then an
// HP job (20 s) wait for a whole H800 node; each runs 500 s.
StatusOr<SimulateResult> RunQueue(const std::string& queue) {
  return RunScenarioText("name: t\nduration_s: 2000\nsample_interval_s: 100\ncluster:\n  spec: " + kCluster +
                         "\njobs:\n"
                         "  - {name: fill, duration_s: 100000, replicas: 7, gpus: 8, class: lp}\n"
                         "  - {name: one, duration_s: 1000, gpus: 8, class: lp}\n"
                         "  - {name: lp-wait, submit_s: 10, duration_s: 500, gpus: 8, class: lp}\n"
                         "  - {name: hp-wait, submit_s: 20, duration_s: 500, gpus: 8, class: hp-training}\n"
                         "configurations:\n  - {name: a" + queue + "}\n");
}

TEST(PriorityQueue, FifoStartsTheEarlierLpJobFirst) {
  auto r = RunQueue("");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "lp-wait"), 1000);
  EXPECT_EQ(StartOf(*r, "hp-wait"), 1500);
  EXPECT_EQ(r->metrics.at("hp_sched_delay_p99_s"), 1480);
}

TEST(PriorityQueue, PriorityStartsTheHpJobFirstWhateverItsArrival) {
  auto r = RunQueue(", queue: priority");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "hp-wait"), 1000);
  EXPECT_EQ(StartOf(*r, "lp-wait"), 1500);
  EXPECT_EQ(r->metrics.at("hp_sched_delay_p50_s"), 980);
  EXPECT_EQ(r->metrics.at("hp_sched_delay_p90_s"), 980);
  EXPECT_EQ(r->metrics.at("hp_sched_delay_p99_s"), 980);
}

TEST(PriorityQueue, AllocationRatiosAverageNodeSharesOverSamples) {
  // 11 GPU nodes; the HP job holds one whole node in 5 of the 20 samples (1000-1400 s or
  // 1500-1900 s); eight of the eleven nodes are fully allocated throughout.
  for (const char* queue : {"", ", queue: priority"}) {
    auto r = RunQueue(queue);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_NEAR(r->metrics.at("alloc_ratio_hp_pct"), 100.0 / 11 * 5 / 20, 1e-9) << queue;
    EXPECT_NEAR(r->metrics.at("alloc_ratio_hp_lp_pct"), 100.0 * 8 / 11, 1e-9) << queue;
  }
}

TEST(JobClasses, AClassSetsPriorityAndPreemptibleAndFieldsOverrideIt) {
  auto sc = ParseScenario("name: t\ncluster:\n  spec: c.yaml\njobs:\n"
                          "  - {name: a, gpus: 1, class: spot}\n"
                          "  - {name: b, gpus: 1, class: hp-inference, priority: 950}\n"
                          "  - {name: c, gpus: 1, class: lp, preemptible: false, checkpoint_interval_s: 600, "
                          "restart_cost_s: 120}\n"
                          "  - {name: d, gpus: 1}\n"
                          "configurations:\n  - {name: x}\n",
                          "s.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  const auto& j = sc->jobs;
  EXPECT_EQ(j[0].priority, 100);
  EXPECT_TRUE(j[0].preemptible);
  EXPECT_EQ(j[1].priority, 950);
  EXPECT_FALSE(j[1].preemptible);
  EXPECT_EQ(j[2].priority, 300);
  EXPECT_FALSE(j[2].preemptible);
  EXPECT_EQ(j[2].checkpoint_interval_s, 600);
  EXPECT_EQ(j[2].restart_cost_s, 120);
  EXPECT_EQ(j[3].priority, 0);  // unclassified
  EXPECT_FALSE(j[3].preemptible);
}

struct Bad {
  const char* name;
  std::string job;
  const char* message;
};

class JobClassBadInput : public ::testing::TestWithParam<Bad> {};

TEST_P(JobClassBadInput, IsRejectedNamingTheLineAndField) {
  auto s = ParseScenario("name: t\ncluster:\n  spec: c.yaml\njobs:\n  - " + GetParam().job +
                             "\nconfigurations:\n  - {name: a}\n",
                         "s.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().ExitCode(), 2);
  EXPECT_EQ(s.status().message().rfind(GetParam().message, 0), 0u) << s.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, JobClassBadInput,
    ::testing::Values(
        Bad{"UnknownClass", "{name: j, gpus: 1, class: vip}",
            "s.yaml:5: field 'class': unknown class 'vip' (known: hp-inference, hp-training, dev, lp, spot)"},
        Bad{"PriorityAboveMax", "{name: j, gpus: 1, priority: 1001}", "s.yaml:5: field 'priority': 1001 is above 1000"},
        Bad{"NegativePriority", "{name: j, gpus: 1, priority: -1}", "s.yaml:5: field 'priority': -1 is below 0"},
        Bad{"PreemptibleNotABool", "{name: j, gpus: 1, preemptible: maybe}",
            "s.yaml:5: field 'preemptible': expected a boolean"},
        Bad{"NegativeCheckpointInterval", "{name: j, gpus: 1, checkpoint_interval_s: -60}",
            "s.yaml:5: field 'checkpoint_interval_s': -60 is below 0"},
        Bad{"NegativeRestartCost", "{name: j, gpus: 1, restart_cost_s: -1}", "s.yaml:5: field 'restart_cost_s': -1 is below 0"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(PriorityQueue, AnUnknownQueueOrderIsRejected) {
  auto s = ParseScenario("name: t\ncluster:\n  spec: c.yaml\njobs:\n  - {name: j, gpus: 1}\n"
                         "configurations:\n  - {name: a, queue: lifo}\n",
                         "s.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().ExitCode(), 2);
  EXPECT_EQ(s.status().message(), "s.yaml:7: field 'queue': unknown queue order 'lifo' (known: fifo, priority)");
}

}  // namespace
}  // namespace estuary
