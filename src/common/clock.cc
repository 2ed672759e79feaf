#include "common/clock.h"

#include <chrono>

namespace estuary {

SimTime RealClock::Now() const { return NowMs() / 1000; }

int64_t RealClock::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {
int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

SteadyStopwatch::SteadyStopwatch() : start_ns_(SteadyNs()) {}

int64_t SteadyStopwatch::ElapsedNs() const { return SteadyNs() - start_ns_; }

}  // namespace estuary
