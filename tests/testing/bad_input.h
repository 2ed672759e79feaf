// Assertions for bad-input tests: a rejection is kInvalidArgument (exit code 2) with one line that
// names the file, the line and the column.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "common/status.h"

namespace estuary::testing {

// "file:line: column 'c': " — the start of every message about one field.
inline std::string AtColumn(const std::string& path, unsigned line, const std::string& column) {
  return path + ":" + std::to_string(line) + ": column '" + column + "': ";
}
inline std::string AtLine(const std::string& path, unsigned line) { return path + ":" + std::to_string(line) + ": "; }

// True when `s` is bad input (kInvalidArgument, exit code 2) reported on one line starting with
// `prefix` and containing `detail`.
inline ::testing::AssertionResult IsBadInput(const Status& s, const std::string& prefix, const std::string& detail = "") {
  if (s.ok()) return ::testing::AssertionFailure() << "status is OK, expected a message starting with " << prefix;
  if (s.code() != StatusCode::kInvalidArgument || s.ExitCode() != 2) {
    return ::testing::AssertionFailure() << "code " << static_cast<int>(s.code()) << ", exit code " << s.ExitCode()
                                         << ": " << s.message();
  }
  if (s.message().find('\n') != std::string::npos) {
    return ::testing::AssertionFailure() << "message spans several lines: " << s.message();
  }
  if (s.message().rfind(prefix, 0) != 0) {
    return ::testing::AssertionFailure() << "message '" << s.message() << "' does not start with '" << prefix << "'";
  }
  if (s.message().find(detail) == std::string::npos) {
    return ::testing::AssertionFailure() << "message '" << s.message() << "' does not mention '" << detail << "'";
  }
  return ::testing::AssertionSuccess();
}

template <typename T>
::testing::AssertionResult IsBadInput(const StatusOr<T>& s, const std::string& prefix, const std::string& detail = "") {
  if (s.ok()) return ::testing::AssertionFailure() << "read succeeded, expected a message starting with " << prefix;
  return IsBadInput(s.status(), prefix, detail);
}

}  // namespace estuary::testing
