#include "sched/actions/defrag.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <string>
#include <thread>
#include <tuple>

#include "common/check.h"
#include "common/rng.h"

namespace estuary {
namespace {

enum class NodeMark : uint8_t { kNone, kVacating, kVacated };

// A node of one partition's working copy.
struct WNode {
  NodeId id;
  MilliCpu cpu_free = 0;
  MemMiB mem_free = 0;
  std::array<MilliGpu, kMaxGpusPerNode> gpu{};
  int gpu_count = 0;
  MilliCpu cpu_cap = 0;
  MemMiB mem_cap = 0;
  int full_free = 0;
  int64_t gpu_free_total = 0;
  GpuModelId model;
  JobId reserved_for;
  bool held = false;
  bool ready = false;
  bool evacuate = false;   // listed in DefragOptions::evacuate
  bool candidate = false;  // may be vacated (see the header), before any move
  NodeMark mark = NodeMark::kNone;
  int32_t received_round = -1;
  int64_t domain = -1;     // objective domain (DomainId value), -1: none
  std::vector<int> tasks;  // local task indices

  bool WholeFree() const { return gpu_count > 0 && full_free == gpu_count; }
  bool Slack() const { return gpu_count > 0 && full_free != gpu_count && gpu_free_total > 0; }
  void Refresh() {
    full_free = 0;
    gpu_free_total = 0;
    for (int g = 0; g < gpu_count; ++g) {
      full_free += gpu[g] == kMilliPerGpu;
      gpu_free_total += gpu[g];
    }
  }
};

struct WTask {
  TaskId id;
  JobId job;
  const TaskRequest* req = nullptr;
  int node = -1;  // local node index
  GpuIndices gpus;
  bool movable = false;
  DomainId required;  // the domain it must stay in (invalid: anywhere)
  int64_t gpu_milli = 0;
  int32_t moved_round = -1;
};

struct LocalMove {
  int task, from, to;
  GpuIndices gpus;
  int32_t chain;
};

struct Undo {
  int task, from, to;
  GpuIndices from_gpus;
  int32_t prev_moved_round, prev_received_round;
};

// GPU indices for `r` on a node with per-GPU free `gpu` (first `count`): a shared-GPU request
// the tightest GPU that fits (lowest index on ties), otherwise the lowest-indexed GPUs with room.
bool PickGpus(const std::array<MilliGpu, kMaxGpusPerNode>& gpu, int count, const TaskRequest& r, GpuIndices* out) {
  *out = GpuIndices();
  if (!r.NeedsGpu()) return true;
  if (r.IsSharedGpu()) {
    int best = -1;
    for (int g = 0; g < count; ++g) {
      if (gpu[g] >= r.gpu_milli && (best < 0 || gpu[g] < gpu[best])) best = g;
    }
    if (best < 0) return false;
    out->Push(best);
    return true;
  }
  for (int g = 0; g < count && out->size < r.gpu_count; ++g) {
    if (gpu[g] >= r.gpu_milli) out->Push(g);
  }
  return out->size == r.gpu_count;
}

using FitKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int>;

// The rule set of one search variant (DefragOptions::variants; defrag.h, step 5): variants 0-5 are
// kFixed below; from 6 on the candidate order is seeded random and the destination rules alternate.
enum class CandOrder { kFewestTasks, kLeastGpu, kLeastCpu, kRandom };
struct Variant {
  CandOrder order;
  bool receivers_first;  // destinations that cannot be vacated themselves (pinned tasks) first
  bool cpu_first;        // best fit by CPU left before GPU milli left
  bool eject_any;        // an ejected task may ask for as much GPU milli as the task (or more)
};
Variant VariantOf(int v) {
  static constexpr Variant kFixed[] = {
      {CandOrder::kFewestTasks, false, false, false}, {CandOrder::kLeastGpu, false, false, false},
      {CandOrder::kFewestTasks, true, false, true},   {CandOrder::kLeastGpu, true, false, true},
      {CandOrder::kLeastCpu, false, true, true},      {CandOrder::kLeastCpu, true, true, true},
  };
  if (v < 6) return kFixed[v];
  return {CandOrder::kRandom, v % 2 == 0, v % 4 == 3, true};
}

// How many tasks of `shape` fit at once on free capacity (per-GPU free `gpu` of `count` GPUs, `cpu`
// and `mem`): whole-GPU shapes by wholly free GPUs, a shared-GPU shape by free milli per GPU,
// each bounded by the CPU and memory left. 0 when the shape asks for no GPU.
int64_t Copies(const TaskRequest& shape, const std::array<MilliGpu, kMaxGpusPerNode>& gpu, int count, int64_t cpu,
               int64_t mem) {
  if (!shape.NeedsGpu()) return 0;
  int64_t k = 0;
  if (shape.IsSharedGpu()) {
    for (int g = 0; g < count; ++g) k += gpu[g] / shape.gpu_milli;
  } else {
    int64_t whole = 0;
    for (int g = 0; g < count; ++g) whole += gpu[g] >= shape.gpu_milli;
    k = whole / shape.gpu_count;
  }
  if (shape.cpu_milli > 0) k = std::min<int64_t>(k, cpu / shape.cpu_milli);
  if (shape.mem_mib > 0) k = std::min<int64_t>(k, mem / shape.mem_mib);
  return k;
}

struct PartitionResult {
  std::vector<LocalMove> moves;
  std::vector<WNode> nodes;  // final working copy (ids used by the merge)
  std::vector<WTask> tasks;
  std::vector<int> vacated;
  int32_t rounds = 0;
  int64_t tried = 0;
  int64_t whole_before = 0, whole_after = 0, slack_before = 0, slack_after = 0;
  int64_t placeable_before = 0, placeable_after = 0;
  int32_t chains = 0, ejections = 0;
};

class PartitionSearch {
 public:
  PartitionSearch(const ClusterState& state, std::span<const char> locked, const DefragOptions& o,
                  const std::vector<NodeId>& ids, int variant)
      : state_(state), o_(o), shape_(o.objective == DefragOptions::Objective::kPlaceableShape),
        evacuating_(!o.evacuate.empty()),
        variant_index_(variant), variant_(VariantOf(variant)) {
    const Topology& topo = state.topology();
    const bool domains = o.objective == DefragOptions::Objective::kWholeFreeDomains;
    r_.nodes.reserve(ids.size());
    std::vector<TaskId> on;  // a node's tasks (below)
    for (NodeId id : ids) {
      const Node& n = state.node(id);
      WNode w;
      w.id = id;
      w.cpu_free = n.cpu_free;
      w.mem_free = n.mem_free;
      w.gpu = n.gpu_free;
      w.gpu_count = n.spec.gpu_count;
      w.cpu_cap = n.spec.cpu_milli;
      w.mem_cap = n.spec.mem_mib;
      w.model = n.spec.model;
      w.reserved_for = state.fits()[id.value()].reserved_for;
      w.held = n.reservation.valid();
      w.ready = n.Schedulable();
      w.evacuate = evacuating_ && std::binary_search(o.evacuate.begin(), o.evacuate.end(), id);
      if (domains) {
        const DomainId d = topo.NodeDomain(id, o.objective_plane, o.objective_level);
        w.domain = d.valid() ? static_cast<int64_t>(d.value()) : -1;
      }
      w.Refresh();
      bool all_movable = !n.tasks.empty();
      // In task id order, not the node's bind order: a driver that rebuilt its state (the
      // service's engine, rebuilt from its jobs) binds them in another order, and the plan's
      // ties and its attempt budget must not depend on it.
      on.assign(n.tasks.begin(), n.tasks.end());
      if (!std::is_sorted(on.begin(), on.end())) std::sort(on.begin(), on.end());
      for (TaskId tid : on) {
        const Task& t = state.task(tid);
        WTask wt;
        wt.id = tid;
        wt.job = t.job;
        wt.req = &t.req;
        wt.node = static_cast<int>(r_.nodes.size());
        wt.gpus = t.gpus;
        wt.gpu_milli = t.req.NeedsGpu() ? t.req.TotalGpuMilli() : 0;
        const bool is_locked = tid.value() < locked.size() && locked[tid.value()] != 0;
        wt.movable = !is_locked && !t.standby && !t.borrowed && (w.ready || w.evacuate) && !w.held;
        const TopologyConstraint& tc = state.job(t.job).spec.topology;
        if (wt.movable && tc.plane.valid() && tc.required_level >= 0) {
          wt.required = topo.NodeDomain(id, tc.plane, tc.required_level);
          if (!wt.required.valid()) wt.movable = false;
        }
        // A CPU-only task that stays (move_cpu_only_tasks false) does not keep its node from
        // being vacated.
        all_movable = all_movable && (wt.movable || (!o.move_cpu_only_tasks && !t.req.NeedsGpu()));
        w.tasks.push_back(static_cast<int>(r_.tasks.size()));
        r_.tasks.push_back(wt);
      }
      w.candidate = (evacuating_ ? w.evacuate : w.ready) && !w.held && w.gpu_count > 0 && n.lent_gpus == 0 && all_movable;
      r_.nodes.push_back(std::move(w));
    }
  }

  PartitionResult Run() {
    for (const WNode& n : r_.nodes) {
      r_.whole_before += n.WholeFree();
      r_.slack_before += n.Slack();
      placeable_ += Placeable(n);
    }
    r_.placeable_before = placeable_;
    for (int32_t round = 0; round < o_.max_rounds; ++round) {
      round_ = round;
      r_.rounds = round + 1;
      if (Round() == 0) break;
    }
    for (const WNode& n : r_.nodes) {
      r_.whole_after += n.WholeFree();
      r_.slack_after += n.Slack();
    }
    r_.placeable_after = placeable_;
    r_.chains = next_chain_;
    return std::move(r_);
  }

 private:
  // One round; returns the nodes vacated.
  int Round() {
    // Domain free GPU milli (objective domains) at the start of the round.
    dom_free_.clear();
    if (o_.objective == DefragOptions::Objective::kWholeFreeDomains) {
      for (const WNode& n : r_.nodes) {
        if (n.domain < 0) continue;
        auto it = std::lower_bound(dom_free_.begin(), dom_free_.end(), std::make_pair(n.domain, int64_t{INT64_MIN}));
        if (it == dom_free_.end() || it->first != n.domain) it = dom_free_.insert(it, {n.domain, 0});
        it->second += n.gpu_free_total;
      }
    }
    using Key = std::tuple<int64_t, int64_t, size_t, int64_t, int>;
    std::vector<Key> order;
    for (int i = 0; i < static_cast<int>(r_.nodes.size()); ++i) {
      const WNode& n = r_.nodes[i];
      if (!n.candidate || n.mark != NodeMark::kNone || n.WholeFree() || n.tasks.empty()) continue;
      // Most free domain first; nodes outside the plane after every domain. kPlaceableShape: the
      // most copies of the shape gained if the node were empty first; a node that would gain
      // none cannot raise the count (moves only take capacity from their targets): skipped.
      int64_t dk = n.domain < 0 ? INT64_MAX : -DomFree(n.domain);
      if (shape_) {
        const int64_t gain = PlaceableEmpty(n) - Placeable(n);
        if (gain <= 0) continue;
        dk = -gain;
      }
      const int64_t used = int64_t{n.gpu_count} * kMilliPerGpu - n.gpu_free_total;
      switch (variant_.order) {
        case CandOrder::kFewestTasks:  // fewest tasks, then least used GPU milli
          order.emplace_back(dk, n.domain, n.tasks.size(), used, i);
          break;
        case CandOrder::kLeastGpu:  // least used GPU milli, then fewest tasks
          order.emplace_back(dk, n.domain, static_cast<size_t>(used), static_cast<int64_t>(n.tasks.size()), i);
          break;
        case CandOrder::kLeastCpu:  // least used CPU, then least used GPU milli
          order.emplace_back(dk, n.domain, static_cast<size_t>(n.cpu_cap - n.cpu_free), used, i);
          break;
        case CandOrder::kRandom:  // a seeded random order (the key's 4th field is set below)
          order.emplace_back(dk, n.domain, 0, 0, i);
          break;
      }
    }
    if (variant_.order == CandOrder::kRandom) {
      Rng rng(o_.seed * 1000003 + static_cast<uint64_t>(variant_index_) * 7919 + static_cast<uint64_t>(round_));
      for (Key& k : order) std::get<3>(k) = static_cast<int64_t>(rng.Uniform(uint64_t{1} << 40));
    }
    std::sort(order.begin(), order.end());
    int vacated = 0;
    for (const Key& k : order) {
      const int c = std::get<4>(k);
      const WNode& n = r_.nodes[c];
      if (n.received_round == round_ || n.mark != NodeMark::kNone || n.WholeFree()) continue;
      ++r_.tried;
      if (TryVacate(c)) ++vacated;
    }
    return vacated;
  }

  int64_t DomFree(int64_t d) const {
    auto it = std::lower_bound(dom_free_.begin(), dom_free_.end(), std::make_pair(d, int64_t{INT64_MIN}));
    return it != dom_free_.end() && it->first == d ? it->second : 0;
  }

  bool TryVacate(int c) {
    WNode& n = r_.nodes[c];
    if (room_stale_) CountRoom();
    const bool counted = MayReceive(n);
    n.mark = NodeMark::kVacating;
    budget_ = DefragAction::AttemptBudget(r_.nodes.size());
    const size_t undo_mark = undo_.size(), move_mark = r_.moves.size();
    const int32_t chain_mark = next_chain_;
    std::vector<int> list;
    for (int t : n.tasks) {
      if (o_.move_cpu_only_tasks || r_.tasks[t].req->NeedsGpu()) list.push_back(t);
    }
    std::sort(list.begin(), list.end(), [&](int a, int b) {
      const WTask& x = r_.tasks[a];
      const WTask& y = r_.tasks[b];
      if (x.gpu_milli != y.gpu_milli) return x.gpu_milli > y.gpu_milli;
      return x.id.value() < y.id.value();
    });
    const int64_t placeable_mark = placeable_;
    bool ok = RoomFor(list, counted ? &n : nullptr);
    for (size_t i = 0; ok && i < list.size(); ++i) {
      chain_ = next_chain_++;
      ok = Place(list[i], o_.max_chain_depth);
    }
    // kPlaceableShape: a vacate is kept only when it raises the copies of the shape.
    if (ok && shape_ && placeable_ <= placeable_mark) ok = false;
    if (ok) {
      n.mark = NodeMark::kVacated;
      r_.vacated.push_back(c);
      undo_.clear();
      room_stale_ = true;
      return true;
    }
    Rollback(undo_mark, move_mark);
    next_chain_ = chain_mark;
    n.mark = NodeMark::kNone;
    return false;
  }

  // Whether node `n` could receive a GPU task of some job (DestOk's rules but for the task's own
  // node, job, model and required domain, and the chain; capacity aside) and has free GPU milli.
  bool MayReceive(const WNode& n) const {
    return n.gpu_count > 0 && n.gpu_free_total > 0 && n.ready && !n.evacuate && n.mark == NodeMark::kNone &&
           !(n.held && !n.reserved_for.valid()) && !(n.WholeFree() && !evacuating_);
  }
  static int ModelSlot(GpuModelId m) { return m.valid() ? static_cast<int>(m.value()) : GpuModelSet::kMaxModels; }
  // room_: the free GPU milli of the nodes that MayReceive, per GPU model, counted afresh after a
  // vacate (a vacate rolled back leaves every node as it was).
  void CountRoom() {
    room_.fill(0);
    for (const WNode& n : r_.nodes) {
      if (MayReceive(n)) room_[ModelSlot(n.model)] += n.gpu_free_total;
    }
    room_stale_ = false;
  }

  // Whether the free GPU milli of the nodes that could take one of `list`'s tasks (MayReceive, of
  // a model one of them admits; `self`, the node being vacated, left out) covers what those tasks
  // use. A vacate needs it: its moves only shift work among such nodes and add `list`'s to them,
  // and no node joins them while it runs. So a vacate failing it is refused before any search, as
  // the search would refuse it (nothing else changes: the search's state is rolled back on
  // failure). On a full cluster most candidates fail it, and each would otherwise spend the
  // whole attempt budget. O(models) with room_ counted.
  bool RoomFor(const std::vector<int>& list, const WNode* self) const {
    int64_t need = 0;
    bool any_model = false;
    uint64_t models = 0;
    for (int t : list) {
      const TaskRequest& req = *r_.tasks[t].req;
      need += r_.tasks[t].gpu_milli;
      if (!req.NeedsGpu()) continue;
      any_model = any_model || req.models.Any();
      models |= req.models.bits();
    }
    if (need == 0) return true;
    int64_t room = any_model ? room_[GpuModelSet::kMaxModels] : 0;
    for (int m = 0; m < GpuModelSet::kMaxModels; ++m) {
      if (any_model || (models >> m & 1)) room += room_[m];
    }
    if (self != nullptr && (any_model || (self->model.valid() && (models >> ModelSlot(self->model) & 1)))) {
      room -= self->gpu_free_total;
    }
    return room >= need;
  }

  // Whether task `t` may go to node `d` at all (capacity aside).
  bool DestOk(const WTask& t, int d) const {
    if (d == t.node) return false;
    const WNode& n = r_.nodes[d];
    if (!n.ready || n.evacuate || n.mark != NodeMark::kNone) return false;
    if (n.held && n.reserved_for != t.job) return false;
    if (n.WholeFree() && !evacuating_) return false;
    if (t.req->NeedsGpu() && (n.gpu_count == 0 || !t.req->models.Admits(n.model))) return false;
    if (t.required.valid() && state_.topology().NodeDomain(n.id, state_.job(t.job).spec.topology.plane,
                                                           state_.job(t.job).spec.topology.required_level) != t.required) {
      return false;
    }
    for (int x : chain_nodes_) {
      if (x == d) return false;
    }
    return true;
  }

  // `loss`: copies of the shape the destination loses (kPlaceableShape; 0 otherwise).
  FitKey Score(int d, int64_t loss, int64_t gpu_after, int64_t cpu_after, int64_t tie) const {
    const WNode& n = r_.nodes[d];
    const int64_t dk = n.domain < 0 ? 0 : DomFree(n.domain);
    const int64_t rk = variant_.receivers_first && n.candidate ? 1 : 0;
    if (variant_.cpu_first) return {dk, loss, rk, cpu_after, gpu_after, tie, d};
    return {dk, loss, rk, gpu_after, cpu_after, tie, d};
  }

  // Copies of the shape node `n` can take now (0 unless kPlaceableShape, or when the node cannot
  // take new work: not ready, held, of a model the shape does not admit).
  int64_t Placeable(const WNode& n) const { return PlaceableWith(n, n.gpu, n.cpu_free, n.mem_free); }
  int64_t PlaceableWith(const WNode& n, const std::array<MilliGpu, kMaxGpusPerNode>& gpu, int64_t cpu,
                        int64_t mem) const {
    if (!shape_ || !n.ready || n.held || n.gpu_count == 0 || !o_.shape.models.Admits(n.model)) return 0;
    return Copies(o_.shape, gpu, n.gpu_count, cpu, mem);
  }
  int64_t PlaceableEmpty(const WNode& n) const {
    std::array<MilliGpu, kMaxGpusPerNode> gpu{};
    for (int g = 0; g < n.gpu_count; ++g) gpu[g] = kMilliPerGpu;
    return PlaceableWith(n, gpu, n.cpu_cap, n.mem_cap);
  }
  // Copies node `n` loses when `req` takes `gpus` on it after `freed` (a task leaving it, or -1)
  // has gone.
  int64_t Loss(const WNode& n, const TaskRequest& req, const GpuIndices& gpus, int freed) const {
    if (!shape_) return 0;
    std::array<MilliGpu, kMaxGpusPerNode> gpu = n.gpu;
    int64_t cpu = n.cpu_free, mem = n.mem_free;
    if (freed >= 0) {
      const WTask& e = r_.tasks[freed];
      if (e.req->NeedsGpu()) {
        for (uint8_t x : e.gpus) gpu[x] += e.req->gpu_milli;
      }
      cpu += e.req->cpu_milli;
      mem += e.req->mem_mib;
    }
    const int64_t before = Placeable(n);
    if (req.NeedsGpu()) {
      for (uint8_t x : gpus) gpu[x] -= req.gpu_milli;
    }
    return before - PlaceableWith(n, gpu, cpu - req.cpu_milli, mem - req.mem_mib);
  }

  bool Place(int ti, int depth) {
    const WTask& t = r_.tasks[ti];
    const TaskRequest& req = *t.req;
    // a. Direct.
    int best = -1;
    FitKey best_key{};
    GpuIndices best_gpus, g;
    for (int d = 0; d < static_cast<int>(r_.nodes.size()); ++d) {
      if (--budget_ < 0) return false;
      if (!DestOk(t, d)) continue;
      const WNode& n = r_.nodes[d];
      if (req.cpu_milli > n.cpu_free || req.mem_mib > n.mem_free) continue;
      if (!PickGpus(n.gpu, n.gpu_count, req, &g)) continue;
      const FitKey k = Score(d, Loss(n, req, g, -1), n.gpu_free_total - t.gpu_milli, n.cpu_free - req.cpu_milli, 0);
      if (best < 0 || k < best_key) {
        best = d;
        best_key = k;
        best_gpus = g;
      }
    }
    if (best >= 0) {
      Apply(ti, best, best_gpus);
      return true;
    }
    if (depth <= 0 || t.gpu_milli == 0) return false;
    // b. Ejection: (d, e) pairs where t fits on d once e has left.
    struct Pair {
      FitKey key;
      int d, e;
    };
    std::vector<Pair> pairs;
    for (int d = 0; d < static_cast<int>(r_.nodes.size()); ++d) {
      if (!DestOk(t, d)) continue;
      const WNode& n = r_.nodes[d];
      // A task asking for as much GPU milli as t (or more) may leave only where t's GPUs already
      // fit — where CPU or memory is what is missing (eject_any variants).
      const bool gpus_fit = variant_.eject_any && PickGpus(n.gpu, n.gpu_count, req, &g);
      for (int e : n.tasks) {
        if (--budget_ < 0) return false;
        const WTask& et = r_.tasks[e];
        if (!et.movable || et.moved_round == round_ || (et.gpu_milli >= t.gpu_milli && !gpus_fit)) continue;
        if (req.cpu_milli > n.cpu_free + et.req->cpu_milli || req.mem_mib > n.mem_free + et.req->mem_mib) continue;
        std::array<MilliGpu, kMaxGpusPerNode> gpu = n.gpu;
        if (et.req->NeedsGpu()) {
          for (uint8_t x : et.gpus) gpu[x] += et.req->gpu_milli;
        }
        if (!PickGpus(gpu, n.gpu_count, req, &g)) continue;
        pairs.push_back({Score(d, Loss(n, req, g, e), n.gpu_free_total + et.gpu_milli - t.gpu_milli,
                               n.cpu_free + et.req->cpu_milli - req.cpu_milli, et.gpu_milli),
                         d, e});
      }
    }
    const size_t keep = std::min<size_t>(pairs.size(), DefragAction::kEjectBranch);
    std::partial_sort(pairs.begin(), pairs.begin() + static_cast<ptrdiff_t>(keep), pairs.end(),
                      [](const Pair& a, const Pair& b) { return std::tie(a.key, a.e) < std::tie(b.key, b.e); });
    for (size_t i = 0; i < keep; ++i) {
      const int d = pairs[i].d, e = pairs[i].e;
      const size_t undo_mark = undo_.size(), move_mark = r_.moves.size();
      chain_nodes_.push_back(d);
      const bool ok = Place(e, depth - 1);
      chain_nodes_.pop_back();
      if (ok) {
        const WNode& n = r_.nodes[d];
        const bool fits = PickGpus(n.gpu, n.gpu_count, req, &g) && req.cpu_milli <= n.cpu_free &&
                          req.mem_mib <= n.mem_free;
        ESTUARY_CHECK(fits);
        Apply(ti, d, g);
        return true;
      }
      Rollback(undo_mark, move_mark);
      if (budget_ < 0) return false;
    }
    return false;
  }

  void Apply(int ti, int to, const GpuIndices& gpus) {
    WTask& t = r_.tasks[ti];
    undo_.push_back({ti, t.node, to, t.gpus, t.moved_round, r_.nodes[to].received_round});
    Move(t, ti, to, gpus);
    t.moved_round = round_;
    r_.nodes[to].received_round = round_;
    r_.moves.push_back({ti, undo_.back().from, to, gpus, chain_});
  }

  // Moves t's resources from its node to `to` on `gpus` (no bookkeeping).
  void Move(WTask& t, int ti, int to, const GpuIndices& gpus) {
    WNode& a = r_.nodes[t.node];
    WNode& b = r_.nodes[to];
    const TaskRequest& req = *t.req;
    if (shape_) placeable_ -= Placeable(a) + Placeable(b);
    a.cpu_free += req.cpu_milli;
    a.mem_free += req.mem_mib;
    b.cpu_free -= req.cpu_milli;
    b.mem_free -= req.mem_mib;
    if (req.NeedsGpu()) {
      for (uint8_t x : t.gpus) a.gpu[x] += req.gpu_milli;
      for (uint8_t x : gpus) b.gpu[x] -= req.gpu_milli;
    }
    a.Refresh();
    b.Refresh();
    if (shape_) placeable_ += Placeable(a) + Placeable(b);
    a.tasks.erase(std::find(a.tasks.begin(), a.tasks.end(), ti));
    b.tasks.push_back(ti);
    t.node = to;
    t.gpus = gpus;
  }

  void Rollback(size_t undo_mark, size_t move_mark) {
    while (undo_.size() > undo_mark) {
      const Undo u = undo_.back();
      undo_.pop_back();
      WTask& t = r_.tasks[u.task];
      Move(t, u.task, u.from, u.from_gpus);
      t.moved_round = u.prev_moved_round;
      r_.nodes[u.to].received_round = u.prev_received_round;
    }
    r_.moves.resize(move_mark);
  }

  const ClusterState& state_;
  const DefragOptions& o_;
  const bool shape_;        // objective kPlaceableShape
  const bool evacuating_;   // DefragOptions::evacuate is not empty
  const int variant_index_;  // see DefragOptions::variants
  const Variant variant_;
  int64_t placeable_ = 0;   // copies of the shape over the partition's nodes, kept current
  PartitionResult r_;
  std::vector<Undo> undo_;
  std::vector<int> chain_nodes_;
  std::vector<std::pair<int64_t, int64_t>> dom_free_;  // (domain, free GPU milli), by domain
  int32_t round_ = 0;
  int32_t chain_ = -1;
  int32_t next_chain_ = 0;
  int64_t budget_ = 0;
  std::array<int64_t, GpuModelSet::kMaxModels + 1> room_{};  // see CountRoom; the last: no model
  bool room_stale_ = true;
};

std::vector<std::vector<NodeId>> Partitions(const ClusterState& state, const DefragOptions& o) {
  std::vector<std::vector<NodeId>> parts;
  const uint32_t n = static_cast<uint32_t>(state.num_nodes());
  if (o.align_plane.valid() && o.evacuate.empty()) {
    const Topology& topo = state.topology();
    std::vector<NodeId> outside;
    for (DomainId d : topo.DomainsAt(o.align_plane, o.align_level)) {
      std::vector<NodeId> p = topo.domain(d).nodes;
      if (p.empty()) continue;
      std::sort(p.begin(), p.end());
      parts.push_back(std::move(p));
    }
    for (uint32_t i = 0; i < n; ++i) {
      if (!topo.NodeDomain(NodeId(i), o.align_plane, o.align_level).valid()) outside.push_back(NodeId(i));
    }
    if (!outside.empty()) parts.push_back(std::move(outside));
    return parts;
  }
  std::vector<NodeId> all(n);
  for (uint32_t i = 0; i < n; ++i) all[i] = NodeId(i);
  if (o.partition_nodes == 0 || static_cast<int64_t>(n) <= o.partition_nodes || !o.evacuate.empty()) {
    if (n > 0) parts.push_back(std::move(all));
    return parts;
  }
  Rng rng(o.seed);
  rng.Shuffle(all);
  const size_t size = static_cast<size_t>(o.partition_nodes);
  for (size_t i = 0; i < all.size(); i += size) {
    std::vector<NodeId> p(all.begin() + static_cast<ptrdiff_t>(i),
                          all.begin() + static_cast<ptrdiff_t>(std::min(all.size(), i + size)));
    if (p.size() * 2 < size && !parts.empty()) {
      parts.back().insert(parts.back().end(), p.begin(), p.end());
    } else {
      parts.push_back(std::move(p));
    }
  }
  for (auto& p : parts) std::sort(p.begin(), p.end());
  return parts;
}

}  // namespace

Status DefragAction::Validate(const ClusterState& state, const DefragOptions& o) {
  if (o.partition_nodes < 0 || o.partition_nodes == 1) {
    return InvalidArgument("partition_nodes: must be 0 (one partition) or at least 2, got " +
                           std::to_string(o.partition_nodes));
  }
  if (o.max_chain_depth < 0) return InvalidArgument("max_chain_depth: must be >= 0");
  if (o.max_rounds < 0) return InvalidArgument("max_rounds: must be >= 0");
  if (o.threads < 1) return InvalidArgument("threads: must be >= 1");
  if (o.variants < 1 || o.variants > 64) return InvalidArgument("variants: must be in 1..64");
  if (o.small_partition_variants < 0 || o.small_partition_variants > 64) {
    return InvalidArgument("small_partition_variants: must be in 0..64");
  }
  if (o.small_partition_nodes < 0) return InvalidArgument("small_partition_nodes: must be >= 0");
  const Topology& topo = state.topology();
  auto level_ok = [&](PlaneId p, int level) {
    return p.valid() && p.value() < topo.planes().size() && level >= 0 &&
           level < static_cast<int>(topo.plane(p).levels.size());
  };
  if (o.align_plane.valid() && !level_ok(o.align_plane, o.align_level)) {
    return InvalidArgument("align_level: not a level of align_plane");
  }
  if (o.objective == DefragOptions::Objective::kWholeFreeDomains && !level_ok(o.objective_plane, o.objective_level)) {
    return InvalidArgument("objective_level: kWholeFreeDomains needs a valid objective_plane and level");
  }
  if (o.objective == DefragOptions::Objective::kPlaceableShape) {
    const TaskRequest& r = o.shape;
    if (r.gpu_count < 1 || r.gpu_count > kMaxGpusPerNode || r.gpu_milli < 1 || r.gpu_milli > kMilliPerGpu ||
        (r.gpu_count > 1 && r.gpu_milli != kMilliPerGpu)) {
      return InvalidArgument("shape: kPlaceableShape needs 1.." + std::to_string(kMaxGpusPerNode) +
                             " GPUs of 1..1000 milli (1000 with several GPUs)");
    }
    if (r.cpu_milli < 0 || r.mem_mib < 0) return InvalidArgument("shape: negative CPU or memory");
  }
  for (size_t i = 0; i < o.evacuate.size(); ++i) {
    if (o.evacuate[i].value() >= state.num_nodes()) return InvalidArgument("evacuate: no node " + std::to_string(o.evacuate[i].value()));
    if (i > 0 && !(o.evacuate[i - 1] < o.evacuate[i])) return InvalidArgument("evacuate: node ids must ascend, without repeats");
  }
  if (!o.evacuate.empty() && o.objective != DefragOptions::Objective::kWholeFreeNodes) {
    return InvalidArgument("evacuate: only with the kWholeFreeNodes objective");
  }
  return Status::Ok();
}

DefragPlan DefragAction::Plan(const ClusterState& state, std::span<const char> locked, const DefragOptions& options) {
  ESTUARY_CHECK(Validate(state, options).ok());
  DefragPlan plan;
  const std::vector<std::vector<NodeId>> parts = Partitions(state, options);
  plan.partitions = static_cast<int32_t>(parts.size());
  std::vector<PartitionResult> results(parts.size());
  std::atomic<size_t> next{0};
  // Variants: kWholeFreeDomains keeps its own order (variant 0 only).
  const int variants = options.objective == DefragOptions::Objective::kWholeFreeDomains ? 1 : options.variants;
  const bool shape = options.objective == DefragOptions::Objective::kPlaceableShape;
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < parts.size(); i = next.fetch_add(1)) {
      int64_t tried = 0;
      const bool small = variants > 1 && parts[i].size() <= static_cast<size_t>(std::max(0, options.small_partition_nodes));
      const int n = small ? std::max<int>(variants, options.small_partition_variants) : variants;
      for (int v = 0; v < n; ++v) {
        PartitionResult r = PartitionSearch(state, locked, options, parts[i], v).Run();
        tried += r.tried;
        // Better: more whole free nodes (kPlaceableShape: more copies; evacuation: more listed
        // nodes vacated), then fewer moves; ties keep the earlier variant.
        const auto gain = [&](const PartitionResult& x) {
          return !options.evacuate.empty() ? static_cast<int64_t>(x.vacated.size())
                 : shape                   ? x.placeable_after
                                           : x.whole_after;
        };
        if (v == 0 || gain(r) > gain(results[i]) ||
            (gain(r) == gain(results[i]) && r.moves.size() < results[i].moves.size())) {
          results[i] = std::move(r);
        }
      }
      results[i].tried = tried;
    }
  };
  const int threads = std::min<int>(options.threads, static_cast<int>(std::max<size_t>(1, parts.size())));
  if (threads <= 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) pool.emplace_back(work);
    for (std::thread& t : pool) t.join();
  }

  for (const Node& n : state.nodes()) {
    plan.whole_free_before += n.spec.gpu_count > 0 && n.full_free_gpus == n.spec.gpu_count;
    plan.slack_before += n.spec.gpu_count > 0 && n.full_free_gpus != n.spec.gpu_count && n.gpu_free_total > 0;
  }
  plan.whole_free_after = plan.whole_free_before;
  plan.slack_after = plan.slack_before;
  // Merge in partition order; `after` from the earlier moves out of each target and of each task.
  std::vector<std::vector<size_t>> out_of(state.num_nodes());
  std::vector<int64_t> last_move(state.tasks().size(), -1);
  int32_t chain_base = 0;
  for (const PartitionResult& r : results) {
    for (const LocalMove& m : r.moves) {
      DefragMove dm;
      dm.task = r.tasks[m.task].id;
      dm.from = r.nodes[m.from].id;
      dm.to = r.nodes[m.to].id;
      dm.gpus = m.gpus;
      dm.chain = chain_base + m.chain;
      dm.after = out_of[dm.to.value()];
      if (last_move[dm.task.value()] >= 0) dm.after.push_back(static_cast<size_t>(last_move[dm.task.value()]));
      std::sort(dm.after.begin(), dm.after.end());
      dm.after.erase(std::unique(dm.after.begin(), dm.after.end()), dm.after.end());
      const size_t idx = plan.moves.size();
      out_of[dm.from.value()].push_back(idx);
      last_move[dm.task.value()] = static_cast<int64_t>(idx);
      if (idx > 0 && plan.moves.back().chain == dm.chain) ++plan.ejections;
      plan.moves.push_back(std::move(dm));
    }
    chain_base += r.chains;
    for (int v : r.vacated) plan.vacated.push_back(r.nodes[v].id);
    plan.whole_free_after += r.whole_after - r.whole_before;
    plan.placeable_before += r.placeable_before;
    plan.placeable_after += r.placeable_after;
    plan.slack_after += r.slack_after - r.slack_before;
    plan.rounds = std::max(plan.rounds, r.rounds);
    plan.nodes_tried += r.tried;
  }
  plan.chains = chain_base;
  std::sort(plan.vacated.begin(), plan.vacated.end());
  return plan;
}

}  // namespace estuary
