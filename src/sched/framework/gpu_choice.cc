#include "sched/framework/gpu_choice.h"

#include "common/check.h"

namespace estuary {

GpuIndices FirstFullyFreeGpus(const Node& node, int count) {
  GpuIndices out;
  for (int g = 0; g < node.spec.gpu_count && out.size < count; ++g) {
    if (node.gpu_free[g] == kMilliPerGpu) out.Push(g);
  }
  ESTUARY_CHECK(out.size == count);
  return out;
}

int LeastFreeGpuThatFits(const Node& node, MilliGpu milli) {
  int best = -1;
  for (int g = 0; g < node.spec.gpu_count; ++g) {
    if (node.gpu_free[g] >= milli && (best < 0 || node.gpu_free[g] < node.gpu_free[best])) best = g;
  }
  return best;
}

GpuIndices BestFitGpus(const Task& task, const Node& node) {
  if (!task.req.NeedsGpu()) return {};
  if (!task.req.IsSharedGpu()) return FirstFullyFreeGpus(node, task.req.gpu_count);
  GpuIndices out;
  const int g = LeastFreeGpuThatFits(node, task.req.gpu_milli);
  ESTUARY_CHECK(g >= 0);
  out.Push(g);
  return out;
}

}  // namespace estuary
