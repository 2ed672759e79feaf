// The IPC planner (DefragAction) against the exact reference (SolveExactDefrag, CBC) on seeded
// random 25-node instances: the heuristic never claims more whole free nodes than the optimum
// (each checks the other) and frees within one node of it on at least 90% of the instances
// (issue 5; the full 100-instance distribution is bench/exact_defrag_bench.cc BM_IpcGapVsExact).
#include <gtest/gtest.h>

#include <cstdio>

#include "sched/actions/defrag.h"
#include "sched/exact/defrag_milp.h"
#include "sched/exact/random_instance.h"

namespace estuary {
namespace {

void CheckGap(int locked_pct, int instances) {
  int within_one = 0;
  for (int seed = 1; seed <= instances; ++seed) {
    const DefragInstance in = MakeRandomDefragInstance(25, locked_pct, static_cast<uint64_t>(seed));
    auto exact = SolveExactDefrag(in.state, in.nodes, in.locked);
    ASSERT_TRUE(exact.ok()) << exact.status().message();
    ASSERT_TRUE(exact->optimal) << seed;
    DefragOptions o;
    o.partition_nodes = 0;  // the instance is one partition
    const DefragPlan plan = DefragAction::Plan(in.state, in.locked, o);
    EXPECT_EQ(plan.whole_free_before, exact->whole_free_before) << seed;
    EXPECT_LE(plan.whole_free_after, exact->whole_free_after) << seed;
    within_one += plan.whole_free_after + 1 >= exact->whole_free_after;
  }
  EXPECT_GE(within_one * 10, instances * 9) << within_one << " of " << instances << " within one node";
}

TEST(DefragGap, IpcFreesWithinOneNodeOfTheOptimumWith40PercentLocked) { CheckGap(40, 20); }

TEST(DefragGap, IpcFreesWithinOneNodeOfTheOptimumWithNothingLocked) { CheckGap(0, 8); }

// The harder set (HardDefragInstanceOptions: locked shared-GPU tasks, CPU-only tasks, CPU and
// memory pressure, V100 and A100 nodes, pinned tasks), 40% locked, with the planner under the
// exact model's rule (move_cpu_only_tasks = false). The seeds are the first ten whose CBC solve
// took under 1 s (proven optimal) in the 100-instance run of docs/performance.md — chosen for the
// solver's speed, and because CBC 2.10.8 crashes on a few instances of this set (seeds 7, 15, 19,
// 35, 40, ...), not by the planner's result.
TEST(DefragGap, IpcFreesWithinOneNodeOfTheOptimumOnHarderInstances) {
  int within_one = 0, exact_match = 0;
  const int seeds[] = {1, 4, 14, 21, 26, 27, 28, 29, 37, 42};
  for (int seed : seeds) {
    const DefragInstance in =
        MakeRandomDefragInstance(HardDefragInstanceOptions(25, 40), static_cast<uint64_t>(seed));
    ExactDefragOptions eo;
    eo.time_limit_s = 10;
    auto exact = SolveExactDefrag(in.state, in.nodes, in.locked, eo);
    ASSERT_TRUE(exact.ok()) << exact.status().message();
    ASSERT_TRUE(exact->optimal) << seed;
    DefragOptions o;
    o.partition_nodes = 0;
    o.move_cpu_only_tasks = false;
    const DefragPlan plan = DefragAction::Plan(in.state, in.locked, o);
    EXPECT_EQ(plan.whole_free_before, exact->whole_free_before) << seed;
    EXPECT_LE(plan.whole_free_after, exact->whole_free_after) << seed;
    within_one += plan.whole_free_after + 1 >= exact->whole_free_after;
    exact_match += plan.whole_free_after == exact->whole_free_after;
  }
  EXPECT_GE(within_one, 9) << within_one << " of 10 within one node";
  std::printf("harder instances: %d of 10 within one node, %d at the optimum\n", within_one, exact_match);
}

}  // namespace
}  // namespace estuary
