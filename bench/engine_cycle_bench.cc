// The cost of one engine cycle on a full cluster with a long queue (issue 18: "a cycle costs what
// changed, not the queue length").
//
// Cluster: the generated ASI-like cluster of 155,410 GPUs (GenerateCluster with its defaults,
// seed 1: 19,426 8-GPU nodes of H800 / A100 / A10 4:4:2).
// Engine: the service's defaults (EngineConfig{}: best-fit, priority queue, Absorb on, Reclaim,
// grace 60 s), requeue on as in the simulator and the service.
// Shapes: 50 job shapes, shape k (0..49) = `replicas` x `gpus` whole GPUs, 8 cores and 64 GiB per
// GPU: gpus = 1, 2, 4, 8 (k mod 4); replicas = 1, 2, 3, 4 ((k / 4) mod 4), min = max (a gang)
// except every fifth shape (k mod 5 = 4), elastic from 1 to its replicas. Priority by k / 16:
//   hp = 0: 100, 250, 400, 550 — nothing is HP; priorities below 400 are preemptible;
//   hp = 1: 100, 400, 700, 900 — the 18 shapes k >= 32 are HP, and nothing is preemptible, so
//           that every queued HP job's Reclaim is infeasible (the queue's worst case: 36% of it
//           HP jobs that look for victims again after every release).
// Fill (untimed, once per variant; bench/full_cluster.h): jobs of shapes drawn from Rng(7) are submitted with
// kStartNow until 400 in a row are rejected (the cluster is full for every shape); then 100,000
// jobs of shapes drawn from Rng(8) are submitted with kEnqueue and one cycle runs.
//
// BM_CycleWhenOneTaskEnds/hp:H — per iteration: the oldest running job ends (Finish), the cycle
// runs (RunCycle), and for every job it started one new job of a shape drawn from Rng(9) is
// submitted (kEnqueue), so that the queue stays at 100,000. Time per iteration = all of that.
// Counters: queued = jobs waiting after the last iteration, started = jobs started per cycle,
// alloc% = allocated GPUs / all GPUs.
#include <benchmark/benchmark.h>

#include <string>

#include "full_cluster.h"

namespace estuary {
namespace {

constexpr int kShapes = 50;
constexpr uint32_t kQueued = 100000;

EngineJob JobOfShape(uint32_t id, int k, bool hp) {
  static constexpr int32_t kLp[] = {100, 250, 400, 550};
  static constexpr int32_t kHp[] = {100, 400, 700, 900};
  EngineJob j;
  j.id = id;
  j.name = "j" + std::to_string(id);
  const int gpus = 1 << (k % 4);
  const int replicas = 1 + (k / 4) % 4;
  j.max_replicas = replicas;
  j.min_replicas = k % 5 == 4 ? 1 : replicas;
  j.per_replica.gpu_count = gpus;
  j.per_replica.gpu_milli = kMilliPerGpu;
  j.per_replica.cpu_milli = 8000 * gpus;
  j.per_replica.mem_mib = 64 * 1024 * gpus;
  j.priority = (hp ? kHp : kLp)[k / 16];
  j.preemptible = !hp && j.priority < 400;
  return j;
}

// The jobs of shapes drawn uniformly.
JobSource Shapes(bool hp) {
  return [hp](uint32_t id, Rng& rng) { return JobOfShape(id, static_cast<int>(rng.Uniform(kShapes)), hp); };
}

FullCluster& Full(bool hp) {
  static FullCluster* fulls[2] = {nullptr, nullptr};
  FullCluster*& f = fulls[hp ? 1 : 0];
  if (f) return *f;
  EngineConfig config;
  config.requeue = true;
  f = FillCluster(GeneratedCluster(), config, Shapes(hp), FillOptions{true, 400, kQueued}).release();
  return *f;
}

void BM_CycleWhenOneTaskEnds(benchmark::State& state) {
  const bool hp = state.range(0) != 0;
  FullCluster& f = Full(hp);
  const JobSource jobs = Shapes(hp);
  int64_t started = 0, cycles = 0;
  for (auto _ : state) {
    const int64_t n = CycleWhenOneTaskEnds(f, jobs);
    if (n < 0) break;
    started += n;
    ++cycles;
  }
  const ClusterState& st = f.engine->state();
  state.counters["queued"] = static_cast<double>(f.engine->QueuedInOrder().size());
  state.counters["started"] = cycles ? static_cast<double>(started) / static_cast<double>(cycles) : 0.0;
  state.counters["alloc%"] = 100.0 * static_cast<double>(st.allocated_gpu_milli()) /
                             static_cast<double>(st.total_gpu_milli());
}
BENCHMARK(BM_CycleWhenOneTaskEnds)->ArgName("hp")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace estuary
