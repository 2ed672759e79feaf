// Registry: plugins by name. Adding a policy = one plugin class + one Register call in its
// folder's Register function + tests + a doc paragraph; no enum switch anywhere.
// Thread-safety: fill once at start-up, then read-only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "sched/framework/plugin.h"

namespace estuary {

class Registry {
 public:
  using ScoreFactory = std::function<std::unique_ptr<ScorePlugin>(const PluginContext&)>;
  using GpuSelectFactory = std::function<std::unique_ptr<GpuSelectPlugin>(const PluginContext&)>;
  using FilterFactory = std::function<std::unique_ptr<FilterPlugin>(const PluginContext&)>;

  void RegisterScore(std::string name, ScoreFactory f) { score_[std::move(name)] = std::move(f); }
  void RegisterGpuSelect(std::string name, GpuSelectFactory f) { gpu_[std::move(name)] = std::move(f); }
  void RegisterFilter(std::string name, FilterFactory f) { filter_[std::move(name)] = std::move(f); }

  // Fail with NotFound naming the plugin and listing the known names.
  StatusOr<std::unique_ptr<ScorePlugin>> MakeScore(const std::string& name, const PluginContext& ctx) const;
  StatusOr<std::unique_ptr<GpuSelectPlugin>> MakeGpuSelect(const std::string& name, const PluginContext& ctx) const;
  StatusOr<std::unique_ptr<FilterPlugin>> MakeFilter(const std::string& name, const PluginContext& ctx) const;

  std::vector<std::string> ScoreNames() const;

 private:
  std::map<std::string, ScoreFactory> score_;
  std::map<std::string, GpuSelectFactory> gpu_;
  std::map<std::string, FilterFactory> filter_;
};

}  // namespace estuary
