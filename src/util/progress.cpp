#include "util/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace stave {

ProgressBar::ProgressBar(std::string label, uint64_t total_bytes, Mode mode, std::FILE* out)
    : label_(std::move(label)), total_(total_bytes), out_(out) {
  enabled_ = mode == Mode::kAlways || (mode == Mode::kAuto && out_ && ::isatty(::fileno(out_)));
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::add(uint64_t bytes) {
  done_.fetch_add(bytes);
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || finished_) return;  // another thread is drawing
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(false);
}

void ProgressBar::finish() {
  std::lock_guard lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (!enabled_) return;
  draw(true);
  std::fputc('\n', out_);
  std::fflush(out_);
}

void ProgressBar::draw(bool /*final*/) {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string line = render(label_, done_.load(), total_, secs);
  // Pad over a longer previous line.
  size_t len = line.size();
  if (len < last_len_) line.append(last_len_ - len, ' ');
  last_len_ = len;
  std::fputc('\r', out_);
  std::fputs(line.c_str(), out_);
  std::fflush(out_);
}

std::string ProgressBar::format_bytes(double b) {
  static const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (b >= 1000.0 && u < 5) {
    b /= 1000.0;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%.0f B", b);
  else std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
  return buf;
}

std::string ProgressBar::format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--";
  long t = std::lround(s);
  char buf[32];
  if (t < 60) std::snprintf(buf, sizeof buf, "%lds", t);
  else if (t < 3600) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
  return buf;
}

std::string ProgressBar::render(const std::string& label, uint64_t done, uint64_t total, double seconds,
                                int bar_width) {
  double frac = total ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 1.0;
  int filled = static_cast<int>(frac * bar_width);
  std::string bar = "[" + std::string(filled, '#') + std::string(bar_width - filled, '.') + "]";
  double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0.0;
  char pct[16];
  std::snprintf(pct, sizeof pct, "%3d%%", static_cast<int>(frac * 100));
  std::string line = label + " " + bar + "  " + format_bytes(static_cast<double>(done)) + " / " +
                     format_bytes(static_cast<double>(total)) + "  " + pct + "  " + format_bytes(rate) + "/s";
  if (done >= total) line += "  " + format_duration(seconds);
  else line += "  ETA " + (rate > 0 ? format_duration(static_cast<double>(total - done) / rate) : std::string("--"));
  return line;
}

}  // namespace stave
