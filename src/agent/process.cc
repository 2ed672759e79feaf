#include "agent/process.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/text.h"

namespace estuary {
namespace {

// What a child reports through the launch pipe: the job's pid (kPid), or the stage that failed
// and its errno. Written with one write() of 12 bytes (atomic: below PIPE_BUF).
enum Stage : int32_t { kPid = 1, kCgroup, kLog, kUser, kChdir, kExec, kFork };
struct Record {
  int32_t stage = 0;
  int32_t index = 0;  // kCgroup: which file; kPid: the pid
  int32_t error = 0;
};

void Send(int fd, Stage stage, int32_t index, int32_t error) {
  const Record r{stage, index, error};
  (void)!write(fd, &r, sizeof r);
}

// Async-signal-safe decimal formatting into `buf` (at least 24 bytes); returns the length.
size_t FormatInt(int64_t v, char* buf) {
  char tmp[24];
  size_t n = 0;
  const bool neg = v < 0;
  uint64_t u = neg ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  do {
    tmp[n++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  size_t len = 0;
  if (neg) buf[len++] = '-';
  while (n > 0) buf[len++] = tmp[--n];
  buf[len] = '\0';
  return len;
}

// Writes "<word> <value>\n" to `path` through `tmp` and a rename (readers never see half a file).
void WriteAtomically(const char* tmp, const char* path, const char* word, int64_t value) {
  const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char num[24];
  const size_t n = FormatInt(value, num);
  (void)!write(fd, word, strlen(word));
  (void)!write(fd, " ", 1);
  (void)!write(fd, num, n);
  (void)!write(fd, "\n", 1);
  close(fd);
  rename(tmp, path);
}

void CloseFrom(int lowest, int keep, int max_fd) {
  for (int fd = lowest; fd < max_fd; ++fd) {
    if (fd != keep) close(fd);
  }
}

std::string OsError(const std::string& what, int error) { return what + ": " + std::strerror(error); }

}  // namespace

std::string FindExecutable(const std::string& name, const std::string& path) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return name;
  for (const std::string& dir : SplitList(path, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string DescribeExit(const ProcessExit& e) {
  if (e.signal != 0) {
    const char* d = sigdescr_np(e.signal);
    return "signal " + std::to_string(e.signal) + (d != nullptr ? std::string(" (") + d + ")" : "");
  }
  return "exit code " + std::to_string(e.code);
}

StatusOr<Launched> Launch(const LaunchSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) return InvalidArgument("launch: empty command");
  if (spec.state_dir.empty()) return InvalidArgument("launch: no state directory");
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& e : spec.env) {
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  }
  const std::string exe = FindExecutable(spec.argv[0], path);
  if (exe.empty()) return InvalidArgument(OsError("exec " + spec.argv[0], ENOENT));

  // Everything the children use, prepared before fork.
  std::vector<char*> argv, envp;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::string pid_tmp = spec.state_dir + "/pid.tmp", pid_file = spec.state_dir + "/pid";
  const std::string exit_tmp = spec.state_dir + "/exit.tmp", exit_file = spec.state_dir + "/exit";
  unlink(exit_file.c_str());
  const bool root = geteuid() == 0;
  const int max_fd = static_cast<int>(std::min<long>(sysconf(_SC_OPEN_MAX), 65536));
  sigset_t none;
  sigemptyset(&none);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Internal(OsError("launch: pipe", errno));
  const pid_t shim = fork();
  if (shim < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    return Internal(OsError("launch: fork", err));
  }
  if (shim == 0) {
    // The shim: a session of its own, no descriptor of the launcher's but the pipe.
    const int w = fds[1];
    setsid();
    CloseFrom(3, w, max_fd);
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
      if (null > 2) close(null);
    }
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; ++s) sigaction(s, &dfl, nullptr);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const pid_t job = fork();
    if (job < 0) {
      Send(w, kFork, 0, errno);
      _exit(127);
    }
    if (job == 0) {
      setpgid(0, 0);
      char num[24];
      const size_t n = FormatInt(getpid(), num);
      for (size_t i = 0; i < spec.cgroup_procs.size(); ++i) {
        const int fd = open(spec.cgroup_procs[i].c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, num, n) < 0) {
          Send(w, kCgroup, static_cast<int32_t>(i), errno);
          _exit(127);
        }
        close(fd);
      }
      const int log = spec.log_path.empty() ? open("/dev/null", O_WRONLY | O_CLOEXEC)
                                            : open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
      if (log < 0) {
        Send(w, kLog, 0, errno);
        _exit(127);
      }
      dup2(log, 1);
      dup2(log, 2);
      if (root) {
        if (setgroups(spec.groups.size(), spec.groups.data()) != 0 || setgid(spec.gid) != 0 || setuid(spec.uid) != 0) {
          Send(w, kUser, 0, errno);
          _exit(127);
        }
      } else if (spec.uid != getuid() || spec.gid != getgid()) {
        Send(w, kUser, 0, EPERM);
        _exit(127);
      }
      if (chdir(spec.workdir.empty() ? "/" : spec.workdir.c_str()) != 0) {
        Send(w, kChdir, 0, errno);
        _exit(127);
      }
      execve(exe.c_str(), argv.data(), envp.data());
      Send(w, kExec, 0, errno);
      _exit(127);
    }
    WriteAtomically(pid_tmp.c_str(), pid_file.c_str(), "pid", job);
    Send(w, kPid, job, 0);
    close(w);
    int status = 0;
    while (waitpid(job, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status)) {
      WriteAtomically(exit_tmp.c_str(), exit_file.c_str(), "signal", WTERMSIG(status));
    } else {
      WriteAtomically(exit_tmp.c_str(), exit_file.c_str(), "exit", WEXITSTATUS(status));
    }
    _exit(0);
  }
  close(fds[1]);
  Launched out;
  out.shim = shim;
  std::optional<Record> failure;
  Record r;
  for (;;) {
    const ssize_t got = read(fds[0], &r, sizeof r);
    if (got < 0 && errno == EINTR) continue;
    if (got != static_cast<ssize_t>(sizeof r)) break;
    if (r.stage == kPid) out.pid = r.index;
    else failure = r;
  }
  close(fds[0]);
  if (!failure && out.pid > 0) return out;
  // Nothing runs: reap the shim (it ends once the child has) and leave no record of a run.
  while (waitpid(shim, nullptr, 0) < 0 && errno == EINTR) {
  }
  unlink(exit_file.c_str());
  unlink(pid_file.c_str());
  if (!failure) return Internal("launch: the shim ended before starting the command");
  switch (failure->stage) {
    case kCgroup:
      return InvalidArgument(OsError("joining cgroup " + spec.cgroup_procs[static_cast<size_t>(failure->index)], failure->error));
    case kLog: return InvalidArgument(OsError("opening log " + spec.log_path, failure->error));
    case kUser:
      return InvalidArgument(OsError("switching to uid " + std::to_string(spec.uid) + " gid " + std::to_string(spec.gid),
                                        failure->error));
    case kChdir: return InvalidArgument(OsError("chdir " + spec.workdir, failure->error));
    case kExec: return InvalidArgument(OsError("exec " + spec.argv[0], failure->error));
    default: return Internal(OsError("launch: fork", failure->error));
  }
}

std::optional<ProcessExit> ReadExit(const std::string& state_dir) {
  const std::string s = FileText(state_dir + "/exit");
  std::istringstream in(s);
  std::string word;
  int value = 0;
  if (!(in >> word >> value)) return std::nullopt;
  ProcessExit e;
  if (word == "signal") e.signal = value;
  else e.code = value;
  return e;
}

pid_t RecordedPid(const std::string& state_dir) {
  std::istringstream in(FileText(state_dir + "/pid"));
  std::string word;
  pid_t pid = 0;
  if (!(in >> word >> pid) || word != "pid") return 0;
  return pid;
}

bool InstanceAlive(const std::string& state_dir) {
  const pid_t pid = RecordedPid(state_dir);
  if (pid <= 0) return false;
  // Its pid may have been reused: the job's process leads its own group.
  return kill(pid, 0) == 0 && getpgid(pid) == pid;
}

Status SignalGroup(pid_t pid, int signal) {
  if (pid <= 0) return InvalidArgument("signal: no process");
  if (kill(-pid, signal) != 0 && errno != ESRCH) return Internal(OsError("signal " + std::to_string(signal), errno));
  return Status::Ok();
}

bool ReapShim(pid_t shim) {
  const pid_t r = waitpid(shim, nullptr, WNOHANG);
  return r == shim || (r < 0 && errno == ECHILD);
}

}  // namespace estuary
