// Fast-precision attention as one fused (flash) kernel on the tensor cores: the scores of a
// tile of 64 queries against 32 keys at a time stay in registers, softmax runs online (running
// max and sum per query, the partial output rescaled), and nothing of size L × L ever reaches
// memory. Same semantics as ref::attention_causal / the non-causal core of ref::mha_attend.
//
// Accuracy: fp32 inputs on TF32 tensor cores in the "3xTF32" form — every operand x is split
// into a TF32 hi and the rest lo (split_tf32), and a·b is taken as hi·hi + hi·lo + lo·hi with
// fp32 accumulation, which keeps about 20 significant bits of each product (plain TF32 keeps
// 10, BF16 7). The split is done in registers from the fp32 values in shared memory, so the three
// products cost MMA issue slots, not extra loads. Measured against the reference ops in
// tests/cuda/test_cuda_ops.cpp at the same 1e-5 the fp32 SGEMM form was held to.
//
// Layout (per block: 4 warps, 16 query rows each; one query head): Q tile [64, D] and a double
// buffer of K and V tiles [32, D] in shared memory, filled with cp.async (16-byte copies,
// zero-filled past the end), rows padded to D + 4 floats so that every fragment load below is
// free of bank conflicts. S = Q·Kᵀ uses mma m16n8k8 (A = Q row-major, B = K as "col"); for
// O += P·V the keys are taken in the order that makes the S accumulator fragment (thread (g, t)
// holds keys 2t, 2t+1) the A fragment directly (which wants k-indices t and t+4): logical key t
// is physical key 2t, logical t+4 is 2t+1, and V's B fragment is read with the same map.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_ops.h"
#include "backends/cuda/flash_softmax.cuh"
#include "stave/errors.h"

namespace stave::cuda::dev {
namespace {

constexpr int kRows = 64;  // queries per block (4 warps × 16)
constexpr int kKeys = 32;  // keys per tile
constexpr int kThreadsPerBlock = 128;

template <int D>
__host__ __device__ constexpr int padded() { return D + 4; }

template <int D>
constexpr size_t flash_smem_bytes() {
  return static_cast<size_t>(kRows + 4 * kKeys) * padded<D>() * sizeof(float);
}

__device__ __forceinline__ void cp_async16(float* smem, const float* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = valid ? 16 : 0;  // 0: the 16 bytes are zero-filled, nothing is read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

struct Split {
  uint32_t hi, lo;
};
// x = hi + lo with hi = x's top 19 bits (sign, exponent, 10 mantissa bits: a TF32 value) and
// lo = x − hi, exact in fp32; the tensor core reads lo's top 19 bits too, so |error| < 2⁻²⁰·|x|.
// A mask and a subtraction, both full-rate: cvt.rna.tf32 is a quarter-rate conversion, and with
// one per operand per warp it (not the tensor cores) bounded the first version of this kernel.
__device__ __forceinline__ Split split_tf32(float x) {
  const uint32_t hi = __float_as_uint(x) & 0xffffe000u;
  return {hi, __float_as_uint(x - __uint_as_float(hi))};
}

__device__ __forceinline__ void mma_tf32(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// c += a·b in 3xTF32: the two small cross terms first, then the large one.
__device__ __forceinline__ void mma_3xtf32(float (&c)[4], const Split (&a)[4], const Split (&b)[2]) {
  mma_tf32(c, a[0].lo, a[1].lo, a[2].lo, a[3].lo, b[0].hi, b[1].hi);
  mma_tf32(c, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].lo, b[1].lo);
  mma_tf32(c, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].hi, b[1].hi);
}
// The same with the cross terms in their own accumulator: two independent MMA chains per tile
// where the scores have only kKeys / 8 tiles to spread the tensor cores' latency over.
__device__ __forceinline__ void mma_3xtf32_split_acc(float (&big)[4], float (&small)[4], const Split (&a)[4],
                                                     const Split (&b)[2]) {
  mma_tf32(small, a[0].lo, a[1].lo, a[2].lo, a[3].lo, b[0].hi, b[1].hi);
  mma_tf32(big, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].hi, b[1].hi);
  mma_tf32(small, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].lo, b[1].lo);
}

// Grid: (query tiles, query heads). q/out [tokens, nq·D] (row stride q_stride floats), k/v
// [keys, nkv·D]. Causal: query i sits at position q_pos0 + i and sees keys 0 … q_pos0 + i;
// otherwise every query sees keys 0 … n_keys − 1.
template <int D>
__global__ void __launch_bounds__(kThreadsPerBlock, 1)
    flash_attention_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                           float* __restrict__ out, int tokens, int q_pos0, int n_keys, bool causal, int nq, int nkv,
                           float scale) {
  constexpr int S = padded<D>();
  constexpr int kChunks = D / 4;  // 16-byte pieces per row
  extern __shared__ float smem[];
  float* sQ = smem;
  float* sK = sQ + kRows * S;
  float* sV = sK + 2 * kKeys * S;

  // Tiles with more keys (later queries, causal) are started first: a shorter tail.
  const int tile = static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x);
  const int head = static_cast<int>(blockIdx.y);
  const int kv_head = head / (nq / nkv);
  const int i0 = tile * kRows;
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;
  const int64_t q_stride = static_cast<int64_t>(nq) * D, kv_stride = static_cast<int64_t>(nkv) * D;
  // Keys any query of this block sees, and how many key tiles that is.
  const int key_end = causal ? q_pos0 + min(i0 + kRows, tokens) : n_keys;
  const int n_tiles = (key_end + kKeys - 1) / kKeys;

  for (int c = static_cast<int>(threadIdx.x); c < kRows * kChunks; c += kThreadsPerBlock) {
    const int r = c / kChunks, col = (c % kChunks) * 4, row = i0 + r;
    const bool ok = row < tokens;
    cp_async16(sQ + r * S + col, q + static_cast<int64_t>(ok ? row : 0) * q_stride + head * D + col, ok);
  }
  auto load_kv = [&](int tile_j, int buf) {
    const int j0 = tile_j * kKeys;
    for (int c = static_cast<int>(threadIdx.x); c < kKeys * kChunks; c += kThreadsPerBlock) {
      const int r = c / kChunks, col = (c % kChunks) * 4, key = j0 + r;
      const bool ok = key < key_end;
      const int64_t off = static_cast<int64_t>(ok ? key : 0) * kv_stride + kv_head * D + col;
      cp_async16(sK + (buf * kKeys + r) * S + col, k + off, ok);
      cp_async16(sV + (buf * kKeys + r) * S + col, v + off, ok);
    }
  };
  load_kv(0, 0);
  cp_async_commit();

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
  const int warp_row0 = i0 + warp * 16;
  // Position limits of this thread's two rows (g and g + 8 of the warp's 16).
  const int limit[2] = {q_pos0 + warp_row0 + g, q_pos0 + warp_row0 + g + 8};
  const float* Qw = sQ + warp * 16 * S;

  for (int jt = 0; jt < n_tiles; ++jt) {
    if (jt + 1 < n_tiles) load_kv(jt + 1, (jt + 1) & 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const float* Kt = sK + (jt & 1) * kKeys * S;
    const float* Vt = sV + (jt & 1) * kKeys * S;
    const int j0 = jt * kKeys;
    // A warp whose 16 queries all precede this tile's keys has nothing to do here.
    if (!causal || j0 <= q_pos0 + warp_row0 + 15) {
      float s[kKeys / 8][4], cross[kKeys / 8][4];
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] = cross[n][e] = 0.0f;
#pragma unroll 4
      for (int kk = 0; kk < D; kk += 8) {
        const Split a[4] = {split_tf32(Qw[g * S + kk + t]), split_tf32(Qw[(g + 8) * S + kk + t]),
                            split_tf32(Qw[g * S + kk + t + 4]), split_tf32(Qw[(g + 8) * S + kk + t + 4])};
#pragma unroll
        for (int n = 0; n < kKeys / 8; ++n) {
          const float* kr = Kt + (n * 8 + g) * S + kk;
          const Split b[2] = {split_tf32(kr[t]), split_tf32(kr[t + 4])};
          mma_3xtf32_split_acc(s[n], cross[n], a, b);
        }
      }
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] += cross[n][e];
      // Scale, mask, and the online softmax update of this thread's two rows.
      float rescale[2];
      flash::softmax_tile<kKeys, false>(s, j0, key_end, causal, limit, scale, t, row_max, row_sum, rescale);
      flash::rescale_rows(o, rescale);
      // O += P·V, P straight from the S fragments (key order 2t, 2t+1: see the file comment).
#pragma unroll
      for (int kb = 0; kb < kKeys / 8; ++kb) {
        const Split a[4] = {split_tf32(s[kb][0]), split_tf32(s[kb][2]), split_tf32(s[kb][1]),
                            split_tf32(s[kb][3])};
        const float* v0 = Vt + (kb * 8 + 2 * t) * S + g;
        const float* v1 = v0 + S;
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
          const Split b[2] = {split_tf32(v0[n * 8]), split_tf32(v1[n * 8])};
          mma_3xtf32(o[n], a, b);
        }
      }
    }
    __syncthreads();  // the buffer just read is the next iteration's prefetch target
  }

  const float inv[2] = {1.0f / row_sum[0], 1.0f / row_sum[1]};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = warp_row0 + g + 8 * r;
    if (row >= tokens) continue;
    float* dst = out + static_cast<int64_t>(row) * q_stride + head * D + 2 * t;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      float2 val = make_float2(o[n][2 * r] * inv[r], o[n][2 * r + 1] * inv[r]);
      *reinterpret_cast<float2*>(dst + n * 8) = val;
    }
  }
}

template <int D>
void launch(cudaStream_t stream, const AttentionShape& shape, const float* q, int64_t tokens, int64_t q_pos0,
            const float* k, const float* v, int64_t n_keys, bool causal, float* out) {
  constexpr size_t smem = flash_smem_bytes<D>();
  static const bool configured = [] {
    STAVE_CUDA_CHECK(cudaFuncSetAttribute(flash_attention_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)));
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>((tokens + kRows - 1) / kRows), static_cast<unsigned>(shape.n_q_heads));
  flash_attention_kernel<D><<<grid, kThreadsPerBlock, smem, stream>>>(
      q, k, v, out, static_cast<int>(tokens), static_cast<int>(q_pos0), static_cast<int>(n_keys), causal,
      static_cast<int>(shape.n_q_heads), static_cast<int>(shape.n_kv_heads), shape.scale);
  STAVE_CUDA_LAUNCHED();
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

bool flash_attention_supports(const AttentionShape& shape, const float* q, const float* k, const float* v,
                              const float* out, int64_t keys) {
  const int64_t d = shape.head_dim;
  const bool dim_ok = d == 16 || d == 32 || d == 64 || d == 128 || d == 256;
  // int indexing inside the kernel: positions and per-row offsets must fit.
  const bool size_ok = keys < (int64_t{1} << 30) && shape.n_q_heads < 65536;
  return dim_ok && size_ok && aligned16(q) && aligned16(k) && aligned16(v) && aligned16(out);
}

bool flash_attention_pays(const AttentionShape& shape, int64_t tokens) {
  // One block per 64 queries and head, each walking all its keys in order: with fewer blocks
  // than about one wave of SMs (132 on the H200) most of the GPU idles, while the cuBLAS form
  // spreads the keys over the whole GPU. Measured: the joint head's attentions (a few dozen
  // queries, 8 heads, thousands of keys) took 20 instead of 11 ms per decision at 512 tokens.
  return (tokens + kRows - 1) / kRows * shape.n_q_heads >= 128;
}

void flash_attention(cudaStream_t stream, const AttentionShape& shape, const float* q, int64_t tokens,
                     int64_t q_pos0, const float* k, const float* v, int64_t n_keys, bool causal, float* out) {
  switch (shape.head_dim) {
    case 16: return launch<16>(stream, shape, q, tokens, q_pos0, k, v, n_keys, causal, out);
    case 32: return launch<32>(stream, shape, q, tokens, q_pos0, k, v, n_keys, causal, out);
    case 64: return launch<64>(stream, shape, q, tokens, q_pos0, k, v, n_keys, causal, out);
    case 128: return launch<128>(stream, shape, q, tokens, q_pos0, k, v, n_keys, causal, out);
    case 256: return launch<256>(stream, shape, q, tokens, q_pos0, k, v, n_keys, causal, out);
    default: throw Error(ErrorKind::kInternal, "flash attention: unsupported head_dim");
  }
}

}  // namespace stave::cuda::dev
