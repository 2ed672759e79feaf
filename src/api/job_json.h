// The service's job wire format (issue 7, `POST /v1/jobs`): the JSON a user submits, decoded and
// validated into a JobRequest, and the JSON a job is shown as.
//
// A submitted job is one JSON object:
//   name           string, required: 1 to 128 characters of [A-Za-z0-9._-]
//   replicas       object, required: {"min": m, "max": M, "step": s} — integers, 1 <= m <= M <=
//                  100000, 1 <= s <= M; "step" defaults to 1, "max" to "min"; m and M need not
//                  be multiples of s (the engine grants multiples of s when it aligns)
//   gpus           integer 0..16 (kMaxGpusPerNode), required: whole GPUs per replica
//   gpu_milli      integer 1..1000: a shared GPU's share per replica (below 1000 only with
//                  gpus = 1; default 1000 = the whole GPU, which any gpus may state)
//   cpu_milli      integer 0..10^9, required: CPU per replica in milli-cores
//   memory_mib     integer 0..10^9, required: memory per replica in MiB
//   priority       integer 0..1000, required (>= 700 is high priority)
//   preemptible    boolean, default false
//   models         array of 1..16 distinct GPU model names (strings of 1..64 characters),
//                  default: any (leave it out; an empty array is rejected)
//   plane, required_level   strings (1..64 characters) naming a topology plane and a level of it
//                  that all replicas must share; both or neither
//   duration_s     integer 0..10^8, default 0: how long each replica runs for a fake agent
//                  (0: until stopped); real agents ignore it
//   checkpoint_interval_s   integer 0..10^8, default 0
//   labels         object of string -> string (at most 32 entries, keys of 1..128 and values of
//                  0..128 characters), default none: kept and shown, not used for scheduling
// Unknown keys are rejected (a misspelt field must not be silently dropped), and so are duplicate
// keys at any depth. An optional field is given a value or left out: null is not "default".
// Integers are JSON integer literals: a number with a fraction or an exponent is "expected an
// integer" even when its value is whole (8.0, 1e3), and one beyond 64 bits is out of range. -0 is
// 0. Characters are Unicode code points; no string may hold a control character (U+0000..U+001F,
// U+007F). The body must be UTF-8 without NUL bytes, nested at most 32 levels deep.
// Errors are one line of printable ASCII naming the field (user text in it is escaped and cut),
// e.g. "field 'replicas.min': 0 is below 1", "field 'gpus': expected an integer", "field
// 'colour': unknown field", "field 'labels.a': duplicate key", "expected a JSON object at the top
// level, not an array", "malformed JSON at byte 17: ..." (byte offsets are 1-based; one past the
// end for a truncated body).
// Thread-safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace estuary {

struct JobRequest {
  std::string name;
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
  std::string plane, required_level;
  int64_t duration_s = 0;
  int64_t checkpoint_interval_s = 0;
  std::map<std::string, std::string> labels;

  bool operator==(const JobRequest&) const = default;
};

// Decodes and validates a request body. InvalidArgument with the reason on any error; never
// crashes or hangs on any input (bodies are bounded by the server before this is called).
StatusOr<JobRequest> DecodeJobRequest(std::string_view body);

// The canonical JSON of a request: compact, every field in the order listed above, so that
// DecodeJobRequest(EncodeJobRequest(r)) == r for any r that DecodeJobRequest returned. `models`
// and `plane`/`required_level` are left out when empty (an empty value is not valid input);
// defaults are written out. Never throws (invalid UTF-8 in a hand-built r is replaced).
// Used to store accepted jobs.
std::string EncodeJobRequest(const JobRequest& r);

}  // namespace estuary
