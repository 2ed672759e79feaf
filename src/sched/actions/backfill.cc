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
  TaskRequest req;
  bool any = false;
  for (TaskId t : job.tasks) {
    if (state.task(t).state == TaskState::kPending) {
      req = state.task(t).req;
      any = true;
      break;
    }
  }
  if (!any) return plan;
  const int64_t step = options.align ? std::max<int32_t>(1, job.spec.step) : 1;
  const int64_t need = (std::max<int64_t>(1, job.spec.min_replicas) + step - 1) / step * step;

  // 1. The candidate nodes, grouped: by domain of the required level, or all in one group.
  std::vector<Room> rooms;
  std::vector<size_t> room_of(state.num_nodes(), SIZE_MAX);
  const auto add = [&](const Node& n, size_t group) {
    if (!n.Schedulable()) return;
    if (n.reservation.valid() && state.reservation(n.reservation).owner != job_id) return;
    if (AllocateAction::ReplicasFitting(state, n, req, true) <= 0) return;  // never holds a replica
    Room w;
    w.node = n.id;
    w.group = group;
    w.cpu = n.cpu_free;
    w.mem = n.mem_free;
    w.gpu = n.gpu_free;
    w.gpu_count = n.spec.gpu_count;
    w.full = n.full_free_gpus;
    w.now = w.fit = Fit(w, req);
    room_of[n.id.value()] = rooms.size();
    rooms.push_back(w);
  };
  const Topology& topo = state.topology();
  const TopologyConstraint& tc = job.spec.topology;
  const bool required = options.topology && tc.plane.valid() && tc.required_level >= 0;
  std::vector<DomainId> groups;
  if (required) {
    groups = topo.DomainsAt(tc.plane, tc.required_level);
    for (size_t g = 0; g < groups.size(); ++g) {
      for (NodeId n : topo.domain(groups[g]).nodes) add(state.node(n), g);
    }
  } else {
    groups.push_back(DomainId());
    for (const Node& n : state.nodes()) add(n, 0);
  }
  // 2. The releases of the running tasks on those nodes, in order of their walltime end.
  using Release = BackfillReleases::Release;
  std::vector<Release> releases;
  if (sorted != nullptr) {
    ESTUARY_CHECK(sorted->now_s == now_s);
    for (const Release& r : sorted->releases) {
      if (room_of[state.task(r.task).node.value()] != SIZE_MAX) releases.push_back(r);
    }
  } else {
    for (const Room& w : rooms) AddReleases(state, w.node, now_s, releases);
    std::sort(releases.begin(), releases.end());
  }
  // The blocks of candidate nodes, for a run of the job's walltime: a node is off for the starts
  // t with from - walltime < t < to (the run would meet the block).
  constexpr int64_t kForever = INT64_MAX / 4;
  const int64_t run = job.spec.walltime_s > 0 ? job.spec.walltime_s : kForever;
  struct Edge {
    int64_t at;
    size_t room;
    bool operator<(const Edge& o) const { return std::tie(at, room) < std::tie(o.at, o.room); }
  };
  std::vector<Edge> offs, ons;  // off: for starts after `at`; on again: for starts at `at` or later
  std::vector<int32_t> blocked(rooms.size(), 0);
  for (const BackfillBlock& b : blocks) {
    if (b.node.value() >= room_of.size() || room_of[b.node.value()] == SIZE_MAX || b.to_s <= now_s) continue;
    const size_t r = room_of[b.node.value()];
    offs.push_back({b.from_s - run, r});
    if (b.to_s != INT64_MAX) ons.push_back({b.to_s, r});
  }
  std::sort(offs.begin(), offs.end());
  std::sort(ons.begin(), ons.end());
  std::vector<int64_t> held(groups.size(), 0);
  for (const Room& w : rooms) held[w.group] += w.fit;

  // 3. The earliest time a group holds the job, on its nodes not blocked then.
  const auto first_holding = [&]() -> size_t {
    for (size_t g = 0; g < held.size(); ++g) {
      if (held[g] >= need) return g;
    }
    return SIZE_MAX;
  };
  const auto block = [&](size_t r, int sign) {
    Room& w = rooms[r];
    if (blocked[r] == 0) held[w.group] -= w.fit;
    blocked[r] += sign;
    if (blocked[r] == 0) held[w.group] += w.fit;
  };
  size_t release = 0, off = 0, on = 0;
  // Before the start at `t` is looked at: releases and block ends up to t, blocks met after t.
  const auto advance = [&](int64_t t) {
    for (; off < offs.size() && offs[off].at < t; ++off) block(offs[off].room, 1);
    for (; on < ons.size() && ons[on].at <= t; ++on) block(ons[on].room, -1);
    for (; release < releases.size() && releases[release].at <= t; ++release) {
      const Task& task = state.task(releases[release].task);
      const size_t r = room_of[task.node.value()];
      Room& w = rooms[r];
      w.cpu += task.req.cpu_milli;
      w.mem += task.req.mem_mib;
      for (uint8_t g : task.gpus) {
        MilliGpu& free = w.gpu[g];
        const bool was_full = free == kMilliPerGpu;
        free = static_cast<MilliGpu>(std::min<int64_t>(kMilliPerGpu, free + task.req.gpu_milli));
        if (!was_full && free == kMilliPerGpu) ++w.full;
      }
      const int64_t fit = Fit(w, req);
      if (blocked[r] == 0) held[w.group] += fit - w.fit;
      w.fit = fit;
    }
  };
  int64_t at = now_s;
  advance(at);
  size_t group = first_holding();
  while (group == SIZE_MAX && (release < releases.size() || on < ons.size())) {
    at = INT64_MAX;
    if (release < releases.size()) at = releases[release].at;
    if (on < ons.size()) at = std::min(at, ons[on].at);
    advance(at);
    group = first_holding();
  }
  if (group == SIZE_MAX) return plan;

  // 4. Its nodes: most room now first, until they hold the job.
  std::vector<const Room*> in;
  for (size_t r = 0; r < rooms.size(); ++r) {
    if (rooms[r].group == group && rooms[r].fit > 0 && blocked[r] == 0) in.push_back(&rooms[r]);
  }
  std::sort(in.begin(), in.end(), [](const Room* a, const Room* b) {
    return std::make_tuple(-a->now, -a->fit, a->node.value()) < std::make_tuple(-b->now, -b->fit, b->node.value());
  });
  int64_t got = 0;
  for (const Room* w : in) {
    if (got >= need) break;
    plan.nodes.push_back(w->node);
    got += w->fit;
  }
  std::sort(plan.nodes.begin(), plan.nodes.end(), [](NodeId a, NodeId b) { return a.value() < b.value(); });
  plan.found = true;
  plan.start_s = at;
  plan.domain = groups[group];
  return plan;
}

}  // namespace estuary
