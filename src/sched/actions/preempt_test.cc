// PreemptAction: which work a pending high-priority job would evict (issue 4, "Reclaim"), worked
// out by hand on tiny clusters. Costs are C = GPU milli x (now - last checkpoint), milli-GPU x s.
#include "sched/actions/preempt.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "sched/plugins/register.h"
#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::ClusterBuilder;
using testing::Req;

using Names = std::set<std::string>;

constexpr int64_t kNow = 10000;
constexpr int32_t kLp = 100;
constexpr int32_t kHp = 800;

// How a running job of Cluster::Run is set up.
struct Running {
  int32_t priority = kLp;
  bool preemptible = true;
  int64_t checkpoint_s = 0;
  int64_t on_notice_s = 0;  // JobSpec::checkpoint_on_notice_s
  int64_t started_s = 0;
  int32_t min = 0;   // 0: as many as its tasks
  int32_t step = 1;
};

// testing::AswCluster (nodes n0, n1, ... in the named ASWs) with the helpers below.
struct Cluster : testing::AswCluster {
  using AswCluster::AswCluster;
  static Cluster Flat(int nodes) { return Cluster(std::vector<std::string>(nodes, "")); }

  // A running job with one task of `gpus` whole GPUs on each node of `on` (in task order), each on
  // the node's lowest free GPUs. Tasks are named <name>-0, <name>-1, ...
  JobId Run(const std::string& name, const std::vector<int>& on, int gpus, Running r = {}) {
    JobSpec s;
    s.name = name;
    s.max_replicas = static_cast<int32_t>(on.size());
    s.min_replicas = r.min > 0 ? r.min : s.max_replicas;
    s.step = r.step;
    s.priority = r.priority;
    s.preemptible = r.preemptible;
    s.checkpoint_interval_s = r.checkpoint_s;
    s.checkpoint_on_notice_s = r.on_notice_s;
    JobId j = c.state.AddJob(s);
    for (size_t i = 0; i < on.size(); ++i) {
      TaskId t = c.state.AddTask(j, name + "-" + std::to_string(i), Req().Cpu(1000).Gpus(gpus));
      const Node& n = c.state.node(N(on[i]));
      GpuIndices g;
      for (int k = 0; k < n.spec.gpu_count && g.size < gpus; ++k) {
        if (n.gpu_free[k] == kMilliPerGpu) g.Push(k);
      }
      c.state.Bind(t, N(on[i]), g);
    }
    c.state.SetJobStart(j, r.started_s);
    return j;
  }
  // A whole 8-GPU node's worth of LP work on node i that started `age_s` ago, never
  // checkpointed: C = 8000 x age_s.
  JobId Fill(int i, int64_t age_s, int32_t priority = kLp) {
    Running r;
    r.started_s = kNow - age_s;
    r.priority = priority;
    return Run("lp" + std::to_string(i), {i}, 8, r);
  }

  // A pending gang of `replicas` tasks of `req`.
  JobId Gang(const std::string& name, int replicas, TaskRequest req, int32_t priority = kHp,
             TopologyConstraint topology = {}) {
    JobSpec s;
    s.name = name;
    s.min_replicas = replicas;
    s.max_replicas = replicas;
    s.priority = priority;
    s.topology = topology;
    JobId j = c.state.AddJob(s);
    for (int i = 0; i < replicas; ++i) c.state.AddTask(j, name + "-" + std::to_string(i), req);
    return j;
  }
  JobId GangInOneAsw(const std::string& name, int replicas, TaskRequest req) {
    TopologyConstraint t;
    t.plane = data;
    t.required_level = 0;
    return Gang(name, replicas, req, kHp, t);
  }

  PreemptionPlan Plan(JobId j, AllocateOptions o = {}) const { return PreemptAction::Plan(c.state, j, kNow, o); }

  Names JobNames(const std::vector<JobId>& jobs) const {
    Names out;
    for (JobId j : jobs) out.insert(c.state.job(j).spec.name);
    return out;
  }
  Names TaskNames(const std::vector<TaskId>& tasks) const {
    Names out;
    for (TaskId t : tasks) out.insert(c.state.task(t).name);
    EXPECT_EQ(out.size(), tasks.size()) << "a task listed twice";
    return out;
  }
  std::multiset<std::string> NodeNames(const std::vector<NodeId>& nodes) const {
    std::multiset<std::string> out;
    for (NodeId n : nodes) out.insert(c.state.node(n).spec.name);
    return out;
  }
  std::unique_ptr<Session> Open() {
    SessionOptions o;
    o.policy = *OpenbPolicy("best-fit");
    o.seed = 3;
    return std::move(Session::Open(c.state, BuiltinRegistry(), PluginContext{&c.state, nullptr}, o)).value();
  }
};

const TaskRequest kWholeNode = Req().Cpu(8000).Gpus(8);

void ExpectEvictsNothing(const PreemptionPlan& p) {
  EXPECT_TRUE(p.evict.empty());
  EXPECT_TRUE(p.evicted_jobs.empty());
  EXPECT_TRUE(p.shrunk.empty());
  EXPECT_TRUE(p.nodes.empty());
  EXPECT_EQ(p.cost, 0);
}

// ---------------------------------------------------------------------------------------------

TEST(PreemptPlan, AnHpGangInAFullClusterEvictsExactlyTheTwoCheapestJobsAndNothingElse) {
  // Four nodes, each full with one LP job of two 4-GPU tasks, all checkpointing every hour.
  // Work since the last checkpoint at now = 10000: a started 0 -> 2800 s; b 5000 -> 1400 s;
  // c 9000 -> 1000 s; d 3000 -> 3400 s. C = 8000 x that: 22.4M, 11.2M, 8.0M, 27.2M.
  Cluster g = Cluster::Flat(4);
  const int64_t start[] = {0, 5000, 9000, 3000};
  const char* name[] = {"a", "b", "c", "d"};
  for (int i = 0; i < 4; ++i) {
    Running r;
    r.checkpoint_s = 3600;
    r.started_s = start[i];
    g.Run(name[i], {i, i}, 4, r);
  }
  JobId hp = g.Gang("hp", 2, kWholeNode);
  const PreemptionPlan p = g.Plan(hp);
  EXPECT_TRUE(p.feasible);
  EXPECT_EQ(p.reason, "");
  EXPECT_EQ(g.JobNames(p.evicted_jobs), (Names{"b", "c"}));
  EXPECT_EQ(g.TaskNames(p.evict), (Names{"b-0", "b-1", "c-0", "c-1"}));
  EXPECT_TRUE(p.shrunk.empty());
  EXPECT_EQ(g.NodeNames(p.nodes), (std::multiset<std::string>{"n1", "n2"}));
  EXPECT_EQ(p.cost, 8000 * 1400 + 8000 * 1000);
}

TEST(PreemptPlan, AJobThatFullReclaimCannotFitIsRefusedWithAReasonAndEvictsNothing) {
  // n0: preemptible LP; n1: LP but not preemptible; n2: preemptible at the preemptor's own
  // priority; n3: preemptible above it. Only n0 could be reclaimed: one replica, not two.
  Cluster g = Cluster::Flat(4);
  g.Fill(0, 100);
  Running pinned;
  pinned.preemptible = false;
  g.Run("pinned", {1}, 8, pinned);
  g.Fill(2, 100, kHp);
  g.Fill(3, 100, kHp + 1);
  const PreemptionPlan two = g.Plan(g.Gang("two", 2, kWholeNode));
  EXPECT_FALSE(two.feasible);
  ExpectEvictsNothing(two);
  EXPECT_NE(two.reason.find("holds 1"), std::string::npos) << two.reason;
  // One replica fits once n0's job goes.
  const PreemptionPlan one = g.Plan(g.Gang("one", 1, kWholeNode));
  EXPECT_TRUE(one.feasible);
  EXPECT_EQ(g.JobNames(one.evicted_jobs), (Names{"lp0"}));
  // A job larger than any node is refused even on an empty cluster.
  Cluster e = Cluster::Flat(2);
  const PreemptionPlan big = e.Plan(e.Gang("big", 1, Req().Gpus(16)));
  EXPECT_FALSE(big.feasible);
  EXPECT_NE(big.reason.find("holds 0"), std::string::npos) << big.reason;
}

TEST(PreemptPlan, ElasticSurplusIsShrunkNewestFirstBeforeAnyWholeJobEvenACheaperOne) {
  // e (priority 300, min 2, step 2) runs 4 replicas of 4 GPUs: e-0, e-1 on n0, e-2, e-3 on n1,
  // never checkpointed (C = 16000 x 10000 if evicted whole). w (priority 100) on n2 started now:
  // C = 0. Shrinking e to 2 drops its newest replicas e-2, e-3 and frees n1 at no lost work.
  Cluster g = Cluster::Flat(3);
  Running el;
  el.priority = 300;
  el.min = 2;
  el.step = 2;
  JobId e = g.Run("e", {0, 0, 1, 1}, 4, el);
  Running fresh;
  fresh.started_s = kNow;
  g.Run("w", {2}, 8, fresh);
  const PreemptionPlan p = g.Plan(g.Gang("hp", 1, kWholeNode));
  EXPECT_TRUE(p.feasible);
  EXPECT_TRUE(p.evicted_jobs.empty());
  EXPECT_EQ(p.shrunk, (std::vector<std::pair<JobId, int32_t>>{{e, 2}}));
  EXPECT_EQ(g.TaskNames(p.evict), (Names{"e-2", "e-3"}));
  EXPECT_EQ(g.NodeNames(p.nodes), (std::multiset<std::string>{"n1"}));
  EXPECT_EQ(p.cost, 0);
}

TEST(PreemptPlan, AnElasticJobShrinksOnlyToAMultipleOfItsStepAndNeverBelowMin) {
  // s (min 1, step 2) runs 4 replicas of 2 GPUs on n0, the newest (s-3) on GPUs 0-1. A 2-GPU
  // replica needs one of them gone: step 2 drops s-3 and s-2 (to 2); without Align, s-3 only (to
  // 3). A 8-GPU replica would need all four, below min 1: s goes whole instead.
  Cluster g = Cluster::Flat(1);
  Running el;
  el.min = 1;
  el.step = 2;
  JobId s = g.Run("s", {0, 0, 0, 0}, 2, el);
  JobId hp = g.Gang("hp", 1, Req().Cpu(1000).Gpus(2));
  const PreemptionPlan aligned = g.Plan(hp);
  EXPECT_EQ(aligned.shrunk, (std::vector<std::pair<JobId, int32_t>>{{s, 2}}));
  EXPECT_EQ(g.TaskNames(aligned.evict), (Names{"s-2", "s-3"}));
  AllocateOptions no_align;
  no_align.align = false;
  const PreemptionPlan stepless = g.Plan(hp, no_align);
  EXPECT_EQ(stepless.shrunk, (std::vector<std::pair<JobId, int32_t>>{{s, 3}}));
  EXPECT_EQ(g.TaskNames(stepless.evict), (Names{"s-3"}));
  const PreemptionPlan whole = g.Plan(g.Gang("big", 1, kWholeNode));
  EXPECT_TRUE(whole.shrunk.empty());
  EXPECT_EQ(g.JobNames(whole.evicted_jobs), (Names{"s"}));
  EXPECT_EQ(whole.evict.size(), 4u);
}

TEST(PreemptPlan, LowerPriorityIsEvictedBeforeHigherEvenWhenItsLostWorkIsLarger) {
  // n0: priority 100, 10000 s unsaved (C = 80M); n1: priority 300, 10 s unsaved (C = 80000).
  Cluster g = Cluster::Flat(2);
  g.Fill(0, 10000, 100);
  g.Fill(1, 10, 300);
  const PreemptionPlan p = g.Plan(g.Gang("hp", 1, kWholeNode));
  EXPECT_EQ(g.JobNames(p.evicted_jobs), (Names{"lp0"}));
  EXPECT_EQ(p.cost, 8000 * 10000);
  EXPECT_EQ(g.NodeNames(p.nodes), (std::multiset<std::string>{"n0"}));
}

TEST(PreemptPlan, ARequiredAswGangTakesAllItsVictimsFromTheCheapestAsw) {
  // Unsaved seconds (C = 8000 x s): asw1 n0 5, n1 1, n2 9; asw2 n3 2, n4 3, n5 8. The two
  // cheapest nodes overall (n1 + n3 = 3) span both ASWs; in one ASW asw2's n3 + n4 (5) beat
  // asw1's n1 + n0 (6).
  Cluster g({"asw1", "asw1", "asw1", "asw2", "asw2", "asw2"});
  const int64_t age[] = {5, 1, 9, 2, 3, 8};
  for (int i = 0; i < 6; ++i) g.Fill(i, age[i]);
  JobId hp = g.GangInOneAsw("hp", 2, kWholeNode);
  const PreemptionPlan p = g.Plan(hp);
  EXPECT_TRUE(p.feasible);
  EXPECT_EQ(g.JobNames(p.evicted_jobs), (Names{"lp3", "lp4"}));
  EXPECT_EQ(g.NodeNames(p.nodes), (std::multiset<std::string>{"n3", "n4"}));
  EXPECT_EQ(p.cost, 8000 * (2 + 3));
  // Without topology the cheapest pair anywhere.
  AllocateOptions anywhere;
  anywhere.topology = false;
  const PreemptionPlan q = g.Plan(hp, anywhere);
  EXPECT_EQ(g.JobNames(q.evicted_jobs), (Names{"lp1", "lp3"}));
  EXPECT_EQ(q.cost, 8000 * (1 + 2));
}

TEST(PreemptPlan, FreeCapacityIsUsedFirstSoOnlyOneNodesVictimsGoWhenOneOfTwoNodesIsFree) {
  // n0 free; n1 runs 30 s unsaved, n2 20 s: the gang takes n0 and evicts n2's job only.
  Cluster g = Cluster::Flat(3);
  g.Fill(1, 30);
  g.Fill(2, 20);
  const PreemptionPlan p = g.Plan(g.Gang("hp", 2, kWholeNode));
  EXPECT_EQ(g.JobNames(p.evicted_jobs), (Names{"lp2"}));
  EXPECT_EQ(g.TaskNames(p.evict), (Names{"lp2-0"}));
  EXPECT_EQ(p.nodes, (std::vector<NodeId>{g.N(0), g.N(2)}));  // free capacity first
  EXPECT_EQ(p.cost, 8000 * 20);
  // A job that fits on free capacity alone is feasible with nothing to evict.
  const PreemptionPlan free = g.Plan(g.Gang("one", 1, kWholeNode));
  EXPECT_TRUE(free.feasible);
  EXPECT_TRUE(free.evict.empty());
  EXPECT_EQ(free.nodes, (std::vector<NodeId>{g.N(0)}));
}

TEST(PreemptPlan, AJobSpanningTwoNodesFreesBothAndItsCostCountsOnce) {
  // span runs 8 GPUs on n0 and on n1, 10 s unsaved: C = 16000 x 10 = 160000 for two nodes;
  // solo on n2 costs 8000 x 15 = 120000 for one. Two nodes: span alone (80000 per node).
  Cluster g = Cluster::Flat(3);
  Running r;
  r.started_s = kNow - 10;
  g.Run("span", {0, 1}, 8, r);
  r.started_s = kNow - 15;
  g.Run("solo", {2}, 8, r);
  const PreemptionPlan p = g.Plan(g.Gang("hp", 2, kWholeNode));
  EXPECT_EQ(g.JobNames(p.evicted_jobs), (Names{"span"}));
  EXPECT_EQ(p.cost, 160000);
  EXPECT_EQ(g.NodeNames(p.nodes), (std::multiset<std::string>{"n0", "n1"}));
  // One node: solo's 120000 is less than span's 160000.
  const PreemptionPlan one = g.Plan(g.Gang("one", 1, kWholeNode));
  EXPECT_EQ(g.JobNames(one.evicted_jobs), (Names{"solo"}));
}

TEST(PreemptPlan, AVictimMadeRedundantByALaterChoiceIsDroppedFromThePlan) {
  // Two nodes wanted. cheap on n0: 8000 x 9 = 72000 for one node, the best per node, so the
  // greedy takes it first; the second node then comes from span (n1 and n2, 16000 x 10 =
  // 160000), which alone frees both. Pruning drops cheap: the plan is span only.
  Cluster g = Cluster::Flat(3);
  g.Fill(0, 9);
  Running r;
  r.started_s = kNow - 10;
  g.Run("span", {1, 2}, 8, r);
  const PreemptionPlan p = g.Plan(g.Gang("hp", 2, kWholeNode));
  EXPECT_EQ(g.JobNames(p.evicted_jobs), (Names{"span"}));
  EXPECT_EQ(g.TaskNames(p.evict), (Names{"span-0", "span-1"}));
  EXPECT_EQ(p.cost, 160000);
  EXPECT_EQ(p.nodes, (std::vector<NodeId>{g.N(1), g.N(2)}));
}

TEST(PreemptPlan, CannotFitOnlyWhenEvenAllUnallocatedAndReclaimableGpusAreTooFew) {
  // The cluster of the test above: n0 preemptible LP, n1 LP not preemptible, n2 preemptible at
  // HP, n3 preemptible above HP; 8 GPUs of 32 could be freed for an HP job.
  Cluster g = Cluster::Flat(4);
  const JobId lp0 = g.Fill(0, 100);
  Running pinned;
  pinned.preemptible = false;
  g.Run("pinned", {1}, 8, pinned);
  g.Fill(2, 100, kHp);
  g.Fill(3, 100, kHp + 1);
  EXPECT_EQ(g.c.state.PreemptibleGpuMilliBelow(kHp), 8000);
  EXPECT_EQ(g.c.state.PreemptibleGpuMilliBelow(kHp + 1), 16000);
  EXPECT_EQ(g.c.state.PreemptibleGpuMilliBelow(kLp), 0);
  const JobId two = g.Gang("two", 2, kWholeNode);
  EXPECT_TRUE(PreemptAction::CannotFit(g.c.state, two));
  EXPECT_FALSE(g.Plan(two).feasible);
  const JobId one = g.Gang("one", 1, kWholeNode);
  EXPECT_FALSE(PreemptAction::CannotFit(g.c.state, one));
  EXPECT_TRUE(g.Plan(one).feasible);
  // Above n2's priority its 8 GPUs count too: two whole nodes are not ruled out (and do fit).
  const JobId above = g.Gang("above", 2, kWholeNode, kHp + 1);
  EXPECT_FALSE(PreemptAction::CannotFit(g.c.state, above));
  EXPECT_TRUE(g.Plan(above).feasible);
  // When the job ends, its GPUs no longer count; a freed node counts as unallocated.
  for (TaskId t : g.c.state.job(lp0).tasks) g.c.state.Unbind(t);
  EXPECT_EQ(g.c.state.PreemptibleGpuMilliBelow(kHp), 0);
  EXPECT_FALSE(PreemptAction::CannotFit(g.c.state, one));
  EXPECT_TRUE(PreemptAction::CannotFit(g.c.state, two));
  EXPECT_TRUE(g.c.state.CheckInvariants().ok());
}

TEST(PreemptPlan, CannotFitSaysNothingWhereOnlyPlacementRefuses) {
  // Two ASWs of two nodes, each with one node of preemptible LP: 16 GPUs could be freed, enough
  // for two whole nodes in all but not in one ASW. CannotFit does not rule it out; the plan does.
  Cluster g({"a", "a", "b", "b"});
  g.Fill(0, 100);
  g.Fill(2, 100);
  Running pinned;
  pinned.preemptible = false;
  g.Run("pinned1", {1}, 8, pinned);
  g.Run("pinned3", {3}, 8, pinned);
  const JobId gang = g.GangInOneAsw("gang", 2, kWholeNode);
  EXPECT_FALSE(PreemptAction::CannotFit(g.c.state, gang));
  AllocateOptions topo;
  topo.topology = true;
  EXPECT_FALSE(g.Plan(gang, topo).feasible);
}

TEST(PreemptPlan, NeverPreemptsEqualOrHigherPriorityOrNonPreemptibleWorkHoweverCheap) {
  // n0: equal priority, n1: higher, n2: not preemptible — all started now (C = 0); n3: priority
  // 500, 10000 s unsaved. Only n3's job may go.
  Cluster g = Cluster::Flat(4);
  Running fresh;
  fresh.started_s = kNow;
  fresh.priority = kHp;
  g.Run("equal", {0}, 8, fresh);
  fresh.priority = kHp + 100;
  g.Run("higher", {1}, 8, fresh);
  fresh.priority = kLp;
  fresh.preemptible = false;
  g.Run("pinned", {2}, 8, fresh);
  g.Fill(3, 10000, 500);
  const PreemptionPlan p = g.Plan(g.Gang("hp", 1, kWholeNode));
  EXPECT_TRUE(p.feasible);
  EXPECT_EQ(g.JobNames(p.evicted_jobs), (Names{"lp3"}));
  EXPECT_EQ(g.NodeNames(p.nodes), (std::multiset<std::string>{"n3"}));
  // A job at priority 500 may evict none of them.
  const PreemptionPlan mid = g.Plan(g.Gang("mid", 1, kWholeNode, 500));
  EXPECT_FALSE(mid.feasible);
  ExpectEvictsNothing(mid);
}

TEST(PreemptPlan, NodesDownOrHeldForAnotherJobAreNotReclaimedButTheJobsOwnHoldIs) {
  // n0 (2 s unsaved) is down, n1 (3 s) is held for another job, n2 (50 s) is free of holds.
  Cluster g = Cluster::Flat(3);
  g.Fill(0, 2);
  g.Fill(1, 3);
  g.Fill(2, 50);
  g.c.state.SetNodeState(g.N(0), NodeState::kDown);
  JobId other = g.Gang("other", 1, kWholeNode);
  const std::vector<NodeId> n1 = {g.N(1)};
  g.c.state.AddReservation(other, n1);
  JobId hp = g.Gang("hp", 1, kWholeNode);
  EXPECT_EQ(g.JobNames(g.Plan(hp).evicted_jobs), (Names{"lp2"}));
  EXPECT_EQ(g.JobNames(g.Plan(other).evicted_jobs), (Names{"lp1"}));
}

TEST(PreemptPlan, PlansAreDeterministicApplyCleanlyAndASecondGangTakesOnlyTheNextCheapest) {
  // Five full nodes, unsaved seconds 40, 10, 50, 20, 30 (C = 8000 x s). Two HP gangs of two
  // nodes each. Stability: after the first plan is applied and its gang started, the second
  // gang's plan evicts the next two cheapest (30, 40), never the first gang (same priority) and
  // never anything cheaper than the first plan took.
  Cluster g = Cluster::Flat(5);
  const int64_t age[] = {40, 10, 50, 20, 30};
  for (int i = 0; i < 5; ++i) g.Fill(i, age[i]);
  JobId h1 = g.Gang("h1", 2, kWholeNode);
  JobId h2 = g.Gang("h2", 2, kWholeNode);
  const PreemptionPlan p = g.Plan(h1);
  const PreemptionPlan again = g.Plan(h1);
  EXPECT_EQ(p.evict, again.evict);
  EXPECT_EQ(p.evicted_jobs, again.evicted_jobs);
  EXPECT_EQ(p.nodes, again.nodes);
  EXPECT_EQ(p.cost, again.cost);
  EXPECT_EQ(g.JobNames(p.evicted_jobs), (Names{"lp1", "lp3"}));
  EXPECT_EQ(p.cost, 8000 * (10 + 20));

  for (TaskId t : p.evict) g.c.state.Unbind(t);
  auto session = g.Open();
  const JobAttempt a = AllocateAction::TryStart(*session, g.c.state, h1);
  ASSERT_TRUE(a.started) << a.reason;
  g.c.state.SetJobStart(h1, kNow);
  const Status st = g.c.state.CheckInvariants();
  EXPECT_TRUE(st.ok()) << st.message();
  Names h1_nodes;
  for (TaskId t : g.c.state.job(h1).tasks) h1_nodes.insert(g.c.state.node(g.c.state.task(t).node).spec.name);
  EXPECT_EQ(h1_nodes, (Names{"n1", "n3"}));

  const PreemptionPlan q = g.Plan(h2);
  EXPECT_TRUE(q.feasible);
  EXPECT_EQ(g.JobNames(q.evicted_jobs), (Names{"lp0", "lp4"}));
  EXPECT_EQ(q.cost, 8000 * (40 + 30));
  EXPECT_GE(q.cost, p.cost);
  // The evicted LP jobs are pending now, not running: nothing of theirs is evicted twice.
  for (TaskId t : q.evict) EXPECT_EQ(g.c.state.task(t).state, TaskState::kBound);
}

// ---- VictimFilter (the queues of issue 20) ----

// Node 0 holds `a` (priority 500, elastic 1..4, four 2-GPU replicas); node 1 holds `b`
// (priority 100, one 8-GPU replica). An LP gang of one 8-GPU replica (priority 300) preempts.
struct Filtered : Cluster {
  JobId a, b, p;
  Filtered() : Cluster(Cluster::Flat(2)) {
    Running elastic;
    elastic.priority = 500;
    elastic.min = 1;
    a = Run("a", {0, 0, 0, 0}, 2, elastic);
    b = Run("b", {1}, 8);
    p = Gang("p", 1, kWholeNode, 300);
  }
  // Only `a` may be a victim, with `budget` GPU milli to take from it.
  VictimFilter OnlyA(int64_t* budget) const {
    VictimFilter f;
    f.allowed = [this](const Job& j) { return j.id == a; };
    f.take = [budget](const Job&, int64_t gpu) {
      if (gpu > *budget) return false;
      *budget -= gpu;
      return true;
    };
    return f;
  }
};

TEST(PreemptPlanFilter, WithoutAFilterOnlyLowerPriorityWorkIsAVictim) {
  Filtered f;
  const PreemptionPlan plan = f.Plan(f.p);
  ASSERT_TRUE(plan.feasible) << plan.reason;
  EXPECT_EQ(f.JobNames(plan.evicted_jobs), Names{"b"});
}

TEST(PreemptPlanFilter, AnAllowedJobOfHigherPriorityIsAVictimWithinItsBudgetAndNoFurther) {
  Filtered f;
  int64_t budget = 8000;  // all of a
  PreemptionPlan plan = PreemptAction::Plan(f.c.state, f.p, kNow, {}, {}, f.OnlyA(&budget));
  ASSERT_TRUE(plan.feasible) << plan.reason;
  EXPECT_EQ(f.JobNames(plan.evicted_jobs), Names{"a"});
  EXPECT_EQ(f.NodeNames(plan.nodes), (std::multiset<std::string>{"n0"}));
  // A budget of 6 GPUs takes a's three surplus replicas (it keeps its min of 1), not all of it:
  // node 0 cannot be emptied, and b is not allowed.
  budget = 6000;
  plan = PreemptAction::Plan(f.c.state, f.p, kNow, {}, {}, f.OnlyA(&budget));
  EXPECT_FALSE(plan.feasible);
  EXPECT_TRUE(plan.evict.empty());
  EXPECT_EQ(plan.reason, "needs 1 replicas of (8 GPUs, 8000 milli-CPU, 0 MiB); even evicting all the work it may take back "
                         "the cluster holds 0");
}

TEST(PreemptPlanFilter, ABudgetTakesElasticSurplusFirstAndARankOrdersTheVictims) {
  // A 2-GPU preemptor: a's newest surplus replica is enough, and the budget lets it go first.
  Filtered f;
  const JobId small = f.Gang("small", 1, Req().Cpu(1000).Gpus(2), 300);
  int64_t budget = 2000;
  PreemptionPlan plan = PreemptAction::Plan(f.c.state, small, kNow, {}, {}, f.OnlyA(&budget));
  ASSERT_TRUE(plan.feasible) << plan.reason;
  EXPECT_TRUE(plan.evicted_jobs.empty());
  ASSERT_EQ(plan.shrunk.size(), 1u);
  EXPECT_EQ(plan.shrunk[0], (std::pair<JobId, int32_t>{f.a, 3}));
  EXPECT_EQ(f.TaskNames(plan.evict), Names{"a-3"});
  // Both allowed, b ranked first: b goes whole although a's surplus is free of cost.
  VictimFilter both;
  both.allowed = [](const Job&) { return true; };
  both.rank = [&](const Job& j) { return j.id == f.b ? 0 : 1; };
  plan = PreemptAction::Plan(f.c.state, f.p, kNow, {}, {}, both);
  ASSERT_TRUE(plan.feasible) << plan.reason;
  EXPECT_EQ(f.JobNames(plan.evicted_jobs), Names{"b"});
}

// What budgets admit follows C as of VictimFilter::budget_at_s, not as of the plan's time. Node 0
// holds x (8 GPUs, started 1,000 s before kNow, checkpoints every 600 s), node 1 holds y (4 GPUs,
// started 100 s before) and z (4 GPUs, not allowed). An 8-GPU preemptor may take 8 GPUs in all:
// offered y first (C 400,000 at kNow against x's 3,200,000), the budget keeps 4 GPUs, x no longer
// fits in it and z keeps node 1: infeasible. At kNow + 200 x has just checkpointed (C 0): offered
// x first, it empties node 0. So the plan follows the budget time, whenever it is made: as of kNow,
// infeasible at kNow and at kNow + 200 (by C at kNow + 200 it would evict x); as of kNow + 200, x
// at kNow + 200 and at kNow + 500 (where y, newer at an equal C of 2,400,000, would come first).
TEST(PreemptPlanFilter, WhatABudgetAdmitsFollowsTheVictimsCostAtTheBudgetTimeNotAtThePlansTime) {
  Cluster f = Cluster::Flat(2);
  Running rx;
  rx.started_s = kNow - 1000;
  rx.checkpoint_s = 600;
  const JobId x = f.Run("x", {0}, 8, rx);
  Running ry;
  ry.started_s = kNow - 100;
  const JobId y = f.Run("y", {1}, 4, ry);
  f.Run("z", {1}, 4, ry);
  const JobId p = f.Gang("p", 1, kWholeNode, 300);
  const auto plan = [&](int64_t now, int64_t budget_at) {
    VictimFilter filter;
    filter.allowed = [&](const Job& j) { return j.id == x || j.id == y; };
    filter.take = [budget = int64_t{8000}](const Job&, int64_t gpu) mutable {
      if (gpu > budget) return false;
      budget -= gpu;
      return true;
    };
    filter.budget_at_s = budget_at;
    return PreemptAction::Plan(f.c.state, p, now, {}, {}, filter);
  };
  for (const int64_t now : {kNow, kNow + 200}) {
    SCOPED_TRACE(now);
    const PreemptionPlan q = plan(now, kNow);
    EXPECT_FALSE(q.feasible);
    EXPECT_EQ(q.reason, "needs 1 replicas of (8 GPUs, 8000 milli-CPU, 0 MiB); even evicting all the work it may take back "
                        "the cluster holds 0");
  }
  for (const int64_t now : {kNow + 200, kNow + 500}) {
    SCOPED_TRACE(now);
    const PreemptionPlan q = plan(now, kNow + 200);
    ASSERT_TRUE(q.feasible) << q.reason;
    EXPECT_EQ(f.JobNames(q.evicted_jobs), Names{"x"});
  }
  // Without a budget time, the plan's own: feasible at kNow + 200, not at kNow + 500.
  EXPECT_TRUE(plan(kNow + 200, -1).feasible);
  EXPECT_FALSE(plan(kNow + 500, -1).feasible);
}

// A victim that checkpoints on its eviction notice (JobSpec::checkpoint_on_notice_s) loses
// nothing when the checkpoint fits in the grace period the victims get; otherwise, or when the
// grace period is unknown (-1), it loses the work since its last periodic checkpoint.
TEST(SecondsSinceCheckpoint, AVictimThatCheckpointsOnNoticeWithinTheGracePeriodLosesNothing) {
  Job j;
  j.started_at_s = 1000;
  j.spec.checkpoint_interval_s = 600;  // at 2300 s: last checkpoint 2200 s
  EXPECT_EQ(SecondsSinceCheckpoint(j, 2300), 100);
  EXPECT_EQ(SecondsSinceCheckpoint(j, 2300, 60), 100);  // no checkpoint on notice
  j.spec.checkpoint_on_notice_s = 60;
  EXPECT_EQ(SecondsSinceCheckpoint(j, 2300, 60), 0);
  EXPECT_EQ(SecondsSinceCheckpoint(j, 2300, 59), 100);
  EXPECT_EQ(SecondsSinceCheckpoint(j, 2300), 100);
  j.spec.checkpoint_interval_s = 0;  // no periodic checkpoints: the whole run
  EXPECT_EQ(SecondsSinceCheckpoint(j, 2300, 59), 1300);
  EXPECT_EQ(SecondsSinceCheckpoint(j, 2300, 120), 0);
}

// Reclaim's cost knows it: of two whole-node victims, the one that would lose more work by its
// periodic checkpoints is taken when it checkpoints on notice within the grace period.
TEST(PreemptPlan, AVictimThatCheckpointsOnNoticeWithinTheGracePeriodCostsNothing) {
  for (const int64_t on_notice : {0, 30, 61}) {
    Cluster g = Cluster::Flat(2);
    g.Fill(0, 100);  // C = 8000 x 100
    Running r;       // C = 8000 x 500, or 0 checkpointing on notice within 60 s
    r.started_s = kNow - 500;
    r.on_notice_s = on_notice;
    g.Run("lp1", {1}, 8, r);
    const JobId hp = g.Gang("hp", 1, kWholeNode);
    AllocateOptions o;
    o.grace_s = 60;
    const PreemptionPlan p = g.Plan(hp, o);
    EXPECT_EQ(g.JobNames(p.evicted_jobs), (Names{on_notice == 30 ? "lp1" : "lp0"})) << on_notice;
    EXPECT_EQ(p.cost, on_notice == 30 ? 0 : 8000 * 100) << on_notice;
  }
}

}  // namespace
}  // namespace estuary
