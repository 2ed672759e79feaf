// The baseline policies of the FGD paper, as its public simulator defines them
// (docs/policies.md has each formula). All scores are integers, higher is better.
//   random          a uniformly random feasible node (chosen in PreScore).
//   dotprod         Tetris: smallest dot product of the node's free [CPU, GPU] with the request,
//                   both divided by the largest node spec (128,000 mCPU; 8,000 mGPU).
//   gpu-clustering  prefer nodes whose GPU tasks all share the task's tag (shared / k-GPU).
//   gpu-packing     prefer shared GPUs, then free GPUs on used nodes, then idle nodes.
//   best-fit        least leftover 0.5*(CPU/128000) + 0.5*(GPU/8000), min-max normalised.
// GPU selectors: best (least free GPU that fits; first free GPUs for whole-GPU tasks) and
// random (a uniformly random GPU that fits, for shared tasks).
#pragma once

#include "sched/framework/registry.h"

namespace estuary {

// The largest node spec of the openb cluster, the normaliser of dotprod and best-fit.
inline constexpr MilliCpu kMaxSpecCpuMilli = 128000;
inline constexpr int64_t kMaxSpecGpuMilli = 8000;

void RegisterBasicPlugins(Registry& registry);

}  // namespace estuary
