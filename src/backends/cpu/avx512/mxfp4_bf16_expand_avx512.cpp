// The operand expansions of the AMX-BF16 W4A4 kernel (kernels.h: activations_to_bf16_avx512,
// expand_mxfp4_bf16_tile_avx512), compiled for AVX-512 (F, BW, BF16) so that the tile driver
// (linear/w4a4_tile_gemm.h) also runs with emulated tiles on CPUs without AMX. Every Quark MXFP4
// value E2M1 · 2^e is exactly a bf16 number, so both expansions are exact. The weight tile code
// is the block expansion of linear_dpbf16_avx512.cpp (whose 16-row panel vectors are exactly a
// tdpbf16ps B tile), exported here; that file keeps its own inlined copy.
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* "may be used uninitialized").
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "backends/cpu/linear/kernels.h"

namespace stave::cpu::kern {
namespace {

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

}  // namespace

void activations_to_bf16_avx512(const QuantizedActivations& q, uint16_t* out) {
  // value = (2·E2M1) · 2^(e − 1) = code · (2 · scale), scale = 2^(e − 2): exact in fp32 and bf16.
#pragma omp parallel for schedule(static) if (q.padded_rows * q.blocks >= 256)
  for (int64_t rb = 0; rb < q.padded_rows * q.blocks; ++rb) {
    const int64_t r = rb / q.blocks, b = rb % q.blocks;
    const int8_t* c = q.codes.data() + r * q.k + b * 32;
    const __m512 s = _mm512_set1_ps(q.scales[r * q.blocks + b] * 2.0f);
    const __m512 lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)c))), s);
    const __m512 hi =
        _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(c + 16)))), s);
    uint16_t* dst = out + ((r / 32) * q.blocks + b) * 1024 + (r % 32) * 32;  // kernels.h: A-tile blocks
    _mm512_storeu_si512(dst, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
}

void expand_mxfp4_bf16_tile_avx512(const LinearWeight& w, int64_t n0, int64_t kb, uint32_t* out) {
  if (!expand_block_fast(w, n0, kb, out)) expand_block_slow(w, n0, kb, out);
}

}  // namespace stave::cpu::kern
