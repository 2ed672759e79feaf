#include "sched/framework/pending_queue.h"

#include <algorithm>

namespace estuary {

void PendingQueue::SetClass(int shape, int cls) {
  if (class_of_.size() <= static_cast<size_t>(shape)) class_of_.resize(static_cast<size_t>(shape) + 1, -1);
  auto it = std::lower_bound(named_.begin(), named_.end(), std::make_pair(cls, INT32_MIN));
  if (it == named_.end() || it->first != cls) {
    it = named_.insert(it, {cls, static_cast<int>(heads_.size())});
    heads_.emplace_back();
    for (auto& lists : listed_heads_) lists.emplace_back();
    caller_class_.push_back(cls);
  }
  class_of_[static_cast<size_t>(shape)] = it->second;
}

int PendingQueue::ClassOf(int shape) {
  if (class_of_.size() <= static_cast<size_t>(shape)) class_of_.resize(static_cast<size_t>(shape) + 1, -1);
  int& c = class_of_[static_cast<size_t>(shape)];
  if (c < 0) {  // a class of its own
    c = static_cast<int>(heads_.size());
    heads_.emplace_back();
    for (auto& lists : listed_heads_) lists.emplace_back();
    caller_class_.push_back(-1);
  }
  return c;
}

void PendingQueue::NewHead(int shape, const std::pair<Key, size_t>* old) {
  const size_t c = static_cast<size_t>(ClassOf(shape));
  const auto& set = shapes_[static_cast<size_t>(shape)];
  if (old != nullptr) heads_[c].erase({old->first, shape});
  if (!set.empty()) heads_[c].insert({set.begin()->first, shape});
  if (static_cast<size_t>(shape) >= listed_.size()) return;
  for (int l = 0; l < kLists; ++l) {
    auto& heads = listed_heads_[static_cast<size_t>(l)][c];
    char& bits = listed_[static_cast<size_t>(shape)];
    const char in = static_cast<char>(1 << (kLists + l));
    if (entered(shape, l) && old != nullptr) heads.erase({old->first, shape});
    bits = static_cast<char>(bits & ~in);
    if (listed(shape, l) && !set.empty()) {
      heads.insert({set.begin()->first, shape});
      bits = static_cast<char>(bits | in);
    }
  }
}

void PendingQueue::SetListed(int shape, bool listed, int list) {
  if (listed_.size() <= static_cast<size_t>(shape)) listed_.resize(static_cast<size_t>(shape) + 1, 0);
  if (this->listed(shape, list) == listed) return;
  char& bits = listed_[static_cast<size_t>(shape)];
  bits = static_cast<char>(bits ^ (1 << list));
  // Unlisted: its entry stays until a pass comes to it (or it is listed again before).
  if (!listed || entered(shape, list)) return;
  if (static_cast<size_t>(shape) >= shapes_.size() || shapes_[static_cast<size_t>(shape)].empty()) return;
  const size_t c = static_cast<size_t>(ClassOf(shape));
  listed_heads_[static_cast<size_t>(list)][c].insert({shapes_[static_cast<size_t>(shape)].begin()->first, shape});
  bits = static_cast<char>(bits | (1 << (kLists + list)));
}

void PendingQueue::Push(size_t i, int32_t priority, int shape, bool front) {
  if (slots_.size() <= i) slots_.resize(i + 1);
  if (shapes_.size() <= static_cast<size_t>(shape)) shapes_.resize(static_cast<size_t>(shape) + 1);
  Slot& s = slots_[i];
  s.queued = true;
  s.shape = shape;
  s.key = {by_priority_ ? -int64_t{priority} : 0, front ? --front_ : back_++};
  auto& set = shapes_[static_cast<size_t>(shape)];
  const std::pair<Key, size_t> entry{s.key, i};
  if (set.empty() || entry < *set.begin()) {
    const std::optional<std::pair<Key, size_t>> old = set.empty() ? std::nullopt : std::optional(*set.begin());
    set.insert(entry);
    NewHead(shape, old ? &*old : nullptr);
  } else {
    set.insert(entry);
  }
  ++size_;
}

void PendingQueue::Remove(size_t i) {
  Slot& s = slots_[i];
  auto& set = shapes_[static_cast<size_t>(s.shape)];
  const std::pair<Key, size_t> entry{s.key, i};
  const bool head = *set.begin() == entry;
  set.erase(entry);
  if (head) NewHead(s.shape, &entry);
  s.queued = false;
  --size_;
}

void PendingQueue::Reshape(size_t i, int shape) {
  Slot& s = slots_[i];
  if (s.shape == shape) return;
  if (shapes_.size() <= static_cast<size_t>(shape)) shapes_.resize(static_cast<size_t>(shape) + 1);
  const Key key = s.key;
  Remove(i);
  s.queued = true;
  s.shape = shape;
  s.key = key;
  auto& set = shapes_[static_cast<size_t>(shape)];
  const std::pair<Key, size_t> entry{key, i};
  const std::optional<std::pair<Key, size_t>> old = set.empty() ? std::nullopt : std::optional(*set.begin());
  set.insert(entry);
  if (*set.begin() == entry) NewHead(shape, old ? &*old : nullptr);
  ++size_;
}

std::vector<size_t> PendingQueue::InOrder(const std::function<bool(int)>& shape_filter) const {
  std::vector<std::pair<Key, size_t>> all;
  for (size_t s = 0; s < shapes_.size(); ++s) {
    if (!shape_filter || shape_filter(static_cast<int>(s))) all.insert(all.end(), shapes_[s].begin(), shapes_[s].end());
  }
  std::sort(all.begin(), all.end());
  std::vector<size_t> out;
  out.reserve(all.size());
  for (const auto& [key, i] : all) out.push_back(i);
  return out;
}

size_t PendingQueue::FirstOf(int shape, const std::function<bool(size_t)>& accept) const {
  if (shape < 0 || static_cast<size_t>(shape) >= shapes_.size()) return SIZE_MAX;
  for (const auto& [key, i] : shapes_[static_cast<size_t>(shape)]) {
    if (accept(i)) return i;
  }
  return SIZE_MAX;
}

// One pass's state (see Pass). Heap entries, smallest first: ((key, job), tag). tag >= 0: the next
// job of active shape `tag`; -1: a job tried on its own; <= -2: class -tag-2's next shape is due
// (its first job's key; `job` holds the shape) — the class's shapes are looked at lazily, in the
// order of their first jobs (heads_), so that a skipped class's later shapes are never looked at.
class PendingQueue::PassRun {
 public:
  PassRun(PendingQueue& q, const std::function<Outcome(size_t)>& attempt, const Scope& scope)
      : q_(q),
        attempt_(attempt),
        scope_(scope),
        n_shapes_(q.shapes_.size()),
        n_classes_(q.heads_.size()),
        nested_(q.in_pass_),
        state_(nested_ ? nested_state_ : q.shape_state_),
        filtered_(nested_ ? nested_filtered_ : q.shape_filtered_),
        blocked_(n_classes_, 0),
        class_ok_(n_classes_, 0),
        last_(n_classes_, kNoHead),
        arm_after_(n_classes_, -1),
        list_(scope.list >= 0 && scope.shapes == nullptr ? scope.list : -1),
        heads_of_(list_ >= 0 ? q.listed_heads_[static_cast<size_t>(list_)] : q.heads_) {
    q_.in_pass_ = true;
    state_.resize(std::max(state_.size(), n_shapes_), 0);
    filtered_.resize(std::max(filtered_.size(), n_shapes_), 0);
  }
  // Leaves the queue's per-shape marks as they were before the pass (all zero) and the own marks unset.
  ~PassRun() {
    for (size_t i : own_) q_.slots_[i].own = false;
    for (int s : looked_at_) state_[static_cast<size_t>(s)] = filtered_[static_cast<size_t>(s)] = 0;
    q_.in_pass_ = nested_;
  }
  PassRun(const PassRun&) = delete;
  PassRun& operator=(const PassRun&) = delete;

  // The jobs tried on their own onto the heap, then the shapes in scope (or their classes' first).
  void Start(const std::vector<size_t>& own_jobs) {
    for (size_t i : own_jobs) {
      if (!q_.Contains(i) || q_.slots_[i].own) continue;
      q_.slots_[i].own = true;
      own_.push_back(i);
      heap_.push({{q_.slots_[i].key, i}, -1});
    }
    if (scope_.shapes != nullptr) {
      for (int s : *scope_.shapes) {
        if (s < 0 || static_cast<size_t>(s) >= n_shapes_ || state_[static_cast<size_t>(s)] != 0 || q_.shapes_[static_cast<size_t>(s)].empty()) continue;
        if (ClassAccepted(static_cast<size_t>(q_.class_of_[static_cast<size_t>(s)])) && Accepted(s)) Activate(s);
      }
    } else {
      for (size_t c = 0; c < n_classes_; ++c) {
        if (!heads_of_[c].empty() && ClassAccepted(c)) Arm(static_cast<int>(c));
      }
    }
  }

  void Run() {
    while (!heap_.empty()) {
      const Entry e = heap_.top();
      heap_.pop();
      if (e.second <= -2) ShapeDue(-2 - e.second, static_cast<int>(e.first.second), e.first.first);
      else Try(e.first, e.second);
    }
  }

 private:
  using Entry = std::pair<std::pair<Key, size_t>, int>;
  using ShapeIt = std::set<std::pair<Key, size_t>>::const_iterator;
  static constexpr std::pair<Key, int> kNoHead{{INT64_MIN, INT64_MIN}, INT32_MIN};

  // Whether the shape filter accepts s (asked once per shape).
  bool Accepted(int s) {
    char& f = filtered_[static_cast<size_t>(s)];
    if (f == 0) {
      f = !scope_.shape || scope_.shape(s) ? 1 : 2;
      looked_at_.push_back(s);
    }
    return f == 1;
  }
  // Whether the class filter accepts class c (asked once, until an own job starts).
  bool ClassAccepted(size_t c) {
    char& f = class_ok_[c];
    if (f == 0) f = !scope_.cls || q_.caller_class_[c] < 0 || scope_.cls(q_.caller_class_[c]) ? 1 : 2;
    return f == 1;
  }
  // The first job of `shape` at or after `it` that is not tried on its own, onto the heap.
  void PushNext(int shape, ShapeIt it) {
    const auto& set = q_.shapes_[static_cast<size_t>(shape)];
    while (it != set.end() && q_.slots_[it->second].own) ++it;
    if (it != set.end()) heap_.push({*it, shape});
  }
  // Shape s becomes active: its first job onto the heap. Returns whether one was pushed.
  bool Activate(int s) {
    state_[static_cast<size_t>(s)] = 1;
    looked_at_.push_back(s);
    const size_t before = heap_.size();
    PushNext(s, q_.shapes_[static_cast<size_t>(s)].begin());
    return heap_.size() > before;
  }
  // Class c's next shape not yet looked at (and accepted by the filter), as a due entry.
  void Arm(int c) {
    auto& heads = heads_of_[static_cast<size_t>(c)];
    const std::pair<Key, int>& last = last_[static_cast<size_t>(c)];
    // From the first shape when none was looked at yet (the usual case: O(1), not a descent
    // through a set of hundreds of shapes for each class of a pass).
    for (auto it = last == kNoHead ? heads.begin() : heads.upper_bound(last); it != heads.end(); ++it) {
      int s = it->second;
      // A shape unlisted since it was entered: dropped now.
      while (list_ >= 0 && !q_.listed(s, list_)) {
        char& bits = q_.listed_[static_cast<size_t>(s)];
        bits = static_cast<char>(bits & ~(1 << (kLists + list_)));
        it = heads.erase(it);
        if (it == heads.end()) return;
        s = it->second;
      }
      if (state_[static_cast<size_t>(s)] != 0 || !Accepted(s)) continue;
      heap_.push({{it->first, static_cast<size_t>(s)}, -2 - c});
      return;
    }
  }
  // Class c's next shape s (first job's key `key`) is due: it becomes active.
  void ShapeDue(int c, int s, const Key& key) {
    if (blocked_[static_cast<size_t>(c)] || state_[static_cast<size_t>(s)] != 0) return;
    last_[static_cast<size_t>(c)] = {key, s};
    // Unlisted since it was armed (by an attempt before its turn): dropped, as Arm drops one it
    // comes to, and the class's next shape is armed.
    if (list_ >= 0 && !q_.listed(s, list_)) {
      if (heads_of_[static_cast<size_t>(c)].erase({key, s}) > 0) {
        char& bits = q_.listed_[static_cast<size_t>(s)];
        bits = static_cast<char>(bits & ~(1 << (kLists + list_)));
      }
      Arm(c);
      return;
    }
    // Its first job onto the heap: the next attempt (nothing is due between). The class's next
    // shape's first job comes after that attempt's job, so it is armed by that attempt (and never
    // looked at when the attempt blocks the class). When the first job is one tried on its own,
    // the class's next shape may be due before it: armed now.
    if (Activate(s) && !q_.slots_[q_.shapes_[static_cast<size_t>(s)].begin()->second].own) arm_after_[static_cast<size_t>(c)] = s;
    else Arm(c);
  }
  // Tries job entry.second (of active shape `tag`, or tried on its own when tag is -1).
  void Try(const std::pair<Key, size_t>& entry, int tag) {
    const size_t i = entry.second;
    const int my_class = tag >= 0 ? q_.class_of_[static_cast<size_t>(tag)] : -1;
    // This attempt arms its class's next shape (unless the class is blocked by then).
    const bool arms = my_class >= 0 && arm_after_[static_cast<size_t>(my_class)] == tag;
    if (arms) arm_after_[static_cast<size_t>(my_class)] = -1;
    if (my_class >= 0 && blocked_[static_cast<size_t>(my_class)]) {
      state_[static_cast<size_t>(tag)] = 0;  // looked at again if its class is tried again
      if (scope_.shapes != nullptr) dropped_.push_back(tag);
      return;
    }
    const Outcome o = attempt_(i);
    const int my_shape = q_.slots_[i].shape;
    const bool leaves = o == Outcome::kStarted || o == Outcome::kInfeasible;
    if (leaves) q_.Remove(i);
    if (tag < 0) {
      if (o == Outcome::kStarted) Reopen();
      return;
    }
    if (o == Outcome::kShapeWaits) {
      skipped_.push_back(tag);
    } else if (o == Outcome::kWaits) {
      if (!blocked_[static_cast<size_t>(my_class)]) blocked_list_.push_back(my_class);
      blocked_[static_cast<size_t>(my_class)] = 1;
      state_[static_cast<size_t>(tag)] = 0;
      if (scope_.shapes != nullptr) dropped_.push_back(tag);
    } else {  // its shape's next job (looked up only here: most attempts of a pass wait)
      const auto& jobs = q_.shapes_[static_cast<size_t>(my_shape)];
      PushNext(tag, leaves ? jobs.upper_bound(entry) : std::next(jobs.find(entry)));
    }
    if (arms && !blocked_[static_cast<size_t>(my_class)] && scope_.shapes == nullptr) Arm(my_class);
  }
  // A job tried on its own started: what it held is free again, so the skipped shapes and classes
  // get another chance, from their first jobs.
  void Reopen() {
    for (int s : skipped_) PushNext(s, q_.shapes_[static_cast<size_t>(s)].begin());
    skipped_.clear();
    for (int c : blocked_list_) {
      blocked_[static_cast<size_t>(c)] = 0;
      last_[static_cast<size_t>(c)] = kNoHead;
      if (scope_.shapes == nullptr) Arm(c);
    }
    blocked_list_.clear();
    for (int s : dropped_) {
      if (state_[static_cast<size_t>(s)] == 0) Activate(s);
    }
    dropped_.clear();
    // The class filter may accept more now (asked again): classes it refused are looked at.
    if (scope_.cls && scope_.shapes == nullptr) {
      for (size_t c = 0; c < n_classes_; ++c) {
        if (class_ok_[c] != 2) continue;
        class_ok_[c] = 0;
        if (!heads_of_[c].empty() && ClassAccepted(c)) Arm(static_cast<int>(c));
      }
    }
  }

  PendingQueue& q_;
  const std::function<Outcome(size_t)>& attempt_;
  const Scope& scope_;
  const size_t n_shapes_, n_classes_;
  const bool nested_;  // a pass within a pass (from `attempt`): it has its own per-shape marks
  std::vector<char> nested_state_, nested_filtered_;
  // Per shape: 0 not looked at (or dropped with its class), 1 active or skipped; and whether the
  // shape filter was asked: 1 accepted, 2 refused. The queue's own arrays (zero between passes:
  // the shapes looked at are cleared at the end), so that a pass costs nothing per shape it does
  // not look at.
  std::vector<char>& state_;
  std::vector<char>& filtered_;
  std::vector<int> looked_at_;  // the shapes whose entries are set
  std::vector<char> blocked_;   // per class: a job waited for its class
  std::vector<char> class_ok_;  // per class: the class filter was asked: 1 accepted, 2 refused
  std::vector<std::pair<Key, int>> last_;  // per class: the last shape looked at
  // Per class: the shape whose first attempt arms the class's next shape (-1: none).
  std::vector<int> arm_after_;
  const int list_;  // the list looked at (Scope::list), -1 every shape
  std::vector<std::set<std::pair<Key, int>>>& heads_of_;  // the classes' shapes looked at (with unlisted ones: list_)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_;
  std::vector<size_t> own_;        // the jobs tried on their own
  std::vector<int> skipped_;       // shapes whose job waited for its shape
  std::vector<int> blocked_list_;  // classes whose job waited for their class
  std::vector<int> dropped_;       // with Scope::shapes: listed shapes dropped with their class
};

void PendingQueue::Pass(const std::function<Outcome(size_t)>& attempt, const std::vector<size_t>& own_jobs,
                        const Scope& scope) {
  PassRun run(*this, attempt, scope);
  run.Start(own_jobs);
  run.Run();
}

}  // namespace estuary
