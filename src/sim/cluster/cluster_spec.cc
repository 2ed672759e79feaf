#include "sim/cluster/cluster_spec.h"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_set>

#include "sim/cluster/yaml_context.h"

namespace estuary {
namespace {

using Ctx = YamlContext;

// Declares `const YAML::Node var = parent[key]` and returns an error when it is absent. (yaml-cpp
// nodes are references: assigning one bound node to another would rewrite the document, so every
// node gets its own const variable.)
#define REQUIRE_FIELD(var, parent, key)                          \
  const YAML::Node var = (parent)[key];                          \
  if (!var) return c.Err(parent, key, "missing")

StatusOr<int64_t> Int(const Ctx& c, const YAML::Node& n, const std::string& field, int64_t min, int64_t max) {
  if (!n.IsScalar()) return c.Err(n, field, "expected an integer");
  int64_t v = 0;
  try {
    v = n.as<int64_t>();
  } catch (const YAML::Exception&) {
    return c.Err(n, field, "'" + n.Scalar() + "' is not an integer");
  }
  if (v < min || v > max) {
    return c.Err(n, field, std::to_string(v) + " is outside [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return v;
}

StatusOr<std::string> Str(const Ctx& c, const YAML::Node& n, const std::string& field) {
  if (!n.IsScalar() || n.Scalar().empty()) return c.Err(n, field, "expected a non-empty string");
  return n.Scalar();
}

constexpr int64_t kMaxCapacity = 1'000'000'000'000;

struct Pool {
  int32_t gpus = 0;
  GpuModelId model;
  MilliCpu cpu_milli = 0;
  MemMiB mem_mib = 0;
};

// Exactly one of `a` (scaled by `scale_a`) or `b`.
StatusOr<int64_t> OneOf(const Ctx& c, const YAML::Node& m, const char* a, int64_t scale_a, const char* b) {
  const YAML::Node na = m[a], nb = m[b];
  if (na && nb) return c.Err(m, a, std::string("give ") + a + " or " + b + ", not both");
  if (!na && !nb) return c.Err(m, a, std::string("missing (or give ") + b + ")");
  if (na) {
    int64_t v = 0;
    ESTUARY_ASSIGN_OR_RETURN(v, Int(c, na, a, 0, kMaxCapacity / scale_a));
    return v * scale_a;
  }
  return Int(c, nb, b, 0, kMaxCapacity);
}

// The `pools:` list of `root` by name (their GPU models interned in `state`).
StatusOr<std::map<std::string, Pool>> ParsePools(const Ctx& c, const YAML::Node& root, ClusterState& state) {
  REQUIRE_FIELD(pools, root, "pools");
  if (!pools.IsSequence() || pools.size() == 0) return c.Err(pools, "pools", "expected a non-empty list");
  std::map<std::string, Pool> pool_by_name;
  for (const YAML::Node& p : pools) {
    if (!p.IsMap()) return c.Err(p, "pools", "expected a mapping per pool");
    for (auto it = p.begin(); it != p.end(); ++it) {
      static const std::unordered_set<std::string> kKnown = {"name", "gpu_model", "gpus_per_node", "cpu_cores",
                                                             "cpu_milli", "memory_gib", "memory_mib"};
      if (!kKnown.count(it->first.Scalar())) return c.Err(it->first, it->first.Scalar(), "unknown pool field");
    }
    std::string name;
    REQUIRE_FIELD(name_node, p, "name");
    ESTUARY_ASSIGN_OR_RETURN(name, Str(c, name_node, "name"));
    if (pool_by_name.count(name)) return c.Err(name_node, "name", "duplicate pool '" + name + "'");
    Pool pool;
    REQUIRE_FIELD(gpus_node, p, "gpus_per_node");
    int64_t gpus = 0;
    ESTUARY_ASSIGN_OR_RETURN(gpus, Int(c, gpus_node, "gpus_per_node", 0, kMaxGpusPerNode));
    pool.gpus = static_cast<int32_t>(gpus);
    const YAML::Node model = p["gpu_model"];
    if (pool.gpus > 0) {
      if (!model) return c.Err(p, "gpu_model", "missing (pool '" + name + "' has GPUs)");
      std::string m;
      ESTUARY_ASSIGN_OR_RETURN(m, Str(c, model, "gpu_model"));
      auto id = state.models().Intern(m);
      if (!id.ok()) return c.Err(model, "gpu_model", id.status().message());
      pool.model = *id;
    } else if (model) {
      return c.Err(model, "gpu_model", "a pool without GPUs has no GPU model");
    }
    ESTUARY_ASSIGN_OR_RETURN(pool.cpu_milli, OneOf(c, p, "cpu_cores", 1000, "cpu_milli"));
    ESTUARY_ASSIGN_OR_RETURN(pool.mem_mib, OneOf(c, p, "memory_gib", 1024, "memory_mib"));
    pool_by_name[name] = pool;
  }

  return pool_by_name;
}

// The `topology:` planes of `root`, added to `state`; `level_of` maps each level name to its
// plane and index.
Status ParseTopology(const Ctx& c, const YAML::Node& root, ClusterState& state,
                     std::map<std::string, std::pair<PlaneId, int>>& level_of) {
  if (const YAML::Node topo = root["topology"]) {
    REQUIRE_FIELD(planes, topo, "planes");
    if (!planes.IsSequence()) return c.Err(planes, "planes", "expected a list");
    for (const YAML::Node& p : planes) {
      if (!p.IsMap()) return c.Err(p, "planes", "expected a mapping per plane");
      std::string name;
      REQUIRE_FIELD(plane_name, p, "name");
      ESTUARY_ASSIGN_OR_RETURN(name, Str(c, plane_name, "name"));
      REQUIRE_FIELD(levels, p, "levels");
      if (!levels.IsSequence()) return c.Err(levels, "levels", "expected a list of level names");
      std::vector<std::string> ls;
      for (const YAML::Node& l : levels) {
        std::string s;
        ESTUARY_ASSIGN_OR_RETURN(s, Str(c, l, "levels"));
        ls.push_back(s);
      }
      auto plane = state.topology().AddPlane(name, ls);
      if (!plane.ok()) return c.Err(p, "planes", plane.status().message());
      const auto& listed = state.topology().plane(*plane).levels;
      for (size_t i = 0; i < listed.size(); ++i) {
        if (level_of.count(listed[i])) {
          return c.Err(levels, "levels", "level '" + listed[i] + "' appears in two planes; level names must be unique");
        }
        level_of[listed[i]] = {*plane, static_cast<int>(i)};
      }
    }
  }

  return Status::Ok();
}

}  // namespace

StatusOr<ClusterState> ParseClusterSpec(const std::string& text, const std::string& file) {
  Ctx c{file};
  YAML::Node loaded;
  try {
    loaded = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return InvalidArgument(file + ":" + std::to_string(e.mark.line + 1) + ": malformed YAML (" + e.msg + ")");
  }
  const YAML::Node root = loaded;
  if (!root.IsMap()) return InvalidArgument(file + ":1: expected a mapping with pools, topology and nodes");
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string k = it->first.Scalar();
    if (k != "pools" && k != "topology" && k != "nodes" && k != "name") return c.Err(it->first, k, "unknown field");
  }
  ClusterState state;

  std::map<std::string, Pool> pool_by_name;
  ESTUARY_ASSIGN_OR_RETURN(pool_by_name, ParsePools(c, root, state));
  std::map<std::string, std::pair<PlaneId, int>> level_of;  // level name -> (plane, index)
  ESTUARY_RETURN_IF_ERROR(ParseTopology(c, root, state, level_of));

  // Nodes.
  REQUIRE_FIELD(nodes, root, "nodes");
  if (!nodes.IsSequence() || nodes.size() == 0) return c.Err(nodes, "nodes", "expected a non-empty list");
  std::unordered_set<std::string> names;
  for (const YAML::Node& entry : nodes) {
    if (!entry.IsMap()) return c.Err(entry, "nodes", "expected a mapping per node or node group");
    for (auto it = entry.begin(); it != entry.end(); ++it) {
      static const std::unordered_set<std::string> kKnown = {"name", "name_prefix", "count", "pool", "domains"};
      if (!kKnown.count(it->first.Scalar())) return c.Err(it->first, it->first.Scalar(), "unknown node field");
    }
    const YAML::Node name_node = entry["name"], prefix_node = entry["name_prefix"];
    if (name_node && prefix_node) return c.Err(entry, "name", "give name (one node) or name_prefix (a group), not both");
    if (!name_node && !prefix_node) return c.Err(entry, "name", "missing (or give name_prefix and count)");
    int64_t count = 1;
    std::string base;
    if (prefix_node) {
      ESTUARY_ASSIGN_OR_RETURN(base, Str(c, prefix_node, "name_prefix"));
      REQUIRE_FIELD(count_node, entry, "count");
      ESTUARY_ASSIGN_OR_RETURN(count, Int(c, count_node, "count", 1, 1'000'000));
    } else {
      ESTUARY_ASSIGN_OR_RETURN(base, Str(c, name_node, "name"));
      if (entry["count"]) return c.Err(entry["count"], "count", "count goes with name_prefix, not name");
    }
    REQUIRE_FIELD(pool_node, entry, "pool");
    std::string pool_name;
    ESTUARY_ASSIGN_OR_RETURN(pool_name, Str(c, pool_node, "pool"));
    auto pool_it = pool_by_name.find(pool_name);
    if (pool_it == pool_by_name.end()) return c.Err(pool_node, "pool", "unknown pool '" + pool_name + "'");
    // Domains: level name -> domain name; every level of every plane must be given.
    std::vector<std::vector<std::string>> per_plane(state.topology().planes().size());
    for (const Plane& pl : state.topology().planes()) per_plane[pl.id.value()].resize(pl.levels.size());
    const YAML::Node domains = entry["domains"];
    if (domains) {
      if (!domains.IsMap()) return c.Err(domains, "domains", "expected a mapping of level to domain name");
      for (auto it = domains.begin(); it != domains.end(); ++it) {
        const std::string level = it->first.Scalar();
        auto lv = level_of.find(level);
        if (lv == level_of.end()) return c.Err(it->first, "domains", "unknown level '" + level + "'");
        std::string d;
        ESTUARY_ASSIGN_OR_RETURN(d, Str(c, it->second, "domains." + level));
        per_plane[lv->second.first.value()][lv->second.second] = d;
      }
    }
    for (const Plane& pl : state.topology().planes()) {
      for (size_t l = 0; l < pl.levels.size(); ++l) {
        if (per_plane[pl.id.value()][l].empty()) {
          return c.Err(domains ? domains : entry, "domains", "no domain at level '" + pl.levels[l] + "' of plane '" + pl.name + "'");
        }
      }
    }
    const Pool& pool = pool_it->second;
    for (int64_t i = 0; i < count; ++i) {
      std::string name = base;
      if (prefix_node) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%04lld", static_cast<long long>(i));
        name += buf;
      }
      if (!names.insert(name).second) return c.Err(prefix_node ? prefix_node : name_node, "name", "duplicate node name '" + name + "'");
      NodeSpec s;
      s.name = name;
      s.cpu_milli = pool.cpu_milli;
      s.mem_mib = pool.mem_mib;
      s.gpu_count = pool.gpus;
      s.model = pool.model;
      auto id = state.AddNode(std::move(s));
      if (!id.ok()) return c.Err(entry, "name", id.status().message());
      for (const Plane& pl : state.topology().planes()) {
        Status st = state.AssignDomains(*id, pl.id, per_plane[pl.id.value()]);
        if (!st.ok()) return c.Err(domains, "domains", st.message());
      }
    }
  }
  return state;
}

StatusOr<ClusterState> ReadClusterSpec(const std::string& path) {
  std::ifstream f(path);
  if (!f) return InvalidArgument(path + ": cannot open file");
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return InvalidArgument(path + ": read failed");
  return ParseClusterSpec(ss.str(), path);
}

std::string WriteClusterSpec(const ClusterState& state) {
  std::ostringstream o;
  const Topology& topo = state.topology();
  // One pool per distinct (model, gpus, cpu, memory).
  std::map<std::tuple<std::string, int32_t, MilliCpu, MemMiB>, std::string> pools;
  auto pool_key = [&](const Node& n) {
    return std::make_tuple(n.spec.model.valid() ? state.models().Name(n.spec.model) : std::string(), n.spec.gpu_count,
                           n.spec.cpu_milli, n.spec.mem_mib);
  };
  for (const Node& n : state.nodes()) {
    auto k = pool_key(n);
    if (!pools.count(k)) pools[k] = "pool" + std::to_string(pools.size());
  }
  o << "pools:\n";
  for (const auto& [k, name] : pools) {
    const auto& [model, gpus, cpu, mem] = k;
    o << "  - {name: " << name << ", ";
    if (gpus > 0) o << "gpu_model: \"" << model << "\", ";
    o << "gpus_per_node: " << gpus << ", cpu_milli: " << cpu << ", memory_mib: " << mem << "}\n";
  }
  if (!topo.planes().empty()) {
    o << "topology:\n  planes:\n";
    for (const Plane& p : topo.planes()) {
      o << "    - {name: " << p.name << ", levels: [";
      for (const std::string& l : p.levels) o << l << ", ";
      o << "node]}\n";
    }
  }
  o << "nodes:\n";
  for (const Node& n : state.nodes()) {
    o << "  - {name: \"" << n.spec.name << "\", pool: " << pools[pool_key(n)];
    if (!topo.planes().empty()) {
      o << ", domains: {";
      bool first = true;
      for (const Plane& p : topo.planes()) {
        for (size_t l = 0; l < p.levels.size(); ++l) {
          const DomainId d = topo.NodeDomain(n.id, p.id, static_cast<int>(l));
          if (!d.valid()) continue;
          o << (first ? "" : ", ") << p.levels[l] << ": \"" << topo.domain(d).name << "\"";
          first = false;
        }
      }
      o << "}";
    }
    o << "}\n";
  }
  return o.str();
}

}  // namespace estuary
