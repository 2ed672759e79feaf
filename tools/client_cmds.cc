#include "tools/client_cmds.h"

#include <httplib.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "sim/scenario.h"

namespace estuary {
namespace {

using Json = nlohmann::json;

int Fail(const Status& st) {
  std::fprintf(stderr, "estuary: %s\n", st.message().c_str());
  return st.ExitCode();
}

// The server and token: flags, else the environment, else the client file.
Status Resolve(ClientFlags& f) {
  if (f.server.empty() && std::getenv("ESTUARY_SERVER") != nullptr) f.server = std::getenv("ESTUARY_SERVER");
  if (f.token.empty() && std::getenv("ESTUARY_TOKEN") != nullptr) f.token = std::getenv("ESTUARY_TOKEN");
  if (f.server.empty() || f.token.empty()) {
    std::string path;
    if (std::getenv("ESTUARY_CLIENT_CONFIG") != nullptr) path = std::getenv("ESTUARY_CLIENT_CONFIG");
    else if (std::getenv("HOME") != nullptr) path = std::string(std::getenv("HOME")) + "/.config/estuary/client";
    std::ifstream in(path);
    int n = 0;
    for (std::string line; in && std::getline(in, line);) {
      ++n;
      if (line.empty() || line[0] == '#') continue;
      const size_t eq = line.find('=');
      const std::string key = line.substr(0, eq);
      if (eq == std::string::npos || (key != "server" && key != "token")) {
        return InvalidArgument(path + ":" + std::to_string(n) + ": expected server=URL or token=TOKEN");
      }
      std::string& into = key == "server" ? f.server : f.token;
      if (into.empty()) into = line.substr(eq + 1);
    }
  }
  if (f.server.empty()) return InvalidArgument("no server: give --server URL, ESTUARY_SERVER or server= in the client file");
  if (f.token.empty()) return InvalidArgument("no token: give --token, ESTUARY_TOKEN or token= in the client file");
  if (f.server.rfind("http://", 0) != 0 && f.server.rfind("https://", 0) != 0) {
    return InvalidArgument("--server: '" + f.server + "' is not an http:// or https:// URL");
  }
  if (f.output != "table" && f.output != "json") return InvalidArgument("--output: '" + f.output + "' is not table or json");
  return Status::Ok();
}

// One request; the answer's body, or the reason in one line (4xx and unreachable: exit 2; 5xx: 1).
StatusOr<std::string> Call(const ClientFlags& f, const std::string& method, const std::string& path, const std::string& body = "") {
  httplib::Client c(f.server);
  c.set_connection_timeout(5, 0);
  c.set_read_timeout(60, 0);
  const httplib::Headers h = {{"Authorization", "Bearer " + f.token}};
  httplib::Result r = method == "GET"      ? c.Get(path, h)
                      : method == "DELETE" ? c.Delete(path, h)
                      : method == "PUT"    ? c.Put(path, h, body, "application/json")
                                           : c.Post(path, h, body, "application/json");
  if (!r) return InvalidArgument("cannot reach " + f.server + " (" + httplib::to_string(r.error()) + ")");
  if (r->status < 300) return r->body;
  const Json e = Json::parse(r->body, nullptr, false);
  const std::string why = !e.is_discarded() && e.contains("error") && e["error"].is_string() ? e["error"].get<std::string>() : r->body;
  const std::string line = "HTTP " + std::to_string(r->status) + ": " + why;
  return r->status >= 500 ? Internal(line) : InvalidArgument(line);
}

// Rows as aligned columns.
void PrintTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
}

std::string Str(const Json& v) { return v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump(); }

int Submit(const ClientFlags& f) {
  std::string text;
  const std::string name = f.file == "-" ? "(stdin)" : f.file;
  if (f.file == "-") {
    std::stringstream s;
    s << std::cin.rdbuf();
    text = s.str();
  } else {
    std::ifstream in(f.file);
    if (!in) return Fail(InvalidArgument(f.file + ": cannot open file"));
    std::stringstream s;
    s << in.rdbuf();
    text = s.str();
  }
  StatusOr<Json> job = ParseJobFileText(text, name);
  if (!job.ok()) return Fail(job.status());
  StatusOr<std::string> r = Call(f, "POST", "/v1/jobs", job->dump());
  if (!r.ok()) return Fail(r.status());
  const Json j = Json::parse(*r, nullptr, false);
  if (f.output == "json") std::printf("%s\n", j.dump().c_str());
  else std::printf("submitted job %s (%s)\n", j.value("id", "?").c_str(), job->value("name", "").c_str());
  return 0;
}

int Jobs(const ClientFlags& f) {
  StatusOr<std::string> r = Call(f, "GET", "/v1/jobs");
  if (!r.ok()) return Fail(r.status());
  Json list = Json::array();
  const Json all = Json::parse(*r);
  for (const Json& j : all["jobs"]) {
    if (f.all || j["state"] == "pending" || j["state"] == "running") list.push_back(j);
  }
  if (f.output == "json") {
    std::printf("%s\n", Json{{"jobs", list}}.dump().c_str());
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {{"ID", "NAME", "STATE", "RUNNING", "GPUS", "PRIORITY", "REASON"}};
  for (const Json& j : list) {
    rows.push_back({Str(j["id"]), Str(j["name"]), Str(j["state"]),
                    Str(j["running_replicas"]) + "/" + Str(j["replicas"]["max"]), Str(j["gpus"]), Str(j["priority"]),
                    Str(j["reason"])});
  }
  PrintTable(rows);
  return 0;
}

int OneJob(const ClientFlags& f) {
  StatusOr<std::string> r = Call(f, "GET", "/v1/jobs/" + f.id);
  if (!r.ok()) return Fail(r.status());
  Json j = Json::parse(*r);
  Json why;
  if (j["state"] == "pending") {
    StatusOr<std::string> e = Call(f, "GET", "/v1/jobs/" + f.id + "/explain");
    if (e.ok()) why = Json::parse(*e);
  }
  if (f.output == "json") {
    if (!why.is_null()) j["explain"] = why;
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("job %s  %s  %s  (tenant %s)\n", Str(j["id"]).c_str(), Str(j["name"]).c_str(), Str(j["state"]).c_str(),
              Str(j["tenant"]).c_str());
  std::printf("replicas: %s running, %s bound of %s..%s (step %s); %s GPU(s) each; priority %s; restarts %s\n",
              Str(j["running_replicas"]).c_str(), Str(j["bound_replicas"]).c_str(), Str(j["replicas"]["min"]).c_str(),
              Str(j["replicas"]["max"]).c_str(), Str(j["replicas"]["step"]).c_str(), Str(j["gpus"]).c_str(),
              Str(j["priority"]).c_str(), Str(j["restarts"]).c_str());
  if (j.contains("command")) {
    // One line of it: a shell command's first line, or argv joined.
    std::string shown;
    if (j["command"].is_string()) {
      shown = j["command"].get<std::string>();
      if (const size_t nl = shown.find('\n'); nl != std::string::npos && nl + 1 < shown.size()) shown = shown.substr(0, nl) + " ...";
      else if (nl != std::string::npos) shown = shown.substr(0, nl);
    } else {
      for (const Json& a : j["command"]) shown += (shown.empty() ? "" : " ") + Str(a);
    }
    std::printf("command: %s\n", shown.c_str());
  }
  for (const Json& w : j.value("where", Json::array())) {
    std::printf("  replica %s on %s, GPUs %s: %s\n", Str(w["replica"]).c_str(), Str(w["node"]).c_str(), w["gpus"].dump().c_str(),
                Str(w["state"]).c_str());
  }
  if (!Str(j["reason"]).empty()) std::printf("reason: %s\n", Str(j["reason"]).c_str());
  if (!why.is_null()) {
    for (const char* k : {"fits_now", "may_reclaim", "reclaim_feasible", "shortfall", "held_nodes", "what_would_help"}) {
      if (why.contains(k)) std::printf("%s: %s\n", k, Str(why[k]).c_str());
    }
  }
  return 0;
}

int Cancel(const ClientFlags& f) {
  StatusOr<std::string> r = Call(f, "DELETE", "/v1/jobs/" + f.id);
  if (!r.ok()) return Fail(r.status());
  if (f.output == "json") std::printf("%s\n", r->empty() ? "{}" : r->c_str());
  else std::printf("cancelled job %s\n", f.id.c_str());
  return 0;
}

int Logs(const ClientFlags& f) {
  httplib::Client c(f.server);
  c.set_connection_timeout(5, 0);
  c.set_read_timeout(f.follow ? 24 * 3600 : 60, 0);
  const std::string path = "/v1/jobs/" + f.id + "/logs?replica=" + std::to_string(f.replica) + (f.follow ? "&follow=1" : "");
  int status = 0;
  std::string error;
  auto r = c.Get(
      path, {{"Authorization", "Bearer " + f.token}},
      [&](const httplib::Response& res) {
        status = res.status;
        return true;
      },
      [&](const char* data, size_t n) {
        if (status >= 300) {
          error.append(data, n);
        } else {
          std::fwrite(data, 1, n, stdout);
          std::fflush(stdout);
        }
        return true;
      });
  if (!r) return Fail(InvalidArgument("cannot reach " + f.server + " (" + httplib::to_string(r.error()) + ")"));
  if (status >= 300) {
    const Json e = Json::parse(error, nullptr, false);
    const std::string why = !e.is_discarded() && e.contains("error") ? Str(e["error"]) : error;
    const std::string line = "HTTP " + std::to_string(status) + ": " + why;
    return Fail(status >= 500 ? Internal(line) : InvalidArgument(line));
  }
  return 0;
}

int Nodes(const ClientFlags& f) {
  StatusOr<std::string> r = Call(f, "GET", "/v1/nodes");
  if (!r.ok()) return Fail(r.status());
  const Json j = Json::parse(*r);
  if (f.output == "json") {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {{"NAME", "STATE", "GPUS", "USED", "MODEL", "ADDRESS", "AGENT"}};
  for (const Json& n : j["nodes"]) {
    const int64_t used = n.value("gpu_milli_used", int64_t{0});
    rows.push_back({Str(n["name"]), Str(n["state"]), Str(n["gpus"]), std::to_string(used / 1000) + "." + std::to_string(used % 1000 / 100),
                    Str(n["gpu_model"]), n.contains("address") ? Str(n["address"]) : "", Str(n["agent"])});
  }
  PrintTable(rows);
  return 0;
}

// GPUs as the table shows them: whole numbers plain, else one decimal.
std::string GpuCell(const Json& v) {
  if (!v.is_number()) return "-";
  char b[32];
  const double x = v.get<double>();
  std::snprintf(b, sizeof b, x == static_cast<double>(static_cast<int64_t>(x)) ? "%.0f" : "%.1f", x);
  return b;
}

int Queues(const ClientFlags& f) {
  StatusOr<std::string> r = std::string();
  if (!f.file.empty()) {
    std::ifstream in(f.file);
    if (!in) return Fail(InvalidArgument(f.file + ": cannot open file"));
    std::stringstream s;
    s << in.rdbuf();
    StatusOr<Json> body = ParseQueuesFileText(s.str(), f.file);
    if (!body.ok()) return Fail(body.status());
    r = Call(f, "PUT", "/v1/queues", body->dump());
  } else {
    r = Call(f, "GET", "/v1/queues");
  }
  if (!r.ok()) return Fail(r.status());
  const Json j = Json::parse(*r);
  if (f.output == "json") {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  // Each queue indented under its parent, in the tree's order (parents may be listed after).
  std::map<std::string, std::string> parent;
  for (const Json& q : j["queues"]) parent[Str(q["name"])] = q.contains("parent") ? Str(q["parent"]) : "";
  std::vector<std::vector<std::string>> rows = {
      {"QUEUE", "HELD", "GUARANTEED", "LIMIT", "FAIR", "BORROWED", "LENT", "PENDING", "WAITING", "RUNNING", "TENANTS"}};
  for (const Json& q : j["queues"]) {
    std::string indent;
    for (std::string p = parent[Str(q["name"])]; !p.empty() && indent.size() < 32; p = parent[p]) indent += "  ";
    const Json& g = q["gpus"];
    std::string tenants;
    if (q.contains("tenants")) {
      for (const Json& t : q["tenants"]) tenants += (tenants.empty() ? "" : ",") + Str(t);
    }
    rows.push_back({indent + Str(q["name"]), GpuCell(g["held"]), GpuCell(g["guaranteed"]), GpuCell(g["limit"]),
                    GpuCell(g["fair_share"]), GpuCell(g["borrowed"]), GpuCell(g["lent"]), GpuCell(g["pending"]),
                    Str(q["jobs"]["waiting"]), Str(q["jobs"]["running"]), tenants});
  }
  if (rows.size() == 1) std::printf("no queues\n");
  else PrintTable(rows);
  return 0;
}

}  // namespace

bool ClientCommands::Parsed() const {
  for (const CLI::App* a : {submit, jobs, job, cancel, logs, nodes, queues}) {
    if (a != nullptr && a->parsed()) return true;
  }
  return false;
}

ClientCommands AddClientCommands(CLI::App& app, ClientFlags& f) {
  ClientCommands c;
  auto common = [&](CLI::App* a) {
    a->add_option("--server", f.server, "the service's URL (default: ESTUARY_SERVER, else the client file)");
    a->add_option("--token", f.token, "a tenant's or admin's token (default: ESTUARY_TOKEN, else the client file)");
    a->add_option("--output,-o", f.output, "table (default) or json");
    return a;
  };
  c.submit = common(app.add_subcommand("submit", "submit a job (a JSON or YAML job file, or - for standard input)"));
  c.submit->add_option("file", f.file, "the job file")->required();
  c.jobs = common(app.add_subcommand("jobs", "list your jobs (pending and running)"));
  c.jobs->add_flag("--all", f.all, "ended jobs too");
  c.job = common(app.add_subcommand("job", "a job: its state, replicas, where they run and why it waits"));
  c.job->add_option("id", f.id, "the job's id")->required()->check(CLI::Number);
  c.cancel = common(app.add_subcommand("cancel", "cancel a job"));
  c.cancel->add_option("id", f.id, "the job's id")->required()->check(CLI::Number);
  c.logs = common(app.add_subcommand("logs", "a replica's output (stdout and stderr)"));
  c.logs->add_option("id", f.id, "the job's id")->required()->check(CLI::Number);
  c.logs->add_option("--replica", f.replica, "the replica (default 0)")->check(CLI::Range(0, 100000));
  c.logs->add_flag("--follow,-f", f.follow, "keep printing until the job has ended");
  c.nodes = common(app.add_subcommand("nodes", "the nodes (an admin's token)"));
  c.queues = common(app.add_subcommand("queues", "the queues: GPUs held, guaranteed, fair share, borrowed, pending per queue "
                                                 "(a tenant sees its own); --set FILE replaces them (an admin's token)"));
  c.queues->add_option("--set", f.file, "a queues file (JSON or YAML: queues: and optionally sharing:, docs/schema.md)");
  return c;
}

int RunClientCommand(const ClientCommands& c, ClientFlags f) {
  if (const Status st = Resolve(f); !st.ok()) return Fail(st);
  if (c.submit->parsed()) return Submit(f);
  if (c.jobs->parsed()) return Jobs(f);
  if (c.job->parsed()) return OneJob(f);
  if (c.cancel->parsed()) return Cancel(f);
  if (c.logs->parsed()) return Logs(f);
  if (c.queues->parsed()) return Queues(f);
  return Nodes(f);
}

}  // namespace estuary
