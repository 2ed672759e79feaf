// The k8s-default peer configuration in `estuary simulate` (docs/peers.md): its keys
// (`policy: k8s-fit`, `preempt: {victims: k8s}`), their bad values, and a Reclaim under kube's
// victim rules run through the whole engine with invariants checked at every event time.
#include <gtest/gtest.h>

#include "sim/scenario.h"
#include "sim/simulate.h"
#include "tests/testing/sim_run.h"

namespace estuary {
namespace {

using testing::RunScenarioText;
using testing::StartOf;

const std::string kCluster = std::string(ESTUARY_SOURCE_DIR) + "/examples/clusters/two-asw.yaml";
const std::string kRecipe =
    "{name: k8s-default, policy: k8s-fit, queue: priority, align: false, topology: false, "
    "preempt: {grace_s: 60, victims: k8s, preemptor_min_priority: 0}}";

// The eight 8-GPU H800 nodes of the two-ASW example each run one LP job, lp<i> submitted (and
// started) at i s; lp1, lp2 and lp3 checkpoint every 300, 400 and 700 s, the others never. At
// 1000 s an HP gang of two whole nodes arrives and runs 500 s.
std::string FullCluster(const std::string& conf, SimTime duration) {
  std::string jobs;
  const int interval[] = {0, 300, 400, 700, 0, 0, 0, 0};
  for (int i = 0; i < 8; ++i) {
    jobs += "  - {name: lp" + std::to_string(i) + ", submit_s: " + std::to_string(i) +
            ", duration_s: 100000, gpus: 8, class: lp, checkpoint_interval_s: " + std::to_string(interval[i]) + "}\n";
  }
  return "name: t\nduration_s: " + std::to_string(duration) + "\ncluster:\n  spec: " + kCluster + "\njobs:\n" + jobs +
         "  - {name: hp, submit_s: 1000, duration_s: 500, replicas: 2, gpus: 8, class: hp-training}\n" +
         "configurations:\n  - " + conf + "\n";
}

TEST(K8sDefault, AnHpGangEvictsTheLatestStartedEqualPriorityJobsWhateverTheirCheckpoints) {
  // Every node holds one victim of priority 300: criteria 2-4 tie, criterion 5 (latest start of
  // the highest-priority victim) picks lp7 for the first replica, then lp6 for the second. Work
  // lost at 1060 s: 8 GPUs x (1060 - 7) and 8 x (1060 - 6) s. (Estuary's Reclaim takes lp1 and
  // lp2, the cheapest since their checkpoints: tests/sim/reclaim_test.cc.)
  auto r = RunScenarioText(FullCluster(kRecipe, 3000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "hp"), 1060);
  EXPECT_NEAR(r->metrics.at("preemption_lost_gpu_hours"), 8.0 * (1053 + 1054) / 3600, 1e-9);
  // Stable: the HP job runs to its end and the victims restart once it is done; nothing else is
  // ever evicted over the 2,000 s of later cycles (no evict / re-place ping-pong).
  EXPECT_EQ(r->metrics.at("evictions_count"), 2);
  EXPECT_EQ(r->metrics.at("hp_evictions_count"), 0);
  EXPECT_EQ(StartOf(*r, "lp0"), 0);
}

TEST(K8sDefault, EstuarysOwnReclaimOnTheSameClusterLosesLessWork) {
  auto r = RunScenarioText(FullCluster("{name: a, queue: priority, preempt: {grace_s: 60}}", 3000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "hp"), 1060);
  EXPECT_EQ(r->metrics.at("evictions_count"), 2);
  // lp1: last checkpoint 901 s -> 159 s lost; lp2: 802 s -> 258 s.
  EXPECT_NEAR(r->metrics.at("preemption_lost_gpu_hours"), 8.0 * (159 + 258) / 3600, 1e-9);
}

struct Bad {
  const char* name;
  const char* conf;
  const char* message;
};

class K8sDefaultBadInput : public ::testing::TestWithParam<Bad> {};

TEST_P(K8sDefaultBadInput, IsRejectedNamingTheLineAndField) {
  auto s = ParseScenario(std::string("name: t\ncluster:\n  spec: c.yaml\njobs:\n  - {name: j, gpus: 1}\n"
                                     "configurations:\n  - ") + GetParam().conf + "\n",
                         "s.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().ExitCode(), 2);
  EXPECT_EQ(s.status().message(), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, K8sDefaultBadInput,
    ::testing::Values(
        Bad{"UnknownVictimSelection", "{name: a, topology: false, preempt: {victims: kube}}",
            "s.yaml:7: field 'victims': unknown victim selection 'kube' (known: estuary, k8s, volcano)"},
        Bad{"VictimsNotAString", "{name: a, topology: false, preempt: {victims: [k8s]}}",
            "s.yaml:7: field 'victims': expected a non-empty string"},
        Bad{"K8sVictimsWithTopology", "{name: a, preempt: {victims: k8s}}",
            "s.yaml:7: field 'victims': k8s victim selection needs 'topology: false' (kube's default profile has "
            "no topology levels)"},
        Bad{"MisspeltPolicy", "{name: a, policy: k8s-fir}",
            "s.yaml:7: field 'policy': unknown policy 'k8s-fir' (known: random, dotprod, gpu-clustering, gpu-packing, "
            "best-fit, fgd, k8s-fit, volcano-binpack, kai-binpack)"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(K8sDefault, TheRecipeParsesIntoItsKeys) {
  auto s = ParseScenario("name: t\ncluster:\n  spec: c.yaml\njobs:\n  - {name: j, gpus: 1}\nconfigurations:\n  - " +
                             kRecipe + "\n",
                         "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  const SchedulerConfig& c = s->configurations[0];
  EXPECT_EQ(c.policy, "k8s-fit");
  EXPECT_TRUE(c.priority_queue);
  EXPECT_FALSE(c.align);
  EXPECT_FALSE(c.topology);
  EXPECT_TRUE(c.preempt);
  EXPECT_EQ(c.victims, VictimSelection::kKube);
  EXPECT_EQ(c.preemptor_min_priority, 0);  // kube's PriorityClass rule: any higher priority preempts
  EXPECT_FALSE(c.absorb);
  EXPECT_FALSE(c.standby);
  EXPECT_FALSE(c.defrag.enabled);
  EXPECT_FALSE(c.reserve.enabled);
}

}  // namespace
}  // namespace estuary
