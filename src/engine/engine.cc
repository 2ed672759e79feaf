#include "engine/engine.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <functional>
#include <iterator>
#include <numeric>
#include <set>
#include <type_traits>
#include <variant>

#include "sched/actions/absorb.h"
#include "sched/actions/backfill.h"
#include "sched/actions/failure.h"
#include "sched/actions/preempt.h"
#include "sched/actions/reserve.h"
#include "sched/actions/standby.h"
#include "sched/plugins/register.h"
#include "common/check.h"

namespace estuary {

Engine::Engine(ClusterState cluster, EngineConfig options)
    : options_(std::move(options)),
      state_(std::move(cluster)),
      queue_(options_.priority_queue),
      migrations_(options_.migration) {}

namespace {
// The victims' exit model of `o`: the whole grace period, or the lognormal of exit_mean_s/p95_s.
StatusOr<GracefulExit> ExitModel(const EngineConfig& o) {
  if (o.exit_mean_s <= 0) return GracefulExit::Fixed(o.grace_s);
  return GracefulExit::Fitted(o.grace_s, o.exit_mean_s, o.exit_p95_s, o.seed);
}
}  // namespace

StatusOr<std::unique_ptr<Engine>> Engine::Create(ClusterState cluster, EngineConfig options) {
  auto policy = OpenbPolicy(options.policy);
  if (!policy.ok()) return policy.status();
  ESTUARY_RETURN_IF_ERROR(MigrationExecutor::Validate(options.migration));
  auto exit = ExitModel(options);
  if (!exit.ok()) return exit.status();
  std::unique_ptr<Engine> m(new Engine(std::move(cluster), std::move(options)));
  auto book = QueueBook::Create(m->options_.queues, m->options_.sharing, m->state_, m->options_.intern_queue_models);
  if (!book.ok()) return book.status();
  m->book_ = std::move(*book);
  m->book_.WatchEvictions(&m->being_evicted_);
  m->state_.SetQueues(m->book_.Parents());
  m->FileGrowable();
  m->exit_ = *exit;
  m->options_.allocate.grace_s = m->options_.grace_s;  // victims' cost (SecondsSinceCheckpoint)
  m->policy_ = *policy;
  const bool fgd = m->policy_.gpu_select == "fgd" ||
                   std::any_of(m->policy_.scores.begin(), m->policy_.scores.end(), [](const auto& sc) { return sc.first == "fgd"; });
  m->typical_ = m->options_.typical;
  m->learn_typical_ = fgd && m->typical_ == nullptr;
  if (m->learn_typical_) m->typical_ = std::make_shared<const TypicalTasks>();
  ESTUARY_RETURN_IF_ERROR(m->OpenSession());
  for (size_t i = 0; i < m->options_.headroom.size(); ++i) {
    EngineJob h = m->options_.headroom[i].shape;
    h.id = kHeadroomJob - static_cast<uint32_t>(i);
    h.name = "hp-headroom-" + std::to_string(i);
    h.min_replicas = h.max_replicas = std::max<int32_t>(1, h.max_replicas);
    h.step = 1;
    h.priority = kHpPriority;
    h.preemptible = false;
    std::string why;
    const std::optional<size_t> li = m->Materialize(h, &why);
    if (!li) return InvalidArgument("headroom: " + why);
    m->headrooms_.push_back({*li, m->options_.headroom[i].min_job_gpus, {}, 0});
  }
  m->RestoreHeadroom(0);
  m->counting_ = true;
  m->node_evictions_.assign(m->state_.num_nodes(), 0);
  if (m->options_.reserve.enabled) {
    if (m->options_.reserve.replan_s <= 0) return InvalidArgument("reserve: replan_s must be > 0");
    if (m->options_.reserve.drain_after_s < 0) return InvalidArgument("reserve: drain_after_s must be >= 0");
    m->next_replan_ = m->options_.reserve.replan_s;
  }
  if (m->options_.defrag.enabled) {
    ESTUARY_RETURN_IF_ERROR(DefragAction::Validate(m->state_, m->options_.defrag.plan));
    if (m->options_.defrag.interval_s > 0) m->next_defrag_ = m->options_.defrag.interval_s;
  }
  return m;
}

Status Engine::OpenSession(const Session* order) {
  SessionOptions so;
  so.policy = policy_;
  so.seed = options_.seed;
  // A session opened again keeps the tie-break order of the first (nodes added since rank after).
  if (order == nullptr) order = session_.get();
  if (order != nullptr) so.node_rank = order->options().node_rank;
  auto session = Session::Open(state_, BuiltinRegistry(), PluginContext{&state_, typical_.get()}, so);
  if (!session.ok()) return session.status();
  session_ = std::move(*session);
  return Status::Ok();
}

Session& Engine::CurrentSession() {
  if (nodes_joined_) {
    // Nodes joined since the session opened: the tie-break order is drawn anew over all of them
    // (the seeded permutation of the nodes by name), so that it does not depend on when they came.
    nodes_joined_ = false;
    session_.reset();
    ESTUARY_CHECK(OpenSession().ok());  // it opened with this policy before
  }
  return *session_;
}

void Engine::Learn(const TaskRequest& req) {
  if (!learn_typical_ || !counting_) return;
  seen_.Add(req);
  if (seen_.total() < next_learn_) return;
  next_learn_ = next_learn_ < kLearnEvery ? 2 * next_learn_ : next_learn_ + kLearnEvery;
  typical_ = std::make_shared<const TypicalTasks>(seen_.Build());
  ESTUARY_CHECK(OpenSession().ok());  // it opened with this policy before
}

void Engine::Inherit(const Engine& old, bool jobs) {
  if (learn_typical_ && old.learn_typical_) {
    seen_ = old.seen_;
    next_learn_ = old.next_learn_;
    typical_ = old.typical_;
    ESTUARY_CHECK(OpenSession(old.session_.get()).ok());
    nodes_joined_ = old.nodes_joined_;
  }
  if (jobs) RestoreCarry(old.Carried());
  evacuating_ = old.evacuating_;  // the nodes are added again in id order
}

CarriedJob Engine::CarriedOf(size_t li) const {
  const Local& l = locals_[li];
  const Job& j = state_.job(l.id);
  CarriedJob c;
  c.job = l.fed;
  c.submitted = l.submitted;
  c.no_borrow_until = l.no_borrow_until;
  c.no_grow_until = l.no_grow_until;
  c.resume_nodes = j.resume_nodes;
  if (l.running) c.started_s = j.started_at_s;
  c.assembled = li == assembled_;
  // The replica of job `of` that task t is (its index in the job's tasks).
  const auto replica = [&](TaskId t) {
    const std::vector<TaskId>& of = state_.job(state_.task(t).job).tasks;
    return static_cast<uint32_t>(std::find(of.begin(), of.end(), t) - of.begin());
  };
  for (const Restore& r : restores_) {
    if (!l.running || state_.task(r.task).job != l.id) continue;
    CarriedJob::StandbyRestore out{replica(r.task), r.at, {}};
    for (TaskId v : r.noticed) {
      const size_t vi = local_of_job_[state_.task(v).job.value()];
      if (vi != SIZE_MAX && state_.task(v).state == TaskState::kBound) out.noticed.emplace_back(locals_[vi].fed, replica(v));
    }
    c.restores.push_back(std::move(out));
  }
  if (queue_.Contains(li)) {
    c.within_claim = l.within_claim;
    c.within_claim_until = l.within_claim_until;
    c.queued_at = l.queued_at;
    c.position = queue_.PositionOf(li);
    c.required_level = j.spec.topology.required_level;
    c.relax_at = l.relax_at;
    c.trigger_at = l.trigger_at;
    if (const ReservationId r = j.reservation; r.valid() && !l.reclaiming) c.held = state_.reservation(r).nodes;
    const auto p = std::find_if(planned_.begin(), planned_.end(), [&](const Planned& x) { return x.li == li; });
    if (p != planned_.end()) {
      c.planned_start = p->start_s;
      c.planned_where = p->where;
      c.planned_nodes = p->nodes;
      c.planned_holds = p->hold.valid() && p->hold == j.reservation;
    }
    c.unplanned = options_.backfill.conservative ? (li < unplanned_.size() ? unplanned_[li] : -1)
                  : unplanned_head_.first == li  ? unplanned_head_.second
                                                 : -1;
  }
  if (!l.reclaiming) return c;
  for (const Eviction& ev : evictions_) {
    if (ev.for_local != li) continue;
    c.reclaim_at = ev.at;
    c.reclaim_queue = ev.queue;
    c.claimed = l.claimed;
    for (TaskId t : ev.tasks) {
      const Task& task = state_.task(t);
      const size_t vi = local_of_job_[task.job.value()];
      if (vi == SIZE_MAX || task.state != TaskState::kBound) continue;  // ended since
      c.reclaim_tasks.emplace_back(locals_[vi].fed, replica(t));
    }
    for (JobId w : ev.whole) {
      const size_t vi = local_of_job_[w.value()];
      if (vi != SIZE_MAX) c.reclaim_whole.push_back(locals_[vi].fed);
    }
    if (const ReservationId r = j.reservation; r.valid()) c.hold = state_.reservation(r).nodes;
    break;
  }
  return c;
}

std::pair<ReservationId, int64_t> Engine::HoldOf(size_t li) const {
  const Local& l = locals_[li];
  if (l.running || l.reclaiming || !queue_.Contains(li)) return {ReservationId(), -1};
  const auto p = std::find_if(planned_.begin(), planned_.end(), [&](const Planned& x) { return x.li == li; });
  return {state_.job(l.id).reservation, p == planned_.end() ? -1 : p->start_s};
}

EngineCarry Engine::Carried(const std::vector<uint32_t>* jobs) const {
  EngineCarry out;
  const auto add = [&](size_t li) {
    if (li == SIZE_MAX || !DriverIdOf(locals_[li].id)) return;  // not an internal job (a headroom's)
    out.jobs.push_back(CarriedOf(li));
  };
  if (jobs != nullptr) {
    for (uint32_t fed : *jobs) add(LocalOf(fed));
  } else {
    for (size_t li = 0; li < locals_.size(); ++li) add(li);
  }
  out.queues = book_.Carried();
  out.usage_at = book_.usage_at();
  out.schedule = CarriedSchedule{next_defrag_, last_plan_, next_replan_, next_backfill_, walltime_starts_};
  return out;
}

std::vector<uint32_t> Engine::TakeCarryLog() {
  // Holds and plans made, changed or gone since the last call.
  std::vector<size_t> look(holders_.begin(), holders_.end());
  for (const Planned& p : planned_) look.push_back(p.li);
  for (const auto& [li, seen] : holds_seen_) look.push_back(li);
  for (size_t li : look) {
    const std::pair<ReservationId, int64_t> now = HoldOf(li);
    const auto it = holds_seen_.find(li);
    const std::pair<ReservationId, int64_t> before = it == holds_seen_.end() ? std::pair{ReservationId(), int64_t{-1}} : it->second;
    if (now == before) continue;
    LogCarry(li);
    if (!now.first.valid() && now.second < 0) holds_seen_.erase(li);
    else holds_seen_[li] = now;
  }
  std::vector<uint32_t> out;
  out.reserve(carry_log_.size());
  for (size_t li : carry_log_) {
    locals_[li].carry_logged = false;
    out.push_back(locals_[li].fed);
  }
  carry_log_.clear();
  return out;
}

void Engine::RestoreCarried(const EngineCarry& carry, int64_t now_s) {
  Record(now_s, RestoreInput{carry});
  RestoreCarry(carry);
}

void Engine::RestoreCarry(const EngineCarry& carry) {
  for (const CarriedJob& c : carry.jobs) RestoreJob(c);
  book_.Restore(carry.queues, carry.usage_at);
  if (const std::optional<CarriedSchedule>& t = carry.schedule) {
    // Periodic plans stay on their grid (a new engine's would start at its first cycle).
    if (next_defrag_ > 0 && t->next_defrag > 0) next_defrag_ = t->next_defrag;
    last_plan_ = t->last_plan;
    if (next_replan_ > 0 && t->next_replan > 0) next_replan_ = t->next_replan;
    next_backfill_ = t->next_backfill;
    walltime_starts_ = t->walltime_starts;
  }
}

void Engine::RestoreJob(const CarriedJob& c) {
  const size_t li = LocalOf(c.job);
  if (li == SIZE_MAX) return;
  Local& l = locals_[li];
  LogCarry(li);
  l.submitted = c.submitted;
  l.no_grow_until = c.no_grow_until;
  if (c.no_grow_until > now_) regrow_due_ = std::min(regrow_due_, c.no_grow_until);  // Absorb looks again then
  if (c.no_borrow_until > now_) {
    l.no_borrow_until = c.no_borrow_until;
    no_borrow_.push_back(li);
  }
  if (!c.resume_nodes.empty()) state_.SetResumeNodes(l.id, c.resume_nodes);
  if (l.running) RestoreStandbyRestores(li, c);
  if (c.assembled) assembled_ = li;
  if (!queue_.Contains(li) || c.queued_at < 0) return;
  if (c.queued_at != l.queued_at) {
    // Queued here afresh: its waits count from when it joined the queue before (those Enqueue
    // set off here are void once queued_at is not theirs).
    l.queued_at = c.queued_at;
    if (c.required_level != state_.job(l.id).spec.topology.required_level) SetRequiredLevel(li, c.required_level);
    ArmRelax(li, c.relax_at, c.queued_at);
    ArmTrigger(li, c.trigger_at, c.queued_at);
  }
  if (c.within_claim > 0) ClaimWithin(li, c.within_claim, c.within_claim_until);
  if (c.reclaim_at >= 0 && !l.reclaiming) RestoreReclaim(li, c);
  if (c.reclaim_at < 0) RestoreHold(li, c);
}

void Engine::RestoreHold(size_t li, const CarriedJob& c) {
  const JobId id = locals_[li].id;
  if (c.unplanned >= 0) {
    if (unplanned_.size() < locals_.size()) unplanned_.resize(locals_.size(), -1);
    unplanned_[li] = c.unplanned;
    if (!options_.backfill.conservative) unplanned_head_ = {li, c.unplanned};
  }
  if (!c.held.empty() && !state_.job(id).reservation.valid()) {
    if (const std::vector<NodeId> hold = Unheld(c.held); !hold.empty()) {
      state_.AddReservation(id, hold);
      if (std::find(holders_.begin(), holders_.end(), li) == holders_.end()) holders_.push_back(li);
    }
  }
  if (c.planned_start < 0 || std::any_of(planned_.begin(), planned_.end(), [&](const Planned& p) { return p.li == li; })) return;
  Planned p;
  p.li = li;
  if (c.planned_holds) p.hold = state_.job(id).reservation;
  p.start_s = c.planned_start;
  p.where = c.planned_where;
  p.nodes = c.planned_nodes;
  // In queue order, as a round plans them.
  const auto before = [&](const Planned& a) {
    const auto key = [&](size_t x) { return std::pair{-int64_t{locals_[x].priority} * options_.priority_queue, queue_.PositionOf(x)}; };
    return key(a.li) > key(li);
  };
  planned_.insert(std::find_if(planned_.begin(), planned_.end(), before), std::move(p));
}

void Engine::RestoreStandbyRestores(size_t li, const CarriedJob& c) {
  // As SetStandby left them, for the replicas still in Standby here and the borrowers' replicas
  // still bound (their notices given again).
  const std::vector<TaskId>& tasks = state_.job(locals_[li].id).tasks;
  const auto task_of = [&](uint32_t fed, uint32_t replica) {
    const size_t vi = LocalOf(fed);
    if (vi == SIZE_MAX || replica >= state_.job(locals_[vi].id).tasks.size()) return TaskId();
    return state_.job(locals_[vi].id).tasks[replica];
  };
  for (const CarriedJob::StandbyRestore& sr : c.restores) {
    if (sr.replica >= tasks.size()) continue;
    const TaskId t = tasks[sr.replica];
    if (state_.task(t).state != TaskState::kBound || !state_.task(t).standby || restoring_[t.value()]) continue;
    Restore r;
    r.task = t;
    r.at = sr.at;
    for (const auto& [fed, replica] : sr.noticed) {
      const TaskId v = task_of(fed, replica);
      if (!v.valid() || state_.task(v).state != TaskState::kBound || being_evicted_[v.value()]) continue;
      being_evicted_[v.value()] = 1;
      book_.EvictionsChanged();
      r.noticed.push_back(v);
      notices_.push_back({fed, v, r.at});
    }
    restoring_[t.value()] = 1;
    restores_.push_back(std::move(r));
  }
}

void Engine::RestoreReclaim(size_t li, const CarriedJob& c) {
  // As ReclaimWith and ScheduleEviction left it, for the victims' replicas still bound here (their
  // notices given again: a driver may not have passed them on).
  Local& l = locals_[li];
  Eviction ev;
  ev.at = c.reclaim_at;
  ev.for_local = li;
  ev.queue = c.reclaim_queue;
  for (const auto& [fed, replica] : c.reclaim_tasks) {
    const size_t vi = LocalOf(fed);
    if (vi == SIZE_MAX || replica >= state_.job(locals_[vi].id).tasks.size()) continue;
    const TaskId t = state_.job(locals_[vi].id).tasks[replica];
    if (state_.task(t).state != TaskState::kBound || being_evicted_[t.value()] != 0) continue;
    ev.tasks.push_back(t);
  }
  for (uint32_t fed : c.reclaim_whole) {
    if (const size_t vi = LocalOf(fed); vi != SIZE_MAX) ev.whole.push_back(locals_[vi].id);
  }
  if (ev.tasks.empty()) return;  // nothing left to evict: it is tried as any waiting job
  if (state_.job(l.id).reservation.valid()) Release(state_.job(l.id).reservation);
  if (const std::vector<NodeId> hold = Unheld(c.hold); !hold.empty()) {
    state_.AddReservation(l.id, hold);
    if (std::find(holders_.begin(), holders_.end(), li) == holders_.end()) holders_.push_back(li);
  }
  book_.EvictionsChanged();
  for (TaskId t : ev.tasks) {
    being_evicted_[t.value()] = 1;
    book_.Leaving(state_, t, 1);
    notices_.push_back({locals_[local_of_job_[state_.task(t).job.value()]].fed, t, ev.at});
  }
  if (ev.queue && c.claimed > 0) {
    Unclaim(li);
    l.claimed = c.claimed;
    book_.Claim(state_, l.id, l.claimed, 1);
  }
  l.reclaiming = true;
  evictions_.push_back(std::move(ev));
}

std::optional<size_t> Engine::Materialize(const EngineJob& job, std::string* why) {
  if (const size_t li = LocalOf(job.id); li != SIZE_MAX) return li;
  JobSpec js;
  js.name = job.name;
  js.min_replicas = job.min_replicas;
  js.max_replicas = job.max_replicas;
  js.step = job.step;
  js.usable_step = job.usable_step;
  js.priority = job.priority;
  js.preemptible = job.preemptible;
  js.checkpoint_interval_s = job.checkpoint_interval_s;
  js.checkpoint_on_notice_s = job.checkpoint_on_notice_s;
  js.restart_cost_s = job.restart_cost_s;
  js.walltime_s = job.walltime_s;
  if (counting_) {  // a driver's job (not a headroom's): its queue
    const std::optional<int32_t> q = book_.Resolve(job.queue, job.priority, why);
    if (!q) return std::nullopt;
    js.queue = *q;
  }
  TaskRequest req = job.per_replica;
  req.models = GpuModelSet();
  for (const std::string& name : job.models) {
    if (auto m = state_.models().Find(name)) req.models.Add(*m);
  }
  if (!job.models.empty() && req.models.Any()) {
    std::string list;
    for (const std::string& name : job.models) list += (list.empty() ? "" : "|") + name;
    *why = "cluster '" + options_.name + "' has no GPU model " + list;
    return std::nullopt;
  }
  if (!job.plane.empty()) {
    const auto plane = state_.topology().FindPlane(job.plane);
    if (!plane) {
      *why = "cluster '" + options_.name + "' has no plane '" + job.plane + "'";
      return std::nullopt;
    }
    js.topology.plane = *plane;
    for (auto [level, out] : {std::pair{&job.required_level, &js.topology.required_level},
                              std::pair{&job.preferred_level, &js.topology.preferred_level}}) {
      if (level->empty()) continue;
      const auto l = state_.topology().FindLevel(*plane, *level);
      if (!l) {
        *why = "cluster '" + options_.name + "' has no level '" + *level + "' in plane '" + job.plane + "'";
        return std::nullopt;
      }
      *out = *l;
    }
  }
  const JobId id = state_.AddJob(js);
  for (int32_t i = 0; i < job.max_replicas; ++i) state_.AddTask(id, job.name + "-" + std::to_string(i), req, job.priority);
  Learn(req);
  being_evicted_.resize(state_.tasks().size(), 0);
  restoring_.resize(state_.tasks().size(), 0);
  pinned_.resize(state_.tasks().size(), 0);
  for (size_t r = 0; r < job.locked.size() && r < state_.job(id).tasks.size(); ++r) {
    pinned_[state_.job(id).tasks[r].value()] = job.locked[r] != 0;
  }
  local_of_job_.resize(state_.jobs().size(), SIZE_MAX);
  Local l;
  l.gpus = int64_t{job.max_replicas} * job.per_replica.gpu_count;
  l.fed = job.id;
  l.id = id;
  l.priority = job.priority;
  l.acknowledge_standby = job.acknowledge_standby;
  l.min_replicas = job.min_replicas;
  l.max_replicas = job.max_replicas;
  l.required_level = state_.job(id).spec.topology.required_level;
  l.preferred_level = state_.job(id).spec.topology.preferred_level;
  l.required_max_wait_s = l.required_level >= 0 ? job.required_max_wait_s : 0;
  l.shape = ShapeOf(id);
  const size_t li = locals_.size();
  locals_.push_back(l);
  by_fed_.emplace(job.id, li);
  local_of_job_[id.value()] = li;
  return li;
}

size_t Engine::ShapeKeyHash::operator()(const ShapeKey& k) const {
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  for (int64_t v : k.f) {
    h ^= static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
  }
  return static_cast<size_t>(h ^ (h >> 33));
}

int Engine::ShapeOf(JobId id) {
  // The shape: everything that decides whether the job can start now. Its class: the same but
  // the queue (whether capacity holds the request) and the walltime (backfill lets in whole
  // shapes by it).
  const Job& j = state_.job(id);
  const TaskRequest& req = state_.task(j.tasks.front()).req;
  const JobSpec& js = j.spec;
  ShapeKey key;
  key.f = {req.cpu_milli,
           req.mem_mib,
           req.gpu_count,
           req.gpu_milli,
           static_cast<int64_t>(req.models.bits()),
           js.min_replicas,
           js.max_replicas,
           js.step,
           js.topology.plane.valid() ? int64_t{js.topology.plane.value()} : -1,
           js.topology.required_level,
           js.topology.preferred_level,
           js.priority,
           js.preemptible ? 1 : 0,
           0,
           0};
  ShapeKey cls = key;
  key.f[ShapeKey::kWalltime] = js.walltime_s > 0 ? js.walltime_s : 0;
  key.f[ShapeKey::kQueue] = js.queue;
  const auto [it, added] = shapes_.emplace(key, static_cast<int>(shapes_.size()));
  if (added) {
    const auto [c, new_class] = classes_.emplace(cls, static_cast<int>(classes_.size()));
    shape_info_.emplace_back();
    shape_info_.back().blocks = js.priority >= kHpPriority || js.min_replicas > 1;
    shape_info_.back().hp = js.priority >= options_.preemptor_min_priority;
    shape_info_.back().priority = js.priority;
    shape_info_.back().gpus = int64_t{js.max_replicas} * req.gpu_count;
    shape_info_.back().cls = c->second;
    shape_info_.back().models = req.NeedsGpu() ? req.models : GpuModelSet();
    const int64_t step = options_.allocate.align ? std::max<int32_t>(1, js.step) : 1;
    ShapeInfo& info = shape_info_.back();
    info.min_gpu = (int64_t{js.min_replicas} + step - 1) / step * step * req.TotalGpuMilli();
    ShapeNeed& need = info.need;
    need.shape = it->second;
    need.step = static_cast<int32_t>(step);
    need.min_replicas = js.min_replicas;
    need.min_start = static_cast<int32_t>((int64_t{js.min_replicas} + step - 1) / step * step);
    need.one_cpu = req.cpu_milli;
    need.one_mem = req.mem_mib;
    if (req.NeedsGpu()) {
      need.one_gpu = req.TotalGpuMilli();
      if (std::popcount(req.models.bits()) == 1) need.one_model = std::countr_zero(req.models.bits());
    }
    shape_info_.back().queue = js.queue;
    queue_.SetClass(it->second, c->second);
    if (js.priority >= options_.preemptor_min_priority) hp_shapes_.push_back(it->second);
    if (shape_info_.back().blocks) {
      // Highest priority first; among equals, in order of creation (Absorb).
      const int sh = it->second;
      const auto at = std::upper_bound(blocking_shapes_.begin(), blocking_shapes_.end(), sh, [&](int a, int b) {
        return shape_info_[static_cast<size_t>(a)].priority > shape_info_[static_cast<size_t>(b)].priority;
      });
      blocking_shapes_.insert(at, sh);
    }
    if (js.queue >= 0) {
      const size_t q = static_cast<size_t>(js.queue);
      if (shapes_of_queue_.size() <= q) {
        shapes_of_queue_.resize(q + 1);
        queue_min_gpu_.resize(q + 1, INT64_MAX);
      }
      shapes_of_queue_[q].push_back(shape_info_.back().need);
      queue_min_gpu_[q] = std::min(queue_min_gpu_[q], shape_info_.back().min_gpu);
      Unlist(q);  // listed at the next pass
    } else {
      unqueued_shapes_.push_back(it->second);
      queue_.SetListed(it->second, true, kFirstPass);
    }
  }
  return it->second;
}

void Engine::Log(EngineEvent::Kind kind, int64_t t, size_t li, int32_t replicas, uint32_t for_job, int64_t at,
                 std::string detail, bool never, bool requeued) {
  EngineEvent e;
  e.kind = kind;
  e.t = t;
  e.job = locals_[li].fed;
  e.replicas = replicas;
  e.for_job = for_job;
  e.at = at;
  e.detail = std::move(detail);
  e.never = never;
  e.requeued = requeued;
  events_.push_back(std::move(e));
  if (observer_) observer_(events_.back());
}

const char* EngineEventKindName(EngineEvent::Kind kind) {
  switch (kind) {
    case EngineEvent::Kind::kStarted: return "started";
    case EngineEvent::Kind::kGrown: return "grown";
    case EngineEvent::Kind::kShrunk: return "shrunk";
    case EngineEvent::Kind::kReturned: return "returned";
    case EngineEvent::Kind::kReclaim: return "reclaim";
    case EngineEvent::Kind::kStandby: return "standby";
    case EngineEvent::Kind::kRestored: return "restored";
    case EngineEvent::Kind::kMoveStarted: return "move-started";
    case EngineEvent::Kind::kMoved: return "moved";
    case EngineEvent::Kind::kMoveAborted: return "move-aborted";
    case EngineEvent::Kind::kMoveCancelled: return "move-cancelled";
    case EngineEvent::Kind::kStandbyRefused: return "standby-refused";
    case EngineEvent::Kind::kTimedOut: return "timed-out";
  }
  return "?";
}

std::string Engine::Where(TaskId task) const {
  const Task& tk = state_.task(task);
  std::string out = tk.name + "@" + state_.node(tk.node).spec.name + ":";
  for (size_t g = 0; g < tk.gpus.size; ++g) out += (g ? "," : "") + std::to_string(tk.gpus.idx[g]);
  return out;
}

std::optional<uint32_t> Engine::DriverIdOf(JobId job) const {
  if (job.value() >= local_of_job_.size() || local_of_job_[job.value()] == SIZE_MAX) return std::nullopt;
  const size_t li = local_of_job_[job.value()];
  if (std::any_of(headrooms_.begin(), headrooms_.end(), [&](const Headroom& h) { return h.li == li; })) return std::nullopt;
  return locals_[li].fed;
}

void Engine::Enqueue(size_t li, bool front, int64_t now_s) {
  Local& l = locals_[li];
  l.relax_at = l.trigger_at = -1;
  LogCarry(li);
  if (l.required_max_wait_s > 0) {
    // Queued again: its own level again, relaxed after the wait from now.
    if (state_.job(l.id).spec.topology.required_level != l.required_level) SetRequiredLevel(li, l.required_level);
    ArmRelax(li, now_s + l.required_max_wait_s, now_s);
  }
  queue_.Push(li, l.priority, l.shape, front);
  CountDemand(li, true);
  l.queued_at = now_s;
  const EngineDefrag& d = options_.defrag;
  if (d.enabled && d.trigger_after_s > 0 && l.gpus >= d.trigger_min_gpus) ArmTrigger(li, now_s + d.trigger_after_s, now_s);
}

void Engine::ArmRelax(size_t li, int64_t at, int64_t queued_at) {
  locals_[li].relax_at = at;
  LogCarry(li);
  if (at < 0) return;
  relax_.push_back({at, li, queued_at});
  std::push_heap(relax_.begin(), relax_.end(), std::greater<Trigger>());
}

void Engine::ArmTrigger(size_t li, int64_t at, int64_t queued_at) {
  locals_[li].trigger_at = at;
  LogCarry(li);
  if (at < 0) return;
  triggers_.push_back({at, li, queued_at});
  std::push_heap(triggers_.begin(), triggers_.end(), std::greater<Trigger>());
}

void Engine::SetRequiredLevel(size_t li, int32_t level) {
  Local& l = locals_[li];
  TopologyConstraint tc = state_.job(l.id).spec.topology;
  tc.required_level = level;
  tc.preferred_level = level == l.required_level ? l.preferred_level : l.required_level;
  state_.SetJobTopology(l.id, tc);
  l.shape = ShapeOf(l.id);
  if (queue_.Contains(li)) queue_.Reshape(li, l.shape);
  l.refused_seq = UINT64_MAX;
  LogCarry(li);
}

void Engine::RelaxWaits(int64_t now_s) {
  while (!relax_.empty() && relax_.front().at <= now_s) {
    std::pop_heap(relax_.begin(), relax_.end(), std::greater<Trigger>());
    const Trigger tr = relax_.back();
    relax_.pop_back();
    const Local& l = locals_[tr.li];
    if (l.running || !queue_.Contains(tr.li) || l.queued_at != tr.queued_at) continue;  // void
    const int32_t level = state_.job(l.id).spec.topology.required_level;
    // A Reclaim under way evicts for its present level (or it holds tasks): it looks again after
    // another wait.
    if (level >= 0 && !l.reclaiming && state_.job(l.id).bound_tasks == 0) SetRequiredLevel(tr.li, level - 1);
    ArmRelax(tr.li, level >= 0 && (level - 1 >= 0 || l.reclaiming) ? tr.at + l.required_max_wait_s : -1, tr.queued_at);
  }
}

void Engine::OnStart(size_t li, int64_t now_s, int32_t granted) {
  Local& l = locals_[li];
  Unclaim(li);
  ClaimWithin(li, 0);
  LogCarry(li);
  l.running = true;
  l.refused_seq = UINT64_MAX;
  state_.SetJobStart(l.id, now_s);
  if (!state_.job(l.id).resume_nodes.empty()) state_.SetResumeNodes(l.id, {});
  WatchWalltime(li, true);
  if (state_.job(l.id).spec.walltime_s > 0) ++walltime_starts_;
  if (l.min_replicas < l.max_replicas) {
    SetElastic(li, true);
    ++elastic_starts_;
  }
  const bool lent = state_.task(state_.job(l.id).tasks.front()).borrowed;
  Log(EngineEvent::Kind::kStarted, now_s, li, granted, UINT32_MAX, 0, lent ? "lent" : "");
}

Admission Engine::Submit(const EngineJob& job, SubmitMode mode, int64_t now_s) {
  Record(now_s, SubmitInput{job, mode});
  Admission r;
  std::string why;
  const std::optional<size_t> li = Materialize(job, &why);
  if (!li) {
    r.reason = why;
    r.never = true;
    return r;
  }
  Local& l = locals_[*li];
  if (l.running || l.reclaiming || queue_.Contains(*li)) {
    r.reason = "job '" + job.name + "' is already on cluster '" + options_.name + "'";
    return r;
  }
  if (l.submitted < 0) {
    l.submitted = now_s;
    LogCarry(*li);
  }
  if (mode == SubmitMode::kEnqueue) {
    Enqueue(*li, false, now_s);
    r.accepted = true;
    return r;
  }
  // With queues, at once only within the queue's limits (fair shares are the cycle's order).
  JobAttempt a;
  const JobSpec& spec = state_.job(l.id).spec;
  const int32_t step = options_.allocate.align ? std::max<int32_t>(1, spec.step) : 1;
  const int32_t cap = book_.enabled() ? QueueRoom(*li, QueueBook::Bound::kLimit) / step * step : INT32_MAX;
  if (cap >= (spec.min_replicas + step - 1) / step * step) {
    a = TryStartUpTo(*li, cap, now_s);
  } else {
    (void)book_.Within(state_, l.id, spec.min_replicas, QueueBook::Bound::kLimit, &a.reason);
  }
  if (a.started) {
    OnStart(*li, now_s, a.granted);
    r.accepted = r.started = true;
    r.granted = a.granted;
  } else if (a.kind == OutcomeKind::kInfeasible) {
    r.reason = a.reason;
    r.never = true;
  } else if (mode == SubmitMode::kQueue) {
    Enqueue(*li, false, now_s);
    r.accepted = true;
    // A job that reclaims by priority (HP by default) queued here reclaims in this cycle, as
    // ReclaimQueued would (only when the cycle has the reclaim action). A refusal is not
    // memoised: the memo is ReclaimQueued's, kept for jobs holding a reservation of their own
    // under the pass's key, and a job being submitted holds none.
    if (Reclaims() && l.priority >= options_.preemptor_min_priority) (void)StartReclaim(*li, now_s, &why);
    r.reclaiming = l.reclaiming;
  } else if (mode == SubmitMode::kStartNow) {
    r.reason = a.reason;
  } else if (!Reclaims()) {
    r.reason = a.reason.empty() ? "Reclaim is off (the cycle has no reclaim action)" : a.reason;
  } else if (StartReclaim(*li, now_s, &why)) {
    r.accepted = r.reclaiming = true;
  } else {
    r.reason = why;
  }
  return r;
}

void Engine::SetStandbyGrace(int64_t grace_s) {
  Record(now_, SettingInput{SettingInput::Key::kStandbyGrace, grace_s});
  options_.standby_grace_s = grace_s;
}

void Engine::SetGrace(int64_t grace_s) {
  Record(now_, SettingInput{SettingInput::Key::kGrace, grace_s});
  options_.grace_s = grace_s;
  options_.allocate.grace_s = grace_s;
  auto exit = ExitModel(options_);
  exit_ = exit.ok() ? *exit : GracefulExit::Fixed(grace_s);
}

Status Engine::SetQueues(std::vector<QueueSpec> queues, SharingSpec sharing, int* line) {
  auto book = QueueBook::Create(queues, sharing, state_, options_.intern_queue_models, line);
  if (!book.ok()) return book.status();
  const QueueTree& from = book_.tree();
  const QueueTree& to = book->tree();
  // Old queue -> new queue by name; -1 where it is gone or no longer a leaf (no live job there).
  std::vector<int32_t> remap(from.size(), -1);
  for (size_t q = 0; q < from.size(); ++q) {
    const std::optional<size_t> n = to.Find(from.spec(q).name);
    if (n && to.leaf(*n) == from.leaf(q)) remap[q] = static_cast<int32_t>(*n);
  }
  for (size_t li = 0; li < locals_.size(); ++li) {
    const Local& l = locals_[li];
    const int32_t q = state_.job(l.id).spec.queue;
    const bool live = l.running || l.reclaiming || queue_.Contains(li) || state_.job(l.id).bound_tasks > 0;
    if (q < 0 || !live || remap[static_cast<size_t>(q)] >= 0) continue;
    if (line != nullptr) *line = 0;
    return InvalidArgument("queue '" + from.spec(static_cast<size_t>(q)).name + "': field 'name': job '" +
                           state_.job(l.id).spec.name + "' still runs or waits in it, so it must stay a leaf");
  }
  Record(now_, QueuesInput{queues, sharing});
  options_.queues = std::move(queues);
  options_.sharing = sharing;
  state_.ReplaceQueues(book->Parents(), remap);
  book->Succeed(book_);
  book_ = std::move(*book);
  book_.WatchEvictions(&being_evicted_);
  // The shapes follow their jobs' queues (a shape's key names its queue's index); one whose queue
  // is gone has no job left and none joins it.
  std::vector<std::pair<int, ShapeKey>> by_id;
  by_id.reserve(shapes_.size());
  for (const auto& [key, sh] : shapes_) by_id.emplace_back(sh, key);
  std::sort(by_id.begin(), by_id.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  decltype(shapes_) shapes;
  shapes_of_queue_.assign(book_.tree().size(), {});
  queue_min_gpu_.assign(book_.tree().size(), INT64_MAX);
  unqueued_shapes_.clear();
  for (auto& [sh, key] : by_id) {
    ShapeInfo& i = shape_info_[static_cast<size_t>(sh)];
    if (i.queue >= 0) i.queue = remap[static_cast<size_t>(i.queue)] >= 0 ? remap[static_cast<size_t>(i.queue)] : -2;
    // A gone queue's shape keeps a key of its own that no job's names.
    key.f[ShapeKey::kQueue] = i.queue == -2 ? INT64_MIN + sh : i.queue;
    shapes.emplace(key, sh);
    if (i.queue >= 0) {
      shapes_of_queue_[static_cast<size_t>(i.queue)].push_back(i.need);
      queue_min_gpu_[static_cast<size_t>(i.queue)] = std::min(queue_min_gpu_[static_cast<size_t>(i.queue)], i.min_gpu);
    } else if (i.queue == -1) {
      unqueued_shapes_.push_back(sh);
    }
    // Listed anew at the next pass.
    queue_.SetListed(sh, i.queue == -1, kFirstPass);
    queue_.SetListed(sh, false, kSecondPass);
  }
  leaf_lists_.clear();
  relist_.clear();
  kept_leaves_.clear();
  queue_figures_.clear();
  shapes_held_ = 0;
  shapes_ = std::move(shapes);
  for (Local& l : locals_) {
    if (!book_.enabled()) l.demand_counted = false;
    else if (l.demand_counted) book_.Pending(state_, l.id, 1);
    l.elastic_counted = 0;  // the new book counts no room to grow yet
  }
  FileGrowable();
  for (size_t li : elastic_running_) SyncElastic(li);
  return Status::Ok();
}

bool Engine::OpenHeadroom(size_t li) {
  const Local& l = locals_[li];
  if (l.priority < kHpPriority) return false;
  const int64_t gpus = int64_t{l.min_replicas} * state_.task(state_.job(l.id).tasks.front()).req.gpu_count;
  bool opened = false;
  for (const Headroom& h : headrooms_) {
    const Job& job = state_.job(locals_[h.li].id);
    if (gpus < h.min_job_gpus || !job.reservation.valid()) continue;
    Release(job.reservation);
    opened = true;
  }
  return opened;
}

void Engine::Release(ReservationId r) {
  const std::vector<NodeId>& nodes = state_.reservation(r).nodes;
  released_.insert(released_.end(), nodes.begin(), nodes.end());
  state_.ReleaseReservation(r);
}

bool Engine::HoldMayStart(ReservationId r) const {
  const Reservation& res = state_.reservation(r);
  const Job& job = state_.job(res.owner);
  if (job.tasks.empty() || MayBorrowLent(job.spec)) return true;  // (lent GPUs are not counted here)
  const TaskRequest& req = state_.task(job.tasks.front()).req;
  if (!req.NeedsGpu()) return true;
  const int64_t need = MinGpuNeed(job);
  int64_t free = state_.unheld_free_gpu_milli(req.models);
  for (NodeId n : res.nodes) {
    const Node& node = state_.node(n);
    if (node.Schedulable() && req.models.Admits(node.spec.model)) free += node.gpu_free_total;
  }
  return free >= need;
}

bool Engine::FreedSinceAllocate() {
  const bool freed = std::any_of(released_.begin(), released_.end(), [&](NodeId n) {
    const Node& node = state_.node(n);
    // (Lent GPUs no borrower uses count: spot work may take them.)
    if (!node.Schedulable() || (node.gpu_free_total == 0 && node.cpu_free == 0 && node.lent_free == 0)) return false;
    if (!node.reservation.valid()) return true;
    // Held again since, by a job that waits (a Reclaim's plan took the node with its room): that
    // job may start on it, which the pass before did not see — if the GPUs free on its hold and
    // on no hold's nodes add up to its min replicas' (a plan for a later start usually does not).
    const JobId owner = state_.reservation(node.reservation).owner;
    // (Queued: not a headroom's job, whose hold TryStart lifts and puts back around each attempt.)
    return owner.value() < local_of_job_.size() && queue_.Contains(local_of_job_[owner.value()]) &&
           HoldMayStart(node.reservation);
  });
  released_.clear();
  return freed;
}

std::vector<NodeId> Engine::Unheld(const std::vector<NodeId>& nodes) const {
  std::vector<NodeId> out;
  for (NodeId n : nodes) {
    if (!state_.node(n).reservation.valid() && std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  }
  return out;
}

void Engine::CloseHeadroom(int64_t now_s) {
  for (Headroom& h : headrooms_) {
    const JobId id = locals_[h.li].id;
    if (state_.job(id).reservation.valid()) continue;
    const size_t before = h.nodes.size();
    std::erase_if(h.nodes, [&](NodeId n) {
      const Node& node = state_.node(n);
      if (node.reservation.valid() || !node.Schedulable()) return true;
      return std::any_of(node.tasks.begin(), node.tasks.end(),
                         [&](TaskId t) { return state_.job(state_.task(t).job).spec.priority >= kHpPriority; });
    });
    if (h.nodes.size() < before) h.retry_at = now_s + 1;  // HP work took some: restore it next
    if (!h.nodes.empty()) state_.AddReservation(id, h.nodes);
  }
}

void Engine::RestoreHeadroom(int64_t now_s) {
  CloseHeadroom(now_s);
  for (Headroom& h : headrooms_) {
    if (now_s < h.retry_at) continue;
    h.retry_at = 0;
    const Local& l = locals_[h.li];
    const Job& job = state_.job(l.id);
    // Its held nodes (none runs HP work: CloseHeadroom) hold the shape once drained; else plan
    // the shape anew, with the held nodes counting as free.
    const int32_t k = std::max<int32_t>(1, state_.task(job.tasks.front()).req.gpu_count);
    int64_t replicas = 0;
    for (NodeId n : h.nodes) replicas += state_.node(n).spec.gpu_count / k;
    if (replicas < l.min_replicas) {
      const PreemptionPlan plan = PlanReclaim(l.id, now_s, {});
      if (!plan.feasible) {
        h.retry_at = now_s + options_.headroom_retry_s;
        continue;
      }
      if (job.reservation.valid()) Release(job.reservation);
      h.nodes = Unheld(plan.nodes);
      if (!h.nodes.empty()) state_.AddReservation(l.id, h.nodes);
    }
    // Drain the held nodes: an elastic job sheds its replicas there when it keeps a whole number
    // of steps, at least min (no work lost); a preemptible job is evicted whole once it has lost
    // at most headroom_max_loss_s since its last checkpoint; other work ends on its own.
    std::map<uint32_t, std::vector<TaskId>> on_held;
    for (NodeId n : h.nodes) {
      for (TaskId t : state_.node(n).tasks) {
        if (state_.task(t).state == TaskState::kBound && !being_evicted_[t.value()]) on_held[state_.task(t).job.value()].push_back(t);
      }
    }
    PreemptionPlan drain;
    bool waiting = false;
    for (const auto& [jv, tasks] : on_held) {
      const Job& v = state_.job(JobId(jv));
      if (!v.spec.preemptible || v.spec.priority >= kHpPriority || local_of_job_[jv] == SIZE_MAX) {
        waiting = true;
        continue;
      }
      // Shrinking: its replicas on held nodes go, and as many of its newest others as keep a
      // whole number of steps.
      const int32_t step = options_.allocate.align ? std::max<int32_t>(1, v.spec.step) : 1;
      const int32_t rest = v.bound_tasks - static_cast<int32_t>(tasks.size());
      const int32_t keep = rest / step * step;
      if (keep >= std::max<int32_t>(1, v.spec.min_replicas)) {
        drain.evict.insert(drain.evict.end(), tasks.begin(), tasks.end());
        int32_t extra = rest - keep;
        for (auto it = v.tasks.rbegin(); it != v.tasks.rend() && extra > 0; ++it) {
          if (state_.task(*it).state != TaskState::kBound || being_evicted_[it->value()] ||
              std::find(tasks.begin(), tasks.end(), *it) != tasks.end()) {
            continue;
          }
          drain.evict.push_back(*it);
          --extra;
        }
        drain.shrunk.emplace_back(JobId(jv), keep);
        continue;
      }
      if (SecondsSinceCheckpoint(v, now_s) > options_.headroom_max_loss_s) {
        waiting = true;
        continue;
      }
      for (TaskId t : v.tasks) {
        if (state_.task(t).state == TaskState::kBound && !being_evicted_[t.value()]) drain.evict.push_back(t);
      }
      drain.evicted_jobs.push_back(JobId(jv));
    }
    if (!drain.evict.empty()) ScheduleEviction(h.li, drain, now_s);
    if (waiting) h.retry_at = now_s + options_.headroom_retry_s;
  }
}

int64_t Engine::ScheduleEviction(size_t li, const PreemptionPlan& plan, int64_t now_s) {
  // The victims' GPUs are freed, and the job starts, once the last victim job has exited.
  int64_t wait_s = 0;
  for (TaskId t : plan.evict) {
    const size_t vi = local_of_job_[state_.task(t).job.value()];
    wait_s = std::max(wait_s, exit_.After(vi != SIZE_MAX ? locals_[vi].fed : state_.task(t).job.value(), now_s));
  }
  Eviction ev;
  ev.at = now_s + wait_s;
  ev.for_local = li;
  ev.tasks = plan.evict;
  ev.whole = plan.evicted_jobs;
  book_.EvictionsChanged();
  for (TaskId t : ev.tasks) {
    being_evicted_[t.value()] = 1;
    book_.Leaving(state_, t, 1);
    const size_t vi = local_of_job_[state_.task(t).job.value()];
    if (vi != SIZE_MAX) notices_.push_back({locals_[vi].fed, t, ev.at});
  }
  evictions_.push_back(std::move(ev));
  LogCarry(li);
  return evictions_.back().at;
}

bool Engine::MayPreemptWithinQueue(size_t li, int64_t now_s) const {
  const Local& l = locals_[li];
  // Only where priority orders the queue: the job then comes before its victims, which go back
  // to the queue (in FIFO order they would come first and take its room back: flapping). Not
  // for a job kept from borrowing (a queue's Reclaim evicted it): it does not evict others for
  // the demand its queue was just reclaimed from.
  return book_.enabled() && book_.sharing().within_queue && options_.priority_queue &&
         l.priority >= options_.preemptor_min_priority && state_.job(l.id).spec.queue >= 0 && now_s >= l.no_borrow_until;
}

std::vector<JobId> Engine::QuotaCandidates(size_t li) const {
  const Job& job = state_.job(locals_[li].id);
  std::vector<JobId> candidates;
  for (JobId j : state_.queue_preemptible_jobs(static_cast<size_t>(job.spec.queue))) {
    const Job& v = state_.job(j);
    if (v.spec.priority >= job.spec.priority) continue;
    const bool leaving = std::any_of(v.tasks.begin(), v.tasks.end(), [&](TaskId t) {
      return t.value() < being_evicted_.size() && being_evicted_[t.value()] != 0;
    });
    if (!leaving) candidates.push_back(j);
  }
  std::sort(candidates.begin(), candidates.end(), [&](JobId a, JobId b) {
    const Job& x = state_.job(a);
    const Job& y = state_.job(b);
    if (x.spec.priority != y.spec.priority) return x.spec.priority < y.spec.priority;
    if (x.started_at_s != y.started_at_s) return x.started_at_s > y.started_at_s;
    return a.value() < b.value();
  });
  return candidates;
}

bool Engine::QuotaVictims(size_t li, int64_t now_s, const std::vector<JobId>& candidates, std::vector<JobId>* victims,
                          std::string* why) const {
  const Local& l = locals_[li];
  const size_t leaf = static_cast<size_t>(state_.job(l.id).spec.queue);
  const auto [leaf_bound, bound] = StartBounds(li, now_s);
  // Signed: a queue above its bound (its limit lowered, say) needs its excess gone first.
  QueueUsage room = book_.RoomByDim(state_, leaf, leaf_bound, bound, INT64_MIN);
  LessWithinClaimed(leaf, li, room, INT64_MIN);
  const ShapeNeed& need = shape_info_[static_cast<size_t>(l.shape)].need;
  // What a victim leaving gives back (sign 1) or keeps (-1), where a bound applies: every queue
  // of the path counts it, so each bound's room grows by what it holds.
  const auto add = [&](const QueueUsage& held, int64_t sign) {
    for (size_t d = 0; d < kQueueDims; ++d) {
      if (room[d] != INT64_MAX) room[d] += sign * held[d];
    }
  };
  for (JobId j : *victims) add(state_.JobHeld(j), 1);
  std::vector<std::pair<JobId, QueueUsage>> taken;
  for (JobId j : candidates) {
    if (need.Fits(room)) break;
    if (std::find(victims->begin(), victims->end(), j) != victims->end()) continue;
    taken.emplace_back(j, state_.JobHeld(j));
    add(taken.back().second, 1);
  }
  if (!need.Fits(room)) {
    *why = "its queue '" + book_.tree().spec(leaf).name + "' has no room for its min replicas, and its " +
           std::to_string(candidates.size()) + " running preemptible jobs of a lower priority would not make it";
    return false;
  }
  for (size_t i = taken.size(); i-- > 0;) {
    add(taken[i].second, -1);
    if (need.Fits(room)) continue;  // not needed: given back
    add(taken[i].second, 1);
    victims->push_back(taken[i].first);
  }
  std::sort(victims->begin(), victims->end(), [](JobId a, JobId b) { return a.value() < b.value(); });
  return true;
}

bool Engine::StartReclaim(size_t li, int64_t now_s, std::string* why) {
  Local& l = locals_[li];
  refused_idle_ = false;
  // With queues: who may be taken (QueueBook::Victims), and whether the job's queue is owed it.
  bool owed = false;
  VictimFilter filter;
  if (book_.enabled()) {
    RefreshShares(now_s);
    // No room in its queue: what lower-priority work of its own queue holds, when it may take
    // that (within-queue preemption). A refusal then holds only while the state is unchanged
    // (refused_idle_): a start in its queue adds victims without a release.
    if (MayPreemptWithinQueue(li, now_s) && StartRoom(li, now_s) == 0) {
      const std::vector<JobId> candidates = QuotaCandidates(li);
      if (candidates.empty()) {
        *why = "its queue '" + book_.tree().spec(static_cast<size_t>(state_.job(l.id).spec.queue)).name +
               "' has no room for its min replicas, and none of its running preemptible jobs has a lower priority";
        refused_idle_ = true;
        return false;
      }
      VictimFilter own;
      auto ids = std::make_shared<std::vector<uint32_t>>();
      for (JobId j : candidates) ids->push_back(j.value());
      std::sort(ids->begin(), ids->end());
      own.allowed = [ids](const Job& v) { return std::binary_search(ids->begin(), ids->end(), v.id.value()); };
      own.queues = std::make_shared<const std::vector<int32_t>>(1, state_.job(l.id).spec.queue);
      return ReclaimWith(li, now_s, own, false, "within its queue", why, &candidates);
    }
    const JobSpec& spec = state_.job(l.id).spec;
    const int32_t step = options_.allocate.align ? std::max<int32_t>(1, spec.step) : 1;
    const int32_t need = (spec.min_replicas + step - 1) / step * step;
    int64_t supply = INT64_MAX;
    (void)book_.Victims(state_, l.id, need, now_s, &owed, &supply, false);
    if (Hopeless(li, supply, why)) return false;
    // Within its limits only.
    if (QueueRoom(li, QueueBook::Bound::kLimit) < spec.min_replicas) {
      (void)book_.Within(state_, l.id, spec.min_replicas, QueueBook::Bound::kLimit, why);
      return false;
    }
    // The victims themselves only now (the same figures, from the book's cache).
    if (l.priority >= options_.preemptor_min_priority || owed) filter = book_.Victims(state_, l.id, need, now_s, &owed, &supply);
  }
  if (l.priority < options_.preemptor_min_priority && !owed) {
    const std::string who = options_.preemptor_min_priority == kHpPriority
                                ? "HP jobs"
                                : "jobs of priority " + std::to_string(options_.preemptor_min_priority) + " or more";
    *why = book_.enabled() ? "only " + who + ", and jobs their queue is owed capacity for, reclaim" : "only " + who + " reclaim";
    return false;
  }
  return ReclaimWith(li, now_s, filter, owed, owed ? "queue" : "", why);
}

int64_t Engine::MinGpuNeed(const Job& job) const {
  const int32_t step = options_.allocate.align ? std::max<int32_t>(1, job.spec.step) : 1;
  const int64_t replicas = (std::max<int32_t>(1, job.spec.min_replicas) + step - 1) / step * step;
  return replicas * state_.task(job.tasks.front()).req.TotalGpuMilli();
}

bool Engine::Hopeless(size_t li, int64_t supply, std::string* why) const {
  if (supply == INT64_MAX) return false;
  const Job& job = state_.job(locals_[li].id);
  const TaskRequest& req = state_.task(job.tasks.front()).req;
  if (!req.NeedsGpu()) return false;
  const int64_t need = MinGpuNeed(job);
  // Without a reservation of its own, only nodes no reservation holds can take it (PreemptAction).
  const bool holder = job.reservation.valid();
  const int64_t free = holder ? state_.free_gpu_milli(req.models) : state_.unheld_free_gpu_milli(req.models);
  if (need <= free + supply) return false;
  if (why != nullptr) {
    *why = "needs " + std::to_string(need) + " milli-GPU; its models' nodes have " + std::to_string(free) + " free" +
         (holder ? "" : " that no reservation holds") + " and the queues it may take back from hold at most " +
           std::to_string(supply) + " there";
  }
  return true;
}

PreemptionPlan Engine::PlanReclaim(JobId id, int64_t now_s, VictimFilter filter) const {
  if (options_.allocate.victims == VictimSelection::kVolcano) {
    // Volcano tries nodes in the order of its policy's score for the preemptor's pending task.
    const Job& job = state_.job(id);
    const auto pending = std::find_if(job.tasks.begin(), job.tasks.end(),
                                      [&](TaskId t) { return state_.task(t).state == TaskState::kPending; });
    if (pending != job.tasks.end()) {
      const Task& task = state_.task(*pending);
      filter.node_score = [this, &task](const Node& n) { return session_->Score(task, n); };
    }
  }
  return PreemptAction::Plan(state_, id, now_s, options_.allocate, being_evicted_, filter);
}

bool Engine::ReclaimWith(size_t li, int64_t now_s, const VictimFilter& filter, bool owed, const char* detail,
                         std::string* why, const std::vector<JobId>* quota) {
  Local& l = locals_[li];
  ++plans_;
  // The headroom is open to the job while it reclaims: its nodes count as free for the plan, and
  // those the plan chooses are held for the job (CloseHeadroom leaves them out).
  const bool opened = OpenHeadroom(li);
  PreemptionPlan plan = PlanReclaim(l.id, now_s, filter);
  std::string short_why;  // within its queue: why its victims would not make its queue's room
  if (quota != nullptr && plan.feasible) {
    // The jobs the placement takes leave whole, and with them as many more of `quota` as its
    // queue's room needs (QuotaVictims).
    std::vector<JobId> victims = plan.evicted_jobs;
    for (const auto& [j, keep] : plan.shrunk) victims.push_back(j);
    if (QuotaVictims(li, now_s, *quota, &victims, &short_why)) {
      plan.evicted_jobs = victims;
      plan.shrunk.clear();
      plan.evict.clear();
      for (JobId j : victims) {
        for (TaskId t : state_.job(j).tasks) {
          if (state_.task(t).state == TaskState::kBound) plan.evict.push_back(t);
        }
      }
      std::sort(plan.evict.begin(), plan.evict.end(), [](TaskId a, TaskId b) { return a.value() < b.value(); });
    }
  }
  const bool conflict =
      std::any_of(plan.evict.begin(), plan.evict.end(), [&](TaskId t) { return being_evicted_[t.value()] != 0; });
  // A within-queue refusal holds only while the state is unchanged (see StartReclaim).
  refused_idle_ = (plan.feasible && plan.evict.empty()) || quota != nullptr;
  if (!plan.feasible || !short_why.empty() || plan.evict.empty() || conflict) {
    *why = !plan.feasible       ? plan.reason
           : !short_why.empty() ? short_why
           : plan.evict.empty() ? "idle capacity could hold it, but placement did not"
                                : "its victims are already being evicted for another job";
    if (opened) CloseHeadroom(now_s);
    return false;
  }
  if (state_.job(l.id).reservation.valid()) Release(state_.job(l.id).reservation);
  const std::vector<NodeId> hold = Unheld(plan.nodes);
  if (!hold.empty()) {
    state_.AddReservation(l.id, hold);
    if (std::find(holders_.begin(), holders_.end(), li) == holders_.end()) holders_.push_back(li);
  }
  if (opened) CloseHeadroom(now_s);
  const int64_t at = ScheduleEviction(li, plan, now_s);
  evictions_.back().queue = owed;
  if (owed) {
    book_.Reclaimed(state_, l.id, now_s);
    // Its demand is being reclaimed for: later owed checks of its queue count it as held.
    const JobSpec& spec = state_.job(l.id).spec;
    const int32_t step = options_.allocate.align ? std::max<int32_t>(1, spec.step) : 1;
    Unclaim(li);
    l.claimed = (spec.min_replicas + step - 1) / step * step;
    book_.Claim(state_, l.id, l.claimed, 1);
  }
  // Within its queue: the room its victims leave is its own when it is tried there.
  if (quota != nullptr) ClaimWithin(li, shape_info_[static_cast<size_t>(l.shape)].need.min_start);
  l.reclaiming = true;
  ++reclaims_;
  if (!queue_.Contains(li)) Enqueue(li, true, now_s);
  Log(EngineEvent::Kind::kReclaim, now_s, li, static_cast<int32_t>(plan.evicted_jobs.size() + plan.shrunk.size()),
      UINT32_MAX, at, detail);
  if (reclaim_observer_) reclaim_observer_(l.fed, now_s);
  return true;
}

void Engine::EndEvictions(int64_t now_s) {
  std::vector<Eviction> due;
  std::erase_if(evictions_, [&](Eviction& ev) {
    if (ev.at > now_s) return false;
    due.push_back(std::move(ev));
    return true;
  });
  std::stable_sort(due.begin(), due.end(), [](const Eviction& a, const Eviction& b) { return a.at < b.at; });
  for (const Eviction& ev : due) {
    book_.EvictionsChanged();
    for (TaskId t : ev.tasks) {
      being_evicted_[t.value()] = 0;
      book_.Leaving(state_, t, -1);
    }
    Local& hp = locals_[ev.for_local];
    hp.reclaiming = false;
    Unclaim(ev.for_local);
    // Within its queue: its hold lasts through this second's cycles (its passes try it in the
    // room its victims leave before its queue's other jobs), no longer.
    if (hp.within_claim > 0) ClaimWithin(ev.for_local, hp.within_claim, now_s);
    LogCarry(ev.for_local);
    const auto hr = std::find_if(headrooms_.begin(), headrooms_.end(), [&](const Headroom& h) { return h.li == ev.for_local; });
    const bool headroom = hr != headrooms_.end();
    // It started meanwhile, or left: nothing to evict for it.
    if (!headroom && (hp.running || !queue_.Contains(ev.for_local))) {
      if (!hp.running && state_.job(hp.id).reservation.valid()) Release(state_.job(hp.id).reservation);
      continue;
    }
    std::set<uint32_t> shrunk;
    for (TaskId t : ev.tasks) {
      const Task& task = state_.task(t);
      if (task.state != TaskState::kBound) continue;  // ended during the grace period
      if (std::find(ev.whole.begin(), ev.whole.end(), task.job) == ev.whole.end()) shrunk.insert(task.job.value());
      Free(t, now_s);
    }
    const char* why = headroom ? "headroom" : ev.queue ? "queue reclaim" : "reclaim";
    const uint32_t for_job = headroom ? kHeadroomJob : hp.fed;
    std::vector<JobId> whole = ev.whole;
    for (uint32_t j : shrunk) {
      // The plan kept a whole number of steps at or above min, but the job may have lost other
      // replicas during the grace period (a node failure): it keeps the largest whole number of
      // steps of what is left, or is evicted whole when that is below min — never left running
      // with fewer.
      const Job& v = state_.job(JobId(j));
      const int32_t step = options_.allocate.align ? std::max<int32_t>(1, v.spec.step) : 1;
      const int32_t keep = v.bound_tasks / step * step;
      if (keep == 0 || keep < v.spec.min_replicas) {
        whole.push_back(JobId(j));
        continue;
      }
      const std::vector<TaskId> tasks = v.tasks;
      for (auto it = tasks.rbegin(); it != tasks.rend() && state_.job(JobId(j)).bound_tasks > keep; ++it) {
        if (state_.task(*it).state == TaskState::kBound) Free(*it, now_s);
      }
      Log(EngineEvent::Kind::kShrunk, now_s, local_of_job_[j], state_.job(JobId(j)).bound_tasks, for_job, 0, why);
      // What a queue took back is not absorbed again at once (no flapping).
      if (ev.queue) {
        locals_[local_of_job_[j]].no_grow_until = now_s + book_.sharing().cooldown_s;
        LogCarry(local_of_job_[j]);
        regrow_due_ = std::min(regrow_due_, now_s + book_.sharing().cooldown_s);
      }
    }
    for (JobId victim : whole) {
      const size_t vi = local_of_job_[victim.value()];
      if (!locals_[vi].running) continue;
      if (ev.queue) {
        locals_[vi].no_borrow_until = now_s + book_.sharing().reborrow_s;
        LogCarry(vi);
        no_borrow_.push_back(vi);
      }
      ReturnWhole(vi, now_s, for_job, why);
    }
  }
}

void Engine::TryQueue(int64_t now_s) {
  RelaxWaits(now_s);
  std::erase_if(holders_, [&](size_t li) { return !state_.job(locals_[li].id).reservation.valid(); });
  // A job that started on nodes of its own may leave some of them free, which the jobs tried
  // before it in the pass did not see: the pass runs again (each job holding nodes starts once).
  if (!book_.enabled()) {
    while (QueuePass(now_s, std::nullopt, nullptr)) {
    }
    return;
  }
  RefreshShares(now_s);
  const SharingSpec& sh = book_.sharing();
  using Bound = QueueBook::Bound;
  if (!sh.borrow) {
    while (QueuePass(now_s, Bound::kGuarantee, nullptr)) RefreshShares(now_s);
  } else if (!sh.weights) {
    while (QueuePass(now_s, Bound::kLimit, nullptr)) RefreshShares(now_s);
  } else {
    // Fair shares first; then what is left, to the shapes their fair share held back (the
    // others waited for capacity, which only shrinks within the cycle — unless a job holding
    // nodes of its own starts: the passes run again, so that what it leaves free goes to fair
    // shares first, to the jobs holding nodes that either pass tried before it, and to jobs kept
    // from borrowing, which only the first pass tries).
    while (FairSharePasses(now_s)) RefreshShares(now_s);
  }
}

bool Engine::FairSharePasses(int64_t now_s) {
  using Bound = QueueBook::Bound;
  PassMarks marks;
  marks.full.assign(classes_.size(), 0);
  const size_t n = book_.tree().size();
  // The queues of jobs kept from borrowing (they start within their guarantee in this pass).
  std::vector<char> keeps(n, 0);
  std::erase_if(no_borrow_, [&](size_t li) {
    if (now_s >= locals_[li].no_borrow_until) return true;
    const int32_t q = state_.job(locals_[li].id).spec.queue;
    if (q >= 0 && static_cast<size_t>(q) < n) keeps[static_cast<size_t>(q)] = 1;
    return false;
  });
  marks.any_held = ListShapes(keeps);
  const bool own_started_first = QueuePass(now_s, Bound::kFair, &marks);
  // What the first pass held back for its queue's room, the second tries too (its leaf is
  // looked at again by the next listing).
  for (int sh : marks.waited) {
    queue_.SetListed(sh, true, kSecondPass);
    const int32_t q = shape_info_[static_cast<size_t>(sh)].queue;
    // A leaf HoldBack kept its listing's record of is looked at again as it recorded (it is in
    // relist_); any other, listed anew.
    if (q < 0) continue;
    const size_t leaf = static_cast<size_t>(q);
    if (leaf >= leaf_lists_.size() || !leaf_lists_[leaf].valid || !leaf_lists_[leaf].touched) Unlist(leaf);
  }
  if (marks.any_held) QueuePass(now_s, Bound::kLimit, &marks);
  return own_started_first || marks.own_started_second;
}

bool Engine::ListShapes(const std::vector<char>& keeps) {
  const size_t n = std::min(book_.tree().size(), shapes_of_queue_.size());
  if (leaf_lists_.size() < n) leaf_lists_.resize(n);
  const QueueTree& tree = book_.tree();
  // The queues whose figures (what they hold, their fair shares) changed since the last listing:
  // a leaf none of whose path changed has the same rooms (its guarantees and limits change only
  // with SetQueues, which lists anew). Only those the book reports may have changed are compared.
  const size_t m = book_.managed_count(), queues = tree.size();
  QueueBook::Changes changes = book_.TakeChanges();
  if (queue_figures_.size() != QueueBook::kFigures * m * queues) {
    queue_figures_.assign(QueueBook::kFigures * m * queues, INT64_MIN);  // INT64_MIN: never seen (nothing holds it)
    changes.all = true;
  }
  if (changes.all) {
    changes.queues.resize(queues);
    std::iota(changes.queues.begin(), changes.queues.end(), size_t{0});
  }
  std::vector<int64_t> figures(QueueBook::kFigures * m);
  std::vector<char> changed(queues, 0);
  for (size_t q : changes.queues) {
    book_.ManagedFigures(state_, q, figures.data());
    int64_t* seen = &queue_figures_[q * QueueBook::kFigures * m];
    if (std::equal(figures.begin(), figures.end(), seen)) continue;
    std::copy(figures.begin(), figures.end(), seen);
    changed[q] = 1;
  }
  // The leaves to look at: below a changed queue, not listed since their shapes changed, or kept
  // from borrowing now or at the last listing.
  std::vector<size_t> look;
  std::vector<char> seen(n, 0);
  const auto add = [&](size_t q) {
    if (q < n && !seen[q]) {
      seen[q] = 1;
      look.push_back(q);
    }
  };
  std::vector<size_t> below;
  for (size_t q = 0; q < queues; ++q) {
    if (!changed[q]) continue;
    below.assign(1, q);
    while (!below.empty()) {
      const size_t at = below.back();
      below.pop_back();
      if (tree.leaf(at)) add(at);
      else below.insert(below.end(), tree.children(at).begin(), tree.children(at).end());
    }
  }
  for (size_t q : relist_) add(q);
  relist_.clear();
  for (size_t q : kept_leaves_) add(q);
  kept_leaves_.clear();
  for (size_t q = 0; q < n && !changes.all; ++q) {
    if (keeps[q]) add(q);
  }
  if (changes.all) {
    for (size_t q = 0; q < n; ++q) add(q);
  }
  std::sort(look.begin(), look.end());
  std::vector<int64_t> rooms(3 * m);
  for (size_t q : look) {
    if (!tree.leaf(q) || shapes_of_queue_[q].empty()) continue;
    const bool kept = keeps[q] != 0;
    if (kept) kept_leaves_.push_back(q);
    LeafList& list = leaf_lists_[q];
    if (list.valid && list.kept == kept && !list.touched) {
      bool path_changed = false;
      for (int p = static_cast<int>(q); p >= 0 && !path_changed; p = tree.parent(static_cast<size_t>(p))) {
        path_changed = changed[static_cast<size_t>(p)] != 0;
      }
      if (!path_changed) continue;
    }
    LeafRooms(q, kept, rooms.data());
    ClampRooms(q, rooms.data());
    list.touched = false;
    if (list.valid && list.kept == kept && list.rooms == rooms) continue;
    ListLeaf(q, kept, rooms);
  }
  return shapes_held_ > 0;
}

void Engine::Unlist(size_t q) {
  if (q < leaf_lists_.size()) leaf_lists_[q].valid = false;
  relist_.push_back(q);
}

void Engine::LeafRooms(size_t q, bool kept, int64_t* rooms, bool limits) const {
  using Bound = QueueBook::Bound;
  const size_t m = book_.managed_count();
  book_.RoomByManagedDim(state_, q, Bound::kFair, Bound::kFair, rooms);
  if (limits) book_.RoomByManagedDim(state_, q, Bound::kLimit, Bound::kLimit, rooms + m);
  if (kept) book_.RoomByManagedDim(state_, q, Bound::kGuarantee, Bound::kLimit, rooms + 2 * m);
  else std::fill(rooms + 2 * m, rooms + 3 * m, 0);
}

void Engine::ClampRooms(size_t q, int64_t* rooms) {
  const size_t m = book_.managed_count();
  LeafList& list = leaf_lists_[q];
  const std::vector<ShapeNeed>& needs = shapes_of_queue_[q];
  if (list.clamp_shapes != needs.size() || list.clamp.size() != m) {
    list.clamp.assign(m, 0);
    for (size_t i = 0; i < m; ++i) {
      const size_t d = book_.managed_dim(i);
      for (const ShapeNeed& need : needs) {
        const int64_t one = d == kQueueGpu     ? need.one_gpu
                            : d == kQueueCpu    ? need.one_cpu
                            : d == kQueueMemory ? need.one_mem
                            : need.one_model >= 0 && d == kQueueModel + static_cast<size_t>(need.one_model) ? need.one_gpu
                                                                                                          : 0;
        if (one > 0) list.clamp[i] = std::max(list.clamp[i], int64_t{need.min_start} * one);
      }
    }
    list.clamp_shapes = needs.size();
  }
  for (size_t b = 0; b < 3; ++b) {
    for (size_t i = 0; i < m; ++i) rooms[b * m + i] = std::min(rooms[b * m + i], list.clamp[i]);
  }
}

Engine::LeafRoom Engine::RoomOf(size_t q, bool kept, const int64_t* rooms) const {
  const size_t m = book_.managed_count();
  LeafRoom r;
  r.fair = book_.FromManaged(rooms);
  r.limit = book_.FromManaged(rooms + m);
  r.kept = book_.FromManaged(rooms + 2 * m);
  r.is_kept = kept;
  // No GPU room for the least of its shapes: all held back (a CPU-only shape needs none).
  const int64_t gpu = std::max(r.fair[kQueueGpu], kept ? r.kept[kQueueGpu] : 0);
  r.none = gpu < queue_min_gpu_[q] && queue_min_gpu_[q] > 0;
  r.none_within_limit = r.limit[kQueueGpu] < queue_min_gpu_[q] && queue_min_gpu_[q] > 0;
  return r;
}

void Engine::ListLeaf(size_t q, bool kept, const std::vector<int64_t>& rooms) {
  LeafList& list = leaf_lists_[q];
  const std::vector<ShapeNeed>& needs = shapes_of_queue_[q];
  // Listed as `list.listed` says (nothing listed or unlisted them since): only changes are passed on.
  const bool known = list.valid && list.listed.size() == needs.size();
  list.listed.resize(needs.size());
  shapes_held_ -= list.held;
  list.valid = true;
  list.kept = kept;
  list.rooms = rooms;
  list.held = 0;
  const LeafRoom room = RoomOf(q, kept, rooms.data());
  for (size_t i = 0; i < needs.size(); ++i) {
    const ShapeNeed& need = needs[i];
    const bool listed = room.Lists(need);
    // The second pass tries the shapes with room within the limits: without, every job of the
    // shape would wait for its queue's room there (room only shrinks in a cycle). A shape listed
    // for both is not tried twice: after the first pass it is held back (HoldBack, marked
    // waited), out of jobs, or of a class that found no capacity, which the second skips. So a
    // leaf's listing for the second pass does not follow its fair share, only its limits.
    const bool second = !room.none_within_limit && need.Fits(room.limit);
    const char bits = static_cast<char>((listed ? 1 << kFirstPass : 0) | (second ? 1 << kSecondPass : 0));
    if (!known || bits != list.listed[i]) {
      queue_.SetListed(need.shape, listed, kFirstPass);
      queue_.SetListed(need.shape, second, kSecondPass);
      list.listed[i] = bits;
    }
    list.held += listed ? 0 : 1;
  }
  shapes_held_ += list.held;
}

void Engine::HoldBack(size_t q, PassMarks& marks) {
  if (q >= shapes_of_queue_.size() || q >= leaf_lists_.size() || !leaf_lists_[q].valid) return;
  LeafList& list = leaf_lists_[q];
  const std::vector<ShapeNeed>& needs = shapes_of_queue_[q];
  if (list.held == static_cast<int64_t>(needs.size())) return;  // none is listed
  if (marks.spent.size() <= q) marks.spent.resize(shapes_of_queue_.size(), 0);
  if (marks.spent[q]) return;
  // Its rooms now within fair shares and its guarantee, with those within the limits as listed
  // (the second pass's listing is not redone here): what the listing records below.
  const size_t m = book_.managed_count();
  std::vector<int64_t> rooms(3 * m);
  LeafRooms(q, list.kept, rooms.data(), false);
  ClampRooms(q, rooms.data());
  std::copy(list.rooms.begin() + static_cast<std::ptrdiff_t>(m), list.rooms.begin() + static_cast<std::ptrdiff_t>(2 * m),
            rooms.begin() + static_cast<std::ptrdiff_t>(m));
  const LeafRoom room = RoomOf(q, list.kept, rooms.data());
  bool left = false;
  for (size_t i = 0; i < needs.size(); ++i) {
    const ShapeNeed& need = needs[i];
    if (!queue_.listed(need.shape, kFirstPass)) continue;
    if (room.Lists(need)) {
      left = true;
      continue;
    }
    // As if the pass had come to it and found no room: held back for the second pass.
    queue_.SetListed(need.shape, false, kFirstPass);
    marks.waited.push_back(need.shape);
    marks.any_held = true;
    ++list.held;
    ++shapes_held_;
    list.listed[i] = static_cast<char>(list.listed[i] & ~(1 << kFirstPass));
    // One the second pass would not try by its limits is tried all the same (TryQueue), and the
    // leaf listed anew at the next listing.
    if ((list.listed[i] >> kSecondPass & 1) == 0) list.valid = false;
  }
  // Listed as ListLeaf would list it with these rooms (rooms only shrink within a cycle, so what
  // was not listed for the first pass would not be now): the next listing looks at it again and
  // lists it anew only if its rooms changed since.
  if (list.valid) {
    list.rooms = rooms;
    list.touched = true;
    relist_.push_back(q);
  }
  marks.spent[q] = !left;
}

void Engine::HoldBackAround(size_t q, PassMarks& marks) {
  HoldBack(q, marks);
  // Its sister leaves share the room its parent had (and the leaves below an ancestor left with no
  // GPU room within its fair share have none): held back now rather than each in turn.
  const QueueTree& tree = book_.tree();
  std::vector<size_t> below;
  for (int a = tree.parent(q); a >= 0; a = tree.parent(static_cast<size_t>(a))) {
    if (a != tree.parent(q) && book_.GpuRoom(state_, static_cast<size_t>(a), QueueBook::Bound::kFair) > 0) continue;
    below.assign(1, static_cast<size_t>(a));
    while (!below.empty()) {
      const size_t at = below.back();
      below.pop_back();
      if (tree.leaf(at)) HoldBack(at, marks);
      else below.insert(below.end(), tree.children(at).begin(), tree.children(at).end());
    }
  }
}

int32_t Engine::QueueRoom(size_t li, QueueBook::Bound leaf_bound, QueueBook::Bound bound) const {
  const Job& j = state_.job(locals_[li].id);
  using Bound = QueueBook::Bound;
  // No queue, or no limit on its path (within the limits): no bound, without a walk up the path.
  if (j.spec.queue < 0 || !book_.enabled() ||
      (leaf_bound == Bound::kLimit && bound == Bound::kLimit && book_.Unlimited(static_cast<size_t>(j.spec.queue)))) {
    return INT32_MAX;
  }
  // Its leaf's room in replicas of its shape's one-replica request (which Roomy reads too), less
  // what Reclaims within its leaf hold for other jobs.
  QueueUsage by_dim = book_.RoomByDim(state_, static_cast<size_t>(j.spec.queue), leaf_bound, bound);
  if (!within_claims_.empty()) LessWithinClaimed(static_cast<size_t>(j.spec.queue), li, by_dim);
  const int64_t room = shape_info_[static_cast<size_t>(locals_[li].shape)].need.Replicas(by_dim);
  return static_cast<int32_t>(std::min<int64_t>(INT32_MAX, int64_t{j.bound_tasks} + std::min<int64_t>(room, INT32_MAX)));
}

std::pair<QueueBook::Bound, QueueBook::Bound> Engine::StartBounds(size_t li, int64_t now_s) const {
  using Bound = QueueBook::Bound;
  if (!book_.sharing().borrow) return {Bound::kGuarantee, Bound::kGuarantee};
  if (now_s < locals_[li].no_borrow_until) return {Bound::kGuarantee, Bound::kLimit};
  return {Bound::kLimit, Bound::kLimit};
}

int32_t Engine::StartRoom(size_t li, int64_t now_s) const {
  if (!book_.enabled()) return INT32_MAX;
  const JobSpec& spec = state_.job(locals_[li].id).spec;
  const auto [leaf_bound, bound] = StartBounds(li, now_s);
  const int32_t room = QueueRoom(li, leaf_bound, bound);
  const int32_t step = options_.allocate.align ? std::max<int32_t>(1, spec.step) : 1;
  const int32_t whole = room / step * step;
  return whole >= (spec.min_replicas + step - 1) / step * step ? whole : 0;
}

bool Engine::QueuePass(int64_t now_s, std::optional<QueueBook::Bound> bound, PassMarks* marks) {
  // In a second pass (`bound` kLimit with `marks`), only the shapes the first one held back whose
  // class still had capacity.
  const bool second = marks != nullptr && bound == QueueBook::Bound::kLimit;
  bool own_started = false;
  queue_.Pass(
      [&](size_t li) {
        Local& l = locals_[li];
        const JobSpec& spec = state_.job(l.id).spec;
        const int32_t min = spec.min_replicas, queue = spec.queue;
        // A job a queue's Reclaim evicted does not borrow again for a while (no flapping): it
        // starts only within its leaf queue's guarantee, which no Reclaim takes back (not its
        // entitlement, which shrinks when a sister team's demand arrives), and within its
        // ancestors' limits — not their guarantees: a sister team's borrowing must not keep it
        // from its own guarantee.
        const bool no_borrow = now_s < l.no_borrow_until && bound != QueueBook::Bound::kGuarantee;
        if (second && no_borrow) return PendingQueue::Outcome::kStays;
        int32_t cap = INT32_MAX;
        if (bound) {
          const int32_t step = options_.allocate.align ? std::max<int32_t>(1, spec.step) : 1;
          cap = (no_borrow ? QueueRoom(li, QueueBook::Bound::kGuarantee, QueueBook::Bound::kLimit) : QueueRoom(li, *bound)) /
                step * step;
          if (cap < (min + step - 1) / step * step) {
            // Kept from borrowing, its bound is its own (its leaf's guarantee), not its shape's:
            // the shape's later jobs may still start.
            if (no_borrow) return PendingQueue::Outcome::kStays;
            if (marks != nullptr && !second) {
              marks->waited.push_back(l.shape);
              marks->any_held = true;
              // Its leaf's other shapes a start elsewhere on its path left no room for either.
              if (queue >= 0) HoldBackAround(static_cast<size_t>(queue), *marks);
            }
            return PendingQueue::Outcome::kShapeWaits;  // its queue has no room for it
          }
        }
        const bool own = std::find(holders_.begin(), holders_.end(), li) != holders_.end();
        const JobAttempt a = TryStartUpTo(li, cap, now_s);
        if (a.started) {
          CountDemand(li, false);
          OnStart(li, now_s, a.granted);
          // Its leaf's shapes it left no room for are not looked at again in this pass.
          if (marks != nullptr && !second && queue >= 0) HoldBackAround(static_cast<size_t>(queue), *marks);
          // What it held is free again: the classes that found no capacity are tried again.
          own_started |= own;
          if (own && marks != nullptr) {
            std::fill(marks->full.begin(), marks->full.end(), 0);
            marks->own_started_second |= second;
          }
          return PendingQueue::Outcome::kStarted;
        }
        if (a.kind == OutcomeKind::kInfeasible) {
          CountDemand(li, false);
          Log(EngineEvent::Kind::kReturned, now_s, li, 0, UINT32_MAX, 0, a.reason, true);
          return PendingQueue::Outcome::kInfeasible;
        }
        // No capacity for its request (whatever its queue): its class waits.
        if (marks != nullptr && !own) marks->full[static_cast<size_t>(shape_info_[static_cast<size_t>(l.shape)].cls)] = 1;
        return PendingQueue::Outcome::kWaits;
      },
      holders_,
      second  ? PendingQueue::Scope{nullptr, [&](int cls) { return !marks->full[static_cast<size_t>(cls)]; }, nullptr,
                                    kSecondPass}
      : marks ? PendingQueue::Scope{nullptr, nullptr, nullptr, kFirstPass}
              : PendingQueue::Scope{});
  return own_started;
}

int64_t Engine::ShapeNeed::Replicas(const QueueUsage& room) const {
  int64_t replicas = INT64_MAX;
  const auto bound = [&](size_t d, int64_t per) {
    if (per > 0 && room[d] != INT64_MAX) replicas = std::min(replicas, room[d] / per);
  };
  bound(kQueueGpu, one_gpu);
  if (one_model >= 0) bound(kQueueModel + static_cast<size_t>(one_model), one_gpu);
  bound(kQueueCpu, one_cpu);
  bound(kQueueMemory, one_mem);
  return replicas;
}

JobAttempt Engine::TryStartUpTo(size_t li, int32_t cap, int64_t now_s) {
  // A job its queue has room for only in part starts with what fits.
  const JobSpec& spec = state_.job(locals_[li].id).spec;
  const int32_t min = spec.min_replicas, max = spec.max_replicas;
  const bool capped = cap < max;
  if (capped) state_.SetJobBounds(locals_[li].id, min, cap);
  const bool opened = OpenHeadroom(li);
  const JobAttempt a = TryStart(li);
  if (opened) CloseHeadroom(now_s);
  if (capped) state_.SetJobBounds(locals_[li].id, min, max);
  return a;
}

void Engine::ClaimWithin(size_t li, int32_t replicas, int64_t until) {
  Local& l = locals_[li];
  if (replicas == 0) until = -1;
  if (l.within_claim == replicas && l.within_claim_until == until) return;
  if (l.within_claim == 0) within_claims_.push_back(li);
  l.within_claim = replicas;
  l.within_claim_until = until;
  if (replicas == 0) std::erase(within_claims_, li);
  LogCarry(li);
}

void Engine::ExpireWithinClaims(int64_t now_s) {
  for (size_t k = within_claims_.size(); k-- > 0;) {
    const size_t li = within_claims_[k];
    if (locals_[li].within_claim_until >= 0 && locals_[li].within_claim_until < now_s) ClaimWithin(li, 0);
  }
}

void Engine::LessWithinClaimed(size_t leaf, size_t except, QueueUsage& room, int64_t floor) const {
  const QueueUsage held = WithinClaimed(leaf, except);
  for (size_t d = 0; d < kQueueDims; ++d) {
    if (room[d] != INT64_MAX) room[d] = std::max<int64_t>(floor, room[d] - held[d]);
  }
}

QueueUsage Engine::WithinClaimed(size_t leaf, size_t except) const {
  QueueUsage held{};
  for (size_t li : within_claims_) {
    const Local& l = locals_[li];
    if (li == except || state_.job(l.id).spec.queue != static_cast<int32_t>(leaf)) continue;
    const ShapeNeed& need = shape_info_[static_cast<size_t>(l.shape)].need;
    held[kQueueGpu] += l.within_claim * need.one_gpu;
    if (need.one_model >= 0) held[kQueueModel + static_cast<size_t>(need.one_model)] += l.within_claim * need.one_gpu;
    held[kQueueCpu] += l.within_claim * need.one_cpu;
    held[kQueueMemory] += l.within_claim * need.one_mem;
  }
  return held;
}

void Engine::Unclaim(size_t li) {
  Local& l = locals_[li];
  if (l.claimed == 0) return;
  book_.Claim(state_, l.id, l.claimed, -1);
  l.claimed = 0;
}

void Engine::CountDemand(size_t li, bool waiting) {
  Local& l = locals_[li];
  if (!book_.enabled() || l.demand_counted == waiting) return;
  l.demand_counted = waiting;
  book_.Pending(state_, l.id, waiting ? 1 : -1);
}

void Engine::AddElasticDemand(std::vector<QueueUsage>& want) const {
  // Running elastic jobs want their room to grow.
  for (size_t li : elastic_running_) {
    const Job& j = state_.job(locals_[li].id);
    const int32_t room = j.spec.max_replicas - j.bound_tasks;
    if (room <= 0 || j.spec.queue < 0) continue;
    book_.AddDemand(state_, j.id, room, want[static_cast<size_t>(j.spec.queue)]);
  }
}

void Engine::RefreshShares(int64_t now_s) {
  SyncJobLog();
  book_.Refresh(state_, now_s);
}

void Engine::SyncJobLog() {
  if (state_.job_log_overflowed()) {
    if (book_.enabled()) book_.AllChanged();
    for (size_t li : elastic_running_) {
      SyncGrowable(li);
      SyncElastic(li);
    }
  }
  for (JobId job : state_.job_log()) {
    if (book_.enabled()) book_.Touched(state_, job);
    const size_t li = job.value() < local_of_job_.size() ? local_of_job_[job.value()] : SIZE_MAX;
    if (li == SIZE_MAX || locals_[li].id != job) continue;
    SyncGrowable(li);
    SyncElastic(li);
  }
  state_.ClearJobLog();
}

void Engine::SyncElastic(size_t li) {
  if (!book_.enabled()) return;
  Local& l = locals_[li];
  const Job& j = state_.job(l.id);
  const int32_t room =
      j.spec.queue >= 0 && elastic_running_.count(li) != 0 ? std::max<int32_t>(0, j.spec.max_replicas - j.bound_tasks) : 0;
  if (room == l.elastic_counted) return;
  book_.Extra(state_, l.id, room - l.elastic_counted);
  l.elastic_counted = room;
}

QueueShares Engine::ReferenceShares() const {
  if (!book_.enabled()) return {};
  std::vector<QueueUsage> more(book_.tree().size(), QueueUsage{});
  AddElasticDemand(more);
  return book_.Reference(state_, more);
}

std::vector<Engine::QueueFigures> Engine::QueueStatus() const {
  if (!book_.enabled()) return {};
  const QueueTree& tree = book_.tree();
  std::vector<QueueFigures> out(tree.size());
  const QueueShares ref = ReferenceShares();
  const QueueShares& last = book_.shares();
  for (size_t q = 0; q < tree.size(); ++q) {
    QueueFigures& f = out[q];
    f.held = state_.queue_usage(q)[kQueueGpu];
    f.guarantee = tree.guarantee(q)[QuotaDims::kGpu];
    f.limit = tree.limit(q)[QuotaDims::kGpu];
    f.fair = ref.fair.empty() ? 0 : ref.at(ref.fair, q, QuotaDims::kGpu);
    f.entitled = last.entitled.empty() ? 0 : last.at(last.entitled, q, QuotaDims::kGpu);
    f.borrowed = std::max<int64_t>(0, f.held - f.guarantee);
  }
  // Up the tree from each job's leaf.
  const auto add = [&](int32_t leaf, auto&& fn) {
    for (int32_t q = leaf; q >= 0; q = tree.parent(static_cast<size_t>(q))) fn(out[static_cast<size_t>(q)]);
  };
  for (const Task& t : state_.tasks()) {
    if (t.state == TaskState::kBound && t.standby) add(state_.job(t.job).spec.queue, [&](QueueFigures& f) { f.lent += t.req.TotalGpuMilli(); });
  }
  for (size_t li = 0; li < locals_.size(); ++li) {
    const Job& j = state_.job(locals_[li].id);
    if (queue_.Contains(li)) {
      const int64_t gpu = int64_t{j.spec.max_replicas} * state_.task(j.tasks.front()).req.TotalGpuMilli();
      add(j.spec.queue, [&](QueueFigures& f) {
        f.pending += gpu;
        ++f.waiting_jobs;
      });
    } else if (locals_[li].running) {
      add(j.spec.queue, [&](QueueFigures& f) { ++f.running_jobs; });
    }
  }
  return out;
}

void Engine::ReclaimQueued(int64_t now_s) {
  // Idle plus reclaimable room only shrinks while nothing is released, and a job's Reclaim plan
  // depends on its shape and on a reservation of its own: once a job of a shape without one is
  // refused, the later ones are too, until a release. Only HP shapes are looked at, so a long LP
  // queue costs nothing here, nor a long queue of refused HP jobs. With queues, what may be taken
  // also changes with the shares and as cooldowns end; and a shape below HP (whose victims only
  // come from queues above their entitlements) is looked at again only after a release on its
  // models, a change of fair shares or entitlements, a cooldown's end, or when the GPUs its
  // queue may take from grew (QueueBook::Supply) — not after every change of what queues hold.
  if (book_.enabled()) RefreshShares(now_s);
  // The shapes looked at: HP ones, and those of the queues that may be owed capacity (none when
  // queues do not reclaim) whose jobs may be: a shape below HP whose min replicas its queue has no
  // room for within its entitlement now is not owed in this pass either (the pass only claims
  // more; the shares it is owed by change only with what queues hold or want, which it leaves).
  // Nor those whose jobs would all be refused as hopeless (ReclaimHopeless).
  std::vector<int> shapes = hp_shapes_;
  for (size_t q = 0; book_.enabled() && book_.sharing().reclaim && q < shapes_of_queue_.size(); ++q) {
    if (!book_.MayBeBelow(state_, q, QueueBook::Bound::kEntitled)) continue;
    const QueueUsage room = book_.RoomWithClaims(state_, q, QueueBook::Bound::kEntitled);
    for (const ShapeNeed& need : shapes_of_queue_[q]) {
      const ShapeInfo& info = shape_info_[static_cast<size_t>(need.shape)];
      if (info.hp || (need.MayBeOwed(room) && !ReclaimHopeless(q, info, now_s))) shapes.push_back(need.shape);
    }
  }
  if (shapes.empty() && holders_.empty()) return;  // the pass would look at no job
  uint64_t seq = state_.release_seq() * 1000003 + reclaims_;
  uint64_t lp_epoch = 0;
  if (book_.enabled()) {
    seq = seq * 1000003 + book_.ReclaimEpoch(now_s);
    lp_epoch = book_.ReclaimEpoch(now_s, true) * 1000003 + reclaims_;
  }
  const auto seq_of = [&](const ShapeInfo& i) {
    return !book_.enabled() || i.hp ? seq : state_.release_seq(i.models) * 1000003 + lp_epoch;
  };
  BookAnswers asked;
  queue_.Pass(
      [&](size_t li) {
        Local& l = locals_[li];
        if (l.reclaiming || l.running) return PendingQueue::Outcome::kStays;
        // With queues, a job below HP reclaims only when its queue is owed capacity for it. Not
        // owed, its shape's later jobs are not either (the shape fixes the queue, the request,
        // min replicas and priority; the pass changes neither usage nor shares): skipped.
        const JobSpec& spec = state_.job(l.id).spec;
        if (l.priority < options_.preemptor_min_priority && !book_.Owed(state_, l.id, spec.min_replicas)) {
          return PendingQueue::Outcome::kShapeWaits;
        }
        // A job without room to start in its queue (StartRoom: kept from borrowing, or at its
        // guarantee without borrowing) could not start on what a Reclaim frees: as StartReclaim
        // refuses a job beyond its queue's limits — unless it may preempt within its queue.
        if (StartRoom(li, now_s) == 0 && !MayPreemptWithinQueue(li, now_s)) return PendingQueue::Outcome::kStays;
        const bool own = state_.job(l.id).reservation.valid();
        if (own && l.refused_seq == seq && MemoHolds(l.refused_epoch)) return PendingQueue::Outcome::kStays;
        ShapeInfo& info = shape_info_[static_cast<size_t>(l.shape)];
        const uint64_t shape_seq = seq_of(info);
        int64_t supply = INT64_MAX;
        if (!own && book_.enabled() && !info.hp) {
          const int32_t step = options_.allocate.align ? std::max<int32_t>(1, spec.step) : 1;
          const int32_t need = (spec.min_replicas + step - 1) / step * step;
          supply = Answer(&asked, li, need, [&] { return BookAnswer{false, book_.Supply(state_, l.id, need, now_s)}; }).supply;
          if (info.refused_seq == shape_seq && MemoHolds(info.refused_epoch) && supply <= info.refused_supply) {
            return PendingQueue::Outcome::kShapeWaits;
          }
          // Its GPUs cannot be found: StartReclaim would ask the book for the same supply and
          // refuse it (Hopeless), so it is refused here.
          if (Hopeless(li, supply, nullptr)) {
            info.refused_seq = shape_seq;
            info.refused_epoch = kAnyEpoch;
            info.refused_supply = supply;
            return PendingQueue::Outcome::kShapeWaits;
          }
        }
        // The plan (O(cluster)) only where its GPUs could be found at all (a queue's victims may
        // be of any priority: always planned) and, without queues, where some preemptible work
        // of a lower priority runs: else a plan could evict nothing, and is refused.
        std::string why;
        const bool victims = book_.enabled() || (state_.PreemptibleGpuMilliBelow(l.priority) > 0 &&
                                                 !PreemptAction::CannotFit(state_, l.id, options_.allocate));
        const uint64_t plans = plans_;
        refused_idle_ = false;
        const bool started = victims && StartReclaim(li, now_s, &why);
        if (plans_ != plans) asked.clear();  // a plan may change what the book's answers depend on
        if (started) {
          return PendingQueue::Outcome::kStays;
        }
        if (own) {
          l.refused_seq = seq;
          l.refused_epoch = RefusalEpoch();
          return PendingQueue::Outcome::kStays;
        }
        info.refused_seq = shape_seq;
        info.refused_epoch = RefusalEpoch();
        info.refused_supply = supply;
        return PendingQueue::Outcome::kShapeWaits;
      },
      holders_, PendingQueue::Scope{[&](int sh) {
        const ShapeInfo& i = shape_info_[static_cast<size_t>(sh)];
        return !(i.hp || !book_.enabled()) || i.refused_seq != seq_of(i) || !MemoHolds(i.refused_epoch);
      }, nullptr, &shapes});
}

void Engine::Rebalance(int64_t now_s) {
  if (!book_.enabled() || !book_.sharing().rebalance || !book_.sharing().reclaim) return;
  // As ReclaimQueued: a shape whose rebalance found no plan finds none until something is
  // released or the shares or cooldowns change; a job whose queue is not short of its fair share
  // stands for its shape's later jobs (the pass only adds claims).
  RefreshShares(now_s);
  // The memo as ReclaimQueued's for shapes below HP: releases on the shape's models, the fair
  // shares and cooldowns, and what its victims' queues hold (QueueBook::Supply's bound).
  const uint64_t epoch = book_.ReclaimEpoch(now_s, true) * 1000003 + reclaims_;
  const auto seq_of = [&](const ShapeInfo& i) { return state_.release_seq(i.models) * 1000003 + epoch; };
  BookAnswers asked;
  // Only the shapes of the queues that may be short of their fair shares.
  // Of those, the shapes whose min replicas would keep their queue within its fair share
  // (RebalanceVictims' `below`, at the leaf) while it is short of it, and not hopeless for any
  // job of theirs (RebalanceHopeless).
  std::vector<int> shapes;
  for (size_t q = 0; q < shapes_of_queue_.size(); ++q) {
    if (!book_.MayBeBelow(state_, q, QueueBook::Bound::kFair)) continue;
    const QueueUsage room = book_.RoomWithClaims(state_, q, QueueBook::Bound::kFair);
    for (const ShapeNeed& need : shapes_of_queue_[q]) {
      if (!need.Fits(room)) continue;
      const ShapeInfo& info = shape_info_[static_cast<size_t>(need.shape)];
      if (need.one_gpu == 0 || (book_.ShortOfFairShare(state_, q, info.models) && !RebalanceHopeless(q, info, now_s))) {
        shapes.push_back(need.shape);
      }
    }
  }
  queue_.Pass(
      [&](size_t li) {
        Local& l = locals_[li];
        if (l.reclaiming || l.running) return PendingQueue::Outcome::kStays;
        // Without room to start in its queue (StartRoom 0), as in ReclaimQueued.
        if (StartRoom(li, now_s) == 0) return PendingQueue::Outcome::kStays;
        const JobSpec& spec = state_.job(l.id).spec;
        const int32_t step = options_.allocate.align ? std::max<int32_t>(1, spec.step) : 1;
        bool below = false;
        int64_t supply = INT64_MAX;
        const int32_t need = (spec.min_replicas + step - 1) / step * step;
        const bool own = state_.job(l.id).reservation.valid();
        const BookAnswer answer = Answer(own ? nullptr : &asked, li, need, [&] {
          BookAnswer a;
          (void)book_.RebalanceVictims(state_, l.id, need, now_s, &a.yes, &a.supply, false);
          return a;
        });
        below = answer.yes;
        supply = answer.supply;
        if (!below || QueueRoom(li, QueueBook::Bound::kLimit) < spec.min_replicas) return PendingQueue::Outcome::kShapeWaits;
        ShapeInfo& info = shape_info_[static_cast<size_t>(l.shape)];
        if (!own && info.rebalance_refused_seq == seq_of(info) && MemoHolds(info.rebalance_refused_epoch) &&
            supply <= info.rebalance_refused_supply) {
          return PendingQueue::Outcome::kShapeWaits;
        }
        if (!own && Hopeless(li, supply, nullptr)) {  // no plan (O(cluster)) is made
          info.rebalance_refused_seq = seq_of(info);
          info.rebalance_refused_epoch = kAnyEpoch;
          info.rebalance_refused_supply = supply;
          return PendingQueue::Outcome::kShapeWaits;
        }
        VictimFilter filter = book_.RebalanceVictims(state_, l.id, need, now_s, &below, &supply);
        // A job a queue's Reclaim evicted whole (it may not borrow yet) is no victim again.
        filter.allowed = [&, allowed = filter.allowed](const Job& v) {
          const size_t vi = local_of_job_[v.id.value()];
          return (vi == SIZE_MAX || now_s >= locals_[vi].no_borrow_until) && allowed(v);
        };
        std::string why;
        asked.clear();  // a plan may change what the book's answers depend on
        if (ReclaimWith(li, now_s, filter, true, "fair share", &why)) return PendingQueue::Outcome::kStays;
        if (!own) {
          info.rebalance_refused_seq = seq_of(info);
          info.rebalance_refused_epoch = RefusalEpoch();
          info.rebalance_refused_supply = supply;
        }
        return PendingQueue::Outcome::kShapeWaits;
      },
      holders_,
      PendingQueue::Scope{nullptr, nullptr, &shapes});
}

bool Engine::RebalanceHopeless(size_t q, const ShapeInfo& info, int64_t now_s) const {
  if (info.need.one_gpu <= 0) return false;
  return HopelessWith(info, book_.SupplyBound(state_, q, info.models, QueueBook::Bound::kFair, now_s));
}

bool Engine::ReclaimHopeless(size_t q, const ShapeInfo& info, int64_t now_s) const {
  // An HP job's supply is not bounded (QueueBook::Supply): it may take lower-priority work too.
  if (info.need.one_gpu <= 0 || info.priority >= kHpPriority) return false;
  return HopelessWith(info, book_.SupplyBound(state_, q, info.models, QueueBook::Bound::kEntitled, now_s));
}

bool Engine::HopelessWith(const ShapeInfo& info, int64_t bound) const {
  if (bound == INT64_MAX) return false;
  // As Hopeless for a job of the shape without a reservation, with the bound for its supply.
  const ShapeNeed& need = info.need;
  const int64_t gpu = int64_t{(std::max<int32_t>(1, need.min_replicas) + need.step - 1) / need.step * need.step} * need.one_gpu;
  return gpu > state_.unheld_free_gpu_milli(info.models) + bound;
}

std::optional<Engine::AskKey> Engine::AskKeyOf(size_t li, int32_t replicas) const {
  // From the shape alone (not the job's own records: a pass asks for hundreds of shapes).
  const ShapeInfo& info = shape_info_[static_cast<size_t>(locals_[li].shape)];
  const ShapeNeed& need = info.need;
  // QueueBook::Request (surely) is one replica's CPU, memory and GPUs in total; the models add
  // the model's dimension and the fair share's model (FairModel). A shape without GPUs is not
  // keyed: its models (which it does not keep) still name the fair share's dimension; nor one
  // without a queue.
  if (need.one_gpu <= 0 || info.queue < 0) return std::nullopt;
  return AskKey{info.queue, need.one_cpu, need.one_mem, need.one_gpu, static_cast<int64_t>(info.models.bits()), replicas,
                info.priority >= kHpPriority ? 1 : 0};
}

Engine::BookAnswer Engine::Answer(BookAnswers* asked, size_t li, int32_t replicas,
                                  const std::function<BookAnswer()>& ask) const {
  const std::optional<AskKey> key = asked != nullptr ? AskKeyOf(li, replicas) : std::nullopt;
  if (!key) return ask();
  const auto [at, added] = asked->try_emplace(*key);
  if (added) at->second = ask();
  return at->second;
}

void Engine::SetElastic(size_t li, bool elastic) {
  const bool gpuless = locals_[li].gpus == 0;
  if (elastic) {
    if (elastic_running_.insert(li).second) elastic_gpuless_ += gpuless;
  } else if (elastic_running_.erase(li) != 0) {
    elastic_gpuless_ -= gpuless;
  }
  SyncGrowable(li);
  SyncElastic(li);
}

void Engine::SyncGrowable(size_t li) {
  Local& l = locals_[li];
  const Job& j = state_.job(l.id);
  const bool growable = j.bound_tasks < j.spec.max_replicas && elastic_running_.count(li) != 0;
  const int cls = shape_info_[static_cast<size_t>(l.shape)].cls;
  if (l.elastic_slot != SIZE_MAX && (!growable || l.elastic_cls != cls)) {
    std::vector<size_t>& list = elastic_of_class_[static_cast<size_t>(l.elastic_cls)];
    locals_[list.back()].elastic_slot = l.elastic_slot;
    list[l.elastic_slot] = list.back();
    list.pop_back();
    if (list.empty()) elastic_classes_.erase(l.elastic_cls);
    l.elastic_slot = SIZE_MAX;
    l.elastic_cls = -1;
  }
  if (growable && l.elastic_slot == SIZE_MAX) {
    if (elastic_of_class_.size() <= static_cast<size_t>(cls)) elastic_of_class_.resize(static_cast<size_t>(cls) + 1);
    std::vector<size_t>& list = elastic_of_class_[static_cast<size_t>(cls)];
    if (list.empty()) elastic_classes_.insert(cls);
    l.elastic_slot = list.size();
    l.elastic_cls = cls;
    list.push_back(li);
  }
}

void Engine::WatchWalltime(size_t li, bool on) {
  const Local& l = locals_[li];
  const Job& j = state_.job(l.id);
  if (j.spec.walltime_s <= 0 || j.started_at_s < 0) return;
  const std::pair<int64_t, uint32_t> limit{j.started_at_s + j.spec.walltime_s, l.fed};
  if (on) walltimes_.insert(limit);
  else walltimes_.erase(limit);
}

void Engine::EndWalltimes(int64_t now_s) {
  // In order of the limits, then of the jobs' ids (a run whose work ended exactly at its limit
  // was finished by its driver before this cycle).
  while (!walltimes_.empty() && walltimes_.begin()->first <= now_s) {
    const uint32_t job = walltimes_.begin()->second;
    const size_t li = LocalOf(job);
    if (li == SIZE_MAX || !locals_[li].running) {  // not expected: every stop takes its limit out
      walltimes_.erase(walltimes_.begin());
      continue;
    }
    Log(EngineEvent::Kind::kTimedOut, now_s, li, state_.job(locals_[li].id).bound_tasks);
    Leave(job, now_s, true);  // takes its limit out of walltimes_
  }
}

void Engine::FileGrowable() {
  elastic_of_class_.clear();
  elastic_classes_.clear();
  for (size_t li : elastic_running_) {
    locals_[li].elastic_slot = SIZE_MAX;
    locals_[li].elastic_cls = -1;
    SyncGrowable(li);
  }
}

int64_t Engine::StepGpu(size_t li) const {
  const Job& j = state_.job(locals_[li].id);
  const int64_t step = options_.allocate.align ? std::max<int32_t>(1, j.spec.step) : 1;
  const TaskRequest& req = state_.task(j.tasks.front()).req;
  return req.NeedsGpu() ? step * req.TotalGpuMilli() : 0;
}

std::vector<JobId> Engine::MayGrow(int32_t blocking, QueueBook::Bound bound) const {
  // Only the jobs that may grow (elastic_of_class_), of the classes at or above the blocking
  // priority one step of whose request might fit somewhere (AllocateAction::AnyMightGrow):
  // AbsorbAction would pass over the others, and capacity only shrinks while it runs — O(classes)
  // plus the jobs of those classes, not O(elastic jobs), on a cluster whose free GPUs no step fits.
  // Per leaf queue, its room within `bound` in GPUs in total (milli; -1: not asked yet): a job
  // whose queue has no room for one step of it would be refused by Absorb's may_grow (the room
  // only shrinks while AbsorbAction runs).
  std::vector<int64_t> rooms;
  std::vector<JobId> running;
  for (const int cls : elastic_classes_) {
    const std::vector<size_t>& list = elastic_of_class_[static_cast<size_t>(cls)];
    const size_t first = list.front();
    const Job& one = state_.job(locals_[first].id);
    if (one.spec.priority < blocking) continue;
    const int32_t step = options_.allocate.align ? std::max<int32_t>(1, one.spec.step) : 1;
    if (!AllocateAction::AnyMightGrow(state_, state_.task(one.tasks.front()).req, step)) continue;
    const int64_t step_gpu = StepGpu(first);
    for (size_t li : list) {
      const int32_t q = state_.job(locals_[li].id).spec.queue;
      if (book_.enabled() && q >= 0) {
        if (rooms.empty()) rooms.assign(book_.tree().size(), -1);
        int64_t& room = rooms[static_cast<size_t>(q)];
        if (room < 0) room = book_.GpuRoom(state_, static_cast<size_t>(q), bound);
        if (room < step_gpu) continue;
      }
      running.push_back(locals_[li].id);
    }
  }
  return running;
}

bool Engine::Absorb(int64_t now_s, int32_t external_blocking) {
  if (!options_.absorb || elastic_running_.empty()) return false;
  // A waiting HP job or gang blocks growth at its priority — unless its Reclaim is under way (its
  // nodes are held). One whose Reclaim is infeasible still blocks: the room left free accumulates
  // for it. A waiting single-replica job below HP was just tried and could not use the free
  // capacity as it is: it is not owed it.
  // The blocking shapes by priority, highest first: the first with such a job sets it.
  int32_t blocking = external_blocking;
  for (int shape : blocking_shapes_) {
    const ShapeInfo& i = shape_info_[static_cast<size_t>(shape)];
    if (i.priority <= blocking) break;
    if (queue_.FirstOf(shape, [&](size_t li) { return !locals_[li].reclaiming; }) != SIZE_MAX) blocking = i.priority;
  }
  if (book_.enabled()) RefreshShares(now_s);
  // A job a queue's Reclaim shrank may grow again from its no_grow_until on.
  const bool unblocked = now_s >= regrow_due_;
  if (unblocked) {
    regrow_due_ = INT64_MAX;
    for (size_t li : elastic_running_) {
      if (locals_[li].no_grow_until > now_s) regrow_due_ = std::min(regrow_due_, locals_[li].no_grow_until);
    }
  }
  if (!unblocked && state_.release_seq() == absorb_seen_release_ && elastic_starts_ == absorb_seen_starts_ &&
      blocking == absorb_seen_blocking_ && book_.version() == absorb_seen_shares_) {
    return false;
  }
  absorb_seen_shares_ = book_.version();
  absorb_seen_release_ = state_.release_seq();
  absorb_seen_starts_ = elastic_starts_;
  absorb_seen_blocking_ = blocking;
  // With no GPU unallocated anywhere only jobs without GPUs could grow (a full cluster: the usual
  // case, at no cost however many elastic jobs run).
  if (elastic_gpuless_ == 0 && state_.allocated_gpu_milli() >= state_.total_gpu_milli()) return false;
  SyncJobLog();
  // With queues, each step only within the job's queue's fair share (limit without weights,
  // guarantee without borrowing).
  const SharingSpec& sh = book_.sharing();
  const QueueBook::Bound bound = !sh.borrow ? QueueBook::Bound::kGuarantee
                                 : sh.weights ? QueueBook::Bound::kFair
                                              : QueueBook::Bound::kLimit;
  const std::vector<JobId> running = MayGrow(blocking, bound);
  std::function<bool(const Job&, int32_t)> may_grow;
  if (book_.enabled()) {
    may_grow = [&, bound, now_s](const Job& j, int32_t replicas) {
      const size_t li = local_of_job_[j.id.value()];
      if (now_s < locals_[li].no_grow_until || !book_.Within(state_, j.id, replicas, bound, nullptr)) return false;
      if (within_claims_.empty() || j.spec.queue < 0) return true;
      // Not into the room a Reclaim within its queue holds for another job.
      QueueUsage room = book_.RoomByDim(state_, static_cast<size_t>(j.spec.queue), bound, bound);
      LessWithinClaimed(static_cast<size_t>(j.spec.queue), li, room);
      return shape_info_[static_cast<size_t>(locals_[li].shape)].need.Replicas(room) >= replicas;
    };
  }
  const AbsorbResult r = AbsorbAction::Run(CurrentSession(), state_, running, blocking, options_.allocate, may_grow);
  for (const auto& [job, added] : r.grown) {
    Log(EngineEvent::Kind::kGrown, now_s, local_of_job_[job.value()], state_.job(job).bound_tasks);
  }
  return !r.grown.empty();
}

namespace {
constexpr EngineAction kAllActions[] = {EngineAction::kEvictions, EngineAction::kRestores, EngineAction::kMoves,
                                        EngineAction::kAllocate,  EngineAction::kStandby,  EngineAction::kReserve,
                                        EngineAction::kDefrag,    EngineAction::kReclaim,  EngineAction::kHeadroom,
                                        EngineAction::kAbsorb,    EngineAction::kBackfill};
}  // namespace

const char* EngineActionName(EngineAction a) {
  switch (a) {
    case EngineAction::kEvictions: return "evictions";
    case EngineAction::kRestores: return "restores";
    case EngineAction::kMoves: return "moves";
    case EngineAction::kAllocate: return "allocate";
    case EngineAction::kStandby: return "standby";
    case EngineAction::kReserve: return "reserve";
    case EngineAction::kDefrag: return "defrag";
    case EngineAction::kReclaim: return "reclaim";
    case EngineAction::kHeadroom: return "headroom";
    case EngineAction::kAbsorb: return "absorb";
    case EngineAction::kBackfill: return "backfill";
  }
  return "?";
}

std::optional<EngineAction> EngineActionByName(const std::string& name) {
  for (EngineAction a : kAllActions) {
    if (name == EngineActionName(a)) return a;
  }
  return std::nullopt;
}

std::vector<EngineAction> DefaultEngineActions() {
  // Standby windows before the queue's pass (lent GPUs are there for it) and after it (a job that
  // started in a window lends at once).
  return {EngineAction::kEvictions, EngineAction::kRestores, EngineAction::kMoves,    EngineAction::kStandby,
          EngineAction::kAllocate,  EngineAction::kStandby,  EngineAction::kReserve,  EngineAction::kDefrag,
          EngineAction::kReclaim,   EngineAction::kHeadroom, EngineAction::kMoves,    EngineAction::kAbsorb};
}

std::vector<EngineEvent> Engine::RunCycle(int64_t now_s, const CycleOptions& options) {
  Record(now_s, CycleInput{options});
  SyncJobLog();  // the log stays short whichever actions read it
  const std::vector<EngineAction>& actions = options_.actions;
  const auto grow = std::find(actions.begin(), actions.end(), EngineAction::kAbsorb);
  const auto first = options.part == CyclePart::kGrow ? grow : actions.begin();
  const auto last = options.part == CyclePart::kBeforeGrow ? grow : actions.end();
  if (first == actions.begin()) EndWalltimes(now_s);
  if (!within_claims_.empty()) ExpireWithinClaims(now_s);
  // A replica that entered Standby after the list's last `allocate` lent GPUs no pass of this
  // cycle offered to the queue, and a hold the engine released after it (Release: a Reclaim's
  // plan replacing its job's hold, backfill's new plans, an assembly's) may leave free nodes no
  // pass offered, and a job backfill planned for may have started after backfill's action (the
  // reserve action's holds; backfill plans anew once one has), and a job backfill found when it
  // had none to plan for may wait now (a hold or a Reclaim ended after it, a job was requeued):
  // the actions run again until none of these happened, so that the cycle ends at a fixed point
  // (another cycle at the same time changes nothing), whatever the driver's rhythm. It ends: a
  // window's target is fixed at one time, so each pass lends only replicas that were not lending
  // before; a job's Reclaim is planned once, and backfill plans anew only at its interval, once a
  // job it planned for has started (each time one more job has), or when it had none to plan for
  // (then it has one, and the next round is an interval away). The reserve action's renewals
  // (ReserveAction::Renew) release holds of their own, which RenewHolds notes as released too.
  // With queues that reclaim, a job Absorb grew may put its queue above its entitlement, which a
  // queue owed capacity may then take back: the actions run again after a growth while jobs wait
  // (a round after one that grew nothing ends it; growth only takes free GPUs, which the rounds
  // only free by releases, each of which ends a Reclaim or a hold). A move that ended after the
  // list's last `allocate` (completed: its old instance's GPUs; given up: its target's) freed
  // capacity that pass did not offer: the actions run again too (each move ends once).
  const bool reclaim_sees_growth = book_.enabled() && book_.sharing().reclaim &&
                                   std::find(first, last, EngineAction::kReclaim) != last;
  const auto moves_ended = [&] {
    const MigrationCounters& c = migrations_.counters();
    return c.completed + c.aborted + c.cancelled;
  };
  for (bool again = true; again;) {
    again = false;
    for (auto it = first; it != last; ++it) {
      const size_t lent_before = standby_entries_;
      const int64_t ended_before = moves_ended();
      if (*it == EngineAction::kAllocate) released_.clear();
      switch (*it) {
        case EngineAction::kEvictions: EndEvictions(now_s); break;
        case EngineAction::kRestores: EndRestores(now_s); break;
        case EngineAction::kMoves:
          StepMigrations(now_s);
          ContinueEvacuations(now_s);
          break;
        case EngineAction::kAllocate: TryQueue(now_s); break;
        case EngineAction::kStandby: FollowWindows(now_s); break;
        case EngineAction::kReserve: RenewHolds(now_s); break;
        case EngineAction::kDefrag: PlanDefrag(now_s); break;
        case EngineAction::kReclaim:
          // A Reclaim started changes what the others' plans may take (reclaims_): the jobs
          // refused before it are asked again, until no more start (each job reclaims once).
          for (uint64_t before = UINT64_MAX; before != reclaims_;) {
            before = reclaims_;
            ReclaimQueued(now_s);
            Rebalance(now_s);
          }
          break;
        case EngineAction::kHeadroom: RestoreHeadroom(now_s); break;
        case EngineAction::kAbsorb:
          if (Absorb(now_s, options.external_blocking) && reclaim_sees_growth && !queue_.empty()) again = true;
          break;
        case EngineAction::kBackfill: Backfill(now_s); break;
      }
      if (*it == EngineAction::kAllocate) again = false;
      else if (standby_entries_ != lent_before || moves_ended() != ended_before || FreedSinceAllocate() || PlannedMovedOn()) again = true;
    }
    // Backfill found no job to plan for, and one waits now (the actions after it changed that).
    if (!again && std::find(first, last, EngineAction::kBackfill) != last && BackfillDue(now_s)) again = true;
    if (std::find(first, last, EngineAction::kAllocate) == last) break;
  }
  book_.Roll(state_, now_s);
  return TakeEvents();
}

std::optional<int64_t> Engine::NextDue() const {
  std::optional<int64_t> due;
  for (const Eviction& ev : evictions_) due = due ? std::min(*due, ev.at) : ev.at;
  for (const Restore& r : restores_) due = due ? std::min(*due, r.at) : r.at;
  for (const Headroom& h : headrooms_) {
    if (h.retry_at > 0) due = due ? std::min(*due, h.retry_at) : h.retry_at;
  }
  if (const auto m = migrations_.NextDue()) due = due ? std::min(*due, *m) : *m;
  // An evacuation plans again for the tasks left once the cluster changed since its last plan.
  for (const auto& [node, ev] : evacuating_) {
    if (state_.epoch() != ev.epoch) due = due ? std::min(*due, ev.retry_at) : ev.retry_at;
  }
  for (int64_t at : {next_replan_, next_defrag_}) {
    if (at > 0) due = due ? std::min(*due, at) : at;
  }
  if (!triggers_.empty()) due = due ? std::min(*due, triggers_.front().at) : triggers_.front().at;
  if (!relax_.empty()) due = due ? std::min(*due, relax_.front().at) : relax_.front().at;
  if (!walltimes_.empty()) due = due ? std::min(*due, walltimes_.begin()->first) : walltimes_.begin()->first;
  // A hold within a queue whose victims have left ends after their second (ExpireWithinClaims).
  for (size_t li : within_claims_) {
    if (const int64_t until = locals_[li].within_claim_until; until >= 0) due = due ? std::min(*due, until + 1) : until + 1;
  }
  // A shrunk job's cooldown matters only to Absorb (which resets regrow_due_ as it passes).
  // (With no elastic job running there is nothing to regrow: when one starts, Absorb runs.)
  if (options_.absorb && !elastic_running_.empty() && regrow_due_ != INT64_MAX) {
    due = due ? std::min(*due, regrow_due_) : regrow_due_;
  }
  // A planned job: the plan is renewed (and jobs backfilled) every interval.
  if (options_.backfill.easy && !queue_.empty() && next_backfill_ > now_) due = due ? std::min(*due, next_backfill_) : next_backfill_;
  // While jobs wait: a job kept from borrowing may start beyond its fair share once its period
  // ends (and, running, be a rebalance's victim again), a queue whose cooldown ends may be
  // reclaimed from again, and a Reclaim's budgets admit victims anew at each budget time — a
  // queue's Reclaim, or a job's that reclaims by priority (its victims in other queues are
  // bounded by what those hold above their entitlements, whether or not queues reclaim).
  if (!queue_.empty()) {
    for (size_t li : no_borrow_) {
      const int64_t until = locals_[li].no_borrow_until;
      if (until > now_) due = due ? std::min(*due, until) : until;
    }
    if (std::find(options_.actions.begin(), options_.actions.end(), EngineAction::kReclaim) != options_.actions.end()) {
      if (const auto c = book_.NextCooldownEnd(now_)) due = due ? std::min(*due, *c) : *c;
      // The next budget time, when a refused Reclaim's victims are ordered anew.
      const auto hp_waits = [&] {
        return std::any_of(hp_shapes_.begin(), hp_shapes_.end(), [&](int sh) { return queue_.Queued(sh); });
      };
      if (book_.enabled() && (book_.sharing().reclaim || hp_waits())) {
        const int64_t next = book_.BudgetTime(now_) + book_.budget_period_s();
        due = due ? std::min(*due, next) : next;
      }
    }
  }
  for (const auto& [job, ws] : windows_) {
    for (const StandbyWindowSpec& w : ws) {
      for (int64_t edge : {w.from_s, std::max(w.from_s, w.to_s - options_.standby_grace_s)}) {
        if (edge > now_) due = due ? std::min(*due, edge) : edge;
      }
    }
  }
  return due;
}

bool Engine::AcknowledgeMove(TaskId task, bool ready) {
  Record(now_, AcknowledgeMoveInput{task, ready});
  return migrations_.Acknowledge(task, ready);
}

void Engine::SetAbsorb(bool absorb) {
  Record(now_, SettingInput{SettingInput::Key::kAbsorb, absorb ? 1 : 0});
  options_.absorb = absorb;
}

void Engine::Apply(const EngineInput& in) {
  now_ = in.t;
  const int64_t t = in.t;
  std::visit(
      [&](const auto& x) {
        using X = std::decay_t<decltype(x)>;
        std::string why;
        std::vector<NodeId> held;
        if constexpr (std::is_same_v<X, SubmitInput>) (void)Submit(x.job, x.mode, t);
        else if constexpr (std::is_same_v<X, CancelInput>) x.finished ? Finish(x.job, t) : Cancel(x.job, t);
        else if constexpr (std::is_same_v<X, ResizeInput>) (void)Resize(x.job, x.min_replicas, x.max_replicas, t, &why);
        else if constexpr (std::is_same_v<X, ProbeInput>) {
          x.know ? (void)Know(x.job, t) : x.quote ? (void)QuoteReclaim(x.job, t) : (void)FitsIdleNow(x.job, t);
        }
        else if constexpr (std::is_same_v<X, AddPlaneInput>) (void)AddPlane(x.name, x.levels);
        else if constexpr (std::is_same_v<X, AddNodeInput>) (void)AddNode(x.spec, x.gpu_model, x.domains);
        else if constexpr (std::is_same_v<X, StandbyInput>) (void)SetStandby(x.job, x.replicas, t);
        else if constexpr (std::is_same_v<X, StandbyWindowsInput>) SetStandbyWindows(x.job, x.windows, t);
        else if constexpr (std::is_same_v<X, DefragInput>) (void)Defrag(x.options, t);
        else if constexpr (std::is_same_v<X, AbortMovesInput>) AbortMoves(t);
        else if constexpr (std::is_same_v<X, AcknowledgeMoveInput>) (void)AcknowledgeMove(x.task, x.ready);
        else if constexpr (std::is_same_v<X, AcknowledgeStandbyInput>) (void)AcknowledgeStandby(x.task, x.ok, x.why);
        else if constexpr (std::is_same_v<X, HoldInput>) x.hold ? (void)Reserve(x.job, &held) : Unreserve(x.job);
        else if constexpr (std::is_same_v<X, AdoptInput>) (void)Adopt(x.job, x.placements, x.started_s);
        else if constexpr (std::is_same_v<X, SettingInput>) {
          if (x.key == SettingInput::Key::kGrace) SetGrace(x.value);
          else if (x.key == SettingInput::Key::kStandbyGrace) SetStandbyGrace(x.value);
          else SetAbsorb(x.value != 0);
        } else if constexpr (std::is_same_v<X, QueuesInput>) {
          (void)SetQueues(x.queues, x.sharing);
        } else if constexpr (std::is_same_v<X, RestoreInput>) {
          RestoreCarried(x.carry, t);
        } else if constexpr (std::is_same_v<X, CycleInput>) {
          std::vector<EngineEvent> events = RunCycle(t, x.options);
          // RunCycle hands its events to its caller; a replay keeps them for TakeEvents.
          events_.insert(events_.begin(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
        } else {
          static_assert(std::is_same_v<X, NodeInput>);
          switch (x.op) {
            case NodeInput::Op::kFail: FailNode(x.node, t); break;
            case NodeInput::Op::kDrain: DrainNode(x.node, t); break;
            case NodeInput::Op::kRestore: RestoreNode(x.node); break;
            case NodeInput::Op::kCordon: SetCordoned(x.node, true); break;
            case NodeInput::Op::kUncordon: SetCordoned(x.node, false); break;
            case NodeInput::Op::kEvacuate: (void)Evacuate(x.node, t); break;
          }
        }
      },
      in.what);
}

std::vector<JobId> Engine::HeadroomJobs() const {
  std::vector<JobId> v;
  for (const Headroom& h : headrooms_) v.push_back(locals_[h.li].id);
  return v;
}

void Engine::Cancel(uint32_t job, int64_t now_s) {
  Record(now_s, CancelInput{job, false});
  Leave(job, now_s, false);
}

void Engine::Finish(uint32_t job, int64_t now_s) {
  Record(now_s, CancelInput{job, true});
  Leave(job, now_s, true);
}

void Engine::Leave(uint32_t job, int64_t now_s, bool finished) {
  const size_t li = LocalOf(job);
  if (li == SIZE_MAX) return;
  Local& l = locals_[li];
  if (queue_.Contains(li)) queue_.Remove(li);
  CountDemand(li, false);
  Unclaim(li);
  ClaimWithin(li, 0);
  if (state_.job(l.id).reservation.valid()) Release(state_.job(l.id).reservation);
  if (!state_.job(l.id).resume_nodes.empty()) state_.SetResumeNodes(l.id, {});
  // Borrowers before lenders (a lender leaves Standby only once its borrowers are gone).
  std::vector<TaskId> tasks = state_.job(l.id).tasks;
  std::stable_partition(tasks.begin(), tasks.end(), [&](TaskId t) { return state_.task(t).borrowed; });
  for (TaskId t : tasks) {
    if (state_.task(t).state != TaskState::kBound) continue;
    if (!finished) {
      Free(t, now_s);
      continue;
    }
    if (state_.task(t).standby) ExitStandbyNow(t, now_s);
    state_.Finish(t);
  }
  if (l.running) {
    WatchWalltime(li, false);
    state_.SetJobStart(l.id, -1);
  }
  l.running = l.reclaiming = false;
  SetElastic(li, false);
}

Status Engine::AddPlane(const std::string& name, const std::vector<std::string>& levels) {
  Record(now_, AddPlaneInput{name, levels});
  std::vector<std::string> l = levels;
  l.push_back("node");
  auto p = state_.topology().AddPlane(name, l);
  if (!p.ok()) return p.status();
  return Status::Ok();
}

StatusOr<NodeId> Engine::AddNode(NodeSpec spec, const std::string& gpu_model,
                                          const std::vector<std::pair<std::string, std::vector<std::string>>>& domains) {
  Record(now_, AddNodeInput{spec, gpu_model, domains});
  if (!gpu_model.empty()) {
    auto m = state_.models().Intern(gpu_model);
    if (!m.ok()) return m.status();
    spec.model = *m;
  }
  // Check the domains before the node exists, so that a failure adds nothing.
  std::vector<PlaneId> planes;
  for (const auto& [plane, names] : domains) {
    auto p = state_.topology().FindPlane(plane);
    if (!p) {
      std::vector<std::string> levels;
      for (size_t i = 0; i < names.size(); ++i) levels.push_back("level" + std::to_string(i));
      ESTUARY_RETURN_IF_ERROR(AddPlane(plane, levels));
      p = state_.topology().FindPlane(plane);
    }
    if (state_.topology().planes()[p->value()].levels.size() != names.size()) {
      return InvalidArgument("plane '" + plane + "' has " +
                             std::to_string(state_.topology().planes()[p->value()].levels.size()) + " levels, got " +
                             std::to_string(names.size()) + " domain names");
    }
    planes.push_back(*p);
  }
  auto id = state_.AddNode(std::move(spec));
  if (!id.ok()) return id.status();
  node_evictions_.resize(state_.num_nodes(), 0);
  nodes_joined_ = true;
  book_.CapacityChanged();
  for (size_t i = 0; i < domains.size(); ++i) {
    const Status st = state_.AssignDomains(*id, planes[i], domains[i].second);
    // A node is never removed: a bad nesting leaves it outside that plane, and says so.
    if (!st.ok()) return InvalidArgument("node '" + state_.node(*id).spec.name + "' added outside plane '" + domains[i].first + "': " + st.message());
  }
  return *id;
}

void Engine::SetCordoned(NodeId node, bool cordoned) {
  Record(now_, NodeInput{cordoned ? NodeInput::Op::kCordon : NodeInput::Op::kUncordon, node});
  const NodeState now = state_.node(node).state;
  if (now == NodeState::kDown) return;
  migrations_.NodeTaken(node);  // the admin's word holds over a defragmentation's own cordon
  evacuating_.erase(node.value());  // and over an evacuation's going on
  state_.SetNodeState(node, cordoned ? NodeState::kCordoned : NodeState::kReady);
}

void Engine::FailNode(NodeId node, int64_t now_s) {
  Record(now_s, NodeInput{NodeInput::Op::kFail, node});
  if (state_.node(node).state == NodeState::kDown) return;
  migrations_.NodeTaken(node);
  evacuating_.erase(node.value());
  StopNode(node, now_s, NodeState::kDown, "node failed");
  book_.CapacityChanged();
}

void Engine::DrainNode(NodeId node, int64_t now_s) {
  Record(now_s, NodeInput{NodeInput::Op::kDrain, node});
  if (state_.node(node).state == NodeState::kDown) return;  // it has nothing left to stop
  migrations_.NodeTaken(node);
  migrations_.GiveUpMovesOnto(node);  // no new instance runs there either
  evacuating_.erase(node.value());
  StopNode(node, now_s, NodeState::kCordoned, "node drained");
}

void Engine::RestoreNode(NodeId node) {
  Record(now_, NodeInput{NodeInput::Op::kRestore, node});
  migrations_.NodeTaken(node);
  evacuating_.erase(node.value());
  if (state_.node(node).state != NodeState::kReady) state_.SetNodeState(node, NodeState::kReady);
  book_.CapacityChanged();
}

void Engine::StopNode(NodeId node, int64_t now_s, NodeState after, const std::string& detail) {
  // The simulator's rule (NodeFailureAction): each job that lost replicas keeps the largest whole
  // number of steps (Align) it still holds when that is at least its min, else it is evicted
  // whole; borrowers of a Standby replica that stops leave with it.
  // With hold_survivors, the other nodes of each job on `node` with a required or preferred level:
  // a gang confined to one domain holds them, one that may span domains starts again in theirs.
  std::map<uint32_t, std::vector<NodeId>> survivors;  // by JobId value
  if (options_.hold_survivors && options_.requeue && options_.allocate.topology) {
    for (TaskId t : state_.node(node).tasks) {
      const Job& j = state_.job(state_.task(t).job);
      const TopologyConstraint& tc = j.spec.topology;
      if (!tc.plane.valid() || (tc.required_level < 0 && tc.preferred_level < 0) || survivors.contains(j.id.value())) continue;
      std::vector<NodeId>& nodes = survivors[j.id.value()];
      for (TaskId o : j.tasks) {
        const Task& task = state_.task(o);
        if (task.state == TaskState::kBound && task.node != node && !task.borrowed &&
            std::find(nodes.begin(), nodes.end(), task.node) == nodes.end()) {
          nodes.push_back(task.node);
        }
      }
    }
  }
  const std::vector<FailureEffect> effects = NodeFailureAction::NodeDown(state_, node, options_.allocate.align);
  if (after != NodeState::kDown) state_.SetNodeState(node, after);
  for (const FailureEffect& e : effects) {
    const size_t li = local_of_job_[e.job.value()];
    if (li == SIZE_MAX || !locals_[li].running) continue;
    if (e.requeued) {
      ReturnWhole(li, now_s, UINT32_MAX, detail);
      const auto s = survivors.find(e.job.value());
      if (s == survivors.end() || !queue_.Contains(li) || state_.job(e.job).reservation.valid()) continue;
      if (state_.job(e.job).spec.topology.required_level < 0) {
        // It may span domains: nothing is held (its nodes are free for whoever fits, itself
        // first, at the front of the queue), but it starts again in the domains it ran in rather
        // than wherever the spanning rule would take it afresh (a run after run drift).
        state_.SetResumeNodes(e.job, s->second);
        LogCarry(li);
        continue;
      }
      const std::vector<NodeId> hold = Unheld(s->second);
      if (hold.empty()) continue;
      state_.AddReservation(e.job, hold);
      if (std::find(holders_.begin(), holders_.end(), li) == holders_.end()) holders_.push_back(li);
    } else {
      Log(EngineEvent::Kind::kShrunk, now_s, li, e.replicas_after, UINT32_MAX, 0, detail);
    }
  }
}

bool Engine::Resize(uint32_t job, int32_t min_replicas, int32_t max_replicas, int64_t now_s,
                             std::string* why) {
  Record(now_s, ResizeInput{job, min_replicas, max_replicas});
  const size_t li = LocalOf(job);
  if (li == SIZE_MAX) {
    *why = "the job is not here";
    return false;
  }
  if (min_replicas < 1 || min_replicas > max_replicas) {
    *why = "replicas: need 1 <= min <= max";
    return false;
  }
  Local& l = locals_[li];
  const JobId id = l.id;
  if (l.running && state_.job(id).bound_tasks < min_replicas) {
    *why = "min " + std::to_string(min_replicas) + " is above the " + std::to_string(state_.job(id).bound_tasks) +
           " replicas running";
    return false;
  }
  AddTasksUpTo(id, static_cast<size_t>(max_replicas));
  const bool counted = l.demand_counted;
  CountDemand(li, false);  // its demand follows its new max
  state_.SetJobBounds(id, min_replicas, max_replicas);
  CountDemand(li, counted);
  SyncElastic(li);
  l.min_replicas = min_replicas;
  l.max_replicas = max_replicas;
  l.gpus = int64_t{max_replicas} * state_.task(state_.job(id).tasks.front()).req.gpu_count;
  l.shape = ShapeOf(id);
  if (l.running) {
    const int32_t step = std::max(1, state_.job(id).spec.step);
    int32_t keep = std::min(state_.job(id).bound_tasks, max_replicas);
    while (keep > min_replicas && keep % step != 0) --keep;
    if (state_.job(id).bound_tasks > keep) {
      const std::vector<TaskId> tasks = state_.job(id).tasks;
      for (auto it = tasks.rbegin(); it != tasks.rend() && state_.job(id).bound_tasks > keep; ++it) {
        if (state_.task(*it).state == TaskState::kBound) Free(*it, now_s);
      }
      Log(EngineEvent::Kind::kShrunk, now_s, li, state_.job(id).bound_tasks, UINT32_MAX, 0, "resized");
    }
    SetElastic(li, min_replicas < max_replicas);
    absorb_seen_release_ = UINT64_MAX;  // Absorb looks again
  } else if (queue_.Contains(li)) {
    queue_.Remove(li);
    queue_.Push(li, l.priority, l.shape, false);
    l.refused_seq = UINT64_MAX;
    LogCarry(li);  // its place in the queue
  }
  return true;
}

void Engine::AddTasksUpTo(JobId id, size_t n) {
  while (state_.job(id).tasks.size() < n) {
    const Task& first = state_.task(state_.job(id).tasks.front());
    const TaskRequest req = first.req;
    const int32_t prio = first.priority;
    const std::string name = state_.job(id).spec.name + "-" + std::to_string(state_.job(id).tasks.size());
    state_.AddTask(id, name, req, prio);
  }
  being_evicted_.resize(state_.tasks().size(), 0);
  restoring_.resize(state_.tasks().size(), 0);
  pinned_.resize(state_.tasks().size(), 0);
}

std::string Engine::TopologyWords(size_t li) const {
  const Local& l = locals_[li];
  const TopologyConstraint& tc = state_.job(l.id).spec.topology;
  if (!tc.plane.valid() || l.required_level < 0) return "";
  const std::vector<std::string>& levels = state_.topology().plane(tc.plane).levels;
  const auto one = [&](int32_t level) { return level >= 0 ? "one " + levels[static_cast<size_t>(level)] : std::string("any placement"); };
  // Relaxed k times by now: the next relaxation is due k + 1 waits after it was queued.
  const int64_t k = l.required_level - tc.required_level;
  const int64_t next = l.queued_at + (k + 1) * l.required_max_wait_s;
  if (k == 0) {
    std::string w = "requires " + one(tc.required_level);
    if (l.required_max_wait_s > 0) w += "; accepts " + one(tc.required_level - 1) + " at t=" + std::to_string(next);
    return w;
  }
  std::string w = "required " + one(l.required_level) + " until t=" + std::to_string(l.queued_at + l.required_max_wait_s) +
                  "; accepts " + one(tc.required_level) + " now";
  if (tc.required_level >= 0) w += ", " + one(tc.required_level - 1) + " at t=" + std::to_string(next);
  return w;
}

Engine::Explanation Engine::Explain(uint32_t job, int64_t now_s) const {
  Explanation e;
  const size_t li = LocalOf(job);
  if (li == SIZE_MAX || locals_[li].running) return e;
  e.known = true;
  const JobId id = locals_[li].id;
  e.topology = TopologyWords(li);
  for (const Planned& p : planned_) {
    if (p.li != li) continue;
    // Its plan stands while it holds the plan's nodes, or (conservative) holds none: its nodes
    // are held for earlier plans.
    const ReservationId r = state_.job(id).reservation;
    if ((p.hold.valid() && r == p.hold) || (!p.hold.valid() && !r.valid())) {
      e.planned = "planned to start at " + std::to_string(p.start_s) + " on " + p.where;
    }
  }
  VictimFilter filter;
  if (book_.enabled()) {
    // The last shares the cycle computed (Explain changes nothing).
    const JobSpec& spec = state_.job(id).spec;
    const int32_t step = options_.allocate.align ? std::max<int32_t>(1, spec.step) : 1;
    const int32_t need = (spec.min_replicas + step - 1) / step * step;
    const SharingSpec& sh = book_.sharing();
    const int64_t kept_until = locals_[li].no_borrow_until;
    if (sh.borrow && now_s < kept_until) {
      // Kept from borrowing (StartBounds): within its leaf's guarantee and its ancestors' limits,
      // and no Reclaim of its own until then.
      if (!book_.Within(state_, id, need, QueueBook::Bound::kGuarantee, QueueBook::Bound::kLimit, &e.quota)) {
        e.quota = "kept from borrowing until t=" + std::to_string(kept_until) +
                  " (a queue's Reclaim evicted it; sharing.reborrow_s): " + e.quota;
        return e;
      }
    } else {
      (void)(book_.Within(state_, id, need, QueueBook::Bound::kLimit, &e.quota) &&
             (sh.borrow || book_.Within(state_, id, need, QueueBook::Bound::kGuarantee, &e.quota)) &&
             (!sh.weights || book_.Within(state_, id, need, QueueBook::Bound::kFair, &e.quota)));
    }
    filter = book_.Victims(state_, id, need, now_s, &e.owed);
  }
  const PreemptionPlan plan = PlanReclaim(id, now_s, std::move(filter));
  if (!plan.feasible) {
    e.reason = plan.reason;
    return e;
  }
  e.fits_idle = plan.evict.empty();
  e.reclaim_feasible = !plan.evict.empty();
  e.victims = static_cast<int32_t>(plan.evicted_jobs.size() + plan.shrunk.size());
  std::vector<char> from(book_.tree().size(), 0);
  for (TaskId t : plan.evict) {
    const JobSpec& victim = state_.job(state_.task(t).job).spec;
    e.victims_max_priority = std::max(e.victims_max_priority, victim.priority);
    if (victim.queue >= 0) from[static_cast<size_t>(victim.queue)] = 1;
  }
  for (size_t q = 0; q < from.size(); ++q) {
    if (from[q]) e.reclaim_from.push_back(book_.tree().spec(q).name);
  }
  return e;
}

bool Engine::Reserve(uint32_t job, std::vector<NodeId>* nodes) {
  Record(now_, HoldInput{job, true});
  const size_t li = LocalOf(job);
  if (li == SIZE_MAX || locals_[li].running || !queue_.Contains(li)) return false;
  const JobId id = locals_[li].id;
  if (state_.job(id).reservation.valid()) return false;
  std::vector<NodeId> plan = ReserveAction::Plan(state_, id, options_.allocate);
  if (plan.empty()) return false;
  state_.AddReservation(id, plan);
  if (std::find(holders_.begin(), holders_.end(), li) == holders_.end()) holders_.push_back(li);
  *nodes = std::move(plan);
  return true;
}

void Engine::Unreserve(uint32_t job) {
  Record(now_, HoldInput{job, false});
  const size_t li = LocalOf(job);
  if (li == SIZE_MAX) return;
  const ReservationId r = state_.job(locals_[li].id).reservation;
  if (r.valid()) Release(r);
}

std::vector<NodeId> Engine::HeldNodes(uint32_t job) const {
  const size_t li = LocalOf(job);
  if (li == SIZE_MAX) return {};
  const ReservationId r = state_.job(locals_[li].id).reservation;
  if (!r.valid()) return {};
  return state_.reservation(r).nodes;
}

std::optional<JobId> Engine::JobOf(uint32_t job) const {
  const size_t li = LocalOf(job);
  if (li == SIZE_MAX) return std::nullopt;
  return locals_[li].id;
}

bool Engine::Adopt(const EngineJob& job, const std::vector<Placement>& placements, int64_t started_s) {
  Record(now_, AdoptInput{job, placements, started_s});
  if (const size_t known = LocalOf(job.id); known != SIZE_MAX) {
    const Local& k = locals_[known];
    if (k.running || k.reclaiming || queue_.Contains(known)) return false;  // known only (Know) is fine
  }
  if (placements.empty() || placements.size() > static_cast<size_t>(std::max(0, job.max_replicas))) return false;
  std::set<size_t> seen;
  for (const Placement& p : placements) {
    if (p.replica >= kMaxReplicaRanks || !seen.insert(p.replica).second) return false;
    if (p.node.value() >= state_.num_nodes() || state_.node(p.node).state == NodeState::kDown) return false;
  }
  std::string why;
  const std::optional<size_t> li = Materialize(job, &why);
  if (!li) return false;
  AddTasksUpTo(locals_[*li].id, *seen.rbegin() + 1);
  const std::vector<TaskId> tasks = state_.job(locals_[*li].id).tasks;
  for (size_t k = 0; k < placements.size(); ++k) {
    const Placement& p = placements[k];
    const TaskId t = tasks[p.replica];
    if (p.borrowed ? !state_.CanBindBorrowed(t, p.node, p.gpus) : !state_.CanBind(t, p.node, p.gpus)) {
      for (size_t u = 0; u < k; ++u) {
        const TaskId b = tasks[placements[u].replica];
        if (state_.task(b).standby) state_.ExitStandby(b);
        state_.Unbind(b);
      }
      return false;
    }
    if (p.borrowed) {
      state_.BindBorrowed(t, p.node, p.gpus);
    } else {
      state_.Bind(t, p.node, p.gpus);
      if (p.standby && state_.CanEnterStandby(t)) state_.EnterStandby(t);
    }
  }
  Local& l = locals_[*li];
  l.running = true;
  state_.SetJobStart(l.id, started_s);
  WatchWalltime(*li, true);
  if (l.min_replicas < l.max_replicas) SetElastic(*li, true);
  return true;
}

int32_t Engine::Running(uint32_t job) const {
  const size_t li = LocalOf(job);
  if (li == SIZE_MAX || !locals_[li].running) return 0;
  return state_.job(locals_[li].id).bound_tasks;
}

std::vector<EngineEvent> Engine::TakeEvents() { return std::exchange(events_, {}); }

std::optional<ReclaimQuote> Engine::QuoteReclaim(const EngineJob& job, int64_t now_s) {
  Record(now_s, ProbeInput{job, true});
  std::string why;
  const std::optional<size_t> li = Materialize(job, &why);
  if (!li) return std::nullopt;
  const Local& l = locals_[*li];
  if (l.running || l.reclaiming || queue_.Contains(*li) || l.priority < options_.preemptor_min_priority || !Reclaims()) {
    return std::nullopt;
  }
  const bool opened = OpenHeadroom(*li);
  const PreemptionPlan plan = PlanReclaim(l.id, now_s, {});
  if (opened) CloseHeadroom(now_s);
  // Nothing to evict: it fits on the headroom (or on idle capacity the driver did not know of).
  if (!plan.feasible) return std::nullopt;
  ReclaimQuote q;
  q.victims = static_cast<int32_t>(plan.evicted_jobs.size() + plan.shrunk.size());
  q.cost = plan.cost;
  for (TaskId t : plan.evict) {
    q.gpu_milli += state_.task(t).req.TotalGpuMilli();
    q.max_priority = std::max(q.max_priority, state_.job(state_.task(t).job).spec.priority);
  }
  return q;
}

bool Engine::Know(const EngineJob& job, int64_t now_s) {
  ProbeInput in{job, false};
  in.know = true;
  Record(now_s, std::move(in));
  std::string why;
  return Materialize(job, &why).has_value();
}

bool Engine::FitsIdleNow(const EngineJob& job, int64_t now_s) {
  Record(now_s, ProbeInput{job, false});
  std::string why;
  const std::optional<size_t> li = Materialize(job, &why);
  if (!li) return false;
  const Local& l = locals_[*li];
  if (l.running) return true;
  // PreemptAction's feasibility step without victims: replicas fitting on each node now (model,
  // GPUs, CPU, memory; none on nodes down, cordoned or held for another job), summed over the
  // cluster or over one domain of the required level.
  const Job& local = state_.job(l.id);
  const TaskRequest& req = state_.task(local.tasks.front()).req;
  const int64_t step = options_.allocate.align ? std::max<int32_t>(1, local.spec.step) : 1;
  const int64_t need = (std::max<int64_t>(1, local.spec.min_replicas) + step - 1) / step * step;
  const TopologyConstraint& tc = local.spec.topology;
  auto room = [&](NodeId n) {
    const Node& node = state_.node(n);
    if (!node.Schedulable()) return int64_t{0};
    return AllocateAction::ReplicasFitting(state_, node, req, false, l.id);
  };
  if (options_.allocate.topology && tc.plane.valid() && tc.required_level >= 0) {
    for (DomainId d : state_.topology().DomainsAt(tc.plane, tc.required_level)) {
      int64_t sum = 0;
      for (NodeId n : state_.topology().domain(d).nodes) sum += room(n);
      if (sum >= need) return true;
    }
    return false;
  }
  int64_t sum = 0;
  for (const Node& n : state_.nodes()) {
    sum += room(n.id);
    if (sum >= need) return true;
  }
  (void)now_s;
  return false;
}

JobAttempt Engine::TryStart(size_t li) {
  const JobId id = locals_[li].id;
  const JobSpec& spec = state_.job(id).spec;
  if (MayBorrowLent(spec) && !state_.lending_nodes().empty()) {
    const JobAttempt a = StandbyAction::PlaceOnLent(state_, id, {}, options_.allocate.align);
    if (a.started) return a;
  }
  return AllocateAction::TryStart(CurrentSession(), state_, id, options_.allocate);
}

void Engine::ExitStandbyNow(TaskId t, int64_t now_s, bool restore) {
  for (TaskId v : StandbyAction::RestoreVictims(state_, t)) {
    if (state_.task(v).state != TaskState::kBound) continue;
    const size_t vi = local_of_job_[state_.task(v).job.value()];
    if (vi != SIZE_MAX && locals_[vi].running) {
      ReturnWhole(vi, now_s, locals_[local_of_job_[state_.task(t).job.value()]].fed, "standby restore");
    } else {
      state_.Unbind(v);
    }
  }
  state_.ExitStandby(t);
  restoring_[t.value()] = 0;
  const size_t li = local_of_job_[state_.task(t).job.value()];
  if (li == SIZE_MAX) return;
  touched_.insert(locals_[li].fed);
  if (restore) Log(EngineEvent::Kind::kRestored, now_s, li, InStandbyOf(li), UINT32_MAX, 0, Where(t));
}

int32_t Engine::InStandbyOf(size_t li) const {
  int32_t n = 0;
  for (TaskId t : state_.job(locals_[li].id).tasks) {
    n += state_.task(t).state == TaskState::kBound && (state_.task(t).standby || entering_.count(t) > 0);
  }
  return n;
}

void Engine::Free(TaskId t, int64_t now_s) {
  if (state_.task(t).standby) ExitStandbyNow(t, now_s);
  state_.Unbind(t);
}

void Engine::ReturnWhole(size_t vi, int64_t now_s, uint32_t for_job, const std::string& detail) {
  Local& v = locals_[vi];
  // Borrowers before lenders (a lender leaves Standby only once its borrowers are gone).
  std::vector<TaskId> tasks = state_.job(v.id).tasks;
  std::stable_partition(tasks.begin(), tasks.end(), [&](TaskId t) { return state_.task(t).borrowed; });
  for (TaskId t : tasks) {
    if (state_.task(t).state != TaskState::kBound) continue;
    if (state_.task(t).borrowed) ++node_evictions_[state_.task(t).node.value()];
    Free(t, now_s);
  }
  WatchWalltime(vi, false);
  v.running = false;
  state_.SetJobStart(v.id, -1);
  SetElastic(vi, false);
  // With requeue it waits again at the front (it ran before the jobs waiting now).
  if (options_.requeue && !queue_.Contains(vi)) Enqueue(vi, true, now_s);
  Log(EngineEvent::Kind::kReturned, now_s, vi, 0, for_job, 0, detail, false, options_.requeue);
}

bool Engine::SetStandby(uint32_t job, int32_t replicas, int64_t now_s) {
  Record(now_s, StandbyInput{job, replicas});
  return ApplyStandbyTarget(LocalOf(job), replicas, now_s);
}

void Engine::SetStandbyWindows(uint32_t job, std::vector<StandbyWindowSpec> windows, int64_t now_s) {
  Record(now_s, StandbyWindowsInput{job, windows});
  windows_[job] = std::move(windows);  // kept (empty) until its replicas are back (FollowWindows)
}

void Engine::FollowWindows(int64_t now_s) {
  SweepStandbyEntries();
  for (auto it = windows_.begin(); it != windows_.end();) {
    const size_t li = LocalOf(it->first);
    int32_t target = 0;
    bool later = false;
    for (const StandbyWindowSpec& w : it->second) {
      const int64_t end = std::max(w.from_s, w.to_s - options_.standby_grace_s);
      if (w.from_s <= now_s && now_s < end) target = w.replicas;
      later |= now_s < end;
    }
    if (li != SIZE_MAX && locals_[li].running) ApplyStandbyTarget(li, target, now_s);
    // Done with a job whose windows are over once none of its replicas is in Standby.
    const bool idle = li == SIZE_MAX || !locals_[li].running || InStandbyOf(li) == 0;
    it = !later && idle ? windows_.erase(it) : std::next(it);
  }
}

bool Engine::ApplyStandbyTarget(size_t li, int32_t replicas, int64_t now_s) {
  if (li == SIZE_MAX || !locals_[li].running) return false;
  const uint32_t job = locals_[li].fed;
  std::vector<TaskId> active, entering, standby;
  for (TaskId t : state_.job(locals_[li].id).tasks) {
    const Task& task = state_.task(t);
    if (task.state != TaskState::kBound || task.borrowed) continue;
    if (!task.standby) (entering_.count(t) ? entering : active).push_back(t);
    else if (!restoring_[t.value()]) standby.push_back(t);
  }
  const int64_t target =
      std::clamp<int64_t>(replicas, 0, static_cast<int64_t>(active.size() + entering.size() + standby.size()));
  if (target == 0) {
    for (TaskId t : active) refused_.erase(t);  // asked again in the job's next window
  }
  int64_t have = static_cast<int64_t>(entering.size() + standby.size());
  for (auto it = active.rbegin(); it != active.rend() && have < target; ++it) {
    if (!state_.CanEnterStandby(*it) || refused_.count(*it)) continue;
    touched_.insert(job);
    ++have;
    if (locals_[li].acknowledge_standby) {
      entering_.emplace(*it, state_.task(*it).node);  // lent once its driver acknowledges
    } else {
      state_.EnterStandby(*it);
      ++standby_entries_;
    }
    Log(EngineEvent::Kind::kStandby, now_s, li, InStandbyOf(li), UINT32_MAX, 0, Where(*it));
  }
  // Fewer wanted: replicas still entering are called back first (they lent nothing yet).
  for (auto it = entering.rbegin(); it != entering.rend() && have > target; ++it, --have) {
    entering_.erase(*it);
    touched_.insert(job);
    Log(EngineEvent::Kind::kRestored, now_s, li, InStandbyOf(li), UINT32_MAX, 0, Where(*it));
  }
  for (auto it = standby.begin(); it != standby.end() && have > target; ++it, --have) {
    const std::vector<TaskId> victims = StandbyAction::RestoreVictims(state_, *it);
    if (victims.empty() || options_.standby_grace_s == 0) {
      ExitStandbyNow(*it, now_s, true);
      continue;
    }
    Restore r;
    r.task = *it;
    r.at = now_s + options_.standby_grace_s;
    std::set<uint32_t> jobs;
    for (TaskId v : victims) jobs.insert(state_.task(v).job.value());
    for (uint32_t j : jobs) {
      const size_t vi = local_of_job_[j];
      for (TaskId v : state_.job(JobId(j)).tasks) {
        if (state_.task(v).state != TaskState::kBound || being_evicted_[v.value()]) continue;
        being_evicted_[v.value()] = 1;
        book_.EvictionsChanged();
        r.noticed.push_back(v);
        if (vi != SIZE_MAX) notices_.push_back({locals_[vi].fed, v, r.at});
      }
    }
    restoring_[it->value()] = 1;
    restores_.push_back(std::move(r));
    LogCarry(li);
  }
  return true;
}

bool Engine::AcknowledgeStandby(TaskId task, bool ok, const std::string& why) {
  Record(now_, AcknowledgeStandbyInput{task, ok, why});
  SweepStandbyEntries();
  const auto it = entering_.find(task);
  if (it == entering_.end()) return false;
  entering_.erase(it);
  const size_t li = local_of_job_[state_.task(task).job.value()];
  if (li == SIZE_MAX) return false;
  touched_.insert(locals_[li].fed);
  if (!ok) {
    refused_.emplace(task, state_.task(task).node);
    Log(EngineEvent::Kind::kStandbyRefused, now_, li, InStandbyOf(li), UINT32_MAX, 0, Where(task) + ": " + why);
    return true;
  }
  state_.EnterStandby(task);  // the sweep kept it: bound where it was chosen, active, whole GPUs
  ++standby_entries_;         // (its kStandby was logged when it was chosen)
  return true;
}

bool Engine::EnteringStandby(TaskId task) const { return entering_.count(task) > 0; }

void Engine::SweepStandbyEntries() {
  for (auto* entries : {&entering_, &refused_}) {
    for (auto it = entries->begin(); it != entries->end();) {
      const Task& t = state_.task(it->first);
      const bool kept = t.state == TaskState::kBound && t.node == it->second && state_.CanEnterStandby(it->first);
      it = kept ? std::next(it) : entries->erase(it);
    }
  }
}

int32_t Engine::Restoring(uint32_t job) const {
  const size_t li = LocalOf(job);
  if (li == SIZE_MAX || !locals_[li].running) return 0;
  int32_t n = 0;
  for (TaskId t : state_.job(locals_[li].id).tasks) n += state_.task(t).state == TaskState::kBound && restoring_[t.value()];
  return n;
}

int32_t Engine::InStandby(uint32_t job) const {
  const size_t li = LocalOf(job);
  if (li == SIZE_MAX || !locals_[li].running) return 0;
  int32_t n = 0;
  for (TaskId t : state_.job(locals_[li].id).tasks) {
    n += state_.task(t).state == TaskState::kBound && (state_.task(t).standby || entering_.count(t) > 0);
  }
  return n;
}

void Engine::EndRestores(int64_t now_s) {
  std::vector<Restore> due;
  std::erase_if(restores_, [&](Restore& r) {
    if (r.at > now_s) return false;
    due.push_back(std::move(r));
    return true;
  });
  for (const Restore& r : due) {
    for (TaskId v : r.noticed) being_evicted_[v.value()] = 0;
    if (!r.noticed.empty()) book_.EvictionsChanged();
    restoring_[r.task.value()] = 0;
    if (const size_t li = local_of_job_[state_.task(r.task).job.value()]; li != SIZE_MAX) LogCarry(li);
    // It left Standby meanwhile (its job ended, its node failed): nothing to restore.
    if (state_.task(r.task).state != TaskState::kBound || !state_.task(r.task).standby) continue;
    ExitStandbyNow(r.task, now_s, true);
  }
}

StatusOr<int64_t> Engine::Defrag(const DefragOptions& options, int64_t now_s) {
  Record(now_s, DefragInput{options});
  ESTUARY_RETURN_IF_ERROR(DefragAction::Validate(state_, options));
  if (migrations_.Busy()) return int64_t{0};
  const DefragPlan plan = DefragAction::Plan(state_, Locked(), options);
  const int64_t kept = migrations_.Submit(state_, plan);
  StepMigrations(now_s);
  return kept;
}

int64_t Engine::Evacuate(NodeId node, int64_t now_s) {
  Record(now_s, NodeInput{NodeInput::Op::kEvacuate, node});
  migrations_.NodeTaken(node);  // cordoned until restored, whatever a defragmentation under way does
  migrations_.GiveUpMovesOnto(node);  // emptied: no move lands there either
  if (state_.node(node).state == NodeState::kReady) state_.SetNodeState(node, NodeState::kCordoned);
  // A task a defragmentation under way moves already is not moved a second time.
  const int64_t kept = PlanEvacuation({node}, LockedOrMoving(), now_s);
  if (state_.node(node).state != NodeState::kDown && !state_.node(node).tasks.empty()) {
    evacuating_[node.value()] = {now_s + kEvacuateRetryS, state_.epoch()};
  }
  return kept;
}

int64_t Engine::PlanEvacuation(const std::vector<NodeId>& nodes, const std::vector<char>& locked, int64_t now_s) {
  DefragOptions o;
  o.evacuate = nodes;
  const int64_t kept = migrations_.Submit(state_, DefragAction::Plan(state_, locked, o));
  StepMigrations(now_s);
  return kept;
}

bool Engine::Evacuating(NodeId node) const { return evacuating_.count(node.value()) > 0; }

std::vector<char> Engine::LockedOrMoving() const {
  std::vector<char> locked = Locked();
  migrations_.MarkMoving(locked);
  return locked;
}

void Engine::ContinueEvacuations(int64_t now_s) {
  if (evacuating_.empty()) return;
  std::vector<char> locked;
  std::vector<NodeId> due;
  for (auto it = evacuating_.begin(); it != evacuating_.end();) {
    const Node& n = state_.node(NodeId(it->first));
    if (n.tasks.empty()) {  // evacuated: it stays cordoned
      it = evacuating_.erase(it);
      continue;
    }
    if (now_s >= it->second.retry_at && state_.epoch() != it->second.epoch) {
      if (locked.empty()) locked = LockedOrMoving();
      const bool movable = std::any_of(n.tasks.begin(), n.tasks.end(), [&](TaskId t) {
        return t.value() >= locked.size() || locked[t.value()] == 0;
      });
      if (movable) due.push_back(NodeId(it->first));
    }
    ++it;
  }
  if (due.empty()) return;
  (void)PlanEvacuation(due, locked, now_s);
  for (NodeId n : due) evacuating_[n.value()] = {now_s + kEvacuateRetryS, state_.epoch()};
}

void Engine::StepMigrations(int64_t now_s) {
  if (migrations_.Busy()) migrations_.Step(state_, now_s);
  LogMoves();
}

void Engine::LogMoves() {
  for (const MigrationExecutor::Event& e : migrations_.TakeEvents()) {
    const MigrationExecutor::Move& mv = migrations_.moves()[e.move];
    const size_t li = local_of_job_[state_.task(mv.plan.task).job.value()];
    if (li == SIZE_MAX) continue;
    touched_.insert(locals_[li].fed);
    const GpuIndices& g = mv.started_s >= 0 ? mv.gpus : mv.plan.gpus;
    std::string detail = state_.task(mv.plan.task).name + " " + state_.node(mv.plan.from).spec.name + "->" +
                         state_.node(mv.plan.to).spec.name + ":";
    for (size_t k = 0; k < g.size; ++k) detail += (k ? "," : "") + std::to_string(g.idx[k]);
    const EngineEvent::Kind kind = e.state == MoveState::kStarting    ? EngineEvent::Kind::kMoveStarted
                                   : e.state == MoveState::kCompleted ? EngineEvent::Kind::kMoved
                                   : e.state == MoveState::kAborted   ? EngineEvent::Kind::kMoveAborted
                                                                      : EngineEvent::Kind::kMoveCancelled;
    Log(kind, e.t, li, state_.job(locals_[li].id).bound_tasks, UINT32_MAX, 0, std::move(detail));
  }
}

void Engine::AbortMoves(int64_t now_s) {
  Record(now_s, AbortMovesInput{});
  migrations_.AbortAll(state_, now_s);
  LogMoves();
}

std::vector<char> Engine::Locked() const {
  std::vector<char> locked = being_evicted_;
  for (size_t i = 0; i < locked.size() && i < pinned_.size(); ++i) locked[i] |= pinned_[i];
  for (const auto& [t, node] : entering_) {  // held where they are, as Standby replicas are
    if (t.value() < locked.size()) locked[t.value()] = 1;
  }
  return locked;
}

void Engine::RenewHolds(int64_t now_s) {
  const EngineReserve& r = options_.reserve;
  if (next_replan_ <= 0 || now_s < next_replan_) return;
  while (next_replan_ <= now_s) next_replan_ += r.replan_s;
  // Hold nodes for the oldest large jobs that waited too long (queue order: requeued jobs first).
  std::vector<JobId> waiting;
  const auto sized = [&](int sh) {
    const ShapeInfo& i = shape_info_[static_cast<size_t>(sh)];
    return i.gpus >= r.min_gpus && i.gpus <= r.max_gpus;
  };
  std::vector<char> empty_only;  // per waiting job: not yet waited drain_after_s
  for (size_t li : queue_.InOrder(sized)) {
    const Local& l = locals_[li];
    if (l.reclaiming || now_s - l.submitted < r.after_s) continue;
    waiting.push_back(l.id);
    empty_only.push_back(r.drain_after_s > 0 && now_s - l.submitted < r.drain_after_s ? 1 : 0);
  }
  // Renew releases the waiting jobs' holds before it plans them anew: their nodes are noted as
  // released (RunCycle runs the cycle's actions again when one is left unheld with room).
  for (JobId w : waiting) {
    if (const ReservationId held = state_.job(w).reservation; held.valid()) {
      const std::vector<NodeId>& nodes = state_.reservation(held).nodes;
      released_.insert(released_.end(), nodes.begin(), nodes.end());
    }
  }
  const int made = ReserveAction::Renew(state_, waiting, static_cast<int>(r.max_jobs), options_.allocate, empty_only);
  for (JobId w : waiting) {
    const size_t li = local_of_job_[w.value()];
    if (state_.job(w).reservation.valid() && std::find(holders_.begin(), holders_.end(), li) == holders_.end()) {
      holders_.push_back(li);
    }
  }
  reservations_made_ += made;
  if (made > 0) TryQueue(now_s);
}

void EnableBackfill(const EngineBackfill& b, EngineConfig* e) {
  e->backfill = b;
  e->backfill.easy = true;
  if (std::find(e->actions.begin(), e->actions.end(), EngineAction::kBackfill) != e->actions.end()) return;
  const auto at = std::find(e->actions.begin(), e->actions.end(), EngineAction::kAllocate);
  e->actions.insert(at == e->actions.end() ? at : at + 1, EngineAction::kBackfill);
}

std::optional<PendingQueue::Outcome> Engine::NotPlannedFor(size_t li, int64_t now_s) const {
  if (locals_[li].reclaiming) return PendingQueue::Outcome::kStays;
  if (options_.backfill.conservative && state_.job(locals_[li].id).reservation.valid()) return PendingQueue::Outcome::kStays;
  // Its queue would not let it start on any nodes: no plan holds nodes for it (Slurm plans no job
  // its limits hold back).
  if (StartRoom(li, now_s) == 0) return PendingQueue::Outcome::kShapeWaits;
  return std::nullopt;
}

bool Engine::BackfillDue(int64_t now_s) {
  if (!options_.backfill.easy || now_s < next_backfill_ || queue_.empty()) return false;
  bool found = false;
  queue_.Pass(
      [&](size_t li) {
        if (found) return PendingQueue::Outcome::kWaits;
        if (const std::optional<PendingQueue::Outcome> no = NotPlannedFor(li, now_s)) return *no;
        found = true;
        return PendingQueue::Outcome::kWaits;
      },
      {});
  return found;
}

bool Engine::PlannedMovedOn() const {
  return options_.backfill.easy &&
         std::any_of(planned_.begin(), planned_.end(), [&](const Planned& p) { return !queue_.Contains(p.li); });
}

void Engine::Backfill(int64_t now_s) {
  if (!options_.backfill.easy) return;
  const bool moved_on = PlannedMovedOn();
  if (!moved_on && now_s < next_backfill_) return;
  // 1. The last round's holds go (those the reserve action or a Reclaim did not replace).
  for (const Planned& p : planned_) {
    const ReservationId r = state_.job(locals_[p.li].id).reservation;
    if (p.hold.valid() && r == p.hold) Release(r);
  }
  planned_.clear();
  // 2. The jobs planned for: the first waiting one (EASY), or the first `depth` in queue order
  //    that hold no reservation of their own (conservative). (The queue's pass looks at one job
  //    per shape once a job of it is not taken: O(shapes + depth), however long the queue.)
  using Outcome = PendingQueue::Outcome;
  const size_t depth = options_.backfill.conservative ? static_cast<size_t>(std::max(1, options_.backfill.depth)) : 1;
  std::vector<size_t> heads;
  queue_.Pass(
      [&](size_t li) {
        if (heads.size() >= depth) return Outcome::kWaits;
        if (const std::optional<Outcome> no = NotPlannedFor(li, now_s)) return *no;
        heads.push_back(li);
        return Outcome::kStays;
      },
      {});
  if (heads.empty()) return;  // nothing waits: the next job to wait is planned for at once
  next_backfill_ = now_s + options_.backfill.interval_s;
  if (unplanned_.size() < locals_.size()) unplanned_.resize(locals_.size(), -1);
  // 3. Each job's plan, in queue order, around the plans before it (conservative: each occupies
  //    its nodes from its start for its walltime — forever without one).
  std::vector<BackfillBlock> blocks;
  // (Conservative: the running work's ends sorted once for the round; nothing starts meanwhile.)
  std::optional<BackfillReleases> releases;
  if (options_.backfill.conservative) releases = BackfillReleases::Of(state_, now_s);
  for (size_t li : heads) {
    const JobId id = locals_[li].id;
    if (state_.job(id).reservation.valid()) continue;  // (EASY) other holds serve it
    // No time found for it, and no job with a walltime started since (EASY: the last head only).
    if (options_.backfill.conservative ? unplanned_[li] == walltime_starts_
                                       : unplanned_head_ == std::make_pair(li, walltime_starts_)) {
      continue;
    }
    const BackfillPlan plan =
        BackfillAction::Plan(state_, id, now_s, options_.allocate, blocks, releases ? &*releases : nullptr);
    const std::vector<NodeId> nodes = Unheld(plan.nodes);
    if (!plan.found || nodes.empty()) {
      unplanned_[li] = walltime_starts_;
      unplanned_head_ = {li, walltime_starts_};
      LogCarry(li);
      continue;
    }
    Planned p;
    p.li = li;
    p.start_s = plan.start_s;
    p.where = plan.domain.valid() ? state_.topology().domain(plan.domain).name
                                  : std::to_string(nodes.size()) + (nodes.size() == 1 ? " node" : " nodes");
    p.nodes = nodes;
    const int64_t walltime = state_.job(id).spec.walltime_s;
    for (NodeId n : nodes) {
      blocks.push_back({n, plan.start_s, walltime > 0 ? plan.start_s + walltime : INT64_MAX});
    }
    if (std::find(holders_.begin(), holders_.end(), li) == holders_.end()) holders_.push_back(li);
    planned_.push_back(std::move(p));
  }
  // 4. By planned start, earliest first: the jobs that end by it may start now on every node no
  //    earlier plan holds — tried, in queue order, before that start's nodes are held (a node
  //    is held for the earliest plan that needs it). A shape's jobs share their walltime
  //    (ShapeOf), so a shape that ends too late is skipped whole; a job that finds no room skips
  //    its class.
  std::vector<size_t> order(planned_.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return planned_[a].start_s < planned_[b].start_s; });
  std::vector<char> is_planned(locals_.size(), 0);
  for (const Planned& p : planned_) is_planned[p.li] = 1;
  for (size_t k = 0; k < order.size(); ++k) {
    Planned& p = planned_[order[k]];
    if (k == 0) {
      BackfillBefore(INT64_MIN, p.start_s, is_planned, now_s);
    } else if (planned_[order[k - 1]].start_s != p.start_s) {
      // The jobs ending by the previous start were tried with more room than is left now.
      BackfillBefore(planned_[order[k - 1]].start_s, p.start_s, is_planned, now_s);
    }
    const std::vector<NodeId> still = Unheld(p.nodes);
    if (!still.empty()) p.hold = state_.AddReservation(locals_[p.li].id, still);
  }
  // A plan none of whose nodes could be held is no plan (EASY: the head plans again next round).
  std::erase_if(planned_, [&](const Planned& p) { return !p.hold.valid() && !options_.backfill.conservative; });
  // A job planned to start now — on nodes another plan held when this cycle's allocate pass ran
  // (EASY: the last round's head, which started in it, or a Reclaim's) — starts now, on its own
  // hold: the cycle ends at a fixed point, as another cycle at the same time would start it. So
  // may one that takes lent GPUs (Standby) on the nodes it now holds: its plan's start counts
  // free capacity only.
  const bool due = std::any_of(planned_.begin(), planned_.end(), [&](const Planned& p) {
    if (!p.hold.valid()) return false;
    if (p.start_s <= now_s) return true;
    if (!MayBorrowLent(state_.job(locals_[p.li].id).spec)) return false;
    const std::vector<NodeId>& held = state_.reservation(p.hold).nodes;
    return std::any_of(held.begin(), held.end(), [&](NodeId n) { return state_.node(n).lent_free > 0; });
  });
  if (due) TryQueue(now_s);
}

void Engine::BackfillBefore(int64_t after_s, int64_t start_s, const std::vector<char>& is_planned, int64_t now_s) {
  using Outcome = PendingQueue::Outcome;
  queue_.Pass(
      [&](size_t li) {
        const Local& l = locals_[li];
        const JobSpec& spec = state_.job(l.id).spec;
        if (is_planned[li] || l.reclaiming || state_.job(l.id).reservation.valid()) return Outcome::kStays;
        if (spec.walltime_s <= 0 || now_s + spec.walltime_s > start_s || now_s + spec.walltime_s <= after_s) {
          return Outcome::kShapeWaits;
        }
        // Within its queue's widest bound, as the allocate pass's last.
        const int32_t cap = StartRoom(li, now_s);
        if (cap == 0) return Outcome::kShapeWaits;
        const JobAttempt a = TryStartUpTo(li, cap, now_s);
        if (a.started) {
          CountDemand(li, false);
          OnStart(li, now_s, a.granted);
          return Outcome::kStarted;
        }
        return a.kind == OutcomeKind::kInfeasible ? Outcome::kShapeWaits : Outcome::kWaits;
      },
      {});
}

void Engine::PlanDefrag(int64_t now_s) {
  const EngineDefrag& d = options_.defrag;
  if (!d.enabled) return;
  bool tick = false;
  if (next_defrag_ > 0 && now_s >= next_defrag_) {
    tick = true;
    while (next_defrag_ <= now_s) next_defrag_ += d.interval_s;
  }
  // tr's job looks again at `at`.
  const auto again = [&](const Trigger& tr, int64_t at) { ArmTrigger(tr.li, at, tr.queued_at); };
  // Jobs still waiting trigger_after_s after they were queued.
  std::vector<Trigger> due;
  while (!triggers_.empty() && triggers_.front().at <= now_s) {
    std::pop_heap(triggers_.begin(), triggers_.end(), std::greater<Trigger>());
    const Trigger tr = triggers_.back();
    triggers_.pop_back();
    const Local& l = locals_[tr.li];
    if (l.running || !queue_.Contains(tr.li) || l.queued_at != tr.queued_at) continue;
    due.push_back(tr);
    ArmTrigger(tr.li, -1, tr.queued_at);  // until it is armed again
  }
  if (migrations_.Busy()) {  // one plan at a time: what came due now is dropped (assemble: looks again)
    if (d.assemble) {
      for (const Trigger& tr : due) again(tr, now_s + d.trigger_cooldown_s);
    }
    return;
  }
  bool plan_now = tick;
  if (!plan_now && !due.empty()) {
    if (last_plan_ < 0 || now_s - last_plan_ >= d.trigger_cooldown_s) {
      plan_now = true;
      ++defrag_counters_.triggered;
    } else {  // within the cooldown: the waiting jobs look again when it ends
      for (const Trigger& tr : due) again(tr, last_plan_ + d.trigger_cooldown_s);
    }
  }
  if (!plan_now) return;
  if (d.assemble && !due.empty()) {
    // One assembled hold at a time: the job that holds it is planned for anew when it comes due
    // again; else the first job that came due. Every due job (it too) looks again a cooldown later.
    const bool live = assembled_ != SIZE_MAX && queue_.Contains(assembled_) &&
                      state_.job(locals_[assembled_].id).reservation.valid();
    if (!live) SetAssembled(SIZE_MAX);
    size_t chosen = SIZE_MAX;
    for (const Trigger& tr : due) {
      if (live ? tr.li == assembled_ : chosen == SIZE_MAX) chosen = tr.li;
      again(tr, now_s + d.trigger_cooldown_s);
    }
    if (chosen == SIZE_MAX) {
      if (!tick) --defrag_counters_.triggered;  // nothing planned
      return;
    }
    Assemble(chosen, now_s);
    return;
  }
  const int64_t t0 = options_.planning_clock != nullptr ? options_.planning_clock->ElapsedNs() : 0;
  const DefragPlan plan = DefragAction::Plan(state_, Locked(), d.plan);
  if (options_.planning_clock != nullptr) {
    const int64_t ns = options_.planning_clock->ElapsedNs() - t0;
    defrag_counters_.plan_ns_max = std::max(defrag_counters_.plan_ns_max, ns);
    defrag_counters_.plan_ns_sum += ns;
  }
  ++defrag_counters_.plans;
  last_plan_ = now_s;
  defrag_counters_.vacated_planned += static_cast<int64_t>(plan.vacated.size());
  if (plan.moves.empty()) return;
  migrations_.Submit(state_, plan);
  StepMigrations(now_s);
}

void Engine::Assemble(size_t li, int64_t now_s) {
  if (locals_[li].reclaiming) return;  // a Reclaim is making room for it already
  const JobId id = locals_[li].id;
  // Its own hold (survivors of a failure, an earlier plan) is planned anew with the rest.
  std::vector<NodeId> had;
  if (const ReservationId r = state_.job(id).reservation; r.valid()) {
    had = state_.reservation(r).nodes;
    Release(r);
  }
  std::vector<NodeId> nodes = ReserveAction::Plan(state_, id, options_.allocate);
  if (nodes.empty()) {  // nothing could ever hold it: what it held stays held
    if (!had.empty()) state_.AddReservation(id, had);
    return;
  }
  std::sort(nodes.begin(), nodes.end());
  DefragOptions o = options_.defrag.plan;
  o.objective = DefragOptions::Objective::kWholeFreeNodes;
  o.evacuate = nodes;
  const int64_t t0 = options_.planning_clock != nullptr ? options_.planning_clock->ElapsedNs() : 0;
  const DefragPlan plan = DefragAction::Plan(state_, Locked(), o);  // before the hold pins their tasks
  if (options_.planning_clock != nullptr) {
    const int64_t ns = options_.planning_clock->ElapsedNs() - t0;
    defrag_counters_.plan_ns_max = std::max(defrag_counters_.plan_ns_max, ns);
    defrag_counters_.plan_ns_sum += ns;
  }
  state_.AddReservation(id, nodes);
  if (std::find(holders_.begin(), holders_.end(), li) == holders_.end()) holders_.push_back(li);
  SetAssembled(li);
  ++defrag_counters_.plans;
  ++defrag_counters_.assembled;
  last_plan_ = now_s;
  defrag_counters_.vacated_planned += static_cast<int64_t>(plan.vacated.size());
  if (!plan.moves.empty()) {
    migrations_.Submit(state_, plan);
    StepMigrations(now_s);
  }
  TryQueue(now_s);  // it may fit at once (its old hold and the free nodes of the new one)
}

void Engine::SetAssembled(size_t li) {
  if (li == assembled_) return;
  if (assembled_ != SIZE_MAX) LogCarry(assembled_);
  if (li != SIZE_MAX) LogCarry(li);
  assembled_ = li;
}

std::vector<Engine::StartingMove> Engine::StartingMoves() const {
  std::vector<StartingMove> v;
  const std::vector<MigrationExecutor::Move>& moves = migrations_.moves();
  for (size_t i = migrations_.first_open(); i < moves.size(); ++i) {
    if (moves[i].state == MoveState::kStarting) v.push_back({moves[i].plan.task, moves[i].plan.to, moves[i].gpus, i});
  }
  return v;
}

std::vector<uint32_t> Engine::TakeTouched() {
  std::vector<uint32_t> v(touched_.begin(), touched_.end());
  touched_.clear();
  return v;
}

std::vector<uint32_t> Engine::QueuedInOrder() const {
  std::vector<uint32_t> v;
  for (size_t li : queue_.InOrder()) v.push_back(locals_[li].fed);
  return v;
}

bool Engine::Quiescent() const {
  if (!evictions_.empty() || !restores_.empty() || !entering_.empty() || migrations_.Busy()) return false;
  return std::none_of(locals_.begin(), locals_.end(), [](const Local& l) { return l.reclaiming; });
}

}  // namespace estuary
