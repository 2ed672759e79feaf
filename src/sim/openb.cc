#include "sim/openb.h"

#include <numeric>

#include "common/check.h"
#include "sched/actions/allocate.h"
#include "sched/plugins/register.h"

namespace estuary {

std::vector<uint32_t> OpenbTaskOrder(const OpenbWorkload& w, uint64_t seed, double tune) {
  Rng rng(seed);
  // The trace's tasks sorted by name, shuffled with the seed.
  std::vector<uint32_t> by_name(w.tasks.size());
  std::iota(by_name.begin(), by_name.end(), 0);
  std::stable_sort(by_name.begin(), by_name.end(), [&](uint32_t a, uint32_t b) { return w.names[a] < w.names[b]; });
  std::vector<uint32_t> order = by_name;
  rng.Shuffle(order);
  // Top-up: sample (with replacement) while requested + the sample's per-GPU milli stays within
  // tune x capacity, counting the sample's full request once added (the published code's rule).
  int64_t requested = 0;
  for (uint32_t i : order) requested += w.tasks[i].TotalGpuMilli();
  const double target = tune * static_cast<double>(w.cluster.total_gpu_milli());
  if (static_cast<double>(requested) < target) {
    for (;;) {
      const uint32_t i = by_name[rng.Uniform(by_name.size())];
      if (static_cast<double>(requested + w.tasks[i].gpu_milli) > target) break;
      requested += w.tasks[i].TotalGpuMilli();
      order.push_back(i);
    }
  }
  return order;
}

std::string TaskShape(const TaskRequest& r) {
  if (!r.NeedsGpu()) return "cpu-only";
  if (r.IsSharedGpu()) return "shared-gpu(" + std::to_string(r.gpu_milli) + "m)";
  return std::to_string(r.gpu_count) + "-gpu";
}

namespace {

// Plans a migration that makes room for pending `task` and applies it: each move binds the task
// at its target (Unbind from the source, Bind at the planned GPUs — in this timeless protocol the
// two are one step; the plan guarantees the target had room while the source still held it),
// then the task is bound at the planned node and GPUs. Returns false, changing nothing, when no
// bounded migration makes room (or `memo` knows there is none).
bool PlaceByMigration(ClusterState& state, TaskId task, const MigrateOptions& mo, MigrationMemo& memo,
                      FragmentationTracker& frag, OpenbSeedResult& res) {
  const TaskRequest& req = state.task(task).req;
  if (memo.KnownInfeasible(state, req)) return false;
  ++res.migration_searches;
  const MigrationPlan plan = MigrateToFit::Plan(state, task, mo);
  if (!plan.feasible) {
    memo.RecordInfeasible(state, req);
    return false;
  }
  res.migration_ejections += plan.ejections;
  for (const MigrationMove& m : plan.moves) {
    state.Unbind(m.task);
    ESTUARY_CHECK(state.CanBind(m.task, m.to, m.gpus));
    state.Bind(m.task, m.to, m.gpus);
    frag.Update(m.to);
    ++res.migrations;
    res.migrated_gpu_milli += state.task(m.task).req.TotalGpuMilli();
  }
  ESTUARY_CHECK(state.CanBind(task, plan.node, plan.gpus));
  state.Bind(task, plan.node, plan.gpus);
  frag.Update(plan.node);
  ++res.placed_by_migration;
  return true;
}

StatusOr<OpenbSeedResult> RunSeed(const OpenbWorkload& w, const OpenbOptions& o, const PolicyConfig& policy,
                                  size_t seed_index) {
  OpenbSeedResult res;
  res.seed = o.seeds[seed_index];
  ClusterState state = w.cluster;
  const std::vector<uint32_t> order = OpenbTaskOrder(w, res.seed, o.tune);
  state.Reserve(order.size(), order.size());

  PluginContext ctx{&state, &w.typical};
  SessionOptions so;
  so.policy = policy;
  so.tie_break = o.tie_break;
  so.indexed = o.indexed;
  so.seed = res.seed ^ 0x5eed5eed5eed5eedULL;  // a stream apart from the workload's
  auto session = Session::Open(state, BuiltinRegistry(), ctx, so);
  if (!session.ok()) return session.status();

  FragmentationTracker frag(state, w.typical);
  MigrationMemo memo;
  ArrivalCurve alloc_curve, frag_ratio_curve, frag_amount_curve;
  const double capacity = static_cast<double>(state.total_gpu_milli());
  int64_t arrived = 0;
  auto record = [&] {
    const double arrived_pct = 100.0 * static_cast<double>(arrived) / capacity;
    alloc_curve.Add(arrived_pct, 100.0 * static_cast<double>(state.allocated_gpu_milli()) / capacity);
    frag_ratio_curve.Add(arrived_pct, frag.FragRatioPct());
    frag_amount_curve.Add(arrived_pct, frag.FragMilli() / 1000.0);
  };
  record();
  for (size_t k = 0; k < order.size(); ++k) {
    const TaskRequest& req = w.tasks[order[k]];
    JobSpec js;
    js.name = w.names[order[k]];
    const JobId job = state.AddJob(js);
    const TaskId task =
        state.AddTask(job, js.name, req, 0, order[k] < w.qos.size() ? w.qos[order[k]] : std::string());
    const JobAttempt a = AllocateAction::TryStart(**session, state, job);
    arrived += req.TotalGpuMilli();
    ++res.tasks_arrived;
    if (a.started) {
      ++res.tasks_placed;
      frag.Update(state.task(task).node);
    } else if (o.migrate_on_failure && PlaceByMigration(state, task, o.migrate, memo, frag, res)) {
      ++res.tasks_placed;
    } else {
      ++res.tasks_failed;
      ++res.failed_by_shape[TaskShape(req)];
      state.Finish(task);  // failed tasks are dropped
    }
    record();
    if (o.check_invariants) {
      Status st = state.CheckInvariants();
      if (!st.ok()) return Internal("seed " + std::to_string(res.seed) + " task " + std::to_string(k) + ": " + st.message());
    }
    if (o.progress) o.progress(seed_index, k + 1, order.size());
  }
  res.gpu_alloc_pct = 100.0 * static_cast<double>(state.allocated_gpu_milli()) / capacity;
  res.frag_ratio_pct = frag.FragRatioPct();
  res.frag_gpu_milli = frag.FragMilli();
  res.arrived_gpu_pct = 100.0 * static_cast<double>(arrived) / capacity;
  res.alloc_curve = alloc_curve.Values();
  res.frag_ratio_curve = frag_ratio_curve.Values();
  res.frag_amount_curve = frag_amount_curve.Values();
  res.cache_hits = (*session)->cache_hits();
  res.cache_misses = (*session)->cache_misses();
  return res;
}

}  // namespace

StatusOr<OpenbResult> RunOpenb(const OpenbWorkload& w, const OpenbOptions& o) {
  auto policy = OpenbPolicy(o.policy);
  if (!policy.ok()) return policy.status();
  if (o.seeds.empty()) return InvalidArgument("no seeds given");
  if (!(o.tune > 0)) return InvalidArgument("tune must be positive");
  if (w.cluster.total_gpu_milli() == 0) return InvalidArgument("the cluster has no GPUs");
  if (o.migrate_on_failure) ESTUARY_RETURN_IF_ERROR(MigrateToFit::Validate(o.migrate));
  OpenbResult r;
  r.migrate_on_failure = o.migrate_on_failure;
  r.max_moves = o.migrate_on_failure ? o.migrate.max_moves : 0;
  r.policy = o.policy;
  r.tie_break = o.tie_break;
  r.tune = o.tune;
  std::vector<Curve> alloc, fr, fa;
  for (size_t i = 0; i < o.seeds.size(); ++i) {
    auto s = RunSeed(w, o, *policy, i);
    if (!s.ok()) return s.status();
    r.gpu_alloc_pct_mean += s->gpu_alloc_pct / static_cast<double>(o.seeds.size());
    r.frag_ratio_pct_mean += s->frag_ratio_pct / static_cast<double>(o.seeds.size());
    alloc.push_back(s->alloc_curve);
    fr.push_back(s->frag_ratio_curve);
    fa.push_back(s->frag_amount_curve);
    r.seeds.push_back(std::move(s).value());
  }
  r.alloc_curve_mean = MeanCurve(alloc);
  r.frag_ratio_curve_mean = MeanCurve(fr);
  r.frag_amount_curve_mean = MeanCurve(fa);
  return r;
}

}  // namespace estuary
