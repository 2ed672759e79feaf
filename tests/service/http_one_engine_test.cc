// One engine over HTTP (issue 18): `estuary serve` with a scheduler configuration that turns on
// Reclaim, Absorb, Standby, Align and reserve, and `estuary agent` with the fake nodes of a
// 4-ASW cluster, as processes; a client plays a seeded random sequence over the API, compressed
// into about a minute of wall time — submissions of rigid, elastic and step jobs at spot, LP, dev
// and HP priorities (HP gangs that require one ASW, HP services that lend a replica through a
// Standby window), tenants' cancels and resizes, node failures and restores, a defragmentation
// request. The decisions the service made are then compared with the simulator's: the service's
// recorded inputs, applied at the engine times the service applied them (`estuary history
// export`), replayed by `estuary simulate HISTORY`, give the same decision log (its exit code 0;
// 1 prints the first difference). The run must have made every kind of decision: starts,
// growths, shrinks, evictions, Reclaims, Standby entries and restores, moves.
//
// Seeds 1-3 run in `make test`, seeds 4-9 in `make test-long` (http_one_engine_long_test). Every
// job must end: an earlier run found a job left `running` with no replica bound (a Reclaim's
// planned shrink that landed after a node failure had taken the job's other replicas; the engine
// now evicts such a job whole: engine_test's
// AJobShrunkByAReclaimAfterANodeFailureTookItsOtherReplicasIsEvictedWholeAndRunsAgain); seed 3
// once found, under CI's load, a job whose replicas had all succeeded left `running` because
// the growth that was starting when they did was shrunk away by a resize (server_test's
// AJobWhoseOtherReplicasSucceededEndsWhenItsStartingGrowthIsShrunkAway).
// ONE_ENGINE_DUMP=1 prints the counts of inputs and decisions; ONE_ENGINE_KEEP=DIR copies the
// service's data there when jobs never end (for `estuary history export --data DIR`).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/rng.h"
#include "tests/testing/service_fixture.h"

namespace estuary {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

httplib::Headers As(const char* token) { return testing::Bearer(token); }

// One API call of the sequence, `at_ms` after the start.
struct Call {
  int64_t at_ms = 0;
  enum class Op { kSubmit, kCancel, kResize, kWindow, kFail, kRestore, kDefrag } op = Op::kSubmit;
  std::string job;   // kSubmit (its name), kCancel, kResize, kWindow
  Json body;         // kSubmit, kResize; kWindow: {from, to} offsets in ms
  std::string node;  // kFail, kRestore
};

// 1,000 jobs over ~70 s on 16 nodes x 8 GPUs (about 90% of its GPU-seconds offered), with their
// tenants' changes, 6 node failures each restored 3 s later and two defragmentation requests;
// durations of seconds.
std::vector<Call> Sequence(uint64_t seed) {
  Rng rng(seed);
  std::vector<Call> calls;
  // First a fragmented cluster to defragment: 16 half-node jobs, best-fit pairs them on 8 nodes,
  // every other one is cancelled, and an admin asks for a defragmentation (its moves
  // consolidate the survivors while the rest of the sequence begins).
  for (int i = 0; i < 16; ++i) {
    const std::string name = "frag" + std::to_string(i);
    calls.push_back({10L * i, Call::Op::kSubmit, name,
                     {{"name", name}, {"class", "dev"}, {"gpus", 4}, {"cpu_cores", 4}, {"memory_gib", 16}, {"duration_s", 8}}, ""});
    if (i % 2 == 1) calls.push_back({1500, Call::Op::kCancel, name, {}, ""});
  }
  calls.push_back({2500, Call::Op::kDefrag, "", {}, ""});
  int64_t t = 3000;
  for (int i = 0; i < 1000; ++i) {
    t += static_cast<int64_t>(rng.Uniform(141));
    Json j = {{"name", "j" + std::to_string(i)}, {"cpu_cores", 4}, {"memory_gib", 16}};
    const uint64_t kind = rng.Uniform(100);
    bool service = false;
    if (kind < 35) {
      j.update({{"class", "spot"}, {"gpus", 1}, {"checkpoint_interval_s", 1}, {"duration_s", 1 + rng.Uniform(2)}});
    } else if (kind < 60) {
      j.update({{"class", "lp"}, {"gpus", 1}, {"replicas", {{"min", 2}, {"max", 8}, {"step", 2}}},
                {"checkpoint_interval_s", 1}, {"duration_s", 2 + rng.Uniform(2)}});
    } else if (kind < 88) {
      j.update({{"class", "dev"}, {"gpus", 1 + rng.Uniform(2)}, {"duration_s", 1 + rng.Uniform(2)}});
    } else if (kind < 96) {
      j.update({{"class", "hp-training"}, {"gpus", 8}, {"replicas", 2}, {"duration_s", 1 + rng.Uniform(2)}});
      if (rng.Uniform(2) == 0) j.update({{"plane", "data"}, {"required_level", "asw"}});
    } else {
      j.update({{"class", "hp-inference"}, {"gpus", 4}, {"replicas", 2}, {"duration_s", 8}});
      service = true;
    }
    const std::string name = j["name"];
    calls.push_back({t, Call::Op::kSubmit, name, j, ""});
    if (service) {
      const int64_t from = t + 1000 + static_cast<int64_t>(rng.Uniform(1500));
      calls.push_back({t + 1, Call::Op::kWindow, name, {{"from", from}, {"to", from + 2000 + static_cast<int64_t>(rng.Uniform(3000))}}, ""});
    }
  }
  const int64_t end = t;
  Rng changes(seed + 1000);
  for (const Call& c : std::vector<Call>(calls)) {
    if (c.op != Call::Op::kSubmit || c.job.rfind("frag", 0) == 0) continue;
    if (changes.Uniform(100) < 4) {
      calls.push_back({c.at_ms + 1 + static_cast<int64_t>(changes.Uniform(3000)), Call::Op::kCancel, c.job, {}, ""});
    } else if (c.body.contains("replicas") && c.body["replicas"].is_object() && changes.Uniform(4) == 0) {
      calls.push_back({c.at_ms + 500 + static_cast<int64_t>(changes.Uniform(3000)), Call::Op::kResize, c.job,
                       {{"replicas", {{"min", 2}, {"max", changes.Uniform(2) == 0 ? 4 : 6}}}}, ""});
    }
  }
  for (int k = 0; k < 6; ++k) {
    char node[16];  // the generated spec's names
    std::snprintf(node, sizeof node, "node%07d", static_cast<int>(changes.Uniform(16)));
    const int64_t at = 2000 + static_cast<int64_t>(changes.Uniform(static_cast<uint64_t>(end - 5000)));
    calls.push_back({at, Call::Op::kFail, "", {}, node});
    calls.push_back({at + 3000, Call::Op::kRestore, "", {}, node});
  }
  calls.push_back({end / 2, Call::Op::kDefrag, "", {}, ""});
  std::stable_sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) { return a.at_ms < b.at_ms; });
  return calls;
}

class HttpOneEngine : public testing::ServiceProcessTest, public ::testing::WithParamInterface<uint64_t> {
 protected:
  // Runs `calls` against the service in real time; false (with a failure) on a 5xx or no answer.
  void Play(const std::vector<Call>& calls) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    std::map<std::string, std::string> ids;  // job name -> id
    const auto start = std::chrono::steady_clock::now();
    const int64_t epoch_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch()).count();
    for (const Call& k : calls) {
      std::this_thread::sleep_until(start + std::chrono::milliseconds(k.at_ms));
      if (k.op == Call::Op::kSubmit) {
        auto r = c.Post("/v1/jobs", As(testing::kTenantToken), k.body.dump(), "application/json");
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 201) << r->body;
        ids[k.job] = Json::parse(r->body)["id"].get<std::string>();
        continue;
      }
      const std::string id = k.job.empty() ? "" : ids.at(k.job);
      auto send = [&]() -> httplib::Result {
        switch (k.op) {
          case Call::Op::kCancel: return c.Delete("/v1/jobs/" + id, As(testing::kTenantToken));
          case Call::Op::kResize:
            return c.Patch("/v1/jobs/" + id, As(testing::kTenantToken), k.body.dump(), "application/json");
          case Call::Op::kWindow:
            return c.Post("/v1/standby", As(testing::kTenantToken),
                          Json{{"job", id}, {"from_ms", epoch_ms + k.body["from"].get<int64_t>()},
                               {"to_ms", epoch_ms + k.body["to"].get<int64_t>()}, {"replicas", 1}}
                              .dump(),
                          "application/json");
          case Call::Op::kFail:
          case Call::Op::kRestore:
            return c.Post("/v1/nodes/" + k.node + (k.op == Call::Op::kFail ? "/fail" : "/restore"),
                          As(testing::kAdminToken), "", "application/json");
          default: return c.Post("/v1/defrag", As(testing::kAdminToken), "{}", "application/json");
        }
      };
      auto r = send();
      // A tenant's change to a job that has ended is refused (400); nothing else may fail.
      ASSERT_TRUE(r);
      ASSERT_LT(r->status, 500) << r->body;
    }
  }

  // "" once no job is pending or running, within `limit`; else the jobs still open.
  std::string WaitAllEnded(std::chrono::seconds limit) {
    httplib::Client c("127.0.0.1", port_);
    const auto until = std::chrono::steady_clock::now() + limit;
    std::string open;
    while (std::chrono::steady_clock::now() < until) {
      auto r = c.Get("/v1/jobs", As(testing::kAdminToken));
      if (r && r->status == 200) {
        open.clear();
        const Json body = Json::parse(r->body);
        for (const Json& j : body["jobs"]) {
          if (j["state"] == "pending" || j["state"] == "running") open += j.dump() + "\n";
        }
        if (open.empty()) return "";
      }
      std::this_thread::sleep_for(500ms);
    }
    return open.empty() ? "no answer" : open;
  }
};

TEST_P(HttpOneEngine, TheServicesDecisionsOverHttpAreTheSimulatorsReplayOfItsAppliedInputs) {
  const std::string spec = dir_ + "/cluster.yaml";
  const std::string log = dir_ + "/cmd.log";
  ASSERT_EQ(testing::WaitExit(testing::Spawn(ESTUARY_BINARY,
                                             {"cluster", "generate", "--out", spec, "--total-gpus", "128", "--nodes-per-asw",
                                              "4-4", "--models", "H800:1:64:512"},
                                             log),
                              30s),
            0);
  std::ofstream(dir_ + "/conf.yaml") << "{name: all-on, policy: best-fit, queue: priority, align: true, topology: true,\n"
                                        " preempt: {grace_s: 1}, absorb: true, standby: {grace_s: 1, lend_max_priority: 100},\n"
                                        " reserve: {after_s: 3, min_gpus: 16, replan_s: 2, drain_after_s: 5}}\n";
  StartServe({"--config", dir_ + "/conf.yaml"});
  agent_ = testing::Spawn(ESTUARY_BINARY,
                          {"agent", "--server", "http://127.0.0.1:" + std::to_string(port_), "--token", testing::kAgentToken,
                           "--fake-nodes", "16", "--cluster", spec, "--heartbeat-s", "1"},
                          dir_ + "/agent.log");
  httplib::Client c("127.0.0.1", port_);
  for (int i = 0; i < 100; ++i) {
    auto n = c.Get("/v1/nodes", As(testing::kAdminToken));
    if (n && n->status == 200 && Json::parse(n->body).at("nodes").size() == 16) break;
    std::this_thread::sleep_for(100ms);
  }
  Play(Sequence(GetParam()));
  if (HasFatalFailure()) return;
  const std::string open = WaitAllEnded(120s);
  EXPECT_EQ(open, "");
  if (!open.empty() && std::getenv("ONE_ENGINE_KEEP") != nullptr) {
    std::filesystem::copy(dir_ + "/data", std::getenv("ONE_ENGINE_KEEP"), std::filesystem::copy_options::recursive);
  }
  testing::StopProcess(agent_, SIGTERM);
  testing::StopProcess(serve_, SIGTERM);
  agent_ = serve_ = -1;

  const std::string history = dir_ + "/history.jsonl";
  ASSERT_EQ(testing::WaitExit(testing::Spawn(ESTUARY_BINARY, {"history", "export", "--data", dir_ + "/data", "--out", history}, log),
                              60s),
            0)
      << std::ifstream(log).rdbuf();
  std::filesystem::remove(log);
  EXPECT_EQ(testing::WaitExit(testing::Spawn(ESTUARY_BINARY, {"simulate", history, "--out", dir_ + "/replay"}, log), 120s), 0)
      << std::ifstream(log).rdbuf();

  // The sequence made the engine decide every kind of thing, from over 2,000 inputs.
  std::map<std::string, int> inputs, events;
  std::ifstream in(history);
  std::string line;
  while (std::getline(in, line)) {
    const Json j = Json::parse(line);
    if (j.contains("input")) ++inputs[j["input"]["kind"].get<std::string>()];
    if (j.contains("event")) ++events[j["event"]["kind"].get<std::string>()];
  }
  int non_cycle = 0;
  for (const auto& [kind, n] : inputs) non_cycle += kind == "cycle" ? 0 : n;
  std::ostringstream seen;
  for (const auto& [kind, n] : inputs) seen << " input " << kind << "=" << n;
  for (const auto& [kind, n] : events) seen << " event " << kind << "=" << n;
  EXPECT_GE(non_cycle, 2000) << seen.str();
  for (const char* kind : {"submit", "cancel", "resize", "node", "standby-windows", "defrag"}) {
    EXPECT_GT(inputs[kind], 0) << kind << ":" << seen.str();
  }
  for (const char* kind : {"started", "grown", "shrunk", "returned", "reclaim", "standby", "restored", "move-started", "moved"}) {
    EXPECT_GT(events[kind], 0) << kind << ":" << seen.str();
  }
  if (std::getenv("ONE_ENGINE_DUMP") != nullptr) std::fprintf(stderr, "%s\n", seen.str().c_str());
}

#ifdef ESTUARY_ONE_ENGINE_LONG
INSTANTIATE_TEST_SUITE_P(Seeds, HttpOneEngine, ::testing::Range<uint64_t>(4, 10));
#else
INSTANTIATE_TEST_SUITE_P(Seeds, HttpOneEngine, ::testing::Values(1, 2, 3));
#endif

}  // namespace
}  // namespace estuary
