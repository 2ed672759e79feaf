// Tests of the HTML report: escaping, determinism, I/O errors, and, in headless Chromium, that the
// page actually renders its charts and reports its health on <body>.
#include "sim/report/report.h"

#include "tests/testing/browser.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace estuary::report {
namespace {

namespace fs = std::filesystem;
using estuary::testing::BodyAttributes;
using estuary::testing::DumpDom;
using estuary::testing::TempDir;

using estuary::testing::kChromium;
constexpr char kPayload[] = "<script>alert(1)</script>";

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

Series MakeSeries(std::string label, size_t points, double phase, bool dashed = false) {
  Series s{std::move(label), {}, {}, dashed};
  for (size_t i = 0; i < points; ++i) {
    s.x.push_back(static_cast<double>(i) * 10.0);
    s.y.push_back(50.0 + 40.0 * std::sin(static_cast<double>(i) / 12.0 + phase));
  }
  return s;
}

// Every user-visible string of the report set to `text`.
Report ReportWithStrings(const std::string& text) {
  Report r;
  r.title = text;
  r.notes = {text};
  r.tables.push_back(Table{text, {text, "b"}, {{text, "1.5"}}});
  Chart c{text, text, text, text, {MakeSeries(text, 5, 0.0)}};
  r.charts.push_back(c);
  return r;
}

// Two charts (650 points in all, one dashed series, hostile labels) and one table.
Report BrowserReport() {
  Report r;
  r.title = "Simulation report </script> & <b>friends</b>";
  r.notes = {"trace: synthetic", "policy labels contain <!--<script> on purpose"};
  r.tables.push_back(Table{"Summary",
                           {"policy", "jobs", "mean JCT (s)", "GPU util"},
                           {{"fifo", "1200", "3412.5", "71.2%"},
                            {"drf </script>", "1200", "2980.1", "78.9%"},
                            {"gavel", "1200", "2750.0", "82.4%"}}});
  r.charts.push_back(Chart{"queue",
                           "Queue length over time",
                           "time (s)",
                           "pending jobs",
                           {MakeSeries("fifo", 130, 0.0), MakeSeries("drf <!--<script>", 130, 1.0),
                            MakeSeries("gavel", 130, 2.0, /*dashed=*/true)}});
  r.charts.push_back(Chart{"util",
                           "GPU utilisation",
                           "time (s)",
                           "utilisation (%)",
                           {MakeSeries("allocated", 130, 0.5), MakeSeries("capacity", 130, 3.0, true)}});
  return r;
}

size_t PointCount(const Report& r) {
  size_t n = 0;
  for (const Chart& c : r.charts) {
    for (const Series& s : c.series) n += std::min(s.x.size(), s.y.size());
  }
  return n;
}

TEST(ReportTest, EscapesUserStrings) {
  const std::string benign = RenderHtmlReport(ReportWithStrings("plain"));
  const std::string hostile = RenderHtmlReport(ReportWithStrings(std::string(kPayload) + "</script>"));
  EXPECT_EQ(hostile.find(kPayload), std::string::npos);
  EXPECT_EQ(hostile.find("alert(1)</script>"), std::string::npos);
  // The only </script> tags are the page's own.
  EXPECT_EQ(Count(hostile, "</script>"), Count(benign, "</script>"));
  EXPECT_EQ(Count(hostile, "<script"), Count(benign, "<script"));
  EXPECT_NE(hostile.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
}

TEST(ReportTest, EmbedsChartJs) {
  const std::string html = RenderHtmlReport(Report{});
  EXPECT_NE(html.find("Chart.js v4."), std::string::npos);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
}

TEST(ReportTest, RenderingIsDeterministic) {
  const Report r = BrowserReport();
  const Report copy = r;
  EXPECT_EQ(RenderHtmlReport(r), RenderHtmlReport(r));
  EXPECT_EQ(RenderHtmlReport(r), RenderHtmlReport(copy));
}

TEST(ReportTest, WritesTheRenderedPage) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const Report r = BrowserReport();
  const fs::path path = dir.path() / "report.html";
  const Status st = WriteHtmlReport(r, path.string());
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  EXPECT_EQ(content.str(), RenderHtmlReport(r));
}

TEST(ReportTest, UnwritablePathIsAnErrorNamingThePath) {
  const std::string path = "/nonexistent-dir/x.html";
  const Status st = WriteHtmlReport(BrowserReport(), path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
}

class ReportBrowserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kChromium)) {
      GTEST_SKIP() << kChromium << " not found; install it with scripts/setup.sh to run the "
                   << "headless-browser tests of report.html";
    }
    ASSERT_FALSE(dir_.path().empty()) << "cannot create a temp dir";
  }

  // Writes `r`, loads it in Chromium and returns the <body> attributes after the scripts ran.
  std::map<std::string, std::string> Load(const Report& r) {
    const fs::path html = dir_.path() / "report.html";
    const Status st = WriteHtmlReport(r, html.string());
    EXPECT_TRUE(st.ok()) << st.ToString();
    return BodyAttributes(DumpDom(dir_, html));
  }

  TempDir dir_;
};

TEST_F(ReportBrowserTest, ChartsRenderAndPageReportsOk) {
  const Report r = BrowserReport();
  ASSERT_EQ(PointCount(r), 650u);
  auto body = Load(r);
  EXPECT_EQ(body["data-status"], "ok");
  EXPECT_EQ(body["data-charts"], "2");
  EXPECT_EQ(body["data-points"], std::to_string(PointCount(r)));
}

TEST_F(ReportBrowserTest, ChartWithoutPointsIsReportedAsError) {
  Report r;
  r.title = "empty";
  r.charts.push_back(Chart{"nothing", "No data", "x", "y", {Series{"empty", {}, {}}}});
  auto body = Load(r);
  EXPECT_EQ(body["data-status"].rfind("error", 0), 0u) << "data-status=" << body["data-status"];
  EXPECT_NE(body["data-status"].find("nothing"), std::string::npos) << body["data-status"];
}

}  // namespace
}  // namespace estuary::report
