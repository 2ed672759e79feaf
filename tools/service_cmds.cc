#include "tools/service_cmds.h"

#include <csignal>
#include <cstdio>
#include <thread>

#include <nlohmann/json.hpp>

#include "agent/fake_agent.h"
#include "common/clock.h"
#include "server/http_api.h"
#include "server/service.h"
#include "sim/cluster/cluster_spec.h"
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

}  // namespace

CLI::App* AddServeCommand(CLI::App& app, ServeFlags& f) {
  CLI::App* s = app.add_subcommand("serve", "run the live scheduler service: HTTP/JSON API, agents, SQLite state (docs/service.md)");
  s->add_option("--listen", f.listen, "HOST:PORT to listen on (default 127.0.0.1:8080)");
  s->add_option("--data", f.data, "directory of the service's state (SQLite: DIR/estuary.db)")->required();
  s->add_option("--tokens", f.tokens, "tokens file: one 'TOKEN ROLE NAME' per line, ROLE admin|tenant|agent")->required();
  s->add_option("--sync", f.sync, "SQLite durability: full (default; survives a machine crash) or normal (survives kill -9)");
  s->add_option("--policy", f.policy, "placement policy (default best-fit)");
  s->add_option("--grace-s", f.grace_s, "Reclaim's eviction grace period in seconds (default 60)")->check(CLI::Range(0, 86400));
  s->add_option("--heartbeat-timeout-s", f.heartbeat_timeout_s, "a node without heartbeats this long fails (default 30)")
      ->check(CLI::Range(1, 86400));
  s->add_option("--max-body-bytes", f.max_body_bytes, "larger request bodies get 413 (default 1048576)")
      ->check(CLI::Range(1024, 1 << 30));
  s->add_option("--rate", f.rate, "requests per second per caller before 429 (default 20000)")->check(CLI::Range(0.001, 1e9));
  s->add_option("--tls-cert", f.tls_cert, "PEM certificate: serve HTTPS (with --tls-key)");
  s->add_option("--tls-key", f.tls_key, "PEM private key of --tls-cert");
  return s;
}

CLI::App* AddAgentCommand(CLI::App& app, AgentFlags& f) {
  CLI::App* a = app.add_subcommand("agent", "run a fake node agent: registers nodes and runs tasks as timed fake processes");
  a->add_option("--server", f.server, "the service's URL, e.g. http://127.0.0.1:8080")->required();
  a->add_option("--token", f.token, "an agent token of the service's tokens file")->required();
  a->add_option("--fake-nodes", f.fake_nodes, "nodes to register (with --cluster: its first N nodes)")
      ->required()
      ->check(CLI::Range(1, 1000000));
  a->add_option("--gpus-per-node", f.gpus_per_node, "GPUs per fake node (default 8)")->check(CLI::Range(0, 16));
  a->add_option("--gpu-model", f.gpu_model, "GPU model of the fake nodes (default H800)");
  a->add_option("--prefix", f.prefix, "node names are PREFIX-nNNNNNN (default fake)");
  a->add_option("--cluster", f.cluster, "a cluster spec (YAML): register its nodes, models and domains instead");
  a->add_option("--heartbeat-s", f.heartbeat_s, "seconds between heartbeats (default 5)")->check(CLI::Range(1, 3600));
  return a;
}

int RunServeCommand(const ServeFlags& f) {
  const RealClock clock;
  auto listen = ParseListen(f.listen);
  if (!listen.ok()) return Fail(listen.status());
  if (f.sync != "full" && f.sync != "normal") return Fail(InvalidArgument("--sync: '" + f.sync + "' is not full or normal"));
  auto tokens = TokenTable::Read(f.tokens);
  if (!tokens.ok()) return Fail(tokens.status());
  SqliteOptions so;
  so.synchronous_normal = f.sync == "normal";
  auto store = SqliteStore::Open(f.data, so);
  if (!store.ok()) return Fail(store.status());
  ServiceOptions o;
  o.policy = f.policy;
  o.grace_s = f.grace_s;
  o.heartbeat_timeout_ms = f.heartbeat_timeout_s * 1000;
  auto service = Service::Open(store->get(), &clock, o);
  if (!service.ok()) return Fail(service.status());
  HttpOptions ho;
  ho.host = listen->first;
  ho.port = listen->second;
  ho.max_body_bytes = static_cast<size_t>(f.max_body_bytes);
  ho.rate_per_s = f.rate;
  ho.burst = 2 * f.rate;
  ho.tls_cert = f.tls_cert;
  ho.tls_key = f.tls_key;
  BlockStopSignals();
  HttpApi api(service->get(), &*tokens, ho);
  if (Status st = api.Bind(); !st.ok()) return Fail(st);
  (*service)->Start();
  Log(clock, "info", "listening",
      {{"addr", ho.host + ":" + std::to_string(api.port())}, {"data", (*store)->path()}, {"tokens", tokens->size()},
       {"tls", !ho.tls_cert.empty()}});
  std::thread waiter([&] {
    const int sig = WaitForSignal();
    Log(clock, "info", "stopping", {{"signal", sig}});
    api.Shutdown();
  });
  const Status served = api.Serve();
  if (!served.ok()) {
    Log(clock, "error", served.message());
    std::raise(SIGTERM);  // wakes the waiter
  }
  waiter.join();
  (*service)->Stop();
  Log(clock, "info", "stopped");
  return served.ok() ? 0 : 1;
}

int RunAgentCommand(const AgentFlags& f) {
  const RealClock clock;
  FakeAgentOptions o;
  o.server = f.server;
  o.token = f.token;
  o.heartbeat_interval_ms = f.heartbeat_s * 1000;
  if (f.server.rfind("http://", 0) != 0 && f.server.rfind("https://", 0) != 0) {
    return Fail(InvalidArgument("--server: '" + f.server + "' is not an http:// or https:// URL"));
  }
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
  BlockStopSignals();
  std::atomic<bool> stop{false};
  std::thread waiter([&] {
    WaitForSignal();
    stop = true;
  });
  FakeAgent agent(std::move(o), &clock);
  Log(clock, "info", "agent starting", {{"server", f.server}, {"nodes", f.fake_nodes}});
  const Status st = agent.Run(stop);
  if (!stop) {
    stop = true;
    pthread_kill(waiter.native_handle(), SIGTERM);
  }
  waiter.join();
  if (!st.ok()) return Fail(st);
  Log(clock, "info", "agent stopped",
      {{"starts", agent.starts()}, {"stops", agent.stops()}, {"finished", agent.finished()}});
  return 0;
}

}  // namespace estuary
