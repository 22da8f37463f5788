// Which x86 instruction-set level the CPU kernels may use. Detected once at run time (cpuid for
// what the core has, XCR0 for what the OS saves on a context switch, and for AMX the Linux
// permission to use tile data), so one binary runs on any x86-64 and uses what the CPU has.
// STAVE_CPU_ISA=generic|avx2|avx512|amx, or force_isa() in tests, lowers the level (never raises
// it above what was detected), so every kernel can be tested on a machine that has it.
// active_isa() is the one answer every CPU kernel family asks: the linear kernels (cpu_linear)
// and the leaf op tables (op_kernels) both choose from it.
#pragma once
#include <string>

namespace stave::cpu {

enum class Isa {
  kGeneric = 0,  // portable C++ (whatever the baseline compiler flags give)
  kAvx2 = 1,     // AVX2 + FMA + F16C
  kAvx512 = 2,   // AVX-512 F/BW/VL/DQ + VNNI + BF16
  kAmx = 3,      // the above + AMX-TILE/INT8/BF16 with the OS's permission
};

const char* isa_name(Isa isa);

// Parses "generic" / "avx2" / "avx512" / "amx"; throws stave::Error naming the value otherwise.
Isa parse_isa(const char* name);

// The best level this CPU and OS support (computed once).
Isa detected_isa();

// What STAVE_CPU_ISA = `value` (null or empty: unset) selects on a CPU that supports `detected`:
// the lower of the two. `message` is empty when the value is honoured as asked, and otherwise
// says which level is used instead (STAVE_CPU_ISA=amx on a CPU without AMX), which the process
// prints once to stderr. Throws stave::Error naming an unknown value.
struct IsaChoice {
  Isa isa;
  std::string message;
};
IsaChoice isa_from_env(const char* value, Isa detected);

// The level the kernels use now: detected_isa(), lowered by STAVE_CPU_ISA or force_isa().
Isa active_isa();

// Forces a level for the whole process (tests, benchmarks). A level above detected_isa() is
// clamped to it. Not thread-safe against concurrent linear() calls; call it between them.
void force_isa(Isa isa);

// RAII helper for tests: forces a level and restores the previous one.
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa);
  ~ScopedIsa();
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

 private:
  Isa previous_;
};

}  // namespace stave::cpu
