#include "sched/actions/preempt_k8s.h"

#include <algorithm>
#include <climits>
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

// A node's answer to SelectVictimsOnNode, with pickOneNodeForPreemption's criteria.
struct Candidate {
  bool ok = false;  // the replica fits once the victims are gone
  std::vector<TaskId> victims;  // most important first
  int32_t max_priority = 0;     // of the victims
  int64_t priority_sum = 0;     // sum of (priority + 2^31)
  int64_t top_start = 0;        // earliest start among the victims of max_priority
};

// (smaller is better): pickOneNodeForPreemption's criteria 2-5, then node id (criterion 6).
auto Key(const Candidate& c, uint32_t node) {
  return std::make_tuple(c.max_priority, c.priority_sum, c.victims.size(), -c.top_start, node);
}

class KubeSolver {
 public:
  KubeSolver(const ClusterState& state, JobId preemptor, const TaskRequest& req, int64_t now, bool align,
             std::span<const char> being_evicted, const VictimFilter& filter)
      : state_(state), req_(req), ledger_(state, preemptor, req, now, align, being_evicted, filter) {
    cand_.resize(state.num_nodes());
  }

  // Places `need` replicas one by one (steps 1-4 of the header); false when one finds no node.
  bool Run(int64_t need, PreemptionPlan& out) {
    for (int64_t placed = 0; placed < need; ++placed) {
      if (PlaceFree(out)) continue;
      Refresh();
      int64_t best = -1;
      for (size_t i = 0; i < cand_.size(); ++i) {
        if (!cand_[i].ok) continue;
        if (best < 0 || Key(cand_[i], static_cast<uint32_t>(i)) < Key(cand_[best], static_cast<uint32_t>(best))) {
          best = static_cast<int64_t>(i);
        }
      }
      if (best < 0) {
        out.reason = "kube's preemption finds no node for replica " + std::to_string(placed + 1) + " of " +
                     std::to_string(need) + ", even evicting the lower-priority preemptible work of any one node";
        return false;
      }
      const std::vector<TaskId> victims = cand_[best].victims;
      for (TaskId t : victims) ledger_.Evict(t);
      const Node& node = state_.node(NodeId(static_cast<uint32_t>(best)));
      ESTUARY_CHECK(Fits(node, ledger_.room(best), req_) >= 1);
      ledger_.TakeReplica(node.id);
      out.nodes.push_back(node.id);
    }
    return true;
  }

  const VictimLedger& ledger() const { return ledger_; }

 private:
  // Step 1: the lowest-id usable node where a replica fits without preemption.
  bool PlaceFree(PreemptionPlan& out) {
    for (const Node& node : state_.nodes()) {
      const size_t i = node.id.value();
      if (!ledger_.usable(i) || Fits(node, ledger_.room(i), req_) < 1) continue;
      ledger_.TakeReplica(node.id);
      out.nodes.push_back(node.id);
      return true;
    }
    return false;
  }

  // Step 2 for every node whose room or candidates changed since it was last evaluated.
  void Refresh() {
    std::vector<char>& dirty = ledger_.dirty();
    for (const Node& node : state_.nodes()) {
      const size_t i = node.id.value();
      if (!dirty[i]) continue;
      dirty[i] = 0;
      Candidate& c = cand_[i];
      c = Candidate{};
      if (!ledger_.usable(i)) continue;
      // Most important first: higher priority, then earlier start (util.MoreImportantPod).
      const auto more_important = [&](TaskId a, TaskId b) {
        const Job& ja = state_.job(state_.task(a).job);
        const Job& jb = state_.job(state_.task(b).job);
        return std::make_tuple(-ja.spec.priority, ledger_.Start(ja), a.value()) <
               std::make_tuple(-jb.spec.priority, ledger_.Start(jb), b.value());
      };
      // The candidates are asked for least important first, the order they are evicted in: the
      // budgets (VictimFilter::take) admit those first, whatever order the node's tasks were
      // bound in (an engine rebuilt from the service's records binds its running jobs again in
      // job order: Engine::Know).
      std::vector<TaskId> bound(node.tasks.begin(), node.tasks.end());
      std::sort(bound.begin(), bound.end(), [&](TaskId a, TaskId b) { return more_important(b, a); });
      std::vector<TaskId> pot;
      for (TaskId t : bound) {
        if (ledger_.Candidate(t)) pot.push_back(t);
      }
      if (pot.empty()) continue;
      Room r = ledger_.room(i);
      for (TaskId t : pot) AddTask(r, state_.task(t), 1);
      if (Fits(node, r, req_) < 1) continue;
      std::reverse(pot.begin(), pot.end());
      for (TaskId t : pot) {
        AddTask(r, state_.task(t), -1);  // reprieve it ...
        if (Fits(node, r, req_) >= 1) continue;
        AddTask(r, state_.task(t), 1);  // ... unless the replica then no longer fits
        c.victims.push_back(t);
      }
      ESTUARY_CHECK(!c.victims.empty());  // the replica did not fit before any removal
      c.ok = true;
      c.max_priority = state_.job(state_.task(c.victims.front()).job).spec.priority;
      c.top_start = INT64_MAX;
      for (TaskId t : c.victims) {
        const Job& j = state_.job(state_.task(t).job);
        c.priority_sum += int64_t{j.spec.priority} + (int64_t{1} << 31);
        if (j.spec.priority == c.max_priority) c.top_start = std::min(c.top_start, ledger_.Start(j));
      }
    }
  }

  const ClusterState& state_;
  TaskRequest req_;
  VictimLedger ledger_;
  std::vector<Candidate> cand_;  // per node: SelectVictimsOnNode's answer on the ledger's room
};

}  // namespace

PreemptionPlan KubePreemptionPlan(const ClusterState& state, JobId preemptor, const TaskRequest& req, int64_t need,
                                  int64_t now_s, bool align, std::span<const char> being_evicted,
                                  const VictimFilter& filter) {
  PreemptionPlan out;
  KubeSolver solver(state, preemptor, req, now_s, align, being_evicted, filter);
  if (!solver.Run(need, out)) {
    out.nodes.clear();
    return out;
  }
  return solver.ledger().Finish(std::move(out));
}

}  // namespace estuary
