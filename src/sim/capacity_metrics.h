// Capacity metrics of a cluster snapshot (../shared/docs/metrics.md §3 and §5), from Alibaba
// OSDI'26 and its released aggregation code. "HP work" is the set of bound tasks `is_hp` accepts
// (default: every bound task, while the engine has no priority classes yet). GPU amounts of HP
// work are in GPUs (milli / 1000, so shared GPUs count fractionally); CPU in cores.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/cluster_state.h"

namespace estuary {

using HpPredicate = std::function<bool(const Task&)>;

// A probe shape: a request of `gpus` GPUs with `cpu_cores` cores.
struct ProbeShape {
  std::string name;  // e.g. "8G64C"
  int gpus = 0;
  int cpu_cores = 0;
};
// 1G8C, 1G12C, 4G32C, 4G48C, 4G64C, 8G64C, 8G96C, 8G128C.
const std::vector<ProbeShape>& ProbeShapes();

// Idle GPUs of one probe shape, summed over nodes (16-GPU nodes skipped), split by cause (§3):
// fractional (a fraction of a GPU beside enough whole ones), stranded (whole GPUs, fewer than the
// shape needs, with enough CPU), insufficient CPU (GPUs enough or some, CPU short).
struct IdleCauses {
  ProbeShape shape;
  double idle_gpus = 0;  // all idle GPUs counted (same for every shape)
  double fractional = 0;
  double stranded = 0;
  double insufficient_cpu = 0;
};
std::vector<IdleCauses> IdleGpuCauses(const ClusterState& state, const HpPredicate& is_hp = nullptr);

// §5: how many jobs of `job_gpus` GPUs (12 cores per GPU) the free capacity can hold, within one
// domain of the given level (Σ over domains of ⌊slots / S⌋) and across domains (per GPU model,
// ⌊Σ slots / S⌋). A node's slots = min(GPUs not requested by HP work, ⌊free HP-CPU / 12⌋).
struct TopologyFulfilment {
  int64_t within = 0;
  int64_t across = 0;
};
// Fails naming the plane or level when the topology lacks it.
StatusOr<TopologyFulfilment> JobsFulfillable(const ClusterState& state, int job_gpus, const std::string& plane,
                                             const std::string& level, const HpPredicate& is_hp = nullptr);

}  // namespace estuary
