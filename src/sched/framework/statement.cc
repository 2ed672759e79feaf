#include "sched/framework/statement.h"

#include "common/check.h"

namespace estuary {

Statement::~Statement() { RollbackAll(); }

void Statement::Bind(TaskId task, NodeId node, const GpuIndices& gpus) {
  state_.Bind(task, node, gpus);
  ops_.push_back({Kind::kBind, task, node, gpus});
}

void Statement::BindBorrowed(TaskId task, NodeId node, const GpuIndices& gpus) {
  state_.BindBorrowed(task, node, gpus);
  ops_.push_back({Kind::kBindBorrowed, task, node, gpus});
}

void Statement::Evict(TaskId task) {
  const Task& t = state_.task(task);
  ESTUARY_CHECK(t.state == TaskState::kBound);
  const Kind kind = t.borrowed ? Kind::kEvictBorrowed : t.standby ? Kind::kEvictStandby : Kind::kEvict;
  Op op{kind, task, t.node, t.gpus};
  state_.Unbind(task);
  ops_.push_back(op);
}

void Statement::Rollback(size_t checkpoint) {
  while (ops_.size() > checkpoint) {
    const Op op = ops_.back();
    ops_.pop_back();
    switch (op.kind) {
      case Kind::kBind:
      case Kind::kBindBorrowed:
        state_.Unbind(op.task);
        break;
      case Kind::kEvict:
        state_.Bind(op.task, op.node, op.gpus);
        break;
      case Kind::kEvictBorrowed:
        state_.BindBorrowed(op.task, op.node, op.gpus);
        break;
      case Kind::kEvictStandby:
        state_.Bind(op.task, op.node, op.gpus);
        state_.EnterStandby(op.task);
        break;
    }
  }
}

}  // namespace estuary
