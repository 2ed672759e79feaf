// PendingQueue: queue order, the pass that skips a shape after its first wait, jobs tried on
// their own.
#include "sched/framework/pending_queue.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace estuary {
namespace {

using Outcome = PendingQueue::Outcome;

TEST(PendingQueue, ArrivalsGoToTheBackAndRequeuesToTheFront) {
  PendingQueue q(false);
  q.Push(0, 300, 0, false);
  q.Push(1, 900, 1, false);
  q.Push(2, 100, 0, true);
  q.Push(3, 100, 2, true);
  EXPECT_EQ(q.InOrder(), (std::vector<size_t>{3, 2, 0, 1}));
  EXPECT_EQ(q.size(), 4u);
  q.Remove(2);
  EXPECT_FALSE(q.Contains(2));
  EXPECT_EQ(q.InOrder(), (std::vector<size_t>{3, 0, 1}));
}

TEST(PendingQueue, ByPriorityHigherFirstThenPosition) {
  PendingQueue q(true);
  q.Push(0, 300, 0, false);
  q.Push(1, 900, 1, false);
  q.Push(2, 300, 0, true);  // a requeue goes before the jobs of its priority, not before higher ones
  q.Push(3, 900, 1, false);
  EXPECT_EQ(q.InOrder(), (std::vector<size_t>{1, 3, 2, 0}));
  EXPECT_EQ(q.InOrder([](int shape) { return shape == 0; }), (std::vector<size_t>{2, 0}));
}

TEST(PendingQueue, APassTriesInOrderAndSkipsAShapeAfterItsFirstWait) {
  PendingQueue q(false);
  // Shapes: jobs 0, 2, 4 are shape 0; 1, 3 shape 1; 5 shape 2.
  const int shape[] = {0, 1, 0, 1, 0, 2};
  for (size_t i = 0; i < 6; ++i) q.Push(i, 0, shape[i], false);
  std::vector<size_t> tried;
  // Job 0 starts, job 1 waits (so 3 is skipped), job 2 waits (so 4 is skipped), job 5 is infeasible.
  const std::map<size_t, Outcome> outcome = {{0, Outcome::kStarted}, {1, Outcome::kWaits}, {2, Outcome::kWaits},
                                             {3, Outcome::kStarted}, {4, Outcome::kStarted}, {5, Outcome::kInfeasible}};
  q.Pass(
      [&](size_t i) {
        tried.push_back(i);
        return outcome.at(i);
      },
      {});
  EXPECT_EQ(tried, (std::vector<size_t>{0, 1, 2, 5}));
  EXPECT_EQ(q.InOrder(), (std::vector<size_t>{1, 2, 3, 4}));  // started and infeasible jobs left
}

TEST(PendingQueue, AJobThatStaysLetsTheNextOfItsShapeBeTriedAndAFilterSkipsWholeShapes) {
  PendingQueue q(false);
  // Shapes: jobs 0, 1, 2 are shape 0; 3, 4 shape 1 (filtered out); 5 shape 2.
  const int shape[] = {0, 0, 0, 1, 1, 2};
  for (size_t i = 0; i < 6; ++i) q.Push(i, 0, shape[i], false);
  std::vector<size_t> tried;
  // Job 0 stays without standing for its shape (e.g. it reclaims): job 1 is tried and waits, so
  // job 2 is skipped; job 5 stays.
  q.Pass(
      [&](size_t i) {
        tried.push_back(i);
        return i == 1 ? Outcome::kWaits : Outcome::kStays;
      },
      {}, [](int sh) { return sh != 1; });
  EXPECT_EQ(tried, (std::vector<size_t>{0, 1, 5}));
  EXPECT_EQ(q.InOrder(), (std::vector<size_t>{0, 1, 2, 3, 4, 5}));  // nothing left the queue
}

TEST(PendingQueue, FirstOfLooksAtAShapesJobsInQueueOrderUpToTheFirstAccepted) {
  PendingQueue q(true);
  q.Push(0, 300, 0, false);
  q.Push(1, 900, 1, false);
  q.Push(2, 300, 0, true);  // before job 0
  q.Push(3, 300, 0, false);
  std::vector<size_t> looked;
  EXPECT_EQ(q.FirstOf(0, [&](size_t i) { looked.push_back(i); return i != 2; }), 0u);
  EXPECT_EQ(looked, (std::vector<size_t>{2, 0}));
  EXPECT_EQ(q.FirstOf(1, [](size_t) { return false; }), SIZE_MAX);
  EXPECT_EQ(q.FirstOf(7, [](size_t) { return true; }), SIZE_MAX);  // no such shape
  EXPECT_EQ(q.shapes(), 2u);
}

TEST(PendingQueue, OwnJobsAreTriedOnTheirOwnAndTheirStartRetriesSkippedShapes) {
  PendingQueue q(false);
  for (size_t i = 0; i < 4; ++i) q.Push(i, 0, 0, false);  // one shape
  std::vector<size_t> tried;
  int starts_of_0 = 0;
  // Job 0 waits; job 1 holds a reservation (own) and starts, releasing capacity: the shape is
  // tried again from its first job, which now starts, and so on.
  q.Pass(
      [&](size_t i) {
        tried.push_back(i);
        if (i == 0) return starts_of_0++ == 0 ? Outcome::kWaits : Outcome::kStarted;
        if (i == 1) return Outcome::kStarted;
        return i == 2 ? Outcome::kStarted : Outcome::kWaits;
      },
      {1});
  EXPECT_EQ(tried, (std::vector<size_t>{0, 1, 0, 2, 3}));
  EXPECT_EQ(q.InOrder(), (std::vector<size_t>{3}));
}

TEST(PendingQueue, AnOwnJobThatWaitsSkipsNoOne) {
  PendingQueue q(false);
  for (size_t i = 0; i < 3; ++i) q.Push(i, 0, 0, false);
  std::vector<size_t> tried;
  q.Pass(
      [&](size_t i) {
        tried.push_back(i);
        return i == 0 ? Outcome::kWaits : Outcome::kStarted;
      },
      {0});
  EXPECT_EQ(tried, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(q.InOrder(), (std::vector<size_t>{0}));
}

TEST(PendingQueue, APassMatchesTryingEveryJobWhenOutcomesDependOnlyOnShapeAndCapacity) {
  // A model of the simulator's use: capacity units shrink as jobs start; a job of shape s needs
  // s + 1 units. Trying every job in order (skipping none) and the shape-skipping pass start the
  // same jobs.
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    PendingQueue q(seed % 2 == 0);
    std::vector<int> shape, priority;
    uint64_t x = seed;
    auto next = [&] { return x = x * 6364136223846793005ULL + 1442695040888963407ULL, static_cast<int>(x >> 60); };
    for (size_t i = 0; i < 40; ++i) {
      shape.push_back(next() % 4);
      priority.push_back(next() % 3);
      q.Push(i, priority[i], shape[i], next() % 5 == 0);
    }
    const std::vector<size_t> order = q.InOrder();
    int capacity = 25;
    std::set<size_t> expected;
    for (size_t i : order) {
      if (shape[i] + 1 <= capacity) {
        capacity -= shape[i] + 1;
        expected.insert(i);
      }
    }
    capacity = 25;
    std::set<size_t> started;
    q.Pass(
        [&](size_t i) {
          if (shape[i] + 1 > capacity) return Outcome::kWaits;
          capacity -= shape[i] + 1;
          started.insert(i);
          return Outcome::kStarted;
        },
        {});
    EXPECT_EQ(started, expected) << seed;
    EXPECT_EQ(q.size(), 40 - expected.size());
  }
}

}  // namespace
}  // namespace estuary

namespace estuary {
namespace {

TEST(PendingQueueClasses, AClassWaitSkipsEveryShapeOfTheClassAShapeWaitOnlyItsShape) {
  PendingQueue q(false);
  // Class 7: shapes 0 and 1 (one request in two tenant queues); class 8: shape 2.
  q.SetClass(0, 7);
  q.SetClass(1, 7);
  q.SetClass(2, 8);
  const int shape[] = {0, 1, 2, 0, 1, 2, 1};
  for (size_t i = 0; i < 7; ++i) q.Push(i, 0, shape[i], false);
  std::vector<size_t> tried;
  // Job 0 (shape 0) has no room in its queue: shape 0 only is skipped (job 3 is not tried). Job 1
  // (shape 1) finds no capacity: class 7 is skipped — jobs 4 and 6 of shape 1 are not tried.
  // Job 2 starts, job 5 (class 8) waits for its class.
  q.Pass(
      [&](size_t i) {
        tried.push_back(i);
        if (i == 0) return Outcome::kShapeWaits;
        if (i == 1 || i == 5) return Outcome::kWaits;
        return Outcome::kStarted;
      },
      {});
  EXPECT_EQ(tried, (std::vector<size_t>{0, 1, 2, 5}));
  EXPECT_EQ(q.InOrder(), (std::vector<size_t>{0, 1, 3, 4, 5, 6}));
}

TEST(PendingQueueClasses, AShapeWaitLetsTheClassesOtherShapesBeTriedInOrder) {
  PendingQueue q(true);
  q.SetClass(0, 1);
  q.SetClass(1, 1);
  q.SetClass(2, 1);
  // Queue order by priority: job 2 (shape 2, prio 9), job 0 (shape 0), job 1 (shape 1), job 3 (shape 0).
  q.Push(0, 5, 0, false);
  q.Push(1, 5, 1, false);
  q.Push(2, 9, 2, false);
  q.Push(3, 5, 0, false);
  std::vector<size_t> tried;
  q.Pass(
      [&](size_t i) {
        tried.push_back(i);
        return i == 2 ? Outcome::kShapeWaits : Outcome::kStarted;
      },
      {});
  EXPECT_EQ(tried, (std::vector<size_t>{2, 0, 1, 3}));
  EXPECT_EQ(q.InOrder(), (std::vector<size_t>{2}));
}

TEST(PendingQueueClasses, AnOwnJobsStartRetriesTheSkippedClasses) {
  PendingQueue q(false);
  q.SetClass(0, 4);
  q.SetClass(1, 4);
  for (size_t i = 0; i < 4; ++i) q.Push(i, 0, i % 2 == 0 ? 0 : 1, false);  // shapes 0, 1, 0, 1
  std::vector<size_t> tried;
  int capacity = 0;
  // Job 0 finds no capacity (class 4 skipped: job 1 is not tried before job 2); own job 2 starts
  // and frees 2 units: the class is tried again from its first job: 0 and 1 start, 3 waits.
  q.Pass(
      [&](size_t i) {
        tried.push_back(i);
        if (i == 2) {
          capacity += 2;
          return Outcome::kStarted;
        }
        if (capacity == 0) return Outcome::kWaits;
        --capacity;
        return Outcome::kStarted;
      },
      {2});
  EXPECT_EQ(tried, (std::vector<size_t>{0, 2, 0, 1, 3}));
  EXPECT_EQ(q.InOrder(), (std::vector<size_t>{3}));
}

TEST(PendingQueueClasses, AScopeTriesOnlyTheListedShapesAndTheClassesItAccepts) {
  PendingQueue q(false);
  q.SetClass(0, 1);
  q.SetClass(1, 1);
  q.SetClass(2, 2);
  q.SetClass(3, 2);
  for (size_t i = 0; i < 8; ++i) q.Push(i, 0, static_cast<int>(i % 4), false);
  std::vector<size_t> tried;
  const auto record = [&](size_t i) {
    tried.push_back(i);
    return Outcome::kStays;
  };
  // Listed shapes 1 and 3 only: their jobs in queue order.
  const std::vector<int> listed = {3, 1};
  q.Pass(record, {}, PendingQueue::Scope{nullptr, nullptr, &listed});
  EXPECT_EQ(tried, (std::vector<size_t>{1, 3, 5, 7}));
  // Class 2 refused, shape 1 refused: only shape 0's jobs.
  tried.clear();
  q.Pass(record, {}, PendingQueue::Scope{[](int sh) { return sh != 1; }, [](int cls) { return cls != 2; }, nullptr});
  EXPECT_EQ(tried, (std::vector<size_t>{0, 4}));
  // A listed shape whose class waits: the class's other listed shapes are dropped too.
  tried.clear();
  const std::vector<int> all = {0, 1, 2, 3};
  q.Pass(
      [&](size_t i) {
        tried.push_back(i);
        return i == 0 ? Outcome::kWaits : Outcome::kShapeWaits;
      },
      {}, PendingQueue::Scope{nullptr, nullptr, &all});
  EXPECT_EQ(tried, (std::vector<size_t>{0, 2, 3}));
}

TEST(PendingQueueClasses, AShapeUnlistedDuringAPassBeforeItsTurnIsNotTried) {
  // By hand: shape 0 (class 1) holds jobs 0 and 2, shape 1 (class 2) jobs 1 and 3, shape 2
  // (class 2) job 4; all listed. The pass's start arms both classes' first shapes; job 0's
  // attempt unlists shape 1 before its turn, so its jobs are not tried and its class goes on with
  // shape 2.
  PendingQueue q(false);
  q.SetClass(0, 1);
  q.SetClass(1, 2);
  q.SetClass(2, 2);
  for (size_t i = 0; i < 4; ++i) q.Push(i, 0, static_cast<int>(i % 2), false);
  q.Push(4, 0, 2, false);
  for (int sh = 0; sh < 3; ++sh) q.SetListed(sh, true);
  std::vector<size_t> tried;
  q.Pass(
      [&](size_t i) {
        tried.push_back(i);
        if (i == 0) q.SetListed(1, false);
        return Outcome::kStays;
      },
      {}, PendingQueue::Scope{nullptr, nullptr, nullptr, 0});
  EXPECT_EQ(tried, (std::vector<size_t>{0, 2, 4}));
  // Listed again, it is looked at by the next pass.
  q.SetListed(1, true);
  tried.clear();
  q.Pass(
      [&](size_t i) {
        tried.push_back(i);
        return Outcome::kStays;
      },
      {}, PendingQueue::Scope{nullptr, nullptr, nullptr, 0});
  EXPECT_EQ(tried, (std::vector<size_t>{0, 1, 2, 3, 4}));
}

TEST(PendingQueueClasses, ListedShapesArePassedAsTheirListWouldBe) {
  // By hand: shapes 0, 1 of class 1; shape 2 of class 2. Listed: 1 and 2 (2 before its jobs
  // came), then 2 no longer.
  {
    PendingQueue q(false);
    q.SetClass(0, 1);
    q.SetClass(1, 1);
    q.SetClass(2, 2);
    q.SetListed(2, true);
    for (size_t i = 0; i < 6; ++i) q.Push(i, 0, static_cast<int>(i % 3), false);
    q.SetListed(1, true);
    EXPECT_TRUE(q.listed(1));
    EXPECT_FALSE(q.listed(0));
    std::vector<size_t> tried;
    const auto record = [&](size_t i) {
      tried.push_back(i);
      return Outcome::kStays;
    };
    q.Pass(record, {}, PendingQueue::Scope{nullptr, nullptr, nullptr, 0});
    EXPECT_EQ(tried, (std::vector<size_t>{1, 2, 4, 5}));
    q.SetListed(2, false);
    tried.clear();
    q.Pass(record, {}, PendingQueue::Scope{nullptr, nullptr, nullptr, 0});
    EXPECT_EQ(tried, (std::vector<size_t>{1, 4}));
  }
  // At random: a pass over a list's shapes tries the same jobs, in the same order, as one handed
  // the list, whatever the outcomes, own jobs, changes of the lists between passes (also between
  // arrivals that change an unlisted shape's first job, and a shape unlisted and listed again).
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    uint64_t x = seed;
    auto next = [&](int n) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<int>((x >> 33) % static_cast<uint64_t>(n));
    };
    PendingQueue lazy(seed % 2 == 0), handed(seed % 2 == 0);
    constexpr int kShapes = 12;
    for (int sh = 0; sh < kShapes; ++sh) {
      lazy.SetClass(sh, sh % 3);
      handed.SetClass(sh, sh % 3);
    }
    std::vector<char> listed(kShapes, 0);
    const int which = static_cast<int>(seed % PendingQueue::kLists);
    size_t jobs = 0;
    const auto relist = [&] {
      const int sh = next(kShapes);
      listed[static_cast<size_t>(sh)] = static_cast<char>(next(2));
      lazy.SetListed(sh, listed[static_cast<size_t>(sh)] != 0, which);
      lazy.SetListed(next(kShapes), next(2) != 0, 1 - which);  // the other list: no bearing
    };
    for (int round = 0; round < 10; ++round) {
      for (int k = 0; k < 25; ++k, ++jobs) {
        const int sh = next(kShapes), priority = next(3);
        const bool front = next(4) == 0;
        lazy.Push(jobs, priority, sh, front);
        handed.Push(jobs, priority, sh, front);
        if (next(5) == 0) relist();
      }
      for (int k = 0; k < 5; ++k) relist();
      std::vector<int> list;
      for (int sh = 0; sh < kShapes; ++sh) {
        if (listed[static_cast<size_t>(sh)]) list.push_back(sh);
      }
      std::vector<size_t> own;
      for (size_t i = 0; i < jobs; ++i) {
        if (lazy.Contains(i) && next(10) == 0) own.push_back(i);
      }
      // An outcome fixed by the job and the round.
      const auto outcome = [&](size_t i) {
        const uint64_t h = (i * 2654435761u + static_cast<uint64_t>(round) * 40503u) % 7;
        return h < 2 ? Outcome::kStarted : h < 4 ? Outcome::kWaits : h < 5 ? Outcome::kShapeWaits : Outcome::kStays;
      };
      std::vector<size_t> tried_lazy, tried_handed;
      lazy.Pass(
          [&](size_t i) {
            tried_lazy.push_back(i);
            return outcome(i);
          },
          own, PendingQueue::Scope{nullptr, nullptr, nullptr, which});
      handed.Pass(
          [&](size_t i) {
            tried_handed.push_back(i);
            return outcome(i);
          },
          own, PendingQueue::Scope{nullptr, nullptr, &list});
      EXPECT_EQ(tried_lazy, tried_handed) << "seed " << seed << " round " << round;
      EXPECT_EQ(lazy.InOrder(), handed.InOrder()) << "seed " << seed << " round " << round;
    }
  }
}

TEST(PendingQueueClasses, APassWithClassesMatchesTryingEveryJobWhenWaitsFollowCapacityAndRoom) {
  // The engine's use: a job of class c in queue r needs c + 1 units of capacity (shared) and of
  // its queue's room. Trying every job in order and the class-skipping pass start the same jobs.
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    PendingQueue q(seed % 2 == 0);
    std::vector<int> cls, queue;
    uint64_t x = seed;
    auto next = [&] { return x = x * 6364136223846793005ULL + 1442695040888963407ULL, static_cast<int>(x >> 60); };
    for (int c = 0; c < 3; ++c) {
      for (int r = 0; r < 4; ++r) q.SetClass(c * 4 + r, c);
    }
    for (size_t i = 0; i < 60; ++i) {
      cls.push_back(next() % 3);
      queue.push_back(next() % 4);
      q.Push(i, next() % 3, cls[i] * 4 + queue[i], next() % 5 == 0);
    }
    const std::vector<size_t> order = q.InOrder();
    const auto run = [&](const std::function<bool(size_t, int&, std::vector<int>&)>& fits) {
      int capacity = 30;
      std::vector<int> room = {3, 5, 8, 13};
      std::set<size_t> started;
      for (size_t i : order) {
        if (fits(i, capacity, room)) started.insert(i);
      }
      return started;
    };
    const std::set<size_t> expected = run([&](size_t i, int& capacity, std::vector<int>& room) {
      const int need = cls[i] + 1;
      if (need > room[queue[i]] || need > capacity) return false;
      capacity -= need;
      room[queue[i]] -= need;
      return true;
    });
    int capacity = 30;
    std::vector<int> room = {3, 5, 8, 13};
    std::set<size_t> started;
    q.Pass(
        [&](size_t i) {
          const int need = cls[i] + 1;
          if (need > room[queue[i]]) return Outcome::kShapeWaits;
          if (need > capacity) return Outcome::kWaits;
          capacity -= need;
          room[queue[i]] -= need;
          started.insert(i);
          return Outcome::kStarted;
        },
        {});
    EXPECT_EQ(started, expected) << seed;
  }
}

}  // namespace
}  // namespace estuary
