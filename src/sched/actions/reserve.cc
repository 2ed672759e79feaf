#include "sched/actions/reserve.h"

#include <algorithm>
#include <optional>
#include <tuple>

namespace estuary {

namespace {

struct Candidate {
  int64_t gpu_used;
  int64_t cpu_used;
  uint32_t group;  // domain order (0 when not grouped)
  uint32_t node;
  int64_t capacity;  // replicas the empty node holds
  bool operator<(const Candidate& o) const {
    return std::tie(gpu_used, cpu_used, group, node) < std::tie(o.gpu_used, o.cpu_used, o.group, o.node);
  }
};

// The cheapest prefix of `c` (sorted in place) holding `need` replicas; its cost and length, or
// length 0 when all of them fall short.
std::pair<int64_t, size_t> CheapestPrefix(std::vector<Candidate>& c, int64_t need) {
  std::sort(c.begin(), c.end());
  int64_t held = 0, cost = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    held += c[i].capacity;
    cost += c[i].gpu_used;
    if (held >= need) return {cost, i + 1};
  }
  return {0, 0};
}

}  // namespace

std::vector<NodeId> ReserveAction::Plan(const ClusterState& state, JobId job_id, const AllocateOptions& options,
                                        bool empty_only) {
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
  if (!any) return {};
  const int64_t step = options.align ? std::max<int32_t>(1, job.spec.step) : 1;
  const int64_t need = (std::max<int64_t>(1, job.spec.min_replicas) + step - 1) / step * step;
  auto candidate = [&](const Node& n, uint32_t group) -> std::optional<Candidate> {
    if (!n.Schedulable()) return std::nullopt;
    if (n.reservation.valid() && state.reservation(n.reservation).owner != job_id) return std::nullopt;
    const int64_t cap = AllocateAction::ReplicasFitting(state, n, req, true);
    if (cap <= 0) return std::nullopt;
    if (empty_only && !n.tasks.empty()) return std::nullopt;
    return Candidate{int64_t{n.spec.gpu_count} * kMilliPerGpu - n.gpu_free_total, n.spec.cpu_milli - n.cpu_free, group,
                     n.id.value(), cap};
  };
  const Topology& topo = state.topology();
  const TopologyConstraint& tc = job.spec.topology;
  std::vector<Candidate> c;
  std::vector<NodeId> out;
  if (options.topology && tc.plane.valid() && tc.required_level >= 0) {
    int64_t best_cost = 0, best_room = 0;
    std::vector<NodeId> partial;  // empty_only: the empty nodes of the domain with the most room
    for (DomainId d : topo.DomainsAt(tc.plane, tc.required_level)) {
      if (req.NeedsGpu() && state.domain_free(d).gpu_milli / req.TotalGpuMilli() < need) {
        continue;  // cannot hold the job even empty (the aggregate bounds it)
      }
      c.clear();
      for (NodeId n : topo.domain(d).nodes) {
        if (auto x = candidate(state.node(n), 0)) c.push_back(*x);
      }
      const auto [cost, len] = CheapestPrefix(c, need);
      if (len == 0 && empty_only && out.empty()) {
        int64_t room = 0;
        for (const Candidate& x : c) room += x.capacity;
        if (room > best_room) {
          best_room = room;
          partial.clear();
          for (const Candidate& x : c) partial.push_back(NodeId(x.node));
        }
      }
      if (len == 0 || (!out.empty() && cost >= best_cost)) continue;
      best_cost = cost;
      out.clear();
      for (size_t i = 0; i < len; ++i) out.push_back(NodeId(c[i].node));
    }
    return out.empty() ? partial : out;
  }
  const bool grouped = options.topology && tc.plane.valid() && tc.preferred_level >= 0;
  for (const Node& n : state.nodes()) {
    uint32_t group = 0;
    if (grouped) {
      const DomainId d = topo.NodeDomain(n.id, tc.plane, tc.preferred_level);
      group = d.valid() ? d.value() : DomainId::kInvalidValue;
    }
    if (auto x = candidate(n, group)) c.push_back(*x);
  }
  const size_t len = CheapestPrefix(c, need).second;
  for (size_t i = 0; i < (len == 0 && empty_only ? c.size() : len); ++i) out.push_back(NodeId(c[i].node));
  return out;
}

int ReserveAction::Renew(ClusterState& state, std::span<const JobId> waiting, int max_jobs,
                         const AllocateOptions& options, std::span<const char> empty_only) {
  const size_t k = std::min<size_t>(waiting.size(), static_cast<size_t>(std::max(0, max_jobs)));
  for (JobId j : waiting) {
    if (state.job(j).reservation.valid()) state.ReleaseReservation(state.job(j).reservation);
  }
  int made = 0;
  for (size_t i = 0; i < k; ++i) {
    if (state.job(waiting[i]).reservation.valid()) continue;  // listed twice: held already
    std::vector<NodeId> nodes = Plan(state, waiting[i], options, i < empty_only.size() && empty_only[i] != 0);
    if (nodes.empty()) continue;
    state.AddReservation(waiting[i], nodes);
    ++made;
  }
  return made;
}

}  // namespace estuary
