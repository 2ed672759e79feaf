// Statement: what-ifs that either commit or leave no trace.
#include "sched/framework/statement.h"

#include <gtest/gtest.h>

#include "tests/testing/fixtures.h"

namespace estuary {
namespace {

using testing::ClusterBuilder;
using testing::Idx;
using testing::Req;

TEST(Statement, RollbackToACheckpointUndoesOnlyLaterOperations) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n", testing::Gpus(4));
  TaskId a = c.Submit("a", Req().Gpus(1));
  TaskId b = c.Submit("b", Req().Gpus(1));
  Statement st(c.state);
  st.Bind(a, n, Idx({0}));
  const size_t cp = st.Checkpoint();
  st.Bind(b, n, Idx({1}));
  st.Rollback(cp);
  EXPECT_EQ(c.state.task(a).state, TaskState::kBound);
  EXPECT_EQ(c.state.task(b).state, TaskState::kPending);
  EXPECT_EQ(c.state.node(n).full_free_gpus, 3);
  st.Commit();
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(Statement, AnEvictionRolledBackReturnsTheTaskToItsNodeAndGpus) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n", testing::Gpus(4));
  TaskId a = c.Submit("a", Req().Gpus(2));
  c.state.Bind(a, n, Idx({1, 3}));
  {
    Statement st(c.state);
    st.Evict(a);
    EXPECT_EQ(c.state.task(a).state, TaskState::kPending);
    st.RollbackAll();
  }
  EXPECT_EQ(c.state.task(a).node, n);
  EXPECT_EQ(c.state.task(a).gpus.idx[0], 1);
  EXPECT_EQ(c.state.task(a).gpus.idx[1], 3);
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(Statement, AStatementDestroyedWithoutCommitLeavesNoTrace) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n", testing::Gpus(2));
  TaskId a = c.Submit("a", Req().Gpus(2));
  {
    Statement st(c.state);
    st.Bind(a, n, Idx({0, 1}));
  }
  EXPECT_EQ(c.state.task(a).state, TaskState::kPending);
  EXPECT_EQ(c.state.allocated_gpu_milli(), 0);
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

TEST(Statement, CommittedOperationsSurviveTheStatement) {
  ClusterBuilder c;
  NodeId n = c.AddNode("n", testing::Gpus(2));
  TaskId a = c.Submit("a", Req().Gpus(1));
  {
    Statement st(c.state);
    st.Bind(a, n, Idx({0}));
    st.Commit();
  }
  EXPECT_EQ(c.state.task(a).state, TaskState::kBound);
  EXPECT_TRUE(c.state.CheckInvariants().ok());
}

}  // namespace
}  // namespace estuary
