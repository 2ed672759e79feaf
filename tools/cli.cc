#include "tools/cli.h"
#include "tools/client_cmds.h"
#include "tools/completion.h"
#include "tools/history_cmds.h"
#include "tools/service_cmds.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "common/check.h"
#include "sched/actions/defrag.h"
#include "sched/plugins/register.h"
#include "sim/cluster/cluster_spec.h"
#include "sim/cluster/generator.h"
#include "sim/openb.h"
#include "sim/outputs.h"
#include "sim/replay.h"
#include "sim/scenario.h"
#include "sim/federation_setup.h"
#include "sim/federation_sim.h"
#include "sim/simulate.h"
#include "sim/trace/curve.h"
#include "sim/trace/csv_fields.h"
#include "sim/trace/openb_reader.h"
#include "sim/trace/plan_reader.h"
#include "sim/trace/snapshot.h"
#include "estuary_version.h"

namespace estuary {
namespace {

int Fail(const Status& s) {
  std::fprintf(stderr, "estuary: %s\n", s.message().c_str());
  return s.ExitCode();
}

// "42-51" or "42,43,44" (or one number).
StatusOr<std::vector<uint64_t>> ParseSeeds(const std::string& text) {
  auto bad = [&](const std::string& why) { return InvalidArgument("--seeds '" + text + "': " + why); };
  auto num = [&](const std::string& s) -> StatusOr<uint64_t> {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 18) {
      return bad("'" + s + "' is not a non-negative integer");
    }
    return static_cast<uint64_t>(std::stoull(s));
  };
  std::vector<uint64_t> seeds;
  // (A leading '-' is a negative number, not a range: it is named whole.)
  if (auto dash = text.find('-'); dash != std::string::npos && dash > 0 && text.find(',') == std::string::npos) {
    auto a = num(text.substr(0, dash));
    if (!a.ok()) return a.status();
    auto b = num(text.substr(dash + 1));
    if (!b.ok()) return b.status();
    if (*b < *a) return bad("range end is below its start");
    if (*b - *a >= 10000) return bad("more than 10000 seeds");
    for (uint64_t s = *a; s <= *b; ++s) seeds.push_back(s);
    return seeds;
  }
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    auto v = num(part);
    if (!v.ok()) return v.status();
    if (std::find(seeds.begin(), seeds.end(), *v) != seeds.end()) return bad("seed " + part + " is given twice");
    seeds.push_back(*v);
  }
  if (seeds.empty()) return bad("no seeds");
  return seeds;
}

StatusOr<std::vector<std::string>> ParsePolicies(const std::string& text) {
  if (text == "all") return OpenbPolicyNames();
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    auto p = OpenbPolicy(part);
    if (!p.ok()) return InvalidArgument("--policy: " + p.status().message());
    out.push_back(part);
  }
  if (out.empty()) return InvalidArgument("--policy: empty");
  return out;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Flags both subcommands share.
struct CommonFlags {
  std::string nodes, pods, policy, seeds, tie_break = "node-order", out;
  bool check_invariants = false;
};

struct OpenbFlags : CommonFlags {
  OpenbFlags() { seeds = "42-51"; }
  std::string reference;
  double tune = 1.3;
  bool migrate_on_failure = false;
  int64_t max_moves = 2;
  int64_t max_chain_depth = 0;
};

// What both subcommands read before they run: parsed flags, the cluster and the task list.
struct Inputs {
  std::vector<uint64_t> seeds;
  std::vector<std::string> policies;
  TieBreak tie = TieBreak::kNodeOrder;
  ClusterState cluster;
  OpenbTaskList tasks;
  std::vector<TaskRequest> reqs;
};

// Validates the shared flags, creates --out and reads the node and task lists.
StatusOr<Inputs> LoadInputs(const CommonFlags& f) {
  Inputs in;
  auto seeds = ParseSeeds(f.seeds);
  if (!seeds.ok()) return seeds.status();
  in.seeds = std::move(seeds).value();
  auto policies = ParsePolicies(f.policy);
  if (!policies.ok()) return policies.status();
  in.policies = std::move(policies).value();
  auto tie = ParseTieBreak(f.tie_break);
  if (!tie.ok()) return InvalidArgument("--tie-break: " + tie.status().message());
  in.tie = *tie;
  if (!f.out.empty()) {
    Status st = MakeOutputDir(f.out);
    if (!st.ok()) return InvalidArgument("--out: " + st.message());
  }
  auto nodes = ReadOpenbNodes(f.nodes);
  if (!nodes.ok()) return nodes.status();
  auto cluster = BuildCluster(*nodes, f.nodes);
  if (!cluster.ok()) return cluster.status();
  in.cluster = std::move(cluster).value();
  auto tasks = ReadOpenbTasks(f.pods);
  if (!tasks.ok()) return tasks.status();
  in.tasks = std::move(tasks).value();
  auto reqs = OpenbRequests(in.tasks, in.cluster.models());
  if (!reqs.ok()) return reqs.status();
  in.reqs = std::move(reqs).value();
  return in;
}

int RunOpenbCommand(const OpenbFlags& f) {
  if (!(f.tune > 0) || f.tune > 10) return Fail(InvalidArgument("--tune " + std::to_string(f.tune) + ": must be in (0, 10]"));
  if (f.max_moves < 1 || f.max_moves > MigrateToFit::kMaxMoves) {
    return Fail(InvalidArgument("--max-moves " + std::to_string(f.max_moves) + ": must be in [1, " +
                                std::to_string(MigrateToFit::kMaxMoves) + "]"));
  }
  if (f.max_chain_depth < 0 || f.max_chain_depth > MigrateToFit::kMaxChainDepth) {
    return Fail(InvalidArgument("--max-chain-depth " + std::to_string(f.max_chain_depth) + ": must be in [0, " +
                                std::to_string(MigrateToFit::kMaxChainDepth) + "]"));
  }
  auto loaded = LoadInputs(f);
  if (!loaded.ok()) return Fail(loaded.status());
  Inputs& in = *loaded;
  if (in.cluster.total_gpu_milli() == 0) return Fail(InvalidArgument(f.nodes + ": the cluster has no GPUs"));
  OpenbRunInfo info;
  info.nodes_path = f.nodes;
  info.pods_path = f.pods;
  info.trace = OpenbTraceName(f.pods);
  std::optional<PublishedOpenb> published;
  if (!f.reference.empty()) {
    auto p = ReadPublishedOpenb(f.reference, info.trace);
    if (!p.ok()) return Fail(p.status());
    published = std::move(p).value();
  }

  OpenbWorkload w;
  w.cluster = std::move(in.cluster);
  w.tasks = std::move(in.reqs);
  for (const auto& r : in.tasks.rows) {
    w.names.push_back(r.name);
    w.qos.push_back(r.qos);
  }
  w.typical = TypicalTasks::FromWorkload(w.tasks);
  info.trace_tasks = static_cast<int64_t>(w.tasks.size());
  info.typical_specs = static_cast<int64_t>(w.typical.tasks.size());
  info.distinct_specs = w.typical.distinct_specs;
  info.typical_coverage = w.typical.covered;

  const bool tty = isatty(STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  std::vector<OpenbResult> results;
  for (const std::string& policy : in.policies) {
    OpenbOptions o;
    o.policy = policy;
    o.tie_break = in.tie;
    o.seeds = in.seeds;
    o.tune = f.tune;
    o.check_invariants = f.check_invariants;
    o.migrate_on_failure = f.migrate_on_failure;
    o.migrate.max_moves = static_cast<int32_t>(f.max_moves);
    o.migrate.max_chain_depth = static_cast<int32_t>(f.max_chain_depth);
    if (tty) {
      o.progress = [&](size_t si, size_t done, size_t total) {
        if (done % 512 == 0 || done == total) {
          std::fprintf(stderr, "\r%s: seed %zu/%zu, task %zu/%zu   ", policy.c_str(), si + 1, in.seeds.size(), done, total);
        }
      };
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto r = RunOpenb(w, o);
    if (!r.ok()) return Fail(r.status());
    r->wall_seconds = Seconds(t0);
    results.push_back(std::move(r).value());
  }
  if (tty) std::fprintf(stderr, "\r%*s\r", 60, "");
  const double wall = Seconds(start);

  std::printf("openb %s trace, %zu seeds, tune %.2f, tie-break %s\n", info.trace.c_str(), in.seeds.size(), f.tune,
              std::string(TieBreakName(in.tie)).c_str());
  std::printf("%-15s %10s %12s %9s %10s %8s\n", "policy", "alloc %", "published %", "delta pp", "frag %", "wall s");
  for (const OpenbResult& r : results) {
    std::optional<double> pub = published ? published->EndMean(r.policy, in.seeds) : std::nullopt;
    std::printf("%-15s %10.2f %12s %9s %10.2f %8.3f\n", r.policy.c_str(), r.gpu_alloc_pct_mean,
                pub ? std::to_string(*pub).substr(0, std::to_string(*pub).find('.') + 3).c_str() : "-",
                pub ? (std::ostringstream() << std::showpos << std::fixed << std::setprecision(2)
                                            << r.gpu_alloc_pct_mean - *pub).str().c_str()
                    : "-",
                r.frag_ratio_pct_mean, r.wall_seconds);
  }
  if (!f.out.empty()) {
    auto html = WriteOpenbOutputs(f.out, results, info, published ? &*published : nullptr, wall);
    if (!html.ok()) return Fail(html.status());
    std::printf("summary: %s/summary.json\nreport:  %s\n", f.out.c_str(), html->c_str());
  }
  return 0;
}

struct ReplayFlags : CommonFlags {
  ReplayFlags() { seeds = "42"; }
  int64_t sample_interval = 3600;
  double arrival_scale = 1.0;
};

int RunReplayCommand(const ReplayFlags& f) {
  if (f.sample_interval <= 0 || f.sample_interval > 1'000'000'000'000) {
    return Fail(InvalidArgument("--sample-interval " + std::to_string(f.sample_interval) +
                                ": must be a number of seconds in [1, 10^12]"));
  }
  if (!(f.arrival_scale > 0) || f.arrival_scale > 1000) {
    return Fail(InvalidArgument("--arrival-scale " + std::to_string(f.arrival_scale) + ": must be in (0, 1000]"));
  }
  auto loaded = LoadInputs(f);
  if (!loaded.ok()) return Fail(loaded.status());
  Inputs& in = *loaded;
  auto w = MakeReplayWorkload(std::move(in.cluster), in.tasks, std::move(in.reqs), f.arrival_scale);
  if (!w.ok()) return Fail(w.status());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<ReplayResult>> results;
  std::printf("replay %s, %zu tasks, tie-break %s\n", OpenbTraceName(f.pods).c_str(), w->tasks.size(),
              std::string(TieBreakName(in.tie)).c_str());
  std::printf("%-15s %6s %12s %12s %12s %12s %12s\n", "policy", "seed", "alloc mean %", "alloc max %", "pending max",
              "wait p50 s", "wait p99 s");
  for (const std::string& policy : in.policies) {
    results.emplace_back();
    for (uint64_t seed : in.seeds) {
      ReplayOptions o;
      o.policy = policy;
      o.tie_break = in.tie;
      o.seed = seed;
      o.sample_interval = f.sample_interval;
      o.check_invariants = f.check_invariants;
      if (isatty(STDERR_FILENO)) {
        o.progress = [&](size_t done, size_t total) {
          if (done % 512 == 0 || done == total) {
            std::fprintf(stderr, "\r%s: seed %llu, task %zu/%zu   ", policy.c_str(),
                         static_cast<unsigned long long>(seed), done, total);
          }
        };
      }
      auto r = RunReplay(*w, o);
      if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\r%*s\r", 60, "");
      if (!r.ok()) return Fail(r.status());
      std::printf("%-15s %6llu %12.2f %12.2f %12lld %12.0f %12.0f\n", policy.c_str(),
                  static_cast<unsigned long long>(seed), r->gpu_alloc_pct_mean, r->gpu_alloc_pct_max,
                  static_cast<long long>(r->pending_max_count), r->wait_s_p50, r->wait_s_p99);
      results.back().push_back(std::move(r).value());
    }
  }
  const double wall = Seconds(start);
  if (!f.out.empty()) {
    auto html = WriteReplayOutputs(f.out, OpenbTraceName(f.pods), results, wall);
    if (!html.ok()) return Fail(html.status());
    std::printf("summary: %s/summary.json\nreport:  %s\n", f.out.c_str(), html->c_str());
  }
  return 0;
}

// One line describing a cluster: nodes, GPUs, models, and the domains per level of each plane.
std::string DescribeCluster(const ClusterState& s) {
  std::ostringstream o;
  o << s.num_nodes() << " nodes, " << s.total_gpu_milli() / kMilliPerGpu << " GPUs, " << s.models().size()
    << " GPU models";
  for (const Plane& p : s.topology().planes()) {
    o << "; plane " << p.name << ":";
    for (size_t l = 0; l < p.levels.size(); ++l) {
      o << " " << s.topology().DomainsAt(p.id, static_cast<int>(l)).size() << " " << p.levels[l];
    }
  }
  return o.str();
}

struct ClusterFlags {
  GeneratorOptions gen;
  std::string nodes_per_asw = "32-64", models, out, spec;
};

int RunClusterGenerate(ClusterFlags& f) {
  const auto dash = f.nodes_per_asw.find('-');
  try {
    if (dash == std::string::npos) throw std::invalid_argument("no dash");
    size_t a = 0, b = 0;
    f.gen.nodes_per_asw_min = std::stoi(f.nodes_per_asw.substr(0, dash), &a);
    f.gen.nodes_per_asw_max = std::stoi(f.nodes_per_asw.substr(dash + 1), &b);
    if (a != dash || b != f.nodes_per_asw.size() - dash - 1) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    return Fail(InvalidArgument("--nodes-per-asw '" + f.nodes_per_asw + "': expected MIN-MAX, e.g. 32-64"));
  }
  if (!f.models.empty()) {
    auto mix = ParseModelMix(f.models);
    if (!mix.ok()) return Fail(mix.status());
    f.gen.models = std::move(mix).value();
  }
  auto s = GenerateCluster(f.gen);
  if (!s.ok()) return Fail(s.status());
  Status st = WriteTextFile(f.out, WriteClusterSpec(*s));
  if (!st.ok()) return Fail(InvalidArgument("--out: " + st.message()));
  std::printf("%s\nwrote %s\n", DescribeCluster(*s).c_str(), f.out.c_str());
  return 0;
}

int RunClusterCheck(const ClusterFlags& f) {
  auto s = ReadClusterSpec(f.spec);
  if (!s.ok()) return Fail(s.status());
  std::printf("%s\n", DescribeCluster(*s).c_str());
  return 0;
}

struct SimulateFlags {
  std::string scenario, out;
  std::vector<std::string> table;  // --table: metrics to print as a table (rows) by configuration (columns)
  std::string seeds;  // --seeds: replaces the scenario's seeds (ParseSeeds' forms); empty: the scenario's
  std::vector<std::string> only;  // --configurations: these of the scenario's, in this order; empty: all
  bool check_invariants = false;
  bool events = false;  // record job events (job_events.csv)
  int threads = 0;  // 0: one per hardware thread
};

// `simulate --table`: one row per metric of `metrics`, one column per configuration, each cell the
// mean over the seeds that have the metric ("-" where none has it). A metric no configuration has
// is bad input naming the flag.
StatusOr<std::string> SimulateTable(const std::vector<std::vector<SimulateResult>>& results,
                                    const std::vector<std::string>& metrics) {
  size_t name_width = 6;
  for (const std::string& m : metrics) name_width = std::max(name_width, m.size());
  std::ostringstream o;
  o << std::left << std::setw(static_cast<int>(name_width)) << "metric";
  std::vector<int> widths;
  for (const auto& per_seed : results) {
    widths.push_back(static_cast<int>(std::max<size_t>(12, per_seed.front().configuration.size() + 2)));
    o << std::right << std::setw(widths.back()) << per_seed.front().configuration;
  }
  o << "\n";
  for (const std::string& m : metrics) {
    bool any = false;
    std::ostringstream row;
    row << std::left << std::setw(static_cast<int>(name_width)) << m << std::right;
    for (size_t c = 0; c < results.size(); ++c) {
      double sum = 0;
      int n = 0;
      for (const SimulateResult& r : results[c]) {
        if (auto it = r.metrics.find(m); it != r.metrics.end()) {
          sum += it->second;
          ++n;
        }
      }
      std::ostringstream cell;
      if (n == 0) {
        cell << "-";
      } else {
        any = true;
        const double mean = sum / n;
        cell << std::fixed << std::setprecision(std::abs(mean) >= 1000 || mean == std::floor(mean) ? 0 : 2) << mean;
      }
      row << std::setw(widths[c]) << cell.str();
    }
    if (!any) {
      return InvalidArgument("--table: no configuration has the metric '" + m +
                             "' (summary.json lists the metrics; docs/simulate.md defines them)");
    }
    o << row.str() << "\n";
  }
  return o.str();
}

// `simulate --seeds` and `--configurations`: the scenario's seeds replaced, its configurations
// narrowed to the named ones (in the flag's order). An unknown or repeated name, or bad seeds, is
// bad input naming the flag.
Status NarrowScenario(const SimulateFlags& f, Scenario& sc) {
  if (!f.seeds.empty()) {
    auto seeds = ParseSeeds(f.seeds);
    if (!seeds.ok()) return seeds.status();
    sc.seeds = std::move(*seeds);
  }
  if (f.only.empty()) return Status::Ok();
  std::vector<SchedulerConfig> kept;
  for (const std::string& name : f.only) {
    const auto it = std::find_if(sc.configurations.begin(), sc.configurations.end(),
                                 [&](const SchedulerConfig& c) { return c.name == name; });
    if (it == sc.configurations.end()) {
      std::string known;
      for (const SchedulerConfig& c : sc.configurations) known += (known.empty() ? "" : ", ") + c.name;
      return InvalidArgument("--configurations: " + f.scenario + " has no configuration '" + name + "' (it has: " +
                             known + ")");
    }
    if (std::any_of(kept.begin(), kept.end(), [&](const SchedulerConfig& c) { return c.name == name; })) {
      return InvalidArgument("--configurations: '" + name + "' is named twice");
    }
    kept.push_back(*it);
  }
  sc.configurations = std::move(kept);
  return Status::Ok();
}

int RunSimulateCommand(const SimulateFlags& f) {
  if (!f.out.empty()) {
    Status st = MakeOutputDir(f.out);
    if (!st.ok()) return Fail(InvalidArgument("--out: " + st.message()));
  }
  // A service's exported history (docs/history.md): replayed exactly.
  if (IsHistoryFile(f.scenario)) {
    // One recorded run, replayed exactly: nothing to choose among or tabulate.
    const char* flag = !f.seeds.empty()   ? "--seeds"
                       : !f.only.empty()  ? "--configurations"
                       : !f.table.empty() ? "--table"
                                          : nullptr;
    if (flag != nullptr) {
      return Fail(InvalidArgument(std::string(flag) + ": " + f.scenario +
                                  " is a service history (one recorded run, replayed exactly); the flag is for scenarios"));
    }
    return RunHistoryReplay(f.scenario, f.out);
  }
  auto sc = ReadScenario(f.scenario);
  if (!sc.ok()) return Fail(sc.status());
  Status narrowed = NarrowScenario(f, *sc);
  if (!narrowed.ok()) return Fail(narrowed);
  // A federation scenario: the members' clusters (and their union for `merged`).
  std::vector<ClusterState> member_clusters;
  std::optional<ClusterState> merged;
  StatusOr<ClusterState> cluster = ClusterState();
  if (sc->federation.enabled) {
    auto mc = LoadMemberClusters(*sc);
    if (!mc.ok()) return Fail(mc.status());
    member_clusters = std::move(*mc);
    std::vector<std::string> names;
    std::vector<const ClusterState*> parts;
    for (size_t m = 0; m < member_clusters.size(); ++m) {
      names.push_back(sc->federation.members[m].name);
      parts.push_back(&member_clusters[m]);
    }
    auto u = MergeClusters(names, parts);
    if (!u.ok()) return Fail(u.status());
    merged = std::move(*u);
  } else {
    cluster = LoadScenarioCluster(*sc);
    if (!cluster.ok()) return Fail(cluster.status());
  }
  const auto start = std::chrono::steady_clock::now();
  // Every (configuration, seed) run is independent (its own copy of the cluster): they run on
  // `threads` threads; results and the first error (in configuration, seed order) do not depend
  // on the thread count.
  const size_t nc = sc->configurations.size(), ns = sc->seeds.size();
  std::vector<std::optional<StatusOr<SimulateResult>>> runs(nc * ns);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k = next++; k < runs.size(); k = next++) {
      const SchedulerConfig& config = sc->configurations[k / ns];
      runs[k] = sc->federation.enabled
                    ? RunFederation(*sc, member_clusters, &*merged, config, sc->seeds[k % ns], f.check_invariants, f.events)
                    : RunScenario(*sc, *cluster, config, sc->seeds[k % ns], f.check_invariants, f.events);
    }
  };
  const size_t threads = std::min<size_t>(
      runs.size(), f.threads > 0 ? static_cast<size_t>(f.threads) : std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  std::vector<std::vector<SimulateResult>> results(nc);
  for (size_t k = 0; k < runs.size(); ++k) {
    if (!runs[k]->ok()) return Fail(runs[k]->status());
    results[k / ns].push_back(std::move(*runs[k]).value());
  }
  const double wall = Seconds(start);
  if (sc->federation.enabled) {
    std::printf("simulate %s: federation of %zu members, %zu nodes, %lld GPUs, %zu configurations, %zu seeds, %.2f s\n",
                sc->name.c_str(), member_clusters.size(), merged->num_nodes(),
                static_cast<long long>(merged->total_gpu_milli() / kMilliPerGpu), sc->configurations.size(),
                sc->seeds.size(), wall);
  } else {
    std::printf("simulate %s: %zu nodes, %zu configurations, %zu seeds, %.2f s\n", sc->name.c_str(), cluster->num_nodes(),
                sc->configurations.size(), sc->seeds.size(), wall);
  }
  // A metric no run has (a typo) is known only now: the outputs are written all the same, so that
  // the run is not lost, and then it is bad input.
  StatusOr<std::string> table = std::string();
  if (f.table.empty()) {
    for (const auto& per_seed : results) {
      const SimulateResult& r = per_seed.front();
      std::printf("%s (seed %llu):", r.configuration.c_str(), static_cast<unsigned long long>(r.seed));
      for (const auto& [k, v] : r.metrics) std::printf(" %s=%g", k.c_str(), v);
      std::printf("\n");
    }
  } else {
    table = SimulateTable(results, f.table);
    if (table.ok()) std::fputs(table->c_str(), stdout);
  }
  if (!f.out.empty()) {
    auto html = WriteSimulateOutputs(f.out, sc->name, results, wall);
    if (!html.ok()) return Fail(html.status());
    std::printf("summary: %s/summary.json\nreport:  %s\n", f.out.c_str(), html->c_str());
  }
  if (!table.ok()) {
    return Fail(InvalidArgument(table.status().message() +
                                (f.out.empty() ? std::string() : "; the run's outputs are in " + f.out)));
  }
  return 0;
}

struct CurveFlags {
  std::string qps, out;
  int utc_offset_h = kGenAiDefaultUtcOffsetH;
};

// CLI11 validator of --utc-offset-h: "" when `text` is a whole number of hours in
// [kMinUtcOffsetH, kMaxUtcOffsetH] ("+8" allowed), else why not.
std::string CheckUtcOffset(std::string& text) {
  int h = 0;
  const char* begin = text.data() + (text.size() > 1 && text[0] == '+' && text[1] != '-' ? 1 : 0);
  const auto [end, ec] = std::from_chars(begin, text.data() + text.size(), h);
  if (ec != std::errc() || end != text.data() + text.size() || h < kMinUtcOffsetH || h > kMaxUtcOffsetH) {
    return "'" + text + "' is not a whole number of hours in [" + std::to_string(kMinUtcOffsetH) + ", " +
           std::to_string(kMaxUtcOffsetH) + "]";
  }
  return "";
}

// `estuary curve`: derives the diurnal demand curve of a QPS trace and writes it as a curve file
// whose first line says where it came from.
int RunCurveCommand(const CurveFlags& f) {
  auto derived = DeriveQpsCurve(f.qps, f.utc_offset_h);
  if (!derived.ok()) return Fail(derived.status());
  std::string interpolated;
  for (int h = 0; h < DemandCurve::kHours; ++h) {
    if (!derived->observed[h]) interpolated += (interpolated.empty() ? "" : " ") + std::to_string(h);
  }
  const std::string offset = (f.utc_offset_h < 0 ? "" : "+") + std::to_string(f.utc_offset_h);
  const std::string comment = "estuary curve --qps " + f.qps + " --utc-offset-h " + std::to_string(f.utc_offset_h) +
                              ": mean total request rate per local hour (UTC" + offset +
                              "), percent of the peak hour; interpolated hours: " +
                              (interpolated.empty() ? "none" : interpolated);
  Status st = WriteTextFile(f.out, FormatDemandCurve(derived->curve, comment));
  if (!st.ok()) return Fail(InvalidArgument("--out: " + st.message()));
  std::printf("curve from %s: %lld rows, seconds %lld..%lld, local time UTC%s, interpolated hours: %s\n",
              f.qps.c_str(), static_cast<long long>(derived->rows), static_cast<long long>(derived->first_second),
              static_cast<long long>(derived->last_second), offset.c_str(),
              interpolated.empty() ? "none" : interpolated.c_str());
  std::printf("hour:");
  for (int h = 0; h < DemandCurve::kHours; ++h) std::printf(" %3d", h);
  std::printf("\npct: ");
  for (int h = 0; h < DemandCurve::kHours; ++h) std::printf(" %3d", derived->curve.pct[h]);
  std::printf("\nwrote %s\n", f.out.c_str());
  return 0;
}

struct DefragFlags {
  std::string cluster, snapshot, out, plan;
  int64_t partition_nodes = 500, chain_depth = 3, rounds = 5, threads = 1, budget = 0;
  uint64_t seed = 1;
  std::string objective = "nodes", objective_plane, objective_level, align_plane, align_level;
  std::optional<int64_t> shape_gpus, shape_cpu_milli, shape_memory_mib;  // --objective shape
  bool has_budget = false;
};

// "3;7" — indices joined by ';' (+ offset).
template <typename It>
std::string JoinIndices(It begin, It end, int offset) {
  std::string s;
  for (It i = begin; i != end; ++i) s += (s.empty() ? "" : ";") + std::to_string(static_cast<int64_t>(*i) + offset);
  return s;
}

// A plane (and a level of it) named by two flags; both or neither.
Status ResolvePlaneLevel(const ClusterState& s, const std::string& plane_flag, const std::string& plane,
                         const std::string& level_flag, const std::string& level, PlaneId& plane_id, int& level_idx) {
  if (plane.empty() && level.empty()) return Status::Ok();
  if (plane.empty()) return InvalidArgument(plane_flag + ": required with " + level_flag);
  if (level.empty()) return InvalidArgument(level_flag + ": required with " + plane_flag);
  auto p = s.topology().FindPlane(plane);
  if (!p) return InvalidArgument(plane_flag + ": unknown plane '" + plane + "'");
  auto l = s.topology().FindLevel(*p, level);
  if (!l) return InvalidArgument(level_flag + ": plane '" + plane + "' has no level '" + level + "'");
  plane_id = *p;
  level_idx = *l;
  return Status::Ok();
}

// The defrag options from the flags; every bad value is bad input naming its flag.
StatusOr<DefragOptions> DefragOptionsFromFlags(const DefragFlags& f, const ClusterState& s) {
  DefragOptions o;
  auto bad = [](const std::string& flag, int64_t v, const std::string& why) {
    return InvalidArgument(flag + ": " + std::to_string(v) + " (" + why + ")");
  };
  if (f.partition_nodes < 0 || f.partition_nodes == 1 || f.partition_nodes > INT32_MAX) {
    return bad("--partition-nodes", f.partition_nodes, "must be 0 for one partition, or >= 2");
  }
  if (f.chain_depth < 0 || f.chain_depth > 64) return bad("--chain-depth", f.chain_depth, "must be in 0..64");
  if (f.rounds < 0 || f.rounds > INT32_MAX) return bad("--rounds", f.rounds, "must be >= 0");
  if (f.threads < 1 || f.threads > 1024) return bad("--threads", f.threads, "must be in 1..1024");
  if (f.has_budget && f.budget < 1) return bad("--budget", f.budget, "must be >= 1 move");
  if (f.has_budget && !f.plan.empty()) {
    return InvalidArgument("--budget: not with --plan (a plan file is applied as it is; cut the file instead)");
  }
  o.partition_nodes = static_cast<int32_t>(f.partition_nodes);
  o.max_chain_depth = static_cast<int32_t>(f.chain_depth);
  o.max_rounds = static_cast<int32_t>(f.rounds);
  o.threads = static_cast<int32_t>(f.threads);
  o.seed = f.seed;
  if (f.objective == "nodes") {
    o.objective = DefragOptions::Objective::kWholeFreeNodes;
  } else if (f.objective == "domains") {
    o.objective = DefragOptions::Objective::kWholeFreeDomains;
    if (f.objective_plane.empty() || f.objective_level.empty()) {
      return InvalidArgument("--objective: domains needs --objective-plane and --objective-level");
    }
  } else if (f.objective == "shape") {
    o.objective = DefragOptions::Objective::kPlaceableShape;
    if (!f.shape_gpus) return InvalidArgument("--shape-gpus: required with --objective shape");
    if (*f.shape_gpus < 1 || *f.shape_gpus > kMaxGpusPerNode) {
      return bad("--shape-gpus", *f.shape_gpus, "must be in 1.." + std::to_string(kMaxGpusPerNode));
    }
    o.shape.gpu_count = static_cast<int32_t>(*f.shape_gpus);
    o.shape.gpu_milli = kMilliPerGpu;
    if (f.shape_cpu_milli) {
      if (*f.shape_cpu_milli < 0 || *f.shape_cpu_milli > kMaxFieldValue) {
        return bad("--shape-cpu-milli", *f.shape_cpu_milli, "must be in 0..10^12");
      }
      o.shape.cpu_milli = *f.shape_cpu_milli;
    }
    if (f.shape_memory_mib) {
      if (*f.shape_memory_mib < 0 || *f.shape_memory_mib > kMaxFieldValue) {
        return bad("--shape-memory-mib", *f.shape_memory_mib, "must be in 0..10^12");
      }
      o.shape.mem_mib = *f.shape_memory_mib;
    }
  } else {
    return InvalidArgument("--objective: '" + f.objective + "' (expected nodes, domains or shape)");
  }
  if (o.objective != DefragOptions::Objective::kPlaceableShape) {
    if (f.shape_gpus) return InvalidArgument("--shape-gpus: only with --objective shape");
    if (f.shape_cpu_milli) return InvalidArgument("--shape-cpu-milli: only with --objective shape");
    if (f.shape_memory_mib) return InvalidArgument("--shape-memory-mib: only with --objective shape");
  }
  ESTUARY_RETURN_IF_ERROR(ResolvePlaneLevel(s, "--objective-plane", f.objective_plane, "--objective-level",
                                            f.objective_level, o.objective_plane, o.objective_level));
  ESTUARY_RETURN_IF_ERROR(ResolvePlaneLevel(s, "--align-plane", f.align_plane, "--align-level", f.align_level,
                                            o.align_plane, o.align_level));
  // Everything Validate checks was checked above; a failure here is a bug in this translation.
  Status st = DefragAction::Validate(s, o);
  if (!st.ok()) return Internal("defrag options: " + st.message());
  return o;
}

// How many moves of `plan` a budget of `budget` moves keeps: the longest prefix made of whole
// node groups (a vacated node's chains — consecutive in the plan — are kept or dropped
// together) with at most `budget` moves. A prefix keeps every `after` dependency. Also returns the
// vacated nodes kept.
size_t BudgetPrefix(const DefragPlan& plan, int64_t budget, std::vector<NodeId>& kept_nodes) {
  // Each chain's last move is the move out of the node being vacated.
  size_t keep = 0;
  for (size_t i = 0; i < plan.moves.size();) {
    // The group starting at move i: chains whose last move leaves the same node.
    size_t j = i;
    NodeId node;
    while (j < plan.moves.size()) {
      size_t e = j;
      while (e + 1 < plan.moves.size() && plan.moves[e + 1].chain == plan.moves[j].chain) ++e;
      if (node.valid() && plan.moves[e].from != node) break;
      node = plan.moves[e].from;
      j = e + 1;
    }
    ESTUARY_CHECK(std::binary_search(plan.vacated.begin(), plan.vacated.end(), node));
    if (static_cast<int64_t>(j) > budget) break;
    kept_nodes.push_back(node);
    keep = j;
    i = j;
  }
  std::sort(kept_nodes.begin(), kept_nodes.end());
  return keep;
}

struct GpuNodeCounts {
  int64_t whole_free = 0, slack = 0;
};
GpuNodeCounts CountGpuNodes(const ClusterState& s) {
  GpuNodeCounts c;
  for (const Node& n : s.nodes()) {
    c.whole_free += n.spec.gpu_count > 0 && n.full_free_gpus == n.spec.gpu_count;
    c.slack += n.spec.gpu_count > 0 && n.full_free_gpus != n.spec.gpu_count && n.gpu_free_total > 0;
  }
  return c;
}

// `estuary defrag --plan FILE`: applies a plan file (the plan.csv format) to the snapshot instead
// of planning, checking every move (sim/trace/plan_reader.h), and writes snapshot_after.csv and
// summary.json (docs/defrag.md, "Applying a plan").
int ApplyDefragPlanFile(const DefragFlags& f, const ClusterState& state, const Snapshot& snap,
                        std::chrono::steady_clock::time_point start) {
  ClusterState after = state;
  auto steps = ApplyPlanFile(f.plan, after, snap.locked);
  if (!steps.ok()) return Fail(steps.status());
  Status st = after.CheckInvariants();
  if (!st.ok()) return Fail(Internal("the plan broke an invariant: " + st.message()));
  const GpuNodeCounts before_counts = CountGpuNodes(state), after_counts = CountGpuNodes(after);
  // Vacated: nodes that held tasks before the plan and hold none after it.
  std::vector<std::string> vacated;
  for (const Node& n : state.nodes()) {
    if (!n.tasks.empty() && after.node(n.id).tasks.empty()) vacated.push_back(n.spec.name);
  }
  std::vector<int64_t> chains;
  int64_t ejections = 0;
  for (size_t i = 0; i < steps->size(); ++i) {
    chains.push_back((*steps)[i].chain);
    ejections += i > 0 && (*steps)[i].chain == (*steps)[i - 1].chain;
  }
  std::sort(chains.begin(), chains.end());
  chains.erase(std::unique(chains.begin(), chains.end()), chains.end());
  st = WriteTextFile(f.out + "/snapshot_after.csv", WriteSnapshot(after, snap.locked));

  nlohmann::json j;
  j["cluster"] = f.cluster;
  j["snapshot"] = f.snapshot;
  j["plan"] = f.plan;
  j["plan_seconds"] = 0;  // nothing planned: the plan was read
  j["nodes"] = state.num_nodes();
  j["tasks"] = snap.tasks;
  j["jobs"] = snap.jobs;
  j["locked_tasks"] = snap.locked_tasks;
  j["moves"] = steps->size();
  j["planned_moves"] = steps->size();
  j["budget_moves"] = nullptr;
  j["chains"] = chains.size();
  j["ejections"] = ejections;
  j["vacated_nodes"] = vacated.size();
  j["vacated_node_names"] = vacated;
  j["whole_free_nodes_before"] = before_counts.whole_free;
  j["whole_free_nodes_after"] = after_counts.whole_free;
  j["nodes_with_slack_before"] = before_counts.slack;
  j["nodes_with_slack_after"] = after_counts.slack;
  j["partitions"] = nullptr;
  j["rounds"] = nullptr;
  j["nodes_tried"] = nullptr;
  j["options"] = {{"plan", f.plan}};
  j["wall_seconds"] = Seconds(start);
  if (st.ok()) st = WriteTextFile(f.out + "/summary.json", j.dump(2) + "\n");
  if (!st.ok()) return Fail(st);
  std::printf("defrag %s with plan %s: %zu nodes, %lld tasks (%lld locked); %zu moves applied, %zu nodes vacated; "
              "whole free nodes %lld -> %lld, nodes with slack %lld -> %lld\n",
              f.snapshot.c_str(), f.plan.c_str(), state.num_nodes(), static_cast<long long>(snap.tasks),
              static_cast<long long>(snap.locked_tasks), steps->size(), vacated.size(),
              static_cast<long long>(before_counts.whole_free), static_cast<long long>(after_counts.whole_free),
              static_cast<long long>(before_counts.slack), static_cast<long long>(after_counts.slack));
  std::printf("wrote %s/snapshot_after.csv, %s/summary.json\n", f.out.c_str(), f.out.c_str());
  return 0;
}

// `estuary defrag`: a dry run of the IPC planner on a snapshot (docs/defrag.md).
int RunDefragCommand(const DefragFlags& f) {
  const auto start = std::chrono::steady_clock::now();
  auto cluster = ReadClusterSpec(f.cluster);
  if (!cluster.ok()) return Fail(cluster.status());
  ClusterState& state = *cluster;
  auto options = DefragOptionsFromFlags(f, state);
  if (!options.ok()) return Fail(options.status());
  auto snap = ReadSnapshot(f.snapshot, state);
  if (!snap.ok()) return Fail(snap.status());
  Status st = MakeOutputDir(f.out);
  if (!st.ok()) return Fail(InvalidArgument("--out: " + st.message()));

  if (!f.plan.empty()) return ApplyDefragPlanFile(f, state, *snap, start);

  const auto plan_start = std::chrono::steady_clock::now();
  const DefragPlan plan = DefragAction::Plan(state, snap->locked, *options);
  const double plan_seconds = Seconds(plan_start);

  std::vector<NodeId> vacated = plan.vacated;
  size_t keep = plan.moves.size();
  if (f.has_budget) {
    vacated.clear();
    keep = BudgetPrefix(plan, f.budget, vacated);
  }

  // Apply the kept moves to a copy, in order, as the executor would.
  ClusterState after = state;
  for (size_t i = 0; i < keep; ++i) {
    const DefragMove& m = plan.moves[i];
    ESTUARY_CHECK(after.task(m.task).node == m.from);
    after.Unbind(m.task);
    ESTUARY_CHECK(after.CanBind(m.task, m.to, m.gpus));
    after.Bind(m.task, m.to, m.gpus);
  }
  st = after.CheckInvariants();
  if (!st.ok()) return Fail(Internal("the plan broke an invariant: " + st.message()));
  const GpuNodeCounts before_counts = CountGpuNodes(state), after_counts = CountGpuNodes(after);
  ESTUARY_CHECK(before_counts.whole_free == plan.whole_free_before && before_counts.slack == plan.slack_before);
  if (keep == plan.moves.size()) {
    ESTUARY_CHECK(after_counts.whole_free == plan.whole_free_after && after_counts.slack == plan.slack_after);
  }
  for (NodeId v : vacated) ESTUARY_CHECK(after.node(v).tasks.empty());

  // plan.csv: steps numbered from 1; `after` lists steps.
  std::ostringstream csv;
  csv << "step,task,job,from,to,gpus,chain,after\n";
  for (size_t i = 0; i < keep; ++i) {
    const DefragMove& m = plan.moves[i];
    const Task& t = state.task(m.task);
    csv << i + 1 << ',' << CsvQuoted(t.name) << ',' << CsvQuoted(state.job(t.job).spec.name) << ','
        << CsvQuoted(state.node(m.from).spec.name) << ',' << CsvQuoted(state.node(m.to).spec.name) << ','
        << JoinIndices(m.gpus.begin(), m.gpus.end(), 0) << ',' << m.chain << ','
        << JoinIndices(m.after.begin(), m.after.end(), 1) << '\n';
  }
  st = WriteTextFile(f.out + "/plan.csv", csv.str());
  if (st.ok()) st = WriteTextFile(f.out + "/snapshot_after.csv", WriteSnapshot(after, snap->locked));

  nlohmann::json j;
  j["cluster"] = f.cluster;
  j["snapshot"] = f.snapshot;
  j["plan_seconds"] = plan_seconds;
  j["nodes"] = state.num_nodes();
  j["tasks"] = snap->tasks;
  j["jobs"] = snap->jobs;
  j["locked_tasks"] = snap->locked_tasks;
  j["moves"] = keep;
  j["planned_moves"] = plan.moves.size();
  j["budget_moves"] = f.has_budget ? nlohmann::json(f.budget) : nlohmann::json(nullptr);
  j["chains"] = keep == 0 ? 0 : plan.moves[keep - 1].chain + 1;
  int64_t ejections = 0;
  for (size_t i = 1; i < keep; ++i) ejections += plan.moves[i].chain == plan.moves[i - 1].chain;
  j["ejections"] = ejections;
  j["vacated_nodes"] = vacated.size();
  std::vector<std::string> names;
  for (NodeId v : vacated) names.push_back(state.node(v).spec.name);
  j["vacated_node_names"] = names;
  j["whole_free_nodes_before"] = before_counts.whole_free;
  j["whole_free_nodes_after"] = after_counts.whole_free;
  j["nodes_with_slack_before"] = before_counts.slack;
  j["nodes_with_slack_after"] = after_counts.slack;
  // Copies of the --objective shape that fit (DefragPlan::placeable_*); null for other objectives.
  const bool shape = options->objective == DefragOptions::Objective::kPlaceableShape;
  j["placeable_before"] = shape ? nlohmann::json(plan.placeable_before) : nlohmann::json(nullptr);
  j["placeable_after"] = shape && keep == plan.moves.size() ? nlohmann::json(plan.placeable_after)
                                                              : nlohmann::json(nullptr);
  j["partitions"] = plan.partitions;
  j["rounds"] = plan.rounds;
  j["nodes_tried"] = plan.nodes_tried;
  j["options"] = {{"partition_nodes", f.partition_nodes}, {"chain_depth", f.chain_depth}, {"rounds", f.rounds},
                  {"threads", f.threads}, {"seed", f.seed}, {"objective", f.objective},
                  {"objective_plane", f.objective_plane}, {"objective_level", f.objective_level},
                  {"align_plane", f.align_plane}, {"align_level", f.align_level},
                  {"shape_gpus", shape ? nlohmann::json(options->shape.gpu_count) : nlohmann::json(nullptr)},
                  {"shape_cpu_milli", shape ? nlohmann::json(options->shape.cpu_milli) : nlohmann::json(nullptr)},
                  {"shape_memory_mib", shape ? nlohmann::json(options->shape.mem_mib) : nlohmann::json(nullptr)}};
  j["wall_seconds"] = Seconds(start);
  if (st.ok()) st = WriteTextFile(f.out + "/summary.json", j.dump(2) + "\n");
  if (!st.ok()) return Fail(st);
  std::printf("defrag %s: %zu nodes, %lld tasks (%lld locked); %zu moves (%zu planned), %zu nodes vacated; "
              "whole free nodes %lld -> %lld, nodes with slack %lld -> %lld; plan %.3f s\n",
              f.snapshot.c_str(), state.num_nodes(), static_cast<long long>(snap->tasks),
              static_cast<long long>(snap->locked_tasks), keep, plan.moves.size(), vacated.size(),
              static_cast<long long>(before_counts.whole_free), static_cast<long long>(after_counts.whole_free),
              static_cast<long long>(before_counts.slack), static_cast<long long>(after_counts.slack), plan_seconds);
  std::printf("wrote %s/plan.csv, %s/snapshot_after.csv, %s/summary.json\n", f.out.c_str(), f.out.c_str(),
              f.out.c_str());
  return 0;
}

CLI::App* AddDefragCommand(CLI::App& app, DefragFlags& df, CLI::Option*& budget) {
  CLI::App* d = app.add_subcommand("defrag", "dry run of the IPC defragmentation planner on a snapshot (docs/defrag.md)");
  d->add_option("--cluster", df.cluster, "cluster spec (YAML; docs/cluster-spec.md)")->required();
  d->add_option("--snapshot", df.snapshot, "running tasks (CSV; docs/defrag.md)")->required();
  d->add_option("--out", df.out, "output directory: plan.csv, snapshot_after.csv, summary.json")->required();
  d->add_option("--plan", df.plan,
                 "apply this plan file (plan.csv format) instead of planning; writes no plan.csv");
  d->add_option("--partition-nodes", df.partition_nodes, "nodes per random partition; 0: one partition (default 500)");
  d->add_option("--chain-depth", df.chain_depth, "most ejections in one chain; 0: direct moves only (default 3)");
  d->add_option("--rounds", df.rounds, "most rounds per partition (default 5)");
  d->add_option("--threads", df.threads, "partitions searched in parallel; same plan for any value (default 1)");
  d->add_option("--seed", df.seed, "seed of the random partitions (default 1)");
  d->add_option("--objective", df.objective,
                 "nodes (whole free nodes, default), domains, or shape (most placeable copies of a task shape)");
  d->add_option("--shape-gpus", df.shape_gpus, "--objective shape: whole GPUs of the shape (1..16)");
  d->add_option("--shape-cpu-milli", df.shape_cpu_milli, "--objective shape: CPU of the shape, milli-cores (default 0)");
  d->add_option("--shape-memory-mib", df.shape_memory_mib, "--objective shape: memory of the shape, MiB (default 0)");
  d->add_option("--objective-plane", df.objective_plane, "--objective domains: the plane of the domains");
  d->add_option("--objective-level", df.objective_level, "--objective domains: the level of the domains");
  d->add_option("--align-plane", df.align_plane, "one partition per domain of this plane's --align-level");
  d->add_option("--align-level", df.align_level, "the level of --align-plane");
  budget = d->add_option("--budget", df.budget,
                         "most moves to keep, in plan order, whole vacated nodes only (default: all)")
               ->default_str("");
  return d;
}

CLI::App* AddReplayCommand(CLI::App& app, ReplayFlags& rf) {
  CLI::App* replay = app.add_subcommand("replay", "time-based replay of a task list with creation/deletion times");
  replay->add_option("--nodes", rf.nodes, "node list CSV (sn,cpu_milli,memory_mib,gpu,model)")->required();
  replay->add_option("--pods", rf.pods, "task list CSV with creation_time and deletion_time")->required();
  replay->add_option("--policy", rf.policy, "a policy name, a comma list, or all")->required();
  replay->add_option("--seeds", rf.seeds, "A-B or a comma list (default 42)");
  replay->add_option("--tie-break", rf.tie_break, "node-order (default) or uniform");
  replay->add_option("--sample-interval", rf.sample_interval, "seconds between time-series samples (default 3600)");
  replay->add_option("--arrival-scale", rf.arrival_scale,
                     "multiply creation times by this (default 1; below 1 compresses arrivals, raising the load)");
  replay->add_option("--out", rf.out, "output directory: summary.json, timeseries.csv, report.html");
  replay->add_flag("--check-invariants", rf.check_invariants, "check ClusterState invariants after every event (slow)");
  return replay;
}

// Every option and argument of `app` and its subcommands that takes a value refuses an empty one
// (`--seeds ''`, `--out ''`): bad input naming the flag, never read as "not given".
void RefuseEmptyValues(CLI::App& app) {
  static const CLI::Validator kNotEmpty(
      [](std::string& v) { return v.empty() ? std::string("an empty value (give one, or leave the flag out)") : std::string(); },
      "", "not empty");  // no description: --help shows the flags as before
  for (CLI::Option* o : app.get_options([](CLI::Option* o) { return o->get_items_expected_max() > 0; })) o->check(kNotEmpty);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) RefuseEmptyValues(*sub);
}

}  // namespace

int RunCli(int argc, char** argv) {
  CLI::App app{"estuary: a GPU-cluster scheduler and trace-driven simulator", "estuary"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for all subcommands");
  app.set_version_flag("--version", std::string("estuary ") + kEstuaryVersion + " (commit " + kEstuaryCommit + ")",
                       "print the version and the commit it was built from, and exit");
  // Every flag's --help line shows its default value (options added below inherit this).
  app.option_defaults()->always_capture_default();
  app.get_formatter()->column_width(36);

  OpenbFlags of;
  CLI::App* openb = app.add_subcommand("openb", "FGD (ATC'23) openb protocol: arrival-only placement of a trace");
  openb->add_option("--nodes", of.nodes, "node list CSV (sn,cpu_milli,memory_mib,gpu,model)")->required();
  openb->add_option("--pods", of.pods, "task list CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli,...)")->required();
  openb->add_option("--policy", of.policy,
                    "random|dotprod|gpu-clustering|gpu-packing|best-fit|fgd, a comma list, or all")->required();
  openb->add_option("--seeds", of.seeds, "A-B or a comma list (default 42-51)");
  openb->add_option("--tune", of.tune, "arrived GPU demand at the end, x capacity (default 1.3)");
  openb->add_option("--tie-break", of.tie_break, "node-order (published rule, default) or uniform");
  openb->add_option("--out", of.out, "output directory: summary.json, CSV curves, report.html");
  openb->add_option("--reference", of.reference, "published results CSV (openb_expected_alloc.csv) to compare with");
  openb->add_flag("--check-invariants", of.check_invariants, "check ClusterState invariants after every task (slow)");
  openb->add_flag("--migrate-on-failure", of.migrate_on_failure,
                  "when a task fits nowhere, migrate at most --max-moves running tasks to make room (issue 5)");
  openb->add_option("--max-moves", of.max_moves, "tasks moved per migration, 1..8 (default 2)");
  openb->add_option("--max-chain-depth", of.max_chain_depth,
                    "ejections stacked in one migration chain, 0..2 (default 0: direct moves only)");

  ReplayFlags rf;
  CLI::App* replay = AddReplayCommand(app, rf);

  SimulateFlags sf;
  CLI::App* simulate = app.add_subcommand("simulate", "run a scenario (cluster, jobs, events, configurations)");
  simulate->add_option("scenario", sf.scenario, "the scenario file (YAML; docs/simulate.md)")->required();
  simulate->add_option("--out", sf.out, "output directory: summary.json, timeseries.csv, jobs.csv, report.html");
  simulate->add_flag("--check-invariants", sf.check_invariants,
                    "check ClusterState invariants, and that a second cycle decides nothing, after every event time");
  simulate->add_flag("--events", sf.events,
                     "also write job_events.csv: every start, grow, shrink, eviction, Standby and restore of every job");
  simulate->add_option("--threads", sf.threads, "runs (configuration x seed) in parallel; default: one per hardware thread")
      ->check(CLI::Range(1, 1024))
      ->default_str("");
  simulate->add_option("--table", sf.table,
                       "print these metrics (a comma list) as a table, one column per configuration, means over "
                       "seeds, instead of every metric of the first seed")
      ->delimiter(',');
  simulate->add_option("--seeds", sf.seeds, "run these seeds instead of the scenario's: A-B or a comma list")
      ->default_str("");
  simulate->add_option("--configurations", sf.only,
                       "run only these of the scenario's configurations (a comma list of names), in this order")
      ->delimiter(',');

  ClusterFlags cf;
  CLI::App* cluster = app.add_subcommand("cluster", "cluster spec files: generate ASI-like clusters, check a spec");
  cluster->require_subcommand(1);
  CLI::App* generate = cluster->add_subcommand("generate", "write a seeded ASI-like cluster spec (YAML)");
  generate->add_option("--out", cf.out, "the spec file to write")->required();
  generate->add_option("--total-gpus", cf.gen.total_gpus, "GPUs in all (default 155410; whole nodes only)");
  generate->add_option("--gpus-per-node", cf.gen.gpus_per_node, "default 8");
  generate->add_option("--nodes-per-asw", cf.nodes_per_asw, "MIN-MAX nodes under one access switch (default 32-64)");
  generate->add_option("--asws-per-spine", cf.gen.asws_per_spine, "default 8");
  generate->add_option("--spines-per-az", cf.gen.spines_per_az, "default 8");
  generate->add_option("--rdma-pod-nodes", cf.gen.rdma_pod_nodes, "consecutive nodes per RDMA-POD (default 128)");
  generate->add_option("--models", cf.models,
                       "MODEL:SHARE:CPU_CORES:MEMORY_GIB,... (default H800:4:128:2048,A100:4:96:1024,A10:2:64:512)");
  generate->add_option("--seed", cf.gen.seed, "default 1");
  CLI::App* check = cluster->add_subcommand("check", "read a cluster spec and describe it");
  check->add_option("spec", cf.spec, "the spec file")->required();

  CurveFlags uf;
  CLI::App* curve = app.add_subcommand("curve", "derive a diurnal demand curve (hour,demand_pct) from a QPS trace");
  curve->add_option("--qps", uf.qps, "QPS trace CSV with timestamp_anon,value (alibaba-genai-v2026 qps.csv)")
      ->required();
  curve->add_option("--out", uf.out, "the curve file to write (hour,demand_pct; docs/tidal-curve.md)")->required();
  curve->add_option("--utc-offset-h", uf.utc_offset_h, "local time = UTC + this many hours (default 8, China)")
      ->check(CLI::Validator(CheckUtcOffset, "HOURS", "utc offset"));

  DefragFlags df;
  CLI::Option* budget = nullptr;
  CLI::App* defrag = AddDefragCommand(app, df, budget);

  ServeFlags vf;
  CLI::App* serve = AddServeCommand(app, vf);
  AgentFlags af;
  CLI::App* agent = AddAgentCommand(app, af);
  ClientFlags client;
  const ClientCommands client_cmds = AddClientCommands(app, client);
  HistoryFlags hf;
  CLI::App* history_export = nullptr;
  CLI::App* history_scenario = nullptr;
  AddHistoryCommand(app, hf, &history_export, &history_scenario);

  std::string shell;
  CLI::App* completion = app.add_subcommand("completion", "print a shell completion script: source <(estuary completion bash)");
  completion->add_option("shell", shell, "the shell: bash")->required()->check(CLI::IsMember({"bash"}));

  static const std::set<std::string> kCommands = {"openb", "replay", "simulate", "cluster", "curve", "defrag", "serve",
                                                   "agent", "history", "submit", "jobs", "job", "cancel", "logs", "nodes",
                                                   "queues", "completion"};
  if (argc >= 2 && argv[1][0] != '-' && !kCommands.count(argv[1])) {
    std::fprintf(stderr,
                 "estuary: unknown command '%s' (known: openb, replay, simulate, cluster, curve, defrag, serve, agent, history, "
                 "submit, jobs, job, cancel, logs, nodes, queues, completion; see --help)\n",
                 argv[1]);
    return 2;
  }
  RefuseEmptyValues(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      app.exit(e);
      return 0;
    }
    std::string msg = e.what();
    std::fprintf(stderr, "estuary: %s (see --help)\n", msg.c_str());
    return 2;
  }
  if (completion->parsed()) {
    std::fputs(BashCompletion(app).c_str(), stdout);
    return 0;
  }
  if (openb->parsed()) return RunOpenbCommand(of);
  if (replay->parsed()) return RunReplayCommand(rf);
  if (generate->parsed()) return RunClusterGenerate(cf);
  if (simulate->parsed()) return RunSimulateCommand(sf);
  if (check->parsed()) return RunClusterCheck(cf);
  if (curve->parsed()) return RunCurveCommand(uf);
  if (serve->parsed()) return RunServeCommand(vf);
  if (agent->parsed()) return RunAgentCommand(af);
  if (client_cmds.Parsed()) return RunClientCommand(client_cmds, client);
  if (history_export->parsed()) return RunHistoryExport(hf);
  if (history_scenario->parsed()) return RunHistoryScenario(hf);
  if (defrag->parsed()) {
    df.has_budget = budget->count() > 0;
    return RunDefragCommand(df);
  }
  return 2;
}

}  // namespace estuary
