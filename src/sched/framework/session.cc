#include "sched/framework/session.h"

#include <algorithm>
#include <numeric>

namespace estuary {

std::string_view TieBreakName(TieBreak t) {
  return t == TieBreak::kNodeOrder ? "node-order" : "uniform";
}

StatusOr<TieBreak> ParseTieBreak(std::string_view name) {
  if (name == "node-order") return TieBreak::kNodeOrder;
  if (name == "uniform") return TieBreak::kUniform;
  return InvalidArgument("unknown tie-break rule '" + std::string(name) + "' (known: node-order, uniform)");
}

std::string_view OutcomeKindName(OutcomeKind k) {
  switch (k) {
    case OutcomeKind::kPlaced: return "placed";
    case OutcomeKind::kRetryable: return "retryable";
    case OutcomeKind::kInfeasible: return "infeasible";
  }
  return "?";
}

size_t Session::ReqHash::operator()(const TaskRequest& r) const {
  uint64_t h = static_cast<uint64_t>(r.cpu_milli) * 0x9e3779b97f4a7c15ULL;
  h ^= static_cast<uint64_t>(r.mem_mib) + 0x7f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= (static_cast<uint64_t>(r.gpu_count) << 32 | static_cast<uint32_t>(r.gpu_milli)) + (h << 6) + (h >> 2);
  h ^= r.models.bits() + (h << 6) + (h >> 2);
  return static_cast<size_t>(h);
}

Session::Session(const ClusterState& state, SessionOptions options)
    : state_(state), options_(std::move(options)), rng_(options_.seed) {}

StatusOr<std::unique_ptr<Session>> Session::Open(const ClusterState& state, const Registry& registry,
                                                 const PluginContext& ctx, SessionOptions options) {
  std::unique_ptr<Session> s(new Session(state, std::move(options)));
  if (s->options_.policy.scores.empty()) {
    return InvalidArgument("policy '" + s->options_.policy.name + "' has no score plugin");
  }
  for (const std::string& f : s->options_.policy.filters) {
    auto p = registry.MakeFilter(f, ctx);
    if (!p.ok()) return p.status();
    s->filters_.push_back(std::move(p).value());
  }
  for (const auto& [name, weight] : s->options_.policy.scores) {
    auto p = registry.MakeScore(name, ctx);
    if (!p.ok()) return p.status();
    Scorer sc;
    sc.plugin = std::move(p).value();
    sc.weight = weight;
    sc.cacheable = s->options_.score_cache && sc.plugin->CacheableByNode();
    s->scorers_.push_back(std::move(sc));
  }
  s->indexed_ = s->options_.indexed && s->options_.tie_break == TieBreak::kNodeOrder;
  for (const Scorer& sc : s->scorers_) {
    s->indexed_ = s->indexed_ && sc.plugin->CacheableByNode() && sc.plugin->NormalizeKeepsOrder(state);
  }
  for (const auto& f : s->filters_) s->indexed_ = s->indexed_ && f->CacheableByNode();
  auto g = registry.MakeGpuSelect(s->options_.policy.gpu_select, ctx);
  if (!g.ok()) return g.status();
  s->gpu_select_ = std::move(g).value();

  if (s->options_.node_rank.empty()) {
    // Seeded random order over the nodes sorted by name (the published runs prefix sorted node
    // names with a random permutation and break ties by the smallest name).
    const auto& nodes = state.nodes();
    std::vector<uint32_t> by_name(nodes.size());
    std::iota(by_name.begin(), by_name.end(), 0);
    std::sort(by_name.begin(), by_name.end(),
              [&](uint32_t a, uint32_t b) { return nodes[a].spec.name < nodes[b].spec.name; });
    std::vector<uint32_t> perm = s->rng_.Permutation(static_cast<uint32_t>(nodes.size()));
    s->options_.node_rank.assign(nodes.size(), 0);
    for (size_t i = 0; i < by_name.size(); ++i) s->options_.node_rank[by_name[i]] = perm[i];
  }
  return s;
}

uint32_t Session::Rank(NodeId n) const {
  const auto& r = options_.node_rank;
  return n.value() < r.size() ? r[n.value()] : static_cast<uint32_t>(r.size() + n.value());
}

uint32_t Session::ClassOf(const TaskRequest& req) {
  auto [it, inserted] = classes_.try_emplace(req, static_cast<uint32_t>(classes_.size()));
  return it->second;
}

bool Session::EverFits(const TaskRequest& req) const {
  // Down or cordoned nodes count: they may come back.
  for (const Node& n : state_.nodes()) {
    if (req.cpu_milli > n.spec.cpu_milli || req.mem_mib > n.spec.mem_mib) continue;
    if (req.NeedsGpu() && (!req.models.Admits(n.spec.model) || req.gpu_count > n.spec.gpu_count)) continue;
    return true;
  }
  return false;
}

std::string Session::Explain(const Task& task) const {
  std::string s = "0/" + std::to_string(considered_) + " nodes fit";
  auto add = [&](int64_t n, const char* what) {
    if (n > 0) s += ", " + std::to_string(n) + " " + what;
  };
  add(rej_.not_ready, "not ready");
  add(rej_.held, "held for another job");
  add(rej_.held_own, "held for this job (used only when it starts among them)");
  add(rej_.model, "GPU model not allowed");
  add(rej_.cpu, "insufficient CPU");
  add(rej_.mem, "insufficient memory");
  add(rej_.gpu, task.req.IsSharedGpu() ? "no GPU with enough free share" : "too few free GPUs");
  if (rej_.plugin > 0) s += ", " + std::to_string(rej_.plugin) + " rejected (" + rej_.plugin_reason + ")";
  return s;
}

bool Session::FitsBuiltin(const TaskRequest& req, const NodeFit& n, JobId owner) const {
  const bool gpu_task = req.NeedsGpu();
  const bool whole = gpu_task && !req.IsSharedGpu();
  return n.schedulable && (!n.reserved_for.valid() || n.reserved_for == owner) && n.cpu_free >= req.cpu_milli && n.mem_free >= req.mem_mib &&
         (!gpu_task || (req.models.Admits(n.model) &&
                        (whole ? n.full_free_gpus >= req.gpu_count : n.max_gpu_free >= req.gpu_milli)));
}

namespace {
// Heap order: the worse entry is "less" (std heaps keep the greatest at the front).
bool WorseEntry(const auto& a, const auto& b) { return a.score < b.score || (a.score == b.score && a.rank > b.rank); }
}  // namespace

int64_t Session::Score(const Task& task, const Node& node) {
  int64_t total = 0;
  for (Scorer& sc : scorers_) total += sc.weight * sc.plugin->Score(task, node);
  return total;
}

void Session::IndexPush(ClassIndex& ci, const Task& task, NodeId id) {
  const NodeFit& f = state_.fits()[id.value()];
  if (!FitsBuiltin(task.req, f, JobId())) return;
  const Node& node = state_.node(id);
  if (!filters_.empty() && !PassesFilterPlugins(task, node)) return;
  int64_t total = 0;
  for (Scorer& sc : scorers_) total += sc.weight * sc.plugin->Score(task, node);
  ci.heap.push_back({total, Rank(id), id.value(), f.version});
  std::push_heap(ci.heap.begin(), ci.heap.end(), WorseEntry<IndexEntry, IndexEntry>);
}

std::optional<Outcome> Session::DecideIndexed(const Task& task, uint32_t cls) {
  if (index_.size() <= cls) index_.resize(cls + 1);
  ClassIndex& ci = index_[cls];
  const size_t n = state_.num_nodes();
  // Catch up with the changes since this class was last decided: each changed node once (an
  // entry records the version it was scored at, so only the node's current state is scored).
  bool caught_up = ci.built;
  if (caught_up) {
    if (seen_.size() < n) seen_.resize(n, 0);
    ++stamp_;
    caught_up = state_.ForEachChangeSince(ci.cursor, [&](NodeId id) {
      if (seen_[id.value()] == stamp_) return;
      seen_[id.value()] = stamp_;
      IndexPush(ci, task, id);
    });
  }
  if (!caught_up) {
    ci.heap.clear();
    for (uint32_t i = 0; i < n; ++i) IndexPush(ci, task, NodeId(i));
    ci.built = true;
  }
  ci.cursor = state_.change_seq();
  const auto& fits = state_.fits();
  if (ci.heap.size() > 2 * n + 64) {
    // Stale entries crowd the heap: drop them all at once (no re-scoring needed).
    std::erase_if(ci.heap, [&](const IndexEntry& e) { return e.version != fits[e.node].version; });
    std::make_heap(ci.heap.begin(), ci.heap.end(), WorseEntry<IndexEntry, IndexEntry>);
  }
  while (!ci.heap.empty() && ci.heap.front().version != fits[ci.heap.front().node].version) {
    std::pop_heap(ci.heap.begin(), ci.heap.end(), WorseEntry<IndexEntry, IndexEntry>);
    ci.heap.pop_back();
  }
  if (ci.heap.empty()) return std::nullopt;
  const Node& chosen = state_.node(NodeId(ci.heap.front().node));
  Outcome out;
  out.kind = OutcomeKind::kPlaced;
  out.node = chosen.id;
  out.score = ci.heap.front().score;  // raw: before any (order-keeping) normalisation
  out.gpus = task.req.NeedsGpu() ? gpu_select_->Select(task, chosen, rng_) : GpuIndices();
  return out;
}

void Session::CountRejection(const TaskRequest& req, const NodeFit& n, JobId owner) {
  if (!n.schedulable) {
    ++rej_.not_ready;
  } else if (n.reserved_for.valid() && n.reserved_for != owner) {
    ++(n.reserved_for == job_ ? rej_.held_own : rej_.held);
  } else if (req.NeedsGpu() && !req.models.Admits(n.model)) {
    ++rej_.model;
  } else if (req.cpu_milli > n.cpu_free) {
    ++rej_.cpu;
  } else if (req.mem_mib > n.mem_free) {
    ++rej_.mem;
  } else {
    ++rej_.gpu;
  }
}

bool Session::PassesFilterPlugins(const Task& task, const Node& node) {
  for (auto& f : filters_) {
    std::string_view why = f->Filter(task, node);
    if (!why.empty()) {
      if (rej_.plugin++ == 0) rej_.plugin_reason = std::string(why);
      return false;
    }
  }
  return true;
}

Outcome Session::Decide(TaskId task_id) { return DecideImpl(task_id, nullptr, false); }

Outcome Session::DecideAmong(TaskId task_id, std::span<const NodeId> candidates) {
  return DecideImpl(task_id, &candidates);
}

Outcome Session::DecideHolding(TaskId task_id) { return DecideImpl(task_id, nullptr, true); }

Outcome Session::DecideImpl(TaskId task_id, const std::span<const NodeId>* among, bool holding) {
  const Task& task = state_.task(task_id);
  const TaskRequest& req = task.req;
  const auto& nodes = state_.nodes();
  feasible_.clear();
  rej_ = Rejections();
  considered_ = among ? among->size() : state_.num_nodes();
  if (indexed_ && among == nullptr && !holding) {
    if (auto placed = DecideIndexed(task, ClassOf(req))) return *placed;
  }

  const bool gpu_task = req.NeedsGpu();
  const bool whole = gpu_task && !req.IsSharedGpu();
  const auto& fits = state_.fits();
  // Only DecideAmong may use nodes held for the task's job (the index never holds held nodes).
  const JobId owner = among != nullptr || holding ? task.job : JobId();
  job_ = task.job;
  // Hot path: one combined test per node; the reason of a rejection is worked out only then.
  auto consider = [&](uint32_t i) {
    if (!FitsBuiltin(req, fits[i], owner)) {
      CountRejection(req, fits[i], owner);
      return;
    }
    if (!filters_.empty() && !PassesFilterPlugins(task, nodes[i])) return;
    feasible_.push_back(NodeId(i));
  };
  if (among != nullptr) {
    for (NodeId id : *among) consider(id.value());
  } else if (whole) {
    // Index: only nodes with at least gpu_count wholly free GPUs can hold the task.
    int64_t skipped = 0;
    for (int k = 0; k < std::min(req.gpu_count, kMaxGpusPerNode + 1); ++k) skipped += state_.nodes_with_full_free(k).size();
    for (int k = req.gpu_count; k <= kMaxGpusPerNode; ++k) {
      for (NodeId id : state_.nodes_with_full_free(k)) consider(id.value());
    }
    rej_.gpu += skipped;
  } else {
    const uint32_t count = static_cast<uint32_t>(fits.size());
    for (uint32_t i = 0; i < count; ++i) consider(i);
  }

  Outcome out;
  if (feasible_.empty()) {
    out.kind = EverFits(req) ? OutcomeKind::kRetryable : OutcomeKind::kInfeasible;
    out.reason = Explain(task);
    if (out.kind == OutcomeKind::kInfeasible) out.reason = "no node could ever hold it; " + out.reason;
    return out;
  }

  const size_t n = feasible_.size();
  totals_.assign(n, 0);
  const uint32_t cls = ClassOf(req);
  for (Scorer& sc : scorers_) {
    sc.plugin->PreScore(task, feasible_, rng_);
    sc.scratch.resize(n);
    if (sc.cacheable) {
      if (sc.cache.size() <= cls) sc.cache.resize(cls + 1);
      auto& cache = sc.cache[cls];
      if (cache.size() < nodes.size()) cache.resize(nodes.size(), {0, 0});
      for (size_t i = 0; i < n; ++i) {
        const uint32_t id = feasible_[i].value();
        auto& e = cache[id];
        const uint32_t version = fits[id].version;
        if (e.first == version) {
          ++cache_hits_;
        } else {
          ++cache_misses_;
          e = {version, sc.plugin->Score(task, nodes[id])};
        }
        sc.scratch[i] = e.second;
      }
    } else {
      for (size_t i = 0; i < n; ++i) sc.scratch[i] = sc.plugin->Score(task, nodes[feasible_[i].value()]);
    }
    sc.plugin->Normalize(sc.scratch);
    for (size_t i = 0; i < n; ++i) totals_[i] += sc.weight * sc.scratch[i];
  }

  size_t best = 0;
  if (options_.tie_break == TieBreak::kNodeOrder) {
    for (size_t i = 1; i < n; ++i) {
      if (totals_[i] > totals_[best] || (totals_[i] == totals_[best] && Rank(feasible_[i]) < Rank(feasible_[best]))) {
        best = i;
      }
    }
  } else {
    // Uniform among the tied maxima, taken in node-id order so that the index's internal order
    // cannot change the outcome.
    const int64_t top = *std::max_element(totals_.begin(), totals_.end());
    tied_.clear();
    for (size_t i = 0; i < n; ++i) {
      if (totals_[i] == top) tied_.push_back(static_cast<uint32_t>(i));
    }
    std::sort(tied_.begin(), tied_.end(), [&](uint32_t a, uint32_t b) { return feasible_[a] < feasible_[b]; });
    best = tied_[rng_.Uniform(tied_.size())];
  }
  const Node& chosen = nodes[feasible_[best].value()];
  out.kind = OutcomeKind::kPlaced;
  out.node = chosen.id;
  out.score = totals_[best];
  out.gpus = gpu_task ? gpu_select_->Select(task, chosen, rng_) : GpuIndices();
  return out;
}

}  // namespace estuary
