// The scenario's network model: a multi-node job whose nodes span more than one ASW runs longer
// (its collectives cross the slower links between ASWs); one inside an ASW does not. Also the
// bad input of the `network:` and `reserve:` sections.
#include <gtest/gtest.h>

#include <filesystem>

#include "sim/scenario.h"
#include "sim/simulate.h"
#include "tests/testing/sim_run.h"

namespace estuary {
namespace {

using testing::RunScenarioText;
using testing::StartOf;

const std::string kCluster = std::string(ESTUARY_SOURCE_DIR) + "/examples/clusters/two-asw.yaml";

// On the two-ASW example (4 + 4 eight-GPU H800 nodes): `first` (`replicas` x 8 GPUs, 1000 s)
// starts at 0; at 1 s a probe that needs all eight H800 nodes arrives and waits for it to end.
// Both are 8-127 GPU jobs, so the mean delay of that bucket is (0 + probe's wait) / 2.
StatusOr<SimulateResult> RunTwoJobs(const std::string& first, const std::string& network) {
  return RunScenarioText("name: t\nduration_s: 5000\ncluster:\n  spec: " + kCluster + "\n" + network +
                         "jobs:\n  - " + first + "\n  - {name: probe, submit_s: 1, duration_s: 10, replicas: 8, gpus: 8}\n"
                         "configurations:\n  - {name: a}\n");
}

const std::string kNetwork = "network: {plane: data, level: asw, cross_domain_slowdown_pct: 27, comm_share_pct: 40}\n";
const std::string kSpanning = "{name: wide, duration_s: 1000, replicas: 6, gpus: 8}";  // 6 nodes > 4 per ASW
const std::string kInside = "{name: narrow, duration_s: 1000, replicas: 4, gpus: 8, plane: data, required_level: asw}";

TEST(NetworkModel, AJobSpanningTwoAswsRunsLongerByCommShareTimesSlowdown) {
  // 1000 s x (1 + 0.40 x 0.27) = 1108 s: the probe starts at 1108, having waited 1107 s.
  auto r = RunTwoJobs(kSpanning, kNetwork);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->metrics.at("network_slowed_runs_count"), 2);  // the probe spans both ASWs too
  EXPECT_DOUBLE_EQ(r->metrics.at("sched_delay_mean_gpus_8to127_s"), (0 + 1107) / 2.0);
}

TEST(NetworkModel, AJobInsideOneAswRunsItsOwnDuration) {
  auto r = RunTwoJobs(kInside, kNetwork);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->metrics.at("network_slowed_runs_count"), 1);  // the probe only
  EXPECT_DOUBLE_EQ(r->metrics.at("sched_delay_mean_gpus_8to127_s"), (0 + 999) / 2.0);
}

TEST(NetworkModel, WithoutTheModelPlacementDoesNotChangeRunTime) {
  auto r = RunTwoJobs(kSpanning, "");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->metrics.count("network_slowed_runs_count"), 0u);
  EXPECT_DOUBLE_EQ(r->metrics.at("sched_delay_mean_gpus_8to127_s"), (0 + 999) / 2.0);
}

TEST(NetworkModel, RoundsTheLongerRunUpToAWholeSecond) {
  // 1001 s x 1.108 = 1109.108 -> 1110 s; the probe waits 1109 s.
  auto r = RunTwoJobs("{name: wide, duration_s: 1001, replicas: 6, gpus: 8}", kNetwork);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->metrics.at("sched_delay_mean_gpus_8to127_s"), (0 + 1109) / 2.0);
}

TEST(NetworkModel, AnUnknownPlaneOrLevelIsNamedWhenTheScenarioMeetsItsCluster) {
  auto plane = RunTwoJobs(kSpanning, "network: {plane: wan}\n");
  ASSERT_FALSE(plane.ok());
  EXPECT_EQ(plane.status().ExitCode(), 2);
  EXPECT_EQ(plane.status().message(), "s.yaml:5: network: plane: the cluster has no plane 'wan'");
  auto level = RunTwoJobs(kSpanning, "network: {plane: param, level: asw}\n");
  ASSERT_FALSE(level.ok());
  EXPECT_EQ(level.status().message(), "s.yaml:5: network: level: plane 'param' has no level 'asw'");
}

TEST(DomainPacking, AnUnknownPlaneOrLevelIsNamedWithItsConfiguration) {
  for (const auto& [pack, message] :
       {std::pair{"{plane: wan, level: asw}", "s.yaml:7: configuration 'a': pack: plane: the cluster has no plane 'wan'"},
        std::pair{"{plane: data, level: rack}", "s.yaml:7: configuration 'a': pack: level: plane 'data' has no level 'rack'"}}) {
    auto sc = ParseScenario("name: t\ncluster:\n  spec: " + kCluster + "\njobs:\n  - {name: j, gpus: 8}\nconfigurations:\n" +
                                "  - {name: a, pack: " + pack + "}\n",
                            "s.yaml");
    ASSERT_TRUE(sc.ok()) << sc.status().message();
    auto cluster = LoadScenarioCluster(*sc);
    ASSERT_TRUE(cluster.ok());
    auto r = RunScenario(*sc, *cluster, sc->configurations[0], 1);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().ExitCode(), 2);
    EXPECT_EQ(r.status().message(), message);
  }
}

// Head-of-line holds in a run: on the two-ASW example (two ASWs of four 8-GPU nodes), `a` (3 nodes,
// until 1000 s) and `b` (3 nodes, until 5000 s) each leave one node free in their ASW; `gang`
// needs a whole ASW (4 nodes) from 10 s; two whole-node fillers arrive at 500 s for 10,000 s.
StatusOr<SimulateResult> RunHoldScenario(const std::string& reserve) {
  return RunScenarioText("name: t\nduration_s: 20000\ncluster:\n  spec: " + kCluster +
                         "\njobs:\n"
                         "  - {name: a, duration_s: 1000, replicas: 3, gpus: 8, plane: data, required_level: asw}\n"
                         "  - {name: b, duration_s: 5000, replicas: 3, gpus: 8, plane: data, required_level: asw}\n"
                         "  - {name: gang, submit_s: 10, duration_s: 100, replicas: 4, gpus: 8, plane: data, "
                         "required_level: asw}\n"
                         "  - {name: f1, submit_s: 500, duration_s: 10000, gpus: 8}\n"
                         "  - {name: f2, submit_s: 500, duration_s: 10000, gpus: 8}\n"
                         "configurations:\n  - {name: a" + reserve + "}\n");
}

TEST(Reserve, WithoutAHoldTheFillersTakeTheFreeNodesAndTheGangWaitsForThem) {
  auto r = RunHoldScenario("");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "f1"), 500);
  EXPECT_EQ(StartOf(*r, "f2"), 500);
  // a's ASW has the filler on its fourth node until 10,500 s; so has b's.
  EXPECT_EQ(StartOf(*r, "gang"), 10500);
}

TEST(Reserve, AHoldDrainsAnAswForTheWaitingGang) {
  auto r = RunHoldScenario(", reserve: {after_s: 100, max_jobs: 1, min_gpus: 32, replan_s: 100}");
  ASSERT_TRUE(r.ok()) << r.status().message();
  // From the tick at 200 s (it has waited 190 s) the gang holds the four nodes of the first ASW (a's three and the free one: the two
  // ASWs cost the same, 3 busy nodes each, and the first wins); one filler takes the free node of
  // b's ASW, the other waits. When a ends at 1000 s the gang starts on its held ASW; the second
  // filler starts when the gang ends at 1100 s and its ASW is no longer held.
  EXPECT_EQ(StartOf(*r, "gang"), 1000);
  EXPECT_EQ(std::min(StartOf(*r, "f1"), StartOf(*r, "f2")), 500);
  EXPECT_EQ(std::max(StartOf(*r, "f1"), StartOf(*r, "f2")), 1100);
  EXPECT_GE(r->metrics.at("reservations_made_count"), 1);
}

// drain_after_s: on the two-ASW example, `a` (3 replicas of 5 GPUs, one per node, until 1000 s)
// and `b` (3 of 6 GPUs, until 5000 s) leave one node of each ASW empty; `gang` needs a whole ASW
// (4 nodes) from 10 s; a 3-GPU `filler` arrives at 500 s for 10,000 s and fits best on a's nodes
// (3 GPUs free each; b's have 2).
StatusOr<SimulateResult> RunDrainScenario(int64_t drain_after_s) {
  return RunScenarioText("name: t\nduration_s: 20000\ncluster:\n  spec: " + kCluster +
                         "\njobs:\n"
                         "  - {name: a, duration_s: 1000, replicas: 3, gpus: 5, plane: data, required_level: asw}\n"
                         "  - {name: b, duration_s: 5000, replicas: 3, gpus: 6, plane: data, required_level: asw}\n"
                         "  - {name: gang, submit_s: 10, duration_s: 100, replicas: 4, gpus: 8, plane: data, "
                         "required_level: asw}\n"
                         "  - {name: filler, submit_s: 500, duration_s: 10000, gpus: 3}\n"
                         "configurations:\n  - {name: a, reserve: {after_s: 100, max_jobs: 1, min_gpus: 32, "
                         "replan_s: 100, drain_after_s: " + std::to_string(drain_after_s) + "}}\n");
}

TEST(Reserve, BeforeDrainAfterSAHoldTakesOnlyEmptyNodesAndFromThenOnDrainsBusyOnes) {
  // drain_after_s 300: from the tick at 200 s the gang holds only a's empty fourth node (the ASWs
  // tie on empty room: the first); from 400 s (waited 390 s) it drains a's whole ASW (15 GPUs in
  // use against b's 18), so the filler avoids it and takes b's empty node at 500 s, and the gang
  // starts on a's ASW when a ends at 1000 s.
  auto early = RunDrainScenario(300);
  ASSERT_TRUE(early.ok()) << early.status().message();
  EXPECT_EQ(StartOf(*early, "filler"), 500);
  EXPECT_EQ(StartOf(*early, "gang"), 1000);
  // drain_after_s 2000: at 500 s only the empty node is held, so the filler takes one of a's
  // nodes (the best fit); when a ends a's ASW still runs the filler. The hold drains a's ASW from
  // 2100 s (its filler runs until 10,500 s), and the gang starts when b ends and frees the other
  // ASW at 5000 s.
  auto late = RunDrainScenario(2000);
  ASSERT_TRUE(late.ok()) << late.status().message();
  EXPECT_EQ(StartOf(*late, "filler"), 500);
  EXPECT_EQ(StartOf(*late, "gang"), 5000);
}

struct Bad {
  const char* name;
  std::string text;
  const char* message;
};

class NetworkAndReserveBadInput : public ::testing::TestWithParam<Bad> {};

TEST_P(NetworkAndReserveBadInput, IsRejectedNamingTheLineAndField) {
  auto s = ParseScenario("name: t\ncluster:\n  spec: c.yaml\njobs:\n  - {name: j, gpus: 8}\n" + GetParam().text, "s.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().ExitCode(), 2);
  EXPECT_EQ(s.status().message().find('\n'), std::string::npos);
  EXPECT_EQ(s.status().message().rfind(GetParam().message, 0), 0u) << s.status().message();
}

const std::string kConf = "configurations:\n  - {name: a}\n";

INSTANTIATE_TEST_SUITE_P(
    Scenarios, NetworkAndReserveBadInput,
    ::testing::Values(
        Bad{"CommShareAbove100", "network: {comm_share_pct: 150}\n" + kConf,
            "s.yaml:6: field 'comm_share_pct': 150 is outside [0, 100]"},
        Bad{"NegativeSlowdown", "network: {cross_domain_slowdown_pct: -5}\n" + kConf,
            "s.yaml:6: field 'cross_domain_slowdown_pct': -5 is outside [0, 1000]"},
        Bad{"NetworkNotAMapping", "network: fast\n" + kConf, "s.yaml:6: field 'network': expected a mapping"},
        Bad{"UnknownNetworkField", "network: {latency: 5}\n" + kConf, "s.yaml:6: field 'latency': unknown field"},
        Bad{"EmptyLevel", "network: {level: ''}\n" + kConf, "s.yaml:6: field 'level': expected a non-empty string"},
        Bad{"ReserveNotAMapping", "configurations:\n  - {name: a, reserve: yes}\n",
            "s.yaml:7: field 'reserve': expected a mapping"},
        Bad{"ReserveZeroJobs", "configurations:\n  - {name: a, reserve: {max_jobs: 0}}\n",
            "s.yaml:7: field 'max_jobs': 0 is outside [1, 1000000]"},
        Bad{"ReserveNegativeWait", "configurations:\n  - {name: a, reserve: {after_s: -1}}\n",
            "s.yaml:7: field 'after_s': -1 is outside [0, "},
        Bad{"ReserveMaxBelowMin", "configurations:\n  - {name: a, reserve: {min_gpus: 256, max_gpus: 128}}\n",
            "s.yaml:7: field 'max_gpus': 128 is outside [256, "},
        Bad{"ReserveZeroReplan", "configurations:\n  - {name: a, reserve: {replan_s: 0}}\n",
            "s.yaml:7: field 'replan_s': 0 is outside [1, "},
        Bad{"ReserveNegativeDrain", "configurations:\n  - {name: a, reserve: {drain_after_s: -5}}\n",
            "s.yaml:7: field 'drain_after_s': -5 is outside [0, "},
        Bad{"ReserveUnknownField", "configurations:\n  - {name: a, reserve: {for: ever}}\n",
            "s.yaml:7: field 'for': unknown field"},
        Bad{"PackNotAMapping", "configurations:\n  - {name: a, pack: asw}\n", "s.yaml:7: field 'pack': expected a mapping"},
        Bad{"PackWithoutLevel", "configurations:\n  - {name: a, pack: {plane: data}}\n", "s.yaml:7: field 'level': missing"},
        Bad{"PackUnknownField", "configurations:\n  - {name: a, pack: {plane: data, level: asw, by: gpu}}\n",
            "s.yaml:7: field 'by': unknown field"},
        Bad{"ConfigurationNotAMapping", "configurations:\n  - fast\n", "s.yaml:7: field 'configurations': expected a mapping"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace estuary
