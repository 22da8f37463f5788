// The BF16 flash attention of attention_flash_bf16.cu on Hopper's warp-group MMA
// (FlashBf16Kernel::kWgmma; head_dim 128 or 256): the same algorithm, precision and contract,
// with each tile's products as a few wgmma instructions where the mma.sync kernel issues hundreds,
// and the next K and V tiles copied while this one's products and softmax run.
//
// A block is 128 queries of one head: two warp groups of 64 rows each, sharing the K and V tiles.
// Per key tile of 64, each warp group
//   S = Q Kᵀ      D / 16 × m64n64k16, Q and K K-major in shared memory (128-byte swizzle);
//   softmax       online, in the accumulators' registers (the mma.sync kernel's code: each row's
//                 64 scores lie in one quad of lanes, as in its m16n8 fragments);
//   O += P V      4 × m64n{D}k16, P from registers (the scores rounded to BF16, mma.sync's A
//                 fragment), V as an MN-major tile (its rows are the product's K).
// O stays in registers (D / 2 fp32 per thread). P V runs on while the next tile's S is issued;
// the wait for S covers it, before the softmax rescales O.
//
// Shared memory: Q [128][D] and two buffers of K [64][D] and V [64][D], BF16, each stored as
// D / 64 atoms of 64-element (128-byte) rows in the 128-byte swizzle: 64 + 128 KB for D = 256.
// One block per SM. Copies are cp.async (16 bytes a thread); K of tile j + 1 goes out once
// every warp group's S of tile j − 1 is done, V of tile j + 1 once their P V of tile j − 1 is.
#include <cuda_bf16.h>

#include <cstdint>

#include "backends/cuda/attention_flash_wgmma.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/flash_softmax.cuh"
#include "backends/cuda/hopper.cuh"
#include "backends/cuda/wgmma_bf16.cuh"
#include "util/env_choice.h"

namespace stave::cuda::dev {
namespace {

using bf16 = __nv_bfloat16;
using hopper::fence_all;
using hopper::fence_proxy_async;
using hopper::smem_u32;
using hopper::sw128_desc;
using hopper::sw128_mn_desc;
using hopper::sw128_offset;
using hopper::wgmma_commit;
using hopper::wgmma_fence;
using hopper::wgmma_wait;

constexpr int kRows = 128;     // queries per block: two warp groups of 64
constexpr int kKeys = 64;      // keys per tile
constexpr int kThreads = 256;  // two warp groups
constexpr float kLog2e = 1.4426950408889634f;

// Bytes of a [rows][D] BF16 tile: D / 64 atoms of rows × 128 bytes.
template <int D>
__host__ __device__ constexpr int tile_bytes(int rows) {
  return D / 64 * rows * 128;
}
template <int D>
constexpr size_t smem_bytes() {
  return tile_bytes<D>(kRows) + 4 * tile_bytes<D>(kKeys) + 1024;  // + the tiles' 1024-byte alignment
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;  // 0: the 16 bytes are zero-filled, nothing is read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Starts the copy of rows row0 … row0 + rows − 1 (those ≥ end zero-filled) of a [*, stride] BF16
// matrix's columns col0 … col0 + D − 1 into a swizzled tile at `tile` (shared address).
template <int D>
__device__ inline void load_rows(uint32_t tile, const bf16* src, int64_t stride, int64_t col0, int row0, int rows,
                                 int end) {
  constexpr int kChunks = D / 8;  // 16-byte pieces per row
  for (int c = static_cast<int>(threadIdx.x); c < rows * kChunks; c += kThreads) {
    const int r = c / kChunks, chunk = c % kChunks, row = row0 + r;
    const bool ok = row < end;
    const uint32_t dst = tile + (chunk >> 3) * (rows * 128) + sw128_offset(r, chunk & 7);
    cp_async16(dst, src + static_cast<int64_t>(ok ? row : 0) * stride + col0 + 8 * chunk, ok);
  }
}

// O += P V for one tile: the MMA form for D.
template <int D>
__device__ __forceinline__ void mma_pv(float (&o)[D / 8][4], const uint32_t (&p)[4], uint64_t v) {
  if constexpr (D == 256)
    hopper::wgmma_bf16_m64n256k16_rs_mn(o, p, v);
  else
    hopper::wgmma_bf16_m64n128k16_rs_mn(o, p, v);
}

// What a thread of a block knows: the shared tiles (1024-byte aligned: the swizzle is by address
// bits), its warp group's rows and its own two rows, the keys the block sees.
template <int D>
struct Block {
  static constexpr uint32_t kQBytes = tile_bytes<D>(kRows), kTileBytes = tile_bytes<D>(kKeys);
  uint32_t sQ, sK, sV;  // Q; K of tile j in buffer j % 2 at sK + (j % 2) · kTileBytes, V likewise at sV
  uint32_t q_base;      // this warp group's 64 rows of Q: atom a's rows 64 wg … start 64 · 128 · wg bytes in
  int head, kv_head, i0, wg_row0, warp_row0, g, t;
  int key_end, n_tiles;
  int n_active;   // key tiles some row of this warp group sees (a prefix of the block's)
  int limit[2];   // last visible key of this thread's rows g and g + 8 of its warp's 16
  int wg_limit0;  // last visible key of this warp group's first row (the smallest limit of its rows)
  int64_t q_stride, kv_stride;

  __device__ Block(const unsigned char* smem_raw, int tokens, int q_pos0, int nq, int nkv) {
    sQ = (smem_u32(smem_raw) + 1023) & ~uint32_t{1023};
    sK = sQ + kQBytes;
    sV = sK + 2 * kTileBytes;
    // Heaviest query tiles first (the causal tail is short), as the mma.sync kernel.
    const int tile = static_cast<int>(gridDim.y) - 1 - static_cast<int>(blockIdx.y);
    head = static_cast<int>(blockIdx.x);
    kv_head = head / (nq / nkv);
    i0 = tile * kRows;
    const int wg = static_cast<int>(threadIdx.x) / 128, warp = (static_cast<int>(threadIdx.x) / 32) % 4;
    const int lane = static_cast<int>(threadIdx.x) & 31;
    g = lane >> 2;
    t = lane & 3;
    q_stride = static_cast<int64_t>(nq) * D;
    kv_stride = static_cast<int64_t>(nkv) * D;
    key_end = q_pos0 + min(i0 + kRows, tokens);
    n_tiles = (key_end + kKeys - 1) / kKeys;
    wg_row0 = i0 + wg * 64;
    warp_row0 = wg_row0 + warp * 16;
    n_active = min(n_tiles, (q_pos0 + wg_row0 + 63) / kKeys + 1);
    limit[0] = q_pos0 + warp_row0 + g;
    limit[1] = limit[0] + 8;
    wg_limit0 = q_pos0 + wg_row0;
    q_base = sQ + wg * 64 * 128;
  }
  __device__ void load_q(const bf16* q, int tokens) const {
    load_rows<D>(sQ, q, q_stride, static_cast<int64_t>(head) * D, i0, kRows, tokens);
  }
  // Starts the copy of key tile j of k or v into buffer j % 2 of `tiles` (sK or sV).
  __device__ void load_tile(uint32_t tiles, const bf16* x, int j) const {
    load_rows<D>(tiles + (j & 1) * kTileBytes, x, kv_stride, static_cast<int64_t>(kv_head) * D, j * kKeys, kKeys,
                 key_end);
  }
  // Starts the copy of key tile j + 1 (if there is one) into its buffer of `tiles`, and commits
  // the cp.async group (empty past the last tile, so that the groups keep their count).
  __device__ void load_next(uint32_t tiles, const bf16* x, int j) const {
    if (j + 1 < n_tiles) load_tile(tiles, x, j + 1);
    cp_async_commit();
  }
  // Whether every row of this warp group sees every key of tile j (no key past key_end or past a
  // row's limit): its softmax needs no masks.
  __device__ __forceinline__ bool whole(int j) const {
    const int last = (j + 1) * kKeys - 1;
    return last < key_end && last <= wg_limit0;
  }
  // s = Q Kᵀ for key tile j (from zero), issued; the caller commits.
  __device__ __forceinline__ void issue_s(float (&s)[kKeys / 8][4], int j) const {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t step = (kk & 3) * 32;  // the k16 step's 32 bytes in atom kk / 4's rows
      const uint64_t a = sw128_desc(q_base + (kk >> 2) * (kRows * 128) + step);
      const uint64_t b = sw128_desc(sK + (j & 1) * kTileBytes + (kk >> 2) * (kKeys * 128) + step);
      hopper::wgmma_bf16_m64n64k16_ss(s, a, b, kk > 0);
    }
  }
  // o += P V for key tile j, issued; the caller commits.
  __device__ __forceinline__ void issue_pv(float (&o)[D / 8][4], const uint32_t (&p)[kKeys / 16][4], int j) const {
#pragma unroll
    for (int kb = 0; kb < kKeys / 16; ++kb)
      mma_pv<D>(o, p[kb], sw128_mn_desc(sV + (j & 1) * kTileBytes + kb * 2 * 1024, kKeys * 128));
  }
  // Every valid row saw key 0 (positions are ≥ 0), so its sum is ≥ 1 (the max term is exp2(0)).
  __device__ void store(const float (&o)[D / 8][4], const float (&row_sum)[2], float* out, int tokens) const {
    const float inv[2] = {1.0f / row_sum[0], 1.0f / row_sum[1]};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = warp_row0 + g + 8 * r;
      if (row >= tokens) continue;
      float* dst = out + static_cast<int64_t>(row) * q_stride + static_cast<int64_t>(head) * D + 2 * t;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<float2*>(dst + n * 8) = make_float2(o[n][2 * r] * inv[r], o[n][2 * r + 1] * inv[r]);
    }
  }
};

// Grid: (query heads, query tiles of 128). The contract of flash_bf16_kernel (attention_flash_bf16.cu).
// Per key tile: S, then its softmax, then its P V, which runs on while the next tile's S is issued.
// kLean (FlashTile::kLean): the softmax of flash::softmax_tile_fma (the scale inside the
// exponential's FMA, no masks on tiles the warp group sees whole), O rescaled only where a row's
// max moved (by a factor of exactly 1 otherwise: the same bits), and each next tile's copy issued
// after this tile's MMAs instead of before them. Else (kPlain) flash::softmax_tile's softmax, as the
// mma.sync kernels, and the copies first. Between S's wait and P V's issue the tensor cores have
// nothing of this block's to do, so every instruction there counts.
template <int D, bool kLean>
__global__ void __launch_bounds__(kThreads, 1)
    flash_wgmma_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                       float* __restrict__ out, int tokens, int q_pos0, int nq, int nkv, float scale_log2) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const Block<D> blk(smem_raw, tokens, q_pos0, nq, nkv);
  // Group: Q and K of tile 0; then V of tile 0.
  blk.load_q(q, tokens);
  blk.load_tile(blk.sK, k, 0);
  cp_async_commit();
  blk.load_tile(blk.sV, v, 0);
  cp_async_commit();

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float s[kKeys / 8][4] = {};
  fence_all(o);  // the zeros are written here, not moved into a pipeline stage of the MMAs
  fence_all(s);
  uint32_t p[kKeys / 16][4] = {};  // P of the last tile: read by its P V until the next wait
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

  for (int jt = 0; jt < blk.n_tiles; ++jt) {
    // K of tile jt has landed (pending after this: at most V of tile jt); every warp group is
    // done with the S of tile jt − 1, so K of tile jt + 1 may go into its buffer.
    cp_async_wait<1>();
    fence_proxy_async();
    __syncthreads();
    if constexpr (!kLean) blk.load_next(blk.sK, k, jt);
    const bool active = jt < blk.n_active;  // some row of this warp group sees a key of the tile
    if (active) {
      wgmma_fence();
      blk.issue_s(s, jt);
      wgmma_commit();
    }
    if constexpr (kLean) blk.load_next(blk.sK, k, jt);  // after the MMAs' issue (its buffer is not theirs)
    wgmma_wait<0>();  // S of tile jt, and P V of the last tile this warp group took part in
    fence_all(s);
    fence_all(o);
    fence_all(p);
    if (active) {
      float rescale[2];
      if constexpr (kLean) {
        if (blk.whole(jt))
          flash::softmax_tile_fma<kKeys, false>(s, jt * kKeys, blk.key_end, blk.limit, scale_log2, blk.t, row_max,
                                                row_sum, rescale);
        else
          flash::softmax_tile_fma<kKeys, true>(s, jt * kKeys, blk.key_end, blk.limit, scale_log2, blk.t, row_max,
                                               row_sum, rescale);
        if (rescale[0] != 1.0f || rescale[1] != 1.0f) flash::rescale_rows(o, rescale);
      } else {
        flash::softmax_tile<kKeys, true>(s, jt * kKeys, blk.key_end, true, blk.limit, scale_log2, blk.t, row_max,
                                         row_sum, rescale);
        flash::rescale_rows(o, rescale);
      }
      flash::pack_p<kKeys>(s, p);
    }
    // V of tile jt has landed (pending after this: K of tile jt + 1); every warp group is done
    // with the P V of tile jt − 1, so V of tile jt + 1 may go into its buffer.
    cp_async_wait<1>();
    fence_proxy_async();
    __syncthreads();
    if constexpr (!kLean) blk.load_next(blk.sV, v, jt);
    if (active) {
      wgmma_fence();
      blk.issue_pv(o, p, jt);
      wgmma_commit();
    }
    if constexpr (kLean) blk.load_next(blk.sV, v, jt);
  }
  wgmma_wait<0>();
  fence_all(o);
  fence_all(p);
  blk.store(o, row_sum, out, tokens);
}

template <int D, bool kLean>
void launch(cudaStream_t stream, const AttentionShape& shape, const bf16* q, int64_t tokens, int64_t q_pos0,
            const bf16* k, const bf16* v, float* out) {
  constexpr size_t smem = smem_bytes<D>();
  constexpr auto kernel = flash_wgmma_kernel<D, kLean>;
  static const bool configured = [] {
    STAVE_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>(shape.n_q_heads), static_cast<unsigned>((tokens + kRows - 1) / kRows));
  kernel<<<grid, kThreads, smem, stream>>>(q, k, v, out, static_cast<int>(tokens), static_cast<int>(q_pos0),
                                           static_cast<int>(shape.n_q_heads), static_cast<int>(shape.n_kv_heads),
                                           shape.scale * kLog2e);
  STAVE_CUDA_LAUNCHED();
}

}  // namespace

bool flash_wgmma_supports(int64_t head_dim) { return head_dim == 128 || head_dim == 256; }

FlashTile flash_tile_from_env() {
  return env_choice<FlashTile>("STAVE_CUDA_FLASH_TILE", {{"plain", FlashTile::kPlain}, {"lean", FlashTile::kLean}});
}

void flash_wgmma(cudaStream_t stream, const AttentionShape& shape, const __nv_bfloat16* q, int64_t tokens,
                 int64_t q_pos0, const __nv_bfloat16* k, const __nv_bfloat16* v, float* out, FlashTile tile) {
  if (tile == FlashTile::kDefault) tile = flash_tile_from_env();
  const bool lean = tile == FlashTile::kLean;
  if (shape.head_dim == 256)
    lean ? launch<256, true>(stream, shape, q, tokens, q_pos0, k, v, out)
         : launch<256, false>(stream, shape, q, tokens, q_pos0, k, v, out);
  else
    lean ? launch<128, true>(stream, shape, q, tokens, q_pos0, k, v, out)
         : launch<128, false>(stream, shape, q, tokens, q_pos0, k, v, out);
}

}  // namespace stave::cuda::dev
