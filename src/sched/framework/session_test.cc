// The Session's contract: filtering with readable reasons, typed outcomes, the two tie-break
// rules, and a score cache that never changes a decision.
#include "sched/framework/session.h"

#include <gtest/gtest.h>

#include <set>

#include "sched/framework/statement.h"
#include "sched/plugins/register.h"
#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::ClusterBuilder;
using testing::Idx;
using testing::Req;

std::unique_ptr<Session> Open(const ClusterState& s, const std::string& policy, TieBreak tie = TieBreak::kNodeOrder,
                              uint64_t seed = 1, std::vector<uint32_t> rank = {}, bool cache = true,
                              bool indexed = true) {
  SessionOptions o;
  o.indexed = indexed;
  o.policy = *OpenbPolicy(policy);
  o.tie_break = tie;
  o.seed = seed;
  o.node_rank = std::move(rank);
  o.score_cache = cache;
  auto r = Session::Open(s, BuiltinRegistry(), PluginContext{&s, nullptr}, o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return std::move(r).value();
}

TEST(Session, ATaskThatFitsNowhereNowIsRetryableWithCountsPerReason) {
  ClusterBuilder c;
  NodeId a = c.AddNode("a", testing::Gpus(2));
  c.AddNode("b", testing::CpuOnly(8000));
  TaskId filler = c.Submit("filler", Req().Gpus(2));
  c.state.Bind(filler, a, Idx({0, 1}));
  TaskId t = c.Submit("t", Req().Cpu(1000).Gpus(1));
  Outcome o = Open(c.state, "best-fit")->Decide(t);
  EXPECT_EQ(o.kind, OutcomeKind::kRetryable);
  EXPECT_EQ(o.reason, "0/2 nodes fit, 2 too few free GPUs");
}

TEST(Session, ATaskNoNodeCouldEverHoldIsInfeasible) {
  ClusterBuilder c;
  c.AddNode("a", testing::Gpus(4));
  TaskId t = c.Submit("t", Req().Gpus(8));
  Outcome o = Open(c.state, "best-fit")->Decide(t);
  EXPECT_EQ(o.kind, OutcomeKind::kInfeasible);
  EXPECT_NE(o.reason.find("no node could ever hold it"), std::string::npos);
}

TEST(Session, CpuMemoryAndModelEachRejectNodesWithTheirOwnReasonAndMakeTheTaskInfeasible) {
  ClusterBuilder c;
  testing::NodeShape small = testing::Gpus(1);
  small.cpu = 1000;
  c.AddNode("cpu-short", small);
  testing::NodeShape lowmem = testing::Gpus(1);
  lowmem.mem = 10;
  c.AddNode("mem-short", lowmem);
  testing::NodeShape t4 = testing::Gpus(1);
  t4.model = "T4";
  c.AddNode("wrong-model", t4);
  TaskId t = c.Submit("t", Req().Cpu(2000).Mem(100).Gpus(1).Models(c.ModelSet("V100")));
  Outcome o = Open(c.state, "dotprod")->Decide(t);
  EXPECT_EQ(o.kind, OutcomeKind::kInfeasible);
  EXPECT_EQ(o.reason,
            "no node could ever hold it; 0/3 nodes fit, 1 GPU model not allowed, 1 insufficient CPU, 1 insufficient memory");
}

TEST(Session, DownNodesAreNeverChosen) {
  ClusterBuilder c;
  NodeId a = c.AddNode("a");
  NodeId b = c.AddNode("b");
  c.state.SetNodeState(a, NodeState::kDown);
  TaskId t = c.Submit("t", Req().Gpus(1));
  Outcome o = Open(c.state, "best-fit")->Decide(t);
  ASSERT_TRUE(o.placed());
  EXPECT_EQ(o.node, b);
}

TEST(Session, NodeOrderTieBreakTakesTheFirstNodeInTheGivenOrder) {
  ClusterBuilder c;
  for (const char* n : {"a", "b", "c", "d"}) c.AddNode(n);
  TaskId t = c.Submit("t", Req().Gpus(1));
  // All four nodes score the same; rank 0 is node "c".
  Outcome o = Open(c.state, "best-fit", TieBreak::kNodeOrder, 1, {3, 2, 0, 1})->Decide(t);
  ASSERT_TRUE(o.placed());
  EXPECT_EQ(o.node, c.NodeNamed("c"));
}

TEST(Session, UniformTieBreakSpreadsOverAllTiedNodesAndRepeatsPerSeed) {
  ClusterBuilder c;
  for (const char* n : {"a", "b", "c", "d"}) c.AddNode(n);
  TaskId t = c.Submit("t", Req().Gpus(1));
  std::set<uint32_t> chosen;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    NodeId first = Open(c.state, "best-fit", TieBreak::kUniform, seed)->Decide(t).node;
    NodeId again = Open(c.state, "best-fit", TieBreak::kUniform, seed)->Decide(t).node;
    EXPECT_EQ(first, again) << "seed " << seed;
    chosen.insert(first.value());
  }
  EXPECT_EQ(chosen.size(), 4u);
}

TEST(Session, NeitherTheScoreCacheNorTheClassIndexEverChangesADecision) {
  // Fill a small heterogeneous cluster with a mixed task stream three ways — indexed, scanning
  // with the score cache, scanning without it — and free some tasks on the way; every decision
  // must be identical.
  for (const char* policy : {"best-fit", "dotprod", "gpu-packing", "gpu-clustering"}) {
    std::vector<std::pair<uint32_t, int>> runs[3];
    for (int mode = 0; mode < 3; ++mode) {
      ClusterBuilder c;
      for (int i = 0; i < 6; ++i) c.AddNode("n" + std::to_string(i), testing::Gpus(i % 2 ? 8 : 4));
      auto s = Open(c.state, policy, TieBreak::kNodeOrder, 7, {}, mode != 2, mode == 0);
      EXPECT_EQ(s->indexed(), mode == 0);
      Statement st(c.state);
      const TaskRequest reqs[] = {Req().Cpu(4000).SharedGpu(300), Req().Cpu(8000).Gpus(1), Req().Cpu(2000).Gpus(2),
                                  Req().Cpu(16000), Req().Cpu(1000).SharedGpu(700)};
      for (int k = 0; k < 40; ++k) {
        TaskId t = c.Submit("t" + std::to_string(k), reqs[k % 5]);
        Outcome o = s->Decide(t);
        runs[mode].push_back({o.placed() ? o.node.value() : 9999, o.placed() ? o.gpus.idx[0] : -1});
        if (o.placed()) st.Bind(t, o.node, o.gpus);
        const TaskId older(static_cast<uint32_t>(k / 2));
        if (k % 7 == 6 && c.state.task(older).state == TaskState::kBound) st.Evict(older);
        ASSERT_TRUE(c.state.CheckInvariants().ok());
      }
      st.Commit();
    }
    EXPECT_EQ(runs[0], runs[1]) << policy;
    EXPECT_EQ(runs[0], runs[2]) << policy;
  }
}

TEST(Session, TheClassIndexIsUsedOnlyWhereItGivesTheScansAnswer) {
  ClusterBuilder c;
  c.AddNode("a");
  EXPECT_TRUE(Open(c.state, "best-fit")->indexed());
  EXPECT_FALSE(Open(c.state, "random")->indexed());  // its score is a fresh draw per task
  EXPECT_FALSE(Open(c.state, "best-fit", TieBreak::kUniform)->indexed());  // needs every tie
  testing::NodeShape huge = testing::Gpus(16);  // beyond best-fit's normalising spec
  c.AddNode("huge", huge);
  EXPECT_FALSE(Open(c.state, "best-fit")->indexed());
  EXPECT_TRUE(Open(c.state, "dotprod")->indexed());
}

TEST(Session, TheClassIndexRebuildsWhenItFellBehindTheChangeFeed) {
  // Decide a class, then make more node changes than the feed keeps, then decide it again: the
  // answer must still be the scan's.
  ClusterBuilder c;
  NodeId a = c.AddNode("a", testing::Gpus(8));
  c.AddNode("b", testing::Gpus(8));
  auto indexed = Open(c.state, "best-fit");
  auto scan = Open(c.state, "best-fit", TieBreak::kNodeOrder, 1, {}, true, false);
  TaskId probe = c.Submit("probe", Req().Gpus(1));
  ASSERT_EQ(indexed->Decide(probe).node, scan->Decide(probe).node);
  TaskId churn = c.Submit("churn", Req().Cpu(1000));
  for (uint64_t i = 0; i < ClusterState::kChangeRing / 2 + 10; ++i) {
    c.state.Bind(churn, a, Idx({}));
    c.state.Unbind(churn);
  }
  c.state.Bind(c.Submit("filler", Req().Gpus(7)), a, Idx({0, 1, 2, 3, 4, 5, 6}));
  EXPECT_GT(c.state.change_seq(), ClusterState::kChangeRing);
  const Outcome o = indexed->Decide(probe);
  ASSERT_TRUE(o.placed());
  EXPECT_EQ(o.node, scan->Decide(probe).node);
  EXPECT_EQ(o.node, a);  // best-fit: the fuller node
}

TEST(Session, AnUnknownPluginIsAnErrorNamingIt) {
  ClusterBuilder c;
  c.AddNode("a");
  SessionOptions o;
  o.policy.name = "p";
  o.policy.scores = {{"no-such-score", 1}};
  auto r = Session::Open(c.state, BuiltinRegistry(), PluginContext{&c.state, nullptr}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'no-such-score'"), std::string::npos);
}

// Three 8-GPU nodes under best-fit: "a" runs 6 GPUs of work, "b" 2, "c" none, so a one-GPU task
// goes to "a" (fullest), then "b". Jobs A and B each have one one-GPU task.
struct HeldBestFit {
  ClusterBuilder c;
  NodeId a, b, n;
  TaskId ta, tb;
  JobId ja, jb;
  HeldBestFit() {
    a = c.AddNode("a");
    b = c.AddNode("b");
    n = c.AddNode("c");
    c.state.Bind(c.Submit("work-a", Req().Gpus(6)), a, Idx({0, 1, 2, 3, 4, 5}));
    c.state.Bind(c.Submit("work-b", Req().Gpus(2)), b, Idx({0, 1}));
    ta = c.Submit("A", Req().Gpus(1));
    tb = c.Submit("B", Req().Gpus(1));
    ja = c.state.task(ta).job;
    jb = c.state.task(tb).job;
  }
  ReservationId HoldAForJobA() {
    const std::vector<NodeId> held = {a};
    return c.state.AddReservation(ja, held);
  }
  std::vector<NodeId> All() const { return {a, b, n}; }
};

TEST(SessionReservations, DecideSkipsAHeldBestFitNodeForEveryJobWithOrWithoutTheIndex) {
  for (bool indexed : {true, false}) {
    SCOPED_TRACE(indexed ? "indexed" : "scan");
    HeldBestFit h;
    auto s = Open(h.c.state, "best-fit", TieBreak::kNodeOrder, 1, {}, true, indexed);
    ASSERT_EQ(s->indexed(), indexed);
    ASSERT_EQ(s->Decide(h.tb).node, h.a);  // before the hold: the fullest node
    h.HoldAForJobA();
    ASSERT_TRUE(h.c.state.CheckInvariants().ok());

    const Outcome other = s->Decide(h.tb);
    ASSERT_TRUE(other.placed()) << other.reason;
    EXPECT_EQ(other.node, h.b);
    const Outcome owner = s->Decide(h.ta);  // Decide never uses held nodes, not even the owner's
    ASSERT_TRUE(owner.placed()) << owner.reason;
    EXPECT_EQ(owner.node, h.b);
    // A session opened after the hold agrees, whichever job's task it decides first.
    auto fresh = Open(h.c.state, "best-fit", TieBreak::kNodeOrder, 1, {}, true, indexed);
    EXPECT_EQ(fresh->Decide(h.ta).node, h.b);
    EXPECT_EQ(fresh->Decide(h.tb).node, h.b);
  }
}

TEST(SessionReservations, DecideAmongLetsOnlyTheOwnersTasksUseTheHeldNode) {
  for (bool indexed : {true, false}) {
    SCOPED_TRACE(indexed ? "indexed" : "scan");
    HeldBestFit h;
    h.HoldAForJobA();
    auto s = Open(h.c.state, "best-fit", TieBreak::kNodeOrder, 1, {}, true, indexed);
    const std::vector<NodeId> all = h.All();
    const Outcome owner = s->DecideAmong(h.ta, all);
    ASSERT_TRUE(owner.placed()) << owner.reason;
    EXPECT_EQ(owner.node, h.a);
    EXPECT_EQ(owner.gpus.size, 1);
    const Outcome other = s->DecideAmong(h.tb, all);
    ASSERT_TRUE(other.placed()) << other.reason;
    EXPECT_EQ(other.node, h.b);
    // Among the held node alone, B's task is told why it may not go there.
    const std::vector<NodeId> only_a = {h.a};
    const Outcome refused = s->DecideAmong(h.tb, only_a);
    EXPECT_EQ(refused.kind, OutcomeKind::kRetryable);
    EXPECT_EQ(refused.reason, "0/1 nodes fit, 1 held for another job");
  }
}

TEST(SessionReservations, DecideHoldingLetsTheOwnerUseItsHeldNodeAndLooksOnlyWhereGpusAreFree) {
  for (bool indexed : {true, false}) {
    SCOPED_TRACE(indexed ? "indexed" : "scan");
    HeldBestFit h;
    h.HoldAForJobA();
    auto s = Open(h.c.state, "best-fit", TieBreak::kNodeOrder, 1, {}, true, indexed);
    // As DecideAmong over every node: the owner's task takes its held (fullest) node, another's
    // the next fullest.
    const Outcome owner = s->DecideHolding(h.ta);
    ASSERT_TRUE(owner.placed()) << owner.reason;
    EXPECT_EQ(owner.node, h.a);
    const Outcome other = s->DecideHolding(h.tb);
    ASSERT_TRUE(other.placed()) << other.reason;
    EXPECT_EQ(other.node, h.b);
    // Three GPUs: "a" has two free, so only "b" (six) and "c" (eight) are looked at; best fit
    // takes "b". Nine: no node has them, and all three count as lacking GPUs.
    const TaskId three = h.c.Submit("three", Req().Gpus(3));
    EXPECT_EQ(s->DecideHolding(three).node, h.b);
    const Outcome nine = s->DecideHolding(h.c.Submit("nine", Req().Gpus(9)));
    EXPECT_FALSE(nine.placed());
    EXPECT_EQ(nine.reason, "no node could ever hold it; 0/3 nodes fit, 3 too few free GPUs");
  }
}

TEST(SessionReservations, WhenEveryNodeWithRoomIsHeldForAnotherJobTheTaskWaitsAndSaysWhy) {
  for (bool indexed : {true, false}) {
    SCOPED_TRACE(indexed ? "indexed" : "scan");
    ClusterBuilder c;
    NodeId a = c.AddNode("a");
    NodeId full = c.AddNode("full");
    c.state.Bind(c.Submit("work", Req().Gpus(8)), full, Idx({0, 1, 2, 3, 4, 5, 6, 7}));
    TaskId ta = c.Submit("A", Req().Gpus(1));
    TaskId tb = c.Submit("B", Req().Gpus(1));
    const std::vector<NodeId> held = {a};
    c.state.AddReservation(c.state.task(ta).job, held);
    auto s = Open(c.state, "best-fit", TieBreak::kNodeOrder, 1, {}, true, indexed);

    const Outcome o = s->Decide(tb);
    EXPECT_EQ(o.kind, OutcomeKind::kRetryable);  // the hold ends; the task could fit then
    EXPECT_NE(o.reason.find("held for another job"), std::string::npos) << o.reason;
    EXPECT_EQ(o.reason, "0/2 nodes fit, 1 held for another job, 1 too few free GPUs");
    EXPECT_EQ(s->Decide(ta).kind, OutcomeKind::kRetryable);  // Decide: not even for the owner
    const std::vector<NodeId> all = {a, full};
    const Outcome owner = s->DecideAmong(ta, all);
    ASSERT_TRUE(owner.placed()) << owner.reason;
    EXPECT_EQ(owner.node, a);
  }
}

TEST(SessionReservations, AfterTheHoldIsReleasedTheIndexedSessionChoosesTheNodeAgain) {
  // The index must learn of both the hold and its release from the change feed alone.
  HeldBestFit h;
  auto indexed = Open(h.c.state, "best-fit");
  ASSERT_TRUE(indexed->indexed());
  ASSERT_EQ(indexed->Decide(h.tb).node, h.a);
  const ReservationId r = h.HoldAForJobA();
  ASSERT_EQ(indexed->Decide(h.tb).node, h.b);
  h.c.state.ReleaseReservation(r);
  ASSERT_TRUE(h.c.state.CheckInvariants().ok());
  const Outcome o = indexed->Decide(h.tb);
  ASSERT_TRUE(o.placed()) << o.reason;
  EXPECT_EQ(o.node, h.a);
  EXPECT_EQ(indexed->Decide(h.ta).node, h.a);
  auto scan = Open(h.c.state, "best-fit", TieBreak::kNodeOrder, 1, {}, true, false);
  EXPECT_EQ(scan->Decide(h.tb).node, h.a);
}

TEST(TieBreak, ParsesBothRuleNamesAndRejectsOthers) {
  EXPECT_EQ(*ParseTieBreak("node-order"), TieBreak::kNodeOrder);
  EXPECT_EQ(*ParseTieBreak("uniform"), TieBreak::kUniform);
  EXPECT_FALSE(ParseTieBreak("first").ok());
}

}  // namespace
}  // namespace estuary
