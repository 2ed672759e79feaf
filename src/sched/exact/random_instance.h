// Seeded random defragmentation instances, shared by the exact reference's benchmark and the
// heuristic-vs-exact gap measurement (issue 5: "on 100 random 25-node instances, IPC frees within
// one node of CBC's optimum").
#pragma once

#include <cstdint>
#include <vector>

#include "model/cluster_state.h"

namespace estuary {

struct DefragInstance {
  ClusterState state;
  std::vector<NodeId> nodes;  // every node of `state`
  std::vector<char> locked;   // by TaskId value
};

// How an instance is drawn. The defaults are the easy instance of MakeRandomDefragInstance(n,
// locked_pct, seed); HardDefragInstanceOptions is the harder set. Every node has 8 GPUs.
struct DefragInstanceOptions {
  int nodes = 25;
  int locked_pct = 0;            // each task locked with this probability (%)
  // GPUs used per node: uniform in [min_used_gpus, max_used_gpus] (1..8). Default 2..7.
  int min_used_gpus = 2, max_used_gpus = 7;
  // Per node, the chance (%) that one of its used GPUs holds a shared-GPU task (100..900 milli, on
  // its lowest used index) instead of whole-GPU tasks. Shared-GPU tasks are always locked:
  // SolveExactDefrag treats them as locked, so the IPC planner is given the same. Default 0.
  int shared_node_pct = 0;
  // Per node, the chance (%) of one CPU-only task (8..32 cores, 64 GiB). Default 0.
  int cpu_only_node_pct = 0;
  // CPU per GPU of a task uniform in 4..16 cores (step 2) and memory 32..96 GiB (step 16), each
  // cut to what its node has left — CPU binds on the smaller nodes. Default false: 8 cores and
  // 64 GiB per GPU.
  bool cpu_pressure = false;
  // The chance (%) that a node is of a second model, A100 (64 cores, 256 GiB), instead of V100
  // (96 cores, 768 GiB — 384 GiB with cpu_pressure). Default 0.
  int second_model_pct = 0;
  // The chance (%) that a whole-GPU task accepts only its node's model. Default 0.
  int pinned_pct = 0;
};

// The harder set of the gap report (docs/performance.md): fills of 3..7 GPUs, a locked shared-GPU
// task on 30% of nodes, a CPU-only task on 30%, CPU pressure, 40% A100 nodes, 30% of whole-GPU
// tasks pinned to their model.
DefragInstanceOptions HardDefragInstanceOptions(int nodes, int locked_pct);

// An instance drawn as `options` says: nodes n0, n1, ... each filled from GPU 0 upwards with its
// shared-GPU task (if any) and then whole-GPU tasks of 1, 1, 2, 2 or 4 GPUs (drawn uniformly,
// the last one cut to what is left), then its CPU-only task (if any); each task its own job.
// Same options and seed, same instance.
DefragInstance MakeRandomDefragInstance(const DefragInstanceOptions& options, uint64_t seed);

// `nodes` 8-GPU V100 nodes (96 cores, 768 GiB), each filled to a uniformly random 2..7 GPUs with
// whole-GPU tasks of 1, 1, 2, 2 or 4 GPUs (drawn uniformly, the last one cut to what is left),
// 8 cores and 64 GiB per GPU, each its own job, bound to the node's lowest GPUs; each task locked
// with probability locked_pct / 100. Same arguments, same instance.
DefragInstance MakeRandomDefragInstance(int nodes, int locked_pct, uint64_t seed);

}  // namespace estuary
