// Scenario files for `estuary simulate` (YAML; docs/simulate.md): a cluster, a workload of jobs
// (listed and/or generated), events (node failures and repairs, listed and/or from a failure-rate
// model), the scheduler configurations to compare in one run, the simulated duration and the seeds. Every error names the file, the line
// and the field ("s.yaml:12: field 'replicas': ...").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job_json.h"  // the one job schema; kJobClasses
#include "common/clock.h"
#include "common/status.h"
#include "model/cluster_state.h"
#include "quota/queues.h"
#include "engine/engine.h"  // EngineBackfill
#include "sched/actions/allocate.h"  // VictimSelection
#include "sched/actions/defrag.h"
#include "sched/actions/migration.h"
#include "sim/cluster/generator.h"
#include "sim/trace/curve.h"

namespace estuary {

// A Standby window of a listed job (key `standby: [{from_s, to_s, replicas}]`): with a
// configuration's `standby`, `replicas` of its bound replicas are in Standby from from_s; their
// restore starts grace_s before to_s, so that they serve again at to_s. Windows of a job do not
// overlap and end after they start.
struct StandbyWindow {
  SimTime from_s = 0, to_s = 0;
  int32_t replicas = 1;
};

// One job (or one class of generated jobs): `replicas` tasks of `per_replica`, granted in
// multiples of `step` within [min, replicas], running `duration_s` once started.
struct JobTemplate {
  int line = 0;  // where the job is defined, for messages
  std::string name;
  std::string queue;  // its queue (`queue:`); empty: none
  SimTime submit_s = 0;
  SimTime duration_s = 3600;
  int32_t replicas = 1;
  int32_t min_replicas = 0;  // 0: = replicas (rigid)
  int32_t step = 1;
  int32_t usable_step = 0;   // 0: = step
  TaskRequest per_replica;
  std::string plane, required_level, preferred_level;  // topology constraint by name (empty: none)
  int64_t required_max_wait_s = 0;  // EngineJob::required_max_wait_s
  // Class and priority (docs/schema.md, "Job classes"): the class sets defaults for priority
  // and preemptible; explicit fields override them.
  std::string job_class;  // empty: unclassified (priority 0, not preemptible)
  int32_t priority = 0;
  bool preemptible = false;
  int64_t checkpoint_interval_s = 0;
  int64_t checkpoint_on_notice_s = 0;  // JobSpec::checkpoint_on_notice_s
  int64_t restart_cost_s = 0;
  // Each run ends at the latest walltime_s after it started (JobSpec::walltime_s; 0: no limit).
  int64_t walltime_s = 0;
  // How the run time depends on the replicas granted (`scaling`): fixed (default) — the job runs
  // duration_s whatever it was granted; linear — duration_s is its run time at max replicas and
  // it progresses in proportion to its usable replicas (bound, rounded down to usable_step), so
  // an elastic job that grows (Absorb) finishes sooner and one that shrinks later.
  bool linear_scaling = false;
  // Per mille of the job's tasks that are locked: never moved by defragmentation (`locked_pct`
  // in percent, 0-100; drawn per task from a stream of its own). Default 0.
  int32_t locked_permille = 0;
  std::vector<StandbyWindow> standby;  // listed jobs only, ascending and disjoint
  // GPU models the job's GPU replicas may use, by name (`models: [H800, A100]`); empty: any.
  // Names are resolved against each cluster the job may run on (a federation member without
  // any of them cannot run it).
  std::vector<std::string> models;
  // Federation scenarios (issue 6). `home`: the member whose region submits the job (listed jobs:
  // `home: NAME`, default the first member; generated jobs: drawn by the members' arrivals_pct);
  // `home_only` (`home_only: true`): it may run only there (e.g. an online service of a region).
  // In the `merged` configuration both are ignored (one cluster).
  std::string home;
  bool home_only = false;
};

struct GeneratedClass {
  double share = 1;
  JobTemplate job;  // submit_s ignored; duration_s is the mean of an exponential distribution
  // Arrivals follow the tidal curve (Scenario::tidal): an arrival of this class at time t is kept
  // with probability demand(t) (per-mille of the peak, weekend scale included), so its rate is
  // share x arrivals_per_hour x demand(t). Needs `tidal`.
  bool diurnal = false;
  // Bursts (`bursts: {every_s, for_s, offset_s}`; every_s 0: none): arrivals of this class are
  // kept only in [offset_s + k x every_s, offset_s + k x every_s + for_s) for k = 0, 1, ... — a
  // team that submits in bursts (a paper deadline, a nightly sweep).
  int64_t burst_every_s = 0, burst_for_s = 0, burst_offset_s = 0;
  // Whether an arrival at t is kept by the bursts (always without them).
  bool InBurst(int64_t t) const {
    return burst_every_s <= 0 || (t >= burst_offset_s && (t - burst_offset_s) % burst_every_s < burst_for_s);
  }
};

struct JobStream {
  double arrivals_per_hour = 0;  // Poisson arrivals; 0: no generated jobs
  std::vector<GeneratedClass> classes;
};

struct NodeEvent {
  SimTime at_s = 0;
  std::string node;
  bool fail = true;  // false: repair
};

// A user's action, as the service's API takes it: on a listed job (`events: [{at_s, cancel_job:
// NAME}]` or `[{at_s, resize_job: NAME, min, max}]`, DELETE and PATCH /v1/jobs/ID) — a cancel ends
// the job (a waiting one leaves the queue, a running one stops at once), a resize sets its min and
// max replicas (a running job above the new max shrinks, an elastic one may grow toward it); an
// action on a job not yet submitted, or already ended, does nothing — or an admin's request for a
// defragmentation (`[{at_s, defrag: true}]`, POST /v1/defrag: the engine's plan with the default
// planner options, carried out by make-before-break moves).
struct JobAction {
  enum class Kind { kCancel, kResize, kDefrag };
  SimTime at_s = 0;
  Kind kind = Kind::kCancel;
  std::string job;  // kCancel, kResize
  int32_t min = 1, max = 1;  // kResize
};

// Head-of-line protection (ReserveAction): nodes are held for up to `max_jobs` jobs of
// `min_gpus` to `max_gpus` GPUs (at max replicas) that have waited at least `after_s`, oldest
// first; holds are re-planned every `replan_s` of simulated time.
struct ReserveConfig {
  bool enabled = false;  // on when the configuration has a `reserve:` mapping
  int64_t after_s = 1800;
  int64_t max_jobs = 1;
  int64_t min_gpus = 128;
  int64_t max_gpus = int64_t{1} << 40;
  int64_t replan_s = 300;
  int64_t drain_after_s = 0;  // EngineReserve::drain_after_s
  // As the engine takes it: the one mapping of the simulator and the service.
  EngineReserve ToEngine() const { return {enabled, replan_s, after_s, min_gpus, max_gpus, max_jobs, drain_after_s}; }
};

// A failure-rate model (key `failures`): every node fails independently as a Poisson process of
// mean time between failures `node_mtbf_h` while it is up, stays down `repair_s`, then is
// repaired. The draws come from an Rng of their own (common/rng.h), so they do not disturb the
// job stream's.
struct FailureModel {
  double node_mtbf_h = 0;        // required, > 0 (hours)
  SimTime repair_s = 0;          // required, > 0 (seconds)
  std::optional<uint64_t> seed;  // default: the run's seed
};

// The tidal workload (key `tidal`, docs/simulate.md "Tidal workloads"): online-inference
// services whose replica demand follows a diurnal curve (a curve file, sim/trace/curve.h), and the
// time base that `diurnal` generator classes follow. Local time of day at t is
// (start_hour x 3600 + t) mod 86400; day d = (start_hour x 3600 + t) / 86400 counts from 0, and
// days 5 and 6 of every week are the weekend, where demand is scaled by weekend_pct.
struct TidalWorkload {
  bool enabled = false;
  std::string curve_path;  // relative paths are relative to the scenario
  DemandCurve curve;
  int64_t start_hour = 0;
  int64_t weekend_pct = 100;
  // Services: `services` jobs of class hp-inference (priority 900, not preemptible), each with a
  // peak of replicas drawn uniformly from [replicas_min, replicas_max], submitted at 0, running
  // to the end. Demand of service k at t = ceil(peak x demand(t + phase_k)), at least 1 replica,
  // with phase_k uniform in [-phase_jitter_s, phase_jitter_s]; re-evaluated every step_s. With
  // queues, all of them run in `queue` (a leaf; required then, an error without queues).
  int64_t services = 0;
  std::string queue;
  int32_t replicas_min = 1, replicas_max = 1;
  TaskRequest per_replica;
  int64_t phase_jitter_s = 3600;
  int64_t step_s = 300;
  int line = 0;
};

// The modelled utilisation (metrics.md §6) of a GPU allocated to each class, in percent: a model,
// never a measurement. Key `utilisation: {class: pct}`; defaults in docs/simulate.md.
struct UtilisationProfile {
  int64_t hp_inference = 30, hp_training = 60, dev = 15, lp = 50, spot = 45, other = 40;
};

// Defragmentation (issue 5): the IPC planner (DefragAction) run every `interval_s` (0: never
// periodically) and when a large job waited too long (`trigger_after_s` > 0: a pending job of at
// least `trigger_min_gpus` GPUs at max replicas waiting that long, at most once per
// `trigger_cooldown_s`), whenever no earlier plan is still executing; its moves are carried out by
// the MigrationExecutor (make-before-break over capacity reservations, budget in `migration`).
// `defrag: {interval_s, max_moves, partition_nodes, chain_depth, rounds, startup_s, timeout_s,
// fail_pct, max_concurrent, per_node, per_job, drain, trigger_after_s, trigger_min_gpus,
// trigger_cooldown_s, objective, objective_plane, objective_level, variants, assemble}`; off by
// default. `assemble: true` (needs trigger_after_s): a trigger holds the nodes that would hold its
// job with the least work on them and migrates that work off (EngineDefrag::assemble).
struct DefragConfig {
  bool enabled = false;
  // The planner's objective: "nodes" (most whole free nodes, the default) or "domains" (most
  // whole free domains of objective_plane / objective_level — e.g. RDMA-PODs — by greedy
  // aggregation); names are resolved against the cluster when the run starts.
  std::string objective = "nodes";
  std::string objective_plane, objective_level;
  int64_t interval_s = 3600;
  int64_t trigger_after_s = 0;
  int64_t trigger_min_gpus = 8;
  int64_t trigger_cooldown_s = 600;
  bool assemble = false;
  DefragOptions plan;
  MigrationOptions migration;
  // The engine's form, with the planner's options `plan` (the objective's names resolved): every
  // driver builds it here, so that none leaves a field at the engine's default.
  EngineDefrag ToEngine(DefragOptions resolved) const {
    EngineDefrag d;
    d.enabled = enabled;
    d.interval_s = interval_s;
    d.trigger_after_s = trigger_after_s;
    d.trigger_min_gpus = trigger_min_gpus;
    d.trigger_cooldown_s = trigger_cooldown_s;
    d.plan = std::move(resolved);
    d.assemble = assemble;
    return d;
  }
};

// How a configuration of a federation scenario dispatches jobs over its members (issue 6,
// docs/federation.md): `blind` (no capacity knowledge: round-robin or least-loaded over all
// members; members queue what they accept), `idle-only` (probe idle capacity only), `reclaim-aware`
// (probe idle and reclaimable-below-priority capacity) or `merged` (one cluster of all members'
// nodes, the upper reference). Empty: not a federation configuration.
inline constexpr const char* kFederationModes[] = {"blind", "idle-only", "reclaim-aware", "merged"};

struct SchedulerConfig {
  std::string name;
  std::string federation;  // one of kFederationModes in a federation scenario; empty otherwise
  // `blind_dispatch: round-robin | least-loaded` (blind only; default round-robin): the member
  // after the last one chosen, or the one with the fewest GPUs of accepted, unfinished jobs.
  bool blind_least_loaded = false;
  std::string policy = "best-fit";
  bool align = true;
  bool topology = true;
  ReserveConfig reserve;
  // `backfill: easy | off` or `{mode: easy|off, interval_s}` (default off; interval 30 s, Slurm's
  // bf_interval): EASY backfill (EngineBackfill, docs/schema.md). `conservative` is not modelled.
  EngineBackfill backfill;
  // Queue order: arrival (fifo, the default) or priority (higher first, then arrival).
  bool priority_queue = false;
  // Reclaim (issue 4): an HP job (priority >= kHpPriority) that cannot start evicts the victims of
  // PreemptAction::Plan, which free their resources `grace_s` later; the nodes of the plan are
  // held for the HP job meanwhile. `preempt: {grace_s}`; off by default. With `exit_mean_s` and
  // `exit_p95_s`, victims exit within the grace period after a lognormal time of that mean and
  // P95 (GracefulExit; Alibaba: 13 and 48 s) and the job starts once the last one has exited;
  // without them (0) every victim takes the whole grace period.
  bool preempt = false;
  int64_t grace_s = 60;
  // `preempt: {victims: estuary | k8s}` (default estuary): how Reclaim chooses its victims
  // (AllocateOptions::victims; k8s: kube-scheduler's default preemption, docs/peers.md).
  VictimSelection victims = VictimSelection::kEstuary;
  // `preempt: {preemptor_min_priority: P}` (0..1000, default 700 = kHpPriority): jobs at or above
  // P reclaim by priority (EngineConfig::preemptor_min_priority; 0: every job may evict
  // preemptible work of a lower priority, as kube's PriorityClass preemption).
  int32_t preemptor_min_priority = kHpPriority;
  int64_t exit_mean_s = 0;
  int64_t exit_p95_s = 0;
  // Absorb (issue 4): after every cycle, running elastic jobs grow toward max in whole steps
  // (AbsorbAction), unless a waiting job of higher priority could use the capacity. `absorb: true`.
  bool absorb = false;
  // `hold_survivors: true` (EngineConfig::hold_survivors): a one-domain gang requeued by a node
  // failure holds its surviving nodes until it can start again in its domain.
  bool hold_survivors = false;
  // SpotGPU Standby (issue 4): service replicas above the current demand enter Standby and lend
  // their GPUs and CPU to spot jobs (preemptible, priority <= lend_max_priority); when demand
  // rises again, the borrowers on a replica are evicted with `grace_s` and it resumes on the same
  // GPUs. Restores start grace_s ahead of the demand. `standby: {grace_s, lend_max_priority}`.
  bool standby = false;
  int64_t standby_grace_s = 60;   // default: the preempt grace_s (one grace period for both)
  bool standby_grace_given = false;  // `standby: {grace_s}` was written
  int32_t lend_max_priority = 100;
  DefragConfig defrag;
  // Domain packing (AllocateOptions::pack_*): `pack: {plane, level}`; empty: off.
  std::string pack_plane, pack_level;
  // Multi-tenant queues (issue 20; api/queue_json.h, EngineConfig::queues): the configuration's
  // `queues:`, else the scenario's root `queues:`; `sharing:` how they share.
  std::vector<QueueSpec> queues;
  SharingSpec sharing;
  int line = 0;  // of the configuration, for errors found when it meets the cluster
};

// Placement-dependent run time: a multi-node job whose nodes span more than one domain of `level`
// (plane `plane`) runs longer, because its collectives cross the slower links between domains:
// run time × (1 + comm_share_pct/100 × cross_domain_slowdown_pct/100), rounded up to a second.
// Alibaba measures all-reduce bandwidth 27% higher within one ASW than across ASWs.
struct NetworkModel {
  bool enabled = false;  // on when the scenario has a `network:` mapping
  std::string plane = "data";
  std::string level = "asw";
  int64_t cross_domain_slowdown_pct = 27;
  int64_t comm_share_pct = 40;
  int line = 0;  // of the `network:` mapping, for errors
};

// A member of a federation (`federation: {members: [...]}`): a sub-cluster with a cluster of its
// own and a local time zone.
struct FederationMember {
  int line = 0;  // of the member's mapping, for errors
  std::string name;  // unique, non-empty
  // Exactly one of (as Scenario's `cluster:`): a spec file (relative to the scenario) or generator
  // options. A member whose cluster has no nodes is an error (LoadMemberClusters).
  std::string cluster_spec;
  std::optional<GeneratorOptions> cluster_generate;
  // The member's local time: its hour of day at t = 0 (0-23, default 0). Diurnal generator
  // classes follow the tidal curve at the local time of the job's home member, so regions whose
  // start_hour differ have their peaks that many hours apart.
  int64_t start_hour = 0;
  // Share of the generator's arrivals whose home is this member, relative to the other members'
  // (default 1; > 0).
  double arrivals_share = 1;
  // HP headroom kept by the member (InProcessMember's MemberOptions::headroom) in every
  // configuration: `headroom: {replicas, gpus, models, plane, level, min_job_gpus}` or a list of
  // them — room for `replicas` x `gpus` GPUs (of `models`, in one domain of `level` when given)
  // that only HP jobs of at least `min_job_gpus` GPUs (default: replicas x gpus) may use. In
  // `merged`, the one cluster keeps every member's headrooms.
  struct Headroom {
    int64_t min_job_gpus = 0;
    int32_t replicas = 1;
    int32_t gpus = 8;
    std::vector<std::string> models;
    std::string plane, level;
  };
  std::vector<Headroom> headroom;
};

// The federation layer of a scenario (issue 6; `federation:` replaces `cluster:`).
struct FederationSpec {
  bool enabled = false;
  int line = 0;
  std::vector<FederationMember> members;  // at least one; names unique
  // After a member rejects a dispatch, the job waits retry_backoff_s before it is tried again,
  // doubled after every further rejection up to retry_backoff_max_s (defaults 30 and 480).
  int64_t retry_backoff_s = 30;
  int64_t retry_backoff_max_s = 480;
  // Members publish their capacity summaries every summary_period_s of simulated time (default
  // 0: the summary is current at every decision). A period makes the federation decide on stale
  // summaries, which members catch and reject.
  int64_t summary_period_s = 0;
  // Among members that fit equally: `pack` (default; the fullest member first) or `spread` (the
  // emptiest first).
  bool spread = false;
  // Every member's headrooms (FederationMember::headroom; MemberOptions of the same names): held
  // nodes still running other work are looked at every headroom_retry_s, and a preemptible job
  // there is evicted only once at most headroom_max_loss_s of its work since its last checkpoint
  // would be lost (defaults 60 and 300).
  int64_t headroom_retry_s = 60;
  int64_t headroom_max_loss_s = 300;
};

struct Scenario {
  std::string name;
  std::string path;
  SimTime duration_s = 86400;
  SimTime sample_interval_s = 3600;
  // The metrics cover [warmup_s, duration_s): samples taken, jobs submitted and evictions, Reclaims
  // and dispatches made before warmup_s only fill the cluster (from empty) and are left out of
  // them; the time series still shows every sample. Federation scenarios only; default 0.
  SimTime warmup_s = 0;
  std::vector<uint64_t> seeds = {42};
  // Exactly one of: a cluster spec file (relative paths are relative to the scenario) or
  // generator options.
  std::string cluster_spec;
  std::optional<GeneratorOptions> cluster_generate;
  std::vector<JobTemplate> jobs;
  JobStream stream;
  std::vector<NodeEvent> events;
  std::vector<JobAction> job_actions;  // in the order listed (`events:`)
  NetworkModel network;
  std::optional<FailureModel> failures;  // none: only the listed events
  TidalWorkload tidal;
  UtilisationProfile utilisation;
  std::vector<SchedulerConfig> configurations;
  FederationSpec federation;  // enabled: the run is a federation run (cluster_* unused)
  // The root `queues:` (the organisation's queue tree), given to every configuration that names
  // none of its own.
  std::vector<QueueSpec> queues;
};

StatusOr<Scenario> ReadScenario(const std::string& path);
StatusOr<Scenario> ParseScenario(const std::string& text, const std::string& path);
// Reads one scheduler configuration — the schema of a scenario's `configurations:` entries — from
// a YAML file: a scenario (its entry named `name`; `name` may be empty when it lists exactly one)
// or a file whose root is one configuration mapping. Errors name the file, line and field.
StatusOr<SchedulerConfig> ReadSchedulerConfig(const std::string& path, const std::string& name);
// The same from the text of such a file (`path` names it in messages).
StatusOr<SchedulerConfig> ParseSchedulerConfigText(const std::string& text, const std::string& path,
                                                   const std::string& name);

// The engine fields every driver (the simulator, the federation's members, `estuary serve
// --config`) takes from configuration `c` alike: placement (align, topology, the victim
// selection) and Reclaim's rules (who reclaims, the grace period, the exit model). Each driver
// sets the rest itself (its actions, queue order, Standby, holds, ...).
void ApplyPlacementAndReclaim(const SchedulerConfig& c, EngineConfig& e);

// A job file as a user submits it (`estuary submit FILE`): one job of the job schema in JSON or
// YAML, checked as the service checks a job (DecodeJob, JobUse::kService), as JSON ready to send.
// `text` is the file's content; `path` names it in messages ("FILE:LINE: field 'gpus': ...").
StatusOr<nlohmann::json> ParseJobFileText(const std::string& text, const std::string& path);

// A queues file as an admin gives it (`estuary queues --set FILE`): a mapping with `queues:` (a
// list, the configuration's schema) and optionally `sharing:`, in JSON or YAML, checked by the
// queue schema's reader (the tree's own checks are the service's), as the JSON body of PUT
// /v1/queues. Errors: "FILE:LINE: field 'queues[1].guarantee.gpus': ...".
StatusOr<nlohmann::json> ParseQueuesFileText(const std::string& text, const std::string& path);

}  // namespace estuary
