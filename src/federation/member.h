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

#include "engine/io.h"
#include "federation/capacity_summary.h"

namespace estuary {

// The federation speaks the engine's vocabulary (src/engine/io.h) under its own names.
using FedJob = EngineJob;            // a job as the federation holds it (its id is the federation's)
using AdmitMode = SubmitMode;        // how a dispatched job is to be admitted
using MemberEvent = EngineEvent;     // what happened to a job on a member

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
