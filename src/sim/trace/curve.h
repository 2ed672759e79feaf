// Diurnal demand curves for online-inference services: how much of its daily peak a service's
// request rate reaches at each time of day. The curve file is the simulator's input; the QPS
// deriver turns the public alibaba-genai-v2026 trace (qps.csv) into one (docs/tidal-curve.md).
//
// Curve file format (examples/curves/genai-diurnal.csv):
//   lines whose first character is '#' are comments and blank lines are skipped (both still count
//   for line numbers); then a header row naming exactly the columns `hour` and `demand_pct` (in
//   either order); then exactly 24 rows, one per hour 0..23 in any order:
//     hour        local hour of day, integer 0..23, each hour exactly once
//     demand_pct  demand at hour:00 as an integer percent of the peak, 0..100
//   At least one demand_pct must be > 0. Fields are trimmed of blanks and '\r'.
//
// Every bad input is a kInvalidArgument Status (exit code 2) with a one-line message in the style
// of the other trace readers: "file:line: column 'demand_pct': 'abc' is not an integer". A file
// that cannot be opened or is a directory names the file only.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace estuary {

// Demand per local hour of day, as an integer percent of the peak.
// Invariant (holds for every curve ReadDemandCurve or DeriveCurveFromQps returns): each pct is in
// 0..100 and at least one is > 0. Value type; thread-safe for concurrent reads.
struct DemandCurve {
  static constexpr int kHours = 24;
  static constexpr int64_t kSecondsPerHour = 3600;
  static constexpr int64_t kSecondsPerDay = kHours * kSecondsPerHour;

  // pct[h]: demand at h:00 local time, in percent of the peak.
  std::array<int32_t, kHours> pct{};

  // Demand at `second_of_day` seconds after local midnight, in per-mille of the peak (0..1000).
  // The hourly points sit at h:00; between two of them demand is linear, and 23:00 joins the next
  // day's 0:00 (pct[0]). Any second is accepted and taken modulo one day (floor modulo, so -1 is
  // 23:59:59), so a simulation clock shifted to local time can be passed as is.
  // Exact integer arithmetic: 10 * (pct[h] * (3600 - r) + pct[h+1] * r) / 3600 with r the seconds
  // since h:00, rounded to the nearest integer, halves up. At h:00 the result is 10 * pct[h].
  // REQUIRES: the invariant above.
  int64_t PermilleAt(int64_t second_of_day) const;

  bool operator==(const DemandCurve&) const = default;
};

// Reads a curve file (format above).
StatusOr<DemandCurve> ReadDemandCurve(const std::string& path);

// The curve as a curve file: `comment` (if not empty) as one leading "# ..." line (newlines in it
// become spaces), the header `hour,demand_pct`, then hours 0..23 in order. ReadDemandCurve reads
// it back to the same curve. REQUIRES: the invariant of DemandCurve.
std::string FormatDemandCurve(const DemandCurve& curve, const std::string& comment);

// UTC offsets accepted by the deriver, in whole hours (the range of real time zones).
inline constexpr int kMinUtcOffsetH = -12;
inline constexpr int kMaxUtcOffsetH = 14;
// Default local time of the alibaba-genai-v2026 trace: China Standard Time (UTC+8). The trace's
// timestamps are shifted by an undisclosed amount; docs/tidal-curve.md gives the evidence that
// +8 puts the night trough and the working-day peak where a Chinese service has them.
inline constexpr int kGenAiDefaultUtcOffsetH = 8;

// A curve derived from a QPS trace, with what the derivation saw.
struct QpsCurve {
  DemandCurve curve;
  // observed[h]: whether local hour h was covered for at least half of it (>= 1800 s); the other
  // hours were filled by interpolation.
  std::array<bool, DemandCurve::kHours> observed{};
  int64_t rows = 0;             // data rows read
  int64_t first_second = 0;     // the smallest timestamp, whole seconds since the epoch (UTC)
  int64_t last_second = 0;      // the largest one
};

// Derives a curve from a QPS trace in the alibaba-genai-v2026 qps.csv layout.
//
// Input: a header row naming at least `timestamp_anon` and `value` (other columns, e.g.
// container_ip and request_type, are ignored: rows of every container and request type count),
// blank lines skipped. timestamp_anon: seconds since the epoch (UTC), a non-negative decimal
// (D, D. or D.DDD); its fraction is dropped (each row falls in its whole-second bucket). value: a
// request rate, a non-negative decimal of at most 10^6, read in millionths (rounded to nearest,
// halves up). Rows may come in any order.
//
// Estimator (numbered as in docs/tidal-curve.md):
//   1. The trace observes the span [first, last] of whole seconds between its smallest and largest
//      timestamp. Each row is one sample of one container's (or the API gateway's) rate; samples
//      of all series share one regular period and a series has no row when its rate is 0, so a
//      missing row inside the span means 0, not "unknown".
//   2. Local second = UTC second + 3600 * utc_offset_h; local hour = (local second mod 86400) / 3600.
//   3. For each local hour of day h: S[h] = sum of the values of the rows in h (all days),
//      T[h] = number of seconds of the span in h. The mean total request rate of hour h is
//      proportional to S[h] / T[h] (the time average of the summed rate, divided by the sampling
//      period, which is the same for every hour and cancels in step 5).
//   4. An hour with T[h] >= 1800 is observed. Every other hour gets the linear interpolation of
//      the rates of the nearest observed hours before and after it, going round midnight; with
//      only one observed hour the curve is flat.
//   5. pct[h] = 100 * rate[h] / max rate, rounded to the nearest integer, halves up. All of it is
//      exact rational arithmetic on integers (128-bit intermediates): the result does not depend on
//      the platform's floating point.
// Errors (kInvalidArgument, one line naming the file and, for a row, the line and the column): a
// missing column, a malformed number, a negative or too large value, a trace spanning more than
// 366 days, an unreadable or empty file, a trace with no observed hour, a trace whose values are
// all 0, and `utc_offset_h` outside [kMinUtcOffsetH, kMaxUtcOffsetH].
StatusOr<QpsCurve> DeriveQpsCurve(const std::string& qps_csv_path, int utc_offset_h);

// DeriveQpsCurve's curve alone.
StatusOr<DemandCurve> DeriveCurveFromQps(const std::string& qps_csv_path, int utc_offset_h);

}  // namespace estuary
