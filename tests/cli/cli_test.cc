// The estuary command line as a user meets it: the real binary runs as a subprocess (under
// `timeout 120` and a 512 MiB address-space cap, so a hang or a runaway allocation fails the test
// instead of the machine). Bad input of any kind — a file, a row, a flag — exits with code 2 and
// writes exactly one line to stderr naming the file:line and column, or the flag. Good input
// exits 0 and writes summary.json.
#include <csv.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "sim/cluster/cluster_spec.h"
#include "sim/trace/snapshot.h"
#include "tests/testing/cli_run.h"
#include "tests/testing/temp_dir.h"

namespace estuary {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kBinary[] = ESTUARY_BINARY;
constexpr char kNodeHeader[] = "sn,cpu_milli,memory_mib,gpu,model\n";
constexpr char kTaskHeader[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
    "scheduled_time\n";
constexpr char kGoodTask[] = "pod-0,1000,1024,1,1000,,LS,Running,0,100,0\n";  // line 2 of the files below

using estuary::testing::TempDir;
using estuary::testing::WriteFile;

using estuary::testing::ReadFile;
using estuary::testing::RejectedWith;
using estuary::testing::RunEstuary;
using estuary::testing::RunResult;
using estuary::testing::ShellQuote;

// "file:line: column 'c': " — how a message names one field of a file.
std::string AtColumn(const std::string& path, unsigned line, const std::string& column) {
  return path + ":" + std::to_string(line) + ": column '" + column + "': ";
}
std::string AtLine(const std::string& path, unsigned line) { return path + ":" + std::to_string(line) + ": "; }

// A valid two-node cluster (V100 and T4) and five tasks with times, in a fresh directory.
class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kBinary)) << "build the estuary binary first: " << kBinary;
    ASSERT_FALSE(dir_.path().empty());
    nodes_ = WriteFile(dir_, "nodes.csv",
                       std::string(kNodeHeader) + "node-a,32000,65536,2,V100\nnode-b,64000,131072,4,T4\n");
    pods_ = WriteFile(dir_, "pods.csv",
                      std::string(kTaskHeader) + kGoodTask +
                          "pod-1,2000,2048,1,500,V100,LS,Running,10,50,10\n"
                          "pod-2,0,512,0,0,,BE,Running,20,200,20\n"
                          "pod-3,4000,4096,2,1000,T4,LS,Running,30,300,30\n"
                          "pod-4,1000,1024,1,250,,LS,Running,40,90,40\n");
  }
  // A task file with one good row (line 2) and `row` as line 3.
  std::string PodsWithThirdLine(const std::string& row) {
    return WriteFile(dir_, "bad_pods.csv", std::string(kTaskHeader) + kGoodTask + row + "\n");
  }
  std::string Out(const std::string& name) const { return (dir_.path() / name).string(); }

  TempDir dir_;
  std::string nodes_, pods_;
};

// --- positive runs -----------------------------------------------------------------------------

TEST_F(Cli, HelpExitsZeroAndListsTheSubcommands) {
  const RunResult r = RunEstuary({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r;
  for (const char* sub : {"openb", "replay", "simulate", "cluster", "curve", "defrag"}) EXPECT_THAT(r.out, HasSubstr(sub));
}

TEST_F(Cli, OpenbOnATinyClusterWritesASummaryWithTheContractKeys) {
  const std::string out = Out("openb-out");
  const RunResult r = RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd", "--seeds", "1-2",
                                  "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.err, "");
  const nlohmann::json s = nlohmann::json::parse(ReadFile(out + "/summary.json"), nullptr, false);
  ASSERT_FALSE(s.is_discarded()) << "summary.json is not JSON";
  for (const char* key : {"policy", "tie_break", "seeds", "gpu_alloc_pct_mean", "gpu_alloc_pct_by_seed", "wall_seconds"}) {
    EXPECT_TRUE(s.contains(key)) << key;
  }
  EXPECT_EQ(s.value("policy", ""), "fgd");
  EXPECT_EQ(s.value("tie_break", ""), "node-order");
  EXPECT_EQ(s["seeds"], nlohmann::json::array({1, 2}));
  ASSERT_TRUE(s["gpu_alloc_pct_by_seed"].is_object());
  ASSERT_EQ(s["gpu_alloc_pct_by_seed"].size(), 2u);
  const double seed1 = s["gpu_alloc_pct_by_seed"].value("1", -1.0), seed2 = s["gpu_alloc_pct_by_seed"].value("2", -1.0);
  EXPECT_GT(seed1, 0.0);
  EXPECT_LE(seed1, 100.0);
  EXPECT_GT(seed2, 0.0);
  EXPECT_LE(seed2, 100.0);
  ASSERT_TRUE(s["gpu_alloc_pct_mean"].is_number());
  EXPECT_NEAR(s["gpu_alloc_pct_mean"].get<double>(), (seed1 + seed2) / 2, 1e-3);
  ASSERT_TRUE(s["wall_seconds"].is_number());
  EXPECT_GE(s["wall_seconds"].get<double>(), 0.0);
}

TEST_F(Cli, ReplayOnATinyClusterWritesASummaryWithConfigurations) {
  const std::string out = Out("replay-out");
  const RunResult r = RunEstuary({"replay", "--nodes", nodes_, "--pods", pods_, "--policy", "best-fit", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.err, "");
  const nlohmann::json s = nlohmann::json::parse(ReadFile(out + "/summary.json"), nullptr, false);
  ASSERT_FALSE(s.is_discarded()) << "summary.json is not JSON";
  ASSERT_TRUE(s.contains("configurations"));
  ASSERT_TRUE(s["configurations"].contains("best-fit"));
  const nlohmann::json& c = s["configurations"]["best-fit"];
  EXPECT_EQ(c.value("tasks_started_count", -1.0), 5.0);
  EXPECT_GT(c.value("gpu_alloc_pct_mean", -1.0), 0.0);
  EXPECT_LE(c.value("gpu_alloc_pct_mean", 1e9), 100.0);
}

// --- bad node and task files --------------------------------------------------------------------

TEST_F(Cli, RejectsANodeFileWithNonNumericCpuNamingLineAndColumn) {
  const std::string nodes = WriteFile(dir_, "bad_nodes.csv",
                                      std::string(kNodeHeader) + "node-a,32000,65536,2,V100\nnode-b,lots,1,4,T4\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes, "--pods", pods_, "--policy", "fgd"}),
                           {AtColumn(nodes, 3, "cpu_milli")}));
}

TEST_F(Cli, RejectsANodeFileWithADuplicateNameNamingTheDuplicateLine) {
  const std::string nodes = WriteFile(dir_, "bad_nodes.csv",
                                      std::string(kNodeHeader) + "node-a,32000,65536,2,V100\nnode-a,64000,1,4,T4\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes, "--pods", pods_, "--policy", "fgd"}),
                           {AtColumn(nodes, 3, "sn"), "node-a"}));
}

TEST_F(Cli, RejectsGpuMilliAboveOneThousandNamingLineAndColumn) {
  const std::string pods = PodsWithThirdLine("pod-x,1000,1024,1,1200,,LS,Running,0,100,0");
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes_, "--pods", pods, "--policy", "fgd"}),
                           {AtColumn(pods, 3, "gpu_milli"), "1200"}));
}

TEST_F(Cli, RejectsANonNumericMemoryNamingLineAndColumn) {
  const std::string pods = PodsWithThirdLine("pod-x,1000,1Gi,1,1000,,LS,Running,0,100,0");
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes_, "--pods", pods, "--policy", "fgd"}),
                           {AtColumn(pods, 3, "memory_mib"), "'1Gi'"}));
}

TEST_F(Cli, RejectsANegativeCpuNamingLineAndColumn) {
  const std::string pods = PodsWithThirdLine("pod-x,-1,1024,1,1000,,LS,Running,0,100,0");
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes_, "--pods", pods, "--policy", "fgd"}),
                           {AtColumn(pods, 3, "cpu_milli"), "negative"}));
}

TEST_F(Cli, RejectsATaskFileWithoutTheGpuMilliColumnNamingLineOne) {
  const std::string pods = WriteFile(dir_, "bad_pods.csv", "name,cpu_milli,memory_mib,num_gpu\npod-x,1,1,0\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes_, "--pods", pods, "--policy", "fgd"}),
                           {AtLine(pods, 1) + "missing column 'gpu_milli'"}));
}

TEST_F(Cli, RejectsAMalformedTaskRowNamingItsLine) {
  const std::string pods = PodsWithThirdLine("pod-x,1000,1024");
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes_, "--pods", pods, "--policy", "fgd"}),
                           {AtLine(pods, 3) + "malformed row"}));
}

TEST_F(Cli, RejectsAGpuModelNoNodeHasNamingLineAndColumn) {
  const std::string pods = PodsWithThirdLine("pod-x,1000,1024,1,1000,A100,LS,Running,0,100,0");
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes_, "--pods", pods, "--policy", "fgd"}),
                           {AtColumn(pods, 3, "gpu_spec"), "A100"}));
}

TEST_F(Cli, RejectsANodeFileThatDoesNotExistNamingIt) {
  const std::string nodes = Out("absent.csv");
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes, "--pods", pods_, "--policy", "fgd"}),
                           {nodes + ": cannot open"}));
}

TEST_F(Cli, RejectsATaskFileThatDoesNotExistNamingIt) {
  const std::string pods = Out("absent.csv");
  EXPECT_TRUE(RejectedWith(RunEstuary({"replay", "--nodes", nodes_, "--pods", pods, "--policy", "fgd"}),
                           {pods + ": cannot open"}));
}

// --- bad flags ---------------------------------------------------------------------------------

TEST_F(Cli, RejectsAnUnknownPolicyListingTheKnownOnes) {
  const RunResult r = RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "foo"});
  EXPECT_TRUE(RejectedWith(r, {"--policy", "'foo'", "random", "dotprod", "gpu-clustering", "gpu-packing", "best-fit",
                               "fgd"}));
}

TEST_F(Cli, RejectsBadSeedListsNamingTheWrongSeed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"5-3", "--seeds '5-3': range end is below its start"},
      {"abc", "--seeds 'abc': 'abc' is not a non-negative integer"},
      {"-1", "--seeds '-1': '-1' is not a non-negative integer"},  // not a range from ''
      {"1,,2", "--seeds '1,,2': '' is not a non-negative integer"},
      {"3,1,3", "--seeds '3,1,3': seed 3 is given twice"},
      {"1-10001", "--seeds '1-10001': more than 10000 seeds"},
  };
  for (const auto& [seeds, message] : cases) {
    EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd", "--seeds", seeds}),
                             {message}))
        << seeds;
  }
}

TEST_F(Cli, RejectsAZeroTune) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd", "--tune", "0"}),
                           {"--tune"}));
}

TEST_F(Cli, RejectsANegativeTune) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd", "--tune", "-1"}),
                           {"--tune"}));
}

TEST_F(Cli, OpenbAcceptsMigrateOnFailureAndReportsMigrationCounters) {
  const std::string out = Out("openb-migrate");
  const RunResult r = RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd", "--seeds", "1-2",
                                  "--migrate-on-failure", "--max-moves", "3", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r;
  const nlohmann::json s = nlohmann::json::parse(ReadFile(out + "/summary.json"), nullptr, false);
  ASSERT_FALSE(s.is_discarded()) << "summary.json is not JSON";
  for (const char* key : {"policy", "gpu_alloc_pct_mean", "gpu_alloc_pct_by_seed", "tasks_failed_count", "migrations_count",
                          "migrated_gpu_milli", "tasks_placed_by_migration_count"}) {
    EXPECT_TRUE(s.contains(key)) << key;
  }
  EXPECT_EQ(s.value("migrate_on_failure", false), true);
  EXPECT_EQ(s.value("max_moves", 0), 3);
}

TEST_F(Cli, OpenbWithoutMigrationHasNoMigrationCounters) {
  const std::string out = Out("openb-plain");
  const RunResult r = RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd", "--seeds", "1",
                                  "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r;
  const nlohmann::json s = nlohmann::json::parse(ReadFile(out + "/summary.json"), nullptr, false);
  EXPECT_FALSE(s.contains("migrations_count"));
}

TEST_F(Cli, RejectsAZeroMaxMoves) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd",
                                       "--migrate-on-failure", "--max-moves", "0"}),
                           {"--max-moves"}));
}

TEST_F(Cli, RejectsAMaxMovesAboveEight) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd",
                                       "--migrate-on-failure", "--max-moves", "9"}),
                           {"--max-moves"}));
}

TEST_F(Cli, RejectsANonNumericMaxMoves) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd",
                                       "--migrate-on-failure", "--max-moves", "two"}),
                           {"--max-moves"}));
}

TEST_F(Cli, RejectsANegativeMaxChainDepth) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd",
                                       "--migrate-on-failure", "--max-chain-depth", "-1"}),
                           {"--max-chain-depth"}));
}

TEST_F(Cli, RejectsAMaxChainDepthAboveTwo) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd",
                                       "--migrate-on-failure", "--max-chain-depth", "3"}),
                           {"--max-chain-depth"}));
}

TEST_F(Cli, RejectsANonNumericMaxChainDepth) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd",
                                       "--migrate-on-failure", "--max-chain-depth", "deep"}),
                           {"--max-chain-depth"}));
}

TEST_F(Cli, OpenbAcceptsMaxChainDepthTwo) {
  const RunResult r = RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd", "--seeds", "1",
                                  "--migrate-on-failure", "--max-moves", "4", "--max-chain-depth", "2",
                                  "--out", Out("openb-depth2")});
  EXPECT_EQ(r.exit_code, 0) << r;
}

TEST_F(Cli, RejectsAnUnknownTieBreakRule) {
  EXPECT_TRUE(RejectedWith(
      RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd", "--tie-break", "sideways"}),
      {"--tie-break", "sideways"}));
}

TEST_F(Cli, RejectsAnUnknownFlagNamingIt) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd", "--fast"}),
                           {"--fast"}));
}

TEST_F(Cli, RejectsAMissingNodesFlagNamingIt) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"openb", "--pods", pods_, "--policy", "fgd"}), {"--nodes"}));
}

TEST_F(Cli, RejectsAMissingSubcommand) {
  EXPECT_TRUE(RejectedWith(RunEstuary({}), {"subcommand"}));
}

// --- replay ------------------------------------------------------------------------------------

TEST_F(Cli, ReplayRejectsATaskListWithoutTimeColumnsNamingTheFileAndColumn) {
  const std::string pods = WriteFile(dir_, "multigpu.csv",
                                     "name,cpu_milli,memory_mib,num_gpu,gpu_milli\npod-0,1000,1024,1,1000\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"replay", "--nodes", nodes_, "--pods", pods, "--policy", "fgd"}),
                           {AtLine(pods, 1), "'creation_time'"}));
}

TEST_F(Cli, ReplayRejectsADeletionBeforeTheCreationNamingLineAndColumn) {
  const std::string pods = PodsWithThirdLine("pod-x,1000,1024,1,1000,,LS,Running,500,400,0");
  EXPECT_TRUE(RejectedWith(RunEstuary({"replay", "--nodes", nodes_, "--pods", pods, "--policy", "fgd"}),
                           {AtColumn(pods, 3, "deletion_time")}));
}

TEST_F(Cli, ReplayRejectsAZeroSampleInterval) {
  EXPECT_TRUE(RejectedWith(
      RunEstuary({"replay", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd", "--sample-interval", "0"}),
      {"--sample-interval"}));
}

// A task whose traced life spans 10^15 s (a valid non-negative integer) must not make the replay
// sample the state every hour for 31 million years: either it runs, or it is refused naming the
// column or the flag — never an abort from exhausted memory.
TEST_F(Cli, ReplayOfATaskWithAHugeLifetimeRunsOrIsRefusedButNeverExhaustsMemory) {
  const std::string pods = PodsWithThirdLine("pod-x,1000,1024,1,1000,,LS,Running,0,1000000000000000,0");
  const std::string out = Out("huge-out");
  const RunResult r = RunEstuary({"replay", "--nodes", nodes_, "--pods", pods, "--policy", "fgd", "--out", out});
  if (r.exit_code == 0) {
    EXPECT_TRUE(fs::exists(out + "/summary.json")) << r;
  } else {
    const bool names_column = r.err.find(AtColumn(pods, 3, "deletion_time")) != std::string::npos;
    const bool names_flag = r.err.find("--sample-interval") != std::string::npos;
    EXPECT_TRUE(RejectedWith(r, {}) && (names_column || names_flag))
        << "expected exit 0, or exit 2 naming " << AtColumn(pods, 3, "deletion_time") << " or --sample-interval; got "
        << r;
  }
}

// A task that waits and then runs until (almost) the end of int64 time must not overflow the
// clock: the replay either refuses the time naming its line and column, or reports sane metrics.
TEST_F(Cli, ReplayNeverReportsMoreThanFullAllocationForTimesNearTheInt64Limit) {
  const std::string nodes = WriteFile(dir_, "one_gpu.csv", std::string(kNodeHeader) + "node-a,32000,65536,1,V100\n");
  const std::string pods = PodsWithThirdLine("pod-x,1000,1024,1,1000,,LS,Running,0,9223372036854775807,0");
  const std::string out = Out("int64-out");
  const RunResult r = RunEstuary({"replay", "--nodes", nodes, "--pods", pods, "--policy", "fgd", "--out", out});
  if (r.exit_code == 0) {
    const nlohmann::json s = nlohmann::json::parse(ReadFile(out + "/summary.json"), nullptr, false);
    ASSERT_FALSE(s.is_discarded()) << r;
    const double mean = s["configurations"]["fgd"].value("gpu_alloc_pct_mean", -1.0);
    EXPECT_GE(mean, 0.0) << r;
    EXPECT_LE(mean, 100.0) << "time-weighted allocation above 100%: the event clock overflowed\n" << r;
  } else {
    EXPECT_TRUE(RejectedWith(r, {AtColumn(pods, 3, "deletion_time")}));
  }
}

// --- outputs and the reference -----------------------------------------------------------------

TEST_F(Cli, RejectsAMalformedReferenceRowNamingItsLine) {
  std::string header = "trace,policy,tune,seed,total_gpus";
  for (int x = 0; x <= 130; ++x) header += "," + std::to_string(x);
  const std::string ref = WriteFile(dir_, "ref.csv", header + "\npods,fgd,1.3,1,6\n");
  EXPECT_TRUE(RejectedWith(
      RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd", "--seeds", "1", "--reference", ref}),
      {AtLine(ref, 2) + "malformed row"}));
}

TEST_F(Cli, RejectsAnOutputDirectoryUnderARegularFileNamingIt) {
  const std::string file = WriteFile(dir_, "plain-file", "not a directory\n");
  const std::string out = file + "/out";
  EXPECT_TRUE(RejectedWith(
      RunEstuary({"openb", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd", "--seeds", "1", "--out", out}),
      {out, "cannot create"}));
}

TEST_F(Cli, ClusterGenerateWritesASpecThatClusterCheckReadsBack) {
  const std::string spec = (dir_.path() / "asi.yaml").string();
  RunResult g = RunEstuary({"cluster", "generate", "--out", spec, "--total-gpus", "8000", "--seed", "3"});
  ASSERT_EQ(g.exit_code, 0) << g;
  EXPECT_THAT(g.out, HasSubstr("1000 nodes, 8000 GPUs, 3 GPU models; plane data: "));
  RunResult c = RunEstuary({"cluster", "check", spec});
  ASSERT_EQ(c.exit_code, 0) << c;
  EXPECT_EQ(c.out.substr(0, c.out.find('\n')), g.out.substr(0, g.out.find('\n')));
}

TEST_F(Cli, ClusterGenerateRejectsBadOptionsNamingThem) {
  const std::string spec = (dir_.path() / "x.yaml").string();
  EXPECT_TRUE(RejectedWith(RunEstuary({"cluster", "generate", "--out", spec, "--nodes-per-asw", "64-32"}),
                           {"--nodes-per-asw", "min exceeds max"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"cluster", "generate", "--out", spec, "--nodes-per-asw", "lots"}),
                           {"--nodes-per-asw", "MIN-MAX"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"cluster", "generate", "--out", spec, "--models", "H800:1"}), {"--models", "H800:1"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"cluster", "generate", "--out", spec, "--total-gpus", "0"}), {"--total-gpus"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"cluster", "generate", "--out", nodes_ + "/x.yaml"}), {"--out"}));
}

TEST_F(Cli, ClusterCheckRejectsABadSpecNamingFileLineAndField) {
  const std::string spec = WriteFile(dir_, "bad.yaml",
                                     "pools:\n  - {name: p, gpu_model: H800, gpus_per_node: 8, cpu_cores: 64, memory_gib: 8}\n"
                                     "nodes:\n  - {name: a, pool: nope}\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"cluster", "check", spec}), {spec + ":4: field 'pool': unknown pool 'nope'"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"cluster", "check", (dir_.path() / "missing.yaml").string()}), {"cannot open file"}));
}

TEST_F(Cli, SimulateRejectsABadScenarioNamingFileLineAndField) {
  const std::string sc = WriteFile(dir_, "s.yaml",
                                   "name: t\ncluster:\n  spec: c.yaml\njobs:\n  - {name: j, replicas: {min: 2, max: 4, step: 8}, gpus: 8}\n"
                                   "configurations:\n  - {name: a}\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", sc}), {sc + ":5: field 'replicas.step': 8 is above 'replicas.max' 4"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", (dir_.path() / "none.yaml").string()}), {"cannot open file"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", sc, "--out", nodes_ + "/x"}), {"--out"}));
  const std::string failures = WriteFile(dir_, "f.yaml",
                                         "name: t\ncluster:\n  spec: c.yaml\njobs:\n  - {name: j, gpus: 8}\n"
                                         "failures:\n  node_mtbf_h: 0\n  repair_s: 600\nconfigurations:\n  - {name: a}\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", failures}), {failures + ":7: field 'node_mtbf_h'", "positive"}));
  const std::string windows = WriteFile(dir_, "w.yaml",
                                        "name: t\ncluster:\n  spec: c.yaml\njobs:\n"
                                        "  - {name: j, gpus: 8, standby: [{from_s: 0, to_s: 600}, {from_s: 500, to_s: 900}]}\n"
                                        "configurations:\n  - {name: a, standby: {grace_s: 60}}\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", windows}), {windows + ":5: field 'standby[1].from_s': 500 is before the end of standby[0] 600"}));
  const std::string curve = WriteFile(dir_, "curve.csv", "hour,demand_pct\n0,50\n1,x\n");
  const std::string tidal = WriteFile(dir_, "t.yaml",
                                      "name: t\ncluster:\n  spec: c.yaml\ntidal: {curve: curve.csv}\n"
                                      "jobs:\n  - {name: j, gpus: 8}\nconfigurations:\n  - {name: a}\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", tidal}), {curve + ":3: column 'demand_pct'"}));
}

TEST_F(Cli, AFederationScenarioWithBadMembersExitsTwoNamingTheField) {
  const std::string head = "name: t\nfederation:\n  members:\n";
  const std::string a = "    - {name: a, cluster: {generate: {total_gpus: 64}}}\n";
  const std::string tail = "jobs:\n  - {name: j, gpus: 8}\nconfigurations:\n  - {name: c, federation: reclaim-aware}\n";
  const std::string dup = WriteFile(dir_, "dup.yaml", head + a + a + tail);
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", dup}), {dup + ":5: field 'name'", "duplicate member 'a'"}));
  const std::string empty =
      WriteFile(dir_, "empty.yaml", head + a + "    - {name: b, cluster: {generate: {total_gpus: 4, gpus_per_node: 8}}}\n" + tail);
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", empty}), {empty + ":5: federation: member 'b': cluster: no nodes"}));
  const std::string headroom = WriteFile(
      dir_, "headroom.yaml", head + "    - {name: a, cluster: {generate: {total_gpus: 64}}, headroom: {replicas: 2, models: [B200]}}\n" + tail);
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", headroom}),
                           {headroom + ":4: federation: member 'a': headroom: cluster 'a' has no GPU model B200"}));
  const std::string unknown = WriteFile(
      dir_, "unknown.yaml", head + a + "jobs:\n  - {name: j, gpus: 8, home: z}\nconfigurations:\n  - {name: c, federation: blind}\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", unknown}), {unknown + ":6: field 'home'", "unknown member 'z'"}));
  const std::string mode = WriteFile(dir_, "mode.yaml", head + a + "jobs:\n  - {name: j, gpus: 8}\nconfigurations:\n  - {name: c, federation: psychic}\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", mode}), {mode + ":8: field 'federation'", "unknown mode"}));
}

TEST_F(Cli, AFederationScenarioWritesTheFourConfigurationsToTheSummary) {
  const std::string sc = WriteFile(
      dir_, "fed.yaml",
      "name: fed\nduration_s: 7200\nsample_interval_s: 600\nseeds: [1]\nfederation:\n  members:\n"
      "    - {name: a, cluster: {generate: {total_gpus: 256, seed: 1, models: 'H800:1:128:2048'}}}\n"
      "    - {name: b, cluster: {generate: {total_gpus: 256, seed: 2, models: 'A100:1:96:1024'}}}\n"
      "generator:\n  arrivals_per_hour: 200\n  classes:\n"
      "    - {share: 1, class: hp-training, replicas: 2, gpus: 8, cpu_cores: 32, memory_gib: 256, duration_mean_s: 1800}\n"
      "    - {share: 2, class: lp, replicas: {min: 4, max: 16, step: 4}, gpus: 1, cpu_cores: 4, memory_gib: 32, duration_mean_s: 3600}\n"
      "configurations:\n  - {name: blind, federation: blind, absorb: true}\n  - {name: idle-only, federation: idle-only, absorb: true}\n"
      "  - {name: reclaim-aware, federation: reclaim-aware, absorb: true}\n  - {name: merged, federation: merged, absorb: true}\n");
  const std::string out = (dir_.path() / "out").string();
  const RunResult r = RunEstuary({"simulate", sc, "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r;
  const auto j = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  for (const char* c : {"blind", "idle-only", "reclaim-aware", "merged"}) {
    ASSERT_TRUE(j["configurations"].contains(c)) << c;
    for (const char* m : {"hp_sched_delay_p99_s", "needless_preemptions_count", "evictions_count", "dispatch_rejections_count",
                          "alloc_ratio_hp_lp_pct", "member_a_alloc_ratio_hp_lp_pct", "alloc_imbalance_pct",
                          "goodput_gpu_hours", "run_gpu_hours"}) {
      EXPECT_TRUE(j["configurations"][c].contains(m)) << c << " " << m;
    }
  }
  EXPECT_EQ(j["configurations"]["reclaim-aware"]["needless_preemptions_count"], 0);
}

TEST_F(Cli, SimulateWithEventsWritesJobEventsCsv) {
  const std::string sc = (fs::path(ESTUARY_SOURCE_DIR) / "examples" / "priority-small.yaml").string();
  const std::string out = (dir_.path() / "e").string();
  ASSERT_EQ(RunEstuary({"simulate", sc, "--out", out, "--events"}).exit_code, 0);
  const std::string ev = ReadFile(out + "/job_events.csv");
  EXPECT_EQ(ev.substr(0, ev.find('\n')), "configuration,seed,time_s,job,kind,replicas,detail");
  EXPECT_NE(ev.find(",start,"), std::string::npos);
  EXPECT_NE(ev.find(",evict,0,reclaim"), std::string::npos);  // the reclaim configuration evicts
  const std::string plain = (dir_.path() / "p").string();
  ASSERT_EQ(RunEstuary({"simulate", sc, "--out", plain}).exit_code, 0);
  EXPECT_FALSE(fs::exists(plain + "/job_events.csv"));
}

// --- simulate outputs ---------------------------------------------------------------------------

const std::string kExamples = std::string(ESTUARY_SOURCE_DIR) + "/examples/";

// The rows of a simulate jobs.csv, read with a CSV parser (quoted fields decoded), each as
// column -> value. Fails the test when the header is not the documented one.
std::vector<std::map<std::string, std::string>> ReadJobsCsv(const std::string& path) {
  static const std::vector<std::string> kColumns = {"configuration", "seed",    "job",     "replicas", "gpus_per_replica",
                                                    "gpus",          "submit_s", "start_s", "delay_s",  "granted",
                                                    "status",        "domains",  "entropy"};
  std::vector<std::map<std::string, std::string>> rows;
  try {
    io::CSVReader<13, io::trim_chars<>, io::double_quote_escape<',', '"'>> in(path);
    in.read_header(io::ignore_no_column, "configuration", "seed", "job", "replicas", "gpus_per_replica", "gpus",
                   "submit_s", "start_s", "delay_s", "granted", "status", "domains", "entropy");
    std::vector<std::string> v(13);
    while (in.read_row(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12])) {
      std::map<std::string, std::string> row;
      for (size_t i = 0; i < kColumns.size(); ++i) row[kColumns[i]] = v[i];
      rows.push_back(row);
    }
  } catch (const io::error::base& e) {
    ADD_FAILURE() << path << ": " << e.what();
  }
  return rows;
}

TEST_F(Cli, SimulateWritesTheAlignJobRunningWithAll200ReplicasGrantedToJobsCsv) {
  // pp (200 x 8 GPUs, 86,400 s) starts at 0 on all 200 nodes and still runs at the 14,400 s
  // horizon (the failure at 3,600 s shrinks it to 192); the flat cluster has no domains.
  const std::string out = Out("align-out");
  const RunResult r = RunEstuary({"simulate", kExamples + "align-step8.yaml", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r;
  const auto rows = ReadJobsCsv(out + "/jobs.csv");
  ASSERT_EQ(rows.size(), 1u);
  const std::map<std::string, std::string> expected = {
      {"configuration", "estuary"}, {"seed", "42"},    {"job", "pp"},       {"replicas", "200"}, {"gpus_per_replica", "8"},
      {"gpus", "1600"},             {"submit_s", "0"}, {"start_s", "0"},    {"delay_s", "0"},    {"granted", "200"},
      {"status", "running"},        {"domains", ""},   {"entropy", ""}};
  EXPECT_EQ(rows[0], expected);
}

TEST_F(Cli, SimulateKeepsAJobLargerThanEveryAswAsInfeasibleInJobsCsvAndExitsZero) {
  // huge needs one ASW for 8 x 8 GPUs; each H800 ASW of two-asw.yaml has 4 nodes. fat needs 5,000
  // cores on one node: its reason lists counts with commas, so its status field is quoted.
  const std::string sc = WriteFile(dir_, "infeasible.yaml",
                                   "name: infeasible\nduration_s: 600\ncluster:\n  spec: " + kExamples +
                                       "clusters/two-asw.yaml\njobs:\n"
                                       "  - {name: huge, gpus: 8, replicas: 8, plane: data, required_level: asw}\n"
                                       "  - {name: fat, gpus: 1, cpu_cores: 5000}\n"
                                       "  - {name: small, gpus: 8, replicas: 2, plane: data, required_level: asw}\n"
                                       "configurations:\n  - {name: a}\n");
  const std::string out = Out("infeasible-out");
  const RunResult r = RunEstuary({"simulate", sc, "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.err, "");
  const auto rows = ReadJobsCsv(out + "/jobs.csv");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].at("job"), "huge");
  EXPECT_EQ(rows[0].at("status"), "infeasible: no asw could ever hold 8 replicas (the best holds at most 4 when empty)");
  EXPECT_EQ(rows[0].at("start_s"), "");
  EXPECT_EQ(rows[0].at("delay_s"), "600");
  EXPECT_EQ(rows[0].at("granted"), "");
  EXPECT_EQ(rows[1].at("job"), "fat");
  EXPECT_THAT(rows[1].at("status"), ::testing::StartsWith("infeasible: "));
  EXPECT_THAT(rows[1].at("status"), HasSubstr(","));
  EXPECT_EQ(rows[2].at("status"), "running");
  EXPECT_EQ(rows[2].at("domains"), "1");
  EXPECT_EQ(rows[2].at("entropy"), "0.000000");
  const nlohmann::json s = nlohmann::json::parse(ReadFile(out + "/summary.json"), nullptr, false);
  ASSERT_FALSE(s.is_discarded());
  EXPECT_EQ(s["configurations"]["a"].value("jobs_infeasible_count", -1.0), 2.0);
  EXPECT_EQ(s["configurations"]["a"].value("jobs_pending_end_count", -1.0), 0.0);
}

TEST_F(Cli, SimulateGivesTheSameSummaryOnOneThreadAsOnTwoAndRejectsZeroThreads) {
  const std::string sc = (fs::path(ESTUARY_SOURCE_DIR) / "examples" / "topology-small.yaml").string();
  const std::string one = (dir_.path() / "one").string(), two = (dir_.path() / "two").string();
  ASSERT_EQ(RunEstuary({"simulate", sc, "--threads", "1", "--out", one}).exit_code, 0);
  ASSERT_EQ(RunEstuary({"simulate", sc, "--threads", "2", "--out", two}).exit_code, 0);
  const auto a = nlohmann::json::parse(ReadFile(one + "/summary.json"));
  const auto b = nlohmann::json::parse(ReadFile(two + "/summary.json"));
  EXPECT_EQ(a.at("configurations"), b.at("configurations"));
  EXPECT_EQ(a.at("per_seed"), b.at("per_seed"));
  EXPECT_EQ(ReadFile(one + "/timeseries.csv"), ReadFile(two + "/timeseries.csv"));
  EXPECT_EQ(ReadFile(one + "/jobs.csv"), ReadFile(two + "/jobs.csv"));
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", sc, "--threads", "0"}), {"--threads"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", sc, "--threads", "many"}), {"--threads"}));
}

TEST_F(Cli, SimulateSummaryHoldsEachSeedsFiguresWhoseMeanIsTheConfigurationsFigure) {
  const std::string sc = (fs::path(ESTUARY_SOURCE_DIR) / "examples" / "topology-small.yaml").string();
  const std::string out = (dir_.path() / "s").string();
  ASSERT_EQ(RunEstuary({"simulate", sc, "--out", out}).exit_code, 0);
  const auto j = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  for (const auto& [conf, metrics] : j.at("configurations").items()) {
    const auto& seeds = j.at("per_seed").at(conf);
    ASSERT_EQ(seeds.size(), j.at("seeds").size()) << conf;
    for (const auto& [metric, mean] : metrics.items()) {
      double sum = 0;
      for (const auto& [seed, one] : seeds.items()) sum += one.at(metric).get<double>();
      EXPECT_NEAR(mean.get<double>(), sum / static_cast<double>(seeds.size()), 1e-3) << conf << " " << metric;
    }
  }
  const std::string header = ReadFile(out + "/timeseries.csv").substr(0, ReadFile(out + "/timeseries.csv").find('\n'));
  EXPECT_EQ(header,
            "configuration,seed,time_s,gpu_alloc_pct,free_nodes,pending_jobs,free_asws,free_rdma_pods,alloc_ratio_hp_pct,"
            "alloc_ratio_hp_lp_pct,idle_gpus,local_hour");
  // idle_by_hour.csv: 24 rows per configuration and seed, whose sum is the run's idle_gpu_hours.
  const std::string idle = ReadFile(out + "/idle_by_hour.csv");
  EXPECT_EQ(idle.substr(0, idle.find('\n')), "configuration,seed,hour,idle_gpu_hours");
  std::map<std::string, double> sums;
  std::istringstream lines(idle.substr(idle.find('\n') + 1));
  for (std::string line; std::getline(lines, line);) {
    const size_t a = line.find(','), b = line.find(',', a + 1), c = line.find(',', b + 1);
    sums[line.substr(0, b)] += std::stod(line.substr(c + 1));
  }
  ASSERT_EQ(sums.size(), j.at("configurations").size() * j.at("seeds").size());
  for (const auto& [key, sum] : sums) {
    const std::string conf = key.substr(0, key.find(',')), seed = key.substr(key.find(',') + 1);
    EXPECT_NEAR(sum, j.at("per_seed").at(conf).at(seed).at("idle_gpu_hours").get<double>(), 0.01) << key;
  }
}

// --- curve ---------------------------------------------------------------------------------------

// A QPS trace over one UTC day: hour 0 at rate 1 + 2 (two containers), hour 12 at 6 (the API
// gateway, which has no container), nothing else; the 0-valued last row ends the span at 23:59:59.
constexpr char kQps[] =
    "timestamp_anon,value,container_ip,request_type\n"
    "0.0,1,c1,Generative Requests\n"
    "0.0,2,c2,Generative Requests\n"
    "43200.0,6,,API Requests\n"
    "86399.0,0,c1,Generative Requests\n";

TEST_F(Cli, CurveWritesTheDerivedCurveInLocalTimeWithAHeaderComment) {
  const std::string qps = WriteFile(dir_, "qps.csv", kQps);
  const std::string out = Out("curve.csv");
  const RunResult r = RunEstuary({"curve", "--qps", qps, "--out", out, "--utc-offset-h", "-2"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("wrote " + out));
  // UTC 0:00 is 22:00 local (50 %), UTC 12:00 is 10:00 local (100 %).
  std::string want = "# estuary curve --qps " + qps +
                     " --utc-offset-h -2: mean total request rate per local hour (UTC-2), percent of the peak "
                     "hour; interpolated hours: none\nhour,demand_pct\n";
  for (int h = 0; h < 24; ++h) want += std::to_string(h) + "," + (h == 22 ? "50" : h == 10 ? "100" : "0") + "\n";
  EXPECT_EQ(ReadFile(out), want);
}

TEST_F(Cli, CurveDefaultsToUtcPlusEight) {
  const std::string qps = WriteFile(dir_, "qps.csv", kQps);
  const std::string out = Out("curve.csv");
  const RunResult r = RunEstuary({"curve", "--qps", qps, "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(ReadFile(out), HasSubstr("(UTC+8)"));
  EXPECT_THAT(ReadFile(out), HasSubstr("\n8,50\n"));
  EXPECT_THAT(ReadFile(out), HasSubstr("\n20,100\n"));
}

TEST_F(Cli, CurveRejectsAUtcOffsetThatIsNotAWholeHourInTheRealTimeZonesNamingTheFlag) {
  const std::string qps = WriteFile(dir_, "qps.csv", kQps);
  for (const std::string bad : {"15", "-13", "8.5", "abc", ""}) {
    EXPECT_TRUE(RejectedWith(RunEstuary({"curve", "--qps", qps, "--out", Out("c.csv"), "--utc-offset-h", bad}),
                             {"--utc-offset-h", "[-12, 14]"}))
        << bad;
  }
  EXPECT_FALSE(fs::exists(Out("c.csv")));
}

TEST_F(Cli, CurveRejectsAMissingQpsOrOutFlagNamingIt) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"curve", "--out", Out("c.csv")}), {"--qps"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"curve", "--qps", WriteFile(dir_, "qps.csv", kQps)}), {"--out"}));
}

TEST_F(Cli, CurveRejectsAQpsFileThatDoesNotExistNamingIt) {
  const std::string absent = Out("absent.csv");
  EXPECT_TRUE(RejectedWith(RunEstuary({"curve", "--qps", absent, "--out", Out("c.csv")}), {absent, "cannot open file"}));
}

TEST_F(Cli, CurveRejectsABadQpsRowNamingFileLineAndColumn) {
  const std::string qps = WriteFile(dir_, "qps.csv", std::string(kQps) + "90000.0,lots,c1,Generative Requests\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"curve", "--qps", qps, "--out", Out("c.csv")}),
                           {AtColumn(qps, 6, "value"), "'lots' is not a decimal number"}));
}

TEST_F(Cli, CurveRejectsAnOutputFileThatCannotBeWrittenNamingTheFlag) {
  const std::string qps = WriteFile(dir_, "qps.csv", kQps);
  EXPECT_TRUE(RejectedWith(RunEstuary({"curve", "--qps", qps, "--out", Out("no-such-dir/c.csv")}), {"--out"}));
}


// --- defrag dry run (docs/defrag.md) -------------------------------------------------------------

constexpr char kDefragCluster[] = ESTUARY_SOURCE_DIR "/examples/defrag/cluster.yaml";
constexpr char kDefragSnapshot[] = ESTUARY_SOURCE_DIR "/examples/defrag/snapshot.csv";

// The example by hand (8-GPU nodes; asw1 = a-*, asw2 = b-*):
//   a-0000 train-0 GPUs 0-3, locked    (4 free)      b-0000 big-0 GPUs 0-5, gang within asw (2 free)
//   a-0001 w-0 GPUs 0-1                (6 free)      b-0001 mid-0 GPUs 0-2            (5 free)
//   a-0002 s-0 500 milli on GPU 0      (7.5 free)    b-0002 pin-0 GPU 0, locked       (7 free)
//   a-0003 empty: whole free                          b-0003 etl-0 CPU only: whole free
// Before: 2 whole free nodes; slack on the other 6. Candidates (not pinned) by fewest tasks, then
// least GPU milli: a-0002 (500), a-0001 (2000), b-0001 (3000), b-0000 (6000). Round 1:
//   1. s-0 -> best fit (least GPU milli left): b-0000 (2000 -> 1500), GPU 6.  a-0002 vacated.
//   2. w-0 needs 2 whole GPUs: a-0000 (4 -> 2 left) beats b-0001 (3) and b-0002 (5); GPUs 4,5.
//   3. mid-0 needs 3: a-0000 has 2, b-0000 1, so b-0002 (7 -> 4 left); GPUs 1,2,3.
//   b-0000 received s-0 this round, so it waits for round 2, where big-0 (6 GPUs, only within
//   asw2) finds no room: b-0002 has 4 free, and ejecting mid-0 leaves it nowhere to go. Rollback.
// After: 5 whole free nodes (a-0001, a-0002, a-0003, b-0001, b-0003); slack on a-0000, b-0000 and
// b-0002 (3). With --budget 2 the first two vacated nodes are kept: 4 whole free, slack 4.
TEST_F(Cli, DefragDryRunOnTheExampleWritesThePlanItsEffectAndAReadableSnapshotAfter) {
  const std::string out = Out("defrag-out");
  const RunResult r = RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r;
  const auto j = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  EXPECT_EQ(j["nodes"], 8);
  EXPECT_EQ(j["tasks"], 7);
  EXPECT_EQ(j["locked_tasks"], 2);
  EXPECT_EQ(j["moves"], 3);
  EXPECT_EQ(j["vacated_nodes"], 3);
  EXPECT_EQ(j["vacated_node_names"], nlohmann::json({"a-0001", "a-0002", "b-0001"}));
  EXPECT_EQ(j["whole_free_nodes_before"], 2);
  EXPECT_EQ(j["whole_free_nodes_after"], 5);
  EXPECT_EQ(j["nodes_with_slack_before"], 6);
  EXPECT_EQ(j["nodes_with_slack_after"], 3);
  for (const char* k : {"cluster", "snapshot", "wall_seconds", "plan_seconds"}) EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(ReadFile(out + "/plan.csv"),
            "step,task,job,from,to,gpus,chain,after\n"
            "1,s-0,infer,a-0002,b-0000,6,0,\n"
            "2,w-0,web,a-0001,a-0000,4;5,1,\n"
            "3,mid-0,mid,b-0001,b-0002,1;2;3,2,\n");

  // snapshot_after.csv reads back: its whole free nodes are the summary's "after".
  auto cluster = ReadClusterSpec(kDefragCluster);
  ASSERT_TRUE(cluster.ok()) << cluster.status().message();
  auto snap = ReadSnapshot(out + "/snapshot_after.csv", *cluster);
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  EXPECT_EQ(snap->tasks, 7);
  EXPECT_EQ(snap->locked_tasks, 2);
  int64_t whole_free = 0;
  for (const Node& n : cluster->nodes()) whole_free += n.spec.gpu_count > 0 && n.full_free_gpus == n.spec.gpu_count;
  EXPECT_EQ(whole_free, j["whole_free_nodes_after"].get<int64_t>());

  // Planning again on the result finds nothing more to do (stable).
  const std::string again = Out("defrag-again");
  const RunResult r2 =
      RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", out + "/snapshot_after.csv", "--out", again});
  ASSERT_EQ(r2.exit_code, 0) << r2;
  const auto j2 = nlohmann::json::parse(ReadFile(again + "/summary.json"));
  EXPECT_EQ(j2["moves"], 0);
  EXPECT_EQ(j2["whole_free_nodes_before"], 5);
}

TEST_F(Cli, DefragBudgetKeepsWholeVacatedNodesInPlanOrder) {
  const std::string out = Out("defrag-budget");
  const RunResult r = RunEstuary(
      {"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out", out, "--budget", "2"});
  ASSERT_EQ(r.exit_code, 0) << r;
  const auto j = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  EXPECT_EQ(j["moves"], 2);
  EXPECT_EQ(j["planned_moves"], 3);
  EXPECT_EQ(j["budget_moves"], 2);
  EXPECT_EQ(j["vacated_node_names"], nlohmann::json({"a-0001", "a-0002"}));
  EXPECT_EQ(j["whole_free_nodes_after"], 4);
  EXPECT_EQ(j["nodes_with_slack_after"], 4);
}

TEST_F(Cli, DefragGivesTheSamePlanOnTwoThreadsAndInPartitions) {
  const std::string a = Out("defrag-t1"), b = Out("defrag-t2");
  ASSERT_EQ(RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out", a,
                        "--partition-nodes", "0"}).exit_code, 0);
  ASSERT_EQ(RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out", b,
                        "--partition-nodes", "0", "--threads", "2"}).exit_code, 0);
  EXPECT_EQ(ReadFile(a + "/plan.csv"), ReadFile(b + "/plan.csv"));
  const std::string c = Out("defrag-aligned");
  const RunResult r = RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out", c,
                                  "--align-plane", "data", "--align-level", "asw", "--objective", "domains",
                                  "--objective-plane", "data", "--objective-level", "asw"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(nlohmann::json::parse(ReadFile(c + "/summary.json"))["partitions"], 2);
}

TEST_F(Cli, DefragRejectsEachBadFlagNamingIt) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--partition-nodes", "1"}, "--partition-nodes: 1"},
      {{"--partition-nodes", "-2"}, "--partition-nodes: -2"},
      {{"--budget", "0"}, "--budget: 0"},
      {{"--budget", "-4"}, "--budget: -4"},
      {{"--chain-depth", "-1"}, "--chain-depth: -1"},
      {{"--rounds", "-1"}, "--rounds: -1"},
      {{"--threads", "0"}, "--threads: 0"},
      {{"--objective", "blocks"}, "--objective: 'blocks' (expected nodes, domains or shape)"},
      {{"--objective", "shape"}, "--shape-gpus: required with --objective shape"},
      {{"--objective", "shape", "--shape-gpus", "0"}, "--shape-gpus: 0"},
      {{"--objective", "shape", "--shape-gpus", "17"}, "--shape-gpus: 17"},
      {{"--shape-gpus", "8"}, "--shape-gpus: only with --objective shape"},
      {{"--objective", "domains"}, "--objective: domains needs --objective-plane"},
      {{"--align-plane", "data"}, "--align-level: required"},
      {{"--align-plane", "param", "--align-level", "asw"}, "--align-plane: unknown plane 'param'"},
      {{"--align-plane", "data", "--align-level", "spine"}, "--align-level: plane 'data' has no level 'spine'"},
      {{"--partition-nodes", "many"}, "--partition-nodes"},
  };
  for (const auto& [flags, needle] : cases) {
    SCOPED_TRACE(needle);
    // RunEstuary takes an initializer list: spell the variable flags out.
    RunResult r;
    if (flags.size() == 2) {
      r = RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out", Out("defrag-bad"),
                      flags[0], flags[1]});
    } else {
      r = RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out", Out("defrag-bad"),
                      flags[0], flags[1], flags[2], flags[3]});
    }
    EXPECT_TRUE(RejectedWith(r, {needle}));
  }
}

TEST_F(Cli, DefragRejectsASnapshotWithAnUnknownNodeNamingFileLineAndColumn) {
  const std::string snap = WriteFile(dir_, "snap.csv",
                                     "task,job,node,gpus,gpu_milli,cpu_milli,memory_mib,locked\n"
                                     "t0,j0,a-0000,0,1000,1000,1024,false\n"
                                     "t1,j1,c-0007,0,1000,1000,1024,false\n");
  const RunResult r =
      RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", snap, "--out", Out("defrag-bad")});
  EXPECT_TRUE(RejectedWith(r, {AtColumn(snap, 3, "node"), "unknown node 'c-0007'"}));
}

TEST_F(Cli, DefragRejectsAMissingSnapshotFlagNamingIt) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"defrag", "--cluster", kDefragCluster, "--out", Out("d")}), {"--snapshot"}));
}

TEST_F(Cli, DefragRejectsABadClusterSpecNamingFileLineAndField) {
  const std::string spec = WriteFile(dir_, "c.yaml", "pools:\n  - {name: p, gpus_per_node: 99, cpu_cores: 1, memory_gib: 1}\n");
  EXPECT_TRUE(RejectedWith(
      RunEstuary({"defrag", "--cluster", spec, "--snapshot", kDefragSnapshot, "--out", Out("d")}), {spec + ":2"}));
}


// --- defrag --plan: applying a plan file (docs/defrag.md, "Applying a plan") ----------------------

// The planner's plan.csv, applied with --plan, gives byte for byte the snapshot_after.csv of the
// run that planned it, and the same effect in summary.json (the example above: 3 moves, 2 -> 5
// whole free nodes). A --budget plan reads back the same way.
TEST_F(Cli, DefragPlanFileWrittenByTheToolReadsBackToTheSameSnapshotAfter) {
  for (const bool budget : {false, true}) {
    SCOPED_TRACE(budget ? "--budget 2" : "whole plan");
    const std::string planned = Out(budget ? "pf-planned-b" : "pf-planned"), applied = Out(budget ? "pf-applied-b" : "pf-applied");
    const RunResult r = budget ? RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot,
                                             "--out", planned, "--budget", "2"})
                               : RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot,
                                             "--out", planned});
    ASSERT_EQ(r.exit_code, 0) << r;
    const RunResult a = RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out",
                                    applied, "--plan", planned + "/plan.csv"});
    ASSERT_EQ(a.exit_code, 0) << a;
    EXPECT_EQ(ReadFile(applied + "/snapshot_after.csv"), ReadFile(planned + "/snapshot_after.csv"));
    EXPECT_FALSE(fs::exists(applied + "/plan.csv"));
    const auto jp = nlohmann::json::parse(ReadFile(planned + "/summary.json"));
    const auto ja = nlohmann::json::parse(ReadFile(applied + "/summary.json"));
    EXPECT_EQ(ja["moves"], budget ? 2 : 3);
    EXPECT_EQ(ja["whole_free_nodes_after"], budget ? 4 : 5);
    EXPECT_EQ(ja["plan_seconds"], 0);
    EXPECT_EQ(ja["plan"], planned + "/plan.csv");
    for (const char* k : {"moves", "chains", "ejections", "vacated_nodes", "vacated_node_names",
                          "whole_free_nodes_before", "whole_free_nodes_after", "nodes_with_slack_before",
                          "nodes_with_slack_after", "tasks", "locked_tasks"}) {
      EXPECT_EQ(ja[k], jp[k]) << k;
    }
  }
}

// A hand-written plan that relies on an earlier step's room: w-0 leaves a-0001 (step 1), then s-0
// takes GPU 0 of a-0001 — wholly free only after step 1.
TEST_F(Cli, DefragPlanFileMayUseRoomAnEarlierStepFreed) {
  const std::string plan = WriteFile(dir_, "plan.csv",
                                     "step,task,job,from,to,gpus,chain,after\n"
                                     "1,w-0,web,a-0001,a-0000,4;5,0,\n"
                                     "2,mid-0,mid,b-0001,a-0001,0;1;2,1,1\n");
  const std::string out = Out("pf-hand");
  const RunResult r =
      RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out", out, "--plan", plan});
  ASSERT_EQ(r.exit_code, 0) << r;
  const auto j = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  EXPECT_EQ(j["moves"], 2);
  EXPECT_EQ(j["chains"], 2);
  EXPECT_EQ(j["ejections"], 0);
  EXPECT_EQ(j["vacated_node_names"], nlohmann::json({"b-0001"}));  // a-0001 received mid-0
  EXPECT_EQ(j["whole_free_nodes_after"], 3);
  EXPECT_THAT(ReadFile(out + "/snapshot_after.csv"), HasSubstr("mid-0,mid,a-0001,0;1;2,1000,"));
}

class DefragPlanFile : public Cli {
 protected:
  // Runs defrag on the example with a plan of the header and `rows` (the first row is line 2).
  RunResult Run(const std::string& rows, const std::string& header = "step,task,job,from,to,gpus,chain,after\n") {
    plan_ = WriteFile(dir_, "plan.csv", header + rows);
    return RunEstuary(
        {"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out", Out("pf-bad"), "--plan", plan_});
  }
  std::string plan_;
};

TEST_F(DefragPlanFile, RejectsAnEmptyFile) {
  EXPECT_TRUE(RejectedWith(Run("", ""), {AtLine(plan_, 1), "empty file"}));
}

TEST_F(DefragPlanFile, RejectsAMissingColumn) {
  EXPECT_TRUE(RejectedWith(Run("1,w-0,web,a-0001,a-0000,4;5,0\n", "step,task,job,from,to,gpus,chain\n"),
                           {AtLine(plan_, 1), "missing column 'after'"}));
}

TEST_F(DefragPlanFile, RejectsAnUnknownTask) {
  EXPECT_TRUE(RejectedWith(Run("1,w-9,web,a-0001,a-0000,4;5,0,\n"), {AtColumn(plan_, 2, "task"), "unknown task 'w-9'"}));
}

TEST_F(DefragPlanFile, RejectsALockedTask) {
  EXPECT_TRUE(RejectedWith(Run("1,pin-0,pin,b-0002,b-0001,4,0,\n"), {AtColumn(plan_, 2, "task"), "'pin-0' is locked"}));
}

TEST_F(DefragPlanFile, RejectsAnUnknownNode) {
  EXPECT_TRUE(RejectedWith(Run("1,w-0,web,a-0001,c-0001,4;5,0,\n"), {AtColumn(plan_, 2, "to"), "unknown node 'c-0001'"}));
}

TEST_F(DefragPlanFile, RejectsAFromThatIsNotWhereTheTaskIsAtThatStep) {
  EXPECT_TRUE(RejectedWith(Run("1,w-0,web,a-0002,a-0000,4;5,0,\n"),
                           {AtColumn(plan_, 2, "from"), "task 'w-0' is on 'a-0001' at step 1, not 'a-0002'"}));
}

TEST_F(DefragPlanFile, RejectsADuplicateStep) {
  EXPECT_TRUE(RejectedWith(Run("1,w-0,web,a-0001,a-0000,4;5,0,\n1,s-0,infer,a-0002,b-0000,6,1,\n"),
                           {AtColumn(plan_, 3, "step"), "duplicate step 1"}));
}

TEST_F(DefragPlanFile, RejectsABadStepNumber) {
  EXPECT_TRUE(RejectedWith(Run("0,w-0,web,a-0001,a-0000,4;5,0,\n"), {AtColumn(plan_, 2, "step"), "bad step 0: expected 1"}));
}

TEST_F(DefragPlanFile, RejectsAfterNamingAnUnknownStep) {
  EXPECT_TRUE(RejectedWith(Run("1,w-0,web,a-0001,a-0000,4;5,0,7\n"), {AtColumn(plan_, 2, "after"), "unknown step 7"}));
}

TEST_F(DefragPlanFile, RejectsAfterNamingALaterStep) {
  EXPECT_TRUE(RejectedWith(Run("1,w-0,web,a-0001,a-0000,4;5,0,2\n2,s-0,infer,a-0002,b-0000,6,1,\n"),
                           {AtColumn(plan_, 2, "after"), "step 2 is not before step 1"}));
}

TEST_F(DefragPlanFile, RejectsAGpuIndexOutOfRange) {
  EXPECT_TRUE(RejectedWith(Run("1,w-0,web,a-0001,a-0000,7;8,0,\n"), {AtColumn(plan_, 2, "gpus"), "GPU index 8 out of range"}));
}

TEST_F(DefragPlanFile, RejectsAGpuAlreadyTaken) {
  // train-0 holds GPUs 0-3 of a-0000.
  EXPECT_TRUE(RejectedWith(Run("1,w-0,web,a-0001,a-0000,3;4,0,\n"),
                           {AtColumn(plan_, 2, "gpus"), "GPU 3 of node 'a-0000' is taken at step 1"}));
}

TEST_F(DefragPlanFile, RejectsAMoveThatDoesNotFit) {
  // a-0000 has 64 cores; t0 asks 60: t1's 8 do not fit beside it.
  const std::string snap = WriteFile(dir_, "cpu.csv",
                                     "task,job,node,gpus,gpu_milli,cpu_milli,memory_mib,locked\n"
                                     "t0,j0,a-0000,0,1000,60000,1024,false\n"
                                     "t1,j1,a-0001,0,1000,8000,1024,false\n");
  const std::string plan = WriteFile(dir_, "cpu_plan.csv", "step,task,job,from,to,gpus,chain,after\n1,t1,j1,a-0001,a-0000,1,0,\n");
  EXPECT_TRUE(RejectedWith(
      RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", snap, "--out", Out("pf-bad"), "--plan", plan}),
      {AtColumn(plan, 2, "to"), "does not fit on 'a-0000' at step 1: CPU 8000 milli asked, 4000 free"}));
}

TEST_F(DefragPlanFile, RejectsABudgetWithAPlanNamingTheFlag) {
  plan_ = WriteFile(dir_, "plan.csv", "step,task,job,from,to,gpus,chain,after\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out",
                                       Out("pf-bad"), "--plan", plan_, "--budget", "2"}),
                           {"--budget: not with --plan"}));
}

// --objective shape on the example: every candidate would hold one 8-GPU, 60-core copy when empty
// and no destination loses one (only whole free nodes hold 8 free GPUs, and none receives), so the
// plan is the whole-free plan (3 moves). Copies before: a-0003 only (b-0003 has 56 cores free);
// after: a-0003, a-0001, a-0002, b-0001.
TEST_F(Cli, DefragShapeObjectiveReportsPlaceableCopiesOfTheShape) {
  const std::string out = Out("defrag-shape");
  const RunResult r = RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out", out,
                                  "--objective", "shape", "--shape-gpus", "8", "--shape-cpu-milli", "60000",
                                  "--shape-memory-mib", "1024"});
  ASSERT_EQ(r.exit_code, 0) << r;
  const auto j = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  EXPECT_EQ(j["moves"], 3);
  EXPECT_EQ(j["vacated_node_names"], nlohmann::json({"a-0001", "a-0002", "b-0001"}));
  EXPECT_EQ(j["placeable_before"], 1);
  EXPECT_EQ(j["placeable_after"], 4);
  EXPECT_EQ(j["options"]["shape_gpus"], 8);
  EXPECT_EQ(j["options"]["shape_cpu_milli"], 60000);
  const std::string nodes = Out("defrag-shape-nodes");
  ASSERT_EQ(RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out", nodes}).exit_code, 0);
  EXPECT_TRUE(nlohmann::json::parse(ReadFile(nodes + "/summary.json"))["placeable_before"].is_null());
}

TEST_F(Cli, DefragRejectsBadShapeResourcesNamingTheFlag) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out",
                                       Out("d"), "--objective", "shape", "--shape-gpus", "8", "--shape-cpu-milli", "-1"}),
                           {"--shape-cpu-milli: -1"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out",
                                       Out("d"), "--objective", "shape", "--shape-gpus", "8", "--shape-memory-mib", "-5"}),
                           {"--shape-memory-mib: -5"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out",
                                       Out("d"), "--objective", "shape", "--shape-gpus", "eight"}),
                           {"--shape-gpus"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"defrag", "--cluster", kDefragCluster, "--snapshot", kDefragSnapshot, "--out",
                                       Out("d"), "--shape-memory-mib", "100"}),
                           {"--shape-memory-mib: only with --objective shape"}));
}

}  // namespace
}  // namespace estuary

namespace estuary {
namespace {

// --- estuary serve and estuary agent: bad flags and files (exit 2, one line naming them) -------

class ServeCli : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    tokens_ = WriteFile(dir_, "tokens.txt", "admin-token-0123456789 admin ops\n");
  }
  std::string tokens_;
};

TEST_F(ServeCli, AListenAddressThatIsNotHostPortIsRejected) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"serve", "--listen", "localhost", "--data", Out("d"), "--tokens", tokens_}),
                           {"--listen", "'localhost' is not HOST:PORT"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"serve", "--listen", "127.0.0.1:70000", "--data", Out("d"), "--tokens", tokens_}),
                           {"--listen", "70000"}));
}

TEST_F(ServeCli, ABadTokensFileIsRejectedNamingFileLineAndField) {
  const std::string bad = WriteFile(dir_, "bad-tokens.txt", "admin-token-0123456789 admin ops\nuser-token-0123456789 root x\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"serve", "--listen", "127.0.0.1:1", "--data", Out("d"), "--tokens", bad}),
                           {bad + ":2: field 'role'", "'root'"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"serve", "--data", Out("d"), "--tokens", Out("missing.txt")}), {"missing.txt"}));
}

TEST_F(ServeCli, StoreFlagsAreChecked) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"serve", "--store", "redis", "--data", Out("d"), "--tokens", tokens_}),
                           {"--store", "'redis'"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"serve", "--store", "etcd", "--tokens", tokens_}), {"--etcd-endpoints"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"serve", "--tokens", tokens_}), {"--data"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"serve", "--data", Out("d"), "--tokens", tokens_, "--sync", "sometimes"}),
                           {"--sync", "'sometimes'"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"serve", "--store", "etcd", "--etcd-endpoints", "etcd:2379", "--tokens", tokens_}),
                           {"etcd:2379"}));
  const std::string file = WriteFile(dir_, "not-a-dir", "x");
  EXPECT_TRUE(RejectedWith(RunEstuary({"serve", "--data", file + "/sub", "--tokens", tokens_}), {"not-a-dir"}));
}

TEST_F(ServeCli, ABadSchedulerConfigurationIsRejectedNamingFileLineAndField) {
  const std::string two = WriteFile(dir_, "two.yaml",
                                    "name: s\nconfigurations:\n  - {name: a}\n  - {name: b, queue: sideways}\n");
  const std::string one = WriteFile(dir_, "one.yaml", "name: x\npolicy: nearest\n");
  const std::string packed = WriteFile(dir_, "packed.yaml", "{name: p, pack: {plane: data, level: asw}}\n");
  // Queues (issue 20): a child guaranteed more than its parent; a limit below the guarantee; a cycle.
  const std::string above = WriteFile(dir_, "above.yaml",
                                      "name: q\nqueues:\n  - {name: org, guarantee: {gpus: 8}}\n"
                                      "  - {name: team, parent: org, guarantee: {gpus: 16}}\n");
  const std::string limit = WriteFile(dir_, "limit.yaml",
                                      "name: q\nqueues:\n  - {name: a, guarantee: {gpus: {H800: 16}},\n"
                                      "     limit: {gpus: {H800: 8}}}\n");
  const std::string cycle = WriteFile(dir_, "cycle.yaml",
                                      "name: q\nqueues:\n  - {name: a, parent: b}\n  - {name: b, parent: a}\n");
  const std::string negative = WriteFile(dir_, "negative.yaml", "name: q\nqueues:\n  - {name: a, guarantee: {gpus: -8}}\n");
  const std::string rebalance =
      WriteFile(dir_, "rebalance.yaml", "name: q\nqueues:\n  - {name: a}\nsharing:\n  rebalance: sometimes\n");
  // The k8s-default peer's keys (docs/peers.md): an unknown victim selection; k8s victims with
  // topology on.
  const std::string victims = WriteFile(dir_, "victims.yaml", "name: k\ntopology: false\npreempt: {victims: kube}\n");
  const std::string k8s_topo = WriteFile(dir_, "k8s-topo.yaml", "name: k\npolicy: k8s-fit\npreempt: {victims: k8s}\n");
  const std::vector<std::string> base = {"serve", "--data", Out("d"), "--tokens", tokens_};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {{"--config", Out("missing.yaml")}, {"missing.yaml", "cannot open"}},
      {{"--config", two}, {two + ":2: field 'configurations'", "lists a, b: name one"}},
      {{"--config", two, "--configuration", "c"}, {two + ":2: field 'configurations'", "no configuration 'c'"}},
      {{"--config", two, "--configuration", "b"}, {two + ":4: field 'queue'", "'sideways'"}},
      {{"--config", one}, {one + ":2: field 'policy'", "unknown policy 'nearest'"}},
      {{"--config", packed}, {packed + ":1: configuration 'p': pack: not supported by the service"}},
      {{"--configuration", "a"}, {"--configuration: only with --config"}},
      {{"--config", above}, {above + ":4: queue 'team': field 'guarantee'", "above its own 8"}},
      {{"--config", limit}, {limit + ":4: queue 'a': field 'limit'"}},
      {{"--config", cycle}, {cycle + ":", "field 'parent'", "cycle"}},
      {{"--config", negative}, {negative + ":3: field 'queues[0].guarantee.gpus'", "-8 is below 0"}},
      {{"--config", rebalance}, {rebalance + ":5: field 'sharing.rebalance'"}},
      {{"--config", victims}, {victims + ":3: field 'victims'", "unknown victim selection 'kube'"}},
      {{"--config", k8s_topo}, {k8s_topo + ":3: field 'victims'", "needs 'topology: false'"}},
  };
  for (const auto& [extra, words] : cases) {
    const std::vector<std::string> args = with(extra);
    RunResult r;
    {
      TempDir io;
      const std::string out = (io.path() / "o").string(), err = (io.path() / "e").string();
      std::string cmd = ShellQuote(kBinary);
      for (const std::string& a : args) cmd += " " + ShellQuote(a);
      cmd += " >" + ShellQuote(out) + " 2>" + ShellQuote(err) + " </dev/null";
      const int status = std::system(cmd.c_str());
      r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      r.err = ReadFile(err);
    }
    EXPECT_EQ(r.exit_code, 2) << extra[0] << " " << r.err;
    for (const std::string& w : words) EXPECT_NE(r.err.find(w), std::string::npos) << "'" << w << "' not in: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  }
}

TEST_F(ServeCli, OutOfRangeNumbersAreRejectedNamingTheFlag) {
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--grace-s", "-1"}, {"--heartbeat-timeout-s", "0"}, {"--max-body-bytes", "10"}, {"--rate", "0"},
           {"--retain-ended-s", "0"}}) {
    EXPECT_TRUE(RejectedWith(RunEstuary({"serve", "--data", Out("d"), "--tokens", tokens_, flag, value}), {flag})) << flag;
  }
  EXPECT_TRUE(RejectedWith(RunEstuary({"serve", "--data", Out("d"), "--tokens", tokens_, "--tls-cert", Out("c.pem")}),
                           {"--tls-cert", "--tls-key"}));
}

TEST_F(ServeCli, AgentFlagsAreChecked) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"agent", "--server", "ftp://x", "--token", "t", "--fake-nodes", "1"}),
                           {"--server", "ftp://x"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"agent", "--server", "http://127.0.0.1:1", "--token", "t", "--fake-nodes", "0"}),
                           {"--fake-nodes"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"agent", "--server", "http://127.0.0.1:1", "--token", "t", "--fake-nodes", "2",
                                       "--gpus-per-node", "17"}),
                           {"--gpus-per-node"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"agent", "--server", "http://127.0.0.1:1", "--token", "t", "--fake-nodes", "2",
                                       "--cluster", Out("missing.yaml")}),
                           {"missing.yaml"}));
}

}  // namespace
}  // namespace estuary

namespace estuary {
namespace {

// `estuary history export` and `estuary simulate HISTORY` (issue 18, docs/history.md): bad flags,
// a directory without a store, and a bad history file are refused on one line naming them.
TEST_F(Cli, HistoryExportAndReplayRejectBadInputNamingTheFileLineAndField) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"history", "export", "--out", Out("h.jsonl")}), {"--data"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"history", "export", "--data", Out("nothing")}), {"--out"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"history", "export", "--data", Out("nothing"), "--out", Out("h.jsonl")}),
                           {"--data", "nothing", "no estuary.db"}));
  EXPECT_FALSE(fs::exists(Out("nothing"))) << "export created a store";
  EXPECT_TRUE(RejectedWith(RunEstuary({"history"}), {"subcommand"}));
  const std::string bad = WriteFile(dir_, "bad.jsonl",
                                    "{\"estuary_history\":1}\n{\"config\":{}}\n{\"t\":1,\"input\":{\"kind\":\"resize\","
                                    "\"job\":1,\"min_replicas\":\"x\"}}\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", bad}), {bad + ":3: input.min_replicas: expected an integer"}));
  // A history with an engine's inputs and one decision it did not make: replayed, found different.
  const std::string wrong = WriteFile(
      dir_, "wrong.jsonl",
      "{\"estuary_history\":1}\n{\"config\":{}}\n{\"t\":5,\"input\":{\"kind\":\"cycle\"}}\n"
      "{\"t\":5,\"event\":{\"kind\":\"started\",\"job\":1,\"replicas\":1}}\n");
  const RunResult r = RunEstuary({"simulate", wrong, "--out", Out("replay")});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.out, HasSubstr("DIFFERENT"));
  EXPECT_THAT(r.out, HasSubstr("0 events replayed, 1 recorded"));
  const nlohmann::json s = nlohmann::json::parse(ReadFile(Out("replay") + "/summary.json"));
  EXPECT_FALSE(s["identical"].get<bool>());
  // A scenario's flags are refused for a history, not ignored.
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", wrong, "--seeds", "1-3"}), {"--seeds", wrong, "service history"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", wrong, "--configurations", "estuary"}), {"--configurations", wrong}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", wrong, "--table", "jobs_started_count"}), {"--table", wrong}));
  // history scenario: the file's errors, and a history without nodes or jobs.
  EXPECT_TRUE(RejectedWith(RunEstuary({"history", "scenario", bad, "--out", Out("w.yaml")}),
                           {bad + ":3: input.min_replicas: expected an integer"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"history", "scenario", wrong, "--out", Out("w.yaml")}),
                           {wrong + ": the history adds no node"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"history", "scenario", Out("absent.jsonl"), "--out", Out("w.yaml")}),
                           {"absent.jsonl", "cannot open"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"history", "scenario", wrong}), {"--out"}));
}


// --- multi-tenant queues: bad input (issue 20) -------------------------------------------------

// A one-hour scenario on 64 generated H800 GPUs with two queues, `org` and `team` (the entries
// given), and one job in `team`; the queues sit at the scenario's root (org on line 9, team on
// line 10) or in its one configuration's `queues:` (lines 11 and 12).
class CliQueues : public Cli {
 protected:
  static constexpr unsigned kRootOrgLine = 9, kConfigOrgLine = 11;
  std::string Scenario(const std::string& name, const std::string& org, const std::string& team, bool in_configuration) {
    std::string text =
        "name: q\nduration_s: 3600\nseeds: [1]\ncluster:\n  generate: {total_gpus: 64, models: \"H800:1:128:2048\"}\n"
        "jobs:\n  - {name: j, queue: team, gpus: 8}\n";
    if (in_configuration) {
      text += "configurations:\n  - name: c\n    queues:\n      - " + org + "\n      - " + team + "\n";
    } else {
      text += "queues:\n  - " + org + "\n  - " + team + "\nconfigurations:\n  - {name: c}\n";
    }
    return WriteFile(dir_, name, text);
  }
  // A scenario with good queues at the root (org and team, lines 7 and 8), then `jobs` (a `jobs:` or
  // `generator:` section from line 9) and `configurations:` holding `configuration`.
  std::string WithGoodQueues(const std::string& name, const std::string& jobs, const std::string& configuration) {
    return WriteFile(dir_, name,
                     "name: q\nduration_s: 3600\nseeds: [1]\ncluster:\n  generate: {total_gpus: 64, models: \"H800:1:128:2048\"}\n"
                     "queues:\n  - {name: org, guarantee: {gpus: 32}}\n  - {name: team, parent: org, guarantee: {gpus: 16}}\n" +
                         jobs + "configurations:\n" + configuration);
  }
};

TEST_F(CliQueues, EachBadQueueTreeExitsTwoNamingFileLineAndFieldAtTheRootAndInAConfiguration) {
  struct Case {
    std::string name, org, team;
    bool on_team;  // the error is on team's line, else on org's
    std::string field, detail;
  };
  const std::string org = "{name: org, guarantee: {gpus: 32}}";
  const std::vector<Case> cases = {
      {"a child's guarantee above its parent's", "{name: org, guarantee: {gpus: 16}}",
       "{name: team, parent: org, guarantee: {gpus: 24}}", true, "field 'guarantee'",
       "the children of 'org' are guaranteed 24 GPUs, above its own 16"},
      {"a child's per-model guarantee above its parent's", "{name: org, guarantee: {gpus: {H800: 16}}}",
       "{name: team, parent: org, guarantee: {gpus: {H800: 24}}}", true, "field 'guarantee'", "above its own 16"},
      {"a negative guarantee", org, "{name: team, parent: org, guarantee: {gpus: -8}}", true, "guarantee.gpus", "-8"},
      {"a negative per-model guarantee", org, "{name: team, parent: org, guarantee: {gpus: {H800: -8}}}", true,
       "guarantee.gpus.H800", "-8"},
      {"a non-numeric guarantee", org, "{name: team, parent: org, guarantee: {gpus: lots}}", true, "guarantee.gpus",
       "integer"},
      {"a fractional guarantee", org, "{name: team, parent: org, guarantee: {gpus: 2.5}}", true, "guarantee.gpus",
       "integer"},
      {"a negative limit", org, "{name: team, parent: org, limit: {gpus: -1}}", true, "limit.gpus", "-1"},
      {"a non-numeric CPU limit", org, "{name: team, parent: org, limit: {cpu_cores: many}}", true, "limit.cpu_cores",
       "integer"},
      {"a cycle in the tree", "{name: org, parent: team}", "{name: team, parent: org}", false, "field 'parent'", "cycle"},
      {"a parent that is no queue", org, "{name: team, parent: nope}", true, "field 'parent'", "no queue named 'nope'"},
      {"a duplicate queue", org, "{name: org}", true, "field 'name'", "a second queue named 'org'"},
      {"an unknown GPU model", org, "{name: team, parent: org, guarantee: {gpus: {B200: 8}}}", true,
       "guarantee.gpus.B200", "unknown GPU model 'B200' (the cluster has: H800)"},
      {"a limit below the guarantee", org, "{name: team, parent: org, guarantee: {gpus: 16}, limit: {gpus: 8}}", true,
       "field 'limit'", "8 GPUs is below its guarantee of 16"},
      {"a lending limit above the guarantee", org, "{name: team, parent: org, guarantee: {gpus: 16}, lend_limit: {gpus: 24}}",
       true, "field 'lend_limit'", "above its guarantee of 16"},
      {"a weight of zero", org, "{name: team, parent: org, weight: 0}", true, "weight", "0"},
      {"an unknown field", org, "{name: team, parent: org, guarantees: {gpus: 8}}", true, "guarantees", "unknown"},
  };
  for (const Case& c : cases) {
    for (const bool in_configuration : {false, true}) {
      SCOPED_TRACE(c.name + (in_configuration ? " (in a configuration's queues)" : " (in the root's queues)"));
      const std::string sc = Scenario(in_configuration ? "conf.yaml" : "root.yaml", c.org, c.team, in_configuration);
      const unsigned line = (in_configuration ? kConfigOrgLine : kRootOrgLine) + (c.on_team ? 1 : 0);
      EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", sc, "--out", Out("out")}), {AtLine(sc, line), c.field, c.detail}));
    }
  }
}

TEST_F(CliQueues, AFieldOnItsOwnLineIsNamedAtThatLine) {
  // Block style: the bad amount is on line 13; the limit below the guarantee has its key on line 14.
  const std::string head =
      "name: q\nduration_s: 3600\nseeds: [1]\ncluster:\n  generate: {total_gpus: 64, models: \"H800:1:128:2048\"}\n"
      "jobs:\n  - {name: j, queue: team, gpus: 8}\nqueues:\n  - {name: org, guarantee: {gpus: 32}}\n"
      "  - name: team\n    parent: org\n    guarantee:\n      gpus: ";
  const std::string tail = "configurations:\n  - {name: c}\n";
  const std::string negative = WriteFile(dir_, "negative.yaml", head + "-8\n" + tail);
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", negative}), {AtLine(negative, 13), "guarantee.gpus"}));
  const std::string limit = WriteFile(dir_, "limit.yaml", head + "16\n    limit:\n      gpus: 8\n" + tail);
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", limit}), {AtLine(limit, 14), "field 'limit'", "below its guarantee"}));
}

TEST_F(CliQueues, BadSharingExitsTwoNamingFileLineAndField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{cooldown_s: -1}", "sharing.cooldown_s"},      {"{cooldown_s: soon}", "sharing.cooldown_s"},
      {"{reclaim_to: nowhere}", "sharing.reclaim_to"}, {"{borrow: maybe}", "sharing.borrow"},
      {"{usage_half_life_s: -5}", "sharing.usage_half_life_s"}, {"{reborrow_s: 1.5}", "sharing.reborrow_s"},
      {"{lend: true}", "sharing.lend"},                {"[borrow]", "sharing"},
      {"{rebalance: sometimes}", "sharing.rebalance"}, {"{rebalance: 1}", "sharing.rebalance"},
      {"{count_in_flight: yes please}", "sharing.count_in_flight"},
      {"{budget_period_s: 0}", "sharing.budget_period_s"}, {"{budget_period_s: 1m}", "sharing.budget_period_s"},
      {"{within_queue: lower}", "sharing.within_queue"}, {"{within_queue: 1}", "sharing.within_queue"},
  };
  const std::string jobs = "jobs:\n  - {name: j, queue: team, gpus: 8}\n";
  for (const auto& [sharing, field] : cases) {
    SCOPED_TRACE(sharing);
    const std::string sc = WithGoodQueues("sharing.yaml", jobs, "  - {name: a}\n  - name: c\n    sharing: " + sharing + "\n");
    EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", sc}), {AtLine(sc, 14), "'" + field}));
  }
}

TEST_F(CliQueues, AJobOrAGeneratedClassOfAnUnknownOrInnerQueueExitsTwoNamingItsLine) {
  const std::string conf = "  - {name: c}\n";
  const std::string unknown = WithGoodQueues("unknown.yaml", "jobs:\n  - {name: j, queue: nope, gpus: 8}\n", conf);
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", unknown}), {AtLine(unknown, 10), "field 'queue'", "no queue 'nope'"}));
  const std::string inner = WithGoodQueues("inner.yaml", "jobs:\n  - {name: j, queue: org, gpus: 8}\n", conf);
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", inner}), {AtLine(inner, 10), "field 'queue'", "has queues under it"}));
  const std::string none = WithGoodQueues("none.yaml", "jobs:\n  - {name: j, gpus: 8}\n", conf);
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", none}), {AtLine(none, 10), "field 'queue'", "missing"}));
  const std::string generated = WithGoodQueues(
      "generated.yaml", "generator:\n  arrivals_per_hour: 10\n  classes:\n    - {share: 1, queue: team, gpus: 8}\n"
                        "    - {share: 1, queue: nope, gpus: 8}\n", conf);
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", generated}), {AtLine(generated, 13), "field 'queue'", "no queue 'nope'"}));
  const std::string unknown_model = WithGoodQueues("model.yaml", "jobs:\n  - {name: j, queue: team, gpus: 8, models: B200}\n", conf);
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", unknown_model}), {AtLine(unknown_model, 10), "models", "B200"}));
}

TEST_F(CliQueues, BadBurstsOfAGeneratedClassExitTwoNamingFileLineAndField) {
  struct Case {
    std::string bursts, field, detail;
  };
  const std::vector<Case> cases = {
      {"{every_s: -3600, for_s: 600}", "every_s", "-3600"},
      {"{every_s: 0, for_s: 600}", "every_s", "0"},
      {"{every_s: 3600, for_s: 7200}", "for_s", "7200 is above 'every_s' 3600"},
      {"{every_s: 3600, for_s: -1}", "for_s", "-1"},
      {"{every_s: hourly, for_s: 600}", "every_s", "integer"},
      {"{every_s: 3600, for_s: 1e2x}", "for_s", "integer"},
      {"{every_s: 3600, for_s: 600, offset_s: later}", "offset_s", "integer"},
      {"{every_s: 3600, for_s: 600, offset_s: -1}", "offset_s", "-1"},
      {"{for_s: 600}", "every_s", "missing"},
      {"{every_s: 3600}", "for_s", "missing"},
      {"{every_s: 3600, for_s: 600, period_s: 5}", "period_s", "unknown"},
      {"3600", "bursts", "mapping"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.bursts);
    const std::string sc = WithGoodQueues(
        "bursts.yaml", "generator:\n  arrivals_per_hour: 10\n  classes:\n    - {share: 1, queue: team, gpus: 8, bursts: " +
                           c.bursts + "}\n", "  - {name: c}\n");
    EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", sc}), {AtLine(sc, 12), "field '" + c.field + "'", c.detail}));
  }
}

}  // namespace
}  // namespace estuary
