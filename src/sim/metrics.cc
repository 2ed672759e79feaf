#include "sim/metrics.h"

#include <algorithm>
#include <cmath>

namespace estuary {

FragmentationTracker::FragmentationTracker(const ClusterState& state, const TypicalTasks& typical)
    : state_(state), typical_(typical), per_node_(state.num_nodes(), 0.0) {
  for (const Node& n : state.nodes()) {
    per_node_[n.id.value()] = NodeFragmentation(typical_, n);
    total_ += per_node_[n.id.value()];
  }
}

void FragmentationTracker::Update(NodeId node) {
  double& f = per_node_[node.value()];
  const double now = NodeFragmentation(typical_, state_.node(node));
  total_ += now - f;
  f = now;
}

double FragmentationTracker::FragRatioPct() const {
  const int64_t idle = state_.total_gpu_milli() - state_.allocated_gpu_milli();
  return idle > 0 ? 100.0 * total_ / static_cast<double>(idle) : 0.0;
}

void ArrivalCurve::Add(double arrived_pct, double value) {
  const double b = std::nearbyint(arrived_pct);  // default rounding mode: ties to even
  if (b < 0 || b > kMaxPct) return;
  const int i = static_cast<int>(b);
  sum_[i] += std::round(value * 100.0) / 100.0;
  ++count_[i];
}

std::array<std::optional<double>, ArrivalCurve::kMaxPct + 1> ArrivalCurve::Values() const {
  std::array<std::optional<double>, kMaxPct + 1> out;
  for (int x = 0; x <= kMaxPct; ++x) {
    if (count_[x] > 0) {
      out[x] = sum_[x] / static_cast<double>(count_[x]);
      continue;
    }
    double s = 0;
    int64_t c = 0;
    for (int y = std::max(0, x - 1); y <= std::min(kMaxPct, x + 1); ++y) {
      s += sum_[y];
      c += count_[y];
    }
    if (c > 0) out[x] = s / static_cast<double>(c);
  }
  return out;
}

std::array<std::optional<double>, ArrivalCurve::kMaxPct + 1> MeanCurve(
    const std::vector<std::array<std::optional<double>, ArrivalCurve::kMaxPct + 1>>& curves) {
  std::array<std::optional<double>, ArrivalCurve::kMaxPct + 1> out;
  for (int x = 0; x <= ArrivalCurve::kMaxPct; ++x) {
    double s = 0;
    int c = 0;
    for (const auto& curve : curves) {
      if (curve[x]) {
        s += *curve[x];
        ++c;
      }
    }
    if (c > 0) out[x] = s / c;
  }
  return out;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  size_t idx = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(idx, values.size() - 1)];
}

}  // namespace estuary
