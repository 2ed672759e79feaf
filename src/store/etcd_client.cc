// EtcdClient (see etcd_client.h for the contract).
//
// One call:
//   1. start at the endpoint that answered last; take a kept-alive connection from its pool;
//   2. POST the JSON body with the time left until the call's deadline as the read and write
//      timeouts (and at most connect_timeout_ms to connect);
//   3. an answer (see below for how a body is read): HTTP 200 is the result (the streaming
//      lease/keepalive wraps it in "result", or reports a failure in "error"); otherwise the
//      gateway's {"code": gRPC code, "message"} decides: retryable (Unavailable,
//      DeadlineExceeded, "too many requests") or final;
//   4. no answer or a retryable one: the next endpoint; after each full round a pause of up to
//      100 ms; until the deadline, then Unavailable naming the last failure.
#include "store/etcd_client.h"

#include <httplib.h>
#include <openssl/evp.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

namespace estuary {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kMaxIdlePerEndpoint = 8;
constexpr milliseconds kRoundPause{100};

// gRPC status codes the gateway reports in "code".
constexpr int kGrpcInvalidArgument = 3;
constexpr int kGrpcDeadlineExceeded = 4;
constexpr int kGrpcNotFound = 5;
constexpr int kGrpcResourceExhausted = 8;
constexpr int kGrpcUnavailable = 14;

// True when `url` is "http://HOST:PORT" or "https://HOST:PORT" with a port in 1..65535 and no path.
bool ValidEndpoint(std::string_view url) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (url.substr(0, scheme.size()) != scheme) continue;
    const std::string_view rest = url.substr(scheme.size());
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    const std::string_view port = rest.substr(colon + 1);
    int value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    return ec == std::errc() && end == port.data() + port.size() && value >= 1 && value <= 65535 &&
           rest.substr(0, colon).find('/') == std::string_view::npos;
  }
  return false;
}

// What a refusal of etcd means for the call.
struct Refusal {
  bool retry = false;
  Status status;
};

Refusal Classify(int grpc_code, const std::string& message, const std::string& where) {
  const bool too_large = message.find("larger than max") != std::string::npos ||
                         message.find("request is too large") != std::string::npos;
  if (grpc_code == kGrpcUnavailable || grpc_code == kGrpcDeadlineExceeded ||
      (grpc_code == kGrpcResourceExhausted && !too_large)) {
    return {true, Unavailable(where + ": " + message)};
  }
  if (grpc_code == kGrpcInvalidArgument || too_large) return {false, InvalidArgument(where + ": " + message)};
  if (grpc_code == kGrpcNotFound) return {false, NotFound(where + ": " + message)};
  return {false, Internal(where + ": " + message + " (gRPC code " + std::to_string(grpc_code) + ")")};
}

// The string field `name` of `object`, or `fallback` when it is absent or not a string.
std::string StringField(const Json& object, const char* name, std::string fallback) {
  const auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::move(fallback);
}

template <typename Duration>
milliseconds AtLeastOneMs(Duration d) {
  return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(d));
}

}  // namespace

StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(EtcdConnection connection) {
  if (connection.endpoints.empty()) return InvalidArgument("etcd: no endpoint given");
  for (const std::string& url : connection.endpoints) {
    if (!ValidEndpoint(url)) return InvalidArgument("etcd: endpoint '" + url + "' is not http(s)://HOST:PORT");
  }
  if (connection.connect_timeout_ms <= 0 || connection.request_timeout_ms <= 0) {
    return InvalidArgument("etcd: timeouts must be positive");
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(connection)));
}

EtcdClient::EtcdClient(EtcdConnection connection) : connection_(std::move(connection)) {
  for (const std::string& url : connection_.endpoints) {
    auto e = std::make_unique<Endpoint>();
    e->url = url;
    endpoints_.push_back(std::move(e));
  }
}

EtcdClient::~EtcdClient() = default;

std::unique_ptr<httplib::Client> EtcdClient::Take(Endpoint& e) {
  {
    std::lock_guard<std::mutex> lock(e.mu);
    if (!e.idle.empty()) {
      std::unique_ptr<httplib::Client> c = std::move(e.idle.back());
      e.idle.pop_back();
      return c;
    }
  }
  auto c = std::make_unique<httplib::Client>(e.url);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);  // else Nagle + delayed ACKs add ~40 ms to every request on a kept-alive connection
  return c;
}

void EtcdClient::Return(Endpoint& e, std::unique_ptr<httplib::Client> client) {
  std::lock_guard<std::mutex> lock(e.mu);
  if (e.idle.size() < kMaxIdlePerEndpoint) e.idle.push_back(std::move(client));
}

StatusOr<Json> EtcdClient::Call(std::string_view path, const Json& body, int timeout_ms) {
  if (timeout_ms <= 0) timeout_ms = connection_.request_timeout_ms;
  const Clock::time_point deadline = Clock::now() + milliseconds(timeout_ms);
  const std::string payload = body.dump();
  const std::string path_str(path);
  const size_t n = endpoints_.size();
  size_t index = preferred_.load(std::memory_order_relaxed);
  std::string last_failure = "no attempt";
  for (size_t attempt = 0;; ++attempt, ++index) {
    // 4. A pause after each full round of failures.
    if (attempt > 0 && attempt % n == 0) {
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero()) break;
      std::this_thread::sleep_for(std::min<Clock::duration>(kRoundPause, left));
    }
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) break;
    // 1, 2. One attempt.
    Endpoint& e = *endpoints_[index % n];
    std::unique_ptr<httplib::Client> client = Take(e);
    client->set_connection_timeout(std::min(AtLeastOneMs(left), milliseconds(connection_.connect_timeout_ms)));
    client->set_read_timeout(AtLeastOneMs(left));
    client->set_write_timeout(AtLeastOneMs(left));
    // The body goes through a content receiver: etcd 3.4's gateway ends every error answer with
    // chunked-encoding trailer fields, which cpp-httplib 0.11 reports as a read error after it has
    // delivered the whole body. An error answer is thus taken from the status line and the body
    // even when the read "failed" (the connection is dropped then).
    int status = 0;
    std::string received;
    httplib::Request req;
    req.method = "POST";
    req.path = path_str;
    req.headers = {{"Content-Type", "application/json"}};
    req.body = payload;
    req.response_handler = [&status](const httplib::Response& res) {
      status = res.status;
      return true;
    };
    req.content_receiver = [&received](const char* data, size_t size, uint64_t, uint64_t) {
      received.append(data, size);
      return true;
    };
    httplib::Response res;
    httplib::Error http_error = httplib::Error::Success;
    const bool read_whole = client->send(req, res, http_error);
    const std::string where = "etcd " + e.url + path_str;
    Json answer = Json::parse(received, nullptr, /*allow_exceptions=*/false);
    if (!read_whole && (status == 0 || status == 200 || !answer.is_object())) {
      last_failure = where + ": " + httplib::to_string(http_error);
      continue;  // the connection is dropped with `client`
    }
    // 3. An answer.
    if (!answer.is_object()) {
      if (status == 502 || status == 503 || status == 504) {
        last_failure = where + ": HTTP " + std::to_string(status);
        continue;
      }
      return Internal(where + ": HTTP " + std::to_string(status) + ", not a JSON object: " + received.substr(0, 200));
    }
    int grpc_code = 0;
    std::string message;
    if (status == 200) {
      const auto error = answer.find("error");
      if (error == answer.end() || !error->is_object()) {
        Return(e, std::move(client));
        preferred_.store(index % n, std::memory_order_relaxed);
        const auto result = answer.find("result");
        if (result != answer.end() && result->is_object()) return Json(std::move(*result));
        return answer;
      }
      // A streaming call's failure: {"error": {"grpc_code", "message", ...}}.
      const auto code = error->find("grpc_code");
      grpc_code = code != error->end() && code->is_number_integer() ? code->get<int>() : 2;
      message = StringField(*error, "message", "unknown error");
    } else {
      const auto code = answer.find("code");
      grpc_code = code != answer.end() && code->is_number_integer() ? code->get<int>() : 2;
      message = StringField(answer, "message", StringField(answer, "error", "HTTP " + std::to_string(status)));
    }
    if (read_whole) Return(e, std::move(client));
    Refusal refusal = Classify(grpc_code, message, where);
    if (!refusal.retry) return refusal.status;
    last_failure = refusal.status.message();
  }
  return Unavailable("etcd: no endpoint answered " + path_str + " within " + std::to_string(timeout_ms) +
                     " ms (last failure: " + last_failure + ")");
}

std::string Base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');  // + the NUL EVP_EncodeBlock writes
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

StatusOr<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return Internal("etcd: malformed base64 (length " + std::to_string(text.size()) + ")");
  if (text.empty()) return std::string();
  std::string out(3 * (text.size() / 4), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return Internal("etcd: malformed base64");
  // EVP_DecodeBlock counts the bytes the padding stands for as zeros; drop them.
  size_t size = static_cast<size_t>(n);
  for (size_t i = text.size(); i > 0 && text[i - 1] == '='; --i) --size;
  out.resize(size);
  return out;
}

StatusOr<int64_t> JsonInt64(const Json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return int64_t{0};
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec == std::errc() && end == s.data() + s.size()) return value;
  }
  return Internal(std::string("etcd: field '") + name + "' is not an integer: " + it->dump());
}

StatusOr<std::string> JsonBytes(const Json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return std::string();
  if (!it->is_string()) return Internal(std::string("etcd: field '") + name + "' is not a string: " + it->dump());
  StatusOr<std::string> bytes = Base64Decode(it->get_ref<const std::string&>());
  if (!bytes.ok()) return Internal(bytes.status().message() + " in field '" + name + "'");
  return bytes;
}

std::string EtcdPrefixEnd(std::string_view prefix) {
  std::string s(prefix);
  while (!s.empty() && static_cast<unsigned char>(s.back()) == 0xFF) s.pop_back();
  if (s.empty()) return std::string(1, '\0');
  s.back() = static_cast<char>(static_cast<unsigned char>(s.back()) + 1);
  return s;
}

}  // namespace estuary
