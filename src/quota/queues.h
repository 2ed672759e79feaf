// Queues (issue 20): the multi-tenant queue tree of a cluster and the shares it implies.
//
// A queue tree (QueueTree) is a forest under an implicit root: each queue names its parent (none:
// a child of the root). Jobs run in leaf queues; an inner queue (an org) holds what its leaves
// hold. Each queue has, per resource dimension (QuotaDims), a guarantee (what it gets back when
// it has demand), an optional limit (what it never exceeds; its subtree included) and an optional
// lending limit (how much of its unused guarantee others may use), a weight (its part of what is
// left once guarantees are served), the highest job priority its jobs may use, and two
// preemption switches (it reclaims; it may be reclaimed from above its entitlement).
//
// Dimensions. GPUs are counted per GPU model and in total: dimension 0 is every GPU whatever its
// model (a quota written `gpus: 64`), dimensions 1..M the cluster's models in GpuModelId order
// (`gpus: {H800: 64}`), then CPU (milli-cores) and memory (MiB). GPU amounts are milli-GPU. A
// dimension a queue's quota does not name has guarantee 0 and no limit.
//
// Shares (ComputeShares), for every queue and dimension, from the leaves' usage and pending
// demand and the cluster's capacity:
//   demand(q)   = min(limit(q), usage + pending), summed up the tree (capped at each limit);
//   fair(q)     = hierarchical weighted max-min: a parent's amount (the root's: the capacity)
//                 goes first to each child's guarantee, as far as the child has demand (or
//                 keeps it unlent: the part of its guarantee above its lending limit), scaled
//                 down in proportion when the parent's amount cannot cover them all; what is
//                 left is water-filled among the children with unmet demand in proportion to
//                 their weights (each at most its demand). Each child's amount is then shared
//                 among its own children the same way. So a team borrows its org's unused
//                 guarantee before another org's: the org's share is the team's to share first.
//   entitled(q) = what a queue may take back by Reclaim: the same computation, except that at
//                 the root nothing beyond guarantees is handed out (reclaim to guarantee), or
//                 equal to fair (reclaim to fair share, SharingSpec::reclaim_to_fair_share).
// Dimensions are shared independently of each other (per-dimension weighted max-min, not DRF:
// with GPUs the scarce resource and per-model quotas, a job's dominant dimension is nearly always
// its GPU model, and independent sharing keeps each figure explainable on its own).
// Integer arithmetic throughout: water-filling leaves a remainder of at most one unit per child,
// given by weight then queue order. Deterministic.
//
// Cost: ComputeShares is O(queues x dimensions x log(children)).
// Thread-safety: none needed (values).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/gpu_models.h"

namespace estuary {

// A quota as written: GPUs in total and per model name (milli-GPU), CPU and memory. Absent:
// not given (a guarantee of 0, no limit).
struct QuotaAmounts {
  std::optional<int64_t> gpu_milli;             // every model together (`gpus: N`)
  std::map<std::string, int64_t> model_milli;   // per model (`gpus: {MODEL: N}`)
  std::optional<int64_t> cpu_milli;
  std::optional<int64_t> memory_mib;
  bool empty() const { return !gpu_milli && model_milli.empty() && !cpu_milli && !memory_mib; }
};

// Where the fields of a queue were written (0: not written), for errors found later.
struct QueueLines {
  int queue = 0, parent = 0, guarantee = 0, limit = 0, lend_limit = 0;
};

struct QueueSpec {
  std::string name;
  std::string parent;  // empty: a child of the root
  QuotaAmounts guarantee;
  QuotaAmounts limit;
  QuotaAmounts lend_limit;
  int64_t weight = 1;               // 1..1,000,000
  int32_t max_priority = 1000;      // the highest priority its jobs may use
  bool reclaim = true;              // below its entitlement it takes back borrowed capacity
  bool reclaimable = true;          // what it holds above its entitlement may be taken back
  // The service's tenants that may submit to this queue and to the queues under it (besides
  // admins); the simulator has no tenants.
  std::vector<std::string> tenants;
  QueueLines lines;
};

// How a configuration shares queues' capacity (its `sharing:` key).
struct SharingSpec {
  // Queues may hold more than their guarantee (within their limits); off: each is capped at its
  // guarantee (a static quota).
  bool borrow = true;
  // A queue below its entitlement with pending demand takes back borrowed capacity by Reclaim.
  bool reclaim = true;
  // Idle capacity is offered in fair-share order (each queue first up to its fair share, then
  // anyone); off: in plain queue order (priority, then arrival), whoever comes first.
  bool weights = true;
  // Reclaim restores fair shares, not only guarantees.
  bool reclaim_to_fair_share = false;
  // Time-based fairness: each queue's weight for what is left beyond guarantees is scaled by
  // 2^(-U/S), U its share of the usage decayed with this half-life, S its share of the weights
  // among its siblings (Slurm's fair-share factor). 0: off (instant fairness).
  int64_t usage_half_life_s = 0;
  // No flapping: a queue is not reclaimed from within this long after it reclaimed (it just got
  // its capacity back), and a job a queue's Reclaim shrank does not grow again for as long.
  int64_t cooldown_s = 300;
  // A job a queue's Reclaim evicted whole starts again only within its queue's guarantee (which
  // no Reclaim takes back) for this long: it is not evicted twice for the same demand. 0: off.
  int64_t reborrow_s = 3600;
  // A Reclaim's budgets (what may be taken from each queue above its entitlement) rank the
  // victims by their cost as of the last multiple of this period, not as of the second
  // (QueueBook::BudgetTime): a Reclaim refused now can become feasible with nothing else changed
  // only at those times, which every driver then asks at. Longer: fewer such times, older costs.
  int64_t budget_period_s = 60;
  // A queue's demand is reclaimed for once: the jobs whose Reclaims are under way (victims in
  // their grace period) count toward what their queue holds when deciding whether another of
  // its jobs is owed capacity, and GPUs already on their way out of a queue count against what
  // may still be taken from it. Off (Kueue's per-workload check against admitted usage only):
  // every waiting job within its entitlement on its own reclaims, so a queue with many waiting
  // jobs may take far beyond its entitlement at once, and its victims' queues below theirs.
  bool count_in_flight = true;
  // Rebalancing toward weighted fair shares (with reclaim): a waiting job whose queue is short of
  // its fair share by at least a tenth of it, beyond what its entitlement restores, Reclaims
  // what queues above their fair shares hold beyond them — elastic surplus first, then whole
  // jobs, never a job a queue's Reclaim evicted within reborrow_s, never from a queue within its
  // cooldown (engine/queue_book.h, "Rebalancing"; docs/fair-share.md). Off: a queue at its
  // entitlement takes nothing back, however far below its fair share.
  bool rebalance = true;
  // Preemption within a queue (Kueue's `withinClusterQueue: LowerPriority`): a waiting job that
  // reclaims by priority (HP by default: EngineConfig::preemptor_min_priority) and whose queue has
  // no room for its min replicas — at its limit, or at its guarantee without borrowing — evicts
  // lower-priority preemptible jobs of its own leaf queue: those its placement takes, and as few
  // more as make that room (lowest priority first, then the most recently started); it starts on
  // what they and idle capacity leave free. Only where priority orders the queue, and not for a
  // job kept from borrowing (docs/fair-share.md). Off: such a job waits for its queue's work to end.
  bool within_queue = false;
};

// The dimensions of a cluster with `models` GPU models (see the header comment).
struct QuotaDims {
  size_t models = 0;
  size_t size() const { return models + 3; }
  static constexpr size_t kGpu = 0;
  size_t model(size_t m) const { return 1 + m; }  // m: a GpuModelId value
  size_t cpu() const { return models + 1; }
  size_t memory() const { return models + 2; }
};

inline constexpr int64_t kNoLimit = INT64_MAX;

// A validated queue tree over a cluster's GPU models. Queues are indexed in the order given;
// parents may come after their children.
class QueueTree {
 public:
  QueueTree() = default;
  // Checks the specs against each other and against `models` (the cluster's GPU models).
  // Errors (InvalidArgument, the message starting with the field's path): a duplicate or empty
  // name, an unknown parent, a cycle, a weight outside 1..1,000,000, an unknown GPU model, a
  // limit below the guarantee, a lending limit above the guarantee, the guarantees of a queue's
  // children summing above its own guarantee. Each message names the queue and the field
  // ("queue 'team-a': field 'limit': ..."); `*line` (when not null) is set to the line of that
  // field (QueueLines; 0 when not known).
  // A queue's total-GPU guarantee is its `gpus: N`, else the sum of its per-model guarantees;
  // its total-GPU limit is its `gpus: N`, else none.
  static StatusOr<QueueTree> Build(std::vector<QueueSpec> specs, const GpuModels& models, int* line = nullptr);

  size_t size() const { return specs_.size(); }
  bool empty() const { return specs_.empty(); }
  const QuotaDims& dims() const { return dims_; }
  const QueueSpec& spec(size_t q) const { return specs_[q]; }
  // -1: a child of the root.
  int parent(size_t q) const { return parent_[q]; }
  const std::vector<size_t>& children(size_t q) const { return children_[q]; }
  const std::vector<size_t>& roots() const { return roots_; }
  bool leaf(size_t q) const { return children_[q].empty(); }
  // Queues ordered so that every child comes before its parent.
  const std::vector<size_t>& bottom_up() const { return bottom_up_; }
  std::optional<size_t> Find(const std::string& name) const;
  // Per dimension (dims().size() entries each).
  const std::vector<int64_t>& guarantee(size_t q) const { return guarantee_[q]; }
  const std::vector<int64_t>& limit(size_t q) const { return limit_[q]; }       // kNoLimit: none
  const std::vector<int64_t>& unlent(size_t q) const { return unlent_[q]; }     // guarantee above its lending limit
  // Whether `ancestor` is q or one of q's ancestors.
  bool Within(size_t q, size_t ancestor) const;

 private:
  std::vector<QueueSpec> specs_;
  QuotaDims dims_;
  std::vector<int> parent_;
  std::vector<std::vector<size_t>> children_;
  std::vector<size_t> roots_, bottom_up_;
  std::vector<std::vector<int64_t>> guarantee_, limit_, unlent_;
  std::map<std::string, size_t> by_name_;
};

// Per queue and dimension: flattened [q * dims + d].
struct QueueShares {
  size_t dims = 0;
  std::vector<int64_t> usage, demand, fair, entitled;
  int64_t at(const std::vector<int64_t>& v, size_t q, size_t d) const { return v[q * dims + d]; }
};

// The shares of every queue (see the header comment). `capacity`: per dimension, what the
// cluster has (schedulable nodes). `leaf_usage` / `leaf_pending`: per queue and dimension
// (flattened), what its jobs hold and what its waiting jobs ask for; inner queues' entries are
// ignored (they are summed from their leaves). `milli_weight` (per queue; empty: each queue's
// weight x 1000): the weights the surplus is shared by (time-based fairness scales them).
// `weights` false: every weight counts alike.
// `previous` (may be null): shares this function computed from the same tree, `milli_weight`,
// `weights` and `reclaim_to_fair_share` with capacity `previous_capacity`. The result is the
// same; only the queues whose amount or whose children's demand changed are shared out again
// (the others' shares are copied), so that a refresh after a small change costs O(queues x
// dimensions) plus the splits that changed.
// `held_back` (may be null: none): per queue and dimension (n x dims), what its limit keeps for
// work that comes back without asking (a restore of its Standby replicas): its demand is capped
// at its limit less that (at 0 at least). `previous` must have been computed with the same.
QueueShares ComputeShares(const QueueTree& tree, const std::vector<int64_t>& capacity, const std::vector<int64_t>& leaf_usage,
                          const std::vector<int64_t>& leaf_pending, const std::vector<int64_t>& milli_weight,
                          bool weights, bool reclaim_to_fair_share, const QueueShares* previous = nullptr,
                          const std::vector<int64_t>* previous_capacity = nullptr,
                          const std::vector<int64_t>* held_back = nullptr);

// The weights ComputeShares shares surpluses by, per queue (milli): 1000 each without `weights`,
// else `milli_weight`'s (at least 1), or each queue's weight x 1000 when it is empty.
std::vector<int64_t> ShareWeights(const QueueTree& tree, const std::vector<int64_t>& milli_weight, bool weights);

// Updates `s` in place — shares ComputeShares gave for `tree` with `capacity` and the weights
// `weight` (ShareWeights') — after the leaves in `leaves` (distinct) changed: rows[i * s.dims + d]
// is leaves[i]'s new usage (`usage_rows`) and pending demand (`pending_rows`) in dimension d. The
// result is exactly what ComputeShares gives for the new figures: only the changed leaves' paths
// are summed again, and only the splits whose amount or whose children's demand changed are made
// again — O(leaves x depth x (siblings + dimensions)) plus those splits, not O(queues); a split
// is not made again when only demands changed that leave it as it was (a queue whose part was
// below its demand before and after, with the same guaranteed part). Returns whether any fair or
// entitled figure changed; `changed_queues` (if given) gets the queues whose fair or entitled
// figures changed appended.
// `held_back` (may be null): as ComputeShares', as it is now (all queues); `held_back_moved`
// (may be null): the inner queues whose rows of it changed since `s` was made (a changed leaf's
// row is read with its other figures).
bool UpdateShares(const QueueTree& tree, const std::vector<int64_t>& capacity, const std::vector<size_t>& leaves,
                  const std::vector<int64_t>& usage_rows, const std::vector<int64_t>& pending_rows,
                  const std::vector<int64_t>& weight, bool reclaim_to_fair_share, QueueShares& s,
                  std::vector<size_t>* changed_queues = nullptr, const std::vector<int64_t>* held_back = nullptr,
                  const std::vector<size_t>* held_back_moved = nullptr);

// Water-filling: shares `amount` among claimants with caps `cap` (>= 0) in proportion to
// `weight` (> 0), each at most its cap; returns each one's part. The parts sum to
// min(amount, sum of caps). Units that proportion leaves over go one each to the claimants with
// room, by weight (larger first) then index. Exact (128-bit products).
std::vector<int64_t> WaterFill(int64_t amount, const std::vector<int64_t>& cap, const std::vector<int64_t>& weight);

}  // namespace estuary
