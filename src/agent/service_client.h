// How node agents talk to the service (server/http_api.h) with their agent token: a connection
// per thread that follows the leading replica when the service runs replicated (a request that gets
// no answer, or a follower's, moves on to the next URL of the list), and one-line errors.
// Thread-safety: a Replicas is shared by threads; each thread uses its own Conn.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "common/text.h"

namespace estuary {

httplib::Headers Auth(const std::string& token);

// The error of a failed call, in one line.
std::string Why(const httplib::Result& r);

// Whether a request reached the leading replica: an answer that is not a follower's (307 to the
// leader, or 503 while none leads).
bool FromLeader(const httplib::Result& r);

// Whether a request that carries state (reports, logs) must be sent again: no answer from the
// leader, a server error (5xx) or too many requests (429). Any other answer took it, or refused
// it for good (the same request would be refused again).
bool SendAgain(const httplib::Result& r);

// The service's replicas (FakeAgentOptions::server, comma-separated) and which one leads: a
// thread's connection moves on to the next replica when its request gets no answer, or a
// follower's.
class Replicas {
 public:
  explicit Replicas(const std::string& list) : urls_(SplitList(list, ',')) {
    if (urls_.empty()) urls_.push_back(list);
  }
  // One thread's connection.
  class Conn {
   public:
    Conn(Replicas& r, int read_timeout_s) : r_(r), read_timeout_s_(read_timeout_s) {}
    httplib::Client& get() {
      const size_t now = r_.current_.load();
      if (!c_ || index_ != now) {
        index_ = now;
        c_ = std::make_unique<httplib::Client>(r_.urls_[now % r_.urls_.size()]);
        c_->set_connection_timeout(2, 0);
        c_->set_tcp_nodelay(true);
        c_->set_read_timeout(read_timeout_s_, 0);
      }
      return *c_;
    }
    // No answer from this replica: the next one is tried (once per failure, by whichever thread
    // sees it first).
    void Fail() {
      size_t expected = index_;
      r_.current_.compare_exchange_strong(expected, index_ + 1);
      c_.reset();
    }

   private:
    Replicas& r_;
    int read_timeout_s_;
    size_t index_ = 0;
    std::unique_ptr<httplib::Client> c_;
  };

 private:
  std::vector<std::string> urls_;
  std::atomic<size_t> current_{0};
};

// Registers nodes (`body`: {"nodes": [...]}), retrying for ~30 s while the service cannot be
// reached or no replica leads; InvalidArgument with the service's reason when it refuses them,
// Unavailable when it never answered.
Status PostNodes(Replicas::Conn& conn, const std::string& token, const std::string& body, const std::atomic<bool>& stop);

// Sends the agent's heartbeat every `interval_ms` until `stop` (run it on a thread of its own).
void SendHeartbeats(Replicas& service, const std::string& token, int64_t interval_ms, const std::atomic<bool>& stop);

// One long poll of the agent's orders after `after` (GET /v1/agent/orders). When the service's
// epoch changed (it restarted) `*epoch` takes the new one and `*after` becomes 0: its orders are
// numbered anew. nullopt (after a short wait) when the poll failed.
std::optional<nlohmann::json> PollOrders(Replicas::Conn& conn, const std::string& token, int64_t wait_ms, uint64_t* epoch,
                                         uint64_t* after);

}  // namespace estuary
