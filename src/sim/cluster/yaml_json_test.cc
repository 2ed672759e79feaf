// YAML as the JSON of the one job schema: core-schema scalar types, quoted scalars as strings,
// the line of every field, and the rejections (repeated keys, depth, size).
#include "sim/cluster/yaml_json.h"

#include <gtest/gtest.h>

#include <string>

namespace estuary {
namespace {

using Json = nlohmann::json;

YamlJson Ok(const std::string& text) {
  StatusOr<YamlJson> r = YamlToJson(YAML::Load(text));
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : YamlJson{};
}

std::string Error(const std::string& text) {
  StatusOr<YamlJson> r = YamlToJson(YAML::Load(text));
  EXPECT_FALSE(r.ok()) << text;
  return r.ok() ? "" : r.status().message();
}

TEST(YamlToJson, PlainScalarsAreTypedByTheCoreSchemaAndQuotedOnesAreStrings) {
  const Json v = Ok("{i: 8, neg: -3, plus: +4, f: 1.5, e: 1e3, t: true, T: True, n: null, tilde: ~, empty: ,"
                    " s: H800, q: '8', dq: \"true\", yes: yes, hex: 0x10}")
                     .value;
  EXPECT_EQ(v["i"], Json(8));
  EXPECT_TRUE(v["i"].is_number_integer());
  EXPECT_EQ(v["neg"], Json(-3));
  EXPECT_EQ(v["plus"], Json(4));
  EXPECT_TRUE(v["f"].is_number_float());
  EXPECT_TRUE(v["e"].is_number_float());  // an exponent: not an integer literal, as in JSON
  EXPECT_EQ(v["t"], Json(true));
  EXPECT_EQ(v["T"], Json(true));
  EXPECT_TRUE(v["n"].is_null());
  EXPECT_TRUE(v["tilde"].is_null());
  EXPECT_TRUE(v["empty"].is_null());
  EXPECT_EQ(v["s"], Json("H800"));
  EXPECT_EQ(v["q"], Json("8"));
  EXPECT_EQ(v["dq"], Json("true"));
  EXPECT_EQ(v["yes"], Json("yes"));  // YAML 1.1's booleans are strings in the core schema
  EXPECT_EQ(v["hex"], Json("0x10"));
}

TEST(YamlToJson, AnIntegerBeyond64BitsBecomesANumberOutOfRange) {
  const Json v = Ok("{big: 99999999999999999999}").value;
  EXPECT_TRUE(v["big"].is_number_float());
  EXPECT_GT(v["big"].get<double>(), 9.2e18);
}

TEST(YamlToJson, SequencesAndMappingsNestAndEveryFieldHasItsLine) {
  const YamlJson y = Ok("name: j\nreplicas:\n  min: 2\n  max: 4\nmodels: [A100,\n  H100]\nstandby:\n  - {from_s: 0, to_s: 5}\n");
  EXPECT_EQ(y.value["replicas"], (Json{{"min", 2}, {"max", 4}}));
  EXPECT_EQ(y.value["models"], (Json{"A100", "H100"}));
  EXPECT_EQ(y.LineOf("name"), 1);
  EXPECT_EQ(y.LineOf("replicas"), 2);  // a block value: its key's line
  EXPECT_EQ(y.LineOf("replicas.max"), 4);
  EXPECT_EQ(y.LineOf("models[1]"), 6);
  EXPECT_EQ(y.LineOf("standby[0].to_s"), 8);
  EXPECT_EQ(y.LineOf("replicas.step"), 2);  // absent: its enclosing field's line
  EXPECT_EQ(y.LineOf("colour"), 1);          // absent at the top: the node's line
}

TEST(YamlToJson, RepeatedKeysNonScalarKeysDepthAndSizeAreRejected) {
  EXPECT_EQ(Error("{gpus: 1, gpus: 2}"), "field 'gpus': duplicate key");
  EXPECT_EQ(Error("{replicas: {min: 1, min: 2}}"), "field 'replicas.min': duplicate key");
  EXPECT_EQ(Error("{[a]: 1}"), "field '(top)': a key is not a string");
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "[";
  for (int i = 0; i < 40; ++i) deep += "]";
  EXPECT_EQ(Error(deep), "field '[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]"
                         "[0][0][0][0][0]': nested deeper than 32 levels");
  // Aliases are expanded: a "billion laughs" document stops at the size limit.
  std::string laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'h'; ++c) {
    laughs += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) laughs += std::string(i ? ", *" : "*") + static_cast<char>(c - 1);
    laughs += "]\n";
  }
  EXPECT_NE(Error(laughs).find("more than 100000 values"), std::string::npos);
}

}  // namespace
}  // namespace estuary
