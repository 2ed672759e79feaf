// EtcdStore: the Store on an etcd cluster (issue 7's multi-replica backend), spoken to through
// etcd's v3 JSON gateway (etcd_client.h). Every Store key K is the etcd key PREFIX + K
// (EtcdStoreOptions::prefix, default "estuary/"); the value is stored as is.
//
//   Apply  one etcd transaction holding every put and delete of the batch (a later change to the
//          same key wins), so a batch is all-or-nothing; with a fence (below) the transaction
//          first compares the fence key's create_revision. A batch is never split: etcd refuses a
//          transaction of more than --max-txn-ops operations (default 128) or a request over
//          --max-request-bytes (default 1.5 MiB), and Apply then fails with InvalidArgument
//          naming the flag, changing nothing. The service must start etcd with, e.g.,
//          --max-txn-ops 10000 --max-request-bytes 10485760.
//   Get    one linearizable range read of the key.
//   Scan   linearizable range reads over [PREFIX + prefix, its successor), scan_page_size keys
//          each, every page read at the revision of the first: one consistent snapshot, in key
//          order.
// Durability: an Apply that returned OK is committed by a majority of the etcd members, each of
// which fsyncs its log (do not run etcd with --unsafe-no-fsync).
//
// The etcd flags the service needs (etcd 3.4): --max-txn-ops and --max-request-bytes above its
// largest batch (above); --auto-compaction-mode periodic --auto-compaction-retention 1h (or
// similar), as etcd keeps every old revision otherwise and turns read-only (alarm NOSPACE) at
// --quota-backend-bytes (default 2 GiB) — a retention much longer than one Scan, since a Scan
// whose pinned revision is compacted away fails with Internal "required revision has been
// compacted"; three members for a cluster that survives the loss of one.
//
// Fencing: with EtcdStoreOptions::fence set to the leader key and the create_revision its
// election returned (LeaderElection::Campaign, etcd_election.h), every Apply succeeds only while
// that key still exists with that create_revision — a deposed leader (its lease expired, another
// replica created the key anew) can never write. Such an Apply fails with Unavailable "... lost
// leadership ..." and changes nothing. Get and Scan are not fenced.
//
// Keys are any bytes but NUL (as SqliteStore: a batch with a key containing NUL fails with
// InvalidArgument and changes nothing; Get and Scan of such a key or prefix find nothing).
// Values are any bytes, NUL included; an empty value is stored (it is not a delete).
// Errors: Unavailable when no endpoint answers within request_timeout_ms (every call retries on the
// other endpoints first, see etcd_client.h); Internal for other refusals.
// Thread-safety: safe to call from several threads. Scan calls fn with no lock held (fn may call
// the store).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "store/etcd_client.h"
#include "store/store.h"

namespace estuary {

// A leader's proof of office: etcd key `key` (a raw etcd key, not under the store's prefix) with
// create_revision `create_revision`.
struct EtcdFence {
  std::string key;
  int64_t create_revision = 0;
};

struct EtcdStoreOptions {
  // The cluster's client URLs and timeouts (see EtcdConnection for their defaults).
  EtcdConnection etcd;
  // Every Store key lives under this etcd key prefix. Default "estuary/". Must not be empty.
  std::string prefix = "estuary/";
  // Keys per range request of a Scan. Default 1000.
  int scan_page_size = 1000;
  // Default none: Apply is not fenced.
  std::optional<EtcdFence> fence;
};

class EtcdStore final : public Store {
 public:
  // Checks the options and that etcd answers (one range read).
  // Errors: InvalidArgument for bad options (no endpoint, a malformed URL, an empty prefix or
  // fence key, a page size below 1); Unavailable when no endpoint answers.
  static StatusOr<std::unique_ptr<EtcdStore>> Open(EtcdStoreOptions options);
  ~EtcdStore() override;
  EtcdStore(const EtcdStore&) = delete;
  EtcdStore& operator=(const EtcdStore&) = delete;

  Status Apply(const StoreBatch& batch) override;
  StatusOr<std::optional<std::string>> Get(std::string_view key) override;
  Status Scan(std::string_view prefix,
              const std::function<bool(std::string_view key, std::string_view value)>& fn) override;

  const EtcdStoreOptions& options() const { return options_; }

 private:
  EtcdStore(EtcdStoreOptions options, std::unique_ptr<EtcdClient> client);
  EtcdStoreOptions options_;
  std::unique_ptr<EtcdClient> client_;
};

}  // namespace estuary
