// NodeAgent: the real node agent (issue 19, `estuary agent --node NAME`; docs/agent.md). It
// registers one node with the service and runs the replicas the service orders onto it as real
// processes (agent/process.h: under a shim, in their own process group, in cgroups), as the Unix
// user its tenant maps to, and reports how each ended.
//
// A start order becomes a process with a clean environment: PATH, HOME, USER and LOGNAME of the
// run-as user, the job's `env`, and ESTUARY_JOB_ID, ESTUARY_REPLICA (its rank),
// ESTUARY_REPLICAS (the replicas bound when it was ordered), ESTUARY_MASTER_ADDR and
// ESTUARY_MASTER_PORT (the rendezvous of rank 0), ESTUARY_RESTART_COUNT, ESTUARY_CHECKPOINT_DIR
// (STATE/checkpoints/JOB, owned by the user, kept across restarts on this node),
// ESTUARY_NOTICE_FILE (where an eviction notice writes its deadline), and CUDA_VISIBLE_DEVICES /
// NVIDIA_VISIBLE_DEVICES naming exactly the GPUs granted (UUIDs when known, else indices).
// An evict order sends the job's checkpoint signal and writes "deadline_ms <ms>" to the notice
// file; the stop that follows kills the group. A stop without a notice sends the checkpoint
// signal, then SIGKILL kill_wait_ms later. Reports: running once started (a migration's new
// instance: once the job's `ready` hook exits 0, tried every second); succeeded (exit 0);
// failed with the reason ("exit code 3", "signal 9 (Killed)", "out of memory" when the kernel
// killed it in its memory cgroup, or the OS error that kept it from starting); stopped when it
// ended after a stop order; standby / standby-failed after a standby order, once the job's
// `standby_enter` hook ran (the service lends the GPUs only on `standby`). A resume order runs
// `standby_leave`; if that fails the replica is killed and fails. Hooks run as the replica's
// user, in its cgroup, with its environment, their output in its log, killed after
// hook_timeout_ms.
//
// Restart: everything lives in STATE (instances/<task>@<node>/, the order cursor), so an agent
// that restarts — even after kill -9 — re-adopts the processes that still run, reports those that
// ended meanwhile (the shim recorded how), and takes orders after the last one it carried out:
// no replica starts twice. An instance is forgotten only once the service took the report of its
// end, so no end is lost to a kill between the two.
// Logs: each instance's stdout and stderr go to its log file, which is sent to the service in
// order (POST /v1/agent/logs) and kept there per replica (GET /v1/jobs/ID/logs); what was sent
// is punched out of the node's file in whole MiB, so a node keeps at most what the service does
// not have yet plus 1 MiB of each instance's log.
// Thread-safety: Run blocks until `stop`; counters may be read from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agent/cgroups.h"
#include "agent/fake_agent.h"
#include "common/clock.h"
#include "common/status.h"

namespace estuary {

// A GPU of the node as the agent found it (NVML) or was told (--gpus).
struct GpuDevice {
  int index = 0;     // the service's GPU index on the node
  int minor = 0;     // /dev/nvidiaN
  std::string uuid;  // empty: unknown (CUDA_VISIBLE_DEVICES then names indices)
};

struct NodeAgentOptions {
  std::string server = "http://127.0.0.1:8080";  // or URL,URL,... of the service's replicas
  std::string token;                              // an agent token
  AgentNode node;                                 // what it registers
  std::string address;                            // where its replicas are reached; "" : its name
  std::vector<GpuDevice> gpus;                    // node.gpus of them, by index
  std::string state_dir;                          // REQUIRES: an existing directory
  std::map<std::string, std::string> users;       // tenant -> Unix user
  std::string default_user;                       // for other tenants; "": they are refused
  bool allow_root = false;                        // may a tenant run as root (uid 0)
  Cgroups cgroups;                                // default: none (Cgroups::Detect() to use them)
  int64_t heartbeat_interval_ms = 5000;
  int64_t report_interval_ms = 100;               // reports, exits and logs are looked at this often
  int64_t poll_wait_ms = 1000;                    // long-poll of orders
  int64_t kill_wait_ms = 10000;                   // a stop without a notice: SIGKILL this long after the signal
  int64_t hook_timeout_ms = 60000;                // a job's hook is killed (and failed) after this long
  int64_t log_chunk_bytes = 256 * 1024;           // at most this much log per instance per report round
};

class NodeAgent {
 public:
  NodeAgent(NodeAgentOptions options, const Clock* clock);
  ~NodeAgent();
  NodeAgent(const NodeAgent&) = delete;
  NodeAgent& operator=(const NodeAgent&) = delete;

  // Registers the node (InvalidArgument when the service refuses it, Unavailable when it cannot be
  // reached within ~30 s), re-adopts what STATE holds, then runs until `stop`. The processes it
  // started keep running after it returns (a restarted agent adopts them).
  Status Run(const std::atomic<bool>& stop);

  uint64_t starts() const { return starts_; }
  uint64_t adopted() const { return adopted_; }
  uint64_t ended() const { return ended_; }

 private:
  struct Impl;
  NodeAgentOptions opt_;
  const Clock* clock_;
  std::atomic<uint64_t> starts_{0}, adopted_{0}, ended_{0};
};

}  // namespace estuary
