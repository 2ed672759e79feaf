// Error context of the YAML readers (cluster specs, scenarios): every message is
// "file:line: field 'f': ..." (yaml-cpp marks are 0-based).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "common/status.h"

namespace estuary {

struct YamlContext {
  const std::string& file;
  Status Err(const YAML::Node& n, const std::string& field, const std::string& msg) const {
    const int line = n.Mark().line >= 0 ? n.Mark().line + 1 : 0;
    return InvalidArgument(file + ":" + std::to_string(line) + ": field '" + field + "': " + msg);
  }
};

}  // namespace estuary
