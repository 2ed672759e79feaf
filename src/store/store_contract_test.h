// The Store contract (store.h) as a typed GoogleTest suite, to run against every backend
// (the Mesos-allocator way: one contract, every implementation). A test file instantiates it with
// its backends:
//
//   struct MyBackend {
//     // Opens the backend's store — each call the same persistent data (a reopen), while each
//     // new MyBackend object starts from an empty store. Failures are reported with ADD_FAILURE
//     // and return nullptr.
//     std::unique_ptr<Store> Open();
//   };
//   using Backends = ::testing::Types<MyBackend>;
//   INSTANTIATE_TYPED_TEST_SUITE_P(My, StoreContractTest, Backends);
//
// Besides store.h, the suite holds the backends to one rule of their own headers that a caller
// switching backends relies on: a key with a NUL byte is refused with InvalidArgument (and then
// the whole batch changes nothing), and Get and Scan of such a key find nothing.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "store/store.h"

namespace estuary {

template <typename Backend>
class StoreContractTest : public ::testing::Test {
 protected:
  using KeyValues = std::vector<std::pair<std::string, std::string>>;

  void SetUp() override {
    store_ = backend_.Open();
    ASSERT_NE(store_, nullptr);
  }
  // Closes the store and opens it again on the same data.
  void Reopen() {
    store_.reset();
    store_ = backend_.Open();
    ASSERT_NE(store_, nullptr);
  }

  Store& store() { return *store_; }

  void Put(const std::string& key, const std::string& value) {
    StoreBatch b;
    b.Put(key, value);
    ASSERT_TRUE(store_->Apply(b).ok());
  }
  std::optional<std::string> Get(const std::string& key) {
    StatusOr<std::optional<std::string>> v = store_->Get(key);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : std::nullopt;
  }
  // Every (key, value) of a scan of `prefix`, in the order Scan gave them.
  KeyValues ScanAll(const std::string& prefix) {
    KeyValues out;
    const Status st = store_->Scan(prefix, [&](std::string_view k, std::string_view v) {
      out.emplace_back(std::string(k), std::string(v));
      return true;
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }

  Backend backend_;
  std::unique_ptr<Store> store_;
};

TYPED_TEST_SUITE_P(StoreContractTest);

TYPED_TEST_P(StoreContractTest, AStoredValueIsReadBackAndAnAbsentKeyIsNullopt) {
  this->Put("job/1", "{\"a\":1}");
  EXPECT_EQ(this->Get("job/1"), "{\"a\":1}");
  EXPECT_EQ(this->Get("job/2"), std::nullopt);
  EXPECT_EQ(this->Get(""), std::nullopt);
  this->Put("job/1", "{\"a\":2}");
  EXPECT_EQ(this->Get("job/1"), "{\"a\":2}");
}

TYPED_TEST_P(StoreContractTest, ADeleteRemovesTheKeyAndDeletingAnAbsentKeyIsFine) {
  this->Put("node/a", "1");
  StoreBatch b;
  b.Delete("node/a");
  b.Delete("node/never-there");
  ASSERT_TRUE(this->store().Apply(b).ok());
  EXPECT_EQ(this->Get("node/a"), std::nullopt);
  EXPECT_TRUE(this->ScanAll("").empty());
}

TYPED_TEST_P(StoreContractTest, AnEmptyBatchIsOk) { EXPECT_TRUE(this->store().Apply(StoreBatch{}).ok()); }

TYPED_TEST_P(StoreContractTest, TheLaterChangeToAKeyInOneBatchWins) {
  this->Put("k/deleted-then-put", "old");
  StoreBatch b;
  b.Put("k/put-twice", "1");
  b.Put("k/put-twice", "2");
  b.Put("k/put-then-deleted", "x");
  b.Delete("k/put-then-deleted");
  b.Delete("k/deleted-then-put");
  b.Put("k/deleted-then-put", "new");
  ASSERT_TRUE(this->store().Apply(b).ok());
  EXPECT_EQ(this->Get("k/put-twice"), "2");
  EXPECT_EQ(this->Get("k/put-then-deleted"), std::nullopt);
  EXPECT_EQ(this->Get("k/deleted-then-put"), "new");
}

TYPED_TEST_P(StoreContractTest, ABatchThatFailsChangesNothing) {
  this->Put("a", "before");
  StoreBatch b;
  b.Put("a", "after");
  b.Delete("a");
  b.Put("b", "new");
  b.Put(std::string("bad\0key", 7), "x");  // refused by every backend
  const Status st = this->store().Apply(b);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_EQ(this->Get("a"), "before");
  EXPECT_EQ(this->Get("b"), std::nullopt);
  EXPECT_EQ(this->Get(std::string("bad\0key", 7)), std::nullopt);
  EXPECT_EQ(this->ScanAll(""), (typename TestFixture::KeyValues{{"a", "before"}}));
  EXPECT_TRUE(this->ScanAll(std::string("bad\0", 4)).empty());
}

TYPED_TEST_P(StoreContractTest, ABatchIsVisibleWholeToEveryReader) {
  // A writer replaces 50 keys per batch with one generation number; readers must never see two
  // generations in one scan.
  constexpr int kKeys = 50;
  constexpr int kGenerations = 20;
  auto batch_of = [&](int gen) {
    StoreBatch b;
    for (int i = 0; i < kKeys; ++i) b.Put("gen/" + std::to_string(100 + i), std::to_string(gen));
    return b;
  };
  ASSERT_TRUE(this->store().Apply(batch_of(0)).ok());
  std::atomic<bool> done{false};
  std::atomic<int> mixed{0};
  std::atomic<int> scans{0};
  std::thread reader([&] {
    while (!done.load()) {
      std::map<std::string, int> seen;
      const Status st = this->store().Scan("gen/", [&](std::string_view, std::string_view v) {
        ++seen[std::string(v)];
        return true;
      });
      if (!st.ok() || seen.size() != 1 || seen.begin()->second != kKeys) ++mixed;
      ++scans;
    }
  });
  for (int gen = 1; gen <= kGenerations; ++gen) ASSERT_TRUE(this->store().Apply(batch_of(gen)).ok());
  done = true;
  reader.join();
  EXPECT_EQ(mixed.load(), 0) << "of " << scans.load() << " scans";
  EXPECT_EQ(this->Get("gen/100"), std::to_string(kGenerations));
}

TYPED_TEST_P(StoreContractTest, ScanVisitsExactlyThePrefixInBytewiseKeyOrder) {
  const std::vector<std::string> keys = {"a",      "a/",     "a/1",          "a/10",         "a/2",
                                         "a/\xc3\xa9", "a0",  "ab",           "b",            "job/1",
                                         "job/10", "job/2",  "job0",         "\x7f",         "z"};
  std::vector<std::string> shuffled = keys;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(7));
  StoreBatch b;
  for (const std::string& k : shuffled) b.Put(k, "v:" + k);
  ASSERT_TRUE(this->store().Apply(b).ok());

  auto scanned_keys = [&](const std::string& prefix) {
    std::vector<std::string> out;
    for (const auto& [k, v] : this->ScanAll(prefix)) {
      EXPECT_EQ(v, "v:" + k);
      out.push_back(k);
    }
    return out;
  };
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());  // bytewise: std::string compares chars as unsigned
  EXPECT_EQ(scanned_keys(""), sorted);
  EXPECT_EQ(scanned_keys("a/"), (std::vector<std::string>{"a/", "a/1", "a/10", "a/2", "a/\xc3\xa9"}));
  EXPECT_EQ(scanned_keys("job/"), (std::vector<std::string>{"job/1", "job/10", "job/2"}));
  EXPECT_EQ(scanned_keys("job/1"), (std::vector<std::string>{"job/1", "job/10"}));
  EXPECT_EQ(scanned_keys("a/\xc3"), (std::vector<std::string>{"a/\xc3\xa9"}));
  EXPECT_TRUE(scanned_keys("nothing/").empty());
  EXPECT_TRUE(scanned_keys("zz").empty());
}

TYPED_TEST_P(StoreContractTest, ScanStopsWhenFnReturnsFalse) {
  StoreBatch b;
  for (int i = 0; i < 10; ++i) b.Put("k/" + std::to_string(i), "v");
  ASSERT_TRUE(this->store().Apply(b).ok());
  std::vector<std::string> seen;
  const Status st = this->store().Scan("k/", [&](std::string_view k, std::string_view) {
    seen.emplace_back(k);
    return seen.size() < 3;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(seen, (std::vector<std::string>{"k/0", "k/1", "k/2"}));
}

TYPED_TEST_P(StoreContractTest, ScanOfThousandsOfKeysSeesEachOnceInOrder) {
  constexpr int kKeys = 2500;
  StoreBatch b;
  for (int i = kKeys - 1; i >= 0; --i) {
    char key[32];
    std::snprintf(key, sizeof(key), "task/%06d", i);
    b.Put(key, std::string(static_cast<size_t>(i % 97), 'x'));
  }
  b.Put("tas", "outside");
  b.Put("task0", "outside");
  ASSERT_TRUE(this->store().Apply(b).ok());
  const typename TestFixture::KeyValues all = this->ScanAll("task/");
  ASSERT_EQ(all.size(), static_cast<size_t>(kKeys));
  for (int i = 0; i < kKeys; ++i) {
    char key[32];
    std::snprintf(key, sizeof(key), "task/%06d", i);
    ASSERT_EQ(all[static_cast<size_t>(i)].first, key);
    ASSERT_EQ(all[static_cast<size_t>(i)].second.size(), static_cast<size_t>(i % 97));
  }
}

TYPED_TEST_P(StoreContractTest, ValuesAreAnyBytesAndAnEmptyValueIsStored) {
  std::string every_byte;
  for (int c = 0; c < 256; ++c) every_byte.push_back(static_cast<char>(c));
  const std::string with_nuls("\0a\0\0b\0", 6);
  StoreBatch b;
  b.Put("bin/every-byte", every_byte);
  b.Put("bin/nuls", with_nuls);
  b.Put("bin/empty", "");
  b.Put("bin/big", std::string(300000, '\xff'));
  ASSERT_TRUE(this->store().Apply(b).ok());
  EXPECT_EQ(this->Get("bin/every-byte"), every_byte);
  EXPECT_EQ(this->Get("bin/nuls"), with_nuls);
  EXPECT_EQ(this->Get("bin/empty"), std::string());
  EXPECT_EQ(this->Get("bin/big"), std::string(300000, '\xff'));
  const typename TestFixture::KeyValues all = this->ScanAll("bin/");
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0], std::make_pair(std::string("bin/big"), std::string(300000, '\xff')));
  EXPECT_EQ(all[1], std::make_pair(std::string("bin/empty"), std::string()));
  EXPECT_EQ(all[2], std::make_pair(std::string("bin/every-byte"), every_byte));
  EXPECT_EQ(all[3], std::make_pair(std::string("bin/nuls"), with_nuls));
}

TYPED_TEST_P(StoreContractTest, AReopenedStoreSeesEveryAppliedBatch) {
  for (int i = 0; i < 20; ++i) {
    StoreBatch b;
    b.Put("job/" + std::to_string(i), "state " + std::to_string(i));
    if (i % 4 == 3) b.Delete("job/" + std::to_string(i - 1));
    ASSERT_TRUE(this->store().Apply(b).ok());
  }
  this->Reopen();
  const typename TestFixture::KeyValues all = this->ScanAll("job/");
  EXPECT_EQ(all.size(), 15u);
  for (int i = 0; i < 20; ++i) {
    const std::optional<std::string> v = this->Get("job/" + std::to_string(i));
    if (i % 4 == 2) {
      EXPECT_EQ(v, std::nullopt) << i;
    } else {
      EXPECT_EQ(v, "state " + std::to_string(i)) << i;
    }
  }
}

TYPED_TEST_P(StoreContractTest, BatchesFromSeveralThreadsAllLand) {
  constexpr int kThreads = 4;
  constexpr int kBatches = 25;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kBatches; ++i) {
        StoreBatch b;
        b.Put("t" + std::to_string(t) + "/" + std::to_string(100 + i), "x");
        b.Put("t" + std::to_string(t) + "/count", std::to_string(i + 1));
        if (!this->store().Apply(b).ok()) ++failures;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(this->ScanAll("t" + std::to_string(t) + "/").size(), static_cast<size_t>(kBatches + 1));
    EXPECT_EQ(this->Get("t" + std::to_string(t) + "/count"), std::to_string(kBatches));
  }
}

REGISTER_TYPED_TEST_SUITE_P(StoreContractTest, AStoredValueIsReadBackAndAnAbsentKeyIsNullopt,
                            ADeleteRemovesTheKeyAndDeletingAnAbsentKeyIsFine, AnEmptyBatchIsOk,
                            TheLaterChangeToAKeyInOneBatchWins, ABatchThatFailsChangesNothing,
                            ABatchIsVisibleWholeToEveryReader, ScanVisitsExactlyThePrefixInBytewiseKeyOrder,
                            ScanStopsWhenFnReturnsFalse, ScanOfThousandsOfKeysSeesEachOnceInOrder,
                            ValuesAreAnyBytesAndAnEmptyValueIsStored, AReopenedStoreSeesEveryAppliedBatch,
                            BatchesFromSeveralThreadsAllLand);

}  // namespace estuary
