#include "sim/simulate.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <deque>
#include <queue>
#include <set>

#include "common/rng.h"
#include "sched/actions/allocate.h"
#include "sched/actions/failure.h"
#include "sched/actions/preempt.h"
#include "sched/actions/reserve.h"
#include "sched/plugins/register.h"
#include "sim/capacity_metrics.h"
#include "sim/cluster/cluster_spec.h"
#include "sim/metrics.h"

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

// Turns a template into a job of the state, resolving its topology names.
StatusOr<JobId> Materialize(const Scenario& s, ClusterState& state, const JobTemplate& t, const std::string& name) {
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
  const JobId j = state.AddJob(js);
  for (int32_t i = 0; i < t.replicas; ++i) state.AddTask(j, name + "-" + std::to_string(i), t.per_replica, t.priority);
  return j;
}

int64_t FreeNodes(const ClusterState& s) {
  int64_t n = 0;
  for (const Node& node : s.nodes()) n += node.Schedulable() && node.spec.gpu_count > 0 && node.full_free_gpus == node.spec.gpu_count;
  return n;
}

int64_t BoundReplicas(const ClusterState& s, JobId j) {
  int64_t n = 0;
  for (TaskId t : s.job(j).tasks) n += s.task(t).state == TaskState::kBound;
  return n;
}

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
                                     uint64_t seed, bool check_invariants) {
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
  Rng rng(seed);
  if (sc.stream.arrivals_per_hour > 0) {
    double total_share = 0;
    for (const GeneratedClass& g : sc.stream.classes) total_share += g.share;
    const double rate = sc.stream.arrivals_per_hour / 3600.0;
    double t = 0;
    for (int64_t k = 0;; ++k) {
      t += -std::log(1.0 - rng.UniformDouble()) / rate;
      if (t >= static_cast<double>(sc.duration_s)) break;
      double x = rng.UniformDouble() * total_share;
      size_t c = 0;
      while (c + 1 < sc.stream.classes.size() && x >= sc.stream.classes[c].share) x -= sc.stream.classes[c++].share;
      SimJob j;
      j.tmpl = sc.stream.classes[c].job;
      j.tmpl.name += "-" + std::to_string(k);
      j.submit = static_cast<SimTime>(t);
      const double mean = static_cast<double>(sc.stream.classes[c].job.duration_s);
      j.duration = std::max<SimTime>(1, static_cast<SimTime>(std::ceil(-std::log(1.0 - rng.UniformDouble()) * mean)));
      jobs.push_back(j);
    }
  }
  for (SimJob& j : jobs) {
    auto id = Materialize(sc, state, j.tmpl, j.tmpl.name);
    if (!id.ok()) return id.status();
    j.id = *id;
    j.large = int64_t{j.tmpl.replicas} * j.tmpl.per_replica.gpu_count >= 128;
    j.spread_level = SpreadLevel(state, j.id);
  }
  // jobs[job_index[id]] is the job of state job `id`.
  std::vector<size_t> job_index(state.jobs().size(), SIZE_MAX);
  for (size_t i = 0; i < jobs.size(); ++i) job_index[jobs[i].id.value()] = i;
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
  AllocateOptions aopts{config.align, config.topology};
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
  enum EvKind : int { kEnd = 0, kNode = 1, kFailureDraw = 2, kArrival = 3, kTick = 4, kEvict = 5 };
  struct Ev {
    SimTime t;
    int kind;
    size_t idx;     // kEnd, kArrival: job; kNode: node event
    SimTime start;  // kEnd: the run it ends; generated repairs: the failure they repair
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
  double free_asws = 0, free_pods = 0, held_idle = 0, alloc_hp_sum = 0, alloc_all_sum = 0;
  int64_t reservations_made = 0;
  std::deque<size_t> pending;
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
      if (asw) sample.free_asws = whole_free(*data, *asw);
      if (pod) sample.free_rdma_pods = whole_free(*param, *pod);
      res.samples.push_back(sample);
      // Allocation ratios (metrics.md §4; no Standby yet, so nothing is HP-claimed but unused):
      // per GPU node the share of its GPUs held by HP tasks, and by any task; mean over nodes.
      double hp_share = 0, any_share = 0;
      int64_t gpu_nodes = 0;
      for (const Node& n : state.nodes()) {
        if (n.spec.gpu_count == 0) continue;
        ++gpu_nodes;
        int64_t hp = 0;
        for (TaskId t : n.tasks) {
          const Task& task = state.task(t);
          if (task.priority >= kHpPriority) hp += int64_t{task.gpus.size} * task.req.gpu_milli;
        }
        const double cap = static_cast<double>(n.spec.gpu_count) * kMilliPerGpu;
        hp_share += static_cast<double>(hp) / cap;
        any_share += (cap - static_cast<double>(n.gpu_free_total)) / cap;
      }
      if (gpu_nodes > 0) {
        alloc_hp_sum += 100.0 * hp_share / static_cast<double>(gpu_nodes);
        alloc_all_sum += 100.0 * any_share / static_cast<double>(gpu_nodes);
      }
      const std::vector<IdleCauses> causes = IdleGpuCauses(state);
      for (size_t k = 0; k < causes.size(); ++k) {
        const IdleCauses& c = causes[k];
        if (c.shape.name == "8G64C") stranded_sum += c.stranded;
        idle_sums[k].fractional += c.fractional;
        idle_sums[k].stranded += c.stranded;
        idle_sums[k].insufficient_cpu += c.insufficient_cpu;
      }
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
  std::vector<size_t> order;
  std::vector<char> leaves(jobs.size(), 0);  // per job: left the queue in this pass
  auto try_pending = [&](SimTime now) {
    // Queue order: arrival (requeued jobs first), or priority first with arrival among equals.
    order.assign(pending.begin(), pending.end());
    if (config.priority_queue) {
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return jobs[a].tmpl.priority > jobs[b].tmpl.priority; });
    }
    for (size_t i : order) {
      SimJob& j = jobs[i];
      const JobAttempt a = AllocateAction::TryStart(**session, state, j.id, aopts);
      if (a.started) {
        j.started_at = now;
        state.SetJobStart(j.id, now);
        if (j.first_start < 0) {
          j.first_start = now;
          j.granted = a.granted;
          MeasureSpread(state, j);
        }
        SimTime run = j.duration;
        if (net_plane) {
          const auto [domains, nodes] = DomainsAndNodes(state, j.id, *net_plane, net_level);
          if (nodes > 1 && domains > 1) {
            run = (run * net_factor + 9999) / 10000;
            ++slowed_runs;
          }
        }
        events.push({now + run, 0, i, now});
        if (j.large && asw) asws_per_large.push_back(static_cast<double>(DomainsAndNodes(state, j.id, *data, *asw).first));
      } else if (a.kind == OutcomeKind::kInfeasible) {
        j.infeasible = true;  // dropped from the queue: the cluster cannot grow
        j.reason = a.reason;
      }
      leaves[i] = a.started || a.kind == OutcomeKind::kInfeasible;
    }
    std::deque<size_t> still;
    for (size_t i : pending) {
      if (!leaves[i]) still.push_back(i);
      leaves[i] = 0;
    }
    pending.swap(still);
  };

  // A node fails or is repaired: listed and generated events alike.
  auto node_down = [&](NodeId node, SimTime t, bool generated) {
    node_failures += state.node(node).state != NodeState::kDown;
    last_failure[node.value()] = t;
    res.node_events.push_back({t, state.node(node).spec.name, true, generated});
    for (const FailureEffect& fe : NodeFailureAction::NodeDown(state, node, config.align)) {
      if (!fe.requeued) {
        ++shrunk_by_failure;
        continue;
      }
      ++requeued_by_failure;
      const size_t i = job_index[fe.job.value()];
      jobs[i].started_at = -1;
      state.SetJobStart(fe.job, -1);
      pending.push_front(i);
    }
  };
  auto node_up = [&](NodeId node, SimTime t, bool generated) {
    res.node_events.push_back({t, state.node(node).spec.name, false, generated});
    NodeFailureAction::NodeUp(state, node);
  };

  // Reclaim: evictions in their grace period, and the tasks they will evict.
  std::vector<Eviction> evictions;
  std::vector<char> being_evicted(state.tasks().size(), 0);
  int64_t evictions_count = 0, hp_evictions = 0;
  double lost_gpu_hours = 0;
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
    for (uint32_t jid : shrunk) hp_evictions += state.job(JobId(jid)).spec.priority >= kHpPriority;
    for (JobId victim : ev.whole) {
      SimJob& v = jobs[job_index[victim.value()]];
      if (v.started_at < 0) continue;
      int64_t gpu_milli = 0;
      for (TaskId task : state.job(victim).tasks) {
        if (state.task(task).state == TaskState::kBound) {
          gpu_milli += state.task(task).req.TotalGpuMilli();
          state.Unbind(task);
        }
      }
      for (TaskId task : ev.tasks) {
        if (state.task(task).job == victim) gpu_milli += state.task(task).req.TotalGpuMilli();
      }
      const int64_t ran = t - v.started_at, interval = v.tmpl.checkpoint_interval_s;
      lost_gpu_hours += static_cast<double>(gpu_milli) / kMilliPerGpu *
                        static_cast<double>(interval > 0 ? ran % interval : ran) / 3600.0;
      ++evictions_count;
      hp_evictions += v.tmpl.priority >= kHpPriority;
      v.started_at = -1;
      state.SetJobStart(victim, -1);
      pending.push_front(job_index[victim.value()]);
    }
  };
  // Plans evictions for the HP jobs that could not start, in queue order (one plan per job at a
  // time; a plan that would evict a task already being evicted waits for a later event).
  auto reclaim = [&](SimTime t) {
    for (size_t i : pending) {
      SimJob& j = jobs[i];
      if (j.reclaiming || j.tmpl.priority < kHpPriority) continue;
      if (state.job(j.id).reservation.valid()) state.ReleaseReservation(state.job(j.id).reservation);
      const PreemptionPlan plan = PreemptAction::Plan(state, j.id, t, aopts);
      if (!plan.feasible || plan.evict.empty()) continue;
      if (std::any_of(plan.evict.begin(), plan.evict.end(), [&](TaskId x) { return being_evicted[x.value()] != 0; })) {
        continue;
      }
      std::vector<NodeId> hold;
      for (NodeId n : plan.nodes) {
        if (!state.node(n).reservation.valid() && std::find(hold.begin(), hold.end(), n) == hold.end()) hold.push_back(n);
      }
      if (!hold.empty()) state.AddReservation(j.id, hold);
      Eviction ev;
      ev.at = t + config.grace_s;
      ev.for_job = j.id;
      ev.tasks = plan.evict;
      ev.whole = plan.evicted_jobs;
      for (TaskId x : ev.tasks) being_evicted[x.value()] = 1;
      j.reclaiming = true;
      events.push({ev.at, kEvict, evictions.size(), 0});
      evictions.push_back(std::move(ev));
    }
  };

  while (!events.empty() && events.top().t < sc.duration_s) {
    const SimTime t = events.top().t;
    sample_until(t);
    bool failed = false;
    // False while the time's events are only failure-model draws that picked a down node and
    // repairs that no longer apply: nothing happened, so the queue is not tried again (a retry
    // would see the state its last try saw, and the run stays the same as with the listed events).
    bool happened = false, replan = false;
    while (!events.empty() && events.top().t == t) {
      const Ev e = events.top();
      events.pop();
      happened |= e.kind != kNode && e.kind != kFailureDraw;
      if (e.kind == kEnd) {
        SimJob& j = jobs[e.idx];
        if (j.started_at != e.start) continue;  // a run ended earlier by a requeue
        for (TaskId task : state.job(j.id).tasks) state.Finish(task);
        j.started_at = -1;
        state.SetJobStart(j.id, -1);
        j.finished = true;
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
        pending.push_back(e.idx);
      }
    }
    if (!happened) continue;
    try_pending(t);
    if (replan) {
      // Hold nodes for the oldest large jobs that waited too long (queue order is oldest first,
      // requeued jobs at the front).
      std::vector<JobId> waiting;
      for (size_t i : pending) {
        const SimJob& j = jobs[i];
        const int64_t gpus = int64_t{j.tmpl.replicas} * j.tmpl.per_replica.gpu_count;
        if (gpus >= config.reserve.min_gpus && gpus <= config.reserve.max_gpus && t - j.submit >= config.reserve.after_s &&
            !j.reclaiming) {
          waiting.push_back(j.id);
        }
      }
      const int made = ReserveAction::Renew(state, waiting, static_cast<int>(config.reserve.max_jobs), aopts);
      reservations_made += made;
      if (made > 0) try_pending(t);
    }
    if (config.preempt) reclaim(t);
    if (failed) after_failure = std::make_pair(FreeNodes(state), UnusableGpus(state, jobs));
    if (check_invariants) {
      Status st = state.CheckInvariants();
      if (!st.ok()) return Internal("at t=" + std::to_string(t) + ": " + st.message());
    }
  }
  sample_until(sc.duration_s);

  auto& m = res.metrics;
  m["free_nodes"] = static_cast<double>(FreeNodes(state));
  m["allocated_unusable_gpus"] = static_cast<double>(UnusableGpus(state, jobs));
  if (after_failure) {
    m["free_nodes_after_failure"] = static_cast<double>(after_failure->first);
    m["allocated_unusable_gpus_after_failure"] = static_cast<double>(after_failure->second);
  }
  m["gpu_alloc_pct_mean"] = alloc_area / static_cast<double>(sc.duration_s);
  int64_t started = 0, infeasible = 0;
  std::vector<double> hp_delays;
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
  if (config.preempt) {
    m["evictions_count"] = static_cast<double>(evictions_count);
    m["hp_evictions_count"] = static_cast<double>(hp_evictions);
    m["preemption_lost_gpu_hours"] = lost_gpu_hours;
  }
  if (sc.network.enabled) m["network_slowed_runs_count"] = static_cast<double>(slowed_runs);
  if (config.reserve.enabled) m["reservations_made_count"] = static_cast<double>(reservations_made);
  m["sched_delay_p90_s"] = Percentile(delays, 90);
  if (!large_delays.empty()) m["sched_delay_p90_large_s"] = Percentile(large_delays, 90);
  if (!hp_delays.empty()) {
    m["hp_sched_delay_p50_s"] = Percentile(hp_delays, 50);
    m["hp_sched_delay_p90_s"] = Percentile(hp_delays, 90);
    m["hp_sched_delay_p99_s"] = Percentile(hp_delays, 99);
  }
  if (samples > 0) {
    m["stranded_gpus_8g_mean"] = stranded_sum / static_cast<double>(samples);
    m["alloc_ratio_hp_pct"] = alloc_hp_sum / static_cast<double>(samples);
    m["alloc_ratio_hp_lp_pct"] = alloc_all_sum / static_cast<double>(samples);
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
