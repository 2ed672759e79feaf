// kube-scheduler's default resource scores, as the `k8s-fit` policy (docs/peers.md, k8s-default):
//   k8s-least-allocated      NodeResourcesFit with its default scoring strategy LeastAllocated:
//                            per resource r, floor((alloc_r - req_r) * 100 / alloc_r) (0 when
//                            the request exceeds it), then the weighted mean over the resources,
//                            floored.
//   k8s-balanced-allocation  NodeResourcesBalancedAllocation: with f_r = min(req_r / alloc_r, 1),
//                            floor((1 - std(f)) * 100); for two resources std = |f_cpu - f_mem| / 2.
// req_r is what the node's bound tasks request plus the task being placed; alloc_r the node's
// capacity. Both use kube's default resources: CPU and memory, weight 1 each
// (pkg/scheduler/apis/config/v1/defaults.go, defaultResourceSpec). The GPU extended resource
// (nvidia.com/gpu) is not scored by default — it only filters (NodeResourcesFit's Filter) — so
// the scores ignore GPUs. The policy `k8s-fit` sums both with weight 1
// (pkg/scheduler/apis/config/v1/default_plugins.go): scores in [0, 200]; neither normalises.
// Arithmetic: LeastAllocated is integer in kube and here; BalancedAllocation is float64 in kube
// and is computed here with the same float64 operations in the same order, so that the scores
// (and their rare rounding at integer boundaries) are kube's. Memory in MiB gives the same
// fractions as kube's bytes (both sides scale by 2^20, exact in binary floating point).
#pragma once

#include <cstdint>

#include "sched/framework/registry.h"

namespace estuary {

// The two scores of placing `req` on `node`, in [0, 100].
int64_t K8sLeastAllocatedScore(const TaskRequest& req, const Node& node);
int64_t K8sBalancedAllocationScore(const TaskRequest& req, const Node& node);

void RegisterK8sPlugins(Registry& registry);

}  // namespace estuary
