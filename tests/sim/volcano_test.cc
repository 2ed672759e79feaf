// The volcano peer configuration in `estuary simulate` (docs/peers.md): its recipe's keys, and
// two behaviours Volcano's documentation describes — binpack filling a node before opening
// another, and a gang with a hard network-topology constraint waiting for one whole domain —
// run through the whole engine with invariants checked at every event time. Outcomes are
// derived by hand (the scores: src/sched/plugins/plugins_test.cc, VolcanoBinpack.*).
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
    "{name: volcano, policy: volcano-binpack, queue: priority, align: false, topology: true, "
    "preempt: {grace_s: 60, victims: volcano, preemptor_min_priority: 0}}";
const std::string kK8s =
    "{name: k8s-default, policy: k8s-fit, queue: priority, align: false, topology: false, "
    "preempt: {grace_s: 60, victims: k8s, preemptor_min_priority: 0}}";

std::string Scenario(const std::string& jobs, const std::string& conf, SimTime duration) {
  return "name: t\nduration_s: " + std::to_string(duration) + "\ncluster:\n  spec: " + kCluster + "\njobs:\n" + jobs +
         "configurations:\n  - " + conf + "\n";
}

// Eight one-GPU jobs s<i> (1 core, 1 GiB, H800 only) at i s running 5000 s, then eight whole-node
// jobs w<i> at 100 + i s running 1000 s, on the two ASWs' eight 8-GPU 128-core 2048-GiB H800 nodes.
std::string SinglesThenWholeNodes() {
  std::string jobs;
  for (int i = 0; i < 8; ++i) {
    jobs += "  - {name: s" + std::to_string(i) + ", submit_s: " + std::to_string(i) +
            ", duration_s: 5000, gpus: 1, models: H800}\n";
  }
  for (int i = 0; i < 8; ++i) {
    jobs += "  - {name: w" + std::to_string(i) + ", submit_s: " + std::to_string(100 + i) +
            ", duration_s: 1000, gpus: 8, models: H800}\n";
  }
  return jobs;
}

TEST(Volcano, BinpackFillsOneNodeWithOneGpuJobsSoWholeNodeJobsStartAtOnce) {
  // s1 on s0's node N: binpack (2000/128000 + 2048/2097152 + 2000 x 2/8000) / 4 x 1000 = 129.2,
  // LeastAllocated 98, Balanced 88: 315.2; on an empty node 64.6 + 99 + 94 = 257.6. N's lead
  // grows with each job (binpack +62.5 per GPU), so all eight share N; w0-w6 take the seven
  // empty nodes at once; w7 waits for the first of them to free, w0's at 1100 s (N is busy
  // until s7 ends at 5007 s).
  auto r = RunScenarioText(Scenario(SinglesThenWholeNodes(), kRecipe, 8000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (int i = 0; i < 7; ++i) EXPECT_EQ(StartOf(*r, "w" + std::to_string(i)), 100 + i) << i;
  EXPECT_EQ(StartOf(*r, "w7"), 1100);
  EXPECT_EQ(r->metrics.at("evictions_count"), 0);
}

TEST(Volcano, KubesLeastAllocatedSpreadsTheSameJobsAndEveryWholeNodeJobWaits) {
  // k8s-fit: an empty node scores 99 + 99 against 98 + 99 for a node with one job, so the eight
  // one-GPU jobs take one node each; w0 waits for the first to end (s0, 5000 s), w7 for the last.
  auto r = RunScenarioText(Scenario(SinglesThenWholeNodes(), kK8s, 8000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "w0"), 5000);
  EXPECT_EQ(StartOf(*r, "w7"), 5007);
}

// a and b: 3-node gangs that require one ASW (a at 0 s for 1000 s, b at 1 s for 2000 s); g: a
// 2-node gang that requires one ASW, at 10 s.
std::string TwoBlockersAndAGang() {
  return "  - {name: a, submit_s: 0, duration_s: 1000, replicas: 3, gpus: 8, plane: data, required_level: asw}\n"
         "  - {name: b, submit_s: 1, duration_s: 2000, replicas: 3, gpus: 8, plane: data, required_level: asw}\n"
         "  - {name: g, submit_s: 10, duration_s: 100, replicas: 2, gpus: 8, plane: data, required_level: asw}\n";
}

TEST(Volcano, AGangWithAHardTopologyConstraintWaitsForOneWholeDomain) {
  // a fills three nodes of one ASW; b cannot fit in what is left there (one node) and takes three
  // of the other. Two nodes are free at 10 s, one per ASW: g does not start on them (all-or-
  // nothing within one ASW) and starts when a ends and frees its ASW, at 1000 s.
  auto r = RunScenarioText(Scenario(TwoBlockersAndAGang(), kRecipe, 4000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "a"), 0);
  EXPECT_EQ(StartOf(*r, "b"), 1);
  EXPECT_EQ(StartOf(*r, "g"), 1000);
}

TEST(Volcano, WithoutTheTopologyConstraintTheSameGangStartsAcrossDomainsAtOnce) {
  std::string conf = kRecipe;
  conf.replace(conf.find("topology: true"), 14, "topology: false");
  auto r = RunScenarioText(Scenario(TwoBlockersAndAGang(), conf, 4000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "g"), 10);
}

// big (120 cores) at 0 s and lp1-lp7 (8 cores) at 1-7 s: eight LP whole-node jobs on the eight
// H800 nodes; hp (priority 800, 8 GPUs, 8 cores) arrives at 100 s and must preempt one.
std::string FullOfLpThenHp() {
  std::string jobs =
      "  - {name: big, submit_s: 0, duration_s: 10000, gpus: 8, cpu_cores: 120, models: H800, priority: 100, "
      "preemptible: true}\n";
  for (int i = 1; i < 8; ++i) {
    jobs += "  - {name: lp" + std::to_string(i) + ", submit_s: " + std::to_string(i) +
            ", duration_s: 10000, gpus: 8, cpu_cores: 8, models: H800, priority: 100, preemptible: true}\n";
  }
  return jobs + "  - {name: hp, submit_s: 100, duration_s: 100, gpus: 8, cpu_cores: 8, models: H800, priority: 800}\n";
}

std::vector<std::string> Evicted(const SimulateResult& r) {
  std::vector<std::string> out;
  for (const SimJobEvent& e : r.job_events) {
    if (e.kind == "evict") out.push_back(e.job);
  }
  return out;
}

StatusOr<SimulateResult> RunWithEvents(const std::string& yaml) {
  auto sc = ParseScenario(yaml, "s.yaml");
  if (!sc.ok()) return sc.status();
  auto cluster = LoadScenarioCluster(*sc);
  if (!cluster.ok()) return cluster.status();
  return RunScenario(*sc, *cluster, sc->configurations[0], 1, /*check_invariants=*/true, /*record_events=*/true);
}

TEST(Volcano, ItsPreemptionEvictsOnTheNodeItsScoresRankFirstNotTheCheapestVictim) {
  // hp's scores of the full nodes (docs/peers.md, the volcano-binpack sum): big's node — binpack
  // (128/128 + 2/2048 + 0 x 2) / 4 x 1000 = 250.2 (the GPU term is 0, beyond capacity), least
  // allocated (0 + 99.9) / 2 = 49, balanced over (1, 0.001, 1) 52: ~351; an lp node — binpack
  // (16/128 + 2/2048) / 4 x 1000 = 31.5, least allocated (87.5 + 99.9) / 2 = 93, balanced over
  // (0.125, 0.001, 1) 55: ~180. Volcano's preempt takes big's node first and evicts big there.
  auto r = RunWithEvents(Scenario(FullOfLpThenHp(), kRecipe, 1000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Evicted(*r), (std::vector<std::string>{"big"}));
  EXPECT_EQ(StartOf(*r, "hp"), 160);  // after the 60 s grace period
  // estuary's own choice evicts the victim that loses least work: lp7, the last started.
  std::string recipe = kRecipe;
  recipe.replace(recipe.find("victims: volcano"), 16, "victims: estuary");
  auto own = RunWithEvents(Scenario(FullOfLpThenHp(), recipe, 1000));
  ASSERT_TRUE(own.ok()) << own.status().message();
  EXPECT_EQ(Evicted(*own), (std::vector<std::string>{"lp7"}));
}

TEST(Volcano, TheRecipeParsesIntoItsKeys) {
  auto s = ParseScenario("name: t\ncluster:\n  spec: c.yaml\njobs:\n  - {name: j, gpus: 1}\nconfigurations:\n  - " +
                             kRecipe + "\n",
                         "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  const SchedulerConfig& c = s->configurations[0];
  EXPECT_EQ(c.policy, "volcano-binpack");
  EXPECT_TRUE(c.priority_queue);
  EXPECT_FALSE(c.align);
  EXPECT_TRUE(c.topology);
  EXPECT_TRUE(c.preempt);
  EXPECT_EQ(c.victims, VictimSelection::kVolcano);
  EXPECT_EQ(c.preemptor_min_priority, 0);  // any starving job preempts lower priorities of its queue
  EXPECT_FALSE(c.absorb);
  EXPECT_FALSE(c.standby);
  EXPECT_FALSE(c.defrag.enabled);
  EXPECT_FALSE(c.reserve.enabled);
}

}  // namespace
}  // namespace estuary
