// Node failure and repair (issue 3 §4): what a failed node does to the work that ran on it.
//
// NodeDown marks the node down and evicts its tasks. Each job that lost replicas then keeps the
// largest multiple of its step not above its surviving replicas when that is at least its min —
// the surplus replicas are released at once, newest first (Align: 199 survivors of a step-8 job
// keep 192 and free 7 nodes) — and is otherwise requeued whole: all its replicas are evicted back
// to pending. A rigid job (min = max) that lost a replica is therefore always requeued.
// NodeUp makes the node schedulable again; nothing moves back by itself.
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
  // REQUIRES: node is valid. Returns one effect per job that had a task on the node, in job order.
  // With align off (a min-max scheduler) survivors are kept while at least min, whatever the step.
  static std::vector<FailureEffect> NodeDown(ClusterState& state, NodeId node, bool align = true);
  static void NodeUp(ClusterState& state, NodeId node);
};

}  // namespace estuary
