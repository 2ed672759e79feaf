#include "engine/queue_book.h"

#include <bit>
#include <climits>
#include <cmath>
#include <memory>
#include <numbers>

namespace estuary {

namespace {

std::string GpuWords(int64_t milli) {
  return milli % 1000 == 0 ? std::to_string(milli / 1000) : std::to_string(milli) + " milli-GPU";
}

}  // namespace

StatusOr<QueueBook> QueueBook::Create(std::vector<QueueSpec> specs, SharingSpec sharing, ClusterState& state,
                                      bool intern_models, int* line) {
  QueueBook b;
  b.sharing_ = sharing;
  if (specs.empty()) return b;
  if (intern_models) {
    for (const QueueSpec& s : specs) {
      for (const QuotaAmounts* a : {&s.guarantee, &s.limit, &s.lend_limit}) {
        for (const auto& [name, milli] : a->model_milli) {
          auto id = state.models().Intern(name);
          if (!id.ok()) return id.status();
        }
      }
    }
  }
  auto tree = QueueTree::Build(std::move(specs), state.models(), line);
  if (!tree.ok()) return tree.status();
  b.tree_ = std::move(*tree);
  const size_t n = b.tree_.size();
  b.pending_.assign(n, QueueUsage{});
  b.extra_.assign(n, QueueUsage{});
  b.is_dirty_.assign(n, 0);
  b.is_changed_.assign(n, 0);
  b.weight_ = ShareWeights(b.tree_, {}, sharing.weights);
  b.cooldown_until_.assign(n, INT64_MIN);
  b.claimed_.assign(n, QueueUsage{});
  b.leaving_.assign(n, QueueUsage{});
  b.decayed_.assign(n, 0.0);
  b.held_since_.assign(n, -1);
  // GPUs in total, and the dimensions some queue names (in a guarantee, limit or lending limit)
  // are managed; the others are neither checked nor shared.
  const QuotaDims& dims = b.tree_.dims();
  b.managed_.assign(dims.size(), 0);
  b.managed_[QuotaDims::kGpu] = 1;
  for (size_t q = 0; q < n; ++q) {
    const QueueSpec& s = b.tree_.spec(q);
    for (const QuotaAmounts* a : {&s.guarantee, &s.limit, &s.lend_limit}) {
      for (const auto& [name, milli] : a->model_milli) {
        if (const auto m = state.models().Find(name); m && m->value() < dims.models) b.managed_[dims.model(m->value())] = 1;
      }
      if (a->cpu_milli) b.managed_[dims.cpu()] = 1;
      if (a->memory_mib) b.managed_[dims.memory()] = 1;
    }
  }
  for (size_t d = 0; d < dims.size(); ++d) {
    if (b.managed_[d]) b.managed_list_.push_back({d, b.Fixed(d)});
  }
  b.unlimited_.assign(n, 1);
  for (size_t q = 0; q < n; ++q) {
    for (int p = static_cast<int>(q); p >= 0 && b.unlimited_[q]; p = b.tree_.parent(static_cast<size_t>(p))) {
      for (const auto& [d, f] : b.managed_list_) {
        if (b.tree_.limit(static_cast<size_t>(p))[d] != kNoLimit) b.unlimited_[q] = 0;
      }
    }
  }
  return b;
}

std::vector<int32_t> QueueBook::Parents() const {
  std::vector<int32_t> parent(tree_.size());
  for (size_t q = 0; q < tree_.size(); ++q) parent[q] = tree_.parent(q);
  return parent;
}

void QueueBook::Succeed(const QueueBook& old) {
  version_ = old.version_ + 1;
  shares_version_ = old.shares_version_ + 1;
  Inherit(old);
}

void QueueBook::Inherit(const QueueBook& old) { Restore(old.Carried(), old.usage_at_); }

std::vector<CarriedQueue> QueueBook::Carried() const {
  std::vector<CarriedQueue> out;
  out.reserve(tree_.size());
  for (size_t q = 0; q < tree_.size(); ++q) {
    out.push_back({tree_.spec(q).name, cooldown_until_[q], decayed_[q], held_since_[q]});
  }
  return out;
}

void QueueBook::Restore(const std::vector<CarriedQueue>& queues, int64_t usage_at) {
  for (const CarriedQueue& c : queues) {
    const std::optional<size_t> q = tree_.Find(c.name);
    if (!q) continue;
    cooldown_until_[*q] = c.cooldown_until;
    decayed_[*q] = c.decayed;
    held_since_[*q] = c.usage;
  }
  if (usage_at >= 0) usage_at_ = usage_at;
  ++changes_;
}

std::optional<int32_t> QueueBook::Resolve(const std::string& name, int32_t priority, std::string* why) const {
  if (!enabled()) {
    if (name.empty()) return -1;
    *why = "names queue '" + name + "', but the cluster has no queues";
    return std::nullopt;
  }
  if (name.empty()) {
    *why = "names no queue, and every job of this cluster runs in one";
    return std::nullopt;
  }
  const std::optional<size_t> q = tree_.Find(name);
  if (!q) {
    *why = "no queue '" + name + "'";
    return std::nullopt;
  }
  if (!tree_.leaf(*q)) {
    *why = "queue '" + name + "' has queues under it: jobs run in its leaves";
    return std::nullopt;
  }
  for (int p = static_cast<int>(*q); p >= 0; p = tree_.parent(static_cast<size_t>(p))) {
    const QueueSpec& s = tree_.spec(static_cast<size_t>(p));
    if (priority > s.max_priority) {
      *why = "priority " + std::to_string(priority) + " is above the ceiling of queue '" + s.name + "' (" +
             std::to_string(s.max_priority) + ")";
      return std::nullopt;
    }
  }
  return static_cast<int32_t>(*q);
}

size_t QueueBook::Fixed(size_t d) const {
  const QuotaDims& dims = tree_.dims();
  if (d == QuotaDims::kGpu) return kQueueGpu;
  if (d == dims.cpu()) return kQueueCpu;
  if (d == dims.memory()) return kQueueMemory;
  return kQueueModel + (d - 1);
}

QueueUsage QueueBook::Request(const ClusterState& state, JobId job, int64_t replicas, bool surely) const {
  QueueUsage u{};
  const Job& j = state.job(job);
  const TaskRequest& req = state.task(j.tasks.front()).req;
  u[kQueueCpu] = replicas * req.cpu_milli;
  u[kQueueMemory] = replicas * req.mem_mib;
  if (!req.NeedsGpu()) return u;
  const int64_t gpu = replicas * req.TotalGpuMilli();
  u[kQueueGpu] = gpu;
  const uint64_t bits = req.models.bits();
  if (std::popcount(bits) == 1) {
    u[kQueueModel + static_cast<size_t>(std::countr_zero(bits))] = gpu;
  } else if (!surely) {
    for (size_t m = 0; m < state.models().size(); ++m) {
      if (req.models.Admits(GpuModelId(static_cast<uint32_t>(m)))) u[kQueueModel + m] = gpu;
    }
  }
  return u;
}

void QueueBook::AddDemand(const ClusterState& state, JobId job, int64_t replicas, QueueUsage& into) const {
  const TaskRequest& req = state.task(state.job(job).tasks.front()).req;
  into[kQueueCpu] += replicas * req.cpu_milli;
  into[kQueueMemory] += replicas * req.mem_mib;
  if (!req.NeedsGpu()) return;
  const int64_t gpu = replicas * req.TotalGpuMilli();
  into[kQueueGpu] += gpu;
  // As Request (not surely): every model it admits (any, when it names none).
  const size_t models = state.models().size();
  if (req.models.bits() == 0) {
    for (size_t m = 0; m < models; ++m) into[kQueueModel + m] += gpu;
    return;
  }
  for (uint64_t bits = req.models.bits(); bits != 0; bits &= bits - 1) {
    const size_t m = static_cast<size_t>(std::countr_zero(bits));
    if (m < models) into[kQueueModel + m] += gpu;
  }
}

void QueueBook::Pending(const ClusterState& state, JobId job, int sign) {
  const int32_t q = state.job(job).spec.queue;
  if (q < 0 || !enabled()) return;
  const QueueUsage u = Request(state, job, state.job(job).spec.max_replicas, false);
  QueueUsage& p = pending_[static_cast<size_t>(q)];
  for (size_t i = 0; i < kQueueDims; ++i) p[i] += sign * u[i];
  ++pending_version_;
  Dirty(q);
}

void QueueBook::Extra(const ClusterState& state, JobId job, int64_t replicas) {
  const int32_t q = state.job(job).spec.queue;
  if (q < 0 || !enabled() || replicas == 0) return;
  AddDemand(state, job, replicas, extra_[static_cast<size_t>(q)]);
  ++pending_version_;
  Dirty(q);
}

void QueueBook::Touched(const ClusterState& state, JobId job) {
  if (enabled()) Dirty(state.job(job).spec.queue);
}

void QueueBook::Dirty(int32_t leaf) {
  if (leaf >= 0) Changed(static_cast<size_t>(leaf), true);
  if (leaf < 0 || all_dirty_ || is_dirty_[static_cast<size_t>(leaf)]) return;
  is_dirty_[static_cast<size_t>(leaf)] = 1;
  dirty_.push_back(static_cast<size_t>(leaf));
}

void QueueBook::Changed(size_t q, bool path) {
  for (int p = static_cast<int>(q); p >= 0 && !all_changed_; p = path ? tree_.parent(static_cast<size_t>(p)) : -1) {
    if (is_changed_[static_cast<size_t>(p)]) continue;
    is_changed_[static_cast<size_t>(p)] = 1;
    changed_.push_back(static_cast<size_t>(p));
  }
}

QueueBook::Changes QueueBook::TakeChanges() {
  Changes out;
  out.all = all_changed_;
  if (!all_changed_) out.queues = changed_;
  for (size_t q : changed_) is_changed_[q] = 0;
  changed_.clear();
  all_changed_ = false;
  return out;
}

const QueueShares& QueueBook::Refresh(const ClusterState& state, int64_t now_s) {
  if (!enabled()) return shares_;
  const QuotaDims& dims = tree_.dims();
  const size_t n = tree_.size(), D = dims.size();
  const int64_t half_life = sharing_.usage_half_life_s;
  // With time-based fairness the weights come from each queue's decayed usage as of the last
  // change of what the queues hold (rolled to now if that is now), not from its value now: they
  // change only when the holdings do, at the same times whichever cycles a driver runs between.
  if (half_life > 0) Roll(state, now_s);
  const std::vector<double>& decayed = decayed_;
  if (capacity_dirty_) {
    capacity_.assign(D, 0);
    for (const Node& node : state.nodes()) {
      if (node.state == NodeState::kDown) continue;
      const int64_t gpu = int64_t{node.spec.gpu_count} * kMilliPerGpu;
      capacity_[QuotaDims::kGpu] += gpu;
      if (node.spec.model.valid() && node.spec.model.value() < dims.models) capacity_[dims.model(node.spec.model.value())] += gpu;
      capacity_[dims.cpu()] += node.spec.cpu_milli;
      capacity_[dims.memory()] += node.spec.mem_mib;
    }
    capacity_dirty_ = false;
    shares_epoch_ = UINT64_MAX;
  }
  if (half_life <= 0 && state.epoch() == shares_epoch_ && pending_version_ == shares_pending_version_) return shares_;
  const auto finish = [&] {
    for (size_t q : dirty_) is_dirty_[q] = 0;
    dirty_.clear();
    all_dirty_ = false;
    shares_capacity_ = capacity_;
    shares_epoch_ = state.epoch();
    shares_pending_version_ = pending_version_;
    ++version_;
  };
  if (half_life <= 0 && !all_dirty_ && shares_capacity_ == capacity_ && shares_.dims == D && shares_.fair.size() == n * D) {
    // Only the leaves that changed (UpdateShares): the same shares as computed afresh.
    std::vector<int64_t> usage(dirty_.size() * D), pending(dirty_.size() * D);
    for (size_t i = 0; i < dirty_.size(); ++i) {
      const size_t q = dirty_[i];
      for (size_t d = 0; d < D; ++d) {
        usage[i * D + d] = state.queue_usage(q)[Fixed(d)];
        pending[i * D + d] = pending_[q][Fixed(d)] + extra_[q][Fixed(d)];
      }
    }
    std::vector<size_t> moved, held_moved;
    HeldBack(state, dirty_, &held_moved);
    if (UpdateShares(tree_, capacity_, dirty_, usage, pending, weight_, sharing_.reclaim_to_fair_share, shares_, &moved,
                     &held_back_, &held_moved)) {
      ++shares_version_;
    }
    for (size_t q : moved) Changed(q, false);
    finish();
    return shares_;
  }
  std::vector<int64_t> usage(n * D, 0), pending(n * D, 0);
  for (size_t q = 0; q < n; ++q) {
    for (size_t d = 0; d < D; ++d) {
      usage[q * D + d] = state.queue_usage(q)[Fixed(d)];
      pending[q * D + d] = pending_[q][Fixed(d)] + extra_[q][Fixed(d)];
    }
  }
  std::vector<int64_t> milli_weight;
  if (half_life > 0) {
    // 2^(-U/S) among siblings: U the queue's part of their decayed usage, S its part of their weights.
    milli_weight.assign(n, 0);
    auto scale = [&](const std::vector<size_t>& kids) {
      double used = 0, weights = 0;
      for (size_t k : kids) {
        used += decayed[k];
        weights += static_cast<double>(tree_.spec(k).weight);
      }
      for (size_t k : kids) {
        const double w = static_cast<double>(tree_.spec(k).weight);
        const double u = used > 0 ? decayed[k] / used : 0.0;
        milli_weight[k] = std::max<int64_t>(1, std::llround(w * 1000.0 * std::exp2(-u / (w / weights))));
      }
    };
    scale(tree_.roots());
    for (size_t q = 0; q < n; ++q) {
      if (!tree_.leaf(q)) scale(tree_.children(q));
    }
  }
  // The last shares as the basis of this computation when nothing but usage and demand changed
  // (fixed weights; the capacity it was computed with is passed along).
  // (A basis computed with other held-back rows would not do: a queue's demand moves with them.)
  const std::vector<int64_t> held_before = held_back_;
  held_back_.assign(n * D, 0);
  for (size_t q = 0; q < n; ++q) {
    for (size_t d = 0; d < D; ++d) held_back_[q * D + d] = state.queue_restorable(q)[Fixed(d)];
  }
  const bool basis = half_life <= 0 && shares_capacity_.size() == D && held_before == held_back_;
  QueueShares fresh = ComputeShares(tree_, capacity_, usage, pending, milli_weight, sharing_.weights,
                                    sharing_.reclaim_to_fair_share, basis ? &shares_ : nullptr, basis ? &shares_capacity_ : nullptr,
                                    &held_back_);
  if (fresh.fair != shares_.fair || fresh.entitled != shares_.entitled) ++shares_version_;
  shares_ = std::move(fresh);
  all_changed_ = true;
  finish();
  return shares_;
}

void QueueBook::HeldBack(const ClusterState& state, const std::vector<size_t>& leaves, std::vector<size_t>* moved) {
  const size_t D = tree_.dims().size();
  if (held_back_.size() != tree_.size() * D) held_back_.assign(tree_.size() * D, 0);
  for (size_t leaf : leaves) {
    for (int p = static_cast<int>(leaf); p >= 0; p = tree_.parent(static_cast<size_t>(p))) {
      const size_t q = static_cast<size_t>(p);
      bool changed = false;
      for (size_t d = 0; d < D; ++d) {
        const int64_t v = state.queue_restorable(q)[Fixed(d)];
        changed = changed || held_back_[q * D + d] != v;
        held_back_[q * D + d] = v;
      }
      if (changed && moved != nullptr && !tree_.leaf(q)) moved->push_back(q);
    }
  }
}

double QueueBook::Decayed(size_t q, int64_t now_s) const {
  if (now_s <= usage_at_ || held_since_[q] < 0) return decayed_[q];
  // d(t) = d0 2^(-t/H) + u (1 - 2^(-t/H)) H / ln 2 for a constant u held over t.
  const double h = static_cast<double>(sharing_.usage_half_life_s);
  const double decay = std::exp2(-static_cast<double>(now_s - usage_at_) / h);
  return decayed_[q] * decay + static_cast<double>(held_since_[q]) * (1.0 - decay) * h / std::numbers::ln2;
}

void QueueBook::KnowHeld(const ClusterState& state) {
  for (size_t q = 0; q < held_since_.size(); ++q) {
    if (held_since_[q] < 0) held_since_[q] = state.queue_usage(q)[kQueueGpu];
  }
}

void QueueBook::Roll(const ClusterState& state, int64_t now_s) {
  if (!enabled() || sharing_.usage_half_life_s <= 0) return;
  if (usage_at_ < 0) usage_at_ = now_s;
  KnowHeld(state);
  bool same = true;
  for (size_t q = 0; q < held_since_.size() && same; ++q) same = held_since_[q] == state.queue_usage(q)[kQueueGpu];
  if (same) return;
  for (size_t q = 0; q < held_since_.size(); ++q) {
    decayed_[q] = Decayed(q, now_s);
    held_since_[q] = state.queue_usage(q)[kQueueGpu];
  }
  usage_at_ = now_s;
}

QueueShares QueueBook::Reference(const ClusterState& state, const std::vector<QueueUsage>& more_demand) const {
  if (!enabled()) return {};
  const size_t n = tree_.size(), D = tree_.dims().size();
  std::vector<int64_t> usage(n * D, 0), pending(n * D, 0);
  for (size_t q = 0; q < n; ++q) {
    for (size_t d = 0; d < D; ++d) {
      usage[q * D + d] = state.queue_usage(q)[Fixed(d)];
      pending[q * D + d] = pending_[q][Fixed(d)] + (more_demand.empty() ? 0 : more_demand[q][Fixed(d)]);
    }
  }
  std::vector<int64_t> capacity = capacity_;
  capacity.resize(D, 0);
  std::vector<int64_t> held_back(n * D, 0);
  for (size_t q = 0; q < n; ++q) {
    for (size_t d = 0; d < D; ++d) held_back[q * D + d] = state.queue_restorable(q)[Fixed(d)];
  }
  return ComputeShares(tree_, capacity, usage, pending, {}, true, false, nullptr, nullptr, &held_back);
}

std::optional<int64_t> QueueBook::NextCooldownEnd(int64_t now_s) const {
  std::optional<int64_t> end;
  for (int64_t until : cooldown_until_) {
    if (until > now_s) end = end ? std::min(*end, until) : until;
  }
  return end;
}

uint64_t QueueBook::ReclaimEpoch(int64_t now_s, bool shares_only) const {
  uint64_t ended = 0;
  for (int64_t until : cooldown_until_) ended += until != INT64_MIN && until <= now_s;
  const uint64_t budget = static_cast<uint64_t>(BudgetTime(now_s) / budget_period_s());
  return ((shares_only ? shares_version_ : version_) * 1000003 + ended) * 1000003 + budget;
}

int64_t QueueBook::Cap(size_t q, size_t d, Bound bound) const {
  switch (bound) {
    case Bound::kLimit: return tree_.limit(q)[d];
    case Bound::kGuarantee: return tree_.guarantee(q)[d];
    case Bound::kFair: return shares_.at(shares_.fair, q, d);
    case Bound::kEntitled: return shares_.at(shares_.entitled, q, d);
  }
  return kNoLimit;
}

const int64_t* QueueBook::Caps(size_t q, Bound bound) const {
  switch (bound) {
    case Bound::kLimit: return tree_.limit(q).data();
    case Bound::kGuarantee: return tree_.guarantee(q).data();
    case Bound::kFair: return &shares_.fair[q * shares_.dims];
    case Bound::kEntitled: return &shares_.entitled[q * shares_.dims];
  }
  return nullptr;
}

bool QueueBook::Lends(const ClusterState& state, size_t q) {
  const QueueUsage& back = state.queue_restorable(q);
  return back[kQueueGpu] != 0 || back[kQueueCpu] != 0;
}

int64_t QueueBook::Counted(const ClusterState& state, size_t q, size_t fixed, Bound bound) {
  return state.queue_usage(q)[fixed] + (bound == Bound::kLimit ? state.queue_restorable(q)[fixed] : 0);
}

QueueUsage QueueBook::RoomByDim(const ClusterState& state, size_t leaf, Bound leaf_bound, Bound bound, int64_t floor) const {
  std::array<int64_t, kQueueDims> managed;
  RoomByManagedDim(state, leaf, leaf_bound, bound, managed.data(), floor);
  return FromManaged(managed.data());
}

int64_t QueueBook::GpuRoom(const ClusterState& state, size_t leaf, Bound bound) const {
  int64_t room = INT64_MAX;
  for (int p = static_cast<int>(leaf); p >= 0; p = tree_.parent(static_cast<size_t>(p))) {
    const size_t q = static_cast<size_t>(p);
    const int64_t cap = Cap(q, QuotaDims::kGpu, bound);
    if (cap != kNoLimit) room = std::min(room, std::max<int64_t>(0, cap - Counted(state, q, kQueueGpu, bound)));
    const int64_t limit = Lends(state, q) ? Cap(q, QuotaDims::kGpu, Bound::kLimit) : kNoLimit;
    if (bound != Bound::kLimit && limit != kNoLimit) {
      room = std::min(room, std::max<int64_t>(0, limit - Counted(state, q, kQueueGpu, Bound::kLimit)));
    }
  }
  return room;
}

void QueueBook::RoomByManagedDim(const ClusterState& state, size_t leaf, Bound leaf_bound, Bound bound,
                                 int64_t* room, int64_t floor) const {
  // As Cap per dimension, a queue's row at a time (a hot path: the engine asks it for every
  // leaf queue every cycle).
  const size_t m = managed_list_.size();
  std::fill(room, room + m, INT64_MAX);
  if (leaf_bound == Bound::kLimit && bound == Bound::kLimit && unlimited_[leaf]) return;  // no limit on its path
  for (int p = static_cast<int>(leaf); p >= 0; p = tree_.parent(static_cast<size_t>(p))) {
    const size_t q = static_cast<size_t>(p);
    const Bound b = q == leaf ? leaf_bound : bound;
    const int64_t* caps = Caps(q, b);
    const QueueUsage& use = state.queue_usage(q);
    const QueueUsage& back = state.queue_restorable(q);
    const bool limit = b == Bound::kLimit;
    // A queue whose Standby replicas lend is held within its limit by every bound (the shares
    // cap its demand there as of the last Refresh; what it lends may have grown since).
    const int64_t* limits = !limit && Lends(state, q) ? Caps(q, Bound::kLimit) : nullptr;
    for (size_t i = 0; i < m; ++i) {
      const auto [d, f] = managed_list_[i];
      const int64_t cap = caps[d];
      if (limits != nullptr && limits[d] != kNoLimit) {
        room[i] = std::min(room[i], std::max<int64_t>(floor, limits[d] - use[f] - back[f]));
      }
      if (cap == kNoLimit) continue;
      room[i] = std::min(room[i], std::max<int64_t>(floor, cap - use[f] - (limit ? back[f] : 0)));
    }
  }
}

void QueueBook::ManagedFigures(const ClusterState& state, size_t q, int64_t* out) const {
  const QueueUsage& use = state.queue_usage(q);
  const QueueUsage& back = state.queue_restorable(q);
  const int64_t* fair = Caps(q, Bound::kFair);
  const size_t m = managed_list_.size();
  for (size_t i = 0; i < m; ++i) {
    out[i] = use[managed_list_[i].second];
    out[m + i] = fair[managed_list_[i].first];
    out[2 * m + i] = back[managed_list_[i].second];
  }
}

QueueUsage QueueBook::FromManaged(const int64_t* room) const {
  QueueUsage out;
  out.fill(INT64_MAX);
  for (size_t i = 0; i < managed_list_.size(); ++i) out[managed_list_[i].second] = room[i];
  return out;
}

QueueUsage QueueBook::RoomWithClaims(const ClusterState& state, size_t q, Bound bound) const {
  QueueUsage room;
  room.fill(INT64_MAX);
  for (size_t d = 0; d < tree_.dims().size(); ++d) {
    const int64_t cap = Cap(q, d, bound);
    if (!managed_[d] || cap == kNoLimit) continue;
    room[Fixed(d)] = cap - Counted(state, q, Fixed(d), bound) - claimed_[q][Fixed(d)];
    const int64_t limit = bound != Bound::kLimit && Lends(state, q) ? Cap(q, d, Bound::kLimit) : kNoLimit;
    if (limit != kNoLimit) {
      room[Fixed(d)] = std::min(room[Fixed(d)], limit - Counted(state, q, Fixed(d), Bound::kLimit) - claimed_[q][Fixed(d)]);
    }
  }
  return room;
}

bool QueueBook::Within(const ClusterState& state, JobId job, int64_t replicas, Bound bound, std::string* why) const {
  return Within(state, job, replicas, bound, bound, why);
}

bool QueueBook::Within(const ClusterState& state, JobId job, int64_t replicas, Bound leaf_bound, Bound bound,
                       std::string* why) const {
  const int32_t leaf = state.job(job).spec.queue;
  if (leaf < 0 || !enabled()) return true;
  const QueueUsage req = Request(state, job, replicas, true);
  for (int p = leaf; p >= 0; p = tree_.parent(static_cast<size_t>(p))) {
    if (!QueueWithin(state, req, static_cast<size_t>(p), p == leaf ? leaf_bound : bound, why)) return false;
  }
  return true;
}

bool QueueBook::QueueWithin(const ClusterState& state, const QueueUsage& req, size_t q, Bound bound, std::string* why,
                            bool claims) const {
  const QuotaDims& dims = tree_.dims();
  if (bound != Bound::kLimit && Lends(state, q) && !QueueWithin(state, req, q, Bound::kLimit, why, claims)) return false;
  {
    for (size_t d = 0; d < dims.size(); ++d) {
      if (!managed_[d] || req[Fixed(d)] == 0) continue;
      const int64_t cap = Cap(q, d, bound);
      const char* word = bound == Bound::kLimit       ? "limit"
                         : bound == Bound::kGuarantee ? "guarantee"
                         : bound == Bound::kFair      ? "fair share"
                                                      : "entitlement";
      const int64_t have = Counted(state, q, Fixed(d), bound) + (claims ? claimed_[q][Fixed(d)] : 0);
      if (cap == kNoLimit || have + req[Fixed(d)] <= cap) continue;
      if (why != nullptr) {
        const bool gpu = d != dims.cpu() && d != dims.memory();
        const std::string unit = d == QuotaDims::kGpu ? " GPUs"
                                 : d == dims.cpu()    ? " milli-CPU"
                                 : d == dims.memory() ? " MiB"
                                                      : " " + state.models().Name(GpuModelId(static_cast<uint32_t>(d - 1))) + " GPUs";
        auto amount = [&](int64_t v) { return gpu ? GpuWords(v) : std::to_string(v); };
        *why = "queue '" + tree_.spec(q).name + "' would hold " + amount(have + req[Fixed(d)]) + " of its " + word + " of " +
               amount(cap) + unit;
        const int64_t lent = bound == Bound::kLimit ? state.queue_restorable(q)[Fixed(d)] : 0;
        if (lent > 0) *why += " (" + amount(lent) + " of them lent by its Standby replicas)";
      }
      return false;
    }
  }
  return true;
}

bool QueueBook::Owed(const ClusterState& state, JobId job, int64_t replicas) const {
  const int32_t leaf = state.job(job).spec.queue;
  if (!enabled() || leaf < 0 || !sharing_.reclaim || !tree_.spec(static_cast<size_t>(leaf)).reclaim) return false;
  return QueueWithin(state, Request(state, job, replicas, true), static_cast<size_t>(leaf), Bound::kEntitled, nullptr, true);
}

bool QueueBook::MayBeBelow(const ClusterState& state, size_t q, Bound bound) const {
  if (!enabled() || !sharing_.reclaim || !tree_.spec(q).reclaim) return false;
  if (bound == Bound::kFair && !sharing_.rebalance) return false;
  for (size_t d = 0; d < tree_.dims().size(); ++d) {
    if (!managed_[d]) continue;
    const int64_t cap = Cap(q, d, bound), have = state.queue_usage(q)[Fixed(d)] + claimed_[q][Fixed(d)];
    // A rebalance needs a shortfall of kRebalanceMinGapPct of the fair share (VictimsUpTo).
    if (bound == Bound::kFair ? have < cap && (cap - have) * 100 >= cap * kRebalanceMinGapPct : have < cap) return true;
  }
  return false;
}

int64_t QueueBook::Takeable(const ClusterState& state, size_t v, GpuModelSet models, int64_t budget,
                            bool unheld_only) const {
  const uint64_t bits = models.bits();
  int64_t held = 0;
  for (JobId id : state.queue_preemptible_jobs(v)) {
    const Job& j = state.job(id);
    int64_t there = 0, all = 0, task = 0;
    int32_t bound = 0;
    for (TaskId t : j.tasks) {
      const Task& k = state.task(t);
      if (k.state != TaskState::kBound || k.standby) continue;  // Standby tasks hold no GPUs
      if (evicting_ != nullptr && t.value() < evicting_->size() && (*evicting_)[t.value()]) continue;
      if (unheld_only && state.node(k.node).reservation.valid()) continue;
      ++bound;
      task = k.req.TotalGpuMilli();
      all += task;
      const GpuModelId m = state.node(k.node).spec.model;
      if (bits == 0 || (m.valid() && (bits >> m.value() & 1))) there += task;
    }
    // Its smallest unit: a task when it has replicas above its min (an elastic step holds at
    // least one), else the whole job.
    const int64_t unit = bound > std::max<int32_t>(1, j.spec.min_replicas) ? task : all;
    if (unit <= budget) held += there;
  }
  return held;
}

int32_t QueueBook::FairModel(GpuModelSet models) const {
  const uint64_t bits = models.bits();
  if (std::popcount(bits) != 1 || !managed(tree_.dims().model(static_cast<size_t>(std::countr_zero(bits))))) return -1;
  return std::countr_zero(bits);
}

bool QueueBook::ShortOfFairShare(const ClusterState& state, size_t q, GpuModelSet models) const {
  const int32_t model = FairModel(models);
  const size_t dim = model >= 0 ? tree_.dims().model(static_cast<size_t>(model)) : QuotaDims::kGpu;
  const int64_t fair = shares_.at(shares_.fair, q, dim);
  const int64_t shortfall = fair - state.queue_usage(q)[Fixed(dim)] - claimed_[q][Fixed(dim)];
  return shortfall * 100 >= fair * kRebalanceMinGapPct;
}

VictimFilter QueueBook::Victims(const ClusterState& state, JobId job, int64_t replicas, int64_t now_s, bool* owed,
                                int64_t* supply, bool filter) const {
  return VictimsUpTo(state, job, replicas, now_s, Bound::kEntitled, owed, supply, filter);
}

VictimFilter QueueBook::RebalanceVictims(const ClusterState& state, JobId job, int64_t replicas, int64_t now_s,
                                         bool* below, int64_t* supply, bool filter) const {
  *below = false;
  if (supply != nullptr) *supply = INT64_MAX;
  if (!sharing_.rebalance) return VictimFilter{};
  return VictimsUpTo(state, job, replicas, now_s, Bound::kFair, below, supply, filter);
}

VictimFilter QueueBook::VictimsUpTo(const ClusterState& state, JobId job, int64_t replicas, int64_t now_s, Bound bound,
                                    bool* owed, int64_t* supply, bool filter) const {
  const Job& j = state.job(job);
  const int32_t leaf = j.spec.queue;
  const int32_t prio = j.spec.priority;
  // An HP job takes lower-priority work when not owed: only in a Reclaim to entitlements.
  const bool hp = prio >= kHpPriority && bound == Bound::kEntitled;
  *owed = false;
  if (supply != nullptr) *supply = INT64_MAX;
  if (!enabled() || leaf < 0) return {};
  const size_t n = tree_.size();
  // Per queue of the job's path: whether the job's start keeps it within `bound`. The job
  // is owed what another queue v holds when every queue of its path below their common ancestor
  // is (its org may be above its own entitlement while it is owed by a sister team).
  const bool reclaims = sharing_.reclaim && tree_.spec(static_cast<size_t>(leaf)).reclaim;
  const QueueUsage req = Request(state, job, replicas, true);
  const auto within_at = [&](int p) {
    return reclaims && QueueWithin(state, req, static_cast<size_t>(p), bound, nullptr, true);
  };
  uint64_t within_bits = 0;  // per queue of the path, leaf first (the cache's key)
  int depth = 0;
  for (int p = leaf; p >= 0; p = tree_.parent(static_cast<size_t>(p)), ++depth) {
    if (depth < 64 && within_at(p)) within_bits |= uint64_t{1} << depth;
  }
  // The same per queue (0 off the path), built only for what needs it (a cache miss, a filter).
  const auto within_marks = [&] {
    auto marks = std::make_shared<std::vector<char>>(n, 0);
    int d = 0;
    for (int p = leaf; p >= 0; p = tree_.parent(static_cast<size_t>(p)), ++d) {
      (*marks)[static_cast<size_t>(p)] = d < 64 ? (within_bits >> d & 1) : within_at(p);
    }
    return marks;
  };
  *owed = (within_bits & 1) != 0;
  // A cooldown does not hold against a job whose start keeps its leaf queue within its
  // guarantee: a guarantee comes back within the grace period, whoever reclaimed last.
  const bool guaranteed = bound == Bound::kEntitled && *owed &&
                          QueueWithin(state, req, static_cast<size_t>(leaf), Bound::kGuarantee, nullptr, true);
  // The dimension budgets are counted in: GPUs in total; toward fair shares, the job's GPU model
  // when it names exactly one and the quotas name it (a model's fair share is what the queue may
  // hold of that model; its total-GPU fair share counts GPUs its jobs could not use).
  const int32_t model = bound == Bound::kFair ? FairModel(state.task(j.tasks.front()).req.models) : -1;
  // Rebalancing: only for a shortfall of at least kRebalanceMinGapPct of the leaf's fair share.
  if (bound == Bound::kFair && *owed) {
    *owed = ShortOfFairShare(state, static_cast<size_t>(leaf), state.task(j.tasks.front()).req.models);
    if (!*owed) return {};  // no rebalance: no victims (and no supply) to find
  }
  // The per-queue figures (budgets, ranks, the queues it may take from, the supply) are the same
  // for every job with the same key in the same state, time and book: they are kept
  // (VictimCached) until any of those changes. Each filter gets budgets of its own.
  const TaskRequest& first = state.task(j.tasks.front()).req;
  const bool want_supply = supply != nullptr && !hp && first.NeedsGpu();
  const VictimKey key{leaf,       static_cast<int32_t>(bound), hp ? prio : 0,        model,      guaranteed,
                      depth < 64, !j.reservation.valid(),      within_bits,         first.models.bits(), want_supply};
  Restamp(state, now_s);
  const auto mine_marks = [&] {  // the preemptor's queue and ancestors
    auto marks = std::make_shared<std::vector<char>>(n, 0);
    for (int p = leaf; p >= 0; p = tree_.parent(static_cast<size_t>(p))) (*marks)[static_cast<size_t>(p)] = 1;
    return marks;
  };
  std::shared_ptr<std::vector<char>> within, mine;
  const auto hit = key.cacheable ? victim_cache_.find(key) : victim_cache_.end();
  VictimCached fresh;
  if (hit == victim_cache_.end()) {
    within = within_marks();
    mine = mine_marks();
    fresh = VictimQueues(state, key, now_s, *within, *mine, first.models);
    if (key.cacheable) victim_cache_.emplace(key, fresh);
  }
  const VictimCached& c = hit != victim_cache_.end() ? hit->second : fresh;
  if (want_supply) *supply = c.supply;
  if (!filter) return {};
  if (!within) within = within_marks();
  if (!mine) mine = mine_marks();
  VictimFilter f = Filter(state, c, leaf, hp ? prio : -1, model, std::move(within), std::move(mine));
  f.budget_at_s = BudgetTime(now_s);
  return f;
}

bool QueueBook::OwedBelow(const std::vector<char>& within, int32_t leaf, int top) const {
  for (int p = leaf; p >= 0 && p != top; p = tree_.parent(static_cast<size_t>(p))) {
    if (!within[static_cast<size_t>(p)]) return false;
  }
  return true;
}

int QueueBook::PathOver(const std::vector<char>& mine, const std::vector<int64_t>& excess, int32_t v) const {
  int p = v;
  for (; p >= 0 && !mine[static_cast<size_t>(p)]; p = tree_.parent(static_cast<size_t>(p))) {
    if (excess[static_cast<size_t>(p)] <= 0) return -2;
  }
  return p;
}

void QueueBook::Restamp(const ClusterState& state, int64_t now_s) const {
  const std::tuple<uint64_t, uint64_t, uint64_t, int64_t> stamp{state.epoch(), version_, changes_, now_s};
  if (victim_stamp_ == stamp) return;
  victim_cache_.clear();
  budget_cache_.clear();
  supply_bound_cache_.clear();
  victim_stamp_ = stamp;
}

int64_t QueueBook::SupplyBound(const ClusterState& state, size_t leaf, GpuModelSet models, Bound bound,
                               int64_t now_s) const {
  const bool fair = bound == Bound::kFair;
  if (!enabled() || !sharing_.reclaim || (fair && !sharing_.rebalance)) return INT64_MAX;
  Restamp(state, now_s);
  const size_t n = tree_.size();
  // VictimQueues' budgets: toward fair shares in the model's dimension (`guaranteed` is false
  // for a rebalance); toward entitlements in all GPUs, `guaranteed` opening the queues in a
  // cooldown too, so that they are at least those of any job.
  const int32_t model = fair ? FairModel(models) : -1;
  const BudgetCached& b = Budgets(state, bound, model, !fair, now_s);
  auto [at, added] = supply_bound_cache_.try_emplace({static_cast<int32_t>(bound), models.bits()});
  SupplyBoundCached& c = at->second;
  if (added) {
    c.give.assign(n, -1);
    c.sum.assign(n + 1, -1);
  }
  // The lowest ancestor at or above `bound` (a job's request holds GPUs in all, and of its one
  // model when it names one): within it for no such request, so the common ancestor with any
  // queue the job may take from is at or below it.
  const int32_t one = std::popcount(models.bits()) == 1 ? std::countr_zero(models.bits()) : -1;
  const auto full = [&](size_t q, size_t d) {
    if (!managed_[d]) return false;
    const int64_t cap = Cap(q, d, bound);
    return cap != kNoLimit && state.queue_usage(q)[Fixed(d)] + claimed_[q][Fixed(d)] >= cap;
  };
  int top = -1;
  for (int p = tree_.parent(leaf); p >= 0 && top < 0; p = tree_.parent(static_cast<size_t>(p))) {
    const size_t q = static_cast<size_t>(p);
    if (full(q, QuotaDims::kGpu) || (one >= 0 && static_cast<size_t>(one) < tree_.dims().models &&
                                     full(q, tree_.dims().model(static_cast<size_t>(one))))) {
      top = p;
    }
  }
  int64_t& sum = c.sum[top >= 0 ? static_cast<size_t>(top) : n];
  if (sum >= 0) return sum;
  sum = 0;
  for (const int32_t leaf_v : b.over) {
    if (top >= 0) {
      int p = leaf_v;
      while (p >= 0 && p != top) p = tree_.parent(static_cast<size_t>(p));
      if (p != top) continue;
    }
    // Its own budget for the least on its path below the common ancestor (Takeable only grows
    // with the budget), and none left out for the path or for being the job's own leaf.
    const size_t v = static_cast<size_t>(leaf_v);
    int64_t& give = c.give[v];
    if (give < 0) {
      const int64_t budget = (*b.initial)[v];
      give = budget < state.queue_min_preemptible(v, models) ? 0 : std::min(budget, Takeable(state, v, models, budget, true));
    }
    sum += give;
  }
  return sum;
}

const QueueBook::BudgetCached& QueueBook::Budgets(const ClusterState& state, Bound bound, int32_t model, bool guaranteed,
                                                  int64_t now_s) const {
  auto [budget, added] = budget_cache_.try_emplace({static_cast<int32_t>(bound), model, guaranteed});
  if (!added) return budget->second;
  const size_t n = tree_.size();
  const size_t dim = model >= 0 ? tree_.dims().model(static_cast<size_t>(model)) : QuotaDims::kGpu;
  const std::vector<int64_t>& above = bound == Bound::kFair ? shares_.fair : shares_.entitled;
  auto initial = std::make_shared<std::vector<int64_t>>(n, 0);
  auto rank = std::make_shared<std::vector<int64_t>>(n, 0);
  for (size_t q = 0; q < n; ++q) {
    const int64_t have = state.queue_usage(q)[Fixed(dim)];
    // Nothing to take from a queue that may not be reclaimed from now (a rebalance, toward fair
    // shares, waits out every cooldown).
    const bool open = tree_.spec(q).reclaimable && (guaranteed || now_s >= cooldown_until_[q]);
    (*initial)[q] = open ? have - leaving_[q][Fixed(dim)] - shares_.at(above, q, dim) : 0;
    const int64_t fair = std::max<int64_t>(1, shares_.at(shares_.fair, q, dim));
    (*rank)[q] = -((have - fair) * 1000 / fair);  // furthest above its fair share first
    if ((*initial)[q] > 0 && tree_.leaf(q)) budget->second.over.push_back(static_cast<int32_t>(q));
  }
  budget->second.initial = std::move(initial);
  budget->second.rank = std::move(rank);
  return budget->second;
}

QueueBook::VictimCached QueueBook::VictimQueues(const ClusterState& state, const VictimKey& key, int64_t now_s,
                                                const std::vector<char>& within, const std::vector<char>& mine,
                                                GpuModelSet models) const {
  const BudgetCached& b = Budgets(state, static_cast<Bound>(key.bound), key.model, key.guaranteed, now_s);
  const bool hp = key.prio != 0;
  if (hp) return VictimCached{b.initial, b.rank, nullptr, INT64_MAX};
  const std::vector<int64_t>& initial = *b.initial;
  // Not outranking anyone, the job takes only from the leaves it is owed by (`allowed`).
  auto from = std::make_shared<std::vector<int32_t>>();
  // Per queue v it may take from: the GPUs of the job's models v's preemptible jobs hold, at
  // most what v and its ancestors below the common ancestor hold above their entitlements (the
  // budgets) — summed, an upper bound on what a plan could evict.
  int64_t takeable = 0;
  // A leaf whose own budget is not positive is no victim queue (PathOver): only b.over.
  for (const int32_t leaf_v : b.over) {
    if (leaf_v == key.leaf) continue;
    const int top = PathOver(mine, initial, leaf_v);
    if (top == -2 || !OwedBelow(within, key.leaf, top)) continue;
    from->push_back(leaf_v);
    if (!key.supply) continue;
    int64_t budget = INT64_MAX;  // the least budget on v's path below the common ancestor
    for (int p = leaf_v; p != top; p = tree_.parent(static_cast<size_t>(p))) {
      budget = std::min(budget, initial[static_cast<size_t>(p)]);
    }
    // A budget smaller than v's smallest task takes none of v's work (a victim unit, a whole job
    // or an elastic step, holds at least one task).
    const size_t v = static_cast<size_t>(leaf_v);
    if (budget < state.queue_min_preemptible(v, models)) continue;
    takeable += std::min(budget, Takeable(state, v, models, budget, key.unheld_only));
  }
  return VictimCached{b.initial, b.rank, std::move(from), key.supply ? takeable : INT64_MAX};
}

VictimFilter QueueBook::Filter(const ClusterState& state, const VictimCached& c, int32_t leaf, int32_t hp_prio,
                               int32_t model, std::shared_ptr<const std::vector<char>> within,
                               std::shared_ptr<const std::vector<char>> mine) const {
  VictimFilter f;
  f.queues = c.from;
  const QueueBook* book = this;
  const ClusterState* st = &state;
  auto excess = std::make_shared<std::vector<int64_t>>(*c.initial);
  f.allowed = [=](const Job& v) {
    const int32_t vq = v.spec.queue;
    // In a model's dimension, only jobs of that model count against its budgets.
    if (model >= 0 && st->task(v.tasks.front()).req.models.bits() != uint64_t{1} << model) return false;
    const bool outranked = hp_prio >= 0 && v.spec.priority < hp_prio;
    if (vq < 0 || vq == leaf) return outranked;
    const int top = book->PathOver(*mine, *excess, vq);
    return top != -2 && (outranked || book->OwedBelow(*within, leaf, top));
  };
  f.rank = [leaf, rank = c.rank](const Job& v) {
    const int32_t vq = v.spec.queue;
    return vq < 0 || vq == leaf ? INT64_MAX / 2 : (*rank)[static_cast<size_t>(vq)];
  };
  std::shared_ptr<const std::vector<int64_t>> initial = c.initial;
  f.reset = [excess, initial] { *excess = *initial; };
  const QueueTree* tree = &tree_;
  f.take = [tree, mine, excess, leaf](const Job& v, int64_t gpu) {
    const int32_t vq = v.spec.queue;
    if (vq < 0 || vq == leaf) return true;
    for (int p = vq; p >= 0 && !(*mine)[static_cast<size_t>(p)]; p = tree->parent(static_cast<size_t>(p))) {
      if ((*excess)[static_cast<size_t>(p)] < gpu) return false;
    }
    for (int p = vq; p >= 0 && !(*mine)[static_cast<size_t>(p)]; p = tree->parent(static_cast<size_t>(p))) {
      (*excess)[static_cast<size_t>(p)] -= gpu;
    }
    return true;
  };
  return f;
}

int64_t QueueBook::Supply(const ClusterState& state, JobId job, int64_t replicas, int64_t now_s) const {
  if (!enabled() || state.job(job).spec.queue < 0 || state.job(job).spec.priority >= kHpPriority) return INT64_MAX;
  int64_t supply = INT64_MAX;
  bool owed = false;
  (void)VictimsUpTo(state, job, replicas, now_s, Bound::kEntitled, &owed, &supply, false);
  return supply;
}

void QueueBook::Claim(const ClusterState& state, JobId job, int64_t replicas, int sign) {
  const int32_t leaf = state.job(job).spec.queue;
  if (!enabled() || leaf < 0 || !sharing_.count_in_flight) return;
  const QueueUsage u = Request(state, job, replicas, true);
  for (int p = leaf; p >= 0; p = tree_.parent(static_cast<size_t>(p))) {
    for (size_t i = 0; i < kQueueDims; ++i) claimed_[static_cast<size_t>(p)][i] += sign * u[i];
    ++changes_;
  }
}

void QueueBook::Leaving(const ClusterState& state, TaskId task, int sign) {
  const Task& t = state.task(task);
  const int32_t leaf = state.job(t.job).spec.queue;
  if (!enabled() || leaf < 0 || !sharing_.count_in_flight) return;
  // In its model's dimension too when it names exactly one (as its queue's usage counts it).
  const uint64_t bits = t.req.models.bits();
  const int model = std::popcount(bits) == 1 ? std::countr_zero(bits) : -1;
  for (int p = leaf; p >= 0; p = tree_.parent(static_cast<size_t>(p))) {
    QueueUsage& l = leaving_[static_cast<size_t>(p)];
    ++changes_;
    l[kQueueGpu] += sign * t.req.TotalGpuMilli();
    if (model >= 0) l[kQueueModel + static_cast<size_t>(model)] += sign * t.req.TotalGpuMilli();
  }
}

void QueueBook::Reclaimed(const ClusterState& state, JobId job, int64_t now_s) {
  for (int p = state.job(job).spec.queue; p >= 0; p = tree_.parent(static_cast<size_t>(p))) {
    cooldown_until_[static_cast<size_t>(p)] = now_s + sharing_.cooldown_s;
    ++changes_;
  }
}

}  // namespace estuary
