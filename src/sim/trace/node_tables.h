// Readers for two public node tables that have no task list of their own, so that their clusters
// can be simulated under other workloads. Both yield the NodeRow of openb_reader.h, ready for
// BuildCluster(rows, path).
//
// Spot-GPU table (alibaba/clusterdata cluster-trace-v2026-spot-gpu/node_info_df.csv, GFS, ASPLOS'26):
//   header row, then one node per line; columns found by header name, in any order, extra columns
//   ignored:
//     gpu_model         GPU model name, e.g. "A10", "A100-SXM4-80GB"  -> NodeRow::model
//     gpu_capacity_num  GPUs on the node, integer 0..16                -> NodeRow::gpus
//     cpu_num           CPU cores, integer                             -> NodeRow::cpu_milli = cpu_num * 1000
//     node_name         node name, kept as is (e.g. "0", "4340")       -> NodeRow::name
//   The first node is on line 2 (line 1 is the header). The table has no memory column: every node
//   gets `mem_per_node` MiB, by default kUnmodeledMemory.
//
// PAI machine table (alibaba/clusterdata cluster-trace-gpu-v2020 pai_machine_spec.csv):
//   NO header row; exactly five columns in this order:
//     machine   machine name, kept as is                               -> NodeRow::name
//     gpu_type  GPU model name ("P100", "T4", "V100", "V100M32", "MISC", ...), or "CPU" for a
//               CPU-only machine                                       -> NodeRow::model ("" for CPU)
//     cap_cpu   CPU cores, integer                                     -> NodeRow::cpu_milli = cap_cpu * 1000
//     cap_mem   memory in GiB, integer                                 -> NodeRow::mem_mib = cap_mem * 1024
//     cap_gpu   GPUs on the machine, integer 0..16                     -> NodeRow::gpus
//   The first machine is on line 1. "MISC" is a model name like any other. A "CPU" machine must
//   have cap_gpu 0; a machine of a GPU type with cap_gpu 0 is read as CPU-only (model "").
//
// Contract of both readers: blank lines are skipped (they still count for line numbers); fields are
// trimmed of blanks and '\r'. Every bad input is a kInvalidArgument Status whose one-line message
// starts with "file:line: " and names the column at fault ("file:line: column 'cap_gpu': ..."):
// non-numeric, fractional or negative numbers, more than 16 GPUs, an empty name, an empty model on
// a node with GPUs, a '|' in a model name, a duplicate name (naming both lines), a row with too
// few or too many columns, a missing header column (spot). A file that cannot be opened, a
// directory, an empty file or a file without rows is an error naming the file.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "model/resources.h"
#include "sim/trace/openb_reader.h"

namespace estuary {

// Memory given to every node of a table without a memory column: 1 PiB (2^30 MiB). Memory then
// never binds: 1 PiB is over 1,000 times the largest memory request of the public task traces
// here (1,000 GiB in alibaba-dlrm-v2025, 720 GiB in openb), and filling it on a 192-core node (the
// largest of the spot table) would take over 5,000 MiB per requested milli-CPU, against at most
// 52 in those traces. 4,278 such nodes sum to ~4.6e12 MiB, far from int64 overflow.
inline constexpr MemMiB kUnmodeledMemory = MemMiB{1} << 30;

// The spot-GPU node table; every node gets `mem_per_node` MiB (which must be >= 0).
StatusOr<std::vector<NodeRow>> ReadSpotGpuNodes(const std::string& path, MemMiB mem_per_node = kUnmodeledMemory);

// The headerless PAI machine table.
StatusOr<std::vector<NodeRow>> ReadPaiMachines(const std::string& path);

}  // namespace estuary
