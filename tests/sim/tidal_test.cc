// Tidal scheduling in `estuary simulate` (issue 4): Absorb grows elastic jobs when capacity is
// released and Reclaim shrinks them again; SpotGPU Standby lends a service's GPUs to spot jobs and
// takes them back; tidal services follow a demand curve. Every run checks ClusterState invariants
// after every event time and records the job events the assertions read.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sim/scenario.h"
#include "sim/simulate.h"
#include "tests/testing/bad_input.h"
#include "tests/testing/temp_dir.h"

namespace estuary {
namespace {

StatusOr<SimulateResult> RunTidal(const std::string& yaml, const std::string& path = "s.yaml") {
  auto sc = ParseScenario(yaml, path);
  if (!sc.ok()) return sc.status();
  auto cluster = LoadScenarioCluster(*sc);
  if (!cluster.ok()) return cluster.status();
  return RunScenario(*sc, *cluster, sc->configurations[0], 1, /*check_invariants=*/true, /*record_events=*/true);
}

// The events of job `name`, as "TIME KIND REPLICAS[ DETAIL]".
std::vector<std::string> EventsOf(const SimulateResult& r, const std::string& name) {
  std::vector<std::string> out;
  for (const SimJobEvent& e : r.job_events) {
    if (e.job != name) continue;
    out.push_back(std::to_string(e.time) + " " + e.kind + " " + std::to_string(e.replicas) +
                  (e.detail.empty() ? "" : " " + e.detail));
  }
  return out;
}

// Four 8-GPU nodes in one ASW; requests use one core and 1 GiB so that only GPUs count.
constexpr char kFourNodes[] =
    "cluster:\n  generate: {total_gpus: 32, gpus_per_node: 8, nodes_per_asw_min: 4, nodes_per_asw_max: 4, seed: 1}\n";

// By day (0-3600 s) a dev job holds three whole nodes; an LP consumer job (8 to 32 one-GPU
// replicas in steps of 8, 7200 s of work at 32 replicas) starts at 10 s on the fourth. At
// `hp_at` s an HP gang of `hp_nodes` whole nodes arrives for 1000 s.
std::string ElasticDay(const std::string& conf, const std::string& extra_conf = "", int hp_nodes = 2, int hp_at = 5000) {
  return std::string("name: t\nduration_s: 20000\n") + kFourNodes +
         "jobs:\n"
         "  - {name: day, class: dev, replicas: 3, gpus: 8, cpu_cores: 1, memory_gib: 1, duration_s: 3600}\n"
         "  - {name: lp, class: lp, submit_s: 10, replicas: {min: 8, max: 32, step: 8}, scaling: linear, gpus: 1,\n"
         "     cpu_cores: 1, memory_gib: 1, duration_s: 7200}\n"
         "  - {name: hp, class: hp-training, submit_s: " + std::to_string(hp_at) + ", replicas: " + std::to_string(hp_nodes) +
         ", gpus: 8, cpu_cores: 1, memory_gib: 1,\n"
         "     duration_s: 1000}\n"
         "configurations:\n  - {name: c" +
         conf + extra_conf + "}\n";
}

TEST(Absorb, AnElasticJobGrowsToMaxAtNightInWholeStepsAndShrinksOnReclaim) {
  auto r = RunTidal(ElasticDay(", queue: priority, preempt: {grace_s: 60}, absorb: true"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Work 7200 s x 32 = 230,400 replica-seconds: 8 replicas 10-3600 s (28,720), 32 until the
  // eviction at 5060 s (46,720), 16 while the HP gang runs 5060-6060 s (16,000), then 32 again:
  // the remaining 138,960 take 4,342.5 s, so it ends at 10,402.5 s, rounded up.
  EXPECT_EQ(EventsOf(*r, "lp"), (std::vector<std::string>{"10 start 8", "3600 grow 32", "5060 shrink 16 reclaim",
                                                           "6060 grow 32", "10403 finish 0"}));
  EXPECT_EQ(EventsOf(*r, "hp"), (std::vector<std::string>{"5060 start 2", "6060 finish 0"}));
  EXPECT_EQ(r->metrics.at("evictions_count"), 1);  // the shrink; nothing evicted whole
  EXPECT_EQ(r->metrics.at("preemption_lost_gpu_hours"), 0);
  EXPECT_EQ(r->metrics.at("absorbed_replicas_count"), 24 + 16);
  EXPECT_EQ(r->metrics.at("hp_sched_delay_p99_s"), 60);
}

TEST(Absorb, WithoutAbsorbTheJobKeepsTheSizeItStartedWith) {
  auto r = RunTidal(ElasticDay(", queue: priority"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  // 8 replicas from 10 s: 230,400 / 8 = 28,800 s of work, past the end of the run; the HP gang
  // finds the day job's nodes free when it arrives.
  EXPECT_EQ(EventsOf(*r, "lp"), (std::vector<std::string>{"10 start 8"}));
  EXPECT_EQ(EventsOf(*r, "hp"), (std::vector<std::string>{"5000 start 2", "6000 finish 0"}));
  EXPECT_EQ(r->metrics.count("absorbed_replicas_count"), 0u);
}

TEST(Absorb, ExtraSchedulingCyclesChangeNothing) {
  // Reservation ticks every 50 s (no job is ever old enough to be held) add cycles: Absorb and
  // Reclaim must not act again once the state matches.
  auto base = RunTidal(ElasticDay(", queue: priority, preempt: {grace_s: 60}, absorb: true"));
  auto ticked = RunTidal(ElasticDay(", queue: priority, preempt: {grace_s: 60}, absorb: true",
                               ", reserve: {after_s: 1000000, replan_s: 50}"));
  ASSERT_TRUE(base.ok() && ticked.ok());
  for (const char* job : {"lp", "hp", "day"}) EXPECT_EQ(EventsOf(*base, job), EventsOf(*ticked, job)) << job;
  EXPECT_EQ(base->metrics.at("evictions_count"), ticked->metrics.at("evictions_count"));
}

TEST(Absorb, AWaitingHigherPriorityGangKeepsTheCapacityFromAbsorb) {
  // An HP gang of all four nodes arrives at 3000 s; when the day job ends at 3600 s it still
  // cannot start (the LP job holds the fourth node) and, without Reclaim, waits. Absorb must not
  // hand the three free nodes to the LP job meanwhile: they stay free for the gang.
  auto r = RunTidal(ElasticDay(", queue: priority, absorb: true", "", 4, 3000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(EventsOf(*r, "lp"), (std::vector<std::string>{"10 start 8"}));
  EXPECT_EQ(EventsOf(*r, "hp"), std::vector<std::string>{});
  EXPECT_EQ(r->metrics.at("absorbed_replicas_count"), 0);
}

TEST(Absorb, WithoutReclaimAGangArrivingAfterAbsorbWaitsForTheElasticJobToEnd) {
  // The gang of two nodes comes at 5000 s, after the LP job absorbed the whole cluster at 3600 s:
  // 8 replicas 10-3600 s (28,720 of 230,400), then 32: 201,680 / 32 = 6,302.5 s, to 9,902.5 s.
  auto r = RunTidal(ElasticDay(", queue: priority, absorb: true"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(EventsOf(*r, "lp"), (std::vector<std::string>{"10 start 8", "3600 grow 32", "9903 finish 0"}));
  EXPECT_EQ(EventsOf(*r, "hp"), (std::vector<std::string>{"9903 start 2", "10903 finish 0"}));
}

// A service of four 4-GPU, 4-core replicas on two nodes and a dev job on the other two; from
// 1000 s to 5000 s two service replicas are in Standby (lending 8 GPUs and 8 cores); eight
// one-GPU, one-core spot jobs arrive at 1000 s.
std::string StandbyCycle(const std::string& conf) {
  std::string spots;
  for (int i = 0; i < 8; ++i) {
    spots += "  - {name: spot" + std::to_string(i) +
             ", class: spot, submit_s: 1000, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 100000}\n";
  }
  return std::string("name: t\nduration_s: 8000\nsample_interval_s: 100\n") + kFourNodes +
         "jobs:\n"
         "  - {name: svc, class: hp-inference, replicas: 4, gpus: 4, cpu_cores: 4, memory_gib: 1, duration_s: 100000,\n"
         "     standby: [{from_s: 1000, to_s: 5000, replicas: 2}]}\n"
         "  - {name: dev, class: dev, replicas: 2, gpus: 8, cpu_cores: 1, memory_gib: 1, duration_s: 100000}\n" +
         spots + "configurations:\n  - {name: c" + conf + "}\n";
}

TEST(Standby, AServiceLendsItsGpusToSpotJobsAndGetsTheSameGpusBackWithinTheGracePeriod) {
  auto r = RunTidal(StandbyCycle(", queue: priority, standby: {grace_s: 60}"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::vector<std::string> svc = EventsOf(*r, "svc");
  ASSERT_EQ(svc.size(), 5u);
  EXPECT_EQ(svc[0], "0 start 4");
  // The two newest replicas enter Standby at 1000 s; their restore starts 60 s before the window
  // ends (4940 s) and completes at 5000 s, on the GPUs each kept.
  auto detail = [](const std::string& e) { return e.substr(e.rfind(' ') + 1); };
  EXPECT_EQ(svc[1].substr(0, 15), "1000 standby 1 ");
  EXPECT_EQ(svc[2].substr(0, 15), "1000 standby 2 ");
  EXPECT_EQ(svc[3].substr(0, 15), "5000 restore 1 ");
  EXPECT_EQ(svc[4].substr(0, 15), "5000 restore 0 ");
  EXPECT_TRUE(detail(svc[1]).rfind("svc-3@", 0) == 0) << svc[1];
  EXPECT_TRUE(detail(svc[2]).rfind("svc-2@", 0) == 0) << svc[2];
  // Both restores complete at 5000 s in task order — svc-2, then svc-3 — each on its own GPUs.
  EXPECT_EQ(detail(svc[3]), detail(svc[2]));
  EXPECT_EQ(detail(svc[4]), detail(svc[1]));
  // Every spot job borrowed the lent GPUs at 1000 s and was evicted at 5000 s.
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(EventsOf(*r, "spot" + std::to_string(i)),
              (std::vector<std::string>{"1000 start 1 lent", "5000 evict 0 restore"}))
        << i;
  }
  EXPECT_EQ(r->metrics.at("standby_harvest_pct"), 100);  // every sample with Standby: all lent GPUs used
  EXPECT_EQ(r->metrics.at("evictions_count"), 8);
  EXPECT_EQ(r->metrics.at("hp_evictions_count"), 0);
  // Eight GPUs x 4000 s since the start (no checkpoints).
  EXPECT_NEAR(r->metrics.at("preemption_lost_gpu_hours"), 8.0 * 4000 / 3600, 1e-9);
  EXPECT_EQ(r->metrics.at("standby_entries_count"), 2);
  EXPECT_EQ(r->metrics.at("standby_restores_count"), 2);
}

TEST(Standby, WithoutStandbyTheServiceKeepsItsGpusAndSpotJobsWait) {
  auto r = RunTidal(StandbyCycle(", queue: priority"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(EventsOf(*r, "svc"), std::vector<std::string>{"0 start 4"});
  EXPECT_EQ(EventsOf(*r, "spot0"), std::vector<std::string>{});
  EXPECT_EQ(r->metrics.count("standby_harvest_pct"), 0u);
}

TEST(Standby, ExtraSchedulingCyclesChangeNothing) {
  auto base = RunTidal(StandbyCycle(", queue: priority, standby: {grace_s: 60}"));
  auto ticked = RunTidal(StandbyCycle(", queue: priority, standby: {grace_s: 60}, reserve: {after_s: 1000000, replan_s: 70}"));
  ASSERT_TRUE(base.ok() && ticked.ok());
  for (const char* job : {"svc", "dev", "spot0", "spot7"}) EXPECT_EQ(EventsOf(*base, job), EventsOf(*ticked, job)) << job;
}

// A curve at 25% from 00:00 to 05:00 and 100% from 06:00 to 23:00 (linear in between).
std::string WriteCurve(const std::filesystem::path& dir) {
  const std::string path = (dir / "curve.csv").string();
  std::ofstream f(path);
  f << "hour,demand_pct\n";
  for (int h = 0; h < 24; ++h) f << h << ',' << (h <= 5 ? 25 : 100) << '\n';
  return path;
}

TEST(TidalServices, ReplicasAboveTheDemandCurveAreInStandbyAtNightAndServeByDay) {
  testing::TempDir dir;
  const std::string yaml = "name: t\nduration_s: 36000\n" + std::string(kFourNodes) + "tidal:\n  curve: " +
                           WriteCurve(dir.path()) +
                           "\n  services: {count: 1, replicas_min: 4, replicas_max: 4, gpus: 4, cpu_cores: 1,"
                           " memory_gib: 1, phase_jitter_s: 0, step_s: 300}\n"
                           "configurations:\n  - {name: c, queue: priority, standby: {grace_s: 60}}\n";
  auto r = RunTidal(yaml);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Demand at night: ceil(4 x 25%) = 1 replica, so 3 go into Standby at the first demand step
  // after the service started (300 s). After 05:00 the curve is 25 + 75 x (t - 18000) / 3600 %:
  // 2 replicas once it exceeds 25%, 3 above 50% (t > 19200 s), 4 above 75% (t > 20400 s). Demand
  // is checked every 300 s looking 60 s ahead. Nothing borrows the replicas' GPUs here, so each
  // restore completes as it starts (with borrowers it would wait the 60 s they get to leave): at
  // 18000, 19200 and 20400 s.
  std::vector<std::string> kinds;
  for (const std::string& e : EventsOf(*r, "svc-0")) kinds.push_back(e.substr(0, e.find(' ', e.find(' ') + 1)));
  EXPECT_EQ(kinds, (std::vector<std::string>{"0 start", "300 standby", "300 standby", "300 standby", "18000 restore",
                                             "19200 restore", "20400 restore"}));
  EXPECT_EQ(r->metrics.at("standby_entries_count"), 3);
}

TEST(TidalServices, WithQueuesTheServicesRunInTheLeafTheyNameAndMustNameOne) {
  // Two leaf queues; the one service (4 replicas of 4 GPUs, no Standby: it keeps its peak all
  // day) names 'serve'. At every sample 'serve' holds its 16 GPUs and 'train' none.
  testing::TempDir dir;
  const auto yaml = [&](const std::string& services_queue) {
    return "name: t\nduration_s: 7200\nsample_interval_s: 1800\n" + std::string(kFourNodes) + "tidal:\n  curve: " +
           WriteCurve(dir.path()) + "\n  services: {count: 1, replicas_min: 4, replicas_max: 4, gpus: 4, cpu_cores: 1," +
           " memory_gib: 1, phase_jitter_s: 0" + services_queue + "}\n" +
           "queues:\n  - {name: serve, guarantee: {gpus: 16}}\n  - {name: train, guarantee: {gpus: 16}}\n"
           "configurations:\n  - {name: c, queue: priority}\n";
  };
  auto r = RunTidal(yaml(", queue: serve"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  int samples = 0;
  for (const QueueSample& q : r->queue_samples) {
    if (q.t == 0) continue;
    EXPECT_EQ(q.allocated, q.queue == "serve" ? 16 : 0) << q.queue << " at " << q.t;
    samples += q.queue == "serve";
  }
  EXPECT_GE(samples, 3);
  EXPECT_TRUE(testing::IsBadInput(RunTidal(yaml("")), "s.yaml:7: job 'svc-0': field 'queue': ",
                                  "missing (configuration 'c' has queues)"));
  EXPECT_TRUE(testing::IsBadInput(RunTidal(yaml(", queue: nosuch")), "s.yaml:7: job 'svc-0': field 'queue': ",
                                  "no queue 'nosuch'"));
}

}  // namespace
}  // namespace estuary

namespace estuary {
namespace {

// --- bad input ------------------------------------------------------------------------------------

struct BadTidal {
  const char* name;
  std::string body;  // the scenario after "name: t" and the cluster
  const char* prefix;
  const char* detail;
};

class TidalBadInput : public ::testing::TestWithParam<BadTidal> {};

// The scenario lines: 1 name, 2-3 cluster, then the body from line 4.
TEST_P(TidalBadInput, IsRejectedNamingTheFileLineAndField) {
  testing::TempDir dir;
  std::string body = GetParam().body;
  const std::string curve = WriteCurve(dir.path());
  for (size_t at; (at = body.find("CURVE")) != std::string::npos;) body.replace(at, 5, curve);
  auto s = ParseScenario("name: t\ncluster:\n  spec: c.yaml\n" + body, "s.yaml");
  EXPECT_TRUE(testing::IsBadInput(s, GetParam().prefix, GetParam().detail));
}

const char kJob[] = "jobs:\n  - {name: j, gpus: 1}\n";
const char kConf[] = "configurations:\n  - {name: a}\n";

INSTANTIATE_TEST_SUITE_P(
    Scenarios, TidalBadInput,
    ::testing::Values(
        BadTidal{"StandbyWindowEndsBeforeItStarts",
                 "jobs:\n  - {name: j, gpus: 1, standby: [{from_s: 500, to_s: 400}]}\n" + std::string(kConf),
                 "s.yaml:5: field 'standby[0].to_s': ", "400 is not after 'from_s' 500"},
        BadTidal{"StandbyWindowOfNoLength",
                 "jobs:\n  - {name: j, gpus: 1, standby: [{from_s: 500, to_s: 500}]}\n" + std::string(kConf),
                 "s.yaml:5: field 'standby[0].to_s': ", "500 is not after 'from_s' 500"},
        BadTidal{"StandbyWindowsOverlap",
                 "jobs:\n  - {name: j, gpus: 1, standby: [{from_s: 0, to_s: 400}, {from_s: 300, to_s: 900}]}\n" +
                     std::string(kConf),
                 "s.yaml:5: field 'standby[1].from_s': ", "300 is before the end of standby[0] 400"},
        BadTidal{"StandbyWindowMoreReplicasThanTheJob",
                 "jobs:\n  - {name: j, gpus: 1, replicas: 2, standby: [{from_s: 0, to_s: 400, replicas: 3}]}\n" +
                     std::string(kConf),
                 "s.yaml:5: field 'standby[0].replicas': ", "3 is above 2"},
        BadTidal{"StandbyWindowWithoutTo", "jobs:\n  - {name: j, gpus: 1, standby: [{from_s: 0}]}\n" + std::string(kConf),
                 "s.yaml:5: field 'standby[0].to_s': ", "missing"},
        BadTidal{"StandbyNotAList", "jobs:\n  - {name: j, gpus: 1, standby: {from_s: 0}}\n" + std::string(kConf),
                 "s.yaml:5: field 'standby': ", "expected an array of {from_s, to_s, replicas}"},
        BadTidal{"UnknownScaling", "jobs:\n  - {name: j, gpus: 1, scaling: quadratic}\n" + std::string(kConf),
                 "s.yaml:5: field 'scaling': ", "unknown scaling 'quadratic' (known: fixed, linear)"},
        BadTidal{"StandbyGraceOutOfRange", std::string(kJob) + "configurations:\n  - {name: a, standby: {grace_s: -5}}\n",
                 "s.yaml:7: field 'grace_s': ", "-5 is outside [0, 86400]"},
        BadTidal{"StandbyGraceTooLong", std::string(kJob) + "configurations:\n  - {name: a, standby: {grace_s: 86401}}\n",
                 "s.yaml:7: field 'grace_s': ", "86401 is outside [0, 86400]"},
        BadTidal{"LendingToHighPriority",
                 std::string(kJob) + "configurations:\n  - {name: a, standby: {lend_max_priority: 700}}\n",
                 "s.yaml:7: field 'lend_max_priority': ", "700 is outside [0, 699]"},
        BadTidal{"UnknownStandbyField", std::string(kJob) + "configurations:\n  - {name: a, standby: {window: 3}}\n",
                 "s.yaml:7: field 'window': ", "unknown field"},
        BadTidal{"AbsorbNotABool", std::string(kJob) + "configurations:\n  - {name: a, absorb: sometimes}\n",
                 "s.yaml:7: field 'absorb': ", "expected true or false"},
        BadTidal{"HoldSurvivorsNotABool", std::string(kJob) + "configurations:\n  - {name: a, hold_survivors: maybe}\n",
                 "s.yaml:7: field 'hold_survivors': ", "expected true or false"},
        BadTidal{"PreemptGraceOutOfRange", std::string(kJob) + "configurations:\n  - {name: a, preempt: {grace_s: 100000}}\n",
                 "s.yaml:7: field 'grace_s': ", "100000 is outside [0, 86400]"},
        BadTidal{"DiurnalClassWithoutCurve",
                 "generator:\n  arrivals_per_hour: 1\n  classes:\n    - {gpus: 1, diurnal: true}\n" + std::string(kConf),
                 "s.yaml:1: field 'tidal': ", "no tidal curve"},
        BadTidal{"TidalWithoutCurve", "tidal: {start_hour: 3}\n" + std::string(kJob) + kConf, "s.yaml:4: field 'curve': ",
                 "missing"},
        BadTidal{"TidalStartHourOutOfRange", "tidal: {curve: CURVE, start_hour: 24}\n" + std::string(kJob) + kConf,
                 "s.yaml:4: field 'start_hour': ", "24 is outside [0, 23]"},
        BadTidal{"TidalServicesReplicasMaxBelowMin",
                 "tidal:\n  curve: CURVE\n  services: {count: 2, replicas_min: 8, replicas_max: 4}\n" + std::string(kConf),
                 "s.yaml:6: field 'replicas_max': ", "below replicas_min"},
        BadTidal{"TidalServicesTooManyGpus",
                 "tidal:\n  curve: CURVE\n  services: {count: 2, gpus: 17}\n" + std::string(kConf),
                 "s.yaml:6: field 'gpus': ", "17 is outside [1, 16]"},
        BadTidal{"TidalServicesEmptyQueue", "tidal:\n  curve: CURVE\n  services: {count: 2, queue: ''}\n" + std::string(kConf),
                 "s.yaml:6: field 'queue': ", "expected a non-empty string"},
        BadTidal{"TidalServicesZeroStep", "tidal:\n  curve: CURVE\n  services: {count: 2, step_s: 0}\n" + std::string(kConf),
                 "s.yaml:6: field 'step_s': ", "0 is outside [1, 86400]"},
        BadTidal{"UtilisationAbove100", std::string(kJob) + "utilisation: {lp: 120}\n" + kConf, "s.yaml:6: field 'lp': ",
                 "120 is outside [0, 100]"},
        BadTidal{"UtilisationUnknownClass", std::string(kJob) + "utilisation: {vip: 10}\n" + kConf,
                 "s.yaml:6: field 'vip': ", "unknown field"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(TidalBadInput, ACurveFileWithABadRowIsRejectedNamingTheCurveFileLineAndColumn) {
  testing::TempDir dir;
  const std::string curve = (dir.path() / "bad.csv").string();
  {
    std::ofstream f(curve);
    f << "hour,demand_pct\n";
    for (int h = 0; h < 24; ++h) f << h << ',' << (h == 7 ? "lots" : "50") << '\n';
  }
  auto s = ParseScenario("name: t\ncluster:\n  spec: c.yaml\ntidal: {curve: " + curve + "}\n" + kJob + kConf, "s.yaml");
  EXPECT_TRUE(testing::IsBadInput(s, testing::AtColumn(curve, 9, "demand_pct")));
}

TEST(TidalBadInput, AMissingCurveFileIsRejectedNamingIt) {
  auto s = ParseScenario(std::string("name: t\ncluster:\n  spec: c.yaml\ntidal: {curve: no-such-curve.csv}\n") + kJob + kConf,
                         "dir/s.yaml");
  EXPECT_TRUE(testing::IsBadInput(s, "dir/no-such-curve.csv"));
}

}  // namespace
}  // namespace estuary

namespace estuary {
namespace {

TEST(TidalWeek, TheSameSeedGivesTheSameRunAndAnotherSeedAnother) {
  auto sc = ReadScenario(std::string(ESTUARY_SOURCE_DIR) + "/examples/tidal-week.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  sc->duration_s = 4 * 3600;  // the first night: services in Standby, spot jobs borrowing
  auto cluster = LoadScenarioCluster(*sc);
  ASSERT_TRUE(cluster.ok());
  const SchedulerConfig& tidal = sc->configurations.back();
  ASSERT_EQ(tidal.name, "tidal");
  auto a = RunScenario(*sc, *cluster, tidal, 1, false, true), b = RunScenario(*sc, *cluster, tidal, 1, false, true),
       c = RunScenario(*sc, *cluster, tidal, 2, false, true);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->metrics, b->metrics);
  ASSERT_EQ(a->job_events.size(), b->job_events.size());
  for (size_t k = 0; k < a->job_events.size(); ++k) {
    const SimJobEvent &x = a->job_events[k], &y = b->job_events[k];
    ASSERT_TRUE(x.time == y.time && x.job == y.job && x.kind == y.kind && x.replicas == y.replicas && x.detail == y.detail)
        << k;
  }
  EXPECT_NE(a->metrics, c->metrics);
  EXPECT_GT(a->metrics.at("standby_entries_count"), 0);
}

}  // namespace
}  // namespace estuary
