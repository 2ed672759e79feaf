// What a real node has: its GPUs through NVML, loaded at run time (dlopen of libnvidia-ml.so.1:
// no link-time dependency, so the agent runs on machines without a driver), and its CPUs and
// memory from the OS and the agent's own cgroup. Thread-safety: free functions; DiscoverGpus
// initialises and shuts NVML down on each call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace estuary {

struct NvmlGpu {
  int index = 0;
  int minor = 0;           // /dev/nvidiaN
  std::string uuid;        // "GPU-..."
  std::string model;       // NVML's name without "NVIDIA " and with spaces as '-': "H800", "A100-SXM4-80GB"
  int64_t memory_mib = 0;
};

// The GPUs NVML reports, by index. Unavailable (with NVML's or dlopen's reason) when the library
// cannot be loaded or initialised — e.g. "libnvidia-ml.so.1: cannot open shared object file: No
// such file or directory" on a machine without a driver.
StatusOr<std::vector<NvmlGpu>> DiscoverGpus(const std::string& library = "libnvidia-ml.so.1");

struct NodeResources {
  int64_t cpu_milli = 0;   // CPUs this process may use (its affinity; its cgroup's CFS quota when lower)
  int64_t memory_mib = 0;  // physical memory (its memory cgroup's limit when lower)
};
NodeResources DiscoverNode();

}  // namespace estuary
