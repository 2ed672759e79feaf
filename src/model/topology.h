// Topology: the network of a cluster as named planes, each an ordered list of levels from the
// widest to the narrowest — e.g. plane "data": az > spine > asw > node, plane "param":
// rdma_pod > node (Kuaishou's dual-plane RDMA network; Alibaba's ASW domains). The narrowest
// level "node" is implicit: every node is its own domain there, so it need not be listed.
//
// Every node assigned to a plane belongs to exactly one domain at each listed level, and a
// domain lies within exactly one domain of the level above (its parent); both are checked when a
// node is assigned. Domains are named per (plane, level); the same name at two levels or in two
// planes denotes different domains.
//
// ClusterState owns the Topology and keeps per-domain aggregates (GPU capacity and free milli,
// nodes, wholly free nodes) current on every change of a node; see ClusterState::domain_free().
// Thread-safety: none.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "model/resources.h"

namespace estuary {

struct PlaneTag {};
struct DomainTag {};
using PlaneId = StrongId<PlaneTag>;
using DomainId = StrongId<DomainTag>;

struct Plane {
  PlaneId id;
  std::string name;
  std::vector<std::string> levels;  // widest first; never includes "node"
};

struct Domain {
  DomainId id;
  PlaneId plane;
  int level = 0;         // index into the plane's levels
  std::string name;
  DomainId parent;       // invalid at level 0
  std::vector<NodeId> nodes;
};

class Topology {
 public:
  // Adds a plane. Fails on an empty or duplicate plane name, no levels, an empty or duplicate
  // level name. A trailing "node" level is dropped (it is implicit); "node" elsewhere is an error.
  StatusOr<PlaneId> AddPlane(std::string name, std::vector<std::string> levels);
  std::optional<PlaneId> FindPlane(std::string_view name) const;
  // The index of `level` in the plane, or nullopt ("node" is not a listed level).
  std::optional<int> FindLevel(PlaneId plane, std::string_view level) const;
  const Plane& plane(PlaneId id) const { return planes_[id.value()]; }
  const std::vector<Plane>& planes() const { return planes_; }

  // Puts `node` into the domains named `names` (one per level of the plane, widest first).
  // Fails when the node is already in the plane, the count of names is wrong, a name is empty,
  // or a domain would get a second parent.
  Status AssignNode(NodeId node, PlaneId plane, std::span<const std::string> names);

  // The node's domain at `level` of `plane`; invalid when the node is not in the plane.
  DomainId NodeDomain(NodeId node, PlaneId plane, int level) const;
  const Domain& domain(DomainId id) const { return domains_[id.value()]; }
  const std::vector<Domain>& domains() const { return domains_; }
  // The domains at one level of a plane, in order of creation.
  const std::vector<DomainId>& DomainsAt(PlaneId plane, int level) const { return by_level_[plane.value()][level]; }
  std::optional<DomainId> FindDomain(PlaneId plane, int level, std::string_view name) const;
  // Every domain the node belongs to, over all planes and levels (for aggregate updates).
  std::span<const DomainId> DomainsOf(NodeId node) const;

 private:
  std::vector<Plane> planes_;
  std::vector<Domain> domains_;
  std::vector<std::vector<std::vector<DomainId>>> by_level_;  // [plane][level]
  std::unordered_map<std::string, DomainId> by_key_;          // "plane\x1flevel\x1fname"
  // node_domains_[node] = domains of the node in (plane, level) order; invalid = unassigned.
  std::vector<std::vector<DomainId>> node_domains_;
  std::vector<size_t> plane_offset_;  // first slot of each plane in a node's domain list
  size_t slots_ = 0;
};

}  // namespace estuary
