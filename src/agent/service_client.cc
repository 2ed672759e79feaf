#include "agent/service_client.h"

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

}  // namespace estuary
