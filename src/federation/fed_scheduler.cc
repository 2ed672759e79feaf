#include "federation/fed_scheduler.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace estuary {

FedScheduler::FedScheduler(std::vector<Member*> members, FedOptions options)
    : members_(std::move(members)), options_(options), load_(members_.size(), 0) {}

FedScheduler::Entry& FedScheduler::At(uint32_t job) {
  if (job >= entries_.size()) entries_.resize(job + 1);
  return entries_[job];
}

void FedScheduler::Enqueue(const FedJob& job, std::vector<int> allowed, bool front, int64_t now_s) {
  Entry& e = At(job.id);
  if (e.waiting) return;
  if (!e.known) {
    e.known = true;
    e.job = job;
    if (allowed.empty()) {
      allowed.resize(members_.size());
      std::iota(allowed.begin(), allowed.end(), 0);
    }
    std::sort(allowed.begin(), allowed.end());
    allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
    e.allowed = std::move(allowed);
    const int32_t step = std::max(1, job.step);
    const int64_t need = (int64_t{std::max(1, job.min_replicas)} + step - 1) / step * step;
    e.query.assign(members_.size(), std::nullopt);
    for (int m : e.allowed) {
      const CapacitySummary& s = members_[static_cast<size_t>(m)]->summary();
      const std::optional<uint64_t> bits = s.ResolveModels(job.models);
      if (!bits) continue;
      GangQuery q;
      q.replicas = need;
      q.gpus = job.per_replica.gpu_count;
      q.model_bits = *bits;
      q.priority = job.priority;
      if (!job.required_level.empty()) {
        q.level = s.ResolveLevel(job.plane, job.required_level);
        if (!q.level) continue;
      }
      e.query[static_cast<size_t>(m)] = q;
    }
    e.load = int64_t{job.max_replicas} * job.per_replica.gpu_count;
    e.blocks = job.priority >= kHpPriority || job.min_replicas > 1;
    std::string key = std::to_string(job.per_replica.cpu_milli) + "/" + std::to_string(job.per_replica.mem_mib) + "/" +
                      std::to_string(job.per_replica.gpu_count) + "/" + std::to_string(job.per_replica.gpu_milli) + "/" +
                      std::to_string(need) + "/" + std::to_string(job.max_replicas) + "/" + std::to_string(job.step) +
                      "/" + job.plane + "/" + job.required_level + "/" + job.preferred_level + "/" +
                      std::to_string(job.priority) + "/";
    for (const std::string& m : job.models) key += m + ",";
    key += "/";
    for (int m : e.allowed) key += std::to_string(m) + ",";
    e.shape = shapes_.emplace(key, static_cast<int>(shapes_.size())).first->second;
  }
  e.waiting = true;
  if (e.blocks) blocking_.insert(e.job.priority);
  e.infeasible = false;
  e.backoff = options_.backoff_s;
  e.retry_at = -1;
  e.reason = "not tried yet";
  queue_.Push(job.id, job.priority, e.shape, front);
  (void)now_s;
}

void FedScheduler::Remove(uint32_t job) {
  if (job >= entries_.size() || !entries_[job].waiting) return;
  Entry& e = entries_[job];
  if (queue_.Contains(job)) queue_.Remove(job);
  if (e.retry_at >= 0) --backoff_count_;
  StopWaiting(e);
  e.retry_at = -1;
}

void FedScheduler::StopWaiting(Entry& e) {
  if (e.waiting && e.blocks) blocking_.erase(blocking_.find(e.job.priority));
  e.waiting = false;
}

bool FedScheduler::Waiting(uint32_t job) const { return job < entries_.size() && entries_[job].waiting; }
bool FedScheduler::Infeasible(uint32_t job) const { return job < entries_.size() && entries_[job].infeasible; }
const std::string& FedScheduler::Reason(uint32_t job) const {
  return job < entries_.size() ? entries_[job].reason : none_;
}

void FedScheduler::Left(uint32_t job) {
  if (job >= entries_.size() || entries_[job].member < 0) return;
  load_[static_cast<size_t>(entries_[job].member)] -= entries_[job].load;
  entries_[job].member = -1;
}

std::optional<int64_t> FedScheduler::NextRetry() const {
  // The heap may hold stale entries (removed or re-queued jobs); they only make a wake-up early.
  if (backoff_.empty()) return std::nullopt;
  return backoff_.top().first;
}

namespace {

// The tie-break between members that fit equally: the free share of the job's models' GPUs
// (ProbeResult::free_gpus / capacity_gpus), least first (pack) or most (spread), then member order.
bool TieBefore(const FedCandidate& a, const FedCandidate& b, bool spread) {
  const auto share = [](const FedCandidate& c) {
    return c.probe.capacity_gpus > 0 ? static_cast<double>(c.probe.free_gpus) / static_cast<double>(c.probe.capacity_gpus) : 0.0;
  };
  const double sa = share(a), sb = share(b);
  if (sa != sb) return spread ? sa > sb : sa < sb;
  return a.member < b.member;
}

}  // namespace

std::vector<FedCandidate> FedScheduler::Rank(uint32_t job, int64_t now_s) const {
  bool ever = true;
  if (job >= entries_.size() || !entries_[job].known) return {};
  return RankEntry(entries_[job], now_s, &ever);
}

std::vector<FedCandidate> FedScheduler::RankEntry(const Entry& e, int64_t now_s, bool* ever) const {
  std::vector<FedCandidate> out;
  if (options_.mode == FedOptions::Mode::kBlind) {
    *ever = true;  // unknown without capacity knowledge
    std::vector<int> order = e.allowed;
    if (options_.least_loaded) {
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return load_[static_cast<size_t>(a)] < load_[static_cast<size_t>(b)]; });
    } else {
      const auto first = std::find_if(order.begin(), order.end(), [&](int m) { return m >= next_rr_; });
      std::rotate(order.begin(), first, order.end());
    }
    for (int m : order) out.push_back({m, AdmitMode::kQueue, {}, std::nullopt});
    return out;
  }
  std::vector<FedCandidate> reclaim;
  bool any = false;
  const bool may_reclaim = options_.mode == FedOptions::Mode::kReclaimAware && e.job.priority >= kHpPriority;
  for (int m : e.allowed) {
    const std::optional<GangQuery>& q = e.query[static_cast<size_t>(m)];
    if (!q) continue;
    FedCandidate c{m, AdmitMode::kStartNow, members_[static_cast<size_t>(m)]->summary().Probe(*q, now_s), std::nullopt};
    if (!c.probe.ever) continue;
    any = true;
    if (c.probe.idle) {
      out.push_back(c);
    } else if (may_reclaim && c.probe.reclaim) {
      c.mode = AdmitMode::kStartOrReclaim;
      reclaim.push_back(c);
    }
  }
  *ever = any;
  const auto tie = [&](const FedCandidate& a, const FedCandidate& b) { return TieBefore(a, b, options_.spread); };
  std::sort(out.begin(), out.end(), tie);
  std::sort(reclaim.begin(), reclaim.end(), [&](const FedCandidate& a, const FedCandidate& b) {
    if (a.probe.victim_level != b.probe.victim_level) return a.probe.victim_level < b.probe.victim_level;
    if (a.probe.cost_gpu_s != b.probe.cost_gpu_s) return a.probe.cost_gpu_s < b.probe.cost_gpu_s;
    if (a.probe.reclaim_gpus != b.probe.reclaim_gpus) return a.probe.reclaim_gpus < b.probe.reclaim_gpus;
    return tie(a, b);
  });
  out.insert(out.end(), reclaim.begin(), reclaim.end());
  return out;
}

PendingQueue::Outcome FedScheduler::Try(uint32_t job, int64_t now_s, std::vector<uint32_t>* accepted) {
  Entry& e = entries_[job];
  bool ever = true;
  const std::vector<FedCandidate> cands = RankEntry(e, now_s, &ever);
  const FedJob& j = e.job;
  const int32_t step = std::max(1, j.step);
  const int64_t need = (int64_t{std::max(1, j.min_replicas)} + step - 1) / step * step;
  std::string shape = std::to_string(need) + " x " + std::to_string(j.per_replica.gpu_count) + " GPUs";
  if (!j.models.empty()) {
    shape += " of ";
    for (size_t k = 0; k < j.models.size(); ++k) shape += (k ? "|" : "") + j.models[k];
  }
  if (!j.required_level.empty()) shape += " in one " + j.required_level;
  if (cands.empty()) {
    if (!ever) {
      StopWaiting(e);
      e.infeasible = true;
      e.reason = "no member could ever hold " + shape;
      return PendingQueue::Outcome::kInfeasible;
    }
    e.reason = "no member has room for " + shape + " on idle capacity";
    if (options_.mode == FedOptions::Mode::kReclaimAware && j.priority >= kHpPriority) {
      e.reason += " or by evicting work below priority " + std::to_string(j.priority);
    }
    return PendingQueue::Outcome::kWaits;
  }
  std::vector<FedCandidate> tried = cands;
  if (options_.quote_reclaim) {
    // The reclaim candidates, re-ordered by the members' own quotes.
    const size_t first = static_cast<size_t>(
        std::find_if(tried.begin(), tried.end(), [](const FedCandidate& c) { return c.mode == AdmitMode::kStartOrReclaim; }) -
        tried.begin());
    const size_t quoted_end = std::min(tried.size(), first + static_cast<size_t>(std::max(0, options_.max_quotes)));
    for (size_t k = first; k < quoted_end; ++k) {
      tried[k].quote = members_[static_cast<size_t>(tried[k].member)]->QuoteReclaim(j, now_s);
    }
    // Unquoted candidates beyond the limit stay, after the quoted ones; a failed quote drops one.
    const std::vector<FedCandidate> rest(tried.begin() + static_cast<std::ptrdiff_t>(quoted_end), tried.end());
    tried.resize(quoted_end);
    tried.erase(std::stable_partition(tried.begin() + static_cast<std::ptrdiff_t>(first), tried.end(),
                                      [](const FedCandidate& c) { return c.quote.has_value(); }),
                tried.end());
    // Equal quotes (e.g. two members' headrooms: no victims) fall to the tie-break.
    std::sort(tried.begin() + static_cast<std::ptrdiff_t>(first), tried.end(), [&](const FedCandidate& a, const FedCandidate& b) {
      const ReclaimQuote &x = *a.quote, &y = *b.quote;
      const auto kx = std::tie(x.max_priority, x.cost, x.victims, x.gpu_milli), ky = std::tie(y.max_priority, y.cost, y.victims, y.gpu_milli);
      if (kx != ky) return kx < ky;
      return TieBefore(a, b, options_.spread);
    });
    tried.insert(tried.end(), rest.begin(), rest.end());
    if (tried.empty()) {
      e.reason = "no member has room for " + shape + " on idle capacity, and no member's Reclaim could start it now";
      return PendingQueue::Outcome::kWaits;
    }
  }
  bool rejected = false, all_never = true;
  std::string last;
  for (const FedCandidate& c : tried) {
    Admission a = members_[static_cast<size_t>(c.member)]->Submit(j, c.mode, now_s);
    if (rejected) ++retries_;
    dispatches_.push_back({now_s, job, c.member, c.mode, a, rejected});
    if (a.accepted) {
      StopWaiting(e);
      e.member = c.member;
      e.reason.clear();
      load_[static_cast<size_t>(c.member)] += e.load;
      if (options_.mode == FedOptions::Mode::kBlind) next_rr_ = (c.member + 1) % static_cast<int>(members_.size());
      if (a.reclaiming && options_.mode == FedOptions::Mode::kReclaimAware) reclaiming_[job] = c.member;
      accepted->push_back(job);
      return PendingQueue::Outcome::kStarted;
    }
    ++rejections_;
    rejected = true;
    all_never &= a.never;
    last = members_[static_cast<size_t>(c.member)]->name() + ": " + a.reason;
  }
  if (options_.mode == FedOptions::Mode::kBlind && all_never && tried.size() == e.allowed.size()) {
    StopWaiting(e);
    e.infeasible = true;
    e.reason = "every member rejected " + shape + " as never fitting (last " + last + ")";
    return PendingQueue::Outcome::kInfeasible;
  }
  e.retry_at = now_s + e.backoff;
  e.backoff = std::min(2 * e.backoff, options_.backoff_max_s);
  backoff_.push({e.retry_at, job});
  ++backoff_count_;
  e.reason = "every candidate rejected it (last " + last + "); retry at " + std::to_string(e.retry_at) + " s";
  return PendingQueue::Outcome::kInfeasible;  // leaves the queue while it backs off
}

std::vector<uint32_t> FedScheduler::Pass(int64_t now_s) {
  while (!backoff_.empty() && backoff_.top().first <= now_s) {
    const auto [at, job] = backoff_.top();
    backoff_.pop();
    Entry& e = entries_[job];
    if (!e.waiting || e.retry_at != at) continue;
    e.retry_at = -1;
    --backoff_count_;
    queue_.Push(job, e.job.priority, e.shape, true);
  }
  std::vector<uint32_t> accepted;
  Redirect(now_s, &accepted);
  queue_.Pass([&](size_t i) { return Try(static_cast<uint32_t>(i), now_s, &accepted); }, {});
  return accepted;
}

void FedScheduler::Redirect(int64_t now_s, std::vector<uint32_t>* accepted) {
  for (auto it = reclaiming_.begin(); it != reclaiming_.end();) {
    const uint32_t job = it->first;
    const int from = it->second;
    Entry& e = entries_[job];
    // Started (or gone) on its member: no longer reclaiming.
    if (e.member != from || e.waiting || members_[static_cast<size_t>(from)]->Running(job) > 0) {
      it = reclaiming_.erase(it);
      continue;
    }
    int to = -1;
    for (int m : e.allowed) {
      const std::optional<GangQuery>& q = e.query[static_cast<size_t>(m)];
      if (m == from || !q) continue;
      if (members_[static_cast<size_t>(m)]->summary().Probe(*q, now_s).idle) {
        to = m;
        break;
      }
    }
    if (to >= 0) {
      Admission a = members_[static_cast<size_t>(to)]->Submit(e.job, AdmitMode::kStartNow, now_s);
      dispatches_.push_back({now_s, job, to, AdmitMode::kStartNow, a, false});
      if (a.accepted) {
        members_[static_cast<size_t>(from)]->Cancel(job, now_s);
        load_[static_cast<size_t>(from)] -= e.load;
        load_[static_cast<size_t>(to)] += e.load;
        e.member = to;
        ++reclaims_cancelled_;
        accepted->push_back(job);
        it = reclaiming_.erase(it);
        continue;
      }
      ++rejections_;
    }
    ++it;
  }
}

}  // namespace estuary
