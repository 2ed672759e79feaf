// SolveExactDefrag: the exact defragmentation reference. Each case is a small hand-built cluster
// of 8-GPU nodes whose optimum (whole free nodes, then fewest moves) is worked out in a comment;
// every result is applied to a copy of the state, which must keep every invariant and show the
// whole free nodes the result claims.
#include "sched/exact/defrag_milp.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/rng.h"
#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::ClusterBuilder;
using testing::Gpus;
using testing::Req;

// Binds pending `t` on `node` at its lowest wholly free GPUs (or none for a CPU-only task, or the
// first GPU with room for a shared-GPU task). Returns false when it does not fit.
bool BindLowest(ClusterState& s, TaskId t, NodeId node) {
  const TaskRequest& q = s.task(t).req;
  const Node& n = s.node(node);
  GpuIndices g;
  for (int i = 0; i < n.spec.gpu_count && g.size < q.gpu_count; ++i) {
    const MilliGpu need = q.gpu_milli == kMilliPerGpu ? kMilliPerGpu : q.gpu_milli;
    if (n.gpu_free[i] >= need) g.Push(i);
  }
  if (g.size != q.gpu_count || !s.CanBind(t, node, g)) return false;
  s.Bind(t, node, g);
  return true;
}

// Submits a single-task job asking for `req` and binds it on `node`.
TaskId Place(ClusterBuilder& c, const std::string& name, TaskRequest req, NodeId node) {
  TaskId t = c.Submit(name, req);
  EXPECT_TRUE(BindLowest(c.state, t, node)) << name;
  return t;
}

int WholeFree(const ClusterState& s, std::span<const NodeId> nodes) {
  int k = 0;
  for (NodeId n : nodes) {
    const Node& nd = s.node(n);
    if (nd.spec.gpu_count > 0 && nd.full_free_gpus == nd.spec.gpu_count) ++k;
  }
  return k;
}

// Applies `r` to a copy of `s` (unbind every moved task, then bind each on its final node at
// some valid GPUs), checks the invariants and the claimed counts, and returns the copy.
ClusterState Apply(const ClusterState& s, std::span<const NodeId> nodes, const ExactDefragResult& r) {
  ClusterState c = s;
  std::vector<std::pair<TaskId, NodeId>> moved;
  for (auto [t, n] : r.assignment) {
    if (s.task(t).node != n) moved.push_back({t, n});
  }
  EXPECT_EQ(static_cast<int64_t>(moved.size()), r.moved_tasks);
  for (auto [t, n] : moved) c.Unbind(t);
  for (auto [t, n] : moved) EXPECT_TRUE(BindLowest(c, t, n)) << c.task(t).name << " does not fit its node";
  EXPECT_TRUE(c.CheckInvariants().ok()) << c.CheckInvariants().message();
  EXPECT_EQ(WholeFree(s, nodes), r.whole_free_before);
  EXPECT_EQ(WholeFree(c, nodes), r.whole_free_after);
  return c;
}

struct Solved {
  ExactDefragResult r;
  ClusterState after;
};

Solved Solve(const ClusterState& s, std::span<const NodeId> nodes, const std::vector<char>& locked = {}) {
  auto r = SolveExactDefrag(s, nodes, locked);
  EXPECT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->optimal);
  return Solved{*r, Apply(s, nodes, *r)};
}

std::vector<char> Locked(const ClusterState& s, std::initializer_list<TaskId> ts) {
  std::vector<char> l(s.tasks().size(), 0);
  for (TaskId t : ts) l[t.value()] = 1;
  return l;
}

TEST(ExactDefrag, TwoHalfUsedNodesFreeOneWithASingleMove) {
  // n0: a(4); n1: b(4). Either task moves onto the other node: 1 whole free node, 1 move.
  ClusterBuilder c;
  NodeId n0 = c.AddNode("n0", Gpus(8)), n1 = c.AddNode("n1", Gpus(8));
  Place(c, "a", Req().Gpus(4), n0);
  Place(c, "b", Req().Gpus(4), n1);
  const std::vector<NodeId> nodes = {n0, n1};
  Solved s = Solve(c.state, nodes);
  EXPECT_EQ(s.r.whole_free_before, 0);
  EXPECT_EQ(s.r.whole_free_after, 1);
  EXPECT_EQ(s.r.moved_tasks, 1);
  EXPECT_EQ(s.r.assignment.size(), 2u);
}

TEST(ExactDefrag, FreesTheNodeThatNeedsFewestMoves) {
  // n0: a(2), b(2); n1: d(4). Freeing n0 takes 2 moves, freeing n1 takes 1 (d onto n0's 4 free
  // GPUs): optimum 1 whole free node with 1 move, and that move is d's.
  ClusterBuilder c;
  NodeId n0 = c.AddNode("n0", Gpus(8)), n1 = c.AddNode("n1", Gpus(8));
  Place(c, "a", Req().Gpus(2), n0);
  Place(c, "b", Req().Gpus(2), n0);
  TaskId d = Place(c, "d", Req().Gpus(4), n1);
  const std::vector<NodeId> nodes = {n0, n1};
  Solved s = Solve(c.state, nodes);
  EXPECT_EQ(s.r.whole_free_after, 1);
  EXPECT_EQ(s.r.moved_tasks, 1);
  EXPECT_EQ(s.after.task(d).node, n0);
}

TEST(ExactDefrag, LockedTasksPreventVacatingTheirNodes) {
  // n0: a(2); n1: b(4), x(2). Unlocked: a -> n1 frees n0 (1 move). With a locked, n1 must be
  // vacated instead: b and x onto n0's 6 free GPUs (2 moves). With a and b locked: nothing frees.
  ClusterBuilder c;
  NodeId n0 = c.AddNode("n0", Gpus(8)), n1 = c.AddNode("n1", Gpus(8));
  TaskId a = Place(c, "a", Req().Gpus(2), n0);
  TaskId b = Place(c, "b", Req().Gpus(4), n1);
  Place(c, "x", Req().Gpus(2), n1);
  const std::vector<NodeId> nodes = {n0, n1};

  Solved free = Solve(c.state, nodes);
  EXPECT_EQ(free.r.whole_free_after, 1);
  EXPECT_EQ(free.r.moved_tasks, 1);
  EXPECT_EQ(free.after.node(n0).tasks.size(), 0u);

  Solved lock_a = Solve(c.state, nodes, Locked(c.state, {a}));
  EXPECT_EQ(lock_a.r.whole_free_after, 1);
  EXPECT_EQ(lock_a.r.moved_tasks, 2);
  EXPECT_EQ(lock_a.after.node(n1).tasks.size(), 0u);
  EXPECT_EQ(lock_a.after.task(a).node, n0);
  EXPECT_EQ(lock_a.r.assignment.size(), 2u);  // b and x; a is not movable

  Solved lock_ab = Solve(c.state, nodes, Locked(c.state, {a, b}));
  EXPECT_EQ(lock_ab.r.whole_free_after, 0);
  EXPECT_EQ(lock_ab.r.moved_tasks, 0);
}

TEST(ExactDefrag, MemoryOrCpuLimitsMakeConsolidationImpossible) {
  // Each node holds a 4-GPU task with 300000 MiB (of 393216), or 60 cores (of 96): GPUs would fit
  // on one node but memory (CPU) would not, so the optimum is the state as it is: 0 free, 0 moves.
  for (bool by_memory : {true, false}) {
    SCOPED_TRACE(by_memory ? "memory" : "cpu");
    ClusterBuilder c;
    NodeId n0 = c.AddNode("n0", Gpus(8)), n1 = c.AddNode("n1", Gpus(8));
    TaskRequest q = by_memory ? Req().Gpus(4).Mem(300000) : Req().Gpus(4).Cpu(60000);
    Place(c, "a", q, n0);
    Place(c, "b", q, n1);
    const std::vector<NodeId> nodes = {n0, n1};
    Solved s = Solve(c.state, nodes);
    EXPECT_EQ(s.r.whole_free_after, 0);
    EXPECT_EQ(s.r.moved_tasks, 0);
  }
}

TEST(ExactDefrag, ModelPinsKeepTasksOnAdmittedNodes) {
  // n0 (V100): a(4); n1 (A100): b(4). Unpinned, one moves: 1 free. With a pinned to V100 and b
  // to A100, neither may go to the other node: 0 free.
  for (bool pinned : {false, true}) {
    SCOPED_TRACE(pinned ? "pinned" : "unpinned");
    ClusterBuilder c;
    testing::NodeShape v = Gpus(8), a100 = Gpus(8);
    a100.model = "A100";
    NodeId n0 = c.AddNode("n0", v), n1 = c.AddNode("n1", a100);
    TaskRequest qa = Req().Gpus(4), qb = Req().Gpus(4);
    if (pinned) {
      qa.models = c.ModelSet("V100");
      qb.models = c.ModelSet("A100");
    }
    Place(c, "a", qa, n0);
    Place(c, "b", qb, n1);
    const std::vector<NodeId> nodes = {n0, n1};
    Solved s = Solve(c.state, nodes);
    EXPECT_EQ(s.r.whole_free_after, pinned ? 0 : 1);
  }
}

TEST(ExactDefrag, RequiredLevelGangStaysInItsAsw) {
  // n0 (asw a): g1(2); n1 (asw b): x(2, locked); n2 (asw a): g2(2); g1, g2 one gang. Without a
  // constraint both go onto n1: 2 free (2 moves). Confined to asw a, only one of n0/n2 can be
  // vacated (g1 -> n2 or g2 -> n0): 1 free, 1 move, both gang tasks still in asw a.
  for (bool confined : {false, true}) {
    SCOPED_TRACE(confined ? "confined" : "free");
    testing::AswCluster k({"a", "b", "a"});
    ClusterState& s = k.c.state;
    JobSpec js;
    js.name = "gang";
    js.min_replicas = js.max_replicas = js.step = 2;
    if (confined) {
      js.topology.plane = k.data;
      js.topology.required_level = 0;
    }
    JobId j = s.AddJob(js);
    TaskId g1 = s.AddTask(j, "g1", Req().Gpus(2));
    TaskId g2 = s.AddTask(j, "g2", Req().Gpus(2));
    ASSERT_TRUE(BindLowest(s, g1, k.N(0)));
    ASSERT_TRUE(BindLowest(s, g2, k.N(2)));
    TaskId x = Place(k.c, "x", Req().Gpus(2), k.N(1));
    const std::vector<NodeId> nodes = {k.N(0), k.N(1), k.N(2)};
    Solved r = Solve(s, nodes, Locked(s, {x}));
    EXPECT_EQ(r.r.whole_free_after, confined ? 1 : 2);
    EXPECT_EQ(r.r.moved_tasks, confined ? 1 : 2);
    if (confined) {
      EXPECT_NE(r.after.task(g1).node, k.N(1));
      EXPECT_NE(r.after.task(g2).node, k.N(1));
    }
  }
}

TEST(ExactDefrag, FindsTheChainAGreedyFullestFirstMisses) {
  // n0: a(4, locked), b(1) — 3 free; n1: c(5) — 3 free; n2: d(4).
  // Greedy (vacate the emptiest node n2, putting d on the fullest node with room) fails: d needs 4
  // and every other node has 3; n0 holds a locked task and c(5) fits nowhere. The optimum is a
  // chain: b -> n1 (n1: 6 used), then d -> n0 (8 used): n2 whole free, 2 moves.
  ClusterBuilder c;
  NodeId n0 = c.AddNode("n0", Gpus(8)), n1 = c.AddNode("n1", Gpus(8)), n2 = c.AddNode("n2", Gpus(8));
  TaskId a = Place(c, "a", Req().Gpus(4), n0);
  TaskId b = Place(c, "b", Req().Gpus(1), n0);
  Place(c, "c", Req().Gpus(5), n1);
  TaskId d = Place(c, "d", Req().Gpus(4), n2);
  const std::vector<NodeId> nodes = {n0, n1, n2};
  Solved s = Solve(c.state, nodes, Locked(c.state, {a}));
  EXPECT_EQ(s.r.whole_free_after, 1);
  EXPECT_EQ(s.r.moved_tasks, 2);
  EXPECT_EQ(s.after.task(b).node, n1);
  EXPECT_EQ(s.after.task(d).node, n0);
  EXPECT_TRUE(s.after.node(n2).tasks.empty());
}

TEST(ExactDefrag, SplitsTwoNodesTasksIntoTheRest) {
  // n0: a(3), b(3); n1: c(5); n2: d(2), e(2). 15 GPUs need two nodes, so at most 1 frees, and
  // no single move frees one (each node holds two tasks, or c which needs 5 where 2 and 4 are
  // free). Two moves do, three ways: n2 (d -> n0, e -> n1), n0 (a -> n1, b -> n2), or n1 by a
  // chain (a -> n2, then c -> n0). Optimum: 1 free, 2 moves.
  ClusterBuilder c;
  NodeId n0 = c.AddNode("n0", Gpus(8)), n1 = c.AddNode("n1", Gpus(8)), n2 = c.AddNode("n2", Gpus(8));
  Place(c, "a", Req().Gpus(3), n0);
  Place(c, "b", Req().Gpus(3), n0);
  Place(c, "c", Req().Gpus(5), n1);
  Place(c, "d", Req().Gpus(2), n2);
  Place(c, "e", Req().Gpus(2), n2);
  const std::vector<NodeId> nodes = {n0, n1, n2};
  Solved s = Solve(c.state, nodes);
  EXPECT_EQ(s.r.whole_free_after, 1);
  EXPECT_EQ(s.r.moved_tasks, 2);
}

TEST(ExactDefrag, SharedGpuTasksAndCordonedNodesStay) {
  // n0: s(0.5 GPU, shared) + 7 whole free GPUs; n1: b(4); n2 (cordoned): y(2); n3: z(1).
  // s stays (shared GPUs are treated as locked) so n0 never frees; n2 keeps y and receives
  // nothing. b and z both go onto n0 (4 + 1 <= 7): n1 and n3 free, 2 moves.
  ClusterBuilder c;
  NodeId n0 = c.AddNode("n0", Gpus(8)), n1 = c.AddNode("n1", Gpus(8)), n2 = c.AddNode("n2", Gpus(8)),
         n3 = c.AddNode("n3", Gpus(8));
  TaskId sh = Place(c, "s", Req().SharedGpu(500), n0);
  Place(c, "b", Req().Gpus(4), n1);
  TaskId y = Place(c, "y", Req().Gpus(2), n2);
  Place(c, "z", Req().Gpus(1), n3);
  c.state.SetNodeState(n2, NodeState::kCordoned);
  const std::vector<NodeId> nodes = {n0, n1, n2, n3};
  Solved s = Solve(c.state, nodes);
  EXPECT_EQ(s.r.whole_free_after, 2);
  EXPECT_EQ(s.r.moved_tasks, 2);
  EXPECT_EQ(s.after.task(sh).node, n0);
  EXPECT_EQ(s.after.task(y).node, n2);
  EXPECT_EQ(s.r.assignment.size(), 2u);  // only b and z are movable
}

TEST(ExactDefrag, NodesOutsideTheSetAreIgnored) {
  // n0: a(4); n1: b(4); n2: empty but not a candidate. Only n0 and n1 count: 1 free, 1 move.
  ClusterBuilder c;
  NodeId n0 = c.AddNode("n0", Gpus(8)), n1 = c.AddNode("n1", Gpus(8));
  c.AddNode("n2", Gpus(8));
  Place(c, "a", Req().Gpus(4), n0);
  Place(c, "b", Req().Gpus(4), n1);
  const std::vector<NodeId> nodes = {n0, n1};
  Solved s = Solve(c.state, nodes);
  EXPECT_EQ(s.r.whole_free_before, 0);
  EXPECT_EQ(s.r.whole_free_after, 1);
}

// A seeded random fill: `n` 8-GPU nodes, each filled to a random level with 1/2/4-GPU tasks.
ClusterState RandomFill(int n, uint64_t seed, std::vector<NodeId>& nodes) {
  ClusterBuilder c;
  Rng rng(seed);
  const int sizes[] = {1, 1, 2, 2, 4};
  for (int i = 0; i < n; ++i) {
    NodeId id = c.AddNode("n" + std::to_string(i), Gpus(8));
    nodes.push_back(id);
    int used = static_cast<int>(rng.Uniform(8));
    int k = 0;
    while (used > 0) {
      int g = sizes[rng.Uniform(5)];
      if (g > used) g = used;
      Place(c, "t" + std::to_string(i) + "." + std::to_string(k++), Req().Gpus(g).Cpu(4000 * g).Mem(32768 * g), id);
      used -= g;
    }
  }
  return c.state;
}

TEST(ExactDefrag, SameInputSameAssignment) {
  std::vector<NodeId> nodes;
  ClusterState s = RandomFill(12, 7, nodes);
  Solved a = Solve(s, nodes);
  Solved b = Solve(s, nodes);
  EXPECT_EQ(a.r.assignment, b.r.assignment);
  EXPECT_EQ(a.r.whole_free_after, b.r.whole_free_after);
  EXPECT_EQ(a.r.moved_tasks, b.r.moved_tasks);
  EXPECT_GE(a.r.whole_free_after, a.r.whole_free_before);
}

TEST(ExactDefrag, RandomInstancesKeepEveryCapacity) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    SCOPED_TRACE(seed);
    std::vector<NodeId> nodes;
    ClusterState s = RandomFill(10, seed, nodes);
    Solved r = Solve(s, nodes);  // Apply checks capacity and counts
    // No solution can beat the GPU bound: free nodes <= nodes - ceil(used GPUs / 8).
    int64_t used = 0;
    for (NodeId n : nodes) used += 8 - s.node(n).full_free_gpus;
    EXPECT_LE(r.r.whole_free_after, static_cast<int64_t>(nodes.size()) - (used + 7) / 8);
  }
}

TEST(ExactDefrag, ATimeLimitStillYieldsAValidAssignment) {
  // With a budget too small to prove anything, the result is still a feasible assignment at least
  // as good as the state (the stages start from "nobody moves"); and the solver, stopped by its
  // time limit wherever it is, does not crash (it did in CBC's preprocessing).
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE(seed);
    std::vector<NodeId> nodes;
    ClusterState s = RandomFill(25, seed, nodes);
    ExactDefragOptions o;
    o.time_limit_s = 1e-3;
    auto r = SolveExactDefrag(s, nodes, {}, o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    Apply(s, nodes, *r);
    EXPECT_GE(r->whole_free_after, r->whole_free_before);
  }
}

TEST(ExactDefrag, RejectsBadInput) {
  ClusterBuilder c;
  NodeId n0 = c.AddNode("n0", Gpus(8));
  std::vector<NodeId> many(65, n0);
  auto too_many = SolveExactDefrag(c.state, many, {});
  EXPECT_EQ(too_many.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find("small instances"), std::string::npos);

  const std::vector<NodeId> dup = {n0, n0};
  auto d = SolveExactDefrag(c.state, dup, {});
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("duplicate"), std::string::npos);

  const std::vector<NodeId> unknown = {n0, NodeId(9)};
  auto u = SolveExactDefrag(c.state, unknown, {});
  EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(u.status().message().find("unknown"), std::string::npos);

  const std::vector<NodeId> one = {n0};
  ExactDefragOptions o;
  o.time_limit_s = 0;
  EXPECT_EQ(SolveExactDefrag(c.state, one, {}, o).status().code(), StatusCode::kInvalidArgument);

  auto empty = SolveExactDefrag(c.state, {}, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->optimal);
  EXPECT_EQ(empty->whole_free_after, 0);
}

}  // namespace
}  // namespace estuary
