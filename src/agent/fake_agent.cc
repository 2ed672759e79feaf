#include "agent/fake_agent.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "agent/service_client.h"
#include "common/text.h"

namespace estuary {
namespace {

using Json = nlohmann::json;

constexpr size_t kReportsPerRequest = 4096;

std::string Padded(const char* fmt, int64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, static_cast<long long>(v));
  return buf;
}

}  // namespace

std::vector<AgentNode> FakeNodes(const std::string& prefix, int count, int gpus, const std::string& model) {
  std::vector<AgentNode> v;
  v.reserve(static_cast<size_t>(std::max(0, count)));
  for (int i = 0; i < count; ++i) {
    AgentNode n;
    n.name = prefix + "-n" + Padded("%06lld", i);
    n.gpus = gpus;
    n.gpu_model = gpus > 0 ? model : "";
    n.cpu_milli = 16000 * std::max(1, gpus);
    n.memory_mib = 131072 * std::max(1, gpus);
    const int64_t asw = i / 32, spine = asw / 8, az = spine / 4;
    n.domains = {{"data", {prefix + "-az" + Padded("%02lld", az), prefix + "-spine" + Padded("%04lld", spine),
                           prefix + "-asw" + Padded("%05lld", asw)}},
                 {"param", {prefix + "-pod" + Padded("%05lld", i / 64)}}};
    v.push_back(std::move(n));
  }
  return v;
}

FakeAgent::FakeAgent(FakeAgentOptions options, const Clock* clock) : opt_(std::move(options)), clock_(clock) {}

Status FakeAgent::Run(const std::atomic<bool>& stop) {
  // Registration, in batches; retried while the service is unreachable (it may be starting).
  Replicas replicas_of_service(opt_.server);
  {
    Replicas::Conn conn(replicas_of_service, 60);
    for (size_t at = 0; at < opt_.nodes.size() && !stop;) {
      Json nodes = Json::array();
      for (size_t i = at; i < std::min(opt_.nodes.size(), at + opt_.register_batch); ++i) {
        const AgentNode& n = opt_.nodes[i];
        Json d = Json::object();
        for (const auto& [plane, names] : n.domains) d[plane] = names;
        nodes.push_back({{"name", n.name}, {"gpus", n.gpus}, {"gpu_model", n.gpu_model}, {"cpu_milli", n.cpu_milli},
                         {"memory_mib", n.memory_mib}, {"domains", d}});
      }
      ESTUARY_RETURN_IF_ERROR(PostNodes(conn, opt_.token, Json{{"nodes", nodes}}.dump(), stop));
      at += static_cast<size_t>(nodes.size());
    }
  }

  std::mutex mu;
  // An instance is "<task>@<node>": a migrating replica has two for a while.
  std::map<std::string, int64_t> replicas;         // instance -> its end (ms; 0: until stopped)
  std::map<std::string, uint64_t> ids;             // instance -> the service's id of it (Order::instance)
  std::multimap<int64_t, std::string> ends;        // end (ms) -> instance, for timed ones
  struct Out {
    std::string instance;  // "<task>@<node>"
    uint64_t id = 0;       // the service's (0: none)
    const char* state = "";
  };
  std::vector<Out> outbox;  // reports not yet sent

  std::thread heartbeats([&] { SendHeartbeats(replicas_of_service, opt_.token, opt_.heartbeat_interval_ms, stop); });
  std::thread reporter([&] {
    Replicas::Conn conn(replicas_of_service, 30);
    std::vector<Out> failed;
    while (!stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(opt_.report_interval_ms));
      std::vector<Out> send = std::exchange(failed, {});
      {
        std::lock_guard lk(mu);
        const int64_t now = clock_->NowMs();
        while (!ends.empty() && ends.begin()->first <= now) {
          const auto e = ends.begin();
          const auto r = replicas.find(e->second);
          // A replica stopped (or stopped and started again) since: not this end.
          if (r != replicas.end() && r->second == e->first) {
            outbox.push_back({e->second, ids[e->second], "succeeded"});
            ++finished_;
            --running_;
            replicas.erase(r);
            ids.erase(e->second);
          }
          ends.erase(e);
        }
        for (auto& r : outbox) send.push_back(std::move(r));
        outbox.clear();
      }
      // In requests of at most kReportsPerRequest (~270 KB of JSON, well within the service's
      // body limit: a request above it would be refused whole).
      for (size_t from = 0; from < send.size();) {
        const size_t to = std::min(send.size(), from + kReportsPerRequest);
        Json list = Json::array();
        for (size_t i = from; i < to; ++i) {
          const std::string& instance = send[i].instance;
          const size_t at = instance.rfind('@');
          Json r = {{"task", instance.substr(0, at)}, {"node", instance.substr(at + 1)}, {"state", send[i].state}};
          if (send[i].id != 0) r["instance"] = send[i].id;
          list.push_back(std::move(r));
        }
        const auto r = conn.get().Post("/v1/agent/reports", Auth(opt_.token), Json{{"reports", list}}.dump(), "application/json");
        if (!FromLeader(r)) conn.Fail();
        // Unreachable, restarting, not the leader or too busy (429): these and the rest are sent
        // again. Another refusal (4xx) is of the request itself and would come again: dropped
        // (the service skips reports of tasks it no longer runs rather than refusing them).
        if (SendAgain(r)) {
          failed.assign(std::make_move_iterator(send.begin() + static_cast<std::ptrdiff_t>(from)),
                        std::make_move_iterator(send.end()));
          break;
        }
        from = to;
      }
    }
  });

  Replicas::Conn conn(replicas_of_service, static_cast<int>(opt_.poll_wait_ms / 1000 + 30));
  uint64_t epoch = 0, after = 0;
  while (!stop) {
    const std::optional<Json> polled = PollOrders(conn, opt_.token, opt_.poll_wait_ms, &epoch, &after);
    if (!polled) continue;
    const Json& j = *polled;
    std::lock_guard lk(mu);
    const int64_t now = clock_->NowMs();
    for (const Json& o : j["orders"]) {
      const uint64_t seq = o.value("seq", uint64_t{0});
      if (seq <= after) continue;
      after = seq;
      const std::string task = o.value("task", "") + "@" + o.value("node", "");
      const std::string op = o.value("op", "");
      const uint64_t id = o.value("instance", uint64_t{0});
      if (op == "evict") {
        ++evict_notices_;  // a fake process has nothing to checkpoint; its stop follows
        continue;
      }
      if (op == "standby" || op == "resume") {
        // A fake process holds no GPU memory: it leaves its GPUs at once (the service lends them
        // once it hears so) and takes them back as told.
        ++(op == "standby" ? standby_orders_ : resume_orders_);
        if (op == "standby") outbox.push_back({task, id, "standby"});
        continue;
      }
      if (op == "migrate") ++migrations_;  // the new instance, started like any other
      if (op == "start" || op == "migrate") {
        // A new instance of a replica it runs (the service took the old one's node for failed)
        // replaces it; the same one ordered again is running already.
        const bool runs = replicas.count(task) > 0;
        if (!runs || ids[task] != id) {
          ids[task] = id;
          const int64_t d = o.value("duration_s", int64_t{0});
          replicas[task] = d > 0 ? now + d * 1000 : 0;
          if (d > 0) ends.emplace(now + d * 1000, task);
          ++starts_;
          if (!runs) ++running_;
        }
        outbox.push_back({task, ids[task], "running"});
      } else {
        // A stop of an instance it no longer runs (replaced since) leaves the current one be.
        const auto cur = ids.find(task);
        if (id == 0 || cur == ids.end() || cur->second == id) {
          if (replicas.erase(task) > 0) {
            ++stops_;
            --running_;
          }
          ids.erase(task);
        }
        outbox.push_back({task, id, "stopped"});
      }
    }
    after = std::max(after, j.value("last_seq", after));
  }
  heartbeats.join();
  reporter.join();
  return Status::Ok();
}

}  // namespace estuary
