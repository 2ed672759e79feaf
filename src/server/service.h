// Service: the live scheduler (issue 7, `estuary serve`) — the same engine the simulator drives
// (one Engine, src/engine/engine.h: ClusterState, Session, the actions and its priority queue), fed by API requests and node agents on the real clock, with every accepted
// request and every decision stored before it is acknowledged or sent.
//
// Threads. API calls (Submit, Cancel, Report, ...) come from any thread. Decisions are made by
// one thread only — the loop (RunOnce, called by Start's thread or directly by a test) — so that
// the engine sees one ordered stream of inputs:
//   Submit   validates, takes an id, stores the job ("job/<id>") through the group committer
//            (several concurrent submissions share one transaction) and returns once it is
//            durable; then queues it for the loop.
//   Cancel, Report, RegisterNodes queue their input for the loop and wait for it to be applied
//            (Cancel and registrations are stored by the loop before they return).
//   Heartbeat only stamps the nodes (memory; a lost heartbeat is not a lost decision).
//   RunOnce  (1) applies queued inputs in arrival order to the engine, (2) fails nodes whose
//            heartbeats stopped, (3) runs the engine's cycle (Engine::RunCycle: ended evictions
//            and restores, moves, the queue, Reclaim, headrooms, Absorb), (4) turns what changed
//            into orders — each replica the
//            engine bound and no agent was told of gets a start order, each replica an agent
//            runs that the engine no longer binds gets a stop order, a replica whose Standby
//            changed gets standby or resume, one the engine started to move gets migrate (and
//            its old instance a stop once the move completed) — and stores the orders'
//            task records and job states in one batch, and only then (5) hands the orders to the
//            agents' queues and wakes waiting callers.
// A job is `pending` until at least its min replicas report running, then `running`; it ends
// `succeeded` when its replicas report success, `failed` when one fails, `cancelled` on DELETE.
// A job evicted whole (Reclaim, node failure) goes back to `pending` and to the front of the
// engine's queue (EngineConfig::requeue), as in the simulator.
//
// Durable layout (Store keys; values are JSON):
//   job/<id, 16 digits>               {tenant, request (EncodeJobRequest), state, times, reason}
//   task/<id, 16 digits>/<replica, 5> {node, gpus, state: starting | running | stopping, standby,
//                                      borrowed, mig_node + mig_gpus (a move's new instance),
//                                      retiring (a moved replica's old instance, told to stop)}
//   node/<name>                       {agent, spec, domains}
//   nodestate/<name>                  ready | cordoned | evacuating | drained | failed
//   standby/<window id, 16 digits>    {job, tenant, from_ms, to_ms, replicas}
// Recovery (Open): nodes are re-added (failed ones down); every job not ended is re-admitted —
// with its stored task records as its placement when they still fit (Adopt: nothing moves, no
// GPU is bound twice), otherwise stopped and queued again; orders for tasks that were `starting`
// or `stopping` are sent again (agents treat a repeated order as done). Jobs keep their ids.
// Jobs with replicas on lent GPUs are adopted after the others (their lenders are in Standby
// again first); a migration under way is rolled back (its new instance is told to stop).
//
// Thread-safety: every public method is safe from any thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/job_json.h"
#include "api/tokens.h"
#include "common/clock.h"
#include "common/status.h"
#include "engine/engine.h"
#include "server/group_commit.h"
#include "store/store.h"

namespace estuary {

struct ServiceOptions {
  std::string policy = "best-fit";    // placement policy (an openb policy name)
  uint64_t seed = 1;                  // the engine's seed
  int64_t grace_s = 60;               // Reclaim's eviction grace period
  bool absorb = true;                 // grow running elastic jobs toward max
  int64_t heartbeat_timeout_ms = 30000;  // a node without a heartbeat this long is failed
  int64_t cycle_period_ms = 200;      // the loop runs at least this often (and on every input)
  size_t max_orders_per_poll = 20000; // orders returned by one WaitOrders
  size_t store_max_ops = 0;           // changes per store transaction (0: no cap; etcd: its --max-txn-ops)
  int64_t retain_ended_ms = 86'400'000;  // an ended job is listed (and stored) this long, then retired
  // The engine is rebuilt without its ended jobs (see Service::Impl::CompactEngine) when it knows
  // more than compact_min_jobs jobs and more than twice those it still runs or queues; checked at
  // most every compact_check_ms. compact_min_jobs < 0: never.
  int64_t compact_min_jobs = 200'000;
  int64_t compact_check_ms = 60'000;
  int64_t sample_period_ms = 5000;    // Samples(): one every 5 s
  size_t samples_kept = 720;          // ... the last hour of them
  // Topology planes and their levels (top first), declared before any node; a registration names
  // its domains in these terms. Default: "data" {az, spine, asw} and "param" {rdma_pod}.
  std::vector<std::pair<std::string, std::vector<std::string>>> planes = {{"data", {"az", "spine", "asw"}},
                                                                          {"param", {"rdma_pod"}}};
  // The engine's configuration (estuary serve --config: a scheduler configuration of the scenario
  // schema); none: the engine's defaults. Either way policy, seed, grace_s, absorb and
  // lend_max_priority above win, agents acknowledge moves, and evicted jobs are requeued.
  std::optional<EngineConfig> engine;
  // Standby lending: queued preemptible jobs of at most this priority try lent GPUs first
  // (EngineConfig::lend_max_priority; default: everything below HP).
  int32_t lend_max_priority = kHpPriority - 1;
  // Standby windows apply (a configuration's `standby:`; on in the built-in configuration). Off:
  // AddStandbyWindow refuses new ones, and stored ones (from a run with it on) are not handed to
  // the engine — as the simulator ignores jobs' windows under a configuration without it.
  bool standby = true;
  // false: Standby restores give borrowers Reclaim's grace_s, also when PUT /v1/config changes
  // it; true: the engine configuration's own standby_grace_s (a configuration's
  // `standby: {grace_s}`).
  bool standby_grace_own = false;
  // Called on the loop's thread with every decision of the engine as it is made (its times are
  // the engine's: seconds of the service's clock); none by default. For recording and tests.
  std::function<void(const EngineEvent&)> on_engine_event;
  // Where replicas' logs are kept (LogStore; `estuary serve`: DATA/logs); empty: not kept (GET
  // .../logs answers 404). logs_max_bytes: a replica's file is rotated at this size.
  std::string logs_dir;
  int64_t logs_max_bytes = 8 << 20;
};

enum class JobPhase : uint8_t { kPending, kRunning, kSucceeded, kFailed, kCancelled };
std::string_view JobPhaseName(JobPhase phase);

// What the API shows of a job.
struct JobView {
  uint64_t id = 0;
  std::string tenant;
  JobRequest request;
  JobPhase phase = JobPhase::kPending;
  int32_t bound_replicas = 0;    // replicas the engine has placed
  int32_t running_replicas = 0;  // replicas an agent reports running
  int32_t standby_replicas = 0;  // replicas in Standby (lending their GPUs)
  int32_t migrating_replicas = 0;  // replicas whose new instance is starting elsewhere
  int64_t submitted_ms = 0, running_ms = -1, ended_ms = -1;
  int32_t restarts = 0;          // times it was evicted whole after it had run
  std::string reason;            // why it waits (pending) or how it ended
  // Where its replicas are (GetJob only; ListJobs leaves it empty): each replica an agent was
  // told to run, its node, GPUs and state (starting, running, stopping, done).
  struct Where {
    int32_t replica = 0;
    std::string node;
    std::vector<int> gpus;
    std::string state;
  };
  std::vector<Where> where;
};

// A node as an agent registers it.
struct NodeRegistration {
  std::string name;
  int32_t gpus = 0;
  std::string gpu_model;  // empty: CPU-only
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  // Per plane: domain names from the top level down (e.g. {"data", {"az0", "spine0", "asw0"}}).
  std::vector<std::pair<std::string, std::vector<std::string>>> domains;
  std::string address;  // where its replicas are reached (host name or IP); empty: its name
};

struct NodeView {
  std::string name, agent, gpu_model, address;
  int32_t gpus = 0;
  int64_t cpu_milli = 0, memory_mib = 0;
  std::vector<std::pair<std::string, std::vector<std::string>>> domains;
  std::string state;          // ready | cordoned | evacuating | drained | failed
  int64_t gpu_milli_used = 0; // bound by the engine
  int64_t last_heartbeat_ms = 0;
};

// An order for a node agent. Orders to one agent are numbered (seq) and must be carried out in
// that order; a repeated order (same task, same op) is a no-op for the agent.
struct Order {
  // kEvict warns that the replica will be stopped at deadline_ms (a Reclaim's or a Standby
  // restore's grace period: time to checkpoint); its kStop follows then.
  // kStandby: the replica keeps its container and memory but leaves its GPUs (they are lent to
  // spot work); kResume: it takes them back (its borrowers were stopped first).
  // kMigrate: start a new instance of the replica on `node` (`gpus`) while the old one keeps
  // running on `from`; report it running (with its node), and the old one's kStop follows.
  enum class Op : uint8_t { kStart, kStop, kEvict, kStandby, kResume, kMigrate };
  uint64_t seq = 0;
  Op op = Op::kStart;
  std::string task;   // "<job id>-<replica>"
  // The instance of the replica it starts (start, migrate: a new one, never used before — also
  // across restarts of the service) or is for (the others). The agent names it in every report of
  // that instance, so that a late report of an instance the service no longer tracks (one on a
  // node it took for failed, or a move's abandoned one) is not taken for a later one's.
  uint64_t instance = 0;
  uint64_t job = 0;
  std::string node;
  std::vector<int> gpus;
  std::string from;        // migrate: where the old instance runs
  int64_t duration_s = 0;  // start, migrate: how long a fake process runs (0: until stopped)
  int64_t deadline_ms = 0; // evict: when the stop comes
  // start, migrate: what a real agent needs to run the replica (docs/agent.md).
  std::string tenant;
  int32_t replica = 0;        // its rank
  int32_t replicas = 0;       // the job's replicas bound when ordered (its world size)
  std::string master_addr;    // the address of the node of its lowest bound rank
  int32_t master_port = 0;    // kMasterPortBase + job id % kMasterPorts
  int32_t restart_count = 0;  // JobView::restarts
  std::string workload;       // the job's command, env, workdir and hooks (JSON; "{}": none)
  int64_t cpu_milli = 0, memory_mib = 0;  // the replica's limits
  int32_t gpu_milli = 1000;               // a shared GPU's share (1000: whole GPUs)
  std::string checkpoint_signal;  // start, migrate, evict: the job's (e.g. "SIGTERM")
};
// The rendezvous port of a job's rank 0: kMasterPortBase + job id % kMasterPorts.
inline constexpr int32_t kMasterPortBase = 29500;
inline constexpr int32_t kMasterPorts = 10000;

struct OrderBatch {
  uint64_t epoch = 0;  // changes when the service restarts: an agent then starts again from 0
  uint64_t last_seq = 0;
  std::vector<Order> orders;
};

// What an agent reports of an instance of a task: `instance` is the one its start (or migrate)
// order named. A report without one (0: an agent that predates instances) is matched by `node`
// instead: the node of the instance when a replica has two (during a migration); empty: the node
// the replica is told to run on.
struct TaskReport {
  // kStandby: told to enter Standby, it left its GPUs (its standby_enter hook succeeded);
  // kStandbyFailed: it could not (`reason`), and keeps them.
  enum class State : uint8_t { kRunning, kSucceeded, kFailed, kStopped, kStandby, kStandbyFailed };
  TaskReport() = default;
  TaskReport(std::string task_name, State s, std::string instance_node = {}, uint64_t of_instance = 0)
      : task(std::move(task_name)), state(s), node(std::move(instance_node)), instance(of_instance) {}
  std::string task;
  State state = State::kRunning;
  std::string node;
  uint64_t instance = 0;
  std::string reason;  // failed: how ("exit code 3", "signal 9 (Killed)", "out of memory", an OS error);
                       // standby-failed: why
};

class Service {
 public:
  // Opens the service over `store` (recovering its state; see the header comment). `store` and
  // `clock` must outlive the service. Fails on an unknown policy or an unreadable store.
  static StatusOr<std::unique_ptr<Service>> Open(Store* store, const Clock* clock, ServiceOptions options);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // ---- Jobs (tenants and admins; a tenant sees only its own jobs: NotFound otherwise) ----
  StatusOr<uint64_t> Submit(const Principal& who, JobRequest request);
  StatusOr<JobView> GetJob(const Principal& who, uint64_t id) const;
  std::vector<JobView> ListJobs(const Principal& who) const;
  StatusOr<JobView> Cancel(const Principal& who, uint64_t id);

  // Changes a job's min and max replicas (nullopt: unchanged), applied by the loop and stored
  // before this returns: a waiting job waits with the new bounds; a running one above the new max
  // shrinks (its surplus replicas get stop orders), and an elastic one may grow toward the new
  // max. InvalidArgument for bounds outside 1 <= min <= max <= 100000 or a min above the replicas
  // a running job holds; NotFound as GetJob; an ended job cannot change. With `wait` false the
  // change is queued for the loop and the job's view before it is returned (a test driving the
  // loop itself; the min-above-running check is then the engine's, and a refusal is not reported).
  StatusOr<JobView> Resize(const Principal& who, uint64_t id, std::optional<int32_t> min_replicas,
                           std::optional<int32_t> max_replicas, bool wait = true);

  // ---- Nodes (agents; an agent acts only for the nodes it registered) ----
  // Registers (or, for the same agent, re-registers unchanged) nodes. InvalidArgument for a bad
  // node; PermissionDenied when another agent owns the name.
  Status RegisterNodes(const Principal& agent, std::vector<NodeRegistration> nodes);
  // Stamps the agent's nodes (all of them when `nodes` is empty).
  Status Heartbeat(const Principal& agent, const std::vector<std::string>& nodes);
  // Task states from the agent; PermissionDenied (nothing applied) when a task runs on a node of
  // another agent; reports of tasks that run nowhere any more (repeats) are skipped. With
  // `durable` (the API's way) it returns once the loop has applied and stored them — an agent
  // may forget a report once it is acknowledged; without, once they are queued (tests that run
  // the loop themselves).
  Status Report(const Principal& agent, std::vector<TaskReport> reports, bool durable = true);
  // Output of a replica's instance on `node` (one of the agent's), `data` at byte `offset` of run
  // `run` (LogStore::Append); NotFound when the job is not known (any more) or logs are not kept.
  Status AppendLog(const Principal& agent, const std::string& task, const std::string& node, int64_t run, int64_t offset,
                   std::string_view data);
  // Up to `max` bytes of the log of `replica` of job `id` from `from`; NotFound for a job the
  // caller may not see (a tenant sees its own) or when logs are not kept; InvalidArgument for a
  // replica beyond the job's. `ended`: the job has ended (nothing more will come).
  struct LogRead {
    std::string data;
    int64_t next = 0;
    bool ended = false;
  };
  StatusOr<LogRead> ReadLog(const Principal& who, uint64_t id, int32_t replica, int64_t from, int64_t max) const;
  // Orders for the agent with seq > after, waiting up to wait_ms for the first one.
  OrderBatch WaitOrders(const Principal& agent, uint64_t epoch, uint64_t after, int64_t wait_ms);
  std::vector<NodeView> ListNodes() const;
  // An admin's action on a node, applied by the loop and stored before this returns:
  //   cordon    no new work (running work stays)      uncordon  ready again
  //   drain     cordon, and every task on it stops (its jobs start again elsewhere)
  //   evacuate  cordon, and its tasks migrate elsewhere, make-before-break (as Defrag's moves):
  //             "evacuating" until it holds no task (a task that cannot move now is planned for
  //             again once a minute while the cluster changes: Engine::Evacuate), then "cordoned"
  //             (the next cordon, uncordon, drain, fail or restore ends the evacuation)
  //   fail      down: every task on it stops (as when its heartbeats stop)
  //   restore   a failed or drained node is ready again
  // NotFound for an unknown node, InvalidArgument for an unknown action, Unavailable when the
  // loop does not apply it within 10 s. With `wait` false it only queues the action for the next
  // pass (callers that run the loop themselves, RunOnce).
  Status NodeAction(const Principal& admin, const std::string& node, const std::string& action, bool wait = true);

  // ---- Scheduler configuration (admin) ----
  // What an admin may change while the service runs (stored; it outlives restarts and wins over
  // the flags the service was started with). The placement policy is fixed at start.
  struct Config {
    std::string policy;
    int64_t grace_s = 60;
    bool absorb = true;
    int64_t heartbeat_timeout_s = 30;
    int64_t defrag_interval_s = 0;  // a defragmentation is planned this often (0: only on request)
    // The engine's whole configuration in use (what `--config` and the flags made of it, with the
    // changes above): GET /v1/config shows it as a history's `config` record (docs/history.md).
    EngineConfig engine;
  };
  Config GetConfig() const;
  struct ConfigChange {
    std::optional<int64_t> grace_s, heartbeat_timeout_s, defrag_interval_s;
    std::optional<bool> absorb;
  };
  // Applies the fields given (nullopt: unchanged). InvalidArgument for a value out of range
  // (grace_s 0..86400, heartbeat_timeout_s 1..86400, defrag_interval_s 0..604800).
  StatusOr<Config> SetConfig(const Principal& admin, const ConfigChange& change);

  // ---- Multi-tenant queues (issue 20; docs/fair-share.md) ----
  // The queues come from the configuration (`estuary serve --config`: its `queues:` and
  // `sharing:`, the scenario schema) and are changed by an admin (SetQueues, stored under
  // meta/queues: they outlive restarts and win over the configuration). With queues, every job
  // runs in a leaf queue: Submit checks its `queue` at once — a tenant that names none runs in
  // the one leaf it may use (a queue whose `tenants` lists it, or one under such a queue);
  // InvalidArgument for an unknown or inner queue or a missing one where the tenant may use
  // several; PermissionDenied for a queue the tenant is not mapped to or a priority above the
  // ceiling (`max_priority`) of its queue or an ancestor. Admins may submit to any queue.
  struct QueueView {
    QueueSpec spec;
    Engine::QueueFigures gpus;  // GPU milli (Engine::QueueStatus; waiting: parked jobs too)
  };
  struct QueuesView {
    std::vector<QueueView> queues;  // the tree's order (empty: no queues)
    SharingSpec sharing;
  };
  // Admins see every queue; a tenant the queues it may submit to and the queues above them.
  StatusOr<QueuesView> GetQueues(const Principal& who) const;
  // Replaces the queues (and, when given, how they share) — Engine::SetQueues, applied by the
  // loop and stored before this returns. InvalidArgument naming the queue and the field (a bad
  // tree, or a queue a job still runs or waits in that would go or get queues under it).
  StatusOr<QueuesView> SetQueues(const Principal& admin, std::vector<QueueSpec> queues, std::optional<SharingSpec> sharing);

  // The service's clock, in milliseconds (e.g. a standby window that starts now).
  int64_t NowMs() const;

  // ---- Defragmentation by live migration (admin) ----
  // Plans a defragmentation of the running work now (DefragAction: whole GPU nodes made free by
  // moving tasks) and starts its moves, make-before-break: each moved replica gets a kMigrate
  // order on its target; when the agent reports the new instance running, the old one gets its
  // kStop; a new instance that fails or is not reported running within 10 minutes is stopped and
  // the old one keeps running. Returns the moves planned (0 while earlier moves still run). With
  // `wait` false the request is only queued for the next pass (callers that run the loop
  // themselves, RunOnce) and 0 is returned.
  StatusOr<int64_t> Defrag(const Principal& admin, bool wait = true);

  // ---- Standby windows (SpotGPU): a running job lends the GPUs of some replicas for a while ----
  // From from_ms until to_ms, `replicas` of the job's replicas are in Standby (kStandby orders):
  // their GPUs run spot work (preemptible jobs below HP priority try lent GPUs first). The
  // restore begins grace_s before to_ms: borrowers in the way get kEvict, then kStop, and the
  // replicas kResume — back by to_ms. Windows of one job do not overlap; a window ends at to_ms,
  // when its job ends, or on Delete (its replicas resume as above). Stored before Add returns.
  struct StandbyWindowView {
    uint64_t id = 0, job = 0;
    std::string tenant;
    int64_t from_ms = 0, to_ms = 0;
    int32_t replicas = 0;
  };
  // InvalidArgument: replicas outside 1..the job's max, to_ms <= from_ms or <= now, a window
  // longer than 30 days, an overlap with another window of the job, an ended job, Standby off in
  // the service's configuration (ServiceOptions::standby). NotFound as GetJob.
  StatusOr<StandbyWindowView> AddStandbyWindow(const Principal& who, uint64_t job, int64_t from_ms, int64_t to_ms,
                                               int32_t replicas);
  std::vector<StandbyWindowView> ListStandbyWindows(const Principal& who) const;
  Status DeleteStandbyWindow(const Principal& who, uint64_t id);

  // ---- Why a job waits ----
  struct Explanation {
    JobPhase phase = JobPhase::kPending;
    std::string reason;         // the job's own reason (as GET shows it)
    bool fits_now = false;      // idle capacity holds its min replicas now (it starts next pass)
    bool reclaim_feasible = false;   // evicting preemptible work below its priority would make room
    int32_t victims = 0, victims_max_priority = 0;
    bool may_reclaim = false;   // its priority allows Reclaim (EngineConfig::preemptor_min_priority; HP by default)
    std::string shortfall;      // when even Reclaim cannot: what is missing
    std::vector<std::string> held_nodes;  // its reservation's nodes, if any
    // With queues (Engine::Explanation): the quota that holds it ("queue 'a' would hold 24 of its
    // limit of 16 GPUs"), whether its queue is owed capacity it takes back by Reclaim (whatever
    // its priority), and the queues that Reclaim would take it from.
    std::string quota;
    bool owed = false;
    std::vector<std::string> reclaim_from;
    std::string topology;  // Engine::Explanation::topology
    std::string planned;  // with backfill, the job planned for: "planned to start at T on D"
  };
  StatusOr<Explanation> Explain(const Principal& who, uint64_t id) const;

  // ---- Reservations: nodes held for one waiting job (id = the job's id) ----
  // A reservation holds nodes (ReserveAction: those with the least work running) so that no other
  // work starts there and the job starts as soon as they are free. It ends when the job starts or
  // ends, when it expires (ttl_s after it was made), or on Delete; it never outlives its purpose,
  // across restarts too. Stored before Reserve returns.
  struct ReservationView {
    uint64_t job = 0;
    std::string tenant;
    std::vector<std::string> nodes;
    int64_t created_ms = 0, expires_ms = 0;
  };
  StatusOr<ReservationView> Reserve(const Principal& who, uint64_t job, int64_t ttl_s);
  std::vector<ReservationView> ListReservations(const Principal& who) const;
  Status DeleteReservation(const Principal& who, uint64_t job);

  // The engine's ClusterState invariants, plus: every replica an agent was told to run (starting
  // or running) is bound by the engine exactly there, and no GPU is told to two replicas. OK or
  // the first violation in words (tests run it after every loop pass).
  Status CheckInvariants() const;
  // The earliest time (seconds of the service's clock) the engine has work due that no input
  // brings — a grace period's end, a restore, a move's deadline — if any. For callers that run
  // the loop themselves (RunOnce); REQUIRES: not concurrently with RunOnce.
  std::optional<int64_t> EngineNextDue() const;

  // The service's state over time: one sample every ServiceOptions::sample_period_ms, the last
  // ServiceOptions::samples_kept of them (oldest first).
  struct Sample {
    int64_t t_ms = 0;
    int64_t gpus = 0;               // GPUs of ready nodes
    double gpus_allocated = 0;      // GPUs bound by the engine (shared GPUs in fractions)
    int64_t pending = 0, running = 0;
  };
  std::vector<Sample> Samples() const;

  // Prometheus text exposition of the service's state and counters.
  std::string MetricsText() const;

  // One pass of the loop (see the header comment). Tests call it directly; Start runs it.
  void RunOnce();
  // Runs RunOnce on a thread: on every input and at least every cycle_period_ms. Stop joins it.
  void Start();
  void Stop();

 private:
  struct Impl;
  explicit Service(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace estuary
