// The kai peer configuration in `estuary simulate` (docs/peers.md): its recipe's keys, and
// behaviours KAI-Scheduler's own documentation and source describe — binpack filling the node with
// the fewest free GPUs, the topology documentation's example (required zone, preferred rack),
// consolidation moving a running pod once to make room for a pending job, and a queue under its
// deserved quota reclaiming what another queue borrowed — run through the whole engine with
// invariants checked at every event time. Outcomes are derived by hand (the scores:
// src/sched/plugins/plugins_test.cc, KaiBinpack.*).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "sim/scenario.h"
#include "sim/simulate.h"
#include "tests/testing/sim_run.h"

namespace estuary {
namespace {

using testing::RunScenarioText;
using testing::StartOf;

const std::string kCluster = std::string(ESTUARY_SOURCE_DIR) + "/examples/clusters/two-asw.yaml";
// The recipe as docs/peers.md gives it (and the examples use it).
const std::string kRecipe =
    "{name: kai, policy: kai-binpack, queue: priority, align: false, topology: true, absorb: true, "
    "preempt: {grace_s: 60, victims: estuary, preemptor_min_priority: 0}, "
    "defrag: {interval_s: 0, trigger_after_s: 1, trigger_min_gpus: 2, trigger_cooldown_s: 600, chain_depth: 0, "
    "rounds: 1, max_moves: 16, per_node: 16, per_job: 16, startup_s: 60}}";

// The recipe without one of its parts: `cut` (e.g. the defrag mapping) removed.
std::string RecipeWithout(const std::string& cut) {
  std::string r = kRecipe;
  const size_t at = r.find(cut);
  EXPECT_NE(at, std::string::npos) << cut;
  r.erase(at, cut.size());
  return r;
}
const std::string kConsolidation =
    ", defrag: {interval_s: 0, trigger_after_s: 1, trigger_min_gpus: 2, trigger_cooldown_s: 600, chain_depth: 0, "
    "rounds: 1, max_moves: 16, per_node: 16, per_job: 16, startup_s: 60}";

std::string Scenario(const std::string& cluster, const std::string& jobs, const std::string& conf, SimTime duration,
                     const std::string& extra = "") {
  return "name: t\nduration_s: " + std::to_string(duration) + "\ncluster:\n  " + cluster + "\n" + extra + "jobs:\n" +
         jobs + "configurations:\n  - " + conf + "\n";
}

// Eight one-GPU jobs s<i> (1 core, 1 GiB, H800 only) at i s running 5000 s, then eight whole-node
// jobs w<i> at 100 + i s running 1000 s, on the two ASWs' eight 8-GPU H800 nodes.
std::string SinglesThenWholeNodes() {
  std::string jobs;
  for (int i = 0; i < 8; ++i) {
    jobs += "  - {name: s" + std::to_string(i) + ", submit_s: " + std::to_string(i) +
            ", duration_s: 5000, gpus: 1, cpu_cores: 1, memory_gib: 1, models: H800}\n";
  }
  for (int i = 0; i < 8; ++i) {
    jobs += "  - {name: w" + std::to_string(i) + ", submit_s: " + std::to_string(100 + i) +
            ", duration_s: 1000, gpus: 8, cpu_cores: 1, memory_gib: 1, models: H800}\n";
  }
  return jobs;
}

TEST(Kai, BinpackPutsEveryOneGpuJobOnTheNodeWithTheFewestFreeGpus) {
  // s0: every H800 node has 8 free GPUs (min = max: all score 9), the seeded node order picks N.
  // s1: N has 7 free, the others 8: N scores 9, the others 9 x (1 - 1) = 0. Each later s<i> finds
  // N with the fewest free GPUs, so all eight share N; w0-w6 take the seven empty nodes at once;
  // w7 waits for the first of them to free, w0's at 1100 s (N is busy until s7 ends at 5007 s).
  // Consolidation has nothing to move: every other H800 node is full.
  auto r = RunScenarioText(Scenario("spec: " + kCluster, SinglesThenWholeNodes(), kRecipe, 8000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (int i = 0; i < 7; ++i) EXPECT_EQ(StartOf(*r, "w" + std::to_string(i)), 100 + i) << i;
  EXPECT_EQ(StartOf(*r, "w7"), 1100);
  EXPECT_EQ(r->metrics.at("evictions_count"), 0);
  EXPECT_EQ(r->metrics.at("migrations_started_count"), 0);
}

// Two generated 8-GPU nodes of 96 cores. x (4 GPUs, 90 cores) opens node A; y (6 GPUs) does not
// fit A's 4 free GPUs and takes B; z (1 GPU, 1 core) at 2 s, then w (4 GPUs) at 10 s. x and y
// run past the end; z for 1000 s.
std::string GpusVersusCpu() {
  return "  - {name: x, duration_s: 100000, gpus: 4, cpu_cores: 90, memory_gib: 1}\n"
         "  - {name: y, submit_s: 1, duration_s: 100000, gpus: 6, cpu_cores: 1, memory_gib: 1}\n"
         "  - {name: z, submit_s: 2, duration_s: 1000, gpus: 1, cpu_cores: 1, memory_gib: 1}\n"
         "  - {name: w, submit_s: 10, duration_s: 100, gpus: 4, cpu_cores: 1, memory_gib: 1}\n";
}
const std::string kTwoNodes96 =
    "generate: {total_gpus: 16, gpus_per_node: 8, nodes_per_asw_min: 2, nodes_per_asw_max: 2, seed: 1}";

TEST(Kai, BinpackCountsGpusOnlySoAOneGpuJobKeepsFourGpusTogether) {
  // z: A has 4 free GPUs, B 2: KAI scores B 9, A 0, and z takes B. A keeps 4 free GPUs (and 6
  // cores), so w starts on arrival at 10 s.
  auto r = RunScenarioText(Scenario(kTwoNodes96, GpusVersusCpu(), kRecipe, 3000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "z"), 2);
  EXPECT_EQ(StartOf(*r, "w"), 10);
}

TEST(Kai, BestFitWeighsTheCpuLeftAndSplitsTheFourGpus) {
  // best-fit: A (5 cores, 3 GPUs left) 0.5 x 5000/128000 + 0.5 x 3000/8000 = 0.207 -> 79; B (94
  // cores, 1 GPU left) 0.5 x 94000/128000 + 0.5 x 1000/8000 = 0.430 -> 57: z takes A, leaving
  // 3 + 2 free GPUs, and w waits for z to end at 1002 s.
  std::string conf = kRecipe;
  conf.replace(conf.find("kai-binpack"), 11, "best-fit");
  auto r = RunScenarioText(Scenario(kTwoNodes96, GpusVersusCpu(), conf, 3000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "z"), 2);
  EXPECT_EQ(StartOf(*r, "w"), 1002);
}

// KAI's topology documentation (docs/topology/README.md, "Example"): zone A has rack A1 of two
// 1-GPU nodes and racks A2-A4 of one each (5 GPUs); zone B has racks B1-B3 of two each (6 GPUs).
std::string ZonesAndRacksSpec() {
  const std::string path = ::testing::TempDir() + "/kai-zones.yaml";
  std::ofstream f(path);
  f << "name: kai-zones\n"
       "pools:\n  - {name: g, gpu_model: H800, gpus_per_node: 1, cpu_cores: 16, memory_gib: 64}\n"
       "topology:\n  planes:\n    - {name: data, levels: [zone, rack, node]}\n"
       "nodes:\n"
       "  - {name_prefix: a1-, count: 2, pool: g, domains: {zone: A, rack: A1}}\n"
       "  - {name_prefix: a2-, count: 1, pool: g, domains: {zone: A, rack: A2}}\n"
       "  - {name_prefix: a3-, count: 1, pool: g, domains: {zone: A, rack: A3}}\n"
       "  - {name_prefix: a4-, count: 1, pool: g, domains: {zone: A, rack: A4}}\n"
       "  - {name_prefix: b1-, count: 2, pool: g, domains: {zone: B, rack: B1}}\n"
       "  - {name_prefix: b2-, count: 2, pool: g, domains: {zone: B, rack: B2}}\n"
       "  - {name_prefix: b3-, count: 2, pool: g, domains: {zone: B, rack: B3}}\n";
  return path;
}

TEST(Kai, TheTopologyDocsExampleTakesTheFullerZoneWithTheRequiredLevel) {
  // d: 3 one-GPU pods, required zone, preferred rack. No rack holds 3; both zones do. Domain
  // selection packs: zone A (5 free, 2 left after d) before zone B (6 free, 3 left). A probe of 6
  // pods that requires one zone, at 1 s, then starts at once only because zone B is untouched.
  const std::string jobs =
      "  - {name: d, duration_s: 1000, replicas: 3, gpus: 1, cpu_cores: 1, memory_gib: 1, plane: data, "
      "required_level: zone, preferred_level: rack}\n"
      "  - {name: probe, submit_s: 1, duration_s: 100, replicas: 6, gpus: 1, cpu_cores: 1, memory_gib: 1, plane: data, "
      "required_level: zone}\n";
  auto r = RunScenarioText(Scenario("spec: " + ZonesAndRacksSpec(), jobs, kRecipe, 2000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "d"), 0);
  EXPECT_EQ(StartOf(*r, "probe"), 1);
}

TEST(Kai, TheTopologyDocsExamplePutsThreePodsOnTwoRacksWithThePreferredLevel) {
  // Node order within the domain fills the rack with the most free GPUs first: A1's two nodes,
  // then one more rack: 2 racks, not 3 (the documentation's result). Without a required level the
  // domain is the whole cluster, where B1 (or B2, B3) and one more rack do the same: 2 racks.
  const std::string jobs =
      "  - {name: d, duration_s: 1000, replicas: 3, gpus: 1, cpu_cores: 1, memory_gib: 1, plane: data, "
      "preferred_level: rack}\n";
  auto r = RunScenarioText(Scenario("spec: " + ZonesAndRacksSpec(), jobs, kRecipe, 2000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->jobs.size(), 1u);
  EXPECT_EQ(r->jobs[0].start_s, 0);
  ASSERT_TRUE(r->jobs[0].domains.has_value());
  EXPECT_EQ(*r->jobs[0].domains, 2);
}

// Three 8-GPU nodes of one ASW; 1 core and 1 GiB per job so that only GPUs count. a and b (4 GPUs
// each) share one node (binpack: 4 free beats 8), c and d the next; b and d end at 1000 s, leaving
// two half-used nodes. e (8 GPUs) takes the third node at 1100 s; f (8 GPUs) arrives at 1200 s
// and finds no whole node. a, c and e run past the end of the run.
std::string TwoHalfNodes() {
  return "  - {name: a, duration_s: 100000, gpus: 4, cpu_cores: 1, memory_gib: 1}\n"
         "  - {name: b, duration_s: 1000, gpus: 4, cpu_cores: 1, memory_gib: 1}\n"
         "  - {name: c, submit_s: 1, duration_s: 100000, gpus: 4, cpu_cores: 1, memory_gib: 1}\n"
         "  - {name: d, submit_s: 1, duration_s: 1000, gpus: 4, cpu_cores: 1, memory_gib: 1}\n"
         "  - {name: e, submit_s: 1100, duration_s: 100000, gpus: 8, cpu_cores: 1, memory_gib: 1}\n"
         "  - {name: f, submit_s: 1200, duration_s: 5000, gpus: 8, cpu_cores: 1, memory_gib: 1}\n";
}
const std::string kThreeNodes =
    "generate: {total_gpus: 24, gpus_per_node: 8, nodes_per_asw_min: 3, nodes_per_asw_max: 3, seed: 1}";

TEST(Kai, ConsolidationMovesOneRunningPodOnceToMakeRoomForAPendingJob) {
  // f waits from 1200 s; one second later (KAI consolidates in the cycle after allocate fails)
  // the plan moves one of the half nodes' 4-GPU pods onto the other half node — one hop, no chain
  // — and f starts when the move is done, 60 s later (the eviction's grace), at 1261 s.
  auto r = RunScenarioText(Scenario(kThreeNodes, TwoHalfNodes(), kRecipe, 20000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "e"), 1100);
  EXPECT_EQ(StartOf(*r, "f"), 1261);
  EXPECT_EQ(r->metrics.at("migrations_completed_count"), 1);
  EXPECT_EQ(r->metrics.at("evictions_count"), 0);
}

TEST(Kai, WithoutConsolidationThePendingJobWaitsToTheEnd) {
  auto r = RunScenarioText(Scenario(kThreeNodes, TwoHalfNodes(), RecipeWithout(kConsolidation), 20000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "f"), -1);
  EXPECT_EQ(r->metrics.at("migrations_completed_count"), 0);
}

// Two queues, each deserving one 8-GPU node of a two-node cluster. Team a's two preemptible
// whole-node jobs take both nodes at 0 s (a borrows b's unused quota); b's whole-node job
// arrives at 100 s.
const std::string kTwoQueues =
    "queues:\n  - {name: a, guarantee: {gpus: 8}}\n  - {name: b, guarantee: {gpus: 8}}\n";
std::string BorrowThenReclaim() {
  return "  - {name: a1, queue: a, class: lp, duration_s: 5000, gpus: 8, cpu_cores: 1, memory_gib: 1}\n"
         "  - {name: a2, queue: a, class: lp, submit_s: 1, duration_s: 5000, gpus: 8, cpu_cores: 1, memory_gib: 1}\n"
         "  - {name: b1, queue: b, class: lp, submit_s: 100, duration_s: 1000, gpus: 8, cpu_cores: 1, memory_gib: 1}\n";
}
const std::string kTwoNodes =
    "generate: {total_gpus: 16, gpus_per_node: 8, nodes_per_asw_min: 2, nodes_per_asw_max: 2, seed: 1}";
// KAI's reclaim strategies as estuary's sharing keys (docs/peers.md): reclaim to the guarantee and
// rebalance to the fair share (both defaults), no cooldown, no hold on re-borrowing.
const std::string kFairShareSharing = ", sharing: {cooldown_s: 0, reborrow_s: 0}}";

TEST(Kai, AQueueUnderItsDeservedQuotaReclaimsWhatAnotherQueueBorrowed) {
  // b1 (8 GPUs) keeps b within its deserved 8 (GuaranteeDeservedQuota), and a holds 16 of its 8:
  // one of a's jobs is evicted (a keeps its 8) and b1 starts after the 60 s grace, at 160 s. The
  // evicted job waits; nothing else is evicted (a is at its quota, b within its own).
  std::string conf = kRecipe;
  conf.replace(conf.size() - 1, 1, kFairShareSharing);
  auto r = RunScenarioText(Scenario(kTwoNodes, BorrowThenReclaim(), conf, 8000, kTwoQueues));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "a1"), 0);
  EXPECT_EQ(StartOf(*r, "a2"), 1);
  EXPECT_EQ(StartOf(*r, "b1"), 160);
  EXPECT_EQ(r->metrics.at("evictions_count"), 1);
}

TEST(Kai, ReclaimTakesFromTheQueueFurthestAboveItsFairShare) {
  // Five 8-GPU nodes; guarantees a 8, b 8, c 24. b's three whole-node jobs and a's two fill the
  // cluster at 0-4 s; c1 (8 GPUs) arrives at 100 s, within c's guarantee. Fair shares over the
  // demand (a 16, b 24, c 8): guarantees a 8, b 8, c 8; the other 16 GPUs split by weight, 8 to
  // a and 8 to b: a 16, b 16, c 8. b holds 24, 8 above its share; a holds exactly its share. The
  // victim is one of b's jobs (KAI's reversed queue order: the most saturated queue first; a
  // queue-name order would pick a), and c1 starts at 100 + 60 = 160 s.
  const std::string queues =
      "queues:\n  - {name: a, guarantee: {gpus: 8}}\n  - {name: b, guarantee: {gpus: 8}}\n"
      "  - {name: c, guarantee: {gpus: 24}}\n";
  std::string jobs;
  int at = 0;
  for (const char* j : {"a1", "a2", "b1", "b2", "b3"}) {
    jobs += std::string("  - {name: ") + j + ", queue: " + std::string(1, j[0]) + ", class: lp, submit_s: " +
            std::to_string(at++) + ", duration_s: 50000, gpus: 8, cpu_cores: 1, memory_gib: 1}\n";
  }
  jobs += "  - {name: c1, queue: c, class: lp, submit_s: 100, duration_s: 1000, gpus: 8, cpu_cores: 1, memory_gib: 1}\n";
  const std::string five_nodes =
      "generate: {total_gpus: 40, gpus_per_node: 8, nodes_per_asw_min: 5, nodes_per_asw_max: 5, seed: 1}";
  std::string conf = kRecipe;
  conf.replace(conf.size() - 1, 1, kFairShareSharing);
  auto r = RunScenarioText(Scenario(five_nodes, jobs, conf, 1000, queues));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "c1"), 160);
  EXPECT_EQ(r->metrics.at("evictions_count"), 1);
  int waiting_a = 0, waiting_b = 0;
  for (const SimJobRecord& j : r->jobs) {
    if (SimJobStatusText(j) != "pending") continue;
    waiting_a += j.name[0] == 'a';
    waiting_b += j.name[0] == 'b';
  }
  EXPECT_EQ(waiting_a, 0);
  EXPECT_EQ(waiting_b, 1);
}

TEST(Kai, ThePriorityDocsExampleAHigherPriorityPodPreemptsALowerOneOfItsQueue) {
  // docs/priority/README.md: train-pod (priority 50, preemptible) runs; build-pod (100) arrives
  // and only one of them fits; train-pod is preempted. KAI's example makes room scarce with a
  // queue limit of 1 GPU; here the cluster has one GPU (the engine does not preempt for a queue's
  // limit: docs/peers.md, kai, "Left out"). estuary's classes: train -> lp, build -> hp-training
  // (only HP jobs preempt in the engine). build starts after the 60 s grace: 10 + 60 = 70 s.
  const std::string queues = "queues:\n  - {name: test, guarantee: {gpus: 1}}\n";
  const std::string jobs =
      "  - {name: train, queue: test, class: lp, duration_s: 5000, gpus: 1, cpu_cores: 1, memory_gib: 1}\n"
      "  - {name: build, queue: test, class: hp-training, submit_s: 10, duration_s: 100, gpus: 1, cpu_cores: 1, "
      "memory_gib: 1}\n";
  const std::string one_gpu =
      "generate: {total_gpus: 1, gpus_per_node: 1, nodes_per_asw_min: 1, nodes_per_asw_max: 1, seed: 1}";
  auto r = RunScenarioText(Scenario(one_gpu, jobs, kRecipe, 2000, queues));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "train"), 0);
  EXPECT_EQ(StartOf(*r, "build"), 70);
  EXPECT_EQ(r->metrics.at("evictions_count"), 1);
}

TEST(Kai, TheRecipeParsesIntoItsKeys) {
  auto s = ParseScenario("name: t\ncluster:\n  spec: c.yaml\njobs:\n  - {name: j, gpus: 1}\nconfigurations:\n  - " +
                             kRecipe + "\n",
                         "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  const SchedulerConfig& c = s->configurations[0];
  EXPECT_EQ(c.policy, "kai-binpack");
  EXPECT_TRUE(c.priority_queue);
  EXPECT_FALSE(c.align);
  EXPECT_TRUE(c.topology);
  EXPECT_TRUE(c.preempt);
  EXPECT_EQ(c.victims, VictimSelection::kEstuary);
  EXPECT_EQ(c.preemptor_min_priority, 0);  // any pending job preempts lower priorities of its queue
  EXPECT_TRUE(c.defrag.enabled);
  EXPECT_EQ(c.defrag.interval_s, 0);
  EXPECT_EQ(c.defrag.trigger_after_s, 1);
  EXPECT_EQ(c.defrag.plan.max_chain_depth, 0);  // one hop
  EXPECT_EQ(c.defrag.plan.max_rounds, 1);       // no task moves twice in a plan
  EXPECT_TRUE(c.absorb);  // KAI's elastic plugin: a running elastic job's extra pods start later
  EXPECT_FALSE(c.standby);
  EXPECT_FALSE(c.reserve.enabled);
}

}  // namespace
}  // namespace estuary
