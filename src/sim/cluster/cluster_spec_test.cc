// Cluster spec files and the ASI-like generator.
#include "sim/cluster/cluster_spec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "sim/cluster/generator.h"

namespace estuary {
namespace {

const std::string kExample = std::string(ESTUARY_SOURCE_DIR) + "/examples/clusters/two-asw.yaml";

TEST(ClusterSpec, TheExampleLoadsNodesPoolsAndBothPlanes) {
  auto s = ReadClusterSpec(kExample);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->num_nodes(), 12u);
  EXPECT_EQ(s->total_gpu_milli(), (8 * 8 + 3) * 1000);
  const Topology& t = s->topology();
  const PlaneId data = *t.FindPlane("data");
  const PlaneId param = *t.FindPlane("param");
  EXPECT_EQ(t.DomainsAt(data, *t.FindLevel(data, "asw")).size(), 3u);
  EXPECT_EQ(t.DomainsAt(param, 0).size(), 2u);
  const Node& first = s->node(NodeId(0));
  EXPECT_EQ(first.spec.name, "h800-a-0000");
  EXPECT_EQ(first.spec.cpu_milli, 128000);
  EXPECT_EQ(first.spec.mem_mib, 2048 * 1024);
  EXPECT_EQ(s->models().Name(first.spec.model), "H800");
  const DomainId asw1 = t.NodeDomain(NodeId(0), data, 2);
  EXPECT_EQ(t.domain(asw1).name, "asw1");
  EXPECT_EQ(s->domain_free(asw1).free_nodes, 4);
  EXPECT_EQ(s->node(NodeId(11)).spec.gpu_count, 0);
  EXPECT_TRUE(s->CheckInvariants().ok());
}

TEST(ClusterSpec, WritingThenReadingGivesTheSameCluster) {
  auto a = ReadClusterSpec(kExample);
  ASSERT_TRUE(a.ok());
  auto b = ParseClusterSpec(WriteClusterSpec(*a), "roundtrip");
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(a->num_nodes(), b->num_nodes());
  for (size_t i = 0; i < a->num_nodes(); ++i) {
    const Node& x = a->node(NodeId(i));
    const Node& y = b->node(NodeId(i));
    EXPECT_EQ(x.spec.name, y.spec.name);
    EXPECT_EQ(x.spec.cpu_milli, y.spec.cpu_milli);
    EXPECT_EQ(x.spec.mem_mib, y.spec.mem_mib);
    EXPECT_EQ(x.spec.gpu_count, y.spec.gpu_count);
    for (const Plane& p : a->topology().planes()) {
      for (int l = 0; l < static_cast<int>(p.levels.size()); ++l) {
        EXPECT_EQ(a->topology().domain(a->topology().NodeDomain(x.id, p.id, l)).name,
                  b->topology().domain(b->topology().NodeDomain(y.id, p.id, l)).name);
      }
    }
  }
}

struct BadSpec {
  const char* name;
  const char* text;
  const char* message;  // the exact "file:line: field '...': ..." start of the error
};

class ClusterSpecBadInput : public ::testing::TestWithParam<BadSpec> {};

TEST_P(ClusterSpecBadInput, IsRejectedNamingTheLineAndField) {
  auto s = ParseClusterSpec(GetParam().text, "c.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().ExitCode(), 2);
  EXPECT_EQ(s.status().message().rfind(GetParam().message, 0), 0u) << s.status().message();
}

const char* kPool = "pools:\n  - {name: p, gpu_model: H800, gpus_per_node: 8, cpu_cores: 64, memory_gib: 512}\n";
const char* kPlanes = "topology:\n  planes:\n    - {name: data, levels: [spine, asw, node]}\n";

std::string Spec(const std::string& nodes) { return std::string(kPool) + kPlanes + "nodes:\n" + nodes; }

std::vector<BadSpec> Cases() {
  static std::vector<std::string> texts = {
      Spec("  - {name: a, pool: p, domains: {spine: s1, asw: x1}}\n  - {name: a, pool: p, domains: {spine: s1, asw: x1}}\n"),
      Spec("  - {name: a, pool: q, domains: {spine: s1, asw: x1}}\n"),
      Spec("  - {name: a, pool: p, domains: {spine: s1, rack: r1}}\n"),
      Spec("  - {name: a, pool: p, domains: {spine: s1}}\n"),
      Spec("  - {name: a, pool: p, domains: {spine: s1, asw: x1}}\n  - {name: b, pool: p, domains: {spine: s2, asw: x1}}\n"),
      Spec("  - {name_prefix: g, count: 0, pool: p, domains: {spine: s1, asw: x1}}\n"),
      std::string("pools:\n  - {name: p, gpu_model: H800, gpus_per_node: -8, cpu_cores: 64, memory_gib: 512}\n") + kPlanes +
          "nodes:\n  - {name: a, pool: p, domains: {spine: s1, asw: x1}}\n",
      std::string("pools:\n  - {name: p, gpus_per_node: 8, cpu_cores: 64, memory_gib: 512}\n") + kPlanes +
          "nodes:\n  - {name: a, pool: p, domains: {spine: s1, asw: x1}}\n",
      std::string(kPool) + "topology:\n  planes:\n    - {name: data, levels: [asw, asw]}\nnodes:\n  - {name: a, pool: p}\n",
      std::string(kPool) + kPlanes + "nodes:\n  - {name: a, pool: p, domains: {spine: s1, asw: x1}, colour: red}\n",
      std::string("pools: [\n"),
      std::string(kPool) + kPlanes + "nodes:\n  - {name: a, pool: p, domains: {spine: s1, asw: x1}, count: 2}\n",
  };
  return {
      {"DuplicateNodeNames", texts[0].c_str(), "c.yaml:8: field 'name': duplicate node name 'a'"},
      {"UnknownPool", texts[1].c_str(), "c.yaml:7: field 'pool': unknown pool 'q'"},
      {"UnknownLevel", texts[2].c_str(), "c.yaml:7: field 'domains': unknown level 'rack'"},
      {"MissingLevel", texts[3].c_str(), "c.yaml:7: field 'domains': no domain at level 'asw' of plane 'data'"},
      {"NodeOutsideTheTopologyNesting", texts[4].c_str(), "c.yaml:8: field 'domains': asw 'x1' is already under spine 's1'"},
      {"ZeroCount", texts[5].c_str(), "c.yaml:7: field 'count': 0 is outside [1, 1000000]"},
      {"NegativeSize", texts[6].c_str(), "c.yaml:2: field 'gpus_per_node': -8 is outside [0, 16]"},
      {"GpuPoolWithoutModel", texts[7].c_str(), "c.yaml:2: field 'gpu_model': missing"},
      {"DuplicateLevel", texts[8].c_str(), "c.yaml:5: field 'planes': plane 'data' lists level 'asw' twice"},
      {"UnknownNodeField", texts[9].c_str(), "c.yaml:7: field 'colour': unknown node field"},
      {"MalformedYaml", texts[10].c_str(), "c.yaml:2: malformed YAML"},
      {"CountWithoutPrefix", texts[11].c_str(), "c.yaml:7: field 'count': count goes with name_prefix"},
  };
}

INSTANTIATE_TEST_SUITE_P(Specs, ClusterSpecBadInput, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ClusterSpec, AnUnreadableFileIsAnError) {
  auto s = ReadClusterSpec("/nonexistent/cluster.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "/nonexistent/cluster.yaml: cannot open file");
}

TEST(Generator, BuildsAsiLikeClustersWithOneModelPerAswAndAswSizesInRange) {
  GeneratorOptions o;
  o.total_gpus = 8 * 1000;
  o.seed = 5;
  auto s = GenerateCluster(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->num_nodes(), 1000u);
  const Topology& t = s->topology();
  const PlaneId data = *t.FindPlane("data");
  const auto& asws = t.DomainsAt(data, 2);
  for (size_t i = 0; i < asws.size(); ++i) {
    const Domain& d = t.domain(asws[i]);
    if (i + 1 < asws.size()) {  // the last ASW takes what is left
      EXPECT_GE(d.nodes.size(), 32u);
      EXPECT_LE(d.nodes.size(), 64u);
    }
    std::set<uint32_t> models;
    for (NodeId n : d.nodes) models.insert(s->node(n).spec.model.value());
    EXPECT_EQ(models.size(), 1u) << d.name;
  }
  EXPECT_EQ(t.DomainsAt(*t.FindPlane("param"), 0).size(), 8u);  // 1000 nodes / 128 per pod
  EXPECT_TRUE(s->CheckInvariants().ok());
}

TEST(Generator, TheSameSeedGivesTheSameClusterAndTheHyperscaleSizeFits) {
  GeneratorOptions o;
  o.total_gpus = 8 * 3000;
  auto a = GenerateCluster(o), b = GenerateCluster(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(WriteClusterSpec(*a), WriteClusterSpec(*b));
  o.seed = 2;
  EXPECT_NE(WriteClusterSpec(*a), WriteClusterSpec(*GenerateCluster(o)));
  GeneratorOptions big;  // the default: Alibaba's 155,410 GPUs in 8-GPU nodes
  auto h = GenerateCluster(big);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->num_nodes(), 155410u / 8);
  EXPECT_EQ(h->total_gpu_milli(), int64_t{155410 / 8 * 8} * 1000);
}

TEST(Generator, BadOptionsAreRejectedNamingTheOption) {
  GeneratorOptions o;
  o.nodes_per_asw_min = 70;
  EXPECT_EQ(GenerateCluster(o).status().message(), "--nodes-per-asw: min exceeds max");
  o = GeneratorOptions();
  o.gpus_per_node = 0;
  EXPECT_EQ(GenerateCluster(o).status().message(), "--gpus-per-node: must be positive, got 0");
  EXPECT_FALSE(ParseModelMix("H800:x:128:2048").ok());
  EXPECT_FALSE(ParseModelMix("H800:1:128").ok());
  auto mix = ParseModelMix("H800:3:128:2048,A10:1:64:512");
  ASSERT_TRUE(mix.ok());
  EXPECT_EQ(mix->size(), 2u);
  EXPECT_EQ((*mix)[1].cpu_cores, 64);
}

}  // namespace
}  // namespace estuary
