// EtcdTestCluster: real etcd processes (the etcd-server package's /usr/bin/etcd, or whatever the
// build found as ESTUARY_ETCD_BINARY) for the etcd tests — one member or a cluster of several, each
// on free loopback ports with its data in a fresh directory under /tmp, started with
// --max-txn-ops 10000 and --max-request-bytes 10485760 (as the service must start etcd). It never
// uses an etcd the machine may run as a system service.
// Stop() (and the destructor) kills every member with SIGKILL and removes the directory; a member
// also dies with the test process (PR_SET_PDEATHSIG).
// Thread-safety: none; one test thread drives it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace estuary::testing_etcd {

struct EtcdTestClusterOptions {
  int members = 1;
  // Extra etcd flags for every member, e.g. {"--max-txn-ops", "128"} to override a default.
  std::vector<std::string> extra_flags;
  // How long Start waits for every member to answer a linearizable read. Default 30 s.
  int start_timeout_ms = 30000;
};

class EtcdTestCluster {
 public:
  EtcdTestCluster() = default;
  ~EtcdTestCluster() { Stop(); }
  EtcdTestCluster(const EtcdTestCluster&) = delete;
  EtcdTestCluster& operator=(const EtcdTestCluster&) = delete;

  // Starts the members and waits until each answers. Returns "" on success, else what went wrong
  // (with the tail of the members' logs).
  std::string Start(EtcdTestClusterOptions options = {});
  // Kills every member still running and removes the data directory.
  void Stop();

  // The members' client URLs, "http://127.0.0.1:PORT", in member order.
  std::vector<std::string> endpoints() const;
  int size() const { return static_cast<int>(members_.size()); }
  // Kills member `i` with SIGKILL and waits for it to exit.
  void Kill(int i);
  // The index of the member that is raft leader now, or -1 when no live member knows one.
  int LeaderIndex() const;
  // The last bytes of every member's log, for failure messages.
  std::string LogTails() const;

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    std::string log_path;
    pid_t pid = -1;
    std::string member_id;  // etcd's id, as /v3/maintenance/status reports it
  };
  std::string dir_;
  std::vector<Member> members_;
};

// POSTs `body` (JSON text) to `endpoint` (a client URL) + `path`; returns the answer's body, or ""
// when there is no answer or its status is not 200.
std::string PostJson(const std::string& endpoint, const std::string& path, const std::string& body,
                     int timeout_ms = 2000);

}  // namespace estuary::testing_etcd
