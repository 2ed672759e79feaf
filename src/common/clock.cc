#include "common/clock.h"

#include <chrono>

namespace estuary {

SimTime RealClock::Now() const { return NowMs() / 1000; }

int64_t RealClock::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace estuary
