#include "sched/framework/statement.h"

#include "common/check.h"

namespace estuary {

Statement::~Statement() { RollbackAll(); }

void Statement::Bind(TaskId task, NodeId node, const GpuIndices& gpus) {
  state_.Bind(task, node, gpus);
  ops_.push_back({true, task, node, gpus});
}

void Statement::Evict(TaskId task) {
  const Task& t = state_.task(task);
  ESTUARY_CHECK(t.state == TaskState::kBound);
  Op op{false, task, t.node, t.gpus};
  state_.Unbind(task);
  ops_.push_back(op);
}

void Statement::Rollback(size_t checkpoint) {
  while (ops_.size() > checkpoint) {
    const Op op = ops_.back();
    ops_.pop_back();
    if (op.bind) {
      state_.Unbind(op.task);
    } else {
      state_.Bind(op.task, op.node, op.gpus);
    }
  }
}

}  // namespace estuary
