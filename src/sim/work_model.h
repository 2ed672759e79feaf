// The work model of a job's runs — one for the simulator's drivers (ScenarioRun in simulate.cc,
// FederationRun in federation_sim.cc): how far a running job's work has come, when it will end,
// and what the GPU time of its runs counted for (goodput, restart periods, work lost).
//
// Work is in replica-seconds x kWorkScale at the job's max replicas. A running job progresses
// `rate` replica units per second (its max replicas when fixed, its usable replicas when it
// scales linearly), slowed by slow / kSlowBase (the network model; kSlowBase: not slowed).
// Periodic checkpoints fall every checkpoint interval from the run's start: a run that ends other
// than by finishing resumes from the last one (work_at_checkpoint), and its GPU time after it is
// lost.
//
// GPU time: the current run's allocated GPU milli x seconds (alloc_milli: its usable replicas'
// GPUs), counted up to acct_t, in all (run_gpu_ms) and within its restart period [started_at,
// restart_end) (restart_gpu_ms), and both as they were at its last periodic checkpoint passed
// (ckpt_*; 0 before the first). Bound replicas beyond the usable step (unusable_milli) do no work;
// their GPU time counts as run time and as unusable. Only GPU time from a window's start on counts
// (the federation's warm-up; the scenario counts from 0).
// Thread-safety: none (plain data).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/clock.h"

namespace estuary {

inline constexpr int64_t kWorkScale = 10000;  // work units per replica-second
inline constexpr int64_t kSlowBase = 10000;   // `slow` of a run that is not slowed

// How a run ended: its work finished; it was evicted, or a node failure stopped it (both resume
// from their last checkpoint); or it ended otherwise with its work unfinished (the simulation's
// end, a cancel, its walltime, its member's eviction in a federation).
enum class RunEnd { kFinished, kEvicted, kFailed, kUnfinished };

// What the GPU time of a simulation's runs counted for (GPU milli x seconds), over its runs.
struct WorkTotals {
  int64_t run_ms = 0;          // all, unusable replicas' included
  int64_t goodput_ms = 0;      // kept (finished, or up to the checkpoint resumed from), outside restart periods
  int64_t restart_ms = 0;      // kept, within restart periods
  int64_t unusable_ms = 0;     // of bound replicas beyond the usable step
  int64_t evict_lost_ms = 0;   // lost (after the checkpoint kept) by evictions
  int64_t failure_lost_ms = 0; // ... by node failures
  int64_t unkept_ms = 0;       // ... by runs that ended unfinished otherwise
};

// The GPU-hour metrics of `t` into `m`: run_gpu_hours, goodput_gpu_hours, restart_gpu_hours,
// eviction_lost_gpu_hours, unkept_gpu_hours, unusable_gpu_hours and, with `failures`,
// failure_lost_gpu_hours.
void WorkMetrics(const WorkTotals& t, bool failures, std::map<std::string, double>& m);

// A checkpoint written on an eviction notice (JobSpec::checkpoint_on_notice_s): of the run's state
// at `t` (-1: none) — its GPU time then (run_gpu_ms, restart_gpu_ms) and its work left.
struct NoticeCheckpoint {
  SimTime t = -1;
  int64_t gpu_ms = 0, restart_ms = 0;
  int64_t work_left = 0;
};

// The checkpoint a run that ended keeps: its time and the work left at it, which a next run
// resumes from (a finished run: its end and its work left, 0).
struct KeptCheckpoint {
  SimTime at = 0;
  int64_t work_left = 0;
};

// One job's current run (started_at -1: not running) and its work.
struct RunWork {
  SimTime started_at = -1;
  int64_t work_left = 0;
  int64_t work_at_checkpoint = 0;  // work_left at the current run's last checkpoint (or start)
  int64_t rate = 0;
  int64_t slow = kSlowBase;
  SimTime progress_t = 0;  // progress is counted up to here (after a restart: start + restart cost)
  SimTime acct_t = 0;      // GPU time is counted up to here
  SimTime restart_end = 0;
  int64_t alloc_milli = 0, unusable_milli = 0;
  int64_t run_gpu_ms = 0, restart_gpu_ms = 0;
  int64_t ckpt_gpu_ms = 0, ckpt_restart_ms = 0;
  // Checkpoints on notice in the current run: the one being written and the latest written.
  NoticeCheckpoint notice_pending, notice_done;

  // Counts the work done from progress_t to `t` at rate and slow (nothing when not running, at
  // rate 0, or t <= progress_t); a periodic checkpoint (every `interval` s from the start; 0:
  // none) passed on the way sets work_at_checkpoint.
  void Progress(SimTime t, int64_t interval);
  // Counts the GPU time from acct_t to `t` (only what lies at or after `window_start`) at
  // alloc_milli and unusable_milli — the unusable part into `totals` — and the checkpoint figures
  // of a periodic checkpoint passed. Nothing when not running or t <= acct_t.
  void Account(SimTime t, int64_t interval, SimTime window_start, WorkTotals& totals);
  // When the work left ends at the current rate and slow (rate > 0), counting from t or
  // progress_t, whichever is later.
  SimTime EndAt(SimTime t) const;
  // Closes the run's GPU time (Account first): `kept` of run_gpu_ms (and `kept_restart` of
  // restart_gpu_ms) counted — all when it finished, else what its checkpoint kept — the rest lost
  // by `how`; the run's counters start again at 0.
  void CloseGpuTime(RunEnd how, int64_t kept, int64_t kept_restart, WorkTotals& totals);
  // Whether an eviction notice at t starts a checkpoint on notice (one taking `on_notice_s`
  // seconds, 0: the job takes none): the run is going and is not writing one (one written by t
  // is settled first, SettleNotice).
  bool StartsNoticeCheckpoint(SimTime t, int64_t on_notice_s);
  // The checkpoint on notice that starts at t, of the state at t. REQUIRES:
  // StartsNoticeCheckpoint(t, ...); Progress and Account up to t.
  void Notice(SimTime t);
  // A checkpoint on notice written by t becomes the latest written.
  void SettleNotice(SimTime t, int64_t on_notice_s);
  // Ends the current run at t by `how` (CloseGpuTime): the checkpoint kept is the latest of the
  // last periodic one (every `interval` s from its start; 0: none, the start) and the last written
  // on notice — all of it when it finished. REQUIRES: Progress and Account up to t.
  KeptCheckpoint CloseRun(SimTime t, int64_t interval, int64_t on_notice_s, RunEnd how, WorkTotals& totals);
};

}  // namespace estuary
