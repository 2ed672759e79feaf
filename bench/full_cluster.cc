#include "full_cluster.h"

#include <cstdlib>
#include <utility>

#include "sim/cluster/generator.h"

namespace estuary {

ClusterState GeneratedCluster() {
  StatusOr<ClusterState> cluster = GenerateCluster(GeneratorOptions{});
  if (!cluster.ok()) std::abort();
  return *std::move(cluster);
}

std::unique_ptr<FullCluster> FillCluster(ClusterState cluster, EngineConfig config, const JobSource& jobs,
                                         const FillOptions& fill) {
  auto f = std::make_unique<FullCluster>();
  StatusOr<std::unique_ptr<Engine>> e = Engine::Create(std::move(cluster), std::move(config));
  if (!e.ok()) std::abort();
  f->engine = std::move(*e);
  auto cycle = [&f] {
    int64_t started = 0;
    for (const EngineEvent& ev : f->engine->RunCycle(f->now)) {
      if (ev.kind != EngineEvent::Kind::kStarted) continue;
      f->running.push_back(ev.job);
      ++started;
    }
    return started;
  };
  Rng queue(8);
  auto enqueue = [&](int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t id = f->next_id++;
      f->engine->Submit(jobs(id, queue), SubmitMode::kEnqueue, f->now);
    }
  };
  if (!fill.start_now) {
    int64_t more = fill.queued;
    for (int round = 0; round < 20 && more > 0; ++round) {
      enqueue(more);
      more = cycle();
    }
    return f;
  }
  Rng start(7);
  for (int rejected = 0; rejected < fill.rejections;) {
    const uint32_t id = f->next_id++;
    if (f->engine->Submit(jobs(id, start), SubmitMode::kStartNow, f->now).started) {
      f->running.push_back(id);
      rejected = 0;
    } else {
      ++rejected;
    }
  }
  enqueue(fill.queued);
  cycle();
  return f;
}

int64_t CycleWhenOneTaskEnds(FullCluster& f, const JobSource& jobs) {
  ++f.now;
  while (!f.running.empty() && f.engine->Running(f.running.front()) == 0) f.running.pop_front();
  if (f.running.empty()) return -1;
  f.engine->Finish(f.running.front(), f.now);
  f.running.pop_front();
  int64_t started = 0;
  for (const EngineEvent& ev : f.engine->RunCycle(f.now)) {
    if (ev.kind != EngineEvent::Kind::kStarted) continue;
    f.running.push_back(ev.job);
    ++started;
    const uint32_t id = f.next_id++;
    f.engine->Submit(jobs(id, f.more), SubmitMode::kEnqueue, f.now);
  }
  return started;
}

}  // namespace estuary
