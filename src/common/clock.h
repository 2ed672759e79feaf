// Clock: time as the engine sees it. The simulator injects a SimClock; the live service (later)
// injects a real clock. Nothing else in src/ reads the wall clock (a Stopwatch, injected too,
// only measures).
// Times are integer seconds since an arbitrary epoch (the trace's own zero for the simulator).
#pragma once

#include <cstdint>

namespace estuary {

using SimTime = int64_t;  // seconds

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SimTime Now() const = 0;
  // Milliseconds on the same time line (for latencies a live driver reports); default Now() x 1000.
  virtual int64_t NowMs() const { return Now() * 1000; }
};

// The wall clock (the live service's): seconds and milliseconds since the Unix epoch. The only
// place in src/ that reads the system clock.
class RealClock final : public Clock {
 public:
  SimTime Now() const override;
  int64_t NowMs() const override;
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

// A monotonic source of elapsed nanoseconds for *measuring* the engine's own work (benchmarks
// inject a steady clock). Never an input to a decision: outputs do not depend on it.
class Stopwatch {
 public:
  virtual ~Stopwatch() = default;
  virtual int64_t ElapsedNs() const = 0;
};

// A Stopwatch on the steady clock, from its construction (drivers and benchmarks inject it).
class SteadyStopwatch final : public Stopwatch {
 public:
  SteadyStopwatch();
  int64_t ElapsedNs() const override;

 private:
  int64_t start_ns_ = 0;
};

}  // namespace estuary
