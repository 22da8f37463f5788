// A one-line progress bar on stderr for long commands (quantize, download, verify):
//   quantize [##########..........]  12.3 GB / 54.0 GB  22%  350 MB/s  ETA 2m03s
// Drawn only when stderr is a terminal, unless the caller forces it on or off. add() may be
// called from any thread; the line is redrawn at most every 100 ms.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace stave {

class ProgressBar {
 public:
  enum class Mode { kAuto, kAlways, kNever };  // kAuto: only when stderr is a TTY

  ProgressBar(std::string label, uint64_t total_bytes, Mode mode = Mode::kAuto, std::FILE* out = stderr);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void add(uint64_t bytes);
  // Draws the final state and ends the line (also done by the destructor).
  void finish();
  bool enabled() const { return enabled_; }
  uint64_t done() const { return done_.load(); }

  // The line for `done` of `total` bytes after `seconds` (no carriage return); exposed for tests.
  static std::string render(const std::string& label, uint64_t done, uint64_t total, double seconds, int bar_width = 24);
  static std::string format_bytes(double bytes);     // "512 B", "12.3 MB", "54.0 GB" (decimal units)
  static std::string format_duration(double seconds);  // "42s", "2m03s", "1h05m"

 private:
  void draw(bool final);
  std::string label_;
  uint64_t total_;
  bool enabled_;
  std::FILE* out_;
  std::atomic<uint64_t> done_{0};
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::mutex mu_;
  bool finished_ = false;
  size_t last_len_ = 0;
};

}  // namespace stave
