// GracefulExit: how long an evicted job takes to stop after its eviction notice. A Reclaim (or
// any graceful eviction) gives its victims a grace period: they checkpoint or drain and exit on
// their own, and whatever still runs when the grace period ends is killed. Most victims exit well
// before the bound: Alibaba (OSDI'26) reports spot evictions bounded by 60 s with a mean of 13 s
// and a P95 of 48 s (../shared/docs/mission.md, SpotGPU).
//
// Model. With mean_s = 0 (the default) every victim takes the whole grace period: its resources
// are freed exactly grace_s after the notice. Otherwise a victim's exit time is
// min(X, grace_s), rounded to whole seconds and at least 1 s, with X lognormal(mu, sigma) fitted
// so that min(X, grace_s) has the given mean and P95: mu = ln(p95_s) - z95 * sigma (z95 = the
// standard normal's 95th percentile) and sigma solves E[min(X, grace_s)] = mean_s (bisection; the
// mean falls monotonically in sigma). Each draw is a pure function of (seed, job key, notice
// time): the same victim noticed at the same time exits at the same time in every run and every
// configuration (common random numbers), and no draw depends on the order of others.
// Thread-safety: const methods only after Create; safe to share.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace estuary {

class GracefulExit {
 public:
  GracefulExit() = default;  // Fixed(0)
  // Every victim takes the whole `grace_s`.
  static GracefulExit Fixed(int64_t grace_s);
  // The fitted lognormal. Errors (InvalidArgument, naming the field): mean_s < 1; p95_s <= mean_s;
  // p95_s >= grace_s (the P95 must lie below the bound); a mean too small for that P95 and bound
  // (under 5% of grace_s, which even an unbounded sigma cannot reach).
  static StatusOr<GracefulExit> Fitted(int64_t grace_s, int64_t mean_s, int64_t p95_s, uint64_t seed);

  // Seconds the victim `job_key` noticed at `notice_s` takes to exit: in [min(1, grace_s), grace_s].
  int64_t After(uint64_t job_key, int64_t notice_s) const;

  int64_t grace_s() const { return grace_s_; }
  bool fixed() const { return sigma_ <= 0; }
  double mu() const { return mu_; }
  double sigma() const { return sigma_; }

 private:
  GracefulExit(int64_t grace_s, double mu, double sigma, uint64_t seed)
      : grace_s_(grace_s), mu_(mu), sigma_(sigma), seed_(seed) {}
  int64_t grace_s_ = 0;
  double mu_ = 0;
  double sigma_ = 0;  // 0: fixed
  uint64_t seed_ = 0;
};

}  // namespace estuary
