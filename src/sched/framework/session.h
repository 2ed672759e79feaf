// Session: one scheduling cycle's view of the ClusterState and its configured plugins. For one
// task at a time it filters nodes (built-in resource fit + filter plugins), scores the feasible
// ones, breaks ties by the configured rule and chooses GPU indices — and returns the decision as
// data (an Outcome). It never mutates the state; actions apply decisions through a Statement.
//
// Speed: nodes that cannot hold a task's whole GPUs are skipped through the state's free-GPU
// index; scores of plugins that are CacheableByNode() are cached per (task class, node version),
// where a task class is a distinct TaskRequest.
// Thread-safety: none.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/rng.h"
#include "common/status.h"
#include "model/cluster_state.h"
#include "sched/framework/plugin.h"
#include "sched/framework/registry.h"

namespace estuary {

// How equal best scores are broken.
enum class TieBreak {
  // The first node in a seeded random order of the nodes: the rule of the FGD paper's published
  // runs (smallest node name, names carrying a seeded random prefix). Consolidating.
  kNodeOrder,
  // Uniformly at random among the tied nodes.
  kUniform,
};
std::string_view TieBreakName(TieBreak t);
StatusOr<TieBreak> ParseTieBreak(std::string_view name);

// A scheduling policy: score plugins with weights, the GPU selector and extra filters.
struct PolicyConfig {
  std::string name;
  std::vector<std::pair<std::string, int64_t>> scores;  // (plugin, weight); default: none
  std::string gpu_select = "best";                       // default: least free GPU that fits
  std::vector<std::string> filters;                      // default: none beyond resource fit
};

struct SessionOptions {
  PolicyConfig policy;
  TieBreak tie_break = TieBreak::kNodeOrder;  // default: the published rule
  uint64_t seed = 0;                          // drives the node order, ties and random plugins
  // Position of each node in the tie-break order (by NodeId). Default (empty): a seeded random
  // permutation of the nodes sorted by name. Nodes added later rank after all others.
  std::vector<uint32_t> node_rank;
  bool score_cache = true;  // default: on; off only to measure its effect
  // Decide from a per-task-class index ordered by (score, tie-break rank), kept current from the
  // state's change feed, instead of scanning every node. Used when it gives the scan's answer:
  // node-order tie-break and every plugin cacheable with order-keeping normalisation. Default: on.
  bool indexed = true;
};

enum class OutcomeKind {
  kPlaced,      // a node and GPUs were chosen
  kRetryable,   // no node fits now; one could after capacity frees up
  kInfeasible,  // no node of the cluster could ever hold the task, even empty
};
std::string_view OutcomeKindName(OutcomeKind k);

struct Outcome {
  OutcomeKind kind = OutcomeKind::kRetryable;
  NodeId node;
  GpuIndices gpus;
  int64_t score = 0;
  std::string reason;  // why the task does not fit (empty when placed)
  bool placed() const { return kind == OutcomeKind::kPlaced; }
};

class Session {
 public:
  static StatusOr<std::unique_ptr<Session>> Open(const ClusterState& state, const Registry& registry,
                                                 const PluginContext& ctx, SessionOptions options);

  // Decides where `task` would go now, among the nodes no reservation holds. REQUIRES: the task
  // is pending.
  Outcome Decide(TaskId task);
  // Like Decide, but only among `candidates` (e.g. the nodes of one topology domain), which may
  // include nodes held for the task's own job; scans them.
  Outcome DecideAmong(TaskId task, std::span<const NodeId> candidates);
  // Like DecideAmong with every node as candidates (the nodes held for the task's job included),
  // but a task of whole GPUs looks only at the nodes with enough wholly free GPUs (the others
  // cannot hold it; they count as lacking GPUs in the rejection reasons, as Decide's do).
  Outcome DecideHolding(TaskId task);

  // `task`'s score of `node` under the policy (its scorers' weighted sum) on the state now, as
  // Decide ranks feasible nodes; the node need not be feasible. Not cached.
  int64_t Score(const Task& task, const Node& node);

  const SessionOptions& options() const { return options_; }
  Rng& rng() { return rng_; }
  // Cache statistics (for benchmarks and docs).
  uint64_t cache_hits() const { return cache_hits_; }
  uint64_t cache_misses() const { return cache_misses_; }
  // Whether decisions come from the per-class index (see SessionOptions::indexed).
  bool indexed() const { return indexed_; }

 private:
  Session(const ClusterState& state, SessionOptions options);
  // `among` null: every node — those no reservation holds (`holding` false; through the index
  // when there is one), or also those held for the task's job (`holding`).
  Outcome DecideImpl(TaskId task, const std::span<const NodeId>* among, bool holding = false);
  uint32_t ClassOf(const TaskRequest& req);
  uint32_t Rank(NodeId n) const;
  std::string Explain(const Task& task) const;
  bool EverFits(const TaskRequest& req) const;
  // Counts why `n` failed the built-in resource fit (cold path of the filter).
  [[gnu::noinline]] void CountRejection(const TaskRequest& req, const NodeFit& n, JobId owner);
  bool PassesFilterPlugins(const Task& task, const Node& node);

  struct Scorer {
    std::unique_ptr<ScorePlugin> plugin;
    int64_t weight = 1;
    bool cacheable = true;
    // cache[class][node] = {node version, score}; version 0 = empty.
    std::vector<std::vector<std::pair<uint32_t, int64_t>>> cache;
    std::vector<int64_t> scratch;
  };

  // Per task class: a binary heap of (score, rank) entries for the feasible nodes; an entry is
  // current while its version equals the node's. Entries of changed nodes are pushed again from
  // the state's change feed; stale ones are dropped when they surface. Rebuilt from all nodes
  // when the class fell behind the feed or the heap holds over twice the node count.
  struct IndexEntry {
    int64_t score;
    uint32_t rank;
    uint32_t node;
    uint32_t version;
  };
  struct ClassIndex {
    std::vector<IndexEntry> heap;
    uint64_t cursor = 0;
    bool built = false;
  };
  // The placed outcome from the index, or nullopt when no node is feasible (the scan then
  // explains why).
  std::optional<Outcome> DecideIndexed(const Task& task, uint32_t cls);
  void IndexPush(ClassIndex& ci, const Task& task, NodeId id);
  // The built-in fit; nodes held by a reservation pass only for tasks of its `owner` (invalid:
  // for no task).
  bool FitsBuiltin(const TaskRequest& req, const NodeFit& n, JobId owner) const;

  const ClusterState& state_;
  SessionOptions options_;
  bool indexed_ = false;
  std::vector<ClassIndex> index_;
  std::vector<uint64_t> seen_;  // per node: the catch-up stamp it was last pushed in
  uint64_t stamp_ = 0;
  Rng rng_;
  std::vector<std::unique_ptr<FilterPlugin>> filters_;
  std::vector<Scorer> scorers_;
  std::unique_ptr<GpuSelectPlugin> gpu_select_;
  struct ReqHash {
    size_t operator()(const TaskRequest& r) const;
  };
  std::unordered_map<TaskRequest, uint32_t, ReqHash> classes_;
  std::vector<NodeId> feasible_;
  std::vector<int64_t> totals_;
  std::vector<uint32_t> tied_;
  // Filter rejections of the last Decide(), by reason.
  struct Rejections {
    int64_t not_ready = 0, held = 0, held_own = 0, model = 0, cpu = 0, mem = 0, gpu = 0, plugin = 0;
    std::string plugin_reason;
  } rej_;
  uint64_t cache_hits_ = 0, cache_misses_ = 0;
  JobId job_;  // the job of the task being decided (for rejection reasons)
  size_t considered_ = 0;  // nodes the last decision looked at (for its reason)
};

}  // namespace estuary
