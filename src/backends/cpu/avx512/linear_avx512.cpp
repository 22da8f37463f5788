// AVX-512 linear kernels. fp32 / bf16 / f16 / W4A16 weights: widened to fp32 exactly and
// multiplied with fp32 FMA. A bf16-rounded activation on vdpbf16ps would add a 2^-9 relative
// error per term, outside fast precision's bounds; the hi + lo split that keeps them
// (linear_bf16_split_avx512) was not consistently faster here (kernels.h), so it is not used.
// At decode (M = 1) the product is bound by weight bandwidth and fp32 FMA keeps the result
// equal to ref::linear up to summation order.
// W4A4: M ≤ kGemvMaxRows linear_w4a4_gemv_avx512.cpp; from kW4A4VnniMinRows the register-blocked
// VNNI kernel (linear_w4a4_vnni_avx512.cpp: 8 vpdpbusd per 32-block kept in registers, one cvt
// and FMA to rescale); between them exact-integer 32-block dots with vpdpbusd, two blocks per
// 512-bit register, stored and rescaled per block (Avx512W4A4 below). The vdpbf16ps kernel
// (linear_dpbf16_avx512.cpp) is no longer dispatched (kernels.h).
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* "may be used uninitialized").
#if !defined(__clang__)  // clang has no such warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/linear/bf16_gemv.h"
#include "backends/cpu/linear/float_gemm.h"
#include "backends/cpu/linear/kernels.h"
#include "backends/cpu/linear/w4a4_gemm.h"
#include "util/bf16.h"

namespace stave::cpu::kern {
namespace {

// 16 packed bytes (one 32-block: low nibble = even column) -> 32 codes in column order.
inline __m256i unpack_nibbles(const uint8_t* p) {
  const __m128i m = _mm_set1_epi8(0x0f);
  __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
  return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
}

// 32 packed bytes (blocks b and b+1) -> 64 codes in column order.
inline __m512i unpack_nibbles_pair(const uint8_t* p) {
  const __m256i m = _mm256_set1_epi8(0x0f);
  __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  __m256i lo = _mm256_and_si256(v, m), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
  // Per 128-bit lane (lane 0 = block b, lane 1 = block b+1): columns 0..15, then 16..31.
  __m256i u0 = _mm256_unpacklo_epi8(lo, hi), u1 = _mm256_unpackhi_epi8(lo, hi);
  __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(u0), u1, 1);  // [b 0-15, b+1 0-15, b 16-31, b+1 16-31]
  return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));          // [b 0-15, b 16-31, b+1 0-15, b+1 16-31]
}

inline __m512 pair_ps(float lo, float hi) {
  return _mm512_insertf32x8(_mm512_set1_ps(lo), _mm256_set1_ps(hi), 1);
}

struct Avx512Float {
  static constexpr int MR = 4, NR = 4;

  template <int R, int C>
  static void tile(const float* const* x, const float* const* w, int64_t kc, float* acc) {
    __m512 a[R][C];
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) a[i][j] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= kc; k += 16) {
      __m512 wv[C];
      for (int j = 0; j < C; ++j) wv[j] = _mm512_loadu_ps(w[j] + k);
      for (int i = 0; i < R; ++i) {
        __m512 xv = _mm512_loadu_ps(x[i] + k);
        for (int j = 0; j < C; ++j) a[i][j] = _mm512_fmadd_ps(xv, wv[j], a[i][j]);
      }
    }
    if (k < kc) {  // masked tail: lanes past kc load as 0
      const __mmask16 mk = static_cast<__mmask16>((1u << (kc - k)) - 1u);
      __m512 wv[C];
      for (int j = 0; j < C; ++j) wv[j] = _mm512_maskz_loadu_ps(mk, w[j] + k);
      for (int i = 0; i < R; ++i) {
        __m512 xv = _mm512_maskz_loadu_ps(mk, x[i] + k);
        for (int j = 0; j < C; ++j) a[i][j] = _mm512_fmadd_ps(xv, wv[j], a[i][j]);
      }
    }
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) acc[i * C + j] = _mm512_reduce_add_ps(a[i][j]);
  }

  static void widen(const LinearWeight& w, int64_t n0, int64_t rows, int64_t k0, int64_t kc, float* dst,
                    int64_t ld) {
    const float* e8m0 = e8m0_table();
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12));
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = static_cast<const uint8_t*>(w.data) + (n0 + r) * w.row_bytes();
      float* d = dst + r * ld;
      int64_t i = 0;
      switch (w.format) {
        case WeightFormat::kF32: std::memcpy(d, row + k0 * 4, static_cast<size_t>(kc) * 4); break;
        case WeightFormat::kBF16: {
          const uint16_t* s = reinterpret_cast<const uint16_t*>(row) + k0;
          for (; i + 16 <= kc; i += 16) {
            __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
            _mm512_storeu_ps(d + i, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
          }
          for (; i < kc; ++i) d[i] = bf16_to_f32(s[i]);
          break;
        }
        case WeightFormat::kF16: {
          const uint16_t* s = reinterpret_cast<const uint16_t*>(row) + k0;
          for (; i + 16 <= kc; i += 16)
            _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
          for (; i < kc; ++i) d[i] = f16_to_f32(s[i]);
          break;
        }
        case WeightFormat::kMXFP4: {  // k0, kc multiples of 32
          const uint8_t* sc = w.scales + (n0 + r) * (w.in / mxfp4::kBlock) + k0 / mxfp4::kBlock;
          for (int64_t b = 0; b < kc / mxfp4::kBlock; ++b) {
            __m256i c = _mm256_shuffle_epi8(lut, unpack_nibbles(row + k0 / 2 + b * 16));
            __m512 half = _mm512_set1_ps(e8m0[sc[b]] * 0.5f);  // 2·E2M1 · 2^(byte−127) / 2, exact
            float* o = d + b * mxfp4::kBlock;
            _mm512_storeu_ps(o, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(c))), half));
            _mm512_storeu_ps(o + 16,
                             _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(c, 1))), half));
          }
          break;
        }
      }
    }
  }
};

// BF16 weights at M ≤ kGemvMaxRows (bf16_gemv.h's Bf16GemvTile): 32 bf16 per 64-byte load,
// widened by one shift (even columns) and one mask (odd columns), two FMAs per row of x.
struct Avx512GemvVec {
  using F = __m512;
  static constexpr int L = 16, kRegs = 32;
  static F zero() { return _mm512_setzero_ps(); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void widen(const uint16_t* p, F& even, F& odd) {
    const __m512i v = _mm512_loadu_si512(p);
    even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static float reduce(F v) { return _mm512_reduce_add_ps(v); }
};

struct Avx512W4A4 {
  static constexpr int MR = 4, NR = 3;

  template <int R, int C>
  static void tile(const QuantizedActivations& q, const int64_t* rows, const uint8_t* const* wc,
                   const uint8_t* const* ws, int64_t b0, int64_t nb, float* acc) {
    const float* e8m0 = e8m0_table();
    // Weight codes as unsigned 2·E2M1 + 12 ∈ [0, 24] for vpdpbusd (u8 × s8); the offset
    // 12·Σx is taken out by starting each block's accumulator at −12·Σx.
    const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    __m512 a[R][C];
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) a[i][j] = _mm512_setzero_ps();
    const int64_t end = b0 + nb;
    int64_t b = b0;
    for (; b + 1 < end; b += 2) {
      __m512i wu[C];
      __m512 wsv[C];
      for (int j = 0; j < C; ++j) {
        wu[j] = _mm512_shuffle_epi8(lut, unpack_nibbles_pair(wc[j] + b * 16));
        wsv[j] = pair_ps(e8m0[ws[j][b]], e8m0[ws[j][b + 1]]);
      }
      for (int i = 0; i < R; ++i) {
        const int64_t at = rows[i] * q.blocks + b;
        __m512i xv = _mm512_loadu_si512(q.codes.data() + rows[i] * q.k + b * 32);
        __m512 xs = pair_ps(q.scales[at], q.scales[at + 1]);
        __m512i init = _mm512_mask_set1_epi32(_mm512_maskz_set1_epi32(0x0001, -q.offsets[at]), 0x0100, -q.offsets[at + 1]);
        for (int j = 0; j < C; ++j) {
          __m512i d = _mm512_dpbusd_epi32(init, wu[j], xv);
          a[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(xs, wsv[j]), a[i][j]);
        }
      }
    }
    if (b < end) {  // odd block count: the upper half of each register is zero
      __m512i wu[C];
      __m512 wsv[C];
      for (int j = 0; j < C; ++j) {
        wu[j] = _mm512_zextsi256_si512(_mm256_shuffle_epi8(_mm512_castsi512_si256(lut), unpack_nibbles(wc[j] + b * 16)));
        wsv[j] = pair_ps(e8m0[ws[j][b]], 0.0f);
      }
      for (int i = 0; i < R; ++i) {
        const int64_t at = rows[i] * q.blocks + b;
        __m512i xv = _mm512_zextsi256_si512(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q.codes.data() + rows[i] * q.k + b * 32)));
        __m512 xs = pair_ps(q.scales[at], 0.0f);
        __m512i init = _mm512_maskz_set1_epi32(0x0001, -q.offsets[at]);
        for (int j = 0; j < C; ++j) {
          __m512i d = _mm512_dpbusd_epi32(init, wu[j], xv);
          a[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(xs, wsv[j]), a[i][j]);
        }
      }
    }
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) acc[i * C + j] = _mm512_reduce_add_ps(a[i][j]);
  }
};

}  // namespace

void quantize_activations_avx512(const float* x, int64_t M, int64_t K, mxfp4::ScaleMode mode, int64_t row_multiple,
                                 QuantizedActivations& q) {
  q.resize(M, K, row_multiple);
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512 two = _mm512_set1_ps(2.0f), four = _mm512_set1_ps(4.0f), twelve = _mm512_set1_ps(12.0f);
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  // One task per 32-block (a few tens of ns each), so a single decode row is split too.
#pragma omp parallel for schedule(static) if (M * q.blocks >= 256)
  for (int64_t mb = 0; mb < M * q.blocks; ++mb) {
    const int64_t m = mb / q.blocks, b = mb % q.blocks;
    const float* xb = x + m * K + b * mxfp4::kBlock;
    __m512 v[2] = {_mm512_loadu_ps(xb), _mm512_loadu_ps(xb + 16)};
    __m512 mx = _mm512_setzero_ps();
    for (int t = 0; t < 2; ++t) mx = _mm512_max_ps(_mm512_and_ps(v[t], abs_mask), mx);  // NaN operand -> mx
    const int e = mxfp4::scale_exponent(_mm512_reduce_max_ps(mx), mode);
    const __m512 inv = _mm512_set1_ps(mxfp4::exp2_int(-e));
    __m512i d[2];
    for (int t = 0; t < 2; ++t) {
      // mxfp4::quantize_e2m1 in doubled units (see the AVX2 quantizer).
      __m512 s = _mm512_mul_ps(v[t], inv);
      __m512 av = _mm512_and_ps(s, abs_mask);
      __mmask16 lt2 = _mm512_cmp_ps_mask(av, two, _CMP_LT_OQ), lt4 = _mm512_cmp_ps_mask(av, four, _CMP_LT_OQ);
      __m512 inv_step = _mm512_mask_mov_ps(_mm512_mask_mov_ps(half, lt4, one), lt2, two);
      __m512 dbl_step = _mm512_mask_mov_ps(_mm512_mask_mov_ps(four, lt4, two), lt2, one);
      __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(av, inv_step), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      __m512 dv = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(av, av, _CMP_ORD_Q),
                                      _mm512_min_ps(_mm512_mul_ps(r, dbl_step), twelve));
      __m512i di = _mm512_cvttps_epi32(dv);
      __mmask16 neg = _mm512_cmplt_epi32_mask(_mm512_castps_si512(s), _mm512_setzero_si512());
      d[t] = _mm512_mask_sub_epi32(di, neg, _mm512_setzero_si512(), di);
    }
    int8_t* out = q.codes.data() + m * K + b * mxfp4::kBlock;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(d[0]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), _mm512_cvtepi32_epi8(d[1]));
    q.scales[m * q.blocks + b] = mxfp4::exp2_int(e - 2);
    q.offsets[m * q.blocks + b] = 12 * _mm512_reduce_add_epi32(_mm512_add_epi32(d[0], d[1]));
  }
}

namespace {

// hi = bf16_rn(x) (truncated instead where rounding would overflow a finite x), as 16 bf16.
inline __m256i split_hi(__m512 v, __m512& hf) {
  __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
  hf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  const __mmask16 ovf = _mm512_fpclass_ps_mask(hf, 0x18) & ~_mm512_fpclass_ps_mask(v, 0x18);  // ±inf
  if (ovf) {
    h = _mm256_mask_blend_epi16(ovf, h, _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16)));
    hf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  return h;
}

// lo = bf16_rn(x − hi) (exact fp32 difference); 0 where it is NaN (x = ±inf or NaN).
inline __m256i split_lo(__m512 v, __m512 hf) {
  __m512 r = _mm512_sub_ps(v, hf);
  r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r, r, _CMP_ORD_Q), r);
  return (__m256i)_mm512_cvtneps_pbh(r);
}

}  // namespace

void split_activations_bf16_avx512(const float* x, int64_t M, int64_t K, SplitActivations& s) {
  s.rows = M;
  s.k = K;
  s.padded_rows = (M + 31) / 32 * 32;
  s.ksteps = (K + 31) / 32;
  const int64_t mblocks = s.padded_rows / 32;
  s.data.reset(new uint16_t[static_cast<size_t>(mblocks * s.ksteps * SplitActivations::kBlock)]);
  // Dword kp of a row's 32-column step (bf16 pair 2kp, 2kp+1) goes to dword kp·16 + mm of its
  // B tile (mm = the row within its 16-row half).
  const __m512i vindex = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(16));
#pragma omp parallel for schedule(static) if (mblocks * s.ksteps >= 64)
  for (int64_t t = 0; t < mblocks * s.ksteps; ++t) {
    const int64_t mb = t / s.ksteps, ks = t % s.ksteps, k0 = ks * 32;
    uint16_t* blk = s.data.get() + t * SplitActivations::kBlock;
    const int64_t kc = std::min<int64_t>(32, K - k0);
    const __mmask16 m0 = kc >= 16 ? 0xffff : static_cast<__mmask16>((1u << kc) - 1u);
    const __mmask16 m1 = kc >= 32 ? 0xffff : kc <= 16 ? 0 : static_cast<__mmask16>((1u << (kc - 16)) - 1u);
    for (int r = 0; r < 32; ++r) {
      const int64_t m = mb * 32 + r;
      __m512 v0 = _mm512_setzero_ps(), v1 = _mm512_setzero_ps();
      if (m < M) {
        v0 = _mm512_maskz_loadu_ps(m0, x + m * K + k0);
        v1 = _mm512_maskz_loadu_ps(m1, x + m * K + k0 + 16);
      }
      __m512 h0, h1;
      const __m256i hi0 = split_hi(v0, h0), hi1 = split_hi(v1, h1);
      const __m256i lo0 = split_lo(v0, h0), lo1 = split_lo(v1, h1);
      uint16_t* q = blk + (r / 16) * 512 + (r % 16) * 2;
      _mm512_i32scatter_epi32(q, vindex, _mm512_inserti64x4(_mm512_castsi256_si512(hi0), hi1, 1), 4);
      _mm512_i32scatter_epi32(q + 1024, vindex, _mm512_inserti64x4(_mm512_castsi256_si512(lo0), lo1, 1), 4);
    }
  }
}

void linear_w4a4_int8_avx512(const LinearWeight& w, const float* x, int64_t M, float* y) {
  QuantizedActivations q;
  quantize_activations_avx512(x, M, w.in, w.input_scale_mode, 1, q);
  w4a4_gemm<Avx512W4A4>(w, q, y);
}

void linear_avx512(const LinearWeight& w, const float* x, int64_t M, float* y) {
  if (w.format == WeightFormat::kMXFP4 && w.quantize_input) {
    if (M <= kGemvMaxRows) {
      linear_w4a4_gemv_avx512(w, x, M, y);
      return;
    }
    if (M >= kW4A4VnniMinRows && linear_w4a4_vnni_avx512(w, x, M, y)) return;
    linear_w4a4_int8_avx512(w, x, M, y);
    return;
  }
  if (w.format == WeightFormat::kBF16 && M <= kGemvMaxRows) {
    bf16_gemv<Bf16GemvTile<Avx512GemvVec>>(w, x, M, y);
    return;
  }
  float_gemm<Avx512Float>(w, x, M, y);
}

}  // namespace stave::cpu::kern
