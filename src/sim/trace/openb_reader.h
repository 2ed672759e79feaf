// Readers for the openb traces of the FGD paper (alibaba/clusterdata cluster-trace-gpu-v2023):
//   node list: sn, cpu_milli, memory_mib, gpu, model
//   task list: name, cpu_milli, memory_mib, num_gpu, gpu_milli[, gpu_spec, qos, pod_phase,
//              creation_time, deletion_time, scheduled_time]  (the multigpu* lists stop at gpu_milli)
// Columns are found by header name, in any order; extra columns are ignored. Every malformed row,
// missing column, non-numeric or negative value, gpu_milli > 1000, inconsistent GPU request or
// unknown GPU model is a Status naming the file, line and column.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/cluster_state.h"

namespace estuary {

struct NodeRow {
  unsigned line = 0;
  std::string name;
  MilliCpu cpu_milli = 0;
  MemMiB mem_mib = 0;
  int32_t gpus = 0;
  std::string model;
};

struct OpenbTaskRow {
  unsigned line = 0;
  std::string name;
  MilliCpu cpu_milli = 0;
  MemMiB mem_mib = 0;
  int32_t num_gpu = 0;
  MilliGpu gpu_milli = 0;
  std::string gpu_spec;  // "A|B" = allowed GPU models; empty = any
  std::string qos;
  std::string phase;
  std::optional<int64_t> creation_time, deletion_time, scheduled_time;  // seconds
};

struct OpenbTaskList {
  std::string path;
  std::vector<OpenbTaskRow> rows;
  bool has_time_columns = false;  // the file has creation_time and deletion_time columns
};

StatusOr<std::vector<NodeRow>> ReadOpenbNodes(const std::string& path);
StatusOr<OpenbTaskList> ReadOpenbTasks(const std::string& path);

// A ClusterState holding the listed nodes (GPU models interned in order of first appearance).
// Fails on a duplicate node name, naming its line.
StatusOr<ClusterState> BuildCluster(const std::vector<NodeRow>& nodes, const std::string& path);
// The requests of the task rows. Fails on a GPU model that no node of `models` has, naming the
// task's line and the gpu_spec column.
StatusOr<std::vector<TaskRequest>> OpenbRequests(const OpenbTaskList& tasks, const GpuModels& models);

}  // namespace estuary
