#include "sim/outputs.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "sim/report/report.h"
#include "sim/trace/csv_fields.h"

namespace estuary {

Status MakeOutputDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgument(dir + ": cannot create output directory (" + ec.message() + ")");
  return Status::Ok();
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) return InvalidArgument(path + ": cannot open for writing (" + std::strerror(errno) + ")");
  f << text;
  f.close();
  if (!f) return InvalidArgument(path + ": write failed");
  return Status::Ok();
}

std::string OpenbTraceName(const std::string& pods_path) {
  std::string stem = std::filesystem::path(pods_path).stem().string();
  const std::string prefix = "openb_pod_list_";
  if (stem.rfind(prefix, 0) == 0) return stem.substr(prefix.size());
  return stem;
}

std::optional<double> PublishedOpenb::EndMean(const std::string& policy, const std::vector<uint64_t>& seeds) const {
  auto it = by_policy.find(policy);
  if (it == by_policy.end() || seeds.empty()) return std::nullopt;
  double s = 0;
  for (uint64_t seed : seeds) {
    auto c = it->second.find(seed);
    if (c == it->second.end() || !c->second[ArrivalCurve::kMaxPct]) return std::nullopt;
    s += *c->second[ArrivalCurve::kMaxPct];
  }
  return s / static_cast<double>(seeds.size());
}

std::optional<Curve> PublishedOpenb::MeanCurve(const std::string& policy, const std::vector<uint64_t>& seeds) const {
  auto it = by_policy.find(policy);
  if (it == by_policy.end()) return std::nullopt;
  std::vector<Curve> curves;
  for (uint64_t seed : seeds) {
    auto c = it->second.find(seed);
    if (c != it->second.end()) curves.push_back(c->second);
  }
  if (curves.empty()) return std::nullopt;
  return estuary::MeanCurve(curves);
}

StatusOr<PublishedOpenb> ReadPublishedOpenb(const std::string& path, const std::string& trace) {
  std::ifstream f(path);
  if (!f) return InvalidArgument(path + ": cannot open file");
  PublishedOpenb out;
  out.trace = trace;
  std::string line;
  unsigned lineno = 0;
  std::vector<std::string> header;
  auto split = [](const std::string& s) {
    std::vector<std::string> v;
    std::string cur;
    std::istringstream in(s);
    while (std::getline(in, cur, ',')) v.push_back(cur);
    if (!s.empty() && s.back() == ',') v.emplace_back();
    return v;
  };
  while (std::getline(f, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (lineno == 1) {
      header = split(line);
      if (header.size() < 5 + ArrivalCurve::kMaxPct + 1 || header[0] != "trace" || header[1] != "policy" ||
          header[3] != "seed") {
        return InvalidArgument(path + ":1: expected columns trace,policy,tune,seed,total_gpus,0..130");
      }
      continue;
    }
    if (line.empty()) continue;
    std::vector<std::string> cols = split(line);
    if (cols.size() != header.size()) {
      return InvalidArgument(path + ":" + std::to_string(lineno) + ": malformed row: " + std::to_string(cols.size()) +
                             " columns, header has " + std::to_string(header.size()));
    }
    if (cols[0] != trace) continue;
    auto seed = ParseNonNegative({&path, lineno, "seed"}, cols[3]);
    if (!seed.ok()) return seed.status();
    Curve c;
    for (int x = 0; x <= ArrivalCurve::kMaxPct; ++x) {
      const std::string& v = cols[5 + x];
      if (v.empty()) continue;
      char* end = nullptr;
      const double d = std::strtod(v.c_str(), &end);
      if (end != v.c_str() + v.size() || !std::isfinite(d)) {
        return InvalidArgument(path + ":" + std::to_string(lineno) + ": column '" + header[5 + x] + "': '" + v +
                               "' is not a number");
      }
      c[x] = d;
    }
    out.by_policy[cols[1]][static_cast<uint64_t>(*seed)] = c;
  }
  if (out.by_policy.empty()) return InvalidArgument(path + ": no rows for trace '" + trace + "'");
  return out;
}

namespace {

nlohmann::json CurveJson(const Curve& c) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& v : c) a.push_back(v ? nlohmann::json(std::round(*v * 1e4) / 1e4) : nlohmann::json());
  return a;
}

double Round4(double v) { return std::round(v * 1e4) / 1e4; }

std::string CurveCsv(const std::vector<OpenbResult>& results, Curve OpenbSeedResult::*seed_curve,
                     Curve OpenbResult::*mean_curve) {
  std::ostringstream o;
  o << "policy,seed";
  for (int x = 0; x <= ArrivalCurve::kMaxPct; ++x) o << ',' << x;
  o << '\n';
  auto row = [&](const std::string& policy, const std::string& seed, const Curve& c) {
    o << policy << ',' << seed;
    for (const auto& v : c) {
      o << ',';
      if (v) o << Round4(*v);
    }
    o << '\n';
  };
  for (const OpenbResult& r : results) {
    for (const OpenbSeedResult& s : r.seeds) row(r.policy, std::to_string(s.seed), s.*seed_curve);
    row(r.policy, "mean", r.*mean_curve);
  }
  return o.str();
}

// The curve's points at arrived demand from_pct..130%.
report::Series SeriesOf(const std::string& label, const Curve& c, bool dashed, int color = -1, int from_pct = 0) {
  report::Series s;
  s.label = label;
  s.dashed = dashed;
  s.color = color;
  for (int x = from_pct; x <= ArrivalCurve::kMaxPct; ++x) {
    if (!c[x]) continue;
    s.x.push_back(x);
    s.y.push_back(*c[x]);
  }
  return s;
}

std::string Fixed(double v, int digits = 2) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(digits);
  o << v;
  return o.str();
}

// A CSV field (RFC 4180): quoted, with quotes doubled, when it holds a comma, a quote or a line
// break.
std::string CsvField(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// jobs.csv: one row per job per (configuration, seed); see SimJobRecord.
std::string JobsCsv(const std::vector<std::vector<SimulateResult>>& results) {
  std::ostringstream o;
  o << "configuration,seed,job,replicas,gpus_per_replica,gpus,submit_s,start_s,delay_s,granted,status,domains,"
       "entropy\n";
  for (const auto& per_seed : results) {
    for (const SimulateResult& r : per_seed) {
      for (const SimJobRecord& j : r.jobs) {
        const bool started = j.start_s >= 0;
        o << CsvField(r.configuration) << ',' << r.seed << ',' << CsvField(j.name) << ',' << j.replicas << ','
          << j.gpus_per_replica << ',' << j.gpus << ',' << j.submit_s << ',' << (started ? std::to_string(j.start_s) : "")
          << ',' << j.delay_s << ',' << (started ? std::to_string(j.granted) : "") << ','
          << CsvField(SimJobStatusText(j)) << ',' << (j.domains ? std::to_string(*j.domains) : "") << ','
          << (j.entropy ? Fixed(*j.entropy, 6) : "") << '\n';
      }
    }
  }
  return o.str();
}

}  // namespace

namespace {
// The general summary shape (docs/mission.md): scenario, seeds (of the first configuration),
// wall_seconds and an empty "configurations" object for the caller to fill.
template <typename Result>
nlohmann::json GeneralSummary(const std::string& scenario, const std::vector<std::vector<Result>>& results,
                              double wall_seconds) {
  nlohmann::json summary;
  summary["scenario"] = scenario;
  std::vector<uint64_t> seeds;
  if (!results.empty()) {
    for (const Result& r : results[0]) seeds.push_back(r.seed);
  }
  summary["seeds"] = seeds;
  summary["wall_seconds"] = Round4(wall_seconds);
  summary["configurations"] = nlohmann::json::object();
  return summary;
}

}  // namespace

nlohmann::json OpenbSummaryJson(const OpenbResult& r, const OpenbRunInfo& info, const PublishedOpenb* published) {
  nlohmann::json j;
  j["policy"] = r.policy;
  j["tie_break"] = std::string(TieBreakName(r.tie_break));
  j["tune"] = r.tune;
  std::vector<uint64_t> seeds;
  nlohmann::json by_seed = nlohmann::json::object(), frag_by_seed = nlohmann::json::object();
  int64_t placed = 0, failed = 0, arrived = 0;
  std::map<std::string, int64_t> failed_by_shape;
  for (const OpenbSeedResult& s : r.seeds) {
    seeds.push_back(s.seed);
    by_seed[std::to_string(s.seed)] = Round4(s.gpu_alloc_pct);
    frag_by_seed[std::to_string(s.seed)] = Round4(s.frag_ratio_pct);
    placed += s.tasks_placed;
    failed += s.tasks_failed;
    arrived += s.tasks_arrived;
    for (const auto& [shape, n] : s.failed_by_shape) failed_by_shape[shape] += n;
  }
  j["seeds"] = seeds;
  j["gpu_alloc_pct_mean"] = Round4(r.gpu_alloc_pct_mean);
  j["gpu_alloc_pct_by_seed"] = by_seed;
  j["frag_ratio_pct_mean"] = Round4(r.frag_ratio_pct_mean);
  j["frag_ratio_pct_by_seed"] = frag_by_seed;
  j["tasks_arrived_count"] = arrived;
  j["tasks_placed_count"] = placed;
  j["tasks_failed_count"] = failed;
  j["tasks_failed_by_shape_count"] = failed_by_shape;
  j["gpu_alloc_pct_curve_mean"] = CurveJson(r.alloc_curve_mean);
  if (r.migrate_on_failure) {
    int64_t moved = 0, moved_milli = 0, by_migration = 0;
    for (const OpenbSeedResult& s : r.seeds) {
      moved += s.migrations;
      moved_milli += s.migrated_gpu_milli;
      by_migration += s.placed_by_migration;
    }
    j["migrate_on_failure"] = true;
    j["max_moves"] = r.max_moves;
    j["migrations_count"] = moved;  // tasks moved, all seeds
    j["migrated_gpu_milli"] = moved_milli;
    j["tasks_placed_by_migration_count"] = by_migration;
  }
  j["nodes"] = info.nodes_path;
  j["pods"] = info.pods_path;
  j["trace"] = info.trace;
  j["typical_tasks_count"] = info.typical_specs;
  j["typical_tasks_coverage_pct"] = Round4(100.0 * info.typical_coverage);
  if (published) {
    if (auto m = published->EndMean(r.policy, seeds)) {
      j["published_gpu_alloc_pct_mean"] = Round4(*m);
      j["delta_vs_published_pp"] = Round4(r.gpu_alloc_pct_mean - *m);
    }
  }
  j["wall_seconds"] = Round4(r.wall_seconds);
  return j;
}

StatusOr<std::string> WriteOpenbOutputs(const std::string& dir, const std::vector<OpenbResult>& results,
                                        const OpenbRunInfo& info, const PublishedOpenb* published,
                                        double wall_seconds) {
  ESTUARY_RETURN_IF_ERROR(MakeOutputDir(dir));
  nlohmann::json summary;
  if (results.size() == 1) {
    summary = OpenbSummaryJson(results[0], info, published);
  } else {
    summary["policies"] = nlohmann::json::object();
    for (const OpenbResult& r : results) summary["policies"][r.policy] = OpenbSummaryJson(r, info, published);
    summary["seeds"] = results.empty() ? nlohmann::json::array() : summary["policies"][results[0].policy]["seeds"];
    summary["tie_break"] = results.empty() ? "" : std::string(TieBreakName(results[0].tie_break));
    summary["wall_seconds"] = Round4(wall_seconds);
  }
  ESTUARY_RETURN_IF_ERROR(WriteTextFile(dir + "/summary.json", summary.dump(2) + "\n"));
  ESTUARY_RETURN_IF_ERROR(WriteTextFile(dir + "/alloc_curve.csv",
                                        CurveCsv(results, &OpenbSeedResult::alloc_curve, &OpenbResult::alloc_curve_mean)));
  ESTUARY_RETURN_IF_ERROR(WriteTextFile(
      dir + "/frag_ratio_curve.csv", CurveCsv(results, &OpenbSeedResult::frag_ratio_curve, &OpenbResult::frag_ratio_curve_mean)));
  ESTUARY_RETURN_IF_ERROR(WriteTextFile(
      dir + "/frag_amount_curve.csv",
      CurveCsv(results, &OpenbSeedResult::frag_amount_curve, &OpenbResult::frag_amount_curve_mean)));
  std::ostringstream failed;
  failed << "policy,seed,shape,failed_count\n";
  for (const OpenbResult& r : results) {
    for (const OpenbSeedResult& s : r.seeds) {
      for (const auto& [shape, n] : s.failed_by_shape) failed << r.policy << ',' << s.seed << ',' << shape << ',' << n << '\n';
    }
  }
  ESTUARY_RETURN_IF_ERROR(WriteTextFile(dir + "/failed_tasks.csv", failed.str()));

  report::Report rep;
  rep.title = "estuary openb: " + info.trace + " trace";
  rep.notes.push_back("Nodes: " + info.nodes_path + "; tasks: " + info.pods_path + " (" +
                      std::to_string(info.trace_tasks) + " tasks).");
  if (!results.empty()) {
    std::string seeds;
    for (const auto& s : results[0].seeds) seeds += (seeds.empty() ? "" : ", ") + std::to_string(s.seed);
    rep.notes.push_back("Seeds " + seeds + "; tune " + Fixed(results[0].tune, 2) + "; tie-break: " +
                        std::string(TieBreakName(results[0].tie_break)) + ".");
  }
  rep.notes.push_back("Typical tasks: " + std::to_string(info.typical_specs) + " of " +
                      std::to_string(info.distinct_specs) + " task specs, covering " +
                      Fixed(100.0 * info.typical_coverage, 1) + "% of the trace.");
  report::Table t;
  t.title = "GPU allocation ratio at the end of the run (mean over seeds)";
  t.header = {"policy", "estuary %", "published %", "delta pp", "frag ratio %", "failed tasks (mean)", "wall s"};
  for (const OpenbResult& r : results) {
    std::vector<uint64_t> seeds;
    int64_t failed_n = 0;
    for (const auto& s : r.seeds) {
      seeds.push_back(s.seed);
      failed_n += s.tasks_failed;
    }
    std::string pub_text = "-", delta_text = "-";
    if (published) {
      if (auto pub = published->EndMean(r.policy, seeds)) {
        pub_text = Fixed(*pub);
        delta_text = Fixed(r.gpu_alloc_pct_mean - *pub);
      }
    }
    t.rows.push_back({r.policy, Fixed(r.gpu_alloc_pct_mean), pub_text, delta_text, Fixed(r.frag_ratio_pct_mean),
                      Fixed(static_cast<double>(failed_n) / static_cast<double>(std::max<size_t>(1, r.seeds.size())), 1),
                      Fixed(r.wall_seconds, 3)});
  }
  rep.tables.push_back(t);
  report::Chart alloc{"alloc", "GPU allocation ratio vs arrived GPU demand", "arrived GPU demand (% of capacity)",
                      "GPU allocation ratio (%)", {}};
  report::Chart tail{"alloc_tail", "GPU allocation ratio where the cluster saturates (80-130% arrived)",
                     "arrived GPU demand (% of capacity)", "GPU allocation ratio (%)", {}};
  report::Chart fr{"frag_ratio", "Fragmentation ratio (fragmented share of idle GPU)", "arrived GPU demand (% of capacity)",
                   "fragmentation ratio (%)", {}};
  report::Chart fa{"frag_amount", "Fragmented GPUs", "arrived GPU demand (% of capacity)", "fragmented GPUs", {}};
  for (size_t p = 0; p < results.size(); ++p) {
    const OpenbResult& r = results[p];
    const int color = static_cast<int>(p);
    alloc.series.push_back(SeriesOf(r.policy + " (estuary)", r.alloc_curve_mean, false, color));
    tail.series.push_back(SeriesOf(r.policy + " (estuary)", r.alloc_curve_mean, false, color, 80));
    if (published) {
      std::vector<uint64_t> seeds;
      for (const auto& s : r.seeds) seeds.push_back(s.seed);
      if (auto c = published->MeanCurve(r.policy, seeds)) {
        alloc.series.push_back(SeriesOf(r.policy + " (published)", *c, true, color));
        tail.series.push_back(SeriesOf(r.policy + " (published)", *c, true, color, 80));
      }
    }
    fr.series.push_back(SeriesOf(r.policy, r.frag_ratio_curve_mean, false));
    fa.series.push_back(SeriesOf(r.policy, r.frag_amount_curve_mean, false));
  }
  rep.charts = {alloc, tail, fr, fa};
  const std::string html = dir + "/report.html";
  ESTUARY_RETURN_IF_ERROR(report::WriteHtmlReport(rep, html));
  return html;
}

StatusOr<std::string> WriteReplayOutputs(const std::string& dir, const std::string& scenario,
                                         const std::vector<std::vector<ReplayResult>>& results,
                                         double wall_seconds) {
  ESTUARY_RETURN_IF_ERROR(MakeOutputDir(dir));
  nlohmann::json summary = GeneralSummary(scenario, results, wall_seconds);
  report::Report rep;
  rep.title = "estuary replay: " + scenario;
  rep.notes.push_back("Time-based replay: tasks arrive at their creation time and run for their traced duration; "
                      "waiting tasks are retried whenever capacity frees.");
  report::Table t;
  t.title = "Replay metrics (mean over seeds)";
  t.header = {"policy", "alloc mean %", "alloc max %", "frag mean %", "pending max", "wait p50 s", "wait p99 s",
              "never started"};
  report::Chart alloc{"alloc_time", "GPU allocation ratio over time", "time (hours since first arrival)",
                      "GPU allocation ratio (%)", {}};
  report::Chart pend{"pending_time", "Pending tasks over time", "time (hours since first arrival)", "pending tasks", {}};
  std::ostringstream ts;
  ts << "policy,seed,time_s,gpu_alloc_pct,frag_ratio_pct,pending_count,running_count\n";
  for (const auto& per_seed : results) {
    if (per_seed.empty()) continue;
    const double n = static_cast<double>(per_seed.size());
    nlohmann::json m;
    auto mean = [&](double ReplayResult::*f) {
      double s = 0;
      for (const auto& r : per_seed) s += r.*f;
      return Round4(s / n);
    };
    auto mean_i = [&](int64_t ReplayResult::*f) {
      double s = 0;
      for (const auto& r : per_seed) s += static_cast<double>(r.*f);
      return Round4(s / n);
    };
    m["gpu_alloc_pct_mean"] = mean(&ReplayResult::gpu_alloc_pct_mean);
    m["gpu_alloc_pct_max"] = mean(&ReplayResult::gpu_alloc_pct_max);
    m["frag_ratio_pct_mean"] = mean(&ReplayResult::frag_ratio_pct_mean);
    m["pending_max_count"] = mean_i(&ReplayResult::pending_max_count);
    m["tasks_started_count"] = mean_i(&ReplayResult::tasks_started_count);
    m["tasks_never_started_count"] = mean_i(&ReplayResult::tasks_never_started_count);
    m["tasks_infeasible_count"] = mean_i(&ReplayResult::tasks_infeasible_count);
    m["wait_s_mean"] = mean(&ReplayResult::wait_s_mean);
    m["wait_s_p50"] = mean(&ReplayResult::wait_s_p50);
    m["wait_s_p90"] = mean(&ReplayResult::wait_s_p90);
    m["wait_s_p99"] = mean(&ReplayResult::wait_s_p99);
    m["wait_s_max"] = mean(&ReplayResult::wait_s_max);
    const std::string& policy = per_seed[0].policy;
    summary["configurations"][policy] = m;
    t.rows.push_back({policy, Fixed(m["gpu_alloc_pct_mean"]), Fixed(m["gpu_alloc_pct_max"]),
                      Fixed(m["frag_ratio_pct_mean"]), Fixed(m["pending_max_count"], 1), Fixed(m["wait_s_p50"], 0),
                      Fixed(m["wait_s_p99"], 0), Fixed(m["tasks_never_started_count"], 1)});
    for (const auto& r : per_seed) {
      for (const ReplaySample& s : r.samples) {
        ts << policy << ',' << r.seed << ',' << s.time << ',' << Round4(s.gpu_alloc_pct) << ','
           << Round4(s.frag_ratio_pct) << ',' << s.pending_count << ',' << s.running_count << '\n';
      }
    }
    const ReplayResult& first = per_seed[0];
    report::Series a, p;
    a.label = p.label = policy + " (seed " + std::to_string(first.seed) + ")";
    for (const ReplaySample& s : first.samples) {
      const double h = static_cast<double>(s.time - first.start_time) / 3600.0;
      a.x.push_back(h);
      a.y.push_back(s.gpu_alloc_pct);
      p.x.push_back(h);
      p.y.push_back(static_cast<double>(s.pending_count));
    }
    alloc.series.push_back(a);
    pend.series.push_back(p);
  }
  ESTUARY_RETURN_IF_ERROR(WriteTextFile(dir + "/summary.json", summary.dump(2) + "\n"));
  ESTUARY_RETURN_IF_ERROR(WriteTextFile(dir + "/timeseries.csv", ts.str()));
  rep.tables.push_back(t);
  rep.charts = {alloc, pend};
  const std::string html = dir + "/report.html";
  ESTUARY_RETURN_IF_ERROR(report::WriteHtmlReport(rep, html));
  return html;
}

namespace {
// job_events.csv of every run (nullopt when no run recorded events).
std::optional<std::string> JobEventsCsv(const std::vector<std::vector<SimulateResult>>& results) {
  bool any_events = false;
  for (const auto& per_seed : results) {
    for (const SimulateResult& r : per_seed) any_events |= !r.job_events.empty();
  }
  if (!any_events) return std::nullopt;
  std::ostringstream ev;
  ev << "configuration,seed,time_s,job,kind,replicas,detail\n";
  for (const auto& per_seed : results) {
    for (const SimulateResult& r : per_seed) {
      for (const SimJobEvent& e : r.job_events) {
        ev << CsvField(r.configuration) << ',' << r.seed << ',' << e.time << ',' << CsvField(e.job) << ',' << e.kind << ','
           << e.replicas << ',' << CsvField(e.detail) << '\n';
      }
    }
  }
  return ev.str();
}

// queues.csv of every run with queues (nullopt when none has them): one row per queue per sample.
std::optional<std::string> QueuesCsv(const std::vector<std::vector<SimulateResult>>& results) {
  std::ostringstream q;
  bool any = false;
  q << "configuration,seed,time_s,queue,allocated_gpus,guaranteed_gpus,fair_share_gpus,borrowed_gpus,lent_gpus,pending_gpus\n";
  for (const auto& per_seed : results) {
    for (const SimulateResult& r : per_seed) {
      for (const QueueSample& x : r.queue_samples) {
        any = true;
        q << CsvField(r.configuration) << ',' << r.seed << ',' << x.t << ',' << CsvField(x.queue) << ',' << x.allocated << ','
          << x.guaranteed << ',' << x.fair << ',' << x.borrowed << ',' << x.lent << ',' << x.pending << '\n';
      }
    }
  }
  if (!any) return std::nullopt;
  return q.str();
}

// The report's queue section (nullopt when no run has queues): a table of the queue metrics (mean
// over seeds) per configuration, and per configuration with queues a panel of small charts, one per
// queue in tree order (depth first), of its first seed's queues.csv columns over time.
std::optional<report::PanelSet> QueuePanels(const std::vector<std::vector<SimulateResult>>& results) {
  static const char* const kMetrics[] = {"fairness_deviation_pct", "jain_index",          "guarantee_wait_p50_s",
                                         "guarantee_wait_p99_s",   "guarantee_waits_count", "fairness_evictions_count",
                                         "flapping_jobs_count",    "reshrunk_jobs_count", "queue_limit_breaches_count"};
  report::PanelSet set;
  set.id = "queues";
  set.title = "Queues";
  set.selector_label = "configuration";
  report::Table t;
  t.title = "Queue metrics (mean over seeds)";
  t.header = {"metric"};
  for (const char* k : kMetrics) t.rows.push_back({k});
  for (const auto& per_seed : results) {
    if (per_seed.empty() || per_seed[0].queue_samples.empty()) continue;
    t.header.push_back(per_seed[0].configuration);
    for (size_t i = 0; i < std::size(kMetrics); ++i) {
      double sum = 0;
      int n = 0;
      for (const SimulateResult& r : per_seed) {
        if (auto it = r.metrics.find(kMetrics[i]); it != r.metrics.end()) {
          sum += it->second;
          ++n;
        }
      }
      t.rows[i].push_back(n > 0 ? Fixed(sum / n) : "-");
    }
    // Each queue's rows, in the order queues.csv lists them at a sample (the tree's order).
    const SimulateResult& r = per_seed[0];
    std::vector<std::string> order;
    std::map<std::string, std::vector<const QueueSample*>> rows;
    std::map<std::string, std::vector<std::string>> children;
    std::map<std::string, bool> leaf;
    for (const QueueSample& x : r.queue_samples) {
      auto& v = rows[x.queue];
      if (v.empty()) {
        order.push_back(x.queue);
        children[x.parent].push_back(x.queue);
        leaf[x.queue] = x.leaf;
      }
      v.push_back(&x);
    }
    report::Panel panel;
    panel.label = r.configuration;
    // Depth first from the top-level queues; a chart's title is the queue's path.
    std::vector<std::pair<std::string, std::string>> stack;  // (queue, its parent's path)
    const auto& tops = children[""];
    for (auto it = tops.rbegin(); it != tops.rend(); ++it) stack.emplace_back(*it, "");
    while (!stack.empty()) {
      const auto [queue, above] = stack.back();
      stack.pop_back();
      const std::string path = above.empty() ? queue : above + " / " + queue;
      const auto& under = children[queue];
      for (auto it = under.rbegin(); it != under.rend(); ++it) stack.emplace_back(*it, path);
      report::Chart c{"queue:" + r.configuration + ":" + queue,
                      leaf[queue] ? path : path + " (its " + std::to_string(under.size()) + " queues' sum)",
                      "time (hours)", "GPUs", {}};
      struct Column {
        const char* label;
        double QueueSample::*value;
        bool dashed;
        int color;
      };
      static constexpr Column kColumns[] = {{"allocated", &QueueSample::allocated, false, 0},
                                            {"guaranteed", &QueueSample::guaranteed, true, 2},
                                            {"fair share", &QueueSample::fair, true, 1},
                                            {"borrowed", &QueueSample::borrowed, false, 3},
                                            {"lent", &QueueSample::lent, false, 4},
                                            {"pending", &QueueSample::pending, false, 7}};
      for (const Column& col : kColumns) {
        report::Series s;
        s.label = col.label;
        s.dashed = col.dashed;
        s.color = col.color;
        for (const QueueSample* x : rows[queue]) {
          s.x.push_back(static_cast<double>(x->t) / 3600.0);
          s.y.push_back(x->*col.value);
        }
        c.series.push_back(std::move(s));
      }
      panel.charts.push_back(std::move(c));
    }
    set.panels.push_back(std::move(panel));
  }
  if (set.panels.empty()) return std::nullopt;
  set.notes = {"Per queue over time, in GPUs (the columns of queues.csv), for the first seed of each configuration: "
               "allocated, guaranteed, fair share (weighted, instant), borrowed (above its guarantee), lent (by its "
               "Standby replicas) and pending. An inner queue's figures sum its subtree's.",
               "Pick a configuration; the filter keeps the charts whose title (the queue's path) contains its text."};
  set.tables.push_back(std::move(t));
  return set;
}
}  // namespace

StatusOr<std::string> WriteSimulateOutputs(const std::string& dir, const std::string& scenario,
                                           const std::vector<std::vector<SimulateResult>>& results,
                                           double wall_seconds) {
  ESTUARY_RETURN_IF_ERROR(MakeOutputDir(dir));
  nlohmann::json summary = GeneralSummary(scenario, results, wall_seconds);
  report::Report rep;
  rep.title = "estuary simulate: " + scenario;
  report::Table t;
  t.title = "Metrics (mean over seeds)";
  std::set<std::string> metric_names;
  for (const auto& per_seed : results) {
    for (const SimulateResult& r : per_seed) {
      for (const auto& [k, v] : r.metrics) metric_names.insert(k);
    }
  }
  t.header = {"metric"};
  for (const auto& per_seed : results) t.header.push_back(per_seed.empty() ? "" : per_seed[0].configuration);
  std::map<std::string, std::vector<std::string>> rows;
  report::Chart alloc{"alloc_time", "GPU allocation ratio over time", "time (hours)", "GPU allocation ratio (%)", {}};
  report::Chart free{"free_nodes_time", "Wholly free nodes over time", "time (hours)", "free nodes", {}};
  report::Chart asws{"free_asws_time", "Wholly free ASWs over time", "time (hours)", "free ASWs", {}};
  report::Chart pods{"free_rdma_pods_time", "Wholly free RDMA-PODs over time", "time (hours)", "free RDMA-PODs", {}};
  std::ostringstream ts;
  report::Chart idle_hour{"idle_by_hour", "Idle GPU-hours by hour of day (mean over seeds)", "local hour of day",
                          "idle GPU-hours", {}};
  report::Chart hp_hour{"alloc_hp_by_hour", "HP allocation ratio by hour of day (metrics.md §4, mean over samples and seeds)",
                        "local hour of day", "alloc_ratio_hp (%)", {}};
  report::Chart all_hour{"alloc_hp_lp_by_hour",
                         "HP+LP allocation ratio by hour of day (metrics.md §4, mean over samples and seeds)",
                         "local hour of day", "alloc_ratio_hp_lp (%)", {}};
  std::ostringstream ih;
  ih << "configuration,seed,hour,idle_gpu_hours\n";
  ts << "configuration,seed,time_s,gpu_alloc_pct,free_nodes,pending_jobs,free_asws,free_rdma_pods,alloc_ratio_hp_pct,"
        "alloc_ratio_hp_lp_pct,idle_gpus,local_hour\n";
  auto count = [](int64_t v) { return v < 0 ? std::string() : std::to_string(v); };  // -1: no such level
  for (size_t ci = 0; ci < results.size(); ++ci) {
    const auto& per_seed = results[ci];
    if (per_seed.empty()) continue;
    nlohmann::json m = nlohmann::json::object();
    for (const std::string& k : metric_names) {
      double s = 0;
      int n = 0;
      for (const SimulateResult& r : per_seed) {
        auto it = r.metrics.find(k);
        if (it != r.metrics.end()) {
          s += it->second;
          ++n;
        }
      }
      if (n > 0) m[k] = Round4(s / n);
      rows[k].push_back(n > 0 ? Fixed(s / n) : "-");
    }
    summary["configurations"][per_seed[0].configuration] = m;
    for (const SimulateResult& r : per_seed) {
      for (const SimSample& x : r.samples) {
        ts << r.configuration << ',' << r.seed << ',' << x.time << ',' << Round4(x.gpu_alloc_pct) << ',' << x.free_nodes
           << ',' << x.pending_jobs << ',' << count(x.free_asws) << ',' << count(x.free_rdma_pods) << ','
           << Round4(x.alloc_ratio_hp_pct) << ',' << Round4(x.alloc_ratio_hp_lp_pct) << ',' << Round4(x.idle_gpus) << ','
           << x.local_hour << '\n';
      }
      for (int h = 0; h < 24; ++h) ih << r.configuration << ',' << r.seed << ',' << h << ',' << Round4(r.idle_gpu_hours_by_hour[h]) << '\n';
    }
    // By hour of day: idle GPU-hours (mean over seeds), allocation ratios (mean over samples).
    report::Series ih_s, hp_s, all_s;
    ih_s.label = hp_s.label = all_s.label = per_seed[0].configuration;
    ih_s.color = hp_s.color = all_s.color = static_cast<int>(ci);
    std::array<double, 24> hp_sum{}, all_sum{};
    std::array<int64_t, 24> n_hour{};
    for (const SimulateResult& r : per_seed) {
      for (const SimSample& x : r.samples) {
        hp_sum[x.local_hour] += x.alloc_ratio_hp_pct;
        all_sum[x.local_hour] += x.alloc_ratio_hp_lp_pct;
        ++n_hour[x.local_hour];
      }
    }
    for (int h = 0; h < 24; ++h) {
      double idle = 0;
      for (const SimulateResult& r : per_seed) idle += r.idle_gpu_hours_by_hour[h];
      ih_s.x.push_back(h);
      ih_s.y.push_back(idle / static_cast<double>(per_seed.size()));
      if (n_hour[h] == 0) continue;
      hp_s.x.push_back(h);
      hp_s.y.push_back(hp_sum[h] / static_cast<double>(n_hour[h]));
      all_s.x.push_back(h);
      all_s.y.push_back(all_sum[h] / static_cast<double>(n_hour[h]));
    }
    idle_hour.series.push_back(ih_s);
    hp_hour.series.push_back(hp_s);
    all_hour.series.push_back(all_s);
    report::Series a, f, w, p;
    a.label = f.label = w.label = p.label = per_seed[0].configuration + " (seed " + std::to_string(per_seed[0].seed) + ")";
    a.color = f.color = w.color = p.color = static_cast<int>(ci);
    for (const SimSample& x : per_seed[0].samples) {
      const double hours = static_cast<double>(x.time) / 3600.0;
      a.x.push_back(hours);
      a.y.push_back(x.gpu_alloc_pct);
      f.x.push_back(hours);
      f.y.push_back(static_cast<double>(x.free_nodes));
      if (x.free_asws >= 0) {
        w.x.push_back(hours);
        w.y.push_back(static_cast<double>(x.free_asws));
      }
      if (x.free_rdma_pods >= 0) {
        p.x.push_back(hours);
        p.y.push_back(static_cast<double>(x.free_rdma_pods));
      }
    }
    alloc.series.push_back(a);
    free.series.push_back(f);
    if (!w.x.empty()) asws.series.push_back(w);
    if (!p.x.empty()) pods.series.push_back(p);
    // Each seed's own metrics, next to the means.
    for (const SimulateResult& r : per_seed) {
      nlohmann::json one = nlohmann::json::object();
      for (const auto& [k, v] : r.metrics) one[k] = Round4(v);
      summary["per_seed"][per_seed[0].configuration][std::to_string(r.seed)] = one;
    }
  }
  for (const auto& [k, vals] : rows) {
    std::vector<std::string> row = {k};
    row.insert(row.end(), vals.begin(), vals.end());
    t.rows.push_back(row);
  }
  rep.tables.push_back(t);
  rep.charts = {alloc, free, idle_hour, hp_hour, all_hour};
  if (!asws.series.empty()) rep.charts.push_back(asws);
  if (!pods.series.empty()) rep.charts.push_back(pods);
  if (std::optional<report::PanelSet> queues = QueuePanels(results)) rep.panel_sets.push_back(std::move(*queues));
  ESTUARY_RETURN_IF_ERROR(WriteTextFile(dir + "/summary.json", summary.dump(2) + "\n"));
  ESTUARY_RETURN_IF_ERROR(WriteTextFile(dir + "/timeseries.csv", ts.str()));
  ESTUARY_RETURN_IF_ERROR(WriteTextFile(dir + "/jobs.csv", JobsCsv(results)));
  ESTUARY_RETURN_IF_ERROR(WriteTextFile(dir + "/idle_by_hour.csv", ih.str()));
  if (const std::optional<std::string> ev = JobEventsCsv(results)) {
    ESTUARY_RETURN_IF_ERROR(WriteTextFile(dir + "/job_events.csv", *ev));
  }
  if (const std::optional<std::string> q = QueuesCsv(results)) ESTUARY_RETURN_IF_ERROR(WriteTextFile(dir + "/queues.csv", *q));
  const std::string html = dir + "/report.html";
  ESTUARY_RETURN_IF_ERROR(report::WriteHtmlReport(rep, html));
  return html;
}

}  // namespace estuary
