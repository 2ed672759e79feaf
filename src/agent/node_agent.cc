#include "agent/node_agent.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "agent/process.h"
#include "agent/service_client.h"
#include "common/base64.h"
#include "common/signals.h"
#include "common/text.h"

namespace estuary {

using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Writes `text` to `path` through a temporary file and a rename.
void WriteFile(const std::string& path, const std::string& text) {
  {
    std::ofstream out(path + ".tmp", std::ios::trunc);
    out << text;
  }
  fs::rename(path + ".tmp", path);
}

struct User {
  std::string name, home, workdir;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

StatusOr<User> LookUpUser(const std::string& name) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return InvalidArgument("no Unix user '" + name + "' on this node");
  }
  User u;
  u.name = name;
  u.uid = pw.pw_uid;
  u.gid = pw.pw_gid;
  u.home = pw.pw_dir != nullptr && pw.pw_dir[0] == '/' ? pw.pw_dir : "/";
  std::error_code ec;
  u.workdir = fs::is_directory(u.home, ec) ? u.home : "/";  // nobody's home does not exist
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (getgrouplist(name.c_str(), u.gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(n));
    getgrouplist(name.c_str(), u.gid, groups.data(), &n);
  }
  groups.resize(static_cast<size_t>(std::max(0, n)));
  u.groups = std::move(groups);
  return u;
}

}  // namespace

// How long after a notice's deadline an instance that left waits for its stop order.
constexpr int64_t kNoticeSlackMs = 5000;
// How often a migration's new instance tries its `ready` hook.
constexpr int64_t kReadyRetryMs = 1000;

// One process the agent runs (or adopted): a replica's instance on this node.
struct Instance {
  std::string key;  // "<task>@<node>.<instance>" (KeyOf)
  std::string task, job, dir, cgroup;
  uint64_t instance = 0;  // the service's id of it (its start order's; 0: an order without one)
  pid_t shim = 0;   // 0 when adopted (not our child)
  bool stopping = false;      // told to stop: its end is reported "stopped"
  bool end_sent = false;      // its end is reported; it is forgotten once the service took that
  bool noticed = false;       // an eviction notice was sent
  int signal = SIGTERM;       // its checkpoint signal
  int64_t kill_at_ms = 0;     // SIGKILL then (0: not planned)
  int64_t deadline_ms = 0;    // the notice's deadline (0: none)
  int64_t log_sent = 0;       // bytes of its log the service has
  int64_t run = 0;            // which run of the instance (its launch time, ms)
  std::string failed;         // it could not be started: why
  std::vector<std::string> procs;  // its cgroup's join files (its hooks join it too)
  bool standby = false;       // in Standby: its standby_enter hook succeeded (or it has none)
  bool resume_pending = false;  // told to resume while its standby_enter hook ran
  bool ready_pending = false;   // a migration's new instance whose `ready` hook has not succeeded
  int64_t ready_next_ms = 0;    // when its `ready` hook runs next
  std::string hook;           // the hook running now ("" none): standby_enter, standby_leave, ready
  pid_t hook_shim = 0;        // its shim (0 when adopted)
  int64_t hook_deadline_ms = 0;  // it is killed then (and counts as failed)
  std::vector<int> gpus;        // the node's GPUs it was granted
  // Ordered, not yet launched: an instance on its way out (stopping or noticed) still holds one
  // of its GPUs. It launches once every such instance has ended.
  bool waiting = false;
};

struct NodeAgent::Impl {
  NodeAgent& a;
  const NodeAgentOptions& opt;
  std::mutex mu;
  std::map<std::string, Instance> instances;                     // by key
  // A report not yet taken by the service; an instance's end (`end`) lets the agent forget the
  // instance once taken (until then a restarted agent finds it and reports its end again).
  struct Outgoing {
    std::string key;
    int64_t run = 0;
    bool end = false;
    Json report;
  };
  std::vector<Outgoing> outbox;
  explicit Impl(NodeAgent& agent) : a(agent), opt(agent.opt_) {}

  std::string InstancesDir() const { return opt.state_dir + "/instances"; }

  // An order's instance: "<task>@<node>.<instance>" ("<task>@<node>" for an order without one).
  static std::string KeyOf(const Json& o) {
    const uint64_t instance = o.value("instance", uint64_t{0});
    return o.value("task", "") + "@" + o.value("node", "") + (instance != 0 ? "." + std::to_string(instance) : "");
  }

  void Report(const Instance& in, const char* state, const std::string& reason = "") {
    Json r = {{"task", in.task}, {"node", opt.node.name}, {"state", state}};
    if (in.instance != 0) r["instance"] = in.instance;
    if (!reason.empty()) r["reason"] = reason.substr(0, 500);
    const std::string s = state;
    outbox.push_back({in.key, in.run, s == "succeeded" || s == "failed" || s == "stopped", std::move(r)});
  }

  // Forgets an instance whose end the service has (its cgroup and state go).
  void Forget(std::map<std::string, Instance>::iterator it) {
    (void)opt.cgroups.Remove(it->second.cgroup);
    std::error_code ec;
    fs::remove_all(it->second.dir, ec);
    ++a.ended_;
    instances.erase(it);
  }

  void SaveMeta(const Instance& in) {
    WriteFile(in.dir + "/meta.json",
              Json{{"task", in.task},         {"job", in.job},      {"instance", in.instance},
                   {"cgroup", in.cgroup},     {"stopping", in.stopping},
                   {"noticed", in.noticed},   {"deadline_ms", in.deadline_ms},
                   {"signal", in.signal},     {"log_sent", in.log_sent},
                   {"run", in.run},           {"procs", in.procs},
                   {"standby", in.standby},   {"resume_pending", in.resume_pending},
                   {"ready_pending", in.ready_pending}, {"hook", in.hook},
                   {"hook_deadline_ms", in.hook_deadline_ms}, {"gpus", in.gpus},
                   {"waiting", in.waiting}}
                  .dump());
  }

  // Re-adopts what STATE holds from an earlier run of the agent.
  void Adopt() {
    std::error_code ec;
    fs::create_directories(InstancesDir(), ec);
    for (const auto& entry : fs::directory_iterator(InstancesDir(), ec)) {
      if (!entry.is_directory()) continue;
      const Json m = Json::parse(FileText(entry.path().string() + "/meta.json"), nullptr, false);
      if (m.is_discarded() || !m.contains("task")) {
        fs::remove_all(entry.path(), ec);
        continue;
      }
      Instance in;
      in.key = entry.path().filename().string();
      in.dir = entry.path().string();
      in.task = m.value("task", "");
      in.job = m.value("job", "");
      in.instance = m.value("instance", uint64_t{0});
      in.cgroup = m.value("cgroup", "");
      in.stopping = m.value("stopping", false);
      in.noticed = m.value("noticed", false);
      in.deadline_ms = m.value("deadline_ms", int64_t{0});
      in.signal = m.value("signal", SIGTERM);
      in.log_sent = m.value("log_sent", int64_t{0});
      in.run = m.value("run", int64_t{0});
      in.procs = m.value("procs", std::vector<std::string>{});
      in.standby = m.value("standby", false);
      in.resume_pending = m.value("resume_pending", false);
      in.ready_pending = m.value("ready_pending", false);
      in.hook = m.value("hook", "");
      in.hook_deadline_ms = m.value("hook_deadline_ms", int64_t{0});
      in.gpus = m.value("gpus", std::vector<int>{});
      in.waiting = m.value("waiting", false);
      if (!in.waiting && !ReadExit(in.dir) && !InstanceAlive(in.dir)) {
        in.failed = "lost: its process ended while the agent was down, and how is not known";
      }
      if (in.stopping) in.kill_at_ms = a.clock_->NowMs();  // its stop was under way: finish it
      ++a.adopted_;
      instances.emplace(in.key, std::move(in));
    }
  }

  // Carries out a start (or a migration's new instance).
  void Start(const Json& o, const std::string& key) {
    Instance in;
    in.key = key;
    in.task = o.value("task", "");
    in.job = o.value("job", "");
    in.instance = o.value("instance", uint64_t{0});
    in.dir = InstancesDir() + "/" + key;
    in.run = a.clock_->NowMs();
    // Unique on the machine, also with several agents on it: the instance and its agent's state.
    char tag[16];
    std::snprintf(tag, sizeof tag, "%08x", static_cast<unsigned>(std::hash<std::string>{}(opt.state_dir)));
    in.cgroup = key + "." + tag;
    for (char& c : in.cgroup) {
      if (c == '@') c = '_';
    }
    in.signal = SignalByName(o.value("checkpoint_signal", "SIGTERM")).value_or(SIGTERM);
    std::error_code ec;
    fs::remove_all(in.dir, ec);
    fs::create_directories(in.dir, ec);
    fs::permissions(in.dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                                fs::perms::others_exec, ec);
    WriteFile(in.dir + "/order.json", o.dump());  // its hooks run from it
    in.gpus = o.value("gpus", std::vector<int>{});
    in.waiting = HeldByALeavingInstance(in);
    if (!in.waiting) Begin(o, in);
    SaveMeta(in);
    instances[key] = std::move(in);
  }

  // True when an instance on its way out (told to stop, or noticed) has not ended yet and holds
  // one of `in`'s GPUs: its process may still use them, so `in` may not start yet.
  bool HeldByALeavingInstance(const Instance& in) const {
    for (const auto& [key, other] : instances) {
      if (key == in.key || other.waiting || other.end_sent || !other.failed.empty()) continue;
      if (!other.stopping && !other.noticed) continue;  // shared fractional GPUs stay shared
      if (ReadExit(other.dir).has_value()) continue;
      for (const int g : in.gpus) {
        if (std::find(other.gpus.begin(), other.gpus.end(), g) != other.gpus.end()) return true;
      }
    }
    return false;
  }

  // Launches the instance of order `o` and reports it running (a migration's new instance once
  // its `ready` hook succeeds, if its job has one).
  void Begin(const Json& o, Instance& in) {
    in.waiting = false;
    in.run = a.clock_->NowMs();
    const Status st = Launch(o, in);
    if (!st.ok()) in.failed = st.message();
    in.ready_pending = o.value("op", "") == "migrate" && HookOf(o, "ready") != nullptr;
    ++a.starts_;
    if (in.failed.empty() && !in.ready_pending) Report(in, "running");
  }

  // The job's hook `name` in its order, or null.
  static const Json* HookOf(const Json& o, const char* name) {
    if (!o.contains("workload") || !o["workload"].contains("hooks")) return nullptr;
    const Json& h = o["workload"]["hooks"];
    return h.contains(name) ? &h[name] : nullptr;
  }

  Status Launch(const Json& o, Instance& in) {
    StatusOr<LaunchSpec> spec = SpecOf(o, in, nullptr);
    if (!spec.ok()) return spec.status();
    // Its cgroup: CPU and memory as requested; the GPUs it was not granted are denied.
    CgroupLimits limits;
    limits.cpu_milli = o.value("cpu_milli", int64_t{0});
    limits.memory_mib = o.value("memory_mib", int64_t{0});
    std::vector<int> granted = o.value("gpus", std::vector<int>{});
    for (int g = 0; g < opt.node.gpus; ++g) {
      if (std::find(granted.begin(), granted.end(), g) != granted.end()) continue;
      int minor = g;
      for (const GpuDevice& d : opt.gpus) {
        if (d.index == g) minor = d.minor;
      }
      limits.deny_gpu_minors.push_back(minor);
    }
    StatusOr<std::vector<std::string>> procs = opt.cgroups.Create(in.cgroup, limits);
    if (!procs.ok()) return procs.status();
    spec->cgroup_procs = *procs;
    in.procs = *procs;
    StatusOr<Launched> l = estuary::Launch(*spec);
    if (!l.ok()) {
      (void)opt.cgroups.Remove(in.cgroup);
      return l.status();
    }
    in.shim = l->shim;
    return Status::Ok();
  }

  // How the instance's command (or, with `hook`, that hook of its job) runs: as the user its
  // tenant maps to, in its workdir, with its environment; no cgroup yet.
  StatusOr<LaunchSpec> SpecOf(const Json& o, const Instance& in, const char* hook) {
    const Json w = o.value("workload", Json::object());
    if (!w.contains("command")) return InvalidArgument("the job has no command (it can run only on fake agents)");
    const std::string tenant = o.value("tenant", "");
    const auto mapped = opt.users.find(tenant);
    const std::string user_name = mapped != opt.users.end() ? mapped->second : opt.default_user;
    if (user_name.empty()) return PermissionDenied("tenant '" + tenant + "' maps to no Unix user on this node");
    StatusOr<User> user = LookUpUser(user_name);
    if (!user.ok()) return user.status();
    if (user->uid == 0 && !opt.allow_root) {
      return PermissionDenied("tenant '" + tenant + "' maps to root, and the agent does not allow root (--allow-root)");
    }
    LaunchSpec spec;
    const Json& command = hook != nullptr ? *HookOf(o, hook) : w["command"];
    if (command.is_string()) spec.argv = {"/bin/sh", "-c", command.get<std::string>()};
    else spec.argv = command.get<std::vector<std::string>>();
    spec.uid = user->uid;
    spec.gid = user->gid;
    spec.groups = user->groups;
    spec.workdir = w.value("workdir", user->workdir);
    spec.log_path = in.dir + "/log";
    spec.state_dir = in.dir;
    // The environment: the user's, the job's, then the agent's (which the job may not set).
    std::map<std::string, std::string> env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                                              {"HOME", user->home},
                                              {"USER", user->name},
                                              {"LOGNAME", user->name}};
    const Json job_env = w.value("env", Json::object());  // items() must not outlive it
    for (const auto& [k, v] : job_env.items()) env[k] = v.get<std::string>();
    const std::string ckpt = opt.state_dir + "/checkpoints/" + in.job;
    std::error_code ec;
    fs::create_directories(ckpt, ec);
    if (chown(ckpt.c_str(), user->uid, user->gid) != 0 && geteuid() == 0) {
      return Internal("checkpoint directory " + ckpt + ": cannot give it to " + user->name);
    }
    chmod(ckpt.c_str(), 0700);
    std::string visible;
    for (const Json& g : o.value("gpus", Json::array())) {
      const int index = g.get<int>();
      std::string name = std::to_string(index);
      for (const GpuDevice& d : opt.gpus) {
        if (d.index == index && !d.uuid.empty()) name = d.uuid;
      }
      visible += (visible.empty() ? "" : ",") + name;
    }
    env["ESTUARY_JOB_ID"] = in.job;
    env["ESTUARY_REPLICA"] = std::to_string(o.value("replica", 0));
    env["ESTUARY_REPLICAS"] = std::to_string(o.value("replicas", 0));
    env["ESTUARY_MASTER_ADDR"] = o.value("master_addr", "");
    env["ESTUARY_MASTER_PORT"] = std::to_string(o.value("master_port", 0));
    env["ESTUARY_RESTART_COUNT"] = std::to_string(o.value("restart_count", 0));
    env["ESTUARY_CHECKPOINT_DIR"] = ckpt;
    env["ESTUARY_NOTICE_FILE"] = in.dir + "/notice";
    env["ESTUARY_NODE"] = opt.node.name;
    if (o.contains("from")) env["ESTUARY_MIGRATED_FROM"] = o.value("from", "");
    env["CUDA_VISIBLE_DEVICES"] = visible;
    env["NVIDIA_VISIBLE_DEVICES"] = visible.empty() ? "none" : visible;
    if (o.value("gpu_milli", 1000) < 1000) env["ESTUARY_GPU_MILLI"] = std::to_string(o.value("gpu_milli", 1000));
    for (const auto& [k, v] : env) spec.env.push_back(k + "=" + v);
    return spec;
  }

  // Sends the checkpoint signal (a notice) to a running instance.
  void Notice(Instance& in, int64_t deadline_ms) {
    if (!in.failed.empty() || in.waiting) return;
    WriteFile(in.dir + "/notice", "deadline_ms " + std::to_string(deadline_ms) + "\n");
    chmod((in.dir + "/notice").c_str(), 0644);
    (void)SignalGroup(RecordedPid(in.dir), in.signal);
    in.noticed = true;
    in.deadline_ms = deadline_ms;
    SaveMeta(in);
  }

  void Stop(Instance& in, int64_t now_ms) {
    if (in.stopping) return;
    in.stopping = true;
    if (in.failed.empty() && !in.waiting) {
      if (in.noticed) {  // its grace period is over: killed now (its GPUs may be ordered to another)
        (void)SignalGroup(RecordedPid(in.dir), SIGKILL);
        in.kill_at_ms = now_ms;
      } else {
        (void)SignalGroup(RecordedPid(in.dir), in.signal);
        in.kill_at_ms = now_ms + opt.kill_wait_ms;
      }
    }
    SaveMeta(in);
  }

  void Carry(const Json& o) {
    const std::string op = o.value("op", "");
    const std::string key = KeyOf(o);
    const int64_t now = a.clock_->NowMs();
    auto it = instances.find(key);
    if (it != instances.end() && it->second.end_sent && (op == "start" || op == "migrate")) {
      Forget(it);  // the service took its end (it orders a new run only after that)
      it = instances.end();
    }
    if (op == "start" || op == "migrate") {
      if (it != instances.end() && !it->second.stopping) {
        const Instance& in = it->second;
        if (in.failed.empty() && !in.ready_pending && !in.waiting) Report(in, "running");  // a repeated start
        return;
      }
      // Still stopping: the service orders it again once it reports stopped. (Only an order without
      // an instance comes to this: a new instance of the replica has a key of its own, and waits
      // for the GPUs an instance on its way out still holds: HeldByALeavingInstance.)
      if (it != instances.end()) return;
      Start(o, key);
    } else if (op == "evict") {
      if (it != instances.end()) Notice(it->second, o.value("deadline_ms", now));
    } else if (op == "stop") {
      if (it == instances.end()) {
        Instance gone;
        gone.key = key;
        gone.task = o.value("task", "");
        gone.instance = o.value("instance", uint64_t{0});
        Report(gone, "stopped");
        return;
      }
      Stop(it->second, now);
    } else if (op == "standby" && it != instances.end()) {
      EnterStandby(it->second, now);
    } else if (op == "resume" && it != instances.end()) {
      Resume(it->second, now);
    }
  }

  // A standby order: its standby_enter hook runs (when the job has one); its outcome is reported
  // (standby, or standby-failed and the GPUs stay with it).
  void EnterStandby(Instance& in, int64_t now) {
    if (in.stopping || !in.failed.empty() || in.standby || in.hook == "standby_enter") return;
    if (in.waiting) {
      Report(in, "standby-failed", "it has not started yet (its GPUs' previous holder is still stopping)");
      return;
    }
    in.resume_pending = false;
    if (!StartHook(in, "standby_enter", now)) HookEnded(in, true, "", now);
    SaveMeta(in);
  }

  // A resume order: its standby_leave hook runs (when it entered Standby and the job has one).
  void Resume(Instance& in, int64_t now) {
    if (in.hook == "standby_enter") {
      in.resume_pending = true;  // after the enter hook
    } else if (in.standby) {
      in.standby = false;
      (void)StartHook(in, "standby_leave", now);
    }
    SaveMeta(in);
  }

  // Starts the job's hook `name` for the instance (as its user, in its cgroup, its output in its
  // log); false when the job has no such hook. A hook that cannot start ends at once, failed.
  bool StartHook(Instance& in, const char* name, int64_t now) {
    const Json o = Json::parse(FileText(in.dir + "/order.json"), nullptr, false);
    if (o.is_discarded() || HookOf(o, name) == nullptr) return false;
    in.hook = name;
    in.hook_shim = 0;
    in.hook_deadline_ms = now + opt.hook_timeout_ms;
    StatusOr<LaunchSpec> spec = SpecOf(o, in, name);
    const std::string dir = in.dir + "/hook";
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    if (spec.ok()) {
      spec->state_dir = dir;
      spec->cgroup_procs = in.procs;
      StatusOr<Launched> l = estuary::Launch(*spec);
      if (l.ok()) in.hook_shim = l->shim;
      else spec = l.status();
    }
    if (!spec.ok()) HookEnded(in, false, spec.status().message(), now);
    return true;
  }

  // The running hook ended (`ok`: exit 0; else `why`): what it was for follows.
  void HookEnded(Instance& in, bool ok, const std::string& why, int64_t now) {
    const std::string name = std::exchange(in.hook, "");
    if (name.empty() || name == "standby_enter") {
      if (ok) {
        in.standby = true;
        Report(in, "standby");
      } else {
        Report(in, "standby-failed", "standby_enter hook: " + why);
      }
      if (std::exchange(in.resume_pending, false)) Resume(in, now);
    } else if (name == "standby_leave") {
      if (!ok) {  // it cannot take its GPUs back: the replica fails
        (void)SignalGroup(RecordedPid(in.dir), SIGKILL);
        in.failed = "standby_leave hook: " + why;
      }
    } else if (ok) {  // ready
      in.ready_pending = false;
      Report(in, "running");
    } else {
      in.ready_next_ms = now + kReadyRetryMs;
    }
    SaveMeta(in);
  }

  // Hooks under way: ended, or killed at their deadline; `ready` hooks due are started.
  void StepHooks(Instance& in, int64_t now) {
    if (in.stopping || !in.failed.empty()) return;
    if (in.hook.empty()) {
      if (in.ready_pending && now >= in.ready_next_ms) (void)StartHook(in, "ready", now);
      return;
    }
    const std::string dir = in.dir + "/hook";
    if (in.hook_shim > 0 && ReapShim(in.hook_shim)) in.hook_shim = 0;
    if (const std::optional<ProcessExit> e = ReadExit(dir)) {
      const bool late = now > in.hook_deadline_ms;
      HookEnded(in, e->code == 0 && e->signal == 0 && !late,
                late ? "timed out after " + std::to_string(opt.hook_timeout_ms / 1000) + " s" : DescribeExit(*e), now);
    } else if (now > in.hook_deadline_ms) {
      (void)SignalGroup(RecordedPid(dir), SIGKILL);  // its exit is seen next round
    } else if (in.hook_shim == 0 && !InstanceAlive(dir)) {
      HookEnded(in, false, "lost while the agent was down", now);
    }
  }

  // The node's disk keeps only the part of an instance's log the service does not have yet:
  // what was sent is punched out of the file in whole MiB (its offsets stay, its blocks go), so a
  // replica that prints for weeks does not fill the node. `before`: what was sent until now.
  // Where the file system cannot punch holes, the file stays whole.
  static void ReleaseSentLog(const Instance& in, int64_t before) {
    constexpr int64_t kMiB = 1 << 20;
    const int64_t upto = in.log_sent / kMiB * kMiB;
    if (upto <= before / kMiB * kMiB) return;  // no new whole MiB
    const int fd = open((in.dir + "/log").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, upto);
    close(fd);
  }

  // Sends the next part of an instance's log; false when the service could not take it.
  bool SendLog(Instance& in, Replicas::Conn& conn) {
    std::ifstream f(in.dir + "/log", std::ios::binary);
    if (!f) return true;
    f.seekg(0, std::ios::end);
    const int64_t size = f.tellg();
    if (size <= in.log_sent) return true;
    const int64_t n = std::min<int64_t>(size - in.log_sent, opt.log_chunk_bytes);
    std::string data(static_cast<size_t>(n), '\0');
    f.seekg(in.log_sent);
    f.read(data.data(), n);
    // Bytes go as base64 (a log need not be UTF-8).
    const Json wire = {{"task", in.task}, {"node", opt.node.name}, {"run", in.run}, {"offset", in.log_sent},
                       {"data", EncodeBase64(data)}};
    const auto r = conn.get().Post("/v1/agent/logs", Auth(opt.token), wire.dump(), "application/json");
    if (!FromLeader(r)) conn.Fail();
    if (SendAgain(r)) return false;
    in.log_sent += n;  // taken, or refused for good (a job the service forgot): not again
    ReleaseSentLog(in, in.log_sent - n);
    return true;
  }

  // One round of the reporter: kills due, ends seen, logs sent, reports sent.
  void Round(Replicas::Conn& conn) {
    std::vector<std::string> keys;
    {
      std::lock_guard lk(mu);
      const int64_t now = a.clock_->NowMs();
      for (auto& [key, in] : instances) {
        if (in.shim > 0 && ReapShim(in.shim)) in.shim = 0;
        if (in.end_sent) continue;
        if (in.waiting && !in.stopping && !HeldByALeavingInstance(in)) {
          const Json o = Json::parse(FileText(in.dir + "/order.json"), nullptr, false);
          if (o.is_discarded()) in.failed = "its order was lost while it waited for its GPUs";
          else Begin(o, in);
          SaveMeta(in);
        }
        StepHooks(in, now);
        if (in.kill_at_ms > 0 && now >= in.kill_at_ms && in.failed.empty()) {
          (void)SignalGroup(RecordedPid(in.dir), SIGKILL);
          in.kill_at_ms = 0;
        }
        keys.push_back(key);
      }
    }
    for (const std::string& key : keys) {
      Instance copy;
      {
        std::lock_guard lk(mu);
        const auto it = instances.find(key);
        if (it == instances.end()) continue;
        copy = it->second;
      }
      const bool ended = !copy.failed.empty() || (copy.waiting && copy.stopping) || ReadExit(copy.dir).has_value();
      // Its log first (all of it once it ended), then its end.
      while (SendLog(copy, conn)) {
        std::ifstream f(copy.dir + "/log", std::ios::binary | std::ios::ate);
        if (!f || static_cast<int64_t>(f.tellg()) <= copy.log_sent || !ended) break;
      }
      std::lock_guard lk(mu);
      const auto it = instances.find(key);
      if (it == instances.end()) continue;
      it->second.log_sent = copy.log_sent;
      if (!ended) continue;
      std::ifstream f(copy.dir + "/log", std::ios::binary | std::ios::ate);
      if (f && static_cast<int64_t>(f.tellg()) > copy.log_sent) continue;  // more to send first
      Instance& in = it->second;
      if (in.end_sent) continue;
      // A process that left after its eviction notice (it checkpointed) has been stopped: its
      // end is reported with the stop that follows — or, when none comes (the eviction was
      // called off), a little after the deadline, and the service starts it again.
      if (in.noticed && !in.stopping && in.failed.empty() && a.clock_->NowMs() < in.deadline_ms + kNoticeSlackMs) continue;
      if (in.stopping || (in.noticed && in.failed.empty())) {
        Report(in, "stopped");
      } else if (!in.failed.empty()) {
        Report(in, "failed", in.failed);
      } else {
        const ProcessExit e = *ReadExit(in.dir);
        if (e.signal == 0 && e.code == 0) Report(in, "succeeded");
        else Report(in, "failed", opt.cgroups.OomKills(in.cgroup) > 0 ? "out of memory" : DescribeExit(e));
      }
      in.end_sent = true;
      (void)opt.cgroups.Remove(in.cgroup);  // whatever it left running goes now; its record stays
    }
    std::vector<Outgoing> send;
    {
      std::lock_guard lk(mu);
      send = std::exchange(outbox, {});
    }
    if (send.empty()) return;
    Json list = Json::array();
    for (const Outgoing& o : send) list.push_back(o.report);
    const auto r = conn.get().Post("/v1/agent/reports", Auth(opt.token), Json{{"reports", list}}.dump(), "application/json");
    if (!FromLeader(r)) conn.Fail();
    std::lock_guard lk(mu);
    if (SendAgain(r)) {
      outbox.insert(outbox.begin(), send.begin(), send.end());
      return;
    }
    // Taken: ended instances are forgotten (a new run of the same replica may have begun since).
    for (const Outgoing& o : send) {
      const auto it = instances.find(o.key);
      if (o.end && it != instances.end() && it->second.end_sent && it->second.run == o.run) Forget(it);
    }
  }
};

NodeAgent::NodeAgent(NodeAgentOptions options, const Clock* clock) : opt_(std::move(options)), clock_(clock) {}
NodeAgent::~NodeAgent() = default;

Status NodeAgent::Run(const std::atomic<bool>& stop) {
  Impl s(*this);
  Replicas service(opt_.server);
  {
    Replicas::Conn conn(service, 30);
    Json d = Json::object();
    for (const auto& [plane, names] : opt_.node.domains) d[plane] = names;
    Json node = {{"name", opt_.node.name}, {"gpus", opt_.node.gpus}, {"gpu_model", opt_.node.gpu_model},
                 {"cpu_milli", opt_.node.cpu_milli}, {"memory_mib", opt_.node.memory_mib}, {"domains", d}};
    if (!opt_.address.empty()) node["address"] = opt_.address;
    const std::string body = Json{{"nodes", Json::array({node})}}.dump();
    ESTUARY_RETURN_IF_ERROR(PostNodes(conn, opt_.token, body, stop));
  }
  s.Adopt();
  // Where the orders carried out end: a restarted agent goes on after them.
  uint64_t epoch = 0, after = 0;
  {
    std::istringstream cursor(FileText(opt_.state_dir + "/cursor"));
    cursor >> epoch >> after;
  }

  std::thread heartbeats([&] { SendHeartbeats(service, opt_.token, opt_.heartbeat_interval_ms, stop); });
  std::thread reporter([&] {
    Replicas::Conn conn(service, 30);
    while (!stop) {
      s.Round(conn);
      std::this_thread::sleep_for(std::chrono::milliseconds(opt_.report_interval_ms));
    }
  });

  Replicas::Conn conn(service, static_cast<int>(opt_.poll_wait_ms / 1000 + 30));
  while (!stop) {
    const std::optional<Json> polled = PollOrders(conn, opt_.token, opt_.poll_wait_ms, &epoch, &after);
    if (!polled) continue;
    const Json& j = *polled;
    {
      std::lock_guard lk(s.mu);
      for (const Json& o : j["orders"]) {
        const uint64_t seq = o.value("seq", uint64_t{0});
        if (seq <= after) continue;
        after = seq;
        if (o.value("node", "") != opt_.node.name) continue;
        s.Carry(o);
      }
      after = std::max(after, j.value("last_seq", after));
    }
    WriteFile(opt_.state_dir + "/cursor", std::to_string(epoch) + " " + std::to_string(after) + "\n");
  }
  heartbeats.join();
  reporter.join();
  return Status::Ok();
}

}  // namespace estuary
