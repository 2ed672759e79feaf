// Clock: time as the engine sees it. The simulator injects a SimClock; the live service (later)
// injects a real clock. Nothing else in src/ reads the wall clock.
// Times are integer seconds since an arbitrary epoch (the trace's own zero for the simulator).
#pragma once

#include <cstdint>

namespace estuary {

using SimTime = int64_t;  // seconds

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SimTime Now() const = 0;
};

// A clock that only moves when the simulator advances it. REQUIRES: time never goes backwards.
class SimClock final : public Clock {
 public:
  explicit SimClock(SimTime start = 0) : now_(start) {}
  SimTime Now() const override { return now_; }
  void AdvanceTo(SimTime t) { if (t > now_) now_ = t; }

 private:
  SimTime now_;
};

}  // namespace estuary
