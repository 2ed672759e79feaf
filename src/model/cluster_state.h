// ClusterState: the exact model of one GPU cluster — nodes with per-GPU free capacity, jobs, and
// tasks bound to nodes and GPU indices. Both drivers (simulator, live service) mutate it only
// through Bind/Unbind/Finish and node-state changes; schedulers read it.
//
// Invariants (verified by CheckInvariants(), which tests run after every simulator step):
//  - no GPU, CPU or memory of any node is over-committed; per-GPU free milli is in [0, 1000];
//  - every bound task sits on an existing node, on distinct GPU indices < the node's GPU count,
//    and appears exactly once in that node's task list; pending tasks hold no resources;
//  - every node's free amounts equal its capacity minus the requests of its bound tasks, and the
//    cluster-wide allocation totals equal the sum over nodes;
//  - every job's bound_tasks counts its bound tasks, and uniform_request says whether all its
//    tasks ask for the same request;
//  - a node is held by at most one reservation, exactly when an active reservation lists it, and
//    its owner job records that reservation;
//  - Standby (SpotGPU, Alibaba OSDI'26): a bound task in Standby keeps everything it holds, so
//    its GPUs, CPU and memory stay counted in the node's free amounts, NodeFit, the free-GPU
//    index, the domain aggregates and the allocation totals exactly as before; it only lends
//    them. A node's lent_gpus is the union of the GPU bits of its standby tasks and lent_cpu the
//    sum of their CPU. A borrowed task runs on lent capacity: its GPU bits lie within lent_gpus,
//    are disjoint from every other borrower's, and its CPU comes out of lent_cpu; lent_free =
//    lent_gpus minus the borrowers' bits and lent_cpu_free = lent_cpu minus their CPU (>= 0).
//    Memory is not lent: a borrower takes its memory from the node's mem_free like any task.
//    So a borrower's GPUs and CPU are not in gpu_free/cpu_free or the allocation totals a
//    second time (the totals count each physical GPU and CPU milli once); its memory is;
//  - a task is never both standby and borrowed; a task that is not bound is neither;
//  - lending_nodes() lists exactly the nodes with lent_free != 0, each once;
//  - capacity reservations (Reservation::Kind::kCapacity): an available one holds its req's CPU,
//    memory and per-GPU milli on its node's GPU indices, taken from the node's free amounts
//    (and so from NodeFit, the free-GPU index and the domain aggregates) like a bound task's.
//    So every node's free amounts equal its capacity minus the requests of its bound tasks minus
//    those of its available capacity reservations, and no GPU is over-committed by the two
//    together. Reserved capacity is not in the allocation totals; reserved_gpu_milli() /
//    reserved_cpu_milli() are the sums over available capacity reservations, and
//    available_capacity_reservations() lists exactly those, each once, in id order. A consumed,
//    expired or released capacity reservation holds nothing (its capacity is its task's or free).
// Thread-safety: none; one scheduling cycle or simulator step owns the state at a time.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/status.h"
#include "model/gpu_models.h"
#include "model/resources.h"
#include "model/topology.h"

namespace estuary {

enum class NodeState : uint8_t { kReady, kCordoned, kDown };

struct NodeSpec {
  std::string name;
  MilliCpu cpu_milli = 0;
  MemMiB mem_mib = 0;
  int32_t gpu_count = 0;
  GpuModelId model;  // invalid for CPU-only nodes
  std::vector<std::pair<std::string, std::string>> labels;
};

struct Node {
  NodeId id;
  NodeSpec spec;
  NodeState state = NodeState::kReady;
  MilliCpu cpu_free = 0;
  MemMiB mem_free = 0;
  std::array<MilliGpu, kMaxGpusPerNode> gpu_free{};  // first spec.gpu_count entries are used
  int32_t full_free_gpus = 0;   // GPUs with gpu_free == 1000
  MilliGpu max_gpu_free = 0;    // largest gpu_free over the node's GPUs (0 without GPUs)
  int64_t gpu_free_total = 0;   // sum of gpu_free
  uint32_t version = 1;         // bumped on every change of the node's free capacity, tasks,
                                // state or reservation
  std::vector<TaskId> tasks;    // bound tasks, in bind order
  ReservationId reservation;    // the reservation holding the node (invalid: none)
  // Standby lending (see the invariants above). Bit i: GPU i.
  uint32_t lent_gpus = 0;       // GPUs of the node's standby tasks: lendable
  uint32_t lent_free = 0;       // of lent_gpus, those no borrowed task uses
  MilliCpu lent_cpu = 0;        // CPU of the node's standby tasks
  MilliCpu lent_cpu_free = 0;   // of lent_cpu, what borrowed tasks do not use

  bool Schedulable() const { return state == NodeState::kReady; }
};

// The hot fields of a node that the filter needs, packed for fast scans (kept in sync with Node).
struct NodeFit {
  int64_t gpu_free_total = 0;
  MilliCpu cpu_free = 0;
  MemMiB mem_free = 0;
  int32_t full_free_gpus = 0;
  MilliGpu max_gpu_free = 0;
  uint32_t version = 1;
  GpuModelId model;
  bool schedulable = true;
  JobId reserved_for;  // the owner of the reservation holding the node (invalid: none)
};

// The life of a capacity reservation. kPending (waiting for capacity still in use, e.g. the old
// instance of a make-before-break move) is not modelled yet; it comes with the defrag executor.
enum class ReservationState : uint8_t {
  kAvailable,  // holds its capacity; only its owner may bind into it (ClusterState::BindReserved)
  kConsumed,   // the owner's task was bound into it; the capacity is that task's now
  kExpired,    // its TTL ran out before use; the capacity went back to the node
  kReleased,   // let go before use (ClusterState::ReleaseCapacity); the capacity went back
};

// A reservation, of one of two kinds:
//  - kNodeHold: a hold on whole nodes for one job — a gang that waited too long for room. While
//    held, a node takes new tasks of the owner only (Session::DecideAmong); work already on it
//    keeps running, so the node drains toward the owner. Released when the owner starts or the
//    hold is re-planned. Uses `nodes` and `active`; made by ClusterState::AddReservation.
//  - kCapacity: specific resources on one node (CPU, memory, GPU indices with milli) held for one
//    owner job (optionally one task of it), e.g. a migration target (issue 5). Accounted as taken
//    in the node's free capacity so that no placement path can use it; only the owner binds into
//    it (ClusterState::BindReserved). Uses the fields below `active`, never `nodes`/`active`
//    (active stays false, so code reading node holds is unaffected); made by
//    ClusterState::ReserveCapacity.
struct Reservation {
  enum class Kind : uint8_t { kNodeHold, kCapacity };
  ReservationId id;
  Kind kind = Kind::kNodeHold;
  JobId owner;
  // kNodeHold only.
  std::vector<NodeId> nodes;  // empty once released
  bool active = false;
  // kCapacity only.
  NodeId node;
  TaskId owner_task;          // the one task that may bind into it (invalid: any task of owner)
  TaskRequest req;            // what it holds: req.cpu_milli, req.mem_mib, req.gpu_milli per GPU
  GpuIndices gpus;            // the GPU indices held (size == req.gpu_count when req.NeedsGpu())
  int64_t created_s = 0;
  int64_t expires_s = -1;     // ExpireReservations releases it at or after this time; -1: no TTL
  ReservationState state = ReservationState::kAvailable;
  TaskId consumed_by;         // the task bound into it (valid iff state == kConsumed)
};

// Free capacity of one topology domain, summed over its nodes.
struct DomainFree {
  int64_t gpu_milli = 0;       // GPU capacity
  int64_t gpu_free_milli = 0;  // free GPU milli
  int32_t nodes = 0;
  int32_t free_nodes = 0;      // nodes with GPUs, all of them wholly free
};

enum class TaskState : uint8_t { kPending, kBound, kFinished };

struct Task {
  TaskId id;
  JobId job;
  std::string name;
  TaskRequest req;
  int32_t priority = 0;
  std::string qos;   // the trace's QoS class (e.g. "LS", "BE"); informational
  TaskState state = TaskState::kPending;
  NodeId node;       // valid iff state == kBound
  GpuIndices gpus;   // valid iff state == kBound
  bool standby = false;   // bound and in Standby: lends its GPUs and CPU (ClusterState::EnterStandby)
  bool borrowed = false;  // bound on lent capacity (ClusterState::BindBorrowed)
};

// Where a job's replicas may go in the network: with a plane and a required level, all replicas
// go into one domain of that level. Default: anywhere.
struct TopologyConstraint {
  PlaneId plane;            // invalid: no constraint
  int required_level = -1;  // index into the plane's levels; -1: none
  int preferred_level = -1; // index into the plane's levels; -1: none (with no required level: the fewest domains of it, AllocateAction::TryStartSpanning; finer than required_level: the fewest domains of it inside the required domain, AllocateAction::TrySpanningWithin)
};

// A job groups tasks with shared replica bounds: it runs when at least `min_replicas` of its
// tasks are bound at once; granted replica counts are multiples of `step`. A single-task job is
// min = max = step = 1.
struct JobSpec {
  std::string name;
  int32_t min_replicas = 1;
  int32_t max_replicas = 1;
  int32_t step = 1;
  // The workload can use replicas only in multiples of this (a pipeline's batch); replicas beyond
  // the last multiple are allocated but unusable. Default 0: the same as step.
  int32_t usable_step = 0;
  // Higher runs first and may preempt lower (issue 4); kHpPriority and above is high priority.
  int32_t priority = 0;
  bool preemptible = false;          // may be evicted for higher-priority work
  int64_t checkpoint_interval_s = 0;  // an eviction loses the work since the last checkpoint; 0: none
  // Checkpoint on notice: a victim warned of its eviction (a Reclaim's or a Standby restore's
  // grace period) checkpoints at the notice, which takes this many seconds; when it is done before
  // the stop, the eviction keeps the work up to the notice. 0: off (periodic checkpoints only).
  int64_t checkpoint_on_notice_s = 0;
  int64_t restart_cost_s = 0;         // time a restarted job spends before it makes progress again
  // Its walltime limit (docs/schema.md `walltime_s`): each run ends at the latest walltime_s after
  // it started — the driver stops it then (the simulator ends it as "timeout"). Backfill
  // (EngineBackfill) plans with started_at_s + walltime_s as a running job's end; 0: no limit (a
  // running job without one is planned as never ending).
  int64_t walltime_s = 0;
  TopologyConstraint topology;
  // Its queue (issue 20; ClusterState::queue_usage): an index below queue_count(), -1: none.
  int32_t queue = -1;
};

// What a queue's bound tasks hold (ClusterState::queue_usage), by dimension: GPU milli in total
// (kQueueGpu), GPU milli per model (kQueueModel + GpuModelId value), CPU milli (kQueueCpu) and
// memory MiB (kQueueMemory). A task in Standby holds only its memory (its GPUs and CPU are lent);
// a borrowed task holds what it uses of its lender's (counted for the borrower's queue), so the
// queues' GPUs sum to allocated_gpu_milli().
inline constexpr size_t kQueueGpu = 0;
inline constexpr size_t kQueueModel = 1;
inline constexpr size_t kQueueCpu = 1 + GpuModelSet::kMaxModels;
inline constexpr size_t kQueueMemory = kQueueCpu + 1;
inline constexpr size_t kQueueDims = kQueueMemory + 1;
using QueueUsage = std::array<int64_t, kQueueDims>;

// Priorities at or above this are high priority (HP); below, low priority (LP).
inline constexpr int32_t kHpPriority = 700;
inline constexpr int32_t kMaxPriority = 1000;

struct Job {
  JobId id;
  JobSpec spec;
  std::vector<TaskId> tasks;
  ReservationId reservation;  // the active reservation this job owns (invalid: none)
  int64_t started_at_s = -1;  // when its current run started (set by the driver); -1: not running
  int32_t bound_tasks = 0;    // of its tasks, those bound now (borrowers included)
  bool uniform_request = true;  // all its tasks ask for the same TaskRequest
  // Where its last run was, when a node failure requeued it and it may span domains (Engine,
  // hold_survivors): its next start takes those nodes' domains of its preferred level first
  // (AllocateAction::TryStartSpanning). Empty: none (cleared when it starts or leaves).
  std::vector<NodeId> resume_nodes;
};

class ClusterState {
 public:
  ClusterState() = default;

  GpuModels& models() { return models_; }
  const GpuModels& models() const { return models_; }
  // The network topology. Add planes through topology(), then place nodes with AssignDomains so
  // that the per-domain aggregates stay current.
  Topology& topology() { return topology_; }
  const Topology& topology() const { return topology_; }
  // Puts a node into one domain per level of `plane` (widest first); see Topology::AssignNode.
  Status AssignDomains(NodeId node, PlaneId plane, std::span<const std::string> names);
  // Aggregated free capacity of a domain, current after every change.
  const DomainFree& domain_free(DomainId d) const { return domain_free_[d.value()]; }

  // Adds a node with all of its capacity free. Fails on a duplicate name, negative capacity or
  // more than kMaxGpusPerNode GPUs.
  StatusOr<NodeId> AddNode(NodeSpec spec);
  JobId AddJob(JobSpec spec);
  // Adds a pending task to `job`. REQUIRES: job is valid; req.gpu_milli in [0, 1000].
  TaskId AddTask(JobId job, std::string name, TaskRequest req, int32_t priority = 0, std::string qos = {});

  // Binds a pending task to `node` on GPU indices `gpus`. REQUIRES: CanBind(...).
  void Bind(TaskId task, NodeId node, const GpuIndices& gpus);
  // Whether binding would keep every invariant (capacity, distinct valid GPU indices, state).
  bool CanBind(TaskId task, NodeId node, const GpuIndices& gpus) const;
  // Returns a bound task to pending and frees what it held. REQUIRES: the task is bound.
  // A borrowed task returns its GPUs and CPU to its node's lent pool and its memory to mem_free.
  // A standby task leaves Standby first (REQUIRES: CanExitStandby, i.e. its borrowers are gone —
  // see StandbyAction::RestoreVictims), then is freed as usual.
  void Unbind(TaskId task);
  // Ends a task: frees what it held (when bound) and marks it finished. Borrowed and standby
  // tasks as in Unbind (same REQUIRES).
  void Finish(TaskId task);

  // Standby (SpotGPU): a bound HP replica detaches its traffic and lends its GPUs and CPU to
  // preemptible borrowers while keeping its container and memory, and later resumes on the same
  // GPUs. Every lending change bumps the node's version, the epoch and the change feed.
  //
  // Puts `task` into Standby: adds its GPUs to its node's lent_gpus/lent_free and its CPU to
  // lent_cpu/lent_cpu_free. Nothing else changes: the GPUs stay taken for normal placement.
  // REQUIRES: CanEnterStandby(task).
  void EnterStandby(TaskId task);
  // Bound, neither standby nor borrowed, and on whole GPUs (gpu_milli == 1000, gpu_count >= 1).
  bool CanEnterStandby(TaskId task) const;
  // Whether `task` is in Standby, no borrower uses one of its GPUs and its node's unused lent
  // CPU covers its CPU.
  bool CanExitStandby(TaskId task) const;
  // Takes `task` out of Standby: removes its GPUs and CPU from the lent pool. It resumes on the
  // GPUs it had. REQUIRES: CanExitStandby(task).
  void ExitStandby(TaskId task);
  // Whether pending `task` may run on lent capacity of `node` on GPU indices `gpus`: whole GPUs
  // (gpu_milli == 1000, gpu_count >= 1) that are distinct lent-free GPUs of the node, its CPU
  // within lent_cpu_free, its memory within the node's mem_free (memory is not lent), its GPU
  // models admitting the node's, and the node schedulable. (Reservations are the caller's.)
  bool CanBindBorrowed(TaskId task, NodeId node, const GpuIndices& gpus) const;
  // Binds pending `task` on lent capacity: takes `gpus` out of lent_free, its CPU out of
  // lent_cpu_free and its memory out of mem_free; gpu_free, cpu_free and the allocation totals do
  // not change (those GPUs and CPU are already the standby tasks'). The task is bound, borrowed,
  // and listed in the node's tasks. REQUIRES: CanBindBorrowed(task, node, gpus).
  void BindBorrowed(TaskId task, NodeId node, const GpuIndices& gpus);
  // The nodes with lent_free != 0 (some lent GPU unused), kept incrementally, in no particular
  // order (it changes as nodes join and leave). Down or cordoned nodes may be listed.
  const std::vector<NodeId>& lending_nodes() const { return lending_; }
  void SetNodeState(NodeId node, NodeState state);
  // Records when `job`'s current run started (-1: not running); read by PreemptAction's costs.
  void SetJobStart(JobId job, int64_t t);
  // Sets Job::resume_nodes (empty: none). REQUIRES: job is valid.
  void SetResumeNodes(JobId job, std::vector<NodeId> nodes);
  // Changes a job's replica bounds. REQUIRES: 1 <= min <= max <= its task count.
  void SetJobBounds(JobId job, int32_t min_replicas, int32_t max_replicas);
  // Replaces the job's topology constraint (a waiting job that relaxed its required level).
  // REQUIRES: no task of the job is bound; the plane is the job's (or none), levels within it.
  void SetJobTopology(JobId job, const TopologyConstraint& topology);
  // Holds `nodes` for `owner` (a kNodeHold Reservation). REQUIRES: the owner holds no reservation, the
  // nodes are distinct and none is held.
  ReservationId AddReservation(JobId owner, std::span<const NodeId> nodes);
  // Lets go of every node of an active node hold and clears its owner's record (a no-op for a
  // released hold or a capacity reservation; see ReleaseCapacity).
  void ReleaseReservation(ReservationId id);
  const Reservation& reservation(ReservationId id) const { return reservations_[id.value()]; }
  // Every reservation ever made, of both kinds, active or released, indexed by ReservationId.
  const std::vector<Reservation>& reservations() const { return reservations_; }

  // Capacity reservations (Reservation::Kind::kCapacity; see the invariants above). Every change
  // bumps the node's version, the epoch and the change feed like a bind or release would.
  //
  // Holds `req` on `node`, GPU indices `gpus`, for `owner` (and only `owner_task` of it when
  // that is valid), from `now_s` for `ttl_s` seconds (-1: no TTL). Succeeds only when a pending
  // task of `req` could be bound there now (CanBind's rules: distinct GPU indices below the node's
  // GPU count, exactly req.gpu_count of them when req.NeedsGpu() and none otherwise, each with
  // req.gpu_milli free — so whole-GPU requests need wholly free GPUs —, CPU and memory free) and
  // the node is ready and of a model req.models admits. Otherwise InvalidArgument naming why.
  // The capacity is taken out of the node's free amounts exactly as Bind would, but is not
  // counted in allocated_gpu_milli()/allocated_cpu_milli() (nothing runs on it): it is counted
  // in reserved_gpu_milli()/reserved_cpu_milli() until consumed, released or expired.
  StatusOr<ReservationId> ReserveCapacity(JobId owner, TaskId owner_task, NodeId node, const TaskRequest& req,
                                          const GpuIndices& gpus, int64_t now_s, int64_t ttl_s);
  // Whether pending `task` may bind into capacity reservation `r`: r is available, the task
  // belongs to r's owner (and is r's owner_task when that is set), its request equals r's req,
  // and r's node is not down (a cordon made after the reservation does not take it back).
  bool CanBindReserved(TaskId task, ReservationId r) const;
  // Binds `task` on r's node and GPUs with r's capacity: the node's free amounts do not change
  // (the held resources become the task's); the task counts in the allocation totals from now on
  // and r's amounts leave the reserved totals; r becomes kConsumed. Unbinding or finishing the
  // task later releases its resources like any task's. REQUIRES: CanBindReserved(task, r).
  void BindReserved(TaskId task, ReservationId r);
  // Returns the capacity of available capacity reservation `r` to its node (bumps release_seq)
  // and marks it kExpired when `expired`, else kReleased. A no-op when r is not available.
  // REQUIRES: r is a capacity reservation.
  void ReleaseCapacity(ReservationId r, bool expired = false);
  // Releases, as expired, every available capacity reservation with 0 <= expires_s <= now_s, and
  // returns them in id order.
  std::vector<ReservationId> ExpireReservations(int64_t now_s);
  // The available capacity reservations, in id order (empty at the end of a clean run).
  const std::vector<ReservationId>& available_capacity_reservations() const { return available_capacity_; }
  // Sums over the available capacity reservations (GPU: gpu_count x gpu_milli each).
  int64_t reserved_gpu_milli() const { return reserved_gpu_milli_; }
  MilliCpu reserved_cpu_milli() const { return reserved_cpu_milli_; }

  const Node& node(NodeId id) const { return nodes_[id.value()]; }
  const Task& task(TaskId id) const { return tasks_[id.value()]; }
  const Job& job(JobId id) const { return jobs_[id.value()]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  // Packed filter view of every node, indexed by NodeId.
  const std::vector<NodeFit>& fits() const { return fits_; }
  const std::vector<Task>& tasks() const { return tasks_; }
  const std::vector<Job>& jobs() const { return jobs_; }
  size_t num_nodes() const { return nodes_.size(); }
  // Pre-sizes the task and job tables (an optimisation only).
  void Reserve(size_t tasks, size_t jobs) {
    tasks_.reserve(tasks);
    jobs_.reserve(jobs);
  }

  // Allocation totals count each physical GPU and CPU milli once: a borrowed task's GPUs and CPU
  // are counted as its standby lender's, not again. Capacity held by available capacity
  // reservations is not allocated (see reserved_gpu_milli()), though it is not free either.
  int64_t total_gpu_milli() const { return total_gpu_milli_; }
  int64_t allocated_gpu_milli() const { return allocated_gpu_milli_; }
  MilliCpu total_cpu_milli() const { return total_cpu_milli_; }
  MilliCpu allocated_cpu_milli() const { return allocated_cpu_milli_; }
  int64_t num_bound_tasks() const { return num_bound_; }  // borrowed tasks included
  // Queues (issue 20): jobs name one by JobSpec::queue; what each queue's bound tasks hold — its
  // own jobs' and its descendants' — is kept current. SetQueues gives the tree: each queue's
  // parent (-1: none; parents form no cycle). REQUIRES: before any job names a queue.
  void SetQueues(std::vector<int32_t> parent);
  // A new tree while jobs run (an admin changed the queues): each job's queue q becomes remap[q]
  // (-1: none), and what each queue holds is counted anew from the bound tasks. O(tasks + jobs).
  // REQUIRES: remap has an entry per queue of the old tree, each -1 or a queue of `parent`.
  void ReplaceQueues(std::vector<int32_t> parent, const std::vector<int32_t>& remap);
  // The job log: the jobs whose bound tasks changed (a bind, a release, a Standby entry or exit)
  // since the last ClearJobLog, each once, in the order of their first change — so that whoever
  // keeps figures per job or per queue (what a queue holds, which running jobs may grow) recounts
  // only those that changed. job_log_overflowed(): recount everything (ReplaceQueues sets it).
  const std::vector<JobId>& job_log() const { return job_log_; }
  bool job_log_overflowed() const { return job_log_overflowed_; }
  void ClearJobLog() { ForgetJobLog(false); }
  size_t queue_count() const { return queue_usage_.size(); }
  int32_t queue_parent(size_t q) const { return queue_parent_[q]; }
  const QueueUsage& queue_usage(size_t q) const { return queue_usage_[q]; }
  // What job j's bound tasks hold in its queue's dimensions (what queue_usage counts of it).
  // O(its tasks).
  QueueUsage JobHeld(JobId j) const;
  // What the bound tasks of queue q's preemptible jobs hold (a part of queue_usage).
  const QueueUsage& queue_preemptible(size_t q) const { return queue_preemptible_[q]; }
  // What queue q's usage would grow by if all its Standby tasks (its own and its descendants')
  // were restored, at most: the GPUs and CPU they lend, less the GPUs of those lent ones that
  // borrowed tasks of q's own jobs or descendants' use (counted in queue_usage already, and
  // evicted by the restore). A restore needs no room, so a queue's limit bounds queue_usage plus
  // this (QueueBook, Bound::kLimit). CPU borrowed within q is not taken off (a borrower's CPU
  // comes from its node's lent pool, no one lender's): an over-estimate there. Memory: 0.
  const QueueUsage& queue_restorable(size_t q) const { return queue_restorable_[q]; }
  // The preemptible jobs of queue q (its own, not a descendant's) with a bound task, in no
  // particular order: where the victims of a Reclaim that takes only from q are.
  const std::vector<JobId>& queue_preemptible_jobs(size_t q) const { return queue_jobs_[q]; }
  // The fewest GPU milli one bound task of a preemptible job of queue q (its own, not a
  // descendant's) holds on a node of a model in `models` (an empty set: any node); INT64_MAX
  // when there is none. Evicting any of q's work frees at least this much. O(sizes in q).
  int64_t queue_min_preemptible(size_t q, GpuModelSet models) const;
  // GPU milli held by the bound tasks (not borrowed ones) of preemptible jobs below `priority`:
  // what a Reclaim at that priority could free at most. O(distinct priorities).
  int64_t PreemptibleGpuMilliBelow(int32_t priority) const;
  // Free GPU milli (the nodes' gpu_free, summed) on the nodes of the models in `models` (an empty
  // set: every node): with what victims would free, the most any placement there can use.
  // O(models).
  int64_t free_gpu_milli(GpuModelSet models) const {
    if (models.Any()) return free_gpu_milli_all_;
    int64_t sum = 0;
    for (int m = 0; m < GpuModelSet::kMaxModels; ++m) {
      if (models.bits() >> m & 1) sum += free_gpu_milli_model_[static_cast<size_t>(m)];
    }
    return sum;
  }
  // As free_gpu_milli, but only on the schedulable nodes no reservation holds: with what victims
  // would free, the most a placement there can use for a job holding no reservation. O(models).
  int64_t unheld_free_gpu_milli(GpuModelSet models) const {
    if (models.Any()) return unheld_free_all_;
    int64_t sum = 0;
    for (int m = 0; m < GpuModelSet::kMaxModels; ++m) {
      if (models.bits() >> m & 1) sum += unheld_free_model_[static_cast<size_t>(m)];
    }
    return sum;
  }
  // Free-capacity index: the nodes with exactly k wholly free GPUs (k in [0, kMaxGpusPerNode]),
  // in no particular order. A task needing k whole GPUs only looks at buckets k and above.
  const std::vector<NodeId>& nodes_with_full_free(int k) const { return by_full_free_[k]; }

  // Change feed: every change of a node's free capacity, tasks, state or reservation (and every new
  // node) is
  // numbered; readers keep the number they have seen (a cursor). The last kChangeRing changes are
  // kept, so a reader more than that far behind must rebuild from the nodes themselves.
  static constexpr uint64_t kChangeRing = uint64_t{1} << 16;
  uint64_t change_seq() const { return change_seq_; }
  // Calls f(NodeId) for each change numbered after `cursor`, oldest first (a node may repeat).
  // Returns false, calling nothing, when some of those changes are no longer kept.
  template <typename F>
  bool ForEachChangeSince(uint64_t cursor, F&& f) const {
    if (change_seq_ - cursor > kChangeRing) return false;
    for (uint64_t s = cursor; s < change_seq_; ++s) f(change_ring_[s % kChangeRing]);
    return true;
  }

  // Bumped on every mutation; lets caches tell whether anything changed.
  uint64_t epoch() const { return epoch_; }
  // Bumped whenever capacity may have become usable: a bound task released (Unbind, Finish), a
  // reservation released or expired (either kind), a node made ready again. Between two equal values capacity only
  // shrank, so a placement that failed still fails.
  uint64_t release_seq() const { return release_seq_; }
  // As release_seq, but unchanged by releases on nodes of models outside `models` (an empty set:
  // every model, release_seq itself).
  uint64_t release_seq(GpuModelSet models) const {
    if (models.Any()) return release_seq_;
    uint64_t sum = release_all_;
    for (int m = 0; m < GpuModelSet::kMaxModels; ++m) {
      if (models.bits() >> m & 1) sum += release_model_[static_cast<size_t>(m)];
    }
    return sum;
  }

  // Returns OK, or the first broken invariant in words.
  Status CheckInvariants() const;
  // Parts of CheckInvariants: node holds and the reservations that list them; the free-GPU index
  // and the per-domain aggregates; each job's bound-task count and uniform-request flag; each
  // queue's usage.
  Status CheckHolds() const;
  Status CheckIndexes() const;
  Status CheckJobCounts() const;
  // What each queue holds (queue_usage), recounted from the bound tasks.
  Status CheckQueueUsage() const;

 private:
  // CheckInvariants' recount, per node, of what bound tasks and available capacity reservations
  // hold, and cluster totals; filled by RecountTasks then RecountReservations, checked against
  // the nodes by CheckNodes (which sums the capacity totals).
  struct Recount;
  Status RecountTasks(Recount& c) const;
  Status RecountReservations(Recount& c) const;
  Status CheckNodes(Recount& c) const;
  void RefreshGpuSummary(Node& n);
  void SyncFit(const Node& n);
  void MoveBucket(NodeId id, int from, int to);
  void Release(Task& t);
  // Removes standby task t's lending from its node (no version bump; the caller's change does).
  void Unlend(Task& t, Node& n);
  // Puts the node into or out of lending_ according to lent_free.
  void SyncLending(const Node& n);
  // Bumps the node's version, syncs its packed view (and change feed) and the lending index.
  void NodeChanged(Node& n);

  GpuModels models_;
  Topology topology_;
  std::vector<DomainFree> domain_free_;
  std::vector<Node> nodes_;
  std::unordered_set<std::string> node_names_;
  std::vector<NodeFit> fits_;
  std::vector<Task> tasks_;
  std::vector<Job> jobs_;
  std::vector<Reservation> reservations_;
  int64_t total_gpu_milli_ = 0;
  int64_t allocated_gpu_milli_ = 0;
  MilliCpu total_cpu_milli_ = 0;
  MilliCpu allocated_cpu_milli_ = 0;
  int64_t num_bound_ = 0;
  std::map<int32_t, int64_t> preemptible_gpu_milli_;  // by job priority (PreemptibleGpuMilliBelow)
  // Adds (sign 1) or takes back (-1) what bound task `t` holds to preemptible_gpu_milli_.
  void CountPreemptible(const Task& t, int64_t gpu_milli, int sign);
  // Adds (sign 1) or takes back (-1) what bound task `t` holds to its job's queue's usage, and
  // logs its job (job_log).
  void CountQueue(const Task& t, int sign);
  std::vector<QueueUsage> queue_usage_;
  std::vector<QueueUsage> queue_preemptible_;
  std::vector<QueueUsage> queue_restorable_;
  // What CountQueue adds to `restorable` (one entry per queue) for bound task `t` (sign 1) or
  // takes back (-1): a Standby task's lent GPUs and CPU up its queue's path; a borrowed task's
  // GPUs taken off each queue on its path that is also on the path of the GPU's lender.
  void AddRestorable(std::vector<QueueUsage>& restorable, const Task& t, int sign) const;
  std::vector<JobId> job_log_;
  std::vector<char> job_logged_;  // per job: in job_log_
  bool job_log_overflowed_ = false;
  // Empties the job log, overflowed or not.
  void ForgetJobLog(bool overflowed);
  // Per queue: the GPU sizes its own preemptible jobs' bound tasks hold (queue_min_preemptible),
  // one entry per (node model, GPU milli) with the count of such tasks.
  struct HeldSize {
    int32_t model = -1;  // the node's model (-1: none)
    int64_t gpu_milli = 0;
    int32_t tasks = 0;
  };
  std::vector<std::vector<HeldSize>> queue_sizes_;
  // queue_preemptible_jobs: per queue, its jobs; per job, its tasks counted there (CountQueue)
  // and its position in its queue's list.
  std::vector<std::vector<JobId>> queue_jobs_;
  std::vector<int32_t> job_counted_;
  std::vector<uint32_t> job_queue_pos_;
  // What CountQueue adds to queue_sizes_ for bound task `t` (sign 1) or takes back (-1).
  static void AddSize(std::vector<HeldSize>& sizes, const Task& t, GpuModelId m, int sign);
  std::vector<int32_t> queue_parent_;
  int64_t reserved_gpu_milli_ = 0;
  MilliCpu reserved_cpu_milli_ = 0;
  std::vector<ReservationId> available_capacity_;  // available capacity reservations, id order
  uint64_t epoch_ = 0;
  uint64_t release_seq_ = 0;
  int64_t free_gpu_milli_all_ = 0;  // free_gpu_milli: over every node, and per node model
  std::array<int64_t, GpuModelSet::kMaxModels> free_gpu_milli_model_{};
  int64_t unheld_free_all_ = 0;  // unheld_free_gpu_milli: over every node, and per node model
  std::array<int64_t, GpuModelSet::kMaxModels> unheld_free_model_{};
  uint64_t release_all_ = 0;  // releases tied to no one node's model
  std::array<uint64_t, GpuModelSet::kMaxModels> release_model_{};  // releases on nodes of each model
  // Capacity may have become usable on `n` (nullptr: anywhere): bumps release_seq_ and its model's.
  void Released(const Node* n);
  std::array<std::vector<NodeId>, kMaxGpusPerNode + 1> by_full_free_;
  std::vector<uint32_t> bucket_pos_;  // position of each node in its by_full_free_ bucket
  std::vector<NodeId> lending_;       // nodes with lent_free != 0
  std::vector<uint32_t> lending_pos_; // position of each node in lending_ (kNotLending: absent)
  static constexpr uint32_t kNotLending = UINT32_MAX;
  std::vector<NodeId> change_ring_ = std::vector<NodeId>(kChangeRing);
  uint64_t change_seq_ = 0;
};

}  // namespace estuary
