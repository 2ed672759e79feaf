#include "agent/service_client.h"

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

namespace estuary {

using Json = nlohmann::json;

httplib::Headers Auth(const std::string& token) { return {{"Authorization", "Bearer " + token}}; }

std::string Why(const httplib::Result& r) {
  if (!r) return "cannot reach the service (" + httplib::to_string(r.error()) + ")";
  const Json j = Json::parse(r->body, nullptr, false);
  if (!j.is_discarded() && j.contains("error") && j["error"].is_string()) {
    return "HTTP " + std::to_string(r->status) + ": " + j["error"].get<std::string>();
  }
  return "HTTP " + std::to_string(r->status);
}

bool FromLeader(const httplib::Result& r) { return r && r->status != 307 && r->status != 503; }

bool SendAgain(const httplib::Result& r) { return !FromLeader(r) || r->status >= 500 || r->status == 429; }

Status PostNodes(Replicas::Conn& conn, const std::string& token, const std::string& body, const std::atomic<bool>& stop) {
  std::string why = "stopped";
  for (int attempt = 0; attempt < 60 && !stop; ++attempt) {
    const httplib::Result r = conn.get().Post("/v1/nodes", Auth(token), body, "application/json");
    if (FromLeader(r)) {
      if (r->status != 200) return InvalidArgument("agent: registering nodes: " + Why(r));
      return Status::Ok();
    }
    why = Why(r);
    conn.Fail();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return Unavailable("agent: " + why);
}

void SendHeartbeats(Replicas& service, const std::string& token, int64_t interval_ms, const std::atomic<bool>& stop) {
  Replicas::Conn conn(service, 30);
  while (!stop) {
    if (!FromLeader(conn.get().Post("/v1/nodes/heartbeat", Auth(token), "{}", "application/json"))) conn.Fail();
    for (int64_t waited = 0; waited < interval_ms && !stop; waited += 50) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

std::optional<Json> PollOrders(Replicas::Conn& conn, const std::string& token, int64_t wait_ms, uint64_t* epoch,
                               uint64_t* after) {
  const std::string path = "/v1/agent/orders?epoch=" + std::to_string(*epoch) + "&after=" + std::to_string(*after) +
                           "&wait_ms=" + std::to_string(wait_ms);
  const auto r = conn.get().Get(path.c_str(), Auth(token));
  if (!FromLeader(r)) conn.Fail();
  if (!r || r->status != 200) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return std::nullopt;
  }
  Json j = Json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.contains("orders")) return std::nullopt;
  const uint64_t e = j.value("epoch", uint64_t{0});
  if (e != *epoch) {
    *epoch = e;
    *after = 0;
  }
  return j;
}

}  // namespace estuary
