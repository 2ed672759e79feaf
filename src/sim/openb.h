// The openb protocol of the FGD paper (docs/metrics.md §1): for each seed, the trace's tasks in a
// seeded random order followed by seeded top-up samples until tune x cluster GPU capacity has
// arrived; tasks only arrive; a task that fits no node fails and is dropped. Records the GPU
// allocation ratio and fragmentation against arrived GPU demand.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/cluster_state.h"
#include "sched/actions/migrate.h"
#include "sched/framework/session.h"
#include "sched/plugins/fgd/typical_tasks.h"
#include "sim/metrics.h"

namespace estuary {

// The inputs shared by all seeds and policies of one run.
struct OpenbWorkload {
  ClusterState cluster;                // nodes only, nothing bound
  std::vector<TaskRequest> tasks;      // the trace's tasks, in file order
  std::vector<std::string> names;      // their names (same order)
  std::vector<std::string> qos;        // their QoS classes (same order; may be empty)
  TypicalTasks typical;                // from `tasks`
};

struct OpenbOptions {
  std::string policy;                        // one of OpenbPolicyNames()
  TieBreak tie_break = TieBreak::kNodeOrder; // default: the published rule
  std::vector<uint64_t> seeds;               // default: none (caller sets 42..51)
  double tune = 1.3;                         // arrived GPU demand at the end, x capacity
  bool check_invariants = false;             // ClusterState::CheckInvariants() after every task
  bool indexed = true;                       // SessionOptions::indexed (off: scan every node)
  // Migration on failure (issue 5): when the policy finds no node for an arriving task, ask
  // MigrateToFit for a bounded make-before-break migration that makes room; if there is one, its
  // moves are applied in order (Unbind, then Bind at the planned target GPUs) and the task is
  // bound at the planned node and GPUs (not re-decided by the policy: the planned spot is the one
  // the plan guarantees). Otherwise the task fails as before. A MigrationMemo per seed skips the
  // search for a request at least as large as one that found no plan since capacity was last
  // released (so the planner runs ~50 times per seed instead of ~2,400). Default: off.
  bool migrate_on_failure = false;
  MigrateOptions migrate;                    // max_moves etc.; used when migrate_on_failure
  // Called after every task with (seed index, tasks done, tasks total); may be empty.
  std::function<void(size_t, size_t, size_t)> progress;
};

using Curve = std::array<std::optional<double>, ArrivalCurve::kMaxPct + 1>;

struct OpenbSeedResult {
  uint64_t seed = 0;
  double gpu_alloc_pct = 0;        // at the end of the run
  double frag_ratio_pct = 0;       // at the end
  double frag_gpu_milli = 0;       // at the end
  double arrived_gpu_pct = 0;      // at the end
  int64_t tasks_arrived = 0, tasks_placed = 0, tasks_failed = 0;
  std::map<std::string, int64_t> failed_by_shape;  // "1xGPU(460m)" -> count
  Curve alloc_curve, frag_ratio_curve, frag_amount_curve;  // vs arrived GPU demand %
  uint64_t cache_hits = 0, cache_misses = 0;
  // Migration on failure (zero when off).
  int64_t migrations = 0;               // tasks moved
  int64_t migrated_gpu_milli = 0;       // sum of the moved tasks' GPU requests
  int64_t placed_by_migration = 0;      // arriving tasks placed after a migration
  int64_t migration_ejections = 0;      // of `migrations`, moves that made room for another move
  int64_t migration_searches = 0;       // MigrateToFit::Plan calls (failed arrivals the memo did not answer)
};

struct OpenbResult {
  std::string policy;
  TieBreak tie_break = TieBreak::kNodeOrder;
  double tune = 1.3;
  bool migrate_on_failure = false;
  int32_t max_moves = 0;  // MigrateOptions::max_moves when migrate_on_failure
  std::vector<OpenbSeedResult> seeds;
  double gpu_alloc_pct_mean = 0;
  double frag_ratio_pct_mean = 0;
  Curve alloc_curve_mean, frag_ratio_curve_mean, frag_amount_curve_mean;
  double wall_seconds = 0;  // set by the caller (the engine never reads the wall clock)
};

// Task order of one seed: indices into workload.tasks (the shuffled trace, then top-up samples).
std::vector<uint32_t> OpenbTaskOrder(const OpenbWorkload& workload, uint64_t seed, double tune);

// The shape label used for failed-task counts: "cpu-only", "shared-gpu(<m>m)" or "<k>-gpu".
std::string TaskShape(const TaskRequest& r);

StatusOr<OpenbResult> RunOpenb(const OpenbWorkload& workload, const OpenbOptions& options);

}  // namespace estuary
