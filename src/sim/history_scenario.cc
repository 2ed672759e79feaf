#include "sim/history_scenario.h"

#include "api/queue_json.h"

#include <algorithm>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace estuary {
namespace {

// A YAML double-quoted scalar (JSON's escapes are YAML's).
std::string Q(const std::string& s) { return nlohmann::json(s).dump(); }

struct JobSeen {
  EngineJob job;
  int64_t submit_t = 0;
  int64_t last_start = -1;
  int64_t running_since = -1;  // start of the run under way (-1: none)
  int64_t saved = 0;           // work kept from runs that were evicted (up to their last checkpoint)
  int64_t end_t = -1;
  bool finished = false;
  std::vector<StandbyWindowSpec> windows;
};

struct NodeEvent {
  int64_t t = 0;
  std::string node;
  bool fail = true;
};

// A tenant's cancel or resize (ResizeInput), or an admin's defragmentation request (DefragInput),
// at history time t.
struct Change {
  int64_t t = 0;
  uint32_t job = 0;
  bool cancel = true;
  int32_t min = 0, max = 0;
  bool defrag = false;
};

// What the history holds, gathered in one pass.
struct Gathered {
  const EngineConfig* config = nullptr;
  std::vector<std::pair<std::string, std::vector<std::string>>> planes;  // in order, without "node"
  std::vector<AddNodeInput> nodes;                                        // first time each name appears
  std::map<uint32_t, JobSeen> jobs;
  std::vector<uint32_t> job_order;  // by first submission
  std::vector<NodeEvent> node_events;
  std::vector<Change> changes;
  int64_t first_submit = -1, last_t = 0;
};

Gathered Gather(const std::vector<HistoryRecord>& records) {
  Gathered g;
  std::vector<std::string> segment_nodes;  // this segment's NodeId -> name
  std::map<std::string, bool> down;
  for (const HistoryRecord& r : records) {
    if (const auto* s = std::get_if<HistorySegment>(&r.what)) {
      if (!g.config) g.config = &s->config;
      segment_nodes.clear();
      continue;
    }
    if (const auto* e = std::get_if<EngineEvent>(&r.what)) {
      const auto it = g.jobs.find(e->job);
      if (it == g.jobs.end()) continue;
      JobSeen& j = it->second;
      if (e->kind == EngineEvent::Kind::kStarted) {
        j.last_start = j.running_since = e->t;
      } else if (e->kind == EngineEvent::Kind::kReturned && !e->never && j.running_since >= 0) {
        // Evicted whole: the work up to its last checkpoint is kept (the simulator's model).
        const int64_t ran = e->t - j.running_since;
        const int64_t every = j.job.checkpoint_interval_s;
        j.saved += every > 0 ? ran - ran % every : 0;
        j.running_since = -1;
      }
      continue;
    }
    const auto* in = std::get_if<EngineInput>(&r.what);
    if (!in) continue;
    g.last_t = std::max(g.last_t, in->t);
    if (const auto* x = std::get_if<AddPlaneInput>(&in->what)) {
      if (std::none_of(g.planes.begin(), g.planes.end(), [&](const auto& p) { return p.first == x->name; })) {
        g.planes.emplace_back(x->name, x->levels);
      }
    } else if (const auto* x = std::get_if<AddNodeInput>(&in->what)) {
      segment_nodes.push_back(x->spec.name);
      if (std::none_of(g.nodes.begin(), g.nodes.end(), [&](const AddNodeInput& n) { return n.spec.name == x->spec.name; })) {
        g.nodes.push_back(*x);
      }
    } else if (const auto* x = std::get_if<SubmitInput>(&in->what)) {
      if (g.jobs.count(x->job.id) == 0) {
        JobSeen& seen = g.jobs[x->job.id];
        seen.job = x->job;
        seen.submit_t = in->t;
        g.job_order.push_back(x->job.id);
        if (g.first_submit < 0) g.first_submit = in->t;
      }
    } else if (const auto* x = std::get_if<CancelInput>(&in->what)) {
      const auto it = g.jobs.find(x->job);
      if (it == g.jobs.end() || it->second.end_t >= 0) continue;
      it->second.end_t = in->t;
      it->second.finished = x->finished;
      if (!x->finished) g.changes.push_back({in->t, x->job, true, 0, 0});
    } else if (const auto* x = std::get_if<ResizeInput>(&in->what)) {
      if (g.jobs.count(x->job)) g.changes.push_back({in->t, x->job, false, x->min_replicas, x->max_replicas});
    } else if (std::holds_alternative<DefragInput>(in->what)) {
      g.changes.push_back({in->t, 0, false, 0, 0, true});
    } else if (const auto* x = std::get_if<StandbyWindowsInput>(&in->what)) {
      if (const auto it = g.jobs.find(x->job); it != g.jobs.end()) it->second.windows = x->windows;
    } else if (const auto* x = std::get_if<NodeInput>(&in->what)) {
      const bool fail = x->op == NodeInput::Op::kFail;
      if ((!fail && x->op != NodeInput::Op::kRestore) || x->node.value() >= segment_nodes.size()) continue;
      const std::string& name = segment_nodes[x->node.value()];
      if (down[name] == fail) continue;  // a restarted service failing a node that was down
      down[name] = fail;
      g.node_events.push_back({in->t, name, fail});
    }
  }
  return g;
}

std::string ClusterYaml(const Gathered& g) {
  std::ostringstream y;
  y << "# The nodes of a service's history (estuary history scenario).\n";
  if (!g.planes.empty()) {
    y << "topology:\n  planes:\n";
    for (const auto& [name, levels] : g.planes) {
      y << "    - {name: " << Q(name) << ", levels: [";
      for (size_t i = 0; i < levels.size(); ++i) y << (i ? ", " : "") << Q(levels[i]);
      y << "]}\n";
    }
  }
  std::map<std::string, std::string> pool_of;  // shape key -> pool name
  std::ostringstream pools, nodes;
  for (const AddNodeInput& n : g.nodes) {
    const std::string key = n.gpu_model + "/" + std::to_string(n.spec.gpu_count) + "/" +
                            std::to_string(n.spec.cpu_milli) + "/" + std::to_string(n.spec.mem_mib);
    auto [it, added] = pool_of.emplace(key, "pool" + std::to_string(pool_of.size()));
    if (added) {
      pools << "  - {name: " << it->second << ", gpus_per_node: " << n.spec.gpu_count;
      if (n.spec.gpu_count > 0) pools << ", gpu_model: " << Q(n.gpu_model);
      pools << ", cpu_milli: " << n.spec.cpu_milli << ", memory_mib: " << n.spec.mem_mib << "}\n";
    }
    nodes << "  - {name: " << Q(n.spec.name) << ", pool: " << it->second;
    std::string domains;
    for (const auto& [plane, names] : n.domains) {
      const auto p = std::find_if(g.planes.begin(), g.planes.end(), [&](const auto& x) { return x.first == plane; });
      if (p == g.planes.end()) continue;
      for (size_t i = 0; i < names.size() && i < p->second.size(); ++i) {
        domains += (domains.empty() ? "" : ", ") + Q(p->second[i]) + ": " + Q(names[i]);
      }
    }
    if (!domains.empty()) nodes << ", domains: {" << domains << "}";
    nodes << "}\n";
  }
  y << "pools:\n" << pools.str() << "nodes:\n" << nodes.str();
  return y.str();
}

std::string ConfigurationYaml(const EngineConfig& c) {
  std::ostringstream y;
  y << "  - name: recorded\n    policy: " << Q(c.policy) << "\n    queue: " << (c.priority_queue ? "priority" : "fifo")
    << "\n    align: " << (c.allocate.align ? "true" : "false") << "\n    topology: "
    << (c.allocate.topology ? "true" : "false") << "\n    absorb: " << (c.absorb ? "true" : "false") << "\n";
  if (std::find(c.actions.begin(), c.actions.end(), EngineAction::kReclaim) != c.actions.end()) {
    y << "    preempt: {grace_s: " << c.grace_s;
    if (c.exit_mean_s > 0) y << ", exit_mean_s: " << c.exit_mean_s << ", exit_p95_s: " << c.exit_p95_s;
    if (c.allocate.victims != VictimSelection::kEstuary) y << ", victims: " << VictimSelectionName(c.allocate.victims);
    if (c.preemptor_min_priority != kHpPriority) {
      y << ", preemptor_min_priority: " << std::clamp<int32_t>(c.preemptor_min_priority, 0, kMaxPriority);
    }
    y << "}\n";
  }
  y << "    standby: {grace_s: " << c.standby_grace_s
    << ", lend_max_priority: " << std::clamp<int32_t>(c.lend_max_priority, 0, kHpPriority - 1) << "}\n";
  if (c.reserve.enabled) {
    const EngineReserve& r = c.reserve;
    y << "    reserve: {after_s: " << r.after_s << ", max_jobs: " << r.max_jobs << ", min_gpus: " << r.min_gpus
      << ", max_gpus: " << r.max_gpus << ", replan_s: " << r.replan_s << ", drain_after_s: " << r.drain_after_s << "}\n";
  }
  if (c.backfill.easy) {
    y << "    backfill: {mode: " << (c.backfill.conservative ? "conservative" : "easy")
      << ", interval_s: " << c.backfill.interval_s;
    if (c.backfill.conservative) y << ", depth: " << c.backfill.depth;
    y << "}\n";
  }
  if (c.defrag.enabled) {
    const EngineDefrag& d = c.defrag;
    y << "    defrag: {interval_s: " << d.interval_s << ", trigger_after_s: " << d.trigger_after_s
      << ", trigger_min_gpus: " << d.trigger_min_gpus << ", trigger_cooldown_s: " << d.trigger_cooldown_s
      << (d.assemble ? ", assemble: true" : "") << "}\n";
  }
  // The queue schema's JSON is YAML flow: written as the service holds it.
  if (!c.queues.empty()) y << "    queues: " << EncodeQueues(c.queues).dump() << "\n    sharing: " << EncodeSharing(c.sharing).dump() << "\n";
  return y.str();
}

}  // namespace

StatusOr<HistoryScenario> HistoryToScenario(const std::vector<HistoryRecord>& records, const std::string& name,
                                            const std::string& cluster_file) {
  const Gathered g = Gather(records);
  if (!g.config) return InvalidArgument("the history has no segment");
  if (g.nodes.empty()) return InvalidArgument("the history adds no node: no cluster to simulate");
  if (g.first_submit < 0) return InvalidArgument("the history submits no job: no workload to simulate");
  HistoryScenario out;
  out.t0 = g.first_submit;
  const int64_t horizon = g.last_t - out.t0 + 1;
  std::ostringstream y;
  y << "# What-if workload of a service's history (estuary history scenario; docs/history.md).\n"
    << "name: " << Q(name) << "\nduration_s: " << horizon << "\nsample_interval_s: " << std::max<int64_t>(1, horizon / 2000)
    << "\nseeds: [" << g.config->seed << "]\ncluster: {spec: " << Q(cluster_file) << "}\njobs:\n";
  for (uint32_t id : g.job_order) {
    const JobSeen& s = g.jobs.at(id);
    const EngineJob& j = s.job;
    // A job that ended on its own has its observed work; a cancelled one, or one still under way
    // at the end, runs past the horizon (its cancel is an event).
    const bool ended = s.finished && s.last_start >= 0;
    out.cancelled += s.end_t >= 0 && !s.finished;
    const int64_t submit = s.submit_t - out.t0;
    const int64_t duration = ended ? std::max<int64_t>(1, s.saved + s.end_t - s.last_start) : horizon - submit + 1;
    ++out.jobs;
    out.finished += ended;
    y << "  - {name: " << Q("job" + std::to_string(id)) << ", submit_s: " << submit << ", duration_s: " << duration
      << ", replicas: {min: " << j.min_replicas << ", max: " << j.max_replicas << ", step: " << std::max(1, j.step) << "}";
    if (j.usable_step > 0) y << ", usable_step: " << j.usable_step;
    y << ", gpus: " << j.per_replica.gpu_count;
    if (j.per_replica.gpu_count > 0) y << ", gpu_milli: " << j.per_replica.gpu_milli;
    y << ", cpu_milli: " << j.per_replica.cpu_milli << ", memory_mib: " << j.per_replica.mem_mib
      << ", priority: " << j.priority << ", preemptible: " << (j.preemptible ? "true" : "false")
      << ", checkpoint_interval_s: " << j.checkpoint_interval_s << ", restart_cost_s: " << j.restart_cost_s;
    if (j.checkpoint_on_notice_s > 0) y << ", checkpoint_on_notice_s: " << j.checkpoint_on_notice_s;
    if (!j.queue.empty()) y << ", queue: " << Q(j.queue);
    if (!j.plane.empty()) y << ", plane: " << Q(j.plane);
    if (!j.required_level.empty()) y << ", required_level: " << Q(j.required_level);
    if (j.required_max_wait_s > 0) y << ", required_max_wait_s: " << j.required_max_wait_s;
    if (!j.preferred_level.empty()) y << ", preferred_level: " << Q(j.preferred_level);
    if (!j.models.empty()) {
      y << ", models: [";
      for (size_t i = 0; i < j.models.size(); ++i) y << (i ? ", " : "") << Q(j.models[i]);
      y << "]";
    }
    if (!s.windows.empty()) {
      y << ", standby: [";
      for (size_t i = 0; i < s.windows.size(); ++i) {
        const StandbyWindowSpec& w = s.windows[i];
        y << (i ? ", " : "") << "{from_s: " << std::max<int64_t>(0, w.from_s - out.t0)
          << ", to_s: " << std::max<int64_t>(1, w.to_s - out.t0) << ", replicas: " << w.replicas << "}";
      }
      y << "]";
    }
    y << "}\n";
  }
  if (!g.node_events.empty() || !g.changes.empty()) y << "events:\n";
  for (const NodeEvent& e : g.node_events) {
    y << "  - {at_s: " << std::max<int64_t>(0, e.t - out.t0) << ", " << (e.fail ? "fail_node: " : "repair_node: ")
      << Q(e.node) << "}\n";
  }
  for (const Change& c : g.changes) {
    if (c.defrag) {
      y << "  - {at_s: " << std::max<int64_t>(0, c.t - out.t0) << ", defrag: true}\n";
      continue;
    }
    y << "  - {at_s: " << std::max<int64_t>(0, c.t - out.t0) << ", " << (c.cancel ? "cancel_job: " : "resize_job: ")
      << Q("job" + std::to_string(c.job));
    if (!c.cancel) y << ", min: " << c.min << ", max: " << c.max;
    y << "}\n";
  }
  y << "configurations:\n" << ConfigurationYaml(*g.config);
  out.scenario_yaml = y.str();
  out.cluster_yaml = ClusterYaml(g);
  return out;
}

}  // namespace estuary
