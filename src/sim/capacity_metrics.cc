#include "sim/capacity_metrics.h"

#include <cmath>
#include <map>

namespace estuary {
namespace {

struct NodeUse {
  double hp_gpus = 0;       // GPUs requested by HP work on the node
  double hp_cpu_cores = 0;  // cores requested by HP work
};

NodeUse HpUse(const ClusterState& s, const Node& n, const HpPredicate& is_hp) {
  NodeUse u;
  for (TaskId id : n.tasks) {
    const Task& t = s.task(id);
    if (is_hp && !is_hp(t)) continue;
    u.hp_gpus += static_cast<double>(t.gpus.size) * t.req.gpu_milli / kMilliPerGpu;
    u.hp_cpu_cores += static_cast<double>(t.req.cpu_milli) / 1000.0;
  }
  return u;
}

}  // namespace

const std::vector<ProbeShape>& ProbeShapes() {
  static const std::vector<ProbeShape> shapes = {{"1G8C", 1, 8},   {"1G12C", 1, 12}, {"4G32C", 4, 32},
                                                 {"4G48C", 4, 48}, {"4G64C", 4, 64}, {"8G64C", 8, 64},
                                                 {"8G96C", 8, 96}, {"8G128C", 8, 128}};
  return shapes;
}

std::vector<IdleCauses> IdleGpuCauses(const ClusterState& state, const HpPredicate& is_hp) {
  std::vector<IdleCauses> out;
  for (const ProbeShape& p : ProbeShapes()) out.push_back({p, 0, 0, 0, 0});
  for (const Node& n : state.nodes()) {
    if (n.spec.gpu_count == 16) continue;  // as the released aggregation does
    const NodeUse u = HpUse(state, n, is_hp);
    const double idle = std::max(static_cast<double>(n.spec.gpu_count) - u.hp_gpus, 0.0);
    const double idle_cpus = std::max(static_cast<double>(n.spec.cpu_milli) / 1000.0 - u.hp_cpu_cores, 0.0);
    const double whole = std::floor(idle + 1e-9);
    const double frac = idle - whole > 1e-9 ? idle - whole : 0.0;
    for (IdleCauses& c : out) {
      const int g = c.shape.gpus;
      const bool cpu_ok = idle_cpus >= c.shape.cpu_cores;
      c.idle_gpus += idle;
      if (cpu_ok && whole >= g) c.fractional += frac;
      if (cpu_ok && whole > 0 && whole < g) c.stranded += whole;
      if (!cpu_ok) c.insufficient_cpu += idle >= g ? g : (idle > 0 ? idle : 0);
    }
  }
  return out;
}

StatusOr<TopologyFulfilment> JobsFulfillable(const ClusterState& state, int job_gpus, const std::string& plane_name,
                                             const std::string& level_name, const HpPredicate& is_hp) {
  if (job_gpus <= 0) return InvalidArgument("job size must be positive");
  const Topology& t = state.topology();
  auto plane = t.FindPlane(plane_name);
  if (!plane) return InvalidArgument("no topology plane '" + plane_name + "'");
  auto level = t.FindLevel(*plane, level_name);
  if (!level) return InvalidArgument("plane '" + plane_name + "' has no level '" + level_name + "'");
  std::vector<int64_t> slots(state.num_nodes(), 0);
  for (const Node& n : state.nodes()) {
    const NodeUse u = HpUse(state, n, is_hp);
    const int64_t gpu_slots = std::max<int64_t>(n.spec.gpu_count - static_cast<int64_t>(std::floor(u.hp_gpus + 1e-9)), 0);
    const int64_t cpu_slots = std::max<int64_t>(
        static_cast<int64_t>(std::floor((static_cast<double>(n.spec.cpu_milli) / 1000.0 - u.hp_cpu_cores) / 12.0 + 1e-9)), 0);
    slots[n.id.value()] = std::min(gpu_slots, cpu_slots);
  }
  TopologyFulfilment f;
  for (DomainId d : t.DomainsAt(*plane, *level)) {
    int64_t sum = 0;
    for (NodeId n : t.domain(d).nodes) sum += slots[n.value()];
    f.within += sum / job_gpus;
  }
  std::map<uint32_t, int64_t> per_model;  // jobs pin a GPU model
  for (const Node& n : state.nodes()) {
    if (n.spec.model.valid()) per_model[n.spec.model.value()] += slots[n.id.value()];
  }
  for (const auto& [m, sum] : per_model) f.across += sum / job_gpus;
  return f;
}

}  // namespace estuary
