// CPU feature detection for the bench report (cpuid + XCR0, so a feature the OS does not
// enable is not claimed).
#include <cpuid.h>

#include <cstdint>
#include <string>

namespace stave::bench {

std::string cpu_isa() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return "x86-64";
  const bool osxsave = c & (1u << 27);
  if (!osxsave) return "x86-64";
  uint32_t xlo, xhi;
  __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  const uint64_t xcr0 = (uint64_t{xhi} << 32) | xlo;
  const bool ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6, tiles = (xcr0 & 0x60000) == 0x60000;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return "x86-64";
  const bool avx2 = b & (1u << 5), avx512f = b & (1u << 16), amx_tile = d & (1u << 24);
  if (amx_tile && tiles && avx512f && zmm) return "amx";
  if (avx512f && zmm) return "avx512";
  if (avx2 && ymm) return "avx2";
  return "x86-64";
#else
  return "unknown";
#endif
}

}  // namespace stave::bench
