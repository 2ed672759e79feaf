// The job JSON codec. Decoding has two stages:
//   1. Parse: a scan of the raw bytes rejects nesting deeper than kMaxDepth and NUL bytes, then
//      nlohmann's SAX parser (iterative, UTF-8-validating) drives TreeBuilder, which builds the
//      value and rejects duplicate keys; syntax errors become "malformed JSON at byte N: ...".
//   2. Validate (DecodeJob): the schema of job_json.h, field by field (unknown keys first),
//      stopping at the first error. A scenario's YAML comes here as the same JSON value.
// Nothing here throws: every nlohmann accessor used is guarded by a type check, and the parser
// reports errors through TreeBuilder::parse_error instead of exceptions.
#include "api/job_json.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/json_reader.h"
#include "common/signals.h"
#include "model/resources.h"

namespace estuary {
namespace {

using namespace jsonr;  // NOLINT: this file is the reader's main user

// Deeper than any valid request (which nests 2 levels) by a wide margin, shallow enough that a
// tree of this depth is harmless to build, walk and destroy.
constexpr int kMaxDepth = 32;

constexpr int64_t kMaxReplicas = 100'000;
constexpr int64_t kMaxCpuOrMemory = 1'000'000'000;
constexpr int64_t kMaxPriority = 1000;
constexpr int64_t kMaxSeconds = 1'000'000'000'000;
constexpr int64_t kMaxCoresOrGib = 1'000'000;
constexpr int64_t kMaxLockedPct = 100;
constexpr size_t kMaxModels = 16;
constexpr size_t kMaxShortString = 64;   // models, plane, required_level
constexpr size_t kMaxNameLength = 128;
constexpr size_t kMaxLabels = 32;
constexpr size_t kMaxLabelLength = 128;
constexpr size_t kMaxArgs = 4096;
constexpr size_t kMaxCommandBytes = 65'536;  // one argument, a shell string, an env value
constexpr size_t kMaxEnv = 256;
constexpr size_t kMaxEnvName = 256;
constexpr size_t kMaxPath = 4096;

// Why the raw bytes cannot be a request, before parsing: "" when they may be. Two checks that
// the parser does not make itself:
//   - nesting deeper than kMaxDepth (the message gives the 1-based offset of the bracket that
//     opens level kMaxDepth + 1). Strings are skipped as JSON defines them, so on the prefix the
//     parser accepts the count is exact; past the first syntax error it does not matter.
//   - a NUL byte anywhere: nlohmann's lexer takes one outside a string for the end of the input,
//     which would silently accept `{...}<NUL>anything`.
std::string RawProblem(std::string_view body) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c == '\0') return "malformed JSON at byte " + std::to_string(i + 1) + ": a NUL byte";
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) {
        return "malformed JSON at byte " + std::to_string(i + 1) + ": nested deeper than " +
               std::to_string(kMaxDepth) + " levels";
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return "";
}

// A SAX handler for nlohmann::json::sax_parse that builds the document as a Json value and
// stops at the first duplicate key or syntax error, leaving a one-line message in error().
// REQUIRES: the input nests at most kMaxDepth levels (checked before; the parser itself keeps
// its state on the heap, so depth is only a concern for the tree).
class TreeBuilder {
 public:
  Json& root() { return root_; }
  const std::string& error() const { return error_; }

  bool null() { return Add(Json(nullptr)); }
  bool boolean(bool v) { return Add(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return Add(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return Add(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t& /*text*/) { return Add(Json(v)); }
  bool string(Json::string_t& v) { return Add(Json(std::move(v))); }
  bool binary(Json::binary_t& v) { return Add(Json::binary(std::move(v))); }  // not in JSON text

  bool start_object(std::size_t /*size*/) { return Open(Json::object()); }
  bool start_array(std::size_t /*size*/) { return Open(Json::array()); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }

  bool key(Json::string_t& k) {
    const Frame& f = open_.back();
    if (f.value->contains(k)) {
      error_ = Field(MemberPath(f.path, k)) + "duplicate key";
      return false;
    }
    key_ = std::move(k);
    return true;
  }

  bool parse_error(std::size_t position, const std::string& last_token, const Json::exception& ex) {
    std::string reason;
    if (ex.id == 406) {
      reason = "number out of range";  // "number overflow parsing '<the literal>'", e.g. 1e400
    } else {
      // "[json.exception.parse_error.101] parse error at line 1, column 5: <reason>"; the reason
      // may quote the last token read ("; last read: '...'"), which can be long or binary: drop it.
      reason = ex.what();
      const size_t colon = reason.find(": ");
      if (colon != std::string::npos) reason.erase(0, colon + 2);
      const std::string echo = "; last read: '" + last_token + "'";
      const size_t at = reason.find(echo);
      if (at != std::string::npos) reason.erase(at, echo.size());
    }
    error_ = "malformed JSON at byte " + std::to_string(position) + ": " + Escaped(reason, 200, /*escape_quotes=*/false);
    return false;
  }

 private:
  struct Frame {
    Json* value;       // an object or an array, still being filled
    std::string path;  // for messages: "", "replicas", "models[2]", ...
  };

  // Puts `v` where the next value goes and returns where it now lives. The pointer stays valid
  // while `v` is the innermost open container: its parent only grows after it is closed.
  Json* Place(Json v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json& parent = *open_.back().value;
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    Json& slot = parent[key_];
    slot = std::move(v);
    return &slot;
  }
  bool Add(Json v) {
    Place(std::move(v));
    return true;
  }
  bool Open(Json container) {
    std::string path;
    if (!open_.empty()) {
      const Frame& f = open_.back();
      path = f.value->is_array() ? f.path + "[" + std::to_string(f.value->size()) + "]" : MemberPath(f.path, key_);
    }
    Json* at = Place(std::move(container));
    open_.push_back({at, std::move(path)});
    return true;
  }
  bool Close() {
    open_.pop_back();
    return true;
  }

  Json root_;
  std::vector<Frame> open_;
  std::string key_;  // the key of the next member of the innermost open object
  std::string error_;
};

StatusOr<Json> ParseDocument(std::string_view body) {
  if (std::string why = RawProblem(body); !why.empty()) return InvalidArgument(why);
  TreeBuilder builder;
  if (!Json::sax_parse(body.begin(), body.end(), &builder)) return InvalidArgument(builder.error());
  return std::move(builder.root());
}

// A name field (`name`, `queue`): 1-128 characters of [A-Za-z0-9._-].
StatusOr<std::string> ReadNameField(const ObjectReader& in, const char* key, bool required) {
  const Json* v = in.Find(key);
  if (v == nullptr) {
    if (required) return InvalidArgument(Field(in.PathOf(key)) + "missing");
    return std::string();
  }
  return NameIn(*v, in.PathOf(key), kMaxNameLength);
}

Status ReadName(const ObjectReader& in, JobRequest& r) {
  ESTUARY_ASSIGN_OR_RETURN(r.name, ReadNameField(in, "name", true));
  return Status::Ok();
}

// `replicas`: an integer N or {min, max, step}; default 1.
Status ReadReplicas(const ObjectReader& in, JobRequest& r) {
  const Json* v = in.Find("replicas");
  if (v == nullptr) return Status::Ok();
  int64_t min, max, step;
  if (v->is_number()) {
    ESTUARY_ASSIGN_OR_RETURN(min, IntegerIn(*v, "replicas", 1, kMaxReplicas));
    max = min;
    step = 1;
  } else {
    if (!v->is_object()) return InvalidArgument(Field("replicas") + "expected an integer or an object {min, max, step}");
    const ObjectReader replicas(*v, "replicas");
    ESTUARY_RETURN_IF_ERROR(replicas.RejectUnknown({"min", "max", "step"}));
    ESTUARY_ASSIGN_OR_RETURN(min, replicas.Integer("min", 1, kMaxReplicas));
    ESTUARY_ASSIGN_OR_RETURN(max, replicas.Integer("max", 1, kMaxReplicas, min));
    if (max < min) {
      return InvalidArgument(Field("replicas.max") + std::to_string(max) + " is below 'replicas.min' " + std::to_string(min));
    }
    ESTUARY_ASSIGN_OR_RETURN(step, replicas.Integer("step", 1, kMaxReplicas, 1));
    if (step > max) {
      return InvalidArgument(Field("replicas.step") + std::to_string(step) + " is above 'replicas.max' " +
                             std::to_string(max));
    }
  }
  r.min_replicas = static_cast<int32_t>(min);
  r.max_replicas = static_cast<int32_t>(max);
  r.step = static_cast<int32_t>(step);
  return Status::Ok();
}

Status ReadGpus(const ObjectReader& in, JobRequest& r) {
  int64_t gpus, milli;
  ESTUARY_ASSIGN_OR_RETURN(gpus, in.Integer("gpus", 0, kMaxGpusPerNode, 0));
  ESTUARY_ASSIGN_OR_RETURN(milli, in.Integer("gpu_milli", 1, kMilliPerGpu, kMilliPerGpu));
  if (milli < kMilliPerGpu && gpus != 1) {
    return InvalidArgument(Field("gpu_milli") + std::to_string(milli) + " needs 'gpus': 1 (one shared GPU), not " +
                           std::to_string(gpus));
  }
  r.gpus = static_cast<int32_t>(gpus);
  r.gpu_milli = static_cast<int32_t>(milli);
  return Status::Ok();
}

// An amount given in a fine unit (`fine`, e.g. cpu_milli) or a coarse one (`coarse`, e.g.
// cpu_cores, worth `factor` fine units); at most one of the two; `fallback` (fine) when neither.
StatusOr<int64_t> FineOrCoarse(const ObjectReader& in, std::string_view fine, std::string_view coarse, int64_t factor,
                               int64_t fallback) {
  if (in.Find(fine) != nullptr && in.Find(coarse) != nullptr) {
    return InvalidArgument(Field(fine) + "give '" + std::string(coarse) + "' or '" + std::string(fine) + "', not both");
  }
  if (in.Find(coarse) != nullptr) {
    int64_t v;
    ESTUARY_ASSIGN_OR_RETURN(v, in.Integer(coarse, 0, kMaxCoresOrGib));
    return v * factor;
  }
  return in.Integer(fine, 0, kMaxCpuOrMemory, fallback);
}

StatusOr<bool> BoolOr(const ObjectReader& in, std::string_view key, bool fallback) {
  const Json* v = in.Find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return InvalidArgument(Field(key) + "expected a boolean");
  return v->get<bool>();
}

// `class`: it sets the defaults of `priority` and `preemptible`, read later by ReadPriority.
Status ReadClass(const ObjectReader& in, JobRequest& r) {
  ESTUARY_ASSIGN_OR_RETURN(r.job_class, in.String("class", 1, kMaxShortString, ""));
  if (r.job_class.empty()) return Status::Ok();
  std::string known;
  for (const JobClassInfo& k : kJobClasses) {
    if (r.job_class == k.name) {
      r.priority = k.priority;
      r.preemptible = k.preemptible;
      return Status::Ok();
    }
    known += std::string(known.empty() ? "" : ", ") + k.name;
  }
  return InvalidArgument(Field("class") + "unknown class " + Quoted(r.job_class) + " (known: " + known + ")");
}

// `priority` and `preemptible`, whose defaults are ReadClass's.
Status ReadPriority(const ObjectReader& in, JobRequest& r) {
  int64_t priority;
  ESTUARY_ASSIGN_OR_RETURN(priority, in.Integer("priority", 0, kMaxPriority, r.priority));
  r.priority = static_cast<int32_t>(priority);
  ESTUARY_ASSIGN_OR_RETURN(r.preemptible, BoolOr(in, "preemptible", r.preemptible));
  return Status::Ok();
}

Status ReadModels(const ObjectReader& in, JobRequest& r) {
  const Json* v = in.Find("models");
  if (v == nullptr) return Status::Ok();
  if (v->is_string()) {
    std::string model;
    ESTUARY_ASSIGN_OR_RETURN(model, StringIn(*v, "models", 1, kMaxShortString));
    r.models.push_back(std::move(model));
    return Status::Ok();
  }
  if (!v->is_array()) return InvalidArgument(Field("models") + "expected a string or an array");
  if (v->empty()) return InvalidArgument(Field("models") + "empty (leave it out for any model)");
  if (v->size() > kMaxModels) {
    return InvalidArgument(Field("models") + std::to_string(v->size()) + " entries, more than " +
                           std::to_string(kMaxModels));
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string path = "models[" + std::to_string(i) + "]";
    std::string model;
    ESTUARY_ASSIGN_OR_RETURN(model, StringIn((*v)[i], path, 1, kMaxShortString));
    auto dup = std::find(r.models.begin(), r.models.end(), model);
    if (dup != r.models.end()) {
      return InvalidArgument(Field(path) + Quoted(model) + " repeats models[" +
                             std::to_string(dup - r.models.begin()) + "]");
    }
    r.models.push_back(std::move(model));
  }
  return Status::Ok();
}

Status ReadPlacement(const ObjectReader& in, JobRequest& r) {
  ESTUARY_ASSIGN_OR_RETURN(r.plane, in.String("plane", 1, kMaxShortString, ""));
  ESTUARY_ASSIGN_OR_RETURN(r.required_level, in.String("required_level", 1, kMaxShortString, ""));
  ESTUARY_ASSIGN_OR_RETURN(r.preferred_level, in.String("preferred_level", 1, kMaxShortString, ""));
  if (r.plane.empty()) {
    for (const char* level : {"required_level", "preferred_level"}) {
      if (in.Find(level) != nullptr) return InvalidArgument(Field("plane") + "missing (required with '" + level + "')");
    }
  }
  ESTUARY_ASSIGN_OR_RETURN(r.required_max_wait_s, in.Integer("required_max_wait_s", 0, kMaxSeconds, 0));
  if (r.required_max_wait_s > 0 && r.required_level.empty()) {
    return InvalidArgument(Field("required_level") + "missing (required with 'required_max_wait_s')");
  }
  return Status::Ok();
}

Status ReadLabels(const ObjectReader& in, JobRequest& r) {
  const Json* v = in.Find("labels");
  if (v == nullptr) return Status::Ok();
  if (!v->is_object()) return InvalidArgument(Field("labels") + "expected an object");
  if (v->size() > kMaxLabels) {
    return InvalidArgument(Field("labels") + std::to_string(v->size()) + " entries, more than " +
                           std::to_string(kMaxLabels));
  }
  for (const auto& [key, value] : v->items()) {
    if (std::string why = StringProblem(key, 1, kMaxLabelLength); !why.empty()) {
      return InvalidArgument(Field("labels") + "key " + Quoted(key) + ": " + why);
    }
    std::string checked;
    ESTUARY_ASSIGN_OR_RETURN(checked, StringIn(value, MemberPath("labels", key), 0, kMaxLabelLength));
    r.labels.emplace(key, std::move(checked));
  }
  return Status::Ok();
}

// `v` as a string of 0 (or 1, `nonempty`) to kMaxCommandBytes bytes without NUL: a command, an
// argument or an environment value (any other character is the workload's business).
StatusOr<std::string> Text(const Json& v, const std::string& path, bool nonempty) {
  if (!v.is_string()) return InvalidArgument(Field(path) + "expected a string");
  const std::string& s = v.get_ref<const std::string&>();
  if (nonempty && s.empty()) return InvalidArgument(Field(path) + "empty");
  if (s.size() > kMaxCommandBytes) {
    return InvalidArgument(Field(path) + std::to_string(s.size()) + " bytes, more than " + std::to_string(kMaxCommandBytes));
  }
  if (s.find('\0') != std::string::npos) return InvalidArgument(Field(path) + "holds a NUL character");
  return s;
}

// A command at `path`: an argv array or a shell string (docs in the header).
StatusOr<JobCommand> ReadCommand(const Json& v, const std::string& path) {
  JobCommand c;
  if (v.is_string()) {
    std::string script;
    ESTUARY_ASSIGN_OR_RETURN(script, Text(v, path, true));
    c.argv.push_back(std::move(script));
    c.shell = true;
    return c;
  }
  if (!v.is_array()) return InvalidArgument(Field(path) + "expected an array of strings (argv) or a string (a shell command)");
  if (v.empty()) return InvalidArgument(Field(path) + "empty");
  if (v.size() > kMaxArgs) {
    return InvalidArgument(Field(path) + std::to_string(v.size()) + " arguments, more than " + std::to_string(kMaxArgs));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    std::string arg;
    ESTUARY_ASSIGN_OR_RETURN(arg, Text(v[i], path + "[" + std::to_string(i) + "]", i == 0));
    c.argv.push_back(std::move(arg));
  }
  return c;
}

// Why `name` may not be a job's environment variable, or "".
std::string EnvNameProblem(std::string_view name) {
  if (name.empty()) return "an empty name";
  if (name.size() > kMaxEnvName) return "a name of more than " + std::to_string(kMaxEnvName) + " characters";
  const bool first_ok = (name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z') || name[0] == '_';
  const bool rest_ok = std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
  if (!first_ok || !rest_ok) return "name " + Quoted(name) + " is not [A-Za-z_][A-Za-z0-9_]*";
  if (name.rfind("ESTUARY_", 0) == 0 || name.rfind("CUDA_", 0) == 0 || name == "NVIDIA_VISIBLE_DEVICES") {
    return "name " + Quoted(name) + " is set by the agent";
  }
  return "";
}

// `env`: an object NAME -> value, or an array of "NAME=VALUE" strings.
Status ReadEnv(const ObjectReader& in, JobRequest& r) {
  const Json* v = in.Find("env");
  if (v == nullptr) return Status::Ok();
  if (!v->is_object() && !v->is_array()) {
    return InvalidArgument(Field("env") + "expected an object NAME -> value or an array of \"NAME=VALUE\" strings");
  }
  if (v->size() > kMaxEnv) {
    return InvalidArgument(Field("env") + std::to_string(v->size()) + " entries, more than " + std::to_string(kMaxEnv));
  }
  auto add = [&](const std::string& path, const std::string& name, std::string value) -> Status {
    if (std::string why = EnvNameProblem(name); !why.empty()) return InvalidArgument(Field(path) + why);
    if (!r.env.emplace(name, std::move(value)).second) return InvalidArgument(Field(path) + Quoted(name) + " given twice");
    return Status::Ok();
  };
  if (v->is_object()) {
    for (const auto& [name, value] : v->items()) {
      std::string text;
      ESTUARY_ASSIGN_OR_RETURN(text, Text(value, MemberPath("env", name), false));
      ESTUARY_RETURN_IF_ERROR(add("env", name, std::move(text)));
    }
    return Status::Ok();
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string path = "env[" + std::to_string(i) + "]";
    std::string entry;
    ESTUARY_ASSIGN_OR_RETURN(entry, Text((*v)[i], path, true));
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) return InvalidArgument(Field(path) + "expected NAME=VALUE, not " + Quoted(entry));
    ESTUARY_RETURN_IF_ERROR(add(path, entry.substr(0, eq), entry.substr(eq + 1)));
  }
  return Status::Ok();
}

// command, env, workdir, checkpoint_signal and hooks.
Status ReadWorkload(const ObjectReader& in, JobRequest& r) {
  if (const Json* v = in.Find("command")) ESTUARY_ASSIGN_OR_RETURN(r.command, ReadCommand(*v, "command"));
  ESTUARY_RETURN_IF_ERROR(ReadEnv(in, r));
  ESTUARY_ASSIGN_OR_RETURN(r.workdir, in.String("workdir", 1, kMaxPath, ""));
  if (!r.workdir.empty() && r.workdir[0] != '/') {
    return InvalidArgument(Field("workdir") + Quoted(r.workdir) + " is not an absolute path");
  }
  std::string signal;
  ESTUARY_ASSIGN_OR_RETURN(signal, in.String("checkpoint_signal", 1, kMaxShortString, "SIGTERM"));
  const std::optional<int> number = SignalByName(signal);
  if (!number || SignalName(*number).empty()) {
    return InvalidArgument(Field("checkpoint_signal") + "unknown signal " + Quoted(signal));
  }
  r.checkpoint_signal = SignalName(*number);
  const Json* hooks = in.Find("hooks");
  if (hooks == nullptr) return Status::Ok();
  if (!hooks->is_object()) return InvalidArgument(Field("hooks") + "expected an object {standby_enter, standby_leave, ready}");
  const ObjectReader h(*hooks, "hooks");
  ESTUARY_RETURN_IF_ERROR(h.RejectUnknown({"standby_enter", "standby_leave", "ready"}));
  for (auto [key, command] : {std::pair{"standby_enter", &r.hook_standby_enter}, std::pair{"standby_leave", &r.hook_standby_leave},
                              std::pair{"ready", &r.hook_ready}}) {
    if (const Json* v = h.Find(key)) ESTUARY_ASSIGN_OR_RETURN(*command, ReadCommand(*v, h.PathOf(key)));
  }
  return Status::Ok();
}

// `standby`: ascending, disjoint windows of at most `max_replicas` replicas.
Status ReadStandby(const ObjectReader& in, int32_t max_replicas, ScenarioJobFields& s) {
  const Json* v = in.Find("standby");
  if (v == nullptr) return Status::Ok();
  if (!v->is_array()) return InvalidArgument(Field("standby") + "expected an array of {from_s, to_s, replicas}");
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string path = "standby[" + std::to_string(i) + "]";
    if (!(*v)[i].is_object()) return InvalidArgument(Field(path) + "expected an object {from_s, to_s, replicas}");
    const ObjectReader w((*v)[i], path);
    ESTUARY_RETURN_IF_ERROR(w.RejectUnknown({"from_s", "to_s", "replicas"}));
    JobStandbyWindow sw;
    ESTUARY_ASSIGN_OR_RETURN(sw.from_s, w.Integer("from_s", 0, kMaxSeconds));
    ESTUARY_ASSIGN_OR_RETURN(sw.to_s, w.Integer("to_s", 0, kMaxSeconds));
    if (sw.to_s <= sw.from_s) {
      return InvalidArgument(Field(w.PathOf("to_s")) + std::to_string(sw.to_s) + " is not after 'from_s' " +
                             std::to_string(sw.from_s));
    }
    int64_t replicas;
    ESTUARY_ASSIGN_OR_RETURN(replicas, w.Integer("replicas", 1, max_replicas, 1));
    sw.replicas = static_cast<int32_t>(replicas);
    if (!s.standby.empty() && sw.from_s < s.standby.back().to_s) {
      return InvalidArgument(Field(w.PathOf("from_s")) + std::to_string(sw.from_s) + " is before the end of standby[" +
                             std::to_string(i - 1) + "] " + std::to_string(s.standby.back().to_s));
    }
    s.standby.push_back(sw);
  }
  return Status::Ok();
}

// The scenario-only fields (docs in the header).
Status ReadScenarioFields(const ObjectReader& in, JobUse use, const JobRequest& r, ScenarioJobFields& s) {
  if (use == JobUse::kScenarioJob) {
    ESTUARY_ASSIGN_OR_RETURN(s.submit_s, in.Integer("submit_s", 0, kMaxSeconds, 0));
  } else {
    ESTUARY_ASSIGN_OR_RETURN(s.duration_mean_s, in.Integer("duration_mean_s", 1, kMaxSeconds, 3600));
  }
  std::string scaling;
  ESTUARY_ASSIGN_OR_RETURN(scaling, in.String("scaling", 1, kMaxShortString, "fixed"));
  if (scaling != "fixed" && scaling != "linear") {
    return InvalidArgument(Field("scaling") + "unknown scaling " + Quoted(scaling) + " (known: fixed, linear)");
  }
  s.linear_scaling = scaling == "linear";
  int64_t locked;
  ESTUARY_ASSIGN_OR_RETURN(locked, in.Integer("locked_pct", 0, kMaxLockedPct, 0));
  s.locked_pct = static_cast<int32_t>(locked);
  if (use == JobUse::kScenarioJob) {
    ESTUARY_RETURN_IF_ERROR(ReadStandby(in, r.max_replicas, s));
    ESTUARY_ASSIGN_OR_RETURN(s.home, in.String("home", 1, kMaxNameLength, ""));
  }
  ESTUARY_ASSIGN_OR_RETURN(s.home_only, BoolOr(in, "home_only", false));
  return Status::Ok();
}

constexpr std::string_view kCommonKeys[] = {
    "name", "class", "replicas", "gpus", "gpu_milli", "cpu_milli", "cpu_cores", "memory_mib", "memory_gib",
    "priority", "preemptible", "models", "plane", "required_level", "preferred_level", "required_max_wait_s",
    "checkpoint_interval_s", "checkpoint_on_notice_s", "restart_cost_s", "walltime_s", "usable_step", "labels", "queue",
    "command", "env", "workdir", "checkpoint_signal", "hooks"};
constexpr std::string_view kScenarioKeys[] = {"submit_s", "duration_mean_s", "scaling", "locked_pct",
                                              "standby", "home", "home_only"};

// The first key of `in` that a job read for `use` may not have.
Status RejectUnknownJobKeys(const Json& doc, JobUse use, const std::vector<std::string>& caller_keys) {
  auto listed = [](const auto& keys, std::string_view k) { return std::find(std::begin(keys), std::end(keys), k) != std::end(keys); };
  for (const auto& [key, value] : doc.items()) {
    if (listed(kCommonKeys, key) || listed(caller_keys, key)) continue;
    const bool generated = use == JobUse::kGeneratedClass;
    if (key == "duration_s") {
      if (!generated) continue;
      return InvalidArgument(Field(key) + "not in a generator class (give duration_mean_s)");
    }
    if (listed(kScenarioKeys, key)) {
      if (use == JobUse::kService) return InvalidArgument(Field(key) + "only in a scenario (the simulated workload)");
      if (key == "duration_mean_s" && !generated) return InvalidArgument(Field(key) + "only in a generator class (give duration_s)");
      if (generated && (key == "submit_s" || key == "standby" || key == "home")) {
        return InvalidArgument(Field(key) + "not in a generator class");
      }
      continue;
    }
    return InvalidArgument(Field(MemberPath("", key)) + "unknown field");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<DecodedJob> DecodeJob(const Json& doc, JobUse use, const std::vector<std::string>& caller_keys) {
  if (!doc.is_object()) {
    return InvalidArgument(std::string("expected a JSON object at the top level, not ") + TypeName(doc));
  }
  ESTUARY_RETURN_IF_ERROR(RejectUnknownJobKeys(doc, use, caller_keys));
  const ObjectReader in(doc, "");
  DecodedJob out;
  JobRequest& r = out.request;
  if (use != JobUse::kGeneratedClass || in.Find("name") != nullptr) ESTUARY_RETURN_IF_ERROR(ReadName(in, r));
  ESTUARY_RETURN_IF_ERROR(ReadClass(in, r));
  ESTUARY_RETURN_IF_ERROR(ReadReplicas(in, r));
  ESTUARY_RETURN_IF_ERROR(ReadGpus(in, r));
  ESTUARY_ASSIGN_OR_RETURN(r.cpu_milli, FineOrCoarse(in, "cpu_milli", "cpu_cores", 1000, 1000));
  ESTUARY_ASSIGN_OR_RETURN(r.memory_mib, FineOrCoarse(in, "memory_mib", "memory_gib", 1024, 1024));
  ESTUARY_RETURN_IF_ERROR(ReadPriority(in, r));
  ESTUARY_RETURN_IF_ERROR(ReadModels(in, r));
  ESTUARY_RETURN_IF_ERROR(ReadPlacement(in, r));
  if (use != JobUse::kGeneratedClass) ESTUARY_ASSIGN_OR_RETURN(r.duration_s, in.Integer("duration_s", 0, kMaxSeconds, 3600));
  ESTUARY_ASSIGN_OR_RETURN(r.checkpoint_interval_s, in.Integer("checkpoint_interval_s", 0, kMaxSeconds, 0));
  ESTUARY_ASSIGN_OR_RETURN(r.checkpoint_on_notice_s, in.Integer("checkpoint_on_notice_s", 0, kMaxSeconds, 0));
  ESTUARY_ASSIGN_OR_RETURN(r.restart_cost_s, in.Integer("restart_cost_s", 0, kMaxSeconds, 0));
  ESTUARY_ASSIGN_OR_RETURN(r.walltime_s, in.Integer("walltime_s", 0, kMaxSeconds, 0));
  int64_t usable;
  ESTUARY_ASSIGN_OR_RETURN(usable, in.Integer("usable_step", 0, kMaxReplicas, 0));
  r.usable_step = static_cast<int32_t>(usable);
  ESTUARY_RETURN_IF_ERROR(ReadLabels(in, r));
  ESTUARY_ASSIGN_OR_RETURN(r.queue, ReadNameField(in, "queue", false));
  ESTUARY_RETURN_IF_ERROR(ReadWorkload(in, r));
  if (use != JobUse::kService) ESTUARY_RETURN_IF_ERROR(ReadScenarioFields(in, use, r, out.scenario));
  return out;
}

std::vector<std::string> JobCommand::Exec() const {
  if (!shell) return argv;
  return {"/bin/sh", "-c", argv.empty() ? "" : argv.front()};
}

std::string JobErrorPath(std::string_view message) {
  constexpr std::string_view kStart = "field '";
  if (message.substr(0, kStart.size()) != kStart) return "";
  const size_t end = message.find("': ", kStart.size());
  if (end == std::string_view::npos) return "";
  return std::string(message.substr(kStart.size(), end - kStart.size()));
}

StatusOr<JobRequest> DecodeJobRequest(std::string_view body) {
  StatusOr<Json> parsed = ParseDocument(body);
  if (!parsed.ok()) return parsed.status();
  StatusOr<DecodedJob> job = DecodeJob(*parsed, JobUse::kService);
  if (!job.ok()) return job.status();
  return std::move(job->request);
}

std::string EncodeJobRequest(const JobRequest& r) {
  using Ordered = nlohmann::ordered_json;
  Ordered j = Ordered::object();
  j["name"] = r.name;
  if (!r.job_class.empty()) j["class"] = r.job_class;
  Ordered replicas = Ordered::object();
  replicas["min"] = r.min_replicas;
  replicas["max"] = r.max_replicas;
  replicas["step"] = r.step;
  j["replicas"] = std::move(replicas);
  j["gpus"] = r.gpus;
  j["gpu_milli"] = r.gpu_milli;
  j["cpu_milli"] = r.cpu_milli;
  j["memory_mib"] = r.memory_mib;
  j["priority"] = r.priority;
  j["preemptible"] = r.preemptible;
  if (!r.models.empty()) j["models"] = r.models;
  if (!r.plane.empty()) j["plane"] = r.plane;
  if (!r.required_level.empty()) j["required_level"] = r.required_level;
  if (!r.preferred_level.empty()) j["preferred_level"] = r.preferred_level;
  if (r.required_max_wait_s > 0) j["required_max_wait_s"] = r.required_max_wait_s;
  j["duration_s"] = r.duration_s;
  j["checkpoint_interval_s"] = r.checkpoint_interval_s;
  j["checkpoint_on_notice_s"] = r.checkpoint_on_notice_s;
  j["restart_cost_s"] = r.restart_cost_s;
  if (r.walltime_s > 0) j["walltime_s"] = r.walltime_s;  // left out at its default: stored jobs stay as they were
  j["usable_step"] = r.usable_step;
  Ordered labels = Ordered::object();
  for (const auto& [k, v] : r.labels) labels[k] = v;
  j["labels"] = std::move(labels);
  if (!r.queue.empty()) j["queue"] = r.queue;
  auto command = [](const JobCommand& c) { return c.shell ? Ordered(c.argv.front()) : Ordered(c.argv); };
  if (!r.command.empty()) j["command"] = command(r.command);
  if (!r.env.empty()) {
    Ordered env = Ordered::object();
    for (const auto& [k, v] : r.env) env[k] = v;
    j["env"] = std::move(env);
  }
  if (!r.workdir.empty()) j["workdir"] = r.workdir;
  j["checkpoint_signal"] = r.checkpoint_signal;
  Ordered hooks = Ordered::object();
  if (!r.hook_standby_enter.empty()) hooks["standby_enter"] = command(r.hook_standby_enter);
  if (!r.hook_standby_leave.empty()) hooks["standby_leave"] = command(r.hook_standby_leave);
  if (!r.hook_ready.empty()) hooks["ready"] = command(r.hook_ready);
  if (!hooks.empty()) j["hooks"] = std::move(hooks);
  // `replace` keeps this from throwing on a request that was never decoded and holds invalid
  // UTF-8; such a request does not round-trip (it would not decode in the first place).
  return j.dump(-1, ' ', false, Ordered::error_handler_t::replace);
}

}  // namespace estuary
