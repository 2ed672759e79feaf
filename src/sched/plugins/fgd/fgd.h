// fgd: Fragmentation Gradient Descent (FGD, USENIX ATC'23). Places a task where the node's
// fragmentation F_n (typical_tasks.h) grows least. Score = floor(100 * sigmoid((F_before -
// F_after) / 1000)), an integer in [0, 100] as in the published simulator. A shared-GPU task
// tries every GPU with enough free milli and takes the best-scoring one (lowest index on ties);
// the same rule is its GPU selector.
#pragma once

#include <memory>

#include "sched/framework/plugin.h"
#include "sched/plugins/fgd/typical_tasks.h"

namespace estuary {

class FgdScore final : public ScorePlugin, public GpuSelectPlugin {
 public:
  // REQUIRES: typical outlives the plugin.
  explicit FgdScore(const TypicalTasks* typical) : typical_(typical) {}
  std::string_view Name() const override { return "fgd"; }
  int64_t Score(const Task& task, const Node& node) override;
  GpuIndices Select(const Task& task, const Node& node, Rng& rng) override;

  // The score and, for a shared task, the GPU index it would take (-1 otherwise).
  std::pair<int64_t, int> ScoreAndGpu(const Task& task, const Node& node);

 private:
  double Before(const Node& node);
  const TypicalTasks* typical_;
  std::vector<std::pair<uint32_t, double>> before_;  // per node: (version, F_n)
};

}  // namespace estuary
