// QueueBook: the engine's side of the multi-tenant queues (issue 20; the tree and the shares:
// quota/queues.h). It resolves a job's queue, keeps the demand of the jobs waiting in each queue,
// refreshes the queues' shares, and answers the engine's questions: may this job start within
// its queue's limit / fair share / guarantee, and which running work may a Reclaim for it take.
// What the queues hold is ClusterState's (ClusterState::queue_usage, kept by every bind).
//
// Demand: a waiting job counts its max replicas x its per-replica request in its queue (GPUs in
// total; in its model's dimension when it names one model, in each of its models' when it names
// several, in every model's when it names none; CPU; memory). A job's request is checked
// (Within) in the dimensions it surely takes: GPUs in total, its model when it names exactly one,
// CPU and memory — a job that may run on several models is held to its queue's total-GPU figures,
// not to per-model ones.
//
// Dimensions: GPUs in total are always managed (shared and checked); a GPU model, CPU or memory
// only when some queue's quota names it.
//
// Reclaim (Victims). A waiting job of leaf queue q, in a queue that reclaims (QueueSpec::reclaim,
// SharingSpec::reclaim), is owed what another queue v holds when its start keeps q and each of
// its ancestors below their common ancestor with v within their entitlements (a team may be owed
// by a sister team while its org holds more than the org's own entitlement); it may take running
// preemptible work of any priority from such queues v that hold more than their entitlement; an
// HP job not owed capacity may take lower-priority work only, from its own leaf queue or from
// such queues. From another queue v, only what v and
// each of its ancestors below the queues' common ancestor hold above their entitlements may be
// taken (budgets, in GPU milli, taken elastic surplus first), and nothing from a queue that is
// not reclaimable (QueueSpec::reclaimable) or that reclaimed within the last cooldown_s (it just
// got its capacity back) — unless the job's start keeps its leaf queue within its guarantee,
// which comes back within the grace period whoever reclaimed last. Victims come from the queue furthest above its fair share first (the
// rank: its usage over fair share, in per mille, highest first).
// Rebalancing (RebalanceVictims, SharingSpec::rebalance): the same toward weighted fair shares,
// for a job its queue's entitlement does not cover. A waiting job of leaf q is short of its fair
// share when its start keeps q and each ancestor below the common ancestor with v within their
// fair shares and q is short of its own by at least kRebalanceMinGapPct of it (what its
// Reclaims under way claim counted as held): a smaller gap evicts nothing. It may take running
// preemptible work from queues v above their fair shares, only what v and its ancestors below
// the common ancestor hold above their fair shares (budgets; elastic surplus first, then whole
// jobs, cheapest first, from the queue furthest above its fair share first), and nothing from a
// queue within its cooldown (no exception: the job is beyond its guarantee). The fair shares and
// budgets are counted in the job's GPU model when it names exactly one that the quotas name
// (only jobs of that model are then victims: a queue's total-GPU fair share counts GPUs of
// models its jobs cannot use), else in GPUs in total. No HP exception: priorities do not matter.
// In flight (SharingSpec::count_in_flight): the requests of q's jobs whose Reclaims are under way
// (Claim) count toward what q and its ancestors hold in the owed check, and the GPUs of tasks
// already being evicted from v (Leaving) count against v's budgets — so one queue's waiting jobs
// together never take more than its entitlement, nor push a victim's queue below its own.
//
// Time-based fairness (SharingSpec::usage_half_life_s > 0): each queue's GPU usage is integrated
// and decayed with that half-life; the weight a queue shares its parent's surplus with is
// weight x 2^(-U/S), U its share of its siblings' decayed usage, S its share of their weights.
// U is the decayed usage as of the last change of what some queue holds (Roll): the weights move
// only when holdings do, so the shares at a time do not depend on the cycles run before it.
// Deterministic: integer bookkeeping, doubles only in that factor (rounded to milli-weights).
// Thread-safety: none.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <tuple>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/inputs.h"
#include "model/cluster_state.h"
#include "quota/queues.h"
#include "sched/actions/preempt.h"

namespace estuary {

class QueueBook {
 public:
  QueueBook() = default;
  // Builds the tree over `state`'s GPU models (the caller gives it to `state`: Parents(), then
  // ClusterState::SetQueues or ReplaceQueues). With `intern_models` (a live cluster whose nodes have not all joined), GPU model names the
  // quotas use are added to the state's models first instead of being errors. No specs: the book
  // is off (enabled() false) and the state has no queues. Errors: QueueTree::Build's, `*line`
  // set to the field's line.
  static StatusOr<QueueBook> Create(std::vector<QueueSpec> specs, SharingSpec sharing, ClusterState& state,
                                    bool intern_models, int* line = nullptr);

  bool enabled() const { return !tree_.empty(); }
  // Each queue's parent (-1: none), for ClusterState::SetQueues / ReplaceQueues.
  std::vector<int32_t> Parents() const;
  // This book replaces `old` (the queues changed at run time): its versions continue old's, so
  // that nothing cached against old's shares is taken for this book's.
  void Succeed(const QueueBook& old);
  // This book goes on where `old` was in time (an engine rebuilt in place of another, or the
  // queues changed at run time): each queue of old's name keeps its cooldown and its decayed
  // usage (time-based fairness, as of old's last refresh).
  void Inherit(const QueueBook& old);
  // Each queue's cooldown and decayed usage (what Inherit carries), and the decayed usage's time
  // (-1: none); Restore takes them back, by queue name (names it does not have are ignored).
  std::vector<CarriedQueue> Carried() const;
  int64_t usage_at() const { return usage_at_; }
  void Restore(const std::vector<CarriedQueue>& queues, int64_t usage_at);
  const QueueTree& tree() const { return tree_; }
  // Whether quota dimension d is managed (GPUs in total always; a model, CPU or memory when some
  // queue names it).
  bool managed(size_t d) const { return d < managed_.size() && managed_[d] != 0; }
  const SharingSpec& sharing() const { return sharing_; }

  // The leaf queue a job naming `name` (with `priority`) runs in; nullopt and `why` when there is
  // no such queue, it is not a leaf, or `priority` is above the queue's or an ancestor's
  // max_priority. With the book off: -1 for an empty name, else nullopt.
  std::optional<int32_t> Resolve(const std::string& name, int32_t priority, std::string* why) const;

  // A waiting job joins (+1) or leaves (-1) its queue's demand. No-op for a job without a queue.
  void Pending(const ClusterState& state, JobId job, int sign);
  // Demand beyond the waiting jobs': `replicas` (negative: fewer) more replicas of running `job`
  // are wanted (the engine's running elastic jobs' room to grow). No-op for a job without a queue.
  void Extra(const ClusterState& state, JobId job, int64_t replicas);
  // What `job`'s queue holds changed (ClusterState::job_log): its figures are counted again at
  // the next Refresh. AllChanged: every queue's (the log overflowed).
  void Touched(const ClusterState& state, JobId job);
  void AllChanged() { all_dirty_ = true; }
  // The nodes changed (joined, failed, cordoned, ready again): capacity is counted anew.
  void CapacityChanged() { capacity_dirty_ = true; }
  // The shares now, for the waiting jobs' demand plus Extra's: computed again when what the queues
  // hold or want, or the capacity, changed. REQUIRES: every change of what a queue holds since
  // the last call was reported (Touched or AllChanged). With fixed weights (no time-based
  // fairness) and the same capacity, only the queues reported changed (Touched, Pending, Extra)
  // are counted again (UpdateShares): O(changed queues x depth x siblings), not O(queues).
  const QueueShares& Refresh(const ClusterState& state, int64_t now_s);
  // Time-based fairness: the time is now_s and what the queues hold may have changed since the last
  // call (a cycle ended). When it has, the decayed usage is rolled forward to now_s — the exact
  // integral of what each queue held, 2^(-age / half-life) weighted — so that the figures never
  // depend on how often Refresh is called between changes (a driver's extra cycles).
  void Roll(const ClusterState& state, int64_t now_s);
  // The queues whose holdings or fair shares may have changed since the last call (a superset:
  // the queues on the paths of those reported changed, and those whose fair or entitled shares
  // a Refresh changed), or `all` when any may have (the first call, a log overflow, a Refresh
  // that computed the shares afresh). REQUIRES: as Refresh's.
  struct Changes {
    bool all = true;
    std::vector<size_t> queues;  // each once, without `all`
  };
  Changes TakeChanges();
  // The request of `replicas` replicas of `job` in the dimensions its demand counts (see the
  // header comment).
  QueueUsage Demand(const ClusterState& state, JobId job, int64_t replicas) const { return Request(state, job, replicas, false); }
  // Adds Demand(state, job, replicas) to `into`, touching only the dimensions it requests.
  void AddDemand(const ClusterState& state, JobId job, int64_t replicas, QueueUsage& into) const;
  // The shares of the last Refresh.
  const QueueShares& shares() const { return shares_; }
  // The shares now computed with every weight as given and no time-based factor, from what the
  // queues hold, the waiting jobs' demand plus `more_demand` (per queue) — what fairness is
  // measured against. The capacity is the last Refresh's.
  QueueShares Reference(const ClusterState& state, const std::vector<QueueUsage>& more_demand) const;
  // Counts the shares' computations (0 with the book off).
  uint64_t version() const { return version_; }
  // Changes whenever what a Reclaim may take changes other than by a release: the shares'
  // version plus the cooldowns ended by now_s and the budget time (BudgetTime). `shares_only`:
  // only when the fair shares or entitlements change (not when only what the queues hold or want
  // does) — with Supply, what a Reclaim's victims depend on besides the cluster's releases.
  uint64_t ReclaimEpoch(int64_t now_s, bool shares_only = false) const;
  // The budgets of a Reclaim's victims (VictimFilter::take) are offered the victims by their cost
  // C as of BudgetTime(now_s), now_s rounded down to a multiple of the period
  // (SharingSpec::budget_period_s), not as of now_s:
  // C changes with the clock alone (a checkpoint sets it back to 0), and what the budgets admit
  // decides whether a Reclaim is feasible. So a refused Reclaim can become feasible with nothing
  // else changed only at those times: ReclaimEpoch changes there, and the engine names the next
  // one (NextDue) while jobs wait, so that every driver asks again at the same moment. The period
  // is the usual grace period: 300 s cost the example's victims ~40% more lost work (C up to five
  // minutes old), 60 s 1-19% (docs/fair-share.md).
  int64_t BudgetTime(int64_t now_s) const {
    const int64_t p = budget_period_s();
    const int64_t r = now_s % p;
    return now_s - (r < 0 ? r + p : r);
  }
  int64_t budget_period_s() const { return std::max<int64_t>(1, sharing_.budget_period_s); }
  // The earliest end of a queue's cooldown after now_s (a Reclaim may take from it again then),
  // if any. O(queues).
  std::optional<int64_t> NextCooldownEnd(int64_t now_s) const;
  // An upper bound on the GPUs (milli) a Reclaim for waiting `job` (`replicas` replicas) could
  // take now: what the queues it may take from (Victims) hold of its models. With ReclaimEpoch
  // and the releases on its models (ClusterState::release_seq(models)) unchanged, a Reclaim
  // found infeasible stays so while this does not grow. O(queues).
  int64_t Supply(const ClusterState& state, JobId job, int64_t replicas, int64_t now_s) const;

  enum class Bound { kLimit, kFair, kGuarantee, kEntitled };
  // Whether `replicas` replicas of `job` (its per-replica request) more would keep its queue and
  // every ancestor within `bound` (kFair and kEntitled: the last Refresh's shares; kLimit and
  // kGuarantee: the tree's) in the dimensions the job surely takes. Against a limit a queue
  // counts what its Standby replicas lend too, less what its own work borrows of it
  // (ClusterState::queue_restorable): their restore needs no room, so a limit would otherwise
  // hold only until the next restore. Such a queue is kept within its limit under every bound
  // (its fair share and entitlement count what it lends as of the last Refresh only). False, with `why` (may be
  // null): "queue 'team-a' would hold 72 of its fair share of 64 GPUs". True for a job without a
  // queue.
  bool Within(const ClusterState& state, JobId job, int64_t replicas, Bound bound, std::string* why) const;
  // As Within, with `leaf_bound` for the job's leaf queue and `bound` for its ancestors (a job a
  // queue's Reclaim evicted starts within its leaf's guarantee and its ancestors' limits).
  bool Within(const ClusterState& state, JobId job, int64_t replicas, Bound leaf_bound, Bound bound, std::string* why) const;

  // Per dimension of QueueUsage: what leaf queue `leaf` and its ancestors have room for within
  // `leaf_bound` (the leaf) and `bound` (the ancestors) — INT64_MAX where nothing bounds it (no
  // quota, or a dimension no quota names). A job has room for the least of room[d] / (its
  // one-replica Request)[d] more replicas over the dimensions it requests (as Within counts
  // them). O(depth x dimensions). Each queue's room is `floor` at least: 0, or INT64_MIN for the
  // room a queue above its bound lacks (negative: what must leave before it has any).
  QueueUsage RoomByDim(const ClusterState& state, size_t leaf, Bound leaf_bound, Bound bound, int64_t floor = 0) const;
  // RoomByDim(state, leaf, bound, bound)[kQueueGpu] alone: the room in GPUs in total (milli,
  // clamped at 0). O(depth).
  int64_t GpuRoom(const ClusterState& state, size_t leaf, Bound bound) const;
  // The same in the managed dimensions alone: room[i] for the i-th of them (managed_count()
  // entries), in a fixed order; FromManaged(room) == RoomByDim(...).
  void RoomByManagedDim(const ClusterState& state, size_t leaf, Bound leaf_bound, Bound bound, int64_t* room,
                        int64_t floor = 0) const;
  size_t managed_count() const { return managed_list_.size(); }
  // Neither queue q nor an ancestor has a limit in a managed dimension: RoomByManagedDim within
  // kLimit (leaf and ancestors) is INT64_MAX in every one. O(1).
  bool Unlimited(size_t q) const { return unlimited_[q] != 0; }
  // The dimension of QueueUsage that the i-th managed dimension is (i < managed_count()).
  size_t managed_dim(size_t i) const { return managed_list_[i].second; }
  QueueUsage FromManaged(const int64_t* room) const;
  // What queue q counts against `bound` in dimension `fixed` of QueueUsage: what it holds, plus
  // at kLimit what a restore of its Standby replicas would add (ClusterState::queue_restorable).
  static int64_t Counted(const ClusterState& state, size_t q, size_t fixed, Bound bound);
  // Whether a restore would add to what queue q holds (ClusterState::queue_restorable): then
  // its limit bounds it under any bound (the shares count it as of the last Refresh only).
  static bool Lends(const ClusterState& state, size_t q);
  // What queue q's rooms depend on besides its guarantee and limit, in the managed dimensions:
  // out[0, m) what it holds, out[m, 2m) its fair share (the last Refresh's), out[2m, 3m) what a
  // restore would add (ClusterState::queue_restorable); m = managed_count(), kFigures x m in all.
  static constexpr size_t kFigures = 3;
  void ManagedFigures(const ClusterState& state, size_t q, int64_t* out) const;
  // Per dimension of QueueUsage: what queue q alone has room for within `bound`, its Reclaims
  // under way counted as held (negative when above it; INT64_MAX where nothing bounds it).
  // Within(q alone, claims) holds for a request r iff r[d] <= room[d] wherever r[d] > 0.
  QueueUsage RoomWithClaims(const ClusterState& state, size_t q, Bound bound) const;
  // Whether `replicas` replicas of waiting `job` may be owed capacity by some queue: its queue
  // reclaims and stays within its entitlement with them (the last Refresh's shares).
  bool Owed(const ClusterState& state, JobId job, int64_t replicas) const;
  // Whether some job of leaf queue q may be owed capacity (Owed; `bound` kEntitled) or be short
  // of its fair share (RebalanceVictims; kFair): q reclaims and holds (with its Reclaims under
  // way) less than `bound` in some managed dimension. O(dimensions).
  bool MayBeBelow(const ClusterState& state, size_t q, Bound bound) const;
  // Whether leaf queue q is short of its fair share by at least kRebalanceMinGapPct of it (what
  // its Reclaims under way claim counted as held), in the dimension a rebalance for a job
  // requesting `models` counts (its model's when it names exactly one the quotas name, else all
  // GPUs): a rebalance for such a job needs it (RebalanceVictims). O(1).
  bool ShortOfFairShare(const ClusterState& state, size_t q, GpuModelSet models) const;
  // The victims a Reclaim for waiting `job` (needing `replicas` replicas) may take now (see the
  // header comment), and in `*owed` Owed(job, replicas). `*supply` (may be null): an upper bound
  // on the GPUs (milli) the victims hold — what the preemptible jobs of the queues the job may
  // take from hold of the models it may use; INT64_MAX for an HP job or one without GPUs (0: a plan has nothing to
  // evict). Uses the last Refresh's shares. `filter` false: `*owed` and `*supply` alone, and an
  // empty filter (no per-call copies of the per-queue figures: a caller that may stop at them).
  VictimFilter Victims(const ClusterState& state, JobId job, int64_t replicas, int64_t now_s, bool* owed,
                       int64_t* supply = nullptr, bool filter = true) const;
  // The victims a rebalancing Reclaim for waiting `job` (needing `replicas` replicas) may take now
  // (see the header comment), and in `*below` whether its queue is short of its fair share for it
  // (false, with no victims, when SharingSpec::rebalance is off or it is not). Uses the last
  // Refresh's shares.
  // `*supply` (may be null) and `filter`: as Victims'.
  VictimFilter RebalanceVictims(const ClusterState& state, JobId job, int64_t replicas, int64_t now_s, bool* below,
                                int64_t* supply = nullptr, bool filter = true) const;
  // An upper bound on the supply Victims (`bound` kEntitled) or RebalanceVictims (kFair)
  // reports for any waiting job below HP without a reservation, of leaf queue `leaf`, whose
  // request names `models` (any number of replicas): what the leaves above `bound` may give at
  // most, each counted as if nothing on its path held less — only the leaves below the lowest
  // ancestor of `leaf` already at or above `bound` in GPUs (in all, or of the one model the
  // request names), since a job takes only where every queue of its path below the common
  // ancestor stays within its own; every leaf when there is none. INT64_MAX when queues do not
  // reclaim (kEntitled) or rebalance (kFair). A Reclaim for such a job whose min replicas need
  // more than this plus the free GPUs no reservation holds is hopeless. The figures are kept
  // until the state, the book or the time change (as Victims').
  int64_t SupplyBound(const ClusterState& state, size_t leaf, GpuModelSet models, Bound bound, int64_t now_s) const;
  // A rebalance needs its queue short of its fair share by at least this part of it (percent).
  static constexpr int64_t kRebalanceMinGapPct = 10;
  // A Reclaim for `job` owed capacity was decided at now_s: its queue and ancestors are not
  // reclaimed from for SharingSpec::cooldown_s.
  void Reclaimed(const ClusterState& state, JobId job, int64_t now_s);
  // Waiting `job`'s Reclaim for `replicas` replicas is under way (+1) or over (-1: it started,
  // left, or its victims are gone). No-op unless SharingSpec::count_in_flight. REQUIRES: each -1
  // matches an earlier +1 with the same replicas.
  void Claim(const ClusterState& state, JobId job, int64_t replicas, int sign);
  // Bound task `task` is being evicted (+1) or no longer is (-1): its GPUs leave its queue and
  // ancestors. No-op unless SharingSpec::count_in_flight. REQUIRES: matched as Claim's.
  void Leaving(const ClusterState& state, TaskId task, int sign);

  // The engine's tasks being evicted (per TaskId; null: none known): a Reclaim's plan takes none
  // of them, so the victims' supply (Supply, Victims) leaves them out. EvictionsChanged: some
  // task's entry changed (what was worked out from them is worked out again).
  void WatchEvictions(const std::vector<char>* evicting) { evicting_ = evicting; }
  void EvictionsChanged() { ++changes_; }

  // Queue q's entry of `v` (one of shares()' vectors) in the total-GPU dimension, GPU milli.
  int64_t Gpu(const std::vector<int64_t>& v, size_t q) const { return v[q * shares_.dims + QuotaDims::kGpu]; }

 private:
  // ClusterState's index (QueueUsage) of quota dimension d.
  size_t Fixed(size_t d) const;
  // The model whose dimension fair shares count a job requesting `models` in: the one model it
  // names when a quota names it; -1 (all GPUs) otherwise.
  int32_t FairModel(GpuModelSet models) const;
  // An upper bound on the GPUs (milli) on nodes of `models` a Reclaim could take from leaf queue
  // v with `budget`: what v's preemptible jobs whose smallest victim unit fits in the budget hold
  // there. O(v's preemptible jobs' tasks).
  // Tasks being evicted already (evicting_, when set) hold nothing a plan may take, nor, with
  // `unheld_only` (a job without a reservation of its own), tasks on nodes a reservation holds.
  int64_t Takeable(const ClusterState& state, size_t v, GpuModelSet models, int64_t budget, bool unheld_only) const;
  // Victims and RebalanceVictims: `bound` kEntitled or kFair; `supply` as Victims'. Without
  // `filter`, only *owed and *supply are wanted (the filter returned is empty).
  VictimFilter VictimsUpTo(const ClusterState& state, JobId job, int64_t replicas, int64_t now_s, Bound bound,
                           bool* owed, int64_t* supply = nullptr, bool filter = true) const;
  // Queue q's figure of `bound` in quota dimension d (kNoLimit: none).
  int64_t Cap(size_t q, size_t d, Bound bound) const;
  // Whether queue q alone stays within `bound` holding `req` more (as Within); `claims`: with
  // the requests of its Reclaims under way (Claim) counted as held.
  bool QueueWithin(const ClusterState& state, const QueueUsage& req, size_t q, Bound bound, std::string* why,
                   bool claims = false) const;
  // The demand `replicas` replicas of `job` add, per fixed dimension (kQueueDims); `surely`: only
  // the dimensions the job surely takes (Within), else every model it may use (demand).
  QueueUsage Request(const ClusterState& state, JobId job, int64_t replicas, bool surely) const;

  QueueTree tree_;
  SharingSpec sharing_;
  std::vector<char> managed_;        // per quota dimension: some queue names it (else unchecked)
  std::vector<char> unlimited_;  // per queue: Unlimited
  std::vector<std::pair<size_t, size_t>> managed_list_;  // the managed dimensions d, with Fixed(d)
  // Queue q's row of Cap(q, d, bound) over the quota dimensions d.
  const int64_t* Caps(size_t q, Bound bound) const;
  std::vector<QueueUsage> pending_;  // per queue (leaves)
  std::vector<QueueUsage> extra_;    // per queue (leaves): Extra's demand
  // The leaves whose usage or demand changed since the last computation (each once), or all.
  void Dirty(int32_t leaf);
  std::vector<size_t> dirty_;
  std::vector<char> is_dirty_;
  bool all_dirty_ = true;
  // Since the last TakeChanges: queue q (alone, or with its ancestors) may have changed.
  void Changed(size_t q, bool path);
  std::vector<size_t> changed_;
  std::vector<char> is_changed_;
  bool all_changed_ = true;
  std::vector<int64_t> weight_;  // ShareWeights' with fixed weights
  const std::vector<char>* evicting_ = nullptr;
  std::vector<int64_t> capacity_;    // per quota dimension
  bool capacity_dirty_ = true;
  QueueShares shares_;
  uint64_t shares_epoch_ = UINT64_MAX;  // the state's epoch at the last computation
  uint64_t pending_version_ = 0, shares_pending_version_ = UINT64_MAX;
  uint64_t version_ = 0;
  uint64_t shares_version_ = 0;  // bumped when fair or entitled changed
  std::vector<int64_t> cooldown_until_;  // per queue
  std::vector<QueueUsage> claimed_;      // per queue (itself and its subtree): Reclaims under way
  std::vector<QueueUsage> leaving_;      // per queue (itself and its subtree): GPU milli being evicted (total, per model)
  uint64_t changes_ = 0;  // bumped by every change of claimed_, leaving_ and cooldown_until_
  std::vector<int64_t> shares_capacity_;  // the capacity shares_ were computed with (empty: none yet)
  // Per queue and quota dimension: what a restore of its Standby replicas would add
  // (ClusterState::queue_restorable), which its limit keeps back from its demand in the shares.
  // As of the last Refresh; HeldBack brings the rows of the given queues' paths up to date and
  // appends the inner queues whose rows moved to `moved`.
  std::vector<int64_t> held_back_;
  void HeldBack(const ClusterState& state, const std::vector<size_t>& leaves, std::vector<size_t>* moved);
  // VictimsUpTo's cache, per key, for the state's epoch, version_, changes_ and the time in
  // victim_stamp_ (another stamp empties it): the budgets before any take, the ranks, the queues
  // it may take from (null for an HP job outranking) and the supply (INT64_MAX: not asked).
  struct VictimKey {
    int32_t leaf, bound, prio, model;
    bool guaranteed, cacheable;  // cacheable: the path's within bits fit the key
    bool unheld_only;            // the job holds no reservation: victims on held nodes do not count
    uint64_t within_bits, models;
    bool supply;
    auto operator<=>(const VictimKey&) const = default;
  };
  struct VictimCached {
    std::shared_ptr<const std::vector<int64_t>> initial, rank;
    std::shared_ptr<const std::vector<int32_t>> from;
    int64_t supply = INT64_MAX;
  };
  mutable std::map<VictimKey, VictimCached> victim_cache_;
  // The budgets and ranks depend on the bound, the dimension and `guaranteed` only (not on the
  // job's queue): kept per (bound, model, guaranteed) under the same stamp, with the leaves whose
  // budget is positive (the only ones a job may take from).
  struct BudgetCached {
    std::shared_ptr<const std::vector<int64_t>> initial, rank;
    std::vector<int32_t> over;  // leaves with initial > 0, ascending
  };
  mutable std::map<std::tuple<int32_t, int32_t, bool>, BudgetCached> budget_cache_;
  mutable std::tuple<uint64_t, uint64_t, uint64_t, int64_t> victim_stamp_{UINT64_MAX, 0, 0, 0};
  // SupplyBound's figures per (bound, models bits), under the same stamp: per leaf above `bound`,
  // what it may give (-1: not yet asked), and per queue (the last: every leaf), the sum over the
  // leaves of its subtree (-1: not yet asked).
  struct SupplyBoundCached {
    std::vector<int64_t> give, sum;
  };
  mutable std::map<std::pair<int32_t, uint64_t>, SupplyBoundCached> supply_bound_cache_;
  // Empties the caches above when the state's epoch, version_, changes_ or the time moved on.
  void Restamp(const ClusterState& state, int64_t now_s) const;
  // VictimsUpTo's parts. The preemptor (of leaf `leaf`) is owed capacity below ancestor `top`:
  // every queue of its path below `top` is `within`.
  bool OwedBelow(const std::vector<char>& within, int32_t leaf, int top) const;
  // Victim queue v's path up to (not including) its common ancestor with the preemptor's queue
  // (`mine`: that queue and its ancestors) holds more than its entitlement everywhere (by budgets
  // `excess`): that ancestor (-1: the root), else -2.
  int PathOver(const std::vector<char>& mine, const std::vector<int64_t>& excess, int32_t v) const;
  // The budgets (per queue, what it holds above the key's bound in its dimension, less what is
  // leaving; 0 where it may not be reclaimed from now) and ranks, kept in budget_cache_.
  const BudgetCached& Budgets(const ClusterState& state, Bound bound, int32_t model, bool guaranteed,
                              int64_t now_s) const;
  // The figures of `key` (VictimCached): the queues a job not outranking anyone may take from
  // and, with key.supply, the GPUs of `models` it could take there.
  VictimCached VictimQueues(const ClusterState& state, const VictimKey& key, int64_t now_s,
                            const std::vector<char>& within, const std::vector<char>& mine, GpuModelSet models) const;
  // The filter of a preemptor of leaf `leaf` (hp_prio >= 0: an HP job of that priority, which
  // outranks lower priorities; model >= 0: budgets in that model's dimension) over `c`, with
  // budgets of its own.
  VictimFilter Filter(const ClusterState& state, const VictimCached& c, int32_t leaf, int32_t hp_prio, int32_t model,
                      std::shared_ptr<const std::vector<char>> within, std::shared_ptr<const std::vector<char>> mine) const;
  // Time-based fairness: decayed GPU usage (GPU milli x s) per queue as of usage_at_, and the GPU
  // milli each has held since (-1: not known yet, what it holds at the next Refresh or Roll).
  // Rolled forward (Decayed) only when what a queue holds changes (Roll): the same figures
  // whatever the times of the calls in between. Refresh's weights use them as of usage_at_.
  std::vector<double> decayed_;
  std::vector<int64_t> held_since_;
  int64_t usage_at_ = -1;
  // Queue q's decayed usage at now_s (>= usage_at_) from decayed_ and held_since_.
  double Decayed(size_t q, int64_t now_s) const;
  // held_since_'s unknown entries from what the queues hold now.
  void KnowHeld(const ClusterState& state);
};

}  // namespace estuary
