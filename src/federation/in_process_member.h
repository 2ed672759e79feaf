// InProcessMember: a federation member that wraps one estuary engine in this process — its own
// ClusterState, Session and actions (AllocateAction, PreemptAction, AbsorbAction) — driven by the
// caller's clock (the simulator's, later the service's).
//
// Admission (Submit). The job is materialised in the member's state the first time it is
// dispatched here (its models and topology names resolved; a job the member has no model or level
// for is rejected with `never`) and tried at once through AllocateAction::TryStart:
//   started                          -> accepted, started;
//   infeasible (never fits here)     -> rejected, never;
//   kQueue                           -> accepted: it waits in the member's priority queue (an
//                                       HP job Reclaims at once, as in Step's (3));
//   kStartNow                        -> rejected ("stale summary" in effect);
//   kEnqueue (before any try)        -> accepted: queued behind the waiting jobs, tried by Step;
//   kStartOrReclaim, HP job          -> PreemptAction::Plan: feasible with victims none of which
//                                       is already being evicted -> accepted, reclaiming: the
//                                       plan's nodes are held for it (AddReservation), its
//                                       victims are evicted when the last of them has exited
//                                       (grace_s later, or sooner with an exit model:
//                                       MemberOptions::exit_mean_s) and it starts then;
//                                       otherwise rejected, with nothing evicted.
// Step(now): (1) evictions whose grace ended: the victims' tasks are unbound (elastic jobs shrink,
// others are evicted whole and returned to the federation — kReturned); (2) the member's queue is
// tried in priority order (jobs holding a reservation on their own); (3) HP jobs still waiting in
// the queue (kQueue dispatches) Reclaim for themselves as in (Submit); (4) HP headrooms that HP
// work dented are planned anew and their held nodes drained (MemberOptions::headroom).
// Grow(now): with absorb, running elastic jobs grow toward max (AbsorbAction) unless a queued HP
// job or gang could use the room. A driver runs Step, then the federation's dispatch, then Grow,
// so that jobs waiting at the federation see released capacity before elastic jobs take it.
// Both publish the summary when summary_period_s has passed since the last publication (0: it is
// kept current after every change, Submit and Cancel included).
// Every decision is logged as a MemberEvent. Deterministic: no hash-map order reaches a decision.
// Thread-safety: none.
#pragma once

#include <climits>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "federation/member.h"
#include "model/cluster_state.h"
#include "sched/actions/allocate.h"
#include "sched/actions/defrag.h"
#include "sched/actions/graceful_exit.h"
#include "sched/actions/migration.h"
#include "sched/actions/preempt.h"
#include "sched/framework/pending_queue.h"
#include "sched/framework/session.h"

namespace estuary {

// An HP headroom (MemberOptions::headroom): the shape kept free, and the smallest HP job (GPUs at
// min replicas) that may use it.
struct MemberHeadroom {
  FedJob shape;
  int64_t min_job_gpus = 0;
};

struct MemberOptions {
  std::string name;
  std::string policy = "best-fit";  // placement policy (an openb policy name)
  uint64_t seed = 0;
  AllocateOptions allocate;
  int64_t grace_s = 60;      // Reclaim's eviction grace period (default 60 s, Alibaba's bound)
  // How long victims take to exit within it (GracefulExit): 0 (default): the whole grace period;
  // else a lognormal of this mean and P95 bounded by grace_s (Alibaba: 13 s and 48 s). A Reclaim's
  // victims are freed, and its job starts, when the last of its victim jobs has exited.
  int64_t exit_mean_s = 0;
  int64_t exit_p95_s = 0;
  bool absorb = true;        // grow running elastic jobs toward max (default on)
  SummaryOptions summary;    // reclaim thresholds
  int64_t summary_period_s = 0;  // 0: the summary is current after every change
  // When set, the member measures its own work (timing()); nothing it decides depends on it.
  const Stopwatch* stopwatch = nullptr;
  // Standby (SpotGPU): a queued preemptible job with priority <= lend_max_priority tries the
  // capacity lent by Standby replicas first (StandbyAction::PlaceOnLent), then free capacity.
  int32_t lend_max_priority = kHpPriority - 1;
  // The executor of Defrag's moves (live drivers set `acknowledged`).
  MigrationOptions migration;
  // HP headroom (none when empty): for each MemberHeadroom listed, room for one job of its shape
  // (max_replicas x per_replica GPUs, models, topology level; id, priority and preemptible are
  // ignored) is kept free of work below HP priority, so that HP jobs find it idle instead of
  // waiting for a Reclaim's victims. The member holds each headroom's nodes (a node-hold
  // Reservation of an internal job, never started): work below HP cannot start there, HP jobs of
  // at least min_job_gpus GPUs may (the hold is lifted while such a job tries to start, Reclaims
  // or is quoted); smaller HP jobs Reclaim as usual. When HP
  // work took some of them, Step plans the shape anew (PreemptAction, the held nodes counting as
  // free) and holds the plan's nodes. Held nodes drain without losing much work: an elastic job
  // sheds its replicas there at once when it keeps whole steps (at least min); a preemptible job
  // is evicted whole once its work since its last checkpoint is at most headroom_max_loss_s;
  // anything else ends on its own. Evictions are events for kHeadroomJob. Drains and infeasible
  // plans are looked at again headroom_retry_s later. The summary counts held nodes as
  // available at thresholds >= kHpPriority only.
  std::vector<MemberHeadroom> headroom;
  int64_t headroom_retry_s = 60;
  int64_t headroom_max_loss_s = 300;
};

// Time a member spent, measured with MemberOptions::stopwatch: its own scheduling (Submit, Cancel,
// QuoteReclaim, Step, Grow — without the summary publications inside them) and the summary's
// upkeep (every Publish, CapacitySummary::Refresh).
struct MemberTiming {
  int64_t schedule_ns = 0;
  int64_t upkeep_ns = 0;
  int64_t publishes = 0;
};

class InProcessMember : public Member {
 public:
  // Takes the member's cluster (its nodes and topology; no jobs). Fails on an unknown policy.
  static StatusOr<std::unique_ptr<InProcessMember>> Create(ClusterState cluster, MemberOptions options);

  const std::string& name() const override { return options_.name; }
  const CapacitySummary& summary() const override { return summary_; }
  Admission Submit(const FedJob& job, AdmitMode mode, int64_t now_s) override;
  void Cancel(uint32_t job, int64_t now_s) override;
  int32_t Running(uint32_t job) const override;
  std::optional<ReclaimQuote> QuoteReclaim(const FedJob& job, int64_t now_s) override;
  std::vector<MemberEvent> TakeEvents() override;

  // The member's scheduling cycle at `now_s`, in two halves (see the header comment).
  void Step(int64_t now_s);
  // `external_blocking`: the priority of the highest HP job or gang waiting elsewhere for this
  // member (e.g. at the federation; FedScheduler::BlockingPriority), INT32_MIN for none.
  void Grow(int64_t now_s, int32_t external_blocking = INT32_MIN);
  // The earliest time a Step has work that no event brings (an eviction's grace end), if any.
  std::optional<int64_t> NextDue() const;
  // Publishes the summary now (whatever the period).
  void Publish(int64_t now_s);
  // Exact check, for measuring needless preemptions: could `job` start here now on idle capacity
  // (PreemptAction's feasibility without victims)? Materialises the job if needed; changes no
  // placement.
  bool FitsIdleNow(const FedJob& job, int64_t now_s);

  // Called as each Reclaim is decided (before any other member changes), with the federation's
  // job id and the time: lets a driver measure whether the preemption was needed.
  void SetReclaimObserver(std::function<void(uint32_t job, int64_t now_s)> f) { reclaim_observer_ = std::move(f); }

  // ---- A live cluster (the service, issue 7): nodes come and go, jobs survive restarts ----
  // Adds a node of `gpu_model` (empty: CPU-only). `domains`: for each plane name, the node's
  // domain names from the plane's top level down (as many as the plane has levels); planes are
  // created on first use with levels named level0, level1, ... unless `plane_levels` names them
  // (plane name -> level names) before the first node. Errors: InvalidArgument (duplicate
  // name, too many GPUs, unknown plane, wrong number of names, inconsistent nesting).
  StatusOr<NodeId> AddNode(NodeSpec spec, const std::string& gpu_model,
                           const std::vector<std::pair<std::string, std::vector<std::string>>>& domains);
  // Declares a plane and its levels (top first). REQUIRES: before any node is added.
  Status AddPlane(const std::string& name, const std::vector<std::string>& levels);
  // Cordons the node (no new placements; its tasks keep running) or makes it ready again.
  void SetCordoned(NodeId node, bool cordoned);
  // The node failed at `now_s`: it takes no work and every task on it stops. A job left below its
  // min replicas is evicted whole (kReturned, detail "node failed"); an elastic job still at or
  // above its min shrinks to the largest allowed count it holds (kShrunk, "node failed").
  void FailNode(NodeId node, int64_t now_s);
  // Drain: the node takes no new work (cordoned) and every task on it stops now, as FailNode
  // handles them (jobs below min returned, elastic jobs shrunk; detail "node drained").
  void DrainNode(NodeId node, int64_t now_s);
  // A failed, drained or cordoned node is ready again (empty: its tasks stopped when it failed).
  void RestoreNode(NodeId node);

  // Why a waiting job does not run, without changing anything: whether idle capacity holds it
  // now, and whether (and at what price) Reclaim could make room.
  struct Explanation {
    bool known = false;       // the job is here and waiting (not running)
    bool fits_idle = false;   // idle capacity holds its min replicas now
    bool reclaim_feasible = false;  // evicting preemptible work below its priority would
    int32_t victims = 0;      // jobs evicted whole or shrunk by that Reclaim
    int32_t victims_max_priority = 0;
    std::string reason;       // the shortfall (PreemptAction's words) when even Reclaim cannot
  };
  Explanation Explain(uint32_t job, int64_t now_s) const;

  // Holds nodes for a waiting job (ReserveAction::Plan): other work no longer starts there, and
  // the job starts as soon as enough of what it may use is free, which releases the hold. False
  // (nothing held) when the job is not waiting here, already holds nodes, or no set of nodes
  // could ever hold it. Returns the held nodes in `nodes`.
  bool Reserve(uint32_t job, std::vector<NodeId>* nodes);
  // Releases the job's hold, if any.
  void Unreserve(uint32_t job);
  // The nodes the job holds (empty: none).
  std::vector<NodeId> HeldNodes(uint32_t job) const;

  // Changes a job's replica bounds (a live driver's "change min/max"). A waiting job waits with
  // the new bounds; a running one above the new max shrinks to the largest allowed count within
  // it (kShrunk, detail "resized") and, elastic, may grow toward the new max (Absorb). False, with
  // `why` and nothing changed, when the job is unknown, the bounds are not 1 <= min <= max, or a
  // running job holds fewer replicas than the new min.
  bool Resize(uint32_t job, int32_t min_replicas, int32_t max_replicas, int64_t now_s, std::string* why);

  // Changes the Reclaim grace period (later Reclaims) and Absorb (from the next Grow). With an
  // exit model (exit_mean_s), it is fitted again to the new bound; a bound at or below its P95
  // leaves victims the whole grace period.
  void SetGrace(int64_t grace_s);
  void SetAbsorb(bool absorb) { options_.absorb = absorb; }
  const MemberOptions& options() const { return options_; }

  // Tasks a Reclaim decided to evict, and when (its grace period's end), since the last call:
  // lets a live driver warn their agents ahead of the stop.
  struct EvictionNotice {
    uint32_t job = 0;  // the victim (federation id)
    TaskId task;
    int64_t at = 0;
  };
  std::vector<EvictionNotice> TakeEvictionNotices() { return std::exchange(notices_, {}); }

  // ---- Standby (SpotGPU, Alibaba OSDI'26) ----
  // Brings the number of `job`'s replicas in Standby to `replicas` (clamped to those it has
  // bound). Entering: active replicas, newest first, go into Standby (ClusterState::EnterStandby:
  // their GPUs and CPU are lent to spot work, see MemberOptions::lend_max_priority). Leaving:
  // Standby replicas, oldest first, begin their restore: when no borrower is in the way
  // (StandbyAction::RestoreVictims) the replica leaves Standby at once; otherwise the borrowers'
  // jobs get eviction notices and, grace_s later, are evicted whole (kReturned, detail "standby
  // restore") and the replica leaves Standby. A restoring replica counts as leaving. False when
  // the job does not run here.
  bool SetStandby(uint32_t job, int32_t replicas, int64_t now_s);
  // `job`'s replicas in Standby, restoring ones included (0 when it does not run here).
  int32_t InStandby(uint32_t job) const;

  // ---- Live migration: issue 5's planner (DefragAction) and executor (MigrationExecutor) ----
  // Plans a defragmentation of the running work with `options` (tasks being evicted are locked)
  // and hands the plan's moves to the member's executor (MemberOptions::migration); they start in
  // Step as its budget allows, make-before-break. Returns the moves kept: 0 while an earlier
  // plan's moves still run, or when nothing is worth moving. InvalidArgument for bad options.
  StatusOr<int64_t> Defrag(const DefragOptions& options, int64_t now_s);
  // A drain by migration: cordons `node` (no new work) and plans moves of every task on it to other
  // nodes (DefragAction with DefragOptions::evacuate), started as Defrag's are — also while an
  // earlier plan runs. Returns the moves kept: 0 when the node is empty or its tasks cannot all
  // move (pinned: Standby, borrowed, locked, or no room); the node stays cordoned either way.
  int64_t Evacuate(NodeId node, int64_t now_s);
  // A move's new instance runs (`ready`) or failed (acknowledged mode); takes effect at the next
  // Step. False when `task` has no starting move.
  bool AcknowledgeMove(TaskId task, bool ready) { return migrations_.Acknowledge(task, ready); }
  // The moves whose new instance is starting: the task, its target node and GPUs there.
  struct StartingMove {
    TaskId task;
    NodeId to;
    GpuIndices gpus;
  };
  std::vector<StartingMove> StartingMoves() const;
  // Federation ids of the jobs whose placement changed without a MemberEvent since the last call:
  // a move started or ended, a replica entered or left Standby.
  std::vector<uint32_t> TakeTouched();
  const MigrationCounters& migration_counters() const { return migrations_.counters(); }

  // The state's job of federation job `job`; nullopt when never materialised here.
  std::optional<JobId> JobOf(uint32_t job) const;
  // Where one replica of a job runs (Adopt).
  struct Placement {
    size_t replica = 0;
    NodeId node;
    GpuIndices gpus;
    bool standby = false;   // it was in Standby: it enters Standby again
    bool borrowed = false;  // it ran on lent capacity: bound there again (ClusterState::BindBorrowed)
  };
  // Rebuilds a job that was running before a restart: materialises `job`, binds each listed
  // replica where it runs, and marks the job running since `started_s` (no event). Returns false,
  // binding nothing, when the job is already here, a replica is out of range or listed twice, or
  // a placement does not fit (its node is down or its capacity is taken; a borrowed one: its GPUs
  // are not lent now — adopt the lenders first).
  bool Adopt(const FedJob& job, const std::vector<Placement>& placements, int64_t started_s);

  const ClusterState& state() const { return state_; }
  // What the stopwatch measured so far (zeros without one).
  const MemberTiming& timing() const { return timing_; }
  // Jobs waiting in the member's queue.
  size_t queued() const { return queue_.size(); }
  // The federation ids of the queued jobs, in queue order.
  std::vector<uint32_t> QueuedInOrder() const;
  // Jobs the member has materialised (running, waiting, or ended: it never forgets one).
  size_t jobs_known() const { return locals_.size(); }
  // Whether nothing is under way that a rebuilt member would not know of: no Reclaim in its grace
  // period, no Standby restore, no move. A member rebuilt then (its nodes added in id order, its
  // running jobs adopted where they run — lenders before borrowers —, its queue submitted again in
  // order, its holds reserved again) decides as this one would, without the ended jobs.
  bool Quiescent() const;

 private:
  struct Local {
    uint32_t fed = 0;
    JobId id;
    int32_t priority = 0;
    int32_t min_replicas = 1, max_replicas = 1;
    int shape = 0;
    bool running = false;
    bool reclaiming = false;
    uint64_t refused_seq = UINT64_MAX;  // release_seq when its Reclaim was last found infeasible
  };
  InProcessMember(ClusterState cluster, MemberOptions options);
  class Meter;  // times one public call (see MemberTiming)
  // The local job of `job`, materialised on first use; nullopt (and `why`) when the member has no
  // model or topology level for it.
  std::optional<size_t> Materialize(const FedJob& job, std::string* why);
  void OnStart(size_t li, int64_t now_s, int32_t granted);
  // The interned shape of a job: its request, bounds, step, topology constraint and priority.
  int ShapeOf(JobId id);
  // Plans and starts a Reclaim for queued or dispatched local job li; false (nothing changed)
  // when there is no such plan, with `why`.
  bool StartReclaim(size_t li, int64_t now_s, std::string* why);
  void TryQueue(int64_t now_s);
  void EndEvictions(int64_t now_s);
  void ReclaimQueued(int64_t now_s);
  void Absorb(int64_t now_s, int32_t external_blocking);
  void MaybePublish(int64_t now_s);
  // Stops every task on `node` (FailNode, DrainNode), logging `detail`.
  void EvictNode(NodeId node, int64_t now_s, const std::string& detail);
  // Starts local job li: on lent capacity first when it may borrow, else AllocateAction.
  JobAttempt TryStart(size_t li);
  // Unbinds a bound task; a Standby one first has its borrowers' jobs returned and leaves Standby.
  void Free(TaskId t, int64_t now_s);
  // Evicts running local job vi whole: every task unbound, kReturned with `detail`.
  void ReturnWhole(size_t vi, int64_t now_s, uint32_t for_job, const std::string& detail);
  // Takes Standby task t out of Standby now, returning its borrowers' jobs whole.
  void ExitStandbyNow(TaskId t, int64_t now_s);
  void EndRestores(int64_t now_s);
  void StepMigrations(int64_t now_s);
  void Log(MemberEvent::Kind kind, int64_t t, size_t li, int32_t replicas, uint32_t for_job = UINT32_MAX,
           int64_t at = 0, std::string detail = {});

  struct Eviction {
    int64_t at = 0;
    size_t for_local = 0;
    std::vector<TaskId> tasks;
    std::vector<JobId> whole;
  };

  // HP headrooms (MemberOptions::headroom): each one's internal job (local index), its nodes
  // (held while closed; some may still be draining their victims), whether a restore's eviction
  // is under way, and when the member looks at it again.
  struct Headroom {
    size_t li = 0;
    int64_t min_job_gpus = 0;  // MemberHeadroom's
    std::vector<NodeId> nodes;
    int64_t retry_at = 0;  // > 0: look again then (a plan was infeasible, or work still drains)
  };
  std::vector<Headroom> headrooms_;
  // Lifts the holds of the headrooms open to local `li` (an HP job of at least their
  // min_job_gpus; none for other jobs) / holds every headroom's nodes again, minus those HP work
  // took or another job holds now. Open and Close pair up around each HP attempt.
  // Returns whether it lifted any hold.
  bool OpenHeadroom(size_t li);
  // A headroom that lost nodes is restored from now_s + 1 (the next Step).
  void CloseHeadroom(int64_t now_s);
  // Step's part: restores each headroom that holds fewer nodes than its shape needs.
  void RestoreHeadroom(int64_t now_s);
  // Evicts `plan`'s victims for local `li` (an HP job or a headroom) once the last has exited.
  int64_t ScheduleEviction(size_t li, const PreemptionPlan& plan, int64_t now_s);
  // `nodes` without duplicates and without those held by a reservation, in order.
  std::vector<NodeId> Unheld(const std::vector<NodeId>& nodes) const;

  MemberOptions options_;
  GracefulExit exit_;
  ClusterState state_;
  std::unique_ptr<Session> session_;
  CapacitySummary summary_;
  int64_t last_publish_ = -1;
  std::vector<Local> locals_;
  std::unordered_map<uint32_t, size_t> by_fed_;  // federation job id -> local index (lookups only)
  size_t LocalOf(uint32_t job) const {
    const auto it = by_fed_.find(job);
    return it == by_fed_.end() ? SIZE_MAX : it->second;
  }
  std::vector<size_t> local_of_job_;  // state JobId -> local index
  std::map<std::string, int> shapes_;
  PendingQueue queue_{true};
  std::vector<size_t> holders_;  // queued local jobs that hold a reservation
  std::vector<Eviction> evictions_;
  std::vector<char> being_evicted_;  // per TaskId
  std::set<size_t> elastic_running_;
  std::vector<MemberEvent> events_;
  std::function<void(uint32_t, int64_t)> reclaim_observer_;
  uint64_t absorb_seen_release_ = UINT64_MAX;
  int32_t absorb_seen_blocking_ = 0;
  int64_t absorb_seen_starts_ = -1;
  int64_t elastic_starts_ = 0;
  MemberTiming timing_;
  int meter_depth_ = 0;
  std::vector<EvictionNotice> notices_;
  struct Restore {
    TaskId task;
    int64_t at = 0;
    std::vector<TaskId> noticed;  // borrowers warned (being_evicted_ until the restore ends)
  };
  std::vector<Restore> restores_;
  std::vector<char> restoring_;  // per TaskId
  MigrationExecutor migrations_;
  std::set<uint32_t> touched_;
};

}  // namespace estuary
