// MXFP4 W4A4 prefill on AVX-512 VNNI (vpdpbusd), fast precision, register-blocked: the exact
// integer 32-block dots stay in registers and each is rescaled by one cvt + one FMA.
//
// Layout: a vector lane is an activation row (16 rows per vector), so each vpdpbusd multiplies
// 4 deep × 16 rows of activation codes by one broadcast dword (4 codes) of one weight row
// (= output column). The k order inside a dword is any order both operands share: here a
// 128-deep quad (4 blocks) of a weight row is its 64 packed bytes, taken as the low nibbles
// (even columns, dwords 0..15) then the high nibbles (odd columns, dwords 16..31), so the weight
// is expanded by an and, a shift and two vpshufb per 128 codes, with no transposition. Block bl
// of a quad is dwords 4bl..4bl+3 and 16+4bl..16+4bl+3.
//  - Activations: quantized once per call (quantize_activations_avx512, bit-exact with
//    mxfp4::quantize_block), then per 16-row group and quad rearranged into that order as 32
//    vectors of 16 rows (even codes, odd codes; a vpmovwb deinterleave and a scatter per row
//    and quad), with the block scales 2^(e − 2) and the offsets −12·Σ codes as 16-row vectors.
//  - Weights: a strip of NS rows (output columns) × KQ quads is expanded per task and K chunk
//    to unsigned codes 2·E2M1 + 12 ∈ [0, 24] (u8 operand of vpdpbusd; the signed activation
//    codes are the s8 one), reused by every activation row of the task.
//  - Micro-kernel: R 16-row groups × C columns; per block, each int32 accumulator starts at the
//    activation's −12·Σx (which takes the +12 out), takes 8 vpdpbusd, then is rescaled into an
//    fp32 accumulator. Every scale is a power of two, so the rescale is done in the integer
//    domain where it can: per micro-tile and K chunk, with B = (least activation exponent of its
//    rows) + (least weight exponent of its columns), the block dot is shifted left by
//    (e_x − min) + (e_w − min) (a per-lane vpsllvd), converted, and added (vaddps) to a chunk
//    sum in units of 2^B, which is scaled by 2^B (vscalefps) and added to the output's sum at the
//    chunk's end. That keeps the FMA pipes to vpdpbusd (cvt + mul + FMA per block cost ~17 % of
//    the time at 512 rows, one thread). The shift needs a spread of at most kMaxShift:
//    |dot| ≤ 4608 < 2^13, so the shifted dot stays below 2^31 and converts exactly (13
//    significant bits). A tile whose exponents spread wider (or with a non-normal activation
//    scale other than an all-zero block's, or a NaN weight scale) takes the plain path: cvt,
//    scale product, FMA.
// Numerics: each block's integer dot is exact (|Σ| ≤ 4608), the scale product is a power of
// two, so an output is a sum over K chunks (256 deep) of fp32 chains of ≤ 8 exact block terms,
// the bias added after: K/32 + K/256 + 1 roundings, within the bound of the other int8 W4A4
// kernels (K/32 + a few terms). Both rescale paths add the same exact terms in the same order
// and scaling a chain by 2^B commutes with its roundings, so the two give the same bits (and a
// row's output does not depend on the other rows of its tile) unless a term or partial sum is
// below fp32's normal range (2^-126) in original units, where they differ by subnormal rounding.
// Exact precision never runs this (it uses the reference backend).
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* "may be used uninitialized").
#if !defined(__clang__)  // clang has no such warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "backends/cpu/linear/kernels.h"
#include "backends/cpu/linear/w4a4_strip_tasks.h"

namespace stave::cpu::kern {
namespace {

constexpr int R = 2;                   // 16-row activation groups per micro-tile (32 rows)
constexpr int C = 6;                   // output columns per micro-tile
constexpr int64_t NS = 48;             // output columns per task strip
constexpr int64_t KQ = 2;              // 128-deep quads per K chunk (256 columns)
constexpr int64_t kWpCol = KQ * 128;   // panel bytes per output column
constexpr int64_t kWsCol = KQ * 4;     // panel scales per output column
constexpr int64_t kMaxTaskGroups = 32;  // 512 rows per task at most (accumulators stay in L2)
constexpr int64_t kChunkBlocks = 4 * KQ;
constexpr int kMaxShift = 18;           // 4608 · 2^18 < 2^31
constexpr int kWide = 1 << 20;          // exponent spread that forces the plain path

struct alignas(64) Line {
  int8_t b[64];
};

// The quantized activation in the kernel's order (see the top of the file).
struct VnniActivations {
  int64_t groups = 0, quads = 0, blocks = 0;
  std::vector<Line> codes;       // [groups][quads][32]: line d, lane l = 4 codes of row 16g + l
  std::vector<float> scales;     // [groups][blocks][16]: 2^(e − 2) (0 for padding rows)
  std::vector<int32_t> offsets;  // [groups][blocks][16]: −12·Σ codes
  std::vector<int32_t> exps;     // [groups][blocks][16]: e − 2 (the scale's exponent; 0 for padding)
  // [groups][chunks]: least and greatest exps of the group's rows over a K chunk; (kWide, −kWide)
  // style spread when a scale is not a normal fp32 number (then the plain path runs).
  std::vector<int32_t> emin, emax;
  int64_t chunks = 0;
};

// The biased exponent field of an fp32 activation scale (0: zero or subnormal, 255: inf / NaN).
int32_t exponent_field(float scale) {
  uint32_t bits;
  std::memcpy(&bits, &scale, 4);
  return static_cast<int32_t>((bits >> 23) & 0xff);
}

// Whether block b of row r quantized to all-zero codes (its dot is 0 whatever the shift).
bool zero_block(const QuantizedActivations& q, int64_t r, int64_t b) {
  const int8_t* c = q.codes.data() + r * q.k + b * 32;
  return std::all_of(c, c + 32, [](int8_t v) { return v == 0; });
}

// emin/emax of group g from its real rows (rows < M). An all-zero block (its scale is 2^-129,
// not a normal fp32 number) is left out; another non-normal scale forces the plain path.
void group_exponents(const QuantizedActivations& q, int64_t g, int64_t M, VnniActivations& a) {
  for (int64_t ch = 0; ch < a.chunks; ++ch) {
    int32_t lo = kWide, hi = -kWide;
    for (int64_t r = g * 16; r < std::min(M, g * 16 + 16); ++r)
      for (int64_t b = ch * kChunkBlocks; b < std::min(a.blocks, (ch + 1) * kChunkBlocks); ++b) {
        const int32_t field = exponent_field(q.scales[r * a.blocks + b]);
        if (field == 0 && zero_block(q, r, b)) continue;
        if (field == 0 || field == 255) {
          lo = -kWide;
          hi = kWide;
        } else {
          lo = std::min(lo, field - 127);
          hi = std::max(hi, field - 127);
        }
      }
    a.emin[g * a.chunks + ch] = lo;
    a.emax[g * a.chunks + ch] = hi;
  }
}

// Row r of q into a (codes of quad Q: even columns to lines 0..15, odd ones to 16..31).
void prepare_row(const QuantizedActivations& q, int64_t r, VnniActivations& a) {
  const int64_t g = r / 16, l = r % 16;
  const __m512i vindex = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(16));
  const int8_t* row = q.codes.data() + r * q.k;
  for (int64_t Q = 0; Q < a.quads; ++Q) {
    const int64_t n = std::min<int64_t>(128, q.k - Q * 128);  // a multiple of 32
    const __mmask64 m0 = n >= 64 ? ~0ull : (1ull << n) - 1;
    const __mmask64 m1 = n >= 128 ? ~0ull : n <= 64 ? 0ull : (1ull << (n - 64)) - 1;
    const __m512i v0 = _mm512_maskz_loadu_epi8(m0, row + Q * 128), v1 = _mm512_maskz_loadu_epi8(m1, row + Q * 128 + 64);
    const __m512i even = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8(v0)), _mm512_cvtepi16_epi8(v1), 1);
    const __m512i odd = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8(_mm512_srli_epi16(v0, 8))),
                                           _mm512_cvtepi16_epi8(_mm512_srli_epi16(v1, 8)), 1);
    int32_t* base = reinterpret_cast<int32_t*>(a.codes.data() + (g * a.quads + Q) * 32) + l;
    _mm512_i32scatter_epi32(base, vindex, even, 4);
    _mm512_i32scatter_epi32(base + 16 * 16, vindex, odd, 4);
  }
  for (int64_t b = 0; b < a.blocks; ++b) {
    a.scales[(g * a.blocks + b) * 16 + l] = q.scales[r * a.blocks + b];
    a.offsets[(g * a.blocks + b) * 16 + l] = -q.offsets[r * a.blocks + b];
    a.exps[(g * a.blocks + b) * 16 + l] = exponent_field(q.scales[r * a.blocks + b]) - 127;
  }
}

// One strip's expanded K chunk: codes, scales, and per C-column tile the exponent range.
struct Panel {
  // wp[c·kWpCol + qi·128 + j] = unsigned code (2·E2M1 + 12) of row n0 + c, quad q0 + qi, low
  // nibble of packed byte j (j < 64) or high nibble of byte j − 64.
  alignas(64) uint8_t wp[NS * kWpCol];
  alignas(64) float ws[NS * kWsCol];  // 2^e of column c's block j at c·kWsCol + j
  alignas(64) int32_t wsh[NS * kWsCol];  // e − (least e of c's tile), 0 for rows ≥ N
  int32_t tmin[NS / C], tspread[NS / C];  // per tile: least e, greatest − least (kWide: NaN scale)
};

// Weight rows n0 .. n0 + NS (rows ≥ N as zeros), quads q0 .. q0 + nq, into the panel.
void expand_panel(const LinearWeight& w, int64_t n0, int64_t q0, int64_t nq, Panel& pn) {
  uint8_t* wp = pn.wp;
  float* ws = pn.ws;
  const float* e8m0 = e8m0_table();
  const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
  const __m512i nib = _mm512_set1_epi8(0x0f);
  const int64_t row_bytes = w.in / 2, blocks = w.in / 32;
  const int64_t nb = std::min<int64_t>(4 * nq, blocks - 4 * q0);
  const uint8_t* codes = static_cast<const uint8_t*>(w.data);
  for (int64_t c = 0; c < NS; ++c) {
    const int64_t n = n0 + c;
    uint8_t* out = wp + c * kWpCol;
    if (n >= w.out) {
      std::memset(out, 0, static_cast<size_t>(nq * 128));
      for (int64_t j = 0; j < nb; ++j) ws[c * kWsCol + j] = 0.0f;
      continue;
    }
    for (int64_t qi = 0; qi < nq; ++qi) {
      const int64_t bytes = std::min<int64_t>(64, row_bytes - (q0 + qi) * 64);
      const __mmask64 mk = bytes >= 64 ? ~0ull : (1ull << bytes) - 1;
      const __m512i v = _mm512_maskz_loadu_epi8(mk, codes + n * row_bytes + (q0 + qi) * 64);
      _mm512_store_si512(out + qi * 128, _mm512_shuffle_epi8(lut, _mm512_and_si512(v, nib)));
      _mm512_store_si512(out + qi * 128 + 64, _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), nib)));
    }
    const uint8_t* sc = w.scales + n * blocks + 4 * q0;
    for (int64_t j = 0; j < nb; ++j) ws[c * kWsCol + j] = e8m0[sc[j]];
    // The scale bytes, unused slots repeating the first, for the tile ranges below.
    for (int64_t j = 0; j < kWsCol; ++j) pn.wsh[c * kWsCol + j] = sc[j < nb ? j : 0];
  }
  // Per tile: least and greatest byte over its real columns (columns ≥ N copy the tile's first,
  // which is real), then wsh = byte − least. A tile is 3 vectors of 16 (C · kWsCol = 48).
  static_assert(C * kWsCol == 48, "a tile's scale slots are three vectors");
  for (int64_t c = std::max<int64_t>(0, w.out - n0); c < NS; ++c)
    std::memcpy(pn.wsh + c * kWsCol, pn.wsh + (c / C) * C * kWsCol, kWsCol * sizeof(int32_t));
  for (int64_t t = 0; t < NS / C; ++t) {
    int32_t* e = pn.wsh + t * C * kWsCol;
    const __m512i v0 = _mm512_load_si512(e), v1 = _mm512_load_si512(e + 16), v2 = _mm512_load_si512(e + 32);
    const int32_t lo = _mm512_reduce_min_epi32(_mm512_min_epi32(_mm512_min_epi32(v0, v1), v2));
    const int32_t hi = _mm512_reduce_max_epi32(_mm512_max_epi32(_mm512_max_epi32(v0, v1), v2));
    pn.tmin[t] = lo - 127;
    pn.tspread[t] = hi == 255 ? kWide : hi - lo;  // 255 = NaN: the plain path
    const __m512i l = _mm512_set1_epi32(lo);
    _mm512_store_si512(e, _mm512_sub_epi32(v0, l));
    _mm512_store_si512(e + 16, _mm512_sub_epi32(v1, l));
    _mm512_store_si512(e + 32, _mm512_sub_epi32(v2, l));
  }
}

// Block BL of one quad: fa[i][c] += (exact dot of group i's rows with column c) · scales.
// xq: group 0's 32 lines of the quad (groups xt_gs lines apart); wq: column 0's 128 panel
// bytes of the quad (columns kWpCol apart); xo, xs: group 0's vectors of the block (xs_gs
// apart); wsj: column 0's scale of the block (columns kWsCol apart).
// SHIFT: the integer-domain rescale (xs then holds the exps, wsj the panel's wsh, amin the
// tile's least activation exponent); otherwise cvt, scale product and FMA.
template <int RR, int BL, bool SHIFT>
inline __attribute__((always_inline)) void block(const Line* xq, int64_t xt_gs, const uint8_t* wq, const int32_t* xo,
                                                 const void* xs, int64_t xs_gs, const void* wsj, __m512i amin,
                                                 __m512 (&fa)[RR][C]) {
  __m512i ia[RR][C];
#pragma GCC unroll 4
  for (int i = 0; i < RR; ++i) {
    const __m512i o = _mm512_loadu_si512(xo + i * xs_gs);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) ia[i][c] = o;
  }
#pragma GCC unroll 8
  for (int s = 0; s < 8; ++s) {
    const int d = 16 * (s / 4) + 4 * BL + s % 4;
    __m512i xv[RR];
#pragma GCC unroll 4
    for (int i = 0; i < RR; ++i) xv[i] = _mm512_load_si512(xq + i * xt_gs + d);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      int32_t wd;
      std::memcpy(&wd, wq + c * kWpCol + d * 4, 4);
      const __m512i wv = _mm512_set1_epi32(wd);
#pragma GCC unroll 4
      for (int i = 0; i < RR; ++i) ia[i][c] = _mm512_dpbusd_epi32(ia[i][c], wv, xv[i]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < RR; ++i) {
    if constexpr (SHIFT) {
      const int32_t* wsh = static_cast<const int32_t*>(wsj);
      const __m512i sa = _mm512_sub_epi32(_mm512_loadu_si512(static_cast<const int32_t*>(xs) + i * xs_gs), amin);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512i n = _mm512_add_epi32(sa, _mm512_set1_epi32(wsh[c * kWsCol]));
        fa[i][c] = _mm512_add_ps(fa[i][c], _mm512_cvtepi32_ps(_mm512_sllv_epi32(ia[i][c], n)));
      }
    } else {
      const float* ws = static_cast<const float*>(wsj);
      const __m512 sx = _mm512_loadu_ps(static_cast<const float*>(xs) + i * xs_gs);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c)
        fa[i][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[i][c]), _mm512_mul_ps(sx, _mm512_set1_ps(ws[c * kWsCol])),
                                   fa[i][c]);
    }
  }
}

// acc[c·ld + 16i + lane] += Σ over nb blocks of the block dot of activation row (group i, lane)
// and panel column c, times both scales. xt: group 0's lines at the chunk's first quad (groups
// xt_gs lines apart); xs, xo: group 0's vectors at the chunk's first block (xs_gs apart).
// acc += the chunk's nb block terms, summed in a chain of their own (starting at 0). With SHIFT,
// xs/ws are the exps and the panel's wsh, and that chain is in units of 2^b (b = amin + the
// tile's least weight exponent), scaled by vscalefps before the add.
template <int RR, bool SHIFT>
void micro(const Line* xt, int64_t xt_gs, const void* xs, const int32_t* xo, int64_t xs_gs, const uint8_t* wp,
           const void* ws, int64_t nb, int32_t amin, int32_t b, float* acc, int64_t ld) {
  using S = std::conditional_t<SHIFT, int32_t, float>;
  const S* xsv = static_cast<const S*>(xs);
  const S* wsv = static_cast<const S*>(ws);
  const __m512i am = _mm512_set1_epi32(amin);
  const __m512 up = _mm512_set1_ps(static_cast<float>(b));
  __m512 fa[RR][C];
  for (int i = 0; i < RR; ++i)
    for (int c = 0; c < C; ++c) fa[i][c] = _mm512_setzero_ps();
  for (int64_t j = 0; j < nb; j += 4) {
    const Line* xq = xt + (j / 4) * 32;
    const uint8_t* wq = wp + (j / 4) * 128;
    const int64_t at = j * 16;
    block<RR, 0, SHIFT>(xq, xt_gs, wq, xo + at, xsv + at, xs_gs, wsv + j, am, fa);
    if (j + 1 < nb) block<RR, 1, SHIFT>(xq, xt_gs, wq, xo + at + 16, xsv + at + 16, xs_gs, wsv + j + 1, am, fa);
    if (j + 2 < nb) block<RR, 2, SHIFT>(xq, xt_gs, wq, xo + at + 32, xsv + at + 32, xs_gs, wsv + j + 2, am, fa);
    if (j + 3 < nb) block<RR, 3, SHIFT>(xq, xt_gs, wq, xo + at + 48, xsv + at + 48, xs_gs, wsv + j + 3, am, fa);
  }
  for (int i = 0; i < RR; ++i)
    for (int c = 0; c < C; ++c) {
      if constexpr (SHIFT) fa[i][c] = _mm512_scalef_ps(fa[i][c], up);
      _mm512_storeu_ps(acc + c * ld + 16 * i, _mm512_add_ps(_mm512_loadu_ps(acc + c * ld + 16 * i), fa[i][c]));
    }
}

struct Task {
  const LinearWeight& w;
  const VnniActivations& a;
  int64_t M;
  float* y;
};

// Output columns n0 .. n0 + NS of activation groups g0 .. g1, over all of K; acc: NS × rows.
// One micro-tile: RR groups from g, columns c0 .. c0 + C of the panel, chunk ch (quad q0).
template <int RR>
void tile(const VnniActivations& a, const Panel& pn, int64_t g, int64_t ch, int64_t q0, int64_t nb, int64_t c0,
          float* ac, int64_t ld) {
  const Line* xt = a.codes.data() + (g * a.quads + q0) * 32;
  const int64_t xs_at = (g * a.blocks + 4 * q0) * 16;
  int32_t lo = a.emin[g * a.chunks + ch], hi = a.emax[g * a.chunks + ch];
  for (int i = 1; i < RR; ++i) {
    lo = std::min(lo, a.emin[(g + i) * a.chunks + ch]);
    hi = std::max(hi, a.emax[(g + i) * a.chunks + ch]);
  }
  const int64_t tt = c0 / C;
  if (hi - lo + pn.tspread[tt] <= kMaxShift && lo > -kWide)
    micro<RR, true>(xt, a.quads * 32, a.exps.data() + xs_at, a.offsets.data() + xs_at, a.blocks * 16,
                    pn.wp + c0 * kWpCol, pn.wsh + c0 * kWsCol, nb, lo, lo + pn.tmin[tt], ac, ld);
  else
    micro<RR, false>(xt, a.quads * 32, a.scales.data() + xs_at, a.offsets.data() + xs_at, a.blocks * 16,
                     pn.wp + c0 * kWpCol, pn.ws + c0 * kWsCol, nb, 0, 0, ac, ld);
}

void run_task(const Task& t, int64_t n0, int64_t g0, int64_t g1, Panel& pn, float* acc) {
  const VnniActivations& a = t.a;
  const int64_t N = t.w.out, ld = (g1 - g0) * 16;
  const int64_t cols = std::min(NS, N - n0);
  std::fill(acc, acc + NS * ld, 0.0f);
  for (int64_t q0 = 0; q0 < a.quads; q0 += KQ) {
    const int64_t nq = std::min(KQ, a.quads - q0), nb = std::min(4 * KQ, a.blocks - 4 * q0);
    expand_panel(t.w, n0, q0, nq, pn);
    for (int64_t g = g0; g < g1; g += R) {
      for (int64_t c0 = 0; c0 < cols; c0 += C) {
        float* ac = acc + c0 * ld + (g - g0) * 16;
        if (g + R <= g1)
          tile<R>(a, pn, g, q0 / KQ, q0, nb, c0, ac, ld);
        else
          tile<1>(a, pn, g, q0 / KQ, q0, nb, c0, ac, ld);
      }
    }
  }
  write_strip(acc, ld, t.w, g0 * 16, std::min(t.M, g1 * 16), n0, cols, t.y);
}

}  // namespace

bool linear_w4a4_vnni_avx512(const LinearWeight& w, const float* x, int64_t M, float* y) {
  if (w.format != WeightFormat::kMXFP4 || !w.quantize_input || M < 1) return false;
  count_w4a4_vnni_call();
  QuantizedActivations q;
  quantize_activations_avx512(x, M, w.in, w.input_scale_mode, 16, q);
  VnniActivations a;
  a.groups = q.padded_rows / 16;
  a.blocks = q.blocks;
  a.quads = (q.blocks + 3) / 4;
  a.codes.assign(static_cast<size_t>(a.groups * a.quads * 32), Line{});
  a.scales.assign(static_cast<size_t>(a.groups * a.blocks * 16), 0.0f);
  a.offsets.assign(static_cast<size_t>(a.groups * a.blocks * 16), 0);
  a.exps.assign(static_cast<size_t>(a.groups * a.blocks * 16), 0);
  a.chunks = (a.quads + KQ - 1) / KQ;
  a.emin.assign(static_cast<size_t>(a.groups * a.chunks), 0);
  a.emax.assign(static_cast<size_t>(a.groups * a.chunks), 0);

  // Tasks: strips of NS columns × runs of activation groups (w4a4_strip_tasks.h).
  const StripPlan plan = strip_plan(w.out, a.groups, NS, R, kMaxTaskGroups, omp_get_max_threads());
  const int64_t strips = plan.strips, gpt = plan.groups_per_task, tasks = plan.tasks;
  const Task task{w, a, M, y};
#pragma omp parallel
  {
    Panel pn{};  // 15 KiB on the thread's stack
    std::unique_ptr<float[]> acc(new float[static_cast<size_t>(NS * gpt * 16)]);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < M; ++r) prepare_row(q, r, a);
#pragma omp for schedule(static)
    for (int64_t g = 0; g < a.groups; ++g) group_exponents(q, g, M, a);
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t g0 = (t / strips) * gpt;
      run_task(task, (t % strips) * NS, g0, std::min(a.groups, g0 + gpt), pn, acc.get());
    }
  }
  return true;
}

}  // namespace stave::cpu::kern
