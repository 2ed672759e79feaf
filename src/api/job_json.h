// The one job schema (issue 18; docs/schema.md): a job as the service's `POST /v1/jobs` JSON, a
// job file, and a scenario's `jobs:` entry or generator class (YAML, converted to the same JSON
// value first) are decoded and validated here, with the same names, units, defaults and error
// text. The service stores and shows a job as the JSON EncodeJobRequest writes.
//
// A job is one object:
//   name           string of 1 to 128 characters of [A-Za-z0-9._-]; required (optional in a
//                  generator class)
//   class          one of kJobClasses' names; sets the defaults of priority and preemptible
//   replicas       an integer N (= {"min": N, "max": N}) or {"min": m, "max": M, "step": s}:
//                  integers, 1 <= m <= M <= 100000, 1 <= s <= M; "step" defaults to 1, "max" to
//                  "min"; m and M need not be multiples of s (the engine grants multiples of s
//                  when it aligns). Default 1
//   gpus           integer 0..16 (kMaxGpusPerNode): whole GPUs per replica, default 0
//   gpu_milli      integer 1..1000: a shared GPU's share per replica (below 1000 only with
//                  gpus = 1; default 1000 = the whole GPU, which any gpus may state)
//   cpu_milli | cpu_cores      CPU per replica (integers 0..10^9 milli-cores | 0..10^6 cores; at
//                  most one of the two), default 1000 milli-cores
//   memory_mib | memory_gib    memory per replica (integers 0..10^9 MiB | 0..10^6 GiB; at most
//                  one of the two), default 1024 MiB
//   priority       integer 0..1000 (>= 700 is high priority), default the class's or 0
//   preemptible    boolean, default the class's or false
//   models         a GPU model name or an array of 1..16 distinct ones (strings of 1..64
//                  characters), default: any (leave it out; an empty array is rejected)
//   plane          string (1..64 characters): a topology plane
//   required_level, preferred_level   strings (1..64 characters): a level of `plane` that all
//                  replicas must share / should share; either needs `plane`
//   required_max_wait_s   integer 0..10^12, default 0 (wait for the required level forever):
//                  after waiting this long for one domain of `required_level`, the job accepts
//                  the next level up (one domain of it), and again after each further such wait,
//                  until it accepts any placement in the plane — Slurm's --switches=N@max_wait.
//                  Its own level stays preferred; a requeued job requires it again. Needs
//                  `required_level`
//   duration_s     integer 0..10^12, default 3600: how long each replica runs — in a simulation
//                  and for a fake agent (real agents ignore it); 0: until stopped (in a
//                  simulation: beyond the end of the run). Not in a generator class
//   checkpoint_interval_s   integer 0..10^12, default 0 (no checkpoints)
//   checkpoint_on_notice_s  integer 0..10^12, default 0 (off): seconds the job takes to checkpoint
//                  when it is warned of an eviction; within the grace period the eviction keeps
//                  the work up to the notice (JobSpec::checkpoint_on_notice_s)
//   restart_cost_s integer 0..10^12, default 0: what restarting a replica costs (victim choice)
//   walltime_s     integer 0..10^12, default 0 (no limit): each run of the job is stopped at the
//                  latest walltime_s after it started, and the job ends (the engine's timed-out;
//                  a simulation's "timeout", the service's failed "timed out: ...");
//                  backfill plans with it as the run's end (docs/schema.md)
//   usable_step    integer 0..100000, default 0 (= step): the job can use only multiples of it
//   labels         object of string -> string (at most 32 entries, keys of 1..128 and values of
//                  0..128 characters), default none: kept and shown, not used for scheduling
// The workload, which a real agent runs (docs/agent.md) and simulations and fake agents ignore:
//   command        what each replica runs: an array of 1..4096 strings (argv; the first not
//                  empty: a path, or a name looked up in the PATH of `env`) or one non-empty string
//                  run by /bin/sh -c; default none (a job without one runs only on fake agents)
//   env            environment variables beside the agent's own ESTUARY_* and
//                  CUDA_VISIBLE_DEVICES: an object NAME -> value or an array of "NAME=VALUE"
//                  strings; at most 256, names [A-Za-z_][A-Za-z0-9_]* of 1..256 characters, none
//                  starting with ESTUARY_ nor CUDA_ or NVIDIA_VISIBLE_DEVICES (the agent sets those)
//   workdir        an absolute path (1..4096 characters) the command starts in, default the
//                  run-as user's home directory (/ when it does not exist)
//   checkpoint_signal   the signal an eviction notice sends (a name, "SIGUSR1" or "USR1", or a
//                  number), default SIGTERM; SIGKILL follows at the deadline
//   hooks          object of commands (each as `command`) the agent runs at a mechanism's
//                  edges: standby_enter (before its GPUs are lent; failing, nothing is lent),
//                  standby_leave (when they are back), ready (a migration's new instance is
//                  running once it succeeds)
// Commands, arguments and environment values may hold any character but NUL, up to 65,536 bytes.
// Only in a scenario (the simulated workload, JobUse::kScenarioJob / kGeneratedClass; the
// service answers "only in a scenario"):
//   submit_s       integer 0..10^12, default 0 (jobs only)
//   duration_mean_s   integer 1..10^12, default 3600 (generator classes only, instead of
//                  duration_s): the mean of the exponential run time
//   scaling        "fixed" (default) or "linear": duration_s is the run time at max replicas
//   locked_pct     integer 0..100, default 0: per cent of the replicas that may not be migrated
//   standby        (jobs only) array of {"from_s", "to_s", "replicas"}: windows, ascending and
//                  disjoint, in which `replicas` (1..max, default 1) of the job's bound replicas
//                  are in Standby
//   home, home_only   (federation scenarios) the member a job is submitted to (jobs only) and
//                  whether it may run elsewhere; the scenario checks them
// Unknown keys are rejected (a misspelt field must not be silently dropped), and so are duplicate
// keys at any depth. An optional field is given a value or left out: null is not "default".
// Integers are integer literals: a number with a fraction or an exponent is "expected an
// integer" even when its value is whole (8.0, 1e3), and one beyond 64 bits is out of range. -0 is
// 0. Characters are Unicode code points; no string may hold a control character (U+0000..U+001F,
// U+007F). A JSON body must be UTF-8 without NUL bytes, nested at most 32 levels deep.
// Errors are one line of printable ASCII that starts with the field's path (user text in it is
// escaped and cut), e.g. "field 'replicas.min': 0 is below 1", "field 'gpus': expected an
// integer", "field 'colour': unknown field", "field 'labels.a': duplicate key"; a body that is not
// an object gives "expected a JSON object at the top level, not an array", and malformed JSON
// "malformed JSON at byte 17: ..." (byte offsets are 1-based; one past the end for a truncated
// body). A scenario prefixes "FILE:LINE: " (the line of the field, or of the job).
// Thread-safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"

namespace estuary {

// The job classes of `class`: names and their default priority and preemptibility.
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

// A command: argv, or (`shell`) one string for /bin/sh -c. Empty: none.
struct JobCommand {
  std::vector<std::string> argv;
  bool shell = false;  // argv holds exactly one string
  bool empty() const { return argv.empty(); }
  // What to exec: argv, or {"/bin/sh", "-c", script}.
  std::vector<std::string> Exec() const;
  bool operator==(const JobCommand&) const = default;
};

// The fields every driver takes.
struct JobRequest {
  std::string name;
  std::string job_class;  // empty: none
  int32_t min_replicas = 1;
  int32_t max_replicas = 1;
  int32_t step = 1;
  int32_t gpus = 0;
  int32_t gpu_milli = 1000;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int32_t priority = 0;
  bool preemptible = false;
  std::vector<std::string> models;
  std::string plane, required_level, preferred_level;
  int64_t required_max_wait_s = 0;
  int64_t duration_s = 3600;
  int64_t checkpoint_interval_s = 0;
  int64_t checkpoint_on_notice_s = 0;
  int64_t restart_cost_s = 0;
  int64_t walltime_s = 0;  // 0: no limit
  int32_t usable_step = 0;
  std::map<std::string, std::string> labels;
  std::string queue;  // its queue (issue 20): a leaf of the configuration's queues; empty: none
  // The workload (a real agent's).
  JobCommand command;
  std::map<std::string, std::string> env;
  std::string workdir;
  std::string checkpoint_signal = "SIGTERM";  // canonical name
  JobCommand hook_standby_enter, hook_standby_leave, hook_ready;

  bool operator==(const JobRequest&) const = default;
};

// A Standby window of a scenario job (`standby:`).
struct JobStandbyWindow {
  int64_t from_s = 0, to_s = 0;
  int32_t replicas = 1;
  bool operator==(const JobStandbyWindow&) const = default;
};

// The fields only a scenario takes: the simulated workload's model of the job.
struct ScenarioJobFields {
  int64_t submit_s = 0;
  int64_t duration_mean_s = 3600;  // generator classes (their duration_s)
  bool linear_scaling = false;
  int32_t locked_pct = 0;
  std::vector<JobStandbyWindow> standby;
  std::string home;  // empty: not given
  bool home_only = false;
  bool operator==(const ScenarioJobFields&) const = default;
};

// Where a job is read: which fields it may have.
enum class JobUse { kService, kScenarioJob, kGeneratedClass };

struct DecodedJob {
  JobRequest request;
  ScenarioJobFields scenario;  // defaults for kService
};

// Decodes and validates one job object. `caller_keys` are further keys the caller reads itself
// (a generator class's `share`, `diurnal`); they are not rejected as unknown. InvalidArgument
// whose message starts with "field '<path>': " on any error, except a `doc` that is not an
// object ("expected a JSON object at the top level, not ..."). Never throws.
StatusOr<DecodedJob> DecodeJob(const nlohmann::json& doc, JobUse use,
                               const std::vector<std::string>& caller_keys = {});

// The path named by an error of DecodeJob ("replicas.min" of "field 'replicas.min': ..."), or ""
// when the message names none.
std::string JobErrorPath(std::string_view message);

// Decodes and validates a request body as JobUse::kService. InvalidArgument with the reason on any error; never
// crashes or hangs on any input (bodies are bounded by the server before this is called).
StatusOr<JobRequest> DecodeJobRequest(std::string_view body);

// The canonical JSON of a request: compact, every JobRequest field in the order listed above, so that
// DecodeJobRequest(EncodeJobRequest(r)) == r for any r that DecodeJobRequest returned. `models`
// and `plane`/`required_level` are left out when empty (an empty value is not valid input);
// `class` when empty, and so are an empty command, env, workdir or hook; the other defaults are
// written out. Never throws (invalid UTF-8 in a hand-built r is replaced).
// Used to store accepted jobs.
std::string EncodeJobRequest(const JobRequest& r);

}  // namespace estuary
