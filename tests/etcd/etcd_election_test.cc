// LeaderElection against a real etcd (etcd_election.h): one leader among three campaigners, a
// crashed leader replaced within the lease TTL and its fenced writes refused, a resignation handed
// over at once, a revoked lease and an unreachable etcd noticed by the leader, stopping a campaign.
#include "store/etcd_election.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "etcd_test_cluster.h"
#include "store/etcd_store.h"

namespace estuary {
namespace {

using testing_etcd::EtcdTestCluster;
using testing_etcd::PostJson;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Polls `done` every 20 ms until it is true or `limit` has passed; returns whether it became true.
template <typename Pred>
bool WaitFor(Pred done, Clock::duration limit) {
  const Clock::time_point until = Clock::now() + limit;
  while (Clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return done();
}

// One replica: its election and the thread that runs its campaign.
struct Replica {
  std::string identity;
  std::unique_ptr<LeaderElection> election;
  std::atomic<bool> stop{false};
  std::atomic<bool> campaign_done{false};
  std::atomic<bool> won{false};
  std::atomic<int64_t> revision{0};
  std::mutex mu;
  Status campaign_status;      // guarded by mu
  std::vector<std::string> lost;  // guarded by mu: every on_lost reason
  std::thread thread;

  void Campaign() {
    thread = std::thread([this] {
      StatusOr<int64_t> r = election->Campaign(stop);
      if (r.ok()) {
        revision = *r;
        won = true;
      } else {
        std::lock_guard<std::mutex> lock(mu);
        campaign_status = r.status();
      }
      campaign_done = true;
    });
  }
  void StopCampaign() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
  // A crash: the campaign thread is gone and the election object is destroyed without resigning.
  void Crash() {
    StopCampaign();
    election.reset();
  }
  std::vector<std::string> Lost() {
    std::lock_guard<std::mutex> lock(mu);
    return lost;
  }
  ~Replica() {
    StopCampaign();
    election.reset();  // joins the keepalive thread, whose on_lost uses mu and lost
  }
};

class EtcdElectionTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(etcd_.Start(), ""); }
  void TearDown() override {
    replicas_.clear();  // before etcd goes away
    etcd_.Stop();
  }

  Replica& AddReplica(const std::string& identity) {
    auto r = std::make_unique<Replica>();
    Replica* raw = r.get();
    r->identity = identity;
    LeaderElectionOptions o;
    o.etcd.endpoints = etcd_.endpoints();
    o.identity = identity;
    o.on_lost = [raw](const std::string& why) {
      std::lock_guard<std::mutex> lock(raw->mu);
      raw->lost.push_back(why);
    };
    StatusOr<std::unique_ptr<LeaderElection>> e = LeaderElection::Create(o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (e.ok()) r->election = std::move(*e);
    replicas_.push_back(std::move(r));
    return *replicas_.back();
  }
  // The replicas whose campaign succeeded.
  std::vector<Replica*> Winners() {
    std::vector<Replica*> out;
    for (auto& r : replicas_) {
      if (r->won) out.push_back(r.get());
    }
    return out;
  }
  std::unique_ptr<EtcdStore> FencedStore(const EtcdFence& fence) {
    EtcdStoreOptions o;
    o.etcd.endpoints = etcd_.endpoints();
    o.fence = fence;
    StatusOr<std::unique_ptr<EtcdStore>> s = EtcdStore::Open(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }

  EtcdTestCluster etcd_;
  std::vector<std::unique_ptr<Replica>> replicas_;
};

TEST_F(EtcdElectionTest, ExactlyOneOfThreeCampaignersLeadsAndEveryoneKnowsWhichOne) {
  for (const char* id : {"http://replica-a:8080", "http://replica-b:8080", "http://replica-c:8080"}) {
    AddReplica(id).Campaign();
  }
  ASSERT_TRUE(WaitFor([&] { return !Winners().empty(); }, seconds(5)));
  std::this_thread::sleep_for(milliseconds(1000));  // five more polls of the losers
  const std::vector<Replica*> winners = Winners();
  ASSERT_EQ(winners.size(), 1u);
  Replica& leader = *winners[0];
  EXPECT_TRUE(leader.election->is_leader());
  EXPECT_GT(leader.revision.load(), 0);
  EXPECT_EQ(leader.election->fence().key, "estuary-leader");
  EXPECT_EQ(leader.election->fence().create_revision, leader.revision.load());
  for (auto& r : replicas_) {
    EXPECT_EQ(r->election->is_leader(), r.get() == &leader) << r->identity;
    StatusOr<std::optional<std::string>> who = r->election->Leader();
    ASSERT_TRUE(who.ok()) << who.status().ToString();
    EXPECT_EQ(*who, leader.identity);
  }
  // The leader stays leader across several keepalive periods.
  std::this_thread::sleep_for(seconds(2));
  EXPECT_TRUE(leader.election->is_leader());
  EXPECT_TRUE(leader.Lost().empty());
  EXPECT_EQ(Winners().size(), 1u);
}

TEST_F(EtcdElectionTest, ACrashedLeaderIsReplacedWithinTenSecondsAndItsFencedWritesAreRefused) {
  for (const char* id : {"replica-a", "replica-b", "replica-c"}) AddReplica(id).Campaign();
  ASSERT_TRUE(WaitFor([&] { return !Winners().empty(); }, seconds(5)));
  Replica& old_leader = *Winners()[0];
  const EtcdFence old_fence = old_leader.election->fence();
  std::unique_ptr<EtcdStore> old_store = FencedStore(old_fence);
  ASSERT_TRUE(old_store);
  StoreBatch first;
  first.Put("job/1", "written by " + old_leader.identity);
  ASSERT_TRUE(old_store->Apply(first).ok());

  // The leader crashes: no more keepalives, no resignation. Its lease expires after the TTL.
  const Clock::time_point crashed_at = Clock::now();
  old_leader.Crash();
  ASSERT_TRUE(WaitFor([&] { return Winners().size() == 2; }, seconds(15)));
  const double takeover_s = std::chrono::duration<double>(Clock::now() - crashed_at).count();
  std::printf("[ takeover ] a crashed leader (ttl 3 s) was replaced after %.2f s\n", takeover_s);
  EXPECT_LT(takeover_s, 10.0);
  EXPECT_GT(takeover_s, 1.0);  // not before its lease could have expired

  Replica* new_leader = nullptr;
  for (Replica* r : Winners()) {
    if (r != &old_leader) new_leader = r;
  }
  ASSERT_NE(new_leader, nullptr);
  std::this_thread::sleep_for(milliseconds(500));
  int leading = 0;
  for (auto& r : replicas_) leading += r->election && r->election->is_leader() ? 1 : 0;
  EXPECT_EQ(leading, 1);
  EXPECT_EQ(*new_leader->election->Leader(), new_leader->identity);
  EXPECT_GT(new_leader->revision.load(), old_fence.create_revision);

  // The deposed leader's store cannot write any more; the new leader's can.
  StoreBatch late;
  late.Put("job/1", "late write of the deposed leader");
  late.Put("job/2", "late write of the deposed leader");
  const Status st = old_store->Apply(late);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("lost leadership"), std::string::npos) << st.message();
  std::unique_ptr<EtcdStore> new_store = FencedStore(new_leader->election->fence());
  ASSERT_TRUE(new_store);
  EXPECT_EQ(*new_store->Get("job/1"), "written by " + old_leader.identity);
  EXPECT_EQ(*new_store->Get("job/2"), std::nullopt);
  StoreBatch next;
  next.Put("job/2", "written by " + new_leader->identity);
  EXPECT_TRUE(new_store->Apply(next).ok());
}

TEST_F(EtcdElectionTest, AResigningLeaderHandsOverAtOnce) {
  Replica& a = AddReplica("replica-a");
  a.Campaign();
  ASSERT_TRUE(WaitFor([&] { return a.won.load(); }, seconds(5)));
  Replica& b = AddReplica("replica-b");
  b.Campaign();
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_FALSE(b.won.load());

  const Clock::time_point resigned_at = Clock::now();
  ASSERT_TRUE(a.election->Resign().ok());
  EXPECT_FALSE(a.election->is_leader());
  ASSERT_TRUE(WaitFor([&] { return b.won.load(); }, seconds(2)));
  std::printf("[ handover ] after Resign: %.2f s\n",
              std::chrono::duration<double>(Clock::now() - resigned_at).count());
  EXPECT_TRUE(a.Lost().empty());  // resigning is not losing
  EXPECT_EQ(*b.election->Leader(), "replica-b");
  EXPECT_TRUE(a.election->Resign().ok());  // a second Resign is a no-op
}

TEST_F(EtcdElectionTest, ALeaderWhoseLeaseIsRevokedLearnsItLostAndCanCampaignAgain) {
  Replica& a = AddReplica("replica-a");
  a.Campaign();
  ASSERT_TRUE(WaitFor([&] { return a.won.load(); }, seconds(5)));
  a.StopCampaign();
  const int64_t first_term = a.revision;

  // Someone (an operator, etcdctl) revokes the leader's lease: the key goes with it.
  const Json range = Json::parse(
      PostJson(etcd_.endpoints()[0], "/v3/kv/range", Json{{"key", Base64Encode("estuary-leader")}}.dump()));
  const std::string lease = range["kvs"][0]["lease"];
  ASSERT_NE(PostJson(etcd_.endpoints()[0], "/v3/lease/revoke", Json{{"ID", lease}}.dump()), "");

  ASSERT_TRUE(WaitFor([&] { return !a.election->is_leader(); }, seconds(3)));
  ASSERT_TRUE(WaitFor([&] { return !a.Lost().empty(); }, seconds(1)));
  EXPECT_NE(a.Lost()[0].find("lost leadership"), std::string::npos) << a.Lost()[0];
  EXPECT_EQ(a.Lost().size(), 1u);

  std::atomic<bool> stop{false};
  StatusOr<int64_t> again = a.election->Campaign(stop);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_GT(*again, first_term);
  EXPECT_TRUE(a.election->is_leader());
}

TEST_F(EtcdElectionTest, ALeaderCutOffFromEtcdStepsDownWhenItsLeaseWouldExpire) {
  Replica& a = AddReplica("replica-a");
  a.Campaign();
  ASSERT_TRUE(WaitFor([&] { return a.won.load(); }, seconds(5)));
  const Clock::time_point cut_at = Clock::now();
  etcd_.Kill(0);
  ASSERT_TRUE(WaitFor([&] { return !a.election->is_leader(); }, seconds(5)));
  const double stepped_down_s = std::chrono::duration<double>(Clock::now() - cut_at).count();
  std::printf("[ step-down ] leader cut off from etcd stepped down after %.2f s\n", stepped_down_s);
  EXPECT_LE(stepped_down_s, 4.5);  // the TTL (3 s) from its last refresh, plus scheduling slack
  ASSERT_EQ(a.Lost().size(), 1u);
  EXPECT_NE(a.Lost()[0].find("no lease refresh reached etcd"), std::string::npos) << a.Lost()[0];
}

TEST_F(EtcdElectionTest, ACampaignReturnsSoonAfterItIsStopped) {
  Replica& a = AddReplica("replica-a");
  a.Campaign();
  ASSERT_TRUE(WaitFor([&] { return a.won.load(); }, seconds(5)));
  Replica& b = AddReplica("replica-b");
  b.Campaign();
  std::this_thread::sleep_for(milliseconds(300));
  const Clock::time_point stopped_at = Clock::now();
  b.StopCampaign();
  EXPECT_LT(Clock::now() - stopped_at, seconds(1));
  EXPECT_FALSE(b.won.load());
  std::lock_guard<std::mutex> lock(b.mu);
  EXPECT_EQ(b.campaign_status.code(), StatusCode::kUnavailable) << b.campaign_status.ToString();
}

TEST(LeaderElectionCreateTest, CreateRefusesBadOptions) {
  auto create = [](auto&& tweak) {
    LeaderElectionOptions o;
    o.etcd.endpoints = {"http://127.0.0.1:2379"};
    o.identity = "me";
    tweak(o);
    return LeaderElection::Create(o).status().code();
  };
  EXPECT_EQ(create([](LeaderElectionOptions&) {}), StatusCode::kOk);
  EXPECT_EQ(create([](LeaderElectionOptions& o) { o.identity = ""; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(create([](LeaderElectionOptions& o) { o.key = ""; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(create([](LeaderElectionOptions& o) { o.ttl_s = 1; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(create([](LeaderElectionOptions& o) { o.poll_ms = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(create([](LeaderElectionOptions& o) { o.etcd.endpoints.clear(); }), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace estuary
