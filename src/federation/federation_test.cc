// The federation layer as a specification: the capacity summary against a from-scratch count, and
// the fed-scheduler's choices over small in-process members whose state each test builds through
// the members' own Submit.
#include <map>
#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/rng.h"
#include "federation/capacity_summary.h"
#include "federation/fed_scheduler.h"
#include "federation/in_process_member.h"
#include "tests/testing/engine_fixtures.h"
#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using ::testing::HasSubstr;

ClusterState MemberCluster(int nodes, const std::string& model = "H800") { return testing::TwoAswCluster(nodes, model); }
FedJob Job(uint32_t id, int replicas, int gpus, int32_t priority, bool preemptible = false) {
  return testing::WholeGpuJob(id, replicas, gpus, priority, preemptible);
}

std::unique_ptr<InProcessMember> Member(const std::string& name, ClusterState cluster, int64_t period = 0) {
  MemberOptions o;
  o.name = name;
  o.summary.thresholds = {100, 300, 800, 900};
  o.summary_period_s = period;
  o.absorb = false;
  auto m = InProcessMember::Create(std::move(cluster), o);
  EXPECT_TRUE(m.ok());
  return std::move(*m);
}

// Fills `m` with `count` single-node jobs of 8 GPUs (ids from `first`) at time `t`.
void Fill(InProcessMember& m, uint32_t first, int count, int32_t priority, bool preemptible, int64_t t) {
  for (int k = 0; k < count; ++k) {
    const Admission a = m.Submit(Job(first + static_cast<uint32_t>(k), 1, 8, priority, preemptible), AdmitMode::kStartNow, t);
    ASSERT_TRUE(a.started) << a.reason;
  }
}

int64_t Evicted(const std::vector<MemberEvent>& events) {
  int64_t n = 0;
  for (const MemberEvent& e : events) n += e.kind == MemberEvent::Kind::kReturned || e.kind == MemberEvent::Kind::kShrunk;
  return n;
}

// ---- CapacitySummary ----

TEST(CapacitySummary, IncrementalRefreshEqualsARebuildAfterRandomChurn) {
  testing::AswCluster a({"a", "a", "a", "b", "b", "c", "c", "c"});
  ClusterState& s = a.c.state;
  Rng rng(7);
  std::vector<TaskId> tasks;
  for (int i = 0; i < 60; ++i) {
    JobSpec js;
    js.name = "j" + std::to_string(i);
    js.priority = static_cast<int32_t>(100 * (1 + rng.Uniform(9)));
    js.preemptible = rng.Uniform(2) == 0;
    const JobId j = s.AddJob(js);
    tasks.push_back(s.AddTask(j, js.name, testing::Req().Gpus(1 + static_cast<int>(rng.Uniform(4))).Cpu(1000), js.priority));
  }
  CapacitySummary inc;
  inc.Build(s, {{300, 500, 800}});
  for (int round = 0; round < 200; ++round) {
    const TaskId t = tasks[rng.Uniform(tasks.size())];
    if (s.task(t).state == TaskState::kBound) {
      s.Unbind(t);
    } else {
      const NodeId n(static_cast<uint32_t>(rng.Uniform(s.num_nodes())));
      GpuIndices g;
      for (int i = 0; i < kMaxGpusPerNode && g.size < s.task(t).req.gpu_count; ++i) {
        if (i < s.node(n).spec.gpu_count && s.node(n).gpu_free[i] == kMilliPerGpu) g.Push(i);
      }
      if (g.size == s.task(t).req.gpu_count && s.CanBind(t, n, g)) s.Bind(t, n, g);
    }
    if (round % 7 == 0) s.SetNodeState(NodeId(static_cast<uint32_t>(rng.Uniform(s.num_nodes()))), rng.Uniform(3) == 0 ? NodeState::kCordoned : NodeState::kReady);
    inc.Refresh(s);
    CapacitySummary fresh;
    fresh.Build(s, {{300, 500, 800}});
    for (int t = 0; t <= fresh.capacity_index(); ++t) {
      for (int k = 1; k <= 8; ++k) {
        GangQuery q;
        q.gpus = k;
        q.model_bits = ~uint64_t{0};
        q.replicas = 1000;  // never "enough": the full count is compared
        ASSERT_EQ(inc.Placeable(q, t), fresh.Placeable(q, t)) << "round " << round << " t " << t << " k " << k;
        q.level = std::pair{a.data, 0};
        ASSERT_EQ(inc.Placeable(q, t), fresh.Placeable(q, t)) << "round " << round << " t " << t << " k " << k;
      }
    }
  }
}

TEST(CapacitySummary, CountsOnlyPreemptibleWorkBelowTheThresholdAsReclaimable) {
  testing::ClusterBuilder c;
  c.AddNode("n0", testing::Gpus(8));
  c.AddNode("n1", testing::Gpus(8));
  auto run = [&](const std::string& name, int gpus, int32_t prio, bool preemptible, int node) {
    JobSpec js;
    js.name = name;
    js.priority = prio;
    js.preemptible = preemptible;
    const TaskId t = c.state.AddTask(c.state.AddJob(js), name, testing::Req().Gpus(gpus), prio);
    GpuIndices g;
    for (int i = 0; i < 8 && g.size < gpus; ++i) {
      if (c.state.node(NodeId(static_cast<uint32_t>(node))).gpu_free[i] == kMilliPerGpu) g.Push(i);
    }
    c.state.Bind(t, NodeId(static_cast<uint32_t>(node)), g);
  };
  run("lp", 4, 300, true, 0);      // n0: 4 GPUs of preemptible LP
  run("dev", 2, 500, false, 0);    // n0: 2 GPUs of non-preemptible dev
  run("spot", 8, 100, true, 1);    // n1: all GPUs of spot
  CapacitySummary s;
  s.Build(c.state, {{200, 400, 800}});
  GangQuery q;
  q.model_bits = ~uint64_t{0};
  q.gpus = 1;
  EXPECT_EQ(s.Placeable(q, 0), 2);       // idle: n0's 2 free GPUs
  EXPECT_EQ(s.Placeable(q, 1), 2 + 8);   // below 200: + the spot node
  EXPECT_EQ(s.Placeable(q, 2), 6 + 8);   // below 400: + the LP GPUs
  EXPECT_EQ(s.Placeable(q, 3), 6 + 8);   // the dev GPUs are never reclaimable
  EXPECT_EQ(s.Placeable(q, s.capacity_index()), 16);
  q.gpus = 8;
  q.replicas = 1;
  q.priority = 800;
  const ProbeResult p = s.Probe(q, 100);
  EXPECT_TRUE(p.ever);
  EXPECT_FALSE(p.idle);
  EXPECT_TRUE(p.reclaim);
  EXPECT_EQ(p.victim_level, 1);  // the spot node suffices: victims below 200
  EXPECT_EQ(p.reclaim_gpus, 8);
}

TEST(CapacitySummary, ANodeOutsideAPlaneCountsForTheMemberButForNoDomainOfThatPlane) {
  testing::ClusterBuilder c;
  const PlaneId data = *c.state.topology().AddPlane("data", {"asw", "node"});
  const PlaneId param = *c.state.topology().AddPlane("param", {"rdma_pod", "node"});
  const NodeId n0 = c.AddNode("n0", testing::Gpus(8));
  const NodeId n1 = c.AddNode("n1", testing::Gpus(8));  // in plane "param" only
  ASSERT_TRUE(c.state.AssignDomains(n0, data, std::vector<std::string>{"asw0"}).ok());
  ASSERT_TRUE(c.state.AssignDomains(n1, param, std::vector<std::string>{"pod0"}).ok());
  CapacitySummary s;
  s.Build(c.state, {{500}});
  GangQuery q;
  q.model_bits = ~uint64_t{0};
  q.gpus = 8;
  EXPECT_EQ(s.Placeable(q, 0), 2);
  q.level = s.ResolveLevel("data", "asw");
  ASSERT_TRUE(q.level.has_value());
  EXPECT_EQ(s.Placeable(q, 0), 1);  // only n0 is in asw0
  GangQuery pod = q;
  pod.level = s.ResolveLevel("param", "rdma_pod");
  EXPECT_EQ(s.Placeable(pod, 0), 1);  // only n1 is in pod0
  // The unplaced node's changes refresh without touching any domain.
  JobSpec js;
  js.name = "j";
  const TaskId t = c.state.AddTask(c.state.AddJob(js), "j", testing::Req().Gpus(8), 0);
  GpuIndices g;
  for (int i = 0; i < 8; ++i) g.Push(i);
  c.state.Bind(t, NodeId(1), g);
  s.Refresh(c.state);
  EXPECT_EQ(s.Placeable(q, 0), 1);
  q.level.reset();
  EXPECT_EQ(s.Placeable(q, 0), 1);
}

// ---- InProcessMember ----

// A stopwatch that moves 1,000 ns each time it is read.
class TickingStopwatch final : public Stopwatch {
 public:
  int64_t ElapsedNs() const override { return now_ += 1000; }

 private:
  mutable int64_t now_ = 0;
};

TEST(InProcessMember, ItsStopwatchSeparatesSchedulingFromTheSummaryPublicationsInsideIt) {
  const TickingStopwatch clock;
  MemberOptions o;
  o.name = "a";
  o.absorb = false;
  o.summary_period_s = 0;  // every Submit publishes
  o.stopwatch = &clock;
  auto created = InProcessMember::Create(MemberCluster(2), o);
  ASSERT_TRUE(created.ok());
  std::unique_ptr<InProcessMember> m = std::move(*created);
  const Admission a = m->Submit(Job(1, 1, 8, 300), AdmitMode::kStartNow, 0);
  ASSERT_TRUE(a.started);
  // Reads: Submit begins (1000), Publish begins (2000) and ends (3000), Submit ends (4000).
  EXPECT_EQ(m->timing().upkeep_ns, 1000);
  EXPECT_EQ(m->timing().schedule_ns, 4000 - 1000 - 1000);
  EXPECT_EQ(m->timing().publishes, 1);
  m->Publish(1);  // a publication from outside is upkeep only
  EXPECT_EQ(m->timing().upkeep_ns, 2000);
  EXPECT_EQ(m->timing().schedule_ns, 2000);
  EXPECT_EQ(m->timing().publishes, 2);
}

// With an exit model (Alibaba: mean 13 s, P95 48 s, bounded by 60 s), a Reclaim's job starts when
// the later of its two victims has exited, not at the bound; an invalid model fails Create.
TEST(InProcessMember, AReclaimEndsWhenItsLastVictimHasExited) {
  int earlier = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    MemberOptions o;
    o.name = "m";
    o.seed = seed;
    o.absorb = false;
    o.exit_mean_s = 13;
    o.exit_p95_s = 48;
    auto created = InProcessMember::Create(MemberCluster(2), o);
    ASSERT_TRUE(created.ok()) << created.status().message();
    InProcessMember& m = **created;
    Fill(m, 100, 2, 300, true, 0);
    ASSERT_TRUE(m.Submit(Job(1, 2, 8, 800), AdmitMode::kStartOrReclaim, 1000).reclaiming);
    const std::optional<int64_t> due = m.NextDue();
    ASSERT_TRUE(due.has_value());
    EXPECT_GT(*due, 1000);
    EXPECT_LE(*due, 1060);
    earlier += *due < 1060;
    m.Step(*due - 1);
    EXPECT_EQ(m.Running(1), 0);
    m.Step(*due);
    EXPECT_EQ(m.Running(1), 2);
    EXPECT_EQ(m.Running(100) + m.Running(101), 0);
    m.Step(*due + 1000);  // stability
    EXPECT_EQ(m.Running(1), 2);
    EXPECT_TRUE(m.state().CheckInvariants().ok());
  }
  EXPECT_GE(earlier, 6);
  MemberOptions bad;
  bad.exit_mean_s = 13;
  bad.exit_p95_s = 70;  // beyond the 60 s bound
  EXPECT_FALSE(InProcessMember::Create(MemberCluster(1), bad).ok());
}

// Options of a member (no Absorb) keeping one HP headroom of `replicas` whole 8-GPU nodes for HP
// jobs of at least `min_job_gpus` GPUs.
MemberOptions HeadroomOptions(const std::string& name, int replicas, int64_t min_job_gpus) {
  MemberOptions o;
  o.name = name;
  o.absorb = false;
  o.summary.thresholds = {100, 300, 800, 900};
  FedJob shape;
  shape.max_replicas = replicas;
  shape.per_replica.gpu_count = 8;
  shape.per_replica.gpu_milli = kMilliPerGpu;
  o.headroom.push_back({shape, min_job_gpus});
  return o;
}

// HP headroom: one whole node is kept free of work below HP. LP work fills the other nodes only;
// an HP job starts on the headroom at once; the member then holds another node and drains it
// without losing much work: its LP job (checkpointing every 1000 s) is evicted, for
// kHeadroomJob, only once its work since the last checkpoint is at most 300 s.
TEST(InProcessMember, AnHpHeadroomIsKeptFromLpWorkUsedByHpWorkAndRestoredCheaply) {
  MemberOptions o = HeadroomOptions("m", 1, 8);
  o.headroom_max_loss_s = 300;
  auto created = InProcessMember::Create(MemberCluster(4), o);
  ASSERT_TRUE(created.ok()) << created.status().message();
  InProcessMember& m = **created;
  // The summary shows the headroom to HP probes only: 3 idle nodes, 4 at threshold 800.
  const uint64_t any = ~uint64_t{0};
  EXPECT_EQ(m.summary().AvailableGpus(any, 0), 24);
  EXPECT_EQ(m.summary().AvailableGpus(any, 3), 32);
  for (uint32_t id = 100; id < 103; ++id) {
    FedJob lp = Job(id, 1, 8, 300, true);
    lp.checkpoint_interval_s = 1000;
    ASSERT_TRUE(m.Submit(lp, AdmitMode::kStartNow, id).started);
  }
  const Admission lp = m.Submit(Job(103, 1, 8, 300, true), AdmitMode::kStartNow, 200);
  EXPECT_FALSE(lp.started);
  EXPECT_FALSE(lp.accepted);
  EXPECT_EQ(m.summary().AvailableGpus(any, 0), 0);
  EXPECT_EQ(m.summary().AvailableGpus(any, 3), 32);  // the headroom plus the LP work below 800
  // An HP job starts at once, on the headroom.
  EXPECT_TRUE(m.Submit(Job(1, 1, 8, 800), AdmitMode::kStartNow, 1000).started);
  m.TakeEvents();
  // Step holds another node; its LP job has lost ~900 s since it started: it is not evicted yet.
  m.Step(1000);
  int64_t evicted_at = -1;
  std::optional<int64_t> due = m.NextDue();
  for (int guard = 0; due && guard < 20 && evicted_at < 0; ++guard, due = m.NextDue()) {
    m.Step(*due);
    for (const MemberEvent& e : m.TakeEvents()) {
      if (e.kind != MemberEvent::Kind::kReturned) continue;
      EXPECT_EQ(e.for_job, kHeadroomJob);
      EXPECT_EQ(e.detail, "headroom");
      evicted_at = e.t;
    }
  }
  // Its checkpoint at 1100-1102 s, then a look every 60 s, then the 60 s grace period.
  EXPECT_GE(evicted_at, 1160);
  EXPECT_LE(evicted_at, 1102 + 60 + 60);
  EXPECT_EQ(m.Running(1), 1);
  EXPECT_EQ(m.Running(100) + m.Running(101) + m.Running(102), 2);
  EXPECT_FALSE(m.Submit(Job(104, 1, 8, 300, true), AdmitMode::kStartNow, 1300).started);  // held again
  EXPECT_EQ(m.summary().AvailableGpus(any, 3), 24);
  // Stability: more rounds evict nothing; when the HP job ends, its node is an ordinary one.
  for (int64_t t : {2000, 3000}) m.Step(t);
  EXPECT_EQ(Evicted(m.TakeEvents()), 0);
  m.Cancel(1, 4000);
  m.Step(4000);
  EXPECT_TRUE(m.Submit(Job(105, 1, 8, 300, true), AdmitMode::kStartNow, 4001).started);
  EXPECT_TRUE(m.state().CheckInvariants().ok());
}

// ---- FedScheduler over in-process members ----

TEST(Federation, AJobThatFitsOnlyWithPreemptionGoesToTheCheapestReclaimAndOnlyThatMemberEvicts) {
  // Every member is full. "hp": non-preemptible HP work (no reclaim possible); "old": LP work
  // running since t=0; "new": LP work started at t=9000 (cheaper to evict at t=10000).
  auto hp = Member("hp", MemberCluster(2));
  auto old_lp = Member("old", MemberCluster(2));
  auto new_lp = Member("new", MemberCluster(2));
  Fill(*hp, 100, 2, 900, false, 0);
  Fill(*old_lp, 200, 2, 300, true, 0);
  Fill(*new_lp, 300, 2, 300, true, 9000);
  for (auto* m : {hp.get(), old_lp.get(), new_lp.get()}) m->TakeEvents();
  FedScheduler fed({hp.get(), old_lp.get(), new_lp.get()}, FedOptions{});
  const FedJob job = Job(1, 2, 8, 800);
  fed.Enqueue(job, {}, false, 10000);

  const std::vector<FedCandidate> ranked = fed.Rank(1, 10000);
  ASSERT_EQ(ranked.size(), 2u);  // "hp" cannot reclaim
  EXPECT_EQ(ranked[0].member, 2);
  EXPECT_EQ(ranked[0].mode, AdmitMode::kStartOrReclaim);
  EXPECT_EQ(ranked[1].member, 1);
  EXPECT_LT(ranked[0].probe.cost_gpu_s, ranked[1].probe.cost_gpu_s);

  EXPECT_EQ(fed.Pass(10000), std::vector<uint32_t>{1});
  const auto dispatches = fed.TakeDispatches();
  ASSERT_EQ(dispatches.size(), 1u);
  EXPECT_EQ(dispatches[0].member, 2);
  EXPECT_TRUE(dispatches[0].admission.reclaiming);
  // The grace period passes; then only "new" evicts, and the job starts there.
  for (int64_t t : {10030, 10060, 10090, 10120}) {
    for (auto* m : {hp.get(), old_lp.get(), new_lp.get()}) m->Step(t);
    fed.Pass(t);
  }
  EXPECT_EQ(Evicted(hp->TakeEvents()), 0);
  EXPECT_EQ(Evicted(old_lp->TakeEvents()), 0);
  const std::vector<MemberEvent> ev = new_lp->TakeEvents();
  EXPECT_EQ(Evicted(ev), 2);
  EXPECT_EQ(new_lp->Running(1), 2);
  EXPECT_EQ(hp->Running(1) + old_lp->Running(1), 0);
  EXPECT_TRUE(fed.TakeDispatches().empty());
  // Stability: more rounds change nothing.
  for (int64_t t : {20000, 30000}) {
    for (auto* m : {hp.get(), old_lp.get(), new_lp.get()}) m->Step(t);
    fed.Pass(t);
  }
  EXPECT_EQ(Evicted(hp->TakeEvents()) + Evicted(old_lp->TakeEvents()) + Evicted(new_lp->TakeEvents()), 0);
  EXPECT_EQ(new_lp->Running(1), 2);
  for (auto* m : {hp.get(), old_lp.get(), new_lp.get()}) EXPECT_TRUE(m->state().CheckInvariants().ok());
}

// A member that keeps an HP headroom quotes a Reclaim without victims for a job it may hold: the
// federation sends the HP gang there and it starts at once; the other member evicts nothing. A
// smaller HP job (below min_job_gpus) may not use the headroom and reclaims as usual.
TEST(Federation, AnHpGangStartsAtOnceInTheMemberThatKeepsAHeadroomForIt) {
  auto with = InProcessMember::Create(MemberCluster(4), HeadroomOptions("headroom", 2, 16));
  ASSERT_TRUE(with.ok());
  auto without = Member("plain", MemberCluster(4));
  Fill(**with, 100, 2, 300, true, 0);  // the two nodes outside the headroom
  Fill(*without, 200, 4, 300, true, 0);
  FedScheduler fed({with->get(), without.get()}, FedOptions{});
  fed.Enqueue(Job(1, 2, 8, 800), {}, false, 1000);
  fed.Pass(1000);
  const auto d = fed.TakeDispatches();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].member, 0);
  EXPECT_TRUE(d[0].admission.started);
  EXPECT_EQ((*with)->Running(1), 2);
  // A 1 x 8 HP job is below the headroom's min_job_gpus: it reclaims (on either member).
  fed.Enqueue(Job(2, 1, 8, 800), {}, false, 1001);
  fed.Pass(1001);
  const auto d2 = fed.TakeDispatches();
  ASSERT_EQ(d2.size(), 1u);
  EXPECT_TRUE(d2[0].admission.reclaiming);
  for (int64_t t : {1061, 2000, 3000}) {
    for (auto* m : {with->get(), without.get()}) m->Step(t);
    fed.Pass(t);
  }
  EXPECT_EQ((*with)->Running(2) + without->Running(2), 1);
  EXPECT_EQ((*with)->Running(1), 2);
  for (auto* m : {with->get(), without.get()}) EXPECT_TRUE(m->state().CheckInvariants().ok());
}

// Two members, each with a one-node headroom and LP work on every other node: "big" of 8 nodes,
// "small" of 4. Both quote a Reclaim without victims for an HP 1 x 8 job; the tie-break sees the
// headrooms' free GPUs (a share of 8/32 in "small", 8/64 in "big"): spread sends the job to
// "small", pack to "big". Either way it starts at once and nothing is evicted.
TEST(Federation, BetweenTwoHeadroomsTheTieBreakCountsTheirFreeGpus) {
  for (const bool spread : {true, false}) {
    auto big = InProcessMember::Create(MemberCluster(8), HeadroomOptions("big", 1, 8));
    auto small = InProcessMember::Create(MemberCluster(4), HeadroomOptions("small", 1, 8));
    ASSERT_TRUE(big.ok() && small.ok());
    Fill(**big, 100, 7, 300, true, 0);
    Fill(**small, 200, 3, 300, true, 0);
    const GangQuery q{1, 8, ~uint64_t{0}, std::nullopt, 800};
    const ProbeResult p = (*small)->summary().Probe(q, 1000);
    EXPECT_EQ(p.idle_gpus, 0);
    EXPECT_EQ(p.free_gpus, 8);
    EXPECT_EQ(p.capacity_gpus, 32);
    FedOptions o;
    o.spread = spread;
    FedScheduler fed({big->get(), small->get()}, o);
    fed.Enqueue(Job(1, 1, 8, 800), {}, false, 1000);
    fed.Pass(1000);
    const auto d = fed.TakeDispatches();
    ASSERT_EQ(d.size(), 1u) << (spread ? "spread" : "pack");
    EXPECT_EQ(d[0].member, spread ? 1 : 0) << (spread ? "spread" : "pack");
    EXPECT_TRUE(d[0].admission.started);
    EXPECT_FALSE(d[0].admission.reclaiming);
    EXPECT_EQ(Evicted((*big)->TakeEvents()) + Evicted((*small)->TakeEvents()), 0);
    for (auto* m : {big->get(), small->get()}) EXPECT_TRUE(m->state().CheckInvariants().ok());
  }
}

TEST(Federation, AReclaimingJobStartsOnIdleCapacityElsewhereAndItsVictimsAreSpared) {
  // "lp" is full of preemptible LP work, "dev" of non-preemptible dev work. The HP job reclaims on
  // "lp"; before the grace period ends a dev job on "dev" finishes, so the job starts there, the
  // Reclaim is cancelled and "lp" evicts nothing.
  auto lp = Member("lp", MemberCluster(1));
  auto dev = Member("dev", MemberCluster(1));
  Fill(*lp, 100, 1, 300, true, 0);
  Fill(*dev, 200, 1, 500, false, 0);
  FedScheduler fed({lp.get(), dev.get()}, FedOptions{});
  fed.Enqueue(Job(1, 1, 8, 800), {}, false, 1000);
  fed.Pass(1000);
  ASSERT_TRUE(fed.TakeDispatches().front().admission.reclaiming);
  dev->Cancel(200, 1030);  // the dev job ends
  for (auto* m : {lp.get(), dev.get()}) m->Step(1030);
  fed.Pass(1030);
  EXPECT_EQ(dev->Running(1), 1);
  EXPECT_EQ(fed.reclaims_cancelled(), 1);
  for (int64_t t : {1060, 1090, 5000}) {  // the grace period ends; more rounds change nothing
    for (auto* m : {lp.get(), dev.get()}) m->Step(t);
    fed.Pass(t);
  }
  EXPECT_EQ(Evicted(lp->TakeEvents()), 0);
  EXPECT_EQ(lp->Running(100), 1);
  EXPECT_EQ(lp->Running(1), 0);
  EXPECT_EQ(dev->Running(1), 1);
  EXPECT_TRUE(lp->state().available_capacity_reservations().empty());
  EXPECT_FALSE(lp->state().node(NodeId(0)).reservation.valid());  // the held node is let go
  for (auto* m : {lp.get(), dev.get()}) EXPECT_TRUE(m->state().CheckInvariants().ok());
}

TEST(Federation, BlindDispatchDoesNotMoveAReclaimingJobForItHasNoCapacityKnowledge) {
  auto lp = Member("lp", MemberCluster(1));
  auto dev = Member("dev", MemberCluster(1));
  Fill(*lp, 100, 1, 300, true, 0);
  Fill(*dev, 200, 1, 500, false, 0);
  FedOptions o;
  o.mode = FedOptions::Mode::kBlind;
  FedScheduler fed({lp.get(), dev.get()}, o);
  fed.Enqueue(Job(1, 1, 8, 800), {}, false, 1000);
  fed.Pass(1000);  // round-robin: "lp", which queues it and reclaims at once
  ASSERT_TRUE(fed.TakeDispatches().front().admission.reclaiming);
  dev->Cancel(200, 1030);
  for (int64_t t : {1030, 1060, 1090}) {
    for (auto* m : {lp.get(), dev.get()}) m->Step(t);
    fed.Pass(t);
  }
  EXPECT_EQ(fed.reclaims_cancelled(), 0);
  EXPECT_EQ(lp->Running(1), 1);
  EXPECT_EQ(Evicted(lp->TakeEvents()), 1);
}

TEST(Federation, VictimsOfLowerPriorityComeBeforeCheaperVictims) {
  // "spot" holds old spot work (priority 100), "lp" fresh LP work (priority 300): the reclaim
  // goes to "spot" although its victims ran longer.
  auto lp = Member("lp", MemberCluster(1));
  auto spot = Member("spot", MemberCluster(1));
  Fill(*lp, 100, 1, 300, true, 9000);
  Fill(*spot, 200, 1, 100, true, 0);
  FedScheduler fed({lp.get(), spot.get()}, FedOptions{});
  fed.Enqueue(Job(1, 1, 8, 800), {}, false, 10000);
  const std::vector<FedCandidate> ranked = fed.Rank(1, 10000);
  ASSERT_EQ(ranked.size(), 2u);
  EXPECT_EQ(ranked[0].member, 1);
  EXPECT_LT(ranked[0].probe.victim_level, ranked[1].probe.victim_level);
}

TEST(Federation, IdleCapacityAnywhereIsPreferredToPreemption) {
  auto full = Member("full", MemberCluster(2));
  auto idle = Member("idle", MemberCluster(2));
  Fill(*full, 100, 2, 100, true, 0);
  FedScheduler fed({full.get(), idle.get()}, FedOptions{});
  fed.Enqueue(Job(1, 2, 8, 800), {}, false, 50);
  fed.Pass(50);
  EXPECT_EQ(idle->Running(1), 2);
  EXPECT_EQ(Evicted(full->TakeEvents()), 0);
}

TEST(Federation, AStaleSummaryLeadsToARejectionAndASuccessfulRetryElsewhere) {
  // Members publish summaries hourly. "a" is filled after its last publication, so its summary
  // still shows it empty and it ranks first; it rejects, and "b" takes the job.
  auto a = Member("a", MemberCluster(2), 3600);
  auto b = Member("b", MemberCluster(2), 3600);
  a->Publish(0);
  b->Publish(0);
  Fill(*a, 100, 2, 500, false, 5);
  FedScheduler fed({a.get(), b.get()}, FedOptions{});
  fed.Enqueue(Job(1, 1, 8, 500), {}, false, 10);
  ASSERT_EQ(fed.Rank(1, 10).front().member, 0);  // the stale summary says "a" fits
  EXPECT_EQ(fed.Pass(10), std::vector<uint32_t>{1});
  const auto d = fed.TakeDispatches();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].member, 0);
  EXPECT_FALSE(d[0].admission.accepted);
  EXPECT_FALSE(d[0].retry);
  EXPECT_EQ(d[1].member, 1);
  EXPECT_TRUE(d[1].admission.started);
  EXPECT_TRUE(d[1].retry);
  EXPECT_EQ(fed.rejections(), 1);
  EXPECT_EQ(fed.retries(), 1);
  EXPECT_EQ(b->Running(1), 1);
  EXPECT_EQ(a->Running(1), 0);
}

TEST(Federation, WhenEveryCandidateRejectsTheJobBacksOffAndRetriesLater) {
  auto a = Member("a", MemberCluster(1), 3600);
  a->Publish(0);
  Fill(*a, 100, 1, 500, false, 5);
  FedOptions o;
  o.backoff_s = 30;
  FedScheduler fed({a.get()}, o);
  fed.Enqueue(Job(1, 1, 8, 500), {}, false, 10);
  EXPECT_TRUE(fed.Pass(10).empty());
  EXPECT_TRUE(fed.Waiting(1));
  EXPECT_EQ(fed.NextRetry(), 40);
  EXPECT_THAT(fed.Reason(1), HasSubstr("every candidate rejected it"));
  fed.TakeDispatches();
  EXPECT_TRUE(fed.Pass(20).empty());  // still backing off: not tried
  EXPECT_TRUE(fed.TakeDispatches().empty());
  a->Cancel(100, 30);  // room again
  EXPECT_EQ(fed.Pass(40), std::vector<uint32_t>{1});
  EXPECT_EQ(a->Running(1), 1);
}

TEST(Federation, AJobThatFitsNowhereIsReportedWithItsReasonAndNeverDispatched) {
  auto a = Member("a", MemberCluster(2));
  auto b = Member("b", MemberCluster(2, "A100"));
  FedScheduler fed({a.get(), b.get()}, FedOptions{});
  FedJob big = Job(1, 8, 8, 800);  // 64 GPUs; each member has 16
  FedJob model = Job(2, 1, 8, 800);
  model.models = {"B200"};
  FedJob asw = Job(3, 2, 8, 800);  // 2 nodes in one ASW; each ASW has one node
  asw.plane = "data";
  asw.required_level = "asw";
  for (const FedJob& j : {big, model, asw}) fed.Enqueue(j, {}, false, 0);
  EXPECT_TRUE(fed.Pass(0).empty());
  EXPECT_TRUE(fed.TakeDispatches().empty());
  for (uint32_t j : {1u, 2u, 3u}) {
    EXPECT_TRUE(fed.Infeasible(j));
    EXPECT_FALSE(fed.Waiting(j));
  }
  EXPECT_THAT(fed.Reason(1), HasSubstr("no member could ever hold 8 x 8 GPUs"));
  EXPECT_THAT(fed.Reason(2), HasSubstr("of B200"));
  EXPECT_THAT(fed.Reason(3), HasSubstr("in one asw"));
  EXPECT_TRUE(fed.Pass(100).empty());
  EXPECT_TRUE(fed.TakeDispatches().empty());
  EXPECT_EQ(a->Running(1) + b->Running(1), 0);
}

TEST(Federation, AJobThatFitsOnlyLaterWaitsWithItsReasonAndIsNotDispatched) {
  auto a = Member("a", MemberCluster(1));
  Fill(*a, 100, 1, 900, false, 0);  // non-preemptible HP work
  FedScheduler fed({a.get()}, FedOptions{});
  fed.Enqueue(Job(1, 1, 8, 800), {}, false, 10);
  EXPECT_TRUE(fed.Pass(10).empty());
  EXPECT_TRUE(fed.TakeDispatches().empty());
  EXPECT_TRUE(fed.Waiting(1));
  EXPECT_FALSE(fed.Infeasible(1));
  EXPECT_THAT(fed.Reason(1), HasSubstr("no member has room for 1 x 8 GPUs on idle capacity or by evicting work below priority 800"));
}

TEST(Federation, IdleOnlyNeverPreemptsAndWaitsInstead) {
  auto a = Member("a", MemberCluster(1));
  Fill(*a, 100, 1, 100, true, 0);
  FedOptions o;
  o.mode = FedOptions::Mode::kIdleOnly;
  FedScheduler fed({a.get()}, o);
  fed.Enqueue(Job(1, 1, 8, 800), {}, false, 10);
  EXPECT_TRUE(fed.Pass(10).empty());
  a->Step(100);
  EXPECT_EQ(Evicted(a->TakeEvents()), 0);
  EXPECT_TRUE(fed.Waiting(1));
}

TEST(Federation, BlindDispatchRoundRobinsAndAMemberThatCanNeverRunTheJobRejectsIt) {
  auto a = Member("a", MemberCluster(1, "A100"));
  auto b = Member("b", MemberCluster(1, "H800"));
  FedOptions o;
  o.mode = FedOptions::Mode::kBlind;
  FedScheduler fed({a.get(), b.get()}, o);
  FedJob pinned = Job(1, 1, 4, 500);
  pinned.models = {"H800"};
  fed.Enqueue(pinned, {}, false, 0);
  fed.Enqueue(Job(2, 1, 4, 500), {}, false, 0);
  fed.Pass(0);
  const auto d = fed.TakeDispatches();
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].member, 0);  // round-robin starts at "a", which has no H800
  EXPECT_TRUE(d[0].admission.never);
  EXPECT_EQ(d[1].member, 1);
  EXPECT_TRUE(d[1].admission.accepted);
  EXPECT_EQ(d[2].member, 0);  // the next job goes to the member after "b"
  EXPECT_EQ(b->Running(1), 1);
  EXPECT_EQ(a->Running(2), 1);
}

}  // namespace
}  // namespace estuary
