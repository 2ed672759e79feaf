// POSIX signals by name, as users write them in a job (`checkpoint_signal`) and as the agent sends
// them. Thread-safety: free functions without shared state.
#pragma once

#include <optional>
#include <string>

namespace estuary {

// The number of a signal named "SIGTERM", "TERM", "sigusr1" or "15" (1..SIGRTMIN-1); nullopt for
// anything else.
std::optional<int> SignalByName(const std::string& name);

// The canonical name of signal `number`: "SIGTERM"; "" when it has none.
std::string SignalName(int number);

}  // namespace estuary
