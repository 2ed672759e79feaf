#include "tools/history_cmds.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/history.h"
#include "sim/history_scenario.h"
#include "sim/trace/csv_fields.h"
#include "store/sqlite_store.h"

namespace estuary {
namespace {

int Fail(const Status& st) {
  std::fprintf(stderr, "estuary: %s\n", st.message().c_str());
  return st.ExitCode();
}

}  // namespace

CLI::App* AddHistoryCommand(CLI::App& app, HistoryFlags& f, CLI::App** export_cmd, CLI::App** scenario_cmd) {
  CLI::App* h = app.add_subcommand("history", "the live service's recorded history (docs/history.md)");
  h->require_subcommand(1);
  CLI::App* e = h->add_subcommand("export", "write the service's recorded inputs and decisions as a history file "
                                            "that `estuary simulate FILE` replays exactly");
  e->add_option("--data", f.data, "the service's --data directory (SQLite: DIR/estuary.db)")->required();
  e->add_option("--out", f.out, "the history file to write (JSON lines)")->required();
  *export_cmd = e;
  CLI::App* w = h->add_subcommand("scenario", "write a history file's workload (cluster, jobs with their observed run "
                                              "times, node failures, configuration) as a what-if scenario");
  w->add_option("history", f.history, "the history file (from history export)")->required();
  w->add_option("--out", f.out, "the scenario file to write (its cluster spec goes beside it: STEM.cluster.yaml)")->required();
  *scenario_cmd = w;
  return h;
}

int RunHistoryExport(const HistoryFlags& f) {
  // Opening would create an empty store: a directory without one is an error here.
  if (!std::filesystem::exists(std::filesystem::path(f.data) / "estuary.db")) {
    return Fail(InvalidArgument("--data " + f.data + ": no estuary.db there"));
  }
  auto store = SqliteStore::Open(f.data, SqliteOptions{});
  if (!store.ok()) return Fail(InvalidArgument("--data " + f.data + ": " + store.status().message()));
  std::ofstream out(f.out);
  if (!out) return Fail(InvalidArgument("--out " + f.out + ": cannot write"));
  out << HistoryHeaderLine() << "\n";
  int64_t records = 0, segments = 0;
  const Status st = (*store)->Scan("hist/", [&](std::string_view, std::string_view v) {
    out << v << "\n";
    ++records;
    segments += v.rfind("{\"config\"", 0) == 0;
    return true;
  });
  if (!st.ok()) return Fail(st);
  out.close();
  if (!out) return Fail(InvalidArgument("--out " + f.out + ": write failed"));
  if (records == 0) return Fail(InvalidArgument("--data " + f.data + ": no recorded history"));
  std::printf("history: %lld records in %lld segments -> %s\n", static_cast<long long>(records),
              static_cast<long long>(segments), f.out.c_str());
  return 0;
}

int RunHistoryScenario(const HistoryFlags& f) {
  auto records = ReadHistoryFile(f.history);
  if (!records.ok()) return Fail(records.status());
  const std::filesystem::path out(f.out);
  const std::string cluster_name = out.stem().string() + ".cluster.yaml";
  auto sc = HistoryToScenario(*records, "what-if of " + f.history, cluster_name);
  if (!sc.ok()) return Fail(InvalidArgument(f.history + ": " + sc.status().message()));
  const std::filesystem::path cluster = out.parent_path() / cluster_name;
  std::ofstream(out) << sc->scenario_yaml;
  std::ofstream(cluster) << sc->cluster_yaml;
  if (!std::ifstream(out) || !std::ifstream(cluster)) return Fail(InvalidArgument("--out " + f.out + ": cannot write"));
  std::printf("scenario: %lld jobs (%lld ended on their own in the history, %lld cancelled) -> %s, %s\n",
              static_cast<long long>(sc->jobs), static_cast<long long>(sc->finished),
              static_cast<long long>(sc->cancelled), f.out.c_str(), cluster.string().c_str());
  return 0;
}

bool IsHistoryFile(const std::string& path) {
  std::ifstream in(path);
  std::string first;
  return in && std::getline(in, first) && first.rfind("{\"estuary_history\"", 0) == 0;
}

int RunHistoryReplay(const std::string& path, const std::string& out) {
  auto records = ReadHistoryFile(path);
  if (!records.ok()) return Fail(records.status());
  std::vector<std::pair<int64_t, EngineEvent>> events;
  auto r = ReplayHistory(*records, [&](int64_t segment, const EngineEvent& e) { events.emplace_back(segment, e); });
  if (!r.ok()) return Fail(InvalidArgument(path + ": " + r.status().message()));
  const bool same = r->first_difference < 0;
  std::printf("replay %s: %lld segments, %lld inputs, %zu decisions replayed, %lld recorded: %s\n", path.c_str(),
              static_cast<long long>(r->segments), static_cast<long long>(r->inputs), r->events.size(),
              static_cast<long long>(r->recorded_events), same ? "identical" : "DIFFERENT");
  std::printf("gpu_alloc_pct_mean=%.4f jobs_finished=%lld\n", r->gpu_alloc_pct_mean, static_cast<long long>(r->jobs_finished));
  if (!same) std::printf("first difference at decision %lld: %s\n", static_cast<long long>(r->first_difference), r->difference.c_str());
  if (!out.empty()) {
    std::ofstream csv(out + "/job_events.csv");
    csv << "segment,t,kind,job,replicas,for_job,at,never,requeued,detail\n";
    for (const auto& [segment, e] : events) {
      csv << segment << "," << e.t << "," << EngineEventKindName(e.kind) << "," << e.job << "," << e.replicas << ","
          << (e.for_job == UINT32_MAX ? std::string() : std::to_string(e.for_job)) << "," << e.at << ","
          << (e.never ? 1 : 0) << "," << (e.requeued ? 1 : 0) << "," << CsvQuoted(e.detail) << "\n";
    }
    nlohmann::json s = {{"history", path},
                        {"segments", r->segments},
                        {"inputs", r->inputs},
                        {"decisions", r->events.size()},
                        {"recorded_decisions", r->recorded_events},
                        {"identical", same},
                        {"gpu_alloc_pct_mean", r->gpu_alloc_pct_mean},
                        {"jobs_finished", r->jobs_finished}};
    if (!same) s["first_difference"] = {{"index", r->first_difference}, {"what", r->difference}};
    std::ofstream(out + "/summary.json") << s.dump(2) << "\n";
    if (!csv) return Fail(Internal(out + "/job_events.csv: write failed"));
    std::printf("events: %s/job_events.csv\nsummary: %s/summary.json\n", out.c_str(), out.c_str());
  }
  return same ? 0 : 1;
}

}  // namespace estuary
