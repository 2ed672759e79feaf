// ReserveAction: which nodes a waiting gang holds (Plan), how holds are re-planned each cycle
// (Renew), and how a held node drains toward its owner through AllocateAction.
#include "sched/actions/reserve.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "sched/plugins/register.h"
#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::ClusterBuilder;
using testing::Idx;
using testing::Req;

using Names = std::set<std::string>;

// testing::AswCluster (nodes n0, n1, ... in the named ASWs) with the helpers below.
struct Cluster : testing::AswCluster {
  using AswCluster::AswCluster;
  static Cluster Flat(int nodes) { return Cluster(std::vector<std::string>(nodes, "")); }

  // Running work of another job on node i: `gpus` whole GPUs (the first ones) and `cpu` milli.
  TaskId Run(int i, int gpus, MilliCpu cpu = 0) {
    GpuIndices g;
    for (int k = 0; k < gpus; ++k) g.Push(k);
    TaskId t = c.Submit("work-n" + std::to_string(i) + "-" + std::to_string(c.state.tasks().size()),
                        Req().Cpu(cpu).Gpus(gpus));
    c.state.Bind(t, N(i), g);
    return t;
  }

  // A gang of `replicas` tasks of `req` with the given bounds and topology constraint.
  JobId Gang(const std::string& name, int replicas, int min, int step, TaskRequest req,
             TopologyConstraint topology = {}) {
    JobSpec s;
    s.name = name;
    s.min_replicas = min;
    s.max_replicas = replicas;
    s.step = step;
    s.topology = topology;
    JobId j = c.state.AddJob(s);
    for (int i = 0; i < replicas; ++i) c.state.AddTask(j, name + "-" + std::to_string(i), req);
    return j;
  }
  // A gang that must sit in one ASW.
  JobId GangInOneAsw(const std::string& name, int replicas, int min, int step, TaskRequest req) {
    TopologyConstraint t;
    t.plane = data;
    t.required_level = 0;
    return Gang(name, replicas, min, step, req, t);
  }
  // A gang that prefers few ASWs.
  JobId GangPreferringOneAsw(const std::string& name, int replicas, int min, int step, TaskRequest req) {
    TopologyConstraint t;
    t.plane = data;
    t.preferred_level = 0;
    return Gang(name, replicas, min, step, req, t);
  }

  Names NamesOf(const std::vector<NodeId>& nodes) const {
    Names out;
    for (NodeId n : nodes) out.insert(c.state.node(n).spec.name);
    EXPECT_EQ(out.size(), nodes.size()) << "a node listed twice";
    return out;
  }
  // The nodes held for `job` (empty when it holds none).
  Names HeldFor(JobId job) const {
    const ReservationId r = c.state.job(job).reservation;
    if (!r.valid()) return {};
    EXPECT_EQ(c.state.reservation(r).owner, job);
    return NamesOf(c.state.reservation(r).nodes);
  }
  // The nodes the bound tasks of `job` sit on.
  Names NodesOf(JobId job) const {
    Names out;
    for (TaskId t : c.state.job(job).tasks) {
      if (c.state.task(t).state == TaskState::kBound) out.insert(c.state.node(c.state.task(t).node).spec.name);
    }
    return out;
  }
  int Bound(JobId job) const {
    int n = 0;
    for (TaskId t : c.state.job(job).tasks) n += c.state.task(t).state == TaskState::kBound;
    return n;
  }
  std::vector<NodeId> Plan(JobId job, AllocateOptions options = {}) const {
    return ReserveAction::Plan(c.state, job, options);
  }
  std::unique_ptr<Session> Open() {
    SessionOptions o;
    o.policy = *OpenbPolicy("best-fit");
    o.seed = 3;
    return std::move(Session::Open(c.state, BuiltinRegistry(), PluginContext{&c.state, nullptr}, o)).value();
  }
  void ExpectInvariants() const {
    const Status st = c.state.CheckInvariants();
    EXPECT_TRUE(st.ok()) << st.message();
  }
};

const TaskRequest kWholeNode = Req().Cpu(8000).Gpus(8);

// ---------------------------------------------------------------------------------------------
// Plan

TEST(ReservePlan, ARequiredAswIsTheOneWhoseCheapestSufficientNodesRunTheLeastWork) {
  // asw1 runs more work in total (15 GPUs against 9) but its two least busy nodes run only 3
  // GPUs (n3: 1, n2: 2); asw2's two least busy run 4 (2 + 2).
  Cluster g({"asw1", "asw1", "asw1", "asw1", "asw2", "asw2", "asw2", "asw2"});
  const int used[] = {8, 4, 2, 1, 3, 2, 2, 2};
  for (int i = 0; i < 8; ++i) g.Run(i, used[i]);
  JobId j = g.GangInOneAsw("train", 2, 2, 1, kWholeNode);
  EXPECT_EQ(g.NamesOf(g.Plan(j)), (Names{"n2", "n3"}));
}

TEST(ReservePlan, EqualCostAswsGoToTheFirstAswAndEqualCostNodesToTheLeastCpuInUseThenLowestId) {
  Cluster g({"asw1", "asw1", "asw1", "asw2", "asw2", "asw2"});
  // Every node runs 1 GPU; CPU in use: n0 3000, n1 1000, n2 1000 | n3 0, n4 0, n5 0.
  const MilliCpu cpu[] = {3000, 1000, 1000, 0, 0, 0};
  for (int i = 0; i < 6; ++i) g.Run(i, 1, cpu[i]);
  // Both ASWs' cheapest pairs run 2 GPUs: asw1 comes first, and within it n1 and n2 run less CPU.
  JobId pair = g.GangInOneAsw("pair", 2, 2, 1, kWholeNode);
  EXPECT_EQ(g.NamesOf(g.Plan(pair)), (Names{"n1", "n2"}));
  // One replica anywhere: n3, n4, n5 tie on GPU and CPU in use; the lowest node id wins.
  JobId one = g.Gang("one", 1, 1, 1, kWholeNode);
  EXPECT_EQ(g.NamesOf(g.Plan(one)), (Names{"n3"}));
}

TEST(ReservePlan, NodesThatAreDownCordonedOrHeldForAnotherJobAreNeverChosen) {
  Cluster g = Cluster::Flat(6);
  // n0, n1, n2 are empty but unusable; n3 runs 1 GPU, n4 4, n5 6.
  g.c.state.SetNodeState(g.N(0), NodeState::kDown);
  g.c.state.SetNodeState(g.N(1), NodeState::kCordoned);
  JobId other = g.Gang("other", 1, 1, 1, kWholeNode);
  const std::vector<NodeId> held = {g.N(2)};
  g.c.state.AddReservation(other, held);
  g.Run(3, 1);
  g.Run(4, 4);
  g.Run(5, 6);
  JobId j = g.Gang("train", 2, 2, 1, kWholeNode);
  EXPECT_EQ(g.NamesOf(g.Plan(j)), (Names{"n3", "n4"}));
  // The same in one ASW: the held, down and cordoned nodes do not count towards its room.
  Cluster t({"asw", "asw", "asw", "asw"});
  t.c.state.SetNodeState(t.N(0), NodeState::kDown);
  JobId x = t.Gang("x", 1, 1, 1, kWholeNode);
  const std::vector<NodeId> held1 = {t.N(1)};
  t.c.state.AddReservation(x, held1);
  JobId three = t.GangInOneAsw("three", 3, 3, 1, kWholeNode);
  EXPECT_TRUE(t.Plan(three).empty());
  JobId two = t.GangInOneAsw("two", 2, 2, 1, kWholeNode);
  EXPECT_EQ(t.NamesOf(t.Plan(two)), (Names{"n2", "n3"}));
}

TEST(ReservePlan, NodesAlreadyHeldForTheJobItselfMayBeChosen) {
  Cluster g = Cluster::Flat(3);
  g.Run(1, 2);
  g.Run(2, 4);
  JobId j = g.Gang("train", 2, 2, 1, kWholeNode);
  const std::vector<NodeId> own = {g.N(0)};
  g.c.state.AddReservation(j, own);
  EXPECT_EQ(g.NamesOf(g.Plan(j)), (Names{"n0", "n1"}));
}

TEST(ReservePlan, AJobLargerThanEveryAswGetsNoNodes) {
  Cluster g({"asw1", "asw1", "asw2", "asw2", "asw2"});
  JobId j = g.GangInOneAsw("huge", 4, 4, 1, kWholeNode);  // the larger ASW holds 3
  EXPECT_TRUE(g.Plan(j).empty());
  JobId k = g.Gang("huger", 6, 6, 1, kWholeNode);  // the cluster holds 5
  EXPECT_TRUE(g.Plan(k).empty());
  EXPECT_EQ(g.NamesOf(g.Plan(g.GangInOneAsw("fits", 3, 3, 1, kWholeNode))), (Names{"n2", "n3", "n4"}));
}

TEST(ReservePlan, ANodeHoldsOnlyTheReplicasItsCpuAllowsNotJustItsGpus) {
  // 60 of 96 cores per replica: one replica per node although two fit by GPUs. asw1 (2 nodes)
  // and asw2 (3 nodes) have the GPUs for 4 and 6 replicas but hold 2 and 3.
  Cluster g({"asw1", "asw1", "asw2", "asw2", "asw2"});
  JobId four = g.GangInOneAsw("four", 4, 4, 1, Req().Cpu(60000).Gpus(4));
  EXPECT_TRUE(g.Plan(four).empty());
  JobId three = g.GangInOneAsw("three", 3, 3, 1, Req().Cpu(60000).Gpus(4));
  EXPECT_EQ(g.NamesOf(g.Plan(three)), (Names{"n2", "n3", "n4"}));
  JobId two_by_gpu = g.GangInOneAsw("two", 4, 4, 1, Req().Cpu(1000).Gpus(4));  // 2 per node
  EXPECT_EQ(g.NamesOf(g.Plan(two_by_gpu)), (Names{"n0", "n1"}));
}

TEST(ReservePlan, TheMinimumIsRoundedUpToAWholeStepUnlessAlignIsOff) {
  Cluster g = Cluster::Flat(5);
  for (int i = 1; i < 5; ++i) g.Run(i, i);  // n0 runs 0 GPUs, n1 1, ... n4 4
  // min 3, step 2: the job can only start with 4 replicas, one per node.
  JobId j = g.Gang("pp", 6, 3, 2, kWholeNode);
  EXPECT_EQ(g.NamesOf(g.Plan(j)), (Names{"n0", "n1", "n2", "n3"}));
  AllocateOptions no_align;
  no_align.align = false;
  EXPECT_EQ(g.NamesOf(g.Plan(j, no_align)), (Names{"n0", "n1", "n2"}));
}

TEST(ReservePlan, AJobWithoutATopologyConstraintGetsTheCheapestNodesOfTheWholeCluster) {
  // asw1: n0 runs 0 GPUs, n1 5; asw2: n2 3, n3 1.
  Cluster g({"asw1", "asw1", "asw2", "asw2"});
  g.Run(1, 5);
  g.Run(2, 3);
  g.Run(3, 1);
  JobId free_job = g.Gang("anywhere", 2, 2, 1, kWholeNode);
  EXPECT_EQ(g.NamesOf(g.Plan(free_job)), (Names{"n0", "n3"}));
  // The same job confined to one ASW: asw2's pair runs 4 GPUs, asw1's 5.
  JobId asw_job = g.GangInOneAsw("one-asw", 2, 2, 1, kWholeNode);
  EXPECT_EQ(g.NamesOf(g.Plan(asw_job)), (Names{"n2", "n3"}));
  // With topology off the constraint is ignored.
  AllocateOptions no_topology;
  no_topology.topology = false;
  EXPECT_EQ(g.NamesOf(g.Plan(asw_job, no_topology)), (Names{"n0", "n3"}));
}

TEST(ReservePlan, APreferredAswGroupsEqualCostNodesByAswButNeverOutranksCost) {
  // Nodes alternate between ASWs: n0, n2 in "x" (created first), n1, n3 in "y".
  Cluster g({"x", "y", "x", "y"});
  JobId j = g.GangPreferringOneAsw("train", 2, 2, 1, kWholeNode);
  EXPECT_EQ(g.NamesOf(g.Plan(j)), (Names{"n0", "n2"}));  // all empty: both from "x"
  g.Run(2, 1);
  EXPECT_EQ(g.NamesOf(g.Plan(j)), (Names{"n0", "n1"}));  // n2 now costs more than the "y" nodes
}

// ---------------------------------------------------------------------------------------------
// ReplicasFitting and holds

// empty_only (EngineReserve::drain_after_s): a hold that drains nothing.
TEST(ReservePlan, EmptyOnlyTakesOnlyNodesWithoutWorkAndAllOfThemWhenTheyFallShort) {
  Cluster g = Cluster::Flat(6);
  g.Run(1, 1);  // n1 and n3 run one GPU each; n0, n2, n4 and n5 are empty
  g.Run(3, 1);
  JobId two = g.Gang("two", 2, 2, 1, kWholeNode);
  // Enough empty nodes: the cheapest prefix, as without empty_only (all cost 0: lowest ids).
  EXPECT_EQ(g.NamesOf(ReserveAction::Plan(g.c.state, two, {}, true)), (Names{"n0", "n2"}));
  // Five replicas, four empty nodes: all four, never the busy n1 or n3 (without empty_only the
  // plan drains one of them: n1, the lower id of equal cost).
  JobId five = g.Gang("five", 5, 5, 1, kWholeNode);
  EXPECT_EQ(g.NamesOf(ReserveAction::Plan(g.c.state, five, {}, true)), (Names{"n0", "n2", "n4", "n5"}));
  EXPECT_EQ(g.NamesOf(ReserveAction::Plan(g.c.state, five, {})), (Names{"n0", "n1", "n2", "n4", "n5"}));
  // Nothing empty: no nodes.
  for (int i : {0, 2, 4, 5}) g.Run(i, 1);
  EXPECT_TRUE(ReserveAction::Plan(g.c.state, two, {}, true).empty());
}

TEST(ReservePlan, EmptyOnlyWithARequiredAswTakesTheAswWithTheMostRoomOnItsEmptyNodes) {
  // asw1: n0 empty, n1-n3 busy; asw2: n4, n5 empty, n6-n7 busy. No ASW has three empty nodes
  // (each could hold three replicas once its work ends).
  Cluster g({"asw1", "asw1", "asw1", "asw1", "asw2", "asw2", "asw2", "asw2"});
  for (int i : {1, 2, 3, 6, 7}) g.Run(i, 1);
  JobId j = g.GangInOneAsw("train", 3, 3, 1, kWholeNode);
  EXPECT_EQ(g.NamesOf(ReserveAction::Plan(g.c.state, j, {}, true)), (Names{"n4", "n5"}));
  // When one ASW's empty nodes can hold it, that ASW's (the cheapest sufficient prefix).
  JobId pair = g.GangInOneAsw("pair", 2, 2, 1, kWholeNode);
  EXPECT_EQ(g.NamesOf(ReserveAction::Plan(g.c.state, pair, {}, true)), (Names{"n4", "n5"}));
}

TEST(ReserveRenew, EmptyOnlyIsPerJobAndAHoldGrowsAsNodesEmpty) {
  Cluster g = Cluster::Flat(4);
  const TaskId on1 = g.Run(1, 2);
  g.Run(2, 2);
  g.Run(3, 2);
  JobId a = g.Gang("a", 3, 3, 1, kWholeNode);
  const std::vector<JobId> waiting = {a};
  const std::vector<char> empty_only = {1};
  ASSERT_EQ(ReserveAction::Renew(g.c.state, waiting, 1, {}, empty_only), 1);
  EXPECT_EQ(g.HeldFor(a), (Names{"n0"}));  // only the empty node: nothing drains
  g.c.state.Unbind(on1);                    // n1 empties
  ASSERT_EQ(ReserveAction::Renew(g.c.state, waiting, 1, {}, empty_only), 1);
  EXPECT_EQ(g.HeldFor(a), (Names{"n0", "n1"}));
  // Without the flag the same job's hold drains busy nodes too.
  ASSERT_EQ(ReserveAction::Renew(g.c.state, waiting, 1, {}, std::vector<char>{0}), 1);
  EXPECT_EQ(g.HeldFor(a), (Names{"n0", "n1", "n2"}));
  g.ExpectInvariants();
}

TEST(ReserveReplicasFitting, AHeldNodeHoldsReplicasOfItsOwnerOnly) {
  Cluster g = Cluster::Flat(1);
  JobId owner = g.Gang("owner", 2, 2, 1, Req().Gpus(4));
  JobId other = g.Gang("other", 2, 2, 1, Req().Gpus(4));
  const TaskRequest req = Req().Gpus(4);
  const Node& n = g.c.state.node(g.N(0));
  EXPECT_EQ(AllocateAction::ReplicasFitting(g.c.state, n, req, false, other), 2);  // not held yet
  const std::vector<NodeId> held = {g.N(0)};
  g.c.state.AddReservation(owner, held);
  EXPECT_EQ(AllocateAction::ReplicasFitting(g.c.state, n, req, false, owner), 2);
  EXPECT_EQ(AllocateAction::ReplicasFitting(g.c.state, n, req, false, other), 0);
  EXPECT_EQ(AllocateAction::ReplicasFitting(g.c.state, n, req, false), 0);  // no job: no held node
}

// ---------------------------------------------------------------------------------------------
// Renew

TEST(ReserveRenew, HoldsNodesForAtMostMaxJobsInTheOrderGivenAndALaterJobGetsOtherNodes) {
  Cluster g = Cluster::Flat(6);
  for (int i = 1; i < 6; ++i) g.Run(i, i);  // n0 runs 0 GPUs, n1 1, ... n5 5
  JobId a = g.Gang("a", 2, 2, 1, kWholeNode);
  JobId b = g.Gang("b", 2, 2, 1, kWholeNode);
  JobId c = g.Gang("c", 2, 2, 1, kWholeNode);
  const std::vector<JobId> waiting = {a, b, c};
  EXPECT_EQ(ReserveAction::Renew(g.c.state, waiting, 2, {}), 2);
  EXPECT_EQ(g.HeldFor(a), (Names{"n0", "n1"}));
  EXPECT_EQ(g.HeldFor(b), (Names{"n2", "n3"}));  // not a's cheaper nodes
  EXPECT_FALSE(g.c.state.job(c).reservation.valid());
  EXPECT_FALSE(g.c.state.node(g.N(4)).reservation.valid());
  EXPECT_FALSE(g.c.state.node(g.N(5)).reservation.valid());
  g.ExpectInvariants();
}

TEST(ReserveRenew, TheOrderOfTheWaitingListDecidesWhoGetsTheCheapestNodes) {
  Cluster g = Cluster::Flat(4);
  for (int i = 1; i < 4; ++i) g.Run(i, i);
  JobId a = g.Gang("a", 2, 2, 1, kWholeNode);
  JobId b = g.Gang("b", 2, 2, 1, kWholeNode);
  const std::vector<JobId> a_first = {a, b};
  ASSERT_EQ(ReserveAction::Renew(g.c.state, a_first, 2, {}), 2);
  EXPECT_EQ(g.HeldFor(a), (Names{"n0", "n1"}));
  EXPECT_EQ(g.HeldFor(b), (Names{"n2", "n3"}));
  // Re-planned with b older: all their holds are released first, so b takes the cheapest nodes.
  const std::vector<JobId> b_first = {b, a};
  ASSERT_EQ(ReserveAction::Renew(g.c.state, b_first, 2, {}), 2);
  EXPECT_EQ(g.HeldFor(b), (Names{"n0", "n1"}));
  EXPECT_EQ(g.HeldFor(a), (Names{"n2", "n3"}));
  g.ExpectInvariants();
}

TEST(ReserveRenew, AWaitingJobBeyondMaxJobsLosesItsHold) {
  Cluster g = Cluster::Flat(4);
  for (int i = 1; i < 4; ++i) g.Run(i, i);
  JobId a = g.Gang("a", 2, 2, 1, kWholeNode);
  JobId b = g.Gang("b", 2, 2, 1, kWholeNode);
  const std::vector<JobId> only_a = {a};
  ASSERT_EQ(ReserveAction::Renew(g.c.state, only_a, 1, {}), 1);
  const ReservationId old = g.c.state.job(a).reservation;
  const std::vector<JobId> b_first = {b, a};
  EXPECT_EQ(ReserveAction::Renew(g.c.state, b_first, 1, {}), 1);
  EXPECT_EQ(g.HeldFor(b), (Names{"n0", "n1"}));  // a's former nodes
  EXPECT_FALSE(g.c.state.job(a).reservation.valid());
  EXPECT_FALSE(g.c.state.reservation(old).active);
  // max_jobs 0 releases the holds of every waiting job and makes none.
  EXPECT_EQ(ReserveAction::Renew(g.c.state, b_first, 0, {}), 0);
  EXPECT_FALSE(g.c.state.job(b).reservation.valid());
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(g.c.state.node(g.N(i)).reservation.valid());
  g.ExpectInvariants();
}

TEST(ReserveRenew, AHoldOfAJobNotInTheWaitingListIsLeftAlone) {
  Cluster g = Cluster::Flat(4);
  for (int i = 1; i < 4; ++i) g.Run(i, i);
  JobId kept = g.Gang("kept", 1, 1, 1, kWholeNode);
  const std::vector<NodeId> n0 = {g.N(0)};
  const ReservationId r = g.c.state.AddReservation(kept, n0);
  JobId a = g.Gang("a", 2, 2, 1, kWholeNode);
  const std::vector<JobId> waiting = {a};
  EXPECT_EQ(ReserveAction::Renew(g.c.state, waiting, 1, {}), 1);
  EXPECT_EQ(g.HeldFor(a), (Names{"n1", "n2"}));  // n0 is cheapest but held for `kept`
  EXPECT_EQ(g.c.state.job(kept).reservation, r);
  EXPECT_TRUE(g.c.state.reservation(r).active);
  EXPECT_EQ(g.c.state.node(g.N(0)).reservation, r);
  EXPECT_EQ(g.c.state.fits()[0].reserved_for, kept);
  EXPECT_EQ(ReserveAction::Renew(g.c.state, waiting, 0, {}), 0);
  EXPECT_EQ(g.c.state.job(kept).reservation, r);  // still
  g.ExpectInvariants();
}

TEST(ReserveRenew, AJobThatCouldNeverFitGetsNoHoldAndTheNextOneStillDoes) {
  Cluster g({"asw1", "asw1", "asw2", "asw2"});
  JobId huge = g.GangInOneAsw("huge", 3, 3, 1, kWholeNode);
  JobId small = g.GangInOneAsw("small", 2, 2, 1, kWholeNode);
  const std::vector<JobId> waiting = {huge, small};
  // max_jobs counts jobs tried, not holds made: the second job is within max_jobs = 2.
  EXPECT_EQ(ReserveAction::Renew(g.c.state, waiting, 2, {}), 1);
  EXPECT_FALSE(g.c.state.job(huge).reservation.valid());
  EXPECT_EQ(g.HeldFor(small), (Names{"n0", "n1"}));
  g.ExpectInvariants();
}

TEST(ReserveRenew, RenewingAgainWithTheSameInputsHoldsTheSameNodes) {
  Cluster g({"asw1", "asw1", "asw1", "asw2", "asw2", "asw2"});
  const int used[] = {0, 3, 1, 2, 0, 4};
  for (int i = 0; i < 6; ++i) {
    if (used[i] > 0) g.Run(i, used[i]);
  }
  JobId kept = g.Gang("kept", 1, 1, 1, kWholeNode);
  const std::vector<NodeId> held = {g.N(4)};
  g.c.state.AddReservation(kept, held);
  JobId a = g.GangInOneAsw("a", 2, 2, 1, kWholeNode);
  JobId b = g.Gang("b", 2, 2, 1, kWholeNode);
  JobId c = g.Gang("c", 1, 1, 1, kWholeNode);
  const std::vector<JobId> waiting = {a, b, c};
  ASSERT_EQ(ReserveAction::Renew(g.c.state, waiting, 3, {}), 3);
  // a: asw1's pair n0 + n2 runs 1 GPU; asw2's cheapest usable pair n3 + n5 runs 6. b then takes
  // the cheapest of the rest (n3: 2, n1: 3), c the last (n5: 4).
  const std::map<std::string, Names> expected = {
      {"a", {"n0", "n2"}}, {"b", {"n1", "n3"}}, {"c", {"n5"}}, {"kept", {"n4"}}};
  auto holds = [&] {
    std::map<std::string, Names> out;
    for (JobId j : {a, b, c, kept}) out[g.c.state.job(j).spec.name] = g.HeldFor(j);
    return out;
  };
  EXPECT_EQ(holds(), expected);
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(ReserveAction::Renew(g.c.state, waiting, 3, {}), 3);
    EXPECT_EQ(holds(), expected) << "round " << round;
    g.ExpectInvariants();
  }
}

// ---------------------------------------------------------------------------------------------
// A held node drains toward its owner

TEST(ReserveEndToEnd, AHeldNodeDrainsAndOnlyItsOwnerStartsOnIt) {
  Cluster g = Cluster::Flat(3);
  TaskId r0 = g.Run(0, 4);  // n0 runs 4 GPUs
  TaskId r1 = g.Run(1, 2);  // n1 runs 2
  g.Run(2, 8);              // n2 is full and stays so
  JobId gang = g.Gang("gang", 2, 2, 1, kWholeNode);
  JobId small = g.Gang("small", 1, 1, 1, Req().Gpus(1));
  auto s = g.Open();
  const std::vector<JobId> waiting = {gang};
  ASSERT_EQ(ReserveAction::Renew(g.c.state, waiting, 1, {}), 1);
  const ReservationId r = g.c.state.job(gang).reservation;
  EXPECT_EQ(g.HeldFor(gang), (Names{"n0", "n1"}));
  g.ExpectInvariants();

  // Both held nodes have free GPUs, but the small job may not use them.
  JobAttempt sa = AllocateAction::TryStart(*s, g.c.state, small);
  EXPECT_FALSE(sa.started);
  EXPECT_EQ(sa.kind, OutcomeKind::kRetryable);
  EXPECT_EQ(sa.reason, "0/3 nodes fit, 2 held for another job, 1 too few free GPUs");
  JobAttempt ga = AllocateAction::TryStart(*s, g.c.state, gang);
  EXPECT_FALSE(ga.started);
  EXPECT_EQ(ga.reason, "0/2 replicas fit at once; nodes with room for one: 0");
  g.ExpectInvariants();

  // n1 drains: still nobody else's, and the gang alone does not fit yet (nothing leaks).
  g.c.state.Finish(r1);
  g.ExpectInvariants();
  sa = AllocateAction::TryStart(*s, g.c.state, small);
  EXPECT_FALSE(sa.started);
  EXPECT_EQ(sa.reason, "0/3 nodes fit, 2 held for another job, 1 too few free GPUs");
  EXPECT_EQ(g.Bound(small), 0);
  ga = AllocateAction::TryStart(*s, g.c.state, gang);
  EXPECT_FALSE(ga.started);
  EXPECT_EQ(ga.reason, "1/2 replicas fit at once; nodes with room for one: 1");
  EXPECT_EQ(g.Bound(gang), 0);
  EXPECT_EQ(g.c.state.node(g.N(1)).full_free_gpus, 8);
  EXPECT_EQ(g.c.state.job(gang).reservation, r);
  g.ExpectInvariants();

  // n0 drains: the gang starts on its held nodes and its hold is released.
  g.c.state.Finish(r0);
  g.ExpectInvariants();
  sa = AllocateAction::TryStart(*s, g.c.state, small);
  EXPECT_FALSE(sa.started);
  EXPECT_EQ(g.Bound(small), 0);
  ga = AllocateAction::TryStart(*s, g.c.state, gang);
  ASSERT_TRUE(ga.started) << ga.reason;
  EXPECT_EQ(ga.granted, 2);
  EXPECT_EQ(g.NodesOf(gang), (Names{"n0", "n1"}));
  EXPECT_FALSE(g.c.state.job(gang).reservation.valid());
  EXPECT_FALSE(g.c.state.reservation(r).active);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(g.c.state.node(g.N(i)).reservation.valid()) << i;
    EXPECT_FALSE(g.c.state.fits()[i].reserved_for.valid()) << i;
  }
  g.ExpectInvariants();

  // The small job now waits for room, no longer for a hold.
  sa = AllocateAction::TryStart(*s, g.c.state, small);
  EXPECT_FALSE(sa.started);
  EXPECT_EQ(sa.reason, "0/3 nodes fit, 3 too few free GPUs");
  g.ExpectInvariants();
}

TEST(ReserveEndToEnd, AJobThatRequiresOneAswStartsOnTheNodesHeldForItAndOthersMayNot) {
  // asw1: n0, n1 empty; asw2: n2 runs 1 GPU, n3 empty. Two-node gangs fit only in asw1.
  Cluster g({"asw1", "asw1", "asw2", "asw2"});
  g.Run(2, 1);
  JobId gang = g.GangInOneAsw("gang", 2, 2, 1, kWholeNode);
  JobId rival = g.GangInOneAsw("rival", 2, 2, 1, kWholeNode);
  auto s = g.Open();
  const std::vector<JobId> waiting = {gang};
  ASSERT_EQ(ReserveAction::Renew(g.c.state, waiting, 1, {}), 1);
  EXPECT_EQ(g.HeldFor(gang), (Names{"n0", "n1"}));

  JobAttempt ra = AllocateAction::TryStart(*s, g.c.state, rival);
  EXPECT_FALSE(ra.started);
  EXPECT_EQ(ra.kind, OutcomeKind::kRetryable);
  EXPECT_EQ(ra.reason, "no asw has room for 2 replicas (the best holds at most 1 now)");
  EXPECT_EQ(g.Bound(rival), 0);
  g.ExpectInvariants();

  JobAttempt ga = AllocateAction::TryStart(*s, g.c.state, gang);
  ASSERT_TRUE(ga.started) << ga.reason;
  EXPECT_EQ(g.NodesOf(gang), (Names{"n0", "n1"}));
  EXPECT_FALSE(g.c.state.job(gang).reservation.valid());
  EXPECT_FALSE(g.c.state.fits()[0].reserved_for.valid());
  EXPECT_FALSE(g.c.state.fits()[1].reserved_for.valid());
  g.ExpectInvariants();
}

TEST(ReserveEndToEnd, AJobThatPrefersOneAswStartsOnTheNodesHeldForItAndOthersMayNot) {
  // asw1: n0, n1 empty; asw2: n2 and n3 run 1 GPU each, so whole nodes are free only in asw1.
  Cluster g({"asw1", "asw1", "asw2", "asw2"});
  g.Run(2, 1);
  g.Run(3, 1);
  JobId gang = g.GangPreferringOneAsw("gang", 2, 2, 1, kWholeNode);
  JobId rival = g.GangPreferringOneAsw("rival", 1, 1, 1, kWholeNode);
  auto s = g.Open();
  const std::vector<JobId> waiting = {gang};
  ASSERT_EQ(ReserveAction::Renew(g.c.state, waiting, 1, {}), 1);
  EXPECT_EQ(g.HeldFor(gang), (Names{"n0", "n1"}));

  JobAttempt ra = AllocateAction::TryStart(*s, g.c.state, rival);
  EXPECT_FALSE(ra.started);
  EXPECT_EQ(ra.kind, OutcomeKind::kRetryable);
  EXPECT_EQ(ra.reason, "the nodes of the data plane hold 0 of 1 replicas now");
  g.ExpectInvariants();

  JobAttempt ga = AllocateAction::TryStart(*s, g.c.state, gang);
  ASSERT_TRUE(ga.started) << ga.reason;
  EXPECT_EQ(g.NodesOf(gang), (Names{"n0", "n1"}));
  EXPECT_FALSE(g.c.state.job(gang).reservation.valid());
  g.ExpectInvariants();
}

TEST(ReserveEndToEnd, AHolderMayStartOnFreeNodesElsewhereAndStillReleasesItsHold) {
  // The hold protects room; it does not bind the owner to it.
  Cluster g = Cluster::Flat(3);
  g.Run(0, 1);
  JobId gang = g.Gang("gang", 2, 2, 1, kWholeNode);
  const std::vector<NodeId> held = {g.N(0)};
  const ReservationId r = g.c.state.AddReservation(gang, held);
  auto s = g.Open();
  JobAttempt ga = AllocateAction::TryStart(*s, g.c.state, gang);
  ASSERT_TRUE(ga.started) << ga.reason;
  EXPECT_EQ(g.NodesOf(gang), (Names{"n1", "n2"}));
  EXPECT_FALSE(g.c.state.reservation(r).active);
  EXPECT_FALSE(g.c.state.node(g.N(0)).reservation.valid());
  g.ExpectInvariants();
}

}  // namespace
}  // namespace estuary
