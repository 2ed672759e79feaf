// MigrateToFit: migration on failure (issue 5, the openb acceptance line). When an arriving
// (pending) task fits on no node, plan a small, bounded migration of running tasks that makes
// room for it on one node. A pure decision: it reads a const ClusterState and returns a
// MigrationPlan; the caller applies it (ClusterState::Unbind + Bind per move, in order, then Bind
// of the arriving task). MigrationMemo (below) lets a caller skip searches known to fail.
//
// Terms. The *host* n is the node the arriving task will go to. The plan moves a set S of tasks
// bound on n to other nodes so that, after they have left, the arriving task fits on n. A task of
// S that has no target with room may go to a node d after one task e *ejected* from d has moved
// on first (an ejection chain: e's move, then the S task's move onto d); e may itself need an
// ejection, up to options.max_chain_depth levels. All moves together (S and ejections) number at
// most options.max_moves.
//
// What may move. A task that is neither in Standby nor borrowed, whose job has no required
// topology level (it could leave its domain). Nothing else is touched.
// Where it may go (a *target*): any node other than its own and the host that is ready, not held
// by a Reservation (except one held for the moved task's own job), whose GPU model the task
// admits, with room for its CPU, memory and GPUs in the state left by the plan's earlier moves.
// Make-before-break: every move binds the task at its target while its source still holds it, so
// the target must have room at that point of the plan's order; a move may rely on room freed by an
// earlier move (the ejection right before it, in dependency order), never on a later one. No move
// targets the host.
// Hosts: ready, not held by a Reservation of another job than the arriving task's, lending no
// GPU (lent_gpus == 0), a GPU model the arriving task admits.
//
// Algorithm (deterministic; no randomness, no clock).
//   1. Bound per host. For every eligible host, from its free amounts and the amounts its movable
//      tasks hold (per GPU, CPU, memory): whether the arriving task could fit if all of them left,
//      and two lower bounds: on the GPU milli a plan must move there (shared-GPU task: the least
//      shortfall over GPUs that could hold it; k GPUs: the sum of the k least shortfalls) and on
//      the number of tasks it must move (largest first, for the CPU, memory and per-GPU
//      shortfalls). Hosts that could not fit even emptied, or need more than max_moves moves,
//      are dropped. O(bound tasks) per call.
//   2. Hosts in order of (lower bound, node id); a host is skipped once its lower bound exceeds
//      the cost of the best plan found (branch and bound), and at most options.max_hosts hosts
//      are searched.
//   3. On one host, only the movable tasks whose leaving can help are considered: all of them
//      when the host lacks CPU or memory for the arriving task, otherwise those on a GPU that
//      could hold it once emptied but cannot now (any plan with another task is dominated).
//      The subsets S of these tasks (sorted by GPU milli, then task id) of size 0..max_moves are
//      enumerated in nondecreasing total GPU milli by a best-first expansion (from a subset
//      ending with task i: add i+1, or replace i by i+1), at most options.subset_budget of them.
//      For each: the arriving task must fit on the host with S gone (GPU indices: a shared-GPU
//      task the tightest GPU that fits, lowest index on ties; a k-GPU task the lowest-indexed GPUs
//      with room); then S's tasks, largest GPU request first (then task id), are each relocated:
//      a. directly, by best fit: least milli left on the chosen GPU, then least GPU milli left on
//         the node, then least CPU left, then node id (a CPU-only task: the node with the least
//         free GPU milli, where its CPU hurts least); GPU indices as for the arriving task.
//         Targets come from a per-task cache of the best (2 max_moves + 3) targets in the call's
//         starting state, corrected for the plan's earlier moves (a full scan when every cached
//         one is taken);
//      b. otherwise, while depth and moves remain: through the first of the task's ejection pairs
//         (d, e) that works — e relocated (a, or b one level deeper) to a node other than d and
//         the host, then the task bound on d. Pairs: the options.ejection_pairs best in the
//         starting state, cheapest e first (GPU milli, CPU, memory, then d, e ids: CPU-only tasks
//         fit almost anywhere), cached per task.
//   4. The plan: least moved GPU milli (ejected tasks' included), then fewest moves, then
//      smallest host id; within a host, the first subset in enumeration order that relocates.
// If the arriving task already fits somewhere, the plan is the empty migration onto the first
// such host in step 2's order (the caller normally asks only after the policy found no node).
//
// Trade-offs. The policy's own scoring (e.g. FGD) is not used for targets: the planner is pure
// and its targets are judged on a hypothetical state the Session cannot see; best fit keeps
// partly used GPUs and nodes filling first, which keeps whole GPUs whole. The search is bounded
// (max_hosts, subset_budget, ejection_pairs, max_moves), so it may miss a plan that exists.
// What it cannot do on openb (docs/performance.md, "openb with migration on failure"): with
// tasks only arriving and nothing evicted, the GPUs holding 810m tasks keep 190m each that only
// tasks <= 190m can use, which caps GPU allocation at ~97.1% whatever moves; and near saturation
// free GPU milli and free CPU sit on different nodes, which a make-before-break move (it needs
// slack at its target) rarely fixes.
// Cost: O(bound tasks + hosts searched x subset_budget x max_moves^2 + distinct relocated tasks
// x nodes + tasks examined for ejection pairs (all bound tasks, once per relocated task that has
// no direct target)). Thread-safety: none needed (reads a const state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/cluster_state.h"

namespace estuary {

struct MigrateOptions {
  // Most tasks moved for one arriving task (ejections included), in [1, 8]. Default 2.
  int32_t max_moves = 2;
  // Most hosts searched (step 2). Default 256 (with MigrationMemo the planner runs ~50 times per
  // openb seed, so a wide search is affordable; on openb, every host: +0.01 pp for 1.8x time).
  int32_t max_hosts = 256;
  // Most subsets examined per host (step 3). Default 2048.
  int32_t subset_budget = 2048;
  // Most ejections stacked in one chain, in [0, 2] (0: every moved task goes straight to a node
  // with room). Default 0: on openb, depth 1 placed no more tasks than depth 0 at ~7x the search
  // cost (docs/performance.md); deeper chains help on clusters where a CPU- or memory-heavy task
  // blocks the only GPU slack (see migrate_test.cc).
  int32_t max_chain_depth = 0;
  // Ejection pairs (node, task to eject) tried per relocated task, >= 1. Default 8.
  int32_t ejection_pairs = 8;
};

struct MigrationMove {
  TaskId task;
  NodeId from, to;
  GpuIndices gpus;  // on `to`
  // True when this move makes room on its source for the next move of its chain (`from` is then
  // not the host).
  bool ejection = false;
};

struct MigrationPlan {
  bool feasible = false;
  // Applied in this order (each: bind at `to` while `from` still holds it, then release `from`).
  std::vector<MigrationMove> moves;
  NodeId node;        // where the arriving task goes (valid iff feasible)
  GpuIndices gpus;    // its GPU indices there
  int64_t moved_gpu_milli = 0;  // sum of the moved tasks' GPU requests (ejected ones included)
  int32_t ejections = 0;        // moves with `ejection` set
  // Work done (for benchmarks and docs).
  int64_t hosts_searched = 0;
  int64_t subsets_examined = 0;
};

class MigrateToFit {
 public:
  static constexpr int32_t kMaxMoves = 8;
  static constexpr int32_t kMaxChainDepth = 2;
  // OK, or the first bad option named: max_moves outside [1, 8], max_hosts < 1, subset_budget < 1.
  static Status Validate(const MigrateOptions& options);
  // The plan for pending task `arriving` on `state`. REQUIRES: Validate(options).ok(); the task
  // is pending.
  static MigrationPlan Plan(const ClusterState& state, TaskId arriving, const MigrateOptions& options);
};

// Remembers the requests MigrateToFit::Plan found no plan for, so that a caller asking again
// (the openb runner asks on every failed arrival) can skip the search. A remembered request r0
// answers for a request r that asks for at least as much in every dimension: the same GPU count
// and admitted models, and GPU milli, CPU and memory each >= r0's. The memory is dropped when
// state.release_seq() changes (capacity was freed: a release, an unbind — so every applied
// migration — or a node made ready); between two equal values capacity only shrank.
// Why it is sound for an exact search: if no plan exists in a state, none exists after a bind (a
// plan there, minus any move of the newly bound task, is a plan in the state before), and none
// exists for a larger request. MigrateToFit's search is bounded (max_hosts, subset_budget,
// ejection_pairs), so for it the memory is a consistent approximation: it may skip a plan that a
// later search would have found on a state it had not explored. Deterministic.
// NOTE: one memory per MigrateOptions value and per cluster; the arriving task's job is not part of
// the key, so use it only where no node is held by a reservation (as in the openb protocol).
// Thread-safety: none.
class MigrationMemo {
 public:
  // Whether some remembered request no larger than `r` had no plan at the current release_seq.
  bool KnownInfeasible(const ClusterState& state, const TaskRequest& r);
  // Remembers that `r` had no plan in `state`.
  void RecordInfeasible(const ClusterState& state, const TaskRequest& r);
  int64_t hits() const { return hits_; }

 private:
  uint64_t release_seq_ = 0;
  std::vector<TaskRequest> infeasible_;  // pairwise incomparable is not enforced; kept small
  int64_t hits_ = 0;
};

}  // namespace estuary
