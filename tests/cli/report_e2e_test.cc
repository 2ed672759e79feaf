// End to end: the report.html files that `estuary openb` and `estuary replay` write render in
// headless Chromium without a JavaScript error and with every chart drawn.
#include <gtest/gtest.h>

#include "tests/testing/browser.h"
#include "tools/cli.h"

namespace estuary {
namespace {

using testing::BodyAttributes;
using testing::DumpDom;
using testing::TempDir;
namespace fs = std::filesystem;

int RunEstuary(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return RunCli(static_cast<int>(argv.size()), argv.data());
}

class ReportEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(testing::kChromium)) GTEST_SKIP() << testing::kChromium << " not found (scripts/setup.sh installs it)";
    if (!fs::exists(nodes_)) GTEST_SKIP() << "../shared is absent (" << shared_ << ")";
  }
  const std::string shared_ = ESTUARY_SHARED_DIR;
  const std::string nodes_ = shared_ + "/traces/openb/openb_node_list_gpu_node.csv";
  const std::string pods_ = shared_ + "/traces/openb/openb_pod_list_default.csv";
  TempDir dir_;
};

TEST_F(ReportEndToEnd, TheOpenbReportRendersItsFourChartsWithPublishedCurves) {
  const std::string out = (dir_.path() / "openb").string();
  ASSERT_EQ(RunEstuary({"estuary", "openb", "--nodes", nodes_, "--pods", pods_, "--policy", "best-fit,fgd", "--seeds",
                        "42-43", "--reference", shared_ + "/reference/openb_expected_alloc.csv", "--out", out}),
            0);
  auto body = BodyAttributes(DumpDom(dir_, out + "/report.html"));
  EXPECT_EQ(body["data-status"], "ok");
  EXPECT_EQ(body["data-charts"], "4");
  // allocation: 2 policies x (ours + published) x 131 points; its saturated end: 2 x 2 x 51;
  // fragmentation ratio and amount: 2 x 131 each.
  EXPECT_EQ(body["data-points"], std::to_string(4 * 131 + 4 * 51 + 4 * 131));
}

TEST_F(ReportEndToEnd, TheReplayReportRendersAllocationAndPendingOverTime) {
  const std::string out = (dir_.path() / "replay").string();
  ASSERT_EQ(RunEstuary({"estuary", "replay", "--nodes", nodes_, "--pods", pods_, "--policy", "fgd", "--sample-interval",
                        "86400", "--out", out}),
            0);
  auto body = BodyAttributes(DumpDom(dir_, out + "/report.html"));
  EXPECT_EQ(body["data-status"], "ok");
  EXPECT_EQ(body["data-charts"], "2");
  EXPECT_GT(std::stoi(body["data-points"].empty() ? "0" : body["data-points"]), 100);
}

}  // namespace
}  // namespace estuary
