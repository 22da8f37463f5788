// The chunked gated delta rule, step 3 on Hopper's warp-group MMA (STAVE_CUDA_DELTA_STATE=wgmma:
// 0.264 → 0.233 ms per 27B layer at 2048 tokens on an H200, 12 % off the mma.sync pass, not the 4×
// its instruction count suggested; =wgmma-tma, the default since 2026-12-07 08:00, loads the
// tiles by TMA: 0.232 → 0.169 ms on an H100; 0.169 → 0.123 ms since 2026-12-07 17:00, below:
// the gates' factors read, shared loads, the next chunk's copies after the MMAs): the register pass of
// gated_delta_state.cu in its whole-out form (the state in registers, the inter-chunk output formed
// from it and written into the output), with each chunk's products as a handful of wgmma
// instructions instead of hundreds of mma.sync.
//
// One warp group per block holds 64 state columns of one v head, transposed (Sᵀ: columns × d_k),
// as the accumulators of an m64n128 MMA: warp w the columns 16 w … 16 w + 15, the same fragment
// as the mma.sync pass's (gated_delta_state.cu), so the A fragments are formed from it the same
// way. Per chunk, from the state S at its start:
//   v_newᵀ = Uᵀ − Sᵀ Wᵀ        8 × m64n64k16 (16 with split operands: −Sᵀ's lo half too)
//   O_interᵀ = Sᵀ q̂ᵀ           8 × m64n64k16 (24 split), scaled by exp(G) into the output
//   Sᵀ ← exp(G_last) Sᵀ + (v_new ⊙ exp(G_last − G))ᵀ k̂   4 × m64n128k16 (12 split)
// A comes from registers (−Sᵀ, then the scaled v_newᵀ), B from shared memory: W and q̂ rows as
// K-major tiles (rows of d_k), k̂ rows as an MN-major tile for the update (its rows are the
// product's K). Each tile is [64 rows][128 BF16] kept as two 128-byte-swizzle atoms of 64 rows ×
// 64 BF16 (d_k 0–63, then 64–127), copied in with cp.async; the next chunk's copy runs while this
// chunk's MMAs do, as in the mma.sync pass. O_interᵀ's MMAs run while v_new is written out and
// scaled, and while the update is issued; its result is written once the update is in flight.
// The numerics are those of the mma.sync whole-out pass up to the order of the fp32 sums inside
// each k16 step. Resources: 128 threads, one block per SM (shared memory), grid (v heads, 2,
// sequences): 96 blocks for the 27B's 48 heads.
#include <cuda_bf16.h>
#include <cuda_pipeline.h>

#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gated_delta_chunk_device.cuh"
#include "backends/cuda/gated_delta_chunk_launch.h"
#include "backends/cuda/hopper.cuh"
#include "backends/cuda/tensor_map.h"
#include "backends/cuda/wgmma_bf16.cuh"

namespace stave::cuda::dev::delta_chunk {
namespace {

using hopper::fence_all;
using hopper::fence_proxy_async;
using hopper::sw128_desc;
using hopper::sw128_offset;
using hopper::wgmma_commit;
using hopper::wgmma_fence;
using hopper::wgmma_wait;
using hopper::wgmma_bf16_m64n128k16_rs_mn;
using hopper::wgmma_bf16_m64n64k16_rs;

constexpr int kWgThreads = 128;           // one warp group
constexpr int kWgCols = 64;               // state columns per block, 16 per warp
constexpr int kAtomBytes = kC * 128;      // 64 rows × 128 bytes (64 BF16 of d_k), 128-byte swizzle
constexpr int kTileBytes = 2 * kAtomBytes; // [64][128] BF16

// Tiles per chunk: W, k̂, q̂ (and with split operands k̂'s and q̂'s lo halves).
template <bool kSplit>
constexpr int kTiles = kSplit ? 5 : 3;
// Shared memory: two buffer sets of tiles (chunk parity), then two of G's factors (exp(G) and
// exp(G_last − G), 64 floats each), then the warps' Uᵀ columns (kLdU rows), then the TMA form's
// two mbarriers (one per buffer set). Tiles 1024-byte aligned (the swizzle is by address).
constexpr int kGf = 2 * kC;  // floats of G's factors per buffer set
template <bool kSplit>
constexpr size_t kWgSmem = 2 * kTiles<kSplit> * kTileBytes + 2 * kGf * sizeof(float) + kWgCols * kLdU * sizeof(float) +
                           2 * sizeof(uint64_t);
static_assert(kWgSmem<true> + 1024 + 1024 <= 228 * 1024, "the split wgmma pass must fit one SM");

// Byte offset of the 16-byte chunk c (0–15: BF16 8c … 8c + 7 of d_k) of row r in a tile.
__device__ inline uint32_t tile_offset(int r, int c) { return (c >> 3) * kAtomBytes + sw128_offset(r, c & 7); }

// Starts the copy of the rows t0 … t0+len−1 of k head kh of x ([tokens][n_k][128] BF16) into a
// tile; rows past len are zeroed.
__device__ inline void fetch_tile_rows(const bf16* x, int64_t t0, int len, int n_k, int kh, unsigned char* tile,
                                       int tid) {
  for (int e = tid; e < kC * kD / 8; e += kWgThreads) {
    const int r = e / (kD / 8), c = e % (kD / 8);
    unsigned char* d = tile + tile_offset(r, c);
    if (r < len)
      copy16(d, x + ((t0 + r) * n_k + kh) * kD + 8 * c);
    else
      *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
  }
}

// The TMA form's tensor maps (STAVE_CUDA_DELTA_STATE=wgmma-tma): W as bytes [chunks · n_v · 64,
// 256] and q̂, k̂ (and their lo halves) as bytes [tokens, n_k · 256], read in boxes of 64 rows ×
// 128 bytes (one swizzle atom: 64 BF16 of d_k) in the 128-byte swizzle.
struct TileMaps {
  CUtensorMap w, k, q, kl, ql;
};

// Starts chunk slot's W ([64][128] BF16, rows past the chunk already zero), its k̂ and q̂ rows
// (and their lo halves) and its factors exp(G), exp(G_last − G) (gf: [2][64]) into one buffer
// set, and commits them. kTma: thread 0 issues the
// tiles as 2 TMA boxes each, completing on `bar` (G still by cp.async); rows past the chunk then
// hold the next rows' k̂ and q̂ (finite; they meet zero rows of v_new, and their outputs are not
// written) or TMA's zeros past the last token, where the cp.async form writes zeros (G's
// factors still by cp.async).
template <bool kSplit, bool kTma>
__device__ inline void fetch_chunk(const TileMaps& maps, uint64_t* bar, const bf16* W, const bf16* kn,
                                   const bf16* kn_lo, const bf16* qn, const bf16* qn_lo, const float* gexp,
                                   const float* gdec, int64_t slot, int64_t t0, int len, int n_k, int kh,
                                   unsigned char* tiles, float* gf, int tid) {
  if constexpr (kTma) {
    if (tid == 0) {
      hopper::mbar_arrive_expect_tx(bar, kTiles<kSplit> * kTileBytes);
      const CUtensorMap* rows[4] = {&maps.k, &maps.q, &maps.kl, &maps.ql};
      for (int atom = 0; atom < 2; ++atom) {
        hopper::tma_load_2d(&maps.w, tiles + atom * kAtomBytes, 128 * atom, static_cast<int>(slot * kC), bar);
        for (int i = 0; i < kTiles<kSplit> - 1; ++i)
          hopper::tma_load_2d(rows[i], tiles + (i + 1) * kTileBytes + atom * kAtomBytes, kh * 256 + 128 * atom,
                              static_cast<int>(t0), bar);
      }
    }
  } else {
    const bf16* w = W + slot * kC * kD;
    for (int e = tid; e < kC * kD / 8; e += kWgThreads) {
      const int r = e / (kD / 8), c = e % (kD / 8);
      copy16(tiles + tile_offset(r, c), w + r * kD + 8 * c);
    }
    fetch_tile_rows(kn, t0, len, n_k, kh, tiles + 1 * kTileBytes, tid);
    fetch_tile_rows(qn, t0, len, n_k, kh, tiles + 2 * kTileBytes, tid);
    if constexpr (kSplit) {
      fetch_tile_rows(kn_lo, t0, len, n_k, kh, tiles + 3 * kTileBytes, tid);
      fetch_tile_rows(qn_lo, t0, len, n_k, kh, tiles + 4 * kTileBytes, tid);
    }
  }
  if (tid < kC / 4)
    copy16(gf + 4 * tid, gexp + slot * kC + 4 * tid);
  else if (tid < kC / 2)
    copy16(gf + 4 * tid, gdec + slot * kC + 4 * (tid - kC / 4));
  __pipeline_commit();
}

// Descriptor of a K-major B tile (rows = the product's N, d_k = its K) at its k16 step kk: the
// step's 32 bytes within the 128-byte rows of atom kk / 4.
__device__ inline uint64_t k_major_desc(uint32_t tile, int kk) {
  return sw128_desc(tile + (kk >> 2) * kAtomBytes + (kk & 3) * 32);
}

// Descriptor of an MN-major B tile (rows = the product's K, d_k = its N) at its k16 step kt: 16
// rows are two groups of 8 (1024 bytes apart: the stride byte offset); N's 128 columns are the two
// atoms (kAtomBytes apart: the leading byte offset); 128-byte swizzle.
__device__ inline uint64_t mn_major_desc(uint32_t tile, int kt) {
  return hopper::sw128_mn_desc(tile + kt * 2 * 1024, kAtomBytes);
}

template <bool kSplit, bool kTma>
__global__ void __launch_bounds__(kWgThreads, 1) state_wgmma_kernel(
    const __grid_constant__ TileMaps maps, const bf16* kn, const bf16* kn_lo, const bf16* qn, const bf16* qn_lo,
    const float* gexp, const float* gdec, const bf16* W, const float* Ut, int64_t tokens, const int* table, int nc,
    int n_k, int n_v, float* states, bf16* vnt, bf16* vnt_lo, float* out) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // The swizzle is by address bits: the tiles start 1024-byte aligned. The offset is added to
  // smem_raw (not formed through an integer) so that the compiler keeps every pointer below in
  // the shared window: shared loads, not generic ones (Nsight Compute, 2026-12-07: the generic
  // loads of G and Uᵀ were long-scoreboard stalls on the chunk's critical path).
  unsigned char* smem = smem_raw + ((1024 - (hopper::smem_u32(smem_raw) & 1023)) & 1023);
  unsigned char* tiles = smem;                                           // 2 × kTiles tiles
  float* gbuf = reinterpret_cast<float*>(smem + 2 * kTiles<kSplit> * kTileBytes);  // 2 × [2][64] G's factors
  uint64_t* bars = reinterpret_cast<uint64_t*>(gbuf + 2 * kGf + kWgCols * kLdU);    // the TMA form's
  const int h = blockIdx.x, b = blockIdx.z, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int col0 = blockIdx.y * kWgCols + warp * 16;  // this warp's first state column
  float* Ub = gbuf + 2 * kGf + warp * 16 * kLdU;      // [16][kLdU] this warp's Uᵀ
  const int kh = h / (n_v / n_k);
  const bf16* klo = kSplit ? kn_lo : nullptr;
  const bf16* qlo = kSplit ? qn_lo : nullptr;
  const int64_t row_stride = static_cast<int64_t>(n_v) * kD;
  float* st = states + (static_cast<int64_t>(b) * n_v + h) * kD * kD;  // [d_k][d_v]
  // Sᵀ: 16 n8 tiles over d_k; element i of tile j is (column col0 + g + 8·(i / 2), row 8j + 2t + i % 2).
  float s[kD / 8][4];
  load_state_fragment(s, st, 0, col0, g, t);
  const int c_begin = table ? table[2 * nc + b] : 0, c_end = table ? table[2 * nc + b + 1] : nc;
  if constexpr (kTma) {
    if (tid == 0) {
      hopper::mbar_init(&bars[0], 1);
      hopper::mbar_init(&bars[1], 1);
      hopper::mbar_init_fence();
    }
    __syncthreads();
  }
  if (c_begin < c_end) {
    int64_t t0;
    int len;
    chunk_rows(table, nc, tokens, c_begin, t0, len);
    fetch_chunk<kSplit, kTma>(maps, &bars[0], W, kn, klo, qn, qlo, gexp, gdec, static_cast<int64_t>(c_begin) * n_v + h,
                              t0, len, n_k, kh, tiles, gbuf, tid);
    fetch_u_warp(Ut, static_cast<int64_t>(c_begin) * n_v + h, col0, Ub, lane);
  }
  uint32_t va[kC / 16][4], val[kC / 16][4];  // the update's A fragments, alive until its MMAs are done
  for (int ci = c_begin; ci < c_end; ++ci) {
    const int64_t slot = static_cast<int64_t>(ci) * n_v + h;
    const int parity = (ci - c_begin) & 1;
    unsigned char* tl = tiles + parity * kTiles<kSplit> * kTileBytes;
    const uint32_t w_tile = hopper::smem_u32(tl), k_tile = w_tile + kTileBytes, q_tile = w_tile + 2 * kTileBytes;
    const uint32_t kl_tile = w_tile + 3 * kTileBytes, ql_tile = w_tile + 4 * kTileBytes;
    const float* ge = gbuf + parity * kGf;  // exp(G) of the chunk's rows
    const float* gd = ge + kC;                // exp(G_last − G)
    int64_t t0;
    int len;
    chunk_rows(table, nc, tokens, ci, t0, len);
    // The last chunk's update is done (s holds it; its A fragments and tiles are free), this
    // chunk's copies are in place and visible to the MMAs' (async) proxy, and every warp is past
    // the last chunk's buffers.
    wgmma_wait<0>();
    fence_all(s);
    if (ci > c_begin) {
      fence_all(va);
      if constexpr (kSplit) fence_all(val);
    }
    __pipeline_wait_prior(0);
    if constexpr (kTma) hopper::mbar_wait(&bars[parity], ((ci - c_begin) >> 1) & 1);  // this set's n-th use
    fence_proxy_async();
    __syncthreads();
    // v_newᵀ starts as Uᵀ: element i of tile n is (column col0 + g + 8·(i / 2), row 8n + 2t + i % 2).
    float v[kC / 8][4];
#pragma unroll
    for (int n = 0; n < kC / 8; ++n)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float2 x = *reinterpret_cast<const float2*>(Ub + (g + 8 * half) * kLdU + 8 * n + 2 * t);
        v[n][2 * half] = x.x;
        v[n][2 * half + 1] = x.y;
      }
    // −Sᵀ as A fragments (hi and, split, lo) for the 8 k16 steps over d_k; O_interᵀ from zero.
    uint32_t a[kD / 16][4], al[kD / 16][4];
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) accumulators_as_a_pair<kSplit>(a[kk], al[kk], s[2 * kk], s[2 * kk + 1], -1.0f);
    float o[kC / 8][4];
#pragma unroll
    for (int n = 0; n < kC / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[n][i] = 0.0f;
    wgmma_fence();
    // Group 1: v_newᵀ −= Sᵀ Wᵀ (W one BF16 array; −Sᵀ's lo half first).
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      if constexpr (kSplit) wgmma_bf16_m64n64k16_rs(v, al[kk], k_major_desc(w_tile, kk));
      wgmma_bf16_m64n64k16_rs(v, a[kk], k_major_desc(w_tile, kk));
    }
    wgmma_commit();
    // Group 2: −O_interᵀ = (−Sᵀ) q̂ᵀ (small terms first).
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      if constexpr (kSplit) {
        wgmma_bf16_m64n64k16_rs(o, al[kk], k_major_desc(q_tile, kk));
        wgmma_bf16_m64n64k16_rs(o, a[kk], k_major_desc(ql_tile, kk));
      }
      wgmma_bf16_m64n64k16_rs(o, a[kk], k_major_desc(q_tile, kk));
    }
    wgmma_commit();
    // The next chunk's copies start once this chunk's MMAs are issued: an MMA starts when the
    // last of the four warps issues it, so no warp does other work before them.
    __syncwarp();  // every lane has read its part of Uᵀ: the next chunk's may come into Ub
    if (ci + 1 < c_end) {
      fetch_u_warp(Ut, slot + n_v, col0, Ub, lane);
      int64_t next_t0;
      int next_len;
      chunk_rows(table, nc, tokens, ci + 1, next_t0, next_len);
      fetch_chunk<kSplit, kTma>(maps, &bars[parity ^ 1], W, kn, klo, qn, qlo, gexp, gdec, slot + n_v, next_t0,
                                next_len, n_k, kh, tiles + (parity ^ 1) * kTiles<kSplit> * kTileBytes,
                                gbuf + (parity ^ 1) * kGf, tid);
    }
    wgmma_wait<1>();  // group 1 done: v_newᵀ
    fence_all(v);
    // v_newᵀ out (BF16, hi and lo), then its columns scaled by exp(G_last − G) as the update's A.
    bf16* vt = vnt + slot * kD * kC;
    bf16* vt_lo = kSplit ? vnt_lo + slot * kD * kC : nullptr;
    store_vnew_then_scale_by<kSplit>(v, gd, vt, vt_lo, col0, g, t);
#pragma unroll
    for (int kt = 0; kt < kC / 16; ++kt) accumulators_as_a_pair<kSplit>(va[kt], val[kt], v[2 * kt], v[2 * kt + 1], 1.0f);
    const float decay = ge[len - 1];  // exp(G_last)
#pragma unroll
    for (int j = 0; j < kD / 8; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[j][i] *= decay;
    wgmma_fence();
    // Group 3: Sᵀ += (scaled v_new)ᵀ k̂ over the chunk's rows (k̂ MN-major; small terms first).
#pragma unroll
    for (int kt = 0; kt < kC / 16; ++kt) {
      if constexpr (kSplit) {
        wgmma_bf16_m64n128k16_rs_mn(s, va[kt], mn_major_desc(kl_tile, kt));
        wgmma_bf16_m64n128k16_rs_mn(s, val[kt], mn_major_desc(k_tile, kt));
      }
      wgmma_bf16_m64n128k16_rs_mn(s, va[kt], mn_major_desc(k_tile, kt));
    }
    wgmma_commit();
    wgmma_wait<1>();  // group 2 done: −O_interᵀ (its A fragments are free after this)
    fence_all(o);
    fence_all(a);
    if constexpr (kSplit) fence_all(al);
    // Element i of tile n is (column col0 + g + 8·(i / 2), row 8n + 2t + i % 2): from this
    // thread's first row on, rows 8n and 8n + 1 further. A whole chunk writes without a row test.
    float* o_row = out + (t0 + 2 * t) * row_stride + static_cast<int64_t>(h) * kD + col0 + g;
    if (len == kC) {
#pragma unroll
      for (int n = 0; n < kC / 8; ++n, o_row += 8 * row_stride) {
        const float e0 = ge[8 * n + 2 * t], e1 = ge[8 * n + 2 * t + 1];
        o_row[0] = -o[n][0] * e0;
        o_row[row_stride] = -o[n][1] * e1;
        o_row[8] = -o[n][2] * e0;
        o_row[row_stride + 8] = -o[n][3] * e1;
      }
    } else {
#pragma unroll
      for (int n = 0; n < kC / 8; ++n, o_row += 8 * row_stride)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int row = 8 * n + 2 * t + i % 2;
          if (row < len) o_row[(i % 2) * row_stride + 8 * (i / 2)] = -o[n][i] * ge[row];
        }
    }
  }
  wgmma_wait<0>();
  fence_all(s);
  if (c_begin < c_end) {  // the last update's A fragments stay untouched until it is done
    fence_all(va);
    if constexpr (kSplit) fence_all(val);
  }
  store_state_fragment(s, st, 0, col0, g, t);
}

template <bool kSplit, bool kTma>
void launch(const ChunkGrid& g, const ChunkScratch& x, float* states, float* out, cudaStream_t s) {
  constexpr size_t smem = kWgSmem<kSplit> + 1024;  // + the alignment of the tiles
  allow_smem(state_wgmma_kernel<kSplit, kTma>, smem);
  TileMaps maps{};
  if constexpr (kTma) {
    const int64_t w_rows = static_cast<int64_t>(g.nc) * g.nv * kC, qk_cols = static_cast<int64_t>(g.nk) * kD * 2;
    const auto sw = CU_TENSOR_MAP_SWIZZLE_128B;
    maps.w = byte_map(x.W, w_rows, kD * 2, 128, kC, sw);
    maps.k = byte_map(x.kn, g.tokens, qk_cols, 128, kC, sw);
    maps.q = byte_map(x.qn, g.tokens, qk_cols, 128, kC, sw);
    if constexpr (kSplit) {
      maps.kl = byte_map(x.kn_lo, g.tokens, qk_cols, 128, kC, sw);
      maps.ql = byte_map(x.qn_lo, g.tokens, qk_cols, 128, kC, sw);
    }
  }
  state_wgmma_kernel<kSplit, kTma><<<dim3(g.nv, kD / kWgCols, static_cast<unsigned>(g.n_seq)), kWgThreads, smem, s>>>(
      maps, x.kn, x.kn_lo, x.qn, x.qn_lo, x.gexp, x.gdec, x.W, x.U, g.tokens, g.table, g.nc, g.nk, g.nv, states, x.vnew,
      x.vnew_lo, out);
  STAVE_CUDA_LAUNCHED();
}

}  // namespace

void launch_state_wgmma(const ChunkGrid& g, const ChunkScratch& x, bool split, bool tma, float* states, float* out,
                        cudaStream_t s) {
  if (tma && !tensor_maps_available()) tma = false;
  if (split && tma)
    launch<true, true>(g, x, states, out, s);
  else if (split)
    launch<true, false>(g, x, states, out, s);
  else if (tma)
    launch<false, true>(g, x, states, out, s);
  else
    launch<false, false>(g, x, states, out, s);
}

}  // namespace stave::cuda::dev::delta_chunk
