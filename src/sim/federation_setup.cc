#include "sim/federation_setup.h"

#include <algorithm>

#include "common/check.h"
#include "sim/cluster/cluster_spec.h"
#include "sim/cluster/generator.h"

namespace estuary {
namespace {

// Whether a node of `state` is of GPU model `name`.
bool HasModel(const ClusterState& state, const std::string& name) {
  const std::optional<GpuModelId> id = state.models().Find(name);
  if (!id) return false;
  return std::any_of(state.nodes().begin(), state.nodes().end(), [&](const Node& n) { return n.spec.model == *id; });
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

Status CheckModels(const Scenario& s, const std::vector<ClusterState>& clusters, const JobTemplate& t) {
  const std::string where = s.path + ":" + std::to_string(t.line) + ": job '" + t.name + "': models: ";
  for (const std::string& model : t.models) {
    if (std::none_of(clusters.begin(), clusters.end(), [&](const ClusterState& c) { return HasModel(c, model); })) {
      return InvalidArgument(where + "no member has GPU model '" + model + "'");
    }
  }
  if (!t.home_only || t.home.empty() || t.models.empty()) return Status::Ok();
  const std::vector<FederationMember>& members = s.federation.members;
  const auto home = std::find_if(members.begin(), members.end(), [&](const FederationMember& m) { return m.name == t.home; });
  ESTUARY_CHECK(home != members.end());
  const ClusterState& c = clusters[static_cast<size_t>(home - members.begin())];
  if (std::none_of(t.models.begin(), t.models.end(), [&](const std::string& model) { return HasModel(c, model); })) {
    return InvalidArgument(where + "the job runs only on its home member '" + t.home + "', which has none of " +
                           Join(t.models));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<ClusterState>> LoadMemberClusters(const Scenario& s) {
  ESTUARY_CHECK(s.federation.enabled);
  std::vector<ClusterState> clusters;
  for (const FederationMember& m : s.federation.members) {
    const std::string where = s.path + ":" + std::to_string(m.line) + ": federation: member '" + m.name + "': cluster: ";
    StatusOr<ClusterState> c = m.cluster_generate ? GenerateCluster(*m.cluster_generate) : ReadClusterSpec(m.cluster_spec);
    if (!c.ok()) return Status(c.status().code(), where + c.status().message());
    if (c->num_nodes() == 0) return InvalidArgument(where + "no nodes");
    clusters.push_back(std::move(*c));
  }
  for (const JobTemplate& t : s.jobs) ESTUARY_RETURN_IF_ERROR(CheckModels(s, clusters, t));
  for (const GeneratedClass& g : s.stream.classes) ESTUARY_RETURN_IF_ERROR(CheckModels(s, clusters, g.job));
  return clusters;
}

StatusOr<ClusterState> MergeClusters(const std::vector<std::string>& names, const std::vector<const ClusterState*>& parts) {
  ESTUARY_CHECK(names.size() == parts.size());
  ClusterState out;
  // Planes by name; owner[p] is the first member that had plane p, for messages.
  std::vector<std::string> owner;
  for (size_t i = 0; i < parts.size(); ++i) {
    const ClusterState& part = *parts[i];
    ESTUARY_CHECK(part.jobs().empty());
    for (const Plane& p : part.topology().planes()) {
      if (const std::optional<PlaneId> have = out.topology().FindPlane(p.name)) {
        const std::vector<std::string>& levels = out.topology().plane(*have).levels;
        if (levels != p.levels) {
          return InvalidArgument("plane '" + p.name + "' has levels [" + Join(levels) + "] in member '" +
                                 owner[have->value()] + "' but [" + Join(p.levels) + "] in member '" + names[i] + "'");
        }
        continue;
      }
      auto id = out.topology().AddPlane(p.name, p.levels);
      if (!id.ok()) return id.status();
      owner.push_back(names[i]);
    }
    for (size_t m = 0; m < part.models().size(); ++m) {
      auto id = out.models().Intern(part.models().Name(GpuModelId(static_cast<uint32_t>(m))));
      if (!id.ok()) return InvalidArgument("member '" + names[i] + "': " + id.status().message());
    }
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const ClusterState& part = *parts[i];
    const std::string prefix = names[i] + "/";
    for (const Node& n : part.nodes()) {
      NodeSpec spec = n.spec;
      spec.name = prefix + n.spec.name;
      if (n.spec.model.valid()) spec.model = *out.models().Find(part.models().Name(n.spec.model));
      auto id = out.AddNode(std::move(spec));
      if (!id.ok()) return id.status();
      for (const Plane& p : part.topology().planes()) {
        if (!part.topology().NodeDomain(n.id, p.id, 0).valid()) continue;  // not in this plane
        std::vector<std::string> domains;
        for (int l = 0; l < static_cast<int>(p.levels.size()); ++l) {
          domains.push_back(prefix + part.topology().domain(part.topology().NodeDomain(n.id, p.id, l)).name);
        }
        ESTUARY_RETURN_IF_ERROR(out.AssignDomains(*id, *out.topology().FindPlane(p.name), domains));
      }
      if (n.state != NodeState::kReady) out.SetNodeState(*id, n.state);
    }
  }
  return out;
}

}  // namespace estuary
