// The spot-GPU node table (header row; first node on line 2) and the headerless PAI machine table
// (first machine on line 1): the real tables load with their published totals, good files read
// back with exact field values and unit conversions (cores -> milli-CPU, GiB -> MiB), and every
// bad input is a kInvalidArgument Status (exit code 2) with a one-line message that starts with
// "file:line: " and names the column when one is at fault.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "sim/trace/node_tables.h"
#include "sim/trace/openb_reader.h"

#include "tests/testing/bad_input.h"
#include "tests/testing/shared_files.h"
#include "tests/testing/temp_dir.h"

namespace estuary {
namespace {

using estuary::testing::TempDir;
using estuary::testing::WriteFile;

const std::string kSpotTable = testing::SharedFile("traces/alibaba-spot-gpu-v2026/node_info_df.csv");
const std::string kPaiTable = testing::SharedFile("traces/alibaba-pai-v2020/pai_machine_spec.csv");

#define REQUIRE_TABLE(path) ESTUARY_REQUIRE_SHARED_FILES(path)

constexpr char kSpotHeader[] = "gpu_model,gpu_capacity_num,cpu_num,node_name\n";
constexpr char kGoodSpotRow[] = "A10,1,128,0\n";                        // line 2 in the files below
constexpr char kGoodPaiRow[] = "aaaa,T4,96,512,2\n";                    // line 1 in the files below

using estuary::testing::AtColumn;
using estuary::testing::AtLine;
using estuary::testing::IsBadInput;

struct Totals {
  size_t nodes = 0;
  int64_t gpus = 0;
  size_t cpu_only = 0;
  MilliCpu cpu_milli = 0;
  MemMiB mem_mib = 0;
  std::set<std::string> models;
};

Totals Sum(const std::vector<NodeRow>& rows) {
  Totals t;
  for (const NodeRow& r : rows) {
    ++t.nodes;
    t.gpus += r.gpus;
    t.cpu_milli += r.cpu_milli;
    t.mem_mib += r.mem_mib;
    if (r.gpus == 0) ++t.cpu_only;
    if (!r.model.empty()) t.models.insert(r.model);
  }
  return t;
}

// ---------------------------------------------------------------------------------------------
// The real tables

TEST(SpotGpuTable, TheRealTableLoads4278NodesWith10412GpusOfSixModels) {
  REQUIRE_TABLE(kSpotTable);
  auto rows = ReadSpotGpuNodes(kSpotTable);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  const Totals t = Sum(*rows);
  EXPECT_EQ(t.nodes, 4278u);
  EXPECT_EQ(t.gpus, 10412);
  EXPECT_EQ(t.cpu_only, 0u);
  EXPECT_EQ(t.cpu_milli, 632636 * int64_t{1000});
  EXPECT_EQ(t.models, (std::set<std::string>{"A10", "A100-SXM4-80GB", "A800-SXM4-80GB", "GPU-series-1",
                                             "GPU-series-2", "H800"}));
  for (const NodeRow& r : *rows) ASSERT_EQ(r.mem_mib, kUnmodeledMemory) << "line " << r.line;
  EXPECT_EQ(rows->front().line, 2u);
  EXPECT_EQ(rows->front().name, "0");
  EXPECT_EQ(rows->back().line, 4279u);
  EXPECT_EQ(rows->back().name, "4340");
}

TEST(SpotGpuTable, TheRealTableBuildsAClusterThatKeepsEveryInvariant) {
  REQUIRE_TABLE(kSpotTable);
  auto rows = ReadSpotGpuNodes(kSpotTable);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  auto cluster = BuildCluster(*rows, kSpotTable);
  ASSERT_TRUE(cluster.ok()) << cluster.status().message();
  EXPECT_EQ(cluster->num_nodes(), 4278u);
  EXPECT_EQ(cluster->models().size(), 6u);
  EXPECT_EQ(cluster->total_gpu_milli(), 10412 * int64_t{kMilliPerGpu});
  EXPECT_EQ(cluster->total_cpu_milli(), 632636 * int64_t{1000});
  const Status inv = cluster->CheckInvariants();
  EXPECT_TRUE(inv.ok()) << inv.message();
}

// Totals counted from the file with awk (-F, : NR count, sum of $5, $2=="CPU", sums of $3 and $4).
TEST(PaiMachineTable, TheRealTableLoads1897MachinesWith6742GpusAnd83CpuOnlyMachines) {
  REQUIRE_TABLE(kPaiTable);
  auto rows = ReadPaiMachines(kPaiTable);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  const Totals t = Sum(*rows);
  EXPECT_EQ(t.nodes, 1897u);
  EXPECT_EQ(t.gpus, 6742);
  EXPECT_EQ(t.cpu_only, 83u);
  EXPECT_EQ(t.cpu_milli, 156576 * int64_t{1000});
  EXPECT_EQ(t.mem_mib, 948224 * int64_t{1024});
  EXPECT_EQ(t.models, (std::set<std::string>{"MISC", "P100", "T4", "V100", "V100M32"}));
  EXPECT_EQ(rows->front().line, 1u);
  EXPECT_EQ(rows->front().name, "7399a758eb02bae1a3621236");
  EXPECT_EQ(rows->front().model, "");
  EXPECT_EQ(rows->back().line, 1897u);
  EXPECT_EQ(rows->back().name, "a12e33726524543425a94398");
  EXPECT_EQ(rows->back().model, "V100M32");
}

TEST(PaiMachineTable, TheRealTableBuildsAClusterThatKeepsEveryInvariant) {
  REQUIRE_TABLE(kPaiTable);
  auto rows = ReadPaiMachines(kPaiTable);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  auto cluster = BuildCluster(*rows, kPaiTable);
  ASSERT_TRUE(cluster.ok()) << cluster.status().message();
  EXPECT_EQ(cluster->num_nodes(), 1897u);
  EXPECT_EQ(cluster->models().size(), 5u);
  EXPECT_EQ(cluster->total_gpu_milli(), 6742 * int64_t{kMilliPerGpu});
  EXPECT_EQ(cluster->total_cpu_milli(), 156576 * int64_t{1000});
  const Status inv = cluster->CheckInvariants();
  EXPECT_TRUE(inv.ok()) << inv.message();
}

// ---------------------------------------------------------------------------------------------
// Spot-GPU table: gpu_model, gpu_capacity_num, cpu_num (cores), node_name; no memory column

TEST(SpotGpuReader, ReadsEveryFieldOfEachRowConvertingCoresToMilliCpu) {
  TempDir dir;
  const std::string path =
      WriteFile(dir, "spot.csv", std::string(kSpotHeader) + "A100-SXM4-80GB,8,128,3\nGPU-series-1,16,192,node-b\n");
  auto rows = ReadSpotGpuNodes(path);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 2u);
  const NodeRow& a = (*rows)[0];
  EXPECT_EQ(a.line, 2u);
  EXPECT_EQ(a.name, "3");
  EXPECT_EQ(a.cpu_milli, 128000);
  EXPECT_EQ(a.mem_mib, kUnmodeledMemory);
  EXPECT_EQ(a.gpus, 8);
  EXPECT_EQ(a.model, "A100-SXM4-80GB");
  const NodeRow& b = (*rows)[1];
  EXPECT_EQ(b.line, 3u);
  EXPECT_EQ(b.name, "node-b");
  EXPECT_EQ(b.cpu_milli, 192000);
  EXPECT_EQ(b.mem_mib, kUnmodeledMemory);
  EXPECT_EQ(b.gpus, 16);
  EXPECT_EQ(b.model, "GPU-series-1");
}

TEST(SpotGpuReader, TheDefaultMemoryIsOnePebibyte) {
  EXPECT_EQ(kUnmodeledMemory, int64_t{1024} * 1024 * 1024);
}

TEST(SpotGpuReader, GivesEveryNodeTheMemoryPassedByTheCaller) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", std::string(kSpotHeader) + kGoodSpotRow + "H800,8,192,1\n");
  auto rows = ReadSpotGpuNodes(path, 2'097'152);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].mem_mib, 2'097'152);
  EXPECT_EQ((*rows)[1].mem_mib, 2'097'152);
}

TEST(SpotGpuReader, FindsColumnsByHeaderNameInAnyOrderIgnoringExtraColumns) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", "node_name,zone,cpu_num,gpu_model,gpu_capacity_num\nn7,z1,96,T4,2\n");
  auto rows = ReadSpotGpuNodes(path);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].name, "n7");
  EXPECT_EQ((*rows)[0].cpu_milli, 96000);
  EXPECT_EQ((*rows)[0].gpus, 2);
  EXPECT_EQ((*rows)[0].model, "T4");
}

TEST(SpotGpuReader, ReadsANodeWithoutGpusAsCpuOnlyWhateverItsModel) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", std::string(kSpotHeader) + "A10,0,64,c1\n,0,64,c2\n");
  auto rows = ReadSpotGpuNodes(path);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].gpus, 0);
  EXPECT_EQ((*rows)[0].model, "");
  EXPECT_EQ((*rows)[1].model, "");
}

TEST(SpotGpuReader, SkipsBlankLinesButCountsThemInLineNumbers) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", std::string(kSpotHeader) + "\nA10,1,128,n1\r\n\n");
  auto rows = ReadSpotGpuNodes(path);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].line, 3u);
  EXPECT_EQ((*rows)[0].name, "n1");
}

TEST(SpotGpuReader, RejectsAHeaderWithoutTheCpuNumColumnNamingLineOne) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", "gpu_model,gpu_capacity_num,node_name\nA10,1,0\n");
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), AtLine(path, 1) + "missing column 'cpu_num'"));
}

TEST(SpotGpuReader, RejectsAHeaderNamingAColumnTwiceNamingLineOne) {
  TempDir dir;
  const std::string path =
      WriteFile(dir, "spot.csv", "gpu_model,gpu_capacity_num,cpu_num,node_name,cpu_num\nA10,1,128,0,128\n");
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), AtLine(path, 1) + "duplicate column 'cpu_num'"));
}

TEST(SpotGpuReader, RejectsNonNumericCpuNumNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", std::string(kSpotHeader) + kGoodSpotRow + "A10,1,lots,1\n");
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), AtColumn(path, 3, "cpu_num"), "'lots' is not an integer"));
}

TEST(SpotGpuReader, RejectsAFractionalCoreCountNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", std::string(kSpotHeader) + kGoodSpotRow + "A10,1,127.5,1\n");
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), AtColumn(path, 3, "cpu_num"), "'127.5' is not an integer"));
}

TEST(SpotGpuReader, RejectsACoreCountWhoseMilliCpuWouldExceedTheFieldLimit) {
  TempDir dir;
  const std::string path =
      WriteFile(dir, "spot.csv", std::string(kSpotHeader) + kGoodSpotRow + "A10,1,1000000001,1\n");
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), AtColumn(path, 3, "cpu_num"), "exceeds the limit 1000000000"));
}

TEST(SpotGpuReader, RejectsANegativeGpuCountNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", std::string(kSpotHeader) + kGoodSpotRow + "A10,-1,128,1\n");
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), AtColumn(path, 3, "gpu_capacity_num"), "negative value -1"));
}

TEST(SpotGpuReader, RejectsMoreThanSixteenGpusNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", std::string(kSpotHeader) + kGoodSpotRow + "A10,17,128,1\n");
  EXPECT_TRUE(
      IsBadInput(ReadSpotGpuNodes(path), AtColumn(path, 3, "gpu_capacity_num"), "17 GPUs exceed the limit of 16"));
}

TEST(SpotGpuReader, RejectsAnEmptyGpuCountNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", std::string(kSpotHeader) + kGoodSpotRow + "A10,,128,1\n");
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), AtColumn(path, 3, "gpu_capacity_num"), "empty value"));
}

TEST(SpotGpuReader, RejectsAGpuNodeWithAnEmptyModelNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", std::string(kSpotHeader) + kGoodSpotRow + ",8,128,1\n");
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), AtColumn(path, 3, "gpu_model"), "needs a GPU model"));
}

TEST(SpotGpuReader, RejectsAModelNameHoldingTheModelListSeparator) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", std::string(kSpotHeader) + kGoodSpotRow + "A10|T4,1,128,1\n");
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), AtColumn(path, 3, "gpu_model"), "one model per node"));
}

TEST(SpotGpuReader, RejectsAnEmptyNodeNameNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", std::string(kSpotHeader) + kGoodSpotRow + "A10,1,128,\n");
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), AtColumn(path, 3, "node_name"), "empty node name"));
}

TEST(SpotGpuReader, RejectsADuplicateNodeNameNamingBothLines) {
  TempDir dir;
  const std::string path =
      WriteFile(dir, "spot.csv", std::string(kSpotHeader) + kGoodSpotRow + "H800,8,192,1\nA10,1,128,0\n");
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), AtColumn(path, 4, "node_name"),
                         "duplicate node name '0' (first on line 2)"));
}

TEST(SpotGpuReader, RejectsARowWithTooFewColumnsNamingItsLine) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", std::string(kSpotHeader) + kGoodSpotRow + "A10,1,128\n");
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), AtLine(path, 3) + "malformed row: too few columns"));
}

TEST(SpotGpuReader, RejectsARowWithTooManyColumnsNamingItsLine) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", std::string(kSpotHeader) + "A10,1,128,0,extra\n");
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), AtLine(path, 2) + "malformed row: too many columns"));
}

TEST(SpotGpuReader, RejectsAnUnclosedQuoteNamingItsLine) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", std::string(kSpotHeader) + "\"A10,1,128,0\n");
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), AtLine(path, 2), "malformed CSV"));
}

TEST(SpotGpuReader, RejectsAnEmptyFileNamingLineOne) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", "");
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), AtLine(path, 1), "empty file"));
}

TEST(SpotGpuReader, RejectsAHeaderWithoutNodesNamingTheFile) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", kSpotHeader);
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), path + ": ", "no nodes"));
}

TEST(SpotGpuReader, RejectsAFileThatDoesNotExistNamingIt) {
  TempDir dir;
  const std::string path = (dir.path() / "absent.csv").string();
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), path + ": ", "cannot open"));
}

TEST(SpotGpuReader, RejectsADirectoryNamingIt) {
  TempDir dir;
  const std::string path = dir.path().string();
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path), path + ": ", "is a directory"));
}

TEST(SpotGpuReader, RejectsANegativeMemoryPerNodeNamingTheFile) {
  TempDir dir;
  const std::string path = WriteFile(dir, "spot.csv", std::string(kSpotHeader) + kGoodSpotRow);
  EXPECT_TRUE(IsBadInput(ReadSpotGpuNodes(path, -1), path + ": ", "memory per node -1 MiB is negative"));
}

// ---------------------------------------------------------------------------------------------
// PAI machine table: machine, gpu_type, cap_cpu (cores), cap_mem (GiB), cap_gpu; no header row

TEST(PaiMachineReader, ReadsEveryFieldOfEachRowConvertingCoresAndGibibytes) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", "m-cpu,CPU,96,512,0\nm-gpu,V100M32,64,384,8\n");
  auto rows = ReadPaiMachines(path);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 2u);
  const NodeRow& cpu = (*rows)[0];
  EXPECT_EQ(cpu.line, 1u);
  EXPECT_EQ(cpu.name, "m-cpu");
  EXPECT_EQ(cpu.cpu_milli, 96000);
  EXPECT_EQ(cpu.mem_mib, 524288);
  EXPECT_EQ(cpu.gpus, 0);
  EXPECT_EQ(cpu.model, "");
  const NodeRow& gpu = (*rows)[1];
  EXPECT_EQ(gpu.line, 2u);
  EXPECT_EQ(gpu.name, "m-gpu");
  EXPECT_EQ(gpu.cpu_milli, 64000);
  EXPECT_EQ(gpu.mem_mib, 393216);
  EXPECT_EQ(gpu.gpus, 8);
  EXPECT_EQ(gpu.model, "V100M32");
}

TEST(PaiMachineReader, ReadsMiscAsAGpuModelLikeAnyOther) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", "m1,MISC,96,512,8\n");
  auto rows = ReadPaiMachines(path);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].gpus, 8);
  EXPECT_EQ((*rows)[0].model, "MISC");
}

TEST(PaiMachineReader, ReadsAGpuTypeWithoutGpusAsACpuOnlyMachine) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", std::string(kGoodPaiRow) + "m2,P100,64,512,0\n");
  auto rows = ReadPaiMachines(path);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1].gpus, 0);
  EXPECT_EQ((*rows)[1].model, "");
}

TEST(PaiMachineReader, SkipsBlankLinesButCountsThemInLineNumbers) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", "\nm1,T4,96,512,2\r\n\n");
  auto rows = ReadPaiMachines(path);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].line, 2u);
}

TEST(PaiMachineReader, RejectsACpuMachineWithGpusNamingLineAndCapGpu) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", std::string(kGoodPaiRow) + "m2,CPU,96,512,2\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtColumn(path, 2, "cap_gpu"), "has 2 GPUs, expected 0"));
}

TEST(PaiMachineReader, RejectsAHeaderRowNamingLineOne) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", "machine,gpu_type,cap_cpu,cap_mem,cap_gpu\n" + std::string(kGoodPaiRow));
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtLine(path, 1), "has none"));
}

TEST(PaiMachineReader, RejectsNonNumericCapCpuNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", std::string(kGoodPaiRow) + "m2,T4,many,512,2\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtColumn(path, 2, "cap_cpu"), "'many' is not an integer"));
}

TEST(PaiMachineReader, RejectsFractionalMemoryNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", std::string(kGoodPaiRow) + "m2,T4,96,511.5,2\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtColumn(path, 2, "cap_mem"), "'511.5' is not an integer"));
}

TEST(PaiMachineReader, RejectsNegativeMemoryNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", std::string(kGoodPaiRow) + "m2,T4,96,-512,2\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtColumn(path, 2, "cap_mem"), "negative value -512"));
}

TEST(PaiMachineReader, RejectsMemoryWhoseMibWouldExceedTheFieldLimit) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", std::string(kGoodPaiRow) + "m2,T4,96,976562501,2\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtColumn(path, 2, "cap_mem"), "exceeds the limit 976562500"));
}

TEST(PaiMachineReader, RejectsANegativeCoreCountNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", std::string(kGoodPaiRow) + "m2,T4,-96,512,2\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtColumn(path, 2, "cap_cpu"), "negative value -96"));
}

TEST(PaiMachineReader, RejectsMoreThanSixteenGpusNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", std::string(kGoodPaiRow) + "m2,V100,96,512,17\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtColumn(path, 2, "cap_gpu"), "17 GPUs exceed the limit of 16"));
}

TEST(PaiMachineReader, RejectsAFractionalGpuCountNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", std::string(kGoodPaiRow) + "m2,V100,96,512,0.5\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtColumn(path, 2, "cap_gpu"), "'0.5' is not an integer"));
}

TEST(PaiMachineReader, RejectsAnEmptyGpuTypeNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", std::string(kGoodPaiRow) + "m2,,96,512,8\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtColumn(path, 2, "gpu_type"), "empty GPU type"));
}

TEST(PaiMachineReader, RejectsAnEmptyGpuTypeEvenWithoutGpus) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", std::string(kGoodPaiRow) + "m2,,96,512,0\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtColumn(path, 2, "gpu_type"), "CPU-only machines say 'CPU'"));
}

TEST(PaiMachineReader, RejectsATypeHoldingTheModelListSeparator) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", std::string(kGoodPaiRow) + "m2,T4|P100,96,512,2\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtColumn(path, 2, "gpu_type"), "one model per node"));
}

TEST(PaiMachineReader, RejectsAnEmptyMachineNameNamingLineAndColumn) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", std::string(kGoodPaiRow) + ",T4,96,512,2\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtColumn(path, 2, "machine"), "empty node name"));
}

TEST(PaiMachineReader, RejectsADuplicateMachineNameNamingBothLines) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", std::string(kGoodPaiRow) + "bbbb,P100,64,512,2\naaaa,T4,96,512,2\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtColumn(path, 3, "machine"),
                         "duplicate node name 'aaaa' (first on line 1)"));
}

TEST(PaiMachineReader, RejectsARowWithTooFewColumnsNamingItsLine) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", std::string(kGoodPaiRow) + "m2,T4,96,512\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtLine(path, 2) + "malformed row: too few columns"));
}

TEST(PaiMachineReader, RejectsARowWithTooManyColumnsNamingItsLine) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", "m1,T4,96,512,2,extra\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtLine(path, 1) + "malformed row: too many columns"));
}

TEST(PaiMachineReader, RejectsAnUnclosedQuoteNamingItsLine) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", std::string(kGoodPaiRow) + "\"m2,T4,96,512,2\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), AtLine(path, 2), "malformed CSV"));
}

TEST(PaiMachineReader, RejectsAnEmptyFileNamingIt) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", "");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), path + ": ", "empty file"));
}

TEST(PaiMachineReader, RejectsAFileOfBlankLinesAsEmpty) {
  TempDir dir;
  const std::string path = WriteFile(dir, "pai.csv", "\n  \n\n");
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), path + ": ", "empty file"));
}

TEST(PaiMachineReader, RejectsAFileThatDoesNotExistNamingIt) {
  TempDir dir;
  const std::string path = (dir.path() / "absent.csv").string();
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), path + ": ", "cannot open"));
}

TEST(PaiMachineReader, RejectsADirectoryNamingIt) {
  TempDir dir;
  const std::string path = dir.path().string();
  EXPECT_TRUE(IsBadInput(ReadPaiMachines(path), path + ": ", "is a directory"));
}

}  // namespace
}  // namespace estuary
