#include "agent/cgroups.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/text.h"

namespace estuary {
namespace {

bool IsDir(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Status Write(const std::string& path, const std::string& value) {
  FILE* f = std::fopen(path.c_str(), "we");
  if (f == nullptr) return InvalidArgument("cgroup " + path + ": " + std::strerror(errno));
  const bool ok = std::fputs(value.c_str(), f) >= 0;
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) return InvalidArgument("cgroup " + path + ": writing '" + value + "': " + std::strerror(ok ? errno : err));
  return Status::Ok();
}

// The value of "KEY N" in a flat-keyed cgroup file, or 0.
int64_t Keyed(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  int64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

bool MakeDir(const std::string& path) { return mkdir(path.c_str(), 0755) == 0 || errno == EEXIST; }

}  // namespace

Cgroups Cgroups::Detect(const std::string& root, const std::string& parent) {
  Cgroups c;
  // cgroup v2: the unified hierarchy with the memory controller available.
  for (const std::string& unified : {root, root + "/unified"}) {
    const std::string controllers = FileText(unified + "/cgroup.controllers");
    std::istringstream in(controllers);
    std::vector<std::string> names;
    for (std::string n; in >> n;) names.push_back(n);
    if (std::find(names.begin(), names.end(), "memory") == names.end()) continue;
    const bool cpu = std::find(names.begin(), names.end(), "cpu") != names.end();
    const std::string enable = cpu ? "+memory +cpu" : "+memory";
    const std::string base = unified + "/" + parent;
    if (!Write(unified + "/cgroup.subtree_control", enable).ok() || !MakeDir(base) ||
        !Write(base + "/cgroup.subtree_control", enable).ok()) {
      continue;
    }
    c.v2_ = true;
    c.memory_ = base;
    if (cpu) c.cpu_ = base;
    c.bases_ = {base};
    c.mode_ = "v2";
    return c;
  }
  // cgroup v1: each controller where it is mounted and writable.
  std::string used;
  for (const char* name : {"memory", "cpu", "devices"}) {
    const std::string dir = root + "/" + name;
    if (!IsDir(dir) || access(dir.c_str(), W_OK) != 0 || !MakeDir(dir + "/" + parent)) continue;
    const std::string base = dir + "/" + parent;
    (std::string(name) == "memory" ? c.memory_ : std::string(name) == "cpu" ? c.cpu_ : c.devices_) = base;
    c.bases_.push_back(base);
    used += (used.empty() ? "" : ", ") + std::string(name);
  }
  c.mode_ = used.empty() ? "none: no writable cgroup v2 memory controller or v1 controller under " + root
                         : "v1 (" + used + ")";
  return c;
}

StatusOr<std::vector<std::string>> Cgroups::Create(const std::string& name, const CgroupLimits& limits) const {
  if (name.empty() || name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
                          std::string::npos ||
      name == "." || name == "..") {
    return InvalidArgument("cgroup name '" + name + "': expected [A-Za-z0-9._-]");
  }
  if (Status s = Remove(name); !s.ok()) return s;
  std::vector<std::string> procs;
  for (const std::string& base : bases_) {
    const std::string dir = base + "/" + name;
    if (mkdir(dir.c_str(), 0755) != 0) return InvalidArgument("cgroup " + dir + ": " + std::strerror(errno));
    procs.push_back(dir + "/cgroup.procs");
  }
  const int64_t bytes = limits.memory_mib * 1024 * 1024;
  const int64_t quota_us = limits.cpu_milli * 100;  // of a 100,000 us period
  Status s;
  if (v2_) {
    const std::string dir = memory_ + "/" + name;
    if (limits.memory_mib > 0) s = Write(dir + "/memory.max", std::to_string(bytes));
    if (s.ok() && limits.memory_mib > 0 && access((dir + "/memory.swap.max").c_str(), W_OK) == 0) {
      s = Write(dir + "/memory.swap.max", "0");
    }
    if (s.ok() && !cpu_.empty() && limits.cpu_milli > 0) s = Write(dir + "/cpu.max", std::to_string(quota_us) + " 100000");
  } else {
    if (!memory_.empty() && limits.memory_mib > 0) {
      const std::string dir = memory_ + "/" + name;
      s = Write(dir + "/memory.limit_in_bytes", std::to_string(bytes));
      if (s.ok() && access((dir + "/memory.memsw.limit_in_bytes").c_str(), W_OK) == 0) {
        s = Write(dir + "/memory.memsw.limit_in_bytes", std::to_string(bytes));
      }
    }
    if (s.ok() && !cpu_.empty() && limits.cpu_milli > 0) {
      const std::string dir = cpu_ + "/" + name;
      s = Write(dir + "/cpu.cfs_period_us", "100000");
      if (s.ok()) s = Write(dir + "/cpu.cfs_quota_us", std::to_string(quota_us));
    }
    if (!devices_.empty()) {
      for (int minor : limits.deny_gpu_minors) {
        if (s.ok()) s = Write(devices_ + "/" + name + "/devices.deny", "c 195:" + std::to_string(minor) + " rwm");
      }
    }
  }
  if (!s.ok()) {
    (void)Remove(name);
    return s;
  }
  return procs;
}

int64_t Cgroups::OomKills(const std::string& name) const {
  if (memory_.empty()) return 0;
  const std::string dir = memory_ + "/" + name;
  return Keyed(FileText(dir + (v2_ ? "/memory.events" : "/memory.oom_control")), "oom_kill");
}

std::vector<int> Cgroups::Processes(const std::string& name) const {
  std::vector<int> pids;
  for (const std::string& base : bases_) {
    std::istringstream in(FileText(base + "/" + name + "/cgroup.procs"));
    for (int pid = 0; in >> pid;) {
      if (std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(pid);
    }
  }
  return pids;
}

Status Cgroups::Remove(const std::string& name) const {
  for (const std::string& base : bases_) {
    const std::string dir = base + "/" + name;
    if (!IsDir(dir)) continue;
    // A group can be removed once it is empty; its processes may take a moment to die.
    for (int attempt = 0; attempt < 200; ++attempt) {
      std::istringstream in(FileText(dir + "/cgroup.procs"));
      for (int pid = 0; in >> pid;) kill(pid, SIGKILL);
      if (rmdir(dir.c_str()) == 0 || errno == ENOENT) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (IsDir(dir)) return Internal("cgroup " + dir + ": cannot remove: " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace estuary
