#include "sim/trace/curve.h"

#include <csv.h>

#include <algorithm>
#include <limits>
#include <string_view>

#include "sim/trace/csv_fields.h"
#include "sim/trace/csv_io.h"

namespace estuary {
namespace {

using csvio::CheckReadableFile;
using csvio::Comment;
using csvio::CsvError;
using csvio::Quote;
using csvio::Trim;

// Curve files: '#' lines are comments, blank lines are skipped.
using CurveComment = io::single_and_empty_line_comment<'#'>;

using Int128 = __int128;

constexpr int kHours = DemandCurve::kHours;
constexpr int64_t kHour = DemandCurve::kSecondsPerHour;
constexpr int64_t kDay = DemandCurve::kSecondsPerDay;

// The longest trace DeriveQpsCurve accepts: it bounds the seconds per hour of day (<= 367 * 3600),
// which keeps every product of step 5 within 128 bits (see Pct).
constexpr int64_t kMaxSpanDays = 366;
// QPS values are read in millionths and may be at most 10^6 (10^12 millionths).
constexpr int kValueDecimals = 6;
constexpr int64_t kMaxValueUnits = 1'000'000'000'000;
// An hour of day is observed when the trace covers at least half of it.
constexpr int64_t kMinObservedSeconds = kHour / 2;

int64_t FloorMod(int64_t a, int64_t m) {
  const int64_t r = a % m;
  return r < 0 ? r + m : r;
}

int LocalHour(int64_t utc_second, int utc_offset_h) {
  return static_cast<int>(FloorMod(utc_second + int64_t{utc_offset_h} * kHour, kDay) / kHour);
}

// A non-negative decimal "D", "D.", ".D" or "D.D" (digits only; no sign, no exponent) in units of
// 10^-decimals: the fraction beyond `decimals` digits is dropped (decimals == 0: the integer part)
// or rounded to nearest, halves up (`round`). At most `max_units` units.
StatusOr<int64_t> ParseDecimalUnits(const FieldRef& ref, std::string_view text, int decimals, bool round,
                                    int64_t max_units) {
  const std::string t(text);
  if (t.empty()) return InvalidArgument(ref.Prefix() + "empty value");
  auto is_decimal = [](std::string_view s) {
    size_t digits = 0, points = 0;
    for (char c : s) {
      if (c == '.') {
        ++points;
      } else if (c >= '0' && c <= '9') {
        ++digits;
      } else {
        return false;
      }
    }
    return digits > 0 && points <= 1;
  };
  if (!is_decimal(t)) {
    if (t[0] == '-' && is_decimal(std::string_view(t).substr(1))) {
      return InvalidArgument(ref.Prefix() + "negative value " + t);
    }
    return InvalidArgument(ref.Prefix() + "'" + t + "' is not a decimal number");
  }
  const size_t point = t.find('.');
  const std::string_view whole = std::string_view(t).substr(0, point);
  const std::string_view frac = point == std::string::npos ? std::string_view() : std::string_view(t).substr(point + 1);
  int64_t scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  const int64_t max_whole = max_units / scale;
  auto too_large = [&] {
    return InvalidArgument(ref.Prefix() + "value " + t + " exceeds the limit " + std::to_string(max_whole));
  };
  int64_t units = 0;
  for (char c : whole) {
    if (units > (max_whole - (c - '0')) / 10) return too_large();
    units = units * 10 + (c - '0');
  }
  units *= scale;
  int64_t place = scale;
  for (size_t i = 0; i < frac.size() && i < static_cast<size_t>(decimals); ++i) {
    place /= 10;
    units += (frac[i] - '0') * place;
  }
  if (round && frac.size() > static_cast<size_t>(decimals) && frac[decimals] >= '5') ++units;
  if (units > max_units) return too_large();
  return units;
}

// "hour 7", "hours 3, 7-9" — the hours whose flag is false.
std::string MissingHours(const std::array<bool, kHours>& seen) {
  std::string list;
  int count = 0;
  for (int h = 0; h < kHours; ++h) {
    if (seen[h]) continue;
    int end = h;
    while (end + 1 < kHours && !seen[end + 1]) ++end;
    if (!list.empty()) list += ", ";
    list += end == h ? std::to_string(h) : std::to_string(h) + "-" + std::to_string(end);
    count += end - h + 1;
    h = end;
  }
  return (count == 1 ? "hour " : "hours ") + list;
}

// A non-negative rate as an exact fraction num / den (den > 0).
struct Rate {
  Int128 num = 0;
  Int128 den = 1;
};

// round(100 * r / peak), halves up. REQUIRES: peak.num > 0.
// Bounds (S <= 2^63, T <= 367 * 3600, d1 + d2 <= 24): r.num <= 2^63 * T * 24 < 2^89, so
// 200 * r.num * peak.den < 2^118; r.den * peak.num <= T^2 * 24 * 2^63 < 2^109.
int32_t Pct(const Rate& r, const Rate& peak) {
  const Int128 n = 100 * r.num * peak.den;
  const Int128 d = r.den * peak.num;
  return static_cast<int32_t>((2 * n + d) / (2 * d));
}

}  // namespace

int64_t DemandCurve::PermilleAt(int64_t second_of_day) const {
  const int64_t s = FloorMod(second_of_day, kSecondsPerDay);
  const int64_t h = s / kSecondsPerHour, r = s % kSecondsPerHour;
  const int64_t here = pct[h], next = pct[(h + 1) % kHours];
  const int64_t tenfold = 10 * (here * (kSecondsPerHour - r) + next * r);  // per-mille * 3600
  return (tenfold + kSecondsPerHour / 2) / kSecondsPerHour;
}

StatusOr<DemandCurve> ReadDemandCurve(const std::string& path) {
  DemandCurve curve;
  std::array<unsigned, kHours> line_of{};  // 0: no row yet
  unsigned last_line = 1;                  // the header's line, then the last row's
  try {
    ESTUARY_RETURN_IF_ERROR(CheckReadableFile(path));
    io::CSVReader<2, Trim, Quote, io::throw_on_overflow, CurveComment> in(path);
    try {
      in.read_header(io::ignore_no_column, "hour", "demand_pct");
    } catch (const io::error::base& e) {
      return CsvError(path, e, in.get_file_line());
    }
    last_line = in.get_file_line();
    std::string hour_text, pct_text;
    while (in.read_row(hour_text, pct_text)) {
      last_line = in.get_file_line();
      const FieldRef at_hour{&path, last_line, "hour"};
      int64_t hour = 0, pct = 0;
      ESTUARY_ASSIGN_OR_RETURN(hour, ParseNonNegative(at_hour, hour_text, kHours - 1));
      if (line_of[hour] != 0) {
        return InvalidArgument(at_hour.Prefix() + "duplicate hour " + std::to_string(hour) + " (first on line " +
                               std::to_string(line_of[hour]) + ")");
      }
      ESTUARY_ASSIGN_OR_RETURN(pct, ParseNonNegative({&path, last_line, "demand_pct"}, pct_text, 100));
      line_of[hour] = last_line;
      curve.pct[hour] = static_cast<int32_t>(pct);
    }
  } catch (const io::error::base& e) {
    return CsvError(path, e);
  }
  std::array<bool, kHours> seen{};
  bool complete = true, any_demand = false;
  for (int h = 0; h < kHours; ++h) {
    seen[h] = line_of[h] != 0;
    complete = complete && seen[h];
    any_demand = any_demand || curve.pct[h] > 0;
  }
  if (!complete) {
    return InvalidArgument(FieldRef{&path, last_line, "hour"}.Prefix() + "no row for " + MissingHours(seen) +
                           " (one row per hour 0..23 is needed)");
  }
  if (!any_demand) {
    return InvalidArgument(FieldRef{&path, last_line, "demand_pct"}.Prefix() +
                           "every hour is 0; the peak hour needs a demand above 0");
  }
  return curve;
}

std::string FormatDemandCurve(const DemandCurve& curve, const std::string& comment) {
  std::string out;
  if (!comment.empty()) {
    std::string line = comment;
    for (char& c : line) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    out += "# " + line + "\n";
  }
  out += "hour,demand_pct\n";
  for (int h = 0; h < kHours; ++h) out += std::to_string(h) + "," + std::to_string(curve.pct[h]) + "\n";
  return out;
}

StatusOr<QpsCurve> DeriveQpsCurve(const std::string& path, int utc_offset_h) {
  if (utc_offset_h < kMinUtcOffsetH || utc_offset_h > kMaxUtcOffsetH) {
    return InvalidArgument("UTC offset " + std::to_string(utc_offset_h) + " h: must be an integer in [" +
                           std::to_string(kMinUtcOffsetH) + ", " + std::to_string(kMaxUtcOffsetH) + "]");
  }
  QpsCurve out;
  std::array<int64_t, kHours> sum{};  // S[h], in millionths
  try {
    ESTUARY_RETURN_IF_ERROR(CheckReadableFile(path));
    io::CSVReader<2, Trim, Quote, io::throw_on_overflow, Comment> in(path);
    in.read_header(io::ignore_extra_column, "timestamp_anon", "value");
    std::string ts_text, value_text;
    while (in.read_row(ts_text, value_text)) {
      const unsigned line = in.get_file_line();
      const FieldRef at_ts{&path, line, "timestamp_anon"};
      const FieldRef at_value{&path, line, "value"};
      int64_t second = 0, value = 0;
      ESTUARY_ASSIGN_OR_RETURN(second, ParseDecimalUnits(at_ts, ts_text, 0, false, kMaxFieldValue));
      ESTUARY_ASSIGN_OR_RETURN(value, ParseDecimalUnits(at_value, value_text, kValueDecimals, true, kMaxValueUnits));
      if (out.rows == 0) out.first_second = out.last_second = second;
      out.first_second = std::min(out.first_second, second);
      out.last_second = std::max(out.last_second, second);
      if (out.last_second - out.first_second > kMaxSpanDays * kDay) {
        return InvalidArgument(at_ts.Prefix() + "second " + std::to_string(second) +
                               " makes the trace span more than " + std::to_string(kMaxSpanDays) + " days");
      }
      const int h = LocalHour(second, utc_offset_h);
      if (sum[h] > std::numeric_limits<int64_t>::max() - value) {
        return InvalidArgument(at_value.Prefix() + "the sum of the values of local hour " + std::to_string(h) +
                               " exceeds 2^63 millionths");
      }
      sum[h] += value;
      ++out.rows;
    }
  } catch (const io::error::base& e) {
    return CsvError(path, e);
  }
  if (out.rows == 0) return InvalidArgument(path + ": no rows");

  // Step 3: T[h], the seconds of [first, last] in each local hour, one hour-aligned block at a time.
  std::array<int64_t, kHours> seconds{};
  for (int64_t s = out.first_second; s <= out.last_second;) {
    const int64_t block_end = s + (kHour - FloorMod(s + int64_t{utc_offset_h} * kHour, kHour));  // next h:00
    const int64_t end = std::min(block_end, out.last_second + 1);
    seconds[LocalHour(s, utc_offset_h)] += end - s;
    s = end;
  }
  // Step 4: observed hours and their rates; the peak.
  std::array<Rate, kHours> rate{};
  int peak = -1;
  for (int h = 0; h < kHours; ++h) {
    out.observed[h] = seconds[h] >= kMinObservedSeconds;
    if (!out.observed[h]) continue;
    rate[h] = {sum[h], seconds[h]};
    if (peak < 0 || rate[h].num * rate[peak].den > rate[peak].num * rate[h].den) peak = h;
  }
  if (peak < 0) {
    return InvalidArgument(path + ": the trace spans " + std::to_string(out.last_second - out.first_second) +
                           " s and covers no local hour for half of it (" + std::to_string(kMinObservedSeconds) +
                           " s); at least one hour is needed");
  }
  if (rate[peak].num == 0) return InvalidArgument(path + ": column 'value': every value in the observed hours is 0");
  for (int h = 0; h < kHours; ++h) {
    if (out.observed[h]) continue;
    int before = 1, after = 1;
    while (!out.observed[(h - before + kHours) % kHours]) ++before;
    while (!out.observed[(h + after) % kHours]) ++after;
    const Rate& a = rate[(h - before + kHours) % kHours];
    const Rate& b = rate[(h + after) % kHours];
    rate[h] = {a.num * b.den * after + b.num * a.den * before, a.den * b.den * (before + after)};
  }
  // Step 5.
  for (int h = 0; h < kHours; ++h) out.curve.pct[h] = Pct(rate[h], rate[peak]);
  return out;
}

StatusOr<DemandCurve> DeriveCurveFromQps(const std::string& qps_csv_path, int utc_offset_h) {
  auto derived = DeriveQpsCurve(qps_csv_path, utc_offset_h);
  if (!derived.ok()) return derived.status();
  return derived->curve;
}

}  // namespace estuary
