// Bad-input specification of the trace readers: every malformed node list, task list or reference
// file is a kInvalidArgument Status (exit code 2) with a one-line message that starts with
// "file:line: " and names the column when one is at fault. Line 1 is the header; the first data
// row is line 2. Good files read back with exact field values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/status.h"
#include "sim/outputs.h"
#include "sim/replay.h"
#include "sim/trace/openb_reader.h"

#include "tests/testing/bad_input.h"
#include "tests/testing/temp_dir.h"

namespace estuary {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kNodeHeader[] = "sn,cpu_milli,memory_mib,gpu,model\n";
constexpr char kTaskHeader[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
    "scheduled_time\n";
constexpr char kGoodTask[] = "ok-0,1000,2048,1,1000,,LS,Running,0,100,0\n";  // line 2 in the files below

using estuary::testing::TempDir;
using estuary::testing::WriteFile;

using estuary::testing::AtColumn;
using estuary::testing::AtLine;
using estuary::testing::IsBadInput;

// ---------------------------------------------------------------------------------------------
// Node list: sn, cpu_milli, memory_mib, gpu, model

TEST(OpenbNodeReader, ReadsEveryFieldOfEachRowWithItsLineNumber) {
  TempDir dir;
  const std::string path = WriteFile(dir, "nodes.csv",
                                     std::string(kNodeHeader) +
                                         "cpu-node,64000,262144,0,\n"
                                         "gpu-node,96000,786432,16,V100M32\n");
  auto nodes = ReadOpenbNodes(path);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 2u);
  const NodeRow& cpu = (*nodes)[0];
  EXPECT_EQ(cpu.line, 2u);
  EXPECT_EQ(cpu.name, "cpu-node");
  EXPECT_EQ(cpu.cpu_milli, 64000);
  EXPECT_EQ(cpu.mem_mib, 262144);
  EXPECT_EQ(cpu.gpus, 0);
  EXPECT_EQ(cpu.model, "");
  const NodeRow& gpu = (*nodes)[1];
  EXPECT_EQ(gpu.line, 3u);
  EXPECT_EQ(gpu.name, "gpu-node");
  EXPECT_EQ(gpu.cpu_milli, 96000);
  EXPECT_EQ(gpu.mem_mib, 786432);
  EXPECT_EQ(gpu.gpus, 16);
  EXPECT_EQ(gpu.model, "V100M32");
}

TEST(OpenbNodeReader, FindsColumnsByHeaderNameInAnyOrderIgnoringExtraColumns) {
  TempDir dir;
  const std::string path =
      WriteFile(dir, "nodes.csv", "model,gpu,rack,sn,memory_mib,cpu_milli\nT4,2,r1,n1,1024,8000\n");
  auto nodes = ReadOpenbNodes(path);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].name, "n1");
  EXPECT_EQ((*nodes)[0].cpu_milli, 8000);
  EXPECT_EQ((*nodes)[0].mem_mib, 1024);
  EXPECT_EQ((*nodes)[0].gpus, 2);
  EXPECT_EQ((*nodes)[0].model, "T4");
}

TEST(OpenbNodeReader, RejectsAHeaderWithoutTheModelColumnNamingLineOne) {
  TempDir dir;
  const std::string path = WriteFile(dir, "nodes.csv", "sn,cpu_milli,memory_mib,gpu\nn1,32000,65536,0\n");
  EXPECT_TRUE(IsBadInput(ReadOpenbNodes(path), AtLine(path, 1) + "missing column 'model'"));
}

TEST(OpenbNodeReader, RejectsNonNumericCpuMilliNamingLineAndColumn) {
  TempDir dir;
  const std::string path =
      WriteFile(dir, "nodes.csv", std::string(kNodeHeader) + "n1,32000,65536,2,T4\nn2,32k,65536,2,T4\n");
  EXPECT_TRUE(IsBadInput(ReadOpenbNodes(path), AtColumn(path, 3, "cpu_milli"), "'32k' is not an integer"));
}

TEST(OpenbNodeReader, RejectsNegativeMemoryNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "nodes.csv", std::string(kNodeHeader) + "n1,32000,-1,2,T4\n");
  EXPECT_TRUE(IsBadInput(ReadOpenbNodes(path), AtColumn(path, 2, "memory_mib"), "negative value -1"));
}

TEST(OpenbNodeReader, RejectsMoreThanSixteenGpusNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "nodes.csv",
                                     std::string(kNodeHeader) + "n1,32000,65536,16,T4\nn2,32000,65536,17,T4\n");
  EXPECT_TRUE(IsBadInput(ReadOpenbNodes(path), AtColumn(path, 3, "gpu"), "17 GPUs exceed the limit of 16"));
}

TEST(OpenbNodeReader, RejectsAGpuNodeWithAnEmptyModelNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "nodes.csv", std::string(kNodeHeader) + "n1,32000,65536,0,\nn2,32000,65536,4,\n");
  EXPECT_TRUE(IsBadInput(ReadOpenbNodes(path), AtColumn(path, 3, "model"), "needs a GPU model"));
}

TEST(OpenbNodeReader, RejectsAnEmptyFileNamingLineOne) {
  TempDir dir;
  const std::string path = WriteFile(dir, "nodes.csv", "");
  EXPECT_TRUE(IsBadInput(ReadOpenbNodes(path), AtLine(path, 1), "empty file"));
}

TEST(OpenbNodeReader, RejectsAHeaderWithoutNodesNamingTheFile) {
  TempDir dir;
  const std::string path = WriteFile(dir, "nodes.csv", kNodeHeader);
  EXPECT_TRUE(IsBadInput(ReadOpenbNodes(path), path + ": ", "no nodes"));
}

TEST(OpenbNodeReader, RejectsAFileThatDoesNotExistNamingIt) {
  TempDir dir;
  const std::string path = (dir.path() / "absent.csv").string();
  EXPECT_TRUE(IsBadInput(ReadOpenbNodes(path), path + ": ", "cannot open"));
}

TEST(OpenbNodeReader, RejectsADirectoryGivenAsTheNodeListNamingIt) {
  TempDir dir;
  const std::string path = dir.path().string();
  EXPECT_TRUE(IsBadInput(ReadOpenbNodes(path), path + ":"));
}

TEST(OpenbNodeReader, RejectsARowWithTooFewColumnsNamingItsLine) {
  TempDir dir;
  const std::string path =
      WriteFile(dir, "nodes.csv", std::string(kNodeHeader) + "n1,32000,65536,2,T4\nn2,32000,65536,2\n");
  EXPECT_TRUE(IsBadInput(ReadOpenbNodes(path), AtLine(path, 3) + "malformed row: too few columns"));
}

TEST(OpenbNodeReader, RejectsARowWithTooManyColumnsNamingItsLine) {
  TempDir dir;
  const std::string path = WriteFile(dir, "nodes.csv", std::string(kNodeHeader) + "n1,32000,65536,2,T4,extra\n");
  EXPECT_TRUE(IsBadInput(ReadOpenbNodes(path), AtLine(path, 2) + "malformed row: too many columns"));
}

TEST(OpenbNodeReader, RejectsAnUnclosedQuoteNamingItsLine) {
  TempDir dir;
  const std::string path = WriteFile(dir, "nodes.csv", std::string(kNodeHeader) + "\"n1,32000,65536,2,T4\n");
  EXPECT_TRUE(IsBadInput(ReadOpenbNodes(path), AtLine(path, 2), "malformed CSV"));
}

TEST(OpenbCluster, RejectsADuplicateNodeNameNamingTheLineOfTheDuplicate) {
  TempDir dir;
  const std::string path = WriteFile(dir, "nodes.csv",
                                     std::string(kNodeHeader) +
                                         "n1,32000,65536,2,T4\n"
                                         "n2,32000,65536,2,T4\n"
                                         "n1,64000,65536,8,V100\n");
  auto nodes = ReadOpenbNodes(path);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_TRUE(IsBadInput(BuildCluster(*nodes, path), AtColumn(path, 4, "sn"), "duplicate node name 'n1'"));
}

// ---------------------------------------------------------------------------------------------
// Task list: name, cpu_milli, memory_mib, num_gpu, gpu_milli[, gpu_spec, qos, pod_phase,
// creation_time, deletion_time, scheduled_time]

// A task file holding one good row (line 2) and then `row` (line 3).
std::string TaskFileWithThirdLine(const TempDir& dir, const std::string& row) {
  return WriteFile(dir, "pods.csv", std::string(kTaskHeader) + kGoodTask + row + "\n");
}

TEST(OpenbTaskReader, ReadsEveryFieldOfEachRowIncludingTimes) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pods.csv",
                                     std::string(kTaskHeader) +
                                         "pod-a,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
                                         "pod-b,6000,12288,1,460,V100M16|V100M32,BE,Failed,427061,12902960,427070\n");
  auto tasks = ReadOpenbTasks(path);
  ASSERT_TRUE(tasks.ok()) << tasks.status().message();
  EXPECT_EQ(tasks->path, path);
  EXPECT_TRUE(tasks->has_time_columns);
  ASSERT_EQ(tasks->rows.size(), 2u);
  const OpenbTaskRow& a = tasks->rows[0];
  EXPECT_EQ(a.line, 2u);
  EXPECT_EQ(a.name, "pod-a");
  EXPECT_EQ(a.cpu_milli, 12000);
  EXPECT_EQ(a.mem_mib, 16384);
  EXPECT_EQ(a.num_gpu, 1);
  EXPECT_EQ(a.gpu_milli, 1000);
  EXPECT_EQ(a.gpu_spec, "");
  EXPECT_EQ(a.qos, "LS");
  EXPECT_EQ(a.phase, "Running");
  EXPECT_EQ(a.creation_time, std::optional<int64_t>(0));
  EXPECT_EQ(a.deletion_time, std::optional<int64_t>(12537496));
  EXPECT_EQ(a.scheduled_time, std::optional<int64_t>(0));
  const OpenbTaskRow& b = tasks->rows[1];
  EXPECT_EQ(b.line, 3u);
  EXPECT_EQ(b.name, "pod-b");
  EXPECT_EQ(b.cpu_milli, 6000);
  EXPECT_EQ(b.mem_mib, 12288);
  EXPECT_EQ(b.num_gpu, 1);
  EXPECT_EQ(b.gpu_milli, 460);
  EXPECT_EQ(b.gpu_spec, "V100M16|V100M32");
  EXPECT_EQ(b.qos, "BE");
  EXPECT_EQ(b.phase, "Failed");
  EXPECT_EQ(b.creation_time, std::optional<int64_t>(427061));
  EXPECT_EQ(b.deletion_time, std::optional<int64_t>(12902960));
  EXPECT_EQ(b.scheduled_time, std::optional<int64_t>(427070));
}

TEST(OpenbTaskReader, ReadsAFiveColumnMultigpuListWithoutTimeColumns) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pods.csv",
                                     "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                                     "pod-a,12000,16384,8,1000\n"
                                     "pod-b,4000,8192,0,0\n");
  auto tasks = ReadOpenbTasks(path);
  ASSERT_TRUE(tasks.ok()) << tasks.status().message();
  EXPECT_FALSE(tasks->has_time_columns);
  ASSERT_EQ(tasks->rows.size(), 2u);
  EXPECT_EQ(tasks->rows[0].num_gpu, 8);
  EXPECT_EQ(tasks->rows[0].gpu_milli, 1000);
  EXPECT_EQ(tasks->rows[1].line, 3u);
  EXPECT_EQ(tasks->rows[1].cpu_milli, 4000);
  EXPECT_EQ(tasks->rows[1].num_gpu, 0);
  EXPECT_EQ(tasks->rows[1].gpu_spec, "");
  EXPECT_FALSE(tasks->rows[1].creation_time.has_value());
  EXPECT_FALSE(tasks->rows[1].deletion_time.has_value());
}

TEST(OpenbTaskReader, RejectsAHeaderWithoutNumGpuNamingLineOneAndTheColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pods.csv", "name,cpu_milli,memory_mib,gpu_milli\np,1000,1024,1000\n");
  EXPECT_TRUE(IsBadInput(ReadOpenbTasks(path), AtLine(path, 1) + "missing column 'num_gpu'"));
}

TEST(OpenbTaskReader, RejectsNonNumericGpuMilliNamingLineAndColumn) {
  TempDir dir;
  const std::string path = TaskFileWithThirdLine(dir, "p,1000,1024,1,half,,LS,Running,0,100,0");
  EXPECT_TRUE(IsBadInput(ReadOpenbTasks(path), AtColumn(path, 3, "gpu_milli"), "'half' is not an integer"));
}

TEST(OpenbTaskReader, RejectsNegativeCpuMilliNamingLineAndColumn) {
  TempDir dir;
  const std::string path = TaskFileWithThirdLine(dir, "p,-1000,1024,1,1000,,LS,Running,0,100,0");
  EXPECT_TRUE(IsBadInput(ReadOpenbTasks(path), AtColumn(path, 3, "cpu_milli"), "negative value -1000"));
}

TEST(OpenbTaskReader, RejectsGpuMilliAboveOneThousandNamingLineAndColumn) {
  TempDir dir;
  const std::string path = TaskFileWithThirdLine(dir, "p,1000,1024,1,1200,,LS,Running,0,100,0");
  EXPECT_TRUE(IsBadInput(ReadOpenbTasks(path), AtColumn(path, 3, "gpu_milli"), "value 1200 exceeds 1000"));
}

TEST(OpenbTaskReader, RejectsAGpuShareWithoutAnyGpuNamingLineAndColumn) {
  TempDir dir;
  const std::string path = TaskFileWithThirdLine(dir, "p,1000,1024,0,500,,LS,Running,0,100,0");
  EXPECT_TRUE(IsBadInput(ReadOpenbTasks(path), AtColumn(path, 3, "gpu_milli"), "num_gpu 0 with gpu_milli 500"));
}

TEST(OpenbTaskReader, RejectsAFractionalShareOfSeveralGpusNamingLineAndColumn) {
  TempDir dir;
  const std::string path = TaskFileWithThirdLine(dir, "p,1000,1024,2,500,,LS,Running,0,100,0");
  EXPECT_TRUE(IsBadInput(ReadOpenbTasks(path), AtColumn(path, 3, "gpu_milli"), "needs num_gpu 1, got 2"));
}

TEST(OpenbTaskReader, RejectsMoreThanSixteenGpusNamingLineAndColumn) {
  TempDir dir;
  const std::string path = TaskFileWithThirdLine(dir, "p,1000,1024,17,1000,,LS,Running,0,100,0");
  EXPECT_TRUE(IsBadInput(ReadOpenbTasks(path), AtColumn(path, 3, "num_gpu"), "17 GPUs exceed the limit of 16"));
}

TEST(OpenbTaskReader, RejectsAnEmptyTaskNameNamingLineAndColumn) {
  TempDir dir;
  const std::string path = TaskFileWithThirdLine(dir, ",1000,1024,1,1000,,LS,Running,0,100,0");
  EXPECT_TRUE(IsBadInput(ReadOpenbTasks(path), AtColumn(path, 3, "name"), "empty task name"));
}

TEST(OpenbTaskReader, RejectsANonNumericCreationTimeNamingLineAndColumn) {
  TempDir dir;
  const std::string path = TaskFileWithThirdLine(dir, "p,1000,1024,1,1000,,LS,Running,yesterday,100,0");
  EXPECT_TRUE(IsBadInput(ReadOpenbTasks(path), AtColumn(path, 3, "creation_time"), "'yesterday' is not an integer"));
}

TEST(OpenbTaskReader, RejectsARowWithTooFewColumnsNamingItsLine) {
  TempDir dir;
  const std::string path = TaskFileWithThirdLine(dir, "p,1000,1024,1,1000");
  EXPECT_TRUE(IsBadInput(ReadOpenbTasks(path), AtLine(path, 3) + "malformed row: too few columns"));
}

TEST(OpenbTaskReader, RejectsARowWithTooManyColumnsNamingItsLine) {
  TempDir dir;
  const std::string path = TaskFileWithThirdLine(dir, "p,1000,1024,1,1000,,LS,Running,0,100,0,surplus");
  EXPECT_TRUE(IsBadInput(ReadOpenbTasks(path), AtLine(path, 3) + "malformed row: too many columns"));
}

TEST(OpenbTaskReader, RejectsAHeaderWithoutTasksNamingTheFile) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pods.csv", kTaskHeader);
  EXPECT_TRUE(IsBadInput(ReadOpenbTasks(path), path + ": ", "no tasks"));
}

TEST(OpenbTaskReader, RejectsAFileThatDoesNotExistNamingIt) {
  TempDir dir;
  const std::string path = (dir.path() / "absent.csv").string();
  EXPECT_TRUE(IsBadInput(ReadOpenbTasks(path), path + ": ", "cannot open"));
}

// The cluster of these tests has V100M32 nodes only.
class OpenbRequestsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nodes_path_ = WriteFile(dir_, "nodes.csv", std::string(kNodeHeader) + "n1,32000,65536,8,V100M32\n");
    auto nodes = ReadOpenbNodes(nodes_path_);
    ASSERT_TRUE(nodes.ok()) << nodes.status().message();
    auto cluster = BuildCluster(*nodes, nodes_path_);
    ASSERT_TRUE(cluster.ok()) << cluster.status().message();
    cluster_ = std::move(cluster).value();
  }
  TempDir dir_;
  std::string nodes_path_;
  ClusterState cluster_;
};

TEST_F(OpenbRequestsTest, RejectsAGpuModelNoNodeHasNamingTheTaskLineAndGpuSpec) {
  const std::string path = TaskFileWithThirdLine(dir_, "p,1000,1024,1,1000,A100,LS,Running,0,100,0");
  auto tasks = ReadOpenbTasks(path);
  ASSERT_TRUE(tasks.ok()) << tasks.status().message();
  EXPECT_TRUE(IsBadInput(OpenbRequests(*tasks, cluster_.models()), AtColumn(path, 3, "gpu_spec"), "'A100'"));
}

TEST_F(OpenbRequestsTest, RejectsASpecListWithOneUnknownModelAmongKnownOnes) {
  const std::string path = TaskFileWithThirdLine(dir_, "p,1000,1024,1,1000,V100M32|A100,LS,Running,0,100,0");
  auto tasks = ReadOpenbTasks(path);
  ASSERT_TRUE(tasks.ok()) << tasks.status().message();
  EXPECT_TRUE(IsBadInput(OpenbRequests(*tasks, cluster_.models()), AtColumn(path, 3, "gpu_spec"), "'A100'"));
}

TEST_F(OpenbRequestsTest, TranslatesEachRowIntoARequestWithItsResources) {
  const std::string path = TaskFileWithThirdLine(dir_, "p,500,256,1,250,V100M32,LS,Running,5,9,5");
  auto tasks = ReadOpenbTasks(path);
  ASSERT_TRUE(tasks.ok()) << tasks.status().message();
  auto reqs = OpenbRequests(*tasks, cluster_.models());
  ASSERT_TRUE(reqs.ok()) << reqs.status().message();
  ASSERT_EQ(reqs->size(), 2u);
  EXPECT_EQ((*reqs)[1].cpu_milli, 500);
  EXPECT_EQ((*reqs)[1].mem_mib, 256);
  EXPECT_EQ((*reqs)[1].gpu_count, 1);
  EXPECT_EQ((*reqs)[1].gpu_milli, 250);
}

// ---------------------------------------------------------------------------------------------
// Replay workload: every task needs creation_time <= deletion_time.

class ReplayWorkloadTest : public OpenbRequestsTest {
 protected:
  StatusOr<ReplayWorkload> Make(const std::string& pods_text) {
    pods_path_ = WriteFile(dir_, "pods.csv", pods_text);
    auto tasks = ReadOpenbTasks(pods_path_);
    if (!tasks.ok()) return tasks.status();
    auto reqs = OpenbRequests(*tasks, cluster_.models());
    if (!reqs.ok()) return reqs.status();
    return MakeReplayWorkload(cluster_, *tasks, std::move(reqs).value());
  }
  std::string pods_path_;
};

TEST_F(ReplayWorkloadTest, RejectsATaskListWithoutTimeColumnsNamingTheFileAndCreationTime) {
  auto w = Make("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,1024,1,1000\n");
  EXPECT_TRUE(IsBadInput(w, AtLine(pods_path_, 1), "'creation_time'"));
}

TEST_F(ReplayWorkloadTest, RejectsAnEmptyCreationTimeNamingLineAndColumn) {
  auto w = Make(std::string(kTaskHeader) + kGoodTask + "p,1000,1024,1,1000,,LS,Running,,100,0\n");
  EXPECT_TRUE(IsBadInput(w, AtColumn(pods_path_, 3, "creation_time"), "empty"));
}

TEST_F(ReplayWorkloadTest, RejectsAnEmptyDeletionTimeNamingLineAndColumn) {
  auto w = Make(std::string(kTaskHeader) + kGoodTask + "p,1000,1024,1,1000,,LS,Running,5,,0\n");
  EXPECT_TRUE(IsBadInput(w, AtColumn(pods_path_, 3, "deletion_time"), "empty"));
}

TEST_F(ReplayWorkloadTest, RejectsADeletionBeforeTheCreationNamingLineAndColumn) {
  auto w = Make(std::string(kTaskHeader) + kGoodTask + "p,1000,1024,1,1000,,LS,Running,500,400,0\n");
  EXPECT_TRUE(IsBadInput(w, AtColumn(pods_path_, 3, "deletion_time"), "400 precedes creation_time 500"));
}

TEST_F(ReplayWorkloadTest, TurnsTimesIntoArrivalAndRuntime) {
  auto w = Make(std::string(kTaskHeader) + kGoodTask + "p,1000,1024,1,1000,,LS,Running,500,650,0\n");
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_EQ(w->tasks.size(), 2u);
  EXPECT_EQ(w->tasks[1].name, "p");
  EXPECT_EQ(w->tasks[1].creation, 500);
  EXPECT_EQ(w->tasks[1].runtime, 150);
}

// ---------------------------------------------------------------------------------------------
// Reference results: trace,policy,tune,seed,total_gpus,0,1,...,130

std::string ReferenceHeader() {
  std::string h = "trace,policy,tune,seed,total_gpus";
  for (int x = 0; x <= 130; ++x) h += "," + std::to_string(x);
  return h + "\n";
}

// A well-formed row whose value at arrived-demand % x is x / 2, except `override_at` -> `value`.
std::string ReferenceRow(const std::string& trace, const std::string& policy, const std::string& seed,
                         int override_at = -1, const std::string& value = "") {
  std::string r = trace + "," + policy + ",1.3," + seed + ",6212";
  for (int x = 0; x <= 130; ++x) r += "," + (x == override_at ? value : std::to_string(x / 2.0));
  return r + "\n";
}

TEST(PublishedOpenbReader, ReadsTheCurvesOfTheRequestedTraceOnly) {
  TempDir dir;
  const std::string path = WriteFile(dir, "ref.csv",
                                     ReferenceHeader() + ReferenceRow("default", "fgd", "42") +
                                         ReferenceRow("default", "fgd", "43", 130, "70") +
                                         ReferenceRow("cpu050", "fgd", "42", 130, "99"));
  auto ref = ReadPublishedOpenb(path, "default");
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  EXPECT_EQ(ref->trace, "default");
  ASSERT_EQ(ref->by_policy.size(), 1u);
  ASSERT_EQ(ref->by_policy.at("fgd").size(), 2u);
  auto end = ref->EndMean("fgd", {42, 43});
  ASSERT_TRUE(end.has_value());
  EXPECT_DOUBLE_EQ(*end, (65.0 + 70.0) / 2);
}

TEST(PublishedOpenbReader, RejectsARowWithTheWrongColumnCountNamingItsLine) {
  TempDir dir;
  const std::string path =
      WriteFile(dir, "ref.csv", ReferenceHeader() + ReferenceRow("default", "fgd", "42") + "default,fgd,1.3,43\n");
  EXPECT_TRUE(IsBadInput(ReadPublishedOpenb(path, "default"), AtLine(path, 3) + "malformed row: 4 columns"));
}

TEST(PublishedOpenbReader, RejectsANonNumericValueNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "ref.csv",
                                     ReferenceHeader() + ReferenceRow("default", "fgd", "42") +
                                         ReferenceRow("default", "fgd", "43", 57, "n/a"));
  EXPECT_TRUE(IsBadInput(ReadPublishedOpenb(path, "default"), AtColumn(path, 3, "57"), "'n/a' is not a number"));
}

TEST(PublishedOpenbReader, RejectsANonNumericSeedNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "ref.csv", ReferenceHeader() + ReferenceRow("default", "fgd", "x42"));
  EXPECT_TRUE(IsBadInput(ReadPublishedOpenb(path, "default"), AtColumn(path, 2, "seed"), "'x42' is not an integer"));
}

TEST(PublishedOpenbReader, RejectsAnUnexpectedHeaderNamingLineOne) {
  TempDir dir;
  const std::string path = WriteFile(dir, "ref.csv", "trace,policy,seed\ndefault,fgd,42\n");
  EXPECT_TRUE(IsBadInput(ReadPublishedOpenb(path, "default"), AtLine(path, 1), "expected columns"));
}

TEST(PublishedOpenbReader, RejectsATraceWithoutRowsNamingTheFileAndTrace) {
  TempDir dir;
  const std::string path = WriteFile(dir, "ref.csv", ReferenceHeader() + ReferenceRow("cpu050", "fgd", "42"));
  EXPECT_TRUE(IsBadInput(ReadPublishedOpenb(path, "default"), path + ": ", "no rows for trace 'default'"));
}

TEST(PublishedOpenbReader, RejectsAFileThatDoesNotExistNamingIt) {
  TempDir dir;
  const std::string path = (dir.path() / "absent.csv").string();
  EXPECT_TRUE(IsBadInput(ReadPublishedOpenb(path, "default"), path + ": ", "cannot open"));
}

}  // namespace
}  // namespace estuary
