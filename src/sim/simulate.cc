#include "sim/simulate.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <climits>
#include <memory>
#include <cmath>
#include <queue>
#include <set>
#include <tuple>

#include "common/rng.h"
#include "engine/engine.h"
#include "sched/actions/defrag.h"
#include "sched/actions/graceful_exit.h"
#include "sched/actions/migration.h"
#include "sched/plugins/register.h"
#include "sim/capacity_metrics.h"
#include "sim/cluster/cluster_spec.h"
#include "sim/job_stream.h"
#include "sim/metrics.h"
#include "sim/queue_metrics.h"
#include "sim/work_model.h"

namespace estuary {

StatusOr<ClusterState> LoadScenarioCluster(const Scenario& s) {
  if (s.cluster_generate) return GenerateCluster(*s.cluster_generate);
  return ReadClusterSpec(s.cluster_spec);
}

std::string SimJobStatusText(const SimJobRecord& r) {
  switch (r.status) {
    case SimJobStatus::kFinished:
      return "finished";
    case SimJobStatus::kRunning:
      return "running";
    case SimJobStatus::kPending:
      return "pending";
    case SimJobStatus::kInfeasible:
      return "infeasible: " + r.reason;
    case SimJobStatus::kCancelled:
      return "cancelled";
    case SimJobStatus::kTimedOut:
      return "timeout";
  }
  return "pending";
}

namespace {

// A job of the scenario; its current run's work and GPU time: RunWork (work_model.h; not for
// services).
struct SimJob : RunWork {
  JobTemplate tmpl;
  JobId id;                 // its job in the engine's state, once submitted
  bool submitted = false;
  SimTime submit = 0;
  SimTime duration = 0;
  SimTime first_start = -1;
  int32_t bound = 0;        // replicas bound now, as the engine's events said
  bool large = false;
  bool finished = false;    // its last run ended and it is not waiting again
  bool infeasible = false;  // never retried
  bool cancelled = false;   // a cancel_job event ended it
  bool timed_out = false;   // its walltime ended its last run (JobTemplate::walltime_s)
  std::string reason;       // when infeasible
  int32_t granted = 0;      // replicas at first start
  std::optional<std::pair<PlaneId, int>> spread_level;  // SimJobRecord's spread level
  std::optional<int64_t> domains;                       // at first start
  std::optional<double> entropy;                        // at first start
  uint64_t gen = 0;        // identifies the scheduled end event (bumped on every reschedule)
  SimTime finish = -1;     // when its last run ended
  bool restarted = false;  // it was evicted or requeued: its next start pays restart_cost_s
  int service = -1;        // index into the run's services (tidal), or -1
  int64_t util_pct = 0;    // UtilisationProfile of its class
  bool lender = false;     // a service or a job with standby windows, under a standby configuration
  std::vector<char> locked;  // per replica: never moved by defragmentation
  // RunWork's alloc_milli: the GPU milli of its usable replicas (bound, not in Standby, rounded
  // down to its usable step).
  int32_t lent = 0;  // of its bound replicas, those in Standby (their GPUs count as the borrowers')
};

constexpr SimTime kMaxSimTime = 1'000'000'000'000;  // "to the end of any run"

// A tidal service (TidalWorkload): its job, peak replicas and phase.
struct Service {
  size_t job = 0;
  int32_t peak = 1;
  SimTime phase = 0;
};

// The level a job's spread is measured at (SimJobRecord): its required level, else its preferred
// level, else plane "data" level "asw" when the cluster has it.
std::optional<std::pair<PlaneId, int>> SpreadLevel(const ClusterState& s, JobId j) {
  const TopologyConstraint& tc = s.job(j).spec.topology;
  if (tc.plane.valid() && tc.required_level >= 0) return std::pair{tc.plane, tc.required_level};
  if (tc.plane.valid() && tc.preferred_level >= 0) return std::pair{tc.plane, tc.preferred_level};
  const auto data = s.topology().FindPlane("data");
  const std::optional<int> asw = data ? s.topology().FindLevel(*data, "asw") : std::nullopt;
  if (asw) return std::pair{*data, *asw};
  return std::nullopt;
}

// Domains spanned by the job's bound replicas at its spread level, and the GPU entropy over them.
void MeasureSpread(const ClusterState& s, SimJob& j) {
  if (!j.spread_level) return;
  const auto [plane, level] = *j.spread_level;
  std::map<int64_t, int64_t> gpu_milli;  // domain (or -1 - node outside the plane) -> GPU milli
  for (TaskId t : s.job(j.id).tasks) {
    const Task& task = s.task(t);
    if (task.state != TaskState::kBound) continue;
    const DomainId d = s.topology().NodeDomain(task.node, plane, level);
    const int64_t key = d.valid() ? int64_t{d.value()} : -1 - int64_t{task.node.value()};
    gpu_milli[key] += int64_t{task.req.gpu_count} * task.req.gpu_milli;
  }
  j.domains = static_cast<int64_t>(gpu_milli.size());
  std::vector<int64_t> per_domain;
  int64_t total = 0;
  for (const auto& [d, g] : gpu_milli) {
    per_domain.push_back(g);
    total += g;
  }
  if (total > 0) j.entropy = GpuEntropy(per_domain);
}

// How many distinct domains of (plane, level) — nodes outside the plane together counting as one —
// and distinct nodes the bound tasks of job `j` sit on.
std::pair<size_t, size_t> DomainsAndNodes(const ClusterState& s, JobId j, PlaneId plane, int level) {
  std::set<uint32_t> domains, nodes;
  for (TaskId t : s.job(j).tasks) {
    if (s.task(t).state != TaskState::kBound) continue;
    domains.insert(s.topology().NodeDomain(s.task(t).node, plane, level).value());
    nodes.insert(s.task(t).node.value());
  }
  return {domains.size(), nodes.size()};
}

int64_t FreeNodes(const ClusterState& s) {
  int64_t n = 0;
  for (const Node& node : s.nodes()) n += node.Schedulable() && node.spec.gpu_count > 0 && node.full_free_gpus == node.spec.gpu_count;
  return n;
}

// GPUs of bound replicas beyond a whole usable step (doing no work).
int64_t UnusableGpus(const ClusterState& s, const std::vector<SimJob>& jobs) {
  int64_t gpus = 0;
  for (const SimJob& j : jobs) {
    if (j.started_at < 0) continue;
    const JobSpec& spec = s.job(j.id).spec;
    const int64_t usable = spec.usable_step > 0 ? spec.usable_step : std::max<int32_t>(1, spec.step);
    const int64_t bound = s.job(j.id).bound_tasks;
    gpus += (bound - bound / usable * usable) * j.tmpl.per_replica.gpu_count;
  }
  return gpus;
}

// Domains of (plane, level) with GPUs, all of them free.
int64_t WholeFree(const ClusterState& s, PlaneId plane, int level) {
  int64_t n = 0;
  for (DomainId d : s.topology().DomainsAt(plane, level)) {
    const DomainFree& f = s.domain_free(d);
    n += f.gpu_milli > 0 && f.gpu_free_milli == f.gpu_milli;
  }
  return n;
}

// Checks a template's topology and GPU model names against the cluster (the engine resolves the
// same names when the job is submitted) and resolves its models into t.per_replica.models, so
// that FGD's typical tasks carry the pin.
Status Resolve(const Scenario& s, const ClusterState& state, JobTemplate& t) {
  const std::string where = s.path + ":" + std::to_string(t.line) + ": job '" + t.name + "': ";
  if (!t.plane.empty()) {
    auto plane = state.topology().FindPlane(t.plane);
    if (!plane) return InvalidArgument(where + "the cluster has no plane '" + t.plane + "'");
    for (const std::string* level : {&t.required_level, &t.preferred_level}) {
      if (!level->empty() && !state.topology().FindLevel(*plane, *level)) {
        return InvalidArgument(where + "plane '" + t.plane + "' has no level '" + *level + "'");
      }
    }
  }
  for (const std::string& model : t.models) {
    const std::optional<GpuModelId> id = state.models().Find(model);
    if (!id) return InvalidArgument(where + "models: the cluster has no GPU model '" + model + "'");
    t.per_replica.models.Add(*id);
  }
  return Status::Ok();
}

// The engine's job for driver job `i`.
EngineJob ToEngineJob(size_t i, const SimJob& j) {
  EngineJob e = EngineJobOf(j.tmpl, static_cast<uint32_t>(i));
  e.locked = j.locked;
  return e;
}

// "path:line: configuration 'name': KEY: " for errors found when a configuration meets the cluster.
std::string ConfigWhere(const Scenario& sc, const SchedulerConfig& c, const std::string& key) {
  return sc.path + ":" + std::to_string(c.line) + ": configuration '" + c.name + "': " + key + ": ";
}

}  // namespace

Status ApplyDefrag(const Scenario& sc, const ClusterState& state, const SchedulerConfig& config, uint64_t seed,
                   const Stopwatch* planning_clock, EngineConfig* e) {
  const DefragConfig& dfc = config.defrag;
  if (!dfc.enabled) return Status::Ok();
  DefragOptions plan = dfc.plan;
  if (dfc.objective == "domains") {
    const auto plane = state.topology().FindPlane(dfc.objective_plane);
    if (!plane) {
      return InvalidArgument(ConfigWhere(sc, config, "defrag") + "objective_plane: the cluster has no plane '" +
                             dfc.objective_plane + "'");
    }
    const auto level = state.topology().FindLevel(*plane, dfc.objective_level);
    if (!level) {
      return InvalidArgument(ConfigWhere(sc, config, "defrag") + "objective_level: plane '" + dfc.objective_plane +
                             "' has no level '" + dfc.objective_level + "'");
    }
    plan.objective = DefragOptions::Objective::kWholeFreeDomains;
    plan.objective_plane = *plane;
    plan.objective_level = *level;
  }
  ESTUARY_RETURN_IF_ERROR(DefragAction::Validate(state, plan));
  ESTUARY_RETURN_IF_ERROR(MigrationExecutor::Validate(dfc.migration));
  e->defrag = dfc.ToEngine(std::move(plan));
  e->migration = dfc.migration;
  e->migration.seed = seed ^ 0x6d696772617465ULL;
  e->planning_clock = planning_clock;
  return Status::Ok();
}

void DefragCounterMetrics(const MigrationCounters& k, const DefragCounters& d, std::map<std::string, double>& m) {
  m["migrations_planned_count"] = static_cast<double>(k.planned);
  m["migrations_started_count"] = static_cast<double>(k.started);
  m["migrations_completed_count"] = static_cast<double>(k.completed);
  m["migrations_aborted_count"] = static_cast<double>(k.aborted);
  m["migrations_cancelled_count"] = static_cast<double>(k.cancelled);
  m["defrag_vacated_nodes_count"] = static_cast<double>(k.groups_completed);
  m["double_occupancy_gpu_hours"] = static_cast<double>(k.double_occupancy_gpu_milli_s) / kMilliPerGpu / 3600.0;
  m["defrag_plans_count"] = static_cast<double>(d.plans);
  m["defrag_triggered_count"] = static_cast<double>(d.triggered);
  m["defrag_assembled_count"] = static_cast<double>(d.assembled);
  m["defrag_plan_seconds_max"] = static_cast<double>(d.plan_ns_max) / 1e9;
  m["defrag_plan_seconds_mean"] = d.plans > 0 ? static_cast<double>(d.plan_ns_sum) / 1e9 / static_cast<double>(d.plans) : 0.0;
  m["defrag_planned_vacated_nodes_count"] = static_cast<double>(d.vacated_planned);
}

namespace {

// The engine's configuration for a scenario's scheduler configuration (names resolved against
// the cluster; errors name the configuration's key). `typical`: FGD's typical tasks.
StatusOr<EngineConfig> EngineConfigFor(const Scenario& sc, const ClusterState& state, const SchedulerConfig& config,
                                       uint64_t seed, std::shared_ptr<const TypicalTasks> typical,
                                       const Stopwatch* planning_clock) {
  EngineConfig e;
  e.name = config.name;
  e.policy = config.policy;
  e.typical = std::move(typical);
  e.seed = seed;
  ApplyPlacementAndReclaim(config, e);
  if (!config.pack_plane.empty()) {
    const auto plane = state.topology().FindPlane(config.pack_plane);
    if (!plane) return InvalidArgument(ConfigWhere(sc, config, "pack") + "plane: the cluster has no plane '" + config.pack_plane + "'");
    const auto level = state.topology().FindLevel(*plane, config.pack_level);
    if (!level) {
      return InvalidArgument(ConfigWhere(sc, config, "pack") + "level: plane '" + config.pack_plane + "' has no level '" +
                             config.pack_level + "'");
    }
    e.allocate.pack_plane = *plane;
    e.allocate.pack_level = *level;
  }
  // Reclaim (and its exit model) only with `preempt`; the simulator requeues evicted jobs itself.
  if (config.exit_mean_s > 0) {
    auto fitted = GracefulExit::Fitted(config.grace_s, config.exit_mean_s, config.exit_p95_s, seed);
    if (!fitted.ok()) return InvalidArgument(ConfigWhere(sc, config, "preempt") + fitted.status().message());
  }
  if (!config.preempt) std::erase(e.actions, EngineAction::kReclaim);
  if (config.backfill.easy) EnableBackfill(config.backfill, &e);
  e.absorb = config.absorb;
  e.priority_queue = config.priority_queue;
  e.requeue = true;
  e.hold_survivors = config.hold_survivors;
  e.standby_grace_s = config.standby_grace_s;
  e.lend_max_priority = config.lend_max_priority;
  // Queues: the tree checked against the cluster's GPU models here, where its lines are known.
  if (!config.queues.empty()) {
    int line = 0;
    const auto tree = QueueTree::Build(config.queues, state.models(), &line);
    if (!tree.ok()) return InvalidArgument(sc.path + ":" + std::to_string(line) + ": " + tree.status().message());
  }
  e.queues = config.queues;
  e.sharing = config.sharing;
  e.reserve = config.reserve.ToEngine();
  ESTUARY_RETURN_IF_ERROR(ApplyDefrag(sc, state, config, seed, planning_clock, &e));
  return e;
}

// One run of a scenario under one configuration and seed: the simulator as a driver of the Engine.
// It turns the scenario's world — arrivals, the work model's job ends, node failures and repairs,
// services' demand and Standby windows — into the engine's inputs at their times, runs the
// engine's cycle after every time at which something happened (and whenever the engine has work
// due: an eviction's grace end, a restore, a move, a hold's renewal, a defragmentation), and
// measures what the engine's events and state show. Every scheduling decision is the engine's.
class ScenarioRun {
 public:
  ScenarioRun(const Scenario& sc, const SchedulerConfig& config, uint64_t seed, bool check_invariants,
              bool record_events, bool check_quiet = false)
      : sc_(sc), config_(config), seed_(seed), check_(check_invariants), record_(record_events), quiet_(check_quiet) {}

  // The workload, the engine and the first events. Errors: bad names, bad configuration.
  Status Prepare(const ClusterState& cluster);
  // The events up to the scenario's duration. Errors: a broken invariant (check_invariants).
  Status Run();
  // The run's metrics and records.
  SimulateResult Finish();

 private:
  // Events, ordered by (time, kind, index): job ends, node events (listed, then generated repairs
  // in creation order), the failure model's next draw, arrivals, service demand and Standby
  // window edges, and the engine's own due times (walltime limits among them: the engine ends
  // such runs as its cycle at that time begins, after every event here — a run whose work ends
  // exactly at its limit finishes).
  enum EvKind : int { kEnd = 0, kNode = 1, kJobAction = 2, kFailureDraw = 3, kArrival = 4, kService = 5, kDue = 6 };
  struct Ev {
    SimTime t;
    int kind;
    size_t idx;     // kEnd, kArrival: job; kNode: node event; kJobAction: Scenario::job_actions
    SimTime start;  // kEnd: the job's gen when scheduled; generated repairs: the failure they repair
    bool operator>(const Ev& o) const { return std::tie(t, kind, idx) > std::tie(o.t, o.kind, o.idx); }
  };
  struct NodeEv {
    NodeId node;
    bool fail;
    bool generated;
  };

  Status MakeWorkload(const ClusterState& cluster);
  const ClusterState& state() const { return engine_->state(); }
  int32_t ServiceDemand(const Service& sv, SimTime t) const {
    const int64_t d = (int64_t{sv.peak} * TidalDemandPermille(sc_.tidal, sc_.tidal.start_hour, t + sv.phase) + 999) / 1000;
    return static_cast<int32_t>(std::clamp<int64_t>(d, 1, sv.peak));
  }
  void Log(SimTime t, size_t i, const char* kind, int64_t replicas, std::string detail = {}) {
    if (record_) res_.job_events.push_back({t, jobs_[i].tmpl.name, kind, static_cast<int32_t>(replicas), std::move(detail)});
  }
  // What the engine decided, as it happens (Engine::SetEventObserver).
  void OnEvent(const EngineEvent& e);
  // With check_invariants: the cycle just run at t ended at a fixed point — another cycle at the
  // same time, as a driver with another rhythm would run (the service runs one after any input),
  // decides nothing: no event, and every task, hold and starting move where it was. Internal
  // error naming the first new event otherwise.
  Status CheckFixedPoint(SimTime t);
  // With check_quiet: after the cycle at t, a cycle one second before the next event or the
  // engine's next due time (when that is after t) decides nothing either: nothing the engine does
  // changes with the clock alone before NextDue. Internal error naming the first new event.
  Status CheckQuietUntilDue(SimTime t);
  // A cycle at `at` decides nothing (no event; every task, hold and starting move where it was);
  // else an Internal error: `which` then what it decided.
  Status DecidesNothingAt(SimTime at, const std::string& which);
  void OnStart(size_t i, const EngineEvent& e);
  void OnReturned(size_t i, const EngineEvent& e);
  // The work model: Progress counts j's progress up to t at its current rate (and the work left
  // at the last checkpoint passed); Reschedule, after its replicas changed, recomputes its rate
  // and slowdown and moves its end event; StopRun ends its current run without finishing it (an
  // eviction or a failure): the work since its last checkpoint is lost and its next start pays
  // its restart cost.
  void Progress(SimJob& j, SimTime t);
  void Reschedule(size_t i, SimTime t);
  // How a run ended, for the goodput accounting.
  // Returns the time of the checkpoint its next run resumes from (periodic or on notice).
  SimTime StopRun(size_t i, SimTime t, RunEnd how);
  // Goodput accounting (docs/simulate.md, goodput_gpu_hours): Account counts j's allocated GPU
  // time up to t at its current allocation, and the snapshot at each periodic checkpoint passed;
  // CloseRun ends its current run at t — the GPU time up to the checkpoint kept (all of it when
  // it finished) counts as goodput, except its restart period, which counts as restart; the rest
  // is lost to `how` — and returns the checkpoint kept (RunWork::CloseRun).
  void Account(SimJob& j, SimTime t);
  // A lender's replicas in Standby changed to `lent` at t (for the goodput accounting).
  void SetLent(SimJob& j, int32_t lent, SimTime t);
  KeptCheckpoint CloseRun(SimJob& j, SimTime t, RunEnd how);
  // Checkpoint on notice: the engine's eviction notices since the last call, taken at t (a
  // victim with checkpoint_on_notice_s starts its checkpoint of the state at t, unless it is
  // writing one: RunWork::Notice).
  void TakeNotices(SimTime t);
  // Applies the events at time t; true when something happened (a cycle is due). `demand_step`:
  // the services' demand is to be followed now.
  bool ApplyEventsAt(SimTime t, bool* failed, bool* demand_step);
  void NodeDown(NodeId node, SimTime t, bool generated);
  // A cancel_job, resize_job or defrag event (nothing for a job not submitted yet or ended).
  void ApplyJobAction(const JobAction& a, SimTime t);
  void ScheduleFailureDraw();
  // Brings every running service to its Standby target: its replicas above its demand
  // standby_grace_s ahead (so that a restore completes by the time the demand is there). (A listed
  // job's windows are the engine's: Engine::SetStandbyWindows.)
  void FollowDemand(SimTime t);
  void SampleUntil(SimTime t);
  void Sample();
  // The means over the samples (metrics.md), into `m`.
  void SampleMeans(std::map<std::string, double>& m) const;
  // Finish's parts, each adding its metrics to `m` (simulate.h lists them): the defragmentation
  // counters; one record per submitted job and the delays by job size, priority and kind; the
  // counts of failures, evictions and jobs; the work model's GPU-hours (runs still going at the
  // end are closed first); the tidal figures (absorb, Standby, idle hours, LP completion).
  void DefragMetrics(std::map<std::string, double>& m) const;
  void JobRecordsAndDelays(std::map<std::string, double>& m);
  void CountMetrics(std::map<std::string, double>& m) const;
  void WorkMetrics(std::map<std::string, double>& m);
  void TidalMetrics(std::map<std::string, double>& m) const;

  const Scenario& sc_;
  const SchedulerConfig& config_;
  uint64_t seed_;
  bool check_, record_, quiet_;
  uint64_t events_seen_ = 0;    // events observed (OnEvent)
  std::string last_event_;      // the last one, as a line (CheckFixedPoint's message)
  SimulateResult res_;
  std::vector<SimJob> jobs_;
  std::vector<Service> services_;
  std::vector<size_t> lenders_;
  std::vector<size_t> job_index_;  // per engine JobId: the driver's job (SIZE_MAX: none)
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<QueueMetrics> queue_metrics_;  // with queues only
  SteadyStopwatch planning_clock_;
  std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> events_;
  std::set<SimTime> due_;  // times of pushed kDue events not yet reached
  std::vector<NodeEv> node_events_;
  std::map<std::string, NodeId> node_by_name_;
  std::map<std::string, size_t> job_by_name_;  // listed jobs
  std::vector<SimTime> last_failure_;  // per node: when it last went down
  std::optional<Rng> failure_rng_;
  double failure_clock_ = 0;  // time of the next draw, in seconds (exact, before truncation)
  double failure_rate_ = 0;   // draws per second
  std::optional<PlaneId> data_, param_, net_plane_;
  std::optional<int> asw_, pod_;
  int net_level_ = 0;
  int64_t net_factor_ = kSlowBase;
  // Counters.
  int64_t slowed_runs_ = 0, node_failures_ = 0, requeued_by_failure_ = 0, shrunk_by_failure_ = 0;
  int64_t walltime_kills_ = 0;  // runs stopped at their walltime limit
  int64_t evictions_ = 0, hp_evictions_ = 0, absorbed_replicas_ = 0, standby_entries_ = 0, standby_restores_ = 0,
          restore_evictions_ = 0;
  double lost_gpu_hours_ = 0;
  // Goodput accounting, GPU milli x seconds: all runs, and how they split (CloseRun).
  WorkTotals work_;
  std::vector<double> asws_per_large_;
  std::optional<std::pair<int64_t, int64_t>> after_failure_;
  // Samples (metrics.md): sums over samples.
  struct IdleSums {
    double fractional = 0, stranded = 0, insufficient_cpu = 0;
  };
  std::vector<IdleSums> idle_sums_;
  double slack_sum_ = 0, free_nodes_sum_ = 0, placeable8_sum_ = 0, free_asws_ = 0, free_pods_ = 0, held_idle_ = 0,
         alloc_hp_sum_ = 0, alloc_all_sum_ = 0, harvest_sum_ = 0, util_sum_ = 0, hp_demand_sum_ = 0;
  double alloc_area_ = 0, stranded_sum_ = 0, w128_ = 0, w256_ = 0, a128_ = 0, capacity_ = 1;
  int64_t harvest_samples_ = 0, samples_ = 0;
  SimTime last_t_ = 0, next_sample_ = 0;
};

Status ScenarioRun::MakeWorkload(const ClusterState& cluster) {
  // Listed jobs, then generated ones (Poisson arrivals over the run), then tidal services.
  for (const JobTemplate& t : sc_.jobs) {
    SimJob j;
    j.tmpl = t;
    j.submit = t.submit_s;
    j.duration = t.duration_s;
    jobs_.push_back(j);
  }
  const TidalWorkload& tidal = sc_.tidal;
  Rng rng(seed_);
  if (sc_.stream.arrivals_per_hour > 0) {
    std::vector<double> shares;
    for (const GeneratedClass& g : sc_.stream.classes) shares.push_back(g.share);
    const double rate = sc_.stream.arrivals_per_hour / 3600.0;
    double t = 0;
    for (int64_t k = 0;; ++k) {
      t += PoissonGap(rng, rate);
      if (t >= static_cast<double>(sc_.duration_s)) break;
      const size_t c = WeightedPick(rng, shares);
      if (sc_.stream.classes[c].diurnal &&
          rng.UniformDouble() * 1000.0 >= static_cast<double>(TidalDemandPermille(tidal, tidal.start_hour, static_cast<SimTime>(t)))) {
        continue;  // thinned: the class's rate follows the curve
      }
      if (!sc_.stream.classes[c].InBurst(static_cast<SimTime>(t))) continue;  // outside its bursts
      SimJob j;
      j.tmpl = sc_.stream.classes[c].job;
      j.tmpl.name += "-" + std::to_string(k);
      j.submit = static_cast<SimTime>(t);
      j.duration = ExpDuration(rng, static_cast<double>(sc_.stream.classes[c].job.duration_s));
      jobs_.push_back(j);
    }
  }
  // Tidal services: peaks and phases from a stream of their own, so that they do not disturb the
  // job stream's draws.
  if (tidal.services > 0) {
    Rng srng(seed_ ^ 0x7365727669636573ULL);
    for (int64_t k = 0; k < tidal.services; ++k) {
      Service sv;
      sv.peak = tidal.replicas_min + static_cast<int32_t>(srng.Uniform(static_cast<uint64_t>(tidal.replicas_max - tidal.replicas_min + 1)));
      sv.phase = tidal.phase_jitter_s == 0 ? 0
                                           : static_cast<SimTime>(srng.Uniform(static_cast<uint64_t>(2 * tidal.phase_jitter_s + 1))) -
                                                 tidal.phase_jitter_s;
      SimJob j;
      j.tmpl.line = tidal.line;
      j.tmpl.name = "svc-" + std::to_string(k);
      j.tmpl.job_class = "hp-inference";
      j.tmpl.queue = tidal.queue;
      j.tmpl.priority = kJobClasses[0].priority;
      j.tmpl.replicas = j.tmpl.min_replicas = sv.peak;
      j.tmpl.per_replica = tidal.per_replica;
      j.tmpl.duration_s = kMaxSimTime;
      j.duration = kMaxSimTime;
      j.service = static_cast<int>(services_.size());
      sv.job = jobs_.size();
      services_.push_back(sv);
      jobs_.push_back(j);
    }
  }
  // Locked tasks (never moved by defragmentation): drawn per task, in job order, from a stream of
  // their own, so every configuration of a seed locks the same tasks.
  Rng lrng(seed_ ^ 0x6c6f636b6564ULL);
  // Each job's queue: a leaf of the configuration's queues, its priority within every ceiling.
  QueueTree queues;
  if (!config_.queues.empty()) {
    // A bad tree is named at its own line here (as EngineConfigFor would), before any job is
    // found to be "without queues" because of it.
    int line = 0;
    auto tree = QueueTree::Build(config_.queues, cluster.models(), &line);
    if (!tree.ok()) return InvalidArgument(sc_.path + ":" + std::to_string(line) + ": " + tree.status().message());
    queues = std::move(*tree);
  }
  std::set<size_t> checked;  // templates are shared by a class's jobs: each checked once
  for (size_t i = 0; i < jobs_.size(); ++i) {
    SimJob& j = jobs_[i];
    ESTUARY_RETURN_IF_ERROR(Resolve(sc_, cluster, j.tmpl));
    if (checked.insert(static_cast<size_t>(j.tmpl.line)).second) {
      const std::string where = sc_.path + ":" + std::to_string(j.tmpl.line) + ": job '" + j.tmpl.name + "': field 'queue': ";
      if (queues.empty() && !j.tmpl.queue.empty()) {
        return InvalidArgument(where + "configuration '" + config_.name + "' has no queues");
      }
      if (!queues.empty()) {
        if (j.tmpl.queue.empty()) return InvalidArgument(where + "missing (configuration '" + config_.name + "' has queues)");
        const std::optional<size_t> q = queues.Find(j.tmpl.queue);
        if (!q) return InvalidArgument(where + "no queue '" + j.tmpl.queue + "'");
        if (!queues.leaf(*q)) return InvalidArgument(where + "queue '" + j.tmpl.queue + "' has queues under it: jobs run in its leaves");
        for (int p = static_cast<int>(*q); p >= 0; p = queues.parent(static_cast<size_t>(p))) {
          const QueueSpec& spec = queues.spec(static_cast<size_t>(p));
          if (j.tmpl.priority > spec.max_priority) {
            return InvalidArgument(where + "priority " + std::to_string(j.tmpl.priority) + " is above the ceiling of queue '" +
                                   spec.name + "' (" + std::to_string(spec.max_priority) + ")");
          }
        }
      }
    }
    j.lender = config_.standby && (j.service >= 0 || !j.tmpl.standby.empty());
    if (j.lender) lenders_.push_back(i);
    const UtilisationProfile& u = sc_.utilisation;
    const std::string& c = j.tmpl.job_class;
    j.util_pct = c == "hp-inference" ? u.hp_inference
                 : c == "hp-training" ? u.hp_training
                 : c == "dev"         ? u.dev
                 : c == "lp"          ? u.lp
                 : c == "spot"        ? u.spot
                                      : u.other;
    j.large = int64_t{j.tmpl.replicas} * j.tmpl.per_replica.gpu_count >= 128;
    if (j.tmpl.locked_permille > 0) {
      for (int32_t r = 0; r < j.tmpl.replicas; ++r) {
        j.locked.push_back(lrng.Uniform(1000) < static_cast<uint64_t>(j.tmpl.locked_permille));
      }
    }
  }
  return Status::Ok();
}

Status ScenarioRun::Prepare(const ClusterState& cluster) {
  res_.configuration = config_.name;
  res_.seed = seed_;
  auto policy = OpenbPolicy(config_.policy);
  if (!policy.ok()) return policy.status();
  ESTUARY_RETURN_IF_ERROR(MakeWorkload(cluster));
  // Node events refer to nodes by name.
  for (const Node& n : cluster.nodes()) node_by_name_[n.spec.name] = n.id;
  for (const NodeEvent& e : sc_.events) {
    if (!node_by_name_.count(e.node)) return InvalidArgument(sc_.path + ": event at " + std::to_string(e.at_s) + " s: no node '" + e.node + "'");
  }
  // The network model: the plane and level whose domains a multi-node job should not span.
  if (sc_.network.enabled) {
    const std::string where = sc_.path + ":" + std::to_string(sc_.network.line) + ": network: ";
    net_plane_ = cluster.topology().FindPlane(sc_.network.plane);
    if (!net_plane_) return InvalidArgument(where + "plane: the cluster has no plane '" + sc_.network.plane + "'");
    const auto l = cluster.topology().FindLevel(*net_plane_, sc_.network.level);
    if (!l) return InvalidArgument(where + "level: plane '" + sc_.network.plane + "' has no level '" + sc_.network.level + "'");
    net_level_ = *l;
    net_factor_ = kSlowBase + sc_.network.comm_share_pct * sc_.network.cross_domain_slowdown_pct;
  }
  // FGD's typical tasks: the whole workload's, as the published simulator counts a trace.
  std::shared_ptr<const TypicalTasks> typical;
  if (config_.policy == "fgd") {
    std::vector<TaskRequest> reqs;
    for (const SimJob& j : jobs_) reqs.push_back(j.tmpl.per_replica);
    typical = std::make_shared<const TypicalTasks>(TypicalTasks::FromWorkload(reqs));
  }
  auto ec = EngineConfigFor(sc_, cluster, config_, seed_, std::move(typical), &planning_clock_);
  if (!ec.ok()) return ec.status();
  auto engine = Engine::Create(cluster, std::move(*ec));
  if (!engine.ok()) return engine.status();
  engine_ = std::move(*engine);
  if (engine_->queue_book().enabled()) queue_metrics_ = std::make_unique<QueueMetrics>(*engine_);
  engine_->SetEventObserver([this](const EngineEvent& e) { OnEvent(e); });

  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (jobs_[i].submit < sc_.duration_s) events_.push({jobs_[i].submit, kArrival, i, 0});
  }
  for (const NodeEvent& e : sc_.events) node_events_.push_back({node_by_name_[e.node], e.fail, false});
  for (size_t i = 0; i < node_events_.size(); ++i) events_.push({sc_.events[i].at_s, kNode, i, 0});
  for (size_t i = 0; i < jobs_.size(); ++i) job_by_name_.emplace(jobs_[i].tmpl.name, i);
  for (size_t i = 0; i < sc_.job_actions.size(); ++i) {
    if (sc_.job_actions[i].at_s < sc_.duration_s) events_.push({sc_.job_actions[i].at_s, kJobAction, i, 0});
  }
  // Standby: services follow their demand every step_s (listed windows are the engine's).
  if (config_.standby && !services_.empty()) events_.push({0, kService, 0, 0});
  for (SimTime at : {engine_->NextDue().value_or(kMaxSimTime)}) {
    if (at < sc_.duration_s && due_.insert(at).second) events_.push({at, kDue, 0, 0});
  }
  // The failure model: the nodes' independent Poisson processes (rate 1/MTBF each) as one
  // cluster-wide process of rate nodes/MTBF whose every draw picks a node uniformly; a draw that
  // picks a node already down is skipped, which leaves each node failing at rate 1/MTBF while up
  // (the exponential is memoryless). Draws are made one at a time, so the cost is one event per
  // draw, whatever the cluster size.
  last_failure_.assign(cluster.num_nodes(), -1);
  if (sc_.failures && cluster.num_nodes() > 0) {
    // Mixed with a constant so that the draws differ from the job stream's (Rng(seed)).
    failure_rng_.emplace(sc_.failures->seed.value_or(seed_) ^ 0x6661696c75726573ULL);
    failure_rate_ = static_cast<double>(cluster.num_nodes()) / (sc_.failures->node_mtbf_h * 3600.0);
    ScheduleFailureDraw();
  }
  data_ = cluster.topology().FindPlane("data");
  asw_ = data_ ? cluster.topology().FindLevel(*data_, "asw") : std::nullopt;
  param_ = cluster.topology().FindPlane("param");
  pod_ = param_ ? cluster.topology().FindLevel(*param_, "rdma_pod") : std::nullopt;
  idle_sums_.assign(ProbeShapes().size(), IdleSums{});
  capacity_ = static_cast<double>(std::max<int64_t>(1, cluster.total_gpu_milli()));
  return Status::Ok();
}

void ScenarioRun::ScheduleFailureDraw() {
  failure_clock_ += -std::log(1.0 - failure_rng_->UniformDouble()) / failure_rate_;
  if (failure_clock_ < static_cast<double>(sc_.duration_s)) events_.push({static_cast<SimTime>(failure_clock_), kFailureDraw, 0, 0});
}

void ScenarioRun::Progress(SimJob& j, SimTime t) {
  if (j.service < 0) j.RunWork::Progress(t, j.tmpl.checkpoint_interval_s);
}

void ScenarioRun::Reschedule(size_t i, SimTime t) {
  SimJob& j = jobs_[i];
  if (j.started_at < 0 || j.service >= 0) return;
  Progress(j, t);
  SetLent(j, j.lent, t);  // its allocation changed
  const JobSpec& spec = state().job(j.id).spec;
  const int64_t bound = state().job(j.id).bound_tasks;
  const int64_t usable = spec.usable_step > 0 ? spec.usable_step : std::max<int32_t>(1, spec.step);
  const int64_t rate = j.tmpl.linear_scaling ? bound / usable * usable : (bound > 0 ? j.tmpl.replicas : 0);
  int64_t slow = kSlowBase;
  if (net_plane_) {
    const auto [domains, nodes] = DomainsAndNodes(state(), j.id, *net_plane_, net_level_);
    if (nodes > 1 && domains > 1) slow = net_factor_;
  }
  if (rate == j.rate && slow == j.slow && j.gen > 0) return;  // the scheduled end stands
  j.rate = rate;
  j.slow = slow;
  ++j.gen;
  if (rate == 0) return;  // no usable replicas: no progress until it grows
  events_.push({j.EndAt(t), kEnd, i, static_cast<SimTime>(j.gen)});
}

SimTime ScenarioRun::StopRun(size_t i, SimTime t, RunEnd how) {
  SimJob& j = jobs_[i];
  Progress(j, t);
  const KeptCheckpoint kept = CloseRun(j, t, how);
  j.work_left = kept.work_left;  // resumed from the checkpoint kept, periodic or on notice
  j.started_at = -1;
  j.bound = 0;
  j.rate = 0;
  ++j.gen;
  j.restarted = true;
  return kept.at;
}

void ScenarioRun::Account(SimJob& j, SimTime t) {
  if (j.service < 0) j.RunWork::Account(t, j.tmpl.checkpoint_interval_s, 0, work_);
}

KeptCheckpoint ScenarioRun::CloseRun(SimJob& j, SimTime t, RunEnd how) {
  Account(j, t);
  return j.RunWork::CloseRun(t, j.tmpl.checkpoint_interval_s, j.tmpl.checkpoint_on_notice_s, how, work_);
}

void ScenarioRun::SetLent(SimJob& j, int32_t lent, SimTime t) {
  if (j.started_at < 0 || j.service >= 0) return;
  Account(j, t);  // at the allocation it had until now
  j.lent = lent;
  const JobSpec& spec = state().job(j.id).spec;
  const int64_t step = spec.usable_step > 0 ? spec.usable_step : std::max<int32_t>(1, spec.step);
  const int64_t held = std::max<int64_t>(0, j.bound - j.lent), usable = held / step * step;
  j.alloc_milli = usable * j.tmpl.per_replica.TotalGpuMilli();
  j.unusable_milli = (held - usable) * j.tmpl.per_replica.TotalGpuMilli();
}

void ScenarioRun::TakeNotices(SimTime t) {
  for (const Engine::EvictionNotice& n : engine_->TakeEvictionNotices()) {
    if (n.job >= jobs_.size()) continue;
    SimJob& j = jobs_[n.job];
    if (j.service >= 0 || !j.StartsNoticeCheckpoint(t, j.tmpl.checkpoint_on_notice_s)) continue;
    Progress(j, t);
    Account(j, t);
    j.Notice(t);
  }
}

void ScenarioRun::OnStart(size_t i, const EngineEvent& e) {
  SimJob& j = jobs_[i];
  const SimTime now = e.t;
  j.started_at = now;
  j.bound = e.replicas;
  if (j.first_start < 0) {
    j.first_start = now;
    j.granted = e.replicas;
    j.spread_level = SpreadLevel(state(), j.id);
    MeasureSpread(state(), j);
    if (j.service < 0) j.work_left = j.duration * j.tmpl.replicas * kWorkScale;
  }
  j.work_at_checkpoint = j.work_left;
  j.progress_t = now + (j.restarted ? j.tmpl.restart_cost_s : 0);
  j.acct_t = now;
  j.restart_end = j.progress_t;
  j.alloc_milli = j.unusable_milli = 0;  // Reschedule sets them
  j.lent = 0;
  j.rate = 0;
  j.slow = kSlowBase;
  Reschedule(i, now);
  slowed_runs_ += j.slow != kSlowBase;
  Log(now, i, "start", e.replicas, e.detail);
  if (j.large && asw_) asws_per_large_.push_back(static_cast<double>(DomainsAndNodes(state(), j.id, *data_, *asw_).first));
}

void ScenarioRun::OnReturned(size_t i, const EngineEvent& e) {
  SimJob& j = jobs_[i];
  if (e.never) {  // dropped from the queue: the cluster cannot grow
    j.infeasible = true;
    j.reason = e.detail;
    return;
  }
  if (e.detail == "node failed") {
    ++requeued_by_failure_;
    Log(e.t, i, "requeue", 0);
    StopRun(i, e.t, RunEnd::kFailed);
    return;
  }
  // Evicted whole (Reclaim, or its replicas borrowed a Standby replica's GPUs that resumes): the
  // GPUs it held lose the work since its last checkpoint.
  const bool restore = e.detail == "standby restore";
  Log(e.t, i, "evict", 0, restore ? "restore" : "reclaim");
  const int64_t gpu_milli = int64_t{j.bound} * j.tmpl.per_replica.TotalGpuMilli();
  const SimTime kept = StopRun(i, e.t, RunEnd::kEvicted);  // the last checkpoint, periodic or on notice
  lost_gpu_hours_ += static_cast<double>(gpu_milli) / kMilliPerGpu * static_cast<double>(e.t - kept) / 3600.0;
  ++evictions_;
  hp_evictions_ += j.tmpl.priority >= kHpPriority;
  restore_evictions_ += restore;
}

void ScenarioRun::OnEvent(const EngineEvent& e) {
  ++events_seen_;
  if (check_) {
    last_event_ = std::string(EngineEventKindName(e.kind)) + " job " + jobs_[e.job].tmpl.name + " replicas " +
                  std::to_string(e.replicas) + (e.detail.empty() ? "" : " (" + e.detail + ")");
  }
  if (queue_metrics_) queue_metrics_->OnEvent(e);
  const size_t i = e.job;
  SimJob& j = jobs_[i];
  switch (e.kind) {
    case EngineEvent::Kind::kStarted: OnStart(i, e); break;
    case EngineEvent::Kind::kGrown:
      absorbed_replicas_ += e.replicas - j.bound;
      j.bound = e.replicas;
      Reschedule(i, e.t);
      Log(e.t, i, "grow", e.replicas);
      break;
    case EngineEvent::Kind::kShrunk: {
      const bool failure = e.detail == "node failed";
      if (failure) {
        ++shrunk_by_failure_;
      } else {
        ++evictions_;
        hp_evictions_ += j.tmpl.priority >= kHpPriority;
      }
      j.bound = e.replicas;
      Reschedule(i, e.t);
      Log(e.t, i, "shrink", e.replicas, failure ? "failure" : e.detail == "resized" ? "resized" : "reclaim");
      break;
    }
    case EngineEvent::Kind::kReturned: OnReturned(i, e); break;
    case EngineEvent::Kind::kReclaim: break;
    case EngineEvent::Kind::kStandby:
      ++standby_entries_;
      SetLent(j, e.replicas, e.t);
      Log(e.t, i, "standby", e.replicas, e.detail);
      break;
    case EngineEvent::Kind::kRestored:
      ++standby_restores_;
      SetLent(j, e.replicas, e.t);
      Log(e.t, i, "restore", e.replicas, e.detail);
      break;
    // A replica that could not enter Standby after all keeps its GPUs: nothing is lent.
    case EngineEvent::Kind::kStandbyRefused: Log(e.t, i, "standby-refused", e.replicas, e.detail); break;
    // Slurm's rule, which the engine keeps: a run still going at its walltime limit is stopped
    // then, its work unfinished; the job ends (no requeue).
    case EngineEvent::Kind::kTimedOut:
      Progress(j, e.t);
      CloseRun(j, e.t, RunEnd::kUnfinished);  // its GPU time counts (goodput up to its checkpoint)
      j.started_at = -1;
      j.bound = 0;
      j.timed_out = true;
      j.finish = e.t;
      ++walltime_kills_;
      Log(e.t, i, "timeout", 0);
      break;
    case EngineEvent::Kind::kMoveStarted: Log(e.t, i, "migrate-start", e.replicas, e.detail); break;
    case EngineEvent::Kind::kMoved: Log(e.t, i, "migrate", e.replicas, e.detail); break;
    case EngineEvent::Kind::kMoveAborted: Log(e.t, i, "migrate-abort", e.replicas, e.detail); break;
    case EngineEvent::Kind::kMoveCancelled: Log(e.t, i, "migrate-cancel", e.replicas, e.detail); break;
  }
}

void ScenarioRun::NodeDown(NodeId node, SimTime t, bool generated) {
  node_failures_ += state().node(node).state != NodeState::kDown;
  last_failure_[node.value()] = t;
  res_.node_events.push_back({t, state().node(node).spec.name, true, generated});
  engine_->FailNode(node, t);  // the jobs that lost replicas shrink or are requeued (OnEvent)
}

void ScenarioRun::FollowDemand(SimTime t) {
  for (size_t i : lenders_) {
    const SimJob& j = jobs_[i];
    if (j.started_at < 0 || j.service < 0) continue;
    const uint32_t id = static_cast<uint32_t>(i);
    const int64_t bound = engine_->Running(id) - engine_->Restoring(id);  // active and Standby, not restoring
    const int64_t target = bound - std::min<int64_t>(bound, ServiceDemand(services_[j.service], t + config_.standby_grace_s));
    engine_->SetStandby(id, static_cast<int32_t>(target), t);
  }
}

void ScenarioRun::ApplyJobAction(const JobAction& a, SimTime t) {
  if (a.kind == JobAction::Kind::kDefrag) {
    (void)engine_->Defrag(DefragOptions{}, t);  // the default options are valid on any cluster
    return;
  }
  const size_t i = job_by_name_.at(a.job);  // the parser checked the name
  SimJob& j = jobs_[i];
  if (!j.submitted || j.finished || j.cancelled || j.infeasible) return;
  if (a.kind == JobAction::Kind::kCancel) {
    if (j.started_at >= 0) {
      Progress(j, t);
      CloseRun(j, t, RunEnd::kUnfinished);
    }
    engine_->Cancel(static_cast<uint32_t>(i), t);
    j.started_at = -1;  // its end event no longer applies
    j.bound = 0;
    j.cancelled = true;
    Log(t, i, "cancel", 0);
    return;
  }
  // The job's work stays what it was submitted with; the engine reports a shrink.
  std::string why;
  (void)engine_->Resize(static_cast<uint32_t>(i), a.min, a.max, t, &why);
}

bool ScenarioRun::ApplyEventsAt(SimTime t, bool* failed, bool* demand_step) {
  // False while the time's events are only failure-model draws that picked a down node, repairs
  // that no longer apply and ends of runs that are over (evicted, requeued or rescheduled since):
  // nothing happened, so no cycle runs. It would see the state its last cycle saw, the run stays
  // the same as with the listed events, and the service, which has no such events, runs none.
  bool happened = false;
  while (!events_.empty() && events_.top().t == t) {
    const Ev e = events_.top();
    events_.pop();
    happened |= e.kind != kNode && e.kind != kFailureDraw && e.kind != kEnd;
    if (e.kind == kEnd) {
      SimJob& j = jobs_[e.idx];
      if (j.started_at < 0 || static_cast<SimTime>(j.gen) != e.start) continue;  // rescheduled or requeued since
      happened = true;
      Progress(j, t);
      CloseRun(j, t, RunEnd::kFinished);
      engine_->Finish(static_cast<uint32_t>(e.idx), t);
      j.started_at = -1;
      j.bound = 0;
      j.finished = true;
      j.finish = t;
      Log(t, e.idx, "finish", 0);
    } else if (e.kind == kNode) {
      const NodeEv ne = node_events_[e.idx];
      if (ne.fail) {
        *failed = happened = true;
        NodeDown(ne.node, t, ne.generated);
      } else if (!ne.generated || (state().node(ne.node).state == NodeState::kDown && last_failure_[ne.node.value()] == e.start)) {
        happened = true;  // a generated repair applies unless a listed repair (and maybe a new failure) came first
        res_.node_events.push_back({t, state().node(ne.node).spec.name, false, ne.generated});
        engine_->RestoreNode(ne.node);
      }
    } else if (e.kind == kJobAction) {
      ApplyJobAction(sc_.job_actions[e.idx], t);
    } else if (e.kind == kFailureDraw) {
      const NodeId node(static_cast<uint32_t>(failure_rng_->Uniform(state().num_nodes())));
      if (state().node(node).state != NodeState::kDown) {
        *failed = happened = true;
        NodeDown(node, t, true);
        events_.push({t + sc_.failures->repair_s, kNode, node_events_.size(), t});
        node_events_.push_back({node, false, true});
      }
      ScheduleFailureDraw();
    } else if (e.kind == kService) {
      *demand_step = true;
      if (e.idx == 0 && t + sc_.tidal.step_s < sc_.duration_s) events_.push({t + sc_.tidal.step_s, kService, 0, 0});
    } else if (e.kind == kDue) {
      due_.erase(t);
    } else {  // kArrival
      SimJob& j = jobs_[e.idx];
      (void)engine_->Submit(ToEngineJob(e.idx, j), SubmitMode::kEnqueue, t);
      j.id = *engine_->JobOf(static_cast<uint32_t>(e.idx));
      j.submitted = true;
      if (job_index_.size() <= j.id.value()) job_index_.resize(j.id.value() + 1, SIZE_MAX);
      job_index_[j.id.value()] = e.idx;
      if (j.lender && j.service < 0) {
        std::vector<StandbyWindowSpec> windows;
        for (const StandbyWindow& w : j.tmpl.standby) windows.push_back({w.from_s, w.to_s, w.replicas});
        engine_->SetStandbyWindows(static_cast<uint32_t>(e.idx), std::move(windows), t);
      }
    }
  }
  return happened;
}

Status ScenarioRun::Run() {
  while (!events_.empty() && events_.top().t < sc_.duration_s) {
    const SimTime t = events_.top().t;
    SampleUntil(t);
    bool failed = false, demand_step = false;
    const bool happened = ApplyEventsAt(t, &failed, &demand_step);
    if (demand_step) FollowDemand(t);
    (void)engine_->TakeEvents();  // seen by OnEvent already
    TakeNotices(t);
    if (!happened) continue;
    (void)engine_->RunCycle(t);
    ++res_.cycles;
    TakeNotices(t);
    if (check_) ESTUARY_RETURN_IF_ERROR(CheckFixedPoint(t));
    if (check_ && quiet_) ESTUARY_RETURN_IF_ERROR(CheckQuietUntilDue(t));
    if (queue_metrics_) queue_metrics_->AfterCycle(t);
    if (const auto due = engine_->NextDue(); due && *due < sc_.duration_s && due_.insert(std::max(*due, t)).second) {
      events_.push({std::max(*due, t), kDue, 0, 0});
    }
    if (failed) after_failure_ = std::make_pair(FreeNodes(state()), UnusableGpus(state(), jobs_));
    if (check_) {
      const Status st = state().CheckInvariants();
      if (!st.ok()) return Internal("at t=" + std::to_string(t) + ": " + st.message());
    }
  }
  SampleUntil(sc_.duration_s);
  // The run ends: moves still under way are given up (their reservations released).
  engine_->AbortMoves(sc_.duration_s);
  (void)engine_->TakeEvents();
  if (check_) {
    const Status st = state().CheckInvariants();
    if (!st.ok()) return Internal("at the end: " + st.message());
    if (!state().available_capacity_reservations().empty()) return Internal("at the end: a capacity reservation is left");
  }
  return Status::Ok();
}

namespace {

// What the cycles decided so far, as the state shows it, in O(nodes + tasks bound): each node's
// hold and bound tasks with their Standby and borrowing, the capacity reservations still
// available, and the moves starting.
std::vector<int64_t> Decided(const Engine& e) {
  const ClusterState& s = e.state();
  std::vector<int64_t> d;
  for (const Node& n : s.nodes()) {
    d.push_back(n.reservation.valid() ? int64_t{n.reservation.value()} : -1);
    d.push_back(static_cast<int64_t>(n.tasks.size()));
    for (TaskId id : n.tasks) {
      const Task& t = s.task(id);
      d.push_back(int64_t{id.value()} * 4 + (t.standby ? 2 : 0) + (t.borrowed ? 1 : 0));
    }
  }
  for (ReservationId r : s.available_capacity_reservations()) d.push_back(r.value());
  d.push_back(static_cast<int64_t>(e.StartingMoves().size()));
  return d;
}

}  // namespace

Status ScenarioRun::DecidesNothingAt(SimTime at, const std::string& which) {
  const std::vector<int64_t> before = Decided(*engine_);
  const uint64_t seen = events_seen_;
  (void)engine_->RunCycle(at);
  TakeNotices(at);
  if (events_seen_ != seen) return Internal(which + "decided " + std::to_string(events_seen_ - seen) + " more: the last " + last_event_);
  if (Decided(*engine_) != before) return Internal(which + "moved a task, a hold or a move without an event");
  return Status::Ok();
}

Status ScenarioRun::CheckFixedPoint(SimTime t) {
  return DecidesNothingAt(t, "at t=" + std::to_string(t) + ": a second cycle at the same time ");
}

Status ScenarioRun::CheckQuietUntilDue(SimTime t) {
  SimTime next = sc_.duration_s;
  if (!events_.empty()) next = std::min(next, events_.top().t);
  if (const auto due = engine_->NextDue()) next = std::min(next, std::max<SimTime>(*due, t));
  const SimTime probe = next - 1;
  if (probe <= t) return Status::Ok();
  return DecidesNothingAt(probe, "after the cycle at t=" + std::to_string(t) + ", a cycle at t=" + std::to_string(probe) +
                                     " (before the next input or due time, " + std::to_string(next) + ") ");
}

void ScenarioRun::SampleUntil(SimTime t) {
  const double alloc = 100.0 * static_cast<double>(state().allocated_gpu_milli()) / capacity_;
  alloc_area_ += alloc * static_cast<double>(t - last_t_);
  last_t_ = t;
  while (next_sample_ < t) {
    Sample();
    next_sample_ += sc_.sample_interval_s;
  }
}

void ScenarioRun::Sample() {
  const double alloc = 100.0 * static_cast<double>(state().allocated_gpu_milli()) / capacity_;
  SimSample sample{next_sample_, alloc, FreeNodes(state()), static_cast<int64_t>(engine_->queued())};
  // Defragmentation's measures (metrics.md §7): GPU nodes with slack (some but not all GPU
  // milli free), whole free nodes, and 8-GPU tasks placeable on wholly free GPUs of ready
  // nodes (CPU and memory not considered).
  {
    int64_t slack = 0, placeable8 = 0;
    for (const Node& n : state().nodes()) {
      if (n.spec.gpu_count == 0) continue;
      const int64_t cap = int64_t{n.spec.gpu_count} * kMilliPerGpu;
      slack += n.gpu_free_total > 0 && n.gpu_free_total < cap;
      if (n.state == NodeState::kReady) placeable8 += n.full_free_gpus / 8;
    }
    slack_sum_ += static_cast<double>(slack);
    placeable8_sum_ += static_cast<double>(placeable8);
    free_nodes_sum_ += static_cast<double>(sample.free_nodes);
  }
  if (asw_) sample.free_asws = WholeFree(state(), *data_, *asw_);
  if (pod_) sample.free_rdma_pods = WholeFree(state(), *param_, *pod_);
  // Allocation ratios (metrics.md §4), per GPU node, in milli-GPU: hp_active (HP tasks not
  // in Standby), hp_standby, lp_alloc (LP tasks, borrowers included); residual =
  // max(hp_standby - lp_alloc, 0) still counts as HP-claimed. Standby harvest: over nodes
  // with hp_standby > 0, min(lp_alloc / hp_standby, 1). Idle GPUs (doing no work): free GPU
  // milli on nodes that are not down, lent GPUs no borrower uses, and the service replicas
  // above their demand that are not in Standby. Modelled utilisation: every bound task's
  // GPUs x its class's profile — a service's active replicas at min(demand / active, 1) of it.
  double hp_share = 0, any_share = 0, harvest = 0, idle = 0, busy = 0, hp_demand = 0;
  int64_t gpu_nodes = 0, standby_nodes = 0;
  for (const Node& n : state().nodes()) {
    if (n.spec.gpu_count == 0) continue;
    ++gpu_nodes;
    int64_t hp_active = 0, hp_standby = 0, lp = 0;
    for (TaskId t : n.tasks) {
      const Task& task = state().task(t);
      const int64_t g = int64_t{task.gpus.size} * task.req.gpu_milli;
      if (task.standby) {
        hp_standby += g;
      } else if (task.priority >= kHpPriority) {
        hp_active += g;
      } else {
        lp += g;
      }
      const SimJob& j = jobs_[job_index_[task.job.value()]];
      if (!task.standby && j.service < 0) {
        busy += static_cast<double>(g * j.util_pct) / 100.0;
        if (task.priority >= kHpPriority) hp_demand += static_cast<double>(g);
      }
    }
    const int64_t cap = int64_t{n.spec.gpu_count} * kMilliPerGpu;
    const int64_t residual = std::max<int64_t>(hp_standby - lp, 0);
    hp_share += static_cast<double>(hp_active + residual) / static_cast<double>(cap);
    any_share += static_cast<double>(std::min(hp_active + lp, cap) + residual) / static_cast<double>(cap);
    if (hp_standby > 0) {
      ++standby_nodes;
      harvest += std::min(1.0, static_cast<double>(lp) / static_cast<double>(hp_standby));
    }
    if (n.state != NodeState::kDown) {
      idle += static_cast<double>(n.gpu_free_total + int64_t{std::popcount(n.lent_free)} * kMilliPerGpu);
    }
  }
  const int64_t gpus_per_service = int64_t{sc_.tidal.per_replica.gpu_count} * kMilliPerGpu;
  for (const Service& sv : services_) {
    const SimJob& j = jobs_[sv.job];
    if (j.started_at < 0) continue;
    int64_t active = 0;
    for (TaskId t : state().job(j.id).tasks) active += state().task(t).state == TaskState::kBound && !state().task(t).standby;
    const int64_t demand = ServiceDemand(sv, next_sample_);
    idle += static_cast<double>(std::max<int64_t>(active - demand, 0) * gpus_per_service);
    busy += static_cast<double>(std::min(active, demand) * gpus_per_service * j.util_pct) / 100.0;
    hp_demand += static_cast<double>(std::min(active, demand) * gpus_per_service);
  }
  idle += static_cast<double>(UnusableGpus(state(), jobs_)) * kMilliPerGpu;
  if (gpu_nodes > 0) {
    sample.alloc_ratio_hp_pct = 100.0 * hp_share / static_cast<double>(gpu_nodes);
    sample.alloc_ratio_hp_lp_pct = 100.0 * any_share / static_cast<double>(gpu_nodes);
    alloc_hp_sum_ += sample.alloc_ratio_hp_pct;
    alloc_all_sum_ += sample.alloc_ratio_hp_lp_pct;
  }
  if (standby_nodes > 0) {
    harvest_sum_ += 100.0 * harvest / static_cast<double>(standby_nodes);
    ++harvest_samples_;
  }
  sample.idle_gpus = idle / kMilliPerGpu;
  const int64_t local = sc_.tidal.start_hour * 3600 + next_sample_;
  sample.local_hour = static_cast<int>(local % 86400 / 3600);
  const double idle_hours = sample.idle_gpus * static_cast<double>(sc_.sample_interval_s) / 3600.0;
  res_.idle_gpu_hours_by_hour[sample.local_hour] += idle_hours;
  util_sum_ += 100.0 * busy / capacity_;
  hp_demand_sum_ += 100.0 * hp_demand / capacity_;
  const std::vector<IdleCauses> causes = IdleGpuCauses(state());
  for (size_t k = 0; k < causes.size(); ++k) {
    const IdleCauses& c = causes[k];
    if (c.shape.name == "8G64C") stranded_sum_ += c.stranded;
    idle_sums_[k].fractional += c.fractional;
    idle_sums_[k].stranded += c.stranded;
    idle_sums_[k].insufficient_cpu += c.insufficient_cpu;
  }
  res_.samples.push_back(sample);
  if (queue_metrics_) queue_metrics_->Sample(next_sample_);
  if (asw_) free_asws_ += static_cast<double>(sample.free_asws);
  if (pod_) free_pods_ += static_cast<double>(sample.free_rdma_pods);
  if (config_.reserve.enabled) {
    int64_t idle = 0;
    for (const NodeFit& f : state().fits()) idle += f.reserved_for.valid() ? f.gpu_free_total : 0;
    held_idle_ += static_cast<double>(idle) / kMilliPerGpu;
  }
  if (asw_) {
    const auto f128 = JobsFulfillable(state(), 128, "data", "asw");
    const auto f256 = JobsFulfillable(state(), 256, "data", "asw");
    if (f128.ok() && f256.ok()) {
      w128_ += static_cast<double>(f128->within);
      w256_ += static_cast<double>(f256->within);
      a128_ += static_cast<double>(f128->across);
    }
  }
  ++samples_;
}

void ScenarioRun::SampleMeans(std::map<std::string, double>& m) const {
  if (samples_ == 0) return;
  m["nodes_with_slack_mean"] = slack_sum_ / static_cast<double>(samples_);
  m["free_nodes_mean"] = free_nodes_sum_ / static_cast<double>(samples_);
  m["placeable_8gpu_tasks_mean"] = placeable8_sum_ / static_cast<double>(samples_);
  m["stranded_gpus_8g_mean"] = stranded_sum_ / static_cast<double>(samples_);
  m["alloc_ratio_hp_pct"] = alloc_hp_sum_ / static_cast<double>(samples_);
  m["alloc_ratio_hp_lp_pct"] = alloc_all_sum_ / static_cast<double>(samples_);
  m["modelled_util_pct"] = util_sum_ / static_cast<double>(samples_);
  m["hp_demand_pct"] = hp_demand_sum_ / static_cast<double>(samples_);
  for (size_t k = 0; k < idle_sums_.size(); ++k) {
    std::string shape = ProbeShapes()[k].name;
    for (char& ch : shape) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const double n = static_cast<double>(samples_);
    m["idle_fractional_gpus_" + shape + "_mean"] = idle_sums_[k].fractional / n;
    m["idle_stranded_gpus_" + shape + "_mean"] = idle_sums_[k].stranded / n;
    m["idle_insufficient_cpu_gpus_" + shape + "_mean"] = idle_sums_[k].insufficient_cpu / n;
  }
  if (asw_) {
    m["within_asw_fulfillable_128_count"] = w128_ / static_cast<double>(samples_);
    m["within_asw_fulfillable_256_count"] = w256_ / static_cast<double>(samples_);
    m["across_asw_fulfillable_128_count"] = a128_ / static_cast<double>(samples_);
    m["free_asws_mean"] = free_asws_ / static_cast<double>(samples_);
  }
  if (pod_) m["free_rdma_pods_mean"] = free_pods_ / static_cast<double>(samples_);
  if (config_.reserve.enabled) m["held_idle_gpus_mean"] = held_idle_ / static_cast<double>(samples_);
}

void ScenarioRun::DefragMetrics(std::map<std::string, double>& m) const {
  // Every configuration; zero without `defrag`.
  DefragCounterMetrics(engine_->migration_counters(), engine_->defrag_counters(), m);
}

void ScenarioRun::JobRecordsAndDelays(std::map<std::string, double>& m) {
  int64_t started = 0, infeasible = 0;
  std::vector<double> hp_delays, delays_8gpu;
  std::vector<double> delays, large_delays, multinode_domains, multinode_entropy;
  // Delay by job size (GPUs at max replicas): [lo, hi) buckets.
  struct SizeBucket {
    const char* name;
    int64_t lo, hi;
    std::vector<double> delays;
  };
  std::vector<SizeBucket> buckets = {{"lt8", 0, 8, {}}, {"8to127", 8, 128, {}}, {"128to511", 128, 512, {}},
                                     {"ge512", 512, INT64_MAX, {}}};
  for (const SimJob& j : jobs_) {
    if (j.submit >= sc_.duration_s) continue;
    started += j.first_start >= 0;
    infeasible += j.infeasible;
    SimJobRecord rec = JobRecordOf(j.tmpl, j.submit, j.first_start, sc_.duration_s);
    rec.granted = j.granted;
    rec.status = j.infeasible        ? SimJobStatus::kInfeasible
                 : j.cancelled       ? SimJobStatus::kCancelled
                 : j.timed_out && j.started_at < 0 ? SimJobStatus::kTimedOut
                 : j.started_at >= 0 ? SimJobStatus::kRunning
                 : j.finished        ? SimJobStatus::kFinished
                                     : SimJobStatus::kPending;
    rec.reason = j.reason;
    rec.domains = j.domains;
    rec.entropy = j.entropy;
    res_.jobs.push_back(rec);
    if (j.first_start >= 0 && j.tmpl.replicas > 1) {
      if (j.domains) multinode_domains.push_back(static_cast<double>(*j.domains));
      if (j.entropy) multinode_entropy.push_back(*j.entropy);
    }
    const double d = static_cast<double>(rec.delay_s);
    delays.push_back(d);
    if (j.large) large_delays.push_back(d);
    if (j.tmpl.priority >= kHpPriority) hp_delays.push_back(d);
    if (j.tmpl.per_replica.gpu_count == 8) delays_8gpu.push_back(d);
    for (SizeBucket& b : buckets) {
      if (rec.gpus >= b.lo && rec.gpus < b.hi) b.delays.push_back(d);
    }
  }
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  for (const SizeBucket& b : buckets) {
    if (b.delays.empty()) continue;
    m[std::string("sched_delay_p90_gpus_") + b.name + "_s"] = Percentile(b.delays, 90);
    m[std::string("sched_delay_mean_gpus_") + b.name + "_s"] = mean(b.delays);
  }
  m["jobs_started_count"] = static_cast<double>(started);
  m["jobs_infeasible_count"] = static_cast<double>(infeasible);
  m["sched_delay_p90_s"] = Percentile(delays, 90);
  if (!large_delays.empty()) m["sched_delay_p90_large_s"] = Percentile(large_delays, 90);
  if (!delays_8gpu.empty()) m["sched_delay_p90_8gpu_s"] = Percentile(delays_8gpu, 90);
  if (!hp_delays.empty()) {
    m["hp_sched_delay_p50_s"] = Percentile(hp_delays, 50);
    m["hp_sched_delay_p90_s"] = Percentile(hp_delays, 90);
    m["hp_sched_delay_p99_s"] = Percentile(hp_delays, 99);
  }
  if (!multinode_domains.empty()) m["domains_per_multinode_job_mean"] = mean(multinode_domains);
  if (!multinode_entropy.empty()) m["entropy_per_multinode_job_mean"] = mean(multinode_entropy);
  if (!asws_per_large_.empty()) m["asws_per_large_job_mean"] = mean(asws_per_large_);
}

void ScenarioRun::CountMetrics(std::map<std::string, double>& m) const {
  m["free_nodes"] = static_cast<double>(FreeNodes(state()));
  m["allocated_unusable_gpus"] = static_cast<double>(UnusableGpus(state(), jobs_));
  if (after_failure_) {
    m["free_nodes_after_failure"] = static_cast<double>(after_failure_->first);
    m["allocated_unusable_gpus_after_failure"] = static_cast<double>(after_failure_->second);
  }
  m["gpu_alloc_pct_mean"] = alloc_area_ / static_cast<double>(sc_.duration_s);
  m["node_failures_count"] = static_cast<double>(node_failures_);
  m["jobs_requeued_by_failure_count"] = static_cast<double>(requeued_by_failure_);
  // Only for workloads with walltimes, so that other runs' summaries stay as they were.
  if (std::any_of(jobs_.begin(), jobs_.end(), [](const SimJob& j) { return j.tmpl.walltime_s > 0; })) {
    m["jobs_timed_out_count"] = static_cast<double>(walltime_kills_);
  }
  m["jobs_shrunk_by_failure_count"] = static_cast<double>(shrunk_by_failure_);
  m["jobs_pending_end_count"] = static_cast<double>(engine_->queued());
  m["evictions_count"] = static_cast<double>(evictions_);
  m["hp_evictions_count"] = static_cast<double>(hp_evictions_);
  m["preemption_lost_gpu_hours"] = lost_gpu_hours_;
  if (sc_.network.enabled) m["network_slowed_runs_count"] = static_cast<double>(slowed_runs_);
  if (config_.reserve.enabled) m["reservations_made_count"] = static_cast<double>(engine_->reservations_made());
}

void ScenarioRun::WorkMetrics(std::map<std::string, double>& m) {
  // Goodput: the runs still going at the end keep what their last checkpoint kept.
  for (SimJob& j : jobs_) {
    if (j.started_at >= 0 && j.service < 0) CloseRun(j, sc_.duration_s, RunEnd::kUnfinished);
  }
  estuary::WorkMetrics(work_, true, m);
}

void ScenarioRun::TidalMetrics(std::map<std::string, double>& m) const {
  if (config_.absorb) m["absorbed_replicas_count"] = static_cast<double>(absorbed_replicas_);
  if (config_.standby) {
    m["standby_entries_count"] = static_cast<double>(standby_entries_);
    m["standby_restores_count"] = static_cast<double>(standby_restores_);
    m["restore_evictions_count"] = static_cast<double>(restore_evictions_);
    if (harvest_samples_ > 0) m["standby_harvest_pct"] = harvest_sum_ / static_cast<double>(harvest_samples_);
  }
  double idle_hours = 0, night_idle_hours = 0;
  for (int h = 0; h < 24; ++h) {
    idle_hours += res_.idle_gpu_hours_by_hour[h];
    if (h < 6) night_idle_hours += res_.idle_gpu_hours_by_hour[h];
  }
  m["idle_gpu_hours"] = idle_hours;
  m["night_idle_gpu_hours"] = night_idle_hours;
  double lp_jct = 0;
  int64_t lp_finished = 0;
  for (const SimJob& j : jobs_) {
    if (j.finish < 0 || j.tmpl.priority >= kHpPriority) continue;
    lp_jct += static_cast<double>(j.finish - j.submit);
    ++lp_finished;
  }
  if (lp_finished > 0) m["lp_jct_mean_s"] = lp_jct / static_cast<double>(lp_finished);
  m["lp_jobs_finished_count"] = static_cast<double>(lp_finished);
}

SimulateResult ScenarioRun::Finish() {
  auto& m = res_.metrics;
  DefragMetrics(m);
  CountMetrics(m);
  JobRecordsAndDelays(m);
  WorkMetrics(m);
  TidalMetrics(m);
  SampleMeans(m);
  if (queue_metrics_) {
    queue_metrics_->Finish(sc_.duration_s, m);
    res_.queue_samples = queue_metrics_->TakeSamples();
  }
  return std::move(res_);
}

}  // namespace

SimJobRecord JobRecordOf(const JobTemplate& t, SimTime submit, SimTime first_start, SimTime end) {
  SimJobRecord rec;
  rec.name = t.name;
  rec.replicas = t.replicas;
  rec.gpus_per_replica = t.per_replica.gpu_count;
  rec.gpus = int64_t{rec.replicas} * rec.gpus_per_replica;
  rec.submit_s = submit;
  rec.start_s = first_start;
  rec.delay_s = (first_start >= 0 ? first_start : end) - submit;
  return rec;
}

StatusOr<SimulateResult> RunScenario(const Scenario& sc, const ClusterState& cluster, const SchedulerConfig& config,
                                     uint64_t seed, bool check_invariants, bool record_events, bool check_quiet) {
  ScenarioRun run(sc, config, seed, check_invariants, record_events, check_quiet);
  ESTUARY_RETURN_IF_ERROR(run.Prepare(cluster));
  ESTUARY_RETURN_IF_ERROR(run.Run());
  return run.Finish();
}

}  // namespace estuary
