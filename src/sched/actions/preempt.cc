#include "sched/actions/preempt.h"

#include <algorithm>
#include <array>
#include <climits>
#include <optional>
#include <tuple>

#include "common/check.h"
#include "sched/actions/preempt_k8s.h"
#include "sched/actions/preempt_volcano.h"
#include "sched/actions/preempt_room.h"

namespace estuary {

int64_t SecondsSinceCheckpoint(const Job& job, int64_t now, int64_t grace_s) {
  const int64_t on_notice = job.spec.checkpoint_on_notice_s;
  if (on_notice > 0 && on_notice <= grace_s) return 0;
  const int64_t start = job.started_at_s < 0 || job.started_at_s > now ? now : job.started_at_s;
  const int64_t interval = job.spec.checkpoint_interval_s;
  return interval > 0 ? (now - start) % interval : now - start;
}

namespace {

using preempt_internal::AddTask;
using preempt_internal::Fits;
using preempt_internal::FreeRoom;
using preempt_internal::Room;

constexpr int32_t kNotSurplus = INT32_MAX;
constexpr int32_t kNoPriority = INT32_MIN;  // "no whole job evicted": below every priority

// A running job that may be evicted for the preemptor.
struct VJob {
  JobId id;
  int64_t rank = 0;  // VictimFilter::rank
  bool whole_ok = true;  // it may be evicted whole (else only its chunks)
  int32_t priority = 0;
  int64_t cost = 0;     // C, milli-GPU x s
  int64_t runtime = 0;  // now - start, s
  int64_t budget_cost = 0, budget_runtime = 0;  // the same at VictimFilter::budget_at_s
  std::vector<TaskId> bound;       // its bound tasks, in the job's task order
  std::vector<int32_t> chunk_of;   // per bound task: its elastic chunk, or kNotSurplus
  std::vector<int32_t> shrink_to;  // per chunk: replicas left once it is evicted
};

// A victim unit: chunk `chunk` of an elastic job, or (chunk -1) the whole job.
struct Unit {
  uint32_t job;  // index into the VJobs
  int32_t chunk;
};

// Which victims are chosen: per VJob, the number of leading chunks and whether it goes whole.
struct Selection {
  std::vector<int32_t> chunks;
  std::vector<char> whole;
};

struct Undo {
  uint32_t job;
  int32_t chunks;
  char whole;
};

// (highest priority of the whole jobs, C, runtime, tasks): the cost of a set of victims.
struct Spend {
  int32_t max_priority = kNoPriority;
  int64_t cost = 0;
  int64_t runtime = 0;
  int64_t tasks = 0;
};

class Solver {
 public:
  // `only` (may be null): the candidates are the jobs with a task on one of these nodes.
  Solver(const ClusterState& state, JobId preemptor, const TaskRequest& req, int64_t need, int64_t now,
         const AllocateOptions& options, std::span<const char> being_evicted, const VictimFilter& filter,
         const std::vector<NodeId>* only = nullptr)
      : state_(state), req_(req), need_(need) {
    AddVictims(Candidates(filter, only), preemptor, now, options, being_evicted, filter);
    OrderUnits(filter);
    IndexUnits();
    InitNodes(preemptor, only);
    EmptyPriorities();
    const size_t n_nodes = state.num_nodes();
    sel_.chunks.assign(jobs_.size(), 0);
    sel_.whole.assign(jobs_.size(), 0);
    slot_.assign(n_nodes, -1);
    scratch_slot_.assign(n_nodes, -1);
    in_set_.assign(n_nodes, 0);
    stale_.assign(n_nodes, 1);
  }

  // VictimFilter::take over the candidates (see there): chunks in `order`, then whole jobs in
  // `whole_order`. A job keeps the chunks taken and, when its whole is refused, only the tasks of
  // those chunks (the rest of it is not evictable).
  void Budget(const VictimFilter& filter, const std::vector<uint32_t>& order, const std::vector<uint32_t>& whole_order) {
    if (filter.reset) filter.reset();
    std::vector<int32_t> chunks(jobs_.size(), 0);
    std::vector<int64_t> taken(jobs_.size(), 0);
    for (uint32_t j : order) {
      VJob& v = jobs_[j];
      const Job& job = state_.job(v.id);
      for (int32_t c = 0; c < static_cast<int32_t>(v.shrink_to.size()); ++c) {
        int64_t gpu = 0;
        for (size_t i = 0; i < v.bound.size(); ++i) {
          if (v.chunk_of[i] == c) gpu += state_.task(v.bound[i]).req.TotalGpuMilli();
        }
        if (!filter.take(job, gpu)) break;
        ++chunks[j];
        taken[j] += gpu;
      }
    }
    for (uint32_t j : whole_order) {
      VJob& v = jobs_[j];
      int64_t gpu = 0;
      for (TaskId t : v.bound) gpu += state_.task(t).req.TotalGpuMilli();
      v.whole_ok = filter.take(state_.job(v.id), gpu - taken[j]);
      if (v.whole_ok) continue;
      // Only its chunks taken: the tasks of the others are not evictable.
      std::vector<TaskId> bound;
      std::vector<int32_t> chunk_of;
      for (size_t i = 0; i < v.bound.size(); ++i) {
        if (v.chunk_of[i] == kNotSurplus || v.chunk_of[i] >= chunks[j]) continue;
        bound.push_back(v.bound[i]);
        chunk_of.push_back(v.chunk_of[i]);
      }
      v.bound = std::move(bound);
      v.chunk_of = std::move(chunk_of);
      v.shrink_to.resize(static_cast<size_t>(chunks[j]));
    }
  }

  // Replicas the nodes of `set` could hold with all their evictable work gone.
  int64_t Capacity(const std::vector<NodeId>& set) const {
    int64_t c = 0;
    for (NodeId n : set) c += cap_[n.value()];
    return c;
  }

  // Greedy steps 1-3 of the header over `set` (sorted by id). REQUIRES: Capacity(set) >= need.
  // Returns the plan (feasible) and its spend.
  std::pair<PreemptionPlan, Spend> Solve(const std::vector<NodeId>& set) {
    Reset();
    for (NodeId n : set) in_set_[n.value()] = 1;
    int64_t placed = 0;
    for (NodeId n : set) placed += fit0_[n.value()];
    struct Best {
      bool any = false;
      int32_t max_priority = kNoPriority;
      int64_t cost = 0, gain = 0, runtime = 0, tasks = 0;
      uint32_t node = 0;
      std::vector<uint32_t> units;
    };
    std::vector<TaskId> newly;
    std::vector<uint32_t> units;
    // Each node's candidate is cached between rounds: it changes only when the chosen units
    // evicted tasks on a node that one of the units touching it also touches (their selection,
    // the node's room or the room of the nodes its units free), or when its target changes.
    struct Cand {
      int64_t target = -1;
      bool reached = false;
      Spend s;
      int64_t gain = 0;  // not capped
      std::vector<uint32_t> units;
    };
    std::vector<Cand> cache(set.size());
    for (NodeId n : set) stale_[n.value()] = 1;
    while (placed < need_) {
      Best best;
      for (size_t pos = 0; pos < set.size(); ++pos) {
        const NodeId nid = set[pos];
        const uint32_t n = nid.value();
        if (!usable_[n]) continue;
        const int64_t now_n = FitNow(n);
        const int64_t target = std::min(cap_[n], now_n + (need_ - placed));
        if (target <= now_n) continue;
        Cand& c = cache[pos];
        if (!stale_[n] && c.target == target) {
          if (c.reached) {
            const int64_t gain = std::min(c.gain, need_ - placed);
            if (!best.any || Better(c.s, gain, n, best)) {
              best.any = true;
              best.max_priority = c.s.max_priority;
              best.cost = c.s.cost;
              best.gain = gain;
              best.runtime = c.s.runtime;
              best.tasks = c.s.tasks;
              best.node = n;
              best.units = c.units;
            }
          }
          continue;
        }
        stale_[n] = 0;
        c.target = target;
        c.reached = false;
        ClearScratch();
        undo_.clear();
        units.clear();
        Spend s;
        bool reached = false;
        for (uint32_t i = touch_start_[n]; i < touch_start_[n + 1] && !reached; ++i) {
          const uint32_t u = touch_[i];
          newly.clear();
          if (!Apply(u, &undo_, newly)) continue;
          units.push_back(u);
          Account(u, newly, s);
          for (TaskId t : newly) AddTask(Scratch(state_.task(t).node.value()), state_.task(t), 1);
          reached = Fits(state_.node(nid), Scratch(n), req_) >= target;
        }
        if (reached) {
          int64_t gain = 0;
          for (uint32_t m : scratch_nodes_) {
            if (in_set_[m] && usable_[m]) gain += Fits(state_.node(NodeId(m)), scratch_[scratch_slot_[m]], req_) - FitNow(m);
          }
          c.reached = true;
          c.s = s;
          c.gain = gain;
          c.units = units;
          gain = std::min(gain, need_ - placed);
          if (!best.any || Better(s, gain, n, best)) {
            best.any = true;
            best.max_priority = s.max_priority;
            best.cost = s.cost;
            best.gain = gain;
            best.runtime = s.runtime;
            best.tasks = s.tasks;
            best.node = n;
            best.units = units;
          }
        }
        Revert();
      }
      ESTUARY_CHECK(best.any);  // Capacity(set) >= need: some node can still gain
      for (uint32_t u : best.units) {
        newly.clear();
        Apply(u, nullptr, newly);
        placed += Move(newly, 1);
        // Invalidate the candidates of every node sharing a unit with a node that lost tasks.
        for (TaskId t : newly) {
          const uint32_t m = state_.task(t).node.value();
          stale_[m] = 1;
          for (uint32_t i = touch_start_[m]; i < touch_start_[m + 1]; ++i) {
            const uint32_t w = touch_[i];
            for (uint32_t k = unode_start_[w]; k < unode_start_[w + 1]; ++k) stale_[unode_[k]] = 1;
          }
        }
      }
    }
    // Pruning, most expensive first.
    for (size_t i = units_.size(); i-- > 0;) {
      const Unit& u = units_[i];
      const bool chosen = u.chunk < 0 ? sel_.whole[u.job] != 0
                                      : !sel_.whole[u.job] && sel_.chunks[u.job] == u.chunk + 1;
      if (!chosen) continue;
      newly.clear();
      const VJob& v = jobs_[u.job];
      for (size_t k = 0; k < v.bound.size(); ++k) {
        const bool gone_before = u.chunk < 0 ? v.chunk_of[k] < sel_.chunks[u.job] : v.chunk_of[k] < u.chunk;
        const bool gone_now = u.chunk < 0 || v.chunk_of[k] == u.chunk;
        if (gone_now && !gone_before) newly.push_back(v.bound[k]);
      }
      const int64_t loss = -Move(newly, -1);
      if (placed - loss >= need_) {
        placed -= loss;
        if (u.chunk < 0) {
          sel_.whole[u.job] = 0;
        } else {
          sel_.chunks[u.job] = u.chunk;
        }
      } else {
        Move(newly, 1);
      }
    }
    auto result = Assemble(set);
    for (NodeId n : set) in_set_[n.value()] = 0;
    return result;
  }

 private:
  // The ids of the candidate jobs: those with a bound task (on one of `only` when not null; found
  // from the nodes, so that jobs that ended long ago cost nothing), in id order.
  std::vector<uint32_t> Candidates(const VictimFilter& filter, const std::vector<NodeId>* only) const {
    const ClusterState& state = state_;
    // With VictimFilter::queues, from those queues' lists of preemptible jobs with a bound task
    // (the same jobs, without visiting every task on the nodes).
    std::vector<uint32_t> running;
    if (filter.queues) {
      std::vector<char> in_only;
      if (only != nullptr) {
        in_only.assign(state.num_nodes(), 0);
        for (NodeId n : *only) in_only[n.value()] = 1;
      }
      for (int32_t q : *filter.queues) {
        for (JobId j : state.queue_preemptible_jobs(static_cast<size_t>(q))) {
          const bool there = std::any_of(state.job(j).tasks.begin(), state.job(j).tasks.end(), [&](TaskId t) {
            const Task& task = state.task(t);
            return task.state == TaskState::kBound && (only == nullptr || in_only[task.node.value()] != 0);
          });
          if (there) running.push_back(j.value());
        }
      }
    } else {
      std::vector<char> seen(state.jobs().size(), 0);
      auto visit = [&](const Node& n) {
        for (TaskId t : n.tasks) {
          const uint32_t j = state.task(t).job.value();
          if (!seen[j]) {
            seen[j] = 1;
            running.push_back(j);
          }
        }
      };
      if (only != nullptr) {
        for (NodeId n : *only) visit(state.node(n));
      } else {
        for (const Node& n : state.nodes()) visit(n);
      }
    }
    std::sort(running.begin(), running.end());
    return running;
  }

  // jobs_: those of the candidates `running` that may be victims of `preemptor` (VJob: bound
  // tasks, cost, runtime, elastic surplus chunks).
  void AddVictims(const std::vector<uint32_t>& running, JobId preemptor, int64_t now, const AllocateOptions& options,
                  std::span<const char> being_evicted, const VictimFilter& filter) {
    const ClusterState& state = state_;
    const int32_t prio = state.job(preemptor).spec.priority;
    for (uint32_t jid : running) {
      const Job& j = state.job(JobId(jid));
      if (j.id == preemptor || !j.spec.preemptible) continue;
      if (filter.allowed ? !filter.allowed(j) : j.spec.priority >= prio) continue;
      VJob v;
      v.id = j.id;
      if (filter.rank) v.rank = filter.rank(j);
      v.priority = j.spec.priority;
      int64_t gpu = 0;
      bool standby = false;
      for (TaskId t : j.tasks) {
        const Task& task = state.task(t);
        if (task.state != TaskState::kBound) continue;
        v.bound.push_back(t);
        gpu += task.req.TotalGpuMilli();
        standby |= task.standby;
        standby |= t.value() < being_evicted.size() && being_evicted[t.value()] != 0;
      }
      // A job with a replica in Standby is no victim: its GPUs are lent (restore it first). Nor is
      // one already being evicted for another preemptor.
      if (v.bound.empty() || standby) continue;
      const int64_t start = j.started_at_s < 0 || j.started_at_s > now ? now : j.started_at_s;
      v.runtime = now - start;
      v.cost = gpu * SecondsSinceCheckpoint(j, now, options.grace_s);
      // The same as of the budget time, for the budgets' order only (OrderUnits).
      const int64_t at = filter.take && filter.budget_at_s >= 0 ? filter.budget_at_s : now;
      v.budget_runtime = at == now ? v.runtime : at - (j.started_at_s < 0 || j.started_at_s > at ? at : j.started_at_s);
      v.budget_cost = at == now ? v.cost : gpu * SecondsSinceCheckpoint(j, at, options.grace_s);
      // Elastic surplus: shrink targets k < b, multiples of the step, k >= max(min, 1).
      const int64_t b = static_cast<int64_t>(v.bound.size());
      const int64_t step = options.align ? std::max<int32_t>(1, j.spec.step) : 1;
      const int64_t floor_k = std::max<int64_t>(1, j.spec.min_replicas);
      v.chunk_of.assign(v.bound.size(), kNotSurplus);
      int64_t prev = b;
      for (int64_t k = (b - 1) / step * step; k >= floor_k; k -= step) {
        for (int64_t i = k; i < prev; ++i) v.chunk_of[i] = static_cast<int32_t>(v.shrink_to.size());
        v.shrink_to.push_back(static_cast<int32_t>(k));
        prev = k;
      }
      jobs_.push_back(std::move(v));
    }
  }

  // units_: the victims' chunks and whole jobs, in victim order (VictimFilter::take applied).
  void OrderUnits(const VictimFilter& filter) {
    // The victim order: elastic chunks (rank, priority, id, chunk), then whole jobs (rank,
    // priority, C, runtime, id). VJobs are in id order already.
    std::vector<uint32_t> order(jobs_.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return std::tie(jobs_[a].rank, jobs_[a].priority) < std::tie(jobs_[b].rank, jobs_[b].priority);
    });
    std::vector<uint32_t> whole_order = order;
    if (filter.take) {
      // The budgets are offered the whole jobs by C as of VictimFilter::budget_at_s: what they
      // admit decides whether a plan is feasible at all, and C at the plan's own time changes
      // with the clock alone (a checkpoint sets it back to 0).
      std::sort(whole_order.begin(), whole_order.end(), [&](uint32_t a, uint32_t b) {
        const VJob &x = jobs_[a], &y = jobs_[b];
        return std::tie(x.rank, x.priority, x.budget_cost, x.budget_runtime, a) <
               std::tie(y.rank, y.priority, y.budget_cost, y.budget_runtime, b);
      });
      Budget(filter, order, whole_order);
    }
    std::sort(whole_order.begin(), whole_order.end(), [&](uint32_t a, uint32_t b) {
      const VJob &x = jobs_[a], &y = jobs_[b];
      return std::tie(x.rank, x.priority, x.cost, x.runtime, a) < std::tie(y.rank, y.priority, y.cost, y.runtime, b);
    });
    for (uint32_t j : order) {
      for (int32_t c = 0; c < static_cast<int32_t>(jobs_[j].shrink_to.size()); ++c) units_.push_back({j, c});
    }
    for (uint32_t j : whole_order) {
      if (jobs_[j].whole_ok) units_.push_back({j, -1});
    }
  }

  void IndexUnits() {
    const ClusterState& state = state_;
    // Units touching each node, in victim order (CSR over node ids), and the nodes each unit
    // touches (CSR over units, for invalidating cached candidates). The (node, unit) pairs come
    // out in unit order, so a stable counting sort by node keeps victim order within a node.
    const size_t n_nodes = state.num_nodes();
    std::vector<std::pair<uint32_t, uint32_t>> pairs;  // (node, unit), unit ascending
    unode_start_.assign(units_.size() + 1, 0);
    for (uint32_t u = 0; u < units_.size(); ++u) {
      const VJob& v = jobs_[units_[u].job];
      const size_t first = pairs.size();
      for (size_t i = 0; i < v.bound.size(); ++i) {
        if (units_[u].chunk >= 0 && v.chunk_of[i] != units_[u].chunk) continue;
        pairs.emplace_back(state.task(v.bound[i]).node.value(), u);
      }
      // A unit's own pairs are few (its job's tasks): drop repeated nodes among them.
      std::sort(pairs.begin() + static_cast<std::ptrdiff_t>(first), pairs.end());
      pairs.erase(std::unique(pairs.begin() + static_cast<std::ptrdiff_t>(first), pairs.end()), pairs.end());
      unode_start_[u + 1] = static_cast<uint32_t>(pairs.size());
    }
    unode_.resize(pairs.size());
    for (size_t i = 0; i < pairs.size(); ++i) unode_[i] = pairs[i].first;
    touch_start_.assign(n_nodes + 1, 0);
    for (const auto& [n, u] : pairs) ++touch_start_[n + 1];
    for (size_t n = 0; n < n_nodes; ++n) touch_start_[n + 1] += touch_start_[n];
    touch_.resize(pairs.size());
    std::vector<uint32_t> fill(touch_start_.begin(), touch_start_.end() - 1);
    for (const auto& [n, u] : pairs) touch_[fill[n]++] = u;
  }

  void InitNodes(JobId preemptor, const std::vector<NodeId>* only) {
    const ClusterState& state = state_;
    const TaskRequest& req = req_;
    const size_t n_nodes = state.num_nodes();
    // Per node of `only` (the sets solved are among them; elsewhere nothing is usable): replicas
    // now, and with all its evictable work gone (the nodes without any: as now).
    usable_.assign(n_nodes, 0);
    fit0_.assign(n_nodes, 0);
    cap_.assign(n_nodes, 0);
    auto init = [&](const Node& n) {
      const uint32_t i = n.id.value();
      usable_[i] = n.Schedulable() && !(n.reservation.valid() && state.reservation(n.reservation).owner != preemptor);
      if (usable_[i]) fit0_[i] = cap_[i] = Fits(n, FreeRoom(n), req);
    };
    if (only != nullptr) {
      for (NodeId n : *only) init(state.node(n));
    } else {
      for (const Node& n : state.nodes()) init(n);
    }
    {
      std::vector<int32_t> at(n_nodes, -1);  // index into full
      std::vector<Room> full;
      std::vector<uint32_t> where;
      for (const VJob& v : jobs_) {
        for (TaskId t : v.bound) {
          const uint32_t n = state.task(t).node.value();
          if (at[n] < 0) {
            at[n] = static_cast<int32_t>(full.size());
            full.push_back(FreeRoom(state.node(NodeId(n))));
            where.push_back(n);
          }
          AddTask(full[static_cast<size_t>(at[n])], state.task(t), 1);
        }
      }
      for (uint32_t n : where) {
        if (usable_[n]) cap_[n] = Fits(state.node(NodeId(n)), full[static_cast<size_t>(at[n])], req);
      }
    }
  }

  void EmptyPriorities() {
    const ClusterState& state = state_;
    const size_t n_nodes = state.num_nodes();
    // Per node: the least "highest evicted priority" of any plan that empties its GPUs — the
    // highest priority among its evictable GPU tasks that no elastic chunk can remove.
    empty_prio_.assign(n_nodes, kNoPriority);
    for (const VJob& v : jobs_) {
      for (size_t i = 0; i < v.bound.size(); ++i) {
        const Task& t = state.task(v.bound[i]);
        if (v.chunk_of[i] != kNotSurplus || !t.req.NeedsGpu()) continue;
        int32_t& p = empty_prio_[t.node.value()];
        p = std::max(p, v.priority);
      }
    }
  }

  // Whether candidate (s, gain, node) beats `b` (the header's key).
  template <typename B>
  static bool Better(const Spend& s, int64_t gain, uint32_t node, const B& b) {
    if (s.max_priority != b.max_priority) return s.max_priority < b.max_priority;
    const __int128 l = static_cast<__int128>(s.cost) * b.gain, r = static_cast<__int128>(b.cost) * gain;
    if (l != r) return l < r;
    if (gain != b.gain) return gain > b.gain;
    return std::tie(s.runtime, s.tasks, node) < std::tie(b.runtime, b.tasks, b.node);
  }

  void Account(uint32_t u, const std::vector<TaskId>& newly, Spend& s) const {
    s.tasks += static_cast<int64_t>(newly.size());
    if (units_[u].chunk >= 0) return;
    const VJob& v = jobs_[units_[u].job];
    s.max_priority = std::max(s.max_priority, v.priority);
    s.cost += v.cost;
    s.runtime += v.runtime;
  }

  // Chooses unit `u` in the selection, appending the tasks it newly evicts to `newly` and the
  // previous selection of its job to `undo`. False when it evicts nothing new.
  bool Apply(uint32_t ui, std::vector<Undo>* undo, std::vector<TaskId>& newly) {
    const Unit& u = units_[ui];
    const VJob& v = jobs_[u.job];
    int32_t& chunks = sel_.chunks[u.job];
    char& whole = sel_.whole[u.job];
    if (whole || (u.chunk >= 0 && u.chunk < chunks)) return false;
    if (undo) {
      undo->push_back({u.job, chunks, whole});
    } else {
      Touch(u.job);
    }
    for (size_t k = 0; k < v.bound.size(); ++k) {
      const bool gone = v.chunk_of[k] < chunks;
      const bool goes = u.chunk < 0 || v.chunk_of[k] <= u.chunk;
      if (goes && !gone) newly.push_back(v.bound[k]);
    }
    if (u.chunk < 0) {
      whole = 1;
    } else {
      chunks = u.chunk + 1;
    }
    return true;
  }

  void Revert() {
    for (size_t i = undo_.size(); i-- > 0;) {
      sel_.chunks[undo_[i].job] = undo_[i].chunks;
      sel_.whole[undo_[i].job] = undo_[i].whole;
    }
    undo_.clear();
  }

  void Touch(uint32_t job) {
    if (sel_.chunks[job] == 0 && !sel_.whole[job]) touched_jobs_.push_back(job);
  }

  // Adds (1) or takes back (-1) the tasks' resources to the current rooms; returns the change in
  // replicas over the usable nodes of the set.
  int64_t Move(const std::vector<TaskId>& tasks, int sign) {
    std::vector<uint32_t> nodes;
    for (TaskId t : tasks) nodes.push_back(state_.task(t).node.value());
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    int64_t before = 0, after = 0;
    for (uint32_t n : nodes) before += FitNow(n);
    for (TaskId t : tasks) AddTask(Cur(state_.task(t).node.value()), state_.task(t), sign);
    for (uint32_t n : nodes) after += FitNow(n);
    return after - before;
  }

  int64_t FitNow(uint32_t n) const {
    if (!in_set_[n] || !usable_[n]) return 0;
    return slot_[n] < 0 ? fit0_[n] : Fits(state_.node(NodeId(n)), rooms_[slot_[n]], req_);
  }

  Room& Cur(uint32_t n) {
    if (slot_[n] < 0) {
      slot_[n] = static_cast<int32_t>(rooms_.size());
      rooms_.push_back(FreeRoom(state_.node(NodeId(n))));
      room_nodes_.push_back(n);
    }
    return rooms_[slot_[n]];
  }

  Room& Scratch(uint32_t n) {
    if (scratch_slot_[n] < 0) {
      scratch_slot_[n] = static_cast<int32_t>(scratch_.size());
      scratch_.push_back(slot_[n] < 0 ? FreeRoom(state_.node(NodeId(n))) : rooms_[slot_[n]]);
      scratch_nodes_.push_back(n);
    }
    return scratch_[scratch_slot_[n]];
  }

  void ClearScratch() {
    for (uint32_t n : scratch_nodes_) scratch_slot_[n] = -1;
    scratch_nodes_.clear();
    scratch_.clear();
  }

  void Reset() {
    for (uint32_t j : touched_jobs_) {
      sel_.chunks[j] = 0;
      sel_.whole[j] = 0;
    }
    touched_jobs_.clear();
    for (uint32_t n : room_nodes_) slot_[n] = -1;
    room_nodes_.clear();
    rooms_.clear();
    ClearScratch();
  }

  std::pair<PreemptionPlan, Spend> Assemble(const std::vector<NodeId>& set) {
    PreemptionPlan p;
    Spend s;
    p.feasible = true;
    std::sort(touched_jobs_.begin(), touched_jobs_.end());
    touched_jobs_.erase(std::unique(touched_jobs_.begin(), touched_jobs_.end()), touched_jobs_.end());
    for (uint32_t j : touched_jobs_) {
      const VJob& v = jobs_[j];
      if (sel_.whole[j]) {
        p.evicted_jobs.push_back(v.id);
        p.cost += v.cost;
        s.max_priority = std::max(s.max_priority, v.priority);
        s.cost += v.cost;
        s.runtime += v.runtime;
      } else if (sel_.chunks[j] > 0) {
        p.shrunk.emplace_back(v.id, v.shrink_to[sel_.chunks[j] - 1]);
      }
      for (size_t k = 0; k < v.bound.size(); ++k) {
        if (sel_.whole[j] || v.chunk_of[k] < sel_.chunks[j]) p.evict.push_back(v.bound[k]);
      }
    }
    std::sort(p.evict.begin(), p.evict.end());
    s.tasks = static_cast<int64_t>(p.evict.size());
    int64_t left = need_;
    for (int pass = 0; pass < 2 && left > 0; ++pass) {
      for (NodeId n : set) {
        const int64_t free = usable_[n.value()] ? fit0_[n.value()] : 0;
        const int64_t k = std::min(left, pass == 0 ? free : FitNow(n.value()) - free);
        for (int64_t i = 0; i < k; ++i) p.nodes.push_back(n);
        left -= std::max<int64_t>(k, 0);
        if (left == 0) break;
      }
    }
    return {std::move(p), s};
  }

  const ClusterState& state_;
  TaskRequest req_;
  int64_t need_;
  std::vector<VJob> jobs_;
  std::vector<Unit> units_;            // in victim order
  std::vector<uint32_t> touch_start_;  // CSR: units touching node n are touch_[start[n], start[n+1])
  std::vector<uint32_t> touch_;
  std::vector<uint32_t> unode_start_;  // CSR: nodes unit u touches are unode_[start[u], start[u+1])
  std::vector<uint32_t> unode_;
  std::vector<char> stale_;  // per node: its cached candidate must be recomputed
  std::vector<int32_t> empty_prio_;  // see the constructor

 public:
  // A lower bound of the highest priority a plan over `set` (sorted by id) evicts, valid when a
  // replica needs all GPUs of a node: the k-th least empty_prio_ among the nodes that can gain,
  // k = need minus the replicas that fit now (kNoPriority when those already suffice).
  int32_t PriorityBound(const std::vector<NodeId>& set) const {
    int64_t room = 0;
    std::vector<int32_t> p;
    for (NodeId id : set) {
      const uint32_t n = id.value();
      room += fit0_[n];
      if (usable_[n] && cap_[n] > fit0_[n]) p.push_back(empty_prio_[n]);
    }
    const int64_t k = need_ - room;
    if (k <= 0 || p.empty()) return kNoPriority;
    const size_t i = static_cast<size_t>(std::min<int64_t>(k, static_cast<int64_t>(p.size()))) - 1;
    std::nth_element(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(i), p.end());
    return p[i];
  }

 private:
  std::vector<char> usable_;
  std::vector<int64_t> fit0_, cap_;
  Selection sel_;
  std::vector<Undo> undo_;
  std::vector<uint32_t> touched_jobs_;  // jobs whose selection may be non-empty
  std::vector<int32_t> slot_;           // per node: index into rooms_ (-1: its free room)
  std::vector<Room> rooms_;
  std::vector<uint32_t> room_nodes_;
  std::vector<int32_t> scratch_slot_;   // per node: index into scratch_ (-1: none)
  std::vector<Room> scratch_;
  std::vector<uint32_t> scratch_nodes_;
  std::vector<char> in_set_;
};

std::string Describe(const TaskRequest& r) {
  std::string s;
  if (r.NeedsGpu()) {
    s = r.IsSharedGpu() ? std::to_string(r.gpu_milli) + " milli-GPU" : std::to_string(r.gpu_count) + " GPUs";
  } else {
    s = "no GPU";
  }
  return s + ", " + std::to_string(r.cpu_milli) + " milli-CPU, " + std::to_string(r.mem_mib) + " MiB";
}

}  // namespace

namespace {

// What a preemptor asks for: the request of its pending tasks, how many it has pending, and how
// many replicas a plan must place (min, rounded up to a step multiple under Align).
struct Need {
  TaskRequest req;
  int64_t pending = 0;
  int64_t need = 0;
};

Need PreemptorNeed(const ClusterState& state, const Job& job, const AllocateOptions& options) {
  Need n;
  for (TaskId t : job.tasks) {
    if (state.task(t).state != TaskState::kPending) continue;
    if (n.pending++ == 0) n.req = state.task(t).req;
  }
  const int64_t step = options.align ? std::max<int32_t>(1, job.spec.step) : 1;
  n.need = (std::max<int64_t>(1, job.spec.min_replicas) + step - 1) / step * step;
  return n;
}

}  // namespace

bool PreemptAction::CannotFit(const ClusterState& state, JobId preemptor, const AllocateOptions& options) {
  ESTUARY_CHECK(preemptor.valid() && preemptor.value() < state.jobs().size());
  const Job& job = state.job(preemptor);
  const auto [req, pending, need] = PreemptorNeed(state, job, options);
  if (pending < need) return true;
  // A borrowed task's GPUs are its lender's (allocated, and no victim's): they never count.
  const int64_t most = state.total_gpu_milli() - state.allocated_gpu_milli() +
                       state.PreemptibleGpuMilliBelow(job.spec.priority);
  return need * req.TotalGpuMilli() > most;
}

PreemptionPlan PreemptAction::Plan(const ClusterState& state, JobId preemptor, int64_t now_s,
                                   const AllocateOptions& options, std::span<const char> being_evicted,
                                   const VictimFilter& filter) {
  ESTUARY_CHECK(preemptor.valid() && preemptor.value() < state.jobs().size());
  const Job& job = state.job(preemptor);
  PreemptionPlan out;
  const auto [req, pending, need] = PreemptorNeed(state, job, options);
  if (pending < need) {
    out.reason = "job " + job.spec.name + " needs " + std::to_string(need) + " replicas but has " +
                 std::to_string(pending) + " pending tasks";
    return out;
  }
  if (options.victims == VictimSelection::kKube) {
    return KubePreemptionPlan(state, preemptor, req, need, now_s, options.align, being_evicted, filter);
  }
  if (options.victims == VictimSelection::kVolcano) {
    return VolcanoPreemptionPlan(state, preemptor, req, need, now_s, options, being_evicted, filter);
  }
  // The nodes of the models the job may use: only victims with a task there can make room for
  // it, and only they may spend what the budgets allow (VictimFilter::take).
  std::vector<NodeId> admitted;
  admitted.reserve(state.num_nodes());
  for (const Node& n : state.nodes()) {
    if (!req.NeedsGpu() || req.models.Admits(n.spec.model)) admitted.push_back(n.id);
  }
  std::optional<Solver> whole;  // over the admitted nodes, made when needed
  auto solver = [&]() -> Solver& {
    if (!whole) whole.emplace(state, preemptor, req, need, now_s, options, being_evicted, filter, &admitted);
    return *whole;
  };
  const std::string what = std::to_string(need) + " replicas of (" + Describe(req) + ")";
  const std::string whose = filter.allowed ? " evicting all the work it may take back"
                                           : " evicting all preemptible work of priority below " + std::to_string(job.spec.priority);
  const Topology& topo = state.topology();
  const TopologyConstraint& tc = job.spec.topology;
  if (!(options.topology && tc.plane.valid() && tc.required_level >= 0)) {
    const int64_t cap = solver().Capacity(admitted);
    if (cap < need) {
      out.reason = "needs " + what + "; even" + whose + " the cluster holds " + std::to_string(cap);
      return out;
    }
    return solver().Solve(admitted).first;
  }
  const std::string& level = topo.plane(tc.plane).levels[tc.required_level];
  bool whole_node = req.NeedsGpu() && !req.IsSharedGpu();
  for (const Node& n : state.nodes()) {
    whole_node = whole_node && (n.spec.gpu_count == 0 || req.gpu_count >= n.spec.gpu_count);
  }
  bool found = false;
  Spend best_spend;
  int64_t best_cap = 0;
  for (DomainId d : topo.DomainsAt(tc.plane, tc.required_level)) {
    std::vector<NodeId> set = topo.domain(d).nodes;
    std::sort(set.begin(), set.end());
    // With budgets, each domain's candidates are offered to them afresh (units elsewhere must
    // not spend what this domain's victims may take).
    std::optional<Solver> own;
    if (filter.take) own.emplace(state, preemptor, req, need, now_s, options, being_evicted, filter, &set);
    Solver& s = own ? *own : solver();
    const int64_t cap = s.Capacity(set);
    best_cap = std::max(best_cap, cap);
    if (cap < need) continue;
    // A domain whose every plan must evict a higher priority than the best plan so far cannot
    // win (whole-node replicas: a node must be emptied of GPU work to take one).
    if (found && whole_node && s.PriorityBound(set) > best_spend.max_priority) continue;
    auto [plan, spend] = s.Solve(set);
    if (found && std::tie(spend.max_priority, spend.cost, spend.runtime, spend.tasks) >=
                     std::tie(best_spend.max_priority, best_spend.cost, best_spend.runtime, best_spend.tasks)) {
      continue;
    }
    found = true;
    best_spend = spend;
    out = std::move(plan);
  }
  if (!found) {
    out.reason = "needs " + what + " in one " + level + "; even" + whose + " the best " + level + " holds " +
                 std::to_string(best_cap);
  }
  return out;
}

}  // namespace estuary
