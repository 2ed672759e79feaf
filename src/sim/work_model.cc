#include "sim/work_model.h"

#include <algorithm>

#include "model/resources.h"

namespace estuary {

void WorkMetrics(const WorkTotals& t, bool failures, std::map<std::string, double>& m) {
  const auto gpu_hours = [](int64_t milli_s) { return static_cast<double>(milli_s) / kMilliPerGpu / 3600.0; };
  m["run_gpu_hours"] = gpu_hours(t.run_ms);
  m["goodput_gpu_hours"] = gpu_hours(t.goodput_ms);
  m["restart_gpu_hours"] = gpu_hours(t.restart_ms);
  m["eviction_lost_gpu_hours"] = gpu_hours(t.evict_lost_ms);
  if (failures) m["failure_lost_gpu_hours"] = gpu_hours(t.failure_lost_ms);
  m["unkept_gpu_hours"] = gpu_hours(t.unkept_ms);
  m["unusable_gpu_hours"] = gpu_hours(t.unusable_ms);
}

void RunWork::Progress(SimTime t, int64_t interval) {
  if (started_at < 0 || t <= progress_t || rate == 0) return;
  const auto done = [&](SimTime e) {
    return static_cast<int64_t>(static_cast<__int128>(e) * rate * kWorkScale * kSlowBase / slow);
  };
  if (interval > 0) {
    const SimTime last = started_at + (t - started_at) / interval * interval;
    if (last > progress_t) work_at_checkpoint = std::max<int64_t>(0, work_left - done(last - progress_t));
  }
  work_left = std::max<int64_t>(0, work_left - done(t - progress_t));
  progress_t = t;
}

void RunWork::Account(SimTime t, int64_t interval, SimTime window_start, WorkTotals& totals) {
  if (started_at < 0 || t <= acct_t) return;
  const SimTime from = std::max(acct_t, window_start);
  // The part of [acct_t, x) that counts.
  const auto span = [&](SimTime x) { return std::max<SimTime>(0, x - from); };
  if (interval > 0) {
    const SimTime last = started_at + (t - started_at) / interval * interval;
    if (last > acct_t) {
      ckpt_gpu_ms = run_gpu_ms + alloc_milli * span(last);
      ckpt_restart_ms = restart_gpu_ms + alloc_milli * span(std::min(last, restart_end));
    }
  }
  run_gpu_ms += alloc_milli * span(t);
  restart_gpu_ms += alloc_milli * span(std::min(t, restart_end));
  const int64_t unusable = unusable_milli * span(t);
  totals.run_ms += unusable;
  totals.unusable_ms += unusable;
  acct_t = t;
}

SimTime RunWork::EndAt(SimTime t) const {
  const __int128 denom = static_cast<__int128>(rate) * kWorkScale * kSlowBase;
  return std::max(t, progress_t) + static_cast<SimTime>((static_cast<__int128>(work_left) * slow + denom - 1) / denom);
}

void RunWork::CloseGpuTime(RunEnd how, int64_t kept, int64_t kept_restart, WorkTotals& totals) {
  totals.run_ms += run_gpu_ms;
  totals.goodput_ms += kept - kept_restart;
  totals.restart_ms += kept_restart;
  const int64_t lost = run_gpu_ms - kept;
  switch (how) {
    case RunEnd::kFinished: break;
    case RunEnd::kEvicted: totals.evict_lost_ms += lost; break;
    case RunEnd::kFailed: totals.failure_lost_ms += lost; break;
    case RunEnd::kUnfinished: totals.unkept_ms += lost; break;
  }
  run_gpu_ms = restart_gpu_ms = ckpt_gpu_ms = ckpt_restart_ms = 0;
}

bool RunWork::StartsNoticeCheckpoint(SimTime t, int64_t on_notice_s) {
  if (on_notice_s == 0 || started_at < 0) return false;
  SettleNotice(t, on_notice_s);
  return notice_pending.t < 0;  // else writing one already (or noticed for another task)
}

void RunWork::Notice(SimTime t) { notice_pending = {t, run_gpu_ms, restart_gpu_ms, work_left}; }

void RunWork::SettleNotice(SimTime t, int64_t on_notice_s) {
  if (notice_pending.t >= 0 && notice_pending.t + on_notice_s <= t) {
    notice_done = notice_pending;
    notice_pending = {};
  }
}

KeptCheckpoint RunWork::CloseRun(SimTime t, int64_t interval, int64_t on_notice_s, RunEnd how, WorkTotals& totals) {
  SettleNotice(t, on_notice_s);
  KeptCheckpoint k{interval > 0 ? started_at + (t - started_at) / interval * interval : started_at, work_at_checkpoint};
  int64_t kept = ckpt_gpu_ms, kept_restart = ckpt_restart_ms;
  if (how == RunEnd::kFinished) {
    k = {t, work_left};
    kept = run_gpu_ms;
    kept_restart = restart_gpu_ms;
  } else if (notice_done.t > k.at) {
    k = {notice_done.t, notice_done.work_left};
    kept = notice_done.gpu_ms;
    kept_restart = notice_done.restart_ms;
  }
  CloseGpuTime(how, kept, kept_restart, totals);
  notice_pending = notice_done = {};
  return k;
}

}  // namespace estuary
