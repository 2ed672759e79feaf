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
  auto add = [&](const Chart& c) {
    for (const Series& s : c.series) n += std::min(s.x.size(), s.y.size());
  };
  for (const Chart& c : r.charts) add(c);
  for (const PanelSet& set : r.panel_sets) {
    for (const Panel& p : set.panels) {
      for (const Chart& c : p.charts) add(c);
    }
  }
  return n;
}

// BrowserReport plus a panel set "queues" of two panels ("a" and "b & c"), each of three small
// charts (one per queue, one with a hostile name) of six 40-point series: 2 x 3 x 6 x 40 = 1,440
// points more.
Report ReportWithPanels() {
  Report r = BrowserReport();
  PanelSet set;
  set.id = "queues";
  set.title = "Queues";
  set.notes = {"per queue over time"};
  set.tables.push_back(Table{"Queue metrics", {"metric", "a", "b & c"}, {{"jain_index", "0.98", "0.91"}}});
  set.selector_label = "configuration";
  for (const std::string label : {"a", "b & c"}) {
    Panel p;
    p.label = label;
    for (const std::string queue : {"org", "org / team-1", "org / <i>team-2</i>"}) {
      Chart c{"queue:" + label + ":" + queue, queue, "time (hours)", "GPUs", {}};
      for (int k = 0; k < 6; ++k) c.series.push_back(MakeSeries("column " + std::to_string(k), 40, k, k % 2 == 1));
      p.charts.push_back(c);
    }
    set.panels.push_back(p);
  }
  r.panel_sets.push_back(set);
  return r;
}

// The opening tag of the first element whose tag text contains `attribute` (e.g.
// data-panel="a"); a test failure and "" when there is none.
std::string OpeningTag(const std::string& dom, const std::string& attribute) {
  const size_t at = dom.find(attribute);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no element with " << attribute;
    return "";
  }
  const size_t open = dom.rfind('<', at);
  return dom.substr(open, dom.find('>', at) - open + 1);
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

TEST(ReportTest, APanelSetHasASelectorOptionPerPanelAndACanvasPerChartAfterTheReportsCharts) {
  const std::string html = RenderHtmlReport(ReportWithPanels());
  EXPECT_EQ(Count(html, "<section class=\"panel-set\" data-panels-id=\"queues\">"), 1u);
  EXPECT_EQ(Count(html, "<option value=\"a\">a</option>"), 1u);
  EXPECT_EQ(Count(html, "<option value=\"b &amp; c\">b &amp; c</option>"), 1u);
  EXPECT_EQ(Count(html, "class=\"panel\" data-panel="), 2u);
  EXPECT_EQ(Count(html, "class=\"panel-cell\""), 6u);
  // The report's two charts are chart-0 and chart-1; the panels' are chart-2 .. chart-7, in order.
  EXPECT_LT(html.find("data-chart-id=\"queue:a:org\""), html.find("id=\"chart-2\""));
  EXPECT_LT(html.find("id=\"chart-7\""), html.find("</section>", html.find("data-chart-id=\"queue:b &amp; c:org / &lt;i&gt;team-2&lt;/i&gt;\"")));
  EXPECT_EQ(Count(html, "id=\"chart-8\""), 0u);
  EXPECT_EQ(Count(html, "<i>"), 0u);  // the hostile title is escaped everywhere
  EXPECT_EQ(Count(html, "<h3>org / &lt;i&gt;team-2&lt;/i&gt;</h3>"), 2u);
  EXPECT_NE(html.find("<td>jain_index</td><td class=\"num\">0.98</td>"), std::string::npos);
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
  std::map<std::string, std::string> Load(const Report& r) { return BodyAttributes(LoadDom(r)); }
  // The DOM after the scripts ran; `fragment` (e.g. "#queues=a") is appended to the page's URL.
  std::string LoadDom(const Report& r, const std::string& fragment = "") {
    const fs::path html = dir_.path() / "report.html";
    const Status st = WriteHtmlReport(r, html.string());
    EXPECT_TRUE(st.ok()) << st.ToString();
    return DumpDom(dir_, html.string() + fragment);
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

TEST_F(ReportBrowserTest, EveryPanelsChartsRenderAndOnlyTheFirstPanelIsShown) {
  const Report r = ReportWithPanels();
  ASSERT_EQ(PointCount(r), 650u + 1440u);
  const std::string dom = LoadDom(r);
  auto body = BodyAttributes(dom);
  EXPECT_EQ(body["data-status"], "ok");
  EXPECT_EQ(body["data-charts"], "8");
  EXPECT_EQ(body["data-points"], "2090");
  EXPECT_NE(OpeningTag(dom, "data-panels-id=\"queues\"").find("data-shown=\"a\""), std::string::npos) << dom.size();
  EXPECT_EQ(OpeningTag(dom, "data-panel=\"a\"").find("hidden"), std::string::npos);
  EXPECT_NE(OpeningTag(dom, "data-panel=\"b &amp; c\"").find("hidden"), std::string::npos);
}

TEST_F(ReportBrowserTest, ThePageUrlMaySelectAPanel) {
  const Report r = ReportWithPanels();
  const std::string dom = LoadDom(r, "#queues=b%20%26%20c");
  EXPECT_EQ(BodyAttributes(dom)["data-status"], "ok");
  EXPECT_NE(OpeningTag(dom, "data-panels-id=\"queues\"").find("data-shown=\"b &amp; c\""), std::string::npos);
  EXPECT_NE(OpeningTag(dom, "data-panel=\"a\"").find("hidden"), std::string::npos);
  EXPECT_EQ(OpeningTag(dom, "data-panel=\"b &amp; c\"").find("hidden"), std::string::npos);
  // A label no panel has selects the first.
  const std::string unknown = LoadDom(r, "#queues=zzz");
  EXPECT_NE(OpeningTag(unknown, "data-panels-id=\"queues\"").find("data-shown=\"a\""), std::string::npos);
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
