// The federation of issue 6 at full size: 20 members of 155,410 GPUs each (the generated ASI-like
// cluster, GenerateCluster with total_gpus = 155,410 and seed = member index + 1).
//
// Members. Every member is a real InProcessMember (its own ClusterState, Session and
// CapacitySummary; best-fit placement, absorb off, summary thresholds {100, 300, 500, 800, 900},
// summary_period_s 3600). GPU model mixes cycle over four kinds (member index mod 4):
//   0: H800 / A100 / A10 4:4:2 (the generator's default)   1: H800 only
//   2: A100 / A10 3:1                                      3: H800 / H20 2:1 (H20 only here)
// Fill (untimed, once per process): each member is filled through its own Submit(kStartNow) to a
// target between 85% and 95% of its GPUs (seeded per member) with FedJobs drawn from Rng(100 +
// index): single tasks of 1 GPU (30%), 2 GPUs (15%), 4 GPUs (15%), 8 GPUs (25%), and gangs of
// 2..8 replicas x 8 GPUs (15%), each pinned to one of the member's GPU models drawn by the mix's
// shares among the models not yet filled to the target (a model is done at the target or after
// 200 rejected submissions; the fill ends when every model is done); priorities 100 spot (25%),
// 300 LP (30%), 500 dev (15%) — all preemptible — and 800 / 900 HP (20% / 10%, not
// preemptible); each started at a random time in the week before `kNow`, so that the reclaim cost
// (mean age of evictable GPUs) differs. Each member publishes at kNow.
//
// BM_FedDecision/shape:s — FedScheduler::Rank (reclaim-aware, FedOptions{}) for one pending job:
// probe the 20 members' summaries and order the candidates. 600 jobs are enqueued once (ids 1..600,
// untimed); shapes: 0 1x1 GPU LP (300), 1 1x8 HP (800), 2 4x8 HP gang (900), 3 16x8 HP gang in
// one "asw" of plane "data" (900), 4 32x8 HP pinned to A100 (900), 5 1x8 HP pinned to H20 (900),
// which only the mix-3 members have. s = 6: the seeded mixed stream (shape uniform, Rng(17)).
// Time per iteration = one decision (one job). Counters: candidates per decision, members where
// it fits idle, members where it fits only with reclaim; setup_s = wall time of building and
// filling the members (steady clock); alloc% = mean member allocation.
//
// BM_MemberCycle/summary:u/k:K — a member's own scheduling cycle on a filled member (mix 0, seed
// 1, filled as above): cancel K running jobs (InProcessMember::Cancel) drawn from Rng(23),
// submit the same K jobs again (Submit kStartNow; best-fit re-places them), then Step(now).
// summary_period_s is 3600 and the cycles run at kNow + 1 s, + 2 s, ... (< 3600 s in a run), so
// Submit and Step never refresh the summary; with u = 1 the cycle ends with Publish(now)
// (CapacitySummary::Refresh over the change feed). u = 0 and u = 1 run on two separate members
// filled identically and driven by identical operations (fixed iteration counts), so their states
// never drift apart; the ratio of their times is the summary upkeep overhead. Counters:
// refreshed = nodes recomputed by Refresh per cycle (0 for u = 0), started = jobs restarted per
// cycle, alloc%. BM_MemberCycleUpkeep/k:K runs both members interleaved (see its comment) so that
// the ratio does not depend on the machine's drift between two benchmarks. Every cycle advances
// the members' clocks by 1 s; a full run of both benchmarks with 5 repetitions is 2,000 cycles per
// member, below the 3,600 s period.
//
// BM_FederationRunUpkeep/hours:H — the members' own scheduling in operation rather than in the
// cheapest cycle above: examples/federation.yaml (4 members, 40,960 GPUs, summary_period_s 0 = the
// summary is refreshed after every member call) run for its first H simulated hours in the
// `reclaim-aware` configuration, seed 1 (RunFederation, the simulator's own driver). Every member
// times itself with a steady clock (MemberOptions::stopwatch): schedule_s = Submit, Cancel,
// QuoteReclaim, Step and Grow without the publications inside them; upkeep_s = every Publish
// (CapacitySummary::Refresh); upkeep% = 100 x upkeep / schedule. One iteration = one whole run.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/rng.h"
#include "federation/fed_scheduler.h"
#include "federation/in_process_member.h"
#include "sim/cluster/generator.h"
#include "sim/federation_setup.h"
#include "sim/federation_sim.h"
#include "sim/scenario.h"

namespace estuary {
namespace {

constexpr int64_t kNow = 7 * 24 * 3600;
constexpr int kMembers = 20;
constexpr int64_t kMemberGpus = 155410;
constexpr uint32_t kDecisionJobs = 600;

std::vector<ModelShare> MixFor(int member) {
  switch (member % 4) {
    case 0: return GeneratorOptions().models;
    case 1: return {{"H800", 1, 128, 2048}};
    case 2: return {{"A100", 3, 96, 1024}, {"A10", 1, 64, 512}};
    default: return {{"H800", 2, 128, 2048}, {"H20", 1, 96, 1024}};
  }
}

TaskRequest PerReplica(int gpus) {
  TaskRequest r;
  r.cpu_milli = 6000 * gpus;
  r.mem_mib = 49152 * gpus;
  r.gpu_count = gpus;
  r.gpu_milli = kMilliPerGpu;
  return r;
}

// A member over its own generated cluster, filled as in the header comment.
struct FilledMember {
  std::unique_ptr<InProcessMember> member;
  std::vector<uint32_t> jobs;  // the fill's job ids (federation ids, unique per member)
  double fill_s = 0;
};

FilledMember MakeMember(int index) {
  const auto t0 = std::chrono::steady_clock::now();
  GeneratorOptions go;
  go.total_gpus = kMemberGpus;
  go.seed = static_cast<uint64_t>(index) + 1;
  go.models = MixFor(index);
  MemberOptions mo;
  mo.name = "m" + std::to_string(index);
  mo.seed = static_cast<uint64_t>(index) + 1;
  mo.absorb = false;
  mo.summary.thresholds = {100, 300, 500, 800, 900};
  mo.summary_period_s = 3600;
  FilledMember f;
  f.member = std::move(InProcessMember::Create(std::move(GenerateCluster(go)).value(), mo)).value();
  InProcessMember& m = *f.member;
  Rng rng(100 + static_cast<uint64_t>(index));
  const int64_t target_pct = 85 + static_cast<int64_t>(rng.Uniform(11));
  const uint32_t base = 1000000 + static_cast<uint32_t>(index) * 200000;
  // Per model: its GPUs, the fill's GPUs started on it, rejections, and whether it is done
  // (at the target, or 200 rejections).
  const ClusterState& s = m.state();
  const size_t nm = go.models.size();
  std::vector<int64_t> capacity(nm, 0), used(nm, 0), misses(nm, 0);
  std::vector<char> done(nm, 0);
  for (const Node& n : s.nodes()) {
    for (size_t mi = 0; mi < nm; ++mi) {
      if (s.models().Find(go.models[mi].model) == n.spec.model) capacity[mi] += n.spec.gpu_count;
    }
  }
  double open_share = 0;
  for (const ModelShare& ms : go.models) open_share += ms.share;
  size_t open = nm;
  for (uint32_t k = 0; open > 0; ++k) {
    FedJob j;
    j.id = base + k;
    j.name = "fill";
    const double x = rng.UniformDouble();
    int gpus = 8, replicas = 1;
    if (x < 0.30) {
      gpus = 1;
    } else if (x < 0.45) {
      gpus = 2;
    } else if (x < 0.60) {
      gpus = 4;
    } else if (x >= 0.85) {
      replicas = 2 + static_cast<int>(rng.Uniform(7));
    }
    j.min_replicas = j.max_replicas = replicas;
    j.per_replica = PerReplica(gpus);
    // Pinned to one of the member's models not yet at the target, drawn by share.
    double y = rng.UniformDouble() * open_share;
    size_t mi = nm;
    for (size_t c = 0; c < nm; ++c) {
      if (done[c]) continue;
      mi = c;  // the last open model takes any rounding remainder
      if (y < go.models[c].share) break;
      y -= go.models[c].share;
    }
    j.models = {go.models[mi].model};
    const double p = rng.UniformDouble();
    j.priority = p < 0.25 ? 100 : p < 0.55 ? 300 : p < 0.70 ? 500 : p < 0.90 ? 800 : 900;
    j.preemptible = j.priority < kHpPriority;
    j.checkpoint_interval_s = 1800;
    const int64_t t = static_cast<int64_t>(rng.Uniform(static_cast<uint64_t>(kNow)));
    if (m.Submit(j, AdmitMode::kStartNow, t).started) {
      f.jobs.push_back(j.id);
      used[mi] += int64_t{gpus} * replicas;
    } else {
      ++misses[mi];
    }
    if (used[mi] * 100 >= capacity[mi] * target_pct || misses[mi] >= 200) {
      done[mi] = 1;
      open_share -= go.models[mi].share;
      --open;
    }
  }
  m.TakeEvents();
  m.Publish(kNow);
  f.fill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return f;
}

double AllocPct(const InProcessMember& m) {
  return 100.0 * static_cast<double>(m.state().allocated_gpu_milli()) / static_cast<double>(m.state().total_gpu_milli());
}

struct Federation {
  std::vector<FilledMember> members;
  std::unique_ptr<FedScheduler> fed;
  std::vector<uint32_t> by_shape[7];  // enqueued job ids per shape; [6]: the mixed stream
  std::map<uint32_t, FedJob> pending;  // the enqueued jobs by id
  double setup_s = 0, alloc_pct = 0;

  Federation() {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Member*> ptrs;
    for (int i = 0; i < kMembers; ++i) {
      members.push_back(MakeMember(i));
      const FilledMember& f = members.back();
      alloc_pct += AllocPct(*f.member) / kMembers;
      std::fprintf(stderr, "member %2d: mix %d, %zu jobs, alloc %.1f%%, built+filled in %.1f s\n", i, i % 4,
                   f.jobs.size(), AllocPct(*f.member), f.fill_s);
      ptrs.push_back(f.member.get());
    }
    fed = std::make_unique<FedScheduler>(std::move(ptrs), FedOptions{});
    Rng rng(17);
    for (uint32_t id = 1; id <= kDecisionJobs; ++id) {
      const int shape = static_cast<int>(rng.Uniform(6));
      FedJob j;
      j.id = id;
      j.name = "pending-" + std::to_string(shape);
      j.priority = 900;
      j.checkpoint_interval_s = 1800;
      int replicas = 1, gpus = 8;
      switch (shape) {
        case 0: gpus = 1; j.priority = 300; j.preemptible = true; break;
        case 1: j.priority = 800; break;
        case 2: replicas = 4; break;
        case 3: replicas = 16; j.plane = "data"; j.required_level = "asw"; break;
        case 4: replicas = 32; j.models = {"A100"}; break;
        default: j.models = {"H20"}; break;
      }
      j.min_replicas = j.max_replicas = replicas;
      j.per_replica = PerReplica(gpus);
      fed->Enqueue(j, {}, false, kNow);
      pending[id] = j;
      by_shape[shape].push_back(id);
      by_shape[6].push_back(id);
    }
    setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "federation setup: %d members, %.1f s, mean alloc %.1f%%\n", kMembers, setup_s, alloc_pct);
  }
};

Federation& TheFederation() {
  static Federation* f = new Federation();
  return *f;
}

void BM_FedDecision(benchmark::State& st) {
  Federation& f = TheFederation();
  const std::vector<uint32_t>& jobs = f.by_shape[st.range(0)];
  size_t i = 0;
  int64_t candidates = 0, idle = 0, reclaim = 0, n = 0;
  for (auto _ : st) {
    std::vector<FedCandidate> c = f.fed->Rank(jobs[i], kNow);
    benchmark::DoNotOptimize(c.data());
    candidates += static_cast<int64_t>(c.size());
    for (const FedCandidate& x : c) (x.mode == AdmitMode::kStartNow ? idle : reclaim) += 1;
    ++n;
    if (++i == jobs.size()) i = 0;
  }
  const double dn = static_cast<double>(std::max<int64_t>(1, n));
  st.counters["candidates"] = static_cast<double>(candidates) / dn;
  st.counters["idle_members"] = static_cast<double>(idle) / dn;
  st.counters["reclaim_members"] = static_cast<double>(reclaim) / dn;
  st.counters["setup_s"] = f.setup_s;
  st.counters["alloc%"] = f.alloc_pct;
}
BENCHMARK(BM_FedDecision)->ArgName("shape")->DenseRange(0, 6)->Unit(benchmark::kMicrosecond);

// A reclaim decision in full, as FedScheduler::Pass makes it for an HP job that fits nowhere on
// idle capacity: Rank over the 20 summaries, then a quote (Member::QuoteReclaim — the member's own
// PreemptAction plan, nothing changed) from each of the first FedOptions::max_quotes (4) reclaim
// candidates. Shape 3 (16 x 8 GPUs in one ASW): 18 members can only take it by reclaiming.
void BM_FedReclaimDecisionWithQuotes(benchmark::State& st) {
  Federation& f = TheFederation();
  const std::vector<uint32_t>& jobs = f.by_shape[3];
  size_t i = 0;
  int64_t quoted = 0, n = 0;
  for (auto _ : st) {
    const std::vector<FedCandidate> c = f.fed->Rank(jobs[i], kNow);
    int asked = 0;
    for (const FedCandidate& x : c) {
      if (x.mode != AdmitMode::kStartOrReclaim || asked == FedOptions{}.max_quotes) continue;
      ++asked;
      auto q = f.members[static_cast<size_t>(x.member)].member->QuoteReclaim(f.pending.at(jobs[i]), kNow);
      benchmark::DoNotOptimize(q);
      quoted += q.has_value();
    }
    ++n;
    if (++i == jobs.size()) i = 0;
  }
  st.counters["quotes_per_job"] = static_cast<double>(quoted) / static_cast<double>(std::max<int64_t>(1, n));
}
BENCHMARK(BM_FedReclaimDecisionWithQuotes)->Unit(benchmark::kMillisecond)->Iterations(20);

// The two members of BM_MemberCycle (u = 0, 1), built and filled identically, each with its own
// job picker and clock so that both see the same operations.
struct CycleMember {
  FilledMember f;
  Rng rng{23};
  int64_t now = kNow;
};

CycleMember& TheCycleMember(int summary) {
  static CycleMember* m[2] = {nullptr, nullptr};
  if (m[summary] == nullptr) {
    m[summary] = new CycleMember{MakeMember(0)};
    std::fprintf(stderr, "cycle member (summary:%d): %zu jobs, alloc %.1f%%, built+filled in %.1f s\n", summary,
                 m[summary]->f.jobs.size(), AllocPct(*m[summary]->f.member), m[summary]->f.fill_s);
  }
  return *m[summary];
}

// One scheduling cycle of member c without summary upkeep (see the header comment): cancels k
// jobs drawn from c's picker, submits them again, steps. Returns the jobs started.
int64_t Cycle(CycleMember& c, size_t k, std::vector<uint32_t>& pick) {
  InProcessMember& m = *c.f.member;
  // A resubmitted job is found by its id: the member keeps the FedJob it materialised.
  FedJob j;
  j.name = "fill";
  int64_t started = 0;
  ++c.now;
  for (size_t i = 0; i < k; ++i) {
    pick[i] = c.f.jobs[static_cast<size_t>(c.rng.Uniform(c.f.jobs.size()))];
    m.Cancel(pick[i], c.now);
  }
  for (size_t i = 0; i < k; ++i) {
    j.id = pick[i];
    started += m.Submit(j, AdmitMode::kStartNow, c.now).started;
  }
  m.Step(c.now);
  return started;
}

void BM_MemberCycle(benchmark::State& st) {
  const int summary = static_cast<int>(st.range(0));
  const size_t k = static_cast<size_t>(st.range(1));
  CycleMember& c = TheCycleMember(summary);
  InProcessMember& m = *c.f.member;
  std::vector<uint32_t> pick(k);
  const int64_t refreshed0 = m.summary().nodes_refreshed();
  int64_t started = 0, cycles = 0;
  for (auto _ : st) {
    started += Cycle(c, k, pick);
    if (summary == 1) m.Publish(c.now);
    benchmark::DoNotOptimize(m.summary().nodes_refreshed());
    ++cycles;
  }
  m.TakeEvents();
  const double dn = static_cast<double>(std::max<int64_t>(1, cycles));
  st.counters["refreshed"] = static_cast<double>(m.summary().nodes_refreshed() - refreshed0) / dn;
  st.counters["started"] = static_cast<double>(started) / dn;
  st.counters["alloc%"] = AllocPct(m);
}
BENCHMARK(BM_MemberCycle)
    ->ArgNames({"summary", "k"})
    ->Args({0, 64})
    ->Args({1, 64})
    ->Args({0, 256})
    ->Args({1, 256})
    ->Iterations(100)
    ->Unit(benchmark::kMicrosecond);

// The same two members, interleaved so that the machine's drift hits both alike: each iteration
// runs one cycle on the u = 0 member, then one on the u = 1 member followed by its Publish, each
// part timed with a steady clock. Counters (means per cycle): cycle_us (u = 0), cycle1_us (u = 1
// before Publish), publish_us, upkeep% = 100 x publish / cycle1 (same member, same cycle) and
// vs0% = 100 x (cycle1 + publish - cycle) / cycle.
void BM_MemberCycleUpkeep(benchmark::State& st) {
  const size_t k = static_cast<size_t>(st.range(0));
  CycleMember& a = TheCycleMember(0);
  CycleMember& b = TheCycleMember(1);
  std::vector<uint32_t> pick(k);
  using Clock = std::chrono::steady_clock;
  double t_a = 0, t_b = 0, t_pub = 0;
  int64_t cycles = 0, refreshed_a = a.f.member->summary().nodes_refreshed();
  for (auto _ : st) {
    const auto t0 = Clock::now();
    Cycle(a, k, pick);
    const auto t1 = Clock::now();
    Cycle(b, k, pick);
    const auto t2 = Clock::now();
    b.f.member->Publish(b.now);
    const auto t3 = Clock::now();
    t_a += std::chrono::duration<double, std::micro>(t1 - t0).count();
    t_b += std::chrono::duration<double, std::micro>(t2 - t1).count();
    t_pub += std::chrono::duration<double, std::micro>(t3 - t2).count();
    ++cycles;
  }
  a.f.member->TakeEvents();
  b.f.member->TakeEvents();
  const double dn = static_cast<double>(std::max<int64_t>(1, cycles));
  st.counters["cycle_us"] = t_a / dn;
  st.counters["cycle1_us"] = t_b / dn;
  st.counters["publish_us"] = t_pub / dn;
  st.counters["upkeep%"] = t_b > 0 ? 100.0 * t_pub / t_b : 0;
  st.counters["vs0%"] = t_a > 0 ? 100.0 * (t_b + t_pub - t_a) / t_a : 0;
  st.counters["refreshed0"] = static_cast<double>(a.f.member->summary().nodes_refreshed() - refreshed_a) / dn;
}
BENCHMARK(BM_MemberCycleUpkeep)->ArgName("k")->Arg(64)->Arg(256)->Iterations(100)->Unit(benchmark::kMicrosecond);

class SteadyStopwatch final : public Stopwatch {
 public:
  int64_t ElapsedNs() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

void BM_FederationRunUpkeep(benchmark::State& st) {
  auto sc = ReadScenario(std::string(ESTUARY_SOURCE_DIR) + "/examples/federation.yaml");
  if (!sc.ok()) {
    st.SkipWithError(sc.status().message().c_str());
    return;
  }
  sc->duration_s = st.range(0) * 3600;
  sc->warmup_s = 0;  // timing only: every hour counts
  auto clusters = LoadMemberClusters(*sc);
  if (!clusters.ok()) {
    st.SkipWithError(clusters.status().message().c_str());
    return;
  }
  const SchedulerConfig* config = nullptr;
  for (const SchedulerConfig& c : sc->configurations) {
    if (c.name == "reclaim-aware") config = &c;
  }
  if (config == nullptr) {
    st.SkipWithError("examples/federation.yaml has no reclaim-aware configuration");
    return;
  }
  const SteadyStopwatch stopwatch;
  FederationMeter meter;
  meter.stopwatch = &stopwatch;
  for (auto _ : st) {
    auto r = RunFederation(*sc, *clusters, nullptr, *config, 1, false, false, &meter);
    if (!r.ok()) {
      st.SkipWithError(r.status().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(r->metrics);
  }
  const double runs = static_cast<double>(std::max<int64_t>(1, st.iterations()));
  st.counters["schedule_s"] = static_cast<double>(meter.total.schedule_ns) / 1e9 / runs;
  st.counters["upkeep_s"] = static_cast<double>(meter.total.upkeep_ns) / 1e9 / runs;
  st.counters["publishes"] = static_cast<double>(meter.total.publishes) / runs;
  st.counters["upkeep%"] = meter.total.schedule_ns > 0
                               ? 100.0 * static_cast<double>(meter.total.upkeep_ns) / static_cast<double>(meter.total.schedule_ns)
                               : 0;
}
BENCHMARK(BM_FederationRunUpkeep)->ArgName("hours")->Arg(12)->Arg(48)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
}  // namespace estuary
