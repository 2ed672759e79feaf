// What-if rooms of nodes, shared by the preemption solvers (preempt.cc, preempt_k8s.cc): a node's
// free amounts plus what evicted tasks on it held, and how many replicas of a request fit there.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "model/cluster_state.h"

namespace estuary::preempt_internal {

// What a node would have free: its free amounts plus what evicted tasks on it held.
struct Room {
  MilliCpu cpu = 0;
  MemMiB mem = 0;
  std::array<MilliGpu, kMaxGpusPerNode> gpu{};
};

inline Room FreeRoom(const Node& n) {
  Room r;
  r.cpu = n.cpu_free;
  r.mem = n.mem_free;
  r.gpu = n.gpu_free;
  return r;
}

// Adds (sign 1) or takes back (sign -1) what bound task `t` holds. A borrowed task (Standby)
// holds only its memory of the node's own capacity; its GPUs and CPU stay its lender's.
inline void AddTask(Room& r, const Task& t, int sign) {
  r.mem += sign * t.req.mem_mib;
  if (t.borrowed) return;
  r.cpu += sign * t.req.cpu_milli;
  for (uint8_t g : t.gpus) r.gpu[g] += sign * t.req.gpu_milli;
}

// Replicas of `req` that fit in room `r` of node `n`: AllocateAction::ReplicasFitting's arithmetic
// (whole GPUs or shared milli, GPU model, CPU, memory) on a what-if room.
inline int64_t Fits(const Node& n, const Room& r, const TaskRequest& req) {
  constexpr int64_t kMany = int64_t{1} << 40;
  int64_t k = std::min(req.cpu_milli > 0 ? r.cpu / req.cpu_milli : kMany, req.mem_mib > 0 ? r.mem / req.mem_mib : kMany);
  if (req.NeedsGpu()) {
    if (!req.models.Admits(n.spec.model)) return 0;
    int64_t g = 0;
    if (req.IsSharedGpu()) {
      for (int i = 0; i < n.spec.gpu_count; ++i) g += r.gpu[i] / req.gpu_milli;
    } else {
      int64_t full = 0;
      for (int i = 0; i < n.spec.gpu_count; ++i) full += r.gpu[i] == kMilliPerGpu;
      g = full / req.gpu_count;
    }
    k = std::min(k, g);
  }
  return std::max<int64_t>(k, 0);
}

}  // namespace estuary::preempt_internal
