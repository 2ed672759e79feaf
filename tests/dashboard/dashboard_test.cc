// The service's dashboard (issue 7): the files embedded into the binary, and the page in headless
// Chromium against a live cluster.
//  - FindDashboardFile serves dashboard/index.html, dashboard.js, dashboard.css and Chart.js's
//    chart.umd.js byte for byte with their content types, and nothing else.
//  - `estuary serve --config` with tenant queues (issue 20: org with a and a2 for team-a, b for
//    team-b, idle; a child listed before its parent) on a loopback port with `estuary agent
//    --fake-nodes 64`, jobs submitted over HTTP into queues (some running, b's above its
//    guarantee, one that fits no node and so waits with a reason): GET / redirects to the page,
//    the files come with their content types, and dashboard_check.mjs (playwright-core driving
//    /usr/bin/chromium) checks what the page shows, for the admin and for team-a, and that it
//    logs no error.
// ESTUARY_DASHBOARD_SCREENSHOTS=DIR keeps the check's screenshots in DIR (default: the test's
// temporary directory, removed afterwards).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
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

#include "server/dashboard.h"
#include "tests/testing/service_fixture.h"


namespace estuary {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kAdmin = testing::kAdminToken;
constexpr const char* kTenant = testing::kTenantToken;
constexpr char kOtherTenant[] = "tenant-b-token-0123456";  // team-b, added by the test
constexpr char kChromium[] = "/usr/bin/chromium";

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(DashboardFiles, AreTheSourcesByteForByteWithTheirContentTypes) {
  const fs::path dir = fs::path(ESTUARY_SOURCE_DIR) / "dashboard";
  const std::map<std::string, std::pair<fs::path, std::string>> want = {
      {"index.html", {dir / "index.html", "text/html; charset=utf-8"}},
      {"dashboard.js", {dir / "dashboard.js", "application/javascript"}},
      {"dashboard.css", {dir / "dashboard.css", "text/css"}},
      {"chart.umd.js", {dir / "node_modules/chart.js/dist/chart.umd.js", "application/javascript"}},
  };
  for (const auto& [name, file] : want) {
    const auto f = FindDashboardFile(name);
    ASSERT_TRUE(f.has_value()) << name;
    EXPECT_EQ(f->content_type, file.second) << name;
    const std::string source = ReadFile(file.first);
    ASSERT_FALSE(source.empty()) << file.first;
    EXPECT_TRUE(f->body == source) << name << ": " << f->body.size() << " bytes embedded, " << source.size()
                                   << " in " << file.first;
  }
  const auto page = FindDashboardFile("");
  ASSERT_TRUE(page.has_value());
  EXPECT_EQ(page->body, FindDashboardFile("index.html")->body);
  for (const char* none : {"nope.js", "package.json", "embed_files.cmake", "index.htm", "..", "chart.js", " "}) {
    EXPECT_FALSE(FindDashboardFile(none).has_value()) << none;
  }
}

using testing::Spawn;
int WaitExit(pid_t pid, std::chrono::seconds limit) { return testing::WaitExit(pid, limit); }

bool InPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string d;
  while (std::getline(dirs, d, ':')) {
    if (!d.empty() && access((fs::path(d) / program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

httplib::Headers As(const char* token) { return {{"Authorization", std::string("Bearer ") + token}}; }

class DashboardE2E : public testing::ServiceProcessTest {
 protected:
  void StartAgent(int nodes) { ServiceProcessTest::StartAgent(nodes, "demo"); }
  Json Get(const std::string& path) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(10, 0);
    auto r = c.Get(path, As(kAdmin));
    if (!r || r->status != 200) {
      ADD_FAILURE() << "GET " << path << ": " << (r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error()));
      return Json::object();
    }
    return Json::parse(r->body);
  }
  std::string Submit(const Json& job, const char* token = kTenant) {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Post("/v1/jobs", As(token), job.dump(), "application/json");
    if (!r || r->status != 201) {
      ADD_FAILURE() << "POST /v1/jobs " << job.dump() << ": " << (r ? std::to_string(r->status) + " " + r->body : "no answer");
      return "";
    }
    return Json::parse(r->body)["id"].get<std::string>();
  }
  // Waits until `ok` holds for GET /v1/jobs's {"jobs": [...]}.
  template <typename F>
  bool WaitJobs(F ok, std::chrono::seconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      if (ok(Get("/v1/jobs")["jobs"])) return true;
      std::this_thread::sleep_for(200ms);
    }
    return false;
  }
};

Json JobBody(const std::string& queue, const std::string& name, int min, int max, int gpus, int priority, int duration_s) {
  return Json{{"name", name}, {"queue", queue}, {"replicas", {{"min", min}, {"max", max}}}, {"gpus", gpus},
              {"cpu_milli", 4000}, {"memory_mib", 16384}, {"priority", priority}, {"duration_s", duration_s}};
}

TEST_F(DashboardE2E, ThePageShowsTheDemoClusterInChromiumWithoutErrors) {
  if (!fs::exists(kChromium)) GTEST_SKIP() << kChromium << " not found; install it with scripts/setup.sh";
  if (!InPath("node")) GTEST_SKIP() << "node not found; install it with scripts/setup.sh";
  ASSERT_TRUE(fs::exists(fs::path(ESTUARY_SOURCE_DIR) / "dashboard/node_modules/playwright-core/package.json"))
      << "dashboard/node_modules lacks playwright-core: run scripts/setup.sh";

  // Tenant queues; `a` is listed before its parent and `a2` after `b`, so tree order is not list order.
  std::ofstream(dir_ + "/tokens", std::ios::app) << kOtherTenant << " tenant team-b\n";
  std::ofstream(dir_ + "/conf.yaml")
      << "{name: queues, queue: priority, preempt: {grace_s: 5}, absorb: true,\n"
         " queues: [{name: a, parent: org, guarantee: {gpus: 16}, weight: 2},\n"
         "          {name: org, guarantee: {gpus: 32}, tenants: [team-a]},\n"
         "          {name: b, guarantee: {gpus: 16}, tenants: [team-b]},\n"
         "          {name: a2, parent: org, guarantee: {gpus: 8}, limit: {gpus: 64}},\n"
         "          {name: idle, guarantee: {gpus: 8}}]}\n";
  StartServe({"--config", dir_ + "/conf.yaml"});
  StartAgent(64);
  httplib::Client c("127.0.0.1", port_);

  // The files over HTTP: / redirects to the page; content types; unknown files 404.
  auto root = c.Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 302);
  EXPECT_EQ(root->get_header_value("Location"), "/dashboard/");
  for (const auto& [path, type] : std::vector<std::pair<std::string, std::string>>{
           {"/dashboard/", "text/html; charset=utf-8"},
           {"/dashboard/dashboard.js", "application/javascript"},
           {"/dashboard/dashboard.css", "text/css"},
           {"/dashboard/chart.umd.js", "application/javascript"}}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_EQ(r->get_header_value("Content-Type"), type) << path;
    EXPECT_FALSE(r->body.empty()) << path;
  }
  auto missing = c.Get("/dashboard/missing.js");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);

  // The demo cluster: 64 nodes (2 ASWs, 1 RDMA-POD), jobs that run, one that finishes and one
  // that fits no node (16 GPUs per replica on 8-GPU nodes) and waits with a reason, one that
  // waits for its queue's limit (a2's pending GPUs); team-b's job holds 32 GPUs of b's guarantee
  // of 16 (borrowed).
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (Get("/v1/nodes")["nodes"].size() < 64 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(100ms);
  ASSERT_EQ(Get("/v1/nodes")["nodes"].size(), 64u);
  Submit(JobBody("a", "train-llm", 2, 2, 8, 300, 600));
  Submit(JobBody("a", "serve-api", 1, 1, 4, 800, 600));
  Submit(JobBody("a2", "sweep", 1, 4, 2, 300, 600));
  Submit(JobBody("a", "quick-eval", 1, 1, 1, 100, 1));
  Submit(JobBody("a", "too-big", 1, 1, 16, 500, 60));
  Submit(JobBody("a2", "a2-wide", 9, 9, 8, 300, 600));  // 72 GPUs: held back by a2's limit of 64
  Submit(JobBody("b", "b-batch", 4, 4, 8, 300, 600), kOtherTenant);
  const bool settled = WaitJobs(
      [](const Json& jobs) {
        std::map<std::string, const Json*> by;
        for (const Json& j : jobs) by[j["name"].get<std::string>()] = &j;
        auto state = [&](const char* name) { return by.count(name) ? (*by[name])["state"].get<std::string>() : ""; };
        return by.size() == 7 && state("train-llm") == "running" && state("serve-api") == "running" &&
               state("b-batch") == "running" && state("a2-wide") == "pending" &&
               state("quick-eval") == "succeeded" && state("too-big") == "pending" &&
               !(*by["too-big"])["reason"].get<std::string>().empty();
      },
      30s);
  ASSERT_TRUE(settled) << Get("/v1/jobs").dump();

  const char* keep = std::getenv("ESTUARY_DASHBOARD_SCREENSHOTS");
  const std::string shots = keep && *keep ? keep : dir_;
  fs::create_directories(shots);
  const std::string log = dir_ + "/check.log";
  const pid_t check = Spawn("node",
                            {std::string(ESTUARY_SOURCE_DIR) + "/tests/dashboard/dashboard_check.mjs",
                             "http://127.0.0.1:" + std::to_string(port_), kAdmin, shots, kTenant},
                            log);
  ASSERT_GT(check, 0);
  const int rc = WaitExit(check, 150s);
  const std::string out = ReadFile(log);
  std::fprintf(stderr, "%s", out.c_str());
  EXPECT_EQ(rc, 0) << "dashboard_check.mjs failed (exit " << rc << "):\n" << out;
  EXPECT_TRUE(fs::exists(fs::path(shots) / "dashboard.png"));
}

}  // namespace
}  // namespace estuary
