// QueueMetrics: what the simulator measures of multi-tenant queues (issue 20; docs/metrics.md,
// "Queues"), from the engine's state after every cycle and from its events. All figures are in
// GPUs (the total-GPU dimension).
//
// After each cycle (AfterCycle), until the next one:
//   - every leaf queue's |allocated - reference fair share| (Engine::ReferenceShares: weighted,
//     instant, whatever the configuration shares by) is integrated over time:
//     fairness_deviation_pct = time-average of sum over leaves of |allocated - fair|, as % of the
//     cluster's GPUs;
//   - Jain's index over the leaves with demand (allocated or waiting) of allocated / fair share
//     (a leaf with a fair share of 0 counts 1), time-averaged over the time some leaf has
//     demand: jain_index;
//   - a leaf is "owed" while it holds less than its guarantee and one of its waiting jobs would
//     fit within its guarantee; each owed stretch, from the first cycle that finds it owed to the
//     first that does not, is one guarantee wait (a stretch still open at the end counts until the
//     end): guarantee_wait_p50_s, guarantee_wait_p99_s, guarantee_waits_count;
//   - queue_limit_breaches_count: cycles after which some queue held more than its limit.
// From the events: fairness_evictions_count (jobs shrunk or evicted whole by a queue's Reclaim,
// detail "queue reclaim"), flapping_jobs_count (jobs evicted whole — by a Reclaim of either kind
// or a Standby restore — more than once within an hour) and reshrunk_jobs_count (elastic jobs
// shrunk so more than once within an hour: they keep running, without their surplus).
// Sample (every sample_interval_s): one row per queue (QueueSample) for queues.csv.
// Thread-safety: none.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace estuary {

struct QueueSample {
  int64_t t = 0;
  std::string queue;
  double allocated = 0, guaranteed = 0, fair = 0, borrowed = 0, lent = 0, pending = 0;  // GPUs
};

class QueueMetrics {
 public:
  // Off (every call a no-op) when the engine has no queues.
  explicit QueueMetrics(const Engine& engine);
  bool enabled() const { return enabled_; }
  void AfterCycle(int64_t t);
  void OnEvent(const EngineEvent& e);
  void Sample(int64_t t);
  // Closes the integrals at `end` and writes the metrics.
  void Finish(int64_t end, std::map<std::string, double>& m);
  std::vector<QueueSample> TakeSamples() { return std::move(samples_); }

 private:
  // Per leaf: the smallest waiting job in GPU milli (INT64_MAX: none), and pending GPU milli.
  void Waiting(std::vector<int64_t>& smallest, std::vector<int64_t>& pending) const;

  const Engine& engine_;
  bool enabled_ = false;
  double capacity_gpu_ = 1;
  int64_t last_t_ = -1;
  double last_deviation_ = 0, last_jain_ = 1;
  bool last_demand_ = false;
  double deviation_area_ = 0, jain_area_ = 0, demand_time_ = 0;
  int64_t first_t_ = -1;
  std::vector<int64_t> owed_since_;  // per queue: -1 not owed
  std::vector<double> waits_;
  int64_t limit_breaches_ = 0;
  int64_t fairness_evictions_ = 0;
  std::map<uint32_t, std::vector<int64_t>> evicted_at_, shrunk_at_;  // per job: when evicted whole / shrunk
  std::vector<QueueSample> samples_;
};

}  // namespace estuary
