// QueueMetrics: what the simulator measures of multi-tenant queues (issue 20; docs/metrics.md,
// "Queues"), from the engine's state after every cycle and from its events. All figures are in
// GPUs (the total-GPU dimension).
//
// GPUs are measured per GPU model where the quotas name models (each (leaf, model) pair on its
// own: a queue's share of the whole cluster would count GPUs its jobs cannot use), else in total.
// After each cycle (AfterCycle), until the next one:
//   - every leaf queue's |allocated - reference fair share| (Engine::ReferenceShares: weighted,
//     instant, whatever the configuration shares by) is integrated over time:
//     fairness_deviation_pct = time-average of sum over leaves (and models) of |allocated -
//     fair|, as % of the cluster's GPUs;
//   - Jain's index over the (leaf, model) pairs with demand (allocated or a fair share) of
//     allocated / fair share, time-averaged over the time some pair has demand: jain_index;
//   - a leaf is "owed" while it holds less than its guarantee and one of its waiting jobs would
//     fit within its guarantee; each owed stretch, from the first cycle that finds it owed to the
//     first that does not, is one guarantee wait (a stretch still open at the end counts until the
//     end): guarantee_wait_p50_s, guarantee_wait_p99_s, guarantee_waits_count;
//   - queue_limit_breaches_count: cycles after which some queue held more than its limit (in
//     total or of a model).
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
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace estuary {

struct QueueSample {
  int64_t t = 0;
  std::string queue;
  std::string parent;  // the queue's parent; empty for a top-level queue
  bool leaf = true;    // no queue under it (an inner queue's figures sum its subtree's)
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
  // Queue q's GPUs held, and its reference fair share, summed over the measured dimensions.
  double Held(size_t q) const;
  double Fair(const QueueShares& ref, size_t q) const;

  const Engine& engine_;
  bool enabled_ = false;
  // The GPU dimensions measured, as (quota dimension, ClusterState::queue_usage index): each GPU
  // model some quota names, else GPUs in total.
  std::vector<std::pair<size_t, size_t>> gpu_dims_;
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
