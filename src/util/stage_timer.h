// Wall-clock time per named stage of one call, printed to stderr when an environment variable
// is set (a profiling aid: STAVE_STAGES for the backbone's ops on any backend, see
// backends/staged_backend.h; STAVE_HEAD_STAGES for the joint head; a null `env` is always on). `sync` runs before each mark so that asynchronous work (a GPU stream) is
// charged to the stage that issued it; it also makes a profiled call a little slower.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>

namespace stave {

class StageTimer {
 public:
  StageTimer(const char* env, std::function<void()> sync = {})
      : on_(env == nullptr || std::getenv(env) != nullptr), sync_(std::move(sync)) {}

  bool on() const { return on_; }

  // Ends the current stage (if any) and starts `stage` (nullptr: none).
  void enter(const char* stage) {
    if (!on_) return;
    if (sync_) sync_();
    const auto now = std::chrono::steady_clock::now();
    if (current_) ms_[current_] += std::chrono::duration<double, std::milli>(now - since_).count();
    current_ = stage;
    since_ = now;
  }

  // tokens < 0: not printed.
  void report(const char* what, int64_t tokens) {
    if (!on_) return;
    enter(nullptr);
    if (tokens >= 0)
      std::fprintf(stderr, "%s, %lld tokens (ms):", what, static_cast<long long>(tokens));
    else
      std::fprintf(stderr, "%s (ms):", what);
    for (const auto& [k, v] : ms_) std::fprintf(stderr, " %s %.2f", k.c_str(), v);
    std::fprintf(stderr, "\n");
  }

 private:
  bool on_;
  std::function<void()> sync_;
  const char* current_ = nullptr;
  std::chrono::steady_clock::time_point since_;
  std::map<std::string, double> ms_;
};

}  // namespace stave
