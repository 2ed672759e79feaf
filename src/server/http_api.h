// HttpApi: the service's HTTP/JSON front (issue 7) over a Service, on cpp-httplib.
//
// Every /v1 route and /metrics need `Authorization: Bearer TOKEN` (TokenTable): none or an unknown
// token -> 401. Routes (JSON bodies; errors are {"error": "<one line>"}):
//   POST   /v1/jobs                 tenant|admin   job JSON (api/job_json.h) -> 201 {"id": "N"}
//   GET    /v1/jobs                 tenant|admin   {"jobs": [job, ...]} (a tenant: its own)
//   GET    /v1/jobs/{id}            tenant|admin   job; another tenant's job -> 404
//   DELETE /v1/jobs/{id}            tenant|admin   cancels -> 200 job
//   PATCH  /v1/jobs/{id}            tenant|admin   {"replicas": {"min": m, "max": M}} (either) -> 200 job
//   GET    /v1/jobs/{id}/explain    tenant|admin   why it waits: fits_now, reclaim_feasible, victims,
//                                                  shortfall, held_nodes, and "advice" in words
//   POST   /v1/reservations         tenant|admin   {"job": "N", "ttl_s": T (default 3600)} -> 201
//                                                  {id, job, tenant, nodes, created_ms, expires_ms}
//   GET    /v1/reservations         tenant|admin   {"reservations": [...]} (a tenant: its own)
//   DELETE /v1/reservations/{id}    tenant|admin   ends it
//   POST   /v1/nodes/{name}/{cordon|uncordon|drain|evacuate|fail|restore}   admin   -> 200 node
//   POST   /v1/nodes                agent          {"nodes": [{name, gpus, gpu_model, cpu_milli,
//                                                   memory_mib, domains: {plane: [names]}}]}
//   POST   /v1/nodes/heartbeat      agent          {"nodes": [names]} (empty or absent: all)
//   GET    /v1/nodes                admin          {"nodes": [node, ...]}
//   GET    /v1/agent/orders?epoch=E&after=N&wait_ms=W   agent   long-poll (W <= 30000): orders
//                                                  start | stop | evict (deadline_ms: a stop follows
//                                                  then) | standby | resume | migrate (from: the old
//                                                  instance's node)
//   POST   /v1/agent/reports        agent          {"reports": [{task, node, state: running |
//                                                   succeeded | failed | stopped}]}
//   POST   /v1/standby              tenant|admin   {"job": "N", "from_ms" (default now), "to_ms",
//                                                  "replicas"} -> 201 {id, job, tenant, from_ms, to_ms,
//                                                  replicas}
//   GET    /v1/standby              tenant|admin   {"windows": [...]} (a tenant: its own)
//   DELETE /v1/standby/{id}         tenant|admin   ends it
//   POST   /v1/defrag               admin          {"moves": n}: a defragmentation planned and started
//   GET    /v1/config, PUT /v1/config   admin      {policy, grace_s, absorb, heartbeat_timeout_s,
//                                                  defrag_interval_s}; PUT changes any but the policy
//                                                  (stored)
//   GET    /v1/stats                admin          {"samples": [{t_ms, gpus, gpus_allocated, pending,
//                                                   running}]}: the last hour, every 5 s
//   GET    /  and /dashboard/FILE   no token       the dashboard (server/dashboard.h)
//   GET    /v1/debug/invariants     admin          200 {"ok": true}, or 500 naming the first broken
//                                                  invariant (Service::CheckInvariants)
//   GET    /metrics                 any role       Prometheus text exposition
//   GET    /v1/openapi.json         no token       the OpenAPI 3 document of these routes
// Status codes: 400 bad JSON or field (the reason names the field), 401 no/unknown token, 403 the
// role or the node's owner forbids it, 404 unknown (or not yours), 413 body over the limit,
// 429 over the caller's rate, 503 stopping, 500 store failure.
// A job is shown as {"id": "N", "name", "tenant", "state", "replicas": {min, max, step}, "gpus",
// "gpu_milli", "cpu_milli", "memory_mib", "priority", "preemptible", "bound_replicas",
// "running_replicas", "standby_replicas", "migrating_replicas", "submitted_ms", "running_ms",
// "ended_ms", "reason"}.
// Thread-safety: Serve blocks and answers on a pool of threads; Shutdown may be called from any
// thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "api/tokens.h"
#include "common/status.h"
#include "server/service.h"

namespace estuary {

struct HttpOptions {
  std::string host = "127.0.0.1";  // listen address (loopback unless told otherwise)
  int port = 0;                    // 0: any free port (see HttpApi::port after Bind)
  size_t max_body_bytes = 1 << 20; // larger bodies -> 413
  double rate_per_s = 20000;       // requests per second per caller name (token bucket) -> 429
  double burst = 40000;            // the bucket's size
  int threads = 64;                // request threads (long-polls hold one each)
  std::string tls_cert, tls_key;   // both set: HTTPS
};

class HttpApi {
 public:
  HttpApi(Service* service, const TokenTable* tokens, HttpOptions options);
  // What a replica that does not lead answers on its address while it campaigns (`estuary serve
  // --store etcd`): every request gets 307 Temporary Redirect to the same target on the leader
  // (Location: LEADER_URL + path and query; clients that follow keep the method and body) with
  // {"error": "not the leader", "leader": URL}, or 503 while no replica leads. `leader` gives the
  // leader's advertised URL (an etcd read; called at most every 200 ms).
  static std::unique_ptr<HttpApi> Follower(HttpOptions options, std::function<std::optional<std::string>()> leader);
  ~HttpApi();
  // Binds the listening socket (the port is known afterwards). Errors name the address.
  Status Bind();
  int port() const { return port_; }
  // Answers requests until Shutdown. REQUIRES: Bind() succeeded.
  Status Serve();
  void Shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace estuary
