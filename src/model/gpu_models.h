// GpuModels: interns GPU model names ("V100M16", "T4", ...) into dense GpuModelId values so that
// model checks on the hot path are bit tests. Names are case-sensitive, as in the traces.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "model/resources.h"

namespace estuary {

class GpuModels {
 public:
  // Returns the id of `name`, adding it when new. Fails when more than 64 models would exist.
  StatusOr<GpuModelId> Intern(std::string_view name);
  std::optional<GpuModelId> Find(std::string_view name) const;
  const std::string& Name(GpuModelId id) const { return names_[id.value()]; }
  size_t size() const { return names_.size(); }
  // Parses "A|B|C" (empty = any) into a set of known models. Fails naming the first unknown model.
  StatusOr<GpuModelSet> ParseSet(std::string_view spec) const;

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, GpuModelId> ids_;
};

}  // namespace estuary
