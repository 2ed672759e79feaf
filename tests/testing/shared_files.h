// The public traces and published results tests read from ../shared (not in the repository: the
// traces are under research-use terms), and the one way a test that needs them skips when a file
// is absent.
//
// SharedDir() is the folder: the environment variable ESTUARY_SHARED_DIR when set and not empty
// (tests/cli/shared_skip_test.cc points it at an empty folder to prove the skip path), else the
// ESTUARY_SHARED_DIR the build was configured with (CMake cache variable, default ../shared).
//
// ESTUARY_REQUIRE_SHARED_FILES(path, ...) skips the current test (GoogleTest's skip, listed by
// name in CTest's summary) with one line naming the first missing file:
//   missing file: /x/shared/traces/openb/openb_node_list_gpu_node.csv (public traces: README.md, "Public traces")
// Use it at the top of a test body or in a fixture's SetUp(), before anything reads the files.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <initializer_list>
#include <string>

namespace estuary::testing {

inline std::string SharedDir() {
  const char* env = getenv("ESTUARY_SHARED_DIR");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(ESTUARY_SHARED_DIR);
}

// SharedDir() + "/" + relative, e.g. SharedFile("traces/openb/openb_pod_list_default.csv").
inline std::string SharedFile(const std::string& relative) { return SharedDir() + "/" + relative; }

// The first of `paths` that does not exist, or "" when all do.
inline std::string FirstMissing(std::initializer_list<std::string> paths) {
  for (const std::string& p : paths) {
    if (!std::filesystem::exists(p)) return p;
  }
  return "";
}

}  // namespace estuary::testing

#define ESTUARY_REQUIRE_SHARED_FILES(...)                                                              \
  if (const std::string estuary_missing_ = ::estuary::testing::FirstMissing({__VA_ARGS__});           \
      !estuary_missing_.empty()) {                                                                     \
    GTEST_SKIP() << "missing file: " << estuary_missing_ << " (public traces: README.md, \"Public traces\")"; \
  }
