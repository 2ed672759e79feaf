// Plan files (docs/defrag.md, "Applying a plan"): a good plan is applied move by move, relying on
// the room earlier steps freed; every bad input is one line naming file, line and column.
#include "sim/trace/plan_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/cluster/cluster_spec.h"
#include "sim/trace/snapshot.h"
#include "tests/testing/bad_input.h"
#include "tests/testing/temp_dir.h"

namespace estuary {
namespace {

using estuary::testing::AtColumn;
using estuary::testing::AtLine;
using estuary::testing::IsBadInput;
using estuary::testing::TempDir;
using estuary::testing::WriteFile;

// Two ASWs of two 8-GPU H800 nodes (16 cores, 64 GiB = 65536 MiB) and one 1-GPU A10 node.
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

// Free after binding, by hand:
//   n-0000: t0 GPUs 0,1; g0 GPU 2 (gang within asw1)  CPU 14000 free, memory 63488 free
//   n-0001: t1 GPUs 0-5; mem0 CPU only               CPU 3000 free,  memory 45056 free
//   m-0000: s0 500 milli on GPU 3; big CPU only       CPU 13000 free, memory 7344 free
//   m-0001: l0 GPU 0 (locked); h0 GPU 1 (H800 only); c0 CPU only   CPU 0 free
//   t-0:    empty
constexpr char kSnapshot[] =
    "task,job,node,gpus,gpu_milli,cpu_milli,memory_mib,locked,models,priority,plane,required_level\n"
    "t0,j0,n-0000,0;1,1000,1000,1024,false,,0,,\n"
    "t1,j1,n-0001,0;1;2;3;4;5,1000,12000,4096,false,,0,,\n"
    "s0,j2,m-0000,3,500,2000,8192,false,,0,,\n"
    "l0,j3,m-0001,0,1000,1000,1024,true,,0,,\n"
    "g0,g,n-0000,2,1000,1000,1024,false,,0,data,asw\n"
    "h0,h,m-0001,1,1000,1000,1024,false,H800,0,,\n"
    "big,k,m-0000,,0,1000,50000,false,,0,,\n"
    "mem0,m,n-0001,,0,1000,16384,false,,0,,\n"
    "c0,c,m-0001,,0,14000,1024,false,,0,,\n";
constexpr char kHeader[] = "step,task,job,from,to,gpus,chain,after\n";

class PlanReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = ParseClusterSpec(kSpec, "spec.yaml");
    ASSERT_TRUE(s.ok()) << s.status().message();
    state_ = std::move(s).value();
    const std::string snap = WriteFile(dir_, "tasks.csv", kSnapshot);
    auto r = ReadSnapshot(snap, state_);
    ASSERT_TRUE(r.ok()) << r.status().message();
    locked_ = r->locked;
    path_ = (dir_.path() / "plan.csv").string();
  }
  // Applies a plan of `text` to `state_`.
  StatusOr<std::vector<PlanStep>> Apply(const std::string& text) {
    WriteFile(dir_, "plan.csv", text);
    return ApplyPlanFile(path_, state_, locked_);
  }
  // A plan of the header and `rows` (the first row is line 2).
  StatusOr<std::vector<PlanStep>> ApplyRows(const std::string& rows) { return Apply(std::string(kHeader) + rows); }
  std::vector<int> GpusOf(const std::string& task) const {
    const Task& t = state_.task(Find(task));
    return std::vector<int>(t.gpus.begin(), t.gpus.end());
  }
  std::string NodeOf(const std::string& task) const { return state_.node(state_.task(Find(task)).node).spec.name; }
  TaskId Find(const std::string& name) const {
    for (const Task& t : state_.tasks()) {
      if (t.name == name) return t.id;
    }
    ADD_FAILURE() << "no task " << name;
    return TaskId(0);
  }

  TempDir dir_;
  ClusterState state_;
  std::vector<char> locked_;
  std::string path_;
};

// Step 1 takes six whole GPUs of m-0000 (0,1,2,4,5,6; GPU 3 holds s0); step 2 moves s0 to the
// node step 1 emptied; step 3 then takes GPU 3 — wholly free only once s0 has left — and GPU 7.
TEST_F(PlanReaderTest, AppliesAPlanMoveByMoveRelyingOnRoomFreedByEarlierSteps) {
  auto steps = ApplyRows(
      "1,t1,j1,n-0001,m-0000,0;1;2;4;5;6,0,\n"
      "2,s0,j2,m-0000,n-0001,0,1,1\n"
      "3,t0,j0,n-0000,m-0000,7;3,2,2\n");
  ASSERT_TRUE(steps.ok()) << steps.status().message();
  ASSERT_EQ(steps->size(), 3u);
  EXPECT_EQ((*steps)[2].line, 4u);
  EXPECT_EQ((*steps)[2].chain, 2);
  EXPECT_EQ((*steps)[2].after, (std::vector<size_t>{1}));
  EXPECT_EQ(NodeOf("t1"), "m-0000");
  EXPECT_EQ(GpusOf("t1"), (std::vector<int>{0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(NodeOf("s0"), "n-0001");
  EXPECT_EQ(GpusOf("s0"), (std::vector<int>{0}));
  EXPECT_EQ(NodeOf("t0"), "m-0000");
  EXPECT_EQ(GpusOf("t0"), (std::vector<int>{3, 7}));  // stored ascending
  // m-0000: CPU 13000 - 12000 + 2000 - 1000; memory 7344 - 4096 + 8192 - 1024.
  const Node& m0 = state_.node(state_.task(Find("t0")).node);
  EXPECT_EQ(m0.cpu_free, 2000);
  EXPECT_EQ(m0.mem_free, 10416);
  EXPECT_EQ(m0.full_free_gpus, 0);
  EXPECT_TRUE(state_.CheckInvariants().ok());
}

TEST_F(PlanReaderTest, AHeaderOnlyFileIsAnEmptyPlan) {
  auto steps = Apply(kHeader);
  ASSERT_TRUE(steps.ok()) << steps.status().message();
  EXPECT_TRUE(steps->empty());
  EXPECT_EQ(NodeOf("t0"), "n-0000");
}

TEST_F(PlanReaderTest, RejectsAnEmptyFile) { EXPECT_TRUE(IsBadInput(Apply(""), AtLine(path_, 1), "empty file")); }

TEST_F(PlanReaderTest, RejectsAMissingColumnNamingIt) {
  EXPECT_TRUE(IsBadInput(Apply("step,task,job,from,to,gpus,chain\n"), AtLine(path_, 1), "missing column 'after'"));
}

TEST_F(PlanReaderTest, RejectsAnUnknownColumnNamingIt) {
  EXPECT_TRUE(IsBadInput(Apply("step,task,job,from,to,gpus,chain,after,why\n"), AtLine(path_, 1),
                         "unexpected column 'why'"));
}

TEST_F(PlanReaderTest, RejectsAnUnknownTask) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,zz,j0,n-0000,t-0,0,0,\n"), AtColumn(path_, 2, "task"), "unknown task 'zz'"));
}

TEST_F(PlanReaderTest, RejectsALockedTask) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,l0,j3,m-0001,t-0,0,0,\n"), AtColumn(path_, 2, "task"), "'l0' is locked"));
}

TEST_F(PlanReaderTest, RejectsAJobThatIsNotTheTasks) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,t0,j1,n-0000,m-0000,4;5,0,\n"), AtColumn(path_, 2, "job"),
                         "belongs to job 'j0', not 'j1'"));
}

TEST_F(PlanReaderTest, RejectsAnUnknownFromNode) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,t0,j0,x-1,m-0000,4;5,0,\n"), AtColumn(path_, 2, "from"), "unknown node 'x-1'"));
}

TEST_F(PlanReaderTest, RejectsAnUnknownToNode) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,t0,j0,n-0000,x-2,4;5,0,\n"), AtColumn(path_, 2, "to"), "unknown node 'x-2'"));
}

TEST_F(PlanReaderTest, RejectsAFromThatIsNotWhereTheTaskIsAtThatStep) {
  // The snapshot has t0 on n-0000, but step 1 moved it to m-0000 before step 2.
  EXPECT_TRUE(IsBadInput(ApplyRows("1,t0,j0,n-0000,m-0000,4;5,0,\n"
                                   "2,t0,j0,n-0000,n-0001,6;7,1,\n"),
                         AtColumn(path_, 3, "from"), "task 't0' is on 'm-0000' at step 2, not 'n-0000'"));
}

TEST_F(PlanReaderTest, RejectsAMoveToTheNodeTheTaskIsOn) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,t0,j0,n-0000,n-0000,4;5,0,\n"), AtColumn(path_, 2, "to"), "already on"));
}

TEST_F(PlanReaderTest, RejectsADuplicateStep) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,t0,j0,n-0000,m-0000,4;5,0,\n"
                                   "1,s0,j2,m-0000,n-0001,6,1,\n"),
                         AtColumn(path_, 3, "step"), "duplicate step 1"));
}

TEST_F(PlanReaderTest, RejectsAStepOutOfSequence) {
  EXPECT_TRUE(IsBadInput(ApplyRows("2,t0,j0,n-0000,m-0000,4;5,0,\n"), AtColumn(path_, 2, "step"),
                         "bad step 2: expected 1"));
}

TEST_F(PlanReaderTest, RejectsAStepThatIsNotAnInteger) {
  EXPECT_TRUE(IsBadInput(ApplyRows("one,t0,j0,n-0000,m-0000,4;5,0,\n"), AtColumn(path_, 2, "step"), "not an integer"));
}

TEST_F(PlanReaderTest, RejectsAfterNamingAnUnknownStep) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,t0,j0,n-0000,m-0000,4;5,0,9\n"), AtColumn(path_, 2, "after"),
                         "unknown step 9"));
}

TEST_F(PlanReaderTest, RejectsAfterNamingALaterStep) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,t0,j0,n-0000,m-0000,4;5,0,2\n"
                                   "2,s0,j2,m-0000,n-0001,6,1,\n"),
                         AtColumn(path_, 2, "after"), "step 2 is not before step 1"));
}

TEST_F(PlanReaderTest, RejectsAGpuIndexOutOfRange) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,t0,j0,n-0000,m-0000,7;8,0,\n"), AtColumn(path_, 2, "gpus"),
                         "GPU index 8 out of range: node 'm-0000' has 8 GPUs"));
}

TEST_F(PlanReaderTest, RejectsARepeatedGpuIndex) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,t0,j0,n-0000,m-0000,5;5,0,\n"), AtColumn(path_, 2, "gpus"),
                         "GPU index 5 repeated"));
}

TEST_F(PlanReaderTest, RejectsTheWrongNumberOfGpuIndices) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,t0,j0,n-0000,m-0000,5,0,\n"), AtColumn(path_, 2, "gpus"),
                         "1 GPU indices for task 't0', which holds 2"));
}

// Make-before-break: s0 still holds GPU 3 of m-0000 when t0 would take it (the order is wrong).
TEST_F(PlanReaderTest, RejectsAGpuStillTakenAtThatStep) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,t0,j0,n-0000,m-0000,3;7,0,\n"
                                   "2,s0,j2,m-0000,n-0001,6,1,\n"),
                         AtColumn(path_, 2, "gpus"), "GPU 3 of node 'm-0000' is taken at step 1: 500 milli free, 1000 needed"));
}

TEST_F(PlanReaderTest, RejectsAMoveWhoseCpuDoesNotFit) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,t0,j0,n-0000,m-0001,2;3,0,\n"), AtColumn(path_, 2, "to"),
                         "does not fit on 'm-0001' at step 1: CPU 1000 milli asked, 0 free"));
}

TEST_F(PlanReaderTest, RejectsAMoveWhoseMemoryDoesNotFit) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,mem0,m,n-0001,m-0000,,0,\n"), AtColumn(path_, 2, "to"),
                         "memory 16384 MiB asked, 7344 free"));
}

TEST_F(PlanReaderTest, RejectsANodeWhoseModelTheTaskDoesNotAdmit) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,h0,h,m-0001,t-0,0,0,\n"), AtColumn(path_, 2, "to"), "does not admit GPU model 'A10'"));
}

TEST_F(PlanReaderTest, RejectsAGangTaskLeavingItsDomain) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,g0,g,n-0000,m-0000,0,0,\n"), AtColumn(path_, 2, "to"), "outside the asw domain"));
}

TEST_F(PlanReaderTest, RejectsANegativeChain) {
  EXPECT_TRUE(IsBadInput(ApplyRows("1,t0,j0,n-0000,m-0000,4;5,-1,\n"), AtColumn(path_, 2, "chain"), "negative"));
}

}  // namespace
}  // namespace estuary
