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
  for (auto* heads : {&heads_[c], listed(shape, 0) ? &listed_heads_[0][c] : nullptr, listed(shape, 1) ? &listed_heads_[1][c] : nullptr}) {
    if (heads == nullptr) continue;
    if (old != nullptr) heads->erase({old->first, shape});
    if (!set.empty()) heads->insert({set.begin()->first, shape});
  }
}

void PendingQueue::SetListed(int shape, bool listed, int list) {
  if (listed_.size() <= static_cast<size_t>(shape)) listed_.resize(static_cast<size_t>(shape) + 1, 0);
  if (this->listed(shape, list) == listed) return;
  listed_[static_cast<size_t>(shape)] ^= static_cast<char>(1 << list);
  if (static_cast<size_t>(shape) >= shapes_.size() || shapes_[static_cast<size_t>(shape)].empty()) return;
  const size_t c = static_cast<size_t>(ClassOf(shape));
  const std::pair<Key, int> head{shapes_[static_cast<size_t>(shape)].begin()->first, shape};
  auto& heads = listed_heads_[static_cast<size_t>(list)][c];
  if (listed) heads.insert(head);
  else heads.erase(head);
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

void PendingQueue::Pass(const std::function<Outcome(size_t)>& attempt, const std::vector<size_t>& own_jobs,
                        const Scope& scope) {
  // Heap entries, smallest first: ((key, job), tag). tag >= 0: the next job of active shape
  // `tag`; -1: a job tried on its own; <= -2: class -tag-2's next shape is due (its first job's
  // key; `job` holds the shape) — the class's shapes are looked at lazily, in the order of their
  // first jobs (heads_), so that a skipped class's later shapes are never looked at.
  using Entry = std::pair<std::pair<Key, size_t>, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  const size_t n_shapes = shapes_.size(), n_classes = heads_.size();
  // Per shape: 0 not looked at (or dropped with its class), 1 active or skipped; and whether the
  // shape filter was asked: 1 accepted, 2 refused. The queue's own arrays (zero between passes:
  // the shapes looked at are cleared at the end), so that a pass costs nothing per shape it does
  // not look at; a pass within a pass (from `attempt`) has its own.
  std::vector<char> nested_state, nested_filtered;
  const bool nested = in_pass_;
  in_pass_ = true;
  std::vector<char>& state = nested ? nested_state : shape_state_;
  std::vector<char>& filtered = nested ? nested_filtered : shape_filtered_;
  state.resize(std::max(state.size(), n_shapes), 0);
  filtered.resize(std::max(filtered.size(), n_shapes), 0);
  std::vector<int> looked_at;  // the shapes whose entries are set
  std::vector<char> blocked(n_classes, 0);
  std::vector<char> class_ok(n_classes, 0);  // the class filter was asked: 1 accepted, 2 refused
  std::vector<std::pair<Key, int>> last(n_classes, {{INT64_MIN, INT64_MIN}, INT32_MIN});  // last shape looked at
  // Per class: the shape whose first attempt arms the class's next shape (-1: none). The next
  // shape's first job comes after that attempt's job, so it is due no earlier; and when the
  // attempt blocks the class, it is never looked at.
  std::vector<int> arm_after(n_classes, -1);
  // The classes' shapes looked at.
  const auto& heads_of = scope.list >= 0 && scope.shapes == nullptr ? listed_heads_[static_cast<size_t>(scope.list)] : heads_;
  auto accepted = [&](int s) {
    char& f = filtered[static_cast<size_t>(s)];
    if (f == 0) {
      f = !scope.shape || scope.shape(s) ? 1 : 2;
      looked_at.push_back(s);
    }
    return f == 1;
  };
  auto class_accepted = [&](size_t c) {
    char& f = class_ok[c];
    if (f == 0) f = !scope.cls || caller_class_[c] < 0 || scope.cls(caller_class_[c]) ? 1 : 2;
    return f == 1;
  };
  // The first job of `shape` at or after `it` that is not tried on its own, onto the heap.
  auto push_next = [&](int shape, std::set<std::pair<Key, size_t>>::const_iterator it) {
    const auto& set = shapes_[static_cast<size_t>(shape)];
    while (it != set.end() && slots_[it->second].own) ++it;
    if (it != set.end()) heap.push({*it, shape});
  };
  // Shape s becomes active: its first job onto the heap. Returns whether one was pushed.
  auto activate = [&](int s) {
    state[static_cast<size_t>(s)] = 1;
    looked_at.push_back(s);
    const size_t before = heap.size();
    push_next(s, shapes_[static_cast<size_t>(s)].begin());
    return heap.size() > before;
  };
  // Class c's next shape not yet looked at (and accepted by the filter), as a due entry.
  auto arm = [&](int c) {
    const auto& heads = heads_of[static_cast<size_t>(c)];
    for (auto it = heads.upper_bound(last[static_cast<size_t>(c)]); it != heads.end(); ++it) {
      const int s = it->second;
      if (state[static_cast<size_t>(s)] != 0 || !accepted(s)) continue;
      heap.push({{it->first, static_cast<size_t>(s)}, -2 - c});
      return;
    }
  };
  std::vector<size_t> own;
  for (size_t i : own_jobs) {
    if (!Contains(i) || slots_[i].own) continue;
    slots_[i].own = true;
    own.push_back(i);
    heap.push({{slots_[i].key, i}, -1});
  }
  if (scope.shapes != nullptr) {
    for (int s : *scope.shapes) {
      if (s < 0 || static_cast<size_t>(s) >= n_shapes || state[static_cast<size_t>(s)] != 0 || shapes_[static_cast<size_t>(s)].empty()) continue;
      if (class_accepted(static_cast<size_t>(class_of_[static_cast<size_t>(s)])) && accepted(s)) activate(s);
    }
  } else {
    for (size_t c = 0; c < n_classes; ++c) {
      if (!heads_of[c].empty() && class_accepted(c)) arm(static_cast<int>(c));
    }
  }
  std::vector<int> skipped;       // shapes whose job waited for its shape
  std::vector<int> blocked_list;  // classes whose job waited for their class
  std::vector<int> dropped;       // with Scope::shapes: listed shapes dropped with their class
  while (!heap.empty()) {
    const auto [entry, tag] = heap.top();
    heap.pop();
    if (tag <= -2) {  // class c's next shape is due: it becomes active
      const int c = -2 - tag;
      const int s = static_cast<int>(entry.second);
      if (blocked[static_cast<size_t>(c)] || state[static_cast<size_t>(s)] != 0) continue;
      last[static_cast<size_t>(c)] = {entry.first, s};
      // Its first job onto the heap: the next attempt (nothing is due between). When that is not
      // its first job (one tried on its own), the class's next shape may be due before it.
      if (activate(s) && !slots_[shapes_[static_cast<size_t>(s)].begin()->second].own) arm_after[static_cast<size_t>(c)] = s;
      else arm(c);
      continue;
    }
    const size_t i = entry.second;
    const int my_class = tag >= 0 ? class_of_[static_cast<size_t>(tag)] : -1;
    // This attempt arms its class's next shape (unless the class is blocked by then).
    const bool arms = my_class >= 0 && arm_after[static_cast<size_t>(my_class)] == tag;
    if (arms) arm_after[static_cast<size_t>(my_class)] = -1;
    if (my_class >= 0 && blocked[static_cast<size_t>(my_class)]) {
      state[static_cast<size_t>(tag)] = 0;  // looked at again if its class is tried again
      if (scope.shapes != nullptr) dropped.push_back(tag);
      continue;
    }
    const Outcome o = attempt(i);
    const int my_shape = slots_[i].shape;
    auto next = std::next(shapes_[static_cast<size_t>(my_shape)].find(entry));
    if (o == Outcome::kStarted || o == Outcome::kInfeasible) {
      Remove(i);
      next = shapes_[static_cast<size_t>(my_shape)].upper_bound(entry);
    }
    if (tag >= 0) {
      if (o == Outcome::kShapeWaits) {
        skipped.push_back(tag);
      } else if (o == Outcome::kWaits) {
        if (!blocked[static_cast<size_t>(my_class)]) blocked_list.push_back(my_class);
        blocked[static_cast<size_t>(my_class)] = 1;
        state[static_cast<size_t>(tag)] = 0;
        if (scope.shapes != nullptr) dropped.push_back(tag);
      } else {
        push_next(tag, next);
      }
      if (arms && !blocked[static_cast<size_t>(my_class)] && scope.shapes == nullptr) arm(my_class);
    } else if (o == Outcome::kStarted) {
      // What it held is free again: the skipped shapes and classes get another chance, from
      // their first jobs.
      for (int s : skipped) push_next(s, shapes_[static_cast<size_t>(s)].begin());
      skipped.clear();
      for (int c : blocked_list) {
        blocked[static_cast<size_t>(c)] = 0;
        last[static_cast<size_t>(c)] = {{INT64_MIN, INT64_MIN}, INT32_MIN};
        if (scope.shapes == nullptr) arm(c);
      }
      blocked_list.clear();
      for (int s : dropped) {
        if (state[static_cast<size_t>(s)] == 0) activate(s);
      }
      dropped.clear();
      // The class filter may accept more now (asked again): classes it refused are looked at.
      if (scope.cls && scope.shapes == nullptr) {
        for (size_t c = 0; c < n_classes; ++c) {
          if (class_ok[c] != 2) continue;
          class_ok[c] = 0;
          if (!heads_of[c].empty() && class_accepted(c)) arm(static_cast<int>(c));
        }
      }
    }
  }
  for (size_t i : own) slots_[i].own = false;
  for (int s : looked_at) state[static_cast<size_t>(s)] = filtered[static_cast<size_t>(s)] = 0;
  in_pass_ = nested;
}

}  // namespace estuary
