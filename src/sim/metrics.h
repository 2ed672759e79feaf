// Simulator metrics shared by the openb protocol and the replay.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "model/cluster_state.h"
#include "sched/plugins/fgd/typical_tasks.h"

namespace estuary {

// Cluster fragmentation (docs/metrics.md §2): sum over nodes of F_n, kept up to date by
// re-measuring only the nodes whose version changed since the last Update(node).
class FragmentationTracker {
 public:
  FragmentationTracker(const ClusterState& state, const TypicalTasks& typical);
  // Re-measures one node. Call after every change of that node.
  void Update(NodeId node);
  // Total fragmented GPU milli (sum of F_n).
  double FragMilli() const { return total_; }
  // Fragmented share of idle GPU milli, in % (0 when nothing is idle).
  double FragRatioPct() const;

 private:
  const ClusterState& state_;
  const TypicalTasks& typical_;
  std::vector<double> per_node_;
  double total_ = 0;
};

// A metric sampled as a function of arrived GPU demand (% of cluster GPU capacity), discretised
// as the published analysis does: each sample goes to the bucket round(arrived %) (ties to even),
// a bucket's value is the mean of its samples (each rounded to 2 decimals); an empty bucket takes
// the mean of buckets x-1..x+1 when any has samples, else has no value.
class ArrivalCurve {
 public:
  static constexpr int kMaxPct = 130;
  void Add(double arrived_pct, double value);
  std::array<std::optional<double>, kMaxPct + 1> Values() const;

 private:
  std::array<double, kMaxPct + 1> sum_{};
  std::array<int64_t, kMaxPct + 1> count_{};
};

// Mean of curves (per bucket, over the curves that have a value there).
std::array<std::optional<double>, ArrivalCurve::kMaxPct + 1> MeanCurve(
    const std::vector<std::array<std::optional<double>, ArrivalCurve::kMaxPct + 1>>& curves);

// p-th percentile (0..100) of values by the nearest-rank rule; 0 for an empty list.
double Percentile(std::vector<double> values, double p);

}  // namespace estuary
