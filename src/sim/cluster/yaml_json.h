// A YAML value as the JSON value the one job schema reads (api/job_json.h), with the line of every
// field, so that a scenario's job is validated by the same code, with the same messages, as the
// service's JSON.
//
// Scalars are typed by the YAML 1.2 core schema: a plain (unquoted) scalar is null (`~`, `null`,
// `Null`, `NULL` or nothing), a boolean (`true`/`True`/`TRUE`/`false`/`False`/`FALSE`), an
// integer ([-+]?[0-9]+; one beyond 64 bits becomes a number that is out of range), a number with a
// fraction or an exponent, or else a string; a quoted or tagged scalar is a string. Mapping keys
// must be scalars and are not repeated. Aliases are expanded; a value nested deeper than 32 levels
// or of more than 100,000 nodes is rejected.
// Thread-safety: free functions without shared state.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace estuary {

struct YamlJson {
  nlohmann::json value;
  // 1-based line of each field and array element, by path relative to the converted node
  // ("replicas.min", "models[1]", "standby[0].to_s"; "" is the node itself).
  std::map<std::string, int> lines;

  // The line of `path`, else of its nearest enclosing field, else of the node.
  int LineOf(const std::string& path) const;
};

// `n` converted. InvalidArgument "field '<path>': <why>" for a repeated or non-scalar key or a
// value nested too deep or too large (see the file comment).
StatusOr<YamlJson> YamlToJson(const YAML::Node& n);

}  // namespace estuary
