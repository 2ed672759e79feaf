// A replica's process as the agent runs it (issue 19): real processes on this machine, in their
// own process group, as a given user, with exactly their environment, their output in a log,
// their end recorded by the shim; cgroups limit their memory (a process over it is killed and
// counted) and CPU and deny the GPU devices not granted. Tests that need root or a writable cgroup
// controller skip with the reason when the machine has none (the CI machine has both).
#include "agent/process.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "agent/cgroups.h"
#include "common/signals.h"
#include "common/text.h"

namespace estuary {
namespace {

using namespace std::chrono_literals;

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/estuary-process-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    chmod(dir_.c_str(), 0755);
    state_ = dir_ + "/state";
    std::filesystem::create_directory(state_);
  }
  void TearDown() override {
    (void)cgroups_.Remove(group_);
    std::filesystem::remove_all(dir_);
  }

  LaunchSpec Spec(std::vector<std::string> argv) {
    LaunchSpec s;
    s.argv = std::move(argv);
    s.env = {"PATH=/usr/bin:/bin"};
    s.workdir = dir_;
    s.uid = getuid();
    s.gid = getgid();
    s.log_path = dir_ + "/log";
    s.state_dir = state_;
    return s;
  }

  // The recorded end of the process, waiting up to 20 s for it.
  std::optional<ProcessExit> WaitExit(const Launched& l) {
    for (int i = 0; i < 2000; ++i) {
      if (auto e = ReadExit(state_)) {
        while (!ReapShim(l.shim)) std::this_thread::sleep_for(1ms);
        return e;
      }
      std::this_thread::sleep_for(10ms);
    }
    return std::nullopt;
  }

  std::string dir_, state_;
  Cgroups cgroups_ = Cgroups::Detect();
  std::string group_ = "process-test-" + std::to_string(getpid());
};

TEST_F(ProcessTest, RunsTheCommandWithExactlyItsEnvironmentInItsWorkdirAndRecordsItsExitCode) {
  LaunchSpec s = Spec({"sh", "-c", "echo \"x=$ESTUARY_X home=$HOME\"; pwd; echo oops >&2; exit 3"});
  s.env.push_back("ESTUARY_X=7");
  const auto l = Launch(s);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_GT(l->pid, 0);
  EXPECT_EQ(RecordedPid(state_), l->pid);
  const auto e = WaitExit(*l);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(*e, (ProcessExit{3, 0}));
  EXPECT_EQ(DescribeExit(*e), "exit code 3");
  EXPECT_EQ(FileText(dir_ + "/log"), "x=7 home=\n" + dir_ + "\noops\n");  // nothing inherited: no HOME
  EXPECT_FALSE(InstanceAlive(state_));
}

TEST_F(ProcessTest, AWorkdirOrCommandThatCannotBeUsedFailsTheLaunchWithTheOsErrorAndRunsNothing) {
  LaunchSpec s = Spec({"true"});
  s.workdir = "/nonexistent-estuary";
  auto l = Launch(s);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().message(), "chdir /nonexistent-estuary: No such file or directory");
  EXPECT_FALSE(ReadExit(state_).has_value());
  EXPECT_EQ(RecordedPid(state_), 0);

  l = Launch(Spec({"no-such-command-estuary"}));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().message(), "exec no-such-command-estuary: No such file or directory");

  std::ofstream(dir_ + "/script") << "#!/bin/sh\necho never\n";  // not executable
  l = Launch(Spec({dir_ + "/script"}));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().message(), "exec " + dir_ + "/script: Permission denied");
  EXPECT_FALSE(ReadExit(state_).has_value());
  EXPECT_EQ(FileText(dir_ + "/log"), "");

  EXPECT_FALSE(Launch(Spec({})).ok());
}

TEST_F(ProcessTest, RunsAsTheUserItIsGivenNeverAsTheLauncher) {
  if (geteuid() != 0) GTEST_SKIP() << "switching users needs root";
  LaunchSpec s = Spec({"sh", "-c", "id -u; id -g; id -G"});
  s.uid = 65534;  // nobody
  s.gid = 65534;
  const auto l = Launch(s);
  ASSERT_TRUE(l.ok()) << l.status().message();
  ASSERT_EQ(WaitExit(*l), (ProcessExit{0, 0}));
  EXPECT_EQ(FileText(dir_ + "/log"), "65534\n65534\n65534\n");

  // A workdir the user may not enter is refused as that user would be.
  std::filesystem::create_directory(dir_ + "/private");
  chmod((dir_ + "/private").c_str(), 0700);
  s.workdir = dir_ + "/private";
  const auto refused = Launch(s);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "chdir " + dir_ + "/private: Permission denied");
}

TEST_F(ProcessTest, ASignalReachesTheWholeProcessGroupAndTheEndNamesIt) {
  const auto l = Launch(Spec({"sh", "-c", "sleep 100 & echo $!; wait"}));
  ASSERT_TRUE(l.ok()) << l.status().message();
  std::string child;
  for (int i = 0; i < 500 && child.empty(); ++i) {
    std::istringstream(FileText(dir_ + "/log")) >> child;
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_FALSE(child.empty());
  EXPECT_TRUE(InstanceAlive(state_));
  EXPECT_FALSE(ReadExit(state_).has_value());
  ASSERT_TRUE(SignalGroup(l->pid, SIGTERM).ok());
  const auto e = WaitExit(*l);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(*e, (ProcessExit{-1, SIGTERM}));
  EXPECT_EQ(DescribeExit(*e), "signal 15 (Terminated)");
  // The background sleep got the signal too (gone, or a zombie awaiting its reaper).
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    const std::string stat = FileText("/proc/" + child + "/stat");
    gone = stat.empty() || stat.find(") Z ") != std::string::npos;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(gone);
  EXPECT_TRUE(SignalGroup(l->pid, SIGKILL).ok());  // the group is gone: nothing to do
}

TEST(Signals, AreNamedAsUsersWriteThem) {
  EXPECT_EQ(SignalByName("SIGTERM"), SIGTERM);
  EXPECT_EQ(SignalByName("term"), SIGTERM);
  EXPECT_EQ(SignalByName("USR1"), SIGUSR1);
  EXPECT_EQ(SignalByName("9"), SIGKILL);
  EXPECT_EQ(SignalByName("SIGNOPE"), std::nullopt);
  EXPECT_EQ(SignalByName("0"), std::nullopt);
  EXPECT_EQ(SignalByName("99"), std::nullopt);
  EXPECT_EQ(SignalByName(""), std::nullopt);
  EXPECT_EQ(SignalName(SIGUSR2), "SIGUSR2");
  EXPECT_EQ(SignalName(0), "");
  EXPECT_EQ(FindExecutable("sh", "/nonexistent:/bin"), "/bin/sh");
  EXPECT_EQ(FindExecutable("sh", "/nonexistent"), "");
}

TEST_F(ProcessTest, AProcessOverItsMemoryLimitIsKilledAndCountedAsOutOfMemory) {
  if (!cgroups_.limits_memory()) GTEST_SKIP() << "no writable memory controller: " << cgroups_.mode();
  CgroupLimits limits;
  limits.memory_mib = 32;
  const auto procs = cgroups_.Create(group_, limits);
  ASSERT_TRUE(procs.ok()) << procs.status().message();
  LaunchSpec s = Spec({"sh", "-c", "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived"});
  s.cgroup_procs = *procs;
  const auto l = Launch(s);
  ASSERT_TRUE(l.ok()) << l.status().message();
  const auto e = WaitExit(*l);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(FileText(dir_ + "/log").find("survived"), std::string::npos);
  EXPECT_GE(cgroups_.OomKills(group_), 1);
  EXPECT_TRUE(cgroups_.Remove(group_).ok());

  // Within its limit the same kind of process runs to the end, and nothing is counted.
  ASSERT_TRUE(cgroups_.Create(group_, limits).ok());
  s.argv = {"sh", "-c", "x=$(head -c 1000000 /dev/zero | tr '\\0' a); echo survived"};
  const auto fine = Launch(s);
  ASSERT_TRUE(fine.ok()) << fine.status().message();
  ASSERT_EQ(WaitExit(*fine), (ProcessExit{0, 0}));
  EXPECT_EQ(cgroups_.OomKills(group_), 0);
}

TEST_F(ProcessTest, AGroupLimitsCpuAndRemovingItKillsWhatIsLeftInIt) {
  if (cgroups_.mode().rfind("none", 0) == 0) GTEST_SKIP() << cgroups_.mode();
  CgroupLimits limits;
  limits.cpu_milli = 500;
  limits.memory_mib = 64;
  const auto procs = cgroups_.Create(group_, limits);
  ASSERT_TRUE(procs.ok()) << procs.status().message();
  const std::filesystem::path cpu_v1 = "/sys/fs/cgroup/cpu/estuary/" + group_ + "/cpu.cfs_quota_us";
  if (std::filesystem::exists(cpu_v1)) {
    EXPECT_EQ(FileText(cpu_v1), "50000\n");  // half of a 100 ms period
  }
  LaunchSpec s = Spec({"sh", "-c", "sleep 100 & sleep 100"});
  s.cgroup_procs = *procs;
  const auto l = Launch(s);
  ASSERT_TRUE(l.ok()) << l.status().message();
  for (int i = 0; i < 500 && cgroups_.Processes(group_).size() < 3; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(cgroups_.Processes(group_).size(), 3u);  // the shell and its two sleeps
  ASSERT_TRUE(cgroups_.Remove(group_).ok());
  EXPECT_EQ(WaitExit(*l), (ProcessExit{-1, SIGKILL}));
  EXPECT_TRUE(cgroups_.Processes(group_).empty());
}

TEST_F(ProcessTest, TheDevicesOfGpusNotGrantedCannotBeOpened) {
  if (!cgroups_.limits_devices() || geteuid() != 0) GTEST_SKIP() << "no writable devices controller: " << cgroups_.mode();
  // Device nodes of NVIDIA's character major 195 (no driver here: opening an allowed one gives
  // "No such device or address"; a denied one "Operation not permitted").
  ASSERT_EQ(mknod((dir_ + "/nvidia0").c_str(), S_IFCHR | 0666, makedev(195, 0)), 0);
  ASSERT_EQ(mknod((dir_ + "/nvidia1").c_str(), S_IFCHR | 0666, makedev(195, 1)), 0);
  CgroupLimits limits;
  limits.deny_gpu_minors = {0};
  const auto procs = cgroups_.Create(group_, limits);
  ASSERT_TRUE(procs.ok()) << procs.status().message();
  LaunchSpec s = Spec({"sh", "-c", "cat nvidia0; cat nvidia1; true"});
  s.cgroup_procs = *procs;
  const auto l = Launch(s);
  ASSERT_TRUE(l.ok()) << l.status().message();
  ASSERT_EQ(WaitExit(*l), (ProcessExit{0, 0}));
  const std::string log = FileText(dir_ + "/log");
  EXPECT_NE(log.find("nvidia0: Operation not permitted"), std::string::npos) << log;
  EXPECT_NE(log.find("nvidia1: No such device or address"), std::string::npos) << log;
}

}  // namespace
}  // namespace estuary
