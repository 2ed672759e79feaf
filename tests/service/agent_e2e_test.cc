// Real workloads (issue 19): `estuary serve` and real node agents (`estuary agent --node`, two
// node names on this machine, each with its own agent token and state) as processes; jobs whose
// commands are small scripts run as real processes, as the tenant's Unix user, and what they
// print is read back through the service.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

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
    ServiceProcessTest::TearDown();
  }

  // A real agent for node `name` (8 GPUs declared: no NVML here) on loopback.
  void StartRealAgent(const std::string& name, const std::string& token) {
    const pid_t pid = testing::Spawn(ESTUARY_BINARY,
                                     {"agent", "--server", "http://127.0.0.1:" + std::to_string(port_), "--token", token,
                                      "--node", name, "--gpus", "8", "--gpu-model", "H800", "--address", "127.0.0.1",
                                      "--domains", "data=az0/spine0/asw0,param=pod0", "--state", dir_ + "/state-" + name,
                                      "--run-as", "team-a=" + user_ + ",team-b=" + user_, "--heartbeat-s", "1",
                                      "--kill-wait-s", "2"},
                                     dir_ + "/agent-" + name + ".log");
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

  std::string Script(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << text;
    chmod(path.c_str(), 0755);
    return path;
  }

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

}  // namespace
}  // namespace estuary
