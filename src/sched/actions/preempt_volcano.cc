#include "sched/actions/preempt_volcano.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "common/check.h"
#include "sched/actions/preempt_victims.h"

namespace estuary {
namespace {

using preempt_internal::AddTask;
using preempt_internal::Fits;
using preempt_internal::Room;
using preempt_internal::VictimLedger;

class VolcanoSolver {
 public:
  VolcanoSolver(const ClusterState& state, JobId preemptor, const TaskRequest& req, int64_t now, bool align,
                std::span<const char> being_evicted, const VictimFilter& filter)
      : state_(state), req_(req), filter_(filter), ledger_(state, preemptor, req, now, align, being_evicted, filter) {}

  // Places `need` replicas one by one on `order`'s nodes (steps 2-3 of the header); false, with
  // the replica that found no node in `out.reason`, when one does not fit.
  bool Run(const std::vector<NodeId>& order, int64_t need, PreemptionPlan& out) {
    for (int64_t placed = 0; placed < need; ++placed) {
      bool done = false;
      for (NodeId id : order) {
        if (Place(id)) {
          out.nodes.push_back(id);
          done = true;
          break;
        }
      }
      if (!done) {
        out.reason = "Volcano's preemption finds no node for replica " + std::to_string(placed + 1) + " of " +
                     std::to_string(need) + ", even evicting the lower-priority preemptible work of any one node";
        return false;
      }
    }
    return true;
  }

  const VictimLedger& ledger() const { return ledger_; }
  VictimLedger& ledger() { return ledger_; }

 private:
  // Step 2 on node `id`: false when its room and all its victims together cannot hold a replica.
  bool Place(NodeId id) {
    const size_t i = id.value();
    const Node& node = state_.node(id);
    if (!ledger_.usable(i)) return false;
    if (Fits(node, ledger_.room(i), req_) < 1) {
      // The candidates are asked for in victim order: the budgets (VictimFilter::take) admit the
      // first victims first, whatever order the node's tasks were bound in (an engine rebuilt
      // from the service's records binds its running jobs again in job order: Engine::Know).
      std::vector<TaskId> bound(node.tasks.begin(), node.tasks.end());
      std::sort(bound.begin(), bound.end(), [&](TaskId a, TaskId b) { return Order(a) < Order(b); });
      std::vector<TaskId> victims;
      Room r = ledger_.room(i);
      for (TaskId t : bound) {
        if (!ledger_.Candidate(t)) continue;
        victims.push_back(t);
        AddTask(r, state_.task(t), 1);
      }
      if (Fits(node, r, req_) < 1) return false;
      for (TaskId t : victims) {
        if (Fits(node, ledger_.room(i), req_) >= 1) break;
        if (ledger_.Candidate(t)) ledger_.Evict(t);  // not yet gone with its job
      }
      ESTUARY_CHECK(Fits(node, ledger_.room(i), req_) >= 1);
    }
    ledger_.TakeReplica(id);
    return true;
  }

  // Volcano's victim order (smaller first): rank, priority, the job created last, the last task.
  std::tuple<int64_t, int32_t, int64_t, int64_t> Order(TaskId t) const {
    const Job& j = state_.job(state_.task(t).job);
    return {filter_.rank ? filter_.rank(j) : 0, j.spec.priority, -int64_t{j.id.value()}, -int64_t{t.value()}};
  }

  const ClusterState& state_;
  TaskRequest req_;
  const VictimFilter& filter_;
  VictimLedger ledger_;
};

// Step 1: `nodes`' usable ones by score, highest first, then node id.
std::vector<NodeId> ScoreOrder(const ClusterState& state, std::vector<NodeId> nodes, const TaskRequest& req,
                               const VictimFilter& filter) {
  std::erase_if(nodes, [&](NodeId n) {
    const Node& node = state.node(n);
    return !node.Schedulable() || (req.NeedsGpu() && !req.models.Admits(node.spec.model));
  });
  std::vector<std::pair<int64_t, uint32_t>> keyed;
  keyed.reserve(nodes.size());
  for (NodeId n : nodes) keyed.emplace_back(filter.node_score ? -filter.node_score(state.node(n)) : 0, n.value());
  std::sort(keyed.begin(), keyed.end());
  std::vector<NodeId> out;
  out.reserve(keyed.size());
  for (const auto& [score, n] : keyed) out.push_back(NodeId(n));
  return out;
}

}  // namespace

PreemptionPlan VolcanoPreemptionPlan(const ClusterState& state, JobId preemptor, const TaskRequest& req, int64_t need,
                                     int64_t now_s, const AllocateOptions& options, std::span<const char> being_evicted,
                                     const VictimFilter& filter) {
  const Topology& topo = state.topology();
  const TopologyConstraint& tc = state.job(preemptor).spec.topology;
  std::vector<std::vector<NodeId>> groups;
  if (options.topology && tc.plane.valid() && tc.required_level >= 0) {
    for (DomainId d : topo.DomainsAt(tc.plane, tc.required_level)) groups.push_back(topo.domain(d).nodes);
  } else {
    groups.emplace_back();
    for (const Node& n : state.nodes()) groups.back().push_back(n.id);
  }
  PreemptionPlan out;
  out.reason = "no node can hold the job";
  // One solver for every domain, reset between them (its set-up is O(nodes + jobs + tasks)).
  VolcanoSolver solver(state, preemptor, req, now_s, options.align, being_evicted, filter);
  for (size_t g = 0; g < groups.size(); ++g) {
    if (filter.reset) filter.reset();
    if (g > 0) solver.ledger().Reset();
    PreemptionPlan plan;
    if (solver.Run(ScoreOrder(state, std::move(groups[g]), req, filter), need, plan)) {
      return solver.ledger().Finish(std::move(plan));
    }
    out.reason = plan.reason;
  }
  if (groups.size() > 1) {
    out.reason = "Volcano's preemption finds no " + topo.plane(tc.plane).levels[tc.required_level] + " that holds all " +
                 std::to_string(need) + " replicas, even evicting the lower-priority preemptible work of its nodes";
  }
  return out;
}

}  // namespace estuary
