#include "sched/actions/graceful_exit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace estuary {
namespace {

TEST(GracefulExit, FixedVictimsTakeTheWholeGracePeriod) {
  const GracefulExit e = GracefulExit::Fixed(60);
  EXPECT_TRUE(e.fixed());
  for (uint64_t k = 0; k < 100; ++k) EXPECT_EQ(e.After(k, static_cast<int64_t>(k) * 7), 60);
  EXPECT_EQ(GracefulExit::Fixed(0).After(1, 1), 0);
}

// Alibaba's spot evictions: bounded by 60 s, mean 13 s, P95 48 s. The fitted model reproduces
// both figures over many victims, never exceeds the bound, and kills a few at the bound.
TEST(GracefulExit, TheFittedModelHasTheGivenMeanAndP95AndRespectsTheBound) {
  auto e = GracefulExit::Fitted(60, 13, 48, 7);
  ASSERT_TRUE(e.ok()) << e.status().message();
  std::vector<int64_t> d;
  const int n = 200000;
  for (int k = 0; k < n; ++k) d.push_back(e->After(static_cast<uint64_t>(k), 1000 + k % 17));
  double sum = 0;
  for (int64_t x : d) sum += static_cast<double>(x);
  std::sort(d.begin(), d.end());
  EXPECT_NEAR(sum / n, 13.0, 0.3);
  EXPECT_NEAR(static_cast<double>(d[static_cast<size_t>(n * 0.95)]), 48.0, 1.0);
  EXPECT_GE(d.front(), 1);
  EXPECT_EQ(d.back(), 60);
  const auto at_bound = std::count(d.begin(), d.end(), int64_t{60});
  EXPECT_GT(at_bound, n / 100);  // the tail beyond the P95 reaches the bound...
  EXPECT_LT(at_bound, n / 20);   // ...but fewer than 5% are killed there
}

TEST(GracefulExit, DrawsArePureFunctionsOfSeedVictimAndNoticeTime) {
  auto a = GracefulExit::Fitted(60, 13, 48, 1);
  auto b = GracefulExit::Fitted(60, 13, 48, 1);
  auto c = GracefulExit::Fitted(60, 13, 48, 2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  int differ_by_seed = 0, differ_by_time = 0;
  for (uint64_t k = 0; k < 1000; ++k) {
    EXPECT_EQ(a->After(k, 500), b->After(k, 500));
    EXPECT_EQ(a->After(k, 500), a->After(k, 500));
    differ_by_seed += a->After(k, 500) != c->After(k, 500);
    differ_by_time += a->After(k, 500) != a->After(k, 501);
  }
  EXPECT_GT(differ_by_seed, 500);
  EXPECT_GT(differ_by_time, 500);
}

TEST(GracefulExit, ImpossibleFiguresAreRejectedNamingTheField) {
  auto zero = GracefulExit::Fitted(60, 0, 48, 1);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("exit_mean_s"), std::string::npos);
  auto order = GracefulExit::Fitted(60, 48, 48, 1);
  ASSERT_FALSE(order.ok());
  EXPECT_NE(order.status().message().find("exit_p95_s"), std::string::npos);
  auto bound = GracefulExit::Fitted(60, 13, 60, 1);
  ASSERT_FALSE(bound.ok());
  EXPECT_NE(bound.status().message().find("exit_p95_s"), std::string::npos);
  // Even with all the tail at the bound, 5% of 60 s is 3 s: a mean of 2 s cannot be reached.
  auto small = GracefulExit::Fitted(60, 2, 48, 1);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("exit_mean_s"), std::string::npos);
}

}  // namespace
}  // namespace estuary
