// BackfillAction::Plan: when and where a waiting job would start by the walltimes of the work
// running now (hand-computed cases).
#include "sched/actions/backfill.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::Idx;
using testing::Req;

struct Cluster : testing::AswCluster {
  using AswCluster::AswCluster;

  // A running job of one task `req` on node i at `gpus`, started at `start` with `walltime_s`.
  JobId Running(int i, TaskRequest req, const GpuIndices& gpus, int64_t start, int64_t walltime_s) {
    JobSpec s;
    s.name = "run" + std::to_string(c.state.jobs().size());
    s.walltime_s = walltime_s;
    const JobId j = c.state.AddJob(s);
    const TaskId t = c.state.AddTask(j, s.name, req);
    EXPECT_TRUE(c.state.CanBind(t, N(i), gpus));
    c.state.Bind(t, N(i), gpus);
    c.state.SetJobStart(j, start);
    return j;
  }
  // A waiting gang of `replicas` tasks of `req` (min = max).
  JobId Waiting(int replicas, TaskRequest req, bool one_asw = false, int64_t walltime_s = 0) {
    JobSpec s;
    s.name = "head";
    s.walltime_s = walltime_s;
    s.min_replicas = s.max_replicas = replicas;
    if (one_asw) {
      s.topology.plane = data;
      s.topology.required_level = 0;
    }
    const JobId j = c.state.AddJob(s);
    for (int k = 0; k < replicas; ++k) c.state.AddTask(j, "head-" + std::to_string(k), req);
    return j;
  }
  BackfillPlan Plan(JobId j, int64_t now) { return BackfillAction::Plan(c.state, j, now, AllocateOptions{}); }
};

const GpuIndices kAll = Idx({0, 1, 2, 3, 4, 5, 6, 7});

TEST(BackfillPlan, ASharedGpuIsWhollyFreeWhenItsLastShareEnds) {
  // n0: a 500-milli share of GPU 0 until 100 (walltime), GPUs 1-7 taken without a walltime. A
  // one-GPU replica has no whole GPU until 100.
  Cluster k(std::vector<std::string>{""});
  k.Running(0, Req().SharedGpu(500), Idx({0}), 0, 100);
  k.Running(0, Req().Gpus(7), Idx({1, 2, 3, 4, 5, 6, 7}), 0, 0);
  const BackfillPlan p = k.Plan(k.Waiting(1, Req().Gpus(1)), 10);
  ASSERT_TRUE(p.found);
  EXPECT_EQ(p.start_s, 100);
  EXPECT_EQ(p.nodes, std::vector<NodeId>{k.N(0)});
  EXPECT_FALSE(p.domain.valid());
}

TEST(BackfillPlan, DownNodesAndNodesHeldForAnotherJobAreNeverPlanned) {
  // n0 busy until 50; n1 down, n2 held for another job, n3 free. Two whole nodes: n3 now and n0
  // at 50 (n1 and n2 would have made it "now").
  Cluster k(std::vector<std::string>(4, ""));
  k.Running(0, Req().Gpus(8), kAll, 0, 50);
  k.c.state.SetNodeState(k.N(1), NodeState::kDown);
  JobSpec other;
  other.name = "other";
  const JobId o = k.c.state.AddJob(other);
  k.c.state.AddTask(o, "other-0", Req().Gpus(8));
  const std::vector<NodeId> held = {k.N(2)};
  k.c.state.AddReservation(o, held);
  const BackfillPlan p = k.Plan(k.Waiting(2, Req().Gpus(8)), 10);
  ASSERT_TRUE(p.found);
  EXPECT_EQ(p.start_s, 50);
  EXPECT_EQ(p.nodes, (std::vector<NodeId>{k.N(0), k.N(3)}));
}

// Conservative backfill's blocks: the plans made before the job's occupy their nodes for a time.
TEST(BackfillPlan, ABlockedNodeServesARunThatEndsBeforeItsBlockOrStartsAfterIt) {
  // Two idle nodes; n0 is planned for [50, 200), n1 from 0 until 1000. A one-node job running
  // 50 s ends as n0's block begins: it starts now on n0. Running 100 s it would meet both blocks
  // now: it starts at 200 on n0, when n0's block ends (n1's ends only at 1000).
  Cluster k(std::vector<std::string>(2, ""));
  const std::vector<BackfillBlock> blocks = {{k.N(0), 50, 200}, {k.N(1), 0, 1000}};
  const JobId short_run = k.Waiting(1, Req().Gpus(8), false, 50);
  BackfillPlan p = BackfillAction::Plan(k.c.state, short_run, 0, AllocateOptions{}, blocks);
  ASSERT_TRUE(p.found);
  EXPECT_EQ(p.start_s, 0);
  EXPECT_EQ(p.nodes, std::vector<NodeId>{k.N(0)});
  const JobId long_run = k.Waiting(1, Req().Gpus(8), false, 100);
  p = BackfillAction::Plan(k.c.state, long_run, 0, AllocateOptions{}, blocks);
  ASSERT_TRUE(p.found);
  EXPECT_EQ(p.start_s, 200);
  EXPECT_EQ(p.nodes, std::vector<NodeId>{k.N(0)});
  // Two replicas: both nodes are free of blocks only from 1000.
  const JobId pair = k.Waiting(2, Req().Gpus(8), false, 100);
  p = BackfillAction::Plan(k.c.state, pair, 0, AllocateOptions{}, blocks);
  ASSERT_TRUE(p.found);
  EXPECT_EQ(p.start_s, 1000);
}

TEST(BackfillPlan, AJobWithoutAWalltimeStartsOnlyAfterEveryBlockOfItsNodesAndNeverBeforeAnEndlessOne) {
  // n0 planned for [50, 200); n1 planned from 300 for good (a plan without a walltime). A job
  // without a walltime would run forever: before 200 it meets n0's block, and n1 never frees.
  Cluster k(std::vector<std::string>(2, ""));
  const std::vector<BackfillBlock> blocks = {{k.N(0), 50, 200}, {k.N(1), 300, INT64_MAX}};
  const BackfillPlan p = BackfillAction::Plan(k.c.state, k.Waiting(1, Req().Gpus(8)), 0, AllocateOptions{}, blocks);
  ASSERT_TRUE(p.found);
  EXPECT_EQ(p.start_s, 200);
  EXPECT_EQ(p.nodes, std::vector<NodeId>{k.N(0)});
  EXPECT_FALSE(BackfillAction::Plan(k.c.state, k.Waiting(2, Req().Gpus(8)), 0, AllocateOptions{}, blocks).found);
}

TEST(BackfillPlan, TheRunningWorksEndsSortedOnceGiveTheSamePlans) {
  // Work ending at 50 (n0), 30 and 90 (two halves of n1), 70 (n2, held for another job), 20 (n3),
  // never (n4): the plans of several jobs (a whole node at 20, two at 50, three at 90 — the held
  // n2 never counts —, half a node at 20), with and without BackfillReleases made beforehand, and
  // the ends on the held node left out as the plan's own gathering leaves them out.
  Cluster k(std::vector<std::string>(5, ""));
  k.Running(0, Req().Gpus(8), kAll, 0, 50);
  k.Running(1, Req().Gpus(4), Idx({0, 1, 2, 3}), 0, 30);
  k.Running(1, Req().Gpus(4), Idx({4, 5, 6, 7}), 0, 90);
  k.Running(2, Req().Gpus(8), kAll, 0, 70);
  k.Running(3, Req().Gpus(8), kAll, 0, 20);
  k.Running(4, Req().Gpus(8), kAll, 0, 0);
  JobSpec other;
  other.name = "other";
  const JobId o = k.c.state.AddJob(other);
  k.c.state.AddTask(o, "other-0", Req().Gpus(8));
  const std::vector<NodeId> held = {k.N(2)};
  k.c.state.AddReservation(o, held);
  const BackfillReleases sorted = BackfillReleases::Of(k.c.state, 10);
  EXPECT_EQ(sorted.releases.size(), 5u);  // every end but the endless task's
  const std::vector<BackfillBlock> blocks = {{k.N(3), 40, 60}};
  const std::vector<std::pair<JobId, int64_t>> expected = {
      {k.Waiting(1, Req().Gpus(8)), 20}, {k.Waiting(2, Req().Gpus(8)), 50}, {k.Waiting(3, Req().Gpus(8)), 90},
      {k.Waiting(1, Req().Gpus(4), false, 30), 20}};
  for (const auto& [job, start] : expected) {
    for (const std::span<const BackfillBlock> b : {std::span<const BackfillBlock>(), std::span<const BackfillBlock>(blocks)}) {
      const BackfillPlan once = BackfillAction::Plan(k.c.state, job, 10, AllocateOptions{}, b, &sorted);
      const BackfillPlan own = BackfillAction::Plan(k.c.state, job, 10, AllocateOptions{}, b);
      ASSERT_TRUE(own.found);
      EXPECT_EQ(once.found, own.found);
      EXPECT_EQ(once.start_s, own.start_s);
      EXPECT_EQ(once.nodes, own.nodes);
      if (b.empty()) {
        EXPECT_EQ(own.start_s, start);
      }
    }
  }
}

TEST(BackfillPlan, WorkWithoutAWalltimeNeverEndsSoNoTimeHoldsTheJob) {
  Cluster k(std::vector<std::string>(2, ""));
  k.Running(0, Req().Gpus(8), kAll, 0, 0);
  k.Running(1, Req().Gpus(4), Idx({0, 1, 2, 3}), 0, 0);
  EXPECT_FALSE(k.Plan(k.Waiting(1, Req().Gpus(8)), 10).found);
  // A replica that fits now is planned now.
  const BackfillPlan now = k.Plan(k.Waiting(1, Req().Gpus(4)), 10);
  ASSERT_TRUE(now.found);
  EXPECT_EQ(now.start_s, 10);
  EXPECT_EQ(now.nodes, std::vector<NodeId>{k.N(1)});
}

TEST(BackfillPlan, ARequiredDomainIsTheFirstThatHoldsTheJobAndAPastWalltimeEndsNow) {
  // asw0 = {n0, n1}: n0 busy until 300. asw1 = {n2, n3}: n2 busy until 200. Two nodes in one ASW:
  // asw1 at 200. Looked at from 250, n2's walltime is past: asw1 now.
  Cluster k(std::vector<std::string>{"asw0", "asw0", "asw1", "asw1"});
  k.Running(0, Req().Gpus(8), kAll, 0, 300);
  k.Running(2, Req().Gpus(8), kAll, 0, 200);
  const JobId head = k.Waiting(2, Req().Gpus(8), /*one_asw=*/true);
  const BackfillPlan p = k.Plan(head, 10);
  ASSERT_TRUE(p.found);
  EXPECT_EQ(p.start_s, 200);
  EXPECT_EQ(k.c.state.topology().domain(p.domain).name, "asw1");
  EXPECT_EQ(p.nodes, (std::vector<NodeId>{k.N(2), k.N(3)}));
  EXPECT_EQ(k.Plan(head, 250).start_s, 250);
}

TEST(BackfillPlan, ItHoldsOnlyAsManyNodesAsTheJobNeedsTheEmptiestFirst) {
  // Four nodes: n0 and n1 free, n2 and n3 busy until 100. One whole node: n0 now, alone.
  Cluster k(std::vector<std::string>(4, ""));
  k.Running(2, Req().Gpus(8), kAll, 0, 100);
  k.Running(3, Req().Gpus(8), kAll, 0, 100);
  const BackfillPlan p = k.Plan(k.Waiting(1, Req().Gpus(8)), 0);
  ASSERT_TRUE(p.found);
  EXPECT_EQ(p.start_s, 0);
  EXPECT_EQ(p.nodes, std::vector<NodeId>{k.N(0)});
}

}  // namespace
}  // namespace estuary
