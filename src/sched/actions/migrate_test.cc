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
using testing::Req;

TaskId Place(ClusterBuilder& c, const std::string& name, TaskRequest req, NodeId node, const GpuIndices& gpus) {
  const TaskId t = c.Submit(name, req);
  EXPECT_TRUE(c.state.CanBind(t, node, gpus)) << name;
  c.state.Bind(t, node, gpus);
  return t;
}

std::vector<int> AsVector(const GpuIndices& g) { return std::vector<int>(g.begin(), g.end()); }

// Applies `plan` move by move (Unbind, then Bind at the planned GPUs), checking every move leaves
// the host for another node, that the target had room while the source still held the task
// (make-before-break), and every invariant after each step; then binds the arriving task.
::testing::AssertionResult Apply(ClusterState& s, TaskId arriving, const MigrationPlan& plan) {
  if (!plan.feasible) return ::testing::AssertionFailure() << "plan infeasible";
  for (size_t i = 0; i < plan.moves.size(); ++i) {
    const MigrationMove& m = plan.moves[i];
    const Task& t = s.task(m.task);
    if (t.state != TaskState::kBound || t.node != m.from) return ::testing::AssertionFailure() << "move " << i << ": not at from";
    if (m.from != plan.node) return ::testing::AssertionFailure() << "move " << i << ": not from the host";
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
    o.max_moves = 1 + static_cast<int32_t>(rng.Uniform(3));
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
