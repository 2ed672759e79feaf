// The live service end to end, as separate processes (issue 7): `estuary serve` on a loopback
// port with its SQLite state, `estuary agent --fake-nodes N`, clients submitting over HTTP.
//  - Jobs submitted through the API run on the fake agents and succeed.
//  - Crash safety: the service is killed (SIGKILL) while clients submit and agents report, then
//    restarted on the same data: every job that got a 201 is there, the recovered state's
//    invariants hold (no GPU bound twice), and every job still runs to success.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
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
}

}  // namespace
}  // namespace estuary
