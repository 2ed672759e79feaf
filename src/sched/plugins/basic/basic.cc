#include "sched/plugins/basic/basic.h"

#include <algorithm>
#include <map>

#include "common/check.h"
#include "sched/framework/gpu_choice.h"

namespace estuary {
namespace {

class RandomScore final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "random"; }
  bool CacheableByNode() const override { return false; }
  void PreScore(const Task&, std::span<const NodeId> feasible, Rng& rng) override {
    chosen_ = feasible[rng.Uniform(feasible.size())];
  }
  int64_t Score(const Task&, const Node& node) override { return node.id == chosen_ ? 100 : 0; }

 private:
  NodeId chosen_;
};

class DotProductScore final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "dotprod"; }
  int64_t Score(const Task& task, const Node& node) override {
    const double cpu = static_cast<double>(kMaxSpecCpuMilli);
    const double gpu = static_cast<double>(kMaxSpecGpuMilli);
    double dot = (static_cast<double>(node.cpu_free) / cpu) * (static_cast<double>(task.req.cpu_milli) / cpu);
    dot += (static_cast<double>(node.gpu_free_total) / gpu) * (static_cast<double>(task.req.TotalGpuMilli()) / gpu);
    return static_cast<int64_t>(100.0 * (1.0 - dot / 2.0));
  }
};

// The tag of a task for gpu-clustering: "" for CPU-only, "share", or "<k>-gpu".
int ClusteringTag(const TaskRequest& r) {
  if (!r.NeedsGpu()) return -1;
  if (r.IsSharedGpu()) return 0;
  return r.gpu_count;  // k-GPU
}

class GpuClusteringScore final : public ScorePlugin {
 public:
  explicit GpuClusteringScore(const ClusterState* state) : state_(state) {}
  std::string_view Name() const override { return "gpu-clustering"; }
  int64_t Score(const Task& task, const Node& node) override {
    const int tag = ClusteringTag(task.req);
    if (tag < 0) return 0;
    uint32_t tags = 0;  // bit per distinct tag present among the node's GPU tasks
    for (TaskId id : node.tasks) {
      const int t = ClusteringTag(state_->task(id).req);
      if (t >= 0) tags |= 1u << t;
    }
    const int64_t fill = 25 * (kMaxSpecGpuMilli - node.gpu_free_total) / kMaxSpecGpuMilli;
    const int distinct = __builtin_popcount(tags);
    if (tags >> tag & 1) return fill + (distinct == 1 ? 75 : 50);
    return fill + (distinct == 0 ? 25 : 0);
  }

 private:
  const ClusterState* state_;
};

class GpuPackingScore final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "gpu-packing"; }
  int64_t Score(const Task& task, const Node& node) override {
    const TaskRequest& r = task.req;
    if (!r.NeedsGpu()) return 0;
    const int64_t full = node.full_free_gpus;
    if (full == node.spec.gpu_count) return std::max<int64_t>(100 / 3 - full, full);
    // Take GPUs in ascending free order (stable), as the published plugin does.
    std::array<uint8_t, kMaxGpusPerNode> order{};
    const int n = node.spec.gpu_count;
    for (int g = 0; g < n; ++g) order[g] = static_cast<uint8_t>(g);
    std::stable_sort(order.begin(), order.begin() + n,
                     [&](uint8_t a, uint8_t b) { return node.gpu_free[a] < node.gpu_free[b]; });
    int need = r.gpu_count, full_used = 0;
    int64_t free_pct = 0;
    for (int i = 0; i < n && need > 0; ++i) {
      const MilliGpu f = node.gpu_free[order[i]];
      if (f < r.gpu_milli) continue;
      --need;
      full_used += f == kMilliPerGpu;
      free_pct += int64_t{f} * 100 / kMilliPerGpu;
    }
    if (need > 0) return 0;
    if (full_used > 0) return std::max<int64_t>(100 / 2 - full_used, 100 / 3);
    return std::max<int64_t>(100 - free_pct / 10, 100 / 2);
  }
};

class BestFitScore final : public ScorePlugin {
  static constexpr int64_t kTableMax = 1024;
  std::array<int64_t, kTableMax + 1> table_{};

 public:
  std::string_view Name() const override { return "best-fit"; }
  int64_t Score(const Task& task, const Node& node) override {
    double s = static_cast<double>(node.cpu_free - task.req.cpu_milli) / static_cast<double>(kMaxSpecCpuMilli) * 0.5;
    s += static_cast<double>(node.gpu_free_total - task.req.TotalGpuMilli()) / static_cast<double>(kMaxSpecGpuMilli) * 0.5;
    return static_cast<int64_t>((1.0 - s) * 100.0);
  }
  // Raw scores lie in [0, 100] when no node exceeds the normalising spec; the min-max map of a
  // range of at most 100 onto [0, 100] is then strictly increasing.
  bool NormalizeKeepsOrder(const ClusterState& state) const override {
    for (const Node& n : state.nodes()) {
      if (n.spec.cpu_milli > kMaxSpecCpuMilli || int64_t{n.spec.gpu_count} * kMilliPerGpu > kMaxSpecGpuMilli) return false;
    }
    return true;
  }
  // Min-max to [0, 100] with integer arithmetic; all equal => 0 (Kubernetes' convention).
  void Normalize(std::span<int64_t> scores) override {
    if (scores.empty()) return;
    const auto [lo_it, hi_it] = std::minmax_element(scores.begin(), scores.end());
    const int64_t lo = *lo_it, range = *hi_it - *lo_it;
    if (range == 0) {
      std::fill(scores.begin(), scores.end(), 0);
    } else if (range <= kTableMax) {
      // Raw scores span a small integer range: map through a table instead of dividing each.
      for (int64_t v = 0; v <= range; ++v) table_[v] = v * 100 / range;
      for (int64_t& s : scores) s = table_[s - lo];
    } else {
      for (int64_t& s : scores) s = (s - lo) * 100 / range;
    }
  }
};

class BestGpuSelect final : public GpuSelectPlugin {
 public:
  std::string_view Name() const override { return "best"; }
  GpuIndices Select(const Task& task, const Node& node, Rng&) override { return BestFitGpus(task, node); }
};

class RandomGpuSelect final : public GpuSelectPlugin {
 public:
  std::string_view Name() const override { return "random"; }
  GpuIndices Select(const Task& task, const Node& node, Rng& rng) override {
    if (!task.req.IsSharedGpu()) return BestFitGpus(task, node);
    int chosen = -1;
    uint64_t seen = 0;
    for (int g = 0; g < node.spec.gpu_count; ++g) {
      if (node.gpu_free[g] >= task.req.gpu_milli && rng.Uniform(++seen) == 0) chosen = g;
    }
    ESTUARY_CHECK(chosen >= 0);
    GpuIndices out;
    out.Push(chosen);
    return out;
  }
};

}  // namespace

void RegisterBasicPlugins(Registry& r) {
  r.RegisterScore("random", [](const PluginContext&) { return std::make_unique<RandomScore>(); });
  r.RegisterScore("dotprod", [](const PluginContext&) { return std::make_unique<DotProductScore>(); });
  r.RegisterScore("gpu-clustering",
                  [](const PluginContext& c) { return std::make_unique<GpuClusteringScore>(c.state); });
  r.RegisterScore("gpu-packing", [](const PluginContext&) { return std::make_unique<GpuPackingScore>(); });
  r.RegisterScore("best-fit", [](const PluginContext&) { return std::make_unique<BestFitScore>(); });
  r.RegisterGpuSelect("best", [](const PluginContext&) { return std::make_unique<BestGpuSelect>(); });
  r.RegisterGpuSelect("random", [](const PluginContext&) { return std::make_unique<RandomGpuSelect>(); });
}

}  // namespace estuary
