// Running the built estuary binary as a user meets it, for tests of the command line: a
// subprocess under `timeout 120` and a 512 MiB address-space cap (so a hang or a runaway
// allocation fails the test instead of the machine), its exit code, stdout and stderr; and the
// contract of bad input — exit code 2 and exactly one line on stderr naming the file, line and
// field, or the flag.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/testing/temp_dir.h"

namespace estuary::testing {

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

inline std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct RunResult {
  int exit_code = -1;  // 124: timed out; 128 + n: killed by signal n
  std::string out, err;
};

inline std::ostream& operator<<(std::ostream& o, const RunResult& r) {
  return o << "exit code " << r.exit_code << "\n--- stdout ---\n" << r.out << "--- stderr ---\n" << r.err;
}

// Runs `estuary args...` and captures its exit code, stdout and stderr separately.
inline RunResult RunEstuary(const std::vector<std::string>& args) {
  TempDir io;
  const std::string out = (io.path() / "stdout").string(), err = (io.path() / "stderr").string();
  // 512 MiB of address space, except under the sanitizers (ASan's shadow memory needs far more).
#ifdef ESTUARY_SANITIZED
  std::string cmd = "exec timeout 120 " + ShellQuote(ESTUARY_BINARY);
#else
  std::string cmd = "ulimit -v 524288 && exec timeout 120 " + ShellQuote(ESTUARY_BINARY);
#endif
  for (const std::string& a : args) cmd += " " + ShellQuote(a);
  cmd += " >" + ShellQuote(out) + " 2>" + ShellQuote(err) + " </dev/null";
  const int status = std::system(cmd.c_str());
  RunResult r;
  if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (status != -1 && WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

// True when the run failed as bad input: exit code 2 and exactly one line on stderr,
// "estuary: ...", containing every one of `needles`.
inline ::testing::AssertionResult RejectedWith(const RunResult& r, std::initializer_list<std::string> needles) {
  if (r.exit_code != 2) return ::testing::AssertionFailure() << "expected exit code 2, got " << r;
  if (r.err.empty() || r.err.back() != '\n' || std::count(r.err.begin(), r.err.end(), '\n') != 1) {
    return ::testing::AssertionFailure() << "expected exactly one line on stderr, got " << r;
  }
  if (r.err.rfind("estuary: ", 0) != 0) return ::testing::AssertionFailure() << "no 'estuary: ' prefix: " << r;
  for (const std::string& n : needles) {
    if (r.err.find(n) == std::string::npos) return ::testing::AssertionFailure() << "stderr lacks '" << n << "': " << r;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace estuary::testing
