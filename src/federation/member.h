// The federation's view of a sub-cluster (issue 6, TIDAL's two layers): a Member publishes a
// capacity summary, accepts or rejects jobs dispatched to it, runs them with its own scheduler
// (node filtering, placement, preemption with its own victim choice, elastic scale-out) and
// reports what happened as events. The federation never manages tasks. The interface is shaped so
// that a member may live in another process later: jobs are named by the federation's ids and
// carry model and topology names, never a member's ids.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "federation/capacity_summary.h"
#include "model/resources.h"

namespace estuary {

// A job as the federation holds it.
struct FedJob {
  uint32_t id = 0;  // the federation's id, unique in the federation
  std::string name;
  int32_t min_replicas = 1, max_replicas = 1, step = 1;
  int32_t usable_step = 0;  // 0: = step
  TaskRequest per_replica;  // its `models` is ignored: see `models`
  std::vector<std::string> models;  // allowed GPU models by name; empty: any
  std::string plane, required_level, preferred_level;  // topology constraint by name (empty: none)
  int32_t priority = 0;
  bool preemptible = false;
  int64_t checkpoint_interval_s = 0;
  int64_t restart_cost_s = 0;
};

// How a dispatched job is to be admitted.
enum class AdmitMode {
  kQueue,           // accept anything the member could ever run; it waits in the member's queue
                    // (and an HP job may Reclaim there later) — dispatch without capacity knowledge
  kStartNow,        // start it now on idle capacity, or reject
  kStartOrReclaim,  // start it now, or evict lower-priority work for it (then it starts once the
                    // victims are gone), or reject; a rejection has evicted nothing
  kEnqueue,         // join the member's queue behind the jobs already waiting there; the next
                    // Step tries it in queue order (a job that can never fit is then returned
                    // with its reason) — the simulator's arrival semantics (the live service)
};

struct Admission {
  bool accepted = false;
  bool started = false;     // it runs now
  bool reclaiming = false;  // victims are being evicted for it; it starts when they are gone
  int32_t granted = 0;      // replicas bound when started
  std::string reason;       // why it was rejected
  bool never = false;       // rejected because it could never run on this member
};

// What happened to a job on a member (Member::TakeEvents, in order).
// MemberEvent::for_job of the evictions a member makes to restore its HP headroom
// (MemberOptions::headroom), not for any job.
inline constexpr uint32_t kHeadroomJob = UINT32_MAX - 1;

struct MemberEvent {
  enum class Kind {
    kStarted,   // it started with `replicas`
    kGrown,     // Absorb grew it to `replicas`
    kShrunk,    // Reclaim shrank it to `replicas` (for job `for_job`)
    kReturned,  // it was evicted whole (for `for_job`) or found never to fit here (`for_job`
                // invalid, `detail` the reason) and is back with the federation
    kReclaim,   // a Reclaim for `job` was decided: `replicas` victims (jobs evicted whole or
                // shrunk) will be evicted at time `at`
  };
  Kind kind = Kind::kStarted;
  int64_t t = 0;
  uint32_t job = 0;
  int32_t replicas = 0;
  uint32_t for_job = UINT32_MAX;
  int64_t at = 0;
  std::string detail;
  bool never = false;  // kReturned: it can never fit this member (not an eviction)
};

// A member's price for evicting work for a job now (Member::QuoteReclaim): its own victim choice.
struct ReclaimQuote {
  int32_t victims = 0;          // jobs it would evict whole or shrink
  int32_t max_priority = 0;     // highest priority among them
  int64_t cost = 0;             // C of the jobs evicted whole, milli-GPU x seconds
  int64_t gpu_milli = 0;        // GPU milli it would evict
};

class Member {
 public:
  virtual ~Member() = default;
  virtual const std::string& name() const = 0;
  // The summary as last published (may be stale: the member re-checks every dispatch).
  virtual const CapacitySummary& summary() const = 0;
  // Dispatch of `job` at `now_s` under `mode`. A job already running or waiting here is rejected.
  virtual Admission Submit(const FedJob& job, AdmitMode mode, int64_t now_s) = 0;
  // The job leaves the member (it finished, or the federation cancels it): its tasks stop and it
  // leaves any queue. Unknown jobs are ignored.
  virtual void Cancel(uint32_t job, int64_t now_s) = 0;
  // What a Reclaim for `job` would evict here now (the member's own victim choice, nothing
  // changed); nullopt when no Reclaim could start it here now.
  virtual std::optional<ReclaimQuote> QuoteReclaim(const FedJob& job, int64_t now_s) = 0;
  // Replicas of the job bound here now (0: not running here).
  virtual int32_t Running(uint32_t job) const = 0;
  virtual std::vector<MemberEvent> TakeEvents() = 0;
};

}  // namespace estuary
