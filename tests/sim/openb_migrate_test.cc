// The openb protocol with migration on failure (issue 5): on a tiny cluster, an arriving task that
// fits nowhere is placed after a bounded migration; invariants are checked after every step.
#include <gtest/gtest.h>

#include "sim/openb.h"
#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::ClusterBuilder;
using testing::Gpus;
using testing::Req;

// Two 2-GPU nodes and three tasks: two 1-GPU tasks and one 2-GPU task (100% of capacity, tune 1
// adds no top-up). Under the random policy the 1-GPU tasks land on different nodes for some
// seeds; when the 2-GPU task arrives last it then fits nowhere — unless one of them moves.
OpenbWorkload TinyWorkload() {
  ClusterBuilder c;
  c.AddNode("n0", Gpus(2));
  c.AddNode("n1", Gpus(2));
  OpenbWorkload w;
  w.cluster = c.state;
  w.tasks = {Req().Gpus(1).Cpu(1000), Req().Gpus(1).Cpu(1000), Req().Gpus(2).Cpu(1000)};
  w.names = {"a", "b", "big"};
  w.typical = TypicalTasks::FromWorkload(w.tasks);
  return w;
}

OpenbOptions Options(bool migrate) {
  OpenbOptions o;
  o.policy = "random";
  o.tune = 1.0;
  o.check_invariants = true;
  for (uint64_t s = 1; s <= 24; ++s) o.seeds.push_back(s);
  o.migrate_on_failure = migrate;
  return o;
}

TEST(OpenbMigrateOnFailure, PlacesEveryTaskThatOtherwiseFails) {
  const OpenbWorkload w = TinyWorkload();
  auto without = RunOpenb(w, Options(false));
  ASSERT_TRUE(without.ok()) << without.status().message();
  auto with = RunOpenb(w, Options(true));
  ASSERT_TRUE(with.ok()) << with.status().message();
  ASSERT_EQ(without->seeds.size(), with->seeds.size());
  int failing_seeds = 0;
  for (size_t i = 0; i < with->seeds.size(); ++i) {
    const OpenbSeedResult& a = without->seeds[i];
    const OpenbSeedResult& b = with->seeds[i];
    ASSERT_LE(a.tasks_failed, 1) << a.seed;
    failing_seeds += a.tasks_failed;
    EXPECT_EQ(a.migrations, 0) << a.seed;
    // With migration nothing fails: the failed 2-GPU task is placed after exactly one 1-GPU move.
    EXPECT_EQ(b.tasks_arrived, 3) << b.seed;
    EXPECT_EQ(b.tasks_placed, 3) << b.seed;
    EXPECT_EQ(b.tasks_failed, 0) << b.seed;
    EXPECT_EQ(b.placed_by_migration, a.tasks_failed) << b.seed;
    EXPECT_EQ(b.migrations, a.tasks_failed) << b.seed;
    EXPECT_EQ(b.migrated_gpu_milli, 1000 * a.tasks_failed) << b.seed;
    EXPECT_DOUBLE_EQ(b.gpu_alloc_pct, 100.0) << b.seed;
  }
  EXPECT_GT(failing_seeds, 0) << "no seed made the 2-GPU task fail; the scenario tests nothing";
  EXPECT_TRUE(with->migrate_on_failure);
  EXPECT_EQ(with->max_moves, 2);
}

TEST(OpenbMigrateOnFailure, RejectsABadMoveBound) {
  OpenbOptions o = Options(true);
  o.migrate.max_moves = 0;
  auto r = RunOpenb(TinyWorkload(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("max_moves"), std::string::npos);
}

}  // namespace
}  // namespace estuary
