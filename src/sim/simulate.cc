#include "sim/simulate.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cctype>
#include <climits>
#include <cmath>
#include <queue>
#include <set>
#include <tuple>

#include "common/rng.h"
#include "sched/actions/allocate.h"
#include "sched/actions/defrag.h"
#include "sched/actions/failure.h"
#include "sched/actions/migration.h"
#include "sched/actions/graceful_exit.h"
#include "sched/actions/preempt.h"
#include "sched/actions/reserve.h"
#include "sched/actions/absorb.h"
#include "sched/actions/standby.h"
#include "sched/plugins/register.h"
#include "sim/capacity_metrics.h"
#include "sim/cluster/cluster_spec.h"
#include "sim/job_stream.h"
#include "sim/metrics.h"
#include "sched/framework/pending_queue.h"

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
  }
  return "pending";
}

namespace {

struct SimJob {
  JobTemplate tmpl;
  JobId id;
  SimTime submit = 0;
  SimTime duration = 0;
  SimTime first_start = -1;
  SimTime started_at = -1;  // start of the current run (-1: not running)
  bool large = false;
  bool finished = false;    // its last run ended and it is not waiting again
  bool infeasible = false;  // never retried
  std::string reason;       // when infeasible
  int32_t granted = 0;      // replicas at first start
  std::optional<std::pair<PlaneId, int>> spread_level;  // SimJobRecord's spread level
  std::optional<int64_t> domains;                       // at first start
  std::optional<double> entropy;                        // at first start
  bool reclaiming = false;  // an HP job whose victims are being evicted (grace period)
  SimTime reclaim_refused = -1;  // when Reclaim last found it infeasible even with preemption
  uint64_t refused_seq = 0;      // ClusterState::release_seq() then
  // The work model (JobTemplate::linear_scaling): work in replica-seconds x kWorkScale at max
  // replicas; a running job progresses `rate` replica units per second (max replicas when fixed,
  // its usable replicas when linear), slowed by `slow` / 10000 (the network model).
  int64_t work_left = 0;
  int64_t work_at_checkpoint = 0;  // work_left at the current run's last checkpoint (or start)
  int64_t rate = 0;
  int64_t slow = 10000;
  SimTime progress_t = 0;  // progress is counted up to here (after a restart: start + restart cost)
  uint64_t gen = 0;        // identifies the scheduled end event (bumped on every reschedule)
  SimTime finish = -1;     // when its last run ended
  bool restarted = false;  // it was evicted or requeued: its next start pays restart_cost_s
  int service = -1;        // index into the run's services (tidal), or -1
  int64_t util_pct = 0;    // UtilisationProfile of its class
  bool lender = false;     // a service or a job with standby windows, under a standby configuration
  SimTime queued_at = -1;  // when it was last queued (arrival or requeue)
};

constexpr SimTime kMaxSimTime = 1'000'000'000'000;  // "to the end of any run"
constexpr int64_t kWorkScale = 10000;  // work units per replica-second
constexpr int64_t kSlowBase = 10000;   // `slow` of a job that is not slowed

// A tidal service (TidalWorkload): its job, peak replicas and phase.
struct Service {
  size_t job = 0;
  int32_t peak = 1;
  SimTime phase = 0;
};

// An eviction in its grace period: at `at`, the victims' tasks free their resources.
struct Eviction {
  SimTime at = 0;
  JobId for_job;
  std::vector<TaskId> tasks;
  std::vector<JobId> whole;  // evicted whole (requeued); the others' tasks are elastic surplus
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

// Turns a template into a job of the state, resolving its topology and GPU model names. The
// models are resolved into t.per_replica.models too, so that everything built from the template
// (queue shapes, what-if requests) carries the pin.
StatusOr<JobId> Materialize(const Scenario& s, ClusterState& state, JobTemplate& t, const std::string& name) {
  JobSpec js;
  js.name = name;
  js.max_replicas = t.replicas;
  js.min_replicas = t.min_replicas > 0 ? t.min_replicas : t.replicas;
  js.step = t.step;
  js.usable_step = t.usable_step;
  js.priority = t.priority;
  js.preemptible = t.preemptible;
  js.checkpoint_interval_s = t.checkpoint_interval_s;
  js.restart_cost_s = t.restart_cost_s;
  if (!t.plane.empty()) {
    const std::string where = s.path + ":" + std::to_string(t.line) + ": job '" + t.name + "': ";
    auto plane = state.topology().FindPlane(t.plane);
    if (!plane) return InvalidArgument(where + "the cluster has no plane '" + t.plane + "'");
    js.topology.plane = *plane;
    for (auto [level, out] : {std::pair{&t.required_level, &js.topology.required_level},
                              std::pair{&t.preferred_level, &js.topology.preferred_level}}) {
      if (level->empty()) continue;
      auto l = state.topology().FindLevel(*plane, *level);
      if (!l) return InvalidArgument(where + "plane '" + t.plane + "' has no level '" + *level + "'");
      *out = *l;
    }
  }
  for (const std::string& model : t.models) {
    const std::optional<GpuModelId> id = state.models().Find(model);
    if (!id) {
      return InvalidArgument(s.path + ":" + std::to_string(t.line) + ": job '" + t.name +
                             "': models: the cluster has no GPU model '" + model + "'");
    }
    t.per_replica.models.Add(*id);
  }
  const JobId j = state.AddJob(js);
  for (int32_t i = 0; i < t.replicas; ++i) state.AddTask(j, name + "-" + std::to_string(i), t.per_replica, t.priority);
  return j;
}

int64_t FreeNodes(const ClusterState& s) {
  int64_t n = 0;
  for (const Node& node : s.nodes()) n += node.Schedulable() && node.spec.gpu_count > 0 && node.full_free_gpus == node.spec.gpu_count;
  return n;
}

int64_t BoundReplicas(const ClusterState& s, JobId j) { return s.job(j).bound_tasks; }

int64_t UnusableGpus(const ClusterState& s, const std::vector<SimJob>& jobs) {
  int64_t gpus = 0;
  for (const SimJob& j : jobs) {
    if (j.started_at < 0) continue;
    const JobSpec& spec = s.job(j.id).spec;
    const int64_t usable = spec.usable_step > 0 ? spec.usable_step : std::max<int32_t>(1, spec.step);
    const int64_t bound = BoundReplicas(s, j.id);
    gpus += (bound - bound / usable * usable) * j.tmpl.per_replica.gpu_count;
  }
  return gpus;
}

}  // namespace

StatusOr<SimulateResult> RunScenario(const Scenario& sc, const ClusterState& cluster, const SchedulerConfig& config,
                                     uint64_t seed, bool check_invariants, bool record_events) {
  SimulateResult res;
  res.configuration = config.name;
  res.seed = seed;
  ClusterState state = cluster;
  auto policy = OpenbPolicy(config.policy);
  if (!policy.ok()) return policy.status();

  // The workload: listed jobs, then generated ones (Poisson arrivals over the run).
  std::vector<SimJob> jobs;
  for (const JobTemplate& t : sc.jobs) {
    SimJob j;
    j.tmpl = t;
    j.submit = t.submit_s;
    j.duration = t.duration_s;
    jobs.push_back(j);
  }
  // The tidal curve: demand at time t, per-mille of the peak (weekend scale included).
  const TidalWorkload& tidal = sc.tidal;
  auto demand_permille = [&](SimTime t) { return TidalDemandPermille(tidal, tidal.start_hour, t); };
  Rng rng(seed);
  if (sc.stream.arrivals_per_hour > 0) {
    std::vector<double> shares;
    for (const GeneratedClass& g : sc.stream.classes) shares.push_back(g.share);
    const double rate = sc.stream.arrivals_per_hour / 3600.0;
    double t = 0;
    for (int64_t k = 0;; ++k) {
      t += PoissonGap(rng, rate);
      if (t >= static_cast<double>(sc.duration_s)) break;
      const size_t c = WeightedPick(rng, shares);
      if (sc.stream.classes[c].diurnal && rng.UniformDouble() * 1000.0 >= static_cast<double>(demand_permille(static_cast<SimTime>(t)))) {
        continue;  // thinned: the class's rate follows the curve
      }
      SimJob j;
      j.tmpl = sc.stream.classes[c].job;
      j.tmpl.name += "-" + std::to_string(k);
      j.submit = static_cast<SimTime>(t);
      j.duration = ExpDuration(rng, static_cast<double>(sc.stream.classes[c].job.duration_s));
      jobs.push_back(j);
    }
  }
  // Tidal services: peaks and phases from a stream of their own, so that they do not disturb
  // the job stream's draws.
  std::vector<Service> services;
  if (tidal.services > 0) {
    Rng srng(seed ^ 0x7365727669636573ULL);
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
      j.tmpl.priority = kJobClasses[0].priority;
      j.tmpl.replicas = j.tmpl.min_replicas = sv.peak;
      j.tmpl.per_replica = tidal.per_replica;
      j.tmpl.duration_s = kMaxSimTime;
      j.duration = kMaxSimTime;
      j.service = static_cast<int>(services.size());
      sv.job = jobs.size();
      services.push_back(sv);
      jobs.push_back(j);
    }
  }
  // Service demand (replicas) of service `k` at t: ceil(peak x demand(t + phase)), in [1, peak].
  auto service_demand = [&](const Service& sv, SimTime t) -> int32_t {
    const int64_t d = (int64_t{sv.peak} * demand_permille(t + sv.phase) + 999) / 1000;
    return static_cast<int32_t>(std::clamp<int64_t>(d, 1, sv.peak));
  };
  for (SimJob& j : jobs) {
    j.lender = config.standby && (j.service >= 0 || !j.tmpl.standby.empty());
    const UtilisationProfile& u = sc.utilisation;
    const std::string& c = j.tmpl.job_class;
    j.util_pct = c == "hp-inference" ? u.hp_inference
                 : c == "hp-training" ? u.hp_training
                 : c == "dev"         ? u.dev
                 : c == "lp"          ? u.lp
                 : c == "spot"        ? u.spot
                                      : u.other;
    auto id = Materialize(sc, state, j.tmpl, j.tmpl.name);
    if (!id.ok()) return id.status();
    j.id = *id;
    j.large = int64_t{j.tmpl.replicas} * j.tmpl.per_replica.gpu_count >= 128;
    j.spread_level = SpreadLevel(state, j.id);
  }
  // Locked tasks (never moved by defragmentation): drawn per task, in job order, from a stream of
  // their own, so every configuration of a seed locks the same tasks.
  std::vector<char> locked(state.tasks().size(), 0);
  {
    Rng lrng(seed ^ 0x6c6f636b6564ULL);
    for (const SimJob& j : jobs) {
      if (j.tmpl.locked_permille == 0) continue;
      for (TaskId t : state.job(j.id).tasks) locked[t.value()] = lrng.Uniform(1000) < static_cast<uint64_t>(j.tmpl.locked_permille);
    }
  }
  std::vector<size_t> lenders;  // jobs that may lend Standby replicas under this configuration
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].lender) lenders.push_back(i);
  }
  // jobs[job_index[id]] is the job of state job `id`.
  std::vector<size_t> job_index(state.jobs().size(), SIZE_MAX);
  for (size_t i = 0; i < jobs.size(); ++i) job_index[jobs[i].id.value()] = i;
  auto log = [&](SimTime t, size_t i, const char* kind, int64_t replicas, std::string detail = {}) {
    if (record_events) res.job_events.push_back({t, jobs[i].tmpl.name, kind, static_cast<int32_t>(replicas), std::move(detail)});
  };
  // "TASK@NODE:GPUS" of a bound task.
  auto where = [&](TaskId task) {
    const Task& tk = state.task(task);
    std::string out = tk.name + "@" + state.node(tk.node).spec.name + ":";
    for (size_t g = 0; g < tk.gpus.size; ++g) out += (g ? "," : "") + std::to_string(tk.gpus.idx[g]);
    return out;
  };
  // Node events refer to nodes by name.
  std::map<std::string, NodeId> node_by_name;
  for (const Node& n : state.nodes()) node_by_name[n.spec.name] = n.id;
  for (const NodeEvent& e : sc.events) {
    if (!node_by_name.count(e.node)) return InvalidArgument(sc.path + ": event at " + std::to_string(e.at_s) + " s: no node '" + e.node + "'");
  }

  SessionOptions so;
  so.policy = *policy;
  so.seed = seed;
  PluginContext ctx{&state, nullptr};
  TypicalTasks typical;
  if (config.policy == "fgd") {
    std::vector<TaskRequest> reqs;
    for (const SimJob& j : jobs) reqs.push_back(j.tmpl.per_replica);
    typical = TypicalTasks::FromWorkload(reqs);
    ctx.typical = &typical;
  }
  auto session = Session::Open(state, BuiltinRegistry(), ctx, so);
  if (!session.ok()) return session.status();
  AllocateOptions aopts;
  aopts.align = config.align;
  aopts.topology = config.topology;
  GracefulExit exit = GracefulExit::Fixed(config.grace_s);
  if (config.exit_mean_s > 0) {
    auto fitted = GracefulExit::Fitted(config.grace_s, config.exit_mean_s, config.exit_p95_s, seed);
    if (!fitted.ok()) {
      return InvalidArgument(sc.path + ":" + std::to_string(config.line) + ": configuration '" + config.name +
                             "': preempt: " + fitted.status().message());
    }
    exit = *fitted;
  }
  if (!config.pack_plane.empty()) {
    const std::string where = sc.path + ":" + std::to_string(config.line) + ": configuration '" + config.name + "': pack: ";
    const auto plane = state.topology().FindPlane(config.pack_plane);
    if (!plane) return InvalidArgument(where + "plane: the cluster has no plane '" + config.pack_plane + "'");
    const auto level = state.topology().FindLevel(*plane, config.pack_level);
    if (!level) {
      return InvalidArgument(where + "level: plane '" + config.pack_plane + "' has no level '" + config.pack_level + "'");
    }
    aopts.pack_plane = *plane;
    aopts.pack_level = *level;
  }

  // Node events: the listed ones (index = position in the scenario), then the repairs of
  // generated failures, appended as the failures happen.
  struct NodeEv {
    NodeId node;
    bool fail;
    bool generated;
  };
  std::vector<NodeEv> node_events;
  for (const NodeEvent& e : sc.events) node_events.push_back({node_by_name[e.node], e.fail, false});

  // Events, ordered by (time, kind, index): job ends, node events (listed, then generated repairs
  // in creation order), the failure model's next draw, arrivals.
  // kTick: a scheduling cycle with nothing else happening (reservations are re-planned on ticks).
  // kService: service demand and Standby windows are re-evaluated; kRestore: a replica's restore
  // from Standby completes (its borrowers leave).
  // kDefrag: the periodic defragmentation plan; kMigrate: a migration move is due (ready or timed
  // out); kDefragTrigger: a large job has waited trigger_after_s since it was queued (idx: the
  // job; start: when it was queued).
  enum EvKind : int { kEnd = 0, kNode = 1, kFailureDraw = 2, kArrival = 3, kTick = 4, kEvict = 5, kService = 6,
                      kRestore = 7, kDefrag = 8, kMigrate = 9, kDefragTrigger = 10 };
  struct Ev {
    SimTime t;
    int kind;
    size_t idx;     // kEnd, kArrival: job; kNode: node event
    SimTime start;  // kEnd: the job's gen when scheduled; generated repairs: the failure they repair
    bool operator>(const Ev& o) const {
      return std::tie(t, kind, idx) > std::tie(o.t, o.kind, o.idx);
    }
  };
  std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> events;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].submit < sc.duration_s) events.push({jobs[i].submit, kArrival, i, 0});
  }
  for (size_t i = 0; i < node_events.size(); ++i) events.push({sc.events[i].at_s, kNode, i, 0});
  if (config.reserve.enabled) events.push({config.reserve.replan_s, kTick, 0, 0});
  // Defragmentation: the planner's plans run on the executor; one plan at a time.
  const DefragConfig& dfc = config.defrag;
  std::optional<MigrationExecutor> executor;
  DefragOptions defrag_options = dfc.plan;
  if (dfc.enabled) {
    if (dfc.objective == "domains") {
      const std::string where = sc.path + ":" + std::to_string(config.line) + ": configuration '" + config.name + "': defrag: ";
      const auto plane = state.topology().FindPlane(dfc.objective_plane);
      if (!plane) return InvalidArgument(where + "objective_plane: the cluster has no plane '" + dfc.objective_plane + "'");
      const auto level = state.topology().FindLevel(*plane, dfc.objective_level);
      if (!level) {
        return InvalidArgument(where + "objective_level: plane '" + dfc.objective_plane + "' has no level '" +
                               dfc.objective_level + "'");
      }
      defrag_options.objective = DefragOptions::Objective::kWholeFreeDomains;
      defrag_options.objective_plane = *plane;
      defrag_options.objective_level = *level;
    }
    ESTUARY_RETURN_IF_ERROR(DefragAction::Validate(state, defrag_options));
    ESTUARY_RETURN_IF_ERROR(MigrationExecutor::Validate(dfc.migration));
    MigrationOptions mo = dfc.migration;
    mo.seed = seed ^ 0x6d696772617465ULL;
    executor.emplace(mo);
    if (dfc.interval_s > 0) events.push({dfc.interval_s, kDefrag, 0, 0});
  }
  std::set<SimTime> migrate_due;  // times of pushed kMigrate events not yet reached
  // Job events of the executor's moves: "migrate-start", "migrate" (completed), "migrate-abort",
  // "migrate-cancel", with detail "TASK FROM->TO:GPUS".
  auto log_moves = [&]() {
    for (const MigrationExecutor::Event& ev : executor->TakeEvents()) {
      if (!record_events) continue;
      const MigrationExecutor::Move& mv = executor->moves()[ev.move];
      const size_t i = job_index[state.task(mv.plan.task).job.value()];
      const GpuIndices& g = mv.started_s >= 0 ? mv.gpus : mv.plan.gpus;
      std::string detail = state.task(mv.plan.task).name + " " + state.node(mv.plan.from).spec.name + "->" +
                           state.node(mv.plan.to).spec.name + ":";
      for (size_t k = 0; k < g.size; ++k) detail += (k ? "," : "") + std::to_string(g.idx[k]);
      const char* kind = ev.state == MoveState::kStarting    ? "migrate-start"
                         : ev.state == MoveState::kCompleted ? "migrate"
                         : ev.state == MoveState::kAborted   ? "migrate-abort"
                                                             : "migrate-cancel";
      log(ev.t, i, kind, BoundReplicas(state, jobs[i].id), detail);
    }
  };
  int64_t defrag_plans = 0, defrag_triggered = 0, defrag_vacated_planned = 0;
  double defrag_plan_s_max = 0, defrag_plan_s_sum = 0;
  SimTime last_plan = -1;
  // Standby: services follow their demand every step_s; listed windows at their edges.
  if (config.standby) {
    if (!services.empty()) events.push({0, kService, 0, 0});
    for (const SimJob& j : jobs) {
      for (const StandbyWindow& w : j.tmpl.standby) {
        events.push({w.from_s, kService, 1, 0});
        events.push({std::max(w.from_s, w.to_s - config.standby_grace_s), kService, 1, 0});
      }
    }
  }

  // The failure model: the nodes' independent Poisson processes (rate 1/MTBF each) as one
  // cluster-wide process of rate nodes/MTBF whose every draw picks a node uniformly; a draw that
  // picks a node already down is skipped, which leaves each node failing at rate 1/MTBF while up
  // (the exponential is memoryless). Draws are made one at a time, so the cost is one event per
  // draw, whatever the cluster size.
  std::optional<Rng> failure_rng;
  double failure_clock = 0;  // time of the next draw, in seconds (exact, before truncation)
  double failure_rate = 0;   // draws per second
  auto schedule_failure_draw = [&]() {
    failure_clock += -std::log(1.0 - failure_rng->UniformDouble()) / failure_rate;
    if (failure_clock < static_cast<double>(sc.duration_s)) {
      events.push({static_cast<SimTime>(failure_clock), kFailureDraw, 0, 0});
    }
  };
  if (sc.failures && state.num_nodes() > 0) {
    // Mixed with a constant so that the draws differ from the job stream's (Rng(seed)).
    failure_rng.emplace(sc.failures->seed.value_or(seed) ^ 0x6661696c75726573ULL);
    failure_rate = static_cast<double>(state.num_nodes()) / (sc.failures->node_mtbf_h * 3600.0);
    schedule_failure_draw();
  }

  const auto data = state.topology().FindPlane("data");
  const std::optional<int> asw = data ? state.topology().FindLevel(*data, "asw") : std::nullopt;
  const auto param = state.topology().FindPlane("param");
  const std::optional<int> pod = param ? state.topology().FindLevel(*param, "rdma_pod") : std::nullopt;
  // Domains of a level with GPUs, all of them free.
  auto whole_free = [&](PlaneId plane, int level) {
    int64_t n = 0;
    for (DomainId d : state.topology().DomainsAt(plane, level)) {
      const DomainFree& f = state.domain_free(d);
      n += f.gpu_milli > 0 && f.gpu_free_milli == f.gpu_milli;
    }
    return n;
  };
  // The network model: the plane and level whose domains a multi-node job should not span.
  std::optional<PlaneId> net_plane;
  int net_level = 0;
  const int64_t net_factor = 10000 + sc.network.comm_share_pct * sc.network.cross_domain_slowdown_pct;
  int64_t slowed_runs = 0;
  if (sc.network.enabled) {
    const std::string where = sc.path + ":" + std::to_string(sc.network.line) + ": network: ";
    net_plane = state.topology().FindPlane(sc.network.plane);
    if (!net_plane) return InvalidArgument(where + "plane: the cluster has no plane '" + sc.network.plane + "'");
    const auto l = state.topology().FindLevel(*net_plane, sc.network.level);
    if (!l) return InvalidArgument(where + "level: plane '" + sc.network.plane + "' has no level '" + sc.network.level + "'");
    net_level = *l;
  }
  double slack_sum = 0, free_nodes_sum = 0, placeable8_sum = 0;
  double free_asws = 0, free_pods = 0, held_idle = 0, alloc_hp_sum = 0, alloc_all_sum = 0, harvest_sum = 0,
         util_sum = 0, hp_demand_sum = 0;
  int64_t harvest_samples = 0;
  int64_t reservations_made = 0;
  PendingQueue pending(config.priority_queue);
  // What decides whether a pending job can start now — its replica request, min, max, step,
  // topology constraint, and whether it may borrow Standby capacity — interned as a shape.
  std::vector<char> lends(jobs.size(), 0);
  std::vector<int> shape_of(jobs.size(), 0);
  std::vector<size_t> shape_job;  // per shape: a job of that shape (its template stands for all)
  std::vector<size_t> holders;    // jobs that may hold a reservation (try_pending keeps it exact)
  {
    using ShapeKey = std::tuple<int64_t, int64_t, int32_t, int32_t, uint64_t, int32_t, int32_t, int32_t, std::string,
                                std::string, std::string, bool, int32_t>;
    std::map<ShapeKey, int> shapes;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const JobTemplate& t = jobs[i].tmpl;
      lends[i] = config.standby && t.preemptible && t.priority <= config.lend_max_priority;
      const TaskRequest& r = t.per_replica;
      const ShapeKey key{r.cpu_milli, r.mem_mib, r.gpu_count, r.gpu_milli, r.models.bits(), t.min_replicas, t.replicas,
                         t.step, t.plane, t.required_level, t.preferred_level, lends[i] != 0, t.priority};
      const auto [it, added] = shapes.emplace(key, static_cast<int>(shapes.size()));
      shape_of[i] = it->second;
      if (added) shape_job.push_back(i);
    }
  }
  std::vector<SimTime> last_failure(state.num_nodes(), -1);  // per node: when it last went down
  int64_t node_failures = 0, requeued_by_failure = 0, shrunk_by_failure = 0;
  std::vector<double> asws_per_large;
  double alloc_area = 0, stranded_sum = 0, w128 = 0, w256 = 0, a128 = 0;
  // Per probe shape (ProbeShapes() order): sums over samples of idle GPUs by cause.
  struct IdleSums {
    double fractional = 0, stranded = 0, insufficient_cpu = 0;
  };
  std::vector<IdleSums> idle_sums(ProbeShapes().size());
  int64_t samples = 0;
  const double capacity = static_cast<double>(std::max<int64_t>(1, state.total_gpu_milli()));
  SimTime last_t = 0, next_sample = 0;
  std::optional<std::pair<int64_t, int64_t>> after_failure;

  auto sample_until = [&](SimTime t) {
    const double alloc = 100.0 * static_cast<double>(state.allocated_gpu_milli()) / capacity;
    alloc_area += alloc * static_cast<double>(t - last_t);
    last_t = t;
    while (next_sample < t) {
      SimSample sample{next_sample, alloc, FreeNodes(state), static_cast<int64_t>(pending.size())};
      // Defragmentation's measures (metrics.md §7): GPU nodes with slack (some but not all GPU
      // milli free), whole free nodes, and 8-GPU tasks placeable on wholly free GPUs of ready
      // nodes (CPU and memory not considered).
      {
        int64_t slack = 0, placeable8 = 0;
        for (const Node& n : state.nodes()) {
          if (n.spec.gpu_count == 0) continue;
          const int64_t cap = int64_t{n.spec.gpu_count} * kMilliPerGpu;
          slack += n.gpu_free_total > 0 && n.gpu_free_total < cap;
          if (n.state == NodeState::kReady) placeable8 += n.full_free_gpus / 8;
        }
        slack_sum += static_cast<double>(slack);
        placeable8_sum += static_cast<double>(placeable8);
        free_nodes_sum += static_cast<double>(sample.free_nodes);
      }
      if (asw) sample.free_asws = whole_free(*data, *asw);
      if (pod) sample.free_rdma_pods = whole_free(*param, *pod);
      // Allocation ratios (metrics.md §4), per GPU node, in milli-GPU: hp_active (HP tasks not
      // in Standby), hp_standby, lp_alloc (LP tasks, borrowers included); residual =
      // max(hp_standby - lp_alloc, 0) still counts as HP-claimed. Standby harvest: over nodes
      // with hp_standby > 0, min(lp_alloc / hp_standby, 1). Idle GPUs (doing no work): free GPU
      // milli on nodes that are not down, lent GPUs no borrower uses, and the service replicas
      // above their demand that are not in Standby. Modelled utilisation: every bound task's
      // GPUs x its class's profile — a service's active replicas at min(demand / active, 1) of it.
      double hp_share = 0, any_share = 0, harvest = 0, idle = 0, busy = 0, hp_demand = 0;
      int64_t gpu_nodes = 0, standby_nodes = 0;
      for (const Node& n : state.nodes()) {
        if (n.spec.gpu_count == 0) continue;
        ++gpu_nodes;
        int64_t hp_active = 0, hp_standby = 0, lp = 0;
        for (TaskId t : n.tasks) {
          const Task& task = state.task(t);
          const int64_t g = int64_t{task.gpus.size} * task.req.gpu_milli;
          if (task.standby) {
            hp_standby += g;
          } else if (task.priority >= kHpPriority) {
            hp_active += g;
          } else {
            lp += g;
          }
          const SimJob& j = jobs[job_index[task.job.value()]];
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
      const int64_t gpus_per_service = int64_t{tidal.per_replica.gpu_count} * kMilliPerGpu;
      for (const Service& sv : services) {
        const SimJob& j = jobs[sv.job];
        if (j.started_at < 0) continue;
        int64_t active = 0;
        for (TaskId t : state.job(j.id).tasks) active += state.task(t).state == TaskState::kBound && !state.task(t).standby;
        const int64_t demand = service_demand(sv, next_sample);
        idle += static_cast<double>(std::max<int64_t>(active - demand, 0) * gpus_per_service);
        busy += static_cast<double>(std::min(active, demand) * gpus_per_service * j.util_pct) / 100.0;
        hp_demand += static_cast<double>(std::min(active, demand) * gpus_per_service);
      }
      idle += static_cast<double>(UnusableGpus(state, jobs)) * kMilliPerGpu;
      if (gpu_nodes > 0) {
        sample.alloc_ratio_hp_pct = 100.0 * hp_share / static_cast<double>(gpu_nodes);
        sample.alloc_ratio_hp_lp_pct = 100.0 * any_share / static_cast<double>(gpu_nodes);
        alloc_hp_sum += sample.alloc_ratio_hp_pct;
        alloc_all_sum += sample.alloc_ratio_hp_lp_pct;
      }
      if (standby_nodes > 0) {
        harvest_sum += 100.0 * harvest / static_cast<double>(standby_nodes);
        ++harvest_samples;
      }
      sample.idle_gpus = idle / kMilliPerGpu;
      const int64_t local = tidal.start_hour * 3600 + next_sample;
      sample.local_hour = static_cast<int>(local % 86400 / 3600);
      const double idle_hours = sample.idle_gpus * static_cast<double>(sc.sample_interval_s) / 3600.0;
      res.idle_gpu_hours_by_hour[sample.local_hour] += idle_hours;
      util_sum += 100.0 * busy / capacity;
      hp_demand_sum += 100.0 * hp_demand / capacity;
      const std::vector<IdleCauses> causes = IdleGpuCauses(state);
      for (size_t k = 0; k < causes.size(); ++k) {
        const IdleCauses& c = causes[k];
        if (c.shape.name == "8G64C") stranded_sum += c.stranded;
        idle_sums[k].fractional += c.fractional;
        idle_sums[k].stranded += c.stranded;
        idle_sums[k].insufficient_cpu += c.insufficient_cpu;
      }
      res.samples.push_back(sample);
      if (asw) free_asws += static_cast<double>(sample.free_asws);
      if (pod) free_pods += static_cast<double>(sample.free_rdma_pods);
      if (config.reserve.enabled) {
        int64_t idle = 0;
        for (const NodeFit& f : state.fits()) idle += f.reserved_for.valid() ? f.gpu_free_total : 0;
        held_idle += static_cast<double>(idle) / kMilliPerGpu;
      }
      if (asw) {
        const auto f128 = JobsFulfillable(state, 128, "data", "asw");
        const auto f256 = JobsFulfillable(state, 256, "data", "asw");
        if (f128.ok() && f256.ok()) {
          w128 += static_cast<double>(f128->within);
          w256 += static_cast<double>(f256->within);
          a128 += static_cast<double>(f128->across);
        }
      }
      ++samples;
      next_sample += sc.sample_interval_s;
    }
  };
  // The work model. progress(j, t): counts j's progress up to t at its current rate (and the
  // work left at the last checkpoint passed); reschedule(i, t): after its replicas changed,
  // recomputes its rate and slowdown and moves its end event.
  auto progress = [&](SimJob& j, SimTime t) {
    if (j.started_at < 0 || j.service >= 0 || t <= j.progress_t || j.rate == 0) return;
    auto done = [&](SimTime e) {
      return static_cast<int64_t>(static_cast<__int128>(e) * j.rate * kWorkScale * kSlowBase / j.slow);
    };
    const int64_t interval = j.tmpl.checkpoint_interval_s;
    if (interval > 0) {
      const SimTime last = j.started_at + (t - j.started_at) / interval * interval;
      if (last > j.progress_t) j.work_at_checkpoint = std::max<int64_t>(0, j.work_left - done(last - j.progress_t));
    }
    j.work_left = std::max<int64_t>(0, j.work_left - done(t - j.progress_t));
    j.progress_t = t;
  };
  std::set<size_t> elastic_running;  // running jobs with min < max (Absorb's candidates)
  int64_t elastic_starts = 0;        // starts of such jobs so far
  std::vector<int32_t> node_evictions(state.num_nodes(), 0);  // per node: evictions of borrowers
  auto reschedule = [&](size_t i, SimTime t) {
    SimJob& j = jobs[i];
    if (j.started_at < 0 || j.service >= 0) return;
    progress(j, t);
    const JobSpec& spec = state.job(j.id).spec;
    const int64_t bound = BoundReplicas(state, j.id);
    const int64_t usable = spec.usable_step > 0 ? spec.usable_step : std::max<int32_t>(1, spec.step);
    const int64_t rate = j.tmpl.linear_scaling ? bound / usable * usable : (bound > 0 ? j.tmpl.replicas : 0);
    int64_t slow = kSlowBase;
    if (net_plane) {
      const auto [domains, nodes] = DomainsAndNodes(state, j.id, *net_plane, net_level);
      if (nodes > 1 && domains > 1) slow = net_factor;
    }
    if (rate == j.rate && slow == j.slow && j.gen > 0) return;  // the scheduled end stands
    j.rate = rate;
    j.slow = slow;
    ++j.gen;
    if (rate == 0) return;  // no usable replicas: no progress until it grows
    const __int128 denom = static_cast<__int128>(rate) * kWorkScale * kSlowBase;
    const SimTime need = static_cast<SimTime>((static_cast<__int128>(j.work_left) * slow + denom - 1) / denom);
    events.push({std::max(t, j.progress_t) + need, kEnd, i, static_cast<SimTime>(j.gen)});
  };
  // Ends j's current run without finishing it (an eviction or a failure): the work since its last
  // checkpoint is lost and its next start pays its restart cost.
  auto stop_run = [&](size_t i, SimTime t) {
    SimJob& j = jobs[i];
    progress(j, t);
    j.work_left = j.work_at_checkpoint;
    j.started_at = -1;
    j.rate = 0;
    ++j.gen;
    j.restarted = true;
    state.SetJobStart(j.id, -1);
    elastic_running.erase(i);
  };
  // Tries the queue (PendingQueue::Pass): a job of a shape that already had to wait in the pass is
  // not tried; a job holding a reservation is tried on its own.
  auto try_pending = [&](SimTime now) {
    // The waiting jobs that hold a reservation (ReserveAction's or Reclaim's).
    std::erase_if(holders, [&](size_t i) { return !state.job(jobs[i].id).reservation.valid(); });
    pending.Pass(
        [&](size_t i) {
          SimJob& j = jobs[i];
          JobAttempt a;
          // Spot jobs try the capacity lent by Standby replicas first.
          if (lends[i] && !state.lending_nodes().empty()) a = StandbyAction::PlaceOnLent(state, j.id, node_evictions, config.align);
          if (!a.started) a = AllocateAction::TryStart(**session, state, j.id, aopts);
          if (a.started) {
            j.started_at = now;
            state.SetJobStart(j.id, now);
            if (j.first_start < 0) {
              j.first_start = now;
              j.granted = a.granted;
              MeasureSpread(state, j);
              if (j.service < 0) j.work_left = j.duration * j.tmpl.replicas * kWorkScale;
            }
            j.work_at_checkpoint = j.work_left;
            j.progress_t = now + (j.restarted ? j.tmpl.restart_cost_s : 0);
            j.rate = 0;
            j.slow = kSlowBase;
            reschedule(i, now);
            slowed_runs += j.slow != kSlowBase;
            if (record_events) {
              const bool lent = state.task(state.job(j.id).tasks.front()).borrowed;
              log(now, i, "start", BoundReplicas(state, j.id), lent ? "lent" : "");
            }
            if (j.tmpl.min_replicas > 0 && j.tmpl.min_replicas < j.tmpl.replicas && j.service < 0) {
              elastic_running.insert(i);
              ++elastic_starts;
            }
            if (j.large && asw) asws_per_large.push_back(static_cast<double>(DomainsAndNodes(state, j.id, *data, *asw).first));
            return PendingQueue::Outcome::kStarted;
          }
          if (a.kind == OutcomeKind::kInfeasible) {
            j.infeasible = true;  // dropped from the queue: the cluster cannot grow
            j.reason = a.reason;
            return PendingQueue::Outcome::kInfeasible;
          }
          return PendingQueue::Outcome::kWaits;
        },
        holders);
  };
  // Queues job i at t; a large job under a defrag trigger asks for a plan if it still waits
  // trigger_after_s later.
  auto enqueue = [&](size_t i, bool front, SimTime t) {
    pending.Push(i, jobs[i].tmpl.priority, shape_of[i], front);
    jobs[i].queued_at = t;
    const JobTemplate& tm = jobs[i].tmpl;
    if (executor && dfc.trigger_after_s > 0 && int64_t{tm.replicas} * tm.per_replica.gpu_count >= dfc.trigger_min_gpus &&
        t + dfc.trigger_after_s < sc.duration_s) {
      events.push({t + dfc.trigger_after_s, kDefragTrigger, i, t});
    }
  };

  // A node fails or is repaired: listed and generated events alike.
  auto node_down = [&](NodeId node, SimTime t, bool generated) {
    node_failures += state.node(node).state != NodeState::kDown;
    last_failure[node.value()] = t;
    res.node_events.push_back({t, state.node(node).spec.name, true, generated});
    for (const FailureEffect& fe : NodeFailureAction::NodeDown(state, node, config.align)) {
      const size_t i = job_index[fe.job.value()];
      if (!fe.requeued) {
        ++shrunk_by_failure;
        reschedule(i, t);
        log(t, i, "shrink", BoundReplicas(state, jobs[i].id), "failure");
        continue;
      }
      ++requeued_by_failure;
      log(t, i, "requeue", 0);
      stop_run(i, t);
      enqueue(i, true, t);
    }
  };
  auto node_up = [&](NodeId node, SimTime t, bool generated) {
    res.node_events.push_back({t, state.node(node).spec.name, false, generated});
    NodeFailureAction::NodeUp(state, node);
  };

  // Reclaim: evictions in their grace period, and the tasks they will evict.
  std::vector<Eviction> evictions;
  std::vector<char> being_evicted(state.tasks().size(), 0);
  int64_t evictions_count = 0, hp_evictions = 0, absorbed_replicas = 0, standby_entries = 0, standby_restores = 0,
          restore_evictions = 0;
  double lost_gpu_hours = 0;
  // Evicts running job `vi` whole at t: its bound tasks free their resources (`gpu_milli` more of
  // its tasks were freed just before), the work since its last checkpoint is lost and it is
  // requeued.
  auto evict_job = [&](size_t vi, SimTime t, int64_t gpu_milli, const char* why) {
    log(t, vi, "evict", 0, why);
    SimJob& v = jobs[vi];
    for (TaskId task : state.job(v.id).tasks) {
      if (state.task(task).state == TaskState::kBound) {
        gpu_milli += state.task(task).req.TotalGpuMilli();
        if (state.task(task).borrowed) ++node_evictions[state.task(task).node.value()];
        state.Unbind(task);
      }
    }
    const int64_t ran = t - v.started_at, interval = v.tmpl.checkpoint_interval_s;
    lost_gpu_hours += static_cast<double>(gpu_milli) / kMilliPerGpu *
                      static_cast<double>(interval > 0 ? ran % interval : ran) / 3600.0;
    ++evictions_count;
    hp_evictions += v.tmpl.priority >= kHpPriority;
    stop_run(vi, t);
    enqueue(vi, true, t);
  };
  // Ends the grace period of `ev`: its tasks that still run free their resources; jobs evicted
  // whole are requeued (losing the work since their last checkpoint), the others keep running
  // with fewer replicas.
  auto evict = [&](const Eviction& ev, SimTime t) {
    for (TaskId task : ev.tasks) being_evicted[task.value()] = 0;
    SimJob& hp = jobs[job_index[ev.for_job.value()]];
    hp.reclaiming = false;
    if (hp.started_at >= 0) return;  // it started elsewhere meanwhile: nothing to evict for it
    std::set<uint32_t> shrunk;
    for (TaskId task : ev.tasks) {
      const Task& tk = state.task(task);
      if (tk.state != TaskState::kBound) continue;  // ended or was requeued during the grace period
      if (std::find(ev.whole.begin(), ev.whole.end(), tk.job) == ev.whole.end()) shrunk.insert(tk.job.value());
      state.Unbind(task);
    }
    evictions_count += static_cast<int64_t>(shrunk.size());
    for (uint32_t jid : shrunk) {
      hp_evictions += state.job(JobId(jid)).spec.priority >= kHpPriority;
      reschedule(job_index[jid], t);
      log(t, job_index[jid], "shrink", BoundReplicas(state, JobId(jid)), "reclaim");
    }
    for (JobId victim : ev.whole) {
      if (jobs[job_index[victim.value()]].started_at < 0) continue;
      int64_t gpu_milli = 0;  // of its tasks unbound above
      for (TaskId task : ev.tasks) {
        if (state.task(task).job == victim && state.task(task).state == TaskState::kPending) {
          gpu_milli += state.task(task).req.TotalGpuMilli();
        }
      }
      evict_job(job_index[victim.value()], t, gpu_milli, "reclaim");
    }
  };
  // Plans evictions for the HP jobs that could not start, in queue order (one plan per job at a
  // time; a plan that would evict a task already being evicted waits for a later event).
  auto reclaim = [&](SimTime t) {
    for (size_t i : pending.InOrder([&](int sh) { return jobs[shape_job[sh]].tmpl.priority >= kHpPriority; })) {
      SimJob& j = jobs[i];
      if (j.reclaiming) continue;
      // Idle plus reclaimable room only shrinks while nothing is released (a start turns free
      // room into evictable or fixed room), so a job found infeasible stays so until a release.
      if (j.reclaim_refused >= 0 && j.refused_seq == state.release_seq() && !state.job(j.id).reservation.valid()) {
        j.reclaim_refused = t;
        continue;
      }
      if (state.job(j.id).reservation.valid()) state.ReleaseReservation(state.job(j.id).reservation);
      const PreemptionPlan plan = PreemptAction::Plan(state, j.id, t, aopts);
      if (!plan.feasible) {
        j.reclaim_refused = t;
        j.refused_seq = state.release_seq();
      }
      if (!plan.feasible || plan.evict.empty()) continue;
      if (std::any_of(plan.evict.begin(), plan.evict.end(), [&](TaskId x) { return being_evicted[x.value()] != 0; })) {
        continue;
      }
      std::vector<NodeId> hold;
      for (NodeId n : plan.nodes) {
        if (!state.node(n).reservation.valid() && std::find(hold.begin(), hold.end(), n) == hold.end()) hold.push_back(n);
      }
      if (!hold.empty()) {
        state.AddReservation(j.id, hold);
        holders.push_back(i);
      }
      // The victims' resources are freed, and the job starts, once the last victim job exited.
      SimTime wait_s = 0;
      for (TaskId x : plan.evict) wait_s = std::max(wait_s, exit.After(job_index[state.task(x).job.value()], t));
      Eviction ev;
      ev.at = t + wait_s;
      ev.for_job = j.id;
      ev.tasks = plan.evict;
      ev.whole = plan.evicted_jobs;
      for (TaskId x : ev.tasks) being_evicted[x.value()] = 1;
      j.reclaiming = true;
      events.push({ev.at, kEvict, evictions.size(), 0});
      evictions.push_back(std::move(ev));
    }
  };

  // Absorb: running elastic jobs grow toward max, unless a job of higher priority waits for room
  // to accumulate: an HP job or a gang (min > 1 replicas). Every job still waiting was just tried
  // and could not use the free capacity as it is, so a waiting single-replica job of lower than
  // HP priority is not owed it: it is tried first again when capacity is released. An HP job
  // whose Reclaim is under way has its nodes held, and one Reclaim found infeasible in this cycle
  // could not use the room either: neither blocks.
  struct {
    uint64_t release_seq = UINT64_MAX;
    int64_t elastic_starts = -1;
    int32_t blocking = 0;
  } absorb_seen;
  auto absorb = [&](SimTime t) {
    if (elastic_running.empty()) return;
    int32_t blocking = INT32_MIN;
    const auto gang_or_hp = [&](int sh) {
      const JobTemplate& t = jobs[shape_job[sh]].tmpl;
      return t.priority >= kHpPriority || (t.min_replicas > 0 ? t.min_replicas : t.replicas) > 1;
    };
    for (size_t i : pending.InOrder(gang_or_hp)) {
      const SimJob& j = jobs[i];
      if (j.infeasible || j.reclaiming || j.reclaim_refused == t) continue;
      if (j.tmpl.priority < kHpPriority && state.job(j.id).spec.min_replicas <= 1) continue;
      blocking = std::max(blocking, j.tmpl.priority);
    }
    // Nothing can grow when, since the last Run, no capacity was released, no elastic job started
    // and the blocking priority is the same: every candidate then reached max or failed on a state
    // that has only filled up since.
    if (state.release_seq() == absorb_seen.release_seq && elastic_starts == absorb_seen.elastic_starts &&
        blocking == absorb_seen.blocking) {
      return;
    }
    absorb_seen = {state.release_seq(), elastic_starts, blocking};
    std::vector<JobId> running;
    for (size_t i : elastic_running) running.push_back(jobs[i].id);
    const AbsorbResult r = AbsorbAction::Run(**session, state, running, blocking, aopts);
    for (const auto& [job, added] : r.grown) {
      reschedule(job_index[job.value()], t);
      log(t, job_index[job.value()], "grow", BoundReplicas(state, job));
    }
    absorbed_replicas += r.replicas_added;
  };

  // Standby. restoring[task]: a Standby replica whose restore is under way.
  std::vector<char> restoring(state.tasks().size(), 0);
  // Replicas of lender job j that should be in Standby at t: a service's replicas above its demand
  // grace_s ahead (so that a restore completes by the time the demand is there); a listed job's
  // window replicas from from_s until grace_s before to_s.
  auto standby_target = [&](const SimJob& j, SimTime t, int64_t bound) -> int64_t {
    if (j.service >= 0) return bound - std::min<int64_t>(bound, service_demand(services[j.service], t + config.standby_grace_s));
    for (const StandbyWindow& w : j.tmpl.standby) {
      if (w.from_s <= t && t < std::max(w.from_s, w.to_s - config.standby_grace_s)) return std::min<int64_t>(w.replicas, bound);
    }
    return 0;
  };
  // Brings every running lender to its Standby target: surplus active replicas (newest first)
  // enter Standby; surplus Standby replicas (oldest first) start their restore — their borrowers
  // are evicted grace_s later, when the replica resumes on its GPUs (kRestore).
  auto follow_demand = [&](SimTime t) {
    for (size_t i : lenders) {
      SimJob& j = jobs[i];
      if (j.started_at < 0) continue;
      std::vector<TaskId> active, standby;
      for (TaskId task : state.job(j.id).tasks) {
        const Task& tk = state.task(task);
        if (tk.state != TaskState::kBound || restoring[task.value()]) continue;
        (tk.standby ? standby : active).push_back(task);
      }
      const int64_t target = standby_target(j, t, static_cast<int64_t>(active.size() + standby.size()));
      int64_t have = static_cast<int64_t>(standby.size());
      for (auto it = active.rbegin(); it != active.rend() && have < target; ++it, ++have) {
        state.EnterStandby(*it);
        ++standby_entries;
        log(t, i, "standby", have + 1, where(*it));
      }
      for (auto it = standby.begin(); it != standby.end() && have > target; ++it, --have) {
        restoring[it->value()] = 1;
        events.push({t + config.standby_grace_s, kRestore, it->value(), 0});
      }
    }
  };
  // Completes the restore of Standby replica `task`: the borrowers in its way are evicted (their
  // jobs whole) and it leaves Standby on the GPUs it kept.
  auto restore = [&](TaskId task, SimTime t) {
    restoring[task.value()] = 0;
    if (state.task(task).state != TaskState::kBound || !state.task(task).standby) return;  // e.g. its node failed
    std::set<size_t> victims;
    for (TaskId v : StandbyAction::RestoreVictims(state, task)) victims.insert(job_index[state.task(v).job.value()]);
    for (size_t vi : victims) evict_job(vi, t, 0, "restore");
    restore_evictions += static_cast<int64_t>(victims.size());
    state.ExitStandby(task);
    if (record_events) {
      int64_t in_standby = 0;
      for (TaskId x : state.job(state.task(task).job).tasks) in_standby += state.task(x).standby;
      log(t, job_index[state.task(task).job.value()], "restore", in_standby, where(task));
    }
    ++standby_restores;
  };

  while (!events.empty() && events.top().t < sc.duration_s) {
    const SimTime t = events.top().t;
    sample_until(t);
    bool failed = false;
    // False while the time's events are only failure-model draws that picked a down node and
    // repairs that no longer apply: nothing happened, so the queue is not tried again (a retry
    // would see the state its last try saw, and the run stays the same as with the listed events).
    bool happened = false, replan = false, standby_cycle = false, defrag_tick = false;
    std::vector<size_t> triggers;  // large jobs still waiting trigger_after_s after being queued
    while (!events.empty() && events.top().t == t) {
      const Ev e = events.top();
      events.pop();
      happened |= e.kind != kNode && e.kind != kFailureDraw;
      if (e.kind == kEnd) {
        SimJob& j = jobs[e.idx];
        if (j.started_at < 0 || static_cast<SimTime>(j.gen) != e.start) continue;  // rescheduled or requeued since
        progress(j, t);
        for (TaskId task : state.job(j.id).tasks) state.Finish(task);
        j.started_at = -1;
        state.SetJobStart(j.id, -1);
        j.finished = true;
        j.finish = t;
        log(t, e.idx, "finish", 0);
        elastic_running.erase(e.idx);
      } else if (e.kind == kNode) {
        const NodeEv ne = node_events[e.idx];
        if (ne.fail) {
          failed = happened = true;
          node_down(ne.node, t, ne.generated);
        } else if (!ne.generated) {
          happened = true;
          node_up(ne.node, t, false);
        } else if (state.node(ne.node).state == NodeState::kDown && last_failure[ne.node.value()] == e.start) {
          happened = true;
          node_up(ne.node, t, true);  // unless a listed repair (and maybe a new failure) came first
        }
      } else if (e.kind == kEvict) {
        evict(evictions[e.idx], t);
      } else if (e.kind == kService) {
        standby_cycle = true;
        if (e.idx == 0 && t + tidal.step_s < sc.duration_s) events.push({t + tidal.step_s, kService, 0, 0});
      } else if (e.kind == kRestore) {
        restore(TaskId(static_cast<uint32_t>(e.idx)), t);
      } else if (e.kind == kDefrag) {
        defrag_tick = true;
        if (t + dfc.interval_s < sc.duration_s) events.push({t + dfc.interval_s, kDefrag, 0, 0});
      } else if (e.kind == kMigrate) {
        migrate_due.erase(t);
      } else if (e.kind == kDefragTrigger) {
        const SimJob& j = jobs[e.idx];
        if (j.started_at < 0 && !j.finished && !j.infeasible && j.queued_at == e.start) triggers.push_back(e.idx);
      } else if (e.kind == kTick) {
        replan = true;
        if (t + config.reserve.replan_s < sc.duration_s) events.push({t + config.reserve.replan_s, kTick, 0, 0});
      } else if (e.kind == kFailureDraw) {
        const NodeId node(static_cast<uint32_t>(failure_rng->Uniform(state.num_nodes())));
        if (state.node(node).state != NodeState::kDown) {
          failed = happened = true;
          node_down(node, t, true);
          events.push({t + sc.failures->repair_s, kNode, node_events.size(), t});
          node_events.push_back({node, false, true});
        }
        schedule_failure_draw();
      } else {
        enqueue(e.idx, false, t);
      }
    }
    if (!happened) continue;
    // Moves due now complete (or abort); moves whose task or target went away are given up.
    if (executor) {
      executor->Step(state, t);
      log_moves();
    }
    if (standby_cycle) follow_demand(t);
    try_pending(t);
    if (replan) {
      // Hold nodes for the oldest large jobs that waited too long (queue order is oldest first,
      // requeued jobs at the front).
      std::vector<JobId> waiting;
      const auto sized = [&](int sh) {
        const JobTemplate& tm = jobs[shape_job[sh]].tmpl;
        const int64_t gpus = int64_t{tm.replicas} * tm.per_replica.gpu_count;
        return gpus >= config.reserve.min_gpus && gpus <= config.reserve.max_gpus;
      };
      for (size_t i : pending.InOrder(sized)) {
        const SimJob& j = jobs[i];
        if (t - j.submit >= config.reserve.after_s && !j.reclaiming) {
          waiting.push_back(j.id);
        }
      }
      const int made = ReserveAction::Renew(state, waiting, static_cast<int>(config.reserve.max_jobs), aopts);
      for (JobId w : waiting) {
        const size_t i = job_index[w.value()];
        if (state.job(w).reservation.valid() && std::find(holders.begin(), holders.end(), i) == holders.end()) holders.push_back(i);
      }
      reservations_made += made;
      if (made > 0) try_pending(t);
    }
    if (executor && !executor->Busy()) {
      // A plan on the periodic tick, or when a large job waited too long (checked at most once a
      // minute, and not within the cooldown of the last plan).
      bool plan_now = defrag_tick;
      if (!plan_now && !triggers.empty()) {
        if (last_plan < 0 || t - last_plan >= dfc.trigger_cooldown_s) {
          plan_now = true;
          ++defrag_triggered;
        } else {  // within the cooldown: the waiting jobs look again when it ends
          for (size_t i : triggers) events.push({last_plan + dfc.trigger_cooldown_s, kDefragTrigger, i, 0});
        }
      }
      if (plan_now) {
        const auto t0 = std::chrono::steady_clock::now();
        const DefragPlan plan = DefragAction::Plan(state, locked, defrag_options);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        defrag_plan_s_max = std::max(defrag_plan_s_max, secs);
        defrag_plan_s_sum += secs;
        ++defrag_plans;
        last_plan = t;
        defrag_vacated_planned += static_cast<int64_t>(plan.vacated.size());
        if (!plan.moves.empty()) {
          executor->Submit(state, plan);
          executor->Step(state, t);
          log_moves();
        }
      }
    }
    if (config.preempt) reclaim(t);
    if (config.absorb) absorb(t);
    if (executor) {
      if (const auto due = executor->NextDue(); due && *due < sc.duration_s && migrate_due.insert(*due).second) {
        events.push({*due, kMigrate, 0, 0});
      }
    }
    if (failed) after_failure = std::make_pair(FreeNodes(state), UnusableGpus(state, jobs));
    if (check_invariants) {
      Status st = state.CheckInvariants();
      if (!st.ok()) return Internal("at t=" + std::to_string(t) + ": " + st.message());
    }
  }
  sample_until(sc.duration_s);
  // The run ends: moves still under way are given up (their reservations released).
  if (executor) {
    executor->AbortAll(state, sc.duration_s);
    log_moves();
  }
  if (check_invariants) {
    Status st = state.CheckInvariants();
    if (!st.ok()) return Internal("at the end: " + st.message());
    if (!state.available_capacity_reservations().empty()) return Internal("at the end: a capacity reservation is left");
  }

  auto& m = res.metrics;
  // Defragmentation (every configuration; zero without `defrag`).
  {
    const MigrationCounters k = executor ? executor->counters() : MigrationCounters{};
    m["migrations_planned_count"] = static_cast<double>(k.planned);
    m["migrations_started_count"] = static_cast<double>(k.started);
    m["migrations_completed_count"] = static_cast<double>(k.completed);
    m["migrations_aborted_count"] = static_cast<double>(k.aborted);
    m["migrations_cancelled_count"] = static_cast<double>(k.cancelled);
    m["defrag_vacated_nodes_count"] = static_cast<double>(k.groups_completed);
    m["double_occupancy_gpu_hours"] = static_cast<double>(k.double_occupancy_gpu_milli_s) / kMilliPerGpu / 3600.0;
    m["defrag_plans_count"] = static_cast<double>(defrag_plans);
    m["defrag_triggered_count"] = static_cast<double>(defrag_triggered);
    m["defrag_plan_seconds_max"] = defrag_plan_s_max;
    m["defrag_plan_seconds_mean"] = defrag_plans > 0 ? defrag_plan_s_sum / static_cast<double>(defrag_plans) : 0.0;
    m["defrag_planned_vacated_nodes_count"] = static_cast<double>(defrag_vacated_planned);
  }
  m["free_nodes"] = static_cast<double>(FreeNodes(state));
  m["allocated_unusable_gpus"] = static_cast<double>(UnusableGpus(state, jobs));
  if (after_failure) {
    m["free_nodes_after_failure"] = static_cast<double>(after_failure->first);
    m["allocated_unusable_gpus_after_failure"] = static_cast<double>(after_failure->second);
  }
  m["gpu_alloc_pct_mean"] = alloc_area / static_cast<double>(sc.duration_s);
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
  for (const SimJob& j : jobs) {
    if (j.submit >= sc.duration_s) continue;
    started += j.first_start >= 0;
    infeasible += j.infeasible;
    SimJobRecord rec;
    rec.name = j.tmpl.name;
    rec.replicas = j.tmpl.replicas;
    rec.gpus_per_replica = j.tmpl.per_replica.gpu_count;
    rec.gpus = int64_t{rec.replicas} * rec.gpus_per_replica;
    rec.submit_s = j.submit;
    rec.start_s = j.first_start;
    rec.delay_s = (j.first_start >= 0 ? j.first_start : sc.duration_s) - j.submit;
    rec.granted = j.granted;
    rec.status = j.infeasible        ? SimJobStatus::kInfeasible
                 : j.started_at >= 0 ? SimJobStatus::kRunning
                 : j.finished        ? SimJobStatus::kFinished
                                     : SimJobStatus::kPending;
    rec.reason = j.reason;
    rec.domains = j.domains;
    rec.entropy = j.entropy;
    res.jobs.push_back(rec);
    if (j.first_start >= 0 && j.tmpl.replicas > 1) {
      if (j.domains) multinode_domains.push_back(static_cast<double>(*j.domains));
      if (j.entropy) multinode_entropy.push_back(*j.entropy);
    }
    const double d = static_cast<double>(rec.delay_s);
    delays.push_back(d);
    if (j.large) large_delays.push_back(d);
    if (j.tmpl.priority >= kHpPriority) hp_delays.push_back(d);
    if (j.tmpl.per_replica.gpu_count == 8) delays_8gpu.push_back(d);
    const int64_t gpus = int64_t{j.tmpl.replicas} * j.tmpl.per_replica.gpu_count;
    for (SizeBucket& b : buckets) {
      if (gpus >= b.lo && gpus < b.hi) b.delays.push_back(d);
    }
  }
  for (const SizeBucket& b : buckets) {
    if (b.delays.empty()) continue;
    m[std::string("sched_delay_p90_gpus_") + b.name + "_s"] = Percentile(b.delays, 90);
    double sum = 0;
    for (double d : b.delays) sum += d;
    m[std::string("sched_delay_mean_gpus_") + b.name + "_s"] = sum / static_cast<double>(b.delays.size());
  }
  m["jobs_started_count"] = static_cast<double>(started);
  m["node_failures_count"] = static_cast<double>(node_failures);
  m["jobs_requeued_by_failure_count"] = static_cast<double>(requeued_by_failure);
  m["jobs_shrunk_by_failure_count"] = static_cast<double>(shrunk_by_failure);
  m["jobs_pending_end_count"] = static_cast<double>(pending.size());
  m["jobs_infeasible_count"] = static_cast<double>(infeasible);
  m["evictions_count"] = static_cast<double>(evictions_count);
  m["hp_evictions_count"] = static_cast<double>(hp_evictions);
  m["preemption_lost_gpu_hours"] = lost_gpu_hours;
  if (config.absorb) m["absorbed_replicas_count"] = static_cast<double>(absorbed_replicas);
  if (config.standby) {
    m["standby_entries_count"] = static_cast<double>(standby_entries);
    m["standby_restores_count"] = static_cast<double>(standby_restores);
    m["restore_evictions_count"] = static_cast<double>(restore_evictions);
    if (harvest_samples > 0) m["standby_harvest_pct"] = harvest_sum / static_cast<double>(harvest_samples);
  }
  double idle_hours = 0, night_idle_hours = 0;
  for (int h = 0; h < 24; ++h) {
    idle_hours += res.idle_gpu_hours_by_hour[h];
    if (h < 6) night_idle_hours += res.idle_gpu_hours_by_hour[h];
  }
  m["idle_gpu_hours"] = idle_hours;
  m["night_idle_gpu_hours"] = night_idle_hours;
  double lp_jct = 0;
  int64_t lp_finished = 0;
  for (const SimJob& j : jobs) {
    if (j.finish < 0 || j.tmpl.priority >= kHpPriority) continue;
    lp_jct += static_cast<double>(j.finish - j.submit);
    ++lp_finished;
  }
  if (lp_finished > 0) m["lp_jct_mean_s"] = lp_jct / static_cast<double>(lp_finished);
  m["lp_jobs_finished_count"] = static_cast<double>(lp_finished);
  if (sc.network.enabled) m["network_slowed_runs_count"] = static_cast<double>(slowed_runs);
  if (config.reserve.enabled) m["reservations_made_count"] = static_cast<double>(reservations_made);
  m["sched_delay_p90_s"] = Percentile(delays, 90);
  if (!large_delays.empty()) m["sched_delay_p90_large_s"] = Percentile(large_delays, 90);
  if (!delays_8gpu.empty()) m["sched_delay_p90_8gpu_s"] = Percentile(delays_8gpu, 90);
  if (!hp_delays.empty()) {
    m["hp_sched_delay_p50_s"] = Percentile(hp_delays, 50);
    m["hp_sched_delay_p90_s"] = Percentile(hp_delays, 90);
    m["hp_sched_delay_p99_s"] = Percentile(hp_delays, 99);
  }
  if (samples > 0) {
    m["nodes_with_slack_mean"] = slack_sum / static_cast<double>(samples);
    m["free_nodes_mean"] = free_nodes_sum / static_cast<double>(samples);
    m["placeable_8gpu_tasks_mean"] = placeable8_sum / static_cast<double>(samples);
    m["stranded_gpus_8g_mean"] = stranded_sum / static_cast<double>(samples);
    m["alloc_ratio_hp_pct"] = alloc_hp_sum / static_cast<double>(samples);
    m["alloc_ratio_hp_lp_pct"] = alloc_all_sum / static_cast<double>(samples);
    m["modelled_util_pct"] = util_sum / static_cast<double>(samples);
    m["hp_demand_pct"] = hp_demand_sum / static_cast<double>(samples);
    for (size_t k = 0; k < idle_sums.size(); ++k) {
      std::string shape = ProbeShapes()[k].name;
      for (char& ch : shape) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      const double n = static_cast<double>(samples);
      m["idle_fractional_gpus_" + shape + "_mean"] = idle_sums[k].fractional / n;
      m["idle_stranded_gpus_" + shape + "_mean"] = idle_sums[k].stranded / n;
      m["idle_insufficient_cpu_gpus_" + shape + "_mean"] = idle_sums[k].insufficient_cpu / n;
    }
    if (asw) {
      m["within_asw_fulfillable_128_count"] = w128 / static_cast<double>(samples);
      m["within_asw_fulfillable_256_count"] = w256 / static_cast<double>(samples);
      m["across_asw_fulfillable_128_count"] = a128 / static_cast<double>(samples);
      m["free_asws_mean"] = free_asws / static_cast<double>(samples);
    }
    if (pod) m["free_rdma_pods_mean"] = free_pods / static_cast<double>(samples);
    if (config.reserve.enabled) m["held_idle_gpus_mean"] = held_idle / static_cast<double>(samples);
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / static_cast<double>(v.size());
  };
  if (!multinode_domains.empty()) m["domains_per_multinode_job_mean"] = mean(multinode_domains);
  if (!multinode_entropy.empty()) m["entropy_per_multinode_job_mean"] = mean(multinode_entropy);
  if (!asws_per_large.empty()) {
    double s = 0;
    for (double x : asws_per_large) s += x;
    m["asws_per_large_job_mean"] = s / static_cast<double>(asws_per_large.size());
  }
  return res;
}

}  // namespace estuary
