// EtcdClient: a small client of etcd's v3 API through its JSON gRPC-gateway (etcd 3.4 serves it
// under /v3/ on every client URL; /v3beta/ is the same). EtcdStore and LeaderElection share it.
// Each call is one HTTP POST of a JSON body to a gateway path ("/v3/kv/range", "/v3/kv/txn",
// "/v3/lease/grant", ...); keys and values in those bodies are base64 (Base64Encode below) and
// int64 fields come back as JSON strings (JsonInt64 reads either form).
//
// Failover: a call goes to the endpoint that answered last; when an endpoint cannot be reached
// (connect, read or write error, timeout) or answers that it cannot serve now (gRPC Unavailable:
// no raft leader, leader changed, request timed out; "too many requests"), the call moves on to
// the next endpoint, round after round (with a short pause between rounds), until the call's
// deadline. NOTE: a request whose answer was lost may therefore reach etcd twice; every caller
// in this folder sends only requests whose repetition is harmless (puts of the same values,
// fenced transactions, lease grants and revocations).
// Thread-safety: safe to use from several threads; each call takes a kept-alive connection of
// its own from a small per-endpoint pool.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"

namespace httplib {
class Client;
}  // namespace httplib

namespace estuary {

// How to reach an etcd cluster.
struct EtcdConnection {
  // Client URLs of the members, "http://HOST:PORT" (or "https://..."). Required: at least one.
  std::vector<std::string> endpoints;
  // Time to establish one TCP connection before trying the next endpoint. Default 1000 ms.
  int connect_timeout_ms = 1000;
  // Deadline of one call, every endpoint and retry included. Default 10000 ms: longer than the
  // ~7 s an etcd 3.4 member holds a write that was in flight when the raft leader died before it
  // answers "request timed out" (5 s + 2 x --election-timeout), so such a write is retried and
  // succeeds rather than fails.
  int request_timeout_ms = 10000;
};

class EtcdClient {
 public:
  // Errors: InvalidArgument when there is no endpoint, an endpoint is not an http(s)://HOST:PORT
  // URL, or a timeout is not positive. Does not contact etcd.
  static StatusOr<std::unique_ptr<EtcdClient>> Create(EtcdConnection connection);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // POSTs `body` to gateway path `path` and returns the answer's JSON (for the streaming
  // lease/keepalive, the object inside its "result"). `timeout_ms` <= 0: the connection's
  // request_timeout_ms. Errors (messages start with "etcd"):
  //   Unavailable  no endpoint answered before the deadline (names the last failure);
  //   InvalidArgument  etcd refused the request (gRPC InvalidArgument, e.g. too many operations
  //                    in a txn, or a message over its --max-request-bytes);
  //   NotFound  gRPC NotFound (e.g. an unknown lease);
  //   Internal  any other refusal, or an answer that is not JSON.
  StatusOr<nlohmann::json> Call(std::string_view path, const nlohmann::json& body, int timeout_ms = 0);

  const EtcdConnection& connection() const { return connection_; }

 private:
  struct Endpoint {
    std::string url;
    std::mutex mu;
    std::vector<std::unique_ptr<httplib::Client>> idle;  // kept-alive connections, guarded by mu
  };
  explicit EtcdClient(EtcdConnection connection);
  std::unique_ptr<httplib::Client> Take(Endpoint& e);
  void Return(Endpoint& e, std::unique_ptr<httplib::Client> client);

  EtcdConnection connection_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::atomic<size_t> preferred_{0};  // the endpoint that answered last
};

// Standard base64 (RFC 4648, with padding), as the gateway's JSON carries bytes fields.
std::string Base64Encode(std::string_view bytes);
// Errors: Internal when `text` is not valid base64 (etcd never sends that).
StatusOr<std::string> Base64Decode(std::string_view text);

// Field `name` of a gateway answer as an int64: etcd sends int64 fields as JSON strings and omits
// zero values (0 then). Errors: Internal when the field is neither a number nor a numeric string.
StatusOr<int64_t> JsonInt64(const nlohmann::json& object, const char* name);
// Bytes field `name` of a gateway answer, decoded; an absent field is the empty string.
StatusOr<std::string> JsonBytes(const nlohmann::json& object, const char* name);

// The range_end of an etcd range over every key starting with `prefix`: the smallest string
// greater than all of them, or "\0" (etcd: "every key from `key` on") when there is none (the
// prefix is empty or all 0xFF bytes).
std::string EtcdPrefixEnd(std::string_view prefix);

}  // namespace estuary
