#include "sched/plugins/fgd/typical_tasks.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace estuary {

TypicalTasks TypicalTasks::FromWorkload(std::span<const TaskRequest> workload, double coverage) {
  TypicalTaskCounter counter;
  for (const TaskRequest& r : workload) counter.Add(r);
  return counter.Build(coverage);
}

TypicalTasks TypicalTaskCounter::Build(double coverage) const {
  const std::map<Key, int64_t>& counts = counts_;
  std::vector<std::pair<Key, int64_t>> specs(counts.begin(), counts.end());
  // Most frequent first; equal counts in descending spec order (the published simulator's order).
  std::sort(specs.begin(), specs.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    return a.first > b.first;
  });
  TypicalTasks out;
  out.distinct_specs = static_cast<int64_t>(specs.size());
  const double total = static_cast<double>(total_);
  if (total_ == 0) return out;
  const double wanted = coverage * total;
  double cum = 0;
  for (const auto& [key, count] : specs) {
    if (cum >= wanted) break;
    TypicalTask t;
    t.req.cpu_milli = std::get<0>(key);
    t.req.gpu_milli = std::get<1>(key);
    t.req.gpu_count = std::get<2>(key);
    t.req.models = GpuModelSet::FromBits(std::get<3>(key));
    t.count = count;
    cum += static_cast<double>(count);
    out.tasks.push_back(t);
  }
  out.covered = cum / total;
  for (TypicalTask& t : out.tasks) t.share = static_cast<double>(t.count) / cum;
  return out;
}

double NodeFragmentation(const TypicalTasks& typical, GpuModelId model, MilliCpu cpu_free,
                         const MilliGpu* gpu_free, int gpu_count) {
  int64_t free_total = 0;
  for (int g = 0; g < gpu_count; ++g) free_total += gpu_free[g];
  if (free_total == 0) return 0;
  double f = 0;
  for (const TypicalTask& m : typical.tasks) {
    const TaskRequest& r = m.req;
    if (r.gpu_milli == 0 || !r.models.Admits(model)) {
      f += m.share * static_cast<double>(free_total);
      continue;
    }
    int fit = 0;
    int64_t below = 0;
    for (int g = 0; g < gpu_count; ++g) {
      if (gpu_free[g] >= r.gpu_milli) {
        ++fit;
      } else {
        below += gpu_free[g];
      }
    }
    const bool placeable = fit >= r.gpu_count && cpu_free >= r.cpu_milli;
    f += m.share * static_cast<double>(placeable ? below : free_total);
  }
  return f;
}

}  // namespace estuary
