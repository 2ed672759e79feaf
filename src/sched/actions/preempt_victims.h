// The bookkeeping shared by the replica-by-replica victim searches (kube's, preempt_k8s.h;
// Volcano's, preempt_volcano.h): a what-if room per node, which jobs may be victims, what an
// eviction frees, and the plan they add up to. Internal to the actions library.
//
// Evictions follow the peers' controllers: a victim task of an elastic job that keeps at least
// its min replicas without it (step 1, i.e. without Align) is removed alone — the job shrinks,
// losing no work (estuary's convention for shrinking); any other victim's job is evicted whole —
// an estuary job is a gang, whose controller restarts all of its pods when one is deleted — and
// every task of it, on every node, frees its room.
// Eligible victims are the same as estuary's Reclaim: tasks of preemptible jobs of priority
// strictly below the preemptor's (or VictimFilter::allowed), none in Standby or already being
// evicted; VictimFilter::take is asked once per eligible job (its whole GPU milli) when it is
// first met.
// Thread-safety: none (one search at a time).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sched/actions/preempt.h"
#include "sched/actions/preempt_room.h"

namespace estuary::preempt_internal {

class VictimLedger {
 public:
  // Rooms start as each node's free amounts; a node is usable when it is schedulable, not held
  // for another job than `preemptor` and (for a GPU request) of a model `req` admits.
  VictimLedger(const ClusterState& state, JobId preemptor, const TaskRequest& req, int64_t now, bool align,
               std::span<const char> being_evicted, const VictimFilter& filter);

  const ClusterState& state() const { return state_; }
  const TaskRequest& req() const { return req_; }
  bool usable(size_t node) const { return usable_[node] != 0; }
  Room& room(size_t node) { return room_[node]; }
  // Per node: set whenever its room changed (the caller clears what it has looked at).
  std::vector<char>& dirty() { return dirty_; }

  // Bound task `t` may still be evicted by this plan: not gone, its job not evicted whole yet,
  // and eligible (decided, and budgeted, once per job).
  bool Candidate(TaskId t);
  // Evicts victim task `v` (see the header): alone, or its whole job.
  void Evict(TaskId v);
  // Takes one replica of the request out of node `n`'s room: the first wholly free GPUs
  // (whole-GPU replicas) or the first GPU with room (shared), its CPU and memory.
  // REQUIRES: Fits(node, room, req) >= 1.
  void TakeReplica(NodeId n);
  // The job's start as the searches see it: not started, or started after now, counts as now.
  int64_t Start(const Job& j) const { return j.started_at_s < 0 || j.started_at_s > now_ ? now_ : j.started_at_s; }
  // `out` completed with what was evicted: feasible, evicted_jobs and evict (ascending), shrunk
  // and the cost (lost work of the jobs evicted whole).
  PreemptionPlan Finish(PreemptionPlan out) const;
  // Back to the state at construction: rooms, evictions and replicas undone; with
  // VictimFilter::take, eligibility is asked again (after the caller's VictimFilter::reset).
  // O(what changed).
  void Reset();

 private:
  bool Eligible(JobId j);
  void Free(const Task& task);
  // Node `i`'s room is about to change: its starting room is kept for Reset.
  void Touch(size_t i);

  const ClusterState& state_;
  JobId preemptor_;
  TaskRequest req_;
  int64_t now_;
  bool align_;
  std::span<const char> being_evicted_;
  const VictimFilter& filter_;
  std::vector<Room> room_;        // per node: free now, plus victims' tasks, minus replicas placed
  std::vector<char> usable_;      // per node
  std::vector<char> dirty_;       // per node
  std::vector<int8_t> eligible_;  // per job: -1 unknown, 0 no, 1 yes
  std::vector<char> chosen_;      // per job: evicted whole by this plan
  std::vector<int32_t> taken_;    // per job: replicas it loses without being evicted whole
  std::vector<char> gone_;        // per task: evicted alone (its job shrinks)
  std::vector<JobId> evicted_;
  std::vector<JobId> shrunk_;     // jobs with taken_ > 0, in the order met
  std::vector<std::pair<size_t, Room>> saved_;  // nodes whose room changed, with their starting room
  std::vector<char> saved_node_;                // per node: in saved_
  std::vector<JobId> asked_;                    // jobs whose eligibility was decided
};

}  // namespace estuary::preempt_internal
