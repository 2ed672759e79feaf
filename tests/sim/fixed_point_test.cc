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

// `more`: also the options and the work the first draws leave out — every placement policy, shared
// GPUs (gpu_milli below 1000), dev jobs that checkpoint on notice, elastic jobs with a usable step,
// gangs requiring a spine and preferring one ASW, graceful exit times, Standby lending to LP,
// holds for several jobs, defragmentation by domains with move limits, queues with a lending
// limit, one that does not reclaim and one not reclaimable, and the sharing options' other values.
// (Without it the draws are as they were, so that the seeds listed below find what they found.)
// `within_queue`: with queues always, and preemption within a queue (sharing.within_queue) added
// to whichever sharing is drawn (the draws are otherwise those of the same seed without it).
Instance Draw(uint64_t seed, bool more = false, bool within_queue = false) {
  Rng rng(more ? seed * 104729 + 7 : seed * 7919 + 13);
  const bool queues = Coin(rng, 50) || within_queue, services = Coin(rng, 40), failures = Coin(rng, 50);
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
  if (queues && !more) {
    y << "queues:\n"
         "  - {name: org-a, guarantee: {gpus: 384}, weight: 1}\n"
         "  - {name: a1, parent: org-a, guarantee: {gpus: 256}, weight: 2}\n"
         "  - {name: a2, parent: org-a, guarantee: {gpus: 128}, weight: 1, limit: {gpus: 512}}\n"
         "  - {name: org-b, guarantee: {gpus: 384}, weight: 1}\n"
         "  - {name: b1, parent: org-b, guarantee: {gpus: 256}, weight: 1}\n"
         "  - {name: b2, parent: org-b, weight: 3}\n";
  } else if (queues) {
    y << "queues:\n"
         "  - {name: org-a, guarantee: {gpus: 384}, weight: 1, lend_limit: {gpus: 128}}\n"
         "  - {name: a1, parent: org-a, guarantee: {gpus: 256}, weight: 2}\n"
         "  - {name: a2, parent: org-a, guarantee: {gpus: 128}, weight: 1, limit: {gpus: 512}"
      << (Coin(rng, 50) ? ", reclaim: false" : "") << "}\n"
      << "  - {name: org-b, guarantee: {gpus: 384}, weight: 1}\n"
         "  - {name: b1, parent: org-b, guarantee: {gpus: 256}, weight: 1}\n"
         "  - {name: b2, parent: org-b, weight: 3"
      << (Coin(rng, 50) ? ", reclaimable: false" : "") << "}\n";
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
  if (more) {
    y << "    - {share: 15, class: lp, replicas: 1, gpus: 1, gpu_milli: " << OneOf(rng, {"250", "500"})
      << ", cpu_cores: 2, memory_gib: 16, duration_mean_s: 3600, walltime_s: 7200" << queue() << "}\n";
    y << "    - {share: 5, class: dev, replicas: {min: 1, max: 4}, gpus: 2, cpu_cores: 16, memory_gib: 128,"
         " duration_mean_s: 5400, checkpoint_interval_s: 900, checkpoint_on_notice_s: 30"
      << queue() << "}\n";
    y << "    - {share: 5, class: lp, replicas: {min: 2, max: 8, step: 2}, usable_step: 4, scaling: linear, gpus: 4,"
         " cpu_cores: 32, memory_gib: 256, duration_mean_s: 7200, checkpoint_interval_s: 1800"
      << queue() << "}\n";
    y << "    - {share: 2, class: lp, replicas: 16, gpus: 8, cpu_cores: 64, memory_gib: 512, duration_mean_s: 7200,"
         " plane: data, required_level: spine, preferred_level: asw"
      << queue() << "}\n";
  }
  y << "network: {plane: data, level: asw, cross_domain_slowdown_pct: 27, comm_share_pct: 40}\n";
  if (failures) y << "failures: {node_mtbf_h: 300, repair_s: 3600, seed: " << seed << "}\n";

  // The configuration.
  std::ostringstream c;
  c << "{name: drawn, policy: "
    << (more ? OneOf(rng, {"best-fit", "dotprod", "gpu-clustering", "gpu-packing", "fgd", "random", "k8s-fit",
                           "volcano-binpack", "kai-binpack"})
             : OneOf(rng, {"best-fit", "k8s-fit", "volcano-binpack", "kai-binpack", "dotprod"}));
  c << ", queue: " << OneOf(rng, {"priority", "priority", "fifo"});
  if (Coin(rng, 25)) c << ", align: false";
  c << ", topology: " << (topology ? "true" : "false");
  if (topology && Coin(rng, 50)) c << ", pack: {plane: data, level: asw}";
  if (Coin(rng, 75)) {
    const char* victims = topology ? OneOf(rng, {"estuary", "volcano"}) : OneOf(rng, {"estuary", "k8s", "volcano"});
    c << ", preempt: {grace_s: " << OneOf(rng, {"30", "60", "120"}) << ", victims: " << victims;
    if (Coin(rng, 30)) c << ", preemptor_min_priority: 0";
    if (more && Coin(rng, 50)) c << ", exit_mean_s: 10, exit_p95_s: 25";
    c << "}";
  }
  if (Coin(rng, 60)) c << ", absorb: true";
  if (services || Coin(rng, 30)) c << ", standby: {grace_s: 60" << (more && Coin(rng, 50) ? ", lend_max_priority: 300" : "") << "}";
  if (failures && Coin(rng, 60)) c << ", hold_survivors: true";
  if (Coin(rng, 40)) {
    c << ", reserve: {after_s: " << OneOf(rng, {"0", "300", "1800"}) << ", min_gpus: 32, replan_s: "
      << OneOf(rng, {"60", "300"}) << ", drain_after_s: " << OneOf(rng, {"0", "1200"})
      << (more && Coin(rng, 50) ? ", max_jobs: 2, max_gpus: 128" : "") << "}";
  }
  c << ", backfill: " << OneOf(rng, {"off", "easy", "conservative", "{mode: conservative, depth: 5}", "{mode: easy, interval_s: 120}"});
  switch (rng.Uniform(more ? 5 : 4)) {
    case 4:
      c << ", defrag: {interval_s: 1800, max_moves: 8, per_node: 2, per_job: 4, objective: domains, objective_plane: data,"
           " objective_level: asw}";
      break;
    case 0: break;
    case 1: c << ", defrag: {interval_s: 3600}"; break;
    case 2: c << ", defrag: {trigger_after_s: 600, trigger_min_gpus: 8, assemble: true}"; break;
    default: c << ", defrag: {interval_s: 7200, trigger_after_s: 900, chain_depth: 1}"; break;
  }
  // A sharing option as drawn, with within_queue added when asked.
  const auto sharing = [&](const std::string& drawn) {
    if (!within_queue) return drawn;
    return drawn == "{}" ? std::string("{within_queue: true}") : "{within_queue: true, " + drawn.substr(1);
  };
  if (queues && more) {
    c << ", sharing: "
      << sharing(OneOf(rng, {"{}", "{borrow: false}", "{weights: false, cooldown_s: 0, reborrow_s: 0}", "{count_in_flight: false}",
                     "{reclaim_to: fair-share, usage_half_life_s: 7200}", "{usage_half_life_s: 3600, cooldown_s: 60, reborrow_s: 600}",
                     "{weights: false, count_in_flight: false, budget_period_s: 300}"}));
  } else if (queues) {
    c << ", sharing: "
      << sharing(OneOf(rng, {"{}", "{borrow: false}", "{reclaim: false}", "{weights: false, cooldown_s: 0, reborrow_s: 0}",
                             "{reclaim_to: fair-share, usage_half_life_s: 7200}", "{rebalance: false, budget_period_s: 300}"}));
  }
  c << "}";
  y << "configurations:\n  - " << c.str() << "\n";
  return Instance{y.str(), c.str()};
}

// Runs `in` with the checks: invariants and the fixed point after every cycle, no decision by a
// cycle run before the next input or due time (RunScenario's check_quiet), and no queue above its
// limit after any cycle.
void ExpectFixedPoint(const Instance& in) {
  auto sc = ParseScenario(in.yaml, kExamples + "fixed-point.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().message() << "\n" << in.yaml;
  auto cluster = LoadScenarioCluster(*sc);
  ASSERT_TRUE(cluster.ok()) << cluster.status().message();
  auto r = RunScenario(*sc, *cluster, sc->configurations[0], sc->seeds[0], /*check_invariants=*/true,
                       /*record_events=*/false, /*check_quiet=*/true);
  ASSERT_TRUE(r.ok()) << r.status().message() << "\nconfiguration: " << in.configuration;
  // It measures what it claims: work ran.
  EXPECT_GT(r->metrics.at("jobs_started_count"), 100) << in.configuration;
  // No queue above its limit after any cycle (limits are set once here; Standby restores need no
  // room, so a limit counts what a queue's Standby replicas lend).
  if (r->metrics.count("queue_limit_breaches_count") != 0) {
    EXPECT_EQ(r->metrics.at("queue_limit_breaches_count"), 0) << in.configuration;
  }
}

class FixedPoint : public ::testing::TestWithParam<uint64_t> {};

TEST_P(FixedPoint, ADrawnConfigurationEndsEveryCycleAtAFixedPointWithItsInvariantsKept) { ExpectFixedPoint(Draw(GetParam())); }

INSTANTIATE_TEST_SUITE_P(Seeds, FixedPoint, ::testing::Range<uint64_t>(1, 25));
// Seeds that found a cycle ending short of its fixed point (2026-12-06, seeds 1-1,024 drawn), each
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
//   the pass again after such a start);
// - 548 (t=19,790 s): the same with fair-share passes: a job started on its own hold in the first
//   pass, and jobs holding nodes that the pass had tried before it could take what it left free
//   (kept from borrowing, only the first pass tries them); a second cycle started them
//   (FairSharePasses reports a start on an own hold in either pass);
// - 619 (t=45,412 s) and 621 (t=9,581 s): Absorb, after the Reclaim action, grew a job that put
//   its queue above its entitlement; a second cycle's Reclaim took it back for a queue owed
//   capacity (RunCycle runs the actions again after a growth when queues reclaim; engine test
//   EngineQueues.AGrowthThatPutsAQueueAboveItsEntitlementIsReclaimedForInTheSameCycle);
// - 951 (t=40,803 s): a Reclaim planned anew released its job's hold, and a rebalance's plan for
//   another job took those nodes with the GPUs free on them; a second cycle started that job on
//   its hold at once (FreedSinceAllocate counts a released node held again by a waiting job).
INSTANTIATE_TEST_SUITE_P(Found, FixedPoint, ::testing::Values<uint64_t>(72, 80, 96, 332, 548, 619, 621, 951));

// The same over the wider draws (Draw's `more`).
class FixedPointMore : public ::testing::TestWithParam<uint64_t> {};

TEST_P(FixedPointMore, ADrawnConfigurationEndsEveryCycleAtAFixedPointWithItsInvariantsKept) {
  ExpectFixedPoint(Draw(GetParam(), true));
}

INSTANTIATE_TEST_SUITE_P(Seeds, FixedPointMore, ::testing::Range<uint64_t>(1, 13));
// Seeds 1-1,024 of these were run by hand (2026-12-06): 358 failed until a job kept from borrowing
// stopped standing for its shape (its room is its own: Engine::QueuePass), and passes since.
INSTANTIATE_TEST_SUITE_P(Found, FixedPointMore, ::testing::Values<uint64_t>(358));

// With preemption within a queue (sharing.within_queue): HP training jobs of a queue at its limit
// (a2's, or any queue's guarantee without borrowing) evict its lower-priority work.
class FixedPointWithinQueue : public ::testing::TestWithParam<uint64_t> {};

TEST_P(FixedPointWithinQueue, ADrawnConfigurationEndsEveryCycleAtAFixedPointWithItsInvariantsKept) {
  ExpectFixedPoint(Draw(GetParam(), GetParam() % 2 == 0, true));
}

// Seeds 1-80 were run (2026-12-07): all kept the fixed point; these are the ones whose jobs
// preempted within their queues most (counted with debug output: 108-119 such Reclaims in the
// day for 11, 15, 22 and 23, 83 for 79, 28 for 70 — at most 4 for one job).
INSTANTIATE_TEST_SUITE_P(Seeds, FixedPointWithinQueue, ::testing::Values<uint64_t>(11, 15, 22, 23, 70, 79));

}  // namespace
}  // namespace estuary
