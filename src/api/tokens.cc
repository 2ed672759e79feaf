// The tokens file reader. Each line is checked in a fixed order — field count, TOKEN, ROLE, NAME,
// then duplicates — and the first problem is reported, naming the file, the line and the field.
// No message ever contains a token or anything that may be a piece of one.
#include "api/tokens.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace estuary {
namespace {

constexpr size_t kMinTokenLength = 16;
constexpr size_t kMaxTokenLength = 256;
constexpr size_t kMaxNameLength = 63;
// A ROLE value at least this long is shown by its length only: it is more likely a token that
// slipped into the wrong column than a misspelt role.
constexpr size_t kMaxShownRoleLength = 15;

bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsPrintableNonSpace(char c) { return c > ' ' && c < 0x7f; }
bool IsNameChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// The fields of `line`, split at runs of spaces and tabs.
std::vector<std::string_view> SplitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && IsBlank(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !IsBlank(line[i])) ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

std::optional<Role> ParseRole(std::string_view s) {
  if (s == "admin") return Role::kAdmin;
  if (s == "tenant") return Role::kTenant;
  if (s == "agent") return Role::kAgent;
  return std::nullopt;
}

// Why `token` is not a valid TOKEN, or "" when it is.
std::string TokenProblem(std::string_view token) {
  if (token.size() < kMinTokenLength) {
    return std::to_string(token.size()) + " characters, fewer than " + std::to_string(kMinTokenLength);
  }
  if (token.size() > kMaxTokenLength) {
    return std::to_string(token.size()) + " characters, more than " + std::to_string(kMaxTokenLength);
  }
  for (size_t i = 0; i < token.size(); ++i) {
    if (!IsPrintableNonSpace(token[i])) return "character " + std::to_string(i + 1) + " is not printable ASCII";
  }
  return "";
}

// Why `name` is not a valid NAME, or "" when it is. NOTE: `name` is never empty (fields are
// split at blanks).
std::string NameProblem(std::string_view name) {
  if (name.size() > kMaxNameLength) {
    return std::to_string(name.size()) + " characters, more than " + std::to_string(kMaxNameLength);
  }
  for (size_t i = 0; i < name.size(); ++i) {
    if (!IsNameChar(name[i])) return "character " + std::to_string(i + 1) + " is not one of [A-Za-z0-9._-]";
  }
  return "";
}

std::string RoleProblem(std::string_view role) {
  bool showable = role.size() <= kMaxShownRoleLength;
  for (char c : role) showable = showable && IsPrintableNonSpace(c);
  const std::string shown =
      showable ? "'" + std::string(role) + "'" : "a " + std::to_string(role.size()) + "-character value";
  return shown + " is not one of admin, tenant, agent";
}

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kAdmin: return "admin";
    case Role::kTenant: return "tenant";
    case Role::kAgent: return "agent";
  }
  return "unknown";
}

StatusOr<TokenTable> TokenTable::Parse(std::string_view text, const std::string& path) {
  // A UTF-8 byte order mark (as some Windows editors write) is not part of the first line.
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  TokenTable table;
  std::unordered_map<std::string, unsigned> first_line;  // token -> the line it is on
  unsigned line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (line.ends_with('\r')) line.remove_suffix(1);

    const std::vector<std::string_view> fields = SplitFields(line);
    if (fields.empty() || fields[0].starts_with('#')) continue;
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    if (fields.size() < 3) {
      return InvalidArgument(where + (fields.size() == 1 ? "field 'role': missing" : "field 'name': missing"));
    }
    if (fields.size() > 3) {
      return InvalidArgument(where + std::to_string(fields.size()) +
                             " fields, expected 3: TOKEN ROLE NAME (a token has no spaces)");
    }
    const std::string_view token = fields[0], role = fields[1], name = fields[2];
    if (std::string why = TokenProblem(token); !why.empty()) {
      return InvalidArgument(where + "field 'token': " + why);
    }
    const std::optional<Role> parsed_role = ParseRole(role);
    if (!parsed_role) return InvalidArgument(where + "field 'role': " + RoleProblem(role));
    if (std::string why = NameProblem(name); !why.empty()) {
      return InvalidArgument(where + "field 'name': " + why);
    }
    auto [it, inserted] = first_line.emplace(std::string(token), line_no);
    if (!inserted) {
      return InvalidArgument(where + "field 'token': duplicate of line " + std::to_string(it->second));
    }
    table.by_token_.emplace(std::string(token), Principal{*parsed_role, std::string(name)});
  }
  return table;
}

StatusOr<TokenTable> TokenTable::Read(const std::string& path) {
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Closer> file(std::fopen(path.c_str(), "rb"));
  if (!file) return NotFound("tokens file '" + path + "': cannot be read: " + std::strerror(errno));
  std::string text;
  char buf[1 << 14];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, file.get())) > 0) text.append(buf, n);
  if (std::ferror(file.get())) {
    // E.g. EISDIR: fopen succeeds on a directory, reading it fails.
    return NotFound("tokens file '" + path + "': cannot be read: " + std::strerror(errno));
  }
  return Parse(text, path);
}

const Principal* TokenTable::Find(std::string_view token) const {
  auto it = by_token_.find(std::string(token));
  return it == by_token_.end() ? nullptr : &it->second;
}

}  // namespace estuary
