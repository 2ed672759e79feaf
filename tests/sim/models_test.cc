// A job's `models` pin in a single-cluster scenario: its replicas run only on nodes of the named
// GPU models, and a name the cluster lacks is an error naming the job's line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sim/scenario.h"
#include "sim/simulate.h"
#include "tests/testing/bad_input.h"
#include "tests/testing/temp_dir.h"

namespace estuary {
namespace {

// Node h (H800) and node a (A100), 8 GPUs each; the scenario's jobs are `jobs` (from line 7).
class ModelPin : public ::testing::Test {
 protected:
  StatusOr<SimulateResult> Run(const std::string& jobs) {
    const std::string spec = testing::WriteFile(dir_, "c.yaml",
                                                "name: c\npools:\n"
                                                "  - {name: h800, gpu_model: H800, gpus_per_node: 8, cpu_cores: 96, memory_gib: 1024}\n"
                                                "  - {name: a100, gpu_model: A100, gpus_per_node: 8, cpu_cores: 96, memory_gib: 1024}\n"
                                                "nodes:\n  - {name: h, pool: h800}\n  - {name: a, pool: a100}\n");
    auto sc = ParseScenario("name: t\nduration_s: 1000\nsample_interval_s: 100\ncluster:\n  spec: " + spec + "\njobs:\n" +
                                jobs + "configurations:\n  - {name: c}\n",
                            "s.yaml");
    if (!sc.ok()) return sc.status();
    auto cluster = LoadScenarioCluster(*sc);
    if (!cluster.ok()) return cluster.status();
    return RunScenario(*sc, *cluster, sc->configurations[0], 1, /*check_invariants=*/true);
  }
  testing::TempDir dir_;
};

TEST_F(ModelPin, APinnedJobWaitsForItsModelWhileAnotherModelIsFree) {
  // p1 takes the A100 node; p2 (A100 only) waits although the H800 node is free; u, of the same
  // request but unpinned, is not held back by p2 and takes the H800 node.
  auto r = Run("  - {name: p1, gpus: 8, models: [A100], duration_s: 5000}\n"
               "  - {name: p2, gpus: 8, models: A100, duration_s: 5000}\n"
               "  - {name: u, gpus: 8, duration_s: 5000}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->jobs.size(), 3u);
  EXPECT_EQ(r->jobs[0].start_s, 0);
  EXPECT_EQ(r->jobs[1].start_s, -1);
  EXPECT_EQ(r->jobs[1].status, SimJobStatus::kPending);
  EXPECT_EQ(r->jobs[2].start_s, 0);
}

TEST_F(ModelPin, AJobPinnedToEitherModelStartsOnWhicheverIsFree) {
  auto r = Run("  - {name: h, gpus: 8, models: [H800], duration_s: 5000}\n"
               "  - {name: any, gpus: 8, models: [H800, A100], duration_s: 5000}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->jobs[0].start_s, 0);
  EXPECT_EQ(r->jobs[1].start_s, 0);
}

TEST_F(ModelPin, AModelTheClusterLacksIsNamedWithTheJobsLine) {
  auto r = Run("  - {name: j, gpus: 8}\n  - {name: k, gpus: 8, models: [A100, B200]}\n");
  EXPECT_TRUE(testing::IsBadInput(r, "s.yaml:8: job 'k': models: the cluster has no GPU model 'B200'"));
}

}  // namespace
}  // namespace estuary
