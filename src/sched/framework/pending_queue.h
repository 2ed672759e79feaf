// PendingQueue: a queue of waiting jobs (the simulator's, the federation's), grouped by shape so
// that one scheduling pass costs O((jobs started + shapes) log shapes) however long the queue is.
//
// Order. Jobs are ordered by (priority descending when `by_priority`, then position); a job pushed
// at the back (an arrival) goes after every queued job of its priority, one pushed at the front (a
// requeue) before them.
//
// A pass (Pass) tries the jobs in that order, except that once a job of some shape has to wait,
// the later jobs of the same shape are not tried in the pass: within a pass capacity only shrinks
// (jobs start, nothing ends), so they would wait too. The shape is the caller's: an integer that
// stands for everything that decides whether a job can start now (its replica request, min, max,
// step, topology constraint...). Jobs marked `own` (e.g. holding a reservation of their own) are
// tried on their own: their failure skips no one, another's failure does not skip them, and when
// one starts (releasing what it held) the skipped shapes are tried again.
// Thread-safety: none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <set>
#include <utility>
#include <vector>

namespace estuary {

class PendingQueue {
 public:
  // What became of a job a pass tried: it started or is infeasible (it leaves the queue); it waits
  // (it stays, and the later jobs of its shape are skipped); it stays but does not stand for its
  // shape (the next job of its shape is tried).
  enum class Outcome { kStarted, kInfeasible, kWaits, kStays };

  explicit PendingQueue(bool by_priority) : by_priority_(by_priority) {}

  // Adds job `i` (not queued) of `shape` (>= 0) and `priority` at the back or at the front.
  void Push(size_t i, int32_t priority, int shape, bool front);
  // Removes queued job `i`.
  void Remove(size_t i);
  bool Contains(size_t i) const { return i < slots_.size() && slots_[i].queued; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Every queued job, in queue order; with `shape_filter`, only the jobs of the shapes it accepts.
  // O(P log P) over those jobs.
  std::vector<size_t> InOrder(const std::function<bool(int)>& shape_filter = nullptr) const;

  // The first job of `shape` in queue order that `accept` accepts (looked at in that order, up to
  // the first accepted), or SIZE_MAX.
  size_t FirstOf(int shape, const std::function<bool(size_t)>& accept) const;
  size_t shapes() const { return shapes_.size(); }

  // One pass. `attempt(i)` tries job i and says what became of it: started or infeasible jobs
  // leave the queue; a job that waits stays, and (unless it is one of `own`) its shape is skipped
  // for the rest of the pass. `own`: the jobs tried on their own (see above); ones not queued are
  // ignored. With `shape_filter`, only the shapes it accepts are tried (the jobs of `own`
  // always are). O((tried + shapes + own) log(shapes + own)) plus the attempts.
  void Pass(const std::function<Outcome(size_t)>& attempt, const std::vector<size_t>& own,
            const std::function<bool(int)>& shape_filter = nullptr);

 private:
  using Key = std::pair<int64_t, int64_t>;  // (-priority or 0, position)
  struct Slot {
    bool queued = false;
    bool own = false;  // during a Pass: tried on its own
    int shape = -1;
    Key key{};
  };
  bool by_priority_;
  std::vector<Slot> slots_;
  std::vector<std::set<std::pair<Key, size_t>>> shapes_;
  int64_t back_ = 0, front_ = 0;  // next positions at the back (ascending) and front (descending)
  size_t size_ = 0;
};

}  // namespace estuary
