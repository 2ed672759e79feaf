// Field parsing for the trace readers: every failure becomes a Status whose message names the
// file, the line and the column, e.g. "pods.csv:12: column 'gpu_milli': 'abc' is not an integer".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace estuary {

// Where a field came from, for messages.
struct FieldRef {
  const std::string* file;
  unsigned line;
  const char* column;
  std::string Prefix() const;  // "file:line: column 'c': "
};

// The largest value a trace field may hold (capacities, requests, times in seconds): 10^12 keeps
// every sum the engine forms far from int64 overflow (10^12 s is ~31,700 years).
inline constexpr int64_t kMaxFieldValue = 1'000'000'000'000;

// A non-negative decimal integer (surrounding blanks allowed) no larger than `max`. Empty is an
// error.
StatusOr<int64_t> ParseNonNegative(const FieldRef& ref, std::string_view text, int64_t max = kMaxFieldValue);
// Like ParseNonNegative, but an empty field yields std::nullopt.
StatusOr<std::optional<int64_t>> ParseOptionalNonNegative(const FieldRef& ref, std::string_view text,
                                                          int64_t max = kMaxFieldValue);

// `v` as one CSV field (RFC 4180): quoted, with quotes doubled, when it holds a comma, a quote or
// a line break; as is otherwise.
std::string CsvQuoted(const std::string& v);

}  // namespace estuary
