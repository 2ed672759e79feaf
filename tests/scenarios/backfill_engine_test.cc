// EASY and conservative backfill (EngineConfig::backfill, the `backfill` action; BackfillAction) through the
// engine's own cycle, with hand-computed timelines. The test is the driver: it submits jobs,
// runs cycles, and ends each job when its work (here: its walltime) is over, as the simulator
// does. ClusterState::CheckInvariants() runs after every step; extra cycles at the end change
// nothing.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "sched/actions/backfill.h"
#include "tests/testing/engine_fixtures.h"

namespace estuary {
namespace {

using testing::WholeGpuJob;

// FIFO queue (the classic backfill setting), no Absorb, no Reclaim.
EngineConfig Config(bool backfill) {
  EngineConfig o;
  o.name = backfill ? "easy" : "plain";
  o.priority_queue = false;
  o.absorb = false;
  std::erase(o.actions, EngineAction::kReclaim);
  if (backfill) EnableBackfill(EngineBackfill{true, 30}, &o);
  return o;
}

// Job `id` of `nodes` whole 8-GPU replicas with a walltime.
EngineJob Job(uint32_t id, int nodes, int64_t walltime_s) {
  EngineJob j = WholeGpuJob(id, nodes, 8, 0);
  j.walltime_s = walltime_s;
  return j;
}

// As Config(true), with conservative backfill planning for the first `depth` waiting jobs.
EngineConfig Conservative(int32_t depth) {
  EngineConfig o = Config(false);
  o.name = "conservative";
  EngineBackfill b;
  b.easy = true;
  b.conservative = true;
  b.depth = depth;
  EnableBackfill(b, &o);
  return o;
}

// A driver: the engine, the times jobs started, and every job ended at start + walltime.
class Driver {
 public:
  explicit Driver(bool backfill, int nodes = 4) : Driver(Config(backfill), nodes) {}
  Driver(const EngineConfig& config, int nodes) {
    auto e = Engine::Create(testing::TwoAswCluster(nodes), config);
    EXPECT_TRUE(e.ok()) << e.status().message();
    engine = std::move(*e);
  }
  void Submit(const EngineJob& j, int64_t t) {
    jobs[j.id] = j;
    EXPECT_TRUE(engine->Submit(j, SubmitMode::kEnqueue, t).accepted);
    Cycle(t);
  }
  // Runs the world up to `t`: every job whose walltime ends by then ends (in time order, a cycle
  // after each), then a cycle at `t`.
  void RunTo(int64_t t) {
    for (;;) {
      int64_t next = INT64_MAX;
      uint32_t which = 0;
      for (const auto& [id, at] : started) {
        const int64_t end = at + jobs[id].walltime_s;
        if (engine->Running(id) > 0 && end <= t && end < next) {
          next = end;
          which = id;
        }
      }
      if (next == INT64_MAX) break;
      engine->Finish(which, next);
      ended[which] = next;
      Cycle(next);
    }
    Cycle(t);
  }
  void Cycle(int64_t t) {
    for (const EngineEvent& e : engine->RunCycle(t)) {
      if (e.kind == EngineEvent::Kind::kStarted) started[e.job] = e.t;
      events.push_back(e);
    }
    ASSERT_TRUE(engine->state().CheckInvariants().ok()) << "at " << t;
  }
  int64_t StartOf(uint32_t id) const { return started.count(id) ? started.at(id) : -1; }

  std::unique_ptr<Engine> engine;
  std::map<uint32_t, EngineJob> jobs;
  std::map<uint32_t, int64_t> started, ended;
  std::vector<EngineEvent> events;
};

// The timeline of the first tests. Four 8-GPU nodes.
//   t=0   j1 (2 nodes, walltime 1000) and j2 (1 node, walltime 3000) start: one node is free.
//   t=10  j3 (3 nodes, walltime 500) waits: the head. By the walltimes, j1's two nodes free at
//         1000, so three nodes (the free one and j1's) hold j3 then: planned start 1000.
//   t=20  j4 (1 node, walltime 2000: it would end at 2020 > 1000) and j5 (1 node, walltime 900)
//         arrive, in that order.
void Prologue(Driver& d) {
  d.Submit(Job(1, 2, 1000), 0);
  d.Submit(Job(2, 1, 3000), 0);
  ASSERT_EQ(d.StartOf(1), 0);
  ASSERT_EQ(d.StartOf(2), 0);
  d.Submit(Job(3, 3, 500), 10);
  EXPECT_EQ(d.StartOf(3), -1);
  d.Submit(Job(4, 1, 2000), 20);
  d.Submit(Job(5, 1, 900), 20);
}

TEST(Backfill, TheHeadIsPlannedOnConcreteNodesAtTheEndOfTheWalltimesItWaitsFor) {
  Driver d(true);
  Prologue(d);
  const Engine::Explanation x = d.engine->Explain(3, 20);
  EXPECT_EQ(x.planned, "planned to start at 1000 on 3 nodes");
  // The held nodes are the free one and j1's two, not j2's.
  const std::vector<NodeId> held = d.engine->HeldNodes(3);
  ASSERT_EQ(held.size(), 3u);
  const JobId j2 = *d.engine->JobOf(2);
  for (NodeId n : held) {
    for (TaskId t : d.engine->state().node(n).tasks) EXPECT_NE(d.engine->state().task(t).job, j2);
  }
}

TEST(Backfill, AShortJobFillsTheGapALongOneDoesNotAndTheHeadStartsAsPlanned) {
  // At t=20 neither j4 nor j5 may take the free node in the allocate pass (it is held for j3).
  // The next planning (t=40, 30 s after the first at t=10) lets in the jobs that end by 1000:
  // j5 (40 + 900 = 940) starts on the free node; j4 (40 + 2000 = 2040) does not.
  // j5 ends at 940, j1 at 1000: j3 starts at 1000 — its planned start — on the three nodes.
  // j3 ends at 1500: j4 starts then (j2 holds the fourth node until 3000).
  Driver d(true);
  Prologue(d);
  EXPECT_EQ(d.StartOf(4), -1);
  EXPECT_EQ(d.StartOf(5), -1);
  d.RunTo(40);
  EXPECT_EQ(d.StartOf(5), 40);
  EXPECT_EQ(d.StartOf(4), -1);
  EXPECT_EQ(d.engine->Explain(3, 40).planned, "planned to start at 1000 on 3 nodes");
  d.RunTo(999);
  EXPECT_EQ(d.ended.at(5), 940);
  EXPECT_EQ(d.StartOf(3), -1);
  EXPECT_EQ(d.StartOf(4), -1);
  d.RunTo(1000);
  EXPECT_EQ(d.StartOf(3), 1000);
  EXPECT_EQ(d.engine->Running(3), 3);
  EXPECT_TRUE(d.engine->HeldNodes(3).empty());
  d.RunTo(1500);
  EXPECT_EQ(d.StartOf(4), 1500);
  // Stable: further cycles at the same time and later (before the next end) change nothing.
  const size_t seen = d.events.size();
  for (int64_t t : {1500, 1501, 2000, 2999}) d.Cycle(t);
  EXPECT_EQ(d.events.size(), seen);
}

TEST(Backfill, WithoutItTheFirstJobToComeTakesTheGapAndTheHeadWaitsForIt) {
  // The same workload without backfill: at t=20 j4 (first in the queue among those that fit)
  // takes the free node; at 1000 only j1's two nodes free, so j3 waits for j4's end at 2020.
  // j5 takes a node at 1000 (FIFO without head-of-line blocking) — and j3 waits until both end.
  Driver d(false);
  Prologue(d);
  EXPECT_EQ(d.StartOf(4), 20);
  d.RunTo(1000);
  EXPECT_EQ(d.StartOf(3), -1);
  EXPECT_EQ(d.StartOf(5), 1000);
  d.RunTo(2020);
  EXPECT_EQ(d.StartOf(3), 2020);
}

TEST(Backfill, ARequiredDomainIsPlannedWhereItsWalltimesEndFirstAndNamedInTheExplanation) {
  // asw0 = {n0, n1}, asw1 = {n2, n3}. j1 (2 nodes in one ASW, walltime 1000) takes one ASW whole;
  // j2 (1 node, walltime 3000) a node of the other. j3 (2 nodes in one ASW) waits: j1's ASW is
  // whole again at 1000, the other not before 3000. It is planned on j1's ASW at 1000.
  Driver d(true);
  EngineJob j1 = Job(1, 2, 1000);
  j1.plane = "data";
  j1.required_level = "asw";
  d.Submit(j1, 0);
  d.Submit(Job(2, 1, 3000), 0);
  EngineJob j3 = Job(3, 2, 100);
  j3.plane = "data";
  j3.required_level = "asw";
  d.Submit(j3, 10);
  ASSERT_EQ(d.StartOf(1), 0);
  ASSERT_EQ(d.StartOf(2), 0);
  const ClusterState& s = d.engine->state();
  const NodeId j1_node = s.task(s.job(*d.engine->JobOf(1)).tasks.front()).node;
  const PlaneId data = *s.topology().FindPlane("data");
  const std::string asw = s.topology().domain(s.topology().NodeDomain(j1_node, data, 0)).name;
  EXPECT_EQ(d.engine->Explain(3, 10).planned, "planned to start at 1000 on " + asw);
  d.RunTo(1000);
  EXPECT_EQ(d.StartOf(3), 1000);
}

TEST(Backfill, AJobWithoutWalltimeNeverEntersHeldNodesAndAHeadWaitingOnOneHoldsNothing) {
  // j1 (3 nodes, no walltime) runs; j2 (2 nodes) waits: the plan counts j1 as never ending, so
  // only the one free node could ever be free — no start time, nothing held. A 1-node job
  // without a walltime then takes the free node at once (nothing to protect).
  Driver d(true);
  d.Submit(Job(1, 3, 0), 0);
  d.Submit(Job(2, 2, 100), 10);
  EXPECT_TRUE(d.engine->HeldNodes(2).empty());
  EXPECT_EQ(d.engine->Explain(2, 10).planned, "");
  d.Submit(Job(3, 1, 0), 20);
  EXPECT_EQ(d.StartOf(3), 20);
}

TEST(Backfill, SlurmsDocumentationExampleABigJobWaitsAndSmallShortJobsFillIn) {
  // The classic of Slurm's backfill documentation: a big job waits for nodes that running work
  // frees later; small jobs that end before then run meanwhile on the idle nodes; one that would
  // end later waits. Eight 8-GPU nodes, FIFO:
  //   t=0   a (4 nodes, walltime 600) starts; 4 nodes idle.
  //   t=1   big (8 nodes, walltime 600) waits: planned at 600 on all 8 nodes (a's end).
  //   t=2   s1 (2 nodes, 300), s2 (2 nodes, 500), s3 (1 node, 1000) arrive.
  //   t=31  planning (30 s after t=1): s1 ends at 331, s2 at 531, both <= 600: they start; s3
  //         would end at 1031: it waits.
  //   t=331, 531: s1, s2 end; t=600: a ends, big starts on all 8 nodes at its planned start.
  //   t=1200: big ends; s3 starts.
  Driver d(true, 8);
  d.Submit(Job(10, 4, 600), 0);
  d.Submit(Job(11, 8, 600), 1);
  EXPECT_EQ(d.engine->Explain(11, 1).planned, "planned to start at 600 on 8 nodes");
  d.Submit(Job(12, 2, 300), 2);
  d.Submit(Job(13, 2, 500), 2);
  d.Submit(Job(14, 1, 1000), 2);
  EXPECT_EQ(d.StartOf(12), -1);  // before the next planning the held nodes stay idle
  d.RunTo(31);
  EXPECT_EQ(d.StartOf(12), 31);
  EXPECT_EQ(d.StartOf(13), 31);
  EXPECT_EQ(d.StartOf(14), -1);
  d.RunTo(600);
  EXPECT_EQ(d.ended.at(12), 331);
  EXPECT_EQ(d.ended.at(13), 531);
  EXPECT_EQ(d.StartOf(11), 600);
  EXPECT_EQ(d.engine->Running(11), 8);
  d.RunTo(1200);
  EXPECT_EQ(d.StartOf(14), 1200);
  const size_t seen = d.events.size();
  for (int64_t t : {1200, 1230, 1260}) d.Cycle(t);
  EXPECT_EQ(d.events.size(), seen);
}

// The timeline of the conservative tests. Five 8-GPU nodes.
//   t=0   b (1 node, walltime 300) and a (3 nodes, walltime 1000) start: one node is free.
//   t=10  j1 (3 nodes, walltime 1000) waits: by the walltimes it starts at 1000 (a's nodes free);
//         planned on the free node and two of a's (most room now first, then node id: b's node
//         has the highest id).
//   t=20  j2 (2 nodes, walltime 500) and j3 (1 node, walltime 5000) arrive, in that order.
// At the planning of t=40, conservative also plans j2 and j3 around j1: j2 may use the free node
// before j1 needs it (40..540 or 300..800 end before 1000), so with b's node (free at 300) it is
// planned at 300; j3 runs too long to come before any plan: b's node is j2's from 300 to 800,
// then free for good — j3 is planned at 800 there (a's third node frees only at 1000).
void ConservativePrologue(Driver& d) {
  d.Submit(Job(2, 1, 300), 0);
  d.Submit(Job(1, 3, 1000), 0);
  ASSERT_EQ(d.StartOf(1), 0);
  ASSERT_EQ(d.StartOf(2), 0);
  // The premise of the plans below: b's node has a higher id than a's three, so j1's plan (the
  // free node, then busy nodes by id) takes two of a's nodes and leaves b's out.
  const ClusterState& s = d.engine->state();
  const NodeId b_node = s.task(s.job(*d.engine->JobOf(2)).tasks.front()).node;
  for (TaskId t : s.job(*d.engine->JobOf(1)).tasks) ASSERT_LT(s.task(t).node.value(), b_node.value());
  d.Submit(Job(11, 3, 1000), 10);
  d.Submit(Job(12, 2, 500), 20);
  d.Submit(Job(13, 1, 5000), 20);
  d.RunTo(40);
  EXPECT_EQ(d.StartOf(11), -1);
  EXPECT_EQ(d.StartOf(12), -1);
  EXPECT_EQ(d.StartOf(13), -1);
}

TEST(ConservativeBackfill, EveryWaitingJobIsPlannedAroundThePlansBeforeIt) {
  Driver d(Conservative(100), 5);
  ConservativePrologue(d);
  EXPECT_EQ(d.engine->Explain(11, 40).planned, "planned to start at 1000 on 3 nodes");
  EXPECT_EQ(d.engine->Explain(12, 40).planned, "planned to start at 300 on 2 nodes");
  // j3's node is held for j2, whose plan comes first there: j3 holds nothing and keeps its plan.
  EXPECT_EQ(d.engine->Explain(13, 40).planned, "planned to start at 800 on 1 node");
  EXPECT_TRUE(d.engine->HeldNodes(13).empty());
  EXPECT_EQ(d.engine->HeldNodes(12).size(), 2u);
}

TEST(ConservativeBackfill, ALongSmallJobCannotTakeTheNodeASecondJobIsPlannedOn) {
  // b ends at 300: j2 starts on its two held nodes (b's and the free one), as planned; j3 finds
  // no node (both held) and starts at 800 when j2 ends, on b's node as planned; j1 starts at
  // 1000 as planned. Nobody's plan slipped.
  Driver d(Conservative(100), 5);
  ConservativePrologue(d);
  d.RunTo(300);
  EXPECT_EQ(d.StartOf(12), 300);
  EXPECT_EQ(d.StartOf(13), -1);
  EXPECT_EQ(d.engine->Explain(13, 300).planned, "planned to start at 800 on 1 node");
  d.RunTo(800);
  EXPECT_EQ(d.ended.at(12), 800);
  EXPECT_EQ(d.StartOf(13), 800);
  d.RunTo(1000);
  EXPECT_EQ(d.StartOf(11), 1000);
  EXPECT_EQ(d.engine->Running(11), 3);
  // Stable: further cycles change nothing until the next end (j1's, at 2000).
  const size_t seen = d.events.size();
  for (int64_t t : {1000, 1001, 1030, 1999}) d.Cycle(t);
  EXPECT_EQ(d.events.size(), seen);
}

TEST(ConservativeBackfill, EasyProtectsTheFirstJobOnlySoTheLongSmallJobDelaysTheSecond) {
  // The same workload under EASY: only j1 is planned. At 300 b's node is free and held by no
  // one: the allocate pass cannot start j2 (one node) but starts j3 there, until 5300. The
  // backfill at 300 lets j2 (300 + 500 <= 1000) onto j1's held nodes, but only the free one is
  // free: it waits. j1 starts at 1000 as planned; j2 gets two nodes when j1 ends, at 2000.
  Driver d(true, 5);
  ConservativePrologue(d);
  d.RunTo(300);
  EXPECT_EQ(d.StartOf(13), 300);
  EXPECT_EQ(d.StartOf(12), -1);
  d.RunTo(1000);
  EXPECT_EQ(d.StartOf(11), 1000);
  EXPECT_EQ(d.StartOf(12), -1);
  d.RunTo(2000);
  EXPECT_EQ(d.StartOf(12), 2000);
}

TEST(ConservativeBackfill, ADepthOfOneIsEasy) {
  // Planning for the first job only: the same timeline as EASY's.
  Driver d(Conservative(1), 5);
  ConservativePrologue(d);
  EXPECT_EQ(d.engine->Explain(12, 40).planned, "");
  d.RunTo(2000);
  EXPECT_EQ(d.StartOf(13), 300);
  EXPECT_EQ(d.StartOf(11), 1000);
  EXPECT_EQ(d.StartOf(12), 2000);
}

TEST(Backfill, EnableBackfillListsTheActionOnceRightAfterAllocate) {
  EngineConfig o;
  EnableBackfill(EngineBackfill{true, 45}, &o);
  EnableBackfill(EngineBackfill{true, 45}, &o);
  EXPECT_TRUE(o.backfill.easy);
  EXPECT_EQ(o.backfill.interval_s, 45);
  const auto at = std::find(o.actions.begin(), o.actions.end(), EngineAction::kAllocate);
  ASSERT_NE(at, o.actions.end());
  ASSERT_NE(at + 1, o.actions.end());
  EXPECT_EQ(*(at + 1), EngineAction::kBackfill);
  EXPECT_EQ(std::count(o.actions.begin(), o.actions.end(), EngineAction::kBackfill), 1);
  EXPECT_EQ(EngineActionByName("backfill"), EngineAction::kBackfill);
}

// A job without a plan (its walltime cannot be placed: what runs has none) is looked at again at
// the next planning, and the engine says when that is, so that every driver runs the planning at
// the same time (the simulator, whose cycles follow its events and NextDue, and the service,
// whose loop runs at any time). Before, with no plan held, NextDue did not name it: the
// simulator planned at its next event, the service at its next pass.
TEST(Backfill, AJobWaitingWithoutAPlanIsLookedAtAgainAtTheNextPlanningWhichNextDueNames) {
  Driver d(true);
  d.Submit(Job(1, 2, 0), 0);  // no walltime: its end is unknown
  d.Submit(Job(2, 2, 0), 0);
  d.Submit(Job(3, 2, 500), 10);  // waits: no time can be found for it
  EXPECT_EQ(d.StartOf(3), -1);
  EXPECT_EQ(d.engine->Explain(3, 10).planned, "");
  EXPECT_TRUE(d.engine->HeldNodes(3).empty());
  EXPECT_EQ(d.engine->NextDue(), std::optional<int64_t>(40));
  d.Cycle(40);
  EXPECT_EQ(d.engine->NextDue(), std::optional<int64_t>(70));
  // Nothing waits: nothing to plan.
  d.engine->Cancel(3, 50);
  d.Cycle(50);
  EXPECT_EQ(d.engine->NextDue(), std::nullopt);
}

// Queues: backfill plans only for a job its queue lets start. 4 nodes; queue a is limited to 16
// GPUs (2 nodes), b has no limit. At 0 a's j1 (2 nodes) and b's j2 (1 node) start: one node is
// free, and a is at its limit. At 10 a's j3 (1 node) waits for its queue, not for capacity: no
// plan holds the free node for it. At 20 b's j4 (1 node, walltime 3,000) starts on it. Before,
// j3 was the head planned to start at once on the free node, which it could not use, and j4
// waited behind that hold until j1 ended at 1,000.
TEST(Backfill, NoPlanHoldsNodesForAJobItsQueueWouldNotLetStart) {
  EngineConfig o = Config(true);
  QueueSpec a = testing::Q("a", 0);
  a.limit.gpu_milli = 16 * kMilliPerGpu;
  o.queues = {a, testing::Q("b", 0)};
  Driver d(o, 4);
  const auto in = [](EngineJob j, const char* queue) {
    j.queue = queue;
    return j;
  };
  d.Submit(in(Job(1, 2, 1000), "a"), 0);
  d.Submit(in(Job(2, 1, 3000), "b"), 0);
  ASSERT_EQ(d.StartOf(1), 0);
  ASSERT_EQ(d.StartOf(2), 0);
  d.Submit(in(Job(3, 1, 500), "a"), 10);
  EXPECT_EQ(d.StartOf(3), -1);
  EXPECT_EQ(d.engine->Explain(3, 10).planned, "");
  EXPECT_TRUE(d.engine->HeldNodes(3).empty());
  d.Submit(in(Job(4, 1, 3000), "b"), 20);
  EXPECT_EQ(d.StartOf(4), 20);
  // j3 starts once its queue has room: when j1 ends.
  d.RunTo(1000);
  EXPECT_EQ(d.StartOf(3), 1000);
  for (int64_t t : {1000, 1001}) EXPECT_TRUE(d.engine->RunCycle(t).empty()) << t;
}

}  // namespace
}  // namespace estuary
