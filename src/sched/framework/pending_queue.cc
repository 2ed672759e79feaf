#include "sched/framework/pending_queue.h"

#include <algorithm>

namespace estuary {

void PendingQueue::Push(size_t i, int32_t priority, int shape, bool front) {
  if (slots_.size() <= i) slots_.resize(i + 1);
  if (shapes_.size() <= static_cast<size_t>(shape)) shapes_.resize(static_cast<size_t>(shape) + 1);
  Slot& s = slots_[i];
  s.queued = true;
  s.shape = shape;
  s.key = {by_priority_ ? -int64_t{priority} : 0, front ? --front_ : back_++};
  shapes_[static_cast<size_t>(shape)].insert({s.key, i});
  ++size_;
}

void PendingQueue::Remove(size_t i) {
  Slot& s = slots_[i];
  shapes_[static_cast<size_t>(s.shape)].erase({s.key, i});
  s.queued = false;
  --size_;
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
                        const std::function<bool(int)>& shape_filter) {
  // Heap entries: (key of the job to try next, job, shape or -1 for a job tried on its own).
  using Entry = std::pair<std::pair<Key, size_t>, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  // The first job of `shape` at or after `from` that is not tried on its own, onto the heap.
  auto push_next = [&](int shape, std::set<std::pair<Key, size_t>>::const_iterator it) {
    const auto& set = shapes_[static_cast<size_t>(shape)];
    while (it != set.end() && slots_[it->second].own) ++it;
    if (it != set.end()) heap.push({*it, shape});
  };
  std::vector<size_t> own;
  for (size_t i : own_jobs) {
    if (!Contains(i) || slots_[i].own) continue;
    slots_[i].own = true;
    own.push_back(i);
    heap.push({{slots_[i].key, i}, -1});
  }
  for (size_t s = 0; s < shapes_.size(); ++s) {
    if (!shape_filter || shape_filter(static_cast<int>(s))) push_next(static_cast<int>(s), shapes_[s].begin());
  }
  std::vector<int> skipped;  // shapes whose job had to wait
  while (!heap.empty()) {
    const auto [entry, shape] = heap.top();
    heap.pop();
    const size_t i = entry.second;
    const Outcome o = attempt(i);
    const int my_shape = slots_[i].shape;
    auto next = std::next(shapes_[static_cast<size_t>(my_shape)].find(entry));
    if (o == Outcome::kStarted || o == Outcome::kInfeasible) {
      Remove(i);
      next = shapes_[static_cast<size_t>(my_shape)].upper_bound(entry);
    }
    if (shape >= 0) {
      if (o == Outcome::kWaits) {
        skipped.push_back(shape);
      } else {
        push_next(shape, next);
      }
    } else if (o == Outcome::kStarted) {
      // What it held is free again: the skipped shapes get another chance, from their first job.
      for (int s : skipped) push_next(s, shapes_[static_cast<size_t>(s)].begin());
      skipped.clear();
    }
  }
  for (size_t i : own) slots_[i].own = false;
}

}  // namespace estuary
