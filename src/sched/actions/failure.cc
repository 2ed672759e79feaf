#include "sched/actions/failure.h"

#include <algorithm>
#include <map>
#include <set>

#include "sched/actions/standby.h"

namespace estuary {

namespace {

int32_t BoundReplicas(const ClusterState& state, JobId j) {
  int32_t bound = 0;
  for (TaskId t : state.job(j).tasks) bound += state.task(t).state == TaskState::kBound;
  return bound;
}

}  // namespace

std::vector<FailureEffect> NodeFailureAction::NodeDown(ClusterState& state, NodeId node, bool align) {
  state.SetNodeState(node, NodeState::kDown);
  std::map<uint32_t, int32_t> before;  // job -> bound replicas before the failure touched it
  std::set<uint32_t> dirty;            // jobs that lost replicas and are not settled yet (ordered)
  // Unbinds `t`, recording its job as touched; a standby task's borrowers leave first (their
  // jobs lost a replica too).
  auto evict = [&](TaskId t) {
    auto unbind = [&](TaskId x) {
      const uint32_t j = state.task(x).job.value();
      before.try_emplace(j, BoundReplicas(state, JobId(j)));
      dirty.insert(j);
      state.Unbind(x);
    };
    if (state.task(t).standby) {
      for (TaskId v : StandbyAction::RestoreVictims(state, t)) unbind(v);
    }
    unbind(t);
  };
  const std::vector<TaskId> on_node = state.node(node).tasks;
  for (TaskId t : on_node) {
    if (state.task(t).borrowed) evict(t);
  }
  for (TaskId t : on_node) {
    if (state.task(t).state == TaskState::kBound) evict(t);
  }
  // Settle the jobs that lost replicas, lowest id first; shrinking or requeueing a job may evict
  // borrowers of its standby replicas elsewhere, which unsettles their jobs in turn.
  while (!dirty.empty()) {
    const JobId j(*dirty.begin());
    dirty.erase(dirty.begin());
    const Job& job = state.job(j);
    std::vector<TaskId> bound;
    for (TaskId t : job.tasks) {
      if (state.task(t).state == TaskState::kBound) bound.push_back(t);
    }
    const int32_t step = align ? std::max<int32_t>(1, job.spec.step) : 1;
    int32_t keep = static_cast<int32_t>(bound.size()) / step * step;
    if (keep < job.spec.min_replicas || keep == 0) keep = 0;
    for (size_t i = bound.size(); i > static_cast<size_t>(keep); --i) evict(bound[i - 1]);
    // Settled unless evicting its standby replicas' borrowers took kept replicas of its own.
    if (BoundReplicas(state, j) == keep) dirty.erase(j.value());
  }
  std::vector<FailureEffect> effects;
  for (const auto& [j, b] : before) {
    FailureEffect e;
    e.job = JobId(j);
    e.replicas_before = b;
    e.replicas_after = BoundReplicas(state, e.job);
    e.requeued = e.replicas_after == 0;
    effects.push_back(e);
  }
  return effects;
}

void NodeFailureAction::NodeUp(ClusterState& state, NodeId node) { state.SetNodeState(node, NodeState::kReady); }

}  // namespace estuary
