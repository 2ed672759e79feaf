// The cost of the multi-tenant queues' bookkeeping in an engine cycle (issue 20: "a scheduling
// cycle with 1,000 queues and 100,000 pending jobs on the 155,410-GPU generated cluster:
// fair-share bookkeeping adds <= 20% to the cycle").
//
// Cluster: the generated cluster of 155,410 GPUs (bench/full_cluster.h: 19,426 8-GPU nodes,
// H800 / A100 / A10 ASWs 4:4:2). Engine: the service's defaults with requeue, as in
// BM_CycleWhenOneTaskEnds; with queues, the default sharing (borrow, reclaim, weights, reclaim to
// guarantee, cooldown 300 s).
// Queues (1,000): 40 orgs x 24 teams. Org i runs on one GPU model (i mod 5: 0, 1 H800; 2, 3 A100;
// 4 A10 — 16, 16 and 8 orgs) and is guaranteed 3/4 of that model's GPUs divided among its
// model's orgs (whole GPUs), weight 1 + i mod 3; every fourth org (i mod 4 = 1) is limited to
// twice its guarantee. Its teams t = 0..23: teams with t mod 4 != 3 share the org's guarantee
// equally (18 of them), the others have none; weight 1 + t mod 4; every sixth team (t mod 6 = 5)
// is limited to twice its guarantee plus 64 GPUs.
// Jobs: a team drawn with org uniform and team min(U(24), U(24)) (low teams busier: some queues
// borrow, others are owed), on its org's model; 70% single-replica 1, 2, 4 or 8 GPUs, 20% gangs
// (2 x 4, 2 x 8, 4 x 8, 8 x 8 GPUs), 10% elastic (1..4 x 8, 1..8 x 1 GPUs); 8 cores and 64 GiB
// per GPU; priority 100, 250 or 400 (LP; below 400 preemptible).
// Variants: queues:1 — every job names its team; queues:0 — the same cluster, the same jobs
// (the same draws), the queue names dropped and no queues configured; queues:2 — as queues:1 with
// SharingSpec::reclaim off: the queues' bookkeeping (shares, admission by fair share, limits,
// guarantees) without the Reclaims they cause (queues:0's jobs are all LP and never reclaim).
// Fill (untimed, once per variant; bench/full_cluster.h, FillOptions::start_now false): the queue
// fills the cluster — 100,000 jobs queued and a cycle run, then as many more as started, until a
// cycle starts none — so that with queues each queue holds what its fair share let it start
// (a fill by kStartNow in random order would leave hundreds of queues owed capacity, and the
// cycles measured would be their first Reclaims); then warm-up cycles, each 61 s later (past the
// grace period), until one starts no Reclaim (at most 30). The state's invariants and the queues'
// usage are checked once, and that ~100,000 jobs wait on a >= 90% allocated cluster.
//
// BM_QueueCycleWhenOneTaskEnds/queues:Q — per iteration, as BM_CycleWhenOneTaskEnds: the time
//   advances by 1 s, the oldest running job ends, the cycle runs, and one new job is queued per
//   job started (the queue stays at ~100,000).
// BM_QueueCycleAfterBurst/queues:Q — per iteration: the time advances by 1 s, 1,000 new jobs
//   arrive (kEnqueue) and the cycle runs (timed); then (untimed) the arrivals still waiting are
//   cancelled. Nothing ends, so little fits: the cycle's passes, Reclaim and Absorb look at the
//   whole queue's shapes.
// Counters: queued (jobs waiting after the last iteration), started (jobs started per cycle),
// reclaims (Reclaims started per cycle; the burst only), alloc% (allocated GPUs / all GPUs).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "full_cluster.h"

namespace estuary {
namespace {

constexpr int kOrgs = 40, kTeams = 24;
constexpr uint32_t kQueued = 100000;
constexpr int kBurst = 1000;
constexpr std::array<const char*, 3> kModels = {"H800", "A100", "A10"};

int OrgModel(int org) {
  static constexpr int kByRest[] = {0, 0, 1, 1, 2};
  return kByRest[org % 5];
}

std::string OrgName(int org) { return "org" + std::to_string(org); }
std::string TeamName(int org, int team) { return OrgName(org) + "-team" + std::to_string(team); }

// The 1,000 queues over `cluster`'s GPUs (see the header comment).
std::vector<QueueSpec> Queues(const ClusterState& cluster) {
  std::map<std::string, int64_t> gpus;  // per model name
  for (const Node& n : cluster.nodes()) gpus[cluster.models().Name(n.spec.model)] += n.spec.gpu_count;
  int orgs_of[3] = {0, 0, 0};
  for (int o = 0; o < kOrgs; ++o) ++orgs_of[OrgModel(o)];
  std::vector<QueueSpec> specs;
  for (int o = 0; o < kOrgs; ++o) {
    const int m = OrgModel(o);
    const int64_t org_gpus = gpus[kModels[m]] * 3 / 4 / orgs_of[m];
    QueueSpec org;
    org.name = OrgName(o);
    org.guarantee.model_milli[kModels[m]] = org_gpus * kMilliPerGpu;
    org.weight = 1 + o % 3;
    if (o % 4 == 1) org.limit.gpu_milli = 2 * org_gpus * kMilliPerGpu;
    specs.push_back(org);
    const int64_t team_gpus = org_gpus / 18;
    for (int t = 0; t < kTeams; ++t) {
      QueueSpec team;
      team.name = TeamName(o, t);
      team.parent = org.name;
      const int64_t g = t % 4 != 3 ? team_gpus : 0;
      if (g > 0) team.guarantee.model_milli[kModels[m]] = g * kMilliPerGpu;
      team.weight = 1 + t % 4;
      if (t % 6 == 5) team.limit.gpu_milli = (2 * g + 64) * kMilliPerGpu;
      specs.push_back(team);
    }
  }
  return specs;
}

// The jobs (see the header comment); `queues` false: the same jobs naming no queue.
JobSource Jobs(bool queues) {
  return [queues](uint32_t id, Rng& rng) {
    const int org = static_cast<int>(rng.Uniform(kOrgs));
    const int team = static_cast<int>(std::min(rng.Uniform(kTeams), rng.Uniform(kTeams)));
    const int kind = static_cast<int>(rng.Uniform(20));
    static constexpr int32_t kPriority[] = {100, 250, 400};
    const int32_t priority = kPriority[rng.Uniform(3)];
    EngineJob j;
    j.id = id;
    j.name = "j" + std::to_string(id);
    int gpus = 8, min = 1, max = 1;
    if (kind < 14) {
      gpus = 1 << (kind % 4);
    } else if (kind < 18) {
      static constexpr int kGangs[4][2] = {{2, 4}, {2, 8}, {4, 8}, {8, 8}};  // replicas x GPUs
      min = max = kGangs[kind - 14][0];
      gpus = kGangs[kind - 14][1];
    } else if (kind == 18) {
      max = 4;
    } else {
      gpus = 1;
      max = 8;
    }
    j.min_replicas = min;
    j.max_replicas = max;
    j.per_replica.gpu_count = gpus;
    j.per_replica.gpu_milli = kMilliPerGpu;
    j.per_replica.cpu_milli = 8000 * gpus;
    j.per_replica.mem_mib = 64 * 1024 * gpus;
    j.models = {kModels[OrgModel(org)]};
    j.priority = priority;
    j.preemptible = priority < 400;
    if (queues) j.queue = TeamName(org, team);
    return j;
  };
}

struct Variant {
  std::unique_ptr<FullCluster> full;
  JobSource jobs;
};

int64_t Count(const std::vector<EngineEvent>& events, EngineEvent::Kind kind) {
  return std::count_if(events.begin(), events.end(), [kind](const EngineEvent& e) { return e.kind == kind; });
}

// `variant` 0: no queues; 1: queues with the default sharing; 2: queues without Reclaim or
// rebalancing (SharingSpec::reclaim false: admission by fair share, limits and guarantees only).
Variant& Full(int variant) {
  static Variant* variants[3] = {nullptr, nullptr, nullptr};
  const bool queues = variant != 0;
  Variant*& v = variants[variant];
  if (v) return *v;
  v = new Variant;
  v->jobs = Jobs(queues);
  ClusterState cluster = GeneratedCluster();
  EngineConfig config;
  config.requeue = true;
  if (queues) config.queues = Queues(cluster);
  if (variant == 2) config.sharing.reclaim = false;
  v->full = FillCluster(std::move(cluster), config, v->jobs, FillOptions{false, 0, kQueued});
  FullCluster& f = *v->full;
  // Warm-up: the queues' first Reclaims (of what the random fill left them owed) run their course.
  for (int round = 0; round < 30; ++round) {
    f.now += 61;
    const std::vector<EngineEvent> events = f.engine->RunCycle(f.now);
    for (const EngineEvent& ev : events) {
      if (ev.kind == EngineEvent::Kind::kStarted) f.running.push_back(ev.job);
    }
    if (Count(events, EngineEvent::Kind::kReclaim) == 0) break;
  }
  const ClusterState& st = f.engine->state();
  if (!st.CheckInvariants().ok() || !st.CheckQueueUsage().ok()) std::abort();
  // It measures what it claims: a full cluster, a long queue, the queues in use.
  if (f.engine->queued() < kQueued * 9 / 10) std::abort();
  if (st.allocated_gpu_milli() < st.total_gpu_milli() * 9 / 10) std::abort();
  if (queues != f.engine->queue_book().enabled()) std::abort();
  if (queues && f.engine->queue_book().tree().size() != 1000) std::abort();
  return *v;
}

void Counters(benchmark::State& state, const FullCluster& f, int64_t started, int64_t cycles) {
  const ClusterState& st = f.engine->state();
  const double n = cycles > 0 ? static_cast<double>(cycles) : 1.0;
  state.counters["queued"] = static_cast<double>(f.engine->queued());
  state.counters["started"] = static_cast<double>(started) / n;
  state.counters["alloc%"] = 100.0 * static_cast<double>(st.allocated_gpu_milli()) / static_cast<double>(st.total_gpu_milli());
}

void BM_QueueCycleWhenOneTaskEnds(benchmark::State& state) {
  Variant& v = Full(static_cast<int>(state.range(0)));
  FullCluster& f = *v.full;
  int64_t started = 0, cycles = 0;
  for (auto _ : state) {
    const int64_t n = CycleWhenOneTaskEnds(f, v.jobs);
    if (n < 0) {
      state.SkipWithError("nothing runs");
      break;
    }
    started += n;
    ++cycles;
  }
  Counters(state, f, started, cycles);
}
BENCHMARK(BM_QueueCycleWhenOneTaskEnds)->ArgName("queues")->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

void BM_QueueCycleAfterBurst(benchmark::State& state) {
  Variant& v = Full(static_cast<int>(state.range(0)));
  FullCluster& f = *v.full;
  int64_t started = 0, reclaims = 0, cycles = 0;
  std::vector<uint32_t> burst;
  for (auto _ : state) {
    ++f.now;
    burst.clear();
    for (int i = 0; i < kBurst; ++i) {
      const uint32_t id = f.next_id++;
      f.engine->Submit(v.jobs(id, f.more), SubmitMode::kEnqueue, f.now);
      burst.push_back(id);
    }
    const std::vector<EngineEvent> events = f.engine->RunCycle(f.now);
    state.PauseTiming();
    for (const EngineEvent& ev : events) {
      if (ev.kind == EngineEvent::Kind::kStarted) f.running.push_back(ev.job);
    }
    started += Count(events, EngineEvent::Kind::kStarted);
    reclaims += Count(events, EngineEvent::Kind::kReclaim);
    for (uint32_t id : burst) {
      if (f.engine->Running(id) == 0) f.engine->Cancel(id, f.now);
    }
    ++cycles;
    state.ResumeTiming();
  }
  Counters(state, f, started, cycles);
  state.counters["reclaims"] = cycles > 0 ? static_cast<double>(reclaims) / static_cast<double>(cycles) : 0.0;
}
BENCHMARK(BM_QueueCycleAfterBurst)->ArgName("queues")->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace estuary
