// Goodput and lost work in `estuary simulate` (issue 21): how every GPU-second a job's runs held
// splits into goodput (work finished, or kept by a checkpoint), work lost to an eviction or a
// failure, restart cost, and work not kept by the end of the run — and checkpoints on notice
// (`checkpoint_on_notice_s`), which keep an evicted victim's work up to its notice. Every figure
// below is derived by hand from the scenario's timeline.
#include <gtest/gtest.h>

#include "sim/scenario.h"
#include "sim/simulate.h"
#include "tests/testing/sim_run.h"

namespace estuary {
namespace {

using testing::RunScenarioText;
using testing::StartOf;

const std::string kCluster = std::string(ESTUARY_SOURCE_DIR) + "/examples/clusters/two-asw.yaml";

SimJobStatus StatusOf(const SimulateResult& r, const std::string& name) {
  for (const SimJobRecord& j : r.jobs) {
    if (j.name == name) return j.status;
  }
  ADD_FAILURE() << "no job " << name;
  return SimJobStatus::kPending;
}

// GPU-seconds as the metrics' GPU-hours.
double Hours(double gpu_s) { return gpu_s / 3600; }

void ExpectSplit(const SimulateResult& r, double run, double goodput, double evicted, double failed, double restart,
                 double unkept, double unusable = 0) {
  EXPECT_NEAR(r.metrics.at("run_gpu_hours"), Hours(run), 1e-9);
  EXPECT_NEAR(r.metrics.at("goodput_gpu_hours"), Hours(goodput), 1e-9);
  EXPECT_NEAR(r.metrics.at("eviction_lost_gpu_hours"), Hours(evicted), 1e-9);
  EXPECT_NEAR(r.metrics.at("failure_lost_gpu_hours"), Hours(failed), 1e-9);
  EXPECT_NEAR(r.metrics.at("restart_gpu_hours"), Hours(restart), 1e-9);
  EXPECT_NEAR(r.metrics.at("unkept_gpu_hours"), Hours(unkept), 1e-9);
  EXPECT_NEAR(r.metrics.at("unusable_gpu_hours"), Hours(unusable), 1e-9);
  // The parts add up to the runs' allocated GPU time.
  EXPECT_NEAR(r.metrics.at("goodput_gpu_hours") + r.metrics.at("eviction_lost_gpu_hours") +
                  r.metrics.at("failure_lost_gpu_hours") + r.metrics.at("restart_gpu_hours") +
                  r.metrics.at("unkept_gpu_hours") + r.metrics.at("unusable_gpu_hours"),
              r.metrics.at("run_gpu_hours"), 1e-9);
}

// The eight 8-GPU H800 nodes of the two-ASW example: `lp` (8 GPUs, preemptible, its own fields)
// and seven non-preemptible dev jobs (8 GPUs each, checkpoint every 150 s, running past the end)
// start at 0; an HP job of one whole node arrives at 30 s and runs `hp_s`; Reclaim's grace is
// 60 s, so `lp` — the only possible victim — gets its notice at 30 s and is evicted at 90 s.
std::string OneVictim(const std::string& lp_fields, SimTime hp_s, SimTime duration) {
  std::string jobs = "  - {name: lp, gpus: 8, class: lp" + lp_fields + "}\n";
  for (int i = 1; i < 8; ++i) {
    jobs += "  - {name: d" + std::to_string(i) + ", duration_s: 100000, gpus: 8, class: dev, checkpoint_interval_s: 150}\n";
  }
  return "name: t\nduration_s: " + std::to_string(duration) + "\ncluster:\n  spec: " + kCluster + "\njobs:\n" + jobs +
         "  - {name: hp, submit_s: 30, duration_s: " + std::to_string(hp_s) + ", gpus: 8, class: hp-training}\n" +
         "configurations:\n  - {name: a, preempt: {grace_s: 60}}\n";
}

TEST(Goodput, AVictimEvictedAfter90sWithA60sCheckpointKeeps60sAndLoses30sOnItsEightGpus) {
  // End at 200 s. lp: [0, 90) -> kept 60 s x 8 = 480, lost 30 s x 8 = 240. hp: [90, 200), no
  // checkpoints, still running: 110 x 8 = 880 unkept. Dev jobs: [0, 200), last checkpoint 150 s:
  // 7 x 8 x 150 = 8400 kept, 7 x 8 x 50 = 2800 unkept. All 64 H800 GPUs held all the time:
  // 64 x 200 = 12800.
  auto r = RunScenarioText(OneVictim(", duration_s: 100000, checkpoint_interval_s: 60", 1000, 200));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "hp"), 90);
  EXPECT_EQ(r->metrics.at("evictions_count"), 1);
  ExpectSplit(*r, 12800, 480 + 8400, 240, 0, 0, 880 + 2800);
  // The existing lost-work metric says the same for a victim whose size did not change.
  EXPECT_NEAR(r->metrics.at("preemption_lost_gpu_hours"), Hours(240), 1e-9);
}

TEST(Goodput, ARunStoppedAtItsWalltimeKeepsItsWorkUpToItsLastCheckpointAndTheRestIsUnkept) {
  // One 8-GPU job of 1,000 s of work, checkpoint every 60 s, walltime 150 s, on the eight-node
  // cluster alone; end at 400 s. Its run [0, 150) is stopped at 150: kept 120 s x 8 = 960,
  // unkept 30 s x 8 = 240; nothing runs after it. run = 150 x 8 = 1200.
  const std::string yaml = "name: t\nduration_s: 400\ncluster:\n  spec: " + kCluster +
                           "\njobs:\n  - {name: w, gpus: 8, class: lp, duration_s: 1000, checkpoint_interval_s: 60, "
                           "walltime_s: 150}\nconfigurations:\n  - {name: a}\n";
  auto r = RunScenarioText(yaml);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StatusOf(*r, "w"), SimJobStatus::kTimedOut);
  EXPECT_EQ(r->metrics.at("jobs_timed_out_count"), 1);
  ExpectSplit(*r, 1200, 960, 0, 0, 0, 240);
}

// lp runs 250 s of work, checkpoints every 600 s (none before its eviction) and pays 10 s on a
// restart; hp runs [90, 190) and lp restarts at 190 s. End at 500 s.
const std::string kResumes = ", duration_s: 250, checkpoint_interval_s: 600, restart_cost_s: 10";

TEST(Goodput, WithoutACheckpointOnNoticeTheVictimLosesItsWholeRunAndFinishesLater) {
  // lp run 1 [0, 90): all 90 x 8 = 720 lost. Run 2 from 190: restart until 200, then 250 s of
  // work: finishes at 450; 260 x 8 = 2080 held, 80 restart, 2000 goodput. hp: 800 goodput.
  // Dev jobs: 7 x 8 x 450 = 25200 kept, 7 x 8 x 50 = 2800 unkept. Idle: lp's node [450, 500).
  auto r = RunScenarioText(OneVictim(kResumes, 100, 500));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StatusOf(*r, "lp"), SimJobStatus::kFinished);
  EXPECT_EQ(r->metrics.at("lp_jct_mean_s"), 450);  // the dev jobs never finish
  ExpectSplit(*r, 720 + 2080 + 800 + 28000, 2000 + 800 + 25200, 720, 0, 80, 2800);
  EXPECT_NEAR(r->metrics.at("preemption_lost_gpu_hours"), Hours(720), 1e-9);
}

TEST(Goodput, ACheckpointOnNoticeWithinTheGracePeriodKeepsTheWorkUpToTheNotice) {
  // Notice at 30 s, a 20 s checkpoint done at 50 s <= 90 s: the eviction keeps 30 s of work
  // (30 x 8 = 240 goodput) and loses the 60 s since the notice (480). Run 2 from 190: restart
  // until 200, then 220 s of work left: finishes at 420; 230 x 8 = 1840 held, 80 restart, 1760
  // goodput. Idle: lp's node [420, 500).
  auto r = RunScenarioText(OneVictim(kResumes + ", checkpoint_on_notice_s: 20", 100, 500));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StatusOf(*r, "lp"), SimJobStatus::kFinished);
  EXPECT_EQ(r->metrics.at("lp_jct_mean_s"), 420);
  ExpectSplit(*r, 720 + 1840 + 800 + 28000, 240 + 1760 + 800 + 25200, 480, 0, 80, 2800);
  EXPECT_NEAR(r->metrics.at("preemption_lost_gpu_hours"), Hours(480), 1e-9);
}

TEST(Goodput, ACheckpointOnNoticeLongerThanTheGracePeriodKeepsNothingMore) {
  // 61 s from the notice at 30 s ends at 91 s, after the eviction at 90 s: as without it.
  auto r = RunScenarioText(OneVictim(kResumes + ", checkpoint_on_notice_s: 61", 100, 500));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->metrics.at("lp_jct_mean_s"), 450);
  ExpectSplit(*r, 720 + 2080 + 800 + 28000, 2000 + 800 + 25200, 720, 0, 80, 2800);
}

TEST(Goodput, ALaterPeriodicCheckpointWinsOverAnEarlierNotice) {
  // Checkpoints every 60 s: the one at 60 s (after the notice at 30 s) is kept; as in the first
  // test, 480 kept and 240 lost on lp's eviction at 90 s.
  auto r = RunScenarioText(OneVictim(", duration_s: 100000, checkpoint_interval_s: 60, checkpoint_on_notice_s: 20", 1000, 200));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ExpectSplit(*r, 12800, 480 + 8400, 240, 0, 0, 880 + 2800);
}

// Two possible victims on h800 nodes, the other six nodes non-preemptible dev work: at 30 s
// `a` (checkpoint every 20 s) would lose 10 s x 8 GPUs, `b` (no periodic checkpoints) 30 s x 8.
std::string TwoVictims(const std::string& b_fields) {
  std::string jobs = "  - {name: a, duration_s: 100000, gpus: 8, class: lp, checkpoint_interval_s: 20}\n"
                     "  - {name: b, duration_s: 100000, gpus: 8, class: lp" + b_fields + "}\n";
  for (int i = 2; i < 8; ++i) jobs += "  - {name: d" + std::to_string(i) + ", duration_s: 100000, gpus: 8, class: dev}\n";
  return "name: t\nduration_s: 200\ncluster:\n  spec: " + kCluster + "\njobs:\n" + jobs +
         "  - {name: hp, submit_s: 30, duration_s: 1000, gpus: 8, class: hp-training}\n" +
         "configurations:\n  - {name: a, preempt: {grace_s: 60}}\n";
}

TEST(Goodput, ReclaimPrefersAVictimThatCheckpointsOnNoticeWithinTheGracePeriod) {
  for (const auto& [fields, victim] : std::vector<std::pair<std::string, std::string>>{
           {"", "a"}, {", checkpoint_on_notice_s: 20", "b"}, {", checkpoint_on_notice_s: 60", "b"},
           {", checkpoint_on_notice_s: 61", "a"}}) {
    auto r = RunScenarioText(TwoVictims(fields));
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(StatusOf(*r, victim), SimJobStatus::kPending) << fields;  // evicted, waiting again
    EXPECT_EQ(StatusOf(*r, victim == "a" ? "b" : "a"), SimJobStatus::kRunning) << fields;
    EXPECT_EQ(r->metrics.at("evictions_count"), 1) << fields;
  }
}

// Four 8-GPU nodes: a service of four 4-GPU replicas (two nodes) lends two replicas' GPUs from
// 1000 s to 5000 s; a dev job holds the other two nodes; eight one-GPU spot jobs (checkpoint every
// 1500 s) borrow the lent GPUs at 1000 s. The restore warns them at 4940 s (the Standby grace,
// 60 s, before the window ends) and evicts them at 5000 s; they wait to the end (8000 s).
std::string LentThenRestored(const std::string& spot_fields) {
  std::string spots;
  for (int i = 0; i < 8; ++i) {
    spots += "  - {name: spot" + std::to_string(i) + ", class: spot, submit_s: 1000, gpus: 1, cpu_cores: 1, " +
             "memory_gib: 1, duration_s: 100000, checkpoint_interval_s: 1500" + spot_fields + "}\n";
  }
  return "name: t\nduration_s: 8000\ncluster:\n  generate: {total_gpus: 32, gpus_per_node: 8, nodes_per_asw_min: 4, "
         "nodes_per_asw_max: 4, seed: 1}\njobs:\n"
         "  - {name: svc, class: hp-inference, replicas: 4, gpus: 4, cpu_cores: 4, memory_gib: 1, duration_s: 100000,\n"
         "     standby: [{from_s: 1000, to_s: 5000, replicas: 2}]}\n"
         "  - {name: dev, class: dev, replicas: 2, gpus: 8, cpu_cores: 1, memory_gib: 1, duration_s: 100000}\n" +
         spots + "configurations:\n  - {name: c, queue: priority, standby: {grace_s: 60}}\n";
}

TEST(Goodput, BorrowersThatCheckpointOnTheRestoreNoticeLoseOnlyTheGracePeriod) {
  // Spot runs [1000, 5000): 8 x 4000 = 32000 GPU-s. The service (a listed job, so counted)
  // holds 16 GPUs to the end but lends 8 of them in [1000, 5000): 16 x 8000 - 8 x 4000 = 96000,
  // no checkpoints: unkept. The dev job: 2 x 8 x 8000 = 128000, unkept. Together all 32 GPUs x
  // 8000 s, each counted once. Periodic checkpoints only: the spot jobs' last at 4000 s, so each
  // loses 1000 s.
  auto periodic = RunScenarioText(LentThenRestored(""));
  ASSERT_TRUE(periodic.ok()) << periodic.status().message();
  EXPECT_EQ(periodic->metrics.at("restore_evictions_count"), 8);
  ExpectSplit(*periodic, 32 * 8000, 8 * 3000, 8 * 1000, 0, 0, 96000 + 128000);
  EXPECT_NEAR(periodic->metrics.at("preemption_lost_gpu_hours"), Hours(8 * 1000), 1e-9);
  // A 30 s checkpoint from the notice at 4940 s is done at 4970 s: each keeps 3940 s, loses 60 s.
  auto notice = RunScenarioText(LentThenRestored(", checkpoint_on_notice_s: 30"));
  ASSERT_TRUE(notice.ok()) << notice.status().message();
  EXPECT_EQ(notice->metrics.at("restore_evictions_count"), 8);
  ExpectSplit(*notice, 32 * 8000, 8 * 3940, 8 * 60, 0, 0, 96000 + 128000);
  EXPECT_NEAR(notice->metrics.at("preemption_lost_gpu_hours"), Hours(8 * 60), 1e-9);
}

TEST(Goodput, ANodeFailureLosesTheWorkSinceTheLastCheckpointOfTheGangItRequeues) {
  // Eight jobs fill the eight H800 nodes from 0, checkpointing every 100 s; h800-a-0000 fails at
  // 250 s: its job keeps 200 s x 8 = 1600 and loses 50 s x 8 = 400, then waits (no room). The
  // seven others run to the end at 300 s, a checkpoint: 7 x 8 x 300 = 16800 kept.
  std::string jobs;
  for (int i = 0; i < 8; ++i) {
    jobs += "  - {name: j" + std::to_string(i) + ", duration_s: 100000, gpus: 8, class: lp, checkpoint_interval_s: 100}\n";
  }
  auto r = RunScenarioText("name: t\nduration_s: 300\ncluster:\n  spec: " + kCluster + "\njobs:\n" + jobs +
                           "events:\n  - {at_s: 250, fail_node: h800-a-0000}\nconfigurations:\n  - {name: a}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->metrics.at("jobs_requeued_by_failure_count"), 1);
  ExpectSplit(*r, 16800 + 2000, 16800 + 1600, 0, 400, 0, 0);
  EXPECT_EQ(r->metrics.at("preemption_lost_gpu_hours"), 0);  // Reclaim's metric: evictions only
}

TEST(Goodput, ReplicasBeyondTheLastWholeUsableStepAreNeitherGoodputNorLost) {
  // Without Align an elastic job of 2-6 replicas in steps of 4 is granted all 6 (8 GPUs each) on
  // the empty cluster; its work uses 4: over 100 s, 4 x 8 x 100 = 3200 since its start (no
  // checkpoints, running at the end: unkept) and 2 x 8 x 100 = 1600 unusable.
  auto r = RunScenarioText("name: t\nduration_s: 100\ncluster:\n  spec: " + kCluster +
                           "\njobs:\n  - {name: e, replicas: {min: 2, max: 6, step: 4}, gpus: 8, duration_s: 100000}\n"
                           "configurations:\n  - {name: a, align: false}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->metrics.at("allocated_unusable_gpus"), 16);
  ExpectSplit(*r, 4800, 0, 0, 0, 0, 3200, 1600);
}

TEST(Goodput, CheckpointOnNoticeIsReadFromTheJobSchema) {
  auto sc = ParseScenario("name: t\ncluster:\n  spec: c.yaml\njobs:\n"
                          "  - {name: a, gpus: 1, checkpoint_on_notice_s: 45}\n  - {name: b, gpus: 1}\n"
                          "configurations:\n  - {name: c}\n",
                          "s.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  EXPECT_EQ(sc->jobs[0].checkpoint_on_notice_s, 45);
  EXPECT_EQ(sc->jobs[1].checkpoint_on_notice_s, 0);  // default: off
}

struct Bad {
  const char* name;
  const char* job;
  const char* message;
};

class CheckpointOnNoticeBadInput : public ::testing::TestWithParam<Bad> {};

TEST_P(CheckpointOnNoticeBadInput, IsRejectedNamingFileLineAndField) {
  auto s = ParseScenario(std::string("name: t\ncluster:\n  spec: c.yaml\njobs:\n  - ") + GetParam().job +
                             "\nconfigurations:\n  - {name: a}\n",
                         "s.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().ExitCode(), 2);
  EXPECT_EQ(s.status().message(), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, CheckpointOnNoticeBadInput,
    ::testing::Values(Bad{"Negative", "{name: j, gpus: 1, checkpoint_on_notice_s: -1}",
                          "s.yaml:5: field 'checkpoint_on_notice_s': -1 is below 0"},
                      Bad{"AboveTheLimit", "{name: j, gpus: 1, checkpoint_on_notice_s: 1000000000001}",
                          "s.yaml:5: field 'checkpoint_on_notice_s': 1000000000001 is above 1000000000000"},
                      Bad{"NotAnInteger", "{name: j, gpus: 1, checkpoint_on_notice_s: 1.5}",
                          "s.yaml:5: field 'checkpoint_on_notice_s': expected an integer"},
                      Bad{"Misspelt", "{name: j, gpus: 1, checkpoint_on_notice: 10}",
                          "s.yaml:5: field 'checkpoint_on_notice': unknown field"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace estuary
