// An engine rebuilt in place of another (the service's compaction: its jobs known in the old
// engine's order, the running ones adopted where they run, the waiting ones submitted again in
// queue order) decides as the old one would when it inherits from it (Engine::Inherit with
// `jobs`): waits keep counting from when a job was queued, a job evicted by a queue's Reclaim
// still may not borrow nor one it shrank grow, a queue that just got capacity back keeps its
// cooldown, and time-based fair shares keep their usage history. Each test also runs the rebuild
// without inheriting the jobs, to show what the inheritance changes.
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"

#include "tests/testing/engine_fixtures.h"
#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

constexpr int64_t kG = 1000;  // one GPU, milli

// A new engine over `cluster` (the old one's nodes) with old's configuration, as the service
// compacts its engine: the nodes down in old failed, old's live jobs known in old's order
// (Engine::Know), its running ones adopted where they run, its waiting ones submitted at now_s
// in its queue order (`specs`: each job as its driver knows it), then Inherit(old, jobs).
std::unique_ptr<Engine> Rebuilt(const Engine& old, ClusterState cluster, const std::map<uint32_t, EngineJob>& specs,
                                int64_t now_s, bool jobs) {
  auto made = Engine::Create(std::move(cluster), old.options());
  EXPECT_TRUE(made.ok()) << made.status().message();
  Engine& e = **made;
  const ClusterState& s = old.state();
  for (const Node& n : s.nodes()) {
    if (n.state == NodeState::kDown) e.FailNode(n.id, now_s);
  }
  std::vector<std::pair<JobId, uint32_t>> live;
  for (const auto& [id, spec] : specs) {
    const std::optional<JobId> j = old.JobOf(id);
    if (j && (old.Running(id) > 0 || std::ranges::count(old.QueuedInOrder(), id) > 0)) live.emplace_back(*j, id);
  }
  std::sort(live.begin(), live.end());
  for (const auto& [j, id] : live) EXPECT_TRUE(e.Know(specs.at(id), now_s)) << id;
  for (const auto& [id, spec] : specs) {
    const std::optional<JobId> j = old.JobOf(id);
    if (!j || old.Running(id) == 0) continue;
    std::vector<Engine::Placement> placements;
    for (size_t r = 0; r < s.job(*j).tasks.size(); ++r) {
      const Task& t = s.task(s.job(*j).tasks[r]);
      if (t.state == TaskState::kBound) placements.push_back({r, t.node, t.gpus, t.standby, t.borrowed});
    }
    EXPECT_TRUE(e.Adopt(spec, placements, s.job(*j).started_at_s)) << id;
  }
  for (uint32_t id : old.QueuedInOrder()) EXPECT_TRUE(e.Submit(specs.at(id), SubmitMode::kEnqueue, now_s).accepted) << id;
  e.Inherit(old, jobs);
  return std::move(*made);
}

// What a cycle's events say, job by job (their placements aside: the engines' task ids differ).
std::vector<std::pair<EngineEvent::Kind, uint32_t>> Said(const std::vector<EngineEvent>& events) {
  std::vector<std::pair<EngineEvent::Kind, uint32_t>> out;
  for (const EngineEvent& e : events) out.emplace_back(e.kind, e.job);
  return out;
}

// The nodes each replica of `job` runs on, by name.
std::vector<std::string> NodesOf(const Engine& m, uint32_t job) {
  std::vector<std::string> out;
  const ClusterState& s = m.state();
  for (TaskId t : s.job(*m.JobOf(job)).tasks) {
    if (s.task(t).state == TaskState::kBound) out.push_back(s.node(s.task(t).node).spec.name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(EngineInherit, ARebuiltEngineKeepsAGangsRelaxedRequiredLevelAndStartsItAsTheOldOneWould) {
  // Four nodes, ASWs {n0, n1} and {n2, n3}; jobs 1, 2 and 4 run on n0, n2 and n1. Gang 3 (two
  // nodes, one ASW required, accepting any placement after 100 s) is queued at 0; at 100 it
  // accepts any placement but only n3 is free. The engine is rebuilt at 200. At 250 job 4 ends:
  // the gang starts at once on n1 and n3, as in the old engine. Rebuilt without the jobs'
  // inheritance, it is queued anew at 200 requiring one ASW, which it has nowhere until 300.
  EngineConfig o;
  o.name = "relax";
  o.requeue = true;
  std::map<uint32_t, EngineJob> specs;
  for (uint32_t id : {1u, 2u, 4u}) specs[id] = testing::WholeGpuJob(id, 1, 8, 100);
  EngineJob gang = testing::WholeGpuJob(3, 2, 8, 100);
  gang.plane = "data";
  gang.required_level = "asw";
  gang.required_max_wait_s = 100;
  specs[3] = gang;
  const auto all = testing::Idx({0, 1, 2, 3, 4, 5, 6, 7});
  for (bool jobs : {true, false}) {
    auto made = Engine::Create(testing::TwoAswCluster(4), o);
    ASSERT_TRUE(made.ok());
    Engine& old = **made;
    ASSERT_TRUE(old.Adopt(specs[1], {{0, NodeId(0), all}}, 0));
    ASSERT_TRUE(old.Adopt(specs[2], {{0, NodeId(2), all}}, 0));
    ASSERT_TRUE(old.Adopt(specs[4], {{0, NodeId(1), all}}, 0));
    ASSERT_TRUE(old.Submit(gang, SubmitMode::kEnqueue, 0).accepted);
    EXPECT_TRUE(old.RunCycle(0).empty());
    EXPECT_TRUE(old.RunCycle(100).empty());
    EXPECT_EQ(old.state().job(*old.JobOf(3)).spec.topology.required_level, -1);  // relaxed, no room
    auto rebuilt = Rebuilt(old, testing::TwoAswCluster(4), specs, 200, jobs);
    EXPECT_TRUE(rebuilt->RunCycle(200).empty());
    ASSERT_TRUE(rebuilt->state().CheckInvariants().ok());
    for (Engine* e : {&old, rebuilt.get()}) e->Finish(4, 250);
    const auto at250 = Said(old.RunCycle(250));
    ASSERT_EQ(at250, (std::vector<std::pair<EngineEvent::Kind, uint32_t>>{{EngineEvent::Kind::kStarted, 3}}));
    EXPECT_EQ(NodesOf(old, 3), (std::vector<std::string>{"n1", "n3"}));
    if (jobs) {
      EXPECT_EQ(Said(rebuilt->RunCycle(250)), at250);
      EXPECT_EQ(NodesOf(*rebuilt, 3), NodesOf(old, 3));
    } else {
      EXPECT_TRUE(rebuilt->RunCycle(250).empty());
      EXPECT_EQ(rebuilt->Explain(3, 250).topology, "requires one asw; accepts any placement at t=300");
      EXPECT_EQ(Said(rebuilt->RunCycle(300)), at250);
    }
    ASSERT_TRUE(rebuilt->state().CheckInvariants().ok());
    // Stable: more cycles change nothing.
    for (int64_t t : {300, 301, 5000}) EXPECT_TRUE(rebuilt->RunCycle(t).empty()) << t;
  }
}

TEST(EngineInherit, ARequeuedSpanningGangResumesInTheAswsItRanInAfterTheRebuild) {
  // Gang 1 (8 x 8 GPUs, preferring one ASW, holding survivors) runs on n0-n7 (asw0, asw1); jobs
  // 2-6 on n8-n12. n3 fails at 10: the gang is requeued whole and remembers its survivors
  // (n0-n2, n4-n7), but only 7 nodes are free. Rebuilt at 20. At 30 jobs 2 (n8, asw2) and 4
  // (n10, asw4) end: 9 nodes free. Resuming, the gang takes asw1's 4 and asw0's 3 first, then
  // one more: three ASWs, as in the old engine. Rebuilt without the inheritance it starts afresh
  // by the spanning rule's entropy: asw2 (1), asw4 (1), asw1 (4), asw0 (2) — four ASWs.
  EngineConfig o;
  o.name = "resume";
  o.requeue = true;
  o.hold_survivors = true;
  std::map<uint32_t, EngineJob> specs;
  EngineJob gang = testing::WholeGpuJob(1, 8, 8, 100);
  gang.plane = "data";
  gang.preferred_level = "asw";
  specs[1] = gang;
  for (uint32_t id = 2; id <= 6; ++id) specs[id] = testing::WholeGpuJob(id, 1, 8, 100);
  const auto all = testing::Idx({0, 1, 2, 3, 4, 5, 6, 7});
  const auto asws = [](const Engine& m) {
    std::set<std::string> out;
    const ClusterState& s = m.state();
    const PlaneId data = *s.topology().FindPlane("data");
    for (TaskId t : s.job(*m.JobOf(1)).tasks) {
      if (s.task(t).state == TaskState::kBound) out.insert(s.topology().domain(s.topology().NodeDomain(s.task(t).node, data, 0)).name);
    }
    return out.size();
  };
  for (bool jobs : {true, false}) {
    auto made = Engine::Create(testing::FiveAswCluster(), o);
    ASSERT_TRUE(made.ok());
    Engine& old = **made;
    std::vector<Engine::Placement> on;
    for (uint32_t i = 0; i < 8; ++i) on.push_back({i, NodeId(i), all});
    ASSERT_TRUE(old.Adopt(gang, on, 0));
    for (uint32_t id = 2; id <= 6; ++id) ASSERT_TRUE(old.Adopt(specs[id], {{0, NodeId(id + 6), all}}, 0));
    old.FailNode(NodeId(3), 10);
    old.RunCycle(10);
    ASSERT_EQ(old.Running(1), 0);
    ASSERT_EQ(old.state().job(*old.JobOf(1)).resume_nodes.size(), 7u);
    auto rebuilt = Rebuilt(old, testing::FiveAswCluster(), specs, 20, jobs);
    EXPECT_TRUE(rebuilt->RunCycle(20).empty());
    for (Engine* e : {&old, rebuilt.get()}) {
      e->Finish(2, 30);
      e->Finish(4, 30);
    }
    ASSERT_EQ(Said(old.RunCycle(30)), (std::vector<std::pair<EngineEvent::Kind, uint32_t>>{{EngineEvent::Kind::kStarted, 1}}));
    EXPECT_EQ(asws(old), 3u);
    const auto at30 = Said(rebuilt->RunCycle(30));
    ASSERT_TRUE(rebuilt->state().CheckInvariants().ok());
    EXPECT_EQ(at30, (std::vector<std::pair<EngineEvent::Kind, uint32_t>>{{EngineEvent::Kind::kStarted, 1}}));
    ASSERT_EQ(rebuilt->Running(1), 8);
    if (jobs) {
      EXPECT_EQ(NodesOf(*rebuilt, 1), NodesOf(old, 1));
    } else {
      EXPECT_EQ(asws(*rebuilt), 4u);
    }
    for (int64_t t : {31, 5000}) EXPECT_TRUE(rebuilt->RunCycle(t).empty()) << t;
  }
}

using testing::Q;

EngineJob NodeJob(uint32_t id, const std::string& queue) {
  EngineJob j = testing::WholeGpuJob(id, 1, 8, 300, true);
  j.queue = queue;
  return j;
}

// Nodes (8-GPU jobs) each queue holds.
std::map<std::string, int64_t> Held(const Engine& m) {
  std::map<std::string, int64_t> out;
  const std::vector<QueueSpec>& qs = m.options().queues;
  for (size_t i = 0; i < qs.size(); ++i) out[qs[i].name] = m.state().queue_usage(i)[kQueueGpu] / (8 * kG);
  return out;
}

TEST(EngineInherit, AJobEvictedByAQueuesReclaimStillMayNotBorrowInTheRebuiltEngine) {
  // 8 nodes; org R (4 nodes) has teams v and r (2 each), org P has team p (4). v runs four 1-node
  // jobs, p four. At 10 r queues two: two of v's jobs are evicted for it (requeued: they may not
  // borrow until 70 + reborrow_s, 3,670). Rebuilt at 80. At 100 p's jobs 10 and 11 end: two
  // nodes are idle, but v's evicted jobs may start only within v's guarantee, which v's two
  // running jobs hold, so they wait — as in the old engine — until 3,670. Without the jobs'
  // inheritance they borrow the idle nodes at once.
  EngineConfig o;
  o.name = "queues";
  o.grace_s = 60;
  o.requeue = true;
  o.queues = {Q("R", 32), Q("v", 16, 1, "R"), Q("r", 16, 1, "R"), Q("P", 32), Q("p", 32, 1, "P")};
  std::map<uint32_t, EngineJob> specs;
  for (uint32_t i = 0; i < 4; ++i) specs[1 + i] = NodeJob(1 + i, "v");
  for (uint32_t i = 0; i < 4; ++i) specs[10 + i] = NodeJob(10 + i, "p");
  for (uint32_t i = 0; i < 2; ++i) specs[20 + i] = NodeJob(20 + i, "r");
  for (bool jobs : {true, false}) {
    auto made = Engine::Create(testing::TwoAswCluster(8), o);
    ASSERT_TRUE(made.ok());
    Engine& old = **made;
    for (uint32_t id : {1u, 2u, 3u, 4u, 10u, 11u, 12u, 13u}) ASSERT_TRUE(old.Submit(specs[id], SubmitMode::kEnqueue, 0).accepted);
    old.RunCycle(0);
    for (uint32_t id : {20u, 21u}) ASSERT_TRUE(old.Submit(specs[id], SubmitMode::kEnqueue, 10).accepted);
    old.RunCycle(10);
    old.RunCycle(70);
    ASSERT_EQ(Held(old), (std::map<std::string, int64_t>{{"P", 4}, {"R", 4}, {"p", 4}, {"r", 2}, {"v", 2}}));
    ASSERT_EQ(old.queued(), 2u);  // v's two evicted jobs
    auto rebuilt = Rebuilt(old, testing::TwoAswCluster(8), specs, 80, jobs);
    EXPECT_TRUE(rebuilt->RunCycle(80).empty());
    for (Engine* e : {&old, rebuilt.get()}) {
      e->Finish(10, 100);
      e->Finish(11, 100);
    }
    EXPECT_TRUE(old.RunCycle(100).empty());
    EXPECT_EQ(Held(old), (std::map<std::string, int64_t>{{"P", 2}, {"R", 4}, {"p", 2}, {"r", 2}, {"v", 2}}));
    const std::vector<EngineEvent> at100 = rebuilt->RunCycle(100);
    ASSERT_TRUE(rebuilt->state().CheckInvariants().ok());
    if (jobs) {
      EXPECT_TRUE(at100.empty());
      EXPECT_EQ(Held(*rebuilt), Held(old));
      for (int64_t t : {101, 3669}) {
        EXPECT_TRUE(old.RunCycle(t).empty()) << t;
        EXPECT_TRUE(rebuilt->RunCycle(t).empty()) << t;
      }
      // The period over, they borrow the idle nodes in both.
      const auto started = Said(old.RunCycle(3670));
      EXPECT_EQ(started.size(), 2u);
      EXPECT_EQ(Said(rebuilt->RunCycle(3670)), started);
      EXPECT_EQ(Held(*rebuilt), Held(old));
    } else {
      EXPECT_EQ(Said(at100).size(), 2u);
      EXPECT_EQ(Held(*rebuilt).at("v"), 4);
    }
  }
}

TEST(EngineInherit, AQueueThatJustGotCapacityBackKeepsItsCooldownInTheRebuiltEngine) {
  // 8 nodes; org R (4 nodes) has team a (guaranteed 2 nodes) and team b (none), org P has team c
  // (4). c runs eight 1-node jobs. At 10 a queues four: with b idle, a is entitled to all of R's
  // 4 and reclaims them from c; a and R are then not reclaimed from until 310 (cooldown_s 300)
  // but for a guarantee. Rebuilt at 80. At 100 b queues two: b is entitled to half of R's 2
  // nodes above a's guarantee, 1 node, which a holds above its own entitlement (3), but a is in
  // its cooldown and b has no guarantee: b waits until 310, then reclaims one node from a — in
  // the old engine and the rebuilt one. Rebuilt without the inheritance, a's cooldown is gone
  // and b reclaims at 100.
  EngineConfig o;
  o.name = "cooldown";
  o.grace_s = 60;
  o.requeue = true;
  o.queues = {Q("R", 32), Q("a", 16, 1, "R"), Q("b", 0, 1, "R"), Q("P", 32), Q("c", 32, 1, "P")};
  std::map<uint32_t, EngineJob> specs;
  for (uint32_t i = 0; i < 8; ++i) specs[30 + i] = NodeJob(30 + i, "c");
  for (uint32_t i = 0; i < 4; ++i) specs[10 + i] = NodeJob(10 + i, "a");
  for (uint32_t i = 0; i < 2; ++i) specs[20 + i] = NodeJob(20 + i, "b");
  const auto reclaims = [](const std::vector<EngineEvent>& ev) {
    return std::count_if(ev.begin(), ev.end(), [](const EngineEvent& e) { return e.kind == EngineEvent::Kind::kReclaim; });
  };
  for (bool jobs : {true, false}) {
    auto made = Engine::Create(testing::TwoAswCluster(8), o);
    ASSERT_TRUE(made.ok());
    Engine& old = **made;
    for (uint32_t i = 0; i < 8; ++i) ASSERT_TRUE(old.Submit(specs[30 + i], SubmitMode::kEnqueue, 0).accepted);
    old.RunCycle(0);
    for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(old.Submit(specs[10 + i], SubmitMode::kEnqueue, 10).accepted);
    EXPECT_EQ(reclaims(old.RunCycle(10)), 4);
    old.RunCycle(70);
    ASSERT_EQ(Held(old), (std::map<std::string, int64_t>{{"P", 4}, {"R", 4}, {"a", 4}, {"b", 0}, {"c", 4}}));
    auto rebuilt = Rebuilt(old, testing::TwoAswCluster(8), specs, 80, jobs);
    EXPECT_TRUE(rebuilt->RunCycle(80).empty());
    for (Engine* e : {&old, rebuilt.get()}) {
      for (uint32_t i = 0; i < 2; ++i) ASSERT_TRUE(e->Submit(specs[20 + i], SubmitMode::kEnqueue, 100).accepted);
    }
    EXPECT_EQ(reclaims(old.RunCycle(100)), 0);
    const int64_t at100 = reclaims(rebuilt->RunCycle(100));
    ASSERT_TRUE(rebuilt->state().CheckInvariants().ok());
    if (jobs) {
      EXPECT_EQ(at100, 0);
      for (int64_t t : {200, 309}) {
        EXPECT_TRUE(old.RunCycle(t).empty()) << t;
        EXPECT_TRUE(rebuilt->RunCycle(t).empty()) << t;
      }
      EXPECT_EQ(reclaims(old.RunCycle(310)), 1);
      EXPECT_EQ(reclaims(rebuilt->RunCycle(310)), 1);
      old.RunCycle(370);
      rebuilt->RunCycle(370);
      EXPECT_EQ(Held(old), (std::map<std::string, int64_t>{{"P", 4}, {"R", 4}, {"a", 3}, {"b", 1}, {"c", 4}}));
      EXPECT_EQ(Held(*rebuilt), Held(old));
      for (int64_t t : {371, 5000}) EXPECT_TRUE(rebuilt->RunCycle(t).empty()) << t;
    } else {
      EXPECT_EQ(at100, 1);
    }
  }
}

TEST(EngineInherit, AnElasticJobAQueuesReclaimShrankRegrowsOnlyAfterItsCooldownInTheRebuiltEngine) {
  // 8 nodes; a and b are guaranteed 2 nodes each. a's elastic job 1 (2..8 nodes, steps of 2)
  // holds 6 and b's job 2 two; b queues job 3 (2 nodes) at 100: a rebalance shrinks job 1 to 4
  // at 160, and it may not grow before 460 (cooldown_s 300). Rebuilt at 180. At 200 job 3 ends:
  // two nodes idle, and a's fair share is 6 again (b wants 2), but job 1 waits until 460 in the
  // old engine and in the rebuilt one (which is due then). Without the inheritance it grows at
  // once.
  EngineConfig o;
  o.name = "regrow";
  o.grace_s = 60;
  o.requeue = true;
  o.queues = {Q("a", 16), Q("b", 16)};
  std::map<uint32_t, EngineJob> specs;
  EngineJob elastic = testing::WholeGpuJob(1, 8, 8, 300, true);
  elastic.queue = "a";
  elastic.min_replicas = 2;
  elastic.step = 2;
  specs[1] = elastic;
  for (uint32_t id : {2u, 3u}) {
    specs[id] = testing::WholeGpuJob(id, 2, 8, 300, true);
    specs[id].queue = "b";
  }
  for (bool jobs : {true, false}) {
    auto made = Engine::Create(testing::TwoAswCluster(8), o);
    ASSERT_TRUE(made.ok());
    Engine& old = **made;
    for (uint32_t id : {1u, 2u}) ASSERT_TRUE(old.Submit(specs[id], SubmitMode::kEnqueue, 0).accepted);
    old.RunCycle(0);
    ASSERT_TRUE(old.Submit(specs[3], SubmitMode::kEnqueue, 100).accepted);
    old.RunCycle(100);
    old.RunCycle(160);
    ASSERT_EQ(Held(old), (std::map<std::string, int64_t>{{"a", 4}, {"b", 4}}));
    auto rebuilt = Rebuilt(old, testing::TwoAswCluster(8), specs, 180, jobs);
    EXPECT_TRUE(rebuilt->RunCycle(180).empty());
    for (Engine* e : {&old, rebuilt.get()}) e->Finish(3, 200);
    EXPECT_TRUE(old.RunCycle(200).empty());
    const auto at200 = Said(rebuilt->RunCycle(200));
    ASSERT_TRUE(rebuilt->state().CheckInvariants().ok());
    if (jobs) {
      EXPECT_TRUE(at200.empty());
      EXPECT_EQ(rebuilt->NextDue(), old.NextDue());
      EXPECT_EQ(rebuilt->NextDue(), std::optional<int64_t>(460));
      EXPECT_TRUE(old.RunCycle(459).empty());
      EXPECT_TRUE(rebuilt->RunCycle(459).empty());
      const auto at460 = Said(old.RunCycle(460));
      EXPECT_EQ(at460, (std::vector<std::pair<EngineEvent::Kind, uint32_t>>{{EngineEvent::Kind::kGrown, 1}}));
      EXPECT_EQ(Said(rebuilt->RunCycle(460)), at460);
      EXPECT_EQ(Held(*rebuilt), (std::map<std::string, int64_t>{{"a", 6}, {"b", 2}}));
    } else {
      EXPECT_EQ(at200, (std::vector<std::pair<EngineEvent::Kind, uint32_t>>{{EngineEvent::Kind::kGrown, 1}}));
    }
    for (int64_t t : {461, 5000}) EXPECT_TRUE(rebuilt->RunCycle(t).empty()) << t;
  }
}

TEST(EngineInherit, TimeBasedFairSharesKeepTheirUsageHistoryInTheRebuiltEngine) {
  // 4 nodes (32 GPUs); teams a and b (no guarantees, weight 1 each), usage half-life one hour.
  // a runs four 1-node jobs from 0. At 10,000 two of them end and b queues four. The engine is
  // rebuilt then (its last refresh of the usage was at the cycle at 5,000). a's weight for the
  // surplus is 1 x 2^(-1 / 0.5) = 1/4 (all of the decayed usage is a's; half the weights), b's
  // 1: a's fair share is 32 x 1/5 = 6.4 GPUs, b's 25.6. The cycle at 10,000 starts two of b's
  // jobs on the idle nodes (b holds 16, short of 25.6 by more than a tenth), and rebalances: one
  // more job of b keeps b within its share (24), and a holds 16, 9.6 above its share, so one
  // job of a is reclaimed for it — in the old engine and in the rebuilt one. Rebuilt without
  // the inheritance, a's history is gone: fair shares 16 and 16, and nothing is reclaimed.
  EngineConfig o;
  o.name = "decay";
  o.grace_s = 60;
  o.requeue = true;
  o.queues = {Q("a", 0), Q("b", 0)};
  o.sharing.usage_half_life_s = 3600;
  std::map<uint32_t, EngineJob> specs;
  for (uint32_t i = 0; i < 4; ++i) specs[1 + i] = NodeJob(1 + i, "a");
  for (uint32_t i = 0; i < 4; ++i) specs[10 + i] = NodeJob(10 + i, "b");
  for (bool jobs : {true, false}) {
    auto made = Engine::Create(testing::TwoAswCluster(4), o);
    ASSERT_TRUE(made.ok());
    Engine& old = **made;
    for (uint32_t id : {1u, 2u, 3u, 4u}) ASSERT_TRUE(old.Submit(specs[id], SubmitMode::kEnqueue, 0).accepted);
    EXPECT_EQ(Said(old.RunCycle(0)).size(), 4u);
    EXPECT_TRUE(old.RunCycle(5000).empty());
    old.Finish(1, 10000);
    old.Finish(2, 10000);
    for (uint32_t id : {10u, 11u, 12u, 13u}) ASSERT_TRUE(old.Submit(specs[id], SubmitMode::kEnqueue, 10000).accepted);
    auto rebuilt = Rebuilt(old, testing::TwoAswCluster(4), specs, 10000, jobs);
    const auto said = Said(old.RunCycle(10000));
    const auto reclaims = std::count_if(said.begin(), said.end(), [](const auto& e) { return e.first == EngineEvent::Kind::kReclaim; });
    const auto starts = std::count_if(said.begin(), said.end(), [](const auto& e) { return e.first == EngineEvent::Kind::kStarted; });
    EXPECT_EQ(reclaims, 1);
    EXPECT_EQ(starts, 2);
    const auto rebuilt_said = Said(rebuilt->RunCycle(10000));
    ASSERT_TRUE(rebuilt->state().CheckInvariants().ok());
    old.RunCycle(10060);
    rebuilt->RunCycle(10060);
    EXPECT_EQ(Held(old), (std::map<std::string, int64_t>{{"a", 1}, {"b", 3}}));
    if (jobs) {
      EXPECT_EQ(rebuilt_said, said);
      EXPECT_EQ(Held(*rebuilt), Held(old));
    } else {
      EXPECT_EQ(rebuilt_said.size(), 2u);  // the two starts only
      EXPECT_EQ(Held(*rebuilt), (std::map<std::string, int64_t>{{"a", 2}, {"b", 2}}));
    }
    // Stable: more cycles change nothing.
    for (int64_t t : {10061, 10400}) EXPECT_TRUE(rebuilt->RunCycle(t).empty()) << t;
  }
}

}  // namespace
}  // namespace estuary
