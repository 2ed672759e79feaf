// MigrationExecutor (issue 5 item 3): make-before-break over reservations, the budget, aborts
// (failed targets, targets killed mid-migration, owners that disappear), dependencies, draining,
// stability, and a randomized run of IPC plans with faults that checks every invariant.
#include "sched/actions/migration.h"

#include <gtest/gtest.h>

#include <cstdio>
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

DefragMove Mv(TaskId t, NodeId from, NodeId to, std::initializer_list<int> gpus, int32_t chain,
              std::vector<size_t> after = {}) {
  DefragMove m;
  m.task = t;
  m.from = from;
  m.to = to;
  m.gpus = Idx(gpus);
  m.chain = chain;
  m.after = std::move(after);
  return m;
}

std::vector<int> G(const GpuIndices& g) { return {g.begin(), g.end()}; }

// Steps and checks the invariants.
void StepAt(MigrationExecutor& x, ClusterState& s, int64_t t) {
  x.Step(s, t);
  const Status st = s.CheckInvariants();
  ASSERT_TRUE(st.ok()) << "t=" << t << ": " << st.message();
}

MigrationOptions Opts() {
  MigrationOptions o;
  o.startup_s = 120;
  o.timeout_s = 600;
  return o;
}

TEST(Migration, AMoveReservesTheTargetStartsThereAndStopsTheOldInstanceOnlyWhenTheNewIsReady) {
  ClusterBuilder c;
  const NodeId n0 = c.AddNode("n0"), n1 = c.AddNode("n1");
  const TaskId a = Place(c, "a", Req().Gpus(4), n0, Idx({0, 1, 2, 3}));
  Place(c, "b", Req().Gpus(4), n1, Idx({0, 1, 2, 3}));
  DefragPlan p;
  p.moves = {Mv(a, n0, n1, {4, 5, 6, 7}, 0)};
  MigrationExecutor x(Opts());
  EXPECT_EQ(x.Submit(c.state, p), 1);
  EXPECT_EQ(c.state.node(n0).state, NodeState::kReady);  // nothing happens before the first step

  StepAt(x, c.state, 1000);
  EXPECT_EQ(c.state.node(n0).state, NodeState::kCordoned);  // drained while it empties
  // Both instances hold resources: the old one runs, the new one starts on reserved GPUs 4-7.
  EXPECT_EQ(c.state.task(a).node, n0);
  EXPECT_EQ(c.state.allocated_gpu_milli(), 8000);
  EXPECT_EQ(c.state.reserved_gpu_milli(), 4000);
  EXPECT_EQ(c.state.node(n1).full_free_gpus, 0);
  ASSERT_EQ(c.state.available_capacity_reservations().size(), 1u);
  const Reservation& r = c.state.reservation(c.state.available_capacity_reservations()[0]);
  EXPECT_EQ(r.owner, c.state.task(a).job);
  EXPECT_EQ(r.owner_task, a);
  EXPECT_EQ(G(r.gpus), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(x.NextDue(), 1120);
  EXPECT_TRUE(x.Busy());

  StepAt(x, c.state, 1119);
  EXPECT_EQ(c.state.task(a).node, n0);

  StepAt(x, c.state, 1120);
  EXPECT_EQ(c.state.task(a).node, n1);
  EXPECT_EQ(G(c.state.task(a).gpus), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_TRUE(c.state.node(n0).tasks.empty());
  EXPECT_EQ(c.state.node(n0).state, NodeState::kReady);
  EXPECT_EQ(c.state.node(n0).full_free_gpus, 8);
  EXPECT_TRUE(c.state.available_capacity_reservations().empty());
  EXPECT_EQ(c.state.reserved_gpu_milli(), 0);
  EXPECT_EQ(c.state.allocated_gpu_milli(), 8000);
  EXPECT_FALSE(x.Busy());
  EXPECT_EQ(x.NextDue(), std::nullopt);
  const MigrationCounters& k = x.counters();
  EXPECT_EQ(k.planned, 1);
  EXPECT_EQ(k.started, 1);
  EXPECT_EQ(k.completed, 1);
  EXPECT_EQ(k.aborted, 0);
  EXPECT_EQ(k.groups_completed, 1);
  EXPECT_EQ(k.double_occupancy_gpu_milli_s, 4000 * 120);
}

TEST(Migration, ReservedCapacityIsInvisibleToEveryoneButTheMovingTask) {
  ClusterBuilder c;
  const NodeId n0 = c.AddNode("n0"), n1 = c.AddNode("n1");
  const TaskId a = Place(c, "a", Req().Gpus(4), n0, Idx({0, 1, 2, 3}));
  Place(c, "b", Req().Gpus(4), n1, Idx({0, 1, 2, 3}));
  DefragPlan p;
  p.moves = {Mv(a, n0, n1, {4, 5, 6, 7}, 0)};
  MigrationExecutor x(Opts());
  x.Submit(c.state, p);
  StepAt(x, c.state, 0);
  const TaskId other = c.Submit("other", Req().Gpus(4));
  EXPECT_FALSE(c.state.CanBind(other, n1, Idx({4, 5, 6, 7})));
  EXPECT_FALSE(c.state.CanBind(other, n1, Idx({4})));
  // The other job's task may not bind into the reservation either.
  EXPECT_FALSE(c.state.CanBindReserved(other, c.state.available_capacity_reservations()[0]));
}

TEST(Migration, ATargetKilledMidMigrationReleasesItsReservationAndKeepsTheOldInstance) {
  // n0 holds a and b; a goes to n1, b to n2, one move per node at a time (per_node 1): a starts
  // first; n1 dies during a's startup. a is aborted (the reservation released, a still on n0 at
  // its GPUs), b — waiting — is cancelled: n0 can no longer be vacated, so it is made ready again.
  ClusterBuilder c;
  const NodeId n0 = c.AddNode("n0"), n1 = c.AddNode("n1"), n2 = c.AddNode("n2");
  const TaskId a = Place(c, "a", Req().Gpus(2), n0, Idx({0, 1}));
  const TaskId b = Place(c, "b", Req().Gpus(2), n0, Idx({2, 3}));
  Place(c, "c", Req().Gpus(6), n1, Idx({0, 1, 2, 3, 4, 5}));
  Place(c, "d", Req().Gpus(6), n2, Idx({0, 1, 2, 3, 4, 5}));
  DefragPlan p;
  p.moves = {Mv(a, n0, n1, {6, 7}, 0), Mv(b, n0, n2, {6, 7}, 1)};
  MigrationOptions o = Opts();
  o.per_node = 1;
  MigrationExecutor x(o);
  x.Submit(c.state, p);
  StepAt(x, c.state, 0);
  EXPECT_EQ(x.moves()[0].state, MoveState::kStarting);
  EXPECT_EQ(x.moves()[1].state, MoveState::kWaiting);
  const ReservationId r = x.moves()[0].reservation;

  c.state.SetNodeState(n1, NodeState::kDown);
  StepAt(x, c.state, 60);
  EXPECT_EQ(x.moves()[0].state, MoveState::kAborted);
  EXPECT_EQ(x.moves()[1].state, MoveState::kCancelled);
  EXPECT_EQ(c.state.reservation(r).state, ReservationState::kReleased);
  EXPECT_TRUE(c.state.available_capacity_reservations().empty());
  EXPECT_EQ(c.state.task(a).node, n0);
  EXPECT_EQ(G(c.state.task(a).gpus), (std::vector<int>{0, 1}));
  EXPECT_EQ(c.state.task(b).node, n0);
  EXPECT_EQ(c.state.node(n0).state, NodeState::kReady);
  EXPECT_EQ(c.state.node(n2).full_free_gpus, 2);  // b never reserved there
  EXPECT_EQ(x.counters().aborted, 1);
  EXPECT_EQ(x.counters().cancelled, 1);
  EXPECT_EQ(x.counters().groups_completed, 0);
  EXPECT_EQ(x.counters().double_occupancy_gpu_milli_s, 2000 * 60);
  EXPECT_FALSE(x.Busy());
}

TEST(Migration, ANewInstanceThatFailsIsDetectedAtTheTimeoutAndTheOldOneKeepsRunning) {
  ClusterBuilder c;
  const NodeId n0 = c.AddNode("n0"), n1 = c.AddNode("n1");
  const TaskId a = Place(c, "a", Req().Gpus(4), n0, Idx({0, 1, 2, 3}));
  Place(c, "b", Req().Gpus(4), n1, Idx({0, 1, 2, 3}));
  DefragPlan p;
  p.moves = {Mv(a, n0, n1, {4, 5, 6, 7}, 0)};
  MigrationOptions o = Opts();
  o.fail_permille = 1000;
  MigrationExecutor x(o);
  x.Submit(c.state, p);
  StepAt(x, c.state, 0);
  EXPECT_EQ(x.NextDue(), 600);
  StepAt(x, c.state, 120);  // would have been ready: it is not
  EXPECT_EQ(x.moves()[0].state, MoveState::kStarting);
  EXPECT_EQ(c.state.task(a).node, n0);
  StepAt(x, c.state, 600);
  EXPECT_EQ(x.moves()[0].state, MoveState::kAborted);
  EXPECT_EQ(c.state.task(a).node, n0);
  EXPECT_TRUE(c.state.available_capacity_reservations().empty());
  EXPECT_EQ(c.state.node(n1).full_free_gpus, 4);
  EXPECT_EQ(c.state.node(n0).state, NodeState::kReady);
  EXPECT_EQ(x.counters().double_occupancy_gpu_milli_s, 4000 * 600);
}

TEST(Migration, AReservationDoesNotOutliveItsOwner) {
  ClusterBuilder c;
  const NodeId n0 = c.AddNode("n0"), n1 = c.AddNode("n1");
  const TaskId a = Place(c, "a", Req().Gpus(4), n0, Idx({0, 1, 2, 3}));
  Place(c, "b", Req().Gpus(4), n1, Idx({0, 1, 2, 3}));
  DefragPlan p;
  p.moves = {Mv(a, n0, n1, {4, 5, 6, 7}, 0)};
  MigrationExecutor x(Opts());
  x.Submit(c.state, p);
  StepAt(x, c.state, 0);
  c.state.Finish(a);  // the job ends during the migration
  StepAt(x, c.state, 30);
  EXPECT_EQ(x.moves()[0].state, MoveState::kAborted);
  EXPECT_TRUE(c.state.available_capacity_reservations().empty());
  EXPECT_EQ(c.state.node(n1).full_free_gpus, 4);
  EXPECT_EQ(c.state.task(a).state, TaskState::kFinished);
}

TEST(Migration, AChainMovesTheEjectedTaskFirstAndTheRestWaitsForIt) {
  // n0: a (4 GPUs). n1: e (2 GPUs) + f (4 GPUs) — a fits on n1 only once e has gone to n2.
  ClusterBuilder c;
  const NodeId n0 = c.AddNode("n0"), n1 = c.AddNode("n1"), n2 = c.AddNode("n2");
  const TaskId a = Place(c, "a", Req().Gpus(4), n0, Idx({0, 1, 2, 3}));
  const TaskId e = Place(c, "e", Req().Gpus(2), n1, Idx({0, 1}));
  Place(c, "f", Req().Gpus(4), n1, Idx({2, 3, 4, 5}));
  Place(c, "g", Req().Gpus(6), n2, Idx({0, 1, 2, 3, 4, 5}));
  DefragPlan p;
  p.moves = {Mv(e, n1, n2, {6, 7}, 0), Mv(a, n0, n1, {0, 1, 6, 7}, 0, {0})};
  MigrationExecutor x(Opts());
  x.Submit(c.state, p);
  StepAt(x, c.state, 0);
  EXPECT_EQ(x.moves()[0].state, MoveState::kStarting);
  EXPECT_EQ(x.moves()[1].state, MoveState::kWaiting);
  StepAt(x, c.state, 120);
  EXPECT_EQ(c.state.task(e).node, n2);
  EXPECT_EQ(x.moves()[1].state, MoveState::kStarting);  // started at once: e's GPUs are free
  EXPECT_EQ(x.NextDue(), 240);
  StepAt(x, c.state, 240);
  EXPECT_EQ(c.state.task(a).node, n1);
  EXPECT_EQ(G(c.state.task(a).gpus), (std::vector<int>{0, 1, 6, 7}));
  EXPECT_EQ(c.state.node(n0).full_free_gpus, 8);
  EXPECT_EQ(x.counters().groups_completed, 1);
}

TEST(Migration, WhenTheEjectionFailsTheMoveThatNeededItsRoomIsCancelled) {
  ClusterBuilder c;
  const NodeId n0 = c.AddNode("n0"), n1 = c.AddNode("n1"), n2 = c.AddNode("n2");
  const TaskId a = Place(c, "a", Req().Gpus(4), n0, Idx({0, 1, 2, 3}));
  const TaskId e = Place(c, "e", Req().Gpus(2), n1, Idx({0, 1}));
  Place(c, "f", Req().Gpus(4), n1, Idx({2, 3, 4, 5}));
  Place(c, "g", Req().Gpus(6), n2, Idx({0, 1, 2, 3, 4, 5}));
  DefragPlan p;
  p.moves = {Mv(e, n1, n2, {6, 7}, 0), Mv(a, n0, n1, {0, 1, 6, 7}, 0, {0})};
  MigrationExecutor x(Opts());
  x.Submit(c.state, p);
  StepAt(x, c.state, 0);
  c.state.SetNodeState(n2, NodeState::kDown);
  StepAt(x, c.state, 10);
  EXPECT_EQ(x.moves()[0].state, MoveState::kAborted);
  EXPECT_EQ(x.moves()[1].state, MoveState::kCancelled);
  EXPECT_EQ(c.state.task(e).node, n1);
  EXPECT_EQ(c.state.task(a).node, n0);
  EXPECT_EQ(x.counters().started, 1);
}

TEST(Migration, TheBudgetBoundsConcurrentMovesAndThePlanSize) {
  // Three nodes each with one 1-GPU task, all moving to n3; max_concurrent 1 runs them one after
  // another; max_moves 2 keeps the first two groups only.
  ClusterBuilder c;
  std::vector<NodeId> n;
  for (int i = 0; i < 4; ++i) n.push_back(c.AddNode("n" + std::to_string(i)));
  std::vector<TaskId> t;
  for (int i = 0; i < 3; ++i) t.push_back(Place(c, "t" + std::to_string(i), Req().Gpus(1), n[i], Idx({0})));
  Place(c, "big", Req().Gpus(4), n[3], Idx({0, 1, 2, 3}));
  DefragPlan p;
  p.moves = {Mv(t[0], n[0], n[3], {4}, 0), Mv(t[1], n[1], n[3], {5}, 1), Mv(t[2], n[2], n[3], {6}, 2)};
  MigrationOptions o = Opts();
  o.max_concurrent = 1;
  o.per_node = 8;
  o.max_moves = 2;
  MigrationExecutor x(o);
  EXPECT_EQ(x.Submit(c.state, p), 2);
  EXPECT_EQ(c.state.node(n[2]).state, NodeState::kReady);  // not kept: not drained
  StepAt(x, c.state, 0);
  EXPECT_EQ(x.moves()[0].state, MoveState::kStarting);
  EXPECT_EQ(x.moves()[1].state, MoveState::kWaiting);
  StepAt(x, c.state, 120);
  EXPECT_EQ(x.moves()[0].state, MoveState::kCompleted);
  EXPECT_EQ(x.moves()[1].state, MoveState::kStarting);
  StepAt(x, c.state, 240);
  EXPECT_EQ(c.state.task(t[1]).node, n[3]);
  EXPECT_EQ(c.state.task(t[2]).node, n[2]);
  EXPECT_EQ(x.counters().groups_completed, 2);
  EXPECT_EQ(x.counters().planned, 2);
}

TEST(Migration, AJobNeverHasFewerBoundReplicasThanItsMinWhileItsTasksMove) {
  ClusterState s;
  std::vector<NodeId> n;
  for (int i = 0; i < 4; ++i) {
    NodeSpec ns;
    ns.name = "n" + std::to_string(i);
    ns.gpu_count = 8;
    ns.cpu_milli = 96000;
    ns.mem_mib = 1 << 20;
    n.push_back(*s.AddNode(ns));
  }
  JobSpec js;
  js.name = "gang";
  js.min_replicas = js.max_replicas = js.step = 2;
  const JobId j = s.AddJob(js);
  TaskRequest r;
  r.gpu_count = 2;
  r.gpu_milli = 1000;
  const TaskId t0 = s.AddTask(j, "g-0", r), t1 = s.AddTask(j, "g-1", r);
  s.Bind(t0, n[0], Idx({0, 1}));
  s.Bind(t1, n[1], Idx({0, 1}));
  JobSpec fs;
  fs.name = "fill";
  TaskRequest fr;
  fr.gpu_count = 6;
  fr.gpu_milli = 1000;
  const TaskId fill = s.AddTask(s.AddJob(fs), "fill", fr);
  s.Bind(fill, n[2], Idx({0, 1, 2, 3, 4, 5}));
  DefragPlan p;
  p.moves = {Mv(t0, n[0], n[2], {6, 7}, 0), Mv(t1, n[1], n[3], {0, 1}, 1)};
  MigrationExecutor x(Opts());
  x.Submit(s, p);
  for (int64_t t = 0; t <= 300; t += 30) {
    StepAt(x, s, t);
    EXPECT_GE(s.job(j).bound_tasks, 2) << t;
  }
  EXPECT_EQ(s.task(t0).node, n[2]);
  EXPECT_EQ(s.task(t1).node, n[3]);
}

TEST(Migration, ExtraStepsAfterThePlanChangeNothing) {
  ClusterBuilder c;
  const NodeId n0 = c.AddNode("n0"), n1 = c.AddNode("n1");
  const TaskId a = Place(c, "a", Req().Gpus(4), n0, Idx({0, 1, 2, 3}));
  Place(c, "b", Req().Gpus(4), n1, Idx({0, 1, 2, 3}));
  DefragPlan p;
  p.moves = {Mv(a, n0, n1, {4, 5, 6, 7}, 0)};
  MigrationExecutor x(Opts());
  x.Submit(c.state, p);
  StepAt(x, c.state, 0);
  StepAt(x, c.state, 0);  // the same time again: nothing more starts
  EXPECT_EQ(x.counters().started, 1);
  StepAt(x, c.state, 120);
  const uint64_t epoch = c.state.epoch();
  const MigrationCounters before = x.counters();
  for (int64_t t = 120; t < 2000; t += 97) StepAt(x, c.state, t);
  EXPECT_EQ(c.state.epoch(), epoch);
  EXPECT_EQ(x.counters().completed, before.completed);
  EXPECT_EQ(x.counters().double_occupancy_gpu_milli_s, before.double_occupancy_gpu_milli_s);
}

TEST(Migration, ANodeThatReceivesAndIsLaterVacatedIsDrainedOnlyWhenItsOwnMovesStart) {
  // Round 1 moves a (n0) onto n1; round 2 vacates n1: a and b move to n2 after a arrived.
  ClusterBuilder c;
  const NodeId n0 = c.AddNode("n0"), n1 = c.AddNode("n1"), n2 = c.AddNode("n2");
  const TaskId a = Place(c, "a", Req().Gpus(2), n0, Idx({0, 1}));
  const TaskId b = Place(c, "b", Req().Gpus(2), n1, Idx({0, 1}));
  Place(c, "z", Req().Gpus(4), n2, Idx({0, 1, 2, 3}));
  DefragPlan p;
  p.moves = {Mv(a, n0, n1, {2, 3}, 0), Mv(a, n1, n2, {4, 5}, 1, {0}), Mv(b, n1, n2, {6, 7}, 2)};
  MigrationOptions o = Opts();
  o.per_node = 8;
  MigrationExecutor x(o);
  x.Submit(c.state, p);
  StepAt(x, c.state, 0);
  // a's first move runs; n1 is its target. b's move (group n1, independent of a) starts too and
  // drains n1: a's first move still completes into the reservation it made on n1 before the
  // cordon.
  EXPECT_EQ(x.moves()[0].state, MoveState::kStarting);
  StepAt(x, c.state, 120);
  EXPECT_EQ(c.state.task(a).node, n1);
  StepAt(x, c.state, 240);
  EXPECT_EQ(c.state.task(a).node, n2);
  EXPECT_EQ(c.state.task(b).node, n2);
  EXPECT_TRUE(c.state.node(n0).tasks.empty());
  EXPECT_TRUE(c.state.node(n1).tasks.empty());
  EXPECT_EQ(c.state.node(n1).state, NodeState::kReady);
  EXPECT_EQ(x.counters().groups_completed, 2);  // n0, then n1 (chains 1 and 2 both vacate n1)
}

TEST(Migration, AbortAllLeavesNoReservationAndNoCordon) {
  ClusterBuilder c;
  const NodeId n0 = c.AddNode("n0"), n1 = c.AddNode("n1"), n2 = c.AddNode("n2");
  const TaskId a = Place(c, "a", Req().Gpus(2), n0, Idx({0, 1}));
  const TaskId b = Place(c, "b", Req().Gpus(2), n0, Idx({2, 3}));
  Place(c, "c", Req().Gpus(6), n1, Idx({0, 1, 2, 3, 4, 5}));
  Place(c, "d", Req().Gpus(6), n2, Idx({0, 1, 2, 3, 4, 5}));
  DefragPlan p;
  p.moves = {Mv(a, n0, n1, {6, 7}, 0), Mv(b, n0, n2, {6, 7}, 1)};
  MigrationOptions o = Opts();
  o.per_node = 1;
  MigrationExecutor x(o);
  x.Submit(c.state, p);
  StepAt(x, c.state, 0);
  x.AbortAll(c.state, 50);
  EXPECT_TRUE(c.state.available_capacity_reservations().empty());
  EXPECT_EQ(c.state.node(n0).state, NodeState::kReady);
  EXPECT_EQ(c.state.task(a).node, n0);
  EXPECT_FALSE(x.Busy());
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(Migration, BadOptionsAreNamed) {
  auto msg = [](auto set) {
    MigrationOptions o;
    set(o);
    return MigrationExecutor::Validate(o).message();
  };
  EXPECT_TRUE(MigrationExecutor::Validate(MigrationOptions()).ok());
  EXPECT_EQ(msg([](MigrationOptions& o) { o.max_concurrent = 0; }), "max_concurrent: 0 (must be >= 1)");
  EXPECT_EQ(msg([](MigrationOptions& o) { o.per_node = -1; }), "per_node: -1 (must be >= 1)");
  EXPECT_EQ(msg([](MigrationOptions& o) { o.per_job = 0; }), "per_job: 0 (must be >= 1)");
  EXPECT_EQ(msg([](MigrationOptions& o) { o.max_moves = -3; }), "max_moves: -3 (must be >= 0)");
  EXPECT_EQ(msg([](MigrationOptions& o) { o.timeout_s = o.startup_s; }), "timeout_s: 120 (must be > startup_s)");
  EXPECT_EQ(msg([](MigrationOptions& o) { o.fail_permille = 1001; }), "fail_permille: 1001 (must be in [0, 1000])");
}

// Random clusters, IPC plans executed with 20% failing targets, nodes killed and jobs ending at
// random during the migrations: after every step the invariants hold, no task is lost or
// duplicated (every task that did not end is bound exactly once), no job has fewer bound tasks
// than before, and when the executor is idle no reservation and no cordon is left.
TEST(Migration, FaultsAtRandomKeepEveryInvariant) {
  MigrationCounters total;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(seed);
    ClusterBuilder c;
    const int nodes = 12;
    for (int i = 0; i < nodes; ++i) c.AddNode("n" + std::to_string(i));
    std::vector<TaskId> tasks;
    for (int i = 0; i < nodes; ++i) {
      int used = 0;
      const int target = 1 + static_cast<int>(rng.Uniform(6));
      while (used < target) {
        const int g = std::min<int>(1 << rng.Uniform(3), target - used);
        GpuIndices idx;
        for (int k = 0; k < g; ++k) idx.Push(used + k);
        tasks.push_back(Place(c, "t" + std::to_string(tasks.size()), Req().Gpus(g), NodeId(static_cast<uint32_t>(i)), idx));
        used += g;
      }
    }
    const DefragPlan p = DefragAction::Plan(c.state, {}, DefragOptions());
    ASSERT_FALSE(p.moves.empty());
    MigrationOptions o = Opts();
    o.fail_permille = 200;
    o.max_concurrent = 3;
    o.seed = seed;
    MigrationExecutor x(o);
    x.Submit(c.state, p);
    std::vector<char> ended(c.state.tasks().size(), 0);
    for (int64_t t = 0; x.Busy() && t < 100000; t += 60) {
      if (rng.Uniform(10) == 0) {  // a node dies (its tasks end) — often a target
        const NodeId victim(static_cast<uint32_t>(rng.Uniform(nodes)));
        const std::vector<TaskId> on(c.state.node(victim).tasks.begin(), c.state.node(victim).tasks.end());
        for (TaskId k : on) {
          c.state.Finish(k);
          ended[k.value()] = 1;
        }
        c.state.SetNodeState(victim, NodeState::kDown);
      }
      StepAt(x, c.state, t);
      for (TaskId k : tasks) {
        if (!ended[k.value()]) {
          ASSERT_EQ(c.state.task(k).state, TaskState::kBound) << c.state.task(k).name;
        }
      }
    }
    ASSERT_FALSE(x.Busy());
    EXPECT_TRUE(c.state.available_capacity_reservations().empty());
    for (const Node& n : c.state.nodes()) EXPECT_NE(n.state, NodeState::kCordoned) << n.spec.name;
    const MigrationCounters& k = x.counters();
    EXPECT_EQ(k.planned, k.completed + k.aborted + k.cancelled);
    EXPECT_EQ(k.started, k.completed + k.aborted);
    total.completed += k.completed;
    total.aborted += k.aborted;
    total.cancelled += k.cancelled;
  }
  // The runs exercised every path.
  EXPECT_GT(total.completed, 0);
  EXPECT_GT(total.aborted, 0);
  EXPECT_GT(total.cancelled, 0);
  std::printf("completed %lld aborted %lld cancelled %lld\n", static_cast<long long>(total.completed),
              static_cast<long long>(total.aborted), static_cast<long long>(total.cancelled));
}


TEST(Migration, AcknowledgedMovesCompleteOnlyWhenTheNewInstanceIsSaidToRunAndAbortWhenItFailsOrIsSilent) {
  ClusterBuilder c;
  const NodeId n0 = c.AddNode("n0"), n1 = c.AddNode("n1");
  const TaskId a = Place(c, "a", Req().Gpus(2), n0, Idx({0, 1}));
  const TaskId b = Place(c, "b", Req().Gpus(2), n0, Idx({2, 3}));
  const TaskId d = Place(c, "d", Req().Gpus(2), n0, Idx({4, 5}));
  Place(c, "e", Req().Gpus(4), n1, Idx({0, 1, 2, 3}));
  DefragPlan p;
  p.moves = {Mv(a, n0, n1, {4, 5}, 0), Mv(b, n0, n1, {6, 7}, 1)};
  MigrationOptions o = Opts();
  o.acknowledged = true;
  o.timeout_s = 300;
  MigrationExecutor x(o);
  ASSERT_EQ(x.Submit(c.state, p), 2);
  StepAt(x, c.state, 100);
  EXPECT_EQ(x.NextDue(), 400);  // the timeout, not startup_s
  EXPECT_FALSE(x.Acknowledge(d, true));  // d does not move
  // Long past startup_s, nothing completes without a word from the new instance.
  StepAt(x, c.state, 399);
  EXPECT_EQ(c.state.task(a).node, n0);
  EXPECT_EQ(c.state.task(b).node, n0);
  EXPECT_TRUE(x.Acknowledge(a, true));
  EXPECT_EQ(c.state.task(a).node, n0);  // at the next step
  StepAt(x, c.state, 399);
  EXPECT_EQ(c.state.task(a).node, n1);
  EXPECT_EQ(G(c.state.task(a).gpus), (std::vector<int>{4, 5}));
  EXPECT_EQ(c.state.task(b).node, n0);
  // b's new instance never says anything: aborted at its timeout, the old instance kept.
  StepAt(x, c.state, 400);
  EXPECT_EQ(c.state.task(b).node, n0);
  EXPECT_EQ(x.counters().completed, 1);
  EXPECT_EQ(x.counters().aborted, 1);
  EXPECT_EQ(c.state.reserved_gpu_milli(), 0);
  EXPECT_FALSE(x.Busy());

  // A failure reported aborts at once.
  DefragPlan q;
  q.moves = {Mv(d, n0, n1, {6, 7}, 0)};
  ASSERT_EQ(x.Submit(c.state, q), 1);
  StepAt(x, c.state, 500);
  EXPECT_TRUE(x.Acknowledge(d, false));
  StepAt(x, c.state, 501);
  EXPECT_EQ(c.state.task(d).node, n0);
  EXPECT_EQ(x.counters().aborted, 2);
  EXPECT_FALSE(x.Acknowledge(d, true));  // no starting move any more
  StepAt(x, c.state, 502);
  EXPECT_EQ(c.state.task(d).node, n0);
}

TEST(MigrationCounters, SummedOverExecutorsEveryCountAdds) {
  MigrationCounters a{1, 2, 3, 4, 5, 6, 7};
  const MigrationCounters b{10, 20, 30, 40, 50, 60, 70};
  a += b;
  EXPECT_EQ(a.planned, 11);
  EXPECT_EQ(a.started, 22);
  EXPECT_EQ(a.completed, 33);
  EXPECT_EQ(a.aborted, 44);
  EXPECT_EQ(a.cancelled, 55);
  EXPECT_EQ(a.groups_completed, 66);
  EXPECT_EQ(a.double_occupancy_gpu_milli_s, 77);
}

}  // namespace
}  // namespace estuary
