// One engine, two drivers, widened (issue 18): a seeded random sequence of inputs — submissions of
// rigid, elastic and step jobs at spot, LP, dev and HP priorities (HP gangs that require one ASW,
// HP services with a Standby window), the jobs' ends, node failures and repairs, tenants'
// cancels and resizes, two defragmentation requests — with Reclaim, Absorb, Standby and Align on,
// driven (a) through the simulator (a scenario of listed jobs and events) and (b) through the
// live service (its loop run at each input time and whenever its engine has work due, the test
// playing the agent), yields the same decision log: every start, growth, shrink, eviction,
// requeue, Standby entry and restore, move started and completed, at the same second, with the
// same replicas. The jobs' ends are the simulator's (its work model decides when a job's work is
// done); the service hears of them as its agent's reports at those seconds, and of a moved
// replica's new instance as running 120 s after its order (the simulator executor's startup_s).
// The service's history of each run replays exactly (History.*), and its what-if is close.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "common/rng.h"
#include "engine/history.h"
#include "sim/history_scenario.h"
#include "server/service.h"
#include "sim/scenario.h"
#include "sim/simulate.h"
#include "store/sqlite_store.h"
#include "tests/testing/registrations.h"
#include "tools/service_cmds.h"

namespace estuary {
namespace {

class SecondsClock final : public Clock {
 public:
  SimTime Now() const override { return s; }
  int64_t NowMs() const override { return s * 1000; }
  SimTime s = 0;
};

struct RecordedJob {
  std::string name;
  int64_t submit_s = 0, duration_s = 0;
  int32_t min = 1, max = 1, step = 1, gpus = 1, priority = 0;
  bool preemptible = false;
  int64_t checkpoint_s = 0;
  bool in_one_asw = false;
  int64_t window_from_s = -1, window_to_s = -1;  // a Standby window of one replica (-1: none)
  std::string queue;       // its team's queue (the tenants' variant; empty: none)
  int64_t walltime_s = 0;  // its time limit (the tenants' variant; 0: none)
};

struct NodeChange {
  int64_t at_s = 0;
  std::string node;
  bool fail = true;
};

// A tenant's cancel or resize of a job (scenario `cancel_job` / `resize_job`; the service's Cancel
// and Resize).
struct JobChange {
  int64_t at_s = 0;
  std::string job;
  bool cancel = true;
  int32_t min = 0, max = 0;
  bool defrag = false;  // an admin's defragmentation request (no job)
};

// How the sequence is scheduled: the service's default configuration (kBase: Reclaim, Absorb,
// Standby, Align), or that plus what a shared cluster turns on (kTenants): three teams' queues
// under two orgs with fair share by weight and usage decaying with a half-life, holds for waiting
// gangs, EASY backfill with the jobs' walltimes, and the engine's own defragmentation every hour;
// or the shared cluster with what a platform team turns on against failures and long waits
// (kAssembling): survivor holds (hold_survivors), conservative backfill, and triggered
// defragmentation that assembles a gang's room (defrag's trigger_after_s with assemble); or the
// shared cluster's jobs under a configuration drawn from the seed (kDrawn, DrawnConfiguration).
enum class Variant { kBase, kTenants, kAssembling, kDrawn, kWithinQueue };

struct Recording {
  Variant variant = Variant::kBase;
  std::vector<RecordedJob> jobs;  // in submission order
  std::vector<NodeChange> nodes;  // in time order
  std::vector<JobChange> changes;  // in time order
};

// 1,000 jobs over ~55 hours on 16 nodes x 8 GPUs (4 ASWs; ~80% of its GPU-hours offered), and
// 12 node failures each repaired 1,800 s later: over 2,000 inputs with the jobs' ends.
Recording Record(uint64_t seed, Variant variant = Variant::kBase) {
  Rng rng(seed);
  Recording r;
  r.variant = variant;
  int64_t t = 0;
  for (int i = 0; i < 1000; ++i) {
    t += 1 + static_cast<int64_t>(rng.Uniform(399));
    RecordedJob j;
    j.name = "j" + std::to_string(i);
    j.submit_s = t;
    const uint64_t kind = rng.Uniform(100);
    if (kind < 35) {  // spot
      j.priority = 100;
      j.preemptible = true;
      j.checkpoint_s = 600;
      j.duration_s = 600 + static_cast<int64_t>(rng.Uniform(3000));
    } else if (kind < 60) {  // LP elastic, in steps of 2
      j.priority = 300;
      j.preemptible = true;
      j.checkpoint_s = 600;
      j.min = 2;
      j.max = 8;
      j.step = 2;
      j.duration_s = 1800 + static_cast<int64_t>(rng.Uniform(3600));
    } else if (kind < 75) {  // dev
      j.priority = 500;
      j.gpus = 1 + static_cast<int32_t>(rng.Uniform(2));
      j.duration_s = 900 + static_cast<int64_t>(rng.Uniform(2700));
    } else if (kind < 90) {  // HP training gangs of whole nodes, half of them within one ASW
      j.priority = 800;
      j.min = j.max = 2 + static_cast<int32_t>(rng.Uniform(2));
      j.gpus = 8;
      j.in_one_asw = rng.Uniform(2) == 0;
      j.duration_s = 1800 + static_cast<int64_t>(rng.Uniform(1800));
    } else {  // HP services that lend one replica for a while
      j.priority = 900;
      j.min = j.max = 2;
      j.gpus = 4;
      j.duration_s = 7200;
      j.window_from_s = t + 300 + static_cast<int64_t>(rng.Uniform(600));
      j.window_to_s = j.window_from_s + 1200 + static_cast<int64_t>(rng.Uniform(2400));
    }
    r.jobs.push_back(j);
  }
  for (int k = 0; k < 12; ++k) {
    const int64_t at = 1800 + static_cast<int64_t>(rng.Uniform(static_cast<uint64_t>(t - 3600)));
    char node[16];  // the generator's names: node0000000 ... node0000015
    std::snprintf(node, sizeof node, "node%07d", static_cast<int>(rng.Uniform(16)));
    r.nodes.push_back({at, "", true});
    r.nodes.back().node = node;
    r.nodes.push_back({at + 1800, node, false});
  }
  std::stable_sort(r.nodes.begin(), r.nodes.end(), [](const NodeChange& a, const NodeChange& b) { return a.at_s < b.at_s; });
  // Tenants' changes, from a stream of their own: 4% of the jobs are cancelled within an hour of
  // their submission (waiting or running), and a fifth of the elastic ones are resized to max 4
  // or 6 (min 2) 10 to 80 minutes after it.
  Rng changes(seed + 1000);
  for (const RecordedJob& j : r.jobs) {
    if (changes.Uniform(100) < 4) {
      r.changes.push_back({j.submit_s + 1 + static_cast<int64_t>(changes.Uniform(3600)), j.name, true, 0, 0});
    } else if (j.min == 2 && j.max == 8 && changes.Uniform(5) == 0) {
      r.changes.push_back({j.submit_s + 600 + static_cast<int64_t>(changes.Uniform(4200)), j.name, false, 2,
                           changes.Uniform(2) == 0 ? 4 : 6});
    }
  }
  // And an admin asks for a defragmentation twice (its moves are make-before-break).
  for (int k = 1; k <= 2; ++k) r.changes.push_back({t * k / 3 + static_cast<int64_t>(changes.Uniform(600)), "", false, 0, 0, true});
  std::stable_sort(r.changes.begin(), r.changes.end(), [](const JobChange& a, const JobChange& b) { return a.at_s < b.at_s; });
  // The tenants' variant, from a stream of its own (the rest of the sequence is the same): each
  // job is one team's (team-a1 busier than the others), and every job but a service states a
  // walltime it keeps (three times its duration).
  if (variant != Variant::kBase) {
    Rng teams(seed + 2000);
    for (RecordedJob& j : r.jobs) {
      const uint64_t u = teams.Uniform(10);
      j.queue = u < 5 ? "team-a1" : u < 7 ? "team-a2" : "team-b1";
      if (j.window_from_s < 0) j.walltime_s = 3 * j.duration_s;
    }
  }
  return r;
}

constexpr int64_t kHorizon = 400000;

// A scheduler configuration drawn from `seed` among the options the service takes
// (docs/schema.md): placement policy, queue order, Align, Reclaim's grace and victims and who may
// preempt, Absorb, Standby's lending, holds, EASY or conservative backfill, periodic or triggered
// defragmentation with assembly, survivor holds, and the sharing of the shared cluster's queues.
// (Not `pack`, which the service does not resolve, nor kube's victims, which need topology off.)
std::string DrawnConfiguration(uint64_t seed) {
  Rng rng(seed * 7907 + 5);
  const auto one_of = [&](const std::vector<const char*>& options) { return options[rng.Uniform(options.size())]; };
  const auto coin = [&](int percent) { return static_cast<int>(rng.Uniform(100)) < percent; };
  std::ostringstream c;
  c << "{name: live, policy: "
    << one_of({"best-fit", "dotprod", "gpu-clustering", "gpu-packing", "k8s-fit", "volcano-binpack", "kai-binpack"})
    << ", queue: " << one_of({"priority", "priority", "fifo"});
  if (coin(25)) c << ", align: false";
  c << ", preempt: {grace_s: " << one_of({"30", "60", "120"}) << ", victims: " << one_of({"estuary", "volcano"});
  if (coin(30)) c << ", preemptor_min_priority: 0";
  c << "}";
  if (coin(60)) c << ", absorb: true";
  if (coin(70)) c << ", standby: {grace_s: 60, lend_max_priority: " << one_of({"100", "300", "699"}) << "}";
  if (coin(40)) c << ", hold_survivors: true";
  if (coin(50)) {
    c << ", reserve: {after_s: " << one_of({"0", "600"}) << ", min_gpus: 16, replan_s: " << one_of({"60", "300"})
      << ", drain_after_s: " << one_of({"0", "1200"}) << "}";
  }
  c << ", backfill: " << one_of({"off", "easy", "conservative", "{mode: conservative, depth: 20}", "{mode: easy, interval_s: 120}"});
  switch (rng.Uniform(3)) {
    case 0: break;
    case 1: c << ", defrag: {interval_s: 3600}"; break;
    default: c << ", defrag: {interval_s: 7200, trigger_after_s: 900, assemble: true}"; break;
  }
  c << ",\n     queues: [{name: org-a, guarantee: {gpus: 80}, tenants: [t]},\n"
       "              {name: team-a1, parent: org-a, guarantee: {gpus: 48}, weight: 2},\n"
       "              {name: team-a2, parent: org-a, guarantee: {gpus: 32}, weight: 1},\n"
       "              {name: org-b, guarantee: {gpus: 48}, tenants: [t]},\n"
       "              {name: team-b1, parent: org-b, guarantee: {gpus: 48}, limit: {gpus: 96}}],\n"
       "     sharing: "
    << one_of({"{}", "{borrow: false}", "{reclaim: false}", "{weights: false, cooldown_s: 0, reborrow_s: 0}",
               "{usage_half_life_s: 7200}", "{reclaim_to: fair-share, budget_period_s: 300}", "{count_in_flight: false}"})
    << "}";
  return c.str();
}

std::string ScenarioYaml(const Recording& r, uint64_t seed) {
  std::ostringstream y;
  y << "name: one-engine\nduration_s: " << kHorizon << "\nseeds: [" << seed << "]\n"
    << "cluster: {generate: {total_gpus: 128, gpus_per_node: 8, nodes_per_asw_min: 4, nodes_per_asw_max: 4,\n"
       "  asws_per_spine: 2, spines_per_az: 2, rdma_pod_nodes: 8, seed: 3, models: \"H800:1:128:2048\"}}\n"
       "jobs:\n";
  for (const RecordedJob& j : r.jobs) {
    y << "  - {name: " << j.name << ", submit_s: " << j.submit_s << ", duration_s: " << j.duration_s
      << ", replicas: {min: " << j.min << ", max: " << j.max << ", step: " << j.step << "}, gpus: " << j.gpus
      << ", cpu_cores: 4, memory_gib: 16, priority: " << j.priority << ", preemptible: " << (j.preemptible ? "true" : "false")
      << ", checkpoint_interval_s: " << j.checkpoint_s;
    if (j.in_one_asw) y << ", plane: data, required_level: asw";
    if (j.window_from_s >= 0) y << ", standby: [{from_s: " << j.window_from_s << ", to_s: " << j.window_to_s << ", replicas: 1}]";
    if (!j.queue.empty()) y << ", queue: " << j.queue;
    if (j.walltime_s > 0) y << ", walltime_s: " << j.walltime_s;
    y << "}\n";
  }
  y << "events:\n";
  for (const NodeChange& n : r.nodes) y << "  - {at_s: " << n.at_s << ", " << (n.fail ? "fail_node: " : "repair_node: ") << n.node << "}\n";
  for (const JobChange& c : r.changes) {
    if (c.defrag) {
      y << "  - {at_s: " << c.at_s << ", defrag: true}\n";
      continue;
    }
    y << "  - {at_s: " << c.at_s << ", " << (c.cancel ? "cancel_job: " : "resize_job: ") << c.job;
    if (!c.cancel) y << ", min: " << c.min << ", max: " << c.max;
    y << "}\n";
  }
  if (r.variant == Variant::kDrawn) {
    y << "configurations:\n  - " << DrawnConfiguration(seed) << "\n";
    return y.str();
  }
  y << "configurations:\n  - {name: live, policy: best-fit, queue: priority, preempt: {grace_s: 60}, absorb: true,\n"
       "     standby: {grace_s: 60, lend_max_priority: 699}";
  if (r.variant != Variant::kBase) {
    // 128 GPUs: org a is guaranteed 80 (team-a1 48, team-a2 32), org b 48; weights 2:1 within a.
    y << ",\n     queues: [{name: org-a, guarantee: {gpus: 80}, tenants: [t]},\n"
         "              {name: team-a1, parent: org-a, guarantee: {gpus: 48}, weight: 2},\n"
         "              {name: team-a2, parent: org-a, guarantee: {gpus: 32}, weight: 1},\n"
         "              {name: org-b, guarantee: {gpus: 48}, tenants: [t]},\n"
         "              {name: team-b1, parent: org-b, guarantee: {gpus: 48}, limit: {gpus: "
      << (r.variant == Variant::kWithinQueue ? "48}}],\n     sharing: {usage_half_life_s: 7200, within_queue: true},\n"
                                             : "96}}],\n     sharing: {usage_half_life_s: 7200},\n")
      << "     reserve: {after_s: 600, min_gpus: 16},\n";
    if (r.variant == Variant::kAssembling) {
      y << "     backfill: {mode: conservative, depth: 20}, hold_survivors: true,\n"
           "     defrag: {interval_s: 3600, trigger_after_s: 900, assemble: true}";
    } else {
      y << "     backfill: easy,\n     defrag: {interval_s: 3600}";
    }
  }
  y << "}\n";
  return y.str();
}

// A decision as "TIME JOB KIND REPLICAS DETAIL", in the simulator's job-event words.
using Log = std::vector<std::string>;

std::string Line(int64_t t, const std::string& job, const std::string& kind, int32_t replicas, const std::string& detail) {
  return std::to_string(t) + " " + job + " " + kind + " " + std::to_string(replicas) + " " + detail;
}

// The simulator's decisions, and its jobs' ends (time -> jobs).
Log SimulatorLog(const Scenario& sc, const ClusterState& cluster, std::multimap<int64_t, std::string>* ends,
                 std::set<int64_t>* times) {
  auto r = RunScenario(sc, cluster, sc.configurations[0], sc.seeds[0], /*check_invariants=*/true, /*record_events=*/true);
  EXPECT_TRUE(r.ok()) << r.status().message();
  Log log;
  if (!r.ok()) return log;
  for (const SimJobEvent& e : r->job_events) {
    times->insert(e.time);
    if (e.kind == "finish") {
      ends->emplace(e.time, e.job);
      continue;
    }
    if (e.kind == "cancel") continue;  // the tenant's input, not a decision
    log.push_back(Line(e.time, e.job, e.kind, e.replicas, e.detail));
  }
  return log;
}

// How the service runs (the history tests vary it; the same-decision tests take the defaults).
struct LiveRun {
  std::string policy;  // the placement policy (empty: the configuration's)
  int64_t compact_min_jobs = -1;  // ServiceOptions::compact_min_jobs (checked every second)
  int64_t restart_at_s = -1;      // the service is closed and opened again on its store then
  std::vector<std::string>* observed = nullptr;    // EventLine of every event it reported
  std::vector<HistoryRecord>* history = nullptr;   // its stored history, read after the run
};

// The history records stored under hist/ in `store`, in order.
std::vector<HistoryRecord> StoredHistory(Store& store) {
  std::vector<HistoryRecord> out;
  EXPECT_TRUE(store.Scan("hist/", [&](std::string_view, std::string_view v) {
                 auto r = HistoryRecordFromJson(nlohmann::json::parse(v));
                 EXPECT_TRUE(r.ok()) << r.status().message();
                 if (r.ok()) out.push_back(*std::move(r));
                 return true;
               }).ok());
  return out;
}

// The service's decisions under the same inputs at the same seconds.
// `config`: the scenario's configuration, which the service takes as `estuary serve --config`
// would (ApplySchedulerConfig).
Log ServiceLog(const Recording& rec, const ClusterState& cluster, const SchedulerConfig& config, uint64_t seed,
               const std::multimap<int64_t, std::string>& ends, std::set<int64_t> times, const LiveRun& run = {}) {
  char tmpl[] = "/tmp/estuary-one-engine-XXXXXX";
  EXPECT_NE(mkdtemp(tmpl), nullptr);
  Log log;
  {
    auto store = SqliteStore::Open(tmpl, SqliteOptions{true});
    EXPECT_TRUE(store.ok());
    SecondsClock clock;
    std::map<uint64_t, std::string> name_of;  // service job id -> recorded name
    ServiceOptions o;
    const Status applied = ApplySchedulerConfig(config, "one-engine.yaml", &o);
    EXPECT_TRUE(applied.ok()) << applied.message();
    if (!run.policy.empty()) o.policy = run.policy;
    o.seed = seed;
    o.heartbeat_timeout_ms = int64_t{1} << 50;
    o.compact_min_jobs = run.compact_min_jobs;
    o.compact_check_ms = 1000;
    o.on_engine_event = [&](const EngineEvent& e) {
      if (run.observed) run.observed->push_back(EventLine(e));
      const std::string& job = name_of.at(e.job);
      switch (e.kind) {
        case EngineEvent::Kind::kStarted: log.push_back(Line(e.t, job, "start", e.replicas, e.detail)); break;
        case EngineEvent::Kind::kGrown: log.push_back(Line(e.t, job, "grow", e.replicas, "")); break;
        // The simulator's words: a shrink or an eviction that is not a failure, a resize or a
        // Standby restore is a "reclaim" (by priority, by a queue, for a fair share).
        case EngineEvent::Kind::kShrunk:
          log.push_back(Line(e.t, job, "shrink", e.replicas,
                             e.detail == "node failed" ? "failure" : e.detail == "resized" ? "resized" : "reclaim"));
          break;
        case EngineEvent::Kind::kReturned:
          if (e.never) break;
          if (e.detail == "node failed") log.push_back(Line(e.t, job, "requeue", 0, ""));
          else log.push_back(Line(e.t, job, "evict", 0, e.detail == "standby restore" ? "restore" : "reclaim"));
          break;
        case EngineEvent::Kind::kStandby: log.push_back(Line(e.t, job, "standby", e.replicas, e.detail)); break;
        case EngineEvent::Kind::kRestored: log.push_back(Line(e.t, job, "restore", e.replicas, e.detail)); break;
        case EngineEvent::Kind::kReclaim: break;  // the simulator logs what it evicts, not the decision
        case EngineEvent::Kind::kMoveStarted: log.push_back(Line(e.t, job, "migrate-start", e.replicas, e.detail)); break;
        case EngineEvent::Kind::kMoved: log.push_back(Line(e.t, job, "migrate", e.replicas, e.detail)); break;
        case EngineEvent::Kind::kMoveAborted: log.push_back(Line(e.t, job, "migrate-abort", e.replicas, e.detail)); break;
        case EngineEvent::Kind::kMoveCancelled: log.push_back(Line(e.t, job, "migrate-cancel", e.replicas, e.detail)); break;
        default: log.push_back(Line(e.t, job, EngineEventKindName(e.kind), e.replicas, e.detail)); break;
      }
    };
    auto opened = Service::Open(store->get(), &clock, o);
    EXPECT_TRUE(opened.ok());
    std::unique_ptr<Service> service = std::move(*opened);
    const Principal agent{Role::kAgent, "agent"}, tenant{Role::kTenant, "t"}, admin{Role::kAdmin, "ops"};
    const std::vector<NodeRegistration> nodes = testing::RegistrationsOf(cluster);
    EXPECT_TRUE(service->RegisterNodes(agent, nodes).ok());
    service->RunOnce();
    std::map<std::string, uint64_t> id_of;
    std::map<uint64_t, std::map<std::string, std::string>> running;  // job -> task -> node the agent runs it on
    // A move's new instance is ready (reported running on its node) 120 s after its order: the
    // engine executor's startup time in the simulator (MigrationOptions::startup_s).
    struct Ready {
      uint64_t job;
      std::string task, node;
    };
    std::multimap<int64_t, Ready> ready;
    for (const RecordedJob& j : rec.jobs) times.insert(j.submit_s);
    for (const NodeChange& n : rec.nodes) times.insert(n.at_s);
    for (const JobChange& c : rec.changes) times.insert(c.at_s);
    for (const RecordedJob& j : rec.jobs) {
      if (j.window_from_s < 0) continue;
      times.insert(j.window_from_s);
      times.insert(std::max(j.window_from_s, j.window_to_s - 60));
    }
    size_t next_job = 0, next_node = 0, next_change = 0;
    uint64_t epoch = 0, after = 0;
    if (run.restart_at_s >= 0) times.insert(run.restart_at_s);
    while (!times.empty() && *times.begin() < kHorizon) {
      const int64_t t = *times.begin();
      times.erase(times.begin());
      clock.s = t;
      if (t == run.restart_at_s) {  // closed and opened again: a new engine, a new history segment
        service.reset();
        auto again = Service::Open(store->get(), &clock, o);
        EXPECT_TRUE(again.ok()) << again.status().message();
        if (!again.ok()) return log;
        service = std::move(*again);
      }
      Service& sv = *service;
      // Moves whose new instance is ready now, then in the simulator's order: the jobs' ends, node
      // events, tenants' and admins' changes, arrivals.
      std::vector<TaskReport> moved;
      for (auto [it, last] = ready.equal_range(t); it != last; ++it) {
        const auto job = running.find(it->second.job);
        if (job == running.end() || !job->second.count(it->second.task)) continue;  // it ended meanwhile
        job->second[it->second.task] = it->second.node;
        moved.push_back({it->second.task, TaskReport::State::kRunning, it->second.node});
      }
      if (!moved.empty()) {
        EXPECT_TRUE(sv.Report(agent, moved, false).ok());
      }
      std::vector<TaskReport> done;
      for (auto [it, last] = ends.equal_range(t); it != last; ++it) {
        const uint64_t id = id_of.at(it->second);
        for (const auto& [task, node] : running[id]) done.push_back({task, TaskReport::State::kSucceeded});
        running.erase(id);
      }
      if (!done.empty()) {
        EXPECT_TRUE(sv.Report(agent, done, false).ok());
      }
      for (; next_node < rec.nodes.size() && rec.nodes[next_node].at_s == t; ++next_node) {
        EXPECT_TRUE(sv.NodeAction(admin, rec.nodes[next_node].node, rec.nodes[next_node].fail ? "fail" : "restore", false).ok());
      }
      // Then the tenants' changes (one of a job not submitted yet or ended does nothing, as in the
      // simulator).
      for (; next_change < rec.changes.size() && rec.changes[next_change].at_s == t; ++next_change) {
        const JobChange& c = rec.changes[next_change];
        if (c.defrag) {
          EXPECT_TRUE(sv.Defrag(admin, /*wait=*/false).ok());
          continue;
        }
        const auto id = id_of.find(c.job);
        if (id == id_of.end()) continue;
        if (c.cancel) {
          (void)sv.Cancel(tenant, id->second);
          running.erase(id->second);  // its replicas stop at once (their stop orders are answered below)
        } else {
          (void)sv.Resize(tenant, id->second, c.min, c.max, /*wait=*/false);
        }
      }
      for (; next_job < rec.jobs.size() && rec.jobs[next_job].submit_s == t; ++next_job) {
        const RecordedJob& j = rec.jobs[next_job];
        JobRequest r;
        r.name = j.name;
        r.min_replicas = j.min;
        r.max_replicas = j.max;
        r.step = j.step;
        r.gpus = j.gpus;
        r.cpu_milli = 4000;
        r.memory_mib = 16384;
        r.priority = j.priority;
        r.preemptible = j.preemptible;
        r.checkpoint_interval_s = j.checkpoint_s;
        r.queue = j.queue;
        r.walltime_s = j.walltime_s;
        if (j.in_one_asw) {
          r.plane = "data";
          r.required_level = "asw";
        }
        auto id = sv.Submit(tenant, r);
        EXPECT_TRUE(id.ok()) << id.status().message();
        if (!id.ok()) continue;
        id_of[j.name] = *id;
        name_of[*id] = j.name;
        if (j.window_from_s >= 0) {
          // Without Standby in the configuration the service refuses the window (the simulator
          // ignores a job's windows then).
          const auto w = sv.AddStandbyWindow(tenant, *id, j.window_from_s * 1000, j.window_to_s * 1000, 1);
          if (config.standby) EXPECT_TRUE(w.ok()) << w.status().message();
          else EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
        }
      }
      // The agent answers at once: new instances run, stopped ones are gone, a replica told to
      // enter Standby left its GPUs — and a replica the engine placed again is started once its
      // old instance stopped, lent GPUs are used (another pass at t: extra cycles with no new
      // input change nothing).
      for (bool again = true; again;) {
        sv.RunOnce();
        const Status inv = sv.CheckInvariants();
        EXPECT_TRUE(inv.ok()) << "at " << t << ": " << inv.message();
        if (!inv.ok()) return log;
        // No queue above its limit after any cycle (the limits here are never lowered).
        const auto queues = sv.GetQueues(admin);
        EXPECT_TRUE(queues.ok());
        for (const Service::QueueView& q : queues.ok() ? queues->queues : std::vector<Service::QueueView>{}) {
          if (q.gpus.limit != kNoLimit) {
            EXPECT_LE(q.gpus.held, q.gpus.limit) << "queue " << q.spec.name << " at " << t;
          }
        }
        const OrderBatch b = sv.WaitOrders(agent, epoch, after, 0);
        epoch = b.epoch;
        after = b.last_seq;
        std::vector<TaskReport> reports;
        again = false;
        for (const Order& ord : b.orders) {
          if (ord.op == Order::Op::kStart) {
            running[ord.job][ord.task] = ord.node;
            reports.push_back({ord.task, TaskReport::State::kRunning});
          } else if (ord.op == Order::Op::kStandby) {  // it left its GPUs: the engine lends them
            reports.push_back({ord.task, TaskReport::State::kStandby});
            again = true;
          } else if (ord.op == Order::Op::kMigrate) {
            ready.emplace(t + 120, Ready{ord.job, ord.task, ord.node});
            times.insert(t + 120);
          } else if (ord.op == Order::Op::kStop) {
            const auto job = running.find(ord.job);
            const bool other_instance = job != running.end() && job->second.count(ord.task) &&
                                        !ord.node.empty() && job->second.at(ord.task) != ord.node;
            if (other_instance) {  // a moved replica's old instance (or a given-up move's new one)
              reports.push_back({ord.task, TaskReport::State::kStopped, ord.node});
            } else {
              if (job != running.end()) job->second.erase(ord.task);
              reports.push_back({ord.task, TaskReport::State::kStopped});
            }
            again = true;
          }
        }
        if (!reports.empty()) {
          EXPECT_TRUE(sv.Report(agent, reports, false).ok());
        }
      }
      if (const std::optional<int64_t> due = sv.EngineNextDue(); due && *due > t) times.insert(*due);
      // Compaction is looked at every second of the service's clock: one more pass a second on.
      if (run.compact_min_jobs >= 0 && !times.empty() && *times.begin() > t + 1) times.insert(t + 1);
    }
    service.reset();
    if (run.history) *run.history = StoredHistory(**store);
  }
  std::filesystem::remove_all(tmpl);
  return log;
}

// A seed's sequence, run through the simulator: the recording, its scenario and cluster, the
// simulator's decision log, and the jobs' ends and times the service is driven at. False (after a
// test failure) when the scenario does not load.
struct Simulated {
  Recording rec;
  Scenario sc;
  ClusterState cluster;
  std::multimap<int64_t, std::string> ends;
  std::set<int64_t> times;
  Log sim;
};
bool Simulate(uint64_t seed, Simulated& s, Variant variant = Variant::kBase) {
  s.rec = Record(seed, variant);
  auto sc = ParseScenario(ScenarioYaml(s.rec, seed), "one-engine.yaml");
  if (!sc.ok()) {
    ADD_FAILURE() << sc.status().message();
    return false;
  }
  s.sc = *std::move(sc);
  auto cluster = LoadScenarioCluster(s.sc);
  if (!cluster.ok()) {
    ADD_FAILURE() << cluster.status().message();
    return false;
  }
  s.cluster = *std::move(cluster);
  s.sim = SimulatorLog(s.sc, s.cluster, &s.ends, &s.times);
  return true;
}

// `expect_moves`: the defragmentation requests of this seed find replicas worth moving.
void ExpectSameDecisions(uint64_t seed, bool expect_moves = false, Variant variant = Variant::kBase) {
  Simulated s;
  if (!Simulate(seed, s, variant)) return;
  const Recording& rec = s.rec;
  const std::multimap<int64_t, std::string>& ends = s.ends;
  const Log& sim = s.sim;
  // The sequence exercises what it claims to: every kind of decision happens.
  std::map<std::string, int> kinds;
  for (const std::string& line : sim) {
    const size_t a = line.find(' ', line.find(' ') + 1) + 1;
    ++kinds[line.substr(a, line.find(' ', a) - a)];
  }
  // (A drawn configuration may turn some off: then only that jobs start.)
  for (const char* k : {"start", "grow", "shrink", "evict", "requeue", "standby", "restore"}) {
    if (variant == Variant::kDrawn && std::string(k) != "start") continue;
    EXPECT_GT(kinds[k], 0) << "no '" << k << "' decision with seed " << seed;
  }
  size_t cancels = 0;
  for (const JobChange& c : rec.changes) cancels += c.cancel;
  EXPECT_GE(ends.size() + cancels, rec.jobs.size()) << "every job ends within the horizon, or is cancelled";
  EXPECT_GT(cancels, 0u);
  if (expect_moves) {
    EXPECT_GT(kinds["migrate-start"], 0) << "no move started with seed " << seed;
    EXPECT_EQ(kinds["migrate"], kinds["migrate-start"]) << "a move did not complete with seed " << seed;
  }
  EXPECT_TRUE(std::any_of(sim.begin(), sim.end(), [](const std::string& l) { return l.ends_with(" resized"); }))
      << "no resize shrank a running job with seed " << seed;
  const Log live = ServiceLog(rec, s.cluster, s.sc.configurations[0], seed, ends, s.times);
  if (std::getenv("ONE_ENGINE_DUMP") != nullptr) {
    std::ofstream a("/tmp/one_sim_" + std::to_string(seed) + ".txt"), b("/tmp/one_svc_" + std::to_string(seed) + ".txt");
    for (const std::string& l : sim) a << l << "\n";
    for (const auto& [t, j] : ends) a << t << " " << j << " finish\n";
    for (const std::string& l : live) b << l << "\n";
  }
  for (size_t i = 0; i < std::min(sim.size(), live.size()); ++i) {
    if (sim[i] != live[i]) {
      ADD_FAILURE() << "seed " << seed << ": first difference at decision " << i << " of " << sim.size() << ":\n  simulator: " << sim[i]
                    << "\n  service:   " << live[i] << (variant == Variant::kDrawn ? "\n  configuration: " + DrawnConfiguration(seed) : "");
      return;
    }
  }
  EXPECT_EQ(live.size(), sim.size());
}

#ifndef ESTUARY_ONE_ENGINE_LONG
// The service rebuilding its engine whenever it may (it knows more than 20 jobs and twice those
// it still runs or queues, checked every second: ~60 rebuilds a run of seeds 1-3) still decides
// exactly as the simulator, which never rebuilds (Engine::Know, Engine::Inherit).
void ExpectSameDecisionsCompacting(uint64_t seed, Variant variant = Variant::kBase) {
  Simulated s;
  if (!Simulate(seed, s, variant)) return;
  LiveRun run;
  run.compact_min_jobs = 20;
  std::vector<HistoryRecord> history;
  run.history = &history;
  const Log live = ServiceLog(s.rec, s.cluster, s.sc.configurations[0], seed, s.ends, s.times, run);
  const auto segments = std::count_if(history.begin(), history.end(), [](const HistoryRecord& r) {
    return std::holds_alternative<HistorySegment>(r.what);
  });
  EXPECT_GE(segments, 20) << "the engine was rebuilt " << segments - 1 << " times only";
  for (size_t i = 0; i < std::min(s.sim.size(), live.size()); ++i) {
    if (s.sim[i] != live[i]) {
      ADD_FAILURE() << "seed " << seed << ": first difference at decision " << i << " of " << s.sim.size()
                    << ":\n  simulator: " << s.sim[i] << "\n  service:   " << live[i];
      return;
    }
  }
  EXPECT_EQ(live.size(), s.sim.size());
}

// A service reopened on its store at `restart_s`: its first difference from the simulator's
// decisions (empty: none).
std::string FirstDifferenceAfterARestart(uint64_t seed, int64_t restart_s, Variant variant = Variant::kBase) {
  Simulated s;
  if (!Simulate(seed, s, variant)) return "no simulation";
  LiveRun run;
  run.restart_at_s = restart_s;
  const Log live = ServiceLog(s.rec, s.cluster, s.sc.configurations[0], seed, s.ends, s.times, run);
  for (size_t i = 0; i < std::min(s.sim.size(), live.size()); ++i) {
    if (s.sim[i] != live[i]) return "decision " + std::to_string(i) + ": simulator " + s.sim[i] + ", service " + live[i];
  }
  return live.size() == s.sim.size() ? "" : "the service made " + std::to_string(live.size()) + " decisions";
}

// A reopened service tells its engine the jobs in service id order before it adopts the running
// ones and queues the rest (Engine::Know), the order the engine before knew them in: ties among
// jobs fall as they would have. Seed 3 reopened at 150,000 s: before, an eviction went to an
// equal job of another id at 151,110 s (j754 for j753).
TEST(OneEngine, AReopenedServiceKnowsItsJobsInTheirOrderSoTiesFallAsBeforeSeed3) {
  EXPECT_EQ(FirstDifferenceAfterARestart(3, 150000), "");
}

// A reopened service goes on from what its engine knew beyond its inputs (Engine::Carried, stored
// as it changes: docs/service.md, "Durability and recovery"): the waiting jobs are queued again in
// the order they waited in, and each running job's current run counts from when it started (its
// cost as a victim). Before: seed 6 reopened at 90,000 s started j434 where the simulator starts
// j448 (the queue in service id order), seed 3 at 180,000 s started j891 for j893, and seed 5 at
// 120,000 s shrank j581 where the simulator shrinks j594 (victims costed from their first run).
// Seed 5 at 180,000 s did not open again at all (a task record its retired job left behind).
// Seed 1 at 150,000 s decided again a Reclaim in its grace period (its victim shrunk at 150,060 s
// instead of 150,009 s), and seed 8 at 10,000 s a Standby restore in its grace period (its
// borrower evicted at 10,060 s instead of 10,021 s). Seed 2 at 80,000 s started j386 where the
// simulator starts j388 (a waiting job resized goes to the back of the queue: its new place was
// not stored).
TEST(OneEngine, AReopenedServiceGoesOnFromWhatItsEngineKnewSeeds1To8) {
  EXPECT_EQ(FirstDifferenceAfterARestart(6, 90000), "");
  EXPECT_EQ(FirstDifferenceAfterARestart(3, 180000), "");
  EXPECT_EQ(FirstDifferenceAfterARestart(5, 120000), "");
  EXPECT_EQ(FirstDifferenceAfterARestart(5, 180000), "");
  EXPECT_EQ(FirstDifferenceAfterARestart(1, 150000), "");
  EXPECT_EQ(FirstDifferenceAfterARestart(8, 10000), "");
  EXPECT_EQ(FirstDifferenceAfterARestart(2, 80000), "");
}

// The shared cluster's sequence (Variant::kTenants) reopened: the engine's schedule (the next
// periodic defragmentation and its cooldown, the next renewal of holds, the next backfill
// planning: `meta/schedule`) and each waiting job's hold and backfill plan are stored as they
// change and taken back (Engine::RestoreCarried). Before, seeds 1-4 reopened at 30,000 ...
// 180,000 s were exact in 12 of 24 runs: seed 1 at 60,000 s planned a defragmentation at once
// (a new engine's periodic plan came due at its first cycle), seed 4 at 60,000 s backfilled
// j317 at 60,750 s instead of 60,764 s (planned at the new engine's first cycle), and seed 2 at
// 90,000 s and at 150,000 s and seed 4 at 90,000 s started jobs at the restart on nodes held for
// others (holds were made again only at their next renewal).
TEST(OneEngine, AReopenedSharedClusterGoesOnWithItsHoldsBackfillPlansAndSchedule) {
  for (const auto& [seed, t] : std::vector<std::pair<uint64_t, int64_t>>{{1, 60000}, {4, 60000}, {2, 90000}, {2, 150000}, {4, 90000}}) {
    EXPECT_EQ(FirstDifferenceAfterARestart(seed, t, Variant::kTenants), "") << "seed " << seed << " reopened at " << t;
  }
}

TEST(OneEngine, AServiceThatRebuildsItsEngineWheneverItMayDecidesAsTheSimulatorSeeds1To3) {
  for (uint64_t seed : {1, 2, 3}) ExpectSameDecisionsCompacting(seed);
}
// The same sequence on a shared cluster (Variant::kTenants: three teams' queues with fair share
// by weight and decaying usage, holds for waiting gangs, EASY backfill, defragmentation every
// hour), the service configured from the scenario's configuration as `estuary serve --config`
// is. Each seed here differed before one of the engine's fixes (first difference):
// - seed 1, 67,336 s: a backfill plan made after the queue's pass could start its job at once;
//   the service's next pass at the same second started it, the simulator 30 s later (a cycle
//   now starts a job planned to start now);
// - seed 3, 146,067 s: a Reclaim's plan replaced its job's backfill hold after the queue's pass,
//   leaving nodes free that only the service's next pass used (a cycle's actions now run again
//   when a hold released after the queue's pass leaves a node free);
// - seed 2, 83,944 s: a job that a queue's Reclaim evicted (kept from borrowing: only the first,
//   fair-share pass tries it) could start once the Reclaim's own job started in the second pass
//   (the passes now run again then);
// - seed 6, 103,332 s and seed 7, 144,750 s: backfill planned at the first cycle after its
//   interval, which the service runs sooner than the simulator (NextDue now names the planning
//   while a job waits);
// - and with time-based fairness a queue's decayed usage grew by a rectangle per refresh, so it
//   depended on how often the driver ran cycles (now the exact integral, rolled forward only
//   when what the queues hold changes: EngineQueues.TimeBasedFairnessCountsUsageExactly...).
TEST(OneEngine, ASharedClusterWithQueuesHoldsBackfillAndDefragmentationDecidesAsTheSimulator) {
  for (uint64_t seed : {1, 2, 3, 6, 7}) ExpectSameDecisions(seed, false, Variant::kTenants);
}
// The same with preemption within a queue (Variant::kWithinQueue, sharing.within_queue), team-b1
// limited to its guarantee (48 GPUs): its HP jobs at that limit evict its lower-priority work.
TEST(OneEngine, ASharedClusterWithPreemptionWithinQueuesDecidesAsTheSimulator) {
  for (uint64_t seed : {1, 2, 3}) ExpectSameDecisions(seed, false, Variant::kWithinQueue);
}
// The same reopened in the grace period of a Reclaim within a queue (its victims, its held nodes
// and the room held for its job carried): seed 3 at 9,800 s (j45's from 9,797 s), 152,530 s
// (j766's from 152,513 s; j762 runs there at ranks 2..7 of a max lowered to 6, which the reopened
// service adopts), seed 1 at 20,800 s (j111's from 20,786 s), seed 2 at 129,100 s (j633's from
// 129,085 s).
TEST(OneEngine, AServiceReopenedWhileAJobPreemptsWithinItsQueueGoesOnAsTheSimulator) {
  for (const auto& [seed, t] : std::vector<std::pair<uint64_t, int64_t>>{{3, 9800}, {3, 152530}, {1, 20800}, {2, 129100}}) {
    EXPECT_EQ(FirstDifferenceAfterARestart(seed, t, Variant::kWithinQueue), "") << "seed " << seed << " reopened at " << t;
  }
}
// The shared cluster with survivor holds, conservative backfill and assembled rooms for gangs
// that waited (Variant::kAssembling). Before, the service's configuration dropped
// `defrag: {assemble: true}` (a second copy of the simulator's mapping left it at the engine's
// default): first difference at decision 87 (seed 1), 20 (seed 2) and 92 (seed 3), each an
// assembly's migration the service did not make (now DefragConfig::ToEngine, for both).
TEST(OneEngine, ASharedClusterWithSurvivorHoldsConservativeBackfillAndAssemblyDecidesAsTheSimulator) {
  for (uint64_t seed : {1, 2, 3, 5}) ExpectSameDecisions(seed, false, Variant::kAssembling);
}
// The same with the service rebuilding its engine whenever it may. Before (first difference):
// - seed 7 at decision 484 (a Reclaim's victim at 48,311 s, not 48,341 s): a rebuilt engine did
//   not know which job held the assembled hold (one at a time), so a trigger that came due
//   assembled for another job, whose hold then changed a Reclaim (now CarriedJob::assembled);
//   seeds 4 and 5 too;
// - seeds 6 and 8 at decisions 1570 and 1273 (an admin's defragmentation moved another task of
//   the same node): the planner's ejections followed the node's bind order, which a rebuilt
//   engine does not keep (now task id order: DefragTest.APlanDoesNotDependOnTheOrder...);
// - seed 19 at decision 973 (a rebalance decided at 82,364 s, not 82,380 s): a rebalance planned
//   for a job kept from borrowing that could not start, its plan was refused because idle GPUs
//   could hold the job, and that refusal was kept although Absorb then took those GPUs (now such
//   a job is passed over, EngineQueues.AJobKeptFromBorrowingWithoutRoomInItsGuarantee..., and an
//   idle refusal holds only while the state is unchanged: Engine::RefusalEpoch).
TEST(OneEngine, ASharedClusterWithAssemblyWhoseServiceRebuildsItsEngineWheneverItMayDecidesAsTheSimulator) {
  for (uint64_t seed : {6, 7, 8, 19}) ExpectSameDecisionsCompacting(seed, Variant::kAssembling);
}
// The shared cluster's sequence with the service rebuilding its engine whenever it may, checked
// every second, so that it runs a cycle every second where the simulator runs one at its events
// and at NextDue. Before (first difference):
// - seed 2 at decision 782 (j365 started at 82,363 s, not 82,388 s) and seed 3 at 1414: a
//   queue's cooldown ending and a job's no-borrow period ending change what a cycle decides, but
//   NextDue did not name them (now it does while jobs wait);
// - seed 1 at 1157: a Standby restore short of lent CPU evicted the borrower bound last on the
//   node, and a rebuilt engine binds in job order (now the one whose run started last:
//   Standby.TheNewestBorrowersAreThoseWhoseRunStartedLastWhateverOrderTheyWereBoundIn).
// - seed 4 at decision 538 (j317 backfilled at 60,751 s, not 60,764 s): the head backfill
//   planned for started after backfill's action (at 60,600 s, a renewal of the reserve action's
//   holds), and only the next cycle planned for the next head — at once in the service, 14 s
//   later in the simulator (a cycle now runs its actions again when that happens).
// - seed 5 at 1681 (j922 backfilled at 185,425 s, not 185,578 s): a rebuilt engine took the
//   `reserve` action's hold on its planned head for the plan's own, released it at the next
//   planning and backfilled around the new plan (CarriedJob::planned_holds now says whose it is).
// Seed 3 differed for the same cause as seed 2.
TEST(OneEngine, ASharedClusterWhoseServiceRebuildsItsEngineWheneverItMayDecidesAsTheSimulator) {
  for (uint64_t seed : {1, 2, 5}) ExpectSameDecisionsCompacting(seed, Variant::kTenants);
}
// The same, seeds 4 and 8. Before (first difference):
// - seed 4 at decision 923 (j501 shrunk for a Reclaim at 100,874 s): a job kept from borrowing
//   whose leaf had no room left within its guarantee was refused a Reclaim as "idle capacity could
//   hold it, but placement did not" (it may not start there); Absorb then grew another job into
//   those GPUs, and the next cycle's Reclaim found them gone. ReclaimQueued now passes over such a
//   job, as Rebalance did.
// - seed 8, with that, at 1858 (a Reclaim 4 s before the simulator's): the budgets were offered
//   the victims by C as of now, which a checkpoint sets back to 0, so a Reclaim refused at
//   192,795 s was feasible at 192,796 s with nothing else changed (now by C as of the budget
//   time, a multiple of 60 s that NextDue names while jobs wait:
//   PreemptPlanFilter.WhatABudgetAdmitsFollowsTheVictimsCostAtTheBudgetTimeNotAtThePlansTime,
//   EngineQueues.WhileAJobWaitsNextDueNamesTheNextBudgetTimeWhenQueuesReclaim).
// - seed 2, with those, at 1402 (an eviction 13 s early): a Reclaim started later in a pass made
//   an earlier job's plan feasible, which only a rebuilt engine (no refusal memo) asked again at
//   the next second. Now each Reclaim started voids the refusal memos and the action runs again
//   until no more start.
TEST(OneEngine, ASharedClusterWhoseServiceRebuildsItsEngineWheneverItMayDecidesAsTheSimulatorSeeds4And8) {
  for (uint64_t seed : {4, 8}) ExpectSameDecisionsCompacting(seed, Variant::kTenants);
}
// The shared cluster's sequence under configurations drawn from the seed (Variant::kDrawn,
// DrawnConfiguration): whatever the configuration, the service decides as the simulator. Before,
// with any policy but best-fit and with configurations without Standby, most seeds differed
// within their first decisions: the service ran best-fit whatever the configuration named (a
// default of this test's, now the configuration's), and lent the GPUs of Standby windows under
// a configuration without `standby:` (now it refuses the windows: ServiceOptions::standby).
// Seeds 1-200 were run (`make test-long` runs 13-40). Seeds 2 and 4 found two more: the service
// ordered a move of a replica placed in the same cycle only at the job's next change (seed 4:
// volcano-binpack with assembly; Service::Impl::Reconcile now orders it after the start), and an
// HP job's Reclaim, refused, became feasible at a budget time NextDue did not name under queues
// that do not reclaim (seed 2: the simulator, woken by a stale job end, looked then and the
// service did not; EngineQueues.WhileAnHpJobWaitsNextDueNamesTheNextBudgetTime...).
class OneEngineDrawn : public ::testing::TestWithParam<uint64_t> {};
TEST_P(OneEngineDrawn, ASharedClusterUnderADrawnConfigurationDecidesAsTheSimulator) {
  ExpectSameDecisions(GetParam(), false, Variant::kDrawn);
}
INSTANTIATE_TEST_SUITE_P(Seeds, OneEngineDrawn, ::testing::Range<uint64_t>(1, 13));
// Seed 11 of it found one more after the victim-order change below: a move given up late in a
// cycle (its replica entered Standby) freed its target's GPUs, and a second cycle started a job
// there; the cycle's actions now run again when a move ends after its last `allocate`
// (Engine.AMoveGivenUpAfterTheCyclesAllocateFreesItsTargetForAWaitingJobInTheSameCycle).
// The same with the service rebuilding its engine whenever it may (as above). Seed 36
// (gpu-clustering, Volcano's victims, queues) chose another victim after a rebuild: a node's
// tasks were offered to the queues' budgets (VictimFilter::take, first asked first served) in
// the order they were bound in, which a rebuilt engine's adoption in job order changes. Volcano's
// and kube's victim searches now offer them in their own eviction order
// (VolcanoPreemption.ABudgetForOneVictimAdmitsTheJobVolcanoEvictsFirstWhateverTheBindOrder and
// its kube twin fail without it). Seeds 1-120 were run.
class OneEngineDrawnCompacting : public ::testing::TestWithParam<uint64_t> {};
TEST_P(OneEngineDrawnCompacting, ASharedClusterUnderADrawnConfigurationWhoseServiceRebuildsItsEngineDecidesAsTheSimulator) {
  ExpectSameDecisionsCompacting(GetParam(), Variant::kDrawn);
}
INSTANTIATE_TEST_SUITE_P(Seeds, OneEngineDrawnCompacting, ::testing::Values<uint64_t>(5, 36));

TEST(OneEngine, ARandomSequenceGivesTheSameDecisionsInTheSimulatorAndTheServiceSeed1) { ExpectSameDecisions(1, true); }
TEST(OneEngine, ARandomSequenceGivesTheSameDecisionsInTheSimulatorAndTheServiceSeed2) { ExpectSameDecisions(2); }
TEST(OneEngine, ARandomSequenceGivesTheSameDecisionsInTheSimulatorAndTheServiceSeed3) { ExpectSameDecisions(3, true); }
#else
void ExpectExactReplay(uint64_t seed, const LiveRun& base, int64_t min_segments, const std::string& what_if_policy = "");

// The longer run (`make test-long`, label long): seeds 4 to 23, each also replayed from the
// service's history.
class OneEngineLong : public ::testing::TestWithParam<uint64_t> {};
TEST_P(OneEngineLong, ARandomSequenceGivesTheSameDecisionsInTheSimulatorAndTheServiceAndReplaysExactly) {
  ExpectSameDecisions(GetParam());
  ExpectExactReplay(GetParam(), LiveRun{}, 1);
}
INSTANTIATE_TEST_SUITE_P(Seeds, OneEngineLong, ::testing::Range<uint64_t>(4, 24));
// Drawn configurations (above), seeds 13-40.
class OneEngineDrawnLong : public ::testing::TestWithParam<uint64_t> {};
TEST_P(OneEngineDrawnLong, ASharedClusterUnderADrawnConfigurationDecidesAsTheSimulator) {
  ExpectSameDecisions(GetParam(), false, Variant::kDrawn);
}
INSTANTIATE_TEST_SUITE_P(Seeds, OneEngineDrawnLong, ::testing::Range<uint64_t>(13, 41));
#endif

}  // namespace
}  // namespace estuary

namespace estuary {
namespace {

void ExpectWhatIf(const std::vector<HistoryRecord>& history, const std::string& other_policy);
#ifndef ESTUARY_ONE_ENGINE_LONG
void ExpectExactReplay(uint64_t seed, const LiveRun& base, int64_t min_segments, const std::string& what_if_policy = "");
#endif

// History replay (issue 18): the service's own record of its inputs and decisions — stored with
// each pass, one segment per engine — replayed by a new engine gives the recorded decisions
// exactly; and every decision the service reported is among the recorded ones, in order.
void ExpectExactReplay(uint64_t seed, const LiveRun& base, int64_t min_segments, const std::string& what_if_policy) {
  Simulated s;  // the jobs' ends, as the agent reports them
  if (!Simulate(seed, s)) return;
  std::vector<std::string> observed;
  std::vector<HistoryRecord> history;
  LiveRun run = base;
  run.observed = &observed;
  run.history = &history;
  (void)ServiceLog(s.rec, s.cluster, s.sc.configurations[0], seed, s.ends, s.times, run);
  ASSERT_FALSE(history.empty());
  auto replay = ReplayHistory(history);
  ASSERT_TRUE(replay.ok()) << replay.status().message();
  EXPECT_GE(replay->segments, min_segments);
  EXPECT_GT(replay->inputs, 2000);
  EXPECT_EQ(replay->first_difference, -1) << replay->difference;
  EXPECT_EQ(static_cast<int64_t>(replay->events.size()), replay->recorded_events);
  // What the service reported is what it recorded (a rebuilt engine's adoptions aside).
  size_t k = 0;
  for (const EngineEvent& e : replay->events) {
    if (k < observed.size() && EventLine(e) == observed[k]) ++k;
  }
  EXPECT_EQ(k, observed.size()) << "reported decision " << k << " is not recorded: " << (k < observed.size() ? observed[k] : "");
  EXPECT_GT(observed.size(), 1000u);
  // The comparison has teeth: one submission changed (an LP job made an HP gang) and the replay
  // tells where its decisions part from the recorded ones.
  std::vector<HistoryRecord> tampered = history;
  int submits = 0;
  for (HistoryRecord& r : tampered) {
    auto* in = std::get_if<EngineInput>(&r.what);
    auto* sub = in ? std::get_if<SubmitInput>(&in->what) : nullptr;
    if (sub && sub->job.priority < 700 && ++submits >= 300) {
      sub->job.priority = 950;
      sub->job.min_replicas = sub->job.max_replicas = 3;
      sub->job.per_replica.gpu_count = 8;
      break;
    }
  }
  auto differs = ReplayHistory(tampered);
  ASSERT_TRUE(differs.ok()) << differs.status().message();
  EXPECT_GE(differs->first_difference, 0);
  if (!what_if_policy.empty()) ExpectWhatIf(history, what_if_policy);
  // A history text round trip changes nothing.
  for (const HistoryRecord& r : history) {
    auto back = HistoryRecordFromJson(HistoryRecordJson(r));
    ASSERT_TRUE(back.ok()) << back.status().message();
    ASSERT_EQ(HistoryRecordJson(*back), HistoryRecordJson(r));
  }
}

// The what-if of a history (sim/history_scenario.h): the same jobs as a scenario, run by the
// simulator under the recorded configuration, finish as in the service and keep the cluster as
// busy (within 1 point); under another policy the decisions differ.
void ExpectWhatIf(const std::vector<HistoryRecord>& history, const std::string& other_policy) {
  auto replay = ReplayHistory(history);
  ASSERT_TRUE(replay.ok());
  char tmpl[] = "/tmp/estuary-what-if-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto sc = HistoryToScenario(history, "what-if", "what-if.cluster.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  std::ofstream(dir + "/what-if.yaml") << sc->scenario_yaml;
  std::ofstream(dir + "/what-if.cluster.yaml") << sc->cluster_yaml;
  auto scenario = ReadScenario(dir + "/what-if.yaml");
  ASSERT_TRUE(scenario.ok()) << scenario.status().message();
  auto cluster = LoadScenarioCluster(*scenario);
  ASSERT_TRUE(cluster.ok()) << cluster.status().message();
  ASSERT_EQ(scenario->configurations.size(), 1u);
  const SchedulerConfig recorded = scenario->configurations[0];
  auto same = RunScenario(*scenario, *cluster, recorded, scenario->seeds[0], true, true);
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_EQ(sc->finished, replay->jobs_finished);
  std::set<std::string> finished;
  for (const SimJobRecord& j : same->jobs) {
    if (j.status == SimJobStatus::kFinished) finished.insert(j.name);
  }
  std::set<std::string> ended_in_service;
  for (const HistoryRecord& r : history) {
    const auto* in = std::get_if<EngineInput>(&r.what);
    const auto* c = in ? std::get_if<CancelInput>(&in->what) : nullptr;
    if (c && c->finished) ended_in_service.insert("job" + std::to_string(c->job));
  }
  EXPECT_EQ(finished, ended_in_service);
  EXPECT_NEAR(same->metrics.at("gpu_alloc_pct_mean"), replay->gpu_alloc_pct_mean, 1.0);
  if (std::getenv("ONE_ENGINE_DUMP") != nullptr) {
    int cancels = 0, resizes = 0;
    for (const HistoryRecord& r : history) {
      const auto* in = std::get_if<EngineInput>(&r.what);
      if (in && std::holds_alternative<ResizeInput>(in->what)) ++resizes;
      const auto* c = in ? std::get_if<CancelInput>(&in->what) : nullptr;
      if (c && !c->finished) ++cancels;
    }
    std::printf("what-if: %lld jobs, %zu finished, %d cancelled, %d resizes; allocation %.3f%% (service, replayed) vs "
                "%.3f%% (simulated)\n",
                static_cast<long long>(sc->jobs), finished.size(), cancels, resizes, replay->gpu_alloc_pct_mean,
                same->metrics.at("gpu_alloc_pct_mean"));
  }
  SchedulerConfig other = recorded;
  other.policy = other_policy;
  auto differs = RunScenario(*scenario, *cluster, other, scenario->seeds[0], true, true);
  ASSERT_TRUE(differs.ok()) << differs.status().message();
  bool differ = differs->job_events.size() != same->job_events.size();
  for (size_t i = 0; !differ && i < same->job_events.size(); ++i) {
    const SimJobEvent& a = same->job_events[i];
    const SimJobEvent& b = differs->job_events[i];
    differ = a.time != b.time || a.job != b.job || a.kind != b.kind || a.replicas != b.replicas || a.detail != b.detail;
  }
  EXPECT_TRUE(differ) << "policy " << other_policy << " made the recorded decisions";
  std::filesystem::remove_all(dir);
}

#ifndef ESTUARY_ONE_ENGINE_LONG
TEST(History, TheServicesHistoryReplaysToTheSameDecisions) { ExpectExactReplay(1, LiveRun{}, 1, "fgd"); }

TEST(History, AReopenedAndACompactedServiceWithFgdReplayToTheSameDecisions) {
  LiveRun run;
  run.policy = "fgd";
  run.restart_at_s = 100000;
  run.compact_min_jobs = 100;
  ExpectExactReplay(2, run, 3);
}
#endif

}  // namespace
}  // namespace estuary
