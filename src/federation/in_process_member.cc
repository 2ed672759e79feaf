#include "federation/in_process_member.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace estuary {

InProcessMember::InProcessMember(std::unique_ptr<Engine> engine, MemberOptions options)
    : options_(std::move(options)), engine_(std::move(engine)) {}

// Adds the time of one public call to timing_ when a stopwatch is set: a Publish to upkeep_ns, an
// outermost scheduling call to schedule_ns less the publications inside it. Inner calls add
// nothing of their own.
class InProcessMember::Meter {
 public:
  Meter(InProcessMember& m, bool upkeep) : m_(m), upkeep_(upkeep) {
    if (m_.options_.stopwatch == nullptr || (!upkeep_ && m_.meter_depth_++ > 0)) return;
    active_ = true;
    upkeep_before_ = m_.timing_.upkeep_ns;
    start_ = m_.options_.stopwatch->ElapsedNs();
  }
  ~Meter() {
    if (m_.options_.stopwatch == nullptr) return;
    if (!upkeep_) --m_.meter_depth_;
    if (!active_) return;
    const int64_t elapsed = m_.options_.stopwatch->ElapsedNs() - start_;
    if (upkeep_) {
      m_.timing_.upkeep_ns += elapsed;
      ++m_.timing_.publishes;
    } else {
      m_.timing_.schedule_ns += elapsed - (m_.timing_.upkeep_ns - upkeep_before_);
    }
  }
  Meter(const Meter&) = delete;
  Meter& operator=(const Meter&) = delete;

 private:
  InProcessMember& m_;
  bool upkeep_;
  bool active_ = false;
  int64_t upkeep_before_ = 0, start_ = 0;
};

StatusOr<std::unique_ptr<InProcessMember>> InProcessMember::Create(ClusterState cluster, MemberOptions options) {
  auto engine = Engine::Create(std::move(cluster), options);
  if (!engine.ok()) return engine.status();
  std::unique_ptr<InProcessMember> m(new InProcessMember(std::move(*engine), std::move(options)));
  for (JobId h : m->engine_->HeadroomJobs()) m->summary_.AddHeadroomOwner(h);
  m->summary_.Build(m->engine_->state(), m->options_.summary);
  return m;
}

Admission InProcessMember::Submit(const FedJob& job, AdmitMode mode, int64_t now_s) {
  const Meter meter(*this, false);
  const Admission a = engine_->Submit(job, mode, now_s);
  PublishIfContinuous(now_s);
  return a;
}

void InProcessMember::Cancel(uint32_t job, int64_t now_s) {
  const Meter meter(*this, false);
  engine_->Cancel(job, now_s);
  PublishIfContinuous(now_s);
}

std::optional<ReclaimQuote> InProcessMember::QuoteReclaim(const FedJob& job, int64_t now_s) {
  const Meter meter(*this, false);
  return engine_->QuoteReclaim(job, now_s);
}

bool InProcessMember::SetStandby(uint32_t job, int32_t replicas, int64_t now_s) {
  const Meter meter(*this, false);
  const bool ok = engine_->SetStandby(job, replicas, now_s);
  PublishIfContinuous(now_s);
  return ok;
}

StatusOr<int64_t> InProcessMember::Defrag(const DefragOptions& options, int64_t now_s) {
  const Meter meter(*this, false);
  return engine_->Defrag(options, now_s);
}

int64_t InProcessMember::Evacuate(NodeId node, int64_t now_s) {
  const Meter meter(*this, false);
  return engine_->Evacuate(node, now_s);
}

void InProcessMember::Step(int64_t now_s) {
  const Meter meter(*this, false);
  CycleOptions c;
  c.part = CyclePart::kBeforeGrow;
  Keep(engine_->RunCycle(now_s, c));
  MaybePublish(now_s);
}

void InProcessMember::Grow(int64_t now_s, int32_t external_blocking) {
  const Meter meter(*this, false);
  CycleOptions c;
  c.part = CyclePart::kGrow;
  c.external_blocking = external_blocking;
  Keep(engine_->RunCycle(now_s, c));
  MaybePublish(now_s);
}

void InProcessMember::Keep(std::vector<MemberEvent> events) {
  events_.insert(events_.end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
}

std::vector<MemberEvent> InProcessMember::TakeEvents() {
  Keep(engine_->TakeEvents());
  return std::exchange(events_, {});
}

std::optional<int64_t> InProcessMember::NextDue() const {
  std::optional<int64_t> due = engine_->NextDue();
  if (options_.summary_period_s > 0 && last_publish_ >= 0) {
    const int64_t next = last_publish_ + options_.summary_period_s;
    due = due ? std::min(*due, next) : next;
  }
  return due;
}

void InProcessMember::Publish(int64_t now_s) {
  const Meter meter(*this, true);
  summary_.Refresh(engine_->state());
  last_publish_ = now_s;
}

void InProcessMember::MaybePublish(int64_t now_s) {
  if (options_.summary_period_s == 0 || last_publish_ < 0 || now_s - last_publish_ >= options_.summary_period_s) {
    Publish(now_s);
  }
}

}  // namespace estuary
