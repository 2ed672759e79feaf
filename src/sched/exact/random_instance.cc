#include "sched/exact/random_instance.h"

#include <algorithm>
#include <string>

#include "common/rng.h"

namespace estuary {

DefragInstance MakeRandomDefragInstance(int n, int locked_pct, uint64_t seed) {
  DefragInstance in;
  Rng rng(seed);
  const GpuModelId v100 = *in.state.models().Intern("V100");
  const int sizes[] = {1, 1, 2, 2, 4};
  for (int i = 0; i < n; ++i) {
    NodeSpec s;
    s.name = "n" + std::to_string(i);
    s.cpu_milli = 96000;
    s.mem_mib = 786432;
    s.gpu_count = 8;
    s.model = v100;
    const NodeId id = *in.state.AddNode(s);
    in.nodes.push_back(id);
    int used = 2 + static_cast<int>(rng.Uniform(6));
    int next = 0;
    while (used > 0) {
      const int g = std::min(used, sizes[rng.Uniform(5)]);
      TaskRequest q;
      q.gpu_count = g;
      q.gpu_milli = kMilliPerGpu;
      q.cpu_milli = 8000 * g;
      q.mem_mib = 65536 * g;
      JobSpec js;
      js.name = "j";
      const TaskId t = in.state.AddTask(in.state.AddJob(js), "t", q);
      GpuIndices idx;
      for (int k = 0; k < g; ++k) idx.Push(next + k);
      next += g;
      in.state.Bind(t, id, idx);
      in.locked.push_back(static_cast<int>(rng.Uniform(100)) < locked_pct ? 1 : 0);
      used -= g;
    }
  }
  return in;
}

}  // namespace estuary
