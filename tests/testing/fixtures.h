// Small helpers that let tests read as specifications:
//   ClusterBuilder c; c.AddNode("n0", Gpus(8)); auto t = c.Submit("t", Req().Gpus(2));
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/cluster_state.h"

namespace estuary::testing {

// A request built fluently: Req().Cpu(4000).Mem(1024).Gpus(2) or Req().SharedGpu(500).
struct Req {
  TaskRequest r;
  Req& Cpu(MilliCpu c) { r.cpu_milli = c; return *this; }
  Req& Mem(MemMiB m) { r.mem_mib = m; return *this; }
  Req& Gpus(int n) { r.gpu_count = n; r.gpu_milli = n > 0 ? kMilliPerGpu : 0; return *this; }
  Req& SharedGpu(MilliGpu m) { r.gpu_count = 1; r.gpu_milli = m; return *this; }
  Req& Models(GpuModelSet s) { r.models = s; return *this; }
  operator TaskRequest() const { return r; }  // NOLINT(google-explicit-constructor)
};

struct NodeShape {
  int gpus = 8;
  MilliCpu cpu = 96000;
  MemMiB mem = 393216;
  std::string model = "V100";
};
inline NodeShape Gpus(int n) { NodeShape s; s.gpus = n; return s; }
inline NodeShape CpuOnly(MilliCpu cpu) { NodeShape s; s.gpus = 0; s.cpu = cpu; s.model = ""; return s; }

class ClusterBuilder {
 public:
  NodeId AddNode(const std::string& name, NodeShape shape = {}) {
    NodeSpec s;
    s.name = name;
    s.cpu_milli = shape.cpu;
    s.mem_mib = shape.mem;
    s.gpu_count = shape.gpus;
    if (!shape.model.empty()) s.model = *state.models().Intern(shape.model);
    auto id = state.AddNode(s);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return *id;
  }
  TaskId Submit(const std::string& name, TaskRequest req) {
    JobSpec js;
    js.name = name;
    return state.AddTask(state.AddJob(js), name, req);
  }
  GpuModelSet ModelSet(const std::string& spec) { return *state.models().ParseSet(spec); }
  NodeId NodeNamed(const std::string& name) const {
    for (const Node& n : state.nodes()) {
      if (n.spec.name == name) return n.id;
    }
    ADD_FAILURE() << "no node " << name;
    return NodeId();
  }
  ClusterState state;
};

// A cluster of 8-GPU nodes n0, n1, ... Node i goes into the ASW named asws[i] of plane "data"
// (an empty name: not in the plane).
struct AswCluster {
  ClusterBuilder c;
  PlaneId data;

  explicit AswCluster(const std::vector<std::string>& asws) {
    data = *c.state.topology().AddPlane("data", {"asw", "node"});
    for (size_t i = 0; i < asws.size(); ++i) {
      NodeId n = c.AddNode("n" + std::to_string(i), Gpus(8));
      if (asws[i].empty()) continue;
      const std::vector<std::string> names = {asws[i]};
      EXPECT_TRUE(c.state.AssignDomains(n, data, names).ok());
    }
  }
  NodeId N(int i) const { return NodeId(static_cast<uint32_t>(i)); }
};

// Submits a single-task job `name` and binds it on `node` at `gpus` (which must fit).
inline TaskId Place(ClusterBuilder& c, const std::string& name, TaskRequest req, NodeId node, const GpuIndices& gpus) {
  const TaskId t = c.Submit(name, req);
  EXPECT_TRUE(c.state.CanBind(t, node, gpus)) << name;
  c.state.Bind(t, node, gpus);
  return t;
}

inline GpuIndices Idx(std::initializer_list<int> l) {
  GpuIndices g;
  for (int i : l) g.Push(i);
  return g;
}

}  // namespace estuary::testing
