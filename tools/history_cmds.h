// `estuary history export` and the exact replay of an exported history by `estuary simulate`
// (docs/history.md).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace estuary {

struct HistoryFlags {
  std::string data;  // export: the service's --data directory (SQLite)
  std::string out;   // export: the history file to write; scenario: the scenario file to write
  std::string history;  // scenario: the history file to read
};

// `history export` and `history scenario` (their App objects through the pointers).
CLI::App* AddHistoryCommand(CLI::App& app, HistoryFlags& f, CLI::App** export_cmd, CLI::App** scenario_cmd);
// Writes the service's recorded history (hist/ records of DIR/estuary.db) as a history file.
// Exit codes: 0; 2 a bad flag or an unreadable store (one line naming it).
int RunHistoryExport(const HistoryFlags& f);

// Writes a history file's workload as a what-if scenario (sim/history_scenario.h): OUT and, beside
// it, OUT's stem + ".cluster.yaml". Exit codes: 0; 2 a bad file or flag (one line naming it).
int RunHistoryScenario(const HistoryFlags& f);

// Whether `path` is a history file (its first line is the history header).
bool IsHistoryFile(const std::string& path);
// `estuary simulate HISTORY [--out DIR]`: the exact replay. Prints what it replayed and whether
// every decision is the recorded one; with `out`, writes DIR/job_events.csv (the replay's
// decisions) and DIR/summary.json. Exit codes: 0 identical; 1 the replay differs (the first
// difference printed); 2 a bad file (one line naming the file, line and field).
int RunHistoryReplay(const std::string& path, const std::string& out);

}  // namespace estuary
