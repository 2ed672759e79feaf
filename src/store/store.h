// Store: the service's durable state (issue 7) as an ordered key-value map with atomic batches —
// the shape both backends share: embedded SQLite (SqliteStore, the default) and etcd's v3 API
// (later). Keys are UTF-8 strings ordered bytewise ("job/00000000000042", "node/gpu-0001", ...);
// values are opaque bytes (the service stores JSON).
//
// Durability contract: when Apply returns OK, every put and delete of the batch is stored and
// survives a crash of the process (kill -9); a batch is all-or-nothing — after a crash either
// every change of it is visible or none. Load-after-crash sees exactly the batches that returned
// OK (and possibly the one in flight, whole or not at all).
// Thread-safety: implementations are safe to call from several threads (each call is atomic);
// the service still orders its batches itself.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace estuary {

// One atomic change: puts and deletes, applied in order (a later change to the same key wins).
struct StoreBatch {
  struct Change {
    std::string key;
    std::optional<std::string> value;  // nullopt: delete the key (absent keys are fine)
  };
  std::vector<Change> changes;

  void Put(std::string key, std::string value) { changes.push_back({std::move(key), std::move(value)}); }
  void Delete(std::string key) { changes.push_back({std::move(key), std::nullopt}); }
  bool empty() const { return changes.empty(); }
};

class Store {
 public:
  virtual ~Store() = default;
  // Applies `batch` atomically and durably (see the contract above). An empty batch is OK.
  virtual Status Apply(const StoreBatch& batch) = 0;
  // The value of `key`, or nullopt when absent.
  virtual StatusOr<std::optional<std::string>> Get(std::string_view key) = 0;
  // Calls fn(key, value) for every key starting with `prefix` (the empty prefix: every key), in
  // key order. Stops early (and returns OK) when fn returns false. The views are valid only
  // during the call.
  virtual Status Scan(std::string_view prefix,
                      const std::function<bool(std::string_view key, std::string_view value)>& fn) = 0;
};

}  // namespace estuary
