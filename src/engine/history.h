// An engine's history as data: the configuration it was made with, every input it was given
// (inputs.h) and every event it reported (io.h), in the order they happened — what a live service
// records so that a run can be replayed exactly (estuary simulate on an exported history; see
// docs/history.md).
//
// A history is a sequence of segments, one per engine: a driver that rebuilds its engine (the
// service after a restart, or when it compacts its engine) starts a new segment. A segment starts
// with the configuration its engine was made with; an `inherit` record says where the new engine
// took over FGD's learned typical tasks and the tie-break order of the engine of the segment
// before it and, with `jobs`, its jobs' waits and the queues' cooldowns and usage (Engine::Inherit).
//
// The text form is JSON lines, one record per line:
//   {"estuary_history": 1}                         the first line
//   {"config": {...}}                              a segment starts
//   {"t": T, "input": {"kind": K, ...}, "n": C}    an input (C > 1: C identical cycles in a row)
//   {"t": T, "event": {"kind": K, ...}}            an event the engine reported
//   {"inherit": true, "jobs": true}                the engine inherits from the segment before
//                                                  ("jobs" absent: the typical tasks only)
// Thread-safety: none (plain data and functions).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/engine.h"
#include "engine/inputs.h"

namespace estuary {

struct HistorySegment {
  EngineConfig config;
};
struct HistoryInherit {
  bool jobs = false;  // Engine::Inherit's `jobs` (histories written before it was carried: false)
};

// One record of a history.
struct HistoryRecord {
  std::variant<HistorySegment, EngineInput, EngineEvent, HistoryInherit> what;
  int64_t repeat = 1;  // an EngineInput's count of identical inputs in a row (cycles only)
};

// JSON of one record (one line of the text form, without its newline); a segment's
// configuration must have no `typical` table and no `planning_clock` (a driver that gives them
// cannot be replayed from its inputs alone).
nlohmann::json HistoryRecordJson(const HistoryRecord& r);
// The record of one line; the Status names the field that is wrong ("input.job.min_replicas: ...").
StatusOr<HistoryRecord> HistoryRecordFromJson(const nlohmann::json& j);

// What an engine carried for one job (CarriedJob, without its id) as text, its nodes as `node`
// writes them (the history: ids; the service's store: names), and back (`node` reads one:
// nullopt for what is not a node, an invalid NodeId for one that is gone, which is skipped); an
// error names the field (e.g. "reclaim.tasks[1]: expected [job, replica]").
nlohmann::json CarriedJobJson(const CarriedJob& c, const std::function<nlohmann::json(NodeId)>& node);
StatusOr<CarriedJob> CarriedJobFromJson(const nlohmann::json& j,
                                        const std::function<std::optional<NodeId>(const nlohmann::json&)>& node);

// Appends `in` to `out`, folding it into the last record when both are the same cycle.
void AppendInput(std::vector<HistoryRecord>& out, EngineInput in);

// Reads a history file (text form). Errors name the file, the line and the field.
StatusOr<std::vector<HistoryRecord>> ReadHistoryFile(const std::string& path);
// The text form's first line.
std::string HistoryHeaderLine();

// What an exact replay found.
struct ReplayResult {
  int64_t segments = 0, inputs = 0;
  std::vector<EngineEvent> events;  // the replay's events, in order
  int64_t recorded_events = 0;
  // The first event where the replay differs from the recorded one (index into events; -1: none,
  // the replay made exactly the recorded decisions).
  int64_t first_difference = -1;
  std::string difference;  // what differs there, in words
  // The replayed cluster over time, from the first submission to the last input: the
  // time-weighted mean of allocated / all GPUs in percent (each input's state holding until the
  // next input's time), and the jobs that ended on their own (Finish).
  double gpu_alloc_pct_mean = 0;
  int64_t jobs_finished = 0;
};

// Applies every segment's inputs, at their recorded engine times, to a new engine made with the
// segment's configuration, and compares the events it reports with the recorded ones.
// `on_event` (optional) sees every replayed event with its segment.
StatusOr<ReplayResult> ReplayHistory(const std::vector<HistoryRecord>& records,
                                     const std::function<void(int64_t, const EngineEvent&)>& on_event = nullptr);

// "t kind job replicas for_job at never requeued detail": an event as one comparable line.
std::string EventLine(const EngineEvent& e);

}  // namespace estuary
