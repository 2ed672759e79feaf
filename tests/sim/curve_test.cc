// Specification of diurnal demand curves (sim/trace/curve.h): per-mille interpolation between the
// hourly points, the curve file reader (every bad input a one-line kInvalidArgument naming
// file:line and column), the QPS deriver's estimator on small synthetic traces, and the checked-in
// examples/curves/genai-diurnal.csv against a fresh derivation from ../shared.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "sim/trace/curve.h"

#include "tests/testing/bad_input.h"
#include "tests/testing/shared_files.h"
#include "tests/testing/temp_dir.h"

namespace estuary {
namespace {

using estuary::testing::AtColumn;
using estuary::testing::AtLine;
using estuary::testing::IsBadInput;
using estuary::testing::TempDir;
using estuary::testing::WriteFile;

constexpr int64_t kH = 3600;

// A curve whose hour h is at `pct[h]`.
DemandCurve Curve(std::array<int32_t, 24> pct) {
  DemandCurve c;
  c.pct = pct;
  return c;
}

// 0, 10, 20, ... 100 and back down: distinct neighbours everywhere, 23:00 at 10.
const DemandCurve kRamp =
    Curve({0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 95, 90, 85, 80, 75, 70, 60, 50, 40, 30, 25, 20, 10});

// ---------------------------------------------------------------------------------------------
// PermilleAt

TEST(DemandCurvePermille, IsTenTimesThePercentAtEveryFullHour) {
  for (int h = 0; h < 24; ++h) EXPECT_EQ(kRamp.PermilleAt(h * kH), 10 * kRamp.pct[h]) << "hour " << h;
}

TEST(DemandCurvePermille, IsTheMeanOfTheTwoNeighbouringHoursAtHalfPast) {
  for (int h = 0; h < 23; ++h) {
    EXPECT_EQ(kRamp.PermilleAt(h * kH + 1800), 5 * (kRamp.pct[h] + kRamp.pct[h + 1])) << "hour " << h;
  }
}

TEST(DemandCurvePermille, JoinsElevenPmToTheNextMidnightAcrossTheDayBoundary) {
  // 23:00 is 10 %, 0:00 is 0 %: 23:30 is halfway, 23:45 a quarter of 100 per-mille, 24:00 is 0:00.
  EXPECT_EQ(kRamp.PermilleAt(23 * kH), 100);
  EXPECT_EQ(kRamp.PermilleAt(23 * kH + 1800), 50);
  EXPECT_EQ(kRamp.PermilleAt(23 * kH + 2700), 25);
  EXPECT_EQ(kRamp.PermilleAt(24 * kH), 0);
  EXPECT_EQ(kRamp.PermilleAt(24 * kH + 10 * kH), 1000);  // the next day's 10:00
  EXPECT_EQ(kRamp.PermilleAt(-1800), 50);                // -30 min is 23:30 of the day before
}

TEST(DemandCurvePermille, RoundsToTheNearestPermilleWithHalvesUp) {
  // From 0 % at 0:00 to 1 % (10 per-mille) at 1:00: one per-mille every 360 s.
  const DemandCurve c = Curve({0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  EXPECT_EQ(c.PermilleAt(179), 0);  // 0.497
  EXPECT_EQ(c.PermilleAt(180), 1);  // 0.5 exactly
  EXPECT_EQ(c.PermilleAt(539), 1);  // 1.497
  EXPECT_EQ(c.PermilleAt(540), 2);  // 1.5
  EXPECT_EQ(c.PermilleAt(3599), 10);
}

TEST(DemandCurvePermille, StaysWithinZeroAndAThousandOverAWholeDay) {
  const DemandCurve c = Curve({100, 0, 100, 0, 100, 0, 100, 0, 100, 0, 100, 0,
                               100, 0, 100, 0, 100, 0, 100, 0, 100, 0, 100, 0});
  for (int64_t s = 0; s < 24 * kH; s += 7) {
    const int64_t p = c.PermilleAt(s);
    ASSERT_GE(p, 0) << s;
    ASSERT_LE(p, 1000) << s;
  }
}

// ---------------------------------------------------------------------------------------------
// Curve file reader

// A curve file: the header then one row per (hour, pct) pair, in the given order.
std::string CurveFile(const std::vector<std::pair<std::string, std::string>>& rows,
                      const std::string& header = "hour,demand_pct") {
  std::string text = header + "\n";
  for (const auto& [h, p] : rows) text += h + "," + p + "\n";
  return text;
}

// Rows for hours 0..23 in order, each at `pct`; row i is on line i + 2 of CurveFile.
std::vector<std::pair<std::string, std::string>> AllHours(const std::string& pct = "50") {
  std::vector<std::pair<std::string, std::string>> rows;
  for (int h = 0; h < 24; ++h) rows.emplace_back(std::to_string(h), pct);
  return rows;
}

TEST(DemandCurveReader, ReadsBackWhatFormatDemandCurveWrites) {
  TempDir dir;
  const std::string path = WriteFile(dir, "c.csv", FormatDemandCurve(kRamp, "from a test\nsecond line"));
  auto c = ReadDemandCurve(path);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(*c, kRamp);
}

TEST(DemandCurveReader, FormatWritesOneCommentLineTheHeaderAndHoursInOrder) {
  const std::string text = FormatDemandCurve(kRamp, "from a test\nsecond line");
  EXPECT_EQ(text.substr(0, text.find('\n')), "# from a test second line");
  EXPECT_NE(text.find("\nhour,demand_pct\n0,0\n1,10\n"), std::string::npos);
  EXPECT_EQ(text.substr(text.size() - 6), "23,10\n");
  EXPECT_EQ(FormatDemandCurve(kRamp, "").substr(0, 16), "hour,demand_pct\n");
}

TEST(DemandCurveReader, AcceptsRowsAndColumnsInAnyOrderWithCommentsAndBlankLines) {
  TempDir dir;
  std::string text = "# a comment\n\ndemand_pct,hour\n";
  for (int h = 23; h >= 0; --h) text += std::to_string(kRamp.pct[h]) + " , " + std::to_string(h) + "\r\n";
  text += "# trailing comment\n\n";
  const std::string path = WriteFile(dir, "c.csv", text);
  auto c = ReadDemandCurve(path);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(*c, kRamp);
}

TEST(DemandCurveReader, RejectsAHeaderWithoutDemandPctNamingTheHeaderLine) {
  TempDir dir;
  const std::string path = WriteFile(dir, "c.csv", "hour\n0\n1\n");
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), AtLine(path, 1) + "missing column 'demand_pct'"));
  const std::string commented = WriteFile(dir, "c2.csv", "# comment\ndemand_pct\n50\n");
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(commented), AtLine(commented, 2) + "missing column 'hour'"));
}

TEST(DemandCurveReader, RejectsAnUnexpectedHeaderColumnNamingIt) {
  TempDir dir;
  const std::string path = WriteFile(dir, "c.csv", "hour,demand_pct,note\n0,1,x\n");
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), AtLine(path, 1) + "unexpected column 'note'"));
  const std::string renamed = WriteFile(dir, "c2.csv", CurveFile(AllHours(), "hour,pct"));
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(renamed), AtLine(renamed, 1) + "unexpected column 'pct'"));
}

TEST(DemandCurveReader, RejectsANonIntegerDemandNamingLineAndColumn) {
  TempDir dir;
  auto rows = AllHours();
  rows[3].second = "12.5";
  const std::string path = WriteFile(dir, "c.csv", CurveFile(rows));
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), AtColumn(path, 5, "demand_pct"), "'12.5' is not an integer"));
}

TEST(DemandCurveReader, RejectsANonIntegerHourNamingLineAndColumn) {
  TempDir dir;
  auto rows = AllHours();
  rows[0].first = "midnight";
  const std::string path = WriteFile(dir, "c.csv", CurveFile(rows));
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), AtColumn(path, 2, "hour"), "'midnight' is not an integer"));
}

TEST(DemandCurveReader, RejectsAnEmptyDemandNamingLineAndColumn) {
  TempDir dir;
  auto rows = AllHours();
  rows[1].second = "";
  const std::string path = WriteFile(dir, "c.csv", CurveFile(rows));
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), AtColumn(path, 3, "demand_pct"), "empty value"));
}

TEST(DemandCurveReader, RejectsADemandAboveOneHundredNamingLineAndColumn) {
  TempDir dir;
  auto rows = AllHours();
  rows[23].second = "101";
  const std::string path = WriteFile(dir, "c.csv", CurveFile(rows));
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), AtColumn(path, 25, "demand_pct"), "value 101 exceeds the limit 100"));
}

TEST(DemandCurveReader, RejectsANegativeDemandNamingLineAndColumn) {
  TempDir dir;
  auto rows = AllHours();
  rows[4].second = "-1";
  const std::string path = WriteFile(dir, "c.csv", CurveFile(rows));
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), AtColumn(path, 6, "demand_pct"), "negative value -1"));
}

TEST(DemandCurveReader, RejectsHourTwentyFourNamingLineAndColumn) {
  TempDir dir;
  auto rows = AllHours();
  rows[0].first = "24";
  const std::string path = WriteFile(dir, "c.csv", CurveFile(rows));
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), AtColumn(path, 2, "hour"), "value 24 exceeds the limit 23"));
}

TEST(DemandCurveReader, RejectsADuplicateHourNamingBothLines) {
  TempDir dir;
  auto rows = AllHours();
  rows[7].first = "5";  // line 9 repeats hour 5 of line 7
  const std::string path = WriteFile(dir, "c.csv", CurveFile(rows));
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), AtColumn(path, 9, "hour"), "duplicate hour 5 (first on line 7)"));
}

TEST(DemandCurveReader, RejectsAMissingHourNamingIt) {
  TempDir dir;
  auto rows = AllHours();
  rows.erase(rows.begin() + 7);  // 23 rows, lines 2..24
  const std::string path = WriteFile(dir, "c.csv", CurveFile(rows));
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), AtColumn(path, 24, "hour"), "no row for hour 7 "));
}

TEST(DemandCurveReader, RejectsSeveralMissingHoursNamingThemAsRanges) {
  TempDir dir;
  auto rows = AllHours();
  rows.erase(rows.begin() + 22, rows.end());  // no 22, 23
  rows.erase(rows.begin() + 7, rows.begin() + 10);  // no 7, 8, 9
  rows.erase(rows.begin() + 3);  // no 3
  const std::string path = WriteFile(dir, "c.csv", CurveFile(rows));
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), AtColumn(path, 19, "hour"), "no row for hours 3, 7-9, 22-23"));
}

TEST(DemandCurveReader, RejectsAHeaderWithoutRowsNamingAllHours) {
  TempDir dir;
  const std::string path = WriteFile(dir, "c.csv", "# nothing yet\nhour,demand_pct\n");
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), AtColumn(path, 2, "hour"), "no row for hours 0-23"));
}

TEST(DemandCurveReader, RejectsACurveThatIsZeroEveryHourNamingDemandPct) {
  TempDir dir;
  const std::string path = WriteFile(dir, "c.csv", CurveFile(AllHours("0")));
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), AtColumn(path, 25, "demand_pct"), "every hour is 0"));
}

TEST(DemandCurveReader, RejectsARowWithTooManyColumnsNamingItsLine) {
  TempDir dir;
  const std::string path = WriteFile(dir, "c.csv", "hour,demand_pct\n0,1\n1,2,3\n");
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), AtLine(path, 3) + "malformed row: too many columns"));
}

TEST(DemandCurveReader, RejectsAnEmptyFileNamingLineOne) {
  TempDir dir;
  const std::string path = WriteFile(dir, "c.csv", "");
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), AtLine(path, 1), "empty file"));
}

TEST(DemandCurveReader, RejectsAFileThatDoesNotExistNamingIt) {
  TempDir dir;
  const std::string path = (dir.path() / "absent.csv").string();
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), path + ": ", "cannot open file"));
}

TEST(DemandCurveReader, RejectsADirectoryNamingIt) {
  TempDir dir;
  const std::string path = dir.path().string();
  EXPECT_TRUE(IsBadInput(ReadDemandCurve(path), path + ": ", "is a directory"));
}

// ---------------------------------------------------------------------------------------------
// QPS deriver on synthetic traces (UTC seconds from the epoch: second 0 is 1970-01-01 00:00 UTC)

constexpr char kQpsHeader[] = "timestamp_anon,value,container_ip,request_type\n";

// A QPS row at `second` (written as "second.0", as in the public trace).
std::string Row(int64_t second, const std::string& value, const std::string& container = "c1",
                const std::string& type = "Generative Requests") {
  return std::to_string(second) + ".0," + value + "," + container + "," + type + "\n";
}

TEST(QpsCurveDeriver, SumsEveryContainerAndRequestTypeAndCountsMissingSamplesAsZero) {
  // One full UTC day. Hour 0: 1 + 2 (two containers, one sample); hour 12: 1.5 + 4.5 from the
  // API gateway (no container) and a container at two other samples; every other hour has no
  // rows (rate 0) except the 0-valued row that ends the span at 23:59:59.
  TempDir dir;
  const std::string path = WriteFile(dir, "qps.csv",
                                     std::string(kQpsHeader) + Row(0, "1", "c1") + Row(0, "2", "c2") +
                                         Row(12 * kH, "1.5", "", "API Requests") + Row(12 * kH + 57, "4.5", "c1") +
                                         Row(24 * kH - 1, "0"));
  auto q = DeriveQpsCurve(path, 0);
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->rows, 5);
  EXPECT_EQ(q->first_second, 0);
  EXPECT_EQ(q->last_second, 24 * kH - 1);
  std::array<int32_t, 24> want{};
  want[0] = 50;
  want[12] = 100;
  EXPECT_EQ(q->curve.pct, want);
  for (int h = 0; h < 24; ++h) EXPECT_TRUE(q->observed[h]) << h;
}

TEST(QpsCurveDeriver, DividesEachHoursSumByTheSecondsOfTheSpanInIt) {
  // The span starts at 0:30 (1,800 s of hour 0) and ends at 1:59:59 (3,600 s of hour 1): the same
  // sum makes hour 0 twice as busy.
  TempDir dir;
  const std::string path =
      WriteFile(dir, "qps.csv", std::string(kQpsHeader) + Row(1800, "3") + Row(kH, "3") + Row(2 * kH - 1, "0"));
  auto c = DeriveCurveFromQps(path, 0);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->pct[0], 100);
  EXPECT_EQ(c->pct[1], 50);
}

TEST(QpsCurveDeriver, InterpolatesUncoveredHoursLinearlyBetweenTheNearestCoveredOnesRoundMidnight) {
  // Hours 0 (rate 4) and 1 (rate 2) only: hour g in 2..23 lies g - 1 hours after hour 1 and
  // 24 - g before the next day's hour 0, so pct = (50 * (24 - g) + 100 * (g - 1)) / 23.
  TempDir dir;
  const std::string path =
      WriteFile(dir, "qps.csv", std::string(kQpsHeader) + Row(0, "4") + Row(kH, "2") + Row(2 * kH - 1, "0"));
  auto q = DeriveQpsCurve(path, 0);
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->curve.pct[0], 100);
  EXPECT_EQ(q->curve.pct[1], 50);
  EXPECT_EQ(q->curve.pct[2], 52);   // 1,200 / 23 = 52.17
  EXPECT_EQ(q->curve.pct[12], 74);  // 1,700 / 23 = 73.9
  EXPECT_EQ(q->curve.pct[23], 98);  // 2,250 / 23 = 97.8
  EXPECT_TRUE(q->observed[0]);
  EXPECT_TRUE(q->observed[1]);
  for (int h = 2; h < 24; ++h) EXPECT_FALSE(q->observed[h]) << h;
}

TEST(QpsCurveDeriver, TreatsAnHourCoveredForLessThanHalfOfItAsAGap) {
  // Hour 1 is covered for 1,799 s only: it is interpolated (from hour 0 alone: flat), and its row
  // does not count.
  TempDir dir;
  const std::string path =
      WriteFile(dir, "qps.csv", std::string(kQpsHeader) + Row(0, "1") + Row(kH + 1798, "1000"));
  auto q = DeriveQpsCurve(path, 0);
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_TRUE(q->observed[0]);
  EXPECT_FALSE(q->observed[1]);
  for (int h = 0; h < 24; ++h) EXPECT_EQ(q->curve.pct[h], 100) << h;
}

TEST(QpsCurveDeriver, ShiftsTheCurveByTheUtcOffset) {
  TempDir dir;
  const std::string path = WriteFile(dir, "qps.csv",
                                     std::string(kQpsHeader) + Row(0, "1") + Row(5 * kH, "2") + Row(20 * kH, "4") +
                                         Row(24 * kH - 1, "0"));
  auto utc = DeriveCurveFromQps(path, 0);
  ASSERT_TRUE(utc.ok()) << utc.status().message();
  for (int offset : {-12, -5, 8, 14}) {
    auto local = DeriveCurveFromQps(path, offset);
    ASSERT_TRUE(local.ok()) << local.status().message();
    for (int h = 0; h < 24; ++h) EXPECT_EQ(local->pct[(h + offset + 24) % 24], utc->pct[h]) << offset << " " << h;
  }
}

TEST(QpsCurveDeriver, PutsFractionalTimestampsInTheirWholeSecondAndRoundsValuesToMillionths) {
  // 3599.9 is still hour 0; 0.0000005 rounds up to one millionth, 0.00000049 down to none.
  TempDir dir;
  const std::string path = WriteFile(dir, "qps.csv",
                                     std::string(kQpsHeader) + "0,0.00000049,a,t\n3599.9,0.0000005,a,t\n" +
                                         "3600,0.000002,a,t\n7199,0,a,t\n");
  auto c = DeriveCurveFromQps(path, 0);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->pct[0], 50);
  EXPECT_EQ(c->pct[1], 100);
}

TEST(QpsCurveDeriver, RejectsAHeaderWithoutValueNamingLineOne) {
  TempDir dir;
  const std::string path = WriteFile(dir, "qps.csv", "timestamp_anon,qps\n0,1\n");
  EXPECT_TRUE(IsBadInput(DeriveQpsCurve(path, 8), AtLine(path, 1) + "missing column 'value'"));
}

TEST(QpsCurveDeriver, RejectsAMalformedTimestampNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "qps.csv", std::string(kQpsHeader) + Row(0, "1") + "1e9,1,a,t\n");
  EXPECT_TRUE(
      IsBadInput(DeriveQpsCurve(path, 8), AtColumn(path, 3, "timestamp_anon"), "'1e9' is not a decimal number"));
}

TEST(QpsCurveDeriver, RejectsANegativeValueNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "qps.csv", std::string(kQpsHeader) + Row(0, "-0.5"));
  EXPECT_TRUE(IsBadInput(DeriveQpsCurve(path, 8), AtColumn(path, 2, "value"), "negative value -0.5"));
}

TEST(QpsCurveDeriver, RejectsAnEmptyValueNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "qps.csv", std::string(kQpsHeader) + Row(0, "1") + Row(60, ""));
  EXPECT_TRUE(IsBadInput(DeriveQpsCurve(path, 8), AtColumn(path, 3, "value"), "empty value"));
}

TEST(QpsCurveDeriver, RejectsAValueAboveAMillionNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "qps.csv", std::string(kQpsHeader) + Row(0, "1000000.5"));
  EXPECT_TRUE(IsBadInput(DeriveQpsCurve(path, 8), AtColumn(path, 2, "value"), "exceeds the limit 1000000"));
}

TEST(QpsCurveDeriver, RejectsATraceSpanningMoreThan366DaysNamingTheRowThatStretchesIt) {
  TempDir dir;
  const int64_t days366 = 366 * 24 * kH;
  const std::string path =
      WriteFile(dir, "qps.csv", std::string(kQpsHeader) + Row(0, "1") + Row(days366, "1") + Row(days366 + 1, "1"));
  EXPECT_TRUE(IsBadInput(DeriveQpsCurve(path, 8), AtColumn(path, 4, "timestamp_anon"), "more than 366 days"));
}

TEST(QpsCurveDeriver, RejectsATraceShorterThanHalfAnHourNamingTheFile) {
  TempDir dir;
  const std::string path = WriteFile(dir, "qps.csv", std::string(kQpsHeader) + Row(0, "1") + Row(1000, "1"));
  EXPECT_TRUE(IsBadInput(DeriveQpsCurve(path, 8), path + ": ", "covers no local hour for half of it"));
}

TEST(QpsCurveDeriver, RejectsATraceWhoseValuesAreAllZeroNamingTheValueColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "qps.csv", std::string(kQpsHeader) + Row(0, "0") + Row(2 * kH, "0.0"));
  EXPECT_TRUE(IsBadInput(DeriveQpsCurve(path, 8), path + ": column 'value': ", "every value"));
}

TEST(QpsCurveDeriver, RejectsAHeaderWithoutRowsNamingTheFile) {
  TempDir dir;
  const std::string path = WriteFile(dir, "qps.csv", kQpsHeader);
  EXPECT_TRUE(IsBadInput(DeriveQpsCurve(path, 8), path + ": no rows"));
}

TEST(QpsCurveDeriver, RejectsAnEmptyOrAbsentFileNamingIt) {
  TempDir dir;
  const std::string empty = WriteFile(dir, "qps.csv", "");
  EXPECT_TRUE(IsBadInput(DeriveQpsCurve(empty, 8), AtLine(empty, 1), "empty file"));
  const std::string absent = (dir.path() / "absent.csv").string();
  EXPECT_TRUE(IsBadInput(DeriveQpsCurve(absent, 8), absent + ": ", "cannot open file"));
}

TEST(QpsCurveDeriver, RejectsAUtcOffsetOutsideTheRealTimeZones) {
  TempDir dir;
  const std::string path = WriteFile(dir, "qps.csv", std::string(kQpsHeader) + Row(0, "1") + Row(2 * kH, "1"));
  EXPECT_TRUE(IsBadInput(DeriveQpsCurve(path, 15), "UTC offset 15 h: ", "[-12, 14]"));
  EXPECT_TRUE(IsBadInput(DeriveQpsCurve(path, -13), "UTC offset -13 h: ", "[-12, 14]"));
}

// ---------------------------------------------------------------------------------------------
// The checked-in curve of the public trace

const std::string kQps = testing::SharedFile("traces/alibaba-genai-v2026/qps.csv");
const std::string kGenAiCurve = std::string(ESTUARY_SOURCE_DIR) + "/examples/curves/genai-diurnal.csv";

TEST(GenAiDiurnalCurve, TheCheckedInFileEqualsAFreshDerivationFromTheTrace) {
  ESTUARY_REQUIRE_SHARED_FILES(kQps);
  auto derived = DeriveQpsCurve(kQps, kGenAiDefaultUtcOffsetH);
  ASSERT_TRUE(derived.ok()) << derived.status().message();
  auto checked_in = ReadDemandCurve(kGenAiCurve);
  ASSERT_TRUE(checked_in.ok()) << checked_in.status().message();
  EXPECT_EQ(derived->curve, *checked_in) << "regenerate with: estuary curve --qps ../shared/traces/"
                                            "alibaba-genai-v2026/qps.csv --out examples/curves/genai-diurnal.csv";
  // The trace covers 09:19:36 to 07:38:09 local time: only 8:00-9:00 is filled in.
  EXPECT_EQ(derived->rows, 24627);
  for (int h = 0; h < 24; ++h) EXPECT_EQ(derived->observed[h], h != 8) << h;
}

TEST(GenAiDiurnalCurve, HasItsTroughAtNightAndItsPeakInTheAfternoon) {
  auto c = ReadDemandCurve(kGenAiCurve);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->pct[16], 100);
  for (int h : {4, 5, 6, 7}) EXPECT_LE(c->pct[h], 1) << h;
  for (int h : {10, 11, 12, 14, 15, 16, 17, 18}) {  // 13:00-14:00 holds a sharp dip (docs/tidal-curve.md)
    EXPECT_GE(c->pct[h], 50) << h;
  }
}

}  // namespace
}  // namespace estuary
