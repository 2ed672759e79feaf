// Helpers shared by the engine's and the federation's tests: small clusters, a job of whole GPUs
// as a driver gives it to the engine (a federation member's FedJob is the same type) and a queue.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/io.h"
#include "quota/queues.h"
#include "tests/testing/fixtures.h"

namespace estuary::testing {

// `nodes` 8-GPU nodes of `model` named n0, n1, ..., the first half in ASW asw0 and the rest in
// asw1 of plane "data" (levels asw, node).
inline ClusterState TwoAswCluster(int nodes, const std::string& model = "H800") {
  ClusterBuilder c;
  const PlaneId data = *c.state.topology().AddPlane("data", {"asw", "node"});
  for (int i = 0; i < nodes; ++i) {
    NodeShape s;
    s.model = model;
    const NodeId n = c.AddNode("n" + std::to_string(i), s);
    const std::vector<std::string> asw = {i < (nodes + 1) / 2 ? "asw0" : "asw1"};
    EXPECT_TRUE(c.state.AssignDomains(n, data, asw).ok());
  }
  return std::move(c.state);
}

// 13 8-GPU nodes n0 ... n12 in ASWs of 4, 4, 1, 1 and 3 nodes (asw0: n0-n3, asw1: n4-n7, asw2:
// n8, asw3: n9, asw4: n10-n12) of plane "data" (levels asw, node).
inline ClusterState FiveAswCluster() {
  ClusterBuilder c;
  const PlaneId data = *c.state.topology().AddPlane("data", {"asw", "node"});
  const int sizes[] = {4, 4, 1, 1, 3};
  int k = 0;
  for (int a = 0; a < 5; ++a) {
    for (int i = 0; i < sizes[a]; ++i) {
      const NodeId n = c.AddNode("n" + std::to_string(k++), NodeShape{});
      const std::vector<std::string> asw = {"asw" + std::to_string(a)};
      EXPECT_TRUE(c.state.AssignDomains(n, data, asw).ok());
    }
  }
  return std::move(c.state);
}

// Queue `name` under `parent` ("": a root) guaranteed `guarantee_gpus` GPUs in all (0: none).
inline QueueSpec Q(const std::string& name, int64_t guarantee_gpus, int64_t weight = 1, const std::string& parent = "") {
  QueueSpec s;
  s.name = name;
  s.parent = parent;
  if (guarantee_gpus > 0) s.guarantee.gpu_milli = guarantee_gpus * kMilliPerGpu;
  s.weight = weight;
  return s;
}

// Job `id` ("j<id>") of `replicas` (min = max) x `gpus` whole GPUs, 8 cores and 1 GiB each.
inline EngineJob WholeGpuJob(uint32_t id, int replicas, int gpus, int32_t priority, bool preemptible = false) {
  EngineJob j;
  j.id = id;
  j.name = "j" + std::to_string(id);
  j.min_replicas = j.max_replicas = replicas;
  j.per_replica.gpu_count = gpus;
  j.per_replica.gpu_milli = kMilliPerGpu;
  j.per_replica.cpu_milli = 8000;
  j.per_replica.mem_mib = 1024;
  j.priority = priority;
  j.preemptible = preemptible;
  return j;
}

}  // namespace estuary::testing
