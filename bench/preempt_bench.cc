// The full preemption decision of issue 4 (PreemptAction::Plan: feasibility check + victim
// choice) for a 256-GPU HP gang on the generated ASI-like cluster of 155,408 GPUs, filled (untimed,
// best-fit) to ~90% of its GPUs with mixed-priority work: single-GPU and whole-node LP/spot jobs
// (preemptible, various start times and checkpoint intervals), elastic 4-node LP jobs (min 2,
// step 2), and non-preemptible HP whole-node jobs. Plan never mutates the state, so every
// iteration decides on the same cluster; iterations alternate between a gang that requires one
// ASW and one that may go anywhere. Counters: median_us and p99_us of the individual decisions
// (each timed with a steady clock), feasible% and the mean number of tasks a plan evicts.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "common/check.h"
#include "common/rng.h"
#include "sched/actions/allocate.h"
#include "sched/actions/preempt.h"
#include "sched/plugins/register.h"
#include "sim/cluster/generator.h"

namespace estuary {
namespace {

constexpr int64_t kNow = 7 * 24 * 3600;

struct NinetyPercentFull {
  ClusterState state;
  NinetyPercentFull() {
    state = std::move(GenerateCluster(GeneratorOptions())).value();
    SessionOptions so;
    so.policy = *OpenbPolicy("best-fit");
    auto s = std::move(Session::Open(state, BuiltinRegistry(), PluginContext{&state, nullptr}, so)).value();
    Rng rng(11);
    auto request = [](int gpus) {
      TaskRequest r;
      r.cpu_milli = 8000 * gpus;
      r.mem_mib = 65536 * gpus;
      r.gpu_count = gpus;
      r.gpu_milli = kMilliPerGpu;
      return r;
    };
    const int64_t intervals[] = {0, 1800, 3600};
    int64_t misses = 0;
    while (state.allocated_gpu_milli() * 10 < state.total_gpu_milli() * 9 && misses < 1000) {
      const double x = rng.UniformDouble();
      JobSpec js;
      js.name = "bg";
      int replicas = 1, gpus = 1;
      if (x < 0.4) {
        js.priority = rng.UniformDouble() < 0.5 ? 100 : 300;  // spot / LP single GPUs
        js.preemptible = true;
      } else if (x < 0.7) {
        gpus = 8;
        js.priority = rng.UniformDouble() < 0.5 ? 100 : 300;
        js.preemptible = true;
      } else if (x < 0.9) {
        gpus = 8;
        replicas = 4;
        js.min_replicas = 2;
        js.max_replicas = 4;
        js.step = 2;
        js.priority = 300;
        js.preemptible = true;
      } else {
        gpus = 8;
        js.priority = 800;  // HP, not preemptible
      }
      if (replicas == 1) js.min_replicas = js.max_replicas = 1;
      js.checkpoint_interval_s = intervals[rng.Uniform(3)];
      const JobId j = state.AddJob(js);
      for (int i = 0; i < replicas; ++i) state.AddTask(j, "bg", request(gpus), js.priority);
      if (AllocateAction::TryStart(*s, state, j).started) {
        state.SetJobStart(j, static_cast<int64_t>(rng.Uniform(static_cast<uint64_t>(kNow))));
      } else {
        ++misses;
      }
    }
  }
};

void BM_PreemptionPlanFor256GpuHpGang(benchmark::State& st) {
  static NinetyPercentFull* cluster = new NinetyPercentFull();
  ClusterState& state = cluster->state;
  const PlaneId data = *state.topology().FindPlane("data");
  TaskRequest r;
  r.cpu_milli = 64000;
  r.mem_mib = 262144;
  r.gpu_count = 8;
  r.gpu_milli = kMilliPerGpu;
  JobId gangs[2];
  for (int k = 0; k < 2; ++k) {
    JobSpec js;
    js.name = k == 0 ? "hp-one-asw" : "hp-anywhere";
    js.min_replicas = js.max_replicas = 32;
    js.priority = 900;
    if (k == 0) {
      js.topology.plane = data;
      js.topology.required_level = *state.topology().FindLevel(data, "asw");
    }
    gangs[k] = state.AddJob(js);
    for (int i = 0; i < 32; ++i) state.AddTask(gangs[k], js.name, r, js.priority);
  }
  std::vector<double> micros;
  int64_t feasible = 0, evicted = 0, n = 0;
  uint64_t digest = 0;  // of the plans' evicted tasks and costs: equal across equivalent solvers
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    const PreemptionPlan p = PreemptAction::Plan(state, gangs[n % 2], kNow);
    micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    feasible += p.feasible;
    evicted += static_cast<int64_t>(p.evict.size());
    for (TaskId t : p.evict) digest = digest * 1000003 + t.value();
    digest = digest * 1000003 + static_cast<uint64_t>(p.cost);
    ++n;
    benchmark::DoNotOptimize(p);
  }
  std::sort(micros.begin(), micros.end());
  if (!micros.empty()) {
    st.counters["median_us"] = micros[micros.size() / 2];
    st.counters["p99_us"] = micros[std::min(micros.size() - 1, micros.size() * 99 / 100)];
  }
  st.counters["feasible%"] = 100.0 * static_cast<double>(feasible) / static_cast<double>(std::max<int64_t>(1, n));
  st.counters["evicted_tasks"] = static_cast<double>(evicted) / static_cast<double>(std::max<int64_t>(1, n));
  st.counters["plan_digest"] = static_cast<double>(digest % 1000000007);
  st.counters["alloc%"] = 100.0 * static_cast<double>(state.allocated_gpu_milli()) / static_cast<double>(state.total_gpu_milli());
}
BENCHMARK(BM_PreemptionPlanFor256GpuHpGang)->Unit(benchmark::kMicrosecond)->Iterations(200);

}  // namespace
}  // namespace estuary
