// MigrationExecutor: carries out a DefragPlan on a live ClusterState, make-before-break, under a
// migration budget (issue 5, item 3). The planner (DefragAction) decides; the executor is the
// control flow that turns each planned move into state changes over (simulated) time.
//
// A move's life:
//   waiting  -> starting: its dependencies (`after`) are complete and the budget allows it; the
//               move is re-validated against the current state (below) and a capacity
//               Reservation (ClusterState::ReserveCapacity, owner = the task's job, owner_task =
//               the task) is made on the target for the task's request: the new instance starts
//               there, and nothing else can take that capacity. The old instance keeps running
//               on its source: both hold resources (double occupancy).
//   starting -> completed: `startup_s` later the new instance is ready: the old one is stopped
//               (ClusterState::Unbind) and the task is bound into its reservation
//               (ClusterState::BindReserved) — in one step, so the job never has fewer replicas
//               bound than before (never fewer than its min ready replicas).
//   starting -> aborted: the target failed or timed out (a seeded draw with probability
//               fail_permille decides at the start whether the new instance fails; it is
//               detected `timeout_s` after the start), the target node went down or is being
//               emptied (GiveUpMovesOnto: a drain or an evacuation), or the task
//               is no longer bound at its source (its job finished, was evicted or failed). The
//               reservation is released (ReleaseCapacity) and the old instance, if any, keeps
//               running where it was.
//   waiting  -> cancelled: a move it depends on was aborted or cancelled, another move of the
//               same vacated node was (the node will not become free: its remaining moves would
//               only be churn), or re-validation failed: the task is no longer bound at `from`,
//               it is in Standby or borrowed, the target is not ready, or no GPU indices on the
//               target hold it now (the planned ones first, then the best fit on that node).
// Moves are grouped by the node they vacate (a chain's last move leaves that node; its ejected
// tasks' moves belong to the same group). With `drain`, a group's node is cordoned
// (NodeState::kCordoned) from the start of its first move, so new work does not land on the node
// being emptied (not at Submit: a node may receive tasks in one round of the plan and be vacated
// in a later one); it is made ready again when the group ends (all moves completed, or one
// aborted or cancelled) — unless something else changed its state meanwhile (e.g. it went down).
//
// Budget: at most `max_concurrent` moves starting at once, at most `per_node` of them touching a
// node (as source or target), at most `per_job` for one job. Submit keeps a prefix of the plan
// made of whole groups with at most `max_moves` moves (a budget on the plan's size).
//
// Thread-safety: none; one executor per ClusterState, driven by one thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "common/rng.h"
#include "common/status.h"
#include "model/cluster_state.h"
#include "sched/actions/defrag.h"

namespace estuary {

struct MigrationOptions {
  int32_t max_concurrent = 64;  // moves starting at once, cluster-wide (>= 1)
  int32_t per_node = 2;         // moves starting at once touching one node (>= 1)
  int32_t per_job = 2;          // moves starting at once of one job (>= 1)
  int64_t max_moves = 0;        // moves kept from a submitted plan (whole groups); 0: all
  int64_t startup_s = 120;      // a new instance is ready this long after its start (>= 0)
  int64_t timeout_s = 600;      // a failed new instance is detected this long after its start (>= startup_s)
  int32_t fail_permille = 0;    // probability that a new instance fails, per mille (0..1000)
  bool drain = true;            // cordon each group's node while its moves run
  uint64_t seed = 1;            // of the failure draws
  // Acknowledged mode (a live driver whose agents start the new instances): a starting move is
  // ready only once Acknowledge(task, true) says its new instance runs, and aborted by
  // Acknowledge(task, false) or when no acknowledgement came within timeout_s of its start;
  // startup_s and fail_permille are not used.
  bool acknowledged = false;
};

enum class MoveState : uint8_t { kWaiting, kStarting, kCompleted, kAborted, kCancelled };

// Counters over the executor's life (every plan submitted).
struct MigrationCounters {
  int64_t planned = 0;    // moves kept by Submit
  int64_t started = 0;
  int64_t completed = 0;
  int64_t aborted = 0;    // started, then given up (the old instance kept)
  int64_t cancelled = 0;  // never started
  int64_t groups_completed = 0;  // nodes whose every move completed (vacated)
  // Double occupancy: GPU milli reserved on targets x seconds, from start to completion or abort.
  int64_t double_occupancy_gpu_milli_s = 0;
  // Another executor's counts added (e.g. a federation's members summed).
  MigrationCounters& operator+=(const MigrationCounters& o) {
    planned += o.planned;
    started += o.started;
    completed += o.completed;
    aborted += o.aborted;
    cancelled += o.cancelled;
    groups_completed += o.groups_completed;
    double_occupancy_gpu_milli_s += o.double_occupancy_gpu_milli_s;
    return *this;
  }
};

class MigrationExecutor {
 public:
  // OK, or the first bad option named (e.g. "per_node: 0 (must be >= 1)").
  static Status Validate(const MigrationOptions& options);
  // REQUIRES: Validate(options).ok().
  explicit MigrationExecutor(MigrationOptions options);

  // Adds `plan`'s moves (a prefix of whole groups within max_moves) to those to run. A move's
  // `after` refers to moves of the same plan. Changes nothing in `state` (moves start in Step).
  // Returns the number of moves kept.
  int64_t Submit(ClusterState& state, const DefragPlan& plan);
  // Brings the moves up to `now_s`: completes the ready ones, aborts the broken ones, cancels
  // what can no longer happen, then starts what the budget allows, in plan order. Call it after
  // every change of the state and at NextDue(). Idempotent at a given time: a second call with
  // the same state and time changes nothing.
  void Step(ClusterState& state, int64_t now_s);
  // Acknowledged mode: the new instance of `task`'s starting move runs (`ready`) or failed. Takes
  // effect at the next Step. False when the task has no starting move.
  bool Acknowledge(TaskId task, bool ready);
  // The earliest time a starting move is due (ready or timed out); nullopt when none starts.
  std::optional<int64_t> NextDue() const;
  // Whether any move is waiting or starting.
  bool Busy() const { return active_ > 0; }
  // `node`'s state was set by someone else since (an admin's cordon, drain or evacuation, a
  // failure, a restore): a group that cordoned it leaves it as it is when the group ends.
  void NodeTaken(NodeId node);
  // `node` is being emptied (an admin's drain or evacuation): the moves starting onto it are
  // aborted at the next Step (their new instances stop; the old ones run on where they are).
  // Waiting ones onto it are cancelled when they would start (the node is not ready).
  void GiveUpMovesOnto(NodeId node);
  // Sets `tasks[t]` (indexed by TaskId value, grown as needed) for every task with a move waiting
  // or starting: a plan made meanwhile (an evacuation's) must not move it a second time.
  void MarkMoving(std::vector<char>& tasks) const;
  // Aborts every starting move and cancels every waiting one (releasing their reservations and
  // uncordoning their nodes): the end of a run.
  void AbortAll(ClusterState& state, int64_t now_s);

  const MigrationCounters& counters() const { return counters_; }

  // Every start and end of a move (kStarting, then kCompleted, kAborted or kCancelled), in the
  // order they happened, since the last call; for logs.
  struct Event {
    int64_t t = 0;
    size_t move = 0;
    MoveState state = MoveState::kStarting;
  };
  std::vector<Event> TakeEvents() { return std::exchange(events_, {}); }

  struct Move {
    DefragMove plan;                  // `after` rewritten to indices into moves()
    size_t group = 0;
    MoveState state = MoveState::kWaiting;
    ReservationId reservation;
    int64_t started_s = -1, ended_s = -1;
    bool fails = false;               // drawn at the start
    int8_t ack = 0;                   // acknowledged mode: +1 ready, -1 failed, 0 not yet
    bool target_emptied = false;      // GiveUpMovesOnto named its target while it started
    GpuIndices gpus;                  // where it was reserved (valid when started)
  };
  const std::vector<Move>& moves() const { return moves_; }
  // Every move before this index has ended (completed, aborted or cancelled).
  size_t first_open() const { return first_open_; }

 private:
  struct Group {
    NodeId node;
    int32_t left = 0;        // moves neither completed, aborted nor cancelled
    bool broken = false;     // a move aborted or was cancelled
    bool began = false;      // one of its moves started
    bool cordoned = false;   // we cordoned the node (at its first start)
  };
  // The group that cordoned each node it still holds cordoned (a group cordons a ready node
  // only, so one per node), by NodeId value.
  std::map<uint32_t, size_t> cordoning_;
  void EndMove(ClusterState& state, size_t m, MoveState end, int64_t now_s);
  void Uncordon(ClusterState& state, Group& g);
  bool TryStart(ClusterState& state, size_t m, int64_t now_s);

  MigrationOptions options_;
  Rng rng_;
  std::vector<Move> moves_;
  std::vector<Group> groups_;
  size_t first_open_ = 0;  // moves before it are all ended
  int64_t active_ = 0;     // waiting or starting moves
  int32_t starting_ = 0;
  std::vector<int32_t> node_busy_;  // by NodeId: starting moves touching it
  std::vector<int32_t> job_busy_;   // by JobId: starting moves of it
  MigrationCounters counters_;
  std::vector<Event> events_;
};

}  // namespace estuary
