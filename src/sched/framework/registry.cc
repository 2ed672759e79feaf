#include "sched/framework/registry.h"

namespace estuary {
namespace {
template <typename Map>
std::string Known(const Map& m) {
  std::string s;
  for (const auto& [k, v] : m) s += (s.empty() ? "" : ", ") + k;
  return s;
}
template <typename T, typename Map>
StatusOr<std::unique_ptr<T>> Make(const Map& m, const char* kind, const std::string& name,
                                  const PluginContext& ctx) {
  auto it = m.find(name);
  if (it == m.end()) {
    return NotFound(std::string("unknown ") + kind + " plugin '" + name + "' (known: " + Known(m) + ")");
  }
  return it->second(ctx);
}
}  // namespace

StatusOr<std::unique_ptr<ScorePlugin>> Registry::MakeScore(const std::string& name, const PluginContext& ctx) const {
  return Make<ScorePlugin>(score_, "score", name, ctx);
}
StatusOr<std::unique_ptr<GpuSelectPlugin>> Registry::MakeGpuSelect(const std::string& name, const PluginContext& ctx) const {
  return Make<GpuSelectPlugin>(gpu_, "gpu-select", name, ctx);
}
StatusOr<std::unique_ptr<FilterPlugin>> Registry::MakeFilter(const std::string& name, const PluginContext& ctx) const {
  return Make<FilterPlugin>(filter_, "filter", name, ctx);
}
std::vector<std::string> Registry::ScoreNames() const {
  std::vector<std::string> v;
  for (const auto& [k, f] : score_) v.push_back(k);
  return v;
}

}  // namespace estuary
