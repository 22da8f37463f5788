#include "backends/cpu/cpu_features.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "stave/errors.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#define STAVE_X86 1
#endif

namespace stave::cpu {
namespace {

#ifdef STAVE_X86
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned sub) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) r = Regs{};
  return r;
}

unsigned long long xgetbv0() {
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

bool bit(unsigned v, int b) { return (v >> b) & 1u; }

// Linux gives a process the AMX tile-data state only on request (kernel >= 5.16).
bool request_amx_permission() {
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

Isa detect() {
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return Isa::kGeneric;
  Regs l1 = cpuid(1, 0);
  bool osxsave = bit(l1.c, 27), avx = bit(l1.c, 28), fma = bit(l1.c, 12), f16c = bit(l1.c, 29);
  if (!osxsave || !avx) return Isa::kGeneric;
  unsigned long long xcr0 = xgetbv0();
  bool os_avx = (xcr0 & 0x6) == 0x6;              // XMM and YMM state
  bool os_avx512 = (xcr0 & 0xE6) == 0xE6;         // + opmask, ZMM_Hi256, Hi16_ZMM
  bool os_amx = (xcr0 & (3ull << 17)) == (3ull << 17);  // XTILECFG, XTILEDATA
  Regs l7 = cpuid(7, 0);
  Regs l7s1 = cpuid(7, 1);
  bool avx2 = bit(l7.b, 5);
  if (!(os_avx && avx2 && fma && f16c)) return Isa::kGeneric;
  bool avx512 = bit(l7.b, 16) && bit(l7.b, 17) && bit(l7.b, 30) && bit(l7.b, 31)  // F DQ BW VL
                && bit(l7.c, 11)                                                   // VNNI
                && bit(l7s1.a, 5);                                                 // BF16
  if (!(os_avx512 && avx512)) return Isa::kAvx2;
  bool amx = bit(l7.d, 22) && bit(l7.d, 24) && bit(l7.d, 25);  // AMX-BF16, TILE, INT8
  if (!(os_amx && amx && request_amx_permission())) return Isa::kAvx512;
  return Isa::kAmx;
}
#else
Isa detect() { return Isa::kGeneric; }
#endif

Isa env_or_detected() {
  const IsaChoice choice = isa_from_env(std::getenv("STAVE_CPU_ISA"), detected_isa());
  if (!choice.message.empty()) std::fprintf(stderr, "stave: %s\n", choice.message.c_str());
  return choice.isa;
}

std::atomic<int>& active_level() {
  static std::atomic<int> level{static_cast<int>(env_or_detected())};
  return level;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kGeneric: return "generic";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAmx: return "amx";
  }
  return "?";
}

Isa parse_isa(const char* name) {
  std::string s = name ? name : "";
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512, Isa::kAmx})
    if (s == isa_name(isa)) return isa;
  throw Error(ErrorKind::kInvalidRequest,
              "STAVE_CPU_ISA: unknown instruction-set level '" + s + "' (expected generic, avx2, avx512 or amx)");
}

IsaChoice isa_from_env(const char* value, Isa detected) {
  if (!value || !*value) return {detected, ""};
  const Isa asked = parse_isa(value);
  if (asked <= detected) return {asked, ""};
  return {detected, std::string("STAVE_CPU_ISA=") + value + ": this CPU (or OS) supports at most " +
                        isa_name(detected) + "; the CPU kernels use " + isa_name(detected)};
}

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

Isa active_isa() { return static_cast<Isa>(active_level().load(std::memory_order_relaxed)); }

void force_isa(Isa isa) {
  active_level().store(static_cast<int>(std::min(isa, detected_isa())), std::memory_order_relaxed);
}

ScopedIsa::ScopedIsa(Isa isa) : previous_(active_isa()) { force_isa(isa); }
ScopedIsa::~ScopedIsa() { active_level().store(static_cast<int>(previous_), std::memory_order_relaxed); }

}  // namespace stave::cpu
