// The plugin interfaces of a scheduling cycle. Plugins are policy: they filter nodes, score them
// and choose GPU indices. Actions (control flow) decide which tasks to try and what disruption is
// allowed; the Session runs the plugins for one task at a time.
//
// Scores are integers; higher is better. A plugin whose score depends only on the task's request
// and on the node (its free capacity and its bound tasks) declares CacheableByNode() and the
// Session caches its scores per (task class, node version).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/rng.h"
#include "model/cluster_state.h"

namespace estuary {

struct TypicalTasks;

// What plugins may read while they run. Pointers stay valid for the Session's lifetime.
struct PluginContext {
  const ClusterState* state = nullptr;
  // The workload's typical tasks (FGD's fragmentation measure); null when the policy needs none.
  const TypicalTasks* typical = nullptr;
};

// An extra node filter beyond the built-in resource fit (CPU, memory, GPU model, GPU capacity).
class FilterPlugin {
 public:
  virtual ~FilterPlugin() = default;
  virtual std::string_view Name() const = 0;
  // Returns an empty string when the node passes, else a short reason ("node cordoned").
  virtual std::string_view Filter(const Task& task, const Node& node) = 0;
  // True when Filter() depends only on (task request, node) — lets the Session index it.
  virtual bool CacheableByNode() const { return true; }
};

class ScorePlugin {
 public:
  virtual ~ScorePlugin() = default;
  virtual std::string_view Name() const = 0;
  // True when Score() depends only on (task request, node) — enables the Session's score cache.
  virtual bool CacheableByNode() const { return true; }
  // Called once per task with the nodes that passed filtering, before any Score() call.
  virtual void PreScore(const Task& task, std::span<const NodeId> feasible, Rng& rng) {}
  // Score of placing `task` on `node`. REQUIRES: the node passed filtering.
  virtual int64_t Score(const Task& task, const Node& node) = 0;
  // Rescales the scores of all feasible nodes in place (e.g. min-max to [0, 100]). Default: none.
  virtual void Normalize(std::span<int64_t> scores) {}
  // True when Normalize() keeps raw scores in strictly the same order on `state` (distinct raw
  // scores stay distinct), so the best node can be found from raw scores. Default: true (no
  // normalisation).
  virtual bool NormalizeKeepsOrder(const ClusterState& state) const { return true; }
};

// Chooses the GPU indices a task takes on its chosen node.
class GpuSelectPlugin {
 public:
  virtual ~GpuSelectPlugin() = default;
  virtual std::string_view Name() const = 0;
  // REQUIRES: the node fits the task. Returns exactly task.req.gpu_count indices (none for a
  // CPU-only task).
  virtual GpuIndices Select(const Task& task, const Node& node, Rng& rng) = 0;
};

}  // namespace estuary
