// MergeClusters: the `merged` configuration's one cluster of every member's nodes.
#include "sim/federation_setup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/cluster/generator.h"

namespace estuary {
namespace {

using ::testing::HasSubstr;

// `nodes` 8-GPU nodes in ASWs of 2, all of GPU model `models[0]` when it is alone.
ClusterState Generated(int64_t nodes, std::vector<ModelShare> models) {
  GeneratorOptions o;
  o.total_gpus = nodes * 8;
  o.nodes_per_asw_min = o.nodes_per_asw_max = 2;
  o.models = std::move(models);
  auto c = GenerateCluster(o);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

TEST(MergeClusters, KeepsEveryMembersNodesUnderPrefixedNamesAndModelsByName) {
  const ClusterState a = Generated(4, {{"A100", 1, 96, 1024}});
  ClusterState b = Generated(2, {{"H800", 1, 128, 2048}, {"A100", 0.000001, 96, 1024}});  // H800 has id 0 here
  b.SetNodeState(NodeId(1), NodeState::kCordoned);
  auto m = MergeClusters({"a", "b"}, {&a, &b});
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->num_nodes(), 6u);
  EXPECT_EQ(m->total_gpu_milli(), a.total_gpu_milli() + b.total_gpu_milli());
  EXPECT_EQ(m->total_cpu_milli(), a.total_cpu_milli() + b.total_cpu_milli());
  EXPECT_EQ(m->nodes()[0].spec.name, "a/node0000000");
  EXPECT_EQ(m->nodes()[3].spec.name, "a/node0000003");
  EXPECT_EQ(m->nodes()[4].spec.name, "b/node0000000");
  EXPECT_EQ(m->nodes()[5].spec.name, "b/node0000001");
  // Models by name: A100 is id 0 in a, 1 in b; H800 keeps its name wherever its id lands.
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(m->models().Name(m->nodes()[i].spec.model), "A100");
  for (size_t i = 4; i < 6; ++i) EXPECT_EQ(m->models().Name(m->nodes()[i].spec.model), "H800");
  EXPECT_EQ(m->nodes()[4].spec.cpu_milli, 128'000);
  EXPECT_EQ(m->nodes()[4].spec.gpu_count, 8);
  EXPECT_EQ(m->nodes()[4].state, NodeState::kReady);
  EXPECT_EQ(m->nodes()[5].state, NodeState::kCordoned);
  EXPECT_TRUE(m->CheckInvariants().ok());
}

TEST(MergeClusters, DomainsOfTheSameNameInTwoMembersStayDistinct) {
  const ClusterState a = Generated(4, {{"A100", 1, 96, 1024}});
  const ClusterState b = Generated(2, {{"A100", 1, 96, 1024}});
  auto m = MergeClusters({"a", "b"}, {&a, &b});
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Topology& t = m->topology();
  ASSERT_EQ(t.planes().size(), 2u);  // data and param, merged by name
  const PlaneId data = *t.FindPlane("data");
  const int asw = *t.FindLevel(data, "asw");
  // Both members have an asw00000 (under spine0000, az0).
  const std::optional<DomainId> da = t.FindDomain(data, asw, "a/asw00000");
  const std::optional<DomainId> db = t.FindDomain(data, asw, "b/asw00000");
  ASSERT_TRUE(da && db);
  EXPECT_NE(*da, *db);
  EXPECT_FALSE(t.FindDomain(data, asw, "asw00000"));
  EXPECT_EQ(t.NodeDomain(NodeId(0), data, asw), *da);
  EXPECT_EQ(t.NodeDomain(NodeId(4), data, asw), *db);
  EXPECT_EQ(t.domain(*da).nodes.size(), 2u);
  EXPECT_EQ(t.domain(*db).nodes.size(), 2u);
  EXPECT_EQ(t.DomainsAt(data, 0).size(), 2u);  // a/az0 and b/az0
  EXPECT_EQ(m->domain_free(*db).gpu_milli, 16'000);
  const PlaneId param = *t.FindPlane("param");
  EXPECT_TRUE(t.FindDomain(param, 0, "b/pod00000"));
}

TEST(MergeClusters, APlaneWithDifferentLevelsInTwoMembersIsAnError) {
  ClusterState x, y;
  ASSERT_TRUE(x.topology().AddPlane("data", {"az", "asw"}).ok());
  ASSERT_TRUE(y.topology().AddPlane("data", {"az", "spine", "asw"}).ok());
  auto m = MergeClusters({"x", "y"}, {&x, &y});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("plane 'data'"));
  EXPECT_THAT(m.status().message(), HasSubstr("member 'x'"));
  EXPECT_THAT(m.status().message(), HasSubstr("member 'y'"));
}

}  // namespace
}  // namespace estuary
