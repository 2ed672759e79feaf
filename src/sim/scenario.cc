#include "sim/scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "sched/actions/graceful_exit.h"
#include "sched/plugins/register.h"

#include "api/job_json.h"
#include "api/queue_json.h"
#include "sim/cluster/yaml_context.h"
#include "sim/cluster/yaml_json.h"

namespace estuary {
namespace {

using Ctx = YamlContext;

Status Known(const Ctx& c, const YAML::Node& m, const std::set<std::string>& keys) {
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (!keys.count(it->first.Scalar())) return c.Err(it->first, it->first.Scalar(), "unknown field");
  }
  return Status::Ok();
}

// The key node of `key` in mapping `m`, for messages about its whole value (they name the key's
// line; a block value starts on the next one). REQUIRES: m has the key.
YAML::Node KeyNode(const YAML::Node& m, const std::string& key) {
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (it->first.Scalar() == key) return it->first;
  }
  return m;
}

// The scalar `n` (field `key`) as a T, or "expected <what>".
template <typename T>
StatusOr<T> As(const Ctx& c, const YAML::Node& n, const char* key, const char* what) {
  try {
    if (!n.IsScalar()) throw YAML::Exception(n.Mark(), "not a scalar");
    return n.as<T>();
  } catch (const YAML::Exception&) {
    return c.Err(n, key, std::string("expected ") + what);
  }
}

StatusOr<int64_t> Int(const Ctx& c, const YAML::Node& m, const char* key, int64_t def, int64_t min, int64_t max) {
  const YAML::Node n = m[key];
  if (!n) return def;
  int64_t v = 0;
  ESTUARY_ASSIGN_OR_RETURN(v, As<int64_t>(c, n, key, "an integer"));
  if (v < min || v > max) {
    return c.Err(n, key, std::to_string(v) + " is outside [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return v;
}

StatusOr<double> Real(const Ctx& c, const YAML::Node& m, const char* key, double def, double min, double max) {
  const YAML::Node n = m[key];
  if (!n) return def;
  double v = 0;
  ESTUARY_ASSIGN_OR_RETURN(v, As<double>(c, n, key, "a number"));
  if (!(v >= min && v <= max)) return c.Err(n, key, "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  return v;
}

// A required, finite number > 0 (of `unit`).
StatusOr<double> PositiveReal(const Ctx& c, const YAML::Node& m, const char* key, const std::string& unit) {
  const YAML::Node n = m[key];
  if (!n) return c.Err(m, key, "missing");
  double v = 0;
  ESTUARY_ASSIGN_OR_RETURN(v, As<double>(c, n, key, "a number"));
  if (!(v > 0) || !std::isfinite(v)) return c.Err(n, key, "must be a positive number of " + unit);
  return v;
}

StatusOr<std::string> Str(const Ctx& c, const YAML::Node& m, const char* key, bool required) {
  const YAML::Node n = m[key];
  if (!n) {
    if (required) return c.Err(m, key, "missing");
    return std::string();
  }
  if (!n.IsScalar() || n.Scalar().empty()) return c.Err(n, key, "expected a non-empty string");
  return n.Scalar();
}

StatusOr<bool> Bool(const Ctx& c, const YAML::Node& m, const char* key, bool def) {
  const YAML::Node n = m[key];
  if (!n) return def;
  try {
    return n.as<bool>();
  } catch (const YAML::Exception&) {
    return c.Err(n, key, "expected true or false");
  }
}

constexpr int64_t kMaxTime = 1'000'000'000'000;
// A run's samples and its generated jobs are kept in memory: a scenario asking for more than these
// (a year sampled every 4 s; a year at ~1.6 arrivals a second) is refused rather than left to
// run out of memory or time.
constexpr int64_t kMaxSamples = 10'000'000;
constexpr double kMaxArrivals = 50'000'000;

// "a, b, c": the members' names, for messages.
std::string MemberNames(const FederationSpec& f) {
  std::string out;
  for (const FederationMember& m : f.members) out += (out.empty() ? "" : ", ") + m.name;
  return out;
}

// `models`: one GPU model name or a non-empty list of distinct ones.
StatusOr<std::vector<std::string>> Models(const Ctx& c, const YAML::Node& m) {
  const YAML::Node n = m["models"];
  std::vector<std::string> out;
  if (!n) return out;
  const char* expected = "expected a GPU model name or a non-empty list of them";
  if (n.IsScalar()) {
    if (n.Scalar().empty()) return c.Err(n, "models", expected);
    out.push_back(n.Scalar());
    return out;
  }
  if (!n.IsSequence() || n.size() == 0) return c.Err(n, "models", expected);
  for (const YAML::Node& e : n) {
    if (!e.IsScalar() || e.Scalar().empty()) return c.Err(e, "models", expected);
    if (std::find(out.begin(), out.end(), e.Scalar()) != out.end()) {
      return c.Err(e, "models", "duplicate model '" + e.Scalar() + "'");
    }
    out.push_back(e.Scalar());
  }
  return out;
}

// The JSON of a job entry and where its fields are written: the entry itself, or, with
// `file: PATH`, the job in that file (JSON or YAML, relative to the scenario; the very file a
// user submits to the service) plus the entry's other keys (scenario-only ones such as
// submit_s; a key in both is an error).
class JobSource {
 public:
  // REQUIRES: m is a mapping.
  static StatusOr<JobSource> Read(const Ctx& c, const YAML::Node& m, bool generated) {
    JobSource src;
    src.scenario_ = c.file;
    ESTUARY_ASSIGN_OR_RETURN(src.entry_, src.Convert(m, c.file, m.Mark().line + 1));
    if (!src.entry_.value.contains("file")) return src;
    if (generated) return src.Error(InvalidArgument("field 'file': not in a generator class"));
    const nlohmann::json& f = src.entry_.value["file"];
    if (!f.is_string() || f.get<std::string>().empty()) return src.Error(InvalidArgument("field 'file': expected a path"));
    std::filesystem::path p = f.get<std::string>();
    if (p.is_relative()) p = std::filesystem::path(c.file).parent_path() / p;
    src.file_path_ = p.string();
    std::ifstream in(p);
    if (!in) return src.Error(InvalidArgument("field 'file': cannot open '" + src.file_path_ + "'"));
    std::stringstream text;
    text << in.rdbuf();
    YAML::Node loaded;
    try {
      loaded = YAML::Load(text.str());
    } catch (const YAML::ParserException& e) {
      return InvalidArgument(src.file_path_ + ":" + std::to_string(e.mark.line + 1) + ": malformed JSON or YAML (" + e.msg + ")");
    }
    if (!loaded.IsMap()) return InvalidArgument(src.file_path_ + ":1: expected a JSON object (one job)");
    YamlJson job;
    ESTUARY_ASSIGN_OR_RETURN(job, src.Convert(loaded, src.file_path_, 1));
    src.entry_.value.erase("file");
    for (const auto& [key, value] : src.entry_.value.items()) {
      if (job.value.contains(key)) {
        return src.Error(InvalidArgument("field '" + key + "': also in " + src.file_path_ + " (give it in one place)"));
      }
      job.value[key] = value;
    }
    src.file_ = std::move(job);
    return src;
  }

  const nlohmann::json& value() const { return file_ ? file_->value : entry_.value; }

  // `st` (a message of the job schema) prefixed with the file and line of the field it names.
  Status Error(const Status& st) const {
    const std::string path = JobErrorPath(st.message());
    const std::string top = path.substr(0, path.find_first_of(".["));
    const bool in_file = file_ && !entry_.value.contains(top);
    return InvalidArgument((in_file ? file_path_ : scenario_) + ":" +
                           std::to_string(in_file ? file_->LineOf(path) : entry_.LineOf(path)) + ": " + st.message());
  }

 private:
  // `n` as JSON; a conversion error is placed at the line of `n` (`line`) in `file`.
  StatusOr<YamlJson> Convert(const YAML::Node& n, const std::string& file, int line) const {
    StatusOr<YamlJson> out = YamlToJson(n);
    if (!out.ok()) return InvalidArgument(file + ":" + std::to_string(line) + ": " + out.status().message());
    return out;
  }

  std::string scenario_, file_path_;
  YamlJson entry_;
  std::optional<YamlJson> file_;
};

}  // namespace

StatusOr<nlohmann::json> ParseJobFileText(const std::string& text, const std::string& path) {
  YAML::Node loaded;
  try {
    loaded = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return InvalidArgument(path + ":" + std::to_string(e.mark.line + 1) + ": malformed JSON or YAML (" + e.msg + ")");
  }
  if (!loaded.IsMap()) return InvalidArgument(path + ":1: expected a JSON object (one job)");
  StatusOr<YamlJson> job = YamlToJson(loaded);
  if (!job.ok()) return InvalidArgument(path + ":1: " + job.status().message());
  const StatusOr<DecodedJob> decoded = DecodeJob(job->value, JobUse::kService);
  if (!decoded.ok()) {
    return InvalidArgument(path + ":" + std::to_string(job->LineOf(JobErrorPath(decoded.status().message()))) + ": " +
                           decoded.status().message());
  }
  return job->value;
}

StatusOr<nlohmann::json> ParseQueuesFileText(const std::string& text, const std::string& path) {
  YAML::Node loaded;
  try {
    loaded = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return InvalidArgument(path + ":" + std::to_string(e.mark.line + 1) + ": malformed JSON or YAML (" + e.msg + ")");
  }
  if (!loaded.IsMap()) return InvalidArgument(path + ":1: expected a mapping {queues, sharing}");
  StatusOr<YamlJson> v = YamlToJson(loaded);
  if (!v.ok()) return InvalidArgument(path + ":1: " + v.status().message());
  for (auto it = v->value.begin(); it != v->value.end(); ++it) {
    if (it.key() != "queues" && it.key() != "sharing") {
      return InvalidArgument(path + ":" + std::to_string(v->LineOf(it.key())) + ": field '" + it.key() + "': unknown field");
    }
  }
  if (!v->value.contains("queues")) return InvalidArgument(path + ":1: field 'queues': missing (an empty list removes every queue)");
  const auto line_of = [&](const std::string& p) { return v->LineOf(p); };
  const auto fail = [&](const Status& st) {
    return InvalidArgument(path + ":" + std::to_string(v->LineOf(JobErrorPath(st.message()))) + ": " + st.message());
  };
  auto queues = DecodeQueues(v->value["queues"], "queues", line_of);
  if (!queues.ok()) return fail(queues.status());
  nlohmann::json out = {{"queues", EncodeQueues(*queues)}};
  if (v->value.contains("sharing")) {
    auto sharing = DecodeSharing(v->value["sharing"], "sharing");
    if (!sharing.ok()) return fail(sharing.status());
    out["sharing"] = EncodeSharing(*sharing);
  }
  return out;
}

namespace {

// A job (`generated`: a generator class, whose `share` and `diurnal` the caller reads), decoded
// by the one job schema (api/job_json.h) from its YAML converted to JSON; messages are the
// schema's, prefixed with the file and the field's line. `fed` decides whether `home` and
// `home_only` are allowed and resolves `home`; it is parsed before the jobs.
StatusOr<JobTemplate> ParseJob(const Ctx& c, const YAML::Node& m, bool generated, const FederationSpec& fed) {
  if (!m.IsMap()) return c.Err(m, generated ? "classes" : "jobs", "expected a mapping per job");
  JobSource src;
  ESTUARY_ASSIGN_OR_RETURN(src, JobSource::Read(c, m, generated));
  StatusOr<DecodedJob> decoded = DecodeJob(src.value(), generated ? JobUse::kGeneratedClass : JobUse::kScenarioJob,
                                           generated ? std::vector<std::string>{"share", "diurnal", "bursts"}
                                                     : std::vector<std::string>{});
  if (!decoded.ok()) return src.Error(decoded.status());
  auto where = [&](const Status& st) { return src.Error(st); };
  const JobRequest& r = decoded->request;
  const ScenarioJobFields& f = decoded->scenario;
  for (const char* key : {"home", "home_only"}) {
    if (src.value().contains(key) && !fed.enabled) {
      return where(InvalidArgument(std::string("field '") + key + "': only in a federation scenario (root key federation:)"));
    }
  }
  if (src.value().contains("queue") && fed.enabled) {
    return where(InvalidArgument("field 'queue': not supported in a federation scenario (it has no queues)"));
  }
  JobTemplate j;
  j.line = m.Mark().line + 1;
  j.name = r.name;
  j.queue = r.queue;
  j.job_class = r.job_class;
  j.submit_s = f.submit_s;
  j.duration_s = generated ? f.duration_mean_s : r.duration_s;
  j.replicas = r.max_replicas;
  j.min_replicas = r.min_replicas;
  j.step = r.step;
  j.usable_step = r.usable_step;
  j.per_replica.gpu_count = r.gpus;
  j.per_replica.gpu_milli = r.gpus > 0 ? r.gpu_milli : 0;
  j.per_replica.cpu_milli = r.cpu_milli;
  j.per_replica.mem_mib = r.memory_mib;
  j.plane = r.plane;
  j.required_level = r.required_level;
  j.preferred_level = r.preferred_level;
  j.required_max_wait_s = r.required_max_wait_s;
  j.priority = r.priority;
  j.preemptible = r.preemptible;
  j.checkpoint_interval_s = r.checkpoint_interval_s;
  j.checkpoint_on_notice_s = r.checkpoint_on_notice_s;
  j.restart_cost_s = r.restart_cost_s;
  j.walltime_s = r.walltime_s;
  j.linear_scaling = f.linear_scaling;
  j.locked_permille = f.locked_pct * 10;
  for (const JobStandbyWindow& w : f.standby) j.standby.push_back({w.from_s, w.to_s, w.replicas});
  j.models = r.models;
  j.home_only = f.home_only;
  if (!generated && fed.enabled) {
    j.home = f.home;
    if (j.home.empty()) {
      j.home = fed.members.front().name;
    } else if (std::none_of(fed.members.begin(), fed.members.end(),
                            [&](const FederationMember& x) { return x.name == j.home; })) {
      return where(InvalidArgument("field 'home': unknown member '" + j.home + "' (members: " + MemberNames(fed) + ")"));
    }
  }
  return j;
}

// The cluster of a `cluster:` mapping (the root's or a federation member's): a spec file
// (`spec`, relative to the scenario at `path`) into *spec, or generator options into *generate.
Status ParseClusterSource(const Ctx& c, const YAML::Node& cluster, const std::string& path, std::string* spec,
                          std::optional<GeneratorOptions>* generate) {
  if (!cluster.IsMap()) return c.Err(cluster, "cluster", "expected spec: FILE or generate: {...}");
  ESTUARY_RETURN_IF_ERROR(Known(c, cluster, {"spec", "generate"}));
  if (cluster["spec"] && cluster["generate"]) return c.Err(cluster, "cluster", "give spec or generate, not both");
  if (cluster["spec"]) {
    ESTUARY_ASSIGN_OR_RETURN(*spec, Str(c, cluster, "spec", true));
    std::filesystem::path p(*spec);
    if (p.is_relative()) *spec = (std::filesystem::path(path).parent_path() / p).string();
    return Status::Ok();
  }
  const YAML::Node g = cluster["generate"];
  if (!g) return c.Err(cluster, "cluster", "give spec: FILE or generate: {...}");
  if (!g.IsMap()) return c.Err(g, "generate", "expected a mapping {total_gpus, gpus_per_node, ...}");
  ESTUARY_RETURN_IF_ERROR(Known(c, g, {"total_gpus", "gpus_per_node", "nodes_per_asw_min", "nodes_per_asw_max",
                                       "asws_per_spine", "spines_per_az", "rdma_pod_nodes", "seed", "models"}));
  GeneratorOptions o;
  // `models: "MODEL:SHARE:CPU_CORES:MEMORY_GIB,..."` (ParseModelMix); default the generator's mix.
  if (g["models"]) {
    std::string mix;
    ESTUARY_ASSIGN_OR_RETURN(mix, Str(c, g, "models", true));
    auto models = ParseModelMix(mix);
    if (!models.ok()) return c.Err(g["models"], "models", models.status().message());
    o.models = *models;
  }
  ESTUARY_ASSIGN_OR_RETURN(o.total_gpus, Int(c, g, "total_gpus", o.total_gpus, 1, 100'000'000));
  int64_t v = 0;
  ESTUARY_ASSIGN_OR_RETURN(v, Int(c, g, "gpus_per_node", o.gpus_per_node, 1, kMaxGpusPerNode));
  o.gpus_per_node = static_cast<int32_t>(v);
  ESTUARY_ASSIGN_OR_RETURN(v, Int(c, g, "nodes_per_asw_min", o.nodes_per_asw_min, 1, 100000));
  o.nodes_per_asw_min = static_cast<int32_t>(v);
  ESTUARY_ASSIGN_OR_RETURN(v, Int(c, g, "nodes_per_asw_max", o.nodes_per_asw_max, 1, 100000));
  o.nodes_per_asw_max = static_cast<int32_t>(v);
  ESTUARY_ASSIGN_OR_RETURN(v, Int(c, g, "asws_per_spine", o.asws_per_spine, 1, 100000));
  o.asws_per_spine = static_cast<int32_t>(v);
  ESTUARY_ASSIGN_OR_RETURN(v, Int(c, g, "spines_per_az", o.spines_per_az, 1, 100000));
  o.spines_per_az = static_cast<int32_t>(v);
  ESTUARY_ASSIGN_OR_RETURN(v, Int(c, g, "rdma_pod_nodes", o.rdma_pod_nodes, 1, 1'000'000));
  o.rdma_pod_nodes = static_cast<int32_t>(v);
  ESTUARY_ASSIGN_OR_RETURN(v, Int(c, g, "seed", 1, 0, kMaxTime));
  o.seed = static_cast<uint64_t>(v);
  if (o.nodes_per_asw_min > o.nodes_per_asw_max) return c.Err(g, "nodes_per_asw_min", "exceeds nodes_per_asw_max");
  *generate = o;
  return Status::Ok();
}

// `queues:` (a configuration's or the scenario's root key) by the queue schema (api/queue_json.h),
// messages prefixed with the file and the field's line.
StatusOr<std::vector<QueueSpec>> ParseQueues(const Ctx& c, const YAML::Node& n) {
  StatusOr<YamlJson> v = YamlToJson(n);
  if (!v.ok()) return InvalidArgument(c.file + ":" + std::to_string(n.Mark().line + 1) + ": " + v.status().message());
  constexpr std::string_view kRoot = "queues";
  auto line_of = [&](const std::string& path) { return v->LineOf(path.substr(std::min(path.size(), kRoot.size()))); };
  StatusOr<std::vector<QueueSpec>> q = DecodeQueues(v->value, std::string(kRoot), line_of);
  if (!q.ok()) {
    return InvalidArgument(c.file + ":" + std::to_string(line_of(JobErrorPath(q.status().message()))) + ": " + q.status().message());
  }
  return q;
}

StatusOr<SharingSpec> ParseSharing(const Ctx& c, const YAML::Node& n) {
  StatusOr<YamlJson> v = YamlToJson(n);
  if (!v.ok()) return InvalidArgument(c.file + ":" + std::to_string(n.Mark().line + 1) + ": " + v.status().message());
  StatusOr<SharingSpec> s = DecodeSharing(v->value, "sharing");
  if (!s.ok()) {
    const std::string path = JobErrorPath(s.status().message());
    return InvalidArgument(c.file + ":" + std::to_string(v->LineOf(path.substr(std::min<size_t>(path.size(), 8)))) + ": " +
                           s.status().message());
  }
  return s;
}

// The root key `federation:` (FederationSpec).
StatusOr<FederationSpec> ParseFederation(const Ctx& c, const YAML::Node& f, const std::string& path) {
  if (!f.IsMap()) return c.Err(f, "federation", "expected a mapping {members, retry_backoff_s, ...}");
  ESTUARY_RETURN_IF_ERROR(Known(c, f, {"members", "retry_backoff_s", "retry_backoff_max_s", "summary_period_s", "tie_break",
                                     "headroom_retry_s", "headroom_max_loss_s"}));
  FederationSpec fed;
  fed.enabled = true;
  fed.line = f.Mark().line + 1;
  const YAML::Node members = f["members"];
  if (!members || !members.IsSequence() || members.size() == 0) {
    return c.Err(members ? members : f, "members", "expected a non-empty list of {name, cluster, start_hour, arrivals_share}");
  }
  for (const YAML::Node& m : members) {
    if (!m.IsMap()) return c.Err(m, "members", "expected a mapping {name, cluster, start_hour, arrivals_share} per member");
    ESTUARY_RETURN_IF_ERROR(Known(c, m, {"name", "cluster", "start_hour", "arrivals_share", "headroom"}));
    FederationMember fm;
    fm.line = m.Mark().line + 1;
    ESTUARY_ASSIGN_OR_RETURN(fm.name, Str(c, m, "name", true));
    for (const FederationMember& other : fed.members) {
      if (other.name == fm.name) return c.Err(m["name"], "name", "duplicate member '" + fm.name + "'");
    }
    if (!m["cluster"]) return c.Err(m, "cluster", "missing");
    ESTUARY_RETURN_IF_ERROR(ParseClusterSource(c, m["cluster"], path, &fm.cluster_spec, &fm.cluster_generate));
    ESTUARY_ASSIGN_OR_RETURN(fm.start_hour, Int(c, m, "start_hour", 0, 0, 23));
    ESTUARY_ASSIGN_OR_RETURN(fm.arrivals_share, Real(c, m, "arrivals_share", 1, 0, 1e12));
    if (!(fm.arrivals_share > 0)) return c.Err(m["arrivals_share"], "arrivals_share", "must be > 0");
    if (const YAML::Node hs = m["headroom"]) {
      const char* expected = "expected a mapping {replicas, gpus, models, plane, level, min_job_gpus} or a list of them";
      if (!hs.IsMap() && !(hs.IsSequence() && hs.size() > 0)) return c.Err(hs, "headroom", expected);
      std::vector<YAML::Node> list;
      if (hs.IsMap()) list.push_back(hs);
      for (const YAML::Node& h : hs) {
        if (hs.IsSequence()) list.push_back(h);
      }
      for (const YAML::Node& h : list) {
        if (!h.IsMap()) return c.Err(h, "headroom", expected);
        ESTUARY_RETURN_IF_ERROR(Known(c, h, {"replicas", "gpus", "models", "plane", "level", "min_job_gpus"}));
        FederationMember::Headroom hr;
        ESTUARY_ASSIGN_OR_RETURN(hr.replicas, Int(c, h, "replicas", 1, 1, 4096));
        ESTUARY_ASSIGN_OR_RETURN(hr.gpus, Int(c, h, "gpus", 8, 1, 64));
        if (h["models"]) ESTUARY_ASSIGN_OR_RETURN(hr.models, Models(c, h));
        ESTUARY_ASSIGN_OR_RETURN(hr.plane, Str(c, h, "plane", false));
        ESTUARY_ASSIGN_OR_RETURN(hr.level, Str(c, h, "level", false));
        ESTUARY_ASSIGN_OR_RETURN(hr.min_job_gpus, Int(c, h, "min_job_gpus", int64_t{hr.replicas} * hr.gpus, 1, 1 << 20));
        if (hr.plane.empty() != hr.level.empty()) {
          return c.Err(h, hr.plane.empty() ? "plane" : "level", "plane and level go together");
        }
        fm.headroom.push_back(hr);
      }
    }
    fed.members.push_back(fm);
  }
  ESTUARY_ASSIGN_OR_RETURN(fed.retry_backoff_s, Int(c, f, "retry_backoff_s", fed.retry_backoff_s, 1, 86400));
  ESTUARY_ASSIGN_OR_RETURN(fed.retry_backoff_max_s, Int(c, f, "retry_backoff_max_s",
                                                        std::max(fed.retry_backoff_max_s, fed.retry_backoff_s), 1, 604800));
  if (fed.retry_backoff_max_s < fed.retry_backoff_s) {
    return c.Err(f["retry_backoff_max_s"], "retry_backoff_max_s",
                 "below retry_backoff_s (" + std::to_string(fed.retry_backoff_s) + ")");
  }
  ESTUARY_ASSIGN_OR_RETURN(fed.summary_period_s, Int(c, f, "summary_period_s", 0, 0, 86400));
  std::string tie_break;
  ESTUARY_ASSIGN_OR_RETURN(tie_break, Str(c, f, "tie_break", false));
  if (!tie_break.empty() && tie_break != "pack" && tie_break != "spread") {
    return c.Err(f["tie_break"], "tie_break", "unknown tie_break '" + tie_break + "' (known: pack, spread)");
  }
  fed.spread = tie_break == "spread";
  ESTUARY_ASSIGN_OR_RETURN(fed.headroom_retry_s, Int(c, f, "headroom_retry_s", fed.headroom_retry_s, 1, 86400));
  ESTUARY_ASSIGN_OR_RETURN(fed.headroom_max_loss_s, Int(c, f, "headroom_max_loss_s", fed.headroom_max_loss_s, 0, 604800));
  return fed;
}

// A configuration's `federation` and `blind_dispatch` into *sc; in a federation scenario, also
// rejects the options the federation does not support.
Status ParseFederationMode(const Ctx& c, const YAML::Node& m, const FederationSpec& fed, SchedulerConfig* sc) {
  std::string known;
  for (const char* mode : kFederationModes) known += (known.empty() ? "" : ", ") + std::string(mode);
  if (!fed.enabled) {
    if (m["federation"]) return c.Err(m["federation"], "federation", "the scenario has no federation: (root key)");
  } else {
    // hold_survivors needs requeue, and members hand every job they stop back to the federation.
    for (const char* key : {"reserve", "standby", "pack", "queues", "sharing", "backfill", "hold_survivors"}) {
      if (m[key]) return c.Err(m[key], key, "not supported in a federation scenario");
    }
    if (!m["federation"]) return c.Err(m, "federation", "missing: a configuration of a federation scenario needs one of " + known);
    ESTUARY_ASSIGN_OR_RETURN(sc->federation, Str(c, m, "federation", true));
    if (std::find_if(std::begin(kFederationModes), std::end(kFederationModes),
                     [&](const char* mode) { return sc->federation == mode; }) == std::end(kFederationModes)) {
      return c.Err(m["federation"], "federation", "unknown mode '" + sc->federation + "' (known: " + known + ")");
    }
  }
  std::string dispatch;
  ESTUARY_ASSIGN_OR_RETURN(dispatch, Str(c, m, "blind_dispatch", false));
  if (dispatch.empty()) return Status::Ok();
  if (sc->federation != "blind") return c.Err(m["blind_dispatch"], "blind_dispatch", "only with federation: blind");
  if (dispatch != "round-robin" && dispatch != "least-loaded") {
    return c.Err(m["blind_dispatch"], "blind_dispatch", "unknown dispatch '" + dispatch + "' (known: round-robin, least-loaded)");
  }
  sc->blind_least_loaded = dispatch == "least-loaded";
  return Status::Ok();
}

// A configuration's `preempt` section (Reclaim on, its grace, exit model, victim selection and
// who reclaims) into *sc; `topology` already read (k8s victims need it off).
Status ParsePreempt(const Ctx& c, const YAML::Node& p, SchedulerConfig* sc) {
  if (!p.IsMap()) {
    return c.Err(p, "preempt", "expected a mapping {grace_s, exit_mean_s, exit_p95_s, victims, preemptor_min_priority}");
  }
  ESTUARY_RETURN_IF_ERROR(Known(c, p, {"grace_s", "exit_mean_s", "exit_p95_s", "victims", "preemptor_min_priority"}));
  int64_t from = kHpPriority;
  ESTUARY_ASSIGN_OR_RETURN(from, Int(c, p, "preemptor_min_priority", kHpPriority, 0, kMaxPriority));
  sc->preemptor_min_priority = static_cast<int32_t>(from);
  sc->preempt = true;
  std::string victims;
  ESTUARY_ASSIGN_OR_RETURN(victims, Str(c, p, "victims", false));
  const std::optional<VictimSelection> named = VictimSelectionNamed(victims.empty() ? "estuary" : victims);
  if (!named) {
    return c.Err(p["victims"], "victims", "unknown victim selection '" + victims + "' (known: estuary, k8s, volcano)");
  }
  sc->victims = *named;
  if (*named == VictimSelection::kKube) {
    // kube's default preemption knows no topology domains (preempt_k8s.h).
    if (sc->topology) {
      return c.Err(p["victims"], "victims",
                   "k8s victim selection needs 'topology: false' (kube's default profile has no topology levels)");
    }
  }
  ESTUARY_ASSIGN_OR_RETURN(sc->grace_s, Int(c, p, "grace_s", sc->grace_s, 0, 86400));
  ESTUARY_ASSIGN_OR_RETURN(sc->exit_mean_s, Int(c, p, "exit_mean_s", 0, 0, 86400));
  ESTUARY_ASSIGN_OR_RETURN(sc->exit_p95_s, Int(c, p, "exit_p95_s", 0, 0, 86400));
  if ((sc->exit_mean_s > 0) != (sc->exit_p95_s > 0)) {
    const char* missing = sc->exit_mean_s > 0 ? "exit_p95_s" : "exit_mean_s";
    return c.Err(p, missing, "exit_mean_s and exit_p95_s go together");
  }
  if (sc->exit_mean_s > 0) {
    if (auto fitted = GracefulExit::Fitted(sc->grace_s, sc->exit_mean_s, sc->exit_p95_s, 0); !fitted.ok()) {
      const std::string& msg = fitted.status().message();
      const std::string field = msg.substr(0, msg.find(':'));
      return c.Err(p[field], field, msg.substr(msg.find(':') + 2));
    }
  }
  return Status::Ok();
}

// One entry of `configurations:` (the scheduler-configuration schema, docs/simulate.md).
StatusOr<SchedulerConfig> ParseSchedulerConfig(const Ctx& c, const YAML::Node& m, const FederationSpec& fed,
                                               const std::vector<QueueSpec>& root_queues) {
  ESTUARY_RETURN_IF_ERROR(Known(c, m, {"name", "policy", "align", "topology", "reserve", "pack", "queue", "preempt", "absorb",
                                       "hold_survivors", "standby", "defrag", "federation", "blind_dispatch", "queues", "sharing", "backfill"}));
  SchedulerConfig sc;
  sc.line = m.Mark().line + 1;
  ESTUARY_ASSIGN_OR_RETURN(sc.name, Str(c, m, "name", true));
  ESTUARY_RETURN_IF_ERROR(ParseFederationMode(c, m, fed, &sc));
  std::string policy;
  ESTUARY_ASSIGN_OR_RETURN(policy, Str(c, m, "policy", false));
  if (!policy.empty()) sc.policy = policy;
  auto p = OpenbPolicy(sc.policy);
  if (!p.ok()) return c.Err(m["policy"], "policy", p.status().message());
  ESTUARY_ASSIGN_OR_RETURN(sc.align, Bool(c, m, "align", true));
  ESTUARY_ASSIGN_OR_RETURN(sc.topology, Bool(c, m, "topology", true));
  sc.queues = root_queues;
  if (const YAML::Node q = m["queues"]) ESTUARY_ASSIGN_OR_RETURN(sc.queues, ParseQueues(c, q));
  if (const YAML::Node sh = m["sharing"]) ESTUARY_ASSIGN_OR_RETURN(sc.sharing, ParseSharing(c, sh));
  std::string queue;
  ESTUARY_ASSIGN_OR_RETURN(queue, Str(c, m, "queue", false));
  if (!queue.empty() && queue != "fifo" && queue != "priority") {
    return c.Err(m["queue"], "queue", "unknown queue order '" + queue + "' (known: fifo, priority)");
  }
  // The federation's queue and its members' are in priority order (FedScheduler, MemberOptions).
  if (fed.enabled && queue == "fifo") {
    return c.Err(m["queue"], "queue", "fifo is not supported in a federation scenario: the federation and its members queue by priority");
  }
  sc.priority_queue = queue == "priority" || fed.enabled;
  if (const YAML::Node p = m["preempt"]) ESTUARY_RETURN_IF_ERROR(ParsePreempt(c, p, &sc));
  ESTUARY_ASSIGN_OR_RETURN(sc.absorb, Bool(c, m, "absorb", false));
  ESTUARY_ASSIGN_OR_RETURN(sc.hold_survivors, Bool(c, m, "hold_survivors", false));
  if (const YAML::Node b = m["backfill"]) {
    // `backfill: easy | conservative | off` or `{mode, interval_s: 30, depth: 100}`.
    // (A depth is asked for before `mode` is rebound: yaml-cpp's assignment writes through.)
    std::optional<YAML::Node> depth_given;
    if (b.IsMap() && b["depth"]) depth_given = b["depth"];
    YAML::Node mode = b;
    if (b.IsMap()) {
      ESTUARY_RETURN_IF_ERROR(Known(c, b, {"mode", "interval_s", "depth"}));
      ESTUARY_ASSIGN_OR_RETURN(sc.backfill.interval_s, Int(c, b, "interval_s", sc.backfill.interval_s, 1, 86400));
      int64_t depth = sc.backfill.depth;
      ESTUARY_ASSIGN_OR_RETURN(depth, Int(c, b, "depth", sc.backfill.depth, 1, 100000));
      sc.backfill.depth = static_cast<int32_t>(depth);
      mode = b["mode"];
      if (!mode) return c.Err(b, "mode", "missing (easy, conservative or off)");
    }
    if (!mode.IsScalar()) {
      return c.Err(mode, "backfill", "expected easy, conservative, off or a mapping {mode, interval_s, depth}");
    }
    const std::string v = mode.Scalar();
    if (v != "easy" && v != "conservative" && v != "off") {
      return c.Err(mode, "backfill", "unknown backfill '" + v + "' (known: easy, conservative, off)");
    }
    if (depth_given && v != "conservative") {
      return c.Err(*depth_given, "depth", "only conservative backfill plans for more than the first job");
    }
    sc.backfill.easy = v != "off";
    sc.backfill.conservative = v == "conservative";
  }
  if (const YAML::Node p = m["standby"]) {
    if (!p.IsMap()) return c.Err(p, "standby", "expected a mapping {grace_s, lend_max_priority}");
    ESTUARY_RETURN_IF_ERROR(Known(c, p, {"grace_s", "lend_max_priority"}));
    sc.standby = true;
    sc.standby_grace_given = static_cast<bool>(p["grace_s"]);
    ESTUARY_ASSIGN_OR_RETURN(sc.standby_grace_s, Int(c, p, "grace_s", sc.grace_s, 0, 86400));
    int64_t v = 0;
    ESTUARY_ASSIGN_OR_RETURN(v, Int(c, p, "lend_max_priority", sc.lend_max_priority, 0, kHpPriority - 1));
    sc.lend_max_priority = static_cast<int32_t>(v);
  }
  if (const YAML::Node r = m["reserve"]) {
    if (!r.IsMap()) {
      return c.Err(r, "reserve", "expected a mapping {after_s, max_jobs, min_gpus, max_gpus, replan_s, drain_after_s}");
    }
    ESTUARY_RETURN_IF_ERROR(Known(c, r, {"after_s", "max_jobs", "min_gpus", "max_gpus", "replan_s", "drain_after_s"}));
    ReserveConfig& rc = sc.reserve;
    rc.enabled = true;
    ESTUARY_ASSIGN_OR_RETURN(rc.after_s, Int(c, r, "after_s", rc.after_s, 0, kMaxTime));
    ESTUARY_ASSIGN_OR_RETURN(rc.max_jobs, Int(c, r, "max_jobs", rc.max_jobs, 1, 1'000'000));
    ESTUARY_ASSIGN_OR_RETURN(rc.min_gpus, Int(c, r, "min_gpus", rc.min_gpus, 0, int64_t{1} << 40));
    ESTUARY_ASSIGN_OR_RETURN(rc.max_gpus, Int(c, r, "max_gpus", rc.max_gpus, rc.min_gpus, int64_t{1} << 40));
    ESTUARY_ASSIGN_OR_RETURN(rc.replan_s, Int(c, r, "replan_s", rc.replan_s, 1, kMaxTime));
    ESTUARY_ASSIGN_OR_RETURN(rc.drain_after_s, Int(c, r, "drain_after_s", rc.drain_after_s, 0, kMaxTime));
  }
  if (const YAML::Node d = m["defrag"]) {
    if (!d.IsMap()) return c.Err(d, "defrag", "expected a mapping {interval_s, max_moves, partition_nodes, ...}");
    ESTUARY_RETURN_IF_ERROR(Known(c, d, {"interval_s", "max_moves", "partition_nodes", "chain_depth", "rounds",
                                         "startup_s", "timeout_s", "fail_pct", "max_concurrent", "per_node",
                                         "per_job", "drain", "trigger_after_s", "trigger_min_gpus",
                                         "trigger_cooldown_s", "objective", "objective_plane",
                                         "objective_level", "variants", "assemble"}));
    DefragConfig& dc = sc.defrag;
    dc.enabled = true;
    int64_t v = 0;
    ESTUARY_ASSIGN_OR_RETURN(dc.interval_s, Int(c, d, "interval_s", dc.interval_s, 0, kMaxTime));
    // The plan budget (moves per plan); absent: no limit.
    ESTUARY_ASSIGN_OR_RETURN(dc.migration.max_moves, Int(c, d, "max_moves", 0, 1, int64_t{1} << 40));
    ESTUARY_ASSIGN_OR_RETURN(v, Int(c, d, "partition_nodes", dc.plan.partition_nodes, 0, 1'000'000));
    if (v == 1) return c.Err(d["partition_nodes"], "partition_nodes", "1 is not 0 (one partition) or >= 2");
    dc.plan.partition_nodes = static_cast<int32_t>(v);
    ESTUARY_ASSIGN_OR_RETURN(v, Int(c, d, "chain_depth", dc.plan.max_chain_depth, 0, 64));
    dc.plan.max_chain_depth = static_cast<int32_t>(v);
    ESTUARY_ASSIGN_OR_RETURN(v, Int(c, d, "rounds", dc.plan.max_rounds, 0, 1000));
    dc.plan.max_rounds = static_cast<int32_t>(v);
    ESTUARY_ASSIGN_OR_RETURN(v, Int(c, d, "variants", dc.plan.variants, 1, 64));
    dc.plan.variants = static_cast<int32_t>(v);
    ESTUARY_ASSIGN_OR_RETURN(dc.migration.startup_s, Int(c, d, "startup_s", dc.migration.startup_s, 0, 86400));
    ESTUARY_ASSIGN_OR_RETURN(dc.migration.timeout_s,
                             Int(c, d, "timeout_s", std::max(dc.migration.timeout_s, dc.migration.startup_s + 1),
                                 dc.migration.startup_s + 1, 86401));
    ESTUARY_ASSIGN_OR_RETURN(v, Int(c, d, "fail_pct", 0, 0, 100));
    dc.migration.fail_permille = static_cast<int32_t>(v * 10);
    ESTUARY_ASSIGN_OR_RETURN(v, Int(c, d, "max_concurrent", dc.migration.max_concurrent, 1, 1'000'000));
    dc.migration.max_concurrent = static_cast<int32_t>(v);
    ESTUARY_ASSIGN_OR_RETURN(v, Int(c, d, "per_node", dc.migration.per_node, 1, 1'000'000));
    dc.migration.per_node = static_cast<int32_t>(v);
    ESTUARY_ASSIGN_OR_RETURN(v, Int(c, d, "per_job", dc.migration.per_job, 1, 1'000'000));
    dc.migration.per_job = static_cast<int32_t>(v);
    ESTUARY_ASSIGN_OR_RETURN(dc.migration.drain, Bool(c, d, "drain", true));
    ESTUARY_ASSIGN_OR_RETURN(dc.trigger_after_s, Int(c, d, "trigger_after_s", 0, 0, kMaxTime));
    ESTUARY_ASSIGN_OR_RETURN(dc.trigger_min_gpus, Int(c, d, "trigger_min_gpus", dc.trigger_min_gpus, 1, int64_t{1} << 40));
    ESTUARY_ASSIGN_OR_RETURN(dc.trigger_cooldown_s, Int(c, d, "trigger_cooldown_s", dc.trigger_cooldown_s, 1, kMaxTime));
    std::string objective;
    ESTUARY_ASSIGN_OR_RETURN(objective, Str(c, d, "objective", false));
    if (!objective.empty()) dc.objective = objective;
    if (dc.objective != "nodes" && dc.objective != "domains") {
      return c.Err(d["objective"], "objective", "unknown objective '" + dc.objective + "' (known: nodes, domains)");
    }
    ESTUARY_ASSIGN_OR_RETURN(dc.objective_plane, Str(c, d, "objective_plane", dc.objective == "domains"));
    ESTUARY_ASSIGN_OR_RETURN(dc.objective_level, Str(c, d, "objective_level", dc.objective == "domains"));
    if (dc.objective == "nodes" && (!dc.objective_plane.empty() || !dc.objective_level.empty())) {
      return c.Err(d, "objective", "objective_plane and objective_level need objective: domains");
    }
    if (dc.interval_s == 0 && dc.trigger_after_s == 0) {
      return c.Err(d, "interval_s", "defrag runs neither periodically (interval_s 0) nor on a trigger (trigger_after_s 0)");
    }
    ESTUARY_ASSIGN_OR_RETURN(dc.assemble, Bool(c, d, "assemble", false));
    if (dc.assemble && dc.trigger_after_s == 0) {
      return c.Err(d["assemble"], "assemble", "assemble acts on a trigger: it needs trigger_after_s > 0");
    }
  }
  if (const YAML::Node p = m["pack"]) {
    if (!p.IsMap()) return c.Err(p, "pack", "expected a mapping {plane, level}");
    ESTUARY_RETURN_IF_ERROR(Known(c, p, {"plane", "level"}));
    ESTUARY_ASSIGN_OR_RETURN(sc.pack_plane, Str(c, p, "plane", true));
    ESTUARY_ASSIGN_OR_RETURN(sc.pack_level, Str(c, p, "level", true));
  }
  return sc;
}

// The `tidal:` mapping `t` of the scenario at `path` into `w` (its curve file read).
Status ParseTidal(const Ctx& c, const YAML::Node& t, const std::string& path, bool federation, TidalWorkload& w) {
  if (!t.IsMap()) return c.Err(t, "tidal", "expected a mapping {curve, start_hour, weekend_pct, services, ...}");
  ESTUARY_RETURN_IF_ERROR(Known(c, t, {"curve", "start_hour", "weekend_pct", "services"}));
  w.enabled = true;
  w.line = t.Mark().line + 1;
  ESTUARY_ASSIGN_OR_RETURN(w.curve_path, Str(c, t, "curve", true));
  if (std::filesystem::path(w.curve_path).is_relative()) {
    w.curve_path = (std::filesystem::path(path).parent_path() / w.curve_path).string();
  }
  ESTUARY_ASSIGN_OR_RETURN(w.curve, ReadDemandCurve(w.curve_path));
  ESTUARY_ASSIGN_OR_RETURN(w.start_hour, Int(c, t, "start_hour", 0, 0, 23));
  ESTUARY_ASSIGN_OR_RETURN(w.weekend_pct, Int(c, t, "weekend_pct", 100, 0, 1000));
  if (const YAML::Node sv = t["services"]) {
    if (federation) return c.Err(KeyNode(t, "services"), "services", "not supported in a federation scenario");
    if (!sv.IsMap()) return c.Err(sv, "services", "expected a mapping {count, replicas_min, replicas_max, gpus, ...}");
    ESTUARY_RETURN_IF_ERROR(Known(c, sv, {"count", "replicas_min", "replicas_max", "gpus", "cpu_cores", "memory_gib",
                                          "phase_jitter_s", "step_s", "queue"}));
    ESTUARY_ASSIGN_OR_RETURN(w.services, Int(c, sv, "count", 0, 0, 100000));
    ESTUARY_ASSIGN_OR_RETURN(w.queue, Str(c, sv, "queue", false));
    int64_t v = 0;
    ESTUARY_ASSIGN_OR_RETURN(v, Int(c, sv, "replicas_min", 1, 1, 100000));
    w.replicas_min = static_cast<int32_t>(v);
    ESTUARY_ASSIGN_OR_RETURN(v, Int(c, sv, "replicas_max", w.replicas_min, 1, 100000));
    if (v < w.replicas_min) return c.Err(sv["replicas_max"], "replicas_max", "below replicas_min");
    w.replicas_max = static_cast<int32_t>(v);
    ESTUARY_ASSIGN_OR_RETURN(v, Int(c, sv, "gpus", 1, 1, kMaxGpusPerNode));
    w.per_replica.gpu_count = static_cast<int32_t>(v);
    w.per_replica.gpu_milli = kMilliPerGpu;
    ESTUARY_ASSIGN_OR_RETURN(v, Int(c, sv, "cpu_cores", 1, 0, 1'000'000));
    w.per_replica.cpu_milli = v * 1000;
    ESTUARY_ASSIGN_OR_RETURN(v, Int(c, sv, "memory_gib", 1, 0, 1'000'000));
    w.per_replica.mem_mib = v * 1024;
    ESTUARY_ASSIGN_OR_RETURN(w.phase_jitter_s, Int(c, sv, "phase_jitter_s", w.phase_jitter_s, 0, 43200));
    ESTUARY_ASSIGN_OR_RETURN(w.step_s, Int(c, sv, "step_s", w.step_s, 1, 86400));
  }
  return Status::Ok();
}

}  // namespace

// A cancel_job or resize_job event at `at` (jobs: the scenario's listed jobs).
StatusOr<JobAction> ParseJobAction(const Ctx& c, const YAML::Node& m, const std::vector<JobTemplate>& jobs, SimTime at) {
  JobAction a;
  a.at_s = at;
  if (m["defrag"]) {
    a.kind = JobAction::Kind::kDefrag;
    bool on = false;
    ESTUARY_ASSIGN_OR_RETURN(on, Bool(c, m, "defrag", false));
    if (!on) return c.Err(m["defrag"], "defrag", "only defrag: true");
    if (m["min"] || m["max"]) return c.Err(m["min"] ? m["min"] : m["max"], m["min"] ? "min" : "max", "only with resize_job");
    return a;
  }
  const bool cancel = static_cast<bool>(m["cancel_job"]);
  a.kind = cancel ? JobAction::Kind::kCancel : JobAction::Kind::kResize;
  const char* key = cancel ? "cancel_job" : "resize_job";
  ESTUARY_ASSIGN_OR_RETURN(a.job, Str(c, m, key, true));
  if (std::none_of(jobs.begin(), jobs.end(), [&](const JobTemplate& j) { return j.name == a.job; })) {
    return c.Err(m[key], key, "no listed job '" + a.job + "'");
  }
  if (cancel) {
    if (m["min"] || m["max"]) return c.Err(m["min"] ? m["min"] : m["max"], m["min"] ? "min" : "max", "only with resize_job");
    return a;
  }
  if (!m["min"]) return c.Err(m, "min", "missing (resize_job needs min and max)");
  if (!m["max"]) return c.Err(m, "max", "missing (resize_job needs min and max)");
  int64_t v = 0;
  ESTUARY_ASSIGN_OR_RETURN(v, Int(c, m, "min", 1, 1, 100000));
  a.min = static_cast<int32_t>(v);
  ESTUARY_ASSIGN_OR_RETURN(v, Int(c, m, "max", 1, 1, 100000));
  a.max = static_cast<int32_t>(v);
  if (a.min > a.max) return c.Err(m["min"], "min", "min exceeds max");
  return a;
}

// The `events:` list: node failures and repairs, and actions on listed jobs (parsed before).
Status ParseEvents(const Ctx& c, const YAML::Node& root, Scenario& s) {
  if (const YAML::Node ev = root["events"]) {
    if (!ev.IsSequence()) return c.Err(ev, "events", "expected a list");
    for (const YAML::Node& m : ev) {
      ESTUARY_RETURN_IF_ERROR(
          Known(c, m, {"at_s", "fail_node", "repair_node", "cancel_job", "resize_job", "min", "max", "defrag"}));
      const int kinds = static_cast<int>(static_cast<bool>(m["fail_node"])) + static_cast<bool>(m["repair_node"]) +
                        static_cast<bool>(m["cancel_job"]) + static_cast<bool>(m["resize_job"]) +
                        static_cast<bool>(m["defrag"]);
      if (kinds != 1) return c.Err(m, "fail_node", "one of fail_node, repair_node, cancel_job, resize_job or defrag");
      SimTime at = 0;
      ESTUARY_ASSIGN_OR_RETURN(at, Int(c, m, "at_s", 0, 0, kMaxTime));
      if (m["cancel_job"] || m["resize_job"] || m["defrag"]) {
        ESTUARY_ASSIGN_OR_RETURN(s.job_actions.emplace_back(), ParseJobAction(c, m, s.jobs, at));
        continue;
      }
      if (m["min"] || m["max"]) return c.Err(m["min"] ? m["min"] : m["max"], m["min"] ? "min" : "max", "only with resize_job");
      NodeEvent e;
      e.at_s = at;
      e.fail = static_cast<bool>(m["fail_node"]);
      ESTUARY_ASSIGN_OR_RETURN(e.node, Str(c, m, e.fail ? "fail_node" : "repair_node", true));
      s.events.push_back(e);
    }
  }
  return Status::Ok();
}

void ApplyPlacementAndReclaim(const SchedulerConfig& c, EngineConfig& e) {
  e.allocate.align = c.align;
  e.allocate.topology = c.topology;
  e.allocate.victims = c.victims;
  e.preemptor_min_priority = c.preemptor_min_priority;
  e.grace_s = c.grace_s;
  e.exit_mean_s = c.exit_mean_s;
  e.exit_p95_s = c.exit_p95_s;
}

namespace {

// `generator:` ({arrivals_per_hour, classes}) into s.stream; the jobs' models and homes are
// checked against s.federation.
Status ParseGenerator(const Ctx& c, const YAML::Node& g, Scenario& s) {
  ESTUARY_RETURN_IF_ERROR(Known(c, g, {"arrivals_per_hour", "classes"}));
  ESTUARY_ASSIGN_OR_RETURN(s.stream.arrivals_per_hour, Real(c, g, "arrivals_per_hour", 0, 0, 1e7));
  const YAML::Node classes = g["classes"];
  if (!classes || !classes.IsSequence() || classes.size() == 0) return c.Err(g, "classes", "expected a non-empty list");
  for (const YAML::Node& m : classes) {
    GeneratedClass gc;
    ESTUARY_ASSIGN_OR_RETURN(gc.share, Real(c, m, "share", 1, 1e-12, 1e12));
    ESTUARY_ASSIGN_OR_RETURN(gc.job, ParseJob(c, m, true, s.federation));
    ESTUARY_ASSIGN_OR_RETURN(gc.diurnal, Bool(c, m, "diurnal", false));
    if (const YAML::Node b = m["bursts"]) {
      if (!b.IsMap()) return c.Err(b, "bursts", "expected a mapping {every_s, for_s, offset_s}");
      ESTUARY_RETURN_IF_ERROR(Known(c, b, {"every_s", "for_s", "offset_s"}));
      ESTUARY_ASSIGN_OR_RETURN(gc.burst_every_s, Int(c, b, "every_s", 0, 1, kMaxTime));
      if (!b["every_s"]) return c.Err(b, "every_s", "missing");
      ESTUARY_ASSIGN_OR_RETURN(gc.burst_for_s, Int(c, b, "for_s", 0, 1, kMaxTime));
      if (!b["for_s"]) return c.Err(b, "for_s", "missing");
      if (gc.burst_for_s > gc.burst_every_s) {
        return c.Err(b["for_s"], "for_s",
                     std::to_string(gc.burst_for_s) + " is above 'every_s' " + std::to_string(gc.burst_every_s) +
                         " (a burst lasts at most its period)");
      }
      ESTUARY_ASSIGN_OR_RETURN(gc.burst_offset_s, Int(c, b, "offset_s", 0, 0, kMaxTime));
    }
    if (gc.job.name.empty()) gc.job.name = "gen" + std::to_string(s.stream.classes.size());
    s.stream.classes.push_back(gc);
  }
  return Status::Ok();
}

// `utilisation:` ({class: percent}) into `p`.
Status ParseUtilisation(const Ctx& c, const YAML::Node& u, UtilisationProfile& p) {
  if (!u.IsMap()) return c.Err(u, "utilisation", "expected a mapping {class: percent}");
  ESTUARY_RETURN_IF_ERROR(Known(c, u, {"hp-inference", "hp-training", "dev", "lp", "spot", "other"}));
  for (auto [key, out] : {std::pair{"hp-inference", &p.hp_inference}, std::pair{"hp-training", &p.hp_training},
                          std::pair{"dev", &p.dev}, std::pair{"lp", &p.lp}, std::pair{"spot", &p.spot},
                          std::pair{"other", &p.other}}) {
    ESTUARY_ASSIGN_OR_RETURN(*out, Int(c, u, key, *out, 0, 100));
  }
  return Status::Ok();
}

// `network:` ({plane, level, cross_domain_slowdown_pct, comm_share_pct}) into `n` (enabled).
Status ParseNetwork(const Ctx& c, const YAML::Node& m, NetworkModel& n) {
  if (!m.IsMap()) return c.Err(m, "network", "expected a mapping {plane, level, cross_domain_slowdown_pct, comm_share_pct}");
  ESTUARY_RETURN_IF_ERROR(Known(c, m, {"plane", "level", "cross_domain_slowdown_pct", "comm_share_pct"}));
  n.enabled = true;
  n.line = m.Mark().line + 1;
  std::string v;
  ESTUARY_ASSIGN_OR_RETURN(v, Str(c, m, "plane", false));
  if (!v.empty()) n.plane = v;
  ESTUARY_ASSIGN_OR_RETURN(v, Str(c, m, "level", false));
  if (!v.empty()) n.level = v;
  ESTUARY_ASSIGN_OR_RETURN(n.cross_domain_slowdown_pct,
                           Int(c, m, "cross_domain_slowdown_pct", n.cross_domain_slowdown_pct, 0, 1000));
  ESTUARY_ASSIGN_OR_RETURN(n.comm_share_pct, Int(c, m, "comm_share_pct", n.comm_share_pct, 0, 100));
  return Status::Ok();
}

// `failures:` ({node_mtbf_h, repair_s, seed}).
StatusOr<FailureModel> ParseFailures(const Ctx& c, const YAML::Node& f) {
  if (!f.IsMap()) return c.Err(f, "failures", "expected {node_mtbf_h: HOURS, repair_s: SECONDS, seed: N}");
  ESTUARY_RETURN_IF_ERROR(Known(c, f, {"node_mtbf_h", "repair_s", "seed"}));
  FailureModel fm;
  ESTUARY_ASSIGN_OR_RETURN(fm.node_mtbf_h, PositiveReal(c, f, "node_mtbf_h", "hours"));
  if (!f["repair_s"]) return c.Err(f, "repair_s", "missing");
  ESTUARY_ASSIGN_OR_RETURN(fm.repair_s, Int(c, f, "repair_s", 0, 1, kMaxTime));
  if (f["seed"]) {
    int64_t seed = 0;
    ESTUARY_ASSIGN_OR_RETURN(seed, Int(c, f, "seed", 0, 0, kMaxTime));
    fm.seed = static_cast<uint64_t>(seed);
  }
  return fm;
}

}  // namespace

StatusOr<Scenario> ParseScenario(const std::string& text, const std::string& path) {
  Ctx c{path};
  YAML::Node loaded;
  try {
    loaded = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return InvalidArgument(path + ":" + std::to_string(e.mark.line + 1) + ": malformed YAML (" + e.msg + ")");
  }
  const YAML::Node root = loaded;
  if (!root.IsMap()) return InvalidArgument(path + ":1: expected a mapping");
  ESTUARY_RETURN_IF_ERROR(Known(c, root, {"name", "duration_s", "warmup_s", "sample_interval_s", "seeds", "cluster", "jobs",
                                          "generator", "events", "network", "failures", "configurations", "tidal",
                                          "utilisation", "federation", "queues"}));
  Scenario s;
  s.path = path;
  ESTUARY_ASSIGN_OR_RETURN(s.name, Str(c, root, "name", true));
  ESTUARY_ASSIGN_OR_RETURN(s.duration_s, Int(c, root, "duration_s", 86400, 1, kMaxTime));
  ESTUARY_ASSIGN_OR_RETURN(s.sample_interval_s, Int(c, root, "sample_interval_s", 3600, 1, kMaxTime));
  if (s.duration_s / s.sample_interval_s > kMaxSamples) {
    return c.Err(root["sample_interval_s"] ? root["sample_interval_s"] : root["duration_s"], "sample_interval_s",
                 std::to_string(s.duration_s / s.sample_interval_s) + " samples over duration_s " +
                     std::to_string(s.duration_s) + "; at most " + std::to_string(kMaxSamples) +
                     " (a longer sample_interval_s)");
  }
  ESTUARY_ASSIGN_OR_RETURN(s.warmup_s, Int(c, root, "warmup_s", 0, 0, kMaxTime));
  if (s.warmup_s >= s.duration_s) {
    return c.Err(root["warmup_s"], "warmup_s", "must be below duration_s (" + std::to_string(s.duration_s) + ")");
  }
  if (const YAML::Node seeds = root["seeds"]) {
    if (!seeds.IsSequence() || seeds.size() == 0) return c.Err(seeds, "seeds", "expected a non-empty list");
    s.seeds.clear();
    for (const YAML::Node& n : seeds) {
      try {
        s.seeds.push_back(n.as<uint64_t>());
      } catch (const YAML::Exception&) {
        return c.Err(n, "seeds", "expected non-negative integers");
      }
      if (std::count(s.seeds.begin(), s.seeds.end(), s.seeds.back()) > 1) {
        return c.Err(n, "seeds", "seed " + std::to_string(s.seeds.back()) + " is listed twice");
      }
    }
  }
  // Cluster or federation, before the jobs and configurations, which refer to the members.
  const YAML::Node cluster = root["cluster"];
  const YAML::Node federation = root["federation"];
  if (cluster && federation) return c.Err(KeyNode(root, "federation"), "federation", "give cluster or federation, not both");
  if (federation) {
    ESTUARY_ASSIGN_OR_RETURN(s.federation, ParseFederation(c, federation, path));
    for (const char* key : {"events", "failures", "network"}) {
      if (root[key]) return c.Err(KeyNode(root, key), key, "not supported in a federation scenario");
    }
  } else {
    if (root["warmup_s"]) return c.Err(KeyNode(root, "warmup_s"), "warmup_s", "supported in a federation scenario only");
    if (!cluster) return c.Err(root, "cluster", "missing (give cluster: or federation:)");
    ESTUARY_RETURN_IF_ERROR(ParseClusterSource(c, cluster, path, &s.cluster_spec, &s.cluster_generate));
  }
  // Jobs.
  if (const YAML::Node jobs = root["jobs"]) {
    if (!jobs.IsSequence()) return c.Err(jobs, "jobs", "expected a list");
    std::set<std::string> names;
    for (const YAML::Node& m : jobs) {
      JobTemplate j;
      ESTUARY_ASSIGN_OR_RETURN(j, ParseJob(c, m, false, s.federation));
      if (!names.insert(j.name).second) return c.Err(m["name"] ? m["name"] : m, "name", "duplicate job name '" + j.name + "'");
      if (j.duration_s == 0) j.duration_s = s.duration_s + 1;  // until stopped: beyond the end of the run
      s.jobs.push_back(j);
    }
  }
  if (const YAML::Node g = root["generator"]) {
    ESTUARY_RETURN_IF_ERROR(ParseGenerator(c, g, s));
    const double arrivals = s.stream.arrivals_per_hour * static_cast<double>(s.duration_s) / 3600;
    if (arrivals > kMaxArrivals) {
      return c.Err(g["arrivals_per_hour"], "arrivals_per_hour",
                   "~" + std::to_string(static_cast<int64_t>(arrivals)) + " arrivals over duration_s " +
                       std::to_string(s.duration_s) + "; at most " +
                       std::to_string(static_cast<int64_t>(kMaxArrivals)));
    }
  }
  if (const YAML::Node t = root["tidal"]) ESTUARY_RETURN_IF_ERROR(ParseTidal(c, t, path, s.federation.enabled, s.tidal));
  for (const GeneratedClass& gc : s.stream.classes) {
    if (gc.diurnal && !s.tidal.enabled) return c.Err(root, "tidal", "a generator class is diurnal but there is no tidal curve");
  }
  if (const YAML::Node u = root["utilisation"]) ESTUARY_RETURN_IF_ERROR(ParseUtilisation(c, u, s.utilisation));
  if (s.jobs.empty() && s.stream.arrivals_per_hour == 0 && s.tidal.services == 0) {
    return c.Err(root, "jobs", "no jobs, no generator and no services");
  }
  ESTUARY_RETURN_IF_ERROR(ParseEvents(c, root, s));
  if (const YAML::Node m = root["network"]) ESTUARY_RETURN_IF_ERROR(ParseNetwork(c, m, s.network));
  if (const YAML::Node f = root["failures"]) ESTUARY_ASSIGN_OR_RETURN(s.failures, ParseFailures(c, f));
  // The organisation's queues (before the configurations, which inherit them).
  if (const YAML::Node q = root["queues"]) {
    if (s.federation.enabled) return c.Err(q, "queues", "not supported in a federation scenario");
    ESTUARY_ASSIGN_OR_RETURN(s.queues, ParseQueues(c, q));
  }
  // Configurations.
  const YAML::Node confs = root["configurations"];
  if (!confs || !confs.IsSequence() || confs.size() == 0) {
    return c.Err(confs ? confs : root, "configurations", "expected a non-empty list");
  }
  std::set<std::string> conf_names;
  for (const YAML::Node& m : confs) {
    if (!m.IsMap()) return c.Err(m, "configurations", "expected a mapping per configuration");
    SchedulerConfig sc;
    ESTUARY_ASSIGN_OR_RETURN(sc, ParseSchedulerConfig(c, m, s.federation, s.queues));
    if (!conf_names.insert(sc.name).second) return c.Err(m["name"], "name", "duplicate configuration '" + sc.name + "'");
    s.configurations.push_back(sc);
  }
  return s;
}

StatusOr<SchedulerConfig> ReadSchedulerConfig(const std::string& path, const std::string& name) {
  std::ifstream in(path);
  if (!in) return InvalidArgument(path + ": cannot open file");
  std::stringstream text;
  text << in.rdbuf();
  return ParseSchedulerConfigText(text.str(), path, name);
}

StatusOr<SchedulerConfig> ParseSchedulerConfigText(const std::string& text, const std::string& path,
                                                   const std::string& name) {
  Ctx c{path};
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return InvalidArgument(path + ":" + std::to_string(e.mark.line + 1) + ": malformed YAML (" + e.msg + ")");
  }
  if (!root.IsMap()) return InvalidArgument(path + ":1: expected a mapping");
  const FederationSpec none;
  const YAML::Node confs = root["configurations"];
  if (!confs) {
    SchedulerConfig sc;
    ESTUARY_ASSIGN_OR_RETURN(sc, ParseSchedulerConfig(c, root, none, {}));
    if (!name.empty() && sc.name != name) return c.Err(root["name"], "name", "is '" + sc.name + "', not '" + name + "'");
    return sc;
  }
  if (!confs.IsSequence() || confs.size() == 0) return c.Err(confs, "configurations", "expected a non-empty list");
  std::string names;
  for (const YAML::Node& m : confs) {
    if (!m.IsMap()) return c.Err(m, "configurations", "expected a mapping per configuration");
    const std::string n = m["name"] && m["name"].IsScalar() ? m["name"].Scalar() : "";
    names += (names.empty() ? "" : ", ") + n;
    if (n == name || (name.empty() && confs.size() == 1)) {
      // A scenario's configuration inherits the scenario's root queues.
      std::vector<QueueSpec> root_queues;
      if (const YAML::Node q = root["queues"]) ESTUARY_ASSIGN_OR_RETURN(root_queues, ParseQueues(c, q));
      return ParseSchedulerConfig(c, m, none, root_queues);
    }
  }
  if (name.empty()) return c.Err(KeyNode(root, "configurations"), "configurations", "lists " + names + ": name one");
  return c.Err(KeyNode(root, "configurations"), "configurations", "has no configuration '" + name + "' (it has " + names + ")");
}

StatusOr<Scenario> ReadScenario(const std::string& path) {
  std::ifstream f(path);
  if (!f) return InvalidArgument(path + ": cannot open file");
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseScenario(ss.str(), path);
}

}  // namespace estuary
