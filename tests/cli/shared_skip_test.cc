// The skip path of the tests that need the public traces (tests/testing/shared_files.h): a trace
// test run with the shared folder pointed (ESTUARY_SHARED_DIR) at an empty folder is skipped with
// one line naming the missing file, and the same test with a file present runs — here on a
// one-node table, so it fails on its figures: a present trace is never skipped and never passes
// vacuously.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/testing/temp_dir.h"

namespace estuary {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::TempDir;

constexpr char kNodeTablesTest[] = ESTUARY_NODE_TABLES_TEST;
constexpr char kSpotTest[] = "SpotGpuTable.TheRealTableLoads4278NodesWith10412GpusOfSixModels";
constexpr char kSpotTable[] = "traces/alibaba-spot-gpu-v2026/node_info_df.csv";

struct TraceRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs node_tables_test's test `filter` with ESTUARY_SHARED_DIR=`shared`.
TraceRun RunTraceTest(const TempDir& io, const std::string& shared, const std::string& filter) {
  const fs::path log = io.path() / "output.txt";
  const std::string cmd = "ESTUARY_SHARED_DIR='" + shared + "' timeout 120 '" + kNodeTablesTest +
                          "' --gtest_filter='" + filter + "' >'" + log.string() + "' 2>&1 </dev/null";
  const int status = std::system(cmd.c_str());
  TraceRun r;
  if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  r.output = text.str();
  return r;
}

TEST(SharedTraces, ATraceTestWithoutItsFileIsSkippedWithOneLineNamingTheFile) {
  TempDir io, empty;
  ASSERT_TRUE(fs::exists(kNodeTablesTest)) << kNodeTablesTest;
  const TraceRun r = RunTraceTest(io, empty.path().string(), kSpotTest);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string missing = "missing file: " + (empty.path() / kSpotTable).string();
  EXPECT_THAT(r.output, HasSubstr(missing)) << r.output;
  EXPECT_THAT(r.output, HasSubstr(std::string("[  SKIPPED ] ") + kSpotTest)) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[  PASSED  ] 0 tests.")) << r.output;
  // One line: the reason is followed directly by GoogleTest's SKIPPED line.
  const size_t end = r.output.find('\n', r.output.find(missing));
  ASSERT_NE(end, std::string::npos) << r.output;
  EXPECT_EQ(r.output.compare(end + 1, 12, "[  SKIPPED ]"), 0) << r.output;
}

TEST(SharedTraces, ATraceTestWithItsFilePresentRunsAndCanFail) {
  TempDir io, shared;
  fs::create_directories(shared.path() / "traces/alibaba-spot-gpu-v2026");
  std::ofstream(shared.path() / kSpotTable) << "gpu_model,gpu_capacity_num,cpu_num,node_name\nA10,1,128,0\n";
  const TraceRun r = RunTraceTest(io, shared.path().string(), kSpotTest);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(std::string("[  FAILED  ] ") + kSpotTest)) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("missing file:"))) << r.output;
}

}  // namespace
}  // namespace estuary
