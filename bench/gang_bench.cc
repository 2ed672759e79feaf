// Topology-constrained gang placement on a hyperscale cluster: one iteration starts a gang of
// 32 x 8-GPU replicas (256 GPUs) that requires one ASW, through AllocateAction::TryStart, on the
// generated ASI-like cluster of 155,408 GPUs (GenerateCluster defaults) that is half full of
// single-GPU tasks placed by best-fit (untimed). After each iteration the gang is unbound again
// (untimed), so every iteration sees the same state. Reported per iteration: the decision
// (choosing the ASW, placing and binding the 32 replicas); the counters median_us and p99_us are
// the median and 99th percentile of the individual placements of a run (each timed on its own with
// a steady clock).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "common/check.h"
#include "common/rng.h"
#include "sched/actions/allocate.h"
#include "sched/plugins/register.h"
#include "sim/cluster/generator.h"

namespace estuary {
namespace {

struct HalfFull {
  ClusterState state;
  HalfFull() {
    state = std::move(GenerateCluster(GeneratorOptions())).value();
    SessionOptions so;
    so.policy = *OpenbPolicy("best-fit");
    auto s = std::move(Session::Open(state, BuiltinRegistry(), PluginContext{&state, nullptr}, so)).value();
    Rng rng(9);
    TaskRequest one;
    one.cpu_milli = 8000;
    one.mem_mib = 65536;
    one.gpu_count = 1;
    one.gpu_milli = kMilliPerGpu;
    while (state.allocated_gpu_milli() * 2 < state.total_gpu_milli()) {
      JobSpec js;
      js.name = "bg";
      const JobId j = state.AddJob(js);
      state.AddTask(j, "bg", one);
      ESTUARY_CHECK(AllocateAction::TryStart(*s, state, j).started);
    }
  }
};

void BM_Gang256InOneAsw(benchmark::State& st) {
  static HalfFull* cluster = new HalfFull();
  ClusterState& state = cluster->state;
  SessionOptions so;
  so.policy = *OpenbPolicy("best-fit");
  auto session = std::move(Session::Open(state, BuiltinRegistry(), PluginContext{&state, nullptr}, so)).value();
  const PlaneId data = *state.topology().FindPlane("data");
  TaskRequest r;
  r.cpu_milli = 64000;
  r.mem_mib = 262144;
  r.gpu_count = 8;
  r.gpu_milli = kMilliPerGpu;
  int64_t started = 0;
  std::vector<double> micros;
  for (auto _ : st) {
    st.PauseTiming();
    JobSpec js;
    js.name = "gang";
    js.min_replicas = js.max_replicas = 32;
    js.topology.plane = data;
    js.topology.required_level = *state.topology().FindLevel(data, "asw");
    const JobId j = state.AddJob(js);
    for (int i = 0; i < 32; ++i) state.AddTask(j, "gang", r);
    st.ResumeTiming();
    const auto t0 = std::chrono::steady_clock::now();
    const JobAttempt a = AllocateAction::TryStart(*session, state, j);
    micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    st.PauseTiming();
    started += a.started;
    for (TaskId t : state.job(j).tasks) state.Finish(t);
    st.ResumeTiming();
  }
  std::sort(micros.begin(), micros.end());
  if (!micros.empty()) {
    st.counters["median_us"] = micros[micros.size() / 2];
    st.counters["p99_us"] = micros[std::min(micros.size() - 1, micros.size() * 99 / 100)];
  }
  st.counters["started%"] = 100.0 * static_cast<double>(started) / static_cast<double>(st.iterations());
  st.counters["gpus"] = static_cast<double>(state.total_gpu_milli() / kMilliPerGpu);
}
BENCHMARK(BM_Gang256InOneAsw)->Unit(benchmark::kMicrosecond)->Iterations(500);

// Single-GPU task placement on the same half-full 155,408-GPU cluster: one iteration places a
// fresh single-GPU task (best-fit, the Session's class index) and binds it; tasks stay placed, so
// the cluster fills further over the run (from 50% by at most the iteration count).
void BM_SingleGpuOnHyperscale(benchmark::State& st) {
  static HalfFull* cluster = new HalfFull();
  ClusterState& state = cluster->state;
  SessionOptions so;
  so.policy = *OpenbPolicy("best-fit");
  auto session = std::move(Session::Open(state, BuiltinRegistry(), PluginContext{&state, nullptr}, so)).value();
  TaskRequest one;
  one.cpu_milli = 8000;
  one.mem_mib = 65536;
  one.gpu_count = 1;
  one.gpu_milli = kMilliPerGpu;
  int64_t placed = 0;
  for (auto _ : st) {
    st.PauseTiming();
    JobSpec js;
    js.name = "one";
    const JobId j = state.AddJob(js);
    state.AddTask(j, "one", one);
    st.ResumeTiming();
    placed += AllocateAction::TryStart(*session, state, j).started;
  }
  st.SetItemsProcessed(st.iterations());
  st.counters["placed%"] = 100.0 * static_cast<double>(placed) / static_cast<double>(st.iterations());
}
BENCHMARK(BM_SingleGpuOnHyperscale)->Unit(benchmark::kMicrosecond)->Iterations(20000);

}  // namespace
}  // namespace estuary
