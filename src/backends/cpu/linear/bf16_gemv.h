// The decode-shaped product for BF16 weights (M = 1 .. kGemvMaxRows rows): every weight row is
// read once, straight from the stored bf16 (no widened scratch copy), by one thread; threads
// split the output features N into contiguous runs, so the whole weight streams from memory
// once per call. This is the lm_head of a decode step (a Clef lm_head is [248k × hidden] bf16,
// the largest tensor a decode step reads) and every linear of a BF16 release at M ≤ 8.
//
// A bf16 value is the upper half of an fp32, so a vector of 2L bf16 becomes two fp32 vectors
// with one shift (even columns) and one mask (odd columns) — no lane shuffles. The activation
// is rearranged once per call to match (per chunk of 2L columns: the L even ones, then the L
// odd ones), and both halves are multiplied into the same fp32 accumulator with FMA (one
// rounding per term, as in float_gemm), so the result differs from ref::linear only by
// summation order: each accumulator lane chains at most K / L terms (K / 4L where a tile keeps
// four accumulators, gemv_unroll), then a reduction — inside the float kernels' bound
// (K/8 + 48 terms). Fast precision only, like every kernel here.
//
// Each ISA file includes this (anonymous namespace: one copy per ISA, see float_gemm.h) and runs
// bf16_gemv<Bf16GemvTile<V>> with its vector traits V (the micro-tile below is written once):
//   using F = ...;                         // an fp32 vector of L lanes
//   static constexpr int L;                // fp32 lanes per vector; a chunk is 2L columns
//   static constexpr int kRegs;            // vector registers (16 for AVX2, 32 for AVX-512)
//   static F zero();  static F load(const float* p);  // unaligned
//   static void widen(const uint16_t* p, F& even, F& odd);  // 2L bf16 -> fp32 (shift / mask)
//   static F fmadd(F a, F b, F c);         // a·b + c, one rounding
//   static F add(F a, F b);  static float reduce(F v);  // horizontal sum
// bf16_gemv itself takes any Kernel with L, kRegs and
//   template <int R, int C> static void tile(const float* xa, int64_t chunks, int64_t row,
//       const uint16_t* const* w, float* acc /* [R][C] */);
//     // row: elements per weight row (K), for prefetching the next tile's rows
//     // xa: R rearranged activation rows, one after another (stride chunks·2L floats)
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/linear/kernels.h"
#include "formats/linear_weight.h"
#include "util/bf16.h"

namespace stave::cpu::kern {
namespace {

// Columns of x per chunk rearranged as [even | odd] (the chunk is 2L wide).
inline void rearrange_even_odd(const float* x, int64_t M, int64_t K, int64_t chunk, int64_t chunks, float* xa) {
  const int64_t half = chunk / 2;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < chunks; ++c) {
      const float* s = x + m * K + c * chunk;
      float* d = xa + (m * chunks + c) * chunk;
      for (int64_t t = 0; t < half; ++t) {
        d[t] = s[2 * t];
        d[half + t] = s[2 * t + 1];
      }
    }
}

// Output features per task: enough rows that a task streams ≥ 256 KiB of a Clef-sized weight,
// few enough that the runs balance over the threads. Threads take the next task when they
// finish one (dynamic schedule), so a thread that loses its core to another process for a while
// does not hold the whole product up at the barrier (a static split waited for it).
constexpr int64_t kGemvRowsPerTask = 64;

// Weight rows per micro-tile: R·C accumulators + 2C widened weights + 2 activation vectors must
// fit the register file; at most 4 (four streams per thread are plenty), each with a software
// prefetch of the next tile's rows. At M = 1 with an activation row that fits in L1
// (kGemvSingleRowMaxActivationBytes) the tile is one row instead (C = 1): the thread then reads
// its run of the weight as one sequential stream, which the hardware prefetcher follows (on Zen 4
// this read the lm_head faster than four rows side by side; see docs/benchmarks.md).
constexpr int gemv_cols(int R, int regs) {
  for (int c = 4; c > 1; --c)
    if (R * c + 2 * c + 2 <= regs) return c;
  return 1;
}

// Independent accumulators per (activation row, weight row) along K, so the FMA chains of a
// single-row tile do not serialize on one register (4 at R·C = 1, else 1).
constexpr int gemv_unroll(int R, int C) { return R * C == 1 ? 4 : 1; }

// Software prefetch of the next tile's rows, needed only where the tile reads several rows side
// by side (one sequential stream is the hardware prefetcher's job).
constexpr bool gemv_prefetch_next_tile(int C) { return C > 1; }

// The micro-tile: R activation rows × C weight rows over all chunks, each (activation row,
// weight row) pair in U = gemv_unroll accumulators that are added, then reduced, at the end.
template <class V>
struct Bf16GemvTile {
  static constexpr int L = V::L, kRegs = V::kRegs;

  template <int R, int C>
  static void tile(const float* xa, int64_t chunks, int64_t row, const uint16_t* const* w, float* acc) {
    using F = typename V::F;
    constexpr int U = gemv_unroll(R, C);
    constexpr int64_t chunk = 2 * L;
    // Chunks per 64-byte line of weight (2 bytes a column): the prefetch is issued once per line.
    constexpr int64_t chunks_per_line = std::max<int64_t>(1, 64 / (2 * chunk));
    const int64_t stride = chunks * chunk;
    F a[U][R][C];
    for (int u = 0; u < U; ++u)
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) a[u][i][j] = V::zero();
    const auto step = [&](int64_t c, F(&s)[R][C]) {
      F we[C], wo[C];
      for (int j = 0; j < C; ++j) {
        const uint16_t* p = w[j] + c * chunk;
        // The next tile's rows follow these C rows in memory: fetch the same columns of them
        // (prefetcht0, as _mm_prefetch with _MM_HINT_T0).
        if constexpr (gemv_prefetch_next_tile(C))
          if (c % chunks_per_line == 0) __builtin_prefetch(p + C * row, 0, 3);
        V::widen(p, we[j], wo[j]);
      }
      for (int i = 0; i < R; ++i) {
        const float* xr = xa + i * stride + c * chunk;
        const F xe = V::load(xr), xo = V::load(xr + L);
        for (int j = 0; j < C; ++j) s[i][j] = V::fmadd(xo, wo[j], V::fmadd(xe, we[j], s[i][j]));
      }
    };
    int64_t c = 0;
    for (; c + U <= chunks; c += U)
      for (int u = 0; u < U; ++u) step(c + u, a[u]);
    for (; c < chunks; ++c) step(c, a[0]);
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) {
        F s = a[0][i][j];
        for (int u = 1; u < U; ++u) s = V::add(s, a[u][i][j]);
        acc[i * C + j] = V::reduce(s);
      }
  }
};

template <class Kernel, int R, int C = gemv_cols(R, Kernel::kRegs)>
void bf16_gemv_rows(const LinearWeight& w, const float* x, const float* xa, int64_t chunks, float* y) {
  constexpr int64_t chunk = 2 * Kernel::L;
  const int64_t N = w.out, K = w.in, kmain = chunks * chunk;
  const uint16_t* data = static_cast<const uint16_t*>(w.data);
  const int64_t tasks = (N + kGemvRowsPerTask - 1) / kGemvRowsPerTask;
#pragma omp parallel for schedule(dynamic)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t n_end = std::min(N, (t + 1) * kGemvRowsPerTask);
    for (int64_t n = t * kGemvRowsPerTask; n < n_end; n += C) {
      const int nr = static_cast<int>(std::min<int64_t>(C, n_end - n));
      const uint16_t* wr[C];
      for (int j = 0; j < C; ++j) wr[j] = data + (n + std::min(j, nr - 1)) * K;  // edge: repeat the last row
      float acc[R * C];
      Kernel::template tile<R, C>(xa, chunks, K, wr, acc);
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < nr; ++j) {
          float s = acc[i * C + j];
          for (int64_t k = kmain; k < K; ++k) s += x[i * K + k] * bf16_to_f32(wr[j][k]);  // K tail
          y[i * N + n + j] = s + (w.bias ? w.bias[n + j] : 0.0f);
        }
    }
  }
}

// y[M, N] = x · Wᵀ (+ bias) for a BF16 weight, 1 ≤ M ≤ kGemvMaxRows.
template <class Kernel>
void bf16_gemv(const LinearWeight& w, const float* x, int64_t M, float* y) {
  constexpr int64_t chunk = 2 * Kernel::L;
  const int64_t K = w.in, chunks = K / chunk;
  std::vector<float> xa(static_cast<size_t>(M * chunks * chunk));
  rearrange_even_odd(x, M, K, chunk, chunks, xa.data());
  count_bf16_gemv_call();
  switch (M) {
    case 1:
      if (K * static_cast<int64_t>(sizeof(float)) <= kGemvSingleRowMaxActivationBytes) {
        count_gemv_single_row_call();
        bf16_gemv_rows<Kernel, 1, 1>(w, x, xa.data(), chunks, y);
      } else {
        bf16_gemv_rows<Kernel, 1>(w, x, xa.data(), chunks, y);
      }
      break;
    case 2: bf16_gemv_rows<Kernel, 2>(w, x, xa.data(), chunks, y); break;
    case 3: bf16_gemv_rows<Kernel, 3>(w, x, xa.data(), chunks, y); break;
    case 4: bf16_gemv_rows<Kernel, 4>(w, x, xa.data(), chunks, y); break;
    case 5: bf16_gemv_rows<Kernel, 5>(w, x, xa.data(), chunks, y); break;
    case 6: bf16_gemv_rows<Kernel, 6>(w, x, xa.data(), chunks, y); break;
    case 7: bf16_gemv_rows<Kernel, 7>(w, x, xa.data(), chunks, y); break;
    default: bf16_gemv_rows<Kernel, 8>(w, x, xa.data(), chunks, y); break;
  }
}

}  // namespace
}  // namespace stave::cpu::kern
