// LeaderElection: which of the service's replicas leads (issue 7, multi-replica), decided in etcd.
// The leader is whoever holds etcd key `key`, attached to a lease of ttl_s seconds that the
// leader refreshes; the key's create_revision identifies the term, and the leader passes it to its
// EtcdStore as the fence (etcd_store.h), so once a replica is deposed none of its writes land.
//
// Campaign, in order:
//   1. read the key; while someone holds it, read it again every poll_ms (the holder's key goes
//      away when it resigns — its lease is revoked — or when its lease expires, ttl_s after its
//      last refresh);
//   2. the key is absent: grant a lease of ttl_s seconds and run one transaction "if the key's
//      create_revision is 0 (absent) put key = identity with that lease"; on success this replica
//      leads and Campaign returns the key's create_revision; otherwise revoke the lease, go to 1.
// While leading, a thread refreshes the lease every ttl_s / 3 seconds (lease/keepalive) and checks
// that the key still carries this term's create_revision. Leadership is lost — is_leader() turns
// false and on_lost(why) runs once, on that thread — when etcd says the lease is gone, when the key
// was deleted or replaced, or when no refresh reached etcd for a whole TTL (counted from before
// the last successful refresh was sent, so this replica gives up before etcd would expire the
// lease, give or take scheduling delays).
// NOTE: is_leader() is this replica's belief and may lag etcd by up to ttl_s; the fence is what
// makes a deposed leader's writes fail.
//
// Takeover after a leader crashes: at most ttl_s (its lease expiring; etcd checks expiry every
// 500 ms) + poll_ms + two requests — about 3.5 s with the defaults. After Resign: about poll_ms.
//
// Thread-safety: Campaign, Resign and the destructor must not run concurrently with each other;
// is_leader, fence and Leader may be called from any thread at any time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "store/etcd_client.h"
#include "store/etcd_store.h"

namespace estuary {

struct LeaderElectionOptions {
  // The cluster's client URLs and timeouts (see EtcdConnection for their defaults).
  EtcdConnection etcd;
  // The leader key (a raw etcd key). Default "estuary-leader": outside EtcdStoreOptions::prefix's
  // default "estuary/", so a Scan of the whole store never sees it.
  std::string key = "estuary-leader";
  // What Leader() tells the others about this replica, e.g. its advertised URL. Required.
  std::string identity;
  // The lease's time to live in seconds: how long a crashed leader keeps office. Default 3; at
  // least 2 (etcd's minimum lease TTL with its default election timeout).
  int ttl_s = 3;
  // How often a campaigning replica looks at the key. Default 200 ms.
  int poll_ms = 200;
  // Called once, on the keepalive thread, when leadership is lost (not after Resign), with the
  // reason. Default none. NOTE: it must return quickly and must not call Resign, Campaign or the
  // destructor of this election.
  std::function<void(const std::string& why)> on_lost;
};

class LeaderElection {
 public:
  // Errors: InvalidArgument for bad options (see EtcdClient::Create; an empty key or identity,
  // ttl_s below 2, poll_ms below 1). Does not contact etcd.
  static StatusOr<std::unique_ptr<LeaderElection>> Create(LeaderElectionOptions options);
  // Stops refreshing the lease but does NOT resign: the key stays until the lease expires (as if
  // the process had crashed). Call Resign() first for a fast handover.
  ~LeaderElection();
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  // Blocks until this replica leads and returns the leader key's create_revision (this term's
  // fence), or returns at once with it when already leading. While etcd cannot be reached it keeps
  // trying. Errors: Unavailable "campaign stopped" once `stop` is true (checked at least every
  // poll_ms, and after each request, which takes at most request_timeout_ms); other refusals of
  // etcd (Internal, InvalidArgument) at once.
  StatusOr<int64_t> Campaign(const std::atomic<bool>& stop);

  // True from a successful Campaign until leadership is lost or resigned.
  bool is_leader() const { return leader_.load(); }

  // The fence of the current (or last) term: {key, the create_revision Campaign returned}.
  EtcdFence fence() const;

  // Steps down: stops the refreshes and revokes the lease, which deletes the key at once (the next
  // replica leads within about poll_ms). OK when not leading. Errors: Unavailable when etcd cannot
  // be reached (the lease then expires by itself within ttl_s).
  Status Resign();

  // The identity of the current leader (read from etcd), or nullopt when none. Errors: as
  // EtcdClient::Call.
  StatusOr<std::optional<std::string>> Leader();

  const LeaderElectionOptions& options() const { return options_; }

 private:
  // The holder of the key as etcd has it.
  struct Holder {
    std::string identity;
    int64_t create_revision = 0;
    int64_t lease = 0;
  };
  LeaderElection(LeaderElectionOptions options, std::unique_ptr<EtcdClient> client);
  StatusOr<std::optional<Holder>> ReadKey(int timeout_ms = 0);
  // Step 2 of Campaign: true when this replica now leads.
  StatusOr<bool> TryAcquire();
  void RevokeQuietly(int64_t lease);
  void KeepaliveLoop(int64_t lease, int64_t revision, std::chrono::steady_clock::time_point deadline);
  void StopKeepalive();

  const LeaderElectionOptions options_;
  const std::unique_ptr<EtcdClient> client_;
  std::atomic<bool> leader_{false};
  std::atomic<int64_t> revision_{0};
  int64_t lease_ = 0;  // the current term's lease; 0 when none (Campaign/Resign only)

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_keepalive_ = false;  // guarded by mu_
  std::thread keepalive_;
};

}  // namespace estuary
