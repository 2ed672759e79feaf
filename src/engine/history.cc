#include "engine/history.h"

#include "api/queue_json.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <type_traits>

namespace estuary {
namespace {

using Json = nlohmann::json;

// Reads fields of one JSON object, remembering the first error with its field path. A missing
// optional field takes the default it is given; a field of the wrong type is an error.
class Fields {
 public:
  Fields(const Json& j, std::string path, std::string* error) : j_(j), path_(std::move(path)), error_(error) {
    if (!j_.is_object()) Fail("", "expected an object");
  }
  Fields At(const char* key) const {
    static const Json kEmpty = Json::object();
    if (!j_.is_object() || !j_.contains(key)) {
      Fail(key, "missing");
      return Fields(kEmpty, path_ + key + ".", error_);
    }
    return Fields(j_.at(key), path_ + key + ".", error_);
  }
  bool Has(const char* key) const { return j_.is_object() && j_.contains(key); }
  const Json& Raw(const char* key) const {
    static const Json kNull;
    return Has(key) ? j_.at(key) : kNull;
  }
  int64_t Int(const char* key, int64_t def) const {
    if (!Has(key)) return def;
    const Json& v = j_.at(key);
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_unsigned()) return static_cast<int64_t>(v.get<uint64_t>());
    Fail(key, "expected an integer");
    return def;
  }
  uint64_t U64(const char* key, uint64_t def) const {
    if (!Has(key)) return def;
    const Json& v = j_.at(key);
    if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) return v.get<uint64_t>();
    Fail(key, "expected a non-negative integer");
    return def;
  }
  int32_t I32(const char* key, int32_t def) const { return static_cast<int32_t>(Int(key, def)); }
  double Num(const char* key, double def) const {
    if (!Has(key)) return def;
    if (j_.at(key).is_number()) return j_.at(key).get<double>();
    Fail(key, "expected a number");
    return def;
  }
  bool Bool(const char* key, bool def) const {
    if (!Has(key)) return def;
    if (j_.at(key).is_boolean()) return j_.at(key).get<bool>();
    Fail(key, "expected true or false");
    return def;
  }
  std::string Str(const char* key, const std::string& def = "") const {
    if (!Has(key)) return def;
    if (j_.at(key).is_string()) return j_.at(key).get<std::string>();
    Fail(key, "expected a string");
    return def;
  }
  // An array field (empty when missing); its items are read by `item(Json, path)`.
  template <typename F>
  void Each(const char* key, F item) const {
    if (!Has(key)) return;
    const Json& a = j_.at(key);
    if (!a.is_array()) {
      Fail(key, "expected an array");
      return;
    }
    for (size_t i = 0; i < a.size(); ++i) item(a[i], path_ + key + "[" + std::to_string(i) + "]");
  }
  void Fail(const std::string& key, const std::string& what) const {
    if (error_->empty()) *error_ = path_ + key + ": " + what;
  }
  const std::string& path() const { return path_; }
  std::string* error() const { return error_; }

 private:
  const Json& j_;
  std::string path_;
  std::string* error_;
};

// Records `what` at `path` (an array item) when nothing failed before.
void FailAt(std::string* error, const std::string& path, const std::string& what) {
  if (error->empty()) *error = path + ": " + what;
}

template <typename Id>
int64_t IdJson(Id id) {
  return id.valid() ? int64_t{id.value()} : -1;
}
template <typename Id>
Id IdFrom(const Fields& f, const char* key) {
  const int64_t v = f.Int(key, -1);
  if (v < -1 || v >= int64_t{UINT32_MAX}) f.Fail(key, "out of range");
  return v < 0 || v >= int64_t{UINT32_MAX} ? Id() : Id(static_cast<uint32_t>(v));
}

Json RequestJson(const TaskRequest& r) {
  return {{"cpu_milli", r.cpu_milli}, {"mem_mib", r.mem_mib}, {"gpu_count", r.gpu_count},
          {"gpu_milli", r.gpu_milli}, {"models", r.models.bits()}};
}
TaskRequest RequestFrom(const Fields& f) {
  TaskRequest r;
  r.cpu_milli = f.Int("cpu_milli", 0);
  r.mem_mib = f.Int("mem_mib", 0);
  r.gpu_count = f.I32("gpu_count", 0);
  r.gpu_milli = static_cast<MilliGpu>(f.Int("gpu_milli", 0));
  r.models = GpuModelSet::FromBits(f.U64("models", 0));
  return r;
}

Json JobJson(const EngineJob& j) {
  Json locked = Json::array();
  for (char c : j.locked) locked.push_back(c != 0);
  Json out = {{"id", j.id},
          {"name", j.name},
          {"min_replicas", j.min_replicas},
          {"max_replicas", j.max_replicas},
          {"step", j.step},
          {"usable_step", j.usable_step},
          {"per_replica", RequestJson(j.per_replica)},
          {"models", j.models},
          {"plane", j.plane},
          {"required_level", j.required_level},
          {"preferred_level", j.preferred_level},
          {"priority", j.priority},
          {"preemptible", j.preemptible},
          {"checkpoint_interval_s", j.checkpoint_interval_s},
          {"restart_cost_s", j.restart_cost_s},
          {"locked", locked},
          {"acknowledge_standby", j.acknowledge_standby},
          {"queue", j.queue}};
  // Left out at their defaults, so that histories recorded before the fields existed read and
  // write the same.
  if (j.required_max_wait_s > 0) out["required_max_wait_s"] = j.required_max_wait_s;
  if (j.checkpoint_on_notice_s != 0) out["checkpoint_on_notice_s"] = j.checkpoint_on_notice_s;
  if (j.walltime_s > 0) out["walltime_s"] = j.walltime_s;
  return out;
}
EngineJob JobFrom(const Fields& f) {
  EngineJob j;
  j.id = static_cast<uint32_t>(f.U64("id", 0));
  j.name = f.Str("name");
  j.min_replicas = f.I32("min_replicas", 1);
  j.max_replicas = f.I32("max_replicas", 1);
  j.step = f.I32("step", 1);
  j.usable_step = f.I32("usable_step", 0);
  if (f.Has("per_replica")) j.per_replica = RequestFrom(f.At("per_replica"));
  f.Each("models", [&](const Json& m, const std::string& path) {
    if (m.is_string()) j.models.push_back(m.get<std::string>());
    else FailAt(f.error(), path, "expected a string");
  });
  j.plane = f.Str("plane");
  j.required_level = f.Str("required_level");
  j.preferred_level = f.Str("preferred_level");
  j.required_max_wait_s = f.Int("required_max_wait_s", 0);
  j.priority = f.I32("priority", 0);
  j.preemptible = f.Bool("preemptible", false);
  j.checkpoint_interval_s = f.Int("checkpoint_interval_s", 0);
  j.checkpoint_on_notice_s = f.Int("checkpoint_on_notice_s", 0);
  j.restart_cost_s = f.Int("restart_cost_s", 0);
  j.walltime_s = f.Int("walltime_s", 0);
  f.Each("locked", [&](const Json& b, const std::string&) { j.locked.push_back(b.is_boolean() && b.get<bool>()); });
  j.acknowledge_standby = f.Bool("acknowledge_standby", false);
  j.queue = f.Str("queue");
  return j;
}

Json DefragJson(const DefragOptions& o) {
  Json evacuate = Json::array();
  for (NodeId n : o.evacuate) evacuate.push_back(n.value());
  return {{"partition_nodes", o.partition_nodes},
          {"align_plane", IdJson(o.align_plane)},
          {"align_level", o.align_level},
          {"max_chain_depth", o.max_chain_depth},
          {"max_rounds", o.max_rounds},
          {"seed", o.seed},
          {"threads", o.threads},
          {"variants", o.variants},
          {"small_partition_nodes", o.small_partition_nodes},
          {"small_partition_variants", o.small_partition_variants},
          {"move_cpu_only_tasks", o.move_cpu_only_tasks},
          {"objective", static_cast<int>(o.objective)},
          {"objective_plane", IdJson(o.objective_plane)},
          {"objective_level", o.objective_level},
          {"evacuate", evacuate},
          {"shape", RequestJson(o.shape)}};
}
DefragOptions DefragFrom(const Fields& f) {
  DefragOptions o;
  o.partition_nodes = f.I32("partition_nodes", o.partition_nodes);
  o.align_plane = IdFrom<PlaneId>(f, "align_plane");
  o.align_level = f.I32("align_level", o.align_level);
  o.max_chain_depth = f.I32("max_chain_depth", o.max_chain_depth);
  o.max_rounds = f.I32("max_rounds", o.max_rounds);
  o.seed = f.U64("seed", o.seed);
  o.threads = f.I32("threads", o.threads);
  o.variants = f.I32("variants", o.variants);
  o.small_partition_nodes = f.I32("small_partition_nodes", o.small_partition_nodes);
  o.small_partition_variants = f.I32("small_partition_variants", o.small_partition_variants);
  o.move_cpu_only_tasks = f.Bool("move_cpu_only_tasks", o.move_cpu_only_tasks);
  const int64_t objective = f.Int("objective", 0);
  if (objective < 0 || objective > 2) f.Fail("objective", "expected 0, 1 or 2");
  o.objective = static_cast<DefragOptions::Objective>(std::clamp<int64_t>(objective, 0, 2));
  o.objective_plane = IdFrom<PlaneId>(f, "objective_plane");
  o.objective_level = f.I32("objective_level", o.objective_level);
  f.Each("evacuate", [&](const Json& n, const std::string& path) {
    if (n.is_number_unsigned()) o.evacuate.push_back(NodeId(n.get<uint32_t>()));
    else FailAt(f.error(), path, "expected a node id");
  });
  if (f.Has("shape")) o.shape = RequestFrom(f.At("shape"));
  return o;
}

constexpr const char* kModes[] = {"queue", "start-now", "start-or-reclaim", "enqueue"};
constexpr const char* kNodeOps[] = {"fail", "drain", "restore", "cordon", "uncordon", "evacuate"};
constexpr const char* kSettings[] = {"grace", "absorb", "standby-grace"};
constexpr const char* kParts[] = {"whole", "before-grow", "grow"};

template <size_t N>
int NameIndex(const Fields& f, const char* key, const char* const (&names)[N]) {
  const std::string s = f.Str(key, names[0]);
  for (size_t i = 0; i < N; ++i) {
    if (s == names[i]) return static_cast<int>(i);
  }
  f.Fail(key, "unknown value '" + s + "'");
  return 0;
}

// One input as {"kind": K, fields...}.
struct InputJson {
  Json operator()(const SubmitInput& x) const {
    return {{"kind", "submit"}, {"job", JobJson(x.job)}, {"mode", kModes[static_cast<int>(x.mode)]}};
  }
  Json operator()(const CancelInput& x) const { return {{"kind", "cancel"}, {"job", x.job}, {"finished", x.finished}}; }
  Json operator()(const ResizeInput& x) const {
    return {{"kind", "resize"}, {"job", x.job}, {"min_replicas", x.min_replicas}, {"max_replicas", x.max_replicas}};
  }
  Json operator()(const ProbeInput& x) const {
    Json j = {{"kind", "probe"}, {"job", JobJson(x.job)}, {"quote", x.quote}};
    if (x.know) j["know"] = true;
    return j;
  }
  Json operator()(const AddPlaneInput& x) const { return {{"kind", "add-plane"}, {"name", x.name}, {"levels", x.levels}}; }
  Json operator()(const AddNodeInput& x) const {
    Json labels = Json::array(), domains = Json::array();
    for (const auto& [k, v] : x.spec.labels) labels.push_back({k, v});
    for (const auto& [plane, names] : x.domains) domains.push_back({plane, names});
    return {{"kind", "add-node"},
            {"name", x.spec.name},
            {"cpu_milli", x.spec.cpu_milli},
            {"mem_mib", x.spec.mem_mib},
            {"gpu_count", x.spec.gpu_count},
            {"model_id", IdJson(x.spec.model)},
            {"labels", labels},
            {"gpu_model", x.gpu_model},
            {"domains", domains}};
  }
  Json operator()(const NodeInput& x) const {
    return {{"kind", "node"}, {"op", kNodeOps[static_cast<int>(x.op)]}, {"node", IdJson(x.node)}};
  }
  Json operator()(const StandbyInput& x) const { return {{"kind", "standby"}, {"job", x.job}, {"replicas", x.replicas}}; }
  Json operator()(const StandbyWindowsInput& x) const {
    Json w = Json::array();
    for (const StandbyWindowSpec& s : x.windows) w.push_back({s.from_s, s.to_s, s.replicas});
    return {{"kind", "standby-windows"}, {"job", x.job}, {"windows", w}};
  }
  Json operator()(const DefragInput& x) const { return {{"kind", "defrag"}, {"options", DefragJson(x.options)}}; }
  Json operator()(const AbortMovesInput&) const { return {{"kind", "abort-moves"}}; }
  Json operator()(const AcknowledgeMoveInput& x) const {
    return {{"kind", "acknowledge-move"}, {"task", IdJson(x.task)}, {"ready", x.ready}};
  }
  Json operator()(const AcknowledgeStandbyInput& x) const {
    return {{"kind", "acknowledge-standby"}, {"task", IdJson(x.task)}, {"ok", x.ok}, {"why", x.why}};
  }
  Json operator()(const HoldInput& x) const { return {{"kind", "hold"}, {"job", x.job}, {"hold", x.hold}}; }
  Json operator()(const AdoptInput& x) const {
    Json p = Json::array();
    for (const ReplicaPlacement& r : x.placements) {
      Json gpus = Json::array();
      for (uint8_t g : r.gpus) gpus.push_back(g);
      p.push_back({{"replica", r.replica},
                   {"node", IdJson(r.node)},
                   {"gpus", gpus},
                   {"standby", r.standby},
                   {"borrowed", r.borrowed}});
    }
    return {{"kind", "adopt"}, {"job", JobJson(x.job)}, {"placements", p}, {"started_s", x.started_s}};
  }
  Json operator()(const SettingInput& x) const {
    return {{"kind", "setting"}, {"key", kSettings[static_cast<int>(x.key)]}, {"value", x.value}};
  }
  Json operator()(const QueuesInput& x) const {
    return {{"kind", "queues"}, {"queues", EncodeQueues(x.queues)}, {"sharing", EncodeSharing(x.sharing)}};
  }
  Json operator()(const RestoreInput& x) const {
    Json jobs = Json::array(), queues = Json::array();
    for (const CarriedJob& c : x.carry.jobs) {
      jobs.push_back(CarriedJobJson(c, [](NodeId n) { return Json(IdJson(n)); }));
      jobs.back()["job"] = c.job;
    }
    for (const CarriedQueue& q : x.carry.queues) {
      queues.push_back({{"name", q.name}, {"cooldown_until", q.cooldown_until}, {"decayed", q.decayed}, {"usage", q.usage}});
    }
    Json out = {{"kind", "restore"}, {"jobs", jobs}, {"queues", queues}, {"usage_at", x.carry.usage_at}};
    if (const std::optional<CarriedSchedule>& t = x.carry.schedule) {
      out["schedule"] = {{"next_defrag", t->next_defrag},
                         {"last_plan", t->last_plan},
                         {"next_replan", t->next_replan},
                         {"next_backfill", t->next_backfill},
                         {"walltime_starts", t->walltime_starts}};
    }
    return out;
  }
  Json operator()(const CycleInput& x) const {
    return {{"kind", "cycle"},
            {"part", kParts[static_cast<int>(x.options.part)]},
            {"external_blocking", x.options.external_blocking}};
  }
};

// A carried job's fields (CarriedJobJson's; not its id), its nodes read by `node` (nullopt: not a
// node there, an error; an invalid NodeId: one that is gone, skipped).
CarriedJob CarriedFrom(const Fields& jf, const std::function<std::optional<NodeId>(const Json&)>& node) {
  CarriedJob c;
  const auto nodes = [&](const Fields& from, const char* key, std::vector<NodeId>& to) {
    from.Each(key, [&](const Json& n, const std::string& at) {
      const std::optional<NodeId> id = node(n);
      if (!id) FailAt(jf.error(), at, "expected a node");
      else if (id->valid()) to.push_back(*id);
    });
  };
  const auto pairs = [&](const Fields& from, const char* key, std::vector<std::pair<uint32_t, uint32_t>>& to) {
    from.Each(key, [&](const Json& t, const std::string& at) {
      if (t.is_array() && t.size() == 2 && t[0].is_number_unsigned() && t[1].is_number_unsigned()) {
        to.emplace_back(t[0].get<uint32_t>(), t[1].get<uint32_t>());
      } else {
        FailAt(jf.error(), at, "expected [job, replica]");
      }
    });
  };
  c.submitted = jf.Int("submitted", -1);
  c.no_borrow_until = jf.Int("no_borrow_until", 0);
  c.no_grow_until = jf.Int("no_grow_until", 0);
  nodes(jf, "resume_nodes", c.resume_nodes);
  c.started_s = jf.Int("started_s", -1);
  c.queued_at = jf.Int("queued_at", -1);
  c.position = jf.Int("position", 0);
  c.required_level = jf.I32("required_level", -1);
  c.relax_at = jf.Int("relax_at", -1);
  c.within_claim = jf.I32("within_claim", 0);
  c.within_claim_until = jf.Int("within_claim_until", -1);
  c.trigger_at = jf.Int("trigger_at", -1);
  jf.Each("restores", [&](const Json& r, const std::string& path) {
    const Fields rf(r, path + ".", jf.error());
    CarriedJob::StandbyRestore sr;
    sr.replica = static_cast<uint32_t>(rf.U64("replica", 0));
    sr.at = rf.Int("at", 0);
    pairs(rf, "noticed", sr.noticed);
    c.restores.push_back(std::move(sr));
  });
  if (jf.Has("reclaim")) {
    const Fields rf = jf.At("reclaim");
    c.reclaim_at = rf.Int("at", 0);
    c.reclaim_queue = rf.Bool("queue", false);
    c.claimed = rf.I32("claimed", 0);
    pairs(rf, "tasks", c.reclaim_tasks);
    rf.Each("whole", [&](const Json& w, const std::string& at) {
      if (w.is_number_unsigned()) c.reclaim_whole.push_back(w.get<uint32_t>());
      else FailAt(jf.error(), at, "expected a job id");
    });
    nodes(rf, "hold", c.hold);
  }
  nodes(jf, "held", c.held);
  if (jf.Has("planned")) {
    const Fields pf = jf.At("planned");
    c.planned_start = pf.Int("start", 0);
    c.planned_where = pf.Str("where");
    nodes(pf, "nodes", c.planned_nodes);
    c.planned_holds = pf.Bool("holds", true);
  }
  c.unplanned = jf.Int("unplanned", -1);
  c.assembled = jf.Bool("assembled", false);
  return c;
}

std::variant<SubmitInput, CancelInput, ResizeInput, ProbeInput, AddPlaneInput, AddNodeInput, NodeInput, StandbyInput,
             StandbyWindowsInput, DefragInput, AbortMovesInput, AcknowledgeMoveInput, AcknowledgeStandbyInput, HoldInput,
             AdoptInput, SettingInput, QueuesInput, CycleInput, RestoreInput>
InputFrom(const Fields& f) {
  const std::string kind = f.Str("kind");
  if (kind == "submit") {
    return SubmitInput{JobFrom(f.At("job")), static_cast<SubmitMode>(NameIndex(f, "mode", kModes))};
  }
  if (kind == "cancel") return CancelInput{static_cast<uint32_t>(f.U64("job", 0)), f.Bool("finished", false)};
  if (kind == "resize") {
    return ResizeInput{static_cast<uint32_t>(f.U64("job", 0)), f.I32("min_replicas", 1), f.I32("max_replicas", 1)};
  }
  if (kind == "probe") return ProbeInput{JobFrom(f.At("job")), f.Bool("quote", true), f.Bool("know", false)};
  if (kind == "add-plane") {
    AddPlaneInput x;
    x.name = f.Str("name");
    f.Each("levels", [&](const Json& l, const std::string&) { x.levels.push_back(l.is_string() ? l.get<std::string>() : ""); });
    return x;
  }
  if (kind == "add-node") {
    AddNodeInput x;
    x.spec.name = f.Str("name");
    x.spec.cpu_milli = f.Int("cpu_milli", 0);
    x.spec.mem_mib = f.Int("mem_mib", 0);
    x.spec.gpu_count = f.I32("gpu_count", 0);
    x.spec.model = IdFrom<GpuModelId>(f, "model_id");
    f.Each("labels", [&](const Json& l, const std::string& path) {
      if (l.is_array() && l.size() == 2 && l[0].is_string() && l[1].is_string()) {
        x.spec.labels.emplace_back(l[0].get<std::string>(), l[1].get<std::string>());
      } else {
        FailAt(f.error(), path, "expected [key, value]");
      }
    });
    x.gpu_model = f.Str("gpu_model");
    f.Each("domains", [&](const Json& d, const std::string& path) {
      if (!(d.is_array() && d.size() == 2 && d[0].is_string() && d[1].is_array())) {
        FailAt(f.error(), path, "expected [plane, [domain names]]");
        return;
      }
      std::vector<std::string> names;
      for (const Json& n : d[1]) names.push_back(n.is_string() ? n.get<std::string>() : "");
      x.domains.emplace_back(d[0].get<std::string>(), std::move(names));
    });
    return x;
  }
  if (kind == "node") return NodeInput{static_cast<NodeInput::Op>(NameIndex(f, "op", kNodeOps)), IdFrom<NodeId>(f, "node")};
  if (kind == "standby") return StandbyInput{static_cast<uint32_t>(f.U64("job", 0)), f.I32("replicas", 0)};
  if (kind == "standby-windows") {
    StandbyWindowsInput x;
    x.job = static_cast<uint32_t>(f.U64("job", 0));
    f.Each("windows", [&](const Json& w, const std::string& path) {
      if (w.is_array() && w.size() == 3 && w[0].is_number_integer() && w[1].is_number_integer() &&
          w[2].is_number_integer()) {
        x.windows.push_back({w[0].get<int64_t>(), w[1].get<int64_t>(), w[2].get<int32_t>()});
      } else {
        FailAt(f.error(), path, "expected [from_s, to_s, replicas]");
      }
    });
    return x;
  }
  if (kind == "defrag") return DefragInput{DefragFrom(f.At("options"))};
  if (kind == "abort-moves") return AbortMovesInput{};
  if (kind == "acknowledge-move") return AcknowledgeMoveInput{IdFrom<TaskId>(f, "task"), f.Bool("ready", false)};
  if (kind == "acknowledge-standby") {
    return AcknowledgeStandbyInput{IdFrom<TaskId>(f, "task"), f.Bool("ok", false), f.Str("why", "")};
  }
  if (kind == "hold") return HoldInput{static_cast<uint32_t>(f.U64("job", 0)), f.Bool("hold", true)};
  if (kind == "adopt") {
    AdoptInput x;
    x.job = JobFrom(f.At("job"));
    x.started_s = f.Int("started_s", 0);
    f.Each("placements", [&](const Json& p, const std::string& path) {
      const Fields pf(p, path + ".", f.error());
      ReplicaPlacement r;
      r.replica = static_cast<size_t>(pf.U64("replica", 0));
      r.node = IdFrom<NodeId>(pf, "node");
      pf.Each("gpus", [&](const Json& g, const std::string&) {
        if (g.is_number_unsigned() && g.get<uint32_t>() < kMaxGpusPerNode && r.gpus.size < kMaxGpusPerNode) {
          r.gpus.Push(g.get<int>());
        } else {
          pf.Fail("gpus", "expected GPU indices below " + std::to_string(kMaxGpusPerNode));
        }
      });
      r.standby = pf.Bool("standby", false);
      r.borrowed = pf.Bool("borrowed", false);
      x.placements.push_back(r);
    });
    return x;
  }
  if (kind == "setting") return SettingInput{static_cast<SettingInput::Key>(NameIndex(f, "key", kSettings)), f.Int("value", 0)};
  if (kind == "queues") {
    QueuesInput x;
    auto q = DecodeQueues(f.Raw("queues"), "queues");
    if (q.ok()) x.queues = std::move(*q);
    else f.Fail("queues", q.status().message());
    auto s = DecodeSharing(f.Raw("sharing"), "sharing");
    if (s.ok()) x.sharing = *s;
    else f.Fail("sharing", s.status().message());
    return x;
  }
  if (kind == "restore") {
    RestoreInput x;
    f.Each("jobs", [&](const Json& j, const std::string& path) {
      const Fields jf(j, path + ".", f.error());
      CarriedJob c = CarriedFrom(jf, [](const Json& n) -> std::optional<NodeId> {
        if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() >= int64_t{UINT32_MAX}) return std::nullopt;
        return NodeId(static_cast<uint32_t>(n.get<int64_t>()));
      });
      c.job = static_cast<uint32_t>(jf.U64("job", 0));
      x.carry.jobs.push_back(std::move(c));
    });
    f.Each("queues", [&](const Json& q, const std::string& path) {
      const Fields qf(q, path + ".", f.error());
      x.carry.queues.push_back({qf.Str("name"), qf.Int("cooldown_until", 0), qf.Num("decayed", 0), qf.Int("usage", -1)});
    });
    x.carry.usage_at = f.Int("usage_at", -1);
    if (f.Has("schedule")) {  // written since 2026-12-06
      const Fields tf = f.At("schedule");
      x.carry.schedule = CarriedSchedule{tf.Int("next_defrag", 0), tf.Int("last_plan", -1), tf.Int("next_replan", 0),
                                         tf.Int("next_backfill", 0), tf.Int("walltime_starts", 0)};
    }
    return x;
  }
  if (kind == "cycle") {
    CycleInput x;
    x.options.part = static_cast<CyclePart>(NameIndex(f, "part", kParts));
    x.options.external_blocking = f.I32("external_blocking", INT32_MIN);
    return x;
  }
  f.Fail("kind", "unknown input kind '" + kind + "'");
  return CycleInput{};
}

constexpr EngineEvent::Kind kEventKinds[] = {
    EngineEvent::Kind::kStarted,     EngineEvent::Kind::kGrown,       EngineEvent::Kind::kShrunk,
    EngineEvent::Kind::kReturned,    EngineEvent::Kind::kReclaim,     EngineEvent::Kind::kStandby,
    EngineEvent::Kind::kRestored,    EngineEvent::Kind::kMoveStarted, EngineEvent::Kind::kMoved,
    EngineEvent::Kind::kMoveAborted, EngineEvent::Kind::kMoveCancelled, EngineEvent::Kind::kStandbyRefused,
    EngineEvent::Kind::kTimedOut};

Json EventJson(const EngineEvent& e) {
  return {{"kind", EngineEventKindName(e.kind)}, {"job", e.job},     {"replicas", e.replicas}, {"for_job", e.for_job},
          {"at", e.at},                          {"detail", e.detail}, {"never", e.never},     {"requeued", e.requeued}};
}
EngineEvent EventFrom(const Fields& f, int64_t t) {
  EngineEvent e;
  const std::string kind = f.Str("kind");
  bool known = false;
  for (EngineEvent::Kind k : kEventKinds) {
    if (kind == EngineEventKindName(k)) {
      e.kind = k;
      known = true;
    }
  }
  if (!known) f.Fail("kind", "unknown event kind '" + kind + "'");
  e.t = t;
  e.job = static_cast<uint32_t>(f.U64("job", 0));
  e.replicas = f.I32("replicas", 0);
  e.for_job = static_cast<uint32_t>(f.U64("for_job", UINT32_MAX));
  e.at = f.Int("at", 0);
  e.detail = f.Str("detail");
  e.never = f.Bool("never", false);
  e.requeued = f.Bool("requeued", false);
  return e;
}

Json ConfigJson(const EngineConfig& c) {
  Json actions = Json::array(), headroom = Json::array();
  for (EngineAction a : c.actions) actions.push_back(EngineActionName(a));
  for (const HeadroomSpec& h : c.headroom) headroom.push_back({{"shape", JobJson(h.shape)}, {"min_job_gpus", h.min_job_gpus}});
  const EngineReserve& r = c.reserve;
  const EngineDefrag& d = c.defrag;
  const MigrationOptions& m = c.migration;
  Json out = {{"name", c.name},
          {"actions", actions},
          {"policy", c.policy},
          {"seed", c.seed},
          {"align", c.allocate.align},
          {"topology", c.allocate.topology},
          {"pack_plane", IdJson(c.allocate.pack_plane)},
          {"pack_level", c.allocate.pack_level},
          {"victims", VictimSelectionName(c.allocate.victims)},
          {"grace_s", c.grace_s},
          {"preemptor_min_priority", c.preemptor_min_priority},
          {"exit_mean_s", c.exit_mean_s},
          {"exit_p95_s", c.exit_p95_s},
          {"absorb", c.absorb},
          {"priority_queue", c.priority_queue},
          {"requeue", c.requeue},
          {"hold_survivors", c.hold_survivors},
          {"standby_grace_s", c.standby_grace_s},
          {"reserve",
           {{"enabled", r.enabled}, {"replan_s", r.replan_s}, {"after_s", r.after_s}, {"min_gpus", r.min_gpus},
            {"max_gpus", r.max_gpus}, {"max_jobs", r.max_jobs}, {"drain_after_s", r.drain_after_s}}},
          {"defrag",
           {{"enabled", d.enabled}, {"interval_s", d.interval_s}, {"trigger_after_s", d.trigger_after_s},
            {"trigger_min_gpus", d.trigger_min_gpus}, {"trigger_cooldown_s", d.trigger_cooldown_s},
            {"plan", DefragJson(d.plan)}, {"assemble", d.assemble}}},
          {"lend_max_priority", c.lend_max_priority},
          {"migration",
           {{"max_concurrent", m.max_concurrent}, {"per_node", m.per_node}, {"per_job", m.per_job},
            {"max_moves", m.max_moves}, {"startup_s", m.startup_s}, {"timeout_s", m.timeout_s},
            {"fail_permille", m.fail_permille}, {"drain", m.drain}, {"seed", m.seed},
            {"acknowledged", m.acknowledged}}},
          {"headroom", headroom},
          {"headroom_retry_s", c.headroom_retry_s},
          {"headroom_max_loss_s", c.headroom_max_loss_s},
          {"queues", EncodeQueues(c.queues)},
          {"sharing", EncodeSharing(c.sharing)},
          {"intern_queue_models", c.intern_queue_models}};
  // Only when on: histories of configurations without backfill read as they did.
  if (c.backfill.easy) out["backfill"] = {{"easy", true}, {"interval_s", c.backfill.interval_s}};
  if (c.backfill.easy && c.backfill.conservative) {
    out["backfill"]["conservative"] = true;
    out["backfill"]["depth"] = c.backfill.depth;
  }
  return out;
}

EngineConfig ConfigFrom(const Fields& f) {
  EngineConfig c;
  c.name = f.Str("name");
  if (f.Has("actions")) c.actions.clear();
  f.Each("actions", [&](const Json& a, const std::string& path) {
    const auto action = a.is_string() ? EngineActionByName(a.get<std::string>()) : std::nullopt;
    if (action) c.actions.push_back(*action);
    else FailAt(f.error(), path, "unknown action");
  });
  c.policy = f.Str("policy", c.policy);
  c.seed = f.U64("seed", c.seed);
  if (f.Has("backfill")) {
    const Fields b = f.At("backfill");
    c.backfill.easy = b.Bool("easy", false);
    c.backfill.interval_s = b.Int("interval_s", c.backfill.interval_s);
    c.backfill.conservative = b.Bool("conservative", false);
    c.backfill.depth = b.I32("depth", c.backfill.depth);
  }
  c.allocate.align = f.Bool("align", c.allocate.align);
  c.allocate.topology = f.Bool("topology", c.allocate.topology);
  c.allocate.pack_plane = IdFrom<PlaneId>(f, "pack_plane");
  c.allocate.pack_level = f.I32("pack_level", c.allocate.pack_level);
  if (f.Has("victims")) {
    const std::string v = f.Str("victims");
    if (const auto named = VictimSelectionNamed(v)) c.allocate.victims = *named;
    else f.Fail("victims", "unknown victim selection '" + v + "'");
  }
  c.grace_s = f.Int("grace_s", c.grace_s);
  c.preemptor_min_priority = f.I32("preemptor_min_priority", c.preemptor_min_priority);
  c.exit_mean_s = f.Int("exit_mean_s", c.exit_mean_s);
  c.exit_p95_s = f.Int("exit_p95_s", c.exit_p95_s);
  c.absorb = f.Bool("absorb", c.absorb);
  c.priority_queue = f.Bool("priority_queue", c.priority_queue);
  c.requeue = f.Bool("requeue", c.requeue);
  c.hold_survivors = f.Bool("hold_survivors", c.hold_survivors);
  c.standby_grace_s = f.Int("standby_grace_s", c.standby_grace_s);
  if (f.Has("reserve")) {
    const Fields r = f.At("reserve");
    EngineReserve& o = c.reserve;
    o.enabled = r.Bool("enabled", o.enabled);
    o.replan_s = r.Int("replan_s", o.replan_s);
    o.after_s = r.Int("after_s", o.after_s);
    o.min_gpus = r.Int("min_gpus", o.min_gpus);
    o.max_gpus = r.Int("max_gpus", o.max_gpus);
    o.max_jobs = r.Int("max_jobs", o.max_jobs);
    o.drain_after_s = r.Int("drain_after_s", o.drain_after_s);
  }
  if (f.Has("defrag")) {
    const Fields d = f.At("defrag");
    EngineDefrag& o = c.defrag;
    o.enabled = d.Bool("enabled", o.enabled);
    o.interval_s = d.Int("interval_s", o.interval_s);
    o.trigger_after_s = d.Int("trigger_after_s", o.trigger_after_s);
    o.trigger_min_gpus = d.Int("trigger_min_gpus", o.trigger_min_gpus);
    o.trigger_cooldown_s = d.Int("trigger_cooldown_s", o.trigger_cooldown_s);
    if (d.Has("plan")) o.plan = DefragFrom(d.At("plan"));
    o.assemble = d.Bool("assemble", o.assemble);
  }
  c.lend_max_priority = f.I32("lend_max_priority", c.lend_max_priority);
  if (f.Has("migration")) {
    const Fields m = f.At("migration");
    MigrationOptions& o = c.migration;
    o.max_concurrent = m.I32("max_concurrent", o.max_concurrent);
    o.per_node = m.I32("per_node", o.per_node);
    o.per_job = m.I32("per_job", o.per_job);
    o.max_moves = m.Int("max_moves", o.max_moves);
    o.startup_s = m.Int("startup_s", o.startup_s);
    o.timeout_s = m.Int("timeout_s", o.timeout_s);
    o.fail_permille = m.I32("fail_permille", o.fail_permille);
    o.drain = m.Bool("drain", o.drain);
    o.seed = m.U64("seed", o.seed);
    o.acknowledged = m.Bool("acknowledged", o.acknowledged);
  }
  f.Each("headroom", [&](const Json& h, const std::string& path) {
    const Fields hf(h, path + ".", f.error());
    c.headroom.push_back({JobFrom(hf.At("shape")), hf.Int("min_job_gpus", 0)});
  });
  c.headroom_retry_s = f.Int("headroom_retry_s", c.headroom_retry_s);
  c.headroom_max_loss_s = f.Int("headroom_max_loss_s", c.headroom_max_loss_s);
  if (f.Has("queues")) {
    auto q = DecodeQueues(f.Raw("queues"), "queues");
    if (q.ok()) c.queues = std::move(*q);
    else f.Fail("queues", q.status().message());
  }
  if (f.Has("sharing")) {
    auto s = DecodeSharing(f.Raw("sharing"), "sharing");
    if (s.ok()) c.sharing = *s;
    else f.Fail("sharing", s.status().message());
  }
  c.intern_queue_models = f.Bool("intern_queue_models", false);
  return c;
}

bool SameCycle(const EngineInput& a, const EngineInput& b) {
  const auto* x = std::get_if<CycleInput>(&a.what);
  const auto* y = std::get_if<CycleInput>(&b.what);
  return x && y && a.t == b.t && x->options.part == y->options.part &&
         x->options.external_blocking == y->options.external_blocking;
}

}  // namespace

Json HistoryRecordJson(const HistoryRecord& r) {
  if (const auto* s = std::get_if<HistorySegment>(&r.what)) return {{"config", ConfigJson(s->config)}};
  if (const auto* h = std::get_if<HistoryInherit>(&r.what)) {
    Json j = {{"inherit", true}};
    if (h->jobs) j["jobs"] = true;
    return j;
  }
  if (const auto* in = std::get_if<EngineInput>(&r.what)) {
    Json j = {{"t", in->t}, {"input", std::visit(InputJson{}, in->what)}};
    if (r.repeat > 1) j["n"] = r.repeat;
    return j;
  }
  const EngineEvent& e = std::get<EngineEvent>(r.what);
  return {{"t", e.t}, {"event", EventJson(e)}};
}

StatusOr<HistoryRecord> HistoryRecordFromJson(const Json& j) {
  std::string error;
  const Fields f(j, "", &error);
  HistoryRecord r;
  if (f.Has("config")) {
    r.what = HistorySegment{ConfigFrom(f.At("config"))};
  } else if (f.Has("inherit")) {
    if (!f.Bool("inherit", false)) f.Fail("inherit", "expected true");
    r.what = HistoryInherit{f.Bool("jobs", false)};
  } else if (f.Has("input")) {
    EngineInput in;
    in.t = f.Int("t", 0);
    in.what = InputFrom(f.At("input"));
    r.what = std::move(in);
    r.repeat = f.Int("n", 1);
    if (r.repeat < 1 || (r.repeat > 1 && !std::holds_alternative<CycleInput>(std::get<EngineInput>(r.what).what))) {
      f.Fail("n", "only a cycle repeats, at least once");
    }
  } else if (f.Has("event")) {
    r.what = EventFrom(f.At("event"), f.Int("t", 0));
  } else {
    f.Fail("", "expected a \"config\", an \"input\", an \"event\" or \"inherit\"");
  }
  if (!error.empty()) return InvalidArgument(error);
  return r;
}

void AppendInput(std::vector<HistoryRecord>& out, EngineInput in) {
  if (!out.empty()) {
    HistoryRecord& last = out.back();
    if (const auto* prev = std::get_if<EngineInput>(&last.what); prev && SameCycle(*prev, in)) {
      ++last.repeat;
      return;
    }
  }
  out.push_back({std::move(in), 1});
}

std::string HistoryHeaderLine() { return R"({"estuary_history":1})"; }

StatusOr<std::vector<HistoryRecord>> ReadHistoryFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument(path + ": cannot open the history file");
  std::vector<HistoryRecord> out;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    const Json j = Json::parse(line, nullptr, false);
    const std::string where = path + ":" + std::to_string(n) + ": ";
    if (j.is_discarded()) return InvalidArgument(where + "not a JSON object");
    if (n == 1) {
      if (!j.is_object() || !j.contains("estuary_history")) {
        return InvalidArgument(where + "estuary_history: missing (not a history file)");
      }
      if (j["estuary_history"] != 1) return InvalidArgument(where + "estuary_history: version 1 expected");
      continue;
    }
    StatusOr<HistoryRecord> r = HistoryRecordFromJson(j);
    if (!r.ok()) return InvalidArgument(where + std::string(r.status().message()));
    if (out.empty() && !std::holds_alternative<HistorySegment>(r->what)) {
      return InvalidArgument(where + "config: the first record must start a segment");
    }
    out.push_back(*std::move(r));
  }
  if (n == 0) return InvalidArgument(path + ":1: estuary_history: missing (an empty file)");
  return out;
}

std::string EventLine(const EngineEvent& e) {
  return std::to_string(e.t) + " " + EngineEventKindName(e.kind) + " " + std::to_string(e.job) + " " +
         std::to_string(e.replicas) + " " + std::to_string(e.for_job) + " " + std::to_string(e.at) + " " +
         (e.never ? "never" : "-") + " " + (e.requeued ? "requeued" : "-") + " " + e.detail;
}

StatusOr<ReplayResult> ReplayHistory(const std::vector<HistoryRecord>& records,
                                     const std::function<void(int64_t, const EngineEvent&)>& on_event) {
  ReplayResult res;
  std::unique_ptr<Engine> engine, previous;
  int64_t first_submit = -1, last_t = -1;
  double ratio = 0, alloc_sum = 0;
  std::vector<const EngineEvent*> recorded;
  for (const HistoryRecord& r : records) {
    if (const auto* s = std::get_if<HistorySegment>(&r.what)) {
      StatusOr<std::unique_ptr<Engine>> made = Engine::Create(ClusterState(), s->config);
      if (!made.ok()) return InvalidArgument("segment " + std::to_string(res.segments) + ": " + made.status().message());
      std::unique_ptr<Engine> fresh = std::move(*made);
      const int64_t segment = res.segments++;
      fresh->SetEventObserver([&res, &on_event, segment](const EngineEvent& e) {
        res.events.push_back(e);
        if (on_event) on_event(segment, e);
      });
      previous = std::move(engine);
      engine = std::move(fresh);
    } else if (const auto* h = std::get_if<HistoryInherit>(&r.what)) {
      if (!previous) return InvalidArgument("an inherit record in the first segment: nothing to inherit from");
      engine->Inherit(*previous, h->jobs);
    } else if (const auto* e = std::get_if<EngineEvent>(&r.what)) {
      recorded.push_back(e);
    } else {
      const EngineInput& in = std::get<EngineInput>(r.what);
      if (const auto* sub = std::get_if<SubmitInput>(&in.what); sub && first_submit < 0) first_submit = in.t;
      if (const auto* c = std::get_if<CancelInput>(&in.what); c && c->finished) ++res.jobs_finished;
      if (first_submit >= 0 && in.t > last_t) {
        if (last_t >= first_submit) alloc_sum += ratio * static_cast<double>(in.t - last_t);
        last_t = in.t;
      }
      for (int64_t k = 0; k < r.repeat; ++k) {
        engine->Apply(in);
        (void)engine->TakeEvents();  // the observer has them
        ++res.inputs;
      }
      const ClusterState& st = engine->state();
      ratio = st.total_gpu_milli() > 0 ? static_cast<double>(st.allocated_gpu_milli()) / static_cast<double>(st.total_gpu_milli()) : 0;
      if (first_submit >= 0 && last_t < first_submit) last_t = first_submit;
    }
  }
  if (first_submit >= 0 && last_t > first_submit) res.gpu_alloc_pct_mean = 100.0 * alloc_sum / static_cast<double>(last_t - first_submit);
  res.recorded_events = static_cast<int64_t>(recorded.size());
  const size_t n = std::min(recorded.size(), res.events.size());
  for (size_t i = 0; i < n && res.first_difference < 0; ++i) {
    const std::string a = EventLine(res.events[i]), b = EventLine(*recorded[i]);
    if (a != b) {
      res.first_difference = static_cast<int64_t>(i);
      res.difference = "replayed '" + a + "', recorded '" + b + "'";
    }
  }
  if (res.first_difference < 0 && recorded.size() != res.events.size()) {
    res.first_difference = static_cast<int64_t>(n);
    res.difference = std::to_string(res.events.size()) + " events replayed, " + std::to_string(recorded.size()) +
                     " recorded";
  }
  return res;
}

Json CarriedJobJson(const CarriedJob& c, const std::function<Json(NodeId)>& node) {
  Json resume = Json::array();
  for (NodeId n : c.resume_nodes) resume.push_back(node(n));
  Json o{{"submitted", c.submitted},
         {"no_borrow_until", c.no_borrow_until},
         {"no_grow_until", c.no_grow_until},
         {"resume_nodes", resume},
         {"started_s", c.started_s},
         {"queued_at", c.queued_at},
         {"position", c.position},
         {"required_level", c.required_level},
         {"relax_at", c.relax_at},
         {"trigger_at", c.trigger_at}};
  if (!c.restores.empty()) {
    Json restores = Json::array();
    for (const CarriedJob::StandbyRestore& r : c.restores) {
      Json noticed = Json::array();
      for (const auto& [job, replica] : r.noticed) noticed.push_back({job, replica});
      restores.push_back({{"replica", r.replica}, {"at", r.at}, {"noticed", noticed}});
    }
    o["restores"] = restores;
  }
  if (c.reclaim_at >= 0) {
    Json tasks = Json::array(), whole = Json::array(), hold = Json::array();
    for (const auto& [job, replica] : c.reclaim_tasks) tasks.push_back({job, replica});
    for (uint32_t w : c.reclaim_whole) whole.push_back(w);
    for (NodeId n : c.hold) hold.push_back(node(n));
    o["reclaim"] = {{"at", c.reclaim_at}, {"queue", c.reclaim_queue}, {"claimed", c.claimed},
                    {"tasks", tasks}, {"whole", whole}, {"hold", hold}};
  }
  if (c.within_claim > 0) o["within_claim"] = c.within_claim;
  if (c.within_claim > 0 && c.within_claim_until >= 0) o["within_claim_until"] = c.within_claim_until;
  if (!c.held.empty()) {
    Json held = Json::array();
    for (NodeId n : c.held) held.push_back(node(n));
    o["held"] = held;
  }
  if (c.planned_start >= 0) {
    Json nodes = Json::array();
    for (NodeId n : c.planned_nodes) nodes.push_back(node(n));
    o["planned"] = {{"start", c.planned_start}, {"where", c.planned_where}, {"nodes", nodes}, {"holds", c.planned_holds}};
  }
  if (c.unplanned >= 0) o["unplanned"] = c.unplanned;
  if (c.assembled) o["assembled"] = true;
  return o;
}

StatusOr<CarriedJob> CarriedJobFromJson(const Json& j, const std::function<std::optional<NodeId>(const Json&)>& node) {
  std::string error;
  const Fields f(j, "", &error);
  CarriedJob c = CarriedFrom(f, node);
  if (!error.empty()) return InvalidArgument(error);
  return c;
}

}  // namespace estuary
