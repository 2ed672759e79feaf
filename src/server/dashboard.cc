// PLACEHOLDER until the embedded dashboard lands (being written now): no files.
#include "server/dashboard.h"

namespace estuary {

std::optional<DashboardFile> FindDashboardFile(std::string_view) { return std::nullopt; }

}  // namespace estuary
