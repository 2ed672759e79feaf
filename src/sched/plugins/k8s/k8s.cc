#include "sched/plugins/k8s/k8s.h"

#include <algorithm>
#include <cmath>
#include <memory>

namespace estuary {
namespace {

// kube's leastRequestedScore (noderesources/least_allocated.go).
int64_t LeastRequested(int64_t requested, int64_t capacity) {
  if (capacity == 0 || requested > capacity) return 0;
  return (capacity - requested) * 100 / capacity;
}

// What the node's bound work requests of CPU and memory, plus `req`.
int64_t CpuRequested(const TaskRequest& req, const Node& node) {
  return node.spec.cpu_milli - node.cpu_free + req.cpu_milli;
}
int64_t MemRequested(const TaskRequest& req, const Node& node) {
  return node.spec.mem_mib - node.mem_free + req.mem_mib;
}

class LeastAllocatedScore final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "k8s-least-allocated"; }
  int64_t Score(const Task& task, const Node& node) override { return K8sLeastAllocatedScore(task.req, node); }
};

class BalancedAllocationScore final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "k8s-balanced-allocation"; }
  int64_t Score(const Task& task, const Node& node) override { return K8sBalancedAllocationScore(task.req, node); }
};

}  // namespace

int64_t K8sLeastAllocatedScore(const TaskRequest& req, const Node& node) {
  // Weighted mean over (cpu, 1), (memory, 1), floored.
  const int64_t cpu = LeastRequested(CpuRequested(req, node), node.spec.cpu_milli);
  const int64_t mem = LeastRequested(MemRequested(req, node), node.spec.mem_mib);
  return (cpu + mem) / 2;
}

int64_t K8sBalancedAllocationScore(const TaskRequest& req, const Node& node) {
  // kube's balancedResourceScorer: fractions capped at 1, resources of zero capacity skipped;
  // two fractions: std = |f0 - f1| / 2; fewer: std = 0.
  double fractions[2];
  int n = 0;
  const int64_t requested[2] = {CpuRequested(req, node), MemRequested(req, node)};
  const int64_t allocatable[2] = {node.spec.cpu_milli, node.spec.mem_mib};
  for (int i = 0; i < 2; ++i) {
    if (allocatable[i] == 0) continue;
    fractions[n++] = std::min(1.0, static_cast<double>(requested[i]) / static_cast<double>(allocatable[i]));
  }
  const double std_dev = n == 2 ? std::abs((fractions[0] - fractions[1]) / 2) : 0.0;
  return static_cast<int64_t>((1 - std_dev) * 100.0);
}

void RegisterK8sPlugins(Registry& r) {
  r.RegisterScore("k8s-least-allocated", [](const PluginContext&) { return std::make_unique<LeastAllocatedScore>(); });
  r.RegisterScore("k8s-balanced-allocation",
                  [](const PluginContext&) { return std::make_unique<BalancedAllocationScore>(); });
}

}  // namespace estuary
