// Idle-GPU causes per probe shape (metrics.md §3) and topology fulfilment (§5), on a snapshot whose
// numbers are worked out by hand in the comments.
#include "sim/capacity_metrics.h"

#include <gtest/gtest.h>

#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::ClusterBuilder;
using testing::Idx;
using testing::Req;

testing::NodeShape Shape(int gpus, MilliCpu cpu, const char* model = "V100") {
  testing::NodeShape s = testing::Gpus(gpus);
  s.cpu = cpu;
  s.model = model;
  return s;
}

// A: 8 GPUs, 64 cores; HP 3.5 GPUs and 20 cores -> 4.5 idle GPUs, 44 idle cores.
// B: 8 GPUs, 128 cores; HP 6 GPUs and 10 cores -> 2 idle GPUs, 118 idle cores.
// C: 16 GPUs (skipped by §3). D: 8 idle T4 GPUs, 96 cores.
struct Snapshot {
  ClusterBuilder c;
  Snapshot() {
    const PlaneId data = *c.state.topology().AddPlane("data", {"asw", "node"});
    NodeId a = c.AddNode("a", Shape(8, 64000));
    NodeId b = c.AddNode("b", Shape(8, 128000));
    NodeId cc = c.AddNode("c", Shape(16, 128000));
    NodeId d = c.AddNode("d", Shape(8, 96000, "T4"));
    for (auto [n, asw] : {std::pair{a, "x"}, std::pair{b, "x"}, std::pair{cc, "z"}, std::pair{d, "y"}}) {
      const std::vector<std::string> names = {asw};
      EXPECT_TRUE(c.state.AssignDomains(n, data, names).ok());
    }
    c.state.Bind(c.Submit("a1", Req().Cpu(15000).Gpus(3)), a, Idx({0, 1, 2}));
    c.state.Bind(c.Submit("a2", Req().Cpu(5000).SharedGpu(500)), a, Idx({3}));
    c.state.Bind(c.Submit("b1", Req().Cpu(10000).Gpus(6)), b, Idx({0, 1, 2, 3, 4, 5}));
    c.state.Bind(c.Submit("c1", Req().Cpu(128000).Gpus(16)), cc,
                 Idx({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  }
};

const IdleCauses& Shape(const std::vector<IdleCauses>& v, const std::string& name) {
  for (const auto& c : v) {
    if (c.shape.name == name) return c;
  }
  ADD_FAILURE() << name;
  return v[0];
}

TEST(IdleGpuCauses, SplitsIdleGpusIntoFractionalStrandedAndInsufficientCpuPerShape) {
  Snapshot s;
  const auto causes = IdleGpuCauses(s.c.state);
  ASSERT_EQ(causes.size(), 8u);
  for (const auto& c : causes) EXPECT_DOUBLE_EQ(c.idle_gpus, 4.5 + 2 + 8) << c.shape.name;
  // 1G8C: A has 4 whole + 0.5; B 2 whole; D 8 whole; all have the cores.
  EXPECT_DOUBLE_EQ(Shape(causes, "1G8C").fractional, 0.5);
  EXPECT_DOUBLE_EQ(Shape(causes, "1G8C").stranded, 0);
  EXPECT_DOUBLE_EQ(Shape(causes, "1G8C").insufficient_cpu, 0);
  // 4G32C: A fractional 0.5; B's 2 GPUs are stranded.
  EXPECT_DOUBLE_EQ(Shape(causes, "4G32C").fractional, 0.5);
  EXPECT_DOUBLE_EQ(Shape(causes, "4G32C").stranded, 2);
  // 4G48C: A has 44 cores < 48 -> its 4 usable GPUs lack CPU; B stranded 2.
  EXPECT_DOUBLE_EQ(Shape(causes, "4G48C").insufficient_cpu, 4);
  EXPECT_DOUBLE_EQ(Shape(causes, "4G48C").stranded, 2);
  // 8G64C: A lacks CPU with 4.5 < 8 idle -> 4.5; B stranded 2; D fits whole (no fraction).
  EXPECT_DOUBLE_EQ(Shape(causes, "8G64C").insufficient_cpu, 4.5);
  EXPECT_DOUBLE_EQ(Shape(causes, "8G64C").stranded, 2);
  // 8G128C: A 4.5, B (118 < 128) 2, D (96 < 128) 8 all lack CPU.
  EXPECT_DOUBLE_EQ(Shape(causes, "8G128C").insufficient_cpu, 4.5 + 2 + 8);
  EXPECT_DOUBLE_EQ(Shape(causes, "8G128C").stranded, 0);
}

TEST(IdleGpuCauses, WorkThatIsNotHpCountsAsIdle) {
  Snapshot s;
  const auto causes = IdleGpuCauses(s.c.state, [](const Task& t) { return t.name != "b1"; });
  EXPECT_DOUBLE_EQ(Shape(causes, "8G64C").idle_gpus, 4.5 + 8 + 8);  // B's 6 GPUs are reclaimable
}

TEST(JobsFulfillable, CountsJobsWithinOneDomainAndAcrossDomainsPerModel) {
  Snapshot s;
  // Slots: A min(8 - 3, floor(44/12)) = 3; B min(2, 9) = 2; C 0; D min(8, 8) = 8 (T4).
  auto four = JobsFulfillable(s.c.state, 4, "data", "asw");
  ASSERT_TRUE(four.ok()) << four.status().message();
  EXPECT_EQ(four->within, 1 + 0 + 2);  // x: 5/4, z: 0, y: 8/4
  EXPECT_EQ(four->across, 1 + 2);      // V100: 5/4, T4: 8/4
  auto eight = JobsFulfillable(s.c.state, 8, "data", "asw");
  ASSERT_TRUE(eight.ok());
  EXPECT_EQ(eight->within, 1);
  EXPECT_EQ(eight->across, 1);
}

TEST(JobsFulfillable, NamesAMissingPlaneOrLevel) {
  Snapshot s;
  EXPECT_EQ(JobsFulfillable(s.c.state, 8, "param", "asw").status().message(), "no topology plane 'param'");
  EXPECT_EQ(JobsFulfillable(s.c.state, 8, "data", "rdma_pod").status().message(), "plane 'data' has no level 'rdma_pod'");
}

}  // namespace
}  // namespace estuary
