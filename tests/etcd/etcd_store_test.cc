// EtcdStore against the Store contract (store_contract_test.h, run here on SqliteStore too) and its
// own (etcd_store.h): the key prefix, scans over more keys than a page, fencing, etcd's request
// limits, failover to the next endpoint and unreachable etcd. Every test starts its own etcd
// (EtcdTestCluster) on free loopback ports.
#include "store/etcd_store.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "etcd_test_cluster.h"
#include "store/sqlite_store.h"
#include "store/store_contract_test.h"

namespace estuary {
namespace {

using testing_etcd::EtcdTestCluster;
using testing_etcd::EtcdTestClusterOptions;
using testing_etcd::PostJson;
using Json = nlohmann::json;

// ---- The contract on both backends ----------------------------------------------------------

// A fresh one-member etcd per backend object; small scan pages so that most scans of the contract
// span several range requests.
struct EtcdBackend {
  EtcdTestCluster etcd;
  std::string start_error = etcd.Start();
  std::unique_ptr<Store> Open() {
    if (!start_error.empty()) {
      ADD_FAILURE() << start_error;
      return nullptr;
    }
    EtcdStoreOptions o;
    o.etcd.endpoints = etcd.endpoints();
    o.scan_page_size = 7;
    StatusOr<std::unique_ptr<EtcdStore>> s = EtcdStore::Open(o);
    if (!s.ok()) {
      ADD_FAILURE() << s.status().ToString();
      return nullptr;
    }
    return std::move(*s);
  }
};

struct SqliteBackend {
  std::string dir = [] {
    char tmpl[] = "/tmp/estuary-contract-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    return std::string(p != nullptr ? p : "/tmp/estuary-contract-mkdtemp-failed");
  }();
  ~SqliteBackend() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::unique_ptr<Store> Open() {
    SqliteOptions o;
    o.synchronous_normal = true;  // speed; the contract does not crash the machine
    StatusOr<std::unique_ptr<SqliteStore>> s = SqliteStore::Open(dir, o);
    if (!s.ok()) {
      ADD_FAILURE() << s.status().ToString();
      return nullptr;
    }
    return std::move(*s);
  }
};

using Backends = ::testing::Types<EtcdBackend, SqliteBackend>;
INSTANTIATE_TYPED_TEST_SUITE_P(Backends, StoreContractTest, Backends);

// ---- EtcdStore's own contract ---------------------------------------------------------------

// A loopback URL where nothing listens (a port that was free a moment ago).
std::string DeadEndpoint() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

class EtcdStoreTest : public ::testing::Test {
 protected:
  // Starts a one-member etcd with `extra_flags` added to the fixture's defaults.
  void StartEtcd(std::vector<std::string> extra_flags = {}) {
    EtcdTestClusterOptions o;
    o.extra_flags = std::move(extra_flags);
    const std::string error = etcd_.Start(o);
    ASSERT_EQ(error, "");
  }
  void SetUp() override { StartEtcd(); }
  void TearDown() override { etcd_.Stop(); }

  EtcdStoreOptions Options() const {
    EtcdStoreOptions o;
    o.etcd.endpoints = etcd_.endpoints();
    return o;
  }
  std::unique_ptr<EtcdStore> OpenStore(EtcdStoreOptions o) {
    StatusOr<std::unique_ptr<EtcdStore>> s = EtcdStore::Open(std::move(o));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  // A raw etcd call, bypassing EtcdStore.
  Json Raw(const std::string& path, const Json& body) {
    return Json::parse(PostJson(etcd_.endpoints()[0], path, body.dump()), nullptr, false);
  }
  // Puts etcd key `key` (raw) and returns its create_revision.
  int64_t RawCreate(const std::string& key) {
    const Json put = Raw("/v3/kv/put", {{"key", Base64Encode(key)}, {"value", Base64Encode("leader")}});
    EXPECT_TRUE(put.is_object()) << put.dump();
    const Json range = Raw("/v3/kv/range", {{"key", Base64Encode(key)}});
    return *JsonInt64(range["kvs"][0], "create_revision");
  }
  // Every etcd key (raw), in order.
  std::vector<std::string> RawKeys() {
    const Json range = Raw("/v3/kv/range", {{"key", Base64Encode(std::string(1, '\0'))},
                                            {"range_end", Base64Encode(std::string(1, '\0'))},
                                            {"keys_only", true}});
    std::vector<std::string> keys;
    if (range.contains("kvs")) {
      for (const Json& kv : range["kvs"]) keys.push_back(*JsonBytes(kv, "key"));
    }
    return keys;
  }

  EtcdTestCluster etcd_;
};

TEST_F(EtcdStoreTest, StoreKeysLiveUnderThePrefixAndStoresOfOtherPrefixesDoNotMix) {
  std::unique_ptr<EtcdStore> a = OpenStore(Options());
  EtcdStoreOptions other = Options();
  other.prefix = "other/";
  std::unique_ptr<EtcdStore> b = OpenStore(other);
  ASSERT_TRUE(a && b);
  StoreBatch ba;
  ba.Put("job/1", "a");
  ASSERT_TRUE(a->Apply(ba).ok());
  StoreBatch bb;
  bb.Put("job/2", "b");
  ASSERT_TRUE(b->Apply(bb).ok());

  EXPECT_EQ(RawKeys(), (std::vector<std::string>{"estuary/job/1", "other/job/2"}));
  EXPECT_EQ(*a->Get("job/2"), std::nullopt);
  int seen = 0;
  ASSERT_TRUE(b->Scan("", [&](std::string_view k, std::string_view v) {
                 EXPECT_EQ(k, "job/2");
                 EXPECT_EQ(v, "b");
                 ++seen;
                 return true;
               }).ok());
  EXPECT_EQ(seen, 1);
}

TEST_F(EtcdStoreTest, ScanPagesThroughMoreKeysThanTheDefaultPageInOneSnapshot) {
  std::unique_ptr<EtcdStore> store = OpenStore(Options());  // scan_page_size 1000
  ASSERT_TRUE(store);
  constexpr int kKeys = 2500;
  StoreBatch b;
  for (int i = 0; i < kKeys; ++i) {
    char key[32];
    std::snprintf(key, sizeof(key), "task/%05d", i);
    b.Put(key, std::to_string(i));
  }
  ASSERT_TRUE(store->Apply(b).ok());

  // Writes during the scan (here: from fn, between pages) are not seen: one snapshot.
  int next = 0;
  const Status st = store->Scan("task/", [&](std::string_view k, std::string_view v) {
    char key[32];
    std::snprintf(key, sizeof(key), "task/%05d", next);
    EXPECT_EQ(k, key);
    EXPECT_EQ(v, std::to_string(next));
    if (next == 10) {
      StoreBatch late;
      late.Put("task/01500", "changed");
      late.Put("task/99999", "new");
      late.Delete("task/02000");
      EXPECT_TRUE(store->Apply(late).ok());
    }
    ++next;
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(next, kKeys);

  // Stopping in the second page.
  int visited = 0;
  ASSERT_TRUE(store->Scan("task/", [&](std::string_view, std::string_view) { return ++visited < 1500; }).ok());
  EXPECT_EQ(visited, 1500);
}

TEST_F(EtcdStoreTest, AFencedStoreWritesOnlyWhileItsFenceKeyKeepsItsCreateRevision) {
  const int64_t term1 = RawCreate("estuary-leader");
  EtcdStoreOptions o1 = Options();
  o1.fence = EtcdFence{"estuary-leader", term1};
  std::unique_ptr<EtcdStore> old_leader = OpenStore(o1);
  ASSERT_TRUE(old_leader);
  StoreBatch first;
  first.Put("job/1", "by term 1");
  ASSERT_TRUE(old_leader->Apply(first).ok());

  // The key is recreated (a new term): the old fence no longer holds.
  Raw("/v3/kv/deleterange", {{"key", Base64Encode("estuary-leader")}});
  const int64_t term2 = RawCreate("estuary-leader");
  ASSERT_GT(term2, term1);
  StoreBatch stale;
  stale.Put("job/1", "by term 1, late");
  stale.Put("job/2", "by term 1, late");
  stale.Delete("job/1");
  const Status st = old_leader->Apply(stale);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("lost leadership"), std::string::npos) << st.message();

  EtcdStoreOptions o2 = Options();
  o2.fence = EtcdFence{"estuary-leader", term2};
  std::unique_ptr<EtcdStore> new_leader = OpenStore(o2);
  ASSERT_TRUE(new_leader);
  EXPECT_EQ(*new_leader->Get("job/1"), "by term 1");
  EXPECT_EQ(*new_leader->Get("job/2"), std::nullopt);
  StoreBatch fresh;
  fresh.Put("job/2", "by term 2");
  EXPECT_TRUE(new_leader->Apply(fresh).ok());

  // No key at all: no fence holds.
  Raw("/v3/kv/deleterange", {{"key", Base64Encode("estuary-leader")}});
  EXPECT_EQ(new_leader->Apply(fresh).code(), StatusCode::kUnavailable);
}

class EtcdStoreLimitsTest : public EtcdStoreTest {
 protected:
  void SetUp() override {}  // each test starts etcd with its own limits
};

TEST_F(EtcdStoreLimitsTest, ABatchOverMaxTxnOpsFailsNamingTheFlagAndChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(StartEtcd({"--max-txn-ops", "128"}));
  std::unique_ptr<EtcdStore> store = OpenStore(Options());
  ASSERT_TRUE(store);
  StoreBatch fits;
  for (int i = 0; i < 128; ++i) fits.Put("k/" + std::to_string(i), "v");
  fits.Put("k/0", "again");  // the same key twice is one operation
  EXPECT_TRUE(store->Apply(fits).ok());

  StoreBatch too_many;
  for (int i = 0; i < 129; ++i) too_many.Put("n/" + std::to_string(i), "v");
  const Status st = store->Apply(too_many);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("--max-txn-ops"), std::string::npos) << st.message();
  int n = 0;
  ASSERT_TRUE(store->Scan("n/", [&](std::string_view, std::string_view) { return ++n, true; }).ok());
  EXPECT_EQ(n, 0);
}

TEST_F(EtcdStoreLimitsTest, ABatchOverMaxRequestBytesFailsNamingTheFlagAndChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(StartEtcd({"--max-request-bytes", "1048576"}));
  std::unique_ptr<EtcdStore> store = OpenStore(Options());
  ASSERT_TRUE(store);
  StoreBatch big;
  big.Put("big/a", std::string(700000, 'a'));
  big.Put("big/b", std::string(700000, 'b'));
  const Status st = store->Apply(big);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("--max-request-bytes"), std::string::npos) << st.message();
  EXPECT_EQ(*store->Get("big/a"), std::nullopt);
}

TEST_F(EtcdStoreTest, ACallFailsOverFromADeadEndpointToTheNextOne) {
  EtcdStoreOptions o = Options();
  o.etcd.endpoints.insert(o.etcd.endpoints.begin(), DeadEndpoint());
  std::unique_ptr<EtcdStore> store = OpenStore(o);
  ASSERT_TRUE(store);
  StoreBatch b;
  b.Put("k", "v");
  EXPECT_TRUE(store->Apply(b).ok());
  EXPECT_EQ(*store->Get("k"), "v");
}

TEST_F(EtcdStoreTest, WithEtcdGoneCallsFailWithUnavailableWithinTheRequestTimeout) {
  EtcdStoreOptions o = Options();
  o.etcd.request_timeout_ms = 1000;
  std::unique_ptr<EtcdStore> store = OpenStore(o);
  ASSERT_TRUE(store);
  etcd_.Kill(0);
  const auto t0 = std::chrono::steady_clock::now();
  StoreBatch b;
  b.Put("k", "v");
  EXPECT_EQ(store->Apply(b).code(), StatusCode::kUnavailable);
  EXPECT_EQ(store->Get("k").status().code(), StatusCode::kUnavailable);
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(elapsed, std::chrono::seconds(4));
}

TEST(EtcdStoreOpenTest, OpenRefusesBadOptionsAndAnEtcdThatDoesNotAnswer) {
  auto open = [](std::vector<std::string> endpoints, auto&& tweak) {
    EtcdStoreOptions o;
    o.etcd.endpoints = std::move(endpoints);
    o.etcd.request_timeout_ms = 500;
    tweak(o);
    return EtcdStore::Open(o).status();
  };
  auto nothing = [](EtcdStoreOptions&) {};
  EXPECT_EQ(open({}, nothing).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(open({"127.0.0.1:2379"}, nothing).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(open({"http://127.0.0.1:2379/v3"}, nothing).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(open({"http://127.0.0.1:99999"}, nothing).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(open({"http://127.0.0.1:2379"}, [](EtcdStoreOptions& o) { o.prefix = ""; }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(open({"http://127.0.0.1:2379"}, [](EtcdStoreOptions& o) { o.scan_page_size = 0; }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(open({"http://127.0.0.1:2379"}, [](EtcdStoreOptions& o) { o.fence = EtcdFence{"", 1}; }).code(),
            StatusCode::kInvalidArgument);

  const auto t0 = std::chrono::steady_clock::now();
  const Status st = open({DeadEndpoint(), DeadEndpoint()}, nothing);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("no endpoint answered"), std::string::npos) << st.message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

TEST(EtcdBase64Test, RoundTripsEveryLengthAndByte) {
  std::string bytes;
  for (int i = 0; i < 300; ++i) {
    EXPECT_EQ(*Base64Decode(Base64Encode(bytes)), bytes) << i;
    bytes.push_back(static_cast<char>((i * 37) & 0xFF));
  }
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(*Base64Decode("Zg=="), "f");
  EXPECT_FALSE(Base64Decode("Zg=").ok());
  EXPECT_FALSE(Base64Decode("Z!==").ok());
}

}  // namespace
}  // namespace estuary
