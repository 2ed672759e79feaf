#include "sim/trace/csv_fields.h"

#include <charconv>

namespace estuary {
namespace {
std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}
}  // namespace

std::string FieldRef::Prefix() const {
  return *file + ":" + std::to_string(line) + ": column '" + column + "': ";
}

StatusOr<std::optional<int64_t>> ParseOptionalNonNegative(const FieldRef& ref, std::string_view text, int64_t max) {
  text = Trim(text);
  if (text.empty()) return std::optional<int64_t>();
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) {
    return InvalidArgument(ref.Prefix() + "'" + std::string(text) + "' is out of range");
  }
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return InvalidArgument(ref.Prefix() + "'" + std::string(text) + "' is not an integer");
  }
  if (v < 0) return InvalidArgument(ref.Prefix() + "negative value " + std::string(text));
  if (v > max) {
    return InvalidArgument(ref.Prefix() + "value " + std::string(text) + " exceeds the limit " + std::to_string(max));
  }
  return std::optional<int64_t>(v);
}

StatusOr<int64_t> ParseNonNegative(const FieldRef& ref, std::string_view text, int64_t max) {
  auto v = ParseOptionalNonNegative(ref, text, max);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return InvalidArgument(ref.Prefix() + "empty value");
  return **v;
}

std::string CsvQuoted(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace estuary
