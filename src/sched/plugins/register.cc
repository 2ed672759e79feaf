#include "sched/plugins/register.h"

#include "common/check.h"
#include "sched/plugins/basic/basic.h"
#include "sched/plugins/fgd/fgd.h"
#include "sched/plugins/k8s/k8s.h"
#include "sched/plugins/kai/kai.h"
#include "sched/plugins/volcano/volcano.h"

namespace estuary {

void RegisterBuiltinPlugins(Registry& r) {
  RegisterBasicPlugins(r);
  RegisterK8sPlugins(r);
  RegisterVolcanoPlugins(r);
  RegisterKaiPlugins(r);
  r.RegisterScore("fgd", [](const PluginContext& c) {
    ESTUARY_CHECK(c.typical != nullptr);
    return std::make_unique<FgdScore>(c.typical);
  });
  r.RegisterGpuSelect("fgd", [](const PluginContext& c) {
    ESTUARY_CHECK(c.typical != nullptr);
    return std::make_unique<FgdScore>(c.typical);
  });
}

const Registry& BuiltinRegistry() {
  static const Registry* r = [] {
    auto* reg = new Registry();
    RegisterBuiltinPlugins(*reg);
    return reg;
  }();
  return *r;
}

const std::vector<std::string>& OpenbPolicyNames() {
  static const std::vector<std::string> names = {"random", "dotprod", "gpu-clustering",
                                                 "gpu-packing", "best-fit", "fgd"};
  return names;
}

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v = OpenbPolicyNames();
    v.push_back("k8s-fit");
    v.push_back("volcano-binpack");
    v.push_back("kai-binpack");
    return v;
  }();
  return names;
}

StatusOr<PolicyConfig> OpenbPolicy(const std::string& name) {
  if (name == "k8s-fit") {
    // kube-scheduler's default profile: NodeResourcesFit (LeastAllocated) and
    // NodeResourcesBalancedAllocation, weight 1 each; GPUs as NodeResourcesFit's filter takes
    // whole devices (the first free ones).
    PolicyConfig p;
    p.name = name;
    p.scores = {{"k8s-least-allocated", 1}, {"k8s-balanced-allocation", 1}};
    p.gpu_select = "best";
    return p;
  }
  if (name == "volcano-binpack") {
    // Volcano's shipped tiers enable nodeorder and binpack; a node's score is their sum:
    // LeastAllocated + BalancedAllocation (nodeorder's default weights 1, 1) + binpack with a GPU
    // platform's arguments (VolcanoGpuBinpackWeights), in binpack's fixed point. Whole GPUs as
    // the device plugin allocates them (the first free ones).
    PolicyConfig p;
    p.name = name;
    p.scores = {{"volcano-binpack", 1},
                {"k8s-least-allocated", kVolcanoScoreUnit},
                {"volcano-balanced-allocation", kVolcanoScoreUnit}};
    p.gpu_select = "best";
    return p;
  }
  if (name == "kai-binpack") {
    // KAI-Scheduler's default node order: nodeplacement's binpack (the fewest non-allocated GPUs,
    // or CPU for a CPU-only task) is the only band of its score that differs between estuary's
    // nodes; devices packed within the node (gpupack: the best-fitting GPUs).
    PolicyConfig p;
    p.name = name;
    p.scores = {{"kai-binpack", 1}};
    p.gpu_select = "best";
    return p;
  }
  for (const std::string& n : OpenbPolicyNames()) {
    if (n != name) continue;
    PolicyConfig p;
    p.name = name;
    p.scores = {{name, 1}};
    // GPU selection as in the published runs: random for random, FGD's own for fgd, best else.
    p.gpu_select = name == "random" ? "random" : name == "fgd" ? "fgd" : "best";
    return p;
  }
  std::string known;
  for (const std::string& n : PolicyNames()) known += (known.empty() ? "" : ", ") + n;
  return NotFound("unknown policy '" + name + "' (known: " + known + ")");
}

}  // namespace estuary
