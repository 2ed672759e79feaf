// `estuary serve` and `estuary agent` (issue 7): the live service and its fake node agent.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "server/service.h"
#include "sim/scenario.h"

namespace estuary {

struct ServeFlags {
  std::string listen = "127.0.0.1:8080";
  std::string data;
  std::string logs;  // replicas' logs; default DATA/logs (sqlite), none (etcd)
  std::string tokens;
  std::string sync = "full";
  std::string policy;      // empty: the configuration's (--config), else best-fit
  std::string config, configuration;  // --config FILE, --configuration NAME
  std::string tls_cert, tls_key;
  std::string store = "sqlite";
  std::string etcd_endpoints;
  std::string etcd_prefix = "estuary/";
  std::string advertise;
  int64_t grace_s = -1;    // < 0: the configuration's preempt grace_s (--config), else 60
  int64_t heartbeat_timeout_s = 30;
  int64_t retain_ended_s = 86400;
  int64_t max_body_bytes = 1 << 20;
  double rate = 20000;
};

struct AgentFlags {
  std::string server;
  std::string token;
  std::string token_file;  // --token-file: a file holding the token (one line), instead of --token
  int fake_nodes = 0;
  int gpus_per_node = 8;
  std::string gpu_model = "H800";
  std::string prefix = "fake";
  std::string cluster;
  int64_t heartbeat_s = 5;
  // A real node (--node): what it registers and how it runs replicas (docs/agent.md).
  std::string node;
  int gpus = -1;              // -1: discover through NVML
  std::string domains;        // "data=az1/spine3/asw12,param=pod7"
  std::string address;
  std::string state_dir = "/var/lib/estuary/agent";
  std::string run_as;         // "tenant=user,tenant=user"
  std::string default_user;
  bool allow_root = false;
  int64_t cpu_milli = 0, memory_mib = 0;  // 0: discovered
  int64_t kill_wait_s = 10;
};

// The service's options for a scheduler configuration (the schema scenarios use; `path`: its file,
// in messages): its policy, Reclaim (on, with its grace and exit model, or off), Absorb, queue
// order, Align, topology, Standby's grace and lending bound, holds for waiting gangs, backfill,
// queues and sharing, and the engine's own defragmentation. `pack` and the domain objective of
// `defrag` name topology levels that a service without nodes cannot resolve at start: they are
// refused, naming the file and line. Other fields of *o are left as they are.
Status ApplySchedulerConfig(const SchedulerConfig& c, const std::string& path, ServiceOptions* o);

CLI::App* AddServeCommand(CLI::App& app, ServeFlags& f);
CLI::App* AddAgentCommand(CLI::App& app, AgentFlags& f);
// Run until SIGINT or SIGTERM. Exit codes: 0, 2 bad flags or files (one line naming them), 1
// internal failure.
int RunServeCommand(const ServeFlags& f);
int RunAgentCommand(const AgentFlags& f);

}  // namespace estuary
