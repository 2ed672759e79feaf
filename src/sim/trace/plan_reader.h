// Plan files (docs/defrag.md, "Applying a plan"): the moves of a defragmentation plan in the
// plan.csv format `estuary defrag` writes, read back, checked against a snapshot and applied
// move by move.
//
//   step,task,job,from,to,gpus,chain,after
//   1,s-0,infer,a-0002,b-0000,6,0,
//   2,w-0,web,a-0001,a-0000,4;5,1,
//   3,e-1,etl,b-0001,a-0000,,2,2
//
// Every column is required (any order; an unknown column is an error). `step` numbers the moves
// 1, 2, ... in file order. `task` and `job` name a bound task of the snapshot and its job; `from`
// is the node the task is on when its step comes (after the earlier steps), `to` another node of
// the cluster, whose GPU model the task admits and, for a task of a job with a gang constraint
// (plane, required_level), in the task's current domain of that level. `gpus`: the GPU indices on
// `to`, `;`-separated — as many as the task asks for (one for a shared-GPU task; empty for a
// CPU-only task). `chain`: a non-negative integer (informational). `after`: `;`-separated earlier
// step numbers (empty: none).
//
// Make-before-break: each move must fit on `to` while the task still holds its place on `from`,
// as the cluster stands after the earlier steps — every listed GPU with the task's gpu_milli free
// (a whole-GPU task needs wholly free GPUs), and the task's CPU and memory free. A locked task
// never moves. A header-only file is an empty plan.
//
// Every error is one line naming the file, the line and the column, e.g.
// "plan.csv:4: column 'from': task 'w-0' is on 'a-0000' at step 3, not 'a-0001'". A missing column
// or an empty file names line 1.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/cluster_state.h"

namespace estuary {

// One move of a plan file, as read.
struct PlanStep {
  unsigned line = 0;  // in the file
  TaskId task;
  NodeId from, to;
  GpuIndices gpus;    // on `to`
  int64_t chain = 0;
  std::vector<size_t> after;  // 0-based indices of earlier steps (ascending, distinct)
};

// Reads the plan at `path` and applies it to `state`, step by step in file order (unbind from
// `from`, bind on `to` at `gpus`). `locked` is indexed by TaskId value as in Snapshot (shorter:
// the rest are not locked). Returns the steps.
// REQUIRES: `state` holds the snapshot the plan is for (e.g. as ReadSnapshot bound it).
// On error `state` may hold part of the plan applied; discard it.
StatusOr<std::vector<PlanStep>> ApplyPlanFile(const std::string& path, ClusterState& state,
                                              std::span<const char> locked);

}  // namespace estuary
