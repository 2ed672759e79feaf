#include "model/cluster_state.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::ClusterBuilder;
using testing::Idx;
using testing::Req;

TEST(ClusterState, ANewNodeHasAllCapacityFreeAndIsIndexedByItsFreeGpus) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(8));
  const Node& node = c.state.node(n);
  EXPECT_EQ(node.cpu_free, 96000);
  EXPECT_EQ(node.full_free_gpus, 8);
  EXPECT_EQ(node.gpu_free_total, 8000);
  EXPECT_EQ(c.state.total_gpu_milli(), 8000);
  ASSERT_EQ(c.state.nodes_with_full_free(8).size(), 1u);
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(ClusterState, BindingASharedTaskTakesMilliFromOneGpuOnly) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(2));
  TaskId t = c.Submit("t", Req().Cpu(1000).Mem(10).SharedGpu(300));
  c.state.Bind(t, n, Idx({1}));
  const Node& node = c.state.node(n);
  EXPECT_EQ(node.gpu_free[0], 1000);
  EXPECT_EQ(node.gpu_free[1], 700);
  EXPECT_EQ(node.full_free_gpus, 1);
  EXPECT_EQ(node.max_gpu_free, 1000);
  EXPECT_EQ(c.state.allocated_gpu_milli(), 300);
  EXPECT_EQ(c.state.nodes_with_full_free(1).size(), 1u);
  EXPECT_TRUE(c.state.nodes_with_full_free(2).empty());
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(ClusterState, UnbindRestoresExactlyWhatBindTook) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(4));
  TaskId t = c.Submit("t", Req().Cpu(5000).Mem(100).Gpus(2));
  const uint32_t v0 = c.state.node(n).version;
  c.state.Bind(t, n, Idx({0, 3}));
  EXPECT_GT(c.state.node(n).version, v0);
  c.state.Unbind(t);
  const Node& node = c.state.node(n);
  EXPECT_EQ(node.cpu_free, 96000);
  EXPECT_EQ(node.full_free_gpus, 4);
  EXPECT_EQ(c.state.task(t).state, TaskState::kPending);
  EXPECT_FALSE(c.state.task(t).node.valid());
  EXPECT_EQ(c.state.allocated_gpu_milli(), 0);
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(ClusterState, TheJobLogListsTheJobOfEveryBindAndReleaseOnceQueueOrNotUntilCleared) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(4));
  TaskId a = c.Submit("a", Req().Gpus(1));  // no queue
  TaskId b = c.Submit("b", Req().Gpus(2));
  c.state.ClearJobLog();
  c.state.Bind(a, n, Idx({0}));
  c.state.Bind(b, n, Idx({1, 2}));
  c.state.Unbind(a);
  const JobId ja = c.state.task(a).job, jb = c.state.task(b).job;
  EXPECT_EQ(c.state.job_log(), (std::vector<JobId>{ja, jb}));  // each once
  EXPECT_FALSE(c.state.job_log_overflowed());
  c.state.ClearJobLog();
  EXPECT_TRUE(c.state.job_log().empty());
  c.state.Finish(b);
  EXPECT_EQ(c.state.job_log(), (std::vector<JobId>{jb}));
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(ClusterState, CanBindRefusesOverCommitWrongIndicesAndWrongModels) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(2));
  TaskId big = c.Submit("big", Req().Cpu(1000).Gpus(2));
  TaskId cpu_hog = c.Submit("hog", Req().Cpu(200000));
  TaskId shared = c.Submit("s", Req().SharedGpu(600));
  TaskId pinned = c.Submit("p", Req().Gpus(1).Models(GpuModelSet::FromBits(1u << 5)));
  EXPECT_FALSE(c.state.CanBind(big, n, Idx({0})));      // too few indices
  EXPECT_FALSE(c.state.CanBind(big, n, Idx({0, 0})));   // the same GPU twice
  EXPECT_FALSE(c.state.CanBind(big, n, Idx({0, 2})));   // no GPU 2
  EXPECT_FALSE(c.state.CanBind(cpu_hog, n, Idx({})));   // CPU over-commit
  EXPECT_FALSE(c.state.CanBind(pinned, n, Idx({0})));   // model not allowed
  EXPECT_TRUE(c.state.CanBind(shared, n, Idx({1})));
  c.state.Bind(shared, n, Idx({1}));
  EXPECT_FALSE(c.state.CanBind(big, n, Idx({0, 1})));  // GPU 1 has only 400 left
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(ClusterState, FinishFreesABoundTaskAndMarksItFinished) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(1));
  TaskId t = c.Submit("t", Req().Gpus(1));
  c.state.Bind(t, n, Idx({0}));
  c.state.Finish(t);
  EXPECT_EQ(c.state.task(t).state, TaskState::kFinished);
  EXPECT_EQ(c.state.node(n).full_free_gpus, 1);
  EXPECT_EQ(c.state.num_bound_tasks(), 0);
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(ClusterState, AddNodeRejectsDuplicateNamesAndTooManyGpus) {
  ClusterState s;
  NodeSpec a;
  a.name = "a";
  ASSERT_TRUE(s.AddNode(a).ok());
  EXPECT_FALSE(s.AddNode(a).ok());
  NodeSpec b;
  b.name = "b";
  b.gpu_count = kMaxGpusPerNode + 1;
  auto r = s.AddNode(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("GPUs exceed"), std::string::npos);
}

TEST(ClusterState, NodeStateChangesAreVisibleInThePackedFilterView) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0");
  c.state.SetNodeState(n, NodeState::kDown);
  EXPECT_FALSE(c.state.fits()[n.value()].schedulable);
  c.state.SetNodeState(n, NodeState::kReady);
  EXPECT_TRUE(c.state.fits()[n.value()].schedulable);
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

// The nodes the change feed reports after `cursor`, each once.
std::set<uint32_t> ChangedSince(const ClusterState& s, uint64_t cursor) {
  std::set<uint32_t> out;
  EXPECT_TRUE(s.ForEachChangeSince(cursor, [&](NodeId id) { out.insert(id.value()); }));
  return out;
}

TEST(ClusterStateReservations, HoldingNodesMarksThemForTheOwnerBumpsTheirVersionsAndFeedsTheChange) {
  ClusterBuilder c;
  NodeId a = c.AddNode("a"), b = c.AddNode("b"), n = c.AddNode("c");
  const JobId owner = c.state.task(c.Submit("owner", Req().Gpus(8))).job;
  const JobId other = c.state.task(c.Submit("other", Req().Gpus(1))).job;
  const uint32_t va = c.state.node(a).version, vb = c.state.node(b).version, vc = c.state.node(n).version;
  const uint64_t cursor = c.state.change_seq();

  const std::vector<NodeId> held = {a, n};
  const ReservationId r = c.state.AddReservation(owner, held);

  ASSERT_TRUE(r.valid());
  EXPECT_EQ(c.state.node(a).reservation, r);
  EXPECT_EQ(c.state.node(n).reservation, r);
  EXPECT_FALSE(c.state.node(b).reservation.valid());
  EXPECT_EQ(c.state.fits()[a.value()].reserved_for, owner);
  EXPECT_EQ(c.state.fits()[n.value()].reserved_for, owner);
  EXPECT_FALSE(c.state.fits()[b.value()].reserved_for.valid());
  EXPECT_EQ(c.state.job(owner).reservation, r);
  EXPECT_FALSE(c.state.job(other).reservation.valid());
  const Reservation& rec = c.state.reservation(r);
  EXPECT_TRUE(rec.active);
  EXPECT_EQ(rec.owner, owner);
  EXPECT_EQ(rec.nodes, held);
  EXPECT_EQ(c.state.reservations().size(), 1u);
  EXPECT_GT(c.state.node(a).version, va);
  EXPECT_GT(c.state.node(n).version, vc);
  EXPECT_EQ(c.state.node(b).version, vb);  // untouched
  EXPECT_EQ(ChangedSince(c.state, cursor), (std::set<uint32_t>{a.value(), n.value()}));
  EXPECT_TRUE(c.state.CheckInvariants().ok()) << c.state.CheckInvariants().message();
}

TEST(ClusterStateReservations, ReleasingAHoldClearsEveryMarkAndFeedsTheChange) {
  ClusterBuilder c;
  NodeId a = c.AddNode("a"), b = c.AddNode("b"), n = c.AddNode("c");
  const JobId owner = c.state.task(c.Submit("owner", Req().Gpus(8))).job;
  const std::vector<NodeId> held = {a, n};
  const ReservationId r = c.state.AddReservation(owner, held);
  const uint32_t va = c.state.node(a).version, vb = c.state.node(b).version, vc = c.state.node(n).version;
  const uint64_t cursor = c.state.change_seq();

  c.state.ReleaseReservation(r);

  for (NodeId id : {a, b, n}) {
    EXPECT_FALSE(c.state.node(id).reservation.valid()) << c.state.node(id).spec.name;
    EXPECT_FALSE(c.state.fits()[id.value()].reserved_for.valid()) << c.state.node(id).spec.name;
  }
  EXPECT_FALSE(c.state.job(owner).reservation.valid());
  EXPECT_FALSE(c.state.reservation(r).active);
  EXPECT_TRUE(c.state.reservation(r).nodes.empty());
  EXPECT_EQ(c.state.reservations().size(), 1u);  // the record stays, released
  EXPECT_GT(c.state.node(a).version, va);
  EXPECT_GT(c.state.node(n).version, vc);
  EXPECT_EQ(c.state.node(b).version, vb);
  EXPECT_EQ(ChangedSince(c.state, cursor), (std::set<uint32_t>{a.value(), n.value()}));
  EXPECT_TRUE(c.state.CheckInvariants().ok()) << c.state.CheckInvariants().message();

  // Released, the owner may hold nodes again — any of them, under a new id.
  const std::vector<NodeId> again = {b, a};
  const ReservationId r2 = c.state.AddReservation(owner, again);
  EXPECT_NE(r2, r);
  EXPECT_EQ(c.state.job(owner).reservation, r2);
  EXPECT_EQ(c.state.fits()[b.value()].reserved_for, owner);
  EXPECT_EQ(c.state.fits()[a.value()].reserved_for, owner);
  EXPECT_FALSE(c.state.fits()[n.value()].reserved_for.valid());
  EXPECT_EQ(c.state.reservations().size(), 2u);
  EXPECT_TRUE(c.state.CheckInvariants().ok()) << c.state.CheckInvariants().message();
}

TEST(ClusterStateReservations, AHoldOutlivesBindsFinishesAndStateChangesOfItsNode) {
  // Work already on a held node keeps running there; the hold is not lost when the node's
  // capacity or state changes.
  ClusterBuilder c;
  NodeId a = c.AddNode("a", testing::Gpus(4));
  TaskId running = c.Submit("running", Req().Cpu(1000).Gpus(2));
  c.state.Bind(running, a, Idx({0, 1}));
  const JobId owner = c.state.task(c.Submit("owner", Req().Gpus(4))).job;
  const std::vector<NodeId> held = {a};
  const ReservationId r = c.state.AddReservation(owner, held);
  EXPECT_TRUE(c.state.CheckInvariants().ok()) << c.state.CheckInvariants().message();

  TaskId more = c.Submit("more", Req().SharedGpu(500));
  c.state.Bind(more, a, Idx({2}));
  EXPECT_EQ(c.state.fits()[a.value()].reserved_for, owner);
  EXPECT_TRUE(c.state.CheckInvariants().ok()) << c.state.CheckInvariants().message();
  c.state.Finish(running);
  c.state.Unbind(more);
  EXPECT_EQ(c.state.node(a).reservation, r);
  EXPECT_EQ(c.state.fits()[a.value()].reserved_for, owner);
  EXPECT_EQ(c.state.fits()[a.value()].full_free_gpus, 4);
  EXPECT_TRUE(c.state.CheckInvariants().ok()) << c.state.CheckInvariants().message();
  c.state.SetNodeState(a, NodeState::kCordoned);
  EXPECT_EQ(c.state.fits()[a.value()].reserved_for, owner);
  EXPECT_FALSE(c.state.fits()[a.value()].schedulable);
  c.state.SetNodeState(a, NodeState::kReady);
  EXPECT_EQ(c.state.node(a).reservation, r);
  EXPECT_EQ(c.state.job(owner).reservation, r);
  EXPECT_TRUE(c.state.CheckInvariants().ok()) << c.state.CheckInvariants().message();
}

TEST(ClusterStateReservations, HoldsOfTwoJobsStayApartAndReleaseIndependently) {
  ClusterBuilder c;
  NodeId a = c.AddNode("a"), b = c.AddNode("b");
  const JobId j1 = c.state.task(c.Submit("j1", Req().Gpus(8))).job;
  const JobId j2 = c.state.task(c.Submit("j2", Req().Gpus(8))).job;
  const std::vector<NodeId> for1 = {a}, for2 = {b};
  const ReservationId r1 = c.state.AddReservation(j1, for1);
  const ReservationId r2 = c.state.AddReservation(j2, for2);
  EXPECT_EQ(c.state.fits()[a.value()].reserved_for, j1);
  EXPECT_EQ(c.state.fits()[b.value()].reserved_for, j2);
  EXPECT_TRUE(c.state.CheckInvariants().ok()) << c.state.CheckInvariants().message();
  c.state.ReleaseReservation(r1);
  EXPECT_FALSE(c.state.fits()[a.value()].reserved_for.valid());
  EXPECT_EQ(c.state.fits()[b.value()].reserved_for, j2);
  EXPECT_EQ(c.state.job(j2).reservation, r2);
  EXPECT_TRUE(c.state.reservation(r2).active);
  EXPECT_TRUE(c.state.CheckInvariants().ok()) << c.state.CheckInvariants().message();
}

// Standby (SpotGPU): a bound replica lends its whole GPUs and CPU; borrowers run on them.
struct Lending {
  ClusterBuilder c;
  NodeId n0, n1;
  TaskId svc;  // 4 GPUs (0-3), 8 cores, 64 GiB on n0
  Lending() {
    n0 = c.AddNode("n0", testing::Gpus(8));
    n1 = c.AddNode("n1", testing::Gpus(8));
    svc = c.Submit("svc", Req().Cpu(8000).Mem(65536).Gpus(4));
    c.state.Bind(svc, n0, Idx({0, 1, 2, 3}));
  }
  TaskId Spot(const std::string& name, TaskRequest req) { return c.Submit(name, req); }
  void ExpectInvariants() const {
    const Status s = c.state.CheckInvariants();
    EXPECT_TRUE(s.ok()) << s.message();
  }
};

TEST(ClusterStateStandby, EnteringStandbyLendsTheGpusAndCpuButKeepsThemTakenForNormalPlacement) {
  Lending l;
  const Node& n = l.c.state.node(l.n0);
  const NodeFit fit = l.c.state.fits()[l.n0.value()];
  const uint32_t version = n.version;
  const uint64_t epoch = l.c.state.epoch();
  const uint64_t cursor = l.c.state.change_seq();
  ASSERT_TRUE(l.c.state.CanEnterStandby(l.svc));
  l.c.state.EnterStandby(l.svc);
  EXPECT_TRUE(l.c.state.task(l.svc).standby);
  EXPECT_EQ(n.lent_gpus, 0xFu);
  EXPECT_EQ(n.lent_free, 0xFu);
  EXPECT_EQ(n.lent_cpu, 8000);
  EXPECT_EQ(n.lent_cpu_free, 8000);
  EXPECT_EQ(n.gpu_free_total, 4000);
  EXPECT_EQ(n.full_free_gpus, 4);
  EXPECT_EQ(n.cpu_free, 96000 - 8000);
  EXPECT_EQ(n.mem_free, 393216 - 65536);
  EXPECT_EQ(l.c.state.fits()[l.n0.value()].gpu_free_total, fit.gpu_free_total);
  EXPECT_EQ(l.c.state.nodes_with_full_free(4), std::vector<NodeId>{l.n0});
  EXPECT_EQ(l.c.state.allocated_gpu_milli(), 4000);
  EXPECT_GT(n.version, version);
  EXPECT_GT(l.c.state.epoch(), epoch);
  EXPECT_EQ(ChangedSince(l.c.state, cursor), (std::set<uint32_t>{l.n0.value()}));
  EXPECT_EQ(l.c.state.lending_nodes(), std::vector<NodeId>{l.n0});
  // A normal task cannot bind to the lent GPUs.
  const TaskId other = l.Spot("other", Req().Gpus(1));
  EXPECT_FALSE(l.c.state.CanBind(other, l.n0, Idx({0})));
  EXPECT_FALSE(l.c.state.CanEnterStandby(l.svc));  // already
  l.ExpectInvariants();
}

TEST(ClusterStateStandby, OnlyABoundWholeGpuTaskThatIsNeitherStandbyNorBorrowedMayEnterStandby) {
  Lending l;
  const TaskId pending = l.Spot("pending", Req().Gpus(1));
  const TaskId shared = l.Spot("shared", Req().SharedGpu(500));
  const TaskId cpu = l.Spot("cpu", Req().Cpu(1000));
  l.c.state.Bind(shared, l.n1, Idx({0}));
  l.c.state.Bind(cpu, l.n1, Idx({}));
  EXPECT_FALSE(l.c.state.CanEnterStandby(pending));
  EXPECT_FALSE(l.c.state.CanEnterStandby(shared));
  EXPECT_FALSE(l.c.state.CanEnterStandby(cpu));
  l.c.state.EnterStandby(l.svc);
  const TaskId b = l.Spot("b", Req().Cpu(1000).Gpus(1));
  l.c.state.BindBorrowed(b, l.n0, Idx({2}));
  EXPECT_FALSE(l.c.state.CanEnterStandby(b));
  EXPECT_FALSE(l.c.state.CanExitStandby(b));
  l.ExpectInvariants();
}

TEST(ClusterStateStandby, ABorrowerTakesLentGpusAndCpuAndRealMemory) {
  Lending l;
  l.c.state.EnterStandby(l.svc);
  const Node& n = l.c.state.node(l.n0);
  const int64_t gpu_free_total = n.gpu_free_total;
  const MilliCpu cpu_free = n.cpu_free;
  const uint32_t version = n.version;
  const uint64_t cursor = l.c.state.change_seq();
  const TaskId b = l.Spot("b", Req().Cpu(3000).Mem(1000).Gpus(2));
  ASSERT_TRUE(l.c.state.CanBindBorrowed(b, l.n0, Idx({1, 3})));
  l.c.state.BindBorrowed(b, l.n0, Idx({1, 3}));
  const Task& t = l.c.state.task(b);
  EXPECT_EQ(t.state, TaskState::kBound);
  EXPECT_TRUE(t.borrowed);
  EXPECT_EQ(n.lent_free, 0b0101u);
  EXPECT_EQ(n.lent_cpu_free, 5000);
  EXPECT_EQ(n.gpu_free_total, gpu_free_total);  // the standby task's, already counted taken
  EXPECT_EQ(n.cpu_free, cpu_free);
  EXPECT_EQ(n.mem_free, 393216 - 65536 - 1000);
  EXPECT_EQ(l.c.state.fits()[l.n0.value()].mem_free, n.mem_free);
  EXPECT_EQ(l.c.state.allocated_gpu_milli(), 4000);  // each physical GPU counted once
  EXPECT_EQ(l.c.state.allocated_cpu_milli(), 8000);
  EXPECT_EQ(l.c.state.num_bound_tasks(), 2);
  EXPECT_EQ(n.tasks.back(), b);
  EXPECT_GT(n.version, version);
  EXPECT_EQ(ChangedSince(l.c.state, cursor), (std::set<uint32_t>{l.n0.value()}));
  EXPECT_FALSE(l.c.state.CanExitStandby(l.svc));  // a borrower sits on its GPUs
  l.ExpectInvariants();

  l.c.state.Unbind(b);
  EXPECT_FALSE(l.c.state.task(b).borrowed);
  EXPECT_EQ(n.lent_free, 0xFu);
  EXPECT_EQ(n.lent_cpu_free, 8000);
  EXPECT_EQ(n.mem_free, 393216 - 65536);
  EXPECT_EQ(l.c.state.num_bound_tasks(), 1);
  EXPECT_TRUE(l.c.state.CanExitStandby(l.svc));
  l.ExpectInvariants();
  // Finish returns it the same way.
  l.c.state.BindBorrowed(b, l.n0, Idx({0, 2}));
  l.c.state.Finish(b);
  EXPECT_EQ(l.c.state.task(b).state, TaskState::kFinished);
  EXPECT_EQ(n.lent_free, 0xFu);
  l.ExpectInvariants();
}

// A one-task job `name` of queue q (a task named as its job).
TaskId TaskInQueue(ClusterState& s, const std::string& name, int32_t q, const TaskRequest& req, bool preemptible = false) {
  JobSpec js;
  js.name = name;
  js.queue = q;
  js.preemptible = preemptible;
  return s.AddTask(s.AddJob(js), name, req);
}

// Queues (issue 20): what a queue's bound tasks hold, per dimension, as tasks bind, lend, borrow
// and end.
TEST(ClusterStateQueues, AQueueHoldsWhatItsBoundTasksHoldAndAStandbyTasksGpusGoToItsBorrowersQueue) {
  Lending l;  // svc (no queue) holds 4 GPUs on n0
  ClusterState& s = l.c.state;
  s.SetQueues({2, 2, -1});  // queues 0 and 1 are children of 2
  auto in_queue = [&](const std::string& name, int32_t q, TaskRequest req) { return TaskInQueue(s, name, q, req); };
  const TaskId a = in_queue("a", 0, Req().Cpu(2000).Mem(100).Gpus(2));
  const TaskId b = in_queue("b", 1, Req().Cpu(1000).Mem(50).Gpus(2));
  s.Bind(a, l.n1, Idx({0, 1}));
  const GpuModelId model = s.node(l.n1).spec.model;
  EXPECT_EQ(s.queue_usage(0)[kQueueGpu], 2000);
  EXPECT_EQ(s.queue_usage(0)[kQueueModel + model.value()], 2000);
  EXPECT_EQ(s.queue_usage(0)[kQueueCpu], 2000);
  EXPECT_EQ(s.queue_usage(0)[kQueueMemory], 100);
  EXPECT_EQ(s.queue_usage(1)[kQueueGpu], 0);
  l.ExpectInvariants();
  // A task of queue 0 in Standby keeps only its memory; queue 1 borrows its GPUs.
  const TaskId lender = in_queue("lender", 0, Req().Cpu(1000).Mem(10).Gpus(2));
  s.Bind(lender, l.n1, Idx({2, 3}));
  s.EnterStandby(lender);
  EXPECT_EQ(s.queue_usage(0)[kQueueGpu], 2000);
  EXPECT_EQ(s.queue_usage(0)[kQueueCpu], 2000);
  EXPECT_EQ(s.queue_usage(0)[kQueueMemory], 110);
  s.BindBorrowed(b, l.n1, Idx({2, 3}));
  EXPECT_EQ(s.queue_usage(1)[kQueueGpu], 2000);
  EXPECT_EQ(s.queue_usage(1)[kQueueCpu], 1000);
  EXPECT_EQ(s.queue_usage(0)[kQueueGpu] + s.queue_usage(1)[kQueueGpu] + 4000, s.allocated_gpu_milli());
  EXPECT_EQ(s.queue_usage(2)[kQueueGpu], 4000);  // the parent holds what its children hold
  EXPECT_EQ(s.queue_usage(2)[kQueueMemory], 160);
  l.ExpectInvariants();
  s.Unbind(b);
  s.ExitStandby(lender);
  EXPECT_EQ(s.queue_usage(0)[kQueueGpu], 4000);
  EXPECT_EQ(s.queue_usage(0)[kQueueCpu], 3000);
  EXPECT_EQ(s.queue_usage(1), QueueUsage{});
  l.ExpectInvariants();
  s.Finish(a);
  s.Unbind(lender);
  EXPECT_EQ(s.queue_usage(0), QueueUsage{});
  EXPECT_EQ(s.queue_usage(2), QueueUsage{});
  l.ExpectInvariants();
}

// What a restore would add to each queue (the part of a limit Standby replicas keep): their lent
// GPUs and CPU up the lender's path, less the lent GPUs that work of the same queue or a
// descendant borrows (the restore evicts that work, which its queue already counts).
TEST(ClusterStateQueues, AQueueCountsWhatItsStandbyTasksLendLessWhatItsOwnWorkBorrowsOfIt) {
  Lending l;  // svc (no queue) holds GPUs 0-3 of n0
  ClusterState& s = l.c.state;
  s.SetQueues({2, 2, -1});  // queues 0 and 1 are children of 2
  auto in_queue = [&](const std::string& name, int32_t q, TaskRequest req) { return TaskInQueue(s, name, q, req, true); };
  const GpuModelId model = s.node(l.n1).spec.model;
  const TaskId lender = in_queue("lender", 0, Req().Cpu(2000).Mem(10).Gpus(4));
  s.Bind(lender, l.n1, Idx({0, 1, 2, 3}));
  EXPECT_EQ(s.queue_restorable(0), QueueUsage{});  // running: nothing to restore
  s.EnterStandby(lender);
  QueueUsage lent{};
  lent[kQueueGpu] = 4000;
  lent[kQueueModel + model.value()] = 4000;
  lent[kQueueCpu] = 2000;
  EXPECT_EQ(s.queue_restorable(0), lent);
  EXPECT_EQ(s.queue_restorable(2), lent);
  EXPECT_EQ(s.queue_restorable(1), QueueUsage{});
  l.ExpectInvariants();
  // Queue 0's own spot task borrows GPU 0: a restore evicts it, so queue 0 (and 2) would come to
  // hold 4 GPUs, not 5. Its CPU stays counted (the lent pool's, no one lender's).
  const TaskId own = in_queue("own", 0, Req().Cpu(500).Mem(10).Gpus(1));
  s.BindBorrowed(own, l.n1, Idx({0}));
  EXPECT_EQ(s.queue_restorable(0)[kQueueGpu], 3000);
  EXPECT_EQ(s.queue_restorable(0)[kQueueModel + model.value()], 3000);
  EXPECT_EQ(s.queue_restorable(0)[kQueueCpu], 2000);
  EXPECT_EQ(s.queue_restorable(2)[kQueueGpu], 3000);
  // Queue 1's task borrows GPUs 1 and 2: queue 0 still loses it all to a restore; their parent
  // gets back only the GPU no one of its queues uses.
  const TaskId other = in_queue("other", 1, Req().Cpu(1000).Mem(10).Gpus(2));
  s.BindBorrowed(other, l.n1, Idx({1, 2}));
  EXPECT_EQ(s.queue_restorable(0)[kQueueGpu], 3000);
  EXPECT_EQ(s.queue_restorable(1), QueueUsage{});
  EXPECT_EQ(s.queue_restorable(2)[kQueueGpu], 1000);
  // What each would hold after the restore, as the restore leaves it: the lender's 4 GPUs.
  EXPECT_EQ(s.queue_usage(0)[kQueueGpu] + s.queue_restorable(0)[kQueueGpu], 4000);
  EXPECT_EQ(s.queue_usage(2)[kQueueGpu] + s.queue_restorable(2)[kQueueGpu], 4000);
  l.ExpectInvariants();
  s.Unbind(own);
  s.Unbind(other);
  EXPECT_EQ(s.queue_restorable(0), lent);
  EXPECT_EQ(s.queue_restorable(2), lent);
  s.ExitStandby(lender);
  for (size_t q = 0; q < 3; ++q) EXPECT_EQ(s.queue_restorable(q), QueueUsage{}) << q;
  EXPECT_EQ(s.queue_usage(0)[kQueueGpu], 4000);
  l.ExpectInvariants();
}

// What a Reclaim's quick refusals read: free GPUs per model, and per queue its preemptible jobs
// with a bound task and the smallest GPU amount one of their tasks holds.
TEST(ClusterStateQueues, FreeGpusPerModelUnheldOnesAndEachQueuesPreemptibleJobsAndSmallestTaskFollowChanges) {
  ClusterBuilder c;
  ClusterState& s = c.state;
  testing::NodeShape h800 = testing::Gpus(8);
  h800.model = "H800";
  testing::NodeShape a10 = testing::Gpus(4);
  a10.model = "A10";
  const NodeId h = c.AddNode("h", h800);
  const NodeId a = c.AddNode("a", a10);
  const GpuModelSet only_h800 = c.ModelSet("H800"), only_a10 = c.ModelSet("A10");
  EXPECT_EQ(s.free_gpu_milli(only_h800), 8000);
  EXPECT_EQ(s.free_gpu_milli(only_a10), 4000);
  EXPECT_EQ(s.free_gpu_milli(GpuModelSet()), 12000);
  s.SetQueues({-1, -1});
  auto job = [&](const std::string& name, int32_t q, bool preemptible, int tasks, TaskRequest req) {
    JobSpec js;
    js.name = name;
    js.queue = q;
    js.preemptible = preemptible;
    const JobId id = s.AddJob(js);
    std::vector<TaskId> out;
    for (int i = 0; i < tasks; ++i) out.push_back(s.AddTask(id, name + std::to_string(i), req));
    return out;
  };
  const std::vector<TaskId> gang = job("gang", 0, true, 2, Req().Cpu(1000).Mem(10).Gpus(2));
  const std::vector<TaskId> small = job("small", 0, true, 1, Req().Cpu(1000).Mem(10).SharedGpu(500));
  const std::vector<TaskId> fixed = job("fixed", 0, false, 1, Req().Cpu(1000).Mem(10).Gpus(1));
  const std::vector<TaskId> other = job("other", 1, true, 1, Req().Cpu(1000).Mem(10).Gpus(2));
  EXPECT_TRUE(s.queue_preemptible_jobs(0).empty());
  EXPECT_EQ(s.queue_min_preemptible(0, GpuModelSet()), INT64_MAX);
  s.Bind(gang[0], h, Idx({0, 1}));
  s.Bind(gang[1], h, Idx({2, 3}));
  s.Bind(small[0], a, Idx({0}));
  s.Bind(fixed[0], h, Idx({4}));
  s.Bind(other[0], h, Idx({5, 6}));
  EXPECT_EQ(s.free_gpu_milli(only_h800), 1000);  // 8 - 4 (gang) - 1 (fixed) - 2 (other)
  EXPECT_EQ(s.unheld_free_gpu_milli(only_h800), 1000);
  EXPECT_EQ(s.free_gpu_milli(only_a10), 3500);   // 4 - 0.5 (small)
  EXPECT_EQ(s.free_gpu_milli(GpuModelSet()), 4500);
  std::set<JobId> q0(s.queue_preemptible_jobs(0).begin(), s.queue_preemptible_jobs(0).end());
  EXPECT_EQ(q0, (std::set<JobId>{s.task(gang[0]).job, s.task(small[0]).job}));  // not the non-preemptible one
  EXPECT_EQ(s.queue_preemptible_jobs(1).size(), 1u);
  EXPECT_EQ(s.queue_min_preemptible(0, only_h800), 2000);  // one task of the gang
  EXPECT_EQ(s.queue_min_preemptible(0, only_a10), 500);
  EXPECT_EQ(s.queue_min_preemptible(0, GpuModelSet()), 500);
  EXPECT_EQ(s.queue_min_preemptible(1, only_h800), 2000);
  EXPECT_EQ(s.queue_min_preemptible(1, only_a10), INT64_MAX);
  EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants().message();
  // A job stays listed while any of its tasks is bound.
  s.Finish(gang[0]);
  EXPECT_EQ(s.queue_preemptible_jobs(0).size(), 2u);
  EXPECT_EQ(s.free_gpu_milli(only_h800), 3000);
  s.Finish(gang[1]);
  s.Unbind(small[0]);
  EXPECT_TRUE(s.queue_preemptible_jobs(0).empty());
  EXPECT_EQ(s.queue_min_preemptible(0, GpuModelSet()), INT64_MAX);
  EXPECT_EQ(s.free_gpu_milli(only_h800), 5000);
  EXPECT_EQ(s.free_gpu_milli(only_a10), 4000);
  EXPECT_EQ(s.unheld_free_gpu_milli(GpuModelSet()), 9000);
  // Held or down, a node's free GPUs are free but not unheld.
  JobSpec hs;
  hs.name = "holder";
  const JobId holder = s.AddJob(hs);
  const NodeId held[] = {h};
  const ReservationId r = s.AddReservation(holder, held);
  EXPECT_EQ(s.free_gpu_milli(only_h800), 5000);
  EXPECT_EQ(s.unheld_free_gpu_milli(only_h800), 0);
  s.SetNodeState(a, NodeState::kDown);
  EXPECT_EQ(s.unheld_free_gpu_milli(only_a10), 0);
  EXPECT_EQ(s.unheld_free_gpu_milli(GpuModelSet()), 0);
  EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants().message();
  s.ReleaseReservation(r);
  s.SetNodeState(a, NodeState::kReady);
  EXPECT_EQ(s.unheld_free_gpu_milli(only_h800), 5000);
  EXPECT_EQ(s.unheld_free_gpu_milli(only_a10), 4000);
  EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants().message();
}

// Queues replaced while jobs exist (Engine::SetQueues at run time): each queue's preemptible
// jobs are listed anew, and jobs added before the change (above the ids seen so far) are listed
// and taken out of the lists by their place as any other. Found by the service's liveness run
// (queues changed at run time): a bind wrote past the places' table and crashed.
TEST(ClusterStateQueues, ReplacedQueuesListThePreemptibleJobsOfEveryJobAddedBeforeTheChange) {
  ClusterBuilder c;
  ClusterState& s = c.state;
  const NodeId n = c.AddNode("n", testing::Gpus(8));
  s.SetQueues({-1, -1});
  auto job = [&](const std::string& name, int32_t q) {
    JobSpec js;
    js.name = name;
    js.queue = q;
    js.preemptible = true;
    return s.AddTask(s.AddJob(js), name, Req().Cpu(1000).Mem(10).Gpus(1));
  };
  const TaskId first = job("first", 0);
  s.Bind(first, n, Idx({0}));
  std::vector<TaskId> later;
  for (int i = 0; i < 6; ++i) later.push_back(job("later" + std::to_string(i), i % 2));
  // The queues swapped (0 -> 1, 1 -> 0) with the first job bound, then the later ones bound.
  s.ReplaceQueues({-1, -1}, {1, 0});
  EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants().message();
  for (size_t i = 0; i < later.size(); ++i) s.Bind(later[i], n, Idx({static_cast<int>(i) + 1}));
  EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants().message();
  EXPECT_EQ(s.queue_preemptible_jobs(0).size(), 3u);  // later1, later3, later5
  EXPECT_EQ(s.queue_preemptible_jobs(1).size(), 4u);  // first, later0, later2, later4
  // Taken out by their places, in an order that moves the lists' last entries.
  for (size_t i : {0, 3, 5, 1}) s.Unbind(later[i]);
  s.Unbind(first);
  EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants().message();
  std::set<JobId> q0(s.queue_preemptible_jobs(0).begin(), s.queue_preemptible_jobs(0).end());
  std::set<JobId> q1(s.queue_preemptible_jobs(1).begin(), s.queue_preemptible_jobs(1).end());
  EXPECT_EQ(q0, std::set<JobId>{});
  EXPECT_EQ(q1, (std::set<JobId>{s.task(later[2]).job, s.task(later[4]).job}));
}

TEST(ClusterStateStandby, CanBindBorrowedRefusesWhatTheLentPoolOrTheNodeCannotGive) {
  Lending l;
  l.c.state.EnterStandby(l.svc);
  const TaskId b = l.Spot("b", Req().Cpu(1000).Gpus(2));
  EXPECT_FALSE(l.c.state.CanBindBorrowed(b, l.n0, Idx({3, 4})));  // GPU 4 is not lent
  EXPECT_FALSE(l.c.state.CanBindBorrowed(b, l.n0, Idx({1, 1})));  // the same GPU twice
  EXPECT_FALSE(l.c.state.CanBindBorrowed(b, l.n0, Idx({1})));     // too few
  EXPECT_FALSE(l.c.state.CanBindBorrowed(b, l.n1, Idx({0, 1})));  // n1 lends nothing
  EXPECT_FALSE(l.c.state.CanBindBorrowed(l.Spot("cpu", Req().Cpu(9000).Gpus(1)), l.n0, Idx({0})));
  EXPECT_FALSE(l.c.state.CanBindBorrowed(l.Spot("mem", Req().Mem(393216).Gpus(1)), l.n0, Idx({0})));
  EXPECT_FALSE(l.c.state.CanBindBorrowed(l.Spot("shared", Req().SharedGpu(500)), l.n0, Idx({0})));
  EXPECT_FALSE(l.c.state.CanBindBorrowed(l.Spot("model", Req().Gpus(1).Models(GpuModelSet::FromBits(1u << 5))),
                                         l.n0, Idx({0})));
  EXPECT_TRUE(l.c.state.CanBindBorrowed(b, l.n0, Idx({1, 2})));
  l.c.state.BindBorrowed(b, l.n0, Idx({1, 2}));
  EXPECT_FALSE(l.c.state.CanBindBorrowed(l.Spot("again", Req().Gpus(1)), l.n0, Idx({2})));  // taken
  l.c.state.SetNodeState(l.n0, NodeState::kCordoned);
  EXPECT_FALSE(l.c.state.CanBindBorrowed(l.Spot("cordoned", Req().Gpus(1)), l.n0, Idx({0})));
  l.ExpectInvariants();
}

TEST(ClusterStateStandby, ExitingStandbyNeedsTheLentCpuBackAndUnbindingAStandbyTaskLeavesStandby) {
  Lending l;
  const TaskId svc2 = l.c.Submit("svc2", Req().Cpu(8000).Gpus(4));
  l.c.state.Bind(svc2, l.n0, Idx({4, 5, 6, 7}));
  l.c.state.EnterStandby(l.svc);
  l.c.state.EnterStandby(svc2);
  // A borrower on svc2's GPUs using 12 of the 16 lent cores: svc may not leave (4 < 8 cores).
  const TaskId b = l.Spot("b", Req().Cpu(12000).Gpus(1));
  l.c.state.BindBorrowed(b, l.n0, Idx({7}));
  EXPECT_FALSE(l.c.state.CanExitStandby(l.svc));
  l.ExpectInvariants();
  l.c.state.Unbind(b);
  ASSERT_TRUE(l.c.state.CanExitStandby(l.svc));
  l.c.state.Unbind(l.svc);  // leaves Standby, then is freed
  const Node& n = l.c.state.node(l.n0);
  EXPECT_FALSE(l.c.state.task(l.svc).standby);
  EXPECT_EQ(n.lent_gpus, 0xF0u);
  EXPECT_EQ(n.lent_cpu, 8000);
  EXPECT_EQ(n.full_free_gpus, 4);
  l.ExpectInvariants();
  l.c.state.Finish(svc2);
  EXPECT_FALSE(l.c.state.task(svc2).standby);
  EXPECT_EQ(n.lent_gpus, 0u);
  EXPECT_TRUE(l.c.state.lending_nodes().empty());
  EXPECT_EQ(n.full_free_gpus, 8);
  l.ExpectInvariants();
}

TEST(ClusterStateStandby, TheLendingIndexFollowsNodesWithUnusedLentGpus) {
  ClusterBuilder c;
  std::vector<NodeId> nodes;
  std::vector<TaskId> svcs;
  for (int i = 0; i < 4; ++i) {
    nodes.push_back(c.AddNode("n" + std::to_string(i), testing::Gpus(2)));
    svcs.push_back(c.Submit("svc" + std::to_string(i), Req().Cpu(1000).Gpus(1)));
    c.state.Bind(svcs.back(), nodes.back(), Idx({1}));
    c.state.EnterStandby(svcs.back());
  }
  auto indexed = [&] {
    std::set<uint32_t> out;
    for (NodeId id : c.state.lending_nodes()) out.insert(id.value());
    EXPECT_EQ(out.size(), c.state.lending_nodes().size());
    return out;
  };
  EXPECT_EQ(indexed(), (std::set<uint32_t>{0, 1, 2, 3}));
  const TaskId b = c.Submit("b", Req().Cpu(500).Gpus(1));
  c.state.BindBorrowed(b, nodes[0], Idx({1}));  // n0 has nothing left to lend
  EXPECT_EQ(indexed(), (std::set<uint32_t>{1, 2, 3}));
  c.state.ExitStandby(svcs[2]);
  EXPECT_EQ(indexed(), (std::set<uint32_t>{1, 3}));
  c.state.Unbind(b);
  EXPECT_EQ(indexed(), (std::set<uint32_t>{0, 1, 3}));
  c.state.Finish(svcs[1]);
  EXPECT_EQ(indexed(), (std::set<uint32_t>{0, 3}));
  EXPECT_TRUE(c.state.CheckInvariants().ok()) << c.state.CheckInvariants().message();
}

// What a node has free, to compare before and after a reservation's life.
struct FreeSnapshot {
  MilliCpu cpu;
  MemMiB mem;
  std::array<MilliGpu, kMaxGpusPerNode> gpu;
  int32_t full;
  bool operator==(const FreeSnapshot&) const = default;
};
FreeSnapshot FreeOf(const ClusterState& s, NodeId n) {
  const Node& node = s.node(n);
  return {node.cpu_free, node.mem_free, node.gpu_free, node.full_free_gpus};
}
#define EXPECT_INVARIANTS(state) EXPECT_TRUE((state).CheckInvariants().ok()) << (state).CheckInvariants().message()

TEST(ClusterStateCapacityReservations, ReservedCapacityIsTakenForEveryoneButNotAllocated) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(4));
  TaskId owner = c.Submit("owner", Req().Cpu(8000).Mem(1000).Gpus(2));
  TaskId other = c.Submit("other", Req().Cpu(8000).Mem(1000).Gpus(2));
  const uint64_t cursor = c.state.change_seq();
  const uint32_t v0 = c.state.node(n).version;
  auto r = c.state.ReserveCapacity(c.state.task(owner).job, TaskId(), n, c.state.task(owner).req, Idx({1, 2}), 100, 60);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_INVARIANTS(c.state);
  const Reservation& rec = c.state.reservation(*r);
  EXPECT_EQ(rec.kind, Reservation::Kind::kCapacity);
  EXPECT_EQ(rec.state, ReservationState::kAvailable);
  EXPECT_FALSE(rec.active);  // node-hold readers see nothing
  EXPECT_EQ(rec.created_s, 100);
  EXPECT_EQ(rec.expires_s, 160);
  const Node& node = c.state.node(n);
  EXPECT_EQ(node.cpu_free, 96000 - 8000);
  EXPECT_EQ(node.gpu_free[1], 0);
  EXPECT_EQ(node.gpu_free[2], 0);
  EXPECT_EQ(node.full_free_gpus, 2);
  EXPECT_FALSE(node.reservation.valid());
  EXPECT_GT(node.version, v0);
  EXPECT_EQ(ChangedSince(c.state, cursor), (std::set<uint32_t>{n.value()}));
  EXPECT_EQ(c.state.nodes_with_full_free(2).size(), 1u);
  EXPECT_TRUE(c.state.nodes_with_full_free(4).empty());
  EXPECT_EQ(c.state.fits()[n.value()].full_free_gpus, 2);
  EXPECT_EQ(c.state.fits()[n.value()].gpu_free_total, 2000);
  EXPECT_EQ(c.state.allocated_gpu_milli(), 0);
  EXPECT_EQ(c.state.allocated_cpu_milli(), 0);
  EXPECT_EQ(c.state.reserved_gpu_milli(), 2000);
  EXPECT_EQ(c.state.reserved_cpu_milli(), 8000);
  EXPECT_EQ(c.state.available_capacity_reservations(), (std::vector<ReservationId>{*r}));
  // Normal placement cannot use the reserved GPUs, only the rest.
  EXPECT_FALSE(c.state.CanBind(other, n, Idx({1, 2})));
  EXPECT_FALSE(c.state.CanBind(other, n, Idx({0, 1})));
  EXPECT_TRUE(c.state.CanBind(other, n, Idx({0, 3})));
}

TEST(ClusterStateCapacityReservations, TheOwnerBindsIntoItOnExactlyTheReservedGpus) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(4));
  TaskId t = c.Submit("owner", Req().Cpu(8000).Mem(1000).Gpus(2));
  const FreeSnapshot before = FreeOf(c.state, n);
  auto r = c.state.ReserveCapacity(c.state.task(t).job, t, n, c.state.task(t).req, Idx({0, 3}), 0, -1);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const FreeSnapshot reserved = FreeOf(c.state, n);
  const uint64_t release_seq = c.state.release_seq();
  ASSERT_TRUE(c.state.CanBindReserved(t, *r));
  c.state.BindReserved(t, *r);
  EXPECT_INVARIANTS(c.state);
  EXPECT_EQ(FreeOf(c.state, n), reserved);  // the capacity changed hands only
  EXPECT_EQ(c.state.release_seq(), release_seq);
  const Task& task = c.state.task(t);
  EXPECT_EQ(task.state, TaskState::kBound);
  EXPECT_EQ(task.node, n);
  ASSERT_EQ(task.gpus.size, 2);
  EXPECT_EQ(task.gpus.idx[0], 0);
  EXPECT_EQ(task.gpus.idx[1], 3);
  EXPECT_EQ(c.state.reservation(*r).state, ReservationState::kConsumed);
  EXPECT_EQ(c.state.reservation(*r).consumed_by, t);
  EXPECT_EQ(c.state.allocated_gpu_milli(), 2000);
  EXPECT_EQ(c.state.allocated_cpu_milli(), 8000);
  EXPECT_EQ(c.state.reserved_gpu_milli(), 0);
  EXPECT_EQ(c.state.reserved_cpu_milli(), 0);
  EXPECT_TRUE(c.state.available_capacity_reservations().empty());
  EXPECT_EQ(c.state.job(task.job).bound_tasks, 1);
  EXPECT_FALSE(c.state.CanBindReserved(t, *r));  // consumed
  // Releasing a consumed reservation changes nothing; finishing the task frees it normally.
  c.state.ReleaseCapacity(*r);
  EXPECT_EQ(c.state.reservation(*r).state, ReservationState::kConsumed);
  EXPECT_EQ(FreeOf(c.state, n), reserved);
  c.state.Finish(t);
  EXPECT_INVARIANTS(c.state);
  EXPECT_EQ(FreeOf(c.state, n), before);
  EXPECT_GT(c.state.release_seq(), release_seq);
  EXPECT_EQ(c.state.allocated_gpu_milli(), 0);
}

TEST(ClusterStateCapacityReservations, OnlyTheOwnersTaskWithTheSameRequestMayBindIntoIt) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(4));
  JobSpec js;
  js.name = "gang";
  JobId job = c.state.AddJob(js);
  const TaskRequest req = Req().Cpu(4000).Mem(100).Gpus(1);
  TaskId a = c.state.AddTask(job, "a", req);
  TaskId b = c.state.AddTask(job, "b", req);
  TaskId small = c.state.AddTask(job, "small", Req().Cpu(4000).Mem(100).SharedGpu(500));
  TaskId stranger = c.Submit("stranger", req);
  auto any = c.state.ReserveCapacity(job, TaskId(), n, req, Idx({0}), 0, -1);
  auto only_a = c.state.ReserveCapacity(job, a, n, req, Idx({1}), 0, -1);
  ASSERT_TRUE(any.ok() && only_a.ok());
  EXPECT_FALSE(c.state.CanBindReserved(stranger, *any));  // not of the owner job
  EXPECT_FALSE(c.state.CanBindReserved(small, *any));     // another request
  EXPECT_FALSE(c.state.CanBindReserved(b, *only_a));      // not the owner task
  EXPECT_TRUE(c.state.CanBindReserved(a, *only_a));
  EXPECT_TRUE(c.state.CanBindReserved(b, *any));
  c.state.SetNodeState(n, NodeState::kCordoned);
  EXPECT_TRUE(c.state.CanBindReserved(b, *any));          // a later cordon keeps the reservation
  c.state.SetNodeState(n, NodeState::kDown);
  EXPECT_FALSE(c.state.CanBindReserved(b, *any));         // the node is down
  c.state.SetNodeState(n, NodeState::kReady);
  c.state.BindReserved(b, *any);
  EXPECT_FALSE(c.state.CanBindReserved(a, *any));         // consumed
  c.state.BindReserved(a, *only_a);
  EXPECT_INVARIANTS(c.state);
  EXPECT_EQ(c.state.task(a).gpus.idx[0], 1);
  EXPECT_EQ(c.state.task(b).gpus.idx[0], 0);
  EXPECT_FALSE(c.state.CanBindReserved(b, ReservationId(99)));
}

TEST(ClusterStateCapacityReservations, ReleaseAndExpiryReturnExactlyTheCapacityAndBumpReleaseSeq) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(4));
  TaskId t = c.Submit("t", Req().Cpu(3000).Mem(500).SharedGpu(300));
  TaskId w = c.Submit("w", Req().Cpu(1000).Mem(50).Gpus(1));
  c.state.Bind(w, n, Idx({2}));
  const FreeSnapshot before = FreeOf(c.state, n);
  const JobId job = c.state.task(t).job;
  const TaskRequest req = c.state.task(t).req;
  auto r1 = c.state.ReserveCapacity(job, t, n, req, Idx({0}), 10, 5);    // expires at 15
  auto r2 = c.state.ReserveCapacity(job, t, n, req, Idx({0}), 10, 20);   // expires at 30; GPU 0 shared
  auto r3 = c.state.ReserveCapacity(job, t, n, req, Idx({3}), 10, -1);   // never expires
  ASSERT_TRUE(r1.ok() && r2.ok() && r3.ok());
  EXPECT_INVARIANTS(c.state);
  EXPECT_EQ(c.state.node(n).gpu_free[0], 400);
  EXPECT_EQ(c.state.reserved_gpu_milli(), 900);
  EXPECT_EQ(c.state.allocated_gpu_milli(), 1000);

  uint64_t seq = c.state.release_seq();
  EXPECT_TRUE(c.state.ExpireReservations(14).empty());
  EXPECT_EQ(c.state.release_seq(), seq);
  EXPECT_EQ(c.state.ExpireReservations(15), (std::vector<ReservationId>{*r1}));
  EXPECT_INVARIANTS(c.state);
  EXPECT_GT(c.state.release_seq(), seq);
  EXPECT_EQ(c.state.reservation(*r1).state, ReservationState::kExpired);
  EXPECT_EQ(c.state.node(n).gpu_free[0], 700);
  EXPECT_FALSE(c.state.CanBindReserved(t, *r1));

  seq = c.state.release_seq();
  c.state.ReleaseCapacity(*r3);
  EXPECT_INVARIANTS(c.state);
  EXPECT_GT(c.state.release_seq(), seq);
  EXPECT_EQ(c.state.reservation(*r3).state, ReservationState::kReleased);
  EXPECT_EQ(c.state.available_capacity_reservations(), (std::vector<ReservationId>{*r2}));

  EXPECT_EQ(c.state.ExpireReservations(1000), (std::vector<ReservationId>{*r2}));
  EXPECT_INVARIANTS(c.state);
  EXPECT_EQ(FreeOf(c.state, n), before);
  EXPECT_EQ(c.state.reserved_gpu_milli(), 0);
  EXPECT_EQ(c.state.reserved_cpu_milli(), 0);
  EXPECT_EQ(c.state.allocated_gpu_milli(), 1000);
  EXPECT_TRUE(c.state.available_capacity_reservations().empty());
  seq = c.state.release_seq();
  c.state.ReleaseCapacity(*r2);  // already expired: nothing to return
  EXPECT_EQ(c.state.release_seq(), seq);
  EXPECT_EQ(c.state.reservation(*r2).state, ReservationState::kExpired);
}

TEST(ClusterStateCapacityReservations, ReserveCapacityRefusesWhatABindCouldNotTakeAndSaysWhy) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(2));
  NodeId down = c.AddNode("n1", testing::Gpus(2));
  c.state.SetNodeState(down, NodeState::kDown);
  TaskId busy = c.Submit("busy", Req().Cpu(1000).SharedGpu(200));
  c.state.Bind(busy, n, Idx({0}));
  TaskId t = c.Submit("t", Req().Gpus(1));
  const JobId job = c.state.task(t).job;
  const FreeSnapshot before = FreeOf(c.state, n);
  const size_t records = c.state.reservations().size();
  auto expect_refused = [&](StatusOr<ReservationId> r, const std::string& why) {
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  };
  expect_refused(c.state.ReserveCapacity(job, TaskId(), n, Req().Gpus(1), Idx({0}), 0, -1), "GPU 0 is busy");
  expect_refused(c.state.ReserveCapacity(job, TaskId(), n, Req().SharedGpu(900), Idx({0}), 0, -1), "GPU 0 is busy");
  expect_refused(c.state.ReserveCapacity(job, TaskId(), n, Req().Cpu(96000), Idx({}), 0, -1), "not enough CPU");
  expect_refused(c.state.ReserveCapacity(job, TaskId(), n, Req().Mem(1 << 30), Idx({}), 0, -1), "not enough memory");
  expect_refused(c.state.ReserveCapacity(job, TaskId(), n, Req().Gpus(1).Models(GpuModelSet::FromBits(1u << 5)),
                                         Idx({1}), 0, -1),
                 "GPU model not admitted");
  expect_refused(c.state.ReserveCapacity(job, TaskId(), down, Req().Gpus(1), Idx({0}), 0, -1), "not ready");
  expect_refused(c.state.ReserveCapacity(job, TaskId(), n, Req().Gpus(2), Idx({1}), 0, -1), "1 GPU indices");
  expect_refused(c.state.ReserveCapacity(job, TaskId(), n, Req().Gpus(1), Idx({2}), 0, -1), "out of range");
  expect_refused(c.state.ReserveCapacity(job, busy, n, Req().Gpus(1), Idx({1}), 0, -1), "not a task of the owner");
  expect_refused(c.state.ReserveCapacity(job, TaskId(), n, Req().Gpus(1), Idx({1}), 0, -5), "negative TTL");
  EXPECT_EQ(FreeOf(c.state, n), before);
  EXPECT_EQ(c.state.reservations().size(), records);
  EXPECT_INVARIANTS(c.state);
  // A shared request fits beside the busy share; then a whole GPU no longer does.
  ASSERT_TRUE(c.state.ReserveCapacity(job, TaskId(), n, Req().SharedGpu(800), Idx({0}), 0, -1).ok());
  expect_refused(c.state.ReserveCapacity(job, TaskId(), n, Req().SharedGpu(100), Idx({0}), 0, -1), "GPU 0 is busy");
  EXPECT_INVARIANTS(c.state);
}

TEST(ClusterStateCapacityReservations, CapacityReservationsAndNodeHoldsCoexist) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(4));
  TaskId t = c.Submit("t", Req().Gpus(1));
  TaskId g = c.Submit("gang", Req().Gpus(4));
  const NodeId held[] = {n};
  ReservationId hold = c.state.AddReservation(c.state.task(g).job, held);
  auto r = c.state.ReserveCapacity(c.state.task(t).job, t, n, c.state.task(t).req, Idx({2}), 0, -1);
  ASSERT_TRUE(r.ok());
  EXPECT_INVARIANTS(c.state);
  EXPECT_EQ(c.state.reservation(hold).kind, Reservation::Kind::kNodeHold);
  EXPECT_EQ(c.state.job(c.state.task(t).job).reservation, ReservationId());  // only holds are recorded
  c.state.ReleaseReservation(*r);  // a no-op on a capacity reservation
  EXPECT_EQ(c.state.reservation(*r).state, ReservationState::kAvailable);
  c.state.ReleaseReservation(hold);
  EXPECT_INVARIANTS(c.state);
  EXPECT_EQ(c.state.node(n).gpu_free[2], 0);
  c.state.ReleaseCapacity(*r);
  EXPECT_INVARIANTS(c.state);
  EXPECT_EQ(c.state.node(n).full_free_gpus, 4);
}

TEST(GpuModels, ParsesModelSetsAndNamesTheFirstUnknownModel) {
  GpuModels m;
  ASSERT_TRUE(m.Intern("T4").ok());
  ASSERT_TRUE(m.Intern("V100").ok());
  auto any = m.ParseSet("");
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(any->Any());
  auto set = m.ParseSet("V100|T4");
  ASSERT_TRUE(set.ok());
  EXPECT_TRUE(set->Admits(*m.Find("T4")));
  auto bad = m.ParseSet("T4|A100");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'A100'"), std::string::npos);
}

}  // namespace
}  // namespace estuary
