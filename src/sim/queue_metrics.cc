#include "sim/queue_metrics.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace estuary {

namespace {

double Gpus(int64_t milli) { return static_cast<double>(milli) / kMilliPerGpu; }

// The q-quantile (0..1) of `v` by the nearest-rank rule; 0 when empty.
double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

}  // namespace

QueueMetrics::QueueMetrics(const Engine& engine) : engine_(engine), enabled_(engine.queue_book().enabled()) {
  if (!enabled_) return;
  capacity_gpu_ = std::max(1.0, Gpus(engine.state().total_gpu_milli()));
  owed_since_.assign(engine.queue_book().tree().size(), -1);
  // GPUs are measured per model where quotas name models (a queue's share of the whole cluster
  // would count GPUs its jobs cannot use), else in total.
  const QuotaDims& dims = engine.queue_book().tree().dims();
  for (size_t m = 0; m < dims.models; ++m) {
    if (engine.queue_book().managed(dims.model(m))) gpu_dims_.push_back({dims.model(m), kQueueModel + m});
  }
  if (gpu_dims_.empty()) gpu_dims_.push_back({QuotaDims::kGpu, kQueueGpu});
}

double QueueMetrics::Held(size_t q) const {
  int64_t sum = 0;
  for (const auto& [d, fixed] : gpu_dims_) sum += engine_.state().queue_usage(q)[fixed];
  return Gpus(sum);
}

double QueueMetrics::Fair(const QueueShares& ref, size_t q) const {
  int64_t sum = 0;
  for (const auto& [d, fixed] : gpu_dims_) sum += ref.at(ref.fair, q, d);
  return Gpus(sum);
}

void QueueMetrics::Waiting(std::vector<int64_t>& smallest, std::vector<int64_t>& pending) const {
  const ClusterState& s = engine_.state();
  const size_t n = engine_.queue_book().tree().size();
  smallest.assign(n, INT64_MAX);
  pending.assign(n, 0);
  for (uint32_t id : engine_.QueuedInOrder()) {
    const std::optional<JobId> j = engine_.JobOf(id);
    if (!j) continue;
    const Job& job = s.job(*j);
    if (job.spec.queue < 0) continue;
    const int64_t step = std::max<int32_t>(1, job.spec.step);
    const int64_t need = (job.spec.min_replicas + step - 1) / step * step;
    const int64_t gpu = need * s.task(job.tasks.front()).req.TotalGpuMilli();
    const size_t q = static_cast<size_t>(job.spec.queue);
    smallest[q] = std::min(smallest[q], gpu);
    pending[q] += int64_t{job.spec.max_replicas} * s.task(job.tasks.front()).req.TotalGpuMilli();
  }
}

void QueueMetrics::AfterCycle(int64_t t) {
  if (!enabled_) return;
  if (last_t_ >= 0 && t > last_t_) {
    const double dt = static_cast<double>(t - last_t_);
    deviation_area_ += last_deviation_ * dt;
    if (last_demand_) {
      jain_area_ += last_jain_ * dt;
      demand_time_ += dt;
    }
  }
  if (first_t_ < 0) first_t_ = t;
  last_t_ = t;
  const QueueTree& tree = engine_.queue_book().tree();
  const ClusterState& s = engine_.state();
  const QueueShares ref = engine_.ReferenceShares();
  std::vector<int64_t> smallest, pending;
  Waiting(smallest, pending);
  double deviation = 0, sum = 0, sum_sq = 0;
  int with_demand = 0;
  bool breach = false;
  for (size_t q = 0; q < tree.size(); ++q) {
    const int64_t held = s.queue_usage(q)[kQueueGpu];
    if (tree.limit(q)[QuotaDims::kGpu] != kNoLimit && held > tree.limit(q)[QuotaDims::kGpu]) breach = true;
    for (size_t m = 0; m < tree.dims().models; ++m) {
      const int64_t lim = tree.limit(q)[tree.dims().model(m)];
      if (lim != kNoLimit && s.queue_usage(q)[kQueueModel + m] > lim) breach = true;
    }
    if (!tree.leaf(q)) continue;
    // Per measured dimension (each model the quotas name, else GPUs in total).
    for (const auto& [d, fixed] : gpu_dims_) {
      const int64_t h = s.queue_usage(q)[fixed], fair = ref.at(ref.fair, q, d);
      deviation += Gpus(std::abs(h - fair));
      if (h > 0 || fair > 0) {
        const double x = fair > 0 ? static_cast<double>(h) / static_cast<double>(fair) : 1.0;
        sum += x;
        sum_sq += x * x;
        ++with_demand;
      }
    }
    const int64_t guarantee = tree.guarantee(q)[QuotaDims::kGpu];
    const bool owed = held < guarantee && smallest[q] != INT64_MAX && held + smallest[q] <= guarantee;
    if (owed && owed_since_[q] < 0) owed_since_[q] = t;
    if (!owed && owed_since_[q] >= 0) {
      waits_.push_back(static_cast<double>(t - owed_since_[q]));
      owed_since_[q] = -1;
    }
  }
  limit_breaches_ += breach;
  last_deviation_ = 100.0 * deviation / capacity_gpu_;
  last_demand_ = with_demand > 0;
  last_jain_ = with_demand > 0 && sum_sq > 0 ? sum * sum / (with_demand * sum_sq) : 1.0;
}

void QueueMetrics::OnEvent(const EngineEvent& e) {
  if (!enabled_) return;
  using K = EngineEvent::Kind;
  if (e.kind != K::kShrunk && e.kind != K::kReturned) return;
  const bool queue = e.detail == "queue reclaim";
  const bool evicted = queue || e.detail == "reclaim" || e.detail == "standby restore";
  if (!evicted) return;
  fairness_evictions_ += queue;
  (e.kind == K::kReturned ? evicted_at_ : shrunk_at_)[e.job].push_back(e.t);
}

void QueueMetrics::Sample(int64_t t) {
  if (!enabled_) return;
  const QueueTree& tree = engine_.queue_book().tree();
  const ClusterState& s = engine_.state();
  const QueueShares ref = engine_.ReferenceShares();
  // GPUs lent by each queue's Standby replicas (counted up the tree).
  std::vector<int64_t> lent(tree.size(), 0);
  for (const Task& task : s.tasks()) {
    if (!task.standby) continue;
    for (int q = s.job(task.job).spec.queue; q >= 0; q = tree.parent(static_cast<size_t>(q))) {
      lent[static_cast<size_t>(q)] += task.req.TotalGpuMilli();
    }
  }
  std::vector<int64_t> smallest, pending;
  Waiting(smallest, pending);
  for (size_t q : tree.bottom_up()) {
    if (tree.parent(q) >= 0) pending[static_cast<size_t>(tree.parent(q))] += pending[q];
  }
  for (size_t q = 0; q < tree.size(); ++q) {
    QueueSample row;
    row.t = t;
    row.queue = tree.spec(q).name;
    if (tree.parent(q) >= 0) row.parent = tree.spec(static_cast<size_t>(tree.parent(q))).name;
    row.leaf = tree.leaf(q);
    row.allocated = Held(q);
    row.guaranteed = Gpus(tree.guarantee(q)[QuotaDims::kGpu]);
    row.fair = Fair(ref, q);
    row.borrowed = std::max(0.0, row.allocated - row.guaranteed);
    row.lent = Gpus(lent[q]);
    row.pending = Gpus(pending[q]);
    samples_.push_back(row);
  }
}

void QueueMetrics::Finish(int64_t end, std::map<std::string, double>& m) {
  if (!enabled_) return;
  AfterCycle(end);  // closes the integrals; owed stretches still open end here
  for (int64_t& since : owed_since_) {
    if (since >= 0) waits_.push_back(static_cast<double>(end - since));
    since = -1;
  }
  const double span = first_t_ >= 0 && end > first_t_ ? static_cast<double>(end - first_t_) : 1.0;
  m["fairness_deviation_pct"] = deviation_area_ / span;
  m["jain_index"] = demand_time_ > 0 ? jain_area_ / demand_time_ : 1.0;
  m["guarantee_wait_p50_s"] = Quantile(waits_, 0.50);
  m["guarantee_wait_p99_s"] = Quantile(waits_, 0.99);
  m["guarantee_waits_count"] = static_cast<double>(waits_.size());
  m["fairness_evictions_count"] = static_cast<double>(fairness_evictions_);
  auto twice_within_an_hour = [](const std::map<uint32_t, std::vector<int64_t>>& at) {
    int64_t jobs = 0;
    for (const auto& [job, times] : at) {
      for (size_t i = 1; i < times.size(); ++i) {
        if (times[i] - times[i - 1] < 3600) {
          ++jobs;
          break;
        }
      }
    }
    return static_cast<double>(jobs);
  };
  m["flapping_jobs_count"] = twice_within_an_hour(evicted_at_);
  m["reshrunk_jobs_count"] = twice_within_an_hour(shrunk_at_);
  m["queue_limit_breaches_count"] = static_cast<double>(limit_breaches_);
}

}  // namespace estuary
