// MXFP4 W4A4 at decode (M ≤ kGemvMaxRows) on AVX-512 VNNI: the weight streams from memory once
// per call, four 32-blocks (64 packed bytes) per load, with no nibble-to-column shuffle.
//
// The packed weight byte t of a block holds column 2t (low nibble) and 2t + 1 (high nibble).
// Instead of unpacking the weight into column order, the activation is rearranged once per
// call to the packed order: per group of four blocks, 64 bytes of even-column codes (block
// 4g+q's 16 in 128-bit lane q) and 64 bytes of odd-column codes. Then the low nibbles of a
// 64-byte weight load multiply the even codes and the high nibbles the odd ones, two vpdpbusd
// into one int32 register whose 128-bit lane q holds four exact partial sums of block 4g+q.
// The per-block scales are per-lane factors (2^(e_x − 2) · 2^(e_w), one per 128-bit lane), so
// a group costs one convert, one multiply and one FMA per (row, weight row) — not per block.
// The 12·Σx offset of the unsigned weight codes (see Avx512W4A4) starts lane 4q of each group.
//
// Numerics: every block partial sum is an exact integer, times exact power-of-two scales, then
// accumulated in fp32 (one or two chains per lane, at most K/128 terms each, then a 16-lane
// reduction): inside the W4A4 kernels' bound (K/32 + 48 terms). Fast precision only, like every kernel here.
#if !defined(__clang__)  // clang has no such warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/linear/kernels.h"

namespace stave::cpu::kern {
namespace {

// Output features per OpenMP task (a contiguous run of N); threads take the next task when they
// finish one (dynamic schedule, as bf16_gemv.h).
constexpr int64_t kRowsPerTask = 64;

// The activation in the packed weight order, per row and group of four blocks (zero past the
// last block, so a partial group adds nothing).
struct GroupedActivations {
  int64_t groups = 0;
  std::vector<int8_t> codes;   // [rows][groups][128]: 64 even-column codes, then 64 odd
  std::vector<float> scales;   // [rows][groups][16]: lanes 4q..4q+3 = 2^(e_x − 2) of block 4g+q
  std::vector<int32_t> init;   // [rows][groups][16]: lane 4q = −12·Σ codes of block 4g+q

  explicit GroupedActivations(const QuantizedActivations& q) : groups((q.blocks + 3) / 4) {
    const int64_t M = q.rows;
    codes.assign(static_cast<size_t>(M * groups * 128), 0);
    scales.assign(static_cast<size_t>(M * groups * 16), 0.0f);
    init.assign(static_cast<size_t>(M * groups * 16), 0);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t b = 0; b < q.blocks; ++b) {
        const int64_t g = b / 4, lane = b % 4, at = m * groups + g;
        const int8_t* src = q.codes.data() + m * q.k + b * 32;
        int8_t* dst = codes.data() + at * 128 + lane * 16;
        for (int t = 0; t < 16; ++t) {
          dst[t] = src[2 * t];
          dst[64 + t] = src[2 * t + 1];
        }
        for (int l = 0; l < 4; ++l) scales[at * 16 + lane * 4 + l] = q.scales[m * q.blocks + b];
        init[at * 16 + lane * 4] = -q.offsets[m * q.blocks + b];
      }
  }
};

// 2^(byte − 127) of the E8M0 scale bytes of blocks b .. b+nb−1 (nb ≤ 4; lanes past nb get
// byte 0): the byte shifted into an fp32 exponent field, with byte 0 (whose value 2^-127 is
// subnormal) patched in, and byte 255 giving +inf — exactly e8m0_table().
inline __m128 scales4(const uint8_t* sc, int64_t nb) {
  uint32_t bytes = 0;
  if (nb == 4)
    std::memcpy(&bytes, sc, 4);  // one load
  else
    for (int64_t q = 0; q < nb; ++q) bytes |= static_cast<uint32_t>(sc[q]) << (8 * q);
  const __m128i b4 = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(bytes)));
  const __m128 f = _mm_castsi128_ps(_mm_slli_epi32(b4, 23));
  return _mm_blendv_ps(f, _mm_set1_ps(0x1p-127f), _mm_castsi128_ps(_mm_cmpeq_epi32(b4, _mm_setzero_si128())));
}

// Weight rows per tile at R activation rows: several rows share each activation load, with R·C
// accumulators + 3C weight registers + 4 activation registers within the 32 zmm. At M = 1 with
// a grouped activation row (2K bytes) within kGemvSingleRowMaxActivationBytes the tile is one
// row instead (C = 1), so a thread reads its run of the weight (codes, and the scales beside
// them) as one sequential stream that the hardware prefetcher follows.
constexpr int gemv_cols(int R) { return R <= 3 ? 4 : R <= 5 ? 3 : 2; }
// Independent fp32 accumulators per (activation row, weight row), so a single-row tile's FMA
// chain does not serialize on one register.
constexpr int gemv_unroll(int R, int C) { return R * C == 1 ? 2 : 1; }

template <int R, int C>
void tile(const GroupedActivations& a, int64_t blocks, const uint8_t* const* wc, const uint8_t* const* ws,
          float* acc) {
  constexpr int U = gemv_unroll(R, C);
  // 4-bit code -> 2·E2M1 + 12 ∈ [0, 24] (unsigned operand of vpdpbusd).
  const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
  const __m512i nib = _mm512_set1_epi8(0x0f);
  const __m512i per_lane = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const int64_t row_bytes = blocks * 16;
  __m512 s[U][R][C];
  for (int u = 0; u < U; ++u)
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) s[u][i][j] = _mm512_setzero_ps();
  const auto step = [&](int64_t g, __m512(&sum)[R][C]) {
    const int64_t b = 4 * g, nb = std::min<int64_t>(4, blocks - b);
    __m512i lo[C], hi[C];
    __m512 wsv[C];
    for (int j = 0; j < C; ++j) {
      const uint8_t* p = wc[j] + b * 16;
      if constexpr (C > 1) {
        // The next tile's rows follow these C rows in memory: fetch the same columns of them.
        _mm_prefetch(reinterpret_cast<const char*>(p + C * row_bytes), _MM_HINT_T0);
        if ((g & 15) == 0) _mm_prefetch(reinterpret_cast<const char*>(ws[j] + b + C * blocks), _MM_HINT_T0);
      }
      const __m512i v = nb == 4 ? _mm512_loadu_si512(p)
                                : _mm512_maskz_loadu_epi8((__mmask64{1} << (16 * nb)) - 1, p);
      lo[j] = _mm512_shuffle_epi8(lut, _mm512_and_si512(v, nib));
      hi[j] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), nib));
      wsv[j] = _mm512_permutexvar_ps(per_lane, _mm512_castps128_ps512(scales4(ws[j] + b, nb)));
    }
    for (int i = 0; i < R; ++i) {
      const int64_t at = i * a.groups + g;
      const int8_t* xc = a.codes.data() + at * 128;
      const __m512i xe = _mm512_loadu_si512(xc), xo = _mm512_loadu_si512(xc + 64);
      const __m512 xs = _mm512_loadu_ps(a.scales.data() + at * 16);
      const __m512i init = _mm512_loadu_si512(a.init.data() + at * 16);
      for (int j = 0; j < C; ++j) {
        const __m512i d = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(init, lo[j], xe), hi[j], xo);
        sum[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(xs, wsv[j]), sum[i][j]);
      }
    }
  };
  int64_t g = 0;
  for (; g + U <= a.groups; g += U)
    for (int u = 0; u < U; ++u) step(g + u, s[u]);
  for (; g < a.groups; ++g) step(g, s[0]);
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      __m512 t = s[0][i][j];
      for (int u = 1; u < U; ++u) t = _mm512_add_ps(t, s[u][i][j]);
      acc[i * C + j] = _mm512_reduce_add_ps(t);
    }
}

template <int R, int C = gemv_cols(R)>
void gemv_rows(const LinearWeight& w, const GroupedActivations& a, float* y) {
  const int64_t N = w.out, blocks = w.in / 32, row_bytes = w.in / 2;
  const uint8_t* codes = static_cast<const uint8_t*>(w.data);
  const int64_t tasks = (N + kRowsPerTask - 1) / kRowsPerTask;
#pragma omp parallel for schedule(dynamic)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t n_end = std::min(N, (t + 1) * kRowsPerTask);
    for (int64_t n = t * kRowsPerTask; n < n_end; n += C) {
      const int nr = static_cast<int>(std::min<int64_t>(C, n_end - n));
      const uint8_t* wc[C];
      const uint8_t* ws[C];
      for (int j = 0; j < C; ++j) {
        const int64_t r = n + std::min(j, nr - 1);  // edge: repeat the last row
        wc[j] = codes + r * row_bytes;
        ws[j] = w.scales + r * blocks;
      }
      float acc[R * C];
      tile<R, C>(a, blocks, wc, ws, acc);
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < nr; ++j) y[i * N + n + j] = acc[i * C + j] + (w.bias ? w.bias[n + j] : 0.0f);
    }
  }
}

}  // namespace

void linear_w4a4_gemv_avx512(const LinearWeight& w, const float* x, int64_t M, float* y) {
  QuantizedActivations q;
  quantize_activations_avx512(x, M, w.in, w.input_scale_mode, 1, q);
  const GroupedActivations a(q);
  count_w4a4_gemv_call();
  switch (M) {
    case 1:
      if (a.groups * (128 + 2 * 16 * 4) <= kGemvSingleRowMaxActivationBytes) {
        count_gemv_single_row_call();
        gemv_rows<1, 1>(w, a, y);
      } else {
        gemv_rows<1>(w, a, y);
      }
      break;
    case 2: gemv_rows<2>(w, a, y); break;
    case 3: gemv_rows<3>(w, a, y); break;
    case 4: gemv_rows<4>(w, a, y); break;
    case 5: gemv_rows<5>(w, a, y); break;
    case 6: gemv_rows<6>(w, a, y); break;
    case 7: gemv_rows<7>(w, a, y); break;
    default: gemv_rows<8>(w, a, y); break;
  }
}

}  // namespace stave::cpu::kern
