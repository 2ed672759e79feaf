// One engine, two drivers (issue 7): a recorded sequence of events — a cluster's nodes, then jobs
// arriving over time, each running its duration once started — replayed through the simulator
// (RunScenario) and through the live service (Service, its loop run at each event time, the test
// playing the agent: replicas report `running` when started and `succeeded` when their duration
// is up) yields the same decisions: every job starts at the same second with the same replicas.
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>

#include "common/rng.h"
#include "server/service.h"
#include "sim/scenario.h"
#include "sim/simulate.h"
#include "store/sqlite_store.h"
#include "tests/testing/registrations.h"

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
  int32_t replicas = 1, gpus = 1, priority = 300;
};

// (time, job, replicas) of every start, sorted.
using Starts = std::vector<std::tuple<int64_t, std::string, int32_t>>;

// The recorded sequence: 160 rigid gangs of 1-4 replicas x 1, 2, 4 or 8 GPUs at two priorities,
// arriving over ~1.5 hours on a 16-node cluster — enough to queue, to wait on the priority order
// and to fragment.
std::vector<RecordedJob> Recording() {
  Rng rng(2026);
  std::vector<RecordedJob> jobs;
  int64_t t = 0;
  const int32_t gpus[] = {1, 2, 4, 8};
  for (int i = 0; i < 160; ++i) {
    t += static_cast<int64_t>(rng.Uniform(60));
    RecordedJob j;
    j.name = "j" + std::to_string(i);
    j.submit_s = t;
    j.duration_s = 300 + static_cast<int64_t>(rng.Uniform(1800));
    j.replicas = 1 + static_cast<int32_t>(rng.Uniform(4));
    j.gpus = gpus[rng.Uniform(4)];
    j.priority = rng.Uniform(4) == 0 ? 500 : 300;
    jobs.push_back(j);
  }
  return jobs;
}

std::string ScenarioYaml(const std::vector<RecordedJob>& jobs) {
  std::ostringstream y;
  y << "name: same-engine\nduration_s: 40000\nseeds: [7]\n"
       "cluster: {generate: {total_gpus: 128, gpus_per_node: 8, nodes_per_asw_min: 4, nodes_per_asw_max: 4,\n"
       "  asws_per_spine: 2, spines_per_az: 2, rdma_pod_nodes: 8, seed: 3, models: \"H800:1:128:2048\"}}\n"
       "jobs:\n";
  for (const RecordedJob& j : jobs) {
    y << "  - {name: " << j.name << ", submit_s: " << j.submit_s << ", duration_s: " << j.duration_s
      << ", replicas: " << j.replicas << ", gpus: " << j.gpus << ", cpu_cores: 4, memory_gib: 16, priority: "
      << j.priority << "}\n";
  }
  y << "configurations:\n  - {name: live, policy: best-fit, queue: priority}\n";
  return y.str();
}

Starts SimulatorStarts(const Scenario& sc, const ClusterState& cluster) {
  auto r = RunScenario(sc, cluster, sc.configurations[0], sc.seeds[0], /*check_invariants=*/true, /*record_events=*/true);
  EXPECT_TRUE(r.ok()) << r.status().message();
  Starts s;
  if (!r.ok()) return s;
  for (const SimJobEvent& e : r->job_events) {
    if (e.kind == "start") s.emplace_back(e.time, e.job, e.replicas);
  }
  std::sort(s.begin(), s.end());
  return s;
}

Starts ServiceStarts(const std::vector<RecordedJob>& jobs, const ClusterState& cluster, uint64_t seed) {
  char tmpl[] = "/tmp/estuary-same-XXXXXX";
  EXPECT_NE(mkdtemp(tmpl), nullptr);
  Starts starts;
  {
    auto store = SqliteStore::Open(tmpl, SqliteOptions{true});
    EXPECT_TRUE(store.ok());
    SecondsClock clock;
    ServiceOptions o;
    o.policy = "best-fit";
    o.seed = seed;
    o.absorb = false;
    o.heartbeat_timeout_ms = int64_t{1} << 50;
    auto service = Service::Open(store->get(), &clock, o);
    EXPECT_TRUE(service.ok());
    Service& sv = **service;
    const Principal agent{Role::kAgent, "agent"}, tenant{Role::kTenant, "t"};
    // The cluster's nodes, with their domains, in node order.
    const std::vector<NodeRegistration> nodes = testing::RegistrationsOf(cluster);
    EXPECT_TRUE(sv.RegisterNodes(agent, nodes).ok());
    std::map<uint64_t, size_t> index;                 // service job id -> recorded job
    std::multimap<int64_t, std::string> ends;         // time -> task to report succeeded
    std::set<int64_t> times;
    for (const RecordedJob& j : jobs) times.insert(j.submit_s);
    size_t next = 0;
    uint64_t epoch = 0, after = 0;
    while (!times.empty()) {
      const int64_t t = *times.begin();
      times.erase(times.begin());
      clock.s = t;
      std::vector<TaskReport> done;
      for (auto it = ends.begin(); it != ends.end() && it->first == t;) {
        done.push_back({it->second, TaskReport::State::kSucceeded});
        it = ends.erase(it);
      }
      if (!done.empty()) {
        EXPECT_TRUE(sv.Report(agent, done, false).ok());
      }
      for (; next < jobs.size() && jobs[next].submit_s == t; ++next) {
        const RecordedJob& j = jobs[next];
        JobRequest r;
        r.name = j.name;
        r.min_replicas = r.max_replicas = j.replicas;
        r.gpus = j.gpus;
        r.cpu_milli = 4000;
        r.memory_mib = 16384;
        r.priority = j.priority;
        auto id = sv.Submit(tenant, r);
        EXPECT_TRUE(id.ok());
        index[*id] = next;
      }
      sv.RunOnce();
      EXPECT_TRUE(sv.CheckInvariants().ok()) << sv.CheckInvariants().message();
      const OrderBatch b = sv.WaitOrders(agent, epoch, after, 0);
      epoch = b.epoch;
      after = b.last_seq;
      std::map<uint64_t, int32_t> started;
      std::vector<TaskReport> running;
      for (const Order& o : b.orders) {
        EXPECT_EQ(o.op, Order::Op::kStart);
        ++started[o.job];
        running.push_back({o.task, TaskReport::State::kRunning});
        const RecordedJob& j = jobs[index.at(o.job)];
        ends.emplace(t + j.duration_s, o.task);
        times.insert(t + j.duration_s);
      }
      if (!running.empty()) {
        EXPECT_TRUE(sv.Report(agent, running, false).ok());
      }
      for (const auto& [id, n] : started) starts.emplace_back(t, jobs[index.at(id)].name, n);
    }
  }
  std::filesystem::remove_all(tmpl);
  std::sort(starts.begin(), starts.end());
  return starts;
}

TEST(SameEngine, ARecordedSequenceGivesTheSameStartsInTheSimulatorAndInTheService) {
  const std::vector<RecordedJob> jobs = Recording();
  auto sc = ParseScenario(ScenarioYaml(jobs), "same-engine.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  auto cluster = LoadScenarioCluster(*sc);
  ASSERT_TRUE(cluster.ok()) << cluster.status().message();
  const Starts sim = SimulatorStarts(*sc, *cluster);
  const Starts live = ServiceStarts(jobs, *cluster, sc->seeds[0]);
  ASSERT_EQ(sim.size(), jobs.size());  // every job ran in the simulator's horizon
  // Some jobs had to wait (the sequence exercises the queue, not just an empty cluster).
  size_t waited = 0;
  std::map<std::string, int64_t> submit;
  for (const RecordedJob& j : jobs) submit[j.name] = j.submit_s;
  for (const auto& [t, name, n] : sim) waited += t > submit[name];
  EXPECT_GT(waited, 20u);
  EXPECT_EQ(live, sim);
  for (size_t i = 0; i < std::min(sim.size(), live.size()); ++i) {
    if (sim[i] != live[i]) {
      ADD_FAILURE() << "first difference at start " << i << ": simulator " << std::get<1>(sim[i]) << " at "
                    << std::get<0>(sim[i]) << ", service " << std::get<1>(live[i]) << " at " << std::get<0>(live[i]);
      break;
    }
  }
}

}  // namespace
}  // namespace estuary
