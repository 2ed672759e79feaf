// Volcano's preempt action (pkg/scheduler/actions/preempt/preempt.go; docs/peers.md, volcano) as
// a victim selection of PreemptAction::Plan, chosen by AllocateOptions::victims =
// VictimSelection::kVolcano (configuration key `preempt: {victims: volcano}`).
//
// Volcano preempts for a job's pending tasks one at a time, inside one statement that it keeps
// only if the job then reaches its gang minimum. The preemptor here is a gang of `need` identical
// replicas, taken one by one:
//   1. The usable nodes (Ready, not held for another job, a GPU model the job admits) in the
//      order of the node score the preemptor's policy gives them on the state before the plan
//      (VictimFilter::node_score, highest first; ties, and every node without a score: node id —
//      Volcano breaks ties at random). The order is kept for every replica (Volcano scores the
//      nodes again for each task, after the earlier tasks were pipelined; left out).
//   2. On the first node in that order whose room (free capacity, plus what the plan freed
//      there, minus the replicas placed there) together with all its eligible victims holds the
//      replica (ValidateVictims): the victims there are evicted one by one, in Volcano's victim
//      order, until the replica fits — lowest VictimFilter::rank first (queues furthest above
//      their share, when a filter ranks them), then lowest priority, then the job created last
//      (the reverse of JobOrderFn's creation-time order; the highest job id), then the highest
//      task id. A node where the replica fits without eviction takes it at its place in the
//      order: nothing is evicted there.
//   3. The replica is placed there; an evicted task's job goes whole, or loses that task alone
//      (an elastic job keeping its min; preempt_victims.h), and what it frees on every node
//      counts for the next replicas.
// All-or-nothing: when some replica finds no node, the plan is infeasible and evicts nothing (the
// statement is discarded). No reprieve (kube's): a victim evicted before the replica fit stays
// evicted even when a later one alone would have made room.
// With a required topology level (and AllocateOptions::topology), the replicas must all go to one
// domain of that level: the domains are tried in the level's order, each from the state before
// the plan, and the first whose nodes hold all `need` replicas gives the plan (Volcano's
// HyperNode-hard jobs; the domain choice is estuary's, as for the recipe's placement).
// Eligible victims: preempt_victims.h (priority strictly below the preemptor's, or
// VictimFilter::allowed; preemptible; none in Standby or being evicted).
//
// Cost: O(N log N) for the order (N usable nodes), then per replica a scan of the nodes in
// order until one holds it, O(tasks on the node) each; per domain with a required level.
#pragma once

#include <cstdint>
#include <span>

#include "sched/actions/preempt.h"

namespace estuary {

PreemptionPlan VolcanoPreemptionPlan(const ClusterState& state, JobId preemptor, const TaskRequest& req, int64_t need,
                                     int64_t now_s, const AllocateOptions& options, std::span<const char> being_evicted,
                                     const VictimFilter& filter);

}  // namespace estuary
