// The service's dashboard: static files (HTML, JavaScript, CSS and the npm charting library)
// embedded into the binary at build time and served under /dashboard/ (HttpApi). The page reads
// the API with a token the user gives it; the files themselves hold no data.
#pragma once

#include <optional>
#include <string_view>

namespace estuary {

struct DashboardFile {
  std::string_view body;
  std::string_view content_type;
};

// The file at `path` below /dashboard/ ("" or "index.html": the page); nullopt when none.
std::optional<DashboardFile> FindDashboardFile(std::string_view path);

}  // namespace estuary
