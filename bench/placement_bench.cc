// Single-task placement throughput: the cost of one scheduling decision (Session::Decide) plus its
// bind, i.e. AllocateAction::TryStart of a freshly added single-task job, as the openb simulator
// makes them. One benchmark iteration is one such decision; items_per_second = decisions/s.
// Tasks are sampled (seeded, with replacement) from openb_pod_list_default.csv; fgd gets the
// typical tasks of the whole trace, as the simulator does. Building cluster states, sampling
// tasks and opening Sessions are never timed (before the timed loop or under state.PauseTiming).
//
// A decision's cost depends on how full the cluster is and on how warm the Session's score cache
// is, so the figure is the mean over a fill from empty to 90%, never the first decisions after a
// reset. Two methods:
//
// Decision modes: the default is the Session's per-class index (SessionOptions::indexed); "/scan"
// scans every node with the score cache, "/scan-no-cache" scans and re-scores every feasible node.
//
// Whole fills ("<policy>/openb[/scan|/scan-no-cache]"; "<policy>/20k/fills" on request):
// a fill starts from a fresh copy of the empty cluster and a new Session and submits tasks until
// one fails to place or GPU allocation reaches 90%; every decision of it is timed, the failing one
// included. Fills run as batches (State::KeepRunningBatch) sized by an untimed dry run of the same
// fill (fills are deterministic), so a measurement always covers whole fills. Fills cycle over
// sampling seeds 42..44.
//
// Level windows ("<policy>/20k"; "<policy>/openb/levels" cross-checks them against whole fills):
// a whole fill of 20,000 nodes takes minutes, so it is sampled at the levels kLevels (the
// midpoints of five equal bands of 0..90% allocation). The policy's own fill is made cheaply by
// cutting the cluster into slices of about openb's size, filling each slice with its own Session
// (untimed) and interleaving the slices' bindings by progress. For each level a new Session then
// replays that fill up to the level untimed: the bindings are applied directly, and each task
// class (distinct request) is decided once at its last occurrence before the level, which leaves
// the score cache valid for exactly the nodes that fill would have left it valid for. Then
// WindowSize() timed decisions follow; a task that does not fit is dropped, as in the simulator.
// The levels are weighted equally: each band of a fill takes about as many decisions.
//
// Clusters: "openb" is the 1,213 GPU nodes of openb_node_list_gpu_node.csv; "20k" a synthetic
// 20,000-node cluster with openb's node mix (Synthesize). In "scan-no-cache" fgd's own per-node
// memo of F_n stays on.
//
// Counters: decisions/fill or windows; end_alloc% (GPU allocation at the end of each timed fill
// or window, mean); cache_hit% (Session score-cache hits over lookups in the timed decisions; 0
// when the cache is off or decisions come from the index); nodes.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/check.h"
#include "common/rng.h"
#include "sched/actions/allocate.h"
#include "sched/plugins/fgd/typical_tasks.h"
#include "sched/plugins/register.h"
#include "sim/trace/openb_reader.h"

namespace estuary {
namespace {

const std::string kTraceDir = std::string(ESTUARY_SHARED_DIR) + "/traces/openb/";
const std::string kNodesPath = kTraceDir + "openb_node_list_gpu_node.csv";
const std::string kPodsPath = kTraceDir + "openb_pod_list_default.csv";
constexpr size_t kSyntheticNodes = 20000;
constexpr uint64_t kSyntheticSeed = 7;
constexpr int64_t kStopPermille = 900;
constexpr int kFillSeeds = 3;
constexpr std::array<int64_t, 5> kLevels = {90, 270, 450, 630, 810};  // permille
constexpr size_t kSliceNodes = 1213;
// Timed decisions per level window: about 1% of the GPU capacity's worth of tasks.
int64_t WindowSize(size_t nodes) { return nodes >= 10000 ? 1000 : 100; }
// Timed decisions per level-window run: a multiple of kLevels.size() * every window size.
constexpr int64_t kWindowDecisions = 5000;

// An empty cluster and the trace's requests expressed in its GPU model ids.
struct Workload {
  ClusterState empty;
  std::vector<TaskRequest> pool;
  std::vector<uint32_t> class_of;  // per pool entry: index of its distinct request
  size_t classes = 0;
  TypicalTasks typical;
};

// `n` nodes with openb's node mix: each distinct (CPU, memory, GPU count, GPU model) type gets its
// share of `n` by largest remainder; the nodes are shuffled with `seed` and named synth-node-NNNNN.
std::vector<NodeRow> Synthesize(const std::vector<NodeRow>& base, size_t n, uint64_t seed) {
  using Type = std::tuple<MilliCpu, MemMiB, int32_t, std::string>;
  std::map<Type, size_t> counts;
  for (const NodeRow& r : base) ++counts[{r.cpu_milli, r.mem_mib, r.gpus, r.model}];
  std::vector<std::pair<Type, size_t>> quota;
  std::vector<std::pair<size_t, size_t>> remainder;  // (remainder, index into quota)
  size_t assigned = 0;
  for (const auto& [type, count] : counts) {
    const size_t exact = count * n;
    remainder.emplace_back(exact % base.size(), quota.size());
    quota.emplace_back(type, exact / base.size());
    assigned += exact / base.size();
  }
  std::sort(remainder.begin(), remainder.end(),
            [](auto a, auto b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  for (size_t i = 0; assigned < n; ++i, ++assigned) ++quota[remainder[i].second].second;

  std::vector<NodeRow> rows;
  rows.reserve(n);
  for (const auto& [type, count] : quota) {
    for (size_t i = 0; i < count; ++i) {
      NodeRow r;
      std::tie(r.cpu_milli, r.mem_mib, r.gpus, r.model) = type;
      rows.push_back(std::move(r));
    }
  }
  Rng rng(seed);
  rng.Shuffle(rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "synth-node-%05zu", i);
    rows[i].name = name;
    rows[i].line = static_cast<unsigned>(i + 2);
  }
  return rows;
}

StatusOr<Workload> MakeWorkload(const std::vector<NodeRow>& rows, const std::string& label,
                                const OpenbTaskList& tasks) {
  auto cluster = BuildCluster(rows, label);
  if (!cluster.ok()) return cluster.status();
  auto reqs = OpenbRequests(tasks, cluster->models());
  if (!reqs.ok()) return reqs.status();
  Workload w;
  w.empty = std::move(cluster).value();
  w.pool = std::move(reqs).value();
  std::map<std::tuple<MilliCpu, MemMiB, int32_t, MilliGpu, uint64_t>, uint32_t> ids;
  for (const TaskRequest& r : w.pool) {
    auto key = std::tuple(r.cpu_milli, r.mem_mib, r.gpu_count, r.gpu_milli, r.models.bits());
    w.class_of.push_back(ids.try_emplace(key, static_cast<uint32_t>(ids.size())).first->second);
  }
  w.classes = ids.size();
  w.typical = TypicalTasks::FromWorkload(w.pool);
  return w;
}

// The workload of cluster "openb" or "20k", loaded once per process.
StatusOr<const Workload*> GetWorkload(const std::string& cluster) {
  static std::map<std::string, StatusOr<Workload>> cache;
  auto it = cache.find(cluster);
  if (it == cache.end()) {
    StatusOr<Workload> w = [&]() -> StatusOr<Workload> {
      auto nodes = ReadOpenbNodes(kNodesPath);
      if (!nodes.ok()) return nodes.status();
      auto tasks = ReadOpenbTasks(kPodsPath);
      if (!tasks.ok()) return tasks.status();
      if (cluster == "openb") return MakeWorkload(*nodes, kNodesPath, *tasks);
      return MakeWorkload(Synthesize(*nodes, kSyntheticNodes, kSyntheticSeed), "synthetic-20k", *tasks);
    }();
    it = cache.emplace(cluster, std::move(w)).first;
  }
  if (!it->second.ok()) return it->second.status();
  return &*it->second;
}

double AllocPct(const ClusterState& s) {
  return 100.0 * static_cast<double>(s.allocated_gpu_milli()) / static_cast<double>(s.total_gpu_milli());
}

// One placed task of a fill: its pool entry, node and GPUs.
struct Binding {
  uint32_t req = 0;
  NodeId node;
  GpuIndices gpus;
};

// How the Session decides (see the header comment).
enum class Mode { kIndexed, kScan, kScanNoCache };

// A cluster state being filled by one Session from a pre-sampled task stream.
class Filler {
 public:
  // Samples `count` tasks, or (count < 0) tasks until their GPU demand reaches the cluster's
  // capacity: enough for any fill to reach 90% allocation or fail first.
  Filler(const ClusterState& start, const Workload& w, const PolicyConfig& policy, Mode mode,
         uint64_t seed, int64_t count = -1)
      : w_(w), state_(start), ctx_{&state_, &w.typical} {
    Rng rng(seed);
    int64_t demand = 0;
    while (count < 0 ? demand < state_.total_gpu_milli() : static_cast<int64_t>(stream_.size()) < count) {
      stream_.push_back(static_cast<uint32_t>(rng.Uniform(w.pool.size())));
      demand += w.pool[stream_.back()].TotalGpuMilli();
    }
    SessionOptions so;
    so.policy = policy;
    so.seed = seed ^ 0x5eed5eed5eed5eedULL;
    so.indexed = mode == Mode::kIndexed;
    so.score_cache = mode != Mode::kScanNoCache;
    auto s = Session::Open(state_, BuiltinRegistry(), ctx_, so);
    ESTUARY_CHECK(s.ok());
    session_ = std::move(s).value();
  }
  Filler(const Filler&) = delete;
  Filler& operator=(const Filler&) = delete;

  void Reserve(size_t tasks) { state_.Reserve(state_.tasks().size() + tasks, state_.jobs().size() + tasks); }

  // Submits the next task of the stream as a fresh single-task job and tries to start it; a task
  // that does not fit is dropped. Returns whether it was placed.
  bool Step() {
    ESTUARY_CHECK(next_ < stream_.size());
    const uint32_t req = stream_[next_++];
    const JobId job = state_.AddJob(JobSpec());
    const TaskId task = state_.AddTask(job, std::string(), w_.pool[req]);
    if (AllocateAction::TryStart(*session_, state_, job).started) {
      if (record_) placed_.push_back({req, state_.task(task).node, state_.task(task).gpus});
      return true;
    }
    state_.Finish(task);
    return false;
  }
  // Steps until a task fails to place or allocation reaches `stop_permille`; returns the decisions.
  int64_t FillTo(int64_t stop_permille) {
    const int64_t stop = state_.total_gpu_milli() * stop_permille / 1000;
    int64_t n = 0;
    for (;;) {
      ++n;
      if (!Step() || state_.allocated_gpu_milli() >= stop) return n;
    }
  }
  // Applies the first `n` bindings of `fill` directly, after deciding (without binding) each task
  // class once at its last occurrence among them.
  void Replay(const std::vector<Binding>& fill, size_t n) {
    std::vector<bool> seen(w_.classes), last(n);
    for (size_t i = n; i-- > 0;) {
      const uint32_t c = w_.class_of[fill[i].req];
      last[i] = !seen[c];
      seen[c] = true;
    }
    for (size_t i = 0; i < n; ++i) {
      const TaskId task = state_.AddTask(state_.AddJob(JobSpec()), std::string(), w_.pool[fill[i].req]);
      if (last[i]) session_->Decide(task);
      state_.Bind(task, fill[i].node, fill[i].gpus);
    }
  }
  void RecordPlacements() { record_ = true; }
  const std::vector<Binding>& placed() const { return placed_; }
  const ClusterState& state() const { return state_; }
  uint64_t cache_hits() const { return session_->cache_hits(); }
  uint64_t cache_lookups() const { return session_->cache_hits() + session_->cache_misses(); }

 private:
  const Workload& w_;
  ClusterState state_;
  PluginContext ctx_;
  std::unique_ptr<Session> session_;
  std::vector<uint32_t> stream_;
  size_t next_ = 0;
  bool record_ = false;
  std::vector<Binding> placed_;
};

// Nodes [begin, end) of `full` as a cluster of their own, with the same GPU model ids.
ClusterState Slice(const ClusterState& full, uint32_t begin, uint32_t end) {
  ClusterState s;
  for (size_t m = 0; m < full.models().size(); ++m) {
    ESTUARY_CHECK(s.models().Intern(full.models().Name(GpuModelId(static_cast<uint32_t>(m)))).ok());
  }
  for (uint32_t i = begin; i < end; ++i) ESTUARY_CHECK(s.AddNode(full.node(NodeId(i)).spec).ok());
  return s;
}

// A fill of the whole cluster by the policy, made of independent fills of slices of about
// kSliceNodes nodes (each until a task fails or 90%), interleaved in order of each slice's
// allocation after the binding.
std::vector<Binding> SlicedFill(const Workload& w, const PolicyConfig& policy) {
  const uint32_t n = static_cast<uint32_t>(w.empty.num_nodes());
  const uint32_t slices = static_cast<uint32_t>((n + kSliceNodes - 1) / kSliceNodes);
  std::vector<std::pair<double, Binding>> all;
  for (uint32_t s = 0; s < slices; ++s) {
    const uint32_t begin = static_cast<uint32_t>(uint64_t{n} * s / slices);
    const uint32_t end = static_cast<uint32_t>(uint64_t{n} * (s + 1) / slices);
    Filler slice(Slice(w.empty, begin, end), w, policy, Mode::kIndexed, 1000 + s);
    slice.RecordPlacements();
    slice.FillTo(kStopPermille);
    const double capacity = static_cast<double>(slice.state().total_gpu_milli());
    int64_t allocated = 0;
    for (Binding b : slice.placed()) {
      allocated += w.pool[b.req].TotalGpuMilli();
      b.node = NodeId(begin + b.node.value());
      all.emplace_back(static_cast<double>(allocated) / capacity, b);
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Binding> out;
  out.reserve(all.size());
  for (const auto& [progress, b] : all) out.push_back(b);
  return out;
}

void BM_Place(benchmark::State& st, const std::string& policy_name, const std::string& cluster, Mode mode,
              bool levels) {
  auto w = GetWorkload(cluster);
  if (!w.ok()) {
    st.SkipWithError(w.status().message().c_str());
    return;
  }
  auto policy = OpenbPolicy(policy_name);
  ESTUARY_CHECK(policy.ok());
  const Workload& work = **w;
  double end_alloc = 0;
  uint64_t hits = 0, lookups = 0;
  int64_t runs = 0;

  if (!levels) {
    auto seed = [](int k) { return static_cast<uint64_t>(42 + k); };
    static std::map<std::pair<std::string, std::string>, std::vector<int64_t>> lengths;
    std::vector<int64_t>& len = lengths[{policy_name, cluster}];  // the mode changes no decision
    for (int k = static_cast<int>(len.size()); k < kFillSeeds; ++k) {
      len.push_back(Filler(work.empty, work, *policy, Mode::kIndexed, seed(k)).FillTo(kStopPermille));
    }
    int k = 0;
    std::unique_ptr<Filler> fill;
    auto prepare = [&] {
      fill.reset();
      fill = std::make_unique<Filler>(work.empty, work, *policy, mode, seed(k));
      fill->Reserve(static_cast<size_t>(len[k]));
    };
    prepare();
    while (st.KeepRunningBatch(len[k])) {
      const int64_t decisions = fill->FillTo(kStopPermille);
      st.PauseTiming();
      ESTUARY_CHECK(decisions == len[k]);
      ++runs;
      end_alloc += AllocPct(fill->state());
      hits += fill->cache_hits();
      lookups += fill->cache_lookups();
      k = (k + 1) % kFillSeeds;
      prepare();
      st.ResumeTiming();
    }
    st.counters["decisions/fill"] = static_cast<double>(st.iterations()) / static_cast<double>(runs);
  } else {
    static std::map<std::pair<std::string, std::string>, std::vector<Binding>> fills;
    auto it = fills.find({policy_name, cluster});
    if (it == fills.end()) it = fills.emplace(std::pair(policy_name, cluster), SlicedFill(work, *policy)).first;
    const std::vector<Binding>& fill = it->second;
    std::array<size_t, kLevels.size()> prefix{};  // bindings before each level
    size_t i = 0;
    int64_t allocated = 0;
    for (size_t l = 0; l < kLevels.size(); ++l) {
      const int64_t target = work.empty.total_gpu_milli() * kLevels[l] / 1000;
      for (; i < fill.size() && allocated < target; ++i) allocated += work.pool[fill[i].req].TotalGpuMilli();
      prefix[l] = i;
    }
    const int64_t size = WindowSize(work.empty.num_nodes());
    size_t l = 0;
    std::unique_ptr<Filler> window;
    uint64_t hits0 = 0, lookups0 = 0;
    auto prepare = [&] {
      window.reset();
      window = std::make_unique<Filler>(work.empty, work, *policy, mode, 42 + l, size);
      window->Reserve(prefix[l] + static_cast<size_t>(size));
      window->Replay(fill, prefix[l]);
      hits0 = window->cache_hits();
      lookups0 = window->cache_lookups();
    };
    prepare();
    while (st.KeepRunningBatch(size)) {
      for (int64_t i = 0; i < size; ++i) window->Step();
      st.PauseTiming();
      ++runs;
      end_alloc += AllocPct(window->state());
      hits += window->cache_hits() - hits0;
      lookups += window->cache_lookups() - lookups0;
      l = (l + 1) % kLevels.size();
      prepare();
      st.ResumeTiming();
    }
    st.counters["windows"] = static_cast<double>(runs);
  }
  st.SetItemsProcessed(st.iterations());
  st.counters["end_alloc%"] = end_alloc / static_cast<double>(runs);
  st.counters["cache_hit%"] = lookups == 0 ? 0.0 : 100.0 * static_cast<double>(hits) / static_cast<double>(lookups);
  st.counters["nodes"] = static_cast<double>(work.empty.num_nodes());
}

const bool registered = [] {
  struct Case {
    const char* policy;
    const char* cluster;
    Mode mode;
    bool levels;
    const char* suffix;
  };
  std::vector<Case> cases = {
      {"best-fit", "openb", Mode::kIndexed, false, ""},
      {"fgd", "openb", Mode::kIndexed, false, ""},
      {"best-fit", "openb", Mode::kScan, false, "/scan"},
      {"fgd", "openb", Mode::kScan, false, "/scan"},
      {"fgd", "openb", Mode::kScanNoCache, false, "/scan-no-cache"},
      {"best-fit", "openb", Mode::kIndexed, true, "/levels"},
      {"fgd", "openb", Mode::kIndexed, true, "/levels"},
      {"best-fit", "20k", Mode::kIndexed, true, ""},
      {"fgd", "20k", Mode::kIndexed, true, ""},
      {"best-fit", "20k", Mode::kScan, true, "/scan"},
      {"fgd", "20k", Mode::kScan, true, "/scan"},
  };
  // Whole fills of the 20k cluster take minutes; they validate its level windows on request.
  if (std::getenv("ESTUARY_BENCH_20K_FILLS") != nullptr) {
    cases.push_back({"best-fit", "20k", Mode::kIndexed, false, "/fills"});
    cases.push_back({"fgd", "20k", Mode::kIndexed, false, "/fills"});
  }
  for (const Case& c : cases) {
    const std::string name = std::string("BM_Place/") + c.policy + "/" + c.cluster + c.suffix;
    auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_Place, std::string(c.policy), std::string(c.cluster),
                                           c.mode, c.levels);
    b->Unit(benchmark::kMicrosecond);
    if (c.levels) b->Iterations(kWindowDecisions);
  }
  return true;
}();

}  // namespace
}  // namespace estuary
