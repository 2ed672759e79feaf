#include "sched/actions/allocate.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace estuary {

const char* VictimSelectionName(VictimSelection v) {
  switch (v) {
    case VictimSelection::kEstuary: return "estuary";
    case VictimSelection::kKube: return "k8s";
    case VictimSelection::kVolcano: return "volcano";
  }
  return "estuary";
}

std::optional<VictimSelection> VictimSelectionNamed(std::string_view name) {
  for (VictimSelection v : {VictimSelection::kEstuary, VictimSelection::kKube, VictimSelection::kVolcano}) {
    if (name == VictimSelectionName(v)) return v;
  }
  return std::nullopt;
}

JobAttempt AllocateAction::TryStart(Session& session, ClusterState& state, JobId job_id, const AllocateOptions& options) {
  const JobSpec& spec = state.job(job_id).spec;
  const int32_t step = options.align ? std::max<int32_t>(1, spec.step) : 1;
  if (options.topology && spec.topology.plane.valid()) {
    if (spec.topology.required_level >= 0) return TryStartInDomain(session, state, job_id, step, options);
    if (spec.topology.preferred_level >= 0) return TryStartSpanning(session, state, job_id, step, options);
  }
  if (std::optional<JobAttempt> no = CannotStartGang(state, job_id, step)) return *no;
  // Session::Decide skips held nodes; a holder looks at every node, its own held ones included
  // (PlaceSegments).
  return Place(session, state, job_id, nullptr, step, options);
}

namespace {
JobAttempt NothingPending(JobId job) {
  JobAttempt a;
  a.job = job;
  a.kind = OutcomeKind::kRetryable;
  a.reason = "no pending task";
  return a;
}
}  // namespace

// An upper bound of the replicas of `req` that `gpu_milli` of free GPU can hold (unbounded for
// CPU-only replicas).
int64_t UpperBound(int64_t gpu_milli, const TaskRequest& req) {
  if (!req.NeedsGpu()) return int64_t{1} << 40;
  return gpu_milli / req.TotalGpuMilli();
}

bool WholeGpus(const TaskRequest& req) { return req.NeedsGpu() && !req.IsSharedGpu(); }

std::optional<JobAttempt> AllocateAction::CannotStartGang(const ClusterState& state, JobId job_id, int32_t step) {
  const Job& job = state.job(job_id);
  if (job.spec.min_replicas <= 1) return std::nullopt;
  int64_t pending = 0;
  TaskRequest req;
  for (TaskId t : job.tasks) {
    if (state.task(t).state != TaskState::kPending) continue;
    if (pending++ == 0) req = state.task(t).req;
  }
  if (pending == 0 || !WholeGpus(req)) return std::nullopt;
  // Enough: the fewest placed replicas whose whole steps reach min_replicas.
  const int64_t enough = (int64_t{job.spec.min_replicas} + step - 1) / step * step;
  if (enough > std::min<int64_t>(pending, job.spec.max_replicas)) return std::nullopt;  // the slow path explains
  int64_t fit = 0, nodes = 0;
  for (int k = std::max(1, req.gpu_count); k <= kMaxGpusPerNode && fit < enough; ++k) {
    for (NodeId n : state.nodes_with_full_free(k)) {
      const int64_t r = ReplicasFitting(state, state.node(n), req, false, job_id);
      fit += r;
      nodes += r > 0;
      if (fit >= enough) break;
    }
  }
  if (fit >= enough) return std::nullopt;
  JobAttempt a;
  a.job = job_id;
  a.kind = OutcomeKind::kRetryable;
  // Infeasible when even the empty cluster (down and cordoned nodes included: they may come back)
  // could not hold enough; the count stops as soon as it could.
  int64_t ever = 0;
  for (const Node& n : state.nodes()) {
    if ((ever += ReplicasFitting(state, n, req, true)) >= enough) break;
  }
  std::string why = "nodes with room for one: " + std::to_string(nodes);
  if (ever < enough) {
    a.kind = OutcomeKind::kInfeasible;
    why = ever == 0 ? "no node could ever hold one" : "the whole cluster could hold only " + std::to_string(ever);
  }
  a.reason = std::to_string(fit) + "/" + std::to_string(job.spec.min_replicas) + " replicas fit at once; " + why;
  return a;
}


// Replicas of `req` (tasks of `job`) that fit now on the nodes of each domain of (plane, level),
// indexed like DomainsAt(plane, level), counted from the state's free-GPU index: only nodes with
// at least req.gpu_count wholly free GPUs can hold a whole-GPU replica. Returns nullopt — count by
// scanning domains instead — for other requests, or when the index holds more such nodes than the
// domains whose free GPU milli could hold `need` replicas (the scan visits only those).
std::optional<std::vector<int64_t>> FitNowByDomain(const ClusterState& state, const TaskRequest& req, JobId job,
                                                   PlaneId plane, int level, int64_t need) {
  if (!WholeGpus(req)) return std::nullopt;
  const Topology& topo = state.topology();
  const std::vector<DomainId>& domains = topo.DomainsAt(plane, level);
  size_t indexed = 0, scanned = 0;
  for (int k = std::max(1, req.gpu_count); k <= kMaxGpusPerNode; ++k) indexed += state.nodes_with_full_free(k).size();
  for (DomainId d : domains) {
    if (UpperBound(state.domain_free(d).gpu_free_milli, req) >= need) scanned += topo.domain(d).nodes.size();
  }
  if (indexed > scanned) return std::nullopt;
  std::vector<int32_t> pos(topo.domains().size(), -1);
  for (size_t i = 0; i < domains.size(); ++i) pos[domains[i].value()] = static_cast<int32_t>(i);
  std::vector<int64_t> fit(domains.size(), 0);
  for (int k = std::max(1, req.gpu_count); k <= kMaxGpusPerNode; ++k) {
    for (NodeId n : state.nodes_with_full_free(k)) {
      const DomainId d = topo.NodeDomain(n, plane, level);
      if (!d.valid() || pos[d.value()] < 0) continue;
      fit[pos[d.value()]] += AllocateAction::ReplicasFitting(state, state.node(n), req, false, job);
    }
  }
  return fit;
}

double GpuEntropy(std::span<const int64_t> gpus, int64_t total) {
  if (total <= 0) {
    for (int64_t g : gpus) total += g;
  }
  double h = 0;
  for (int64_t g : gpus) {
    if (g <= 0) continue;
    const double p = static_cast<double>(g) / static_cast<double>(total);
    h -= p * std::log(p);
  }
  return h;
}

JobAttempt AllocateAction::TryStartSpanning(Session& session, ClusterState& state, JobId job_id, int32_t step,
                                            const AllocateOptions& options) {
  const Job& job = state.job(job_id);
  const Topology& topo = state.topology();
  const TopologyConstraint& tc = job.spec.topology;
  int64_t pending = 0;
  TaskRequest req;
  for (TaskId t : job.tasks) {
    if (state.task(t).state != TaskState::kPending) continue;
    if (pending++ == 0) req = state.task(t).req;
  }
  if (pending == 0) return NothingPending(job_id);
  const std::vector<DomainId>& domains = topo.DomainsAt(tc.plane, tc.preferred_level);
  const int64_t need = std::max<int64_t>(job.spec.min_replicas, step);
  // Bounds from the domain aggregates first: when even they fall short, no node is visited.
  int64_t ub_now = 0, ub_ever = 0;
  for (DomainId d : domains) {
    ub_now = std::min<int64_t>(ub_now + UpperBound(state.domain_free(d).gpu_free_milli, req), int64_t{1} << 40);
    ub_ever = std::min<int64_t>(ub_ever + UpperBound(state.domain_free(d).gpu_milli, req), int64_t{1} << 40);
  }
  std::vector<int64_t> cap(domains.size(), 0);
  int64_t cap_now = ub_now, cap_ever = ub_ever;
  if (ub_now >= need) {
    cap_now = 0;
    if (auto fit = FitNowByDomain(state, req, job_id, tc.plane, tc.preferred_level, 1)) {
      cap = std::move(*fit);
      for (int64_t c : cap) cap_now += c;
    } else {
      for (size_t i = 0; i < domains.size(); ++i) {
        if (UpperBound(state.domain_free(domains[i]).gpu_free_milli, req) == 0) continue;
        for (NodeId n : topo.domain(domains[i]).nodes) cap[i] += ReplicasFitting(state, state.node(n), req, false, job_id);
        cap_now += cap[i];
      }
    }
  }
  if (cap_now < need && ub_ever >= need) {
    // Only whether the empty cluster could hold `need` matters: stop counting once it could.
    cap_ever = 0;
    for (size_t i = 0; i < domains.size() && cap_ever < need; ++i) {
      for (NodeId n : topo.domain(domains[i]).nodes) cap_ever += ReplicasFitting(state, state.node(n), req, true);
    }
  }
  if (std::min<int64_t>(cap_now, pending) / step * step < need) {
    JobAttempt a;
    a.job = job_id;
    a.kind = cap_ever < need ? OutcomeKind::kInfeasible : OutcomeKind::kRetryable;
    a.reason = "the nodes of the " + topo.plane(tc.plane).name + " plane hold " +
               std::to_string(cap_ever < need ? cap_ever : cap_now) + " of " + std::to_string(need) +
               " replicas" + (cap_ever < need ? " even when empty" : " now");
    return a;
  }
  const int64_t wanted = std::min<int64_t>(pending, job.spec.max_replicas);
  std::vector<Segment> segments = SpanSegments(topo, domains, cap, wanted);
  if (!job.resume_nodes.empty()) {
    // Resuming (Job::resume_nodes): the domains of its last run first, unless that spans more
    // domains than a start afresh (one that fits in a single fresh domain goes there).
    std::vector<char> resume(domains.size(), 0);
    std::vector<int32_t> pos(topo.domains().size(), -1);
    for (size_t i = 0; i < domains.size(); ++i) pos[domains[i].value()] = static_cast<int32_t>(i);
    for (NodeId n : job.resume_nodes) {
      const DomainId d = topo.NodeDomain(n, tc.plane, tc.preferred_level);
      if (d.valid() && pos[d.value()] >= 0) resume[static_cast<size_t>(pos[d.value()])] = 1;
    }
    std::vector<Segment> again = SpanSegments(topo, domains, cap, wanted, resume);
    if (again.size() <= segments.size()) segments = std::move(again);
  }
  return PlaceSegments(session, state, job_id, segments, step, options,
                       StartGrant(state, job_id));
}

std::vector<AllocateAction::Segment> AllocateAction::SpanSegments(const Topology& topo, const std::vector<DomainId>& domains,
                                                                  const std::vector<int64_t>& cap, int64_t wanted,
                                                                  const std::vector<char>& first) {
  // Alibaba's Alg. 2: repeatedly add the domain whose share of the remaining replicas, taken as
  // min(capacity, remaining), leaves the job's GPU entropy over domains lowest; ties go to the
  // domain left with less spare capacity, then to domain order. The shares are of the whole job:
  // a take above 1/e of it scores lower the bigger it is, one below the smaller it is (-p ln p
  // grows with p up to 1/e), so a job more than e domains' worth starts with its smallest takes.
  int64_t remaining = wanted;
  const int64_t job_total = remaining;
  std::vector<int64_t> taken;  // replicas per chosen domain (GPU shares are proportional)
  std::vector<Segment> segments;
  std::vector<bool> used(domains.size(), false);
  // The domains to resume in, the most replicas first.
  while (remaining > 0 && !first.empty()) {
    size_t best = domains.size();
    for (size_t i = 0; i < domains.size(); ++i) {
      if (!first[i] || used[i] || cap[i] == 0) continue;
      const int64_t take = std::min(cap[i], remaining);
      const int64_t best_take = best == domains.size() ? 0 : std::min(cap[best], remaining);
      if (best == domains.size() || take > best_take || (take == best_take && cap[i] - take < cap[best] - best_take)) best = i;
    }
    if (best == domains.size()) break;
    used[best] = true;
    const int64_t take = std::min(cap[best], remaining);
    taken.push_back(take);
    segments.push_back({&topo.domain(domains[best]).nodes, take});
    remaining -= take;
  }
  while (remaining > 0) {
    size_t best = domains.size();
    double best_h = 0;
    int64_t best_take = 0;
    for (size_t i = 0; i < domains.size(); ++i) {
      if (used[i] || cap[i] == 0) continue;
      const int64_t take = std::min(cap[i], remaining);
      taken.push_back(take);
      const double h = GpuEntropy(taken, job_total);
      taken.pop_back();
      const bool better = best == domains.size() || h < best_h - 1e-12 ||
                          (h < best_h + 1e-12 && cap[i] - take < cap[best] - best_take);
      if (better) {
        best = i;
        best_h = h;
        best_take = take;
      }
    }
    if (best == domains.size()) break;
    used[best] = true;
    taken.push_back(best_take);
    segments.push_back({&topo.domain(domains[best]).nodes, best_take});
    remaining -= best_take;
  }
  return segments;
}

int64_t AllocateAction::ReplicasFitting(const ClusterState& state, const Node& n, const TaskRequest& r, bool capacity,
                                        JobId job) {
  if (!capacity && !n.Schedulable()) return 0;
  if (!capacity && n.reservation.valid() && state.reservation(n.reservation).owner != job) return 0;
  constexpr int64_t kMany = int64_t{1} << 40;
  const MilliCpu cpu = capacity ? n.spec.cpu_milli : n.cpu_free;
  const MemMiB mem = capacity ? n.spec.mem_mib : n.mem_free;
  int64_t k = std::min(r.cpu_milli > 0 ? cpu / r.cpu_milli : kMany, r.mem_mib > 0 ? mem / r.mem_mib : kMany);
  if (r.NeedsGpu()) {
    if (!r.models.Admits(n.spec.model)) return 0;
    int64_t g = 0;
    if (r.IsSharedGpu()) {
      for (int i = 0; i < n.spec.gpu_count; ++i) g += (capacity ? kMilliPerGpu : n.gpu_free[i]) / r.gpu_milli;
    } else {
      g = (capacity ? n.spec.gpu_count : n.full_free_gpus) / r.gpu_count;
    }
    k = std::min(k, g);
  }
  return k;
}

JobAttempt AllocateAction::TryStartInDomain(Session& session, ClusterState& state, JobId job_id, int32_t step,
                                            const AllocateOptions& options) {
  const Job& job = state.job(job_id);
  const Topology& topo = state.topology();
  const TopologyConstraint& tc = job.spec.topology;
  const std::string& level_name = topo.plane(tc.plane).levels[tc.required_level];
  int64_t pending = 0;
  TaskRequest req;
  for (TaskId t : job.tasks) {
    if (state.task(t).state != TaskState::kPending) continue;
    if (pending++ == 0) req = state.task(t).req;
  }
  if (pending == 0) return NothingPending(job_id);
  const int64_t wanted = std::min<int64_t>(pending, job.spec.max_replicas);
  const int64_t need = std::max<int64_t>(job.spec.min_replicas, step);
  struct Candidate {
    int64_t granted;
    int64_t spare;
    uint32_t domain;
  };
  std::vector<Candidate> candidates;
  // Domains whose free GPU milli cannot hold `need` replicas are pruned without visiting their
  // nodes (the aggregates are an upper bound); counts reported for them are such bounds.
  int64_t best_now = 0, best_ever = 0;
  bool now_bounded = false, ever_bounded = false, feasible = false;
  const std::vector<DomainId>& domains = topo.DomainsAt(tc.plane, tc.required_level);
  const std::optional<std::vector<int64_t>> fit = FitNowByDomain(state, req, job_id, tc.plane, tc.required_level, need);
  const bool counted = fit.has_value();  // exact counts of every domain, no pruning needed
  for (size_t i = 0; i < domains.size(); ++i) {
    const DomainId d = domains[i];
    const DomainFree& f = state.domain_free(d);
    const int64_t ub_now = UpperBound(f.gpu_free_milli, req), ub_ever = UpperBound(f.gpu_milli, req);
    if (!feasible) {
      if (ub_ever < need) {
        if (ub_ever > best_ever) best_ever = ub_ever, ever_bounded = true;
      } else {
        int64_t ever = 0;
        for (NodeId n : topo.domain(d).nodes) ever += ReplicasFitting(state, state.node(n), req, true);
        if (ever > best_ever) best_ever = ever, ever_bounded = false;
        feasible = ever >= need;
      }
    }
    int64_t now = 0;
    if (counted) {
      now = (*fit)[i];
    } else {
      if (ub_now < need) {
        if (ub_now > best_now) best_now = ub_now, now_bounded = true;
        continue;
      }
      for (NodeId n : topo.domain(d).nodes) now += ReplicasFitting(state, state.node(n), req, false, job_id);
    }
    if (now > best_now || (now == best_now && now_bounded)) best_now = now, now_bounded = false;
    const int64_t granted = std::min(now, wanted) / step * step;
    if (granted >= need) {
      candidates.push_back({granted, f.gpu_free_milli - granted * req.TotalGpuMilli(), d.value()});
    }
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) {
              if (a.granted != b.granted) return a.granted > b.granted;  // an elastic job grows most
              return a.spare != b.spare ? a.spare < b.spare : a.domain < b.domain;
            });
  for (const Candidate& c : candidates) {
    if (tc.preferred_level > tc.required_level) {
      JobAttempt a = TrySpanningWithin(session, state, job_id, DomainId(c.domain), req, need, wanted, step, options);
      if (a.started) return a;
    }
    JobAttempt a = Place(session, state, job_id, &topo.domain(DomainId(c.domain)).nodes, step, options);
    if (a.started) return a;
  }
  JobAttempt a;
  a.job = job_id;
  a.kind = feasible ? OutcomeKind::kRetryable : OutcomeKind::kInfeasible;
  const bool bounded = feasible ? now_bounded : ever_bounded;
  a.reason = (feasible ? "no " + level_name + " has room for " : "no " + level_name + " could ever hold ") +
             std::to_string(need) + " replicas (the best holds " + (bounded ? "at most " : "") +
             std::to_string(feasible ? best_now : best_ever) + (feasible ? " now)" : " when empty)");
  return a;
}

JobAttempt AllocateAction::TrySpanningWithin(Session& session, ClusterState& state, JobId job_id, DomainId within,
                                             const TaskRequest& req, int64_t need, int64_t wanted, int32_t step,
                                             const AllocateOptions& options) {
  const Topology& topo = state.topology();
  const TopologyConstraint& tc = state.job(job_id).spec.topology;
  // The preferred level's domains inside `within`, in domain order, and what each holds now.
  std::vector<DomainId> parts;
  std::vector<int64_t> cap;
  int64_t total = 0;
  for (DomainId d : topo.DomainsAt(tc.plane, tc.preferred_level)) {
    DomainId up = d;
    while (up.valid() && topo.domain(up).level > tc.required_level) up = topo.domain(up).parent;
    if (up != within) continue;
    int64_t fit = 0;
    if (UpperBound(state.domain_free(d).gpu_free_milli, req) > 0) {
      for (NodeId n : topo.domain(d).nodes) fit += ReplicasFitting(state, state.node(n), req, false, job_id);
    }
    parts.push_back(d);
    cap.push_back(fit);
    total += fit;
  }
  if (std::min(total, wanted) / step * step < need) {
    JobAttempt a;
    a.job = job_id;
    a.kind = OutcomeKind::kRetryable;
    a.reason = "its preferred domains hold " + std::to_string(total) + " replicas now";
    return a;
  }
  return PlaceSegments(session, state, job_id, SpanSegments(topo, parts, cap, wanted), step, options,
                       StartGrant(state, job_id));
}

AllocateAction::Grant AllocateAction::StartGrant(const ClusterState& state, JobId job_id) {
  const JobSpec& spec = state.job(job_id).spec;
  return Grant{std::max<int64_t>(1, spec.min_replicas), spec.max_replicas, true};
}

JobAttempt AllocateAction::Place(Session& session, ClusterState& state, JobId job_id,
                                 const std::vector<NodeId>* candidates, int32_t step, const AllocateOptions& options) {
  return PlaceSegments(session, state, job_id, {{candidates, state.job(job_id).spec.max_replicas}}, step, options,
                       StartGrant(state, job_id));
}

Outcome AllocateAction::Pack(Session& session, const ClusterState& state, TaskId task, Outcome o,
                             const AllocateOptions& options) {
  const Node& chosen = state.node(o.node);
  if (chosen.spec.gpu_count == 0 || state.task(task).req.gpu_count != chosen.spec.gpu_count ||
      state.task(task).req.IsSharedGpu()) {
    return o;  // not a whole-node replica
  }
  const Topology& topo = state.topology();
  const DomainId own = topo.NodeDomain(o.node, options.pack_plane, options.pack_level);
  std::vector<std::pair<int64_t, uint32_t>> order;  // (free GPU milli, domain)
  for (DomainId d : topo.DomainsAt(options.pack_plane, options.pack_level)) {
    const DomainFree& f = state.domain_free(d);
    if (f.free_nodes > 0) order.push_back({f.gpu_free_milli, d.value()});
  }
  const size_t tries = std::min<size_t>(order.size(), AllocateOptions::kPackTries);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(tries), order.end());
  for (size_t i = 0; i < tries; ++i) {
    const DomainId d(order[i].second);
    if (d == own) return o;  // the Session's node already sits in the most used such domain
    Outcome p = session.DecideAmong(task, topo.domain(d).nodes);
    if (p.placed()) return p;
  }
  return o;
}

JobAttempt AllocateAction::PlaceSegments(Session& session, ClusterState& state, JobId job_id,
                                         const std::vector<Segment>& segments, int32_t step,
                                         const AllocateOptions& options, const Grant& grant) {
  const Job& job = state.job(job_id);
  JobAttempt a;
  a.job = job_id;
  Statement st(state);
  std::vector<size_t> checkpoints;  // checkpoints[i] = log position before the i-th bind
  Outcome failed;
  bool any_failed = false;
  size_t seg = 0;
  int64_t in_seg = 0;
  // Starting, a job holding a reservation looks at every node, its own held ones included, and
  // is not packed.
  const bool holder = grant.start && job.reservation.valid();
  for (TaskId t : job.tasks) {
    if (state.task(t).state != TaskState::kPending) continue;
    if (static_cast<int64_t>(checkpoints.size()) >= grant.max) break;
    while (seg < segments.size() && in_seg >= segments[seg].count) {
      ++seg;
      in_seg = 0;
    }
    if (seg == segments.size()) break;
    const std::vector<NodeId>* candidates = segments[seg].nodes;
    Outcome o = candidates ? session.DecideAmong(t, *candidates) : holder ? session.DecideHolding(t) : session.Decide(t);
    if (candidates == nullptr && !holder && o.placed() && options.pack_level >= 0) o = Pack(session, state, t, std::move(o), options);
    if (!o.placed() && candidates != nullptr && segments[seg].spill) {
      o = job.reservation.valid() ? session.DecideHolding(t) : session.Decide(t);
    }
    if (!o.placed()) {
      failed = std::move(o);
      any_failed = true;
      break;
    }
    checkpoints.push_back(st.Checkpoint());
    st.Bind(t, o.node, o.gpus);
    ++in_seg;
  }
  const int32_t placed = static_cast<int32_t>(checkpoints.size());
  const int32_t granted = placed / step * step;
  if (granted < grant.min) {
    st.RollbackAll();
    a.kind = any_failed ? failed.kind : OutcomeKind::kRetryable;
    a.reason = any_failed ? failed.reason : "no pending task";
    if (grant.start && job.spec.min_replicas > 1) {
      a.reason = std::to_string(placed) + "/" + std::to_string(job.spec.min_replicas) +
                 " replicas fit at once; " + a.reason;
    }
    return a;
  }
  if (granted < placed) st.Rollback(checkpoints[granted]);
  st.Commit();
  if (grant.start && job.reservation.valid()) state.ReleaseReservation(job.reservation);
  a.started = true;
  a.granted = granted;
  return a;
}

namespace {
// Whether `want` replicas of `req` (tasks of `job`; nullopt: of any job, each node held by a
// reservation counted as its owner's) might fit now: a necessary condition only, from the
// free-GPU index for whole-GPU replicas (each node counted on its own, as ReplicasFitting does;
// stops as soon as `want` fit), else from the cluster's free totals.
bool MightFit(const ClusterState& state, const TaskRequest& req, std::optional<JobId> job, int64_t want) {
  if (WholeGpus(req)) {
    int64_t fit = 0;
    for (int k = std::max(1, req.gpu_count); k <= kMaxGpusPerNode; ++k) {
      for (NodeId id : state.nodes_with_full_free(k)) {
        const Node& n = state.node(id);
        const JobId owner = job                    ? *job
                            : n.reservation.valid() ? state.reservation(n.reservation).owner
                                                    : JobId();
        if ((fit += AllocateAction::ReplicasFitting(state, n, req, false, owner)) >= want) return true;
      }
    }
    return false;
  }
  if (req.NeedsGpu()) return UpperBound(state.total_gpu_milli() - state.allocated_gpu_milli(), req) >= want;
  if (req.cpu_milli > 0) return (state.total_cpu_milli() - state.allocated_cpu_milli()) / req.cpu_milli >= want;
  return true;
}
}  // namespace

bool AllocateAction::AnyMightGrow(const ClusterState& state, const TaskRequest& req, int32_t step) {
  return MightFit(state, req, std::nullopt, step);
}

int32_t AllocateAction::TryGrow(Session& session, ClusterState& state, JobId job_id, const AllocateOptions& options,
                                int32_t max_new) {
  const Job& job = state.job(job_id);
  const JobSpec& spec = job.spec;
  const Topology& topo = state.topology();
  const int32_t step = options.align ? std::max<int32_t>(1, spec.step) : 1;
  int64_t bound = 0, pending = 0;
  TaskRequest req;
  for (TaskId t : job.tasks) {
    const Task& task = state.task(t);
    if (task.state == TaskState::kBound) ++bound;
    if (task.state == TaskState::kPending && pending++ == 0) req = task.req;
  }
  if (bound == 0 || bound < spec.min_replicas) return 0;  // not running
  const int64_t limit = std::min({int64_t{spec.max_replicas} - bound, int64_t{max_new}, pending}) / step * step;
  if (limit <= 0 || !MightFit(state, req, job_id, step)) return 0;

  std::vector<NodeId> all;        // every node, for a reservation holder placed anywhere
  std::vector<NodeId> preferred;  // the nodes of the preferred-level domains the job uses
  Segment segment{nullptr, limit};
  const TopologyConstraint& tc = spec.topology;
  if (options.topology && tc.plane.valid() && tc.required_level >= 0) {
    DomainId home;
    for (TaskId t : job.tasks) {
      if (state.task(t).state != TaskState::kBound) continue;
      const DomainId d = topo.NodeDomain(state.task(t).node, tc.plane, tc.required_level);
      if (!d.valid() || (home.valid() && d != home)) return 0;  // no single domain to grow in
      home = d;
    }
    if (UpperBound(state.domain_free(home).gpu_free_milli, req) < step) return 0;
    segment.nodes = &topo.domain(home).nodes;
  } else if (options.topology && tc.plane.valid() && tc.preferred_level >= 0) {
    std::vector<uint32_t> used;
    for (TaskId t : job.tasks) {
      if (state.task(t).state != TaskState::kBound) continue;
      const DomainId d = topo.NodeDomain(state.task(t).node, tc.plane, tc.preferred_level);
      if (d.valid()) used.push_back(d.value());
    }
    std::sort(used.begin(), used.end());
    used.erase(std::unique(used.begin(), used.end()), used.end());
    for (uint32_t d : used) {
      const std::vector<NodeId>& nodes = topo.domain(DomainId(d)).nodes;
      preferred.insert(preferred.end(), nodes.begin(), nodes.end());
    }
    segment.nodes = &preferred;
    segment.spill = true;
  } else if (job.reservation.valid()) {
    // Session::Decide skips held nodes; a holder looks at every node, its own held ones included.
    all.resize(state.num_nodes());
    for (uint32_t i = 0; i < all.size(); ++i) all[i] = NodeId(i);
    segment.nodes = &all;
  }
  const JobAttempt a = PlaceSegments(session, state, job_id, {segment}, step, options, Grant{1, limit, false});
  return a.started ? a.granted : 0;
}

std::vector<JobAttempt> AllocateAction::Run(Session& session, ClusterState& state, std::span<const JobId> queue) {
  std::vector<JobAttempt> out;
  out.reserve(queue.size());
  for (JobId j : queue) out.push_back(TryStart(session, state, j));
  return out;
}

}  // namespace estuary
