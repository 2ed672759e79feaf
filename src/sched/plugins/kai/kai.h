// KAI-Scheduler's node score, for the `kai-binpack` policy (docs/peers.md, kai). KAI sums the
// node-order scores of its plugins, each a band of its own (plugins/scores/scores.go: binpack
// 0-9, resource type 10, availability 100, GPU sharing 1000, topology 10000, k8s plugins 100000,
// nominated node 1000000). On an estuary cluster of ready GPU nodes without affinities, GPU
// sharing or nominations, the only band that differs between nodes for a task is the
// nodeplacement plugin's (estuary's topology chooses the domain before the nodes are scored:
// docs/peers.md, kai, "Topology"). Its default strategy is binpack for GPU and for CPU-only
// tasks (nodeplacement.go, New), scored by pack.go:
//   r       the task's resource: GPUs (milli-GPU) for a task that requests any, else CPU
//           (milli-cores);
//   free_n  what node n does not allocate of r (KAI's NonAllocatedResource: capacity minus what
//           its bound tasks take);
//   min,max over the task's feasible nodes that have r (PreScore in KAI: setBinpackPreOrder);
//   score   0 when max = 0; 9 when min = max; else 9 x (1 - (free_n - min) / (max - min)).
// So the feasible node with the least free r scores 9 and the one with the most scores 0: the
// node with the fewest free GPUs wins, whatever its CPU and memory (unlike `best-fit`, which
// weighs CPU and GPU leftovers half and half). Ties: KAI sorts by score (equal scores in map
// order, effectively random); estuary by its seeded node order.
//
// The plugin's raw Score is -free_n (cacheable: it depends only on the task's request and the
// node), so the best raw score is KAI's best node; Normalize maps the feasible nodes' raw scores
// to KAI's score in fixed point, floor(score x kKaiScoreUnit), with integer arithmetic (KAI:
// float64). The map is strictly increasing, so raw and normalised scores order nodes alike.
#pragma once

#include <cstdint>

#include "sched/framework/registry.h"

namespace estuary {

// One point of KAI's node score in the plugin's fixed point.
inline constexpr int64_t kKaiScoreUnit = int64_t{1} << 32;
// KAI's top binpack score (scores.MaxHighDensity).
inline constexpr int64_t kKaiMaxHighDensity = 9;

// What `node` does not allocate of the resource KAI packs `req` by: milli-GPU when req asks for
// any GPU, else milli-cores.
int64_t KaiNonAllocated(const TaskRequest& req, const Node& node);

// pack.go's score of a node with `free` non-allocated units when the feasible nodes' range is
// [min, max], in units of 1 / kKaiScoreUnit point. REQUIRES: min <= free <= max.
int64_t KaiBinpackScore(int64_t min, int64_t max, int64_t free);

// Registers `kai-binpack`.
void RegisterKaiPlugins(Registry& registry);

}  // namespace estuary
