// Flush-to-zero and denormals-are-zero on the calling thread while a FlushDenormals lives (the
// x86 MXCSR bits FTZ and DAZ), restored when it goes. The fast CPU backend's ops hold one on each
// thread of their parallel regions: the chunked delta rule's decays e^γ reach far below the fp32
// normal range (γ is a sum of negative gates over a chunk), and on Intel cores every vector
// operation with a denormal operand or result takes a microcode assist, which made the delta rule
// 47–54× slower with steep gates on the AMX host (docs/benchmarks.md). Values below 2^-126 add
// nothing a fast-precision result can show. Exact precision never runs here: its ops keep IEEE
// denormals, as the reference does.
// STAVE_CPU_DENORMALS=keep turns the flush off (to measure what it saves); read once.
#pragma once

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace stave::cpu {

// False when STAVE_CPU_DENORMALS=keep (throws on any other value than keep/flush/unset).
bool flush_denormals_enabled();

class FlushDenormals {
 public:
#if defined(__x86_64__) || defined(__i386__)
  static constexpr uint32_t kFtzDaz = 0x8040;  // MXCSR bit 15 (FTZ) and bit 6 (DAZ)
  FlushDenormals() : saved_(_mm_getcsr()) {
    if (flush_denormals_enabled()) _mm_setcsr(saved_ | kFtzDaz);
  }
  ~FlushDenormals() { _mm_setcsr(saved_); }

 private:
  uint32_t saved_;
#else
  FlushDenormals() = default;  // no MXCSR: nothing to set (the copy operations below would hide it)
#endif
 public:
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;
};

}  // namespace stave::cpu
