// GroupCommitter: durable writes from many threads, several per transaction. A caller hands a
// StoreBatch to Commit and blocks until it is durably applied; while one caller (the leader)
// applies, later callers queue, and the next leader applies everything queued as one merged
// batch, in arrival order. So N concurrent writers cost about one Store::Apply per round, not N.
//
// Failure: when an Apply fails, every batch of that round gets its Status, and so does every
// later Commit (the store is no longer trusted: the service must be restarted on it).
// Thread-safety: Commit is safe from any thread. The Store must outlive the committer.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "store/store.h"

namespace estuary {

class GroupCommitter {
 public:
  // `max_ops_per_round`: a round takes queued batches, in order, while their changes fit this cap
  // (at least one batch; 0: no cap) — etcd bounds the operations of one transaction.
  explicit GroupCommitter(Store* store, size_t max_ops_per_round = 0) : store_(store), max_ops_(max_ops_per_round) {}
  Status Commit(StoreBatch batch);
  // Rounds applied so far and batches they carried (for metrics).
  uint64_t rounds() const;
  uint64_t batches() const;

 private:
  Store* store_;
  size_t max_ops_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<StoreBatch> queue_;
  uint64_t enqueued_ = 0;  // tickets handed out
  uint64_t taken_ = 0;     // tickets taken into a round (queue_ holds taken_+1 .. enqueued_)
  uint64_t applied_ = 0;   // tickets whose round has ended
  uint64_t durable_ = 0;   // tickets whose round was applied
  bool leader_ = false;
  Status broken_;          // the first failure; every later Commit returns it
  uint64_t rounds_ = 0, batches_ = 0;
};

}  // namespace estuary
