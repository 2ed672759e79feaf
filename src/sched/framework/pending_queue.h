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
//
// Classes. Shapes may be grouped into classes (SetClass): shapes that differ only in something a
// job's wait may or may not depend on — the engine's shapes of one request in different tenant
// queues. A job that waits for its class (kWaits: no capacity for its request) skips every shape
// of its class for the rest of the pass; one that waits for its shape alone (kShapeWaits: its
// queue has no room) skips only its shape. A pass looks at the shapes of a class lazily, in the
// order of their first jobs, so a class whose first tried job waits costs O(log) however many
// shapes it has. A shape without a class is a class of its own.
// Thread-safety: none.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
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
  // With classes: it waits for its class (kWaits: the class's later jobs are skipped) or for its
  // shape alone (kShapeWaits; without classes the two are alike).
  enum class Outcome { kStarted, kInfeasible, kWaits, kStays, kShapeWaits };

  explicit PendingQueue(bool by_priority) : by_priority_(by_priority) {}

  // Puts `shape` (>= 0, no job of it pushed yet) in class `cls` (>= 0, the caller's numbering).
  void SetClass(int shape, int cls);
  // Adds job `i` (not queued) of `shape` (>= 0) and `priority` at the back or at the front.
  void Push(size_t i, int32_t priority, int shape, bool front);
  // Removes queued job `i`.
  void Remove(size_t i);
  // Queued job `i` is now of `shape` (>= 0); it keeps its place in the queue.
  void Reshape(size_t i, int shape);
  bool Contains(size_t i) const { return i < slots_.size() && slots_[i].queued; }
  // Queued job i's position among the jobs of its priority (smaller: earlier; a job pushed at the
  // front has a smaller one than every job queued before it).
  int64_t PositionOf(size_t i) const { return slots_[i].key.second; }
  size_t size() const { return size_; }
  // Whether a job of `shape` is queued.
  bool Queued(int shape) const {
    return shape >= 0 && static_cast<size_t>(shape) < shapes_.size() && !shapes_[static_cast<size_t>(shape)].empty();
  }
  bool empty() const { return size_ == 0; }
  // Every queued job, in queue order; with `shape_filter`, only the jobs of the shapes it accepts.
  // O(P log P) over those jobs.
  std::vector<size_t> InOrder(const std::function<bool(int)>& shape_filter = nullptr) const;

  // The first job of `shape` in queue order that `accept` accepts (looked at in that order, up to
  // the first accepted), or SIZE_MAX.
  size_t FirstOf(int shape, const std::function<bool(size_t)>& accept) const;
  size_t shapes() const { return shapes_.size(); }
  // Marks `shape` (>= 0) in list `list` (0 .. kLists - 1) or not (none is at first): a pass with
  // Scope::list looks only at that list's shapes, lazily as at every shape otherwise — O(1) to
  // unlist, O(log) to list (O(1) when it was unlisted since the last pass that came to it), so
  // that a caller whose lists change little between passes does not hand over every listed shape
  // each pass, and one whose shapes go out and back in costs little. A shape unlisted during a
  // pass (by an attempt) is not looked at by it unless it already was.
  static constexpr int kLists = 2;
  void SetListed(int shape, bool listed, int list = 0);
  bool listed(int shape, int list = 0) const {
    return static_cast<size_t>(shape) < listed_.size() && (listed_[static_cast<size_t>(shape)] >> list & 1) != 0;
  }

  // Which shapes a pass tries (every one by default; the jobs of `own` always).
  struct Scope {
    std::function<bool(int)> shape;  // only the shapes it accepts (asked once per shape looked at)
    std::function<bool(int)> cls;    // only the classes it accepts (the caller's numbering; asked
                                     // once per class, not for shapes that are classes of their own;
                                     // the classes it refused are asked again once an own job started)
    // Only these shapes, looked at all at once (not lazily: for a few shapes out of many).
    const std::vector<int>* shapes = nullptr;
    // >= 0: only the shapes of that list (SetListed), looked at lazily (ignored with `shapes`).
    int list = -1;
  };
  // One pass. `attempt(i)` tries job i and says what became of it: started or infeasible jobs
  // leave the queue; a job that waits stays, and (unless it is one of `own`) its class (kWaits)
  // or its shape (kShapeWaits) is skipped for the rest of the pass. `own`: the jobs tried on
  // their own (see above); ones not queued are ignored. `scope`: the shapes tried.
  // O((tried + classes + shapes looked at + own) log(classes + shapes looked at + own)) plus the
  // attempts and the filters' calls; a shape is looked at when its class is not yet skipped as
  // its first job's turn comes (with Scope::shapes: every listed shape).
  void Pass(const std::function<Outcome(size_t)>& attempt, const std::vector<size_t>& own, const Scope& scope);
  // The same, with only the shapes `shape_filter` accepts (every one when null).
  void Pass(const std::function<Outcome(size_t)>& attempt, const std::vector<size_t>& own,
            const std::function<bool(int)>& shape_filter = nullptr) {
    Pass(attempt, own, Scope{shape_filter, nullptr, nullptr});
  }

 private:
  using Key = std::pair<int64_t, int64_t>;  // (-priority or 0, position)
  class PassRun;  // one pass's state
  struct Slot {
    bool queued = false;
    bool own = false;  // during a Pass: tried on its own
    int shape = -1;
    Key key{};
  };
  // Shape `shape`'s first job changed (it was `old`, if any): its class's heads follow.
  void NewHead(int shape, const std::pair<Key, size_t>* old);
  int ClassOf(int shape);
  bool by_priority_;
  std::vector<Slot> slots_;
  std::vector<std::set<std::pair<Key, size_t>>> shapes_;
  std::vector<int> class_of_;                        // per shape: its class (internal), -1 none yet
  std::vector<std::set<std::pair<Key, int>>> heads_;  // per class: (first job's key, shape), non-empty shapes
  // Per list, per class: heads_' entries of the list's shapes, and of shapes unlisted since (a
  // pass drops those as it comes to them).
  std::array<std::vector<std::set<std::pair<Key, int>>>, kLists> listed_heads_;
  // Per shape: bit l set when in list l; bit kLists + l when its entry is in listed_heads_[l].
  std::vector<char> listed_;
  bool entered(int shape, int list) const { return (listed_[static_cast<size_t>(shape)] >> (kLists + list) & 1) != 0; }
  std::vector<std::pair<int, int>> named_;           // (caller's class, internal class), sorted
  std::vector<int> caller_class_;                    // per class: the caller's number, -1 none
  int64_t back_ = 0, front_ = 0;  // next positions at the back (ascending) and front (descending)
  // Pass's per-shape marks (all zero between passes) and whether a pass is under way.
  std::vector<char> shape_state_, shape_filtered_;
  bool in_pass_ = false;
  size_t size_ = 0;
};

}  // namespace estuary
