// The engine as a specification: what one scheduling cycle does with its inputs — the configured
// order of its actions, node failures under Align, Standby (SpotGPU) and live migration — over
// small clusters each test builds through the engine's own inputs.
#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/engine.h"

#include "common/rng.h"
#include "tests/testing/engine_fixtures.h"
#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

ClusterState EngineCluster(int nodes) { return testing::TwoAswCluster(nodes); }
EngineJob Job(uint32_t id, int replicas, int gpus, int32_t priority, bool preemptible = false) {
  return testing::WholeGpuJob(id, replicas, gpus, priority, preemptible);
}

// ---- The cycle: its configured actions, in order ----

TEST(Engine, ActionNamesRoundTripAndTheDefaultCycleEndsWithAbsorb) {
  for (EngineAction a : DefaultEngineActions()) EXPECT_EQ(EngineActionByName(EngineActionName(a)), a);
  EXPECT_FALSE(EngineActionByName("preempt").has_value());
  EXPECT_EQ(DefaultEngineActions().back(), EngineAction::kAbsorb);
}

// One 8-GPU node full of a preemptible LP job; an HP job of 8 GPUs queued at t = 0 Reclaims it
// (grace 30 s). The events of the cycle at t = 30 under `actions`.
std::vector<EngineEvent> CycleWhenTheVictimLeaves(std::vector<EngineAction> actions, std::vector<EngineEvent>* next) {
  EngineConfig o;
  o.name = "one";
  o.grace_s = 30;
  o.actions = std::move(actions);
  auto e = Engine::Create(EngineCluster(1), o);
  EXPECT_TRUE(e.ok());
  Engine& m = **e;
  EXPECT_TRUE(m.Submit(Job(1, 1, 8, 100, true), SubmitMode::kStartNow, 0).started);
  const Admission hp = m.Submit(Job(2, 1, 8, kHpPriority), SubmitMode::kQueue, 0);
  EXPECT_TRUE(hp.reclaiming);
  m.TakeEvents();
  EXPECT_TRUE(m.RunCycle(29).empty());
  std::vector<EngineEvent> at30 = m.RunCycle(30);
  *next = m.RunCycle(31);
  return at30;
}

TEST(Engine, TheCycleRunsItsActionsInTheConfiguredOrder) {
  using A = EngineAction;
  // Evictions before allocate: the HP job starts in the cycle that frees its victim's GPUs.
  std::vector<EngineEvent> next;
  std::vector<EngineEvent> at30 = CycleWhenTheVictimLeaves(DefaultEngineActions(), &next);
  ASSERT_EQ(at30.size(), 2u);
  EXPECT_EQ(at30[0].kind, EngineEvent::Kind::kReturned);
  EXPECT_EQ(at30[0].job, 1u);
  EXPECT_EQ(at30[0].for_job, 2u);
  EXPECT_EQ(at30[1].kind, EngineEvent::Kind::kStarted);
  EXPECT_EQ(at30[1].job, 2u);
  EXPECT_TRUE(next.empty());
  // Allocate before evictions: the same decisions, one cycle apart.
  at30 = CycleWhenTheVictimLeaves({A::kAllocate, A::kReclaim, A::kEvictions}, &next);
  ASSERT_EQ(at30.size(), 1u);
  EXPECT_EQ(at30[0].kind, EngineEvent::Kind::kReturned);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].kind, EngineEvent::Kind::kStarted);
  EXPECT_EQ(next[0].job, 2u);
}

TEST(Engine, AbsorbGrowsElasticJobsOnlyWhenTheCycleListsItAndOnlyInItsGrowPart) {
  using A = EngineAction;
  for (const bool listed : {true, false}) {
    EngineConfig o;
    o.name = "two";
    o.actions = listed ? DefaultEngineActions() : std::vector<A>{A::kEvictions, A::kAllocate, A::kReclaim};
    auto e = Engine::Create(EngineCluster(2), o);
    ASSERT_TRUE(e.ok());
    Engine& m = **e;
    ASSERT_TRUE(m.Submit(Job(1, 1, 8, 100), SubmitMode::kStartNow, 0).started);
    EngineJob elastic = Job(2, 2, 8, 100);
    elastic.min_replicas = 1;
    const Admission a = m.Submit(elastic, SubmitMode::kStartNow, 0);
    ASSERT_TRUE(a.started);
    ASSERT_EQ(a.granted, 1);
    m.TakeEvents();
    m.Cancel(1, 10);
    CycleOptions before;
    before.part = CyclePart::kBeforeGrow;
    EXPECT_TRUE(m.RunCycle(10, before).empty()) << "absorb belongs to the grow part";
    CycleOptions grow;
    grow.part = CyclePart::kGrow;
    const std::vector<EngineEvent> events = m.RunCycle(10, grow);
    if (listed) {
      ASSERT_EQ(events.size(), 1u);
      EXPECT_EQ(events[0].kind, EngineEvent::Kind::kGrown);
      EXPECT_EQ(events[0].replicas, 2);
    } else {
      EXPECT_TRUE(events.empty());
    }
    EXPECT_EQ(m.Running(2), listed ? 2 : 1);
    EXPECT_TRUE(m.RunCycle(20).empty());  // stable
  }
}

// ---- Node failures: the simulator's rule (NodeFailureAction), Align included ----

// An engine of four 8-GPU nodes running one elastic job of 1-GPU replicas (min, max = the
// replicas listed, step), replica r on node `nodes[r]`.
std::unique_ptr<Engine> WithElastic(int32_t min, int32_t step, bool align, const std::vector<int>& nodes) {
  EngineConfig o;
  o.name = "align";
  o.allocate.align = align;
  auto e = Engine::Create(EngineCluster(4), o);
  EXPECT_TRUE(e.ok());
  EngineJob j = Job(1, static_cast<int>(nodes.size()), 1, 100);
  j.min_replicas = min;
  j.step = step;
  std::vector<Engine::Placement> where;
  std::map<int, int> used;
  for (size_t r = 0; r < nodes.size(); ++r) where.push_back({r, NodeId(nodes[r]), testing::Idx({used[nodes[r]]++})});
  EXPECT_TRUE((*e)->Adopt(j, where, 0));
  return std::move(*e);
}

TEST(Engine, AnElasticJobAtItsMaxThatLosesReplicasToAFailureGrowsBackAtTheNextCycle) {
  // 4 replicas of 1 GPU, at max: n0's failure takes 2; the next cycle's Absorb grows the job back
  // to its max on the other nodes (a job at its max is not looked at; one that lost replicas is
  // again), and a cycle after that changes nothing.
  auto m = WithElastic(1, 1, false, {0, 0, 1, 1});
  EXPECT_TRUE(m->RunCycle(1).empty()) << "at its max: nothing to grow";
  m->FailNode(NodeId(0), 5);
  m->TakeEvents();
  ASSERT_EQ(m->Running(1), 2);
  const std::vector<EngineEvent> ev = m->RunCycle(6);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kGrown);
  EXPECT_EQ(ev[0].replicas, 4);
  EXPECT_EQ(m->Running(1), 4);
  EXPECT_TRUE(m->state().CheckInvariants().ok());
  EXPECT_TRUE(m->RunCycle(7).empty());
}

TEST(Engine, ARestartAdoptsReplicasAtRanksAboveALoweredMaxAndRefusesMoreReplicasThanTheMax) {
  // Before the restart: 4 replicas of 1 GPU (max 4); a failure took ranks 0 and 1, then the max
  // was lowered to 2 (Resize keeps the 2 running, at ranks 2 and 3). The rebuilt engine gets the
  // job with max 2 and those two placements.
  const auto rebuilt = [] {
    EngineConfig o;
    o.name = "adopt";
    auto e = Engine::Create(EngineCluster(4), o);
    EXPECT_TRUE(e.ok());
    return std::move(*e);
  };
  EngineJob j = Job(1, 2, 1, 100);
  j.min_replicas = 1;
  auto m = rebuilt();
  ASSERT_TRUE(m->Adopt(j, {{2, NodeId(1), testing::Idx({0})}, {3, NodeId(1), testing::Idx({1})}}, 0));
  EXPECT_EQ(m->Running(1), 2);
  EXPECT_EQ(m->state().node(NodeId(1)).tasks.size(), 2u);
  EXPECT_TRUE(m->state().CheckInvariants().ok());
  EXPECT_TRUE(m->RunCycle(1).empty()) << "at its max: nothing to grow";
  // Raised to 4 again: it grows into ranks 0 and 1, then nothing changes.
  std::string why;
  ASSERT_TRUE(m->Resize(1, 1, 4, 2, &why)) << why;
  const std::vector<EngineEvent> ev = m->RunCycle(3);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kGrown);
  EXPECT_EQ(ev[0].replicas, 4);
  EXPECT_EQ(m->Running(1), 4);
  EXPECT_TRUE(m->state().CheckInvariants().ok());
  EXPECT_TRUE(m->RunCycle(4).empty());
  // Refused, binding nothing: more placements than the max, a rank twice, a rank past any job's.
  for (const std::vector<Engine::Placement>& bad :
       {std::vector<Engine::Placement>{{0, NodeId(1), testing::Idx({0})}, {1, NodeId(1), testing::Idx({1})},
                                       {2, NodeId(1), testing::Idx({2})}},
        std::vector<Engine::Placement>{{3, NodeId(1), testing::Idx({0})}, {3, NodeId(1), testing::Idx({1})}},
        std::vector<Engine::Placement>{{kMaxReplicaRanks, NodeId(1), testing::Idx({0})}}}) {
    m = rebuilt();
    EXPECT_FALSE(m->Adopt(j, bad, 0));
    EXPECT_EQ(m->Running(1), 0);
    EXPECT_TRUE(m->state().node(NodeId(1)).tasks.empty());
  }
}

TEST(Engine, ANodeFailureKeepsTheLargestWholeNumberOfStepsOfTheSurvivors) {
  // 12 replicas (4 per node), step 8: 8 survive the failure of n0 and all are kept; n1's failure
  // leaves 4 < min 8: the job is evicted whole.
  auto m = WithElastic(8, 8, true, {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2});
  m->FailNode(NodeId(0), 5);
  std::vector<EngineEvent> ev = m->TakeEvents();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kShrunk);
  EXPECT_EQ(ev[0].replicas, 8);
  EXPECT_EQ(ev[0].detail, "node failed");
  EXPECT_EQ(m->Running(1), 8);
  // 10 replicas, step 4: n2's failure leaves 9, of which the job keeps two whole steps (8): its
  // newest replica (the one on n3) is released at once, so n3's failure later stops nothing.
  m = WithElastic(4, 4, true, {0, 0, 0, 0, 1, 1, 1, 1, 2, 3});
  m->FailNode(NodeId(2), 5);
  ev = m->TakeEvents();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kShrunk);
  EXPECT_EQ(ev[0].replicas, 8);
  EXPECT_TRUE(m->state().node(NodeId(3)).tasks.empty());
  m->FailNode(NodeId(3), 6);
  EXPECT_TRUE(m->TakeEvents().empty());
  EXPECT_EQ(m->Running(1), 8);
  ASSERT_TRUE(m->state().CheckInvariants().ok());
}

TEST(Engine, ANodeFailureWithoutAlignKeepsEverySurvivorAtOrAboveMin) {
  auto m = WithElastic(4, 4, false, {0, 0, 0, 0, 1, 1, 1, 1, 2, 3});
  m->FailNode(NodeId(3), 5);
  const std::vector<EngineEvent> ev = m->TakeEvents();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kShrunk);
  EXPECT_EQ(ev[0].replicas, 9);
  EXPECT_EQ(m->Running(1), 9);
}

TEST(Engine, ANodeLossEvictsWholeAJobWhoseSurvivorsHoldNoWholeStepAtOrAboveMin) {
  // min 6, step 4, 8 replicas: 7 survive a drain of n1, but the largest whole number of steps
  // among them (4) is below min: the job is evicted whole rather than kept at 7 or 6 replicas
  // that Align would never have granted.
  auto m = WithElastic(6, 4, true, {0, 0, 0, 0, 0, 0, 0, 1});
  m->DrainNode(NodeId(1), 6);
  const std::vector<EngineEvent> ev = m->TakeEvents();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kReturned);
  EXPECT_EQ(ev[0].detail, "node drained");
  EXPECT_EQ(m->Running(1), 0);
  EXPECT_EQ(m->state().node(NodeId(1)).state, NodeState::kCordoned);
  EXPECT_EQ(m->state().allocated_gpu_milli(), 0);
  ASSERT_TRUE(m->state().CheckInvariants().ok());
}

// ---- Relaxed required levels (EngineJob::required_max_wait_s; Slurm's --switches=N@max_wait) ----

// Four 8-GPU nodes, n0 n1 in asw0 and n2 n3 in asw1 (the plane's top level: above it, any
// placement); a non-preemptible 8-GPU job on n0 and one on n2, so that each ASW has one free
// node. Gang 3 (2 x 8 GPUs, one asw required, max wait `wait_s`) is queued at t = 0.
std::unique_ptr<Engine> GangWaitingForAnAsw(int64_t wait_s) {
  EngineConfig o;
  o.name = "relax";
  o.requeue = true;
  auto e = Engine::Create(EngineCluster(4), o);
  EXPECT_TRUE(e.ok());
  Engine& m = **e;
  EXPECT_TRUE(m.Adopt(Job(1, 1, 8, 100), {{0, NodeId(0), testing::Idx({0, 1, 2, 3, 4, 5, 6, 7})}}, 0));
  EXPECT_TRUE(m.Adopt(Job(2, 1, 8, 100), {{0, NodeId(2), testing::Idx({0, 1, 2, 3, 4, 5, 6, 7})}}, 0));
  EngineJob gang = Job(3, 2, 8, 100);
  gang.plane = "data";
  gang.required_level = "asw";
  gang.required_max_wait_s = wait_s;
  EXPECT_FALSE(m.Submit(gang, SubmitMode::kQueue, 0).started);
  m.TakeEvents();
  return std::move(*e);
}

// The ASWs gang 3's bound replicas are in.
std::set<DomainId> AswsOf(const Engine& m, uint32_t job) {
  const ClusterState& s = m.state();
  const PlaneId data = *s.topology().FindPlane("data");
  std::set<DomainId> out;
  for (TaskId t : s.job(JobId(job - 1)).tasks) {
    if (s.task(t).state == TaskState::kBound) out.insert(s.topology().NodeDomain(s.task(t).node, data, 0));
  }
  return out;
}

TEST(Engine, AGangPastItsMaxWaitAcceptsTheNextLevelUpAndNotBefore) {
  // No ASW has two free nodes; the gang waits 600 s for one, then accepts any placement (asw is
  // the top level): it starts at t = 600 on n1 and n3, across both ASWs.
  auto m = GangWaitingForAnAsw(600);
  EXPECT_EQ(m->NextDue(), std::optional<int64_t>(600));
  EXPECT_TRUE(m->RunCycle(1).empty());
  EXPECT_EQ(m->Explain(3, 1).topology, "requires one asw; accepts any placement at t=600");
  EXPECT_TRUE(m->RunCycle(599).empty());
  EXPECT_EQ(m->Running(3), 0);
  const std::vector<EngineEvent> at600 = m->RunCycle(600);
  ASSERT_EQ(at600.size(), 1u);
  EXPECT_EQ(at600[0].kind, EngineEvent::Kind::kStarted);
  EXPECT_EQ(m->Running(3), 2);
  EXPECT_EQ(AswsOf(*m, 3).size(), 2u);
  // Its own level is still what it prefers; stable: more cycles change nothing.
  const TopologyConstraint& tc = m->state().job(JobId(2)).spec.topology;
  EXPECT_EQ(tc.required_level, -1);
  EXPECT_EQ(tc.preferred_level, 0);
  EXPECT_TRUE(m->RunCycle(601).empty());
  EXPECT_TRUE(m->RunCycle(5000).empty());
  ASSERT_TRUE(m->state().CheckInvariants().ok());
}

TEST(Engine, WithoutAMaxWaitAGangWaitsForItsRequiredLevelForever) {
  auto m = GangWaitingForAnAsw(0);
  EXPECT_EQ(m->NextDue(), std::nullopt);
  EXPECT_TRUE(m->RunCycle(1000000).empty());
  EXPECT_EQ(m->Running(3), 0);
  EXPECT_EQ(m->Explain(3, 1000000).topology, "requires one asw");
}

TEST(Engine, AnAswThatFreesUpBeforeTheMaxWaitTakesTheGangWhole) {
  // Job 1 ends at t = 100: asw0 has n0 and n1 free, and the gang starts there, in one ASW.
  auto m = GangWaitingForAnAsw(600);
  m->Cancel(1, 100);
  m->TakeEvents();
  const std::vector<EngineEvent> ev = m->RunCycle(100);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kStarted);
  EXPECT_EQ(AswsOf(*m, 3).size(), 1u);
  EXPECT_EQ(m->state().job(JobId(2)).spec.topology.required_level, 0);
  // The relaxation due at t = 600 is void: the job runs.
  EXPECT_TRUE(m->RunCycle(600).empty());
  EXPECT_EQ(m->state().job(JobId(2)).spec.topology.required_level, 0);
}

TEST(Engine, ARequeuedGangRequiresItsLevelAgainForAnotherMaxWait) {
  // Started across both ASWs at t = 600; n1 fails at t = 700 and the rigid gang is requeued
  // whole: it requires one asw again. n1 is back at t = 800 (free n1 in asw0, n3 in asw1: no ASW
  // with two), so it waits until t = 700 + 600 = 1300 and then starts across them again.
  auto m = GangWaitingForAnAsw(600);
  m->RunCycle(600);
  ASSERT_EQ(m->Running(3), 2);
  m->FailNode(NodeId(1), 700);
  m->TakeEvents();
  EXPECT_EQ(m->Running(3), 0);
  EXPECT_EQ(m->state().job(JobId(2)).spec.topology.required_level, 0);
  m->RestoreNode(NodeId(1));
  EXPECT_TRUE(m->RunCycle(800).empty());
  EXPECT_TRUE(m->RunCycle(1299).empty());
  EXPECT_EQ(m->Explain(3, 1299).topology, "requires one asw; accepts any placement at t=1300");
  const std::vector<EngineEvent> ev = m->RunCycle(1300);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kStarted);
  EXPECT_EQ(AswsOf(*m, 3).size(), 2u);
  ASSERT_TRUE(m->state().CheckInvariants().ok());
}

TEST(Engine, AGangBeingReclaimedForKeepsItsRequiredLevelUntilItsVictimsLeave) {
  // As above, but job 1 (on n0) is preemptible LP and gang 3 is HP with a 30 s max wait; grace
  // 100 s. At t = 0 the gang Reclaims job 1 (asw0 then holds it whole). Its relaxation, due at
  // t = 30, is put off while the Reclaim is under way (30, 60, 90 s: relaxed, it would start on
  // n1 and n3 at once, across both ASWs, and the eviction would be wasted); job 1 leaves at
  // t = 100 and the gang starts in asw0 alone, still requiring it.
  EngineConfig o;
  o.name = "relax-reclaim";
  o.requeue = true;
  o.grace_s = 100;
  auto e = Engine::Create(EngineCluster(4), o);
  ASSERT_TRUE(e.ok());
  Engine& m = **e;
  const GpuIndices all = testing::Idx({0, 1, 2, 3, 4, 5, 6, 7});
  ASSERT_TRUE(m.Adopt(Job(1, 1, 8, 100, true), {{0, NodeId(0), all}}, 0));
  ASSERT_TRUE(m.Adopt(Job(2, 1, 8, 100), {{0, NodeId(2), all}}, 0));
  EngineJob gang = Job(3, 2, 8, kHpPriority);
  gang.plane = "data";
  gang.required_level = "asw";
  gang.required_max_wait_s = 30;
  const Admission a = m.Submit(gang, SubmitMode::kQueue, 0);
  EXPECT_FALSE(a.started);
  EXPECT_TRUE(a.reclaiming);
  m.TakeEvents();
  for (int64_t t : {30, 60, 90, 99}) {
    EXPECT_TRUE(m.RunCycle(t).empty()) << t;
    EXPECT_EQ(m.Running(3), 0) << t;
    EXPECT_EQ(m.state().job(JobId(2)).spec.topology.required_level, 0) << t;
  }
  // Job 1 leaves, the gang starts, and job 1 (requeued) starts again on n3, asw1's free node.
  const std::vector<EngineEvent> at100 = m.RunCycle(100);
  ASSERT_EQ(at100.size(), 3u);
  EXPECT_EQ(at100[0].kind, EngineEvent::Kind::kReturned);
  EXPECT_EQ(at100[0].job, 1u);
  EXPECT_EQ(at100[1].kind, EngineEvent::Kind::kStarted);
  EXPECT_EQ(at100[1].job, 3u);
  EXPECT_EQ(at100[2].kind, EngineEvent::Kind::kStarted);
  EXPECT_EQ(at100[2].job, 1u);
  EXPECT_EQ(m.Running(3), 2);
  EXPECT_EQ(m.state().job(JobId(2)).spec.topology.required_level, 0);
  EXPECT_EQ(AswsOf(m, 3), (std::set<DomainId>{m.state().topology().NodeDomain(NodeId(0), *m.state().topology().FindPlane("data"), 0)}));
  EXPECT_TRUE(m.RunCycle(101).empty());
  EXPECT_TRUE(m.RunCycle(120).empty());  // the relaxation due now is void: the gang runs
  EXPECT_TRUE(m.RunCycle(5000).empty());
  ASSERT_TRUE(m.state().CheckInvariants().ok());
}

// hold_survivors: six 8-GPU nodes, n0-n2 in asw0 and n3-n5 in asw1. Gang 3 (2 x 8 GPUs, one asw
// required) runs on n0 and n1, job 1 on n2, job 2 on n3 and job 4 on n4; n5 is free. n1 fails at t = 10: the rigid gang is requeued whole. Jobs 5 and 6 (1 x 8 GPUs
// each) arrive at t = 10; job 1 ends at t = 100.
std::unique_ptr<Engine> GangLosingANode(bool hold) {
  EngineConfig o;
  o.name = "survive";
  o.requeue = true;
  o.hold_survivors = hold;
  auto e = Engine::Create(EngineCluster(6), o);
  EXPECT_TRUE(e.ok());
  Engine& m = **e;
  const GpuIndices all = testing::Idx({0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_TRUE(m.Adopt(Job(1, 1, 8, 100), {{0, NodeId(2), all}}, 0));
  EXPECT_TRUE(m.Adopt(Job(2, 1, 8, 100), {{0, NodeId(3), all}}, 0));
  EngineJob gang = Job(3, 2, 8, 100);
  gang.plane = "data";
  gang.required_level = "asw";
  EXPECT_TRUE(m.Adopt(gang, {{0, NodeId(0), all}, {1, NodeId(1), all}}, 0));
  EXPECT_TRUE(m.Adopt(Job(4, 1, 8, 100), {{0, NodeId(4), all}}, 0));
  m.FailNode(NodeId(1), 10);
  EXPECT_EQ(m.Running(3), 0);
  (void)m.Submit(Job(5, 1, 8, 100), SubmitMode::kQueue, 10);
  (void)m.Submit(Job(6, 1, 8, 100), SubmitMode::kQueue, 10);
  m.RunCycle(10);
  m.Cancel(1, 100);
  m.RunCycle(100);
  EXPECT_TRUE(m.state().CheckInvariants().ok());
  return std::move(*e);
}

TEST(Engine, AOneAswGangRequeuedByAFailureHoldsItsSurvivorsAndRestartsInItsAsw) {
  // Held: n0 stays free for the gang, so job 5 takes n5 and job 6 waits; when job 1 frees n2 the
  // gang starts again on n0 and n2, in asw0, and its hold is gone.
  auto m = GangLosingANode(true);
  EXPECT_EQ(m->Running(5) + m->Running(6), 1);
  EXPECT_EQ(m->Running(3), 2);
  EXPECT_EQ(AswsOf(*m, 3).size(), 1u);
  EXPECT_TRUE(m->HeldNodes(3).empty());
  EXPECT_TRUE(m->RunCycle(101).empty());  // stable
}

TEST(Engine, WithoutHoldingSurvivorsTheRequeuedGangLosesItsAswToLaterJobs) {
  // Not held: jobs 5 and 6 take n0 and n5, and when n2 frees up asw0 still has one free node.
  auto m = GangLosingANode(false);
  EXPECT_EQ(m->Running(5) + m->Running(6), 2);
  EXPECT_EQ(m->Running(3), 0);
}

// hold_survivors for a job that may span ASWs: five ASWs of 4, 4, 1, 1 and 3 8-GPU nodes (asw0
// n0-n3, asw1 n4-n7, asw2 n8, asw3 n9, asw4 n10-n12). Gang 1 (8 x 8 GPUs, prefers one ASW) runs
// on n0-n7; n3 fails at t = 10 and the rigid gang is requeued whole; the cycle at t = 10 runs.
std::unique_ptr<Engine> SpanningGangLosingANode(bool hold) {
  EngineConfig o;
  o.name = "resume";
  o.requeue = true;
  o.hold_survivors = hold;
  auto e = Engine::Create(testing::FiveAswCluster(), o);
  EXPECT_TRUE(e.ok());
  Engine& m = **e;
  const GpuIndices all = testing::Idx({0, 1, 2, 3, 4, 5, 6, 7});
  EngineJob gang = Job(1, 8, 8, 100);
  gang.plane = "data";
  gang.preferred_level = "asw";
  std::vector<Engine::Placement> on;
  for (uint32_t i = 0; i < 8; ++i) on.push_back({i, NodeId(i), all});
  EXPECT_TRUE(m.Adopt(gang, on, 0));
  m.FailNode(NodeId(3), 10);
  EXPECT_EQ(m.Running(1), 0);
  m.RunCycle(10);
  EXPECT_TRUE(m.state().CheckInvariants().ok());
  return std::move(*e);
}

std::map<std::string, int> ReplicasPerAsw(const Engine& m, uint32_t job) {
  const ClusterState& s = m.state();
  const PlaneId data = *s.topology().FindPlane("data");
  std::map<std::string, int> out;
  for (TaskId t : s.job(JobId(job - 1)).tasks) {
    if (s.task(t).state == TaskState::kBound) ++out[s.topology().domain(s.topology().NodeDomain(s.task(t).node, data, 0)).name];
  }
  return out;
}

TEST(Engine, AGangThatMaySpanAswsRequeuedByAFailureStartsAgainInTheAswsItRanIn) {
  // Free at t = 10: asw0 3 (its survivors n0-n2), asw1 4, asw2 1, asw3 1, asw4 3. Resuming it
  // takes asw1 (4) and asw0 (3), then one more by entropy: asw2, asw3 and asw4 add the same,
  // asw2 and asw3 keep no spare (asw4 two) and asw2 comes first: three ASWs, nothing held.
  auto m = SpanningGangLosingANode(true);
  EXPECT_EQ(m->Running(1), 8);
  EXPECT_EQ(ReplicasPerAsw(*m, 1), (std::map<std::string, int>{{"asw0", 3}, {"asw1", 4}, {"asw2", 1}}));
  EXPECT_TRUE(m->HeldNodes(1).empty());
  EXPECT_TRUE(m->state().job(JobId(0)).resume_nodes.empty());  // used up by the start
  EXPECT_TRUE(m->RunCycle(11).empty());  // stable
  EXPECT_TRUE(m->RunCycle(5000).empty());
}

TEST(Engine, WithoutHoldingSurvivorsTheSpanningGangStartsAfreshOverMoreAsws) {
  // Afresh (AllocateSpanning's entropy rule over 8 replicas): asw2 (1), asw3 (1), asw1 (4), then
  // asw0 (2, tied with asw4 on entropy and spare, first in order): four ASWs.
  auto m = SpanningGangLosingANode(false);
  EXPECT_EQ(m->Running(1), 8);
  EXPECT_EQ(ReplicasPerAsw(*m, 1), (std::map<std::string, int>{{"asw0", 2}, {"asw1", 4}, {"asw2", 1}, {"asw3", 1}}));
}

// hold_survivors with Reclaim (issue 21: "a replacement inside its domain when one ... can be
// freed by Reclaim"): n0-n2 in asw0, n3-n5 in asw1. HP gang 3 (2 x 8 GPUs, one asw required) runs
// on n0 and n1; preemptible LP jobs 1, 2 and 4 run on n2, n3 and n4, non-preemptible job 7 on n5.
// n1 fails at t = 10 for good and job 5 (8 GPUs, not preemptible) arrives; grace 60 s.
std::unique_ptr<Engine> HpGangLosingANode(bool hold) {
  EngineConfig o;
  o.name = "survive-reclaim";
  o.requeue = true;
  o.grace_s = 60;
  o.hold_survivors = hold;
  auto e = Engine::Create(EngineCluster(6), o);
  EXPECT_TRUE(e.ok());
  Engine& m = **e;
  const GpuIndices all = testing::Idx({0, 1, 2, 3, 4, 5, 6, 7});
  EngineJob gang = Job(3, 2, 8, kHpPriority);
  gang.plane = "data";
  gang.required_level = "asw";
  EXPECT_TRUE(m.Adopt(Job(1, 1, 8, 100, true), {{0, NodeId(2), all}}, 0));
  EXPECT_TRUE(m.Adopt(Job(2, 1, 8, 100, true), {{0, NodeId(3), all}}, 0));
  EXPECT_TRUE(m.Adopt(gang, {{0, NodeId(0), all}, {1, NodeId(1), all}}, 0));
  EXPECT_TRUE(m.Adopt(Job(4, 1, 8, 100, true), {{0, NodeId(4), all}}, 0));
  EXPECT_TRUE(m.Adopt(Job(7, 1, 8, 100), {{0, NodeId(5), all}}, 0));
  m.FailNode(NodeId(1), 10);
  EXPECT_EQ(m.Running(3), 0);
  (void)m.Submit(Job(5, 1, 8, 100), SubmitMode::kQueue, 10);
  m.RunCycle(10);
  EXPECT_TRUE(m.state().CheckInvariants().ok());
  return std::move(*e);
}

TEST(Engine, AnHpGangThatLostANodeReclaimsOneNodeOfItsAswBesideItsHeldSurvivor) {
  // Held: n0 stays the gang's, so job 5 finds no node and the gang's Reclaim needs only one more
  // node of asw0: job 1 on n2 (one victim). Job 1 leaves after the grace period and the gang starts
  // again on n0 and n2 at t = 70; jobs 2 and 4 never stop.
  auto m = HpGangLosingANode(true);
  EXPECT_EQ(m->Running(5), 0);
  m->RunCycle(69);
  EXPECT_EQ(m->Running(3), 0);
  m->RunCycle(70);
  EXPECT_EQ(m->Running(3), 2);
  EXPECT_EQ(AswsOf(*m, 3), (std::set<DomainId>{m->state().topology().NodeDomain(NodeId(0), *m->state().topology().FindPlane("data"), 0)}));
  std::set<uint32_t> nodes;
  for (TaskId t : m->state().job(JobId(2)).tasks) nodes.insert(m->state().task(t).node.value());
  EXPECT_EQ(nodes, (std::set<uint32_t>{0, 2}));
  EXPECT_EQ(m->Running(1), 0);
  EXPECT_EQ(m->Running(2), 1);
  EXPECT_EQ(m->Running(4), 1);
  EXPECT_TRUE(m->HeldNodes(3).empty());
  // Stable: later cycles evict nothing more and move nothing.
  EXPECT_TRUE(m->RunCycle(71).empty());
  EXPECT_TRUE(m->RunCycle(1000).empty());
  EXPECT_EQ(m->Running(2) + m->Running(4), 2);
  ASSERT_TRUE(m->state().CheckInvariants().ok());
}

TEST(Engine, WithoutHoldingSurvivorsTheHpGangReclaimsTwoNodesInTheOtherAsw) {
  // Not held: job 5 takes n0 (not preemptible), so asw0 cannot hold the gang any more; its Reclaim
  // evicts jobs 2 and 4 (two victims) and it starts in asw1 at t = 70; job 1 keeps running.
  auto m = HpGangLosingANode(false);
  EXPECT_EQ(m->Running(5), 1);
  m->RunCycle(70);
  EXPECT_EQ(m->Running(3), 2);
  EXPECT_EQ(AswsOf(*m, 3), (std::set<DomainId>{m->state().topology().NodeDomain(NodeId(3), *m->state().topology().FindPlane("data"), 0)}));
  EXPECT_EQ(m->Running(1), 1);
  EXPECT_EQ(m->Running(2) + m->Running(4), 0);
}

// ---- FGD without a trace: typical tasks learned from the submitted jobs ----

TEST(Engine, FgdLearnsItsTypicalTasksFromTheJobsSubmittedAtDoublingCounts) {
  EngineConfig o;
  o.name = "fgd";
  o.policy = "fgd";
  auto e = Engine::Create(EngineCluster(4), o);
  ASSERT_TRUE(e.ok()) << e.status().message();
  Engine& m = **e;
  ASSERT_NE(m.typical(), nullptr);
  EXPECT_TRUE(m.typical()->tasks.empty()) << "nothing submitted, nothing typical";
  // Jobs of 4, 1, 1 and 2 GPUs: learned after the 1st, 2nd and 4th job, not after the 3rd.
  std::vector<TaskRequest> seen;
  const std::vector<int> gpus = {4, 1, 1, 2};
  for (size_t k = 0; k < gpus.size(); ++k) {
    const EngineJob j = Job(static_cast<uint32_t>(k + 1), 1, gpus[k], 100);
    ASSERT_TRUE(m.Submit(j, SubmitMode::kStartNow, static_cast<int64_t>(k)).started);
    TaskRequest r = j.per_replica;
    r.models = GpuModelSet();
    seen.push_back(r);
    const size_t learned_from = k == 2 ? 2 : k + 1;
    const TypicalTasks want = TypicalTasks::FromWorkload(std::span<const TaskRequest>(seen.data(), learned_from));
    ASSERT_EQ(m.typical()->tasks.size(), want.tasks.size()) << "after job " << k + 1;
    for (size_t i = 0; i < want.tasks.size(); ++i) {
      EXPECT_EQ(m.typical()->tasks[i].req.gpu_count, want.tasks[i].req.gpu_count);
      EXPECT_EQ(m.typical()->tasks[i].count, want.tasks[i].count);
    }
  }
  ASSERT_TRUE(m.state().CheckInvariants().ok());
  // Given typical tasks are used as they are, and never relearned.
  o.typical = std::make_shared<const TypicalTasks>(TypicalTasks::FromWorkload(seen));
  auto given = Engine::Create(EngineCluster(4), o);
  ASSERT_TRUE(given.ok());
  ASSERT_TRUE((*given)->Submit(Job(1, 1, 8, 100), SubmitMode::kStartNow, 0).started);
  EXPECT_EQ((*given)->typical(), o.typical.get());
  // An unknown policy is refused.
  o.policy = "spread-everything";
  EXPECT_FALSE(Engine::Create(EngineCluster(1), o).ok());
}

// ---- The input log: the engine is a deterministic function of its timestamped inputs ----

std::string Text(const EngineEvent& e) {
  return std::to_string(e.t) + " " + std::to_string(static_cast<int>(e.kind)) + " job " + std::to_string(e.job) + " x" +
         std::to_string(e.replicas) + " for " + std::to_string(e.for_job) + " at " + std::to_string(e.at) + " " +
         e.detail + (e.never ? " never" : "");
}

// Where every task of the state is bound ("-" when not), one line per task.
std::string Placements(const ClusterState& s) {
  std::string out;
  for (const Task& t : s.tasks()) {
    out += t.name + (t.state == TaskState::kBound ? "@" + std::to_string(t.node.value()) : std::string("-")) +
           (t.standby ? "s" : "") + (t.borrowed ? "b" : "") + "\n";
  }
  return out;
}

// A seeded random run through the engine's input methods on 12 nodes (two ASWs): rigid, elastic
// and step jobs at LP, spot and HP priorities (HP gangs requiring an ASW), cancels, resizes,
// node failures, drains, cordons and repairs, Standby targets, holds, defragmentations, probes and
// cycles. Returns every event, in order.
std::vector<std::string> RandomRun(Engine& m, uint64_t seed, int inputs) {
  Rng rng(seed);
  std::vector<std::string> events;
  const auto take = [&](std::vector<EngineEvent> ev) {
    for (const EngineEvent& e : ev) events.push_back(Text(e));
  };
  uint32_t next = 1;
  int64_t t = 0;
  for (int k = 0; k < inputs; ++k) {
    t += static_cast<int64_t>(rng.Uniform(20));
    const uint64_t what = rng.Uniform(100);
    const uint32_t some = 1 + static_cast<uint32_t>(rng.Uniform(next));
    const NodeId node(static_cast<uint32_t>(rng.Uniform(m.state().num_nodes())));
    if (what < 22) {
      const int32_t prio = std::array<int32_t, 4>{100, 100, 300, kHpPriority}[rng.Uniform(4)];
      const int replicas = 1 + static_cast<int>(rng.Uniform(8));
      EngineJob j = Job(next++, replicas, std::array<int, 4>{1, 2, 4, 8}[rng.Uniform(4)], prio, prio < kHpPriority);
      if (rng.Uniform(3) == 0) {
        j.step = 2;
        j.min_replicas = 2;
        j.max_replicas = std::max(2, replicas / 2 * 2);
      } else if (rng.Uniform(2) == 0) {
        j.min_replicas = 1;
      }
      if (prio >= kHpPriority && rng.Uniform(2) == 0) {
        j.plane = "data";
        j.required_level = "asw";
        j.required_max_wait_s = 40 * static_cast<int64_t>(rng.Uniform(2));  // relaxed after 40 s, or never
      }
      const SubmitMode mode = std::array<SubmitMode, 3>{SubmitMode::kEnqueue, SubmitMode::kQueue, SubmitMode::kStartOrReclaim}[rng.Uniform(3)];
      (void)m.Submit(j, mode, t);
    } else if (what < 40) {
      m.Cancel(some, t);  // a job that ends (or a cancel)
    } else if (what < 45) {
      std::string why;
      (void)m.Resize(some, 1, 1 + static_cast<int32_t>(rng.Uniform(6)), t, &why);
    } else if (what < 49) {
      m.FailNode(node, t);
    } else if (what < 51) {
      m.DrainNode(node, t);
    } else if (what < 56) {
      m.RestoreNode(node);
    } else if (what < 58) {
      m.SetCordoned(node, rng.Uniform(2) == 0);
    } else if (what < 63) {
      (void)m.SetStandby(some, static_cast<int32_t>(rng.Uniform(3)), t);
    } else if (what < 65) {
      std::vector<NodeId> held;
      if (rng.Uniform(2) == 0) (void)m.Reserve(some, &held);
      else m.Unreserve(some);
    } else if (what < 67) {
      DefragOptions d;
      d.partition_nodes = 0;
      (void)m.Defrag(d, t);
    } else if (what < 69) {
      (void)m.QuoteReclaim(Job(next++, 2, 8, kHpPriority), t);
    } else {
      take(m.RunCycle(t));
    }
    take(m.TakeEvents());
  }
  return events;
}

std::unique_ptr<Engine> ReplayEngine() {
  EngineConfig o;
  o.name = "log";
  o.grace_s = 30;
  o.exit_mean_s = 13;
  o.exit_p95_s = 25;
  o.seed = 7;
  auto e = Engine::Create(EngineCluster(12), o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return std::move(*e);
}

TEST(Engine, ARecordedInputLogReplayedIntoANewEngineGivesTheSameEventsAndPlacements) {
  for (uint64_t seed : {1, 2, 3}) {
    auto live = ReplayEngine();
    std::vector<EngineInput> log;
    live->RecordInputs(&log);
    const std::vector<std::string> events = RandomRun(*live, seed, 2000);
    ASSERT_TRUE(live->state().CheckInvariants().ok());
    // A run that decides little proves little: every kind of decision is in it.
    std::map<std::string, int> kinds;
    for (const std::string& e : events) ++kinds[e.substr(e.find(' ') + 1, 1)];
    for (EngineEvent::Kind k : {EngineEvent::Kind::kStarted, EngineEvent::Kind::kGrown, EngineEvent::Kind::kShrunk,
                                EngineEvent::Kind::kReturned, EngineEvent::Kind::kReclaim}) {
      EXPECT_GE(kinds[std::to_string(static_cast<int>(k))], 5) << "seed " << seed << " kind " << static_cast<int>(k);
    }
    EXPECT_EQ(log.size(), 2000u) << "every input is recorded, with its time";
    auto replay = ReplayEngine();
    std::vector<EngineInput> again;
    replay->RecordInputs(&again);
    std::vector<std::string> replayed;
    for (const EngineInput& in : log) {
      replay->Apply(in);
      for (const EngineEvent& e : replay->TakeEvents()) replayed.push_back(Text(e));
    }
    EXPECT_EQ(replayed, events) << "seed " << seed;
    EXPECT_EQ(Placements(replay->state()), Placements(live->state()));
    EXPECT_EQ(again.size(), log.size()) << "a replay records the same inputs";
    EXPECT_EQ(replay->now(), live->now());
  }
}

TEST(Engine, ALogReplayedWithAnInputChangedDecidesDifferently) {
  auto live = ReplayEngine();
  std::vector<EngineInput> log;
  live->RecordInputs(&log);
  const std::vector<std::string> events = RandomRun(*live, 4, 600);
  // The same inputs, but the first node failure never happens.
  const auto failure = std::find_if(log.begin(), log.end(), [](const EngineInput& in) {
    const auto* n = std::get_if<NodeInput>(&in.what);
    return n != nullptr && n->op == NodeInput::Op::kFail;
  });
  ASSERT_NE(failure, log.end());
  log.erase(failure);
  auto replay = ReplayEngine();
  std::vector<std::string> replayed;
  for (const EngineInput& in : log) {
    replay->Apply(in);
    for (const EngineEvent& e : replay->TakeEvents()) replayed.push_back(Text(e));
  }
  EXPECT_NE(replayed, events);
}

// ---- Standby (SpotGPU) and live migration ----

std::unique_ptr<Engine> LiveEngine(int nodes, int64_t grace_s) {
  EngineConfig o;
  o.name = "live";
  o.grace_s = grace_s;
  o.standby_grace_s = grace_s;
  o.absorb = false;
  o.migration.acknowledged = true;
  auto m = Engine::Create(EngineCluster(nodes), o);
  EXPECT_TRUE(m.ok());
  return std::move(*m);
}

void ExpectConsistent(const Engine& m) {
  const Status st = m.state().CheckInvariants();
  EXPECT_TRUE(st.ok()) << st.message();
}

std::vector<EngineEvent> StepAndTake(Engine& m, int64_t t) {
  std::vector<EngineEvent> events = m.RunCycle(t);
  ExpectConsistent(m);
  return events;
}

TEST(Engine, ARenewalOfHoldsThatReleasesOneAndMakesNoneOffersTheFreedNodeInTheSameCycle) {
  // Two 8-GPU nodes. A 16-GPU gang waits behind an 8-GPU job, and the reserve action (a renewal
  // every 60 s; gangs of >= 16 GPUs, from their submission on) holds both nodes for it. The node
  // the job runs on fails: the job is requeued and waits, as the other node is held. At the next
  // renewal the gang can be held nowhere (one node is up), so its hold goes and none is made: the
  // requeued job starts on the freed node in that very cycle, and a second cycle at the same time,
  // as a driver with another rhythm would run, changes nothing.
  EngineConfig o;
  o.name = "holds";
  o.requeue = true;
  o.absorb = false;
  o.reserve.enabled = true;
  o.reserve.replan_s = 60;
  o.reserve.after_s = 0;
  o.reserve.min_gpus = 16;
  auto made = Engine::Create(EngineCluster(2), o);
  ASSERT_TRUE(made.ok());
  Engine& m = **made;
  ASSERT_TRUE(m.Submit(Job(1, 1, 8, 100), SubmitMode::kStartNow, 0).started);
  ASSERT_TRUE(m.Submit(Job(2, 2, 8, 100), SubmitMode::kEnqueue, 0).accepted);
  m.TakeEvents();
  EXPECT_TRUE(StepAndTake(m, 1).empty());
  StepAndTake(m, 60);
  const JobId gang = *m.JobOf(2);
  ASSERT_TRUE(m.state().job(gang).reservation.valid());
  EXPECT_EQ(m.state().reservation(m.state().job(gang).reservation).nodes.size(), 2u);
  const NodeId busy = m.state().task(m.state().job(*m.JobOf(1)).tasks[0]).node;
  m.FailNode(busy, 100);
  StepAndTake(m, 100);
  ASSERT_EQ(m.Running(1), 0);
  EXPECT_EQ(m.QueuedInOrder(), (std::vector<uint32_t>{1, 2}));
  const std::vector<EngineEvent> ev = StepAndTake(m, 120);
  EXPECT_FALSE(m.state().job(gang).reservation.valid());
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kStarted);
  EXPECT_EQ(ev[0].job, 1u);
  EXPECT_EQ(m.state().task(m.state().job(*m.JobOf(1)).tasks[0]).node, NodeId(1 - busy.value()));
  EXPECT_TRUE(StepAndTake(m, 120).empty());
}

// ---- Walltime limits (JobSpec::walltime_s: Slurm's --time) ----

TEST(Engine, ARunReachingItsWalltimeIsEndedByTheCycleAtItsLimitAndAWaitingJobTakesItsNodesThere) {
  // 2 nodes. Job 1 (2 nodes, walltime 100 s) starts at 10; job 2 (2 nodes) waits behind it.
  auto m = LiveEngine(2, 30);
  std::vector<EngineInput> log;
  m->RecordInputs(&log);
  EngineJob a = Job(1, 2, 8, 300);
  a.walltime_s = 100;
  ASSERT_TRUE(m->Submit(a, SubmitMode::kEnqueue, 10).accepted);
  ASSERT_TRUE(m->Submit(Job(2, 2, 8, 300), SubmitMode::kEnqueue, 10).accepted);
  StepAndTake(*m, 10);
  ASSERT_EQ(m->Running(1), 2);
  EXPECT_EQ(m->NextDue(), std::optional<int64_t>(110));
  EXPECT_TRUE(StepAndTake(*m, 109).empty());
  // At 110 the limit ends job 1 (finished: not queued again) and job 2 starts in the same cycle.
  const std::vector<EngineEvent> ev = StepAndTake(*m, 110);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kTimedOut);
  EXPECT_EQ(ev[0].job, 1u);
  EXPECT_EQ(ev[0].replicas, 2);
  EXPECT_EQ(ev[1].kind, EngineEvent::Kind::kStarted);
  EXPECT_EQ(ev[1].job, 2u);
  EXPECT_EQ(m->Running(1), 0);
  EXPECT_EQ(m->queued(), 0u);
  EXPECT_FALSE(m->NextDue().has_value());  // job 2 has no limit
  EXPECT_TRUE(StepAndTake(*m, 111).empty());
  // The timeout is the engine's decision, not an input: the inputs replayed decide it again.
  auto replay = LiveEngine(2, 30);
  std::vector<EngineEvent> again;
  for (const EngineInput& in : log) {
    replay->Apply(in);
    for (const EngineEvent& e : replay->TakeEvents()) again.push_back(e);
  }
  ASSERT_EQ(again.size(), 3u);  // job 1 started, timed out; job 2 started
  EXPECT_EQ(again[1].kind, EngineEvent::Kind::kTimedOut);
  EXPECT_EQ(again[1].t, 110);
  EXPECT_EQ(replay->Running(2), 2);
}

TEST(Engine, AWalltimeCountsFromEachRunsStartAndAJobThatEndsFirstIsNotTimedOut) {
  // 2 nodes. HP job 3 arrives at 50 and takes job 1's node (job 1: walltime 100 s, started at
  // 0) after the grace period; job 1, back with its driver, is submitted again and runs from 200:
  // it is timed out at 300, not at 100. Job 2 (walltime 100) ends at 90 on its own.
  auto m = LiveEngine(2, 30);
  EngineJob a = Job(1, 1, 8, 300, true), b = Job(2, 1, 8, 300);
  a.walltime_s = b.walltime_s = 100;
  ASSERT_TRUE(m->Submit(a, SubmitMode::kEnqueue, 0).accepted);
  ASSERT_TRUE(m->Submit(b, SubmitMode::kEnqueue, 0).accepted);
  StepAndTake(*m, 0);
  ASSERT_EQ(m->Running(1) + m->Running(2), 2);
  ASSERT_TRUE(m->Submit(Job(3, 1, 8, 900), SubmitMode::kEnqueue, 50).accepted);
  StepAndTake(*m, 50);  // the Reclaim: job 1 is evicted after the grace period
  StepAndTake(*m, 80);
  ASSERT_EQ(m->Running(1), 0);
  ASSERT_EQ(m->Running(3), 1);
  m->Finish(2, 90);
  m->Finish(3, 200);
  ASSERT_TRUE(m->Submit(a, SubmitMode::kEnqueue, 200).accepted);
  std::vector<EngineEvent> ev = StepAndTake(*m, 200);
  ASSERT_EQ(m->Running(1), 1);
  for (const EngineEvent& e : ev) EXPECT_NE(e.kind, EngineEvent::Kind::kTimedOut);
  EXPECT_EQ(m->NextDue(), std::optional<int64_t>(300));
  ev = StepAndTake(*m, 300);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kTimedOut);
  EXPECT_EQ(ev[0].job, 1u);
}


TEST(Engine, AJobShrunkByAReclaimAfterANodeFailureTookItsOtherReplicasIsEvictedWholeAndRunsAgain) {
  // An elastic LP job (4 x 4 GPUs, min 2, step 2) fills both nodes; an HP job of 8 GPUs Reclaims
  // the two replicas on one node (keeping min). During the grace period the other node fails:
  // the two replicas being evicted are all the job has left. When the grace period ends, the job
  // is evicted whole and waits again (before the fix it stayed "running" with nothing bound, and
  // never ran again); once the node is back it starts there.
  EngineConfig o;
  o.name = "reclaim-and-failure";
  o.requeue = true;  // as the service runs it: an evicted job waits again in the engine
  o.grace_s = 30;
  o.absorb = false;
  auto made = Engine::Create(EngineCluster(2), o);
  ASSERT_TRUE(made.ok());
  Engine& m = **made;
  EngineJob lp = Job(1, 4, 4, 100, true);
  lp.min_replicas = 2;
  lp.step = 2;
  ASSERT_TRUE(m.Submit(lp, SubmitMode::kStartNow, 0).started);
  ASSERT_EQ(m.Running(1), 4);
  ASSERT_TRUE(m.Submit(Job(2, 1, 8, kHpPriority), SubmitMode::kQueue, 1).reclaiming);
  const std::vector<Engine::EvictionNotice> notices = m.TakeEvictionNotices();
  ASSERT_EQ(notices.size(), 2u);
  const NodeId reclaimed = m.state().task(notices[0].task).node;
  const NodeId other(1 - reclaimed.value());
  m.TakeEvents();
  m.FailNode(other, 5);
  std::vector<EngineEvent> ev = m.TakeEvents();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kShrunk);
  EXPECT_EQ(ev[0].replicas, 2);
  EXPECT_TRUE(StepAndTake(m, 30).empty());
  ev = StepAndTake(m, 31);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kReturned);
  EXPECT_EQ(ev[0].job, 1u);
  EXPECT_EQ(ev[0].for_job, 2u);
  EXPECT_EQ(ev[1].kind, EngineEvent::Kind::kStarted);
  EXPECT_EQ(ev[1].job, 2u);
  EXPECT_EQ(m.Running(1), 0);
  EXPECT_EQ(m.QueuedInOrder(), std::vector<uint32_t>{1});
  // Stable while there is no room; runs again on the repaired node.
  EXPECT_TRUE(StepAndTake(m, 40).empty());
  m.RestoreNode(other);
  ev = StepAndTake(m, 41);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kStarted);
  EXPECT_EQ(ev[0].job, 1u);
  EXPECT_EQ(m.Running(1), 2);
  EXPECT_TRUE(StepAndTake(m, 42).empty());
}

TEST(Engine, AJobThatStartsInItsStandbyWindowLendsAtOnceAndTheSameCycleRunsSpotWorkOnTheLentGpus) {
  // The cycle's `standby` after `allocate` puts the HP service's replica into Standby; the lent
  // GPUs go to the waiting spot job in the same cycle (the actions run again), so another cycle
  // at the same time, as a driver with another rhythm would run, changes nothing.
  auto m = LiveEngine(2, 30);
  ASSERT_TRUE(m->Submit(Job(1, 2, 8, kHpPriority), SubmitMode::kEnqueue, 0).accepted);
  m->SetStandbyWindows(1, {StandbyWindowSpec{0, 1000, 1}}, 0);
  ASSERT_TRUE(m->Submit(Job(2, 1, 4, 100, true), SubmitMode::kEnqueue, 0).accepted);
  const std::vector<EngineEvent> ev = StepAndTake(*m, 1);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kStarted);
  EXPECT_EQ(ev[0].job, 1u);
  EXPECT_EQ(ev[1].kind, EngineEvent::Kind::kStandby);
  EXPECT_EQ(ev[1].job, 1u);
  EXPECT_EQ(ev[2].kind, EngineEvent::Kind::kStarted);
  EXPECT_EQ(ev[2].job, 2u);
  EXPECT_TRUE(m->state().task(m->state().job(*m->JobOf(2)).tasks[0]).borrowed);
  EXPECT_TRUE(StepAndTake(*m, 1).empty());
  EXPECT_TRUE(StepAndTake(*m, 2).empty());
}

TEST(Engine, AcknowledgedStandbyLendsOnlyOnceTheReplicaLeftItsGpusAndARefusalIsNotAskedAgainInThatWindow) {
  // A job whose replicas enter Standby through a hook: a replica chosen for Standby keeps its GPUs
  // until its agent says its standby_enter hook succeeded; a failed hook is a refusal, kept until
  // the job's target is 0.
  EngineConfig o;
  o.name = "acknowledged";
  o.absorb = false;
  auto made = Engine::Create(EngineCluster(2), o);
  ASSERT_TRUE(made.ok());
  Engine& m = **made;
  EngineJob service = Job(1, 2, 8, kHpPriority);
  service.acknowledge_standby = true;  // it has a standby_enter hook
  ASSERT_TRUE(m.Submit(service, SubmitMode::kStartNow, 0).started);
  m.SetStandbyWindows(1, {StandbyWindowSpec{10, 100, 1}, StandbyWindowSpec{200, 300, 1}}, 0);
  ASSERT_TRUE(m.Submit(Job(2, 1, 4, 100, true), SubmitMode::kEnqueue, 0).accepted);
  m.TakeEvents();
  std::vector<EngineEvent> ev = StepAndTake(m, 10);  // chosen (the decision), not lent
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kStandby);
  const JobId hp = *m.JobOf(1);
  const TaskId chosen = m.state().job(hp).tasks[1];  // the newest replica
  EXPECT_TRUE(m.EnteringStandby(chosen));
  EXPECT_FALSE(m.state().task(chosen).standby);
  EXPECT_EQ(m.InStandby(1), 1);
  EXPECT_EQ(m.Running(2), 0);
  EXPECT_FALSE(m.Quiescent());
  EXPECT_TRUE(StepAndTake(m, 10).empty());  // not asked twice
  EXPECT_FALSE(m.AcknowledgeStandby(m.state().job(hp).tasks[0], true, ""));  // not chosen
  ASSERT_TRUE(m.AcknowledgeStandby(chosen, true, ""));
  EXPECT_TRUE(m.TakeEvents().empty());
  EXPECT_TRUE(m.state().task(chosen).standby);
  ev = StepAndTake(m, 11);  // the spot job runs on the lent GPUs
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kStarted);
  EXPECT_EQ(ev[0].job, 2u);
  EXPECT_TRUE(StepAndTake(m, 12).empty());

  // Past the window (and the borrower's eviction) the replica is back; in the next window its
  // hook fails: nothing is lent and it is not asked again (the evicted spot job is back with
  // its driver).
  for (int64_t t = 90; t <= 160; t += 10) StepAndTake(m, t);
  EXPECT_FALSE(m.state().task(chosen).standby);
  EXPECT_EQ(m.Running(2), 0);
  ASSERT_EQ(StepAndTake(m, 200).size(), 1u);
  ASSERT_TRUE(m.EnteringStandby(chosen));
  ASSERT_TRUE(m.AcknowledgeStandby(chosen, false, "standby_enter hook: exit code 4"));
  ev = m.TakeEvents();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kStandbyRefused);
  EXPECT_NE(ev[0].detail.find(": standby_enter hook: exit code 4"), std::string::npos) << ev[0].detail;
  // Its other replica is asked in its place; once that one refuses too, none is asked again.
  const TaskId other = m.state().job(hp).tasks[0];
  ev = StepAndTake(m, 201);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kStandby);
  EXPECT_FALSE(m.EnteringStandby(chosen));
  ASSERT_TRUE(m.EnteringStandby(other));
  ASSERT_TRUE(m.AcknowledgeStandby(other, false, "standby_enter hook: exit code 4"));
  m.TakeEvents();
  EXPECT_TRUE(StepAndTake(m, 202).empty());
  EXPECT_TRUE(StepAndTake(m, 210).empty());
  EXPECT_FALSE(m.EnteringStandby(chosen) || m.EnteringStandby(other));
  EXPECT_EQ(m.InStandby(1), 0);
  EXPECT_EQ(m.Running(2), 0);
  EXPECT_TRUE(m.Quiescent());
}

TEST(Engine, StandbyLendsToSpotJobsOnlyAndItsRestoreEvictsTheBorrowersAfterTheGracePeriod) {
  auto m = LiveEngine(2, 30);
  ASSERT_TRUE(m->Submit(Job(1, 2, 8, kHpPriority), SubmitMode::kStartNow, 0).started);  // fills both nodes
  ASSERT_TRUE(m->SetStandby(1, 1, 10));
  EXPECT_EQ(m->InStandby(1), 1);
  const std::vector<EngineEvent> entered = m->TakeEvents();
  ASSERT_EQ(entered.size(), 2u);  // the start, then one replica into Standby
  EXPECT_EQ(entered[1].kind, EngineEvent::Kind::kStandby);
  EXPECT_EQ(entered[1].replicas, 1);
  EXPECT_EQ(m->TakeTouched(), std::vector<uint32_t>{1});
  const JobId hp = *m->JobOf(1);
  const TaskId lender = m->state().job(hp).tasks[1];  // the newest replica
  EXPECT_TRUE(m->state().task(lender).standby);
  EXPECT_EQ(m->state().lending_nodes().size(), 1u);

  // A spot job (preemptible, LP) runs on the lent GPUs; an LP job that is not preemptible may not.
  ASSERT_TRUE(m->Submit(Job(2, 1, 4, 100, true), SubmitMode::kEnqueue, 11).accepted);
  ASSERT_TRUE(m->Submit(Job(3, 1, 4, 100, false), SubmitMode::kEnqueue, 11).accepted);
  StepAndTake(*m, 11);
  const TaskId spot = m->state().job(*m->JobOf(2)).tasks[0];
  ASSERT_EQ(m->state().task(spot).state, TaskState::kBound);
  EXPECT_TRUE(m->state().task(spot).borrowed);
  EXPECT_EQ(m->state().task(spot).node, m->state().task(lender).node);
  EXPECT_EQ(m->Running(3), 0);

  // The window ends: the borrower is warned and leaves grace_s later; the replica then resumes.
  ASSERT_TRUE(m->SetStandby(1, 0, 20));
  const auto notices = m->TakeEvictionNotices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].job, 2u);
  EXPECT_EQ(notices[0].at, 50);
  EXPECT_EQ(m->InStandby(1), 1);  // restoring
  EXPECT_TRUE(StepAndTake(*m, 49).empty());
  EXPECT_TRUE(m->state().task(spot).state == TaskState::kBound);
  const std::vector<EngineEvent> at50 = StepAndTake(*m, 50);
  ASSERT_EQ(at50.size(), 2u);
  EXPECT_EQ(at50[0].kind, EngineEvent::Kind::kReturned);
  EXPECT_EQ(at50[0].job, 2u);
  EXPECT_EQ(at50[0].detail, "standby restore");
  EXPECT_EQ(at50[1].kind, EngineEvent::Kind::kRestored);  // then the replica resumes
  EXPECT_EQ(at50[1].job, 1u);
  EXPECT_EQ(at50[1].replicas, 0);
  EXPECT_EQ(at50[1].detail, m->state().task(lender).name + "@" + m->state().node(m->state().task(lender).node).spec.name +
                                ":0,1,2,3,4,5,6,7");
  EXPECT_EQ(m->TakeTouched(), std::vector<uint32_t>{1});
  EXPECT_EQ(m->InStandby(1), 0);
  EXPECT_FALSE(m->state().task(lender).standby);
  EXPECT_EQ(m->state().task(lender).state, TaskState::kBound);
  EXPECT_TRUE(m->state().lending_nodes().empty());
  // Stable: more cycles change nothing.
  EXPECT_TRUE(StepAndTake(*m, 51).empty());
  EXPECT_TRUE(StepAndTake(*m, 500).empty());
  EXPECT_EQ(m->Running(1), 2);
}

TEST(Engine, AStandbyReplicaWithoutBorrowersResumesAtOnceAndALenderThatEndsTakesItsBorrowersWithIt) {
  auto m = LiveEngine(2, 30);
  ASSERT_TRUE(m->Submit(Job(1, 2, 8, kHpPriority), SubmitMode::kStartNow, 0).started);
  ASSERT_TRUE(m->SetStandby(1, 2, 1));
  EXPECT_EQ(m->InStandby(1), 2);
  ASSERT_TRUE(m->SetStandby(1, 1, 2));  // nobody borrows: at once
  EXPECT_EQ(m->InStandby(1), 1);
  EXPECT_TRUE(m->TakeEvictionNotices().empty());
  EXPECT_FALSE(m->SetStandby(9, 1, 2));  // not here

  ASSERT_TRUE(m->Submit(Job(2, 1, 8, 100, true), SubmitMode::kEnqueue, 3).accepted);
  StepAndTake(*m, 3);
  ASSERT_EQ(m->Running(2), 1);
  m->Cancel(1, 4);  // the lender ends: its borrower cannot stay
  ExpectConsistent(*m);
  const std::vector<EngineEvent> ev = m->TakeEvents();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EngineEvent::Kind::kReturned);
  EXPECT_EQ(ev[0].job, 2u);
  EXPECT_EQ(m->Running(2), 0);
  EXPECT_EQ(m->state().allocated_gpu_milli(), 0);
}

TEST(Engine, ANodeFailureUnderALenderEvictsItsBorrowersAndShrinksNothingElse) {
  auto m = LiveEngine(2, 30);
  EngineJob svc = Job(1, 2, 8, kHpPriority);
  svc.min_replicas = 1;
  ASSERT_TRUE(m->Submit(svc, SubmitMode::kStartNow, 0).started);
  ASSERT_TRUE(m->SetStandby(1, 1, 1));
  ASSERT_TRUE(m->Submit(Job(2, 1, 8, 100, true), SubmitMode::kEnqueue, 2).accepted);
  StepAndTake(*m, 2);
  ASSERT_EQ(m->Running(2), 1);
  const NodeId lent = m->state().lending_nodes()[0];
  m->FailNode(lent, 3);
  ExpectConsistent(*m);
  std::map<uint32_t, EngineEvent::Kind> kinds;
  for (const EngineEvent& e : m->TakeEvents()) kinds[e.job] = e.kind;
  EXPECT_EQ(kinds[2], EngineEvent::Kind::kReturned);
  EXPECT_EQ(kinds[1], EngineEvent::Kind::kShrunk);
  EXPECT_EQ(m->Running(1), 1);
  EXPECT_EQ(m->InStandby(1), 0);
}

TEST(Engine, DefragMovesMakeBeforeBreakAndCompleteOnlyWhenTheNewInstanceIsAcknowledged) {
  auto m = LiveEngine(3, 30);
  // a (4 GPUs) on n0 and b (4 GPUs) on n1: one move of a to n1 frees n0 whole.
  ASSERT_TRUE(m->Adopt(Job(1, 1, 4, 100), {{0, NodeId(0), testing::Idx({0, 1, 2, 3})}}, 0));
  ASSERT_TRUE(m->Adopt(Job(2, 1, 4, 100), {{0, NodeId(1), testing::Idx({0, 1, 2, 3})}}, 0));
  DefragOptions d;
  d.partition_nodes = 0;
  const auto planned = m->Defrag(d, 10);
  ASSERT_TRUE(planned.ok());
  EXPECT_EQ(*planned, 1);
  ExpectConsistent(*m);
  const std::vector<Engine::StartingMove> starting = m->StartingMoves();
  ASSERT_EQ(starting.size(), 1u);
  const TaskId a = m->state().job(*m->JobOf(1)).tasks[0];
  EXPECT_EQ(starting[0].task, a);
  EXPECT_EQ(starting[0].to, NodeId(1));
  EXPECT_EQ(m->TakeTouched(), std::vector<uint32_t>{1});
  // Both instances hold GPUs until the new one runs.
  EXPECT_EQ(m->state().task(a).node, NodeId(0));
  EXPECT_EQ(m->state().reserved_gpu_milli(), 4000);
  EXPECT_EQ(*m->Defrag(d, 11), 0);  // one plan at a time
  StepAndTake(*m, 100);
  EXPECT_EQ(m->state().task(a).node, NodeId(0));
  EXPECT_TRUE(m->AcknowledgeMove(a, true));
  StepAndTake(*m, 101);
  EXPECT_EQ(m->state().task(a).node, NodeId(1));
  EXPECT_EQ(m->state().node(NodeId(0)).full_free_gpus, 8);
  EXPECT_EQ(m->state().reserved_gpu_milli(), 0);
  EXPECT_TRUE(m->StartingMoves().empty());
  EXPECT_EQ(m->TakeTouched(), std::vector<uint32_t>{1});
  EXPECT_EQ(m->migration_counters().completed, 1);
  // Stable: nothing more to gain, nothing moves again.
  EXPECT_EQ(*m->Defrag(d, 102), 0);
  StepAndTake(*m, 200);
  EXPECT_EQ(m->state().task(a).node, NodeId(1));
  EXPECT_TRUE(m->TakeTouched().empty());
  // Bad options are refused.
  d.partition_nodes = 1;
  EXPECT_FALSE(m->Defrag(d, 201).ok());
}

TEST(Engine, AMoveGivenUpAfterTheCyclesAllocateFreesItsTargetForAWaitingJobInTheSameCycle) {
  // Two 8-GPU nodes: the HP service a (4 GPUs) on n0, b (4 GPUs) on n1. A plan moves a to n1's
  // free half (held for it) to free n0; meanwhile c (2 replicas of 4 GPUs) waits: n0's free half
  // is one of its two. At 100 a's Standby window opens: the cycle's `standby` puts a into Standby
  // and its `allocate` finds n1's half still held, and then its `moves` — after `allocate` in this
  // list — gives the move up (a Standby replica is not moved): n1's half is free again. Nothing
  // but the move's end happened after `allocate`, and c starts in that very cycle (the actions
  // run again); another cycle at the same time changes nothing.
  using A = EngineAction;
  EngineConfig o;
  o.name = "late-move-end";
  o.grace_s = 30;
  o.standby_grace_s = 30;
  o.absorb = false;
  o.migration.acknowledged = true;
  o.actions = {A::kEvictions, A::kRestores, A::kStandby, A::kAllocate, A::kMoves};
  auto made = Engine::Create(EngineCluster(2), o);
  ASSERT_TRUE(made.ok());
  Engine& m = **made;
  ASSERT_TRUE(m.Adopt(Job(1, 1, 4, kHpPriority), {{0, NodeId(0), testing::Idx({0, 1, 2, 3})}}, 0));
  ASSERT_TRUE(m.Adopt(Job(2, 1, 4, 100), {{0, NodeId(1), testing::Idx({0, 1, 2, 3})}}, 0));
  DefragOptions d;
  d.partition_nodes = 0;
  const auto planned = m.Defrag(d, 10);
  ASSERT_TRUE(planned.ok());
  ASSERT_EQ(*planned, 1);
  const TaskId a = m.state().job(*m.JobOf(1)).tasks[0];
  ASSERT_EQ(m.StartingMoves().size(), 1u);
  ASSERT_EQ(m.StartingMoves()[0].to, NodeId(1));
  ASSERT_TRUE(m.Submit(Job(3, 2, 4, 100), SubmitMode::kEnqueue, 10).accepted);
  m.SetStandbyWindows(1, {StandbyWindowSpec{100, 1000, 1}}, 10);
  m.TakeEvents();
  EXPECT_TRUE(StepAndTake(m, 50).empty());  // c waits: n1's free half is held for the move
  EXPECT_EQ(m.Running(3), 0);
  const std::vector<EngineEvent> ev = StepAndTake(m, 100);
  std::vector<EngineEvent::Kind> kinds;
  for (const EngineEvent& e : ev) kinds.push_back(e.kind);
  EXPECT_EQ(kinds, (std::vector<EngineEvent::Kind>{EngineEvent::Kind::kStandby, EngineEvent::Kind::kMoveAborted,
                                                   EngineEvent::Kind::kStarted}));
  EXPECT_TRUE(m.state().task(a).standby);
  EXPECT_EQ(m.state().task(a).node, NodeId(0));
  EXPECT_EQ(m.migration_counters().aborted, 1);
  EXPECT_EQ(m.Running(3), 2);
  EXPECT_EQ(m.state().reserved_gpu_milli(), 0);
  EXPECT_TRUE(StepAndTake(m, 100).empty());
  EXPECT_TRUE(StepAndTake(m, 101).empty());
}

// On `m` (LiveEngine(3, 30)): a (job 1, 4 GPUs) on n0 and b (job 2, 4 GPUs) on n1; a
// defragmentation at t=10 starts the one move that frees n0 whole: a onto n1.
void MoveAOntoN1(Engine& m) {
  ASSERT_TRUE(m.Adopt(Job(1, 1, 4, 100), {{0, NodeId(0), testing::Idx({0, 1, 2, 3})}}, 0));
  ASSERT_TRUE(m.Adopt(Job(2, 1, 4, 100), {{0, NodeId(1), testing::Idx({0, 1, 2, 3})}}, 0));
  DefragOptions d;
  d.partition_nodes = 0;
  ASSERT_EQ(*m.Defrag(d, 10), 1);
  ASSERT_EQ(m.StartingMoves().size(), 1u);
  ASSERT_EQ(m.StartingMoves()[0].to, NodeId(1));
}

// A defragmentation cordons the node it empties while its moves run, and makes it ready again
// when they end — unless an admin cordoned or drained that node meanwhile: the admin's word
// holds. Found by the service's liveness run: a node drained during a defragmentation was ready
// again when the plan's move was given up, work started on it, and the next restart (which drains
// it again) evicted that work under the records of replicas that ran.
TEST(Engine, ANodeAnAdminCordonedOrDrainedDuringADefragmentationStaysSoWhenItsMovesEnd) {
  for (const bool drain : {false, true}) {
    SCOPED_TRACE(drain ? "drained" : "cordoned");
    auto m = LiveEngine(3, 30);
    ASSERT_NO_FATAL_FAILURE(MoveAOntoN1(*m));
    ASSERT_EQ(m->state().node(NodeId(0)).state, NodeState::kCordoned);  // the plan's own cordon
    const TaskId a = m->state().job(*m->JobOf(1)).tasks[0];
    if (drain) {
      m->DrainNode(NodeId(0), 20);  // a stops (returned whole); its move is given up
    } else {
      m->SetCordoned(NodeId(0), true);
      ASSERT_TRUE(m->AcknowledgeMove(a, true));  // the move completes
    }
    StepAndTake(*m, 21);
    ExpectConsistent(*m);
    EXPECT_TRUE(m->StartingMoves().empty());
    EXPECT_EQ(m->state().node(NodeId(0)).state, NodeState::kCordoned);
    EXPECT_TRUE(m->state().node(NodeId(0)).tasks.empty());
    // Nothing starts there: an 8-GPU job takes n2, a second one waits.
    ASSERT_TRUE(m->Submit(Job(5, 1, 8, 100), SubmitMode::kStartNow, 22).started);
    EXPECT_NE(m->state().task(m->state().job(*m->JobOf(5)).tasks[0]).node, NodeId(0));
    EXPECT_FALSE(m->Submit(Job(6, 1, 8, 100), SubmitMode::kStartNow, 22).started);
    StepAndTake(*m, 100);
    EXPECT_TRUE(m->state().node(NodeId(0)).tasks.empty());
  }
}

// A node drained (or evacuated) while a move onto it starts takes no work, the move's new
// instance included: the move is given up even when its new instance is then reported running,
// and the replica runs on where it was. Found by the service's liveness run: the move completed
// onto the drained node.
TEST(Engine, AMoveOntoANodeDrainedOrEvacuatedWhileItStartsIsGivenUpAndItsReplicaRunsOnWhereItWas) {
  for (const bool drain : {true, false}) {
    SCOPED_TRACE(drain ? "drained" : "evacuated");
    auto m = LiveEngine(3, 30);
    ASSERT_NO_FATAL_FAILURE(MoveAOntoN1(*m));
    const TaskId a = m->state().job(*m->JobOf(1)).tasks[0];
    m->TakeEvents();
    if (drain) m->DrainNode(NodeId(1), 20);  // b stops; a's move onto n1 is given up
    else (void)m->Evacuate(NodeId(1), 20);   // b moves away (n2); a's move onto n1 is given up
    (void)m->AcknowledgeMove(a, true);       // its new instance's "running", already on its way
    for (const auto& mv : m->StartingMoves()) {
      if (mv.task != a) {
        EXPECT_TRUE(m->AcknowledgeMove(mv.task, true));  // b's, when evacuated
      }
    }
    std::vector<EngineEvent::Kind> kinds;
    for (const EngineEvent& e : StepAndTake(*m, 21)) {
      if (e.job == 1) kinds.push_back(e.kind);
    }
    if (drain) {
      EXPECT_EQ(kinds, std::vector<EngineEvent::Kind>{EngineEvent::Kind::kMoveAborted});
    }
    ExpectConsistent(*m);
    EXPECT_TRUE(m->StartingMoves().empty());
    EXPECT_TRUE(m->state().node(NodeId(1)).tasks.empty());
    EXPECT_EQ(m->state().task(a).node, NodeId(0));
    EXPECT_EQ(m->Running(1), 1);
    EXPECT_EQ(m->Running(2), drain ? 0 : 1);
    EXPECT_EQ(m->state().reserved_gpu_milli(), 0);
    StepAndTake(*m, 100);  // stability
    EXPECT_TRUE(m->state().node(NodeId(1)).tasks.empty());
    EXPECT_EQ(m->state().task(a).node, NodeId(0));
  }
}

// Evacuating a node from which a defragmentation is moving a task already: the task is not moved
// a second time (before, the evacuation's plan moved it again, two moves of one task started at
// once — the service ordered only the first, and the second held its target's GPUs until the
// first completed). Found by the service's liveness run (its invariant that a move's new instance
// has the engine's move).
TEST(Engine, EvacuatingANodeWhoseTaskIsBeingMovedAwayMovesItOnce) {
  auto m = LiveEngine(3, 30);
  ASSERT_NO_FATAL_FAILURE(MoveAOntoN1(*m));
  const TaskId a = m->state().job(*m->JobOf(1)).tasks[0];
  EXPECT_EQ(m->Evacuate(NodeId(0), 11), 0);
  ASSERT_EQ(m->StartingMoves().size(), 1u);
  EXPECT_EQ(m->StartingMoves()[0].to, NodeId(1));
  EXPECT_EQ(m->state().reserved_gpu_milli(), 4000);
  ASSERT_TRUE(m->AcknowledgeMove(a, true));
  StepAndTake(*m, 12);
  ExpectConsistent(*m);
  EXPECT_EQ(m->state().task(a).node, NodeId(1));
  EXPECT_TRUE(m->state().node(NodeId(0)).tasks.empty());
  EXPECT_EQ(m->state().node(NodeId(0)).state, NodeState::kCordoned);  // the evacuation's
  EXPECT_EQ(m->migration_counters().aborted, 0);
  EXPECT_EQ(m->state().reserved_gpu_milli(), 0);
}

TEST(Engine, EvacuatingANodeMovesItsTasksMakeBeforeBreakAndKeepsItCordoned) {
  auto m = LiveEngine(3, 30);
  ASSERT_TRUE(m->Adopt(Job(1, 1, 4, 100), {{0, NodeId(0), testing::Idx({0, 1, 2, 3})}}, 0));
  ASSERT_TRUE(m->Adopt(Job(2, 1, 2, 100), {{0, NodeId(0), testing::Idx({4, 5})}}, 0));
  ASSERT_TRUE(m->Adopt(Job(3, 1, 4, 100), {{0, NodeId(1), testing::Idx({0, 1, 2, 3})}}, 0));
  EXPECT_EQ(m->Evacuate(NodeId(0), 10), 2);
  ExpectConsistent(*m);
  EXPECT_EQ(m->state().node(NodeId(0)).state, NodeState::kCordoned);
  ASSERT_EQ(m->StartingMoves().size(), 2u);
  for (const auto& mv : m->StartingMoves()) EXPECT_TRUE(m->AcknowledgeMove(mv.task, true));
  StepAndTake(*m, 11);
  EXPECT_TRUE(m->state().node(NodeId(0)).tasks.empty());
  EXPECT_EQ(m->state().node(NodeId(0)).state, NodeState::kCordoned);  // the drain stands
  EXPECT_EQ(m->Running(1), 1);
  EXPECT_EQ(m->Running(2), 1);
  // Nothing is left to move; a new job does not land there.
  EXPECT_EQ(m->Evacuate(NodeId(0), 12), 0);
  EXPECT_FALSE(m->Submit(Job(5, 1, 8, 100), SubmitMode::kStartNow, 12).started);  // only n0 has 8 free GPUs
  ASSERT_TRUE(m->Submit(Job(4, 1, 4, 100), SubmitMode::kStartNow, 12).started);
  EXPECT_NE(m->state().task(m->state().job(*m->JobOf(4)).tasks[0]).node, NodeId(0));
  StepAndTake(*m, 100);
  EXPECT_TRUE(m->state().node(NodeId(0)).tasks.empty());
}

// The kinds of `events` that are moves' (started, completed, given up, cancelled).
std::vector<EngineEvent::Kind> MoveKinds(const std::vector<EngineEvent>& events) {
  std::vector<EngineEvent::Kind> kinds;
  for (const EngineEvent& e : events) {
    if (e.kind == EngineEvent::Kind::kMoveStarted || e.kind == EngineEvent::Kind::kMoved ||
        e.kind == EngineEvent::Kind::kMoveAborted || e.kind == EngineEvent::Kind::kMoveCancelled) {
      kinds.push_back(e.kind);
    }
  }
  return kinds;
}

// An evacuation goes on until its node is empty: a task with no room elsewhere when the node was
// evacuated moves once room appears — at the first cycle a minute (Engine::kEvacuateRetryS) after
// the last plan, the cluster having changed since — and then the evacuation ends, the node still
// cordoned. While nothing changes, no plan is made and the driver is not woken for one.
TEST(Engine, AnEvacuationMovesATaskThatHadNoRoomOnceRoomAppearsAMinuteAfterItsLastPlan) {
  auto m = LiveEngine(2, 30);  // two 8-GPU nodes
  ASSERT_TRUE(m->Adopt(Job(1, 1, 4, 100), {{0, NodeId(0), testing::Idx({0, 1, 2, 3})}}, 0));
  ASSERT_TRUE(m->Adopt(Job(2, 1, 8, 100), {{0, NodeId(1), testing::Idx({0, 1, 2, 3, 4, 5, 6, 7})}}, 0));
  EXPECT_EQ(m->Evacuate(NodeId(0), 10), 0);  // n1 is full
  EXPECT_TRUE(m->Evacuating(NodeId(0)));
  EXPECT_TRUE(MoveKinds(StepAndTake(*m, 80)).empty());  // nothing changed: no plan
  EXPECT_EQ(m->NextDue(), std::nullopt);
  m->Finish(2, 100);  // n1 is free now
  EXPECT_EQ(m->NextDue(), std::optional<int64_t>(70));  // due since 70 (the cluster changed)
  const TaskId a = m->state().job(*m->JobOf(1)).tasks[0];
  EXPECT_EQ(MoveKinds(StepAndTake(*m, 100)), std::vector<EngineEvent::Kind>{EngineEvent::Kind::kMoveStarted});
  ASSERT_EQ(m->StartingMoves().size(), 1u);
  EXPECT_EQ(m->StartingMoves()[0].task, a);
  EXPECT_EQ(m->StartingMoves()[0].to, NodeId(1));
  ASSERT_TRUE(m->AcknowledgeMove(a, true));
  EXPECT_EQ(MoveKinds(StepAndTake(*m, 101)), std::vector<EngineEvent::Kind>{EngineEvent::Kind::kMoved});
  EXPECT_EQ(m->state().task(a).node, NodeId(1));
  EXPECT_TRUE(m->state().node(NodeId(0)).tasks.empty());
  EXPECT_FALSE(m->Evacuating(NodeId(0)));
  EXPECT_EQ(m->state().node(NodeId(0)).state, NodeState::kCordoned);
  // Stability: later cycles change nothing.
  EXPECT_TRUE(StepAndTake(*m, 200).empty());
  EXPECT_TRUE(StepAndTake(*m, 300).empty());
  EXPECT_EQ(m->state().task(a).node, NodeId(1));
}

// An evacuation that found its node's task being moved away by a defragmentation left it to that
// move; when the move is given up (its new instance failed), the evacuation moves the task itself
// a minute after its plan. Before, the task stayed on the evacuated node for ever.
TEST(Engine, AnEvacuationMovesATaskWhoseDefragmentationMoveWasGivenUp) {
  auto m = LiveEngine(3, 30);
  ASSERT_NO_FATAL_FAILURE(MoveAOntoN1(*m));
  const TaskId a = m->state().job(*m->JobOf(1)).tasks[0];
  const size_t first_move = m->StartingMoves().at(0).move;
  EXPECT_EQ(m->Evacuate(NodeId(0), 11), 0);  // a is being moved already
  m->TakeEvents();
  ASSERT_TRUE(m->AcknowledgeMove(a, false));
  EXPECT_EQ(MoveKinds(StepAndTake(*m, 12)), std::vector<EngineEvent::Kind>{EngineEvent::Kind::kMoveAborted});
  EXPECT_EQ(m->state().task(a).node, NodeId(0));
  EXPECT_TRUE(MoveKinds(StepAndTake(*m, 70)).empty());  // a minute after the evacuation's plan: 71
  EXPECT_EQ(MoveKinds(StepAndTake(*m, 71)), std::vector<EngineEvent::Kind>{EngineEvent::Kind::kMoveStarted});
  ASSERT_EQ(m->StartingMoves().size(), 1u);
  EXPECT_NE(m->StartingMoves()[0].to, NodeId(0));
  EXPECT_NE(m->StartingMoves()[0].move, first_move);  // another move, whatever its target
  ASSERT_TRUE(m->AcknowledgeMove(a, true));
  StepAndTake(*m, 72);
  EXPECT_NE(m->state().task(a).node, NodeId(0));
  EXPECT_TRUE(m->state().node(NodeId(0)).tasks.empty());
  EXPECT_FALSE(m->Evacuating(NodeId(0)));
  EXPECT_EQ(m->Running(1), 1);
  EXPECT_EQ(m->state().reserved_gpu_milli(), 0);
  EXPECT_TRUE(StepAndTake(*m, 200).empty());
}

// An admin's later word on the node ends its evacuation: uncordoned, cordoned, restored (ready
// again, its task staying), drained or failed (its task stopped), no move is planned for it when
// room appears.
TEST(Engine, UncordoningCordoningRestoringDrainingOrFailingANodeEndsItsEvacuation) {
  for (const char* what : {"uncordon", "cordon", "restore", "drain", "fail"}) {
    SCOPED_TRACE(what);
    auto m = LiveEngine(2, 30);
    ASSERT_TRUE(m->Adopt(Job(1, 1, 4, 100), {{0, NodeId(0), testing::Idx({0, 1, 2, 3})}}, 0));
    ASSERT_TRUE(m->Adopt(Job(2, 1, 8, 100), {{0, NodeId(1), testing::Idx({0, 1, 2, 3, 4, 5, 6, 7})}}, 0));
    EXPECT_EQ(m->Evacuate(NodeId(0), 10), 0);
    ASSERT_TRUE(m->Evacuating(NodeId(0)));
    const std::string w = what;
    if (w == "uncordon") m->SetCordoned(NodeId(0), false);
    if (w == "cordon") m->SetCordoned(NodeId(0), true);
    if (w == "restore") m->RestoreNode(NodeId(0));
    if (w == "drain") m->DrainNode(NodeId(0), 20);
    if (w == "fail") m->FailNode(NodeId(0), 20);
    EXPECT_FALSE(m->Evacuating(NodeId(0)));
    m->Finish(2, 30);
    EXPECT_TRUE(MoveKinds(StepAndTake(*m, 100)).empty());
    EXPECT_TRUE(m->StartingMoves().empty());
    const bool stays = w != "drain" && w != "fail";
    EXPECT_EQ(m->Running(1), stays ? 1 : 0);
    if (stays) {
      EXPECT_EQ(m->state().task(m->state().job(*m->JobOf(1)).tasks[0]).node, NodeId(0));
    }
  }
}

TEST(DefragCounters, SummedOverEnginesCountsAddAndTheLongestPlanIsKept) {
  DefragCounters a, b;
  a.plans = 3;
  a.triggered = 1;
  a.assembled = 1;
  a.vacated_planned = 5;
  a.plan_ns_max = 900;
  a.plan_ns_sum = 2000;
  b.plans = 2;
  b.vacated_planned = 4;
  b.plan_ns_max = 700;
  b.plan_ns_sum = 1000;
  a += b;
  EXPECT_EQ(a.plans, 5);
  EXPECT_EQ(a.triggered, 1);
  EXPECT_EQ(a.assembled, 1);
  EXPECT_EQ(a.vacated_planned, 9);
  EXPECT_EQ(a.plan_ns_max, 900);
  EXPECT_EQ(a.plan_ns_sum, 3000);
  b += a;
  EXPECT_EQ(b.plan_ns_max, 900);
}

}  // namespace
}  // namespace estuary
