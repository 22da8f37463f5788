// AVX2 + FMA (+ F16C) linear kernels: fp32 FMA dot products for fp32 / bf16 / f16 / W4A16
// weights (bf16 widened exactly by a shift, f16 by vcvtph2ps, MXFP4 dequantized to exact fp32),
// and the exact-integer W4A4 block dot with vpmaddubsw / vpmaddwd (below kW4A4MaddubsMinRows
// rows; from there the register-blocked linear_w4a4_maddubs_avx2).
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/linear/bf16_gemv.h"
#include "backends/cpu/linear/float_gemm.h"
#include "backends/cpu/linear/kernels.h"
#include "backends/cpu/linear/w4a4_gemm.h"
#include "util/bf16.h"

namespace stave::cpu::kern {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// 16 packed bytes (one 32-block: low nibble = even column) -> 32 codes in column order.
inline __m256i unpack_nibbles(const uint8_t* p) {
  const __m128i m = _mm_set1_epi8(0x0f);
  __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
  return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
}

struct Avx2Float {
  static constexpr int MR = 4, NR = 3;

  template <int R, int C>
  static void tile(const float* const* x, const float* const* w, int64_t kc, float* acc) {
    __m256 a[R][C];
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) a[i][j] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
      __m256 wv[C];
      for (int j = 0; j < C; ++j) wv[j] = _mm256_loadu_ps(w[j] + k);
      for (int i = 0; i < R; ++i) {
        __m256 xv = _mm256_loadu_ps(x[i] + k);
        for (int j = 0; j < C; ++j) a[i][j] = _mm256_fmadd_ps(xv, wv[j], a[i][j]);
      }
    }
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) {
        float s = hsum(a[i][j]);
        for (int64_t kk = k; kk < kc; ++kk) s += x[i][kk] * w[j][kk];
        acc[i * C + j] = s;
      }
  }

  static void widen(const LinearWeight& w, int64_t n0, int64_t rows, int64_t k0, int64_t kc, float* dst,
                    int64_t ld) {
    const float* e8m0 = e8m0_table();
    const __m128i lut = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = static_cast<const uint8_t*>(w.data) + (n0 + r) * w.row_bytes();
      float* d = dst + r * ld;
      int64_t i = 0;
      switch (w.format) {
        case WeightFormat::kF32: std::memcpy(d, row + k0 * 4, static_cast<size_t>(kc) * 4); break;
        case WeightFormat::kBF16: {
          const uint16_t* s = reinterpret_cast<const uint16_t*>(row) + k0;
          for (; i + 8 <= kc; i += 8) {
            __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
            _mm256_storeu_ps(d + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
          }
          for (; i < kc; ++i) d[i] = bf16_to_f32(s[i]);
          break;
        }
        case WeightFormat::kF16: {
          const uint16_t* s = reinterpret_cast<const uint16_t*>(row) + k0;
          for (; i + 8 <= kc; i += 8)
            _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
          for (; i < kc; ++i) d[i] = f16_to_f32(s[i]);
          break;
        }
        case WeightFormat::kMXFP4: {  // k0, kc multiples of 32
          const uint8_t* sc = w.scales + (n0 + r) * (w.in / mxfp4::kBlock) + k0 / mxfp4::kBlock;
          for (int64_t b = 0; b < kc / mxfp4::kBlock; ++b) {
            __m256i c = unpack_nibbles(row + k0 / 2 + b * 16);
            __m128i d0 = _mm_shuffle_epi8(lut, _mm256_castsi256_si128(c));
            __m128i d1 = _mm_shuffle_epi8(lut, _mm256_extracti128_si256(c, 1));
            // 2·E2M1 · 2^(byte−127) / 2 is the exact dequantized value.
            __m256 half = _mm256_set1_ps(e8m0[sc[b]] * 0.5f);
            float* o = d + b * mxfp4::kBlock;
            _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(d0)), half));
            _mm256_storeu_ps(o + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(d0, 8))), half));
            _mm256_storeu_ps(o + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(d1)), half));
            _mm256_storeu_ps(o + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(d1, 8))), half));
          }
          break;
        }
      }
    }
  }
};

struct Avx2W4A4 {
  static constexpr int MR = 4, NR = 2;

  template <int R, int C>
  static void tile(const QuantizedActivations& q, const int64_t* rows, const uint8_t* const* wc,
                   const uint8_t* const* ws, int64_t b0, int64_t nb, float* acc) {
    const float* e8m0 = e8m0_table();
    // Weight codes as unsigned 2·E2M1 + 12 ∈ [0, 24] (vpmaddubsw wants one unsigned operand);
    // pair sums stay ≤ 2·24·12 = 576, far from int16 saturation.
    const __m128i lut128 = _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    const __m256i lut = _mm256_set_m128i(lut128, lut128);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 a[R][C];
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) a[i][j] = _mm256_setzero_ps();
    for (int64_t b = b0; b < b0 + nb; ++b) {
      __m256i wu[C];
      __m256 wsv[C];
      for (int j = 0; j < C; ++j) {
        wu[j] = _mm256_shuffle_epi8(lut, unpack_nibbles(wc[j] + b * 16));
        wsv[j] = _mm256_set1_ps(e8m0[ws[j][b]]);
      }
      for (int i = 0; i < R; ++i) {
        const int64_t at = rows[i] * q.blocks + b;
        __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q.codes.data() + rows[i] * q.k + b * 32));
        __m256 xs = _mm256_set1_ps(q.scales[at]);
        __m256i corr = _mm256_zextsi128_si256(_mm_cvtsi32_si128(q.offsets[at]));
        for (int j = 0; j < C; ++j) {
          __m256i d = _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(wu[j], xv), ones), corr);
          a[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(xs, wsv[j]), a[i][j]);
        }
      }
    }
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) acc[i * C + j] = hsum(a[i][j]);
  }
};

// BF16 weights at M ≤ kGemvMaxRows (bf16_gemv.h's Bf16GemvTile): 16 bf16 per 32-byte load,
// widened by one shift (even columns) and one mask (odd columns), two FMAs per row of x.
struct Avx2GemvVec {
  using F = __m256;
  static constexpr int L = 8, kRegs = 16;
  static F zero() { return _mm256_setzero_ps(); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void widen(const uint16_t* p, F& even, F& odd) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static float reduce(F v) { return hsum(v); }
};

}  // namespace

void quantize_activations_avx2(const float* x, int64_t M, int64_t K, mxfp4::ScaleMode mode, int64_t row_multiple,
                               QuantizedActivations& q) {
  q.resize(M, K, row_multiple);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 two = _mm256_set1_ps(2.0f), four = _mm256_set1_ps(4.0f), twelve = _mm256_set1_ps(12.0f);
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  // One task per 32-block (a few tens of ns each), so a single decode row is split too.
#pragma omp parallel for schedule(static) if (M * q.blocks >= 256)
  for (int64_t mb = 0; mb < M * q.blocks; ++mb) {
    const int64_t m = mb / q.blocks, b = mb % q.blocks;
    const float* xb = x + m * K + b * mxfp4::kBlock;
    __m256 v[4];
    __m256 mx = _mm256_setzero_ps();
    for (int t = 0; t < 4; ++t) {
      v[t] = _mm256_loadu_ps(xb + 8 * t);
      mx = _mm256_max_ps(_mm256_and_ps(v[t], abs_mask), mx);  // a NaN operand yields mx, as std::max
    }
    const int e = mxfp4::scale_exponent(hmax(mx), mode);
    const __m256 inv = _mm256_set1_ps(mxfp4::exp2_int(-e));
    __m256i d[4];
    for (int t = 0; t < 4; ++t) {
      // mxfp4::quantize_e2m1 in doubled units: grid step 0.5 / 1 / 2 below 2 / 4 / above,
      // round half to even, saturate at 6 (doubled: 12), +0 for NaN.
      __m256 s = _mm256_mul_ps(v[t], inv);
      __m256 av = _mm256_and_ps(s, abs_mask);
      __m256 lt2 = _mm256_cmp_ps(av, two, _CMP_LT_OQ), lt4 = _mm256_cmp_ps(av, four, _CMP_LT_OQ);
      __m256 inv_step = _mm256_blendv_ps(_mm256_blendv_ps(half, one, lt4), two, lt2);
      __m256 dbl_step = _mm256_blendv_ps(_mm256_blendv_ps(four, two, lt4), one, lt2);
      __m256 r = _mm256_round_ps(_mm256_mul_ps(av, inv_step), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      __m256 dv = _mm256_min_ps(_mm256_mul_ps(r, dbl_step), twelve);
      dv = _mm256_and_ps(dv, _mm256_cmp_ps(av, av, _CMP_ORD_Q));
      d[t] = _mm256_sign_epi32(_mm256_cvttps_epi32(dv), _mm256_castps_si256(s));
    }
    __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(d[0], d[1]), _mm256_packs_epi32(d[2], d[3]));
    bytes = _mm256_permutevar8x32_epi32(bytes, order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q.codes.data() + m * K + b * mxfp4::kBlock), bytes);
    const int32_t sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(d[0], d[1]), _mm256_add_epi32(d[2], d[3])));
    q.scales[m * q.blocks + b] = mxfp4::exp2_int(e - 2);
    q.offsets[m * q.blocks + b] = 12 * sum;
  }
}

void linear_w4a4_tile_avx2(const LinearWeight& w, const float* x, int64_t M, float* y) {
  QuantizedActivations q;
  quantize_activations_avx2(x, M, w.in, w.input_scale_mode, 1, q);
  w4a4_gemm<Avx2W4A4>(w, q, y);
}

void linear_avx2(const LinearWeight& w, const float* x, int64_t M, float* y) {
  if (w.format == WeightFormat::kMXFP4 && w.quantize_input) {
    // From 6 rows: the register-blocked vpmaddubsw kernel (linear_w4a4_maddubs_avx2.cpp).
    if (M >= kW4A4MaddubsMinRows && linear_w4a4_maddubs_avx2(w, x, M, y)) return;
    linear_w4a4_tile_avx2(w, x, M, y);
    return;
  }
  if (w.format == WeightFormat::kBF16 && M <= kGemvMaxRows) {
    bf16_gemv<Bf16GemvTile<Avx2GemvVec>>(w, x, M, y);
    return;
  }
  float_gemm<Avx2Float>(w, x, M, y);
}

}  // namespace stave::cpu::kern
