// The set-up the engine-cycle benchmarks share (bench/engine_cycle_bench.cc,
// bench/queue_cycle_bench.cc): the generated ASI-like cluster of 155,410 GPUs (GenerateCluster
// with its defaults, seed 1: 19,426 8-GPU nodes of H800 / A100 / A10 4:4:2) under one engine,
// filled with running work and a long queue, and the step "one task ends, the cycle runs".
// Thread-safety: none (benchmark set-up).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>

#include "common/rng.h"
#include "engine/engine.h"
#include "model/cluster_state.h"

namespace estuary {

// The generated cluster of 155,410 GPUs (GenerateCluster(GeneratorOptions{})); aborts on error.
ClusterState GeneratedCluster();

// The next job a benchmark submits, with driver id `id`, drawn from `rng`.
using JobSource = std::function<EngineJob(uint32_t id, Rng& rng)>;

// An engine over a full cluster with a long queue, and what its benchmark loop needs.
struct FullCluster {
  std::unique_ptr<Engine> engine;
  std::deque<uint32_t> running;  // driver ids, in start order
  uint32_t next_id = 1;
  int64_t now = 1;
  Rng more{9};  // the jobs submitted while the benchmark runs
};

struct FillOptions {
  // true (default): jobs are started (kStartNow, drawn from Rng(7)) until `rejections` in a row
  // are rejected, then `queued` are submitted (kEnqueue, drawn from Rng(8)) and one cycle runs.
  // false: the queue fills the cluster: `queued` jobs are submitted (kEnqueue, from Rng(8)) and a
  // cycle runs, then as many as started are submitted and a cycle runs, until a cycle starts none
  // (at most 20 rounds) — with queues, each queue gets what its fair share lets it start.
  bool start_now = true;
  int rejections = 400;
  uint32_t queued = 100000;
};

// Creates an engine over `cluster` with `config` and fills it from `jobs` (FillOptions), at time
// 1. Aborts on error.
std::unique_ptr<FullCluster> FillCluster(ClusterState cluster, EngineConfig config, const JobSource& jobs,
                                         const FillOptions& fill = {});

// One step of BM_CycleWhenOneTaskEnds: the time advances by a second, the oldest running job
// ends (Finish), the cycle runs, and for every job it started one new job is submitted
// (kEnqueue, from `jobs` with f.more), so that the queue keeps its length. Returns the jobs
// started, or -1 when nothing runs.
int64_t CycleWhenOneTaskEnds(FullCluster& f, const JobSource& jobs);

}  // namespace estuary
