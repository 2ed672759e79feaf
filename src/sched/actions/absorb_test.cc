// AbsorbAction and AllocateAction::TryGrow: running elastic jobs take spare capacity in whole
// steps, up to their max, in priority order and by water-filling, never past a waiting
// higher-priority job, a topology domain or another job's reservation.
#include "sched/actions/absorb.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sched/plugins/register.h"
#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::Req;
using Grown = std::vector<std::pair<JobId, int32_t>>;

// testing::AswCluster (8-GPU nodes n0, n1, ... in the named ASWs) with elastic jobs.
struct Cluster : testing::AswCluster {
  using AswCluster::AswCluster;
  static Cluster Flat(int nodes) { return Cluster(std::vector<std::string>(nodes, "")); }

  // A job of `tasks` tasks of `req`, min/max/step replicas and a priority.
  JobId Elastic(const std::string& name, int tasks, int min, int max, int step, TaskRequest req, int priority = 0,
                TopologyConstraint topology = {}) {
    JobSpec s;
    s.name = name;
    s.min_replicas = min;
    s.max_replicas = max;
    s.step = step;
    s.priority = priority;
    s.topology = topology;
    JobId j = c.state.AddJob(s);
    for (int i = 0; i < tasks; ++i) c.state.AddTask(j, name + "-" + std::to_string(i), req);
    return j;
  }
  TopologyConstraint InOneAsw() const {
    TopologyConstraint t;
    t.plane = data;
    t.required_level = 0;
    return t;
  }
  TopologyConstraint PreferringOneAsw() const {
    TopologyConstraint t;
    t.plane = data;
    t.preferred_level = 0;
    return t;
  }
  // Binds the next `count` pending tasks of `job` (task order) on node i, each on its lowest
  // wholly free GPUs.
  void RunOn(JobId job, int i, int count) {
    for (TaskId t : c.state.job(job).tasks) {
      if (count == 0) break;
      if (c.state.task(t).state != TaskState::kPending) continue;
      GpuIndices gpus;
      const Node& n = c.state.node(N(i));
      for (int k = 0; k < n.spec.gpu_count && gpus.size < c.state.task(t).req.gpu_count; ++k) {
        if (n.gpu_free[k] == kMilliPerGpu) gpus.Push(k);
      }
      c.state.Bind(t, N(i), gpus);
      --count;
    }
    ASSERT_EQ(count, 0) << "too few pending tasks";
  }
  // Fills node i with a single-GPU job per GPU, leaving `free` GPUs free.
  void Fill(int i, int free) {
    const int busy = 8 - free - (8 - c.state.node(N(i)).full_free_gpus);
    for (int k = 0; k < busy; ++k) {
      RunOn(Elastic("fill-n" + std::to_string(i) + "-" + std::to_string(c.state.jobs().size()), 1, 1, 1, 1,
                    Req().Gpus(1)),
            i, 1);
    }
  }
  std::unique_ptr<Session> Open() {
    SessionOptions o;
    o.policy = *OpenbPolicy("best-fit");
    o.seed = 3;
    return std::move(Session::Open(c.state, BuiltinRegistry(), PluginContext{&c.state, nullptr}, o)).value();
  }
  int Bound(JobId j) const {
    int n = 0;
    for (TaskId t : c.state.job(j).tasks) n += c.state.task(t).state == TaskState::kBound;
    return n;
  }
  // The bound replicas of `job` per ASW name.
  std::map<std::string, int> PerAsw(JobId j) const {
    std::map<std::string, int> out;
    for (TaskId t : c.state.job(j).tasks) {
      if (c.state.task(t).state != TaskState::kBound) continue;
      const DomainId d = c.state.topology().NodeDomain(c.state.task(t).node, data, 0);
      ++out[d.valid() ? c.state.topology().domain(d).name : "-"];
    }
    return out;
  }
  // Whether the bound tasks of `job` are exactly its first Bound(job) tasks in task order.
  bool BoundIsAPrefix(JobId j) const {
    const auto& tasks = c.state.job(j).tasks;
    const int b = Bound(j);
    for (int i = 0; i < b; ++i) {
      if (c.state.task(tasks[i]).state != TaskState::kBound) return false;
    }
    return true;
  }
  void ExpectValid() const {
    const Status s = c.state.CheckInvariants();
    EXPECT_TRUE(s.ok()) << s.message();
  }
};

constexpr int32_t kNoneWaiting = INT32_MIN;

// ---- AllocateAction::TryGrow ----

TEST(TryGrow, AddsTheLargestWholeNumberOfStepsThatFitsAndRollsBackThePartialStep) {
  Cluster g = Cluster::Flat(1);
  JobId j = g.Elastic("pp", 8, 2, 8, 2, Req().Gpus(1));
  g.RunOn(j, 0, 2);
  g.Fill(0, 5);  // 5 GPUs of room: 2 whole steps, not 5 replicas
  auto s = g.Open();
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, AllocateOptions{}), 4);
  g.ExpectValid();
  EXPECT_EQ(g.Bound(j), 6);
  EXPECT_TRUE(g.BoundIsAPrefix(j));  // grown at the end of the task order
  EXPECT_EQ(g.c.state.node(g.N(0)).full_free_gpus, 1);  // the fifth replica was rolled back
}

TEST(TryGrow, WithoutAlignAddsEveryReplicaThatFits) {
  Cluster g = Cluster::Flat(1);
  JobId j = g.Elastic("pp", 8, 2, 8, 2, Req().Gpus(1));
  g.RunOn(j, 0, 2);
  g.Fill(0, 5);
  auto s = g.Open();
  AllocateOptions o;
  o.align = false;
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, o), 5);
  g.ExpectValid();
}

TEST(TryGrow, MaxNewCapsTheGrowthToWholeSteps) {
  Cluster g = Cluster::Flat(2);
  JobId j = g.Elastic("pp", 8, 2, 8, 2, Req().Gpus(1));
  g.RunOn(j, 0, 2);
  auto s = g.Open();
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, AllocateOptions{}, 3), 2);
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, AllocateOptions{}, 1), 0);  // below one step
  g.ExpectValid();
  EXPECT_EQ(g.Bound(j), 4);
}

TEST(TryGrow, NeverGrowsPastMaxReplicas) {
  Cluster g = Cluster::Flat(4);
  JobId j = g.Elastic("e", 20, 2, 7, 2, Req().Gpus(1));
  g.RunOn(j, 0, 2);
  auto s = g.Open();
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, AllocateOptions{}), 4);  // 6: one more step would be 8 > 7
  g.ExpectValid();
  EXPECT_EQ(g.Bound(j), 6);
}

TEST(TryGrow, AJobThatIsNotRunningDoesNotGrow) {
  Cluster g = Cluster::Flat(2);
  JobId idle = g.Elastic("idle", 8, 1, 8, 1, Req().Gpus(1));
  JobId below_min = g.Elastic("below", 8, 4, 8, 1, Req().Gpus(1));
  g.RunOn(below_min, 0, 2);  // 2 bound of min 4: not a running gang
  auto s = g.Open();
  const uint64_t epoch = g.c.state.epoch();
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, idle, AllocateOptions{}), 0);
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, below_min, AllocateOptions{}), 0);
  EXPECT_EQ(g.c.state.epoch(), epoch);
  g.ExpectValid();
}

TEST(TryGrow, AJobAtItsMaxDoesNotGrow) {
  Cluster g = Cluster::Flat(2);
  JobId j = g.Elastic("full", 8, 2, 4, 2, Req().Gpus(1));
  g.RunOn(j, 0, 4);
  auto s = g.Open();
  const uint64_t epoch = g.c.state.epoch();
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, AllocateOptions{}), 0);
  EXPECT_EQ(g.c.state.epoch(), epoch);
  EXPECT_EQ(g.Bound(j), 4);
}

TEST(TryGrow, AJobWithoutPendingTasksDoesNotGrow) {
  Cluster g = Cluster::Flat(2);
  JobId j = g.Elastic("all", 3, 1, 8, 1, Req().Gpus(1));
  g.RunOn(j, 0, 3);
  auto s = g.Open();
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, AllocateOptions{}), 0);
}

TEST(TryGrow, ARequiredLevelJobGrowsOnlyInsideTheAswItRunsIn) {
  Cluster g({"asw1", "asw1", "asw1", "asw2", "asw2", "asw2", "asw2"});
  JobId j = g.Elastic("train", 8, 2, 8, 1, Req().Gpus(8), 0, g.InOneAsw());
  g.RunOn(j, 0, 1);
  g.RunOn(j, 1, 1);
  auto s = g.Open();
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, AllocateOptions{}), 1);  // asw1 had one free node
  g.ExpectValid();
  EXPECT_EQ(g.PerAsw(j), (std::map<std::string, int>{{"asw1", 3}}));
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, AllocateOptions{}), 0);  // asw2's 4 free nodes stay free
  EXPECT_EQ(g.c.state.allocated_gpu_milli(), 3 * 8000);
}

TEST(TryGrow, ARequiredLevelJobSpreadOverTwoAswsDoesNotGrow) {
  Cluster g({"asw1", "asw1", "asw2", "asw2"});
  JobId j = g.Elastic("train", 8, 2, 8, 1, Req().Gpus(8), 0, g.InOneAsw());
  g.RunOn(j, 0, 1);
  g.RunOn(j, 2, 1);  // e.g. started while topology was off
  auto s = g.Open();
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, AllocateOptions{}), 0);
  AllocateOptions off;
  off.topology = false;
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, off), 2);  // topology off: anywhere
  g.ExpectValid();
}

TEST(TryGrow, APreferredLevelJobFillsTheAswsItUsesBeforeGoingElsewhere) {
  Cluster g({"asw0", "asw0", "asw0", "asw1", "asw1", "asw1"});
  JobId j = g.Elastic("train", 8, 1, 8, 1, Req().Gpus(8), 0, g.PreferringOneAsw());
  g.RunOn(j, 4, 1);  // runs in asw1, which has two more free nodes
  auto s = g.Open();
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, AllocateOptions{}, 2), 2);
  EXPECT_EQ(g.PerAsw(j), (std::map<std::string, int>{{"asw1", 3}}));
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, AllocateOptions{}, 2), 2);  // asw1 full: anywhere
  EXPECT_EQ(g.PerAsw(j), (std::map<std::string, int>{{"asw0", 2}, {"asw1", 3}}));
  g.ExpectValid();
}

TEST(TryGrow, NodesHeldForAnotherJobAreNeverUsedButItsOwnAre) {
  Cluster g = Cluster::Flat(4);
  JobId j = g.Elastic("e", 8, 1, 8, 1, Req().Gpus(8));
  g.RunOn(j, 0, 1);
  JobId other = g.Elastic("waiting", 2, 2, 2, 1, Req().Gpus(8));
  const std::vector<NodeId> theirs = {g.N(2), g.N(3)};
  g.c.state.AddReservation(other, theirs);
  auto s = g.Open();
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, AllocateOptions{}), 1);  // n1 only
  EXPECT_EQ(g.c.state.node(g.N(2)).tasks.size(), 0u);
  EXPECT_EQ(g.c.state.node(g.N(3)).tasks.size(), 0u);
  g.ExpectValid();

  // Released and held for the growing job instead: it uses its own held nodes and keeps the hold.
  g.c.state.ReleaseReservation(g.c.state.job(other).reservation);
  g.c.state.AddReservation(j, theirs);
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, AllocateOptions{}), 2);
  EXPECT_EQ(g.Bound(j), 4);
  EXPECT_TRUE(g.c.state.job(j).reservation.valid());
  g.ExpectValid();
}

TEST(TryGrow, DomainPackingAppliesAsInTryStartForAJobWithoutConstraint) {
  Cluster g({"asw0", "asw0", "asw0", "asw0", "asw1", "asw1", "asw1", "asw1", "asw2", "asw2", "asw2", "asw2"});
  JobId j = g.Elastic("e", 8, 1, 8, 1, Req().Gpus(8));
  g.RunOn(j, 0, 1);
  for (int i : {4, 8, 9, 10}) g.RunOn(g.Elastic("w" + std::to_string(i), 1, 1, 1, 1, Req().Gpus(8)), i, 1);
  AllocateOptions packing;
  packing.pack_plane = g.data;
  packing.pack_level = 0;
  auto s = g.Open();
  // asw2 is the most used ASW with a wholly free node, then asw0 and asw1 tie (asw0 first).
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, packing, 1), 1);
  EXPECT_EQ(g.PerAsw(j), (std::map<std::string, int>{{"asw0", 1}, {"asw2", 1}}));
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, j, packing, 1), 1);
  EXPECT_EQ(g.PerAsw(j), (std::map<std::string, int>{{"asw0", 2}, {"asw2", 1}}));
  g.ExpectValid();
}

// ---- AbsorbAction ----

TEST(Absorb, AnElasticJobGrowsByWholeStepsOnly) {
  Cluster g = Cluster::Flat(1);
  JobId j = g.Elastic("pp", 8, 2, 8, 2, Req().Gpus(1));
  g.RunOn(j, 0, 2);
  g.Fill(0, 5);
  auto s = g.Open();
  const std::vector<JobId> running = {j};
  const AbsorbResult r = AbsorbAction::Run(*s, g.c.state, running, kNoneWaiting, AllocateOptions{});
  g.ExpectValid();
  EXPECT_EQ(r.grown, (Grown{{j, 4}}));  // two steps of 2, not the 5 replicas that fit
  EXPECT_EQ(r.replicas_added, 4);
  EXPECT_EQ(g.Bound(j), 6);
  EXPECT_TRUE(g.BoundIsAPrefix(j));
}

TEST(Absorb, AJobGrowsToItsMaxAndNeverBeyond) {
  Cluster g = Cluster::Flat(4);
  JobId j = g.Elastic("e", 16, 2, 8, 2, Req().Gpus(1));
  g.RunOn(j, 0, 2);
  auto s = g.Open();
  const std::vector<JobId> running = {j};
  const AbsorbResult r = AbsorbAction::Run(*s, g.c.state, running, kNoneWaiting, AllocateOptions{});
  g.ExpectValid();
  EXPECT_EQ(r.grown, (Grown{{j, 6}}));
  EXPECT_EQ(g.Bound(j), 8);
  EXPECT_EQ(g.c.state.allocated_gpu_milli(), 8 * 1000);
}

TEST(Absorb, AWaitingJobOfHigherPriorityBlocksGrowth) {
  Cluster g = Cluster::Flat(2);
  JobId j = g.Elastic("e", 8, 1, 8, 1, Req().Gpus(1), 5);
  g.RunOn(j, 0, 1);
  auto s = g.Open();
  const uint64_t epoch = g.c.state.epoch();
  const std::vector<JobId> running = {j};
  const AbsorbResult r = AbsorbAction::Run(*s, g.c.state, running, 6, AllocateOptions{});
  EXPECT_TRUE(r.grown.empty());
  EXPECT_EQ(r.replicas_added, 0);
  EXPECT_EQ(g.c.state.epoch(), epoch);
  g.ExpectValid();
}

TEST(Absorb, AWaitingJobOfEqualPriorityDoesNotBlock) {
  Cluster g = Cluster::Flat(2);
  JobId j = g.Elastic("e", 8, 1, 8, 1, Req().Gpus(1), 5);
  g.RunOn(j, 0, 1);
  auto s = g.Open();
  const std::vector<JobId> running = {j};
  const AbsorbResult r = AbsorbAction::Run(*s, g.c.state, running, 5, AllocateOptions{});
  g.ExpectValid();
  EXPECT_EQ(r.grown, (Grown{{j, 7}}));
}

TEST(Absorb, OnlyJobsAtOrAboveTheBlockingPriorityGrow) {
  Cluster g = Cluster::Flat(2);
  JobId low = g.Elastic("low", 8, 1, 8, 1, Req().Gpus(1), 1);
  JobId high = g.Elastic("high", 4, 1, 4, 1, Req().Gpus(1), 9);
  g.RunOn(low, 0, 1);
  g.RunOn(high, 0, 1);
  auto s = g.Open();
  const std::vector<JobId> running = {low, high};
  const AbsorbResult r = AbsorbAction::Run(*s, g.c.state, running, 5, AllocateOptions{});
  g.ExpectValid();
  EXPECT_EQ(r.grown, (Grown{{high, 3}}));
  EXPECT_EQ(g.Bound(low), 1);
}

TEST(Absorb, EqualPriorityJobsShareByWaterFillingOnExactShares) {
  // a: 1 of max 4, b: 2 of max 8 — equal shares, a (lower id) first; 6 GPUs of room.
  // a 2/4 | b 3/8 | b 4/8 | a 3/4 (tie 4/8 = 2/4 to a) | b 5/8 | b 6/8: a +2, b +4.
  Cluster g = Cluster::Flat(2);
  JobId a = g.Elastic("a", 8, 1, 4, 1, Req().Gpus(1));
  JobId b = g.Elastic("b", 8, 1, 8, 1, Req().Gpus(1));
  g.RunOn(a, 0, 1);
  g.RunOn(b, 0, 2);
  g.Fill(0, 2);
  g.Fill(1, 4);  // 6 GPUs of room in all
  auto s = g.Open();
  const std::vector<JobId> running = {b, a};
  const AbsorbResult r = AbsorbAction::Run(*s, g.c.state, running, kNoneWaiting, AllocateOptions{});
  g.ExpectValid();
  EXPECT_EQ(r.grown, (Grown{{a, 2}, {b, 4}}));
  EXPECT_EQ(r.replicas_added, 6);
  EXPECT_EQ(g.Bound(a), 3);
  EXPECT_EQ(g.Bound(b), 6);
}

TEST(Absorb, EqualSharesAlternateByJobId) {
  // Both at 4/8 with 7 GPUs of room: a, b, a, b, a, b, a.
  Cluster g = Cluster::Flat(2);
  JobId a = g.Elastic("a", 8, 1, 8, 1, Req().Gpus(1));
  JobId b = g.Elastic("b", 8, 1, 8, 1, Req().Gpus(1));
  g.RunOn(a, 0, 4);
  g.RunOn(b, 0, 4);
  g.Fill(1, 7);
  auto s = g.Open();
  const std::vector<JobId> running = {a, b};
  const AbsorbResult r = AbsorbAction::Run(*s, g.c.state, running, kNoneWaiting, AllocateOptions{});
  g.ExpectValid();
  EXPECT_EQ(r.grown, (Grown{{a, 4}, {b, 3}}));
}

TEST(Absorb, AHigherPriorityJobGrowsFirst) {
  Cluster g = Cluster::Flat(1);
  JobId low = g.Elastic("low", 8, 1, 8, 1, Req().Gpus(1), 1);   // the smaller share...
  JobId high = g.Elastic("high", 8, 1, 8, 1, Req().Gpus(1), 2);  // ...but the higher priority
  g.RunOn(low, 0, 1);
  g.RunOn(high, 0, 4);
  auto s = g.Open();  // 3 GPUs of room
  const std::vector<JobId> running = {low, high};
  const AbsorbResult r = AbsorbAction::Run(*s, g.c.state, running, kNoneWaiting, AllocateOptions{});
  g.ExpectValid();
  EXPECT_EQ(r.grown, (Grown{{high, 3}}));
  EXPECT_EQ(g.Bound(low), 1);
  EXPECT_EQ(g.Bound(high), 7);
}

TEST(Absorb, ALowerPriorityJobTakesWhatTheHigherCannotUse) {
  Cluster g = Cluster::Flat(1);
  JobId low = g.Elastic("low", 8, 1, 8, 1, Req().Gpus(1), 1);
  JobId high = g.Elastic("high", 8, 2, 4, 2, Req().Gpus(1), 2);
  g.RunOn(low, 0, 1);
  g.RunOn(high, 0, 2);
  auto s = g.Open();  // 5 GPUs: high +2 (its max), low the other 3
  const std::vector<JobId> running = {low, high};
  const AbsorbResult r = AbsorbAction::Run(*s, g.c.state, running, kNoneWaiting, AllocateOptions{});
  g.ExpectValid();
  EXPECT_EQ(r.grown, (Grown{{low, 3}, {high, 2}}));
}

TEST(Absorb, ARequiredLevelJobGrowsOnlyInsideItsAsw) {
  Cluster g({"asw1", "asw1", "asw1", "asw2", "asw2", "asw2", "asw2"});
  JobId j = g.Elastic("train", 8, 2, 8, 1, Req().Gpus(8), 0, g.InOneAsw());
  g.RunOn(j, 0, 1);
  g.RunOn(j, 1, 1);
  auto s = g.Open();
  const std::vector<JobId> running = {j};
  const AbsorbResult r = AbsorbAction::Run(*s, g.c.state, running, kNoneWaiting, AllocateOptions{});
  g.ExpectValid();
  EXPECT_EQ(r.grown, (Grown{{j, 1}}));
  EXPECT_EQ(g.PerAsw(j), (std::map<std::string, int>{{"asw1", 3}}));
}

TEST(Absorb, AReservationForAnotherJobIsRespected) {
  Cluster g = Cluster::Flat(4);
  JobId j = g.Elastic("e", 8, 1, 8, 1, Req().Gpus(8));
  g.RunOn(j, 0, 1);
  JobId other = g.Elastic("waiting", 2, 2, 2, 1, Req().Gpus(8));
  const std::vector<NodeId> held = {g.N(1), g.N(3)};
  g.c.state.AddReservation(other, held);
  auto s = g.Open();
  const std::vector<JobId> running = {j};
  const AbsorbResult r = AbsorbAction::Run(*s, g.c.state, running, kNoneWaiting, AllocateOptions{});
  g.ExpectValid();
  EXPECT_EQ(r.grown, (Grown{{j, 1}}));
  EXPECT_EQ(g.c.state.task(g.c.state.job(j).tasks[1]).node, g.N(2));
  EXPECT_TRUE(g.c.state.node(g.N(1)).tasks.empty());
  EXPECT_TRUE(g.c.state.node(g.N(3)).tasks.empty());
}

TEST(Absorb, ASecondRunRightAfterChangesNothing) {
  Cluster g({"asw1", "asw1", "asw1", "asw2", "asw2"});
  JobId a = g.Elastic("a", 12, 2, 12, 2, Req().Gpus(2));
  JobId b = g.Elastic("b", 8, 1, 6, 1, Req().Gpus(4), 0, g.InOneAsw());
  JobId c = g.Elastic("c", 8, 1, 8, 1, Req().Gpus(1), 3);
  g.RunOn(a, 0, 2);
  g.RunOn(b, 3, 1);
  g.RunOn(c, 1, 1);
  g.Fill(2, 1);
  auto s = g.Open();
  const std::vector<JobId> running = {a, b, c};
  const AbsorbResult first = AbsorbAction::Run(*s, g.c.state, running, kNoneWaiting, AllocateOptions{});
  g.ExpectValid();
  EXPECT_GT(first.replicas_added, 0);
  const uint64_t epoch = g.c.state.epoch();
  const int64_t allocated = g.c.state.allocated_gpu_milli();
  const AbsorbResult second = AbsorbAction::Run(*s, g.c.state, running, kNoneWaiting, AllocateOptions{});
  EXPECT_EQ(second.replicas_added, 0);
  EXPECT_TRUE(second.grown.empty());
  EXPECT_EQ(g.c.state.epoch(), epoch);  // no bind, no unbind
  EXPECT_EQ(g.c.state.allocated_gpu_milli(), allocated);
  g.ExpectValid();
}

TEST(Absorb, JobsThatCannotGrowAreSkipped) {
  Cluster g = Cluster::Flat(2);
  JobId idle = g.Elastic("idle", 4, 1, 4, 1, Req().Gpus(1));
  JobId full = g.Elastic("full", 4, 1, 2, 1, Req().Gpus(1));
  JobId e = g.Elastic("e", 4, 1, 4, 1, Req().Gpus(1));
  g.RunOn(full, 0, 2);
  g.RunOn(e, 0, 1);
  auto s = g.Open();
  const std::vector<JobId> running = {idle, full, e, e};  // listed twice: counted once
  const AbsorbResult r = AbsorbAction::Run(*s, g.c.state, running, kNoneWaiting, AllocateOptions{});
  g.ExpectValid();
  EXPECT_EQ(r.grown, (Grown{{e, 3}}));
  EXPECT_EQ(g.Bound(idle), 0);
  EXPECT_EQ(g.Bound(full), 2);
}

TEST(Absorb, AnyMightGrowCountsAHeldNodeAsItsOwnersAndRefusesAStepThatFitsNowhere) {
  Cluster g = Cluster::Flat(3);
  g.Fill(0, 0);
  g.Fill(1, 3);  // 3 GPUs free on n1
  JobId waiting = g.Elastic("waiting", 1, 1, 1, 1, Req().Gpus(8));
  const std::vector<NodeId> held = {g.N(2)};
  g.c.state.AddReservation(waiting, held);  // n2 (8 free GPUs) held for another job
  // n2 counts as its owner's: some job might grow there.
  EXPECT_TRUE(AllocateAction::AnyMightGrow(g.c.state, Req().Gpus(8), 1));
  EXPECT_FALSE(AllocateAction::AnyMightGrow(g.c.state, Req().Gpus(8), 2));  // 16 GPUs on one node each
  // 1-GPU replicas: 3 on n1 and 8 on n2.
  EXPECT_TRUE(AllocateAction::AnyMightGrow(g.c.state, Req().Gpus(1), 11));
  EXPECT_FALSE(AllocateAction::AnyMightGrow(g.c.state, Req().Gpus(1), 12));
  // Without the hold, 4-GPU replicas fit only on n2; with n2 filled but 3 GPUs, nowhere.
  g.c.state.ReleaseReservation(g.c.state.job(waiting).reservation);
  EXPECT_TRUE(AllocateAction::AnyMightGrow(g.c.state, Req().Gpus(4), 2));
  g.Fill(2, 3);
  EXPECT_FALSE(AllocateAction::AnyMightGrow(g.c.state, Req().Gpus(4), 1));
  JobId e = g.Elastic("e", 4, 1, 4, 1, Req().Gpus(1));
  g.RunOn(e, 1, 1);
  auto s = g.Open();
  EXPECT_EQ(AllocateAction::TryGrow(*s, g.c.state, e, AllocateOptions{}, 1), 1);  // a 1-GPU step fits
  g.ExpectValid();
}

}  // namespace
}  // namespace estuary
