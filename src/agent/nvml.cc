#include "agent/nvml.h"

#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/text.h"

namespace estuary {
namespace {

// NVML's C interface, as its documentation gives it (nvml.h): every call returns 0 on success.
using NvmlDevice = void*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
using InitFn = int (*)();
using CountFn = int (*)(unsigned int*);
using HandleFn = int (*)(unsigned int, NvmlDevice*);
using TextFn = int (*)(NvmlDevice, char*, unsigned int);
using MinorFn = int (*)(NvmlDevice, unsigned int*);
using MemoryFn = int (*)(NvmlDevice, NvmlMemory*);
using ErrorFn = const char* (*)(int);

// The path of this process's cgroup in hierarchy `controller` (v1), or "".
std::string OwnCgroup(const std::string& controller) {
  std::istringstream in(FileText("/proc/self/cgroup"));
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::istringstream list(line.substr(a + 1, b - a - 1));
    for (std::string c; std::getline(list, c, ',');) {
      if (c == controller) return line.substr(b + 1);
    }
  }
  return "";
}

}  // namespace

StatusOr<std::vector<NvmlGpu>> DiscoverGpus(const std::string& library) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return Unavailable(std::string("NVML: ") + dlerror());
  auto sym = [&](const char* name) { return dlsym(lib, name); };
  const auto init = reinterpret_cast<InitFn>(sym("nvmlInit_v2"));
  const auto shutdown = reinterpret_cast<InitFn>(sym("nvmlShutdown"));
  const auto count = reinterpret_cast<CountFn>(sym("nvmlDeviceGetCount_v2"));
  const auto handle = reinterpret_cast<HandleFn>(sym("nvmlDeviceGetHandleByIndex_v2"));
  const auto name = reinterpret_cast<TextFn>(sym("nvmlDeviceGetName"));
  const auto uuid = reinterpret_cast<TextFn>(sym("nvmlDeviceGetUUID"));
  const auto minor = reinterpret_cast<MinorFn>(sym("nvmlDeviceGetMinorNumber"));
  const auto memory = reinterpret_cast<MemoryFn>(sym("nvmlDeviceGetMemoryInfo"));
  const auto error = reinterpret_cast<ErrorFn>(sym("nvmlErrorString"));
  if (!init || !shutdown || !count || !handle || !name || !uuid || !minor || !memory) {
    dlclose(lib);
    return Unavailable("NVML: " + library + " lacks the functions the agent uses");
  }
  auto why = [&](const char* call, int rc) {
    return Unavailable(std::string("NVML: ") + call + ": " + (error ? error(rc) : "error " + std::to_string(rc)));
  };
  if (const int rc = init(); rc != 0) {
    const Status st = why("nvmlInit_v2", rc);
    dlclose(lib);
    return st;
  }
  std::vector<NvmlGpu> out;
  Status st = Status::Ok();
  unsigned int n = 0;
  if (const int rc = count(&n); rc != 0) st = why("nvmlDeviceGetCount_v2", rc);
  for (unsigned int i = 0; st.ok() && i < n; ++i) {
    NvmlDevice d = nullptr;
    char text[96] = {0};
    NvmlGpu g;
    g.index = static_cast<int>(i);
    if (const int rc = handle(i, &d); rc != 0) {
      st = why("nvmlDeviceGetHandleByIndex_v2", rc);
      break;
    }
    if (name(d, text, sizeof text - 1) == 0) g.model = text;
    if (g.model.rfind("NVIDIA ", 0) == 0) g.model = g.model.substr(7);
    std::replace(g.model.begin(), g.model.end(), ' ', '-');
    std::fill(std::begin(text), std::end(text), 0);
    if (uuid(d, text, sizeof text - 1) == 0) g.uuid = text;
    unsigned int m = i;
    if (minor(d, &m) == 0) g.minor = static_cast<int>(m);
    else g.minor = static_cast<int>(i);
    NvmlMemory mem{};
    if (memory(d, &mem) == 0) g.memory_mib = static_cast<int64_t>(mem.total / (1024 * 1024));
    out.push_back(std::move(g));
  }
  shutdown();
  dlclose(lib);
  if (!st.ok()) return st;
  return out;
}

NodeResources DiscoverNode() {
  NodeResources r;
  cpu_set_t set;
  CPU_ZERO(&set);
  int64_t cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
  int64_t milli = cpus * 1000;
  const std::string cpu = "/sys/fs/cgroup/cpu" + OwnCgroup("cpu");
  std::istringstream quota(FileText(cpu + "/cpu.cfs_quota_us")), period(FileText(cpu + "/cpu.cfs_period_us"));
  int64_t q = -1, p = 0;
  if ((quota >> q) && (period >> p) && q > 0 && p > 0) milli = std::min(milli, q * 1000 / p);
  r.cpu_milli = milli;
  int64_t bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  std::istringstream limit(FileText("/sys/fs/cgroup/memory" + OwnCgroup("memory") + "/memory.limit_in_bytes"));
  int64_t l = 0;
  if ((limit >> l) && l > 0) bytes = std::min(bytes, l);
  r.memory_mib = bytes / (1024 * 1024);
  return r;
}

}  // namespace estuary
