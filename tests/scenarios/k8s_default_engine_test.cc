// The k8s-default recipe (docs/peers.md) through the engine's own cycle: kube's victim choice for
// an HP gang, applied after the grace period, with ClusterState::CheckInvariants() after every
// cycle, and stable afterwards — later cycles evict and place nothing more.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "engine/engine.h"
#include "tests/testing/engine_fixtures.h"

namespace estuary {
namespace {

using testing::WholeGpuJob;

// The recipe's engine configuration: k8s-fit, priority queue, no Align, no topology, kube's
// victims, no Absorb; victims wait again in the queue (requeue) so that later cycles could
// ping-pong if the engine were unstable.
EngineConfig K8sDefault() {
  EngineConfig o;
  o.name = "k8s";
  o.policy = "k8s-fit";
  o.priority_queue = true;
  o.allocate.align = false;
  o.allocate.topology = false;
  o.allocate.victims = VictimSelection::kKube;
  o.absorb = false;
  o.grace_s = 30;
  o.requeue = true;
  return o;
}

std::map<uint32_t, std::multiset<EngineEvent::Kind>> ByJob(const std::vector<EngineEvent>& events) {
  std::map<uint32_t, std::multiset<EngineEvent::Kind>> out;
  for (const EngineEvent& e : events) out[e.job].insert(e.kind);
  return out;
}

TEST(K8sDefaultEngine, AnHpGangEvictsKubesVictimsAfterTheGraceAndLaterCyclesChangeNothing) {
  // Three 8-GPU nodes: j1 (priority 100, two whole-node replicas) and j2 (priority 50, one) fill
  // them. At 10 s the HP gang j3 of two whole nodes arrives. Kube's rules, replica by replica:
  // the first preempts j2 (lowest victim priority), the second one of j1's nodes — and j1, a
  // rigid gang, goes whole. (Estuary's own Reclaim would evict j1 alone.) At 40 s both victims
  // leave and j3 starts; j2 starts again on the node j1 left free, j1 waits.
  auto e = Engine::Create(testing::TwoAswCluster(3), K8sDefault());
  ASSERT_TRUE(e.ok()) << e.status().message();
  Engine& m = **e;
  ASSERT_TRUE(m.Submit(WholeGpuJob(1, 2, 8, 100, true), SubmitMode::kStartNow, 0).started);
  ASSERT_TRUE(m.Submit(WholeGpuJob(2, 1, 8, 50, true), SubmitMode::kStartNow, 0).started);
  ASSERT_TRUE(m.state().CheckInvariants().ok());
  const Admission hp = m.Submit(WholeGpuJob(3, 2, 8, kHpPriority), SubmitMode::kQueue, 10);
  EXPECT_TRUE(hp.reclaiming);
  const auto reclaim = ByJob(m.TakeEvents());
  ASSERT_TRUE(reclaim.count(3));
  EXPECT_EQ(reclaim.at(3).count(EngineEvent::Kind::kReclaim), 1u);
  for (int64_t t : {11, 20, 39}) {
    EXPECT_TRUE(m.RunCycle(t).empty()) << t;
    ASSERT_TRUE(m.state().CheckInvariants().ok()) << t;
  }
  const auto at40 = ByJob(m.RunCycle(40));
  ASSERT_TRUE(m.state().CheckInvariants().ok());
  ASSERT_TRUE(at40.count(1) && at40.count(2) && at40.count(3));
  EXPECT_EQ(at40.at(1).count(EngineEvent::Kind::kReturned), 1u);
  EXPECT_EQ(at40.at(2).count(EngineEvent::Kind::kReturned), 1u);
  EXPECT_EQ(at40.at(3).count(EngineEvent::Kind::kStarted), 1u);
  EXPECT_EQ(at40.at(2).count(EngineEvent::Kind::kStarted), 1u);
  EXPECT_EQ(at40.at(1).count(EngineEvent::Kind::kStarted), 0u);
  EXPECT_EQ(m.Running(3), 2);
  EXPECT_EQ(m.Running(2), 1);
  EXPECT_EQ(m.Running(1), 0);
  // Stability: nothing more is evicted or placed however many cycles follow.
  for (int64_t t : {41, 100, 1000, 100000}) {
    EXPECT_TRUE(m.RunCycle(t).empty()) << t;
    ASSERT_TRUE(m.state().CheckInvariants().ok()) << t;
  }
}

TEST(K8sDefaultEngine, EstuarysOwnVictimsOnTheSameClusterEvictOnlyTheGangThatFreesTwoNodes) {
  EngineConfig o = K8sDefault();
  o.allocate.victims = VictimSelection::kEstuary;
  auto e = Engine::Create(testing::TwoAswCluster(3), o);
  ASSERT_TRUE(e.ok()) << e.status().message();
  Engine& m = **e;
  ASSERT_TRUE(m.Submit(WholeGpuJob(1, 2, 8, 100, true), SubmitMode::kStartNow, 0).started);
  ASSERT_TRUE(m.Submit(WholeGpuJob(2, 1, 8, 50, true), SubmitMode::kStartNow, 0).started);
  EXPECT_TRUE(m.Submit(WholeGpuJob(3, 2, 8, kHpPriority), SubmitMode::kQueue, 10).reclaiming);
  m.TakeEvents();
  const auto at40 = ByJob(m.RunCycle(40));
  ASSERT_TRUE(m.state().CheckInvariants().ok());
  EXPECT_EQ(at40.count(2), 0u) << "j2 is no victim";
  EXPECT_EQ(m.Running(3), 2);
  EXPECT_EQ(m.Running(2), 1);
  EXPECT_EQ(m.Running(1), 0);
}

}  // namespace
}  // namespace estuary
