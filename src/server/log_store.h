// LogStore: the service's copy of its replicas' output (issue 19). Agents send each instance's
// log in order (POST /v1/agent/logs: task, node, run, offset, bytes); the store appends what it
// has not seen to the replica's file DIR/<job>/<replica>.log, starting each new run with a line
// "[estuary] replica R on NODE (run T)". Sends are idempotent: bytes before what a run already
// gave are skipped, so an agent that sends again after a timeout or a restart duplicates nothing
// (within one service process; after a service restart a resent part may repeat). A replica's
// file is rotated at max_bytes to <replica>.log.1 (the older rotation is dropped), so a replica
// keeps at most twice max_bytes. Read returns the retained log from a byte offset of it;
// RemoveJob drops a job's logs (when the service retires the job).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>

#include "common/status.h"

namespace estuary {

class LogStore {
 public:
  // REQUIRES: `dir` exists or can be created. max_bytes > 0.
  LogStore(std::string dir, int64_t max_bytes);

  Status Append(uint64_t job, int32_t replica, const std::string& node, int64_t run, int64_t offset, std::string_view data);

  struct Chunk {
    std::string data;
    int64_t next = 0;  // the offset to read from next (of the retained log)
  };
  // Up to `max` bytes of replica `replica`'s retained log (its rotation, then its file) from
  // `from`. A `from` beyond the end (the log was rotated since) starts again at 0.
  Chunk Read(uint64_t job, int32_t replica, int64_t from, int64_t max) const;

  void RemoveJob(uint64_t job);

 private:
  std::string Path(uint64_t job, int32_t replica) const;
  std::string dir_;
  int64_t max_bytes_;
  mutable std::mutex mu_;
  std::map<std::tuple<uint64_t, int32_t, std::string, int64_t>, int64_t> next_;  // run -> bytes taken
};

}  // namespace estuary
