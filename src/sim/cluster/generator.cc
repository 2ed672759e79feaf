#include "sim/cluster/generator.h"

#include <cstdio>
#include <sstream>

#include "common/rng.h"

namespace estuary {

StatusOr<std::vector<ModelShare>> ParseModelMix(const std::string& text) {
  std::vector<ModelShare> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::stringstream f(item);
    std::string model, share, cpu, mem;
    if (!std::getline(f, model, ':') || !std::getline(f, share, ':') || !std::getline(f, cpu, ':') ||
        !std::getline(f, mem, ':') || model.empty()) {
      return InvalidArgument("--models: '" + item + "' is not MODEL:SHARE:CPU_CORES:MEMORY_GIB");
    }
    ModelShare m;
    m.model = model;
    try {
      size_t a = 0, b = 0, c = 0;
      m.share = std::stod(share, &a);
      m.cpu_cores = std::stoll(cpu, &b);
      m.memory_gib = std::stoll(mem, &c);
      if (a != share.size() || b != cpu.size() || c != mem.size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      return InvalidArgument("--models: '" + item + "' has a non-numeric share, CPU or memory");
    }
    if (!(m.share > 0) || m.cpu_cores <= 0 || m.memory_gib <= 0) {
      return InvalidArgument("--models: '" + item + "': share, CPU and memory must be positive");
    }
    out.push_back(m);
  }
  if (out.empty()) return InvalidArgument("--models: empty");
  return out;
}

StatusOr<ClusterState> GenerateCluster(const GeneratorOptions& o) {
  auto positive = [](int64_t v, const char* name) -> Status {
    if (v <= 0) return InvalidArgument(std::string(name) + ": must be positive, got " + std::to_string(v));
    return Status::Ok();
  };
  ESTUARY_RETURN_IF_ERROR(positive(o.total_gpus, "--total-gpus"));
  ESTUARY_RETURN_IF_ERROR(positive(o.gpus_per_node, "--gpus-per-node"));
  ESTUARY_RETURN_IF_ERROR(positive(o.nodes_per_asw_min, "--nodes-per-asw"));
  ESTUARY_RETURN_IF_ERROR(positive(o.asws_per_spine, "--asws-per-spine"));
  ESTUARY_RETURN_IF_ERROR(positive(o.spines_per_az, "--spines-per-az"));
  ESTUARY_RETURN_IF_ERROR(positive(o.rdma_pod_nodes, "--rdma-pod-nodes"));
  if (o.gpus_per_node > kMaxGpusPerNode) {
    return InvalidArgument("--gpus-per-node: at most " + std::to_string(kMaxGpusPerNode));
  }
  if (o.nodes_per_asw_min > o.nodes_per_asw_max) return InvalidArgument("--nodes-per-asw: min exceeds max");
  if (o.total_gpus / o.gpus_per_node > 10'000'000) return InvalidArgument("--total-gpus: more than 10 million nodes");
  if (o.models.empty()) return InvalidArgument("--models: empty");
  double total_share = 0;
  for (const ModelShare& m : o.models) total_share += m.share;

  ClusterState state;
  std::vector<GpuModelId> model_ids;
  for (const ModelShare& m : o.models) {
    auto id = state.models().Intern(m.model);
    if (!id.ok()) return InvalidArgument("--models: " + id.status().message());
    model_ids.push_back(*id);
  }
  const PlaneId data = *state.topology().AddPlane("data", {"az", "spine", "asw", "node"});
  const PlaneId param = *state.topology().AddPlane("param", {"rdma_pod", "node"});
  Rng rng(o.seed);
  const int64_t nodes = o.total_gpus / o.gpus_per_node;
  char buf[64];
  int64_t made = 0;
  for (int64_t asw = 0; made < nodes; ++asw) {
    const int64_t span = o.nodes_per_asw_max - o.nodes_per_asw_min + 1;
    const int64_t size = std::min<int64_t>(nodes - made, o.nodes_per_asw_min + static_cast<int64_t>(rng.Uniform(span)));
    // One GPU model per ASW, drawn by share.
    double x = rng.UniformDouble() * total_share;
    size_t mi = 0;
    while (mi + 1 < o.models.size() && x >= o.models[mi].share) x -= o.models[mi++].share;
    const ModelShare& m = o.models[mi];
    const int64_t spine = asw / o.asws_per_spine;
    const int64_t az = spine / o.spines_per_az;
    std::snprintf(buf, sizeof buf, "az%lld", static_cast<long long>(az));
    const std::string az_name = buf;
    std::snprintf(buf, sizeof buf, "spine%04lld", static_cast<long long>(spine));
    const std::string spine_name = buf;
    std::snprintf(buf, sizeof buf, "asw%05lld", static_cast<long long>(asw));
    const std::string asw_name = buf;
    for (int64_t k = 0; k < size; ++k, ++made) {
      NodeSpec s;
      std::snprintf(buf, sizeof buf, "node%07lld", static_cast<long long>(made));
      s.name = buf;
      s.gpu_count = o.gpus_per_node;
      s.model = model_ids[mi];
      s.cpu_milli = m.cpu_cores * 1000;
      s.mem_mib = m.memory_gib * 1024;
      auto id = state.AddNode(std::move(s));
      if (!id.ok()) return id.status();
      const std::vector<std::string> data_names = {az_name, spine_name, asw_name};
      ESTUARY_RETURN_IF_ERROR(state.AssignDomains(*id, data, data_names));
      std::snprintf(buf, sizeof buf, "pod%05lld", static_cast<long long>(made / o.rdma_pod_nodes));
      const std::vector<std::string> param_names = {buf};
      ESTUARY_RETURN_IF_ERROR(state.AssignDomains(*id, param, param_names));
    }
  }
  return state;
}

}  // namespace estuary
