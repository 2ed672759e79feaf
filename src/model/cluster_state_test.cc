#include "model/cluster_state.h"

#include <gtest/gtest.h>

#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::ClusterBuilder;
using testing::Idx;
using testing::Req;

TEST(ClusterState, ANewNodeHasAllCapacityFreeAndIsIndexedByItsFreeGpus) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(8));
  const Node& node = c.state.node(n);
  EXPECT_EQ(node.cpu_free, 96000);
  EXPECT_EQ(node.full_free_gpus, 8);
  EXPECT_EQ(node.gpu_free_total, 8000);
  EXPECT_EQ(c.state.total_gpu_milli(), 8000);
  ASSERT_EQ(c.state.nodes_with_full_free(8).size(), 1u);
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(ClusterState, BindingASharedTaskTakesMilliFromOneGpuOnly) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(2));
  TaskId t = c.Submit("t", Req().Cpu(1000).Mem(10).SharedGpu(300));
  c.state.Bind(t, n, Idx({1}));
  const Node& node = c.state.node(n);
  EXPECT_EQ(node.gpu_free[0], 1000);
  EXPECT_EQ(node.gpu_free[1], 700);
  EXPECT_EQ(node.full_free_gpus, 1);
  EXPECT_EQ(node.max_gpu_free, 1000);
  EXPECT_EQ(c.state.allocated_gpu_milli(), 300);
  EXPECT_EQ(c.state.nodes_with_full_free(1).size(), 1u);
  EXPECT_TRUE(c.state.nodes_with_full_free(2).empty());
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(ClusterState, UnbindRestoresExactlyWhatBindTook) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(4));
  TaskId t = c.Submit("t", Req().Cpu(5000).Mem(100).Gpus(2));
  const uint32_t v0 = c.state.node(n).version;
  c.state.Bind(t, n, Idx({0, 3}));
  EXPECT_GT(c.state.node(n).version, v0);
  c.state.Unbind(t);
  const Node& node = c.state.node(n);
  EXPECT_EQ(node.cpu_free, 96000);
  EXPECT_EQ(node.full_free_gpus, 4);
  EXPECT_EQ(c.state.task(t).state, TaskState::kPending);
  EXPECT_FALSE(c.state.task(t).node.valid());
  EXPECT_EQ(c.state.allocated_gpu_milli(), 0);
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(ClusterState, CanBindRefusesOverCommitWrongIndicesAndWrongModels) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(2));
  TaskId big = c.Submit("big", Req().Cpu(1000).Gpus(2));
  TaskId cpu_hog = c.Submit("hog", Req().Cpu(200000));
  TaskId shared = c.Submit("s", Req().SharedGpu(600));
  TaskId pinned = c.Submit("p", Req().Gpus(1).Models(GpuModelSet::FromBits(1u << 5)));
  EXPECT_FALSE(c.state.CanBind(big, n, Idx({0})));      // too few indices
  EXPECT_FALSE(c.state.CanBind(big, n, Idx({0, 0})));   // the same GPU twice
  EXPECT_FALSE(c.state.CanBind(big, n, Idx({0, 2})));   // no GPU 2
  EXPECT_FALSE(c.state.CanBind(cpu_hog, n, Idx({})));   // CPU over-commit
  EXPECT_FALSE(c.state.CanBind(pinned, n, Idx({0})));   // model not allowed
  EXPECT_TRUE(c.state.CanBind(shared, n, Idx({1})));
  c.state.Bind(shared, n, Idx({1}));
  EXPECT_FALSE(c.state.CanBind(big, n, Idx({0, 1})));  // GPU 1 has only 400 left
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(ClusterState, FinishFreesABoundTaskAndMarksItFinished) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0", testing::Gpus(1));
  TaskId t = c.Submit("t", Req().Gpus(1));
  c.state.Bind(t, n, Idx({0}));
  c.state.Finish(t);
  EXPECT_EQ(c.state.task(t).state, TaskState::kFinished);
  EXPECT_EQ(c.state.node(n).full_free_gpus, 1);
  EXPECT_EQ(c.state.num_bound_tasks(), 0);
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(ClusterState, AddNodeRejectsDuplicateNamesAndTooManyGpus) {
  ClusterState s;
  NodeSpec a;
  a.name = "a";
  ASSERT_TRUE(s.AddNode(a).ok());
  EXPECT_FALSE(s.AddNode(a).ok());
  NodeSpec b;
  b.name = "b";
  b.gpu_count = kMaxGpusPerNode + 1;
  auto r = s.AddNode(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("GPUs exceed"), std::string::npos);
}

TEST(ClusterState, NodeStateChangesAreVisibleInThePackedFilterView) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n0");
  c.state.SetNodeState(n, NodeState::kDown);
  EXPECT_FALSE(c.state.fits()[n.value()].schedulable);
  c.state.SetNodeState(n, NodeState::kReady);
  EXPECT_TRUE(c.state.fits()[n.value()].schedulable);
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(GpuModels, ParsesModelSetsAndNamesTheFirstUnknownModel) {
  GpuModels m;
  ASSERT_TRUE(m.Intern("T4").ok());
  ASSERT_TRUE(m.Intern("V100").ok());
  auto any = m.ParseSet("");
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(any->Any());
  auto set = m.ParseSet("V100|T4");
  ASSERT_TRUE(set.ok());
  EXPECT_TRUE(set->Admits(*m.Find("T4")));
  auto bad = m.ParseSet("T4|A100");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'A100'"), std::string::npos);
}

}  // namespace
}  // namespace estuary
