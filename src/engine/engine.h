// Engine: estuary's one scheduling engine. It owns a cluster's state (ClusterState), the Session
// over it, the pending queue and every lifecycle that spans cycles — evictions in their grace
// period, Standby restores, migrations, node holds, HP headrooms, the Absorb memo — and it is the
// one place that orders the actions of a scheduling cycle (RunCycle, EngineConfig::actions).
// Drivers (the single-cluster simulator, the federation members and through them the federation
// simulator, the live service) turn their world into inputs (Submit, Cancel, Resize, node
// added / failed / drained / repaired / cordoned, Standby targets, defrag requests, holds) applied
// at the engine time they give, call RunCycle, and carry out the events it reports. The engine
// reads no clock: every input and cycle carries its time.
//
// Admission (Submit). The job is materialised in the engine's state the first time it is
// submitted (its models and topology names resolved; a job the cluster has no model or level
// for is rejected with `never`) and, except with kEnqueue, tried at once through
// AllocateAction::TryStart:
//   started                          -> accepted, started;
//   infeasible (never fits here)     -> rejected, never;
//   kQueue                           -> accepted: it waits in the engine's priority queue (an
//                                       HP job Reclaims at once, as the cycle's `reclaim` would);
//   kStartNow                        -> rejected;
//   kEnqueue (before any try)        -> accepted: queued behind the waiting jobs, tried by the
//                                       next cycle;
//   kStartOrReclaim, HP job          -> PreemptAction::Plan: feasible with victims none of which
//                                       is already being evicted -> accepted, reclaiming: the
//                                       plan's nodes are held for it (AddReservation), its
//                                       victims are evicted when the last of them has exited
//                                       (grace_s later, or sooner with an exit model:
//                                       EngineConfig::exit_mean_s) and it starts then;
//                                       otherwise rejected, with nothing evicted.
//   Without the `reclaim` action in EngineConfig::actions (Reclaim off), kQueue only queues and
//   kStartOrReclaim is rejected as kStartNow is; QuoteReclaim quotes nothing.
// The cycle (RunCycle) runs EngineConfig::actions in order; the actions (EngineAction):
//   evictions  evictions whose grace ended: the victims' tasks are unbound (elastic jobs shrink,
//              others are evicted whole: requeued at the front, EngineConfig::requeue, or
//              returned to the driver — kReturned);
//   restores   Standby restores whose grace ended: their borrowers leave, the replica resumes;
//   moves      the migration executor's step (moves due start, complete, abort);
//   standby    jobs with Standby windows (SetStandbyWindows) are brought to their target;
//   allocate   the queue is tried in order (jobs holding a reservation on their own);
//   backfill   EASY backfill (EngineConfig::backfill; not in the default list: a driver whose
//              configuration turns it on lists it right after `allocate`): the first waiting job
//              gets a planned start on concrete nodes (BackfillAction), which are held for it;
//              waiting jobs whose walltime ends by then may start on them too;
//   reserve    holds for waiting gangs renewed every replan_s (EngineConfig::reserve);
//   defrag     a defragmentation plan on its period or trigger (EngineConfig::defrag);
//   reclaim    HP jobs still waiting Reclaim for themselves as in Submit (with queues: jobs
//              their queue is owed capacity for, then jobs short of their fair share);
//   headroom   HP headrooms that HP work dented are planned anew and their nodes drained;
//   absorb     running elastic jobs grow toward max (AbsorbAction) unless a queued HP job or
//              gang (or one the driver says waits elsewhere: CycleOptions::external_blocking)
//              could use the room.
// A cycle ends at a fixed point: when a replica entered Standby after the list's last `allocate`
// (a job that started in its window), the actions run again, so the lent GPUs reach the queue in
// the same cycle and another cycle at the same time changes nothing, whatever the driver's rhythm.
// A federation driver runs a cycle in two parts (CyclePart): every member up to its first
// `absorb`, then the federation's dispatch, then the rest, so that jobs waiting at the federation
// see released capacity before elastic jobs take it. Every decision is logged as an EngineEvent.
// Deterministic: the same inputs at the same times give the same events; no hash-map order
// reaches a decision.
// Thread-safety: none.
#pragma once

#include <algorithm>
#include <array>
#include <climits>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <tuple>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "engine/inputs.h"
#include "engine/io.h"
#include "engine/queue_book.h"
#include "model/cluster_state.h"
#include "sched/actions/allocate.h"
#include "sched/actions/defrag.h"
#include "sched/actions/graceful_exit.h"
#include "sched/actions/migration.h"
#include "sched/actions/preempt.h"
#include "sched/framework/pending_queue.h"
#include "sched/framework/session.h"
#include "sched/plugins/fgd/typical_tasks.h"

namespace estuary {

// An HP headroom (EngineConfig::headroom): the shape kept free, and the smallest HP job (GPUs at
// min replicas) that may use it.
struct HeadroomSpec {
  EngineJob shape;
  int64_t min_job_gpus = 0;
};

// The actions a cycle may run, in EngineConfig::actions (see the header comment).
enum class EngineAction {
  kEvictions, kRestores, kMoves, kAllocate, kStandby, kReserve, kDefrag, kReclaim, kHeadroom, kAbsorb, kBackfill
};
// The action's name in a configuration ("evictions", "restores", ...), and back (nullopt: unknown).
const char* EngineActionName(EngineAction a);
std::optional<EngineAction> EngineActionByName(const std::string& name);
// The default cycle: evictions, restores, moves, standby, allocate, standby, reserve, defrag,
// reclaim, headroom, moves, absorb.
std::vector<EngineAction> DefaultEngineActions();

// Holds for waiting gangs, renewed periodically (the `reserve` action: ReserveAction::Renew).
struct EngineReserve {
  bool enabled = false;     // default off
  int64_t replan_s = 300;   // the holds are planned anew every replan_s seconds, from replan_s on
  int64_t after_s = 1800;   // for jobs waiting at least after_s since their submission,
  int64_t min_gpus = 128;   // of at least min_gpus
  int64_t max_gpus = int64_t{1} << 40;  // and at most max_gpus GPUs at max replicas,
  int64_t max_jobs = 1;     // the first max_jobs of them in queue order (none already reclaiming)
  // 0: a hold takes the nodes with the least work from the first (they drain). > 0: until the job
  // has waited drain_after_s since its submission its hold takes only empty nodes (as many as
  // there are, up to its need: ReserveAction::Plan's empty_only), from then on as with 0.
  int64_t drain_after_s = 0;
};

// EASY backfill (the `backfill` action; BackfillAction, docs/schema.md `backfill`). At the first
// cycle in which a job waits, then every interval_s (and at once when the planned job started or
// left), the
// first job in queue order that waits (not one being Reclaimed for, nor one a `reserve` hold or
// a Reclaim already holds nodes for) gets a planned start: BackfillAction::Plan's time and
// nodes, which are held for it (a node hold: no other job starts there). Then every other waiting
// job with a walltime that ends by the planned start (now + walltime_s <= start), in queue order,
// is tried with the hold lifted: it may start on the held nodes too, since it ends before the
// planned job needs them. Jobs without a walltime, or with a longer one, start only on other
// nodes (the `allocate` pass, the hold in place). So a planned start is never delayed by a job
// started after it was planned, as long as walltimes are honoured. A job whose plan finds no
// time (its room depends on work without a walltime) holds nothing. Explain says "planned to
// start at T on D". Conservative backfill: `depth` jobs are planned for (below).
// Cost: the head and the jobs let in come from two passes of the queue (O(shapes), a job's
// walltime being part of its shape) and one BackfillAction::Plan per interval while a job waits.
struct EngineConfig;
struct EngineBackfill {
  bool easy = false;          // backfill on (EASY unless `conservative`); default off
  int64_t interval_s = 30;    // Slurm's bf_interval default
  bool conservative = false;  // plan for the first `depth` waiting jobs, not only the first
  int32_t depth = 100;        // conservative: jobs planned for in a round (>= 1)
};

// Turns EASY backfill on in `e` with `b`'s interval: EngineConfig::backfill, and the `backfill`
// action listed right after the first `allocate` (once).
void EnableBackfill(const EngineBackfill& b, EngineConfig* e);

// Defragmentation of the running work planned by the engine itself (the `defrag` action:
// DefragAction::Plan, carried out by the migration executor), one plan at a time: every
// interval_s seconds (from interval_s on; 0: never), and when a job of at least trigger_min_gpus
// GPUs (at max replicas) is still waiting trigger_after_s after it was queued (0: never) — at most
// once per trigger_cooldown_s; a trigger within the cooldown looks again when it ends.
// With `assemble`, a trigger does not plan for the whole cluster: it assembles room for the one
// job that waited (issue 21, "topology that survives failures"). The nodes that would hold it with
// the least work running on them (ReserveAction::Plan: inside one domain of its required level,
// if it has one) are held for it (a Reservation, as the `reserve` action's holds; a hold it had —
// survivors of a failure — is re-planned, so a gang that lost a node gets the cheapest other node
// of its domain), and the work on them is migrated elsewhere make-before-break (DefragAction's
// evacuation of those nodes, under the migration budget; a node whose tasks cannot all move keeps
// them and is held until they end). The job starts as soon as they are free, on them or anywhere
// else it fits; the hold goes when it starts or leaves. One assembled hold at a time (unbounded
// holds starve the rest of the queue): while a job holds one, other jobs that come due look again
// one cooldown later, and the holder itself, still waiting a cooldown later, is planned for anew.
// The period's plans (interval_s) keep the objective.
struct EngineDefrag {
  bool enabled = false;  // default off (a driver may still ask for plans: Engine::Defrag)
  int64_t interval_s = 3600;
  int64_t trigger_after_s = 0;
  int64_t trigger_min_gpus = 8;
  int64_t trigger_cooldown_s = 600;
  DefragOptions plan;  // the planner's options
  bool assemble = false;  // a trigger assembles room for its job (above); default off
};

// What the engine's own defragmentation did (EngineDefrag).
struct DefragCounters {
  int64_t plans = 0;
  int64_t triggered = 0;          // plans made for a waiting job (not on the period)
  int64_t assembled = 0;          // of them, holds assembled for their job (EngineDefrag::assemble)
  int64_t vacated_planned = 0;    // nodes the plans meant to vacate
  int64_t plan_ns_max = 0, plan_ns_sum = 0;  // planning time (EngineConfig::planning_clock)
  // Another engine's counts added (e.g. a federation's members): counts and times summed, the
  // longest plan kept.
  DefragCounters& operator+=(const DefragCounters& o) {
    plans += o.plans;
    triggered += o.triggered;
    assembled += o.assembled;
    vacated_planned += o.vacated_planned;
    plan_ns_max = std::max(plan_ns_max, o.plan_ns_max);
    plan_ns_sum += o.plan_ns_sum;
    return *this;
  }
};

// The engine's configuration. Every field's default is the one a driver gets without saying.
struct EngineConfig {
  std::string name;  // the cluster's name, in messages
  // The cycle's actions in order (default: DefaultEngineActions()).
  std::vector<EngineAction> actions = DefaultEngineActions();
  std::string policy = "best-fit";  // placement policy (an openb policy name)
  // FGD's typical tasks (policy fgd): a driver that knows its workload (the simulator) gives them;
  // null (default): the engine learns them from the jobs submitted to it — one request per job,
  // as FGD counts a trace — and refreshes them (reopening its Session) when the count of jobs
  // reaches 1, 2, 4, ..., 1,024 and every 1,024 after. Before the first job FGD has no typical
  // task and every node scores alike.
  std::shared_ptr<const TypicalTasks> typical;
  uint64_t seed = 0;
  AllocateOptions allocate;
  int64_t grace_s = 60;      // Reclaim's eviction grace period (default 60 s, Alibaba's bound)
  // Who reclaims by priority: a waiting job at or above this priority (default kHpPriority: HP
  // jobs) may evict preemptible work of a lower priority (kube's PriorityClass preemption: 0,
  // every job). Below it a job reclaims only what its queue is owed. HP work is never a victim of
  // a headroom's drain whatever this is.
  int32_t preemptor_min_priority = kHpPriority;
  // How long victims take to exit within it (GracefulExit): 0 (default): the whole grace period;
  // else a lognormal of this mean and P95 bounded by grace_s (Alibaba: 13 s and 48 s). A Reclaim's
  // victims are freed, and its job starts, when the last of its victim jobs has exited.
  int64_t exit_mean_s = 0;
  int64_t exit_p95_s = 0;
  bool absorb = true;        // grow running elastic jobs toward max (default on)
  // Queue order: by priority (higher first, then arrival; default) or by arrival only.
  bool priority_queue = true;
  // A job evicted whole (a Reclaim, a Standby restore, a failed or drained node, a headroom's
  // drain) waits again at the front of the queue (kReturned with `requeued`); false (default):
  // it leaves the engine, back with the driver (a federation member's go back to the federation).
  bool requeue = false;
  // With requeue: a gang confined to one domain (a required level) that a node failure or drain
  // requeues whole holds its surviving replicas' nodes (a Reservation, like the `reserve`
  // action's holds) instead of giving them up, so that it starts again in its domain as soon as
  // one more node there is free (the failed one repaired, or another) rather than waiting for a
  // whole domain again (issue 21, "topology that survives failures"). Bounded by the job's
  // required_max_wait_s (once relaxed, any free node completes it) or by the repair. Default off.
  bool hold_survivors = false;
  // How long a Standby replica's borrowers get to leave when it is restored (default 60 s).
  int64_t standby_grace_s = 60;
  EngineReserve reserve;
  EngineBackfill backfill;
  EngineDefrag defrag;
  // Measures the engine's own defragmentation plans (DefragCounters); null: not measured. Nothing
  // the engine decides depends on it.
  const Stopwatch* planning_clock = nullptr;
  // Standby (SpotGPU): a queued preemptible job with priority <= lend_max_priority tries the
  // capacity lent by Standby replicas first (StandbyAction::PlaceOnLent), then free capacity.
  int32_t lend_max_priority = kHpPriority - 1;
  // The executor of Defrag's moves (live drivers set `acknowledged`).
  MigrationOptions migration;
  // HP headroom (none when empty): for each HeadroomSpec listed, room for one job of its shape
  // (max_replicas x per_replica GPUs, models, topology level; id, priority and preemptible are
  // ignored) is kept free of work below HP priority, so that HP jobs find it idle instead of
  // waiting for a Reclaim's victims. The engine holds each headroom's nodes (a node-hold
  // Reservation of an internal job, never started): work below HP cannot start there, HP jobs of
  // at least min_job_gpus GPUs may (the hold is lifted while such a job tries to start, Reclaims
  // or is quoted); smaller HP jobs Reclaim as usual. When HP work took some of them, the
  // cycle's `headroom` plans the shape anew (PreemptAction, the held nodes counting as free) and
  // holds the plan's nodes. Held nodes drain without losing much work: an elastic job
  // sheds its replicas there at once when it keeps whole steps (at least min); a preemptible job
  // is evicted whole once its work since its last checkpoint is at most headroom_max_loss_s;
  // anything else ends on its own. Evictions are events for kHeadroomJob. Drains and infeasible
  // plans are looked at again headroom_retry_s later. (A federation member's summary counts
  // held nodes as available at thresholds >= kHpPriority only.)
  std::vector<HeadroomSpec> headroom;
  int64_t headroom_retry_s = 60;
  int64_t headroom_max_loss_s = 300;
  // Multi-tenant queues (issue 20; QueueBook, quota/queues.h). None (default): jobs name no
  // queue and nothing below applies. With queues, every driver job names a leaf queue
  // (EngineJob::queue; an unknown queue, an inner one or a priority above the queue's ceiling
  // is rejected as `never`), and:
  //   allocate  with sharing.weights, the queue's pass runs twice: first each job may start only
  //             within its queue's (and ancestors') fair share, then (sharing.borrow) within
  //             their limits; without weights, one pass within the limits; without borrow, one
  //             pass within the guarantees. A job whose max replicas would not fit starts with
  //             fewer (a multiple of its step, at least its min) when that fits.
  //   reclaim   a waiting job whose queue is owed capacity (its start keeps the queue within
  //             its entitlement) Reclaims from queues above theirs, whatever its priority
  //             (QueueBook::Victims); an HP job not owed capacity takes only lower-priority work
  //             of its own queue or of queues above their entitlements. kReclaim's detail is
  //             "queue" for the former. Then (sharing.rebalance) a waiting job whose queue is
  //             short of its fair share by a tenth of it or more Reclaims what queues above their
  //             fair shares hold beyond them (QueueBook::RebalanceVictims), detail "fair share".
  //   absorb    an elastic job grows only within its queue's fair share (its limit without
  //             weights, its guarantee without borrow), and not for sharing.cooldown_s after a
  //             queue's Reclaim shrank it; the demand fair shares follow counts each running
  //             elastic job's room to grow.
  // `intern_queue_models`: quota model names new to the cluster are added to it (a live cluster
  // whose nodes have not all joined) instead of being errors.
  std::vector<QueueSpec> queues;
  SharingSpec sharing;
  bool intern_queue_models = false;
};

class Engine {
 public:
  // Takes the cluster (its nodes and topology; no jobs). Fails on an unknown policy, bad
  // migration options, a bad exit model or a headroom the cluster cannot hold.
  static StatusOr<std::unique_ptr<Engine>> Create(ClusterState cluster, EngineConfig config);
  // Not copied nor moved: its queue book watches its own members (QueueBook::WatchEvictions).
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const std::string& name() const { return options_.name; }
  // Submission of `job` at `now_s` under `mode` (see the header comment). A job already running
  // or waiting here is rejected.
  Admission Submit(const EngineJob& job, SubmitMode mode, int64_t now_s);
  // The driver cancels the job: its tasks stop and it leaves the queue. Unknown jobs are ignored.
  void Cancel(uint32_t job, int64_t now_s);
  // The job ended on its own (its work is done): as Cancel, its bound tasks finishing.
  void Finish(uint32_t job, int64_t now_s);
  // Replicas of the job bound now (0: not running).
  int32_t Running(uint32_t job) const;
  // What a Reclaim for `job` would evict now (nothing changed); nullopt when no Reclaim could
  // start it now (or nothing would need evicting: it fits a headroom or idle capacity).
  std::optional<ReclaimQuote> QuoteReclaim(const EngineJob& job, int64_t now_s);
  // The events since the last call (or RunCycle), in order.
  std::vector<EngineEvent> TakeEvents();

  // One scheduling cycle at `now_s`, or a part of it: runs EngineConfig::actions in order and
  // returns the events since the last TakeEvents or RunCycle (the inputs' first, then the cycle's).
  std::vector<EngineEvent> RunCycle(int64_t now_s, const CycleOptions& options = {});
  // The earliest time a cycle has work that no input brings (an eviction's grace end, a
  // restore, a move's deadline, a headroom's retry, a shrunk job's regrowth, the end of a hold
  // within a queue), if any.
  std::optional<int64_t> NextDue() const;
  // Exact check, for measuring needless preemptions: could `job` start here now on idle capacity
  // (PreemptAction's feasibility without victims)? Materialises the job if needed; changes no
  // placement.
  bool FitsIdleNow(const EngineJob& job, int64_t now_s);
  // Gives `job` its place in the engine's state (its JobId: ties among jobs follow their ids) and
  // nothing else: no placement, no queue. A rebuilt engine is told its jobs in the order the old
  // one knew them (then adopts and queues them: Adopt takes a known job that neither runs nor
  // waits). Returns false when the job cannot run here at all.
  bool Know(const EngineJob& job, int64_t now_s);
  // The state's jobs that keep the HP headrooms (EngineConfig::headroom), in order.
  std::vector<JobId> HeadroomJobs() const;

  // FGD's typical tasks in use (null unless the policy is fgd).
  const TypicalTasks* typical() const { return typical_.get(); }
  // An engine rebuilt in place of `old` over the same nodes (the service drops ended jobs) goes
  // on where `old` was in what the inputs that rebuilt it do not tell, so that it decides as
  // `old` would. Call it once the rebuilt engine holds its jobs (Adopt, Submit).
  // - FGD's typical tasks: learned on where `old` was, with `old`'s tie-break order (nothing
  //   without learning).
  // - With `jobs`, for each job both engines know (by driver id): when it was submitted (a hold's
  //   after_s) and, waiting, when it was queued, with its waits under way (the relaxing of its
  //   required level, which it keeps as relaxed so far; the defragmentation trigger); the nodes
  //   it resumes on (Job::resume_nodes); the ends of its no-borrow and no-grow periods after a
  //   queue's Reclaim. And the queues' cooldowns and decayed usage (QueueBook::Inherit).
  // - The evacuations going on (Evacuate), with their next plans' times.
  void Inherit(const Engine& old, bool jobs);
  // What this engine knows of jobs and queues beyond its inputs (CarriedJob, CarriedQueue): of
  // the jobs `jobs` names that it knows (every job it knows when null, ended ones too), and of
  // every queue. What Inherit carries with `jobs`, as data a driver can store.
  EngineCarry Carried(const std::vector<uint32_t>* jobs = nullptr) const;
  // The driver ids of the jobs whose part of Carried may have changed since the last call (its
  // queueing and place in the queue, required level, waits, resume hint, run's start, no-borrow
  // and no-grow periods, Reclaim or Standby restores under way), each once.
  std::vector<uint32_t> TakeCarryLog();
  // Goes on from `carry` (Carried of the engine this one replaces, as that one last was): each
  // job it names that this engine knows takes its submission time, resume hint and no-borrow and
  // no-grow ends; running here, its Standby restores under way (for the replicas still in
  // Standby; the borrowers still bound get their notices again); waiting here, its queueing time,
  // relaxed required level and pending waits and its Reclaim under way (for the victims' replicas
  // still bound, noticed again). Each queue by name its cooldown and decayed usage. Call it once
  // the jobs are known, adopted (with their runs' starts: CarriedJob::started_s) and queued (in
  // their carried order: CarriedJob::position). An input.
  void RestoreCarried(const EngineCarry& carry, int64_t now_s);

  // Called with each event as it happens, the state as it is then (e.g. a start's placement
  // before the rest of the cycle changes it). The events still go to TakeEvents / RunCycle.
  void SetEventObserver(std::function<void(const EngineEvent&)> f) { observer_ = std::move(f); }
  // The driver id of a job of the state (nullopt: an internal job, e.g. a headroom's).
  std::optional<uint32_t> DriverIdOf(JobId job) const;
  // The engine's own defragmentation (EngineConfig::defrag) and holds (EngineConfig::reserve).
  const DefragCounters& defrag_counters() const { return defrag_counters_; }
  int64_t reservations_made() const { return reservations_made_; }
  // Gives up every move under way (their reservations released): a simulated run ends.
  void AbortMoves(int64_t now_s);

  // Called as each Reclaim is decided (before anything else changes), with the driver's job id
  // and the time: lets a driver measure whether the preemption was needed.
  void SetReclaimObserver(std::function<void(uint32_t job, int64_t now_s)> f) { reclaim_observer_ = std::move(f); }

  // ---- A live cluster: nodes come and go, jobs survive restarts ----
  // Adds a node of `gpu_model` (empty: CPU-only). `domains`: for each plane name, the node's
  // domain names from the plane's top level down (as many as the plane has levels); planes are
  // created on first use with levels named level0, level1, ... unless `plane_levels` names them
  // (plane name -> level names) before the first node. Errors: InvalidArgument (duplicate
  // name, too many GPUs, unknown plane, wrong number of names, inconsistent nesting). Before the
  // next decision the tie-break order is drawn anew over all nodes (the seeded permutation of the
  // nodes by name, as for a cluster given whole at Create), so that it does not depend on when
  // each node joined.
  StatusOr<NodeId> AddNode(NodeSpec spec, const std::string& gpu_model,
                           const std::vector<std::pair<std::string, std::vector<std::string>>>& domains);
  // Declares a plane and its levels (top first). REQUIRES: before any node is added.
  Status AddPlane(const std::string& name, const std::vector<std::string>& levels);
  // Cordons the node (no new placements; its tasks keep running) or makes it ready again.
  void SetCordoned(NodeId node, bool cordoned);
  // The node failed at `now_s`: it takes no work and every task on it stops. Each job that lost
  // replicas keeps the largest multiple of its step (with Align; else every survivor) that it
  // still holds when that is at least its min — shrunk, kShrunk "node failed" — and is evicted
  // whole otherwise (kReturned, "node failed"): the simulator's rule (NodeFailureAction).
  void FailNode(NodeId node, int64_t now_s);
  // Drain: the node takes no new work (cordoned) and every task on it stops now, as FailNode
  // handles them (detail "node drained"); moves onto it are given up at the next step (kMoveAborted).
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
    // With queues: the quota that holds the job, if one does ("queue 'team-a' would hold 72 of
    // its limit of 64 GPUs"); and whether its queue is owed capacity it may take back by Reclaim.
    std::string quota;
    bool owed = false;
    // With queues, when Reclaim could make room: the queues its victims run in (leaves, in the
    // tree's order) — whose borrowed capacity it would take back.
    std::vector<std::string> reclaim_from;
    // Its topology requirement now, when it has one: "requires one asw; accepts one spine at
    // t=3600" (EngineJob::required_max_wait_s), "required one asw until t=3600; accepts any
    // placement now".
    std::string topology;
    // With backfill, for the job planned for: "planned to start at T on D" (D: the domain of its
    // required level, else "N nodes"); empty otherwise.
    std::string planned;
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
  void SetAbsorb(bool absorb);
  // Changes how long a Standby replica's borrowers get to leave (later restores).
  void SetStandbyGrace(int64_t grace_s);
  const EngineConfig& options() const { return options_; }
  // Replaces the multi-tenant queues and how they share (EngineConfig::queues and ::sharing)
  // while jobs run — an admin's change. Every job that runs or waits keeps its queue by name,
  // which must stay a leaf of the new tree; a job already admitted keeps its place above a
  // lowered ceiling or limit (the new bounds hold what starts or grows from now on, and a
  // Reclaim may take back what a queue now holds above its entitlement). Jobs admitted while
  // there were no queues run in none until they end; with no queues (an empty list) every job
  // runs in none from now on. Cooldowns and time-based usage start afresh. Errors, nothing
  // changed: QueueBook::Create's (`*line`, when not null, set as there), or "queue 'x': field
  // 'name': job 'y' still runs or waits in it, so it must stay a leaf".
  Status SetQueues(std::vector<QueueSpec> queues, SharingSpec sharing, int* line = nullptr);

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
  // their GPUs and CPU are lent to spot work, see EngineConfig::lend_max_priority). Leaving:
  // Standby replicas, oldest first, begin their restore: when no borrower is in the way
  // (StandbyAction::RestoreVictims) the replica leaves Standby at once; otherwise the borrowers'
  // jobs get eviction notices and, grace_s later, are evicted whole (kReturned, detail "standby
  // restore") and the replica leaves Standby. A restoring replica counts as leaving. False when
  // the job does not run here.
  bool SetStandby(uint32_t job, int32_t replicas, int64_t now_s);
  // Replaces `job`'s Standby windows (times of this engine; empty: none): from from_s until
  // standby_grace_s before to_s (so that a restore completes by to_s), `replicas` of it are in
  // Standby whenever it runs — the cycle's `standby` action brings it to that target (as
  // SetStandby would), before the queue's pass and again after it, so a job that starts in a
  // window enters Standby in the same cycle; outside its windows the target is 0. The window
  // edges are engine due times.
  void SetStandbyWindows(uint32_t job, std::vector<StandbyWindowSpec> windows, int64_t now_s);
  // A job with EngineJob::acknowledge_standby: `task`, entering Standby (its kStandby
  // logged when it was chosen), left its GPUs (`ok`: they are lent from now on) or could not (its standby_enter hook failed:
  // kStandbyRefused with `why`; the replica keeps its GPUs and is not asked again until its job's
  // Standby target drops to 0 — another replica of the job may be asked in its place). False when `task` is not entering Standby (it ended, moved or
  // was called back meanwhile): nothing changes.
  bool AcknowledgeStandby(TaskId task, bool ok, const std::string& why);
  // Whether `task` was chosen for Standby and its acknowledgement is awaited.
  bool EnteringStandby(TaskId task) const;
  // `job`'s replicas in Standby, restoring ones included (0 when it does not run here).
  int32_t InStandby(uint32_t job) const;
  // `job`'s Standby replicas whose restore is under way (0 when it does not run here).
  int32_t Restoring(uint32_t job) const;

  // ---- Live migration: issue 5's planner (DefragAction) and executor (MigrationExecutor) ----
  // Plans a defragmentation of the running work with `options` (tasks being evicted are locked)
  // and hands the plan's moves to the engine's executor (EngineConfig::migration); they start in
  // the cycle's `moves` as its budget allows, make-before-break. Returns the moves kept: 0 while an earlier
  // plan's moves still run, or when nothing is worth moving. InvalidArgument for bad options.
  StatusOr<int64_t> Defrag(const DefragOptions& options, int64_t now_s);
  // A drain by migration: cordons `node` (no new work) and plans moves of every task on it to other
  // nodes (DefragAction with DefragOptions::evacuate), started as Defrag's are — also while an
  // earlier plan runs. Returns the moves kept now: 0 when the node is empty or none of its tasks
  // can move now (Standby, borrowed, locked, moved already by a defragmentation under way, or no
  // room). The node stays cordoned either way, and the evacuation goes on until it holds no task:
  // the cycle's `moves` action plans again for the tasks still there — not moving, their moves
  // given up or cancelled, or no room before — at most every kEvacuateRetryS seconds and only when
  // the cluster changed since the last plan (ContinueEvacuations). It ends when the node is empty
  // (it stays cordoned), or when it is uncordoned, cordoned again, drained, failed or restored.
  int64_t Evacuate(NodeId node, int64_t now_s);
  static constexpr int64_t kEvacuateRetryS = 60;
  // Whether an evacuation of `node` goes on (it still holds tasks; see Evacuate).
  bool Evacuating(NodeId node) const;
  // A move's new instance runs (`ready`) or failed (acknowledged mode); takes effect at the next
  // cycle. False when `task` has no starting move.
  bool AcknowledgeMove(TaskId task, bool ready);
  // The moves whose new instance is starting: the task, its target node and GPUs there.
  struct StartingMove {
    TaskId task;
    NodeId to;
    GpuIndices gpus;
    // Which move it is: never the same for two moves of one engine (the executor's index), so a
    // driver tells a new move of a task from the one it knew (given up and planned anew in one
    // cycle, maybe onto the same node and GPUs).
    size_t move = 0;
  };
  std::vector<StartingMove> StartingMoves() const;
  // Driver ids of the jobs whose placement changed without an EngineEvent since the last call:
  // a move started or ended, a replica entered or left Standby.
  std::vector<uint32_t> TakeTouched();
  const MigrationCounters& migration_counters() const { return migrations_.counters(); }

  // The state's job of driver job `job`; nullopt when never materialised here.
  std::optional<JobId> JobOf(uint32_t job) const;
  // Where one replica of a job runs (Adopt).
  using Placement = ReplicaPlacement;
  // Rebuilds a job that was running before a restart: materialises `job`, binds each listed
  // replica where it runs, and marks the job running since `started_s` (no event). A rank at or
  // above the job's max is adopted too (a failure shrank the job from its low ranks, then Resize
  // lowered its max: the high ones ran on). Returns false, binding nothing, when the job is
  // already here (but for one only known: Know), more replicas than its max are listed, a rank
  // is listed twice or is not below kMaxReplicaRanks, or a placement does not fit (its node is
  // down or its capacity is taken; a borrowed one: its GPUs are not lent now — adopt the lenders
  // first).
  bool Adopt(const EngineJob& job, const std::vector<Placement>& placements, int64_t started_s);

  // ---- The input log (inputs.h) ----
  // Appends every input applied from now on to `*log` (null: stops). Rebuilding an engine in
  // place of another (Inherit) is not an input: a log replays from the engine's creation.
  // REQUIRES: `log` outlives the recording.
  void RecordInputs(std::vector<EngineInput>* log) { record_ = log; }
  // Applies one input at its time, as the method it records would (the outputs go where that
  // method's go: events to TakeEvents, notices to TakeEvictionNotices, ...).
  void Apply(const EngineInput& in);
  // The engine's current time: the latest time an input carried (0 before any).
  int64_t now() const { return now_; }

  const ClusterState& state() const { return state_; }
  // The multi-tenant queues (EngineConfig::queues; off without them).
  const QueueBook& queue_book() const { return book_; }
  // The queues' reference shares now, for measuring fairness: weighted (whatever
  // SharingSpec::weights says), instant, over the same demand the cycle shares by (the waiting
  // jobs and the running elastic jobs' room to grow). Empty with the book off.
  QueueShares ReferenceShares() const;
  // What each queue holds and is owed now (what the service's GET /v1/queues shows), per queue
  // in the tree's order, GPU milli of the total-GPU dimension: held (its jobs' bound GPUs, its
  // subtree's included), guarantee, limit (kNoLimit: none), fair share (ReferenceShares),
  // entitlement (the last cycle's: what its Reclaim restores), borrowed (held above the
  // guarantee), lent (its Standby replicas' GPUs), pending (its waiting jobs at max replicas),
  // and its waiting and running jobs. Empty without queues. O(queues + tasks + jobs).
  struct QueueFigures {
    int64_t held = 0, guarantee = 0, limit = kNoLimit, fair = 0, entitled = 0, borrowed = 0, lent = 0, pending = 0;
    int64_t waiting_jobs = 0, running_jobs = 0;
  };
  std::vector<QueueFigures> QueueStatus() const;
  // Jobs waiting in the queue.
  size_t queued() const { return queue_.size(); }
  // The driver ids of the queued jobs, in queue order.
  std::vector<uint32_t> QueuedInOrder() const;
  // Jobs the engine has materialised (running, waiting, or ended: it never forgets one).
  size_t jobs_known() const { return locals_.size(); }
  // Whether nothing is under way that a rebuilt engine would not know of: no Reclaim in its grace
  // period, no Standby restore, no Standby entry awaiting its acknowledgement, no move. An engine
  // rebuilt then (its nodes added in id order, its running jobs adopted where they run — lenders
  // before borrowers —, its queue submitted again in order, its holds reserved again) decides as
  // this one would, without the ended jobs (a refused Standby entry is asked for again).
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
    bool acknowledge_standby = false;  // EngineJob::acknowledge_standby
    // ReclaimQueued's key when its Reclaim was last refused (a job holding a reservation of its own).
    uint64_t refused_seq = UINT64_MAX;
    uint64_t refused_epoch = kAnyEpoch;  // RefusalEpoch of that refusal
    int64_t submitted = -1;  // when it was first submitted
    int64_t queued_at = -1;  // when it last joined the queue
    int64_t gpus = 0;        // GPUs at max replicas
    bool demand_counted = false;  // its demand is in its queue's (QueueBook::Pending)
    int32_t elastic_counted = 0;  // its room to grow counted in its queue's demand (QueueBook::Extra)
    int64_t no_grow_until = 0;    // a queue's Reclaim shrank it: Absorb leaves it alone until then
    int64_t no_borrow_until = 0;  // a queue's Reclaim evicted it: it starts only within fair shares until then
    int32_t claimed = 0;          // replicas its queue's Reclaim under way claims (QueueBook::Claim); 0: none
    // Replicas of its shape whose room in its leaf queue its Reclaim within the queue made, held
    // for it until it starts or leaves, or past the cycles of the second its victims left
    // (WithinClaimed); 0: none.
    int32_t within_claim = 0;
    int64_t within_claim_until = -1;  // the second its victims left (the hold ends after it); -1: not yet
    size_t elastic_slot = SIZE_MAX;  // its index in elastic_of_class_[elastic_cls] while it is there
    int elastic_cls = -1;            // the class it is filed under there (-1: none)
    // Relaxed required levels (EngineJob::required_max_wait_s): its own required level (-1: none)
    // and the wait after which it accepts the next level up (0: never).
    int32_t required_level = -1, preferred_level = -1;  // its own (EngineJob's) levels
    int64_t required_max_wait_s = 0;
    // Waiting: when it next relaxes its required level and next triggers defragmentation (its
    // live entries in relax_ and triggers_; -1: none).
    int64_t relax_at = -1, trigger_at = -1;
    bool carry_logged = false;  // in carry_log_
  };
  // Locals whose carried state (Carried) may have changed since TakeCarryLog.
  std::vector<size_t> carry_log_;
  // The holds and backfill plans as TakeCarryLog last saw them, per local (its hold, planned
  // start): holds change in many places (the reserve action's renewals among them), so
  // TakeCarryLog compares rather than each place logging.
  std::map<size_t, std::pair<ReservationId, int64_t>> holds_seen_;
  // Local li's hold and planned start now (invalid, -1: none; a Reclaim's hold is its own).
  std::pair<ReservationId, int64_t> HoldOf(size_t li) const;
  // RestoreJob's part for a waiting job's hold and backfill plan.
  void RestoreHold(size_t li, const CarriedJob& c);
  void LogCarry(size_t li) {
    if (locals_[li].carry_logged) return;
    locals_[li].carry_logged = true;
    carry_log_.push_back(li);
  }
  // Local li waits for its next relax (relax_at) or defragmentation trigger (trigger_at) at `at`
  // (-1: none any more): the heaps' entry pushed for it, its field set and logged.
  void ArmRelax(size_t li, int64_t at, int64_t queued_at);
  void ArmTrigger(size_t li, int64_t at, int64_t queued_at);
  CarriedJob CarriedOf(size_t li) const;
  // RestoreCarried without recording an input (Inherit's part too), and its part for one job.
  void RestoreCarry(const EngineCarry& carry);
  void RestoreJob(const CarriedJob& c);
  // RestoreJob's part for waiting local li's Reclaim under way (CarriedJob::reclaim_at).
  void RestoreReclaim(size_t li, const CarriedJob& c);
  // RestoreJob's part for running local li's Standby restores under way (CarriedJob::restores).
  void RestoreStandbyRestores(size_t li, const CarriedJob& c);
  // The multi-tenant queues (EngineConfig::queues); off without them.
  QueueBook book_;
  // Local li joins or leaves its queue's demand (while it waits in the engine's queue).
  void CountDemand(size_t li, bool waiting);
  // The shares now, the running elastic jobs' room to grow counted as demand (after SyncJobLog).
  void RefreshShares(int64_t now_s);
  // For the jobs whose bound tasks changed (ClusterState::job_log, then cleared): tells the book
  // which queues' usage changed, counts their room to grow again (SyncElastic) and files them as
  // growable or not (SyncGrowable).
  void SyncJobLog();
  // Local li's room to grow as counted in its queue's demand follows what it is now: max replicas
  // less bound ones while it runs elastic (elastic_running_), else none.
  void SyncElastic(size_t li);
  // Local li's queue Reclaim is over (it started, left, or its victims are gone): its claim ends.
  void Unclaim(size_t li);
  // Local li holds the room of `replicas` replicas in its leaf queue (a Reclaim within its queue
  // made it: Local::within_claim) until it starts or leaves, or, `until` >= 0, no longer than the
  // cycles at `until` (its victims left then); 0: it holds none now.
  void ClaimWithin(size_t li, int32_t replicas, int64_t until = -1);
  // Ends the holds whose victims left before `now_s` and whose job did not start in the room they
  // left: the job may Reclaim again if it still can, but does not keep its leaf's other jobs out
  // of room it cannot use (its queue's limit lowered meanwhile, say). O(such holds).
  void ExpireWithinClaims(int64_t now_s);
  // What the Reclaims within leaf queue `leaf` hold for their jobs other than local `except`
  // (per QueueUsage dimension, each job's min replicas in whole steps of its request): room that
  // the leaf's other jobs may not start or grow into. O(such jobs).
  QueueUsage WithinClaimed(size_t leaf, size_t except) const;
  // `room` (per QueueUsage dimension, INT64_MAX: unbounded) less WithinClaimed(leaf, except), at
  // `floor` at least.
  void LessWithinClaimed(size_t leaf, size_t except, QueueUsage& room, int64_t floor = 0) const;
  std::vector<size_t> within_claims_;  // the locals with a within_claim
  // Adds the running elastic jobs' room to grow to `want` (per queue).
  void AddElasticDemand(std::vector<QueueUsage>& want) const;
  // How many replicas of local li its queue's `bound` lets it hold in all (INT32_MAX: no queue).
  int32_t QueueRoom(size_t li, QueueBook::Bound bound) const { return QueueRoom(li, bound, bound); }
  // The same with `leaf_bound` in its leaf queue and `bound` in the ancestors.
  int32_t QueueRoom(size_t li, QueueBook::Bound leaf_bound, QueueBook::Bound bound) const;
  // The most replicas, in whole steps, local li's queue lets it hold at `now_s` in the widest
  // bound its passes give it (INT32_MAX without queues; 0 when that is below its min): its
  // guarantee without borrowing, its leaf's guarantee within its ancestors' limits while it is
  // kept from borrowing (no_borrow_until), else its limits. (The fair-share pass is narrower; a
  // job only its fair share holds back still starts in the pass after it.) Backfill plans and
  // backfills within it.
  int32_t StartRoom(size_t li, int64_t now_s) const;
  // The bounds StartRoom counts local li's room in at `now_s`: (its leaf's, its ancestors').
  std::pair<QueueBook::Bound, QueueBook::Bound> StartBounds(size_t li, int64_t now_s) const;
  // TryStart with at most `cap` replicas (its max when that is lower).
  JobAttempt TryStartUpTo(size_t li, int32_t cap, int64_t now_s);
  // What a waiting job of one shape needs of its queue's room (a copy of the shape's, kept
  // contiguous per leaf queue for ListShapes).
  struct ShapeNeed {
    int shape = -1;
    int32_t min_replicas = 1;  // its min replicas
    int32_t min_start = 1;     // its min replicas in whole steps (with align)
    int32_t step = 1;          // its step (1 without align)
    // One replica's request in its queue's dimensions (QueueBook::Request, surely): the model's
    // dimension (-1: none, or several models), GPU milli, CPU milli, memory MiB.
    int32_t one_model = -1;
    int64_t one_gpu = 0, one_cpu = 0, one_mem = 0;
    // How many replicas a queue with room `room` per dimension (QueueBook::RoomByDim,
    // RoomWithClaims) has room for: the least over the dimensions it requests (INT64_MAX:
    // nothing bounds them).
    int64_t Replicas(const QueueUsage& room) const;
    // Whether such a queue has room for its min replicas, in whole steps (as QueueRoom for a job
    // with nothing bound).
    bool Fits(const QueueUsage& room) const {
      if (min_start < 1) return std::min<int64_t>(Replicas(room), INT32_MAX) / step * step >= min_start;
      // The same without a division (min_start is a whole number of steps, >= 1).
      return Has(room, min_start);
    }
    // Whether a queue with room `room` (RoomWithClaims within its entitlement) may be owed its
    // min replicas (QueueBook::Owed's test at the leaf): room for them in each dimension it
    // requests; a job of no replicas requests nothing.
    bool MayBeOwed(const QueueUsage& room) const { return min_replicas < 1 || Has(room, min_replicas); }
    // Room for `replicas` (>= 1) replicas in each dimension it requests (INT64_MAX: unbounded).
    bool Has(const QueueUsage& room, int64_t replicas) const {
      const auto has = [&](size_t d, int64_t one) { return one <= 0 || room[d] >= replicas * one; };
      return has(kQueueGpu, one_gpu) && (one_model < 0 || has(kQueueModel + static_cast<size_t>(one_model), one_gpu)) &&
             has(kQueueCpu, one_cpu) && has(kQueueMemory, one_mem);
    }
  };
  // What a cycle's first allocate pass (kFair) found, for its second (kLimit).
  // The shapes the first pass looks at are the listed ones (PendingQueue::SetListed): those whose
  // queue had room, at the pass's start, for their min replicas (Engine::QueueRoom within fair
  // shares; for a queue with a job kept from borrowing, or within its guarantee), and the shapes
  // of jobs naming no queue (PendingQueue list kFirstPass). The others are held back unseen: room
  // only shrinks within the cycle. The second pass tries the shapes with room within the limits
  // (whether listed for the first or not: what the first tried is done with, see ListLeaf) and
  // those the first held back in the pass (list kSecondPass).
  struct PassMarks {
    std::vector<int> waited;  // the shapes held back in the pass for their queue's room (repeats possible)
    bool any_held = false;    // some shape is held back (here or by ListShapes)
    std::vector<char> full;  // per class: a job of it found no capacity
    std::vector<char> spent;  // per leaf queue: HoldBack left none of its shapes listed
    bool own_started_second = false;  // a job holding nodes of its own started in the second pass
  };
  // The fair-share passes of TryQueue (queues with weights and borrowing): the first within fair
  // shares, the second within limits. Returns whether a job holding nodes of its own started in
  // either (what it leaves free has not been offered to the jobs either pass tried before it, nor,
  // after the second, to the first pass's).
  bool FairSharePasses(int64_t now_s);
  // Lists the shapes of every leaf queue for the first pass (above) and returns whether any is
  // held back. A leaf's shapes are looked at again only when its room (QueueBook::RoomByDim
  // within fair shares, within the limits, and within its guarantee when `keeps` it) changed
  // since they last were, or it has new shapes; its room is computed again only when what a
  // queue on its path holds or its fair share changed: O(queues x dimensions + the changed
  // leaves' rooms and shapes).
  bool ListShapes(const std::vector<char>& keeps);
  // Leaf q's rooms within fair shares, within the limits (unless `limits` is false: those entries
  // are left as they are) and, `kept`, within its guarantee (else zeros), in the managed
  // dimensions: 3 x QueueBook::managed_count() entries.
  void LeafRooms(size_t q, bool kept, int64_t* rooms, bool limits = true) const;
  // Leaf q's rooms (LeafRooms, never below 0) each capped at what its shapes' listing can tell
  // apart: a shape fits a room when the room reaches min_start x one replica's need in each
  // dimension it needs (ShapeNeed::Fits), so a room at or above every shape's need lists as that
  // need does. ListLeaf lists the same with the capped rooms, and a leaf whose capped rooms did
  // not change (e.g. far above its thresholds, or at 0) is not listed anew.
  void ClampRooms(size_t q, int64_t* rooms);
  // A leaf's rooms (LeafRooms) per dimension, and whether its shapes are listed for the first pass.
  struct LeafRoom {
    QueueUsage fair{}, limit{}, kept{};
    bool is_kept = false;
    bool none = false;               // no GPU room for the least of its shapes
    bool none_within_limit = false;  // the same within the limits
    // Listed for the first pass: room for its min replicas within the fair shares, or within its
    // guarantee for a leaf kept from borrowing.
    bool Lists(const ShapeNeed& need) const { return !none && (need.Fits(fair) || (is_kept && need.Fits(kept))); }
  };
  LeafRoom RoomOf(size_t q, bool kept, const int64_t* rooms) const;
  // Lists leaf q's shapes for both passes with its rooms `rooms` (LeafRooms).
  void ListLeaf(size_t q, bool kept, const std::vector<int64_t>& rooms);
  // In the first pass, a job of leaf q started or found no room (a start elsewhere on its path
  // took it): the leaf's listed shapes without room now are held back (unlisted and marked
  // waited, as if the pass had come to each and found no room), so that the pass does not come
  // to each of them in turn.
  void HoldBack(size_t q, PassMarks& marks);
  // HoldBack for leaf q, then for the other leaves below its parent, and below each ancestor with
  // no GPU room left within its fair share (QueueBook::GpuRoom): a start in q took the room they
  // share, so the pass need not come to each of them to find that out. O(the leaves below those).
  void HoldBackAround(size_t q, PassMarks& marks);
  // Per leaf queue: the rooms its shapes were last listed with (ListShapes).
  struct LeafList {
    bool valid = false;          // false: list its shapes again
    bool kept = false;           // whether its room within its guarantee counted
    std::vector<int64_t> rooms;  // within fair shares, the limits, its guarantee (managed dimensions)
    int64_t held = 0;            // its shapes held back
    // Per shape (shapes_of_queue_[q]'s order): bit kFirstPass / kSecondPass when listed for that
    // pass by the last listing (valid: still so; anything else that lists or unlists one of its
    // shapes makes the leaf not valid).
    std::vector<char> listed;
    // HoldBack held some of its shapes back after the listing and recorded its rooms then: the
    // next listing computes its rooms whether or not its path changed.
    bool touched = false;
    // ClampRooms' cap per managed dimension, for its first `clamp_shapes` shapes (shapes are
    // only added; SetQueues clears the lists).
    std::vector<int64_t> clamp;
    size_t clamp_shapes = 0;
  };
  std::vector<LeafList> leaf_lists_;
  // Leaf q's shapes are listed anew at the next ListShapes (they changed, or were held back).
  void Unlist(size_t q);
  std::vector<size_t> relist_;       // the leaves Unlist named since the last ListShapes
  std::vector<size_t> kept_leaves_;  // the leaves kept from borrowing at the last ListShapes
  // Per queue: QueueBook::ManagedFigures at the last ListShapes (2 x managed dimensions each).
  std::vector<int64_t> queue_figures_;
  int64_t shapes_held_ = 0;  // the sum of leaf_lists_[q].held
  static constexpr int kFirstPass = 0, kSecondPass = 1;  // the passes' lists of shapes
  // One pass over the queue within `bound` (none: no queues). A first pass (kFair) marks in
  // `marks` the shapes it held back for their queue's room and the classes that found no
  // capacity; a kLimit pass given `marks` tries only the shapes held back in classes that did
  // not. Returns whether a job holding nodes of its own started: what its hold kept beyond its
  // start is free now, and the jobs the pass tried before it did not see it.
  bool QueuePass(int64_t now_s, std::optional<QueueBook::Bound> bound, PassMarks* marks);
  // Queues local li (at the front: a requeue) at now_s; arms its defragmentation trigger.
  void Enqueue(size_t li, bool front, int64_t now_s);
  // The cycle's `reserve` and `defrag` actions (EngineConfig::reserve, ::defrag).
  void RenewHolds(int64_t now_s);
  // The cycle's `backfill` action (EngineConfig::backfill).
  void Backfill(int64_t now_s);
  // Whether a job of `spec` tries the GPUs Standby replicas lend before free ones (preemptible, at
  // most EngineConfig::lend_max_priority).
  bool MayBorrowLent(const JobSpec& spec) const { return spec.preemptible && spec.priority <= options_.lend_max_priority; }
  // Why waiting job `li` is not one backfill plans for now (being Reclaimed for; conservative:
  // holding a reservation of its own — kStays; no room in its queue — kShapeWaits), or nullopt
  // when it is one.
  std::optional<PendingQueue::Outcome> NotPlannedFor(size_t li, int64_t now_s) const;
  // Backfill found no job to plan for at its last round and one waits now that it would plan for
  // (a Reclaim ended, a hold went, a job was requeued after backfill's action): its next action
  // plans at once.
  bool BackfillDue(int64_t now_s);
  // The jobs that end after `after_s` and by `start_s` (now + walltime_s) start now where they can
  // (a pass over the queue), except the planned ones (`is_planned`, per local) and those holding
  // a reservation.
  void BackfillBefore(int64_t after_s, int64_t start_s, const std::vector<char>& is_planned, int64_t now_s);
  struct Planned {
    size_t li = SIZE_MAX;     // the job planned for
    ReservationId hold;       // the hold made for it (invalid: its nodes are held for earlier plans)
    int64_t start_s = 0;
    std::string where;        // its domain's name, or "N nodes"
    std::vector<NodeId> nodes;  // the plan's nodes not held by others when it was made
  };
  std::vector<Planned> planned_;  // this round's plans, in queue order
  int64_t next_backfill_ = 0;  // the next planning (0: at the first cycle)
  // Jobs with a walltime started so far, and the head whose plan last found no time with that
  // count: it is planned for again only when another such job started (a plan needs their ends)
  // or the head changed — so that a workload without walltimes costs no planning.
  int64_t walltime_starts_ = 0;
  std::vector<int64_t> unplanned_;  // per local: walltime_starts_ when its plan last found no time (-1: none)
  std::pair<size_t, int64_t> unplanned_head_{SIZE_MAX, -1};  // EASY: the last such job and count
  void PlanDefrag(int64_t now_s);
  // EngineDefrag::assemble for waiting job li: holds its nodes and submits their evacuation.
  void Assemble(size_t li, int64_t now_s);
  // Ends a job's tasks and its place here (Cancel, Finish).
  void Leave(uint32_t job, int64_t now_s, bool finished);
  // "TASK@NODE:GPUS" of a bound task.
  std::string Where(TaskId t) const;
  // Logs the executor's move events.
  void LogMoves();
  // Tasks defragmentation must not move: those being evicted and those locked by their job.
  std::vector<char> Locked() const;
  Engine(ClusterState cluster, EngineConfig options);
  // The local job of `job`, materialised on first use; nullopt (and `why`) when the cluster has no
  // model or topology level for it.
  std::optional<size_t> Materialize(const EngineJob& job, std::string* why);
  // Gives job `id` tasks like its first until it has `n` (a max raised, a rank above the max
  // adopted); none when it has as many.
  void AddTasksUpTo(JobId id, size_t n);
  void OnStart(size_t li, int64_t now_s, int32_t granted);
  // The interned shape of a job: its request, bounds, step, topology constraint and priority.
  int ShapeOf(JobId id);
  // Plans and starts a Reclaim for queued or dispatched local job li; false (nothing changed)
  // when there is no such plan, with `why`.
  bool StartReclaim(size_t li, int64_t now_s, std::string* why);
  void TryQueue(int64_t now_s);
  void EndEvictions(int64_t now_s);
  void ReclaimQueued(int64_t now_s);
  // The cycle's `reclaim`, after ReclaimQueued (SharingSpec::rebalance): each waiting job whose
  // queue is short of its fair share Reclaims, in queue order, what queues above their fair shares
  // hold beyond them (QueueBook::RebalanceVictims); not a job a queue's Reclaim evicted whole
  // while it may not borrow (Local::no_borrow_until). kReclaim's detail is "fair share".
  void Rebalance(int64_t now_s);
  // What the book answers, within one pass of ReclaimQueued or Rebalance, for a waiting job
  // without a reservation of its own (QueueBook::Supply; RebalanceVictims' `below` and supply)
  // depends only on the key: its queue, one replica's request, its models, the replicas asked and
  // whether it is HP — so the shapes that differ only in a priority, a max or a walltime ask once.
  // Kept while what the book's figures depend on is unchanged: the pass clears it after a plan.
  using AskKey = std::array<int64_t, 7>;
  std::optional<AskKey> AskKeyOf(size_t li, int32_t replicas) const;  // nullopt: not keyed (ask the book)
  struct BookAnswer {
    bool yes = false;  // below its fair share (Rebalance)
    int64_t supply = INT64_MAX;
  };
  using BookAnswers = std::map<AskKey, BookAnswer>;
  // The book's answer for local li asking `replicas`: from `asked` (may be null: not kept) when
  // AskKeyOf keys it, else (and the first time) `ask()`, which is then kept.
  BookAnswer Answer(BookAnswers* asked, size_t li, int32_t replicas, const std::function<BookAnswer()>& ask) const;
  uint64_t plans_ = 0;  // Reclaim plans made (ReclaimWith calls)
  // Reclaims started (ReclaimWith's plans kept). Each changes what other plans may take (its
  // victims are leaving and count against their queues' budgets, and no other plan takes them),
  // so the refusal memos of ReclaimQueued and Rebalance hold only while it is unchanged.
  uint64_t reclaims_ = 0;
  // StartReclaim's second half: plans local li's Reclaim with `filter` and, when there is a plan
  // none of whose victims is already leaving, holds its nodes, schedules the evictions and logs
  // kReclaim with `detail`. `owed`: a queue's Reclaim (its victims' detail "queue reclaim", the
  // cooldown and the claim of QueueBook::Reclaimed and ::Claim). False (nothing changed) with
  // `why` otherwise.
  // PreemptAction::Plan for job `id` under the configuration, with `filter` given what the victim
  // selection needs from the engine (victims: volcano — the policy's node scores).
  PreemptionPlan PlanReclaim(JobId id, int64_t now_s, VictimFilter filter) const;
  // `quota` (within-queue preemption): the candidates (QuotaCandidates; `filter` admits only
  // them): the plan's victims and as many more of them as the job's queue needs (QuotaVictims)
  // leave whole.
  bool ReclaimWith(size_t li, int64_t now_s, const VictimFilter& filter, bool owed, const char* detail, std::string* why,
                   const std::vector<JobId>* quota = nullptr);
  // Within-queue preemption (SharingSpec::within_queue): whether waiting local li may evict
  // lower-priority work of its own leaf queue to make room there at `now_s` (it reclaims by
  // priority, priority orders the queue, and it is not kept from borrowing).
  bool MayPreemptWithinQueue(size_t li, int64_t now_s) const;
  // The jobs such a preemption for local li may evict: its leaf queue's running preemptible jobs
  // of a lower priority that are not being evicted already, lowest priority first, then the most
  // recently started, then by id (Kueue's order). O(the queue's preemptible jobs' tasks).
  std::vector<JobId> QuotaCandidates(size_t li) const;
  // With `*victims` (jobs of `candidates` the placement takes) leaving, the more of `candidates`
  // li's queue needs gone to have room for its min replicas (whole steps) in the bound StartRoom
  // gives it: taken in `candidates`' order until it has; then each one taken, the last first, is
  // given back when the others make that room without it. `*victims` gets them, all ascending by
  // id. False, with `why`, when all of `candidates` would not make that room.
  bool QuotaVictims(size_t li, int64_t now_s, const std::vector<JobId>& candidates, std::vector<JobId>* victims,
                    std::string* why) const;
  // A Reclaim refused is memoised (ReclaimQueued, Rebalance) until something is released: more
  // capacity in use only removes plans. Except when the plan needed no victim (idle capacity
  // could hold the job where placement could not: ReclaimWith's last refusal, refused_idle_):
  // once capacity is taken (a start, a grow), a plan with victims may exist. Such a refusal holds
  // only while the state is unchanged. The memo's epoch for the refusal just made: the state's
  // epoch after an idle refusal, else kAnyEpoch (any). MemoHolds: whether a memo of that epoch
  // still holds.
  static constexpr uint64_t kAnyEpoch = UINT64_MAX;
  uint64_t RefusalEpoch() const { return refused_idle_ ? state_.epoch() : kAnyEpoch; }
  bool MemoHolds(uint64_t epoch) const { return epoch == kAnyEpoch || epoch == state_.epoch(); }
  bool refused_idle_ = false;
  // Whether no Reclaim plan for local li can exist, with `supply` (QueueBook::Supply: at most
  // what its victims hold on its models' nodes; INT64_MAX: unknown): its min replicas (a step
  // multiple under Align) need more GPUs than those nodes have free plus `supply`. True with
  // `why` (may be null). O(models): it spares the O(cluster) plan.
  bool Hopeless(size_t li, int64_t supply, std::string* why) const;
  // The GPU milli `job` (with a task) needs to start: its min replicas (at least one), rounded up
  // to whole steps under Align, times one replica's GPUs. O(1).
  int64_t MinGpuNeed(const Job& job) const;
  // The cycle's `absorb`; returns whether a job grew.
  bool Absorb(int64_t now_s, int32_t external_blocking);
  // Stops every task on `node` as NodeFailureAction does, leaves the node `after` (down or
  // cordoned) and logs what the jobs lost with `detail` (FailNode, DrainNode).
  void StopNode(NodeId node, int64_t now_s, NodeState after, const std::string& detail);
  // Starts local job li: on lent capacity first when it may borrow, else AllocateAction.
  JobAttempt TryStart(size_t li);
  // Unbinds a bound task; a Standby one first has its borrowers' jobs returned and leaves Standby.
  void Free(TaskId t, int64_t now_s);
  // Evicts running local job vi whole: every task unbound, kReturned with `detail`.
  void ReturnWhole(size_t vi, int64_t now_s, uint32_t for_job, const std::string& detail);
  // Takes Standby task t out of Standby now, returning its borrowers' jobs whole; a restore
  // (`restore`) is logged as kRestored.
  void ExitStandbyNow(TaskId t, int64_t now_s, bool restore = false);
  void EndRestores(int64_t now_s);
  // Local li's replicas in Standby now.
  int32_t InStandbyOf(size_t li) const;
  // SetStandby without recording an input (the `standby` action).
  bool ApplyStandbyTarget(size_t li, int32_t replicas, int64_t now_s);
  // The cycle's `standby` action: every job with windows to its window target.
  void FollowWindows(int64_t now_s);
  std::map<uint32_t, std::vector<StandbyWindowSpec>> windows_;  // by driver job id
  void StepMigrations(int64_t now_s);
  // Evacuations going on (Evacuate), by node id: when the next plan may be made for the tasks
  // still there, and the cluster's epoch after the last one (no plan again while it is the same).
  struct Evacuation {
    int64_t retry_at = 0;
    uint64_t epoch = 0;
  };
  std::map<uint32_t, Evacuation> evacuating_;
  // Plans moves of the due evacuations' remaining tasks (one plan for them all) and ends those of
  // empty nodes; the cycle's `moves` action.
  void ContinueEvacuations(int64_t now_s);
  // Plans moves of every task on `nodes` but the `locked` ones (DefragOptions::evacuate) and
  // hands them to the executor, started as far as its budget allows; returns the moves kept.
  int64_t PlanEvacuation(const std::vector<NodeId>& nodes, const std::vector<char>& locked, int64_t now_s);
  // The tasks no plan may move now: Locked() and those with a move waiting or starting.
  std::vector<char> LockedOrMoving() const;
  // Logs an event of local li (and shows it to the observer).
  void Log(EngineEvent::Kind kind, int64_t t, size_t li, int32_t replicas, uint32_t for_job = UINT32_MAX,
           int64_t at = 0, std::string detail = {}, bool never = false, bool requeued = false);

  struct Eviction {
    int64_t at = 0;
    size_t for_local = 0;
    bool queue = false;  // a queue's Reclaim of what it is owed (its victims' detail: "queue reclaim")
    std::vector<TaskId> tasks;
    std::vector<JobId> whole;
  };

  // HP headrooms (EngineConfig::headroom): each one's internal job (local index), its nodes
  // (held while closed; some may still be draining their victims), whether a restore's eviction
  // is under way, and when the engine looks at it again.
  struct Headroom {
    size_t li = 0;
    int64_t min_job_gpus = 0;  // HeadroomSpec's
    std::vector<NodeId> nodes;
    int64_t retry_at = 0;  // > 0: look again then (a plan was infeasible, or work still drains)
  };
  std::vector<Headroom> headrooms_;
  // Lifts the holds of the headrooms open to local `li` (an HP job of at least their
  // min_job_gpus; none for other jobs) / holds every headroom's nodes again, minus those HP work
  // took or another job holds now. Open and Close pair up around each HP attempt.
  // Returns whether it lifted any hold.
  bool OpenHeadroom(size_t li);
  // A headroom that lost nodes is restored from now_s + 1 (the next cycle).
  void CloseHeadroom(int64_t now_s);
  // The cycle's `headroom`: restores each headroom that holds fewer nodes than its shape needs.
  void RestoreHeadroom(int64_t now_s);
  // Evicts `plan`'s victims for local `li` (an HP job or a headroom) once the last has exited.
  int64_t ScheduleEviction(size_t li, const PreemptionPlan& plan, int64_t now_s);
  // `nodes` without duplicates and without those held by a reservation, in order.
  std::vector<NodeId> Unheld(const std::vector<NodeId>& nodes) const;
  // Releases reservation r (active), noting its nodes in released_ (RunCycle looks whether an
  // action after the queue's pass left any of them free and unheld).
  void Release(ReservationId r);
  // Whether a node released since released_ was cleared has a free GPU (or CPU, or lent GPUs) and
  // is now unheld or held again by a waiting job (and clears it): capacity no pass of the cycle
  // offered to the queue yet.
  bool FreedSinceAllocate();
  // Whether the job holding reservation r might start now: the GPUs free on its nodes and on the
  // nodes no reservation holds cover its min replicas (whole steps) — a necessary condition;
  // always true for a job that may borrow lent GPUs or needs none. O(its nodes + models).
  bool HoldMayStart(ReservationId r) const;
  // A job backfill planned for (planned_) left the queue since: its next action plans anew.
  bool PlannedMovedOn() const;

  EngineConfig options_;
  GracefulExit exit_;
  ClusterState state_;
  std::unique_ptr<Session> session_;
  std::vector<Local> locals_;
  std::unordered_map<uint32_t, size_t> by_fed_;  // driver job id -> local index (lookups only)
  size_t LocalOf(uint32_t job) const {
    const auto it = by_fed_.find(job);
    return it == by_fed_.end() ? SIZE_MAX : it->second;
  }
  std::vector<size_t> local_of_job_;  // state JobId -> local index
  // A shape's key (ShapeOf): its class's fields (the one-replica request, min, max, step,
  // topology, priority, preemptibility), then its walltime and its queue. A class's key is the
  // same with walltime and queue 0.
  struct ShapeKey {
    static constexpr size_t kWalltime = 13, kQueue = 14;
    std::array<int64_t, 15> f{};
    bool operator==(const ShapeKey&) const = default;
  };
  struct ShapeKeyHash {
    size_t operator()(const ShapeKey& k) const;
  };
  std::unordered_map<ShapeKey, int, ShapeKeyHash> shapes_;
  std::unordered_map<ShapeKey, int, ShapeKeyHash> classes_;  // a shape's request without its queue (PendingQueue::SetClass)
  std::vector<int> hp_shapes_;  // the shapes that reclaim by priority (EngineConfig::preemptor_min_priority)
  std::vector<int> blocking_shapes_;             // the shapes that may block Absorb, by priority (highest first)
  std::vector<std::vector<ShapeNeed>> shapes_of_queue_;  // per leaf queue: its shapes' needs
  std::vector<int64_t> queue_min_gpu_;             // per leaf queue: its shapes' least ShapeInfo::min_gpu
  std::vector<int> unqueued_shapes_;               // the shapes of jobs naming no queue
  std::vector<size_t> no_borrow_;  // the locals kept from borrowing (Local::no_borrow_until), pruned lazily
  struct ShapeInfo {
    bool blocks = false;  // an HP job or a gang (it may block Absorb)
    bool hp = false;      // it reclaims by priority (at or above EngineConfig::preemptor_min_priority)
    int32_t priority = 0;
    int64_t gpus = 0;     // max replicas x GPUs per replica
    int cls = 0;          // its class (classes_)
    int32_t queue = -1;   // its leaf queue (-1: none; -2: a queue since removed)
    // release_seq when a Reclaim for a job of this shape without a reservation of its own was
    // found infeasible: until something is released, every such job of the shape would be too.
    uint64_t refused_seq = UINT64_MAX;
    uint64_t refused_epoch = kAnyEpoch;  // RefusalEpoch of that refusal
    int64_t refused_supply = 0;  // with queues, below HP: QueueBook::Supply when it was refused
    GpuModelSet models;          // the models its request may use
    int64_t min_gpu = 0;         // GPUs (milli) of its min replicas (whole steps with align)
    ShapeNeed need;              // what it needs of its queue's room
    uint64_t rebalance_refused_seq = UINT64_MAX;  // the same for Rebalance (jobs without a reservation)
    int64_t rebalance_refused_supply = 0;         // QueueBook::Supply's bound when Rebalance refused it
    uint64_t rebalance_refused_epoch = kAnyEpoch;  // RefusalEpoch of that refusal
  };
  std::vector<ShapeInfo> shape_info_;  // per shape
  // Whether every job of shape `info` (of leaf queue q) without a reservation is refused as
  // Hopeless by a rebalance now, and so by the pass that follows (free GPUs and supply only
  // shrink within it): its min replicas need more GPUs than no reservation holds plus the book's
  // bound on the supply (QueueBook::SupplyBound toward fair shares).
  bool RebalanceHopeless(size_t q, const ShapeInfo& info, int64_t now_s) const;
  // The same for a queue's Reclaim (ReclaimQueued) of a shape below HP, toward entitlements.
  bool ReclaimHopeless(size_t q, const ShapeInfo& info, int64_t now_s) const;
  // Whether a job of shape `info` without a reservation needs more GPUs for its min replicas
  // than no reservation holds plus `bound` (INT64_MAX: no bound, never).
  bool HopelessWith(const ShapeInfo& info, int64_t bound) const;
  PendingQueue queue_;
  std::vector<size_t> holders_;  // queued local jobs that hold a reservation
  std::vector<Eviction> evictions_;
  std::vector<char> being_evicted_;  // per TaskId
  std::set<size_t> elastic_running_;
  int64_t elastic_gpuless_ = 0;  // of elastic_running_, the jobs without GPUs (Local::gpus 0)
  // The jobs of elastic_running_ that may grow (fewer bound replicas than their max: the only ones
  // Absorb looks at) by their shape's class (ShapeInfo::cls: the request, step, topology and
  // priority, which decide whether any of them can grow now), in no order; Local::elastic_slot is
  // a job's index in its list (SIZE_MAX: in none), Local::elastic_cls the class it is filed
  // under. elastic_classes_: the classes whose list is not empty. Kept by SyncGrowable.
  std::vector<std::vector<size_t>> elastic_of_class_;
  std::set<int> elastic_classes_;
  // Adds local li to elastic_running_ (and, while it may grow, elastic_of_class_) or takes it out.
  void SetElastic(size_t li, bool elastic);
  // Local li is in elastic_of_class_, under its shape's class, iff it runs elastic with fewer bound
  // replicas than its max (as it is now: after any change of its bound tasks, its shape or
  // elastic_running_). O(log classes).
  void SyncGrowable(size_t li);
  // Whether the cycle has the reclaim action (a configuration with `preempt`): without it no
  // Reclaim starts, neither in a cycle nor on a Submit (kQueue, kStartOrReclaim) or a quote.
  bool Reclaims() const {
    return std::find(options_.actions.begin(), options_.actions.end(), EngineAction::kReclaim) != options_.actions.end();
  }
  // The walltime limits of the runs under way (JobSpec::walltime_s): (started_at_s +
  // walltime_s, the job's id), earliest first. A run that reaches its limit is ended by the
  // cycle at that time (EndWalltimes: kTimedOut, then the job finishes as Finish would end it).
  std::set<std::pair<int64_t, uint32_t>> walltimes_;
  // Local li's run starts (`on`, started_at_s set) or stops (before started_at_s is cleared).
  void WatchWalltime(size_t li, bool on);
  void EndWalltimes(int64_t now_s);
  // Files elastic_running_'s jobs that may grow by class anew (at Create, and when the queues
  // changed).
  void FileGrowable();
  // The GPUs in total (milli) one step of growth of local li requests (QueueBook::Within's).
  int64_t StepGpu(size_t li) const;
  // The running elastic jobs Absorb hands AbsorbAction: those of elastic_of_class_ that it would
  // not pass over at once — of a class at or above `blocking` one step of which might fit
  // somewhere, and with queues, of a leaf with room within `bound` for a step. In no order.
  std::vector<JobId> MayGrow(int32_t blocking, QueueBook::Bound bound) const;
  std::vector<EngineEvent> events_;
  std::function<void(uint32_t, int64_t)> reclaim_observer_;
  uint64_t absorb_seen_release_ = UINT64_MAX;
  int32_t absorb_seen_blocking_ = 0;
  int64_t absorb_seen_starts_ = -1;
  uint64_t absorb_seen_shares_ = 0;
  int64_t regrow_due_ = INT64_MAX;  // the earliest Local::no_grow_until still ahead (a due time)
  int64_t elastic_starts_ = 0;
  std::vector<EvictionNotice> notices_;
  struct Restore {
    TaskId task;
    int64_t at = 0;
    std::vector<TaskId> noticed;  // borrowers warned (being_evicted_ until the restore ends)
  };
  std::vector<Restore> restores_;
  std::vector<char> restoring_;  // per TaskId
  MigrationExecutor migrations_;
  // Notes the input `what` applied at `t` (the engine's time from now on) in the log, if any.
  template <typename Input>
  void Record(int64_t t, Input what) {
    now_ = t;
    if (record_ != nullptr) record_->push_back({t, std::move(what)});
  }
  std::vector<EngineInput>* record_ = nullptr;
  int64_t now_ = 0;
  std::function<void(const EngineEvent&)> observer_;
  std::vector<int32_t> node_evictions_;  // per node: borrowers evicted there (PlaceOnLent's order)
  std::vector<char> pinned_;             // per TaskId: locked against defragmentation
  int64_t next_replan_ = 0;              // the `reserve` action's next renewal (0: none)
  int64_t reservations_made_ = 0;
  size_t assembled_ = SIZE_MAX;          // the job holding the assembled nodes (EngineDefrag::assemble)
  // assembled_ = li (SIZE_MAX: none), the jobs it was and is logged for the carry (CarriedJob::assembled).
  void SetAssembled(size_t li);
  int64_t next_defrag_ = 0;              // the `defrag` action's next periodic plan (0: none)
  int64_t last_plan_ = -1;
  struct Trigger {
    int64_t at = 0;
    size_t li = 0;
    int64_t queued_at = 0;  // the trigger is void once the job left the queue or was queued again
    bool operator>(const Trigger& o) const { return std::tie(at, li) > std::tie(o.at, o.li); }
  };
  std::vector<Trigger> triggers_;  // a min-heap by (at, li)
  // Relaxed required levels: when a waiting job accepts the next level up (Trigger::queued_at as
  // for triggers_), a min-heap by (at, li).
  std::vector<Trigger> relax_;
  // A waiting job with Local::required_max_wait_s that has waited since it was queued for k such
  // waits requires one domain of its own level minus k (levels count from the plane's top), none
  // once that is below the top; its own level stays preferred. Run by the `allocate` action before
  // its pass; a job queued again requires its own level again (Enqueue).
  void RelaxWaits(int64_t now_s);
  // Explanation::topology for local li.
  std::string TopologyWords(size_t li) const;
  // Local li (waiting, nothing bound) requires `level` (-1: none) from now on.
  void SetRequiredLevel(size_t li, int32_t level);
  DefragCounters defrag_counters_;
  // The session over state_ with policy_ and typical_ (Create; again when typical_ changes),
  // with the tie-break order of `order` (default: the current session's, if any).
  Status OpenSession(const Session* order = nullptr);
  // The session, opened again first when nodes joined since it opened (AddNode).
  Session& CurrentSession();
  bool nodes_joined_ = false;
  // Counts a materialised job's request toward the learned typical tasks (EngineConfig::typical).
  void Learn(const TaskRequest& req);
  static constexpr int64_t kLearnEvery = 1024;
  PolicyConfig policy_;
  std::shared_ptr<const TypicalTasks> typical_;
  bool learn_typical_ = false;
  bool counting_ = false;  // driver jobs are being materialised (not Create's headrooms)
  TypicalTaskCounter seen_;
  int64_t next_learn_ = 1;
  std::set<uint32_t> touched_;
  size_t standby_entries_ = 0;
  std::vector<NodeId> released_;  // nodes of the reservations released (Release), see FreedSinceAllocate
  // Acknowledged Standby (EngineJob::acknowledge_standby): replicas entering (awaiting AcknowledgeStandby) and replicas whose
  // entry was refused, each with the node it was bound on then (a task unbound or moved since is
  // dropped: SweepStandbyEntries).
  std::map<TaskId, NodeId> entering_, refused_;
  void SweepStandbyEntries();  // replicas that ever entered Standby (RunCycle counts them around each action)
};

}  // namespace estuary
