#include "model/gpu_models.h"

namespace estuary {

StatusOr<GpuModelId> GpuModels::Intern(std::string_view name) {
  if (auto id = Find(name)) return *id;
  if (names_.size() >= GpuModelSet::kMaxModels) {
    return InvalidArgument("too many GPU models (the limit is 64)");
  }
  GpuModelId id(static_cast<uint32_t>(names_.size()));
  names_.emplace_back(name);
  ids_.emplace(std::string(name), id);
  return id;
}

std::optional<GpuModelId> GpuModels::Find(std::string_view name) const {
  auto it = ids_.find(std::string(name));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

StatusOr<GpuModelSet> GpuModels::ParseSet(std::string_view spec) const {
  GpuModelSet set;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find('|', start);
    if (end == std::string_view::npos) end = spec.size();
    std::string_view part = spec.substr(start, end - start);
    if (!part.empty()) {
      auto id = Find(part);
      if (!id) return InvalidArgument("unknown GPU model '" + std::string(part) + "'");
      set.Add(*id);
    }
    start = end + 1;
  }
  return set;
}

}  // namespace estuary
