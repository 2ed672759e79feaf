// FedScheduler: the federation layer (issue 6, TIDAL). Jobs wait here until a member can take
// them; the scheduler never manages tasks — it decides *which member* and dispatches.
//
// Decision for one job (Rank), by mode:
//   kReclaimAware: probe every allowed member's summary (CapacitySummary::Probe). Candidates:
//     first the members where the job fits on idle capacity (admitted kStartNow), ordered by the
//     tie-break (pack: the least idle share of the allowed models' GPUs first; spread: the most);
//     then, for an HP job (priority >= kHpPriority) only, the members where it fits once work
//     below its priority is evicted (admitted kStartOrReclaim), cheapest first: lowest victim
//     level, then estimated cost (GPU-seconds), then GPUs to reclaim, then the tie-break.
//   kIdleOnly: the idle candidates only.
//   kBlind: no capacity knowledge: every allowed member (admitted kQueue), starting after the
//     member chosen last (round-robin) or, with least_loaded, by the GPUs of jobs it was given and
//     still holds (fewest first).
//   Ties always fall to member order. No candidate: the job waits with a reason; when no allowed
//   member could ever hold it (every probe's `ever` false, or every blind dispatch rejected as
//   never fitting) it is infeasible: reported with the reason and never dispatched again.
// Dispatch (Pass): the waiting jobs are tried in priority order, then arrival (returned jobs at the
// front of their priority), shape by shape as in PendingQueue (a job whose shape already found no
// member in this pass is not tried). A job goes to its first candidate; a rejection sends it to
// the next (a retry elsewhere); when all reject, it backs off — not tried for backoff_s, doubling
// per such round up to backoff_max_s. A member that rejects has changed nothing, and a job is
// dispatched with kStartOrReclaim to one member at a time, so only one member ever preempts for it.
// Reclaim-aware only: while its victims' grace period runs, a job dispatched with a Reclaim that
// another member can now start on idle capacity (by its summary) is started there instead
// (kStartNow) and cancelled on the reclaiming member, whose victims then keep running — as a
// single cluster would start it on capacity released anywhere before evicting (counted in
// reclaims_cancelled()).
// Thread-safety: none.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <climits>
#include <string>
#include <vector>

#include "federation/member.h"
#include "sched/framework/pending_queue.h"

namespace estuary {

struct FedOptions {
  enum class Mode { kBlind, kIdleOnly, kReclaimAware };
  Mode mode = Mode::kReclaimAware;
  bool least_loaded = false;  // blind: least-loaded instead of round-robin (default off)
  bool spread = false;        // tie-break: spread instead of pack (default pack)
  // Reclaim-aware: the members the summaries find able to reclaim are asked for a quote
  // (Member::QuoteReclaim, their own victim choice) and tried cheapest quote first: highest victim
  // priority, then C, then fewest victims, then GPUs evicted; a member without a quote is not
  // tried.
  // Off: the summaries' estimate orders them. Default on.
  bool quote_reclaim = true;
  // At most this many reclaim candidates (the summaries' best) are asked for a quote; the others
  // follow them unquoted, in the summaries' order. Default 4.
  int32_t max_quotes = 4;
  int64_t backoff_s = 30;     // first backoff after every candidate rejected (default 30 s)
  int64_t backoff_max_s = 480;
};

struct FedCandidate {
  int member = -1;
  AdmitMode mode = AdmitMode::kStartNow;
  ProbeResult probe;
  std::optional<ReclaimQuote> quote;  // with quote_reclaim, for kStartOrReclaim candidates
};

// What became of one dispatch attempt (FedScheduler::TakeDispatches).
struct FedDispatch {
  int64_t t = 0;
  uint32_t job = 0;
  int member = -1;
  AdmitMode mode = AdmitMode::kStartNow;
  Admission admission;
  bool retry = false;  // an attempt after a rejection of the same job
};

class FedScheduler {
 public:
  FedScheduler(std::vector<Member*> members, FedOptions options);

  // A job arrives (or comes back, `front`, after an eviction) and waits here. `allowed`: the
  // member indices it may run on (empty: all). A job already waiting is left alone.
  void Enqueue(const FedJob& job, std::vector<int> allowed, bool front, int64_t now_s);
  // Removes a waiting job (e.g. cancelled by its user); no-op otherwise.
  void Remove(uint32_t job);
  // The candidates for `job` now, best first (see the header comment). Pure.
  std::vector<FedCandidate> Rank(uint32_t job, int64_t now_s) const;
  // Tries the waiting jobs whose backoff has passed; returns the jobs accepted by a member.
  std::vector<uint32_t> Pass(int64_t now_s);
  // The earliest end of a backoff, if any job backs off.
  std::optional<int64_t> NextRetry() const;
  // A dispatched job left its member (finished, or came back): it no longer counts toward the
  // member's load (least_loaded).
  void Left(uint32_t job);

  // The highest priority among the HP jobs and gangs (min replicas > 1) waiting here, INT32_MIN
  // when none: members should not absorb capacity such a job could use (AbsorbAction's
  // blocking priority).
  int32_t BlockingPriority() const { return blocking_.empty() ? INT32_MIN : *blocking_.rbegin(); }
  bool Waiting(uint32_t job) const;
  // Why the job waits or was found infeasible (empty when it was dispatched).
  const std::string& Reason(uint32_t job) const;
  bool Infeasible(uint32_t job) const;
  size_t waiting() const { return queue_.size() + backoff_count_; }

  // Every dispatch attempt so far, in order (taken: cleared).
  std::vector<FedDispatch> TakeDispatches() { return std::exchange(dispatches_, {}); }
  int64_t rejections() const { return rejections_; }
  int64_t reclaims_cancelled() const { return reclaims_cancelled_; }
  int64_t retries() const { return retries_; }

 private:
  struct Entry {
    FedJob job;
    std::vector<int> allowed;  // sorted; all members when the caller gave none
    std::vector<std::optional<GangQuery>> query;  // per member (nullopt: it has no model/level for it)
    int shape = 0;
    bool known = false;
    bool waiting = false;
    bool infeasible = false;
    int64_t backoff = 0;    // the next backoff length
    int64_t retry_at = -1;  // backing off until then (-1: not)
    int member = -1;        // where it was last accepted
    int64_t load = 0;       // its GPUs at max replicas
    bool blocks = false;    // an HP job or a gang: counted in blocking_ while waiting
    std::string reason;
  };
  Entry& At(uint32_t job);
  void StopWaiting(Entry& e);
  // The decision for entry e; sets `ever` false when no allowed member could ever hold it.
  std::vector<FedCandidate> RankEntry(const Entry& e, int64_t now_s, bool* ever) const;
  PendingQueue::Outcome Try(uint32_t job, int64_t now_s, std::vector<uint32_t>* accepted);

  std::vector<Member*> members_;
  FedOptions options_;
  std::vector<Entry> entries_;  // by job id
  std::map<std::string, int> shapes_;
  PendingQueue queue_{true};
  std::priority_queue<std::pair<int64_t, uint32_t>, std::vector<std::pair<int64_t, uint32_t>>, std::greater<>> backoff_;
  size_t backoff_count_ = 0;
  int next_rr_ = 0;
  std::multiset<int32_t> blocking_;  // priorities of the waiting HP jobs and gangs
  std::vector<int64_t> load_;  // per member: GPUs of jobs given and not left (least_loaded)
  std::vector<FedDispatch> dispatches_;
  int64_t rejections_ = 0, retries_ = 0, reclaims_cancelled_ = 0;
  std::map<uint32_t, int> reclaiming_;  // jobs accepted with a Reclaim, not seen started: member
  // Starts reclaiming jobs elsewhere on idle capacity when a member has it (see the header).
  void Redirect(int64_t now_s, std::vector<uint32_t>* accepted);
  std::string none_;
};

}  // namespace estuary
