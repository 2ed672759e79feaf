#include "server/group_commit.h"

#include <cstddef>
#include <iterator>
#include <utility>

namespace estuary {

Status GroupCommitter::Commit(StoreBatch batch) {
  std::unique_lock lk(mu_);
  if (!broken_.ok()) return broken_;
  const uint64_t ticket = ++enqueued_;
  queue_.push_back(std::move(batch));
  for (;;) {
    cv_.wait(lk, [&] { return applied_ >= ticket || !leader_; });
    if (applied_ >= ticket) return ticket <= durable_ ? Status::Ok() : broken_;
    if (!broken_.ok()) return broken_;
    // Lead one round: the oldest queued batches, in order, up to the op cap (this caller's batch
    // may have to wait for the next round, which it then leads or joins).
    leader_ = true;
    size_t take = 0, ops = 0;
    while (take < queue_.size() && (take == 0 || max_ops_ == 0 || ops + queue_[take].changes.size() <= max_ops_)) {
      ops += queue_[take].changes.size();
      ++take;
    }
    std::vector<StoreBatch> round(std::make_move_iterator(queue_.begin()),
                                  std::make_move_iterator(queue_.begin() + static_cast<std::ptrdiff_t>(take)));
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(take));
    taken_ += take;
    const uint64_t last = taken_;
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
  }
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
