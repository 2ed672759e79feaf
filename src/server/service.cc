#include "server/service.h"

#include "server/log_store.h"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <set>

#include <nlohmann/json.hpp>

#include "common/check.h"
#include "api/queue_json.h"
#include "engine/history.h"

namespace estuary {
namespace {

using Json = nlohmann::json;

std::string JobKey(uint64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "job/%016" PRIu64, id);
  return buf;
}
std::string CancelKey(uint64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "cancel/%016" PRIu64, id);
  return buf;
}
std::string TaskKey(uint64_t id, size_t replica) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "task/%016" PRIu64 "/%05zu", id, replica);
  return buf;
}
std::string TaskName(uint64_t id, size_t replica) { return std::to_string(id) + "-" + std::to_string(replica); }

// Parses "<job>-<replica>"; false on anything else.
bool ParseTaskName(const std::string& s, uint64_t* job, size_t* replica) {
  const size_t dash = s.find('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 >= s.size() || dash > 19 || s.size() - dash - 1 > 6) return false;
  uint64_t j = 0, r = 0;
  for (size_t i = 0; i < dash; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    j = j * 10 + static_cast<uint64_t>(s[i] - '0');
  }
  for (size_t i = dash + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    r = r * 10 + static_cast<uint64_t>(s[i] - '0');
  }
  *job = j;
  *replica = static_cast<size_t>(r);
  return true;
}

// A latency histogram in Prometheus form (cumulative buckets, seconds).
struct Histogram {
  static constexpr std::array<double, 12> kBounds = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  std::array<uint64_t, kBounds.size() + 1> counts{};
  double sum = 0;
  uint64_t n = 0;
  void Observe(double s) {
    size_t i = 0;
    while (i < kBounds.size() && s > kBounds[i]) ++i;
    ++counts[i];
    sum += s;
    ++n;
  }
  void Write(std::string& out, const std::string& name, const std::string& help) const {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
    uint64_t cum = 0;
    char buf[160];
    for (size_t i = 0; i < kBounds.size(); ++i) {
      cum += counts[i];
      std::snprintf(buf, sizeof buf, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name.c_str(), kBounds[i], cum);
      out += buf;
    }
    cum += counts[kBounds.size()];
    std::snprintf(buf, sizeof buf, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n%s_sum %.6f\n%s_count %" PRIu64 "\n",
                  name.c_str(), cum, name.c_str(), sum, name.c_str(), n);
    out += buf;
  }
};

Json DomainsJson(const std::vector<std::pair<std::string, std::vector<std::string>>>& d) {
  Json j = Json::object();
  for (const auto& [plane, names] : d) j[plane] = names;
  return j;
}

std::vector<std::pair<std::string, std::vector<std::string>>> DomainsFrom(const Json& j) {
  std::vector<std::pair<std::string, std::vector<std::string>>> d;
  if (!j.is_object()) return d;
  for (auto it = j.begin(); it != j.end(); ++it) d.emplace_back(it.key(), it.value().get<std::vector<std::string>>());
  return d;
}

}  // namespace

std::string_view JobPhaseName(JobPhase phase) {
  switch (phase) {
    case JobPhase::kPending: return "pending";
    case JobPhase::kRunning: return "running";
    case JobPhase::kSucceeded: return "succeeded";
    case JobPhase::kFailed: return "failed";
    case JobPhase::kCancelled: return "cancelled";
  }
  return "pending";
}

namespace {
std::optional<JobPhase> PhaseFrom(const std::string& s) {
  for (JobPhase p : {JobPhase::kPending, JobPhase::kRunning, JobPhase::kSucceeded, JobPhase::kFailed, JobPhase::kCancelled}) {
    if (JobPhaseName(p) == s) return p;
  }
  return std::nullopt;
}
bool Ended(JobPhase p) { return p == JobPhase::kSucceeded || p == JobPhase::kFailed || p == JobPhase::kCancelled; }
}  // namespace

struct Service::Impl {
  // kDone: the replica succeeded while others of its job run on (never started again).
  enum class TaskState : uint8_t { kNone, kStarting, kRunning, kStopping, kDone };
  // What the agents were told of one replica.
  struct TaskRec {
    TaskState state = TaskState::kNone;
    std::string node;
    std::vector<int> gpus;
    // The instances its orders named (Order::instance): the replica's own (told to start, running,
    // told to stop or done), a move's new one (mig_node), a move's old one retiring (retiring).
    uint64_t instance = 0, mig_instance = 0, retiring_instance = 0;
    bool standby = false;    // told to leave its GPUs (kStandby)
    bool lent = false;       // ... and the engine lends them (at once, or once its agent said it left them)
    bool borrowed = false;   // runs on GPUs lent by a Standby replica
    std::string mig_node;    // a migration's new instance starts there (kMigrate) ...
    std::vector<int> mig_gpus;  // ... on these GPUs
    // ... and what its agent said of it: 0 nothing yet, 1 running, -1 it failed or stopped (not
    // stored: a restart rolls a move under way back).
    int8_t mig_report = 0;
    size_t mig_move = SIZE_MAX;  // the engine's move (StartingMove::move; not stored either)
    // Its instance is a move's new instance, taken for the replica's when the engine placed it
    // again on the move's target (its old node failed), and not reported running since: its
    // failure starts the replica anew there — a failed move, as when reported before — not a
    // failure of its job.
    bool moved_in = false;
    std::string retiring;    // a migration's old instance, told to stop, not yet reported stopped
    // Whether it has a record in the store (task/<job>/<replica>): while an instance of it is
    // told to start, runs or is told to stop, and once it succeeded while the engine binds it
    // (kDone: its GPUs stay its job's until the job ends, across a restart too); not once it
    // stopped.
    bool stored() const { return state != TaskState::kNone; }
  };
  struct JobRec {
    JobView view;
    std::vector<TaskRec> tasks;  // one per replica (max replicas)
    bool in_engine = false;      // submitted or adopted (not ended)
    bool parked = false;         // fits no registered node: retried when nodes are added
  };
  struct NodeRec {
    NodeView view;
    NodeId id;  // invalid until the loop has added it
  };
  struct AgentRec {
    std::deque<Order> orders;
    uint64_t next_seq = 1;
  };
  // A caller waiting for the loop to apply (and store) its input.
  struct Waiter {
    std::promise<Status> done;
    ReservationView reservation;  // kReserve's result
    int64_t moves = 0;            // kDefrag's result
  };
  struct Input {
    enum class Kind : uint8_t { kSubmit, kCancel, kReport, kNodesAdded, kNodeAction, kReserve, kUnreserve, kConfig, kResize,
                                kDefrag, kQueues, kWake };
    Kind kind = Kind::kSubmit;
    uint64_t job = 0;
    std::vector<TaskReport> reports;
    std::string node, action;
    int64_t ttl_s = 0;
    ConfigChange config;
    std::vector<QueueSpec> queues;  // kQueues
    SharingSpec sharing;
    int32_t min_replicas = 0, max_replicas = 0;
    std::shared_ptr<Waiter> waiter;
    static Input Of(Kind k, uint64_t job = 0) {
      Input in;
      in.kind = k;
      in.job = job;
      return in;
    }
  };
  std::map<uint64_t, ReservationView> reservations;  // by job id
  std::deque<std::pair<int64_t, uint64_t>> ended;    // (ended_ms, job) in the order jobs ended
  uint64_t jobs_retired_total = 0, compactions_total = 0;
  int64_t compact_checked_ms = 0;
  std::map<uint64_t, StandbyWindowView> windows;     // by window id
  uint64_t next_window = 1;
  std::set<uint64_t> standby_jobs;  // jobs whose windows changed since the last pass
  int64_t defrag_interval_s = 0;
  int64_t defragged_ms = 0;
  int64_t pass_now_ms = 0;          // the loop pass's time
  std::map<uint32_t, Engine::StartingMove> moving;  // by TaskId value, this pass

  Store* store = nullptr;
  const Clock* clock = nullptr;
  ServiceOptions opt;
  std::unique_ptr<LogStore> logs;  // none when opt.logs_dir is empty
  std::unique_ptr<GroupCommitter> committer;
  std::unique_ptr<Engine> engine;
  uint64_t epoch = 0;
  uint64_t instances_made = 0;  // in this epoch (NewInstance)

  // The history (engine/history.h, docs/history.md): the engine's inputs as it records them, and
  // the records not stored yet. They are stored with the next pass that stores anything (a pass
  // that changed nothing keeps its cycle here), under hist/<seq>; meta/hist_next is the next seq.
  std::vector<EngineInput> recorded;
  std::vector<HistoryRecord> history;
  uint64_t history_next = 0;
  void FlushRecorded() {
    for (EngineInput& in : recorded) AppendInput(history, std::move(in));
    recorded.clear();
  }
  // Records the engine's inputs and events from now on (its events also go to on_engine_event).
  void Attach(Engine& e) {
    e.RecordInputs(&recorded);
    e.SetEventObserver([this](const EngineEvent& ev) {
      FlushRecorded();
      history.push_back({ev});
      if (opt.on_engine_event) opt.on_engine_event(ev);
    });
  }
  void StoreHistory(StoreBatch& batch) {
    FlushRecorded();
    if (history.empty()) return;
    for (const HistoryRecord& r : history) batch.Put(HistKey(history_next++), HistoryRecordJson(r).dump());
    batch.Put("meta/hist_next", std::to_string(history_next));
    history.clear();
  }
  static std::string HistKey(uint64_t seq) {
    char b[32];
    std::snprintf(b, sizeof b, "hist/%020" PRIu64, seq);
    return b;
  }

  mutable std::mutex mu;  // everything below
  std::condition_variable input_cv, orders_cv;
  std::map<uint64_t, JobRec> jobs;
  uint64_t next_id = 1;
  std::map<std::string, NodeRec> nodes;
  std::vector<std::string> node_names;  // by engine NodeId
  std::set<std::string> evacuating;     // nodes in state "evacuating" (EndEvacuations)
  // What the engine knows of the live jobs and the queues beyond its inputs (Engine::Carried),
  // stored as it changes (StoreCarry: carry/<job>, meta/queue_carry) so that a reopened service
  // goes on from it (Readmit: Engine::RestoreCarried). Read at recovery until Readmit restores it.
  std::map<uint64_t, CarriedJob> carried;
  EngineCarry carried_queues;     // its queues, usage_at and the schedule
  std::string queue_carry_stored;  // meta/queue_carry as last stored (stored again when it differs)
  std::string schedule_stored;     // meta/schedule, likewise
  static std::string CarryKey(uint64_t id) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "carry/%016" PRIu64, id);
    return buf;
  }
  std::string CarryJson(const CarriedJob& c) const {
    return CarriedJobJson(c, [&](NodeId n) { return Json(node_names.at(n.value())); }).dump();
  }
  std::map<std::string, AgentRec> agents;
  std::deque<Input> inputs;
  bool stopping = false;
  int64_t heartbeats_checked_ms = INT64_MIN / 2;
  int64_t sampled_ms = INT64_MIN / 2;
  std::deque<Service::Sample> samples;
  std::thread loop;
  std::mutex run_mu;  // one RunOnce at a time

  // Metrics.
  uint64_t submitted_total = 0, orders_start_total = 0, orders_stop_total = 0, orders_evict_total = 0, cycles_total = 0;
  uint64_t orders_standby_total = 0, orders_resume_total = 0, orders_migrate_total = 0;
  uint64_t evictions_total = 0, node_failures_total = 0, jobs_ended_total = 0;
  Histogram cycle_seconds, submit_to_running_seconds;

  static EngineJob ToFed(uint64_t id, const JobRequest& r) {
    EngineJob f;
    f.id = static_cast<uint32_t>(id);
    f.name = r.name;
    f.min_replicas = r.min_replicas;
    f.max_replicas = r.max_replicas;
    f.step = r.step;
    f.per_replica.gpu_count = r.gpus;
    f.per_replica.gpu_milli = r.gpus > 0 ? r.gpu_milli : 0;
    f.per_replica.cpu_milli = r.cpu_milli;
    f.per_replica.mem_mib = r.memory_mib;
    f.models = r.models;
    f.plane = r.plane;
    f.required_level = r.required_level;
    f.preferred_level = r.preferred_level;
    f.required_max_wait_s = r.required_max_wait_s;
    f.usable_step = r.usable_step;
    f.priority = r.priority;
    f.preemptible = r.preemptible;
    f.checkpoint_interval_s = r.checkpoint_interval_s;
    f.checkpoint_on_notice_s = r.checkpoint_on_notice_s;
    f.restart_cost_s = r.restart_cost_s;
    f.walltime_s = r.walltime_s;
    // Its agent runs the hook before the GPUs are free: they are lent once it reports so.
    f.acknowledge_standby = !r.hook_standby_enter.empty();
    f.queue = r.queue;
    return f;
  }

  static std::string JobJson(const JobRec& j) {
    Json o;
    o["tenant"] = j.view.tenant;
    o["request"] = Json::parse(EncodeJobRequest(j.view.request));
    o["state"] = std::string(JobPhaseName(j.view.phase));
    o["submitted_ms"] = j.view.submitted_ms;
    o["running_ms"] = j.view.running_ms;
    o["ended_ms"] = j.view.ended_ms;
    o["restarts"] = j.view.restarts;
    o["reason"] = j.view.reason;
    return o.dump();
  }

  std::string ConfigJson() const {
    Json o;
    o["grace_s"] = engine->options().grace_s;
    o["absorb"] = engine->options().absorb;
    o["heartbeat_timeout_s"] = opt.heartbeat_timeout_ms / 1000;
    o["defrag_interval_s"] = defrag_interval_s;
    return o.dump();
  }

  // Adds the node `v` describes to engine `m`.
  static StatusOr<NodeId> AddNodeTo(Engine& m, const NodeView& v) {
    NodeSpec spec;
    spec.name = v.name;
    spec.gpu_count = v.gpus;
    spec.cpu_milli = v.cpu_milli;
    spec.mem_mib = v.memory_mib;
    return m.AddNode(spec, v.gpu_model, v.domains);
  }

  // Adds the node of `r.view` to the engine; sets r.id and its name by engine id.
  Status AddToEngine(NodeRec& r) {
    auto id = AddNodeTo(*engine, r.view);
    if (!id.ok()) return id.status();
    r.id = *id;
    if (node_names.size() <= id->value()) node_names.resize(id->value() + 1);
    node_names[id->value()] = r.view.name;
    return Status::Ok();
  }

  static std::string ResvJson(const ReservationView& r) {
    Json o;
    o["tenant"] = r.tenant;
    o["nodes"] = r.nodes;
    o["created_ms"] = r.created_ms;
    o["expires_ms"] = r.expires_ms;
    return o.dump();
  }
  static std::string ResvKey(uint64_t id) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "resv/%016" PRIu64, id);
    return buf;
  }

  // Holds nodes for job `id` (the loop, or recovery); the reservation record, or a Status.
  StatusOr<ReservationView> HoldNodes(uint64_t id, int64_t now_ms, int64_t expires_ms) {
    JobRec& j = jobs.at(id);
    if (j.view.phase != JobPhase::kPending || !j.in_engine) {
      return InvalidArgument("job " + std::to_string(id) + " is not waiting in the queue");
    }
    std::vector<NodeId> held;
    if (!engine->Reserve(static_cast<uint32_t>(id), &held)) {
      const std::vector<NodeId> already = engine->HeldNodes(static_cast<uint32_t>(id));
      if (already.empty()) return InvalidArgument("no set of nodes could ever hold job " + std::to_string(id));
      held = already;  // it holds nodes already (e.g. for its Reclaim): the reservation names them
    }
    ReservationView r;
    r.job = id;
    r.tenant = j.view.tenant;
    for (NodeId n : held) r.nodes.push_back(node_names[n.value()]);
    r.created_ms = now_ms;
    r.expires_ms = expires_ms;
    return r;
  }

  static std::string TaskJson(const TaskRec& t) {
    Json o;
    o["node"] = t.node;
    o["gpus"] = t.gpus;
    o["state"] = t.state == TaskState::kStarting  ? "starting"
                 : t.state == TaskState::kRunning ? "running"
                 : t.state == TaskState::kDone    ? "done"
                                                  : "stopping";
    if (t.standby) o["standby"] = true;
    if (t.lent) o["lent"] = true;
    if (t.borrowed) o["borrowed"] = true;
    if (t.instance != 0) o["instance"] = t.instance;
    if (!t.mig_node.empty()) {
      o["mig_node"] = t.mig_node;
      o["mig_gpus"] = t.mig_gpus;
      if (t.mig_instance != 0) o["mig_instance"] = t.mig_instance;
    }
    if (!t.retiring.empty()) o["retiring"] = t.retiring;
    if (!t.retiring.empty() && t.retiring_instance != 0) o["retiring_instance"] = t.retiring_instance;
    if (t.moved_in) o["moved_in"] = true;
    return o.dump();
  }
  static std::string WindowKey(uint64_t id) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "standby/%016" PRIu64, id);
    return buf;
  }
  static std::string WindowJson(const StandbyWindowView& w) {
    Json o;
    o["job"] = w.job;
    o["tenant"] = w.tenant;
    o["from_ms"] = w.from_ms;
    o["to_ms"] = w.to_ms;
    o["replicas"] = w.replicas;
    return o.dump();
  }

  bool Visible(const Principal& who, const JobRec& j) const {
    return who.role == Role::kAdmin || (who.role == Role::kTenant && j.view.tenant == who.name);
  }

  // Queues (REQUIRES: mu). Whether tenant `who` may submit to queue q: q or an ancestor lists it.
  bool Mapped(const Principal& who, size_t q) const {
    if (who.role == Role::kAdmin) return true;
    const QueueTree& tree = engine->queue_book().tree();
    for (int p = static_cast<int>(q); p >= 0; p = tree.parent(static_cast<size_t>(p))) {
      const std::vector<std::string>& t = tree.spec(static_cast<size_t>(p)).tenants;
      if (std::find(t.begin(), t.end(), who.name) != t.end()) return true;
    }
    return false;
  }
  // Submit's check of a job's queue (see Service::GetQueues); a tenant naming none gets the one
  // leaf it may use.
  Status CheckQueue(const Principal& who, JobRequest& r) const {
    const QueueTree& tree = engine->queue_book().tree();
    if (tree.empty()) {
      if (r.queue.empty()) return Status::Ok();
      return InvalidArgument("field 'queue': '" + r.queue + "': the service has no queues");
    }
    if (r.queue.empty()) {
      std::vector<std::string> leaves;
      for (size_t q = 0; q < tree.size(); ++q) {
        if (tree.leaf(q) && Mapped(who, q)) leaves.push_back(tree.spec(q).name);
      }
      if (who.role == Role::kTenant && leaves.empty()) {
        return PermissionDenied("field 'queue': tenant '" + who.name + "' may submit to no queue");
      }
      if (who.role == Role::kAdmin || leaves.size() > 1) {
        std::string list;
        for (size_t i = 0; i < leaves.size() && i < 8; ++i) list += (i ? ", " : "") + leaves[i];
        return InvalidArgument("field 'queue': missing (one of " + list + (leaves.size() > 8 ? ", ..." : "") + ")");
      }
      r.queue = leaves.front();
    }
    const std::optional<size_t> q = tree.Find(r.queue);
    if (!q) return InvalidArgument("field 'queue': no queue '" + r.queue + "'");
    if (!tree.leaf(*q)) return InvalidArgument("field 'queue': queue '" + r.queue + "' has queues under it: jobs run in its leaves");
    if (!Mapped(who, *q)) return PermissionDenied("field 'queue': tenant '" + who.name + "' may not submit to queue '" + r.queue + "'");
    for (int p = static_cast<int>(*q); p >= 0; p = tree.parent(static_cast<size_t>(p))) {
      const QueueSpec& spec = tree.spec(static_cast<size_t>(p));
      if (r.priority > spec.max_priority) {
        return PermissionDenied("field 'priority': " + std::to_string(r.priority) + " is above the ceiling of queue '" +
                                spec.name + "' (max_priority " + std::to_string(spec.max_priority) + ")");
      }
    }
    return Status::Ok();
  }
  // Engine::QueueStatus, plus the waiting jobs the engine does not hold: those parked because they
  // fit no registered node (REQUIRES: mu).
  std::vector<Engine::QueueFigures> QueueFigures() const {
    std::vector<Engine::QueueFigures> figures = engine->QueueStatus();
    const QueueTree& tree = engine->queue_book().tree();
    for (const auto& [id, j] : jobs) {
      if (!j.parked || j.view.phase != JobPhase::kPending) continue;
      const std::optional<size_t> q = tree.Find(j.view.request.queue);
      if (!q) continue;
      const JobRequest& r = j.view.request;
      const int64_t gpu = int64_t{r.max_replicas} * (r.gpus > 0 ? int64_t{r.gpus} * r.gpu_milli : 0);
      for (int p = static_cast<int>(*q); p >= 0; p = tree.parent(static_cast<size_t>(p))) {
        figures[static_cast<size_t>(p)].pending += gpu;
        ++figures[static_cast<size_t>(p)].waiting_jobs;
      }
    }
    return figures;
  }
  // Per-queue gauges for MetricsText (REQUIRES: mu); none without queues.
  void QueueMetricsText(std::string& out) const {
    const QueueTree& tree = engine->queue_book().tree();
    if (tree.empty()) return;
    const std::vector<Engine::QueueFigures> figures = QueueFigures();
    struct Gauge {
      const char* name;
      const char* help;
      int64_t Engine::QueueFigures::*gpu;  // GPU milli, shown in GPUs; null: jobs below
      int64_t Engine::QueueFigures::*jobs;
    };
    static constexpr Gauge kGauges[] = {
        {"estuary_queue_gpus_held", "GPUs a queue's jobs hold (its subtree's included).", &Engine::QueueFigures::held, nullptr},
        {"estuary_queue_gpus_guaranteed", "A queue's guaranteed GPUs.", &Engine::QueueFigures::guarantee, nullptr},
        {"estuary_queue_gpus_fair_share", "A queue's weighted fair share of the GPUs now.", &Engine::QueueFigures::fair, nullptr},
        {"estuary_queue_gpus_borrowed", "GPUs a queue holds above its guarantee.", &Engine::QueueFigures::borrowed, nullptr},
        {"estuary_queue_gpus_lent", "GPUs a queue's Standby replicas lend.", &Engine::QueueFigures::lent, nullptr},
        {"estuary_queue_gpus_pending", "GPUs a queue's waiting jobs ask for (at max replicas).", &Engine::QueueFigures::pending, nullptr},
        {"estuary_queue_jobs_waiting", "A queue's waiting jobs.", nullptr, &Engine::QueueFigures::waiting_jobs},
        {"estuary_queue_jobs_running", "A queue's running jobs.", nullptr, &Engine::QueueFigures::running_jobs},
    };
    char buf[320];
    for (const Gauge& g : kGauges) {
      std::snprintf(buf, sizeof buf, "# HELP %s %s\n# TYPE %s gauge\n", g.name, g.help, g.name);
      out += buf;
      for (size_t q = 0; q < tree.size(); ++q) {
        const double v = g.gpu ? static_cast<double>(figures[q].*g.gpu) / kMilliPerGpu : static_cast<double>(figures[q].*g.jobs);
        std::snprintf(buf, sizeof buf, "%s{queue=\"%s\"} %.17g\n", g.name, tree.spec(q).name.c_str(), v);
        out += buf;
      }
    }
  }
  // The queues as `who` sees them (REQUIRES: mu).
  QueuesView QueuesFor(const Principal& who) const {
    QueuesView v;
    const QueueTree& tree = engine->queue_book().tree();
    v.sharing = engine->options().sharing;
    const std::vector<Engine::QueueFigures> figures = QueueFigures();
    std::vector<char> shown(tree.size(), who.role == Role::kAdmin);
    for (size_t q = 0; q < tree.size(); ++q) {
      if (shown[q] || !Mapped(who, q)) continue;
      for (int p = static_cast<int>(q); p >= 0; p = tree.parent(static_cast<size_t>(p))) shown[static_cast<size_t>(p)] = 1;
    }
    for (size_t q = 0; q < tree.size(); ++q) {
      if (shown[q]) v.queues.push_back({tree.spec(q), figures[q]});
    }
    return v;
  }

  // Adds an order for the agent of `node` (held in `out` until the batch is durable).
  // A new instance's id: the epoch above, a count within it below (unique across restarts).
  uint64_t NewInstance() { return epoch << 32 | ++instances_made; }
  // An order for the replica's own instance.
  void AddOrder(std::vector<std::pair<std::string, Order>>& out, Order::Op op, uint64_t job, size_t replica,
                const TaskRec& t) {
    AddOrderAt(out, op, job, replica, t.node, t.gpus, t.instance);
  }
  void AddOrderAt(std::vector<std::pair<std::string, Order>>& out, Order::Op op, uint64_t job, size_t replica,
                  const std::string& node, const std::vector<int>& gpus, uint64_t instance) {
    Order o;
    o.op = op;
    o.task = TaskName(job, replica);
    o.instance = instance;
    o.job = job;
    o.node = node;
    o.gpus = gpus;
    switch (op) {
      case Order::Op::kStart:
        o.duration_s = jobs.at(job).view.request.duration_s;
        FillLaunch(o, job, replica);
        ++orders_start_total;
        break;
      case Order::Op::kStop: ++orders_stop_total; break;
      case Order::Op::kEvict:
        o.checkpoint_signal = jobs.at(job).view.request.checkpoint_signal;
        ++orders_evict_total;
        break;
      case Order::Op::kStandby: ++orders_standby_total; break;
      case Order::Op::kResume: ++orders_resume_total; break;
      case Order::Op::kMigrate: {
        // The new instance runs for what is left of the replica's run.
        const JobView& v = jobs.at(job).view;
        o.duration_s = v.request.duration_s;
        if (o.duration_s > 0 && v.running_ms >= 0) o.duration_s = std::max<int64_t>(1, o.duration_s - (pass_now_ms - v.running_ms) / 1000);
        FillLaunch(o, job, replica);
        ++orders_migrate_total;
        break;
      }
    }
    const auto it = nodes.find(node);
    out.emplace_back(it == nodes.end() ? std::string() : it->second.view.agent, std::move(o));
  }

  // What a real agent needs to start replica `replica` of `job` (Order's launch fields): the
  // engine's binding decides the world size and the node of the lowest bound rank.
  void FillLaunch(Order& o, uint64_t job, size_t replica) {
    const JobRec& j = jobs.at(job);
    o.tenant = j.view.tenant;
    o.replica = static_cast<int32_t>(replica);
    o.restart_count = j.view.restarts;
    o.checkpoint_signal = j.view.request.checkpoint_signal;
    o.cpu_milli = j.view.request.cpu_milli;
    o.memory_mib = j.view.request.memory_mib;
    o.gpu_milli = j.view.request.gpu_milli;
    o.master_port = kMasterPortBase + static_cast<int32_t>(job % kMasterPorts);
    o.replicas = 0;
    if (const std::optional<JobId> ej = engine->JobOf(static_cast<uint32_t>(job))) {
      for (TaskId t : engine->state().job(*ej).tasks) {
        const Task& task = engine->state().task(t);
        if (task.state != estuary::TaskState::kBound) continue;
        if (o.replicas++ == 0) {
          const std::string& name = node_names[task.node.value()];
          const auto n = nodes.find(name);
          o.master_addr = n == nodes.end() || n->second.view.address.empty() ? name : n->second.view.address;
        }
      }
    }
    const Json request = Json::parse(EncodeJobRequest(j.view.request));
    Json w = Json::object();
    for (const char* k : {"command", "env", "workdir", "hooks"}) {
      if (request.contains(k)) w[k] = request[k];
    }
    o.workload = w.dump();
  }

  // Compares what the engine binds for job `id` with what agents were told; orders the
  // difference and stores the changed task records.
  void Reconcile(uint64_t id, StoreBatch& batch, std::vector<std::pair<std::string, Order>>& out) {
    JobRec& j = jobs.at(id);
    const std::optional<JobId> ej = engine->JobOf(static_cast<uint32_t>(id));
    const ClusterState& st = engine->state();
    int32_t bound = 0, standby = 0, migrating = 0;
    for (size_t i = 0; i < j.tasks.size(); ++i) {
      TaskRec& t = j.tasks[i];
      std::string node;
      std::vector<int> gpus;
      bool is_bound = false, in_standby = false, borrowed = false;
      TaskId tid;
      if (ej && j.in_engine && i < st.job(*ej).tasks.size()) {
        tid = st.job(*ej).tasks[i];
        const Task& task = st.task(tid);
        if (task.state == estuary::TaskState::kBound) {
          is_bound = true;
          in_standby = task.standby || engine->EnteringStandby(tid);  // told once chosen, lent once it said so
          borrowed = task.borrowed;
          node = node_names[task.node.value()];
          for (uint8_t g : task.gpus) gpus.push_back(g);
        }
      }
      bound += is_bound;
      bool told = t.state == TaskState::kStarting || t.state == TaskState::kRunning;
      // Migration, make-before-break: the engine started a move of this replica (its new
      // instance is ordered on the target); or the move ended — completed (the engine binds the
      // replica at the target: the new instance is the replica, the old one stops) or abandoned
      // (the new instance stops; the old one runs on).
      // (A move's start is ordered below, after the replica's own start: the engine may start a
      // move of a replica it placed in the same cycle.)
      const auto mv = tid.valid() ? moving.find(tid.value()) : moving.end();
      // The engine may also have given the move up and placed the replica again on the move's
      // target GPUs in the same cycle (its old node failed, say): the new instance is the
      // replica's then too — starting until its agent says it runs — unless it already failed.
      // A move the engine started in place of the one ordered (given up and planned anew in one
      // cycle — an evacuation's, say — maybe onto the same node) means that one ended too.
      if (!t.mig_node.empty() && (mv == moving.end() || mv->second.move != t.mig_move)) {
        if (told && is_bound && node == t.mig_node && gpus == t.mig_gpus && t.mig_report >= 0) {
          AddOrder(out, Order::Op::kStop, id, i, t);
          t.retiring = t.node;
          t.retiring_instance = t.instance;
          t.node = t.mig_node;
          t.gpus = t.mig_gpus;
          t.instance = t.mig_instance;
          if (t.state == TaskState::kStarting && t.mig_report > 0) {
            t.state = TaskState::kRunning;  // its new instance was reported running
            ++j.view.running_replicas;
          } else if (t.state == TaskState::kRunning && t.mig_report == 0) {
            t.state = TaskState::kStarting;
            --j.view.running_replicas;
          }
          t.moved_in = t.state == TaskState::kStarting;
        } else {
          AddOrderAt(out, Order::Op::kStop, id, i, t.mig_node, t.mig_gpus, t.mig_instance);
        }
        t.mig_node.clear();
        t.mig_gpus.clear();
        t.mig_instance = 0;
        t.mig_report = 0;
        t.mig_move = SIZE_MAX;
        if (t.stored()) batch.Put(TaskKey(id, i), TaskJson(t));
      }
      if (told && (!is_bound || t.node != node || t.gpus != gpus)) {
        AddOrder(out, Order::Op::kStop, id, i, t);
        t.standby = t.lent = t.borrowed = t.moved_in = false;
        told = false;
        if (t.state == TaskState::kRunning) --j.view.running_replicas;
        const auto n = nodes.find(t.node);
        if (n != nodes.end() && n->second.view.state == "failed") {
          // Its node is gone: the replica stopped with it (the order is for an agent that
          // comes back).
          t.state = TaskState::kNone;
          batch.Delete(TaskKey(id, i));
        } else {
          t.state = TaskState::kStopping;
          batch.Put(TaskKey(id, i), TaskJson(t));
        }
      }
      // A replica that succeeded is done while the engine binds it where it ran; once the engine
      // lets it go (its job shrank or was evicted — and maybe placed again in the same cycle,
      // elsewhere), binding it again is a new run of it.
      if (t.state == TaskState::kDone && (!is_bound || t.node != node || t.gpus != gpus)) {
        t.state = TaskState::kNone;
        batch.Delete(TaskKey(id, i));
      }
      // A replica still stopping starts again once its agent reports it stopped (Reconcile runs
      // again then), so one replica never runs twice.
      if (is_bound && t.state == TaskState::kNone) {
        t.state = TaskState::kStarting;
        t.node = node;
        t.gpus = gpus;
        t.borrowed = borrowed;
        t.standby = t.lent = t.moved_in = false;
        t.instance = NewInstance();
        told = true;
        AddOrder(out, Order::Op::kStart, id, i, t);
        batch.Put(TaskKey(id, i), TaskJson(t));
      }
      if (mv != moving.end() && t.mig_node.empty() && told && t.node == node) {
        t.mig_node = node_names[mv->second.to.value()];
        t.mig_report = 0;
        t.mig_gpus.assign(mv->second.gpus.begin(), mv->second.gpus.end());
        t.mig_instance = NewInstance();
        t.mig_move = mv->second.move;
        AddOrderAt(out, Order::Op::kMigrate, id, i, t.mig_node, t.mig_gpus, t.mig_instance);
        out.back().second.from = t.node;
        batch.Put(TaskKey(id, i), TaskJson(t));
      }
      migrating += !t.mig_node.empty();
      // A borrower whose lender left keeps running where it is, on capacity of its own now.
      if (told && is_bound && t.node == node && t.borrowed != borrowed) {
        t.borrowed = borrowed;
        batch.Put(TaskKey(id, i), TaskJson(t));
      }
      // Standby: the replica leaves its GPUs (lent), or takes them back.
      if (told && is_bound && t.node == node && t.standby != in_standby) {
        t.standby = in_standby;
        t.lent = in_standby && st.task(tid).standby;  // lent at once unless its agent must answer first
        AddOrder(out, in_standby ? Order::Op::kStandby : Order::Op::kResume, id, i, t);
        batch.Put(TaskKey(id, i), TaskJson(t));
      }
      standby += told && t.standby;
    }
    // A job returned and placed again exactly where its replicas run (e.g. a borrower whose
    // lender left) is running without a restart.
    if (j.view.phase == JobPhase::kPending && j.in_engine && j.view.running_replicas >= j.view.request.min_replicas &&
        engine->Running(static_cast<uint32_t>(id)) > 0) {
      j.view.phase = JobPhase::kRunning;
      j.view.reason.clear();
    }
    j.view.bound_replicas = bound;
    j.view.standby_replicas = standby;
    j.view.migrating_replicas = migrating;
  }

  // Whether job `j` has succeeded: a replica of it succeeded while the engine bound it, and
  // none is starting or running any more.
  static bool Succeeded(const JobRec& j) {
    bool done = false;
    for (const TaskRec& t : j.tasks) {
      if (t.state == TaskState::kStarting || t.state == TaskState::kRunning) return false;
      done |= t.state == TaskState::kDone;
    }
    return done;
  }

  // Nodes `failed` failed: the replicas told to stop there stopped with them (their agents will
  // not say so), and run again wherever the engine binds them next. One pass over every job
  // however many failed (a lost agent's nodes fail together).
  void StoppedWithNodes(const std::set<std::string>& failed, StoreBatch& batch, std::set<uint64_t>& touched) {
    if (failed.empty()) return;
    for (auto& [id, j] : jobs) {
      for (size_t i = 0; i < j.tasks.size(); ++i) {
        TaskRec& t = j.tasks[i];
        if (t.state != TaskState::kStopping || failed.count(t.node) == 0) continue;
        t.state = TaskState::kNone;
        t.standby = t.lent = t.borrowed = false;
        batch.Delete(TaskKey(id, i));
        touched.insert(id);
      }
    }
  }

  void EndJob(JobRec& j, JobPhase phase, const std::string& reason, int64_t now_ms) {
    j.view.phase = phase;
    j.view.ended_ms = now_ms;
    ended.emplace_back(now_ms, j.view.id);
    j.view.reason = reason;
    if (j.in_engine) {
      // A job that ended on its own (its replicas succeeded or one failed) finishes in the engine;
      // a cancelled one is cancelled (the history tells them apart: docs/history.md).
      if (phase == JobPhase::kCancelled) engine->Cancel(static_cast<uint32_t>(j.view.id), now_ms / 1000);
      else engine->Finish(static_cast<uint32_t>(j.view.id), now_ms / 1000);
    }
    j.in_engine = false;
    j.parked = false;
    ++jobs_ended_total;
  }

  // CompactEngine's jobs: every live job of the engine known to `fresh` in the order the engine
  // knew it, the running ones adopted where they run (lenders first, then the jobs on their lent
  // GPUs), the waiting ones queued again in order at now_s. False when any step fails.
  bool RebuildJobs(Engine& fresh, int64_t now_s) const {
    const ClusterState& old = engine->state();
    // Every live job first known in the order the old engine knew it (its JobIds), so that ties
    // among jobs, which follow their ids (Absorb's, the victims'), fall as they would have.
    std::vector<std::pair<JobId, uint64_t>> known;
    for (const auto& [id, j] : jobs) {
      const auto ej = engine->JobOf(static_cast<uint32_t>(id));
      if (j.in_engine && ej) known.emplace_back(*ej, id);
    }
    std::sort(known.begin(), known.end());
    for (const auto& [ej, id] : known) {
      if (!fresh.Know(ToFed(id, jobs.at(id).view.request), now_s)) return false;
    }
    for (int borrowers = 0; borrowers < 2; ++borrowers) {
      for (const auto& [id, j] : jobs) {
        const auto ej = engine->JobOf(static_cast<uint32_t>(id));
        if (!j.in_engine || !ej || engine->Running(static_cast<uint32_t>(id)) == 0) continue;
        std::vector<Engine::Placement> placements;
        bool borrowing = false;
        for (size_t r = 0; r < old.job(*ej).tasks.size(); ++r) {
          const Task& t = old.task(old.job(*ej).tasks[r]);
          if (t.state != estuary::TaskState::kBound) continue;
          placements.push_back({r, t.node, t.gpus, t.standby, t.borrowed});
          borrowing |= t.borrowed;
        }
        if (borrowing != (borrowers == 1)) continue;
        if (!fresh.Adopt(ToFed(id, j.view.request), placements, old.job(*ej).started_at_s)) return false;
      }
    }
    // Every job in the engine runs or waits in its queue (a Reclaim's job would hold nodes, but
    // there is none: quiescent).
    const std::vector<uint32_t> queued = engine->QueuedInOrder();
    size_t waiting = 0;
    for (const auto& [id, j] : jobs) waiting += j.in_engine && engine->Running(static_cast<uint32_t>(id)) == 0;
    if (waiting != queued.size()) return false;
    for (uint32_t id : queued) {
      const auto it = jobs.find(id);
      if (it == jobs.end() || !fresh.Submit(ToFed(id, it->second.view.request), SubmitMode::kEnqueue, now_s).accepted) {
        return false;
      }
    }
    return true;
  }

  // Rebuilds the engine without the jobs that ended (their records in the engine's ClusterState
  // are what grows with history): a fresh member gets the same planes, the nodes in id order with
  // their states, every live job known in the old engine's order (Engine::Know), every running
  // job adopted exactly where it runs (lenders first, then the jobs on their lent GPUs), the
  // queue submitted again in order, what the old engine knew beyond those inputs inherited
  // (Engine::Inherit) and the reservations held again: it decides as the old one would. Only
  // when nothing is under way (Engine::Quiescent); all or nothing: false, and the old
  // engine kept, when any step fails. Stores the reservations' new node lists.
  bool CompactEngine(int64_t now_s, StoreBatch& batch) {
    if (!engine->Quiescent()) return false;
    const ClusterState& old = engine->state();
    auto made = Engine::Create(ClusterState(), engine->options());
    if (!made.ok()) return false;
    std::unique_ptr<Engine> fresh = std::move(*made);
    // The new engine's segment of the history, kept aside until the rebuild succeeds.
    std::vector<HistoryRecord> segment = {{HistorySegment{engine->options()}}};
    std::vector<EngineInput> rec;
    fresh->RecordInputs(&rec);
    const auto take_inputs = [&] {
      for (EngineInput& in : rec) AppendInput(segment, std::move(in));
      rec.clear();
    };
    fresh->SetEventObserver([&](const EngineEvent& ev) {
      take_inputs();
      segment.push_back({ev});
    });
    for (const Plane& p : old.topology().planes()) {
      if (!fresh->AddPlane(p.name, p.levels).ok()) return false;
    }
    for (size_t i = 0; i < old.num_nodes(); ++i) {
      const Node& n = old.node(NodeId(static_cast<uint32_t>(i)));
      const auto rec = nodes.find(node_names[i]);
      if (rec == nodes.end()) return false;
      auto id = AddNodeTo(*fresh, rec->second.view);
      if (!id.ok() || id->value() != i) return false;
      if (n.state == NodeState::kDown) fresh->FailNode(*id, now_s);
      if (n.state == NodeState::kCordoned) fresh->SetCordoned(*id, true);
    }
    if (!RebuildJobs(*fresh, now_s)) return false;
    take_inputs();
    segment.push_back({HistoryInherit{true}});
    // FGD's learned typical tasks count the ended jobs too; the jobs' waits, hints and no-borrow
    // periods and the queues' cooldowns and usage go on.
    fresh->Inherit(*engine, true);
    std::map<uint64_t, ReservationView> held = reservations;
    for (auto& [id, r] : held) {
      std::vector<NodeId> nodes_held;
      r.nodes.clear();
      // The inheritance gave the job its hold back (what it held in the old engine), or the
      // reservation holds anew.
      if (fresh->Reserve(static_cast<uint32_t>(id), &nodes_held) || !(nodes_held = fresh->HeldNodes(static_cast<uint32_t>(id))).empty()) {
        for (NodeId n : nodes_held) r.nodes.push_back(node_names[n.value()]);
      }
    }
    (void)fresh->TakeEvents();
    take_inputs();
    FlushRecorded();  // the old engine's last inputs end its segment
    history.insert(history.end(), std::make_move_iterator(segment.begin()), std::make_move_iterator(segment.end()));
    Attach(*fresh);
    engine = std::move(fresh);
    for (const auto& [wid, w] : windows) standby_jobs.insert(w.job);  // the new engine gets them next pass
    for (auto& [id, r] : held) {
      if (r.nodes.empty()) {
        batch.Delete(ResvKey(id));  // nothing could hold it any more: it ends
        reservations.erase(id);
        continue;
      }
      batch.Put(ResvKey(id), ResvJson(r));
      reservations[id] = r;
    }
    ++compactions_total;
    return true;
  }

  // Queues `in` for the loop (with `w` as its waiter), releases `lk` (on mu), wakes the loop and
  // waits for it to apply the input (Unavailable after 10 s).
  Status Ask(std::unique_lock<std::mutex>& lk, Input in, const std::shared_ptr<Waiter>& w);

  // What one pass of the loop (RunOnce) has in hand: its time, the store batch and orders it
  // builds, the callers it answers once stored, the jobs whose placement it must reconcile.
  struct Pass {
    int64_t now_ms = 0, now_s = 0;
    StoreBatch& batch;
    std::vector<std::pair<std::string, Order>>& out;
    std::vector<std::pair<std::shared_ptr<Waiter>, Status>>& waiters;
    std::set<uint64_t> touched;
    bool nodes_added = false;  // new room: parked jobs may fit
  };
  // The steps of a pass, in RunOnce's order: the queued inputs applied; parked jobs admitted
  // again when nodes were added; nodes whose heartbeats stopped failed; Standby windows handed to
  // the engine; a due defragmentation; the engine's events turned into job states; eviction
  // notices turned into orders; reservations that served their purpose ended; the touched jobs
  // reconciled and stored; ended jobs past their retention retired; the engine compacted when
  // due; a dashboard sample taken when due. After the pass (outside `mu`): the batch committed,
  // the callers answered, the orders handed to their agents.
  // Recovery (Open), in order: nodes; jobs, task records, cancellations and windows; the jobs
  // re-admitted (running ones adopted where they ran), their reservations held again.
  Status RecoverNodes(int64_t now_ms);
  Status RecoverJobs(int64_t now_ms, StoreBatch& batch);
  // What the engine before knew beyond its inputs (StoreCarry's records) into `carried` and
  // `carried_queues`; the records of retired jobs deleted.
  Status RecoverCarry(StoreBatch& batch);
  Status Readmit(int64_t now_ms, StoreBatch& batch, std::vector<std::pair<std::string, Order>>& out);
  // Readmit's end: the waiting jobs queued again in their carried order, their reservations held
  // again, and the engine given what the one before knew (Engine::RestoreCarried).
  Status ReadmitWaiting(std::vector<uint64_t> waiting, int64_t now_ms, StoreBatch& batch);
  void ApplyInput(Input& in, Pass& p);
  void ApplyNodeAction(Input& in, Pass& p);  // an admin's cordon, drain, evacuate, fail, restore
  void ApplyReports(Input& in, Pass& p);
  void FailSilentNodes(Pass& p);
  void HandOverWindows(Pass& p);
  void HandleEvents(const std::vector<EngineEvent>& events, Pass& p);
  void NoticeEvictions(Pass& p);
  void EndReservations(Pass& p);
  void AdmitParked(Pass& p);
  void DefragIfDue(Pass& p);
  // Nodes whose evacuation the engine ended (Engine::Evacuating: they hold no task) are
  // "cordoned" now.
  void EndEvacuations(Pass& p);
  void ReconcileTouched(Pass& p);
  void RetireEnded(Pass& p);
  // The carried state of the live jobs the engine logged as changed (Engine::TakeCarryLog) and,
  // when it changed, of the queues, into the pass's batch.
  void StoreCarry(Pass& p);
  void CompactIfDue(Pass& p);
  void SampleIfDue(int64_t now_ms);
  // Hands `out` to the agents' order queues (each order numbered in its agent's sequence), what
  // frees GPUs first: stops, eviction notices, Standby, resumes, and last the starts and moves
  // (which may use GPUs just freed). Takes `mu`.
  void SendOrders(std::vector<std::pair<std::string, Order>>& out);

  void Admit(JobRec& j, int64_t now_s) {
    // Behind the jobs already waiting (the simulator's arrival semantics): the pass's cycle tries
    // the queue in order.
    const Admission a = engine->Submit(ToFed(j.view.id, j.view.request), SubmitMode::kEnqueue, now_s);
    j.in_engine = a.accepted;
    j.parked = !a.accepted;
    j.view.reason = a.accepted ? "waiting for capacity" : (a.reason.empty() ? "fits no registered node" : a.reason);
  }

};

Service::Service(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Service::~Service() { Stop(); }

// ---- Recovery (Open), by step ----

// Nodes, in name order, as stored (a failed node is down again at once).
Status Service::Impl::RecoverNodes(int64_t now_ms) {
  Impl& s = *this;
  const int64_t now_s = now_ms / 1000;
  std::map<std::string, std::string> node_state;
  ESTUARY_RETURN_IF_ERROR(store->Scan("nodestate/", [&](std::string_view k, std::string_view v) {
    node_state[std::string(k.substr(10))] = std::string(v);
    return true;
  }));
  Status bad = Status::Ok();
  ESTUARY_RETURN_IF_ERROR(store->Scan("node/", [&](std::string_view k, std::string_view v) {
    const Json j = Json::parse(v, nullptr, false);
    if (j.is_discarded()) {
      bad = Internal("store: " + std::string(k) + ": not JSON");
      return false;
    }
    Impl::NodeRec r;
    r.view.name = std::string(k.substr(5));
    r.view.agent = j.value("agent", "");
    r.view.gpus = j.value("gpus", 0);
    r.view.gpu_model = j.value("gpu_model", "");
    r.view.address = j.value("address", "");
    r.view.cpu_milli = j.value("cpu_milli", int64_t{0});
    r.view.memory_mib = j.value("memory_mib", int64_t{0});
    r.view.domains = DomainsFrom(j.value("domains", Json::object()));
    r.view.last_heartbeat_ms = now_ms;
    if (const Status st = s.AddToEngine(r); !st.ok()) {
      bad = Internal("store: " + std::string(k) + ": " + st.message());
      return false;
    }
    const std::string state = node_state.count(r.view.name) ? node_state[r.view.name] : "ready";
    r.view.state = state;
    // A failed node takes no adopted work; cordoned, drained and evacuating ones are applied
    // after the running jobs are adopted (work there keeps running, or moves).
    if (state == "failed") s.engine->FailNode(r.id, now_s);
    s.agents[r.view.agent];
    s.nodes.emplace(r.view.name, std::move(r));
    return true;
  }));
  ESTUARY_RETURN_IF_ERROR(bad);
  return Status::Ok();
}

// Jobs, their task records, cancellations not yet applied, ended jobs' order, Standby windows.
Status Service::Impl::RecoverJobs(int64_t now_ms, StoreBatch& batch) {
  Impl& s = *this;
  Status bad = Status::Ok();
  ESTUARY_RETURN_IF_ERROR(store->Scan("job/", [&](std::string_view k, std::string_view v) {
    const Json j = Json::parse(v, nullptr, false);
    if (j.is_discarded() || !j.contains("request")) {
      bad = Internal("store: " + std::string(k) + ": not a job record");
      return false;
    }
    auto req = DecodeJobRequest(j["request"].dump());
    const auto phase = PhaseFrom(j.value("state", ""));
    if (!req.ok() || !phase) {
      bad = Internal("store: " + std::string(k) + ": bad job record");
      return false;
    }
    Impl::JobRec r;
    r.view.id = std::stoull(std::string(k.substr(4)));
    r.view.tenant = j.value("tenant", "");
    r.view.request = std::move(*req);
    r.view.phase = *phase;
    r.view.submitted_ms = j.value("submitted_ms", int64_t{0});
    r.view.running_ms = j.value("running_ms", int64_t{-1});
    r.view.restarts = j.value("restarts", int32_t{0});
    r.view.ended_ms = j.value("ended_ms", int64_t{-1});
    r.view.reason = j.value("reason", "");
    r.tasks.resize(static_cast<size_t>(r.view.request.max_replicas));
    s.next_id = std::max(s.next_id, r.view.id + 1);
    s.jobs.emplace(r.view.id, std::move(r));
    return true;
  }));
  ESTUARY_RETURN_IF_ERROR(bad);
  ESTUARY_RETURN_IF_ERROR(store->Scan("task/", [&](std::string_view k, std::string_view v) {
    // task/<16>/<5>
    const uint64_t id = std::stoull(std::string(k.substr(5, 16)));
    const size_t replica = std::stoul(std::string(k.substr(22)));
    const Json j = Json::parse(v, nullptr, false);
    const auto it = s.jobs.find(id);
    if (j.is_discarded() || replica >= 100000) {
      bad = Internal("store: " + std::string(k) + ": not a task record");
      return false;
    }
    // A record its retired job left behind (written by versions before 2026-12-05, which kept one
    // for a replica that succeeded while it was being moved): dropped.
    if (it == s.jobs.end()) {
      batch.Delete(std::string(k));
      return true;
    }
    // A replica above a lowered max (stopping since the change) keeps its record.
    if (replica >= it->second.tasks.size()) it->second.tasks.resize(replica + 1);
    Impl::TaskRec& t = it->second.tasks[replica];
    t.node = j.value("node", "");
    t.gpus = j.value("gpus", std::vector<int>{});
    t.standby = j.value("standby", false);
    t.lent = j.value("lent", false);
    t.borrowed = j.value("borrowed", false);
    t.mig_node = j.value("mig_node", "");
    t.mig_gpus = j.value("mig_gpus", std::vector<int>{});
    t.retiring = j.value("retiring", "");
    t.instance = j.value("instance", uint64_t{0});
    t.mig_instance = j.value("mig_instance", uint64_t{0});
    t.retiring_instance = j.value("retiring_instance", uint64_t{0});
    t.moved_in = j.value("moved_in", false);
    const std::string state = j.value("state", "");
    t.state = state == "starting" ? Impl::TaskState::kStarting
              : state == "running" ? Impl::TaskState::kRunning
              : state == "done"    ? Impl::TaskState::kDone
                                   : Impl::TaskState::kStopping;
    return true;
  }));
  ESTUARY_RETURN_IF_ERROR(bad);
  ESTUARY_RETURN_IF_ERROR(store->Scan("cancel/", [&](std::string_view k, std::string_view) {
    const uint64_t id = std::stoull(std::string(k.substr(7)));
    const auto it = s.jobs.find(id);
    if (it != s.jobs.end() && !Ended(it->second.view.phase)) {
      it->second.view.phase = JobPhase::kCancelled;
      it->second.view.ended_ms = now_ms;
      it->second.view.reason = "cancelled";
      batch.Put(JobKey(id), Impl::JobJson(it->second));
    }
    batch.Delete(std::string(k));
    return true;
  }));

  // Ended jobs, in the order they ended (their retention runs from then).
  for (const auto& [id, j] : s.jobs) {
    if (Ended(j.view.phase)) s.ended.emplace_back(j.view.ended_ms, id);
  }
  std::sort(s.ended.begin(), s.ended.end());

  // Standby windows.
  ESTUARY_RETURN_IF_ERROR(store->Scan("standby/", [&](std::string_view k, std::string_view v) {
    const Json j = Json::parse(v, nullptr, false);
    if (j.is_discarded()) {
      bad = Internal("store: " + std::string(k) + ": not JSON");
      return false;
    }
    StandbyWindowView w;
    w.id = std::stoull(std::string(k.substr(8)));
    w.job = j.value("job", uint64_t{0});
    w.tenant = j.value("tenant", "");
    w.from_ms = j.value("from_ms", int64_t{0});
    w.to_ms = j.value("to_ms", int64_t{0});
    w.replicas = j.value("replicas", 0);
    s.next_window = std::max(s.next_window, w.id + 1);
    s.standby_jobs.insert(w.job);
    s.windows.emplace(w.id, w);
    return true;
  }));
  ESTUARY_RETURN_IF_ERROR(bad);
  return Status::Ok();
}

Status Service::Impl::RecoverCarry(StoreBatch& batch) {
  Impl& s = *this;
  Status bad = Status::Ok();
  ESTUARY_RETURN_IF_ERROR(store->Scan("carry/", [&](std::string_view k, std::string_view v) {
    const Json j = Json::parse(v, nullptr, false);
    const uint64_t id = std::strtoull(std::string(k.substr(6)).c_str(), nullptr, 10);
    if (!j.is_object()) {
      bad = Internal("store: " + std::string(k) + ": not a carry record");
      return false;
    }
    if (!s.jobs.count(id)) {  // its job was retired
      batch.Delete(std::string(k));
      return true;
    }
    // Nodes by name (one gone since is skipped).
    auto c = CarriedJobFromJson(j, [&](const Json& n) -> std::optional<NodeId> {
      if (!n.is_string()) return std::nullopt;
      const auto it = s.nodes.find(n.get<std::string>());
      return it != s.nodes.end() ? it->second.id : NodeId();
    });
    if (!c.ok()) {
      bad = Internal("store: " + std::string(k) + ": " + c.status().message());
      return false;
    }
    c->job = static_cast<uint32_t>(id);
    s.carried[id] = *std::move(c);
    return true;
  }));
  ESTUARY_RETURN_IF_ERROR(bad);
  // A meta/ record of JSON object `what` read by `read` (a Json exception: not one) and kept as
  // stored in *stored; absent: nothing.
  const auto meta = [&](const char* key, const char* what, std::string* stored,
                        const std::function<void(const Json&)>& read) -> Status {
    auto v = store->Get(key);
    if (!v.ok()) return v.status();
    if (!*v) return Status::Ok();
    const Json j = Json::parse(**v, nullptr, false);
    try {
      if (!j.is_object()) throw Json::other_error::create(501, "not an object", nullptr);
      read(j);
    } catch (const Json::exception& e) {
      return Internal("store: " + std::string(key) + ": not a " + what + " record (" + std::string(e.what()) + ")");
    }
    *stored = **v;
    return Status::Ok();
  };
  ESTUARY_RETURN_IF_ERROR(meta("meta/queue_carry", "carry", &s.queue_carry_stored, [&](const Json& j) {
    s.carried_queues.usage_at = j.value("usage_at", int64_t{-1});
    for (const Json& e : j.value("queues", Json::array())) {
      s.carried_queues.queues.push_back({e.at("name").get<std::string>(), e.value("cooldown_until", int64_t{0}),
                                         e.value("decayed", 0.0), e.value("usage", int64_t{-1})});
    }
  }));
  ESTUARY_RETURN_IF_ERROR(meta("meta/schedule", "schedule", &s.schedule_stored, [&](const Json& j) {
    s.carried_queues.schedule = CarriedSchedule{j.at("next_defrag").get<int64_t>(), j.at("last_plan").get<int64_t>(),
                                                j.at("next_replan").get<int64_t>(), j.at("next_backfill").get<int64_t>(),
                                                j.value("walltime_starts", int64_t{0})};
  }));
  return Status::Ok();
}

Status Service::Impl::Readmit(int64_t now_ms, StoreBatch& batch, std::vector<std::pair<std::string, Order>>& out) {
  Impl& s = *this;
  const int64_t now_s = now_ms / 1000;
  // When a running job's current run started, as the engine before knew it (its victims' cost
  // counts from then); else its first run's start (a store written before carry records).
  const auto StartedAt = [&](uint64_t id, const JobRec& j, int64_t now_s) {
    const auto c = s.carried.find(id);
    if (c != s.carried.end() && c->second.started_s >= 0) return c->second.started_s;
    return j.view.running_ms >= 0 ? j.view.running_ms / 1000 : now_s;
  };
  // Re-admit: running jobs first (their placements as stored; those running on lent GPUs after
  // the lenders), then the waiting ones. A migration under way is rolled back (its new instance
  // stops; the old one runs on); an old instance not yet reported stopped is told again.
  std::vector<uint64_t> waiting;
  std::vector<uint64_t> order;
  // First every job not ended known in service id order: the order the engine before knew them
  // in (by submission; a rebuild keeps its order, CompactEngine), so that ties among jobs, which
  // follow their ids, fall as they would have (Engine::Know).
  for (const auto& [id, j] : s.jobs) {
    if (!Ended(j.view.phase)) (void)s.engine->Know(Impl::ToFed(id, j.view.request), now_s);
  }
  for (int borrowers = 0; borrowers < 2; ++borrowers) {
    for (const auto& [id, j] : s.jobs) {
      const bool b = std::any_of(j.tasks.begin(), j.tasks.end(), [](const Impl::TaskRec& t) { return t.borrowed; });
      if (b == (borrowers == 1)) order.push_back(id);
    }
  }
  for (uint64_t id : order) {
    Impl::JobRec& j = s.jobs.at(id);
    for (size_t i = 0; i < j.tasks.size(); ++i) {
      Impl::TaskRec& t = j.tasks[i];
      if (!t.mig_node.empty()) {
        s.AddOrderAt(out, Order::Op::kStop, id, i, t.mig_node, t.mig_gpus, t.mig_instance);
        t.mig_node.clear();
        t.mig_gpus.clear();
        t.mig_instance = 0;
        batch.Put(TaskKey(id, i), Impl::TaskJson(t));
      }
      if (!t.retiring.empty()) s.AddOrderAt(out, Order::Op::kStop, id, i, t.retiring, {}, t.retiring_instance);
    }
    std::vector<Engine::Placement> placements;
    bool complete = true;
    for (size_t i = 0; i < j.tasks.size(); ++i) {
      const Impl::TaskRec& t = j.tasks[i];
      if (t.state != Impl::TaskState::kStarting && t.state != Impl::TaskState::kRunning && t.state != Impl::TaskState::kDone) {
        continue;
      }
      const auto n = s.nodes.find(t.node);
      if (n == s.nodes.end() || !n->second.id.valid() || t.gpus.size() > kMaxGpusPerNode) {
        complete = false;
        continue;
      }
      Engine::Placement p;
      p.replica = i;
      p.node = n->second.id;
      for (int x : t.gpus) p.gpus.Push(x);
      p.standby = t.standby && t.lent;  // one still entering is asked again
      p.borrowed = t.borrowed;
      placements.push_back(p);
    }
    const bool adopt = !Ended(j.view.phase) && !placements.empty() && complete &&
                       static_cast<int32_t>(placements.size()) >= j.view.request.min_replicas &&
                       s.engine->Adopt(Impl::ToFed(id, j.view.request), placements, StartedAt(id, j, now_s));
    if (adopt) {
      j.in_engine = true;
      j.view.bound_replicas = static_cast<int32_t>(placements.size());
      const JobId ej = *s.engine->JobOf(static_cast<uint32_t>(id));
      for (size_t i = 0; i < j.tasks.size(); ++i) {
        Impl::TaskRec& t = j.tasks[i];
        // Standby is the engine's to say (Adopt enters it again when it still can).
        if (t.standby && !s.engine->state().task(s.engine->state().job(ej).tasks[i]).standby) {
          t.standby = t.lent = false;
          s.AddOrder(out, Order::Op::kResume, id, i, t);
          batch.Put(TaskKey(id, i), Impl::TaskJson(t));
        }
        j.view.standby_replicas += t.standby && t.state != Impl::TaskState::kStopping;
        if (j.tasks[i].state == Impl::TaskState::kRunning) ++j.view.running_replicas;
        if (j.tasks[i].state == Impl::TaskState::kStarting) s.AddOrder(out, Order::Op::kStart, id, i, j.tasks[i]);
        if (j.tasks[i].state == Impl::TaskState::kStopping) s.AddOrder(out, Order::Op::kStop, id, i, j.tasks[i]);
      }
      continue;
    }
    // Not adopted: whatever agents were told is stopped; a done replica runs again with its
    // job (as when the engine lets a job go: Reconcile).
    for (size_t i = 0; i < j.tasks.size(); ++i) {
      Impl::TaskRec& t = j.tasks[i];
      if (t.state == Impl::TaskState::kNone) continue;
      if (t.state == Impl::TaskState::kDone) {
        t.state = Impl::TaskState::kNone;
        batch.Delete(TaskKey(id, i));
        continue;
      }
      s.AddOrder(out, Order::Op::kStop, id, i, t);
      if (t.state != Impl::TaskState::kStopping) {
        t.state = Impl::TaskState::kStopping;
        batch.Put(TaskKey(id, i), Impl::TaskJson(t));
      }
    }
    if (!Ended(j.view.phase)) {
      if (j.view.phase == JobPhase::kRunning) {
        j.view.phase = JobPhase::kPending;
        batch.Put(JobKey(id), Impl::JobJson(j));
      }
      waiting.push_back(id);
    }
  }
  for (auto& [name, n] : s.nodes) {
    if (n.view.state == "cordoned") s.engine->SetCordoned(n.id, true);
    if (n.view.state == "drained") s.engine->DrainNode(n.id, now_s);
    if (n.view.state == "evacuating") {  // it goes on (its moves under way were rolled back)
      s.engine->Evacuate(n.id, now_s);
      s.evacuating.insert(name);
    }
  }
  return ReadmitWaiting(std::move(waiting), now_ms, batch);
}

Status Service::Impl::ReadmitWaiting(std::vector<uint64_t> waiting, int64_t now_ms, StoreBatch& batch) {
  Impl& s = *this;
  const int64_t now_s = now_ms / 1000;
  // Reservations: held again for jobs still waiting (ReserveAction chooses anew, once the queue is
  // rebuilt, before any cycle could start a job on the nodes one held); dropped for the others —
  // none outlives its purpose across a restart.
  std::map<uint64_t, int64_t> resv;
  ESTUARY_RETURN_IF_ERROR(store->Scan("resv/", [&](std::string_view k, std::string_view v) {
    const Json j = Json::parse(v, nullptr, false);
    resv[std::stoull(std::string(k.substr(5)))] = j.is_discarded() ? 0 : j.value("expires_ms", int64_t{0});
    return true;
  }));
  // The waiting jobs queued again in the order they waited in (their carried positions; those the
  // engine did not queue, after them in service id order). Queueing holds nothing.
  const auto position = [&](uint64_t id) {
    const auto c = s.carried.find(id);
    return c != s.carried.end() && c->second.queued_at >= 0 ? std::make_pair(0, c->second.position)
                                                             : std::make_pair(1, int64_t{0});
  };
  std::stable_sort(waiting.begin(), waiting.end(), [&](uint64_t a, uint64_t b) { return position(a) < position(b); });
  for (uint64_t id : waiting) {
    if (!s.jobs.at(id).in_engine && !s.jobs.at(id).parked) s.Admit(s.jobs.at(id), now_s);
  }
  for (const auto& [id, expires] : resv) {
    const auto it = s.jobs.find(id);
    if (it != s.jobs.end() && it->second.in_engine && expires > now_ms &&
        std::find(waiting.begin(), waiting.end(), id) != waiting.end()) {
      auto r = s.HoldNodes(id, now_ms, expires);
      if (r.ok()) {
        s.reservations[id] = *r;
        batch.Put(Impl::ResvKey(id), Impl::ResvJson(*r));
        continue;
      }
    }
    batch.Delete(Impl::ResvKey(id));
  }
  // The engine goes on from what the one before knew of the jobs and queues (their waits, hints,
  // no-borrow and no-grow periods, cooldowns, decayed usage).
  EngineCarry carry = std::move(s.carried_queues);
  for (auto& [id, c] : s.carried) {
    const auto it = s.jobs.find(id);
    if (it != s.jobs.end() && it->second.in_engine) carry.jobs.push_back(std::move(c));
  }
  s.carried.clear();
  if (!carry.jobs.empty() || !carry.queues.empty() || carry.usage_at >= 0 || carry.schedule) {
    s.engine->RestoreCarried(carry, now_s);
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Service>> Service::Open(Store* store, const Clock* clock, ServiceOptions options) {
  auto impl = std::make_unique<Impl>();
  Impl& s = *impl;
  s.store = store;
  s.clock = clock;
  s.opt = options;
  s.committer = std::make_unique<GroupCommitter>(store, options.store_max_ops);
  if (!options.logs_dir.empty()) s.logs = std::make_unique<LogStore>(options.logs_dir, options.logs_max_bytes);
  EngineConfig mo = options.engine.value_or(EngineConfig{});
  mo.name = "service";
  mo.policy = options.policy;
  mo.seed = options.seed;
  mo.grace_s = options.grace_s;
  // One grace period for Reclaim and Standby restores, unless a configuration gave Standby its own.
  if (!options.standby_grace_own) mo.standby_grace_s = options.grace_s;
  mo.requeue = true;                     // an evicted job waits again at the front of the queue
  mo.lend_max_priority = options.lend_max_priority;
  mo.absorb = options.absorb;
  mo.migration.acknowledged = true;  // a move completes when its agent reports the new instance running
  mo.intern_queue_models = true;     // quotas may name models before their nodes register
  ClusterState empty;
  auto engine = Engine::Create(std::move(empty), mo);
  if (!engine.ok()) return engine.status();
  s.engine = std::move(*engine);
  {
    auto next = store->Get("meta/hist_next");
    if (!next.ok()) return next.status();
    s.history_next = *next ? std::strtoull((*next)->c_str(), nullptr, 10) : 0;
  }
  s.history.push_back({HistorySegment{mo}});  // a new segment: this engine's
  s.Attach(*s.engine);
  for (const auto& [plane, levels] : options.planes) ESTUARY_RETURN_IF_ERROR(s.engine->AddPlane(plane, levels));
  // The epoch counts the service's openings on this store: agents see it change on a restart.
  {
    auto e = store->Get("meta/epoch");
    if (!e.ok()) return e.status();
    s.epoch = (*e ? std::strtoull((*e)->c_str(), nullptr, 10) : 0) + 1;
    StoreBatch b;
    b.Put("meta/epoch", std::to_string(s.epoch));
    ESTUARY_RETURN_IF_ERROR(store->Apply(b));
  }
  const int64_t now_ms = clock->NowMs();

  // The stored configuration (an admin's changes) wins over the options.
  {
    auto c = store->Get("meta/config");
    if (!c.ok()) return c.status();
    if (*c) {
      const Json j = Json::parse(**c, nullptr, false);
      if (!j.is_discarded()) {
        s.engine->SetGrace(j.value("grace_s", options.grace_s));
        if (!options.standby_grace_own) s.engine->SetStandbyGrace(s.engine->options().grace_s);
        s.engine->SetAbsorb(j.value("absorb", options.absorb));
        s.opt.heartbeat_timeout_ms = j.value("heartbeat_timeout_s", options.heartbeat_timeout_ms / 1000) * 1000;
        s.defrag_interval_s = j.value("defrag_interval_s", int64_t{0});
      }
    }
  }
  // The stored queues (an admin's PUT /v1/queues) win over the configuration's.
  {
    auto q = store->Get("meta/queues");
    if (!q.ok()) return q.status();
    if (*q) {
      const Json j = Json::parse(**q, nullptr, false);
      auto queues = DecodeQueues(j.is_object() ? j.value("queues", Json()) : Json());
      auto sharing = DecodeSharing(j.is_object() ? j.value("sharing", Json::object()) : Json());
      if (!queues.ok()) return Internal("store: meta/queues: " + queues.status().message());
      if (!sharing.ok()) return Internal("store: meta/queues: " + sharing.status().message());
      ESTUARY_RETURN_IF_ERROR(s.engine->SetQueues(std::move(*queues), *sharing));
    }
  }
  ESTUARY_RETURN_IF_ERROR(s.RecoverNodes(now_ms));
  StoreBatch batch;
  ESTUARY_RETURN_IF_ERROR(s.RecoverJobs(now_ms, batch));
  ESTUARY_RETURN_IF_ERROR(s.RecoverCarry(batch));
  std::vector<std::pair<std::string, Order>> out;
  ESTUARY_RETURN_IF_ERROR(s.Readmit(now_ms, batch, out));
  s.StoreHistory(batch);
  if (!batch.empty()) ESTUARY_RETURN_IF_ERROR(s.committer->Commit(std::move(batch)));
  for (auto& [agent, o] : out) {
    Impl::AgentRec& a = s.agents[agent];
    o.seq = a.next_seq++;
    a.orders.push_back(std::move(o));
  }
  std::unique_ptr<Service> service(new Service(std::move(impl)));
  // What was rebuilt must hold together (Adopt refuses any double binding; this checks the rest).
  if (Status st = service->CheckInvariants(); !st.ok()) return Internal("store: the recovered state is inconsistent: " + st.message());
  return service;
}

StatusOr<uint64_t> Service::Submit(const Principal& who, JobRequest request) {
  Impl& s = *impl_;
  if (who.role == Role::kAgent) return PermissionDenied("agents do not submit jobs");
  Impl::JobRec r;
  {
    std::lock_guard lk(s.mu);
    if (s.stopping) return Unavailable("the service is stopping");
    ESTUARY_RETURN_IF_ERROR(s.CheckQueue(who, request));
    r.view.id = s.next_id++;
  }
  r.view.tenant = who.name;
  r.view.request = std::move(request);
  r.view.submitted_ms = s.clock->NowMs();
  r.view.reason = "waiting for the scheduler";
  r.tasks.resize(static_cast<size_t>(r.view.request.max_replicas));
  StoreBatch b;
  b.Put(JobKey(r.view.id), Impl::JobJson(r));
  ESTUARY_RETURN_IF_ERROR(s.committer->Commit(std::move(b)));
  const uint64_t id = r.view.id;
  {
    std::lock_guard lk(s.mu);
    s.jobs.emplace(id, std::move(r));
    s.inputs.push_back(Impl::Input::Of(Impl::Input::Kind::kSubmit, id));
    ++s.submitted_total;
  }
  s.input_cv.notify_one();
  return id;
}

StatusOr<JobView> Service::GetJob(const Principal& who, uint64_t id) const {
  const Impl& s = *impl_;
  std::lock_guard lk(s.mu);
  const auto it = s.jobs.find(id);
  if (it == s.jobs.end() || !s.Visible(who, it->second)) return NotFound("no job " + std::to_string(id));
  JobView v = it->second.view;
  for (size_t i = 0; i < it->second.tasks.size(); ++i) {
    const Impl::TaskRec& t = it->second.tasks[i];
    static constexpr const char* kStates[] = {"", "starting", "running", "stopping", "done"};
    if (t.state == Impl::TaskState::kNone) continue;
    v.where.push_back({static_cast<int32_t>(i), t.node, t.gpus, kStates[static_cast<int>(t.state)]});
  }
  return v;
}

std::vector<JobView> Service::ListJobs(const Principal& who) const {
  const Impl& s = *impl_;
  std::lock_guard lk(s.mu);
  std::vector<JobView> v;
  for (const auto& [id, j] : s.jobs) {
    if (s.Visible(who, j)) v.push_back(j.view);
  }
  return v;
}

StatusOr<JobView> Service::Cancel(const Principal& who, uint64_t id) {
  Impl& s = *impl_;
  {
    std::lock_guard lk(s.mu);
    const auto it = s.jobs.find(id);
    if (it == s.jobs.end() || !s.Visible(who, it->second)) return NotFound("no job " + std::to_string(id));
    if (Ended(it->second.view.phase)) return it->second.view;
  }
  StoreBatch b;
  b.Put(CancelKey(id), "{}");
  ESTUARY_RETURN_IF_ERROR(s.committer->Commit(std::move(b)));
  JobView v;
  {
    std::lock_guard lk(s.mu);
    s.inputs.push_back(Impl::Input::Of(Impl::Input::Kind::kCancel, id));
    const auto it = s.jobs.find(id);
    if (it != s.jobs.end()) v = it->second.view;
  }
  s.input_cv.notify_one();
  if (!Ended(v.phase)) {
    v.phase = JobPhase::kCancelled;  // durable: the loop will stop its tasks
    v.reason = "cancelled";
  }
  return v;
}

Status Service::RegisterNodes(const Principal& agent, std::vector<NodeRegistration> nodes) {
  Impl& s = *impl_;
  if (agent.role != Role::kAgent) return PermissionDenied("only agents register nodes");
  StoreBatch b;
  std::vector<NodeRegistration> fresh;
  {
    std::lock_guard lk(s.mu);
    std::set<std::string> seen;
    for (const NodeRegistration& n : nodes) {
      if (!seen.insert(n.name).second) return InvalidArgument("node '" + n.name + "' listed twice");
      const auto it = s.nodes.find(n.name);
      if (it != s.nodes.end()) {
        if (it->second.view.agent != agent.name) {
          return PermissionDenied("node '" + n.name + "' belongs to another agent");
        }
        continue;  // re-registration: the stored node stands
      }
      // The checks AddNode would make, before anything is stored.
      if (n.gpus < 0 || n.gpus > kMaxGpusPerNode) return InvalidArgument("node '" + n.name + "': field 'gpus': out of range");
      for (const auto& [plane, names] : n.domains) {
        const auto p = s.engine->state().topology().FindPlane(plane);
        if (!p) return InvalidArgument("node '" + n.name + "': field 'domains': unknown plane '" + plane + "'");
        if (s.engine->state().topology().planes()[p->value()].levels.size() != names.size()) {
          return InvalidArgument("node '" + n.name + "': field 'domains." + plane + "': expected " +
                                 std::to_string(s.engine->state().topology().planes()[p->value()].levels.size()) +
                                 " names");
        }
      }
      fresh.push_back(n);
    }
    for (const NodeRegistration& n : fresh) {
      Impl::NodeRec r;
      r.view.name = n.name;
      r.view.agent = agent.name;
      r.view.gpus = n.gpus;
      r.view.gpu_model = n.gpu_model;
      r.view.cpu_milli = n.cpu_milli;
      r.view.memory_mib = n.memory_mib;
      r.view.domains = n.domains;
      r.view.address = n.address;
      r.view.state = "registering";
      r.view.last_heartbeat_ms = s.clock->NowMs();
      Json j;
      j["agent"] = agent.name;
      j["gpus"] = n.gpus;
      j["gpu_model"] = n.gpu_model;
      j["cpu_milli"] = n.cpu_milli;
      j["memory_mib"] = n.memory_mib;
      j["domains"] = DomainsJson(n.domains);
      if (!n.address.empty()) j["address"] = n.address;
      b.Put("node/" + n.name, j.dump());
      s.nodes.emplace(n.name, std::move(r));  // reserves the name
    }
    s.agents[agent.name];
  }
  if (fresh.empty()) return Status::Ok();
  const Status st = s.committer->Commit(std::move(b));
  {
    std::lock_guard lk(s.mu);
    if (!st.ok()) {
      for (const NodeRegistration& n : fresh) s.nodes.erase(n.name);
      return st;
    }
    Status add = Status::Ok();
    for (const NodeRegistration& n : fresh) {
      Impl::NodeRec& r = s.nodes.at(n.name);
      if (const Status st = s.AddToEngine(r); !st.ok()) {
        r.view.state = "failed";
        if (add.ok()) add = InvalidArgument(st.message());
        continue;
      }
      r.view.state = "ready";
    }
    s.inputs.push_back(Impl::Input::Of(Impl::Input::Kind::kNodesAdded));
    if (!add.ok()) return add;
  }
  s.input_cv.notify_one();
  return Status::Ok();
}

Status Service::Heartbeat(const Principal& agent, const std::vector<std::string>& nodes) {
  Impl& s = *impl_;
  if (agent.role != Role::kAgent) return PermissionDenied("only agents send heartbeats");
  std::lock_guard lk(s.mu);
  const int64_t now = s.clock->NowMs();
  if (nodes.empty()) {
    for (auto& [name, n] : s.nodes) {
      if (n.view.agent == agent.name) n.view.last_heartbeat_ms = now;
    }
    return Status::Ok();
  }
  for (const std::string& name : nodes) {
    const auto it = s.nodes.find(name);
    if (it == s.nodes.end()) return NotFound("no node '" + name + "'");
    if (it->second.view.agent != agent.name) return PermissionDenied("node '" + name + "' belongs to another agent");
  }
  for (const std::string& name : nodes) s.nodes.at(name).view.last_heartbeat_ms = now;
  return Status::Ok();
}

namespace {
Status AwaitLoop(const std::shared_ptr<void>& keep, std::future<Status>& f);
}  // namespace

std::optional<int64_t> Service::EngineNextDue() const {
  std::lock_guard lk(impl_->mu);
  return impl_->engine->NextDue();
}

Status Service::Report(const Principal& agent, std::vector<TaskReport> reports, bool durable) {
  Impl& s = *impl_;
  if (agent.role != Role::kAgent) return PermissionDenied("only agents report tasks");
  auto w = durable ? std::make_shared<Impl::Waiter>() : nullptr;
  std::future<Status> f;
  if (w) f = w->done.get_future();
  {
    std::lock_guard lk(s.mu);
    std::vector<TaskReport> current;
    for (TaskReport& r : reports) {
      uint64_t job = 0;
      size_t replica = 0;
      if (!ParseTaskName(r.task, &job, &replica)) return InvalidArgument("field 'task': '" + r.task + "' is not a task name");
      const auto it = s.jobs.find(job);
      // A report of a task that runs nowhere any more (a repeat, or one overtaken by a stop) is
      // stale: skipped, not an error, so that it never holds up the reports beside it.
      if (it == s.jobs.end() || replica >= it->second.tasks.size()) continue;
      const Impl::TaskRec& t = it->second.tasks[replica];
      if (t.state == Impl::TaskState::kNone || t.state == Impl::TaskState::kDone) continue;
      // The instance reported: the replica's, its migration's new one, or its retiring old one.
      const std::string& at = r.node.empty() ? t.node : r.node;
      if (at != t.node && at != t.mig_node && at != t.retiring) continue;
      const auto n = s.nodes.find(at);
      if (n != s.nodes.end() && n->second.view.agent != agent.name) {
        return PermissionDenied("task '" + r.task + "' runs on node '" + at + "' of another agent");
      }
      current.push_back(std::move(r));
    }
    if (current.empty()) return Status::Ok();
    Impl::Input in = Impl::Input::Of(Impl::Input::Kind::kReport);
    in.reports = std::move(current);
    in.waiter = w;
    s.inputs.push_back(std::move(in));
  }
  s.input_cv.notify_one();
  return w ? AwaitLoop(w, f) : Status::Ok();
}

Status Service::AppendLog(const Principal& agent, const std::string& task, const std::string& node, int64_t run,
                          int64_t offset, std::string_view data) {
  Impl& s = *impl_;
  if (agent.role != Role::kAgent) return PermissionDenied("only agents send logs");
  uint64_t job = 0;
  size_t replica = 0;
  if (!ParseTaskName(task, &job, &replica)) return InvalidArgument("field 'task': '" + task + "' is not a task name");
  {
    std::lock_guard lk(s.mu);
    const auto n = s.nodes.find(node);
    if (n == s.nodes.end()) return NotFound("no node '" + node + "'");
    if (n->second.view.agent != agent.name) return PermissionDenied("node '" + node + "' belongs to another agent");
    const auto j = s.jobs.find(job);
    if (j == s.jobs.end() || replica >= j->second.tasks.size()) return NotFound("no task '" + task + "'");
  }
  if (!s.logs) return NotFound("this service keeps no logs");
  return s.logs->Append(job, static_cast<int32_t>(replica), node, run, offset, data);
}

StatusOr<Service::LogRead> Service::ReadLog(const Principal& who, uint64_t id, int32_t replica, int64_t from,
                                            int64_t max) const {
  const Impl& s = *impl_;
  LogRead r;
  {
    std::lock_guard lk(s.mu);
    const auto it = s.jobs.find(id);
    if (it == s.jobs.end() || !s.Visible(who, it->second)) return NotFound("no job " + std::to_string(id));
    if (replica < 0 || static_cast<size_t>(replica) >= it->second.tasks.size()) {
      return InvalidArgument("replica " + std::to_string(replica) + ": job " + std::to_string(id) + " has replicas 0.." +
                             std::to_string(it->second.tasks.size() - 1));
    }
    r.ended = Ended(it->second.view.phase);
  }
  if (!s.logs) return NotFound("this service keeps no logs");
  LogStore::Chunk c = s.logs->Read(id, replica, from, max);
  r.data = std::move(c.data);
  r.next = c.next;
  return r;
}

OrderBatch Service::WaitOrders(const Principal& agent, uint64_t epoch, uint64_t after, int64_t wait_ms) {
  Impl& s = *impl_;
  OrderBatch b;
  std::unique_lock lk(s.mu);
  b.epoch = s.epoch;
  if (epoch != s.epoch) after = 0;
  Impl::AgentRec& a = s.agents[agent.name];
  while (!a.orders.empty() && a.orders.front().seq <= after) a.orders.pop_front();
  if (a.orders.empty() && wait_ms > 0) {
    s.orders_cv.wait_for(lk, std::chrono::milliseconds(wait_ms), [&] { return !a.orders.empty() || s.stopping; });
  }
  for (const Order& o : a.orders) {
    if (b.orders.size() >= s.opt.max_orders_per_poll) break;
    b.orders.push_back(o);
  }
  b.last_seq = b.orders.empty() ? after : b.orders.back().seq;
  return b;
}

std::vector<NodeView> Service::ListNodes() const {
  const Impl& s = *impl_;
  std::lock_guard lk(s.mu);
  std::vector<NodeView> v;
  const ClusterState& st = s.engine->state();
  for (const auto& [name, n] : s.nodes) {
    NodeView nv = n.view;
    if (n.id.valid()) {
      const Node& node = st.node(n.id);
      nv.gpu_milli_used = int64_t{node.spec.gpu_count} * kMilliPerGpu - node.gpu_free_total;
    }
    v.push_back(std::move(nv));
  }
  return v;
}

namespace {
// Waits for the loop to answer `w`.
Status AwaitLoop(const std::shared_ptr<void>& keep, std::future<Status>& f) {
  (void)keep;
  if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    return Unavailable("the scheduler loop did not apply the request within 10 s");
  }
  return f.get();
}
}  // namespace

Status Service::Impl::Ask(std::unique_lock<std::mutex>& lk, Input in, const std::shared_ptr<Waiter>& w) {
  std::future<Status> f = w->done.get_future();
  in.waiter = w;
  inputs.push_back(std::move(in));
  lk.unlock();
  input_cv.notify_one();
  return AwaitLoop(w, f);
}

Status Service::NodeAction(const Principal& admin, const std::string& node, const std::string& action, bool wait) {
  Impl& s = *impl_;
  if (admin.role != Role::kAdmin) return PermissionDenied("only admins act on nodes");
  static const std::set<std::string> kActions = {"cordon", "uncordon", "drain", "evacuate", "fail", "restore"};
  if (!kActions.count(action)) {
    return InvalidArgument("action '" + action.substr(0, 32) +
                           "' is not one of cordon, uncordon, drain, evacuate, fail, restore");
  }
  std::unique_lock lk(s.mu);
  const auto it = s.nodes.find(node);
  if (it == s.nodes.end() || !it->second.id.valid()) return NotFound("no node '" + node + "'");
  Impl::Input in = Impl::Input::Of(Impl::Input::Kind::kNodeAction);
  in.node = node;
  in.action = action;
  if (wait) return s.Ask(lk, std::move(in), std::make_shared<Impl::Waiter>());
  s.inputs.push_back(std::move(in));
  lk.unlock();
  s.input_cv.notify_one();
  return Status::Ok();
}

Service::Config Service::GetConfig() const {
  const Impl& s = *impl_;
  std::lock_guard lk(s.mu);
  Config c;
  c.policy = s.opt.policy;
  c.grace_s = s.engine->options().grace_s;
  c.absorb = s.engine->options().absorb;
  c.heartbeat_timeout_s = s.opt.heartbeat_timeout_ms / 1000;
  c.defrag_interval_s = s.defrag_interval_s;
  c.engine = s.engine->options();
  return c;
}

StatusOr<Service::Config> Service::SetConfig(const Principal& admin, const ConfigChange& change) {
  Impl& s = *impl_;
  if (admin.role != Role::kAdmin) return PermissionDenied("only admins change the configuration");
  for (const auto& [name, v, lo, hi] : {std::tuple{"grace_s", change.grace_s, 0, 86400},
                                        std::tuple{"heartbeat_timeout_s", change.heartbeat_timeout_s, 1, 86400},
                                        std::tuple{"defrag_interval_s", change.defrag_interval_s, 0, 604800}}) {
    if (v && (*v < lo || *v > hi)) {
      return InvalidArgument(std::string("field '") + name + "': " + std::to_string(*v) + " is outside [" +
                             std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
  }
  std::unique_lock lk(s.mu);
  Impl::Input in = Impl::Input::Of(Impl::Input::Kind::kConfig);
  in.config = change;
  ESTUARY_RETURN_IF_ERROR(s.Ask(lk, std::move(in), std::make_shared<Impl::Waiter>()));
  return GetConfig();
}

StatusOr<Service::QueuesView> Service::GetQueues(const Principal& who) const {
  if (who.role == Role::kAgent) return PermissionDenied("agents do not read queues");
  const Impl& s = *impl_;
  std::lock_guard lk(s.mu);
  return s.QueuesFor(who);
}

StatusOr<Service::QueuesView> Service::SetQueues(const Principal& admin, std::vector<QueueSpec> queues,
                                                 std::optional<SharingSpec> sharing) {
  Impl& s = *impl_;
  if (admin.role != Role::kAdmin) return PermissionDenied("only admins change the queues");
  std::unique_lock lk(s.mu);
  Impl::Input in = Impl::Input::Of(Impl::Input::Kind::kQueues);
  in.queues = std::move(queues);
  in.sharing = sharing.value_or(s.engine->options().sharing);
  ESTUARY_RETURN_IF_ERROR(s.Ask(lk, std::move(in), std::make_shared<Impl::Waiter>()));
  return s.QueuesFor(admin);
}

StatusOr<JobView> Service::Resize(const Principal& who, uint64_t id, std::optional<int32_t> min_replicas,
                                  std::optional<int32_t> max_replicas, bool wait) {
  Impl& s = *impl_;
  std::unique_lock lk(s.mu);
  const auto it = s.jobs.find(id);
  if (it == s.jobs.end() || !s.Visible(who, it->second)) return NotFound("no job " + std::to_string(id));
  const int32_t lo = min_replicas.value_or(it->second.view.request.min_replicas);
  const int32_t hi = max_replicas.value_or(it->second.view.request.max_replicas);
  if (lo < 1 || lo > hi || hi > 100000) {
    return InvalidArgument("field 'replicas': need 1 <= min <= max <= 100000, got min " + std::to_string(lo) +
                           ", max " + std::to_string(hi));
  }
  if (Ended(it->second.view.phase)) return InvalidArgument("job " + std::to_string(id) + " has ended");
  Impl::Input in = Impl::Input::Of(Impl::Input::Kind::kResize, id);
  in.min_replicas = lo;
  in.max_replicas = hi;
  if (!wait) {
    const JobView v = it->second.view;
    s.inputs.push_back(std::move(in));
    lk.unlock();
    s.input_cv.notify_one();
    return v;
  }
  ESTUARY_RETURN_IF_ERROR(s.Ask(lk, std::move(in), std::make_shared<Impl::Waiter>()));
  return GetJob(who, id);
}

StatusOr<Service::Explanation> Service::Explain(const Principal& who, uint64_t id) const {
  const Impl& s = *impl_;
  std::lock_guard lk(s.mu);
  const auto it = s.jobs.find(id);
  if (it == s.jobs.end() || !s.Visible(who, it->second)) return NotFound("no job " + std::to_string(id));
  const Impl::JobRec& j = it->second;
  Explanation e;
  e.phase = j.view.phase;
  e.reason = j.view.reason;
  e.may_reclaim = j.view.request.priority >= s.engine->options().preemptor_min_priority;
  if (j.view.phase != JobPhase::kPending) return e;
  const Engine::Explanation x = s.engine->Explain(static_cast<uint32_t>(id), s.clock->Now());
  if (!x.known) {
    e.shortfall = j.view.reason.empty() ? "not yet seen by the scheduler" : j.view.reason;
    return e;
  }
  e.fits_now = x.fits_idle;
  e.reclaim_feasible = x.reclaim_feasible;
  e.victims = x.victims;
  e.victims_max_priority = x.victims_max_priority;
  e.shortfall = x.reason;
  e.quota = x.quota;
  e.owed = x.owed;
  e.may_reclaim = e.may_reclaim || x.owed;
  e.reclaim_from = x.reclaim_from;
  e.topology = x.topology;
  e.planned = x.planned;
  for (NodeId n : s.engine->HeldNodes(static_cast<uint32_t>(id))) e.held_nodes.push_back(s.node_names[n.value()]);
  return e;
}

StatusOr<Service::ReservationView> Service::Reserve(const Principal& who, uint64_t job, int64_t ttl_s) {
  Impl& s = *impl_;
  if (ttl_s < 1 || ttl_s > 7 * 86400) return InvalidArgument("field 'ttl_s': " + std::to_string(ttl_s) + " is outside [1, 604800]");
  std::unique_lock lk(s.mu);
  const auto it = s.jobs.find(job);
  if (it == s.jobs.end() || !s.Visible(who, it->second)) return NotFound("no job " + std::to_string(job));
  if (s.reservations.count(job)) return InvalidArgument("job " + std::to_string(job) + " holds a reservation already");
  Impl::Input in = Impl::Input::Of(Impl::Input::Kind::kReserve, job);
  in.ttl_s = ttl_s;
  auto w = std::make_shared<Impl::Waiter>();
  ESTUARY_RETURN_IF_ERROR(s.Ask(lk, std::move(in), w));
  return w->reservation;
}

std::vector<Service::ReservationView> Service::ListReservations(const Principal& who) const {
  const Impl& s = *impl_;
  std::lock_guard lk(s.mu);
  std::vector<ReservationView> v;
  for (const auto& [id, r] : s.reservations) {
    if (s.Visible(who, s.jobs.at(id))) v.push_back(r);
  }
  return v;
}

Status Service::DeleteReservation(const Principal& who, uint64_t job) {
  Impl& s = *impl_;
  std::unique_lock lk(s.mu);
  const auto it = s.reservations.find(job);
  if (it == s.reservations.end() || !s.Visible(who, s.jobs.at(job))) return NotFound("no reservation " + std::to_string(job));
  return s.Ask(lk, Impl::Input::Of(Impl::Input::Kind::kUnreserve, job), std::make_shared<Impl::Waiter>());
}

int64_t Service::NowMs() const { return impl_->clock->NowMs(); }

StatusOr<int64_t> Service::Defrag(const Principal& admin, bool wait) {
  Impl& s = *impl_;
  if (admin.role != Role::kAdmin) return PermissionDenied("only admins start a defragmentation");
  std::unique_lock lk(s.mu);
  if (!wait) {
    s.inputs.push_back(Impl::Input::Of(Impl::Input::Kind::kDefrag));
    lk.unlock();
    s.input_cv.notify_one();
    return int64_t{0};
  }
  auto w = std::make_shared<Impl::Waiter>();
  ESTUARY_RETURN_IF_ERROR(s.Ask(lk, Impl::Input::Of(Impl::Input::Kind::kDefrag), w));
  return w->moves;
}

StatusOr<Service::StandbyWindowView> Service::AddStandbyWindow(const Principal& who, uint64_t job, int64_t from_ms,
                                                               int64_t to_ms, int32_t replicas) {
  Impl& s = *impl_;
  StandbyWindowView w;
  {
    std::lock_guard lk(s.mu);
    const auto it = s.jobs.find(job);
    if (it == s.jobs.end() || !s.Visible(who, it->second)) return NotFound("no job " + std::to_string(job));
    const Impl::JobRec& j = it->second;
    if (!s.opt.standby) return InvalidArgument("Standby is off in this service's configuration (it has no 'standby')");
    if (Ended(j.view.phase)) return InvalidArgument("job " + std::to_string(job) + " has ended");
    if (replicas < 1 || replicas > j.view.request.max_replicas) {
      return InvalidArgument("field 'replicas': " + std::to_string(replicas) + " is outside [1, " +
                             std::to_string(j.view.request.max_replicas) + "] (the job's max replicas)");
    }
    if (to_ms <= from_ms) return InvalidArgument("field 'to_ms': not after from_ms");
    if (to_ms <= s.clock->NowMs()) return InvalidArgument("field 'to_ms': in the past");
    if (to_ms - from_ms > int64_t{30} * 86400 * 1000) return InvalidArgument("field 'to_ms': a window is at most 30 days");
    for (const auto& [id, o] : s.windows) {
      if (o.job == job && from_ms < o.to_ms && o.from_ms < to_ms) {
        return InvalidArgument("field 'from_ms': overlaps window " + std::to_string(id) + " of job " + std::to_string(job));
      }
    }
    w.id = s.next_window++;
    w.job = job;
    w.tenant = j.view.tenant;
    w.from_ms = from_ms;
    w.to_ms = to_ms;
    w.replicas = replicas;
    // Held now (its id and its place against overlaps); dropped again if the store fails.
    s.windows.emplace(w.id, w);
  }
  StoreBatch b;
  b.Put(Impl::WindowKey(w.id), Impl::WindowJson(w));
  const Status st = s.committer->Commit(std::move(b));
  {
    std::lock_guard lk(s.mu);
    if (!st.ok()) {
      s.windows.erase(w.id);
      return st;
    }
    s.standby_jobs.insert(job);
    s.inputs.push_back(Impl::Input::Of(Impl::Input::Kind::kWake));
  }
  s.input_cv.notify_one();
  return w;
}

std::vector<Service::StandbyWindowView> Service::ListStandbyWindows(const Principal& who) const {
  const Impl& s = *impl_;
  std::lock_guard lk(s.mu);
  std::vector<StandbyWindowView> v;
  for (const auto& [id, w] : s.windows) {
    const auto j = s.jobs.find(w.job);
    if (j != s.jobs.end() && s.Visible(who, j->second)) v.push_back(w);
  }
  return v;
}

Status Service::DeleteStandbyWindow(const Principal& who, uint64_t id) {
  Impl& s = *impl_;
  {
    std::lock_guard lk(s.mu);
    const auto it = s.windows.find(id);
    if (it == s.windows.end() || !s.Visible(who, s.jobs.at(it->second.job))) {
      return NotFound("no standby window " + std::to_string(id));
    }
  }
  StoreBatch b;
  b.Delete(Impl::WindowKey(id));
  ESTUARY_RETURN_IF_ERROR(s.committer->Commit(std::move(b)));
  {
    std::lock_guard lk(s.mu);
    const auto it = s.windows.find(id);
    if (it != s.windows.end()) {
      s.standby_jobs.insert(it->second.job);  // its replicas resume
      s.windows.erase(it);
    }
    s.inputs.push_back(Impl::Input::Of(Impl::Input::Kind::kWake));
  }
  s.input_cv.notify_one();
  return Status::Ok();
}

// ---- One pass of the loop (RunOnce), by step ----

void Service::Impl::ApplyInput(Input& in, Pass& p) {
  Impl& s = *this;
  StoreBatch& batch = p.batch;
  auto& touched = p.touched;
  auto& waiters = p.waiters;
  auto& out = p.out;
  const int64_t now_ms = p.now_ms, now_s = p.now_s;
  bool& nodes_added = p.nodes_added;
  (void)out;
  (void)now_ms;
  switch (in.kind) {
    case Impl::Input::Kind::kSubmit: {
      const auto it = s.jobs.find(in.job);
      if (it == s.jobs.end() || Ended(it->second.view.phase)) break;
      Impl::JobRec& j = it->second;
      s.Admit(j, now_s);
      touched.insert(in.job);
      break;
    }
    case Impl::Input::Kind::kCancel: {
      batch.Delete(CancelKey(in.job));
      const auto it = s.jobs.find(in.job);
      if (it == s.jobs.end()) break;  // ended long ago and retired
      if (!Ended(it->second.view.phase)) s.EndJob(it->second, JobPhase::kCancelled, "cancelled", now_ms);
      touched.insert(in.job);
      break;
    }
    case Impl::Input::Kind::kNodesAdded: nodes_added = true; break;
    case Impl::Input::Kind::kWake: break;  // a pass now (e.g. a new standby window)
    case Impl::Input::Kind::kNodeAction:
      s.ApplyNodeAction(in, p);
      break;
    case Impl::Input::Kind::kReserve: {
      if (!s.jobs.count(in.job)) {
        waiters.push_back({in.waiter, NotFound("no job " + std::to_string(in.job))});
        break;
      }
      auto r = s.HoldNodes(in.job, now_ms, now_ms + in.ttl_s * 1000);
      if (!r.ok()) {
        waiters.push_back({in.waiter, r.status()});
        break;
      }
      s.reservations[in.job] = *r;
      in.waiter->reservation = *r;
      batch.Put(Impl::ResvKey(in.job), Impl::ResvJson(*r));
      waiters.push_back({in.waiter, Status::Ok()});
      break;
    }
    case Impl::Input::Kind::kResize: {
      const auto found = s.jobs.find(in.job);
      if (found == s.jobs.end() || Ended(found->second.view.phase)) {
        waiters.push_back({in.waiter, InvalidArgument("job " + std::to_string(in.job) + " has ended")});
        break;
      }
      Impl::JobRec& j = found->second;
      std::string why;
      if (j.in_engine && !s.engine->Resize(static_cast<uint32_t>(in.job), in.min_replicas, in.max_replicas, now_s, &why)) {
        waiters.push_back({in.waiter, InvalidArgument("field 'replicas': " + why)});
        break;
      }
      j.view.request.min_replicas = in.min_replicas;
      j.view.request.max_replicas = in.max_replicas;
      if (j.tasks.size() < static_cast<size_t>(in.max_replicas)) j.tasks.resize(static_cast<size_t>(in.max_replicas));
      touched.insert(in.job);
      if (j.parked) nodes_added = true;  // new bounds: it may fit now
      waiters.push_back({in.waiter, Status::Ok()});
      break;
    }
    case Impl::Input::Kind::kConfig:
      if (in.config.grace_s) {
        s.engine->SetGrace(*in.config.grace_s);
        if (!s.opt.standby_grace_own) s.engine->SetStandbyGrace(*in.config.grace_s);
      }
      if (in.config.absorb) s.engine->SetAbsorb(*in.config.absorb);
      if (in.config.heartbeat_timeout_s) s.opt.heartbeat_timeout_ms = *in.config.heartbeat_timeout_s * 1000;
      if (in.config.defrag_interval_s) s.defrag_interval_s = *in.config.defrag_interval_s;
      batch.Put("meta/config", s.ConfigJson());
      waiters.push_back({in.waiter, Status::Ok()});
      break;
    case Impl::Input::Kind::kQueues: {
      const Status st = s.engine->SetQueues(in.queues, in.sharing);
      if (st.ok()) {
        batch.Put("meta/queues", Json{{"queues", EncodeQueues(in.queues)}, {"sharing", EncodeSharing(in.sharing)}}.dump());
        nodes_added = true;  // new bounds: parked jobs may be admitted now
      }
      waiters.push_back({in.waiter, st.ok() ? st : InvalidArgument(st.message())});
      break;
    }
    case Impl::Input::Kind::kDefrag: {
      auto moves = s.engine->Defrag(DefragOptions{}, now_s);
      s.defragged_ms = now_ms;
      if (moves.ok() && in.waiter) in.waiter->moves = *moves;
      waiters.push_back({in.waiter, moves.status()});
      break;
    }
    case Impl::Input::Kind::kUnreserve:
      if (s.reservations.erase(in.job) > 0) {
        s.engine->Unreserve(static_cast<uint32_t>(in.job));
        batch.Delete(Impl::ResvKey(in.job));
      }
      waiters.push_back({in.waiter, Status::Ok()});
      break;
    case Impl::Input::Kind::kReport:
      s.ApplyReports(in, p);
      break;
  }
}

void Service::Impl::ApplyNodeAction(Input& in, Pass& p) {
  Impl& s = *this;
  StoreBatch& batch = p.batch;
  auto& waiters = p.waiters;
  const int64_t now_ms = p.now_ms, now_s = p.now_s;
  bool& nodes_added = p.nodes_added;
  Impl::NodeRec& n = s.nodes.at(in.node);
  const std::string& a = in.action;
  // An evacuation goes on until the node is empty (Engine::Evacuate), or the admin's next word.
  if (a == "cordon" && (n.view.state == "ready" || n.view.state == "evacuating")) {
    s.engine->SetCordoned(n.id, true);
    n.view.state = "cordoned";
  } else if (a == "uncordon" && (n.view.state == "cordoned" || n.view.state == "evacuating")) {
    s.engine->SetCordoned(n.id, false);
    n.view.state = "ready";
  } else if (a == "evacuate" && (n.view.state == "ready" || n.view.state == "cordoned" || n.view.state == "evacuating")) {
    s.engine->Evacuate(n.id, now_s);  // its tasks migrate, make-before-break
    n.view.state = "evacuating";      // "cordoned" once it is empty (EndEvacuations)
    s.evacuating.insert(in.node);
  } else if (a == "drain" && n.view.state != "failed") {
    s.engine->DrainNode(n.id, now_s);
    n.view.state = "drained";
  } else if (a == "fail" && n.view.state != "failed") {
    s.engine->FailNode(n.id, now_s);
    n.view.state = "failed";
    s.StoppedWithNodes({in.node}, batch, p.touched);
    ++s.node_failures_total;
  } else if (a == "restore" && n.view.state != "ready") {
    s.engine->RestoreNode(n.id);
    n.view.state = "ready";
    n.view.last_heartbeat_ms = now_ms;
    nodes_added = true;  // new room: parked jobs may fit
  }
  batch.Put("nodestate/" + in.node, n.view.state);
  if (in.waiter) waiters.push_back({in.waiter, Status::Ok()});
}

// Agents' reports of their instances: running, succeeded, failed, stopped.
void Service::Impl::ApplyReports(Input& in, Pass& p) {
  Impl& s = *this;
  StoreBatch& batch = p.batch;
  auto& touched = p.touched;
  const int64_t now_ms = p.now_ms;
  if (in.waiter) p.waiters.push_back({in.waiter, Status::Ok()});
  for (const TaskReport& r : in.reports) {
    uint64_t id = 0;
    size_t replica = 0;
    if (!ParseTaskName(r.task, &id, &replica)) continue;
    const auto found = s.jobs.find(id);
    if (found == s.jobs.end() || replica >= found->second.tasks.size()) continue;  // retired since
    Impl::JobRec& j = found->second;
    Impl::TaskRec& t = j.tasks[replica];
    // Which instance it is of: the replica's own, a move's new one, a move's old one retiring —
    // or one the service tracks no longer (on a node it took for failed, or stopped and started
    // anew since): dropped. Without an instance, by its node.
    enum class Of : uint8_t { kOwn, kMove, kRetiring, kStale };
    const Of of = r.instance != 0 ? (r.instance == t.instance                                 ? Of::kOwn
                                     : !t.mig_node.empty() && r.instance == t.mig_instance    ? Of::kMove
                                     : !t.retiring.empty() && r.instance == t.retiring_instance ? Of::kRetiring
                                                                                              : Of::kStale)
                  : r.node.empty() || r.node == t.node ? Of::kOwn
                  : r.node == t.mig_node               ? Of::kMove
                  : r.node == t.retiring               ? Of::kRetiring
                                                       : Of::kStale;
    if (of != Of::kOwn) {
      if (of == Of::kMove) {
        // The migration's new instance: running completes the move, anything else
        // abandons it (at the engine's next step).
        const std::optional<JobId> ej = s.engine->JobOf(static_cast<uint32_t>(id));
        t.mig_report = r.state == TaskReport::State::kRunning ? 1 : -1;
        if (ej && replica < s.engine->state().job(*ej).tasks.size()) {
          s.engine->AcknowledgeMove(s.engine->state().job(*ej).tasks[replica], r.state == TaskReport::State::kRunning);
        }
      } else if (of == Of::kRetiring && r.state != TaskReport::State::kRunning) {
        t.retiring.clear();  // the old instance is gone
        t.retiring_instance = 0;
        if (t.stored()) batch.Put(TaskKey(id, replica), Impl::TaskJson(t));
      }
      continue;
    }
    switch (r.state) {
      case TaskReport::State::kStandby:
      case TaskReport::State::kStandbyFailed: {
        // Its answer to a Standby order: the engine lends its GPUs, or keeps it active.
        const std::optional<JobId> ej = s.engine->JobOf(static_cast<uint32_t>(id));
        if (!t.standby || t.lent || !ej || replica >= s.engine->state().job(*ej).tasks.size()) break;  // called back since
        const bool ok = r.state == TaskReport::State::kStandby;
        if (!s.engine->AcknowledgeStandby(s.engine->state().job(*ej).tasks[replica], ok, r.reason)) break;
        touched.insert(id);
        if (ok) {
          t.lent = true;
          batch.Put(TaskKey(id, replica), Impl::TaskJson(t));
        } else {
          j.view.reason = "replica " + std::to_string(replica) + " did not enter Standby (its GPUs are not lent): " + r.reason;
          batch.Put(JobKey(id), Impl::JobJson(j));
        }
        break;
      }
      case TaskReport::State::kRunning:
        if (t.state != Impl::TaskState::kStarting) break;
        t.state = Impl::TaskState::kRunning;
        t.moved_in = false;
        batch.Put(TaskKey(id, replica), Impl::TaskJson(t));
        ++j.view.running_replicas;
        if (j.view.phase == JobPhase::kPending && j.view.running_replicas >= j.view.request.min_replicas) {
          j.view.phase = JobPhase::kRunning;
          j.view.reason.clear();
          if (j.view.running_ms < 0) {
            j.view.running_ms = now_ms;
            s.submit_to_running_seconds.Observe(static_cast<double>(now_ms - j.view.submitted_ms) / 1000.0);
          }
          batch.Put(JobKey(id), Impl::JobJson(j));
        }
        break;
      case TaskReport::State::kSucceeded:
      case TaskReport::State::kFailed:
      case TaskReport::State::kStopped: {
        const bool was_running = t.state == Impl::TaskState::kRunning;
        if (t.state == Impl::TaskState::kNone || t.state == Impl::TaskState::kDone) break;
        if (was_running) --j.view.running_replicas;
        // An instance told to stop that ended otherwise (its work ran out, or it exited with an
        // error, before the stop reached it) has stopped: its replica was taken from it (an
        // eviction, a shrink) and starts again wherever the engine binds it now. Any other
        // replica that succeeded while the engine still binds it is done: never started again
        // (its job ends when none runs any more).
        // So has a move's new instance taken for the replica's that failed before it ran (moved_in):
        // the replica starts anew.
        const bool stopped = r.state == TaskReport::State::kStopped || t.state == Impl::TaskState::kStopping ||
                             (r.state == TaskReport::State::kFailed && t.moved_in);
        t.state = stopped ? Impl::TaskState::kNone
                          : r.state == TaskReport::State::kSucceeded ? Impl::TaskState::kDone : Impl::TaskState::kNone;
        t.standby = t.lent = t.borrowed = t.moved_in = false;
        // A done replica keeps its record (its GPUs, until its job ends: across a restart too).
        if (t.state == Impl::TaskState::kDone) batch.Put(TaskKey(id, replica), Impl::TaskJson(t));
        else batch.Delete(TaskKey(id, replica));
        if (stopped) touched.insert(id);  // may start it again
        if (Ended(j.view.phase) || stopped) break;
        if (r.state == TaskReport::State::kFailed) {
          s.EndJob(j, JobPhase::kFailed, "replica " + std::to_string(replica) + " failed" + (r.reason.empty() ? "" : ": " + r.reason),
                   now_ms);
          touched.insert(id);
          batch.Put(JobKey(id), Impl::JobJson(j));
          break;
        }
        // Succeeded: the job is done once none of its replicas runs any more (ended here, before
        // the cycle, so that the cycle has its GPUs).
        if (Impl::Succeeded(j)) {
          s.EndJob(j, JobPhase::kSucceeded, "", now_ms);
          touched.insert(id);
          batch.Put(JobKey(id), Impl::JobJson(j));
        }
        break;
      }
    }
  }
}

void Service::Impl::FailSilentNodes(Pass& p) {
  Impl& s = *this;
  StoreBatch& batch = p.batch;
  const int64_t now_ms = p.now_ms, now_s = p.now_s;
  // Nodes whose heartbeats stopped (looked for at most every 500 ms: a pass over every node).
  if (now_ms - s.heartbeats_checked_ms >= 500) {
  s.heartbeats_checked_ms = now_ms;
  std::set<std::string> failed;
  for (auto& [name, n] : s.nodes) {
    if (!n.id.valid() || n.view.state == "failed") continue;
    if (now_ms - n.view.last_heartbeat_ms <= s.opt.heartbeat_timeout_ms) continue;
    n.view.state = "failed";
    s.engine->FailNode(n.id, now_s);
    failed.insert(name);
    batch.Put("nodestate/" + name, "failed");
    ++s.node_failures_total;
  }
  s.StoppedWithNodes(failed, batch, p.touched);
  }
}

void Service::Impl::HandOverWindows(Pass& p) {
  Impl& s = *this;
  StoreBatch& batch = p.batch;
  const int64_t now_ms = p.now_ms, now_s = p.now_s;
  // Standby windows: windows past their end, or of ended jobs, are dropped; the engine gets the
  // current windows of every job whose windows changed (its `standby` action keeps the job at
  // its windows' target from then on). Engine times are whole seconds: a window's edges round up.
  for (auto it = s.windows.begin(); it != s.windows.end();) {
    const auto j = s.jobs.find(it->second.job);
    if (now_ms < it->second.to_ms && j != s.jobs.end() && !Ended(j->second.view.phase)) {
      ++it;
      continue;
    }
    s.standby_jobs.insert(it->second.job);
    batch.Delete(Impl::WindowKey(it->first));
    it = s.windows.erase(it);
  }
  for (uint64_t job : std::exchange(s.standby_jobs, {})) {
    std::vector<StandbyWindowSpec> ws;
    for (const auto& [id, w] : s.windows) {
      if (w.job == job && s.opt.standby) ws.push_back({(w.from_ms + 999) / 1000, (w.to_ms + 999) / 1000, w.replicas});
    }
    s.engine->SetStandbyWindows(static_cast<uint32_t>(job), std::move(ws), now_s);
  }
}

  // Engine events: those of the inputs (node failures, cancels, ...) first, then the cycle's. A
  // job evicted whole waits again at the front of the engine's queue (EngineConfig::requeue):
  // the cycle that follows the eviction tries it first.
void Service::Impl::HandleEvents(const std::vector<EngineEvent>& events, Pass& p) {
  Impl& s = *this;
  auto& touched = p.touched;
  const int64_t now_s = p.now_s;
  for (const EngineEvent& e : events) {
    const auto it = s.jobs.find(e.job);
    if (it == s.jobs.end()) continue;
    Impl::JobRec& j = it->second;
    touched.insert(e.job);
    switch (e.kind) {
      case EngineEvent::Kind::kReturned: {
        if (!e.never) {
          ++s.evictions_total;
          ++j.view.restarts;  // stored with the job when its records change (Reconcile)
        }
        if (Ended(j.view.phase)) {
          if (e.requeued) s.engine->Cancel(e.job, now_s);  // it ended meanwhile: not again
          j.in_engine = false;
          break;
        }
        if (j.view.phase == JobPhase::kRunning) j.view.phase = JobPhase::kPending;
        if (e.never) {
          // It can never fit the nodes there are: it waits for new nodes, with the reason.
          j.in_engine = false;
          j.parked = true;
          j.view.reason = "fits no registered node: " + e.detail;
          break;
        }
        j.view.reason = e.detail + "; waiting for capacity";
        break;
      }
      case EngineEvent::Kind::kShrunk: ++s.evictions_total; break;
      case EngineEvent::Kind::kReclaim:
        j.view.reason = "reclaiming: " + std::to_string(e.replicas) + " victim job(s) evicted at " + std::to_string(e.at);
        break;
      case EngineEvent::Kind::kStarted:
      case EngineEvent::Kind::kGrown: j.view.reason.clear(); break;
      // Placements that change without a start or a stop: orders follow from the diff of
      // what the engine binds (TakeTouched below).
      case EngineEvent::Kind::kStandby:
      case EngineEvent::Kind::kRestored:
      case EngineEvent::Kind::kMoveStarted:
      case EngineEvent::Kind::kMoved:
      case EngineEvent::Kind::kMoveAborted:
      case EngineEvent::Kind::kMoveCancelled:
      case EngineEvent::Kind::kStandbyRefused: break;
      case EngineEvent::Kind::kTimedOut:
        // The engine ended the job at its walltime limit: its replicas are stopped (Reconcile).
        if (Ended(j.view.phase)) break;
        j.in_engine = false;  // ended there already
        s.EndJob(j, JobPhase::kFailed, "timed out: its run reached walltime_s " + std::to_string(j.view.request.walltime_s),
                 p.now_ms);
        break;
    }
  }
}

void Service::Impl::NoticeEvictions(Pass& p) {
  Impl& s = *this;
  auto& out = p.out;
  // Reclaim victims hear of their stop ahead of time (its grace period: time to checkpoint).
  for (const Engine::EvictionNotice& n : s.engine->TakeEvictionNotices()) {
    const auto it = s.jobs.find(n.job);
    const std::optional<JobId> ej = s.engine->JobOf(n.job);
    if (it == s.jobs.end() || !ej) continue;
    const std::vector<TaskId>& tasks = s.engine->state().job(*ej).tasks;
    const auto pos = std::find(tasks.begin(), tasks.end(), n.task);
    if (pos == tasks.end()) continue;
    const size_t replica = static_cast<size_t>(pos - tasks.begin());
    const Impl::TaskRec& t = it->second.tasks[replica];
    if (t.state != Impl::TaskState::kStarting && t.state != Impl::TaskState::kRunning) continue;
    s.AddOrder(out, Order::Op::kEvict, n.job, replica, t);
    out.back().second.deadline_ms = n.at * 1000;
  }
}

void Service::Impl::EndReservations(Pass& p) {
  Impl& s = *this;
  StoreBatch& batch = p.batch;
  const int64_t now_ms = p.now_ms;
  // Reservations end with their purpose: the job started or ended, the hold was released, or
  // the time is up.
  for (auto it = s.reservations.begin(); it != s.reservations.end();) {
    const Impl::JobRec& j = s.jobs.at(it->first);
    const bool over = j.view.phase != JobPhase::kPending || !j.in_engine || now_ms >= it->second.expires_ms ||
                      s.engine->HeldNodes(static_cast<uint32_t>(it->first)).empty();
    if (!over) {
      ++it;
      continue;
    }
    s.engine->Unreserve(static_cast<uint32_t>(it->first));
    batch.Delete(Impl::ResvKey(it->first));
    it = s.reservations.erase(it);
  }
}

void Service::Impl::AdmitParked(Pass& p) {
  if (!p.nodes_added) return;
  for (auto& [id, j] : jobs) {
    if (j.parked && !Ended(j.view.phase)) {
      Admit(j, p.now_s);
      p.touched.insert(id);
    }
  }
}

void Service::Impl::DefragIfDue(Pass& p) {
  if (defrag_interval_s <= 0 || p.now_ms - defragged_ms < defrag_interval_s * 1000) return;
  defragged_ms = p.now_ms;
  (void)engine->Defrag(DefragOptions{}, p.now_s);  // the default options are valid
}

void Service::Impl::EndEvacuations(Pass& p) {
  for (auto it = evacuating.begin(); it != evacuating.end();) {
    NodeRec& n = nodes.at(*it);
    if (n.view.state == "evacuating" && engine->Evacuating(n.id)) {
      ++it;
      continue;
    }
    if (n.view.state == "evacuating") {
      n.view.state = "cordoned";
      p.batch.Put("nodestate/" + *it, n.view.state);
    }
    it = evacuating.erase(it);
  }
}

void Service::Impl::ReconcileTouched(Pass& p) {
  // Placements that changed without an event (moves, Standby), and the moves under way.
  for (uint32_t id : engine->TakeTouched()) p.touched.insert(id);
  EndReservations(p);
  for (;;) {
    moving.clear();
    for (const Engine::StartingMove& m : engine->StartingMoves()) moving.emplace(m.task.value(), m);
    bool ended = false;
    for (uint64_t id : p.touched) {
      JobRec& j = jobs.at(id);
      Reconcile(id, p.batch, p.out);
      // A job whose last replica still to run was taken away (shrunk, or stopped and not bound
      // again) after its others succeeded is done now: nothing of it will run again.
      if (!Ended(j.view.phase) && Succeeded(j)) {
        EndJob(j, JobPhase::kSucceeded, "", p.now_ms);
        ended = true;
      }
      p.batch.Put(JobKey(id), JobJson(j));
    }
    if (!ended) return;
    // Those ends come after the cycle: the engine let their replicas go and may have changed
    // other jobs with them. Their events, and every touched job again (Reconcile changes
    // nothing where the engine did not), in this pass.
    HandleEvents(engine->TakeEvents(), p);
    for (uint32_t id : engine->TakeTouched()) p.touched.insert(id);
  }
}

void Service::Impl::RetireEnded(Pass& p) {
  // Ended jobs are retired once their retention is over: forgotten here and in the store (the
  // engine keeps a small record of each until the next restart).
  while (!ended.empty() && ended.front().first + opt.retain_ended_ms <= p.now_ms) {
    const uint64_t id = ended.front().second;
    if (p.touched.count(id)) break;  // seen in this pass: retired in the next
    ended.pop_front();
    const auto it = jobs.find(id);
    if (it == jobs.end() || !Ended(it->second.view.phase)) continue;
    for (size_t i = 0; i < it->second.tasks.size(); ++i) {
      if (it->second.tasks[i].stored()) p.batch.Delete(TaskKey(id, i));
    }
    p.batch.Delete(JobKey(id));
    p.batch.Delete(CarryKey(id));
    jobs.erase(it);
    if (logs) logs->RemoveJob(id);
    ++jobs_retired_total;
  }
}

void Service::Impl::StoreCarry(Pass& p) {
  const std::vector<uint32_t> logged = engine->TakeCarryLog();
  const EngineCarry carry = engine->Carried(&logged);
  for (const CarriedJob& c : carry.jobs) {
    const auto it = jobs.find(c.job);
    if (it != jobs.end() && it->second.in_engine && !Ended(it->second.view.phase)) p.batch.Put(CarryKey(c.job), CarryJson(c));
  }
  if (const std::optional<CarriedSchedule>& t = carry.schedule) {
    std::string v = Json{{"next_defrag", t->next_defrag},
                         {"last_plan", t->last_plan},
                         {"next_replan", t->next_replan},
                         {"next_backfill", t->next_backfill},
                         {"walltime_starts", t->walltime_starts}}
                        .dump();
    if (v != schedule_stored) {
      p.batch.Put("meta/schedule", v);
      schedule_stored = std::move(v);
    }
  }
  if (!engine->queue_book().enabled()) return;
  Json queues = Json::array();
  for (const CarriedQueue& q : carry.queues) {
    if (q.cooldown_until == 0 && q.decayed == 0 && q.usage <= 0) continue;
    queues.push_back({{"name", q.name}, {"cooldown_until", q.cooldown_until}, {"decayed", q.decayed}, {"usage", q.usage}});
  }
  std::string v = Json{{"usage_at", carry.usage_at}, {"queues", queues}}.dump();
  if (v == queue_carry_stored) return;
  p.batch.Put("meta/queue_carry", v);
  queue_carry_stored = std::move(v);
}

void Service::Impl::CompactIfDue(Pass& p) {
  // The engine forgets ended jobs only by being rebuilt without them.
  if (opt.compact_min_jobs < 0 || p.now_ms - compact_checked_ms < opt.compact_check_ms) return;
  compact_checked_ms = p.now_ms;
  int64_t live = 0;
  for (const auto& [id, j] : jobs) live += j.in_engine;
  const int64_t known = static_cast<int64_t>(engine->jobs_known());
  if (known > opt.compact_min_jobs && known > 2 * live) CompactEngine(p.now_s, p.batch);
}

void Service::Impl::SampleIfDue(int64_t now_ms) {
  if (now_ms - sampled_ms < opt.sample_period_ms) return;
  sampled_ms = now_ms;
  Sample smp;
  smp.t_ms = now_ms;
  const ClusterState& st = engine->state();
  for (const Node& n : st.nodes()) {
    if (n.state == NodeState::kReady) smp.gpus += n.spec.gpu_count;
  }
  smp.gpus_allocated = static_cast<double>(st.allocated_gpu_milli()) / kMilliPerGpu;
  for (const auto& [id, j] : jobs) {
    smp.pending += j.view.phase == JobPhase::kPending;
    smp.running += j.view.phase == JobPhase::kRunning;
  }
  samples.push_back(smp);
  while (samples.size() > opt.samples_kept) samples.pop_front();
}

void Service::Impl::SendOrders(std::vector<std::pair<std::string, Order>>& out) {
  if (out.empty()) return;
  const auto rank = [](Order::Op op) {
    switch (op) {
      case Order::Op::kStop: return 0;
      case Order::Op::kEvict: return 1;
      case Order::Op::kStandby: return 2;
      case Order::Op::kResume: return 3;
      case Order::Op::kStart:
      case Order::Op::kMigrate: return 4;
    }
    return 4;
  };
  std::stable_sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return rank(a.second.op) < rank(b.second.op); });
  {
    std::lock_guard lk(mu);
    for (auto& [agent, o] : out) {
      AgentRec& a = agents[agent];
      o.seq = a.next_seq++;
      a.orders.push_back(std::move(o));
    }
  }
  orders_cv.notify_all();
}

void Service::RunOnce() {
  Impl& s = *impl_;
  std::lock_guard run(s.run_mu);
  StoreBatch batch;
  std::vector<std::pair<std::string, Order>> out;
  std::vector<std::pair<std::shared_ptr<Impl::Waiter>, Status>> waiters;  // answered once stored
  {
    std::lock_guard lk(s.mu);
    const int64_t now_ms = s.clock->NowMs();
    s.pass_now_ms = now_ms;
    Impl::Pass pass{now_ms, now_ms / 1000, batch, out, waiters, {}, false};
    std::deque<Impl::Input> inputs = std::exchange(s.inputs, {});
    for (Impl::Input& in : inputs) s.ApplyInput(in, pass);
    s.AdmitParked(pass);
    s.FailSilentNodes(pass);
    s.HandOverWindows(pass);
    s.DefragIfDue(pass);
    // The inputs' events (node failures, cancels, ...) first, then the cycle's.
    s.HandleEvents(s.engine->TakeEvents(), pass);
    s.HandleEvents(s.engine->RunCycle(pass.now_s), pass);
    s.EndEvacuations(pass);
    s.NoticeEvictions(pass);
    s.ReconcileTouched(pass);
    s.RetireEnded(pass);
    s.CompactIfDue(pass);
    s.StoreCarry(pass);
    s.SampleIfDue(now_ms);
    // The pass's history goes with what it stores; a pass that stores nothing changed nothing, and
    // its cycle waits here for the next one (a bounded number of them).
    if (!batch.empty() || s.history.size() + s.recorded.size() > 4096) s.StoreHistory(batch);
    ++s.cycles_total;
    s.cycle_seconds.Observe(static_cast<double>(s.clock->NowMs() - now_ms) / 1000.0);
  }
  if (!batch.empty()) {
    const Status st = s.committer->Commit(std::move(batch));
    // A store that fails is not trusted again: orders are not sent (agents would act on
    // decisions that a restart would not know of).
    if (!st.ok()) {
      for (auto& [w, ws] : waiters) {
        if (w) w->done.set_value(st);  // inputs queued without a waiter (wait = false) have none
      }
      return;
    }
  }
  for (auto& [w, ws] : waiters) {
    if (w) w->done.set_value(ws);
  }
  s.SendOrders(out);
}

void Service::Start() {
  Impl& s = *impl_;
  std::lock_guard lk(s.mu);
  if (s.loop.joinable()) return;
  s.loop = std::thread([this] {
    Impl& t = *impl_;
    for (;;) {
      {
        std::unique_lock lk2(t.mu);
        t.input_cv.wait_for(lk2, std::chrono::milliseconds(t.opt.cycle_period_ms),
                            [&] { return !t.inputs.empty() || t.stopping; });
        if (t.stopping) return;
      }
      RunOnce();
    }
  });
}

void Service::Stop() {
  Impl& s = *impl_;
  {
    std::lock_guard lk(s.mu);
    s.stopping = true;
  }
  s.input_cv.notify_all();
  s.orders_cv.notify_all();
  if (s.loop.joinable()) s.loop.join();
}

std::vector<Service::Sample> Service::Samples() const {
  const Impl& s = *impl_;
  std::lock_guard lk(s.mu);
  return {s.samples.begin(), s.samples.end()};
}

Status Service::CheckInvariants() const {
  const Impl& s = *impl_;
  std::lock_guard lk(s.mu);
  const ClusterState& st = s.engine->state();
  ESTUARY_RETURN_IF_ERROR(st.CheckInvariants());
  // The engine evacuates only nodes shown as evacuating.
  for (const auto& [name, n] : s.nodes) {
    if (n.id.valid() && s.engine->Evacuating(n.id) && (n.view.state != "evacuating" || s.evacuating.count(name) == 0)) {
      return Internal("node '" + name + "' is " + n.view.state + " but the engine evacuates it");
    }
  }
  // A drained or failed node holds no task (its tasks stopped; it takes none until restored).
  for (const auto& [name, n] : s.nodes) {
    if (!n.id.valid() || (n.view.state != "drained" && n.view.state != "failed")) continue;
    if (!st.node(n.id).tasks.empty()) {
      const std::optional<uint32_t> job = s.engine->DriverIdOf(st.task(st.node(n.id).tasks.front()).job);
      return Internal("node '" + name + "' is " + n.view.state + " but the engine binds a task of job " +
                      (job ? std::to_string(*job) : std::string("?")) + " there");
    }
  }
  // The engine's starting moves, by TaskId value: a replica with a move's new instance has one,
  // onto that instance's node and GPUs.
  std::map<uint32_t, const Engine::StartingMove*> moves;
  const std::vector<Engine::StartingMove> starting = s.engine->StartingMoves();
  for (const Engine::StartingMove& m : starting) moves[m.task.value()] = &m;
  std::set<uint64_t> instances;  // no two records name one instance
  // (node, gpu) -> GPU milli told to replicas starting or running there.
  std::map<std::pair<std::string, int>, int64_t> told;
  for (const auto& [id, j] : s.jobs) {
    const std::optional<JobId> ej = s.engine->JobOf(static_cast<uint32_t>(id));
    for (size_t i = 0; i < j.tasks.size(); ++i) {
      const Impl::TaskRec& t = j.tasks[i];
      for (uint64_t in : {t.state != Impl::TaskState::kNone ? t.instance : 0, t.mig_node.empty() ? 0 : t.mig_instance,
                          t.retiring.empty() ? 0 : t.retiring_instance}) {
        if (in != 0 && !instances.insert(in).second) {
          return Internal("instance " + std::to_string(in) + " is named twice (" + TaskName(id, i) + ")");
        }
      }
      if (!t.mig_node.empty()) {
        const TaskId tid = ej && i < st.job(*ej).tasks.size() ? st.job(*ej).tasks[i] : TaskId();
        const auto m = tid.valid() ? moves.find(tid.value()) : moves.end();
        std::vector<int> gpus;
        if (m != moves.end()) {
          for (size_t k = 0; k < m->second->gpus.size; ++k) gpus.push_back(m->second->gpus.idx[k]);
        }
        if (m == moves.end() || s.node_names[m->second->to.value()] != t.mig_node || gpus != t.mig_gpus ||
            m->second->move != t.mig_move) {
          return Internal("task " + TaskName(id, i) + " has a move's new instance on '" + t.mig_node +
                          "' but the engine moves it there on no such GPUs, or by another move");
        }
      }
      if (t.state == Impl::TaskState::kNone || t.state == Impl::TaskState::kStopping || t.state == Impl::TaskState::kDone) continue;
      // A replica in Standby has left its GPUs (to its borrowers); a migrating one also holds
      // its new instance's.
      for (const auto& [node, gpus] : {std::pair{&t.node, &t.gpus}, std::pair{&t.mig_node, &t.mig_gpus}}) {
        if (node == &t.node && t.standby) continue;
        for (int g : *gpus) {
          int64_t& milli = told[{*node, g}];
          milli += j.view.request.gpu_milli;
          if (milli > kMilliPerGpu) {
            return Internal("GPU " + std::to_string(g) + " of node '" + *node + "' is told to more replicas than it holds (" +
                            TaskName(id, i) + ")");
          }
        }
      }
      const bool bound = ej && j.in_engine && i < st.job(*ej).tasks.size() &&
                         st.task(st.job(*ej).tasks[i]).state == estuary::TaskState::kBound &&
                         s.node_names[st.task(st.job(*ej).tasks[i]).node.value()] == t.node;
      if (!bound) return Internal("task " + TaskName(id, i) + " runs on '" + t.node + "' but the engine does not bind it there");
    }
  }
  return Status::Ok();
}

std::string Service::MetricsText() const {
  const Impl& s = *impl_;
  std::lock_guard lk(s.mu);
  std::string out;
  char buf[256];
  auto line = [&](const char* name, const char* type, const char* help, double v) {
    std::snprintf(buf, sizeof buf, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
    out += buf;
  };
  std::map<int32_t, int64_t> pending_by_priority;
  std::array<int64_t, 5> by_phase{};
  for (const auto& [id, j] : s.jobs) {
    ++by_phase[static_cast<size_t>(j.view.phase)];
    if (j.view.phase == JobPhase::kPending) ++pending_by_priority[j.view.request.priority];
  }
  out += "# HELP estuary_jobs Jobs by state.\n# TYPE estuary_jobs gauge\n";
  for (JobPhase p : {JobPhase::kPending, JobPhase::kRunning, JobPhase::kSucceeded, JobPhase::kFailed, JobPhase::kCancelled}) {
    std::snprintf(buf, sizeof buf, "estuary_jobs{state=\"%s\"} %" PRId64 "\n", std::string(JobPhaseName(p)).c_str(),
                  by_phase[static_cast<size_t>(p)]);
    out += buf;
  }
  out += "# HELP estuary_pending_jobs Pending jobs by priority.\n# TYPE estuary_pending_jobs gauge\n";
  for (const auto& [p, n] : pending_by_priority) {
    std::snprintf(buf, sizeof buf, "estuary_pending_jobs{priority=\"%d\"} %" PRId64 "\n", p, n);
    out += buf;
  }
  const ClusterState& st = s.engine->state();
  const double total = static_cast<double>(st.total_gpu_milli());
  line("estuary_gpus", "gauge", "GPUs of registered nodes.", total / kMilliPerGpu);
  line("estuary_gpu_allocation_ratio", "gauge", "Allocated GPU share of all GPUs (0..1).",
       total > 0 ? static_cast<double>(st.allocated_gpu_milli()) / total : 0);
  std::map<std::string, int64_t> by_state;
  for (const auto& [name, n] : s.nodes) ++by_state[n.view.state];
  out += "# HELP estuary_nodes Nodes by state.\n# TYPE estuary_nodes gauge\n";
  for (const char* state : {"ready", "cordoned", "evacuating", "drained", "failed"}) {
    std::snprintf(buf, sizeof buf, "estuary_nodes{state=\"%s\"} %" PRId64 "\n", state, by_state[state]);
    out += buf;
  }
  line("estuary_jobs_submitted_total", "counter", "Jobs accepted (201).", static_cast<double>(s.submitted_total));
  line("estuary_decisions_total", "counter", "Orders sent to agents (every kind).",
       static_cast<double>(s.orders_start_total + s.orders_stop_total + s.orders_evict_total + s.orders_standby_total +
                           s.orders_resume_total + s.orders_migrate_total));
  line("estuary_task_starts_total", "counter", "Start orders sent.", static_cast<double>(s.orders_start_total));
  line("estuary_task_stops_total", "counter", "Stop orders sent.", static_cast<double>(s.orders_stop_total));
  line("estuary_eviction_notices_total", "counter", "Evict orders sent (a Reclaim's victims, ahead of their stop).",
       static_cast<double>(s.orders_evict_total));
  line("estuary_standby_orders_total", "counter", "Standby orders sent (replicas leaving their GPUs to spot work).",
       static_cast<double>(s.orders_standby_total));
  line("estuary_resume_orders_total", "counter", "Resume orders sent (Standby replicas taking their GPUs back).",
       static_cast<double>(s.orders_resume_total));
  line("estuary_migration_orders_total", "counter", "Migrate orders sent (new instances started before the old stop).",
       static_cast<double>(s.orders_migrate_total));
  const MigrationCounters& mc = s.engine->migration_counters();
  line("estuary_migrations_completed_total", "counter", "Migrations completed (the old instance stopped).",
       static_cast<double>(mc.completed));
  line("estuary_migrations_aborted_total", "counter", "Migrations given up (new instance failed or silent; the old kept).",
       static_cast<double>(mc.aborted + mc.cancelled));
  int64_t in_standby = 0;
  for (const auto& [id, j] : s.jobs) in_standby += j.view.standby_replicas;
  line("estuary_standby_replicas", "gauge", "Replicas in Standby (their GPUs lent).", static_cast<double>(in_standby));
  line("estuary_standby_windows", "gauge", "Standby windows not yet over.", static_cast<double>(s.windows.size()));
  line("estuary_reservations", "gauge", "Reservations holding nodes.", static_cast<double>(s.reservations.size()));
  line("estuary_evictions_total", "counter", "Jobs evicted whole or shrunk (Reclaim, node failure).",
       static_cast<double>(s.evictions_total));
  line("estuary_node_failures_total", "counter", "Nodes failed for missed heartbeats.",
       static_cast<double>(s.node_failures_total));
  line("estuary_jobs_retired_total", "counter", "Ended jobs forgotten after their retention.",
       static_cast<double>(s.jobs_retired_total));
  line("estuary_engine_compactions_total", "counter", "Engine rebuilds without its ended jobs.",
       static_cast<double>(s.compactions_total));
  line("estuary_cycles_total", "counter", "Scheduling cycles run.", static_cast<double>(s.cycles_total));
  line("estuary_store_commit_rounds_total", "counter", "Store transactions (group commits).",
       static_cast<double>(s.committer->rounds()));
  s.QueueMetricsText(out);
  s.cycle_seconds.Write(out, "estuary_cycle_seconds", "Scheduling cycle latency.");
  s.submit_to_running_seconds.Write(out, "estuary_submit_to_running_seconds",
                                    "From a job's 201 to its min replicas reported running by agents.");
  return out;
}

}  // namespace estuary
