// stave serve against a hostile client (issue 26), in process on 127.0.0.1 with raw sockets:
// framing attacks (→ 400 and a closed connection), pipelining (answered in order), header and
// body limits (refused before allocation; server memory measured), slowloris and idle floods
// (/health and a decision stay within 100 ms of their unloaded time), 64 honest clients, the
// deadlines, connection limits, cancellation and a drain that loses no request. Every loop and
// wait is bounded; the suite stops by itself.
#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/admission_queue.h"
#include "server/http_parse.h"
#include "server/http_server.h"
#include "server/http_stream.h"
#include "server/model_names.h"
#include "server/server.h"
#include "stave/engine.h"
#include "test_serve_util.h"
#include "test_util.h"

namespace stave::server {
namespace {
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const char* kSmall =
    R"({"model":"clef","state":"The build is red.","questions":{"broken":{"type":"noul","instructions":"Is something broken?"}}})";

std::shared_ptr<const Engine> mxfp4_engine() {
  static std::shared_ptr<const Engine> e = [] {
    EngineOptions eo;
    eo.model = test::fixture("public/model-mxfp4");
    eo.threads = 1;  // steadier timings on a shared machine
    return std::shared_ptr<const Engine>(Engine::load(eo));
  }();
  return e;
}

// A server on the MXFP4 fixture unless the options name a model.
class Live : public test::RunningServer {
 public:
  explicit Live(ServeOptions o, std::shared_ptr<const Engine> engine = nullptr)
      : RunningServer(std::move(o), "public/model-mxfp4", std::move(engine)) {}
};

// ---------------------------------------------------------------------------------------------
// Raw sockets

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

struct Reply {
  int status = 0;
  std::string head;  // status line + headers
  std::string body;
  bool closes() const {
    std::string h = head;
    std::transform(h.begin(), h.end(), h.begin(), [](unsigned char c) { return std::tolower(c); });
    return h.find("\r\nconnection: close\r\n") != std::string::npos;
  }
  std::string header(const std::string& name) const {
    std::smatch m;
    if (std::regex_search(head, m, std::regex("\r\n" + name + ": ([^\r]*)\r\n", std::regex::icase))) return m[1];
    return {};
  }
};

// Reads from `fd` into `buf` until `pred(buf)` or the deadline; false on EOF/error/deadline.
template <class Pred>
bool read_until(int fd, std::string& buf, Clock::time_point deadline, Pred pred) {
  char tmp[65536];
  while (!pred(buf)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf.append(tmp, static_cast<size_t>(n));
  }
  return true;
}

// One response from `fd` (`buf` keeps what follows it: pipelined replies).
std::optional<Reply> read_reply(int fd, std::string& buf, std::chrono::milliseconds limit = 10s) {
  const auto deadline = Clock::now() + limit;
  if (!read_until(fd, buf, deadline, [](const std::string& b) { return b.find("\r\n\r\n") != std::string::npos; }))
    return std::nullopt;
  Reply r;
  const size_t end = buf.find("\r\n\r\n");
  r.head = buf.substr(0, end + 2);
  r.status = std::atoi(r.head.c_str() + 9);
  const std::string cl = r.header("Content-Length");
  const size_t length = cl.empty() ? 0 : std::stoul(cl);
  if (!read_until(fd, buf, deadline, [&](const std::string& b) { return b.size() >= end + 4 + length; }))
    return std::nullopt;
  r.body = buf.substr(end + 4, length);
  buf.erase(0, end + 4 + length);
  return r;
}

// True when the peer closes (EOF or reset) within `limit`, reading and dropping anything else.
bool closed_by_peer(int fd, std::chrono::milliseconds limit = 3s) {
  const auto deadline = Clock::now() + limit;
  char tmp[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) return true;
  }
  return false;
}

std::optional<Reply> roundtrip(int port, const std::string& request, std::chrono::milliseconds limit = 10s) {
  const int fd = connect_to(port);
  if (fd < 0) return std::nullopt;
  std::string buf;
  std::optional<Reply> r;
  if (send_all(fd, request)) r = read_reply(fd, buf, limit);
  ::close(fd);
  return r;
}

std::string get(const std::string& path, const std::string& extra = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: t\r\n" + extra + "\r\n";
}
std::string post(const std::string& body, const std::string& extra = "") {
  return "POST /v1/systemone HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra + "\r\n" + body;
}

std::string metrics_of(int port) {
  auto r = roundtrip(port, get("/metrics"));
  return r ? r->body : "";
}
int64_t metric(const std::string& text, const std::string& sample) {
  const size_t at = text.find("\n" + sample + " ");
  if (at == std::string::npos) return -1;
  return std::stoll(text.substr(at + sample.size() + 2));
}

template <class F>
bool await(F cond, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return cond();
}

double median_ms(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ---------------------------------------------------------------------------------------------
// Framing and parsing

// Every attack of issue 26 (request smuggling behind a proxy): 400, Connection: close, closed.
TEST(ServeHostile, FramingAttacksGet400AndAClosedConnection) {
  ServeOptions o;
  Live srv(o);
  const std::string head = "POST /v1/systemone HTTP/1.1\r\nHost: t\r\n";
  const std::vector<std::pair<std::string, std::string>> attacks = {
      {"conflicting Content-Length", head + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"},
      {"repeated Content-Length", head + "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello"},
      {"Content-Length list", head + "Content-Length: 5, 5\r\n\r\nhello"},
      {"Content-Length then chunked", head + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
      {"chunked then Content-Length", head + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"},
      {"Content-Length: 12abc", head + "Content-Length: 12abc\r\n\r\nhello world!"},
      {"negative Content-Length", head + "Content-Length: -1\r\n\r\n"},
      {"bare CR in a value", head + "X-Note: a\rb\r\nContent-Length: 0\r\n\r\n"},
      {"bare LF in a value", head + "X-Note: a\nb\r\nContent-Length: 0\r\n\r\n"},
      {"bare LF line end", head + "Content-Length: 0\n\r\n"},
      {"NUL in a value", head + std::string("X-Note: a\0b\r\nContent-Length: 0\r\n\r\n", 39)},
      {"gzip transfer coding", head + "Transfer-Encoding: gzip\r\n\r\n"},
      {"chunked twice", head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
      {"two Hosts", head + "Host: u\r\nContent-Length: 0\r\n\r\n"},
      {"no Host in HTTP/1.1", "GET /health HTTP/1.1\r\n\r\n"},
      {"bad chunk size", head + "Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"},
      {"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
  };
  for (const auto& [name, bytes] : attacks) {
    SCOPED_TRACE(name);
    const int fd = connect_to(srv.port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, bytes));
    std::string buf;
    auto r = read_reply(fd, buf, 5s);
    ASSERT_TRUE(r) << "no reply";
    EXPECT_EQ(r->status, 400) << r->head << r->body;
    EXPECT_TRUE(r->closes()) << r->head;
    EXPECT_TRUE(closed_by_peer(fd)) << "the connection stayed open";
    ::close(fd);
  }
  EXPECT_GE(metric(metrics_of(srv.port()), "stave_http_refused_total{limit=\"framing\"}"),
            static_cast<int64_t>(attacks.size()));
}

// Requests sent back to back on one connection are all answered, in order.
TEST(ServeHostile, PipelinedRequestsAreAnsweredInOrder) {
  ServeOptions o;
  Live srv(o);
  const int fd = connect_to(srv.port());
  ASSERT_GE(fd, 0);
  std::string burst;
  const std::vector<std::string> paths = {"/health", "/metrics", "/v1/models"};
  for (int i = 0; i < 3; ++i) burst += get(paths[i], "X-Request-Id: r" + std::to_string(i) + "\r\n");
  ASSERT_TRUE(send_all(fd, burst));
  std::string buf;
  for (int i = 0; i < 3; ++i) {
    auto r = read_reply(fd, buf);
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->header("X-Request-Id"), "r" + std::to_string(i));
    EXPECT_FALSE(r->closes());
  }
  // 150 at once (a body among them), more than one read's worth.
  burst.clear();
  for (int i = 0; i < 150; ++i)
    burst += i == 75 ? post("{", "X-Request-Id: p75\r\n") : get("/health", "X-Request-Id: p" + std::to_string(i) + "\r\n");
  ASSERT_TRUE(send_all(fd, burst));
  for (int i = 0; i < 150; ++i) {
    auto r = read_reply(fd, buf);
    ASSERT_TRUE(r) << i;
    ASSERT_EQ(r->header("X-Request-Id"), "p" + std::to_string(i)) << r->head << r->body;
    EXPECT_EQ(r->status, 503) << i;  // no model loaded: /health says loading, POST too
  }
  ::close(fd);
}

// The transport's parse path on bytes (what the fuzzer drives): a request split after its
// head comes out whole; limits apply.
TEST(ServeHostile, ParsePathOnBytes) {
  HttpLimits l;
  l.max_body_bytes = 100;
  auto limit = [](const HttpRequest&) { return size_t{10}; };
  auto ok = parse_request_bytes("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET", l, limit);
  ASSERT_TRUE(ok.request);
  EXPECT_EQ(ok.request->body, "hello");
  EXPECT_EQ(ok.consumed, 53u);  // "GET" is the next request
  auto big = parse_request_bytes("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 50\r\n\r\n", l, limit);
  ASSERT_TRUE(big.refusal);
  EXPECT_EQ(big.refusal->status, 413);
  auto chunked = parse_request_bytes(
      "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n", l,
      limit);
  ASSERT_TRUE(chunked.refusal);
  EXPECT_EQ(chunked.refusal->status, 413);
  auto cut = parse_request_bytes("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n1234", l, limit);
  ASSERT_TRUE(cut.refusal);
  EXPECT_EQ(cut.refusal->status, 400);
  auto fields = std::string("GET / HTTP/1.1\r\nHost: a\r\n");
  for (int i = 0; i < 101; ++i) fields += "X-" + std::to_string(i) + ": v\r\n";
  auto many = parse_request_bytes(fields + "\r\n", l, limit);
  ASSERT_TRUE(many.refusal);
  EXPECT_EQ(many.refusal->status, 431);
}

// ---------------------------------------------------------------------------------------------
// Limits before allocation

TEST(ServeHostile, HeadLimitsAndAuthBeforeTheBody) {
  ServeOptions o;
  o.api_key = "k-1";
  Live srv(o);
  // 1 MB of header lines: refused at the head limit (16 KiB), not read to the end.
  std::string flood = "GET /health HTTP/1.1\r\nHost: t\r\n";
  while (flood.size() < (1u << 20)) flood += "X-Flood: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
  flood += "\r\n";
  {
    const int fd = connect_to(srv.port());
    std::thread writer([&] { send_all(fd, flood); });  // the server may close before it is all sent
    std::string buf;
    auto r = read_reply(fd, buf);
    ::shutdown(fd, SHUT_RDWR);
    writer.join();
    ::close(fd);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 431);
    EXPECT_TRUE(r->closes());
  }
  std::string fields = "GET /health HTTP/1.1\r\nHost: t\r\n";
  for (int i = 0; i < 150; ++i) fields += "X-" + std::to_string(i) + ": v\r\n";
  auto many = roundtrip(srv.port(), fields + "\r\n");
  ASSERT_TRUE(many);
  EXPECT_EQ(many->status, 431);
  auto line = roundtrip(srv.port(), get("/health?" + std::string(9000, 'a')));
  ASSERT_TRUE(line);
  EXPECT_EQ(line->status, 414);
  // A 10 MB body announced without the key: 401 at once, the body never read.
  const auto t0 = Clock::now();
  auto noauth = roundtrip(srv.port(), "POST /v1/systemone HTTP/1.1\r\nHost: t\r\nContent-Length: 10000000\r\n\r\n");
  ASSERT_TRUE(noauth);
  EXPECT_EQ(noauth->status, 401);
  EXPECT_TRUE(noauth->closes());
  EXPECT_LT(Clock::now() - t0, 2s);
  const std::string m = metrics_of(srv.port());
  EXPECT_EQ(metric(m, "stave_http_refused_total{limit=\"header_bytes\"}"), 1) << m;
  EXPECT_EQ(metric(m, "stave_http_refused_total{limit=\"header_fields\"}"), 1) << m;
  EXPECT_EQ(metric(m, "stave_http_refused_total{limit=\"request_line\"}"), 1) << m;
}

// Peak resident memory of this process (kB); clear_peak() restarts it at the current size.
int64_t status_kb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(std::strlen(field)));
  return -1;
}
bool clear_peak() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

// Sends `total` bytes of `{"state":[0,0,...` (chunked when `chunked`) from a 64 KiB buffer, so
// the client side allocates nothing that grows with the body.
std::optional<Reply> send_zeros_body(int port, size_t total, bool chunked) {
  const int fd = connect_to(port);
  if (fd < 0) return std::nullopt;
  std::string head = "POST /v1/systemone HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n";
  head += chunked ? "Transfer-Encoding: chunked\r\n\r\n" : "Content-Length: " + std::to_string(total) + "\r\n\r\n";
  std::string piece;
  while (piece.size() < 65536) piece += "0,";
  std::optional<Reply> r;
  std::thread writer([&] {
    if (!send_all(fd, head)) return;
    std::string first = "{\"model\":\"clef\",\"state\":[";
    size_t sent = 0;
    auto chunk = [&](std::string_view data) {
      if (chunked) {
        char size[32];
        std::snprintf(size, sizeof size, "%zx\r\n", data.size());
        return send_all(fd, size) && send_all(fd, data) && send_all(fd, "\r\n");
      }
      return send_all(fd, data);
    };
    if (!chunk(first)) return;
    sent = first.size();
    while (sent + piece.size() + 2 <= total) {
      if (!chunk(piece)) return;
      sent += piece.size();
    }
    std::string last = "0]}";
    last.insert(0, total - sent - 3 > 0 ? std::string(total - sent - 3, ' ') : "");
    if (!chunk(last)) return;
    if (chunked) send_all(fd, "0\r\n\r\n");
  });
  std::string buf;
  r = read_reply(fd, buf, 30s);
  ::shutdown(fd, SHUT_RDWR);
  writer.join();
  ::close(fd);
  return r;
}

TEST(ServeHostile, FifteenMegabyteBodiesAreRefusedWithBoundedMemory) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  ServeOptions o;  // the default limits
  Live srv(o, mxfp4_engine());
  ASSERT_TRUE(roundtrip(srv.port(), get("/health")));  // the server's threads and buffers exist
  ASSERT_TRUE(clear_peak()) << "cannot reset VmHWM (/proc/self/clear_refs)";
  const int64_t base = status_kb("VmRSS:");
  // Announced (Content-Length): refused before a byte of it is read.
  auto announced = send_zeros_body(srv.port(), 15'000'000, false);
  ASSERT_TRUE(announced);
  EXPECT_EQ(announced->status, 413) << announced->body;
  EXPECT_EQ(nlohmann::json::parse(announced->body)["detail"][0]["type"], "too_large");
  // Chunked: cut at the limit.
  auto chunked = send_zeros_body(srv.port(), 15'000'000, true);
  ASSERT_TRUE(chunked);
  EXPECT_EQ(chunked->status, 413) << chunked->body;
  // Under the limit but millions of values: refused as the JSON tree is built.
  auto values = send_zeros_body(srv.port(), 11'000'000, false);
  ASSERT_TRUE(values);
  EXPECT_EQ(values->status, 413) << values->body;
  EXPECT_EQ(nlohmann::json::parse(values->body)["detail"][0]["type"], "too_many_values");
  const int64_t grew_kb = status_kb("VmHWM:") - base;
  EXPECT_LE(grew_kb, 64 * 1024) << "peak memory grew by " << grew_kb / 1024 << " MB";
  const std::string m = metrics_of(srv.port());
  EXPECT_EQ(metric(m, "stave_http_refused_total{limit=\"body_bytes\"}"), 2) << m;
  EXPECT_EQ(metric(m, "stave_http_refused_total{limit=\"json_values\"}"), 1) << m;
  EXPECT_EQ(metric(m, "stave_bytes_in_flight"), 0) << m;
}

// ---------------------------------------------------------------------------------------------
// Slow and idle connections

TEST(ServeHostile, IdleAndSlowlorisConnectionsDoNotDelayHealthOrADecision) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  constexpr int kIdle = 1000, kSlow = 200;
  const uint64_t files = raise_open_file_limit();
  ASSERT_GE(files, 2u * (kIdle + kSlow) + 256) << "the open-file hard limit is too low for this test (ulimit -Hn)";
  ServeOptions o;
  o.http.max_connections_per_address = 0;  // every hostile connection comes from 127.0.0.1
  o.max_queue = 64;
  Live srv(o, mxfp4_engine());
  auto health_ms = [&] {
    const auto t0 = Clock::now();
    auto r = roundtrip(srv.port(), get("/health"));
    EXPECT_TRUE(r && r->status == 200);
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  auto decision_ms = [&] {
    const auto t0 = Clock::now();
    auto r = roundtrip(srv.port(), post(kSmall), 30s);
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no reply");
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  auto measure = [&](int n, auto f) {
    std::vector<double> v;
    for (int i = 0; i < n; ++i) v.push_back(f());
    return median_ms(v);
  };
  decision_ms();  // warm
  const double health0 = measure(7, health_ms), decision0 = measure(5, decision_ms);

  std::vector<int> idle, slow;
  for (int i = 0; i < kIdle; ++i) {
    const int fd = connect_to(srv.port());
    ASSERT_GE(fd, 0) << i;
    idle.push_back(fd);
  }
  for (int i = 0; i < kSlow; ++i) {
    const int fd = connect_to(srv.port());
    ASSERT_GE(fd, 0) << i;
    ASSERT_TRUE(send_all(fd, "POST /v1/systemone HTTP/1.1\r\nHost: t\r\nX-Slow: "));
    slow.push_back(fd);
  }
  // Slowloris: one more header byte per connection every second, until the measurement is done.
  std::atomic<bool> done{false};
  std::thread loris([&] {
    while (!done) {
      for (int fd : slow) ::send(fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      for (int i = 0; i < 100 && !done; ++i) std::this_thread::sleep_for(10ms);
    }
  });
  ASSERT_TRUE(await([&] { return metric(metrics_of(srv.port()), "stave_open_connections") >= kIdle + kSlow; }, 10s))
      << metrics_of(srv.port());
  const double health1 = measure(7, health_ms), decision1 = measure(5, decision_ms);
  done = true;
  loris.join();
  for (int fd : idle) ::close(fd);
  for (int fd : slow) ::close(fd);
  EXPECT_LE(health1 - health0, 100.0) << "unloaded " << health0 << " ms, loaded " << health1 << " ms";
  EXPECT_LE(decision1 - decision0, 100.0) << "unloaded " << decision0 << " ms, loaded " << decision1 << " ms";
  std::printf("/health %.2f → %.2f ms, decision %.2f → %.2f ms with %d idle + %d slowloris connections\n", health0,
              health1, decision0, decision1, kIdle, kSlow);
}

TEST(ServeHostile, DeadlinesCutSlowAndIdleConnections) {
  ServeOptions o;
  o.http.header_timeout_ms = 300;
  o.http.body_timeout_ms = 300;
  o.http.idle_timeout_ms = 300;
  Live srv(o);
  // Slowloris: a byte every 50 ms never finishes the head: 408 after the 300 ms total.
  {
    const int fd = connect_to(srv.port());
    const auto t0 = Clock::now();
    send_all(fd, "GET /health HTTP/1.1\r\nHost: t\r\nX-Slow: ");
    std::string buf;
    std::optional<Reply> r;
    while (!r && Clock::now() - t0 < 3s) {
      ::send(fd, "a", 1, MSG_NOSIGNAL);
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) r = read_reply(fd, buf, 1s);
    }
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 408);
    EXPECT_TRUE(r->closes());
    EXPECT_LT(Clock::now() - t0, 2s);
    ::close(fd);
  }
  // A body announced and never sent: 408.
  auto body = roundtrip(srv.port(), "POST /v1/systemone HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{", 3s);
  ASSERT_TRUE(body);
  EXPECT_EQ(body->status, 408);
  // An idle connection is closed without a word.
  const int fd = connect_to(srv.port());
  EXPECT_TRUE(closed_by_peer(fd, 3s));
  ::close(fd);
  const std::string m = metrics_of(srv.port());
  EXPECT_EQ(metric(m, "stave_http_refused_total{limit=\"header_timeout\"}"), 1) << m;
  EXPECT_EQ(metric(m, "stave_http_refused_total{limit=\"body_timeout\"}"), 1) << m;
}

TEST(ServeHostile, ConnectionLimitsRefusePolitely) {
  ServeOptions o;
  o.http.max_connections_per_address = 4;
  Live srv(o);
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) held.push_back(connect_to(srv.port()));
  ASSERT_TRUE(await([&] {
    // /metrics itself needs a fifth connection, so poll the gauge through a held one.
    std::string buf;
    return send_all(held[0], get("/metrics")) && [&] {
      auto r = read_reply(held[0], buf);
      return r && metric(r->body, "stave_open_connections") == 4;
    }();
  }, 5s));
  const int over = connect_to(srv.port());
  std::string buf;
  auto r = read_reply(over, buf, 3s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_FALSE(r->header("Retry-After").empty());
  EXPECT_TRUE(closed_by_peer(over));
  ::close(over);
  ASSERT_TRUE(send_all(held[1], get("/metrics")));
  buf.clear();
  auto m = read_reply(held[1], buf);
  ASSERT_TRUE(m);
  EXPECT_EQ(metric(m->body, "stave_http_refused_total{limit=\"connections_per_address\"}"), 1) << m->body;
  for (int fd : held) ::close(fd);

  ServeOptions t;
  t.http.max_connections = 2;
  Live small(t);
  const int a = connect_to(small.port()), b = connect_to(small.port());
  std::this_thread::sleep_for(100ms);
  const int c = connect_to(small.port());
  buf.clear();
  auto refused = read_reply(c, buf, 3s);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  ::close(a);
  ::close(b);
  ::close(c);
}

// ---------------------------------------------------------------------------------------------
// Honest load, cancellation, drain

TEST(ServeHostile, SixtyFourHonestClientsSeeNoTimeouts) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  ServeOptions o;
  o.max_running = 2;
  o.max_queue = 64;
  Live srv(o, mxfp4_engine());
  constexpr int kClients = 64;
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&] {
      httplib::Client c("127.0.0.1", srv.port());
      c.set_connection_timeout(10);
      c.set_read_timeout(10);
      auto h = c.Get("/health");
      auto d = c.Post("/v1/systemone", kSmall, "application/json");
      (h && h->status == 200 && d && d->status == 200 ? ok : failed)++;
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), kClients);
  EXPECT_EQ(failed.load(), 0);
}

struct Gate {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  void release() {
    {
      std::lock_guard<std::mutex> l(m);
      open = true;
    }
    cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return open; });
  }
};

TEST(ServeHostile, ADisconnectOrADeadlineCancelsItsDecision) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  ServeOptions o;
  o.max_running = 1;
  o.max_queue = 4;
  o.timeout_ms = 300;
  Live srv(o, mxfp4_engine());
  Gate gate;
  auto busy = srv.server().admission().try_submit([&] { gate.wait(); });
  ASSERT_TRUE(busy);
  // Queued behind the blocker, then the client goes away: taken out of the queue.
  const int fd = connect_to(srv.port());
  ASSERT_TRUE(send_all(fd, post(kSmall)));
  ASSERT_TRUE(await([&] { return srv.server().admission().queued() == 1; }, 5s));
  ::close(fd);
  EXPECT_TRUE(await([&] { return srv.server().admission().queued() == 0; }, 5s));
  // Queued past its deadline: 504, and taken out of the queue too.
  auto late = roundtrip(srv.port(), post(kSmall));
  ASSERT_TRUE(late);
  EXPECT_EQ(late->status, 504);
  EXPECT_EQ(srv.server().admission().queued(), 0u);
  gate.release();
  srv.server().admission().wait(busy, AdmissionQueue::Clock::now() + 60s);
  const std::string m = metrics_of(srv.port());
  EXPECT_EQ(metric(m, "stave_decisions_cancelled_total{reason=\"client_gone\"}"), 1) << m;
  EXPECT_EQ(metric(m, "stave_decisions_cancelled_total{reason=\"deadline\"}"), 1) << m;
  // A running decision stops at the engine's next check.
  std::atomic<bool> cancel{true};
  DecideOptions d;
  d.cancel = &cancel;
  EXPECT_THROW(mxfp4_engine()->decide(std::string_view(kSmall), d), DecisionCancelled);
}

// A client that goes away while its decision runs stops it between backbone layers: the worker
// is free long before the decision would have finished.
TEST(ServeHostile, ADisconnectStopsARunningDecision) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  std::string state;
  for (int i = 0; i < 500; ++i) state += "The payment service returned error " + std::to_string(i) + " at the gateway. ";
  const std::string body = nlohmann::json({{"model", "clef"},
                                           {"state", state},
                                           {"questions", {{"down", {{"type", "noul"}, {"instructions", "Down?"}}}}}})
                               .dump();
  ServeOptions o;
  o.max_running = 1;
  o.decide.max_length = 4096;
  Live srv(o, mxfp4_engine());
  // How long the decision takes whole (the engine directly, same options).
  DecideOptions d;
  d.max_length = 4096;
  const auto t_full = Clock::now();
  mxfp4_engine()->decide(std::string_view(body), d);
  const double full_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_full).count();
  const int fd = connect_to(srv.port());
  ASSERT_TRUE(send_all(fd, post(body)));
  ASSERT_TRUE(await([&] { return srv.server().admission().running() == 1; }, 10s));
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(full_ms / 3)));
  const auto t_close = Clock::now();
  ::close(fd);
  ASSERT_TRUE(await([&] { return srv.server().admission().running() == 0; }, 60s));
  const double stop_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_close).count();
  std::printf("whole decision %.0f ms; stopped %.0f ms after the disconnect\n", full_ms, stop_ms);
  EXPECT_LT(stop_ms, full_ms / 2) << "the decision ran on after its client left";
  EXPECT_EQ(metric(metrics_of(srv.port()), "stave_decisions_cancelled_total{reason=\"client_gone\"}"), 1);
}

// SIGTERM (stop()) while clients use keep-alive connections and while connections wait: every
// request sent is answered (200, or 503 draining), every reply after the stop closes, none is
// met by a closed socket.
TEST(ServeHostile, DrainLosesNoRequest) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  ServeOptions o;
  o.max_running = 1;
  o.max_queue = 64;
  auto srv = std::make_unique<Live>(o, mxfp4_engine());
  const int port = srv->port();
  constexpr int kKeepAlive = 8, kWaiting = 8;
  std::atomic<bool> stopped{false};
  std::atomic<int> sent{0}, answered{0}, kept_alive_after_stop{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kKeepAlive; ++i)
    clients.emplace_back([&, i] {
      int fd = connect_to(port);
      std::string buf;
      for (int n = 0; n < 200 && fd >= 0; ++n) {
        const bool after = stopped.load();
        if (!send_all(fd, i % 2 ? post(kSmall) : get("/health"))) break;
        ++sent;
        auto r = read_reply(fd, buf, 30s);
        if (!r) break;  // lost: counted by sent - answered
        ++answered;
        if (after && !r->closes()) ++kept_alive_after_stop;
        if (r->closes()) {
          ::close(fd);
          fd = connect_to(port);  // refused once the listener is closed
          buf.clear();
        }
      }
      if (fd >= 0) ::close(fd);
    });
  // Connections that are open but have not sent their request when the drain begins.
  std::vector<int> waiting;
  for (int i = 0; i < kWaiting; ++i) waiting.push_back(connect_to(port));
  std::this_thread::sleep_for(300ms);
  stopped = true;
  std::thread stopper([&] { srv.reset(); });  // stop() then join run(): returns once drained
  std::this_thread::sleep_for(50ms);
  int waiting_answered = 0;
  for (int fd : waiting) {
    std::string buf;
    if (send_all(fd, post(kSmall))) {
      auto r = read_reply(fd, buf, 30s);
      if (r && (r->status == 200 || (r->status == 503 && r->body.find("draining") != std::string::npos)) &&
          r->closes())
        ++waiting_answered;
    }
    ::close(fd);
  }
  for (auto& t : clients) t.join();
  stopper.join();
  EXPECT_GT(sent.load(), kKeepAlive);
  EXPECT_EQ(answered.load(), sent.load()) << "requests met by a closed connection";
  EXPECT_EQ(kept_alive_after_stop.load(), 0);
  EXPECT_EQ(waiting_answered, kWaiting);
}

// /v1/models and error replies name the model, never the folder it was loaded from.
TEST(ServeHostile, RepliesNeverShowTheModelPath) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  ServeOptions o;
  o.engine.model = test::fixture("public/model-mxfp4");
  Live srv(o, mxfp4_engine());
  const std::string folder = std::filesystem::absolute(o.engine.model).lexically_normal().string();
  auto models = roundtrip(srv.port(), get("/v1/models"));
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  EXPECT_EQ(models->body.find(folder), std::string::npos) << models->body;
  EXPECT_EQ(models->body.find('/'), std::string::npos) << models->body;
  EXPECT_NE(models->body.find("model-mxfp4"), std::string::npos) << models->body;
  auto other = roundtrip(srv.port(), post(R"({"model":"gpt-4","state":"x","questions":{"a":{"type":"noul"}}})"));
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  EXPECT_EQ(other->body.find(folder), std::string::npos) << other->body;
  // The path is still accepted as a name.
  auto by_path = roundtrip(srv.port(), post(R"({"model":")" + o.engine.model +
                                            R"(","state":"x","questions":{"a":{"type":"noul"}}})"), 30s);
  ASSERT_TRUE(by_path);
  EXPECT_EQ(by_path->status, 200) << by_path->body;
  ModelNames names(o.engine.model, "", {}, true);
  EXPECT_EQ(names.redact("cannot read " + folder + "/config.json"), "cannot read model-mxfp4/config.json");
}

// The streamed-reply hook (server-sent events): a handler that answers with three events from
// another thread; two such requests pipelined on one connection come back as two chunked
// replies, in order, each event in its own chunk.
class StreamingHandler : public HttpHandler {
 public:
  ~StreamingHandler() override {
    for (auto& t : producers) t.join();
  }
  HeadVerdict on_head(const HttpRequest&) override { return {}; }
  std::shared_ptr<HttpCall> on_request(HttpRequest req, std::function<void(HttpReply)> done) override {
    HttpReply r;
    r.content_type = "text/event-stream";
    const std::string tag = req.header("X-Tag");
    auto s = std::make_shared<HttpStream>();
    r.stream = s;
    {
      std::lock_guard<std::mutex> lock(mutex);
      producers.emplace_back([s, tag] {
        for (int i = 0; i < 3; ++i) {
          EXPECT_TRUE(s->write("data: " + tag + std::to_string(i) + "\n\n"));
          std::this_thread::sleep_for(5ms);
        }
        s->end();
        EXPECT_FALSE(s->write("late"));
      });
    }
    done(std::move(r));
    return nullptr;
  }
  HttpReply refusal(HttpLimit, int status, const std::string& message, const HttpRequest*) override {
    HttpReply r;
    r.status = status;
    r.body = message;
    return r;
  }
  bool draining() const override { return false; }
  std::mutex mutex;
  std::vector<std::thread> producers;
};

TEST(ServeHostile, StreamedRepliesGoOutChunkByChunk) {
  StreamingHandler handler;
  HttpGauges gauges;
  HttpLimits limits;
  HttpServer http(limits, handler, gauges);
  const int port = http.bind("127.0.0.1", 0);
  std::thread runner([&] { http.run(); });
  const int fd = connect_to(port);
  ASSERT_TRUE(send_all(fd, get("/events", "X-Tag: a\r\n") + get("/events", "X-Tag: b\r\n")));
  std::string buf;
  const bool both = read_until(fd, buf, Clock::now() + 10s, [](const std::string& b) {
    const size_t first = b.find("\r\n0\r\n\r\n");
    return first != std::string::npos && b.find("\r\n0\r\n\r\n", first + 1) != std::string::npos;
  });
  ::close(fd);
  http.drain();
  runner.join();
  ASSERT_TRUE(both) << buf;
  EXPECT_NE(buf.find("Transfer-Encoding: chunked"), std::string::npos) << buf;
  EXPECT_NE(buf.find("text/event-stream"), std::string::npos) << buf;
  // Chunks are "<hex size>\r\n<data>\r\n" (a chunk may carry several events when the producer
  // is ahead of the socket): every event arrives once, a's before b's.
  const size_t a0 = buf.find("data: a0\n\n"), a2 = buf.find("data: a2\n\n"), b0 = buf.find("data: b0\n\n"),
               b2 = buf.find("data: b2\n\n");
  ASSERT_NE(a0, std::string::npos) << buf;
  ASSERT_NE(a2, std::string::npos) << buf;
  ASSERT_NE(b0, std::string::npos) << buf;
  ASSERT_NE(b2, std::string::npos) << buf;
  EXPECT_LT(a0, a2);
  EXPECT_LT(a2, b0);
  EXPECT_LT(b0, b2);
  EXPECT_EQ(buf.find("late"), std::string::npos);
}

}  // namespace
}  // namespace stave::server
