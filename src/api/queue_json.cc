#include "api/queue_json.h"

#include <algorithm>

#include "api/json_reader.h"

namespace estuary {
namespace {

using namespace jsonr;  // NOLINT: the reader of this schema

constexpr int64_t kMaxGpus = 10'000'000;
constexpr int64_t kMaxCpuOrMemory = 1'000'000'000'000;
constexpr int64_t kMaxCoresOrGib = 1'000'000'000;
constexpr int64_t kMaxSeconds = 1'000'000'000;
constexpr size_t kMaxName = 128;
constexpr size_t kMaxQueues = 100'000;
constexpr size_t kMaxTenants = 10'000;
constexpr size_t kMaxTenantName = 63;  // as a tokens file's NAME (api/tokens.h)

// An amount in a fine unit or a coarse one worth `factor` fine units, not both; nullopt when
// neither is given.
StatusOr<std::optional<int64_t>> FineOrCoarse(const ObjectReader& in, const char* fine, const char* coarse, int64_t factor) {
  if (in.Find(fine) != nullptr && in.Find(coarse) != nullptr) {
    return InvalidArgument(Field(in.PathOf(fine)) + "give '" + coarse + "' or '" + fine + "', not both");
  }
  if (in.Find(coarse) != nullptr) {
    int64_t v;
    ESTUARY_ASSIGN_OR_RETURN(v, in.Integer(coarse, 0, kMaxCoresOrGib));
    return std::optional<int64_t>(v * factor);
  }
  if (in.Find(fine) == nullptr) return std::optional<int64_t>();
  int64_t v;
  ESTUARY_ASSIGN_OR_RETURN(v, in.Integer(fine, 0, kMaxCpuOrMemory));
  return std::optional<int64_t>(v);
}

StatusOr<QuotaAmounts> ReadQuota(const Json& v, const std::string& path) {
  if (!v.is_object()) return InvalidArgument(Field(path) + "expected an object {gpus, cpu_cores, memory_gib}");
  const ObjectReader in(v, path);
  ESTUARY_RETURN_IF_ERROR(in.RejectUnknown({"gpus", "cpu_milli", "cpu_cores", "memory_mib", "memory_gib"}));
  QuotaAmounts q;
  if (const Json* g = in.Find("gpus")) {
    const std::string gp = in.PathOf("gpus");
    if (g->is_object()) {
      for (const auto& [model, n] : g->items()) {
        const std::string mp = MemberPath(gp, model);
        if (std::string why = StringProblem(model, 1, 64); !why.empty()) return InvalidArgument(Field(mp) + "model name " + why);
        int64_t whole;
        ESTUARY_ASSIGN_OR_RETURN(whole, IntegerIn(n, mp, 0, kMaxGpus));
        q.model_milli[model] = whole * 1000;
      }
    } else {
      int64_t whole;
      ESTUARY_ASSIGN_OR_RETURN(whole, IntegerIn(*g, gp, 0, kMaxGpus));
      q.gpu_milli = whole * 1000;
    }
  }
  ESTUARY_ASSIGN_OR_RETURN(q.cpu_milli, FineOrCoarse(in, "cpu_milli", "cpu_cores", 1000));
  ESTUARY_ASSIGN_OR_RETURN(q.memory_mib, FineOrCoarse(in, "memory_mib", "memory_gib", 1024));
  return q;
}

Json QuotaJson(const QuotaAmounts& q) {
  Json j = Json::object();
  if (!q.model_milli.empty()) {
    Json m = Json::object();
    for (const auto& [model, milli] : q.model_milli) m[model] = milli / 1000;
    j["gpus"] = m;
  }
  if (q.gpu_milli && q.model_milli.empty()) j["gpus"] = *q.gpu_milli / 1000;  // (a decoded quota has one of the two)
  if (q.cpu_milli) j["cpu_milli"] = *q.cpu_milli;
  if (q.memory_mib) j["memory_mib"] = *q.memory_mib;
  return j;
}

}  // namespace

StatusOr<std::vector<QueueSpec>> DecodeQueues(const Json& v, const std::string& path,
                                              const std::function<int(const std::string&)>& line_of) {
  if (!v.is_array()) return InvalidArgument(Field(path) + "expected a list of queues {name, parent, guarantee, ...}");
  if (v.size() > kMaxQueues) return InvalidArgument(Field(path) + std::to_string(v.size()) + " queues, more than " + std::to_string(kMaxQueues));
  std::vector<QueueSpec> out;
  auto line = [&](const std::string& p) { return line_of ? line_of(p) : 0; };
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string qp = path + "[" + std::to_string(i) + "]";
    if (!v[i].is_object()) return InvalidArgument(Field(qp) + "expected an object {name, parent, guarantee, ...}");
    const ObjectReader in(v[i], qp);
    ESTUARY_RETURN_IF_ERROR(in.RejectUnknown({"name", "parent", "guarantee", "limit", "lend_limit", "weight", "max_priority",
                                              "reclaim", "reclaimable", "tenants"}));
    QueueSpec s;
    const Json* name;
    ESTUARY_ASSIGN_OR_RETURN(name, in.Require("name"));
    ESTUARY_ASSIGN_OR_RETURN(s.name, NameIn(*name, in.PathOf("name"), kMaxName));
    if (const Json* parent = in.Find("parent")) {
      ESTUARY_ASSIGN_OR_RETURN(s.parent, NameIn(*parent, in.PathOf("parent"), kMaxName));
    }
    for (auto [key, field] : {std::pair{"guarantee", &s.guarantee}, std::pair{"limit", &s.limit},
                              std::pair{"lend_limit", &s.lend_limit}}) {
      if (const Json* q = in.Find(key)) ESTUARY_ASSIGN_OR_RETURN(*field, ReadQuota(*q, in.PathOf(key)));
    }
    ESTUARY_ASSIGN_OR_RETURN(s.weight, in.Integer("weight", 1, 1'000'000, 1));
    int64_t prio;
    ESTUARY_ASSIGN_OR_RETURN(prio, in.Integer("max_priority", 0, 1000, 1000));
    s.max_priority = static_cast<int32_t>(prio);
    ESTUARY_ASSIGN_OR_RETURN(s.reclaim, in.Bool("reclaim", true));
    ESTUARY_ASSIGN_OR_RETURN(s.reclaimable, in.Bool("reclaimable", true));
    if (const Json* tenants = in.Find("tenants")) {
      const std::string tp = in.PathOf("tenants");
      if (!tenants->is_array() || tenants->size() > kMaxTenants) {
        return InvalidArgument(Field(tp) + "expected a list of at most " + std::to_string(kMaxTenants) + " tenant names");
      }
      for (size_t t = 0; t < tenants->size(); ++t) {
        std::string who;
        ESTUARY_ASSIGN_OR_RETURN(who, NameIn((*tenants)[t], tp + "[" + std::to_string(t) + "]", kMaxTenantName));
        if (std::find(s.tenants.begin(), s.tenants.end(), who) != s.tenants.end()) {
          return InvalidArgument(Field(tp + "[" + std::to_string(t) + "]") + "'" + who + "' is listed twice");
        }
        s.tenants.push_back(std::move(who));
      }
    }
    s.lines.queue = line(qp);
    s.lines.parent = line(in.PathOf("parent"));
    s.lines.guarantee = line(in.PathOf("guarantee"));
    s.lines.limit = line(in.PathOf("limit"));
    s.lines.lend_limit = line(in.PathOf("lend_limit"));
    out.push_back(std::move(s));
  }
  return out;
}

StatusOr<SharingSpec> DecodeSharing(const Json& v, const std::string& path) {
  if (!v.is_object()) return InvalidArgument(Field(path) + "expected an object {borrow, reclaim, weights, reclaim_to, ...}");
  const ObjectReader in(v, path);
  ESTUARY_RETURN_IF_ERROR(
      in.RejectUnknown({"borrow", "reclaim", "weights", "reclaim_to", "usage_half_life_s", "cooldown_s", "reborrow_s",
                       "budget_period_s", "count_in_flight", "rebalance", "within_queue"}));
  SharingSpec s;
  ESTUARY_ASSIGN_OR_RETURN(s.borrow, in.Bool("borrow", true));
  ESTUARY_ASSIGN_OR_RETURN(s.reclaim, in.Bool("reclaim", true));
  ESTUARY_ASSIGN_OR_RETURN(s.weights, in.Bool("weights", true));
  std::string to;
  ESTUARY_ASSIGN_OR_RETURN(to, in.String("reclaim_to", 1, 64, "guarantee"));
  if (to != "guarantee" && to != "fair-share") {
    return InvalidArgument(Field(in.PathOf("reclaim_to")) + Quoted(to) + " is not one of guarantee, fair-share");
  }
  s.reclaim_to_fair_share = to == "fair-share";
  ESTUARY_ASSIGN_OR_RETURN(s.usage_half_life_s, in.Integer("usage_half_life_s", 0, kMaxSeconds, 0));
  ESTUARY_ASSIGN_OR_RETURN(s.cooldown_s, in.Integer("cooldown_s", 0, kMaxSeconds, 300));
  ESTUARY_ASSIGN_OR_RETURN(s.reborrow_s, in.Integer("reborrow_s", 0, kMaxSeconds, 3600));
  ESTUARY_ASSIGN_OR_RETURN(s.budget_period_s, in.Integer("budget_period_s", 1, 86400, 60));
  ESTUARY_ASSIGN_OR_RETURN(s.count_in_flight, in.Bool("count_in_flight", true));
  ESTUARY_ASSIGN_OR_RETURN(s.rebalance, in.Bool("rebalance", true));
  ESTUARY_ASSIGN_OR_RETURN(s.within_queue, in.Bool("within_queue", false));
  return s;
}

Json EncodeQueues(const std::vector<QueueSpec>& queues) {
  Json out = Json::array();
  for (const QueueSpec& s : queues) {
    Json q = {{"name", s.name}};
    if (!s.parent.empty()) q["parent"] = s.parent;
    if (!s.guarantee.empty()) q["guarantee"] = QuotaJson(s.guarantee);
    if (!s.limit.empty()) q["limit"] = QuotaJson(s.limit);
    if (!s.lend_limit.empty()) q["lend_limit"] = QuotaJson(s.lend_limit);
    q["weight"] = s.weight;
    q["max_priority"] = s.max_priority;
    q["reclaim"] = s.reclaim;
    q["reclaimable"] = s.reclaimable;
    if (!s.tenants.empty()) q["tenants"] = s.tenants;
    out.push_back(std::move(q));
  }
  return out;
}

Json EncodeSharing(const SharingSpec& s) {
  return {{"borrow", s.borrow},
          {"reclaim", s.reclaim},
          {"weights", s.weights},
          {"reclaim_to", s.reclaim_to_fair_share ? "fair-share" : "guarantee"},
          {"usage_half_life_s", s.usage_half_life_s},
          {"cooldown_s", s.cooldown_s},
          {"reborrow_s", s.reborrow_s},
          {"budget_period_s", s.budget_period_s},
          {"count_in_flight", s.count_in_flight},
          {"rebalance", s.rebalance},
          {"within_queue", s.within_queue}};
}

}  // namespace estuary
