// Real workloads (issue 19): `estuary serve` and real node agents (`estuary agent --node`, two
// node names on this machine, each with its own agent token and state) as processes; jobs whose
// commands are small scripts run as real processes, as the tenant's Unix user, and what they
// print is read back through the service.
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <set>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "agent/cgroups.h"
#include "agent/process.h"
#include "tests/testing/service_fixture.h"

namespace estuary {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kOtherTenantToken[] = "tenant-b-token-0123456";

class RealAgentTest : public testing::ServiceProcessTest {
 protected:
  void SetUp() override {
    ServiceProcessTest::SetUp();
    chmod(dir_.c_str(), 0755);  // the run-as user reads the scripts here
    std::ofstream(dir_ + "/tokens", std::ios::app) << "agent-b-token-0123456789 agent rack-2\n"
                                                    << kOtherTenantToken << " tenant team-b\n";
    // Root switches to an unprivileged user; anyone else can run only as themselves.
    user_ = geteuid() == 0 ? "nobody" : getpwuid(geteuid())->pw_name;
    uid_ = geteuid() == 0 ? 65534 : geteuid();
  }
  void TearDown() override {
    for (pid_t& a : agents_) testing::StopProcess(a, SIGTERM);
    // A stopped agent leaves its replicas running (a restarted one adopts them): the replicas of
    // jobs a test left running are killed here.
    std::error_code ec;
    for (const auto& state : std::filesystem::directory_iterator(dir_, ec)) {
      if (state.path().filename().string().rfind("state-", 0) != 0) continue;
      for (const auto& in : std::filesystem::directory_iterator(state.path() / "instances", ec)) {
        (void)SignalGroup(RecordedPid(in.path().string()), SIGKILL);
        (void)SignalGroup(RecordedPid((in.path() / "hook").string()), SIGKILL);
      }
    }
    ServiceProcessTest::TearDown();
  }

  // A real agent for node `name` (8 GPUs declared: no NVML here) on loopback.
  // `gpus`: its GPU flags (default: 8 H800 declared).
  void StartRealAgent(const std::string& name, const std::string& token,
                      const std::vector<std::string>& gpus = {"--gpus", "8", "--gpu-model", "H800"}) {
    std::vector<std::string> args = {"agent", "--server", "http://127.0.0.1:" + std::to_string(port_), "--token", token,
                                     "--node", name, "--address", "127.0.0.1", "--domains", "data=az0/spine0/asw0,param=pod0",
                                     "--state", dir_ + "/state-" + name, "--run-as", "team-a=" + user_ + ",team-b=" + user_,
                                     "--heartbeat-s", "1", "--kill-wait-s", "2"};
    args.insert(args.end(), gpus.begin(), gpus.end());
    const pid_t pid = testing::Spawn(ESTUARY_BINARY, args, dir_ + "/agent-" + name + ".log");
    ASSERT_GT(pid, 0);
    agents_.push_back(pid);
  }

  // Waits until `n` nodes are registered.
  void WaitNodes(size_t n) {
    httplib::Client c("127.0.0.1", port_);
    for (int i = 0; i < 200; ++i) {
      auto r = c.Get("/v1/nodes", testing::Bearer(testing::kAdminToken));
      if (r && r->status == 200 && Json::parse(r->body)["nodes"].size() >= n) return;
      std::this_thread::sleep_for(50ms);
    }
    FAIL() << "nodes did not register";
  }

  std::string Submit(const Json& job, const char* token = testing::kTenantToken) {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Post("/v1/jobs", testing::Bearer(token), job.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return "";
    EXPECT_EQ(r->status, 201) << r->body;
    return Json::parse(r->body).value("id", "");
  }

  // The job once it has ended (or as it is after `limit`).
  Json WaitEnded(const std::string& id, std::chrono::seconds limit = 30s) {
    httplib::Client c("127.0.0.1", port_);
    Json j;
    for (auto until = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < until;) {
      auto r = c.Get("/v1/jobs/" + id, testing::Bearer(testing::kAdminToken));
      if (r && r->status == 200) {
        j = Json::parse(r->body);
        if (j["state"] != "pending" && j["state"] != "running") return j;
      }
      std::this_thread::sleep_for(100ms);
    }
    return j;
  }

  std::string Logs(const std::string& id, int replica, const char* token = testing::kTenantToken, int* status = nullptr) {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/v1/jobs/" + id + "/logs?replica=" + std::to_string(replica), testing::Bearer(token));
    if (status != nullptr) *status = r ? r->status : 0;
    return r && r->status == 200 ? r->body : "";
  }

  // The job as the admin sees it (null when it cannot be read).
  Json JobNow(const std::string& id) {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/v1/jobs/" + id, testing::Bearer(testing::kAdminToken));
    return r && r->status == 200 ? Json::parse(r->body) : Json();
  }

  // Polls `done` every 100 ms until it holds; false after `limit`.
  static bool WaitFor(const std::function<bool()>& done, std::chrono::seconds limit = 30s) {
    for (auto until = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < until;) {
      if (done()) return true;
      std::this_thread::sleep_for(100ms);
    }
    return done();
  }

  bool WaitRunning(const std::string& id, int replicas = 1) {
    return WaitFor([&] { return JobNow(id).value("running_replicas", 0) == replicas; });
  }

  std::string Script(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << text;
    chmod(path.c_str(), 0755);
    return path;
  }

  // An agent cut off until its node fails, then restored (see the tests that call it).
  void CutOffThenRestored(bool exits_meanwhile);

  std::string user_;
  uid_t uid_ = 0;
  std::vector<pid_t> agents_;
};

TEST_F(RealAgentTest, ATwoReplicaJobMeetsAtItsRendezvousRunsAsItsTenantsUserAndItsLogsAreReadThroughTheService) {
  StartServe();
  StartRealAgent("node-a", testing::kAgentToken);
  StartRealAgent("node-b", "agent-b-token-0123456789");
  WaitNodes(2);
  // Rank 0 listens on the rendezvous the agent gives; rank 1 connects and says hello.
  const std::string script = Script("rendezvous.sh", R"(
echo "replica=$ESTUARY_REPLICA of $ESTUARY_REPLICAS gpus=$CUDA_VISIBLE_DEVICES uid=$(id -u) restart=$ESTUARY_RESTART_COUNT"
if [ "$ESTUARY_REPLICA" = 0 ]; then
  exec perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => "0.0.0.0", LocalPort => $ENV{ESTUARY_MASTER_PORT},
    Listen => 1, ReuseAddr => 1) or die "listen: $!"; $c = $s->accept; print "rank 0 got: ", scalar <$c>;'
else
  exec perl -MIO::Socket::INET -e 'for (1..300) { $c = IO::Socket::INET->new(PeerAddr => $ENV{ESTUARY_MASTER_ADDR},
    PeerPort => $ENV{ESTUARY_MASTER_PORT}) and last; select(undef, undef, undef, 0.1) } die "connect: $!" unless $c;
    print $c "hello from rank 1\n"; print "rank 1 connected to $ENV{ESTUARY_MASTER_ADDR}\n";'
fi
)");
  const std::string id = Submit({{"name", "rendezvous"}, {"replicas", 2}, {"gpus", 8}, {"memory_mib", 256},
                                 {"command", {"/bin/sh", script}}});
  const Json done = WaitEnded(id);
  EXPECT_EQ(done["state"], "succeeded") << done.dump();
  const std::string log0 = Logs(id, 0), log1 = Logs(id, 1);
  const std::string all_gpus = "gpus=0,1,2,3,4,5,6,7 uid=" + std::to_string(uid_) + " restart=0";
  EXPECT_NE(log0.find("replica=0 of 2 " + all_gpus), std::string::npos) << log0;
  EXPECT_NE(log0.find("rank 0 got: hello from rank 1"), std::string::npos) << log0;
  EXPECT_NE(log1.find("replica=1 of 2 " + all_gpus), std::string::npos) << log1;
  EXPECT_NE(log1.find("rank 1 connected to 127.0.0.1"), std::string::npos) << log1;
  EXPECT_EQ(log0.rfind("[estuary] replica 0 on node-", 0), 0u) << log0;  // the service marks each run

  // Another tenant does not see the job, nor its logs.
  int status = 0;
  EXPECT_EQ(Logs(id, 0, kOtherTenantToken, &status), "");
  EXPECT_EQ(status, 404);
  Logs(id, 5, testing::kTenantToken, &status);
  EXPECT_EQ(status, 400);  // no replica 5
}

TEST_F(RealAgentTest, ACommandThatExitsWithThreeFailsItsJobWithThatExitCodeAndOneThatCannotStartSaysWhy) {
  StartServe();
  StartRealAgent("node-a", testing::kAgentToken);
  WaitNodes(1);
  const std::string three = Submit({{"name", "exits-3"}, {"command", "echo about to fail; exit 3"}});
  Json done = WaitEnded(three);
  EXPECT_EQ(done["state"], "failed");
  EXPECT_EQ(done["reason"], "replica 0 failed: exit code 3");
  EXPECT_NE(Logs(three, 0).find("about to fail"), std::string::npos);

  const std::string missing = Submit({{"name", "no-such-program"}, {"command", {"estuary-no-such-program", "x"}}});
  done = WaitEnded(missing);
  EXPECT_EQ(done["state"], "failed");
  EXPECT_EQ(done["reason"], "replica 0 failed: exec estuary-no-such-program: No such file or directory");

  const std::string nowhere = Submit({{"name", "no-workdir"}, {"command", "true"}, {"workdir", "/nonexistent-estuary"}});
  done = WaitEnded(nowhere);
  EXPECT_EQ(done["state"], "failed");
  EXPECT_EQ(done["reason"], "replica 0 failed: chdir /nonexistent-estuary: No such file or directory");

  // A job without a command can run only on fake agents.
  const std::string none = Submit({{"name", "no-command"}});
  done = WaitEnded(none);
  EXPECT_EQ(done["state"], "failed");
  EXPECT_EQ(done["reason"], "replica 0 failed: the job has no command (it can run only on fake agents)");
}


TEST_F(RealAgentTest, AJobPastItsWalltimeFailsWithTheReasonAndItsProcessIsStopped) {
  StartServe();
  StartRealAgent("node-a", testing::kAgentToken);
  WaitNodes(1);
  const std::string id = Submit({{"name", "too-long"}, {"command", "echo pid=$$; exec sleep 600"}, {"walltime_s", 2}});
  const Json done = WaitEnded(id);
  EXPECT_EQ(done["state"], "failed");
  EXPECT_EQ(done["reason"], "timed out: its run reached walltime_s 2");
  // Its process (the shell exec'd into sleep) is gone: the agent stopped it.
  std::string log;
  ASSERT_TRUE(WaitFor([&] { return (log = Logs(id, 0)).find("pid=") != std::string::npos; })) << log;
  const pid_t pid = static_cast<pid_t>(std::stol(log.substr(log.find("pid=") + 4)));
  ASSERT_GT(pid, 1);
  EXPECT_TRUE(WaitFor([&] { return kill(pid, 0) != 0 && errno == ESRCH; })) << "pid " << pid << " still runs";
}

// The GPUs a replica may use, from its log line "gpus=0,1,2,3".
std::set<int> GpusIn(const std::string& log) {
  std::set<int> out;
  const size_t at = log.find("gpus=");
  if (at == std::string::npos) return out;
  std::istringstream in(log.substr(at + 5, log.find('\n', at) - at - 5));
  for (std::string g; std::getline(in, g, ',');) out.insert(std::stoi(g));
  return out;
}

TEST_F(RealAgentTest, TwoJobsOnOneNodeSeeDisjointGpusAndOneOverItsMemoryIsKilledAsOutOfMemory) {
  StartServe();
  StartRealAgent("node-a", testing::kAgentToken);
  WaitNodes(1);
  const Json half = {{"gpus", 4}, {"memory_mib", 256}, {"command", "echo gpus=$CUDA_VISIBLE_DEVICES; sleep 2"}};
  Json a = half, b = half;
  a["name"] = "half-a";
  b["name"] = "half-b";
  const std::string ia = Submit(a), ib = Submit(b);
  EXPECT_EQ(WaitEnded(ia)["state"], "succeeded");
  EXPECT_EQ(WaitEnded(ib)["state"], "succeeded");
  const std::set<int> ga = GpusIn(Logs(ia, 0)), gb = GpusIn(Logs(ib, 0));
  EXPECT_EQ(ga.size(), 4u);
  EXPECT_EQ(gb.size(), 4u);
  std::set<int> both = ga;
  both.insert(gb.begin(), gb.end());
  EXPECT_EQ(both, (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7}));  // disjoint, and together the node's

  if (!Cgroups::Detect().limits_memory()) GTEST_SKIP() << "no writable memory controller here";
  const std::string greedy = Submit({{"name", "greedy"}, {"memory_mib", 32},
                                     {"command", "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived"}});
  const Json done = WaitEnded(greedy);
  EXPECT_EQ(done["state"], "failed");
  EXPECT_EQ(done["reason"], "replica 0 failed: out of memory");
}

TEST_F(RealAgentTest, AnAgentKilledWithSigkillAndRestartedAdoptsItsReplicasStartsNoneTwiceAndAllFinish) {
  StartServe();
  StartRealAgent("node-a", testing::kAgentToken);
  WaitNodes(1);
  // Each start appends its rank to a file in the job's checkpoint directory (kept on the node).
  const std::string id = Submit({{"name", "three"}, {"replicas", 3}, {"gpus", 1}, {"cpu_milli", 100}, {"memory_mib", 256},
                                 {"command", "echo $ESTUARY_REPLICA >> $ESTUARY_CHECKPOINT_DIR/starts; sleep 4; echo done"}});
  httplib::Client c("127.0.0.1", port_);
  for (int i = 0; i < 100; ++i) {
    auto r = c.Get("/v1/jobs/" + id, testing::Bearer(testing::kAdminToken));
    if (r && r->status == 200 && Json::parse(r->body)["running_replicas"] == 3) break;
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(500ms);
  testing::StopProcess(agents_[0], SIGKILL);
  agents_.clear();
  std::this_thread::sleep_for(1s);
  StartRealAgent("node-a", testing::kAgentToken);  // the same node and state
  const Json done = WaitEnded(id, 30s);
  EXPECT_EQ(done["state"], "succeeded") << done.dump();
  std::ifstream starts(dir_ + "/state-node-a/checkpoints/" + id + "/starts");
  std::multiset<std::string> ranks;
  for (std::string line; std::getline(starts, line);) ranks.insert(line);
  EXPECT_EQ(ranks, (std::multiset<std::string>{"0", "1", "2"}));  // none started twice
  for (int r = 0; r < 3; ++r) EXPECT_NE(Logs(id, r).find("done"), std::string::npos) << "replica " << r;
}

// An agent cut off (stopped with SIGSTOP: no heartbeats, no reports) long enough for its node to
// fail, while its replica's process runs on. An admin restores the node and the agent goes on
// (SIGCONT): the job starts there again as a new instance of its replica (reports name their
// instance: docs/agent.md).
// - The old instance exited with an error meanwhile: its failure, reported now, is of an instance
//   the service no longer tracks and does not fail the job (it did before instance ids).
// - The old instance still runs: the agent stops it (the stop the service ordered for its failed
//   node) and starts the new one once the old one has left the GPU they share.
// Either way the job runs again and succeeds.
void RealAgentTest::CutOffThenRestored(bool exits_meanwhile) {
  heartbeat_timeout_s_ = "3";
  StartServe();
  StartRealAgent("node-a", testing::kAgentToken);
  WaitNodes(1);
  // Each instance notes in the job's checkpoint directory when it ends on a stop (a second after
  // its SIGTERM) and when it starts its second run.
  const std::string first =
      exits_meanwhile ? "sleep 3; exit 3" : "trap 'sleep 1; echo stopped >> $ESTUARY_CHECKPOINT_DIR/order; exit 0' TERM; sleep 60 & wait";
  const std::string id = Submit({{"name", "cut-off"}, {"gpus", 1}, {"cpu_milli", 100}, {"memory_mib", 256},
                                 {"command", "if [ \"$ESTUARY_RESTART_COUNT\" = 0 ]; then " + first +
                                                 "; fi; echo started >> $ESTUARY_CHECKPOINT_DIR/order; echo again"}});
  ASSERT_TRUE(WaitRunning(id));
  ASSERT_EQ(kill(agents_[0], SIGSTOP), 0);
  httplib::Client c("127.0.0.1", port_);
  const auto node_state = [&] {
    auto r = c.Get("/v1/nodes", testing::Bearer(testing::kAdminToken));
    return r && r->status == 200 ? Json::parse(r->body)["nodes"][0].value("state", "") : "";
  };
  ASSERT_TRUE(WaitFor([&] { return node_state() == "failed"; }, 20s));
  EXPECT_EQ(JobNow(id).value("state", ""), "pending");
  if (exits_meanwhile) std::this_thread::sleep_for(3s);  // the first instance has exited (code 3) by now
  auto r = c.Post("/v1/nodes/node-a/restore", testing::Bearer(testing::kAdminToken), "", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  ASSERT_EQ(kill(agents_[0], SIGCONT), 0);
  const Json done = WaitEnded(id, 30s);
  EXPECT_EQ(done["state"], "succeeded") << done.dump();
  EXPECT_EQ(done.value("restarts", 0), 1);
  EXPECT_NE(Logs(id, 0).find("again"), std::string::npos);
  std::ifstream order(dir_ + "/state-node-a/checkpoints/" + id + "/order");
  const std::string noted((std::istreambuf_iterator<char>(order)), std::istreambuf_iterator<char>());
  EXPECT_EQ(noted, exits_meanwhile ? "started\n" : "stopped\nstarted\n");  // the new one after the old one left
}

TEST_F(RealAgentTest, AnInstancesFailureReportedAfterItsNodeFailedAndWasRestoredDoesNotFailItsJobStartedAgainThere) {
  CutOffThenRestored(true);
}

TEST_F(RealAgentTest, AReplicaStartedAgainOnItsRestoredNodeWaitsThereForItsOldInstanceToStop) {
  CutOffThenRestored(false);
}

TEST_F(RealAgentTest, AnLpJobReclaimedByAnHpJobCheckpointsOnItsSignalAndResumesAfterItsRestart) {
  std::ofstream(dir_ + "/conf.yaml") << "{name: reclaim, queue: priority, preempt: {grace_s: 3}, absorb: false}\n";
  StartServe({"--config", dir_ + "/conf.yaml"});
  StartRealAgent("node-a", testing::kAgentToken);
  WaitNodes(1);
  // It counts steps; at the checkpoint signal it saves its step and leaves.
  const std::string lp = Submit({{"name", "lp"}, {"class", "lp"}, {"gpus", 8}, {"memory_mib", 256},
                                 {"checkpoint_signal", "SIGUSR1"},
                                 {"command", R"sh(step=0; f=$ESTUARY_CHECKPOINT_DIR/step
[ -f $f ] && step=$(cat $f)
echo "restart=$ESTUARY_RESTART_COUNT from=$step"
trap 'echo $step > $f; echo "checkpointed at $step, deadline $(cat $ESTUARY_NOTICE_FILE)"; exit 0' USR1
while [ $step -lt 30 ]; do step=$((step+1)); sleep 0.1; done
echo finished at $step)sh"}});
  httplib::Client c("127.0.0.1", port_);
  for (int i = 0; i < 100; ++i) {
    auto r = c.Get("/v1/jobs/" + lp, testing::Bearer(testing::kAdminToken));
    if (r && r->status == 200 && Json::parse(r->body)["running_replicas"] == 1) break;
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(1s);
  const std::string hp = Submit({{"name", "hp"}, {"class", "hp-training"}, {"gpus", 8}, {"memory_mib", 256},
                                 {"command", "sleep 1; echo hp done"}});
  EXPECT_EQ(WaitEnded(hp)["state"], "succeeded");
  const Json done = WaitEnded(lp, 60s);
  EXPECT_EQ(done["state"], "succeeded") << done.dump();
  EXPECT_EQ(done["restarts"], 1);
  const std::string log = Logs(lp, 0);
  EXPECT_NE(log.find("restart=0 from=0"), std::string::npos) << log;
  EXPECT_NE(log.find("checkpointed at "), std::string::npos) << log;
  EXPECT_NE(log.find("deadline deadline_ms "), std::string::npos) << log;
  // The second run resumed where the first one checkpointed (not at 0).
  const size_t at = log.find("checkpointed at ");
  const std::string saved = log.substr(at + 16, log.find(',', at) - at - 16);
  EXPECT_NE(saved, "0");
  EXPECT_NE(log.find("restart=1 from=" + saved), std::string::npos) << log;
  EXPECT_NE(log.find("finished at 30"), std::string::npos) << log;
}


TEST_F(RealAgentTest, AnLpJobThatIgnoresItsCheckpointSignalIsKilledAtTheDeadlineAndRunsAgainLater) {
  std::ofstream(dir_ + "/conf.yaml") << "{name: reclaim, queue: priority, preempt: {grace_s: 3}, absorb: false}\n";
  StartServe({"--config", dir_ + "/conf.yaml"});
  StartRealAgent("node-a", testing::kAgentToken);
  WaitNodes(1);
  // Its first run ignores the signal and ticks until it is killed; its second run just finishes.
  const std::string lp = Submit({{"name", "stubborn"}, {"class", "lp"}, {"gpus", 8}, {"memory_mib", 256},
                                 {"command", R"sh(echo "restart=$ESTUARY_RESTART_COUNT"
[ "$ESTUARY_RESTART_COUNT" = 1 ] && exit 0
trap 'echo "ignoring the signal, $(cat $ESTUARY_NOTICE_FILE)"' TERM
while true; do echo "tick $(date +%s%3N)"; sleep 0.1; done)sh"}});
  ASSERT_TRUE(WaitRunning(lp));
  std::this_thread::sleep_for(1s);
  const std::string hp = Submit({{"name", "hp"}, {"class", "hp-training"}, {"gpus", 8}, {"memory_mib", 256},
                                 {"command", "echo hp started at $(date +%s%3N)"}});
  EXPECT_EQ(WaitEnded(hp)["state"], "succeeded");
  const Json done = WaitEnded(lp, 60s);
  EXPECT_EQ(done["state"], "succeeded") << done.dump();
  EXPECT_EQ(done["restarts"], 1);
  const std::string log = Logs(lp, 0);
  const std::string notice = "ignoring the signal, deadline_ms ";
  const size_t noticed = log.find(notice);
  ASSERT_NE(noticed, std::string::npos) << log;
  const int64_t deadline = std::stoll(log.substr(noticed + notice.size()));
  // It kept ticking after the signal until the deadline, and not for long after it: SIGKILL.
  const size_t second = log.find("restart=1");
  ASSERT_NE(second, std::string::npos) << log;
  const size_t last = log.rfind("tick ", second);
  ASSERT_NE(last, std::string::npos) << log;
  const int64_t last_tick = std::stoll(log.substr(last + 5));
  EXPECT_GE(last_tick, deadline - 500) << log;
  EXPECT_LE(last_tick, deadline + 2000) << log;
  const std::string hp_log = Logs(hp, 0);
  const size_t started = hp_log.find("hp started at ");
  ASSERT_NE(started, std::string::npos) << hp_log;
  EXPECT_GE(std::stoll(hp_log.substr(started + 14)), last_tick) << "the HP job ran only once the LP job was gone";
}

TEST_F(RealAgentTest, AServiceInStandbyRunsItsHooksLendsItsGpusToASpotJobAndTakesThemBackAtItsWindowsEnd) {
  std::ofstream(dir_ + "/conf.yaml") << "{name: standby, queue: priority, preempt: {grace_s: 2}, absorb: false, standby: {lend_max_priority: 699}}\n";
  StartServe({"--config", dir_ + "/conf.yaml"});
  StartRealAgent("node-a", testing::kAgentToken);
  WaitNodes(1);
  const std::string marks = dir_ + "/marks";  // the run-as user writes its markers here
  mkdir(marks.c_str(), 0777);
  chmod(marks.c_str(), 0777);
  const std::string svc = Submit({{"name", "svc"}, {"class", "hp-inference"}, {"gpus", 8}, {"memory_mib", 256},
                                  {"command", "echo serving; while true; do sleep 0.1; done"},
                                  {"hooks", {{"standby_enter", "echo asleep; date +%s%3N > " + marks + "/entered"},
                                             {"standby_leave", "echo awake; date +%s%3N > " + marks + "/left"}}}});
  ASSERT_TRUE(WaitRunning(svc));
  // A spot job waits: the service holds every GPU.
  const std::string spot = Submit({{"name", "spot"}, {"class", "spot"}, {"gpus", 8}, {"memory_mib", 256},
                                   {"command", "echo spot on $CUDA_VISIBLE_DEVICES at $(date +%s%3N); while true; do sleep 0.1; done"}});
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(JobNow(spot)["state"], "pending");
  // A window of 12 s: the service sleeps (its enter hook), the spot job runs on its GPUs.
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  httplib::Client c("127.0.0.1", port_);
  auto w = c.Post("/v1/standby", testing::Bearer(testing::kTenantToken),
                  Json{{"job", svc}, {"to_ms", now_ms + 12000}, {"replicas", 1}}.dump(), "application/json");
  ASSERT_TRUE(w);
  ASSERT_EQ(w->status, 201) << w->body;
  ASSERT_TRUE(WaitRunning(spot));
  EXPECT_EQ(JobNow(svc)["standby_replicas"], 1);
  std::ifstream entered_file(marks + "/entered");
  int64_t entered = 0;
  ASSERT_TRUE(entered_file >> entered) << "the enter hook ran before the lend";
  std::string spot_log;
  EXPECT_TRUE(WaitFor([&] { return (spot_log = Logs(spot, 0)).find("spot on ") != std::string::npos; }));
  const size_t on = spot_log.find("spot on 0,1,2,3,4,5,6,7 at ");
  ASSERT_NE(on, std::string::npos) << spot_log;
  EXPECT_GE(std::stoll(spot_log.substr(on + 27)), entered) << "the spot job started after the service left its GPUs";
  // At the window's end the spot job is evicted and the service wakes (its leave hook).
  ASSERT_TRUE(WaitFor([&] { return std::ifstream(marks + "/left").good(); }, 30s));
  EXPECT_TRUE(WaitFor([&] { return JobNow(spot).value("running_replicas", -1) == 0; }));
  const Json s = JobNow(svc);
  EXPECT_EQ(s["state"], "running") << s.dump();
  EXPECT_EQ(s["standby_replicas"], 0) << s.dump();
  // Hooks write to the replica's log (which its agent sends on a little after the hook wrote it).
  std::string svc_log;
  EXPECT_TRUE(WaitFor([&] { return (svc_log = Logs(svc, 0)).find("awake") != std::string::npos; })) << svc_log;
  EXPECT_NE(svc_log.find("asleep"), std::string::npos) << svc_log;
  EXPECT_LT(svc_log.find("asleep"), svc_log.find("awake")) << svc_log;
}

TEST_F(RealAgentTest, AFailingStandbyEnterHookKeepsTheGpusWithTheServiceAndTheJobSaysWhy) {
  StartServe();
  StartRealAgent("node-a", testing::kAgentToken);
  WaitNodes(1);
  const std::string svc = Submit({{"name", "svc"}, {"class", "hp-inference"}, {"gpus", 8}, {"memory_mib", 256},
                                  {"command", "while true; do sleep 0.1; done"},
                                  {"hooks", {{"standby_enter", "echo cannot sleep; exit 4"}}}});
  ASSERT_TRUE(WaitRunning(svc));
  const std::string spot = Submit({{"name", "spot"}, {"class", "spot"}, {"gpus", 8}, {"memory_mib", 256},
                                   {"command", "while true; do sleep 0.1; done"}});
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  httplib::Client c("127.0.0.1", port_);
  auto w = c.Post("/v1/standby", testing::Bearer(testing::kTenantToken),
                  Json{{"job", svc}, {"to_ms", now_ms + 600000}, {"replicas", 1}}.dump(), "application/json");
  ASSERT_TRUE(w);
  ASSERT_EQ(w->status, 201) << w->body;
  ASSERT_TRUE(WaitFor([&] { return JobNow(svc).value("reason", "").find("did not enter Standby") != std::string::npos; }))
      << JobNow(svc).dump();
  EXPECT_NE(JobNow(svc).value("reason", "").find("standby_enter hook: exit code 4"), std::string::npos) << JobNow(svc).dump();
  std::this_thread::sleep_for(2s);  // nothing was lent, and it is not asked again
  EXPECT_EQ(JobNow(spot)["state"], "pending") << JobNow(spot).dump();
  EXPECT_EQ(JobNow(svc)["running_replicas"], 1);
  const std::string log = Logs(svc, 0);
  size_t tries = 0;
  for (size_t at = log.find("cannot sleep"); at != std::string::npos; at = log.find("cannot sleep", at + 1)) ++tries;
  EXPECT_EQ(tries, 1u) << log;
}

TEST_F(RealAgentTest, ALoudReplicasLogOnItsNodeKeepsOnlyWhatTheServiceDoesNotHaveYet) {
  StartServe();
  StartRealAgent("node-a", testing::kAgentToken);
  WaitNodes(1);
  // 6 MB of output, then it waits (its instance, and so its log file on the node, stays).
  const std::string id = Submit({{"name", "loud"}, {"memory_mib", 256},
                                 {"command", "head -c 6000000 /dev/zero | tr '\\0' x; echo; echo the end; sleep 60"}});
  ASSERT_TRUE(WaitRunning(id));
  // All of it, a part (1 MiB) per request.
  auto all_of_it = [&] {
    httplib::Client c("127.0.0.1", port_);
    std::string out;
    for (int64_t from = 0;;) {
      auto r = c.Get("/v1/jobs/" + id + "/logs?replica=0&from=" + std::to_string(from), testing::Bearer(testing::kTenantToken));
      if (!r || r->status != 200 || r->body.empty()) return out;
      out += r->body;
      from = std::stoll(r->get_header_value("X-Estuary-Next-Offset"));
    }
  };
  std::string file;
  struct stat st {};
  const bool shipped = WaitFor([&] {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_ + "/state-node-a/instances", ec)) file = e.path().string() + "/log";
    return !file.empty() && stat(file.c_str(), &st) == 0 && st.st_size >= 6000000 &&
           all_of_it().find("the end") != std::string::npos;
  });
  ASSERT_TRUE(shipped) << file;
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_GE(st.st_size, 6000000);                     // its offsets stay
  EXPECT_LE(st.st_blocks * 512, int64_t{2} << 20);     // its sent MiB left the disk
  const std::string log = all_of_it();
  EXPECT_EQ(std::count(log.begin(), log.end(), 'x'), 6000000);  // the service has all of it
}

TEST_F(RealAgentTest, AnEvacuatedNodesReplicaIsReadyOnAnotherNodeBeforeItsOldInstanceStops) {
  StartServe();
  StartRealAgent("node-a", testing::kAgentToken);
  StartRealAgent("node-b", "agent-b-token-0123456789");
  WaitNodes(2);
  const std::string id = Submit(
      {{"name", "moving"}, {"gpus", 4}, {"memory_mib", 256},
       {"command", R"sh(echo "start $(date +%s%3N) on $ESTUARY_NODE from=$ESTUARY_MIGRATED_FROM"
trap 'echo "stop $(date +%s%3N) on $ESTUARY_NODE"; exit 0' TERM
while true; do sleep 0.1; done)sh"},
       {"hooks", {{"ready", "sleep 1; echo ready $(date +%s%3N) on $ESTUARY_NODE"}}}});
  ASSERT_TRUE(WaitRunning(id));
  std::string first;
  ASSERT_TRUE(WaitFor([&] {
    const std::string log = Logs(id, 0);
    const size_t at = log.find(" on node-");
    if (log.find("start ") == std::string::npos || at == std::string::npos) return false;
    first = log.substr(at + 4, 6);
    return true;
  }));
  const std::string second = first == "node-a" ? "node-b" : "node-a";
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Post("/v1/nodes/" + first + "/evacuate", testing::Bearer(testing::kAdminToken), "", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status / 100, 2) << r->body;
  std::string log;
  ASSERT_TRUE(WaitFor([&] {
    log = Logs(id, 0);
    return log.find("stop ") != std::string::npos;
  })) << log;
  auto stamp = [&](const std::string& prefix) -> int64_t {
    const size_t at = log.find(prefix);
    return at == std::string::npos ? -1 : std::stoll(log.substr(at + prefix.size()));
  };
  const int64_t started = stamp("start ");
  const size_t again = log.find("from=" + first);
  ASSERT_NE(again, std::string::npos) << "the new instance knows where it came from\n" << log;
  const size_t new_start = log.rfind("start ", again);
  const int64_t new_started = std::stoll(log.substr(new_start + 6));
  const int64_t ready = stamp("ready ");
  const int64_t stopped = stamp("stop ");
  EXPECT_LT(started, new_started) << log;
  EXPECT_NE(log.find("on " + second + " from=" + first), std::string::npos) << log;
  EXPECT_NE(log.find("ready " + std::to_string(ready) + " on " + second), std::string::npos) << log;
  EXPECT_NE(log.find("stop " + std::to_string(stopped) + " on " + first), std::string::npos) << log;
  EXPECT_LE(new_started, ready) << log;
  EXPECT_LE(ready, stopped) << "make before break: the old instance stops only once the new one is ready\n" << log;
  EXPECT_TRUE(WaitRunning(id));
}

TEST_F(RealAgentTest, TheAgentFindsItsGpusThroughNvmlAndGrantsThemByUuidAndWithoutNvmlRegistersNoneAndSaysWhy) {
  StartServe();
  // The test double of libnvidia-ml.so.1 (tests/agent/test_nvml.cc) reports 4 H800s.
  setenv("LD_LIBRARY_PATH", ESTUARY_TEST_NVML_DIR, 1);
  setenv("ESTUARY_TEST_NVML_GPUS", "4", 1);
  StartRealAgent("gpu-node", testing::kAgentToken, {});
  unsetenv("LD_LIBRARY_PATH");
  StartRealAgent("cpu-node", "agent-b-token-0123456789", {});
  WaitNodes(2);
  httplib::Client c("127.0.0.1", port_);
  const Json nodes = Json::parse(c.Get("/v1/nodes", testing::Bearer(testing::kAdminToken))->body)["nodes"];
  std::map<std::string, Json> by_name;
  for (const Json& n : nodes) by_name[n["name"]] = n;
  EXPECT_EQ(by_name["gpu-node"]["gpus"], 4);
  EXPECT_EQ(by_name["gpu-node"]["gpu_model"], "H800");
  EXPECT_EQ(by_name["cpu-node"]["gpus"], 0);
  std::ifstream log(dir_ + "/agent-cpu-node.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("libnvidia-ml.so.1: cannot open shared object file"), std::string::npos) << text;

  const std::string id = Submit({{"name", "two-gpus"}, {"gpus", 2}, {"memory_mib", 256}, {"command", "echo gpus=$CUDA_VISIBLE_DEVICES"}});
  EXPECT_EQ(WaitEnded(id)["state"], "succeeded");
  const std::string out = Logs(id, 0);
  EXPECT_NE(out.find("gpus=GPU-00000000-0000-0000-0000-00000000000"), std::string::npos) << out;
}


// Runs `estuary ARGS` (a shell command line), its stdout and stderr together; the exit code in `rc`.
std::string Cli(const std::string& args, int* rc) {
  FILE* p = popen((std::string(ESTUARY_BINARY) + " " + args + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = pclose(p);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST_F(RealAgentTest, TheCommandLineClientSubmitsListsShowsFollowsLogsCancelsAndListsNodes) {
  StartServe();
  StartRealAgent("node-a", testing::kAgentToken);
  WaitNodes(1);
  const std::string server = "--server http://127.0.0.1:" + std::to_string(port_);
  const std::string as_tenant = server + " --token " + testing::kTenantToken;
  std::ofstream(dir_ + "/job.yaml") << "name: counter\ngpus: 1\nmemory_mib: 256\n"
                                       "command: \"for i in 1 2 3; do echo tick $i; sleep 0.3; done\"\n";
  int rc = 0;
  std::string out = Cli("submit " + dir_ + "/job.yaml " + as_tenant + " -o json", &rc);
  ASSERT_EQ(rc, 0) << out;
  const std::string id = Json::parse(out)["id"];
  // Logs followed to the end of the job (the command returns when the job has ended).
  out = Cli("logs " + id + " --follow " + as_tenant, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("tick 1\ntick 2\ntick 3\n"), std::string::npos) << out;
  out = Cli("job " + id + " " + as_tenant, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("job " + id + "  counter  succeeded  (tenant team-a)"), std::string::npos) << out;
  out = Cli("jobs --all " + as_tenant, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("ID"), std::string::npos);
  EXPECT_NE(out.find("\n" + id + "   counter  succeeded  0/1      1     0"), std::string::npos) << out;
  out = Cli("jobs " + as_tenant + " -o json", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(Json::parse(out)["jobs"].empty()) << out;  // nothing pending or running

  // A job read from standard input, cancelled while it runs; its table row, then its end.
  out = Cli("submit - " + as_tenant + " <<'EOF'\n{\"name\": \"sleeper\", \"command\": \"sleep 60\", \"memory_mib\": 64}\nEOF", &rc);
  ASSERT_EQ(rc, 0) << out;
  const std::string sleeper = out.substr(out.find("job ") + 4, out.find(' ', out.find("job ") + 4) - out.find("job ") - 4);
  EXPECT_EQ(out, "submitted job " + sleeper + " (sleeper)\n");
  out = Cli("cancel " + sleeper + " " + as_tenant, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out, "cancelled job " + sleeper + "\n");
  EXPECT_EQ(WaitEnded(sleeper)["state"], "cancelled");

  out = Cli("nodes " + server + " --token " + testing::kAdminToken, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("node-a"), std::string::npos) << out;
  EXPECT_NE(out.find("127.0.0.1"), std::string::npos) << out;

  // Bad input, a wrong token, a server that is not there: exit 2 and one line.
  std::ofstream(dir_ + "/bad.yaml") << "name: bad\ngpus: 1\nenv: [\"NOEQUALS\"]\n";
  out = Cli("submit " + dir_ + "/bad.yaml " + as_tenant, &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "estuary: " + dir_ + "/bad.yaml:3: field 'env[0]': expected NAME=VALUE, not 'NOEQUALS'\n");
  out = Cli("jobs " + server + " --token wrong-token-0123456789", &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_EQ(out.rfind("estuary: HTTP 401", 0), 0u) << out;
  out = Cli("jobs --server http://127.0.0.1:1 --token x", &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out.rfind("estuary: cannot reach http://127.0.0.1:1", 0), 0u) << out;
  out = Cli("job 999999 " + as_tenant, &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "estuary: HTTP 404: no job 999999\n");
  unsetenv("ESTUARY_SERVER");
  unsetenv("ESTUARY_TOKEN");
  setenv("ESTUARY_CLIENT_CONFIG", "/nonexistent-estuary-client", 1);
  out = Cli("jobs", &rc);  // no server anywhere
  EXPECT_EQ(out, "estuary: no server: give --server URL, ESTUARY_SERVER or server= in the client file\n");
  EXPECT_EQ(rc, 2);
}


TEST(AgentFlags, BadFlagsOfARealAgentGiveOneLineAndExitTwo) {
  const std::string base = "agent --server http://127.0.0.1:1 --token t ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "estuary: agent: give --node NAME (a real node) or --fake-nodes N\n"},
      {"--node 'bad name'", "estuary: --node: 'bad name' is not 1 to 128 characters of [A-Za-z0-9._-]\n"},
      {"--node n --run-as alice", "estuary: --run-as: 'alice' is not TENANT=USER\n"},
      {"--node n --domains data", "estuary: --domains: 'data' is not PLANE=TOP/.../BOTTOM\n"},
      {"--node n --gpus 17", ""},  // CLI11's range message
      {"--node n --fake-nodes 2", ""},
      {"--node n --state /proc/estuary-no", "estuary: --state: /proc/estuary-no: "},
  };
  for (const auto& [flags, message] : cases) {
    int rc = 0;
    const std::string out = Cli(base + flags, &rc);
    EXPECT_EQ(rc, 2) << flags << ": " << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << flags << ": " << out;
    if (!message.empty()) {
      EXPECT_EQ(out.substr(0, message.size()), message) << flags;
    }
  }
  int rc = 0;
  const std::string out = Cli("agent --server ftp://x --token t --node n", &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "estuary: --server: 'ftp://x' is not an http:// or https:// URL\n");
}


// Multi-tenant queues (issue 20) through the API, with real agents: team-a and team-b each have a
// queue guaranteed one node of the two. team-b's two jobs borrow team-a's idle node; when team-a
// submits, team-b's newest job gets its grace period (SIGTERM), stops, and team-a's job runs —
// seen by both tenants in GET /v1/queues and `estuary queues`. A tenant above its queue's ceiling,
// in another's queue, or changing queues is refused; an admin's change by `estuary queues --set`
// is stored and holds after a kill -9 of the service: team-a then takes the second node too.
TEST_F(RealAgentTest, TwoTenantsInTheirQueuesSeeAReclaimThroughTheApiAndAnAdminsQueueChangeOutlivesAKillDashNine) {
  std::ofstream(dir_ + "/conf.yaml")
      << "{name: queues, queue: priority, preempt: {grace_s: 2}, absorb: true,\n"
         " queues: [{name: a, guarantee: {gpus: 8}, max_priority: 500, tenants: [team-a]},\n"
         "          {name: b, guarantee: {gpus: 8}, tenants: [team-b]}]}\n";
  StartServe({"--config", dir_ + "/conf.yaml"});
  StartRealAgent("node-a", testing::kAgentToken);
  StartRealAgent("node-b", "agent-b-token-0123456789");
  WaitNodes(2);
  const auto job = [](const std::string& name, int priority = 300) {
    return Json{{"name", name}, {"gpus", 8}, {"memory_mib", 256}, {"priority", priority}, {"preemptible", true},
                {"command", "sleep 600"}};
  };
  const std::string b1 = Submit(job("b1"), kOtherTenantToken);
  ASSERT_TRUE(WaitRunning(b1));
  const std::string b2 = Submit(job("b2"), kOtherTenantToken);
  ASSERT_TRUE(WaitRunning(b2));
  EXPECT_EQ(JobNow(b2)["queue"], "b");  // team-b may use b only: its jobs run there
  httplib::Client c("127.0.0.1", port_);
  // Refused: above a's ceiling, in b's queue.
  auto r = c.Post("/v1/jobs", testing::Bearer(testing::kTenantToken), job("hp", 900).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(Json::parse(r->body)["error"], "field 'priority': 900 is above the ceiling of queue 'a' (max_priority 500)");
  Json into_b = job("sneaky");
  into_b["queue"] = "b";
  r = c.Post("/v1/jobs", testing::Bearer(testing::kTenantToken), into_b.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(Json::parse(r->body)["error"], "field 'queue': tenant 'team-a' may not submit to queue 'b'");
  // team-a takes its guarantee back: one of b's jobs is evicted after the 2 s grace.
  const std::string a1 = Submit(job("a1"));
  ASSERT_TRUE(WaitRunning(a1)) << JobNow(a1).dump();
  const bool first = JobNow(b1)["state"] == "pending";
  const std::string evicted = first ? b1 : b2, kept = first ? b2 : b1;
  EXPECT_EQ(JobNow(evicted)["state"], "pending");
  EXPECT_EQ(JobNow(evicted)["restarts"], 1);
  EXPECT_EQ(JobNow(kept)["state"], "running");
  const auto queues = [&](const char* token) {
    auto g = c.Get("/v1/queues", testing::Bearer(token));
    EXPECT_TRUE(g && g->status == 200) << (g ? g->body : "no answer");
    return g && g->status == 200 ? Json::parse(g->body)["queues"] : Json::array();
  };
  Json seen = queues(kOtherTenantToken);  // team-b sees its own queue only
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0]["name"], "b");
  EXPECT_EQ(seen[0]["gpus"]["held"], 8);
  EXPECT_EQ(seen[0]["jobs"]["waiting"], 1);
  seen = queues(testing::kTenantToken);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0]["gpus"]["held"], 8);
  EXPECT_EQ(seen[0]["gpus"]["guaranteed"], 8);
  int rc = 0;
  const std::string server = "--server http://127.0.0.1:" + std::to_string(port_);
  std::string out = Cli("queues " + server + " --token " + testing::kTenantToken, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out,
            "QUEUE  HELD  GUARANTEED  LIMIT  FAIR  BORROWED  LENT  PENDING  WAITING  RUNNING  TENANTS\n"
            "a      8     8           -      8     0         0     0        0        1        team-a\n");
  // Only an admin changes queues; bad input is refused naming the file, line and field.
  r = c.Put("/v1/queues", testing::Bearer(testing::kTenantToken), R"({"queues": []})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  std::ofstream(dir_ + "/bad.yaml") << "queues:\n  - {name: a, guarantee: {gpus: 16}}\n  - {name: b, guarantee: {gpus: -1}}\n";
  out = Cli("queues " + server + " --token " + testing::kAdminToken + " --set " + dir_ + "/bad.yaml", &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "estuary: " + dir_ + "/bad.yaml:3: field 'queues[1].guarantee.gpus': -1 is below 0\n");
  r = c.Put("/v1/queues", testing::Bearer(testing::kAdminToken),
            R"({"queues": [{"name": "org", "guarantee": {"gpus": 8}}, {"name": "a", "parent": "org", "guarantee": {"gpus": 16}}]})",
            "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(Json::parse(r->body)["error"], "queue 'a': field 'guarantee': the children of 'org' are guaranteed 16 GPUs, above its own 8");
  std::ofstream(dir_ + "/good.yaml") << "queues:\n  - {name: a, guarantee: {gpus: 16}, max_priority: 500, tenants: [team-a]}\n"
                                        "  - {name: b, tenants: [team-b]}\nsharing: {cooldown_s: 0}\n";
  out = Cli("queues " + server + " --token " + testing::kAdminToken + " --set " + dir_ + "/good.yaml -o json", &rc);
  ASSERT_EQ(rc, 0) << out;
  // kill -9, and the service comes back with the admin's queues, not the configuration's.
  testing::StopProcess(serve_, SIGKILL);
  serve_ = -1;
  StartServe({"--config", dir_ + "/conf.yaml"});
  seen = queues(testing::kAdminToken);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0]["gpus"]["guaranteed"], 16);
  EXPECT_EQ(seen[1]["gpus"]["guaranteed"], 0);
  // a is owed both nodes now: its second job takes b1's node after the grace period.
  const std::string a2 = Submit(job("a2"));
  ASSERT_TRUE(WaitRunning(a2)) << JobNow(a2).dump();
  EXPECT_EQ(JobNow(a1)["state"], "running");
  EXPECT_EQ(JobNow(kept)["state"], "pending");
  seen = queues(testing::kAdminToken);
  EXPECT_EQ(seen[0]["gpus"]["held"], 16);
  EXPECT_EQ(seen[1]["jobs"]["waiting"], 2);
}

}  // namespace
}  // namespace estuary
