// MigrateToFit (migration on failure, issue 5): exact plans on hand-built clusters, the move
// bound, plans never targeting the node they empty, applying a plan (invariants, the arriving task
// then binds at the planned GPUs), determinism, and a randomized property test.
#include "sched/actions/migrate.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/rng.h"
#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::ClusterBuilder;
using testing::Gpus;
using testing::Idx;
using testing::Place;
using testing::Req;

std::vector<int> AsVector(const GpuIndices& g) { return std::vector<int>(g.begin(), g.end()); }

// Applies `plan` move by move (Unbind, then Bind at the planned GPUs), checking every move leaves
// the host for another node (or is an ejection that the next move relies on), that the target had room while the source still held the task
// (make-before-break), and every invariant after each step; then binds the arriving task.
::testing::AssertionResult Apply(ClusterState& s, TaskId arriving, const MigrationPlan& plan) {
  if (!plan.feasible) return ::testing::AssertionFailure() << "plan infeasible";
  for (size_t i = 0; i < plan.moves.size(); ++i) {
    const MigrationMove& m = plan.moves[i];
    const Task& t = s.task(m.task);
    if (t.state != TaskState::kBound || t.node != m.from) return ::testing::AssertionFailure() << "move " << i << ": not at from";
    // A move leaves the host, or is an ejection making room on its source for the next move.
    if (m.ejection) {
      if (m.from == plan.node) return ::testing::AssertionFailure() << "move " << i << ": ejection from the host";
      if (i + 1 >= plan.moves.size() || plan.moves[i + 1].to != m.from) {
        return ::testing::AssertionFailure() << "move " << i << ": ejection not followed by a move onto its source";
      }
    } else if (m.from != plan.node) {
      return ::testing::AssertionFailure() << "move " << i << ": not from the host";
    }
    if (m.to == plan.node || m.to == m.from) return ::testing::AssertionFailure() << "move " << i << ": onto the host";
    // Make-before-break: the target has room for the task on its own.
    const Node& to = s.node(m.to);
    if (to.cpu_free < t.req.cpu_milli || to.mem_free < t.req.mem_mib) {
      return ::testing::AssertionFailure() << "move " << i << ": no CPU/memory at the target before the source frees";
    }
    for (uint8_t g : m.gpus) {
      if (to.gpu_free[g] < t.req.gpu_milli) return ::testing::AssertionFailure() << "move " << i << ": GPU " << int{g} << " full";
    }
    s.Unbind(m.task);
    if (!s.CanBind(m.task, m.to, m.gpus)) return ::testing::AssertionFailure() << "move " << i << ": cannot bind";
    s.Bind(m.task, m.to, m.gpus);
    Status st = s.CheckInvariants();
    if (!st.ok()) return ::testing::AssertionFailure() << "move " << i << ": " << st.message();
  }
  if (!s.CanBind(arriving, plan.node, plan.gpus)) return ::testing::AssertionFailure() << "arriving task does not fit";
  s.Bind(arriving, plan.node, plan.gpus);
  Status st = s.CheckInvariants();
  if (!st.ok()) return ::testing::AssertionFailure() << st.message();
  return ::testing::AssertionSuccess();
}

TEST(MigrateToFit, ATwoGpuTaskFitsAfterOneOneGpuTaskMovesToAnotherNode) {
  ClusterBuilder c;
  const NodeId n0 = c.AddNode("n0", Gpus(2)), n1 = c.AddNode("n1", Gpus(2));
  const TaskId a = Place(c, "a", Req().Gpus(1), n0, Idx({0}));
  Place(c, "b", Req().Gpus(1), n1, Idx({0}));
  const TaskId big = c.Submit("big", Req().Gpus(2));

  const MigrationPlan plan = MigrateToFit::Plan(c.state, big, MigrateOptions());
  ASSERT_TRUE(plan.feasible);
  ASSERT_EQ(plan.moves.size(), 1u);
  // Both hosts cost one 1-GPU move; node order picks n0.
  EXPECT_EQ(plan.moves[0].task, a);
  EXPECT_EQ(plan.moves[0].from, n0);
  EXPECT_EQ(plan.moves[0].to, n1);
  EXPECT_EQ(AsVector(plan.moves[0].gpus), std::vector<int>({1}));
  EXPECT_EQ(plan.node, n0);
  EXPECT_EQ(AsVector(plan.gpus), std::vector<int>({0, 1}));
  EXPECT_EQ(plan.moved_gpu_milli, 1000);
  EXPECT_TRUE(Apply(c.state, big, plan));
}

TEST(MigrateToFit, PrefersMovingTheLeastGpuMilli) {
  ClusterBuilder c;
  const NodeId n0 = c.AddNode("n0", Gpus(2)), n1 = c.AddNode("n1", Gpus(2));
  Place(c, "whole", Req().Gpus(1), n0, Idx({0}));
  const TaskId half = Place(c, "half", Req().SharedGpu(500), n1, Idx({0}));
  const TaskId big = c.Submit("big", Req().Gpus(2));

  const MigrationPlan plan = MigrateToFit::Plan(c.state, big, MigrateOptions());
  ASSERT_TRUE(plan.feasible);
  ASSERT_EQ(plan.moves.size(), 1u);
  EXPECT_EQ(plan.moves[0].task, half);
  EXPECT_EQ(plan.moves[0].to, n0);
  EXPECT_EQ(AsVector(plan.moves[0].gpus), std::vector<int>({1}));
  EXPECT_EQ(plan.node, n1);
  EXPECT_EQ(plan.moved_gpu_milli, 500);
  EXPECT_TRUE(Apply(c.state, big, plan));
}

// n0 holds a 1-GPU task that has nowhere to go; n1 must lose both of its tasks: the 1-GPU one to
// n0's free GPU and the 300m one to n2's GPU (the tightest fit).
class TwoMovesNeeded : public ::testing::Test {
 protected:
  void SetUp() override {
    n0 = c.AddNode("n0", Gpus(2));
    n1 = c.AddNode("n1", Gpus(2));
    n2 = c.AddNode("n2", Gpus(1));
    Place(c, "a", Req().Gpus(1), n0, Idx({1}));
    b = Place(c, "b", Req().Gpus(1), n1, Idx({0}));
    small = Place(c, "small", Req().SharedGpu(300), n1, Idx({1}));
    Place(c, "d", Req().SharedGpu(600), n2, Idx({0}));
    big = c.Submit("big", Req().Gpus(2));
  }
  ClusterBuilder c;
  NodeId n0, n1, n2;
  TaskId b, small, big;
};

TEST_F(TwoMovesNeeded, MovesBothTasksLargestFirst) {
  // Direct moves only (the default). With a chain, host n0 ties at the same cost: small n1 -> n2
  // as an ejection, then a n0 -> n1 — see ChainsMayTieWithDirectMoves.
  const MigrationPlan plan = MigrateToFit::Plan(c.state, big, MigrateOptions());
  ASSERT_TRUE(plan.feasible);
  ASSERT_EQ(plan.moves.size(), 2u);
  EXPECT_EQ(plan.moves[0].task, b);
  EXPECT_EQ(plan.moves[0].to, n0);
  EXPECT_EQ(AsVector(plan.moves[0].gpus), std::vector<int>({0}));
  EXPECT_EQ(plan.moves[1].task, small);
  EXPECT_EQ(plan.moves[1].to, n2);
  EXPECT_EQ(AsVector(plan.moves[1].gpus), std::vector<int>({0}));
  EXPECT_EQ(plan.node, n1);
  EXPECT_EQ(AsVector(plan.gpus), std::vector<int>({0, 1}));
  EXPECT_EQ(plan.moved_gpu_milli, 1300);
  EXPECT_TRUE(Apply(c.state, big, plan));
}

TEST_F(TwoMovesNeeded, ChainsMayTieWithDirectMoves) {
  // small leaves n1's GPU 1 for n2 (600m + 300m fit), making a whole GPU on n1 for a; n0 then has
  // both GPUs. Cost 1000 + 300 = 1300 milli and 2 moves, as the direct plan on n1; n0 wins the tie.
  MigrateOptions o;
  o.max_chain_depth = 1;
  const MigrationPlan plan = MigrateToFit::Plan(c.state, big, o);
  ASSERT_TRUE(plan.feasible);
  ASSERT_EQ(plan.moves.size(), 2u);
  EXPECT_EQ(plan.moves[0].task, small);
  EXPECT_EQ(plan.moves[0].to, n2);
  EXPECT_TRUE(plan.moves[0].ejection);
  EXPECT_EQ(plan.moves[1].to, n1);
  EXPECT_EQ(AsVector(plan.moves[1].gpus), std::vector<int>({1}));
  EXPECT_EQ(plan.node, n0);
  EXPECT_EQ(plan.moved_gpu_milli, 1300);
  EXPECT_EQ(plan.ejections, 1);
  EXPECT_TRUE(Apply(c.state, big, plan));
}

TEST_F(TwoMovesNeeded, HasNoPlanWhenMaxMovesIsTooSmall) {
  MigrateOptions o;
  o.max_moves = 1;
  const MigrationPlan plan = MigrateToFit::Plan(c.state, big, o);
  EXPECT_FALSE(plan.feasible);
  EXPECT_TRUE(plan.moves.empty());
}

TEST_F(TwoMovesNeeded, IsDeterministic) {
  const MigrationPlan a = MigrateToFit::Plan(c.state, big, MigrateOptions());
  const MigrationPlan b2 = MigrateToFit::Plan(c.state, big, MigrateOptions());
  ASSERT_EQ(a.moves.size(), b2.moves.size());
  for (size_t i = 0; i < a.moves.size(); ++i) {
    EXPECT_EQ(a.moves[i].task, b2.moves[i].task);
    EXPECT_EQ(a.moves[i].to, b2.moves[i].to);
    EXPECT_EQ(AsVector(a.moves[i].gpus), AsVector(b2.moves[i].gpus));
  }
  EXPECT_EQ(a.node, b2.node);
  EXPECT_EQ(AsVector(a.gpus), AsVector(b2.gpus));
}

TEST(MigrateToFit, TwoMovesMayNotShareATargetBeyondItsRoom) {
  // n1's two 1-GPU tasks must both leave; n0 has room for only one of them, n2 for the other.
  ClusterBuilder c;
  const NodeId n0 = c.AddNode("n0", Gpus(1)), n1 = c.AddNode("n1", Gpus(2)), n2 = c.AddNode("n2", Gpus(1));
  const TaskId x = Place(c, "x", Req().Gpus(1), n1, Idx({0}));
  const TaskId y = Place(c, "y", Req().Gpus(1), n1, Idx({1}));
  const TaskId big = c.Submit("big", Req().Gpus(2));
  const MigrationPlan plan = MigrateToFit::Plan(c.state, big, MigrateOptions());
  ASSERT_TRUE(plan.feasible);
  ASSERT_EQ(plan.moves.size(), 2u);
  EXPECT_EQ(plan.moves[0].task, x);
  EXPECT_EQ(plan.moves[0].to, n0);
  EXPECT_EQ(plan.moves[1].task, y);
  EXPECT_EQ(plan.moves[1].to, n2);
  EXPECT_TRUE(Apply(c.state, big, plan));
}

TEST(MigrateToFit, CpuBoundTaskFitsAfterMovingACpuOnlyTaskForFree) {
  ClusterBuilder c;
  testing::NodeShape small = Gpus(1);
  small.cpu = 8000;
  const NodeId n0 = c.AddNode("n0", small), n1 = c.AddNode("n1", small);
  const TaskId cpu_hog = Place(c, "hog", Req().Cpu(6000), n0, GpuIndices());
  Place(c, "busy", Req().Gpus(1).Cpu(1000), n1, Idx({0}));
  const TaskId arriving = c.Submit("arriving", Req().SharedGpu(500).Cpu(4000));
  const MigrationPlan plan = MigrateToFit::Plan(c.state, arriving, MigrateOptions());
  ASSERT_TRUE(plan.feasible);
  ASSERT_EQ(plan.moves.size(), 1u);
  EXPECT_EQ(plan.moves[0].task, cpu_hog);
  EXPECT_EQ(plan.moves[0].to, n1);
  EXPECT_EQ(plan.node, n0);
  EXPECT_EQ(plan.moved_gpu_milli, 0);
  EXPECT_TRUE(Apply(c.state, arriving, plan));
}

// n0 holds a 1-GPU task `a` (4 cores) next to a free GPU; the 2-GPU arriving task needs both GPUs.
// a's only GPU target is n1's GPU, but n1's CPU is taken by a CPU-only hog (6 of 8 cores); the hog
// fits on the CPU-only node n2. So the chain is: hog n1 -> n2 (ejection), a n0 -> n1, arriving on
// n0. n1 cannot host the arriving task (one GPU); n2 has none.
class EjectionNeeded : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::NodeShape two = Gpus(2), one = Gpus(1);
    two.cpu = one.cpu = 8000;
    n0 = c.AddNode("n0", two);
    n1 = c.AddNode("n1", one);
    n2 = c.AddNode("n2", testing::CpuOnly(8000));
    a = Place(c, "a", Req().Gpus(1).Cpu(4000), n0, Idx({0}));
    hog = Place(c, "hog", Req().Cpu(6000), n1, GpuIndices());
    big = c.Submit("big", Req().Gpus(2).Cpu(2000));
  }
  ClusterBuilder c;
  NodeId n0, n1, n2;
  TaskId a, hog, big;
};

TEST_F(EjectionNeeded, EjectsTheCpuHogFirstThenMovesTheGpuTaskIntoItsRoom) {
  MigrateOptions o;
  o.max_chain_depth = 1;
  const MigrationPlan plan = MigrateToFit::Plan(c.state, big, o);
  ASSERT_TRUE(plan.feasible);
  ASSERT_EQ(plan.moves.size(), 2u);
  EXPECT_EQ(plan.moves[0].task, hog);
  EXPECT_EQ(plan.moves[0].from, n1);
  EXPECT_EQ(plan.moves[0].to, n2);
  EXPECT_TRUE(plan.moves[0].ejection);
  EXPECT_EQ(plan.moves[1].task, a);
  EXPECT_EQ(plan.moves[1].from, n0);
  EXPECT_EQ(plan.moves[1].to, n1);
  EXPECT_EQ(AsVector(plan.moves[1].gpus), std::vector<int>({0}));
  EXPECT_FALSE(plan.moves[1].ejection);
  EXPECT_EQ(plan.node, n0);
  EXPECT_EQ(AsVector(plan.gpus), std::vector<int>({0, 1}));
  EXPECT_EQ(plan.ejections, 1);
  EXPECT_EQ(plan.moved_gpu_milli, 1000);  // a's GPU; the hog holds none
  // Make-before-break in dependency order; invariants hold after every step.
  EXPECT_TRUE(Apply(c.state, big, plan));
  EXPECT_EQ(c.state.task(hog).node, n2);
  EXPECT_EQ(c.state.task(a).node, n1);
  EXPECT_EQ(c.state.task(big).node, n0);
}

TEST_F(EjectionNeeded, HasNoPlanWithoutChains) {
  MigrateOptions o;
  o.max_chain_depth = 0;
  EXPECT_FALSE(MigrateToFit::Plan(c.state, big, o).feasible);
}

TEST_F(EjectionNeeded, TheEjectionCountsAgainstMaxMoves) {
  MigrateOptions o;
  o.max_chain_depth = 1;
  o.max_moves = 1;
  EXPECT_FALSE(MigrateToFit::Plan(c.state, big, o).feasible);
}

TEST_F(EjectionNeeded, HasNoPlanWhenTheEjectedTaskHasNowhereToGo) {
  // Fill n2's CPU: the hog cannot leave n1, so a cannot go there.
  Place(c, "filler", Req().Cpu(3000), n2, GpuIndices());
  MigrateOptions o;
  o.max_chain_depth = 1;
  EXPECT_FALSE(MigrateToFit::Plan(c.state, big, o).feasible);
}

// A two-level chain: n2's CPU is taken by a second hog that must first go to n3 (where only it fits).
TEST_F(EjectionNeeded, ADeeperChainMovesInDependencyOrder) {
  const TaskId hog2 = Place(c, "hog2", Req().Cpu(5000), n2, GpuIndices());
  const NodeId n3 = c.AddNode("n3", testing::CpuOnly(5000));  // hog2 fits, the hog does not
  MigrateOptions o;
  o.max_moves = 3;
  o.max_chain_depth = 1;
  EXPECT_FALSE(MigrateToFit::Plan(c.state, big, o).feasible);
  o.max_chain_depth = 2;
  const MigrationPlan plan = MigrateToFit::Plan(c.state, big, o);
  ASSERT_TRUE(plan.feasible);
  ASSERT_EQ(plan.moves.size(), 3u);
  EXPECT_EQ(plan.moves[0].task, hog2);
  EXPECT_EQ(plan.moves[0].to, n3);
  EXPECT_EQ(plan.moves[1].task, hog);
  EXPECT_EQ(plan.moves[1].to, n2);
  EXPECT_EQ(plan.moves[2].task, a);
  EXPECT_EQ(plan.moves[2].to, n1);
  EXPECT_EQ(plan.ejections, 2);
  EXPECT_TRUE(Apply(c.state, big, plan));
}

TEST(MigrationMemo, AnswersForLargerRequestsUntilCapacityIsReleased) {
  ClusterBuilder c;
  const NodeId n0 = c.AddNode("n0", Gpus(1));
  const TaskId a = Place(c, "a", Req().Gpus(1).Cpu(1000), n0, Idx({0}));
  MigrationMemo memo;
  const TaskRequest small = Req().SharedGpu(500).Cpu(2000).r;
  EXPECT_FALSE(memo.KnownInfeasible(c.state, small));
  memo.RecordInfeasible(c.state, small);
  EXPECT_TRUE(memo.KnownInfeasible(c.state, small));
  EXPECT_TRUE(memo.KnownInfeasible(c.state, Req().SharedGpu(600).Cpu(2000).r));
  EXPECT_TRUE(memo.KnownInfeasible(c.state, Req().SharedGpu(500).Cpu(3000).Mem(small.mem_mib + 1).r));
  // Smaller in some dimension, or another GPU count: not answered.
  EXPECT_FALSE(memo.KnownInfeasible(c.state, Req().SharedGpu(400).Cpu(2000).r));
  EXPECT_FALSE(memo.KnownInfeasible(c.state, Req().SharedGpu(500).Cpu(1000).r));
  EXPECT_FALSE(memo.KnownInfeasible(c.state, Req().Gpus(2).Cpu(2000).r));
  EXPECT_EQ(memo.hits(), 3);
  // A bind only shrinks capacity: still remembered.
  Place(c, "b", Req().Cpu(1000), n0, GpuIndices());
  EXPECT_TRUE(memo.KnownInfeasible(c.state, small));
  // A release may make room: forgotten.
  c.state.Unbind(a);
  EXPECT_FALSE(memo.KnownInfeasible(c.state, small));
}

TEST(MigrateToFit, HasNoPlanWhenNothingCanMakeRoom) {
  ClusterBuilder c;
  const NodeId n0 = c.AddNode("n0", Gpus(1)), n1 = c.AddNode("n1", Gpus(1));
  Place(c, "a", Req().Gpus(1), n0, Idx({0}));
  Place(c, "b", Req().Gpus(1), n1, Idx({0}));
  EXPECT_FALSE(MigrateToFit::Plan(c.state, c.Submit("c", Req().Gpus(1)), MigrateOptions()).feasible);
  EXPECT_FALSE(MigrateToFit::Plan(c.state, c.Submit("d", Req().Gpus(2)), MigrateOptions()).feasible);
}

TEST(MigrateToFit, ValidateNamesTheBadOption) {
  MigrateOptions o;
  EXPECT_TRUE(MigrateToFit::Validate(o).ok());
  o.max_moves = 0;
  EXPECT_NE(MigrateToFit::Validate(o).message().find("max_moves"), std::string::npos);
  o.max_moves = 9;
  EXPECT_NE(MigrateToFit::Validate(o).message().find("max_moves"), std::string::npos);
  o = MigrateOptions();
  o.subset_budget = 0;
  EXPECT_NE(MigrateToFit::Validate(o).message().find("subset_budget"), std::string::npos);
  o = MigrateOptions();
  o.max_chain_depth = -1;
  EXPECT_NE(MigrateToFit::Validate(o).message().find("max_chain_depth"), std::string::npos);
  o.max_chain_depth = 3;
  EXPECT_NE(MigrateToFit::Validate(o).message().find("max_chain_depth"), std::string::npos);
  o = MigrateOptions();
  o.ejection_pairs = 0;
  EXPECT_NE(MigrateToFit::Validate(o).message().find("ejection_pairs"), std::string::npos);
}

// Random fragmented clusters: every plan empties only its host onto other nodes, applies cleanly
// move by move, and is the same when asked again.
TEST(MigrateToFit, RandomClustersYieldValidDeterministicPlans) {
  int feasible = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    Rng rng(seed);
    ClusterBuilder c;
    std::vector<NodeId> nodes;
    for (int i = 0; i < 8; ++i) nodes.push_back(c.AddNode("n" + std::to_string(i), Gpus(1 + static_cast<int>(rng.Uniform(4)))));
    for (int k = 0; k < 60; ++k) {
      Req r;
      switch (rng.Uniform(3)) {
        case 0: r.SharedGpu(100 * static_cast<MilliGpu>(1 + rng.Uniform(9))); break;
        case 1: r.Gpus(1 + static_cast<int>(rng.Uniform(2))); break;
        default: r.Cpu(4000); break;
      }
      r.Cpu(r.r.cpu_milli + 2000);
      const TaskId t = c.Submit("t" + std::to_string(k), r);
      const NodeId n = nodes[rng.Uniform(nodes.size())];
      const Node& node = c.state.node(n);
      GpuIndices g;
      if (r.r.NeedsGpu()) {
        for (int i = 0; i < node.spec.gpu_count && g.size < r.r.gpu_count; ++i) {
          if (node.gpu_free[i] >= r.r.gpu_milli) g.Push(i);
        }
      }
      if (c.state.CanBind(t, n, g)) c.state.Bind(t, n, g);
    }
    const TaskId arriving = c.Submit("arriving", Req().Gpus(1 + static_cast<int>(rng.Uniform(3))).Cpu(2000));
    MigrateOptions o;
    o.max_moves = 1 + static_cast<int32_t>(rng.Uniform(4));
    o.max_chain_depth = static_cast<int32_t>(rng.Uniform(3));
    const MigrationPlan plan = MigrateToFit::Plan(c.state, arriving, o);
    const MigrationPlan again = MigrateToFit::Plan(c.state, arriving, o);
    ASSERT_EQ(plan.feasible, again.feasible) << seed;
    if (!plan.feasible) continue;
    ++feasible;
    EXPECT_LE(static_cast<int32_t>(plan.moves.size()), o.max_moves) << seed;
    ASSERT_EQ(plan.moves.size(), again.moves.size()) << seed;
    EXPECT_EQ(plan.node, again.node) << seed;
    for (size_t i = 0; i < plan.moves.size(); ++i) {
      EXPECT_EQ(plan.moves[i].to, again.moves[i].to) << seed;
      EXPECT_NE(plan.moves[i].to, plan.node) << seed;
    }
    EXPECT_TRUE(Apply(c.state, arriving, plan)) << seed;
  }
  EXPECT_GT(feasible, 5);
}

}  // namespace
}  // namespace estuary
