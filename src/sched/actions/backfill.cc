#include "sched/actions/backfill.h"

#include <algorithm>
#include <tuple>

#include "common/check.h"

namespace estuary {

namespace {

// A node's free capacity as the plan sees it at some time.
struct Room {
  NodeId node;
  size_t group = 0;
  MilliCpu cpu = 0;
  MemMiB mem = 0;
  std::array<MilliGpu, kMaxGpusPerNode> gpu{};
  int32_t gpu_count = 0;
  int32_t full = 0;  // GPUs wholly free
  int64_t now = 0;   // replicas that fit now
  int64_t fit = 0;   // replicas that fit at the time looked at
};

// Replicas of `r` that fit `w` (AllocateAction::ReplicasFitting on free amounts; the model was
// checked when the node became a candidate).
int64_t Fit(const Room& w, const TaskRequest& r) {
  constexpr int64_t kMany = int64_t{1} << 40;
  int64_t k = std::min(r.cpu_milli > 0 ? w.cpu / r.cpu_milli : kMany, r.mem_mib > 0 ? w.mem / r.mem_mib : kMany);
  if (r.NeedsGpu()) {
    int64_t g = 0;
    if (r.IsSharedGpu()) {
      for (int i = 0; i < w.gpu_count; ++i) g += w.gpu[static_cast<size_t>(i)] / r.gpu_milli;
    } else {
      g = w.full / r.gpu_count;
    }
    k = std::min(k, g);
  }
  return k;
}

// The ends of node `n`'s running tasks onto `out` (BackfillReleases' rule).
void AddReleases(const ClusterState& state, NodeId n, int64_t now_s, std::vector<BackfillReleases::Release>& out) {
  for (TaskId t : state.node(n).tasks) {
    const Task& task = state.task(t);
    if (task.standby || task.borrowed) continue;  // lent or borrowed GPUs: not freed by its end
    const Job& j = state.job(task.job);
    if (j.spec.walltime_s <= 0 || j.started_at_s < 0) continue;  // never ends, as far as we know
    out.push_back({std::max(now_s, j.started_at_s + j.spec.walltime_s), t});
  }
}

// BackfillAction::Plan's timeline over the candidate nodes of one job: their room, grouped by
// domain of the job's required level (or all in one group), as the running tasks' walltimes end
// (releases) and as other jobs' planned runs block nodes and free them again.
class Sweep {
 public:
  // 1. The candidate nodes: schedulable, not held for another job, able to hold a replica of
  // `req` at all.
  Sweep(const ClusterState& state, JobId job, const TaskRequest& req, const AllocateOptions& options)
      : state_(state), req_(req), room_of_(state.num_nodes(), SIZE_MAX) {
    const Topology& topo = state.topology();
    const TopologyConstraint& tc = state.job(job).spec.topology;
    if (options.topology && tc.plane.valid() && tc.required_level >= 0) {
      groups_ = topo.DomainsAt(tc.plane, tc.required_level);
      for (size_t g = 0; g < groups_.size(); ++g) {
        for (NodeId n : topo.domain(groups_[g]).nodes) Add(state.node(n), job, g);
      }
    } else {
      groups_.push_back(DomainId());
      for (const Node& n : state.nodes()) Add(n, job, 0);
    }
    blocked_.assign(rooms_.size(), 0);
  }

  // 2. The releases of the running tasks on the candidate nodes (from `sorted`, made at now_s,
  // when given), in order of their walltime end.
  void AddReleases(int64_t now_s, const BackfillReleases* sorted) {
    if (sorted != nullptr) {
      ESTUARY_CHECK(sorted->now_s == now_s);
      for (const Release& r : sorted->releases) {
        if (room_of_[state_.task(r.task).node.value()] != SIZE_MAX) releases_.push_back(r);
      }
    } else {
      for (const Room& w : rooms_) estuary::AddReleases(state_, w.node, now_s, releases_);
      std::sort(releases_.begin(), releases_.end());
    }
  }

  // 2. The blocks of candidate nodes, for a run of `run` seconds: a node is off for the starts t
  // with from - run < t < to (the run would meet the block).
  void AddBlocks(std::span<const BackfillBlock> blocks, int64_t now_s, int64_t run) {
    for (const BackfillBlock& b : blocks) {
      if (b.node.value() >= room_of_.size() || room_of_[b.node.value()] == SIZE_MAX || b.to_s <= now_s) continue;
      const size_t r = room_of_[b.node.value()];
      offs_.push_back({b.from_s - run, r});
      if (b.to_s != INT64_MAX) ons_.push_back({b.to_s, r});
    }
    std::sort(offs_.begin(), offs_.end());
    std::sort(ons_.begin(), ons_.end());
  }

  // 3. The earliest time from now_s on at which a group holds `need` replicas on its nodes not
  // blocked then, and that group (SIZE_MAX: none by the known walltimes).
  std::pair<int64_t, size_t> Earliest(int64_t now_s, int64_t need) {
    held_.assign(groups_.size(), 0);
    for (const Room& w : rooms_) held_[w.group] += w.fit;
    int64_t at = now_s;
    Advance(at);
    size_t group = FirstHolding(need);
    while (group == SIZE_MAX && (release_ < releases_.size() || on_ < ons_.size())) {
      at = INT64_MAX;
      if (release_ < releases_.size()) at = releases_[release_].at;
      if (on_ < ons_.size()) at = std::min(at, ons_[on_].at);
      Advance(at);
      group = FirstHolding(need);
    }
    return {at, group};
  }

  // 4. The nodes of `group` (after Earliest) that hold `need` replicas: most room now first, in
  // node order.
  std::vector<NodeId> NodesOf(size_t group, int64_t need) const {
    std::vector<const Room*> in;
    for (size_t r = 0; r < rooms_.size(); ++r) {
      if (rooms_[r].group == group && rooms_[r].fit > 0 && blocked_[r] == 0) in.push_back(&rooms_[r]);
    }
    std::sort(in.begin(), in.end(), [](const Room* a, const Room* b) {
      return std::make_tuple(-a->now, -a->fit, a->node.value()) < std::make_tuple(-b->now, -b->fit, b->node.value());
    });
    std::vector<NodeId> nodes;
    int64_t got = 0;
    for (const Room* w : in) {
      if (got >= need) break;
      nodes.push_back(w->node);
      got += w->fit;
    }
    std::sort(nodes.begin(), nodes.end(), [](NodeId a, NodeId b) { return a.value() < b.value(); });
    return nodes;
  }

  DomainId domain(size_t group) const { return groups_[group]; }

 private:
  using Release = BackfillReleases::Release;
  struct Edge {
    int64_t at;
    size_t room;
    bool operator<(const Edge& o) const { return std::tie(at, room) < std::tie(o.at, o.room); }
  };

  void Add(const Node& n, JobId job, size_t group) {
    if (!n.Schedulable()) return;
    if (n.reservation.valid() && state_.reservation(n.reservation).owner != job) return;
    if (AllocateAction::ReplicasFitting(state_, n, req_, true) <= 0) return;  // never holds a replica
    Room w;
    w.node = n.id;
    w.group = group;
    w.cpu = n.cpu_free;
    w.mem = n.mem_free;
    w.gpu = n.gpu_free;
    w.gpu_count = n.spec.gpu_count;
    w.full = n.full_free_gpus;
    w.now = w.fit = Fit(w, req_);
    room_of_[n.id.value()] = rooms_.size();
    rooms_.push_back(w);
  }

  size_t FirstHolding(int64_t need) const {
    for (size_t g = 0; g < held_.size(); ++g) {
      if (held_[g] >= need) return g;
    }
    return SIZE_MAX;
  }

  void Block(size_t r, int sign) {
    const Room& w = rooms_[r];
    if (blocked_[r] == 0) held_[w.group] -= w.fit;
    blocked_[r] += sign;
    if (blocked_[r] == 0) held_[w.group] += w.fit;
  }

  // Before the start at `t` is looked at: releases and block ends up to t, blocks met after t.
  void Advance(int64_t t) {
    for (; off_ < offs_.size() && offs_[off_].at < t; ++off_) Block(offs_[off_].room, 1);
    for (; on_ < ons_.size() && ons_[on_].at <= t; ++on_) Block(ons_[on_].room, -1);
    for (; release_ < releases_.size() && releases_[release_].at <= t; ++release_) {
      const Task& task = state_.task(releases_[release_].task);
      const size_t r = room_of_[task.node.value()];
      Room& w = rooms_[r];
      w.cpu += task.req.cpu_milli;
      w.mem += task.req.mem_mib;
      for (uint8_t g : task.gpus) {
        MilliGpu& free = w.gpu[g];
        const bool was_full = free == kMilliPerGpu;
        free = static_cast<MilliGpu>(std::min<int64_t>(kMilliPerGpu, free + task.req.gpu_milli));
        if (!was_full && free == kMilliPerGpu) ++w.full;
      }
      const int64_t fit = Fit(w, req_);
      if (blocked_[r] == 0) held_[w.group] += fit - w.fit;
      w.fit = fit;
    }
  }

  const ClusterState& state_;
  const TaskRequest& req_;
  std::vector<DomainId> groups_;
  std::vector<Room> rooms_;
  std::vector<size_t> room_of_;  // per node: its index in rooms_ (SIZE_MAX: no candidate)
  std::vector<Release> releases_;
  std::vector<Edge> offs_, ons_;  // off: for starts after `at`; on again: for starts at `at` or later
  std::vector<int32_t> blocked_;  // per room: blocks in force
  std::vector<int64_t> held_;     // per group: replicas its unblocked rooms hold
  size_t release_ = 0, off_ = 0, on_ = 0;
};

}  // namespace

BackfillReleases BackfillReleases::Of(const ClusterState& state, int64_t now_s) {
  BackfillReleases out;
  out.now_s = now_s;
  for (const Node& n : state.nodes()) AddReleases(state, n.id, now_s, out.releases);
  std::sort(out.releases.begin(), out.releases.end());
  return out;
}

BackfillPlan BackfillAction::Plan(const ClusterState& state, JobId job_id, int64_t now_s, const AllocateOptions& options,
                                  std::span<const BackfillBlock> blocks, const BackfillReleases* sorted) {
  BackfillPlan plan;
  const Job& job = state.job(job_id);
  const auto pending = std::find_if(job.tasks.begin(), job.tasks.end(),
                                    [&](TaskId t) { return state.task(t).state == TaskState::kPending; });
  if (pending == job.tasks.end()) return plan;
  const TaskRequest req = state.task(*pending).req;
  const int64_t step = options.align ? std::max<int32_t>(1, job.spec.step) : 1;
  const int64_t need = (std::max<int64_t>(1, job.spec.min_replicas) + step - 1) / step * step;
  constexpr int64_t kForever = INT64_MAX / 4;
  Sweep sweep(state, job_id, req, options);
  sweep.AddReleases(now_s, sorted);
  sweep.AddBlocks(blocks, now_s, job.spec.walltime_s > 0 ? job.spec.walltime_s : kForever);
  const auto [at, group] = sweep.Earliest(now_s, need);
  if (group == SIZE_MAX) return plan;
  plan.nodes = sweep.NodesOf(group, need);
  plan.found = true;
  plan.start_s = at;
  plan.domain = sweep.domain(group);
  return plan;
}

}  // namespace estuary
