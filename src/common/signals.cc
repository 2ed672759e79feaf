#include "common/signals.h"

#include <signal.h>
#include <string.h>

namespace estuary {

std::optional<int> SignalByName(const std::string& name) {
  if (name.empty() || name.size() > 16) return std::nullopt;
  if (name.find_first_not_of("0123456789") == std::string::npos) {
    const int n = std::stoi(name);
    return n >= 1 && n < SIGRTMIN ? std::optional<int>(n) : std::nullopt;
  }
  std::string upper;
  for (char c : name) upper += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  if (upper.rfind("SIG", 0) == 0) upper = upper.substr(3);
  for (int s = 1; s < SIGRTMIN; ++s) {
    const char* abbrev = sigabbrev_np(s);
    if (abbrev != nullptr && upper == abbrev) return s;
  }
  return std::nullopt;
}

std::string SignalName(int number) {
  const char* abbrev = number >= 1 && number < SIGRTMIN ? sigabbrev_np(number) : nullptr;
  return abbrev == nullptr ? "" : std::string("SIG") + abbrev;
}

}  // namespace estuary
