// Multi-tenant queues in the engine (issue 20), as specifications worked out by hand on clusters
// of 8-GPU nodes (testing::TwoAswCluster: n0.. in asw0 for the first half, asw1 for the rest).
// Every job here takes whole nodes (8 GPUs a replica), so each figure is a count of nodes.
#include <algorithm>
#include <map>
#include <set>
#include <memory>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/history.h"
#include "tests/testing/engine_fixtures.h"

namespace estuary {
namespace {

constexpr int64_t kG = 1000;  // one GPU, milli

using testing::Q;

// Job `id` of queue `queue`: `replicas` whole nodes (min = max unless `min` > 0), LP, preemptible.
EngineJob NodeJob(uint32_t id, const std::string& queue, int replicas, int min = 0, int32_t priority = 300) {
  EngineJob j = testing::WholeGpuJob(id, replicas, 8, priority, true);
  if (min > 0) j.min_replicas = min;
  j.queue = queue;
  return j;
}

struct Cluster {
  std::unique_ptr<Engine> engine;
  Engine& e() { return *engine; }
  Cluster(int nodes, std::vector<QueueSpec> queues, SharingSpec sharing = {}, int64_t grace_s = 60,
          int32_t preemptor_min_priority = kHpPriority, bool priority_queue = true) {
    EngineConfig o;
    o.name = "queues";
    o.priority_queue = priority_queue;
    o.grace_s = grace_s;
    o.preemptor_min_priority = preemptor_min_priority;
    o.queues = std::move(queues);
    o.sharing = sharing;
    auto made = Engine::Create(testing::TwoAswCluster(nodes), o);
    EXPECT_TRUE(made.ok()) << made.status().message();
    engine = std::move(*made);
  }
  void Submit(const EngineJob& j, int64_t t) {
    const Admission a = e().Submit(j, SubmitMode::kEnqueue, t);
    EXPECT_TRUE(a.accepted) << a.reason;
  }
  // A cycle at t, with the cluster's invariants checked after it.
  std::vector<EngineEvent> Cycle(int64_t t) {
    std::vector<EngineEvent> ev = e().RunCycle(t);
    const Status s = e().state().CheckInvariants();
    EXPECT_TRUE(s.ok()) << s.message();
    return ev;
  }
  // Nodes (8-GPU replicas) each queue holds now.
  std::map<std::string, int64_t> Held() const {
    std::map<std::string, int64_t> out;
    for (const QueueSpec& q : engine->options().queues) {
      const size_t i = static_cast<size_t>(std::find_if(engine->options().queues.begin(), engine->options().queues.end(),
                                                        [&](const QueueSpec& s) { return s.name == q.name; }) -
                                           engine->options().queues.begin());
      out[q.name] = engine->state().queue_usage(i)[kQueueGpu] / (8 * kG);
    }
    return out;
  }
};

int Count(const std::vector<EngineEvent>& ev, EngineEvent::Kind kind) {
  return static_cast<int>(std::count_if(ev.begin(), ev.end(), [&](const EngineEvent& x) { return x.kind == kind; }));
}

TEST(EngineQueues, AReturningTeamTakesFromTheQueueFurthestAboveItsFairShareFirst) {
  // 6 nodes. a is guaranteed 2 nodes, b and c 1 each. a is idle; b's elastic job (1..4 nodes)
  // and c's (1..2) grow: b holds 4, c 2 (its max).
  Cluster c(6, {Q("a", 16), Q("b", 8), Q("c", 8)});
  c.Submit(NodeJob(1, "b", 4, 1), 0);
  c.Submit(NodeJob(2, "c", 2, 1), 0);
  c.Cycle(0);
  ASSERT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 0}, {"b", 4}, {"c", 2}}));
  // a wants one node. The fair shares become a 1, c 2 (its demand), b 3 (the rest): b is one
  // node above its share, c at it, though both hold more than their guarantees. The node comes
  // from b.
  c.Submit(NodeJob(3, "a", 1), 100);
  std::vector<EngineEvent> ev = c.Cycle(100);
  ASSERT_EQ(Count(ev, EngineEvent::Kind::kReclaim), 1);
  ev = c.Cycle(160);
  ASSERT_EQ(Count(ev, EngineEvent::Kind::kShrunk), 1);
  for (const EngineEvent& x : ev) {
    if (x.kind == EngineEvent::Kind::kShrunk) {
      EXPECT_EQ(x.job, 1u);
    }
  }
  EXPECT_EQ(c.e().Running(3), 1);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 1}, {"b", 3}, {"c", 2}}));
  for (int64_t t : {160, 161, 600}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
}

// ---- Rebalancing toward weighted fair shares (SharingSpec::rebalance).

TEST(EngineQueues, ATeamAtItsGuaranteeButBelowItsFairShareGetsItBackFromAnotherTeamsElasticSurplusInWholeSteps) {
  // 8 nodes; a and b are guaranteed 2 nodes each, weights equal. b runs a 2-node job (its
  // guarantee); a's elastic job (2..8 nodes, steps of 2) takes the other 6 (a's fair share: b
  // wants only 2).
  EngineJob elastic = NodeJob(1, "a", 8, 2);
  elastic.step = 2;
  const auto setup = [&](SharingSpec sharing) {
    auto c = std::make_unique<Cluster>(8, std::vector<QueueSpec>{Q("a", 16), Q("b", 16)}, sharing);
    c->Submit(elastic, 0);
    c->Submit(NodeJob(2, "b", 2), 0);
    c->Cycle(0);
    EXPECT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 6}, {"b", 2}}));
    // b queues a second 2-node job. The fair shares become 4 and 4 (a wants 8, b 4). b holds its
    // guarantee, so its entitlement restores nothing; it is 2 nodes short of its fair share
    // (at least a tenth of it), and a holds 2 nodes above its own: exactly one step of a's job.
    c->Submit(NodeJob(3, "b", 2), 100);
    return c;
  };
  std::unique_ptr<Cluster> c = setup(SharingSpec{});
  std::vector<EngineEvent> ev = c->Cycle(100);
  ASSERT_EQ(Count(ev, EngineEvent::Kind::kReclaim), 1);
  EXPECT_EQ(ev.back().job, 3u);
  EXPECT_EQ(ev.back().detail, "fair share");
  EXPECT_EQ(ev.back().at, 160);  // one grace period
  EXPECT_TRUE(c->Cycle(159).empty());
  ev = c->Cycle(160);
  ASSERT_EQ(Count(ev, EngineEvent::Kind::kShrunk), 1);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kReturned), 0);  // nobody evicted whole
  for (const EngineEvent& x : ev) {
    if (x.kind != EngineEvent::Kind::kShrunk) continue;
    EXPECT_EQ(x.job, 1u);
    EXPECT_EQ(x.replicas, 4);  // 6 - one step of 2
    EXPECT_EQ(x.detail, "queue reclaim");
  }
  EXPECT_EQ(c->e().Running(3), 2);
  EXPECT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 4}, {"b", 4}}));
  // Stable: both at their fair shares; a's job does not regrow (not after its cooldown either:
  // its fair share holds it), and nobody takes anything back.
  for (int64_t t : {160, 161, 460, 461, 4000}) EXPECT_TRUE(c->Cycle(t).empty()) << t;
  EXPECT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 4}, {"b", 4}}));

  // Without rebalancing a queue at its guarantee takes nothing back: b's job waits.
  SharingSpec off;
  off.rebalance = false;
  c = setup(off);
  for (int64_t t : {100, 160, 1000}) EXPECT_TRUE(c->Cycle(t).empty()) << t;
  EXPECT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 6}, {"b", 2}}));
}

TEST(EngineQueues, ARebalanceClaimsWhatItsQueueIsShortOfSoAnotherJobOfTheSameRequestTakesNothingMore) {
  // 12 nodes; a, b and c are guaranteed 2 nodes each, weights equal. b and c run a 2-node job
  // each; a's elastic job (2..12 nodes, steps of 2) holds the other 8. b queues two 2-node jobs
  // at once, 3 (priority 300) and 4 (priority 200): the same queue, request and min replicas in
  // two shapes. The fair shares become a 5 nodes, b 5, c 2 (guarantees 2 each, the 6 left split 3
  // and 3 between a, which wants 12, and b, which wants 6). b is 3 nodes short and a 3 above:
  // job 3 (first in queue order) Reclaims one step of a's job (2 nodes), and its claim counts as
  // held, so job 4 would take b to 6 nodes, above its fair share of 5 — though a still holds a
  // node above its own. No second Reclaim, in that cycle or later.
  Cluster c(12, {Q("a", 16), Q("b", 16), Q("c", 16)});
  EngineJob elastic = NodeJob(1, "a", 12, 2);
  elastic.step = 2;
  c.Submit(NodeJob(2, "b", 2), 0);
  c.Submit(NodeJob(5, "c", 2), 0);
  c.Submit(elastic, 0);
  c.Cycle(0);
  ASSERT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 8}, {"b", 2}, {"c", 2}}));
  c.Submit(NodeJob(3, "b", 2, 0, 300), 100);
  c.Submit(NodeJob(4, "b", 2, 0, 200), 100);
  std::vector<EngineEvent> ev = c.Cycle(100);
  ASSERT_EQ(Count(ev, EngineEvent::Kind::kReclaim), 1);
  EXPECT_EQ(ev.back().job, 3u);
  EXPECT_EQ(ev.back().detail, "fair share");
  ev = c.Cycle(160);
  ASSERT_EQ(Count(ev, EngineEvent::Kind::kShrunk), 1);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kReclaim), 0);
  EXPECT_EQ(c.e().Running(3), 2);
  EXPECT_EQ(c.e().Running(4), 0);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 6}, {"b", 4}, {"c", 2}}));
  for (int64_t t : {161, 460, 461, 4000}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
  EXPECT_EQ(c.e().Running(4), 0);
}

TEST(EngineQueues, WithoutAbsorbAShrunkJobsCooldownIsNeverDueAgain) {
  // As above, with Absorb off: b's rebalance shrinks a's elastic job at 160 and its cooldown ends
  // at 460. Nothing grows without Absorb, so once that time has passed nothing is due — a driver
  // that runs a cycle at NextDue() moves on (before, NextDue() stayed at 460 and the simulator
  // ran cycles at 460 for ever).
  Cluster c(8, {Q("a", 16), Q("b", 16)});
  c.e().SetAbsorb(false);
  EngineJob elastic = NodeJob(1, "a", 8, 2);
  elastic.step = 2;
  c.Submit(elastic, 0);
  c.Submit(NodeJob(2, "b", 2), 0);
  c.Cycle(0);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 6}, {"b", 2}}));
  c.Submit(NodeJob(3, "b", 2), 100);
  c.Cycle(100);
  const std::vector<EngineEvent> ev = c.Cycle(160);
  ASSERT_EQ(Count(ev, EngineEvent::Kind::kShrunk), 1);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 4}, {"b", 4}}));
  for (int64_t t : {460, 461}) {
    EXPECT_TRUE(c.Cycle(t).empty()) << t;
    const std::optional<int64_t> due = c.e().NextDue();
    EXPECT_TRUE(!due || *due > t) << t << ": due " << *due;
  }
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 4}, {"b", 4}}));
}

// A Reclaim's budgets order their victims by C as of the budget time (QueueBook::BudgetTime, a
// multiple of SharingSpec::budget_period_s, 60 s by default), so a refused Reclaim can become
// feasible with nothing else changed only at those times. While a job waits, NextDue names the
// next one (a driver that runs cycles only at its events and at NextDue asks again when one that
// runs every second would); without Reclaim across queues nothing is due. The period is the
// configuration's: the default and 90 s.
TEST(EngineQueues, WhileAJobWaitsNextDueNamesTheNextBudgetTimeWhenQueuesReclaim) {
  EXPECT_EQ(SharingSpec().budget_period_s, 60);
  for (const int64_t kP : {int64_t{60}, int64_t{90}}) {
    for (const bool reclaim : {true, false}) {
      SCOPED_TRACE(std::to_string(kP) + (reclaim ? " reclaim" : ""));
      SharingSpec sharing;
      sharing.reclaim = reclaim;
      if (kP != 60) sharing.budget_period_s = kP;
      Cluster c(2, {Q("a", 8), Q("b", 8)}, sharing);
      const QueueBook& book = c.e().queue_book();
      EXPECT_EQ(book.BudgetTime(0), 0);
      EXPECT_EQ(book.BudgetTime(kP - 1), 0);
      EXPECT_EQ(book.BudgetTime(kP), kP);
      EXPECT_EQ(book.BudgetTime(-1), -kP);
      c.Submit(NodeJob(1, "a", 2), 0);  // both nodes: a borrows b's guarantee
      c.Cycle(0);
      EXPECT_EQ(c.e().NextDue(), std::nullopt);  // nobody waits
      c.Submit(NodeJob(2, "a", 1), kP - 10);  // waits: no capacity, and a is owed nothing
      EXPECT_TRUE(c.Cycle(kP - 10).empty());
      EXPECT_EQ(c.e().NextDue(), reclaim ? std::optional<int64_t>(kP) : std::nullopt);
      EXPECT_TRUE(c.Cycle(kP).empty());
      EXPECT_EQ(c.e().NextDue(), reclaim ? std::optional<int64_t>(2 * kP) : std::nullopt);
    }
  }
}

// A job that reclaims by priority (HP) is bounded by the same budgets in the queues it takes from
// (what they hold above their entitlements), whether or not queues reclaim: while it waits,
// NextDue names the next budget time either way. (Found by OneEngineDrawn's seed 2: the
// simulator, woken by a stale job end, started an HP Reclaim at a budget time at which the
// service, woken only at its inputs and NextDue, did not look.)
TEST(EngineQueues, WhileAnHpJobWaitsNextDueNamesTheNextBudgetTimeWhetherOrNotQueuesReclaim) {
  for (const bool reclaim : {true, false}) {
    SCOPED_TRACE(reclaim ? "reclaim" : "no reclaim");
    SharingSpec sharing;
    sharing.reclaim = reclaim;
    Cluster c(2, {Q("a", 8), Q("b", 8)}, sharing);
    c.Submit(NodeJob(1, "a", 1), 0);  // a holds its guarantee: nothing of it is takeable
    EngineJob own = testing::WholeGpuJob(2, 1, 8, 300, /*preemptible=*/false);
    own.queue = "b";
    c.Submit(own, 0);
    c.Cycle(0);
    ASSERT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 1}, {"b", 1}}));
    EXPECT_EQ(c.e().NextDue(), std::nullopt);  // nobody waits
    c.Submit(NodeJob(3, "b", 2, 0, 900), 30);  // both nodes: no victim it may take
    EXPECT_TRUE(c.Cycle(30).empty());
    EXPECT_EQ(c.e().Running(3), 0);
    EXPECT_EQ(c.e().NextDue(), std::optional<int64_t>(60));
    EXPECT_TRUE(c.Cycle(60).empty());
    EXPECT_EQ(c.e().NextDue(), std::optional<int64_t>(120));
  }
}

TEST(EngineQueues, AShortfallBelowATenthOfTheFairShareEvictsNothing) {
  // 32 nodes; a is guaranteed 8, b 20. b runs twenty 1-node jobs (its guarantee); a's elastic
  // job (1..12 nodes) holds the other 12. b queues one more node: the fair shares become b 21
  // (its demand) and a 11 (guarantees 8 and 20, then the 4 left split 3 to a, 1 to b), so a
  // holds one node above its fair share and b is one node short of its own — 8 GPUs, less than
  // a tenth of 168 (QueueBook::kRebalanceMinGapPct): nothing is evicted, b's job waits.
  Cluster c(32, {Q("a", 64), Q("b", 160)});
  c.Submit(NodeJob(1, "a", 12, 1), 0);
  for (uint32_t i = 0; i < 20; ++i) c.Submit(NodeJob(10 + i, "b", 1), 0);
  c.Cycle(0);
  ASSERT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 12}, {"b", 20}}));
  c.Submit(NodeJob(40, "b", 1), 100);
  for (int64_t t : {100, 160, 460, 4000}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 12}, {"b", 20}}));
  EXPECT_EQ(c.e().Running(40), 0);
}

// A Reclaim frees capacity, not room in the job's own queue: a job that may not start there
// (StartRoom 0) is not reclaimed for, which would evict work it then could not use.
TEST(EngineQueues, AJobKeptFromBorrowingWithoutRoomInItsGuaranteeIsNotReclaimedForUntilItMayBorrowAgain) {
  // 12 nodes; a, b and c have no guarantees, equal weights. a runs a 5-node job and an elastic
  // one (1..6 nodes), c a 3-node job and an elastic one (1..12). b is idle, so a's and c's fair
  // shares are 6 each: a holds 5 + 1, c 3 + 3.
  Cluster c(12, {Q("a", 0), Q("b", 0), Q("c", 0)});
  c.Submit(NodeJob(1, "a", 5), 0);
  c.Submit(NodeJob(2, "a", 6, 1), 0);
  c.Submit(NodeJob(3, "c", 3), 0);
  c.Submit(NodeJob(4, "c", 12, 1), 0);
  c.Cycle(0);
  ASSERT_EQ(c.e().Running(2), 1);
  ASSERT_EQ(c.e().Running(4), 3);
  // At 100 c's 3-node job ends and b's 2-node job arrives, kept from borrowing until 5,000 s (as
  // a queue's Reclaim that evicted it whole leaves it; told here as a reopened service's engine
  // is: RestoreCarried). The fair shares become b 2, a 5, c 5: b is short of its share and a
  // holds one node above its own. But b's job may start only within b's guarantee (none) until
  // then: no Reclaim for it. c's elastic job grows to c's share (3 -> 5); one node stays free.
  c.e().Finish(3, 100);
  c.Submit(NodeJob(5, "b", 2), 100);
  EngineCarry carry;
  CarriedJob kept;
  kept.job = 5;
  kept.submitted = 100;
  kept.no_borrow_until = 5000;
  carry.jobs.push_back(kept);
  c.e().RestoreCarried(carry, 100);
  std::vector<EngineEvent> ev = c.Cycle(100);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kReclaim), 0);
  EXPECT_EQ(c.e().Running(4), 5);
  // Nothing is evicted while it waits (before: a rebalance evicted a's elastic job at 160, and
  // b's job still waited, with that node idle too).
  for (int64_t t : {100, 160, 161, 1000, 4999}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 6}, {"b", 0}, {"c", 5}}));
  // Its explanation names the hold (before: none, and a free node to fit it "now").
  const Engine::Explanation why = c.e().Explain(5, 1000);
  EXPECT_EQ(why.quota,
            "kept from borrowing until t=5000 (a queue's Reclaim evicted it; sharing.reborrow_s): queue 'b' would hold 16 of "
            "its guarantee of 0 GPUs");
  EXPECT_FALSE(why.owed);
  EXPECT_FALSE(why.fits_idle);
  // At 5,000 s it may borrow: the free node and a's node above its share (its elastic job's
  // one replica, evicted whole after one grace period).
  ev = c.Cycle(5000);
  ASSERT_EQ(Count(ev, EngineEvent::Kind::kReclaim), 1);
  EXPECT_EQ(ev.back().job, 5u);
  EXPECT_EQ(ev.back().at, 5060);
  ev = c.Cycle(5060);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kReturned), 1);
  EXPECT_EQ(c.e().Running(2), 0);
  EXPECT_EQ(c.e().Running(5), 2);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 5}, {"b", 2}, {"c", 5}}));
  for (int64_t t : {5060, 5061, 9000}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
}

TEST(EngineQueues, WithoutBorrowingAJobAtItsQueuesGuaranteeReclaimsNothingFromAnotherQueue) {
  // 4 nodes; a and b are guaranteed 2 each, no borrowing (static quotas), and every job reclaims
  // by priority (preemptor_min_priority 0, as the k8s-default peer). a runs a 2-node job, b a
  // 2-node job of priority 100.
  SharingSpec quota;
  quota.borrow = false;
  quota.rebalance = false;
  Cluster c(4, {Q("a", 16), Q("b", 16)}, quota, 60, 0);
  c.Submit(NodeJob(1, "a", 2), 0);
  c.Submit(NodeJob(2, "b", 2, 0, 100), 0);
  c.Cycle(0);
  ASSERT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 2}, {"b", 2}}));
  // a's 1-node job of priority 500 outranks b's, but a is at its guarantee: it could not start
  // on b's nodes, and b, within its own guarantee, is no victim. Nothing is evicted.
  c.Submit(NodeJob(3, "a", 1, 0, 500), 100);
  for (int64_t t : {100, 160, 1000}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 2}, {"b", 2}}));
  // Once a's first job ends it starts.
  c.e().Finish(1, 2000);
  const std::vector<EngineEvent> ev = c.Cycle(2000);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kStarted), 1);
  EXPECT_EQ(c.e().Running(3), 1);
  EXPECT_EQ(c.e().Running(2), 2);
}

// ---- An admin changes the queues while jobs run (Engine::SetQueues; the service's PUT /v1/queues).

TEST(EngineQueueChange, ANewGuaranteeTakesEffectAtOnceEveryJobKeepsItsQueueByNameAndTheHistoryReplays) {
  // 4 nodes (H800), added as a live cluster's are, recording the engine's history as the service
  // does. a and b are guaranteed 2 nodes each. b's elastic job (1..4 nodes) takes all 4.
  EngineConfig config;
  config.name = "queues";
  config.queues = {Q("a", 16), Q("b", 16)};
  std::vector<HistoryRecord> history = {{HistorySegment{config}}};
  auto made = Engine::Create(ClusterState(), config);
  ASSERT_TRUE(made.ok()) << made.status().message();
  Engine& e = **made;
  std::vector<EngineInput> rec;
  e.RecordInputs(&rec);
  const auto flush = [&] {
    for (EngineInput& in : rec) AppendInput(history, std::move(in));
    rec.clear();
  };
  std::vector<EngineEvent> seen;
  e.SetEventObserver([&](const EngineEvent& ev) {
    flush();
    history.push_back({ev});
    seen.push_back(ev);
  });
  ASSERT_TRUE(e.AddPlane("data", {"asw"}).ok());
  for (int i = 0; i < 4; ++i) {
    NodeSpec s;
    s.name = "n" + std::to_string(i);
    s.cpu_milli = 128000;
    s.mem_mib = 1 << 20;
    s.gpu_count = 8;
    ASSERT_TRUE(e.AddNode(s, "H800", {{"data", {"asw0"}}}).ok());
  }
  const auto held = [&](const std::string& name) {
    const auto& qs = e.options().queues;
    const size_t i = static_cast<size_t>(std::find_if(qs.begin(), qs.end(), [&](const QueueSpec& s) { return s.name == name; }) - qs.begin());
    return e.state().queue_usage(i)[kQueueGpu] / (8 * kG);
  };
  const auto cycle = [&](int64_t t) {
    const size_t before = seen.size();
    e.RunCycle(t);
    const Status s = e.state().CheckInvariants();
    EXPECT_TRUE(s.ok()) << s.message();
    return std::vector<EngineEvent>(seen.begin() + static_cast<std::ptrdiff_t>(before), seen.end());
  };
  e.Submit(NodeJob(1, "b", 4, 1), SubmitMode::kEnqueue, 0);
  cycle(0);
  EXPECT_EQ(held("b"), 4);
  // a's 3-node gang is above a's guarantee of 2 nodes: a is owed nothing for it, and it waits.
  e.Submit(NodeJob(2, "a", 3), SubmitMode::kEnqueue, 10);
  EXPECT_EQ(Count(cycle(10), EngineEvent::Kind::kReclaim), 0);
  // The admin gives a 3 nodes and b 1, and adds a queue c (listed first: every index moves).
  ASSERT_TRUE(e.SetQueues({Q("c", 0), Q("b", 8), Q("a", 24)}, SharingSpec{}).ok());
  EXPECT_EQ(held("b"), 4);  // b's job is b's still
  EXPECT_EQ(held("c"), 0);
  // Now a is owed 3 nodes: b's job gives up its surplus above b's new guarantee after the grace.
  std::vector<EngineEvent> ev = cycle(20);
  ASSERT_EQ(Count(ev, EngineEvent::Kind::kReclaim), 1);
  EXPECT_EQ(ev.front().job, 2u);
  EXPECT_EQ(ev.front().detail, "queue");
  EXPECT_EQ(ev.front().at, 80);
  ev = cycle(80);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kShrunk), 1);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kReturned), 0);
  EXPECT_EQ(e.Running(2), 3);
  EXPECT_EQ(e.Running(1), 1);
  EXPECT_EQ(held("a"), 3);
  EXPECT_EQ(held("b"), 1);
  for (int64_t t : {80, 81, 400}) EXPECT_TRUE(cycle(t).empty()) << t;
  // The recorded history (the change included) replays to the same decisions.
  flush();
  auto r = ReplayHistory(history);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->first_difference, -1) << r->difference;
  EXPECT_EQ(r->events.size(), seen.size());
}

TEST(EngineQueueChange, AChangeThatWouldLeaveAJobOutsideALeafQueueIsRefusedAndChangesNothing) {
  Cluster c(2, {Q("a", 8), Q("b", 8)});
  c.Submit(NodeJob(1, "b", 1), 0);
  c.Cycle(0);
  ASSERT_EQ(c.e().Running(1), 1);
  // b holds job 1: it can neither go nor get queues under it.
  Status s = c.e().SetQueues({Q("a", 16)}, SharingSpec{});
  EXPECT_EQ(s.message(), "queue 'b': field 'name': job '" + c.e().state().job(c.e().state().jobs()[0].id).spec.name +
                             "' still runs or waits in it, so it must stay a leaf");
  s = c.e().SetQueues({Q("a", 8), Q("b", 8), Q("b1", 0, 1, "b")}, SharingSpec{});
  EXPECT_NE(s.message().find("queue 'b': field 'name'"), std::string::npos) << s.message();
  // The tree's own checks: an unknown parent.
  s = c.e().SetQueues({Q("a", 8), Q("b", 8, 1, "nowhere")}, SharingSpec{});
  EXPECT_EQ(s.message().rfind("queue 'b': field 'parent'", 0), 0u) << s.message();
  ASSERT_EQ(c.e().options().queues.size(), 2u);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 0}, {"b", 1}}));
  EXPECT_TRUE(c.Cycle(10).empty());
  // Once b's job has ended, b may go; a later job of b is refused.
  c.e().Finish(1, 20);
  c.Cycle(20);
  ASSERT_TRUE(c.e().SetQueues({Q("a", 16)}, SharingSpec{}).ok());
  EXPECT_FALSE(c.e().Submit(NodeJob(2, "b", 1), SubmitMode::kEnqueue, 30).accepted);
  c.Submit(NodeJob(3, "a", 2), 30);
  c.Cycle(30);
  EXPECT_EQ(c.e().Running(3), 2);
}

TEST(EngineQueueChange, JobsThatNamedNoQueueStillStartOnceQueuesAreSetWithOrWithoutAWalltime) {
  // A cluster without queues (2 nodes): job 1 takes both; jobs 2 (a walltime of an hour) and 3
  // (none), one node each, wait. The admin then sets queues: the jobs already there name none and
  // keep their places; each starts as a node frees.
  Cluster c(2, {});
  c.Submit(NodeJob(1, "", 2), 0);
  c.Cycle(0);
  ASSERT_EQ(c.e().Running(1), 2);
  EngineJob timed = NodeJob(2, "", 1);
  timed.walltime_s = 3600;
  c.Submit(timed, 10);
  c.Submit(NodeJob(3, "", 1), 20);
  EXPECT_TRUE(c.Cycle(30).empty());
  ASSERT_TRUE(c.e().SetQueues({Q("a", 8)}, SharingSpec{}).ok());
  EXPECT_TRUE(c.Cycle(40).empty());
  c.e().Finish(1, 50);
  const std::vector<EngineEvent> ev = c.Cycle(50);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kStarted), 2);
  EXPECT_EQ(c.e().Running(2), 1);
  EXPECT_EQ(c.e().Running(3), 1);
  EXPECT_TRUE(c.Cycle(60).empty());
}

TEST(EngineQueues, ATeamReturningToAFullClusterGetsExactlyItsGuaranteeBackAfterOneGracePeriodFromElasticSurplus) {
  // 4 nodes. a is guaranteed 2 nodes, b and c 1 each. a is idle; b and c run elastic jobs of 1..2
  // nodes and grow to 2 each (a has no demand: each one's fair share is 2).
  Cluster c(4, {Q("a", 16), Q("b", 8), Q("c", 8)});
  c.Submit(NodeJob(1, "b", 2, 1), 0);
  c.Submit(NodeJob(2, "c", 2, 1), 0);
  c.Cycle(0);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 0}, {"b", 2}, {"c", 2}}));
  // a comes back with a 2-node gang (LP, the same priority as theirs). Its guarantee is 2 nodes;
  // b and c hold one node each above their guarantees: one replica of each is evicted (their
  // newest), after the 60 s grace period, and nothing else.
  c.Submit(NodeJob(3, "a", 2), 100);
  std::vector<EngineEvent> ev = c.Cycle(100);
  ASSERT_EQ(Count(ev, EngineEvent::Kind::kReclaim), 1);
  const auto reclaim = std::find_if(ev.begin(), ev.end(), [](const EngineEvent& x) { return x.kind == EngineEvent::Kind::kReclaim; });
  EXPECT_EQ(reclaim->job, 3u);
  EXPECT_EQ(reclaim->detail, "queue");
  EXPECT_EQ(reclaim->replicas, 2);  // two victims
  EXPECT_EQ(reclaim->at, 160);
  EXPECT_TRUE(c.Cycle(159).empty());
  ev = c.Cycle(160);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kShrunk), 2);
  for (const EngineEvent& x : ev) {
    if (x.kind == EngineEvent::Kind::kShrunk) {
      EXPECT_EQ(x.detail, "queue reclaim");
      EXPECT_EQ(x.replicas, 1);
    }
  }
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kReturned), 0);  // elastic surplus only: no job lost whole
  EXPECT_EQ(c.e().Running(3), 2);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 2}, {"b", 1}, {"c", 1}}));
  // Stable: more cycles change nothing (b and c are at their guarantees and do not take back).
  for (int64_t t : {160, 161, 400}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
  // When a leaves, b and c grow back — not before the cooldown (300 s) since their shrink ends.
  c.e().Cancel(3, 420);
  EXPECT_EQ(Count(c.Cycle(420), EngineEvent::Kind::kGrown), 0);
  EXPECT_EQ(Count(c.Cycle(459), EngineEvent::Kind::kGrown), 0);
  EXPECT_EQ(Count(c.Cycle(460), EngineEvent::Kind::kGrown), 2);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 0}, {"b", 2}, {"c", 2}}));
}

TEST(EngineQueues, WeightsTwoToOneSplitIdleCapacityTwoToOneWhateverTheArrivalOrder) {
  // 6 nodes, no guarantees; b (weight 1) queues six 1-node jobs before a (weight 2) queues six.
  Cluster c(6, {Q("a", 0, 2), Q("b", 0, 1)});
  for (uint32_t i = 0; i < 6; ++i) c.Submit(NodeJob(10 + i, "b", 1), 0);
  for (uint32_t i = 0; i < 6; ++i) c.Submit(NodeJob(20 + i, "a", 1), 0);
  c.Cycle(0);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 4}, {"b", 2}}));
  EXPECT_TRUE(c.Cycle(1).empty());
  // Without weights (plain queue order) b's earlier jobs take every node.
  SharingSpec plain;
  plain.weights = false;
  Cluster d(6, {Q("a", 0, 2), Q("b", 0, 1)}, plain);
  for (uint32_t i = 0; i < 6; ++i) d.Submit(NodeJob(10 + i, "b", 1), 0);
  for (uint32_t i = 0; i < 6; ++i) d.Submit(NodeJob(20 + i, "a", 1), 0);
  d.Cycle(0);
  EXPECT_EQ(d.Held(), (std::map<std::string, int64_t>{{"a", 0}, {"b", 6}}));
}

TEST(EngineQueues, JobsWithinTheirQueuesFairShareStartBeforeAnOlderJobBeyondItsShareAlsoAfterASisterJobStarted) {
  // 6 nodes, three queues of equal weight, no guarantees, no Reclaim. b runs two 1-node jobs (the
  // cluster was its alone), then queues b3; then c queues c1 and c2 (priority 100) and a queues
  // a0 (priority 350) and a1, all 1-node jobs of priority 300 unless said. Fair shares: 2 nodes
  // each, so b (holding 2) has no room and a and c have room for both their jobs. They start —
  // a1 too, after a0 took half of a's room and c1 (of a1's request and priority, and older)
  // started before it — and b3, older than a1, waits for capacity it would borrow beyond its
  // share; extra cycles change nothing.
  SharingSpec sharing;
  sharing.reclaim = false;
  Cluster c(6, {Q("a", 0), Q("b", 0), Q("c", 0)}, sharing);
  c.Submit(NodeJob(10, "b", 1), 0);
  c.Submit(NodeJob(11, "b", 1), 0);
  c.Cycle(0);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 0}, {"b", 2}, {"c", 0}}));
  c.Submit(NodeJob(12, "b", 1), 1);
  c.Submit(NodeJob(30, "c", 1), 1);
  c.Submit(NodeJob(31, "c", 1, 0, 100), 1);
  c.Submit(NodeJob(20, "a", 1, 0, 350), 1);
  c.Submit(NodeJob(21, "a", 1), 1);
  EXPECT_EQ(Count(c.Cycle(1), EngineEvent::Kind::kStarted), 4);
  for (uint32_t started : {20u, 21u, 30u, 31u}) EXPECT_GT(c.e().Running(started), 0) << started;
  EXPECT_EQ(c.e().Running(12), 0);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 2}, {"b", 2}, {"c", 2}}));
  for (int64_t t = 2; t < 5; ++t) EXPECT_TRUE(c.Cycle(t).empty()) << t;
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 2}, {"b", 2}, {"c", 2}}));
}

TEST(EngineQueues, ElasticJobsGrowOnlyWithinTheirQueuesFairShareAsJobsEndAndQueuesChange) {
  // 8 nodes, no guarantees, weights 1:1, no Reclaim (growth alone is looked at). a queues two
  // elastic jobs (1..8 nodes), b one (1..2): b's demand is 2 nodes, so a's fair share is 6. a's
  // first job takes all 6; its second waits within a's fair share.
  SharingSpec no_reclaim;
  no_reclaim.reclaim = false;
  no_reclaim.rebalance = false;
  Cluster c(8, {Q("a", 0), Q("b", 0)}, no_reclaim);
  c.Submit(NodeJob(1, "a", 8, 1), 0);
  c.Submit(NodeJob(2, "a", 8, 1), 0);
  c.Submit(NodeJob(3, "b", 2, 1), 0);
  c.Cycle(0);
  EXPECT_EQ(c.e().Running(1), 6);
  EXPECT_EQ(c.e().Running(2), 0);
  EXPECT_EQ(c.e().Running(3), 2);
  EXPECT_TRUE(c.Cycle(1).empty());
  // b's job ends: a's fair share is 8, and its second job starts on the 2 nodes.
  c.e().Finish(3, 10);
  c.Cycle(10);
  EXPECT_EQ(c.e().Running(2), 2);
  EXPECT_TRUE(c.Cycle(11).empty());
  // The admin lists b first (every index moves) and caps a at 5 nodes: nothing shrinks (a limit
  // keeps jobs from starting or growing). b queues an elastic job (1..8) on the full cluster.
  QueueSpec a = Q("a", 0);
  a.limit.gpu_milli = 5 * 8 * kG;
  ASSERT_TRUE(c.e().SetQueues({Q("b", 0), a}, no_reclaim).ok());
  c.Submit(NodeJob(4, "b", 8, 1), 20);
  EXPECT_TRUE(c.Cycle(20).empty());
  // a's first job ends: a (demand up to its limit of 5) and b (demand 8) have 4 nodes each as
  // fair shares. b's job starts on 4; a's second job grows from 2 to 4 (Absorb).
  c.e().Finish(1, 30);
  std::vector<EngineEvent> ev = c.Cycle(30);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kGrown), 1);
  EXPECT_EQ(c.e().Running(2), 4);
  EXPECT_EQ(c.e().Running(4), 4);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 4}, {"b", 4}}));
  EXPECT_TRUE(c.Cycle(31).empty());
}

TEST(EngineQueues, AChildQueueBorrowsItsParentsUnusedGuaranteeBeforeAnotherOrg) {
  // Orgs A and B are guaranteed 2 nodes each of 4; A's teams a1 and a2 one each. a2 is idle. B
  // queues four 1-node jobs first, then a1 four: a1 gets A's 2 (its own and a2's), B its 2.
  Cluster c(4, {Q("A", 16), Q("B", 16), Q("a1", 8, 1, "A"), Q("a2", 8, 1, "A"), Q("b1", 16, 1, "B")});
  for (uint32_t i = 0; i < 4; ++i) c.Submit(NodeJob(10 + i, "b1", 1), 0);
  for (uint32_t i = 0; i < 4; ++i) c.Submit(NodeJob(20 + i, "a1", 1), 0);
  c.Cycle(0);
  const auto held = c.Held();
  EXPECT_EQ(held.at("a1"), 2);
  EXPECT_EQ(held.at("a2"), 0);
  EXPECT_EQ(held.at("A"), 2);
  EXPECT_EQ(held.at("B"), 2);
}

TEST(EngineQueues, AGangThatNeedsOneAswIsReclaimedForAsAWholeAsw) {
  // b holds all 4 nodes with 1-node jobs; a (guaranteed 2 nodes) queues a 2-node gang that must
  // stay in one ASW: the plan evicts the two jobs of one ASW, and the gang starts there.
  Cluster c(4, {Q("a", 16), Q("b", 0)});
  for (uint32_t i = 0; i < 4; ++i) c.Submit(NodeJob(10 + i, "b", 1), 0);
  c.Cycle(0);
  ASSERT_EQ(c.Held().at("b"), 4);
  EngineJob gang = NodeJob(1, "a", 2);
  gang.plane = "data";
  gang.required_level = "asw";
  c.Submit(gang, 10);
  std::vector<EngineEvent> ev = c.Cycle(10);
  ASSERT_EQ(Count(ev, EngineEvent::Kind::kReclaim), 1);
  ev = c.Cycle(70);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kReturned), 2);
  ASSERT_EQ(c.e().Running(1), 2);
  std::set<std::string> asws;
  const Topology& topo = c.e().state().topology();
  const PlaneId data = *topo.FindPlane("data");
  for (TaskId t : c.e().state().job(*c.e().JobOf(1)).tasks) {
    const NodeId n = c.e().state().task(t).node;
    asws.insert(topo.domain(topo.NodeDomain(n, data, 0)).name);
  }
  EXPECT_EQ(asws.size(), 1u) << "the gang and its victims share one ASW";
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 2}, {"b", 2}}));
  for (int64_t t : {70, 71, 1000}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
}

TEST(EngineQueues, ALimitHoldsAQueueBelowItEvenOnAnIdleClusterAndTheExplanationNamesIt) {
  QueueSpec a = Q("a", 0);
  a.limit.gpu_milli = 16 * kG;
  Cluster c(4, {a, Q("b", 0)});
  for (uint32_t i = 0; i < 4; ++i) c.Submit(NodeJob(10 + i, "a", 1), 0);
  c.Cycle(0);
  EXPECT_EQ(c.Held().at("a"), 2);
  const Engine::Explanation why = c.e().Explain(12, 0);
  EXPECT_EQ(why.quota, "queue 'a' would hold 24 of its limit of 16 GPUs");
  // An elastic job grows only up to the limit too.
  Cluster d(4, {a, Q("b", 0)});
  d.Submit(NodeJob(1, "a", 4, 1), 0);
  d.Cycle(0);
  EXPECT_EQ(d.e().Running(1), 2);
  EXPECT_TRUE(d.Cycle(1).empty());
}

TEST(EngineQueues, AQueuesLimitCountsWhatItsStandbyReplicasLendSoTheirRestoreKeepsItWithinIt) {
  // 4 nodes. a (limit 2 nodes) runs an HP service of two replicas: its limit. b has none.
  QueueSpec a = Q("a", 0);
  a.limit.gpu_milli = 16 * kG;
  Cluster c(4, {a, Q("b", 0)});
  EngineJob service = NodeJob(1, "a", 2, 0, kHpPriority);
  service.preemptible = false;
  c.Submit(service, 0);
  c.Cycle(0);
  ASSERT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 2}, {"b", 0}}));
  // One replica goes into Standby and lends its node; a holds one node. Its restore will need
  // no room, so a's limit still counts that node: a's LP job (not preemptible, so it may not
  // borrow) waits though two nodes are idle, and the explanation says why. b's spot job runs on
  // the lent node.
  ASSERT_TRUE(c.e().SetStandby(1, 1, 10));
  c.Cycle(10);
  EngineJob lp = NodeJob(2, "a", 1);
  lp.preemptible = false;
  c.Submit(lp, 20);
  c.Submit(NodeJob(3, "b", 1), 20);
  c.Cycle(20);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 1}, {"b", 1}}));
  EXPECT_EQ(c.e().Running(2), 0);
  ASSERT_EQ(c.e().Running(3), 1);
  EXPECT_TRUE(c.e().state().task(c.e().state().job(*c.e().JobOf(3)).tasks[0]).borrowed);
  EXPECT_EQ(c.e().Explain(2, 20).quota, "queue 'a' would hold 24 of its limit of 16 GPUs (8 of them lent by its Standby replicas)");
  // Nor do the shares count on it: a's demand is capped at its limit less what it lends (8 GPUs,
  // not its 8 held plus 8 waiting), so its fair share is 8 GPUs, as b's (its borrower's 8).
  const std::vector<Engine::QueueFigures> figures = c.e().QueueStatus();
  EXPECT_EQ(figures[0].fair, 8 * kG);
  EXPECT_EQ(figures[0].lent, 8 * kG);
  EXPECT_EQ(figures[1].fair, 8 * kG);
  // The restore: the borrower leaves after the Standby grace period (60 s) and the replica runs
  // again. a is back at its limit, never above it (b's job is its driver's to submit again).
  ASSERT_TRUE(c.e().SetStandby(1, 0, 30));
  for (int64_t t : {30, 60, 89}) {
    c.Cycle(t);
    EXPECT_LE(c.Held().at("a"), 2) << t;
    EXPECT_EQ(c.e().Running(2), 0) << t;
  }
  const std::vector<EngineEvent> at90 = c.Cycle(90);
  ASSERT_EQ(at90.size(), 2u);
  EXPECT_EQ(at90[0].kind, EngineEvent::Kind::kReturned);
  EXPECT_EQ(at90[0].job, 3u);
  EXPECT_EQ(at90[1].kind, EngineEvent::Kind::kRestored);
  EXPECT_EQ(c.e().InStandby(1), 0);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 2}, {"b", 0}}));
  EXPECT_EQ(c.e().Running(2), 0);
  EXPECT_EQ(c.e().Explain(2, 90).quota, "queue 'a' would hold 24 of its limit of 16 GPUs");
  for (int64_t t : {91, 92, 1000}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
}

TEST(EngineQueues, AnOrgsLimitHoldsItsTeamWhichHasNoneOfItsOwnOnAnIdleCluster) {
  // org (limit 16 GPUs) > team (no limit); other (no limit). Six idle nodes: the team starts
  // two of its four one-node jobs, and no later cycle starts more; other's job starts.
  QueueSpec org = Q("org", 0);
  org.limit.gpu_milli = 16 * kG;
  Cluster c(6, {org, Q("team", 0, 1, "org"), Q("other", 0)});
  for (uint32_t i = 0; i < 4; ++i) c.Submit(NodeJob(10 + i, "team", 1), 0);
  c.Submit(NodeJob(20, "other", 1), 0);
  c.Cycle(0);
  EXPECT_EQ(c.Held().at("team"), 2);
  EXPECT_EQ(c.Held().at("other"), 1);
  EXPECT_TRUE(c.Cycle(1).empty());
  // Only a queue with no limit on its path is unbounded within the limits.
  const QueueBook& book = c.e().queue_book();
  EXPECT_FALSE(book.Unlimited(0));
  EXPECT_FALSE(book.Unlimited(1));
  EXPECT_TRUE(book.Unlimited(2));
}

TEST(EngineQueues, AStaticQuotaCapsEachQueueAtItsGuaranteeAndBorrowingWithoutReclaimNeverGivesBack) {
  SharingSpec fixed;
  fixed.borrow = false;
  Cluster c(4, {Q("a", 16), Q("b", 16)}, fixed);
  for (uint32_t i = 0; i < 4; ++i) c.Submit(NodeJob(10 + i, "b", 1), 0);
  c.Cycle(0);
  EXPECT_EQ(c.Held().at("b"), 2);  // two nodes stay idle
  SharingSpec keep;
  keep.reclaim = false;
  Cluster d(4, {Q("a", 16), Q("b", 16)}, keep);
  for (uint32_t i = 0; i < 4; ++i) d.Submit(NodeJob(10 + i, "b", 1), 0);
  d.Cycle(0);
  EXPECT_EQ(d.Held().at("b"), 4);
  d.Submit(NodeJob(20, "a", 1), 10);
  EXPECT_EQ(Count(d.Cycle(10), EngineEvent::Kind::kReclaim), 0);
  EXPECT_EQ(Count(d.Cycle(1000), EngineEvent::Kind::kReturned), 0);
  EXPECT_EQ(d.Held().at("a"), 0);
}

TEST(EngineQueues, ManyWaitingJobsOfOneQueueReclaimTogetherOnlyUpToItsEntitlement) {
  // 8 nodes; a and b are guaranteed 4 each. b runs eight 1-node jobs (a idle: b borrows 4). a
  // queues six 1-node jobs at once. Each alone would keep a within its entitlement (4), but the
  // Reclaims under way count as held (count_in_flight): the first four reclaim, one b job each,
  // the last two are not owed. After the grace period a holds exactly 4, b 4.
  Cluster c(8, {Q("a", 32), Q("b", 32)});
  for (uint32_t i = 0; i < 8; ++i) c.Submit(NodeJob(10 + i, "b", 1), 0);
  c.Cycle(0);
  ASSERT_EQ(c.Held().at("b"), 8);
  for (uint32_t i = 0; i < 6; ++i) c.Submit(NodeJob(20 + i, "a", 1), 100);
  std::vector<EngineEvent> ev = c.Cycle(100);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kReclaim), 4);
  ev = c.Cycle(160);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kReturned), 4);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kStarted), 4);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 4}, {"b", 4}}));
  // Stable: a is at its entitlement, b at its guarantee; nothing is taken back either way.
  for (int64_t t : {160, 161, 460, 4000}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 4}, {"b", 4}}));

  // Without it (Kueue's per-workload check, kueue-like): all six reclaim, b is taken to 2 — below
  // its guarantee (with more work waiting, it would take a's two beyond a's guarantee back).
  SharingSpec each;
  each.count_in_flight = false;
  Cluster d(8, {Q("a", 32), Q("b", 32)}, each);
  for (uint32_t i = 0; i < 8; ++i) d.Submit(NodeJob(10 + i, "b", 1), 0);
  d.Cycle(0);
  for (uint32_t i = 0; i < 6; ++i) d.Submit(NodeJob(20 + i, "a", 1), 100);
  EXPECT_EQ(Count(d.Cycle(100), EngineEvent::Kind::kReclaim), 6);
  EXPECT_EQ(Count(d.Cycle(160), EngineEvent::Kind::kReturned), 6);
  EXPECT_EQ(d.Held(), (std::map<std::string, int64_t>{{"a", 6}, {"b", 2}}));
}

TEST(EngineQueues, GpusAlreadyLeavingAVictimsQueueCountAgainstWhatMayStillBeTakenFromIt) {
  // 8 nodes; a is guaranteed 4, b and c 2 each. a idle: b runs five 1-node jobs, c three (a's
  // unused guarantee split between them). a queues four 1-node jobs at once. b is furthest above
  // its fair share (2): its three surplus nodes go first, one per Reclaim; for the fourth, b's
  // surplus is already leaving, so c's one surplus node is taken — no queue ends below its
  // guarantee, and nobody is owed anything afterwards.
  Cluster c(8, {Q("a", 32), Q("b", 16), Q("c", 16)});
  for (uint32_t i = 0; i < 5; ++i) c.Submit(NodeJob(10 + i, "b", 1), 0);
  for (uint32_t i = 0; i < 3; ++i) c.Submit(NodeJob(30 + i, "c", 1), 0);
  c.Cycle(0);
  ASSERT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 0}, {"b", 5}, {"c", 3}}));
  for (uint32_t i = 0; i < 4; ++i) c.Submit(NodeJob(20 + i, "a", 1), 100);
  EXPECT_EQ(Count(c.Cycle(100), EngineEvent::Kind::kReclaim), 4);
  const std::vector<EngineEvent> ev = c.Cycle(160);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kReturned), 4);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 4}, {"b", 2}, {"c", 2}}));
  for (int64_t t : {160, 161, 460, 4000}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 4}, {"b", 2}, {"c", 2}}));
}

TEST(EngineQueues, TheVictimsSupplyLeavesOutTasksBeingEvictedAndForAJobWithoutAReservationHeldNodes) {
  // 2 nodes; a is guaranteed all 16 GPUs, b nothing. a idle: b runs sixteen 1-GPU jobs (8 per
  // node). a queues a 4-GPU job `first` and a 4 x 4-GPU gang `gang`: first's Reclaim evicts four
  // of b's tasks on one node and holds that node for it; the gang is not owed (4 claimed + 16 >
  // 16) and waits. b may lose 12 more GPUs (16 held, 4 leaving, entitled to none). For one more
  // 4-GPU replica of the gang (owed: 4 + 4 <= 16), what a Reclaim could take is b's 8 tasks on the
  // other node: the 4 leaving are no victims again, and the 4 still running on the held node are
  // out of reach of a job without a reservation. `first`, which holds that node, could reach
  // those 4 too: 12.
  Cluster c(2, {Q("a", 16), Q("b", 0)});
  for (uint32_t i = 0; i < 16; ++i) {
    EngineJob j = testing::WholeGpuJob(10 + i, 1, 1, 300, true);
    j.queue = "b";
    c.Submit(j, 0);
  }
  c.Cycle(0);
  ASSERT_EQ(c.e().state().queue_usage(1)[kQueueGpu], 16 * kG);
  EngineJob first = testing::WholeGpuJob(40, 1, 4, 300, true), gang = testing::WholeGpuJob(41, 4, 4, 300, true);
  first.queue = gang.queue = "a";
  c.Submit(first, 100);
  c.Submit(gang, 100);
  EXPECT_EQ(Count(c.Cycle(100), EngineEvent::Kind::kReclaim), 1);
  const std::optional<JobId> j1 = c.e().JobOf(40), j2 = c.e().JobOf(41);
  ASSERT_TRUE(j1 && j2);
  ASSERT_TRUE(c.e().state().job(*j1).reservation.valid());
  ASSERT_FALSE(c.e().state().job(*j2).reservation.valid());
  EXPECT_EQ(c.e().queue_book().Supply(c.e().state(), *j2, 1, 100), 8 * kG);
  EXPECT_EQ(c.e().queue_book().Supply(c.e().state(), *j1, 1, 100), 12 * kG);
}

TEST(EngineQueues, ABudgetSmallerThanAVictimJobsWholeTakesNothingOfItAndOneAsLargeTakesItWhole) {
  // 8 nodes; a is guaranteed 4, b 1, c 3. a idle: b runs a rigid 4-node gang (3 above its
  // guarantee), c four 1-node jobs (1 above). a queues two 1-node jobs. The gang is b's only
  // victim unit and 4 nodes do not fit in the 3 b may lose: only c's surplus node is taken back,
  // for a's first job; its second waits (nothing else may be taken), and later cycles change
  // nothing.
  {
    Cluster c(8, {Q("a", 32), Q("b", 8), Q("c", 24)});
    c.Submit(NodeJob(10, "b", 4), 0);
    for (uint32_t i = 0; i < 4; ++i) c.Submit(NodeJob(30 + i, "c", 1), 0);
    c.Cycle(0);
    ASSERT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 0}, {"b", 4}, {"c", 4}}));
    c.Submit(NodeJob(20, "a", 1), 100);
    c.Submit(NodeJob(21, "a", 1), 100);
    EXPECT_EQ(Count(c.Cycle(100), EngineEvent::Kind::kReclaim), 1);
    c.Cycle(160);
    EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 1}, {"b", 4}, {"c", 3}}));
    for (int64_t t : {161, 460, 4000}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
    EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 1}, {"b", 4}, {"c", 3}}));
  }
  // b guaranteed nothing (c 4): b may lose all 4 nodes, exactly its gang, which a's 4-node gang
  // takes back whole.
  {
    Cluster c(8, {Q("a", 32), Q("b", 0), Q("c", 32)});
    c.Submit(NodeJob(10, "b", 4), 0);
    for (uint32_t i = 0; i < 4; ++i) c.Submit(NodeJob(30 + i, "c", 1), 0);
    c.Cycle(0);
    ASSERT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 0}, {"b", 4}, {"c", 4}}));
    c.Submit(NodeJob(20, "a", 4), 100);
    EXPECT_EQ(Count(c.Cycle(100), EngineEvent::Kind::kReclaim), 1);
    c.Cycle(160);
    EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"a", 4}, {"b", 0}, {"c", 4}}));
    for (int64_t t : {161, 460, 4000}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
  }
}

TEST(EngineQueues, TheSupplyBoundTowardFairSharesIsWhatLeavesAboveThemMayGiveAndAJobNeedingMoreWaits) {
  // 8 nodes; a and b weigh alike, neither is guaranteed anything. a idle, b runs all 8 nodes
  // (`b_jobs`: its jobs' sizes in nodes). a queues an `a_nodes`-node job: the fair shares become
  // a `a_nodes` (its demand) and b the rest, so b holds `a_nodes` nodes above its share (its
  // budget) and a is short of all of its own. No GPU is free.
  const auto run = [](const std::vector<int>& b_jobs, int a_nodes) {
    auto c = std::make_unique<Cluster>(8, std::vector<QueueSpec>{Q("a", 0), Q("b", 0)});
    for (size_t i = 0; i < b_jobs.size(); ++i) c->Submit(NodeJob(10 + static_cast<uint32_t>(i), "b", b_jobs[i]), 0);
    c->Cycle(0);
    EXPECT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 0}, {"b", 8}}));
    c->Submit(NodeJob(20, "a", a_nodes), 100);
    return c;
  };
  // After a cycle at t: SupplyBound toward fair shares for a's job and the job's own supply.
  const auto bound_and_supply = [](Cluster& c, int replicas, int64_t t) {
    const JobId job = *c.e().JobOf(20);
    const ClusterState& st = c.e().state();
    bool below = false;
    int64_t supply = -1;
    (void)c.e().queue_book().RebalanceVictims(st, job, replicas, t, &below, &supply, false);
    EXPECT_TRUE(below);
    const int64_t bound = c.e().queue_book().SupplyBound(st, 0, st.task(st.job(job).tasks.front()).req.models,
                                                         QueueBook::Bound::kFair, t);
    return std::make_pair(bound, supply);
  };
  // b's only victim unit is its 8-node gang, more than its 2-node budget: nothing may be taken
  // (bound 0). a's 2-node job waits, whatever the later cycles.
  {
    auto c = run({8}, 2);
    EXPECT_EQ(Count(c->Cycle(100), EngineEvent::Kind::kReclaim), 0);
    EXPECT_EQ(bound_and_supply(*c, 2, 100), std::make_pair(int64_t{0}, int64_t{0}));
    for (int64_t t : {160, 460, 4000}) EXPECT_TRUE(c->Cycle(t).empty()) << t;
    EXPECT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 0}, {"b", 8}}));
  }
  // b runs a 6-node gang and two 1-node jobs; a wants 3 nodes, so b's budget is 3 nodes: the gang
  // does not fit in it, the two small jobs do — 16 GPUs, the bound and a's supply alike (b is the
  // only leaf above its share). a's job needs 24: it waits, whatever the later cycles.
  {
    auto c = run({6, 1, 1}, 3);
    EXPECT_EQ(Count(c->Cycle(100), EngineEvent::Kind::kReclaim), 0);
    EXPECT_EQ(bound_and_supply(*c, 3, 100), std::make_pair(16 * kG, 16 * kG));
    for (int64_t t : {160, 460, 4000}) EXPECT_TRUE(c->Cycle(t).empty()) << t;
    EXPECT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 0}, {"b", 8}}));
  }
  // The same, a wanting 2 nodes: the two small jobs are exactly what it needs. The rebalance
  // takes them back and a's job runs on their nodes after the grace period; later cycles change
  // nothing.
  {
    auto c = run({6, 1, 1}, 2);
    EXPECT_EQ(Count(c->Cycle(100), EngineEvent::Kind::kReclaim), 1);
    c->Cycle(160);
    EXPECT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 2}, {"b", 6}}));
    for (int64_t t : {161, 460, 4000}) EXPECT_TRUE(c->Cycle(t).empty()) << t;
    EXPECT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 2}, {"b", 6}}));
  }
}

TEST(EngineQueues, TheSupplyBoundCountsOnlyTheTeamsOfAnOrgAtItsGuaranteeAndAJobNeedingMoreWaits) {
  // 8 nodes; org1 is guaranteed 4 nodes (t1 3, t2 1), org2 2 (t3 2). t1 idle: t2 runs a rigid
  // 4-node gang (3 above its guarantee), t3 four 1-node jobs (2 above). t1 queues a 2-node job,
  // owed (0 + 2 <= 3), but org1 already holds its 4 nodes: a Reclaim for it may take only within
  // org1, and t2's gang does not fit in the 3 nodes t2 may lose. So the bound is 0 (t3's 2 nodes
  // are out of reach), as is the job's supply; no GPU is free. The job waits, whatever the later
  // cycles. t3's own bound is its org's: its 2 nodes above its guarantee, 16 GPUs.
  Cluster c(8, {Q("org1", 32), Q("t1", 24, 1, "org1"), Q("t2", 8, 1, "org1"), Q("org2", 16), Q("t3", 16, 1, "org2")});
  c.Submit(NodeJob(10, "t2", 4), 0);
  for (uint32_t i = 0; i < 4; ++i) c.Submit(NodeJob(30 + i, "t3", 1), 0);
  c.Cycle(0);
  const std::map<std::string, int64_t> before{{"org1", 4}, {"t1", 0}, {"t2", 4}, {"org2", 4}, {"t3", 4}};
  ASSERT_EQ(c.Held(), before);
  c.Submit(NodeJob(20, "t1", 2), 100);
  EXPECT_EQ(Count(c.Cycle(100), EngineEvent::Kind::kReclaim), 0);
  const ClusterState& st = c.e().state();
  const JobId job = *c.e().JobOf(20);
  const GpuModelSet models = st.task(st.job(job).tasks.front()).req.models;
  EXPECT_EQ(c.e().queue_book().SupplyBound(st, 1, models, QueueBook::Bound::kEntitled, 100), 0);
  EXPECT_EQ(c.e().queue_book().Supply(st, job, 2, 100), 0);
  EXPECT_EQ(c.e().queue_book().SupplyBound(st, 4, models, QueueBook::Bound::kEntitled, 100), 16 * kG);
  for (int64_t t : {160, 460, 4000}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
  EXPECT_EQ(c.Held(), before);
  EXPECT_EQ(c.e().Running(20), 0);
}

// The queues of 8 nodes: org R (4 nodes) with teams v and r (2 each), org P with team p (4).
std::vector<QueueSpec> TwoOrgs() {
  return {Q("R", 32), Q("v", 16, 1, "R"), Q("r", 16, 1, "R"), Q("P", 32), Q("p", 32, 1, "P")};
}

// On TwoOrgs: v runs four 1-node jobs (1-4), p four (10-13); at 10 r queues two (20, 21), is owed,
// and two of v's jobs are evicted for it (v above its entitlement of 2) at 70. Returns their ids
// (they may not borrow for reborrow_s).
std::vector<uint32_t> EvictTwoOfV(Cluster& c) {
  for (uint32_t i = 0; i < 4; ++i) c.Submit(NodeJob(1 + i, "v", 1), 0);
  for (uint32_t i = 0; i < 4; ++i) c.Submit(NodeJob(10 + i, "p", 1), 0);
  c.Cycle(0);
  for (uint32_t i = 0; i < 2; ++i) c.Submit(NodeJob(20 + i, "r", 1), 10);
  EXPECT_EQ(Count(c.Cycle(10), EngineEvent::Kind::kReclaim), 2);
  std::vector<uint32_t> evicted;
  for (const EngineEvent& x : c.Cycle(70)) {
    if (x.kind == EngineEvent::Kind::kReturned) evicted.push_back(x.job);
  }
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"P", 4}, {"R", 4}, {"p", 4}, {"r", 2}, {"v", 2}}));
  return evicted;
}

TEST(EngineQueues, AJobEvictedByAReclaimStartsAgainWithinItsTeamsGuaranteeWhileASisterTeamBorrows) {
  // 8 nodes; org R (4 nodes) has teams v and r (2 each), org P has team p (4). v runs four 1-node
  // jobs, p four. r queues two: it is owed, and two of v's jobs are evicted for it (v above its
  // entitlement of 2); those may not borrow for reborrow_s.
  Cluster c(8, TwoOrgs());
  const std::vector<uint32_t> evicted = EvictTwoOfV(c);
  ASSERT_EQ(evicted.size(), 2u);
  // p finishes two jobs; r borrows the two idle nodes (R now above its guarantee).
  c.e().Finish(10, 100);
  c.e().Finish(11, 100);
  for (uint32_t i = 0; i < 2; ++i) c.Submit(NodeJob(22 + i, "r", 1), 100);
  c.Cycle(100);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"P", 2}, {"R", 6}, {"p", 2}, {"r", 4}, {"v", 2}}));
  // One of v's jobs finishes: v holds 1 of its guarantee of 2, and one node is idle. An evicted
  // job of v comes back: it starts at once on the idle node — v stays within its guarantee (2)
  // — although R is above its own guarantee because r borrows. No Reclaim is needed.
  uint32_t running_v = 0;
  for (uint32_t id = 1; id <= 4; ++id) {
    if (c.e().Running(id) > 0) running_v = id;
  }
  c.e().Finish(running_v, 200);
  c.Submit(NodeJob(evicted[0], "v", 1), 200);
  const std::vector<EngineEvent> ev = c.Cycle(200);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kReclaim), 0);
  EXPECT_EQ(c.e().Running(evicted[0]), 1);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"P", 2}, {"R", 6}, {"p", 2}, {"r", 4}, {"v", 2}}));
  for (int64_t t : {200, 201, 1000}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
}

TEST(EngineQueues, AJobKeptFromBorrowingDoesNotHoldBackTheLaterJobsOfItsShapeThatMayBorrow) {
  // 8 nodes, no weights (one pass within limits); org R (4 nodes) has teams v and r (2 each), org
  // P has team p (4). As above, two of v's four jobs are evicted for r's two; they may not
  // borrow for reborrow_s. At 100 p finishes two jobs (two nodes idle), and v queues an evicted
  // job again and then a new one of the same request. v holds its guarantee, so the evicted job
  // has no room (it may start only within it) — that room is its own, not its shape's: the new
  // job, which may borrow, starts on an idle node in the same cycle (before, it waited behind the
  // evicted one until its reborrow_s ended).
  SharingSpec plain;
  plain.weights = false;
  Cluster c(8, TwoOrgs(), plain);
  const std::vector<uint32_t> evicted = EvictTwoOfV(c);
  ASSERT_EQ(evicted.size(), 2u);
  c.e().Finish(10, 100);
  c.e().Finish(11, 100);
  c.Submit(NodeJob(evicted[0], "v", 1), 100);
  c.Submit(NodeJob(30, "v", 1), 100);
  c.Cycle(100);
  EXPECT_EQ(c.e().Running(evicted[0]), 0);
  EXPECT_EQ(c.e().Running(30), 1);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"P", 2}, {"R", 5}, {"p", 2}, {"r", 2}, {"v", 3}}));
  for (int64_t t : {100, 101}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
}

TEST(EngineQueues, ACooldownDoesNotKeepATeamBelowItsGuaranteeFromGettingItBack) {
  // 8 nodes; org R (4 nodes) has teams a and b (2 each), org P has team c (4). c runs eight
  // 1-node jobs. At 10 a queues four: with b idle, a is entitled to all of R's 4 and reclaims
  // them from c (a is then not reclaimed from for cooldown_s, 300 s, until 310).
  Cluster c(8, {Q("R", 32), Q("a", 16, 1, "R"), Q("b", 16, 1, "R"), Q("P", 32), Q("c", 32, 1, "P")});
  for (uint32_t i = 0; i < 8; ++i) c.Submit(NodeJob(30 + i, "c", 1), 0);
  c.Cycle(0);
  for (uint32_t i = 0; i < 4; ++i) c.Submit(NodeJob(10 + i, "a", 1), 10);
  EXPECT_EQ(Count(c.Cycle(10), EngineEvent::Kind::kReclaim), 4);
  c.Cycle(70);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"P", 4}, {"R", 4}, {"a", 4}, {"b", 0}, {"c", 4}}));
  // At 100 b queues two: b is below its guarantee (2), a holds 2 above its entitlement (now 2).
  // The cooldown would hold until 310; a guarantee comes back within the grace period instead.
  for (uint32_t i = 0; i < 2; ++i) c.Submit(NodeJob(20 + i, "b", 1), 100);
  EXPECT_EQ(Count(c.Cycle(100), EngineEvent::Kind::kReclaim), 2);
  EXPECT_EQ(Count(c.Cycle(160), EngineEvent::Kind::kReturned), 2);
  EXPECT_EQ(c.Held(), (std::map<std::string, int64_t>{{"P", 4}, {"R", 4}, {"a", 2}, {"b", 2}, {"c", 4}}));
  for (int64_t t : {160, 161, 400, 4000}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
}

TEST(EngineQueues, AGrowthThatPutsAQueueAboveItsEntitlementIsReclaimedForInTheSameCycle) {
  // Two 8-GPU nodes of 393,216 MiB; no weights (Absorb grows within limits: there are none).
  // Queues: a (6 GPUs guaranteed), c (6) and org O (4) with teams b (4) and b3 (none). At 0-3
  // the cluster fills: on node X b3's b1 (6 GPUs, 200,000 MiB) and c's c3 (2 GPUs); on Y c's c1
  // (2 GPUs, 300,000 MiB) and c2 (3 GPUs), and b's elastic job e (1-GPU replicas, 1..4) with
  // the 3 GPUs left. a queues j (6 GPUs, 200,000 MiB): it fits nowhere, and b1 may not be taken
  // for it (O holds 5 GPUs above its entitlement of 4, less than b1's 6). At 10 c2 ends: Y has
  // 3 GPUs free but not j's memory, so j still waits, and the Reclaim action (before Absorb)
  // still finds nothing to take. Then e grows to its max of 4 on Y (b is then at its entitlement,
  // so e is no victim) and O holds 6 above its own: the cycle runs its actions again, and j
  // Reclaims b1 in that same cycle — not in a second cycle at the same time, as a driver with
  // another rhythm would run.
  SharingSpec plain;
  plain.weights = false;
  plain.cooldown_s = 0;
  plain.reborrow_s = 0;
  Cluster c(2, {Q("a", 6), Q("O", 4), Q("b", 4, 1, "O"), Q("b3", 0, 1, "O"), Q("c", 6)}, plain);
  const auto job = [](uint32_t id, const char* queue, int gpus, int64_t mem_mib) {
    EngineJob j = testing::WholeGpuJob(id, 1, gpus, 300, true);
    j.per_replica.mem_mib = mem_mib;
    j.queue = queue;
    return j;
  };
  c.Submit(job(1, "b3", 6, 200000), 0);  // b1
  c.Cycle(0);
  c.Submit(job(2, "c", 2, 300000), 1);  // c1
  c.Cycle(1);
  c.Submit(job(3, "c", 2, 1024), 2);  // c3
  c.Submit(job(4, "c", 3, 1024), 2);  // c2
  c.Cycle(2);
  EngineJob e = job(5, "b", 1, 1024);
  e.max_replicas = 4;
  c.Submit(e, 3);
  c.Submit(job(6, "a", 6, 200000), 3);  // j
  c.Cycle(3);
  const auto node_of = [&](uint32_t id) { return c.e().state().task(c.e().state().job(*c.e().JobOf(id)).tasks[0]).node; };
  const NodeId x = node_of(1);
  ASSERT_EQ(node_of(3), x);
  ASSERT_NE(node_of(2), x);
  ASSERT_NE(node_of(4), x);
  ASSERT_EQ(c.e().Running(5), 3);
  ASSERT_EQ(c.e().Running(6), 0);
  ASSERT_EQ(c.e().state().allocated_gpu_milli(), 16 * kG);
  EXPECT_TRUE(c.Cycle(4).empty());
  c.e().Finish(4, 10);
  const std::vector<EngineEvent> ev = c.Cycle(10);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kGrown);
  EXPECT_EQ(ev[0].job, 5u);
  EXPECT_EQ(ev[0].replicas, 4);
  EXPECT_EQ(ev[1].kind, EngineEvent::Kind::kReclaim);
  EXPECT_EQ(ev[1].job, 6u);
  EXPECT_TRUE(c.Cycle(10).empty());
  // After the grace period b1 goes and j starts on X; e keeps its 4 replicas.
  c.Cycle(70);
  EXPECT_EQ(c.e().Running(1), 0);
  ASSERT_EQ(c.e().Running(6), 1);
  EXPECT_EQ(node_of(6), x);
  EXPECT_EQ(c.e().Running(5), 4);
  for (int64_t t : {70, 71, 400}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
}

TEST(EngineQueues, AJobIsRejectedForAnUnknownOrInnerQueueOrAPriorityAboveItsQueuesCeiling) {
  QueueSpec capped = Q("low", 0);
  capped.max_priority = 500;
  Cluster c(2, {Q("org", 0), Q("team", 0, 1, "org"), capped});
  auto reason = [&](const EngineJob& j) {
    const Admission a = c.e().Submit(j, SubmitMode::kEnqueue, 0);
    EXPECT_FALSE(a.accepted);
    EXPECT_TRUE(a.never);
    return a.reason;
  };
  EXPECT_EQ(reason(NodeJob(1, "nowhere", 1)), "no queue 'nowhere'");
  EXPECT_EQ(reason(NodeJob(2, "org", 1)), "queue 'org' has queues under it: jobs run in its leaves");
  EXPECT_EQ(reason(NodeJob(3, "low", 1, 0, 800)), "priority 800 is above the ceiling of queue 'low' (500)");
  EXPECT_EQ(reason(NodeJob(4, "", 1)), "names no queue, and every job of this cluster runs in one");
  EXPECT_TRUE(c.e().Submit(NodeJob(5, "team", 1), SubmitMode::kEnqueue, 0).accepted);
}

// Time-based fairness counts what a queue held exactly, whatever the cycles between: usage
// half-life one hour; queue a holds 4 nodes (32,000 milli-GPU) from 0 and 2 from 3,600. Its
// decayed usage at 3,600 is the integral of 32,000 x 2^(-(3,600 - s) / 3,600) ds over [0, 3,600]
// = 32,000 x 3,600 / ln 2 x (1 - 1/2), and at 7,200 that decayed by half plus 16,000 x 3,600 /
// ln 2 x (1 - 1/2). One engine runs cycles only at those times, another every 100 s between:
// the same figures. (Before, each refresh added usage x the time since the last one, undecayed:
// 115,200,000 at 3,600 for the first engine, and a different figure for the second.)
TEST(EngineQueues, TimeBasedFairnessCountsUsageExactlyWhateverTheCyclesBetween) {
  SharingSpec sharing;
  sharing.usage_half_life_s = 3600;
  Cluster sparse(4, {Q("a", 0), Q("b", 0)}, sharing), dense(4, {Q("a", 0), Q("b", 0)}, sharing);
  const double per_hour = 3600.0 / std::numbers::ln2 * 0.5;  // GPU-milli x s of a constant milli over an hour
  std::vector<double> at_3600, at_7200;
  for (Cluster* c : {&sparse, &dense}) {
    for (uint32_t id = 1; id <= 4; ++id) c->Submit(NodeJob(id, "a", 1), 0);
    EXPECT_EQ(c->Cycle(0).size(), 4u);
    for (int64_t t = 100; c == &dense && t < 3600; t += 100) EXPECT_TRUE(c->Cycle(t).empty()) << t;
    c->e().Finish(1, 3600);
    c->e().Finish(2, 3600);
    EXPECT_TRUE(c->Cycle(3600).empty());
    at_3600.push_back(c->e().Carried(nullptr).queues[0].decayed);
    EXPECT_EQ(c->e().Carried(nullptr).usage_at, 3600);
    for (int64_t t = 3700; c == &dense && t < 7200; t += 100) EXPECT_TRUE(c->Cycle(t).empty()) << t;
    c->e().Finish(3, 7200);
    EXPECT_TRUE(c->Cycle(7200).empty());
    at_7200.push_back(c->e().Carried(nullptr).queues[0].decayed);
  }
  EXPECT_DOUBLE_EQ(at_3600[0], 32000 * per_hour);
  EXPECT_DOUBLE_EQ(at_7200[0], 32000 * per_hour * 0.5 + 16000 * per_hour);
  EXPECT_EQ(at_3600[1], at_3600[0]);  // bit for bit
  EXPECT_EQ(at_7200[1], at_7200[0]);
}

// The time-based weights move only when what the queues hold does, so that the shares at a time
// do not depend on which cycles a driver ran before it (the service's loop runs at any second,
// the simulator at its events). Half-life one hour, no Reclaim; 4 nodes. At 0 a's j1 (2 nodes)
// and b's j2 (1 node) start; j2 ends at 1,000. From then a's decayed usage grows and b's decays,
// so the weights computed from the usage now would change every second. At 1,000 a's j3 and b's
// j4 (3 nodes each) wait: 2 nodes are free, neither fits. Nothing held changes until 3,000: the
// fair shares at 1,800 and at 3,000 are the same (before, b's weight grew in between and its
// fair share with it). When j1 ends at 3,000 they move (the weights as of then).
TEST(EngineQueues, TimeBasedWeightsMoveOnlyWhenWhatTheQueuesHoldChanges) {
  SharingSpec sharing;
  sharing.usage_half_life_s = 3600;
  sharing.reclaim = false;
  Cluster c(4, {Q("a", 0), Q("b", 0)}, sharing);
  c.Submit(NodeJob(1, "a", 2), 0);
  c.Submit(NodeJob(2, "b", 1), 0);
  EXPECT_EQ(Count(c.Cycle(0), EngineEvent::Kind::kStarted), 2);
  c.e().Finish(2, 1000);
  c.Submit(NodeJob(3, "a", 3), 1000);
  c.Submit(NodeJob(4, "b", 3), 1000);
  EXPECT_EQ(Count(c.Cycle(1000), EngineEvent::Kind::kStarted), 0);
  EXPECT_TRUE(c.Cycle(1800).empty());
  const std::vector<int64_t> at_1800 = c.e().queue_book().shares().fair;
  EXPECT_TRUE(c.Cycle(3000 - 1).empty());
  EXPECT_EQ(c.e().queue_book().shares().fair, at_1800);
  c.e().Finish(1, 3000);
  c.Cycle(3000);
  EXPECT_NE(c.e().queue_book().shares().fair, at_1800);
}

// ---- Preemption within a queue (SharingSpec::within_queue).

// HP job `id` of queue `queue`: `replicas` whole nodes, not preemptible.
EngineJob HpNodeJob(uint32_t id, const std::string& queue, int replicas) {
  EngineJob j = testing::WholeGpuJob(id, replicas, 8, kHpPriority);
  j.queue = queue;
  return j;
}

// The jobs `ev` evicted whole (kReturned).
std::set<uint32_t> Returned(const std::vector<EngineEvent>& ev) {
  std::set<uint32_t> out;
  for (const EngineEvent& x : ev) {
    if (x.kind == EngineEvent::Kind::kReturned) out.insert(x.job);
  }
  return out;
}

// 4 nodes; a is guaranteed 1 and limited to 2, b guaranteed 1; preemption within a queue on.
std::unique_ptr<Cluster> TwoTeamsOnFourNodes() {
  QueueSpec a = Q("a", 8);
  a.limit.gpu_milli = 16 * kG;
  SharingSpec sharing;
  sharing.within_queue = true;
  return std::make_unique<Cluster>(4, std::vector<QueueSpec>{a, Q("b", 8)}, sharing);
}

// 8 nodes; a is guaranteed 2 and limited to 4, b (guaranteed 2) runs nothing, so 4 nodes are
// idle. a runs its limit in LP work: j3 (2 nodes, priority 100, from 0 s), j2 (1 node, 200, from
// 0 s), j1 (1 node, 100, from 10 s). At 100 s a's HP job j10 (2 nodes) arrives.
std::unique_ptr<Cluster> ATeamAtItsLimit(bool within_queue, bool priority_queue = true) {
  QueueSpec a = Q("a", 16);
  a.limit.gpu_milli = 32 * kG;
  SharingSpec sharing;
  sharing.within_queue = within_queue;
  auto c = std::make_unique<Cluster>(8, std::vector<QueueSpec>{a, Q("b", 16)}, sharing, 60, kHpPriority, priority_queue);
  c->Submit(NodeJob(3, "a", 2, 0, 100), 0);
  c->Submit(NodeJob(2, "a", 1, 0, 200), 0);
  c->Cycle(0);
  c->Submit(NodeJob(1, "a", 1, 0, 100), 10);
  c->Cycle(10);
  EXPECT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 4}, {"b", 0}}));
  c->Submit(HpNodeJob(10, "a", 2), 100);
  return c;
}

TEST(EngineQueues, WithinItsQueueAnHpJobAtItsQueuesLimitEvictsTheFewestLowerPriorityJobsThere) {
  std::unique_ptr<Cluster> c = ATeamAtItsLimit(true);
  // Candidates, lowest priority first, then the most recently started: j1, j3, j2. j1 alone
  // makes room for 1 node, j1 and j3 for 3: j3 is needed, j1 is not (j3 alone makes the 2
  // nodes) and is given back. The 2 nodes go on idle nodes (placing them evicts no one), but j3
  // leaves all the same: a's limit needs it gone.
  std::vector<EngineEvent> ev = c->Cycle(100);
  ASSERT_EQ(Count(ev, EngineEvent::Kind::kReclaim), 1);
  EXPECT_EQ(ev.back().job, 10u);
  EXPECT_EQ(ev.back().detail, "within its queue");
  EXPECT_EQ(ev.back().at, 160);  // one grace period
  EXPECT_TRUE(c->Cycle(159).empty());
  EXPECT_EQ(Returned(c->Cycle(160)), (std::set<uint32_t>{3}));
  EXPECT_EQ(c->e().Running(10), 2);
  EXPECT_EQ(c->e().Running(1), 1);
  EXPECT_EQ(c->e().Running(2), 1);
  EXPECT_EQ(c->e().Running(3), 0);  // waits: a is at its limit again
  EXPECT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 4}, {"b", 0}}));
  for (int64_t t : {161, 600, 5000}) EXPECT_TRUE(c->Cycle(t).empty()) << t;
}

TEST(EngineQueues, WithoutPreemptionWithinItsQueueAnHpJobAtItsQueuesLimitWaitsThoughNodesAreIdle) {
  std::unique_ptr<Cluster> c = ATeamAtItsLimit(false);
  for (int64_t t : {100, 160, 600, 5000}) EXPECT_TRUE(c->Cycle(t).empty()) << t;
  EXPECT_EQ(c->e().Running(10), 0);
  EXPECT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 4}, {"b", 0}}));
}

TEST(EngineQueues, InAFifoQueueAnHpJobDoesNotPreemptWithinItsQueue) {
  // Priority does not order a FIFO queue: the victims, back in the queue before the HP job, would
  // take its room back as soon as they left (a flapping loop). So it waits, as without the option.
  std::unique_ptr<Cluster> c = ATeamAtItsLimit(true, false);
  for (int64_t t : {100, 160, 600, 5000}) EXPECT_TRUE(c->Cycle(t).empty()) << t;
  EXPECT_EQ(c->e().Running(10), 0);
  EXPECT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 4}, {"b", 0}}));
}

TEST(EngineQueues, WithinItsQueueAnHpJobTakesNothingWhenItsQueuesLowerPriorityWorkCannotMakeItsRoom) {
  // 4 nodes, a limited to 2 and holding them: an HP job (1 node) and an LP one (1 node). b's LP
  // job holds the other 2. a's second HP job needs 2 nodes: a's LP job frees only 1, so nothing
  // is evicted — not a's LP job, nor b's work.
  std::unique_ptr<Cluster> c = TwoTeamsOnFourNodes();
  c->Submit(HpNodeJob(1, "a", 1), 0);
  c->Submit(NodeJob(2, "a", 1, 0, 100), 0);
  c->Submit(NodeJob(3, "b", 2, 0, 100), 0);
  c->Cycle(0);
  ASSERT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 2}, {"b", 2}}));
  c->Submit(HpNodeJob(4, "a", 2), 100);
  for (int64_t t : {100, 160, 600}) EXPECT_TRUE(c->Cycle(t).empty()) << t;
  EXPECT_EQ(c->e().Running(4), 0);
  EXPECT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 2}, {"b", 2}}));
}

TEST(EngineQueues, WithinItsQueueAnHpJobOnAFullClusterStartsWhereItsQueuesVictimsWere) {
  // 4 nodes, all held: a (limited to 2) runs two LP jobs of 1 node, b 2 nodes of LP work. a's HP
  // job (1 node) evicts a's most recently started LP job (the least work lost, so the plan's
  // choice for placing it too) and starts on its node; b keeps its 2.
  std::unique_ptr<Cluster> c = TwoTeamsOnFourNodes();
  c->Submit(NodeJob(1, "a", 1, 0, 100), 0);
  c->Submit(NodeJob(3, "b", 2, 0, 100), 0);
  c->Cycle(0);
  c->Submit(NodeJob(2, "a", 1, 0, 100), 5);
  c->Cycle(5);
  ASSERT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 2}, {"b", 2}}));
  c->Submit(HpNodeJob(10, "a", 1), 100);
  std::vector<EngineEvent> ev = c->Cycle(100);
  ASSERT_EQ(Count(ev, EngineEvent::Kind::kReclaim), 1);
  EXPECT_EQ(ev.back().detail, "within its queue");
  EXPECT_EQ(Returned(c->Cycle(160)), (std::set<uint32_t>{2}));
  EXPECT_EQ(c->e().Running(10), 1);
  EXPECT_EQ(c->Held(), (std::map<std::string, int64_t>{{"a", 2}, {"b", 2}}));
  for (int64_t t : {161, 600, 5000}) EXPECT_TRUE(c->Cycle(t).empty()) << t;
}

// 8 nodes; a guaranteed 2 and limited to 4 (32 GPUs), b guaranteed 2 and idle. a runs j3 (12
// replicas of 1 GPU, priority 100) and j4 (1 x 4 GPUs, priority 100) from 0 s, and the elastic j5
// (1..20 replicas of 1 GPU, priority 200; preemptible or not) from 1 s, at a's limit: 16 replicas.
// At 50 s j4 ends (4 GPUs of room) and a's HP job j10 (2 nodes: 16 GPUs) arrives. Its queue's room
// (4) and j3's 12 GPUs make its 16: it reclaims j3 alone, due at 110 s. j5 could grow by 4 into
// that room now that j10's Reclaim is under way (it no longer blocks growth), but the room is j10's.
std::unique_ptr<Cluster> WithinQueueReclaimUnderWay(bool j5_preemptible) {
  QueueSpec a = Q("a", 16);
  a.limit.gpu_milli = 32 * kG;
  SharingSpec sharing;
  sharing.within_queue = true;
  auto c = std::make_unique<Cluster>(8, std::vector<QueueSpec>{a, Q("b", 16)}, sharing);
  const auto gpu_job = [](uint32_t id, int replicas, int gpus, int min, int32_t priority, bool preemptible) {
    EngineJob j = testing::WholeGpuJob(id, replicas, gpus, priority, preemptible);
    j.min_replicas = min;
    j.queue = "a";
    return j;
  };
  c->Submit(gpu_job(3, 12, 1, 12, 100, true), 0);
  c->Submit(gpu_job(4, 1, 4, 1, 100, true), 0);
  c->Cycle(0);
  c->Submit(gpu_job(5, 20, 1, 1, 200, j5_preemptible), 1);
  c->Cycle(1);
  EXPECT_EQ(c->e().Running(3), 12);
  EXPECT_EQ(c->e().Running(4), 1);
  EXPECT_EQ(c->e().Running(5), 16);
  EXPECT_EQ(c->e().state().queue_usage(0)[kQueueGpu], 32 * kG);
  c->e().Finish(4, 50);
  c->Submit(HpNodeJob(10, "a", 2), 50);
  const std::vector<EngineEvent> ev = c->Cycle(50);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kReclaim), 1);
  const auto reclaim = std::find_if(ev.begin(), ev.end(), [](const EngineEvent& x) { return x.kind == EngineEvent::Kind::kReclaim; });
  EXPECT_TRUE(reclaim != ev.end() && reclaim->job == 10u && reclaim->detail == "within its queue" && reclaim->at == 110);
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kGrown), 0);
  EXPECT_EQ(c->e().Running(5), 16);
  EXPECT_TRUE(c->Cycle(109).empty());
  return c;
}

TEST(EngineQueues, WithinItsQueueTheRoomItsVictimsLeaveIsHeldForItsJobNeitherGrownIntoNorRetaken) {
  std::unique_ptr<Cluster> held = WithinQueueReclaimUnderWay(true);
  Cluster& c = *held;
  // j3 leaves at 110 s and j10 starts in the 16 GPUs; j3, back in the queue, does not take them
  // first (it fits a's room but for j10's hold), nor is anyone evicted again.
  const std::vector<EngineEvent> ev = c.Cycle(110);
  EXPECT_EQ(Returned(ev), (std::set<uint32_t>{3}));
  EXPECT_EQ(c.e().Running(10), 2);
  EXPECT_EQ(c.e().Running(3), 0);
  EXPECT_EQ(c.e().Running(5), 16);
  EXPECT_EQ(c.e().state().queue_usage(0)[kQueueGpu], 32 * kG);
  for (int64_t t : {111, 600, 5000}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
}

TEST(EngineQueues, WithinItsQueueTheHoldEndsAfterTheSecondItsVictimsLeftWhenItsJobCannotStartThere) {
  // As above, but with j5 not preemptible, and at 80 s an admin lowers a's limit to 24 GPUs: when
  // j3 leaves at 110 s, a's room is 8 GPUs (j5 holds 16), too little for j10, and no Reclaim can
  // make more (j5 may not be preempted). j6 (1 x 4 GPUs, priority 100), queued in a at 100 s, fits
  // those 8: the hold keeps it out through 110 s' cycles (j10 is tried in the room first), then
  // ends: j6 starts at 111 s, and j10 waits, holding nothing, with nothing evicted again.
  std::unique_ptr<Cluster> held = WithinQueueReclaimUnderWay(false);
  Cluster& c = *held;
  QueueSpec a = Q("a", 16);
  a.limit.gpu_milli = 24 * kG;
  ASSERT_TRUE(c.e().SetQueues({a, Q("b", 16)}, c.e().options().sharing).ok());
  EXPECT_TRUE(c.Cycle(80).empty());
  EngineJob j6 = testing::WholeGpuJob(6, 1, 4, 100, true);
  j6.queue = "a";
  c.Submit(j6, 100);
  EXPECT_TRUE(c.Cycle(100).empty());  // a is at 28 GPUs, above its new limit
  std::vector<EngineEvent> ev = c.Cycle(110);
  EXPECT_EQ(Returned(ev), (std::set<uint32_t>{3}));
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kStarted), 0);
  EXPECT_EQ(c.e().Running(10), 0);
  EXPECT_TRUE(c.Cycle(110).empty());  // the second's fixed point
  EXPECT_EQ(c.e().NextDue(), std::optional<int64_t>(111));  // a driver runs the cycle that ends it
  ev = c.Cycle(111);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kStarted);
  EXPECT_EQ(ev[0].job, 6u);
  EXPECT_EQ(c.e().Running(10), 0);
  EXPECT_EQ(c.e().Running(5), 16);
  EXPECT_EQ(c.e().state().queue_usage(0)[kQueueGpu], 20 * kG);
  for (int64_t t : {112, 600, 5000}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
}

TEST(EngineQueues, WithinItsQueueAnHpJobCountsWhatItsQueueHoldsAboveALoweredLimit) {
  // 8 nodes; a guaranteed 2 and limited to 4 (32 GPUs), b guaranteed 2 and idle. a runs three
  // preemptible LP jobs — j3 (12 x 1 GPU), j4 and j7 (1 x 4 GPUs each), priority 100 — and j5
  // (12 x 1 GPU, priority 200, not preemptible): 32 GPUs. At 40 s an admin lowers a's limit to 28
  // GPUs: a is 4 above it. At 50 s a's HP job j10 (2 nodes: 16 GPUs) arrives: it needs 20 GPUs to
  // leave (the 4 above the limit, then its 16) — all three LP jobs, in one Reclaim. Counting a's
  // room as 0 rather than -4, two would seem to do (16 GPUs) and leave it 4 short at 110 s.
  QueueSpec a = Q("a", 16);
  a.limit.gpu_milli = 32 * kG;
  SharingSpec sharing;
  sharing.within_queue = true;
  Cluster c(8, std::vector<QueueSpec>{a, Q("b", 16)}, sharing);
  const auto gpu_job = [](uint32_t id, int replicas, int gpus, int32_t priority, bool preemptible) {
    EngineJob j = testing::WholeGpuJob(id, replicas, gpus, priority, preemptible);
    j.queue = "a";
    return j;
  };
  c.Submit(gpu_job(3, 12, 1, 100, true), 0);
  c.Submit(gpu_job(4, 1, 4, 100, true), 0);
  c.Submit(gpu_job(7, 1, 4, 100, true), 0);
  c.Submit(gpu_job(5, 12, 1, 200, false), 0);
  c.Cycle(0);
  ASSERT_EQ(c.e().state().queue_usage(0)[kQueueGpu], 32 * kG);
  a.limit.gpu_milli = 28 * kG;
  ASSERT_TRUE(c.e().SetQueues({a, Q("b", 16)}, sharing).ok());
  EXPECT_TRUE(c.Cycle(40).empty());
  c.Submit(HpNodeJob(10, "a", 2), 50);
  std::vector<EngineEvent> ev = c.Cycle(50);
  ASSERT_EQ(Count(ev, EngineEvent::Kind::kReclaim), 1);
  const auto reclaim = std::find_if(ev.begin(), ev.end(), [](const EngineEvent& x) { return x.kind == EngineEvent::Kind::kReclaim; });
  EXPECT_EQ(reclaim->job, 10u);
  EXPECT_EQ(reclaim->detail, "within its queue");
  EXPECT_EQ(reclaim->replicas, 3);  // victims
  EXPECT_EQ(reclaim->at, 110);
  EXPECT_TRUE(c.Cycle(109).empty());
  ev = c.Cycle(110);
  EXPECT_EQ(Returned(ev), (std::set<uint32_t>{3, 4, 7}));
  EXPECT_EQ(Count(ev, EngineEvent::Kind::kReclaim), 0);
  EXPECT_EQ(c.e().Running(10), 2);
  EXPECT_EQ(c.e().Running(5), 12);
  EXPECT_EQ(c.e().state().queue_usage(0)[kQueueGpu], 28 * kG);
  for (int64_t t : {111, 600, 5000}) EXPECT_TRUE(c.Cycle(t).empty()) << t;
}

}  // namespace
}  // namespace estuary
