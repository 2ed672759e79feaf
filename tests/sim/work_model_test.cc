// The simulator's work model (sim/work_model.h), the one both drivers (a scenario, a federation)
// use: progress at a rate slowed by the network, periodic checkpoints, when a run ends, and how
// its GPU time splits into goodput, restart periods and work lost. Every figure is derived by hand.
#include "sim/work_model.h"

#include <gtest/gtest.h>

namespace estuary {
namespace {

// A 2-replica job of 100 s at max replicas (work 200 replica-seconds) started at t = 10 with a
// restart cost of 5 s, each replica 1 GPU (alloc 2,000 milli), a checkpoint every 30 s.
RunWork Started() {
  RunWork w;
  w.started_at = 10;
  w.work_left = w.work_at_checkpoint = 200 * kWorkScale;
  w.rate = 2;
  w.progress_t = w.restart_end = 15;
  w.acct_t = 10;
  w.alloc_milli = 2000;
  return w;
}

TEST(RunWork, ProgressCountsFromTheRestartEndAndAPeriodicCheckpointPassedKeepsItsWork) {
  RunWork w = Started();
  // It would end 100 s after its restart.
  EXPECT_EQ(w.EndAt(10), 115);
  w.Progress(50, 30);  // 35 s of work at 2 replicas; the checkpoint at 40 had 25 s of it
  EXPECT_EQ(w.work_left, (200 - 70) * kWorkScale);
  EXPECT_EQ(w.work_at_checkpoint, (200 - 50) * kWorkScale);
  EXPECT_EQ(w.progress_t, 50);
  EXPECT_EQ(w.EndAt(50), 115);  // unchanged while nothing changes
  // Spanning two domains from 50 on, 27% slower: 130 replica-s at 2 replicas = 65 s, x 1.27 =
  // 82.55 s, rounded up.
  w.slow = kSlowBase + 2700;
  EXPECT_EQ(w.EndAt(50), 50 + 83);
  // Not running, or at rate 0: no progress.
  RunWork idle = Started();
  idle.rate = 0;
  idle.Progress(60, 30);
  EXPECT_EQ(idle.work_left, 200 * kWorkScale);
}

TEST(RunWork, GpuTimeSplitsIntoGoodputRestartAndWorkLostByHowTheRunEnded) {
  RunWork w = Started();
  WorkTotals totals;
  w.unusable_milli = 1000;  // a third replica beyond its usable step
  w.Account(55, 30, 0, totals);
  // 45 s at 2 GPUs, 5 of them in the restart period; the checkpoint at 40: 30 s, 5 of restart.
  EXPECT_EQ(w.run_gpu_ms, 2000 * 45);
  EXPECT_EQ(w.restart_gpu_ms, 2000 * 5);
  EXPECT_EQ(w.ckpt_gpu_ms, 2000 * 30);
  EXPECT_EQ(w.ckpt_restart_ms, 2000 * 5);
  EXPECT_EQ(totals.unusable_ms, 1000 * 45);
  EXPECT_EQ(totals.run_ms, 1000 * 45);
  // Evicted at 55: what the checkpoint kept counts (25 s of goodput, 5 of restart), 15 s lost.
  w.CloseGpuTime(RunEnd::kEvicted, w.ckpt_gpu_ms, w.ckpt_restart_ms, totals);
  EXPECT_EQ(totals.goodput_ms, 2000 * 25);
  EXPECT_EQ(totals.restart_ms, 2000 * 5);
  EXPECT_EQ(totals.evict_lost_ms, 2000 * 15);
  EXPECT_EQ(totals.failure_lost_ms + totals.unkept_ms, 0);
  EXPECT_EQ(totals.run_ms, 1000 * 45 + 2000 * 45);  // every GPU-second, once
  EXPECT_EQ(w.run_gpu_ms + w.restart_gpu_ms + w.ckpt_gpu_ms + w.ckpt_restart_ms, 0);
}

TEST(RunWork, OnlyGpuTimeFromTheWindowsStartCounts) {
  // The federation's warm-up: from 40 on only. 15 s at 2 GPUs up to 55, none in the restart
  // period (it ended at 15); the checkpoint at 40 had nothing yet.
  RunWork w = Started();
  WorkTotals totals;
  w.Account(55, 30, 40, totals);
  EXPECT_EQ(w.run_gpu_ms, 2000 * 15);
  EXPECT_EQ(w.restart_gpu_ms, 0);
  EXPECT_EQ(w.ckpt_gpu_ms, 0);
  // A run that finishes keeps all of it.
  w.CloseGpuTime(RunEnd::kFinished, w.run_gpu_ms, w.restart_gpu_ms, totals);
  EXPECT_EQ(totals.goodput_ms, 2000 * 15);
  EXPECT_EQ(totals.evict_lost_ms + totals.failure_lost_ms + totals.unkept_ms, 0);
}

TEST(RunWork, ARunEndingKeepsTheLaterOfItsPeriodicCheckpointAndOneWrittenOnNotice) {
  // Notice at 45 (state: 30 s of work done from 15, 60 replica-s), a 10 s checkpoint written by
  // 55; evicted at 60. The periodic checkpoint at 40 is earlier: the notice's is kept — 35 s of
  // GPU time, 5 of them restart — and the run resumes with 140 replica-s left.
  // Work and GPU time counted up to t (checkpoints every 30 s).
  const auto to = [](RunWork& r, WorkTotals& totals, SimTime t) {
    r.Progress(t, 30);
    r.Account(t, 30, 0, totals);
  };
  RunWork w = Started();
  WorkTotals totals;
  to(w, totals, 45);
  ASSERT_TRUE(w.StartsNoticeCheckpoint(45, 10));
  w.Notice(45);
  EXPECT_FALSE(w.StartsNoticeCheckpoint(50, 10));  // a second notice while writing: nothing new
  EXPECT_EQ(w.notice_pending.t, 45);
  to(w, totals, 60);
  const KeptCheckpoint k = w.CloseRun(60, 30, 10, RunEnd::kEvicted, totals);
  EXPECT_EQ(k.at, 45);
  EXPECT_EQ(k.work_left, 140 * kWorkScale);
  EXPECT_EQ(totals.goodput_ms, 2000 * 30);
  EXPECT_EQ(totals.restart_ms, 2000 * 5);
  EXPECT_EQ(totals.evict_lost_ms, 2000 * 15);
  EXPECT_EQ(w.notice_pending.t, -1);
  EXPECT_EQ(w.notice_done.t, -1);
  // Not yet written when the run ends (a 20 s checkpoint from 45 is done at 65): the periodic one
  // at 40 is kept, 25 s of work done, 150 replica-s left.
  RunWork late = Started();
  WorkTotals lt;
  to(late, lt, 45);
  ASSERT_TRUE(late.StartsNoticeCheckpoint(45, 20));
  late.Notice(45);
  to(late, lt, 60);
  const KeptCheckpoint p = late.CloseRun(60, 30, 20, RunEnd::kEvicted, lt);
  EXPECT_EQ(p.at, 40);
  EXPECT_EQ(p.work_left, 150 * kWorkScale);
  EXPECT_EQ(lt.evict_lost_ms, 2000 * 20);
  // A finished run keeps all of it, at its end.
  RunWork done = Started();
  WorkTotals dt;
  to(done, dt, 115);
  const KeptCheckpoint f = done.CloseRun(115, 30, 0, RunEnd::kFinished, dt);
  EXPECT_EQ(f.at, 115);
  EXPECT_EQ(f.work_left, 0);
  EXPECT_EQ(dt.goodput_ms + dt.restart_ms, 2000 * 105);
}

TEST(WorkMetrics, GpuHoursOfEachPartAndTheFailureLineOnlyWhereFailuresExist) {
  WorkTotals t;
  t.run_ms = 3600 * 1000 * 3;  // 3 GPU-hours
  t.goodput_ms = 3600 * 500;   // half a GPU-hour
  std::map<std::string, double> with, without;
  WorkMetrics(t, true, with);
  WorkMetrics(t, false, without);
  EXPECT_DOUBLE_EQ(with["run_gpu_hours"], 3.0);
  EXPECT_DOUBLE_EQ(with["goodput_gpu_hours"], 0.5);
  EXPECT_EQ(with.count("failure_lost_gpu_hours"), 1u);
  EXPECT_EQ(without.count("failure_lost_gpu_hours"), 0u);
  EXPECT_EQ(with.size(), without.size() + 1);
}

}  // namespace
}  // namespace estuary
