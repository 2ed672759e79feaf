// A service's history (engine/history.h) as a what-if workload: the same cluster, the same jobs
// (submit times, shapes, priorities, topology, Standby windows, observed run times), the same
// node failures and repairs, as a scenario that `estuary simulate` runs under any configuration
// (docs/history.md, "What-if").
//
// The cluster is every node the history added (the first time each name appears), with its
// planes and domains. Times are relative to the history's first submission (t0). A job's
// duration is its observed work: its last run (from its last start to its end) plus, of every
// earlier run that an eviction ended, the part up to its last checkpoint (the simulator keeps
// that much of an evicted job's work; fixed scaling: elastic jobs' replicas do not change it).
// A job that did not end on
// its own within the history runs past the horizon; tenants' cancels and resizes are `events:`
// (cancel_job, resize_job) at their times, as are node failures and repairs. The scenario's
// only configuration, `recorded`, is the history's (its first segment's) in the scenario schema;
// add others to compare.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "engine/history.h"

namespace estuary {

struct HistoryScenario {
  std::string scenario_yaml;  // names the cluster spec file `cluster_file` (relative to it)
  std::string cluster_yaml;   // a cluster spec (docs/cluster-spec.md)
  int64_t t0 = 0;             // the history time of scenario time 0
  int64_t jobs = 0, finished = 0, cancelled = 0;
};

// REQUIRES: records as ReadHistoryFile gives them (the first starts a segment).
StatusOr<HistoryScenario> HistoryToScenario(const std::vector<HistoryRecord>& records, const std::string& name,
                                            const std::string& cluster_file);

}  // namespace estuary
