// DefragAction: the IPC planner of issue 5 (Alibaba's Iterative Partitioned Consolidation). It
// plans migrations of running tasks so that whole GPU nodes become free again. It is a pure
// decision: it reads a const ClusterState, never mutates it, and returns a DefragPlan. Executing
// the plan (make-before-break, reservations, budgets) is the executor's (issue 5, item 3).
//
// Terms. A *whole free node* has GPUs, all of them wholly free (gpu_free == 1000 each) — the
// ClusterState's DomainFree::free_nodes. A node *with slack* has GPUs and is neither whole free
// nor fully allocated (some but not all GPU milli free). To *vacate* a node is to move every task
// bound on it elsewhere.
//
// What may move. A task is *pinned* (never moved) when it is locked (`locked[task id] != 0`), in
// Standby or borrowed, or sits on a node that is down, cordoned or held by a Reservation; a task
// of a job whose TopologyConstraint has a required level moves only within its current domain of
// that level (pinned when its node is not in the plane). A node is a *candidate* for vacating
// when it is ready, not held, has GPUs, is not whole free, lends no GPU (lent_gpus == 0) and none
// of its tasks is pinned.
// Where a task may go (a *destination*): another node of the same partition that is ready, not
// held by a Reservation of another job than the task's, neither being vacated nor vacated
// earlier in this plan, whose GPU model the task's TaskRequest::models admits, inside the task's
// required domain if any, with room for its CPU, memory and GPUs (a shared-GPU task, gpu_milli <
// 1000, on one GPU with that much free; a whole-GPU task on wholly free GPUs), and not whole free:
// no task goes to a whole free node (that would only trade one whole free node for another), so
// every vacated node is exactly one whole free node gained.
//
// Algorithm.
//   1. Partitions. Random (options.partition_nodes > 0, no align plane): the node ids shuffled
//      with Rng(options.seed) and cut into groups of partition_nodes (a last group smaller than
//      half of that joins the one before); 0: one partition of all nodes. Aligned
//      (options.align_plane valid): one partition per domain of (align_plane, align_level), in
//      domain order, plus one of the nodes outside the plane. Every node is in exactly one
//      partition, and tasks move only inside their partition, so partitions are independent.
//   2. Each partition is searched on its own working copy of its nodes' free capacity, by
//      `threads` std::threads taking partitions in turn; the per-partition results are merged
//      in partition order, so the plan does not depend on the thread count.
//   3. Rounds (at most max_rounds; a partition stops after a round that vacates nothing).
//      Candidates in order: fewest tasks first, then least used GPU milli, then node id
//      (kWholeFreeDomains: first the domains of (objective_plane, objective_level) with the most
//      free GPU milli in the partition at the start of the round — greedy aggregation;
//      kPlaceableShape: first the most copies of the shape the node would gain if it were empty,
//      nodes that would gain none left out). A node that received a task in this round is skipped
//      until the next round.
//   4. Vacating a candidate: its tasks, largest GPU request first (then task id), are placed one
//      by one (each is one *chain*):
//      a. direct: the best-fit destination — least GPU milli left free after the move (for the
//         domain objective: first the destination domain with least free GPU milli; for the shape
//         objective: first the fewest copies of the shape the destination loses), then least
//         CPU left, then node id; GPU indices: a whole-GPU task takes the lowest-indexed wholly
//         free GPUs, a shared-GPU task the GPU with the least free milli that fits (lowest index);
//      b. otherwise, when chain depth remains (max_chain_depth ejections deep): an ejection —
//         a destination d and one of its tasks e, movable, not moved in this round and asking
//         for strictly less GPU milli than the task (in the variants that allow it, see 5, also
//         a task asking for as much or more, where the task's GPUs already fit on d: under CPU
//         or memory pressure a larger task may be the one to leave), such that the task fits on
//         d once e has left; e is then placed (steps a-b, one level deeper, never onto d or a
//         node already in the chain), and the task moves onto d. The pairs (d, e) are tried in
//         best-fit order (as in a), at most kEjectBranch of them per level.
//      When every task of the candidate is placed (move_cpu_only_tasks false: every GPU task),
//      the node is vacated (kPlaceableShape: only when the partition's copies of the shape
//      strictly grew); otherwise all tentative moves of the candidate are rolled back and the
//      node stays exactly as it was. A candidate whose GPU tasks use more GPU milli than the
//      nodes that could take any of them have free in all (destinations' rules, capacity summed)
//      cannot be vacated and is refused before any search: the same outcome, without spending
//      its budget — on a nearly full cluster, most full candidates. A search budget
//      (AttemptBudget: kAttemptBudget node examinations per candidate for each whole 500 nodes
//      of its partition, at least once) bounds the work; a candidate exceeding it fails
//      (deterministically — the budget counts work, not time).
//   5. Variants (options.variants, default 4 — at least options.small_partition_variants, default
//      32, for a partition of at most options.small_partition_nodes nodes, default 64;
//      kWholeFreeDomains: 1): each partition is searched
//      that many times from its start, each time with another rule set, and the best result is
//      kept (most whole free nodes — kPlaceableShape: most copies of the shape —, then fewest
//      moves, then the lowest variant). Variant 0 is the rule set of steps 3-4; 1 orders
//      candidates by least used GPU milli first; 2 and 3 are 0 and 1 with destinations that
//      cannot be vacated themselves (a pinned task) preferred and larger ejections (4.b); 4 and
//      5 order candidates by least used CPU and pick destinations by least CPU left first (5
//      also prefers such destinations), larger ejections; from 6 on the candidate order is seeded
//      random (Rng of seed, variant, round). More variants never give fewer whole free nodes
//      (kPlaceableShape: copies) than variant 0 alone.
//
// The plan is executable move by move in order from the current state: within a chain the
// ejected tasks move first (deepest first), then the task that needed their room. A move's
// `after` lists the earlier moves out of its target node (capacity it may rely on) and the earlier
// move of the same task, if any.
//
// Objectives: kWholeFreeNodes (default), kWholeFreeDomains and kPlaceableShape as described.
// kPlaceableShape counts *copies of the shape*: over the ready nodes not held by a Reservation,
// of a GPU model shape.models admits, how many tasks of `shape` fit at once on each node's free
// capacity (a whole-GPU shape: wholly free GPUs / shape.gpu_count; a shared-GPU shape: the sum over
// GPUs of free milli / shape.gpu_milli; either bounded by free CPU / shape.cpu_milli and free
// memory / shape.mem_mib when those are > 0). It vacates whole nodes only (no partial
// consolidation); every vacate it keeps raises the count, so placeable_after > placeable_before
// whenever the plan has moves. The no-whole-free-destination rule holds for every objective.
// Cost: per candidate, one direct search is O(partition nodes); an ejection level multiplies by at
// most kEjectBranch; bounded by kAttemptBudget; times the variants. Memory: O(nodes + tasks).
// Thread-safety: Plan reads `state` from several threads; the state must not change during Plan.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "model/cluster_state.h"

namespace estuary {

struct DefragOptions {
  // Nodes per random partition (seeded by `seed`); 0: one partition of all nodes. Default 500.
  int32_t partition_nodes = 500;
  // Aligned partitions: one per domain of (align_plane, align_level) when align_plane is valid
  // (partition_nodes is then ignored). Default: invalid (random partitions).
  PlaneId align_plane;
  int align_level = -1;
  // Most ejections stacked in one chain (0: direct moves only). Default 3.
  int32_t max_chain_depth = 3;
  // Most rounds; a partition stops after a round that vacates nothing. Default 5.
  int32_t max_rounds = 5;
  uint64_t seed = 1;  // of the random partitions. Default 1.
  // Partitions searched in parallel; the plan is the same for any value. Default 1.
  int32_t threads = 1;
  // Search orders tried per partition (step 3 of the algorithm); each runs every round from the
  // partition's start, and the best result is kept. 1..64. Default 4. kWholeFreeDomains uses 1.
  int32_t variants = 4;
  // A partition of at most small_partition_nodes nodes is searched with at least
  // small_partition_variants variants (when variants > 1): cheap there, and a small partition is
  // where one more whole free node matters most. 0..64; 0: off. Defaults 64 nodes, 32 variants.
  int32_t small_partition_nodes = 64;
  int32_t small_partition_variants = 32;
  // Whether vacating a node moves its CPU-only tasks too. Default true: a vacated node ends empty.
  // false: CPU-only tasks stay where they are (a whole free node may run CPU-only work — the
  // exact reference's model, src/sched/exact/defrag_milp.h), a pinned CPU-only task does not keep
  // its node from being vacated, and a vacated node may still hold CPU-only tasks.
  bool move_cpu_only_tasks = true;
  enum class Objective { kWholeFreeNodes, kWholeFreeDomains, kPlaceableShape };
  Objective objective = Objective::kWholeFreeNodes;
  // kWholeFreeDomains: the domains to aggregate (plane, level). Default: invalid.
  PlaneId objective_plane;
  int objective_level = -1;
  // Evacuation (a drain by migration): when not empty, only these nodes (ascending ids) are
  // vacated — cordoned ones too — and every other ready node may receive their tasks, whole free
  // ones included (a drain gains no whole free node, it empties the listed ones); one partition of
  // all nodes (partition_nodes and align_plane are ignored); objective kWholeFreeNodes only. A
  // listed node is vacated whole or not at all, as any candidate. Default: empty.
  std::vector<NodeId> evacuate;
  // kPlaceableShape: the shape to make room for — NeedsGpu(), 1..kMaxGpusPerNode GPUs, gpu_milli
  // 1..1000 (1000 with several GPUs), CPU and memory >= 0 (0: not counted). Default: none.
  TaskRequest shape;
};

struct DefragMove {
  TaskId task;
  NodeId from, to;
  GpuIndices gpus;   // on `to`
  int32_t chain = -1;  // the chain it belongs to (chains are numbered 0.. in plan order)
  std::vector<size_t> after;  // indices of earlier moves that must complete first (ascending)
};

struct DefragPlan {
  // Ordered: executable one by one in this order; a chain's moves are contiguous, in
  // dependency order (ejected tasks first).
  std::vector<DefragMove> moves;
  std::vector<NodeId> vacated;  // ascending by id
  int64_t whole_free_before = 0, whole_free_after = 0;    // whole free nodes, whole cluster
  int64_t slack_before = 0, slack_after = 0;              // nodes with slack, whole cluster
  int32_t rounds = 0;        // most rounds any partition ran (including the last, fruitless one)
  int32_t partitions = 0;
  int64_t nodes_tried = 0;   // vacate attempts, summed over the variants
  int32_t chains = 0;        // chains in the plan
  int32_t ejections = 0;     // moves that made room for another (chain depth >= 1)
  // kPlaceableShape: copies of options.shape that fit, whole cluster, before and after the plan
  // (see "Objectives" above). 0 for the other objectives.
  int64_t placeable_before = 0, placeable_after = 0;
};

class DefragAction {
 public:
  // Ejection pairs (d, e) tried per chain level, and node examinations allowed per candidate for
  // each whole kBudgetNodes nodes of its partition (at least once).
  static constexpr int kEjectBranch = 8;
  static constexpr int64_t kAttemptBudget = 20000;
  static constexpr int64_t kBudgetNodes = 500;
  // The node examinations allowed per candidate in a partition of `nodes` nodes: kAttemptBudget
  // for each whole kBudgetNodes nodes, at least once — so that a candidate's tasks get about as
  // many destination searches in a partition of all nodes (an evacuation's; partition_nodes 0) as
  // in one of the default size, which keeps its budget (a random partition has fewer than 750
  // nodes). Before, an evacuation of a node with two tasks on 19,426 nodes failed for the budget.
  static constexpr int64_t AttemptBudget(size_t nodes) {
    return kAttemptBudget * std::max<int64_t>(1, static_cast<int64_t>(nodes) / kBudgetNodes);
  }

  // OK, or the first bad option named: partition_nodes < 0 or == 1, max_chain_depth < 0,
  // max_rounds < 0, threads < 1, variants outside 1..64, an align level outside the plane,
  // kWholeFreeDomains without a valid plane and level, kPlaceableShape with a bad shape (see
  // DefragOptions::shape).
  static Status Validate(const ClusterState& state, const DefragOptions& options);
  // The plan for `state`. `locked` is indexed by TaskId value (shorter or empty: the rest are not
  // locked). REQUIRES: Validate(state, options).ok().
  static DefragPlan Plan(const ClusterState& state, std::span<const char> locked, const DefragOptions& options);
};

}  // namespace estuary
