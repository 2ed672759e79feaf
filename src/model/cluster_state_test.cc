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
