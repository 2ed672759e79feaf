// The HTTP API's contract (issue 7): status codes for missing tokens, other tenants' jobs,
// malformed or invalid bodies, oversized bodies, roles and node ownership, over a real server on
// a loopback port.
#include "server/http_api.h"

#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <cstdlib>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "store/sqlite_store.h"

namespace estuary {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr char kTokens[] =
    "# test tokens\n"
    "alice-token-0123456789 tenant alice\n"
    "bob-token-0123456789ab tenant bob\n"
    "admin-token-0123456789 admin ops\n"
    "agent-a-token-01234567 agent agent-a\n"
    "agent-b-token-01234567 agent agent-b\n";

const char kJob[] = R"({"name": "train", "replicas": {"min": 1, "max": 1}, "gpus": 1, "cpu_milli": 1000,
                       "memory_mib": 1024, "priority": 300})";

class HttpApiTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(HttpOptions{}); }
  void Start(HttpOptions o) {
    char tmpl[] = "/tmp/estuary-http-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto tokens = TokenTable::Parse(kTokens, "tokens.txt");
    ASSERT_TRUE(tokens.ok()) << tokens.status().message();
    tokens_ = std::move(*tokens);
    auto store = SqliteStore::Open(dir_);
    ASSERT_TRUE(store.ok());
    store_ = std::move(*store);
    auto service = Service::Open(store_.get(), &clock_, ServiceOptions{});
    ASSERT_TRUE(service.ok());
    service_ = std::move(*service);
    service_->Start();
    o.port = 0;
    api_ = std::make_unique<HttpApi>(service_.get(), &tokens_, o);
    ASSERT_TRUE(api_->Bind().ok());
    server_ = std::thread([this] { (void)api_->Serve(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", api_->port());
  }
  void TearDown() override {
    api_->Shutdown();
    server_.join();
    service_->Stop();
    api_.reset();
    service_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  static httplib::Headers As(const std::string& token) { return {{"Authorization", "Bearer " + token}}; }
  httplib::Result Post(const std::string& path, const std::string& body, const std::string& token) {
    return client_->Post(path.c_str(), As(token), body, "application/json");
  }
  std::string SubmitAsAlice() {
    auto r = Post("/v1/jobs", kJob, "alice-token-0123456789");
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 201) << r->body;
    return Json::parse(r->body)["id"].get<std::string>();
  }

  std::string dir_;
  RealClock clock_;
  TokenTable tokens_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<HttpApi> api_;
  std::thread server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpApiTest, ASubmittedJobGets201WithItsIdAndIsShownPending) {
  const std::string id = SubmitAsAlice();
  auto r = client_->Get(("/v1/jobs/" + id).c_str(), As("alice-token-0123456789"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const Json j = Json::parse(r->body);
  EXPECT_EQ(j["id"], id);
  EXPECT_EQ(j["state"], "pending");
  EXPECT_EQ(j["tenant"], "alice");
  auto list = client_->Get("/v1/jobs", As("alice-token-0123456789"));
  ASSERT_TRUE(list);
  EXPECT_EQ(Json::parse(list->body)["jobs"].size(), 1u);
}

TEST_F(HttpApiTest, NoTokenOrAnUnknownTokenIs401) {
  auto none = client_->Post("/v1/jobs", kJob, "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  auto bad = Post("/v1/jobs", kJob, "not-a-token-0123456789");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 401);
  auto get = client_->Get("/v1/jobs");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 401);
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 401);
}

TEST_F(HttpApiTest, AnotherTenantsJobIs404ForReadingAndCancelling) {
  const std::string id = SubmitAsAlice();
  auto get = client_->Get(("/v1/jobs/" + id).c_str(), As("bob-token-0123456789ab"));
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 404);
  auto del = client_->Delete(("/v1/jobs/" + id).c_str(), As("bob-token-0123456789ab"));
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 404);
  auto missing = client_->Get("/v1/jobs/999999", As("alice-token-0123456789"));
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  // The same 404 body whether the job exists or not: nothing reveals it.
  EXPECT_EQ(Json::parse(get->body)["error"].get<std::string>().find(id) != std::string::npos,
            Json::parse(missing->body)["error"].get<std::string>().find("999999") != std::string::npos);
}

TEST_F(HttpApiTest, MalformedJsonAndInvalidFieldsAre400WithAReason) {
  auto malformed = Post("/v1/jobs", "{\"name\": ", "alice-token-0123456789");
  ASSERT_TRUE(malformed);
  EXPECT_EQ(malformed->status, 400);
  EXPECT_FALSE(Json::parse(malformed->body)["error"].get<std::string>().empty());
  Json j = Json::parse(kJob);
  j["replicas"]["min"] = 0;
  auto invalid = Post("/v1/jobs", j.dump(), "alice-token-0123456789");
  ASSERT_TRUE(invalid);
  EXPECT_EQ(invalid->status, 400);
  EXPECT_THAT(Json::parse(invalid->body)["error"].get<std::string>(), HasSubstr("replicas.min"));
  auto nodes = Post("/v1/nodes", R"({"nodes": [{"name": "n0", "gpus": 99, "gpu_model": "H800"}]})", "agent-a-token-01234567");
  ASSERT_TRUE(nodes);
  EXPECT_EQ(nodes->status, 400);
  EXPECT_THAT(nodes->body, HasSubstr("gpus"));
}

TEST_F(HttpApiTest, AnOversizedBodyIs413) {
  std::string big = std::string(R"({"name": "x", "labels": {"a": ")") + std::string(2 << 20, 'a') + "\"}}";
  auto r = Post("/v1/jobs", big, "alice-token-0123456789");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
}

TEST_F(HttpApiTest, RolesAndNodeOwnersBoundWhatACallerMayDo) {
  auto agent_submits = Post("/v1/jobs", kJob, "agent-a-token-01234567");
  ASSERT_TRUE(agent_submits);
  EXPECT_EQ(agent_submits->status, 403);
  auto tenant_registers = Post("/v1/nodes", R"({"nodes": []})", "alice-token-0123456789");
  ASSERT_TRUE(tenant_registers);
  EXPECT_EQ(tenant_registers->status, 403);
  const std::string node = R"({"nodes": [{"name": "a0", "gpus": 8, "gpu_model": "H800", "cpu_milli": 64000,
      "memory_mib": 524288, "domains": {"data": ["az0", "spine0", "asw0"], "param": ["pod0"]}}]})";
  auto reg = Post("/v1/nodes", node, "agent-a-token-01234567");
  ASSERT_TRUE(reg);
  ASSERT_EQ(reg->status, 200) << reg->body;
  auto steal = Post("/v1/nodes", node, "agent-b-token-01234567");
  ASSERT_TRUE(steal);
  EXPECT_EQ(steal->status, 403);
  auto beat = Post("/v1/nodes/heartbeat", R"({"nodes": ["a0"]})", "agent-b-token-01234567");
  ASSERT_TRUE(beat);
  EXPECT_EQ(beat->status, 403);
  // A job starts on a0; agent-b may not report for it.
  SubmitAsAlice();
  std::string task;
  uint64_t instance = 0;
  for (int i = 0; i < 100 && task.empty(); ++i) {
    auto o = client_->Get("/v1/agent/orders?after=0&wait_ms=100", As("agent-a-token-01234567"));
    ASSERT_TRUE(o);
    ASSERT_EQ(o->status, 200);
    const Json orders = Json::parse(o->body)["orders"];
    if (!orders.empty()) {
      task = orders[0]["task"];
      instance = orders[0].value("instance", uint64_t{0});
    }
  }
  ASSERT_FALSE(task.empty());
  EXPECT_NE(instance, 0u);  // the start names its instance; reports of it name it too
  const std::string report =
      R"({"reports": [{"task": ")" + task + R"(", "state": "running", "instance": )" + std::to_string(instance) + "}]}";
  auto foreign = Post("/v1/agent/reports", report, "agent-b-token-01234567");
  ASSERT_TRUE(foreign);
  EXPECT_EQ(foreign->status, 403);
  auto own = Post("/v1/agent/reports", report, "agent-a-token-01234567");
  ASSERT_TRUE(own);
  EXPECT_EQ(own->status, 200);
}

TEST_F(HttpApiTest, MetricsAndTheOpenApiDocumentAreServed) {
  SubmitAsAlice();
  auto m = client_->Get("/metrics", As("admin-token-0123456789"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_THAT(m->body, HasSubstr("estuary_jobs_submitted_total 1\n"));
  auto doc = client_->Get("/v1/openapi.json");
  ASSERT_TRUE(doc);
  EXPECT_EQ(doc->status, 200);
  const Json j = Json::parse(doc->body, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["openapi"], "3.0.3");
  EXPECT_TRUE(j["paths"].contains("/v1/jobs/{id}"));
}

TEST_F(HttpApiTest, ExplainSaysWhenAJobsRequiredLevelRelaxes) {
  // One 8-GPU node (data: az0 / spine0 / asw0, the default planes' levels az, spine, asw); a job of
  // 2 x 8 GPUs that requires one asw and accepts one spine after 3600 s cannot start: its
  // explanation names the level it requires and when the next one up becomes acceptable.
  const std::string node = R"({"nodes": [{"name": "a0", "gpus": 8, "gpu_model": "H800", "cpu_milli": 64000,
      "memory_mib": 524288, "domains": {"data": ["az0", "spine0", "asw0"], "param": ["pod0"]}}]})";
  ASSERT_EQ(Post("/v1/nodes", node, "agent-a-token-01234567")->status, 200);
  Json gang = Json::parse(kJob);
  gang["replicas"] = 2;
  gang["gpus"] = 8;
  gang["plane"] = "data";
  gang["required_level"] = "asw";
  gang["required_max_wait_s"] = 3600;
  auto r = Post("/v1/jobs", gang.dump(), "alice-token-0123456789");
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string id = Json::parse(r->body)["id"];
  Json e;
  for (int i = 0; i < 100; ++i) {  // until the loop has seen it
    auto x = client_->Get(("/v1/jobs/" + id + "/explain").c_str(), As("alice-token-0123456789"));
    ASSERT_EQ(x->status, 200);
    e = Json::parse(x->body);
    if (e.contains("topology")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(e.contains("topology")) << e.dump();
  EXPECT_THAT(e["topology"].get<std::string>(), ::testing::StartsWith("requires one asw; accepts one spine at t="));
  // Without the field the job waits for its level forever and says only that.
  gang.erase("required_max_wait_s");
  r = Post("/v1/jobs", gang.dump(), "alice-token-0123456789");
  ASSERT_EQ(r->status, 201);
  const std::string id2 = Json::parse(r->body)["id"];
  for (int i = 0; i < 100; ++i) {
    e = Json::parse(client_->Get(("/v1/jobs/" + id2 + "/explain").c_str(), As("alice-token-0123456789"))->body);
    if (e.contains("topology")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(e.value("topology", ""), "requires one asw");
}

TEST_F(HttpApiTest, ExplainReservationsAndNodeActionsAnswerOverHttp) {
  const std::string node = R"({"nodes": [{"name": "a0", "gpus": 8, "gpu_model": "H800", "cpu_milli": 64000,
      "memory_mib": 524288, "domains": {"data": ["az0", "spine0", "asw0"], "param": ["pod0"]}}]})";
  ASSERT_EQ(Post("/v1/nodes", node, "agent-a-token-01234567")->status, 200);
  Json big = Json::parse(kJob);
  big["gpus"] = 16;  // more than any node has
  auto r = Post("/v1/jobs", big.dump(), "alice-token-0123456789");
  ASSERT_EQ(r->status, 201);
  const std::string id = Json::parse(r->body)["id"];
  Json e;
  for (int i = 0; i < 100; ++i) {  // until the loop has seen it
    auto x = client_->Get(("/v1/jobs/" + id + "/explain").c_str(), As("alice-token-0123456789"));
    ASSERT_EQ(x->status, 200);
    e = Json::parse(x->body);
    if (!e["shortfall"].get<std::string>().empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(e["fits_now"], false);
  EXPECT_EQ(e["reclaim_feasible"], false);
  EXPECT_FALSE(e["advice"].get<std::string>().empty());
  EXPECT_EQ(client_->Get(("/v1/jobs/" + id + "/explain").c_str(), As("bob-token-0123456789ab"))->status, 404);
  // Nothing can hold it: 400 with the reason.
  auto resv = Post("/v1/reservations", Json{{"job", id}, {"ttl_s", 60}}.dump(), "alice-token-0123456789");
  EXPECT_EQ(resv->status, 400);
  EXPECT_EQ(Post("/v1/reservations", R"({"job": "x1"})", "alice-token-0123456789")->status, 400);
  EXPECT_EQ(Post("/v1/reservations", R"({"job": "1", "colour": 1})", "alice-token-0123456789")->status, 400);
  auto list = client_->Get("/v1/reservations", As("alice-token-0123456789"));
  EXPECT_EQ(Json::parse(list->body)["reservations"].size(), 0u);
  EXPECT_EQ(client_->Delete("/v1/reservations/12345", As("alice-token-0123456789"))->status, 404);
  // Node actions: admins only.
  EXPECT_EQ(client_->Post("/v1/nodes/a0/cordon", As("alice-token-0123456789"), "", "application/json")->status, 403);
  auto cordon = client_->Post("/v1/nodes/a0/cordon", As("admin-token-0123456789"), "", "application/json");
  ASSERT_EQ(cordon->status, 200) << cordon->body;
  EXPECT_EQ(Json::parse(cordon->body)["state"], "cordoned");
  EXPECT_EQ(client_->Post("/v1/nodes/zz/drain", As("admin-token-0123456789"), "", "application/json")->status, 404);
}

TEST_F(HttpApiTest, ABadPatchOfAJobIs400NamingTheField) {
  const std::string id = SubmitAsAlice();
  const std::string path = "/v1/jobs/" + id;
  for (const char* body : {R"({"replicas": {"min": 0}})", R"({"replicas": {"max": "2"}})", R"({"replicas": {"step": 2}})",
                           R"({"replicas": 3})", R"({"name": "x"})", R"({"replicas": {"min": 3, "max": 2}})", "[1]"}) {
    auto r = client_->Patch(path.c_str(), As("alice-token-0123456789"), body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body;
    EXPECT_THAT(r->body, ::testing::AnyOf(HasSubstr("replicas"), HasSubstr("field 'name'"), HasSubstr("malformed")))
        << body;
  }
  auto ok = client_->Patch(path.c_str(), As("alice-token-0123456789"), R"({"replicas": {"max": 2}})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(Json::parse(ok->body)["replicas"]["max"], 2);
  EXPECT_EQ(client_->Patch(path.c_str(), As("bob-token-0123456789ab"), R"({"replicas": {"max": 3}})", "application/json")->status,
            404);
}

TEST_F(HttpApiTest, AnAdminReadsAndChangesTheConfiguration) {
  auto get = client_->Get("/v1/config", As("admin-token-0123456789"));
  ASSERT_EQ(get->status, 200);
  EXPECT_EQ(Json::parse(get->body)["grace_s"], 60);
  EXPECT_EQ(client_->Get("/v1/config", As("alice-token-0123456789"))->status, 403);
  auto put = client_->Put("/v1/config", As("admin-token-0123456789"), R"({"grace_s": 5, "absorb": false})", "application/json");
  ASSERT_EQ(put->status, 200) << put->body;
  EXPECT_EQ(Json::parse(put->body)["grace_s"], 5);
  EXPECT_EQ(Json::parse(put->body)["absorb"], false);
  EXPECT_EQ(client_->Put("/v1/config", As("admin-token-0123456789"), R"({"grace_s": "5"})", "application/json")->status, 400);
  EXPECT_EQ(client_->Put("/v1/config", As("admin-token-0123456789"), R"({"policy": "fgd"})", "application/json")->status, 400);
  EXPECT_EQ(client_->Put("/v1/config", As("admin-token-0123456789"), R"({"grace_s": 999999})", "application/json")->status, 400);
}

// PUT /v1/queues: bad input is 400 with one line naming the queue and the field; nothing changes.
TEST_F(HttpApiTest, ABadQueueTreeIs400NamingTheQueueAndTheFieldAndChangesNothing) {
  const std::string admin = "admin-token-0123456789";
  const auto put = [&](const std::string& body) {
    auto r = client_->Put("/v1/queues", As(admin), body, "application/json");
    EXPECT_TRUE(r);
    if (!r) return std::pair{0, std::string()};
    const Json j = Json::parse(r->body, nullptr, false);
    return std::pair{r->status, j.is_object() && j.contains("error") ? j["error"].get<std::string>() : r->body};
  };
  using P = std::pair<int, std::string>;
  EXPECT_EQ(put(R"({"queues": [{"name": "org", "guarantee": {"gpus": 8}}, {"name": "t", "parent": "org", "guarantee": {"gpus": 9}}]})"),
            (P{400, "queue 't': field 'guarantee': the children of 'org' are guaranteed 9 GPUs, above its own 8"}));
  EXPECT_EQ(put(R"({"queues": [{"name": "a", "guarantee": {"gpus": -1}}]})"),
            (P{400, "field 'queues[0].guarantee.gpus': -1 is below 0"}));
  EXPECT_EQ(put(R"({"queues": [{"name": "a", "guarantee": {"gpus": "eight"}}]})"),
            (P{400, "field 'queues[0].guarantee.gpus': expected an integer"}));
  const P cycle = put(R"({"queues": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]})");
  EXPECT_EQ(cycle.first, 400);
  EXPECT_EQ(cycle.second.rfind("queue 'a': field 'parent'", 0), 0u) << cycle.second;
  EXPECT_NE(cycle.second.find("cycle"), std::string::npos) << cycle.second;
  const P limit = put(R"({"queues": [{"name": "a", "guarantee": {"gpus": 8}, "limit": {"gpus": 4}}]})");
  EXPECT_EQ(limit.first, 400);
  EXPECT_EQ(limit.second.rfind("queue 'a': field 'limit'", 0), 0u) << limit.second;
  EXPECT_EQ(put(R"({"queues": [{"name": "a"}], "sharing": {"reclaim_to": "all"}})"),
            (P{400, "field 'sharing.reclaim_to': 'all' is not one of guarantee, fair-share"}));
  EXPECT_EQ(put(R"({"sharing": {}})"), (P{400, "field 'queues': missing (an empty list removes every queue)"}));
  EXPECT_EQ(put(R"({"queues": [], "quota": 1})"), (P{400, "field 'quota': unknown field"}));
  EXPECT_EQ(client_->Put("/v1/queues", As("alice-token-0123456789"), R"({"queues": []})", "application/json")->status, 403);
  // Nothing changed: still no queues, and a job naming one is refused.
  auto get = client_->Get("/v1/queues", As(admin));
  ASSERT_EQ(get->status, 200);
  EXPECT_TRUE(Json::parse(get->body)["queues"].empty());
  auto job = Post("/v1/jobs", R"({"name": "j", "gpus": 1, "queue": "a"})", "alice-token-0123456789");
  EXPECT_EQ(job->status, 400);
  EXPECT_EQ(Json::parse(job->body)["error"], "field 'queue': 'a': the service has no queues");
  // A good tree is taken.
  const P ok = put(R"({"queues": [{"name": "a", "guarantee": {"gpus": {"H800": 8}}, "tenants": ["alice"]}]})");
  EXPECT_EQ(ok.first, 200) << ok.second;
  get = client_->Get("/v1/queues", As("alice-token-0123456789"));
  ASSERT_EQ(get->status, 200);
  EXPECT_EQ(Json::parse(get->body)["queues"][0]["gpus"]["guaranteed"], 8);
}

TEST_F(HttpApiTest, StandbyWindowsAreValidatedNamingTheFieldAndBelongToTheJobsTenant) {
  const std::string id = SubmitAsAlice();
  const int64_t soon = RealClock().NowMs() + 3'600'000;
  const std::string to = std::to_string(soon);
  for (const std::string& body :
       {std::string(R"({"job": 7})"), R"({"job": ")" + id + R"("})", R"({"job": ")" + id + R"(", "to_ms": "x", "replicas": 1})",
        R"({"job": ")" + id + R"(", "to_ms": )" + to + R"(, "replicas": 0})",
        R"({"job": ")" + id + R"(", "to_ms": )" + to + R"(, "replicas": 2})",
        R"({"job": ")" + id + R"(", "to_ms": 5, "replicas": 1})",
        R"({"job": ")" + id + R"(", "from_ms": -1, "to_ms": )" + to + R"(, "replicas": 1})",
        R"({"job": ")" + id + R"(", "to_ms": )" + to + R"(, "replicas": 1, "colour": "red"})", std::string("[]")}) {
    auto r = Post("/v1/standby", body, "alice-token-0123456789");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body;
    EXPECT_THAT(r->body, ::testing::AnyOf(HasSubstr("field '"), HasSubstr("malformed"))) << body;
  }
  const std::string good = R"({"job": ")" + id + R"(", "to_ms": )" + to + R"(, "replicas": 1})";
  EXPECT_EQ(Post("/v1/standby", good, "bob-token-0123456789ab")->status, 404);  // not bob's job
  EXPECT_EQ(Post("/v1/standby", good, "agent-a-token-01234567")->status, 403);
  auto r = Post("/v1/standby", good, "alice-token-0123456789");
  ASSERT_EQ(r->status, 201) << r->body;
  const Json w = Json::parse(r->body);
  EXPECT_EQ(w["job"], id);
  EXPECT_EQ(w["to_ms"], soon);
  EXPECT_EQ(w["replicas"], 1);
  EXPECT_EQ(Json::parse(client_->Get("/v1/standby", As("alice-token-0123456789"))->body)["windows"].size(), 1u);
  EXPECT_EQ(Json::parse(client_->Get("/v1/standby", As("bob-token-0123456789ab"))->body)["windows"].size(), 0u);
  const std::string path = "/v1/standby/" + w["id"].get<std::string>();
  EXPECT_EQ(client_->Delete(path.c_str(), As("bob-token-0123456789ab"))->status, 404);
  EXPECT_EQ(client_->Delete(path.c_str(), As("alice-token-0123456789"))->status, 200);
  EXPECT_EQ(client_->Delete(path.c_str(), As("alice-token-0123456789"))->status, 404);
  // Defragmentation is an admin's; the configuration takes its interval.
  EXPECT_EQ(Post("/v1/defrag", "{}", "alice-token-0123456789")->status, 403);
  auto d = Post("/v1/defrag", "{}", "admin-token-0123456789");
  ASSERT_EQ(d->status, 200) << d->body;
  EXPECT_EQ(Json::parse(d->body)["moves"], 0);  // nothing runs
  EXPECT_EQ(client_->Put("/v1/config", As("admin-token-0123456789"), R"({"defrag_interval_s": -5})", "application/json")->status, 400);
  auto put = client_->Put("/v1/config", As("admin-token-0123456789"), R"({"defrag_interval_s": 300})", "application/json");
  ASSERT_EQ(put->status, 200) << put->body;
  EXPECT_EQ(Json::parse(put->body)["defrag_interval_s"], 300);
}

TEST_F(HttpApiTest, AReportNamesItsNodeAsAStringAndItsInstanceAsANonNegativeInteger) {
  for (const char* body : {R"({"reports": [{"task": "1-0", "state": "running", "node": 5}]})",
                           R"({"reports": [{"task": "1-0", "state": "paused"}]})",
                           R"({"reports": [{"task": "1-0", "state": "running", "instance": -3}]})",
                           R"({"reports": [{"task": "1-0", "state": "running", "instance": "7"}]})"}) {
    auto r = Post("/v1/agent/reports", body, "agent-a-token-01234567");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body;
    EXPECT_THAT(r->body, HasSubstr("reports[0]")) << body;
  }
}

TEST(HttpApiTls, WithACertificateAndKeyItServesHttpsOnly) {
  char tmpl[] = "/tmp/estuary-tls-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -keyout " + dir + "/key.pem -out " + dir +
                          "/cert.pem -days 1 -subj /CN=127.0.0.1 >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl could not make a test certificate";
  auto tokens = TokenTable::Parse(kTokens, "tokens.txt");
  ASSERT_TRUE(tokens.ok());
  auto store = SqliteStore::Open(dir + "/data");
  ASSERT_TRUE(store.ok());
  RealClock clock;
  auto service = Service::Open(store->get(), &clock, ServiceOptions{});
  ASSERT_TRUE(service.ok());
  HttpOptions o;
  o.tls_cert = dir + "/cert.pem";
  o.tls_key = dir + "/key.pem";
  {
    HttpApi api(service->get(), &*tokens, o);
    ASSERT_TRUE(api.Bind().ok());
    std::thread t([&] { (void)api.Serve(); });
    httplib::SSLClient tls("127.0.0.1", api.port());
    tls.enable_server_certificate_verification(false);
    auto r = tls.Get("/v1/jobs", {{"Authorization", "Bearer alice-token-0123456789"}});
    httplib::Client plain("127.0.0.1", api.port());
    plain.set_read_timeout(2, 0);
    auto p = plain.Get("/v1/openapi.json");
    api.Shutdown();
    t.join();
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200);
    EXPECT_FALSE(p && p->status == 200);  // no plain HTTP on a TLS port
  }
  // A key that does not load is bad input naming the files.
  HttpOptions bad;
  bad.tls_cert = dir + "/nope.pem";
  bad.tls_key = dir + "/key.pem";
  HttpApi api(service->get(), &*tokens, bad);
  const Status st = api.Bind();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("nope.pem"));
  service->reset();
  store->reset();
  std::filesystem::remove_all(dir);
}

TEST(HttpApiRate, ACallerOverItsRateGets429) {
  char tmpl[] = "/tmp/estuary-http-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto tokens = TokenTable::Parse(kTokens, "tokens.txt");
  ASSERT_TRUE(tokens.ok());
  auto store = SqliteStore::Open(dir);
  ASSERT_TRUE(store.ok());
  RealClock clock;
  auto service = Service::Open(store->get(), &clock, ServiceOptions{});
  ASSERT_TRUE(service.ok());
  HttpOptions o;
  o.rate_per_s = 0.001;
  o.burst = 3;
  HttpApi api(service->get(), &*tokens, o);
  ASSERT_TRUE(api.Bind().ok());
  std::thread t([&] { (void)api.Serve(); });
  httplib::Client c("127.0.0.1", api.port());
  std::vector<int> codes;
  for (int i = 0; i < 5; ++i) codes.push_back(c.Get("/v1/jobs", {{"Authorization", "Bearer alice-token-0123456789"}})->status);
  // Another caller has its own bucket.
  codes.push_back(c.Get("/v1/jobs", {{"Authorization", "Bearer bob-token-0123456789ab"}})->status);
  api.Shutdown();
  t.join();
  EXPECT_EQ(codes, (std::vector<int>{200, 200, 200, 429, 429, 200}));
  service->reset();
  store->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace estuary
