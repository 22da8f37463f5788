// serve_load: N concurrent clients against a running `stave serve` for T seconds.
//
//   serve_load --port 8080 --clients 8 --seconds 30 --request a.json [--request b.json ...]
//              [--host 127.0.0.1] [--api-key KEY] [--server-pid PID]
//
// Each client keeps one connection and posts the requests round robin as fast as answers come
// (after a 503 it waits 10 ms, a client that would honour Retry-After waits longer). Reports
// answered requests/s, latency percentiles of answered requests, 503 refusals, every other
// status, connection errors, and (with --server-pid) the server's resident memory before and
// its peak during the run. Exit status 1 when any reply was a 5xx other than 503, or a
// connection failed: under load the server must answer or refuse, never fail.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string host = "127.0.0.1";
  int port = 8080;
  int clients = 8;
  double seconds = 10;
  std::vector<std::string> requests;
  std::string api_key;
  int server_pid = 0;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "serve_load: %s\nusage: serve_load --port P --clients N --seconds T --request FILE... "
                       "[--host H] [--api-key K] [--server-pid PID]\n", why);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) usage(("missing value for " + k).c_str());
    const std::string v = argv[++i];
    if (k == "--host") a.host = v;
    else if (k == "--port") a.port = std::stoi(v);
    else if (k == "--clients") a.clients = std::stoi(v);
    else if (k == "--seconds") a.seconds = std::stod(v);
    else if (k == "--api-key") a.api_key = v;
    else if (k == "--server-pid") a.server_pid = std::stoi(v);
    else if (k == "--request") {
      std::ifstream f(v, std::ios::binary);
      if (!f) usage(("cannot read " + v).c_str());
      std::stringstream ss;
      ss << f.rdbuf();
      a.requests.push_back(ss.str());
    } else usage(("unknown option " + k).c_str());
  }
  if (a.requests.empty()) usage("give at least one --request");
  if (a.clients < 1 || a.seconds <= 0) usage("--clients and --seconds must be positive");
  return a;
}

// VmRSS / VmHWM of a process in KiB (0 when unreadable).
long status_kib(int pid, const char* field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::string(field).size()));
  return 0;
}

struct Tally {
  std::mutex m;
  std::vector<double> latencies_ms;  // answered (200) only
  std::map<int, long> statuses;
  long connection_errors = 0;
  std::map<std::string, long> error_kinds;  // httplib's error name → count
  std::vector<double> error_at_s;           // when each failed request began, seconds into the run
};

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  Tally tally;
  const long rss_before = a.server_pid ? status_kib(a.server_pid, "VmRSS:") : 0;
  long rss_peak = rss_before;
  std::atomic<bool> done{false};
  std::thread monitor([&] {
    while (!done && a.server_pid) {
      rss_peak = std::max(rss_peak, status_kib(a.server_pid, "VmRSS:"));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));
  std::vector<std::thread> clients;
  for (int c = 0; c < a.clients; ++c)
    clients.emplace_back([&, c] {
      httplib::Client client(a.host, a.port);
      client.set_keep_alive(true);
      client.set_connection_timeout(30);
      client.set_read_timeout(600);
      httplib::Headers headers;
      if (!a.api_key.empty()) headers.emplace("Authorization", "Bearer " + a.api_key);
      std::vector<double> lat;
      std::map<int, long> statuses;
      long errors = 0;
      std::map<std::string, long> kinds;
      std::vector<double> error_at;
      for (size_t i = static_cast<size_t>(c); Clock::now() < end; ++i) {
        const auto t0 = Clock::now();
        auto r = client.Post("/v1/systemone", headers, a.requests[i % a.requests.size()], "application/json");
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (!r) {
          ++errors;
          ++kinds[httplib::to_string(r.error())];
          error_at.push_back(std::chrono::duration<double>(t0 - start).count());
          continue;
        }
        ++statuses[r->status];
        if (r->status == 200) lat.push_back(ms);
        if (r->status == 503) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      std::lock_guard<std::mutex> lock(tally.m);
      tally.latencies_ms.insert(tally.latencies_ms.end(), lat.begin(), lat.end());
      for (const auto& [s, n] : statuses) tally.statuses[s] += n;
      tally.connection_errors += errors;
      for (const auto& [k, n] : kinds) tally.error_kinds[k] += n;
      tally.error_at_s.insert(tally.error_at_s.end(), error_at.begin(), error_at.end());
    });
  for (auto& t : clients) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  done = true;
  monitor.join();

  auto& lat = tally.latencies_ms;
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double p) {
    if (lat.empty()) return 0.0;
    const size_t i = std::min(lat.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(lat.size())));
    return lat[i];
  };
  long total = 0, refused = 0, other_5xx = 0;
  for (const auto& [s, n] : tally.statuses) {
    total += n;
    if (s == 503) refused += n;
    else if (s >= 500) other_5xx += n;
  }
  std::printf("clients %d, %.1f s: %ld replies, %zu answered (%.2f req/s), %ld refused with 503, %ld other 5xx, "
              "%ld connection errors\n",
              a.clients, elapsed, total, lat.size(), static_cast<double>(lat.size()) / elapsed, refused, other_5xx,
              tally.connection_errors);
  std::printf("latency of answered requests: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n", pct(50), pct(90),
              pct(99), lat.empty() ? 0.0 : lat.back());
  if (tally.connection_errors) {  // what failed and when: at connect time, mid-run or at the end
    std::sort(tally.error_at_s.begin(), tally.error_at_s.end());
    std::printf("connection errors:");
    for (const auto& [k, n] : tally.error_kinds) std::printf(" %s×%ld", k.c_str(), n);
    std::printf(", requests begun at");
    for (double t : tally.error_at_s) std::printf(" %.2f", t);
    std::printf(" s\n");
  }
  std::printf("statuses:");
  for (const auto& [s, n] : tally.statuses) std::printf(" %d×%ld", s, n);
  std::printf("\n");
  if (a.server_pid)
    std::printf("server RSS: %.1f MiB before, %.1f MiB peak during the run\n", rss_before / 1024.0, rss_peak / 1024.0);
  return other_5xx == 0 && tally.connection_errors == 0 ? 0 : 1;
}
