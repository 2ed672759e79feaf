// Generator of ASI-like clusters (Alibaba OSDI'26): 8-GPU nodes under access switches (ASW) of
// 32–64 nodes, one GPU model per ASW, ASWs under spines under availability zones (plane "data":
// az > spine > asw > node), and every node in an RDMA-POD (plane "param": rdma_pod > node).
// Seeded: the same options give the same cluster.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "model/cluster_state.h"

namespace estuary {

struct ModelShare {
  std::string model;     // GPU model name
  double share = 1;      // relative share of ASWs with this model
  int64_t cpu_cores = 96;
  int64_t memory_gib = 1024;
};

struct GeneratorOptions {
  int64_t total_gpus = 155410;  // nodes = total_gpus / gpus_per_node (rounded down)
  int32_t gpus_per_node = 8;
  int32_t nodes_per_asw_min = 32;
  int32_t nodes_per_asw_max = 64;
  int32_t asws_per_spine = 8;
  int32_t spines_per_az = 8;
  int32_t rdma_pod_nodes = 128;  // consecutive nodes per RDMA-POD
  // Default mix: H800 / A100 / A10 ASWs in a 4:4:2 ratio.
  std::vector<ModelShare> models = {{"H800", 4, 128, 2048}, {"A100", 4, 96, 1024}, {"A10", 2, 64, 512}};
  uint64_t seed = 1;
};

// Fails (naming the option) on non-positive sizes, min > max, or an empty/invalid model mix.
StatusOr<ClusterState> GenerateCluster(const GeneratorOptions& options);
// Parses "MODEL:SHARE:CPU_CORES:MEMORY_GIB,..." (e.g. "H800:4:128:2048,A10:1:64:512").
StatusOr<std::vector<ModelShare>> ParseModelMix(const std::string& text);

}  // namespace estuary
