// crash_report.cpp: a fatal signal names itself, the running test and a backtrace before the
// process dies of it.
#include <gtest/gtest.h>

#include <csignal>

TEST(CrashReportDeathTest, FatalSignalIsReportedThenKills) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::raise(SIGSEGV), testing::KilledBySignal(SIGSEGV),
              "\\[ crash \\] signal 11 .*\n.*in test CrashReportDeathTest\\.FatalSignalIsReportedThenKills(.|\n)*backtrace");
}
