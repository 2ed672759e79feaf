// kube-scheduler's default preemption (the DefaultPreemption PostFilter plugin) as a victim
// selection of PreemptAction::Plan, chosen by AllocateOptions::victims = VictimSelection::kKube
// (configuration key `preempt: {victims: k8s}`; docs/peers.md, k8s-default).
//
// kube preempts for one pod at a time. The preemptor here is a gang of `need` identical replicas
// (a coscheduling PodGroup, all-or-nothing); its replicas are taken one by one, as kube's
// scheduling cycles take its pods:
//   1. A replica that fits on the capacity free now (plus what earlier steps freed, minus the
//      replicas placed before it) takes it: such a pod is scheduled without preemption (the
//      lowest node id; the allocate action later places by the policy).
//   2. Otherwise, per usable node (Ready, not held for another job, a GPU model the job admits) —
//      kube's SelectVictimsOnNode: remove every eligible task on the node; if the replica still
//      does not fit, the node is no candidate. Else re-add ("reprieve") them one by one, most
//      important first (higher priority, then earlier start: util.MoreImportantPod), keeping
//      each that leaves the replica fitting; the rest are the node's victims.
//   3. The node is picked as pickOneNodeForPreemption does, criterion by criterion: fewest PDB
//      violations (estuary has no PDBs: all 0), lowest highest victim priority, lowest sum of
//      (priority + 2^31) over the victims, fewest victims, latest earliest-start among the
//      victims of the highest priority, then the first node (here: the lowest node id; kube's
//      map order).
//   4. The replica is nominated to that node (its request counts as used there) and its victims
//      go: a victim of an elastic job that keeps at least its min replicas without it (step 1,
//      i.e. without Align) is removed alone — the job shrinks, as an elastic job loses a deleted
//      pod, losing no work (estuary's convention for shrinking); any other victim's job is
//      evicted whole — an estuary job is a gang, and the controller of a gang (JobSet, a
//      PyTorchJob...) restarts all of its pods when one is deleted — and every task of it, on
//      every node, is freed for the next replicas.
// All-or-nothing: when some replica finds no node, the plan is infeasible and evicts nothing
// (kube + coscheduling would already have evicted the earlier pods' victims; see docs/peers.md).
//
// Eligible victims are the same as estuary's Reclaim: tasks of preemptible jobs of priority
// strictly below the preemptor's (or VictimFilter::allowed), none in Standby or already being
// evicted; VictimFilter::take is asked once per eligible job (its whole GPU milli) when it is
// first met; VictimFilter::rank is not used (kube has no queues). Required topology levels are
// not honoured (kube's default profile has none): the configuration parser refuses
// `victims: k8s` with `topology: true`.
// Left out of kube's search: the candidate sample (kube evaluates at least
// max(100, 10% of the nodes) from a random offset, DefaultPreemptionArgs); here every node is
// evaluated — kube's best case.
//
// Cost: per replica, the nodes whose room or candidates changed are evaluated again (O(k log k
// + k G) each, k eligible tasks on the node, G GPUs), the others keep their cached result; the
// pick is a scan of the N cached results.
#pragma once

#include <cstdint>
#include <span>

#include "sched/actions/preempt.h"

namespace estuary {

PreemptionPlan KubePreemptionPlan(const ClusterState& state, JobId preemptor, const TaskRequest& req, int64_t need,
                                  int64_t now_s, bool align, std::span<const char> being_evicted,
                                  const VictimFilter& filter);

}  // namespace estuary
