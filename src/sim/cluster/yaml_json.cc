#include "sim/cluster/yaml_json.h"

#include <charconv>
#include <cstdlib>
#include <regex>
#include <utility>

namespace estuary {
namespace {

using Json = nlohmann::json;

constexpr int kMaxDepth = 32;
constexpr int64_t kMaxNodes = 100'000;

int LineOfMark(const YAML::Node& n) { return n.Mark().line >= 0 ? n.Mark().line + 1 : 0; }

std::string Member(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// A plain scalar typed by the core schema.
Json PlainScalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return Json(nullptr);
  if (s == "true" || s == "True" || s == "TRUE") return Json(true);
  if (s == "false" || s == "False" || s == "FALSE") return Json(false);
  static const std::regex kInteger("[-+]?[0-9]+");
  static const std::regex kNumber("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  if (std::regex_match(s, kInteger)) {
    const char* first = s.data() + (s[0] == '+' ? 1 : 0);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(first, s.data() + s.size(), v);
    if (ec == std::errc() && end == s.data() + s.size()) return Json(v);
    return Json(std::strtod(s.c_str(), nullptr));  // beyond 64 bits: a number out of range
  }
  if (std::regex_match(s, kNumber)) return Json(std::strtod(s.c_str(), nullptr));
  return Json(s);
}

class Converter {
 public:
  explicit Converter(YamlJson& out) : out_(out) {}

  StatusOr<Json> Convert(const YAML::Node& n, const std::string& path, int depth) {
    auto fail = [&](const std::string& why) {
      return InvalidArgument("field '" + (path.empty() ? std::string("(top)") : path) + "': " + why);
    };
    if (depth > kMaxDepth) return fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    if (++nodes_ > kMaxNodes) return fail("more than " + std::to_string(kMaxNodes) + " values");
    out_.lines.emplace(path, LineOfMark(n));
    switch (n.Type()) {
      case YAML::NodeType::Null:
        return Json(nullptr);
      case YAML::NodeType::Scalar:
        return n.Tag() == "?" ? PlainScalar(n.Scalar()) : Json(n.Scalar());
      case YAML::NodeType::Sequence: {
        Json a = Json::array();
        for (size_t i = 0; i < n.size(); ++i) {
          StatusOr<Json> e = Convert(n[i], path + "[" + std::to_string(i) + "]", depth + 1);
          if (!e.ok()) return e.status();
          a.push_back(std::move(*e));
        }
        return a;
      }
      case YAML::NodeType::Map: {
        Json o = Json::object();
        for (auto it = n.begin(); it != n.end(); ++it) {
          if (!it->first.IsScalar()) return fail("a key is not a string");
          const std::string key = it->first.Scalar();
          const std::string at = Member(path, key);
          if (o.contains(key)) {
            out_.lines[at] = LineOfMark(it->first);
            return InvalidArgument("field '" + at + "': duplicate key");
          }
          StatusOr<Json> v = Convert(it->second, at, depth + 1);
          if (!v.ok()) return v.status();
          // A container's messages name its key's line (a block value starts on the next one).
          if (!it->second.IsScalar()) out_.lines[at] = LineOfMark(it->first);
          o[key] = std::move(*v);
        }
        return o;
      }
      default:
        return fail("undefined value");
    }
  }

 private:
  YamlJson& out_;
  int64_t nodes_ = 0;
};

}  // namespace

int YamlJson::LineOf(const std::string& path) const {
  std::string p = path;
  while (true) {
    if (auto it = lines.find(p); it != lines.end()) return it->second;
    if (p.empty()) return 0;
    const size_t cut = p.find_last_of(".[");
    p = cut == std::string::npos ? "" : p.substr(0, cut);
  }
}

StatusOr<YamlJson> YamlToJson(const YAML::Node& n) {
  YamlJson out;
  Converter c(out);
  StatusOr<Json> v = c.Convert(n, "", 0);
  if (!v.ok()) return v.status();
  out.value = std::move(*v);
  return out;
}

}  // namespace estuary
