// EtcdTestCluster (see etcd_test_cluster.h).
//
// Start, in order (up to three tries, in case another process took a port meanwhile):
//   1. pick two free loopback ports per member (bind port 0, read it back, all sockets open at
//      once so no two picks collide, closed just before etcd starts);
//   2. fork + exec one etcd per member, stdout and stderr into DIR/NAME.log;
//   3. until the deadline: every member answers a linearizable /v3/kv/range (so the cluster has
//      a raft leader), then ask each for its member id (/v3/maintenance/status).
#include "etcd_test_cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#ifndef ESTUARY_ETCD_BINARY
#define ESTUARY_ETCD_BINARY "/usr/bin/etcd"
#endif

namespace estuary::testing_etcd {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// A socket bound to a free loopback port; the port stays taken while the socket is open.
struct PortHold {
  int fd = -1;
  int port = 0;
};

PortHold HoldFreePort() {
  PortHold h;
  h.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (h.fd < 0 || ::bind(h.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(h.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (h.fd >= 0) ::close(h.fd);
    return PortHold{};
  }
  h.port = ntohs(addr.sin_port);
  return h;
}

std::string Url(int port) { return "http://127.0.0.1:" + std::to_string(port); }

bool Exited(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, WNOHANG) == pid;
}

}  // namespace

std::string PostJson(const std::string& endpoint, const std::string& path, const std::string& body, int timeout_ms) {
  httplib::Client c(endpoint);
  c.set_connection_timeout(std::chrono::milliseconds(timeout_ms));
  c.set_read_timeout(std::chrono::milliseconds(timeout_ms));
  c.set_write_timeout(std::chrono::milliseconds(timeout_ms));
  const httplib::Result r = c.Post(path, body, "application/json");
  if (!r || r->status != 200) return "";
  return r->body;
}

std::string EtcdTestCluster::Start(EtcdTestClusterOptions options) {
  if (!std::filesystem::exists(ESTUARY_ETCD_BINARY)) {
    return std::string("etcd binary ") + ESTUARY_ETCD_BINARY + " not found (install etcd-server: scripts/setup.sh)";
  }
  std::string failure;
  for (int attempt = 0; attempt < 3; ++attempt) {
    Stop();
    char tmpl[] = "/tmp/estuary-etcd-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return "mkdtemp failed";
    dir_ = tmpl;

    // 1. Ports.
    std::vector<PortHold> holds;
    members_.assign(static_cast<size_t>(options.members), Member{});
    for (int i = 0; i < options.members; ++i) {
      Member& m = members_[static_cast<size_t>(i)];
      m.name = "m" + std::to_string(i);
      m.log_path = dir_ + "/" + m.name + ".log";
      holds.push_back(HoldFreePort());
      holds.push_back(HoldFreePort());
      m.client_port = holds[holds.size() - 2].port;
      m.peer_port = holds.back().port;
    }
    std::string initial_cluster;
    for (const Member& m : members_) {
      initial_cluster += (initial_cluster.empty() ? "" : ",") + m.name + "=" + Url(m.peer_port);
    }
    for (const PortHold& h : holds) {
      if (h.fd >= 0) ::close(h.fd);
    }

    // 2. Processes.
    for (Member& m : members_) {
      std::vector<std::string> args = {ESTUARY_ETCD_BINARY,
                                       "--name", m.name,
                                       "--data-dir", dir_ + "/" + m.name + ".etcd",
                                       "--listen-client-urls", Url(m.client_port),
                                       "--advertise-client-urls", Url(m.client_port),
                                       "--listen-peer-urls", Url(m.peer_port),
                                       "--initial-advertise-peer-urls", Url(m.peer_port),
                                       "--initial-cluster", initial_cluster,
                                       "--initial-cluster-state", "new",
                                       "--initial-cluster-token", std::filesystem::path(dir_).filename().string(),
                                       "--max-txn-ops", "10000",
                                       "--max-request-bytes", "10485760",
                                       "--logger", "zap",
                                       "--log-outputs", "stderr"};
      args.insert(args.end(), options.extra_flags.begin(), options.extra_flags.end());
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      const int log_fd = ::open(m.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (log_fd < 0) return "cannot create " + m.log_path;
      const pid_t pid = ::fork();
      if (pid == 0) {
        // The child: async-signal-safe calls only.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        ::dup2(log_fd, STDOUT_FILENO);
        ::dup2(log_fd, STDERR_FILENO);
        ::execv(argv[0], argv.data());
        ::_exit(127);
      }
      ::close(log_fd);
      if (pid < 0) return "fork failed";
      m.pid = pid;
    }

    // 3. Wait for every member to answer, then learn the member ids.
    const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(options.start_timeout_ms);
    failure.clear();
    for (Member& m : members_) {
      while (true) {
        if (Exited(m.pid)) {
          m.pid = -1;
          failure = "etcd member " + m.name + " exited during start";
          break;
        }
        const std::string range = PostJson(Url(m.client_port), "/v3/kv/range", R"({"key":"cHJvYmU="})", 1000);
        if (range.find("\"header\"") != std::string::npos) {
          const Json status = Json::parse(PostJson(Url(m.client_port), "/v3/maintenance/status", "{}", 2000),
                                          nullptr, false);
          if (status.is_object() && status.contains("header")) {
            m.member_id = status["header"].value("member_id", "");
            break;
          }
        }
        if (Clock::now() > deadline) {
          failure = "etcd member " + m.name + " did not answer within " +
                    std::to_string(options.start_timeout_ms) + " ms";
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (!failure.empty()) break;
    }
    if (failure.empty()) return "";
    failure += "\n" + LogTails();
  }
  Stop();
  return failure;
}

void EtcdTestCluster::Stop() {
  for (Member& m : members_) {
    if (m.pid > 0) Kill(static_cast<int>(&m - members_.data()));
  }
  members_.clear();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    dir_.clear();
  }
}

std::vector<std::string> EtcdTestCluster::endpoints() const {
  std::vector<std::string> out;
  for (const Member& m : members_) out.push_back(Url(m.client_port));
  return out;
}

void EtcdTestCluster::Kill(int i) {
  Member& m = members_.at(static_cast<size_t>(i));
  if (m.pid <= 0) return;
  ::kill(m.pid, SIGKILL);
  int status = 0;
  ::waitpid(m.pid, &status, 0);
  m.pid = -1;
}

int EtcdTestCluster::LeaderIndex() const {
  for (const Member& m : members_) {
    if (m.pid <= 0) continue;
    const Json status = Json::parse(PostJson(Url(m.client_port), "/v3/maintenance/status", "{}", 2000), nullptr, false);
    if (!status.is_object()) continue;
    const std::string leader = status.value("leader", "");
    for (size_t j = 0; j < members_.size(); ++j) {
      if (!leader.empty() && members_[j].member_id == leader && members_[j].pid > 0) return static_cast<int>(j);
    }
  }
  return -1;
}

std::string EtcdTestCluster::LogTails() const {
  std::ostringstream out;
  for (const Member& m : members_) {
    std::ifstream in(m.log_path);
    std::stringstream all;
    all << in.rdbuf();
    const std::string text = all.str();
    out << "--- " << m.name << " (" << m.log_path << ") ---\n"
        << text.substr(text.size() > 3000 ? text.size() - 3000 : 0);
  }
  return out.str();
}

}  // namespace estuary::testing_etcd
