// Kube's default preemption as estuary's victim selection (preempt_k8s.h,
// `preempt: {victims: k8s}`): the cases of kube-scheduler's documentation ("Pod Priority and
// Preemption": the scheduler looks for a node where removing lower-priority pods lets the pod
// fit, and picks the node whose victims are fewest and of the lowest priority) and of its
// pickOneNodeForPreemption criteria, worked out by hand on tiny 8-GPU clusters. The state is not
// changed by a plan; each test checks ClusterState::CheckInvariants() on it.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "sched/actions/preempt.h"
#include "tests/testing/fixtures.h"
#include "tests/testing/preempt_cluster.h"

namespace estuary {
namespace {

using testing::Req;
using Names = std::set<std::string>;

constexpr int64_t kNow = 10000;
constexpr int32_t kHp = 800;

struct Cluster : testing::PreemptCluster {
  static Cluster Flat(int nodes) { return Cluster(std::vector<std::string>(nodes, "")); }
  using PreemptCluster::PreemptCluster;

  // A waiting gang at HP priority.
  JobId Gang(const std::string& name, int replicas, TaskRequest req, bool required_asw = false) {
    return PreemptCluster::Gang(name, replicas, req, kHp, required_asw);
  }
  PreemptionPlan Kube(JobId j) const {
    AllocateOptions o;
    o.topology = false;
    o.align = false;
    o.victims = VictimSelection::kKube;
    const PreemptionPlan p = PreemptAction::Plan(c.state, j, kNow, o);
    EXPECT_TRUE(c.state.CheckInvariants().ok());
    return p;
  }
};

const TaskRequest kFour = Req().Cpu(1000).Gpus(4);
const TaskRequest kEight = Req().Cpu(1000).Gpus(8);

TEST(KubePreemption, TheNodeWhoseHighestVictimHasTheLowestPriorityWinsEvenWithMoreVictims) {
  // n0: one 8-GPU task of priority 300. n1: two 4-GPU tasks of priority 100 and 200. Criterion 2
  // (lowest highest-victim priority): n1's highest is 200 < 300, though it needs two victims.
  Cluster g = Cluster::Flat(2);
  g.Run("p300", {0}, 8, 300);
  g.Run("p100", {1}, 4, 100);
  g.Run("p200", {1}, 4, 200);
  const PreemptionPlan p = g.Kube(g.Gang("hp", 1, kEight));
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Jobs(p), (Names{"p100", "p200"}));
  EXPECT_EQ(g.Nodes(p), (std::vector<std::string>{"n1"}));
}

TEST(KubePreemption, AmongEqualHighestPrioritiesTheShiftedPrioritySumMakesFewerVictimsWin) {
  // n0: one 8-GPU task of priority 100. n1: two 4-GPU tasks of priority 100 and 50. Highest
  // victim priority ties at 100; sums of (priority + 2^31): n0 100 + 2^31, n1 150 + 2^32 — the
  // shift makes the single victim the smaller sum although 100 > 50 + 0 per victim.
  Cluster g = Cluster::Flat(2);
  g.Run("solo", {0}, 8, 100);
  g.Run("a", {1}, 4, 100);
  g.Run("b", {1}, 4, 50);
  const PreemptionPlan p = g.Kube(g.Gang("hp", 1, kEight));
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Jobs(p), (Names{"solo"}));
  EXPECT_EQ(g.Nodes(p), (std::vector<std::string>{"n0"}));
}

TEST(KubePreemption, ReprieveKeepsTheMoreImportantTaskWhenEvictingTheOtherMakesRoom) {
  // n0 (the only node): a (priority 200, 4 GPUs) and b (priority 100, 4 GPUs). A 4-GPU pod: both
  // removed, then a (more important) is re-added and the pod still fits; b re-added, it does not:
  // b is the only victim.
  Cluster g = Cluster::Flat(1);
  g.Run("a", {0}, 4, 200);
  g.Run("b", {0}, 4, 100);
  const PreemptionPlan p = g.Kube(g.Gang("hp", 1, kFour));
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Jobs(p), (Names{"b"}));
}

// A filter's budgets (VictimFilter::take: what the victims' queues hold above their
// entitlements, first asked first served) admit the least important tasks first, the order kube
// evicts in, not the order the node's tasks were bound in: with a budget for one 4-GPU victim,
// p100 goes (as without budgets: reprieve keeps p200), although p200 was bound first. Before,
// p200 took the budget and went.
TEST(KubePreemption, ABudgetForOneVictimAdmitsTheLeastImportantTaskWhateverTheBindOrder) {
  Cluster g = Cluster::Flat(1);
  g.Run("p200", {0}, 4, 200);
  g.Run("p100", {0}, 4, 100);
  const PreemptionPlan p = g.PlanWithBudget(g.Gang("hp", 1, kFour), kNow, VictimSelection::kKube, 4000);
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Jobs(p), (Names{"p100"}));
}

TEST(KubePreemption, ReprieveGoesByPriorityNotByCostSoTheYoungerHigherTaskIsKept) {
  // n0: old (priority 100, started at 0) and young (priority 200, started just now), 4 GPUs each.
  // Estuary's cost order would evict young (no work lost); kube reprieves the more important
  // (priority 200) first and evicts old, ten thousand seconds of work.
  Cluster g = Cluster::Flat(1);
  g.Run("old", {0}, 4, 100, 0);
  g.Run("young", {0}, 4, 200, kNow);
  const PreemptionPlan p = g.Kube(g.Gang("hp", 1, kFour));
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Jobs(p), (Names{"old"}));
  EXPECT_EQ(p.cost, 4000 * kNow);
}

TEST(KubePreemption, WithEqualVictimsTheNodeWhoseVictimStartedLatestWins) {
  // One 8-GPU victim of priority 100 on each node, started at 1000, 5000 and 3000: criterion 5
  // picks the latest start, n1.
  Cluster g = Cluster::Flat(3);
  g.Run("s1000", {0}, 8, 100, 1000);
  g.Run("s5000", {1}, 8, 100, 5000);
  g.Run("s3000", {2}, 8, 100, 3000);
  const PreemptionPlan p = g.Kube(g.Gang("hp", 1, kEight));
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Jobs(p), (Names{"s5000"}));
  EXPECT_EQ(g.Nodes(p), (std::vector<std::string>{"n1"}));
}

TEST(KubePreemption, AFullTieGoesToTheFirstNode) {
  Cluster g = Cluster::Flat(3);
  for (int i = 0; i < 3; ++i) g.Run("v" + std::to_string(i), {i}, 8, 100, 1000);
  const PreemptionPlan p = g.Kube(g.Gang("hp", 1, kEight));
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Nodes(p), (std::vector<std::string>{"n0"}));
}

TEST(KubePreemption, AGangPreemptsPodByPodAndAVictimJobGoesWholeFreeingItsOtherNodes) {
  // A 3-replica whole-node gang. x (priority 100) spans n0 and n1; y (priority 50) holds n2;
  // n3 is free. Replica 1 takes n3 without preemption; replica 2 preempts on n2 (lowest victim
  // priority, y); replica 3 preempts x on n0 (n0 and n1 tie; the first node) — x goes whole, so
  // n1 is freed too though no replica needs it.
  Cluster g = Cluster::Flat(4);
  g.Run("x", {0, 1}, 8, 100);
  g.Run("y", {2}, 8, 50);
  const PreemptionPlan p = g.Kube(g.Gang("hp", 3, kEight));
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Jobs(p), (Names{"x", "y"}));
  EXPECT_EQ(g.Nodes(p), (std::vector<std::string>{"n3", "n2", "n0"}));
  EXPECT_EQ(p.evict.size(), 3u);
}

TEST(KubePreemption, AGangIsAllOrNothingAndEvictsNothingWhenOneReplicaFindsNoNode) {
  // Two whole-node replicas; n0 holds preemptible LP work, n1 work of higher priority than the
  // gang and n2 non-preemptible work: the second replica finds no node, so nothing is evicted.
  Cluster g = Cluster::Flat(3);
  g.Run("lp", {0}, 8, 100);
  g.Run("higher", {1}, 8, kHp + 100);
  g.Run("pinned", {2}, 8, 100, 0, /*preemptible=*/false);
  const PreemptionPlan p = g.Kube(g.Gang("hp", 2, kEight));
  EXPECT_FALSE(p.feasible);
  EXPECT_TRUE(p.evict.empty());
  EXPECT_TRUE(p.evicted_jobs.empty());
  EXPECT_TRUE(p.nodes.empty());
  EXPECT_NE(p.reason.find("replica 2 of 2"), std::string::npos) << p.reason;
}

TEST(KubePreemption, AJobThatFitsOnIdleCapacityEvictsNothing) {
  Cluster g = Cluster::Flat(2);
  g.Run("lp", {0}, 8, 100);
  const PreemptionPlan p = g.Kube(g.Gang("hp", 1, kEight));
  EXPECT_TRUE(p.feasible);
  EXPECT_TRUE(p.evict.empty());
  EXPECT_EQ(g.Nodes(p), (std::vector<std::string>{"n1"}));
}

TEST(KubePreemption, AnElasticVictimAboveItsMinLosesOnlyThePodsOnTheChosenNode) {
  // e (priority 100, min 1) runs e-0 and e-1 on n0 and e-2 on n1, 4 GPUs each; n1 also holds r
  // (priority 200). A whole-node replica: n0's victims are e-0 and e-1 (highest 100), n1's e-2
  // and r (highest 200): n0. e keeps e-2 (1 >= min): it shrinks to 1, losing no work.
  Cluster g = Cluster::Flat(2);
  const JobId e = g.Run("e", {0, 0, 1}, 4, 100, 0, true, /*min=*/1);
  g.Run("r", {1}, 4, 200);
  const PreemptionPlan p = g.Kube(g.Gang("hp", 1, kEight));
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_TRUE(p.evicted_jobs.empty());
  EXPECT_EQ(p.shrunk, (std::vector<std::pair<JobId, int32_t>>{{e, 1}}));
  EXPECT_EQ(p.evict.size(), 2u);
  EXPECT_EQ(p.cost, 0);
  EXPECT_EQ(g.Nodes(p), (std::vector<std::string>{"n0"}));
}

TEST(KubePreemption, AnElasticVictimThatWouldFallBelowItsMinGoesWhole) {
  // As above with min 2: after e-0, e keeps 2; e-1 would leave 1 < 2, so e goes whole (e-2 too).
  Cluster g = Cluster::Flat(2);
  g.Run("e", {0, 0, 1}, 4, 100, 0, true, /*min=*/2);
  g.Run("r", {1}, 4, 200);
  const PreemptionPlan p = g.Kube(g.Gang("hp", 1, kEight));
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Jobs(p), (Names{"e"}));
  EXPECT_TRUE(p.shrunk.empty());
  EXPECT_EQ(p.evict.size(), 3u);
}

TEST(KubePreemption, EvictsMoreThanEstuarysReclaimWhenAVictimSpansNodes) {
  // The gang case above under estuary's own Reclaim: its greedy also takes y first (lowest
  // priority), then x; its pruning then drops y, since x alone frees n0 and n1 — one victim job
  // where kube, deciding node by node, evicts two.
  Cluster g = Cluster::Flat(4);
  g.Run("x", {0, 1}, 8, 100);
  g.Run("y", {2}, 8, 50);
  const JobId hp = g.Gang("hp", 3, kEight);
  EXPECT_EQ(g.Jobs(g.Kube(hp)), (Names{"x", "y"}));
  AllocateOptions o;
  o.topology = false;
  const PreemptionPlan own = PreemptAction::Plan(g.c.state, hp, kNow, o);
  ASSERT_TRUE(own.feasible) << own.reason;
  EXPECT_EQ(g.Jobs(own), (Names{"x"}));
}

}  // namespace
}  // namespace estuary
