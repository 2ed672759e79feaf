#include "sched/actions/absorb.h"

#include <algorithm>
#include <map>
#include <optional>
#include <queue>

namespace estuary {

namespace {

struct Candidate {
  int32_t priority;
  int64_t bound;
  int64_t max;
  JobId job;
};

// Heap order: the top is the smallest share bound / max, then the lowest id.
struct LargerShare {
  bool operator()(const Candidate& a, const Candidate& b) const {
    const int64_t lhs = a.bound * b.max, rhs = b.bound * a.max;
    if (lhs != rhs) return lhs > rhs;
    return b.job < a.job;
  }
};

}  // namespace

AbsorbResult AbsorbAction::Run(Session& session, ClusterState& state, std::span<const JobId> running,
                               int32_t blocking_priority, const AllocateOptions& options,
                               const std::function<bool(const Job&, int32_t replicas)>& may_grow) {
  std::vector<JobId> ids(running.begin(), running.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());

  // 1. The eligible jobs, highest priority first (then id).
  std::vector<Candidate> candidates;
  for (JobId j : ids) {
    const Job& job = state.job(j);
    if (job.spec.priority < blocking_priority) continue;
    const int64_t bound = job.bound_tasks;
    if (bound == 0 || bound < job.spec.min_replicas || bound >= job.spec.max_replicas) continue;
    candidates.push_back({job.spec.priority, bound, job.spec.max_replicas, j});
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.job < b.job;
  });

  // 2. Water-filling, one priority level at a time.
  std::map<JobId, int32_t> added;
  std::vector<std::pair<TaskRequest, int32_t>> failed;  // (request, step) that could not grow
  AbsorbResult result;
  for (size_t begin = 0; begin < candidates.size();) {
    size_t end = begin;
    while (end < candidates.size() && candidates[end].priority == candidates[begin].priority) ++end;
    std::priority_queue<Candidate, std::vector<Candidate>, LargerShare> heap(
        LargerShare{}, std::vector<Candidate>(candidates.begin() + static_cast<std::ptrdiff_t>(begin),
                                              candidates.begin() + static_cast<std::ptrdiff_t>(end)));
    while (!heap.empty()) {
      Candidate c = heap.top();
      heap.pop();
      const Job& job = state.job(c.job);
      const JobSpec& spec = job.spec;
      const int32_t step = options.align ? std::max<int32_t>(1, spec.step) : 1;
      // Capacity only shrinks during a Run, so a job that places anywhere (no topology
      // constraint, no reservation of its own) cannot grow by a step of a request that already
      // failed to: it is not tried.
      const bool anywhere = !(options.topology && spec.topology.plane.valid()) && !job.reservation.valid();
      std::optional<TaskRequest> req;
      if (anywhere && job.uniform_request && !job.tasks.empty()) {
        req = state.task(job.tasks.front()).req;
        if (std::find(failed.begin(), failed.end(), std::pair{*req, step}) != failed.end()) continue;
      }
      if (may_grow && !may_grow(job, step)) continue;  // not tried again in this Run
      const int32_t grew = AllocateAction::TryGrow(session, state, c.job, options, step);
      if (grew == 0) {
        if (req) failed.emplace_back(*req, step);
        continue;  // not tried again in this Run
      }
      added[c.job] += grew;
      result.replicas_added += grew;
      c.bound += grew;
      if (c.bound < c.max) heap.push(c);
    }
    begin = end;
  }
  result.grown.assign(added.begin(), added.end());
  return result;
}

}  // namespace estuary
