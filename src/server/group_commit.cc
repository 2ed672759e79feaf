#include "server/group_commit.h"

#include <utility>

namespace estuary {

Status GroupCommitter::Commit(StoreBatch batch) {
  std::unique_lock lk(mu_);
  if (!broken_.ok()) return broken_;
  const uint64_t ticket = ++enqueued_;
  queue_.push_back(std::move(batch));
  cv_.wait(lk, [&] { return applied_ >= ticket || !leader_; });
  if (applied_ >= ticket) return ticket <= durable_ ? Status::Ok() : broken_;
  // Lead one round: everything queued so far, this batch included.
  leader_ = true;
  std::vector<StoreBatch> round = std::exchange(queue_, {});
  const uint64_t last = enqueued_;
  lk.unlock();
  StoreBatch merged;
  for (StoreBatch& b : round) {
    for (auto& c : b.changes) merged.changes.push_back(std::move(c));
  }
  const Status st = store_->Apply(merged);
  lk.lock();
  if (!st.ok() && broken_.ok()) broken_ = st;
  if (st.ok()) durable_ = last;
  applied_ = last;
  leader_ = false;
  ++rounds_;
  batches_ += round.size();
  cv_.notify_all();
  return st;
}

uint64_t GroupCommitter::rounds() const {
  std::lock_guard lk(mu_);
  return rounds_;
}

uint64_t GroupCommitter::batches() const {
  std::lock_guard lk(mu_);
  return batches_;
}

}  // namespace estuary
