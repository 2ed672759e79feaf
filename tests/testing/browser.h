// Headless-Chromium helpers for tests of report.html: load a page, let its scripts run, read the
// health attributes the page sets on <body> (data-status, data-charts, data-points).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "tests/testing/temp_dir.h"

namespace estuary::testing {

namespace fs = std::filesystem;

inline constexpr char kChromium[] = "/usr/bin/chromium";

inline std::string Decode(const std::string& v) {
  static const std::map<std::string, char> kEntities = {
      {"&amp;", '&'}, {"&quot;", '"'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&#39;", '\''}};
  std::string out;
  for (size_t i = 0; i < v.size();) {
    bool replaced = false;
    if (v[i] == '&') {
      for (const auto& [entity, c] : kEntities) {
        if (v.compare(i, entity.size(), entity) == 0) {
          out += c;
          i += entity.size();
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out += v[i++];
  }
  return out;
}

// Attributes of the first <body ...> tag of a serialised DOM.
inline std::map<std::string, std::string> BodyAttributes(const std::string& dom) {
  std::map<std::string, std::string> attrs;
  size_t i = dom.find("<body");
  if (i == std::string::npos) return attrs;
  i += 5;
  while (i < dom.size()) {
    while (i < dom.size() && std::isspace(static_cast<unsigned char>(dom[i]))) ++i;
    if (i >= dom.size() || dom[i] == '>' || dom[i] == '/') break;
    size_t name_end = i;
    while (name_end < dom.size() && dom[name_end] != '=' && dom[name_end] != '>' &&
           !std::isspace(static_cast<unsigned char>(dom[name_end]))) {
      ++name_end;
    }
    std::string name = dom.substr(i, name_end - i);
    i = name_end;
    std::string value;
    if (i + 1 < dom.size() && dom[i] == '=' && dom[i + 1] == '"') {
      size_t close = dom.find('"', i + 2);
      if (close == std::string::npos) break;
      value = Decode(dom.substr(i + 2, close - i - 2));
      i = close + 1;
    }
    attrs[name] = value;
  }
  return attrs;
}

// Loads `html` in headless Chromium and returns the DOM after the page's scripts ran, or "" with a
// test failure if Chromium could not be run.
inline std::string DumpDom(const TempDir& dir, const fs::path& html) {
  const fs::path profile = dir.path() / "profile";
  const fs::path err = dir.path() / "chromium.stderr";
  const std::string cmd = std::string("timeout 60 ") + kChromium +
                          " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                          " --disable-background-networking --disable-component-update"
                          " --disable-sync --user-data-dir='" + profile.string() +
                          "' --virtual-time-budget=5000 --dump-dom 'file://" + html.string() +
                          "' 2>'" + err.string() + "'";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "popen failed: " << cmd;
    return "";
  }
  std::string dom;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) dom.append(buf, n);
  const int rc = pclose(pipe);
  if (rc != 0 || dom.empty()) {
    std::ifstream in(err);
    std::stringstream stderr_text;
    stderr_text << in.rdbuf();
    ADD_FAILURE() << "chromium exited with status " << rc << ", " << dom.size()
                  << " bytes of DOM; stderr:\n" << stderr_text.str();
    return "";
  }
  return dom;
}

}  // namespace estuary::testing
