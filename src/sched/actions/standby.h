// StandbyAction: placement on lent capacity and restore of Standby replicas (SpotGPU, Alibaba
// OSDI'26). An HP online-inference replica in Standby (ClusterState::EnterStandby) keeps its
// container and memory but lends its GPUs and CPU; preemptible spot work may run there as
// borrowed tasks until the replica is restored, when the borrowers must leave.
//
// PlaceOnLent starts a job on lent capacity only — never on free capacity (that is
// AllocateAction's) — all-or-nothing like AllocateAction:
//   1. Only a preemptible job (JobSpec::preemptible) whose pending tasks all ask for whole GPUs
//      (gpu_milli == 1000, gpu_count >= 1) may borrow; otherwise it is infeasible, with a reason.
//   2. Its pending tasks, in job order and at most max_replicas of them, are bound one at a time
//      through a Statement (ClusterState::BindBorrowed); the first that finds no node stops.
//   3. granted = placed rounded down to a multiple of step (step 1 without align); when that is
//      below min_replicas (or 0) everything is rolled back and the job is not started
//      (retryable, with a reason); else the surplus is rolled back and the rest committed. A
//      reservation the job holds is then released, as AllocateAction does.
// Node choice for a replica, among state.lending_nodes() only (so that it costs nothing when few
// nodes lend) — schedulable, not held by a Reservation for another job, GPU model admitted, with
// gpu_count lent-free GPUs, its CPU within lent_cpu_free and its memory within mem_free — best
// first: (a) fewest lent-free GPUs left on the node after this replica (pack lenders tightly, so
// that fewer standby replicas have borrowers to evict when they restore); (b) a spot-only node (a
// NodeSpec label {"pool", "spot"}); (c) fewer past evictions (node_evictions[node id]; an empty
// span or an id beyond it counts 0); (d) node id. GPUs: the node's lowest-index lent-free GPUs.
// Cost: O(R L) for R replicas and L lending nodes.
//
// RestoreVictims tells which borrowed tasks must leave for a standby replica to exit Standby.
// Whole gangs are the caller's concern (it may evict the victims' whole jobs).
// Thread-safety: none; the state belongs to the caller for the duration of a call.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/cluster_state.h"
#include "sched/actions/allocate.h"

namespace estuary {

class StandbyAction {
 public:
  // Tries to start `job` on lent capacity (see above). `node_evictions` may be empty.
  // REQUIRES: job is valid.
  static JobAttempt PlaceOnLent(ClusterState& state, JobId job, std::span<const int32_t> node_evictions,
                                bool align = true);
  // The borrowed tasks that must leave so that `standby_task` may exit Standby, ascending by id:
  // every borrower on one of its GPUs; then, while the node's lent CPU left after the exit would
  // be negative (lent_cpu_free + the victims' CPU < the task's CPU), further borrowers of that
  // node, newest first (the latest Job::started_at_s, then the higher task id: not the order the
  // tasks were bound in, which a rebuilt engine does not know). Empty when
  // ClusterState::CanExitStandby holds.
  // REQUIRES: the task is in Standby.
  static std::vector<TaskId> RestoreVictims(const ClusterState& state, TaskId standby_task);
};

// Whether the node is a spot-only node (a label {"pool", "spot"}).
bool IsSpotNode(const NodeSpec& spec);

}  // namespace estuary
