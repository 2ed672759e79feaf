// AllocateAction: starts pending jobs in queue order without disrupting running work.
//
// A job is a gang: it starts only when at least `min_replicas` of its tasks can be bound at once.
// Steps: (1) open a Statement; (2) ask the Session for a node for each pending task of the job,
// binding each decision through the statement so later decisions see earlier ones, up to
// `max_replicas`; stop at the first task that does not fit; (3) grant the largest multiple of
// `step` not above the number placed (Align); (4) if that is below `min_replicas`, roll everything
// back and report why the job waits; else roll back the surplus and commit.
// A single-task job (min = max = step = 1) is the degenerate case.
//
// A job whose TopologyConstraint requires a level goes into one domain of that level: the domains
// whose free capacity could hold at least min replicas are tried in order — most replicas granted
// first, then best fit (least spare GPU capacity left after the job, so that large domains stay
// whole), then domain order — each through the steps
// above restricted to the domain's nodes, until one holds the job. When none can, the job waits;
// it is infeasible when no domain could hold min replicas even empty. A job that also prefers a
// finer level (a gang whose required level was relaxed keeps its old one as preferred, and KAI's
// required + preferred topology) is first placed inside the chosen domain over as few domains of
// its preferred level as possible, by the rule below; when those cannot hold it, over the whole
// domain as before.
//
// A job with a preferred level but no required one may span domains of that level, as few as
// possible: Alibaba's Alg. 2 chooses them greedily, each time the domain whose share
// (min(replicas it can hold now, replicas still to place)) keeps the job's GPU entropy over the
// chosen domains lowest (ties: least spare capacity left, then domain order); replicas are then
// placed domain by domain through the steps above.
//
// Reservations (ClusterState::AddReservation): a job may also use the nodes held for it; when it
// starts, its reservation is released. Other jobs never use held nodes.
//
// TryGrow (TIDAL's Absorb, one job at a time): a running job binds more of its pending tasks, in
// task order, through the same steps — whole steps only, never above max_replicas, the replicas
// of a partial step rolled back. See TryGrow below for where the new replicas may go.
#pragma once

#include <climits>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sched/framework/session.h"
#include "sched/framework/statement.h"

namespace estuary {

struct JobAttempt {
  JobId job;
  bool started = false;
  int32_t granted = 0;  // replicas bound (a multiple of step), 0 when not started
  OutcomeKind kind = OutcomeKind::kPlaced;  // of the first task that did not fit, when not started
  std::string reason;                       // why the job waits (empty when started)
};

// How Reclaim (PreemptAction::Plan) chooses its victims.
enum class VictimSelection {
  kEstuary,  // estuary's cost-ordered greedy over whole jobs and elastic chunks (preempt.h)
  kKube,     // kube-scheduler's default preemption, replica by replica (preempt_k8s.h)
  kVolcano,  // Volcano's preempt action, replica by replica in node-score order (preempt_volcano.h)
};
// The configuration's names of the selections (`preempt: {victims}`): estuary, k8s, volcano.
const char* VictimSelectionName(VictimSelection v);
// The selection named `name`, or nullopt for an unknown name.
std::optional<VictimSelection> VictimSelectionNamed(std::string_view name);

// What a scheduler configuration lets the action use. Defaults: everything on.
struct AllocateOptions {
  bool align = true;     // grant multiples of a job's step (off: a min-max scheduler, step 1)
  bool topology = true;  // honour jobs' topology constraints (off: place anywhere)
  // Domain packing, off by default: a replica of a job without a topology constraint that would
  // open a wholly free node opens one in the most used domain of (pack_plane, pack_level) — the
  // least free GPU milli among the domains that have a wholly free node; ties to domain order —
  // so that whole domains stay free for large jobs. The domains are tried in that order (at most
  // kPackTries of them, stopping at the one of the Session's choice) through DecideAmong; the
  // Session's choice stands when none of them holds the replica. (A job holding a reservation
  // places among all nodes through DecideAmong and is not packed.)
  PlaneId pack_plane;
  int pack_level = -1;
  static constexpr int kPackTries = 8;
  // Victim selection of Reclaim (`preempt: {victims}`); default estuary's. Not used by placement.
  VictimSelection victims = VictimSelection::kEstuary;
  // The grace period Reclaim's victims get between their notice and their stop (the engine sets
  // its EngineConfig::grace_s); a victim that checkpoints on the notice within it loses nothing
  // (SecondsSinceCheckpoint). Default -1: unknown (victims' periodic checkpoints only). Not used
  // by placement.
  int64_t grace_s = -1;
};

// H = -sum (g_i/G) log(g_i/G) of a job's GPUs (or replicas of equal size) over domains, with G
// = `total` (default: the sum of `gpus`; a larger G scores a partial allocation).
double GpuEntropy(std::span<const int64_t> gpus, int64_t total = 0);

class AllocateAction {
 private:
  struct Segment {
    const std::vector<NodeId>* nodes;  // candidates (null: all nodes)
    int64_t count;                     // replicas to place among them
    // A replica that fits on none of `nodes` may go to any node the job may use (Session::Decide;
    // every node, its own held ones included, for a job holding a reservation), unpacked.
    bool spill = false;
  };
  // How many replicas one placement grants, and what granting means.
  struct Grant {
    int64_t min;  // fewest granted (a multiple of step is granted, or nothing); at least 1
    int64_t max;  // most placed
    // Starting the job: a failure names min_replicas in its reason, and the job's reservation is
    // released once replicas are granted. Off (growing a running job): reservations are left alone.
    bool start;
  };
  // Steps (1)-(4), replicas placed segment by segment, up to `grant.max` of them.
  static JobAttempt PlaceSegments(Session& session, ClusterState& state, JobId job,
                                  const std::vector<Segment>& segments, int32_t step, const AllocateOptions& options,
                                  const Grant& grant);
  // PlaceSegments' bounds for starting `job`: min_replicas (at least 1) to max_replicas.
  static Grant StartGrant(const ClusterState& state, JobId job);
  // The domain-packing rule of AllocateOptions applied to the Session's decision `o` for `task`.
  static Outcome Pack(Session& session, const ClusterState& state, TaskId task, Outcome o, const AllocateOptions& options);
  static JobAttempt TryStartSpanning(Session& session, ClusterState& state, JobId job, int32_t step,
                                     const AllocateOptions& options);
  // Steps (1)-(4) over `candidates` (all nodes when null).
  static JobAttempt Place(Session& session, ClusterState& state, JobId job, const std::vector<NodeId>* candidates,
                          int32_t step, const AllocateOptions& options);
  static JobAttempt TryStartInDomain(Session& session, ClusterState& state, JobId job, int32_t step,
                                     const AllocateOptions& options);
  // Alibaba's Alg. 2 (TryStartSpanning): the domains of `domains` to take, and how many of
  // `wanted` replicas from each, where cap[i] replicas fit now in domains[i] — as few domains as
  // the job's GPU entropy over them allows; fewer than `wanted` in all when they hold fewer.
  // The domains[i] with first[i] set (none when `first` is empty: the job's last run, resuming)
  // come before the others, the most replicas first (ties: the least spare capacity left).
  static std::vector<Segment> SpanSegments(const Topology& topo, const std::vector<DomainId>& domains,
                                           const std::vector<int64_t>& cap, int64_t wanted,
                                           const std::vector<char>& first = {});
  // For a job that requires a level and prefers a finer one: placed inside `within` (a domain of
  // its required level) over the fewest domains of its preferred level inside it, chosen as
  // TryStartSpanning chooses them over the plane; not started (nothing bound) when those hold
  // fewer than `need` replicas of `req` now (rounded down to a whole step) or the placement fails.
  static JobAttempt TrySpanningWithin(Session& session, ClusterState& state, JobId job, DomainId within,
                                      const TaskRequest& req, int64_t need, int64_t wanted, int32_t step,
                                      const AllocateOptions& options);
  // For a gang (min_replicas > 1) of whole-GPU replicas placed anywhere: the attempt that fails,
  // when the nodes with enough wholly free GPUs (the state's free-GPU index) hold fewer replicas
  // than min_replicas rounded up to a whole step — found without placing replicas one by one and
  // rolling them back; infeasible when the empty cluster could not hold that many either. Nullopt
  // when the job may start (or is not such a gang).
  static std::optional<JobAttempt> CannotStartGang(const ClusterState& state, JobId job, int32_t step);

 public:
  // Tries to start one job. REQUIRES: `session` was opened over `state`.
  static JobAttempt TryStart(Session& session, ClusterState& state, JobId job, const AllocateOptions& options = {});

  // Grows a running job (TIDAL's Absorb for one job): binds more of its pending tasks, in task
  // order — so the bound set grows at the end of the task order, and PreemptAction's shrinking
  // (the last bound tasks first) removes the newest replicas first; a pending task between bound
  // ones (e.g. one returned by a node failure) is taken first — through the Session's decisions
  // and one Statement, as TryStart does. Returns the replicas added; 0 when nothing changed.
  //  - Running: at least max(1, min_replicas) of the job's tasks are bound; otherwise 0.
  //  - Count: the largest multiple of step (1 without options.align) not above what fits, not
  //    above `max_new` and not above max_replicas - bound; the replicas of a partial step are
  //    rolled back. The bound count itself need not be a multiple of step (e.g. after align was
  //    off): whole steps are added to it.
  //  - Where (with options.topology and a constraint of the job's):
  //    required level: only into the domain of that level that holds all the job's bound
  //      replicas; 0 when they span several domains (or sit outside the plane).
  //    preferred level: best effort — each replica goes among the nodes of the domains of that
  //      level that already hold the job's replicas when one of them fits it, else anywhere
  //      (Session::Decide); never packed. No such domain (no replica in the plane): anywhere.
  //    none: anywhere (Session::Decide), with options' domain packing applied exactly as in
  //      TryStart (a job holding a reservation is not packed).
  //  - Reservations: nodes held for another job are never used; nodes held for this job are
  //    (searched through DecideAmong, scanning every node). The job's reservation is neither
  //    released nor changed.
  //  - Fast refusal: for whole-GPU replicas, when the free-GPU index shows fewer than one step of
  //    replicas fitting anywhere, 0 without asking the Session; for other replicas the same from
  //    the cluster's free GPU (or CPU) totals.
  // Cost: O(tasks of the job) to count, plus one Session decision per replica tried (a failing
  // decision may scan the candidates).
  // REQUIRES: `session` was opened over `state`.
  static int32_t TryGrow(Session& session, ClusterState& state, JobId job, const AllocateOptions& options,
                         int32_t max_new = INT32_MAX);
  // False when TryGrow's fast refusal holds for every job whose tasks request `req` and that grows
  // by `step` replicas: the fast refusal with every node a reservation holds counted as its
  // owner's — so such a job cannot grow now, whatever it holds. O(nodes with a free GPU).
  static bool AnyMightGrow(const ClusterState& state, const TaskRequest& req, int32_t step);
  // Replicas of `req` (tasks of `job`) that fit on node `n` now (counting each node on its own;
  // none on a node held for another job), and would fit on the empty node (`capacity`).
  static int64_t ReplicasFitting(const ClusterState& state, const Node& n, const TaskRequest& req, bool capacity,
                                 JobId job = JobId());
  // Tries each job of `queue` in order.
  static std::vector<JobAttempt> Run(Session& session, ClusterState& state, std::span<const JobId> queue);
};

}  // namespace estuary
