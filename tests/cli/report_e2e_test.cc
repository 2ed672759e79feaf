// End to end: the report.html files that `estuary openb`, `replay` and `simulate` write render in
// headless Chromium without a JavaScript error and with every chart drawn — among them the report
// of `make demo`'s embedded scenario (examples/demo.yaml); with queues, the report has a queue
// section whose charts hold queues.csv's figures. The openb and replay reports need the public
// traces (../shared) and skip without them; the simulate reports need nothing beside the checkout.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/testing/browser.h"
#include "tests/testing/shared_files.h"
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
  }
  TempDir dir_;
};

// The openb and replay reports: the default openb trace and the published results.
class TraceReportEndToEnd : public ReportEndToEnd {
 protected:
  void SetUp() override {
    ReportEndToEnd::SetUp();
    if (IsSkipped()) return;
    ESTUARY_REQUIRE_SHARED_FILES(nodes_, pods_, reference_);
  }
  const std::string nodes_ = testing::SharedFile("traces/openb/openb_node_list_gpu_node.csv");
  const std::string pods_ = testing::SharedFile("traces/openb/openb_pod_list_default.csv");
  const std::string reference_ = testing::SharedFile("reference/openb_expected_alloc.csv");
};

TEST_F(TraceReportEndToEnd, TheOpenbReportRendersItsFourChartsWithPublishedCurves) {
  const std::string out = (dir_.path() / "openb").string();
  ASSERT_EQ(RunEstuary({"estuary", "openb", "--nodes", nodes_, "--pods", pods_, "--policy", "best-fit,fgd", "--seeds",
                        "42-43", "--reference", reference_, "--out", out}),
            0);
  auto body = BodyAttributes(DumpDom(dir_, out + "/report.html"));
  EXPECT_EQ(body["data-status"], "ok");
  EXPECT_EQ(body["data-charts"], "4");
  // allocation: 2 policies x (ours + published) x 131 points; its saturated end: 2 x 2 x 51;
  // fragmentation ratio and amount: 2 x 131 each.
  EXPECT_EQ(body["data-points"], std::to_string(4 * 131 + 4 * 51 + 4 * 131));
}

TEST_F(TraceReportEndToEnd, TheReplayReportRendersAllocationAndPendingOverTime) {
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

TEST_F(ReportEndToEnd, TheReportOfMakeDemoRendersEveryChartWithoutAJavaScriptError) {
  // examples/demo.yaml exactly as `make demo` runs it (the whole two days, every seed).
  const std::string out = (dir_.path() / "demo").string();
  ASSERT_EQ(RunEstuary({"estuary", "simulate", std::string(ESTUARY_SOURCE_DIR) + "/examples/demo.yaml", "--out", out}), 0);
  auto body = BodyAttributes(DumpDom(dir_, out + "/report.html"));
  EXPECT_EQ(body["data-status"], "ok");
  // Allocation and free nodes, free ASWs and RDMA-PODs over time, idle GPU-hours and both
  // allocation ratios by hour of day.
  EXPECT_EQ(body["data-charts"], "7");
  // At least the allocation series: 4 configurations x 192 samples (two days every 15 minutes).
  EXPECT_GT(std::stoi(body["data-points"].empty() ? "0" : body["data-points"]), 4 * 192);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every value of attribute `name` in `dom` (as serialised: &amp; etc. left as they are), in order.
std::vector<std::string> AttributeValues(const std::string& dom, const std::string& name) {
  std::vector<std::string> out;
  const std::string key = " " + name + "=\"";
  for (size_t at = dom.find(key); at != std::string::npos; at = dom.find(key, at + 1)) {
    const size_t from = at + key.size();
    out.push_back(dom.substr(from, dom.find('"', from) - from));
  }
  return out;
}

TEST_F(ReportEndToEnd, TheSimulateReportOfQueuesChartsEveryQueueOfEveryConfigurationFromQueuesCsv) {
  // examples/fair-share.yaml's first six hours, one seed: eight configurations of two orgs with
  // three teams each.
  const std::vector<std::string> kConfigurations = {"static-quota", "borrow-only", "kueue-like", "estuary",
                                                    "kai",          "k8s-default", "slurm",      "volcano"};
  std::string yaml = ReadText(std::string(ESTUARY_SOURCE_DIR) + "/examples/fair-share.yaml");
  yaml.replace(yaml.find("duration_s: 604800"), 18, "duration_s: 21600");
  yaml.replace(yaml.find("seeds: [1, 2, 3]"), 16, "seeds: [1]");
  yaml.replace(yaml.find("curve: curves/"), 14, "curve: " + std::string(ESTUARY_SOURCE_DIR) + "/examples/curves/");
  const std::string sc = (dir_.path() / "fair-share.yaml").string();
  std::ofstream(sc) << yaml;
  const std::string out = (dir_.path() / "queues").string();
  ASSERT_EQ(RunEstuary({"estuary", "simulate", sc, "--out", out}), 0);
  const std::string dom = DumpDom(dir_, out + "/report.html");
  auto body = BodyAttributes(dom);
  EXPECT_EQ(body["data-status"], "ok");
  // Every canvas drew: the simulate charts and 8 configurations x 8 queues.
  const std::vector<std::string> ids = AttributeValues(dom, "data-chart-id");
  size_t queue_charts = 0;
  for (const std::string& id : ids) queue_charts += id.rfind("queue:", 0) == 0;
  EXPECT_EQ(queue_charts, 64u);
  EXPECT_EQ(body["data-charts"], std::to_string(ids.size()));
  EXPECT_EQ(AttributeValues(dom, "data-panel"),
            kConfigurations);
  EXPECT_EQ(AttributeValues(dom, "data-shown"), std::vector<std::string>{"static-quota"});
  // Each panel lists the queues depth first, a chart titled by the queue's path.
  const std::vector<std::string> tree = {"research (its 3 queues' sum)", "research / nlp", "research / vision",
                                         "research / rl", "product (its 3 queues' sum)", "product / search",
                                         "product / ads", "product / infra"};
  std::vector<std::string> titles = AttributeValues(dom, "data-title");
  for (auto& t : titles) t = testing::Decode(t);
  ASSERT_EQ(titles.size(), 64u);
  for (size_t c = 0; c < kConfigurations.size(); ++c) {
    EXPECT_EQ(std::vector<std::string>(titles.begin() + 8 * c, titles.begin() + 8 * (c + 1)), tree) << "panel " << c;
  }
  // The metrics table: one column per configuration, each cell the summary's mean.
  const nlohmann::json summary = nlohmann::json::parse(ReadText(out + "/summary.json"));
  for (const char* metric : {"fairness_deviation_pct", "jain_index", "guarantee_wait_p99_s", "fairness_evictions_count",
                             "flapping_jobs_count", "queue_limit_breaches_count"}) {
    const size_t row = dom.find(std::string("<td>") + metric + "</td>", dom.find("data-panels-id=\"queues\""));
    ASSERT_NE(row, std::string::npos) << metric;
    const std::string cells = dom.substr(row, dom.find("</tr>", row) - row);
    size_t at = cells.find("</td>");
    for (const std::string& conf : kConfigurations) {
      at = cells.find('>', cells.find("<td", at)) + 1;
      const double shown = std::stod(cells.substr(at, cells.find('<', at) - at));
      EXPECT_NEAR(shown, summary["configurations"][conf][metric].get<double>(), 0.0051) << metric << " of " << conf;
    }
  }
  // The charts' data is queues.csv's (seed 1): every column of every queue, point by point.
  const std::string html = ReadText(out + "/report.html");
  const std::string open_tag = "<script type=\"application/json\" id=\"report-data\">";
  const size_t from = html.find(open_tag) + open_tag.size();
  const nlohmann::json data = nlohmann::json::parse(html.substr(from, html.find("</script>", from) - from));
  std::map<std::string, const nlohmann::json*> charts;
  for (const nlohmann::json& c : data["charts"]) charts[c["id"].get<std::string>()] = &c;
  std::istringstream csv(ReadText(out + "/queues.csv"));
  std::string line;
  std::getline(csv, line);
  ASSERT_EQ(line, "configuration,seed,time_s,queue,allocated_gpus,guaranteed_gpus,fair_share_gpus,borrowed_gpus,lent_gpus,"
                  "pending_gpus");
  std::map<std::string, size_t> point;  // per chart: the next point
  size_t rows = 0;
  double nonzero = 0;
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::stringstream fields(line);
    for (std::string v; std::getline(fields, v, ',');) f.push_back(v);
    ASSERT_EQ(f.size(), 10u) << line;
    const std::string id = "queue:" + f[0] + ":" + f[3];
    ASSERT_TRUE(charts.count(id)) << id;
    const nlohmann::json& series = (*charts[id])["series"];
    ASSERT_EQ(series.size(), 6u);
    const size_t k = point[id]++;
    for (size_t col = 0; col < 6; ++col) {
      const double y = std::stod(f[4 + col]);
      ASSERT_LT(k, series[col]["y"].size()) << id;
      EXPECT_NEAR(series[col]["x"][k].get<double>(), std::stod(f[2]) / 3600.0, 1e-9) << id;
      EXPECT_NEAR(series[col]["y"][k].get<double>(), y, 1e-6) << id << " " << series[col]["label"];
      nonzero += std::abs(y);
    }
    ++rows;
  }
  EXPECT_EQ(rows, 64u * 36u);  // 8 queues x 8 configurations x 36 samples (every 10 min from 0 to 5 h 50 min)
  for (const auto& [id, n] : point) EXPECT_EQ((*charts[id])["series"][0]["y"].size(), n) << id;
  EXPECT_EQ(std::vector<std::string>({"allocated", "guaranteed", "fair share", "borrowed", "lent", "pending"}),
            [&] {
              std::vector<std::string> labels;
              for (const auto& s : (*charts["queue:estuary:nlp"])["series"]) labels.push_back(s["label"]);
              return labels;
            }());
  EXPECT_GT(nonzero, 0);
}

}  // namespace
}  // namespace estuary
