// Exact resource quantities and the request of one task. All amounts are integers:
// CPU in milli-cores, memory in MiB, GPU in milli-GPU (1000 = one whole GPU).
#pragma once

#include <array>
#include <cstdint>

#include "common/strong_id.h"

namespace estuary {

using MilliCpu = int64_t;
using MemMiB = int64_t;
using MilliGpu = int32_t;

inline constexpr MilliGpu kMilliPerGpu = 1000;
// Largest number of GPUs on one node that the model supports (16-GPU nodes exist in Alibaba's
// fleet). Keeps per-node GPU state in a fixed array: no allocation on the hot path.
inline constexpr int kMaxGpusPerNode = 16;

struct NodeTag {};
struct TaskTag {};
struct JobTag {};
struct GpuModelTag {};
struct ReservationTag {};
using NodeId = StrongId<NodeTag>;
using TaskId = StrongId<TaskTag>;
using JobId = StrongId<JobTag>;
using GpuModelId = StrongId<GpuModelTag>;
using ReservationId = StrongId<ReservationTag>;

// A set of GPU models as a bit mask over GpuModelId values (at most 64 models per cluster).
// The empty set means "any model".
class GpuModelSet {
 public:
  static constexpr int kMaxModels = 64;
  constexpr GpuModelSet() = default;
  static GpuModelSet FromBits(uint64_t bits) { GpuModelSet s; s.bits_ = bits; return s; }
  void Add(GpuModelId m) { bits_ |= uint64_t{1} << m.value(); }
  bool Any() const { return bits_ == 0; }
  // True when a node of model `m` satisfies the set (an empty set admits every model).
  bool Admits(GpuModelId m) const {
    return bits_ == 0 || (m.valid() && (bits_ >> m.value() & 1));
  }
  uint64_t bits() const { return bits_; }
  friend bool operator==(GpuModelSet a, GpuModelSet b) { return a.bits_ == b.bits_; }

 private:
  uint64_t bits_ = 0;
};

// What one task asks for. A task with gpu_count == 1 and gpu_milli < 1000 shares one GPU with
// other tasks; otherwise each of its gpu_count GPUs must be wholly free (gpu_milli == 1000).
// `models` constrains GPU tasks only; CPU-only tasks ignore it.
struct TaskRequest {
  MilliCpu cpu_milli = 0;
  MemMiB mem_mib = 0;
  int32_t gpu_count = 0;
  MilliGpu gpu_milli = 0;  // per GPU
  GpuModelSet models;

  bool IsSharedGpu() const { return gpu_count == 1 && gpu_milli < kMilliPerGpu; }
  bool NeedsGpu() const { return gpu_count > 0 && gpu_milli > 0; }
  int64_t TotalGpuMilli() const { return int64_t{gpu_count} * gpu_milli; }
  friend bool operator==(const TaskRequest&, const TaskRequest&) = default;
};

// The GPU indices a task is bound to on its node (ascending). Size == gpu_count.
struct GpuIndices {
  std::array<uint8_t, kMaxGpusPerNode> idx{};
  uint8_t size = 0;
  void Push(int i) { idx[size++] = static_cast<uint8_t>(i); }
  const uint8_t* begin() const { return idx.data(); }
  const uint8_t* end() const { return idx.data() + size; }
};

}  // namespace estuary
