// Node failure and repair (issue 3 §4): what a failed node does to the work that ran on it.
//
// NodeDown marks the node down and evicts its tasks. Each job that lost replicas then keeps the
// largest multiple of its step not above its surviving replicas when that is at least its min —
// the surplus replicas are released at once, newest first (Align: 199 survivors of a step-8 job
// keep 192 and free 7 nodes) — and is otherwise requeued whole: all its replicas are evicted back
// to pending. A rigid job (min = max) that lost a replica is therefore always requeued.
// NodeUp makes the node schedulable again; nothing moves back by itself.
//
// Standby (ClusterState::EnterStandby): the borrowed tasks on the failed node are evicted first,
// then the other tasks; a standby task is evicted like any other (it leaves Standby). Whenever a
// standby replica is evicted — on the failed node or, when its job shrinks or is requeued, on
// another node — its StandbyAction::RestoreVictims (the borrowers on its GPUs, and on its node's
// lent CPU) are evicted just before it, and their jobs shrink or are requeued by the same rule.
// This repeats, lowest job id first, until every job that lost a replica is settled.
#pragma once

#include <vector>

#include "model/cluster_state.h"

namespace estuary {

struct FailureEffect {
  JobId job;
  int32_t replicas_before = 0;  // bound replicas before the failure
  int32_t replicas_after = 0;   // bound replicas after shrinking (0 when requeued)
  bool requeued = false;
};

class NodeFailureAction {
 public:
  // REQUIRES: node is valid. Returns one effect per job that lost a replica (it had a task on the
  // node, or a borrowed task evicted for a standby replica that left), in job order.
  // With align off (a min-max scheduler) survivors are kept while at least min, whatever the step.
  static std::vector<FailureEffect> NodeDown(ClusterState& state, NodeId node, bool align = true);
  static void NodeUp(ClusterState& state, NodeId node);
};

}  // namespace estuary
