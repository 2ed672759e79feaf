// The registrations an agent would send for every node of a cluster (name, GPUs and model, CPU,
// memory, and its domains in every plane), in node order: lets a test drive the service over the
// same cluster a scenario gives the simulator.
#pragma once

#include <string>
#include <vector>

#include "model/cluster_state.h"
#include "server/service.h"

namespace estuary::testing {

inline std::vector<NodeRegistration> RegistrationsOf(const ClusterState& cluster) {
  std::vector<NodeRegistration> nodes;
  const Topology& topo = cluster.topology();
  for (const Node& n : cluster.nodes()) {
    NodeRegistration r;
    r.name = n.spec.name;
    r.gpus = n.spec.gpu_count;
    r.gpu_model = cluster.models().Name(n.spec.model);
    r.cpu_milli = n.spec.cpu_milli;
    r.memory_mib = n.spec.mem_mib;
    for (const Plane& p : topo.planes()) {
      std::vector<std::string> names;
      for (size_t l = 0; l < p.levels.size(); ++l) names.push_back(topo.domain(topo.NodeDomain(n.id, p.id, static_cast<int>(l))).name);
      r.domains.emplace_back(p.name, names);
    }
    nodes.push_back(std::move(r));
  }
  return nodes;
}

}  // namespace estuary::testing
