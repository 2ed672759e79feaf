#include "sched/plugins/register.h"

#include "common/check.h"
#include "sched/plugins/basic/basic.h"
#include "sched/plugins/fgd/fgd.h"

namespace estuary {

void RegisterBuiltinPlugins(Registry& r) {
  RegisterBasicPlugins(r);
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

StatusOr<PolicyConfig> OpenbPolicy(const std::string& name) {
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
  for (const std::string& n : OpenbPolicyNames()) known += (known.empty() ? "" : ", ") + n;
  return NotFound("unknown policy '" + name + "' (known: " + known + ")");
}

}  // namespace estuary
