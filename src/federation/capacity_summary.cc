#include "federation/capacity_summary.h"

#include <algorithm>
#include <array>

#include "common/check.h"

namespace estuary {

void CapacitySummary::Build(const ClusterState& state, const SummaryOptions& options) {
  thresholds_.assign(1, 0);
  for (int32_t p : options.thresholds) {
    ESTUARY_CHECK(p > thresholds_.back());  // positive, ascending, distinct
    thresholds_.push_back(p);
  }
  nt_ = thresholds_.size() + 1;
  ESTUARY_CHECK(nt_ <= kMaxThresholds + 2);
  nm_ = state.models().size();
  ESTUARY_CHECK(nm_ <= 64);
  g_ = 0;
  for (const Node& n : state.nodes()) g_ = std::max<size_t>(g_, static_cast<size_t>(n.spec.gpu_count));
  model_names_.clear();
  for (size_t m = 0; m < nm_; ++m) model_names_.push_back(state.models().Name(GpuModelId(static_cast<uint32_t>(m))));
  const Topology& topo = state.topology();
  plane_names_.clear();
  level_names_.clear();
  domains_at_.clear();
  for (const Plane& p : topo.planes()) {
    plane_names_.push_back(p.name);
    level_names_.push_back(p.levels);
    auto& at = domains_at_.emplace_back();
    for (size_t l = 0; l < p.levels.size(); ++l) {
      auto& ids = at.emplace_back();
      for (DomainId d : topo.DomainsAt(p.id, static_cast<int>(l))) ids.push_back(d.value());
    }
  }
  stride_ = nm_ * nt_ * (g_ + 1);
  hist_.assign(stride_, 0);
  dom_hist_.assign(topo.domains().size() * stride_, 0);
  evict_milli_.assign(nm_ * nt_, 0);
  evict_start_milli_.assign(nm_ * nt_, 0);
  gpus_avail_.assign(nm_ * nt_, 0);
  held_free_.assign(nm_, 0);
  const size_t nn = state.num_nodes();
  node_model_.assign(nn, -1);
  node_avail_.assign(nn * nt_, 0);
  node_held_free_.assign(nn, 0);
  node_evict_milli_.assign(nn * nt_, 0);
  node_evict_start_.assign(nn * nt_, 0);
  node_dom_begin_.assign(nn + 1, 0);
  node_dom_.clear();
  dirty_.assign(nn, 0);
  dirty_list_.clear();
  for (const Node& n : state.nodes()) {
    // A node outside a plane has unassigned (invalid) slots there: it counts in no domain of it.
    for (DomainId d : topo.DomainsOf(n.id)) {
      if (d.valid()) node_dom_.push_back(d.value());
    }
    node_dom_begin_[n.id.value() + 1] = static_cast<uint32_t>(node_dom_.size());
  }
  for (const Node& n : state.nodes()) {
    if (n.spec.gpu_count > 0 && n.spec.model.valid()) node_model_[n.id.value()] = static_cast<int16_t>(n.spec.model.value());
    const size_t o = n.id.value() * nt_;
    NodeAvail(state, n, &node_avail_[o], &node_evict_milli_[o], &node_evict_start_[o]);
    node_held_free_[n.id.value()] = HeldFree(state, n);
    Apply(n.id, +1);
  }
  cursor_ = state.change_seq();
}

void CapacitySummary::Refresh(const ClusterState& state) {
  if (state.num_nodes() != node_model_.size()) {  // nodes were added: start over
    SummaryOptions o;
    o.thresholds.assign(thresholds_.begin() + 1, thresholds_.end());
    Build(state, o);
    return;
  }
  const bool kept = state.ForEachChangeSince(cursor_, [&](NodeId id) {
    if (!dirty_[id.value()]) {
      dirty_[id.value()] = 1;
      dirty_list_.push_back(id);
    }
  });
  if (!kept) {
    for (const Node& n : state.nodes()) {
      if (!dirty_[n.id.value()]) {
        dirty_[n.id.value()] = 1;
        dirty_list_.push_back(n.id);
      }
    }
  }
  std::array<uint8_t, kMaxThresholds + 2> old_avail{};
  std::array<int64_t, kMaxThresholds + 2> old_milli{}, old_start{};
  for (NodeId id : dirty_list_) {
    dirty_[id.value()] = 0;
    const int m = node_model_[id.value()];
    if (m < 0) continue;
    const size_t o = id.value() * nt_;
    std::copy_n(&node_avail_[o], nt_, old_avail.begin());
    std::copy_n(&node_evict_milli_[o], nt_, old_milli.begin());
    std::copy_n(&node_evict_start_[o], nt_, old_start.begin());
    NodeAvail(state, state.node(id), &node_avail_[o], &node_evict_milli_[o], &node_evict_start_[o]);
    const uint8_t held_free = HeldFree(state, state.node(id));
    held_free_[static_cast<size_t>(m)] += int64_t{held_free} - node_held_free_[id.value()];
    node_held_free_[id.value()] = held_free;
    // Only the thresholds whose a_t moved touch the histograms.
    const uint32_t* dom = node_dom_.data() + node_dom_begin_[id.value()];
    const uint32_t* dom_end = node_dom_.data() + node_dom_begin_[id.value() + 1];
    for (size_t t = 0; t < nt_; ++t) {
      const size_t mt = static_cast<size_t>(m) * nt_ + t;
      evict_milli_[mt] += node_evict_milli_[o + t] - old_milli[t];
      evict_start_milli_[mt] += node_evict_start_[o + t] - old_start[t];
      const int before = old_avail[t], after = node_avail_[o + t];
      if (before == after) continue;
      gpus_avail_[mt] += after - before;
      const size_t slot = Slot(static_cast<size_t>(m), t);
      --hist_[slot + static_cast<size_t>(before)];
      ++hist_[slot + static_cast<size_t>(after)];
      for (const uint32_t* d = dom; d != dom_end; ++d) {
        int32_t* h = &dom_hist_[*d * stride_ + slot];
        --h[before];
        ++h[after];
      }
    }
  }
  nodes_refreshed_ += static_cast<int64_t>(dirty_list_.size());
  dirty_list_.clear();
  cursor_ = state.change_seq();
}

void CapacitySummary::NodeAvail(const ClusterState& state, const Node& n, uint8_t* avail, int64_t* evict_milli,
                                int64_t* evict_start_milli) const {
  std::fill(avail, avail + nt_, 0);
  std::fill(evict_milli, evict_milli + nt_, 0);
  std::fill(evict_start_milli, evict_start_milli + nt_, 0);
  const int gpus = n.spec.gpu_count;
  if (gpus == 0 || !n.spec.model.valid()) return;
  const size_t cap = nt_ - 1;
  avail[cap] = static_cast<uint8_t>(gpus);
  const bool headroom = HeldByHeadroom(state, n);
  if (n.state != NodeState::kReady || (n.reservation.valid() && !headroom)) return;
  avail[0] = static_cast<uint8_t>(n.full_free_gpus);
  if (cap > 1) NodeEvictable(state, n, avail, evict_milli, evict_start_milli);
  if (headroom) {  // open to HP work only
    for (size_t t = 0; t < cap && thresholds_[t] < kHpPriority; ++t) avail[t] = 0, evict_milli[t] = 0, evict_start_milli[t] = 0;
  }
}

bool CapacitySummary::HeldByHeadroom(const ClusterState& state, const Node& n) const {
  if (!n.reservation.valid()) return false;
  const JobId owner = state.reservation(n.reservation).owner;
  return std::find(headroom_owners_.begin(), headroom_owners_.end(), owner) != headroom_owners_.end();
}

uint8_t CapacitySummary::HeldFree(const ClusterState& state, const Node& n) const {
  const bool ready = n.state == NodeState::kReady && n.spec.gpu_count > 0;
  return ready && HeldByHeadroom(state, n) ? static_cast<uint8_t>(n.full_free_gpus) : 0;
}

void CapacitySummary::NodeEvictable(const ClusterState& state, const Node& n, uint8_t* avail, int64_t* evict_milli,
                                    int64_t* evict_start_milli) const {
  const int gpus = n.spec.gpu_count;
  const size_t cap = nt_ - 1;
  // A task evictable below thresholds_[t] is evictable below every higher threshold: add[t0][g]
  // holds the milli that becomes evictable from threshold t0 on, then prefix sums over t.
  std::array<std::array<int32_t, kMaxGpusPerNode>, kMaxThresholds + 2> add;
  std::array<int64_t, kMaxThresholds + 2> add_milli{}, add_start{};
  for (size_t t = 1; t < cap; ++t) add[t].fill(0);
  bool any = false;
  for (TaskId tid : n.tasks) {
    const Task& task = state.task(tid);
    if (task.standby || task.borrowed) continue;
    const Job& job = state.job(task.job);
    if (!job.spec.preemptible) continue;
    const size_t t0 = static_cast<size_t>(
        std::upper_bound(thresholds_.begin() + 1, thresholds_.end(), job.spec.priority) - thresholds_.begin());
    if (t0 >= cap) continue;
    any = true;
    for (uint8_t g : task.gpus) add[t0][g] += task.req.gpu_milli;
    const int64_t milli = task.req.TotalGpuMilli();
    add_milli[t0] += milli;
    add_start[t0] += milli * std::max<int64_t>(0, job.started_at_s);
  }
  if (!any) {
    for (size_t t = 1; t < cap; ++t) avail[t] = avail[0];
    return;
  }
  std::array<int32_t, kMaxGpusPerNode> ev{};
  int64_t milli = 0, start = 0;
  for (size_t t = 1; t < cap; ++t) {
    int a = 0;
    for (int g = 0; g < gpus; ++g) {
      ev[g] += add[t][g];
      a += n.gpu_free[g] + ev[g] == kMilliPerGpu;
    }
    avail[t] = static_cast<uint8_t>(a);
    milli += add_milli[t];
    start += add_start[t];
    evict_milli[t] = milli;
    evict_start_milli[t] = start;
  }
}

void CapacitySummary::Apply(NodeId id, int sign) {
  const int m = node_model_[id.value()];
  if (m < 0) return;
  const size_t o = id.value() * nt_;
  held_free_[static_cast<size_t>(m)] += sign * int64_t{node_held_free_[id.value()]};
  for (size_t t = 0; t < nt_; ++t) {
    const size_t mt = static_cast<size_t>(m) * nt_ + t;
    const size_t c = node_avail_[o + t];
    gpus_avail_[mt] += sign * static_cast<int64_t>(c);
    evict_milli_[mt] += sign * node_evict_milli_[o + t];
    evict_start_milli_[mt] += sign * node_evict_start_[o + t];
    const size_t slot = Slot(static_cast<size_t>(m), t);
    hist_[slot + c] += sign;
    for (uint32_t i = node_dom_begin_[id.value()]; i < node_dom_begin_[id.value() + 1]; ++i) {
      dom_hist_[node_dom_[i] * stride_ + slot + c] += sign;
    }
  }
}

int64_t CapacitySummary::PlaceableIn(const int32_t* h, size_t k) const {
  int64_t sum = 0;
  for (size_t c = k; c <= g_; ++c) sum += int64_t{h[c]} * static_cast<int64_t>(c / k);
  return sum;
}

std::optional<uint64_t> CapacitySummary::ResolveModels(const std::vector<std::string>& names) const {
  if (names.empty()) return ~uint64_t{0};
  uint64_t bits = 0;
  for (const std::string& name : names) {
    for (size_t m = 0; m < nm_; ++m) {
      if (model_names_[m] == name) bits |= uint64_t{1} << m;
    }
  }
  if (bits == 0) return std::nullopt;
  return bits;
}

std::optional<std::pair<PlaneId, int>> CapacitySummary::ResolveLevel(const std::string& plane,
                                                                      const std::string& level) const {
  for (size_t p = 0; p < plane_names_.size(); ++p) {
    if (plane_names_[p] != plane) continue;
    for (size_t l = 0; l < level_names_[p].size(); ++l) {
      if (level_names_[p][l] == level) return std::pair{PlaneId(static_cast<uint32_t>(p)), static_cast<int>(l)};
    }
  }
  return std::nullopt;
}

int64_t CapacitySummary::Placeable(const GangQuery& q, int t) const {
  if (q.gpus <= 0) return q.replicas;  // CPU-only replicas are not summarised
  if (static_cast<size_t>(q.gpus) > g_) return 0;
  const size_t k = static_cast<size_t>(q.gpus);
  const size_t tt = static_cast<size_t>(t);
  if (!q.level) {
    int64_t sum = 0;
    for (size_t m = 0; m < nm_; ++m) {
      if (q.model_bits >> m & 1) sum += PlaceableIn(&hist_[Slot(m, tt)], k);
    }
    return sum;
  }
  const auto [plane, level] = *q.level;
  int64_t best = 0;
  for (uint32_t d : domains_at_[plane.value()][static_cast<size_t>(level)]) {
    const int32_t* dh = &dom_hist_[d * stride_];
    int64_t sum = 0;
    for (size_t m = 0; m < nm_; ++m) {
      if (q.model_bits >> m & 1) sum += PlaceableIn(dh + Slot(m, tt), k);
    }
    best = std::max(best, sum);
    if (best >= q.replicas) break;  // enough: the caller only compares with replicas
  }
  return best;
}

int64_t CapacitySummary::AvailableGpus(uint64_t model_bits, int t) const {
  int64_t sum = 0;
  for (size_t m = 0; m < nm_; ++m) {
    if (model_bits >> m & 1) sum += gpus_avail_[m * nt_ + static_cast<size_t>(t)];
  }
  return sum;
}

ProbeResult CapacitySummary::Probe(const GangQuery& q, int64_t now_s) const {
  ProbeResult r;
  const int cap = capacity_index();
  r.ever = Placeable(q, cap) >= q.replicas;
  if (!r.ever) return r;
  r.capacity_gpus = AvailableGpus(q.model_bits, cap);
  r.idle_gpus = AvailableGpus(q.model_bits, 0);
  r.free_gpus = r.idle_gpus;
  for (size_t m = 0; m < nm_; ++m) {
    if (q.model_bits >> m & 1) r.free_gpus += held_free_[m];
  }
  const int64_t idle = Placeable(q, 0);
  r.idle = idle >= q.replicas;
  if (r.idle) return r;
  for (int t = 1; t < cap && thresholds_[static_cast<size_t>(t)] <= q.priority; ++t) {
    if (Placeable(q, t) < q.replicas) continue;
    r.reclaim = true;
    r.victim_level = t;
    r.reclaim_gpus = (q.replicas - idle) * std::max(1, q.gpus);
    int64_t milli = 0, start_milli = 0;
    for (size_t m = 0; m < nm_; ++m) {
      if (!(q.model_bits >> m & 1)) continue;
      milli += evict_milli_[m * nt_ + static_cast<size_t>(t)];
      start_milli += evict_start_milli_[m * nt_ + static_cast<size_t>(t)];
    }
    const double mean_start = milli > 0 ? static_cast<double>(start_milli) / static_cast<double>(milli) : 0;
    r.cost_gpu_s = static_cast<double>(r.reclaim_gpus) * std::max(0.0, static_cast<double>(now_s) - mean_start);
    break;
  }
  return r;
}

}  // namespace estuary
