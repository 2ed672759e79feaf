// The service's bearer tokens (issue 7, `estuary serve --tokens FILE`): who is calling and in
// which role. The file has one token per line:
//   TOKEN ROLE NAME
// separated by runs of spaces or tabs; blank lines and lines whose first non-blank character is
// '#' are ignored (so a TOKEN cannot start with '#'). CRLF line endings and a leading UTF-8 byte
// order mark are tolerated. An empty file is a valid table with no tokens.
//   TOKEN  16 to 256 printable ASCII characters, no spaces (a secret: never logged or echoed)
//   ROLE   admin | tenant | agent
//   NAME   the tenant (tenant), the agent (agent) or the operator (admin); 1 to 63 characters of
//          [A-Za-z0-9._-]
// A token may appear once; a NAME may have several tokens (rotation).
// Errors are one line naming the file, the line and the field, e.g.
//   "tokens.txt:3: field 'role': 'root' is not one of admin, tenant, agent"
//   "tokens.txt:4: field 'token': duplicate of line 2"
// and never contain a token: a ROLE value of 16 or more characters, or with a non-printable
// character, is described by its length only (it may be a token in the wrong column).
// Thread-safety: a TokenTable is immutable after Parse/Read; Find is safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/status.h"

namespace estuary {

enum class Role : uint8_t { kAdmin, kTenant, kAgent };

// "admin", "tenant" or "agent".
std::string_view RoleName(Role role);

// Who a request comes from.
struct Principal {
  Role role = Role::kTenant;
  std::string name;
};

class TokenTable {
 public:
  // Parses the text of a tokens file; `path` only names it in errors.
  static StatusOr<TokenTable> Parse(std::string_view text, const std::string& path);
  // Reads and parses `path`; NotFound when it cannot be read ("tokens file 'PATH': cannot be
  // read: REASON").
  static StatusOr<TokenTable> Read(const std::string& path);

  // The principal of `token`; nullptr when the token is unknown.
  const Principal* Find(std::string_view token) const;
  size_t size() const { return by_token_.size(); }

 private:
  std::unordered_map<std::string, Principal> by_token_;
};

}  // namespace estuary
