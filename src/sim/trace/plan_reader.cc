#include "sim/trace/plan_reader.h"

#include <csv.h>

#include <algorithm>
#include <unordered_map>

#include "common/check.h"
#include "sim/trace/csv_fields.h"
#include "sim/trace/csv_io.h"

namespace estuary {
namespace {

using csvio::CheckReadableFile;
using csvio::Comment;
using csvio::CsvError;
using csvio::Quote;
using csvio::Trim;

constexpr const char* kColumns[] = {"step", "task", "job", "from", "to", "gpus", "chain", "after"};

// One row as text, before any check.
struct RawRow {
  unsigned line = 0;
  std::string step, task, job, from, to, gpus, chain, after;
};

// The `;`-separated non-negative integers of `text` (empty: none), each at most `max`.
StatusOr<std::vector<int64_t>> ParseList(const FieldRef& ref, const std::string& text, int64_t max) {
  std::vector<int64_t> out;
  if (text.find_first_not_of(" \t") == std::string::npos) return out;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(';', start);
    const std::string part = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    int64_t v = 0;
    ESTUARY_ASSIGN_OR_RETURN(v, ParseNonNegative(ref, part, max));
    out.push_back(v);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::string Str(int64_t v) { return std::to_string(v); }

// Checks row `r` (step index `k`, 0-based) against `state` as it stands before the step, and fills
// `s`. `steps` is the number of rows in the file.
Status CheckStep(const std::string& path, const RawRow& r, size_t k, size_t steps, const ClusterState& state,
                 std::span<const char> locked, const std::unordered_map<std::string, TaskId>& tasks,
                 const std::unordered_map<std::string, NodeId>& nodes, PlanStep& s) {
  auto at = [&](const char* column) { return FieldRef{&path, r.line, column}; };
  s.line = r.line;
  // step: 1, 2, ... in file order.
  int64_t step = 0;
  ESTUARY_ASSIGN_OR_RETURN(step, ParseNonNegative(at("step"), r.step));
  if (step != static_cast<int64_t>(k) + 1) {
    const std::string why = step >= 1 && step <= static_cast<int64_t>(k) ? "duplicate step " : "bad step ";
    return InvalidArgument(at("step").Prefix() + why + Str(step) + ": expected " + Str(static_cast<int64_t>(k) + 1) +
                           " (steps are numbered 1, 2, ... in file order)");
  }
  // task and job.
  auto t = tasks.find(r.task);
  if (t == tasks.end()) return InvalidArgument(at("task").Prefix() + "unknown task '" + r.task + "'");
  s.task = t->second;
  const Task& task = state.task(s.task);
  if (s.task.value() < locked.size() && locked[s.task.value()] != 0) {
    return InvalidArgument(at("task").Prefix() + "task '" + r.task + "' is locked (a locked task never moves)");
  }
  const Job& job = state.job(task.job);
  if (r.job != job.spec.name) {
    return InvalidArgument(at("job").Prefix() + "task '" + r.task + "' belongs to job '" + job.spec.name + "', not '" +
                           r.job + "'");
  }
  // from: where the task is now.
  auto f = nodes.find(r.from);
  if (f == nodes.end()) return InvalidArgument(at("from").Prefix() + "unknown node '" + r.from + "'");
  s.from = f->second;
  const std::string& here = state.node(task.node).spec.name;
  if (s.from != task.node) {
    return InvalidArgument(at("from").Prefix() + "task '" + r.task + "' is on '" + here + "' at step " + Str(step) +
                           ", not '" + r.from + "'");
  }
  // to: another node the task may run on.
  auto d = nodes.find(r.to);
  if (d == nodes.end()) return InvalidArgument(at("to").Prefix() + "unknown node '" + r.to + "'");
  s.to = d->second;
  const Node& to = state.node(s.to);
  if (s.to == s.from) return InvalidArgument(at("to").Prefix() + "task '" + r.task + "' is already on '" + r.to + "'");
  if (!to.Schedulable()) return InvalidArgument(at("to").Prefix() + "node '" + r.to + "' is not ready");
  const TaskRequest& req = task.req;
  if (req.NeedsGpu() && !req.models.Admits(to.spec.model)) {
    return InvalidArgument(at("to").Prefix() + "task '" + r.task + "' does not admit GPU model '" +
                           state.models().Name(to.spec.model) + "' of node '" + r.to + "'");
  }
  const TopologyConstraint& tc = job.spec.topology;
  if (tc.plane.valid() && tc.required_level >= 0) {
    const Topology& topo = state.topology();
    const DomainId want = topo.NodeDomain(s.from, tc.plane, tc.required_level);
    if (topo.NodeDomain(s.to, tc.plane, tc.required_level) != want) {
      return InvalidArgument(at("to").Prefix() + "node '" + r.to + "' is outside the " +
                             topo.plane(tc.plane).levels[tc.required_level] + " domain job '" + job.spec.name +
                             "' must stay in");
    }
  }
  // gpus: in range, distinct, as many as asked, each with room while the task is still on `from`.
  std::vector<int64_t> gpus;
  ESTUARY_ASSIGN_OR_RETURN(gpus, ParseList(at("gpus"), r.gpus, kMaxFieldValue));
  const int64_t want = req.NeedsGpu() ? req.gpu_count : 0;
  if (static_cast<int64_t>(gpus.size()) != want) {
    return InvalidArgument(at("gpus").Prefix() + Str(static_cast<int64_t>(gpus.size())) + " GPU indices for task '" +
                           r.task + "', which holds " + Str(want));
  }
  uint32_t seen = 0;
  for (int64_t g : gpus) {
    if (g >= to.spec.gpu_count) {
      return InvalidArgument(at("gpus").Prefix() + "GPU index " + Str(g) + " out of range: node '" + r.to + "' has " +
                             Str(to.spec.gpu_count) + " GPUs");
    }
    if (seen >> g & 1) return InvalidArgument(at("gpus").Prefix() + "GPU index " + Str(g) + " repeated");
    seen |= uint32_t{1} << g;
    if (to.gpu_free[g] < req.gpu_milli) {
      return InvalidArgument(at("gpus").Prefix() + "GPU " + Str(g) + " of node '" + r.to + "' is taken at step " +
                             Str(step) + ": " + Str(to.gpu_free[g]) + " milli free, " + Str(req.gpu_milli) +
                             " needed");
    }
  }
  for (int g = 0; g < kMaxGpusPerNode; ++g) {
    if (seen >> g & 1) s.gpus.Push(g);
  }
  if (to.cpu_free < req.cpu_milli) {
    return InvalidArgument(at("to").Prefix() + "task '" + r.task + "' does not fit on '" + r.to + "' at step " +
                           Str(step) + ": CPU " + Str(req.cpu_milli) + " milli asked, " + Str(to.cpu_free) + " free");
  }
  if (to.mem_free < req.mem_mib) {
    return InvalidArgument(at("to").Prefix() + "task '" + r.task + "' does not fit on '" + r.to + "' at step " +
                           Str(step) + ": memory " + Str(req.mem_mib) + " MiB asked, " + Str(to.mem_free) + " free");
  }
  // chain and after.
  ESTUARY_ASSIGN_OR_RETURN(s.chain, ParseNonNegative(at("chain"), r.chain));
  std::vector<int64_t> after;
  ESTUARY_ASSIGN_OR_RETURN(after, ParseList(at("after"), r.after, kMaxFieldValue));
  for (int64_t a : after) {
    if (a < 1 || a > static_cast<int64_t>(steps)) {
      return InvalidArgument(at("after").Prefix() + "unknown step " + Str(a) + " (the plan has steps 1.." +
                             Str(static_cast<int64_t>(steps)) + ")");
    }
    if (a >= step) {
      return InvalidArgument(at("after").Prefix() + "step " + Str(a) + " is not before step " + Str(step));
    }
    s.after.push_back(static_cast<size_t>(a - 1));
  }
  std::sort(s.after.begin(), s.after.end());
  s.after.erase(std::unique(s.after.begin(), s.after.end()), s.after.end());
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<PlanStep>> ApplyPlanFile(const std::string& path, ClusterState& state,
                                              std::span<const char> locked) {
  std::vector<RawRow> rows;
  try {
    ESTUARY_RETURN_IF_ERROR(CheckReadableFile(path));
    io::CSVReader<8, Trim, Quote, io::throw_on_overflow, Comment> in(path);
    in.read_header(io::ignore_missing_column, "step", "task", "job", "from", "to", "gpus", "chain", "after");
    for (const char* c : kColumns) {
      if (!in.has_column(c)) return InvalidArgument(path + ":1: missing column '" + c + "'");
    }
    RawRow r;
    while (in.read_row(r.step, r.task, r.job, r.from, r.to, r.gpus, r.chain, r.after)) {
      r.line = in.get_file_line();
      rows.push_back(r);
    }
  } catch (const io::error::base& e) {
    return CsvError(path, e);
  }
  std::unordered_map<std::string, TaskId> tasks;
  for (const Task& t : state.tasks()) {
    if (t.state == TaskState::kBound) tasks.emplace(t.name, t.id);
  }
  std::unordered_map<std::string, NodeId> nodes;
  for (const Node& n : state.nodes()) nodes.emplace(n.spec.name, n.id);
  std::vector<PlanStep> steps(rows.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    PlanStep& s = steps[k];
    ESTUARY_RETURN_IF_ERROR(CheckStep(path, rows[k], k, rows.size(), state, locked, tasks, nodes, s));
    state.Unbind(s.task);
    ESTUARY_CHECK(state.CanBind(s.task, s.to, s.gpus));
    state.Bind(s.task, s.to, s.gpus);
  }
  return steps;
}

}  // namespace estuary
