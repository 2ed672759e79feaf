#include "sched/actions/allocate.h"

#include <algorithm>

namespace estuary {

JobAttempt AllocateAction::TryStart(Session& session, ClusterState& state, JobId job_id) {
  const Job& job = state.job(job_id);
  JobAttempt a;
  a.job = job_id;
  Statement st(state);
  std::vector<size_t> checkpoints;  // checkpoints[i] = log position before the i-th bind
  Outcome failed;
  bool any_failed = false;
  for (TaskId t : job.tasks) {
    if (state.task(t).state != TaskState::kPending) continue;
    if (static_cast<int32_t>(checkpoints.size()) >= job.spec.max_replicas) break;
    Outcome o = session.Decide(t);
    if (!o.placed()) {
      failed = std::move(o);
      any_failed = true;
      break;
    }
    checkpoints.push_back(st.Checkpoint());
    st.Bind(t, o.node, o.gpus);
  }
  const int32_t placed = static_cast<int32_t>(checkpoints.size());
  const int32_t step = std::max<int32_t>(1, job.spec.step);
  const int32_t granted = placed / step * step;
  if (granted < job.spec.min_replicas || granted == 0) {
    st.RollbackAll();
    a.kind = any_failed ? failed.kind : OutcomeKind::kRetryable;
    a.reason = any_failed ? failed.reason : "no pending task";
    if (job.spec.min_replicas > 1) {
      a.reason = std::to_string(placed) + "/" + std::to_string(job.spec.min_replicas) +
                 " replicas fit at once; " + a.reason;
    }
    return a;
  }
  if (granted < placed) st.Rollback(checkpoints[granted]);
  st.Commit();
  a.started = true;
  a.granted = granted;
  return a;
}

std::vector<JobAttempt> AllocateAction::Run(Session& session, ClusterState& state, std::span<const JobId> queue) {
  std::vector<JobAttempt> out;
  out.reserve(queue.size());
  for (JobId j : queue) out.push_back(TryStart(session, state, j));
  return out;
}

}  // namespace estuary
