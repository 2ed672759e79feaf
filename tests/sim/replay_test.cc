// Time-based replay: waiting, retry when capacity frees, metrics over simulated time.
#include "sim/replay.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sim/trace/openb_reader.h"
#include "tests/testing/fixtures.h"
#include "tests/testing/shared_files.h"

namespace estuary {
namespace {

ReplayWorkload Workload(testing::ClusterBuilder& c, std::vector<ReplayTask> tasks) {
  ReplayWorkload w;
  w.cluster = c.state;
  w.tasks = std::move(tasks);
  std::vector<TaskRequest> reqs;
  for (const auto& t : w.tasks) reqs.push_back(t.req);
  w.typical = TypicalTasks::FromWorkload(reqs);
  return w;
}

ReplayOptions Options(const std::string& policy = "best-fit") {
  ReplayOptions o;
  o.policy = policy;
  o.seed = 1;
  o.sample_interval = 10;
  o.check_invariants = true;
  return o;
}

TEST(Replay, ATaskThatDoesNotFitWaitsUntilCapacityFreesThenRunsItsFullDuration) {
  testing::ClusterBuilder c;
  c.AddNode("n", testing::Gpus(8));
  // a holds the node from t=0 to t=100; b arrives at t=10 and must wait 90 s, then runs 50 s.
  ReplayWorkload w = Workload(c, {{testing::Req().Gpus(8), "a", 0, 100, ""}, {testing::Req().Gpus(4), "b", 10, 50, ""}});
  auto r = RunReplay(w, Options());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->tasks_started_count, 2);
  EXPECT_EQ(r->tasks_never_started_count, 0);
  EXPECT_EQ(r->end_time, 150);
  EXPECT_DOUBLE_EQ(r->wait_s_max, 90);
  EXPECT_EQ(r->pending_max_count, 1);
  // Allocation: 100% for 100 s, then 50% for 50 s -> time-weighted mean 83.33%.
  EXPECT_NEAR(r->gpu_alloc_pct_mean, 100.0 * (100 * 100 + 50 * 50) / 150 / 100, 1e-9);
  EXPECT_DOUBLE_EQ(r->gpu_alloc_pct_max, 100.0);
}

TEST(Replay, WaitingTasksDoNotBlockLaterOnesThatFit) {
  testing::ClusterBuilder c;
  c.AddNode("n", testing::Gpus(4));
  ReplayWorkload w = Workload(c, {{testing::Req().Gpus(2), "a", 0, 100, ""},
                                  {testing::Req().Gpus(4), "big", 1, 10, ""},
                                  {testing::Req().Gpus(2), "small", 2, 10, ""}});
  auto r = RunReplay(w, Options());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tasks_started_count, 3);
  // small starts at once (wait 0); big waits for a (t=100) and small (t=12): 99 s.
  EXPECT_DOUBLE_EQ(r->wait_s_max, 99);
  EXPECT_DOUBLE_EQ(r->wait_s_p50, 0);
}

TEST(Replay, ATaskNoNodeCanEverHoldIsDroppedAsInfeasible) {
  testing::ClusterBuilder c;
  c.AddNode("n", testing::Gpus(2));
  ReplayWorkload w = Workload(c, {{testing::Req().Gpus(4), "huge", 0, 10, ""}, {testing::Req().Gpus(1), "ok", 5, 10, ""}});
  auto r = RunReplay(w, Options());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tasks_infeasible_count, 1);
  EXPECT_EQ(r->tasks_started_count, 1);
}

TEST(Replay, ATaskAskingForMoreCpuThanAnyNodeHasIsInfeasibleNotWaiting) {
  testing::ClusterBuilder c;
  c.AddNode("n", testing::Gpus(2));
  ReplayWorkload w = Workload(c, {{testing::Req().Gpus(2), "a", 0, 1000, ""},
                                  {testing::Req().Cpu(200000), "cpu-hog", 10, 5, ""}});
  auto r = RunReplay(w, Options());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tasks_infeasible_count, 1);
  EXPECT_EQ(r->pending_max_count, 0);
}

TEST(Replay, SameSeedSameResults) {
  testing::ClusterBuilder c;
  for (int i = 0; i < 4; ++i) c.AddNode("n" + std::to_string(i), testing::Gpus(4));
  std::vector<ReplayTask> tasks;
  for (int i = 0; i < 60; ++i) tasks.push_back({testing::Req().Cpu(1000).SharedGpu(100 + 10 * (i % 7)), "t" + std::to_string(i), i * 3, 40 + i % 11, ""});
  ReplayWorkload w = Workload(c, tasks);
  for (const char* policy : {"fgd", "random", "gpu-packing"}) {
    auto a = RunReplay(w, Options(policy));
    auto b = RunReplay(w, Options(policy));
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->gpu_alloc_pct_mean, b->gpu_alloc_pct_mean) << policy;
    ASSERT_EQ(a->samples.size(), b->samples.size());
    for (size_t i = 0; i < a->samples.size(); ++i) EXPECT_EQ(a->samples[i].gpu_alloc_pct, b->samples[i].gpu_alloc_pct);
  }
}

TEST(Replay, TheDefaultOpenbTraceReplaysWithInvariantsCheckedAtEveryEvent) {
  const std::string nodes_path = testing::SharedFile("traces/openb/openb_node_list_gpu_node.csv");
  const std::string pods_path = testing::SharedFile("traces/openb/openb_pod_list_default.csv");
  ESTUARY_REQUIRE_SHARED_FILES(nodes_path, pods_path);
  auto nodes = ReadOpenbNodes(nodes_path);
  auto cluster = BuildCluster(*nodes, nodes_path);
  auto list = ReadOpenbTasks(pods_path);
  auto reqs = OpenbRequests(*list, cluster->models());
  auto w = MakeReplayWorkload(std::move(cluster).value(), *list, std::move(reqs).value());
  ASSERT_TRUE(w.ok()) << w.status().message();
  ReplayOptions o = Options("fgd");
  o.sample_interval = 3600;
  auto r = RunReplay(*w, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->tasks_started_count + r->tasks_never_started_count + r->tasks_infeasible_count,
            static_cast<int64_t>(w->tasks.size()));
  EXPECT_GT(r->gpu_alloc_pct_mean, 0);
  EXPECT_LE(r->gpu_alloc_pct_max, 100);
}

TEST(Replay, CompressingArrivalsRaisesTheLoadAndKeepsDurations) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/scaled_pods.csv";
  {
    std::ofstream f(path);
    f << "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
      << "a,1000,10,8,1000,,LS,Running,0,100,0\n"
      << "b,1000,10,8,1000,,LS,Running,100,200,100\n";
  }
  auto list = ReadOpenbTasks(path);
  ASSERT_TRUE(list.ok()) << list.status().message();
  for (double scale : {1.0, 0.5}) {
    testing::ClusterBuilder c;
    c.AddNode("n", testing::Gpus(8));
    auto reqs = OpenbRequests(*list, c.state.models());
    ASSERT_TRUE(reqs.ok());
    auto w = MakeReplayWorkload(c.state, *list, *reqs, scale);
    ASSERT_TRUE(w.ok());
    EXPECT_EQ(w->tasks[1].creation, scale == 1.0 ? 100 : 50);
    EXPECT_EQ(w->tasks[1].runtime, 100);
    auto r = RunReplay(*w, Options());
    ASSERT_TRUE(r.ok());
    // As recorded, b starts when a ends; compressed, b waits 50 s for a.
    EXPECT_DOUBLE_EQ(r->wait_s_max, scale == 1.0 ? 0 : 50) << scale;
  }
}

}  // namespace
}  // namespace estuary
