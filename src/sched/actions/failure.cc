#include "sched/actions/failure.h"

#include <algorithm>
#include <map>

namespace estuary {

std::vector<FailureEffect> NodeFailureAction::NodeDown(ClusterState& state, NodeId node, bool align) {
  state.SetNodeState(node, NodeState::kDown);
  std::map<uint32_t, int32_t> lost;  // job -> replicas lost on the node (ordered: deterministic)
  const std::vector<TaskId> on_node = state.node(node).tasks;
  std::map<uint32_t, int32_t> before;
  for (TaskId t : on_node) ++lost[state.task(t).job.value()];
  for (const auto& [j, n] : lost) {
    int32_t bound = 0;
    for (TaskId t : state.job(JobId(j)).tasks) bound += state.task(t).state == TaskState::kBound;
    before[j] = bound;
  }
  for (TaskId t : on_node) state.Unbind(t);
  std::vector<FailureEffect> effects;
  for (const auto& [j, n] : lost) {
    const Job& job = state.job(JobId(j));
    FailureEffect e;
    e.job = job.id;
    e.replicas_before = before[j];
    std::vector<TaskId> bound;
    for (TaskId t : job.tasks) {
      if (state.task(t).state == TaskState::kBound) bound.push_back(t);
    }
    const int32_t step = align ? std::max<int32_t>(1, job.spec.step) : 1;
    const int32_t keep = static_cast<int32_t>(bound.size()) / step * step;
    if (keep >= job.spec.min_replicas && keep > 0) {
      for (size_t i = bound.size(); i > static_cast<size_t>(keep); --i) state.Unbind(bound[i - 1]);
      e.replicas_after = keep;
    } else {
      for (TaskId t : bound) state.Unbind(t);
      e.requeued = true;
    }
    effects.push_back(e);
  }
  return effects;
}

void NodeFailureAction::NodeUp(ClusterState& state, NodeId node) { state.SetNodeState(node, NodeState::kReady); }

}  // namespace estuary
