#include "sched/exact/random_instance.h"

#include <algorithm>
#include <string>

#include "common/check.h"
#include "common/rng.h"

namespace estuary {

DefragInstanceOptions HardDefragInstanceOptions(int nodes, int locked_pct) {
  DefragInstanceOptions o;
  o.nodes = nodes;
  o.locked_pct = locked_pct;
  o.min_used_gpus = 3;
  o.max_used_gpus = 7;
  o.shared_node_pct = 30;
  o.cpu_only_node_pct = 30;
  o.cpu_pressure = true;
  o.second_model_pct = 40;
  o.pinned_pct = 30;
  return o;
}

// NOTE: with the default options the draws are exactly those of the original easy generator (per
// node: the fill, then per task its size and its lock), so MakeRandomDefragInstance(n, l, seed)
// keeps producing the instances the recorded figures were measured on. Extra draws happen only
// for the options that are switched on.
DefragInstance MakeRandomDefragInstance(const DefragInstanceOptions& o, uint64_t seed) {
  ESTUARY_CHECK(o.min_used_gpus >= 1 && o.min_used_gpus <= o.max_used_gpus && o.max_used_gpus <= 8);
  DefragInstance in;
  Rng rng(seed);
  const GpuModelId v100 = *in.state.models().Intern("V100");
  const GpuModelId a100 = o.second_model_pct > 0 ? *in.state.models().Intern("A100") : GpuModelId();
  const int sizes[] = {1, 1, 2, 2, 4};
  auto chance = [&](int pct) { return pct > 0 && static_cast<int>(rng.Uniform(100)) < pct; };
  auto add = [&](NodeId node, const TaskRequest& q, const GpuIndices& idx, bool locked) {
    JobSpec js;
    js.name = "j";
    const TaskId t = in.state.AddTask(in.state.AddJob(js), "t", q);
    ESTUARY_CHECK(in.state.CanBind(t, node, idx));
    in.state.Bind(t, node, idx);
    in.locked.push_back(locked ? 1 : 0);
  };
  for (int i = 0; i < o.nodes; ++i) {
    NodeSpec s;
    s.name = "n" + std::to_string(i);
    const bool second = chance(o.second_model_pct);
    s.cpu_milli = second ? 64000 : 96000;
    s.mem_mib = second ? 262144 : (o.cpu_pressure ? 393216 : 786432);
    s.gpu_count = 8;
    s.model = second ? a100 : v100;
    const NodeId id = *in.state.AddNode(s);
    in.nodes.push_back(id);
    int used = o.min_used_gpus + static_cast<int>(rng.Uniform(static_cast<uint64_t>(o.max_used_gpus - o.min_used_gpus + 1)));
    int next = 0;
    int64_t cpu_left = s.cpu_milli, mem_left = s.mem_mib;
    // A task of `gpus` GPUs while `used` GPUs (these included) are still to be filled: its CPU and
    // memory are cut so that every later GPU keeps at least 1 core and 1 GiB (no task asks for
    // none: CBC 2.10's preprocessing has crashed on models with such tasks).
    auto resources = [&](TaskRequest& q, int gpus) {
      int64_t cpu = 8000LL * gpus, mem = 65536LL * gpus;
      if (o.cpu_pressure) {
        cpu = (4000 + 2000 * static_cast<int64_t>(rng.Uniform(7))) * gpus;
        mem = (32768 + 16384 * static_cast<int64_t>(rng.Uniform(5))) * gpus;
      }
      q.cpu_milli = std::min(cpu, cpu_left - int64_t{1000} * (used - gpus));
      q.mem_mib = std::min(mem, mem_left - int64_t{1024} * (used - gpus));
      cpu_left -= q.cpu_milli;
      mem_left -= q.mem_mib;
    };
    if (chance(o.shared_node_pct)) {
      TaskRequest q;
      q.gpu_count = 1;
      q.gpu_milli = static_cast<MilliGpu>(100 * (1 + rng.Uniform(9)));
      resources(q, 1);
      GpuIndices idx;
      idx.Push(next++);
      add(id, q, idx, /*locked=*/true);
      --used;
    }
    while (used > 0) {
      const int g = std::min(used, sizes[rng.Uniform(5)]);
      TaskRequest q;
      q.gpu_count = g;
      q.gpu_milli = kMilliPerGpu;
      resources(q, g);
      if (chance(o.pinned_pct)) q.models.Add(s.model);
      GpuIndices idx;
      for (int k = 0; k < g; ++k) idx.Push(next + k);
      next += g;
      add(id, q, idx, static_cast<int>(rng.Uniform(100)) < o.locked_pct);
      used -= g;
    }
    if (chance(o.cpu_only_node_pct) && cpu_left >= 1000 && mem_left >= 1024) {
      TaskRequest q;
      q.cpu_milli = std::min<int64_t>(8000 + 8000 * static_cast<int64_t>(rng.Uniform(4)), cpu_left);
      q.mem_mib = std::min<int64_t>(65536, mem_left);
      cpu_left -= q.cpu_milli;
      mem_left -= q.mem_mib;
      add(id, q, GpuIndices(), static_cast<int>(rng.Uniform(100)) < o.locked_pct);
    }
  }
  return in;
}

DefragInstance MakeRandomDefragInstance(int n, int locked_pct, uint64_t seed) {
  DefragInstanceOptions o;
  o.nodes = n;
  o.locked_pct = locked_pct;
  return MakeRandomDefragInstance(o, seed);
}

}  // namespace estuary
