// Each policy's formula on hand-computed cases (docs/policies.md). Expected numbers are worked out
// by hand from the published definitions, not by running the code.
#include <gtest/gtest.h>

#include <algorithm>

#include "sched/framework/session.h"
#include "sched/plugins/fgd/fgd.h"
#include "sched/plugins/fgd/typical_tasks.h"
#include "sched/plugins/kai/kai.h"
#include "sched/plugins/register.h"
#include "sched/plugins/volcano/volcano.h"
#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::ClusterBuilder;
using testing::Idx;
using testing::Req;

std::unique_ptr<ScorePlugin> Score(const std::string& name, const ClusterState& s, const TypicalTasks* typical = nullptr) {
  auto p = BuiltinRegistry().MakeScore(name, PluginContext{&s, typical});
  EXPECT_TRUE(p.ok());
  return std::move(p).value();
}

TEST(BestFit, RawScoreIsOneMinusHalfCpuPlusHalfGpuLeftoverTimesHundred) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n");  // 96 cores, 8 GPUs
  TaskId t = c.Submit("t", Req().Cpu(8000).Gpus(1));
  // s = 0.5*88000/128000 + 0.5*7000/8000 = 0.78125 -> floor(21.875) = 21
  EXPECT_EQ(Score("best-fit", c.state)->Score(c.state.task(t), c.state.node(n)), 21);
}

TEST(BestFit, NormalisesMinMaxToZeroHundredAndAllEqualToZero) {
  ClusterBuilder c;
  auto p = Score("best-fit", c.state);
  std::vector<int64_t> s = {21, 61, 41};
  p->Normalize(s);
  EXPECT_EQ(s, (std::vector<int64_t>{0, 100, 50}));
  std::vector<int64_t> same = {7, 7};
  p->Normalize(same);
  EXPECT_EQ(same, (std::vector<int64_t>{0, 0}));
}

TEST(DotProd, PrefersTheSmallestNormalisedDotProduct) {
  ClusterBuilder c;
  testing::NodeShape half = testing::Gpus(4);
  half.cpu = 64000;
  NodeId n = c.AddNode("n", half);
  TaskId t = c.Submit("t", Req().Cpu(8000).Gpus(1));
  // dot = (64000/128000)(8000/128000) + (4000/8000)(1000/8000) = 0.09375 -> floor(100*(1-0.046875)) = 95
  EXPECT_EQ(Score("dotprod", c.state)->Score(c.state.task(t), c.state.node(n)), 95);
}

TEST(GpuPacking, RanksSharedGpusThenUsedNodesThenIdleNodes) {
  ClusterBuilder c;
  NodeId idle = c.AddNode("idle");
  NodeId used = c.AddNode("used");
  NodeId shared = c.AddNode("shared");
  c.state.Bind(c.Submit("u", Req().Gpus(1)), used, Idx({0}));
  c.state.Bind(c.Submit("s", Req().SharedGpu(600)), shared, Idx({2}));
  auto p = Score("gpu-packing", c.state);
  const Task& share_task = c.state.task(c.Submit("x", Req().SharedGpu(300)));
  const Task& whole_task = c.state.task(c.Submit("y", Req().Gpus(1)));
  EXPECT_EQ(p->Score(share_task, c.state.node(shared)), 96);  // 100 - (400*100/1000)/10
  EXPECT_EQ(p->Score(whole_task, c.state.node(used)), 49);    // 50 - 1 fully free GPU used
  EXPECT_EQ(p->Score(whole_task, c.state.node(idle)), 25);    // max(33 - 8, 8)
  EXPECT_EQ(p->Score(c.state.task(c.Submit("cpu", Req().Cpu(1000))), c.state.node(idle)), 0);
}

TEST(GpuClustering, PrefersNodesWhoseGpuTasksShareTheTasksTag) {
  ClusterBuilder c;
  NodeId idle = c.AddNode("idle");
  NodeId sharing = c.AddNode("sharing");
  NodeId mixed = c.AddNode("mixed");
  NodeId other = c.AddNode("other");
  c.state.Bind(c.Submit("s1", Req().SharedGpu(400)), sharing, Idx({0}));
  c.state.Bind(c.Submit("s2", Req().SharedGpu(400)), mixed, Idx({0}));
  c.state.Bind(c.Submit("w1", Req().Gpus(1)), mixed, Idx({1}));
  c.state.Bind(c.Submit("w2", Req().Gpus(2)), other, Idx({0, 1}));
  auto p = Score("gpu-clustering", c.state);
  const Task& t = c.state.task(c.Submit("x", Req().SharedGpu(300)));
  EXPECT_EQ(p->Score(t, c.state.node(sharing)), 75 + 25 * 400 / 8000);  // only its own tag
  EXPECT_EQ(p->Score(t, c.state.node(mixed)), 50 + 25 * 1400 / 8000);   // its tag among others
  EXPECT_EQ(p->Score(t, c.state.node(idle)), 25);                       // no GPU tasks
  EXPECT_EQ(p->Score(t, c.state.node(other)), 25 * 2000 / 8000);        // other tags only
}

TypicalTasks SmallWorkload(ClusterBuilder&) {
  // 3 one-GPU tasks and 1 shared 500m task: the 95% coverage takes both specs, p = 0.75 / 0.25.
  std::vector<TaskRequest> w = {Req().Cpu(1000).Gpus(1), Req().Cpu(1000).Gpus(1), Req().Cpu(1000).Gpus(1),
                                Req().Cpu(1000).SharedGpu(500)};
  return TypicalTasks::FromWorkload(w);
}

TEST(TypicalTasks, TakesTheMostFrequentSpecsUpToTheCoverageAndRenormalises) {
  ClusterBuilder c;
  TypicalTasks t = SmallWorkload(c);
  ASSERT_EQ(t.tasks.size(), 2u);
  EXPECT_EQ(t.tasks[0].req.gpu_milli, 1000);
  EXPECT_DOUBLE_EQ(t.tasks[0].share, 0.75);
  EXPECT_DOUBLE_EQ(t.tasks[1].share, 0.25);
  std::vector<TaskRequest> skewed(99, Req().Gpus(1));
  skewed.push_back(Req().Gpus(2));
  TypicalTasks s = TypicalTasks::FromWorkload(skewed);  // 99% from one spec: the rare one is dropped
  ASSERT_EQ(s.tasks.size(), 1u);
  EXPECT_DOUBLE_EQ(s.tasks[0].share, 1.0);
  EXPECT_DOUBLE_EQ(s.covered, 0.99);
}

TEST(Fgd, NodeFragmentationCountsGpusTooSmallForEachTypicalTask) {
  ClusterBuilder c;
  TypicalTasks t = SmallWorkload(c);
  NodeId n = c.AddNode("n", testing::Gpus(2));
  c.state.Bind(c.Submit("s", Req().SharedGpu(700)), n, Idx({1}));  // free [1000, 300]
  // whole 1-GPU: fits, GPU1 (300) is fragment -> 0.75*300; shared 500m: fits, 300 is fragment -> 0.25*300
  EXPECT_DOUBLE_EQ(NodeFragmentation(t, c.state.node(n)), 300.0);
  // A node whose CPU is exhausted: nothing fits, all 1300 free milli is fragment.
  testing::NodeShape tiny = testing::Gpus(2);
  tiny.cpu = 500;
  NodeId m = c.AddNode("m", tiny);
  EXPECT_DOUBLE_EQ(NodeFragmentation(t, c.state.node(m)), 2000.0);
}

TEST(Fgd, CpuOnlyTypicalTasksCountAllFreeGpuAsFragment) {
  std::vector<TaskRequest> w = {Req().Cpu(1000)};
  TypicalTasks t = TypicalTasks::FromWorkload(w);
  ClusterBuilder c;
  NodeId n = c.AddNode("n", testing::Gpus(2));
  EXPECT_DOUBLE_EQ(NodeFragmentation(t, c.state.node(n)), 2000.0);
}

TEST(Fgd, ASharedTaskTakesTheGpuWhereFragmentationGrowsLeast) {
  ClusterBuilder c;
  TypicalTasks t = SmallWorkload(c);
  NodeId n = c.AddNode("n", testing::Gpus(2));
  c.state.Bind(c.Submit("s", Req().SharedGpu(700)), n, Idx({1}));  // free [1000, 300]
  FgdScore fgd(&t);
  const Task& x = c.state.task(c.Submit("x", Req().Cpu(1000).SharedGpu(300)));
  // On GPU 1: F 300 -> 0, score floor(100*sigmoid(0.3)) = 57; on GPU 0: F 300 -> 825, score 37.
  auto [score, gpu] = fgd.ScoreAndGpu(x, c.state.node(n));
  EXPECT_EQ(score, 57);
  EXPECT_EQ(gpu, 1);
  Rng rng(1);
  EXPECT_EQ(fgd.Select(x, c.state.node(n), rng).idx[0], 1);
  // A whole GPU leaves F at 300 (the last 300m stays a fragment): sigmoid(0) -> 50.
  EXPECT_EQ(fgd.Score(c.state.task(c.Submit("y", Req().Cpu(1000).Gpus(1))), c.state.node(n)), 50);
}

// kube-scheduler's own unit-test case "nothing scheduled, resources requested, differently sized
// nodes" (noderesources/least_allocated_test.go, balanced_allocation_test.go): a pod of 3000m CPU
// and 5000 memory on node1 (4000m, 10000) and node2 (6000m, 10000). Same memory units on both
// sides, so MiB give kube's fractions.
TEST(K8sFit, KubesOwnDifferentlySizedNodesExampleScoresByHand) {
  ClusterBuilder c;
  testing::NodeShape small = testing::Gpus(8), big = testing::Gpus(8);
  small.cpu = 4000;
  small.mem = 10000;
  big.cpu = 6000;
  big.mem = 10000;
  const NodeId n1 = c.AddNode("node1", small), n2 = c.AddNode("node2", big);
  const Task& pod = c.state.task(c.Submit("pod", Req().Cpu(3000).Mem(5000)));
  // LeastAllocated: node1 cpu (4000-3000)*100/4000 = 25, mem (10000-5000)*100/10000 = 50 ->
  // (25+50)/2 = 37; node2 cpu 3000*100/6000 = 50, mem 50 -> 50.
  EXPECT_EQ(Score("k8s-least-allocated", c.state)->Score(pod, c.state.node(n1)), 37);
  EXPECT_EQ(Score("k8s-least-allocated", c.state)->Score(pod, c.state.node(n2)), 50);
  // BalancedAllocation: node1 fractions 0.75, 0.5 -> std 0.125 -> 87 (87.5 floored); node2 0.5,
  // 0.5 -> 100.
  EXPECT_EQ(Score("k8s-balanced-allocation", c.state)->Score(pod, c.state.node(n1)), 87);
  EXPECT_EQ(Score("k8s-balanced-allocation", c.state)->Score(pod, c.state.node(n2)), 100);
}

TEST(K8sFit, CountsTheNodesBoundWorkAndIgnoresGpus) {
  // A 10-core, 10000-MiB node with 3 cores and 3000 MiB bound, and 6 of its 8 GPUs taken; a
  // 1-GPU pod of 1 core and 1000 MiB: requested 4000m / 4000 MiB after it. LeastAllocated
  // (6000*100/10000 = 60 twice) -> 60; BalancedAllocation 0.4, 0.4 -> 100. The GPUs change
  // nothing (kube's default scoring resources are cpu and memory only).
  ClusterBuilder c;
  testing::NodeShape shape = testing::Gpus(8);
  shape.cpu = 10000;
  shape.mem = 10000;
  const NodeId n = c.AddNode("n", shape);
  c.state.Bind(c.Submit("bound", Req().Cpu(3000).Mem(3000).Gpus(6)), n, Idx({0, 1, 2, 3, 4, 5}));
  const Task& pod = c.state.task(c.Submit("pod", Req().Cpu(1000).Mem(1000).Gpus(1)));
  EXPECT_EQ(Score("k8s-least-allocated", c.state)->Score(pod, c.state.node(n)), 60);
  EXPECT_EQ(Score("k8s-balanced-allocation", c.state)->Score(pod, c.state.node(n)), 100);
  // Requests beyond capacity score 0 (LeastAllocated) and cap the fraction at 1 (Balanced):
  // 12000m of 10000 -> cpu 0, mem (10000-4000)*100/10000 = 60 -> 30; fractions 1, 0.4 -> 70.
  const Task& fat = c.state.task(c.Submit("fat", Req().Cpu(9000).Mem(1000)));
  EXPECT_EQ(Score("k8s-least-allocated", c.state)->Score(fat, c.state.node(n)), 30);
  EXPECT_EQ(Score("k8s-balanced-allocation", c.state)->Score(fat, c.state.node(n)), 70);
}

TEST(K8sFit, IsAPolicyOfBothScoresWithWeightOne) {
  auto p = OpenbPolicy("k8s-fit");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->scores, (std::vector<std::pair<std::string, int64_t>>{{"k8s-least-allocated", 1},
                                                                      {"k8s-balanced-allocation", 1}}));
  EXPECT_EQ(PolicyNames()[6], "k8s-fit");
  // Not one of the FGD paper's six: `estuary openb --policy all` is unchanged.
  EXPECT_EQ(OpenbPolicyNames().size(), 6u);
}

// A 10-core, 10000-MiB, 8-GPU node with 4 cores, 2000 MiB and 4 GPUs bound ("half"), and an
// empty one of the same shape; a pod of 2 cores, 2000 MiB and 2 GPUs.
struct VolcanoNodes {
  ClusterBuilder c;
  NodeId half, empty;
  VolcanoNodes() {
    testing::NodeShape shape = testing::Gpus(8);
    shape.cpu = 10000;
    shape.mem = 10000;
    half = c.AddNode("half", shape);
    empty = c.AddNode("empty", shape);
    c.state.Bind(c.Submit("bound", Req().Cpu(4000).Mem(2000).Gpus(4)), half, Idx({0, 1, 2, 3}));
  }
};

TEST(VolcanoBinpack, WeightsTheUsedFractionOfEachRequestedResourceAndScalesByTheBinpackWeight) {
  VolcanoNodes v;
  const TaskId pod_id = v.c.Submit("pod", Req().Cpu(2000).Mem(2000).Gpus(2));
  const TaskRequest pod = v.c.state.task(pod_id).req;
  const VolcanoBinpackWeights gpu = VolcanoGpuBinpackWeights();
  // binpack.weight 10, cpu 1, memory 1, nvidia.com/gpu 2. half: cpu (4000+2000)/10000 = 0.6,
  // memory (2000+2000)/10000 = 0.4, GPU (4000+2000) x 2/8000 = 1.5 -> 2.5 / (1+1+2) = 0.625 ->
  // x 100 x 10 = 625. empty: 0.2 + 0.2 + 2000 x 2/8000 = 0.9 -> 0.225 -> 225.
  EXPECT_EQ(VolcanoBinpackScore(pod, v.c.state.node(v.half), gpu), 625.0);
  EXPECT_DOUBLE_EQ(VolcanoBinpackScore(pod, v.c.state.node(v.empty), gpu), 225.0);
  // The plugin returns it in units of 2^-32 point.
  EXPECT_EQ(Score("volcano-binpack", v.c.state)->Score(v.c.state.task(pod_id), v.c.state.node(v.half)),
            625 * kVolcanoScoreUnit);
  // Volcano's defaults (weight 1, cpu 1, memory 1, no extended resource): the GPUs do not count.
  // half: (0.6 + 0.4) / 2 x 100 = 50.
  EXPECT_EQ(VolcanoBinpackScore(pod, v.c.state.node(v.half), VolcanoBinpackWeights{}), 50.0);
  // binpack.weight 0 scores 0 everywhere (Volcano skips the plugin).
  EXPECT_EQ(VolcanoBinpackScore(pod, v.c.state.node(v.half), {.weight = 0, .cpu = 1, .memory = 1, .gpu = 2}), 0.0);
}

TEST(VolcanoBinpack, AResourceBeyondWhatIsLeftScoresZeroButKeepsItsWeight) {
  VolcanoNodes v;
  // 7 cores on half: 4000 + 7000 > 10000 -> the CPU term is 0, its weight still divides:
  // (0 + 0.4 + 1.5) / 4 x 1000 = 475.
  const TaskRequest fat = v.c.state.task(v.c.Submit("fat", Req().Cpu(7000).Mem(2000).Gpus(2))).req;
  EXPECT_DOUBLE_EQ(VolcanoBinpackScore(fat, v.c.state.node(v.half), VolcanoGpuBinpackWeights()), 475.0);
  // A CPU-only pod: the GPU is not requested, so neither its term nor its weight counts:
  // (0.6 + 0.4) / 2 x 1000 = 500.
  const TaskRequest cpu = v.c.state.task(v.c.Submit("cpu", Req().Cpu(2000).Mem(2000))).req;
  EXPECT_EQ(VolcanoBinpackScore(cpu, v.c.state.node(v.half), VolcanoGpuBinpackWeights()), 500.0);
}

TEST(VolcanoBalancedAllocation, CountsTheGpuAsAThirdResourceOnlyWhenThePodRequestsGpus) {
  VolcanoNodes v;
  const Task& pod = v.c.state.task(v.c.Submit("pod", Req().Cpu(2000).Mem(2000).Gpus(2)));
  // half: fractions 3/5, 2/5, 3/4; mean 7/12; deviations 1/60, -11/60, 10/60; variance
  // (1 + 121 + 100) / 3600 / 3 = 74/10800 -> std sqrt(74)/60 = 0.14337 -> floor(85.66) = 85.
  EXPECT_EQ(Score("volcano-balanced-allocation", v.c.state)->Score(pod, v.c.state.node(v.half)), 85);
  // empty: 1/5, 1/5, 1/4; mean 13/60; deviations -1/60, -1/60, 2/60 -> std sqrt(2)/60 = 0.02357
  // -> floor(97.64) = 97.
  EXPECT_EQ(Score("volcano-balanced-allocation", v.c.state)->Score(pod, v.c.state.node(v.empty)), 97);
  // A CPU-only pod: cpu and memory alone, 0.6 and 0.4 -> std 0.1 -> 90, as kube's default.
  const Task& cpu = v.c.state.task(v.c.Submit("cpu", Req().Cpu(2000).Mem(2000)));
  EXPECT_EQ(Score("volcano-balanced-allocation", v.c.state)->Score(cpu, v.c.state.node(v.half)), 90);
  EXPECT_EQ(Score("k8s-balanced-allocation", v.c.state)->Score(cpu, v.c.state.node(v.half)), 90);
}

TEST(VolcanoBinpack, IsAPolicyOfNodeorderPlusBinpackInOneFixedPoint) {
  auto p = OpenbPolicy("volcano-binpack");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->scores, (std::vector<std::pair<std::string, int64_t>>{
                           {"volcano-binpack", 1},
                           {"k8s-least-allocated", kVolcanoScoreUnit},
                           {"volcano-balanced-allocation", kVolcanoScoreUnit}}));
  EXPECT_NE(std::find(PolicyNames().begin(), PolicyNames().end(), "volcano-binpack"), PolicyNames().end());
}

// Three default nodes (96 cores, 8 GPUs): "full" with 90 cores and 4 GPUs bound, "packed" with
// 2 cores and 6 GPUs bound, "empty" with nothing; a pod of 1 core and 1 GPU.
struct KaiNodes {
  ClusterBuilder c;
  NodeId full, packed, empty;
  KaiNodes() {
    full = c.AddNode("full");
    packed = c.AddNode("packed");
    empty = c.AddNode("empty");
    c.state.Bind(c.Submit("cpu-heavy", Req().Cpu(90000).Gpus(4)), full, Idx({0, 1, 2, 3}));
    c.state.Bind(c.Submit("gpu-heavy", Req().Cpu(2000).Gpus(6)), packed, Idx({0, 1, 2, 3, 4, 5}));
  }
  // The plugin's scores of `t` on the three nodes, normalised over them as feasible nodes.
  std::vector<int64_t> Scores(TaskId t) {
    auto p = Score("kai-binpack", c.state);
    std::vector<int64_t> s;
    for (NodeId n : {full, packed, empty}) s.push_back(p->Score(c.state.task(t), c.state.node(n)));
    p->Normalize(s);
    return s;
  }
};

TEST(KaiBinpack, PacksAGpuPodOntoTheNodeWithTheFewestNonAllocatedGpus) {
  KaiNodes k;
  // Non-allocated GPUs 4000, 2000, 8000 milli: min 2000, max 8000. pack.go:
  // full 9 x (1 - 2000/6000) = 6, packed 9 x (1 - 0) = 9, empty 9 x (1 - 1) = 0.
  EXPECT_EQ(k.Scores(k.c.Submit("pod", Req().Cpu(1000).Gpus(1))),
            (std::vector<int64_t>{6 * kKaiScoreUnit, 9 * kKaiScoreUnit, 0}));
}

TEST(KaiBinpack, IgnoresCpuForAGpuPodWhereBestFitDoesNot) {
  KaiNodes k;
  const Task& pod = k.c.state.task(k.c.Submit("pod", Req().Cpu(1000).Gpus(1)));
  // best-fit weighs the CPU left half: full 0.5 x 5000/128000 + 0.5 x 3000/8000 = 0.20703 -> 79;
  // packed 0.5 x 93000/128000 + 0.5 x 1000/8000 = 0.42578 -> 57: best-fit takes full, KAI packed.
  EXPECT_EQ(Score("best-fit", k.c.state)->Score(pod, k.c.state.node(k.full)), 79);
  EXPECT_EQ(Score("best-fit", k.c.state)->Score(pod, k.c.state.node(k.packed)), 57);
  auto kai = Score("kai-binpack", k.c.state);
  EXPECT_GT(kai->Score(pod, k.c.state.node(k.packed)), kai->Score(pod, k.c.state.node(k.full)));
}

TEST(KaiBinpack, PacksACpuOnlyPodByCpu) {
  KaiNodes k;
  // Non-allocated CPU 6000, 94000, 96000: min 6000, max 96000. full 9; packed 9 x 2000/90000 =
  // 0.2 -> floor(0.2 x 2^32) units; empty 0.
  EXPECT_EQ(k.Scores(k.c.Submit("cpu", Req().Cpu(1000))),
            (std::vector<int64_t>{9 * kKaiScoreUnit, 9 * kKaiScoreUnit / 45, 0}));
}

TEST(KaiBinpack, EqualNodesAllScoreNineAndNoResourceScoresZero) {
  // pack.go: min == max gives every node MaxHighDensity; max == 0 gives 0.
  EXPECT_EQ(KaiBinpackScore(3000, 3000, 3000), 9 * kKaiScoreUnit);
  EXPECT_EQ(KaiBinpackScore(0, 0, 0), 0);
  // One unit of free capacity apart still differs in fixed point (the order is kept).
  EXPECT_GT(KaiBinpackScore(0, 1000000, 0), KaiBinpackScore(0, 1000000, 1));
}

TEST(KaiBinpack, IsAPolicyOfTheBinpackScoreAloneWithBestFitGpus) {
  auto p = OpenbPolicy("kai-binpack");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->scores, (std::vector<std::pair<std::string, int64_t>>{{"kai-binpack", 1}}));
  EXPECT_EQ(p->gpu_select, "best");
  EXPECT_EQ(PolicyNames().back(), "kai-binpack");
}

TEST(Policies, TheSixOpenbPoliciesAreRegisteredAndUnknownNamesAreErrors) {
  ClusterState s;
  TypicalTasks typical;
  const PluginContext ctx{&s, &typical};
  std::vector<std::string> selectors;
  for (const std::string& name : OpenbPolicyNames()) {
    auto p = OpenbPolicy(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_TRUE(BuiltinRegistry().MakeScore(p->scores[0].first, ctx).ok()) << name;
    EXPECT_TRUE(BuiltinRegistry().MakeGpuSelect(p->gpu_select, ctx).ok()) << name;
    selectors.push_back(p->gpu_select);
  }
  EXPECT_EQ(selectors, (std::vector<std::string>{"random", "best", "best", "best", "best", "fgd"}));
  auto bad = OpenbPolicy("tetris");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("known: random, dotprod"), std::string::npos);
}

}  // namespace
}  // namespace estuary
