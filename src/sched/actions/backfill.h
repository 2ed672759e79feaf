// BackfillAction: the planning half of EASY backfill (Slurm's sched/backfill, docs/peers.md
// "slurm"). The job at the head of the queue that cannot start now gets a planned start: the
// earliest time at which, by the walltimes of the work running now, enough capacity is free for
// its min replicas on concrete nodes (in one domain of its required level, when it has one).
// The engine holds those nodes for it (a node hold, as ReserveAction's); other jobs start only
// where they cannot delay it: on nodes the plan does not need, or on its nodes when their own
// walltime ends by the planned start (Engine's `backfill` action).
//
// Assumptions: a running job ends at the latest at started_at_s + walltime_s (the driver stops it
// there: JobSpec::walltime_s); a running job without a walltime, a task in Standby and a borrowed
// task (on lent GPUs) are taken as never ending. Work already due (a start + walltime in the
// past) ends "now". No job starts in the plan's nodes meanwhile except those the caller lets in.
// Thread-safety: a pure function of a const ClusterState.
#pragma once

#include <cstdint>
#include <span>
#include <tuple>
#include <vector>
#include <vector>

#include "model/cluster_state.h"
#include "sched/actions/allocate.h"

namespace estuary {

// A node planned for another job over [from_s, to_s) (to_s: INT64_MAX for a job without a
// walltime): a plan made after it may use the node only outside that time.
struct BackfillBlock {
  NodeId node;
  int64_t from_s = 0;
  int64_t to_s = 0;
};

// The running work's walltime ends at one time, sorted once for several plans (a conservative
// round plans up to `depth` jobs on the same state): every bound task with a walltime, not in
// Standby and not borrowed, with its end (started_at + walltime, or `now_s` when past), in order
// of (end, task id). Valid while the state's tasks do not change.
struct BackfillReleases {
  struct Release {
    int64_t at;
    TaskId task;
    bool operator<(const Release& o) const { return std::tie(at, task) < std::tie(o.at, o.task); }
  };
  std::vector<Release> releases;
  int64_t now_s = 0;
  // O(tasks log tasks).
  static BackfillReleases Of(const ClusterState& state, int64_t now_s);
};

struct BackfillPlan {
  bool found = false;         // false: no time by the known walltimes holds the job (nothing to hold)
  int64_t start_s = 0;        // the planned start (>= now)
  DomainId domain;            // the domain of its required level that holds it (invalid: none)
  std::vector<NodeId> nodes;  // the nodes that hold its min replicas at start_s, ascending ids
};

class BackfillAction {
 public:
  // The planned start of waiting job `job` at `now_s`. Its min replicas, rounded up to a whole
  // number of steps (with options.align), each on one node's capacity (ReplicasFitting) free at
  // that time, counting the releases of every running task in order of its walltime end (ties:
  // task id). Nodes that are down, cordoned or held for another job are never used. With a
  // required level (and options.topology) the replicas all fit one domain of that level (the
  // first domain, in the level's order, to hold them); otherwise any nodes (a preferred level is
  // not planned for). The plan's nodes: those of that domain (or cluster) with room for a replica
  // at start_s, most room now first (then more room at start_s, then node id), until they hold
  // the replicas.
  // `blocks` (conservative backfill: the plans made before this one): a node is used only at a
  // start t where the job, running [t, t + its walltime) — forever without one —, meets none of
  // the node's blocks; a node it meets at t may serve a later t (after the block ends).
  // O((nodes + running tasks + blocks) log(running tasks + blocks)).
  // `releases`: BackfillReleases::Of(state, now_s) made beforehand (the same plan, without
  // sorting the running work's ends again); null: made here, for the candidate nodes only.
  static BackfillPlan Plan(const ClusterState& state, JobId job, int64_t now_s, const AllocateOptions& options,
                           std::span<const BackfillBlock> blocks = {}, const BackfillReleases* releases = nullptr);
};

}  // namespace estuary
