// Scenario files for `estuary simulate` (YAML; docs/simulate.md): a cluster, a workload of jobs
// (listed and/or generated), events (node failures and repairs, listed and/or from a failure-rate
// model), the scheduler configurations to compare in one run, the simulated duration and the seeds. Every error names the file, the line
// and the field ("s.yaml:12: field 'replicas': ...").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/cluster_state.h"
#include "sim/cluster/generator.h"

namespace estuary {

// One job (or one class of generated jobs): `replicas` tasks of `per_replica`, granted in
// multiples of `step` within [min, replicas], running `duration_s` once started.
struct JobTemplate {
  int line = 0;  // where the job is defined, for messages
  std::string name;
  SimTime submit_s = 0;
  SimTime duration_s = 3600;
  int32_t replicas = 1;
  int32_t min_replicas = 0;  // 0: = replicas (rigid)
  int32_t step = 1;
  int32_t usable_step = 0;   // 0: = step
  TaskRequest per_replica;
  std::string plane, required_level, preferred_level;  // topology constraint by name (empty: none)
  // Class and priority (docs/simulate.md, "Job classes"): the class sets defaults for priority
  // and preemptible; explicit fields override them.
  std::string job_class;  // empty: unclassified (priority 0, not preemptible)
  int32_t priority = 0;
  bool preemptible = false;
  int64_t checkpoint_interval_s = 0;
  int64_t restart_cost_s = 0;
};

// The job classes of issue 4: name, default priority, default preemptible.
struct JobClassInfo {
  const char* name;
  int32_t priority;
  bool preemptible;
};
inline constexpr JobClassInfo kJobClasses[] = {
    {"hp-inference", 900, false},  // online inference services (HP)
    {"hp-training", 800, false},   // HP training
    {"dev", 500, false},           // development / interactive
    {"lp", 300, true},             // LP consumer jobs: offline inference, data refresh
    {"spot", 100, true},           // spot jobs on harvested capacity
};

struct GeneratedClass {
  double share = 1;
  JobTemplate job;  // submit_s ignored; duration_s is the mean of an exponential distribution
};

struct JobStream {
  double arrivals_per_hour = 0;  // Poisson arrivals; 0: no generated jobs
  std::vector<GeneratedClass> classes;
};

struct NodeEvent {
  SimTime at_s = 0;
  std::string node;
  bool fail = true;  // false: repair
};

// Head-of-line protection (ReserveAction): nodes are held for up to `max_jobs` jobs of
// `min_gpus` to `max_gpus` GPUs (at max replicas) that have waited at least `after_s`, oldest
// first; holds are re-planned every `replan_s` of simulated time.
struct ReserveConfig {
  bool enabled = false;  // on when the configuration has a `reserve:` mapping
  int64_t after_s = 1800;
  int64_t max_jobs = 1;
  int64_t min_gpus = 128;
  int64_t max_gpus = int64_t{1} << 40;
  int64_t replan_s = 300;
};

// A failure-rate model (key `failures`): every node fails independently as a Poisson process of
// mean time between failures `node_mtbf_h` while it is up, stays down `repair_s`, then is
// repaired. The draws come from an Rng of their own (common/rng.h), so they do not disturb the
// job stream's.
struct FailureModel {
  double node_mtbf_h = 0;        // required, > 0 (hours)
  SimTime repair_s = 0;          // required, > 0 (seconds)
  std::optional<uint64_t> seed;  // default: the run's seed
};

struct SchedulerConfig {
  std::string name;
  std::string policy = "best-fit";
  bool align = true;
  bool topology = true;
  ReserveConfig reserve;
  // Queue order: arrival (fifo, the default) or priority (higher first, then arrival).
  bool priority_queue = false;
  // Reclaim (issue 4): an HP job (priority >= kHpPriority) that cannot start evicts the victims of
  // PreemptAction::Plan, which free their resources `grace_s` later; the nodes of the plan are
  // held for the HP job meanwhile. `preempt: {grace_s}`; off by default.
  bool preempt = false;
  int64_t grace_s = 60;
  // Domain packing (AllocateOptions::pack_*): `pack: {plane, level}`; empty: off.
  std::string pack_plane, pack_level;
  int line = 0;  // of the configuration, for errors found when it meets the cluster
};

// Placement-dependent run time: a multi-node job whose nodes span more than one domain of `level`
// (plane `plane`) runs longer, because its collectives cross the slower links between domains:
// run time × (1 + comm_share_pct/100 × cross_domain_slowdown_pct/100), rounded up to a second.
// Alibaba measures all-reduce bandwidth 27% higher within one ASW than across ASWs.
struct NetworkModel {
  bool enabled = false;  // on when the scenario has a `network:` mapping
  std::string plane = "data";
  std::string level = "asw";
  int64_t cross_domain_slowdown_pct = 27;
  int64_t comm_share_pct = 40;
  int line = 0;  // of the `network:` mapping, for errors
};

struct Scenario {
  std::string name;
  std::string path;
  SimTime duration_s = 86400;
  SimTime sample_interval_s = 3600;
  std::vector<uint64_t> seeds = {42};
  // Exactly one of: a cluster spec file (relative paths are relative to the scenario) or
  // generator options.
  std::string cluster_spec;
  std::optional<GeneratorOptions> cluster_generate;
  std::vector<JobTemplate> jobs;
  JobStream stream;
  std::vector<NodeEvent> events;
  NetworkModel network;
  std::optional<FailureModel> failures;  // none: only the listed events
  std::vector<SchedulerConfig> configurations;
};

StatusOr<Scenario> ReadScenario(const std::string& path);
StatusOr<Scenario> ParseScenario(const std::string& text, const std::string& path);

}  // namespace estuary
