#include "api/json_reader.h"

#include <algorithm>
#include <cmath>

namespace estuary::jsonr {

// `s` made safe for a one-line message: printable ASCII is kept, any other byte becomes \xNN, and
// with `escape_quotes` ' and \ are escaped too (for text shown between quotes); cut to
// `max_bytes` with "..." after.
std::string Escaped(std::string_view s, size_t max_bytes, bool escape_quotes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size() && i < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (escape_quotes && (c == '\'' || c == '\\')) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  if (s.size() > max_bytes) out += "...";
  return out;
}

std::string Quoted(std::string_view s) { return "'" + Escaped(s) + "'"; }

// "field 'path': ".
std::string Field(std::string_view path) { return "field '" + std::string(path) + "': "; }

// The path of member `key` of the object at `parent` ("" for the top level).
std::string MemberPath(std::string_view parent, std::string_view key) {
  return parent.empty() ? Escaped(key) : std::string(parent) + "." + Escaped(key);
}

Status ObjectReader::RejectUnknown(std::initializer_list<std::string_view> known) const {
  for (const auto& [key, value] : object_.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return InvalidArgument(Field(MemberPath(path_, key)) + "unknown field");
    }
  }
  return Status::Ok();
}

StatusOr<const Json*> ObjectReader::Require(std::string_view key) const {
  const Json* v = Find(key);
  if (v == nullptr) return InvalidArgument(Field(PathOf(key)) + "missing");
  return v;
}

StatusOr<bool> ObjectReader::Bool(std::string_view key, bool fallback) const {
  const Json* v = Find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return InvalidArgument(Field(PathOf(key)) + "expected a boolean");
  return v->get<bool>();
}


// `v` as an integer in [min, max]. Integers are JSON integer literals: a number written with a
// fraction or an exponent (1.5, 8.0, 1e3) is not one, whatever its value.
StatusOr<int64_t> IntegerIn(const Json& v, const std::string& path, int64_t min, int64_t max) {
  const std::string below = " is below " + std::to_string(min), above = " is above " + std::to_string(max);
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(max)) return InvalidArgument(Field(path) + std::to_string(u) + above);
    const auto x = static_cast<int64_t>(u);
    if (x < min) return InvalidArgument(Field(path) + std::to_string(x) + below);
    return x;
  }
  if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    if (x < min) return InvalidArgument(Field(path) + std::to_string(x) + below);
    if (x > max) return InvalidArgument(Field(path) + std::to_string(x) + above);
    return x;
  }
  if (v.is_number_float()) {
    // The parser hands an integer literal beyond 64 bits over as a double; say it is out of range
    // rather than not an integer. Any smaller double was written with a fraction or an exponent.
    const double d = v.get<double>();
    if (std::fabs(d) >= 0x1p63) return InvalidArgument(Field(path) + v.dump() + (d < 0 ? below : above));
  }
  return InvalidArgument(Field(path) + "expected an integer");
}

// Why `s` is not a string of min_chars..max_chars characters (Unicode code points) without
// control characters (U+0000..U+001F, U+007F), or "" when it is one. REQUIRES: `s` is valid
// UTF-8 (the parser checks every string).
std::string StringProblem(std::string_view s, size_t min_chars, size_t max_chars) {
  size_t chars = 0;
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if ((b & 0xc0) != 0x80) ++chars;  // not a UTF-8 continuation byte
    if (b < 0x20 || b == 0x7f) return "character " + std::to_string(chars) + " is a control character";
  }
  if (chars == 0 && min_chars > 0) return "empty";
  if (chars < min_chars) return std::to_string(chars) + " characters, fewer than " + std::to_string(min_chars);
  if (chars > max_chars) return std::to_string(chars) + " characters, more than " + std::to_string(max_chars);
  return "";
}

// `v` as a string that StringProblem accepts.
StatusOr<std::string> StringIn(const Json& v, const std::string& path, size_t min_chars, size_t max_chars) {
  if (!v.is_string()) return InvalidArgument(Field(path) + "expected a string");
  const std::string& s = v.get_ref<const std::string&>();
  if (std::string why = StringProblem(s, min_chars, max_chars); !why.empty()) {
    return InvalidArgument(Field(path) + why);
  }
  return s;
}

StatusOr<int64_t> ObjectReader::Integer(std::string_view key, int64_t min, int64_t max,
                                        std::optional<int64_t> fallback) const {
  const Json* v = Find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return InvalidArgument(Field(PathOf(key)) + "missing");
  }
  return IntegerIn(*v, PathOf(key), min, max);
}

StatusOr<std::string> ObjectReader::String(std::string_view key, size_t min_chars, size_t max_chars,
                                           std::optional<std::string> fallback) const {
  const Json* v = Find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return InvalidArgument(Field(PathOf(key)) + "missing");
  }
  return StringIn(*v, PathOf(key), min_chars, max_chars);
}

const char* TypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::null: return "null";
    default: return "a number";
  }
}

bool IsNameChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

StatusOr<std::string> NameIn(const Json& v, const std::string& path, size_t max_chars) {
  StatusOr<std::string> s = StringIn(v, path, 1, max_chars);
  if (!s.ok()) return s.status();
  for (size_t i = 0; i < s->size(); ++i) {
    if (!IsNameChar((*s)[i])) {
      // All characters before i are ASCII, so i + 1 counts characters.
      return InvalidArgument(Field(path) + Quoted(*s) + ": character " + std::to_string(i + 1) +
                             " is not one of [A-Za-z0-9._-]");
    }
  }
  return s;
}

}  // namespace estuary::jsonr
