// The engine's inputs as data: one struct per kind of input, and EngineInput, one input with the
// engine time at which it was applied. Every input method of Engine records itself as an
// EngineInput when recording is on (Engine::RecordInputs), and Engine::Apply carries one out, so
// that a recorded log applied in order to a new engine over the same cluster and configuration
// gives the same decisions, event for event: the engine is a deterministic function of its
// timestamped input log. Inputs that carry no time of their own (a cordon, a hold, a node
// registration) are applied at the engine's current time: the latest time any input carried.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "engine/io.h"
#include "model/cluster_state.h"
#include "quota/queues.h"
#include "sched/actions/defrag.h"

namespace estuary {

// The most replicas a job may have (the job schema's bound on max replicas): every rank a replica
// ever had is below it.
inline constexpr size_t kMaxReplicaRanks = 100000;

// Where one replica of a job runs (Engine::Adopt).
struct ReplicaPlacement {
  size_t replica = 0;  // its rank: below kMaxReplicaRanks, may be at or above the job's max

  NodeId node;
  GpuIndices gpus;
  bool standby = false;   // it was in Standby: it enters Standby again
  bool borrowed = false;  // it ran on lent capacity: bound there again (ClusterState::BindBorrowed)
};

struct SubmitInput {
  EngineJob job;
  SubmitMode mode = SubmitMode::kEnqueue;
};
struct CancelInput {
  uint32_t job = 0;
  bool finished = false;  // Finish: the job ended on its own (its tasks finish); else Cancel
};
struct ResizeInput {
  uint32_t job = 0;
  int32_t min_replicas = 1, max_replicas = 1;
};
// A what-if that materialises the job when it is new (QuoteReclaim, FitsIdleNow), or that only
// materialises it (Know): it changes no placement but gives the job its place in the engine's
// state, which later inputs see.
struct ProbeInput {
  EngineJob job;
  bool quote = true;  // QuoteReclaim; false: FitsIdleNow
  bool know = false;  // Know (quote ignored)
};
struct AddPlaneInput {
  std::string name;
  std::vector<std::string> levels;
};
struct AddNodeInput {
  NodeSpec spec;
  std::string gpu_model;
  std::vector<std::pair<std::string, std::vector<std::string>>> domains;
};
struct NodeInput {
  enum class Op { kFail, kDrain, kRestore, kCordon, kUncordon, kEvacuate };
  Op op = Op::kFail;
  NodeId node;
};
struct StandbyInput {
  uint32_t job = 0;
  int32_t replicas = 0;
};
// A time window in which `replicas` of a job are in Standby (Engine::SetStandbyWindows).
struct StandbyWindowSpec {
  int64_t from_s = 0, to_s = 0;
  int32_t replicas = 0;
};
struct StandbyWindowsInput {
  uint32_t job = 0;
  std::vector<StandbyWindowSpec> windows;
};
struct DefragInput {
  DefragOptions options;
};
// Every move under way is given up (AbortMoves: a simulated run ends).
struct AbortMovesInput {};
struct AcknowledgeMoveInput {
  TaskId task;
  bool ready = false;
};
struct AcknowledgeStandbyInput {
  TaskId task;
  bool ok = false;
  std::string why;
};
struct HoldInput {
  uint32_t job = 0;
  bool hold = true;  // Reserve; false: Unreserve
};
struct AdoptInput {
  EngineJob job;
  std::vector<ReplicaPlacement> placements;
  int64_t started_s = 0;
};
// SetGrace / SetAbsorb / SetStandbyGrace.
struct SettingInput {
  enum class Key { kGrace, kAbsorb, kStandbyGrace };
  Key key = Key::kGrace;
  int64_t value = 0;
};
// SetQueues: the multi-tenant queues change while the engine runs.
struct QueuesInput {
  std::vector<QueueSpec> queues;
  SharingSpec sharing;
};
// What an engine knows of a job beyond the inputs that made it (Engine::Carried), for an engine
// made again in its place from inputs that do not tell it (Engine::RestoreCarried: a service
// reopened on its store).
struct CarriedJob {
  uint32_t job = 0;         // the driver's id
  int64_t submitted = -1;   // when it was first submitted (a hold's after_s counts from then)
  int64_t no_borrow_until = 0, no_grow_until = 0;  // the periods after a queue's Reclaim (0: none)
  std::vector<NodeId> resume_nodes;                // Job::resume_nodes
  int64_t started_s = -1;  // running: when its current run started (Job::started_at_s; Engine::Adopt's)
  // Waiting (queued_at >= 0): when it joined the queue, its place there (its position among the
  // jobs of its priority: smaller first), its required level as relaxed so far, and when it next
  // accepts the next level up and next triggers defragmentation (-1: never).
  int64_t queued_at = -1;
  int64_t position = 0;
  int32_t required_level = -1;
  int64_t relax_at = -1, trigger_at = -1;
  // A Reclaim of its own in its grace period (reclaim_at >= 0): when its victims are evicted,
  // whether it is its queue's (with the replicas it claims), the victims' replicas (driver id,
  // replica), the jobs evicted whole, and the nodes held for it.
  int64_t reclaim_at = -1;
  bool reclaim_queue = false;
  // Waiting: replicas whose room in its leaf queue a Reclaim within its queue made and holds for
  // it until it starts (Engine's within_claim; 0: none), and the second its victims left (the
  // hold ends after that second's cycles; -1: they have not yet).
  int32_t within_claim = 0;
  int64_t within_claim_until = -1;
  int32_t claimed = 0;
  std::vector<std::pair<uint32_t, uint32_t>> reclaim_tasks;
  std::vector<uint32_t> reclaim_whole;
  std::vector<NodeId> hold;
  // Waiting without a Reclaim: the nodes held for it (a hold of the `reserve` action, of backfill,
  // of a gang's survivors, of an assembly), and backfill's plan for it when it has one
  // (planned_start >= 0: when, where in words, and the plan's nodes).
  std::vector<NodeId> held;
  int64_t planned_start = -1;
  std::string planned_where;
  std::vector<NodeId> planned_nodes;
  // The plan made the hold `held` names (backfill releases it when it plans anew); false when
  // another hold replaced the plan's (the `reserve` action's), which backfill leaves alone.
  bool planned_holds = true;
  // The one job whose hold an assembly made (EngineDefrag::assemble): a trigger that comes due
  // plans for it anew rather than for another.
  bool assembled = false;
  // Backfill found no time for it when CarriedSchedule::walltime_starts was this (-1: not so):
  // it is not planned for again until a job with a walltime starts.
  int64_t unplanned = -1;
  // Running: its replicas leaving Standby in a grace period (a restore under way,
  // Engine::SetStandby), each with when it leaves and the borrowers' replicas warned (driver id,
  // replica).
  struct StandbyRestore {
    uint32_t replica = 0;
    int64_t at = 0;
    std::vector<std::pair<uint32_t, uint32_t>> noticed;
  };
  std::vector<StandbyRestore> restores;
};
// What the queues' book knows beyond its configuration, per queue by name.
struct CarriedQueue {
  std::string name;
  int64_t cooldown_until = 0;  // no Reclaim from it before
  double decayed = 0;          // time-based fairness's decayed GPU usage (GPU milli x s), at usage_at
  int64_t usage = -1;          // the GPU milli it has held since usage_at (-1: what it holds now)
};
// The engine's own timers (engine times, seconds).
struct CarriedSchedule {
  int64_t next_defrag = 0;    // the periodic defragmentation's next plan (0: none)
  int64_t last_plan = -1;     // the last defragmentation plan (its triggers' cooldown; -1: none)
  int64_t next_replan = 0;    // the `reserve` action's next renewal (0: none)
  int64_t next_backfill = 0;  // backfill's next planning (0: at the first cycle)
  int64_t walltime_starts = 0;  // starts of jobs with a walltime so far (CarriedJob::unplanned's clock)
  bool operator==(const CarriedSchedule&) const = default;
};
struct EngineCarry {
  std::vector<CarriedJob> jobs;
  std::vector<CarriedQueue> queues;
  int64_t usage_at = -1;  // the time of the decayed usage (-1: none)
  std::optional<CarriedSchedule> schedule;  // none: the engine keeps its own
};
// Engine::RestoreCarried.
struct RestoreInput {
  EngineCarry carry;
};
// A cycle, or a part of it (Engine::RunCycle).
struct CycleInput {
  CycleOptions options;
};

struct EngineInput {
  int64_t t = 0;  // the engine time at which it was applied
  std::variant<SubmitInput, CancelInput, ResizeInput, ProbeInput, AddPlaneInput, AddNodeInput, NodeInput, StandbyInput,
               StandbyWindowsInput,
               DefragInput, AbortMovesInput, AcknowledgeMoveInput, AcknowledgeStandbyInput, HoldInput, AdoptInput,
               SettingInput, QueuesInput, CycleInput, RestoreInput>
      what;
};

}  // namespace estuary
