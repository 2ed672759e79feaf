#include "sched/plugins/volcano/volcano.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "model/resources.h"

namespace estuary {
namespace {

// One resource as both scores see it: the task's request, the node's bound use, its capacity.
struct Use {
  int64_t request = 0;
  int64_t used = 0;
  int64_t capacity = 0;
};

Use CpuUse(const TaskRequest& req, const Node& node) {
  return {req.cpu_milli, node.spec.cpu_milli - node.cpu_free, node.spec.cpu_milli};
}
Use MemUse(const TaskRequest& req, const Node& node) {
  return {req.mem_mib, node.spec.mem_mib - node.mem_free, node.spec.mem_mib};
}
Use GpuUse(const TaskRequest& req, const Node& node) {
  const int64_t capacity = int64_t{node.spec.gpu_count} * kMilliPerGpu;
  return {req.NeedsGpu() ? req.TotalGpuMilli() : 0, capacity - node.gpu_free_total, capacity};
}

// binpack.go's ResourceBinPackingScore: (used + requested) x weight / capacity in float64; 0 for
// no capacity, a zero weight, or a request beyond what is left.
double ResourceBinPackingScore(const Use& u, int64_t weight) {
  if (u.capacity == 0 || weight == 0) return 0.0;
  const double used_finally = static_cast<double>(u.request) + static_cast<double>(u.used);
  if (used_finally > static_cast<double>(u.capacity)) return 0.0;
  return used_finally * static_cast<double>(weight) / static_cast<double>(u.capacity);
}

// Scores in units of 1/kVolcanoScoreUnit = 2^-32 point: the float64 score times 2^32 (exact, a
// power of two), floored.
class BinpackScore final : public ScorePlugin {
 public:
  explicit BinpackScore(VolcanoBinpackWeights w) : w_(w) {}
  std::string_view Name() const override { return "volcano-binpack"; }
  int64_t Score(const Task& task, const Node& node) override {
    static_assert(kVolcanoScoreUnit == int64_t{1} << 32);
    return static_cast<int64_t>(std::floor(std::ldexp(VolcanoBinpackScore(task.req, node, w_), 32)));
  }

 private:
  VolcanoBinpackWeights w_;
};

class BalancedAllocationScore final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "volcano-balanced-allocation"; }
  int64_t Score(const Task& task, const Node& node) override { return VolcanoBalancedAllocationScore(task.req, node); }
};

}  // namespace

VolcanoBinpackWeights VolcanoGpuBinpackWeights() { return {.weight = 10, .cpu = 1, .memory = 1, .gpu = 2}; }

double VolcanoBinpackScore(const TaskRequest& req, const Node& node, const VolcanoBinpackWeights& w) {
  // BinPackingScore: the task's requested resources in ResourceNames() order (cpu, memory, then
  // the scalar resources); a resource with no request or no configured weight is skipped whole.
  // Volcano's weights never go negative (calculateWeight resets them to 1); a zero weight counts
  // in neither sum.
  const Use uses[3] = {CpuUse(req, node), MemUse(req, node), GpuUse(req, node)};
  const int64_t weights[3] = {w.cpu, w.memory, w.gpu};
  const bool configured[3] = {true, true, w.gpu > 0};  // nvidia.com/gpu only via binpack.resources
  double score = 0.0;
  int64_t weight_sum = 0;
  for (int i = 0; i < 3; ++i) {
    if (uses[i].request == 0 || !configured[i]) continue;
    score += ResourceBinPackingScore(uses[i], weights[i]);
    weight_sum += weights[i];
  }
  if (weight_sum > 0) score /= static_cast<double>(weight_sum);
  // k8s MaxNodeScore (100) x binpack.weight, as an int64 product converted once.
  return score * static_cast<double>(int64_t{100} * w.weight);
}

int64_t VolcanoBalancedAllocationScore(const TaskRequest& req, const Node& node) {
  // kube's balancedResourceScorer over nodeorder's resources (cpu, memory, nvidia.com/gpu); the
  // GPU is bypassed (allocatable 0) when the task requests none.
  const Use uses[3] = {CpuUse(req, node), MemUse(req, node), GpuUse(req, node)};
  double fractions[3];
  double total = 0.0;
  int n = 0;
  for (int i = 0; i < 3; ++i) {
    if (i == 2 && uses[i].request == 0) continue;
    if (uses[i].capacity == 0) continue;
    double f = static_cast<double>(uses[i].used + uses[i].request) / static_cast<double>(uses[i].capacity);
    if (f > 1) f = 1;
    total += f;
    fractions[n++] = f;
  }
  double std_dev = 0.0;
  if (n == 2) {
    std_dev = std::abs((fractions[0] - fractions[1]) / 2);
  } else if (n > 2) {
    const double mean = total / static_cast<double>(n);
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum = sum + (fractions[i] - mean) * (fractions[i] - mean);
    std_dev = std::sqrt(sum / static_cast<double>(n));
  }
  return static_cast<int64_t>((1 - std_dev) * 100.0);
}

void RegisterVolcanoPlugins(Registry& r) {
  r.RegisterScore("volcano-binpack",
                  [](const PluginContext&) { return std::make_unique<BinpackScore>(VolcanoGpuBinpackWeights()); });
  r.RegisterScore("volcano-balanced-allocation",
                  [](const PluginContext&) { return std::make_unique<BalancedAllocationScore>(); });
}

}  // namespace estuary
