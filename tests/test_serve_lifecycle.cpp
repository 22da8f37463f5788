// `stave serve` as a process, as the acceptance check runs it: start on a free port, wait for
// /health, SIGTERM while requests are in flight → every one of them is answered and the process
// exits 0.
#include <signal.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_temp.h"
#include "test_util.h"

namespace stave {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Polls `cond` (every 10 ms) until it holds or `limit` passes.
template <class F>
bool await(F cond, std::chrono::seconds limit) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return cond();
}

int64_t metric(const std::string& text, const std::string& name) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex("\n" + name + " ([0-9]+)\n"))) return std::stoll(m[1]);
  return -1;
}

// The value of a labelled sample; `pattern` is a regex for the name with its labels.
int64_t labelled_metric(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex("\n" + pattern + " ([0-9]+)\n"))) return std::stoll(m[1]);
  return -1;
}

TEST(ServeLifecycle, SigtermDrainsInFlightRequestsAndExitsZero) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  const std::string binary = std::string(STAVE_BINARY_DIR) + "/stave";
  ASSERT_TRUE(fs::exists(binary)) << binary << " (build the stave_cli target)";
  const fs::path log = fs::path(stave::test::temp_dir()) / ("serve-lifecycle-" + std::to_string(::getpid()) + ".log");
  const std::string model = test::fixture("public/model-bf16");

  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::execl(binary.c_str(), binary.c_str(), "serve", "--model", model.c_str(), "--port", "0", "--max-running", "1",
            "--threads", "1", "--timeout-ms", "900000", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // The "listening" event names the port the server picked.
  int port = 0;
  ASSERT_TRUE(await(
      [&] {
        std::smatch m;
        const std::string text = slurp(log);
        if (!std::regex_search(text, m, std::regex("\"address\":\"http://127\\.0\\.0\\.1:([0-9]+)\""))) return false;
        port = std::stoi(m[1]);
        return true;
      },
      120s))
      << slurp(log);
  httplib::Client probe("127.0.0.1", port);
  probe.set_read_timeout(60);
  ASSERT_TRUE(await(
      [&] {
        auto r = probe.Get("/health");
        return r && r->status == 200;
      },
      300s))
      << slurp(log);

  // Requests computed one at a time on one thread: several are in flight at SIGTERM.
  std::string state;
  for (int i = 0; i < 50; ++i) state += "The payment service returned error " + std::to_string(i) + ". ";
  const std::string body = nlohmann::json({{"model", "clef"},
                                           {"state", state},
                                           {"questions", {{"outage", {{"type", "noul"}, {"instructions", "Down?"}}}}}})
                               .dump();
  constexpr int kClients = 4;
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(600);
      auto r = c.Post("/v1/systemone", body, "application/json");
      (r && r->status == 200 ? ok : failed)++;
    });
  // SIGTERM only once the server has taken in every client's request (queued, running or already
  // answered): a request still in the kernel's accept backlog at SIGTERM is not "in flight" and
  // is rightly refused, which made an earlier form of this test (waiting for one queued request)
  // flaky. On a fast machine every request may be answered before the signal; the drain is still
  // exercised whenever at least one is queued, which the 50-sentence state on one thread makes
  // the common case.
  bool taken_in = await(
      [&] {
        auto r = probe.Get("/metrics");
        if (!r) return false;
        const int64_t queued = metric(r->body, "stave_queue_depth");
        const int64_t running = metric(r->body, "stave_requests_running");
        const int64_t answered = labelled_metric(
            r->body, R"(stave_requests_total\{endpoint="/v1/systemone",status="200"\})");
        return queued >= 0 && running >= 0 && queued + running + std::max<int64_t>(answered, 0) == kClients;
      },
      300s);
  ASSERT_TRUE(taken_in) << "the server never held all " << kClients << " requests; " << ok.load() << " answered";
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  for (auto& t : clients) t.join();
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  const std::string text = slurp(log);
  EXPECT_TRUE(WIFEXITED(status)) << text;
  EXPECT_EQ(WEXITSTATUS(status), 0) << text;
  EXPECT_EQ(ok.load(), kClients) << text;
  EXPECT_EQ(failed.load(), 0);
  EXPECT_NE(text.find("\"event\":\"draining\""), std::string::npos);
  EXPECT_NE(text.find("\"event\":\"stopped\""), std::string::npos);
  // After the stop nothing listens any more.
  httplib::Client late("127.0.0.1", port);
  late.set_connection_timeout(5);
  EXPECT_FALSE(late.Get("/health"));
  fs::remove(log);
}

}  // namespace
}  // namespace stave
