// What a newcomer and a platform team meet before any scheduling: `estuary --version`, every
// command's --help listing its flags with their defaults, `estuary completion bash` (run in bash),
// `simulate --table`, the agent's --token-file, and the systemd units the package installs
// (`systemd-analyze verify`, where the machine has it). Bad input exits 2 with one line naming the
// flag or file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/testing/cli_run.h"
#include "tests/testing/temp_dir.h"

namespace estuary {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFile;
using testing::RejectedWith;
using testing::RunEstuary;
using testing::RunResult;
using testing::ShellQuote;
using testing::TempDir;
using testing::WriteFile;

TEST(Version, PrintsTheVersionAndTheCommitOnOneLineAndExitsZero) {
  const RunResult r = RunEstuary({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(std::regex_match(r.out, std::regex(R"(estuary [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]{7,40}|unknown)\)\n)")))
      << r;
  EXPECT_EQ(r.err, "");
}

// --- --help: every flag with its default ------------------------------------------------------

TEST(Help, EveryCommandsHelpListsItsFlagsWithTheirDefaults) {
  struct Case {
    std::vector<std::string> command;
    std::vector<std::string> lines;  // each a flag with its type and =default (CLI11's layout)
  };
  const std::vector<Case> cases = {
      {{"openb"}, {"--seeds TEXT=42-51", "--tune FLOAT=1.3", "--tie-break TEXT=node-order", "--max-moves INT=2"}},
      {{"replay"}, {"--seeds TEXT=42", "--sample-interval INT=3600", "--arrival-scale FLOAT=1"}},
      {{"cluster", "generate"}, {"--total-gpus", "=155410", "--nodes-per-asw TEXT=32-64", "--seed"}},
      {{"curve"}, {"--utc-offset-h", "=8"}},
      {{"defrag"}, {"--partition-nodes INT=500", "--chain-depth INT=3", "--rounds INT=5", "--objective TEXT=nodes"}},
      {{"serve"}, {"--listen TEXT=127.0.0.1:8080", "--store TEXT=sqlite", "--sync TEXT=full"}},
      {{"agent"}, {"--gpus-per-node INT:INT in [0 - 16]=8", "--gpu-model TEXT=H800", "--prefix TEXT=fake", "--token-file"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.command;
    args.push_back("--help");
    std::string cmd = ShellQuote(ESTUARY_BINARY);
    for (const std::string& a : args) cmd += " " + ShellQuote(a);
    TempDir io;
    const std::string out = (io.path() / "help.txt").string();
    ASSERT_EQ(std::system((cmd + " >" + ShellQuote(out) + " 2>&1").c_str()), 0) << cmd;
    const std::string help = ReadFile(out);
    for (const std::string& line : c.lines) EXPECT_THAT(help, HasSubstr(line)) << cmd << "\n" << help;
  }
}

// --- estuary completion bash ------------------------------------------------------------------

// The words bash offers for the command line `line` (the cursor at its end; a trailing space
// starts a new, empty word) with `script` loaded.
std::string Complete(const TempDir& dir, const std::string& script, const std::string& line) {
  const std::string path = WriteFile(dir, "completion.bash", script);
  const std::string driver = WriteFile(dir, "driver.bash",
                                       "source " + ShellQuote(path) + "\n"
                                       "COMP_LINE=" + ShellQuote(line) + "\n"
                                       "read -r -a COMP_WORDS <<<\"$COMP_LINE\"\n"
                                       "[[ \"$COMP_LINE\" == *' ' ]] && COMP_WORDS+=('')\n"
                                       "COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n"
                                       "_estuary\n"
                                       "if [[ ${#COMPREPLY[@]} -gt 0 ]]; then\n"
                                       "  printf '%s\\n' \"${COMPREPLY[@]}\" | sort | tr '\\n' ' '\n"
                                       "fi\n");
  const std::string out = (dir.path() / "words.txt").string();
  const int rc = std::system(("cd " + ShellQuote(dir.path().string()) + " && bash " + ShellQuote(driver) + " >" +
                              ShellQuote(out) + " 2>&1")
                                 .c_str());
  EXPECT_EQ(rc, 0) << ReadFile(out);
  return ReadFile(out);
}

class Completion : public ::testing::Test {
 protected:
  void SetUp() override {
    const RunResult r = RunEstuary({"completion", "bash"});
    ASSERT_EQ(r.exit_code, 0) << r;
    script_ = r.out;
  }
  TempDir dir_;
  std::string script_;
};

TEST_F(Completion, TheScriptRegistersAFunctionForEstuary) {
  EXPECT_THAT(script_, HasSubstr("complete -o filenames -F _estuary estuary\n"));
}

TEST_F(Completion, AfterTheProgramNameBashOffersTheCommands) {
  EXPECT_EQ(Complete(dir_, script_, "estuary si"), "simulate ");
  EXPECT_EQ(Complete(dir_, script_, "estuary cl"), "cluster ");
  const std::string all = Complete(dir_, script_, "estuary ");
  for (const char* command : {"openb ", "replay ", "simulate ", "serve ", "agent ", "completion ", "history "}) {
    EXPECT_THAT(all, HasSubstr(command));
  }
  EXPECT_EQ(Complete(dir_, script_, "estuary --ver"), "--version ");
}

TEST_F(Completion, AfterACommandBashOffersItsFlagsAndSubcommands) {
  EXPECT_EQ(Complete(dir_, script_, "estuary simulate --th"), "--threads ");
  EXPECT_EQ(Complete(dir_, script_, "estuary simulate --ta"), "--table ");
  EXPECT_EQ(Complete(dir_, script_, "estuary cluster "), "--help --help-all -h check generate ");
  EXPECT_EQ(Complete(dir_, script_, "estuary cluster generate --total"), "--total-gpus ");
  // A flag of another command is not offered.
  EXPECT_EQ(Complete(dir_, script_, "estuary replay --tun"), "");
  EXPECT_EQ(Complete(dir_, script_, "estuary openb --tun"), "--tune ");
}

TEST_F(Completion, AfterAFlagThatTakesAValueAndForPositionalsBashOffersFiles) {
  WriteFile(dir_, "scenario-a.yaml", "name: a\n");
  EXPECT_EQ(Complete(dir_, script_, "estuary simulate --out scen"), "scenario-a.yaml ");
  EXPECT_EQ(Complete(dir_, script_, "estuary simulate scen"), "scenario-a.yaml ");
  // A flag without a value is followed by the command's words again.
  EXPECT_THAT(Complete(dir_, script_, "estuary simulate --events --"), HasSubstr("--threads "));
}

TEST(CompletionCli, AnUnknownShellIsRejectedNamingIt) {
  EXPECT_TRUE(RejectedWith(RunEstuary({"completion", "zsh"}), {"shell", "zsh"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"completion"}), {"shell"}));
}

// --- simulate --table -------------------------------------------------------------------------

TEST(SimulateTable, PrintsOneRowPerMetricAndOneColumnPerConfigurationOfSeedMeans) {
  TempDir dir;
  const std::string sc = (fs::path(ESTUARY_SOURCE_DIR) / "examples" / "topology-small.yaml").string();
  const std::string out = (dir.path() / "out").string();
  const RunResult r = RunEstuary({"simulate", sc, "--out", out, "--table", "gpu_alloc_pct_mean,jobs_started_count"});
  ASSERT_EQ(r.exit_code, 0) << r;
  std::istringstream lines(r.out);
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(line);
  ASSERT_GE(rows.size(), 6u) << r;
  EXPECT_TRUE(std::regex_match(rows[1], std::regex(R"(metric +estuary +unaware)"))) << r;
  // The cells are summary.json's means (two decimals; whole numbers and values of 1000 or more
  // without).
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  const std::vector<std::string> metrics = {"gpu_alloc_pct_mean", "jobs_started_count"};
  for (size_t i = 0; i < metrics.size(); ++i) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(rows[2 + i], m, std::regex(metrics[i] + R"( +([0-9.]+) +([0-9.]+))"))) << r;
    EXPECT_NEAR(std::stod(m[1]), summary["configurations"]["estuary"][metrics[i]].get<double>(), 0.0051) << rows[2 + i];
    EXPECT_NEAR(std::stod(m[2]), summary["configurations"]["unaware"][metrics[i]].get<double>(), 0.0051) << rows[2 + i];
  }
  EXPECT_THAT(r.out, Not(HasSubstr("(seed 1):")));  // the table replaces the per-seed lines
  EXPECT_THAT(r.out, HasSubstr("report:  " + out + "/report.html"));
}

TEST(SimulateTable, AMetricNoConfigurationHasIsRejectedNamingTheFlagAndTheMetric) {
  const std::string sc = (fs::path(ESTUARY_SOURCE_DIR) / "examples" / "topology-small.yaml").string();
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", sc, "--table", "gpu_alloc_pct_mean,no_such_metric"}),
                           {"--table", "no_such_metric"}));
}

TEST(SimulateTable, AMisspelledMetricDoesNotLoseTheRunItsOutputsAreWrittenAndTheErrorSaysWhere) {
  TempDir dir;
  const std::string sc = (fs::path(ESTUARY_SOURCE_DIR) / "examples" / "topology-small.yaml").string();
  const std::string out = (dir.path() / "out").string();
  const RunResult r = RunEstuary({"simulate", sc, "--out", out, "--table", "gpu_alloc_pct_maen"});
  EXPECT_TRUE(RejectedWith(r, {"--table", "gpu_alloc_pct_maen", out})) << r;
  // The run's figures are there: every configuration of the scenario with its metrics.
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  EXPECT_TRUE(summary["configurations"]["estuary"].contains("gpu_alloc_pct_mean")) << summary.dump();
  EXPECT_TRUE(summary["configurations"]["unaware"].contains("gpu_alloc_pct_mean")) << summary.dump();
  EXPECT_TRUE(fs::exists(out + "/report.html"));
}

// --- simulate --seeds and --configurations ----------------------------------------------------

TEST(SimulateSelection, RunsOnlyTheNamedConfigurationsOnTheGivenSeedsWithTheSameFiguresAsTheWholeRun) {
  TempDir dir;
  const std::string sc = (fs::path(ESTUARY_SOURCE_DIR) / "examples" / "topology-small.yaml").string();  // seeds 1, 2
  const std::string whole = (dir.path() / "whole").string(), part = (dir.path() / "part").string();
  ASSERT_EQ(RunEstuary({"simulate", sc, "--out", whole}).exit_code, 0);
  const RunResult r = RunEstuary({"simulate", sc, "--out", part, "--seeds", "2,3", "--configurations", "unaware"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(r.out, HasSubstr("1 configurations, 2 seeds")) << r;
  const nlohmann::json a = nlohmann::json::parse(ReadFile(whole + "/summary.json"));
  const nlohmann::json b = nlohmann::json::parse(ReadFile(part + "/summary.json"));
  EXPECT_EQ(b["seeds"], nlohmann::json::parse("[2, 3]"));
  ASSERT_EQ(b["configurations"].size(), 1u);
  ASSERT_TRUE(b["configurations"].contains("unaware"));
  // Seed 2 of `unaware` is the same run as in the whole scenario; seed 3 is a new one.
  // (Every metric but the planner's measured wall time.)
  const nlohmann::json& seed2 = a["per_seed"]["unaware"]["2"];
  ASSERT_GT(seed2.size(), 10u);
  for (const auto& [metric, value] : seed2.items()) {
    if (metric.find("_seconds_") != std::string::npos) continue;
    EXPECT_EQ(b["per_seed"]["unaware"]["2"][metric], value) << metric;
  }
  EXPECT_TRUE(b["per_seed"]["unaware"].contains("3"));
  EXPECT_FALSE(a["per_seed"]["unaware"].contains("3"));
  // The configurations run in the flag's order.
  const RunResult both = RunEstuary({"simulate", sc, "--seeds", "1", "--configurations", "unaware,estuary",
                                     "--table", "jobs_started_count"});
  ASSERT_EQ(both.exit_code, 0) << both;
  EXPECT_TRUE(std::regex_search(both.out, std::regex(R"(metric +unaware +estuary)"))) << both;
}

TEST(SimulateSelection, BadSeedsAndUnknownOrRepeatedConfigurationsAreRejectedNamingTheFlag) {
  const std::string sc = (fs::path(ESTUARY_SOURCE_DIR) / "examples" / "topology-small.yaml").string();
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", sc, "--seeds", "5-2"}), {"--seeds", "5-2", "below its start"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", sc, "--seeds", "1,x"}), {"--seeds", "'x'"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", sc, "--configurations", "estuary,nosuch"}),
                           {"--configurations", "nosuch", "estuary, unaware"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"simulate", sc, "--configurations", "estuary,estuary"}),
                           {"--configurations", "'estuary' is named twice"}));
}

// An empty value is bad input naming the flag, for every command (before: `--seeds ''` ran the
// scenario's own seeds and `--out ''` wrote nothing, silently) — and nothing runs.
TEST(EmptyValues, AnEmptyValueForAnyFlagOrArgumentIsRejectedNamingItBeforeAnythingRuns) {
  TempDir dir;
  const std::string sc = (fs::path(ESTUARY_SOURCE_DIR) / "examples" / "topology-small.yaml").string();
  const std::string out = (dir.path() / "out").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"simulate", sc, "--seeds", "", "--out", out}, "--seeds"},
      {{"simulate", sc, "--out", ""}, "--out"},
      {{"simulate", sc, "--configurations", "", "--out", out}, "--configurations"},
      {{"simulate", sc, "--table", "", "--out", out}, "--table"},
      {{"simulate", "", "--out", out}, "scenario"},
      {{"cluster", "generate", "--out", ""}, "--out"},
      {{"serve", "--listen", "", "--data", out, "--tokens", out}, "--listen"},
      {{"jobs", "--server", ""}, "--server"},
  };
  for (const auto& [args, flag] : cases) {
    const RunResult r = RunEstuary(args);
    EXPECT_TRUE(RejectedWith(r, {flag, "an empty value"})) << flag << ": " << r;
    EXPECT_FALSE(fs::exists(out)) << flag << ": something ran";
  }
  // A value that is not empty still passes the check (the scenario runs and writes its summary).
  EXPECT_EQ(RunEstuary({"simulate", sc, "--seeds", "1", "--configurations", "estuary", "--out", out}).exit_code, 0);
  EXPECT_TRUE(fs::exists(fs::path(out) / "summary.json"));
}

// --- agent --token-file -----------------------------------------------------------------------

TEST(AgentTokenFile, BadTokenFilesAreRejectedNamingTheFile) {
  TempDir dir;
  const std::string missing = (dir.path() / "missing").string();
  const std::string empty = WriteFile(dir, "empty", "\n");
  const std::string two = WriteFile(dir, "two", "token-a\ntoken-b\n");
  const std::string spaced = WriteFile(dir, "spaced", "token a\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"agent", "--server", "http://127.0.0.1:1", "--fake-nodes", "1", "--token-file",
                                       missing}),
                           {"--token-file", missing, "cannot open"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"agent", "--server", "http://127.0.0.1:1", "--fake-nodes", "1", "--token-file",
                                       empty}),
                           {empty + ":1:", "empty"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"agent", "--server", "http://127.0.0.1:1", "--fake-nodes", "1", "--token-file",
                                       two}),
                           {two + ":2:", "one line"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"agent", "--server", "http://127.0.0.1:1", "--fake-nodes", "1", "--token-file",
                                       spaced}),
                           {spaced + ":1:", "white space"}));
}

TEST(AgentTokenFile, TheTokenComesFromTheFlagOrTheFileNeverBothNorNeither) {
  TempDir dir;
  const std::string file = WriteFile(dir, "token", "agent-token-0123456789\n");
  EXPECT_TRUE(RejectedWith(RunEstuary({"agent", "--server", "http://127.0.0.1:1", "--fake-nodes", "1", "--token", "t",
                                       "--token-file", file}),
                           {"--token", "--token-file"}));
  EXPECT_TRUE(RejectedWith(RunEstuary({"agent", "--server", "http://127.0.0.1:1", "--fake-nodes", "1"}),
                           {"--token", "--token-file"}));
}

// --- the systemd units ------------------------------------------------------------------------

// The unit files the build generated (build/packaging), their ExecStart pointed at the built
// binary (verify checks that the program exists; the installed one may not be there).
class SystemdUnits : public ::testing::TestWithParam<const char*> {};

TEST_P(SystemdUnits, SystemdAnalyzeVerifyAcceptsTheUnit) {
  if (system("command -v systemd-analyze >/dev/null 2>&1") != 0) GTEST_SKIP() << "systemd-analyze not found";
  const fs::path unit = fs::path(ESTUARY_BUILD_DIR) / "packaging" / GetParam();
  ASSERT_TRUE(fs::exists(unit)) << unit;
  std::string text = ReadFile(unit.string());
  // The installed binary's path: ExecStart's program, an absolute path ending in /estuary.
  std::smatch exec;
  ASSERT_TRUE(std::regex_search(text, exec, std::regex(R"(\nExecStart=(/[^ \n]*/estuary) )"))) << text;
  const std::string installed = exec[1];
  for (size_t at = text.find(installed); at != std::string::npos; at = text.find(installed, at)) {
    text.replace(at, installed.size(), ESTUARY_BINARY);
    at += std::string(ESTUARY_BINARY).size();
  }
  TempDir dir;
  const std::string copy = WriteFile(dir, GetParam(), text);
  const std::string log = (dir.path() / "verify.txt").string();
  const int rc = std::system(("systemd-analyze verify " + ShellQuote(copy) + " >" + ShellQuote(log) + " 2>&1").c_str());
  const std::string output = ReadFile(log);
  EXPECT_EQ(rc, 0) << output;
  // verify exits 0 on some warnings: none may name our unit.
  EXPECT_THAT(output, Not(HasSubstr(GetParam()))) << output;
}

INSTANTIATE_TEST_SUITE_P(Packaging, SystemdUnits, ::testing::Values("estuary-serve.service", "estuary-agent.service"));

}  // namespace
}  // namespace estuary
