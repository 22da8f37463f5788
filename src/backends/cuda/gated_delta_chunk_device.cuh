// The chunked gated delta rule's kernels (gated_delta_chunk.cu has the algorithm): what their
// translation units share — sizes, shared-memory strides, tensor-core fragment helpers, the
// chunk table and row copies, the split-operand helpers. Included by .cu files only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_pipeline.h>
#include <mma.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/cuda_check.h"

namespace stave::cuda::dev::delta_chunk {

using bf16 = __nv_bfloat16;
namespace wmma = nvcuda::wmma;

constexpr int kC = 64;    // chunk
constexpr int kD = 128;   // d_k = d_v
constexpr int kBV = 32;   // state columns per block of the sequential pass
constexpr int kWuThreads = 128;      // STAVE_CUDA_DELTA_WU=narrow
constexpr int kWuThreadsWide = 256;  // the default (wide): twice the warps in the same shared memory

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragAT = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// acc += a · B's 16 × 16 block (rows kk, columns tn): B row-major with leading dimension ld, or
// (kT) held transposed, i.e. column-major, with leading dimension ld.
template <bool kT>
__device__ __forceinline__ void mma_b_block(FragC& acc, const FragA& a, const bf16* B, int ld, int kk, int tn) {
  if constexpr (kT) {
    FragBT b;
    wmma::load_matrix_sync(b, B + tn * 16 * ld + kk * 16, ld);
    wmma::mma_sync(acc, a, b, acc);
  } else {
    FragB b;
    wmma::load_matrix_sync(b, B + kk * 16 * ld + tn * 16, ld);
    wmma::mma_sync(acc, a, b, acc);
  }
}

// Where chunk ci's rows are: from the table (packed sequences: t0[nc], len[nc], then the
// sequences' first chunks [sequences + 1]) or, without one, chunks of 64 from row 0.
__device__ inline void chunk_rows(const int* table, int nc, int64_t tokens, int ci, int64_t& t0, int& len) {
  if (table) {
    t0 = table[ci];
    len = table[nc + ci];
  } else {
    t0 = static_cast<int64_t>(ci) * kC;
    len = static_cast<int>(tokens - t0 < kC ? tokens - t0 : kC);
  }
}

// Shared-memory rows are padded (BF16 by 8, fp32 by 4 elements: 16 bytes) so that the 16 rows a
// tile load reads fall on different banks.
constexpr int kLdB = kD + 8;  // BF16 [64 or 128][128] tiles
constexpr int kLdT = kC + 8;  // BF16 [64][64]
constexpr int kLdA = kC + 4;  // fp32 [64][64]
constexpr int kLdO = kD + 4;  // fp32 [64][128]
constexpr int kLdF = kBV + 4; // fp32 [·][32] (the sequential pass)

// 16-byte asynchronous copy global → shared (both 16-byte aligned).
__device__ inline void copy16(void* dst, const void* src) { __pipeline_memcpy_async(dst, src, 16); }

// Four fp32 values as four BF16 (round to nearest even, as __float2bfloat16) at an 8-byte
// aligned address: one store instead of four.
__device__ inline void store_bf16x4(bf16* dst, float4 x) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(x.x, x.y), hi = __floats2bfloat162_rn(x.z, x.w);
  uint2 packed;
  packed.x = *reinterpret_cast<const uint32_t*>(&lo);
  packed.y = *reinterpret_cast<const uint32_t*>(&hi);
  *reinterpret_cast<uint2*>(dst) = packed;
}

// x − BF16(x) for four values: what the lo half of a split operand holds.
__device__ inline float4 bf16_residue4(float4 x) {
  const auto r = [](float v) { return v - __bfloat162float(__float2bfloat16(v)); };
  return make_float4(r(x.x), r(x.y), r(x.z), r(x.w));
}

// Two values as a BF16 pair hi (rounded) and lo (the residue, rounded).
__device__ inline void split_bf16x2(float a, float b, __nv_bfloat162& hi, __nv_bfloat162& lo) {
  hi = __floats2bfloat162_rn(a, b);
  const float2 h = __bfloat1622float2(hi);
  lo = __floats2bfloat162_rn(a - h.x, b - h.y);
}

// wmma with split operands: acc += a b as hi·hi' + hi·lo' + lo·hi' (small terms first).
template <class FA, class FB>
__device__ __forceinline__ void mma3(FragC& acc, const FA& ah, const FA& al, const FB& bh, const FB& bl) {
  wmma::mma_sync(acc, ah, bl, acc);
  wmma::mma_sync(acc, al, bh, acc);
  wmma::mma_sync(acc, ah, bh, acc);
}

__device__ inline bool aligned16(const void* p, int64_t stride_floats) {
  return ((reinterpret_cast<uintptr_t>(p) | static_cast<uintptr_t>(stride_floats) * sizeof(float)) & 15) == 0;
}

// Starts the copy of the k̂ (or q̂) rows t0 … t0+len−1 of k head kh into dst [64][kLdB]; rows
// past len are zeroed. The caller commits and waits.
template <int kThreads>
__device__ inline void fetch_rows(const bf16* x, int64_t t0, int len, int n_k, int kh, bf16* dst, int tid) {
  for (int e = tid; e < kC * kD / 8; e += kThreads) {
    const int r = e / (kD / 8), c = e % (kD / 8);
    if (r < len)
      copy16(dst + r * kLdB + 8 * c, x + ((t0 + r) * n_k + kh) * kD + 8 * c);
    else
      *reinterpret_cast<uint4*>(dst + r * kLdB + 8 * c) = make_uint4(0, 0, 0, 0);
  }
}

// The 16 × 16 tiles on and below the diagonal of X Yᵀ (X, Y: BF16 [64][kLdB], rows of d_k =
// 128) into out (fp32 [64][kLdA]), the block's warps taking the ten tiles in turn; with kSplit
// X and Y come with their lo halves Xl, Yl and each product is three. Tiles above the diagonal
// are not written. tile_done(ti, tj), called by the whole warp once its tile (row block ti,
// column block tj) is in `out`, finishes that tile right away (the mask and gates): no pass over
// the whole matrix behind a barrier of the block.
template <int kThreads, bool kSplit, class TileDone>
__device__ inline void lower_tiles_xyt(const bf16* X, const bf16* Xl, const bf16* Y, const bf16* Yl, float* out,
                                       int warp, TileDone&& tile_done) {
  for (int tile = warp; tile < 16; tile += kThreads / 32) {
    const int ti = tile / 4, tj = tile % 4;
    if (tj > ti) continue;
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < kD / 16; ++kk) {
      FragA a;
      FragBT b;
      wmma::load_matrix_sync(a, X + ti * 16 * kLdB + kk * 16, kLdB);
      wmma::load_matrix_sync(b, Y + tj * 16 * kLdB + kk * 16, kLdB);
      if constexpr (kSplit) {
        FragA al;
        FragBT bl;
        wmma::load_matrix_sync(al, Xl + ti * 16 * kLdB + kk * 16, kLdB);
        wmma::load_matrix_sync(bl, Yl + tj * 16 * kLdB + kk * 16, kLdB);
        mma3(acc, a, al, b, bl);
      } else {
        wmma::mma_sync(acc, a, b, acc);
      }
    }
    wmma::store_matrix_sync(out + ti * 16 * kLdA + tj * 16, acc, kLdA, wmma::mem_row_major);
    __syncwarp();
    tile_done(ti, tj);
  }
}


// --- the register passes' (gated_delta_state*.cu) fragment helpers ---

__device__ inline uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// split_bf16x2's two halves (above) as packed pairs: h as pack_bf16
// gives it, l the residues.
__device__ inline void pack_bf16_split(float lo, float hi, uint32_t& h, uint32_t& l) {
  __nv_bfloat162 bh, bl;
  split_bf16x2(lo, hi, bh, bl);
  h = *reinterpret_cast<const uint32_t*>(&bh);
  l = *reinterpret_cast<const uint32_t*>(&bl);
}

// Two n8 accumulator tiles (columns 0–7 and 8–15 of a 16 × 16 block) as one k16 A fragment in
// BF16, times `sign` (±1, exact): the m16n8 accumulator layout is the A layout's half.
__device__ inline void accumulators_as_a(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4], float sign) {
  a[0] = pack_bf16(sign * lo[0], sign * lo[1]);
  a[1] = pack_bf16(sign * lo[2], sign * lo[3]);
  a[2] = pack_bf16(sign * hi[0], sign * hi[1]);
  a[3] = pack_bf16(sign * hi[2], sign * hi[3]);
}

// The same fragment split: a as accumulators_as_a gives it, al each value's residue after its
// BF16 rounding.
__device__ inline void accumulators_as_a_split(uint32_t (&a)[4], uint32_t (&al)[4], const float (&lo)[4],
                                               const float (&hi)[4], float sign) {
  pack_bf16_split(sign * lo[0], sign * lo[1], a[0], al[0]);
  pack_bf16_split(sign * lo[2], sign * lo[3], a[1], al[1]);
  pack_bf16_split(sign * hi[0], sign * hi[1], a[2], al[2]);
  pack_bf16_split(sign * hi[2], sign * hi[3], a[3], al[3]);
}

// accumulators_as_a_split with kSplit, else accumulators_as_a (al untouched).
template <bool kSplit>
__device__ inline void accumulators_as_a_pair(uint32_t (&a)[4], uint32_t (&al)[4], const float (&lo)[4],
                                              const float (&hi)[4], float sign) {
  if constexpr (kSplit)
    accumulators_as_a_split(a, al, lo, hi, sign);
  else
    accumulators_as_a(a, lo, hi, sign);
}

// The state's columns col0 … col0 + 15 over the d_k rows k0 … k0 + 8 kTiles − 1, transposed,
// as n8 accumulator tiles (the register passes' state fragment): element i of tile j is row
// k0 + 8j + 2t + i % 2, column col0 + g + 8·(i / 2) of st (fp32 [d_k][d_v]).
template <int kTiles>
__device__ inline void load_state_fragment(float (&s)[kTiles][4], const float* st, int k0, int col0, int g, int t) {
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) s[j][i] = st[(k0 + 8 * j + 2 * t + i % 2) * kD + col0 + g + 8 * (i / 2)];
}
template <int kTiles>
__device__ inline void store_state_fragment(const float (&s)[kTiles][4], float* st, int k0, int col0, int g, int t) {
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) st[(k0 + 8 * j + 2 * t + i % 2) * kD + col0 + g + 8 * (i / 2)] = s[j][i];
}

// v_newᵀ (8 n8 tiles over the chunk's rows; element i of tile n is column col0 + g + 8·(i / 2),
// row 8n + 2t + i % 2) out as BF16 into vt ([d_v][64]; with kSplit the residues into vt_lo), then
// scaled in place by factor(row), exp(G_last − G) of its rows, for the update. With kHalves = 2
// this warp writes only the rows of its d_k half (half_k); every warp scales all of its rows.
template <bool kSplit, int kHalves = 1, class Factor>
__device__ inline void store_vnew_then_scale_with(float (&v)[kC / 8][4], Factor&& factor, bf16* vt, bf16* vt_lo,
                                                  int col0, int g, int t, int half_k = 0) {
#pragma unroll
  for (int n = 0; n < kC / 8; ++n) {
    const float d0 = factor(8 * n + 2 * t), d1 = factor(8 * n + 2 * t + 1);
    const bool mine = kHalves == 1 || n / (kC / 8 / kHalves) == half_k;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      if (mine) {
        const int64_t at = (col0 + g + 8 * half) * kC + 8 * n + 2 * t;
        uint32_t* dst = reinterpret_cast<uint32_t*>(vt + at);
        if constexpr (kSplit)
          pack_bf16_split(v[n][2 * half], v[n][2 * half + 1], *dst, *reinterpret_cast<uint32_t*>(vt_lo + at));
        else
          *dst = pack_bf16(v[n][2 * half], v[n][2 * half + 1]);
      }
      v[n][2 * half] *= d0;
      v[n][2 * half + 1] *= d1;
    }
  }
}

// The factors formed here from G (gc) and G_last.
template <bool kSplit, int kHalves = 1>
__device__ inline void store_vnew_then_scale(float (&v)[kC / 8][4], const float* gc, float g_last, bf16* vt,
                                             bf16* vt_lo, int col0, int g, int t, int half_k = 0) {
  store_vnew_then_scale_with<kSplit, kHalves>(v, [&](int r) { return __expf(g_last - gc[r]); }, vt, vt_lo, col0, g, t,
                                              half_k);
}

// The factors as the transform wrote them (gd, [64]; ChunkScratch::gdec): the same values.
template <bool kSplit>
__device__ inline void store_vnew_then_scale_by(float (&v)[kC / 8][4], const float* gd, bf16* vt, bf16* vt_lo,
                                                int col0, int g, int t) {
  store_vnew_then_scale_with<kSplit>(v, [&](int r) { return gd[r]; }, vt, vt_lo, col0, g, t);
}

constexpr int kLdU = kC + 8;  // fp32 [16][72]: a warp's Uᵀ columns in shared memory

// Starts this warp's 16 columns of chunk slot's Uᵀ (fp32 [d_v][64]) into Ub ([16][kLdU]) and
// commits them.
__device__ inline void fetch_u_warp(const float* Ut, int64_t slot, int col0, float* Ub, int lane) {
  const float* u = Ut + slot * kD * kC + static_cast<int64_t>(col0) * kC;
#pragma unroll
  for (int e = lane; e < 16 * kC / 4; e += 32) {
    const int r = e / (kC / 4), c = e % (kC / 4);
    copy16(Ub + r * kLdU + 4 * c, u + r * kC + 4 * c);
  }
  __pipeline_commit();
}

// Lets kernel k use `bytes` of dynamic shared memory (over the 48 KiB default).
template <class Kernel>
void allow_smem(Kernel k, size_t bytes) {
  STAVE_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace stave::cuda::dev::delta_chunk
