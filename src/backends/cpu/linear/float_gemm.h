// The blocked, multithreaded driver shared by the fp32 / bf16 / f16 / W4A16 kernels of every
// ISA. Each ISA file includes it and instantiates float_gemm<Kernel> with its own micro-kernel,
// so everything here is in an anonymous namespace: every ISA gets its own copy compiled with its
// own flags (a shared inline definition could let the linker pick the AVX-512 one on any CPU).
//
// Work: tiles of NC weight rows × MC activation rows, spread over OpenMP threads. Inside a tile
// K is walked in KC chunks; a non-fp32 weight chunk is first widened to fp32 into a per-thread
// scratch (NC × KC floats = 96 KiB, L2-resident, read MC/MR times), so the stored weights are
// used in place and no converted copy of the model is ever kept. The micro-kernel computes an
// MR × NR block of dot products over the chunk with vector accumulators and adds it to y.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "formats/linear_weight.h"

namespace stave::cpu::kern {
namespace {

// Kernel must provide:
//   static constexpr int MR, NR;
//   template <int R, int C> static void tile(const float* const* x, const float* const* w,
//                                            int64_t kc, float* acc /* [R][C] */);
//   static void widen(const LinearWeight& w, int64_t n0, int64_t rows, int64_t k0, int64_t kc,
//                     float* dst, int64_t ld);   // weight rows n0.. columns k0.. -> fp32
template <class Kernel>
void float_gemm(const LinearWeight& w, const float* x, int64_t M, float* y) {
  constexpr int MR = Kernel::MR, NR = Kernel::NR;
  constexpr int64_t NC = 48, MC = 64, KC = 512;
  static_assert(NC % NR == 0 && MC % MR == 0);
  const int64_t N = w.out, K = w.in;
  const bool direct = w.format == WeightFormat::kF32;
  const int64_t nblocks = (N + NC - 1) / NC, mblocks = (M + MC - 1) / MC;
#pragma omp parallel
  {
    std::vector<float> scratch(direct ? 0 : static_cast<size_t>(NC * KC));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < nblocks * mblocks; ++t) {
      const int64_t n0 = (t / mblocks) * NC, nc = std::min(NC, N - n0);
      const int64_t m0 = (t % mblocks) * MC, mc = std::min(MC, M - m0);
      for (int64_t k0 = 0; k0 < K; k0 += KC) {
        const int64_t kc = std::min(KC, K - k0);
        const float* wt;
        int64_t ldw;
        if (direct) {
          wt = static_cast<const float*>(w.data) + n0 * K + k0;
          ldw = K;
        } else {
          Kernel::widen(w, n0, nc, k0, kc, scratch.data(), KC);
          wt = scratch.data();
          ldw = KC;
        }
        for (int64_t m = 0; m < mc; m += MR) {
          const int mr = static_cast<int>(std::min<int64_t>(MR, mc - m));
          for (int64_t n = 0; n < nc; n += NR) {
            const int nr = static_cast<int>(std::min<int64_t>(NR, nc - n));
            const float* wr[NR];
            for (int j = 0; j < NR; ++j) wr[j] = wt + (n + std::min(j, nr - 1)) * ldw;  // edge: repeat
            float acc[MR * NR];
            if (mr == MR) {
              const float* xr[MR];
              for (int i = 0; i < MR; ++i) xr[i] = x + (m0 + m + i) * K + k0;
              Kernel::template tile<MR, NR>(xr, wr, kc, acc);
            } else {
              for (int i = 0; i < mr; ++i) {
                const float* xr = x + (m0 + m + i) * K + k0;
                Kernel::template tile<1, NR>(&xr, wr, kc, acc + i * NR);
              }
            }
            for (int i = 0; i < mr; ++i) {
              float* yr = y + (m0 + m + i) * N + n0 + n;
              for (int j = 0; j < nr; ++j) {
                const float base = k0 == 0 ? (w.bias ? w.bias[n0 + n + j] : 0.0f) : yr[j];
                yr[j] = base + acc[i * NR + j];
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace stave::cpu::kern
