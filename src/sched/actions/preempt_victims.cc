#include "sched/actions/preempt_victims.h"

#include <algorithm>

#include "common/check.h"

namespace estuary::preempt_internal {

VictimLedger::VictimLedger(const ClusterState& state, JobId preemptor, const TaskRequest& req, int64_t now, bool align,
                           std::span<const char> being_evicted, const VictimFilter& filter)
    : state_(state), preemptor_(preemptor), req_(req), now_(now), align_(align), being_evicted_(being_evicted),
      filter_(filter) {
  const size_t n = state.num_nodes();
  room_.resize(n);
  usable_.assign(n, 0);
  dirty_.assign(n, 1);
  eligible_.assign(state.jobs().size(), -1);
  chosen_.assign(state.jobs().size(), 0);
  taken_.assign(state.jobs().size(), 0);
  gone_.assign(state.tasks().size(), 0);
  saved_node_.assign(n, 0);
  for (const Node& node : state.nodes()) {
    const size_t i = node.id.value();
    room_[i] = FreeRoom(node);
    usable_[i] = node.Schedulable() &&
                 !(node.reservation.valid() && state.reservation(node.reservation).owner != preemptor) &&
                 (!req.NeedsGpu() || req.models.Admits(node.spec.model));
  }
}

bool VictimLedger::Candidate(TaskId t) {
  const Task& task = state_.task(t);
  return task.state == TaskState::kBound && !gone_[t.value()] && !chosen_[task.job.value()] && Eligible(task.job);
}

bool VictimLedger::Eligible(JobId j) {
  int8_t& e = eligible_[j.value()];
  if (e >= 0) return e != 0;
  e = 0;
  asked_.push_back(j);
  const Job& job = state_.job(j);
  if (j == preemptor_ || !job.spec.preemptible) return false;
  const bool allowed = filter_.allowed ? filter_.allowed(job) : job.spec.priority < state_.job(preemptor_).spec.priority;
  if (!allowed) return false;
  int64_t gpu = 0;
  for (TaskId t : job.tasks) {
    const Task& task = state_.task(t);
    if (task.state != TaskState::kBound) continue;
    // A job with a replica in Standby (its GPUs are lent) or on its way out is no victim.
    if (task.standby || (t.value() < being_evicted_.size() && being_evicted_[t.value()] != 0)) return false;
    gpu += task.req.TotalGpuMilli();
  }
  if (filter_.take && !filter_.take(job, gpu)) return false;
  e = 1;
  return true;
}

void VictimLedger::Evict(TaskId v) {
  const JobId j = state_.task(v).job;
  if (chosen_[j.value()]) return;
  const Job& job = state_.job(j);
  const int32_t step = align_ ? std::max<int32_t>(1, job.spec.step) : 1;
  const int32_t left = job.bound_tasks - taken_[j.value()] - 1;
  if (step == 1 && left >= std::max<int32_t>(1, job.spec.min_replicas)) {
    if (taken_[j.value()]++ == 0) shrunk_.push_back(j);
    gone_[v.value()] = 1;
    Free(state_.task(v));
    return;
  }
  chosen_[j.value()] = 1;
  evicted_.push_back(j);
  for (TaskId t : job.tasks) {
    const Task& task = state_.task(t);
    if (task.state == TaskState::kBound && !gone_[t.value()]) Free(task);
  }
}

void VictimLedger::Touch(size_t i) {
  if (saved_node_[i]) return;
  saved_node_[i] = 1;
  saved_.emplace_back(i, room_[i]);
}

void VictimLedger::Reset() {
  for (const auto& [i, r] : saved_) {
    room_[i] = r;
    saved_node_[i] = 0;
    dirty_[i] = 1;
  }
  saved_.clear();
  for (JobId j : shrunk_) {
    taken_[j.value()] = 0;
    for (TaskId t : state_.job(j).tasks) gone_[t.value()] = 0;
  }
  shrunk_.clear();
  for (JobId j : evicted_) chosen_[j.value()] = 0;
  evicted_.clear();
  if (filter_.take) {
    for (JobId j : asked_) eligible_[j.value()] = -1;
    asked_.clear();
  }
}

void VictimLedger::Free(const Task& task) {
  Touch(task.node.value());
  AddTask(room_[task.node.value()], task, 1);
  dirty_[task.node.value()] = 1;
}

void VictimLedger::TakeReplica(NodeId id) {
  const Node& n = state_.node(id);
  Touch(id.value());
  Room& r = room_[id.value()];
  r.cpu -= req_.cpu_milli;
  r.mem -= req_.mem_mib;
  dirty_[id.value()] = 1;
  if (!req_.NeedsGpu()) return;
  int left = req_.IsSharedGpu() ? 1 : req_.gpu_count;
  for (int g = 0; g < n.spec.gpu_count && left > 0; ++g) {
    if (req_.IsSharedGpu() ? r.gpu[g] >= req_.gpu_milli : r.gpu[g] == kMilliPerGpu) {
      r.gpu[g] -= req_.gpu_milli;
      --left;
    }
  }
  ESTUARY_CHECK(left == 0);
}

PreemptionPlan VictimLedger::Finish(PreemptionPlan out) const {
  out.feasible = true;
  out.evicted_jobs = evicted_;
  std::sort(out.evicted_jobs.begin(), out.evicted_jobs.end());
  for (JobId j : out.evicted_jobs) {
    const Job& job = state_.job(j);
    int64_t gpu = 0;
    for (TaskId t : job.tasks) {
      const Task& task = state_.task(t);
      if (task.state != TaskState::kBound) continue;
      out.evict.push_back(t);
      gpu += task.req.TotalGpuMilli();
    }
    out.cost += gpu * SecondsSinceCheckpoint(job, now_);
  }
  for (JobId j : shrunk_) {
    if (chosen_[j.value()]) continue;
    out.shrunk.emplace_back(j, state_.job(j).bound_tasks - taken_[j.value()]);
    for (TaskId t : state_.job(j).tasks) {
      if (gone_[t.value()]) out.evict.push_back(t);
    }
  }
  std::sort(out.shrunk.begin(), out.shrunk.end());
  std::sort(out.evict.begin(), out.evict.end());
  return out;
}

}  // namespace estuary::preempt_internal
