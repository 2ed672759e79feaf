// Small text helpers shared by the command line and the service's clients.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace estuary {

// The parts of `text` between `sep`s, in order. Empty parts are dropped unless `keep_empty`
// (then "a,,b" gives "a", "", "b" and "" gives one empty part).
inline std::vector<std::string> SplitList(std::string_view text, char sep, bool keep_empty = false) {
  std::vector<std::string> parts;
  for (size_t at = 0; at <= text.size();) {
    const size_t end = std::min(text.find(sep, at), text.size());
    if (keep_empty || end > at) parts.emplace_back(text.substr(at, end - at));
    at = end + 1;
  }
  return parts;
}

}  // namespace estuary
