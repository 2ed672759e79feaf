// Snapshot files (docs/defrag.md, "Snapshot and dry run"): the running tasks of a cluster given by
// a cluster spec, one CSV row per task, as `estuary defrag` reads them and writes
// snapshot_after.csv.
//
//   task,job,node,gpus,gpu_milli,cpu_milli,memory_mib,locked[,models][,priority][,plane,required_level]
//   w-0,train,n-0001,0;1;2;3,1000,32000,65536,false,H800,,data,asw
//   s-0,infer,n-0002,5,250,4000,8192,true,,,,
//   c-0,etl,n-0002,,0,2000,4096,0,,,,
//
// `gpus` lists the GPU indices the task holds on its node, `;`-separated (any order; stored
// ascending); empty: a CPU-only task (then gpu_milli is 0). `gpu_milli` is per GPU: 1..1000, and
// exactly 1000 when the task holds several GPUs (a shared-GPU task holds one index with less).
// `locked`: true/false/1/0 (a locked task never moves). Optional columns: `models` (the GPU models
// the task accepts, `|`-separated; empty: any), `priority` (0..1000, empty: 0), and `plane` with
// `required_level` (both or neither; a level name of that plane): the job's gang constraint —
// its tasks move only within their current domain of that level. Rows with the same `job` form
// one job (min = max replicas = its row count); priority, plane and required_level must agree
// across a job's rows. Columns may come in any order; an unknown column is an error.
//
// Every error is one line naming the file, the line and the column, e.g.
// "tasks.csv:7: column 'node': unknown node 'n-9'". An over-committed GPU, CPU or memory names
// the row whose task does not fit any more (rows bind in file order).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/cluster_state.h"

namespace estuary {

struct Snapshot {
  // Indexed by TaskId value: 1 when the task is locked. Size == state.tasks().size().
  std::vector<char> locked;
  int64_t tasks = 0;         // rows read (= tasks bound)
  int64_t jobs = 0;
  int64_t locked_tasks = 0;
};

// Reads a snapshot and binds its tasks into `state`: one job per distinct `job` (in order of first
// appearance), one task per row (TaskIds in row order), each bound at its node and GPU indices.
// REQUIRES: `state` holds no jobs or tasks (a cluster as ReadClusterSpec returns it).
// On error `state` may hold part of the snapshot; discard it.
StatusOr<Snapshot> ReadSnapshot(const std::string& path, ClusterState& state);

// The bound tasks of `state` as a snapshot file (every column, tasks in TaskId order) that
// ReadSnapshot reads back to the same bindings. `locked` as in Snapshot (shorter: the rest are
// not locked). Names holding a comma or a quote are quoted (RFC 4180).
std::string WriteSnapshot(const ClusterState& state, std::span<const char> locked);

}  // namespace estuary
