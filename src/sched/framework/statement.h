// Statement: a what-if over the ClusterState. Every Bind/Evict made through it is applied at once
// and recorded; Rollback(checkpoint) undoes the operations after a checkpoint in reverse order,
// Commit() keeps them. A statement destroyed without Commit() rolls everything back, so a failed
// gang placement or preemption plan can never leak half-applied state.
// Thread-safety: none; one statement per scheduling cycle at a time.
#pragma once

#include <vector>

#include "model/cluster_state.h"

namespace estuary {

class Statement {
 public:
  explicit Statement(ClusterState& state) : state_(state) {}
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // REQUIRES: state.CanBind(task, node, gpus).
  void Bind(TaskId task, NodeId node, const GpuIndices& gpus);
  // Binds a pending task on lent capacity (Standby). REQUIRES: state.CanBindBorrowed(task, node, gpus).
  void BindBorrowed(TaskId task, NodeId node, const GpuIndices& gpus);
  // Evicts a bound task back to pending. REQUIRES: the task is bound (a standby task: with no
  // borrower left, ClusterState::CanExitStandby). Rolled back, a borrowed task is bound on lent
  // capacity again and a standby task re-enters Standby.
  void Evict(TaskId task);

  // An opaque position in the log of operations.
  size_t Checkpoint() const { return ops_.size(); }
  void Rollback(size_t checkpoint);
  void RollbackAll() { Rollback(0); }
  // Keeps every operation; the statement is empty afterwards.
  void Commit() { ops_.clear(); }
  size_t size() const { return ops_.size(); }

 private:
  enum class Kind : uint8_t {
    kBind,          // undo: Unbind
    kBindBorrowed,  // undo: Unbind
    kEvict,         // undo: Bind back
    kEvictBorrowed, // undo: BindBorrowed back
    kEvictStandby,  // undo: Bind back, then EnterStandby
  };
  struct Op {
    Kind kind;
    TaskId task;
    NodeId node;
    GpuIndices gpus;
  };
  ClusterState& state_;
  std::vector<Op> ops_;
};

}  // namespace estuary
