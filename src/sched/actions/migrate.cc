#include "sched/actions/migrate.h"

#include <algorithm>
#include <array>
#include <climits>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "common/check.h"

namespace estuary {
namespace {

// Free amounts of one node in a hypothetical state.
struct Room {
  MilliCpu cpu = 0;
  MemMiB mem = 0;
  std::array<MilliGpu, kMaxGpusPerNode> gpu{};
  int gpu_count = 0;

  int64_t GpuTotal() const {
    int64_t s = 0;
    for (int g = 0; g < gpu_count; ++g) s += gpu[g];
    return s;
  }
};

Room RoomOf(const Node& n) {
  Room r;
  r.cpu = n.cpu_free;
  r.mem = n.mem_free;
  r.gpu = n.gpu_free;
  r.gpu_count = n.spec.gpu_count;
  return r;
}

// GPU indices for `r` in `room` (CPU and memory not checked): a shared-GPU request the tightest GPU
// that fits (lowest index on ties), otherwise the lowest-indexed GPUs with room.
bool PickGpus(const Room& room, const TaskRequest& r, GpuIndices* out) {
  *out = GpuIndices();
  if (!r.NeedsGpu()) return true;
  if (r.IsSharedGpu()) {
    int best = -1;
    for (int g = 0; g < room.gpu_count; ++g) {
      if (room.gpu[g] >= r.gpu_milli && (best < 0 || room.gpu[g] < room.gpu[best])) best = g;
    }
    if (best < 0) return false;
    out->Push(best);
    return true;
  }
  for (int g = 0; g < room.gpu_count && out->size < r.gpu_count; ++g) {
    if (room.gpu[g] >= r.gpu_milli) out->Push(g);
  }
  return out->size == r.gpu_count;
}

bool Fits(const Room& room, const TaskRequest& r, GpuIndices* out) {
  return room.cpu >= r.cpu_milli && room.mem >= r.mem_mib && PickGpus(room, r, out);
}

void Take(Room& room, const TaskRequest& r, const GpuIndices& gpus) {
  room.cpu -= r.cpu_milli;
  room.mem -= r.mem_mib;
  for (uint8_t g : gpus) room.gpu[g] -= r.gpu_milli;
}

void Give(Room& room, const TaskRequest& r, const GpuIndices& gpus) {
  room.cpu += r.cpu_milli;
  room.mem += r.mem_mib;
  for (uint8_t g : gpus) room.gpu[g] += r.gpu_milli;
}

// Best-fit order of targets (smaller is better): milli left on the chosen GPUs, GPU milli left on
// the node, CPU left on the node, node id. A CPU-only task: (0, node's free GPU milli, CPU left, id).
using TargetKey = std::tuple<int64_t, int64_t, int64_t, uint32_t>;

TargetKey KeyOf(const Room& room, const TaskRequest& r, const GpuIndices& gpus, NodeId id) {
  int64_t left_on_gpus = 0;
  for (uint8_t g : gpus) left_on_gpus += room.gpu[g] - r.gpu_milli;
  return {left_on_gpus, room.GpuTotal() - r.TotalGpuMilli(), room.cpu - r.cpu_milli, id.value()};
}

bool Movable(const ClusterState& state, const Task& t) {
  return t.state == TaskState::kBound && !t.standby && !t.borrowed &&
         state.job(t.job).spec.topology.required_level < 0;
}

// Whether `n` may take `t` at all (capacity aside).
bool TargetEligible(const ClusterState& state, const Node& n, const Task& t) {
  if (!n.Schedulable()) return false;
  if (n.reservation.valid() && state.reservation(n.reservation).owner != t.job) return false;
  return !t.req.NeedsGpu() || t.req.models.Admits(n.spec.model);
}

struct Candidate {
  TargetKey key;
  NodeId node;
  GpuIndices gpus;
};

// An ejection: `evicted` leaves `node` to make room there for another task.
struct Ejection {
  std::tuple<int64_t, int64_t, int64_t, uint32_t, uint32_t> key;
  NodeId node;
  TaskId evicted;
};

// One subset of a host's movable tasks (indices into the host's sorted list, ascending).
struct Subset {
  int64_t cost = 0;
  int size = 0;
  std::array<uint16_t, MigrateToFit::kMaxMoves> idx{};
  auto Key() const { return std::tie(cost, size, idx); }
};
struct SubsetAfter {  // min-heap order
  bool operator()(const Subset& a, const Subset& b) const { return b.Key() < a.Key(); }
};

class Planner {
 public:
  Planner(const ClusterState& state, TaskId arriving, const MigrateOptions& o)
      : state_(state), arriving_(state.task(arriving)), o_(o), cache_k_(2 * static_cast<size_t>(o.max_moves) + 3) {}

  MigrationPlan Run() {
    struct Host {
      int64_t bound;
      NodeId id;
    };
    std::vector<Host> hosts;
    for (const Node& n : state_.nodes()) {
      int64_t bound = 0;
      if (HostBound(n, &bound)) hosts.push_back({bound, n.id});
    }
    std::sort(hosts.begin(), hosts.end(),
              [](const Host& a, const Host& b) { return std::tie(a.bound, a.id) < std::tie(b.bound, b.id); });
    for (const Host& h : hosts) {
      if (plan_.feasible && h.bound > plan_.moved_gpu_milli) break;
      if (plan_.hosts_searched >= o_.max_hosts) break;
      ++plan_.hosts_searched;
      SearchHost(state_.node(h.id));
    }
    return std::move(plan_);
  }

 private:
  // Fewest of `amounts` (largest first) that sum to at least `need` (need <= 0: none).
  static int FewestToCover(std::vector<int64_t>& amounts, int64_t need) {
    if (need <= 0) return 0;
    std::sort(amounts.begin(), amounts.end(), std::greater<>());
    int k = 0;
    for (int64_t a : amounts) {
      need -= a;
      ++k;
      if (need <= 0) return k;
    }
    return INT32_MAX;
  }

  // Whether `n` may host the arriving task once at most max_moves of its movable tasks leave, by
  // two lower bounds: the GPU milli a plan must move off it (*bound) and the number of tasks it
  // must move (the host is dropped when that exceeds max_moves).
  bool HostBound(const Node& n, int64_t* bound) {
    const TaskRequest& r = arriving_.req;
    if (!n.Schedulable() || n.lent_gpus != 0) return false;
    if (n.reservation.valid() && state_.reservation(n.reservation).owner != arriving_.job) return false;
    if (r.NeedsGpu() && (!r.models.Admits(n.spec.model) || n.spec.gpu_count < r.gpu_count)) return false;
    cpus_.clear();
    mems_.clear();
    std::array<int64_t, kMaxGpusPerNode> avail{};
    std::array<std::vector<int64_t>, kMaxGpusPerNode>& on_gpu = on_gpu_;
    for (int g = 0; g < n.spec.gpu_count; ++g) {
      avail[g] = n.gpu_free[g];
      on_gpu[g].clear();
    }
    for (TaskId id : n.tasks) {
      const Task& t = state_.task(id);
      if (!Movable(state_, t)) continue;
      cpus_.push_back(t.req.cpu_milli);
      mems_.push_back(t.req.mem_mib);
      for (uint8_t g : t.gpus) {
        avail[g] += t.req.gpu_milli;
        on_gpu[g].push_back(t.req.gpu_milli);
      }
    }
    int moves = std::max(FewestToCover(cpus_, r.cpu_milli - n.cpu_free), FewestToCover(mems_, r.mem_mib - n.mem_free));
    if (moves > o_.max_moves) return false;
    *bound = 0;
    if (!r.NeedsGpu()) return true;
    // Per GPU that could hold the request: (milli short, tasks to move off it).
    std::array<std::pair<int64_t, int>, kMaxGpusPerNode> need{};
    int k = 0;
    for (int g = 0; g < n.spec.gpu_count; ++g) {
      if (avail[g] < r.gpu_milli) continue;
      const int64_t short_milli = std::max<int64_t>(0, r.gpu_milli - n.gpu_free[g]);
      need[k++] = {short_milli, FewestToCover(on_gpu[g], short_milli)};
    }
    if (k < r.gpu_count) return false;
    // Milli bound: the gpu_count least shortfalls. Move bound: every chosen GPU must lose its own
    // tasks, so at least the gpu_count-th least per-GPU count.
    std::array<int64_t, kMaxGpusPerNode> milli{};
    std::array<int, kMaxGpusPerNode> count{};
    for (int i = 0; i < k; ++i) {
      milli[i] = need[i].first;
      count[i] = need[i].second;
    }
    std::sort(milli.begin(), milli.begin() + k);
    std::sort(count.begin(), count.begin() + k);
    for (int i = 0; i < r.gpu_count; ++i) *bound += milli[i];
    moves = std::max(moves, count[r.gpu_count - 1]);
    return moves <= o_.max_moves;
  }

  void SearchHost(const Node& host) {
    // Only tasks whose leaving can help: with CPU and memory already sufficient, those on a GPU
    // that could hold the request but does not yet (a plan with any other task is dominated).
    const TaskRequest& r = arriving_.req;
    const bool resources_short = host.cpu_free < r.cpu_milli || host.mem_free < r.mem_mib;
    uint32_t helpful = 0;  // bit g: GPU g could hold the request once emptied but cannot now
    if (!resources_short && r.NeedsGpu()) {
      std::array<int64_t, kMaxGpusPerNode> avail{};
      for (int g = 0; g < host.spec.gpu_count; ++g) avail[g] = host.gpu_free[g];
      for (TaskId id : host.tasks) {
        const Task& t = state_.task(id);
        if (!Movable(state_, t)) continue;
        for (uint8_t g : t.gpus) avail[g] += t.req.gpu_milli;
      }
      for (int g = 0; g < host.spec.gpu_count; ++g) {
        if (avail[g] >= r.gpu_milli && host.gpu_free[g] < r.gpu_milli) helpful |= 1u << g;
      }
    }
    std::vector<TaskId> movable;
    for (TaskId id : host.tasks) {
      const Task& t = state_.task(id);
      if (!Movable(state_, t)) continue;
      bool helps = resources_short;
      for (uint8_t g : t.gpus) helps = helps || (helpful >> g & 1);
      if (helps) movable.push_back(id);
    }
    std::sort(movable.begin(), movable.end(), [&](TaskId a, TaskId b) {
      return std::make_pair(state_.task(a).req.TotalGpuMilli(), a.value()) <
             std::make_pair(state_.task(b).req.TotalGpuMilli(), b.value());
    });
    const int n = static_cast<int>(std::min<size_t>(movable.size(), UINT16_MAX));
    auto cost = [&](int i) { return state_.task(movable[i]).req.TotalGpuMilli(); };
    std::priority_queue<Subset, std::vector<Subset>, SubsetAfter> heap;
    heap.push(Subset());
    const Room base = RoomOf(host);
    int32_t examined = 0;
    while (!heap.empty() && examined < o_.subset_budget) {
      const Subset s = heap.top();
      heap.pop();
      ++examined;
      ++plan_.subsets_examined;
      // Every subset still to come is no better than this one in (cost, moves).
      if (plan_.feasible && std::make_tuple(s.cost, s.size, host.id.value()) >=
                                std::make_tuple(plan_.moved_gpu_milli, static_cast<int>(plan_.moves.size()),
                                                plan_.node.value())) {
        return;
      }
      if (Try(host, base, movable, s)) return;  // the first fit is this host's best
      // Children: add the next task; replace the last one by the next.
      const int last = s.size == 0 ? -1 : s.idx[s.size - 1];
      if (last + 1 < n && s.size < o_.max_moves) {
        Subset c = s;
        c.idx[c.size++] = static_cast<uint16_t>(last + 1);
        c.cost += cost(last + 1);
        heap.push(c);
      }
      if (s.size > 0 && last + 1 < n) {
        Subset c = s;
        c.idx[c.size - 1] = static_cast<uint16_t>(last + 1);
        c.cost += cost(last + 1) - cost(last);
        heap.push(c);
      }
    }
  }

  // Tries subset `s` of `movable` on `host`; records the plan and returns true when it works.
  bool Try(const Node& host, const Room& base, const std::vector<TaskId>& movable, const Subset& s) {
    Room room = base;
    std::vector<TaskId> moved;
    for (int i = 0; i < s.size; ++i) {
      const Task& t = state_.task(movable[s.idx[i]]);
      Give(room, t.req, t.gpus);
      moved.push_back(t.id);
    }
    GpuIndices gpus;
    if (!Fits(room, arriving_.req, &gpus)) return false;
    std::sort(moved.begin(), moved.end(), [&](TaskId a, TaskId b) {
      const int64_t ga = state_.task(a).req.TotalGpuMilli(), gb = state_.task(b).req.TotalGpuMilli();
      return ga != gb ? ga > gb : a.value() < b.value();
    });
    overlay_.clear();
    moved_ = moved;  // the host's leavers: never ejected again
    host_ = host.id;
    std::vector<MigrationMove> moves;
    int extra = o_.max_moves - s.size;  // moves left for ejections
    for (TaskId id : moved) {
      if (!Relocate(state_.task(id), host.id, o_.max_chain_depth, &extra, &moves)) return false;
    }
    int64_t cost = s.cost;
    int32_t ejections = 0;
    for (const MigrationMove& m : moves) {
      if (!m.ejection) continue;
      ++ejections;
      cost += state_.task(m.task).req.TotalGpuMilli();
    }
    // Keep the better of this plan and the best so far: (moved GPU milli, moves, host id).
    if (plan_.feasible && std::make_tuple(cost, moves.size(), host.id.value()) >=
                              std::make_tuple(plan_.moved_gpu_milli, plan_.moves.size(), plan_.node.value())) {
      return true;
    }
    plan_.feasible = true;
    plan_.moves = std::move(moves);
    plan_.node = host.id;
    plan_.gpus = gpus;
    plan_.moved_gpu_milli = cost;
    plan_.ejections = ejections;
    return true;
  }

  // Moves `t` (bound on `from` in the plan's current state) to another node, appending the moves
  // to *out and updating overlay_: directly to the best-fit target with room, or else (depth >= 1
  // and *extra >= 1) to a node d after ejecting one task e from d, e relocated first with depth - 1
  // (e bound elsewhere while d still holds it; then t bound on d while `from` still holds t).
  // Returns false with overlay_, moved_, *extra and *out unchanged when neither works.
  bool Relocate(const Task& t, NodeId from, int depth, int* extra, std::vector<MigrationMove>* out) {
    if (std::optional<Candidate> c = Target(t, from)) {
      Take(*OverlayRoom(c->node), t.req, c->gpus);
      out->push_back({t.id, from, c->node, c->gpus, false});
      return true;
    }
    if (depth < 1 || *extra < 1) return false;
    const std::vector<Ejection>& pairs = EjectionPairs(t, from);
    for (const Ejection& p : pairs) {
      if (p.node == host_ || p.node == from || IsMoved(p.evicted)) continue;
      const Task& e = state_.task(p.evicted);
      Room r = *OverlayRoom(p.node);
      Give(r, e.req, e.gpus);
      GpuIndices g;
      if (!Fits(r, t.req, &g)) continue;
      // Snapshot for rollback.
      const auto overlay = overlay_;
      const size_t moved_size = moved_.size(), out_size = out->size();
      const int extra_before = *extra;
      moved_.push_back(e.id);
      --*extra;
      if (Relocate(e, p.node, depth - 1, extra, out)) {
        out->back().ejection = true;  // e's own move (a deeper chain's moves precede it)
        Room* d = OverlayRoom(p.node);
        Give(*d, e.req, e.gpus);
        GpuIndices g2;
        // A deeper chain may have moved a task onto d meanwhile; then this pair does not work.
        if (Fits(*d, t.req, &g2)) {
          Take(*d, t.req, g2);
          out->push_back({t.id, from, p.node, g2, false});
          return true;
        }
      }
      overlay_ = overlay;
      moved_.resize(moved_size);
      out->resize(out_size);
      *extra = extra_before;
    }
    return false;
  }

  bool IsMoved(TaskId id) const { return std::find(moved_.begin(), moved_.end(), id) != moved_.end(); }

  Room* OverlayRoom(NodeId id) {
    for (auto& [n, r] : overlay_) {
      if (n == id) return &r;
    }
    overlay_.emplace_back(id, RoomOf(state_.node(id)));
    return &overlay_.back().second;
  }
  bool InOverlay(NodeId id) const {
    for (const auto& [n, r] : overlay_) {
      if (n == id) return true;
    }
    return false;
  }

  // The best target for `t` (bound on `own`) given the plan's earlier moves (overlay_): never
  // `own` or the plan's host.
  std::optional<Candidate> Target(const Task& t, NodeId own) {
    const std::vector<Candidate>& cached = BaseTargets(t, own);
    std::optional<Candidate> best;
    bool exhausted = cached.size() == cache_k_;
    for (const Candidate& c : cached) {
      if (c.node != host_ && !InOverlay(c.node)) {
        best = c;
        exhausted = false;
        break;
      }
    }
    if (exhausted) best = ScanTarget(t, own);  // every cached target is taken: look further
    for (const auto& [id, room] : overlay_) {
      if (id == host_ || id == own || !TargetEligible(state_, state_.node(id), t)) continue;
      GpuIndices g;
      if (!Fits(room, t.req, &g)) continue;
      Candidate c{KeyOf(room, t.req, g, id), id, g};
      if (!best || c.key < best->key) best = c;
    }
    return best;
  }

  // Whether `n` may take `t` in the starting state, and where on its GPUs.
  std::optional<Candidate> BaseCandidate(const Task& t, const Node& n) const {
    if (!TargetEligible(state_, n, t)) return std::nullopt;
    const NodeFit& f = state_.fits()[n.id.value()];
    if (f.cpu_free < t.req.cpu_milli || f.mem_free < t.req.mem_mib) return std::nullopt;
    if (t.req.NeedsGpu() && f.max_gpu_free < t.req.gpu_milli) return std::nullopt;
    const Room room = RoomOf(n);
    GpuIndices g;
    if (!PickGpus(room, t.req, &g)) return std::nullopt;
    return Candidate{KeyOf(room, t.req, g, n.id), n.id, g};
  }

  // The best starting-state target outside own, the host and the overlay (a full scan).
  std::optional<Candidate> ScanTarget(const Task& t, NodeId own) const {
    std::optional<Candidate> best;
    for (const Node& n : state_.nodes()) {
      if (n.id == own || n.id == host_ || InOverlay(n.id)) continue;
      std::optional<Candidate> c = BaseCandidate(t, n);
      if (c && (!best || c->key < best->key)) best = c;
    }
    return best;
  }

  // The best cache_k_ targets for `t` in the starting state, excluding `own` (its own node).
  const std::vector<Candidate>& BaseTargets(const Task& t, NodeId own) {
    auto it = cache_.find(t.id.value());
    if (it != cache_.end()) return it->second;
    std::vector<Candidate> top;
    auto worse = [](const Candidate& a, const Candidate& b) { return a.key < b.key; };
    for (const Node& n : state_.nodes()) {
      if (n.id == own) continue;
      std::optional<Candidate> c = BaseCandidate(t, n);
      if (!c) continue;
      if (top.size() == cache_k_ && !(c->key < top.front().key)) continue;
      top.push_back(*c);
      std::push_heap(top.begin(), top.end(), worse);
      if (top.size() > cache_k_) {
        std::pop_heap(top.begin(), top.end(), worse);
        top.pop_back();
      }
    }
    std::sort(top.begin(), top.end(), worse);
    return cache_.emplace(t.id.value(), std::move(top)).first->second;
  }

  // The best options.ejection_pairs pairs (d, e) for `t` (bound on `own`) in the starting state:
  // a node d != own that `t` may go to, and a movable task e on d whose leaving makes room for
  // `t` there. Order: e's GPU milli, e's CPU, e's memory, d, e (cheapest to re-place first:
  // CPU-only tasks fit almost anywhere).
  const std::vector<Ejection>& EjectionPairs(const Task& t, NodeId own) {
    auto it = eject_cache_.find(t.id.value());
    if (it != eject_cache_.end()) return it->second;
    std::vector<Ejection> top;
    const size_t k = static_cast<size_t>(o_.ejection_pairs);
    auto worse = [](const Ejection& a, const Ejection& b) { return a.key < b.key; };
    for (const Node& n : state_.nodes()) {
      if (n.id == own || !TargetEligible(state_, n, t)) continue;
      const NodeFit& f = state_.fits()[n.id.value()];
      if (t.req.NeedsGpu() && n.spec.gpu_count < t.req.gpu_count) continue;
      // Already fits: a direct target, not an ejection.
      if (f.cpu_free >= t.req.cpu_milli && f.mem_free >= t.req.mem_mib &&
          (!t.req.NeedsGpu() || f.max_gpu_free >= t.req.gpu_milli)) {
        GpuIndices g;
        if (PickGpus(RoomOf(n), t.req, &g)) continue;
      }
      const Room base = RoomOf(n);
      for (TaskId eid : n.tasks) {
        const Task& e = state_.task(eid);
        if (!Movable(state_, e)) continue;
        if (e.req.cpu_milli + f.cpu_free < t.req.cpu_milli || e.req.mem_mib + f.mem_free < t.req.mem_mib) continue;
        Room r = base;
        Give(r, e.req, e.gpus);
        GpuIndices g;
        if (!Fits(r, t.req, &g)) continue;
        Ejection p{{e.req.TotalGpuMilli(), e.req.cpu_milli, e.req.mem_mib, n.id.value(), eid.value()}, n.id, eid};
        if (top.size() == k && !(p.key < top.front().key)) continue;
        top.push_back(p);
        std::push_heap(top.begin(), top.end(), worse);
        if (top.size() > k) {
          std::pop_heap(top.begin(), top.end(), worse);
          top.pop_back();
        }
      }
    }
    std::sort(top.begin(), top.end(), worse);
    return eject_cache_.emplace(t.id.value(), std::move(top)).first->second;
  }

  const ClusterState& state_;
  const Task& arriving_;
  const MigrateOptions& o_;
  const size_t cache_k_;
  MigrationPlan plan_;
  std::vector<std::pair<NodeId, Room>> overlay_;
  std::vector<int64_t> cpus_, mems_;                          // HostBound scratch
  std::array<std::vector<int64_t>, kMaxGpusPerNode> on_gpu_;  // HostBound scratch
  std::unordered_map<uint32_t, std::vector<Candidate>> cache_;
  std::unordered_map<uint32_t, std::vector<Ejection>> eject_cache_;
  NodeId host_;                 // the host being searched
  std::vector<TaskId> moved_;   // tasks the plan under construction moves
};

}  // namespace

Status MigrateToFit::Validate(const MigrateOptions& o) {
  if (o.max_moves < 1 || o.max_moves > kMaxMoves) {
    return InvalidArgument("max_moves " + std::to_string(o.max_moves) + ": must be in [1, " +
                           std::to_string(kMaxMoves) + "]");
  }
  if (o.max_hosts < 1) return InvalidArgument("max_hosts " + std::to_string(o.max_hosts) + ": must be >= 1");
  if (o.subset_budget < 1) {
    return InvalidArgument("subset_budget " + std::to_string(o.subset_budget) + ": must be >= 1");
  }
  if (o.max_chain_depth < 0 || o.max_chain_depth > kMaxChainDepth) {
    return InvalidArgument("max_chain_depth " + std::to_string(o.max_chain_depth) + ": must be in [0, " +
                           std::to_string(kMaxChainDepth) + "]");
  }
  if (o.ejection_pairs < 1) {
    return InvalidArgument("ejection_pairs " + std::to_string(o.ejection_pairs) + ": must be >= 1");
  }
  return Status::Ok();
}

namespace {
// Whether `big` asks for at least what `small` asks, in every dimension, on the same GPUs shape.
bool AtLeast(const TaskRequest& big, const TaskRequest& small) {
  return big.gpu_count == small.gpu_count && big.models == small.models && big.gpu_milli >= small.gpu_milli &&
         big.cpu_milli >= small.cpu_milli && big.mem_mib >= small.mem_mib;
}
}  // namespace

bool MigrationMemo::KnownInfeasible(const ClusterState& state, const TaskRequest& r) {
  if (state.release_seq() != release_seq_) {
    infeasible_.clear();
    release_seq_ = state.release_seq();
    return false;
  }
  for (const TaskRequest& q : infeasible_) {
    if (AtLeast(r, q)) {
      ++hits_;
      return true;
    }
  }
  return false;
}

void MigrationMemo::RecordInfeasible(const ClusterState& state, const TaskRequest& r) {
  if (state.release_seq() != release_seq_) {
    infeasible_.clear();
    release_seq_ = state.release_seq();
  }
  // Drop the entries r answers for; r covers them.
  std::erase_if(infeasible_, [&](const TaskRequest& q) { return AtLeast(q, r); });
  infeasible_.push_back(r);
}

MigrationPlan MigrateToFit::Plan(const ClusterState& state, TaskId arriving, const MigrateOptions& options) {
  ESTUARY_CHECK(Validate(options).ok());
  ESTUARY_CHECK(state.task(arriving).state == TaskState::kPending);
  return Planner(state, arriving, options).Run();
}

}  // namespace estuary
