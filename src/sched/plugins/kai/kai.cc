#include "sched/plugins/kai/kai.h"

#include <algorithm>
#include <memory>
#include <span>

#include "common/check.h"

namespace estuary {
namespace {

class KaiBinpack final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "kai-binpack"; }
  int64_t Score(const Task& task, const Node& node) override { return -KaiNonAllocated(task.req, node); }
  // Raw scores are -free; min free is -(largest raw), max free -(smallest raw).
  void Normalize(std::span<int64_t> scores) override {
    if (scores.empty()) return;
    const auto [lo_it, hi_it] = std::minmax_element(scores.begin(), scores.end());
    const int64_t min_free = -*hi_it, max_free = -*lo_it;
    for (int64_t& s : scores) s = KaiBinpackScore(min_free, max_free, -s);
  }
  // Strictly increasing in the raw score while max - min <= 9 x 2^32 milli-units (a step of one
  // unit of free capacity is then at least one fixed-point unit): true of every node shape.
  bool NormalizeKeepsOrder(const ClusterState&) const override { return true; }
};

}  // namespace

int64_t KaiNonAllocated(const TaskRequest& req, const Node& node) {
  return req.NeedsGpu() ? node.gpu_free_total : node.cpu_free;
}

int64_t KaiBinpackScore(int64_t min, int64_t max, int64_t free) {
  ESTUARY_CHECK(min <= free && free <= max);
  if (max == 0) return 0;
  if (min == max) return kKaiMaxHighDensity * kKaiScoreUnit;
  // 9 x (1 - (free - min) / (max - min)) = 9 x (max - free) / (max - min), floored.
  const __int128 num = static_cast<__int128>(max - free) * kKaiMaxHighDensity * kKaiScoreUnit;
  return static_cast<int64_t>(num / (max - min));
}

void RegisterKaiPlugins(Registry& r) {
  r.RegisterScore("kai-binpack", [](const PluginContext&) { return std::make_unique<KaiBinpack>(); });
}

}  // namespace estuary
