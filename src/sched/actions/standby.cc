#include "sched/actions/standby.h"

#include <algorithm>
#include <bit>
#include <string>
#include <tuple>

#include "common/check.h"
#include "sched/framework/statement.h"

namespace estuary {

bool IsSpotNode(const NodeSpec& spec) {
  for (const auto& [k, v] : spec.labels) {
    if (k == "pool" && v == "spot") return true;
  }
  return false;
}

namespace {

JobAttempt NotStarted(JobId job, OutcomeKind kind, std::string reason) {
  JobAttempt a;
  a.job = job;
  a.kind = kind;
  a.reason = std::move(reason);
  return a;
}

// A lending node that may take replicas of the job, with its static tie-breaks.
struct Lender {
  NodeId id;
  bool spot = false;
  int32_t evictions = 0;
};

}  // namespace

JobAttempt StandbyAction::PlaceOnLent(ClusterState& state, JobId job_id, std::span<const int32_t> node_evictions,
                                      bool align) {
  const Job& job = state.job(job_id);
  if (!job.spec.preemptible) {
    return NotStarted(job_id, OutcomeKind::kInfeasible, "only preemptible jobs may run on lent capacity");
  }
  int64_t pending = 0;
  for (TaskId t : job.tasks) {
    const Task& task = state.task(t);
    if (task.state != TaskState::kPending) continue;
    ++pending;
    if (task.req.gpu_count < 1 || task.req.gpu_milli != kMilliPerGpu) {
      return NotStarted(job_id, OutcomeKind::kInfeasible, "only whole-GPU tasks may run on lent capacity");
    }
  }
  if (pending == 0) return NotStarted(job_id, OutcomeKind::kRetryable, "no pending task");

  // Snapshot the candidates: binding changes state.lending_nodes() under our feet.
  std::vector<Lender> lenders;
  lenders.reserve(state.lending_nodes().size());
  for (NodeId id : state.lending_nodes()) {
    const Node& n = state.node(id);
    if (!n.Schedulable()) continue;
    if (n.reservation.valid() && state.reservation(n.reservation).owner != job_id) continue;
    const int32_t ev = id.value() < node_evictions.size() ? node_evictions[id.value()] : 0;
    lenders.push_back({id, IsSpotNode(n.spec), ev});
  }

  const int32_t step = align ? std::max<int32_t>(1, job.spec.step) : 1;
  Statement st(state);
  std::vector<size_t> checkpoints;  // checkpoints[i] = log position before the i-th bind
  bool any_failed = false;
  for (TaskId t : job.tasks) {
    if (state.task(t).state != TaskState::kPending) continue;
    if (static_cast<int32_t>(checkpoints.size()) >= job.spec.max_replicas) break;
    const TaskRequest& req = state.task(t).req;
    const Lender* best = nullptr;
    int best_left = 0;
    for (const Lender& l : lenders) {
      const Node& n = state.node(l.id);
      const int lent_free = std::popcount(n.lent_free);
      if (lent_free < req.gpu_count || req.cpu_milli > n.lent_cpu_free || req.mem_mib > n.mem_free ||
          !req.models.Admits(n.spec.model)) {
        continue;
      }
      const int left = lent_free - req.gpu_count;
      if (best == nullptr || std::make_tuple(left, !l.spot, l.evictions, l.id.value()) <
                                 std::make_tuple(best_left, !best->spot, best->evictions, best->id.value())) {
        best = &l;
        best_left = left;
      }
    }
    if (best == nullptr) {
      any_failed = true;
      break;
    }
    GpuIndices gpus;
    for (uint32_t bits = state.node(best->id).lent_free; gpus.size < req.gpu_count; bits &= bits - 1) {
      gpus.Push(std::countr_zero(bits));
    }
    checkpoints.push_back(st.Checkpoint());
    st.BindBorrowed(t, best->id, gpus);
  }
  const int32_t placed = static_cast<int32_t>(checkpoints.size());
  const int32_t granted = placed / step * step;
  if (granted < job.spec.min_replicas || granted == 0) {
    st.RollbackAll();
    std::string why = any_failed ? "no lending node has room for a replica (lending nodes usable: " +
                                       std::to_string(lenders.size()) + ")"
                                 : "fewer replicas than a whole step";
    if (job.spec.min_replicas > 1 || granted < placed) {
      why = std::to_string(placed) + "/" + std::to_string(job.spec.min_replicas) +
            " replicas fit on lent capacity at once; " + why;
    }
    return NotStarted(job_id, OutcomeKind::kRetryable, std::move(why));
  }
  if (granted < placed) st.Rollback(checkpoints[granted]);
  st.Commit();
  if (job.reservation.valid()) state.ReleaseReservation(job.reservation);
  JobAttempt a;
  a.job = job_id;
  a.started = true;
  a.granted = granted;
  return a;
}

std::vector<TaskId> StandbyAction::RestoreVictims(const ClusterState& state, TaskId standby_task) {
  const Task& t = state.task(standby_task);
  ESTUARY_CHECK(t.standby);
  const Node& n = state.node(t.node);
  uint32_t bits = 0;
  for (uint8_t g : t.gpus) bits |= 1u << g;
  std::vector<TaskId> victims;
  MilliCpu cpu = n.lent_cpu_free;
  for (TaskId id : n.tasks) {
    const Task& b = state.task(id);
    if (!b.borrowed) continue;
    bool on_ours = false;
    for (uint8_t g : b.gpus) on_ours |= (bits >> g & 1) != 0;
    if (on_ours) {
      victims.push_back(id);
      cpu += b.req.cpu_milli;
    }
  }
  if (cpu < t.req.cpu_milli) {
    // Newest first: the latest run start, then the higher task id — what the state knows of its
    // tasks whichever order a driver bound them in (a rebuilt engine binds in job order).
    std::vector<TaskId> rest;
    for (TaskId id : n.tasks) {
      if (state.task(id).borrowed && std::find(victims.begin(), victims.end(), id) == victims.end()) rest.push_back(id);
    }
    const auto key = [&](TaskId id) { return std::pair(state.job(state.task(id).job).started_at_s, id.value()); };
    std::sort(rest.begin(), rest.end(), [&](TaskId a, TaskId b) { return key(a) > key(b); });
    for (auto it = rest.begin(); it != rest.end() && cpu < t.req.cpu_milli; ++it) {
      victims.push_back(*it);
      cpu += state.task(*it).req.cpu_milli;
    }
  }
  std::sort(victims.begin(), victims.end());
  return victims;
}

}  // namespace estuary
