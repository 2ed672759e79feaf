#include "tools/history_cmds.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/history.h"
#include "sim/trace/csv_fields.h"
#include "store/sqlite_store.h"

namespace estuary {
namespace {

int Fail(const Status& st) {
  std::fprintf(stderr, "estuary: %s\n", st.message().c_str());
  return st.ExitCode();
}

}  // namespace

CLI::App* AddHistoryCommand(CLI::App& app, HistoryFlags& f, CLI::App** export_cmd) {
  CLI::App* h = app.add_subcommand("history", "the live service's recorded history (docs/history.md)");
  h->require_subcommand(1);
  CLI::App* e = h->add_subcommand("export", "write the service's recorded inputs and decisions as a history file "
                                            "that `estuary simulate FILE` replays exactly");
  e->add_option("--data", f.data, "the service's --data directory (SQLite: DIR/estuary.db)")->required();
  e->add_option("--out", f.out, "the history file to write (JSON lines)")->required();
  *export_cmd = e;
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
                        {"identical", same}};
    if (!same) s["first_difference"] = {{"index", r->first_difference}, {"what", r->difference}};
    std::ofstream(out + "/summary.json") << s.dump(2) << "\n";
    if (!csv) return Fail(Internal(out + "/job_events.csv: write failed"));
    std::printf("events: %s/job_events.csv\nsummary: %s/summary.json\n", out.c_str(), out.c_str());
  }
  return same ? 0 : 1;
}

}  // namespace estuary
