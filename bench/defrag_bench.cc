// The IPC defragmentation planner of issue 5 (DefragAction::Plan, default options: random
// partitions of 500 nodes, ejection chains of depth <= 3, <= 5 rounds) on the generated ASI-like
// cluster (155,408 GPUs at the default size; smaller sizes for the scaling table), filled
// (untimed) to ~88% of its GPUs with 1/2/4/8-GPU tasks (40/25/20/15% of tasks) placed by a
// fragmenting policy: each on a random node with room (lowest free GPU indices), like the
// "random" placement. 40% of tasks are locked (Rng(7)). Plan never mutates the state, so each
// iteration plans on the same cluster. Arguments: total GPUs, threads. Counters: plan_s (wall
// time of one plan, steady clock), moves, vacated nodes, whole free nodes and nodes with slack
// before/after, ejections, rounds, alloc%, valid (1: the plan applied
// move by move to a copy, CanBind before each move and CheckInvariants at the end, untimed).
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "common/rng.h"
#include "sched/actions/defrag.h"
#include "sim/cluster/generator.h"

namespace estuary {
namespace {

struct Fragmented {
  ClusterState state;
  std::vector<char> locked;
  explicit Fragmented(int64_t total_gpus) {
    GeneratorOptions go;
    go.total_gpus = total_gpus;
    state = std::move(GenerateCluster(go)).value();
    Rng rng(3);
    const uint64_t nodes = state.num_nodes();
    int64_t misses = 0;
    while (state.allocated_gpu_milli() * 100 < state.total_gpu_milli() * 88 && misses < 100000) {
      const double x = rng.UniformDouble();
      const int gpus = x < 0.40 ? 1 : x < 0.65 ? 2 : x < 0.85 ? 4 : 8;
      TaskRequest r;
      r.cpu_milli = 4000 * gpus;
      r.mem_mib = 32768 * gpus;
      r.gpu_count = gpus;
      r.gpu_milli = kMilliPerGpu;
      JobSpec js;
      js.name = "bg";
      const TaskId t = state.AddTask(state.AddJob(js), "bg", r);
      bool bound = false;
      for (int tries = 0; tries < 20 && !bound; ++tries) {
        const Node& n = state.node(NodeId(static_cast<uint32_t>(rng.Uniform(nodes))));
        if (n.full_free_gpus < gpus) continue;
        GpuIndices g;
        for (int i = 0; i < n.spec.gpu_count && g.size < gpus; ++i) {
          if (n.gpu_free[i] == kMilliPerGpu) g.Push(i);
        }
        if (state.CanBind(t, n.id, g)) {
          state.Bind(t, n.id, g);
          bound = true;
        }
      }
      if (!bound) ++misses;
    }
    Rng lock(7);
    locked.assign(state.tasks().size(), 0);
    for (char& l : locked) l = lock.UniformDouble() < 0.4;
  }
};

Fragmented& ClusterOf(int64_t gpus) {
  static std::map<int64_t, std::unique_ptr<Fragmented>> cache;
  auto& c = cache[gpus];
  if (!c) c = std::make_unique<Fragmented>(gpus);
  return *c;
}

void BM_DefragPlan(benchmark::State& st) {
  Fragmented& f = ClusterOf(st.range(0));
  DefragOptions o;
  o.threads = static_cast<int32_t>(st.range(1));
  DefragPlan p;
  double secs = 0;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    p = DefragAction::Plan(f.state, f.locked, o);
    secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    benchmark::DoNotOptimize(p);
  }
  // Untimed: the plan applies move by move (CanBind before each Bind) and keeps every invariant.
  ClusterState copy = f.state;
  bool valid = true;
  for (const DefragMove& m : p.moves) {
    copy.Unbind(m.task);
    valid = valid && copy.CanBind(m.task, m.to, m.gpus);
    if (!valid) break;
    copy.Bind(m.task, m.to, m.gpus);
  }
  valid = valid && copy.CheckInvariants().ok();
  st.counters["valid"] = valid;
  st.counters["nodes"] = static_cast<double>(f.state.num_nodes());
  st.counters["plan_s"] = secs;
  st.counters["moves"] = static_cast<double>(p.moves.size());
  st.counters["vacated"] = static_cast<double>(p.vacated.size());
  st.counters["whole_before"] = static_cast<double>(p.whole_free_before);
  st.counters["whole_after"] = static_cast<double>(p.whole_free_after);
  st.counters["slack_before"] = static_cast<double>(p.slack_before);
  st.counters["slack_after"] = static_cast<double>(p.slack_after);
  st.counters["ejections"] = p.ejections;
  st.counters["rounds"] = p.rounds;
  st.counters["alloc%"] =
      100.0 * static_cast<double>(f.state.allocated_gpu_milli()) / static_cast<double>(f.state.total_gpu_milli());
}
BENCHMARK(BM_DefragPlan)
    ->Args({38852, 1})
    ->Args({77704, 1})
    ->Args({155410, 1})
    ->Args({155410, 2})
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->UseRealTime();

}  // namespace
}  // namespace estuary
