// EtcdStore (see etcd_store.h for the contract).
//
// Apply builds one /v3/kv/txn request:
//   compare: [create_revision(fence.key) == fence.create_revision]   (only with a fence)
//   success: one request_put or request_delete_range per distinct key, the batch's last change
//            of each (etcd refuses a txn that names a key twice)
// and reads "succeeded" (absent: the compare failed). Scan pages through /v3/kv/range with
// `limit`, continuing from the last key + "\0" while "more" is true, at the first page's revision.
#include "store/etcd_store.h"

#include <map>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

namespace estuary {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kTxn = "/v3/kv/txn";
constexpr std::string_view kRange = "/v3/kv/range";

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

// Adds the etcd flag to refuse-the-batch errors, so the operator knows what to change.
Status ExplainApplyError(const Status& st, size_t ops) {
  if (st.code() != StatusCode::kInvalidArgument) return st;
  const std::string& m = st.message();
  if (m.find("too many operations") != std::string::npos) {
    return InvalidArgument(m + ": a batch of " + std::to_string(ops) +
                           " keys is one transaction and is never split; start etcd with a larger "
                           "--max-txn-ops");
  }
  if (m.find("larger than max") != std::string::npos || m.find("too large") != std::string::npos) {
    return InvalidArgument(m + ": a batch is one transaction and is never split; start etcd with a larger "
                               "--max-request-bytes");
  }
  return st;
}

}  // namespace

StatusOr<std::unique_ptr<EtcdStore>> EtcdStore::Open(EtcdStoreOptions options) {
  if (options.prefix.empty()) return InvalidArgument("etcd store: the key prefix must not be empty");
  if (options.scan_page_size < 1) return InvalidArgument("etcd store: scan_page_size must be at least 1");
  if (options.fence && options.fence->key.empty()) {
    return InvalidArgument("etcd store: the fence key must not be empty");
  }
  StatusOr<std::unique_ptr<EtcdClient>> created = EtcdClient::Create(options.etcd);
  if (!created.ok()) return created.status();
  std::unique_ptr<EtcdClient> client = std::move(*created);
  // One cheap read: is anyone there?
  const Json probe = {{"key", Base64Encode(options.prefix)}, {"count_only", true}};
  StatusOr<Json> answer = client->Call(kRange, probe);
  if (!answer.ok()) return answer.status();
  return std::unique_ptr<EtcdStore>(new EtcdStore(std::move(options), std::move(client)));
}

EtcdStore::EtcdStore(EtcdStoreOptions options, std::unique_ptr<EtcdClient> client)
    : options_(std::move(options)), client_(std::move(client)) {}

EtcdStore::~EtcdStore() = default;

Status EtcdStore::Apply(const StoreBatch& batch) {
  if (batch.empty()) return Status::Ok();
  // The last change of each key (later changes win; etcd refuses a key twice in one txn).
  std::map<std::string_view, const StoreBatch::Change*> last;
  for (const StoreBatch::Change& c : batch.changes) {
    if (HasNul(c.key)) return InvalidArgument("etcd store: apply: a key contains a NUL byte (keys are text)");
    last[c.key] = &c;
  }
  Json ops = Json::array();
  for (const auto& [key, change] : last) {
    const std::string etcd_key = Base64Encode(options_.prefix + std::string(key));
    if (change->value) {
      ops.push_back({{"request_put", {{"key", etcd_key}, {"value", Base64Encode(*change->value)}}}});
    } else {
      ops.push_back({{"request_delete_range", {{"key", etcd_key}}}});
    }
  }
  Json txn = {{"success", std::move(ops)}};
  if (options_.fence) {
    txn["compare"] = Json::array({{{"key", Base64Encode(options_.fence->key)},
                                   {"target", "CREATE"},
                                   {"result", "EQUAL"},
                                   {"create_revision", std::to_string(options_.fence->create_revision)}}});
  }
  StatusOr<Json> answer = client_->Call(kTxn, txn);
  if (!answer.ok()) return ExplainApplyError(answer.status(), last.size());
  if (!answer->value("succeeded", false)) {
    if (!options_.fence) return Internal("etcd store: apply: a transaction without compares did not succeed");
    return Unavailable("etcd store: apply: lost leadership: the fence key '" + options_.fence->key +
                       "' no longer has create_revision " + std::to_string(options_.fence->create_revision) +
                       " (another replica leads); nothing was written");
  }
  return Status::Ok();
}

StatusOr<std::optional<std::string>> EtcdStore::Get(std::string_view key) {
  if (HasNul(key)) return std::optional<std::string>();  // never stored
  const Json range = {{"key", Base64Encode(options_.prefix + std::string(key))}};
  StatusOr<Json> answer = client_->Call(kRange, range);
  if (!answer.ok()) return answer.status();
  const auto kvs = answer->find("kvs");
  if (kvs == answer->end() || !kvs->is_array() || kvs->empty()) return std::optional<std::string>();
  StatusOr<std::string> value = JsonBytes(kvs->front(), "value");
  if (!value.ok()) return value.status();
  return std::optional<std::string>(std::move(*value));
}

Status EtcdStore::Scan(std::string_view prefix,
                       const std::function<bool(std::string_view key, std::string_view value)>& fn) {
  if (HasNul(prefix)) return Status::Ok();  // no stored key has a NUL
  const std::string first = options_.prefix + std::string(prefix);
  const std::string end = Base64Encode(EtcdPrefixEnd(first));
  std::string from = first;
  int64_t revision = 0;  // 0: the first page reads the latest revision; later pages read that one
  while (true) {
    Json range = {{"key", Base64Encode(from)}, {"range_end", end}, {"limit", std::to_string(options_.scan_page_size)}};
    if (revision != 0) range["revision"] = std::to_string(revision);
    StatusOr<Json> answer = client_->Call(kRange, range);
    if (!answer.ok()) return answer.status();
    if (revision == 0) {
      const auto header = answer->find("header");
      if (header == answer->end() || !header->is_object()) {
        return Internal("etcd store: scan: an answer without a header");
      }
      ESTUARY_ASSIGN_OR_RETURN(revision, JsonInt64(*header, "revision"));
    }
    const auto kvs = answer->find("kvs");
    if (kvs == answer->end() || !kvs->is_array() || kvs->empty()) return Status::Ok();
    std::string key;
    for (const Json& kv : *kvs) {
      ESTUARY_ASSIGN_OR_RETURN(key, JsonBytes(kv, "key"));
      if (key.compare(0, options_.prefix.size(), options_.prefix) != 0) {
        return Internal("etcd store: scan: etcd returned key '" + key + "' outside the prefix");
      }
      std::string value;
      ESTUARY_ASSIGN_OR_RETURN(value, JsonBytes(kv, "value"));
      if (!fn(std::string_view(key).substr(options_.prefix.size()), value)) return Status::Ok();
    }
    if (!answer->value("more", false)) return Status::Ok();
    from = key + '\0';  // the next key after the last one
  }
}

}  // namespace estuary
