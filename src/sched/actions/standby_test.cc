// StandbyAction (SpotGPU): HP inference replicas in Standby lend their GPUs and CPU to spot work;
// spot gangs start on lent capacity all-or-nothing, packed onto the fullest lenders; restoring a
// replica evicts exactly the borrowers in its way; node failures handle both kinds of task.
#include "sched/actions/standby.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "sched/actions/allocate.h"
#include "sched/actions/failure.h"
#include "sched/actions/preempt.h"
#include "sched/framework/statement.h"
#include "sched/plugins/register.h"
#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::Idx;
using testing::Req;

// The free amounts of the whole state, to compare before and after a round trip.
struct Snapshot {
  std::vector<std::array<MilliGpu, kMaxGpusPerNode>> gpu_free;
  std::vector<MilliCpu> cpu_free;
  std::vector<MemMiB> mem_free;
  std::vector<int32_t> full_free;
  std::vector<uint32_t> lent_gpus, lent_free;
  std::vector<MilliCpu> lent_cpu, lent_cpu_free;
  int64_t allocated_gpu = 0;
  MilliCpu allocated_cpu = 0;
  int64_t bound = 0;
  size_t lending = 0;
  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};

Snapshot Snap(const ClusterState& s) {
  Snapshot p;
  for (const Node& n : s.nodes()) {
    p.gpu_free.push_back(n.gpu_free);
    p.cpu_free.push_back(n.cpu_free);
    p.mem_free.push_back(n.mem_free);
    p.full_free.push_back(n.full_free_gpus);
    p.lent_gpus.push_back(n.lent_gpus);
    p.lent_free.push_back(n.lent_free);
    p.lent_cpu.push_back(n.lent_cpu);
    p.lent_cpu_free.push_back(n.lent_cpu_free);
  }
  p.allocated_gpu = s.allocated_gpu_milli();
  p.allocated_cpu = s.allocated_cpu_milli();
  p.bound = s.num_bound_tasks();
  p.lending = s.lending_nodes().size();
  return p;
}

std::vector<int> GpusOf(const Task& t) { return std::vector<int>(t.gpus.begin(), t.gpus.end()); }

// A cluster of 8-GPU nodes with HP inference services and spot jobs.
struct Spot {
  testing::ClusterBuilder c;

  // An 8-GPU node; `spot` adds the label {"pool", "spot"}.
  NodeId AddNode(const std::string& name, bool spot = false, MemMiB mem = 393216) {
    NodeSpec s;
    s.name = name;
    s.cpu_milli = 96000;
    s.mem_mib = mem;
    s.gpu_count = 8;
    s.model = *c.state.models().Intern("V100");
    if (spot) s.labels.push_back({"pool", "spot"});
    auto id = c.state.AddNode(s);
    EXPECT_TRUE(id.ok());
    return *id;
  }
  // An HP inference service: one replica per entry of `gpus` on `node`, bound there and (when
  // `standby`) put into Standby.
  JobId Service(const std::string& name, NodeId node, const std::vector<GpuIndices>& gpus, MilliCpu cpu = 8000,
                MemMiB mem = 65536, bool standby = true) {
    JobSpec s;
    s.name = name;
    s.priority = 900;
    s.min_replicas = s.max_replicas = static_cast<int32_t>(gpus.size());
    JobId j = c.state.AddJob(s);
    for (size_t i = 0; i < gpus.size(); ++i) {
      TaskId t = c.state.AddTask(j, name + "-" + std::to_string(i),
                                 Req().Cpu(cpu).Mem(mem).Gpus(gpus[i].size), s.priority);
      c.state.Bind(t, node, gpus[i]);
      if (standby) c.state.EnterStandby(t);
    }
    return j;
  }
  // A spot job of `replicas` pending tasks of `gpus` GPUs each.
  JobId SpotJob(const std::string& name, int replicas, int gpus, int32_t min = 1, int32_t step = 1,
                MilliCpu cpu = 4000, MemMiB mem = 16384, bool preemptible = true) {
    JobSpec s;
    s.name = name;
    s.priority = 100;
    s.preemptible = preemptible;
    s.min_replicas = min;
    s.max_replicas = replicas;
    s.step = step;
    JobId j = c.state.AddJob(s);
    for (int i = 0; i < replicas; ++i) {
      c.state.AddTask(j, name + "-" + std::to_string(i), Req().Cpu(cpu).Mem(mem).Gpus(gpus), s.priority);
    }
    return j;
  }
  TaskId T(JobId j, int i) const { return c.state.job(j).tasks[i]; }
  int Bound(JobId j) const {
    int n = 0;
    for (TaskId t : c.state.job(j).tasks) n += c.state.task(t).state == TaskState::kBound;
    return n;
  }
  std::set<uint32_t> NodesOf(JobId j) const {
    std::set<uint32_t> out;
    for (TaskId t : c.state.job(j).tasks) {
      if (c.state.task(t).state == TaskState::kBound) out.insert(c.state.task(t).node.value());
    }
    return out;
  }
  void ExpectInvariants() const {
    const Status s = c.state.CheckInvariants();
    EXPECT_TRUE(s.ok()) << s.message();
  }
  std::unique_ptr<Session> Open() {
    SessionOptions o;
    o.policy = *OpenbPolicy("best-fit");
    o.seed = 3;
    return std::move(Session::Open(c.state, BuiltinRegistry(), PluginContext{&c.state, nullptr}, o)).value();
  }
};

TEST(Standby, EnteringAndLeavingStandbyLeavesTheStateAsItWas) {
  Spot s;
  NodeId n = s.AddNode("n0");
  JobId svc = s.Service("svc", n, {Idx({1, 2}), Idx({5})}, 8000, 65536, /*standby=*/false);
  s.ExpectInvariants();
  const Snapshot before = Snap(s.c.state);

  s.c.state.EnterStandby(s.T(svc, 0));
  s.c.state.EnterStandby(s.T(svc, 1));
  const Node& node = s.c.state.node(n);
  EXPECT_EQ(node.lent_gpus, 0b100110u);
  EXPECT_EQ(node.lent_free, 0b100110u);
  EXPECT_EQ(node.lent_cpu, 16000);
  EXPECT_EQ(node.lent_cpu_free, 16000);
  // Still taken for normal placement: nothing but the lending fields changed.
  EXPECT_EQ(node.gpu_free, before.gpu_free[0]);
  EXPECT_EQ(node.cpu_free, before.cpu_free[0]);
  EXPECT_EQ(s.c.state.allocated_gpu_milli(), before.allocated_gpu);
  EXPECT_EQ(s.c.state.lending_nodes(), std::vector<NodeId>{n});
  s.ExpectInvariants();

  ASSERT_TRUE(s.c.state.CanExitStandby(s.T(svc, 0)));
  s.c.state.ExitStandby(s.T(svc, 0));
  s.ExpectInvariants();
  s.c.state.ExitStandby(s.T(svc, 1));
  EXPECT_EQ(Snap(s.c.state), before);
  EXPECT_EQ(GpusOf(s.c.state.task(s.T(svc, 0))), (std::vector<int>{1, 2}));
  s.ExpectInvariants();
}

TEST(Standby, NormalPlacementNeverUsesTheGpusOfAStandbyReplica) {
  Spot s;
  NodeId n0 = s.AddNode("n0");
  s.Service("svc", n0, {Idx({0, 1, 2, 3, 4, 5, 6, 7})});
  JobSpec js;
  js.name = "normal";
  js.preemptible = true;
  const JobId j = s.c.state.AddJob(js);
  s.c.state.AddTask(j, "normal-0", Req().Cpu(1000).Gpus(1));
  {
    auto session = s.Open();
    const JobAttempt a = AllocateAction::TryStart(*session, s.c.state, j);
    EXPECT_FALSE(a.started);
    EXPECT_EQ(s.Bound(j), 0);
  }
  s.ExpectInvariants();
  // With a free node beside it, the job goes there and the lent GPUs stay untouched.
  NodeId n1 = s.AddNode("n1");
  auto session = s.Open();
  ASSERT_TRUE(AllocateAction::TryStart(*session, s.c.state, j).started);
  EXPECT_EQ(s.NodesOf(j), (std::set<uint32_t>{n1.value()}));
  EXPECT_EQ(s.c.state.node(n0).lent_free, 0xFFu);
  EXPECT_FALSE(s.c.state.task(s.T(j, 0)).borrowed);
  s.ExpectInvariants();
}

TEST(Standby, ASpotReplicaPacksOntoTheLenderWithTheFewestLentGpusLeft) {
  Spot s;
  NodeId n0 = s.AddNode("n0"), n1 = s.AddNode("n1"), n2 = s.AddNode("n2");
  s.Service("a", n0, {Idx({0, 1, 2, 3})});
  s.Service("b", n1, {Idx({0, 1})});
  s.Service("c", n2, {Idx({0, 1, 2})});
  const JobId j = s.SpotJob("spot", 1, 2);
  const std::vector<int32_t> no_evictions;
  const JobAttempt a = StandbyAction::PlaceOnLent(s.c.state, j, no_evictions);
  ASSERT_TRUE(a.started) << a.reason;
  EXPECT_EQ(a.granted, 1);
  const Task& t = s.c.state.task(s.T(j, 0));
  EXPECT_EQ(t.node, n1);  // 0 lent GPUs left there, 1 on n2, 2 on n0
  EXPECT_TRUE(t.borrowed);
  EXPECT_EQ(GpusOf(t), (std::vector<int>{0, 1}));
  EXPECT_EQ(s.c.state.node(n1).lent_free, 0u);
  EXPECT_EQ(s.c.state.node(n1).lent_cpu_free, 8000 - 4000);
  EXPECT_EQ(s.c.state.lending_nodes().size(), 2u);  // n1 has nothing left to lend
  s.ExpectInvariants();
}

TEST(Standby, OnATieASpotPoolNodeWinsThenFewerPastEvictionsThenTheLowerId) {
  Spot s;
  NodeId n0 = s.AddNode("n0"), n1 = s.AddNode("n1", /*spot=*/true), n2 = s.AddNode("n2", true), n3 = s.AddNode("n3");
  for (NodeId n : {n0, n1, n2, n3}) s.Service("svc-" + std::to_string(n.value()), n, {Idx({4, 5})});
  const std::vector<int32_t> evictions = {0, 5, 2, 0};
  const JobId first = s.SpotJob("first", 1, 1);
  ASSERT_TRUE(StandbyAction::PlaceOnLent(s.c.state, first, evictions).started);
  EXPECT_EQ(s.NodesOf(first), (std::set<uint32_t>{n2.value()}));  // spot, 2 evictions < 5
  EXPECT_EQ(GpusOf(s.c.state.task(s.T(first, 0))), (std::vector<int>{4}));
  s.ExpectInvariants();
  // n2 now has one lent GPU left: packing takes it before any tie-break.
  const JobId second = s.SpotJob("second", 1, 1);
  ASSERT_TRUE(StandbyAction::PlaceOnLent(s.c.state, second, evictions).started);
  EXPECT_EQ(s.NodesOf(second), (std::set<uint32_t>{n2.value()}));
  EXPECT_EQ(GpusOf(s.c.state.task(s.T(second, 0))), (std::vector<int>{5}));
  // Among n0, n1, n3 (2 lent GPUs each), a 2-GPU replica: spot n1 despite its evictions.
  const JobId third = s.SpotJob("third", 1, 2);
  ASSERT_TRUE(StandbyAction::PlaceOnLent(s.c.state, third, evictions).started);
  EXPECT_EQ(s.NodesOf(third), (std::set<uint32_t>{n1.value()}));
  // Between n0 and n3 (no spot label, no evictions recorded): the lower id.
  const JobId fourth = s.SpotJob("fourth", 1, 2);
  ASSERT_TRUE(StandbyAction::PlaceOnLent(s.c.state, fourth, {}).started);
  EXPECT_EQ(s.NodesOf(fourth), (std::set<uint32_t>{n0.value()}));
  EXPECT_EQ(s.c.state.lending_nodes(), std::vector<NodeId>{n3});
  s.ExpectInvariants();
}

TEST(Standby, AGangThatDoesNotFitWhollyOnLentCapacityBindsNothing) {
  Spot s;
  NodeId n0 = s.AddNode("n0"), n1 = s.AddNode("n1");
  s.Service("a", n0, {Idx({0, 1, 2, 3})});
  s.Service("b", n1, {Idx({0, 1, 2, 3, 4, 5})});
  const Snapshot before = Snap(s.c.state);
  const JobId gang = s.SpotJob("gang", 3, 4, /*min=*/3);
  const JobAttempt a = StandbyAction::PlaceOnLent(s.c.state, gang, {});
  EXPECT_FALSE(a.started);
  EXPECT_EQ(a.kind, OutcomeKind::kRetryable);
  EXPECT_EQ(a.reason.rfind("2/3 replicas fit on lent capacity at once", 0), 0u) << a.reason;
  EXPECT_EQ(s.Bound(gang), 0);
  EXPECT_EQ(Snap(s.c.state), before);
  s.ExpectInvariants();
  // An elastic job of step 2 takes whole steps only: 5 one-GPU replicas fit, 4 are granted.
  s.Service("c", n1, {Idx({6})});
  const JobId elastic = s.SpotJob("elastic", 8, 2, /*min=*/2, /*step=*/2);
  const JobAttempt e = StandbyAction::PlaceOnLent(s.c.state, elastic, {});
  ASSERT_TRUE(e.started) << e.reason;
  EXPECT_EQ(e.granted, 4);  // 11 lent GPUs hold 5 two-GPU replicas
  EXPECT_EQ(s.Bound(elastic), 4);
  s.ExpectInvariants();
}

TEST(Standby, OnlyPreemptibleWholeGpuJobsMayBorrow) {
  Spot s;
  NodeId n0 = s.AddNode("n0");
  s.Service("svc", n0, {Idx({0, 1, 2, 3})});
  const JobId firm = s.SpotJob("firm", 1, 1, 1, 1, 4000, 16384, /*preemptible=*/false);
  const JobAttempt a = StandbyAction::PlaceOnLent(s.c.state, firm, {});
  EXPECT_FALSE(a.started);
  EXPECT_EQ(a.kind, OutcomeKind::kInfeasible);
  EXPECT_EQ(a.reason, "only preemptible jobs may run on lent capacity");
  JobSpec js;
  js.name = "shared";
  js.preemptible = true;
  const JobId shared = s.c.state.AddJob(js);
  s.c.state.AddTask(shared, "shared-0", Req().SharedGpu(500));
  const JobAttempt b = StandbyAction::PlaceOnLent(s.c.state, shared, {});
  EXPECT_FALSE(b.started);
  EXPECT_EQ(b.kind, OutcomeKind::kInfeasible);
  EXPECT_EQ(s.c.state.node(n0).lent_free, 0xFu);
  s.ExpectInvariants();
}

TEST(Standby, ABorrowerNeedsRealFreeMemoryBecauseMemoryIsNotLent) {
  Spot s;
  // 100 GiB node: the service keeps its 80 GiB while in Standby, 20 GiB stay free.
  NodeId n0 = s.AddNode("n0", false, 102400);
  s.Service("svc", n0, {Idx({0, 1, 2, 3, 4, 5, 6, 7})}, 8000, 81920);
  const JobId big = s.SpotJob("big", 1, 1, 1, 1, 1000, /*mem=*/30720);
  EXPECT_FALSE(s.c.state.CanBindBorrowed(s.T(big, 0), n0, Idx({0})));
  const JobAttempt a = StandbyAction::PlaceOnLent(s.c.state, big, {});
  EXPECT_FALSE(a.started);
  EXPECT_EQ(a.kind, OutcomeKind::kRetryable);
  EXPECT_EQ(s.c.state.node(n0).lent_free, 0xFFu);
  const JobId small = s.SpotJob("small", 2, 1, 1, 1, 1000, /*mem=*/10240);
  const JobAttempt b = StandbyAction::PlaceOnLent(s.c.state, small, {});
  ASSERT_TRUE(b.started);
  EXPECT_EQ(b.granted, 2);
  EXPECT_EQ(s.c.state.node(n0).mem_free, 0);
  EXPECT_EQ(s.c.state.fits()[n0.value()].mem_free, 0);
  s.ExpectInvariants();
}

// One node, two standby replicas: a on GPUs 0-3, b on GPUs 4-7 (8 cores each).
struct TwoLenders : Spot {
  NodeId n0;
  JobId svc;
  TwoLenders() {
    n0 = AddNode("n0");
    svc = Service("svc", n0, {Idx({0, 1, 2, 3}), Idx({4, 5, 6, 7})}, 8000);
  }
  TaskId Borrow(const std::string& name, GpuIndices gpus, MilliCpu cpu) {
    const JobId j = SpotJob(name, 1, gpus.size, 1, 1, cpu, 1024);
    const TaskId t = T(j, 0);
    c.state.BindBorrowed(t, n0, gpus);
    return t;
  }
};

TEST(Standby, RestoringAReplicaEvictsExactlyTheBorrowersOnItsGpus) {
  TwoLenders s;
  const TaskId b1 = s.Borrow("b1", Idx({0, 1}), 1000);
  const TaskId b2 = s.Borrow("b2", Idx({4, 5}), 1000);
  const TaskId b3 = s.Borrow("b3", Idx({3}), 1000);
  s.ExpectInvariants();
  const TaskId a = s.T(s.svc, 0);
  EXPECT_FALSE(s.c.state.CanExitStandby(a));
  const std::vector<TaskId> victims = StandbyAction::RestoreVictims(s.c.state, a);
  EXPECT_EQ(victims, (std::vector<TaskId>{b1, b3}));
  for (TaskId v : victims) s.c.state.Unbind(v);
  s.ExpectInvariants();
  ASSERT_TRUE(s.c.state.CanExitStandby(a));
  s.c.state.ExitStandby(a);
  EXPECT_FALSE(s.c.state.task(a).standby);
  EXPECT_EQ(GpusOf(s.c.state.task(a)), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(s.c.state.node(s.n0).lent_gpus, 0xF0u);
  EXPECT_EQ(s.c.state.task(b2).state, TaskState::kBound);  // on b's GPUs: untouched
  EXPECT_TRUE(StandbyAction::RestoreVictims(s.c.state, s.T(s.svc, 1)) == std::vector<TaskId>{b2});
  s.ExpectInvariants();
}

TEST(Standby, RestoringAReplicaAlsoEvictsTheNewestBorrowersWhenTheLentCpuWouldBeShort) {
  TwoLenders s;
  const TaskId b1 = s.Borrow("b1", Idx({0}), 2000);   // on a's GPUs
  const TaskId b2 = s.Borrow("b2", Idx({4}), 1000);   // on b's GPUs, older
  const TaskId b4 = s.Borrow("b4", Idx({5}), 12000);  // on b's GPUs, newest
  // Lent CPU 16000 - 15000 used = 1000 free; + b1's 2000 = 3000 < a's 8000: b4 (newest) goes too.
  const std::vector<TaskId> victims = StandbyAction::RestoreVictims(s.c.state, s.T(s.svc, 0));
  EXPECT_EQ(victims, (std::vector<TaskId>{b1, b4}));
  for (TaskId v : victims) s.c.state.Unbind(v);
  s.c.state.ExitStandby(s.T(s.svc, 0));
  EXPECT_EQ(s.c.state.task(b2).state, TaskState::kBound);
  EXPECT_EQ(s.c.state.node(s.n0).lent_cpu, 8000);
  EXPECT_EQ(s.c.state.node(s.n0).lent_cpu_free, 7000);
  EXPECT_EQ(GpusOf(s.c.state.task(s.T(s.svc, 0))), (std::vector<int>{0, 1, 2, 3}));
  s.ExpectInvariants();
}

// "Newest" is the run's start (Job::started_at_s), not the order the borrowers were bound in on
// the node: an engine rebuilt from its jobs (the service's compaction, a restart) binds them in
// job order, and it must choose the same victims. `late` was bound first but started last.
TEST(Standby, TheNewestBorrowersAreThoseWhoseRunStartedLastWhateverOrderTheyWereBoundIn) {
  TwoLenders s;
  const TaskId b1 = s.Borrow("b1", Idx({0}), 2000);       // on a's GPUs
  const TaskId late = s.Borrow("late", Idx({4}), 6000);   // on b's GPUs, bound first
  const TaskId early = s.Borrow("early", Idx({5}), 6000); // on b's GPUs, bound last
  s.c.state.SetJobStart(s.c.state.task(b1).job, 300);
  s.c.state.SetJobStart(s.c.state.task(late).job, 500);
  s.c.state.SetJobStart(s.c.state.task(early).job, 100);
  // Lent CPU 16000 - 14000 used = 2000 free; + b1's 2000 = 4000 < a's 8000: one more must go,
  // the one whose run started last (before: the last bound, `early`).
  EXPECT_EQ(StandbyAction::RestoreVictims(s.c.state, s.T(s.svc, 0)), (std::vector<TaskId>{b1, late}));
  // Equal starts: the higher task id goes (`early`, created after `late`).
  s.c.state.SetJobStart(s.c.state.task(early).job, 500);
  EXPECT_EQ(StandbyAction::RestoreVictims(s.c.state, s.T(s.svc, 0)), (std::vector<TaskId>{b1, early}));
  s.ExpectInvariants();
}

TEST(Standby, AStatementRollsBackEvictionsOfBorrowersAndStandbyReplicas) {
  TwoLenders s;
  const TaskId b = s.Borrow("b", Idx({1, 2}), 1000);
  const Snapshot before = Snap(s.c.state);
  {
    Statement st(s.c.state);
    st.Evict(b);
    st.Evict(s.T(s.svc, 0));
    EXPECT_EQ(s.c.state.node(s.n0).lent_gpus, 0xF0u);
    s.ExpectInvariants();
  }  // rolled back
  EXPECT_EQ(Snap(s.c.state), before);
  EXPECT_TRUE(s.c.state.task(b).borrowed);
  EXPECT_TRUE(s.c.state.task(s.T(s.svc, 0)).standby);
  s.ExpectInvariants();
}

TEST(Standby, PreemptionNeitherEvictsAStandbyJobNorCountsABorrowersGpusAsFreed) {
  Spot s;
  NodeId n0 = s.AddNode("n0");
  // A low-priority preemptible job in Standby on GPUs 0-3, lending them to a spot borrower.
  JobSpec lp;
  lp.name = "lp";
  lp.priority = 100;
  lp.preemptible = true;
  const JobId lpj = s.c.state.AddJob(lp);
  const TaskId lpt = s.c.state.AddTask(lpj, "lp-0", Req().Cpu(8000).Gpus(4), 100);
  s.c.state.Bind(lpt, n0, Idx({0, 1, 2, 3}));
  s.c.state.EnterStandby(lpt);
  const JobId spot = s.SpotJob("spot", 1, 4);
  ASSERT_TRUE(StandbyAction::PlaceOnLent(s.c.state, spot, {}).started);
  // A non-preemptible service fills GPUs 4-7.
  s.Service("svc", n0, {Idx({4, 5, 6, 7})}, 8000, 65536, /*standby=*/false);
  JobSpec hp;
  hp.name = "hp";
  hp.priority = 900;
  const JobId hpj = s.c.state.AddJob(hp);
  s.c.state.AddTask(hpj, "hp-0", Req().Cpu(1000).Gpus(1), 900);
  const PreemptionPlan plan = PreemptAction::Plan(s.c.state, hpj, 0);
  EXPECT_FALSE(plan.feasible);
  EXPECT_TRUE(plan.evict.empty());
  s.ExpectInvariants();
}

TEST(StandbyNodeFailure, BorrowersLeaveFirstAndEveryJobThatLostAReplicaShrinksOrRequeues) {
  Spot s;
  NodeId n0 = s.AddNode("n0"), n1 = s.AddNode("n1");
  // A rigid two-replica service, one standby replica on GPUs 0-3 of each node; an elastic spot
  // job packed 4 + 2 onto them; a rigid spot gang on the 2 lent GPUs left on n1.
  JobSpec svc_spec;
  svc_spec.name = "svc";
  svc_spec.priority = 900;
  svc_spec.min_replicas = svc_spec.max_replicas = 2;
  const JobId svc = s.c.state.AddJob(svc_spec);
  for (NodeId n : {n0, n1}) {
    const TaskId t = s.c.state.AddTask(svc, "svc-" + std::to_string(n.value()), Req().Cpu(8000).Mem(1024).Gpus(4), 900);
    s.c.state.Bind(t, n, Idx({0, 1, 2, 3}));
    s.c.state.EnterStandby(t);
  }
  const JobId elastic = s.SpotJob("elastic", 6, 1, /*min=*/1, 1, /*cpu=*/1000);
  ASSERT_EQ(StandbyAction::PlaceOnLent(s.c.state, elastic, {}).granted, 6);
  const JobId gang = s.SpotJob("gang", 2, 1, /*min=*/2, 1, /*cpu=*/1000);
  ASSERT_TRUE(StandbyAction::PlaceOnLent(s.c.state, gang, {}).started);
  EXPECT_EQ(s.NodesOf(gang), (std::set<uint32_t>{n1.value()}));
  EXPECT_TRUE(s.c.state.lending_nodes().empty());
  s.ExpectInvariants();

  // n0 fails: its 4 borrowers, then its standby replica, go. The service is rigid, so its replica
  // on n1 is evicted too — after the borrowers on its GPUs (2 of the elastic job, the gang), so
  // the elastic job, first shrunk to its 2 replicas on n1, loses those as well.
  const std::vector<FailureEffect> effects = NodeFailureAction::NodeDown(s.c.state, n0);
  s.ExpectInvariants();
  ASSERT_EQ(effects.size(), 3u);
  for (const FailureEffect& e : effects) {
    EXPECT_TRUE(e.requeued) << s.c.state.job(e.job).spec.name;
    EXPECT_EQ(e.replicas_after, 0);
    EXPECT_EQ(s.Bound(e.job), 0);
  }
  EXPECT_EQ(effects[0].job, svc);
  EXPECT_EQ(effects[0].replicas_before, 2);
  EXPECT_EQ(effects[1].job, elastic);
  EXPECT_EQ(effects[1].replicas_before, 6);
  EXPECT_EQ(effects[2].job, gang);
  EXPECT_EQ(effects[2].replicas_before, 2);
  for (TaskId t : s.c.state.job(svc).tasks) EXPECT_FALSE(s.c.state.task(t).standby);
  for (TaskId t : s.c.state.job(elastic).tasks) EXPECT_FALSE(s.c.state.task(t).borrowed);
  EXPECT_TRUE(s.c.state.lending_nodes().empty());
  EXPECT_EQ(s.c.state.node(n1).lent_gpus, 0u);
  EXPECT_EQ(s.c.state.allocated_gpu_milli(), 0);
  EXPECT_EQ(s.c.state.num_bound_tasks(), 0);
  EXPECT_EQ(s.c.state.node(n1).mem_free, s.c.state.node(n1).spec.mem_mib);
}

TEST(StandbyNodeFailure, AnElasticBorrowerShrinksAndAnotherNodesStandbyReplicaStaysLent) {
  Spot s;
  NodeId n0 = s.AddNode("n0"), n1 = s.AddNode("n1");
  const JobId a = s.Service("a", n0, {Idx({0, 1})});
  const JobId b = s.Service("b", n1, {Idx({0, 1})});
  const JobId elastic = s.SpotJob("elastic", 4, 1, /*min=*/1);
  ASSERT_EQ(StandbyAction::PlaceOnLent(s.c.state, elastic, {}).granted, 4);
  const std::vector<FailureEffect> effects = NodeFailureAction::NodeDown(s.c.state, n0);
  s.ExpectInvariants();
  ASSERT_EQ(effects.size(), 2u);
  EXPECT_EQ(effects[0].job, a);
  EXPECT_TRUE(effects[0].requeued);
  EXPECT_EQ(effects[1].job, elastic);
  EXPECT_FALSE(effects[1].requeued);
  EXPECT_EQ(effects[1].replicas_before, 4);
  EXPECT_EQ(effects[1].replicas_after, 2);
  EXPECT_EQ(s.NodesOf(elastic), (std::set<uint32_t>{n1.value()}));
  EXPECT_TRUE(s.c.state.task(s.T(b, 0)).standby);
  EXPECT_EQ(s.c.state.node(n0).lent_gpus, 0u);
  EXPECT_EQ(s.c.state.lending_nodes().size(), 0u);  // n1 lends 2 GPUs, both borrowed
  // The down node is no lender any more; a new borrower finds no room.
  const JobId late = s.SpotJob("late", 1, 1);
  EXPECT_FALSE(StandbyAction::PlaceOnLent(s.c.state, late, {}).started);
  s.ExpectInvariants();
}

}  // namespace
}  // namespace estuary
