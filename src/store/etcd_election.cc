// LeaderElection (see etcd_election.h for the contract and the algorithm).
#include "store/etcd_election.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

namespace estuary {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::string_view kRange = "/v3/kv/range";
constexpr std::string_view kTxn = "/v3/kv/txn";
constexpr std::string_view kGrant = "/v3/lease/grant";
constexpr std::string_view kKeepalive = "/v3/lease/keepalive";
constexpr std::string_view kRevoke = "/v3/lease/revoke";

// Sleeps `d`, waking every 20 ms to look at `stop`.
void SleepUnlessStopped(milliseconds d, const std::atomic<bool>& stop) {
  const Clock::time_point until = Clock::now() + d;
  while (!stop.load() && Clock::now() < until) {
    std::this_thread::sleep_for(std::min<Clock::duration>(milliseconds(20), until - Clock::now()));
  }
}

}  // namespace

StatusOr<std::unique_ptr<LeaderElection>> LeaderElection::Create(LeaderElectionOptions options) {
  if (options.key.empty()) return InvalidArgument("leader election: the key must not be empty");
  if (options.identity.empty()) return InvalidArgument("leader election: the identity must not be empty");
  if (options.ttl_s < 2) return InvalidArgument("leader election: ttl_s must be at least 2");
  if (options.poll_ms < 1) return InvalidArgument("leader election: poll_ms must be at least 1");
  StatusOr<std::unique_ptr<EtcdClient>> created = EtcdClient::Create(options.etcd);
  if (!created.ok()) return created.status();
  std::unique_ptr<EtcdClient> client = std::move(*created);
  return std::unique_ptr<LeaderElection>(new LeaderElection(std::move(options), std::move(client)));
}

LeaderElection::LeaderElection(LeaderElectionOptions options, std::unique_ptr<EtcdClient> client)
    : options_(std::move(options)), client_(std::move(client)) {}

LeaderElection::~LeaderElection() { StopKeepalive(); }

EtcdFence LeaderElection::fence() const { return EtcdFence{options_.key, revision_.load()}; }

StatusOr<std::optional<LeaderElection::Holder>> LeaderElection::ReadKey(int timeout_ms) {
  StatusOr<Json> answer = client_->Call(kRange, Json{{"key", Base64Encode(options_.key)}}, timeout_ms);
  if (!answer.ok()) return answer.status();
  const auto kvs = answer->find("kvs");
  if (kvs == answer->end() || !kvs->is_array() || kvs->empty()) return std::optional<Holder>();
  Holder h;
  ESTUARY_ASSIGN_OR_RETURN(h.identity, JsonBytes(kvs->front(), "value"));
  ESTUARY_ASSIGN_OR_RETURN(h.create_revision, JsonInt64(kvs->front(), "create_revision"));
  ESTUARY_ASSIGN_OR_RETURN(h.lease, JsonInt64(kvs->front(), "lease"));
  return std::optional<Holder>(std::move(h));
}

StatusOr<std::optional<std::string>> LeaderElection::Leader() {
  StatusOr<std::optional<Holder>> holder = ReadKey();
  if (!holder.ok()) return holder.status();
  if (!*holder) return std::optional<std::string>();
  return std::optional<std::string>((*holder)->identity);
}

void LeaderElection::RevokeQuietly(int64_t lease) {
  (void)client_->Call(kRevoke, Json{{"ID", std::to_string(lease)}});  // it expires by itself anyway
}

StatusOr<int64_t> LeaderElection::Campaign(const std::atomic<bool>& stop) {
  if (leader_.load()) return revision_.load();
  StopKeepalive();  // the thread of a lost term, if any, has ended or is ending
  if (lease_ != 0) {
    RevokeQuietly(lease_);  // a lost term's lease: it may outlive the key
    lease_ = 0;
  }
  while (!stop.load()) {
    // 1. Someone leads: look again later.
    StatusOr<std::optional<Holder>> holder = ReadKey();
    if (!holder.ok() && holder.status().code() != StatusCode::kUnavailable) return holder.status();
    if (holder.ok() && !holder->has_value()) {
      // 2. Nobody leads: try to.
      StatusOr<bool> won = TryAcquire();
      if (!won.ok() && won.status().code() != StatusCode::kUnavailable) return won.status();
      if (won.ok() && *won) return revision_.load();
      if (won.ok()) continue;  // another replica was faster: read its key at once
    }
    SleepUnlessStopped(milliseconds(options_.poll_ms), stop);
  }
  return Unavailable("leader election: campaign stopped");
}

StatusOr<bool> LeaderElection::TryAcquire() {
  const Clock::time_point granted_at = Clock::now();
  StatusOr<Json> grant = client_->Call(kGrant, Json{{"TTL", std::to_string(options_.ttl_s)}});
  if (!grant.ok()) return grant.status();
  int64_t lease = 0;
  int64_t ttl = 0;
  ESTUARY_ASSIGN_OR_RETURN(lease, JsonInt64(*grant, "ID"));
  ESTUARY_ASSIGN_OR_RETURN(ttl, JsonInt64(*grant, "TTL"));
  if (lease == 0 || ttl <= 0) return Internal("leader election: etcd granted no lease: " + grant->dump());

  const std::string key = Base64Encode(options_.key);
  const Json txn = {
      {"compare", Json::array({{{"key", key}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}}})},
      {"success", Json::array({{{"request_put",
                                 {{"key", key},
                                  {"value", Base64Encode(options_.identity)},
                                  {"lease", std::to_string(lease)}}}}})},
      {"failure", Json::array({{{"request_range", {{"key", key}}}}})},
  };
  StatusOr<Json> answer = client_->Call(kTxn, txn);
  if (!answer.ok()) {
    RevokeQuietly(lease);
    return answer.status();
  }
  int64_t revision = 0;
  if (answer->value("succeeded", false)) {
    // The key was created by this transaction: its create_revision is the transaction's revision.
    const auto header = answer->find("header");
    if (header == answer->end() || !header->is_object()) {
      return Internal("leader election: a txn answer without a header");
    }
    ESTUARY_ASSIGN_OR_RETURN(revision, JsonInt64(*header, "revision"));
  } else {
    // Someone holds the key — perhaps this very lease, when an earlier copy of this transaction
    // reached etcd but its answer was lost and the client sent it again.
    const Json* kv = nullptr;
    const auto responses = answer->find("responses");
    if (responses != answer->end() && responses->is_array() && !responses->empty() && responses->front().is_object()) {
      const auto range = responses->front().find("response_range");
      if (range != responses->front().end() && range->is_object()) {
        const auto kvs = range->find("kvs");
        if (kvs != range->end() && kvs->is_array() && !kvs->empty()) kv = &kvs->front();
      }
    }
    int64_t holder_lease = 0;
    if (kv != nullptr) ESTUARY_ASSIGN_OR_RETURN(holder_lease, JsonInt64(*kv, "lease"));
    if (kv == nullptr || holder_lease != lease) {
      RevokeQuietly(lease);
      return false;
    }
    ESTUARY_ASSIGN_OR_RETURN(revision, JsonInt64(*kv, "create_revision"));
  }
  lease_ = lease;
  revision_.store(revision);
  leader_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_keepalive_ = false;
  }
  keepalive_ =
      std::thread(&LeaderElection::KeepaliveLoop, this, lease, revision, granted_at + std::chrono::seconds(ttl));
  return true;
}

void LeaderElection::KeepaliveLoop(int64_t lease, int64_t revision, Clock::time_point deadline) {
  const milliseconds period(options_.ttl_s * 1000 / 3);
  const milliseconds max_timeout(std::min<int>(options_.etcd.request_timeout_ms, static_cast<int>(period.count())));
  milliseconds wait = period;
  std::string why;
  std::string last_failure = "none";
  while (true) {
    // Wake by the deadline at the latest, to step down on time.
    wait = std::max(milliseconds(0),
                    std::min(wait, std::chrono::duration_cast<milliseconds>(deadline - Clock::now())));
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, wait, [this] { return stop_keepalive_; })) return;
    }
    // Every request ends by the deadline, so a replica cut off from etcd steps down on time.
    const Clock::time_point sent_at = Clock::now();
    if (sent_at >= deadline) {
      why = "no lease refresh reached etcd within the lease TTL (last failure: " + last_failure + ")";
      break;
    }
    const milliseconds until_deadline = std::chrono::duration_cast<milliseconds>(deadline - sent_at);
    const int timeout_ms = static_cast<int>(std::max<int64_t>(1, std::min(max_timeout, until_deadline).count()));
    StatusOr<Json> answer = client_->Call(kKeepalive, Json{{"ID", std::to_string(lease)}}, timeout_ms);
    StatusOr<int64_t> ttl = answer.ok() ? JsonInt64(*answer, "TTL") : StatusOr<int64_t>(answer.status());
    if (ttl.ok()) {
      if (*ttl <= 0) {
        why = "the lease " + std::to_string(lease) + " expired or was revoked";
        break;
      }
      deadline = sent_at + std::chrono::seconds(*ttl);
      StatusOr<std::optional<Holder>> holder = ReadKey(static_cast<int>(max_timeout.count()));
      if (holder.ok() && (!holder->has_value() || (*holder)->create_revision != revision)) {
        why = "the key '" + options_.key + "' was deleted or replaced";
        break;
      }
      wait = period;
    } else {
      last_failure = ttl.status().message();
      wait = std::min(period, milliseconds(options_.poll_ms));
    }
    if (Clock::now() >= deadline) {
      why = "no lease refresh reached etcd within the lease TTL (last failure: " + last_failure + ")";
      break;
    }
  }
  leader_.store(false);
  if (options_.on_lost) options_.on_lost("leader election: lost leadership: " + why);
}

void LeaderElection::StopKeepalive() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_keepalive_ = true;
  }
  cv_.notify_all();
  if (keepalive_.joinable()) keepalive_.join();
}

Status LeaderElection::Resign() {
  StopKeepalive();
  leader_.store(false);
  const int64_t lease = lease_;
  lease_ = 0;
  if (lease == 0) return Status::Ok();
  StatusOr<Json> answer = client_->Call(kRevoke, Json{{"ID", std::to_string(lease)}});
  if (!answer.ok() && answer.status().code() != StatusCode::kNotFound) return answer.status();
  return Status::Ok();
}

}  // namespace estuary
