// Linear layers on AVX-512-BF16 (vdpbf16ps), fast precision: MXFP4 W4A4 and BF16 weights, one
// blocked driver (gemm below: 64-row weight strips expanded into a 32 KiB panel per 256-column
// K chunk, a 6 × 64 micro-kernel, OpenMP over strips × row blocks).
//
// MXFP4 W4A4. Every Quark MXFP4 value E2M1 · 2^e —
// the weight's and the MXFP4-QDQ'd activation's — is exactly a bf16 number (E2M1 has 2
// significant bits, bf16 8, and the same exponent range as fp32), and the product of two bf16
// numbers is exact in fp32. So the W4A4 product needs no per-block integer dot and rescale:
//  - the activation is quantized once per call (quantize_activations_avx512, bit-exact with
//    mxfp4::quantize_block) and stored row-major as bf16 (exact);
//  - per task and K chunk, a strip of 64 weight rows is expanded from packed MXFP4 (codes + E8M0
//    scales) into bf16 in the layout vdpbf16ps wants (one dword = a column pair of one row,
//    16 rows per vector), kept in L1 while every activation row of the task streams past;
//  - a 6 × 64 micro-kernel adds the exact products into fp32 accumulators across all of K.
// Numerics: each output is one fp32 chain of K exact products (two per vdpbf16ps step per lane)
// plus the bias, so the error is the fp32 accumulation of K terms (the int8 kernel: K/32 exact
// block sums). vdpbf16ps treats bf16 denormals as zero and flushes denormal results: values
// below 2^-126 (block scales at the bottom of E8M0's range) are lost, far inside fast
// precision's bounds. Exact precision never runs this (it uses the reference backend).
//
// BF16 weights. bf16 × bf16 is exact, but an activation rounded to bf16 is not (2^-9 per term,
// outside fast precision's bounds), so the activation is split into hi + lo
// (split_activations_bf16_avx512, the AMX-BF16 path's split) and each pair of columns costs two
// vdpbf16ps, W·hi then W·lo, into one fp32 chain of 2·K exact products: the numerics of
// linear_amx_bf16. Its gain over fp32 FMA on the widened weight could only be the blocking,
// not the instruction (two vdpbf16ps per 32 products = one FMA per 16); measured, it was not
// consistently faster, so the dispatch does not use it (kernels.h).
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* "may be used uninitialized").
#if !defined(__clang__)  // clang has no such warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "backends/cpu/linear/kernels.h"

namespace stave::cpu::kern {
namespace {

constexpr int MR = 6;             // activation rows per micro-tile
constexpr int NG = 4;             // 16-row weight groups per strip
constexpr int64_t NS = 16 * NG;   // weight rows (output columns) per strip
constexpr int64_t KC = 256;       // columns per K chunk (8 MXFP4 blocks)
constexpr int64_t KP = KC / 2;    // column pairs per chunk
constexpr int64_t kPanelDwords = NG * KP * 16;  // 32 KiB of packed bf16 pairs

// Block mb (row mb / blocks) of the quantized activation as bf16: value = (2·E2M1) · 2^(e − 1).
inline void activation_block_bf16(const QuantizedActivations& q, int64_t mb, uint16_t* out) {
  const int64_t m = mb / q.blocks, b = mb % q.blocks;
  const int8_t* c = q.codes.data() + m * q.k + b * 32;
  const __m512 s = _mm512_set1_ps(q.scales[mb] * 2.0f);  // 2^(e − 1), exact
  const __m512 lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)c))), s);
  const __m512 hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(c + 16)))), s);
  _mm512_storeu_si512(out + m * q.k + b * 32, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

// 16 packed bytes (one 32-block: low nibble = even column) -> 32 codes in column order.
inline __m256i unpack_nibbles(const uint8_t* p) {
  const __m128i m = _mm_set1_epi8(0x0f);
  __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
  return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
}

// One 32-block of 16 weight rows (row n0 + l, rows ≥ N as zeros) into the 16 panel vectors
// out[p·16 + l] = bf16 pair (2p, 2p + 1) of row l, by fp32 multiplication (exact) and a scatter.
// Used where a scale byte is outside the range of the fast path below.
void expand_block_slow(const LinearWeight& w, int64_t n0, int64_t kb, uint32_t* out) {
  const float* e8m0 = e8m0_table();
  const __m256i lut = _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12));
  const __m512i vindex = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(16));
  const int64_t row_bytes = w.in / 2, blocks = w.in / 32;
  const uint8_t* codes = static_cast<const uint8_t*>(w.data);
  for (int64_t l = 0; l < 16; ++l) {
    const int64_t n = n0 + l;
    __m512i v = _mm512_setzero_si512();
    if (n < w.out) {
      const __m256i c = _mm256_shuffle_epi8(lut, unpack_nibbles(codes + n * row_bytes + kb * 16));
      const __m512 half = _mm512_set1_ps(e8m0[w.scales[n * blocks + kb]] * 0.5f);  // 2·E2M1 · 2^e / 2, exact
      const __m512 lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(c))), half);
      const __m512 hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(c, 1))), half);
      v = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
    }
    _mm512_i32scatter_epi32(out + l, vindex, v, 4);
  }
}

// The same, fast: the 16 rows' packed bytes are transposed (byte p of row l = the code pair
// (2p, 2p + 1) of row l, which becomes dword l of vector p), each nibble looked up as the bf16
// of its E2M1 value, and the scale 2^(byte − 127) added to the exponent of the nonzero values.
// Needs every scale byte in [2, 252] (the exponent then stays normal); false otherwise.
bool expand_block_fast(const LinearWeight& w, int64_t n0, int64_t kb, uint32_t* out) {
  const int64_t row_bytes = w.in / 2, blocks = w.in / 32;
  const uint8_t* codes = static_cast<const uint8_t*>(w.data);
  alignas(64) int32_t sadd[16];
  __m128i r[16];
  for (int l = 0; l < 16; ++l) {
    const int64_t n = n0 + l;
    if (n < w.out) {
      const int sb = w.scales[n * blocks + kb];
      if (sb < 2 || sb > 252) return false;
      const int32_t e = (sb - 127) * 128;  // exponent step of a bf16 word
      sadd[l] = static_cast<int32_t>((static_cast<uint32_t>(e) & 0xffffu) | (static_cast<uint32_t>(e) << 16));
      r[l] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + n * row_bytes + kb * 16));
    } else {
      sadd[l] = 0;
      r[l] = _mm_setzero_si128();
    }
  }
  // 16 × 16 byte transpose: t[p] byte l = r[l] byte p.
  __m128i s8[16], s16[16], s32[16], t[16];
  for (int j = 0; j < 8; ++j) {
    s8[j] = _mm_unpacklo_epi8(r[2 * j], r[2 * j + 1]);      // word p (0..7): rows 2j, 2j+1
    s8[j + 8] = _mm_unpackhi_epi8(r[2 * j], r[2 * j + 1]);  // p 8..15
  }
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j) {
      s16[h * 8 + j] = _mm_unpacklo_epi16(s8[h * 8 + 2 * j], s8[h * 8 + 2 * j + 1]);      // p 8h + 0..3, rows 4j..
      s16[h * 8 + 4 + j] = _mm_unpackhi_epi16(s8[h * 8 + 2 * j], s8[h * 8 + 2 * j + 1]);  // p 8h + 4..7
    }
  // s16[q·4 + j]: dword i = byte p = 4q + i of rows 4j .. 4j + 3.
  for (int q = 0; q < 4; ++q)
    for (int h = 0; h < 2; ++h) {
      s32[q * 4 + h * 2] = _mm_unpacklo_epi32(s16[q * 4 + 2 * h], s16[q * 4 + 2 * h + 1]);  // p 4q, 4q+1; rows 8h..
      s32[q * 4 + h * 2 + 1] = _mm_unpackhi_epi32(s16[q * 4 + 2 * h], s16[q * 4 + 2 * h + 1]);  // p 4q+2, 4q+3
    }
  for (int q = 0; q < 4; ++q)
    for (int i = 0; i < 2; ++i) {
      t[4 * q + 2 * i] = _mm_unpacklo_epi64(s32[q * 4 + i], s32[q * 4 + 2 + i]);
      t[4 * q + 2 * i + 1] = _mm_unpackhi_epi64(s32[q * 4 + i], s32[q * 4 + 2 + i]);
    }
  // bf16 bits of the E2M1 values (code 8 = −0), twice (vpermw indexes 32 words).
  const __m512i table = _mm512_set_epi16(
      (short)0xC0C0, (short)0xC080, (short)0xC040, (short)0xC000, (short)0xBFC0, (short)0xBF80, (short)0xBF00,
      (short)0x8000, 0x40C0, 0x4080, 0x4040, 0x4000, 0x3FC0, 0x3F80, 0x3F00, 0x0000, (short)0xC0C0, (short)0xC080,
      (short)0xC040, (short)0xC000, (short)0xBFC0, (short)0xBF80, (short)0xBF00, (short)0x8000, 0x40C0, 0x4080,
      0x4040, 0x4000, 0x3FC0, 0x3F80, 0x3F00, 0x0000);
  const __m512i nib = _mm512_set1_epi32(0x000F000F), mag = _mm512_set1_epi16(0x7fff);
  const __m512i sv = _mm512_load_si512(sadd);
  for (int p = 0; p < 16; ++p) {
    const __m512i d = _mm512_cvtepu8_epi32(t[p]);  // dword l = packed byte p of row l
    const __m512i idx = _mm512_and_si512(_mm512_or_si512(d, _mm512_slli_epi32(d, 12)), nib);
    __m512i v = _mm512_permutexvar_epi16(idx, table);
    v = _mm512_mask_add_epi16(v, _mm512_test_epi16_mask(v, mag), v, sv);
    _mm512_store_si512(out + p * 16, v);
  }
  return true;
}

// Expands weight rows n0 .. n0 + 64 (rows ≥ N as zeros), columns k0 .. k0 + kc (multiples of
// 32) into panel: dword (g·KP + p)·16 + l = bf16 pair (2p, 2p + 1) of row n0 + 16g + l.
void expand_panel(const LinearWeight& w, int64_t n0, int64_t k0, int64_t kc, uint32_t* panel) {
  for (int g = 0; g < NG; ++g)
    for (int64_t b = 0; b < kc / 32; ++b) {
      uint32_t* out = panel + (g * KP + b * 16) * 16;
      if (!expand_block_fast(w, n0 + 16 * g, k0 / 32 + b, out)) expand_block_slow(w, n0 + 16 * g, k0 / 32 + b, out);
    }
}

// y[R rows][64 columns] += a[R rows][2·pairs] · panelᵀ; columns past `mask` are left alone.
template <int R>
void micro(const uint16_t* a, int64_t lda, const uint32_t* panel, int64_t pairs, float* y, int64_t ldy,
           const __mmask16* mask) {
  __m512 c[R][NG];
  for (int i = 0; i < R; ++i)
    for (int g = 0; g < NG; ++g) c[i][g] = _mm512_maskz_loadu_ps(mask[g], y + i * ldy + g * 16);
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh bv[NG];
    for (int g = 0; g < NG; ++g) bv[g] = (__m512bh)_mm512_load_si512(panel + (g * KP + p) * 16);
    for (int i = 0; i < R; ++i) {
      int32_t pair;
      std::memcpy(&pair, a + i * lda + 2 * p, 4);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
      for (int g = 0; g < NG; ++g) c[i][g] = _mm512_dpbf16_ps(c[i][g], av, bv[g]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int g = 0; g < NG; ++g) _mm512_mask_storeu_ps(y + i * ldy + g * 16, mask[g], c[i][g]);
}

void micro_rows(int rows, const uint16_t* a, int64_t lda, const uint32_t* panel, int64_t pairs, float* y,
                int64_t ldy, const __mmask16* mask) {
  switch (rows) {
    case 6: micro<6>(a, lda, panel, pairs, y, ldy, mask); break;
    case 5: micro<5>(a, lda, panel, pairs, y, ldy, mask); break;
    case 4: micro<4>(a, lda, panel, pairs, y, ldy, mask); break;
    case 3: micro<3>(a, lda, panel, pairs, y, ldy, mask); break;
    case 2: micro<2>(a, lda, panel, pairs, y, ldy, mask); break;
    default: micro<1>(a, lda, panel, pairs, y, ldy, mask); break;
  }
}

// Tasks: strips of 64 output columns × blocks of activation rows (split only when there are
// too few strips to keep every thread busy), K walked in chunks of 256 columns. Op provides
//   void prepare(int64_t mb);  // activation work item mb < prepare_items (one omp for)
//   void expand(int64_t n0, int64_t k0, int64_t kc, uint32_t* panel);
//   void micro(int rows, int64_t m, int64_t k0, const uint32_t* panel, int64_t pairs, float* y,
//              int64_t ldy, const __mmask16* mask);
// The activation is prepared inside the same parallel region (one fork/join less: on a loaded
// machine each one can cost a scheduler slice).
template <class Op>
void gemm(const LinearWeight& w, Op& op, int64_t prepare_items, int64_t M, float* y) {
  const int64_t N = w.out, K = w.in;
  const int64_t strips = (N + NS - 1) / NS;
  const int64_t threads = omp_get_max_threads();
  const int64_t mtiles = (M + MR - 1) / MR;
  const int64_t mgroups = std::clamp<int64_t>((4 * threads + strips - 1) / strips, 1, mtiles);
  const int64_t mc = (mtiles + mgroups - 1) / mgroups * MR;
  const int64_t tasks = strips * ((M + mc - 1) / mc);
#pragma omp parallel
  {
    alignas(64) uint32_t panel[kPanelDwords];  // 32 KiB on the thread's stack
#pragma omp for schedule(static)
    for (int64_t i = 0; i < prepare_items; ++i) op.prepare(i);
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t n0 = (t % strips) * NS, cols = std::min(NS, N - n0);
      const int64_t m0 = (t / strips) * mc, m1 = std::min(M, m0 + mc);
      __mmask16 mask[NG];
      for (int g = 0; g < NG; ++g) {
        const int64_t c = std::clamp<int64_t>(cols - 16 * g, 0, 16);
        mask[g] = static_cast<__mmask16>((1u << c) - 1u);
      }
      for (int64_t m = m0; m < m1; ++m)
        for (int64_t j = 0; j < cols; ++j) y[m * N + n0 + j] = w.bias ? w.bias[n0 + j] : 0.0f;
      for (int64_t k0 = 0; k0 < K; k0 += KC) {
        const int64_t kc = std::min(KC, K - k0);
        op.expand(n0, k0, kc, panel);
        for (int64_t m = m0; m < m1; m += MR)
          op.micro(static_cast<int>(std::min<int64_t>(MR, m1 - m)), m, k0, panel, (kc + 1) / 2, y + m * N + n0, N,
                   mask);
      }
    }
  }
}

struct W4A4Op {
  const LinearWeight& w;
  const QuantizedActivations& q;
  uint16_t* xa;  // [M][K] bf16
  void prepare(int64_t mb) { activation_block_bf16(q, mb, xa); }
  void expand(int64_t n0, int64_t k0, int64_t kc, uint32_t* panel) { expand_panel(w, n0, k0, kc, panel); }
  void micro(int rows, int64_t m, int64_t k0, const uint32_t* panel, int64_t pairs, float* y, int64_t ldy,
             const __mmask16* mask) {
    micro_rows(rows, xa + m * w.in + k0, w.in, panel, pairs, y, ldy, mask);
  }
};

// ---- BF16 weights (W16A16): the activation split into bf16 hi + lo --------------------------

// y[R rows][64 columns] += (hi + lo)[R rows][2·pairs] · panelᵀ, hi and lo read from the
// SplitActivations layout (kernels.h): the pair (2p, 2p + 1) of row r at step s is the dword
// block(r / 32, s) + part·1024 + ((r % 32) / 16)·512 + p·32 + (r % 16)·2.
template <int R>
void micro_split(const SplitActivations& s, int64_t m, int64_t k0, const uint32_t* panel, int64_t pairs, float* y,
                 int64_t ldy, const __mmask16* mask) {
  const uint16_t* row[R];
  for (int i = 0; i < R; ++i) {
    const int64_t r = m + i;
    row[i] = s.block(r / 32, k0 / 32) + ((r % 32) / 16) * 512 + (r % 16) * 2;
  }
  __m512 c[R][NG];
  for (int i = 0; i < R; ++i)
    for (int g = 0; g < NG; ++g) c[i][g] = _mm512_maskz_loadu_ps(mask[g], y + i * ldy + g * 16);
  for (int64_t p = 0; p < pairs; ++p) {
    const int64_t at = (p / 16) * SplitActivations::kBlock + (p % 16) * 32;
    __m512bh bv[NG];
    for (int g = 0; g < NG; ++g) bv[g] = (__m512bh)_mm512_load_si512(panel + (g * KP + p) * 16);
    for (int i = 0; i < R; ++i) {
      int32_t hi, lo;
      std::memcpy(&hi, row[i] + at, 4);
      std::memcpy(&lo, row[i] + at + 1024, 4);
      const __m512bh h = (__m512bh)_mm512_set1_epi32(hi), l = (__m512bh)_mm512_set1_epi32(lo);
      for (int g = 0; g < NG; ++g) c[i][g] = _mm512_dpbf16_ps(c[i][g], h, bv[g]);
      for (int g = 0; g < NG; ++g) c[i][g] = _mm512_dpbf16_ps(c[i][g], l, bv[g]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int g = 0; g < NG; ++g) _mm512_mask_storeu_ps(y + i * ldy + g * 16, mask[g], c[i][g]);
}

// Weight rows n0 .. n0 + 64 (rows ≥ N and columns ≥ K as zeros), columns k0 .. k0 + kc, into
// the panel layout of expand_panel (bf16 already: a masked load and a scatter per 32 columns).
void expand_panel_bf16(const LinearWeight& w, int64_t n0, int64_t k0, int64_t kc, uint32_t* panel) {
  const __m512i vindex = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(16));
  const uint16_t* data = static_cast<const uint16_t*>(w.data);
  for (int64_t r = 0; r < NS; ++r) {
    const int64_t n = n0 + r;
    uint32_t* base = panel + (r / 16) * KP * 16 + (r % 16);
    for (int64_t b = 0; b * 32 < kc; ++b) {
      const int64_t cnt = std::min<int64_t>(32, kc - b * 32);
      const __mmask32 mk = cnt == 32 ? 0xffffffffu : static_cast<__mmask32>((1u << cnt) - 1u);
      const __m512i v = n < w.out ? _mm512_maskz_loadu_epi16(mk, data + n * w.in + k0 + b * 32) : _mm512_setzero_si512();
      _mm512_i32scatter_epi32(base + b * 16 * 16, vindex, v, 4);
    }
  }
}

struct Bf16SplitOp {
  const LinearWeight& w;
  const SplitActivations& s;
  void prepare(int64_t) {}
  void expand(int64_t n0, int64_t k0, int64_t kc, uint32_t* panel) { expand_panel_bf16(w, n0, k0, kc, panel); }
  void micro(int rows, int64_t m, int64_t k0, const uint32_t* panel, int64_t pairs, float* y, int64_t ldy,
             const __mmask16* mask) {
    switch (rows) {
      case 6: micro_split<6>(s, m, k0, panel, pairs, y, ldy, mask); break;
      case 5: micro_split<5>(s, m, k0, panel, pairs, y, ldy, mask); break;
      case 4: micro_split<4>(s, m, k0, panel, pairs, y, ldy, mask); break;
      case 3: micro_split<3>(s, m, k0, panel, pairs, y, ldy, mask); break;
      case 2: micro_split<2>(s, m, k0, panel, pairs, y, ldy, mask); break;
      default: micro_split<1>(s, m, k0, panel, pairs, y, ldy, mask); break;
    }
  }
};

}  // namespace

bool linear_w4a4_bf16_avx512(const LinearWeight& w, const float* x, int64_t M, float* y) {
  if (w.format != WeightFormat::kMXFP4 || !w.quantize_input || M < 1) return false;
  count_w4a4_bf16_call();
  QuantizedActivations q;
  quantize_activations_avx512(x, M, w.in, w.input_scale_mode, 1, q);
  std::unique_ptr<uint16_t[]> xa(new uint16_t[static_cast<size_t>(M * w.in)]);
  W4A4Op op{w, q, xa.get()};
  gemm(w, op, M * q.blocks, M, y);
  return true;
}

bool linear_bf16_split_avx512(const LinearWeight& w, const float* x, int64_t M, float* y) {
  if (w.format != WeightFormat::kBF16 || M < 1) return false;
  count_bf16_split_call();
  SplitActivations s;
  split_activations_bf16_avx512(x, M, w.in, s);
  Bf16SplitOp op{w, s};
  gemm(w, op, 0, M, y);
  return true;
}

}  // namespace stave::cpu::kern
