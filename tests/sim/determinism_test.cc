// Acceptance: the same inputs and seed give a byte-identical summary.json apart from wall_seconds,
// through the real command-line entry point.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/testing/shared_files.h"
#include "tools/cli.h"

namespace estuary {
namespace {

std::string ReadWithoutWallSeconds(const std::string& path) {
  std::ifstream f(path);
  std::stringstream out;
  std::string line;
  while (std::getline(f, line)) {
    if (line.find("\"wall_seconds\"") == std::string::npos) out << line << '\n';
  }
  return out.str();
}

int RunEstuary(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return RunCli(static_cast<int>(argv.size()), argv.data());
}

TEST(Determinism, TheSameSeedGivesAByteIdenticalSummaryApartFromWallSeconds) {
  const std::string nodes = testing::SharedFile("traces/openb/openb_node_list_gpu_node.csv");
  const std::string pods = testing::SharedFile("traces/openb/openb_pod_list_gpushare40.csv");
  ESTUARY_REQUIRE_SHARED_FILES(nodes, pods);
  const std::string dir = ::testing::TempDir() + "/estuary_determinism";
  std::filesystem::remove_all(dir);
  for (const char* run : {"a", "b"}) {
    ASSERT_EQ(RunEstuary({"estuary", "openb", "--nodes", nodes, "--pods", pods, "--policy", "fgd", "--seeds", "42-44",
                   "--out", dir + "/" + run}),
              0);
  }
  const std::string a = ReadWithoutWallSeconds(dir + "/a/summary.json");
  const std::string b = ReadWithoutWallSeconds(dir + "/b/summary.json");
  ASSERT_FALSE(a.empty());
  EXPECT_NE(a.find("\"gpu_alloc_pct_by_seed\""), std::string::npos);
  EXPECT_EQ(a, b);
  // The curve files carry no timing at all and must match whole.
  std::ifstream ca(dir + "/a/alloc_curve.csv"), cb(dir + "/b/alloc_curve.csv");
  std::stringstream sa, sb;
  sa << ca.rdbuf();
  sb << cb.rdbuf();
  EXPECT_EQ(sa.str(), sb.str());
  // A different seed list gives different results.
  ASSERT_EQ(RunEstuary({"estuary", "openb", "--nodes", nodes, "--pods", pods, "--policy", "fgd", "--seeds", "45-47", "--out",
                 dir + "/c"}),
            0);
  EXPECT_NE(a, ReadWithoutWallSeconds(dir + "/c/summary.json"));
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(Determinism, TheSameScenarioGivesByteIdenticalSimulateOutputsWithGeneratedJobsAndFailures) {
  // examples/failures.yaml draws both its jobs and its node failures from the seeds.
  const std::string scenario = std::string(ESTUARY_SOURCE_DIR) + "/examples/failures.yaml";
  const std::string dir = ::testing::TempDir() + "/estuary_determinism_simulate";
  std::filesystem::remove_all(dir);
  for (const char* run : {"a", "b"}) {
    ASSERT_EQ(RunEstuary({"estuary", "simulate", scenario, "--out", dir + "/" + run}), 0);
  }
  const std::string summary = ReadWithoutWallSeconds(dir + "/a/summary.json");
  EXPECT_NE(summary.find("\"node_failures_count\""), std::string::npos);
  EXPECT_EQ(summary, ReadWithoutWallSeconds(dir + "/b/summary.json"));
  for (const char* file : {"/jobs.csv", "/timeseries.csv"}) {
    const std::string a = ReadAll(dir + "/a" + file);
    EXPECT_GT(a.size(), 100u) << file;
    EXPECT_EQ(a, ReadAll(dir + "/b" + file)) << file;
  }
}

}  // namespace
}  // namespace estuary
