// linear_amx: the AMX dispatch (BF16 weights here; MXFP4 W4A4 from kW4A4AmxBf16MinRows rows on
// linear_w4a4_amx_bf16.cpp, or with STAVE_CPU_W4A4_AMX=int8 on the AMX-INT8 kernel below).
//
// AMX-INT8 W4A4 kernel (linear_w4a4_int8_amx). Each 32-block is one tdpbssd step (K = 32 bytes): the tile holds the exact int32 block dots of 16 activation rows × 16 weight rows, which are
// then scaled by 2^(e_x − 2)·2^(e_w) and added in fp32 — the same arithmetic as the VNNI kernel,
// with the integer work on the tile unit. Weights stay packed in the model; per task (32 weight
// rows) they are unpacked once into the VNNI tile layout in a per-thread scratch (K bytes per
// row, the size of one unpacked row group, reused for every activation row pair).
//
// AMX-BF16 for BF16 weights with M ≥ 16 (linear_amx_bf16; driver in linear/bf16_tile_gemm.h):
// the fp32 activation is split once into hi = bf16_rn(x) and lo = bf16_rn(x − hi) (~16
// significant bits, |x − hi − lo| ≤ 2^-16·|x|), and each 32-deep step runs tdpbf16ps twice into
// the same fp32 C tiles (W·hi, then W·lo) — the numerics of the CUDA fast path (split_bf16).
// BF16 weights are used as stored (exact); bf16 × bf16 products are exact in fp32, so the error
// is the split (2^-16 relative per term) plus the fp32 accumulation of 2·K terms in one chain.
// tdpbf16ps treats denormal inputs as zero and flushes denormal results to zero (so do the
// split's conversions): a term or partial sum below 2^-126 in magnitude is lost, far inside the
// fast path's tolerance.
// fp32 / f16 weights and W4A16 use the AVX-512 kernels (linear_amx returns false).
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* "may be used uninitialized").
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "backends/cpu/amx/amx_bf16_tiles.h"
#include "backends/cpu/linear/bf16_tile_gemm.h"
#include "backends/cpu/linear/kernels.h"

namespace stave::cpu::kern {
namespace {

// Tiles: 0..3 = C (16×16 int32) for row halves × column halves, 4,5 = A (16 rows × 32 codes),
// 6,7 = B (8 rows × 16 columns × 4 codes: the VNNI layout of 16 weight rows × 32 codes).
void configure_tiles() {
  AmxTileConfig cfg;
  cfg.palette_id = 1;
  for (int t = 0; t < 4; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  for (int t = 4; t < 6; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 32;
  for (int t = 6; t < 8; ++t) cfg.rows[t] = 8, cfg.colsb[t] = 64;
  _tile_loadconfig(&cfg);
}

inline __m256i unpack_nibbles(const uint8_t* p) {
  const __m128i m = _mm_set1_epi8(0x0f);
  __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
  return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
}

}  // namespace

bool linear_amx_bf16(const LinearWeight& w, const float* x, int64_t M, float* y) {
  if (w.format != WeightFormat::kBF16 || M < 16) return false;
  SplitActivations s;
  split_activations_bf16_avx512(x, M, w.in, s);
  bf16_tile_gemm<AmxBf16Tiles>(w, s, M, y);
  count_amx_bf16_call();
  return true;
}

bool linear_amx(const LinearWeight& w, const float* x, int64_t M, float* y) {
  if (w.format == WeightFormat::kBF16) return linear_amx_bf16(w, x, M, y);
  if (w.format == WeightFormat::kMXFP4 && w.quantize_input && M >= kW4A4AmxBf16MinRows)
    return w4a4_amx_bf16_enabled() ? linear_w4a4_amx_bf16(w, x, M, y) : linear_w4a4_int8_amx(w, x, M, y);
  return false;
}

bool linear_w4a4_int8_amx(const LinearWeight& w, const float* x, int64_t M, float* y) {
  if (!(w.format == WeightFormat::kMXFP4 && w.quantize_input) || M < 16) return false;
  const int64_t N = w.out, K = w.in;
  QuantizedActivations q;
  quantize_activations_avx512(x, M, K, w.input_scale_mode, 32, q);
  const int64_t nb = q.blocks, row_bytes = K / 2;
  const int64_t npairs = (N + 31) / 32, mpairs = q.padded_rows / 32;
  const float* e8m0 = e8m0_table();
  const uint8_t* wcodes = static_cast<const uint8_t*>(w.data);
  const __m256i lut = _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12));
#pragma omp parallel
  {
    configure_tiles();
    // bt[b][half][r][c]: dword r (codes 4r..4r+3) of weight row n0 + 16·half + c, block b.
    std::vector<int32_t> bt(static_cast<size_t>(nb * 2 * 8 * 16));
    std::vector<float> wsc(static_cast<size_t>(nb * 32));  // 2^(e_w) per block and column
    alignas(64) int32_t cbuf[32 * 32];
    alignas(64) float acc[32 * 32];
#pragma omp for schedule(dynamic)
    for (int64_t p = 0; p < npairs; ++p) {
      const int64_t n0 = p * 32;
      for (int c = 0; c < 32; ++c) {
        const int64_t n = n0 + c;
        const int half = c / 16, col = c % 16;
        for (int64_t b = 0; b < nb; ++b) {
          alignas(32) int32_t dw[8] = {};
          float s = 0.0f;
          if (n < N) {
            __m256i codes = _mm256_shuffle_epi8(lut, unpack_nibbles(wcodes + n * row_bytes + b * 16));
            _mm256_store_si256(reinterpret_cast<__m256i*>(dw), codes);
            s = e8m0[w.scales[n * nb + b]];
          }
          int32_t* dst = bt.data() + (b * 2 + half) * 128;
          for (int r = 0; r < 8; ++r) dst[r * 16 + col] = dw[r];
          wsc[b * 32 + c] = s;
        }
      }
      for (int64_t mp = 0; mp < mpairs; ++mp) {
        const int64_t m0 = mp * 32;
        std::memset(acc, 0, sizeof acc);
        for (int64_t b = 0; b < nb; ++b) {
          _tile_zero(0);
          _tile_zero(1);
          _tile_zero(2);
          _tile_zero(3);
          _tile_loadd(4, q.codes.data() + m0 * K + b * 32, K);
          _tile_loadd(5, q.codes.data() + (m0 + 16) * K + b * 32, K);
          _tile_loadd(6, bt.data() + (b * 2) * 128, 64);
          _tile_loadd(7, bt.data() + (b * 2 + 1) * 128, 64);
          _tile_dpbssd(0, 4, 6);
          _tile_dpbssd(1, 4, 7);
          _tile_dpbssd(2, 5, 6);
          _tile_dpbssd(3, 5, 7);
          _tile_stored(0, cbuf, 128);
          _tile_stored(1, cbuf + 16, 128);
          _tile_stored(2, cbuf + 16 * 32, 128);
          _tile_stored(3, cbuf + 16 * 32 + 16, 128);
          const __m512 ws0 = _mm512_loadu_ps(wsc.data() + b * 32), ws1 = _mm512_loadu_ps(wsc.data() + b * 32 + 16);
          for (int r = 0; r < 32; ++r) {
            const __m512 xs = _mm512_set1_ps(q.scales[(m0 + r) * nb + b]);
            float* ar = acc + r * 32;
            const int32_t* cr = cbuf + r * 32;
            _mm512_store_ps(ar, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cr)), _mm512_mul_ps(xs, ws0),
                                                _mm512_load_ps(ar)));
            _mm512_store_ps(ar + 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cr + 16)),
                                                     _mm512_mul_ps(xs, ws1), _mm512_load_ps(ar + 16)));
          }
        }
        for (int r = 0; r < 32 && m0 + r < M; ++r)
          for (int c = 0; c < 32 && n0 + c < N; ++c)
            y[(m0 + r) * N + n0 + c] = acc[r * 32 + c] + (w.bias ? w.bias[n0 + c] : 0.0f);
      }
    }
    _tile_release();
  }
  return true;
}

}  // namespace stave::cpu::kern
