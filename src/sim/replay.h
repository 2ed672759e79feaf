// Time-based replay of a task list with creation and deletion times: tasks arrive at their
// creation time and run for (deletion - creation) seconds once started; a task that does not fit
// waits in a FIFO pending queue, retried whenever capacity frees (all waiting tasks, in arrival
// order, without head-of-line blocking) — new arrivals alone are tried when nothing freed. A
// task no node could ever hold is dropped as infeasible. Time is a SimClock; the same inputs and
// seed give identical results.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "sched/framework/session.h"
#include "sim/openb.h"
#include "sim/trace/openb_reader.h"

namespace estuary {

struct ReplayTask {
  TaskRequest req;
  std::string name;
  SimTime creation = 0;
  SimTime runtime = 0;  // deletion - creation
  std::string qos;
};

struct ReplayWorkload {
  ClusterState cluster;
  std::vector<ReplayTask> tasks;
  TypicalTasks typical;
};

// Builds the replay workload; fails naming the file, line and column of the first task without a
// creation or deletion time, or whose deletion precedes its creation. `arrival_scale` multiplies
// every creation time (rounded to whole seconds) and keeps durations: below 1 it compresses the
// arrivals and raises the load (the openb traces peak at about 1% of their cluster's GPUs when
// replayed as recorded). REQUIRES: arrival_scale > 0.
StatusOr<ReplayWorkload> MakeReplayWorkload(ClusterState cluster, const OpenbTaskList& list,
                                            std::vector<TaskRequest> reqs, double arrival_scale = 1.0);

struct ReplayOptions {
  std::string policy;                         // one of OpenbPolicyNames()
  TieBreak tie_break = TieBreak::kNodeOrder;  // default: the published rule
  uint64_t seed = 42;
  // Seconds between time-series samples (default 1 h). When a run would exceed 100,000 samples the
  // interval doubles (every other sample is dropped), so memory stays bounded.
  SimTime sample_interval = 3600;
  bool check_invariants = false;              // CheckInvariants() after every event time
  // Called after every event time with (tasks arrived so far, tasks in the trace); may be empty.
  std::function<void(size_t, size_t)> progress;
};

struct ReplaySample {
  SimTime time = 0;
  double gpu_alloc_pct = 0;
  double frag_ratio_pct = 0;
  int64_t pending_count = 0;
  int64_t running_count = 0;
};

struct ReplayResult {
  std::string policy;
  uint64_t seed = 0;
  std::vector<ReplaySample> samples;
  double gpu_alloc_pct_mean = 0;   // time-weighted over [first arrival, last event]
  double gpu_alloc_pct_max = 0;
  double frag_ratio_pct_mean = 0;  // time-weighted
  int64_t pending_max_count = 0;
  int64_t tasks_started_count = 0, tasks_never_started_count = 0, tasks_infeasible_count = 0;
  // Waiting time (start - creation) of started tasks, plus the wait so far of tasks still pending
  // at the end (counted in tasks_never_started_count).
  double wait_s_mean = 0, wait_s_p50 = 0, wait_s_p90 = 0, wait_s_p99 = 0, wait_s_max = 0;
  SimTime start_time = 0, end_time = 0;
};

StatusOr<ReplayResult> RunReplay(const ReplayWorkload& workload, const ReplayOptions& options);

}  // namespace estuary
