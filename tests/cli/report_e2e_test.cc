// End to end: the report.html files that `estuary openb`, `replay` and `simulate` write render in
// headless Chromium without a JavaScript error and with every chart drawn.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

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

TEST_F(ReportEndToEnd, TheSimulateReportRendersTimeSeriesAndHourOfDayCharts) {
  // The tidal week's first six hours: allocation, free nodes, idle GPU-hours and both allocation
  // ratios by hour of day, free ASWs and free RDMA-PODs (the generated cluster has both levels).
  std::ifstream in(std::string(ESTUARY_SOURCE_DIR) + "/examples/tidal-week.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  yaml.replace(yaml.find("duration_s: 604800"), 18, "duration_s: 21600");
  yaml.replace(yaml.find("seeds: [1, 2, 3]"), 16, "seeds: [1]");
  yaml.replace(yaml.find("curve: curves/"), 14, "curve: " + std::string(ESTUARY_SOURCE_DIR) + "/examples/curves/");
  const std::string sc = (dir_.path() / "tidal.yaml").string();
  std::ofstream(sc) << yaml;
  const std::string out = (dir_.path() / "simulate").string();
  ASSERT_EQ(RunEstuary({"estuary", "simulate", sc, "--out", out}), 0);
  auto body = BodyAttributes(DumpDom(dir_, out + "/report.html"));
  EXPECT_EQ(body["data-status"], "ok");
  EXPECT_EQ(body["data-charts"], "7");
  EXPECT_GT(std::stoi(body["data-points"].empty() ? "0" : body["data-points"]), 3 * 24);
}

}  // namespace
}  // namespace estuary
