#include "sim/replay.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <queue>

#include "sched/actions/allocate.h"
#include "sched/plugins/register.h"
#include "sim/metrics.h"

namespace estuary {

StatusOr<ReplayWorkload> MakeReplayWorkload(ClusterState cluster, const OpenbTaskList& list,
                                            std::vector<TaskRequest> reqs, double arrival_scale) {
  if (!list.has_time_columns) {
    return InvalidArgument(list.path + ":1: replay needs columns 'creation_time' and 'deletion_time' (this task list has none)");
  }
  ReplayWorkload w;
  w.cluster = std::move(cluster);
  for (size_t i = 0; i < list.rows.size(); ++i) {
    const OpenbTaskRow& r = list.rows[i];
    const std::string where = list.path + ":" + std::to_string(r.line) + ": column '";
    if (!r.creation_time) return InvalidArgument(where + "creation_time': empty; replay needs a creation time for every task");
    if (!r.deletion_time) return InvalidArgument(where + "deletion_time': empty; replay needs a deletion time for every task");
    if (*r.deletion_time < *r.creation_time) {
      return InvalidArgument(where + "deletion_time': " + std::to_string(*r.deletion_time) + " precedes creation_time " +
                             std::to_string(*r.creation_time));
    }
    const SimTime creation = static_cast<SimTime>(std::llround(static_cast<double>(*r.creation_time) * arrival_scale));
    w.tasks.push_back({reqs[i], r.name, creation, *r.deletion_time - *r.creation_time, r.qos});
  }
  w.typical = TypicalTasks::FromWorkload(reqs);
  return w;
}

namespace {
struct Event {
  SimTime time;
  int kind;      // 0 = departure, 1 = arrival (departures first at equal times)
  uint32_t idx;  // task index
  bool operator>(const Event& o) const {
    if (time != o.time) return time > o.time;
    if (kind != o.kind) return kind > o.kind;
    return idx > o.idx;
  }
};
}  // namespace

StatusOr<ReplayResult> RunReplay(const ReplayWorkload& w, const ReplayOptions& o) {
  auto policy = OpenbPolicy(o.policy);
  if (!policy.ok()) return policy.status();
  if (o.sample_interval <= 0) return InvalidArgument("sample interval must be positive");
  ReplayResult res;
  res.policy = o.policy;
  res.seed = o.seed;
  ClusterState state = w.cluster;
  PluginContext ctx{&state, &w.typical};
  SessionOptions so;
  so.policy = *policy;
  so.tie_break = o.tie_break;
  so.seed = o.seed;
  auto session = Session::Open(state, BuiltinRegistry(), ctx, so);
  if (!session.ok()) return session.status();
  FragmentationTracker frag(state, w.typical);

  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  for (uint32_t i = 0; i < w.tasks.size(); ++i) events.push({w.tasks[i].creation, 1, i});
  std::vector<TaskId> task_of(w.tasks.size());
  std::vector<SimTime> started(w.tasks.size(), -1);
  std::deque<uint32_t> pending;
  std::vector<double> waits;
  SimClock clock(events.empty() ? 0 : events.top().time);
  res.start_time = clock.Now();
  const double capacity = static_cast<double>(std::max<int64_t>(1, state.total_gpu_milli()));
  int64_t running = 0;
  size_t arrived = 0;

  auto try_start = [&](uint32_t i) -> int {  // 1 started, 0 waits, -1 infeasible
    const JobAttempt a = AllocateAction::TryStart(**session, state, state.task(task_of[i]).job);
    if (a.started) {
      frag.Update(state.task(task_of[i]).node);
      started[i] = clock.Now();
      waits.push_back(static_cast<double>(clock.Now() - w.tasks[i].creation));
      events.push({clock.Now() + w.tasks[i].runtime, 0, i});
      ++running;
      ++res.tasks_started_count;
      return 1;
    }
    if (a.kind == OutcomeKind::kInfeasible) {
      state.Finish(task_of[i]);
      ++res.tasks_infeasible_count;
      return -1;
    }
    return 0;
  };

  double alloc_area = 0, frag_area = 0;
  SimTime last_t = clock.Now();
  SimTime next_sample = clock.Now();
  SimTime interval = o.sample_interval;
  constexpr size_t kMaxSamples = 100000;
  auto sample_until = [&](SimTime t) {
    // Samples the state as it stood before time t (it has been constant since last_t).
    const double alloc = 100.0 * static_cast<double>(state.allocated_gpu_milli()) / capacity;
    const double fr = frag.FragRatioPct();
    alloc_area += alloc * static_cast<double>(t - last_t);
    frag_area += fr * static_cast<double>(t - last_t);
    while (next_sample < t) {
      res.samples.push_back({next_sample, alloc, fr, static_cast<int64_t>(pending.size()), running});
      next_sample += interval;
      if (res.samples.size() >= kMaxSamples) {
        // Keep memory bounded on very long traces: drop every other sample, double the interval.
        size_t k = 0;
        for (size_t i = 0; i < res.samples.size(); i += 2) res.samples[k++] = res.samples[i];
        res.samples.resize(k);
        interval *= 2;
        next_sample = res.samples.back().time + interval;
      }
    }
    last_t = t;
  };

  while (!events.empty()) {
    const SimTime t = events.top().time;
    sample_until(t);
    clock.AdvanceTo(t);
    bool freed = false;
    std::vector<uint32_t> arrivals;
    while (!events.empty() && events.top().time == t) {
      const Event e = events.top();
      events.pop();
      if (e.kind == 0) {
        const TaskId id = task_of[e.idx];
        const NodeId node = state.task(id).node;
        state.Finish(id);
        frag.Update(node);
        --running;
        freed = true;
      } else {
        const ReplayTask& rt = w.tasks[e.idx];
        JobSpec js;
        js.name = rt.name;
        const JobId job = state.AddJob(js);
        task_of[e.idx] = state.AddTask(job, rt.name, rt.req, 0, rt.qos);
        arrivals.push_back(e.idx);
      }
    }
    if (freed) {
      std::deque<uint32_t> still;
      for (uint32_t i : pending) {
        if (try_start(i) == 0) still.push_back(i);
      }
      pending.swap(still);
    }
    for (uint32_t i : arrivals) {
      if (try_start(i) == 0) pending.push_back(i);
    }
    res.pending_max_count = std::max<int64_t>(res.pending_max_count, static_cast<int64_t>(pending.size()));
    res.gpu_alloc_pct_max =
        std::max(res.gpu_alloc_pct_max, 100.0 * static_cast<double>(state.allocated_gpu_milli()) / capacity);
    if (o.check_invariants) {
      Status st = state.CheckInvariants();
      if (!st.ok()) return Internal("at t=" + std::to_string(t) + ": " + st.message());
    }
    arrived += arrivals.size();
    if (o.progress) o.progress(arrived, w.tasks.size());
  }
  res.end_time = clock.Now();
  res.samples.push_back({res.end_time, 100.0 * static_cast<double>(state.allocated_gpu_milli()) / capacity,
                         frag.FragRatioPct(), static_cast<int64_t>(pending.size()), running});
  const double span = static_cast<double>(res.end_time - res.start_time);
  res.gpu_alloc_pct_mean = span > 0 ? alloc_area / span : 0;
  res.frag_ratio_pct_mean = span > 0 ? frag_area / span : 0;
  res.tasks_never_started_count = static_cast<int64_t>(pending.size());
  for (uint32_t i : pending) waits.push_back(static_cast<double>(res.end_time - w.tasks[i].creation));
  if (!waits.empty()) {
    double s = 0;
    for (double x : waits) s += x;
    res.wait_s_mean = s / static_cast<double>(waits.size());
    res.wait_s_p50 = Percentile(waits, 50);
    res.wait_s_p90 = Percentile(waits, 90);
    res.wait_s_p99 = Percentile(waits, 99);
    res.wait_s_max = *std::max_element(waits.begin(), waits.end());
  }
  return res;
}

}  // namespace estuary
