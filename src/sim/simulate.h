// `estuary simulate`: a discrete-event run of a Scenario for each scheduler configuration and
// seed. Jobs arrive at their submit time (listed, or Poisson-generated from weighted classes) and
// wait in a FIFO queue; after every event time the queue is tried in order (a job that cannot
// start does not block later ones) through AllocateAction with the configuration's options. A
// started job runs its duration and then ends; node failures shrink or requeue jobs
// (NodeFailureAction); repairs make nodes schedulable again. Time is a SimClock; same scenario and
// seed, same results.
//
// Metrics (names are part of the output contract):
//   free_nodes, allocated_unusable_gpus            at the end of the run
//   free_nodes_after_failure, allocated_unusable_gpus_after_failure
//                                                  right after the last node failure (if any)
//   gpu_alloc_pct_mean                             time-weighted over the run
//   jobs_started_count, jobs_pending_end_count, jobs_infeasible_count
//   sched_delay_p90_s, sched_delay_p90_large_s     first start - submit; jobs still waiting at
//                                                  the end count with their wait so far; "large":
//                                                  >= 128 GPUs at max replicas
//   sched_delay_p90_gpus_B_s, sched_delay_mean_gpus_B_s
//                                                  the same by job size (GPUs at max replicas),
//                                                  B = lt8, 8to127, 128to511, ge512 (buckets
//                                                  without jobs are left out)
//   stranded_gpus_8g_mean                          stranded GPUs of the 8G64C probe (metrics.md §3),
//                                                  sampled every sample_interval_s and averaged
//   within_asw_fulfillable_128_count, within_asw_fulfillable_256_count,
//   across_asw_fulfillable_128_count              time-averaged (§5); only with plane "data",
//                                                  level "asw"
//   asws_per_large_job_mean                        ASWs a large job spans when it starts (same)
//   free_asws_mean, free_rdma_pods_mean            time-averaged count of ASWs (plane
//                                                  "data", level "asw") and RDMA-PODs (plane
//                                                  "param", level "rdma_pod") with all GPUs free
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/cluster_state.h"
#include "sim/scenario.h"

namespace estuary {

struct SimSample {
  SimTime time = 0;
  double gpu_alloc_pct = 0;
  int64_t free_nodes = 0;
  int64_t pending_jobs = 0;
};

struct SimulateResult {
  std::string configuration;
  uint64_t seed = 0;
  std::map<std::string, double> metrics;
  std::vector<SimSample> samples;
};

// The scenario's cluster: its spec file read, or generated.
StatusOr<ClusterState> LoadScenarioCluster(const Scenario& scenario);

StatusOr<SimulateResult> RunScenario(const Scenario& scenario, const ClusterState& cluster,
                                     const SchedulerConfig& config, uint64_t seed, bool check_invariants = false);

}  // namespace estuary
