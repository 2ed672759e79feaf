// Control groups for replicas (issue 19): each replica's process joins a group of its own that
// limits its CPU and memory and, where the v1 devices controller is present, denies the NVIDIA
// devices (character major 195) of the GPUs it was not granted.
//
// The hierarchy is detected at start: cgroup v2 when the unified hierarchy (ROOT itself, or
// ROOT/unified) has the memory controller available; otherwise the v1 controllers mounted at
// ROOT/memory, ROOT/cpu, ROOT/devices (each used when present and writable). Groups live under
// ROOT[/controller]/PARENT/NAME. With neither, replicas run unconfined and `mode()` says why.
// Limits: memory as memory.max (v2) or memory.limit_in_bytes and, when present,
// memory.memsw.limit_in_bytes (v1: no escape into swap); CPU as a CFS quota of cpu_milli/1000
// CPUs per 100 ms period (cpu.max; cpu.cfs_quota_us). A process the kernel kills for memory is
// counted in memory.events / memory.oom_control (`oom_kill`), which OomKills reads.
// Thread-safety: const methods may run concurrently; Create/Remove of distinct names too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace estuary {

struct CgroupLimits {
  int64_t cpu_milli = 0;              // 0: no CPU limit
  int64_t memory_mib = 0;             // 0: no memory limit
  std::vector<int> deny_gpu_minors;   // /dev/nvidiaN minors the replica may not open
};

class Cgroups {
 public:
  // Detects what ROOT offers (default /sys/fs/cgroup); groups go under PARENT (created).
  static Cgroups Detect(const std::string& root = "/sys/fs/cgroup", const std::string& parent = "estuary");

  // "v2", "v1 (memory, cpu, devices)" or "none: <why>".
  const std::string& mode() const { return mode_; }
  bool limits_memory() const { return !memory_.empty(); }
  bool limits_devices() const { return !devices_.empty(); }

  // Creates group NAME ([A-Za-z0-9._-]) with `limits` and returns the files a process writes its
  // pid to in order to join it (LaunchSpec::cgroup_procs); empty when there are no cgroups. A
  // group of that name left over from an earlier run is emptied and made anew. InvalidArgument
  // naming the file on failure.
  StatusOr<std::vector<std::string>> Create(const std::string& name, const CgroupLimits& limits) const;

  // How many processes of group NAME the kernel killed for memory (0 when unknown).
  int64_t OomKills(const std::string& name) const;

  // The processes still in group NAME.
  std::vector<int> Processes(const std::string& name) const;

  // Kills (SIGKILL) whatever is left in group NAME and removes it; Ok when it does not exist.
  Status Remove(const std::string& name) const;

 private:
  std::string mode_ = "none";
  bool v2_ = false;
  // The folders groups are made in, one per controller hierarchy (v1) or one (v2).
  std::string memory_, cpu_, devices_;
  std::vector<std::string> bases_;  // distinct folders of the above
};

}  // namespace estuary
