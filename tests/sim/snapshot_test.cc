// Snapshot files (docs/defrag.md, "Snapshot and dry run"): a good snapshot binds every task where it
// says and round-trips through WriteSnapshot; every bad input is one line naming file, line and
// column.
#include "sim/trace/snapshot.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/cluster/cluster_spec.h"
#include "tests/testing/bad_input.h"
#include "tests/testing/temp_dir.h"

namespace estuary {
namespace {

using estuary::testing::AtColumn;
using estuary::testing::AtLine;
using estuary::testing::IsBadInput;
using estuary::testing::TempDir;
using estuary::testing::WriteFile;

// Two ASWs of two 8-GPU H800 nodes (16 cores, 64 GiB) and one A10 node.
constexpr char kSpec[] = R"(
pools:
  - {name: h800, gpu_model: H800, gpus_per_node: 8, cpu_cores: 16, memory_gib: 64}
  - {name: a10, gpu_model: A10, gpus_per_node: 1, cpu_cores: 16, memory_gib: 64}
topology:
  planes:
    - {name: data, levels: [asw, node]}
nodes:
  - {name_prefix: n-, count: 2, pool: h800, domains: {asw: asw1}}
  - {name_prefix: m-, count: 2, pool: h800, domains: {asw: asw2}}
  - {name: t-0, pool: a10, domains: {asw: asw2}}
)";
constexpr char kHeader[] = "task,job,node,gpus,gpu_milli,cpu_milli,memory_mib,locked\n";
constexpr char kGoodRow[] = "t0,j0,n-0000,0;1,1000,1000,1024,false\n";  // line 2

class SnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = ParseClusterSpec(kSpec, "spec.yaml");
    ASSERT_TRUE(s.ok()) << s.status().message();
    state_ = std::move(s).value();
    path_ = (dir_.path() / "tasks.csv").string();
  }
  // Reads a snapshot of `text` into a fresh copy of the cluster.
  StatusOr<Snapshot> Read(const std::string& text, ClusterState* out = nullptr) {
    WriteFile(dir_, "tasks.csv", text);
    ClusterState s = state_;
    auto r = ReadSnapshot(path_, s);
    if (out != nullptr) *out = std::move(s);
    return r;
  }
  // A snapshot of the good row (line 2) and `row` (line 3).
  StatusOr<Snapshot> ReadThird(const std::string& row) { return Read(std::string(kHeader) + kGoodRow + row + "\n"); }

  TempDir dir_;
  ClusterState state_;
  std::string path_;  // every snapshot is written here
};

TEST_F(SnapshotTest, BindsEveryTaskWhereItSaysAndRoundTrips) {
  ClusterState s;
  auto snap = Read(
      "task,job,node,gpus,gpu_milli,cpu_milli,memory_mib,locked,models,priority,plane,required_level\n"
      "w-0,train,n-0000,3;1;2;0,1000,4000,8192,true,H800,5,data,asw\n"
      "w-1,train,n-0001,0;1;2;3,1000,4000,8192,false,H800,5,data,asw\n"
      "s-0,infer,m-0000,5,250,1000,1024,1,,,,\n"
      "s-1,infer2,m-0000,5,750,1000,1024,0,A10|H800,,,\n"
      "c-0,etl,t-0,,0,2000,4096,FALSE,,,,\n",
      &s);
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  EXPECT_EQ(snap->tasks, 5);
  EXPECT_EQ(snap->jobs, 4);
  EXPECT_EQ(snap->locked_tasks, 2);
  EXPECT_EQ(snap->locked, (std::vector<char>{1, 0, 1, 0, 0}));
  ASSERT_TRUE(s.CheckInvariants().ok());
  const Task& w0 = s.task(TaskId(0));
  EXPECT_EQ(w0.name, "w-0");
  EXPECT_EQ(s.node(w0.node).spec.name, "n-0000");
  EXPECT_EQ(std::vector<int>(w0.gpus.begin(), w0.gpus.end()), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(w0.priority, 5);
  const Job& train = s.job(w0.job);
  EXPECT_EQ(train.spec.min_replicas, 2);
  EXPECT_EQ(train.spec.max_replicas, 2);
  EXPECT_EQ(train.spec.topology.plane, *s.topology().FindPlane("data"));
  EXPECT_EQ(train.spec.topology.required_level, 0);
  EXPECT_EQ(s.node(s.task(TaskId(2)).node).gpu_free[5], 0);  // 250 + 750 on one GPU
  EXPECT_EQ(s.task(TaskId(4)).req.gpu_count, 0);

  // Written and read back: the same text, so the same bindings.
  const std::string written = WriteSnapshot(s, snap->locked);
  ClusterState again;
  auto back = Read(written, &again);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->locked, snap->locked);
  EXPECT_EQ(WriteSnapshot(again, back->locked), written);
}

TEST_F(SnapshotTest, AHeaderOnlyFileIsAClusterWithNoRunningTasks) {
  auto snap = Read(kHeader);
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  EXPECT_EQ(snap->tasks, 0);
}

TEST_F(SnapshotTest, RejectsAnEmptyFile) { EXPECT_TRUE(IsBadInput(Read(""), AtLine(path_, 1), "empty file")); }

TEST_F(SnapshotTest, RejectsAMissingColumnNamingIt) {
  EXPECT_TRUE(IsBadInput(Read("task,job,node,gpus,gpu_milli,cpu_milli,memory_mib\nt0,j0,n-0000,0,1000,1,1\n"),
                         AtLine(path_, 1), "missing column 'locked'"));
}

TEST_F(SnapshotTest, RejectsAnUnknownColumnNamingIt) {
  EXPECT_TRUE(IsBadInput(Read("task,job,node,gpus,gpu_milli,cpu_milli,memory_mib,locked,colour\n"), AtLine(path_, 1),
                         "unexpected column 'colour'"));
}

TEST_F(SnapshotTest, RejectsAnUnknownNode) {
  EXPECT_TRUE(IsBadInput(ReadThird("t1,j1,n-9,0,1000,1,1,false"), AtColumn(path_, 3, "node"), "unknown node 'n-9'"));
}

TEST_F(SnapshotTest, RejectsADuplicateTaskNameNamingTheFirstLine) {
  EXPECT_TRUE(IsBadInput(ReadThird("t0,j1,n-0001,0,1000,1,1,false"), AtColumn(path_, 3, "task"),
                         "duplicate task name 't0' (first on line 2)"));
}

TEST_F(SnapshotTest, RejectsAGpuIndexOutOfRange) {
  EXPECT_TRUE(IsBadInput(ReadThird("t1,j1,n-0001,7;8,1000,1,1,false"), AtColumn(path_, 3, "gpus"),
                         "GPU index 8 out of range"));
}

TEST_F(SnapshotTest, RejectsARepeatedGpuIndex) {
  EXPECT_TRUE(IsBadInput(ReadThird("t1,j1,n-0001,2;3;2,1000,1,1,false"), AtColumn(path_, 3, "gpus"),
                         "GPU index 2 repeated"));
}

TEST_F(SnapshotTest, RejectsANonNumericGpuIndex) {
  EXPECT_TRUE(IsBadInput(ReadThird("t1,j1,n-0001,0;x,1000,1,1,false"), AtColumn(path_, 3, "gpus"), "not an integer"));
}

TEST_F(SnapshotTest, RejectsAnOverCommittedGpuNamingTheRowThatNoLongerFits) {
  EXPECT_TRUE(IsBadInput(ReadThird("t1,j1,n-0000,1,1000,1,1,false"), AtColumn(path_, 3, "gpus"),
                         "over-commits GPU 1 of node 'n-0000'"));
}

TEST_F(SnapshotTest, RejectsAnOverCommittedSharedGpu) {
  EXPECT_TRUE(IsBadInput(Read(std::string(kHeader) + "a,j,n-0001,4,600,1,1,false\nb,k,n-0001,4,500,1,1,false\n"),
                         AtColumn(path_, 3, "gpus"), "500 milli asked, 400 free"));
}

TEST_F(SnapshotTest, RejectsAnOverCommittedCpu) {
  EXPECT_TRUE(IsBadInput(ReadThird("t1,j1,n-0000,2,1000,15001,1,false"), AtColumn(path_, 3, "cpu_milli"),
                         "over-commits the CPU of node 'n-0000'"));
}

TEST_F(SnapshotTest, RejectsAnOverCommittedMemory) {
  EXPECT_TRUE(IsBadInput(ReadThird("t1,j1,n-0000,2,1000,1,64513,false"), AtColumn(path_, 3, "memory_mib"),
                         "over-commits the memory of node 'n-0000'"));
}

TEST_F(SnapshotTest, RejectsGpuMilliAboveOneThousand) {
  EXPECT_TRUE(IsBadInput(ReadThird("t1,j1,n-0001,0,1001,1,1,false"), AtColumn(path_, 3, "gpu_milli"),
                         "out of range 1..1000"));
}

TEST_F(SnapshotTest, RejectsZeroGpuMilliOnAGpu) {
  EXPECT_TRUE(IsBadInput(ReadThird("t1,j1,n-0001,0,0,1,1,false"), AtColumn(path_, 3, "gpu_milli"),
                         "out of range 1..1000"));
}

TEST_F(SnapshotTest, RejectsASharedGpuShareOnSeveralGpus) {
  EXPECT_TRUE(IsBadInput(ReadThird("t1,j1,n-0001,0;1,500,1,1,false"), AtColumn(path_, 3, "gpu_milli"),
                         "500 with 2 GPUs"));
}

TEST_F(SnapshotTest, RejectsGpuMilliOnACpuOnlyTask) {
  EXPECT_TRUE(IsBadInput(ReadThird("t1,j1,n-0001,,500,1,1,false"), AtColumn(path_, 3, "gpu_milli"),
                         "holding no GPU"));
}

TEST_F(SnapshotTest, RejectsANonNumericCpu) {
  EXPECT_TRUE(IsBadInput(ReadThird("t1,j1,n-0001,0,1000,abc,1,false"), AtColumn(path_, 3, "cpu_milli"),
                         "'abc' is not an integer"));
}

TEST_F(SnapshotTest, RejectsANegativeMemory) {
  EXPECT_TRUE(IsBadInput(ReadThird("t1,j1,n-0001,0,1000,1,-5,false"), AtColumn(path_, 3, "memory_mib"), "negative"));
}

TEST_F(SnapshotTest, RejectsABadLockedValue) {
  EXPECT_TRUE(IsBadInput(ReadThird("t1,j1,n-0001,0,1000,1,1,yes"), AtColumn(path_, 3, "locked"),
                         "'yes' is not true, false, 1 or 0"));
}

TEST_F(SnapshotTest, RejectsAnUnknownModel) {
  EXPECT_TRUE(IsBadInput(Read("task,job,node,gpus,gpu_milli,cpu_milli,memory_mib,locked,models\n"
                              "t1,j1,n-0001,0,1000,1,1,false,V100\n"),
                         AtColumn(path_, 2, "models"), "V100"));
}

TEST_F(SnapshotTest, RejectsAModelSetThatDoesNotAdmitTheNode) {
  EXPECT_TRUE(IsBadInput(Read("task,job,node,gpus,gpu_milli,cpu_milli,memory_mib,locked,models\n"
                              "t1,j1,n-0001,0,1000,1,1,false,A10\n"),
                         AtColumn(path_, 2, "models"), "does not admit"));
}

TEST_F(SnapshotTest, RejectsAnUnknownPlane) {
  EXPECT_TRUE(IsBadInput(Read("task,job,node,gpus,gpu_milli,cpu_milli,memory_mib,locked,plane,required_level\n"
                              "t1,j1,n-0001,0,1000,1,1,false,param,asw\n"),
                         AtColumn(path_, 2, "plane"), "unknown plane 'param'"));
}

TEST_F(SnapshotTest, RejectsAnUnknownLevel) {
  EXPECT_TRUE(IsBadInput(Read("task,job,node,gpus,gpu_milli,cpu_milli,memory_mib,locked,plane,required_level\n"
                              "t1,j1,n-0001,0,1000,1,1,false,data,spine\n"),
                         AtColumn(path_, 2, "required_level"), "has no level 'spine'"));
}

TEST_F(SnapshotTest, RejectsAPlaneWithoutALevel) {
  EXPECT_TRUE(IsBadInput(Read("task,job,node,gpus,gpu_milli,cpu_milli,memory_mib,locked,plane,required_level\n"
                              "t1,j1,n-0001,0,1000,1,1,false,data,\n"),
                         AtColumn(path_, 2, "required_level"), "both or neither"));
}

TEST_F(SnapshotTest, RejectsRowsOfOneJobWithDifferentPriorities) {
  EXPECT_TRUE(IsBadInput(Read("task,job,node,gpus,gpu_milli,cpu_milli,memory_mib,locked,priority\n"
                              "t1,j1,n-0001,0,1000,1,1,false,5\n"
                              "t2,j1,n-0001,1,1000,1,1,false,6\n"),
                         AtColumn(path_, 3, "priority"), "job 'j1' has priority 5 on line 2"));
}

TEST_F(SnapshotTest, RejectsAnEmptyTaskName) {
  EXPECT_TRUE(IsBadInput(ReadThird(",j1,n-0001,0,1000,1,1,false"), AtColumn(path_, 3, "task"), "empty task name"));
}

TEST_F(SnapshotTest, RejectsAMalformedRowNamingItsLine) {
  EXPECT_TRUE(IsBadInput(ReadThird("t1,j1,n-0001,0,1000"), AtLine(path_, 3), "too few columns"));
}

}  // namespace
}  // namespace estuary
