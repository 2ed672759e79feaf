// Small text helpers shared by the command line, the service's clients and the agents.
#pragma once

#include <algorithm>
#include <fstream>
#include <sstream>
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

// The whole content of the file at `path`; "" when it cannot be read (a missing file is empty).
inline std::string FileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace estuary
