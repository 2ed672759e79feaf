// estuary_load: a submission load against a running `estuary serve` (issue 7's load line; driven
// by bench/service_load.sh). It submits single-GPU jobs at a fixed rate from several keep-alive
// connections for a duration, then waits for them to run and reads every job back as admin.
//
//   estuary_load --server http://127.0.0.1:PORT --token TENANT_TOKEN --admin-token ADMIN_TOKEN
//                [--rate 1000] [--duration-s 60] [--threads 8] [--job-duration-s 30] [--wait-s 60]
//
// Prints one JSON object: submissions attempted and accepted (201), the achieved rate, the HTTP
// round trip of a submission (p50/p99/max, client side), and submit-to-running (p50/p90/p99/max
// and how many never ran): per job, running_ms - submitted_ms as the service recorded them — from
// the moment it accepted the request (before storing it) to the moment the loop applied the
// agent's `running` report, i.e. end to end through storage, a scheduling cycle, the order's
// delivery to the agent and the agent's report. accepted_missing counts jobs that got a 201 but
// are not listed afterwards (it must be 0, a restart of the service in between included).
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

int Usage(const char* why) {
  std::fprintf(stderr, "estuary_load: %s\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string server, token, admin;
  double rate = 1000, duration_s = 60, wait_s = 60;
  int threads = 8, job_duration_s = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return Usage(("flag " + a + " needs a value").c_str());
    const std::string v = argv[++i];
    if (a == "--server") server = v;
    else if (a == "--token") token = v;
    else if (a == "--admin-token") admin = v;
    else if (a == "--rate") rate = std::atof(v.c_str());
    else if (a == "--duration-s") duration_s = std::atof(v.c_str());
    else if (a == "--wait-s") wait_s = std::atof(v.c_str());
    else if (a == "--threads") threads = std::atoi(v.c_str());
    else if (a == "--job-duration-s") job_duration_s = std::atoi(v.c_str());
    else return Usage(("unknown flag " + a).c_str());
  }
  if (server.empty() || token.empty() || admin.empty()) return Usage("--server, --token and --admin-token are required");
  if (rate <= 0 || duration_s <= 0 || threads < 1 || threads > 256) return Usage("--rate, --duration-s, --threads out of range");

  const httplib::Headers auth = {{"Authorization", "Bearer " + token}};
  const int64_t total = static_cast<int64_t>(rate * duration_s);
  std::atomic<int64_t> next{0}, accepted{0}, failed{0};
  std::mutex mu;
  std::vector<double> rtt_ms;
  std::vector<std::string> accepted_ids;
  const auto t0 = Clock::now() + std::chrono::milliseconds(200);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      httplib::Client c(server);
      c.set_keep_alive(true);
      c.set_tcp_nodelay(true);
      c.set_read_timeout(30, 0);
      std::vector<double> mine;
      std::vector<std::string> ids;
      for (int64_t i = next++; i < total; i = next++) {
        const auto at = t0 + std::chrono::microseconds(static_cast<int64_t>(static_cast<double>(i) * 1e6 / rate));
        std::this_thread::sleep_until(at);
        const std::string body = Json{{"name", "load" + std::to_string(i)}, {"replicas", {{"min", 1}, {"max", 1}}},
                                      {"gpus", 1}, {"cpu_milli", 1000}, {"memory_mib", 4096}, {"priority", 300},
                                      {"duration_s", job_duration_s}}
                                     .dump();
        const auto s = Clock::now();
        const auto r = c.Post("/v1/jobs", auth, body, "application/json");
        mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
        if (r && r->status == 201) {
          ++accepted;
          const Json j = Json::parse(r->body, nullptr, false);
          if (!j.is_discarded() && j.contains("id")) ids.push_back(j["id"].get<std::string>());
        } else {
          ++failed;
          if (!r) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the service is down
        }
      }
      std::lock_guard lk(mu);
      rtt_ms.insert(rtt_ms.end(), mine.begin(), mine.end());
      accepted_ids.insert(accepted_ids.end(), ids.begin(), ids.end());
    });
  }
  for (std::thread& t : pool) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();

  // Wait until every accepted job ran (or the wait ends), then read them all.
  httplib::Client c(server);
  c.set_read_timeout(120, 0);
  const httplib::Headers as_admin = {{"Authorization", "Bearer " + admin}};
  std::vector<double> to_running;
  int64_t never = 0, missing = 0;
  const auto until = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000));
  for (;;) {
    const auto r = c.Get("/v1/jobs", as_admin);
    if (!r || r->status != 200) return Usage("cannot list the jobs as admin");
    const Json jobs = Json::parse(r->body)["jobs"];
    to_running.clear();
    never = 0;
    std::set<std::string> listed;
    for (const Json& j : jobs) listed.insert(j["id"].get<std::string>());
    missing = 0;
    for (const std::string& id : accepted_ids) missing += listed.count(id) == 0;
    for (const Json& j : jobs) {
      const int64_t run = j["running_ms"].get<int64_t>();
      if (run < 0) ++never;
      else to_running.push_back(static_cast<double>(run - j["submitted_ms"].get<int64_t>()));
    }
    if (never == 0 || Clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  Json out;
  out["submissions"] = total;
  out["accepted"] = accepted.load();
  out["failed"] = failed.load();
  out["accepted_missing"] = missing;  // accepted (201) but not listed afterwards: must be 0
  out["elapsed_s"] = elapsed;
  out["rate_per_s"] = static_cast<double>(accepted.load()) / elapsed;
  out["submit_rtt_ms"] = {{"p50", Quantile(rtt_ms, 0.5)}, {"p99", Quantile(rtt_ms, 0.99)}, {"max", Quantile(rtt_ms, 1)}};
  out["submit_to_running_ms"] = {{"p50", Quantile(to_running, 0.5)},
                                 {"p90", Quantile(to_running, 0.9)},
                                 {"p99", Quantile(to_running, 0.99)},
                                 {"max", Quantile(to_running, 1)},
                                 {"ran", to_running.size()},
                                 {"never_ran", never}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
