// CapacitySummary: what a federation member tells the fed-scheduler about its capacity — idle
// capacity and capacity reclaimable from lower-priority work, per GPU model and per topology
// domain — so that the federation can answer "could a gang of N replicas of k GPUs, with this
// model pin and topology constraint, start here now, with or without preempting work below
// priority p?" without seeing node lists (TIDAL's reclaim-aware capacity probe).
//
// The model. A node contributes, at each priority threshold p of the summary, its *available
// whole GPUs* a_p: the GPUs that are wholly free once every task that Reclaim may evict below p is
// gone — tasks of a preemptible job (JobSpec::preemptible) with a priority strictly below p, the
// victims PreemptAction may choose. Thresholds (SummaryOptions::thresholds) are fixed when the
// summary is built; index 0 is always "idle" (p = 0: nothing evictable), and a last, implicit
// index kCapacity counts the node as empty (what the member could ever hold). A node that is
// down, cordoned or held by a reservation has a_p = 0 at every threshold but kCapacity (except an
// HP headroom's node: see AddHeadroomOwner).
// For each GPU model m and threshold t the summary keeps the histogram of a_t over the nodes of
// model m — for the whole member and for every domain of every topology level — so that
//   placeable(m, t, k) = sum over c >= k of nodes[m][t][c] x floor(c / k)
// answers a query in O(models x G) per domain (O(models x domains x G) for a level) and never
// touches nodes, while a node's change moves one count per changed threshold and domain.
//
// What it leaves out (the member re-checks every dispatch and may reject): CPU and memory, shared
// (fractional) GPUs — a shared-GPU replica counts as one whole GPU —, Standby lending, and which
// replicas of an elastic victim are surplus. The reclaim cost is an estimate: the evictable GPUs'
// mean age (now - their job's start), not the member's C_t over its actual victims.
//
// Upkeep. Build() reads every node: O(nodes x tasks per node x thresholds). Refresh() follows
// the state's change feed (ClusterState::ForEachChangeSince) and recomputes only the nodes that
// changed — O(changed nodes x (tasks per node x thresholds + changed thresholds x domains per
// node)) — or every node when the feed no longer holds every change since the last refresh.
// Thread-safety: none; the owner refreshes it between scheduling cycles. Queries are const.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/cluster_state.h"

namespace estuary {

struct SummaryOptions {
  // Priority thresholds p > 0 at which reclaimable capacity is counted, ascending and distinct;
  // threshold index 0 ("idle", p = 0) is added in front. Default: none (idle only). At most
  // kMaxThresholds.
  std::vector<int32_t> thresholds;
  static constexpr size_t kMaxThresholds = 14;
};

// A gang question in the member's own terms (CapacitySummary::Resolve turns names into these).
struct GangQuery {
  int64_t replicas = 1;     // N: replicas needed at once (min replicas rounded up to the step)
  int32_t gpus = 1;         // k: GPUs per replica (a shared GPU counts as 1); 0: CPU-only
  uint64_t model_bits = 0;  // allowed GPU models, bit = the member's GpuModelId; all ones: any
  // Required topology level: all replicas in one domain of it; nullopt: anywhere.
  std::optional<std::pair<PlaneId, int>> level;
  int32_t priority = 0;     // the job's priority: reclaim may evict preemptible work below it
};

// The answer of one member to one gang query.
struct ProbeResult {
  bool ever = false;        // the member, empty, could hold the gang (else it never fits there)
  bool idle = false;        // it fits on idle capacity now
  bool reclaim = false;     // it fits once evictable work below the job's priority is gone
  // When it fits only with reclaim: the lowest threshold index at which it fits (its victims all
  // have priorities below thresholds()[victim_level]), the GPUs that must be reclaimed
  // (replicas missing from idle capacity x k) and the estimated cost, in GPU-seconds: those
  // GPUs x the mean age of the evictable GPUs below that threshold.
  int victim_level = 0;
  int64_t reclaim_gpus = 0;
  double cost_gpu_s = 0;
  // Idle whole GPUs of the allowed models, and all their GPUs.
  int64_t idle_gpus = 0;
  int64_t capacity_gpus = 0;
  // Whole GPUs of the allowed models free of any task: idle_gpus plus those on an HP headroom's
  // held nodes (what the allocation ratio counts as unallocated; for packing or spreading).
  int64_t free_gpus = 0;
};

class CapacitySummary {
 public:
  static constexpr size_t kMaxThresholds = SummaryOptions::kMaxThresholds;
  // Index of the implicit "empty node" threshold in per-threshold arrays.
  int capacity_index() const { return static_cast<int>(thresholds_.size()); }
  // Threshold priorities, index 0 = 0 (idle).
  const std::vector<int32_t>& thresholds() const { return thresholds_; }

  // Reads every node of `state`. REQUIRES: every node has at most 64 GPU models in the cluster.
  void Build(const ClusterState& state, const SummaryOptions& options);
  // Nodes held by `owner`'s reservation are an HP headroom (MemberOptions::headroom): counted as
  // available at thresholds >= kHpPriority only (as if unheld there), at none below. Call before
  // Build.
  void AddHeadroomOwner(JobId owner) { headroom_owners_.push_back(owner); }
  // Brings the summary up to date with `state` (the same cluster as Build's).
  void Refresh(const ClusterState& state);
  // Nodes recomputed by Refresh so far (for benchmarks).
  int64_t nodes_refreshed() const { return nodes_refreshed_; }

  // The member's GPU model bits for `names` (empty: any model); nullopt when it has none of them.
  std::optional<uint64_t> ResolveModels(const std::vector<std::string>& names) const;
  // The member's (plane, level) of those names; nullopt when it has no such level.
  std::optional<std::pair<PlaneId, int>> ResolveLevel(const std::string& plane, const std::string& level) const;

  // Replicas of k GPUs of the allowed models placeable at threshold index t: over the whole
  // member, or the most in any one domain of `level`.
  int64_t Placeable(const GangQuery& q, int t) const;
  // The probe of `q` at time `now_s` (for the reclaim cost's ages).
  ProbeResult Probe(const GangQuery& q, int64_t now_s) const;

  // Whole GPUs available at threshold t summed over nodes of the allowed models.
  int64_t AvailableGpus(uint64_t model_bits, int t) const;

 private:
  std::vector<JobId> headroom_owners_;
  // Node n's a_t for every threshold (capacity included) and its evictable sums per threshold.
  void NodeAvail(const ClusterState& state, const Node& n, uint8_t* avail, int64_t* evict_milli,
                 int64_t* evict_start_milli) const;
  // NodeAvail's thresholds above idle, for a node counted as available.
  void NodeEvictable(const ClusterState& state, const Node& n, uint8_t* avail, int64_t* evict_milli,
                     int64_t* evict_start_milli) const;
  // Whether n is held by the reservation of an HP headroom's owner (AddHeadroomOwner).
  bool HeldByHeadroom(const ClusterState& state, const Node& n) const;
  // Node n's whole free GPUs when it is ready and held by an HP headroom; 0 otherwise.
  uint8_t HeldFree(const ClusterState& state, const Node& n) const;
  // Adds (sign +1) or removes (-1) node n's recorded contribution.
  void Apply(NodeId id, int sign);
  size_t Slot(size_t model, size_t t) const { return (model * nt_ + t) * (g_ + 1); }
  // sum over c >= k of hist[c] x floor(c / k), for the histogram at `h`.
  int64_t PlaceableIn(const int32_t* h, size_t k) const;

  std::vector<int32_t> thresholds_;
  size_t nt_ = 0;  // thresholds incl. idle and capacity
  size_t g_ = 0;   // largest GPU count of a node
  size_t nm_ = 0;  // GPU models
  size_t stride_ = 0;  // nm_ x nt_ x (g_ + 1): one histogram set
  std::vector<std::string> model_names_;
  std::vector<std::string> plane_names_;
  std::vector<std::vector<std::string>> level_names_;
  // hist_[Slot(m, t) + c]: nodes of model m with a_t = c; dom_hist_[d x stride_ + Slot(m, t) + c]
  // the same within domain d.
  std::vector<int32_t> hist_;
  std::vector<int32_t> dom_hist_;
  std::vector<std::vector<std::vector<uint32_t>>> domains_at_;  // [plane][level] -> domain ids
  // Evictable GPU milli and sum of milli x job start, per [model][t] (reclaim ages).
  std::vector<int64_t> evict_milli_, evict_start_milli_;
  std::vector<int64_t> gpus_avail_;  // [model][t]: whole GPUs available
  std::vector<int64_t> held_free_;   // [model]: whole free GPUs on HP headroom nodes
  // Per node: model (-1: no GPUs), a_t and its evictable sums, as last applied.
  std::vector<int16_t> node_model_;
  std::vector<uint8_t> node_avail_;
  std::vector<uint8_t> node_held_free_;  // whole free GPUs when an HP headroom holds the node, else 0
  std::vector<int64_t> node_evict_milli_, node_evict_start_;
  // Node n's domains (valid ones, every plane): node_dom_[node_dom_begin_[n] .. node_dom_begin_[n + 1]).
  std::vector<uint32_t> node_dom_begin_;
  std::vector<uint32_t> node_dom_;
  uint64_t cursor_ = 0;
  std::vector<char> dirty_;
  std::vector<NodeId> dirty_list_;
  int64_t nodes_refreshed_ = 0;
};

}  // namespace estuary
