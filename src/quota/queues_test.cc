// Queue trees: their checks, water-filling and the shares they imply, against hand-computed
// figures (in whole GPUs, 1000 milli each).
#include "quota/queues.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/rng.h"

namespace estuary {
namespace {

constexpr int64_t G = 1000;  // one GPU in milli-GPU

GpuModels TwoModels() {
  GpuModels m;
  (void)m.Intern("H800");
  (void)m.Intern("A100");
  return m;
}

QueueSpec Queue(const std::string& name, const std::string& parent, int64_t guarantee_gpus, int64_t weight = 1) {
  QueueSpec s;
  s.name = name;
  s.parent = parent;
  if (guarantee_gpus > 0) s.guarantee.gpu_milli = guarantee_gpus * G;
  s.weight = weight;
  return s;
}

// The shares of a tree on a cluster of `gpus` GPUs (CPU and memory plentiful), each queue
// asking for `want[q]` GPUs (pending, nothing running).
QueueShares Shares(const QueueTree& t, int64_t gpus, const std::vector<int64_t>& want, bool fair_reclaim = false,
                   const std::vector<int64_t>& usage_gpus = {}) {
  const size_t D = t.dims().size();
  std::vector<int64_t> capacity(D, int64_t{1} << 40);
  capacity[QuotaDims::kGpu] = gpus * G;
  std::vector<int64_t> usage(t.size() * D, 0), pending(t.size() * D, 0);
  for (size_t q = 0; q < t.size(); ++q) {
    pending[q * D + QuotaDims::kGpu] = want[q] * G;
    if (!usage_gpus.empty()) usage[q * D + QuotaDims::kGpu] = usage_gpus[q] * G;
  }
  return ComputeShares(t, capacity, usage, pending, {}, true, fair_reclaim);
}

int64_t Gpus(const QueueShares& s, const std::vector<int64_t>& v, size_t q) { return s.at(v, q, QuotaDims::kGpu) / G; }

TEST(WaterFill, SharesInProportionToWeightsUpToEachCap) {
  EXPECT_EQ(WaterFill(90, {1000, 1000}, {2, 1}), (std::vector<int64_t>{60, 30}));
  // The first is capped at 10; the other two share the other 80 by 1:3.
  EXPECT_EQ(WaterFill(90, {10, 1000, 1000}, {5, 1, 3}), (std::vector<int64_t>{10, 20, 60}));
  // Less wanted than there is: everyone gets its cap.
  EXPECT_EQ(WaterFill(90, {10, 20}, {1, 1}), (std::vector<int64_t>{10, 20}));
  // 10 by 1:1:1 is 3 each and one left over: the first by index.
  EXPECT_EQ(WaterFill(10, {100, 100, 100}, {1, 1, 1}), (std::vector<int64_t>{4, 3, 3}));
  EXPECT_EQ(WaterFill(0, {100}, {1}), (std::vector<int64_t>{0}));
}

TEST(QueueTree, WeightsTwoToOneSplitIdleCapacityTwoToOne) {
  const auto t = QueueTree::Build({Queue("a", "", 0, 2), Queue("b", "", 0, 1)}, TwoModels());
  ASSERT_TRUE(t.ok()) << t.status().message();
  const QueueShares s = Shares(*t, 300, {1000, 1000});
  EXPECT_EQ(Gpus(s, s.fair, 0), 200);
  EXPECT_EQ(Gpus(s, s.fair, 1), 100);
  // No guarantee: nothing to take back.
  EXPECT_EQ(Gpus(s, s.entitled, 0), 0);
  EXPECT_EQ(Gpus(s, s.entitled, 1), 0);
}

TEST(QueueTree, SharesRecomputedFromThePreviousOnesFollowAChangeOfDemand) {
  const auto t = QueueTree::Build({Queue("a", "", 0, 2), Queue("b", "", 0, 1)}, TwoModels());
  ASSERT_TRUE(t.ok()) << t.status().message();
  const size_t D = t->dims().size();
  std::vector<int64_t> capacity(D, int64_t{1} << 40);
  capacity[QuotaDims::kGpu] = 300 * G;
  std::vector<int64_t> usage(t->size() * D, 0), pending(t->size() * D, 0);
  pending[0 * D + QuotaDims::kGpu] = 1000 * G;
  pending[1 * D + QuotaDims::kGpu] = 1000 * G;
  const QueueShares before = ComputeShares(*t, capacity, usage, pending, {}, true, false);
  ASSERT_EQ(Gpus(before, before.fair, 0), 200);
  // b now wants 50 GPUs: a gets the other 250 (2:1 would give b 100).
  pending[1 * D + QuotaDims::kGpu] = 50 * G;
  const QueueShares after = ComputeShares(*t, capacity, usage, pending, {}, true, false, &before, &capacity);
  EXPECT_EQ(Gpus(after, after.fair, 0), 250);
  EXPECT_EQ(Gpus(after, after.fair, 1), 50);
  // The capacity halves (nodes down): 2:1 again, within b's 50.
  std::vector<int64_t> half = capacity;
  half[QuotaDims::kGpu] = 120 * G;
  const QueueShares down = ComputeShares(*t, half, usage, pending, {}, true, false, &after, &capacity);
  EXPECT_EQ(Gpus(down, down.fair, 0), 80);
  EXPECT_EQ(Gpus(down, down.fair, 1), 40);
}

TEST(QueueTree, SharesFromThePreviousOnesEqualSharesComputedAfreshOverRandomChanges) {
  // 4 orgs x 5 teams with guarantees, limits and weights; 200 rounds, each changing what one to
  // three teams hold or want (and now and then the capacity): the shares computed from the last
  // ones are those computed from nothing.
  std::vector<QueueSpec> specs;
  for (int o = 0; o < 4; ++o) {
    QueueSpec org = Queue("org" + std::to_string(o), "", 40 + 10 * o, 1 + o % 3);
    if (o == 1) org.limit.gpu_milli = 150 * G;
    specs.push_back(org);
    for (int k = 0; k < 5; ++k) {
      QueueSpec team = Queue("org" + std::to_string(o) + "-t" + std::to_string(k), org.name, k < 3 ? 8 : 0, 1 + k % 4);
      if (k == 4) team.limit.gpu_milli = 40 * G;
      specs.push_back(team);
    }
  }
  const auto t = QueueTree::Build(specs, TwoModels());
  ASSERT_TRUE(t.ok()) << t.status().message();
  const size_t D = t->dims().size(), n = t->size();
  std::vector<int64_t> capacity(D, int64_t{1} << 40), usage(n * D, 0), pending(n * D, 0);
  capacity[QuotaDims::kGpu] = 400 * G;
  Rng rng(7);
  std::vector<size_t> leaves;
  for (size_t q = 0; q < n; ++q) {
    if (t->leaf(q)) leaves.push_back(q);
  }
  QueueShares last = ComputeShares(*t, capacity, usage, pending, {}, true, false);
  std::vector<int64_t> last_capacity = capacity;
  int changed = 0;
  for (int round = 0; round < 200; ++round) {
    const int k = 1 + static_cast<int>(rng.Uniform(3));
    for (int i = 0; i < k; ++i) {
      const size_t q = leaves[rng.Uniform(leaves.size())];
      usage[q * D + QuotaDims::kGpu] = static_cast<int64_t>(rng.Uniform(60)) * G;
      pending[q * D + QuotaDims::kGpu] = static_cast<int64_t>(rng.Uniform(80)) * G;
    }
    if (rng.Uniform(10) == 0) capacity[QuotaDims::kGpu] = static_cast<int64_t>(200 + rng.Uniform(300)) * G;
    const QueueShares fresh = ComputeShares(*t, capacity, usage, pending, {}, true, false);
    const QueueShares from_last = ComputeShares(*t, capacity, usage, pending, {}, true, false, &last, &last_capacity);
    ASSERT_EQ(from_last.fair, fresh.fair) << "round " << round;
    ASSERT_EQ(from_last.entitled, fresh.entitled) << "round " << round;
    changed += from_last.fair != last.fair;
    last = from_last;
    last_capacity = capacity;
  }
  EXPECT_GE(changed, 40);  // the rounds did change the shares (54 of 200 with this seed)
}

TEST(QueueTree, SharesUpdatedForTheChangedLeavesEqualSharesComputedAfresh) {
  // 3 orgs, each with 3 teams, the first team of each with 2 sub-teams (leaves at depths 1 and
  // 2), guarantees in total and per model, limits and weights, on a cluster tight enough that
  // surpluses are water-filled. 400 rounds, each changing what one to four leaves hold or want
  // in any dimension: the shares updated in place (UpdateShares) are those computed from nothing
  // — usage, demand, fair and entitled alike — with reclaim to guarantee and to fair share, and
  // with limits that hold back what Standby replicas lend; and the queues it reports changed are
  // those whose fair or entitled figures did.
  std::vector<QueueSpec> specs;
  for (int o = 0; o < 3; ++o) {
    const std::string org = "org" + std::to_string(o);
    QueueSpec s = Queue(org, "", 30 + 10 * o, 1 + o);
    if (o == 2) s.limit.gpu_milli = 90 * G;
    if (o == 0) s.guarantee.model_milli["H800"] = 20 * G;
    specs.push_back(s);
    for (int k = 0; k < 3; ++k) {
      const std::string team = org + "-t" + std::to_string(k);
      QueueSpec ts = Queue(team, org, k < 2 ? 8 : 0, 1 + k);
      if (k == 2) ts.limit.gpu_milli = 25 * G;
      specs.push_back(ts);
      if (k != 0) continue;
      for (int u = 0; u < 2; ++u) specs.push_back(Queue(team + "-s" + std::to_string(u), team, u == 0 ? 4 : 0, 1 + u));
    }
  }
  const auto t = QueueTree::Build(specs, TwoModels());
  ASSERT_TRUE(t.ok()) << t.status().message();
  const size_t D = t->dims().size(), n = t->size();
  std::vector<size_t> leaves;
  for (size_t q = 0; q < n; ++q) {
    if (t->leaf(q)) leaves.push_back(q);
  }
  // `heavy`: every queue wants far more than its share (a long queue everywhere), so that most
  // changes of demand leave the splits as they were (UpdateShares does not make them again).
  // `lend`: queues also hold back parts of their limits (what Standby replicas lend: a changed
  // leaf's path moves, as the engine's do), inner queues among them.
  for (const auto& [to_fair, heavy, lend] : {std::tuple{false, false, false}, {true, false, false}, {false, true, false},
                                             {true, true, false}, {false, false, true}, {true, true, true}}) {
    std::vector<int64_t> capacity(D, 0), usage(n * D, 0), pending(n * D, 0), held_back(n * D, 0);
    for (size_t d = 0; d < D; ++d) capacity[d] = 150 * G;
    const std::vector<int64_t> weight = ShareWeights(*t, {}, true);
    QueueShares kept = ComputeShares(*t, capacity, usage, pending, {}, true, to_fair, nullptr, nullptr, &held_back);
    Rng rng(to_fair ? 11 : 5);
    int changed = 0;
    for (int round = 0; round < 400; ++round) {
      std::vector<size_t> touched;
      const int k = 1 + static_cast<int>(rng.Uniform(4));
      for (int i = 0; i < k; ++i) {
        const size_t q = leaves[rng.Uniform(leaves.size())];
        const size_t d = rng.Uniform(D);
        usage[q * D + d] = static_cast<int64_t>(rng.Uniform(50)) * G;
        // Heavy: mostly far above any share, at times below it (the splits change then).
        const uint64_t p = !heavy ? rng.Uniform(70) : rng.Uniform(4) == 0 ? rng.Uniform(20) : 200 + rng.Uniform(400);
        pending[q * D + d] = static_cast<int64_t>(p) * G;
        if (std::find(touched.begin(), touched.end(), q) == touched.end()) touched.push_back(q);
      }
      std::vector<size_t> held_moved;
      if (lend && rng.Uniform(2) == 0) {
        const size_t leaf = touched[rng.Uniform(touched.size())];
        for (int p = static_cast<int>(leaf); p >= 0; p = t->parent(static_cast<size_t>(p))) {
          const size_t q = static_cast<size_t>(p);
          const size_t d = rng.Uniform(D);
          const int64_t v = static_cast<int64_t>(rng.Uniform(30)) * G;
          if (held_back[q * D + d] == v) continue;
          held_back[q * D + d] = v;
          if (!t->leaf(q)) held_moved.push_back(q);
        }
      }
      std::vector<int64_t> u_rows, p_rows;
      for (size_t q : touched) {
        for (size_t d = 0; d < D; ++d) {
          u_rows.push_back(usage[q * D + d]);
          p_rows.push_back(pending[q * D + d]);
        }
      }
      const QueueShares before = kept;
      std::vector<size_t> reported;
      const bool any = UpdateShares(*t, capacity, touched, u_rows, p_rows, weight, to_fair, kept, &reported, &held_back, &held_moved);
      const QueueShares fresh = ComputeShares(*t, capacity, usage, pending, {}, true, to_fair, nullptr, nullptr, &held_back);
      ASSERT_EQ(kept.usage, fresh.usage) << "round " << round;
      ASSERT_EQ(kept.demand, fresh.demand) << "round " << round;
      ASSERT_EQ(kept.fair, fresh.fair) << "round " << round;
      ASSERT_EQ(kept.entitled, fresh.entitled) << "round " << round;
      EXPECT_EQ(any, before.fair != kept.fair || before.entitled != kept.entitled) << "round " << round;
      // The queues reported changed are those whose fair or entitled figures changed.
      std::vector<size_t> moved;
      for (size_t q = 0; q < n; ++q) {
        for (size_t d = 0; d < D; ++d) {
          if (before.fair[q * D + d] != kept.fair[q * D + d] || before.entitled[q * D + d] != kept.entitled[q * D + d]) {
            moved.push_back(q);
            break;
          }
        }
      }
      std::sort(reported.begin(), reported.end());
      EXPECT_EQ(reported, moved) << "round " << round;
      changed += any;
    }
    EXPECT_GE(changed, heavy ? 20 : 100) << to_fair;  // the rounds did change the shares
  }
}

TEST(QueueTree, AGuaranteeComesFirstAndWhatOneQueueDoesNotWantGoesToTheOthers) {
  // 100 GPUs; a is guaranteed 60 and wants 80, b wants 100, c wants 5 (equal weights).
  const auto t = QueueTree::Build({Queue("a", "", 60), Queue("b", "", 0), Queue("c", "", 0)}, TwoModels());
  ASSERT_TRUE(t.ok()) << t.status().message();
  const QueueShares s = Shares(*t, 100, {80, 100, 5});
  // a: 60 first; the other 40 water-filled: c takes its 5, a and b 17.5 each.
  EXPECT_EQ(s.at(s.fair, 2, QuotaDims::kGpu), 5 * G);
  EXPECT_EQ(s.at(s.fair, 0, QuotaDims::kGpu), 60 * G + 17500);
  EXPECT_EQ(s.at(s.fair, 1, QuotaDims::kGpu), 17500);
  EXPECT_EQ(Gpus(s, s.entitled, 0), 60);
}

TEST(QueueTree, AChildBorrowsItsParentsUnusedGuaranteeBeforeAnotherOrgs) {
  // Orgs A and B are guaranteed 100 each of 200 GPUs; A's teams 50 each. Team a2 is idle.
  const auto t = QueueTree::Build({Queue("A", "", 100), Queue("B", "", 100), Queue("a1", "A", 50), Queue("a2", "A", 50)},
                                  TwoModels());
  ASSERT_TRUE(t.ok()) << t.status().message();
  const QueueShares s = Shares(*t, 200, {0, 200, 100, 0});
  EXPECT_EQ(Gpus(s, s.fair, 2), 100);  // a1: its 50 and a2's unused 50 — A's
  EXPECT_EQ(Gpus(s, s.fair, 3), 0);
  EXPECT_EQ(Gpus(s, s.fair, 1), 100);  // B keeps its own 100
  EXPECT_EQ(Gpus(s, s.entitled, 2), 100);  // and may take it back from B
  EXPECT_EQ(Gpus(s, s.demand, 0), 100);    // A wants what its teams want
}

TEST(QueueTree, ReclaimToGuaranteeEntitlesNothingBeyondGuaranteesAtTheRoot) {
  const auto t = QueueTree::Build({Queue("a", "", 30), Queue("b", "", 30)}, TwoModels());
  ASSERT_TRUE(t.ok());
  const QueueShares s = Shares(*t, 100, {100, 100});
  EXPECT_EQ(Gpus(s, s.fair, 0), 50);
  EXPECT_EQ(Gpus(s, s.entitled, 0), 30);
  const QueueShares f = Shares(*t, 100, {100, 100}, true);
  EXPECT_EQ(Gpus(f, f.entitled, 0), 50);
}

TEST(QueueTree, ALimitCapsDemandAndSoTheShare) {
  QueueSpec a = Queue("a", "", 0);
  a.limit.gpu_milli = 20 * G;
  const auto t = QueueTree::Build({a, Queue("b", "", 0)}, TwoModels());
  ASSERT_TRUE(t.ok());
  const QueueShares s = Shares(*t, 100, {100, 100});
  EXPECT_EQ(Gpus(s, s.fair, 0), 20);
  EXPECT_EQ(Gpus(s, s.fair, 1), 80);
}

TEST(QueueTree, AnUnlentGuaranteeIsKeptForItsQueueWithoutDemand) {
  QueueSpec a = Queue("a", "", 40);
  a.lend_limit.gpu_milli = 10 * G;  // lends at most 10 of its 40
  const auto t = QueueTree::Build({a, Queue("b", "", 0)}, TwoModels());
  ASSERT_TRUE(t.ok()) << t.status().message();
  const QueueShares s = Shares(*t, 100, {0, 100});
  EXPECT_EQ(Gpus(s, s.fair, 0), 30);
  EXPECT_EQ(Gpus(s, s.fair, 1), 70);
}

TEST(QueueTree, GuaranteesAboveTheCapacityShrinkInProportion) {
  const auto t = QueueTree::Build({Queue("a", "", 60), Queue("b", "", 30)}, TwoModels());
  ASSERT_TRUE(t.ok());
  const QueueShares s = Shares(*t, 60, {100, 100});  // nodes down: 60 of the 90 guaranteed
  EXPECT_EQ(Gpus(s, s.fair, 0), 40);
  EXPECT_EQ(Gpus(s, s.fair, 1), 20);
}

TEST(QueueTree, PerModelQuotasAddUpToTheTotalGpuGuarantee) {
  QueueSpec a = Queue("a", "", 0);
  a.guarantee.model_milli = {{"H800", 16 * G}, {"A100", 8 * G}};
  const auto t = QueueTree::Build({a}, TwoModels());
  ASSERT_TRUE(t.ok()) << t.status().message();
  const QuotaDims& d = t->dims();
  EXPECT_EQ(t->guarantee(0)[QuotaDims::kGpu], 24 * G);
  EXPECT_EQ(t->guarantee(0)[d.model(0)], 16 * G);  // H800 was interned first
  EXPECT_EQ(t->guarantee(0)[d.model(1)], 8 * G);
  EXPECT_EQ(t->limit(0)[d.model(0)], kNoLimit);
}

TEST(QueueTree, UsageAndDemandAddUpTheTree) {
  const auto t = QueueTree::Build({Queue("A", "", 0), Queue("a1", "A", 0), Queue("a2", "A", 0)}, TwoModels());
  ASSERT_TRUE(t.ok());
  const QueueShares s = Shares(*t, 100, {0, 10, 5}, false, {0, 20, 30});
  EXPECT_EQ(Gpus(s, s.usage, 0), 50);
  EXPECT_EQ(Gpus(s, s.demand, 0), 65);
  EXPECT_EQ(Gpus(s, s.fair, 1), 30);  // its demand: 20 held + 10 waiting
  EXPECT_EQ(Gpus(s, s.fair, 2), 35);
}

// Each bad tree gives one message naming the queue and the field, and the line of that field.
TEST(QueueTree, BadTreesNameTheQueueAndTheField) {
  auto build = [](std::vector<QueueSpec> specs, int* line) { return QueueTree::Build(std::move(specs), TwoModels(), line); };
  int line = 0;
  QueueSpec child = Queue("a1", "A", 80);
  child.lines.guarantee = 7;
  auto r = build({Queue("A", "", 50), child}, &line);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "queue 'a1': field 'guarantee': the children of 'A' are guaranteed 80 GPUs, above its own 50");
  EXPECT_EQ(line, 7);

  QueueSpec x = Queue("x", "y", 0), y = Queue("y", "x", 0);
  x.lines.parent = 3;
  r = build({x, y}, &line);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "queue 'x': field 'parent': the queues form a cycle through 'x'");
  EXPECT_EQ(line, 3);

  r = build({Queue("a", "nowhere", 0)}, &line);
  EXPECT_EQ(r.status().message(), "queue 'a': field 'parent': no queue named 'nowhere'");
  r = build({Queue("a", "", 0), Queue("a", "", 0)}, &line);
  EXPECT_EQ(r.status().message(), "queue 'a': field 'name': a second queue named 'a'");

  QueueSpec m = Queue("m", "", 0);
  m.guarantee.model_milli = {{"H900", 8 * G}};
  r = build({m}, &line);
  EXPECT_EQ(r.status().message(), "queue 'm': field 'guarantee.gpus.H900': unknown GPU model 'H900' (the cluster has: H800, A100)");

  QueueSpec l = Queue("l", "", 10);
  l.limit.gpu_milli = 5 * G;
  r = build({l}, &line);
  EXPECT_EQ(r.status().message(), "queue 'l': field 'limit': 5 GPUs is below its guarantee of 10");

  QueueSpec w = Queue("w", "", 0, 0);
  r = build({w}, &line);
  EXPECT_EQ(r.status().message(), "queue 'w': field 'weight': 0 is outside 1..1000000");

  QueueSpec lend = Queue("n", "", 10);
  lend.lend_limit.gpu_milli = 11 * G;
  r = build({lend}, &line);
  EXPECT_EQ(r.status().message(), "queue 'n': field 'lend_limit': 11 GPUs is above its guarantee of 10");
}

}  // namespace
}  // namespace estuary
