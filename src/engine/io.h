// What goes into the engine and what comes out of it (src/engine/engine.h): a job as the engine
// is given it, how it is to be admitted, the admission's answer, the events that report every
// change of a job's placement, and the price of a Reclaim. Every driver (the simulators, the
// federation members, the service) speaks these types. Jobs are named by the driver's ids and
// carry GPU model and topology names, never the engine's ids, so that a recorded input means the
// same thing to a rebuilt engine.
#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "model/resources.h"

namespace estuary {

// A job as a driver gives it to the engine.
struct EngineJob {
  uint32_t id = 0;  // the driver's id, unique among the jobs it gives this engine
  std::string name;
  int32_t min_replicas = 1, max_replicas = 1, step = 1;
  int32_t usable_step = 0;  // 0: = step
  TaskRequest per_replica;  // its `models` is ignored: see `models`
  std::vector<std::string> models;  // allowed GPU models by name; empty: any
  std::string plane, required_level, preferred_level;  // topology constraint by name (empty: none)
  // After waiting this long for one domain of required_level, it accepts the next level up (and so
  // on after each further wait; Engine: "Relaxed required levels"). 0: it waits for it forever.
  int64_t required_max_wait_s = 0;
  int32_t priority = 0;
  bool preemptible = false;
  int64_t checkpoint_interval_s = 0;
  int64_t checkpoint_on_notice_s = 0;  // JobSpec::checkpoint_on_notice_s
  int64_t restart_cost_s = 0;
  int64_t walltime_s = 0;  // JobSpec::walltime_s (0: no limit)
  // Per replica: non-zero = never moved by defragmentation (empty: every replica may move).
  std::vector<char> locked;
  // Its replicas leave their GPUs for Standby through a hook their agent runs (the job's
  // standby_enter): a replica chosen for Standby lends its GPUs only once its driver acknowledges
  // (Engine::AcknowledgeStandby). False (a job without the hook; every simulated job): at once.
  bool acknowledge_standby = false;
  // Its queue (issue 20): a leaf of EngineConfig::queues; empty when the engine has none.
  std::string queue;
};

// How a submitted job is to be admitted.
enum class SubmitMode {
  kQueue,           // accept anything the engine could ever run; it waits in the engine's queue
                    // (and an HP job Reclaims at once and in later cycles)
  kStartNow,        // start it now on idle capacity, or reject
  kStartOrReclaim,  // start it now, or evict lower-priority work for it (then it starts once the
                    // victims are gone), or reject; a rejection has evicted nothing
  kEnqueue,         // join the queue behind the jobs already waiting there; the next cycle tries
                    // it in queue order (a job that can never fit is then returned with its
                    // reason) — arrival semantics of the simulator and the live service
};

// The answer to a submission.
struct Admission {
  bool accepted = false;
  bool started = false;     // it runs now
  bool reclaiming = false;  // victims are being evicted for it; it starts when they are gone
  int32_t granted = 0;      // replicas bound when started
  std::string reason;       // why it was rejected
  bool never = false;       // rejected because it could never run on this engine's cluster
};

// EngineEvent::for_job of the evictions the engine makes to restore an HP headroom
// (EngineConfig::headroom), not for any job.
inline constexpr uint32_t kHeadroomJob = UINT32_MAX - 1;

// What happened to a job (Engine::TakeEvents, Engine::RunCycle; in order).
struct EngineEvent {
  enum class Kind {
    kStarted,   // it started with `replicas`
    kGrown,     // Absorb grew it to `replicas`
    kShrunk,    // Reclaim (for job `for_job`), a headroom's drain, a failed or drained node or a
                // resize shrank it to `replicas`; `detail` says which
    kReturned,  // it was evicted whole (for `for_job`) or found never to fit here (`for_job`
                // invalid, `detail` the reason, `never` set) and is back with the driver
    kReclaim,   // a Reclaim for `job` was decided: `replicas` victims (jobs evicted whole or
                // shrunk) will be evicted at time `at`
    kStandby,   // one of its replicas entered Standby (`detail`: "TASK@NODE:GPUS"; for a job with
                // EngineJob::acknowledge_standby its GPUs are lent once its driver acknowledges,
                // or it is refused: kStandbyRefused); `replicas`: its replicas in Standby now
    kRestored,  // one of its replicas left Standby on the GPUs it kept (`detail` as kStandby);
                // `replicas`: its replicas in Standby now
    kMoveStarted,    // a migration's new instance is starting (`detail`: "TASK FROM->TO:GPUS")
    kMoved,          // a migration completed: the replica runs on its new node
    kMoveAborted,    // a started migration was given up (the replica stays where it ran)
    kMoveCancelled,  // a planned migration was dropped before it started
    kStandbyRefused,  // a replica could not enter Standby after all (EngineJob::
                      // acknowledge_standby: its standby_enter hook failed); `detail`: "TASK@NODE:GPUS: why"; nothing
                      // was lent and it is active again
    kTimedOut,  // its run reached its walltime limit (EngineJob::walltime_s): the engine ended the
                // job (finished, not requeued); the driver stops what still runs of it
  };
  Kind kind = Kind::kStarted;
  int64_t t = 0;
  uint32_t job = 0;
  int32_t replicas = 0;
  uint32_t for_job = UINT32_MAX;
  int64_t at = 0;
  std::string detail;
  bool never = false;     // kReturned: it can never fit this engine's cluster (not an eviction)
  bool requeued = false;  // kReturned: it waits again at the front of this engine's queue
                          // (EngineConfig::requeue), else it is back with the driver
};

// The name of an event kind: "started", "grown", "shrunk", "returned", "reclaim", "standby",
// "restored", "move-started", "moved", "move-aborted", "move-cancelled", "standby-refused",
// "timed-out".
const char* EngineEventKindName(EngineEvent::Kind kind);

// The price of evicting work for a job now (Engine::QuoteReclaim): the engine's own victim choice.
struct ReclaimQuote {
  int32_t victims = 0;          // jobs it would evict whole or shrink
  int32_t max_priority = 0;     // highest priority among them
  int64_t cost = 0;             // C of the jobs evicted whole, milli-GPU x seconds
  int64_t gpu_milli = 0;        // GPU milli it would evict
};

// Which part of a cycle RunCycle runs (see engine.h).
enum class CyclePart {
  kWhole,       // every action
  kBeforeGrow,  // the actions before the first `absorb`
  kGrow,        // the first `absorb` and the actions after it
};

struct CycleOptions {
  CyclePart part = CyclePart::kWhole;
  // The priority of the highest HP job or gang waiting elsewhere for this engine's capacity
  // (e.g. at the federation: FedScheduler::BlockingPriority); INT32_MIN for none. Absorb leaves
  // room for it as for its own queue's.
  int32_t external_blocking = INT32_MIN;
};

}  // namespace estuary
