#include "sim/trace/node_tables.h"

#include <csv.h>

#include <filesystem>
#include <unordered_map>

#include "sim/trace/csv_fields.h"
#include "sim/trace/csv_io.h"

namespace estuary {
namespace {

using csvio::CheckReadableFile;
using csvio::Comment;
using csvio::CsvError;
using csvio::Quote;
using csvio::Trim;

// The largest core count and GiB amount a field may hold, so that the converted milli-CPU and MiB
// stay within kMaxFieldValue.
constexpr int64_t kMaxCores = kMaxFieldValue / 1000;
constexpr int64_t kMaxGiB = kMaxFieldValue / 1024;


// The GPU count of `text`: an integer in [0, kMaxGpusPerNode].
StatusOr<int32_t> ParseGpuCount(const FieldRef& ref, const std::string& text) {
  int64_t g = 0;
  ESTUARY_ASSIGN_OR_RETURN(g, ParseNonNegative(ref, text));
  if (g > kMaxGpusPerNode) {
    return InvalidArgument(ref.Prefix() + std::to_string(g) + " GPUs exceed the limit of " +
                           std::to_string(kMaxGpusPerNode) + " per node");
  }
  return static_cast<int32_t>(g);
}

// Checks that node names are unique; a repeat names the line of both occurrences.
class UniqueNames {
 public:
  Status Add(const FieldRef& ref, const std::string& name) {
    auto [it, inserted] = first_line_.emplace(name, ref.line);
    if (inserted) return Status::Ok();
    return InvalidArgument(ref.Prefix() + "duplicate node name '" + name + "' (first on line " +
                           std::to_string(it->second) + ")");
  }

 private:
  std::unordered_map<std::string, unsigned> first_line_;
};

}  // namespace

StatusOr<std::vector<NodeRow>> ReadSpotGpuNodes(const std::string& path, MemMiB mem_per_node) {
  if (mem_per_node < 0) {
    return InvalidArgument(path + ": memory per node " + std::to_string(mem_per_node) + " MiB is negative");
  }
  std::vector<NodeRow> rows;
  UniqueNames names;
  try {
    ESTUARY_RETURN_IF_ERROR(CheckReadableFile(path));
    io::CSVReader<4, Trim, Quote, io::throw_on_overflow, Comment> in(path);
    in.read_header(io::ignore_extra_column, "gpu_model", "gpu_capacity_num", "cpu_num", "node_name");
    std::string model, gpus, cpu, name;
    while (in.read_row(model, gpus, cpu, name)) {
      NodeRow r;
      r.line = in.get_file_line();
      const FieldRef at_name{&path, r.line, "node_name"};
      if (name.empty()) return InvalidArgument(at_name.Prefix() + "empty node name");
      ESTUARY_RETURN_IF_ERROR(names.Add(at_name, name));
      r.name = name;
      int64_t cores = 0;
      ESTUARY_ASSIGN_OR_RETURN(cores, ParseNonNegative({&path, r.line, "cpu_num"}, cpu, kMaxCores));
      r.cpu_milli = cores * 1000;
      r.mem_mib = mem_per_node;
      ESTUARY_ASSIGN_OR_RETURN(r.gpus, ParseGpuCount({&path, r.line, "gpu_capacity_num"}, gpus));
      const FieldRef at_model{&path, r.line, "gpu_model"};
      if (r.gpus > 0 && model.empty()) return InvalidArgument(at_model.Prefix() + "a node with GPUs needs a GPU model");
      if (model.find('|') != std::string::npos) {
        return InvalidArgument(at_model.Prefix() + "one model per node, got '" + model + "'");
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

StatusOr<std::vector<NodeRow>> ReadPaiMachines(const std::string& path) {
  std::vector<NodeRow> rows;
  UniqueNames names;
  try {
    ESTUARY_RETURN_IF_ERROR(CheckReadableFile(path));
    io::CSVReader<5, Trim, Quote, io::throw_on_overflow, Comment> in(path);
    in.set_header("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu");  // the file has no header row
    std::string machine, type, cpu, mem, gpus;
    while (in.read_row(machine, type, cpu, mem, gpus)) {
      NodeRow r;
      r.line = in.get_file_line();
      if (machine == "machine" && type == "gpu_type") {
        return InvalidArgument(path + ":" + std::to_string(r.line) +
                               ": a header row, but the PAI machine table has none (remove it)");
      }
      const FieldRef at_name{&path, r.line, "machine"};
      if (machine.empty()) return InvalidArgument(at_name.Prefix() + "empty node name");
      ESTUARY_RETURN_IF_ERROR(names.Add(at_name, machine));
      r.name = machine;
      int64_t cores = 0, gib = 0;
      ESTUARY_ASSIGN_OR_RETURN(cores, ParseNonNegative({&path, r.line, "cap_cpu"}, cpu, kMaxCores));
      ESTUARY_ASSIGN_OR_RETURN(gib, ParseNonNegative({&path, r.line, "cap_mem"}, mem, kMaxGiB));
      r.cpu_milli = cores * 1000;
      r.mem_mib = gib * 1024;
      const FieldRef at_gpus{&path, r.line, "cap_gpu"};
      ESTUARY_ASSIGN_OR_RETURN(r.gpus, ParseGpuCount(at_gpus, gpus));
      const FieldRef at_type{&path, r.line, "gpu_type"};
      if (type.empty()) return InvalidArgument(at_type.Prefix() + "empty GPU type (CPU-only machines say 'CPU')");
      if (type.find('|') != std::string::npos) {
        return InvalidArgument(at_type.Prefix() + "one model per node, got '" + type + "'");
      }
      if (type == "CPU") {
        if (r.gpus != 0) {
          return InvalidArgument(at_gpus.Prefix() + "a CPU-only machine (gpu_type 'CPU') has " +
                                 std::to_string(r.gpus) + " GPUs, expected 0");
        }
        r.model = "";
      } else {
        r.model = r.gpus > 0 ? type : "";
      }
      rows.push_back(std::move(r));
    }
  } catch (const io::error::base& e) {
    return CsvError(path, e);
  }
  if (rows.empty()) return InvalidArgument(path + ": empty file (no machines)");
  return rows;
}

}  // namespace estuary
