#include "sim/trace/openb_reader.h"

#include <csv.h>

#include <filesystem>
#include <unordered_set>

#include "sim/trace/csv_fields.h"
#include "sim/trace/csv_io.h"

namespace estuary {
namespace {

using csvio::CheckReadableFile;
using csvio::Comment;
using csvio::CsvError;
using csvio::Quote;
using csvio::Trim;

}  // namespace

StatusOr<std::vector<NodeRow>> ReadOpenbNodes(const std::string& path) {
  std::vector<NodeRow> rows;
  try {
    ESTUARY_RETURN_IF_ERROR(CheckReadableFile(path));
    io::CSVReader<5, Trim, Quote, io::throw_on_overflow, Comment> in(path);
    in.read_header(io::ignore_extra_column, "sn", "cpu_milli", "memory_mib", "gpu", "model");
    std::string sn, cpu, mem, gpu, model;
    while (in.read_row(sn, cpu, mem, gpu, model)) {
      NodeRow r;
      r.line = in.get_file_line();
      if (sn.empty()) return InvalidArgument(path + ":" + std::to_string(r.line) + ": column 'sn': empty node name");
      r.name = sn;
      ESTUARY_ASSIGN_OR_RETURN(r.cpu_milli, ParseNonNegative({&path, r.line, "cpu_milli"}, cpu));
      ESTUARY_ASSIGN_OR_RETURN(r.mem_mib, ParseNonNegative({&path, r.line, "memory_mib"}, mem));
      int64_t g = 0;
      ESTUARY_ASSIGN_OR_RETURN(g, ParseNonNegative({&path, r.line, "gpu"}, gpu));
      if (g > kMaxGpusPerNode) {
        return InvalidArgument(FieldRef{&path, r.line, "gpu"}.Prefix() + std::to_string(g) +
                               " GPUs exceed the limit of " + std::to_string(kMaxGpusPerNode) + " per node");
      }
      r.gpus = static_cast<int32_t>(g);
      if (r.gpus > 0 && model.empty()) {
        return InvalidArgument(FieldRef{&path, r.line, "model"}.Prefix() + "a node with GPUs needs a GPU model");
      }
      if (model.find('|') != std::string::npos) {
        return InvalidArgument(FieldRef{&path, r.line, "model"}.Prefix() + "one model per node, got '" + model + "'");
      }
      r.model = r.gpus > 0 ? model : "";
      rows.push_back(std::move(r));
    }
  } catch (const io::error::base& e) {
    return CsvError(path, e);
  }
  if (rows.empty()) return InvalidArgument(path + ": no nodes");
  return rows;
}

StatusOr<OpenbTaskList> ReadOpenbTasks(const std::string& path) {
  OpenbTaskList out;
  out.path = path;
  try {
    ESTUARY_RETURN_IF_ERROR(CheckReadableFile(path));
    io::CSVReader<11, Trim, Quote, io::throw_on_overflow, Comment> in(path);
    in.read_header(io::ignore_extra_column | io::ignore_missing_column, "name", "cpu_milli", "memory_mib",
                   "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time",
                   "scheduled_time");
    for (const char* required : {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}) {
      if (!in.has_column(required)) return InvalidArgument(path + ":1: missing column '" + required + "'");
    }
    out.has_time_columns = in.has_column("creation_time") && in.has_column("deletion_time");
    std::string name, cpu, mem, ngpu, milli, spec, qos, phase, ct, dt, st;
    while (in.read_row(name, cpu, mem, ngpu, milli, spec, qos, phase, ct, dt, st)) {
      OpenbTaskRow r;
      r.line = in.get_file_line();
      if (name.empty()) return InvalidArgument(path + ":" + std::to_string(r.line) + ": column 'name': empty task name");
      r.name = name;
      ESTUARY_ASSIGN_OR_RETURN(r.cpu_milli, ParseNonNegative({&path, r.line, "cpu_milli"}, cpu));
      ESTUARY_ASSIGN_OR_RETURN(r.mem_mib, ParseNonNegative({&path, r.line, "memory_mib"}, mem));
      int64_t n = 0, m = 0;
      ESTUARY_ASSIGN_OR_RETURN(n, ParseNonNegative({&path, r.line, "num_gpu"}, ngpu));
      ESTUARY_ASSIGN_OR_RETURN(m, ParseNonNegative({&path, r.line, "gpu_milli"}, milli));
      if (m > kMilliPerGpu) {
        return InvalidArgument(FieldRef{&path, r.line, "gpu_milli"}.Prefix() + "value " + std::to_string(m) +
                               " exceeds 1000 (one whole GPU)");
      }
      if (n > kMaxGpusPerNode) {
        return InvalidArgument(FieldRef{&path, r.line, "num_gpu"}.Prefix() + std::to_string(n) +
                               " GPUs exceed the limit of " + std::to_string(kMaxGpusPerNode));
      }
      if ((n == 0) != (m == 0)) {
        return InvalidArgument(FieldRef{&path, r.line, "gpu_milli"}.Prefix() + "num_gpu " + std::to_string(n) +
                               " with gpu_milli " + std::to_string(m) + " (both or neither must be 0)");
      }
      if (m < kMilliPerGpu && n > 1) {
        return InvalidArgument(FieldRef{&path, r.line, "gpu_milli"}.Prefix() + "a shared GPU (gpu_milli " +
                               std::to_string(m) + " < 1000) needs num_gpu 1, got " + std::to_string(n));
      }
      r.num_gpu = static_cast<int32_t>(n);
      r.gpu_milli = static_cast<MilliGpu>(m);
      r.gpu_spec = spec;
      r.qos = qos;
      r.phase = phase;
      ESTUARY_ASSIGN_OR_RETURN(r.creation_time, ParseOptionalNonNegative({&path, r.line, "creation_time"}, ct));
      ESTUARY_ASSIGN_OR_RETURN(r.deletion_time, ParseOptionalNonNegative({&path, r.line, "deletion_time"}, dt));
      ESTUARY_ASSIGN_OR_RETURN(r.scheduled_time, ParseOptionalNonNegative({&path, r.line, "scheduled_time"}, st));
      out.rows.push_back(std::move(r));
    }
  } catch (const io::error::base& e) {
    return CsvError(path, e);
  }
  if (out.rows.empty()) return InvalidArgument(path + ": no tasks");
  return out;
}

StatusOr<ClusterState> BuildCluster(const std::vector<NodeRow>& nodes, const std::string& path) {
  ClusterState state;
  std::unordered_set<std::string> names;
  for (const NodeRow& r : nodes) {
    if (!names.insert(r.name).second) {
      return InvalidArgument(FieldRef{&path, r.line, "sn"}.Prefix() + "duplicate node name '" + r.name + "'");
    }
    NodeSpec s;
    s.name = r.name;
    s.cpu_milli = r.cpu_milli;
    s.mem_mib = r.mem_mib;
    s.gpu_count = r.gpus;
    if (!r.model.empty()) {
      auto id = state.models().Intern(r.model);
      if (!id.ok()) return InvalidArgument(FieldRef{&path, r.line, "model"}.Prefix() + id.status().message());
      s.model = *id;
    }
    auto added = state.AddNode(std::move(s));
    if (!added.ok()) return InvalidArgument(path + ":" + std::to_string(r.line) + ": " + added.status().message());
  }
  return state;
}

StatusOr<std::vector<TaskRequest>> OpenbRequests(const OpenbTaskList& tasks, const GpuModels& models) {
  std::vector<TaskRequest> out;
  out.reserve(tasks.rows.size());
  for (const OpenbTaskRow& r : tasks.rows) {
    TaskRequest q;
    q.cpu_milli = r.cpu_milli;
    q.mem_mib = r.mem_mib;
    q.gpu_count = r.num_gpu;
    q.gpu_milli = r.gpu_milli;
    auto set = models.ParseSet(r.gpu_spec);
    if (!set.ok()) {
      return InvalidArgument(FieldRef{&tasks.path, r.line, "gpu_spec"}.Prefix() + set.status().message() +
                             " (no node has it)");
    }
    q.models = *set;
    out.push_back(q);
  }
  return out;
}

}  // namespace estuary
