// Fast-precision causal GQA attention as one fused kernel on BF16 tensor cores (head dims 128 and
// 256 run the same algorithm on warp-group MMA by default since 2026-12-07: attention_flash_wgmma.cu;
// this file holds the entry, the BF16 copies and the mma.sync kernel), FlashAttention-2
// style: a block of 64 queries (4 warps × 16 rows) of one query head walks the keys it can see
// in tiles of 64; the scores stay in registers, softmax runs online (running max and sum per
// query, the partial output rescaled), nothing of size L × L reaches memory.
//
// Precision: q, k, v are rounded to bf16 (8 significant bits) by a conversion pass, the products
// Q·Kᵀ and P·V accumulate in fp32 (mma.sync m16n8k16), P is rounded to bf16 for the second
// product, the softmax statistics and the output stay fp32. Relative error of a score is about
// 2⁻⁸·(scale·Σ|q||k|)/√d-ish in practice; of an output about 1e-3 (see the tolerance note in
// tests/test_backend_ops.cpp). Exact precision never comes here.
//
// Shared memory per block: the Q tile [64 or 128, D] and one K and one V tile [64, D], bf16, rows
// padded to D + 8 elements (16 bytes) so that every ldmatrix phase (8 rows × 16 bytes) hits 32
// distinct banks. 3 × 64 × 264 × 2 B = 101 KB for D = 256 and 64 query rows: two blocks per SM
// (135 KB and one block with 128 rows). Loads are cp.async from the
// bf16 copies and overlap compute as in FlashAttention-2: V of this tile is fetched while
// S = Q·Kᵀ runs, K of the next tile while O += P·V runs.
//
// Fragments (PTX ISA, mma.m16n8k16 .bf16; lane = 4g + t):
//   A (16×16, row):  a0 (row g, k 2t..2t+1), a1 (row g+8, k 2t..), a2 (row g, k 2t+8..), a3 (row g+8, k 2t+8..)
//   B (16×8, col):   b0 (k 2t..2t+1, col g), b1 (k 2t+8..2t+9, col g)
//   C (16×8):        c0,c1 (row g, cols 2t, 2t+1), c2,c3 (row g+8, cols 2t, 2t+1)
// ldmatrix.x4 gives lane (g, t) of matrix i the pair (row g, cols 2t, 2t+1) of the i-th 8×8
// matrix whose 8 row addresses lanes 8i … 8i+7 supply; with .trans the pair (rows 2t, 2t+1, col g).
//   Q (A):  matrix i = rows (i&1)·8 …, cols kk + (i>>1)·8               → a0 a1 a2 a3
//   K (B of S = Q·Kᵀ, B(k, n) = K[n][k]): matrix i = keys n0 + (i>>1)·8 …, cols kk + (i&1)·8
//                                                                        → b0 b1 of key tile n0, then of n0 + 8
//   V (B of O = P·V, .trans): matrix i = keys kb + (i&1)·8 …, dims n0 + (i>>1)·8
//                                                                        → b0 b1 of dim tile n0, then of n0 + 8
//   P (A of O = P·V) is the S accumulator itself: for keys 16kb … 16kb+15, a0 a1 = S tile 2kb
//   (c0c1, c2c3) and a2 a3 = S tile 2kb+1, each pair rounded to bf16x2.
#include "backends/cuda/attention_flash_bf16.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cuda/attention_flash_wgmma.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/flash_softmax.cuh"
#include "stave/errors.h"
#include "util/env_choice.h"

namespace stave::cuda::dev {
namespace {

using bf16 = __nv_bfloat16;

// Queries per block: 64 (4 warps × 16 rows, two blocks per SM at D = 256) by default, or 128
// (8 warps, one block per SM: half the K/V traffic per product, as FlashAttention-2 runs head
// dim 256 on the A100/H100); bench_cuda_attention times both.
constexpr int kKeys = 64;  // keys per tile
template <int kRows>
__host__ __device__ constexpr int threads_for() { return kRows / 16 * 32; }
constexpr float kLog2e = 1.4426950408889634f;

template <int D>
__host__ __device__ constexpr int row_stride() { return D + 8; }  // bf16 elements per shared row

template <int D, int kRows>
constexpr size_t smem_bytes() {
  return static_cast<size_t>(kRows + 2 * kKeys) * row_stride<D>() * sizeof(bf16);
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(uint32_t smem, const void* gmem, bool valid) {
  const int bytes = valid ? 16 : 0;  // 0: the 16 bytes are zero-filled, nothing is read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

using flash::pack_bf16;

// x [n4 · 4] fp32 → y [n4 · 4] bf16 (round to nearest even), 16 bytes in, 8 out per step.
__global__ void to_bf16_kernel(const float4* __restrict__ x, int64_t n4, uint2* __restrict__ y) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4; i += stride) {
    const float4 f = x[i];
    y[i] = make_uint2(pack_bf16(f.x, f.y), pack_bf16(f.z, f.w));
  }
}

// Grid: (query heads, query tiles). q [tokens, nq·D], k/v [≥ key_end, nkv·D] bf16; out
// [tokens, nq·D] fp32. Query i sits at position q_pos0 + i and sees keys 0 … q_pos0 + i.
// scale_log2 = scale · log2(e): the softmax runs in base 2 (exp2f), the same function.
template <int D, int kRows>
__global__ void __launch_bounds__(threads_for<kRows>(), kRows == 64 ? 2 : 1)
    flash_bf16_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                      float* __restrict__ out, int tokens, int q_pos0, int nq, int nkv, float scale_log2) {
  constexpr int S = row_stride<D>();
  constexpr int kThreads = threads_for<kRows>();
  constexpr int kChunks = D / 8;  // 16-byte pieces (8 bf16) per row
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* sQ = reinterpret_cast<bf16*>(smem_raw);
  bf16* sK = sQ + kRows * S;
  bf16* sV = sK + kKeys * S;

  // Blocks start in x-then-y order: every head's tile with the most keys (the last queries)
  // first, the lightest last, so the tail of the grid is short.
  const int tile = static_cast<int>(gridDim.y) - 1 - static_cast<int>(blockIdx.y);
  const int head = static_cast<int>(blockIdx.x);
  const int kv_head = head / (nq / nkv);
  const int i0 = tile * kRows;
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;
  const int64_t q_stride = static_cast<int64_t>(nq) * D, kv_stride = static_cast<int64_t>(nkv) * D;
  // Keys any query of this block sees, and how many key tiles that is.
  const int key_end = q_pos0 + min(i0 + kRows, tokens);
  const int n_tiles = (key_end + kKeys - 1) / kKeys;

  for (int c = static_cast<int>(threadIdx.x); c < kRows * kChunks; c += kThreads) {
    const int r = c / kChunks, col = (c % kChunks) * 8, row = i0 + r;
    const bool ok = row < tokens;
    cp_async16(smem_addr(sQ + r * S + col), q + static_cast<int64_t>(ok ? row : 0) * q_stride + head * D + col, ok);
  }
  // Rows past key_end are zero-filled: their scores are masked and their values multiply p = 0,
  // so nothing outside k/v is read and no stale shared memory (possibly NaN) enters the sums.
  auto load_tile = [&](bf16* dst, const bf16* src, int j0) {
    for (int c = static_cast<int>(threadIdx.x); c < kKeys * kChunks; c += kThreads) {
      const int r = c / kChunks, col = (c % kChunks) * 8, key = j0 + r;
      const bool ok = key < key_end;
      cp_async16(smem_addr(dst + r * S + col), src + static_cast<int64_t>(ok ? key : 0) * kv_stride + kv_head * D + col,
                 ok);
    }
  };
  load_tile(sK, k, 0);
  cp_async_commit();  // one group: Q and the first K tile

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
  const int warp_row0 = i0 + warp * 16;
  // Last visible key of this thread's two rows (g and g + 8 of the warp's 16).
  const int limit[2] = {q_pos0 + warp_row0 + g, q_pos0 + warp_row0 + g + 8};
  // Per-lane ldmatrix row addresses (see the file comment), in bytes of shared memory.
  const uint32_t q_addr = smem_addr(sQ + (warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * S + (lane >> 4) * 8);
  const uint32_t k_addr = smem_addr(sK + ((lane & 7) + (lane >> 4) * 8) * S + ((lane >> 3) & 1) * 8);
  const uint32_t v_addr = smem_addr(sV + ((lane & 7) + ((lane >> 3) & 1) * 8) * S + (lane >> 4) * 8);
  constexpr uint32_t kB = sizeof(bf16);

  for (int jt = 0; jt < n_tiles; ++jt) {
    const int j0 = jt * kKeys;
    cp_async_wait_all();  // this thread's copies of K (and at first Q) have landed
    __syncthreads();      // everybody's have; and every warp is done with the previous V tile
    load_tile(sV, v, j0);
    cp_async_commit();
    // A warp whose 16 queries all precede this tile's keys has nothing to do here (it still
    // takes part in the copies and barriers).
    const bool active = j0 <= q_pos0 + warp_row0 + 15;
    float s[kKeys / 8][4];
    if (active) {
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll 4
      for (int kk = 0; kk < D; kk += 16) {
        uint32_t a[4];
        ldmatrix_x4(a, q_addr + kk * kB);
#pragma unroll
        for (int np = 0; np < kKeys / 16; ++np) {
          uint32_t b[4];
          ldmatrix_x4(b, k_addr + (np * 16 * S + kk) * kB);
          mma_bf16(s[2 * np], a, b[0], b[1]);
          mma_bf16(s[2 * np + 1], a, b[2], b[3]);
        }
      }
      // Scale (base 2), mask, and the online softmax update of this thread's two rows.
      float rescale[2];
      flash::softmax_tile<kKeys, true>(s, j0, key_end, true, limit, scale_log2, t, row_max, row_sum, rescale);
      flash::rescale_rows(o, rescale);
    }
    cp_async_wait_all();  // this thread's V copies have landed
    __syncthreads();      // everybody's have, and every warp is done reading K
    if (jt + 1 < n_tiles) load_tile(sK, k, j0 + kKeys);
    cp_async_commit();
    if (active) {
      // O += P·V with P straight from the score accumulators.
#pragma unroll
      for (int kb = 0; kb < kKeys / 16; ++kb) {
        const uint32_t a[4] = {pack_bf16(s[2 * kb][0], s[2 * kb][1]), pack_bf16(s[2 * kb][2], s[2 * kb][3]),
                               pack_bf16(s[2 * kb + 1][0], s[2 * kb + 1][1]),
                               pack_bf16(s[2 * kb + 1][2], s[2 * kb + 1][3])};
#pragma unroll
        for (int np = 0; np < D / 16; ++np) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, v_addr + (kb * 16 * S + np * 16) * kB);
          mma_bf16(o[2 * np], a, b[0], b[1]);
          mma_bf16(o[2 * np + 1], a, b[2], b[3]);
        }
      }
    }
  }

  // Every valid row saw key 0 (positions are ≥ 0), so its sum is ≥ 1 (the max term is exp2(0)).
  const float inv[2] = {1.0f / row_sum[0], 1.0f / row_sum[1]};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = warp_row0 + g + 8 * r;
    if (row >= tokens) continue;
    float* dst = out + static_cast<int64_t>(row) * q_stride + head * D + 2 * t;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<float2*>(dst + n * 8) = make_float2(o[n][2 * r] * inv[r], o[n][2 * r + 1] * inv[r]);
  }
}

void to_bf16(cudaStream_t stream, const float* x, int64_t n, bf16* y) {
  const int64_t n4 = n / 4;  // n is a multiple of head_dim, hence of 4
  const int64_t blocks = std::min<int64_t>((n4 + 255) / 256, 4096);
  to_bf16_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(reinterpret_cast<const float4*>(x), n4,
                                                                     reinterpret_cast<uint2*>(y));
  STAVE_CUDA_LAUNCHED();
}

template <int D, int kRows>
void launch(cudaStream_t stream, const AttentionShape& shape, const bf16* q, int64_t tokens, int64_t q_pos0,
            const bf16* k, const bf16* v, float* out) {
  constexpr size_t smem = smem_bytes<D, kRows>();
  static const bool configured = [] {
    STAVE_CUDA_CHECK(cudaFuncSetAttribute(flash_bf16_kernel<D, kRows>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)));
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>(shape.n_q_heads), static_cast<unsigned>((tokens + kRows - 1) / kRows));
  flash_bf16_kernel<D, kRows><<<grid, threads_for<kRows>(), smem, stream>>>(q, k, v, out, static_cast<int>(tokens),
                                                          static_cast<int>(q_pos0), static_cast<int>(shape.n_q_heads),
                                                          static_cast<int>(shape.n_kv_heads), shape.scale * kLog2e);
  STAVE_CUDA_LAUNCHED();
}

template <int kRows>
void launch_dim(cudaStream_t stream, const AttentionShape& shape, const bf16* q, int64_t tokens, int64_t q_pos0,
                const bf16* k, const bf16* v, float* out) {
  switch (shape.head_dim) {
    case 64: return launch<64, kRows>(stream, shape, q, tokens, q_pos0, k, v, out);
    case 128: return launch<128, kRows>(stream, shape, q, tokens, q_pos0, k, v, out);
    default: return launch<256, kRows>(stream, shape, q, tokens, q_pos0, k, v, out);
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

FlashBf16Kernel kernel_from_env() {
  return env_choice<FlashBf16Kernel>("STAVE_CUDA_FLASH_BF16",
                                     {{"wgmma", FlashBf16Kernel::kWgmma}, {"mma", FlashBf16Kernel::kMma64}});
}

}  // namespace

bool flash_attention_bf16_supports(const AttentionShape& shape, const float* q, const float* k, const float* v,
                                   const float* out, int64_t keys) {
  const int64_t d = shape.head_dim;
  const bool dim_ok = d == 64 || d == 128 || d == 256;
  // int positions inside the kernel; query tiles on the grid's y (at most 65535 of 64 queries).
  const bool size_ok = keys <= int64_t{65535} * 64 && shape.n_kv_heads > 0 &&
                       shape.n_q_heads % shape.n_kv_heads == 0;
  return dim_ok && size_ok && aligned16(q) && aligned16(k) && aligned16(v) && aligned16(out);
}

void flash_attention_bf16(cudaStream_t stream, const AttentionShape& shape, const float* q, int64_t tokens,
                          int64_t q_pos0, const float* k, const float* v, float* out, FlashBf16Kernel kernel) {
  if (tokens <= 0) return;
  const int64_t d = shape.head_dim, keys = q_pos0 + tokens;
  if (d != 64 && d != 128 && d != 256) throw Error(ErrorKind::kInternal, "bf16 flash attention: unsupported head_dim");
  if (kernel == FlashBf16Kernel::kDefault) kernel = kernel_from_env();
  if (kernel == FlashBf16Kernel::kWgmma && !flash_wgmma_supports(d)) kernel = FlashBf16Kernel::kMma64;
  const int64_t nqd = tokens * shape.n_q_heads * d, nkd = keys * shape.n_kv_heads * d;
  // The bf16 copies live in a stream-ordered allocation from the device's pool (kept, not
  // returned to the driver: see CudaBackend's constructor), freed after the kernel in order.
  void* scratch = nullptr;
  STAVE_CUDA_CHECK(cudaMallocAsync(&scratch, static_cast<size_t>(nqd + 2 * nkd) * sizeof(bf16), stream));
  bf16* qb = static_cast<bf16*>(scratch);
  bf16* kb = qb + nqd;  // nqd and nkd are multiples of d ≥ 64: every part stays 16-byte aligned
  bf16* vb = kb + nkd;
  to_bf16(stream, q, nqd, qb);
  to_bf16(stream, k, nkd, kb);
  to_bf16(stream, v, nkd, vb);
  switch (kernel) {
    case FlashBf16Kernel::kWgmma: flash_wgmma(stream, shape, qb, tokens, q_pos0, kb, vb, out); break;
    case FlashBf16Kernel::kMma128: launch_dim<128>(stream, shape, qb, tokens, q_pos0, kb, vb, out); break;
    default: launch_dim<64>(stream, shape, qb, tokens, q_pos0, kb, vb, out); break;
  }
  STAVE_CUDA_CHECK(cudaFreeAsync(scratch, stream));
}

}  // namespace stave::cuda::dev
