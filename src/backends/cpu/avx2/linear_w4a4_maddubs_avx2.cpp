// MXFP4 W4A4 prefill on AVX2 (vpmaddubsw + vpmaddwd), fast precision, register-blocked: the
// exact integer 32-block dots stay in registers and each is rescaled by one cvt + one FMA. The
// AVX2 analogue of avx512/linear_w4a4_vnni_avx512.cpp (same operand order, 8-row vectors).
//
// Layout: a vector lane (int32) is an activation row (8 rows per vector), so each vpmaddubsw
// multiplies 4 deep × 8 rows of activation codes by one broadcast dword (4 codes) of one weight
// row (= output column). The k order inside a dword is any order both operands share: here a
// 128-deep quad (4 blocks) of a weight row is its 64 packed bytes, taken as the low nibbles
// (even columns, dwords 0..15) then the high nibbles (odd columns, dwords 16..31), so the weight
// is expanded by ands, shifts and a 16-entry vpshufb table, with no transposition. Block bl
// of a quad is dwords 4bl..4bl+3 and 16+4bl..16+4bl+3.
//  - Activations: quantized once per call (quantize_activations_avx2, bit-exact with
//    mxfp4::quantize_block), then per 8-row group and quad rearranged into that order as 32
//    lines of 8 rows (one vpshufb per block and row puts even codes before odd ones, eight dword
//    stores place them), with the block scales 2^(e − 2) and the offsets as 8-row vectors.
//  - Weights: a strip of NS rows (output columns) × KQ quads is expanded per task and K chunk
//    to unsigned codes 2·E2M1 + 12 ∈ [0, 24] (the u8 operand of vpmaddubsw; the signed
//    activation codes, 2·E2M1 ∈ [−12, 12], are the s8 one), reused by every activation row of
//    the task.
//  - Micro-kernel: R 8-row groups × C columns; per block, each int16 accumulator pair starts at
//    −6·Σx in both halves of the row's int32 lane, takes the 8 vpmaddubsw products of the block
//    by vpaddw, and one vpmaddwd by ones sums the halves into the int32 dot
//    Σ (w + 12)·x − 12·Σx = Σ w·x, which is converted and added to the fp32 accumulator times
//    (activation scale · weight scale) by one FMA.
// No int16 saturation or wrap-around: a vpmaddubsw lane is u0·s0 + u1·s1 with u ∈ [0, 24] and
// |s| ≤ 12, so |lane| ≤ 2·24·12 = 576 (vpmaddubsw saturates only past 32767); an int16
// accumulator starts at −6·Σx over the row's 32 codes of the block (|6·Σx| ≤ 6·32·12 = 2304)
// and adds 8 such lanes, so |acc| ≤ 2304 + 8·576 = 6912 < 32767 at every step: vpaddw never
// wraps, and vpmaddwd by ones adds the two halves exactly into int32.
// Numerics: each block's integer dot is exact (|Σ| ≤ 4608), the scale product is a power of
// two, so an output is one fp32 chain of K/32 block terms per K chunk, the chunks and the bias
// added after: the bound of the other int8 W4A4 kernels (K/32 + a few terms). Exact precision
// never runs this (it uses the reference backend).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/cpu/linear/kernels.h"
#include "backends/cpu/linear/w4a4_strip_tasks.h"

namespace stave::cpu::kern {
namespace {

constexpr int R = 2;                   // 8-row activation groups per micro-tile (16 rows)
constexpr int C = 6;                   // output columns per micro-tile
constexpr int64_t NS = 48;             // output columns per task strip
constexpr int64_t KQ = 2;              // 128-deep quads per K chunk (256 columns)
constexpr int64_t kWpCol = KQ * 128;   // panel bytes per output column
constexpr int64_t kWsCol = KQ * 4;     // panel scales per output column
constexpr int64_t kMaxTaskGroups = 64;  // 512 rows per task at most (accumulators stay in L2)
static_assert(NS % C == 0);

struct alignas(32) Line {
  int8_t b[32];
};

// The quantized activation in the kernel's order (see the top of the file).
struct MaddubsActivations {
  int64_t groups = 0, quads = 0, blocks = 0;
  std::vector<Line> codes;       // [groups][quads][32]: line d, lane l = 4 codes of row 8g + l
  std::vector<float> scales;     // [groups][blocks][8]: 2^(e − 2) (0 for padding rows)
  std::vector<int32_t> offsets;  // [groups][blocks][8]: int16 pair (−6·Σ codes, −6·Σ codes)
};

// Row r of q into a: block b's 32 codes (columns 32b + j) go to lines 4(b%4) + {0,1,2,3} (even
// columns) and 16 + 4(b%4) + {0,1,2,3} (odd columns) of quad b/4, lane r % 8.
void prepare_row(const QuantizedActivations& q, int64_t r, MaddubsActivations& a) {
  const int64_t g = r / 8, l = r % 8;
  // Per 16-byte lane: even bytes to the low 8, odd bytes to the high 8.
  const __m256i split = _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
  const int8_t* row = q.codes.data() + r * q.k;
  for (int64_t b = 0; b < a.blocks; ++b) {
    const __m256i v = _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * b)), split);
    // v's dwords hold block columns {0,2,4,6}, {8,..,14}, {1,..,7}, {9,..,15}, {16,..,22},
    // {24,..,30}, {17,..,23}, {25,..,31}: lines 4bl, 4bl+1, 16+4bl, 17+4bl, then 2 more of each.
    alignas(32) int32_t d[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(d), v);
    const int64_t bl = b % 4;
    int32_t* base = reinterpret_cast<int32_t*>(a.codes.data() + (g * a.quads + b / 4) * 32) + l;
    constexpr int kLine[8] = {0, 1, 16, 17, 2, 3, 18, 19};
    for (int t = 0; t < 8; ++t) base[(kLine[t] + 4 * bl) * 8] = d[t];
    // q.offsets = 12·Σx (even); each int16 half starts at −6·Σx, and vpmaddwd by ones adds the
    // two halves: −12·Σx, which removes the +12 of the unsigned weight codes.
    const int32_t half = -q.offsets[r * a.blocks + b] / 2;
    const uint32_t h16 = static_cast<uint16_t>(static_cast<int16_t>(half));
    a.offsets[(g * a.blocks + b) * 8 + l] = static_cast<int32_t>(h16 | (h16 << 16));
    a.scales[(g * a.blocks + b) * 8 + l] = q.scales[r * a.blocks + b];
  }
}

// Weight rows n0 .. n0 + NS (rows ≥ N as zeros), quads q0 .. q0 + nq, into the panel:
// wp[c·kWpCol + qi·128 + j] = unsigned code (2·E2M1 + 12) of row n0 + c, quad q0 + qi, low nibble
// of packed byte j (j < 64) or high nibble of byte j − 64; ws[c·kWsCol + j] = 2^e of its block j.
// Bytes of a partial last quad past the row's end expand garbage-free (zeros read) and are
// never used (the micro-kernel stops at the last block).
void expand_panel(const LinearWeight& w, int64_t n0, int64_t q0, int64_t nq, uint8_t* wp, float* ws) {
  const float* e8m0 = e8m0_table();
  const __m256i lut = _mm256_broadcastsi128_si256(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
  const __m256i nib = _mm256_set1_epi8(0x0f);
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
      const uint8_t* src = codes + n * row_bytes + (q0 + qi) * 64;
      const int64_t bytes = std::min<int64_t>(64, row_bytes - (q0 + qi) * 64);
      __m256i v0, v1;
      if (bytes == 64) {
        v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
        v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32));
      } else {
        alignas(32) uint8_t tmp[64] = {};
        std::memcpy(tmp, src, static_cast<size_t>(bytes));
        v0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(tmp));
        v1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(tmp + 32));
      }
      __m256i* o = reinterpret_cast<__m256i*>(out + qi * 128);
      _mm256_store_si256(o, _mm256_shuffle_epi8(lut, _mm256_and_si256(v0, nib)));
      _mm256_store_si256(o + 1, _mm256_shuffle_epi8(lut, _mm256_and_si256(v1, nib)));
      _mm256_store_si256(o + 2, _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v0, 4), nib)));
      _mm256_store_si256(o + 3, _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v1, 4), nib)));
    }
    const uint8_t* sc = w.scales + n * blocks + 4 * q0;
    for (int64_t j = 0; j < nb; ++j) ws[c * kWsCol + j] = e8m0[sc[j]];
  }
}

// Block BL of one quad: fa[i][c] += (exact dot of group i's rows with column c) · scales.
// xq: group 0's 32 lines of the quad (groups xt_gs lines apart); wq: column 0's 128 panel bytes
// of the quad (columns kWpCol apart); xo, xs: group 0's vectors of the block (xs_gs apart);
// wsj: column 0's scale of the block (columns kWsCol apart).
template <int RR, int BL>
inline __attribute__((always_inline)) void block(const Line* xq, int64_t xt_gs, const uint8_t* wq, const int32_t* xo,
                                                 const float* xs, int64_t xs_gs, const float* wsj,
                                                 __m256 (&fa)[RR][C]) {
  __m256i ia[RR][C];
#pragma GCC unroll 4
  for (int i = 0; i < RR; ++i) {
    const __m256i o = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xo + i * xs_gs));
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) ia[i][c] = o;
  }
#pragma GCC unroll 8
  for (int s = 0; s < 8; ++s) {
    const int d = 16 * (s / 4) + 4 * BL + s % 4;
    __m256i xv[RR];
#pragma GCC unroll 4
    for (int i = 0; i < RR; ++i) xv[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(xq + i * xt_gs + d));
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      int32_t wd;
      std::memcpy(&wd, wq + c * kWpCol + d * 4, 4);
      const __m256i wv = _mm256_set1_epi32(wd);
#pragma GCC unroll 4
      for (int i = 0; i < RR; ++i) {
        ia[i][c] = _mm256_add_epi16(ia[i][c], _mm256_maddubs_epi16(wv, xv[i]));
        // Keeps the sum a chain in one register: GCC otherwise reassociates the 8 integer adds
        // into a tree over all the block's products and spills them.
        asm("" : "+x"(ia[i][c]));
      }
    }
  }
  const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
  for (int i = 0; i < RR; ++i) {
    const __m256 sx = _mm256_loadu_ps(xs + i * xs_gs);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m256 dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(ia[i][c], ones));
      fa[i][c] = _mm256_fmadd_ps(dot, _mm256_mul_ps(sx, _mm256_set1_ps(wsj[c * kWsCol])), fa[i][c]);
    }
  }
}

// acc[c·ld + 8i + lane] += Σ over nb blocks of the block dot of activation row (group i, lane)
// and panel column c, times both scales. xt: group 0's lines at the chunk's first quad (groups
// xt_gs lines apart); xs, xo: group 0's vectors at the chunk's first block (xs_gs apart).
template <int RR>
void micro(const Line* xt, int64_t xt_gs, const float* xs, const int32_t* xo, int64_t xs_gs, const uint8_t* wp,
           const float* ws, int64_t nb, float* acc, int64_t ld) {
  __m256 fa[RR][C];
  for (int i = 0; i < RR; ++i)
    for (int c = 0; c < C; ++c) fa[i][c] = _mm256_loadu_ps(acc + c * ld + 8 * i);
  for (int64_t j = 0; j < nb; j += 4) {
    const Line* xq = xt + (j / 4) * 32;
    const uint8_t* wq = wp + (j / 4) * 128;
    const int64_t at = j * 8;
    block<RR, 0>(xq, xt_gs, wq, xo + at, xs + at, xs_gs, ws + j, fa);
    if (j + 1 < nb) block<RR, 1>(xq, xt_gs, wq, xo + at + 8, xs + at + 8, xs_gs, ws + j + 1, fa);
    if (j + 2 < nb) block<RR, 2>(xq, xt_gs, wq, xo + at + 16, xs + at + 16, xs_gs, ws + j + 2, fa);
    if (j + 3 < nb) block<RR, 3>(xq, xt_gs, wq, xo + at + 24, xs + at + 24, xs_gs, ws + j + 3, fa);
  }
  for (int i = 0; i < RR; ++i)
    for (int c = 0; c < C; ++c) _mm256_storeu_ps(acc + c * ld + 8 * i, fa[i][c]);
}

struct Task {
  const LinearWeight& w;
  const MaddubsActivations& a;
  int64_t M;
  float* y;
};

// Output columns n0 .. n0 + NS of activation groups g0 .. g1, over all of K; acc: NS × rows.
void run_task(const Task& t, int64_t n0, int64_t g0, int64_t g1, uint8_t* wp, float* ws, float* acc) {
  const MaddubsActivations& a = t.a;
  const int64_t N = t.w.out, ld = (g1 - g0) * 8;
  const int64_t cols = std::min(NS, N - n0);
  std::fill(acc, acc + NS * ld, 0.0f);
  for (int64_t q0 = 0; q0 < a.quads; q0 += KQ) {
    const int64_t nq = std::min(KQ, a.quads - q0), nb = std::min(4 * KQ, a.blocks - 4 * q0);
    expand_panel(t.w, n0, q0, nq, wp, ws);
    for (int64_t g = g0; g < g1; g += R) {
      const Line* xt = a.codes.data() + (g * a.quads + q0) * 32;
      const int64_t xs_at = (g * a.blocks + 4 * q0) * 8;
      for (int64_t c0 = 0; c0 < cols; c0 += C) {
        float* ac = acc + c0 * ld + (g - g0) * 8;
        if (g + R <= g1)
          micro<R>(xt, a.quads * 32, a.scales.data() + xs_at, a.offsets.data() + xs_at, a.blocks * 8,
                   wp + c0 * kWpCol, ws + c0 * kWsCol, nb, ac, ld);
        else
          micro<1>(xt, a.quads * 32, a.scales.data() + xs_at, a.offsets.data() + xs_at, a.blocks * 8,
                   wp + c0 * kWpCol, ws + c0 * kWsCol, nb, ac, ld);
      }
    }
  }
  write_strip(acc, ld, t.w, g0 * 8, std::min(t.M, g1 * 8), n0, cols, t.y);
}

}  // namespace

bool linear_w4a4_maddubs_avx2(const LinearWeight& w, const float* x, int64_t M, float* y) {
  if (w.format != WeightFormat::kMXFP4 || !w.quantize_input || M < 1) return false;
  count_w4a4_maddubs_call();
  QuantizedActivations q;
  quantize_activations_avx2(x, M, w.in, w.input_scale_mode, 8, q);
  MaddubsActivations a;
  a.groups = q.padded_rows / 8;
  a.blocks = q.blocks;
  a.quads = (q.blocks + 3) / 4;
  a.codes.assign(static_cast<size_t>(a.groups * a.quads * 32), Line{});
  a.scales.assign(static_cast<size_t>(a.groups * a.blocks * 8), 0.0f);
  a.offsets.assign(static_cast<size_t>(a.groups * a.blocks * 8), 0);

  // Tasks: strips of NS columns × runs of activation groups (w4a4_strip_tasks.h).
  const StripPlan plan = strip_plan(w.out, a.groups, NS, R, kMaxTaskGroups, omp_get_max_threads());
  const int64_t strips = plan.strips, gpt = plan.groups_per_task, tasks = plan.tasks;
  const Task task{w, a, M, y};
#pragma omp parallel
  {
    alignas(32) uint8_t wp[NS * kWpCol];  // 12 KiB on the thread's stack
    alignas(32) float ws[NS * kWsCol];
    std::unique_ptr<float[]> acc(new float[static_cast<size_t>(NS * gpt * 8)]);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < M; ++r) prepare_row(q, r, a);
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t g0 = (t / strips) * gpt;
      run_task(task, (t % strips) * NS, g0, std::min(a.groups, g0 + gpt), wp, ws, acc.get());
    }
  }
  return true;
}

}  // namespace stave::cpu::kern
