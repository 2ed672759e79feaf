// Volcano's node scores, for the `volcano-binpack` policy (docs/peers.md, volcano). Volcano sums
// the node-order scores of every enabled plugin (float64). Its shipped configuration
// (installer/helm/chart/volcano/config/volcano-scheduler.conf) enables both `nodeorder` and
// `binpack`, so a node's score is
//   nodeorder: LeastAllocated x 1 + BalancedAllocation x 1   (nodeorder.go's default weights;
//              its other scores — affinities, taints, image locality, topology spread — are
//              equal on every node of an estuary cluster)
// + binpack:   BinPackingScore (binpack.go), below.
// The plugins here:
//   volcano-binpack              BinPackingScore: over the resources the task requests (> 0)
//                                that have a weight w_r, s = sum_r w_r (used_r + req_r) / alloc_r
//                                (a term is 0 when used_r + req_r > alloc_r or alloc_r = 0),
//                                score = s / sum_r w_r x 100 x binpack.weight (0 when no resource
//                                counts), in float64 with Volcano's operations in its order (cpu,
//                                memory, then nvidia.com/gpu). Returned in fixed point: floor(score
//                                x kVolcanoScoreUnit).
//   volcano-balanced-allocation  kube's NodeResourcesBalancedAllocation as nodeorder configures
//                                it: resources cpu, memory and nvidia.com/gpu, the GPU only when
//                                the task requests GPUs (kube bypasses an extended resource the
//                                pod does not request). f_r = min((used_r + req_r) / alloc_r, 1)
//                                over resources of nonzero capacity; std = |f0 - f1| / 2 for two,
//                                sqrt(sum (f - mean)^2 / n) for three; floor((1 - std) x 100), in
//                                float64 as kube computes it. Integer points, [0, 100].
// nodeorder's LeastAllocated (cpu 50, memory 50 — the same weighted mean as kube's default) is the
// existing `k8s-least-allocated`. The policy weights the two integer scores by kVolcanoScoreUnit so
// that the weighted sum is Volcano's sum in the same fixed point.
//
// Units. used_r is what the node's bound tasks take: CPU in milli-cores, memory in MiB, GPUs in
// milli-GPU (spec GPUs x 1000 - free). Volcano counts CPU in milli-cores, memory in bytes and
// nvidia.com/gpu in milli-units; each fraction is a quotient of two exact integers whose common
// scale (2^20 for memory, 1 for the others) does not change the correctly rounded float64 result,
// so the fractions are Volcano's. A shared-GPU task (a fraction of one GPU) counts its fraction;
// Volcano's nvidia.com/gpu is whole devices (sharing needs other resources, not modelled).
// NOTE: the fixed point keeps Volcano's order except between scores closer than 2^-32 points
// (Volcano's float64 sum of ~300 points resolves ~2^-44): such nodes tie here.
#pragma once

#include <cstdint>

#include "sched/framework/registry.h"

namespace estuary {

// One point of a Volcano score in the policy's fixed point (volcano-binpack's unit is 1/this).
inline constexpr int64_t kVolcanoScoreUnit = int64_t{1} << 32;

// The binpack plugin's arguments. Each field's default is Volcano's when the argument is absent
// (binpack.go, calculateWeight).
struct VolcanoBinpackWeights {
  int64_t weight = 1;  // binpack.weight: multiplies the whole score; 0 disables the plugin
  int64_t cpu = 1;     // binpack.cpu
  int64_t memory = 1;  // binpack.memory
  int64_t gpu = 0;     // binpack.resources.nvidia.com/gpu; 0: nvidia.com/gpu not in binpack.resources
};

// The configuration the `volcano-binpack` policy models: a GPU platform team's binpack
// (binpack.weight 10, cpu 1, memory 1, binpack.resources: nvidia.com/gpu with weight 2;
// docs/peers.md says where these values come from).
VolcanoBinpackWeights VolcanoGpuBinpackWeights();

// BinPackingScore of placing `req` on `node` with `w`, in points (float64, Volcano's operations).
double VolcanoBinpackScore(const TaskRequest& req, const Node& node, const VolcanoBinpackWeights& w);
// nodeorder's BalancedAllocation of placing `req` on `node`, in points [0, 100].
int64_t VolcanoBalancedAllocationScore(const TaskRequest& req, const Node& node);

// Registers `volcano-binpack` (with VolcanoGpuBinpackWeights) and `volcano-balanced-allocation`.
void RegisterVolcanoPlugins(Registry& registry);

}  // namespace estuary
