// Single-task placement throughput: the cost of one scheduling decision (Session::Decide) plus its
// bind (AllocateAction::TryStart of a fresh single-task job), as the openb simulator makes them.
//
// Method: time whole fills. A fill starts from a fresh copy of the empty cluster and a newly opened
// Session, then submits tasks sampled (seeded, with replacement) from openb_pod_list_default.csv
// one at a time until a task fails to place or GPU allocation reaches 90%. Every decision of the
// fill is timed, the failing one included; copying the cluster and opening the Session are not
// (state.PauseTiming). Each benchmark iteration is one decision: fills are run as batches
// (State::KeepRunningBatch) whose sizes come from an untimed dry run of the same fill (fills are
// deterministic), so a measurement always covers whole fills and the reported time is the mean
// over every fill level from empty to full, never a prefix of a fill.
//
// Clusters: "openb" is the 1,213 GPU nodes of openb_node_list_gpu_node.csv; "20k" is a synthetic
// 20,000-node cluster with the same node mix (see Synthesize). fgd gets the typical tasks of the
// whole trace, as the simulator does. "no-score-cache" runs with SessionOptions::score_cache off.
//
// Counters: items_per_second = decisions per second; decisions/fill and fill_alloc% (GPU
// allocation when the fill stopped, mean over fills); cache_hit% (Session score-cache hits over
// lookups, 0 when the cache is off).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
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
constexpr int kStopAllocPermille = 900;
// Fills cycled through per benchmark: fill k samples its tasks with seed 42 + k.
constexpr int kFills = 3;

// An empty cluster and the trace's requests expressed in its GPU model ids.
struct Workload {
  ClusterState empty;
  std::vector<TaskRequest> pool;
  TypicalTasks typical;
};

// `n` nodes with openb's node mix: each distinct (CPU, memory, GPU count, GPU model) type gets its
// share of `n` by largest remainder, the nodes are shuffled with `seed` and named synth-node-NNNNN.
std::vector<OpenbNodeRow> Synthesize(const std::vector<OpenbNodeRow>& base, size_t n, uint64_t seed) {
  using Type = std::tuple<MilliCpu, MemMiB, int32_t, std::string>;
  std::map<Type, size_t> counts;
  for (const OpenbNodeRow& r : base) ++counts[{r.cpu_milli, r.mem_mib, r.gpus, r.model}];
  std::vector<std::pair<Type, size_t>> quota;
  std::vector<std::pair<size_t, size_t>> remainder;  // (remainder, index into quota)
  size_t assigned = 0;
  for (const auto& [type, count] : counts) {
    const size_t exact = count * n;
    remainder.emplace_back(exact % base.size(), quota.size());
    quota.emplace_back(type, exact / base.size());
    assigned += exact / base.size();
  }
  std::sort(remainder.begin(), remainder.end(), [](auto a, auto b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  for (size_t i = 0; assigned < n; ++i, ++assigned) ++quota[remainder[i].second].second;

  std::vector<OpenbNodeRow> rows;
  rows.reserve(n);
  for (const auto& [type, count] : quota) {
    for (size_t i = 0; i < count; ++i) {
      OpenbNodeRow r;
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

StatusOr<Workload> MakeWorkload(const std::vector<OpenbNodeRow>& rows, const std::string& label,
                                const OpenbTaskList& tasks) {
  auto cluster = BuildOpenbCluster(rows, label);
  if (!cluster.ok()) return cluster.status();
  auto reqs = OpenbRequests(tasks, cluster->models());
  if (!reqs.ok()) return reqs.status();
  Workload w;
  w.empty = std::move(cluster).value();
  w.pool = std::move(reqs).value();
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

// Pool indices with total GPU demand of at least the cluster's capacity: enough for any fill to
// reach 90% allocation or fail first.
std::vector<uint32_t> SampleStream(const Workload& w, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint32_t> s;
  int64_t demand = 0;
  while (demand < w.empty.total_gpu_milli()) {
    const uint32_t i = static_cast<uint32_t>(rng.Uniform(w.pool.size()));
    demand += w.pool[i].TotalGpuMilli();
    s.push_back(i);
  }
  return s;
}

struct FillStats {
  int64_t decisions = 0;
  double alloc_pct = 0;
  uint64_t cache_hits = 0, cache_lookups = 0;
};

// One fill with everything set up: a fresh cluster copy and a Session opened over it.
class Fill {
 public:
  Fill(const Workload& w, const PolicyConfig& policy, bool score_cache, uint64_t seed)
      : w_(w), stream_(SampleStream(w, seed)), state_(w.empty), ctx_{&state_, &w.typical} {
    state_.Reserve(stream_.size(), stream_.size());
    SessionOptions so;
    so.policy = policy;
    so.seed = seed ^ 0x5eed5eed5eed5eedULL;
    so.score_cache = score_cache;
    auto s = Session::Open(state_, BuiltinRegistry(), ctx_, so);
    ESTUARY_CHECK(s.ok());
    session_ = std::move(s).value();
  }
  Fill(const Fill&) = delete;
  Fill& operator=(const Fill&) = delete;

  FillStats Run() {
    const int64_t stop = state_.total_gpu_milli() * kStopAllocPermille / 1000;
    FillStats f;
    for (uint32_t i : stream_) {
      const JobId job = state_.AddJob(JobSpec());
      state_.AddTask(job, std::string(), w_.pool[i]);
      ++f.decisions;
      if (!AllocateAction::TryStart(*session_, state_, job).started) break;
      if (state_.allocated_gpu_milli() >= stop) break;
    }
    ESTUARY_CHECK(f.decisions < static_cast<int64_t>(stream_.size()) || state_.allocated_gpu_milli() >= stop);
    f.alloc_pct = 100.0 * static_cast<double>(state_.allocated_gpu_milli()) / static_cast<double>(state_.total_gpu_milli());
    f.cache_hits = session_->cache_hits();
    f.cache_lookups = session_->cache_hits() + session_->cache_misses();
    return f;
  }

 private:
  const Workload& w_;
  std::vector<uint32_t> stream_;
  ClusterState state_;
  PluginContext ctx_;
  std::unique_ptr<Session> session_;
};

void BM_Place(benchmark::State& st, const std::string& policy_name, const std::string& cluster, bool score_cache) {
  auto w = GetWorkload(cluster);
  if (!w.ok()) {
    st.SkipWithError(w.status().message().c_str());
    return;
  }
  auto policy = OpenbPolicy(policy_name);
  ESTUARY_CHECK(policy.ok());
  auto seed = [](int k) { return static_cast<uint64_t>(42 + k); };

  // Decisions per fill, from untimed dry runs (score_cache does not change decisions).
  static std::map<std::pair<std::string, std::string>, std::vector<int64_t>> lengths;
  std::vector<int64_t>& len = lengths[{policy_name, cluster}];
  for (int k = static_cast<int>(len.size()); k < kFills; ++k) len.push_back(Fill(**w, *policy, true, seed(k)).Run().decisions);

  int k = 0;
  auto fill = std::make_unique<Fill>(**w, *policy, score_cache, seed(k));
  int64_t fills = 0;
  double alloc_sum = 0;
  uint64_t hits = 0, lookups = 0;
  while (st.KeepRunningBatch(len[k])) {
    const FillStats f = fill->Run();
    st.PauseTiming();
    ESTUARY_CHECK(f.decisions == len[k]);
    ++fills;
    alloc_sum += f.alloc_pct;
    hits += f.cache_hits;
    lookups += f.cache_lookups;
    k = (k + 1) % kFills;
    fill.reset();
    fill = std::make_unique<Fill>(**w, *policy, score_cache, seed(k));
    st.ResumeTiming();
  }
  st.SetItemsProcessed(st.iterations());
  st.counters["fills"] = static_cast<double>(fills);
  st.counters["decisions/fill"] = static_cast<double>(st.iterations()) / static_cast<double>(fills);
  st.counters["fill_alloc%"] = alloc_sum / static_cast<double>(fills);
  st.counters["cache_hit%"] = lookups == 0 ? 0.0 : 100.0 * static_cast<double>(hits) / static_cast<double>(lookups);
  st.counters["nodes"] = static_cast<double>((*w)->empty.num_nodes());
}

const bool registered = [] {
  struct Case {
    const char* policy;
    const char* cluster;
    bool score_cache;
  };
  for (const Case& c : {Case{"best-fit", "openb", true}, Case{"fgd", "openb", true}, Case{"fgd", "openb", false},
                        Case{"best-fit", "20k", true}, Case{"fgd", "20k", true}}) {
    std::string name = std::string("BM_Place/") + c.policy + "/" + c.cluster + (c.score_cache ? "" : "/no-score-cache");
    benchmark::RegisterBenchmark(name.c_str(), BM_Place, std::string(c.policy), std::string(c.cluster), c.score_cache)
        ->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace
}  // namespace estuary
