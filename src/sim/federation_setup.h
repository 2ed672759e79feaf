// The clusters of a federation scenario (Scenario::federation, issue 6): each member's cluster,
// loaded and checked against the workload, and the `merged` configuration's single cluster of all
// members' nodes.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "model/cluster_state.h"
#include "sim/scenario.h"

namespace estuary {

// The members' clusters, in member order: each member's spec file read (ReadClusterSpec) or its
// generator options run (GenerateCluster). Then checks the workload against them: every job
// template (listed jobs and generator classes) whose `models` names a GPU model that no member has
// a node of, and every job with `home` and `home_only` whose home member has no node of any of its
// models, is an error. Errors: "<scenario>:<member line>: federation: member 'X': cluster: ..."
// (a read or generate error, with its own code; or "no nodes" for a member without nodes) and
// "<scenario>:<job line>: job 'J': models: ..." (InvalidArgument).
// REQUIRES: s.federation.enabled.
StatusOr<std::vector<ClusterState>> LoadMemberClusters(const Scenario& s);

// One cluster of the nodes of every part: the nodes of parts[0], then of parts[1], ..., each in
// its node order, named "MEMBER/NODE" (MEMBER = names[i]) with the same CPU, memory, GPU count,
// labels and state (ready, cordoned, down). GPU models are interned by name, so a model has one id
// in the result whatever its ids in the parts. Planes are merged by name; each node keeps its
// domains in every plane it was assigned to, with the domain names prefixed "MEMBER/", so no
// domain of one member merges with another's (every member is its own subtree under each level
// 0). Only nodes, models and topology are copied. Fails (InvalidArgument, naming both members)
// when a plane of one name has different levels in two members.
// REQUIRES: names.size() == parts.size(); no part has jobs.
StatusOr<ClusterState> MergeClusters(const std::vector<std::string>& names, const std::vector<const ClusterState*>& parts);

}  // namespace estuary
