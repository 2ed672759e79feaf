// Typical tasks and the FGD fragmentation measure (FGD, USENIX ATC'23; docs/policies.md).
//
// Typical tasks M: the workload's tasks grouped by spec (CPU milli, GPU count, per-GPU milli,
// allowed models), most frequent first, taken until their cumulative share reaches `coverage`
// (default 95%), shares renormalised to sum to 1.
//
// Fragmentation of a node for typical task m, F_n(m): all of the node's free GPU milli when m
// cannot be placed there (CPU, GPU model, not enough GPUs with free >= m's per-GPU milli), else the
// free milli of the GPUs that hold less than m's per-GPU milli. As in the published simulator, a
// CPU-only typical task counts all of the node's free GPU milli, and memory is not part of the
// measure (typical tasks carry no memory). F_n = sum_m p_m F_n(m).
#pragma once

#include <map>
#include <span>
#include <tuple>
#include <string>
#include <vector>

#include "model/cluster_state.h"

namespace estuary {

struct TypicalTask {
  TaskRequest req;     // mem_mib is 0: not part of the spec
  int64_t count = 0;   // tasks of this spec in the workload
  double share = 0;    // p_m after renormalisation
};

struct TypicalTasks {
  std::vector<TypicalTask> tasks;
  double covered = 0;  // share of the workload the typical tasks cover before renormalising
  int64_t distinct_specs = 0;

  // REQUIRES: 0 < coverage <= 1. An empty workload gives no typical tasks.
  static TypicalTasks FromWorkload(std::span<const TaskRequest> workload, double coverage = 0.95);
};

// A workload's task specs counted one request at a time (memory: one entry per distinct spec), so
// that typical tasks can be learned from a stream of submissions (Engine, policy fgd without a
// trace). Build() equals TypicalTasks::FromWorkload over the requests added so far.
class TypicalTaskCounter {
 public:
  void Add(const TaskRequest& r) {
    ++counts_[{r.cpu_milli, r.gpu_milli, r.gpu_count, r.models.bits()}];
    ++total_;
  }
  int64_t total() const { return total_; }
  // REQUIRES: 0 < coverage <= 1.
  TypicalTasks Build(double coverage = 0.95) const;

 private:
  using Key = std::tuple<MilliCpu, MilliGpu, int32_t, uint64_t>;  // cpu, per-GPU milli, count, models
  std::map<Key, int64_t> counts_;
  int64_t total_ = 0;
};

// F_n of a node state given as (model, free CPU, per-GPU free milli).
double NodeFragmentation(const TypicalTasks& typical, GpuModelId model, MilliCpu cpu_free,
                         const MilliGpu* gpu_free, int gpu_count);
inline double NodeFragmentation(const TypicalTasks& typical, const Node& n) {
  return NodeFragmentation(typical, n.spec.model, n.cpu_free, n.gpu_free.data(), n.spec.gpu_count);
}

}  // namespace estuary
