// Node failure and repair: survivors shrink to a whole step or the job is requeued whole.
#include "sched/actions/failure.h"

#include <gtest/gtest.h>

#include "sched/actions/allocate.h"
#include "sched/plugins/register.h"
#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::ClusterBuilder;
using testing::Req;

// TIDAL's Align example: a job of 200 replicas x 8 GPUs on 200 nodes.
struct AlignCluster {
  ClusterBuilder c;
  JobId job;
  explicit AlignCluster(int32_t step, int32_t min = 8) {
    for (int i = 0; i < 200; ++i) c.AddNode("m" + std::to_string(i), testing::Gpus(8));
    JobSpec js;
    js.name = "pp";
    js.min_replicas = min;
    js.max_replicas = 200;
    js.step = step;
    job = c.state.AddJob(js);
    for (int i = 0; i < 200; ++i) c.state.AddTask(job, "pp-" + std::to_string(i), Req().Cpu(8000).Gpus(8));
    SessionOptions o;
    o.policy = *OpenbPolicy("best-fit");
    auto s = std::move(Session::Open(c.state, BuiltinRegistry(), PluginContext{&c.state, nullptr}, o)).value();
    EXPECT_EQ(AllocateAction::TryStart(*s, c.state, job).granted, 200);
  }
  int32_t Bound() const {
    int32_t n = 0;
    for (TaskId t : c.state.job(job).tasks) n += c.state.task(t).state == TaskState::kBound;
    return n;
  }
  int32_t FreeNodes() const {
    int32_t n = 0;
    for (const Node& node : c.state.nodes()) n += node.Schedulable() && node.full_free_gpus == node.spec.gpu_count;
    return n;
  }
};

TEST(NodeFailure, AStepEightJobKeeps192ReplicasAndFreesSevenNodes) {
  AlignCluster a(8);
  auto effects = NodeFailureAction::NodeDown(a.c.state, NodeId(17));
  ASSERT_EQ(effects.size(), 1u);
  EXPECT_EQ(effects[0].replicas_before, 200);
  EXPECT_EQ(effects[0].replicas_after, 192);
  EXPECT_FALSE(effects[0].requeued);
  EXPECT_EQ(a.Bound(), 192);
  EXPECT_EQ(a.FreeNodes(), 7);
  EXPECT_FALSE(a.c.state.node(NodeId(17)).Schedulable());
  EXPECT_TRUE(a.c.state.CheckInvariants().ok());
}

TEST(NodeFailure, AStepOneJobKeepsAll199Survivors) {
  AlignCluster a(1);
  auto effects = NodeFailureAction::NodeDown(a.c.state, NodeId(0));
  EXPECT_EQ(effects[0].replicas_after, 199);
  EXPECT_EQ(a.Bound(), 199);
  EXPECT_EQ(a.FreeNodes(), 0);
}

TEST(NodeFailure, ARigidJobThatLosesAReplicaIsRequeuedWhole) {
  AlignCluster a(1, 200);
  auto effects = NodeFailureAction::NodeDown(a.c.state, NodeId(5));
  EXPECT_TRUE(effects[0].requeued);
  EXPECT_EQ(effects[0].replicas_after, 0);
  EXPECT_EQ(a.Bound(), 0);
  EXPECT_EQ(a.c.state.allocated_gpu_milli(), 0);
  EXPECT_TRUE(a.c.state.CheckInvariants().ok());
}

TEST(NodeFailure, ASecondFailureOfTheSameNodeAndARepairChangeNoPlacement) {
  AlignCluster a(8);
  NodeFailureAction::NodeDown(a.c.state, NodeId(3));
  const int64_t allocated = a.c.state.allocated_gpu_milli();
  EXPECT_TRUE(NodeFailureAction::NodeDown(a.c.state, NodeId(3)).empty());  // nothing left on it
  NodeFailureAction::NodeUp(a.c.state, NodeId(3));
  EXPECT_TRUE(a.c.state.node(NodeId(3)).Schedulable());
  EXPECT_EQ(a.c.state.allocated_gpu_milli(), allocated);
  EXPECT_EQ(a.Bound(), 192);
  EXPECT_TRUE(a.c.state.CheckInvariants().ok());
}

TEST(NodeFailure, JobsWithoutTasksOnTheNodeAreUntouched) {
  ClusterBuilder c;
  NodeId a = c.AddNode("a", testing::Gpus(1));
  NodeId b = c.AddNode("b", testing::Gpus(1));
  TaskId ta = c.Submit("ta", Req().Gpus(1));
  TaskId tb = c.Submit("tb", Req().Gpus(1));
  c.state.Bind(ta, a, testing::Idx({0}));
  c.state.Bind(tb, b, testing::Idx({0}));
  auto effects = NodeFailureAction::NodeDown(c.state, a);
  ASSERT_EQ(effects.size(), 1u);
  EXPECT_TRUE(effects[0].requeued);  // a single-task job that lost its task goes back to pending
  EXPECT_EQ(c.state.task(ta).state, TaskState::kPending);
  EXPECT_EQ(c.state.task(tb).state, TaskState::kBound);
}

}  // namespace
}  // namespace estuary
