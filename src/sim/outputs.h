// Output files of the simulator runs (the output contract of docs/mission.md): summary.json,
// CSV curves and report.html under an output directory.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "sim/openb.h"
#include "sim/replay.h"
#include "sim/simulate.h"

namespace estuary {

// The FGD paper's published results for one trace (../shared/reference/openb_expected_alloc.csv):
// per policy, the allocation ratio at each arrived-demand % for each seed.
struct PublishedOpenb {
  std::string trace;
  std::map<std::string, std::map<uint64_t, Curve>> by_policy;  // policy -> seed -> curve
  // Mean over the given seeds of the value at 130% arrived demand (the end of the run), or
  // nullopt when the reference lacks the policy or any of the seeds.
  std::optional<double> EndMean(const std::string& policy, const std::vector<uint64_t>& seeds) const;
  std::optional<Curve> MeanCurve(const std::string& policy, const std::vector<uint64_t>& seeds) const;
};

// Reads the rows of `trace` (e.g. "default"). Fails naming file, line and column on bad rows.
StatusOr<PublishedOpenb> ReadPublishedOpenb(const std::string& path, const std::string& trace);
// "default" for ".../openb_pod_list_default.csv"; the file's stem otherwise.
std::string OpenbTraceName(const std::string& pods_path);

struct OpenbRunInfo {
  std::string nodes_path, pods_path, trace;
  int64_t trace_tasks = 0, typical_specs = 0, distinct_specs = 0;
  double typical_coverage = 0;
};

// The summary of one policy's run (the contract keys plus extras). `wall_seconds` is included.
nlohmann::json OpenbSummaryJson(const OpenbResult& r, const OpenbRunInfo& info, const PublishedOpenb* published);

// Writes summary.json (one policy: the single-policy shape; several: {"policies": {...}}),
// alloc_curve.csv, frag_ratio_curve.csv, frag_amount_curve.csv, failed_tasks.csv and report.html.
// Returns the path of report.html.
StatusOr<std::string> WriteOpenbOutputs(const std::string& dir, const std::vector<OpenbResult>& results,
                                        const OpenbRunInfo& info, const PublishedOpenb* published,
                                        double wall_seconds);

// Writes the replay outputs: summary.json in the general shape {"scenario", "seeds",
// "wall_seconds", "configurations": {policy: {metric: mean over seeds}}}, timeseries.csv,
// waits are in the summary; report.html with allocation and pending tasks over time.
// `results[p][s]` is policy p, seed s. Returns the path of report.html.
StatusOr<std::string> WriteReplayOutputs(const std::string& dir, const std::string& scenario,
                                         const std::vector<std::vector<ReplayResult>>& results,
                                         double wall_seconds);

// Writes the simulate outputs: summary.json {"scenario", "seeds", "wall_seconds",
// "configurations": {name: {metric: mean over seeds}}, "per_seed": {name: {seed: {metric:
// value}}}}, timeseries.csv (configuration,seed,time_s,gpu_alloc_pct,free_nodes,pending_jobs,
// free_asws,free_rdma_pods,alloc_ratio_hp_pct,alloc_ratio_hp_lp_pct,idle_gpus,local_hour —
// free_asws and free_rdma_pods empty without such a level), idle_by_hour.csv
// (configuration,seed,hour,idle_gpu_hours: SimulateResult::idle_gpu_hours_by_hour), when the runs
// recorded events job_events.csv (configuration,seed,time_s,job,kind,replicas,detail:
// SimJobEvent), jobs.csv and
// report.html (allocation and wholly free nodes, ASWs and RDMA-PODs over time; idle GPU-hours and
// the allocation ratios by hour of day; per configuration; with queues, a "queues" panel set: the
// queue metrics per configuration and, per configuration, one small chart per queue of its first
// seed's queues.csv columns). With queues, queues.csv
// (configuration,seed,time_s,queue,allocated_gpus,guaranteed_gpus,fair_share_gpus,borrowed_gpus,
// lent_gpus,pending_gpus: QueueSample). `results[c][s]` is configuration c,
// seed s. jobs.csv has one row per job per configuration and seed (SimulateResult::jobs):
//   configuration,seed,job,replicas,gpus_per_replica,gpus,submit_s,start_s,delay_s,granted,status,
//   domains,entropy
// status as SimJobStatusText; start_s and granted are empty for a job that never started, domains
// and entropy when unset (SimJobRecord); entropy has 6 decimals. A field holding a comma, a quote
// or a line break is quoted, its quotes doubled (RFC 4180).
StatusOr<std::string> WriteSimulateOutputs(const std::string& dir, const std::string& scenario,
                                           const std::vector<std::vector<SimulateResult>>& results,
                                           double wall_seconds);

// Creates `dir` (and parents). Fails naming the directory.
Status MakeOutputDir(const std::string& dir);
Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace estuary
