// InProcessMember: a federation member that runs one estuary Engine (src/engine/engine.h) in this
// process, driven by the caller's clock (the federation simulator's). It adds to the engine what
// the federation needs of a member: a capacity summary (CapacitySummary) published after every
// change or every summary_period_s, and a stopwatch that separates the member's scheduling time
// from the summary's upkeep. Every scheduling decision is the engine's.
//
// A driver runs Step (the cycle up to its first `absorb`: CyclePart::kBeforeGrow), then the
// federation's dispatch, then Grow (the rest), so that jobs waiting at the federation see released
// capacity before elastic jobs take it. Both publish the summary when summary_period_s has passed
// since the last publication (0: it is kept current after every change, Submit, Cancel and
// SetStandby included).
// Thread-safety: none.
#pragma once

#include <climits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "engine/engine.h"
#include "federation/member.h"

namespace estuary {

struct MemberOptions : EngineConfig {
  SummaryOptions summary;        // reclaim thresholds
  int64_t summary_period_s = 0;  // 0: the summary is current after every change
  // When set, the member measures its own work (timing()); nothing it decides depends on it.
  const Stopwatch* stopwatch = nullptr;
};

// Time a member spent, measured with MemberOptions::stopwatch: its own scheduling (Submit, Cancel,
// QuoteReclaim, Step, Grow, SetStandby, Defrag, Evacuate — without the summary publications inside
// them) and the summary's upkeep (every Publish, CapacitySummary::Refresh).
struct MemberTiming {
  int64_t schedule_ns = 0;
  int64_t upkeep_ns = 0;
  int64_t publishes = 0;
};

class InProcessMember : public Member {
 public:
  // Takes the member's cluster (its nodes and topology; no jobs). Fails as Engine::Create does.
  static StatusOr<std::unique_ptr<InProcessMember>> Create(ClusterState cluster, MemberOptions options);

  const std::string& name() const override { return engine_->name(); }
  const CapacitySummary& summary() const override { return summary_; }
  Admission Submit(const FedJob& job, AdmitMode mode, int64_t now_s) override;
  void Cancel(uint32_t job, int64_t now_s) override;
  int32_t Running(uint32_t job) const override { return engine_->Running(job); }
  std::optional<ReclaimQuote> QuoteReclaim(const FedJob& job, int64_t now_s) override;
  std::vector<MemberEvent> TakeEvents() override;

  // The member's cycle at `now_s`, in two parts (see the header comment).
  void Step(int64_t now_s);
  // `external_blocking`: CycleOptions::external_blocking.
  void Grow(int64_t now_s, int32_t external_blocking = INT32_MIN);
  // The earliest time a Step has work that no event brings (the engine's NextDue, or the next
  // publication of a periodic summary), if any.
  std::optional<int64_t> NextDue() const;
  // Publishes the summary now (whatever the period).
  void Publish(int64_t now_s);
  // Engine::SetStandby, Defrag and Evacuate, timed and followed by a publication.
  bool SetStandby(uint32_t job, int32_t replicas, int64_t now_s);
  StatusOr<int64_t> Defrag(const DefragOptions& options, int64_t now_s);
  int64_t Evacuate(NodeId node, int64_t now_s);

  // The member's engine, for the inputs and views the federation does not need of a member.
  Engine& engine() { return *engine_; }
  const Engine& engine() const { return *engine_; }
  const ClusterState& state() const { return engine_->state(); }
  const EngineConfig& options() const { return engine_->options(); }
  // What the stopwatch measured so far (zeros without one).
  const MemberTiming& timing() const { return timing_; }

 private:
  InProcessMember(std::unique_ptr<Engine> engine, MemberOptions options);
  class Meter;  // times one public call (see MemberTiming)
  void MaybePublish(int64_t now_s);
  // Appends a cycle's events to those not yet taken.
  void Keep(std::vector<MemberEvent> events);
  // After an input: publishes when the summary is to be current after every change.
  void PublishIfContinuous(int64_t now_s) {
    if (options_.summary_period_s == 0) MaybePublish(now_s);
  }

  MemberOptions options_;
  std::unique_ptr<Engine> engine_;
  CapacitySummary summary_;
  int64_t last_publish_ = -1;
  std::vector<MemberEvent> events_;  // the cycles' events not yet taken (older than the engine's)
  MemberTiming timing_;
  int meter_depth_ = 0;
};

}  // namespace estuary
