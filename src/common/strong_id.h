// StrongId<Tag>: a typed dense index (NodeId, TaskId, JobId ...) so that ids of different kinds
// cannot be mixed up. Dense ids index vectors in ClusterState; kInvalid marks "none".
#pragma once

#include <cstdint>
#include <functional>
#include <limits>

namespace estuary {

template <typename Tag>
class StrongId {
 public:
  static constexpr uint32_t kInvalidValue = std::numeric_limits<uint32_t>::max();
  constexpr StrongId() = default;
  constexpr explicit StrongId(uint32_t v) : v_(v) {}
  constexpr uint32_t value() const { return v_; }
  constexpr bool valid() const { return v_ != kInvalidValue; }
  friend constexpr bool operator==(StrongId a, StrongId b) { return a.v_ == b.v_; }
  friend constexpr auto operator<=>(StrongId a, StrongId b) { return a.v_ <=> b.v_; }

 private:
  uint32_t v_ = kInvalidValue;
};

}  // namespace estuary

template <typename Tag>
struct std::hash<estuary::StrongId<Tag>> {
  size_t operator()(estuary::StrongId<Tag> id) const noexcept { return std::hash<uint32_t>()(id.value()); }
};
