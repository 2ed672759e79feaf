// `estuary simulate` of a federation scenario (issue 6, docs/federation.md): one run of a
// configuration and seed over the scenario's members, each an InProcessMember (its own engine),
// under a FedScheduler in the configuration's mode — or, for `merged`, one member holding every
// member's nodes (MergeClusters) under the reclaim-aware federation.
//
// Workload. Listed jobs arrive at submit_s from their home member's region; generated jobs arrive
// as a Poisson stream (Scenario::stream), each given a home member drawn by the members'
// arrivals_share; a diurnal class is thinned by the tidal curve at the home member's local time
// (its start_hour), so regions' peaks are their start_hours apart. A home_only job may run only
// on its home member (all members in `merged`). Jobs run their duration at max replicas (fixed
// scaling) or progress with their usable replicas (linear); an eviction loses the work since the
// last checkpoint and a restart pays restart_cost_s.
//
// Each event time: arrivals and ends are applied, every member runs Step (evictions whose grace
// ended, its own queue, Reclaim for HP jobs queued there), the federation dispatches (Pass), then
// members Grow (Absorb); jobs a member evicted whole come back to the federation at the front of
// their priority. Time is the simulated clock; same scenario and seed, same results.
//
// Metrics (names are part of the output contract; means over seeds in summary.json):
//   hp_sched_delay_p50_s, _p90_s, _p99_s   HP jobs (priority >= kHpPriority): first start - submit
//                                          (end of the run - submit when never started)
//   sched_delay_p90_s, lp_sched_delay_p90_s  the same over all jobs / LP jobs
//   evictions_count                        victims evicted whole or shrunk (by Reclaim or by a
//                                          member restoring its HP headroom)
//   headroom_evictions_count               ... of them by headroom restores
//   needless_preemptions_count             of them, those evicted for a job J on member M when,
//                                          as the Reclaim was decided, another member J may use
//                                          could have started J on idle capacity (its exact
//                                          check, InProcessMember::FitsIdleNow), or when J's next
//                                          start was on another member
//   reclaims_count                         Reclaims decided (kReclaim events)
//   dispatches_count, dispatch_rejections_count, dispatch_retries_count
//                                          dispatch attempts; of them rejected by the member
//                                          (plus jobs a member's queue later found never to fit);
//                                          attempts made after a rejection of the same job
//   alloc_ratio_hp_pct, alloc_ratio_hp_lp_pct  metrics.md §4 (no Standby here) over every GPU node
//                                          of every member, sampled every sample_interval_s
//   member_<name>_alloc_ratio_hp_lp_pct    the same per member (in `merged`: per original member,
//                                          by node name prefix); <name> lower-cased, non-
//                                          alphanumerics as '_'
//   alloc_imbalance_pct                    mean over samples of max - min of the per-member ratios
//   gpu_alloc_pct_mean                     allocated GPU milli / all, time-weighted
//   jobs_started_count, jobs_infeasible_count, jobs_waiting_end_count (at the federation or in a
//   member's queue at the end), lp_jct_mean_s, lp_jobs_finished_count, preemption_lost_gpu_hours
//   (per eviction: the GPUs the victim held x the time since its last checkpoint)
//   run_gpu_hours, goodput_gpu_hours       as in the single-cluster simulator (docs/simulate.md):
//                                          every run's bound replicas' GPUs integrated exactly
//                                          (milli-GPU x s); of it, the work that counted — all of
//                                          a run that finished, of a run evicted, stopped at its
//                                          walltime or still going at the end the part up to its
//                                          last periodic checkpoint (no checkpoints on notice
//                                          here), less its restart period (restart_cost_s at the
//                                          start of a run after the first) and less replicas
//                                          beyond its last whole usable step
//   warmup_s                               Scenario::warmup_s: every metric above covers
//                                          [warmup_s, duration_s) — samples taken, jobs submitted,
//                                          events at or after it; run_gpu_hours and
//                                          goodput_gpu_hours, like gpu_alloc_pct_mean, the GPU time
//                                          inside it (a run across warmup_s counts from warmup_s,
//                                          whether that part is kept decided as the run ends);
//                                          SimulateResult::samples keeps all
#pragma once

#include <vector>

#include "common/status.h"
#include "federation/in_process_member.h"
#include "model/cluster_state.h"
#include "sim/scenario.h"
#include "sim/simulate.h"

namespace estuary {

// Measuring the members' own work in a run (benchmarks): each member times itself with
// `stopwatch` (MemberOptions::stopwatch); the run adds their MemberTiming into `total`.
struct FederationMeter {
  const Stopwatch* stopwatch = nullptr;
  MemberTiming total;
};

// `members`: the members' clusters in scenario order (LoadMemberClusters); `merged`: their union
// (MergeClusters), needed only for a `merged` configuration. REQUIRES: sc.federation.enabled and
// config.federation set.
StatusOr<SimulateResult> RunFederation(const Scenario& sc, const std::vector<ClusterState>& members,
                                       const ClusterState* merged, const SchedulerConfig& config, uint64_t seed,
                                       bool check_invariants = false, bool record_events = false,
                                       FederationMeter* meter = nullptr);

}  // namespace estuary
