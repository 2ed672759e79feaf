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
//
// BM_DefragPlanChurn: the same cluster fragmented by a workload over simulated time instead
// (ChurnFill, untimed): tasks arrive and depart and are placed by the engine's real placement
// (a Session with the built-in fgd policy, AllocateAction::TryStart, one single-task job per task).
//   Mix (share of tasks): 1-GPU 40%, shared-GPU (gpu_milli < 1000) 30%, CPU-only 8%, 2-GPU 8%,
//   4-GPU 7%, 8-GPU 7%. Within a class, a task is a row of the openb trace
//   (openb_pod_list_default.csv: its CPU, memory and GPU request, GPU model pins dropped — the
//   generated cluster has other models) drawn uniformly, and its lifetime is that row's
//   deletion_time - creation_time (at least 1 s; heavy-tailed: median 540 s, p99 ~28 h).
//   Process: arrivals at time 0 until 90% of the GPU milli is allocated; then departures in time
//   order, and after each one arrivals at that time until allocation is back at 90% (a task that
//   fits nowhere is dropped; 1,000 drops in a row end the refill). The churn runs until 3x the
//   initial population has departed. The running tasks are then bound into a fresh copy of the
//   empty cluster (a snapshot: jobs and task ids in order of arrival), 40% locked (Rng(7)).
// Counters as BM_DefragPlan, plus tasks (running), churn (departures), dropped (arrivals that fit
// nowhere) and shared (running shared-GPU tasks).
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <memory>
#include <queue>
#include <span>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/rng.h"
#include "full_cluster.h"
#include "sched/actions/allocate.h"
#include "sched/actions/defrag.h"
#include "sched/framework/session.h"
#include "sched/plugins/fgd/typical_tasks.h"
#include "sched/plugins/register.h"
#include "sim/cluster/generator.h"
#include "sim/trace/openb_reader.h"

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

// The churned snapshot (see the header comment).
struct Churned {
  ClusterState state;
  std::vector<char> locked;
  int64_t churn = 0, dropped = 0, shared = 0;
  explicit Churned(int64_t total_gpus) {
    GeneratorOptions go;
    go.total_gpus = total_gpus;
    const ClusterState empty = std::move(GenerateCluster(go)).value();
    // The openb rows by class: 0 1-GPU, 1 shared, 2 CPU-only, 3 2-GPU, 4 4-GPU, 5 8-GPU.
    const std::string path = std::string(ESTUARY_SHARED_DIR) + "/traces/openb/openb_pod_list_default.csv";
    auto rows = ReadOpenbTasks(path);
    ESTUARY_CHECK(rows.ok());
    struct Kind {
      TaskRequest req;
      int64_t life = 1;
    };
    std::vector<Kind> cls[6];
    std::vector<TaskRequest> all;
    for (const OpenbTaskRow& r : rows->rows) {
      Kind k;
      k.req.cpu_milli = r.cpu_milli;
      k.req.mem_mib = r.mem_mib;
      k.req.gpu_count = r.num_gpu;
      k.req.gpu_milli = r.num_gpu > 0 ? r.gpu_milli : 0;
      if (r.creation_time && r.deletion_time) k.life = std::max<int64_t>(1, *r.deletion_time - *r.creation_time);
      const int c = r.num_gpu == 0 ? 2 : r.gpu_milli < kMilliPerGpu ? 1 : r.num_gpu == 1 ? 0 : r.num_gpu == 2 ? 3
                  : r.num_gpu == 4 ? 4 : r.num_gpu == 8 ? 5 : -1;
      if (c < 0) continue;
      cls[c].push_back(k);
      all.push_back(k.req);
    }
    for (const auto& c : cls) ESTUARY_CHECK(!c.empty());
    constexpr double kCum[6] = {0.40, 0.70, 0.78, 0.86, 0.93, 1.0};
    const TypicalTasks typical = TypicalTasks::FromWorkload(all);

    ClusterState s = empty;
    PluginContext ctx{&s, &typical};
    SessionOptions so;
    so.policy = std::move(OpenbPolicy("fgd")).value();
    so.seed = 11;
    auto session = std::move(Session::Open(s, BuiltinRegistry(), ctx, so)).value();
    Rng rng(5);
    using Ev = std::pair<int64_t, uint32_t>;  // (departure time, task id)
    std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> departures;
    const int64_t target = s.total_gpu_milli() * 90 / 100;
    auto refill = [&](int64_t now) {
      int64_t misses = 0;
      while (s.allocated_gpu_milli() < target && misses < 1000) {
        const double x = rng.UniformDouble();
        int c = 0;
        while (x >= kCum[c] && c < 5) ++c;
        const Kind& k = cls[c][rng.Uniform(cls[c].size())];
        const JobId job = s.AddJob(JobSpec());
        const TaskId t = s.AddTask(job, std::string(), k.req);
        if (AllocateAction::TryStart(*session, s, job).started) {
          departures.push({now + k.life, t.value()});
          misses = 0;
        } else {
          s.Finish(t);
          ++dropped;
          ++misses;
        }
      }
    };
    refill(0);
    const int64_t population = static_cast<int64_t>(departures.size());
    while (churn < 3 * population && !departures.empty()) {
      const auto [now, t] = departures.top();
      departures.pop();
      s.Finish(TaskId(t));
      ++churn;
      refill(now);
    }
    // The snapshot: the running tasks bound into a fresh copy of the empty cluster.
    state = empty;
    for (const Task& t : s.tasks()) {
      if (t.state != TaskState::kBound) continue;
      const TaskId nt = state.AddTask(state.AddJob(JobSpec()), std::string(), t.req);
      state.Bind(nt, t.node, t.gpus);
      shared += t.req.IsSharedGpu();
    }
    ESTUARY_CHECK(state.CheckInvariants().ok());
    Rng lock(7);
    locked.assign(state.tasks().size(), 0);
    for (char& l : locked) l = lock.UniformDouble() < 0.4;
  }
};

Churned& ChurnedOf(int64_t gpus) {
  static std::map<int64_t, std::unique_ptr<Churned>> cache;
  auto& c = cache[gpus];
  if (!c) c = std::make_unique<Churned>(gpus);
  return *c;
}

Fragmented& ClusterOf(int64_t gpus) {
  static std::map<int64_t, std::unique_ptr<Fragmented>> cache;
  auto& c = cache[gpus];
  if (!c) c = std::make_unique<Fragmented>(gpus);
  return *c;
}

void PlanAndReport(benchmark::State& st, const ClusterState& state, const std::vector<char>& locked);

// The plan of `state` with options `o`, each iteration timed (steady clock; the last into *secs).
DefragPlan TimedPlan(benchmark::State& st, const ClusterState& state, std::span<const char> locked,
                     const DefragOptions& o, double* secs) {
  DefragPlan p;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    p = DefragAction::Plan(state, locked, o);
    *secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    benchmark::DoNotOptimize(p);
  }
  return p;
}

// Untimed: whether `p` applies to `state` move by move (CanBind before each Bind) and keeps every
// invariant.
bool Applies(const ClusterState& state, const DefragPlan& p) {
  ClusterState copy = state;
  for (const DefragMove& m : p.moves) {
    copy.Unbind(m.task);
    if (!copy.CanBind(m.task, m.to, m.gpus)) return false;
    copy.Bind(m.task, m.to, m.gpus);
  }
  return copy.CheckInvariants().ok();
}

void BM_DefragPlan(benchmark::State& st) {
  Fragmented& f = ClusterOf(st.range(0));
  PlanAndReport(st, f.state, f.locked);
}

void BM_DefragPlanChurn(benchmark::State& st) {
  Churned& f = ChurnedOf(st.range(0));
  PlanAndReport(st, f.state, f.locked);
  st.counters["tasks"] = static_cast<double>(f.state.tasks().size());
  st.counters["churn"] = static_cast<double>(f.churn);
  st.counters["dropped"] = static_cast<double>(f.dropped);
  st.counters["shared"] = static_cast<double>(f.shared);
  int64_t locked = 0;
  for (char l : f.locked) locked += l;
  st.counters["locked"] = static_cast<double>(locked);
}
BENCHMARK(BM_DefragPlanChurn)
    ->ArgsProduct({{38852, 77704, 155410}, {1, 2}, {0}})
    ->Args({155410, 1, 1})
    ->Args({155410, 1, 2})
    ->Args({155410, 1, 4})
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->UseRealTime();

// One plan of `state` with the default options and st.range(1) threads, timed; then validated.
void PlanAndReport(benchmark::State& st, const ClusterState& state, const std::vector<char>& locked) {
  struct {
    const ClusterState& state;
    const std::vector<char>& locked;
  } f{state, locked};
  DefragOptions o;
  o.threads = static_cast<int32_t>(st.range(1));
  if (st.range(2) > 0) o.variants = static_cast<int32_t>(st.range(2));  // 0: the default
  double secs = 0;
  const DefragPlan p = TimedPlan(st, f.state, f.locked, o, &secs);
  st.counters["valid"] = Applies(f.state, p);
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
    ->Args({38852, 1, 0})
    ->Args({77704, 1, 0})
    ->Args({155410, 1, 0})
    ->Args({155410, 2, 0})
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->UseRealTime();

// An evacuation (a drain by migration: DefragOptions::evacuate, what `POST /v1/nodes/{name}/
// evacuate` and the engine's assembled holds plan) of st.range(1) nodes of the fragmented cluster
// of st.range(0) GPUs: the first nodes, in id order, that run at least two tasks (none locked
// here: every task may move). Counters: plan_s, moves, vacated (of the listed nodes), tasks (on
// the listed nodes), valid (as BM_DefragPlan).
void BM_EvacuatePlan(benchmark::State& st) {
  const Fragmented& f = ClusterOf(st.range(0));
  DefragOptions o;
  int64_t tasks = 0;
  for (const Node& n : f.state.nodes()) {
    if (static_cast<int64_t>(o.evacuate.size()) >= st.range(1)) break;
    if (n.tasks.size() < 2) continue;
    o.evacuate.push_back(n.id);
    tasks += static_cast<int64_t>(n.tasks.size());
  }
  double secs = 0;
  const DefragPlan p = TimedPlan(st, f.state, {}, o, &secs);
  st.counters["valid"] = Applies(f.state, p);
  st.counters["plan_s"] = secs;
  st.counters["moves"] = static_cast<double>(p.moves.size());
  st.counters["vacated"] = static_cast<double>(p.vacated.size());
  st.counters["tasks"] = static_cast<double>(tasks);
}

BENCHMARK(BM_EvacuatePlan)
    ->Args({155410, 1})
    ->Args({155410, 8})
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->UseRealTime();

// A plan on the generated cluster of 155,410 GPUs filled through the engine (bench/full_cluster.h:
// jobs started until 400 in a row are rejected) with single tasks of 1 GPU (60%) or a whole node
// (40%), the hyperscale example's mix of small jobs, after which every 100th job started ends —
// a nearly full cluster (alloc% ~99), where few candidates can be vacated at all. Default
// options, 1 thread. Counters as BM_DefragPlan.
void BM_DefragPlanFull(benchmark::State& st) {
  static const std::unique_ptr<FullCluster> f = [] {
    std::unique_ptr<FullCluster> full = FillCluster(
        GeneratedCluster(), EngineConfig{},
        [](uint32_t id, Rng& rng) {
          EngineJob j;
          j.id = id;
          j.name = "j" + std::to_string(id);
          const int gpus = rng.Uniform(10) < 6 ? 1 : 8;
          j.per_replica.gpu_count = gpus;
          j.per_replica.gpu_milli = kMilliPerGpu;
          j.per_replica.cpu_milli = 8000 * gpus;
          j.per_replica.mem_mib = 64 * 1024 * gpus;
          return j;
        },
        FillOptions{true, 400, 0});
    for (size_t i = 0; i < full->running.size(); i += 100) full->engine->Finish(full->running[i], full->now);
    return full;
  }();
  PlanAndReport(st, f->engine->state(), {});
}
BENCHMARK(BM_DefragPlanFull)->Args({155410, 1, 0})->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace
}  // namespace estuary
