// Placement scenarios as a table of specifications: a small cluster, a history of bound tasks,
// one new task, the policy — and the node (and GPU) it must land on. Each row is checked with
// ClusterState::CheckInvariants() after the placement, and a second decision for an identical task
// on the unchanged state must agree (no flapping).
#include <gtest/gtest.h>

#include <cctype>

#include "sched/actions/allocate.h"
#include "sched/plugins/fgd/typical_tasks.h"
#include "sched/plugins/register.h"
#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::ClusterBuilder;
using testing::Idx;
using testing::Req;

struct Bound {
  const char* node;
  TaskRequest req;
  std::vector<int> gpus;
};

struct Scenario {
  const char* name;  // a sentence
  const char* policy;
  std::vector<std::pair<const char*, testing::NodeShape>> nodes;
  std::vector<Bound> bound;
  TaskRequest task;
  const char* want_node;  // nullptr: must not be placed
  int want_gpu = -1;      // for shared tasks: the GPU index it must take
};

testing::NodeShape Shape(int gpus, const char* model = "V100", MilliCpu cpu = 96000, MemMiB mem = 393216) {
  testing::NodeShape s = testing::Gpus(gpus);
  s.model = model;
  s.cpu = cpu;
  s.mem = mem;
  return s;
}

const std::vector<Scenario>& Table() {
  static const std::vector<Scenario> t = {
      {"best-fit puts a one-GPU task on the node with the least room left", "best-fit",
       {{"empty", Shape(8)}, {"busy", Shape(8)}},
       {{"busy", Req().Cpu(32000).Gpus(6), {0, 1, 2, 3, 4, 5}}},
       Req().Cpu(4000).Gpus(1), "busy"},
      {"an eight-GPU task only goes to a wholly free node", "best-fit",
       {{"almost", Shape(8)}, {"free", Shape(8)}},
       {{"almost", Req().SharedGpu(100), {3}}},
       Req().Gpus(8), "free"},
      {"a task pinned to T4 never lands on a V100 node even when that fits better", "best-fit",
       {{"v100", Shape(8)}, {"t4", Shape(8, "T4")}},
       {{"v100", Req().Gpus(7), {0, 1, 2, 3, 4, 5, 6}}},
       Req().Gpus(1).Models(GpuModelSet::FromBits(1u << 1)), "t4"},
      {"fgd fills the remaining share of a GPU rather than breaking a whole one", "fgd",
       {{"a", Shape(2)}, {"b", Shape(2)}},
       {{"a", Req().Cpu(1000).SharedGpu(500), {1}}, {"b", Req().Cpu(1000).Gpus(1), {0}}},
       Req().Cpu(1000).SharedGpu(500), "a", 1},
      {"gpu-packing stacks a shared task onto an already shared GPU", "gpu-packing",
       {{"idle", Shape(8)}, {"sharing", Shape(8)}},
       {{"sharing", Req().SharedGpu(400), {5}}},
       Req().SharedGpu(300), "sharing", 5},
      {"gpu-clustering keeps shared tasks with shared tasks", "gpu-clustering",
       {{"whole", Shape(8)}, {"shared", Shape(8)}},
       {{"whole", Req().Gpus(1), {0}}, {"shared", Req().SharedGpu(200), {0}}},
       Req().SharedGpu(200), "shared"},
      {"a node without enough CPU is skipped even when its GPUs are free", "best-fit",
       {{"cpu-poor", Shape(8, "V100", 4000)}, {"cpu-rich", Shape(8)}},
       {{"cpu-rich", Req().Gpus(4), {0, 1, 2, 3}}},
       Req().Cpu(8000).Gpus(1), "cpu-rich"},
      // kube's unit-test example: node1 37 + 87 = 124, node2 50 + 100 = 150 (plugins_test.cc).
      {"k8s-fit sends kube's 3-core 5000-MiB pod to the larger of two differently sized nodes", "k8s-fit",
       {{"node1", Shape(8, "V100", 4000, 10000)}, {"node2", Shape(8, "V100", 6000, 10000)}},
       {},
       Req().Cpu(3000).Mem(5000), "node2"},
      // LeastAllocated spreads: the empty node scores higher on CPU and balance; best-fit packs.
      {"k8s-fit spreads a one-GPU task onto the empty node where best-fit would pack it", "k8s-fit",
       {{"busy", Shape(8)}, {"empty", Shape(8)}},
       {{"busy", Req().Cpu(32000).Mem(1024).Gpus(6), {0, 1, 2, 3, 4, 5}}},
       Req().Cpu(4000).Mem(1024).Gpus(1), "empty"},
      // Two 10-core 10000-MiB nodes; a 1-core 1000-MiB task. x (0 cores, 4000 MiB bound):
      // LeastAllocated (90 + 50) / 2 = 70, Balanced 0.1 vs 0.5 -> 80: 150. y (3000m, 3000 MiB
      // bound): LeastAllocated 60, Balanced 0.4 vs 0.4 -> 100: 160. LeastAllocated alone picks x.
      {"k8s-fit's BalancedAllocation turns the choice to the node whose CPU and memory stay even", "k8s-fit",
       {{"x", Shape(8, "V100", 10000, 10000)}, {"y", Shape(8, "V100", 10000, 10000)}},
       {{"x", Req().Mem(4000), {}}, {"y", Req().Cpu(3000).Mem(3000), {}}},
       Req().Cpu(1000).Mem(1000), "y"},
      // Volcano's binpack example (docs/peers.md): two 10-core 10000-MiB 8-GPU nodes, one with 4
      // cores, 2000 MiB and 4 GPUs bound; a 2-core 2000-MiB 2-GPU pod. half: LeastAllocated 50 +
      // Balanced (cpu, memory, GPU) 85 + binpack 625 = 760; empty: 80 + 97 + 225 = 402
      // (plugins_test.cc). kube's k8s-fit: half 50 + 90 = 140, empty 80 + 100 = 180.
      {"volcano-binpack sends a two-GPU pod to the half-used node", "volcano-binpack",
       {{"half", Shape(8, "V100", 10000, 10000)}, {"empty", Shape(8, "V100", 10000, 10000)}},
       {{"half", Req().Cpu(4000).Mem(2000).Gpus(4), {0, 1, 2, 3}}},
       Req().Cpu(2000).Mem(2000).Gpus(2), "half"},
      {"k8s-fit sends the same two-GPU pod to the empty node", "k8s-fit",
       {{"half", Shape(8, "V100", 10000, 10000)}, {"empty", Shape(8, "V100", 10000, 10000)}},
       {{"half", Req().Cpu(4000).Mem(2000).Gpus(4), {0, 1, 2, 3}}},
       Req().Cpu(2000).Mem(2000).Gpus(2), "empty"},
      // binpack weighs CPU and memory together as much as the GPU (1 + 1 vs 2): a 1-core
      // 1000-MiB 1-GPU pod; p has 8 cores and 8000 MiB bound and no GPU, q 4 GPUs and no CPU.
      // p: binpack (0.9 + 0.9 + 1000 x 2/8000) / 4 x 1000 = 512.5, LeastAllocated 10, Balanced
      // over 9/10, 9/10, 1/8 -> std 0.3653 -> 63: 585.5. q: (0.1 + 0.1 + 5000 x 2/8000) / 4 x
      // 1000 = 362.5, LeastAllocated 90, Balanced over 1/10, 1/10, 5/8 -> std 0.2475 -> 75:
      // 527.5. The GPU lands on the node with 8 idle GPUs, beside the half-used one.
      {"volcano-binpack puts a one-GPU pod where CPU and memory are full rather than GPUs", "volcano-binpack",
       {{"p", Shape(8, "V100", 10000, 10000)}, {"q", Shape(8, "V100", 10000, 10000)}},
       {{"p", Req().Cpu(8000).Mem(8000), {}}, {"q", Req().Gpus(4), {0, 1, 2, 3}}},
       Req().Cpu(1000).Mem(1000).Gpus(1), "p"},
      {"a task larger than every node's GPUs is not placed", "fgd",
       {{"a", Shape(4)}, {"b", Shape(4)}},
       {},
       Req().Gpus(8), nullptr},
  };
  return t;
}

class PlacementScenario : public ::testing::TestWithParam<Scenario> {};

TEST_P(PlacementScenario, LandsWhereTheSpecificationSays) {
  const Scenario& s = GetParam();
  ClusterBuilder c;
  for (const auto& [name, shape] : s.nodes) c.AddNode(name, shape);
  std::vector<TaskRequest> workload;
  for (const Bound& b : s.bound) {
    GpuIndices g;
    for (int i : b.gpus) g.Push(i);
    TaskId t = c.Submit("bound", b.req);
    c.state.Bind(t, c.NodeNamed(b.node), g);
    workload.push_back(b.req);
  }
  workload.push_back(s.task);
  const TypicalTasks typical = TypicalTasks::FromWorkload(workload);
  SessionOptions o;
  o.policy = *OpenbPolicy(s.policy);
  o.seed = 11;
  auto session = Session::Open(c.state, BuiltinRegistry(), PluginContext{&c.state, &typical}, o);
  ASSERT_TRUE(session.ok());
  TaskId t = c.Submit("new", s.task);
  TaskId twin = c.Submit("twin", s.task);
  Outcome first = (*session)->Decide(t);
  Outcome again = (*session)->Decide(twin);
  EXPECT_EQ(first.node, again.node) << "a repeated decision on unchanged state must agree";
  if (s.want_node == nullptr) {
    EXPECT_FALSE(first.placed());
    EXPECT_FALSE(first.reason.empty());
    return;
  }
  ASSERT_TRUE(first.placed()) << first.reason;
  EXPECT_EQ(c.state.node(first.node).spec.name, s.want_node);
  if (s.want_gpu >= 0) {
    EXPECT_EQ(first.gpus.idx[0], s.want_gpu);
  }
  c.state.Bind(t, first.node, first.gpus);
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

INSTANTIATE_TEST_SUITE_P(Table, PlacementScenario, ::testing::ValuesIn(Table()), [](const auto& info) {
  std::string n;
  for (const char* p = info.param.name; *p; ++p) n += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  return n;
});

}  // namespace
}  // namespace estuary
