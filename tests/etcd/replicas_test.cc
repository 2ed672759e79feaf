// Several scheduler replicas over one etcd (issue 7): three `estuary serve --store etcd`
// processes share a real etcd; exactly one leads (the others answer with a redirect to it), the leader is killed
// with SIGKILL while clients submit, another replica leads within 10 s, and every job that got a
// 201 from the old leader is there. A fake agent given all three URLs follows the leader: a job
// submitted to the new leader runs on it to success.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "tests/etcd/etcd_test_cluster.h"
#include "tests/testing/processes.h"

namespace estuary {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kAdmin[] = "admin-token-0123456789";
constexpr char kTenant[] = "tenant-token-012345678";
constexpr char kAgent[] = "agent-token-0123456789";

class Replicas : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string err = etcd_.Start();
    ASSERT_EQ(err, "");
    char tmpl[] = "/tmp/estuary-replicas-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/tokens") << kAdmin << " admin ops\n" << kTenant << " tenant team-a\n" << kAgent << " agent rack-1\n";
    for (int i = 0; i < 3; ++i) {
      ports_.push_back(testing::FreePort());
      pids_.push_back(testing::Spawn(ESTUARY_BINARY,
                                     {"serve", "--store", "etcd", "--etcd-endpoints", etcd_.endpoints()[0], "--listen",
                                      "127.0.0.1:" + std::to_string(ports_[i]), "--tokens", dir_ + "/tokens"},
                                     dir_ + "/serve" + std::to_string(i) + ".log"));
      ASSERT_GT(pids_.back(), 0);
    }
    std::string urls;
    for (int p : ports_) urls += (urls.empty() ? "" : ",") + std::string("http://127.0.0.1:") + std::to_string(p);
    agent_ = testing::Spawn(ESTUARY_BINARY,
                            {"agent", "--server", urls, "--token", kAgent, "--fake-nodes", "8", "--prefix", "rack"},
                            dir_ + "/agent.log");
    ASSERT_GT(agent_, 0);
  }
  void TearDown() override {
    testing::StopProcess(agent_, SIGKILL);
    for (pid_t p : pids_) testing::StopProcess(p, SIGKILL);
    if (HasFailure()) {
      for (const std::string f : {"serve0", "serve1", "serve2", "agent"}) {
        std::ifstream in(dir_ + "/" + f + ".log");
        std::string line;
        while (std::getline(in, line)) std::fprintf(stderr, "%s: %s\n", f.c_str(), line.c_str());
      }
    }
    std::filesystem::remove_all(dir_);
  }
  // The replicas that serve the API now (followers answer 307 to the leader).
  std::vector<int> Serving(const std::set<int>& skip = {}) {
    std::vector<int> v;
    for (int i = 0; i < 3; ++i) {
      if (skip.count(i)) continue;
      httplib::Client c("127.0.0.1", ports_[i]);
      c.set_connection_timeout(0, 200000);
      if (auto r = c.Get("/v1/openapi.json"); r && r->status == 200) v.push_back(i);
    }
    return v;
  }
  std::set<std::string> JobIds(int replica) {
    httplib::Client c("127.0.0.1", ports_[replica]);
    c.set_read_timeout(30, 0);
    std::set<std::string> ids;
    auto r = c.Get("/v1/jobs", {{"Authorization", std::string("Bearer ") + kAdmin}});
    if (!r || r->status != 200) return ids;
    const Json body = Json::parse(r->body);
    for (const Json& j : body["jobs"]) ids.insert(j["id"].get<std::string>());
    return ids;
  }

  testing_etcd::EtcdTestCluster etcd_;
  std::string dir_;
  std::vector<int> ports_;
  std::vector<pid_t> pids_;
  pid_t agent_ = -1;
};

TEST_F(Replicas, OneLeadsAndWhenItIsKilledAnotherLeadsWithin10sWithEveryAcceptedJob) {
  std::vector<int> serving;
  // The first election waits for the etcd cluster's own, which on a loaded 2-core machine (the
  // suite's other tests running) has taken over 15 s once: up to 30 s here. (The failover below
  // is what is timed.)
  for (int i = 0; i < 300 && serving.empty(); ++i) {
    std::this_thread::sleep_for(100ms);
    serving = Serving();
  }
  ASSERT_EQ(serving.size(), 1u) << "exactly one replica leads";
  const int leader = serving[0];
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(Serving(), serving);  // and stays the only one

  // The others answer with a redirect to it; a client that follows submits there.
  for (int i = 0; i < 3; ++i) {
    if (i == leader) continue;
    httplib::Client c("127.0.0.1", ports_[i]);
    auto r = c.Get("/v1/jobs", {{"Authorization", std::string("Bearer ") + kTenant}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 307) << r->body;
    EXPECT_EQ(r->get_header_value("Location"), "http://127.0.0.1:" + std::to_string(ports_[leader]) + "/v1/jobs");
    c.set_follow_location(true);
    const std::string body = Json{{"name", "via-follower"}, {"replicas", {{"min", 1}, {"max", 1}}}, {"gpus", 0},
                                  {"cpu_milli", 10}, {"memory_mib", 1}, {"priority", 300}}
                                 .dump();
    auto p = c.Post("/v1/jobs", {{"Authorization", std::string("Bearer ") + kTenant}}, body, "application/json");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->status, 201) << p->body;
  }

  // Clients submit to the leader; the leader dies under them.
  std::mutex mu;
  std::set<std::string> accepted;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int t = 0; t < 3; ++t) {
    clients.emplace_back([&, t] {
      httplib::Client c("127.0.0.1", ports_[leader]);
      c.set_connection_timeout(0, 300000);
      c.set_read_timeout(5, 0);
      for (int i = 0; !stop; ++i) {
        const std::string body = Json{{"name", "j" + std::to_string(t) + "-" + std::to_string(i)},
                                      {"replicas", {{"min", 1}, {"max", 1}}}, {"gpus", 0}, {"cpu_milli", 10},
                                      {"memory_mib", 1}, {"priority", 300}}
                                     .dump();
        auto r = c.Post("/v1/jobs", {{"Authorization", std::string("Bearer ") + kTenant}}, body, "application/json");
        if (r && r->status == 201) {
          std::lock_guard lk(mu);
          accepted.insert(Json::parse(r->body)["id"].get<std::string>());
        } else if (!r) {
          std::this_thread::sleep_for(50ms);
        }
      }
    });
  }
  std::this_thread::sleep_for(1500ms);
  testing::StopProcess(pids_[leader], SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  pids_[leader] = -1;
  std::vector<int> next;
  while (next.empty() && std::chrono::steady_clock::now() - killed < 15s) {
    std::this_thread::sleep_for(100ms);
    next = Serving({leader});
  }
  const double takeover_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  stop = true;
  for (std::thread& t : clients) t.join();
  ASSERT_EQ(next.size(), 1u) << "one of the two others leads";
  EXPECT_LT(takeover_s, 10.0);
  std::fprintf(stderr, "takeover after %.2f s; %zu jobs accepted before the kill\n", takeover_s, accepted.size());
  ASSERT_GT(accepted.size(), 20u);
  const std::set<std::string> present = JobIds(next[0]);
  size_t missing = 0;
  for (const std::string& id : accepted) missing += present.count(id) == 0;
  EXPECT_EQ(missing, 0u) << "of " << accepted.size();
  // The new leader's state holds together, and it accepts work.
  httplib::Client c("127.0.0.1", ports_[next[0]]);
  auto inv = c.Get("/v1/debug/invariants", {{"Authorization", std::string("Bearer ") + kAdmin}});
  ASSERT_TRUE(inv);
  EXPECT_EQ(inv->status, 200) << inv->body;
  auto more = c.Post("/v1/jobs", {{"Authorization", std::string("Bearer ") + kTenant}},
                     R"({"name": "after", "replicas": {"min": 1}, "gpus": 0, "cpu_milli": 1, "memory_mib": 1, "priority": 1})",
                     "application/json");
  ASSERT_TRUE(more);
  EXPECT_EQ(more->status, 201) << more->body;
  // The agent followed the leader: a GPU job submitted to the new leader runs to success on it.
  auto gpu = c.Post("/v1/jobs", {{"Authorization", std::string("Bearer ") + kTenant}},
                    R"({"name": "gpu-after", "replicas": {"min": 1}, "gpus": 8, "cpu_milli": 1000, "memory_mib": 1024,
                        "priority": 500, "duration_s": 1})",
                    "application/json");
  ASSERT_TRUE(gpu);
  ASSERT_EQ(gpu->status, 201) << gpu->body;
  const std::string gpu_id = Json::parse(gpu->body)["id"];
  std::string state;
  for (int i = 0; i < 150 && state != "succeeded"; ++i) {
    std::this_thread::sleep_for(200ms);
    auto r = c.Get(("/v1/jobs/" + gpu_id).c_str(), {{"Authorization", std::string("Bearer ") + kAdmin}});
    if (r && r->status == 200) state = Json::parse(r->body)["state"].get<std::string>();
  }
  EXPECT_EQ(state, "succeeded");
}

}  // namespace
}  // namespace estuary
