// Cluster spec files (YAML; docs/cluster-spec.md): node pools (GPU model, GPUs per node, CPU,
// memory), a topology of named planes with ordered levels, and nodes — one at a time or in
// counted groups — each with its pool and its domain at every level of every plane.
//
//   pools:
//     - {name: h800, gpu_model: H800, gpus_per_node: 8, cpu_cores: 128, memory_gib: 1024}
//     (CPU as cpu_cores or cpu_milli, memory as memory_gib or memory_mib; a CPU-only pool has
//     gpus_per_node 0 and no gpu_model)
//   topology:
//     planes:
//       - {name: data, levels: [az, spine, asw, node]}
//       - {name: param, levels: [rdma_pod, node]}
//   nodes:
//     - {name: n-0001, pool: h800, domains: {az: az1, spine: s1, asw: asw1, rdma_pod: pod1}}
//     - {name_prefix: n-1, count: 32, pool: h800, domains: {az: az1, spine: s1, asw: asw2, rdma_pod: pod1}}
//
// A group's nodes are named name_prefix + a zero-padded index (0000, 0001, ...). Every error names
// the file, the line and the field ("cluster.yaml:12: field 'gpus_per_node': ...").
#pragma once

#include <string>

#include "common/status.h"
#include "model/cluster_state.h"

namespace estuary {

// Reads a cluster spec into a ClusterState (nodes, GPU models, topology and domain membership).
StatusOr<ClusterState> ReadClusterSpec(const std::string& path);
// Parses spec text; `name` stands for the file in messages.
StatusOr<ClusterState> ParseClusterSpec(const std::string& text, const std::string& name);
// Writes `state` as a cluster spec that ReadClusterSpec reads back to the same nodes, models and
// domains: one pool per distinct node shape (exact cpu_milli / memory_mib), one line per node.
std::string WriteClusterSpec(const ClusterState& state);

}  // namespace estuary
