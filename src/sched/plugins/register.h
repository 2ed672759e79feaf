// Wires every built-in plugin into a Registry and names the six policies of the FGD paper and
// the peers' policies.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "sched/framework/registry.h"
#include "sched/framework/session.h"

namespace estuary {

// Registers all built-in score, GPU-select and filter plugins.
void RegisterBuiltinPlugins(Registry& registry);
// A Registry holding every built-in plugin.
const Registry& BuiltinRegistry();

// The policies of the openb comparison, in the paper's order:
// random, dotprod, gpu-clustering, gpu-packing, best-fit, fgd.
const std::vector<std::string>& OpenbPolicyNames();
// The policies a scheduler configuration may name: the openb ones, then the peers' (`k8s-fit`:
// kube-scheduler's default NodeResourcesFit LeastAllocated + BalancedAllocation; `volcano-binpack`:
// Volcano's nodeorder + binpack scores; `kai-binpack`: KAI-Scheduler's binpack node order;
// docs/peers.md).
const std::vector<std::string>& PolicyNames();
// The PolicyConfig of one of PolicyNames(); NotFound naming the known ones otherwise.
StatusOr<PolicyConfig> OpenbPolicy(const std::string& name);

}  // namespace estuary
