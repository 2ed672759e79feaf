#include "tools/service_cmds.h"

#include <csignal>
#include <fstream>
#include <cstdio>
#include <functional>
#include <thread>

#include <nlohmann/json.hpp>

#include "agent/fake_agent.h"
#include "agent/node_agent.h"
#include "agent/nvml.h"
#include "common/clock.h"
#include "common/text.h"
#include "server/http_api.h"
#include "server/service.h"
#include "sim/cluster/cluster_spec.h"
#include "sim/scenario.h"
#include "store/etcd_election.h"
#include "store/etcd_store.h"
#include "store/sqlite_store.h"

namespace estuary {
namespace {

// One structured log line (JSON) on stderr.
void Log(const RealClock& clock, const std::string& level, const std::string& msg, nlohmann::json fields = {}) {
  if (!fields.is_object()) fields = nlohmann::json::object();
  fields["ts_ms"] = clock.NowMs();
  fields["level"] = level;
  fields["msg"] = msg;
  std::fprintf(stderr, "%s\n", fields.dump().c_str());
}

int Fail(const Status& st) {
  std::fprintf(stderr, "estuary: %s\n", st.message().c_str());
  return st.ExitCode();
}

// Blocks SIGINT and SIGTERM in every thread started afterwards; WaitForSignal takes one.
void BlockStopSignals() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &s, nullptr);
}

int WaitForSignal() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  int sig = 0;
  sigwait(&s, &sig);
  return sig;
}

// "HOST:PORT" with PORT in 1..65535.
StatusOr<std::pair<std::string, int>> ParseListen(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size() || s.size() - colon > 6) {
    return InvalidArgument("--listen: '" + s + "' is not HOST:PORT");
  }
  int port = 0;
  for (size_t i = colon + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return InvalidArgument("--listen: '" + s + "' is not HOST:PORT");
    port = port * 10 + (s[i] - '0');
  }
  if (port < 1 || port > 65535) return InvalidArgument("--listen: port " + std::to_string(port) + " is outside [1, 65535]");
  return std::pair{s.substr(0, colon), port};
}

// The configuration `estuary serve` runs without --config (docs/schema.md): the scheduler
// configuration schema's own defaults, plus the mechanisms a live cluster wants on — priority
// queue, Reclaim, Absorb and Standby lending to everything below HP.
constexpr const char* kServiceConfiguration =
    "{name: service, queue: priority, preempt: {grace_s: 60}, absorb: true, standby: {lend_max_priority: 699}}\n";

}  // namespace

Status ApplySchedulerConfig(const SchedulerConfig& c, const std::string& path, ServiceOptions* o) {
  const std::string where = path + ":" + std::to_string(c.line) + ": configuration '" + c.name + "': ";
  if (!c.pack_plane.empty()) return InvalidArgument(where + "pack: not supported by the service");
  if (c.defrag.enabled && c.defrag.objective != "nodes") {
    return InvalidArgument(where + "defrag: objective: only 'nodes' is supported by the service");
  }
  if (!c.federation.empty()) return InvalidArgument(where + "federation: not supported by the service");
  EngineConfig e;
  ApplyPlacementAndReclaim(c, e);  // its grace_s: ServiceOptions::grace_s below wins (as --grace-s)
  e.priority_queue = c.priority_queue;
  e.hold_survivors = c.hold_survivors;
  if (!c.preempt) std::erase(e.actions, EngineAction::kReclaim);
  if (c.backfill.easy) EnableBackfill(c.backfill, &e);
  e.standby_grace_s = c.standby ? c.standby_grace_s : c.grace_s;
  e.reserve = c.reserve.ToEngine();
  if (c.defrag.enabled) {
    const DefragConfig& d = c.defrag;
    e.defrag = d.ToEngine(d.plan);
    e.migration = d.migration;
  }
  e.queues = c.queues;  // checked against the models the quotas name (the service learns the rest from its nodes)
  e.sharing = c.sharing;
  if (!c.queues.empty()) {
    GpuModels models;
    for (const QueueSpec& q : c.queues) {
      for (const QuotaAmounts* a : {&q.guarantee, &q.limit, &q.lend_limit}) {
        for (const auto& [name, milli] : a->model_milli) (void)models.Intern(name);
      }
    }
    int line = 0;
    auto tree = QueueTree::Build(c.queues, models, &line);
    if (!tree.ok()) return InvalidArgument(path + ":" + std::to_string(line > 0 ? line : c.line) + ": " + tree.status().message());
  }
  o->engine = e;
  o->policy = c.policy;
  o->grace_s = c.grace_s;
  o->absorb = c.absorb;
  o->standby = c.standby;
  if (c.standby) o->lend_max_priority = c.lend_max_priority;
  o->standby_grace_own = c.standby && c.standby_grace_given;
  return Status::Ok();
}

CLI::App* AddServeCommand(CLI::App& app, ServeFlags& f) {
  CLI::App* s = app.add_subcommand("serve", "run the live scheduler service: HTTP/JSON API, agents, SQLite state (docs/service.md)");
  s->add_option("--listen", f.listen, "HOST:PORT to listen on (default 127.0.0.1:8080)");
  s->add_option("--data", f.data, "directory of the service's state (SQLite: DIR/estuary.db); required with --store sqlite");
  s->add_option("--store", f.store, "sqlite (default: one replica, state under --data) or etcd (several replicas, one leader)");
  s->add_option("--etcd-endpoints", f.etcd_endpoints, "with --store etcd: the etcd cluster's client URLs, URL[,URL...]");
  s->add_option("--etcd-prefix", f.etcd_prefix, "with --store etcd: key prefix of the state (default estuary/)");
  s->add_option("--advertise", f.advertise, "with --store etcd: this replica's URL as other replicas report it (default http://LISTEN)");
  s->add_option("--tokens", f.tokens, "tokens file: one 'TOKEN ROLE NAME' per line, ROLE admin|tenant|agent")->required();
  s->add_option("--sync", f.sync, "SQLite durability: full (default; survives a machine crash) or normal (survives kill -9)");
  s->add_option("--config", f.config,
                "a scheduler configuration (the schema of a scenario's configurations: entries, docs/simulate.md): "
                "a scenario file (with --configuration NAME) or a file of one configuration mapping");
  s->add_option("--configuration", f.configuration, "with --config: the entry of its configurations: list to use");
  s->add_option("--policy", f.policy, "placement policy (default: the configuration's, else best-fit)");
  s->add_option("--grace-s", f.grace_s, "Reclaim's eviction grace period in seconds (default: the configuration's, else 60)")
      ->check(CLI::Range(0, 86400))
      ->default_str("");  // its default (-1: the configuration's) is no value to show
  s->add_option("--heartbeat-timeout-s", f.heartbeat_timeout_s, "a node without heartbeats this long fails (default 30)")
      ->check(CLI::Range(1, 86400));
  s->add_option("--retain-ended-s", f.retain_ended_s,
                "an ended job stays listed (and stored) this long, then is forgotten (default 86400)")
      ->check(CLI::Range(1, 365 * 86400));
  s->add_option("--max-body-bytes", f.max_body_bytes, "larger request bodies get 413 (default 1048576)")
      ->check(CLI::Range(1024, 1 << 30));
  s->add_option("--rate", f.rate, "requests per second per caller before 429 (default 20000)")->check(CLI::Range(0.001, 1e9));
  s->add_option("--tls-cert", f.tls_cert, "PEM certificate: serve HTTPS (with --tls-key)");
  s->add_option("--tls-key", f.tls_key, "PEM private key of --tls-cert");
  s->add_option("--logs", f.logs, "directory of replicas' logs (default DATA/logs with --store sqlite; none with etcd)");
  return s;
}

CLI::App* AddAgentCommand(CLI::App& app, AgentFlags& f) {
  CLI::App* a = app.add_subcommand("agent",
                                   "run a node agent: --node NAME runs replicas as real processes on this machine "
                                   "(docs/agent.md); --fake-nodes N registers N nodes and runs timed fake processes");
  a->add_option("--server", f.server, "the service's URL, e.g. http://127.0.0.1:8080, or its replicas' URL,URL,...")->required();
  auto* token = a->add_option("--token", f.token, "an agent token of the service's tokens file");
  auto* token_file = a->add_option("--token-file", f.token_file,
                                   "a file holding the agent token on one line (keeps it out of the process list)");
  token->excludes(token_file);
  auto* fake = a->add_option("--fake-nodes", f.fake_nodes, "nodes to register (with --cluster: its first N nodes)")
                   ->check(CLI::Range(1, 1000000))
                   ->default_str("");
  auto* node = a->add_option("--node", f.node, "the name this machine registers as (a real node)");
  fake->excludes(node);
  a->add_option("--gpus", f.gpus, "a real node's GPUs (default: what NVML finds; 0 without NVML)")
      ->check(CLI::Range(0, 16))
      ->default_str("");
  a->add_option("--domains", f.domains, "a real node's topology: PLANE=TOP/.../BOTTOM,... e.g. data=az1/spine3/asw12,param=pod7");
  a->add_option("--address", f.address, "where a real node's replicas are reached (default: its name)");
  a->add_option("--state", f.state_dir, "a real node's state: instances, checkpoints (default /var/lib/estuary/agent)");
  a->add_option("--run-as", f.run_as, "Unix users of tenants: TENANT=USER,...");
  a->add_option("--default-user", f.default_user, "the Unix user of tenants --run-as does not name (default: refuse them)");
  a->add_flag("--allow-root", f.allow_root, "a tenant may map to root (default: refused)");
  a->add_option("--cpu-milli", f.cpu_milli, "a real node's CPU to offer (default: its CPUs)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->default_str("");
  a->add_option("--memory-mib", f.memory_mib, "a real node's memory to offer (default: its memory)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->default_str("");
  a->add_option("--kill-wait-s", f.kill_wait_s, "a stop without a notice: SIGKILL this long after the checkpoint signal (default 10)")
      ->check(CLI::Range(0, 3600));
  a->add_option("--gpus-per-node", f.gpus_per_node, "GPUs per fake node (default 8)")->check(CLI::Range(0, 16));
  a->add_option("--gpu-model", f.gpu_model, "GPU model of the fake nodes (default H800)");
  a->add_option("--prefix", f.prefix, "node names are PREFIX-nNNNNNN (default fake)");
  a->add_option("--cluster", f.cluster, "a cluster spec (YAML): register its nodes, models and domains instead");
  a->add_option("--heartbeat-s", f.heartbeat_s, "seconds between heartbeats (default 5)")->check(CLI::Range(1, 3600));
  return a;
}

namespace {

// The service's and the HTTP server's options from `f`: the flags checked (each bad one named),
// the scheduler configuration read (--config, else the built-in one) and single keys overridden
// by their flags.
Status ServeOptionsFrom(const ServeFlags& f, ServiceOptions* o, HttpOptions* ho) {
  auto listen = ParseListen(f.listen);
  if (!listen.ok()) return listen.status();
  if (f.sync != "full" && f.sync != "normal") return InvalidArgument("--sync: '" + f.sync + "' is not full or normal");
  if (f.store != "sqlite" && f.store != "etcd") return InvalidArgument("--store: '" + f.store + "' is not sqlite or etcd");
  if (f.store == "sqlite" && f.data.empty()) return InvalidArgument("--data: required with --store sqlite");
  if (f.store == "etcd" && f.etcd_endpoints.empty()) return InvalidArgument("--etcd-endpoints: required with --store etcd");
  if (f.store == "sqlite" && !f.etcd_endpoints.empty()) return InvalidArgument("--etcd-endpoints: only with --store etcd");
  if (!f.configuration.empty() && f.config.empty()) return InvalidArgument("--configuration: only with --config");
  const std::string path = f.config.empty() ? "(the built-in service configuration)" : f.config;
  auto conf = f.config.empty() ? ParseSchedulerConfigText(kServiceConfiguration, path, "")
                               : ReadSchedulerConfig(f.config, f.configuration);
  if (!conf.ok()) return conf.status();
  if (Status st = ApplySchedulerConfig(*conf, path, o); !st.ok()) return st;
  ho->host = listen->first;
  ho->port = listen->second;
  ho->max_body_bytes = static_cast<size_t>(f.max_body_bytes);
  ho->rate_per_s = f.rate;
  ho->burst = 2 * f.rate;
  ho->tls_cert = f.tls_cert;
  ho->tls_key = f.tls_key;
  if (!f.policy.empty()) o->policy = f.policy;  // flags override single keys
  if (f.grace_s >= 0) o->grace_s = f.grace_s;
  o->heartbeat_timeout_ms = f.heartbeat_timeout_s * 1000;
  o->retain_ended_ms = f.retain_ended_s * 1000;
  o->logs_dir = !f.logs.empty() ? f.logs : f.store == "sqlite" ? f.data + "/logs" : "";
  return Status::Ok();
}

}  // namespace

int RunServeCommand(const ServeFlags& f) {
  const RealClock clock;
  ServiceOptions o;
  HttpOptions ho;
  if (Status st = ServeOptionsFrom(f, &o, &ho); !st.ok()) return Fail(st);
  auto tokens = TokenTable::Read(f.tokens);
  if (!tokens.ok()) return Fail(tokens.status());

  BlockStopSignals();
  std::atomic<bool> stop{false}, lost{false};
  std::mutex api_mu;
  HttpApi* api_ptr = nullptr;
  const auto shutdown_api = [&] {
    std::lock_guard lk(api_mu);
    if (api_ptr != nullptr) api_ptr->Shutdown();
  };
  std::thread waiter([&] {
    const int sig = WaitForSignal();
    const bool external = !stop.exchange(true);  // not finish() waking this thread
    if (external && !lost) Log(clock, "info", "stopping", {{"signal", sig}});
    shutdown_api();
  });
  const auto finish = [&](int code) {
    if (!stop) {
      stop = true;
      pthread_kill(waiter.native_handle(), SIGTERM);
    }
    waiter.join();
    return code;
  };

  std::unique_ptr<Store> store;
  std::unique_ptr<LeaderElection> election;
  std::string where;
  if (f.store == "sqlite") {
    SqliteOptions so;
    so.synchronous_normal = f.sync == "normal";
    auto s = SqliteStore::Open(f.data, so);
    if (!s.ok()) return finish(Fail(s.status()));
    where = (*s)->path();
    store = std::move(*s);
  } else {
    EtcdConnection etcd;
    etcd.endpoints = SplitList(f.etcd_endpoints, ',');
    LeaderElectionOptions lo;
    lo.etcd = etcd;
    lo.key = f.etcd_prefix + "leader";
    lo.identity = f.advertise.empty() ? "http://" + f.listen : f.advertise;
    lo.on_lost = [&](const std::string& why) {
      lost = true;
      Log(clock, "error", "lost leadership: stopping", {{"why", why}});
      std::thread([&] { shutdown_api(); }).detach();
    };
    auto e = LeaderElection::Create(lo);
    if (!e.ok()) return finish(Fail(e.status()));
    election = std::move(*e);
    Log(clock, "info", "campaigning", {{"etcd", f.etcd_endpoints}, {"identity", lo.identity}});
    // While it campaigns, the replica answers on its address with a redirect to the leader.
    LeaderElection* el = election.get();
    const std::unique_ptr<HttpApi> follower = HttpApi::Follower(ho, [el, &lo]() -> std::optional<std::string> {
      auto leader = el->Leader();
      if (!leader.ok() || !*leader || **leader == lo.identity) return std::nullopt;
      return **leader;
    });
    if (Status st = follower->Bind(); !st.ok()) return finish(Fail(st));
    std::thread follower_thread([&] { (void)follower->Serve(); });
    auto term = election->Campaign(stop);
    follower->Shutdown();
    follower_thread.join();
    if (!term.ok()) {
      if (stop) return finish(0);
      return finish(Fail(term.status()));
    }
    Log(clock, "info", "leading", {{"fence_revision", *term}});
    EtcdStoreOptions so;
    so.etcd = etcd;
    so.prefix = f.etcd_prefix + "state/";
    so.fence = election->fence();
    auto s = EtcdStore::Open(so);
    if (!s.ok()) return finish(Fail(s.status()));
    where = f.etcd_endpoints + " " + so.prefix;
    store = std::move(*s);
    o.store_max_ops = 4096;  // below etcd's --max-txn-ops (see docs/service.md)
  }
  auto service = Service::Open(store.get(), &clock, o);
  if (!service.ok()) return finish(Fail(service.status()));
  HttpApi api(service->get(), &*tokens, ho);
  if (Status st = api.Bind(); !st.ok()) return finish(Fail(st));
  {
    std::lock_guard lk(api_mu);
    api_ptr = &api;
  }
  if (stop) api.Shutdown();
  (*service)->Start();
  Log(clock, "info", "listening",
      {{"addr", ho.host + ":" + std::to_string(api.port())}, {"store", f.store}, {"state", where},
       {"tokens", tokens->size()}, {"tls", !ho.tls_cert.empty()}});
  const Status served = api.Serve();
  {
    std::lock_guard lk(api_mu);
    api_ptr = nullptr;
  }
  (*service)->Stop();
  if (election && !lost) (void)election->Resign();
  if (!served.ok()) Log(clock, "error", served.message());
  Log(clock, "info", "stopped");
  return finish(lost || !served.ok() ? 1 : 0);
}

int RunRealAgent(const AgentFlags& f, const RealClock& clock);

// Runs `run` until it returns, telling it to stop (its flag) on SIGINT or SIGTERM.
Status RunUntilStopped(const std::function<Status(const std::atomic<bool>&)>& run) {
  BlockStopSignals();
  std::atomic<bool> stop{false};
  std::thread waiter([&] {
    WaitForSignal();
    stop = true;
  });
  const Status st = run(stop);
  if (!stop) {
    stop = true;
    pthread_kill(waiter.native_handle(), SIGTERM);
  }
  waiter.join();
  return st;
}

namespace {

// The token of --token-file: the file's one line (a final newline allowed), not empty, no spaces.
StatusOr<std::string> ReadAgentTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("--token-file: " + path + ": cannot open file");
  std::string text = FileText(path);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (text.find('\n') != std::string::npos) return InvalidArgument(path + ":2: expected one line: the agent token");
  if (text.empty()) return InvalidArgument(path + ":1: empty: expected the agent token");
  if (text.find_first_of(" \t\r\v\f") != std::string::npos) return InvalidArgument(path + ":1: the token holds white space");
  return text;
}

}  // namespace

int RunAgentCommand(const AgentFlags& flags) {
  const RealClock clock;
  AgentFlags f = flags;
  if (!f.token_file.empty()) {
    auto token = ReadAgentTokenFile(f.token_file);
    if (!token.ok()) return Fail(token.status());
    f.token = std::move(token).value();
  }
  if (f.token.empty()) return Fail(InvalidArgument("agent: give --token TOKEN or --token-file FILE"));
  if (f.fake_nodes == 0 && f.node.empty()) return Fail(InvalidArgument("agent: give --node NAME (a real node) or --fake-nodes N"));
  for (const std::string& url : SplitList(f.server, ',', /*keep_empty=*/true)) {
    if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
      return Fail(InvalidArgument("--server: '" + url + "' is not an http:// or https:// URL"));
    }
  }
  if (!f.node.empty()) return RunRealAgent(f, clock);
  FakeAgentOptions o;
  o.server = f.server;
  o.token = f.token;
  o.heartbeat_interval_ms = f.heartbeat_s * 1000;
  if (!f.cluster.empty()) {
    auto spec = ReadClusterSpec(f.cluster);
    if (!spec.ok()) return Fail(spec.status());
    const Topology& topo = spec->topology();
    for (const Node& n : spec->nodes()) {
      if (static_cast<int>(o.nodes.size()) >= f.fake_nodes) break;
      AgentNode a;
      a.name = n.spec.name;
      a.gpus = n.spec.gpu_count;
      a.gpu_model = n.spec.model.valid() ? spec->models().Name(n.spec.model) : "";
      a.cpu_milli = n.spec.cpu_milli;
      a.memory_mib = n.spec.mem_mib;
      for (const Plane& p : topo.planes()) {
        std::vector<std::string> names;
        for (size_t l = 0; l < p.levels.size(); ++l) {
          const DomainId d = topo.NodeDomain(n.id, p.id, static_cast<int>(l));
          if (d.valid()) names.push_back(topo.domain(d).name);
        }
        if (names.size() == p.levels.size()) a.domains.emplace_back(p.name, std::move(names));
      }
      o.nodes.push_back(std::move(a));
    }
    if (static_cast<int>(o.nodes.size()) < f.fake_nodes) {
      return Fail(InvalidArgument("--fake-nodes: " + std::to_string(f.fake_nodes) + " exceeds the " +
                                  std::to_string(o.nodes.size()) + " nodes of " + f.cluster));
    }
  } else {
    o.nodes = FakeNodes(f.prefix, f.fake_nodes, f.gpus_per_node, f.gpu_model);
  }
  FakeAgent agent(std::move(o), &clock);
  Log(clock, "info", "agent starting", {{"server", f.server}, {"nodes", f.fake_nodes}});
  const Status st = RunUntilStopped([&](const std::atomic<bool>& stop) { return agent.Run(stop); });
  if (!st.ok()) return Fail(st);
  Log(clock, "info", "agent stopped",
      {{"starts", agent.starts()}, {"stops", agent.stops()}, {"finished", agent.finished()},
       {"migrations", agent.migrations()}, {"standby_orders", agent.standby_orders()},
       {"resume_orders", agent.resume_orders()}});
  return 0;
}

// `estuary agent --node NAME`: this machine as one node (docs/agent.md).
int RunRealAgent(const AgentFlags& f, const RealClock& clock) {
  NodeAgentOptions o;
  o.server = f.server;
  o.token = f.token;
  o.heartbeat_interval_ms = f.heartbeat_s * 1000;
  o.kill_wait_ms = f.kill_wait_s * 1000;
  o.address = f.address;
  o.allow_root = f.allow_root;
  o.default_user = f.default_user;
  o.node.name = f.node;
  if (f.node.size() > 128 || f.node.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != std::string::npos) {
    return Fail(InvalidArgument("--node: '" + f.node + "' is not 1 to 128 characters of [A-Za-z0-9._-]"));
  }
  for (const std::string& pair : SplitList(f.run_as, ',')) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size()) {
      return Fail(InvalidArgument("--run-as: '" + pair + "' is not TENANT=USER"));
    }
    o.users[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  for (const std::string& entry : SplitList(f.domains, ',')) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size()) {
      return Fail(InvalidArgument("--domains: '" + entry + "' is not PLANE=TOP/.../BOTTOM"));
    }
    const std::vector<std::string> names = SplitList(entry.substr(eq + 1), '/');
    o.node.domains.emplace_back(entry.substr(0, eq), names);
  }
  std::error_code ec;
  std::filesystem::create_directories(f.state_dir, ec);
  if (ec) return Fail(InvalidArgument("--state: " + f.state_dir + ": " + ec.message()));
  o.state_dir = f.state_dir;
  // What the machine has: CPUs, memory (its cgroup's limit when lower), GPUs (NVML, or --gpus).
  const NodeResources found = DiscoverNode();
  o.node.cpu_milli = f.cpu_milli > 0 ? f.cpu_milli : found.cpu_milli;
  o.node.memory_mib = f.memory_mib > 0 ? f.memory_mib : found.memory_mib;
  StatusOr<std::vector<NvmlGpu>> nvml = DiscoverGpus();
  if (nvml.ok()) {
    for (const NvmlGpu& g : *nvml) o.gpus.push_back({g.index, g.minor, g.uuid});
    if (!nvml->empty()) o.node.gpu_model = nvml->front().model;
  }
  if (f.gpus >= 0) {
    if (f.gpus > static_cast<int>(o.gpus.size()) && !o.gpus.empty()) {
      return Fail(InvalidArgument("--gpus: " + std::to_string(f.gpus) + " exceeds the " + std::to_string(o.gpus.size()) +
                                  " GPUs NVML found"));
    }
    o.gpus.resize(std::min<size_t>(o.gpus.size(), static_cast<size_t>(f.gpus)));
    o.node.gpus = f.gpus;
  } else {
    o.node.gpus = static_cast<int32_t>(o.gpus.size());
  }
  if (o.node.gpus > 0 && o.node.gpu_model.empty()) o.node.gpu_model = f.gpu_model;
  Log(clock, "info", "agent node", {{"node", f.node}, {"gpus", o.node.gpus}, {"gpu_model", o.node.gpu_model},
                                    {"nvml", nvml.ok() ? std::string("ok") : nvml.status().message()},
                                    {"cpu_milli", o.node.cpu_milli}, {"memory_mib", o.node.memory_mib}});
  o.cgroups = Cgroups::Detect();
  Log(clock, "info", "agent cgroups", {{"mode", o.cgroups.mode()}});
  NodeAgent agent(std::move(o), &clock);
  const Status st = RunUntilStopped([&](const std::atomic<bool>& stop) { return agent.Run(stop); });
  if (!st.ok()) return Fail(st);
  Log(clock, "info", "agent stopped", {{"starts", agent.starts()}, {"adopted", agent.adopted()}, {"ended", agent.ended()}});
  return 0;
}

}  // namespace estuary
