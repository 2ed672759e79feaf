// Running one replica as a real process (issue 19), the way a node agent must: in its own
// session and process group, as a given user, in a workdir, with exactly the environment it is
// given, its stdout and stderr appended to a log file, inside cgroups it joins before exec.
//
// Each launch forks a small *shim* (like containerd-shim or conmon): the shim starts a new
// session, forks the job's process and waits for it, then writes how it ended to
// `<state_dir>/exit`. The job's process therefore outlives the agent that launched it, and an
// agent that restarts (even after kill -9) learns how an instance ended, or that it still runs,
// from its state directory alone (AdoptInstance). Everything the children do between fork and exec
// is async-signal-safe: every string and path is prepared before the first fork.
//
// A launch that cannot start the command (a workdir that does not exist, a command not found or
// not executable, a user that cannot be switched to, a cgroup that cannot be joined) fails with
// the OS error in one line, e.g. "chdir /nope: No such file or directory".
//
// Thread-safety: free functions; Launch may be called from any thread of a multi-threaded program.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace estuary {

struct LaunchSpec {
  // The command. argv[0] without a '/' is looked up in the PATH of `env` (default
  // "/usr/local/bin:/usr/bin:/bin"). REQUIRES: not empty.
  std::vector<std::string> argv;
  std::vector<std::string> env;  // the whole environment, "NAME=VALUE" each (nothing is inherited)
  std::string workdir = "/";     // must exist
  uid_t uid = 0;                 // the user and groups the process runs as (the launcher's if
  gid_t gid = 0;                 //   it is not root: then these must be its own)
  std::vector<gid_t> groups;     // supplementary groups (set only when the launcher is root)
  std::string log_path;          // stdout and stderr are appended here (created 0640)
  // cgroup.procs (v2) or tasks-style files the process writes its pid to before exec.
  std::vector<std::string> cgroup_procs;
  std::string state_dir;  // exists; the shim writes `pid` and `exit` here
};

struct Launched {
  pid_t pid = 0;   // the job's process, leader of its process group (signal -pid for all)
  pid_t shim = 0;  // a child of the caller: reap it with ReapShim
};

// Starts the process. InvalidArgument with the OS error when the command could not be started
// (nothing then runs, and no `exit` is written); InvalidArgument on an empty argv or state_dir.
StatusOr<Launched> Launch(const LaunchSpec& spec);

// How a process ended: exited with `code`, or was killed by `signal` (then code is -1).
struct ProcessExit {
  int code = -1;
  int signal = 0;
  bool operator==(const ProcessExit&) const = default;
};
// "exit code 3", "signal 9 (Killed)".
std::string DescribeExit(const ProcessExit& e);

// The end the shim recorded in `state_dir`, or nullopt while the process runs (or when the shim
// itself died before writing it: see InstanceAlive).
std::optional<ProcessExit> ReadExit(const std::string& state_dir);

// Whether the job's process recorded in `state_dir` (its `pid` file) still exists: false when
// there is no pid file, or its pid is gone or now belongs to another process (its start time
// differs from the one recorded).
bool InstanceAlive(const std::string& state_dir);

// The job's pid recorded in `state_dir`, or 0.
pid_t RecordedPid(const std::string& state_dir);

// Sends `signal` to the process group of `pid` (the job and everything it started in its group).
// Ok when the group is already gone.
Status SignalGroup(pid_t pid, int signal);

// Reaps the shim if it has ended (non-blocking); true once reaped (or not our child).
bool ReapShim(pid_t shim);

// Looks `name` up in `path` (colon-separated) as execvp would; "" when not found.
std::string FindExecutable(const std::string& name, const std::string& path);

}  // namespace estuary
