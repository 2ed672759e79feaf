#include "sched/actions/migration.h"

#include <algorithm>
#include <string>

#include "sched/framework/gpu_choice.h"

namespace estuary {

Status MigrationExecutor::Validate(const MigrationOptions& o) {
  auto bad = [](const char* field, int64_t v, const char* want) {
    return InvalidArgument(std::string(field) + ": " + std::to_string(v) + " (must be " + want + ")");
  };
  if (o.max_concurrent < 1) return bad("max_concurrent", o.max_concurrent, ">= 1");
  if (o.per_node < 1) return bad("per_node", o.per_node, ">= 1");
  if (o.per_job < 1) return bad("per_job", o.per_job, ">= 1");
  if (o.max_moves < 0) return bad("max_moves", o.max_moves, ">= 0");
  if (o.startup_s < 0) return bad("startup_s", o.startup_s, ">= 0");
  if (o.timeout_s <= o.startup_s) return bad("timeout_s", o.timeout_s, "> startup_s");
  if (o.fail_permille < 0 || o.fail_permille > 1000) return bad("fail_permille", o.fail_permille, "in [0, 1000]");
  return Status::Ok();
}

MigrationExecutor::MigrationExecutor(MigrationOptions options) : options_(options), rng_(options.seed) {}

int64_t MigrationExecutor::Submit(ClusterState& /*state*/, const DefragPlan& plan) {
  const std::vector<DefragMove>& pm = plan.moves;
  // The node a chain vacates: the source of its last move (its ejected tasks move first).
  int32_t chains = 0;
  for (const DefragMove& m : pm) chains = std::max(chains, m.chain + 1);
  std::vector<NodeId> chain_node(static_cast<size_t>(chains));
  for (const DefragMove& m : pm) {
    if (m.chain >= 0) chain_node[static_cast<size_t>(m.chain)] = m.from;
  }
  auto group_node = [&](const DefragMove& m) { return m.chain >= 0 ? chain_node[static_cast<size_t>(m.chain)] : m.from; };
  // Keep a prefix of whole groups (a group's moves are consecutive in the plan).
  size_t keep = 0;
  for (size_t i = 0; i < pm.size();) {
    size_t j = i + 1;
    while (j < pm.size() && group_node(pm[j]) == group_node(pm[i])) ++j;
    if (options_.max_moves > 0 && static_cast<int64_t>(j) > options_.max_moves) break;
    keep = j;
    i = j;
  }
  const size_t base = moves_.size();
  for (size_t i = 0; i < keep; ++i) {
    if (i == 0 || group_node(pm[i]) != group_node(pm[i - 1])) {
      Group g;
      g.node = group_node(pm[i]);
      groups_.push_back(g);
    }
    Move m;
    m.plan = pm[i];
    for (size_t& a : m.plan.after) a += base;
    m.group = groups_.size() - 1;
    ++groups_.back().left;
    moves_.push_back(std::move(m));
  }
  active_ += static_cast<int64_t>(keep);
  counters_.planned += static_cast<int64_t>(keep);
  return static_cast<int64_t>(keep);
}

void MigrationExecutor::NodeTaken(NodeId node) {
  const auto it = cordoning_.find(node.value());
  if (it == cordoning_.end()) return;
  groups_[it->second].cordoned = false;
  cordoning_.erase(it);
}

void MigrationExecutor::GiveUpMovesOnto(NodeId node) {
  for (size_t i = first_open_; i < moves_.size(); ++i) {
    if (moves_[i].state == MoveState::kStarting && moves_[i].plan.to == node) moves_[i].target_emptied = true;
  }
}

void MigrationExecutor::MarkMoving(std::vector<char>& tasks) const {
  for (size_t i = first_open_; i < moves_.size(); ++i) {
    const Move& m = moves_[i];
    if (m.state != MoveState::kWaiting && m.state != MoveState::kStarting) continue;
    const size_t t = m.plan.task.value();
    if (tasks.size() <= t) tasks.resize(t + 1, 0);
    tasks[t] = 1;
  }
}

void MigrationExecutor::Uncordon(ClusterState& state, Group& g) {
  if (!g.cordoned) return;
  g.cordoned = false;
  cordoning_.erase(g.node.value());
  if (state.node(g.node).state == NodeState::kCordoned) state.SetNodeState(g.node, NodeState::kReady);
}

void MigrationExecutor::EndMove(ClusterState& state, size_t i, MoveState end, int64_t now_s) {
  Move& m = moves_[i];
  if (m.state == MoveState::kStarting) {
    if (end != MoveState::kCompleted) state.ReleaseCapacity(m.reservation);
    counters_.double_occupancy_gpu_milli_s +=
        state.task(m.plan.task).req.TotalGpuMilli() * std::max<int64_t>(0, now_s - m.started_s);
    --starting_;
    --node_busy_[m.plan.from.value()];
    --node_busy_[m.plan.to.value()];
    --job_busy_[state.task(m.plan.task).job.value()];
  }
  m.state = end;
  m.ended_s = now_s;
  events_.push_back({now_s, i, end});
  --active_;
  if (end == MoveState::kCompleted) ++counters_.completed;
  if (end == MoveState::kAborted) ++counters_.aborted;
  if (end == MoveState::kCancelled) ++counters_.cancelled;
  Group& g = groups_[m.group];
  --g.left;
  if (end != MoveState::kCompleted && !g.broken) {
    g.broken = true;
    Uncordon(state, g);
  }
  if (g.left == 0 && !g.broken) {
    ++counters_.groups_completed;
    Uncordon(state, g);
  }
}

bool MigrationExecutor::TryStart(ClusterState& state, size_t i, int64_t now_s) {
  Move& m = moves_[i];
  const Task& t = state.task(m.plan.task);
  const Node& to = state.node(m.plan.to);
  if (t.state != TaskState::kBound || t.node != m.plan.from || t.standby || t.borrowed ||
      to.state != NodeState::kReady) {
    EndMove(state, i, MoveState::kCancelled, now_s);
    return false;
  }
  auto r = state.ReserveCapacity(t.job, t.id, m.plan.to, t.req, m.plan.gpus, now_s, options_.timeout_s);
  if (!r.ok() && t.req.NeedsGpu()) {
    // The planned GPUs were taken meanwhile: the best fit on the same node, if any.
    const bool fits = t.req.IsSharedGpu() ? LeastFreeGpuThatFits(to, t.req.gpu_milli) >= 0
                                          : to.full_free_gpus >= t.req.gpu_count;
    if (fits) r = state.ReserveCapacity(t.job, t.id, m.plan.to, t.req, BestFitGpus(t, to), now_s, options_.timeout_s);
  }
  if (!r.ok()) {
    EndMove(state, i, MoveState::kCancelled, now_s);
    return false;
  }
  // Drain the group's node from its first move on (not before: an earlier group may still be
  // moving tasks onto it — a node can receive in one round and be vacated in the next).
  Group& g = groups_[m.group];
  if (!g.began) {
    g.began = true;
    if (options_.drain && state.node(g.node).state == NodeState::kReady) {
      state.SetNodeState(g.node, NodeState::kCordoned);
      g.cordoned = true;
      cordoning_[g.node.value()] = m.group;
    }
  }
  m.reservation = *r;
  m.gpus = state.reservation(*r).gpus;
  m.state = MoveState::kStarting;
  m.started_s = now_s;
  m.fails = options_.fail_permille > 0 && rng_.Uniform(1000) < static_cast<uint64_t>(options_.fail_permille);
  ++counters_.started;
  events_.push_back({now_s, i, MoveState::kStarting});
  ++starting_;
  ++node_busy_[m.plan.from.value()];
  ++node_busy_[m.plan.to.value()];
  ++job_busy_[t.job.value()];
  return true;
}

void MigrationExecutor::Step(ClusterState& state, int64_t now_s) {
  if (node_busy_.size() < state.num_nodes()) node_busy_.resize(state.num_nodes(), 0);
  if (job_busy_.size() < state.jobs().size()) job_busy_.resize(state.jobs().size(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    // Starting moves: complete the ready ones, abort the broken ones.
    for (size_t i = first_open_; i < moves_.size(); ++i) {
      Move& m = moves_[i];
      if (m.state != MoveState::kStarting) continue;
      const Task& t = state.task(m.plan.task);
      const bool source_gone = t.state != TaskState::kBound || t.node != m.plan.from || t.standby || t.borrowed;
      const bool target_gone = state.reservation(m.reservation).state != ReservationState::kAvailable ||
                               state.node(m.plan.to).state == NodeState::kDown || m.target_emptied;
      const bool failed = options_.acknowledged
                              ? m.ack < 0 || (m.ack == 0 && now_s >= m.started_s + options_.timeout_s)
                              : m.fails && now_s >= m.started_s + options_.timeout_s;
      const bool ready = options_.acknowledged ? m.ack > 0 : !m.fails && now_s >= m.started_s + options_.startup_s;
      if (source_gone || target_gone || failed) {
        EndMove(state, i, MoveState::kAborted, now_s);
        changed = true;
      } else if (ready) {
        // Make-before-break: the new instance is ready; stop the old one and bind into the
        // reservation in the same step.
        const GpuIndices old_gpus = t.gpus;
        state.Unbind(m.plan.task);
        if (state.CanBindReserved(m.plan.task, m.reservation)) {
          state.BindReserved(m.plan.task, m.reservation);
          EndMove(state, i, MoveState::kCompleted, now_s);
        } else {
          state.Bind(m.plan.task, m.plan.from, old_gpus);  // what it just freed
          EndMove(state, i, MoveState::kAborted, now_s);
        }
        changed = true;
      }
    }
    // Waiting moves, in plan order: cancel what can no longer happen, start what may.
    for (size_t i = first_open_; i < moves_.size(); ++i) {
      Move& m = moves_[i];
      if (m.state != MoveState::kWaiting) continue;
      bool ready = true, dead = groups_[m.group].broken;
      for (size_t a : m.plan.after) {
        const MoveState s = moves_[a].state;
        dead |= s == MoveState::kAborted || s == MoveState::kCancelled;
        ready &= s == MoveState::kCompleted;
      }
      if (dead) {
        EndMove(state, i, MoveState::kCancelled, now_s);
        changed = true;
        continue;
      }
      if (!ready || starting_ >= options_.max_concurrent) continue;
      const JobId job = state.task(m.plan.task).job;
      if (node_busy_[m.plan.from.value()] >= options_.per_node || node_busy_[m.plan.to.value()] >= options_.per_node ||
          job_busy_[job.value()] >= options_.per_job) {
        continue;
      }
      TryStart(state, i, now_s);
      changed = true;
    }
    while (first_open_ < moves_.size() && (moves_[first_open_].state == MoveState::kCompleted ||
                                           moves_[first_open_].state == MoveState::kAborted ||
                                           moves_[first_open_].state == MoveState::kCancelled)) {
      ++first_open_;
    }
  }
}

bool MigrationExecutor::Acknowledge(TaskId task, bool ready) {
  for (size_t i = first_open_; i < moves_.size(); ++i) {
    Move& m = moves_[i];
    if (m.state != MoveState::kStarting || m.plan.task != task) continue;
    m.ack = ready ? 1 : -1;
    return true;
  }
  return false;
}

std::optional<int64_t> MigrationExecutor::NextDue() const {
  std::optional<int64_t> due;
  for (size_t i = first_open_; i < moves_.size(); ++i) {
    const Move& m = moves_[i];
    if (m.state != MoveState::kStarting) continue;
    const int64_t t = m.started_s + (m.fails || options_.acknowledged ? options_.timeout_s : options_.startup_s);
    if (!due || t < *due) due = t;
  }
  return due;
}

void MigrationExecutor::AbortAll(ClusterState& state, int64_t now_s) {
  for (size_t i = first_open_; i < moves_.size(); ++i) {
    const MoveState s = moves_[i].state;
    if (s == MoveState::kStarting) EndMove(state, i, MoveState::kAborted, now_s);
    if (s == MoveState::kWaiting) EndMove(state, i, MoveState::kCancelled, now_s);
  }
  first_open_ = moves_.size();
}

}  // namespace estuary
