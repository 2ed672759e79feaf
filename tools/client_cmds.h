// The command-line client of `estuary serve` (issue 19; docs/agent.md): shaped like what users
// know from sbatch/squeue/scancel and kubectl.
//   estuary submit FILE|-            a job (JSON or YAML, the job schema), checked before it is sent
//   estuary jobs [--all]             a table of the caller's jobs (pending and running; --all: ended too)
//   estuary job ID                   its state, replicas, where they run and why it waits
//   estuary cancel ID
//   estuary logs ID [--replica R] [--follow]
//   estuary nodes                    (an admin's token)
//   estuary queues [--set FILE]      the queues (a tenant: its own); --set replaces them (an admin)
// The server and token come from --server/--token, else ESTUARY_SERVER/ESTUARY_TOKEN, else the
// client file (ESTUARY_CLIENT_CONFIG, default ~/.config/estuary/client): lines `server=URL` and
// `token=TOKEN`. `--output json` prints the service's JSON for scripts. Exit codes: 0; 2 with one
// line on bad input, a refused request (HTTP 4xx: the service's reason), or a service that cannot
// be reached; 1 on a service error (5xx).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace estuary {

struct ClientFlags {
  std::string server, token;
  std::string output = "table";  // table | json
  std::string file;              // submit; queues --set
  std::string id;                // job, cancel, logs
  bool all = false;              // jobs
  int replica = 0;               // logs
  bool follow = false;           // logs
};

struct ClientCommands {
  CLI::App *submit = nullptr, *jobs = nullptr, *job = nullptr, *cancel = nullptr, *logs = nullptr, *nodes = nullptr,
           *queues = nullptr;
  bool Parsed() const;
};

ClientCommands AddClientCommands(CLI::App& app, ClientFlags& f);
int RunClientCommand(const ClientCommands& c, ClientFlags f);

}  // namespace estuary
