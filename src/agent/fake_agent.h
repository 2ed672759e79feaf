// FakeAgent: a node agent for demos and load tests (issue 7, `estuary agent --fake-nodes N`). It
// registers its nodes with the service, keeps them alive with heartbeats, and carries out its
// orders with timed fake processes: a start order makes the replica "run" (reported `running`
// at once) for the job's duration_s (then `succeeded`; 0: until stopped); a stop order ends it
// (reported `stopped`); an evict order (a warning ahead of a stop) and standby and resume orders
// are counted, a standby order answered `standby` at once (a fake process holds no GPU memory to
// release); a migrate order starts a second
// instance of the replica on the order's node, for what is left of its run, beside the old one
// (which its stop order ends). Every report names the instance's node. It speaks only the
// service's HTTP API (server/http_api.h) with its agent token.
//
// Threads: one long-polls orders (GET /v1/agent/orders, carrying them out in seq order), one
// sends reports in batches (POST /v1/agent/reports every report_interval_ms, at most 4,096 a
// request, sent again after no answer, a 5xx or a 429; and ends replicas whose time is up), one
// sends heartbeats for all its nodes (POST /v1/nodes/heartbeat). When the service restarts (its
// epoch changes) the agent takes orders again from the start; a repeated start of a replica it
// runs, or a stop of one it does not, is answered without a change.
// Thread-safety: Run blocks until `stop` becomes true; counters may be read from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace estuary {

// A node as the agent registers it (the wire fields of POST /v1/nodes).
struct AgentNode {
  std::string name;
  int32_t gpus = 0;
  std::string gpu_model;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<std::pair<std::string, std::vector<std::string>>> domains;  // plane -> names, top first
};

struct FakeAgentOptions {
  // The service's base URL, or its replicas' URLs separated by commas: a request that gets no
  // answer moves on to the next replica (the one that leads is the one that listens).
  std::string server = "http://127.0.0.1:8080";
  std::string token;                            // an agent token (tokens file role `agent`)
  std::vector<AgentNode> nodes;                 // its nodes
  int64_t heartbeat_interval_ms = 5000;         // default 5 s
  int64_t report_interval_ms = 20;              // default 20 ms
  int64_t poll_wait_ms = 1000;                  // long-poll wait, default 1 s
  size_t register_batch = 2000;                 // nodes per registration request
};

// `count` nodes named PREFIX-nNNNNNN with `gpus` GPUs of `model` each (CPU 16 cores and 128 GiB
// per GPU), laid out like the generated ASI clusters: 32 nodes per ASW, 8 ASWs per spine, 4
// spines per AZ (plane "data": az, spine, asw) and 64 nodes per RDMA-POD (plane "param").
std::vector<AgentNode> FakeNodes(const std::string& prefix, int count, int gpus, const std::string& model);

class FakeAgent {
 public:
  FakeAgent(FakeAgentOptions options, const Clock* clock);
  // Registers the nodes (InvalidArgument naming the reason when the service refuses them, or
  // Unavailable when it cannot be reached within ~30 s), then runs until `stop`.
  Status Run(const std::atomic<bool>& stop);

  uint64_t starts() const { return starts_; }
  uint64_t stops() const { return stops_; }
  uint64_t finished() const { return finished_; }
  uint64_t running() const { return running_; }
  uint64_t evict_notices() const { return evict_notices_; }
  uint64_t standby_orders() const { return standby_orders_; }
  uint64_t resume_orders() const { return resume_orders_; }
  uint64_t migrations() const { return migrations_; }

 private:
  FakeAgentOptions opt_;
  const Clock* clock_;
  std::atomic<uint64_t> starts_{0}, stops_{0}, finished_{0}, running_{0}, evict_notices_{0};
  std::atomic<uint64_t> standby_orders_{0}, resume_orders_{0}, migrations_{0};
};

}  // namespace estuary
