// The cycle as a fixed point over configurations no example combines. Each instance draws a
// scheduler configuration from the schema's options (placement policy, queue order, Reclaim and
// its victim rules, Absorb, Standby, topology and packing, holds, EASY or conservative backfill,
// periodic or triggered defragmentation with assembly, survivor holds, multi-tenant queues and
// their sharing) and a day of mixed work on a generated cluster of 1,024 GPUs (single GPUs and
// whole nodes with walltimes, gangs preferring or requiring one ASW, elastic LP jobs, spot jobs,
// HP training; with some seeds HP services in Standby windows and node failures), and runs it
// with checks: ClusterState's invariants after every event time, and after every cycle a second
// cycle at the same time that must decide nothing (ScenarioRun::CheckFixedPoint) — what makes a
// service, which runs cycles at its own rhythm, decide as the simulator does.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "common/rng.h"
#include "sim/simulate.h"

namespace estuary {
namespace {

const std::string kExamples = std::string(ESTUARY_SOURCE_DIR) + "/examples/";

// One of `options`, drawn from `rng`.
const char* OneOf(Rng& rng, const std::vector<const char*>& options) { return options[rng.Uniform(options.size())]; }

bool Coin(Rng& rng, int percent) { return static_cast<int>(rng.Uniform(100)) < percent; }

struct Instance {
  std::string yaml;
  std::string configuration;  // the drawn configuration's line, for the failure message
};

Instance Draw(uint64_t seed) {
  Rng rng(seed * 7919 + 13);
  const bool queues = Coin(rng, 50), services = Coin(rng, 40), failures = Coin(rng, 50);
  const bool topology = Coin(rng, 75);
  std::ostringstream y;
  y << "name: fixed-point-" << seed << "\nduration_s: 86400\nsample_interval_s: 3600\nseeds: [" << seed << "]\n"
    << "cluster:\n  generate: {total_gpus: 1024, seed: " << seed << "}\n";
  if (services) {
    y << "tidal:\n  curve: curves/genai-diurnal.csv\n  start_hour: " << rng.Uniform(24)
      << "\n  services: {count: 4, replicas_min: 2, replicas_max: 8, gpus: 4, cpu_cores: 32, memory_gib: 128,"
         " phase_jitter_s: 3600, step_s: 300"
      << (queues ? ", queue: a1" : "") << "}\n";
  }
  if (queues) {
    y << "queues:\n"
         "  - {name: org-a, guarantee: {gpus: 384}, weight: 1}\n"
         "  - {name: a1, parent: org-a, guarantee: {gpus: 256}, weight: 2}\n"
         "  - {name: a2, parent: org-a, guarantee: {gpus: 128}, weight: 1, limit: {gpus: 512}}\n"
         "  - {name: org-b, guarantee: {gpus: 384}, weight: 1}\n"
         "  - {name: b1, parent: org-b, guarantee: {gpus: 256}, weight: 1}\n"
         "  - {name: b2, parent: org-b, weight: 3}\n";
  }
  // The classes, each in a queue when there are queues (a1, a2, b1, b2 in turn).
  const char* leaves[] = {"a1", "a2", "b1", "b2"};
  int next_leaf = static_cast<int>(rng.Uniform(4));
  const auto queue = [&]() -> std::string {
    if (!queues) return "";
    return std::string(", queue: ") + leaves[next_leaf++ % 4];
  };
  y << "generator:\n  arrivals_per_hour: " << 40 + rng.Uniform(60) << "\n  classes:\n";
  y << "    - {share: 30, class: spot, replicas: {min: 1, max: 2}, gpus: 1, cpu_cores: 8, memory_gib: 32,"
       " duration_mean_s: 3600, checkpoint_interval_s: 1800, restart_cost_s: 60, walltime_s: 14400"
    << queue() << "}\n";
  y << "    - {share: 20, class: lp, replicas: 1, gpus: 8, cpu_cores: 64, memory_gib: 512, duration_mean_s: 7200,"
       " walltime_s: 21600"
    << queue() << "}\n";
  y << "    - {share: 10, class: lp, replicas: {min: 2, max: 16, step: 2}, scaling: linear, gpus: 1, cpu_cores: 8,"
       " memory_gib: 64, duration_mean_s: 7200, checkpoint_interval_s: 1800, restart_cost_s: 120"
    << queue() << "}\n";
  y << "    - {share: 6, class: lp, replicas: 4, gpus: 8, cpu_cores: 64, memory_gib: 512, duration_mean_s: 10800,"
       " plane: data, preferred_level: asw, walltime_s: 43200"
    << queue() << "}\n";
  y << "    - {share: 3, class: hp-training, replicas: 8, gpus: 8, cpu_cores: 64, memory_gib: 512,"
       " duration_mean_s: 14400, plane: data, required_level: asw"
    << (Coin(rng, 50) ? ", required_max_wait_s: 1800" : "") << queue() << "}\n";
  y << "    - {share: 4, class: hp-training, replicas: 1, gpus: 8, cpu_cores: 64, memory_gib: 512,"
       " duration_mean_s: 7200"
    << queue() << "}\n";
  y << "network: {plane: data, level: asw, cross_domain_slowdown_pct: 27, comm_share_pct: 40}\n";
  if (failures) y << "failures: {node_mtbf_h: 300, repair_s: 3600, seed: " << seed << "}\n";

  // The configuration.
  std::ostringstream c;
  c << "{name: drawn, policy: " << OneOf(rng, {"best-fit", "k8s-fit", "volcano-binpack", "kai-binpack", "dotprod"});
  c << ", queue: " << OneOf(rng, {"priority", "priority", "fifo"});
  if (Coin(rng, 25)) c << ", align: false";
  c << ", topology: " << (topology ? "true" : "false");
  if (topology && Coin(rng, 50)) c << ", pack: {plane: data, level: asw}";
  if (Coin(rng, 75)) {
    const char* victims = topology ? OneOf(rng, {"estuary", "volcano"}) : OneOf(rng, {"estuary", "k8s", "volcano"});
    c << ", preempt: {grace_s: " << OneOf(rng, {"30", "60", "120"}) << ", victims: " << victims;
    if (Coin(rng, 30)) c << ", preemptor_min_priority: 0";
    c << "}";
  }
  if (Coin(rng, 60)) c << ", absorb: true";
  if (services || Coin(rng, 30)) c << ", standby: {grace_s: 60}";
  if (failures && Coin(rng, 60)) c << ", hold_survivors: true";
  if (Coin(rng, 40)) {
    c << ", reserve: {after_s: " << OneOf(rng, {"0", "300", "1800"}) << ", min_gpus: 32, replan_s: "
      << OneOf(rng, {"60", "300"}) << ", drain_after_s: " << OneOf(rng, {"0", "1200"}) << "}";
  }
  c << ", backfill: " << OneOf(rng, {"off", "easy", "conservative", "{mode: conservative, depth: 5}", "{mode: easy, interval_s: 120}"});
  switch (rng.Uniform(4)) {
    case 0: break;
    case 1: c << ", defrag: {interval_s: 3600}"; break;
    case 2: c << ", defrag: {trigger_after_s: 600, trigger_min_gpus: 8, assemble: true}"; break;
    default: c << ", defrag: {interval_s: 7200, trigger_after_s: 900, chain_depth: 1}"; break;
  }
  if (queues) {
    c << ", sharing: "
      << OneOf(rng, {"{}", "{borrow: false}", "{reclaim: false}", "{weights: false, cooldown_s: 0, reborrow_s: 0}",
                     "{reclaim_to: fair-share, usage_half_life_s: 7200}", "{rebalance: false, budget_period_s: 300}"});
  }
  c << "}";
  y << "configurations:\n  - " << c.str() << "\n";
  return Instance{y.str(), c.str()};
}

class FixedPoint : public ::testing::TestWithParam<uint64_t> {};

TEST_P(FixedPoint, ADrawnConfigurationEndsEveryCycleAtAFixedPointWithItsInvariantsKept) {
  const Instance in = Draw(GetParam());
  auto sc = ParseScenario(in.yaml, kExamples + "fixed-point.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().message() << "\n" << in.yaml;
  auto cluster = LoadScenarioCluster(*sc);
  ASSERT_TRUE(cluster.ok()) << cluster.status().message();
  auto r = RunScenario(*sc, *cluster, sc->configurations[0], sc->seeds[0], /*check_invariants=*/true);
  ASSERT_TRUE(r.ok()) << r.status().message() << "\nconfiguration: " << in.configuration;
  // It measures what it claims: work ran.
  EXPECT_GT(r->metrics.at("jobs_started_count"), 100) << in.configuration;
}

INSTANTIATE_TEST_SUITE_P(Seeds, FixedPoint, ::testing::Range<uint64_t>(1, 25));
// Seeds that found a cycle ending short of its fixed point (2026-12-06, seeds 1-624 drawn), each
// failing without its fix (docs/service.md, "Durability and recovery"):
// - 72 (at t=20,640 s): conservative backfill found no job to plan for (the one waiting held
//   nodes of its own); a renewal of the reserve action's holds after it released that hold, and a
//   second cycle planned for the job (Engine::BackfillDue);
// - 80 (t=79,891 s): a Reclaim's plan released its job's hold on nodes whose only room was GPUs
//   Standby replicas lend; a second cycle started spot jobs there (Engine::FreedSinceAllocate);
// - 96 (t=4,882 s): backfill planned a spot job on nodes with lent GPUs, which it could take at
//   once on its own hold (its plan's start counts free capacity only); a second cycle started it;
// - 332 (t=11,035 s): a job that started on its own hold left GPUs of it free, which a job the
//   queue's pass had tried before it could take; a second cycle started that one (TryQueue runs
//   the pass again after such a start).
// Seeds 548, 619 and 621 still fail (not here: docs/service.md says what is known of them).
INSTANTIATE_TEST_SUITE_P(Found, FixedPoint, ::testing::Values<uint64_t>(72, 80, 96, 332));

}  // namespace
}  // namespace estuary
