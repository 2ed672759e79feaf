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

// `nodes` 8-GPU V100 nodes (96 cores, 768 GiB), each filled to a uniformly random 2..7 GPUs with
// whole-GPU tasks of 1, 1, 2, 2 or 4 GPUs (drawn uniformly, the last one cut to what is left),
// 8 cores and 64 GiB per GPU, each its own job, bound to the node's lowest GPUs; each task locked
// with probability locked_pct / 100. Same arguments, same instance.
DefragInstance MakeRandomDefragInstance(int nodes, int locked_pct, uint64_t seed);

}  // namespace estuary
