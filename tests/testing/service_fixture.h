// A test fixture that runs the estuary binary as a service: `estuary serve` on a free loopback
// port with its SQLite state in a fresh directory, and `estuary agent --fake-nodes N` against
// it (tests/service, tests/dashboard). Tokens: admin, tenant "team-a", agent "rack-1". TearDown
// stops both (SIGTERM), prints their logs when the test failed, and removes the directory.
// Requires ESTUARY_BINARY (the estuary_test() CMake function defines it) and cpp-httplib.
#pragma once

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "tests/testing/processes.h"

namespace estuary::testing {

inline constexpr char kAdminToken[] = "admin-token-0123456789";
inline constexpr char kTenantToken[] = "tenant-token-012345678";
inline constexpr char kAgentToken[] = "agent-token-0123456789";

inline httplib::Headers Bearer(const char* token) { return {{"Authorization", std::string("Bearer ") + token}}; }

class ServiceProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/estuary-service-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/tokens") << kAdminToken << " admin ops\n"
                                    << kTenantToken << " tenant team-a\n"
                                    << kAgentToken << " agent rack-1\n";
    port_ = FreePort();
  }
  void TearDown() override {
    StopProcess(agent_, SIGTERM);
    StopProcess(serve_, SIGTERM);
    if (HasFailure()) {
      for (const char* f : {"/serve.log", "/agent.log"}) {
        std::ifstream in(dir_ + f);
        std::string line;
        for (int n = 0; std::getline(in, line) && n < 40; ++n) std::fprintf(stderr, "%s: %s\n", f, line.c_str());
      }
    }
    std::filesystem::remove_all(dir_);
  }
  // Starts the service and waits until it answers.
  // `extra`: more flags (e.g. --config FILE).
  void StartServe(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"serve", "--listen", "127.0.0.1:" + std::to_string(port_), "--data", dir_ + "/data",
                                     "--tokens", dir_ + "/tokens", "--heartbeat-timeout-s", heartbeat_timeout_s_};
    args.insert(args.end(), extra.begin(), extra.end());
    serve_ = Spawn(ESTUARY_BINARY, args, dir_ + "/serve.log");
    ASSERT_GT(serve_, 0);
    httplib::Client c("127.0.0.1", port_);
    for (int i = 0; i < 200; ++i) {
      if (auto r = c.Get("/v1/openapi.json"); r && r->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "the service did not come up";
  }
  // Starts a fake agent of `nodes` 8-GPU nodes named PREFIX-nNNNNNN.
  void StartAgent(int nodes, const std::string& prefix) {
    agent_ = Spawn(ESTUARY_BINARY,
                   {"agent", "--server", "http://127.0.0.1:" + std::to_string(port_), "--token", kAgentToken,
                    "--fake-nodes", std::to_string(nodes), "--gpus-per-node", "8", "--prefix", prefix},
                   dir_ + "/agent.log");
    ASSERT_GT(agent_, 0);
  }

  std::string dir_;
  std::string heartbeat_timeout_s_ = "60";  // StartServe's --heartbeat-timeout-s
  int port_ = 0;
  pid_t serve_ = -1, agent_ = -1;
};

}  // namespace estuary::testing
