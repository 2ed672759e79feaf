// ReserveAction: head-of-line protection for gangs. Under load, a large gang that cannot start
// keeps waiting while later, smaller work takes whatever capacity frees up; it may wait for hours
// for room in one piece (in one ASW, for a job that requires one). ReserveAction holds nodes for
// such a job (a Reservation in the ClusterState): the nodes that would hold it with the least
// work running on them. New work of other jobs goes elsewhere, work already there runs to its
// end, and AllocateAction starts the job as soon as enough of what it may use is free — its held
// nodes or any other — releasing the hold.
//
// Which jobs qualify (how long they waited, how large they are) is the caller's choice; the action
// holds nodes for at most `max_jobs` of them, in the order given (oldest first).
#pragma once

#include <span>
#include <vector>

#include "model/cluster_state.h"
#include "sched/actions/allocate.h"

namespace estuary {

class ReserveAction {
 public:
  // The nodes to hold for `job`, or none when no set of nodes could ever hold it. The job must be
  // able to start on them once they are empty: its min replicas rounded up to a multiple of its
  // step (1 without Align), each replica on one node's capacity (GPUs, GPU model, CPU, memory).
  // Nodes that are down, cordoned or held for another job are never chosen. Cost of a node: the
  // GPU milli in use on it (then CPU milli in use, then node id), i.e. the running work the job
  // waits for. The nodes are a greedy prefix in cost order until their capacity holds the job
  // (not an optimal set when node capacities differ). With a required level (and
  // options.topology) the nodes all come from one domain of that level: in each domain such a
  // prefix, and the domain whose prefix has the least GPU in use (ties: domain order). Otherwise the cheapest nodes of the cluster, grouped by
  // domain of the preferred level when there is one (ties in cost go to the lower domain).
  //
  // `empty_only`: only nodes with no work bound to them are chosen, and when they cannot hold the
  // job the plan is all of them (with a required level: those of the domain with the most room on
  // its empty nodes; ties: domain order) — a hold that drains nothing and grows as nodes empty.
  static std::vector<NodeId> Plan(const ClusterState& state, JobId job, const AllocateOptions& options,
                                  bool empty_only = false);

  // Re-plans the holds of the jobs in `waiting` (every job that waits and may hold nodes, oldest
  // first): releases all their reservations, then holds Plan()'s nodes for each of the first
  // `max_jobs`, in order (a later job does not get nodes held for an earlier one). Reservations
  // of other jobs are left alone; a job listed twice is held once. `empty_only` (empty, or one
  // flag per job of `waiting`): Plan's `empty_only` for that job. Returns the number of
  // reservations made.
  static int Renew(ClusterState& state, std::span<const JobId> waiting, int max_jobs, const AllocateOptions& options,
                   std::span<const char> empty_only = {});
};

}  // namespace estuary
