// The operand expansions of the AMX-BF16 W4A4 kernel (kernels.h: activations_to_bf16_avx512,
// expand_mxfp4_bf16_rows_avx512), compiled for AVX-512 (F, BW, BF16) so that the tile driver
// (linear/w4a4_tile_gemm.h) also runs with emulated tiles on CPUs without AMX. Every Quark MXFP4
// value E2M1 · 2^e is exactly a bf16 number, so both expansions are exact.
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* "may be used uninitialized").
#if !defined(__clang__)  // clang has no such warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "backends/cpu/linear/kernels.h"

namespace stave::cpu::kern {
namespace {

// bf16 bits of the 16 E2M1 values (code 8 = −0), twice (vpermw indexes 32 words).
inline __m512i e2m1_bf16_table() {
  return _mm512_set_epi16((short)0xC0C0, (short)0xC080, (short)0xC040, (short)0xC000, (short)0xBFC0, (short)0xBF80,
                          (short)0xBF00, (short)0x8000, 0x40C0, 0x4080, 0x4040, 0x4000, 0x3FC0, 0x3F80, 0x3F00, 0x0000,
                          (short)0xC0C0, (short)0xC080, (short)0xC040, (short)0xC000, (short)0xBFC0, (short)0xBF80,
                          (short)0xBF00, (short)0x8000, 0x40C0, 0x4080, 0x4040, 0x4000, 0x3FC0, 0x3F80, 0x3F00, 0x0000);
}

// The 32 values of one packed 32-block (16 bytes, low nibble = even column) with scale byte sb,
// as bf16 in column order. Fast path (sb in [2, 252], where the exponent stays normal): each
// nibble looked up as the bf16 of its E2M1 value, then 2^(sb − 127) added to the exponent of the
// nonzero values. Otherwise by fp32 multiplication (exact; the bf16 conversion flushes what is
// denormal, as tdpbf16ps would ignore it anyway).
inline __m512i block_bf16(const uint8_t* packed, int sb, const float* e8m0) {
  const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(packed)));
  // dword j = byte j: word 2j = its low nibble (column 2j), word 2j + 1 = its high nibble.
  const __m512i idx = _mm512_and_si512(_mm512_or_si512(d, _mm512_slli_epi32(d, 12)), _mm512_set1_epi32(0x000F000F));
  const __m512i v = _mm512_permutexvar_epi16(idx, e2m1_bf16_table());
  if (sb >= 2 && sb <= 252) {
    const __m512i add = _mm512_set1_epi16(static_cast<short>((sb - 127) * 128));  // exponent step of a bf16 word
    return _mm512_mask_add_epi16(v, _mm512_test_epi16_mask(v, _mm512_set1_epi16(0x7fff)), v, add);
  }
  // bf16 → fp32 is a 16-bit shift; multiply by 2^(sb − 127) in fp32 and round back (exact or flushed).
  const __m512 s = _mm512_set1_ps(e8m0[sb]);
  const __m512 lo = _mm512_mul_ps(
      _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(v)), 16)), s);
  const __m512 hi = _mm512_mul_ps(
      _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(v, 1)), 16)), s);
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

}  // namespace

void activations_to_bf16_avx512(const QuantizedActivations& q, uint16_t* out) {
  // value = (2·E2M1) · 2^(e − 1) = code · (2 · scale), scale = 2^(e − 2): exact in fp32 and bf16.
  // Dword p of a row's 32 values (columns 2p, 2p + 1) goes to dword p·16 + (r % 16) of its B tile.
  const __m512i vindex = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(16));
#pragma omp parallel for schedule(static) if (q.padded_rows * q.blocks >= 256)
  for (int64_t rb = 0; rb < q.padded_rows * q.blocks; ++rb) {
    const int64_t r = rb / q.blocks, b = rb % q.blocks;
    const int8_t* c = q.codes.data() + r * q.k + b * 32;
    const __m512 s = _mm512_set1_ps(q.scales[r * q.blocks + b] * 2.0f);
    const __m512 lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)c))), s);
    const __m512 hi =
        _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(c + 16)))), s);
    uint16_t* tile = out + ((r / 32) * q.blocks + b) * 1024 + ((r % 32) / 16) * 512;  // kernels.h: B-tile blocks
    _mm512_i32scatter_epi32(reinterpret_cast<uint32_t*>(tile) + (r % 16), vindex,
                            (__m512i)_mm512_cvtne2ps_pbh(hi, lo), 4);
  }
}

void expand_mxfp4_bf16_rows_avx512(const LinearWeight& w, int64_t n0, int64_t kb, uint16_t* out) {
  const int64_t row_bytes = w.in / 2, blocks = w.in / 32;
  const uint8_t* codes = static_cast<const uint8_t*>(w.data);
  const float* e8m0 = e8m0_table();
  for (int64_t l = 0; l < 16; ++l) {
    const int64_t n = n0 + l;
    const __m512i v = n < w.out ? block_bf16(codes + n * row_bytes + kb * 16, w.scales[n * blocks + kb], e8m0)
                                : _mm512_setzero_si512();
    _mm512_storeu_si512(out + l * 32, v);
  }
}

}  // namespace stave::cpu::kern
