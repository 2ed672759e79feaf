// AbsorbAction: TIDAL's "Absorb" — continuous elastic scale-out. Capacity that no waiting job of
// higher priority could use is handed to running elastic jobs, one step at a time, through
// AllocateAction::TryGrow (so each grant is whole steps, never above max_replicas, placed under
// the job's topology constraint and around other jobs' reservations).
//
// Which jobs grow: those of `running` (the caller's running jobs; a job listed twice counts once)
// with at least max(1, min_replicas) and fewer than max_replicas tasks bound, and a priority
// (JobSpec::priority) >= `blocking_priority`. The caller passes as `blocking_priority` the highest
// priority among pending jobs that still wait for capacity, or INT32_MIN when none waits: capacity
// a waiting higher-priority job could use is not absorbed, while a waiting job of equal priority
// does not block (it had its turn in AllocateAction first).
//
// Order: priority levels from the highest down; within a level, water-filling: repeatedly one
// step (TryGrow with max_new = step, 1 without options.align) for the job with the smallest share
// bound / max_replicas (ties: lower job id), compared exactly as bound_a * max_b < bound_b * max_a
// in 64-bit integers; a job leaves the level when it reaches max_replicas or fails to grow by one
// step (it is not tried again in this Run — absorbing only binds, so it would fail again). The
// next level starts when no job of the level can grow. Likewise a job placed anywhere (no
// topology constraint honoured, no reservation of its own) is not tried once a step of the same
// per-replica request and step size failed in this Run: the node filters depend only on the
// request and the node, and capacity only shrinks.
//
// Stability: right after a Run, a second Run over the same state grows nothing (every candidate
// is at its max or failed on a state that has only filled up since).
//
// Cost: with J candidates, S steps granted and T_j the tasks of job j: O(J log J) to sort and
// build one heap per level, then per TryGrow call (S + at most J of them) O(log J) heap work plus
// TryGrow's own cost — O(T_j) to count the job's tasks plus one Session decision per replica
// tried (index-backed for jobs placed anywhere; a decision that fails may scan the candidate
// nodes, at most once per job and request shape). No floating point; deterministic (ties by job id).
// Thread-safety: none; mutates `state` through Statements like AllocateAction.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "model/cluster_state.h"
#include "sched/actions/allocate.h"
#include "sched/framework/session.h"

namespace estuary {

struct AbsorbResult {
  std::vector<std::pair<JobId, int32_t>> grown;  // (job, replicas added in total), ascending job id
  int32_t replicas_added = 0;                     // sum over `grown`
};

class AbsorbAction {
 public:
  // Grows the eligible jobs of `running` as described above. REQUIRES: `session` was opened over
  // `state`; every id of `running` is valid. `may_grow` (optional; the queues of issue 20): asked
  // before each step whether the job may add that many replicas now; a job refused leaves the
  // Run as one that failed to grow (what it is measured against only fills up during a Run).
  static AbsorbResult Run(Session& session, ClusterState& state, std::span<const JobId> running,
                          int32_t blocking_priority, const AllocateOptions& options,
                          const std::function<bool(const Job&, int32_t replicas)>& may_grow = nullptr);
};

}  // namespace estuary
