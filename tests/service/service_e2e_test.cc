// The live service end to end, as separate processes (issue 7): `estuary serve` on a loopback
// port with its SQLite state, `estuary agent --fake-nodes N`, clients submitting over HTTP.
//  - Jobs submitted through the API run on the fake agents and succeed.
//  - Crash safety: the service is killed (SIGKILL) while clients submit and agents report, then
//    restarted on the same data: every job that got a 201 is there, the recovered state's
//    invariants hold (no GPU bound twice), and every job still runs to success.
//    Its recorded history, exported, replays to the same decisions in `estuary simulate`.
//  - Migrations and standby windows over HTTP, carried out by the fake agent's processes.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "tests/testing/service_fixture.h"

namespace estuary {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kAdmin = testing::kAdminToken;
constexpr const char* kTenant = testing::kTenantToken;


void Stop(pid_t pid, int sig) { testing::StopProcess(pid, sig); }

httplib::Headers As(const char* token) { return {{"Authorization", std::string("Bearer ") + token}}; }

class ServiceE2E : public testing::ServiceProcessTest {
 protected:
  void StartAgent(int nodes) { ServiceProcessTest::StartAgent(nodes, "rack1"); }
  // Admin's view of every job: id -> state.
  std::map<std::string, std::string> Jobs() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    std::map<std::string, std::string> m;
    auto r = c.Get("/v1/jobs", As(kAdmin));
    if (!r || r->status != 200) {
      ADD_FAILURE() << "GET /v1/jobs as admin: " << (r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error()));
      return m;
    }
    const Json body = Json::parse(r->body);
    for (const Json& j : body["jobs"]) m[j["id"].get<std::string>()] = j["state"].get<std::string>();
    return m;
  }
  bool WaitAll(const std::set<std::string>& ids, const std::string& state, std::chrono::seconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      const auto jobs = Jobs();
      bool all = true;
      for (const std::string& id : ids) all = all && jobs.count(id) && jobs.at(id) == state;
      if (all) return true;
      std::this_thread::sleep_for(200ms);
    }
    return false;
  }

};

std::string JobBody(int i, int duration_s) {
  return Json{{"name", "job" + std::to_string(i)}, {"replicas", {{"min", 1}, {"max", 1}}}, {"gpus", 1},
              {"cpu_milli", 1000}, {"memory_mib", 1024}, {"priority", 300}, {"duration_s", duration_s}}
      .dump();
}

TEST_F(ServiceE2E, JobsSubmittedOverHttpRunOnTheFakeAgentsAndSucceed) {
  StartServe();
  StartAgent(8);
  httplib::Client c("127.0.0.1", port_);
  std::set<std::string> ids;
  for (int i = 0; i < 20; ++i) {
    auto r = c.Post("/v1/jobs", As(kTenant), JobBody(i, 1), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201) << r->body;
    ids.insert(Json::parse(r->body)["id"].get<std::string>());
  }
  EXPECT_TRUE(WaitAll(ids, "succeeded", 30s)) << Jobs().size() << " jobs listed";
  auto inv = c.Get("/v1/debug/invariants", As(kAdmin));
  ASSERT_TRUE(inv);
  EXPECT_EQ(inv->status, 200) << inv->body;
}

// A job of 20,000 replicas on one fake agent of 2,560 nodes: its 20,000 start orders come in one
// poll, and their 20,000 `running` reports (~1.3 MB of JSON, above the service's 1 MiB body
// limit) go in bounded requests — one request of them all was refused (413) and dropped, and
// the job never left `pending`.
TEST_F(ServiceE2E, AJobOfTwentyThousandReplicasStartsAndSucceedsOnOneFakeAgent) {
  StartServe();
  StartAgent(2560);
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(30, 0);
  for (int i = 0; i < 300; ++i) {
    auto n = c.Get("/v1/nodes", As(kAdmin));
    if (n && n->status == 200 && Json::parse(n->body).at("nodes").size() == 2560) break;
    std::this_thread::sleep_for(100ms);
  }
  const Json job = {{"name", "wide"}, {"replicas", {{"min", 20000}, {"max", 20000}}}, {"gpus", 1}, {"cpu_milli", 1000},
                    {"memory_mib", 1024}, {"priority", 300}, {"duration_s", 3}};
  auto r = c.Post("/v1/jobs", As(kTenant), job.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string id = Json::parse(r->body)["id"].get<std::string>();
  EXPECT_TRUE(WaitAll({id}, "succeeded", 60s)) << Jobs()[id];
}

// `estuary serve` with a scheduler configuration of the scenario schema — the `tidal` entry of
// examples/tidal-week.yaml (priority queue, Reclaim, Absorb, Standby), its `k8s-default` peer
// entry (k8s-fit, kube's victims, docs/peers.md), and a file of one
// configuration whose values differ from the service's defaults — and with policy fgd (which
// learns its typical tasks from the submitted jobs): the configuration is the one in use — read
// back whole from GET /v1/config's `engine` — and jobs run to success.
TEST_F(ServiceE2E, ServeRunsJobsWithAScenariosConfigurationAndWithPolicyFgd) {
  std::ofstream(dir_ + "/conf.yaml") << "{name: packed, policy: gpu-packing, preempt: {grace_s: 45}, absorb: false,\n"
                                        " queue: fifo, reserve: {after_s: 300, max_jobs: 2, min_gpus: 16, max_gpus: 64,\n"
                                        " replan_s: 30, drain_after_s: 2400}}\n";
  struct Case {
    std::vector<std::string> flags;
    std::string policy;
    int grace_s;
    bool absorb;
    bool packed = false;  // the file above: its queue order (fifo) and holds are the engine's
  };
  for (const Case& k : {Case{{"--config", std::string(ESTUARY_SOURCE_DIR) + "/examples/tidal-week.yaml", "--configuration",
                              "tidal"}, "best-fit", 60, true},
                        Case{{"--config", std::string(ESTUARY_SOURCE_DIR) + "/examples/tidal-week.yaml", "--configuration",
                              "k8s-default"}, "k8s-fit", 60, false},
                        Case{{"--config", dir_ + "/conf.yaml"}, "gpu-packing", 45, false, true},
                        Case{{"--config", dir_ + "/conf.yaml", "--grace-s", "30"}, "gpu-packing", 30, false, true},
                        Case{{"--policy", "fgd"}, "fgd", 60, true}}) {
    StartServe(k.flags);
    StartAgent(4);
    httplib::Client c("127.0.0.1", port_);
    const auto conf = c.Get("/v1/config", As(kAdmin));
    ASSERT_TRUE(conf);
    const Json cj = Json::parse(conf->body);
    EXPECT_EQ(cj["policy"], k.policy) << conf->body;
    EXPECT_EQ(cj["grace_s"], k.grace_s) << conf->body;
    EXPECT_EQ(cj["absorb"], k.absorb) << conf->body;
    // The engine's own configuration agrees, and carries what the file gave beyond those keys.
    const Json& e = cj["engine"];
    EXPECT_EQ(e["policy"], k.policy) << conf->body;
    EXPECT_EQ(e["grace_s"], k.grace_s) << conf->body;
    EXPECT_EQ(e["absorb"], k.absorb) << conf->body;
    EXPECT_EQ(e["priority_queue"], !k.packed) << conf->body;  // the service's default and tidal-week's: priority
    const Json reserve = k.packed ? Json{{"enabled", true}, {"after_s", 300}, {"max_jobs", 2}, {"min_gpus", 16},
                                         {"max_gpus", 64}, {"replan_s", 30}, {"drain_after_s", 2400}}
                                  : Json{{"enabled", false}};
    for (const auto& [key, value] : reserve.items()) EXPECT_EQ(e["reserve"][key], value) << key << ": " << conf->body;
    std::set<std::string> ids;
    for (int i = 0; i < 10; ++i) {
      auto r = c.Post("/v1/jobs", As(kTenant), JobBody(i, 1), "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 201) << r->body;
      ids.insert(Json::parse(r->body)["id"].get<std::string>());
    }
    EXPECT_TRUE(WaitAll(ids, "succeeded", 30s)) << k.flags[1];
    Stop(agent_, SIGTERM);
    Stop(serve_, SIGTERM);
    agent_ = serve_ = -1;
    std::filesystem::remove_all(dir_ + "/data");
  }
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The one job schema (issue 18): the same job file is the service's request body and a
// scenario's job (`jobs: [{file: job.json, submit_s: 10}]`), unchanged; both read it alike (class
// defaults, replicas object, CPU in cores and memory in GiB), and each bad file is rejected by
// both with the same text: HTTP 400 {"error": TEXT} and exit 2 with "FILE:LINE: TEXT".
TEST_F(ServiceE2E, AJobFileIsAcceptedUnchangedByTheServiceAndByAScenarioAndBadInputGivesTheSameError) {
  StartServe();
  StartAgent(2);
  httplib::Client c("127.0.0.1", port_);
  const std::string job = dir_ + "/job.json";
  std::ofstream(job) << "{\"name\": \"train-a\", \"class\": \"lp\",\n"
                        " \"replicas\": {\"min\": 2, \"max\": 4, \"step\": 2}, \"gpus\": 1,\n"
                        " \"cpu_cores\": 4, \"memory_gib\": 16, \"duration_s\": 2, \"labels\": {\"team\": \"nlp\"}}\n";
  auto posted = c.Post("/v1/jobs", As(kTenant), Slurp(job), "application/json");
  ASSERT_TRUE(posted);
  ASSERT_EQ(posted->status, 201) << posted->body;
  const std::string id = Json::parse(posted->body)["id"].get<std::string>();
  auto shown = c.Get("/v1/jobs/" + id, As(kTenant));
  ASSERT_TRUE(shown);
  const Json v = Json::parse(shown->body);
  EXPECT_EQ(v["class"], "lp");
  EXPECT_EQ(v["priority"], 300);  // the class's
  EXPECT_EQ(v["preemptible"], true);
  EXPECT_EQ(v["replicas"], (Json{{"min", 2}, {"max", 4}, {"step", 2}}));
  EXPECT_EQ(v["cpu_milli"], 4000);
  EXPECT_EQ(v["memory_mib"], 16384);
  EXPECT_TRUE(WaitAll({id}, "succeeded", 30s));

  const std::string scenario = dir_ + "/s.yaml";
  auto write_scenario = [&](const std::string& job_file) {
    std::ofstream(scenario) << "name: t\nduration_s: 3600\n"
                               "cluster:\n  generate: {total_gpus: 16, gpus_per_node: 8, nodes_per_asw_min: 2, "
                               "nodes_per_asw_max: 2, seed: 1}\n"
                               "jobs:\n  - {file: " << job_file << ", submit_s: 10}\nconfigurations:\n  - {name: a}\n";
  };
  write_scenario("job.json");
  const std::string log = dir_ + "/simulate.log";
  ASSERT_EQ(testing::WaitExit(testing::Spawn(ESTUARY_BINARY, {"simulate", scenario, "--out", dir_ + "/sim"}, log), 60s), 0)
      << Slurp(log);
  EXPECT_NE(Slurp(dir_ + "/sim/jobs.csv").find("a,42,train-a,4,1,4,10,10,0,4,finished,"), std::string::npos)
      << Slurp(dir_ + "/sim/jobs.csv");

  struct Bad {
    std::string text;
    int line;  // of the field named, in the file
  };
  for (const Bad& b : {Bad{"{\"name\": \"bad\",\n \"replicas\": 2,\n \"gpus\": 17}\n", 3},
                       Bad{"{\"name\": \"bad\",\n \"replicas\": {\"min\": 0}}\n", 2},
                       Bad{"{\"name\": \"bad\", \"colour\": \"blue\"}\n", 1},
                       Bad{"{\"name\": \"bad\",\n \"class\": \"gold\"}\n", 2},
                       Bad{"{\"name\": \"bad\",\n \"gpus\": 2, \"gpu_milli\": 500}\n", 2},
                       Bad{"{\"name\": \"bad job\"}\n", 1},
                       Bad{"{\"name\": \"bad\",\n \"models\": [\"A100\", \"A100\"]}\n", 2},
                       Bad{"{\"name\": \"bad\",\n \"required_level\": \"asw\"}\n", 1},
                       Bad{"{\"gpus\": 1}\n", 1}}) {
    SCOPED_TRACE(b.text);
    const std::string bad = dir_ + "/bad.json";
    std::ofstream(bad) << b.text;
    auto r = c.Post("/v1/jobs", As(kTenant), Slurp(bad), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 400) << r->body;
    const std::string error = Json::parse(r->body)["error"].get<std::string>();
    write_scenario("bad.json");
    std::filesystem::remove(log);
    EXPECT_EQ(testing::WaitExit(testing::Spawn(ESTUARY_BINARY, {"simulate", scenario, "--out", dir_ + "/bad"}, log), 60s), 2);
    EXPECT_EQ(Slurp(log), "estuary: " + bad + ":" + std::to_string(b.line) + ": " + error + "\n");
  }
}

TEST_F(ServiceE2E, AfterAKillDashNineEveryAcceptedJobIsThereNothingIsBoundTwiceNoReservationOutlivesItsPurposeAndAllRunToSuccess) {
  StartServe();
  StartAgent(100);
  std::mutex mu;
  std::set<std::string> accepted;
  std::atomic<bool> stop{false};
  std::atomic<int> next{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      httplib::Client c("127.0.0.1", port_);
      c.set_connection_timeout(1, 0);
      c.set_read_timeout(5, 0);
      while (!stop) {
        const int i = next++;
        auto r = c.Post("/v1/jobs", As(kTenant), JobBody(i, 1 + i % 3), "application/json");
        if (r && r->status == 201) {
          std::lock_guard lk(mu);
          accepted.insert(Json::parse(r->body)["id"].get<std::string>());
        } else if (!r) {
          std::this_thread::sleep_for(20ms);  // the service is down: try again later
        }
      }
    });
  }
  // A gang of the whole cluster waits, holding every node by a reservation, when the kill comes.
  std::this_thread::sleep_for(1000ms);
  httplib::Client c0("127.0.0.1", port_);
  auto gang = c0.Post("/v1/jobs", As(kTenant),
                      Json{{"name", "gang"}, {"replicas", {{"min", 100}, {"max", 100}}}, {"gpus", 8},
                           {"cpu_milli", 1000}, {"memory_mib", 1024}, {"priority", 300}, {"duration_s", 1}}
                          .dump(),
                      "application/json");
  ASSERT_TRUE(gang);
  ASSERT_EQ(gang->status, 201);
  const std::string gang_id = Json::parse(gang->body)["id"];
  accepted.insert(gang_id);
  int held = 0;
  std::string why;
  for (int i = 0; i < 50 && held != 201; ++i) {  // until the loop has queued it
    auto r = c0.Post("/v1/reservations", As(kTenant), Json{{"job", gang_id}, {"ttl_s", 600}}.dump(), "application/json");
    held = r ? r->status : 0;
    why = r ? r->body : "";
    if (held != 201) std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(held, 201) << why;
  std::this_thread::sleep_for(1500ms);
  Stop(serve_, SIGKILL);  // mid-load: submissions, decisions and reports in flight
  serve_ = -1;
  std::this_thread::sleep_for(300ms);
  StartServe();
  std::this_thread::sleep_for(1500ms);  // more submissions after the restart
  stop = true;
  for (std::thread& t : clients) t.join();
  ASSERT_GT(accepted.size(), 100u);

  httplib::Client c("127.0.0.1", port_);
  auto inv = c.Get("/v1/debug/invariants", As(kAdmin));
  ASSERT_TRUE(inv);
  EXPECT_EQ(inv->status, 200) << inv->body;
  const auto jobs = Jobs();
  size_t missing = 0;
  for (const std::string& id : accepted) missing += jobs.count(id) == 0;
  EXPECT_EQ(missing, 0u) << "of " << accepted.size() << " accepted jobs";
  EXPECT_TRUE(WaitAll(accepted, "succeeded", 90s));
  inv = c.Get("/v1/debug/invariants", As(kAdmin));
  ASSERT_TRUE(inv);
  EXPECT_EQ(inv->status, 200) << inv->body;
  // The reservation ended with its purpose (the gang ran).
  auto resv = c.Get("/v1/reservations", As(kAdmin));
  ASSERT_TRUE(resv);
  EXPECT_EQ(Json::parse(resv->body)["reservations"].size(), 0u) << resv->body;
  // Every node is idle again: no GPU left bound by a lost decision.
  auto nodes = c.Get("/v1/nodes", As(kAdmin));
  ASSERT_TRUE(nodes);
  int64_t used = 0;
  const Json listed = Json::parse(nodes->body);
  for (const Json& n : listed["nodes"]) used += n["gpu_milli_used"].get<int64_t>();
  EXPECT_EQ(used, 0);

  // The recorded history (issue 18) of both lives of the service, exported and replayed by
  // `estuary simulate`, gives exactly the decisions the service recorded.
  Stop(serve_, SIGTERM);
  serve_ = -1;
  const std::string history = dir_ + "/history.jsonl", log = dir_ + "/history.log";
  ASSERT_EQ(testing::WaitExit(testing::Spawn(ESTUARY_BINARY, {"history", "export", "--data", dir_ + "/data", "--out", history}, log),
                              60s),
            0);
  ASSERT_EQ(testing::WaitExit(testing::Spawn(ESTUARY_BINARY, {"simulate", history, "--out", dir_ + "/replay"}, log), 120s),
            0)
      << std::ifstream(log).rdbuf();
  const Json summary = Json::parse(std::ifstream(dir_ + "/replay/summary.json"));
  EXPECT_TRUE(summary["identical"].get<bool>()) << summary.dump();
  EXPECT_GE(summary["segments"].get<int>(), 2);  // one engine per life of the service
  EXPECT_GT(summary["decisions"].get<int64_t>(), static_cast<int64_t>(accepted.size()));  // a start each, at least
  EXPECT_EQ(summary["decisions"], summary["recorded_decisions"]);
  // Its workload as a what-if scenario, which the simulator runs.
  ASSERT_EQ(testing::WaitExit(testing::Spawn(ESTUARY_BINARY, {"history", "scenario", history, "--out", dir_ + "/what-if.yaml"}, log),
                              60s),
            0)
      << std::ifstream(log).rdbuf();
  EXPECT_EQ(testing::WaitExit(testing::Spawn(ESTUARY_BINARY, {"simulate", dir_ + "/what-if.yaml", "--out", dir_ + "/what-if"}, log),
                              120s),
            0)
      << std::ifstream(log).rdbuf();
  const Json what_if = Json::parse(std::ifstream(dir_ + "/what-if/summary.json"));
  EXPECT_TRUE(what_if["configurations"].contains("recorded")) << what_if.dump().substr(0, 300);
}


// GET path as `token`; the parsed body (a failure when not 200).
Json GetJson(int port, const std::string& path, const char* token) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(30, 0);
  auto r = c.Get(path.c_str(), As(token));
  if (!r || r->status != 200) {
    ADD_FAILURE() << "GET " << path << ": " << (r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error()));
    return Json::object();
  }
  return Json::parse(r->body);
}

// Polls `pred` every 100 ms for up to `limit`.
template <typename P>
bool Eventually(P pred, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return pred();
}

std::string Submit(int port, const Json& body) {
  httplib::Client c("127.0.0.1", port);
  auto r = c.Post("/v1/jobs", As(kTenant), body.dump(), "application/json");
  if (!r || r->status != 201) {
    ADD_FAILURE() << "POST /v1/jobs: " << (r ? r->body : httplib::to_string(r.error()));
    return "";
  }
  return Json::parse(r->body)["id"].get<std::string>();
}

Json GpuJob(const std::string& name, int gpus, int priority, bool preemptible) {
  return Json{{"name", name}, {"replicas", {{"min", 1}, {"max", 1}}}, {"gpus", gpus}, {"cpu_milli", 1000},
              {"memory_mib", 1024}, {"priority", priority}, {"preemptible", preemptible}};
}

TEST_F(ServiceE2E, AMigrationAndAStandbyWindowAreCarriedOutByTheAgentsProcessesOverHttp) {
  StartServe();
  StartAgent(2);
  httplib::Client c("127.0.0.1", port_);
  const auto job = [&](const std::string& id) { return GetJson(port_, "/v1/jobs/" + id, kTenant); };
  const auto used = [&] {
    std::map<std::string, int64_t> m;
    const Json nodes = GetJson(port_, "/v1/nodes", kAdmin);
    if (nodes.contains("nodes")) {
      for (const Json& n : nodes["nodes"]) m[n["name"].get<std::string>()] = n["gpu_milli_used"].get<int64_t>();
    }
    return m;
  };
  const auto invariants = [&] {
    auto r = c.Get("/v1/debug/invariants", As(kAdmin));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  };
  ASSERT_TRUE(Eventually([&] { return used().size() == 2; }, 30s));

  // Fragmented: a and b share a node, c has the other; b ends.
  const std::string a = Submit(port_, GpuJob("a", 4, 300, false));
  const std::string b = Submit(port_, GpuJob("b", 4, 300, false));
  const std::string cc = Submit(port_, GpuJob("c", 4, 300, false));
  ASSERT_TRUE(WaitAll({a, b, cc}, "running", 30s));
  ASSERT_EQ(c.Delete(("/v1/jobs/" + b).c_str(), As(kTenant))->status, 200);
  ASSERT_TRUE(Eventually([&] { auto u = used(); return u.begin()->second + u.rbegin()->second == 8000; }, 30s));
  ASSERT_EQ(c.Post("/v1/defrag", As(kTenant), "{}", "application/json")->status, 403);
  auto d = c.Post("/v1/defrag", As(kAdmin), "{}", "application/json");
  ASSERT_TRUE(d);
  ASSERT_EQ(d->status, 200) << d->body;
  EXPECT_EQ(Json::parse(d->body)["moves"], 1);
  // The agent starts the new instance, reports it, and stops the old one: one node is free, and
  // both jobs ran on throughout.
  EXPECT_TRUE(Eventually([&] { auto u = used(); return std::min(u.begin()->second, u.rbegin()->second) == 0; }, 30s));
  EXPECT_TRUE(Eventually([&] { return job(a)["migrating_replicas"] == 0 && job(cc)["migrating_replicas"] == 0; }, 30s));
  EXPECT_EQ(job(a)["state"], "running");
  EXPECT_EQ(job(cc)["state"], "running");
  invariants();
  ASSERT_EQ(c.Delete(("/v1/jobs/" + a).c_str(), As(kTenant))->status, 200);
  ASSERT_EQ(c.Delete(("/v1/jobs/" + cc).c_str(), As(kTenant))->status, 200);

  // Standby: a service lends its GPUs to a spot job until the window is deleted; a 1 s grace.
  ASSERT_EQ(c.Put("/v1/config", As(kAdmin), R"({"grace_s": 1})", "application/json")->status, 200);
  const std::string svc = Submit(port_, GpuJob("svc", 8, 900, false));
  const std::string other = Submit(port_, GpuJob("other", 8, 300, false));
  ASSERT_TRUE(WaitAll({svc, other}, "running", 30s));
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  auto bad = c.Post("/v1/standby", As(kTenant), Json{{"job", svc}, {"to_ms", now_ms + 3'600'000}, {"replicas", 2}}.dump(),
                    "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("replicas"), std::string::npos) << bad->body;
  auto w = c.Post("/v1/standby", As(kTenant), Json{{"job", svc}, {"to_ms", now_ms + 3'600'000}, {"replicas", 1}}.dump(),
                  "application/json");
  ASSERT_TRUE(w);
  ASSERT_EQ(w->status, 201) << w->body;
  const std::string window = Json::parse(w->body)["id"];
  EXPECT_TRUE(Eventually([&] { return job(svc)["standby_replicas"] == 1; }, 30s));
  const std::string spot = Submit(port_, GpuJob("spot", 8, 100, true));
  EXPECT_TRUE(WaitAll({spot}, "running", 30s));
  invariants();
  ASSERT_EQ(GetJson(port_, "/v1/standby", kTenant)["windows"].size(), 1u);
  ASSERT_EQ(c.Delete(("/v1/standby/" + window).c_str(), As(kTenant))->status, 200);
  // The spot job is evicted after the grace period and waits (no GPU free); the service resumes.
  EXPECT_TRUE(Eventually([&] { return job(spot)["state"] == "pending" && job(svc)["standby_replicas"] == 0; }, 30s));
  EXPECT_EQ(job(svc)["state"], "running");
  invariants();
  const std::string metrics = c.Get("/metrics", As(kAdmin))->body;
  EXPECT_NE(metrics.find("estuary_migrations_completed_total 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("estuary_standby_orders_total 1\n"), std::string::npos);
  EXPECT_NE(metrics.find("estuary_resume_orders_total 1\n"), std::string::npos);
}

}  // namespace
}  // namespace estuary
