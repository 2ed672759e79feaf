// Google Benchmark of the live service's engine rebuild (issue 7: src/server/service.h,
// ServiceOptions::compact_min_jobs). The service runs in this process over its SQLite store
// (synchronous=normal, a temporary directory) on a clock the benchmark moves; no HTTP, no agents
// (the benchmark reports for them).
//
// BM_EngineRebuild/nodes:N/jobs:J — N 8-GPU nodes (the fake agent's layout) and J jobs of 1, 2, 4
// or 8 GPUs (1-2 replicas, cycling) submitted, started and reported running; then two of every
// three are cancelled, so that the engine knows more than twice the jobs it runs. One loop pass then rebuilds the
// engine (compact_min_jobs 0; the check is due): rebuild_pass_ms is that pass, plain_pass_ms the
// next one (nothing to do), live and known the jobs before the rebuild; `rebuilt` must be 1. The
// setup (submissions, stored one by one) is not timed. Iterations(1): each figure is one rebuild.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "agent/fake_agent.h"
#include "server/service.h"
#include "store/sqlite_store.h"

namespace estuary {
namespace {

class ManualClock final : public Clock {
 public:
  SimTime Now() const override { return ms / 1000; }
  int64_t NowMs() const override { return ms; }
  int64_t ms = 1'000'000'000'000;
};

int64_t Counter(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + name.size() + 2));
}

void BM_EngineRebuild(benchmark::State& st) {
  const int nodes = static_cast<int>(st.range(0));
  const int jobs = static_cast<int>(st.range(1));
  for (auto _ : st) {
    char tmpl[] = "/tmp/estuary-service-bench-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      st.SkipWithError("mkdtemp failed");
      return;
    }
    const std::string dir = tmpl;
    {
      SqliteOptions so;
      so.synchronous_normal = true;
      auto store = SqliteStore::Open(dir, so);
      if (!store.ok()) {
        st.SkipWithError(store.status().message().c_str());
        return;
      }
      ManualClock clock;
      ServiceOptions o;
      o.compact_min_jobs = 0;
      o.compact_check_ms = 3'600'000;
      o.heartbeat_timeout_ms = 7'200'000;
      auto service = Service::Open(store->get(), &clock, o);
      if (!service.ok()) {
        st.SkipWithError(service.status().message().c_str());
        return;
      }
      Service& s = **service;
      const Principal agent{Role::kAgent, "rack"}, tenant{Role::kTenant, "team"}, admin{Role::kAdmin, "ops"};
      std::vector<NodeRegistration> regs;
      for (const AgentNode& n : FakeNodes("rack", nodes, 8, "H800")) {
        regs.push_back({n.name, n.gpus, n.gpu_model, n.cpu_milli, n.memory_mib, n.domains, ""});
      }
      if (!s.RegisterNodes(agent, regs).ok()) {
        st.SkipWithError("registration failed");
        return;
      }
      s.RunOnce();  // the first pass checks (nothing to rebuild) and starts the check period
      std::vector<uint64_t> ids;
      for (int i = 0; i < jobs; ++i) {
        JobRequest r;
        r.name = "j" + std::to_string(i);
        r.min_replicas = r.max_replicas = 1 + i % 2;
        r.gpus = 1 << (i % 4);
        r.cpu_milli = 1000;
        r.memory_mib = 1024;
        r.priority = i % 5 == 0 ? 900 : 300;
        r.preemptible = i % 5 != 0;
        auto id = s.Submit(tenant, r);
        if (!id.ok()) {
          st.SkipWithError("submission failed");
          return;
        }
        ids.push_back(*id);
      }
      clock.ms += 1;
      s.RunOnce();
      std::vector<TaskReport> running;
      for (uint64_t id : ids) {
        for (int r = 0; r < 2; ++r) running.push_back({std::to_string(id) + "-" + std::to_string(r), TaskReport::State::kRunning, ""});
      }
      (void)s.Report(agent, running, /*durable=*/false);
      clock.ms += 1;
      s.RunOnce();
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i % 3 != 0) (void)s.Cancel(tenant, ids[i]);
      }
      clock.ms += 1;
      s.RunOnce();
      int64_t live = 0;
      for (const JobView& v : s.ListJobs(admin)) live += v.phase == JobPhase::kPending || v.phase == JobPhase::kRunning;
      clock.ms += o.compact_check_ms;
      (void)s.Heartbeat(agent, {});
      const auto t0 = std::chrono::steady_clock::now();
      s.RunOnce();
      const auto t1 = std::chrono::steady_clock::now();
      clock.ms += 1;
      s.RunOnce();
      const auto t2 = std::chrono::steady_clock::now();
      st.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
      st.counters["rebuild_pass_ms"] = std::chrono::duration<double, std::milli>(t1 - t0).count();
      st.counters["plain_pass_ms"] = std::chrono::duration<double, std::milli>(t2 - t1).count();
      st.counters["live"] = static_cast<double>(live);
      st.counters["known"] = static_cast<double>(jobs);
      st.counters["rebuilt"] = static_cast<double>(Counter(s.MetricsText(), "estuary_engine_compactions_total"));
      st.counters["invariants_ok"] = s.CheckInvariants().ok() ? 1 : 0;
    }
    std::filesystem::remove_all(dir);
  }
}
BENCHMARK(BM_EngineRebuild)
    ->ArgNames({"nodes", "jobs"})
    ->Args({2000, 8000})
    ->Args({20000, 40000})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace estuary
