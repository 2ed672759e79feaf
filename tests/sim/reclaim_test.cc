// Reclaim in `estuary simulate` (issue 4 §3): an HP job that cannot start evicts the cheapest
// lower-priority preemptible work after a grace period, on nodes held for it meanwhile.
#include <gtest/gtest.h>

#include "sim/scenario.h"
#include "sim/simulate.h"
#include "tests/testing/sim_run.h"

namespace estuary {
namespace {

using testing::RunScenarioText;
using testing::StartOf;

const std::string kCluster = std::string(ESTUARY_SOURCE_DIR) + "/examples/clusters/two-asw.yaml";

SimJobStatus StatusOf(const SimulateResult& r, const std::string& name) {
  for (const SimJobRecord& j : r.jobs) {
    if (j.name == name) return j.status;
  }
  ADD_FAILURE() << "no job " << name;
  return SimJobStatus::kPending;
}

// The eight 8-GPU H800 nodes of the two-ASW example each run one LP job from 0 s; at 1000 s their
// lost work since the last checkpoint is 8 GPUs x 1000 s (no checkpoints) except lp1 (every
// 300 s: 100 s lost), lp2 (every 400 s: 200 s) and lp3 (every 700 s: 300 s). At 1000 s an HP gang
// of two whole nodes arrives and runs 500 s.
std::string FullCluster(const std::string& conf, SimTime duration) {
  std::string jobs;
  const int interval[] = {0, 300, 400, 700, 0, 0, 0, 0};
  for (int i = 0; i < 8; ++i) {
    jobs += "  - {name: lp" + std::to_string(i) + ", duration_s: 100000, gpus: 8, class: lp, checkpoint_interval_s: " +
            std::to_string(interval[i]) + "}\n";
  }
  return "name: t\nduration_s: " + std::to_string(duration) + "\ncluster:\n  spec: " + kCluster + "\njobs:\n" + jobs +
         "  - {name: hp, submit_s: 1000, duration_s: 500, replicas: 2, gpus: 8, class: hp-training}\n" +
         "configurations:\n  - {name: a" + conf + "}\n";
}

TEST(Reclaim, AnHpGangInAFullClusterEvictsExactlyTheTwoCheapestJobsAfterTheGracePeriod) {
  auto r = RunScenarioText(FullCluster(", preempt: {grace_s: 60}", 1200));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "hp"), 1060);
  EXPECT_EQ(r->metrics.at("evictions_count"), 2);
  EXPECT_EQ(r->metrics.at("hp_evictions_count"), 0);
  // Lost at eviction (1060 s): lp1 160 s (last checkpoint 900 s), lp2 260 s (800 s), 8 GPUs each.
  EXPECT_NEAR(r->metrics.at("preemption_lost_gpu_hours"), 8.0 * (160 + 260) / 3600, 1e-9);
  for (int i = 0; i < 8; ++i) {
    const std::string name = "lp" + std::to_string(i);
    EXPECT_EQ(StatusOf(*r, name), i == 1 || i == 2 ? SimJobStatus::kPending : SimJobStatus::kRunning) << name;
  }
}

TEST(Reclaim, TheGracePeriodIsConfigurable) {
  auto r = RunScenarioText(FullCluster(", preempt: {grace_s: 120}", 1200));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "hp"), 1120);
}

// Victims exit on their own within the grace period (Alibaba: mean 13 s, P95 48 s, bounded by
// 60 s): the HP gang starts as soon as the later of its two victims has exited — never before a
// victim could, never after the bound — and the same seed gives the same start.
TEST(Reclaim, WithAnExitModelTheHpGangStartsWhenItsLastVictimHasExitedWithinTheBound) {
  int64_t sum = 0;
  int early = 0;
  for (int seed = 1; seed <= 12; ++seed) {
    const std::string text = FullCluster(", preempt: {grace_s: 60, exit_mean_s: 13, exit_p95_s: 48}", 1200);
    auto r = RunScenarioText(text, seed);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const int64_t start = StartOf(*r, "hp");
    EXPECT_GT(start, 1000) << seed;
    EXPECT_LE(start, 1060) << seed;
    EXPECT_EQ(r->metrics.at("evictions_count"), 2) << seed;  // the same victims as with the whole grace
    EXPECT_EQ(StatusOf(*r, "lp1"), SimJobStatus::kPending) << seed;
    EXPECT_EQ(StatusOf(*r, "lp2"), SimJobStatus::kPending) << seed;
    auto again = RunScenarioText(text, seed);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(StartOf(*again, "hp"), start) << seed;
    sum += start - 1000;
    early += start < 1060;
  }
  // The later of two exits averages well under the bound (about 21 s for this model).
  EXPECT_LT(sum / 12, 40);
  EXPECT_GE(early, 9);
}

TEST(Reclaim, WithoutPreemptionTheHpGangWaits) {
  auto r = RunScenarioText(FullCluster("", 1200));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "hp"), -1);
  EXPECT_EQ(r->metrics.at("evictions_count"), 0);
}

TEST(Reclaim, OnceTheHpJobRunsFurtherCyclesEvictNothingAndTheVictimsReturnWhenItEnds) {
  auto r = RunScenarioText(FullCluster(", preempt: {grace_s: 60}, reserve: {after_s: 0, replan_s: 100}", 5000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "hp"), 1060);
  EXPECT_EQ(r->metrics.at("evictions_count"), 2);  // ticks every 100 s change nothing
  EXPECT_EQ(StatusOf(*r, "lp1"), SimJobStatus::kRunning);  // restarted when hp ended at 1560 s
  EXPECT_EQ(StatusOf(*r, "lp2"), SimJobStatus::kRunning);
}

TEST(Reclaim, TheEndAnEvictedRunWouldHaveHadCausesNoCycle) {
  // One 8-GPU node. lp (8 GPUs, 1,000 s, no checkpoints) runs from 0 s; hp (8 GPUs, 100 s)
  // arrives at 100 s and evicts it after the 60 s grace period; lp is requeued and runs again
  // from hp's end (260 s) to 1,260 s. Cycles: at 0 (lp arrives), 100 (hp arrives), 160 (the
  // eviction is due), 260 (hp ends) and 1,260 (lp ends) — five. Its first run would have ended at
  // 1,000 s: nothing happens then (the service, which has no such event, runs no cycle there).
  auto r = RunScenarioText(
      "name: t\nduration_s: 5000\n"
      "cluster:\n  generate: {total_gpus: 8, gpus_per_node: 8, nodes_per_asw_min: 1, nodes_per_asw_max: 1, seed: 1}\n"
      "jobs:\n"
      "  - {name: lp, duration_s: 1000, gpus: 8, cpu_cores: 1, memory_gib: 1, class: lp}\n"
      "  - {name: hp, submit_s: 100, duration_s: 100, gpus: 8, cpu_cores: 1, memory_gib: 1, class: hp-training}\n"
      "configurations:\n  - {name: a, preempt: {grace_s: 60}}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "hp"), 160);
  EXPECT_EQ(r->metrics.at("evictions_count"), 1);
  EXPECT_EQ(StatusOf(*r, "lp"), SimJobStatus::kFinished);
  EXPECT_EQ(r->cycles, 5);
}

TEST(Reclaim, TheFeasibilityCheckRefusesAndEvictsNothingWhenEvenFullReclaimCannotFit) {
  // Two LP jobs and six non-preemptible dev jobs fill the eight H800 nodes; an HP gang of three
  // whole nodes fits the empty cluster but not the two nodes reclaimable from LP work.
  std::string jobs;
  for (int i = 0; i < 8; ++i) {
    jobs += "  - {name: j" + std::to_string(i) + ", duration_s: 100000, gpus: 8, class: " + (i < 2 ? "lp" : "dev") + "}\n";
  }
  auto r = RunScenarioText("name: t\nduration_s: 1200\ncluster:\n  spec: " + kCluster + "\njobs:\n" + jobs +
                           "  - {name: hp, submit_s: 1000, duration_s: 500, replicas: 3, gpus: 8, class: hp-training}\n"
                           "configurations:\n  - {name: a, preempt: {grace_s: 60}}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "hp"), -1);
  EXPECT_EQ(StatusOf(*r, "hp"), SimJobStatus::kPending);  // waits: not infeasible
  EXPECT_EQ(r->metrics.at("evictions_count"), 0);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(StatusOf(*r, "j" + std::to_string(i)), SimJobStatus::kRunning);
}

// Eight 8-GPU nodes: four spot jobs (priority 100, preemptible), two LP jobs (300, preemptible)
// and two dev jobs (500, not preemptible) fill them from 0 s. At 1000 s an LP gang of two whole
// nodes and a dev job of one arrive.
std::string MixedPriorities(const std::string& preempt) {
  std::string jobs;
  for (int i = 0; i < 8; ++i) {
    const char* cls = i < 4 ? "spot" : i < 6 ? "lp" : "dev";
    jobs += "  - {name: " + std::string(cls) + std::to_string(i) + ", duration_s: 100000, gpus: 8, class: " + cls + "}\n";
  }
  return "name: t\nduration_s: 2000\ncluster:\n  spec: " + kCluster + "\njobs:\n" + jobs +
         "  - {name: lpgang, submit_s: 1000, duration_s: 100000, replicas: 2, gpus: 8, class: lp}\n"
         "  - {name: devnew, submit_s: 1000, duration_s: 100000, gpus: 8, class: dev}\n"
         "configurations:\n  - {name: a, preempt: {grace_s: 60" + preempt + "}}\n";
}

TEST(Reclaim, OnlyHpJobsReclaimByPriorityUnlessThePreemptorThresholdIsLowered) {
  // By default neither the LP gang nor the dev job is HP: nothing is evicted, both wait.
  auto r = RunScenarioText(MixedPriorities(""));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->metrics.at("evictions_count"), 0);
  EXPECT_EQ(StartOf(*r, "lpgang"), -1);
  EXPECT_EQ(StartOf(*r, "devnew"), -1);
  // With every job a preemptor (kube's PriorityClass rule), each evicts preemptible work of a
  // lower priority only: spot jobs (100) for both, never the LP jobs (300, equal to the gang's)
  // for the gang, and never the dev jobs (not preemptible). The four spot nodes cover the gang's
  // two and the dev job's one: three spot jobs are evicted, 60 s later both start.
  r = RunScenarioText(MixedPriorities(", preemptor_min_priority: 0"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->metrics.at("evictions_count"), 3);
  EXPECT_EQ(StartOf(*r, "lpgang"), 1060);
  EXPECT_EQ(StartOf(*r, "devnew"), 1060);
  int spot_running = 0;
  for (int i = 0; i < 4; ++i) spot_running += StatusOf(*r, "spot" + std::to_string(i)) == SimJobStatus::kRunning;
  EXPECT_EQ(spot_running, 1);
  for (const char* j : {"lp4", "lp5", "dev6", "dev7"}) EXPECT_EQ(StatusOf(*r, j), SimJobStatus::kRunning) << j;
  // From 500 (the dev class) only the dev job reclaims: one spot job is evicted.
  r = RunScenarioText(MixedPriorities(", preemptor_min_priority: 500"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->metrics.at("evictions_count"), 1);
  EXPECT_EQ(StartOf(*r, "devnew"), 1060);
  EXPECT_EQ(StartOf(*r, "lpgang"), -1);
}

TEST(Reclaim, BadPreemptSectionsAreRejected) {
  for (const auto& [conf, message] :
       {std::pair{"preempt: 60",
                  "s.yaml:7: field 'preempt': expected a mapping {grace_s, exit_mean_s, exit_p95_s, victims, "
                  "preemptor_min_priority}"},
        std::pair{"preempt: {preemptor_min_priority: -1}", "s.yaml:7: field 'preemptor_min_priority': -1 is outside [0, 1000]"},
        std::pair{"preempt: {preemptor_min_priority: 1001}",
                  "s.yaml:7: field 'preemptor_min_priority': 1001 is outside [0, 1000]"},
        std::pair{"preempt: {preemptor_min_priority: high}",
                  "s.yaml:7: field 'preemptor_min_priority': expected an integer"},
        std::pair{"preempt: {grace_s: 60, exit_mean_s: 13}",
                  "s.yaml:7: field 'exit_p95_s': exit_mean_s and exit_p95_s go together"},
        std::pair{"preempt: {grace_s: 60, exit_mean_s: 13, exit_p95_s: 60}",
                  "s.yaml:7: field 'exit_p95_s': must lie below the grace period (60 s)"},
        std::pair{"preempt: {grace_s: 60, exit_mean_s: 50, exit_p95_s: 48}",
                  "s.yaml:7: field 'exit_p95_s': must exceed exit_mean_s (50 s)"},
        std::pair{"preempt: {exit_mean_s: 2, exit_p95_s: 48}",
                  "s.yaml:7: field 'exit_mean_s': 2 s is too small for a P95 of 48 s bounded by 60 s"},
        std::pair{"preempt: {grace_s: -1}", "s.yaml:7: field 'grace_s': -1 is outside [0, 86400]"},
        std::pair{"preempt: {grace: 60}", "s.yaml:7: field 'grace': unknown field"}}) {
    auto s = ParseScenario(std::string("name: t\ncluster:\n  spec: c.yaml\njobs:\n  - {name: j, gpus: 1}\n"
                                       "configurations:\n  - {name: a, ") + conf + "}\n",
                           "s.yaml");
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().ExitCode(), 2);
    EXPECT_EQ(s.status().message(), message);
  }
}

}  // namespace
}  // namespace estuary
