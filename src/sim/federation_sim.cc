#include "sim/federation_sim.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <tuple>

#include "common/rng.h"
#include "federation/fed_scheduler.h"
#include "federation/in_process_member.h"
#include "sim/job_stream.h"
#include "sim/metrics.h"
#include "sim/simulate.h"
#include "sim/work_model.h"

namespace estuary {
namespace {


// A job of the federation; its current run's work and GPU time: RunWork (work_model.h; GPU time
// counts inside [warmup_s, duration_s) only).
struct FJob : RunWork {
  JobTemplate tmpl;
  FedJob fed;
  int home = 0;
  std::vector<int> allowed;  // empty: every member
  SimTime submit = 0, duration = 0;
  SimTime first_start = -1, finish = -1;
  int member = -1;  // the member it runs on (-1: none)
  bool finished = false;
  bool timed_out = false;  // its member's engine stopped its last run at its walltime (walltime_s)
  int64_t bound = 0;  // replicas it held when last looked at (start, grow, shrink): what an eviction frees
  uint64_t gen = 0;
  bool restarted = false;
  // Needless-preemption accounting of the Reclaims made for this job.
  bool reclaim_needless = false;  // another member could have started it on idle capacity
  int reclaim_member = -1;
  int64_t pending_victims = 0;    // victims evicted for it, needless if it next starts elsewhere
};

std::string MetricName(const std::string& member) {
  std::string out;
  for (char c : member) out += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : '_';
  return out;
}

FedJob ToFedJob(const JobTemplate& t, uint32_t id) {
  FedJob f = EngineJobOf(t, id);
  f.per_replica.models = GpuModelSet();
  return f;
}

}  // namespace

namespace {

// One federation run (a configuration and a seed): the members' engines, the federation's
// scheduler and the world around them — arrivals, the work model's job ends, wake-ups at the
// members' and the federation's due times — and the measurements. Its fields are the run's state;
// its methods the steps RunFederation takes in order (Prepare, Run, Finish).
struct FederationRun {
  FederationRun(const Scenario& sc, const std::vector<ClusterState>& clusters, const ClusterState* merged,
                const SchedulerConfig& config, uint64_t seed, bool check_invariants, bool record_events,
                FederationMeter* meter)
      : sc(sc), clusters(clusters), merged(merged), config(config), seed(seed), check_invariants(check_invariants),
        record_events(record_events), meter(meter), fs(sc.federation), regions(sc.federation.members.size()),
        is_merged(config.federation == "merged"), warmup(sc.warmup_s) {}

  // The workload, the members and the federation's scheduler. Errors: a member that cannot be made.
  Status Prepare();
  // The events up to the scenario's duration. Errors: a broken invariant (check_invariants).
  Status Run();
  // The metrics over [warmup_s, duration_s) and the job records.
  SimulateResult Finish();

  // Makes the member of `cluster` (its headrooms `headroom`).
  Status MakeMember(const ClusterState& cluster, const std::string& name, size_t index, int line,
                    const std::vector<FederationMember::Headroom>& headroom);
  void Log(SimTime t, size_t i, const char* kind, int64_t replicas, std::string detail = {});
  // The work model: progress up to t; after a job's replicas changed, its rate and end event.
  void Progress(FJob& j, SimTime t);
  void Reschedule(size_t i, SimTime t);
  // Goodput accounting (goodput_gpu_hours): Account counts j's allocated GPU time up to t at its
  // current allocation, and the snapshot at each periodic checkpoint passed; CloseRun ends its
  // current run at t — the GPU time up to its last checkpoint, periodic or on notice (all of it
  // when it finished), counts as goodput, except its restart period (restart_gpu_hours); the rest
  // is lost to the eviction (eviction_lost_gpu_hours) or not kept (unkept_gpu_hours: still going
  // at the end, or stopped at its walltime) — and returns the checkpoint kept. Replicas beyond the
  // last whole usable step are unusable_gpu_hours. Only GPU time inside [warmup_s, duration_s)
  // counts; the five parts sum to run_gpu_hours.
  void Account(FJob& j, SimTime t);
  KeptCheckpoint CloseRun(FJob& j, SimTime t, RunEnd end);
  // Checkpoint on notice: the members' eviction notices since the last call, taken at t (a victim
  // with checkpoint_on_notice_s starts its checkpoint of the state at t: RunWork::Notice).
  void TakeNotices(SimTime t);
  // A victim was evicted for job `for_job` on member m.
  void Victim(uint32_t for_job, int m);
  // The members' events at t: starts, growth, shrinks, evictions and rejections, Reclaims.
  void HandleEvents(SimTime t);
  // Whether member m's event `e` is a move (logged when it is a job's; see the definition).
  bool LoggedMove(SimTime t, size_t m, const MemberEvent& e);
  // With `defrag`: the members' defragmentation metrics, summed over them.
  void MemberDefragMetrics(std::map<std::string, double>& mt) const;
  void TakeDispatches();
  void SampleUntil(SimTime t);
  struct Counters {
    int64_t evictions = 0, headroom_evictions = 0, needless = 0, reclaims = 0, cancelled = 0, dispatches = 0,
            rejections = 0, retries = 0;
    double lost_gpu_hours = 0;
  };
  Counters Count() const;

  const Scenario& sc;
  const std::vector<ClusterState>& clusters;
  const ClusterState* merged;
  const SchedulerConfig& config;
  uint64_t seed;
  bool check_invariants, record_events;
  FederationMeter* meter;
  SteadyStopwatch planning_clock;  // times the members' defragmentation plans (nothing depends on it)
  const FederationSpec& fs;
  const size_t regions;
  const bool is_merged;
  const SimTime warmup;
  SimulateResult res;
  std::vector<FJob> jobs;
  std::map<std::string, int> member_index;
  SummaryOptions summary;
  std::vector<std::unique_ptr<InProcessMember>> members;
  std::vector<std::vector<int>> region_of;  // per member, per node: the region it stands for
  std::unique_ptr<FedScheduler> fed_;
  FedScheduler& fed() { return *fed_; }
  const FedScheduler& fed() const { return *fed_; }
  // Events: (time, kind, job, gen). Kinds: end, arrival, wake (a member's or a backoff's due time).
  enum Kind : int { kEnd = 0, kArrival = 1, kWake = 2 };
  using Ev = std::tuple<SimTime, int, size_t, uint64_t>;
  std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> events;
  std::set<SimTime> wakes;
  int64_t evictions = 0, needless = 0, reclaims = 0, late_rejections = 0, dispatches = 0, headroom_evictions = 0;
  double lost_gpu_hours = 0;
  // Goodput accounting, GPU milli x seconds inside [warmup, duration): all runs, and their goodput.
  WorkTotals work;
  // Samples.
  size_t nm = 0;
  double alloc_area = 0, hp_sum = 0, all_sum = 0, imbalance_sum = 0;
  std::vector<double> region_sum;
  int64_t samples = 0;
  SimTime last_t = 0, next_sample = 0;
  double capacity = 1;
  // The event counters as the warm-up ends (at the first event time >= warmup), subtracted from
  // their totals.
  std::optional<Counters> at_warmup;
};

Status FederationRun::Prepare() {
  res.configuration = config.name;
  res.seed = seed;
  if (is_merged && merged == nullptr) return Internal("a merged configuration needs the merged cluster");
  if (!sc.job_actions.empty()) {
    return InvalidArgument(sc.path + ": events: cancel_job and resize_job are not supported in a federation scenario");
  }
  if (sc.warmup_s < 0 || sc.warmup_s >= sc.duration_s) {
    return InvalidArgument(sc.path + ": warmup_s " + std::to_string(sc.warmup_s) + " is not in [0, duration_s)");
  }
  // The workload: listed jobs, then the generated stream (home drawn by arrivals_share; diurnal
  // classes thinned by the curve at the home member's local time).
  for (size_t m = 0; m < regions; ++m) member_index[fs.members[m].name] = static_cast<int>(m);
  for (const JobTemplate& t : sc.jobs) {
    FJob j;
    j.tmpl = t;
    j.submit = t.submit_s;
    j.duration = t.duration_s;
    j.home = t.home.empty() ? 0 : member_index.at(t.home);
    jobs.push_back(std::move(j));
  }
  Rng rng(seed);
  if (sc.stream.arrivals_per_hour > 0) {
    std::vector<double> shares, homes;
    for (const GeneratedClass& g : sc.stream.classes) shares.push_back(g.share);
    for (const FederationMember& m : fs.members) homes.push_back(m.arrivals_share);
    const double rate = sc.stream.arrivals_per_hour / 3600.0;
    double t = 0;
    for (int64_t k = 0;; ++k) {
      t += PoissonGap(rng, rate);
      if (t >= static_cast<double>(sc.duration_s)) break;
      const size_t c = WeightedPick(rng, shares);
      const size_t home = WeightedPick(rng, homes);
      const int64_t demand = TidalDemandPermille(sc.tidal, fs.members[home].start_hour, static_cast<SimTime>(t));
      if (sc.stream.classes[c].diurnal && rng.UniformDouble() * 1000.0 >= static_cast<double>(demand)) continue;
      if (!sc.stream.classes[c].InBurst(static_cast<SimTime>(t))) continue;  // outside its bursts
      FJob j;
      j.tmpl = sc.stream.classes[c].job;
      j.tmpl.name += "-" + std::to_string(k);
      j.submit = static_cast<SimTime>(t);
      j.home = static_cast<int>(home);
      j.duration = ExpDuration(rng, static_cast<double>(sc.stream.classes[c].job.duration_s));
      jobs.push_back(std::move(j));
    }
  }
  // Reclaim thresholds: the workload's distinct positive priorities.
  std::set<int32_t> priorities;
  for (size_t i = 0; i < jobs.size(); ++i) {
    FJob& j = jobs[i];
    j.fed = ToFedJob(j.tmpl, static_cast<uint32_t>(i));
    if (j.tmpl.home_only && !is_merged) j.allowed = {j.home};
    if (j.tmpl.priority > 0) priorities.insert(j.tmpl.priority);
  }
  for (int32_t p : priorities) {
    if (summary.thresholds.size() < SummaryOptions::kMaxThresholds) summary.thresholds.push_back(p);
  }

  // The members: one per cluster, or one of all nodes (merged).
  if (is_merged) {
    std::vector<FederationMember::Headroom> all;
    for (const FederationMember& fm : fs.members) all.insert(all.end(), fm.headroom.begin(), fm.headroom.end());
    ESTUARY_RETURN_IF_ERROR(MakeMember(*merged, "merged", 0, fs.line, all));
    std::vector<int> r;
    for (const Node& n : merged->nodes()) {
      const std::string prefix = n.spec.name.substr(0, n.spec.name.find('/'));
      const auto it = member_index.find(prefix);
      r.push_back(it == member_index.end() ? 0 : it->second);
    }
    region_of.push_back(std::move(r));
  } else {
    for (size_t m = 0; m < regions; ++m) {
      ESTUARY_RETURN_IF_ERROR(MakeMember(clusters[m], fs.members[m].name, m, fs.members[m].line, fs.members[m].headroom));
      region_of.emplace_back(clusters[m].num_nodes(), static_cast<int>(m));
    }
  }
  std::vector<Member*> member_ptrs;
  for (auto& m : members) member_ptrs.push_back(m.get());
  FedOptions fo;
  fo.mode = config.federation == "blind"       ? FedOptions::Mode::kBlind
            : config.federation == "idle-only" ? FedOptions::Mode::kIdleOnly
                                               : FedOptions::Mode::kReclaimAware;
  fo.least_loaded = config.blind_least_loaded;
  fo.spread = fs.spread;
  fo.backoff_s = fs.retry_backoff_s;
  fo.backoff_max_s = fs.retry_backoff_max_s;
  fed_ = std::make_unique<FedScheduler>(member_ptrs, fo);
  // As a member decides a Reclaim for job J, the other members J may use are checked exactly:
  // could one have started J on idle capacity right then?
  for (size_t m = 0; m < members.size(); ++m) {
    members[m]->engine().SetReclaimObserver([&, m](uint32_t job, int64_t now) {
      FJob& j = jobs[job];
      j.reclaim_needless = false;
      for (size_t m2 = 0; m2 < members.size() && !j.reclaim_needless; ++m2) {
        if (m2 == m) continue;
        if (!j.allowed.empty() && std::find(j.allowed.begin(), j.allowed.end(), static_cast<int>(m2)) == j.allowed.end()) continue;
        j.reclaim_needless = members[m2]->engine().FitsIdleNow(j.fed, now);
      }
    });
  }

  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].submit < sc.duration_s) events.push({jobs[i].submit, kArrival, i, 0});
  }

  nm = members.size();
  region_sum.assign(regions, 0.0);
  int64_t total_gpu_milli = 0;
  for (const auto& m : members) total_gpu_milli += m->state().total_gpu_milli();
  capacity = static_cast<double>(std::max<int64_t>(1, total_gpu_milli));
  return Status::Ok();
}

Status FederationRun::MakeMember(const ClusterState& cluster, const std::string& name, size_t index, int line,
                                 const std::vector<FederationMember::Headroom>& headroom) {
  MemberOptions mo;
  for (const FederationMember::Headroom& h : headroom) {
    FedJob j;
    j.max_replicas = h.replicas;
    j.per_replica.gpu_count = h.gpus;
    j.per_replica.gpu_milli = kMilliPerGpu;
    j.models = h.models;
    j.plane = h.plane;
    j.required_level = h.level;
    mo.headroom.push_back({std::move(j), h.min_job_gpus});
  }
  mo.name = name;
  mo.policy = config.policy;
  mo.seed = seed ^ (0x6d656d626572ULL * (index + 1));
  ApplyPlacementAndReclaim(config, mo);
  mo.priority_queue = config.priority_queue;  // true: a federation's configurations queue by priority
  if (!config.preempt) std::erase(mo.actions, EngineAction::kReclaim);  // members never reclaim then
  mo.absorb = config.absorb;
  // The configuration's defragmentation, each member on its own nodes (the moves' randomness
  // from the member's seed).
  ESTUARY_RETURN_IF_ERROR(ApplyDefrag(sc, cluster, config, mo.seed, &planning_clock, &mo));
  mo.summary = summary;
  mo.summary_period_s = fs.summary_period_s;
  mo.headroom_retry_s = fs.headroom_retry_s;
  mo.headroom_max_loss_s = fs.headroom_max_loss_s;
  if (meter != nullptr) mo.stopwatch = meter->stopwatch;
  auto m = InProcessMember::Create(cluster, mo);
  if (!m.ok()) {
    return InvalidArgument(sc.path + ":" + std::to_string(line) + ": federation: member '" + name + "': " + m.status().message());
  }
  members.push_back(std::move(*m));
  return Status::Ok();
}

void FederationRun::Log(SimTime t, size_t i, const char* kind, int64_t replicas, std::string detail) {
  if (record_events) res.job_events.push_back({t, jobs[i].tmpl.name, kind, static_cast<int32_t>(replicas), std::move(detail)});
}

void FederationRun::Progress(FJob& j, SimTime t) { j.RunWork::Progress(t, j.tmpl.checkpoint_interval_s); }

void FederationRun::Reschedule(size_t i, SimTime t) {
  FJob& j = jobs[i];
  if (j.started_at < 0) return;
  Progress(j, t);
  Account(j, t);  // at the allocation it had until now
  const int64_t bound = members[static_cast<size_t>(j.member)]->Running(j.fed.id);
  j.bound = bound;
  const int64_t usable = j.tmpl.usable_step > 0 ? j.tmpl.usable_step : std::max<int32_t>(1, j.tmpl.step);
  j.alloc_milli = bound / usable * usable * j.tmpl.per_replica.TotalGpuMilli();
  j.unusable_milli = bound % usable * j.tmpl.per_replica.TotalGpuMilli();
  const int64_t rate = j.tmpl.linear_scaling ? bound / usable * usable : (bound > 0 ? j.tmpl.replicas : 0);
  if (rate == j.rate && j.gen > 0) return;
  j.rate = rate;
  ++j.gen;
  if (rate == 0) return;
  events.push({j.EndAt(t), kEnd, i, j.gen});
}

void FederationRun::Account(FJob& j, SimTime t) {
  // x <= duration_s always: the window's end needs no clipping.
  j.RunWork::Account(t, j.tmpl.checkpoint_interval_s, warmup, work);
}

KeptCheckpoint FederationRun::CloseRun(FJob& j, SimTime t, RunEnd end) {
  Account(j, t);
  const KeptCheckpoint kept = j.RunWork::CloseRun(t, j.tmpl.checkpoint_interval_s, j.tmpl.checkpoint_on_notice_s, end, work);
  j.alloc_milli = j.unusable_milli = 0;
  return kept;
}

void FederationRun::TakeNotices(SimTime t) {
  for (auto& m : members) {
    for (const Engine::EvictionNotice& n : m->engine().TakeEvictionNotices()) {
      if (n.job >= jobs.size()) continue;
      FJob& j = jobs[n.job];
      if (!j.StartsNoticeCheckpoint(t, j.tmpl.checkpoint_on_notice_s)) continue;
      Progress(j, t);
      Account(j, t);
      j.Notice(t);
    }
  }
}

void FederationRun::Victim(uint32_t for_job, int m) {
  ++evictions;
  if (for_job == kHeadroomJob) {  // evicted to restore the member's HP headroom, for no job
    ++headroom_evictions;
    return;
  }
  FJob& j = jobs[for_job];
  if (j.reclaim_needless) {
    ++needless;
  } else {
    j.reclaim_member = m;
    ++j.pending_victims;
  }
}

bool FederationRun::LoggedMove(SimTime t, size_t m, const MemberEvent& e) {
  // A member's defragmentation moves a task within the member, make-before-break: the job's work
  // goes on (as in a single cluster). A headroom's tasks may move too: they are no job.
  const char* move = e.kind == MemberEvent::Kind::kMoveStarted   ? "migrate-start"
                     : e.kind == MemberEvent::Kind::kMoved         ? "migrate"
                     : e.kind == MemberEvent::Kind::kMoveAborted   ? "migrate-abort"
                     : e.kind == MemberEvent::Kind::kMoveCancelled ? "migrate-cancel"
                                                                    : nullptr;
  if (move == nullptr) return false;
  if (e.job < jobs.size()) Log(t, e.job, move, e.replicas, members[m]->name() + ": " + e.detail);
  return true;
}

void FederationRun::HandleEvents(SimTime t) {
  for (size_t m = 0; m < members.size(); ++m) {
    for (const MemberEvent& e : members[m]->TakeEvents()) {
      const size_t i = e.job;
      if (LoggedMove(t, m, e)) continue;
      FJob& j = jobs[i];
      switch (e.kind) {
        case MemberEvent::Kind::kStarted: {
          j.started_at = t;
          j.member = static_cast<int>(m);
          if (j.first_start < 0) {
            j.first_start = t;
            j.work_left = j.duration * j.tmpl.replicas * kWorkScale;
          }
          j.work_at_checkpoint = j.work_left;
          j.progress_t = t + (j.restarted ? j.tmpl.restart_cost_s : 0);
          j.acct_t = t;
          j.restart_end = j.progress_t;
          j.alloc_milli = j.unusable_milli = 0;  // Reschedule sets them
          j.rate = 0;
          Reschedule(i, t);
          if (j.pending_victims > 0 && j.reclaim_member != static_cast<int>(m)) needless += j.pending_victims;
          j.pending_victims = 0;
          j.reclaim_needless = false;
          j.reclaim_member = -1;
          Log(t, i, "start", e.replicas, members[m]->name());
          break;
        }
        case MemberEvent::Kind::kGrown:
          Reschedule(i, t);
          Log(t, i, "grow", e.replicas);
          break;
        case MemberEvent::Kind::kShrunk:
          Reschedule(i, t);
          Log(t, i, "shrink", e.replicas, "reclaim");
          if (e.for_job != UINT32_MAX) Victim(e.for_job, static_cast<int>(m));
          break;
        case MemberEvent::Kind::kReturned: {
          if (e.for_job != UINT32_MAX) {
            Victim(e.for_job, static_cast<int>(m));
            Progress(j, t);
            // Goodput up to its last checkpoint, periodic or on notice; its next run resumes there.
            const KeptCheckpoint kept = CloseRun(j, t, RunEnd::kEvicted);
            // metrics.md §6: the GPUs it held as it was evicted x the time since its last checkpoint.
            lost_gpu_hours += static_cast<double>(j.bound * j.tmpl.per_replica.TotalGpuMilli()) / kMilliPerGpu *
                              static_cast<double>(t - kept.at) / 3600.0;
            j.work_left = kept.work_left;
            j.restarted = true;
            Log(t, i, "evict", 0, "reclaim");
          } else {  // never fits there: it was waiting in the member's queue, not running
            ++late_rejections;
            Log(t, i, "reject", 0, members[m]->name() + ": " + e.detail);
          }
          j.started_at = -1;
          j.member = -1;
          j.rate = 0;
          j.bound = 0;
          ++j.gen;
          fed().Left(j.fed.id);
          fed().Enqueue(j.fed, j.allowed, true, t);
          break;
        }
        case MemberEvent::Kind::kReclaim:
          ++reclaims;  // whether it was needed was measured as it was decided (observer below)
          Log(t, i, "reclaim", e.replicas, members[m]->name());
          break;
        case MemberEvent::Kind::kStandby:  // members get no Standby windows here
        case MemberEvent::Kind::kRestored:
        case MemberEvent::Kind::kMoveStarted:  // moves: above
        case MemberEvent::Kind::kMoved:
        case MemberEvent::Kind::kMoveAborted:
        case MemberEvent::Kind::kMoveCancelled:
        case MemberEvent::Kind::kStandbyRefused: break;
        case MemberEvent::Kind::kTimedOut:
          // Its member's engine ended it at its walltime limit (Slurm's rule): its work stays
          // unfinished and it is not dispatched again.
          Progress(j, t);
          CloseRun(j, t, RunEnd::kUnfinished);  // goodput up to its last checkpoint
          fed().Left(j.fed.id);
          j.started_at = -1;
          j.member = -1;
          j.rate = 0;
          j.bound = 0;
          ++j.gen;
          j.timed_out = true;
          j.finish = t;
          Log(t, i, "timeout", 0, members[m]->name());
          break;
      }
    }
  }
}

void FederationRun::TakeDispatches() {
  for (const FedDispatch& d : fed().TakeDispatches()) {
    ++dispatches;
    if (!d.admission.accepted) Log(d.t, d.job, "reject", 0, members[static_cast<size_t>(d.member)]->name() + ": " + d.admission.reason);
  }
}

void FederationRun::SampleUntil(SimTime t) {
  int64_t allocated = 0;
  for (const auto& m : members) allocated += m->state().allocated_gpu_milli();
  const double alloc = 100.0 * static_cast<double>(allocated) / capacity;
  if (t > warmup) alloc_area += alloc * static_cast<double>(t - std::max(last_t, warmup));
  last_t = t;
  while (next_sample < t) {
    SimSample s;
    s.time = next_sample;
    s.gpu_alloc_pct = alloc;
    s.pending_jobs = static_cast<int64_t>(fed().waiting());
    double hp_share = 0, any_share = 0;
    int64_t gpu_nodes = 0;
    std::vector<double> rs(regions, 0.0);
    std::vector<int64_t> rn(regions, 0);
    for (size_t m = 0; m < nm; ++m) {
      const ClusterState& st = members[m]->state();
      s.pending_jobs += static_cast<int64_t>(members[m]->engine().queued());
      for (const Node& n : st.nodes()) {
        if (n.spec.gpu_count == 0) continue;
        s.free_nodes += n.Schedulable() && n.full_free_gpus == n.spec.gpu_count;
        int64_t hp = 0, lp = 0;
        for (TaskId tid : n.tasks) {
          const Task& task = st.task(tid);
          const int64_t g = int64_t{task.gpus.size} * task.req.gpu_milli;
          (task.priority >= kHpPriority ? hp : lp) += g;
        }
        const double cap = static_cast<double>(int64_t{n.spec.gpu_count} * kMilliPerGpu);
        const double any = static_cast<double>(std::min<int64_t>(hp + lp, int64_t{n.spec.gpu_count} * kMilliPerGpu)) / cap;
        hp_share += static_cast<double>(hp) / cap;
        any_share += any;
        ++gpu_nodes;
        const size_t r = static_cast<size_t>(region_of[m][n.id.value()]);
        rs[r] += any;
        ++rn[r];
      }
    }
    if (gpu_nodes > 0) {
      s.alloc_ratio_hp_pct = 100.0 * hp_share / static_cast<double>(gpu_nodes);
      s.alloc_ratio_hp_lp_pct = 100.0 * any_share / static_cast<double>(gpu_nodes);
    }
    res.samples.push_back(s);
    next_sample += sc.sample_interval_s;
    if (s.time < warmup) continue;  // shown in the time series, left out of the metrics
    hp_sum += s.alloc_ratio_hp_pct;
    all_sum += s.alloc_ratio_hp_lp_pct;
    double lo = 1e300, hi = -1e300;
    for (size_t r = 0; r < regions; ++r) {
      const double v = rn[r] > 0 ? 100.0 * rs[r] / static_cast<double>(rn[r]) : 0.0;
      region_sum[r] += v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    imbalance_sum += regions > 0 ? hi - lo : 0.0;
    ++samples;
  }
}

FederationRun::Counters FederationRun::Count() const {
  return Counters{evictions, headroom_evictions, needless, reclaims, fed().reclaims_cancelled(), dispatches,
                  fed().rejections() + late_rejections, fed().retries(), lost_gpu_hours};
}

Status FederationRun::Run() {
  while (!events.empty() && std::get<0>(events.top()) < sc.duration_s) {
    const SimTime t = std::get<0>(events.top());
    if (!at_warmup && t >= warmup) at_warmup = Count();
    SampleUntil(t);
    wakes.erase(t);
    // An end of a run that is over (rescheduled or evicted since) is no input: a time with only
    // such ends runs no cycle, as a member's service, which has no such event, would run none.
    bool happened = false;
    while (!events.empty() && std::get<0>(events.top()) == t) {
      const auto [et, kind, i, gen] = events.top();
      events.pop();
      FJob& j = jobs[i];
      happened |= kind != kEnd;
      if (kind == kEnd) {
        if (j.started_at < 0 || j.gen != gen) continue;  // rescheduled or evicted since
        happened = true;
        Progress(j, t);
        CloseRun(j, t, RunEnd::kFinished);
        members[static_cast<size_t>(j.member)]->Cancel(j.fed.id, t);
        fed().Left(j.fed.id);
        j.started_at = -1;
        j.member = -1;
        j.finished = true;
        j.finish = t;
        Log(t, i, "finish", 0);
      } else if (kind == kArrival) {
        fed().Enqueue(j.fed, j.allowed, false, t);
      }
    }
    if (!happened) continue;
    ++res.cycles;
    for (auto& m : members) m->Step(t);
    HandleEvents(t);
    // Dispatch; jobs evicted by the dispatches' Reclaims come back only after their grace period,
    // but a member's queue may return a job at once (never fits there): one more pass for those.
    for (int round = 0; round < 2; ++round) {
      const size_t before = late_rejections;
      fed().Pass(t);
      TakeDispatches();
      HandleEvents(t);
      if (static_cast<size_t>(late_rejections) == before) break;
    }
    for (auto& m : members) m->Grow(t, fed().BlockingPriority());
    HandleEvents(t);
    TakeNotices(t);
    auto wake = [&](std::optional<int64_t> at) {
      if (at && *at > t && *at < sc.duration_s && wakes.insert(*at).second) events.push({*at, kWake, 0, 0});
    };
    for (auto& m : members) wake(m->NextDue());
    wake(fed().NextRetry());
    if (check_invariants) {
      for (auto& m : members) {
        Status st = m->state().CheckInvariants();
        if (!st.ok()) return Internal("at t=" + std::to_string(t) + " on member '" + m->name() + "': " + st.message());
        // Its cycle ended at a fixed point: another at the same time decides nothing.
        m->Step(t);
        m->Grow(t, fed().BlockingPriority());
        if (const std::vector<MemberEvent> again = m->TakeEvents(); !again.empty()) {
          return Internal("at t=" + std::to_string(t) + " on member '" + m->name() + "': a second cycle at the same time decided " +
                          std::to_string(again.size()) + " more: the first for job " + jobs[again.front().job].tmpl.name);
        }
      }
    }
  }
  if (!at_warmup) at_warmup = Count();
  SampleUntil(sc.duration_s);
  // Goodput: the runs still going at the end keep what their last checkpoint kept.
  for (FJob& j : jobs) {
    if (j.started_at >= 0) CloseRun(j, sc.duration_s, RunEnd::kUnfinished);
  }
  return Status::Ok();
}

void FederationRun::MemberDefragMetrics(std::map<std::string, double>& mt) const {
  // The members' defragmentation, summed over them (the longest plan: the longest of any), over
  // the whole run (warm-up included, as the single-cluster counts).
  MigrationCounters k;
  DefragCounters d;
  for (const auto& m : members) {
    k += m->engine().migration_counters();
    d += m->engine().defrag_counters();
  }
  DefragCounterMetrics(k, d, mt);
}

SimulateResult FederationRun::Finish() {
  // Results: over [warmup, duration).
  const Counters total = Count();
  const Counters& base = *at_warmup;
  auto& mt = res.metrics;
  std::vector<double> hp_delays, lp_delays, delays;
  int64_t started = 0, infeasible = 0, waiting = 0, lp_finished = 0;
  double lp_jct = 0;
  for (const FJob& j : jobs) {
    if (j.submit >= sc.duration_s || j.submit < warmup) continue;
    SimJobRecord rec = JobRecordOf(j.tmpl, j.submit, j.first_start, sc.duration_s);
    const bool inf = fed().Infeasible(j.fed.id);
    rec.status = inf                ? SimJobStatus::kInfeasible
                 : j.started_at >= 0 ? SimJobStatus::kRunning
                 : j.finished        ? SimJobStatus::kFinished
                 : j.timed_out       ? SimJobStatus::kTimedOut
                                     : SimJobStatus::kPending;
    if (inf) rec.reason = fed().Reason(j.fed.id);
    res.jobs.push_back(rec);
    started += j.first_start >= 0;
    infeasible += inf;
    waiting += rec.status == SimJobStatus::kPending;
    const double d = static_cast<double>(rec.delay_s);
    delays.push_back(d);
    (j.tmpl.priority >= kHpPriority ? hp_delays : lp_delays).push_back(d);
    if (j.finished && j.tmpl.priority < kHpPriority) {
      lp_jct += static_cast<double>(j.finish - j.submit);
      ++lp_finished;
    }
  }
  if (!hp_delays.empty()) {
    mt["hp_sched_delay_p50_s"] = Percentile(hp_delays, 50);
    mt["hp_sched_delay_p90_s"] = Percentile(hp_delays, 90);
    mt["hp_sched_delay_p99_s"] = Percentile(hp_delays, 99);
  }
  if (!lp_delays.empty()) mt["lp_sched_delay_p90_s"] = Percentile(lp_delays, 90);
  if (!delays.empty()) mt["sched_delay_p90_s"] = Percentile(delays, 90);
  mt["evictions_count"] = static_cast<double>(total.evictions - base.evictions);
  mt["headroom_evictions_count"] = static_cast<double>(total.headroom_evictions - base.headroom_evictions);
  mt["needless_preemptions_count"] = static_cast<double>(total.needless - base.needless);
  mt["reclaims_count"] = static_cast<double>(total.reclaims - base.reclaims);
  mt["reclaims_cancelled_count"] = static_cast<double>(total.cancelled - base.cancelled);
  mt["preemption_lost_gpu_hours"] = total.lost_gpu_hours - base.lost_gpu_hours;
  WorkMetrics(work, false, mt);  // no node failures in a federation
  mt["dispatches_count"] = static_cast<double>(total.dispatches - base.dispatches);
  mt["dispatch_rejections_count"] = static_cast<double>(total.rejections - base.rejections);
  mt["dispatch_retries_count"] = static_cast<double>(total.retries - base.retries);
  mt["jobs_started_count"] = static_cast<double>(started);
  mt["jobs_infeasible_count"] = static_cast<double>(infeasible);
  mt["jobs_waiting_end_count"] = static_cast<double>(waiting);
  mt["lp_jobs_finished_count"] = static_cast<double>(lp_finished);
  // Only for workloads with walltimes, as in the single-cluster summary.
  if (std::any_of(jobs.begin(), jobs.end(), [](const FJob& j) { return j.tmpl.walltime_s > 0; })) {
    mt["jobs_timed_out_count"] = static_cast<double>(std::count_if(jobs.begin(), jobs.end(), [&](const FJob& j) {
      return j.timed_out && j.submit >= warmup && j.submit < sc.duration_s;
    }));
  }
  if (lp_finished > 0) mt["lp_jct_mean_s"] = lp_jct / static_cast<double>(lp_finished);
  if (config.defrag.enabled) MemberDefragMetrics(mt);
  mt["gpu_alloc_pct_mean"] = alloc_area / static_cast<double>(sc.duration_s - warmup);
  mt["warmup_s"] = static_cast<double>(warmup);
  if (samples > 0) {
    const double n = static_cast<double>(samples);
    mt["alloc_ratio_hp_pct"] = hp_sum / n;
    mt["alloc_ratio_hp_lp_pct"] = all_sum / n;
    mt["alloc_imbalance_pct"] = imbalance_sum / n;
    for (size_t r = 0; r < regions; ++r) mt["member_" + MetricName(fs.members[r].name) + "_alloc_ratio_hp_lp_pct"] = region_sum[r] / n;
  }
  if (meter != nullptr) {
    for (const auto& m : members) {
      meter->total.schedule_ns += m->timing().schedule_ns;
      meter->total.upkeep_ns += m->timing().upkeep_ns;
      meter->total.publishes += m->timing().publishes;
    }
  }
  return std::move(res);
}

}  // namespace

StatusOr<SimulateResult> RunFederation(const Scenario& sc, const std::vector<ClusterState>& clusters,
                                       const ClusterState* merged, const SchedulerConfig& config, uint64_t seed,
                                       bool check_invariants, bool record_events, FederationMeter* meter) {
  FederationRun run(sc, clusters, merged, config, seed, check_invariants, record_events, meter);
  ESTUARY_RETURN_IF_ERROR(run.Prepare());
  ESTUARY_RETURN_IF_ERROR(run.Run());
  return run.Finish();
}

}  // namespace estuary
