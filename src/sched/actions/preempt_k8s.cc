#include "sched/actions/preempt_k8s.h"

#include <algorithm>
#include <climits>
#include <string>
#include <tuple>
#include <vector>

#include "common/check.h"
#include "sched/actions/preempt_room.h"

namespace estuary {
namespace {

using preempt_internal::AddTask;
using preempt_internal::Fits;
using preempt_internal::FreeRoom;
using preempt_internal::Room;

// A node's answer to SelectVictimsOnNode, with pickOneNodeForPreemption's criteria.
struct Candidate {
  bool ok = false;  // the replica fits once the victims are gone
  std::vector<TaskId> victims;  // most important first
  int32_t max_priority = 0;     // of the victims
  int64_t priority_sum = 0;     // sum of (priority + 2^31)
  int64_t top_start = 0;        // earliest start among the victims of max_priority
};

// (smaller is better): pickOneNodeForPreemption's criteria 2-5, then node id (criterion 6).
auto Key(const Candidate& c, uint32_t node) {
  return std::make_tuple(c.max_priority, c.priority_sum, c.victims.size(), -c.top_start, node);
}

// Takes one replica of `req` out of room `r` of node `n`: the first wholly free GPUs (whole-GPU
// replicas) or the first GPU with room (shared), its CPU and memory. REQUIRES: Fits(n, r, req) >= 1.
void TakeReplica(const Node& n, Room& r, const TaskRequest& req) {
  r.cpu -= req.cpu_milli;
  r.mem -= req.mem_mib;
  if (!req.NeedsGpu()) return;
  int left = req.IsSharedGpu() ? 1 : req.gpu_count;
  for (int g = 0; g < n.spec.gpu_count && left > 0; ++g) {
    if (req.IsSharedGpu() ? r.gpu[g] >= req.gpu_milli : r.gpu[g] == kMilliPerGpu) {
      r.gpu[g] -= req.gpu_milli;
      --left;
    }
  }
  ESTUARY_CHECK(left == 0);
}

class KubeSolver {
 public:
  KubeSolver(const ClusterState& state, JobId preemptor, const TaskRequest& req, int64_t now, bool align,
             std::span<const char> being_evicted, const VictimFilter& filter)
      : state_(state), preemptor_(preemptor), req_(req), now_(now), align_(align), being_evicted_(being_evicted),
        filter_(filter) {
    const size_t n = state.num_nodes();
    room_.resize(n);
    usable_.assign(n, 0);
    dirty_.assign(n, 1);
    cand_.resize(n);
    eligible_.assign(state.jobs().size(), -1);
    chosen_.assign(state.jobs().size(), 0);
    taken_.assign(state.jobs().size(), 0);
    gone_.assign(state.tasks().size(), 0);
    for (const Node& node : state.nodes()) {
      const size_t i = node.id.value();
      room_[i] = FreeRoom(node);
      usable_[i] = node.Schedulable() &&
                   !(node.reservation.valid() && state.reservation(node.reservation).owner != preemptor) &&
                   (!req.NeedsGpu() || req.models.Admits(node.spec.model));
    }
  }

  // Places `need` replicas one by one (steps 1-4 of the header); false when one finds no node.
  bool Run(int64_t need, PreemptionPlan& out) {
    for (int64_t placed = 0; placed < need; ++placed) {
      if (PlaceFree(out)) continue;
      Refresh();
      int64_t best = -1;
      for (size_t i = 0; i < cand_.size(); ++i) {
        if (!cand_[i].ok) continue;
        if (best < 0 || Key(cand_[i], static_cast<uint32_t>(i)) < Key(cand_[best], static_cast<uint32_t>(best))) {
          best = static_cast<int64_t>(i);
        }
      }
      if (best < 0) {
        out.reason = "kube's preemption finds no node for replica " + std::to_string(placed + 1) + " of " +
                     std::to_string(need) + ", even evicting the lower-priority preemptible work of any one node";
        return false;
      }
      const std::vector<TaskId> victims = cand_[best].victims;
      for (TaskId t : victims) Evict(t);
      const Node& node = state_.node(NodeId(static_cast<uint32_t>(best)));
      ESTUARY_CHECK(Fits(node, room_[best], req_) >= 1);
      TakeReplica(node, room_[best], req_);
      dirty_[best] = 1;
      out.nodes.push_back(node.id);
    }
    return true;
  }

  const std::vector<JobId>& evicted() const { return evicted_; }
  // Jobs that lose only some replicas, with the replicas they keep, and those replicas' tasks.
  std::vector<std::pair<JobId, int32_t>> Shrunk() const {
    std::vector<std::pair<JobId, int32_t>> out;
    for (JobId j : shrunk_) {
      if (!chosen_[j.value()]) out.emplace_back(j, state_.job(j).bound_tasks - taken_[j.value()]);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  std::vector<TaskId> ShrunkTasks() const {
    std::vector<TaskId> out;
    for (JobId j : shrunk_) {
      if (chosen_[j.value()]) continue;
      for (TaskId t : state_.job(j).tasks) {
        if (gone_[t.value()]) out.push_back(t);
      }
    }
    return out;
  }

 private:
  // Step 1: the lowest-id usable node where a replica fits without preemption.
  bool PlaceFree(PreemptionPlan& out) {
    for (const Node& node : state_.nodes()) {
      const size_t i = node.id.value();
      if (!usable_[i] || Fits(node, room_[i], req_) < 1) continue;
      TakeReplica(node, room_[i], req_);
      dirty_[i] = 1;
      out.nodes.push_back(node.id);
      return true;
    }
    return false;
  }

  // May tasks of job `j` be victims? Decided (and budgeted) once per job.
  bool Eligible(JobId j) {
    int8_t& e = eligible_[j.value()];
    if (e >= 0) return e != 0;
    e = 0;
    const Job& job = state_.job(j);
    if (j == preemptor_ || !job.spec.preemptible) return false;
    const bool allowed =
        filter_.allowed ? filter_.allowed(job) : job.spec.priority < state_.job(preemptor_).spec.priority;
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

  // Step 2 for every node whose room or candidates changed since it was last evaluated.
  void Refresh() {
    for (const Node& node : state_.nodes()) {
      const size_t i = node.id.value();
      if (!dirty_[i]) continue;
      dirty_[i] = 0;
      Candidate& c = cand_[i];
      c = Candidate{};
      if (!usable_[i]) continue;
      std::vector<TaskId> pot;
      for (TaskId t : node.tasks) {
        const Task& task = state_.task(t);
        if (task.state == TaskState::kBound && !gone_[t.value()] && !chosen_[task.job.value()] && Eligible(task.job)) {
          pot.push_back(t);
        }
      }
      if (pot.empty()) continue;
      Room r = room_[i];
      for (TaskId t : pot) AddTask(r, state_.task(t), 1);
      if (Fits(node, r, req_) < 1) continue;
      // Most important first: higher priority, then earlier start (util.MoreImportantPod).
      std::sort(pot.begin(), pot.end(), [&](TaskId a, TaskId b) {
        const Job& ja = state_.job(state_.task(a).job);
        const Job& jb = state_.job(state_.task(b).job);
        return std::make_tuple(-ja.spec.priority, Start(ja), a.value()) <
               std::make_tuple(-jb.spec.priority, Start(jb), b.value());
      });
      for (TaskId t : pot) {
        AddTask(r, state_.task(t), -1);  // reprieve it ...
        if (Fits(node, r, req_) >= 1) continue;
        AddTask(r, state_.task(t), 1);  // ... unless the replica then no longer fits
        c.victims.push_back(t);
      }
      ESTUARY_CHECK(!c.victims.empty());  // the replica did not fit before any removal
      c.ok = true;
      c.max_priority = state_.job(state_.task(c.victims.front()).job).spec.priority;
      c.top_start = INT64_MAX;
      for (TaskId t : c.victims) {
        const Job& j = state_.job(state_.task(t).job);
        c.priority_sum += int64_t{j.spec.priority} + (int64_t{1} << 31);
        if (j.spec.priority == c.max_priority) c.top_start = std::min(c.top_start, Start(j));
      }
    }
  }

  int64_t Start(const Job& j) const { return j.started_at_s < 0 || j.started_at_s > now_ ? now_ : j.started_at_s; }

  // Step 4 for victim task `v`: an elastic job that keeps at least its min replicas without it
  // (step 1: without Align) loses only `v`, as an elastic job loses a deleted pod; any other job
  // is evicted whole, and every one of its bound tasks frees its room.
  void Evict(TaskId v) {
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
  void Free(const Task& task) {
    AddTask(room_[task.node.value()], task, 1);
    dirty_[task.node.value()] = 1;
  }

  const ClusterState& state_;
  JobId preemptor_;
  TaskRequest req_;
  int64_t now_;
  bool align_;
  std::span<const char> being_evicted_;
  const VictimFilter& filter_;
  std::vector<Room> room_;        // per node: free now, plus victims' tasks, minus replicas placed
  std::vector<char> usable_;      // per node
  std::vector<char> dirty_;       // per node: cand_ must be evaluated again
  std::vector<Candidate> cand_;   // per node: SelectVictimsOnNode's answer on room_
  std::vector<int8_t> eligible_;  // per job: -1 unknown, 0 no, 1 yes
  std::vector<char> chosen_;      // per job: evicted whole by this plan
  std::vector<int32_t> taken_;    // per job: replicas it loses without being evicted whole
  std::vector<char> gone_;        // per task: evicted alone (its job shrinks)
  std::vector<JobId> evicted_;
  std::vector<JobId> shrunk_;     // jobs with taken_ > 0, in the order met
};

}  // namespace

PreemptionPlan KubePreemptionPlan(const ClusterState& state, JobId preemptor, const TaskRequest& req, int64_t need,
                                  int64_t now_s, bool align, std::span<const char> being_evicted,
                                  const VictimFilter& filter) {
  PreemptionPlan out;
  KubeSolver solver(state, preemptor, req, now_s, align, being_evicted, filter);
  if (!solver.Run(need, out)) {
    out.nodes.clear();
    return out;
  }
  out.feasible = true;
  out.evicted_jobs = solver.evicted();
  std::sort(out.evicted_jobs.begin(), out.evicted_jobs.end());
  for (JobId j : out.evicted_jobs) {
    const Job& job = state.job(j);
    int64_t gpu = 0;
    for (TaskId t : job.tasks) {
      const Task& task = state.task(t);
      if (task.state != TaskState::kBound) continue;
      out.evict.push_back(t);
      gpu += task.req.TotalGpuMilli();
    }
    out.cost += gpu * SecondsSinceCheckpoint(job, now_s);
  }
  out.shrunk = solver.Shrunk();
  for (TaskId t : solver.ShrunkTasks()) out.evict.push_back(t);
  std::sort(out.evict.begin(), out.evict.end());
  return out;
}

}  // namespace estuary
