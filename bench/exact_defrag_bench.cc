// The exact defragmentation reference (issue 5, item 4: SolveExactDefrag, a two-stage MILP over
// CBC) on seeded random instances: `nodes` 8-GPU nodes, each filled to a uniformly random 2..7
// GPUs with 1-, 2- and 4-GPU tasks (8 cores and 64 GiB per GPU), and `locked`% of the tasks
// locked at random. One iteration solves seeds 1..kSeeds (time limit 60 s each); counters: the
// median and max solve seconds over the seeds, how many were proven optimal, and the mean whole
// free nodes before / after, moves and model size.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/rng.h"
#include "sched/exact/defrag_milp.h"

namespace estuary {
namespace {

constexpr int kSeeds = 5;

struct Instance {
  ClusterState state;
  std::vector<NodeId> nodes;
  std::vector<char> locked;
};

Instance RandomInstance(int n, int locked_pct, uint64_t seed) {
  Instance in;
  Rng rng(seed);
  GpuModelId v100 = *in.state.models().Intern("V100");
  const int sizes[] = {1, 1, 2, 2, 4};
  for (int i = 0; i < n; ++i) {
    NodeSpec s;
    s.name = "n" + std::to_string(i);
    s.cpu_milli = 96000;
    s.mem_mib = 786432;
    s.gpu_count = 8;
    s.model = v100;
    NodeId id = *in.state.AddNode(s);
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
      TaskId t = in.state.AddTask(in.state.AddJob(js), "t", q);
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

void BM_ExactDefrag(benchmark::State& bs) {
  const int n = static_cast<int>(bs.range(0));
  const int locked_pct = static_cast<int>(bs.range(1));
  std::vector<Instance> instances;
  for (int seed = 1; seed <= kSeeds; ++seed) instances.push_back(RandomInstance(n, locked_pct, seed));
  std::vector<double> secs;
  double optimal = 0, before = 0, after = 0, moves = 0, vars = 0, rows = 0;
  for (auto _ : bs) {
    secs.clear();
    optimal = before = after = moves = vars = rows = 0;
    for (const Instance& in : instances) {
      auto r = SolveExactDefrag(in.state, in.nodes, in.locked);
      ESTUARY_CHECK(r.ok());
      secs.push_back(r->solve_seconds);
      optimal += r->optimal ? 1 : 0;
      before += static_cast<double>(r->whole_free_before) / kSeeds;
      after += static_cast<double>(r->whole_free_after) / kSeeds;
      moves += static_cast<double>(r->moved_tasks) / kSeeds;
      vars += static_cast<double>(r->variables) / kSeeds;
      rows += static_cast<double>(r->constraints) / kSeeds;
    }
  }
  std::sort(secs.begin(), secs.end());
  bs.counters["median_s"] = secs[secs.size() / 2];
  bs.counters["max_s"] = secs.back();
  bs.counters["optimal"] = optimal;
  bs.counters["free_before"] = before;
  bs.counters["free_after"] = after;
  bs.counters["moves"] = moves;
  bs.counters["vars"] = vars;
  bs.counters["rows"] = rows;
}
BENCHMARK(BM_ExactDefrag)
    ->ArgsProduct({{10, 15, 20, 25}, {0, 40}})
    ->ArgNames({"nodes", "locked%"})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
}  // namespace estuary
