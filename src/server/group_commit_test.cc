// GroupCommitter: every batch a caller was told is committed is in the store, whole, whatever the
// interleaving of callers; a failed store fails that round and every later commit.
#include "server/group_commit.h"

#include <unistd.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "store/sqlite_store.h"

namespace estuary {
namespace {

TEST(GroupCommitter, EveryAcknowledgedBatchOfManyThreadsIsStoredWhole) {
  char tmpl[] = "/tmp/estuary-group-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  {
    auto store = SqliteStore::Open(tmpl);
    ASSERT_TRUE(store.ok());
    GroupCommitter g(store->get());
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 100; ++i) {
          StoreBatch b;
          const std::string n = std::to_string(t) + "/" + std::to_string(i);
          b.Put("a/" + n, n);
          b.Put("b/" + n, n);
          ASSERT_TRUE(g.Commit(std::move(b)).ok());
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(g.batches(), 800u);
    EXPECT_LE(g.rounds(), g.batches());
    EXPECT_GE(g.rounds(), 1u);
    for (const char* prefix : {"a/", "b/"}) {
      size_t n = 0;
      ASSERT_TRUE((*store)->Scan(prefix, [&](std::string_view k, std::string_view v) {
        EXPECT_EQ(k.substr(2), v);
        ++n;
        return true;
      }).ok());
      EXPECT_EQ(n, 800u);
    }
  }
  std::filesystem::remove_all(tmpl);
}

// A store whose Apply fails from the n-th call on.
class FailingStore final : public Store {
 public:
  explicit FailingStore(int ok_calls) : ok_calls_(ok_calls) {}
  Status Apply(const StoreBatch& b) override {
    if (calls_++ >= ok_calls_) return Internal("disk full");
    applied_ += b.changes.size();
    return Status::Ok();
  }
  StatusOr<std::optional<std::string>> Get(std::string_view) override { return std::optional<std::string>(); }
  Status Scan(std::string_view, const std::function<bool(std::string_view, std::string_view)>&) override {
    return Status::Ok();
  }
  size_t applied_ = 0;

 private:
  int ok_calls_;
  int calls_ = 0;
};

// Counts the changes of each Apply.
class CountingStore final : public Store {
 public:
  Status Apply(const StoreBatch& b) override {
    std::lock_guard lk(mu);
    sizes.push_back(b.changes.size());
    return Status::Ok();
  }
  StatusOr<std::optional<std::string>> Get(std::string_view) override { return std::optional<std::string>(); }
  Status Scan(std::string_view, const std::function<bool(std::string_view, std::string_view)>&) override {
    return Status::Ok();
  }
  std::mutex mu;
  std::vector<size_t> sizes;
};

TEST(GroupCommitter, ARoundStaysUnderTheOpCapUnlessOneBatchAloneIsLarger) {
  CountingStore store;
  GroupCommitter g(&store, 10);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        StoreBatch b;
        const int n = (t == 0 && i == 0) ? 25 : 3;  // one batch larger than the cap
        for (int k = 0; k < n; ++k) b.Put("k" + std::to_string(k), "v");
        ASSERT_TRUE(g.Commit(std::move(b)).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  size_t total = 0;
  for (size_t n : store.sizes) {
    total += n;
    EXPECT_TRUE(n <= 10 || n == 25) << n;
  }
  EXPECT_EQ(total, 25u + 399u * 3u);
  EXPECT_EQ(g.batches(), 400u);
}

TEST(GroupCommitter, AFailedRoundFailsItsBatchesAndEveryLaterCommit) {
  FailingStore store(1);
  GroupCommitter g(&store);
  StoreBatch b;
  b.Put("k", "v");
  EXPECT_TRUE(g.Commit(b).ok());
  const Status failed = g.Commit(b);
  EXPECT_EQ(failed.code(), StatusCode::kInternal);
  EXPECT_EQ(failed.message(), "disk full");
  EXPECT_EQ(g.Commit(b).message(), "disk full");  // not tried again
  EXPECT_EQ(store.applied_, 1u);
}

}  // namespace
}  // namespace estuary
