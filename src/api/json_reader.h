// Reading the JSON values of estuary's wire formats (the job schema, api/job_json.h; the queue
// schema, api/queue_json.h): typed members with ranges, and one-line messages that start with the
// field's path ("field 'replicas.min': 0 is below 1"). Nothing here throws.
// Thread-safety: free functions and a reader over a const value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace estuary::jsonr {

using Json = nlohmann::json;

// User-supplied text shown in a message is cut to this many bytes.
inline constexpr size_t kMaxShownBytes = 40;

// `s` made safe for a one-line message: printable ASCII is kept, any other byte becomes \xNN, and
// with `escape_quotes` ' and \ are escaped too (for text shown between quotes); cut to
// `max_bytes` with "..." after.
std::string Escaped(std::string_view s, size_t max_bytes = kMaxShownBytes, bool escape_quotes = true);
std::string Quoted(std::string_view s);
// "field 'path': ".
std::string Field(std::string_view path);
// The path of member `key` of the object at `parent` ("" for the top level).
std::string MemberPath(std::string_view parent, std::string_view key);

// Checks and reads the members of one JSON object; paths in messages are relative to `path`.
class ObjectReader {
 public:
  ObjectReader(const Json& object, std::string path) : object_(object), path_(std::move(path)) {}

  // The first member (in key order) whose key is not in `known`.
  Status RejectUnknown(std::initializer_list<std::string_view> known) const;
  // The member `key`; nullptr when absent.
  const Json* Find(std::string_view key) const {
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }
  std::string PathOf(std::string_view key) const { return MemberPath(path_, key); }
  // The member `key`, which must be present.
  StatusOr<const Json*> Require(std::string_view key) const;
  // The integer member `key` in [min, max]: `fallback` when absent, or missing when there is no
  // fallback.
  StatusOr<int64_t> Integer(std::string_view key, int64_t min, int64_t max,
                            std::optional<int64_t> fallback = std::nullopt) const;
  // The string member `key`: `fallback` when absent, or missing when there is no fallback.
  StatusOr<std::string> String(std::string_view key, size_t min_chars, size_t max_chars,
                               std::optional<std::string> fallback = std::nullopt) const;
  // The boolean member `key`, `fallback` when absent.
  StatusOr<bool> Bool(std::string_view key, bool fallback) const;

 private:
  const Json& object_;
  std::string path_;
};

// `v` as an integer in [min, max]. Integers are JSON integer literals: a number written with a
// fraction or an exponent (1.5, 8.0, 1e3) is not one, whatever its value.
StatusOr<int64_t> IntegerIn(const Json& v, const std::string& path, int64_t min, int64_t max);
// Why `s` is not a string of min_chars..max_chars characters (Unicode code points) without
// control characters (U+0000..U+001F, U+007F), or "" when it is one. REQUIRES: `s` is valid
// UTF-8 (the parser checks every string).
std::string StringProblem(std::string_view s, size_t min_chars, size_t max_chars);
// `v` as a string that StringProblem accepts.
StatusOr<std::string> StringIn(const Json& v, const std::string& path, size_t min_chars, size_t max_chars);
// "an object", "an array", "a string", "a boolean", "null" or "a number".
const char* TypeName(const Json& v);
// One of [A-Za-z0-9._-] (names of jobs and queues).
bool IsNameChar(char c);
// `v` (at `path`) as a name: 1..max_chars characters of [A-Za-z0-9._-].
StatusOr<std::string> NameIn(const Json& v, const std::string& path, size_t max_chars);

}  // namespace estuary::jsonr
