// The service's copy of replicas' logs (issue 19): appends in order and idempotently per run,
// marks each run, rotates at its size, reads from an offset, and forgets a retired job.
#include "server/log_store.h"

#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

namespace estuary {
namespace {

class LogStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/estuary-logs-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string All(const LogStore& s, uint64_t job, int32_t replica) { return s.Read(job, replica, 0, 1 << 20).data; }
  std::string dir_;
};

TEST_F(LogStoreTest, ASentPartIsKeptOnceHoweverOftenItIsSentAndEachRunIsMarked) {
  LogStore s(dir_, 1 << 20);
  ASSERT_TRUE(s.Append(7, 1, "node-a", 100, 0, "hello\n").ok());
  ASSERT_TRUE(s.Append(7, 1, "node-a", 100, 0, "hello\n").ok());          // sent again (a timeout)
  ASSERT_TRUE(s.Append(7, 1, "node-a", 100, 3, "lo\nworld\n").ok());      // overlapping
  ASSERT_TRUE(s.Append(7, 1, "node-b", 200, 0, "again\n").ok());          // the next run, elsewhere
  EXPECT_EQ(All(s, 7, 1),
            "[estuary] replica 1 on node-a (run 100)\nhello\nworld\n[estuary] replica 1 on node-b (run 200)\nagain\n");
  EXPECT_EQ(All(s, 7, 0), "");
  EXPECT_FALSE(s.Append(7, 1, "node-a", 100, -1, "x").ok());
}

TEST_F(LogStoreTest, ReadsFromAnOffsetInPartsAndRestartsAtZeroBeyondTheEnd) {
  LogStore s(dir_, 1 << 20);
  ASSERT_TRUE(s.Append(1, 0, "n", 1, 0, "abcdef").ok());
  const std::string all = All(s, 1, 0);
  LogStore::Chunk c = s.Read(1, 0, 0, 10);
  EXPECT_EQ(c.data, all.substr(0, 10));
  EXPECT_EQ(c.next, 10);
  c = s.Read(1, 0, c.next, 1 << 20);
  EXPECT_EQ(c.data, all.substr(10));
  EXPECT_EQ(c.next, static_cast<int64_t>(all.size()));
  EXPECT_EQ(s.Read(1, 0, c.next, 100).data, "");  // nothing new
  EXPECT_EQ(s.Read(1, 0, c.next + 50, 5).data, all.substr(0, 5));
}

TEST_F(LogStoreTest, AReplicasLogIsRotatedAtItsSizeKeepingAtMostTwiceIt) {
  LogStore s(dir_, 64);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(s.Append(3, 0, "n", 1, i * 10, "line " + std::to_string(i + 10) + "\n").ok());  // 8 bytes each
  }
  const std::string kept = All(s, 3, 0);
  EXPECT_LE(kept.size(), 128u);
  EXPECT_NE(kept.find("line 29\n"), std::string::npos);     // the newest is kept
  EXPECT_EQ(kept.find("[estuary] replica"), std::string::npos);  // the oldest rotated away
  const size_t newest = kept.rfind("line ");
  EXPECT_EQ(kept.substr(newest), "line 29\n");
}

TEST_F(LogStoreTest, ARetiredJobsLogsAreGone) {
  LogStore s(dir_, 1 << 20);
  ASSERT_TRUE(s.Append(9, 0, "n", 1, 0, "x\n").ok());
  s.RemoveJob(9);
  EXPECT_EQ(All(s, 9, 0), "");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/9"));
  ASSERT_TRUE(s.Append(9, 0, "n", 1, 0, "y\n").ok());  // a new run of the id is marked anew
  EXPECT_EQ(All(s, 9, 0), "[estuary] replica 0 on n (run 1)\ny\n");
}

}  // namespace
}  // namespace estuary
