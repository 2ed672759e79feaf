#include "model/topology.h"

#include <unordered_set>

namespace estuary {
namespace {
std::string Key(PlaneId p, int level, std::string_view name) {
  return std::to_string(p.value()) + "\x1f" + std::to_string(level) + "\x1f" + std::string(name);
}
}  // namespace

StatusOr<PlaneId> Topology::AddPlane(std::string name, std::vector<std::string> levels) {
  if (name.empty()) return InvalidArgument("a topology plane needs a name");
  if (FindPlane(name)) return InvalidArgument("duplicate topology plane '" + name + "'");
  if (!levels.empty() && levels.back() == "node") levels.pop_back();
  if (levels.empty()) return InvalidArgument("plane '" + name + "' has no levels above 'node'");
  std::unordered_set<std::string> seen;
  for (const std::string& l : levels) {
    if (l.empty()) return InvalidArgument("plane '" + name + "' has an empty level name");
    if (l == "node") return InvalidArgument("plane '" + name + "': 'node' can only be the last level");
    if (!seen.insert(l).second) return InvalidArgument("plane '" + name + "' lists level '" + l + "' twice");
  }
  if (!node_domains_.empty() && slots_ > 0) {
    // Planes must be declared before nodes are assigned (a node's slots are laid out per plane).
    for (const auto& d : node_domains_) {
      if (!d.empty()) return InvalidArgument("plane '" + name + "' added after nodes were assigned");
    }
  }
  Plane p;
  p.id = PlaneId(static_cast<uint32_t>(planes_.size()));
  p.name = std::move(name);
  p.levels = std::move(levels);
  plane_offset_.push_back(slots_);
  slots_ += p.levels.size();
  by_level_.emplace_back(p.levels.size());
  planes_.push_back(std::move(p));
  return planes_.back().id;
}

std::optional<PlaneId> Topology::FindPlane(std::string_view name) const {
  for (const Plane& p : planes_) {
    if (p.name == name) return p.id;
  }
  return std::nullopt;
}

std::optional<int> Topology::FindLevel(PlaneId plane, std::string_view level) const {
  const auto& ls = planes_[plane.value()].levels;
  for (size_t i = 0; i < ls.size(); ++i) {
    if (ls[i] == level) return static_cast<int>(i);
  }
  return std::nullopt;
}

std::optional<DomainId> Topology::FindDomain(PlaneId plane, int level, std::string_view name) const {
  auto it = by_key_.find(Key(plane, level, name));
  if (it == by_key_.end()) return std::nullopt;
  return it->second;
}

Status Topology::AssignNode(NodeId node, PlaneId plane_id, std::span<const std::string> names) {
  const Plane& plane = planes_[plane_id.value()];
  if (names.size() != plane.levels.size()) {
    return InvalidArgument("plane '" + plane.name + "' has " + std::to_string(plane.levels.size()) +
                           " levels, got " + std::to_string(names.size()) + " domain names");
  }
  if (node_domains_.size() <= node.value()) node_domains_.resize(node.value() + 1);
  auto& slots = node_domains_[node.value()];
  if (slots.empty()) slots.assign(slots_, DomainId());
  const size_t base = plane_offset_[plane_id.value()];
  if (slots[base].valid()) return InvalidArgument("node already placed in plane '" + plane.name + "'");
  // Check nesting before changing anything.
  for (size_t l = 0; l < names.size(); ++l) {
    if (names[l].empty()) return InvalidArgument("empty domain name at level '" + plane.levels[l] + "'");
    if (l == 0) continue;
    auto d = FindDomain(plane_id, static_cast<int>(l), names[l]);
    if (!d) continue;
    auto parent = FindDomain(plane_id, static_cast<int>(l - 1), names[l - 1]);
    if (!parent || domains_[d->value()].parent != *parent) {
      return InvalidArgument(plane.levels[l] + " '" + names[l] + "' is already under " + plane.levels[l - 1] + " '" +
                             domains_[domains_[d->value()].parent.value()].name + "', not '" + names[l - 1] + "'");
    }
  }
  DomainId parent;
  for (size_t l = 0; l < names.size(); ++l) {
    const int level = static_cast<int>(l);
    DomainId id;
    if (auto found = FindDomain(plane_id, level, names[l])) {
      id = *found;
    } else {
      Domain d;
      d.id = DomainId(static_cast<uint32_t>(domains_.size()));
      d.plane = plane_id;
      d.level = level;
      d.name = names[l];
      d.parent = parent;
      by_key_.emplace(Key(plane_id, level, d.name), d.id);
      by_level_[plane_id.value()][l].push_back(d.id);
      domains_.push_back(std::move(d));
      id = domains_.back().id;
    }
    domains_[id.value()].nodes.push_back(node);
    slots[base + l] = id;
    parent = id;
  }
  return Status::Ok();
}

DomainId Topology::NodeDomain(NodeId node, PlaneId plane, int level) const {
  if (node.value() >= node_domains_.size() || node_domains_[node.value()].empty()) return DomainId();
  return node_domains_[node.value()][plane_offset_[plane.value()] + level];
}

std::span<const DomainId> Topology::DomainsOf(NodeId node) const {
  if (node.value() >= node_domains_.size()) return {};
  return node_domains_[node.value()];
}

}  // namespace estuary
