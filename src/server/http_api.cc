#include "server/http_api.h"

#include <httplib.h>

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <nlohmann/json.hpp>

#include "api/queue_json.h"
#include "common/base64.h"
#include "engine/history.h"
#include "server/dashboard.h"
#include "server/openapi.h"

namespace estuary {
namespace {

using Json = nlohmann::json;

int HttpStatus(const Status& st) {
  switch (st.code()) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kInternal: return 500;
  }
  return 500;
}

void Reply(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void Fail(httplib::Response& res, int status, const std::string& why) { Reply(res, status, Json{{"error", why}}); }

void Fail(httplib::Response& res, const Status& st) { Fail(res, HttpStatus(st), st.message()); }

Json JobJson(const JobView& v) {
  Json j;
  j["id"] = std::to_string(v.id);
  j["name"] = v.request.name;
  if (!v.request.job_class.empty()) j["class"] = v.request.job_class;
  j["tenant"] = v.tenant;
  j["state"] = std::string(JobPhaseName(v.phase));
  j["replicas"] = {{"min", v.request.min_replicas}, {"max", v.request.max_replicas}, {"step", v.request.step}};
  j["gpus"] = v.request.gpus;
  j["gpu_milli"] = v.request.gpu_milli;
  j["cpu_milli"] = v.request.cpu_milli;
  j["memory_mib"] = v.request.memory_mib;
  j["priority"] = v.request.priority;
  j["preemptible"] = v.request.preemptible;
  if (!v.request.models.empty()) j["models"] = v.request.models;
  if (!v.request.plane.empty()) j["plane"] = v.request.plane;
  if (!v.request.required_level.empty()) j["required_level"] = v.request.required_level;
  if (!v.request.preferred_level.empty()) j["preferred_level"] = v.request.preferred_level;
  j["duration_s"] = v.request.duration_s;
  j["checkpoint_interval_s"] = v.request.checkpoint_interval_s;
  j["checkpoint_on_notice_s"] = v.request.checkpoint_on_notice_s;
  j["restart_cost_s"] = v.request.restart_cost_s;
  j["usable_step"] = v.request.usable_step;
  if (!v.request.labels.empty()) j["labels"] = v.request.labels;
  if (!v.request.queue.empty()) j["queue"] = v.request.queue;
  // The workload, as the job schema writes it (EncodeJobRequest: a shell command as a string).
  const Json request = Json::parse(EncodeJobRequest(v.request));
  for (const char* k : {"command", "env", "workdir", "checkpoint_signal", "hooks"}) {
    if (request.contains(k)) j[k] = request[k];
  }
  j["bound_replicas"] = v.bound_replicas;
  j["running_replicas"] = v.running_replicas;
  j["standby_replicas"] = v.standby_replicas;
  j["migrating_replicas"] = v.migrating_replicas;
  j["submitted_ms"] = v.submitted_ms;
  j["running_ms"] = v.running_ms;
  j["ended_ms"] = v.ended_ms;
  j["restarts"] = v.restarts;
  j["reason"] = v.reason;
  if (!v.where.empty()) {
    Json where = Json::array();
    for (const JobView::Where& w : v.where) {
      where.push_back({{"replica", w.replica}, {"node", w.node}, {"gpus", w.gpus}, {"state", w.state}});
    }
    j["where"] = std::move(where);
  }
  return j;
}

Json NodeJson(const NodeView& n) {
  Json j;
  j["name"] = n.name;
  j["agent"] = n.agent;
  j["gpus"] = n.gpus;
  j["gpu_model"] = n.gpu_model;
  if (!n.address.empty()) j["address"] = n.address;
  j["cpu_milli"] = n.cpu_milli;
  j["memory_mib"] = n.memory_mib;
  Json d = Json::object();
  for (const auto& [plane, names] : n.domains) d[plane] = names;
  j["domains"] = d;
  j["state"] = n.state;
  j["gpu_milli_used"] = n.gpu_milli_used;
  j["last_heartbeat_ms"] = n.last_heartbeat_ms;
  return j;
}

Json WindowJson(const Service::StandbyWindowView& w) {
  return Json{{"id", std::to_string(w.id)}, {"job", std::to_string(w.job)}, {"tenant", w.tenant},
              {"from_ms", w.from_ms}, {"to_ms", w.to_ms}, {"replicas", w.replicas}};
}

std::string_view OpName(Order::Op op) {
  switch (op) {
    case Order::Op::kStart: return "start";
    case Order::Op::kStop: return "stop";
    case Order::Op::kEvict: return "evict";
    case Order::Op::kStandby: return "standby";
    case Order::Op::kResume: return "resume";
    case Order::Op::kMigrate: return "migrate";
  }
  return "stop";
}

Json ReservationJson(const Service::ReservationView& r) {
  return Json{{"id", std::to_string(r.job)}, {"job", std::to_string(r.job)}, {"tenant", r.tenant}, {"nodes", r.nodes},
              {"created_ms", r.created_ms}, {"expires_ms", r.expires_ms}};
}

// A bounded name: 1..128 characters of [A-Za-z0-9._-].
bool GoodName(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  }
  return true;
}

// Parses a JSON body that must be an object; nullopt (and a 400) otherwise.
std::optional<Json> Body(const httplib::Request& req, httplib::Response& res) {
  Json j = Json::parse(req.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    Fail(res, 400, "malformed JSON: the body must be one JSON object");
    return std::nullopt;
  }
  return j;
}

constexpr int64_t kLogReadBytes = 1 << 20;  // one answer (or streamed part) of GET .../logs

bool GoodAddress(const std::string& a) {
  return !a.empty() && a.size() <= 253 &&
         a.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.:-") == std::string::npos;
}

StatusOr<std::vector<NodeRegistration>> DecodeNodes(const Json& body) {
  if (!body.contains("nodes") || !body["nodes"].is_array()) return InvalidArgument("field 'nodes': expected an array");
  if (body["nodes"].size() > 5000) return InvalidArgument("field 'nodes': at most 5000 nodes per request");
  std::vector<NodeRegistration> out;
  size_t i = 0;
  for (const Json& n : body["nodes"]) {
    const std::string at = "field 'nodes[" + std::to_string(i++) + "].";
    if (!n.is_object()) return InvalidArgument(at.substr(0, at.size() - 1) + "': expected an object");
    for (auto it = n.begin(); it != n.end(); ++it) {
      static const std::set<std::string> kKeys = {"name", "gpus", "gpu_model", "cpu_milli", "memory_mib", "domains", "address"};
      if (!kKeys.count(it.key())) return InvalidArgument(at + it.key() + "': unknown field");
    }
    NodeRegistration r;
    if (!n.contains("name") || !n["name"].is_string() || !GoodName(n["name"].get<std::string>())) {
      return InvalidArgument(at + "name': expected 1 to 128 characters of [A-Za-z0-9._-]");
    }
    r.name = n["name"].get<std::string>();
    auto integer = [&](const char* key, int64_t lo, int64_t hi, int64_t* v) -> Status {
      if (!n.contains(key)) return Status::Ok();
      if (!n[key].is_number_integer()) return InvalidArgument(at + key + "': expected an integer");
      const int64_t x = n[key].get<int64_t>();
      if (x < lo || x > hi) return InvalidArgument(at + key + "': " + std::to_string(x) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      *v = x;
      return Status::Ok();
    };
    int64_t gpus = 0;
    ESTUARY_RETURN_IF_ERROR(integer("gpus", 0, kMaxGpusPerNode, &gpus));
    r.gpus = static_cast<int32_t>(gpus);
    ESTUARY_RETURN_IF_ERROR(integer("cpu_milli", 0, int64_t{1} << 40, &r.cpu_milli));
    ESTUARY_RETURN_IF_ERROR(integer("memory_mib", 0, int64_t{1} << 40, &r.memory_mib));
    if (n.contains("gpu_model")) {
      if (!n["gpu_model"].is_string() || n["gpu_model"].get<std::string>().size() > 64) {
        return InvalidArgument(at + "gpu_model': expected a string of at most 64 characters");
      }
      r.gpu_model = n["gpu_model"].get<std::string>();
    }
    if (r.gpus > 0 && r.gpu_model.empty()) return InvalidArgument(at + "gpu_model': required with gpus > 0");
    if (n.contains("address")) {
      if (!n["address"].is_string() || !GoodAddress(n["address"].get<std::string>())) {
        return InvalidArgument(at + "address': expected a host name or IP address (1 to 253 characters of [A-Za-z0-9.:-])");
      }
      r.address = n["address"].get<std::string>();
    }
    if (n.contains("domains")) {
      if (!n["domains"].is_object()) return InvalidArgument(at + "domains': expected an object");
      for (auto it = n["domains"].begin(); it != n["domains"].end(); ++it) {
        if (!it.value().is_array() || it.value().size() > 8) {
          return InvalidArgument(at + "domains." + it.key() + "': expected an array of at most 8 names");
        }
        std::vector<std::string> names;
        for (const Json& x : it.value()) {
          if (!x.is_string() || !GoodName(x.get<std::string>())) {
            return InvalidArgument(at + "domains." + it.key() + "': names are 1 to 128 characters of [A-Za-z0-9._-]");
          }
          names.push_back(x.get<std::string>());
        }
        r.domains.emplace_back(it.key(), std::move(names));
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

StatusOr<std::vector<TaskReport>> DecodeReports(const Json& body) {
  if (!body.contains("reports") || !body["reports"].is_array()) return InvalidArgument("field 'reports': expected an array");
  std::vector<TaskReport> out;
  size_t i = 0;
  for (const Json& r : body["reports"]) {
    const std::string at = "field 'reports[" + std::to_string(i++) + "].";
    if (!r.is_object() || !r.contains("task") || !r["task"].is_string()) return InvalidArgument(at + "task': expected a string");
    if (!r.contains("state") || !r["state"].is_string()) return InvalidArgument(at + "state': expected a string");
    TaskReport t;
    t.task = r["task"].get<std::string>();
    if (r.contains("node")) {
      if (!r["node"].is_string() || r["node"].get<std::string>().size() > 128) {
        return InvalidArgument(at + "node': expected a node name");
      }
      t.node = r["node"].get<std::string>();
    }
    if (r.contains("reason")) {
      if (!r["reason"].is_string() || r["reason"].get<std::string>().size() > 512) {
        return InvalidArgument(at + "reason': expected a string of at most 512 bytes");
      }
      t.reason = r["reason"].get<std::string>();
    }
    if (r.contains("instance")) {
      if (!r["instance"].is_number_unsigned()) return InvalidArgument(at + "instance': expected a non-negative integer");
      t.instance = r["instance"].get<uint64_t>();
    }
    const std::string s = r["state"].get<std::string>();
    if (s == "running") t.state = TaskReport::State::kRunning;
    else if (s == "succeeded") t.state = TaskReport::State::kSucceeded;
    else if (s == "failed") t.state = TaskReport::State::kFailed;
    else if (s == "stopped") t.state = TaskReport::State::kStopped;
    else if (s == "standby") t.state = TaskReport::State::kStandby;
    else if (s == "standby-failed") t.state = TaskReport::State::kStandbyFailed;
    else {
      return InvalidArgument(at + "state': '" + s.substr(0, 32) +
                             "' is not one of running, succeeded, failed, stopped, standby, standby-failed");
    }
    out.push_back(std::move(t));
  }
  return out;
}

// The body's "job": a job id as a string of 1 to 19 digits; nullopt otherwise.
std::optional<uint64_t> JobIdField(const Json& body) {
  if (!body.contains("job") || !body["job"].is_string()) return std::nullopt;
  const std::string& v = body["job"].get_ref<const std::string&>();
  if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoull(v);
}

// A non-negative integer query parameter, `fallback` when absent; nullopt when malformed.
std::optional<uint64_t> QueryInt(const httplib::Request& req, const char* key, uint64_t fallback) {
  if (!req.has_param(key)) return fallback;
  const std::string v = req.get_param_value(key);
  if (v.empty() || v.size() > 19) return std::nullopt;
  uint64_t x = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    x = x * 10 + static_cast<uint64_t>(c - '0');
  }
  return x;
}

}  // namespace

struct HttpApi::Impl {
  Service* service = nullptr;
  const TokenTable* tokens = nullptr;
  HttpOptions opt;
  std::unique_ptr<httplib::Server> server;
  // A follower's (HttpApi::Follower): the leader's URL, read at most every 200 ms.
  std::function<std::optional<std::string>()> leader;
  std::mutex leader_mu;
  std::optional<std::string> leader_url;
  std::chrono::steady_clock::time_point leader_read_at{};
  bool leader_read = false;

  void FollowerRoutes() {
    const auto answer = [this](const httplib::Request& req, httplib::Response& res) {
      std::optional<std::string> url;
      {
        std::lock_guard lk(leader_mu);
        const auto now = std::chrono::steady_clock::now();
        if (!leader_read || now - leader_read_at >= std::chrono::milliseconds(200)) {
          leader_url = leader();
          leader_read_at = now;
          leader_read = true;
        }
        url = leader_url;
      }
      if (!url) return Fail(res, 503, "not the leader, and no replica leads yet");
      std::string base = *url;
      while (!base.empty() && base.back() == '/') base.pop_back();
      res.set_header("Location", base + req.target);
      Reply(res, 307, Json{{"error", "not the leader"}, {"leader", *url}});
    };
    const char* any = R"(/.*)";
    server->Get(any, answer);
    server->Post(any, answer);
    server->Put(any, answer);
    server->Patch(any, answer);
    server->Delete(any, answer);
  }
  // Token buckets per caller name.
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point at;
  };
  std::mutex rate_mu;
  std::map<std::string, Bucket> buckets;

  // The caller, or nullptr after answering 401 / 429.
  const Principal* Auth(const httplib::Request& req, httplib::Response& res) {
    const std::string h = req.get_header_value("Authorization");
    const Principal* p = nullptr;
    if (h.size() > 7 && h.compare(0, 7, "Bearer ") == 0) p = tokens->Find(std::string_view(h).substr(7));
    if (p == nullptr) {
      res.set_header("WWW-Authenticate", "Bearer");
      Fail(res, 401, "a valid bearer token is required");
      return nullptr;
    }
    std::lock_guard lk(rate_mu);
    Bucket& b = buckets[p->name];
    const auto now = std::chrono::steady_clock::now();
    if (b.at.time_since_epoch().count() == 0) b.tokens = opt.burst;
    else b.tokens = std::min(opt.burst, b.tokens + std::chrono::duration<double>(now - b.at).count() * opt.rate_per_s);
    b.at = now;
    if (b.tokens < 1) {
      Fail(res, 429, "rate limit: at most " + std::to_string(static_cast<int64_t>(opt.rate_per_s)) + " requests per second");
      return nullptr;
    }
    b.tokens -= 1;
    return p;
  }

  bool Allowed(const Principal& p, httplib::Response& res, std::initializer_list<estuary::Role> allowed) {
    for (estuary::Role r : allowed) {
      if (p.role == r) return true;
    }
    Fail(res, 403, "role '" + std::string(RoleName(p.role)) + "' may not do this");
    return false;
  }

  // Every route, by resource (FollowerRoutes: a replica that does not lead).
  void Routes() {
    JobRoutes();
    AgentRoutes();
    ExplainAndNodeActionRoutes();
    ReservationRoutes();
    ConfigRoutes();
    QueueRoutes();
    StandbyRoutes();
    ViewRoutes();
    LogRoutes();
  }
  // Replicas' logs: agents send them, tenants read their own jobs'.
  void LogRoutes() {
    httplib::Server& s = *server;
    s.Post("/v1/agent/logs", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kAgent})) return;
      const auto body = Body(req, res);
      if (!body) return;
      const Json& b = *body;
      for (const char* key : {"task", "node", "data"}) {
        if (!b.contains(key) || !b[key].is_string()) return Fail(res, 400, std::string("field '") + key + "': expected a string");
      }
      for (const char* key : {"run", "offset"}) {
        if (!b.contains(key) || !b[key].is_number_integer() || b[key].get<int64_t>() < 0) {
          return Fail(res, 400, std::string("field '") + key + "': expected a non-negative integer");
        }
      }
      const std::optional<std::string> data = DecodeBase64(b["data"].get_ref<const std::string&>());
      if (!data) return Fail(res, 400, "field 'data': expected base64");
      const Status st = service->AppendLog(*p, b["task"].get<std::string>(), b["node"].get<std::string>(), b["run"].get<int64_t>(),
                                           b["offset"].get<int64_t>(), *data);
      if (!st.ok()) return Fail(res, st);
      Reply(res, 200, Json::object());
    });
    // ?replica=R (default 0) &from=BYTE (default 0) &follow=1: the log as text/plain; with follow
    // the answer streams until the job has ended and everything it wrote was sent.
    s.Get(R"(/v1/jobs/(\d{1,19})/logs)", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kTenant, Role::kAdmin})) return;
      const auto replica = QueryInt(req, "replica", 0), from = QueryInt(req, "from", 0), follow = QueryInt(req, "follow", 0);
      if (!replica || *replica > 100000) return Fail(res, 400, "query 'replica': expected a replica number");
      if (!from || *from > (uint64_t{1} << 62)) return Fail(res, 400, "query 'from': expected a byte offset");
      if (!follow || *follow > 1) return Fail(res, 400, "query 'follow': expected 0 or 1");
      const uint64_t id = std::stoull(req.matches[1]);
      const auto r = static_cast<int32_t>(*replica);
      auto first = service->ReadLog(*p, id, r, static_cast<int64_t>(*from), kLogReadBytes);
      if (!first.ok()) return Fail(res, first.status());
      if (*follow == 0) {
        res.set_header("X-Estuary-Next-Offset", std::to_string(first->next));
        res.set_content(first->data, "text/plain; charset=utf-8");
        return;
      }
      const Principal who = *p;
      auto at = std::make_shared<int64_t>(static_cast<int64_t>(*from));
      res.set_chunked_content_provider("text/plain; charset=utf-8", [this, who, id, r, at](size_t, httplib::DataSink& sink) {
        for (int idle = 0; sink.is_writable();) {
          const auto got = service->ReadLog(who, id, r, *at, kLogReadBytes);
          if (!got.ok()) break;
          if (!got->data.empty()) {
            if (!sink.write(got->data.data(), got->data.size())) return false;
            *at = got->next;
            continue;
          }
          // Nothing new: done once the job has ended and two more looks found nothing (its last
          // output may still be on its way from the agent).
          if (got->ended && ++idle > 10) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
        sink.done();
        return true;
      });
    });
  }
  // Jobs: submit, list, get, cancel, resize.
  void JobRoutes() {
    httplib::Server& s = *server;
    s.Post("/v1/jobs", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kTenant, Role::kAdmin})) return;
      auto job = DecodeJobRequest(req.body);
      if (!job.ok()) return Fail(res, job.status());
      auto id = service->Submit(*p, std::move(*job));
      if (!id.ok()) return Fail(res, id.status());
      res.set_header("Location", "/v1/jobs/" + std::to_string(*id));
      Reply(res, 201, Json{{"id", std::to_string(*id)}});
    });
    s.Get("/v1/jobs", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kTenant, Role::kAdmin})) return;
      Json list = Json::array();
      for (const JobView& v : service->ListJobs(*p)) list.push_back(JobJson(v));
      Reply(res, 200, Json{{"jobs", list}});
    });
    s.Get(R"(/v1/jobs/(\d{1,19}))", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kTenant, Role::kAdmin})) return;
      auto v = service->GetJob(*p, std::stoull(req.matches[1]));
      if (!v.ok()) return Fail(res, v.status());
      Reply(res, 200, JobJson(*v));
    });
    s.Delete(R"(/v1/jobs/(\d{1,19}))", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kTenant, Role::kAdmin})) return;
      auto v = service->Cancel(*p, std::stoull(req.matches[1]));
      if (!v.ok()) return Fail(res, v.status());
      Reply(res, 200, JobJson(*v));
    });
    s.Patch(R"(/v1/jobs/(\d{1,19}))", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kTenant, Role::kAdmin})) return;
      const auto body = Body(req, res);
      if (!body) return;
      std::optional<int32_t> lo, hi;
      for (auto it = body->begin(); it != body->end(); ++it) {
        if (it.key() != "replicas") return Fail(res, 400, "field '" + it.key().substr(0, 40) + "': unknown field (only replicas)");
      }
      const Json& r = (*body)["replicas"];
      if (!r.is_object()) return Fail(res, 400, "field 'replicas': expected an object {min, max}");
      for (auto it = r.begin(); it != r.end(); ++it) {
        if (it.key() != "min" && it.key() != "max") {
          return Fail(res, 400, "field 'replicas." + it.key().substr(0, 40) + "': unknown field (min, max)");
        }
        if (!it.value().is_number_integer() || it.value().get<int64_t>() < 1 || it.value().get<int64_t>() > 100000) {
          return Fail(res, 400, "field 'replicas." + it.key() + "': expected an integer in [1, 100000]");
        }
        (it.key() == "min" ? lo : hi) = static_cast<int32_t>(it.value().get<int64_t>());
      }
      auto v = service->Resize(*p, std::stoull(req.matches[1]), lo, hi);
      if (!v.ok()) return Fail(res, v.status());
      Reply(res, 200, JobJson(*v));
    });
  }
  // Node agents: registration, heartbeats, the node list, orders and reports.
  void AgentRoutes() {
    httplib::Server& s = *server;
    s.Post("/v1/nodes", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kAgent})) return;
      const auto body = Body(req, res);
      if (!body) return;
      auto nodes = DecodeNodes(*body);
      if (!nodes.ok()) return Fail(res, nodes.status());
      const size_t n = nodes->size();
      const Status st = service->RegisterNodes(*p, std::move(*nodes));
      if (!st.ok()) return Fail(res, st);
      Reply(res, 200, Json{{"registered", n}});
    });
    s.Post("/v1/nodes/heartbeat", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kAgent})) return;
      std::vector<std::string> names;
      if (!req.body.empty()) {
        const auto body = Body(req, res);
        if (!body) return;
        if (body->contains("nodes")) {
          if (!(*body)["nodes"].is_array()) return Fail(res, 400, "field 'nodes': expected an array of names");
          for (const Json& x : (*body)["nodes"]) {
            if (!x.is_string()) return Fail(res, 400, "field 'nodes': expected an array of names");
            names.push_back(x.get<std::string>());
          }
        }
      }
      const Status st = service->Heartbeat(*p, names);
      if (!st.ok()) return Fail(res, st);
      Reply(res, 200, Json::object());
    });
    s.Get("/v1/nodes", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kAdmin})) return;
      Json list = Json::array();
      for (const NodeView& n : service->ListNodes()) list.push_back(NodeJson(n));
      Reply(res, 200, Json{{"nodes", list}});
    });
    s.Get("/v1/agent/orders", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kAgent})) return;
      const auto epoch = QueryInt(req, "epoch", 0), after = QueryInt(req, "after", 0), wait = QueryInt(req, "wait_ms", 0);
      if (!epoch || !after || !wait) return Fail(res, 400, "query: epoch, after and wait_ms are non-negative integers");
      const OrderBatch b = service->WaitOrders(*p, *epoch, *after, static_cast<int64_t>(std::min<uint64_t>(*wait, 30000)));
      Json list = Json::array();
      for (const Order& o : b.orders) {
        Json j;
        j["seq"] = o.seq;
        j["op"] = std::string(OpName(o.op));
        if (o.op == Order::Op::kEvict) j["deadline_ms"] = o.deadline_ms;
        j["task"] = o.task;
        if (o.instance != 0) j["instance"] = o.instance;
        j["job"] = std::to_string(o.job);
        j["node"] = o.node;
        j["gpus"] = o.gpus;
        if (o.op == Order::Op::kMigrate) j["from"] = o.from;
        if (o.op == Order::Op::kStart || o.op == Order::Op::kMigrate) {
          j["duration_s"] = o.duration_s;
          j["tenant"] = o.tenant;
          j["replica"] = o.replica;
          j["replicas"] = o.replicas;
          j["master_addr"] = o.master_addr;
          j["master_port"] = o.master_port;
          j["restart_count"] = o.restart_count;
          j["workload"] = Json::parse(o.workload.empty() ? "{}" : o.workload);
          j["cpu_milli"] = o.cpu_milli;
          j["memory_mib"] = o.memory_mib;
          j["gpu_milli"] = o.gpu_milli;
        }
        if (!o.checkpoint_signal.empty()) j["checkpoint_signal"] = o.checkpoint_signal;
        list.push_back(std::move(j));
      }
      Reply(res, 200, Json{{"epoch", b.epoch}, {"last_seq", b.last_seq}, {"orders", list}});
    });
    s.Post("/v1/agent/reports", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kAgent})) return;
      const auto body = Body(req, res);
      if (!body) return;
      auto reports = DecodeReports(*body);
      if (!reports.ok()) return Fail(res, reports.status());
      const Status st = service->Report(*p, std::move(*reports));
      if (!st.ok()) return Fail(res, st);
      Reply(res, 200, Json::object());
    });
  }
  // Why a job waits; an admin's node actions.
  void ExplainAndNodeActionRoutes() {
    httplib::Server& s = *server;
    s.Get(R"(/v1/jobs/(\d{1,19})/explain)", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kTenant, Role::kAdmin})) return;
      auto e = service->Explain(*p, std::stoull(req.matches[1]));
      if (!e.ok()) return Fail(res, e.status());
      Json j;
      j["id"] = req.matches[1].str();
      j["state"] = std::string(JobPhaseName(e->phase));
      j["reason"] = e->reason;
      j["fits_now"] = e->fits_now;
      j["may_reclaim"] = e->may_reclaim;
      j["reclaim_feasible"] = e->reclaim_feasible;
      j["reclaim_victims"] = e->victims;
      j["reclaim_victims_max_priority"] = e->victims_max_priority;
      j["shortfall"] = e->shortfall;
      j["held_nodes"] = e->held_nodes;
      if (!e->quota.empty()) j["quota"] = e->quota;
      j["owed"] = e->owed;
      if (!e->reclaim_from.empty()) j["reclaim_from"] = e->reclaim_from;
      if (!e->topology.empty()) j["topology"] = e->topology;
      if (!e->planned.empty()) j["planned"] = e->planned;  // backfill's plan (engine time)
      // What would make it fit, in words.
      std::string advice;
      std::string from;
      for (const std::string& q : e->reclaim_from) from += (from.empty() ? "queue '" : ", '") + q + "'";
      if (e->phase != JobPhase::kPending) advice = "it is not waiting";
      else if (e->owed && e->reclaim_feasible) {
        advice = "its queue is owed capacity that " + from + " borrows: it starts once that work is evicted, after its grace period";
      } else if (!e->quota.empty() && !e->owed) {
        advice = "its queue's quota holds it: " + e->quota;
      } else if (e->fits_now) advice = "idle capacity holds it now: it starts at the next scheduling pass";
      else if (e->reclaim_feasible && e->may_reclaim) advice = "it starts once its Reclaim's victims are evicted";
      else if (e->reclaim_feasible) advice = "it would fit if " + std::to_string(e->victims) + " job(s) of priority up to " +
                                             std::to_string(e->victims_max_priority) + " ended, or at priority >= " +
                                             std::to_string(kHpPriority) + " by Reclaim";
      else advice = "it does not fit even without preemptible work: " + e->shortfall;
      j["advice"] = advice;
      Reply(res, 200, j);
    });
    s.Post(R"(/v1/nodes/([A-Za-z0-9._-]{1,128})/(cordon|uncordon|drain|evacuate|fail|restore))",
           [this](const httplib::Request& req, httplib::Response& res) {
             const Principal* p = Auth(req, res);
             if (p == nullptr || !Allowed(*p, res, {Role::kAdmin})) return;
             const Status st = service->NodeAction(*p, req.matches[1], req.matches[2]);
             if (!st.ok()) return Fail(res, st);
             for (const NodeView& n : service->ListNodes()) {
               if (n.name == req.matches[1]) return Reply(res, 200, NodeJson(n));
             }
             Fail(res, 404, "no node");
           });
  }
  // Reservations.
  void ReservationRoutes() {
    httplib::Server& s = *server;
    s.Post("/v1/reservations", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kTenant, Role::kAdmin})) return;
      const auto body = Body(req, res);
      if (!body) return;
      for (auto it = body->begin(); it != body->end(); ++it) {
        if (it.key() != "job" && it.key() != "ttl_s") return Fail(res, 400, "field '" + it.key().substr(0, 40) + "': unknown field");
      }
      const std::optional<uint64_t> job = JobIdField(*body);
      if (!job) return Fail(res, 400, "field 'job': expected a job id (a string of digits)");
      int64_t ttl = 3600;
      if (body->contains("ttl_s")) {
        if (!(*body)["ttl_s"].is_number_integer()) return Fail(res, 400, "field 'ttl_s': expected an integer");
        ttl = (*body)["ttl_s"].get<int64_t>();
      }
      auto r = service->Reserve(*p, *job, ttl);
      if (!r.ok()) return Fail(res, r.status());
      Reply(res, 201, ReservationJson(*r));
    });
    s.Get("/v1/reservations", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kTenant, Role::kAdmin})) return;
      Json list = Json::array();
      for (const Service::ReservationView& r : service->ListReservations(*p)) list.push_back(ReservationJson(r));
      Reply(res, 200, Json{{"reservations", list}});
    });
    s.Delete(R"(/v1/reservations/(\d{1,19}))", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kTenant, Role::kAdmin})) return;
      const Status st = service->DeleteReservation(*p, std::stoull(req.matches[1]));
      if (!st.ok()) return Fail(res, st);
      Reply(res, 200, Json::object());
    });
  }
  // The scheduler configuration and defragmentation (admin).
  void ConfigRoutes() {
    httplib::Server& s = *server;
    // The keys PUT changes, and (read only) the engine's whole configuration as a history's
    // `config` record.
    const auto config_json = [](const Service::Config& c) {
      return Json{{"policy", c.policy},
                  {"grace_s", c.grace_s},
                  {"absorb", c.absorb},
                  {"heartbeat_timeout_s", c.heartbeat_timeout_s},
                  {"defrag_interval_s", c.defrag_interval_s},
                  {"engine", HistoryRecordJson(HistoryRecord{HistorySegment{c.engine}})["config"]}};
    };
    s.Get("/v1/config", [this, config_json](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kAdmin})) return;
      Reply(res, 200, config_json(service->GetConfig()));
    });
    s.Put("/v1/config", [this, config_json](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kAdmin})) return;
      const auto body = Body(req, res);
      if (!body) return;
      Service::ConfigChange change;
      for (auto it = body->begin(); it != body->end(); ++it) {
        const std::string& k = it.key();
        if (k == "grace_s" || k == "heartbeat_timeout_s" || k == "defrag_interval_s") {
          if (!it.value().is_number_integer()) return Fail(res, 400, "field '" + k + "': expected an integer");
          (k == "grace_s" ? change.grace_s : k == "heartbeat_timeout_s" ? change.heartbeat_timeout_s
                                                                        : change.defrag_interval_s) = it.value().get<int64_t>();
        } else if (k == "absorb") {
          if (!it.value().is_boolean()) return Fail(res, 400, "field 'absorb': expected true or false");
          change.absorb = it.value().get<bool>();
        } else if (k == "policy") {
          return Fail(res, 400, "field 'policy': fixed at start (estuary serve --policy)");
        } else {
          return Fail(res, 400, "field '" + k.substr(0, 40) + "': unknown field");
        }
      }
      auto c = service->SetConfig(*p, change);
      if (!c.ok()) return Fail(res, c.status());
      Reply(res, 200, config_json(*c));
    });
    s.Post("/v1/defrag", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kAdmin})) return;
      auto moves = service->Defrag(*p);
      if (!moves.ok()) return Fail(res, moves.status());
      Reply(res, 200, Json{{"moves", *moves}});
    });
  }
  // Standby windows (SpotGPU).
  // GET /v1/queues (tenants: the queues they may use and those above; admins: all) and PUT
  // /v1/queues (admins): {"queues": [...], "sharing": {...}} in the configuration's schema
  // (api/queue_json.h); "sharing" absent: unchanged.
  static Json QueuesJson(const Service::QueuesView& v) {
    const auto gpus = [](int64_t milli) { return static_cast<double>(milli) / kMilliPerGpu; };
    Json list = Json::array();
    for (const Service::QueueView& q : v.queues) {
      Json j = EncodeQueues({q.spec})[0];
      const Engine::QueueFigures& f = q.gpus;
      j["gpus"] = {{"held", gpus(f.held)},         {"guaranteed", gpus(f.guarantee)},
                   {"limit", f.limit == kNoLimit ? Json() : Json(gpus(f.limit))},
                   {"fair_share", gpus(f.fair)},   {"entitled", gpus(f.entitled)},
                   {"borrowed", gpus(f.borrowed)}, {"lent", gpus(f.lent)},
                   {"pending", gpus(f.pending)}};
      j["jobs"] = {{"waiting", f.waiting_jobs}, {"running", f.running_jobs}};
      list.push_back(std::move(j));
    }
    return Json{{"queues", list}, {"sharing", EncodeSharing(v.sharing)}};
  }
  void QueueRoutes() {
    httplib::Server& s = *server;
    s.Get("/v1/queues", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kTenant, Role::kAdmin})) return;
      auto v = service->GetQueues(*p);
      if (!v.ok()) return Fail(res, v.status());
      Reply(res, 200, QueuesJson(*v));
    });
    s.Put("/v1/queues", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kAdmin})) return;
      const auto body = Body(req, res);
      if (!body) return;
      if (!body->is_object()) return Fail(res, 400, "body: expected an object {queues, sharing}");
      for (auto it = body->begin(); it != body->end(); ++it) {
        if (it.key() != "queues" && it.key() != "sharing") return Fail(res, 400, "field '" + it.key().substr(0, 40) + "': unknown field");
      }
      if (!body->contains("queues")) return Fail(res, 400, "field 'queues': missing (an empty list removes every queue)");
      auto queues = DecodeQueues((*body)["queues"]);
      if (!queues.ok()) return Fail(res, queues.status());
      std::optional<SharingSpec> sharing;
      if (body->contains("sharing")) {
        auto sh = DecodeSharing((*body)["sharing"]);
        if (!sh.ok()) return Fail(res, sh.status());
        sharing = *sh;
      }
      auto v = service->SetQueues(*p, std::move(*queues), sharing);
      if (!v.ok()) return Fail(res, v.status());
      Reply(res, 200, QueuesJson(*v));
    });
  }

  void StandbyRoutes() {
    httplib::Server& s = *server;
    s.Post("/v1/standby", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kTenant, Role::kAdmin})) return;
      const auto body = Body(req, res);
      if (!body) return;
      for (auto it = body->begin(); it != body->end(); ++it) {
        const std::string& k = it.key();
        if (k != "job" && k != "from_ms" && k != "to_ms" && k != "replicas") {
          return Fail(res, 400, "field '" + k.substr(0, 40) + "': unknown field");
        }
      }
      const std::optional<uint64_t> job = JobIdField(*body);
      if (!job) return Fail(res, 400, "field 'job': expected a job id (a string of digits)");
      int64_t from = -1;
      if (body->contains("from_ms")) {
        if (!(*body)["from_ms"].is_number_integer() || (*body)["from_ms"].get<int64_t>() < 0) {
          return Fail(res, 400, "field 'from_ms': expected a time in milliseconds since the epoch");
        }
        from = (*body)["from_ms"].get<int64_t>();
      }
      if (!body->contains("to_ms") || !(*body)["to_ms"].is_number_integer() || (*body)["to_ms"].get<int64_t>() < 0) {
        return Fail(res, 400, "field 'to_ms': expected a time in milliseconds since the epoch");
      }
      if (!body->contains("replicas") || !(*body)["replicas"].is_number_integer() ||
          (*body)["replicas"].get<int64_t>() < 1 || (*body)["replicas"].get<int64_t>() > 100000) {
        return Fail(res, 400, "field 'replicas': expected an integer in [1, 100000]");
      }
      if (from < 0) from = service->NowMs();
      auto w = service->AddStandbyWindow(*p, *job, from, (*body)["to_ms"].get<int64_t>(),
                                         (*body)["replicas"].get<int32_t>());
      if (!w.ok()) return Fail(res, w.status());
      Reply(res, 201, WindowJson(*w));
    });
    s.Get("/v1/standby", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kTenant, Role::kAdmin})) return;
      Json list = Json::array();
      for (const Service::StandbyWindowView& w : service->ListStandbyWindows(*p)) list.push_back(WindowJson(w));
      Reply(res, 200, Json{{"windows", list}});
    });
    s.Delete(R"(/v1/standby/(\d{1,19}))", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kTenant, Role::kAdmin})) return;
      const Status st = service->DeleteStandbyWindow(*p, std::stoull(req.matches[1]));
      if (!st.ok()) return Fail(res, st);
      Reply(res, 200, Json::object());
    });
  }
  // Stats, the dashboard, invariants, metrics, the OpenAPI document, and 404s.
  void ViewRoutes() {
    httplib::Server& s = *server;
    s.Get("/v1/stats", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kAdmin})) return;
      Json list = Json::array();
      for (const Service::Sample& x : service->Samples()) {
        list.push_back({{"t_ms", x.t_ms}, {"gpus", x.gpus}, {"gpus_allocated", x.gpus_allocated},
                        {"pending", x.pending}, {"running", x.running}});
      }
      Reply(res, 200, Json{{"samples", list}});
    });
    s.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_redirect("/dashboard/"); });
    s.Get(R"(/dashboard/([A-Za-z0-9._-]*))", [](const httplib::Request& req, httplib::Response& res) {
      const auto f = FindDashboardFile(req.matches[1].str());
      if (!f) return Fail(res, 404, "no such file");
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Content-Security-Policy",
                     "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
      res.set_content(std::string(f->body), std::string(f->content_type).c_str());
    });
    s.Get("/v1/debug/invariants", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr || !Allowed(*p, res, {Role::kAdmin})) return;
      const Status st = service->CheckInvariants();
      if (!st.ok()) return Fail(res, 500, st.message());
      Reply(res, 200, Json{{"ok", true}});
    });
    s.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
      const Principal* p = Auth(req, res);
      if (p == nullptr) return;
      res.set_content(service->MetricsText(), "text/plain; version=0.0.4");
    });
    s.Get("/v1/openapi.json", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(OpenApiDocument()), "application/json");
    });
    // Anything else: 404 in JSON, after authentication for /v1 (so that the API's shape is not
    // probed without a token).
    s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
      if (res.status == 413) return Fail(res, 413, "request body too large");
      if (res.body.empty()) Fail(res, res.status, res.status == 404 ? "no such route" : "request failed");
    });
  }
};

HttpApi::HttpApi(Service* service, const TokenTable* tokens, HttpOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->service = service;
  impl_->tokens = tokens;
  impl_->opt = std::move(options);
}

std::unique_ptr<HttpApi> HttpApi::Follower(HttpOptions options, std::function<std::optional<std::string>()> leader) {
  auto api = std::make_unique<HttpApi>(nullptr, nullptr, std::move(options));
  api->impl_->leader = std::move(leader);
  return api;
}

HttpApi::~HttpApi() { Shutdown(); }

namespace {

// An HTTP or (with a certificate and key) HTTPS server with the options' limits.
StatusOr<std::unique_ptr<httplib::Server>> MakeServer(const HttpOptions& o) {
  std::unique_ptr<httplib::Server> server;
  if (!o.tls_cert.empty() || !o.tls_key.empty()) {
    if (o.tls_cert.empty() || o.tls_key.empty()) return InvalidArgument("--tls-cert and --tls-key go together");
    auto ssl = std::make_unique<httplib::SSLServer>(o.tls_cert.c_str(), o.tls_key.c_str());
    if (!ssl->is_valid()) return InvalidArgument("cannot load the TLS certificate '" + o.tls_cert + "' and key '" + o.tls_key + "'");
    server = std::move(ssl);
  } else {
    server = std::make_unique<httplib::Server>();
  }
  const int threads = o.threads;
  server->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  server->set_payload_max_length(o.max_body_bytes);
  server->set_tcp_nodelay(true);  // small JSON answers: no Nagle delay
  server->set_keep_alive_max_count(1000000);
  server->set_keep_alive_timeout(60);
  server->set_read_timeout(35, 0);
  server->set_write_timeout(35, 0);
  return server;
}

// Binds `server` to the options' address; the port bound, or an error naming the address.
StatusOr<int> BindServer(httplib::Server& server, const HttpOptions& o) {
  if (o.port == 0) {
    const int port = server.bind_to_any_port(o.host);
    if (port <= 0) return InvalidArgument("--listen: cannot bind " + o.host);
    return port;
  }
  if (!server.bind_to_port(o.host, o.port)) return InvalidArgument("--listen: cannot bind " + o.host + ":" + std::to_string(o.port));
  return o.port;
}

}  // namespace

Status HttpApi::Bind() {
  Impl& s = *impl_;
  auto server = MakeServer(s.opt);
  if (!server.ok()) return server.status();
  s.server = std::move(*server);
  if (s.leader) {
    s.FollowerRoutes();
  } else {
    s.Routes();
  }
  auto port = BindServer(*s.server, s.opt);
  if (!port.ok()) return port.status();
  port_ = *port;
  return Status::Ok();
}

Status HttpApi::Serve() {
  if (!impl_->server) return Internal("Serve before Bind");
  if (!impl_->server->listen_after_bind()) return Internal("the HTTP server stopped with an error");
  return Status::Ok();
}

void HttpApi::Shutdown() {
  if (impl_ && impl_->server) impl_->server->stop();
}

}  // namespace estuary
