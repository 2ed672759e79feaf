// The live service as a specification, driven without HTTP: agents register nodes and report,
// tenants submit and cancel, the test runs the loop (RunOnce) on a clock it moves. The store is
// the real SqliteStore in a temporary directory; invariants are checked after every pass.
#include "server/service.h"

#include <unistd.h>

#include <array>
#include <filesystem>
#include <functional>
#include <future>
#include <optional>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/rng.h"
#include "store/sqlite_store.h"

namespace estuary {
namespace {

using ::testing::HasSubstr;

class TestClock final : public Clock {
 public:
  SimTime Now() const override { return ms / 1000; }
  int64_t NowMs() const override { return ms; }
  int64_t ms = 1'000'000'000;
};

const Principal kAlice{Role::kTenant, "alice"};
const Principal kBob{Role::kTenant, "bob"};
const Principal kAdmin{Role::kAdmin, "ops"};
const Principal kAgentA{Role::kAgent, "agent-a"};
const Principal kAgentB{Role::kAgent, "agent-b"};

NodeRegistration Node(const std::string& name, int gpus = 8, const std::string& asw = "asw0") {
  NodeRegistration n;
  n.name = name;
  n.gpus = gpus;
  n.gpu_model = "H800";
  n.cpu_milli = 128000;
  n.memory_mib = 1 << 20;
  n.domains = {{"data", {"az0", "spine0", asw}}, {"param", {"pod0"}}};
  return n;
}

JobRequest Job(const std::string& name, int replicas, int gpus, int32_t priority = 300, bool preemptible = false) {
  JobRequest r;
  r.name = name;
  r.min_replicas = r.max_replicas = replicas;
  r.gpus = gpus;
  r.cpu_milli = 1000;
  r.memory_mib = 1024;
  r.priority = priority;
  r.preemptible = preemptible;
  return r;
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/estuary-service-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    Reopen();
  }
  void TearDown() override {
    service_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  // Drops the service and its store (as a crash would: nothing is flushed beyond what the
  // store already holds) and opens both again on the same directory.
  void Reopen(ServiceOptions o = {}) {
    service_.reset();
    store_.reset();
    // Synchronous NORMAL: a reopen here models the process's crash, which loses nothing the store
    // holds either way (FULL guards against the machine's: store/sqlite_store.h) — fewer syncs, a
    // faster suite.
    SqliteOptions so;
    so.synchronous_normal = true;
    auto st = SqliteStore::Open(dir_, so);
    ASSERT_TRUE(st.ok()) << st.status().message();
    store_ = std::move(*st);
    o.heartbeat_timeout_ms = 30000;
    auto sv = Service::Open(store_.get(), &clock_, o);
    ASSERT_TRUE(sv.ok()) << sv.status().message();
    service_ = std::move(*sv);
  }
  // One loop pass, then the invariants.
  void Pass() {
    service_->RunOnce();
    const Status st = service_->CheckInvariants();
    ASSERT_TRUE(st.ok()) << st.message();
  }
  std::vector<Order> Orders(const Principal& agent) {
    OrderBatch b = service_->WaitOrders(agent, epoch_[agent.name], after_[agent.name], 0);
    epoch_[agent.name] = b.epoch;
    after_[agent.name] = b.last_seq;
    return b.orders;
  }
  // Answers `orders`: starts with `start_state`, standby orders with `standby` (the replica left
  // its GPUs), others with `stopped`.
  void ReportAll(const Principal& agent, const std::vector<Order>& orders, TaskReport::State start_state) {
    std::vector<TaskReport> r;
    for (const Order& o : orders) {
      r.push_back({o.task,
                   o.op == Order::Op::kStart     ? start_state
                   : o.op == Order::Op::kStandby ? TaskReport::State::kStandby
                                                 : TaskReport::State::kStopped,
                   "", o.instance});
    }
    ASSERT_TRUE(service_->Report(agent, r, /*durable=*/false).ok());
  }
  // Submits `r` for `who`, runs a pass and reports every start of `agent` running: the job runs.
  uint64_t RunJob(const Principal& who, const JobRequest& r, const Principal& agent = kAgentA) {
    auto id = service_->Submit(who, r);
    EXPECT_TRUE(id.ok());
    Pass();
    ReportAll(agent, Orders(agent), TaskReport::State::kRunning);
    Pass();
    EXPECT_EQ(Get(id.ok() ? *id : 0, who).phase, JobPhase::kRunning);
    return id.ok() ? *id : 0;
  }
  JobView Get(uint64_t id, const Principal& who = kAlice) {
    auto v = service_->GetJob(who, id);
    EXPECT_TRUE(v.ok());
    return v.ok() ? *v : JobView{};
  }
  // Agent A reports the new instance of `migrate` (a kMigrate order) running: the move completes,
  // and the old instance, told to stop on `from`, reports it stopped.
  void CompleteMove(const Order& migrate, const std::string& from) {
    ASSERT_TRUE(service_->Report(kAgentA, {{migrate.task, TaskReport::State::kRunning, migrate.node, migrate.instance}}, false).ok());
    Pass();
    const std::vector<Order> stop = Orders(kAgentA);
    ASSERT_EQ(stop.size(), 1u);
    EXPECT_EQ(stop[0].op, Order::Op::kStop);
    EXPECT_EQ(stop[0].node, from);
    ReportAll(kAgentA, stop, TaskReport::State::kRunning);
    Pass();
  }
  // The state GET /v1/nodes shows for node `name` (empty for an unknown node).
  std::string NodeState(const std::string& name) {
    for (const NodeView& n : service_->ListNodes()) {
      if (n.name == name) return n.state;
    }
    return {};
  }
  // Runs `f` (an API call that waits for the loop) on another thread while this one runs passes.
  template <typename F>
  auto ViaLoop(F f) {
    auto fut = std::async(std::launch::async, f);
    while (fut.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) Pass();
    return fut.get();
  }
  // A random run's crash and restart: the agent takes its orders again from the new epoch's
  // start (which sends what is still to do), so its unanswered ones are dropped.
  void Restart(const ServiceOptions& o, std::vector<Order>& backlog) {
    Reopen(o);
    epoch_.clear();
    after_.clear();
    backlog.clear();
  }
  // A random run's step after its action: `ms` pass, the agent's heartbeat, a pass, its new
  // orders join `backlog`, `answer(all)` answers some of them (all of them: a drain's step), and
  // another pass.
  template <typename Answer>
  void Step(int64_t ms, std::vector<Order>& backlog, const Answer& answer, bool all = false) {
    clock_.ms += ms;
    ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
    Pass();
    for (const Order& x : Orders(kAgentA)) backlog.push_back(x);
    answer(all);
    Pass();
  }
  // A random run's job: 1-3 replicas of 1, 2, 4 or 8 GPUs, HP one time in three, preemptible
  // one time in two.
  static JobRequest RandomJob(Rng& rng, const std::string& name) {
    return Job(name, 1 + static_cast<int>(rng.Uniform(3)), std::array<int, 4>{1, 2, 4, 8}[rng.Uniform(4)],
               rng.Uniform(3) == 0 ? 900 : 100, rng.Uniform(2) == 0);
  }
  // A random run's Standby window: one of `ids`, if it runs, lends some of its replicas from now
  // for 30 s and up to `extra_s` more.
  void RandomWindow(Rng& rng, const std::vector<uint64_t>& ids, uint64_t extra_s) {
    const uint64_t id = ids[rng.Uniform(ids.size())];
    const JobView v = Get(id, kAdmin);
    if (v.phase != JobPhase::kRunning) return;
    (void)service_->AddStandbyWindow(kAdmin, id, clock_.ms, clock_.ms + 1000 * static_cast<int64_t>(30 + rng.Uniform(extra_s)),
                                     1 + static_cast<int32_t>(rng.Uniform(static_cast<uint64_t>(v.request.max_replicas))));
  }
  void RestoreAll(std::set<std::string>& down) {
    for (const std::string& n : down) {
      ASSERT_TRUE(ViaLoop([&] { return service_->NodeAction(kAdmin, n, "restore"); }).ok());
    }
    down.clear();
  }
  std::vector<Order> GrowOntoASecondNode(uint64_t* id);
  // When a move's new instance fails, if it does: never, before its replica's old node fails,
  // after (the service took it for the replica's), or after that and a restart of the service.
  enum class MoveFails { kNever, kBefore, kAfter, kAfterARestart };
  void PlacedAgainOnAMovesTarget(MoveFails fails);
  // Nodes a0 and a1 (agent A); jobs a and b (4 GPUs each) on one node, c on the other; b ends,
  // and a defragmentation starts the one move that frees a node whole: its migrate order.
  void StartOneMoveThatFreesANode(std::vector<Order>* mig);
  int64_t GpuMilliUsed() {
    int64_t used = 0;
    for (const NodeView& n : service_->ListNodes()) used += n.gpu_milli_used;
    return used;
  }

  std::string dir_;
  TestClock clock_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<Service> service_;
  std::map<std::string, uint64_t> epoch_, after_;
};

// The operations of `orders`, in order.
std::vector<Order::Op> Ops(const std::vector<Order>& orders) {
  std::vector<Order::Op> v;
  for (const Order& o : orders) v.push_back(o.op);
  return v;
}

TEST_F(ServiceTest, AJobIsPendingUntilItsAgentReportsItsReplicasRunningAndSucceedsWhenTheyFinish) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1")}).ok());
  auto id = service_->Submit(kAlice, Job("train", 2, 4));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(Get(*id).phase, JobPhase::kPending);
  Pass();
  const std::vector<Order> starts = Orders(kAgentA);
  ASSERT_EQ(starts.size(), 2u);
  for (const Order& o : starts) {
    EXPECT_EQ(o.op, Order::Op::kStart);
    EXPECT_EQ(o.gpus.size(), 4u);
  }
  EXPECT_EQ(Get(*id).phase, JobPhase::kPending);  // decided, not yet running
  EXPECT_EQ(Get(*id).bound_replicas, 2);
  clock_.ms += 150;
  ReportAll(kAgentA, starts, TaskReport::State::kRunning);
  Pass();
  EXPECT_EQ(Get(*id).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(*id).running_ms - Get(*id).submitted_ms, 150);
  EXPECT_EQ(GpuMilliUsed(), 8000);
  ReportAll(kAgentA, starts, TaskReport::State::kSucceeded);
  Pass();
  EXPECT_EQ(Get(*id).phase, JobPhase::kSucceeded);
  EXPECT_EQ(GpuMilliUsed(), 0);
  EXPECT_TRUE(Orders(kAgentA).empty());  // nothing to stop: the replicas ended on their own
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
}

TEST_F(ServiceTest, ATenantSeesAndCancelsOnlyItsOwnJobsWhileAnAdminSeesAll) {
  auto id = service_->Submit(kAlice, Job("mine", 1, 1));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(service_->GetJob(kBob, *id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(service_->Cancel(kBob, *id).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(service_->ListJobs(kBob).empty());
  EXPECT_EQ(service_->ListJobs(kAlice).size(), 1u);
  EXPECT_EQ(service_->ListJobs(kAdmin).size(), 1u);
  EXPECT_EQ(service_->Submit(kAgentA, Job("x", 1, 1)).status().code(), StatusCode::kPermissionDenied);
}

TEST_F(ServiceTest, AnAgentActsOnlyForItsOwnNodes) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  EXPECT_EQ(service_->RegisterNodes(kAgentB, {Node("a0")}).code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());  // re-registration
  EXPECT_EQ(service_->Heartbeat(kAgentB, {"a0"}).code(), StatusCode::kPermissionDenied);
  auto id = service_->Submit(kAlice, Job("j", 1, 8));
  ASSERT_TRUE(id.ok());
  Pass();
  const std::vector<Order> starts = Orders(kAgentA);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(service_->Report(kAgentB, {{starts[0].task, TaskReport::State::kRunning}}, false).code(),
            StatusCode::kPermissionDenied);
  Pass();
  EXPECT_EQ(Get(*id).phase, JobPhase::kPending);  // agent-b's report changed nothing
  EXPECT_TRUE(service_->Report(kAgentA, {{"99-0", TaskReport::State::kRunning}}, false).ok());  // stale: skipped
  EXPECT_EQ(service_->Report(kAgentA, {{"nonsense", TaskReport::State::kRunning}}, false).code(),
            StatusCode::kInvalidArgument);
}

TEST_F(ServiceTest, CancellingARunningJobStopsItsReplicasAndFreesItsGpus) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  auto id = service_->Submit(kAlice, Job("j", 2, 2));
  ASSERT_TRUE(id.ok());
  Pass();
  ReportAll(kAgentA, Orders(kAgentA), TaskReport::State::kRunning);
  Pass();
  ASSERT_EQ(Get(*id).phase, JobPhase::kRunning);
  auto v = service_->Cancel(kAlice, *id);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->phase, JobPhase::kCancelled);
  Pass();
  const std::vector<Order> stops = Orders(kAgentA);
  ASSERT_EQ(stops.size(), 2u);
  for (const Order& o : stops) EXPECT_EQ(o.op, Order::Op::kStop);
  EXPECT_EQ(GpuMilliUsed(), 0);
  ReportAll(kAgentA, stops, TaskReport::State::kStopped);
  Pass();
  Pass();  // stability: further passes order nothing
  EXPECT_TRUE(Orders(kAgentA).empty());
  EXPECT_EQ(Get(*id).phase, JobPhase::kCancelled);
}

TEST_F(ServiceTest, ARunningJobIsStoppedAtItsWalltimeAndStaysFailedWithTheReasonAcrossARestart) {
  // Job j (2 replicas, walltime 60 s) is bound at T and runs; job k waits for its GPUs.
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0", 4)}).ok());
  JobRequest r = Job("j", 2, 2);
  r.walltime_s = 60;
  const uint64_t id = RunJob(kAlice, r);
  auto k = service_->Submit(kAlice, Job("k", 1, 4));
  ASSERT_TRUE(k.ok());
  for (int i = 0; i < 59; ++i) {  // the agent's heartbeats keep its node alive
    clock_.ms += 1'000;
    ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
    Pass();
  }
  EXPECT_EQ(Get(id).phase, JobPhase::kRunning);
  EXPECT_TRUE(Orders(kAgentA).empty());
  // At T + 60 s: j fails with the reason, its replicas are told to stop, and k starts on the GPUs.
  clock_.ms += 1'000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  const JobView v = Get(id);
  EXPECT_EQ(v.phase, JobPhase::kFailed);
  EXPECT_EQ(v.reason, "timed out: its run reached walltime_s 60");
  const std::vector<Order> orders = Orders(kAgentA);
  int stops = 0, starts = 0;
  for (const Order& o : orders) {
    stops += o.op == Order::Op::kStop && o.job == id;
    starts += o.op == Order::Op::kStart && o.job == *k;
  }
  EXPECT_EQ(stops, 2);
  EXPECT_EQ(starts, 1);
  ReportAll(kAgentA, orders, TaskReport::State::kRunning);
  Pass();
  Pass();  // stability: further passes order nothing
  EXPECT_TRUE(Orders(kAgentA).empty());
  EXPECT_EQ(Get(*k).phase, JobPhase::kRunning);
  Reopen();
  Pass();
  EXPECT_EQ(Get(id).phase, JobPhase::kFailed);
  EXPECT_EQ(Get(*k).phase, JobPhase::kRunning);
}

TEST_F(ServiceTest, AJobThatFitsNoNodeWaitsWithItsReasonAndStartsWhenANodeRegisters) {
  auto id = service_->Submit(kAlice, Job("big", 1, 8));
  ASSERT_TRUE(id.ok());
  Pass();
  EXPECT_EQ(Get(*id).phase, JobPhase::kPending);
  EXPECT_FALSE(Get(*id).reason.empty());
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0", 4)}).ok());
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a1", 8)}).ok());
  Pass();
  const std::vector<Order> starts = Orders(kAgentA);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].node, "a1");
}

TEST_F(ServiceTest, ANodeWithoutHeartbeatsFailsAndItsJobStartsAgainElsewhere) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  ASSERT_TRUE(service_->RegisterNodes(kAgentB, {Node("b0")}).ok());
  auto id = service_->Submit(kAlice, Job("j", 1, 8));
  ASSERT_TRUE(id.ok());
  Pass();
  std::vector<Order> a = Orders(kAgentA), b = Orders(kAgentB);
  const Principal& first = a.empty() ? kAgentB : kAgentA;
  const Principal& second = a.empty() ? kAgentA : kAgentB;
  const std::vector<Order>& starts = a.empty() ? b : a;
  ASSERT_EQ(starts.size(), 1u);
  ReportAll(first, starts, TaskReport::State::kRunning);
  Pass();
  ASSERT_EQ(Get(*id).phase, JobPhase::kRunning);
  // Only the other agent keeps sending heartbeats.
  for (int i = 0; i < 4; ++i) {
    clock_.ms += 10000;
    ASSERT_TRUE(service_->Heartbeat(second, {}).ok());
    Pass();
  }
  const std::vector<Order> elsewhere = Orders(second);
  ASSERT_EQ(elsewhere.size(), 1u) << Get(*id).reason << " bound " << Get(*id).bound_replicas << "\n" << service_->MetricsText();
  EXPECT_EQ(elsewhere[0].op, Order::Op::kStart);
  EXPECT_EQ(Get(*id).phase, JobPhase::kPending);  // until the new replica reports running
  const std::vector<Order> stop = Orders(first);
  ASSERT_EQ(stop.size(), 1u);
  EXPECT_EQ(stop[0].op, Order::Op::kStop);
  ReportAll(second, elsewhere, TaskReport::State::kRunning);
  Pass();
  EXPECT_EQ(Get(*id).phase, JobPhase::kRunning);
}

// An agent cut off long enough for its node to fail by heartbeat timeout comes back: its node is
// restored and the job it ran starts there again, as a new instance of its replica. The old
// instance's end — here it failed while the agent was cut off — reaches the service after that:
// it is of an instance the service no longer tracks, and is dropped (before instance ids a report
// named only its task and node, and this one failed the job that had started anew). The new
// instance's reports carry on across a restart of the service.
TEST_F(ServiceTest, ALateReportOfAnInstanceOnANodeTakenForFailedIsNotTakenForItsReplicasNewInstance) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  const uint64_t id = RunJob(kAlice, Job("j", 1, 8));
  clock_.ms += 60000;  // no heartbeat: a0 fails, and the job waits for GPUs
  Pass();
  ASSERT_EQ(service_->ListNodes()[0].state, "failed");
  EXPECT_EQ(Get(id).phase, JobPhase::kPending);
  const std::vector<Order> stop = Orders(kAgentA);  // for the agent, when it comes back
  ASSERT_EQ(Ops(stop), std::vector<Order::Op>{Order::Op::kStop});
  ASSERT_TRUE(ViaLoop([&] { return service_->NodeAction(kAdmin, "a0", "restore"); }).ok());
  Pass();
  const std::vector<Order> start = Orders(kAgentA);
  ASSERT_EQ(Ops(start), std::vector<Order::Op>{Order::Op::kStart});
  EXPECT_EQ(start[0].task, stop[0].task);
  EXPECT_NE(start[0].instance, stop[0].instance);
  // The agent is back: the old instance failed meanwhile, and its stop finds it gone.
  ASSERT_TRUE(service_->Report(kAgentA,
                               {{stop[0].task, TaskReport::State::kFailed, "a0", stop[0].instance},
                                {stop[0].task, TaskReport::State::kStopped, "a0", stop[0].instance}},
                               false)
                  .ok());
  Pass();
  JobView v = Get(id);
  EXPECT_EQ(v.phase, JobPhase::kPending) << v.reason;
  ASSERT_EQ(v.where.size(), 1u);
  EXPECT_EQ(v.where[0].state, "starting");
  EXPECT_TRUE(Orders(kAgentA).empty());  // not started a second time
  ReportAll(kAgentA, start, TaskReport::State::kRunning);
  Pass();
  EXPECT_EQ(Get(id).phase, JobPhase::kRunning);
  Reopen();
  Pass();
  (void)Orders(kAgentA);
  ASSERT_TRUE(service_->Report(kAgentA, {{stop[0].task, TaskReport::State::kFailed, "a0", stop[0].instance}}, false).ok());
  Pass();
  EXPECT_EQ(Get(id).phase, JobPhase::kRunning);
  ReportAll(kAgentA, start, TaskReport::State::kSucceeded);
  Pass();
  EXPECT_EQ(Get(id).phase, JobPhase::kSucceeded);
}

// A node failure shrinks an elastic job from its low replicas (those on the failed node); with
// no room to grow back, its high replicas run on, and a restart adopts them where they run
// rather than stopping them and starting the job afresh — also once its max is lowered below
// their ranks.
TEST_F(ServiceTest, AnElasticJobAFailureShrankFromItsLowReplicasIsAdoptedAsItRunsAfterARestart) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  ASSERT_TRUE(service_->RegisterNodes(kAgentB, {Node("b0")}).ok());
  JobRequest r = Job("elastic", 16, 1);
  r.min_replicas = 2;
  auto id = service_->Submit(kAlice, r);
  ASSERT_TRUE(id.ok());
  Pass();
  const std::vector<Order> a = Orders(kAgentA), b = Orders(kAgentB);
  ASSERT_EQ(a.size() + b.size(), 16u);
  ReportAll(kAgentA, a, TaskReport::State::kRunning);
  ReportAll(kAgentB, b, TaskReport::State::kRunning);
  Pass();
  ASSERT_EQ(Get(*id).running_replicas, 16);
  // The agent of replica 0 goes silent: its node fails and its replicas are lost.
  const bool a_low = std::any_of(a.begin(), a.end(), [](const Order& o) { return o.replica == 0; });
  const Principal& lost = a_low ? kAgentA : kAgentB;
  const Principal& kept = a_low ? kAgentB : kAgentA;
  const std::vector<Order>& kept_starts = a_low ? b : a;
  ASSERT_EQ(kept_starts.size(), 8u);
  for (const Order& o : kept_starts) EXPECT_GE(o.replica, 8);
  for (int i = 0; i < 4; ++i) {
    clock_.ms += 10000;
    ASSERT_TRUE(service_->Heartbeat(kept, {}).ok());
    Pass();
  }
  EXPECT_EQ(Get(*id).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(*id).bound_replicas, 8);
  EXPECT_TRUE(Orders(kept).empty());  // nothing stops on the node that stayed
  (void)Orders(lost);
  EXPECT_EQ(GpuMilliUsed(), 8000);

  Reopen();
  EXPECT_EQ(Get(*id).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(*id).bound_replicas, 8);
  EXPECT_EQ(Get(*id).running_replicas, 8);
  EXPECT_EQ(GpuMilliUsed(), 8000);
  // Adopted where they run: nothing is stopped or started again on the node that stayed.
  ASSERT_TRUE(service_->Heartbeat(kept, {}).ok());
  Pass();
  for (const Order& o : Orders(kept)) ADD_FAILURE() << "order " << static_cast<int>(o.op) << " for " << o.task;
  EXPECT_EQ(Get(*id).restarts, 0);

  // Its max lowered to the 8 it runs: its replicas 8..15 run on (nothing is shed), and a
  // restart adopts them still, ranks above the new max and all.
  const auto resized = ViaLoop([&] { return service_->Resize(kAlice, *id, std::nullopt, 8); });
  ASSERT_TRUE(resized.ok()) << resized.status().message();
  EXPECT_EQ(resized->bound_replicas, 8);
  EXPECT_TRUE(Orders(kept).empty());
  Reopen();
  EXPECT_EQ(Get(*id).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(*id).bound_replicas, 8);
  EXPECT_EQ(Get(*id).request.max_replicas, 8);
  EXPECT_EQ(GpuMilliUsed(), 8000);
  ASSERT_TRUE(service_->Heartbeat(kept, {}).ok());
  Pass();
  for (const Order& o : Orders(kept)) ADD_FAILURE() << "order " << static_cast<int>(o.op) << " for " << o.task;
  EXPECT_EQ(Get(*id).restarts, 0);
  // The lost node comes back: the job grows no further than its new max.
  ASSERT_TRUE(service_->Heartbeat(lost, {}).ok());
  Pass();
  EXPECT_TRUE(Orders(lost).empty());
  EXPECT_EQ(Get(*id).bound_replicas, 8);
}

TEST_F(ServiceTest, AnHpJobReclaimsFromPreemptibleWorkAfterTheGracePeriodAndFurtherPassesChangeNothing) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  const uint64_t lp = RunJob(kAlice, Job("lp", 1, 8, 300, true));
  auto hp = service_->Submit(kBob, Job("hp", 1, 8, 900));
  ASSERT_TRUE(hp.ok());
  Pass();
  // The victim keeps its grace period, warned of the stop to come.
  const std::vector<Order> notice = Orders(kAgentA);
  ASSERT_EQ(notice.size(), 1u);
  EXPECT_EQ(notice[0].op, Order::Op::kEvict);
  EXPECT_EQ(notice[0].job, lp);
  EXPECT_EQ(notice[0].deadline_ms, clock_.ms / 1000 * 1000 + 60000);
  EXPECT_THAT(Get(*hp, kBob).reason, HasSubstr("reclaiming"));
  clock_.ms += 60000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  const std::vector<Order> o = Orders(kAgentA);
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o[0].op, Order::Op::kStop);
  EXPECT_EQ(o[0].job, lp);
  EXPECT_EQ(o[1].op, Order::Op::kStart);
  EXPECT_EQ(o[1].job, *hp);
  EXPECT_EQ(Get(lp).phase, JobPhase::kPending);  // back in the queue
  ReportAll(kAgentA, o, TaskReport::State::kRunning);
  for (int i = 0; i < 3; ++i) {
    clock_.ms += 1000;
    ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
    Pass();
  }
  EXPECT_TRUE(Orders(kAgentA).empty());
  EXPECT_EQ(Get(*hp, kBob).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(lp).phase, JobPhase::kPending);
}

TEST_F(ServiceTest, WithEveryJobAPreemptorAnLpJobReclaimsFromSpotWorkAndNotFromWorkOfItsOwnPriority) {
  // One 8-GPU node: a spot job (100) on 4 GPUs and an LP job (300) on 4. A second LP job of 4
  // GPUs waits: by default it may not reclaim (not HP); with preemptor_min_priority 0 it evicts
  // the spot job, never the LP one, and starts after the grace period.
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  const uint64_t spot = RunJob(kAlice, Job("spot", 1, 4, 100, true));
  const uint64_t lp = RunJob(kAlice, Job("lp", 1, 4, 300, true));
  auto waiting = service_->Submit(kBob, Job("lp2", 1, 4, 300, true));
  ASSERT_TRUE(waiting.ok());
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
  auto x = service_->Explain(kBob, *waiting);
  ASSERT_TRUE(x.ok());
  EXPECT_FALSE(x->may_reclaim);
  ServiceOptions o;
  o.engine = EngineConfig{};
  o.engine->preemptor_min_priority = 0;
  Reopen(o);
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  x = service_->Explain(kBob, *waiting);
  ASSERT_TRUE(x.ok());
  EXPECT_TRUE(x->may_reclaim);
  const std::vector<Order> notice = Orders(kAgentA);
  ASSERT_EQ(notice.size(), 1u);
  EXPECT_EQ(notice[0].op, Order::Op::kEvict);
  EXPECT_EQ(notice[0].job, spot);
  clock_.ms += 60000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  const std::vector<Order> swap = Orders(kAgentA);
  ASSERT_EQ(swap.size(), 2u);
  EXPECT_EQ(swap[0].op, Order::Op::kStop);
  EXPECT_EQ(swap[0].job, spot);
  EXPECT_EQ(swap[1].op, Order::Op::kStart);
  EXPECT_EQ(swap[1].job, *waiting);
  ReportAll(kAgentA, swap, TaskReport::State::kRunning);
  for (int i = 0; i < 3; ++i) {  // stability: the spot job waits, nothing else is evicted
    clock_.ms += 1000;
    ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
    Pass();
  }
  EXPECT_TRUE(Orders(kAgentA).empty());
  EXPECT_EQ(Get(lp).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(*waiting, kBob).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(spot).phase, JobPhase::kPending);
}

TEST_F(ServiceTest, ConservativeBackfillFromItsConfigurationPlansEveryWaitingJobAndBackfillsAShortOne) {
  // Two 8-GPU nodes; j1 (one node, walltime 1000 s) runs from S. j2 (both nodes, walltime 100 s)
  // waits: planned at S + 1000 on both nodes, which are held for it. j3 (one node, walltime
  // 5000 s), submitted next, waits too: the round at S + 30 plans it around j2's plan, at S + 1100
  // (a run from earlier would meet j2's 100 s on either node). j4 (one node, walltime 500 s) ends
  // before S + 1000: at the round after (S + 60) it starts on the idle node.
  ServiceOptions o;
  o.engine = EngineConfig{};
  EngineBackfill b;
  b.easy = true;
  b.conservative = true;
  b.depth = 10;
  EnableBackfill(b, &*o.engine);
  Reopen(o);
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1")}).ok());
  JobRequest r1 = Job("j1", 1, 8);
  r1.walltime_s = 1000;
  RunJob(kAlice, r1);
  const int64_t start = clock_.ms / 1000;
  JobRequest r2 = Job("j2", 2, 8);
  r2.walltime_s = 100;
  JobRequest r3 = Job("j3", 1, 8);
  r3.walltime_s = 5000;
  const auto j2 = service_->Submit(kAlice, r2);
  ASSERT_TRUE(j2.ok());
  Pass();  // j2 is planned for: the idle node is held
  const auto j3 = service_->Submit(kAlice, r3);
  ASSERT_TRUE(j3.ok());
  clock_.ms += 30'000;  // the next round plans j3
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());  // the idle node stays held for j2
  auto x2 = service_->Explain(kAlice, *j2);
  auto x3 = service_->Explain(kAlice, *j3);
  ASSERT_TRUE(x2.ok() && x3.ok());
  EXPECT_EQ(x2->planned, "planned to start at " + std::to_string(start + 1000) + " on 2 nodes");
  EXPECT_EQ(x3->planned, "planned to start at " + std::to_string(start + 1100) + " on 1 node");
  JobRequest r4 = Job("j4", 1, 8);
  r4.walltime_s = 500;
  const auto j4 = service_->Submit(kAlice, r4);
  ASSERT_TRUE(j4.ok());
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());  // not before the next round
  clock_.ms += 30'000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  const std::vector<Order> orders = Orders(kAgentA);
  ASSERT_EQ(orders.size(), 1u);
  EXPECT_EQ(orders[0].op, Order::Op::kStart);
  EXPECT_EQ(orders[0].job, *j4);
  ReportAll(kAgentA, orders, TaskReport::State::kRunning);
  Pass();
  Pass();  // stability: further passes order nothing, the plans stand
  EXPECT_TRUE(Orders(kAgentA).empty());
  x2 = service_->Explain(kAlice, *j2);
  ASSERT_TRUE(x2.ok());
  EXPECT_EQ(x2->planned, "planned to start at " + std::to_string(start + 1000) + " on 2 nodes");
}

// A victim's instance that exits with an error while its stop is on the way (a real process
// killed by its stop signal may) has stopped; it neither fails its job nor keeps the replica from
// starting again when the job is bound again.
TEST_F(ServiceTest, AnEvictedReplicaThatFailedBeforeItsStopArrivedNeitherFailsItsJobNorStaysStopped) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  const uint64_t lp = RunJob(kAlice, Job("lp", 1, 8, 300, true));
  auto hp = service_->Submit(kBob, Job("hp", 1, 8, 900));
  ASSERT_TRUE(hp.ok());
  Pass();
  ASSERT_EQ(Orders(kAgentA).size(), 1u);  // the eviction notice
  clock_.ms += 60000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  const std::vector<Order> o = Orders(kAgentA);
  ASSERT_EQ(o.size(), 2u);
  ASSERT_EQ(o[0].op, Order::Op::kStop);
  ASSERT_EQ(o[1].op, Order::Op::kStart);
  ASSERT_TRUE(service_->Report(kAgentA, {{o[0].task, TaskReport::State::kFailed}, {o[1].task, TaskReport::State::kRunning}},
                               /*durable=*/false).ok());
  Pass();
  EXPECT_EQ(Get(lp).phase, JobPhase::kPending);  // evicted: it waits, not failed
  ASSERT_TRUE(service_->Report(kAgentA, {{o[1].task, TaskReport::State::kSucceeded}}, /*durable=*/false).ok());
  Pass();
  EXPECT_EQ(Get(*hp, kBob).phase, JobPhase::kSucceeded);
  const std::vector<Order> again = Orders(kAgentA);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].op, Order::Op::kStart);
  EXPECT_EQ(again[0].job, lp);
  ReportAll(kAgentA, again, TaskReport::State::kRunning);
  Pass();
  EXPECT_EQ(Get(lp).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(lp).running_replicas, 1);
}

// A replica that succeeded while its job runs on is done while the engine binds it; once the
// engine lets it go (here a Reclaim evicts the job), binding it again is a new run: a gang whose
// first replica had succeeded starts whole again (found by tests/service/http_one_engine_test,
// where such a job stayed pending, bound and short of its min, for ever).
TEST_F(ServiceTest, AReplicaThatSucceededRunsAgainWhenItsEvictedJobIsBoundAgain) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  const uint64_t lp = RunJob(kAlice, Job("lp", 2, 4, 300, true));
  // Its first replica's work is done (a task is named JOB-REPLICA); the second runs on.
  ASSERT_TRUE(service_->Report(kAgentA, {{std::to_string(lp) + "-0", TaskReport::State::kSucceeded}}, /*durable=*/false).ok());
  Pass();
  EXPECT_EQ(Get(lp).phase, JobPhase::kRunning);
  auto hp = service_->Submit(kBob, Job("hp", 1, 8, 900));
  ASSERT_TRUE(hp.ok());
  Pass();
  ASSERT_EQ(Orders(kAgentA).size(), 1u);  // the eviction notice of the running replica
  clock_.ms += 60000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  ReportAll(kAgentA, Orders(kAgentA), TaskReport::State::kRunning);  // lp's replica stops, hp runs
  Pass();
  EXPECT_EQ(Get(lp).phase, JobPhase::kPending);
  ASSERT_TRUE(service_->Report(kAgentA, {{std::to_string(*hp) + "-0", TaskReport::State::kSucceeded}}, /*durable=*/false).ok());
  Pass();
  const std::vector<Order> again = Orders(kAgentA);
  ASSERT_EQ(again.size(), 2u);  // both replicas start
  for (const Order& o : again) {
    EXPECT_EQ(o.op, Order::Op::kStart);
    EXPECT_EQ(o.job, lp);
  }
  ReportAll(kAgentA, again, TaskReport::State::kRunning);
  Pass();
  EXPECT_EQ(Get(lp).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(lp).running_replicas, 2);
}

TEST_F(ServiceTest, AfterARestartRunningJobsKeepTheirGpusAndNothingIsBoundTwice) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1")}).ok());
  auto running = service_->Submit(kAlice, Job("running", 1, 8));
  ASSERT_TRUE(running.ok());
  Pass();
  const std::vector<Order> first = Orders(kAgentA);
  ASSERT_EQ(first.size(), 1u);
  ReportAll(kAgentA, first, TaskReport::State::kRunning);
  Pass();
  auto starting = service_->Submit(kAlice, Job("starting", 1, 8));
  ASSERT_TRUE(starting.ok());
  Pass();
  const std::vector<Order> second = Orders(kAgentA);
  ASSERT_EQ(second.size(), 1u);
  auto waiting = service_->Submit(kAlice, Job("waiting", 1, 8));
  ASSERT_TRUE(waiting.ok());
  auto cancelled = service_->Submit(kAlice, Job("cancelled", 1, 1));
  ASSERT_TRUE(cancelled.ok());
  ASSERT_TRUE(service_->Cancel(kAlice, *cancelled).ok());  // stored, not yet applied by the loop

  Reopen();
  ASSERT_TRUE(service_->CheckInvariants().ok()) << service_->CheckInvariants().message();
  EXPECT_EQ(Get(*running).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(*starting).phase, JobPhase::kPending);
  EXPECT_EQ(Get(*cancelled).phase, JobPhase::kCancelled);
  EXPECT_EQ(GpuMilliUsed(), 16000);  // both placements adopted as they were
  // The replica that was starting is ordered again, on the same GPUs; the running one is not.
  const std::vector<Order> again = Orders(kAgentA);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].task, second[0].task);
  EXPECT_EQ(again[0].node, second[0].node);
  EXPECT_EQ(again[0].gpus, second[0].gpus);
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());  // the waiting job has no room
  EXPECT_EQ(Get(*waiting).phase, JobPhase::kPending);
  // Ids continue after the highest stored one.
  auto next = service_->Submit(kAlice, Job("next", 1, 1));
  ASSERT_TRUE(next.ok());
  EXPECT_GT(*next, *cancelled);
}

// A replica that succeeded while the rest of its job runs on is done across a restart too: it
// keeps its GPUs until its job ends, is not started again, and the job is adopted as it runs.
TEST_F(ServiceTest, AReplicaThatSucceededWhileItsJobRunsOnIsNotStartedAgainAfterARestart) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  const uint64_t id = RunJob(kAlice, Job("pair", 2, 4));
  const std::string first = std::to_string(id) + "-0", second = std::to_string(id) + "-1";
  ASSERT_TRUE(service_->Report(kAgentA, {{first, TaskReport::State::kSucceeded}}, /*durable=*/false).ok());
  Pass();
  ASSERT_EQ(Get(id).phase, JobPhase::kRunning);
  Reopen();
  ASSERT_TRUE(service_->CheckInvariants().ok()) << service_->CheckInvariants().message();
  EXPECT_EQ(Get(id).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(id).running_replicas, 1);
  EXPECT_EQ(Get(id).bound_replicas, 2);
  EXPECT_EQ(GpuMilliUsed(), 8000);
  Pass();
  Pass();  // stability
  EXPECT_TRUE(Orders(kAgentA).empty());  // neither the done replica started again nor the other stopped
  ASSERT_TRUE(service_->Report(kAgentA, {{second, TaskReport::State::kSucceeded}}, /*durable=*/false).ok());
  Pass();
  EXPECT_EQ(Get(id).phase, JobPhase::kSucceeded);
  EXPECT_EQ(GpuMilliUsed(), 0);
  EXPECT_TRUE(Orders(kAgentA).empty());
}

// A job whose replica succeeded on a node that is then drained is evicted whole and placed again
// in the same cycle: the replica that succeeded is a new run where the engine binds it now, not
// done on the drained node. Found by the liveness run with two agents: its done record stayed,
// and the next restart's recovery, draining that node again, evicted the job under a replica
// that ran ("the recovered state is inconsistent").
TEST_F(ServiceTest, AReplicaThatSucceededOnANodeThenDrainedRunsAgainWhereItsJobIsPlacedNext) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1"), Node("a2")}).ok());
  const uint64_t id = RunJob(kAlice, Job("pair", 2, 8));
  const JobView before = Get(id);
  ASSERT_EQ(before.where.size(), 2u);
  const std::string done_node = before.where[0].node;
  ASSERT_TRUE(service_->Report(kAgentA, {{std::to_string(id) + "-0", TaskReport::State::kSucceeded}}, false).ok());
  Pass();
  ASSERT_EQ(Get(id).phase, JobPhase::kRunning);
  ASSERT_TRUE(ViaLoop([&] { return service_->NodeAction(kAdmin, done_node, "drain"); }).ok());
  Pass();
  // Replica 0 is told to start on the node the engine placed it on (not the drained one).
  const JobView after = Get(id);
  ASSERT_EQ(after.where.size(), 2u);
  for (const auto& w : after.where) {
    EXPECT_NE(w.node, done_node) << "replica " << w.replica << " " << w.state;
    if (w.replica == 0) {
      EXPECT_EQ(w.state, "starting");
    }
  }
  bool started = false;
  for (const Order& o : Orders(kAgentA)) started |= o.op == Order::Op::kStart && o.task == std::to_string(id) + "-0";
  EXPECT_TRUE(started);
  // A restart finds what the engine binds where the records say, and the job runs again.
  Reopen();
  ASSERT_TRUE(service_->CheckInvariants().ok()) << service_->CheckInvariants().message();
  for (int k = 0; k < 4; ++k) {
    Pass();
    ReportAll(kAgentA, Orders(kAgentA), TaskReport::State::kRunning);
  }
  Pass();
  EXPECT_EQ(Get(id).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(id).running_replicas, 2);
}

TEST_F(ServiceTest, EveryJobThatGotAnIdIsStoredBeforeTheLoopSeesIt) {
  std::vector<uint64_t> ids;
  for (int i = 0; i < 50; ++i) {
    auto id = service_->Submit(kAlice, Job("j" + std::to_string(i), 1, 1));
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  Reopen();  // the loop never ran
  for (uint64_t id : ids) EXPECT_EQ(Get(id).phase, JobPhase::kPending);
  EXPECT_EQ(service_->ListJobs(kAlice).size(), 50u);
}

TEST_F(ServiceTest, ADrainedNodeStopsItsTasksAndTheirJobsStartElsewhereWhileACordonedOneKeepsItsWork) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1"), Node("a2")}).ok());
  auto a = service_->Submit(kAlice, Job("a", 1, 8));
  auto b = service_->Submit(kAlice, Job("b", 1, 8));
  ASSERT_TRUE(a.ok() && b.ok());
  Pass();
  const std::vector<Order> starts = Orders(kAgentA);
  ASSERT_EQ(starts.size(), 2u);
  ReportAll(kAgentA, starts, TaskReport::State::kRunning);
  Pass();
  const std::string node_a = starts[0].job == *a ? starts[0].node : starts[1].node;
  const std::string node_b = starts[0].job == *b ? starts[0].node : starts[1].node;
  EXPECT_EQ(ViaLoop([&] { return service_->NodeAction(kAdmin, node_b, "cordon"); }).code(), StatusCode::kOk);
  EXPECT_EQ(ViaLoop([&] { return service_->NodeAction(kAdmin, node_a, "drain"); }).code(), StatusCode::kOk);
  const std::vector<Order> stop = Orders(kAgentA);
  ASSERT_EQ(stop.size(), 1u);
  EXPECT_EQ(stop[0].op, Order::Op::kStop);
  EXPECT_EQ(stop[0].node, node_a);
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());  // the replica starts again only once it has stopped
  ReportAll(kAgentA, stop, TaskReport::State::kRunning);
  Pass();
  const std::vector<Order> moved = Orders(kAgentA);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0].op, Order::Op::kStart);
  EXPECT_EQ(moved[0].job, *a);
  EXPECT_NE(moved[0].node, node_a);
  EXPECT_NE(moved[0].node, node_b);  // cordoned: no new work
  EXPECT_EQ(Get(*b).phase, JobPhase::kRunning);  // its work stays
  for (const NodeView& n : service_->ListNodes()) {
    if (n.name == node_a) {
      EXPECT_EQ(n.state, "drained");
    }
    if (n.name == node_b) {
      EXPECT_EQ(n.state, "cordoned");
    }
  }
  EXPECT_EQ(ViaLoop([&] { return service_->NodeAction(kAdmin, node_a, "explode"); }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ViaLoop([&] { return service_->NodeAction(kAdmin, "nope", "drain"); }).code(), StatusCode::kNotFound);
  EXPECT_EQ(ViaLoop([&] { return service_->NodeAction(kAlice, node_a, "restore"); }).code(), StatusCode::kPermissionDenied);
  // Node states survive a restart.
  Reopen();
  for (const NodeView& n : service_->ListNodes()) {
    if (n.name == node_a) {
      EXPECT_EQ(n.state, "drained");
    }
    if (n.name == node_b) {
      EXPECT_EQ(n.state, "cordoned");
    }
  }
  EXPECT_EQ(Get(*b).phase, JobPhase::kRunning);
}

TEST_F(ServiceTest, ExplainSaysWhetherAJobFitsNowWithReclaimOrNotAtAll) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  RunJob(kAlice, Job("lp", 1, 8, 300, true));  // preemptible LP work holds the node
  auto dev = service_->Submit(kAlice, Job("dev", 1, 8, 500));      // waits: LP work holds the node
  auto huge = service_->Submit(kAlice, Job("huge", 2, 8, 500));    // two nodes' worth: never here
  ASSERT_TRUE(dev.ok() && huge.ok());
  Pass();
  auto e = service_->Explain(kAlice, *dev);
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->fits_now);
  EXPECT_TRUE(e->reclaim_feasible);  // it would fit if the LP job went ...
  EXPECT_FALSE(e->may_reclaim);      // ... but only HP jobs Reclaim
  EXPECT_EQ(e->victims, 1);
  EXPECT_EQ(e->victims_max_priority, 300);
  auto h = service_->Explain(kAlice, *huge);
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE(h->fits_now);
  EXPECT_FALSE(h->reclaim_feasible);
  EXPECT_FALSE(h->shortfall.empty());
  EXPECT_EQ(service_->Explain(kBob, *dev).status().code(), StatusCode::kNotFound);
}

TEST_F(ServiceTest, AReservationHoldsNodesUntilItsJobStartsThenEndsAndNoneOutlivesARestart) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1")}).ok());
  auto small = service_->Submit(kAlice, Job("small", 1, 4));
  ASSERT_TRUE(small.ok());
  Pass();
  const std::vector<Order> s1 = Orders(kAgentA);
  ASSERT_EQ(s1.size(), 1u);
  ReportAll(kAgentA, s1, TaskReport::State::kRunning);
  Pass();
  auto gang = service_->Submit(kAlice, Job("gang", 2, 8));  // needs both nodes whole
  ASSERT_TRUE(gang.ok());
  Pass();
  auto r = ViaLoop([&] { return service_->Reserve(kAlice, *gang, 600); });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->nodes.size(), 2u);
  EXPECT_EQ(service_->ListReservations(kAlice).size(), 1u);
  EXPECT_TRUE(service_->ListReservations(kBob).empty());
  // Held: a new small job does not start on the held nodes, though 4 GPUs are free.
  auto later = service_->Submit(kAlice, Job("later", 1, 4));
  ASSERT_TRUE(later.ok());
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
  // A restart keeps the reservation of the job that still waits.
  Reopen();
  ASSERT_EQ(service_->ListReservations(kAlice).size(), 1u);
  // The small job ends: the gang starts and its reservation ends with its purpose.
  ReportAll(kAgentA, s1, TaskReport::State::kSucceeded);
  Pass();
  const std::vector<Order> s2 = Orders(kAgentA);
  int gang_starts = 0;
  for (const Order& o : s2) gang_starts += o.job == *gang && o.op == Order::Op::kStart;
  EXPECT_EQ(gang_starts, 2);
  EXPECT_TRUE(service_->ListReservations(kAlice).empty());
  Reopen();
  EXPECT_TRUE(service_->ListReservations(kAlice).empty());
  // Bad requests.
  EXPECT_EQ(service_->Reserve(kBob, *later, 600).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(service_->Reserve(kAlice, *later, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ViaLoop([&] { return service_->Reserve(kAlice, *gang, 60); }).status().code(),
            StatusCode::kInvalidArgument);  // running: nothing to hold for
}

TEST_F(ServiceTest, AReservationEndsWhenItsTimeIsUp) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  auto lp = service_->Submit(kAlice, Job("lp", 1, 4));
  ASSERT_TRUE(lp.ok());
  Pass();
  ReportAll(kAgentA, Orders(kAgentA), TaskReport::State::kRunning);
  Pass();
  auto big = service_->Submit(kAlice, Job("big", 1, 8));
  ASSERT_TRUE(big.ok());
  Pass();
  ASSERT_TRUE(ViaLoop([&] { return service_->Reserve(kAlice, *big, 30); }).ok());
  clock_.ms += 29000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  EXPECT_EQ(service_->ListReservations(kAlice).size(), 1u);
  clock_.ms += 1000;
  Pass();
  EXPECT_TRUE(service_->ListReservations(kAlice).empty());
}

TEST_F(ServiceTest, AnAdminsConfigurationChangesTheGracePeriodAndOutlivesARestart) {
  EXPECT_EQ(service_->GetConfig().grace_s, 60);
  const auto change = [](std::optional<int64_t> grace, std::optional<int64_t> heartbeat, std::optional<int64_t> defrag,
                         std::optional<bool> absorb) {
    Service::ConfigChange c;
    c.grace_s = grace;
    c.heartbeat_timeout_s = heartbeat;
    c.defrag_interval_s = defrag;
    c.absorb = absorb;
    return c;
  };
  const auto none = std::nullopt;
  EXPECT_EQ(service_->SetConfig(kAlice, change(10, none, none, none)).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->SetConfig(kAdmin, change(-1, none, none, none)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(service_->SetConfig(kAdmin, change(none, 0, none, none)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(service_->SetConfig(kAdmin, change(none, none, -1, none)).status().code(), StatusCode::kInvalidArgument);
  auto c = ViaLoop([&] { return service_->SetConfig(kAdmin, change(10, none, 600, false)); });
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->grace_s, 10);
  EXPECT_FALSE(c->absorb);
  EXPECT_EQ(c->heartbeat_timeout_s, 30);
  EXPECT_EQ(c->defrag_interval_s, 600);
  Reopen();
  EXPECT_EQ(service_->GetConfig().grace_s, 10);
  EXPECT_FALSE(service_->GetConfig().absorb);
  EXPECT_EQ(service_->GetConfig().defrag_interval_s, 600);
  // A Reclaim now gives its victims 10 s.
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  RunJob(kAlice, Job("lp", 1, 8, 300, true));
  ASSERT_TRUE(service_->Submit(kBob, Job("hp", 1, 8, 900)).ok());
  Pass();
  const std::vector<Order> notice = Orders(kAgentA);
  ASSERT_EQ(notice.size(), 1u);
  EXPECT_EQ(notice[0].deadline_ms, clock_.ms / 1000 * 1000 + 10000);
}

TEST_F(ServiceTest, LoweringARunningJobsMaxStopsItsSurplusReplicasAndRaisingItLetsAbsorbGrowIt) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1")}).ok());
  JobRequest r = Job("elastic", 4, 2);  // 4 replicas of 2 GPUs, rigid
  auto id = service_->Submit(kAlice, r);
  ASSERT_TRUE(id.ok());
  Pass();
  ReportAll(kAgentA, Orders(kAgentA), TaskReport::State::kRunning);
  Pass();
  ASSERT_EQ(Get(*id).running_replicas, 4);
  EXPECT_EQ(ViaLoop([&] { return service_->Resize(kAlice, *id, 3, 3); }).status().code(), StatusCode::kOk);
  // Min above the replicas running is refused; so are bad bounds and other tenants.
  EXPECT_EQ(ViaLoop([&] { return service_->Resize(kAlice, *id, 5, 6); }).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(service_->Resize(kAlice, *id, 4, 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(service_->Resize(kBob, *id, 1, 2).status().code(), StatusCode::kNotFound);
  const std::vector<Order> stop = Orders(kAgentA);
  ASSERT_EQ(stop.size(), 1u);  // one replica above the new max
  EXPECT_EQ(stop[0].op, Order::Op::kStop);
  EXPECT_EQ(stop[0].task, std::to_string(*id) + "-3");
  ReportAll(kAgentA, stop, TaskReport::State::kStopped);
  Pass();
  EXPECT_EQ(Get(*id).running_replicas, 3);
  EXPECT_EQ(Get(*id).request.max_replicas, 3);
  // Elastic up to 8: Absorb grows it onto the free GPUs (16 - 6 = 10: five more replicas).
  auto v = ViaLoop([&] { return service_->Resize(kAlice, *id, std::nullopt, 8); });
  ASSERT_TRUE(v.ok()) << v.status().message();
  Pass();
  const std::vector<Order> grow = Orders(kAgentA);
  EXPECT_EQ(grow.size(), 5u);
  for (const Order& o : grow) EXPECT_EQ(o.op, Order::Op::kStart);
  ReportAll(kAgentA, grow, TaskReport::State::kRunning);
  Pass();
  Pass();  // stability
  EXPECT_TRUE(Orders(kAgentA).empty());
  EXPECT_EQ(Get(*id).running_replicas, 8);
  Reopen();  // the new bounds and the eight replicas outlive a restart
  EXPECT_EQ(Get(*id).request.max_replicas, 8);
  EXPECT_EQ(Get(*id).running_replicas, 8);
  EXPECT_EQ(GpuMilliUsed(), 16000);
}

// An elastic job of 2-3 replicas of 2 GPUs runs 2 on node a0 (4 GPUs); node a1 (4 GPUs)
// registers and Absorb grows it by a third replica there: its start order, not yet answered.
std::vector<Order> ServiceTest::GrowOntoASecondNode(uint64_t* id) {
  EXPECT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0", 4)}).ok());
  JobRequest r = Job("elastic", 2, 2);
  r.max_replicas = 3;
  *id = RunJob(kAlice, r);
  EXPECT_TRUE(service_->RegisterNodes(kAgentA, {Node("a1", 4)}).ok());
  Pass();
  const std::vector<Order> grow = Orders(kAgentA);
  EXPECT_EQ(grow.size(), 1u);
  for (const Order& o : grow) {
    EXPECT_EQ(o.op, Order::Op::kStart);
    EXPECT_EQ(o.node, "a1");
  }
  return grow;
}

// A job whose replicas all succeeded while a growth was starting, the growth then shrunk again
// before it ran: nothing of it runs or starts any more, so it has succeeded (it once stayed
// `running` for ever with its done replicas bound and none running).
TEST_F(ServiceTest, AJobWhoseOtherReplicasSucceededEndsWhenItsStartingGrowthIsShrunkAway) {
  uint64_t id = 0;
  const std::vector<Order> grow = GrowOntoASecondNode(&id);
  ASSERT_EQ(grow.size(), 1u);
  const std::string grown = grow[0].task;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(service_->Report(kAgentA, {{std::to_string(id) + "-" + std::to_string(i), TaskReport::State::kSucceeded}},
                                 /*durable=*/false)
                    .ok());
  }
  Pass();
  EXPECT_EQ(Get(id).phase, JobPhase::kRunning);  // its third replica is starting
  ASSERT_TRUE(ViaLoop([&] { return service_->Resize(kAlice, id, std::nullopt, 2); }).ok());
  const std::vector<Order> stop = Orders(kAgentA);
  ASSERT_EQ(stop.size(), 1u);
  EXPECT_EQ(stop[0].op, Order::Op::kStop);
  EXPECT_EQ(stop[0].task, grown);
  ReportAll(kAgentA, stop, TaskReport::State::kStopped);
  Pass();
  EXPECT_EQ(Get(id).phase, JobPhase::kSucceeded);
  EXPECT_EQ(GpuMilliUsed(), 0);
  Pass();  // stability
  EXPECT_TRUE(Orders(kAgentA).empty());
  EXPECT_EQ(Get(id).phase, JobPhase::kSucceeded);
}

// A replica told to stop whose node then failed stopped with it: no report of that stop will
// come, and the replica runs again wherever the engine binds it next.
TEST_F(ServiceTest, AReplicaWhoseStopWasUnderWayWhenItsNodeFailedStartsAgainWhereItIsBoundNext) {
  uint64_t id = 0;
  const std::vector<Order> grow = GrowOntoASecondNode(&id);
  ASSERT_EQ(grow.size(), 1u);
  ReportAll(kAgentA, grow, TaskReport::State::kRunning);
  Pass();
  ASSERT_EQ(Get(id).running_replicas, 3);
  ASSERT_TRUE(ViaLoop([&] { return service_->Resize(kAlice, id, std::nullopt, 2); }).ok());
  const std::vector<Order> stop = Orders(kAgentA);
  ASSERT_EQ(stop.size(), 1u);
  ASSERT_EQ(stop[0].op, Order::Op::kStop);
  ASSERT_EQ(stop[0].task, grow[0].task);
  EXPECT_EQ(ViaLoop([&] { return service_->NodeAction(kAdmin, "a1", "fail"); }).code(), StatusCode::kOk);
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a2", 4)}).ok());
  ASSERT_TRUE(ViaLoop([&] { return service_->Resize(kAlice, id, std::nullopt, 3); }).ok());
  Pass();
  const std::vector<Order> again = Orders(kAgentA);
  EXPECT_EQ(Get(id).bound_replicas, 3);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].op, Order::Op::kStart);
  EXPECT_EQ(again[0].task, grow[0].task);
  EXPECT_EQ(again[0].node, "a2");
  ReportAll(kAgentA, again, TaskReport::State::kRunning);
  Pass();
  EXPECT_EQ(Get(id).running_replicas, 3);
}
TEST_F(ServiceTest, MetricsAreThePrometheusTextOfTheState) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  ASSERT_TRUE(service_->Submit(kAlice, Job("a", 1, 8, 300)).ok());
  ASSERT_TRUE(service_->Submit(kAlice, Job("b", 1, 8, 500)).ok());
  Pass();
  const std::string m = service_->MetricsText();
  EXPECT_THAT(m, HasSubstr("estuary_jobs{state=\"pending\"} 2\n"));
  EXPECT_THAT(m, HasSubstr("estuary_pending_jobs{priority=\"300\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("estuary_gpu_allocation_ratio 1\n"));
  EXPECT_THAT(m, HasSubstr("estuary_nodes{state=\"ready\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("# TYPE estuary_cycle_seconds histogram\n"));
}


// ---- Standby windows (SpotGPU) ----

// The start order of a job's first replica, as an agent would have received it.
Order StartOf(uint64_t job) {
  Order o;
  o.op = Order::Op::kStart;
  o.task = std::to_string(job) + "-0";
  o.job = job;
  return o;
}

// A service whose replicas leave their GPUs through a standby_enter hook (their agent answers).
JobRequest HookedService(const char* name, int replicas, int gpus) {
  JobRequest r = Job(name, replicas, gpus, 900);
  r.hook_standby_enter = JobCommand{{"curl -sf localhost:8000/sleep"}, true};
  return r;
}

TEST_F(ServiceTest, WithoutStandbyInItsConfigurationTheServiceRefusesWindowsAndIgnoresStoredOnes) {
  // A window stored while Standby was on; then the service reopens under a configuration without
  // `standby:` (ServiceOptions::standby off, as `estuary serve --config` sets it): a new window
  // is refused with a reason, and the stored one sends no replica into Standby at its start — the
  // simulator ignores a job's windows under such a configuration too.
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1")}).ok());
  const uint64_t svc = RunJob(kAlice, HookedService("svc", 2, 8));
  const int64_t from = clock_.ms + 60'000, to = clock_.ms + 600'000;
  ASSERT_TRUE(service_->AddStandbyWindow(kAlice, svc, from, to, 1).ok());
  ServiceOptions off;
  off.standby = false;
  Reopen(off);
  Pass();
  (void)Orders(kAgentA);
  const auto refused = service_->AddStandbyWindow(kAlice, svc, to + 1000, to + 60'000, 1);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("Standby is off"));
  clock_.ms = from + 1000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  const std::vector<Order> orders = Orders(kAgentA);
  EXPECT_EQ(std::count_if(orders.begin(), orders.end(), [](const Order& x) { return x.op == Order::Op::kStandby; }), 0);
  // The same window under Standby (the default) sends one replica into Standby at its start.
  Reopen();
  Pass();
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  std::vector<Order> on = Orders(kAgentA);
  Pass();
  const std::vector<Order> more = Orders(kAgentA);
  on.insert(on.end(), more.begin(), more.end());
  EXPECT_EQ(std::count_if(on.begin(), on.end(), [](const Order& x) { return x.op == Order::Op::kStandby; }), 1);
}

TEST_F(ServiceTest, AStandbyWindowLendsAReplicasGpusToSpotWorkAndTakesThemBackByItsEndAcrossARestart) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1")}).ok());
  const uint64_t svc = RunJob(kAlice, HookedService("svc", 2, 8));
  const int64_t from = clock_.ms, to = clock_.ms + 600'000;
  // Bad windows are refused, with the field named.
  EXPECT_EQ(service_->AddStandbyWindow(kBob, svc, from, to, 1).status().code(), StatusCode::kNotFound);
  EXPECT_THAT(service_->AddStandbyWindow(kAlice, svc, from, to, 3).status().message(), HasSubstr("'replicas'"));
  EXPECT_THAT(service_->AddStandbyWindow(kAlice, svc, to, from, 1).status().message(), HasSubstr("'to_ms'"));
  EXPECT_THAT(service_->AddStandbyWindow(kAlice, svc, from - 20, from - 10, 1).status().message(), HasSubstr("past"));
  auto w = service_->AddStandbyWindow(kAlice, svc, from, to, 1);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_THAT(service_->AddStandbyWindow(kAlice, svc, to - 1000, to + 1000, 1).status().message(), HasSubstr("overlaps"));
  EXPECT_EQ(service_->ListStandbyWindows(kAlice).size(), 1u);
  EXPECT_TRUE(service_->ListStandbyWindows(kBob).empty());

  // The newest replica leaves its GPUs.
  Pass();
  const std::vector<Order> standby = Orders(kAgentA);
  ASSERT_EQ(Ops(standby), std::vector<Order::Op>{Order::Op::kStandby});
  EXPECT_EQ(standby[0].task, std::to_string(svc) + "-1");
  EXPECT_EQ(Get(svc).standby_replicas, 1);
  EXPECT_EQ(Get(svc).phase, JobPhase::kRunning);

  // Spot work runs there once the replica left its GPUs (its agent says so); work that is not
  // preemptible does not borrow.
  auto spot = service_->Submit(kBob, Job("spot", 1, 4, 100, true));
  auto batch = service_->Submit(kBob, Job("batch", 1, 4, 100, false));
  ASSERT_TRUE(spot.ok() && batch.ok());
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty()) << "nothing is lent before the agent's answer";
  EXPECT_EQ(Get(*spot, kBob).phase, JobPhase::kPending);
  ReportAll(kAgentA, standby, TaskReport::State::kRunning);
  Pass();
  const std::vector<Order> starts = Orders(kAgentA);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].op, Order::Op::kStart);
  EXPECT_EQ(starts[0].job, *spot);
  EXPECT_EQ(starts[0].node, standby[0].node);
  ReportAll(kAgentA, starts, TaskReport::State::kRunning);
  Pass();
  EXPECT_EQ(Get(*spot, kBob).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(*batch, kBob).phase, JobPhase::kPending);

  // A crash: the restart finds the lender in Standby and the borrower where it ran.
  Reopen();
  Pass();
  for (const Order& o : Orders(kAgentA)) EXPECT_NE(o.op, Order::Op::kStop) << o.task;
  EXPECT_EQ(Get(svc).standby_replicas, 1);
  EXPECT_EQ(Get(*spot, kBob).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(*batch, kBob).phase, JobPhase::kPending);

  // The restore begins a grace period (60 s) before the window's end: the borrower is warned...
  clock_.ms = to - 60'000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  const std::vector<Order> notice = Orders(kAgentA);
  ASSERT_EQ(Ops(notice), std::vector<Order::Op>{Order::Op::kEvict});
  EXPECT_EQ(notice[0].job, *spot);
  EXPECT_EQ(notice[0].deadline_ms, to);
  // ... stopped at the end, and the replica resumes after it (in that order).
  clock_.ms = to;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  const std::vector<Order> end = Orders(kAgentA);
  ASSERT_EQ(Ops(end), (std::vector<Order::Op>{Order::Op::kStop, Order::Op::kResume}));
  EXPECT_EQ(end[0].job, *spot);
  EXPECT_EQ(end[1].task, std::to_string(svc) + "-1");
  ReportAll(kAgentA, {end[0]}, TaskReport::State::kRunning);
  Pass();
  EXPECT_EQ(Get(svc).standby_replicas, 0);
  EXPECT_EQ(Get(*spot, kBob).phase, JobPhase::kPending);
  EXPECT_TRUE(service_->ListStandbyWindows(kAlice).empty());
  EXPECT_EQ(GpuMilliUsed(), 16000);
  // Stable: more passes order nothing.
  clock_.ms += 5000;
  Pass();
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
}

TEST_F(ServiceTest, AReplicaThatCouldNotEnterStandbyLendsNothingIsNotAskedAgainAndItsJobSaysWhy) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  const uint64_t svc = RunJob(kAlice, HookedService("svc", 1, 8));
  ASSERT_TRUE(service_->AddStandbyWindow(kAlice, svc, clock_.ms, clock_.ms + 3'600'000, 1).ok());
  const uint64_t spot = *service_->Submit(kBob, Job("spot", 1, 8, 100, true));
  Pass();
  const std::vector<Order> standby = Orders(kAgentA);
  ASSERT_EQ(Ops(standby), std::vector<Order::Op>{Order::Op::kStandby});
  TaskReport refused{standby[0].task, TaskReport::State::kStandbyFailed};
  refused.reason = "standby_enter hook: exit code 4";
  ASSERT_TRUE(service_->Report(kAgentA, {refused}, false).ok());
  Pass();
  // Told to take its GPUs back (it kept them), and nothing else: the spot job waits.
  EXPECT_EQ(Ops(Orders(kAgentA)), std::vector<Order::Op>{Order::Op::kResume});
  EXPECT_THAT(Get(svc).reason, HasSubstr("replica 0 did not enter Standby (its GPUs are not lent): standby_enter hook: exit code 4"));
  EXPECT_EQ(Get(svc).standby_replicas, 0);
  EXPECT_EQ(Get(spot, kBob).phase, JobPhase::kPending);
  clock_.ms += 10'000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty()) << "asked only once per window";
  EXPECT_EQ(Get(spot, kBob).phase, JobPhase::kPending);
}

TEST_F(ServiceTest, DeletingAStandbyWindowResumesItsReplicasAndEndingTheLenderStopsItsBorrowers) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  const uint64_t svc = RunJob(kAlice, Job("svc", 1, 8, 900));
  auto w = service_->AddStandbyWindow(kAlice, svc, clock_.ms, clock_.ms + 3'600'000, 1);
  ASSERT_TRUE(w.ok());
  Pass();
  const std::vector<Order> standby = Orders(kAgentA);
  ASSERT_EQ(Ops(standby), std::vector<Order::Op>{Order::Op::kStandby});
  ReportAll(kAgentA, standby, TaskReport::State::kRunning);
  EXPECT_EQ(service_->DeleteStandbyWindow(kBob, w->id).code(), StatusCode::kNotFound);
  ASSERT_TRUE(service_->DeleteStandbyWindow(kAlice, w->id).ok());
  Pass();
  ASSERT_EQ(Ops(Orders(kAgentA)), std::vector<Order::Op>{Order::Op::kResume});
  EXPECT_EQ(Get(svc).standby_replicas, 0);

  // Lent again; a spot job borrows; the lender is cancelled: the borrower loses its lent GPUs,
  // which are free now — it is placed again at once, where it runs, so nothing restarts.
  ASSERT_TRUE(service_->AddStandbyWindow(kAlice, svc, clock_.ms, clock_.ms + 3'600'000, 1).ok());
  Pass();
  ReportAll(kAgentA, Orders(kAgentA), TaskReport::State::kRunning);
  Pass();
  const uint64_t spot = RunJob(kBob, Job("spot", 1, 8, 100, true));
  ASSERT_TRUE(service_->Cancel(kAlice, svc).ok());
  Pass();
  const std::vector<Order> stops = Orders(kAgentA);
  ASSERT_EQ(Ops(stops), std::vector<Order::Op>{Order::Op::kStop});
  EXPECT_EQ(stops[0].job, svc);
  ReportAll(kAgentA, stops, TaskReport::State::kRunning);
  Pass();
  EXPECT_EQ(Get(spot, kBob).phase, JobPhase::kRunning);
  EXPECT_TRUE(Orders(kAgentA).empty());
  EXPECT_TRUE(service_->ListStandbyWindows(kAdmin).empty());
  // It is an ordinary replica now: a restart binds it as one.
  Reopen();
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
  EXPECT_EQ(Get(spot, kBob).phase, JobPhase::kRunning);
}

// ---- Migration (make-before-break) ----

// Two nodes with one 4-GPU job each: a defragmentation moves one of them to the other node.
struct Fragmented {
  uint64_t job = 0;       // the job that moves
  std::string from, to;   // its node, and where it goes
};

TEST_F(ServiceTest, ADefragmentationMigratesAReplicaStartingTheNewInstanceBeforeTheOldOneStops) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1")}).ok());
  const uint64_t a = RunJob(kAlice, Job("a", 1, 4));
  const uint64_t b = RunJob(kAlice, Job("b", 1, 4));
  const uint64_t c = RunJob(kAlice, Job("c", 1, 4));
  // a and b share a node (best fit); with b gone, a and c each hold half a node.
  ASSERT_TRUE(service_->Cancel(kAlice, b).ok());
  Pass();
  ReportAll(kAgentA, Orders(kAgentA), TaskReport::State::kRunning);
  Pass();
  EXPECT_EQ(service_->Defrag(kAlice).status().code(), StatusCode::kPermissionDenied);
  auto moves = ViaLoop([&] { return service_->Defrag(kAdmin); });
  ASSERT_TRUE(moves.ok()) << moves.status().message();
  EXPECT_EQ(*moves, 1);
  const std::vector<Order> mig = Orders(kAgentA);
  ASSERT_EQ(Ops(mig), std::vector<Order::Op>{Order::Op::kMigrate});
  const uint64_t moved = mig[0].job;
  ASSERT_TRUE(moved == a || moved == c);
  EXPECT_NE(mig[0].from, mig[0].node);
  EXPECT_EQ(mig[0].gpus.size(), 4u);
  EXPECT_EQ(Get(moved).migrating_replicas, 1);
  EXPECT_EQ(GpuMilliUsed(), 12000);  // both instances hold GPUs

  // Nothing completes before the new instance runs (here: long past a typical start-up).
  clock_.ms += 300'000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
  ASSERT_TRUE(service_->Report(kAgentA, {{mig[0].task, TaskReport::State::kRunning, mig[0].node}}, false).ok());
  Pass();
  const std::vector<Order> stop = Orders(kAgentA);
  ASSERT_EQ(Ops(stop), std::vector<Order::Op>{Order::Op::kStop});
  EXPECT_EQ(stop[0].task, mig[0].task);
  EXPECT_EQ(stop[0].node, mig[0].from);
  EXPECT_EQ(Get(moved).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(moved).running_replicas, 1);
  EXPECT_EQ(Get(moved).migrating_replicas, 0);
  EXPECT_EQ(GpuMilliUsed(), 8000);
  for (const NodeView& n : service_->ListNodes()) {
    EXPECT_EQ(n.gpu_milli_used, n.name == mig[0].from ? 0 : 8000) << n.name;
  }
  // The old instance's stop report changes nothing; more passes order nothing.
  ASSERT_TRUE(service_->Report(kAgentA, {{mig[0].task, TaskReport::State::kStopped, mig[0].from}}, false).ok());
  Pass();
  clock_.ms += 1000;
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
  EXPECT_EQ(Get(moved).phase, JobPhase::kRunning);
  auto again = ViaLoop([&] { return service_->Defrag(kAdmin); });
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0);  // nothing left to gain
  // The replica ends where it runs now.
  ASSERT_TRUE(service_->Report(kAgentA, {{mig[0].task, TaskReport::State::kSucceeded, mig[0].node}}, false).ok());
  Pass();
  EXPECT_EQ(Get(moved).phase, JobPhase::kSucceeded);
}

void ServiceTest::StartOneMoveThatFreesANode(std::vector<Order>* mig) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1")}).ok());
  RunJob(kAlice, Job("a", 1, 4));
  const uint64_t b = RunJob(kAlice, Job("b", 1, 4));
  RunJob(kAlice, Job("c", 1, 4));
  ASSERT_TRUE(service_->Cancel(kAlice, b).ok());
  Pass();
  ReportAll(kAgentA, Orders(kAgentA), TaskReport::State::kStopped);
  Pass();
  ASSERT_EQ(*ViaLoop([&] { return service_->Defrag(kAdmin); }), 1);
  *mig = Orders(kAgentA);
  ASSERT_EQ(Ops(*mig), std::vector<Order::Op>{Order::Op::kMigrate});
}

TEST_F(ServiceTest, AMigrationWhoseNewInstanceFailsOrIsCutByARestartLeavesTheReplicaWhereItRan) {
  std::vector<Order> mig;
  ASSERT_NO_FATAL_FAILURE(StartOneMoveThatFreesANode(&mig));
  // The new instance fails: it is stopped, the old one runs on.
  ASSERT_TRUE(service_->Report(kAgentA, {{mig[0].task, TaskReport::State::kFailed, mig[0].node}}, false).ok());
  Pass();
  const std::vector<Order> stop = Orders(kAgentA);
  ASSERT_EQ(Ops(stop), std::vector<Order::Op>{Order::Op::kStop});
  EXPECT_EQ(stop[0].node, mig[0].node);
  EXPECT_EQ(Get(mig[0].job).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(mig[0].job).migrating_replicas, 0);
  EXPECT_EQ(GpuMilliUsed(), 8000);
  clock_.ms += 1000;
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());

  // Again, and the service dies mid-migration: the restart rolls the move back.
  ASSERT_EQ(*ViaLoop([&] { return service_->Defrag(kAdmin); }), 1);
  mig = Orders(kAgentA);
  ASSERT_EQ(Ops(mig), std::vector<Order::Op>{Order::Op::kMigrate});
  Reopen();
  Pass();
  const std::vector<Order> after = Orders(kAgentA);
  ASSERT_EQ(Ops(after), std::vector<Order::Op>{Order::Op::kStop});
  EXPECT_EQ(after[0].node, mig[0].node);
  EXPECT_EQ(Get(mig[0].job).phase, JobPhase::kRunning);
  EXPECT_EQ(GpuMilliUsed(), 8000);
  // A late report of the abandoned instance is stale.
  ASSERT_TRUE(service_->Report(kAgentA, {{mig[0].task, TaskReport::State::kRunning, mig[0].node}}, false).ok());
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
}


// A replica being moved whose old node fails: its job is evicted whole and, in the same cycle,
// placed again — here on the move's target GPUs, the only free ones. The move's new instance is
// then the replica's: starting (not running) until its agent says it runs, and not started a
// second time. Had the agent already said it failed, the replica starts anew there (before: the
// failed instance was taken for the replica's, which stayed "running" for ever with nothing
// running). Should it say so later — before the instance ever ran, also across a restart of the
// service — the move failed all the same: the replica starts anew there, its job does not fail
// (before: "replica 0 failed").
void ServiceTest::PlacedAgainOnAMovesTarget(MoveFails fails) {
  std::vector<Order> mig;
  ASSERT_NO_FATAL_FAILURE(StartOneMoveThatFreesANode(&mig));
  const std::string from = mig[0].from, to = mig[0].node;
  if (fails == MoveFails::kBefore) {
    ASSERT_TRUE(service_->Report(kAgentA, {{mig[0].task, TaskReport::State::kFailed, to}}, false).ok());
  }
  ASSERT_TRUE(service_->NodeAction(kAdmin, from, "fail", /*wait=*/false).ok());
  Pass();
  const JobView v = Get(mig[0].job);
  ASSERT_EQ(v.where.size(), 1u);
  EXPECT_EQ(v.where[0].node, to);
  EXPECT_EQ(v.where[0].state, "starting");
  EXPECT_EQ(v.running_replicas, 0);
  const auto started_there = [&] {
    bool started = false;
    for (const Order& o : Orders(kAgentA)) started |= o.op == Order::Op::kStart && o.task == mig[0].task && o.node == to;
    return started;
  };
  EXPECT_EQ(started_there(), fails == MoveFails::kBefore);
  if (fails == MoveFails::kAfter || fails == MoveFails::kAfterARestart) {
    if (fails == MoveFails::kAfterARestart) {
      Reopen();
      Pass();
      (void)Orders(kAgentA);
    }
    ASSERT_TRUE(service_->Report(kAgentA, {{mig[0].task, TaskReport::State::kFailed, to}}, false).ok());
    Pass();
    const JobView w = Get(mig[0].job);
    EXPECT_EQ(w.phase, JobPhase::kPending) << w.reason;
    ASSERT_EQ(w.where.size(), 1u);
    EXPECT_EQ(w.where[0].node, to);
    EXPECT_EQ(w.where[0].state, "starting");
    EXPECT_TRUE(started_there());
  }
  ASSERT_TRUE(service_->Report(kAgentA, {{mig[0].task, TaskReport::State::kRunning, to}}, false).ok());
  Pass();
  EXPECT_EQ(Get(mig[0].job).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(mig[0].job).running_replicas, 1);
  Pass();  // stability
  EXPECT_TRUE(Orders(kAgentA).empty());
  // Once it ran, its instance is the replica's like any other: its failure fails the job.
  ASSERT_TRUE(service_->Report(kAgentA, {{mig[0].task, TaskReport::State::kFailed, to}}, false).ok());
  Pass();
  EXPECT_EQ(Get(mig[0].job).phase, JobPhase::kFailed);
}

TEST_F(ServiceTest, AReplicaPlacedAgainOnItsMovesTargetAfterItsNodeFailedRunsThereOnceItsAgentSaysSo) {
  PlacedAgainOnAMovesTarget(MoveFails::kNever);
}

TEST_F(ServiceTest, AReplicaPlacedAgainOnItsMovesTargetWhoseNewInstanceFailedStartsThereAnew) {
  PlacedAgainOnAMovesTarget(MoveFails::kBefore);
}

TEST_F(ServiceTest, AReplicaPlacedAgainOnItsMovesTargetWhoseNewInstanceFailsBeforeItRanStartsThereAnew) {
  PlacedAgainOnAMovesTarget(MoveFails::kAfter);
}

TEST_F(ServiceTest, AReplicaPlacedAgainOnItsMovesTargetWhoseNewInstanceFailsAfterARestartStartsThereAnew) {
  PlacedAgainOnAMovesTarget(MoveFails::kAfterARestart);
}

TEST_F(ServiceTest, EvacuatingANodeMigratesItsReplicasAwayWhileTheyRunAndKeepsItCordoned) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1")}).ok());
  const uint64_t a = RunJob(kAlice, Job("a", 1, 4));
  const uint64_t b = RunJob(kAlice, Job("b", 1, 2));
  std::string where;
  for (const NodeView& n : service_->ListNodes()) {
    if (n.gpu_milli_used == 6000) where = n.name;
  }
  ASSERT_FALSE(where.empty()) << "best fit puts both on one node";
  EXPECT_EQ(service_->NodeAction(kAdmin, where, "vacate").code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(ViaLoop([&] { return service_->NodeAction(kAdmin, where, "evacuate"); }).ok());
  EXPECT_EQ(NodeState(where), "evacuating");
  const std::vector<Order> mig = Orders(kAgentA);
  ASSERT_EQ(Ops(mig), (std::vector<Order::Op>{Order::Op::kMigrate, Order::Op::kMigrate}));
  std::vector<TaskReport> running;
  for (const Order& o : mig) {
    EXPECT_EQ(o.from, where);
    EXPECT_NE(o.node, where);
    running.push_back({o.task, TaskReport::State::kRunning, o.node});
  }
  ASSERT_TRUE(service_->Report(kAgentA, running, false).ok());
  Pass();
  const std::vector<Order> stops = Orders(kAgentA);
  ASSERT_EQ(Ops(stops), (std::vector<Order::Op>{Order::Op::kStop, Order::Op::kStop}));
  for (const Order& o : stops) EXPECT_EQ(o.node, where);
  EXPECT_EQ(Get(a).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(b).phase, JobPhase::kRunning);
  for (const NodeView& n : service_->ListNodes()) {
    if (n.name == where) {
      EXPECT_EQ(n.gpu_milli_used, 0);
      EXPECT_EQ(n.state, "cordoned");
    }
  }
  // Stable: nothing more happens; the node takes no new work until uncordoned.
  clock_.ms += 1000;
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
  auto c = service_->Submit(kAlice, Job("c", 1, 8));
  ASSERT_TRUE(c.ok());
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
  EXPECT_EQ(Get(*c).phase, JobPhase::kPending);
  ASSERT_TRUE(ViaLoop([&] { return service_->NodeAction(kAdmin, where, "uncordon"); }).ok());
  const std::vector<Order> start = Orders(kAgentA);
  ASSERT_EQ(Ops(start), std::vector<Order::Op>{Order::Op::kStart});
  EXPECT_EQ(start[0].node, where);
}

// An evacuation goes on until its node is empty, across a restart of the service: a replica with
// no room elsewhere when its node was evacuated stays (the node "evacuating"), and once room
// appears it migrates, a minute after the evacuation's last plan — the node "cordoned" then.
TEST_F(ServiceTest, AnEvacuatingNodeWhoseReplicaHadNoRoomGoesOnEvacuatingAcrossARestartUntilItMoves) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1")}).ok());
  const uint64_t a = RunJob(kAlice, Job("a", 1, 4));
  const uint64_t b = RunJob(kAlice, Job("b", 1, 8));
  const std::string where = Get(a).where.at(0).node, other = Get(b).where.at(0).node;
  ASSERT_NE(where, other);
  ASSERT_TRUE(ViaLoop([&] { return service_->NodeAction(kAdmin, where, "evacuate"); }).ok());
  EXPECT_TRUE(Orders(kAgentA).empty());  // the other node is full
  EXPECT_EQ(NodeState(where), "evacuating");
  Reopen();
  after_.clear();
  epoch_.clear();
  EXPECT_EQ(NodeState(where), "evacuating");
  Pass();
  (void)Orders(kAgentA);  // the recovery's orders again (already carried out)
  ReportAll(kAgentA, {StartOf(b)}, TaskReport::State::kSucceeded);
  Pass();
  EXPECT_EQ(Get(b).phase, JobPhase::kSucceeded);
  EXPECT_TRUE(Orders(kAgentA).empty());  // a minute after the evacuation's plan at the recovery
  clock_.ms += 60'000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  const std::vector<Order> mig = Orders(kAgentA);
  ASSERT_EQ(Ops(mig), std::vector<Order::Op>{Order::Op::kMigrate});
  EXPECT_EQ(mig[0].from, where);
  EXPECT_EQ(mig[0].node, other);
  ASSERT_NO_FATAL_FAILURE(CompleteMove(mig[0], where));
  EXPECT_EQ(NodeState(where), "cordoned");
  EXPECT_EQ(Get(a).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(a).restarts, 0);
  EXPECT_EQ(Get(a).where.at(0).node, other);
  // Stable; and cordoned across a restart too.
  clock_.ms += 120'000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
  Reopen();
  EXPECT_EQ(NodeState(where), "cordoned");
}

// An evacuation's move whose new instance failed is given up and, the evacuation going on, planned
// anew in the same cycle — onto the same node and GPUs: the service orders the new move with a
// new instance (and stops the failed one). Before, it took the new move for the one it had
// ordered, ordered nothing, and the replica stayed. Found by the liveness runs (seed 174).
TEST_F(ServiceTest, AnEvacuationsMoveGivenUpAndPlannedAnewOntoTheSameGpusIsOrderedAnew) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1")}).ok());
  const uint64_t a = RunJob(kAlice, Job("a", 1, 4));
  const std::string where = Get(a).where.at(0).node;
  ASSERT_TRUE(ViaLoop([&] { return service_->NodeAction(kAdmin, where, "evacuate"); }).ok());
  const std::vector<Order> first = Orders(kAgentA);
  ASSERT_EQ(Ops(first), std::vector<Order::Op>{Order::Op::kMigrate});
  clock_.ms += 60'000;  // the evacuation may plan again from now on
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
  ASSERT_TRUE(service_->Report(kAgentA, {{first[0].task, TaskReport::State::kFailed, first[0].node, first[0].instance}}, false).ok());
  Pass();
  const std::vector<Order> again = Orders(kAgentA);
  ASSERT_EQ(Ops(again), (std::vector<Order::Op>{Order::Op::kStop, Order::Op::kMigrate}));
  EXPECT_EQ(again[0].instance, first[0].instance);
  EXPECT_EQ(again[1].node, first[0].node);
  EXPECT_EQ(again[1].gpus, first[0].gpus);  // the same GPUs: only the instance tells the moves apart
  EXPECT_NE(again[1].instance, first[0].instance);
  ASSERT_NO_FATAL_FAILURE(CompleteMove(again[1], where));
  EXPECT_EQ(Get(a).where.at(0).node, first[0].node);
  EXPECT_EQ(Get(a).restarts, 0);
  EXPECT_EQ(NodeState(where), "cordoned");
}

// The admin's next word on an evacuating node ends its evacuation: cordoned, it keeps its replica
// when room appears later.
TEST_F(ServiceTest, CordoningAnEvacuatingNodeEndsItsEvacuation) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1")}).ok());
  const uint64_t a = RunJob(kAlice, Job("a", 1, 4));
  const uint64_t b = RunJob(kAlice, Job("b", 1, 8));
  const std::string where = Get(a).where.at(0).node, other = Get(b).where.at(0).node;
  ASSERT_TRUE(ViaLoop([&] { return service_->NodeAction(kAdmin, where, "evacuate"); }).ok());
  EXPECT_EQ(NodeState(where), "evacuating");
  ASSERT_TRUE(ViaLoop([&] { return service_->NodeAction(kAdmin, where, "cordon"); }).ok());
  EXPECT_EQ(NodeState(where), "cordoned");
  ReportAll(kAgentA, {StartOf(b)}, TaskReport::State::kSucceeded);
  Pass();
  clock_.ms += 120'000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
  EXPECT_EQ(Get(a).where.at(0).node, where);
  EXPECT_EQ(NodeState(where), "cordoned");
}

TEST_F(ServiceTest, AnEndedJobIsListedForItsRetentionThenForgottenHereAndInTheStore) {
  ServiceOptions o;
  o.retain_ended_ms = 3'600'000;
  Reopen(o);
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  const uint64_t done = RunJob(kAlice, Job("done", 1, 1));
  const uint64_t live = RunJob(kAlice, Job("live", 1, 1));
  ReportAll(kAgentA, {StartOf(done)}, TaskReport::State::kSucceeded);
  Pass();
  EXPECT_EQ(Get(done).phase, JobPhase::kSucceeded);
  clock_.ms += 3'599'000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  EXPECT_TRUE(service_->GetJob(kAlice, done).ok());  // still within its retention
  // A restart keeps the retention running from the job's end.
  Reopen(o);
  clock_.ms += 1000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  EXPECT_EQ(service_->GetJob(kAlice, done).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(service_->ListJobs(kAlice).size(), 1u);
  EXPECT_EQ(Get(live).phase, JobPhase::kRunning);  // running work is never retired
  EXPECT_THAT(service_->MetricsText(), HasSubstr("estuary_jobs_retired_total 1\n"));
  auto stored = store_->Get("job/" + std::string(16 - std::to_string(done).size(), '0') + std::to_string(done));
  ASSERT_TRUE(stored.ok());
  EXPECT_FALSE(stored->has_value());
  Reopen(o);
  EXPECT_EQ(service_->GetJob(kAlice, done).status().code(), StatusCode::kNotFound);
  // A late report of the forgotten job is skipped.
  EXPECT_TRUE(service_->Report(kAgentA, {{std::to_string(done) + "-0", TaskReport::State::kStopped}}, false).ok());
  Pass();
}

// A replica that succeeds where it ran while its move's new instance starts elsewhere: the new
// instance is stopped, the replica keeps no record, and once its job is retired nothing of it is
// left in the store — before, a record of the replica outlived its job and the service refused to
// open again ("task of no job").
TEST_F(ServiceTest, AReplicaThatSucceedsWhileItIsMovedLeavesNoRecordOnceItsJobIsRetiredAndTheServiceOpensAgain) {
  ServiceOptions o;
  o.retain_ended_ms = 60'000;
  Reopen(o);
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1")}).ok());
  const uint64_t a = RunJob(kAlice, Job("a", 1, 4));
  const uint64_t b = RunJob(kAlice, Job("b", 1, 4));
  const uint64_t c = RunJob(kAlice, Job("c", 1, 4));
  ASSERT_TRUE(service_->Cancel(kAlice, b).ok());
  Pass();
  ReportAll(kAgentA, Orders(kAgentA), TaskReport::State::kRunning);
  Pass();
  auto moves = ViaLoop([&] { return service_->Defrag(kAdmin); });
  ASSERT_TRUE(moves.ok()) << moves.status().message();
  ASSERT_EQ(*moves, 1);
  const std::vector<Order> mig = Orders(kAgentA);
  ASSERT_EQ(Ops(mig), std::vector<Order::Op>{Order::Op::kMigrate});
  const uint64_t moved = mig[0].job;
  ASSERT_TRUE(moved == a || moved == c);
  // The old instance's work runs out before the new one is up.
  ASSERT_TRUE(service_->Report(kAgentA, {{mig[0].task, TaskReport::State::kSucceeded, mig[0].from}}, false).ok());
  Pass();
  EXPECT_EQ(Get(moved).phase, JobPhase::kSucceeded);
  const std::vector<Order> stop = Orders(kAgentA);
  ASSERT_EQ(Ops(stop), std::vector<Order::Op>{Order::Op::kStop});
  EXPECT_EQ(stop[0].node, mig[0].node);  // the new instance
  const auto records = [&] {
    std::vector<std::string> keys;
    EXPECT_TRUE(store_->Scan("task/", [&](std::string_view k, std::string_view) {
                  keys.emplace_back(k);
                  return true;
                }).ok());
    return keys;
  };
  const std::string prefix = "task/" + std::string(16 - std::to_string(moved).size(), '0') + std::to_string(moved) + "/";
  for (const std::string& k : records()) EXPECT_NE(k.rfind(prefix, 0), 0u) << k << " outlives its replica's end";
  ReportAll(kAgentA, stop, TaskReport::State::kRunning);
  Pass();
  clock_.ms += 61'000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  EXPECT_EQ(service_->GetJob(kAlice, moved).status().code(), StatusCode::kNotFound);  // retired
  EXPECT_EQ(records().size(), 1u);  // the other job's replica
  Reopen(o);
  EXPECT_EQ(Get(moved == a ? c : a).phase, JobPhase::kRunning);
}

// A store written before that fix may hold such a record: the service drops it as it opens. A
// record that is not one still stops it, naming the key (and the field).
TEST_F(ServiceTest, ATaskRecordOfNoJobIsDroppedAsTheServiceOpensAndAMalformedOneIsRefused) {
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0")}).ok());
  const uint64_t a = RunJob(kAlice, Job("a", 1, 4));
  StoreBatch stray;
  stray.Put("task/0000000000000099/00000", R"({"gpus":[0],"node":"a0","state":"stopping"})");
  ASSERT_TRUE(store_->Apply(stray).ok());
  Reopen();
  EXPECT_EQ(Get(a).phase, JobPhase::kRunning);
  auto gone = store_->Get("task/0000000000000099/00000");
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
  // A carry record (what the engine knew of a job beyond its inputs) with a field of the wrong
  // type is refused too, naming the key and the field.
  StoreBatch carry;
  carry.Put("carry/0000000000000001", R"({"queued_at": "soon"})");
  ASSERT_TRUE(store_->Apply(carry).ok());
  service_.reset();
  auto refused = Service::Open(store_.get(), &clock_, ServiceOptions{});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "store: carry/0000000000000001: queued_at: expected an integer");
  // So is the engine's schedule (its periodic plans' next times) when it is not one.
  StoreBatch schedule;
  schedule.Delete("carry/0000000000000001");
  schedule.Put("meta/schedule", R"({"next_defrag": "soon", "last_plan": -1, "next_replan": 0, "next_backfill": 0})");
  ASSERT_TRUE(store_->Apply(schedule).ok());
  auto unscheduled = Service::Open(store_.get(), &clock_, ServiceOptions{});
  ASSERT_FALSE(unscheduled.ok());
  EXPECT_TRUE(unscheduled.status().message().starts_with("store: meta/schedule: not a schedule record ("))
      << unscheduled.status().message();
  StoreBatch bad;
  bad.Delete("meta/schedule");
  bad.Put("task/0000000000000001/00000", "{not json");
  ASSERT_TRUE(store_->Apply(bad).ok());
  service_.reset();
  auto sv = Service::Open(store_.get(), &clock_, ServiceOptions{});
  ASSERT_FALSE(sv.ok());
  EXPECT_EQ(sv.status().message(), "store: task/0000000000000001/00000: not a task record");
}

TEST_F(ServiceTest, TheEngineIsRebuiltWithoutItsEndedJobsAndNothingItRunsOrQueuesNoticesIt) {
  ServiceOptions o;
  o.compact_min_jobs = 4;
  o.compact_check_ms = 0;
  Reopen(o);
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1")}).ok());
  // A service lending one replica to a spot job, a reservation for a waiting gang, and ended jobs.
  const uint64_t svc = RunJob(kAlice, Job("svc", 2, 4, 900));
  ASSERT_TRUE(service_->AddStandbyWindow(kAlice, svc, clock_.ms, clock_.ms + 3'600'000, 1).ok());
  Pass();
  ReportAll(kAgentA, Orders(kAgentA), TaskReport::State::kRunning);  // the replica left its GPUs
  Pass();
  const uint64_t spot = RunJob(kBob, Job("spot", 1, 4, 100, true));
  auto gang = service_->Submit(kBob, Job("gang", 2, 8));
  ASSERT_TRUE(gang.ok());
  Pass();
  Orders(kAgentA);
  ASSERT_TRUE(ViaLoop([&] { return service_->Reserve(kBob, *gang, 3600); }).ok());
  EXPECT_THAT(service_->MetricsText(), HasSubstr("estuary_engine_compactions_total 0\n"));
  // Jobs come and go (they wait behind the gang's hold and are cancelled); once the engine knows
  // twice as many jobs as it runs or queues, it is rebuilt.
  for (int i = 0; i < 6; ++i) {
    auto id = service_->Submit(kAlice, Job("short" + std::to_string(i), 1, 1));
    ASSERT_TRUE(id.ok());
    Pass();
    ASSERT_TRUE(service_->Cancel(kAlice, *id).ok());
    Pass();
  }
  EXPECT_THAT(service_->MetricsText(), ::testing::Not(HasSubstr("estuary_engine_compactions_total 0\n")));
  // Nothing changed for the agents or the jobs.
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
  EXPECT_EQ(Get(svc).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(svc).standby_replicas, 1);
  EXPECT_EQ(Get(spot, kBob).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(*gang, kBob).phase, JobPhase::kPending);
  EXPECT_EQ(service_->ListReservations(kBob).size(), 1u);
  EXPECT_EQ(GpuMilliUsed(), 8000);  // the spot job runs on the lent GPUs
  // And the rebuilt engine goes on deciding: the window ends, the spot job is warned, stopped after
  // the grace period, and the service resumes.
  ASSERT_TRUE(service_->DeleteStandbyWindow(kAlice, service_->ListStandbyWindows(kAlice)[0].id).ok());
  Pass();
  EXPECT_EQ(Ops(Orders(kAgentA)), std::vector<Order::Op>{Order::Op::kEvict});
  clock_.ms += 60'000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  EXPECT_EQ(Ops(Orders(kAgentA)), (std::vector<Order::Op>{Order::Op::kStop, Order::Op::kResume}));
  EXPECT_EQ(Get(svc).standby_replicas, 0);
}

TEST_F(ServiceTest, WithPolicyFgdJobsRunAndTheEngineLearnsTheirTypicalTasks) {
  ServiceOptions o;
  o.policy = "fgd";  // aborted at start-up before: FGD had no typical tasks outside the simulator
  Reopen(o);
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("a0"), Node("a1")}).ok());
  const uint64_t a = RunJob(kAlice, Job("a", 2, 4));
  const uint64_t b = RunJob(kAlice, Job("b", 1, 2));
  EXPECT_EQ(GpuMilliUsed(), 10000);
  EXPECT_EQ(Get(a).bound_replicas, 2);
  EXPECT_EQ(Get(b).bound_replicas, 1);
  // And after a restart (a new engine learns again from the jobs it adopts).
  Reopen(o);
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
  EXPECT_EQ(Get(a).phase, JobPhase::kRunning);
  RunJob(kAlice, Job("c", 1, 4));
  EXPECT_EQ(GpuMilliUsed(), 14000);
}

// ---- Everything at once ----

// The value of counter `name` in Prometheus text (0 when absent).
int64_t CounterOf(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? 0 : std::stoll(text.substr(at + name.size() + 2));
}

// A seeded random run: submissions of every kind, cancellations, resizes, standby windows made and
// deleted, defragmentations, node failures, evacuations and restores, an agent that answers its
// orders late and fails some new instances, restarts of the service, and the engine rebuilt without
// its ended jobs whenever it may be — with the invariants checked after every pass (Pass). Then the
// work drains: every job ends and no GPU stays bound.
TEST_F(ServiceTest, ARandomRunOfEveryActionKeepsTheInvariantsAcrossRestartsAndDrainsToNothing) {
  ServiceOptions o;
  o.compact_min_jobs = 8;  // the engine is rebuilt whenever it may be
  o.compact_check_ms = 0;
  Reopen(o);
  std::vector<NodeRegistration> nodes;
  for (int i = 0; i < 8; ++i) nodes.push_back(Node("n" + std::to_string(i), 8, i < 4 ? "asw0" : "asw1"));
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, nodes).ok());
  Rng rng(20261130);
  std::vector<uint64_t> ids;
  std::vector<Order> backlog;  // orders the agent has not answered yet
  std::set<std::string> down;
  int64_t migrations = 0, standby_orders = 0, moves_planned = 0, compactions = 0;
  const auto answer = [&](bool all) {
    std::vector<TaskReport> r;
    std::vector<Order> keep;
    for (const Order& o : backlog) {
      if (!all && rng.Uniform(3) == 0) {
        keep.push_back(o);
        continue;
      }
      switch (o.op) {
        case Order::Op::kStart: r.push_back({o.task, TaskReport::State::kRunning, o.node}); break;
        case Order::Op::kMigrate:
          ++migrations;
          r.push_back({o.task, rng.Uniform(4) == 0 ? TaskReport::State::kFailed : TaskReport::State::kRunning, o.node});
          break;
        case Order::Op::kStop: r.push_back({o.task, TaskReport::State::kStopped, o.node}); break;
        case Order::Op::kStandby:
          ++standby_orders;
          r.push_back({o.task, TaskReport::State::kStandby, o.node});
          break;
        default: break;
      }
    }
    backlog = std::move(keep);
    ASSERT_TRUE(service_->Report(kAgentA, r, false).ok());
  };
  for (int step = 0; step < 600; ++step) {
    const uint64_t action = rng.Uniform(100);
    const auto waiting = [&] {
      int n = 0;
      for (const JobView& v : service_->ListJobs(kAdmin)) n += v.phase == JobPhase::kPending;
      return n;
    };
    if (action < 15 && waiting() < 2) {
      JobRequest j = RandomJob(rng, "j" + std::to_string(step));
      if (rng.Uniform(3) == 0) j.min_replicas = 1;
      auto id = service_->Submit(rng.Uniform(2) ? kAlice : kBob, j);
      ASSERT_TRUE(id.ok());
      ids.push_back(*id);
    } else if (action < 35 && !ids.empty()) {
      (void)service_->Cancel(kAdmin, ids[rng.Uniform(ids.size())]);
    } else if (action < 45 && !ids.empty()) {
      RandomWindow(rng, ids, 300);
    } else if (action < 49) {
      const auto windows = service_->ListStandbyWindows(kAdmin);
      if (!windows.empty()) {
        ASSERT_TRUE(service_->DeleteStandbyWindow(kAdmin, windows[rng.Uniform(windows.size())].id).ok());
      }
    } else if (action < 57) {
      const auto planned = ViaLoop([&] { return service_->Defrag(kAdmin); });
      ASSERT_TRUE(planned.ok());
      moves_planned += *planned;
    } else if (action < 59) {
      const std::string n = "n" + std::to_string(rng.Uniform(8));
      const bool is_down = down.count(n) > 0;
      const char* what = is_down ? "restore" : rng.Uniform(2) == 0 ? "evacuate" : "fail";
      ASSERT_TRUE(ViaLoop([&] { return service_->NodeAction(kAdmin, n, what); }).ok());
      if (is_down) down.erase(n);
      else down.insert(n);
    } else if (action < 63 && !ids.empty()) {
      const uint64_t id = ids[rng.Uniform(ids.size())];
      const int32_t hi = 1 + static_cast<int32_t>(rng.Uniform(3));
      (void)ViaLoop([&] { return service_->Resize(kAdmin, id, 1, hi); });
    } else if (action < 65) {
      compactions += CounterOf(service_->MetricsText(), "estuary_engine_compactions_total");
      Restart(o, backlog);
    }
    Step(static_cast<int64_t>(rng.Uniform(40'000)), backlog, answer);
  }
  compactions += CounterOf(service_->MetricsText(), "estuary_engine_compactions_total");
  EXPECT_GT(compactions, 0);
  EXPECT_GT(moves_planned, 0);
  EXPECT_GT(migrations, 0);
  EXPECT_GT(standby_orders, 0);
  // Drain: every node back, every job cancelled, every order answered.
  RestoreAll(down);
  for (uint64_t id : ids) (void)service_->Cancel(kAdmin, id);
  for (int k = 0; k < 20; ++k) Step(1000, backlog, answer, true);
  EXPECT_EQ(GpuMilliUsed(), 0);
  for (uint64_t id : ids) {
    const JobView v = Get(id, kAdmin);
    EXPECT_TRUE(v.phase == JobPhase::kCancelled || v.phase == JobPhase::kSucceeded || v.phase == JobPhase::kFailed) << id;
  }
  EXPECT_TRUE(service_->ListStandbyWindows(kAdmin).empty());
}

// Liveness: a seeded random run of submissions, resizes, Standby windows, defragmentations, node
// failures, evacuations and restores, and restarts, against an agent that answers its orders
// late and whose instances succeed at random times; then no more changes, and every job must
// succeed (none is cancelled, no instance fails) with every GPU free. A job that stays running
// or pending for ever, or a replica record left behind, fails it. Over seeds 1-200: without the
// end of a job whose last starting replica was shrunk away after its others succeeded, 12 seeds
// fail (seed 5 among them); without a failed node's stops turned into stopped ones, seeds 82
// and 147 (a replica left `stopping` for ever).
// What a run does beyond submissions, resizes, Standby windows, defragmentations, node failures,
// evacuations and restores, and restarts.
struct LivenessMix {
  // Nodes n4-n7 belong to a second agent (kAgentB), which now and then falls silent (no
  // heartbeats, no answers, no reports) — long enough, at times, for its nodes to fail.
  bool two_agents = false;
  // Cancels, reservations and their deletes, deleted Standby windows, drains, cordons,
  // migrations whose new instance fails, grace and Absorb changed at run time, and (with
  // `queues`) the queues' guarantees, limits and weights changed at run time. The agents then
  // carry out each task's orders in their order, as real ones do. (Either way their reports name
  // the instance their order did.)
  bool more = false;
  // The queues a tenant's job names, one drawn at random (empty: none named); with `more`, the
  // queue tree SetQueues changes the figures of.
  std::vector<std::string> alice_queues, bob_queues;
  std::function<std::vector<QueueSpec>(Rng&)> queues;
  // Jobs that require one ASW (one time in three) and jobs with a walltime (one time in two: each
  // run is stopped at its limit and the job fails, timed out).
  bool topology = false;
};

class ServiceLiveness : public ServiceTest, public ::testing::WithParamInterface<uint64_t> {
 protected:
  // The run of seed GetParam() and its drain, the service opened with `o` (and an engine rebuilt
  // whenever it may be).
  void RunThenDrain(ServiceOptions o, const LivenessMix& mix = LivenessMix());
};

TEST_P(ServiceLiveness, EveryJobEndsOnItsOwnOnceTheChangesStop) { RunThenDrain({}); }

void ServiceLiveness::RunThenDrain(ServiceOptions o, const LivenessMix& mix) {
  o.compact_min_jobs = 8;
  o.compact_check_ms = 0;
  Reopen(o);
  const auto agent_of = [&](const std::string& node) -> const Principal& {
    return mix.two_agents && node >= "n4" ? kAgentB : kAgentA;
  };
  std::vector<NodeRegistration> nodes;
  for (int i = 0; i < 8; ++i) nodes.push_back(Node("n" + std::to_string(i), 8, i < 4 ? "asw0" : "asw1"));
  if (mix.two_agents) {
    ASSERT_TRUE(service_->RegisterNodes(kAgentA, {nodes.begin(), nodes.begin() + 4}).ok());
    ASSERT_TRUE(service_->RegisterNodes(kAgentB, {nodes.begin() + 4, nodes.end()}).ok());
  } else {
    ASSERT_TRUE(service_->RegisterNodes(kAgentA, nodes).ok());
  }
  Rng rng(GetParam());
  std::vector<uint64_t> ids;
  std::set<uint64_t> cancelled;
  std::set<uint64_t> timed;  // jobs with a walltime: they may end timed out
  std::vector<Order> backlog, backlog_b;                 // orders not answered yet (agent A's, B's)
  std::map<std::pair<std::string, std::string>, uint64_t> runs;  // the agents' instances: (task, node) -> its id
  // Instances told to stop: a start of one answered after its stop (these agents answer out of
  // order unless `more`) is not carried out.
  std::set<uint64_t> stopped;
  std::set<std::string> down, dead;  // nodes failed, evacuated, drained or cordoned; failed
  bool silent_b = false;             // agent B is silent
  // Answers the backlogs (all of them, or about two thirds); then instances succeed (all, or one
  // in eight). A silent agent answers nothing and reports nothing.
  const auto answer = [&](bool all) {
    std::vector<TaskReport> r, r_b;
    for (std::vector<Order>* orders : {&backlog, &backlog_b}) {
      if (orders == &backlog_b && silent_b) continue;
      std::vector<Order> keep;
      std::set<std::string> waits;  // with `more`, tasks with an order kept: their later ones wait too
      for (const Order& x : *orders) {
        if (dead.count(x.node)) continue;  // a failed node's agent is gone, with what it was told
        if (!all && (waits.count(x.task) || rng.Uniform(2) == 0)) {
          keep.push_back(x);
          if (mix.more) waits.insert(x.task);
          continue;
        }
        std::vector<TaskReport>& to = orders == &backlog ? r : r_b;
        switch (x.op) {
          case Order::Op::kMigrate:
            if (mix.more && !all && rng.Uniform(4) == 0) {  // the new instance fails: the old one keeps running
              to.push_back({x.task, TaskReport::State::kFailed, x.node, x.instance});
              break;
            }
            [[fallthrough]];
          case Order::Op::kStart:
            if (stopped.count(x.instance)) break;
            runs[{x.task, x.node}] = x.instance;
            to.push_back({x.task, TaskReport::State::kRunning, x.node, x.instance});
            break;
          case Order::Op::kStop:
            stopped.insert(x.instance);
            if (const auto it = runs.find({x.task, x.node}); it != runs.end() && it->second == x.instance) runs.erase(it);
            to.push_back({x.task, TaskReport::State::kStopped, x.node, x.instance});
            break;
          case Order::Op::kStandby: to.push_back({x.task, TaskReport::State::kStandby, x.node, x.instance}); break;
          default: break;
        }
      }
      *orders = std::move(keep);
    }
    for (auto it = runs.begin(); it != runs.end();) {
      const bool b = &agent_of(it->first.second) == &kAgentB;
      if ((!b || !silent_b) && (all || rng.Uniform(8) == 0)) {
        (b ? r_b : r).push_back({it->first.first, TaskReport::State::kSucceeded, it->first.second, it->second});
        it = runs.erase(it);
      } else {
        ++it;
      }
    }
    ASSERT_TRUE(service_->Report(kAgentA, r, false).ok());
    if (!r_b.empty()) { ASSERT_TRUE(service_->Report(kAgentB, r_b, false).ok()); }
  };
  // A step: `ms` pass, the agents' heartbeats (a silent one's not), a pass, their new orders, the
  // answers, another pass. A node the service failed (agent B's, silent too long) is gone with
  // its instances and its orders, until restored.
  const auto step = [&](int64_t ms, bool all = false) {
    if (!mix.two_agents) return Step(ms, backlog, answer, all);
    clock_.ms += ms;
    ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
    if (!silent_b) { ASSERT_TRUE(service_->Heartbeat(kAgentB, {}).ok()); }
    Pass();
    for (const NodeView& n : service_->ListNodes()) {
      if (n.state != "failed" || dead.count(n.name)) continue;
      down.insert(n.name);
      dead.insert(n.name);
      for (auto it = runs.begin(); it != runs.end();) it = it->first.second == n.name ? runs.erase(it) : std::next(it);
    }
    for (const Order& x : Orders(kAgentA)) backlog.push_back(x);
    if (!silent_b) {
      for (const Order& x : Orders(kAgentB)) backlog_b.push_back(x);
    }
    answer(all);
    Pass();
  };
  const auto pick = [&](const std::vector<std::string>& queues) {
    return queues.empty() ? std::string() : queues[rng.Uniform(queues.size())];
  };
  for (int step_no = 0; step_no < 400; ++step_no) {
    const uint64_t action = rng.Uniform(100);
    if (action < 30) {
      JobRequest j = RandomJob(rng, "j" + std::to_string(step_no));
      if (rng.Uniform(2) == 0) {
        j.min_replicas = 1;
        j.max_replicas = 1 + static_cast<int>(rng.Uniform(4));
      }
      const bool alice = rng.Uniform(2) != 0;
      j.queue = pick(alice ? mix.alice_queues : mix.bob_queues);
      if (mix.topology && rng.Uniform(3) == 0) {
        j.plane = "data";
        j.required_level = "asw";
      }
      if (mix.topology && rng.Uniform(2) == 0) j.walltime_s = 30 + static_cast<int64_t>(rng.Uniform(600));
      auto id = service_->Submit(alice ? kAlice : kBob, j);
      ASSERT_TRUE(id.ok()) << id.status().message();
      ids.push_back(*id);
      if (j.walltime_s > 0) timed.insert(*id);
    } else if (action < 40 && !ids.empty()) {
      RandomWindow(rng, ids, 120);
    } else if (action < 46) {
      ASSERT_TRUE(ViaLoop([&] { return service_->Defrag(kAdmin); }).ok());
    } else if (action < 52) {
      const std::string n = "n" + std::to_string(rng.Uniform(8));
      const bool is_down = down.count(n) > 0;
      static constexpr const char* kMore[] = {"evacuate", "fail", "drain", "cordon"};
      const char* what = is_down ? "restore" : mix.more ? kMore[rng.Uniform(4)] : rng.Uniform(2) == 0 ? "evacuate" : "fail";
      // With `more`, a node taken out but not failed is now and then cordoned or evacuated again
      // instead (an evacuation under way ends, or starts anew): it stays out until restored.
      const bool again = is_down && mix.more && dead.count(n) == 0 && rng.Uniform(3) == 0;
      if (again) what = rng.Uniform(2) == 0 ? "cordon" : "evacuate";
      ASSERT_TRUE(ViaLoop([&] { return service_->NodeAction(kAdmin, n, what); }).ok());
      if (again) {
      } else if (is_down) {
        down.erase(n);
        dead.erase(n);
      } else if (std::string(what) == "fail") {
        down.insert(n);
        dead.insert(n);
        for (auto it = runs.begin(); it != runs.end();) it = it->first.second == n ? runs.erase(it) : std::next(it);
      } else {
        down.insert(n);  // evacuated, drained or cordoned: cordoned until restored
      }
    } else if (action < 60 && !ids.empty()) {
      const uint64_t id = ids[rng.Uniform(ids.size())];
      (void)ViaLoop([&] { return service_->Resize(kAdmin, id, std::nullopt, 1 + static_cast<int32_t>(rng.Uniform(4))); });
    } else if (action < 63) {
      Restart(o, backlog);
      ASSERT_FALSE(HasFatalFailure());
      backlog_b.clear();
    } else if (!mix.more) {
    } else if (action < 66 && !ids.empty()) {
      const uint64_t id = ids[rng.Uniform(ids.size())];
      auto v = ViaLoop([&] { return service_->Cancel(kAdmin, id); });
      if (v.ok() && v->phase == JobPhase::kCancelled) cancelled.insert(id);
    } else if (action < 71 && !ids.empty()) {
      const uint64_t id = ids[rng.Uniform(ids.size())];
      const int64_t ttl = 30 + static_cast<int64_t>(rng.Uniform(300));
      (void)ViaLoop([&] { return service_->Reserve(kAdmin, id, ttl); });
    } else if (action < 73) {
      const auto held = service_->ListReservations(kAdmin);
      if (!held.empty()) { const uint64_t job = held[rng.Uniform(held.size())].job;
        ASSERT_TRUE(ViaLoop([&] { return service_->DeleteReservation(kAdmin, job); }).ok()); }
    } else if (action < 75) {
      const auto windows = service_->ListStandbyWindows(kAdmin);
      if (!windows.empty()) { const uint64_t w = windows[rng.Uniform(windows.size())].id;
        ASSERT_TRUE(ViaLoop([&] { return service_->DeleteStandbyWindow(kAdmin, w); }).ok()); }
    } else if (action < 77) {
      Service::ConfigChange c;
      c.grace_s = std::array<int64_t, 3>{0, 5, 60}[rng.Uniform(3)];
      c.absorb = rng.Uniform(2) == 0;
      ASSERT_TRUE(ViaLoop([&] { return service_->SetConfig(kAdmin, c); }).ok());
    } else if (action < 79 && mix.queues) {
      std::vector<QueueSpec> qs = mix.queues(rng);
      auto set = ViaLoop([&] { return service_->SetQueues(kAdmin, qs, std::nullopt); });
      ASSERT_TRUE(set.ok()) << set.status().message();
    } else if (action < 82 && mix.two_agents) {
      silent_b = !silent_b;
    }
    if (silent_b && rng.Uniform(4) == 0) silent_b = false;
    step(static_cast<int64_t>(rng.Uniform(20'000)));
  }
  silent_b = false;
  RestoreAll(down);
  dead.clear();
  for (int k = 0; k < 300; ++k) step(1000, true);
  // A job a queue's Reclaim evicted whole may be kept from borrowing for sharing.reborrow_s (its
  // explanation says so): past that, every job ends too.
  for (uint64_t id : ids) {
    if (Get(id, kAdmin).phase != JobPhase::kPending) continue;
    EXPECT_THAT(service_->Explain(kAdmin, id)->quota, HasSubstr("kept from borrowing until")) << "job " << id;
  }
  step(1000 * SharingSpec{}.reborrow_s, true);
  for (int k = 0; k < 30; ++k) step(1000, true);
  for (uint64_t id : ids) {
    const JobView v = Get(id, kAdmin);
    if (timed.count(id) && v.phase == JobPhase::kFailed && v.reason.rfind("timed out", 0) == 0) continue;
    EXPECT_EQ(v.phase, cancelled.count(id) ? JobPhase::kCancelled : JobPhase::kSucceeded)  // no other instance of these agents fails
        << "job " << id << " " << JobPhaseName(v.phase) << " bound " << v.bound_replicas << " running " << v.running_replicas
        << " min " << v.request.min_replicas << " max " << v.request.max_replicas << ": " << v.reason << " "
        << (v.phase == JobPhase::kPending ? service_->Explain(kAdmin, id)->quota : "");
    for (const auto& w : v.where) ADD_FAILURE() << "job " << id << " replica " << w.replica << " still " << w.state << " on " << w.node;
  }
  EXPECT_EQ(GpuMilliUsed(), 0);
  EXPECT_TRUE(service_->ListReservations(kAdmin).empty());
  EXPECT_TRUE(service_->ListStandbyWindows(kAdmin).empty());
}



// ---- Multi-tenant queues (issue 20) ----

QueueSpec Queue(const std::string& name, const std::string& parent, int64_t guarantee_gpus, std::vector<std::string> tenants = {},
                int32_t max_priority = 1000) {
  QueueSpec q;
  q.name = name;
  q.parent = parent;
  if (guarantee_gpus > 0) q.guarantee.gpu_milli = guarantee_gpus * 1000;
  q.tenants = std::move(tenants);
  q.max_priority = max_priority;
  return q;
}

JobRequest InQueue(JobRequest r, const std::string& queue) {
  r.queue = queue;
  return r;
}

// Two orgs: research (alice) with teams nlp (its jobs at most priority 500) and vision; product
// (bob) with one team, search.
ServiceOptions TwoOrgs() {
  ServiceOptions o;
  o.engine = EngineConfig{};
  o.engine->queues = {Queue("research", "", 8, {"alice"}), Queue("nlp", "research", 8, {}, 500), Queue("vision", "research", 0),
                      Queue("product", "", 8, {"bob"}), Queue("search", "product", 8)};
  return o;
}

TEST_F(ServiceTest, ATenantSubmitsOnlyToItsOwnQueuesWithinTheirPriorityCeilingsAndSeesOnlyThose) {
  Reopen(TwoOrgs());
  const auto fails = [&](const Principal& who, const JobRequest& r) {
    auto id = service_->Submit(who, r);
    return id.ok() ? std::pair{StatusCode::kOk, std::string("accepted")} : std::pair{id.status().code(), id.status().message()};
  };
  EXPECT_EQ(fails(kAlice, InQueue(Job("j", 1, 1), "search")),
            (std::pair{StatusCode::kPermissionDenied, std::string("field 'queue': tenant 'alice' may not submit to queue 'search'")}));
  EXPECT_EQ(fails(kAlice, InQueue(Job("j", 1, 1, 600), "nlp")),
            (std::pair{StatusCode::kPermissionDenied,
                       std::string("field 'priority': 600 is above the ceiling of queue 'nlp' (max_priority 500)")}));
  EXPECT_EQ(fails(kAlice, Job("j", 1, 1)),
            (std::pair{StatusCode::kInvalidArgument, std::string("field 'queue': missing (one of nlp, vision)")}));
  EXPECT_EQ(fails(kAlice, InQueue(Job("j", 1, 1), "research")),
            (std::pair{StatusCode::kInvalidArgument,
                       std::string("field 'queue': queue 'research' has queues under it: jobs run in its leaves")}));
  EXPECT_EQ(fails(kAlice, InQueue(Job("j", 1, 1), "nope")),
            (std::pair{StatusCode::kInvalidArgument, std::string("field 'queue': no queue 'nope'")}));
  EXPECT_EQ(fails(Principal{Role::kTenant, "carol"}, Job("j", 1, 1)),
            (std::pair{StatusCode::kPermissionDenied, std::string("field 'queue': tenant 'carol' may submit to no queue")}));
  EXPECT_TRUE(service_->ListJobs(kAdmin).empty());  // nothing refused was stored
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("n0")}).ok());
  // Accepted: alice within nlp's ceiling; bob without a queue runs in his only one; an admin anywhere.
  auto a = service_->Submit(kAlice, InQueue(Job("a", 1, 8, 500), "nlp"));
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto b = service_->Submit(kBob, Job("b", 1, 8));
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(Get(*b, kBob).request.queue, "search");
  ASSERT_TRUE(service_->Submit(kAdmin, InQueue(Job("ops", 1, 8, 1000), "vision")).ok());
  const uint64_t too_big = *service_->Submit(kAdmin, InQueue(Job("too-big", 1, 16), "vision"));  // fits no node
  Pass();
  ASSERT_EQ(Get(too_big, kAdmin).phase, JobPhase::kPending);
  // alice sees research and its teams; bob product and search; an admin all five.
  const auto names = [&](const Principal& who) {
    std::vector<std::string> out;
    auto v = service_->GetQueues(who);
    EXPECT_TRUE(v.ok());
    if (v.ok()) {
      for (const Service::QueueView& q : v->queues) out.push_back(q.spec.name);
    }
    return out;
  };
  EXPECT_EQ(names(kAlice), (std::vector<std::string>{"research", "nlp", "vision"}));
  EXPECT_EQ(names(kBob), (std::vector<std::string>{"product", "search"}));
  EXPECT_EQ(names(kAdmin), (std::vector<std::string>{"research", "nlp", "vision", "product", "search"}));
  EXPECT_EQ(service_->GetQueues(kAgentA).status().code(), StatusCode::kPermissionDenied);
  // One node: the admin's job (the highest priority) runs in vision; nlp's and search's wait, and
  // so does vision's 16-GPU job, which fits no node (the service holds it, not the engine).
  auto v = service_->GetQueues(kAdmin);
  ASSERT_TRUE(v.ok());
  const auto figures = [&](size_t q) {
    const Engine::QueueFigures& f = v->queues[q].gpus;
    return std::vector<int64_t>{f.held, f.running_jobs, f.waiting_jobs, f.pending};
  };
  EXPECT_EQ(figures(0), (std::vector<int64_t>{8000, 1, 2, 24000}));  // research: its teams' together
  EXPECT_EQ(figures(1), (std::vector<int64_t>{0, 0, 1, 8000}));      // nlp
  EXPECT_EQ(figures(2), (std::vector<int64_t>{8000, 1, 1, 16000}));  // vision
  EXPECT_EQ(figures(3), (std::vector<int64_t>{0, 0, 1, 8000}));     // product
  EXPECT_EQ(figures(4), (std::vector<int64_t>{0, 0, 1, 8000}));     // search
  EXPECT_EQ(v->queues[2].gpus.borrowed, 8000);  // vision is guaranteed nothing
  EXPECT_EQ(v->queues[1].gpus.guarantee, 8000);
}

TEST_F(ServiceTest, WithPreemptionWithinQueuesAnHpJobAtItsQueuesLimitEvictsItsTeamsLpJobAndRunsOnTheIdleNode) {
  // Two nodes. a (alice) is guaranteed and limited to one node, b (bob) guaranteed one. alice's
  // LP job holds a's node; the other node is idle. Her HP job cannot start (a is at its limit):
  // with sharing.within_queue it evicts her LP job and, after the grace period, runs on the idle
  // node; bob's queue and jobs are not touched.
  ServiceOptions o;
  o.engine = EngineConfig{};
  QueueSpec a = Queue("a", "", 8, {"alice"});
  a.limit.gpu_milli = 8000;
  o.engine->queues = {a, Queue("b", "", 8, {"bob"})};
  o.engine->sharing.within_queue = true;
  Reopen(o);
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("n0"), Node("n1")}).ok());
  const uint64_t lp = RunJob(kAlice, Job("lp", 1, 8, 300, true));
  auto hp = service_->Submit(kAlice, Job("hp", 1, 8, 800));
  ASSERT_TRUE(hp.ok());
  Pass();
  std::vector<Order> notice = Orders(kAgentA);
  ASSERT_EQ(Ops(notice), (std::vector<Order::Op>{Order::Op::kEvict}));
  EXPECT_EQ(notice[0].job, lp);
  EXPECT_EQ(Get(*hp).phase, JobPhase::kPending);
  clock_.ms += 61'000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  for (int i = 0; i < 3; ++i) {
    Pass();
    ReportAll(kAgentA, Orders(kAgentA), TaskReport::State::kRunning);
    Pass();
  }
  EXPECT_EQ(Get(*hp).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(lp).phase, JobPhase::kPending);  // a is at its limit again
  auto queues = service_->GetQueues(kAdmin);
  ASSERT_TRUE(queues.ok());
  EXPECT_EQ(queues->queues[0].gpus.held, 8000);
  EXPECT_EQ(queues->queues[1].gpus.held, 0);
  // Extra passes change nothing.
  for (int i = 0; i < 3; ++i) Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
}

TEST_F(ServiceTest, AnAdminsQueueChangeTakesEffectAtOnceIsStoredAndOutlivesARestart) {
  // Two teams guaranteed one node each; bob's elastic job (1..2 nodes) holds both.
  ServiceOptions o;
  o.engine = EngineConfig{};
  o.engine->queues = {Queue("a", "", 8, {"alice"}), Queue("b", "", 8, {"bob"})};
  Reopen(o);
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("n0"), Node("n1")}).ok());
  JobRequest elastic = Job("bobs", 2, 8, 300, true);
  elastic.min_replicas = 1;
  const uint64_t bobs = RunJob(kBob, elastic);
  EXPECT_EQ(Get(bobs, kBob).bound_replicas, 2);
  // alice's 2-node gang is above a's guarantee: a is owed nothing for it, and it waits.
  auto alices = service_->Submit(kAlice, Job("alices", 2, 8, 300, true));
  ASSERT_TRUE(alices.ok());
  Pass();
  EXPECT_TRUE(Orders(kAgentA).empty());
  auto why = service_->Explain(kAlice, *alices);
  ASSERT_TRUE(why.ok());
  EXPECT_EQ(why->quota, "queue 'a' would hold 16 of its fair share of 8 GPUs");
  EXPECT_FALSE(why->owed);
  EXPECT_EQ(service_->SetQueues(kAlice, {}, std::nullopt).status().code(), StatusCode::kPermissionDenied);
  // A change that would take b away while bob's job runs in it is refused, naming it.
  auto refused = ViaLoop([&] { return service_->SetQueues(kAdmin, {Queue("a", "", 16, {"alice"})}, std::nullopt); });
  ASSERT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("queue 'b': field 'name'"));
  // a gets both nodes' guarantee: alice's gang is owed them now, and bob's job gets its notice.
  SharingSpec sharing;
  sharing.cooldown_s = 120;
  auto changed = ViaLoop([&] {
    return service_->SetQueues(kAdmin, {Queue("a", "", 16, {"alice"}), Queue("b", "", 0, {"bob"})}, sharing);
  });
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  ASSERT_EQ(changed->queues.size(), 2u);
  EXPECT_EQ(changed->queues[0].gpus.guarantee, 16000);
  EXPECT_EQ(changed->sharing.cooldown_s, 120);
  Pass();
  std::vector<Order> notice = Orders(kAgentA);
  ASSERT_EQ(Ops(notice), (std::vector<Order::Op>{Order::Op::kEvict, Order::Op::kEvict}));
  for (const Order& n : notice) EXPECT_EQ(n.job, bobs);
  // A crash 40 s into the grace period: the change is stored, and the Reclaim goes on after the
  // restart from where it was (the engine's carried state: its victims, its deadline).
  clock_.ms += 40'000;
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  Pass();
  Reopen(o);
  auto after = service_->GetQueues(kAdmin);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->queues.size(), 2u);
  EXPECT_EQ(after->queues[0].gpus.guarantee, 16000);
  EXPECT_EQ(after->queues[1].gpus.guarantee, 0);
  EXPECT_EQ(after->queues[1].spec.tenants, std::vector<std::string>{"bob"});
  EXPECT_EQ(after->sharing.cooldown_s, 120);
  Pass();  // bob's replicas get their notice again (it may not have reached them)
  notice = Orders(kAgentA);
  EXPECT_EQ(std::count_if(notice.begin(), notice.end(), [](const Order& x) { return x.op == Order::Op::kEvict; }), 2);
  for (const Order& n : notice) {
    if (n.op == Order::Op::kEvict) {
      EXPECT_EQ(n.deadline_ms, 60'000 + (clock_.ms - 40'000));
    }
  }
  clock_.ms += 21'000;  // the grace period ends 60 s after the Reclaim, not after the restart
  ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
  for (int i = 0; i < 3; ++i) {
    Pass();
    std::vector<Order> orders = Orders(kAgentA);
    ReportAll(kAgentA, orders, TaskReport::State::kRunning);
    Pass();
  }
  EXPECT_EQ(Get(*alices).phase, JobPhase::kRunning);
  EXPECT_EQ(Get(bobs, kBob).phase, JobPhase::kPending);
  after = service_->GetQueues(kAdmin);
  EXPECT_EQ(after->queues[0].gpus.held, 16000);
  EXPECT_EQ(after->queues[1].gpus.waiting_jobs, 1);
  const std::string metrics = service_->MetricsText();
  EXPECT_THAT(metrics, HasSubstr("estuary_queue_gpus_held{queue=\"a\"} 16\n"));
  EXPECT_THAT(metrics, HasSubstr("estuary_queue_gpus_guaranteed{queue=\"b\"} 0\n"));
  EXPECT_THAT(metrics, HasSubstr("estuary_queue_jobs_waiting{queue=\"b\"} 1\n"));
}

// Time-based fairness goes on across a restart: a team that used the whole cluster for two hours
// gets less of it than an idle team of the same weight, whether or not the service restarted in
// between (the engine's decayed usage is stored as it changes, meta/queue_carry, and restored).
// Three nodes; weights 1:1, a's decayed usage all of the teams': a's weight counts 2^-(1/0.5) =
// 1/4 of b's, so a's fair share is 24 x 1/5 = 4.8 GPUs and b's 19.2 (without that usage, 12 and
// 12). alice, then bob, each submit two one-node jobs: the first pass (within fair shares) starts
// both of bob's (16 <= 19.2) and none of alice's (8 > 4.8); the second, alice's first. (With the
// usage forgotten: alice's first and bob's first within 12 each, then alice's second.)
TEST_F(ServiceTest, ATeamsDecayedUsageOutlivesARestartAndAnIdleTeamGetsMoreOfTheCluster) {
  ServiceOptions o;
  o.engine = EngineConfig{};
  o.engine->queues = {Queue("a", "", 0, {"alice"}), Queue("b", "", 0, {"bob"})};
  o.engine->sharing.usage_half_life_s = 3600;
  Reopen(o);
  ASSERT_TRUE(service_->RegisterNodes(kAgentA, {Node("n0"), Node("n1"), Node("n2")}).ok());
  const uint64_t used = RunJob(kAlice, InQueue(Job("used", 3, 8), "a"));
  for (int minute = 0; minute < 120; ++minute) {
    clock_.ms += 60'000;
    ASSERT_TRUE(service_->Heartbeat(kAgentA, {}).ok());
    Pass();
  }
  std::vector<TaskReport> done;
  for (int r = 0; r < 3; ++r) done.push_back({std::to_string(used) + "-" + std::to_string(r), TaskReport::State::kSucceeded});
  ASSERT_TRUE(service_->Report(kAgentA, done, false).ok());
  Pass();
  EXPECT_EQ(Get(used).phase, JobPhase::kSucceeded);
  auto stored = store_->Get("meta/queue_carry");
  ASSERT_TRUE(stored.ok());
  ASSERT_TRUE(stored->has_value());
  Reopen(o);
  std::vector<uint64_t> jobs;
  for (const auto& [who, name] : std::vector<std::pair<Principal, std::string>>{
           {kAlice, "a1"}, {kAlice, "a2"}, {kBob, "b1"}, {kBob, "b2"}}) {
    auto id = service_->Submit(who, InQueue(Job(name, 1, 8), who.name == kAlice.name ? "a" : "b"));
    ASSERT_TRUE(id.ok());
    jobs.push_back(*id);
  }
  Pass();
  std::set<uint64_t> started;
  for (const Order& x : Orders(kAgentA)) {
    if (x.op == Order::Op::kStart) started.insert(x.job);
  }
  EXPECT_EQ(started, (std::set<uint64_t>{jobs[0], jobs[2], jobs[3]}));
}

// The liveness run with two teams' queues, each guaranteed half the cluster and limited to three
// quarters of it, with preemption within a queue.
TEST_P(ServiceLiveness, EveryJobEndsOnItsOwnOnceTheChangesStopWithQueues) {
  ServiceOptions o;
  o.engine = EngineConfig{};
  QueueSpec a = Queue("a", "", 32, {"alice"}), b = Queue("b", "", 32, {"bob"});
  a.limit.gpu_milli = b.limit.gpu_milli = 48000;
  o.engine->queues = {a, b};
  o.engine->sharing.within_queue = true;
  RunThenDrain(o);
}

// The liveness run with a second agent that falls silent at times, and cancels, reservations,
// drains, cordons, failed migrations and configuration changes (seeds 1-20 in `make test`; swept
// over 1-300).
class ServiceLivenessMore : public ServiceLiveness {};

TEST_P(ServiceLivenessMore, EveryJobEndsOnItsOwnOnceTheChangesStopWithTwoAgentsAndMore) {
  LivenessMix mix;
  mix.two_agents = mix.more = true;
  RunThenDrain({}, mix);
}

// The liveness run as the one above, with two orgs' queues (alice's research org with teams nlp
// and vision, bob's product org with teams search and ads) whose guarantees, limits and weights
// an admin changes at run time, and Reclaim across them.
TEST_P(ServiceLivenessMore, EveryJobEndsOnItsOwnOnceTheChangesStopWithNestedQueuesAndMore) {
  const auto queues = [](Rng& rng) {
    const auto gpus = [&](std::initializer_list<int64_t> of) { return std::vector<int64_t>(of)[rng.Uniform(of.size())]; };
    QueueSpec research = Queue("research", "", gpus({16, 32}), {"alice"}), product = Queue("product", "", gpus({16, 32}), {"bob"});
    QueueSpec nlp = Queue("nlp", "research", gpus({0, 8, 16})), vision = Queue("vision", "research", gpus({0, 8}));
    QueueSpec search = Queue("search", "product", gpus({0, 8, 16})), ads = Queue("ads", "product", gpus({0, 8}));
    // The children's guarantees within their parent's.
    const auto within = [](QueueSpec& child, const QueueSpec& parent, const QueueSpec& sister) {
      child.guarantee.gpu_milli = std::min(child.guarantee.gpu_milli.value_or(0),
                                           parent.guarantee.gpu_milli.value_or(0) - sister.guarantee.gpu_milli.value_or(0));
    };
    within(vision, research, nlp);
    within(ads, product, search);
    if (rng.Uniform(2) == 0) product.limit.gpu_milli = 48000;
    if (rng.Uniform(2) == 0) ads.limit.gpu_milli = 24000;
    for (QueueSpec* q : {&research, &product, &nlp, &vision, &search, &ads}) q->weight = 1 + static_cast<int64_t>(rng.Uniform(3));
    return std::vector<QueueSpec>{research, nlp, vision, product, search, ads};
  };
  ServiceOptions o;
  o.engine = EngineConfig{};
  Rng first(GetParam() + 1000);
  o.engine->queues = queues(first);
  LivenessMix mix;
  mix.two_agents = mix.more = true;
  mix.alice_queues = {"nlp", "vision"};
  mix.bob_queues = {"search", "ads"};
  mix.queues = queues;
  RunThenDrain(o, mix);
}

INSTANTIATE_TEST_SUITE_P(Seeds, ServiceLiveness, ::testing::Range<uint64_t>(1, 41));
// Seeds that found bugs in sweeps of 1-300, where 1-40 do not: 82 and 147 a lost stop
// (ServiceLiveness's comment); 106, with queues, a job ended after the cycle whose end changed
// another job in the engine, which the service carried out only in the next pass (the
// invariants broke between the two).
INSTANTIATE_TEST_SUITE_P(Found, ServiceLiveness, ::testing::Values(82, 106, 147));
// The liveness run as the first of these, under backfill, survivors' holds and the engine's own
// defragmentations with assembly, with jobs that require one ASW and jobs with walltimes.
TEST_P(ServiceLivenessMore, EveryJobEndsOnItsOwnOnceTheChangesStopWithTopologyBackfillAndAssembly) {
  ServiceOptions o;
  o.engine = EngineConfig{};
  EngineBackfill b;
  b.easy = true;
  EnableBackfill(b, &*o.engine);
  o.engine->hold_survivors = true;
  o.engine->defrag.enabled = true;
  o.engine->defrag.interval_s = 600;
  o.engine->defrag.trigger_after_s = 120;
  o.engine->defrag.assemble = true;
  LivenessMix mix;
  mix.two_agents = mix.more = mix.topology = true;
  RunThenDrain(o, mix);
}

// Its first version (whose agents answered a task's orders in any order) found a crash in the
// queues' job lists after queues changed at run time, a done replica kept on a drained node, a
// drained node made ready at the end of a defragmentation's moves (each of the last two broke a
// restart's recovery), and jobs failed by a move's failed new instance taken for their replica's;
// all are pinned by unit tests (ReplacedQueuesListThePreemptibleJobsOfEveryJobAdded...,
// AReplicaThatSucceededOnANodeThenDrained..., ANodeAnAdminCordonedOrDrainedDuringADefrag...,
// AReplicaPlacedAgainOnItsMovesTarget...). No job may fail now but by its walltime.
INSTANTIATE_TEST_SUITE_P(Seeds, ServiceLivenessMore, ::testing::Range<uint64_t>(1, 21));

}  // namespace
}  // namespace estuary
