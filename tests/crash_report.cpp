// A fatal signal in a test binary (SIGSEGV, SIGBUS, SIGILL, SIGFPE) prints what is needed to find
// it on a machine where no debugger runs (the GPU host): the signal, the faulting address, the
// instruction and stack pointers, the running test, a backtrace as module+offset, and the
// executable mappings; then the signal is raised again with its default action, so the test
// still dies with it. Offsets resolve offline: addr2line -f -C -e <module> <offset>.
// Linked into stave_tests and stave_cuda_tests; it installs itself before main.
#include <execinfo.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

void put(const char* s) {
  const size_t n = std::strlen(s);
  for (size_t done = 0; done < n;) {
    const ssize_t w = write(STDERR_FILENO, s + done, n - done);
    if (w <= 0) return;
    done += static_cast<size_t>(w);
  }
}

// The mappings that hold code (r-xp), so backtrace addresses can be turned into offsets.
void put_code_mappings() {
  const int fd = open("/proc/self/maps", O_RDONLY);
  if (fd < 0) return;
  char buf[4096], line[512];
  size_t len = 0;
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') {
        if (len + 1 < sizeof line) line[len++] = buf[i];
        continue;
      }
      line[len] = '\0';
      if (std::strstr(line, " r-xp ") != nullptr) {
        put("  ");
        put(line);
        put("\n");
      }
      len = 0;
    }
  close(fd);
}

void on_fatal(int sig, siginfo_t* info, void* context) {
  char msg[512];
  const auto* uc = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
  const auto ip = static_cast<unsigned long long>(uc->uc_mcontext.gregs[REG_RIP]);
  const auto sp = static_cast<unsigned long long>(uc->uc_mcontext.gregs[REG_RSP]);
#else
  const unsigned long long ip = 0, sp = 0;
  (void)uc;
#endif
  std::snprintf(msg, sizeof msg, "\n[ crash ] signal %d (%s) code %d at address %p, ip 0x%llx, sp 0x%llx, thread %ld\n",
                sig, strsignal(sig), info->si_code, info->si_addr, ip, sp, static_cast<long>(gettid()));
  put(msg);
  if (const testing::TestInfo* t = testing::UnitTest::GetInstance()->current_test_info()) {
    std::snprintf(msg, sizeof msg, "[ crash ] in test %s.%s%s%s\n", t->test_suite_name(), t->name(),
                  t->value_param() ? " param " : "", t->value_param() ? t->value_param() : "");
    put(msg);
  }
  put("[ crash ] backtrace (addr2line -f -C -e MODULE OFFSET):\n");
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  put("[ crash ] code mappings:\n");
  put_code_mappings();
  signal(sig, SIG_DFL);
  raise(sig);
}

const bool installed = [] {
  // Its own stack, so a stack overflow is reported too; large enough for AMX's signal frame.
  static char alt[1 << 18];
  stack_t ss{};
  ss.ss_sp = alt;
  ss.ss_size = sizeof alt;
  sigaltstack(&ss, nullptr);
  void* warm[1];
  backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  struct sigaction sa {};
  sa.sa_sigaction = on_fatal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE}) sigaction(sig, &sa, nullptr);
  return true;
}();

}  // namespace
