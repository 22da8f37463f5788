// The stderr progress bar (src/util/progress.h): its line, units and durations.
#include <cstdio>

#include <gtest/gtest.h>

#include "util/progress.h"

namespace stave {
namespace {

TEST(ProgressBar, RendersBytesRateAndEta) {
  // 12.3 GB of 54 GB after 41 s: 300 MB/s, 139 s left.
  std::string line = ProgressBar::render("quantize", 12'300'000'000ull, 54'000'000'000ull, 41.0, 10);
  EXPECT_EQ(line, "quantize [##........]  12.3 GB / 54.0 GB   22%  300.0 MB/s  ETA 2m19s");
  std::string done = ProgressBar::render("quantize", 500, 500, 2.0, 4);
  EXPECT_EQ(done, "quantize [####]  500 B / 500 B  100%  250 B/s  2s");
  EXPECT_NE(ProgressBar::render("x", 0, 100, 0.0).find("ETA --"), std::string::npos);
}

TEST(ProgressBar, FormatsUnitsAndDurations) {
  EXPECT_EQ(ProgressBar::format_bytes(999), "999 B");
  EXPECT_EQ(ProgressBar::format_bytes(1500), "1.5 kB");
  EXPECT_EQ(ProgressBar::format_bytes(54e9), "54.0 GB");
  EXPECT_EQ(ProgressBar::format_duration(59.4), "59s");
  EXPECT_EQ(ProgressBar::format_duration(123), "2m03s");
  EXPECT_EQ(ProgressBar::format_duration(3900), "1h05m");
}

TEST(ProgressBar, DrawsOnlyWhenEnabled) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar off("q", 100, ProgressBar::Mode::kAuto, f);  // a file is not a TTY
    EXPECT_FALSE(off.enabled());
    off.add(100);
  }
  EXPECT_EQ(std::ftell(f), 0);
  {
    ProgressBar on("q", 100, ProgressBar::Mode::kAlways, f);
    on.add(60);
    on.add(40);
    EXPECT_EQ(on.done(), 100u);
  }
  std::rewind(f);
  char buf[256] = {};
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::string text(buf, n);
  EXPECT_NE(text.find("100 B / 100 B  100%"), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
  std::fclose(f);
}

}  // namespace
}  // namespace stave
