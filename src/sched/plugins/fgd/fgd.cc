#include "sched/plugins/fgd/fgd.h"

#include <cmath>

#include "common/check.h"
#include "sched/framework/gpu_choice.h"

namespace estuary {
namespace {
int64_t FgdScoreOf(double before, double after) {
  const double x = (before - after) / 1000.0;
  return static_cast<int64_t>(100.0 / (1.0 + std::exp(-x)));
}
}  // namespace

double FgdScore::Before(const Node& node) {
  if (before_.size() <= node.id.value()) before_.resize(node.id.value() + 1, {0, 0.0});
  auto& e = before_[node.id.value()];
  if (e.first != node.version) e = {node.version, NodeFragmentation(*typical_, node)};
  return e.second;
}

std::pair<int64_t, int> FgdScore::ScoreAndGpu(const Task& task, const Node& node) {
  const TaskRequest& r = task.req;
  const double before = Before(node);
  std::array<MilliGpu, kMaxGpusPerNode> after = node.gpu_free;
  const MilliCpu cpu_after = node.cpu_free - r.cpu_milli;
  if (r.IsSharedGpu() && r.gpu_milli > 0) {
    int64_t best = -1;
    int best_gpu = -1;
    for (int g = 0; g < node.spec.gpu_count; ++g) {
      if (node.gpu_free[g] < r.gpu_milli) continue;
      after[g] -= r.gpu_milli;
      const int64_t s = FgdScoreOf(before, NodeFragmentation(*typical_, node.spec.model, cpu_after,
                                                             after.data(), node.spec.gpu_count));
      after[g] += r.gpu_milli;
      if (best_gpu < 0 || s > best) {
        best = s;
        best_gpu = g;
      }
    }
    return {best < 0 ? 0 : best, best_gpu};
  }
  if (r.NeedsGpu()) {
    int left = r.gpu_count;
    for (int g = 0; g < node.spec.gpu_count && left > 0; ++g) {
      if (after[g] == kMilliPerGpu) {
        after[g] = 0;
        --left;
      }
    }
  }
  const double f = NodeFragmentation(*typical_, node.spec.model, cpu_after, after.data(), node.spec.gpu_count);
  return {FgdScoreOf(before, f), -1};
}

int64_t FgdScore::Score(const Task& task, const Node& node) { return ScoreAndGpu(task, node).first; }

GpuIndices FgdScore::Select(const Task& task, const Node& node, Rng&) {
  if (!task.req.IsSharedGpu()) return BestFitGpus(task, node);
  const int g = ScoreAndGpu(task, node).second;
  ESTUARY_CHECK(g >= 0);
  GpuIndices out;
  out.Push(g);
  return out;
}

}  // namespace estuary
