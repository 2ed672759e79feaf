// The job JSON: what a valid request decodes to, its defaults, the canonical encoding and its
// round trip, every rejection with its one-line reason, and a seeded fuzz test showing that no
// input crashes, hangs or throws.
#include "api/job_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/rng.h"

namespace estuary {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A request body built member by member; values are raw JSON text.
class Body {
 public:
  // Only the required fields.
  static Body Minimal() {
    Body b;
    b.Set("name", R"("train-llm")")
        .Set("replicas", R"({"min": 2})")
        .Set("gpus", "8")
        .Set("cpu_milli", "32000")
        .Set("memory_mib", "262144")
        .Set("priority", "100");
    return b;
  }
  // Every field, none at its default.
  static Body Full() {
    Body b;
    b.Set("name", R"("train-llm.v2_a")")
        .Set("class", R"("lp")")
        .Set("replicas", R"({"min": 4, "max": 16, "step": 4})")
        .Set("gpus", "1")
        .Set("gpu_milli", "500")
        .Set("cpu_milli", "8000")
        .Set("memory_mib", "65536")
        .Set("priority", "700")
        .Set("preemptible", "true")
        .Set("models", R"(["A100-SXM4-80GB", "H100"])")
        .Set("plane", R"("data")")
        .Set("required_level", R"("asw")")
        .Set("preferred_level", R"("pod")")
        .Set("required_max_wait_s", "3600")
        .Set("duration_s", "7200")
        .Set("checkpoint_interval_s", "600")
        .Set("checkpoint_on_notice_s", "45")
        .Set("restart_cost_s", "90")
        .Set("usable_step", "8")
        .Set("labels", R"({"team": "nlp", "ticket": "ML-42"})")
        .Set("command", R"(["python3", "train.py", "--steps", "100"])")
        .Set("env", R"({"NCCL_DEBUG": "INFO", "LR": "0.1"})")
        .Set("workdir", R"("/srv/train")")
        .Set("checkpoint_signal", R"("usr1")")
        .Set("hooks", R"({"standby_enter": "curl -X POST localhost:8000/sleep", "ready": ["test", "-f", "/tmp/up"]})");
    return b;
  }

  // Sets `key` to the JSON text `value`, in place when present, else at the end.
  Body& Set(const std::string& key, const std::string& value) {
    for (auto& [k, v] : members_) {
      if (k == key) {
        v = value;
        return *this;
      }
    }
    members_.emplace_back(key, value);
    return *this;
  }
  Body& Drop(const std::string& key) {
    std::erase_if(members_, [&](const auto& m) { return m.first == key; });
    return *this;
  }
  std::string str() const {
    std::string out = "{";
    for (const auto& [k, v] : members_) out += (out.size() > 1 ? ", \"" : "\"") + k + "\": " + v;
    return out + "}";
  }

 private:
  std::vector<std::pair<std::string, std::string>> members_;
};

JobRequest DecodeOk(const std::string& body) {
  StatusOr<JobRequest> r = DecodeJobRequest(body);
  EXPECT_TRUE(r.ok()) << r.status().message() << "\nbody: " << body;
  return r.ok() ? *r : JobRequest{};
}

// True when `s` is one line of printable ASCII: safe to return as an HTTP 400 body or to log.
bool IsOnePrintableLine(const std::string& s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

std::string ErrorOf(std::string_view body) {
  StatusOr<JobRequest> r = DecodeJobRequest(body);
  EXPECT_FALSE(r.ok()) << "decoded: " << body;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(IsOnePrintableLine(r.status().message())) << r.status().message();
  return r.status().message();
}

TEST(DecodeJobRequest, AFullRequestSetsEveryField) {
  const JobRequest r = DecodeOk(Body::Full().str());
  EXPECT_EQ(r.name, "train-llm.v2_a");
  EXPECT_EQ(r.job_class, "lp");
  EXPECT_EQ(r.min_replicas, 4);
  EXPECT_EQ(r.max_replicas, 16);
  EXPECT_EQ(r.step, 4);
  EXPECT_EQ(r.gpus, 1);
  EXPECT_EQ(r.gpu_milli, 500);
  EXPECT_EQ(r.cpu_milli, 8000);
  EXPECT_EQ(r.memory_mib, 65536);
  EXPECT_EQ(r.priority, 700);
  EXPECT_TRUE(r.preemptible);
  EXPECT_EQ(r.models, (std::vector<std::string>{"A100-SXM4-80GB", "H100"}));
  EXPECT_EQ(r.plane, "data");
  EXPECT_EQ(r.required_level, "asw");
  EXPECT_EQ(r.preferred_level, "pod");
  EXPECT_EQ(r.required_max_wait_s, 3600);
  EXPECT_EQ(r.duration_s, 7200);
  EXPECT_EQ(r.checkpoint_interval_s, 600);
  EXPECT_EQ(r.checkpoint_on_notice_s, 45);
  EXPECT_EQ(r.restart_cost_s, 90);
  EXPECT_EQ(r.usable_step, 8);
  EXPECT_EQ(r.labels, (std::map<std::string, std::string>{{"team", "nlp"}, {"ticket", "ML-42"}}));
  EXPECT_EQ(r.command.Exec(), (std::vector<std::string>{"python3", "train.py", "--steps", "100"}));
  EXPECT_EQ(r.env, (std::map<std::string, std::string>{{"NCCL_DEBUG", "INFO"}, {"LR", "0.1"}}));
  EXPECT_EQ(r.workdir, "/srv/train");
  EXPECT_EQ(r.checkpoint_signal, "SIGUSR1");
  EXPECT_EQ(r.hook_standby_enter.Exec(), (std::vector<std::string>{"/bin/sh", "-c", "curl -X POST localhost:8000/sleep"}));
  EXPECT_TRUE(r.hook_standby_leave.empty());
  EXPECT_EQ(r.hook_ready.Exec(), (std::vector<std::string>{"test", "-f", "/tmp/up"}));
}

TEST(DecodeJobRequest, AWorkloadIsOptionalAndItsTwoFormsOfCommandAndEnvMeanTheSame) {
  const JobRequest none = DecodeOk(Body::Minimal().str());
  EXPECT_TRUE(none.command.empty());
  EXPECT_TRUE(none.env.empty());
  EXPECT_EQ(none.workdir, "");
  EXPECT_EQ(none.checkpoint_signal, "SIGTERM");
  // A shell string runs through /bin/sh -c, with newlines and tabs kept.
  const JobRequest shell = DecodeOk(Body::Minimal().Set("command", R"("for i in 1 2; do\n\techo $i; done")").str());
  EXPECT_EQ(shell.command.Exec(), (std::vector<std::string>{"/bin/sh", "-c", "for i in 1 2; do\n\techo $i; done"}));
  // env as "NAME=VALUE" strings is the object form; a value may hold '=' and be empty.
  const JobRequest listed = DecodeOk(Body::Minimal().Set("env", R"(["A=1", "B=x=y", "C="])").str());
  const JobRequest object = DecodeOk(Body::Minimal().Set("env", R"({"A": "1", "B": "x=y", "C": ""})").str());
  EXPECT_EQ(listed.env, (std::map<std::string, std::string>{{"A", "1"}, {"B", "x=y"}, {"C", ""}}));
  EXPECT_EQ(listed, object);
  EXPECT_EQ(EncodeJobRequest(listed), EncodeJobRequest(object));
  // Signals by number or short name take their canonical name.
  EXPECT_EQ(DecodeOk(Body::Minimal().Set("checkpoint_signal", R"("2")").str()).checkpoint_signal, "SIGINT");
  EXPECT_EQ(DecodeOk(Body::Minimal().Set("checkpoint_signal", R"("HUP")").str()).checkpoint_signal, "SIGHUP");
}

TEST(DecodeJobRequest, OptionalFieldsTakeTheDocumentedDefaults) {
  const JobRequest r = DecodeOk(Body::Minimal().str());
  EXPECT_EQ(r.name, "train-llm");
  EXPECT_EQ(r.min_replicas, 2);
  EXPECT_EQ(r.max_replicas, 2);  // max defaults to min
  EXPECT_EQ(r.step, 1);
  EXPECT_EQ(r.gpus, 8);
  EXPECT_EQ(r.gpu_milli, 1000);
  EXPECT_EQ(r.cpu_milli, 32000);
  EXPECT_EQ(r.memory_mib, 262144);
  EXPECT_EQ(r.priority, 100);
  EXPECT_FALSE(r.preemptible);
  EXPECT_TRUE(r.models.empty());
  EXPECT_TRUE(r.plane.empty());
  EXPECT_TRUE(r.required_level.empty());
  EXPECT_TRUE(r.preferred_level.empty());
  EXPECT_EQ(r.required_max_wait_s, 0);
  EXPECT_EQ(r.duration_s, 3600);
  EXPECT_EQ(r.checkpoint_interval_s, 0);
  EXPECT_EQ(r.checkpoint_on_notice_s, 0);
  EXPECT_EQ(r.restart_cost_s, 0);
  EXPECT_EQ(r.walltime_s, 0);  // no limit
  EXPECT_EQ(r.usable_step, 0);
  EXPECT_TRUE(r.labels.empty());
}

TEST(DecodeJobRequest, AJobOfOnlyANameTakesEveryDefault) {
  const JobRequest r = DecodeOk(R"({"name": "n"})");
  EXPECT_TRUE(r.job_class.empty());
  EXPECT_EQ(r.min_replicas, 1);
  EXPECT_EQ(r.max_replicas, 1);
  EXPECT_EQ(r.step, 1);
  EXPECT_EQ(r.gpus, 0);
  EXPECT_EQ(r.gpu_milli, 1000);
  EXPECT_EQ(r.cpu_milli, 1000);
  EXPECT_EQ(r.memory_mib, 1024);
  EXPECT_EQ(r.priority, 0);
  EXPECT_FALSE(r.preemptible);
  EXPECT_EQ(r.duration_s, 3600);
}

TEST(DecodeJobRequest, ReplicasMayBeOneIntegerForARigidJob) {
  const JobRequest r = DecodeOk(Body::Minimal().Set("replicas", "6").str());
  EXPECT_EQ(r.min_replicas, 6);
  EXPECT_EQ(r.max_replicas, 6);
  EXPECT_EQ(r.step, 1);
}

TEST(DecodeJobRequest, CpuAndMemoryMayBeGivenInCoresAndGib) {
  const JobRequest r = DecodeOk(Body::Minimal().Drop("cpu_milli").Drop("memory_mib").Set("cpu_cores", "6").Set("memory_gib", "48").str());
  EXPECT_EQ(r.cpu_milli, 6000);
  EXPECT_EQ(r.memory_mib, 48 * 1024);
}

TEST(DecodeJobRequest, AClassSetsTheDefaultPriorityAndPreemptibilityAndExplicitFieldsWin) {
  for (const JobClassInfo& k : kJobClasses) {
    const JobRequest r = DecodeOk(Body::Minimal().Drop("priority").Set("class", "\"" + std::string(k.name) + "\"").str());
    EXPECT_EQ(r.priority, k.priority) << k.name;
    EXPECT_EQ(r.preemptible, k.preemptible) << k.name;
  }
  const JobRequest r = DecodeOk(Body::Minimal().Set("class", R"("spot")").Set("priority", "50").Set("preemptible", "false").str());
  EXPECT_EQ(r.priority, 50);
  EXPECT_FALSE(r.preemptible);
  EXPECT_EQ(ErrorOf(Body::Minimal().Set("class", R"("gold")").str()),
            "field 'class': unknown class 'gold' (known: hp-inference, hp-training, dev, lp, spot)");
}

TEST(DecodeJobRequest, ModelsMayBeOneName) {
  EXPECT_EQ(DecodeOk(Body::Minimal().Set("models", R"("A100")").str()).models, std::vector<std::string>{"A100"});
}

TEST(DecodeJobRequest, APlaneMayComeAloneAndEitherLevelNeedsIt) {
  EXPECT_EQ(DecodeOk(Body::Minimal().Set("plane", R"("data")").str()).plane, "data");
  EXPECT_EQ(ErrorOf(Body::Minimal().Set("preferred_level", R"("asw")").str()),
            "field 'plane': missing (required with 'preferred_level')");
}

TEST(DecodeJobRequest, AMaxWaitForTheRequiredLevelNeedsOne) {
  EXPECT_EQ(ErrorOf(Body::Minimal().Set("plane", R"("data")").Set("required_max_wait_s", "60").str()),
            "field 'required_level': missing (required with 'required_max_wait_s')");
  // 0 is the default (wait forever): allowed alone.
  EXPECT_EQ(DecodeOk(Body::Minimal().Set("required_max_wait_s", "0").str()).required_max_wait_s, 0);
}

TEST(DecodeJobRequest, TheScenarioOnlyFieldsAreRejectedByTheServiceNamingWhereTheyBelong) {
  for (const char* key : {"submit_s", "duration_mean_s", "scaling", "locked_pct", "standby", "home", "home_only"}) {
    EXPECT_EQ(ErrorOf(Body::Minimal().Set(key, "1").str()),
              "field '" + std::string(key) + "': only in a scenario (the simulated workload)");
  }
}

TEST(DecodeJobRequest, TheBoundsOfEveryRangeAreAccepted) {
  const JobRequest low = DecodeOk(Body::Minimal()
                                      .Set("name", R"("a")")
                                      .Set("replicas", R"({"min": 1, "max": 1, "step": 1})")
                                      .Set("gpus", "0")
                                      .Set("cpu_milli", "0")
                                      .Set("memory_mib", "0")
                                      .Set("priority", "0")
                                      .Set("duration_s", "0")
                                      .Set("checkpoint_interval_s", "0")
                                      .Set("labels", "{}")
                                      .str());
  EXPECT_EQ(low.gpus, 0);
  const std::string name128 = std::string(128, 'n');
  const JobRequest high = DecodeOk(Body::Minimal()
                                       .Set("name", "\"" + name128 + "\"")
                                       .Set("replicas", R"({"min": 100000, "max": 100000, "step": 100000})")
                                       .Set("gpus", "16")
                                       .Set("cpu_milli", "1000000000")
                                       .Set("memory_mib", "1000000000")
                                       .Set("priority", "1000")
                                       .Set("models", "[\"" + std::string(64, 'm') + "\"]")
                                       .Set("plane", "\"" + std::string(64, 'p') + "\"")
                                       .Set("required_level", "\"" + std::string(64, 'l') + "\"")
                                       .Set("duration_s", "1000000000000")
                                       .Set("checkpoint_interval_s", "1000000000000")
                                       .Set("restart_cost_s", "1000000000000")
                                       .Set("usable_step", "100000")
                                       .str());
  EXPECT_EQ(high.name, name128);
  EXPECT_EQ(high.max_replicas, 100000);
  EXPECT_EQ(high.cpu_milli, 1'000'000'000);
  EXPECT_EQ(high.duration_s, 1'000'000'000'000);
  EXPECT_EQ(DecodeOk(Body::Minimal().Set("gpus", "1").Set("gpu_milli", "1").str()).gpu_milli, 1);
}

TEST(DecodeJobRequest, WholeGpusMayStateTheDefaultShareOf1000) {
  const JobRequest r = DecodeOk(Body::Minimal().Set("gpus", "8").Set("gpu_milli", "1000").str());
  EXPECT_EQ(r.gpus, 8);
  EXPECT_EQ(r.gpu_milli, 1000);
  EXPECT_EQ(DecodeOk(Body::Minimal().Set("gpus", "0").Set("gpu_milli", "1000").str()).gpus, 0);
}

TEST(DecodeJobRequest, MinAndMaxNeedNotBeMultiplesOfStep) {
  const JobRequest r = DecodeOk(Body::Minimal().Set("replicas", R"({"min": 3, "max": 10, "step": 4})").str());
  EXPECT_EQ(r.min_replicas, 3);
  EXPECT_EQ(r.max_replicas, 10);
  EXPECT_EQ(r.step, 4);
}

TEST(DecodeJobRequest, StringsMayHoldUnicodeAndLengthsCountCharactersNotBytes) {
  std::string raw, escaped;  // 64 x U+00E9 (2 bytes each), written raw and escaped
  for (int i = 0; i < 64; ++i) raw += "\xC3\xA9";
  for (int i = 0; i < 64; ++i) escaped += "\\u00e9";
  const JobRequest r = DecodeOk(Body::Minimal()
                                    .Set("plane", "\"" + raw + "\"")
                                    .Set("required_level", "\"" + escaped + "\"")
                                    .Set("labels", R"({"équipe": "traitement du langage 🌊"})")
                                    .str());
  EXPECT_EQ(r.plane, raw);
  EXPECT_EQ(r.required_level, raw);
  EXPECT_EQ(r.labels.at("équipe"), "traitement du langage 🌊");
}

TEST(DecodeJobRequest, MinusZeroIsTheIntegerZero) {
  EXPECT_EQ(DecodeOk(Body::Minimal().Set("gpus", "-0").str()).gpus, 0);
}

TEST(DecodeJobRequest, WhitespaceAroundAndInsideTheDocumentIsIgnored) {
  EXPECT_EQ(DecodeOk(" \n\t\r" + Body::Minimal().str() + "\n\n ").gpus, 8);
}

TEST(EncodeJobRequest, WritesEveryFieldInTheHeadersOrderCompactly) {
  EXPECT_EQ(EncodeJobRequest(DecodeOk(Body::Full().str())),
            R"({"name":"train-llm.v2_a","class":"lp","replicas":{"min":4,"max":16,"step":4},"gpus":1,"gpu_milli":500,)"
            R"("cpu_milli":8000,"memory_mib":65536,"priority":700,"preemptible":true,)"
            R"("models":["A100-SXM4-80GB","H100"],"plane":"data","required_level":"asw","preferred_level":"pod",)"
            R"("required_max_wait_s":3600,"duration_s":7200,"checkpoint_interval_s":600,"checkpoint_on_notice_s":45,)"
            R"("restart_cost_s":90,"usable_step":8,)"
            R"("labels":{"team":"nlp","ticket":"ML-42"},"command":["python3","train.py","--steps","100"],)"
            R"("env":{"LR":"0.1","NCCL_DEBUG":"INFO"},"workdir":"/srv/train","checkpoint_signal":"SIGUSR1",)"
            R"("hooks":{"standby_enter":"curl -X POST localhost:8000/sleep","ready":["test","-f","/tmp/up"]}})");
}

TEST(EncodeJobRequest, LeavesOutOnlyClassModelsAndPlacementWhenTheyAreUnset) {
  // An empty class, models list or placement is not valid input (it means "left out"), so it is
  // left out.
  EXPECT_EQ(EncodeJobRequest(DecodeOk(Body::Minimal().str())),
            R"({"name":"train-llm","replicas":{"min":2,"max":2,"step":1},"gpus":8,"gpu_milli":1000,)"
            R"("cpu_milli":32000,"memory_mib":262144,"priority":100,"preemptible":false,)"
            R"("duration_s":3600,"checkpoint_interval_s":0,"checkpoint_on_notice_s":0,"restart_cost_s":0,)"
            R"("usable_step":0,"labels":{},)"
            R"("checkpoint_signal":"SIGTERM"})");
}

TEST(EncodeJobRequest, DecodingTheEncodingGivesTheRequestBack) {
  for (const std::string& body :
       {Body::Full().str(), Body::Minimal().str(),
        Body::Minimal().Set("labels", R"({"quote\"back\\slash": "é🌊", "e": ""})").str(),
        Body::Minimal().Set("labels", R"({"k\"\\": "\u00e9\ud83c\udf0a", "/": "\/"})").str()}) {
    const JobRequest r = DecodeOk(body);
    const std::string once = EncodeJobRequest(r);
    EXPECT_EQ(DecodeOk(once), r) << once;
    EXPECT_EQ(EncodeJobRequest(DecodeOk(once)), once);  // the encoding is canonical
  }
}

struct BadCase {
  const char* what;  // a sentence: why the body is rejected
  std::string body;
  std::string message;
};

void ExpectRejections(const std::vector<BadCase>& cases) {
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(ErrorOf(c.body), c.message) << "body: " << c.body;
  }
}

TEST(DecodeJobRequest, MalformedJsonIsRejectedWithTheByteWhereParsingStopped) {
  ExpectRejections({
      {"an empty body", "",
       "malformed JSON at byte 1: syntax error while parsing value - unexpected end of input; expected '[', '{', or a "
       "literal"},
      {"a missing value", R"({"name": })",
       "malformed JSON at byte 10: syntax error while parsing value - unexpected '}'; expected '[', '{', or a literal"},
      {"a misspelt literal", R"({"preemptible": tru})",
       "malformed JSON at byte 20: syntax error while parsing value - invalid literal"},
      {"a truncated document (the byte is one past the end)", R"({"name": "a")",
       "malformed JSON at byte 13: syntax error while parsing object - unexpected end of input; expected '}'"},
      {"text after the document", Body::Minimal().str() + " x",
       "malformed JSON at byte " + std::to_string(Body::Minimal().str().size() + 2) +
           ": syntax error while parsing value - invalid literal; expected end of input"},
      {"two documents", "{}{}",
       "malformed JSON at byte 3: syntax error while parsing value - unexpected '{'; expected end of input"},
      {"a trailing comma", R"({"gpus": 1,})",
       "malformed JSON at byte 12: syntax error while parsing object key - unexpected '}'; expected string literal"},
      {"a comment", "// job\n{}", "malformed JSON at byte 1: syntax error while parsing value - invalid literal"},
      {"a single-quoted string", "{'name': 1}",
       "malformed JSON at byte 2: syntax error while parsing object key - invalid literal; expected string literal"},
      {"an unterminated string", R"({"name": "abc)",
       "malformed JSON at byte 14: syntax error while parsing value - invalid string: missing closing quote"},
      {"a number too large for a double", R"({"gpus": 1e400})",
       "malformed JSON at byte 14: number out of range"},
      {"a number with a leading zero", R"({"gpus": 08})",
       "malformed JSON at byte 11: syntax error while parsing object - unexpected number literal; expected '}'"},
      {"a NaN literal", R"({"gpus": NaN})",
       "malformed JSON at byte 10: syntax error while parsing value - invalid literal"},
  });
}

TEST(DecodeJobRequest, BytesThatAreNotValidUtf8OrAreUnescapedControlsAreRejectedWithoutBeingEchoed) {
  ExpectRejections({
      {"an invalid UTF-8 byte in a string", "{\"name\": \"ab\xff\"}",
       "malformed JSON at byte 13: syntax error while parsing value - invalid string: ill-formed UTF-8 byte"},
      {"an overlong UTF-8 encoding", "{\"name\": \"\xc0\xaf\"}",
       "malformed JSON at byte 11: syntax error while parsing value - invalid string: ill-formed UTF-8 byte"},
      {"a UTF-8 sequence cut short", "{\"name\": \"\xe2\x82\"}",
       "malformed JSON at byte 13: syntax error while parsing value - invalid string: ill-formed UTF-8 byte"},
      {"a lone surrogate escape", R"({"name": "\udc00"})",
       "malformed JSON at byte 16: syntax error while parsing value - invalid string: surrogate U+DC00..U+DFFF must "
       "follow U+D800..U+DBFF"},
      {"a high byte outside any string", "{\"name\": \xe9}",
       "malformed JSON at byte 10: syntax error while parsing value - invalid literal"},
      {"a NUL byte inside a string", std::string("{\"name\": \"a\0b\"}", 15), "malformed JSON at byte 12: a NUL byte"},
      {"a NUL byte between tokens", std::string("{\0}", 3), "malformed JSON at byte 2: a NUL byte"},
      // nlohmann's lexer alone would take this NUL for the end of the input and accept the body.
      {"a NUL byte after a valid document", Body::Minimal().str() + std::string("\0garbage", 8),
       "malformed JSON at byte " + std::to_string(Body::Minimal().str().size() + 1) + ": a NUL byte"},
      {"a raw newline inside a string", "{\"name\": \"a\nb\"}",
       "malformed JSON at byte 12: syntax error while parsing value - invalid string: control character U+000A (LF) "
       "must be escaped to \\u000A or \\n"},
  });
}

TEST(DecodeJobRequest, NestingDeeperThan32LevelsIsRejectedBeforeParsing) {
  const std::string deep32 = Body::Minimal().Set("labels", std::string(31, '[') + std::string(31, ']')).str();
  EXPECT_EQ(ErrorOf(deep32), "field 'labels': expected an object");  // parsed, then validated
  const std::string deep33 = R"({"labels": )" + std::string(32, '[') + std::string(32, ']') + "}";
  EXPECT_EQ(ErrorOf(deep33), "malformed JSON at byte 43: nested deeper than 32 levels");
  EXPECT_EQ(ErrorOf(std::string(100'000, '[')), "malformed JSON at byte 33: nested deeper than 32 levels");
  std::string objects;
  for (int i = 0; i < 100'000; ++i) objects += R"({"a":)";
  EXPECT_EQ(ErrorOf(objects), "malformed JSON at byte 161: nested deeper than 32 levels");
  // Brackets inside strings, escaped quotes included, are not nesting.
  const JobRequest r = DecodeOk(
      Body::Minimal().Set("labels", "{\"k\": \"" + std::string(100, '[') + "\\\"" + std::string(20, '{') + "\"}").str());
  EXPECT_EQ(r.labels.at("k").size(), 121u);
}

TEST(DecodeJobRequest, TheTopLevelMustBeAnObject) {
  ExpectRejections({
      {"an array", "[1, 2]", "expected a JSON object at the top level, not an array"},
      {"a string", R"("job")", "expected a JSON object at the top level, not a string"},
      {"a number", "42", "expected a JSON object at the top level, not a number"},
      {"null", "null", "expected a JSON object at the top level, not null"},
      {"a boolean", "true", "expected a JSON object at the top level, not a boolean"},
  });
}

TEST(DecodeJobRequest, DuplicateKeysAreRejectedAtAnyDepth) {
  ExpectRejections({
      {"a repeated top-level key", Body::Minimal().str().insert(1, R"("gpus": 1, )"), "field 'gpus': duplicate key"},
      {"a repeated key inside replicas", Body::Minimal().Set("replicas", R"({"min": 1, "min": 2})").str(),
       "field 'replicas.min': duplicate key"},
      {"a repeated label", Body::Minimal().Set("labels", R"({"a": "x", "a": "x"})").str(),
       "field 'labels.a': duplicate key"},
      {"keys equal once unescaped", Body::Minimal().Set("labels", R"({"a": "x", "\u0061": "x"})").str(),
       "field 'labels.a': duplicate key"},
      {"a repeated key in an object inside an array", R"({"colour": [{}, {"x": 1, "x": 2}]})",
       "field 'colour[1].x': duplicate key"},
  });
}

TEST(DecodeJobRequest, UnknownFieldsAreRejectedSoThatAMisspeltFieldIsNeverDropped) {
  ExpectRejections({
      {"an unknown top-level field", Body::Minimal().Set("colour", R"("blue")").str(), "field 'colour': unknown field"},
      {"a misspelt field", Body::Minimal().Set("preemtible", "true").str(), "field 'preemtible': unknown field"},
      {"an unknown field inside replicas", Body::Minimal().Set("replicas", R"({"min": 1, "colour": 2})").str(),
       "field 'replicas.colour': unknown field"},
      {"field names are case-sensitive", Body::Minimal().Set("GPUs", "1").str(), "field 'GPUs': unknown field"},
      {"an unknown key is shown escaped", Body::Minimal().Set("it's\\n\\u00e9", "1").str(),
       "field 'it\\'s\\x0a\\xc3\\xa9': unknown field"},
      {"unknown fields are found before missing ones", R"({"zz": 1})", "field 'zz': unknown field"},
  });
}

TEST(DecodeJobRequest, OnlyTheNameAndAReplicasObjectsMinAreRequired) {
  ExpectRejections({
      {"no name", Body::Minimal().Drop("name").str(), "field 'name': missing"},
      {"no replicas.min", Body::Minimal().Set("replicas", R"({"max": 2})").str(), "field 'replicas.min': missing"},
      {"an empty object", "{}", "field 'name': missing"},
  });
}

TEST(DecodeJobRequest, ANameIs1To128CharactersOfLettersDigitsDotUnderscoreAndDash) {
  ExpectRejections({
      {"an empty name", Body::Minimal().Set("name", R"("")").str(), "field 'name': empty"},
      {"a name of 129 characters", Body::Minimal().Set("name", "\"" + std::string(129, 'n') + "\"").str(),
       "field 'name': 129 characters, more than 128"},
      {"a space in the name", Body::Minimal().Set("name", R"("my job")").str(),
       "field 'name': 'my job': character 3 is not one of [A-Za-z0-9._-]"},
      {"a slash in the name", Body::Minimal().Set("name", R"("a/b")").str(),
       "field 'name': 'a/b': character 2 is not one of [A-Za-z0-9._-]"},
      {"a non-ASCII name", Body::Minimal().Set("name", R"("caf\u00e9")").str(),
       "field 'name': 'caf\\xc3\\xa9': character 4 is not one of [A-Za-z0-9._-]"},
      {"a control character in the name", Body::Minimal().Set("name", R"("a\nb")").str(),
       "field 'name': character 2 is a control character"},
      {"a number as the name", Body::Minimal().Set("name", "7").str(), "field 'name': expected a string"},
  });
}

TEST(DecodeJobRequest, ReplicasAreMinMaxAndStepWithinTheirRanges) {
  auto with = [](const std::string& replicas) { return Body::Minimal().Set("replicas", replicas).str(); };
  ExpectRejections({
      {"replicas as a string", with(R"("4")"), "field 'replicas': expected an integer or an object {min, max, step}"},
      {"replicas as a zero", with("0"), "field 'replicas': 0 is below 1"},
      {"min below 1", with(R"({"min": 0})"), "field 'replicas.min': 0 is below 1"},
      {"min above 100000", with(R"({"min": 100001})"), "field 'replicas.min': 100001 is above 100000"},
      {"max below min", with(R"({"min": 5, "max": 3})"), "field 'replicas.max': 3 is below 'replicas.min' 5"},
      {"max above 100000", with(R"({"min": 5, "max": 100001})"), "field 'replicas.max': 100001 is above 100000"},
      {"max below 1", with(R"({"min": 5, "max": 0})"), "field 'replicas.max': 0 is below 1"},
      {"step below 1", with(R"({"min": 2, "step": 0})"), "field 'replicas.step': 0 is below 1"},
      {"step above max", with(R"({"min": 2, "max": 4, "step": 8})"), "field 'replicas.step': 8 is above 'replicas.max' 4"},
      {"step above the default max", with(R"({"min": 2, "step": 3})"),
       "field 'replicas.step': 3 is above 'replicas.max' 2"},
      {"min as a string", with(R"({"min": "2"})"), "field 'replicas.min': expected an integer"},
      {"min as a fraction", with(R"({"min": 1.5})"), "field 'replicas.min': expected an integer"},
  });
}

TEST(DecodeJobRequest, IntegersMustBeIntegerLiteralsEvenWhenTheValueIsWhole) {
  // The documented choice: a JSON number written with a fraction or an exponent is not an
  // integer, whatever its value — 8.0 and 8e0 are as wrong as 8.5.
  ExpectRejections({
      {"a fraction", Body::Minimal().Set("gpus", "1.5").str(), "field 'gpus': expected an integer"},
      {"a whole number with a fraction part", Body::Minimal().Set("gpus", "8.0").str(),
       "field 'gpus': expected an integer"},
      {"an exponent", Body::Minimal().Set("cpu_milli", "1e3").str(), "field 'cpu_milli': expected an integer"},
      {"a negative zero with a fraction", Body::Minimal().Set("gpus", "-0.0").str(), "field 'gpus': expected an integer"},
      {"a string of digits", Body::Minimal().Set("gpus", R"("8")").str(), "field 'gpus': expected an integer"},
      {"a boolean", Body::Minimal().Set("gpus", "true").str(), "field 'gpus': expected an integer"},
      {"null", Body::Minimal().Set("gpus", "null").str(), "field 'gpus': expected an integer"},
      {"an array", Body::Minimal().Set("gpus", "[8]").str(), "field 'gpus': expected an integer"},
      {"null for an optional field", Body::Minimal().Set("duration_s", "null").str(),
       "field 'duration_s': expected an integer"},
  });
}

TEST(DecodeJobRequest, IntegersBeyond64BitsAreOutOfRangeNotMalformed) {
  ExpectRejections({
      {"the largest unsigned 64-bit value", Body::Minimal().Set("gpus", "18446744073709551615").str(),
       "field 'gpus': 18446744073709551615 is above 16"},
      {"one more than that", Body::Minimal().Set("gpus", "18446744073709551616").str(),
       "field 'gpus': 1.8446744073709552e+19 is above 16"},
      {"a 20-digit integer", Body::Minimal().Set("memory_mib", "99999999999999999999").str(),
       "field 'memory_mib': 1e+20 is above 1000000000"},
      {"the smallest signed 64-bit value", Body::Minimal().Set("gpus", "-9223372036854775808").str(),
       "field 'gpus': -9223372036854775808 is below 0"},
      {"a negative 20-digit integer", Body::Minimal().Set("gpus", "-99999999999999999999").str(),
       "field 'gpus': -1e+20 is below 0"},
      {"a huge exponent that still fits a double", Body::Minimal().Set("gpus", "1e300").str(),
       "field 'gpus': 1e+300 is above 16"},
  });
}

TEST(DecodeJobRequest, GpusAndTheSharedGpuShareAreWithinTheirRanges) {
  ExpectRejections({
      {"more GPUs than a node holds", Body::Minimal().Set("gpus", "17").str(), "field 'gpus': 17 is above 16"},
      {"negative GPUs", Body::Minimal().Set("gpus", "-1").str(), "field 'gpus': -1 is below 0"},
      {"a zero share", Body::Minimal().Set("gpus", "1").Set("gpu_milli", "0").str(), "field 'gpu_milli': 0 is below 1"},
      {"a share above a whole GPU", Body::Minimal().Set("gpus", "1").Set("gpu_milli", "1001").str(),
       "field 'gpu_milli': 1001 is above 1000"},
      {"a share with several GPUs", Body::Minimal().Set("gpus", "2").Set("gpu_milli", "500").str(),
       "field 'gpu_milli': 500 needs 'gpus': 1 (one shared GPU), not 2"},
      {"a share with no GPU", Body::Minimal().Set("gpus", "0").Set("gpu_milli", "500").str(),
       "field 'gpu_milli': 500 needs 'gpus': 1 (one shared GPU), not 0"},
  });
}

TEST(DecodeJobRequest, CpuMemoryPriorityAndTimesAreWithinTheirRanges) {
  ExpectRejections({
      {"negative CPU", Body::Minimal().Set("cpu_milli", "-1").str(), "field 'cpu_milli': -1 is below 0"},
      {"CPU above 10^9", Body::Minimal().Set("cpu_milli", "1000000001").str(),
       "field 'cpu_milli': 1000000001 is above 1000000000"},
      {"negative memory", Body::Minimal().Set("memory_mib", "-5").str(), "field 'memory_mib': -5 is below 0"},
      {"memory above 10^9", Body::Minimal().Set("memory_mib", "1000000001").str(),
       "field 'memory_mib': 1000000001 is above 1000000000"},
      {"priority above 1000", Body::Minimal().Set("priority", "1001").str(), "field 'priority': 1001 is above 1000"},
      {"negative priority", Body::Minimal().Set("priority", "-1").str(), "field 'priority': -1 is below 0"},
      {"preemptible as a string", Body::Minimal().Set("preemptible", R"("yes")").str(),
       "field 'preemptible': expected a boolean"},
      {"preemptible as a number", Body::Minimal().Set("preemptible", "1").str(),
       "field 'preemptible': expected a boolean"},
      {"a duration above 10^12", Body::Minimal().Set("duration_s", "1000000000001").str(),
       "field 'duration_s': 1000000000001 is above 1000000000000"},
      {"a negative duration", Body::Minimal().Set("duration_s", "-1").str(), "field 'duration_s': -1 is below 0"},
      {"a checkpoint interval above 10^12", Body::Minimal().Set("checkpoint_interval_s", "1000000000001").str(),
       "field 'checkpoint_interval_s': 1000000000001 is above 1000000000000"},
      {"a negative restart cost", Body::Minimal().Set("restart_cost_s", "-1").str(), "field 'restart_cost_s': -1 is below 0"},
      {"a negative max wait for the required level",
       Body::Minimal().Set("plane", R"("data")").Set("required_level", R"("asw")").Set("required_max_wait_s", "-5").str(),
       "field 'required_max_wait_s': -5 is below 0"},
      {"a max wait for the required level as a string",
       Body::Minimal().Set("plane", R"("data")").Set("required_level", R"("asw")").Set("required_max_wait_s", R"("1h")").str(),
       "field 'required_max_wait_s': expected an integer"},
      {"a usable step above 100000", Body::Minimal().Set("usable_step", "100001").str(),
       "field 'usable_step': 100001 is above 100000"},
      {"cores above 10^6", Body::Minimal().Drop("cpu_milli").Set("cpu_cores", "1000001").str(),
       "field 'cpu_cores': 1000001 is above 1000000"},
      {"CPU in cores and milli-cores", Body::Minimal().Set("cpu_cores", "2").str(),
       "field 'cpu_milli': give 'cpu_cores' or 'cpu_milli', not both"},
      {"memory in GiB and MiB", Body::Minimal().Set("memory_gib", "2").str(),
       "field 'memory_mib': give 'memory_gib' or 'memory_mib', not both"},
      {"a negative checkpoint interval", Body::Minimal().Set("checkpoint_interval_s", "-3").str(),
       "field 'checkpoint_interval_s': -3 is below 0"},
      {"a negative checkpoint on notice", Body::Minimal().Set("checkpoint_on_notice_s", "-1").str(),
       "field 'checkpoint_on_notice_s': -1 is below 0"},
      {"a checkpoint on notice above 10^12", Body::Minimal().Set("checkpoint_on_notice_s", "1000000000001").str(),
       "field 'checkpoint_on_notice_s': 1000000000001 is above 1000000000000"},
      {"a checkpoint on notice as a string", Body::Minimal().Set("checkpoint_on_notice_s", R"("30")").str(),
       "field 'checkpoint_on_notice_s': expected an integer"},
  });
}

TEST(DecodeJobRequest, AWalltimeIsSecondsFrom0To10To12AndTheEncodingWritesItOnlyWhenSet) {
  EXPECT_EQ(DecodeOk(Body::Minimal().Set("walltime_s", "5400").str()).walltime_s, 5400);
  EXPECT_EQ(DecodeOk(Body::Minimal().Set("walltime_s", "0").str()).walltime_s, 0);
  EXPECT_EQ(DecodeOk(Body::Minimal().Set("walltime_s", "1000000000000").str()).walltime_s, 1000000000000);
  const std::string once = EncodeJobRequest(DecodeOk(Body::Minimal().Set("walltime_s", "5400").str()));
  EXPECT_NE(once.find(R"("restart_cost_s":0,"walltime_s":5400,"usable_step":0)"), std::string::npos) << once;
  EXPECT_EQ(DecodeOk(once).walltime_s, 5400);
  EXPECT_EQ(EncodeJobRequest(DecodeOk(Body::Minimal().Set("walltime_s", "0").str())).find("walltime_s"), std::string::npos);
  ExpectRejections({
      {"a negative walltime", Body::Minimal().Set("walltime_s", "-1").str(), "field 'walltime_s': -1 is below 0"},
      {"a walltime above 10^12", Body::Minimal().Set("walltime_s", "1000000000001").str(),
       "field 'walltime_s': 1000000000001 is above 1000000000000"},
      {"a walltime as a string", Body::Minimal().Set("walltime_s", R"("1h")").str(),
       "field 'walltime_s': expected an integer"},
      {"a walltime with a fraction", Body::Minimal().Set("walltime_s", "60.5").str(),
       "field 'walltime_s': expected an integer"},
  });
}

TEST(DecodeJobRequest, ModelsAre1To16DistinctNamesOf1To64Characters) {
  std::string seventeen = "[";
  for (int i = 0; i < 17; ++i) seventeen += (i ? ", \"m" : "\"m") + std::to_string(i) + "\"";
  seventeen += "]";
  ExpectRejections({
      {"models as a number", Body::Minimal().Set("models", "7").str(), "field 'models': expected a string or an array"},
      {"an empty model name alone", Body::Minimal().Set("models", R"("")").str(), "field 'models': empty"},
      {"an empty list", Body::Minimal().Set("models", "[]").str(),
       "field 'models': empty (leave it out for any model)"},
      {"17 models", Body::Minimal().Set("models", seventeen).str(), "field 'models': 17 entries, more than 16"},
      {"a model that is not a string", Body::Minimal().Set("models", R"(["A100", 7])").str(),
       "field 'models[1]': expected a string"},
      {"an empty model name", Body::Minimal().Set("models", R"(["A100", ""])").str(), "field 'models[1]': empty"},
      {"a model name of 65 characters", Body::Minimal().Set("models", "[\"" + std::string(65, 'm') + "\"]").str(),
       "field 'models[0]': 65 characters, more than 64"},
      {"a repeated model", Body::Minimal().Set("models", R"(["A100", "H100", "A100"])").str(),
       "field 'models[2]': 'A100' repeats models[0]"},
  });
}

TEST(DecodeJobRequest, PlaneAndLevelsAreShortStringsAndALevelNeedsItsPlane) {
  ExpectRejections({
      {"a level alone", Body::Minimal().Set("required_level", R"("asw")").str(),
       "field 'plane': missing (required with 'required_level')"},
      {"an empty plane", Body::Minimal().Set("plane", R"("")").Set("required_level", R"("asw")").str(),
       "field 'plane': empty"},
      {"a plane of 65 characters",
       Body::Minimal().Set("plane", "\"" + std::string(65, 'p') + "\"").Set("required_level", R"("asw")").str(),
       "field 'plane': 65 characters, more than 64"},
      {"a level that is not a string", Body::Minimal().Set("plane", R"("data")").Set("required_level", "2").str(),
       "field 'required_level': expected a string"},
      {"a control character in the level",
       Body::Minimal().Set("plane", R"("data")").Set("required_level", R"("as\tw")").str(),
       "field 'required_level': character 3 is a control character"},
  });
}

TEST(DecodeJobRequest, LabelsAreAtMost32StringPairsOfAtMost128Characters) {
  std::string many = "{";
  for (int i = 0; i < 33; ++i) many += (i ? ", \"k" : "\"k") + std::to_string(i) + "\": \"v\"";
  many += "}";
  ExpectRejections({
      {"labels as an array", Body::Minimal().Set("labels", R"(["a"])").str(), "field 'labels': expected an object"},
      {"33 labels", Body::Minimal().Set("labels", many).str(), "field 'labels': 33 entries, more than 32"},
      {"a value that is not a string", Body::Minimal().Set("labels", R"({"team": 1})").str(),
       "field 'labels.team': expected a string"},
      {"a value of 129 characters", Body::Minimal().Set("labels", "{\"team\": \"" + std::string(129, 'v') + "\"}").str(),
       "field 'labels.team': 129 characters, more than 128"},
      {"an empty key", Body::Minimal().Set("labels", R"({"": "x"})").str(), "field 'labels': key '': empty"},
      {"a key of 129 characters", Body::Minimal().Set("labels", "{\"" + std::string(129, 'k') + "\": \"v\"}").str(),
       "field 'labels': key '" + std::string(40, 'k') + "...': 129 characters, more than 128"},
      {"a control character in a value", Body::Minimal().Set("labels", R"({"team": "a\u0000b"})").str(),
       "field 'labels.team': character 2 is a control character"},
      {"a control character in a key", Body::Minimal().Set("labels", R"({"te\u007fam": "x"})").str(),
       "field 'labels': key 'te\\x7fam': character 3 is a control character"},
  });
  EXPECT_EQ(DecodeOk(Body::Minimal().Set("labels", R"({"note": ""})").str()).labels.at("note"), "");
}

TEST(DecodeJobRequest, FieldsAreCheckedInTheHeadersOrderAndTheFirstErrorIsReported) {
  EXPECT_EQ(ErrorOf(Body::Minimal().Set("name", "1").Set("gpus", "99").str()), "field 'name': expected a string");
  EXPECT_EQ(ErrorOf(Body::Minimal().Set("gpus", "99").Set("priority", "-1").str()), "field 'gpus': 99 is above 16");
}

// --- Fuzz -------------------------------------------------------------------------------------

// Fragments that steer random edits towards the parser's and the validator's edge cases.
const std::vector<std::string>& Fragments() {
  static const std::vector<std::string> f = {
      "{", "}", "[", "]", "\"", ":", ",", "\\", "\\u", "\\ud800", "\\u0000", "0", "1", "-", "-0", "1e400",
      "-1e400", "1.5", "1e3", "18446744073709551616", "99999999999999999999", "null", "true", "false", "nul",
      "[[[[[[[[", "]]]]", "{\"a\":", "\"gpus\":", "\"labels\":{", "\"models\":[", "\"replicas\":{\"min\":",
      "\xff", "\xc3", "\xe2\x82", "\xed\xa0\x80", std::string(1, '\0'), "\n", "\t", " ", "\xEF\xBB\xBF",
      "\"gpu_milli\":500,", "\"plane\":\"p\",\"required_level\":\"l\",", "1e-400", "0.0", "-0.0", "9223372036854775807",
  };
  return f;
}

std::string RandomBytes(Rng& rng) {
  static const std::string kJsonish = "{}[]\":,\\-+.0123456789eEtrufalsn \t\n";
  std::string s(rng.Uniform(64), '\0');
  for (char& c : s) {
    c = rng.Uniform(2) == 0 ? kJsonish[rng.Uniform(kJsonish.size())] : static_cast<char>(rng.Uniform(256));
  }
  return s;
}

// One to four random edits of a valid body: byte flips, deletions, truncations and insertions of
// fragments.
std::string Mutate(Rng& rng, std::string s) {
  const int edits = 1 + static_cast<int>(rng.Uniform(4));
  for (int e = 0; e < edits; ++e) {
    const size_t at = rng.Uniform(s.size() + 1);
    switch (rng.Uniform(5)) {
      case 0:
        if (at < s.size()) s[at] = static_cast<char>(rng.Uniform(256));
        break;
      case 1:
        s.erase(at, rng.Uniform(8));
        break;
      case 2:
        s.resize(at);
        break;
      default: {
        const auto& f = Fragments();
        s.insert(at, f[rng.Uniform(f.size())]);
        break;
      }
    }
  }
  return s;
}

// A structurally valid object whose members are drawn from the real fields with values that are
// often, but not always, acceptable: exercises the validator far more than random bytes do.
std::string RandomRequest(Rng& rng) {
  static const std::vector<std::string> kIntegers = {"0", "1", "2", "8", "16", "17", "-1", "500", "1000", "1001",
                                                     "100000", "1000000000", "1.5", "1e3", "-0", "\"3\"", "null"};
  static const std::vector<std::string> kStrings = {"\"a\"", "\"\"", "\"job-1\"", "\"bad name\"", "\"\\u00e9\"",
                                                    "\"\\n\"", "7", "[]", "{}", "\"" + std::string(65, 'x') + "\""};
  auto pick = [&](const std::vector<std::string>& v) { return v[rng.Uniform(v.size())]; };
  Body b = Body::Minimal();
  if (rng.Uniform(3) == 0) b = Body::Full();
  const int changes = static_cast<int>(rng.Uniform(4));
  for (int i = 0; i < changes; ++i) {
    switch (rng.Uniform(12)) {
      case 0: b.Set("name", pick(kStrings)); break;
      case 1:
        b.Set("replicas", "{\"min\": " + pick(kIntegers) + ", \"max\": " + pick(kIntegers) + ", \"step\": " +
                              pick(kIntegers) + "}");
        break;
      case 2: b.Set("gpus", pick(kIntegers)); break;
      case 3: b.Set("gpu_milli", pick(kIntegers)); break;
      case 4: b.Set("priority", pick(kIntegers)); break;
      case 5: b.Set("preemptible", rng.Uniform(2) ? "false" : pick(kIntegers)); break;
      case 6: b.Set("models", "[" + pick(kStrings) + (rng.Uniform(2) ? ", " + pick(kStrings) : "") + "]"); break;
      case 7: b.Set("plane", pick(kStrings)); break;
      case 8: b.Set("required_level", pick(kStrings)); break;
      case 9: b.Set("labels", "{" + pick(kStrings) + ": " + pick(kStrings) + "}"); break;
      case 10: b.Set("duration_s", pick(kIntegers)); break;
      default: b.Drop(rng.Uniform(2) ? "gpu_milli" : "labels"); break;
    }
  }
  return b.str();
}

TEST(DecodeJobRequest, SeededRandomInputsNeverCrashAndAlwaysGiveAOneLineReasonOrARequestThatRoundTrips) {
  Rng rng(20240607);
  const std::vector<std::string> seeds = {Body::Full().str(), Body::Minimal().str(),
                                          EncodeJobRequest(DecodeOk(Body::Full().str()))};
  constexpr int kInputs = 200'000;
  int accepted = 0, rejected = 0;
  for (int i = 0; i < kInputs; ++i) {
    std::string input;
    switch (rng.Uniform(10)) {
      case 0: input = RandomBytes(rng); break;
      case 1: input = RandomRequest(rng); break;
      case 2: input = Mutate(rng, RandomRequest(rng)); break;
      case 3:
        // Deep nesting, rarely (each input is ~100 KB).
        if (rng.Uniform(200) == 0) {
          input = std::string(100'000, rng.Uniform(2) ? '[' : '{');
          break;
        }
        [[fallthrough]];
      default: input = Mutate(rng, seeds[rng.Uniform(seeds.size())]); break;
    }
    StatusOr<JobRequest> r = DecodeJobRequest(input);
    if (r.ok()) {
      ++accepted;
      const std::string encoded = EncodeJobRequest(*r);
      StatusOr<JobRequest> again = DecodeJobRequest(encoded);
      ASSERT_TRUE(again.ok()) << again.status().message() << "\ninput: " << input;
      ASSERT_EQ(*again, *r) << "input: " << input;
    } else {
      ++rejected;
      ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument) << "input: " << input;
      ASSERT_FALSE(r.status().message().empty()) << "input: " << input;
      ASSERT_TRUE(IsOnePrintableLine(r.status().message())) << r.status().message();
    }
  }
  RecordProperty("accepted", accepted);
  RecordProperty("rejected", rejected);
  // Both outcomes are exercised in earnest.
  EXPECT_GT(accepted, kInputs / 40);
  EXPECT_GT(rejected, kInputs / 2);
}

TEST(DecodeJobRequest, AWorkloadThatCannotRunIsRejectedNamingItsField) {
  const std::string big(65'537, 'x');
  ExpectRejections({
      {"an empty command", Body::Minimal().Set("command", R"("")").str(), "field 'command': empty"},
      {"an empty argv", Body::Minimal().Set("command", "[]").str(), "field 'command': empty"},
      {"an empty program", Body::Minimal().Set("command", R"(["", "x"])").str(), "field 'command[0]': empty"},
      {"a command that is a number", Body::Minimal().Set("command", "7").str(),
       "field 'command': expected an array of strings (argv) or a string (a shell command)"},
      {"an argument that is not a string", Body::Minimal().Set("command", R"(["echo", 1])").str(),
       "field 'command[1]': expected a string"},
      {"a NUL in an argument", Body::Minimal().Set("command", R"(["echo", "a\u0000b"])").str(),
       "field 'command[1]': holds a NUL character"},
      {"a command over 64 KiB", Body::Minimal().Set("command", "\"" + big + "\"").str(),
       "field 'command': 65537 bytes, more than 65536"},
      {"an env entry that is not NAME=VALUE", Body::Minimal().Set("env", R"(["A=1", "JUSTNAME"])").str(),
       "field 'env[1]': expected NAME=VALUE, not 'JUSTNAME'"},
      {"an env name that is not an identifier", Body::Minimal().Set("env", R"(["1A=x"])").str(),
       "field 'env[0]': name '1A' is not [A-Za-z_][A-Za-z0-9_]*"},
      {"an env name the agent sets", Body::Minimal().Set("env", R"({"ESTUARY_REPLICA": "3"})").str(),
       "field 'env': name 'ESTUARY_REPLICA' is set by the agent"},
      {"the GPUs the agent grants", Body::Minimal().Set("env", R"({"CUDA_VISIBLE_DEVICES": "0"})").str(),
       "field 'env': name 'CUDA_VISIBLE_DEVICES' is set by the agent"},
      {"an env name given twice", Body::Minimal().Set("env", R"(["A=1", "A=2"])").str(), "field 'env[1]': 'A' given twice"},
      {"an env value that is not a string", Body::Minimal().Set("env", R"({"A": 1})").str(),
       "field 'env.A': expected a string"},
      {"env as a string", Body::Minimal().Set("env", R"("A=1")").str(),
       "field 'env': expected an object NAME -> value or an array of \"NAME=VALUE\" strings"},
      {"a relative workdir", Body::Minimal().Set("workdir", R"("data/run")").str(),
       "field 'workdir': 'data/run' is not an absolute path"},
      {"an empty workdir", Body::Minimal().Set("workdir", R"("")").str(), "field 'workdir': empty"},
      {"an unknown signal", Body::Minimal().Set("checkpoint_signal", R"("SIGNOPE")").str(),
       "field 'checkpoint_signal': unknown signal 'SIGNOPE'"},
      {"a signal number out of range", Body::Minimal().Set("checkpoint_signal", R"("99")").str(),
       "field 'checkpoint_signal': unknown signal '99'"},
      {"an unknown hook", Body::Minimal().Set("hooks", R"({"on_start": "x"})").str(), "field 'hooks.on_start': unknown field"},
      {"an empty hook", Body::Minimal().Set("hooks", R"({"ready": []})").str(), "field 'hooks.ready': empty"},
      {"hooks as a list", Body::Minimal().Set("hooks", R"(["x"])").str(),
       "field 'hooks': expected an object {standby_enter, standby_leave, ready}"},
  });
}

}  // namespace
}  // namespace estuary
