// Volcano's preempt action as estuary's victim selection (preempt_volcano.h,
// `preempt: {victims: volcano}`): the rules of pkg/scheduler/actions/preempt/preempt.go as
// docs/peers.md reads them — nodes in the preemptor's score order, the first node whose victims
// and idle capacity hold the task, victims evicted lowest priority first until it fits, no
// reprieve, all-or-nothing per job — worked out by hand on tiny 8-GPU clusters. The state is not
// changed by a plan; each test checks ClusterState::CheckInvariants() on it.
#include <gtest/gtest.h>

#include <map>
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
  PreemptionPlan Volcano(JobId j, const std::map<int, int64_t>& scores = {}, bool topology = false) const {
    AllocateOptions o;
    o.topology = topology;
    o.align = false;
    o.victims = VictimSelection::kVolcano;
    VictimFilter f;
    if (!scores.empty()) {
      f.node_score = [scores](const Node& n) {
        const auto it = scores.find(static_cast<int>(n.id.value()));
        return it == scores.end() ? int64_t{0} : it->second;
      };
    }
    const PreemptionPlan p = PreemptAction::Plan(c.state, j, kNow, o, {}, f);
    EXPECT_TRUE(c.state.CheckInvariants().ok());
    return p;
  }
};

const TaskRequest kSix = Req().Cpu(1000).Gpus(6);
const TaskRequest kFour = Req().Cpu(1000).Gpus(4);
const TaskRequest kEight = Req().Cpu(1000).Gpus(8);

TEST(VolcanoPreemption, TheBestScoredNodeIsUsedEvenWhenAnotherHasLowerPriorityVictims) {
  // n0 (score 5) holds low (priority 100), n1 (score 9) holds mid (priority 300), one 8-GPU task
  // each. Volcano walks the nodes by score: n1 first, whose victim makes room — mid goes, although
  // kube (lowest highest-victim priority) would take n0.
  Cluster g = Cluster::Flat(2);
  g.Run("low", {0}, 8, 100);
  g.Run("mid", {1}, 8, 300);
  const JobId hp = g.Gang("hp", 1, kEight);
  const PreemptionPlan p = g.Volcano(hp, {{0, 5}, {1, 9}});
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Jobs(p), (Names{"mid"}));
  EXPECT_EQ(g.Nodes(p), (std::vector<std::string>{"n1"}));
  // Without scores the nodes go in id order: n0, and low goes.
  const PreemptionPlan by_id = g.Volcano(hp);
  ASSERT_TRUE(by_id.feasible) << by_id.reason;
  EXPECT_EQ(g.Jobs(by_id), (Names{"low"}));
}

TEST(VolcanoPreemption, VictimsGoLowestPriorityFirstUntilItFitsWithNoReprieve) {
  // n0: a (priority 100, 2 GPUs) and b (priority 200, 6 GPUs). A 6-GPU task: a goes first (2
  // free: not enough), then b (8 free): both are evicted. Kube would re-add a (the 6 GPUs b
  // frees suffice) and evict b alone.
  Cluster g = Cluster::Flat(1);
  g.Run("a", {0}, 2, 100);
  g.Run("b", {0}, 6, 200);
  const PreemptionPlan p = g.Volcano(g.Gang("hp", 1, kSix));
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Jobs(p), (Names{"a", "b"}));
}

TEST(VolcanoPreemption, ItStopsEvictingOnceTheTaskFits) {
  // n0: a (priority 100) and b (priority 200), 4 GPUs each; a 4-GPU task: a goes, the task fits,
  // b stays.
  Cluster g = Cluster::Flat(1);
  g.Run("a", {0}, 4, 100);
  g.Run("b", {0}, 4, 200);
  const PreemptionPlan p = g.Volcano(g.Gang("hp", 1, kFour));
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Jobs(p), (Names{"a"}));
}

TEST(VolcanoPreemption, AmongEqualPrioritiesTheJobCreatedLastGoesFirst) {
  // n0: old (created first, started at 0) and young (created second, started now), priority 100,
  // 4 GPUs each: the reverse of JobOrderFn's creation order evicts young.
  Cluster g = Cluster::Flat(1);
  g.Run("old", {0}, 4, 100, 0);
  g.Run("young", {0}, 4, 100, kNow);
  const PreemptionPlan p = g.Volcano(g.Gang("hp", 1, kFour));
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Jobs(p), (Names{"young"}));
  EXPECT_EQ(p.cost, 0);  // it started now: no work lost
}

// A filter's budgets (VictimFilter::take: what the victims' queues hold above their
// entitlements, first asked first served) admit victims in Volcano's victim order, not in the
// order the node's tasks were bound in: with a budget for one 4-GPU victim, young (created last)
// is the one, as without budgets, although old was bound first. Before, the node's list was asked
// in bind order: old took the budget and went (and an engine rebuilt from the service's records,
// binding its jobs again in job order, could choose otherwise than the engine before it).
TEST(VolcanoPreemption, ABudgetForOneVictimAdmitsTheJobVolcanoEvictsFirstWhateverTheBindOrder) {
  Cluster g = Cluster::Flat(1);
  g.Run("old", {0}, 4, 100, 0);
  g.Run("young", {0}, 4, 100, kNow);
  const PreemptionPlan p = g.PlanWithBudget(g.Gang("hp", 1, kFour), kNow, VictimSelection::kVolcano, 4000);
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Jobs(p), (Names{"young"}));
}

TEST(VolcanoPreemption, AGangTakesTheNodesInScoreOrderAndAFreeNodeCostsNoEviction) {
  // A 2-replica whole-node gang; n0 (score 9) holds x (priority 100), n1 (score 5) is free, n2
  // (score 1) holds y (priority 50). Replica 1: n0 first — its victim x goes; replica 2: n0 is
  // now full, n1 holds it without eviction. y stays, although its priority is the lowest.
  Cluster g = Cluster::Flat(3);
  g.Run("x", {0}, 8, 100);
  g.Run("y", {2}, 8, 50);
  const PreemptionPlan p = g.Volcano(g.Gang("hp", 2, kEight), {{0, 9}, {1, 5}, {2, 1}});
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Jobs(p), (Names{"x"}));
  EXPECT_EQ(g.Nodes(p), (std::vector<std::string>{"n0", "n1"}));
}

TEST(VolcanoPreemption, AVictimJobGoesWholeAndFreesItsOtherNodesForTheNextReplicas) {
  // x (priority 100) spans n0 and n1; a 2-replica whole-node gang: replica 1 evicts x on n0,
  // which frees n1 too, where replica 2 goes without another eviction.
  Cluster g = Cluster::Flat(3);
  g.Run("x", {0, 1}, 8, 100);
  g.Run("z", {2}, 8, 50);
  const PreemptionPlan p = g.Volcano(g.Gang("hp", 2, kEight));
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Jobs(p), (Names{"x"}));
  EXPECT_EQ(g.Nodes(p), (std::vector<std::string>{"n0", "n1"}));
  EXPECT_EQ(p.evict.size(), 2u);
}

TEST(VolcanoPreemption, AGangIsAllOrNothingAndEvictsNothingWhenOneReplicaFindsNoNode) {
  // n0 holds LP work, n1 work of higher priority than the gang, n2 non-preemptible work: the
  // second replica finds no node, and the statement is discarded.
  Cluster g = Cluster::Flat(3);
  g.Run("lp", {0}, 8, 100);
  g.Run("higher", {1}, 8, kHp + 100);
  g.Run("pinned", {2}, 8, 100, 0, /*preemptible=*/false);
  const PreemptionPlan p = g.Volcano(g.Gang("hp", 2, kEight));
  EXPECT_FALSE(p.feasible);
  EXPECT_TRUE(p.evict.empty());
  EXPECT_TRUE(p.evicted_jobs.empty());
  EXPECT_TRUE(p.nodes.empty());
  EXPECT_NE(p.reason.find("replica 2 of 2"), std::string::npos) << p.reason;
}

TEST(VolcanoPreemption, ARequiredLevelTakesTheFirstDomainThatHoldsTheWholeGangAndUndoesTheOthers) {
  // ASW a: n0 holds a1 (priority 100), n1 non-preemptible work; ASW b: n2 and n3 hold b2, b3
  // (priority 100). A 2-node gang that requires one ASW: in a, replica 1 evicts a1 on n0 but
  // replica 2 finds no node, so that try is undone; b holds both. a1 is not evicted.
  Cluster g({"a", "a", "b", "b"});
  g.Run("a1", {0}, 8, 100);
  g.Run("pinned", {1}, 8, 100, 0, /*preemptible=*/false);
  g.Run("b2", {2}, 8, 100);
  g.Run("b3", {3}, 8, 100);
  const PreemptionPlan p = g.Volcano(g.Gang("hp", 2, kEight, /*required_asw=*/true), {}, /*topology=*/true);
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(g.Jobs(p), (Names{"b2", "b3"}));
  EXPECT_EQ(g.Nodes(p), (std::vector<std::string>{"n2", "n3"}));
  EXPECT_EQ(p.evict.size(), 2u);
}

TEST(VolcanoPreemption, AnElasticVictimAboveItsMinLosesOnlyTheTaskEvicted) {
  // e (priority 100, min 1) runs e-0 on n0 and e-1 on n1, 8 GPUs each: a whole-node task evicts
  // e-0 alone (e keeps 1 >= min) and e shrinks to 1, losing no work.
  Cluster g = Cluster::Flat(2);
  const JobId e = g.Run("e", {0, 1}, 8, 100, 0, true, /*min=*/1);
  const PreemptionPlan p = g.Volcano(g.Gang("hp", 1, kEight));
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_TRUE(p.evicted_jobs.empty());
  EXPECT_EQ(p.shrunk, (std::vector<std::pair<JobId, int32_t>>{{e, 1}}));
  EXPECT_EQ(p.evict.size(), 1u);
  EXPECT_EQ(p.cost, 0);
}

}  // namespace
}  // namespace estuary
