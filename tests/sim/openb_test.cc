// The openb protocol against the FGD paper's published results, plus the simulator's own
// guarantees: invariants after every step, determinism, and the top-up rule.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "sched/plugins/register.h"
#include "sim/openb.h"
#include "sim/outputs.h"
#include "sim/trace/openb_reader.h"
#include "tests/testing/fixtures.h"
#include "tests/testing/shared_files.h"

namespace estuary {
namespace {

const std::string kNodes = testing::SharedFile("traces/openb/openb_node_list_gpu_node.csv");
const std::string kDefaultPods = testing::SharedFile("traces/openb/openb_pod_list_default.csv");
const std::string kReference = testing::SharedFile("reference/openb_expected_alloc.csv");

#define REQUIRE_SHARED() ESTUARY_REQUIRE_SHARED_FILES(kNodes, kDefaultPods, kReference)

OpenbWorkload LoadWorkload(const std::string& pods) {
  auto nodes = ReadOpenbNodes(kNodes);
  EXPECT_TRUE(nodes.ok()) << nodes.status().message();
  auto cluster = BuildCluster(*nodes, kNodes);
  auto tasks = ReadOpenbTasks(pods);
  EXPECT_TRUE(tasks.ok()) << tasks.status().message();
  OpenbWorkload w;
  w.tasks = *OpenbRequests(*tasks, cluster->models());
  w.cluster = std::move(cluster).value();
  for (const auto& r : tasks->rows) w.names.push_back(r.name);
  w.typical = TypicalTasks::FromWorkload(w.tasks);
  return w;
}

std::vector<uint64_t> Seeds(uint64_t a, uint64_t b) {
  std::vector<uint64_t> v;
  for (uint64_t s = a; s <= b; ++s) v.push_back(s);
  return v;
}

class OpenbReference : public ::testing::TestWithParam<std::pair<const char*, double>> {};

// Acceptance: on the default trace, the 10-seed mean at the end is within 0.6 pp of the published
// mean for fgd and best-fit.
TEST_P(OpenbReference, MeanAllocationAtTheEndMatchesThePublishedMean) {
  REQUIRE_SHARED();
  const auto [policy, tolerance_pp] = GetParam();
  OpenbWorkload w = LoadWorkload(kDefaultPods);
  auto published = ReadPublishedOpenb(kReference, "default");
  ASSERT_TRUE(published.ok()) << published.status().message();
  OpenbOptions o;
  o.policy = policy;
  o.seeds = Seeds(42, 51);
  auto r = RunOpenb(w, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto expected = published->EndMean(policy, o.seeds);
  ASSERT_TRUE(expected.has_value());
  EXPECT_NEAR(r->gpu_alloc_pct_mean, *expected, tolerance_pp) << policy;
  // The curve follows the published one over the whole run, not only at the end.
  auto curve = published->MeanCurve(policy, o.seeds);
  for (int x = 10; x <= 130; x += 10) {
    ASSERT_TRUE(r->alloc_curve_mean[x].has_value()) << x;
    EXPECT_NEAR(*r->alloc_curve_mean[x], *(*curve)[x], 1.0) << policy << " at " << x << "% arrived";
  }
}

INSTANTIATE_TEST_SUITE_P(DefaultTrace, OpenbReference,
                         ::testing::Values(std::make_pair("fgd", 0.6), std::make_pair("best-fit", 0.6)),
                         [](const auto& info) { return std::string(info.param.first) == "fgd" ? "fgd" : "best_fit"; });

TEST(Openb, EveryPolicyKeepsTheClusterStateConsistentAfterEveryTask) {
  REQUIRE_SHARED();
  OpenbWorkload w = LoadWorkload(kDefaultPods);
  for (const std::string& policy : OpenbPolicyNames()) {
    OpenbOptions o;
    o.policy = policy;
    o.seeds = {42};
    o.tune = 0.8;  // stops before the cluster saturates; every step is still checked
    o.check_invariants = true;
    auto r = RunOpenb(w, o);
    ASSERT_TRUE(r.ok()) << policy << ": " << r.status().message();
    EXPECT_GT(r->seeds[0].tasks_placed, 0) << policy;
  }
}

TEST(Openb, TheClassIndexMakesExactlyTheScansDecisionsOnTheDefaultTrace) {
  REQUIRE_SHARED();
  OpenbWorkload w = LoadWorkload(kDefaultPods);
  OpenbRunInfo info;
  for (const char* policy : {"dotprod", "gpu-clustering", "gpu-packing", "best-fit", "fgd"}) {
    std::string summary[2];
    for (int indexed = 0; indexed < 2; ++indexed) {
      OpenbOptions o;
      o.policy = policy;
      o.seeds = {42, 43};
      o.indexed = indexed == 1;
      auto r = RunOpenb(w, o);
      ASSERT_TRUE(r.ok());
      summary[indexed] = OpenbSummaryJson(*r, info, nullptr).dump();
      summary[indexed] = summary[indexed].substr(0, summary[indexed].find("\"wall_seconds\""));
    }
    EXPECT_EQ(summary[0], summary[1]) << policy;
  }
}

TEST(Openb, SameSeedGivesIdenticalSummariesAndOtherSeedsDiffer) {
  REQUIRE_SHARED();
  OpenbWorkload w = LoadWorkload(kDefaultPods);
  OpenbRunInfo info;
  auto run = [&](uint64_t seed) {
    OpenbOptions o;
    o.policy = "fgd";
    o.seeds = {seed};
    auto r = RunOpenb(w, o);
    EXPECT_TRUE(r.ok());
    return OpenbSummaryJson(*r, info, nullptr).dump();
  };
  const std::string a = run(7), b = run(7), c = run(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Openb, TopUpComparesOnlyThePerGpuMilliOfASampleWithTheTarget) {
  // The published code's quirk: a sample is added while requested + its per-GPU milli stays within
  // tune x capacity, and then counts its whole request. One 4-GPU task on a 10-GPU cluster, tune
  // 1.3 (target 13,000): 4,000 -> 8,000 -> 12,000 -> 16,000 (12,000 + 1,000 <= 13,000), then stop.
  testing::ClusterBuilder c;
  c.AddNode("n", testing::Gpus(10));
  OpenbWorkload w;
  w.cluster = c.state;
  w.tasks = {testing::Req().Gpus(4)};
  w.names = {"a"};
  EXPECT_EQ(OpenbTaskOrder(w, 42, 1.3).size(), 4u);
}

TEST(Openb, TheTraceComesFirstInASeededShuffleThenTheSamples) {
  testing::ClusterBuilder c;
  c.AddNode("n", testing::Gpus(8));
  OpenbWorkload w;
  w.cluster = c.state;
  for (int i = 0; i < 6; ++i) {
    w.tasks.push_back(testing::Req().SharedGpu(100));
    w.names.push_back("t" + std::to_string(i));
  }
  const auto a = OpenbTaskOrder(w, 1, 1.0), b = OpenbTaskOrder(w, 1, 1.0), other = OpenbTaskOrder(w, 2, 1.0);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, other);
  EXPECT_EQ(std::set<uint32_t>(a.begin(), a.begin() + 6), (std::set<uint32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(a.size(), 80u);  // 8,000 milli / 100 per task
}

TEST(Openb, FailedTasksAreDroppedAndCountedByShape) {
  testing::ClusterBuilder c;
  c.AddNode("n", testing::Gpus(2));
  OpenbWorkload w;
  w.cluster = c.state;
  w.tasks = {testing::Req().Gpus(2), testing::Req().Gpus(2), testing::Req().Gpus(2)};
  w.names = {"a", "b", "c"};
  w.typical = TypicalTasks::FromWorkload(w.tasks);
  OpenbOptions o;
  o.policy = "best-fit";
  o.seeds = {1};
  o.tune = 3.0;  // exactly the three tasks: 6,000 milli on a 2,000-milli cluster
  o.check_invariants = true;
  auto r = RunOpenb(w, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->seeds[0].tasks_arrived, 3);
  EXPECT_EQ(r->seeds[0].tasks_placed, 1);
  EXPECT_EQ(r->seeds[0].failed_by_shape.at("2-gpu"), 2);
  EXPECT_DOUBLE_EQ(r->seeds[0].gpu_alloc_pct, 100.0);
}

TEST(ArrivalCurve, BucketsByRoundedArrivalAndFillsGapsFromNeighbours) {
  ArrivalCurve c;
  c.Add(0.4, 10.0);   // bucket 0
  c.Add(1.6, 20.0);   // bucket 2
  c.Add(2.4, 30.0);   // bucket 2
  c.Add(2.5, 99.0);   // ties to even: bucket 2
  auto v = c.Values();
  EXPECT_DOUBLE_EQ(*v[0], 10.0);
  EXPECT_DOUBLE_EQ(*v[2], (20.0 + 30.0 + 99.0) / 3);
  EXPECT_DOUBLE_EQ(*v[1], (10.0 + 20.0 + 30.0 + 99.0) / 4);  // empty: mean of buckets 0..2
  EXPECT_FALSE(v[4].has_value());
}

}  // namespace
}  // namespace estuary
