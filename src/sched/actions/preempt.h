// PreemptAction: the shared what-if preemption solver of issue 4 ("Reclaim"). For one pending job
// (the preemptor) it decides, as TIDAL splits it, (a) whether the job could start if lower-
// priority work made room, and (b) which work to evict for it, losing as little as possible. It
// is a pure decision: it reads the ClusterState, never mutates it, and returns a PreemptionPlan.
// Applying a plan is the caller's: Unbind every task of `evict`, then AllocateAction::TryStart.
//
// Victims. A task may be evicted only when its job has JobSpec::preemptible set and a priority
// strictly below the preemptor's (JobSpec::priority). Work of equal or higher priority and
// non-preemptible work are never evicted, whatever it costs the preemptor. A job with a replica in
// Standby is never a victim (its GPUs are lent; see StandbyAction); evicting a borrowed task frees
// only its memory for the preemptor (its GPUs and CPU return to the lent pool).
//
// The job's demand. `need` = min_replicas rounded up to a multiple of its step (step 1 without
// options.align) replicas of its per-replica request (its first pending task's TaskRequest). A
// node's room for replicas follows AllocateAction::ReplicasFitting: whole GPUs (or shared GPU
// milli), GPU model, CPU and memory, per node; nodes down, cordoned or held by a Reservation for
// another job hold none. With a required topology level (JobSpec::topology, when
// options.topology) all `need` replicas go into one domain of that level; otherwise anywhere.
//
// (a) Feasibility. For each usable node, the replicas that would fit if every evictable task on
// it were gone; some domain of the required level (or the whole cluster) must sum to `need`.
// Otherwise the plan is infeasible, names the shortfall in `reason` and evicts nothing.
//
// (b) Victims. Victim units, in the victim order:
//   1. elastic surplus: for each running evictable job with more bound replicas b than
//      min_replicas, the chunks that shrink it from b to each smaller allowed count k (k a
//      multiple of its step — 1 without options.align — and k >= min_replicas), newest replicas
//      first (the last bound tasks in the job's task order); chunk i holds the replicas between
//      the i-th and the (i+1)-th allowed count below b and implies the chunks before it. They
//      lose no work: cost 0. Ordered by job priority ascending, then job id, then chunk.
//   2. whole jobs: every evictable running job, all its bound tasks on every node, ordered by
//      priority ascending, then cost C ascending, then runtime (now - start) ascending, then id.
//      C = GPU milli held x (now - last checkpoint) in milli-GPU x seconds (Alibaba's
//      C_t = G_t (now - last checkpoint)); last checkpoint = start + floor((now - start) /
//      checkpoint_interval_s) x checkpoint_interval_s, = start when the interval is 0; = now
//      (C = 0) for a job that checkpoints on the notice (JobSpec::checkpoint_on_notice_s > 0)
//      within the grace period (AllocateOptions::grace_s). A job
//      whose Job::started_at_s is -1 (or later than now) counts as started at `now`: C = 0,
//      runtime 0.
// The greedy, run over the candidate nodes S (the cluster, or each feasible domain in turn):
//   1. Replicas that fit on free capacity count first, at no cost: placed = sum over S of
//      the replicas fitting now.
//   2. While placed < need: for each usable node n of S (node id order), with target t_n =
//      min(room of n with all its evictable work gone, room of n now + need - placed), when
//      t_n exceeds its room now: its candidate is the shortest prefix, in victim order, of the
//      units touching n not chosen yet (an elastic chunk brings the chunks of its job before it;
//      a whole job supersedes its chunks) after which n holds t_n replicas. The candidate's gain
//      is the replicas it adds over all of S (units free other nodes too), capped at need -
//      placed; its key, smallest first: (highest priority of the whole jobs it adds — none
//      below any —, C added per replica gained, more replicas gained, runtime added, tasks
//      added, node id). The best candidate's units are chosen.
//   3. Pruning: the chosen units are visited in reverse victim order (most expensive first); a
//      unit is dropped when the others still hold `need` (an elastic chunk only while it is its
//      job's last chosen chunk).
//   With a required level, each feasible domain runs steps 1-3 on its own nodes and the cheapest
//   domain plan wins: (highest priority of the whole jobs evicted, total C, total runtime,
//   tasks evicted, domain order).
// This is a greedy, not an optimal, choice (an optimal victim set is a knapsack-like problem).
// Deterministic: every choice is ordered by ids; no hash-map order reaches the result.
//
// Cost: with N candidate nodes, T bound tasks, U victim units, k units touching a node and m
// nodes a unit touches, O(T + N) to build, then per greedy round O(N k m · G) (G: GPUs per node)
// and at most `need` rounds (each gains a replica), for each domain; pruning O(U m G).
// Thread-safety: none needed (reads a const state); the state must not change during Plan.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/cluster_state.h"
#include "sched/actions/allocate.h"

namespace estuary {

// Seconds of `job`'s work since its last checkpoint at `now` (what an eviction would lose per GPU;
// the C of a victim above, divided by its GPU milli): now - start when it does not checkpoint.
// A job not started yet, or started after now, counts as started at now (0). `grace_s`: the time
// a victim has between its notice and its stop (AllocateOptions::grace_s; -1: unknown); a job
// whose JobSpec::checkpoint_on_notice_s is > 0 and <= grace_s checkpoints on the notice and loses
// nothing: 0.
int64_t SecondsSinceCheckpoint(const Job& job, int64_t now, int64_t grace_s = -1);

// Which running jobs may be victims of a plan, when the priority rule alone does not decide (the
// queues of issue 20: a queue below its entitlement reclaims from queues above theirs, whatever
// their priorities, but only what they hold above their entitlements). Every function is
// optional; with none, the filter changes nothing.
struct VictimFilter {
  // Replaces "priority strictly below the preemptor's": a preemptible job is a candidate when
  // this says so.
  std::function<bool(const Job&)> allowed;
  // Victims of a lower rank come first in both victim orders (before priority).
  std::function<int64_t(const Job&)> rank;
  // Budgets: called for each unit the candidates offer — every elastic chunk first, in victim
  // order (GPU milli of the chunk), then each whole job (GPU milli beyond its chunks already
  // taken) in the whole jobs' victim order with C and runtime as of `budget_at_s` — it says
  // whether the unit may be evicted and, if so, counts it against the budgets it keeps. A unit refused is no victim (a job whose whole is refused keeps only the chunks
  // taken), so no plan evicts more than the budgets allow, whichever units it chooses.
  std::function<bool(const Job&, int64_t gpu_milli)> take;
  // Called before the units are offered to `take` again: a plan whose job needs one domain of a
  // level offers each domain's candidates (those with a task there) afresh, each against whole
  // budgets.
  std::function<void()> reset;
  // With `take`: the time (s) at which C and runtime order the whole jobs offered to it; -1: the
  // plan's now. What the budgets admit decides whether a plan is feasible, and C changes with the
  // clock alone (a checkpoint sets it back to 0): a caller that remembers refusals fixes this
  // time between the moments it asks again (QueueBook::BudgetTime).
  int64_t budget_at_s = -1;
  // When set: every job `allowed` admits is a preemptible job of one of these queues (a shared
  // list: filters are copied), so the candidates are found from their lists
  // (ClusterState::queue_preemptible_jobs) rather than from every task on the nodes.
  std::shared_ptr<const std::vector<int32_t>> queues;
  // `victims: volcano` only (preempt_volcano.h): the preemptor's score of a node under its
  // scheduler's policy, on the state before the plan; higher is tried first. Without it, node id
  // order.
  std::function<int64_t(const Node&)> node_score;
};

struct PreemptionPlan {
  // Step (a): idle plus reclaimable capacity could hold the job (also true, with nothing to
  // evict, when idle capacity alone could).
  bool feasible = false;
  // Step (b): the tasks to evict, ascending by id: all bound tasks of `evicted_jobs` and the
  // surplus replicas of `shrunk`. Empty when infeasible.
  std::vector<TaskId> evict;
  std::vector<JobId> evicted_jobs;                  // jobs evicted whole, ascending by id
  std::vector<std::pair<JobId, int32_t>> shrunk;    // elastic jobs shrunk, to how many replicas (by id)
  // Where the preemptor's `need` replicas would go, one entry per replica: free capacity first
  // (node id order), then freed capacity (node id order). AllocateAction may choose otherwise.
  std::vector<NodeId> nodes;
  // Sum of C over `evicted_jobs`, in milli-GPU x seconds (shrinking loses no work).
  int64_t cost = 0;
  std::string reason;  // why infeasible; empty when feasible
};

class PreemptAction {
 public:
  // The plan for pending job `preemptor` at time `now_s` (seconds, the drivers' clock), under the
  // scheduler configuration `options` (align, topology; packing is not used). Infeasible, with a
  // reason, when the job has fewer than `need` pending tasks. REQUIRES: preemptor is valid.
  // `being_evicted` (indexed by TaskId; ids past its end count as unmarked): tasks already on
  // their way out for another preemptor. A job with such a task is no victim again (its work is
  // counted as it is now), so two plans never share a victim.
  // `filter`: see VictimFilter (default: the priority rule alone).
  static PreemptionPlan Plan(const ClusterState& state, JobId preemptor, int64_t now_s,
                             const AllocateOptions& options = {}, std::span<const char> being_evicted = {},
                             const VictimFilter& filter = {});
  // True only when Plan (same state, preemptor and options) would be infeasible, found in
  // O(tasks of the preemptor + distinct priorities): its `need` replicas hold more GPU than the
  // cluster's unallocated GPUs and all preemptible work below its priority together. False says
  // nothing (only Plan decides). Lets a driver of many refused Reclaims skip the plans. (Not
  // for plans with a VictimFilter::allowed, whose victims may be of any priority.)
  static bool CannotFit(const ClusterState& state, JobId preemptor, const AllocateOptions& options = {});
};

}  // namespace estuary
