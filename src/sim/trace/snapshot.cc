#include "sim/trace/snapshot.h"

#include <csv.h>

#include <algorithm>
#include <optional>
#include <sstream>
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

constexpr const char* kRequired[] = {"task", "job", "node", "gpus", "gpu_milli", "cpu_milli", "memory_mib", "locked"};

// One parsed row, before binding.
struct Row {
  unsigned line = 0;
  std::string task, job, node_name;
  NodeId node;
  GpuIndices gpus;
  TaskRequest req;
  bool locked = false;
  int32_t priority = 0;
  PlaneId plane;
  int level = -1;
};

// What every row of one job must agree on.
struct JobInfo {
  unsigned first_line = 0;
  int32_t priority = 0;
  PlaneId plane;
  int level = -1;
  int32_t rows = 0;
  JobId id;
};

std::string_view TrimView(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

StatusOr<bool> ParseLocked(const FieldRef& ref, std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  return InvalidArgument(ref.Prefix() + "'" + text + "' is not true, false, 1 or 0");
}

// The `;`-separated GPU indices of a node with `gpu_count` GPUs, ascending.
StatusOr<GpuIndices> ParseGpus(const FieldRef& ref, std::string_view text, const Node& node) {
  GpuIndices out;
  if (TrimView(text).empty()) return out;
  uint32_t seen = 0;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(';', start);
    const std::string_view part = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    int64_t i = 0;
    ESTUARY_ASSIGN_OR_RETURN(i, ParseNonNegative(ref, part));
    if (i >= node.spec.gpu_count) {
      return InvalidArgument(ref.Prefix() + "GPU index " + std::to_string(i) + " out of range: node '" +
                             node.spec.name + "' has " + std::to_string(node.spec.gpu_count) + " GPUs");
    }
    if (seen >> i & 1) return InvalidArgument(ref.Prefix() + "GPU index " + std::to_string(i) + " repeated");
    seen |= uint32_t{1} << i;
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  for (int i = 0; i < kMaxGpusPerNode; ++i) {
    if (seen >> i & 1) out.Push(i);
  }
  return out;
}

// Checks that `r` fits on its node as the state stands; names the resource it over-commits.
Status CheckFits(const std::string& path, const Row& r, const ClusterState& state) {
  const Node& n = state.node(r.node);
  for (uint8_t g : r.gpus) {
    if (n.gpu_free[g] < r.req.gpu_milli) {
      return InvalidArgument(FieldRef{&path, r.line, "gpus"}.Prefix() + "over-commits GPU " + std::to_string(g) +
                             " of node '" + n.spec.name + "': " + std::to_string(r.req.gpu_milli) + " milli asked, " +
                             std::to_string(n.gpu_free[g]) + " free");
    }
  }
  if (n.cpu_free < r.req.cpu_milli) {
    return InvalidArgument(FieldRef{&path, r.line, "cpu_milli"}.Prefix() + "over-commits the CPU of node '" +
                           n.spec.name + "': " + std::to_string(r.req.cpu_milli) + " milli asked, " +
                           std::to_string(n.cpu_free) + " free");
  }
  if (n.mem_free < r.req.mem_mib) {
    return InvalidArgument(FieldRef{&path, r.line, "memory_mib"}.Prefix() + "over-commits the memory of node '" +
                           n.spec.name + "': " + std::to_string(r.req.mem_mib) + " MiB asked, " +
                           std::to_string(n.mem_free) + " free");
  }
  return Status::Ok();
}

// Parses the fields of one row (everything but the job-wide agreement and the binding).
Status ParseRow(const std::string& path, const ClusterState& state,
                const std::unordered_map<std::string, NodeId>& nodes, Row& r, const std::string& gpus,
                const std::string& gpu_milli, const std::string& cpu, const std::string& mem,
                const std::string& locked, const std::string& models, const std::string& priority,
                const std::string& plane, const std::string& level) {
  if (r.task.empty()) return InvalidArgument(FieldRef{&path, r.line, "task"}.Prefix() + "empty task name");
  if (r.job.empty()) return InvalidArgument(FieldRef{&path, r.line, "job"}.Prefix() + "empty job name");
  const FieldRef at_node{&path, r.line, "node"};
  auto it = nodes.find(r.node_name);
  if (it == nodes.end()) return InvalidArgument(at_node.Prefix() + "unknown node '" + r.node_name + "'");
  r.node = it->second;
  const Node& n = state.node(r.node);
  ESTUARY_ASSIGN_OR_RETURN(r.gpus, ParseGpus({&path, r.line, "gpus"}, gpus, n));
  const FieldRef at_milli{&path, r.line, "gpu_milli"};
  int64_t milli = 0;
  ESTUARY_ASSIGN_OR_RETURN(milli, ParseNonNegative(at_milli, gpu_milli));
  if (r.gpus.size == 0 && milli != 0) {
    return InvalidArgument(at_milli.Prefix() + std::to_string(milli) + " for a task holding no GPU (expected 0)");
  }
  if (r.gpus.size > 0 && (milli < 1 || milli > kMilliPerGpu)) {
    return InvalidArgument(at_milli.Prefix() + std::to_string(milli) + " is out of range 1..1000");
  }
  if (r.gpus.size > 1 && milli != kMilliPerGpu) {
    return InvalidArgument(at_milli.Prefix() + std::to_string(milli) + " with " + std::to_string(r.gpus.size) +
                           " GPUs (a task on several GPUs holds each wholly: 1000)");
  }
  r.req.gpu_count = r.gpus.size;
  r.req.gpu_milli = static_cast<MilliGpu>(milli);
  ESTUARY_ASSIGN_OR_RETURN(r.req.cpu_milli, ParseNonNegative({&path, r.line, "cpu_milli"}, cpu));
  ESTUARY_ASSIGN_OR_RETURN(r.req.mem_mib, ParseNonNegative({&path, r.line, "memory_mib"}, mem));
  ESTUARY_ASSIGN_OR_RETURN(r.locked, ParseLocked({&path, r.line, "locked"}, locked));
  const FieldRef at_models{&path, r.line, "models"};
  auto set = state.models().ParseSet(models);
  if (!set.ok()) return InvalidArgument(at_models.Prefix() + set.status().message());
  r.req.models = *set;
  if (r.req.NeedsGpu() && !r.req.models.Admits(n.spec.model)) {
    return InvalidArgument(at_models.Prefix() + "node '" + n.spec.name + "' has GPU model '" +
                           state.models().Name(n.spec.model) + "', which '" + models + "' does not admit");
  }
  std::optional<int64_t> prio;
  ESTUARY_ASSIGN_OR_RETURN(prio, ParseOptionalNonNegative({&path, r.line, "priority"}, priority, kMaxPriority));
  r.priority = static_cast<int32_t>(prio.value_or(0));
  const FieldRef at_plane{&path, r.line, "plane"}, at_level{&path, r.line, "required_level"};
  if (plane.empty() != level.empty()) {
    return InvalidArgument((plane.empty() ? at_plane : at_level).Prefix() +
                           "plane and required_level go together (both or neither)");
  }
  if (!plane.empty()) {
    auto p = state.topology().FindPlane(plane);
    if (!p) return InvalidArgument(at_plane.Prefix() + "unknown plane '" + plane + "'");
    auto l = state.topology().FindLevel(*p, level);
    if (!l) return InvalidArgument(at_level.Prefix() + "plane '" + plane + "' has no level '" + level + "'");
    r.plane = *p;
    r.level = *l;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Snapshot> ReadSnapshot(const std::string& path, ClusterState& state) {
  ESTUARY_CHECK(state.tasks().empty() && state.jobs().empty());
  std::unordered_map<std::string, NodeId> nodes;
  for (const Node& n : state.nodes()) nodes.emplace(n.spec.name, n.id);
  std::vector<Row> rows;
  std::unordered_map<std::string, unsigned> task_lines;
  std::unordered_map<std::string, JobInfo> jobs;
  std::vector<std::string> job_order;
  try {
    ESTUARY_RETURN_IF_ERROR(CheckReadableFile(path));
    io::CSVReader<12, Trim, Quote, io::throw_on_overflow, Comment> in(path);
    in.read_header(io::ignore_missing_column, "task", "job", "node", "gpus", "gpu_milli", "cpu_milli", "memory_mib",
                   "locked", "models", "priority", "plane", "required_level");
    for (const char* c : kRequired) {
      if (!in.has_column(c)) return InvalidArgument(path + ":1: missing column '" + c + "'");
    }
    std::string task, job, node, gpus, milli, cpu, mem, locked, models, priority, plane, level;
    while (true) {
      // Optional columns absent from the header are left untouched by read_row: clear them.
      models.clear();
      priority.clear();
      plane.clear();
      level.clear();
      if (!in.read_row(task, job, node, gpus, milli, cpu, mem, locked, models, priority, plane, level)) break;
      Row r;
      r.line = in.get_file_line();
      r.task = task;
      r.job = job;
      r.node_name = node;
      ESTUARY_RETURN_IF_ERROR(
          ParseRow(path, state, nodes, r, gpus, milli, cpu, mem, locked, models, priority, plane, level));
      if (auto [it, inserted] = task_lines.emplace(r.task, r.line); !inserted) {
        return InvalidArgument(FieldRef{&path, r.line, "task"}.Prefix() + "duplicate task name '" + r.task +
                               "' (first on line " + std::to_string(it->second) + ")");
      }
      auto [jt, first] = jobs.try_emplace(r.job);
      JobInfo& ji = jt->second;
      if (first) {
        ji.first_line = r.line;
        ji.priority = r.priority;
        ji.plane = r.plane;
        ji.level = r.level;
        job_order.push_back(r.job);
      } else {
        const std::string since = " on line " + std::to_string(ji.first_line);
        if (ji.priority != r.priority) {
          return InvalidArgument(FieldRef{&path, r.line, "priority"}.Prefix() + "job '" + r.job + "' has priority " +
                                 std::to_string(ji.priority) + since + ", " + std::to_string(r.priority) + " here");
        }
        if (ji.plane != r.plane || ji.level != r.level) {
          return InvalidArgument(FieldRef{&path, r.line, r.plane != ji.plane ? "plane" : "required_level"}.Prefix() +
                                 "job '" + r.job + "' has another plane or required_level" + since);
        }
      }
      ++ji.rows;
      rows.push_back(std::move(r));
    }
  } catch (const io::error::base& e) {
    return CsvError(path, e);
  }

  Snapshot snap;
  state.Reserve(rows.size(), jobs.size());
  for (const std::string& name : job_order) {
    JobInfo& ji = jobs[name];
    JobSpec spec;
    spec.name = name;
    spec.min_replicas = spec.max_replicas = ji.rows;
    spec.priority = ji.priority;
    spec.topology.plane = ji.plane;
    spec.topology.required_level = ji.level;
    ji.id = state.AddJob(std::move(spec));
  }
  for (const Row& r : rows) {
    ESTUARY_RETURN_IF_ERROR(CheckFits(path, r, state));
    const TaskId t = state.AddTask(jobs[r.job].id, r.task, r.req, r.priority);
    ESTUARY_CHECK(state.CanBind(t, r.node, r.gpus));
    state.Bind(t, r.node, r.gpus);
    snap.locked.push_back(r.locked ? 1 : 0);
    snap.locked_tasks += r.locked;
  }
  snap.tasks = static_cast<int64_t>(rows.size());
  snap.jobs = static_cast<int64_t>(jobs.size());
  return snap;
}

std::string WriteSnapshot(const ClusterState& state, std::span<const char> locked) {
  std::ostringstream o;
  o << "task,job,node,gpus,gpu_milli,cpu_milli,memory_mib,locked,models,priority,plane,required_level\n";
  for (const Task& t : state.tasks()) {
    if (t.state != TaskState::kBound) continue;
    const Job& j = state.job(t.job);
    o << CsvQuoted(t.name) << ',' << CsvQuoted(j.spec.name) << ',' << CsvQuoted(state.node(t.node).spec.name) << ',';
    for (uint8_t i = 0; i < t.gpus.size; ++i) o << (i ? ";" : "") << int{t.gpus.idx[i]};
    o << ',' << (t.req.gpu_count > 0 ? t.req.gpu_milli : 0) << ',' << t.req.cpu_milli << ',' << t.req.mem_mib << ',';
    const bool lk = t.id.value() < locked.size() && locked[t.id.value()] != 0;
    o << (lk ? "true" : "false") << ',';
    std::string models;
    for (size_t m = 0; m < state.models().size(); ++m) {
      if (t.req.models.bits() >> m & 1) {
        models += (models.empty() ? "" : "|") + state.models().Name(GpuModelId(static_cast<uint32_t>(m)));
      }
    }
    o << CsvQuoted(models) << ',' << t.priority << ',';
    const TopologyConstraint& tc = j.spec.topology;
    if (tc.plane.valid() && tc.required_level >= 0) {
      const Plane& p = state.topology().plane(tc.plane);
      o << CsvQuoted(p.name) << ',' << CsvQuoted(p.levels[tc.required_level]);
    } else {
      o << ',';
    }
    o << '\n';
  }
  return o.str();
}

}  // namespace estuary
