// The blocked, multithreaded driver of the Quark MXFP4 W4A4 product, shared by the generic,
// AVX2 and AVX-512 kernels (anonymous namespace: one copy per ISA file, see float_gemm.h).
//
// The activation is quantized once per call (QuantizedActivations, kernels.h); the weight stays
// packed as stored (two E2M1 codes per byte + one E8M0 byte per 32-block). For each 32-block the
// micro-kernel forms the exact integer Σ (2·E2M1_x)(2·E2M1_w) and adds it, times
// 2^(e_x − 2) · 2^(e_w), into fp32 accumulators: only the fp32 accumulation across blocks rounds.
#pragma once
#include <algorithm>
#include <cstdint>

#include "backends/cpu/linear/kernels.h"
#include "formats/linear_weight.h"

namespace stave::cpu::kern {
namespace {

// Kernel must provide:
//   static constexpr int MR, NR;
//   template <int R, int C> static void tile(const QuantizedActivations& q, const int64_t* rows,
//       const uint8_t* const* wcodes, const uint8_t* const* wscales, int64_t b0, int64_t nb,
//       float* acc /* [R][C] */);   // blocks b0 .. b0+nb of activation rows `rows`
// Kernel::tile<R, NR> for R = mr (1 ≤ mr ≤ MR): acc holds mr rows of NR.
template <class Kernel, int R>
void w4a4_tile_rows(int mr, const QuantizedActivations& q, const int64_t* rows, const uint8_t* const* wc,
                    const uint8_t* const* ws, int64_t b0, int64_t nb, float* acc) {
  if constexpr (R > 1) {
    if (mr < R) return w4a4_tile_rows<Kernel, R - 1>(mr, q, rows, wc, ws, b0, nb, acc);
  }
  Kernel::template tile<R, Kernel::NR>(q, rows, wc, ws, b0, nb, acc);
}

template <class Kernel>
void w4a4_gemm(const LinearWeight& w, const QuantizedActivations& q, float* y) {
  constexpr int MR = Kernel::MR, NR = Kernel::NR;
  constexpr int64_t NC = 48, MC = 64, KB = 32;  // KB blocks = 1024 columns per chunk
  static_assert(NC % NR == 0 && MC % MR == 0);
  const int64_t N = w.out, M = q.rows, blocks = q.blocks;
  const int64_t row_bytes = w.in / 2;
  const uint8_t* codes = static_cast<const uint8_t*>(w.data);
  const int64_t nblocks = (N + NC - 1) / NC, mblocks = (M + MC - 1) / MC;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < nblocks * mblocks; ++t) {
    const int64_t n0 = (t / mblocks) * NC, nc = std::min(NC, N - n0);
    const int64_t m0 = (t % mblocks) * MC, mc = std::min(MC, M - m0);
    for (int64_t b0 = 0; b0 < blocks; b0 += KB) {
      const int64_t nb = std::min(KB, blocks - b0);
      for (int64_t m = 0; m < mc; m += MR) {
        const int mr = static_cast<int>(std::min<int64_t>(MR, mc - m));
        for (int64_t n = 0; n < nc; n += NR) {
          const int nr = static_cast<int>(std::min<int64_t>(NR, nc - n));
          const uint8_t* wc[NR];
          const uint8_t* ws[NR];
          for (int j = 0; j < NR; ++j) {
            const int64_t r = n0 + n + std::min(j, nr - 1);  // edge: repeat the last row
            wc[j] = codes + r * row_bytes;
            ws[j] = w.scales + r * blocks;
          }
          float acc[MR * NR];
          int64_t rows[MR];
          for (int i = 0; i < mr; ++i) rows[i] = m0 + m + i;
          // All mr rows in one tile, so each weight block is unpacked once (decode: M < MR).
          w4a4_tile_rows<Kernel, MR>(mr, q, rows, wc, ws, b0, nb, acc);
          for (int i = 0; i < mr; ++i) {
            float* yr = y + (m0 + m + i) * N + n0 + n;
            for (int j = 0; j < nr; ++j) {
              const float base = b0 == 0 ? (w.bias ? w.bias[n0 + n + j] : 0.0f) : yr[j];
              yr[j] = base + acc[i * NR + j];
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace stave::cpu::kern
