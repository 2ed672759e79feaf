// The exact defragmentation reference (issue 5, item 4: SolveExactDefrag, a two-stage MILP over
// CBC) on seeded random instances: `nodes` 8-GPU nodes, each filled to a uniformly random 2..7
// GPUs with 1-, 2- and 4-GPU tasks (8 cores and 64 GiB per GPU), and `locked`% of the tasks
// locked at random. One iteration solves seeds 1..kSeeds (time limit 60 s each); counters: the
// median and max solve seconds over the seeds, how many were proven optimal, and the mean whole
// free nodes before / after, moves and model size.
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/check.h"
#include "sched/actions/defrag.h"
#include "sched/exact/defrag_milp.h"
#include "sched/exact/random_instance.h"

namespace estuary {
namespace {

constexpr int kSeeds = 5;

void BM_ExactDefrag(benchmark::State& bs) {
  const int n = static_cast<int>(bs.range(0));
  const int locked_pct = static_cast<int>(bs.range(1));
  std::vector<DefragInstance> instances;
  for (int seed = 1; seed <= kSeeds; ++seed) instances.push_back(MakeRandomDefragInstance(n, locked_pct, seed));
  std::vector<double> secs;
  double optimal = 0, before = 0, after = 0, moves = 0, vars = 0, rows = 0;
  for (auto _ : bs) {
    secs.clear();
    optimal = before = after = moves = vars = rows = 0;
    for (const DefragInstance& in : instances) {
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

// Issue 5's optimality line: on 100 random 25-node instances (MakeRandomDefragInstance, seeds
// 1..100, `locked`% locked), how many whole free nodes the IPC planner (one partition) leaves
// short of CBC's optimum. Counters: the share within one node, the share matching exactly, the
// mean and max gap, and the number of instances at gap 0, 1, 2 and 3+.
// `hard` (second argument 1): HardDefragInstanceOptions instead (shared-GPU tasks, CPU-only tasks,
// CPU pressure, two GPU models with pinned tasks), CBC time limit kHardTimeLimitS. There:
//  - an instance CBC does not prove optimal is counted in `not_optimal` and measured against the
//    best assignment CBC found (a lower bound of the optimum: the gap may be understated);
//  - CBC 2.10.8 (Debian) crashes in its preprocessing (CglPreProcess::postProcess, SIGSEGV) on a
//    few of these models, so each solve runs in a forked child; a crashed solve is counted in
//    `cbc_crashed` and the instance left out of the distribution (the shares are over the rest);
//  - the planner runs with move_cpu_only_tasks = false, the exact model's rule (CPU-only tasks may
//    stay on a whole free node); `within_one_move_cpu_pct` is the share with the default (true).
constexpr double kHardTimeLimitS = 10;

// SolveExactDefrag in a forked child (a crash of the solver kills the child only). nullopt: the
// child died.
std::optional<ExactDefragResult> SolveIsolated(const DefragInstance& in, const ExactDefragOptions& eo) {
  int fd[2];
  ESTUARY_CHECK(pipe(fd) == 0);
  const pid_t pid = fork();
  ESTUARY_CHECK(pid >= 0);
  if (pid == 0) {
    close(fd[0]);
    auto r = SolveExactDefrag(in.state, in.nodes, in.locked, eo);
    const int64_t out[5] = {r.ok() ? 1 : 0, r->optimal ? 1 : 0, r->whole_free_before, r->whole_free_after,
                            r->moved_tasks};
    const double secs = r->solve_seconds;
    ssize_t w = write(fd[1], out, sizeof out);
    w += write(fd[1], &secs, sizeof secs);
    _exit(w == sizeof out + sizeof secs ? 0 : 1);
  }
  close(fd[1]);
  int64_t out[5] = {};
  double secs = 0;
  ssize_t got = read(fd[0], out, sizeof out);
  if (got == sizeof out) got += read(fd[0], &secs, sizeof secs);
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != static_cast<ssize_t>(sizeof out + sizeof secs) || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      out[0] != 1) {
    return std::nullopt;
  }
  ExactDefragResult r;
  r.optimal = out[1] != 0;
  r.whole_free_before = out[2];
  r.whole_free_after = out[3];
  r.moved_tasks = out[4];
  r.solve_seconds = secs;
  return r;
}

void BM_IpcGapVsExact(benchmark::State& bs) {
  const int locked_pct = static_cast<int>(bs.range(0));
  const bool hard = bs.range(1) != 0;
  constexpr int kInstances = 100;
  std::array<int, 4> by_gap{};
  double sum = 0, max = 0, plan_s = 0, cbc_s = 0, cbc_max_s = 0, not_optimal = 0, opt_free = 0, ipc_free = 0,
         before = 0, moves = 0, crashed = 0, within_move_cpu = 0;
  int measured = 0;
  for (auto _ : bs) {
    by_gap = {};
    sum = max = plan_s = cbc_s = cbc_max_s = not_optimal = opt_free = ipc_free = before = moves = crashed = 0;
    within_move_cpu = 0;
    measured = 0;
    for (int seed = 1; seed <= kInstances; ++seed) {
      const DefragInstance in = hard ? MakeRandomDefragInstance(HardDefragInstanceOptions(25, locked_pct),
                                                                static_cast<uint64_t>(seed))
                                     : MakeRandomDefragInstance(25, locked_pct, static_cast<uint64_t>(seed));
      std::optional<ExactDefragResult> exact;
      if (hard) {
        ExactDefragOptions eo;
        eo.time_limit_s = kHardTimeLimitS;
        exact = SolveIsolated(in, eo);
        if (!exact) {
          ++crashed;
          continue;
        }
      } else {
        auto r = SolveExactDefrag(in.state, in.nodes, in.locked);
        ESTUARY_CHECK(r.ok() && r->optimal);
        exact = *r;
      }
      ++measured;
      not_optimal += exact->optimal ? 0 : 1;
      cbc_s += exact->solve_seconds;
      cbc_max_s = std::max(cbc_max_s, exact->solve_seconds);
      opt_free += static_cast<double>(exact->whole_free_after);
      before += static_cast<double>(exact->whole_free_before);
      DefragOptions o;
      o.partition_nodes = 0;
      if (hard) {
        o.move_cpu_only_tasks = true;
        const DefragPlan moving = DefragAction::Plan(in.state, in.locked, o);
        within_move_cpu += moving.whole_free_after + 1 >= exact->whole_free_after;
        o.move_cpu_only_tasks = false;
      }
      const auto start = std::chrono::steady_clock::now();
      const DefragPlan plan = DefragAction::Plan(in.state, in.locked, o);
      plan_s = std::max(plan_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      const int64_t gap = exact->whole_free_after - plan.whole_free_after;
      ESTUARY_CHECK(gap >= 0 || !exact->optimal);
      ipc_free += static_cast<double>(plan.whole_free_after);
      moves += static_cast<double>(plan.moves.size());
      ++by_gap[static_cast<size_t>(std::clamp<int64_t>(gap, 0, 3))];
      sum += static_cast<double>(gap);
      max = std::max(max, static_cast<double>(gap));
    }
  }
  const double m = std::max(measured, 1);
  bs.counters["measured"] = measured;
  bs.counters["cbc_crashed"] = crashed;
  bs.counters["within_one_pct"] = 100.0 * (by_gap[0] + by_gap[1]) / m;
  bs.counters["within_one_move_cpu_pct"] = hard ? 100.0 * within_move_cpu / m : 0;
  bs.counters["exact_pct"] = 100.0 * by_gap[0] / m;
  bs.counters["mean_gap"] = sum / m;
  bs.counters["max_gap"] = max;
  bs.counters["gap0"] = by_gap[0];
  bs.counters["gap1"] = by_gap[1];
  bs.counters["gap2"] = by_gap[2];
  bs.counters["gap3plus"] = by_gap[3];
  bs.counters["ipc_plan_max_s"] = plan_s;
  bs.counters["cbc_mean_s"] = cbc_s / m;
  bs.counters["cbc_max_s"] = cbc_max_s;
  bs.counters["not_optimal"] = not_optimal;
  bs.counters["free_before"] = before / m;  // means over the measured instances
  bs.counters["opt_free"] = opt_free / m;
  bs.counters["ipc_free"] = ipc_free / m;
  bs.counters["ipc_moves"] = moves / m;
}
BENCHMARK(BM_IpcGapVsExact)
    ->ArgsProduct({{0, 40}, {0, 1}})
    ->ArgNames({"locked%", "hard"})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
}  // namespace estuary
