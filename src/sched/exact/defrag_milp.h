// Exact defragmentation reference (issue 5, item 4): the defragmentation problem the IPC planner
// solves heuristically, written as a mixed-integer linear program and solved to proven optimality
// (within a time limit) by COIN-OR CBC. It exists to measure the heuristic's gap in tests and
// reports; it is meant for small instances (the 25 nodes), not for planning a cluster.
//
// Problem. Given a ClusterState, a set N of candidate nodes and a set of locked tasks, re-assign
// the movable tasks among the nodes of N so that as many GPU nodes of N as possible end "whole
// free" (every GPU wholly free), and among those assignments move as few tasks as possible.
//  - Movable: a task bound to a node of N that is not locked, not in Standby, not borrowed, asks
//    for whole GPUs (gpu_milli == 1000) or for no GPU, and sits on a Ready node that is not held
//    by a reservation of another job. Every other task on a node of N stays where it is and its
//    usage is a constant of its node.
//    NOTE: shared-GPU tasks (gpu_milli < 1000) are treated as locked. Modelling them exactly
//    needs one variable per (task, node, GPU index) plus per-GPU capacity rows; the restriction
//    keeps the model small. Their GPUs count as used, rounded up per GPU, so a node with one stays
//    not whole free.
//  - Destinations of a movable task: its own node, and every other node of N that is Ready, not
//    held by a reservation of another job (a held node takes its owner's tasks only), whose GPU
//    model the task's TaskRequest::models admits (GPU tasks only) and whose CPU, memory and
//    whole free GPUs (after the movable tasks left) can hold the task alone. A task of a job with
//    a TopologyConstraint required_level moves only to nodes in the same domain of that level as
//    its current node (and stays if its node is not in the plane). Anti-affinity is not modelled.
//  - Whole free (before and after): a node of N with GPUs whose GPUs are all wholly free; its
//    state does not matter. CPU-only tasks may stay on a whole free node.
//
// Formulation (M = movable tasks, N' = nodes of N with GPUs and no unmovable GPU usage):
//    x[t][n] in {0,1}  task t ends on node n (only for the destinations above)
//    e[n]    in {0,1}  node n in N' ends whole free
//    sum_n x[t][n] = 1                                   for t in M
//    sum_t cpu_t x[t][n] <= cpu_avail[n]                  for n in N (cpu_free + movable CPU)
//    sum_t mem_t x[t][n] <= mem_avail[n]                  (memory likewise)
//    sum_t g_t x[t][n] + G[n] e[n] <= G[n]                G[n] = whole free GPUs of n once its
//                                                         movable tasks left (unmovable shared
//                                                         GPUs rounded up to whole GPUs)
//    x[t][n] + e[n] <= 1                                  for GPU tasks t (a strong form of the
//                                                         big-M row above)
// Whole-GPU tasks may take any whole free GPUs of a node, so the per-node GPU count is exact.
// Solved lexicographically in two exact stages: stage 1 maximises sum e[n] (z*); stage 2 adds
// sum e[n] >= z* and minimises the number of moved tasks, sum_t (1 - x[t][cur(t)]). Both start
// from a known feasible solution (stage 1: nobody moves; stage 2: stage 1's optimum), so a run
// stopped by the time limit still returns a valid assignment, at least as good as before.
// (Two stages rather than one weighted objective: a weight of 1/(|M|+1) on the moves is exact in
// theory but leaves CBC's gap tolerances to decide between "one more node" and "fewer moves".)
//
// Solver: CBC through its C API (Cbc_C_Interface.h, Debian coinor-libcbc-dev 2.10): the model is
// loaded column-wise and solved by Cbc_solve, which runs CBC's standard driver (presolve, cuts,
// heuristics) as the `cbc` program does; single-threaded, so a run is deterministic when it ends
// before the time limit. The C API keeps CBC's C++ types (CbcModel, Osi, Coin*) out of this
// library's interface and needs no CBC class beyond loading and solving.
//
// Measured solve time (docs/performance.md, "Exact defragmentation reference (issue 5)",
// bench/exact_defrag_bench.cc): seeded random fills of 8-GPU nodes with 1/2/4-GPU tasks, 2-core
// AMD EPYC VM, both stages proven optimal on every instance; median (max) wall seconds per solve:
// 10 nodes 0.13 (0.29), 15 nodes 0.24 (0.36), 20 nodes 0.60 (0.73), 25 nodes 1.05 (1.90) with no
// task locked; 0.02-0.08 (max 0.11) with 40% locked. Roughly quadratic in the node count on these
// easy instances; symmetric, denser instances can take far longer (Alibaba reports ~5 minutes
// for its exact ILP at 25 nodes), hence the time limit.
//
// Thread-safety: SolveExactDefrag reads `state` only; concurrent calls on distinct or unchanging
// states are safe.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "common/status.h"
#include "model/cluster_state.h"

namespace estuary {

struct ExactDefragOptions {
  // Wall-clock budget for both stages together, in seconds. Default 60. Must be > 0. When it
  // runs out the result carries the best assignment found and optimal == false.
  double time_limit_s = 60;
};

struct ExactDefragResult {
  bool optimal = false;            // both stages proven optimal within the time limit
  int64_t whole_free_before = 0;   // GPU nodes of N whole free in `state`
  int64_t whole_free_after = 0;    // GPU nodes of N whole free once `assignment` is applied
  int64_t moved_tasks = 0;         // movable tasks whose final node differs from their node now
  // The final node of every movable task (moved or not), in ascending TaskId order.
  std::vector<std::pair<TaskId, NodeId>> assignment;
  double solve_seconds = 0;        // wall time of both stages (measurement only)
  int64_t variables = 0;           // columns of the stage-1 model
  int64_t constraints = 0;         // rows of the stage-1 model
};

// Solves the problem above exactly for the nodes `nodes` of `state`. `locked` is indexed by
// TaskId value: a task is locked when its entry exists and is non-zero (a shorter span leaves the
// remaining tasks unlocked).
// Returns InvalidArgument for more than 64 nodes (the model is meant for small instances),
// a duplicate or unknown node id, or a time limit that is not > 0. Valid input never fails: the
// "nobody moves" assignment is always feasible, and a stage that yields no usable solution (time
// out before CBC's first incumbent) keeps the previous stage's assignment.
StatusOr<ExactDefragResult> SolveExactDefrag(const ClusterState& state, std::span<const NodeId> nodes,
                                             std::span<const char> locked,
                                             const ExactDefragOptions& options = {});

}  // namespace estuary
