// EtcdStore and LeaderElection on a three-member etcd cluster that loses a member: the raft
// leader, listed first among the endpoints, is killed; writes go on through the other two (after
// the survivors elect a new raft leader), nothing written before is lost, and the replica that
// led keeps leading. Waits are generous: on two cores a raft election takes one to a few seconds.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "etcd_test_cluster.h"
#include "store/etcd_election.h"
#include "store/etcd_store.h"

namespace estuary {
namespace {

using testing_etcd::EtcdTestCluster;
using testing_etcd::EtcdTestClusterOptions;
using Clock = std::chrono::steady_clock;

TEST(EtcdClusterTest, AThreeMemberClusterKeepsServingTheStoreAndTheLeaderAfterLosingItsRaftLeader) {
  EtcdTestCluster cluster;
  EtcdTestClusterOptions co;
  co.members = 3;
  ASSERT_EQ(cluster.Start(co), "");
  int raft_leader = -1;
  for (int i = 0; i < 50 && raft_leader < 0; ++i) {
    raft_leader = cluster.LeaderIndex();
    if (raft_leader < 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GE(raft_leader, 0) << cluster.LogTails();

  // The raft leader's URL first, so the first calls after its death hit a dead endpoint.
  std::vector<std::string> endpoints = cluster.endpoints();
  std::rotate(endpoints.begin(), endpoints.begin() + raft_leader, endpoints.end());
  EtcdConnection etcd;
  etcd.endpoints = endpoints;
  etcd.request_timeout_ms = 15000;  // generous: covers a raft election on a loaded machine

  LeaderElectionOptions eo;
  eo.etcd = etcd;
  eo.identity = "replica-a";
  eo.ttl_s = 10;  // the replica must survive the raft election, not race it
  std::atomic<bool> lost{false};
  eo.on_lost = [&](const std::string&) { lost = true; };
  StatusOr<std::unique_ptr<LeaderElection>> election = LeaderElection::Create(eo);
  ASSERT_TRUE(election.ok()) << election.status().ToString();
  std::atomic<bool> stop{false};
  StatusOr<int64_t> term = (*election)->Campaign(stop);
  ASSERT_TRUE(term.ok()) << term.status().ToString();

  EtcdStoreOptions so;
  so.etcd = etcd;
  so.fence = (*election)->fence();
  StatusOr<std::unique_ptr<EtcdStore>> opened = EtcdStore::Open(so);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EtcdStore& store = **opened;
  auto write = [&](int i) {
    StoreBatch b;
    b.Put("job/" + std::to_string(1000 + i), "state " + std::to_string(i));
    b.Put("meta/last", std::to_string(i));
    return store.Apply(b);
  };
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(write(i).ok());

  cluster.Kill(raft_leader);
  double slowest_s = 0;
  for (int i = 10; i < 40; ++i) {
    const Clock::time_point t0 = Clock::now();
    const Status st = write(i);
    slowest_s = std::max(slowest_s, std::chrono::duration<double>(Clock::now() - t0).count());
    ASSERT_TRUE(st.ok()) << "write " << i << ": " << st.ToString() << "\n" << cluster.LogTails();
  }
  std::printf("[ failover ] slowest write after the raft leader died: %.2f s\n", slowest_s);

  int n = 0;
  ASSERT_TRUE(store.Scan("job/", [&](std::string_view k, std::string_view v) {
                   EXPECT_EQ(k, "job/" + std::to_string(1000 + n));
                   EXPECT_EQ(v, "state " + std::to_string(n));
                   ++n;
                   return true;
                 }).ok());
  EXPECT_EQ(n, 40);
  EXPECT_EQ(*store.Get("meta/last"), "39");
  // The replica led through the raft election and still does.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_TRUE((*election)->is_leader());
  EXPECT_FALSE(lost.load());
  StatusOr<std::optional<std::string>> who = (*election)->Leader();
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(*who, "replica-a");
  EXPECT_TRUE((*election)->Resign().ok());
}

}  // namespace
}  // namespace estuary
