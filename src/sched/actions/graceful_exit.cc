#include "sched/actions/graceful_exit.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace estuary {
namespace {

constexpr double kZ95 = 1.6448536269514722;

double Phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// Phi^-1(u) for u in (0, 1), by bisection on Phi (monotone); 80 halvings of [-40, 40] leave an
// interval far below double precision of the result.
double InversePhi(double u) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 80; ++i) {
    const double mid = 0.5 * (lo + hi);
    (Phi(mid) < u ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// E[min(X, g)] for X lognormal(mu, sigma).
double TruncatedMean(double mu, double sigma, double g) {
  const double lg = std::log(g);
  return std::exp(mu + sigma * sigma / 2) * Phi((lg - mu - sigma * sigma) / sigma) + g * (1 - Phi((lg - mu) / sigma));
}

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

GracefulExit GracefulExit::Fixed(int64_t grace_s) { return GracefulExit(grace_s, 0, 0, 0); }

StatusOr<GracefulExit> GracefulExit::Fitted(int64_t grace_s, int64_t mean_s, int64_t p95_s, uint64_t seed) {
  if (mean_s < 1) return InvalidArgument("exit_mean_s: must be at least 1 s");
  if (p95_s <= mean_s) {
    return InvalidArgument("exit_p95_s: must exceed exit_mean_s (" + std::to_string(mean_s) + " s)");
  }
  if (p95_s >= grace_s) {
    return InvalidArgument("exit_p95_s: must lie below the grace period (" + std::to_string(grace_s) + " s)");
  }
  const double g = static_cast<double>(grace_s), p = static_cast<double>(p95_s), m = static_cast<double>(mean_s);
  auto mean_at = [&](double sigma) { return TruncatedMean(std::log(p) - kZ95 * sigma, sigma, g); };
  double lo = 1e-6, hi = 30;
  if (mean_at(hi) >= m) {
    return InvalidArgument("exit_mean_s: " + std::to_string(mean_s) + " s is too small for a P95 of " +
                           std::to_string(p95_s) + " s bounded by " + std::to_string(grace_s) + " s");
  }
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (mean_at(mid) > m ? lo : hi) = mid;
  }
  const double sigma = 0.5 * (lo + hi);
  return GracefulExit(grace_s, std::log(p) - kZ95 * sigma, sigma, seed);
}

int64_t GracefulExit::After(uint64_t job_key, int64_t notice_s) const {
  if (fixed()) return grace_s_;
  const uint64_t h = Mix(seed_ ^ Mix(job_key ^ Mix(static_cast<uint64_t>(notice_s))));
  const double u = (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53;  // in (0, 1)
  const double x = std::exp(mu_ + sigma_ * InversePhi(u));
  if (!(x < static_cast<double>(grace_s_))) return grace_s_;
  return std::clamp<int64_t>(std::llround(x), std::min<int64_t>(1, grace_s_), grace_s_);
}

}  // namespace estuary
