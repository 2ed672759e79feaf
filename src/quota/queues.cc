#include "quota/queues.h"

#include <algorithm>
#include <functional>
#include <numeric>

namespace estuary {

namespace {

std::string GpuText(int64_t milli) {
  return milli % 1000 == 0 ? std::to_string(milli / 1000) : std::to_string(milli) + " milli-GPU";
}

// Per dimension, what `a` says; `absent` where it says nothing (the total GPU dimension: the sum
// of the per-model amounts when `sum_models`, else `absent`).
StatusOr<std::vector<int64_t>> Resolve(const QuotaAmounts& a, const QuotaDims& dims, const GpuModels& models,
                                       int64_t absent, bool sum_models, const std::string& where) {
  std::vector<int64_t> v(dims.size(), absent);
  int64_t sum = 0;
  for (const auto& [name, milli] : a.model_milli) {
    const std::optional<GpuModelId> m = models.Find(name);
    if (!m) {
      std::string known;
      for (size_t i = 0; i < models.size(); ++i) known += (i ? ", " : "") + models.Name(GpuModelId(static_cast<uint32_t>(i)));
      return InvalidArgument(where + ".gpus." + name + "': unknown GPU model '" + name + "' (the cluster has: " +
                             (known.empty() ? "none" : known) + ")");
    }
    v[dims.model(m->value())] = milli;
    sum += milli;
  }
  if (a.gpu_milli) v[QuotaDims::kGpu] = *a.gpu_milli;
  else if (sum_models && !a.model_milli.empty()) v[QuotaDims::kGpu] = sum;
  if (a.cpu_milli) v[dims.cpu()] = *a.cpu_milli;
  if (a.memory_mib) v[dims.memory()] = *a.memory_mib;
  return v;
}

// The name of dimension d, and an amount of it, in words.
std::string DimName(const QuotaDims& dims, const GpuModels& models, size_t d) {
  if (d == QuotaDims::kGpu) return "GPUs";
  if (d == dims.cpu()) return "CPU milli-cores";
  if (d == dims.memory()) return "MiB of memory";
  return models.Name(GpuModelId(static_cast<uint32_t>(d - 1))) + " GPUs";
}

std::string Amount(const QuotaDims& dims, size_t d, int64_t v) {
  return d == dims.cpu() || d == dims.memory() ? std::to_string(v) : GpuText(v);
}

}  // namespace

StatusOr<QueueTree> QueueTree::Build(std::vector<QueueSpec> specs, const GpuModels& models, int* line) {
  QueueTree t;
  t.dims_.models = models.size();
  const size_t n = specs.size();
  auto fail = [&](size_t q, int at, const std::string& text) -> Status {
    if (line != nullptr) *line = at != 0 ? at : specs[q].lines.queue;
    return InvalidArgument("queue '" + specs[q].name + "': field '" + text);
  };
  for (size_t q = 0; q < n; ++q) {
    const QueueSpec& s = specs[q];
    if (s.name.empty()) return fail(q, s.lines.queue, "name': empty");
    if (!t.by_name_.emplace(s.name, q).second) return fail(q, s.lines.queue, "name': a second queue named '" + s.name + "'");
    if (s.weight < 1 || s.weight > 1'000'000) return fail(q, 0, "weight': " + std::to_string(s.weight) + " is outside 1..1000000");
  }
  t.parent_.assign(n, -1);
  t.children_.assign(n, {});
  for (size_t q = 0; q < n; ++q) {
    if (specs[q].parent.empty()) {
      t.roots_.push_back(q);
      continue;
    }
    const auto p = t.by_name_.find(specs[q].parent);
    if (p == t.by_name_.end()) return fail(q, specs[q].lines.parent, "parent': no queue named '" + specs[q].parent + "'");
    t.parent_[q] = static_cast<int>(p->second);
    t.children_[p->second].push_back(q);
  }
  // Cycles: every queue must reach the root within n steps.
  for (size_t q = 0; q < n; ++q) {
    int at = static_cast<int>(q);
    for (size_t steps = 0; at >= 0; ++steps) {
      if (steps > n) return fail(q, specs[q].lines.parent, "parent': the queues form a cycle through '" + specs[q].name + "'");
      at = t.parent_[static_cast<size_t>(at)];
    }
  }
  // Bottom-up order: depth descending, then index.
  std::vector<int> depth(n, 0);
  for (size_t q = 0; q < n; ++q) {
    for (int at = t.parent_[q]; at >= 0; at = t.parent_[static_cast<size_t>(at)]) ++depth[q];
  }
  t.bottom_up_.resize(n);
  std::iota(t.bottom_up_.begin(), t.bottom_up_.end(), size_t{0});
  std::stable_sort(t.bottom_up_.begin(), t.bottom_up_.end(), [&](size_t a, size_t b) { return depth[a] > depth[b]; });

  const QuotaDims& dims = t.dims_;
  t.guarantee_.resize(n);
  t.limit_.resize(n);
  t.unlent_.resize(n);
  for (size_t q = 0; q < n; ++q) {
    const QueueSpec& s = specs[q];
    auto g = Resolve(s.guarantee, dims, models, 0, true, "guarantee");
    if (!g.ok()) return fail(q, s.lines.guarantee, g.status().message());
    auto l = Resolve(s.limit, dims, models, kNoLimit, false, "limit");
    if (!l.ok()) return fail(q, s.lines.limit, l.status().message());
    auto lend = Resolve(s.lend_limit, dims, models, kNoLimit, true, "lend_limit");
    if (!lend.ok()) return fail(q, s.lines.lend_limit, lend.status().message());
    t.guarantee_[q] = *g;
    t.limit_[q] = *l;
    t.unlent_[q].assign(dims.size(), 0);
    for (size_t d = 0; d < dims.size(); ++d) {
      const int64_t gv = (*g)[d], lv = (*l)[d], ln = (*lend)[d];
      if (lv < gv) {
        return fail(q, s.lines.limit, "limit': " + Amount(dims, d, lv) + " " + DimName(dims, models, d) +
                                          " is below its guarantee of " + Amount(dims, d, gv));
      }
      if (ln != kNoLimit && ln > gv) {
        return fail(q, s.lines.lend_limit, "lend_limit': " + Amount(dims, d, ln) + " " + DimName(dims, models, d) +
                                               " is above its guarantee of " + Amount(dims, d, gv));
      }
      if (ln != kNoLimit) t.unlent_[q][d] = gv - ln;
    }
  }
  // A parent's guarantee covers its children's.
  for (size_t p = 0; p < n; ++p) {
    if (t.children_[p].empty()) continue;
    for (size_t d = 0; d < dims.size(); ++d) {
      int64_t sum = 0;
      for (size_t c : t.children_[p]) sum += t.guarantee_[c][d];
      if (sum <= t.guarantee_[p][d]) continue;
      const size_t last = t.children_[p].back();
      return fail(last, specs[last].lines.guarantee,
                  "guarantee': the children of '" + specs[p].name + "' are guaranteed " + Amount(dims, d, sum) + " " +
                      DimName(dims, models, d) + ", above its own " + Amount(dims, d, t.guarantee_[p][d]));
    }
  }
  t.specs_ = std::move(specs);
  return t;
}

std::optional<size_t> QueueTree::Find(const std::string& name) const {
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

bool QueueTree::Within(size_t q, size_t ancestor) const {
  for (int at = static_cast<int>(q); at >= 0; at = parent_[static_cast<size_t>(at)]) {
    if (static_cast<size_t>(at) == ancestor) return true;
  }
  return false;
}

std::vector<int64_t> WaterFill(int64_t amount, const std::vector<int64_t>& cap, const std::vector<int64_t>& weight) {
  const size_t k = cap.size();
  std::vector<int64_t> part(k, 0);
  if (amount <= 0 || k == 0) return part;
  // Claimants by cap / weight ascending: each one either is filled to its cap at the common rate
  // or the rate stops below it.
  std::vector<size_t> order;
  for (size_t i = 0; i < k; ++i) {
    if (cap[i] > 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const __int128 l = static_cast<__int128>(cap[a]) * weight[b], r = static_cast<__int128>(cap[b]) * weight[a];
    return l != r ? l < r : a < b;
  });
  __int128 left = amount, w = 0;
  for (size_t i : order) w += weight[i];
  size_t at = 0;
  for (; at < order.size(); ++at) {
    const size_t i = order[at];
    // Filled to its cap when cap / weight <= left / w.
    if (static_cast<__int128>(cap[i]) * w > left * weight[i]) break;
    part[i] = cap[i];
    left -= cap[i];
    w -= weight[i];
  }
  if (at == order.size()) return part;
  // The rest share `left` in proportion to their weights (each below its cap), floors first.
  std::vector<size_t> rest(order.begin() + static_cast<std::ptrdiff_t>(at), order.end());
  __int128 given = 0;
  for (size_t i : rest) {
    part[i] = static_cast<int64_t>(left * weight[i] / w);
    given += part[i];
  }
  std::sort(rest.begin(), rest.end(), [&](size_t a, size_t b) { return weight[a] != weight[b] ? weight[a] > weight[b] : a < b; });
  for (size_t r = 0; given < left; r = (r + 1) % rest.size()) {
    if (part[rest[r]] < cap[rest[r]]) {
      ++part[rest[r]];
      ++given;
    }
  }
  return part;
}

namespace {

// Shares `amount` among `kids` (queue indices) in dimension d: guarantees (as far as demanded,
// or unlent) first, scaled down when they do not fit, then the rest by weight up to demand
// (`surplus` false: no rest). Writes each kid's part into out[kid * dims + d].
void Split(const QueueTree& tree, const std::vector<size_t>& kids, size_t d, int64_t amount, const QueueShares& s,
           const std::vector<int64_t>& weight, bool surplus, std::vector<int64_t>& out) {
  const size_t D = s.dims;
  std::vector<int64_t> first(kids.size()), cap(kids.size()), w(kids.size());
  int64_t sum = 0;
  for (size_t i = 0; i < kids.size(); ++i) {
    const size_t q = kids[i];
    const int64_t demand = s.demand[q * D + d];
    first[i] = std::max(std::min(tree.guarantee(q)[d], demand), tree.unlent(q)[d]);
    sum += first[i];
    w[i] = weight[q];
  }
  if (sum > amount) {  // guarantees above what there is (nodes down): in proportion
    first = WaterFill(std::max<int64_t>(amount, 0), first, first);
    sum = std::accumulate(first.begin(), first.end(), int64_t{0});
  }
  std::vector<int64_t> more(kids.size(), 0);
  if (surplus) {
    for (size_t i = 0; i < kids.size(); ++i) cap[i] = std::max<int64_t>(0, s.demand[kids[i] * D + d] - first[i]);
    more = WaterFill(amount - sum, cap, w);
  }
  for (size_t i = 0; i < kids.size(); ++i) out[kids[i] * D + d] = first[i] + more[i];
}

}  // namespace

std::vector<int64_t> ShareWeights(const QueueTree& tree, const std::vector<int64_t>& milli_weight, bool weights) {
  std::vector<int64_t> weight(tree.size());
  for (size_t q = 0; q < tree.size(); ++q) {
    weight[q] = !weights ? 1000 : milli_weight.empty() ? tree.spec(q).weight * 1000 : std::max<int64_t>(1, milli_weight[q]);
  }
  return weight;
}

namespace {
// Queue q's demand cap in dimension d (D dimensions): its limit, less what it holds back.
int64_t DemandCap(const QueueTree& tree, const std::vector<int64_t>* held_back, size_t q, size_t d, size_t D) {
  const int64_t lim = tree.limit(q)[d];
  if (lim == kNoLimit || held_back == nullptr) return lim;
  return std::max<int64_t>(0, lim - (*held_back)[q * D + d]);
}
}  // namespace

QueueShares ComputeShares(const QueueTree& tree, const std::vector<int64_t>& capacity, const std::vector<int64_t>& leaf_usage,
                          const std::vector<int64_t>& leaf_pending, const std::vector<int64_t>& milli_weight, bool weights,
                          bool reclaim_to_fair_share, const QueueShares* previous,
                          const std::vector<int64_t>* previous_capacity, const std::vector<int64_t>* held_back) {
  const size_t n = tree.size(), D = tree.dims().size();
  QueueShares s;
  s.dims = D;
  s.usage.assign(n * D, 0);
  s.demand.assign(n * D, 0);
  s.fair.assign(n * D, 0);
  s.entitled.assign(n * D, 0);
  std::vector<int64_t> pending(n * D, 0);
  for (size_t q = 0; q < n; ++q) {
    if (!tree.leaf(q)) continue;
    for (size_t d = 0; d < D; ++d) {
      s.usage[q * D + d] = leaf_usage[q * D + d];
      pending[q * D + d] = leaf_pending[q * D + d];
    }
  }
  for (size_t q : tree.bottom_up()) {
    for (size_t d = 0; d < D; ++d) {
      const int64_t lim = DemandCap(tree, held_back, q, d, D);
      int64_t want = 0;
      if (tree.leaf(q)) {
        want = s.usage[q * D + d] + pending[q * D + d];
      } else {
        for (size_t c : tree.children(q)) want += s.demand[c * D + d];
      }
      s.demand[q * D + d] = std::min(lim, want);
      if (tree.parent(q) >= 0) {
        const size_t p = static_cast<size_t>(tree.parent(q));
        s.usage[p * D + d] += s.usage[q * D + d];
      }
    }
  }
  const std::vector<int64_t> weight = ShareWeights(tree, milli_weight, weights);
  // Top-down: each parent's amount is shared among its children. A split is a function of the
  // amount and the children's demands (the tree and weights fixed): where neither changed since
  // `previous`, its parts are copied.
  const QueueShares* prev = previous != nullptr && previous_capacity != nullptr && previous->dims == D &&
                                    previous->fair.size() == n * D && previous->entitled.size() == n * D &&
                                    previous->demand.size() == n * D && previous_capacity->size() == D
                                ? previous
                                : nullptr;
  const auto same_demand = [&](const std::vector<size_t>& kids, size_t d) {
    return std::all_of(kids.begin(), kids.end(), [&](size_t k) { return s.demand[k * D + d] == prev->demand[k * D + d]; });
  };
  const auto copy = [&](const std::vector<size_t>& kids, size_t d) {
    for (size_t k : kids) {
      s.fair[k * D + d] = prev->fair[k * D + d];
      s.entitled[k * D + d] = prev->entitled[k * D + d];
    }
  };
  std::vector<size_t> top_down(tree.bottom_up().rbegin(), tree.bottom_up().rend());
  for (size_t d = 0; d < D; ++d) {
    if (prev != nullptr && capacity[d] == (*previous_capacity)[d] && same_demand(tree.roots(), d)) {
      copy(tree.roots(), d);
    } else {
      Split(tree, tree.roots(), d, capacity[d], s, weight, true, s.fair);
      Split(tree, tree.roots(), d, capacity[d], s, weight, reclaim_to_fair_share, s.entitled);
    }
    for (size_t p : top_down) {
      if (tree.leaf(p)) continue;
      const size_t pd = p * D + d;
      if (prev != nullptr && s.fair[pd] == prev->fair[pd] && s.entitled[pd] == prev->entitled[pd] &&
          same_demand(tree.children(p), d)) {
        copy(tree.children(p), d);
        continue;
      }
      Split(tree, tree.children(p), d, s.fair[pd], s, weight, true, s.fair);
      Split(tree, tree.children(p), d, s.entitled[pd], s, weight, true, s.entitled);
    }
  }
  return s;
}

bool UpdateShares(const QueueTree& tree, const std::vector<int64_t>& capacity, const std::vector<size_t>& leaves,
                  const std::vector<int64_t>& usage_rows, const std::vector<int64_t>& pending_rows,
                  const std::vector<int64_t>& weight, bool reclaim_to_fair_share, QueueShares& s,
                  std::vector<size_t>* changed_queues, const std::vector<int64_t>* held_back,
                  const std::vector<size_t>* held_back_moved) {
  const size_t D = s.dims;
  const auto depth = [&](size_t q) {
    size_t k = 0;
    for (int p = tree.parent(q); p >= 0; p = tree.parent(static_cast<size_t>(p))) ++k;
    return k;
  };
  // Whether queue q's demand in dimension d going from `was` to `now` may change the split of
  // its parent's amount (else every part stays). Split gives q first its guaranteed part (the
  // same when min(guarantee, demand) or its unlent part decides it both times), then a part of
  // the surplus by water-filling up to demand less that: when its old part was below both its
  // old and its new demand, q was not filled to its cap and is not now (its cap stays above the
  // common level), and the others' caps are as they were — WaterFill makes the same parts (the
  // same queues filled to their caps, the same level, the remainder by weight).
  const auto moves_split = [&](size_t q, size_t d, int64_t was, int64_t now) {
    const int64_t g = tree.guarantee(q)[d], unlent = tree.unlent(q)[d];
    if (std::max(std::min(g, was), unlent) != std::max(std::min(g, now), unlent)) return true;
    const int64_t fair = s.fair[q * D + d], entitled = s.entitled[q * D + d];
    if (!(fair < was && fair < now)) return true;
    const bool surplus = tree.parent(q) >= 0 || reclaim_to_fair_share;  // the entitled split's
    return surplus && !(entitled < was && entitled < now);
  };
  // Inner queues to sum again (their children's demand changed), by depth, and whether their
  // children are shared out again (`must_split`); the roots' split.
  std::vector<std::vector<size_t>> resum;
  std::vector<char> marked(tree.size(), 0), must_split(tree.size(), 0);
  bool split_roots = false;
  const auto demand_changed = [&](size_t q, bool moves) {
    const int p = tree.parent(q);
    if (p < 0) {
      split_roots = split_roots || moves;
      return;
    }
    const size_t pq = static_cast<size_t>(p);
    must_split[pq] = must_split[pq] || moves;
    if (marked[pq]) return;
    marked[pq] = 1;
    const size_t k = depth(pq);
    if (resum.size() <= k) resum.resize(k + 1);
    resum[k].push_back(pq);
  };
  for (size_t i = 0; i < leaves.size(); ++i) {
    const size_t q = leaves[i];
    bool changed = false, moves = false;
    for (size_t d = 0; d < D; ++d) {
      const int64_t u = usage_rows[i * D + d];
      const int64_t du = u - s.usage[q * D + d];
      if (du != 0) {
        for (int p = static_cast<int>(q); p >= 0; p = tree.parent(static_cast<size_t>(p))) s.usage[static_cast<size_t>(p) * D + d] += du;
      }
      const int64_t demand = std::min(DemandCap(tree, held_back, q, d, D), u + pending_rows[i * D + d]);
      if (demand != s.demand[q * D + d]) {
        moves = moves || moves_split(q, d, s.demand[q * D + d], demand);
        s.demand[q * D + d] = demand;
        changed = true;
      }
    }
    if (changed) demand_changed(q, moves);
  }
  // An inner queue whose cap moved is summed again too.
  for (size_t p : held_back_moved != nullptr ? *held_back_moved : std::vector<size_t>{}) {
    if (tree.leaf(p) || marked[p]) continue;
    marked[p] = 1;
    const size_t k = depth(p);
    if (resum.size() <= k) resum.resize(k + 1);
    resum[k].push_back(p);
  }
  // Bottom-up: each marked inner queue's demand is its children's, capped at its limit; its own
  // children are shared out again below (`split`).
  std::vector<std::vector<size_t>> split(resum.size());
  for (size_t k = resum.size(); k-- > 0;) {
    for (size_t p : resum[k]) {
      if (must_split[p]) split[k].push_back(p);
      bool changed = false, moves = false;
      for (size_t d = 0; d < D; ++d) {
        int64_t want = 0;
        for (size_t c : tree.children(p)) want += s.demand[c * D + d];
        const int64_t demand = std::min(DemandCap(tree, held_back, p, d, D), want);
        if (demand != s.demand[p * D + d]) {
          moves = moves || moves_split(p, d, s.demand[p * D + d], demand);
          s.demand[p * D + d] = demand;
          changed = true;
        }
      }
      if (changed) demand_changed(p, moves);  // marks a queue of depth k - 1 (or the roots)
    }
  }
  // Top-down: the splits whose amount or children's demand changed, as ComputeShares makes them.
  bool any = false;
  std::vector<int64_t> fair_before, entitled_before;
  const auto redo = [&](const std::vector<size_t>& kids, size_t k, const std::function<void(size_t)>& each) {
    fair_before.resize(kids.size() * D);
    entitled_before.resize(kids.size() * D);
    for (size_t i = 0; i < kids.size(); ++i) {
      for (size_t d = 0; d < D; ++d) {
        fair_before[i * D + d] = s.fair[kids[i] * D + d];
        entitled_before[i * D + d] = s.entitled[kids[i] * D + d];
      }
    }
    for (size_t d = 0; d < D; ++d) each(d);
    for (size_t i = 0; i < kids.size(); ++i) {
      const size_t c = kids[i];
      bool changed = false;
      for (size_t d = 0; d < D; ++d) {
        changed = changed || fair_before[i * D + d] != s.fair[c * D + d] || entitled_before[i * D + d] != s.entitled[c * D + d];
      }
      if (!changed) continue;
      any = true;
      if (changed_queues != nullptr) changed_queues->push_back(c);
      if (tree.leaf(c) || marked[c] == 2) continue;
      marked[c] = 2;  // its children are shared out again
      if (split.size() <= k) split.resize(k + 1);
      split[k].push_back(c);
    }
  };
  if (split_roots) {
    redo(tree.roots(), 0, [&](size_t d) {
      Split(tree, tree.roots(), d, capacity[d], s, weight, true, s.fair);
      Split(tree, tree.roots(), d, capacity[d], s, weight, reclaim_to_fair_share, s.entitled);
    });
  }
  for (size_t k = 0; k < split.size(); ++k) {
    for (size_t i = 0; i < split[k].size(); ++i) {
      const size_t p = split[k][i];
      if (marked[p] == 3) continue;  // listed twice (its demand and its amount changed)
      marked[p] = 3;
      redo(tree.children(p), k + 1, [&](size_t d) {
        Split(tree, tree.children(p), d, s.fair[p * D + d], s, weight, true, s.fair);
        Split(tree, tree.children(p), d, s.entitled[p * D + d], s, weight, true, s.entitled);
      });
    }
  }
  return any;
}

}  // namespace estuary
