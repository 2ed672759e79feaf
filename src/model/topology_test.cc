// Topology planes, domains and the per-domain free-capacity aggregates ClusterState keeps.
#include "model/topology.h"

#include <gtest/gtest.h>

#include "model/cluster_state.h"
#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::ClusterBuilder;
using testing::Idx;
using testing::Req;

std::vector<std::string> Names(std::initializer_list<const char*> l) { return {l.begin(), l.end()}; }

TEST(Topology, APlaneListsItsLevelsWidestFirstAndTheNodeLevelIsImplicit) {
  Topology t;
  auto data = t.AddPlane("data", Names({"az", "spine", "asw", "node"}));
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(t.plane(*data).levels, Names({"az", "spine", "asw"}));
  EXPECT_EQ(*t.FindLevel(*data, "asw"), 2);
  EXPECT_FALSE(t.FindLevel(*data, "node").has_value());
  EXPECT_EQ(*t.FindPlane("data"), *data);
}

TEST(Topology, BadPlanesAreRejectedWithTheirReason) {
  Topology t;
  ASSERT_TRUE(t.AddPlane("data", Names({"asw"})).ok());
  EXPECT_NE(t.AddPlane("data", Names({"az"})).status().message().find("duplicate topology plane 'data'"), std::string::npos);
  EXPECT_NE(t.AddPlane("p", Names({"node"})).status().message().find("no levels"), std::string::npos);
  EXPECT_NE(t.AddPlane("q", Names({"a", "a"})).status().message().find("level 'a' twice"), std::string::npos);
  EXPECT_NE(t.AddPlane("r", Names({"node", "asw"})).status().message().find("'node' can only be the last"), std::string::npos);
  EXPECT_FALSE(t.AddPlane("", Names({"asw"})).ok());
}

TEST(Topology, ADomainHasOneParentAndNodesAreCountedIntoEveryLevel) {
  Topology t;
  PlaneId p = *t.AddPlane("data", Names({"spine", "asw"}));
  const auto a = Names({"s1", "asw1"}), b = Names({"s1", "asw2"}), wrong = Names({"s2", "asw1"});
  ASSERT_TRUE(t.AssignNode(NodeId(0), p, a).ok());
  ASSERT_TRUE(t.AssignNode(NodeId(1), p, a).ok());
  ASSERT_TRUE(t.AssignNode(NodeId(2), p, b).ok());
  Status st = t.AssignNode(NodeId(3), p, wrong);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "asw 'asw1' is already under spine 's1', not 's2'");
  EXPECT_EQ(t.DomainsAt(p, 0).size(), 1u);
  EXPECT_EQ(t.DomainsAt(p, 1).size(), 2u);
  const Domain& s1 = t.domain(t.NodeDomain(NodeId(2), p, 0));
  EXPECT_EQ(s1.name, "s1");
  EXPECT_EQ(s1.nodes.size(), 3u);
  EXPECT_EQ(t.domain(t.NodeDomain(NodeId(1), p, 1)).nodes.size(), 2u);
  EXPECT_FALSE(t.NodeDomain(NodeId(3), p, 0).valid());  // the failed assignment left no trace
  EXPECT_FALSE(t.AssignNode(NodeId(0), p, a).ok());      // a node is in a plane once
  EXPECT_FALSE(t.AssignNode(NodeId(4), p, Names({"s1"})).ok());  // one name per level
}

TEST(ClusterStateTopology, DomainAggregatesFollowEveryBindAndUnbind) {
  ClusterBuilder c;
  PlaneId data = *c.state.topology().AddPlane("data", Names({"asw"}));
  PlaneId param = *c.state.topology().AddPlane("param", Names({"rdma_pod"}));
  NodeId n0 = c.AddNode("n0", testing::Gpus(8));
  NodeId n1 = c.AddNode("n1", testing::Gpus(8));
  NodeId n2 = c.AddNode("n2", testing::Gpus(8));
  for (NodeId n : {n0, n1}) ASSERT_TRUE(c.state.AssignDomains(n, data, Names({"asw1"})).ok());
  ASSERT_TRUE(c.state.AssignDomains(n2, data, Names({"asw2"})).ok());
  for (NodeId n : {n0, n1, n2}) ASSERT_TRUE(c.state.AssignDomains(n, param, Names({"pod1"})).ok());
  const DomainId asw1 = c.state.topology().NodeDomain(n0, data, 0);
  const DomainId pod1 = c.state.topology().NodeDomain(n0, param, 0);
  EXPECT_EQ(c.state.domain_free(asw1).gpu_free_milli, 16000);
  EXPECT_EQ(c.state.domain_free(asw1).free_nodes, 2);
  EXPECT_EQ(c.state.domain_free(pod1).free_nodes, 3);
  TaskId t = c.Submit("t", Req().SharedGpu(250));
  c.state.Bind(t, n1, Idx({3}));
  EXPECT_EQ(c.state.domain_free(asw1).gpu_free_milli, 15750);
  EXPECT_EQ(c.state.domain_free(asw1).free_nodes, 1);
  EXPECT_EQ(c.state.domain_free(pod1).free_nodes, 2);
  EXPECT_TRUE(c.state.CheckInvariants().ok());
  c.state.Unbind(t);
  EXPECT_EQ(c.state.domain_free(asw1).free_nodes, 2);
  EXPECT_EQ(c.state.domain_free(pod1).gpu_free_milli, 24000);
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(ClusterStateTopology, ANodeAssignedWhileBusyContributesItsCurrentFreeCapacity) {
  ClusterBuilder c;
  PlaneId data = *c.state.topology().AddPlane("data", Names({"asw"}));
  NodeId n = c.AddNode("n", testing::Gpus(4));
  c.state.Bind(c.Submit("t", Req().Gpus(3)), n, Idx({0, 1, 2}));
  ASSERT_TRUE(c.state.AssignDomains(n, data, Names({"asw9"})).ok());
  const DomainFree& d = c.state.domain_free(c.state.topology().NodeDomain(n, data, 0));
  EXPECT_EQ(d.gpu_milli, 4000);
  EXPECT_EQ(d.gpu_free_milli, 1000);
  EXPECT_EQ(d.free_nodes, 0);
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

}  // namespace
}  // namespace estuary
