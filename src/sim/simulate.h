// `estuary simulate`: a discrete-event run of a Scenario for each scheduler configuration and
// seed — a driver of the one Engine (src/engine/engine.h), which makes every scheduling decision.
// Jobs arrive at their submit time (listed, or Poisson-generated from weighted classes) and are
// submitted to the engine, which queues them — arrival order, or priority order with the
// configuration's `queue: priority` — and after every event time runs its cycle: evictions and
// Standby restores whose grace ended, migration moves, the queue's pass (a job that cannot start
// does not block later ones; a job of a shape that already had to wait in the pass is not tried),
// with `reserve` holds for waiting gangs renewed every replan_s, with `defrag` periodic and
// triggered defragmentation, with `preempt` Reclaim for HP jobs that cannot start, with `absorb`
// growth of running elastic jobs. The simulator supplies the world: a started job progresses by
// the work model (JobTemplate::linear_scaling, checkpoints, restart cost) and ends when its work
// is done; node failures — listed in the scenario or drawn from its failure-rate model — and
// repairs are engine inputs (NodeFailureAction's rule: shrink to whole steps or requeue); with
// `standby`, service replicas above their demand (and listed windows) are Standby targets, and
// the engine lends their GPUs to spot jobs and restores them. Evicted and failed jobs wait again
// at the front of the engine's queue. A job the engine reports infeasible (no domain or node
// could ever hold it) is not retried — the cluster never grows — and stays in the results as an
// infeasible job with the reason. Same scenario and seed, same results.
//
// Metrics (names are part of the output contract):
//   free_nodes, allocated_unusable_gpus            at the end of the run
//   free_nodes_after_failure, allocated_unusable_gpus_after_failure
//                                                  right after the last node failure (if any)
//   gpu_alloc_pct_mean                             time-weighted over the run
//   jobs_started_count, jobs_pending_end_count, jobs_infeasible_count
//                                                  jobs that ever started; jobs waiting at the end
//                                                  (infeasible jobs are not counted there but in
//                                                  jobs_infeasible_count)
//   sched_delay_p90_s, sched_delay_p90_large_s     first start - submit; jobs still waiting at
//                                                  the end count with their wait so far; "large":
//                                                  >= 128 GPUs at max replicas
//   sched_delay_p90_gpus_B_s, sched_delay_mean_gpus_B_s
//                                                  the same by job size (GPUs at max replicas),
//                                                  B = lt8, 8to127, 128to511, ge512 (buckets
//                                                  without jobs are left out)
//   domains_per_multinode_job_mean, entropy_per_multinode_job_mean
//                                                  mean over started jobs of > 1 replica of
//                                                  SimJobRecord::domains and ::entropy (only when
//                                                  some job has them)
//   node_failures_count                            nodes that went down (listed or generated)
//   jobs_requeued_by_failure_count, jobs_shrunk_by_failure_count
//                                                  failure effects (FailureEffect): a job hit by
//                                                  several failures counts each time
//   stranded_gpus_8g_mean                          stranded GPUs of the 8G64C probe (metrics.md §3),
//                                                  sampled every sample_interval_s and averaged
//   idle_fractional_gpus_S_mean, idle_stranded_gpus_S_mean, idle_insufficient_cpu_gpus_S_mean
//                                                  idle GPUs by cause for each probe shape S of
//                                                  ProbeShapes(), lower-cased (1g8c ... 8g128c):
//                                                  IdleGpuCauses summed over nodes, sampled and
//                                                  averaged the same way (metrics.md §3)
//   within_asw_fulfillable_128_count, within_asw_fulfillable_256_count,
//   across_asw_fulfillable_128_count              time-averaged (§5); only with plane "data",
//                                                  level "asw"
//   asws_per_large_job_mean                        ASWs a large job spans when it starts (same)
//   free_asws_mean, free_rdma_pods_mean            time-averaged count of ASWs (plane
//                                                  "data", level "asw") and RDMA-PODs (plane
//                                                  "param", level "rdma_pod") with all GPUs free
//   hp_sched_delay_p50_s, _p90_s, _p99_s           jobs of priority >= kHpPriority (if any)
//   alloc_ratio_hp_pct, alloc_ratio_hp_lp_pct      metrics.md §4 with Standby (unharvested Standby
//                                                  GPUs still count as HP-claimed), mean over
//                                                  nodes, then over samples
//   standby_harvest_pct                            with standby: §4's harvest ratio over samples
//                                                  with Standby
//   hp_demand_pct                                  GPUs HP work needs (HP tasks not in Standby and
//                                                  not services, plus each service's min(active,
//                                                  demand) replicas) / all GPUs, over samples
//   idle_gpu_hours, night_idle_gpu_hours           GPUs doing no work (free on nodes not down, lent
//                                                  and unborrowed, service replicas above demand
//                                                  not in Standby, allocated-but-unusable) x
//                                                  sample_interval_s; night = local 00:00-06:00
//   modelled_util_pct                              allocated GPU time x the class's utilisation
//                                                  profile (Scenario::utilisation), a model
//   lp_jct_mean_s, lp_jobs_finished_count          finished jobs of priority < kHpPriority
//   evictions_count, hp_evictions_count, preemption_lost_gpu_hours
//                                                  victims evicted whole or shrunk (Reclaim, and
//                                                  borrowers evicted by restores); of them HP; GPUs x
//                                                  time since the last checkpoint (periodic, or on
//                                                  notice) of jobs evicted whole
//   run_gpu_hours, goodput_gpu_hours, eviction_lost_gpu_hours, failure_lost_gpu_hours,
//   restart_gpu_hours, unkept_gpu_hours, unusable_gpu_hours
//                                                  the GPU time jobs' runs held (services not
//                                                  counted), and how it splits: work finished or
//                                                  kept by a checkpoint (restart periods not
//                                                  counted), lost to an eviction or a failure's
//                                                  requeue, restart periods kept, work since the
//                                                  last checkpoint of runs still going at the end
//                                                  or cancelled, and replicas beyond the last
//                                                  whole usable step; the six parts sum to
//                                                  run_gpu_hours (docs/simulate.md)
//   absorbed_replicas_count                        with absorb: replicas Absorb added
//   standby_entries_count, standby_restores_count, restore_evictions_count
//                                                  with standby
//   network_slowed_runs_count                      with a network model: runs that spanned domains
//   reservations_made_count, held_idle_gpus_mean   with reserve: holds made; time-averaged free
//                                                  GPUs on held nodes
//   nodes_with_slack_mean, free_nodes_mean, placeable_8gpu_tasks_mean
//                                                  time-averaged GPU nodes neither wholly free nor
//                                                  fully allocated; wholly free; sum over ready
//                                                  nodes of wholly free GPUs / 8 (metrics.md §7)
//   sched_delay_p90_8gpu_s                         jobs whose tasks ask for 8 GPUs each
//   migrations_{planned,started,completed,aborted,cancelled}_count, defrag_vacated_nodes_count,
//   double_occupancy_gpu_hours, defrag_plans_count, defrag_triggered_count,
//   defrag_planned_vacated_nodes_count, defrag_plan_seconds_max, defrag_plan_seconds_mean
//                                                  defragmentation (MigrationCounters; 0 without
//                                                  defrag); plan seconds are wall time
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/cluster_state.h"
#include "sim/queue_metrics.h"
#include "sim/scenario.h"

namespace estuary {

struct SimSample {
  SimTime time = 0;
  double gpu_alloc_pct = 0;
  int64_t free_nodes = 0;
  int64_t pending_jobs = 0;
  // Domains with all GPUs free: ASWs (plane "data", level "asw") and RDMA-PODs (plane "param",
  // level "rdma_pod"); -1 when the cluster has no such level.
  int64_t free_asws = -1;
  int64_t free_rdma_pods = -1;
  // metrics.md §4 at this sample (percent), and the GPUs doing no work (SimulateResult).
  double alloc_ratio_hp_pct = 0;
  double alloc_ratio_hp_lp_pct = 0;
  double idle_gpus = 0;
  int local_hour = 0;  // simulated local hour of day (tidal start_hour; 0 without tidal)
};

// What became of a job by the end of the run.
enum class SimJobStatus {
  kFinished,    // it started and its last run ended
  kRunning,     // it holds replicas at the end
  kPending,     // it waits at the end (never started, or requeued by a failure)
  kInfeasible,  // AllocateAction found it could never fit; not retried
  kCancelled,   // a cancel_job event ended it (scenario.h JobAction)
  kTimedOut,    // its walltime stopped its last run before its work was done (walltime_s)
};

// One job of the workload that arrived before the end of the run (a row of jobs.csv). Fields
// "at first start" are unset (start_s -1, granted 0, domains and entropy nullopt) for a job that
// never started.
//
// Spread: `domains` counts the distinct domains its bound replicas spanned at first start, at the
// job's spread level — the required level of its topology constraint, else its preferred level
// (of its plane), else, for a job without a constrained level, level "asw" of plane "data" when
// the cluster has it; without any of these, nullopt. A replica on a node outside the plane counts
// as its own domain (the implicit "node" level). `entropy` is GpuEntropy (sched/actions/allocate.h)
// of the job's GPUs over those domains (metrics.md §5); nullopt also for a job without GPUs.
struct SimJobRecord {
  std::string name;
  int32_t replicas = 0;  // max replicas
  int32_t gpus_per_replica = 0;
  int64_t gpus = 0;  // replicas x gpus_per_replica
  SimTime submit_s = 0;
  SimTime start_s = -1;  // first start; -1: never started
  SimTime delay_s = 0;   // first start - submit; (end of the run) - submit when it never started
  int32_t granted = 0;   // replicas bound at first start
  SimJobStatus status = SimJobStatus::kPending;
  std::string reason;  // kInfeasible: why (AllocateAction's JobAttempt reason); else empty
  std::optional<int64_t> domains;
  std::optional<double> entropy;
};

// The figures of a job's record that every driver fills alike — name, replicas and GPUs of
// template `t`, its submit and first start (-1: never) and its delay — for a run ending at `end`.
SimJobRecord JobRecordOf(const JobTemplate& t, SimTime submit, SimTime first_start, SimTime end);

// A node failure or repair the run applied: every listed event, and the generated failures and
// repairs of the failure-rate model (Scenario::failures). A generated failure never picks a node
// that is down; a generated repair is applied only while the node is still down from the failure
// it repairs (a listed repair may have come first).
struct SimNodeEvent {
  SimTime time = 0;
  std::string node;
  bool fail = true;        // false: repair
  bool generated = false;  // from the failure-rate model
};

// What happened to a job at a time (SimulateResult::job_events, job_events.csv). Kinds:
//   start    it started with `replicas` bound (detail "lent" when it borrowed Standby capacity)
//   grow     Absorb grew it to `replicas`
//   shrink   Reclaim (detail "reclaim") or a node failure (detail "failure") shrank it to `replicas`
//   evict    it was evicted whole and requeued (detail "reclaim" or "restore": its replicas
//            borrowed a Standby replica's GPUs that is resuming)
//   requeue  a node failure requeued it
//   finish   its last run ended
//   timeout  its walltime stopped its run, the work unfinished (JobTemplate::walltime_s)
//   standby  one of its replicas entered Standby (detail "TASK@NODE:GPUS", e.g. "svc-1@n3:0,1,2,3");
//            `replicas` = its replicas in Standby after the change
//   restore  a Standby replica serves again on its GPUs (detail as for standby)
//   migrate-start, migrate, migrate-abort, migrate-cancel
//            a defragmentation move of one of its tasks started (its target reserved), completed
//            (the task now runs on the target), was given up after it started, or was dropped
//            before it started; detail "TASK FROM->TO:GPUS" (GPUs on the target)
struct SimJobEvent {
  SimTime time = 0;
  std::string job;
  std::string kind;
  int32_t replicas = 0;
  std::string detail;
};

// "finished", "running", "pending" or "infeasible: <reason>".
std::string SimJobStatusText(const SimJobRecord& r);

struct SimulateResult {
  std::string configuration;
  uint64_t seed = 0;
  std::map<std::string, double> metrics;
  std::vector<SimSample> samples;
  std::vector<SimJobRecord> jobs;  // in workload order: listed jobs, then generated ones
  std::vector<SimNodeEvent> node_events;  // as applied, in order
  // Idle GPU-hours by simulated local hour of day (0-23): the idle GPUs of each sample times
  // sample_interval_s, summed into the sample's local hour (see idle_gpu_hours in the header).
  std::array<double, 24> idle_gpu_hours_by_hour{};
  std::vector<SimJobEvent> job_events;  // in time order; only when asked for (RunScenario)
  std::vector<QueueSample> queue_samples;  // with queues: one row per queue per sample
  // The scheduling cycles the run ran: one at each time some input happened or the engine was
  // due (Engine::NextDue; a federation: a member or a retry was due), the checks' extra cycles
  // (check_*) not counted. A federation's cycle steps every member.
  int64_t cycles = 0;
};

// The scenario's cluster: its spec file read, or generated.
StatusOr<ClusterState> LoadScenarioCluster(const Scenario& scenario);

// Configuration `config`'s `defrag` into *e (EngineConfig::defrag and ::migration, the moves'
// randomness from `seed`), its names resolved against `state`; nothing without one. Errors name
// the configuration's key in the scenario's file. `planning_clock`: times the plans (may be null).
Status ApplyDefrag(const Scenario& sc, const ClusterState& state, const SchedulerConfig& config, uint64_t seed,
                   const Stopwatch* planning_clock, EngineConfig* e);

// The defragmentation metrics (migrations_*, defrag_*, double_occupancy_gpu_hours; docs/simulate.md)
// of what `k` and `d` counted, into `m`.
void DefragCounterMetrics(const MigrationCounters& k, const DefragCounters& d, std::map<std::string, double>& m);

// `check_invariants`: after every step the cluster's invariants hold and the cycle ended at a fixed
// point (another cycle at the same time decides nothing); an Internal error otherwise.
// `check_quiet` (tests; with check_invariants): also, after every cycle, a cycle one second before
// the run's next input or the engine's next due time (Engine::NextDue), whichever is first,
// decides nothing — so a driver that runs cycles at other moments (the service runs one after any
// input, and at NextDue) decides as this one. That cycle is run for real: the run's outputs may
// differ from a run without the check only where the check fails.
StatusOr<SimulateResult> RunScenario(const Scenario& scenario, const ClusterState& cluster,
                                     const SchedulerConfig& config, uint64_t seed, bool check_invariants = false,
                                     bool record_events = false, bool check_quiet = false);

}  // namespace estuary
