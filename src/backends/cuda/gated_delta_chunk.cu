// The gated delta rule, chunk form (Yang et al., "Gated Delta Networks"; the WY / UT transform
// as flash-linear-attention's chunk_gated_delta_rule splits it), products on BF16 tensor cores
// (nvcuda::wmma 16×16×16, fp32 accumulation). Fast precision, d_k = d_v = 128, chunk C = 64.
//
// Per v head h (k head h / (n_v/n_k)), chunk of rows t0 … t0+len−1 (len ≤ 64, never crossing a
// sequence), q̂, k̂ the L2-normalised q (· d_k^{-1/2}) and k, G the within-chunk cumulative sum
// of g, and S the [d_k, d_v] state at the chunk's start:
//   1. qk_norm:  q̂, k̂ → BF16 [tokens, n_k, 128].
//   2. wu:       per (chunk, head): A = strictly-lower (β k̂) k̂ᵀ ⊙ exp(Gᵢ − Gⱼ),
//                T = (I + A)⁻¹ (fp32, by 16 × 16 blocks: invert_unit_lower),
//                W = T (β k̂ ⊙ exp(G)) (BF16), U = T (β v) (fp32) → scratch [chunk, n_v, 64, 128].
//   3. state:    per (sequence, head, 32 state columns), the chunks in order:
//                S_c = S (BF16 scratch); v_new = U − W S;  S ← exp(G_last) S + (k̂ ⊙ exp(G_last − G))ᵀ v_new.
//                The final S goes back to the caller's state. 3b (the default since 2026-12-06,
//                measured faster on an H100) is this pass with the state in registers, U, S_c and
//                v_new transposed in scratch; 3a (STAVE_CUDA_DELTA=chunk-shared) keeps it in shared
//                memory.)
//   4. out:      per (chunk, head): O = (q̂ ⊙ exp(G)) S_c + (q̂ k̂ᵀ ⊙ causal(incl. diagonal) ⊙ exp(Gᵢ − Gⱼ)) v_new.
// Scratch is laid out per chunk with 64 rows whatever len is; rows ≥ len are zero (k̂, β, v
// read as 0), so W, U and v_new rows ≥ len are 0 and never reach a valid row. It takes
// 2·tokens·n_k·128 BF16 plus ~96 KiB per (chunk, v head): ~170 MB at 2048 tokens of the 27B's
// 48 heads, ~670 MB at 8192, from the stream-ordered pool.
// Split operands (the default since 2026-12-06; STAVE_CUDA_DELTA=chunk-bf16 for plain BF16
// operands): every operand but W is held as a BF16 pair
// hi + lo (lo = BF16(x − hi)) and each product runs as three (hi·hi' + hi·lo' + lo·hi'), which
// keeps ~16 significant bits of each operand instead of 8; the accumulation stays fp32. It takes
// the register pass (3b) and twice the scratch for q̂, k̂, S_c and v_new. The numpy emulation
// (tools/reference/probe_delta_rounding.py) puts the output's relative error at ~3e-5 this way,
// against 3.7e-3 with every operand in plain BF16. W stays one BF16 array: splitting it too (an
// experiment, 2026-12-06) cut the op suite's worst case from 2e-5 to 2e-6 but left the decisions'
// error where it was (0.0102 against 0.0097) for 12 % more time.
// Measured (H100, 27B shapes, 2048 tokens, per layer): 0.70 ms against 0.40 with plain BF16; on
// the 4-layer 9B-shape MXFP4 synth the decisions' error against exact precision (mean over
// requests of the max |Δp|) falls from 0.0236 to 0.0097 (docs/eval.md).
// Resources (ptxas, sm_90a; no spills): qk_norm 24 registers; wu 56 registers, 72,448 B shared
// (three blocks per SM); state 62 registers, 104,960 B; out 64 registers, 96,512 B (two each);
// the register pass (3b) 200 registers, 70,144 B, two warps per block. With split operands: wu
// 66 registers, 108,288 B (two blocks per SM); the register pass 200 registers, 104,960 B; out
// 78 registers, 177,408 B (one block per SM).
#include <cuda_bf16.h>
#include <cuda_pipeline.h>
#include <mma.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gated_delta_chunk.h"
#include "stave/errors.h"
#include "util/env_choice.h"

namespace stave::cuda::dev {
namespace {

using bf16 = __nv_bfloat16;
namespace wmma = nvcuda::wmma;

constexpr int kC = 64;    // chunk
constexpr int kD = 128;   // d_k = d_v
constexpr int kBV = 32;   // state columns per block of the sequential pass
constexpr int kWuThreads = 128;

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

// 1. One warp per (token, k head) of q (first tokens·n_k warps) or k: x · rsqrt(Σx² + 1e-6) (· scale for q).
// With qn_lo / kn_lo (split operands) the rounding residue x − BF16(x) goes there in BF16 too.
__global__ void qk_norm_kernel(const float* q, const float* k, int64_t stride, int64_t tokens, int n_k, float q_scale,
                               bf16* qn, bf16* kn, bf16* qn_lo, bf16* kn_lo) {
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (warp >= 2 * tokens * n_k) return;
  const bool is_k = warp >= tokens * n_k;
  const int64_t th = is_k ? warp - tokens * n_k : warp;
  const int64_t t = th / n_k, h = th % n_k;
  const float* x = (is_k ? k : q) + t * stride + h * kD;
  float v[kD / 32];
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kD / 32; ++i) {
    v[i] = x[lane + 32 * i];
    ss += v[i] * v[i];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = (is_k ? 1.0f : q_scale) / sqrtf(ss + 1e-6f);
  bf16* y = (is_k ? kn : qn) + th * kD;
  bf16* lo = is_k ? kn_lo : qn_lo;
#pragma unroll
  for (int i = 0; i < kD / 32; ++i) {
    const float x = v[i] * inv;
    const bf16 hi = __float2bfloat16(x);
    y[lane + 32 * i] = hi;
    if (lo) lo[th * kD + lane + 32 * i] = __float2bfloat16(x - __bfloat162float(hi));
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

// T = (I + A)⁻¹ for the strictly lower A [64][kLdA] (fp32), by 16 × 16 blocks so that all
// kWuThreads threads work and the longest chain is short (one thread per column of the whole
// matrix was a chain of 2,016 dependent FMAs on half the threads):
//   1. the diagonal blocks T_dd = (I + A_dd)⁻¹, thread (d, c) column c of block d by forward
//      substitution (rows above c come out 0);
//   2. the blocks below by distance i − j = 1, 2, 3: T_ij = −T_ii · X, X = Σ_{k=j}^{i−1} A_ik T_kj
//      (the T_kj all nearer the diagonal), through X in `scratch` (≥ 3 · 256 floats).
// Blocks above the diagonal are set to 0. Tf [64][64]. Ends with the block synchronized.
constexpr int kTb = 16;  // block of the inverse
__device__ void invert_unit_lower(const float* Af, float* Tf, float* scratch, int tid) {
  constexpr int kN = kC / kTb;  // 4 blocks per side
  if (tid < kC) {
    const int o = (tid / kTb) * kTb, c = tid % kTb;
    float t[kTb];
#pragma unroll
    for (int i = 0; i < kTb; ++i) {
      float p[2] = {0.0f, 0.0f};
#pragma unroll
      for (int j = 0; j < i; ++j) p[j % 2] += Af[(o + i) * kLdA + o + j] * t[j];
      t[i] = (i == c ? 1.0f : 0.0f) - (p[0] + p[1]);
    }
#pragma unroll
    for (int i = 0; i < kTb; ++i) Tf[(o + i) * kC + o + c] = t[i];
  }
  for (int e = tid; e < kC * kC; e += kWuThreads) {
    const int r = e / kC, c = e % kC;
    if (c / kTb > r / kTb) Tf[e] = 0.0f;
  }
  __syncthreads();
  for (int dist = 1; dist < kN; ++dist) {
    const int blocks = kN - dist;  // (i, j) = (b + dist, b)
    for (int e = tid; e < blocks * kTb * kTb; e += kWuThreads) {
      const int b = e / (kTb * kTb), r = (e / kTb) % kTb, c = e % kTb, i = b + dist, j = b;
      float x = 0.0f;
      for (int k = j; k < i; ++k) {
        const float* a = Af + (i * kTb + r) * kLdA + k * kTb;
        const float* t = Tf + (k * kTb) * kC + j * kTb + c;
#pragma unroll
        for (int n = 0; n < kTb; ++n) x += a[n] * t[n * kC];
      }
      scratch[e] = x;
    }
    __syncthreads();
    for (int e = tid; e < blocks * kTb * kTb; e += kWuThreads) {
      const int b = e / (kTb * kTb), r = (e / kTb) % kTb, c = e % kTb, i = b + dist, j = b;
      const float* tii = Tf + (i * kTb + r) * kC + i * kTb;
      const float* x = scratch + b * kTb * kTb + c;
      float y = 0.0f;
#pragma unroll
      for (int m = 0; m < kTb; ++m) y += tii[m] * x[m * kTb];
      Tf[(i * kTb + r) * kC + j * kTb + c] = -y;
    }
    __syncthreads();
  }
}

// 2. W and U per (chunk = blockIdx.x, v head = blockIdx.y); 128 threads. Also writes G.
// Shared memory (three blocks per SM; two with split operands): Ks, Vs (and their lo halves),
// Af, Tf, the inverse's scratch X, G and β; T's BF16 copy (hi and lo) goes over Af once the
// inverse is done, W's fp32 tiles through a per-warp staging over Tf once T is copied.
constexpr int kLdWst = 16 + 4;  // fp32 [16][20]: a warp's W tile on its way to BF16
template <bool kSplit>
constexpr size_t kWuAfBytes = std::max(kC * kLdA * sizeof(float), (kSplit ? 2 : 1) * kC * kLdT * sizeof(bf16));
template <bool kSplit>
constexpr size_t kWuSmem = (kSplit ? 4 : 2) * kC * kLdB * sizeof(bf16) + kWuAfBytes<kSplit> + kC * kC * sizeof(float) +
                           3 * kTb * kTb * sizeof(float) + 3 * kC * sizeof(float);
static_assert(kWuAfBytes<false> == kC * kLdA * sizeof(float), "Tb fits over Af");
static_assert((kWuThreads / 32) * 16 * kLdWst * sizeof(float) <= kC * kC * sizeof(float), "W's staging fits over Tf");

// kUt: U goes out transposed, [d_v][64] per (chunk, head), for the register pass (3b).
// kSplit: k̂ comes with its lo half (kn_lo); β v, T and β k̂ exp(G) are split in shared memory
// and every product is three; W still goes out as one BF16 array.
template <bool kUt, bool kSplit>
__global__ void __launch_bounds__(kWuThreads) wu_kernel(const bf16* kn, const bf16* kn_lo, const float* v,
                                                        int64_t stride, const float* g, const float* beta,
                                                        int64_t tokens, const int* table, int nc, int n_k, int n_v,
                                                        float* gcum, bf16* W, float* U) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kHalves = kSplit ? 2 : 1;
  bf16* Ks = reinterpret_cast<bf16*>(smem);               // [64][kLdB] k̂, then β k̂ exp(G)
  bf16* Kl = Ks + kC * kLdB;                               // its lo half (split)
  bf16* Vs = Ks + kHalves * kC * kLdB;                     // [64][kLdB] β v
  bf16* Vl = Vs + kC * kLdB;                               // its lo half (split)
  float* Af = reinterpret_cast<float*>(Vs + kHalves * kC * kLdB);  // [64][kLdA] k̂k̂ᵀ, then A
  float* Tf = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(Af) + kWuAfBytes<kSplit>);  // [64][64]
  float* X = Tf + kC * kC;                                 // [3][16][16] the inverse's scratch
  float* gc = X + 3 * kTb * kTb;                           // [64] G
  float* bt = gc + kC;                                     // [64] β
  float* ex = bt + kC;                                     // [64] exp(G)
  bf16* Tb = reinterpret_cast<bf16*>(Af);                  // [64][kLdT] T in BF16, over Af
  bf16* Tl = Tb + kC * kLdT;                               // its lo half (split)
  const int ci = blockIdx.x, h = blockIdx.y, tid = threadIdx.x, warp = tid / 32;
  const int kh = h / (n_v / n_k);
  int64_t t0;
  int len;
  chunk_rows(table, nc, tokens, ci, t0, len);
  const int64_t slot = static_cast<int64_t>(ci) * n_v + h;  // this (chunk, head)'s scratch

  fetch_rows<kWuThreads>(kn, t0, len, n_k, kh, Ks, tid);
  if constexpr (kSplit) fetch_rows<kWuThreads>(kn_lo, t0, len, n_k, kh, Kl, tid);
  __pipeline_commit();
  if (tid < kC) {
    bt[tid] = tid < len ? beta[(t0 + tid) * n_v + h] : 0.0f;
    gc[tid] = tid < len ? g[(t0 + tid) * n_v + h] : 0.0f;
  }
  __syncthreads();
  if (warp == 0) {  // G: the inclusive prefix sum of the 64 gates (two per lane, then across the warp), and exp(G)
    const int lane = tid;
    const float first = gc[2 * lane], pair = first + gc[2 * lane + 1];
    float run = pair;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float n = __shfl_up_sync(0xffffffffu, run, o);
      if (lane >= o) run += n;
    }
    gc[2 * lane] = (run - pair) + first;
    gc[2 * lane + 1] = run;
    ex[2 * lane] = __expf(gc[2 * lane]);
    ex[2 * lane + 1] = __expf(run);
  }
  // β v in BF16: four values per step where the rows are 16-byte aligned (the packed projection's).
  if (aligned16(v, stride)) {
    for (int e = tid; e < kC * kD / 4; e += kWuThreads) {
      const int r = e / (kD / 4), a = 4 * (e % (kD / 4));
      float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (r < len) {
        x = *reinterpret_cast<const float4*>(v + (t0 + r) * stride + static_cast<int64_t>(h) * kD + a);
        const float b = bt[r];
        x = make_float4(x.x * b, x.y * b, x.z * b, x.w * b);
      }
      store_bf16x4(Vs + r * kLdB + a, x);
      if constexpr (kSplit) store_bf16x4(Vl + r * kLdB + a, bf16_residue4(x));
    }
  } else {
    for (int e = tid; e < kC * kD; e += kWuThreads) {
      const int r = e / kD, a = e % kD;
      const float x = r < len ? v[(t0 + r) * stride + static_cast<int64_t>(h) * kD + a] * bt[r] : 0.0f;
      Vs[r * kLdB + a] = __float2bfloat16(x);
      if constexpr (kSplit) Vl[r * kLdB + a] = __float2bfloat16(x - __bfloat162float(Vs[r * kLdB + a]));
    }
  }
  __pipeline_wait_prior(0);
  __syncthreads();
  if (tid < kC) gcum[slot * kC + tid] = gc[tid];
  // k̂ k̂ᵀ, the tiles on and below the diagonal.
  for (int tile = warp; tile < 16; tile += kWuThreads / 32) {
    const int ti = tile / 4, tj = tile % 4;
    if (tj > ti) continue;
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < kD / 16; ++kk) {
      FragA a;
      FragBT b;
      wmma::load_matrix_sync(a, Ks + ti * 16 * kLdB + kk * 16, kLdB);
      wmma::load_matrix_sync(b, Ks + tj * 16 * kLdB + kk * 16, kLdB);
      if constexpr (kSplit) {
        FragA al;
        FragBT bl;
        wmma::load_matrix_sync(al, Kl + ti * 16 * kLdB + kk * 16, kLdB);
        wmma::load_matrix_sync(bl, Kl + tj * 16 * kLdB + kk * 16, kLdB);
        mma3(acc, a, al, b, bl);
      } else {
        wmma::mma_sync(acc, a, b, acc);
      }
    }
    wmma::store_matrix_sync(Af + ti * 16 * kLdA + tj * 16, acc, kLdA, wmma::mem_row_major);
  }
  __syncthreads();
  for (int e = tid; e < kC * kC; e += kWuThreads) {
    const int i = e / kC, j = e % kC;
    Af[i * kLdA + j] = j < i ? bt[i] * Af[i * kLdA + j] * __expf(gc[i] - gc[j]) : 0.0f;
  }
  __syncthreads();
  invert_unit_lower(Af, Tf, X, tid);  // ends synchronized: Af is free for Tb
  for (int e = tid; e < kC * kC / 2; e += kWuThreads) {
    const float2 t = reinterpret_cast<const float2*>(Tf)[e];
    const int at = (2 * e / kC) * kLdT + 2 * e % kC;
    if constexpr (kSplit) {
      split_bf16x2(t.x, t.y, *reinterpret_cast<__nv_bfloat162*>(Tb + at), *reinterpret_cast<__nv_bfloat162*>(Tl + at));
    } else {
      *reinterpret_cast<__nv_bfloat162*>(Tb + at) = __floats2bfloat162_rn(t.x, t.y);
    }
  }
  for (int e = tid; e < kC * kD / 2; e += kWuThreads) {
    const int r = e / (kD / 2), a = 2 * (e % (kD / 2));
    __nv_bfloat162* x = reinterpret_cast<__nv_bfloat162*>(Ks + r * kLdB + a);
    float2 k = __bfloat1622float2(*x);
    const float b = bt[r], eg = ex[r];
    if constexpr (kSplit) {
      __nv_bfloat162* xl = reinterpret_cast<__nv_bfloat162*>(Kl + r * kLdB + a);
      const float2 l = __bfloat1622float2(*xl);
      split_bf16x2((k.x + l.x) * b * eg, (k.y + l.y) * b * eg, *x, *xl);
    } else {
      *x = __floats2bfloat162_rn(k.x * b * eg, k.y * b * eg);
    }
  }
  __syncthreads();
  // W = T (β k̂ exp(G)), U = T (β v): 4 × 8 output tiles; T's blocks above the diagonal are 0.
  // U goes to memory as fp32, W through the warp's fp32 staging (over Tf, free now) as BF16.
  float* Wst = Tf + warp * 16 * kLdWst;
  float* Uc = U + slot * kC * kD;
  bf16* Wc = W + slot * kC * kD;
  const int lane = tid % 32;
  for (int tile = warp; tile < (kC / 16) * (kD / 16); tile += kWuThreads / 32) {
    const int ti = tile / (kD / 16), tn = tile % (kD / 16);
    FragC w, u;
    wmma::fill_fragment(w, 0.0f);
    wmma::fill_fragment(u, 0.0f);
    for (int kk = 0; kk <= ti; ++kk) {
      FragA a;
      FragB b;
      wmma::load_matrix_sync(a, Tb + ti * 16 * kLdT + kk * 16, kLdT);
      if constexpr (kSplit) {
        FragA al;
        FragB bl;
        wmma::load_matrix_sync(al, Tl + ti * 16 * kLdT + kk * 16, kLdT);
        wmma::load_matrix_sync(b, Ks + kk * 16 * kLdB + tn * 16, kLdB);
        wmma::load_matrix_sync(bl, Kl + kk * 16 * kLdB + tn * 16, kLdB);
        mma3(w, a, al, b, bl);
        wmma::load_matrix_sync(b, Vs + kk * 16 * kLdB + tn * 16, kLdB);
        wmma::load_matrix_sync(bl, Vl + kk * 16 * kLdB + tn * 16, kLdB);
        mma3(u, a, al, b, bl);
      } else {
        wmma::load_matrix_sync(b, Ks + kk * 16 * kLdB + tn * 16, kLdB);
        wmma::mma_sync(w, a, b, w);
        wmma::load_matrix_sync(b, Vs + kk * 16 * kLdB + tn * 16, kLdB);
        wmma::mma_sync(u, a, b, u);
      }
    }
    wmma::store_matrix_sync(Wst, w, kLdWst, wmma::mem_row_major);
    if constexpr (kUt)
      wmma::store_matrix_sync(Uc + tn * 16 * kC + ti * 16, u, kC, wmma::mem_col_major);
    else
      wmma::store_matrix_sync(Uc + ti * 16 * kD + tn * 16, u, kD, wmma::mem_row_major);
    __syncwarp();
    // 16 rows of 16: lane l writes row l / 2, columns 8 (l % 2) … +7, as four BF16 pairs.
    const int r = lane / 2, c0 = 8 * (lane % 2);
    __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(Wc + (ti * 16 + r) * kD + tn * 16 + c0);
#pragma unroll
    for (int q = 0; q < 4; ++q) dst[q] = __floats2bfloat162_rn(Wst[r * kLdWst + c0 + 2 * q], Wst[r * kLdWst + c0 + 2 * q + 1]);
    __syncwarp();
  }
}

// 3a. The sequential pass with the state in shared memory (STAVE_CUDA_DELTA=chunk-shared): block
// (v head, 32 state columns, sequence); 256 threads. Chunk i+1's
// k̂ rows and G are copied into the second of two buffers (cp.async) as soon as chunk i starts,
// its W and U slice once chunk i's v_new is formed, so both copies overlap the chunk's products
// and the chain of chunks waits on memory as little as the pass allows. (Asking L2 for chunk
// i+2's operands when chunk i starts was tried: no faster, 2026-12-05.)
// The decay of the update is applied to v_new's rows (Kdᵀ v_new = k̂ᵀ (exp(G_last − G) ⊙ v_new)),
// so k̂ is copied as stored.
constexpr int kStateThreads = 256;  // 8 warps: one v_new tile, two state tiles each
// Padded shared-memory rows, as kLdB and kLdF above.
constexpr int kLdW = kD + 8;    // Wb, Kb: BF16 [64][136]
static_assert(kLdW == kLdB, "k̂ rows are fetched with fetch_rows' row stride");
constexpr int kLdSb = kBV + 8;  // Sb, Vb: BF16 [·][40]
constexpr size_t kStateSmem = kD * kLdF * sizeof(float) + kD * kLdSb * sizeof(bf16) + 3 * kC * kLdW * sizeof(bf16) +
                              2 * kC * kLdF * sizeof(float) + kC * kLdSb * sizeof(bf16) + 2 * kC * sizeof(float);

// Starts chunk ci's W (BF16 [64][128]) and the block's U columns (fp32 [64][32]).
__device__ inline void fetch_wu(const bf16* W, const float* U, int64_t slot, int col0, bf16* Wb, float* Ub, int tid) {
  const bf16* w = W + slot * kC * kD;
  for (int e = tid; e < kC * kD / 8; e += kStateThreads) {
    const int r = e / (kD / 8), c = e % (kD / 8);
    copy16(Wb + r * kLdW + 8 * c, w + r * kD + 8 * c);
  }
  const float* u = U + slot * kC * kD + col0;
  for (int e = tid; e < kC * kBV / 4; e += kStateThreads) {
    const int r = e / (kBV / 4), c = e % (kBV / 4);
    copy16(Ub + r * kLdF + 4 * c, u + r * kD + 4 * c);
  }
  __pipeline_commit();
}

// Starts chunk ci's k̂ rows (BF16 [64][128], zero past len) and G, and commits them with any
// copy the caller started before.
template <int kThreads>
__device__ inline void fetch_kg(const bf16* kn, const float* gcum, int64_t slot, int64_t t0, int len, int n_k,
                                int kh, bf16* Kb, float* gc, int tid) {
  fetch_rows<kThreads>(kn, t0, len, n_k, kh, Kb, tid);
  if (tid < kC / 4) copy16(gc + 4 * tid, gcum + slot * kC + 4 * tid);
  __pipeline_commit();
}

__global__ void __launch_bounds__(kStateThreads) state_kernel(const bf16* kn, const float* gcum, const bf16* W,
                                                              const float* U, int64_t tokens, const int* table, int nc,
                                                              int n_k, int n_v, float* states, bf16* Sc,
                                                              bf16* vnew) {
  extern __shared__ __align__(128) unsigned char smem[];
  float* S = reinterpret_cast<float*>(smem);               // [128][kLdF] fp32 state columns
  bf16* Sb = reinterpret_cast<bf16*>(S + kD * kLdF);       // [128][kLdSb]
  bf16* Wb = Sb + kD * kLdSb;                              // [64][kLdW] W
  bf16* Kbuf = Wb + kC * kLdW;                             // 2 × [64][kLdW] k̂ (chunk parity)
  float* Ub = reinterpret_cast<float*>(Kbuf + 2 * kC * kLdW);  // [64][kLdF] U columns
  float* Vn = Ub + kC * kLdF;                              // [64][kLdF] v_new
  bf16* Vb = reinterpret_cast<bf16*>(Vn + kC * kLdF);      // [64][kLdSb] exp(G_last − G) ⊙ v_new
  float* gbuf = reinterpret_cast<float*>(Vb + kC * kLdSb); // 2 × [64] G (chunk parity)
  const int h = blockIdx.x, col0 = blockIdx.y * kBV, b = blockIdx.z, tid = threadIdx.x, warp = tid / 32;
  const int kh = h / (n_v / n_k);
  float* st = states + (static_cast<int64_t>(b) * n_v + h) * kD * kD;
  for (int e = tid; e < kD * kBV; e += kStateThreads) S[(e / kBV) * kLdF + e % kBV] = st[(e / kBV) * kD + col0 + e % kBV];
  const int c_begin = table ? table[2 * nc + b] : 0, c_end = table ? table[2 * nc + b + 1] : nc;
  int64_t t0 = 0;
  int len = 0;
  if (c_begin < c_end) {
    chunk_rows(table, nc, tokens, c_begin, t0, len);
    const int64_t slot = static_cast<int64_t>(c_begin) * n_v + h;
    fetch_wu(W, U, slot, col0, Wb, Ub, tid);
    fetch_kg<kStateThreads>(kn, gcum, slot, t0, len, n_k, kh, Kbuf, gbuf, tid);
  }
  for (int ci = c_begin; ci < c_end; ++ci) {
    const int64_t slot = static_cast<int64_t>(ci) * n_v + h;
    const int parity = (ci - c_begin) & 1;
    bf16* Kb = Kbuf + parity * kC * kLdW;
    const float* gc = gbuf + parity * kC;
    __pipeline_wait_prior(0);
    __syncthreads();  // chunk ci's W, U, k̂, G and the state S are in place
    // The next chunk's k̂ and G into the other buffers (last read by chunk ci − 1's update,
    // which the barrier above closed).
    int64_t next_t0 = 0;
    int next_len = 0;
    if (ci + 1 < c_end) {
      chunk_rows(table, nc, tokens, ci + 1, next_t0, next_len);
      fetch_kg<kStateThreads>(kn, gcum, slot + n_v, next_t0, next_len, n_k, kh, Kbuf + (parity ^ 1) * kC * kLdW,
               gbuf + (parity ^ 1) * kC, tid);
    }
    const float g_last = gc[len - 1];
    bf16* sc = Sc + slot * kD * kD;
    for (int e = tid; e < kD * kBV / 4; e += kStateThreads) {
      const int a = e / (kBV / 4), c = 4 * (e % (kBV / 4));
      const float4 x = *reinterpret_cast<const float4*>(S + a * kLdF + c);
      store_bf16x4(Sb + a * kLdSb + c, x);
      store_bf16x4(sc + a * kD + col0 + c, x);
    }
    __syncthreads();
    // v_new = U − W S_c: 4 × 2 tiles, K = 128.
    for (int tile = warp; tile < (kC / 16) * (kBV / 16); tile += kStateThreads / 32) {
      const int ti = tile / (kBV / 16), tn = tile % (kBV / 16);
      FragC ws, un;
      wmma::fill_fragment(ws, 0.0f);
      for (int kk = 0; kk < kD / 16; ++kk) {
        FragA a;
        FragB bb;
        wmma::load_matrix_sync(a, Wb + ti * 16 * kLdW + kk * 16, kLdW);
        wmma::load_matrix_sync(bb, Sb + kk * 16 * kLdSb + tn * 16, kLdSb);
        wmma::mma_sync(ws, a, bb, ws);
      }
      wmma::load_matrix_sync(un, Ub + ti * 16 * kLdF + tn * 16, kLdF, wmma::mem_row_major);
      for (int i = 0; i < un.num_elements; ++i) un.x[i] -= ws.x[i];
      wmma::store_matrix_sync(Vn + ti * 16 * kLdF + tn * 16, un, kLdF, wmma::mem_row_major);
    }
    __syncthreads();  // W and U are read: the next chunk's may come
    if (ci + 1 < c_end) fetch_wu(W, U, slot + n_v, col0, Wb, Ub, tid);
    bf16* vn = vnew + slot * kC * kD;
    for (int e = tid; e < kC * kBV / 4; e += kStateThreads) {
      const int r = e / (kBV / 4), c = 4 * (e % (kBV / 4));
      const float4 x = *reinterpret_cast<const float4*>(Vn + r * kLdF + c);
      const float d = __expf(g_last - gc[r]);
      store_bf16x4(vn + r * kD + col0 + c, x);
      store_bf16x4(Vb + r * kLdSb + c, make_float4(x.x * d, x.y * d, x.z * d, x.w * d));
    }
    __syncthreads();
    // S ← exp(G_last) S + k̂ᵀ Vb: 8 × 2 tiles, K = 64 (k̂ᵀ read column-major from Kb).
    const float decay = __expf(g_last);
    for (int tile = warp; tile < (kD / 16) * (kBV / 16); tile += kStateThreads / 32) {
      const int ti = tile / (kBV / 16), tn = tile % (kBV / 16);
      FragC acc;
      wmma::load_matrix_sync(acc, S + ti * 16 * kLdF + tn * 16, kLdF, wmma::mem_row_major);
      for (int i = 0; i < acc.num_elements; ++i) acc.x[i] *= decay;
      for (int kk = 0; kk < kC / 16; ++kk) {
        FragAT a;
        FragB bb;
        wmma::load_matrix_sync(a, Kb + kk * 16 * kLdW + ti * 16, kLdW);
        wmma::load_matrix_sync(bb, Vb + kk * 16 * kLdSb + tn * 16, kLdSb);
        wmma::mma_sync(acc, a, bb, acc);
      }
      wmma::store_matrix_sync(S + ti * 16 * kLdF + tn * 16, acc, kLdF, wmma::mem_row_major);
    }
    t0 = next_t0;
    len = next_len;
  }
  __syncthreads();
  for (int e = tid; e < kD * kBV; e += kStateThreads) st[(e / kBV) * kD + col0 + e % kBV] = S[(e / kBV) * kLdF + e % kBV];
}

// 3b. The sequential pass with the state in registers (the default; STAVE_CUDA_DELTA=chunk-shared
// runs 3a above instead). Block (v head, 32 state
// columns, sequence); 2 warps, each 16 state columns for all 128 rows of d_k. Each warp keeps its slice of the state transposed, Sᵀ
// [16 columns][128], in registers as mma.sync m16n8k16 accumulators for the whole sequence
// (fla's chunk_gated_delta_rule_fwd_kernel_h keeps its state on chip the same way), so a chunk
// is two runs of tensor-core products with one barrier between chunks:
//   v_newᵀ = Uᵀ − Sᵀ Wᵀ            (A = −Sᵀ in BF16, straight from the accumulators: two n8
//                                   tiles of an accumulator are one k16 A fragment)
//   Sᵀ ← exp(G_last) Sᵀ + (v_new ⊙ exp(G_last − G))ᵀ k̂
//                                  (A = that product's accumulators again, in BF16)
// W and k̂ come through shared memory (ldmatrix; k̂ transposed), double-buffered by chunk with
// cp.async: chunk i+1's copy starts when chunk i does. The state at each chunk's start goes out
// in BF16 as Sᵀ (S_cᵀ [d_v][d_k]) and v_new as v_newᵀ [d_v][64] for the output kernel; U comes
// in as Uᵀ [d_v][64] (the transform writes it so). The decay of the update is applied to
// v_new's columns (k̂ᵀ diag(exp(G_last − G)) v_new), so k̂ is copied as stored.
constexpr int kRegWarps = 2;  // 2: 192 blocks for the 27B's 48 heads (4: 96, fewer than the SMs)
constexpr int kRegThreads = 32 * kRegWarps;
constexpr int kRegCols = 16 * kRegWarps;  // state columns per block
// Split operands: k̂'s lo half comes double-buffered beside it (two more buffers); the A
// operands (−Sᵀ, the scaled v_newᵀ) split straight from the accumulators; S_cᵀ and v_newᵀ go out
// as hi and lo arrays.
template <bool kSplit>
constexpr size_t kRegSmem = (kSplit ? 6 : 4) * kC * kLdW * sizeof(bf16) + 2 * kC * sizeof(float);

__device__ inline uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The residue pair of pack_bf16: (lo − BF16(lo), hi − BF16(hi)) in BF16.
__device__ inline uint32_t pack_bf16_residue(float lo, float hi) {
  const float2 h = __bfloat1622float2(__floats2bfloat162_rn(lo, hi));
  return pack_bf16(lo - h.x, hi - h.y);
}

__device__ inline uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// d += a · b, m16n8k16, BF16 operands, fp32 accumulators (no side effects: free to schedule).
__device__ inline void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two n8 accumulator tiles (columns 0–7 and 8–15 of a 16 × 16 block) as one k16 A fragment in
// BF16, times `sign` (±1, exact): the m16n8 accumulator layout is the A layout's half.
__device__ inline void accumulators_as_a(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4], float sign) {
  a[0] = pack_bf16(sign * lo[0], sign * lo[1]);
  a[1] = pack_bf16(sign * lo[2], sign * lo[3]);
  a[2] = pack_bf16(sign * hi[0], sign * hi[1]);
  a[3] = pack_bf16(sign * hi[2], sign * hi[3]);
}

// The lo half of the same fragment: each value's residue after its BF16 rounding.
__device__ inline void accumulators_as_a_residue(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4],
                                                 float sign) {
  a[0] = pack_bf16_residue(sign * lo[0], sign * lo[1]);
  a[1] = pack_bf16_residue(sign * lo[2], sign * lo[3]);
  a[2] = pack_bf16_residue(sign * hi[0], sign * hi[1]);
  a[3] = pack_bf16_residue(sign * hi[2], sign * hi[3]);
}

// Starts chunk ci's W (BF16 [64][128]), k̂ rows (zero past len; with kn_lo its lo half into Kl
// too) and G into one buffer set.
__device__ inline void fetch_chunk_wkg(const bf16* W, const bf16* kn, const bf16* kn_lo, const float* gcum,
                                       int64_t slot, int64_t t0, int len, int n_k, int kh, bf16* Wb, bf16* Kb,
                                       bf16* Kl, float* gc, int tid) {
  const bf16* w = W + slot * kC * kD;
  for (int e = tid; e < kC * kD / 8; e += kRegThreads) {
    const int r = e / (kD / 8), c = e % (kD / 8);
    copy16(Wb + r * kLdW + 8 * c, w + r * kD + 8 * c);
  }
  if (kn_lo) fetch_rows<kRegThreads>(kn_lo, t0, len, n_k, kh, Kl, tid);
  fetch_kg<kRegThreads>(kn, gcum, slot, t0, len, n_k, kh, Kb, gc, tid);  // commits W's copy with them
}

template <bool kSplit>
__global__ void __launch_bounds__(kRegThreads) state_registers_kernel(const bf16* kn, const bf16* kn_lo,
                                                                      const float* gcum, const bf16* W,
                                                                      const float* Ut, int64_t tokens,
                                                                      const int* table, int nc, int n_k, int n_v,
                                                                      float* states, bf16* Sct, bf16* Sct_lo,
                                                                      bf16* vnt, bf16* vnt_lo) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kKBufs = kSplit ? 4 : 2;
  bf16* Wbuf = reinterpret_cast<bf16*>(smem);                   // 2 × [64][kLdW] W (chunk parity)
  bf16* Kbuf = Wbuf + 2 * kC * kLdW;                            // 2 × [64][kLdW] k̂
  bf16* Klbuf = Kbuf + 2 * kC * kLdW;                           // 2 × [64][kLdW] k̂'s lo half (split)
  float* gbuf = reinterpret_cast<float*>(Kbuf + kKBufs * kC * kLdW); // 2 × [64] G
  const int h = blockIdx.x, b = blockIdx.z, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;                          // the mma fragments' row group and column pair
  const int col0 = blockIdx.y * kRegCols + warp * 16;           // this warp's first state column
  const int kh = h / (n_v / n_k);
  const bf16* klo = kSplit ? kn_lo : nullptr;
  float* st = states + (static_cast<int64_t>(b) * n_v + h) * kD * kD;  // [d_k][d_v]
  // Sᵀ: 16 n8 tiles over d_k; element i of tile j is (column col0 + g + 8·(i / 2), row 8j + 2t + i % 2).
  float s[kD / 8][4];
#pragma unroll
  for (int j = 0; j < kD / 8; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) s[j][i] = st[(8 * j + 2 * t + i % 2) * kD + col0 + g + 8 * (i / 2)];
  const int c_begin = table ? table[2 * nc + b] : 0, c_end = table ? table[2 * nc + b + 1] : nc;
  if (c_begin < c_end) {
    int64_t t0;
    int len;
    chunk_rows(table, nc, tokens, c_begin, t0, len);
    fetch_chunk_wkg(W, kn, klo, gcum, static_cast<int64_t>(c_begin) * n_v + h, t0, len, n_k, kh, Wbuf, Kbuf, Klbuf,
                    gbuf, tid);
  }
  for (int ci = c_begin; ci < c_end; ++ci) {
    const int64_t slot = static_cast<int64_t>(ci) * n_v + h;
    const int parity = (ci - c_begin) & 1;
    const bf16* Wb = Wbuf + parity * kC * kLdW;
    const bf16* Kb = Kbuf + parity * kC * kLdW;
    const bf16* Kl = Klbuf + parity * kC * kLdW;
    const float* gc = gbuf + parity * kC;
    int64_t t0;
    int len;
    chunk_rows(table, nc, tokens, ci, t0, len);
    __pipeline_wait_prior(0);
    __syncthreads();  // chunk ci's W, k̂ and G are in place; every warp is done with chunk ci − 1's buffers
    if (ci + 1 < c_end) {
      int64_t next_t0;
      int next_len;
      chunk_rows(table, nc, tokens, ci + 1, next_t0, next_len);
      fetch_chunk_wkg(W, kn, klo, gcum, slot + n_v, next_t0, next_len, n_k, kh, Wbuf + (parity ^ 1) * kC * kLdW,
                      Kbuf + (parity ^ 1) * kC * kLdW, Klbuf + (parity ^ 1) * kC * kLdW, gbuf + (parity ^ 1) * kC,
                      tid);
    }
    // v_newᵀ starts as Uᵀ: 8 n8 tiles over the chunk's 64 rows; element i of tile n is
    // (column col0 + g + 8·(i / 2), row 8n + 2t + i % 2).
    float v[kC / 8][4];
    const float* u = Ut + slot * kD * kC;
#pragma unroll
    for (int n = 0; n < kC / 8; ++n)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float2 x = *reinterpret_cast<const float2*>(u + (col0 + g + 8 * half) * kC + 8 * n + 2 * t);
        v[n][2 * half] = x.x;
        v[n][2 * half + 1] = x.y;
      }
    // S_cᵀ out (BF16), and v_newᵀ −= Sᵀ Wᵀ over d_k in k16 steps.
    bf16* sct = Sct + slot * kD * kD;
    bf16* sct_lo = kSplit ? Sct_lo + slot * kD * kD : nullptr;
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      uint32_t a[4], al[4];
      accumulators_as_a(a, s[2 * kk], s[2 * kk + 1], -1.0f);
      if constexpr (kSplit) accumulators_as_a_residue(al, s[2 * kk], s[2 * kk + 1], -1.0f);
#pragma unroll
      for (int jj = 0; jj < 2; ++jj)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int64_t at = (col0 + g + 8 * half) * kD + 16 * kk + 8 * jj + 2 * t;
          const float x0 = s[2 * kk + jj][2 * half], x1 = s[2 * kk + jj][2 * half + 1];
          *reinterpret_cast<uint32_t*>(sct + at) = pack_bf16(x0, x1);
          if constexpr (kSplit) *reinterpret_cast<uint32_t*>(sct_lo + at) = pack_bf16_residue(x0, x1);
        }
      // B = Wᵀ: for each pair of row tiles n, n + 1 the matrices (rows 8n…, d_k 16kk…),
      // (8n…, 16kk + 8…), (8n + 8…, 16kk…), (8n + 8…, 16kk + 8…); all four loads issued before
      // the products, so their latencies overlap.
      const int m = lane / 8, r = lane % 8;
      uint32_t bw[kC / 16][4];
#pragma unroll
      for (int p = 0; p < kC / 16; ++p) ldmatrix_x4(bw[p], Wb + (16 * p + 8 * (m / 2) + r) * kLdW + 16 * kk + 8 * (m % 2));
#pragma unroll
      for (int p = 0; p < kC / 16; ++p) {
        if constexpr (kSplit) {
          mma_bf16(v[2 * p], al, bw[p][0], bw[p][1]);
          mma_bf16(v[2 * p + 1], al, bw[p][2], bw[p][3]);
        }
        mma_bf16(v[2 * p], a, bw[p][0], bw[p][1]);
        mma_bf16(v[2 * p + 1], a, bw[p][2], bw[p][3]);
      }
    }
    // v_newᵀ out (BF16), then its columns scaled by exp(G_last − G) for the update.
    const float g_last = gc[len - 1];
    bf16* vt = vnt + slot * kD * kC;
    bf16* vt_lo = kSplit ? vnt_lo + slot * kD * kC : nullptr;
#pragma unroll
    for (int n = 0; n < kC / 8; ++n) {
      const float d0 = __expf(g_last - gc[8 * n + 2 * t]), d1 = __expf(g_last - gc[8 * n + 2 * t + 1]);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int64_t at = (col0 + g + 8 * half) * kC + 8 * n + 2 * t;
        *reinterpret_cast<uint32_t*>(vt + at) = pack_bf16(v[n][2 * half], v[n][2 * half + 1]);
        if constexpr (kSplit)
          *reinterpret_cast<uint32_t*>(vt_lo + at) = pack_bf16_residue(v[n][2 * half], v[n][2 * half + 1]);
        v[n][2 * half] *= d0;
        v[n][2 * half + 1] *= d1;
      }
    }
    // Sᵀ ← exp(G_last) Sᵀ + (scaled v_new)ᵀ k̂ over the chunk's rows in k16 steps.
    const float decay = __expf(g_last);
#pragma unroll
    for (int j = 0; j < kD / 8; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[j][i] *= decay;
#pragma unroll
    for (int kt = 0; kt < kC / 16; ++kt) {
      uint32_t a[4], al[4];
      accumulators_as_a(a, v[2 * kt], v[2 * kt + 1], 1.0f);
      if constexpr (kSplit) accumulators_as_a_residue(al, v[2 * kt], v[2 * kt + 1], 1.0f);
      // B = k̂ (rows × d_k), transposed by ldmatrix: for each pair of d_k tiles j, j + 1 the
      // matrices (rows 16kt…, d_k 8j…), (16kt + 8…, 8j…), (16kt…, 8j + 8…), (16kt + 8…, 8j + 8…);
      // loads first, in groups of four (two with split operands: their lo halves come too).
      const int m = lane / 8, r = lane % 8;
      constexpr int kGroup = kSplit ? 2 : 4;
#pragma unroll
      for (int q = 0; q < 8 / kGroup; ++q) {
        uint32_t bk[kGroup][4], bl[kGroup][4];
#pragma unroll
        for (int p = 0; p < kGroup; ++p) {
          const int at = (16 * kt + 8 * (m % 2) + r) * kLdW + 8 * (2 * (kGroup * q + p) + m / 2);
          ldmatrix_x4_trans(bk[p], Kb + at);
          if constexpr (kSplit) ldmatrix_x4_trans(bl[p], Kl + at);
        }
#pragma unroll
        for (int p = 0; p < kGroup; ++p) {
          const int j = 2 * (kGroup * q + p);
          if constexpr (kSplit) {
            mma_bf16(s[j], a, bl[p][0], bl[p][1]);
            mma_bf16(s[j + 1], a, bl[p][2], bl[p][3]);
            mma_bf16(s[j], al, bk[p][0], bk[p][1]);
            mma_bf16(s[j + 1], al, bk[p][2], bk[p][3]);
          }
          mma_bf16(s[j], a, bk[p][0], bk[p][1]);
          mma_bf16(s[j + 1], a, bk[p][2], bk[p][3]);
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kD / 8; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) st[(8 * j + 2 * t + i % 2) * kD + col0 + g + 8 * (i / 2)] = s[j][i];
}

// 4. Output per (chunk = blockIdx.x, v head = blockIdx.y); 256 threads.
// kT: S_c and v_new arrive transposed (the register pass's layout, S_cᵀ [d_v][d_k] and v_newᵀ
// [d_v][64]); their tiles then load as column-major B operands.
// kSplit (with kT only): q̂, k̂, S_cᵀ and v_newᵀ come with their lo halves (the *_lo arrays), P
// and q̂ exp(G) are split in shared memory, every product is three. Shared memory grows from
// ~94 to ~173 KiB: one block per SM.
constexpr int kOutThreads = 256;
constexpr int kLdVt = kC + 8;  // v_newᵀ: BF16 [128][72]
template <bool kT>
constexpr int kKvElems = kT && kD * kLdVt > kC * kLdB ? kD * kLdVt : kC * kLdB;  // k̂, then v_new(ᵀ)
// The layout (in BF16 elements): Qs [64][kLdB], KV, QK (fp32), P [64][kLdT], Ss [128][kLdB],
// G; with kSplit each BF16 array has its lo half right after it.
template <bool kT, bool kSplit>
struct OutLayout {
  static constexpr int kHalves = kSplit ? 2 : 1;
  static constexpr size_t kv = static_cast<size_t>(kHalves) * kC * kLdB;
  static constexpr size_t qk = kv + static_cast<size_t>(kHalves) * kKvElems<kT>;
  static constexpr size_t p = qk + kC * kLdA * sizeof(float) / sizeof(bf16);
  static constexpr size_t ss = p + static_cast<size_t>(kHalves) * kC * kLdT;
  static constexpr size_t g = ss + static_cast<size_t>(kHalves) * kD * kLdB;
  static constexpr size_t bytes = g * sizeof(bf16) + kC * sizeof(float);
};
template <bool kT, bool kSplit>
constexpr size_t kOutSmem = OutLayout<kT, kSplit>::bytes;
static_assert(kC * kLdO * sizeof(float) <= 2 * kC * kLdB * sizeof(bf16), "O's staging fits over Qs and KV");
static_assert(kOutSmem<true, true> <= 227 * 1024, "the split output kernel fits one SM's shared memory");

// acc += a · B's 16 × 16 block with split operands: a (hi) and al (lo), B and its lo half Bl.
template <bool kT>
__device__ __forceinline__ void mma3_b_block(FragC& acc, const FragA& a, const FragA& al, const bf16* B,
                                             const bf16* Bl, int ld, int kk, int tn) {
  const int at = kT ? tn * 16 * ld + kk * 16 : kk * 16 * ld + tn * 16;
  if constexpr (kT) {
    FragBT b, bl;
    wmma::load_matrix_sync(b, B + at, ld);
    wmma::load_matrix_sync(bl, Bl + at, ld);
    mma3(acc, a, al, b, bl);
  } else {
    FragB b, bl;
    wmma::load_matrix_sync(b, B + at, ld);
    wmma::load_matrix_sync(bl, Bl + at, ld);
    mma3(acc, a, al, b, bl);
  }
}

template <bool kT, bool kSplit>
__global__ void __launch_bounds__(kOutThreads) out_kernel(const bf16* qn, const bf16* kn, const bf16* qn_lo,
                                                          const bf16* kn_lo, const float* gcum, const bf16* Sc,
                                                          const bf16* Sc_lo, const bf16* vnew, const bf16* vnew_lo,
                                                          int64_t tokens, const int* table, int nc, int n_k, int n_v,
                                                          float* out) {
  static_assert(!kSplit || kT, "split operands come with the register pass's transposed layout");
  using L = OutLayout<kT, kSplit>;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* base = reinterpret_cast<bf16*>(smem);
  bf16* Qs = base;                                        // [64][kLdB] q̂, then q̂ exp(G)
  bf16* Ql = Qs + kC * kLdB;                              // its lo half (split)
  bf16* KV = base + L::kv;                                // [64][kLdB] k̂, then v_new ([128][kLdVt] if kT)
  bf16* KVl = KV + kKvElems<kT>;                          // its lo half (split)
  float* O = reinterpret_cast<float*>(smem);              // [64][kLdO] fp32 over Qs and KV, at the end
  float* QK = reinterpret_cast<float*>(base + L::qk);     // [64][kLdA]
  bf16* P = base + L::p;                                  // [64][kLdT]
  bf16* Pl = P + kC * kLdT;                               // its lo half (split)
  bf16* Ss = base + L::ss;                                // [128][kLdB] S_c
  bf16* Sl = Ss + kD * kLdB;                              // its lo half (split)
  float* gc = reinterpret_cast<float*>(base + L::g);      // [64]
  const int ci = blockIdx.x, h = blockIdx.y, tid = threadIdx.x, warp = tid / 32;
  const int kh = h / (n_v / n_k);
  int64_t t0;
  int len;
  chunk_rows(table, nc, tokens, ci, t0, len);
  const int64_t slot = static_cast<int64_t>(ci) * n_v + h;
  fetch_rows<kOutThreads>(qn, t0, len, n_k, kh, Qs, tid);
  fetch_rows<kOutThreads>(kn, t0, len, n_k, kh, KV, tid);
  if constexpr (kSplit) {
    fetch_rows<kOutThreads>(qn_lo, t0, len, n_k, kh, Ql, tid);
    fetch_rows<kOutThreads>(kn_lo, t0, len, n_k, kh, KVl, tid);
  }
  for (int e = tid; e < kD * kD / 8; e += kOutThreads) {
    const int r = e / (kD / 8), c = e % (kD / 8);
    copy16(Ss + r * kLdB + 8 * c, Sc + slot * kD * kD + r * kD + 8 * c);
    if constexpr (kSplit) copy16(Sl + r * kLdB + 8 * c, Sc_lo + slot * kD * kD + r * kD + 8 * c);
  }
  __pipeline_commit();
  if (tid < kC) gc[tid] = gcum[slot * kC + tid];
  __pipeline_wait_prior(0);
  __syncthreads();
  for (int tile = warp; tile < 16; tile += kOutThreads / 32) {
    const int ti = tile / 4, tj = tile % 4;
    if (tj > ti) continue;
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < kD / 16; ++kk) {
      FragA a;
      FragBT b;
      wmma::load_matrix_sync(a, Qs + ti * 16 * kLdB + kk * 16, kLdB);
      wmma::load_matrix_sync(b, KV + tj * 16 * kLdB + kk * 16, kLdB);
      if constexpr (kSplit) {
        FragA al;
        FragBT bl;
        wmma::load_matrix_sync(al, Ql + ti * 16 * kLdB + kk * 16, kLdB);
        wmma::load_matrix_sync(bl, KVl + tj * 16 * kLdB + kk * 16, kLdB);
        mma3(acc, a, al, b, bl);
      } else {
        wmma::mma_sync(acc, a, b, acc);
      }
    }
    wmma::store_matrix_sync(QK + ti * 16 * kLdA + tj * 16, acc, kLdA, wmma::mem_row_major);
  }
  __syncthreads();
  const bf16* vn = vnew + slot * kC * kD;
  if constexpr (kT) {
    for (int e = tid; e < kD * kC / 8; e += kOutThreads) {
      const int r = e / (kC / 8), c = e % (kC / 8);
      copy16(KV + r * kLdVt + 8 * c, vn + r * kC + 8 * c);
      if constexpr (kSplit) copy16(KVl + r * kLdVt + 8 * c, vnew_lo + slot * kC * kD + r * kC + 8 * c);
    }
  } else {
    for (int e = tid; e < kC * kD / 8; e += kOutThreads) {
      const int r = e / (kD / 8), c = e % (kD / 8);
      copy16(KV + r * kLdB + 8 * c, vn + r * kD + 8 * c);
    }
  }
  __pipeline_commit();
  for (int e = tid; e < kC * kC; e += kOutThreads) {
    const int i = e / kC, j = e % kC;
    const float x = j <= i ? QK[i * kLdA + j] * __expf(gc[i] - gc[j]) : 0.0f;
    P[i * kLdT + j] = __float2bfloat16(x);
    if constexpr (kSplit) Pl[i * kLdT + j] = __float2bfloat16(x - __bfloat162float(P[i * kLdT + j]));
  }
  for (int e = tid; e < kC * kD / 2; e += kOutThreads) {
    const int r = e / (kD / 2), a = 2 * (e % (kD / 2));
    __nv_bfloat162* x = reinterpret_cast<__nv_bfloat162*>(Qs + r * kLdB + a);
    const float2 q = __bfloat1622float2(*x);
    const float eg = __expf(gc[r]);
    if constexpr (kSplit) {
      __nv_bfloat162* xl = reinterpret_cast<__nv_bfloat162*>(Ql + r * kLdB + a);
      const float2 l = __bfloat1622float2(*xl);
      split_bf16x2((q.x + l.x) * eg, (q.y + l.y) * eg, *x, *xl);
    } else {
      *x = __floats2bfloat162_rn(q.x * eg, q.y * eg);
    }
  }
  __pipeline_wait_prior(0);
  __syncthreads();
  // O = (q̂ exp(G)) S_c + P v_new: 4 × 8 tiles, 4 per warp; P's blocks above the diagonal are 0.
  constexpr int kPerWarp = (kC / 16) * (kD / 16) / (kOutThreads / 32);
  FragC acc[kPerWarp];
#pragma unroll
  for (int j = 0; j < kPerWarp; ++j) {
    const int tile = warp + j * (kOutThreads / 32);
    const int ti = tile / (kD / 16), tn = tile % (kD / 16);
    wmma::fill_fragment(acc[j], 0.0f);
    for (int kk = 0; kk < kD / 16; ++kk) {
      FragA a;
      wmma::load_matrix_sync(a, Qs + ti * 16 * kLdB + kk * 16, kLdB);
      if constexpr (kSplit) {
        FragA al;
        wmma::load_matrix_sync(al, Ql + ti * 16 * kLdB + kk * 16, kLdB);
        mma3_b_block<kT>(acc[j], a, al, Ss, Sl, kLdB, kk, tn);
      } else {
        mma_b_block<kT>(acc[j], a, Ss, kLdB, kk, tn);  // kT: S_cᵀ, i.e. S_c column-major
      }
    }
    for (int kk = 0; kk <= ti; ++kk) {
      FragA a;
      wmma::load_matrix_sync(a, P + ti * 16 * kLdT + kk * 16, kLdT);
      if constexpr (kSplit) {
        FragA al;
        wmma::load_matrix_sync(al, Pl + ti * 16 * kLdT + kk * 16, kLdT);
        mma3_b_block<kT>(acc[j], a, al, KV, KVl, kLdVt, kk, tn);
      } else {
        mma_b_block<kT>(acc[j], a, KV, kT ? kLdVt : kLdB, kk, tn);  // kT: v_newᵀ, v_new column-major
      }
    }
  }
  __syncthreads();  // O overwrites Qs and KV
#pragma unroll
  for (int j = 0; j < kPerWarp; ++j) {
    const int tile = warp + j * (kOutThreads / 32);
    const int ti = tile / (kD / 16), tn = tile % (kD / 16);
    wmma::store_matrix_sync(O + ti * 16 * kLdO + tn * 16, acc[j], kLdO, wmma::mem_row_major);
  }
  __syncthreads();
  const int64_t row_stride = static_cast<int64_t>(n_v) * kD;
  if (aligned16(out, row_stride)) {
    for (int e = tid; e < len * kD / 4; e += kOutThreads) {
      const int r = e / (kD / 4), c = 4 * (e % (kD / 4));
      *reinterpret_cast<float4*>(out + (t0 + r) * row_stride + static_cast<int64_t>(h) * kD + c) =
          *reinterpret_cast<const float4*>(O + r * kLdO + c);
    }
  } else {
    for (int e = tid; e < len * kD; e += kOutThreads)
      out[(t0 + e / kD) * row_stride + static_cast<int64_t>(h) * kD + e % kD] = O[(e / kD) * kLdO + e % kD];
  }
}

// One stream-ordered allocation carved into the scratch arrays (256-byte aligned each).
class Scratch {
 public:
  Scratch(size_t bytes, cudaStream_t s) : s_(s) { STAVE_CUDA_CHECK(cudaMallocAsync(&base_, bytes, s)); }
  ~Scratch() { cudaFreeAsync(base_, s_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <class T>
  T* take(size_t count) {
    T* p = reinterpret_cast<T*>(static_cast<unsigned char*>(base_) + used_);
    used_ += round_up(count * sizeof(T));
    return p;
  }
  static size_t round_up(size_t b) { return (b + 255) / 256 * 256; }

 private:
  void* base_ = nullptr;
  size_t used_ = 0;
  cudaStream_t s_;
};

template <class Kernel>
void allow_smem(Kernel k, size_t bytes) {
  STAVE_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// The benchmark profile (gated_delta_chunk.h): five events around the four kernels.
struct Profiler {
  bool on = false;
  cudaEvent_t ev[5] = {};
  GatedDeltaChunkProfile totals;
  void mark(int i, cudaStream_t s) {
    if (on) STAVE_CUDA_CHECK(cudaEventRecord(ev[i], s));
  }
  void collect() {
    if (!on) return;
    STAVE_CUDA_CHECK(cudaEventSynchronize(ev[4]));
    float ms[4];
    for (int i = 0; i < 4; ++i) STAVE_CUDA_CHECK(cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]));
    totals.qk_norm_ms += ms[0];
    totals.wu_ms += ms[1];
    totals.state_ms += ms[2];
    totals.out_ms += ms[3];
    ++totals.calls;
  }
};
Profiler g_profiler;

}  // namespace

void gated_delta_chunk_profile(bool on) {
  if (on && !g_profiler.ev[0])
    for (cudaEvent_t& e : g_profiler.ev) STAVE_CUDA_CHECK(cudaEventCreate(&e));
  g_profiler.on = on;
  g_profiler.totals = {};
}

GatedDeltaChunkProfile gated_delta_chunk_profile_read() { return g_profiler.totals; }

namespace {

// STAVE_CUDA_DELTA: "auto" (the default: the chunk form where it applies, with split operands
// over the register pass, 3b), "chunk-split" (the same), "chunk-bf16" (the chunk form with plain
// BF16 operands over the register pass: the default until 2026-12-06, ~1.8× faster, ~2.4× the
// decision error; "chunk-registers", its name while it was an experiment, is the same),
// "chunk-shared" (plain BF16 operands, the earlier pass 3a with the state in shared memory) or
// "recurrent" (the per-token recurrence everywhere).
enum class DeltaChoice { kSplit, kBf16, kChunkShared, kRecurrent };
DeltaChoice delta_choice_from_env() {
  return env_choice<DeltaChoice>("STAVE_CUDA_DELTA", {{"auto", DeltaChoice::kSplit},
                                                      {"chunk-split", DeltaChoice::kSplit},
                                                      {"chunk-bf16", DeltaChoice::kBf16},
                                                      {"chunk-registers", DeltaChoice::kBf16},
                                                      {"chunk-shared", DeltaChoice::kChunkShared},
                                                      {"recurrent", DeltaChoice::kRecurrent}});
}

// The scratch of one call: q̂, k̂ (and their lo halves), G, W, U, S_c, v_new (and theirs), the
// chunk table.
struct ChunkScratch {
  bf16 *qn, *kn, *qn_lo = nullptr, *kn_lo = nullptr;
  float* gcum;
  bf16* W;
  float* U;
  bf16 *Sc, *vnew, *Sc_lo = nullptr, *vnew_lo = nullptr;
};

// Steps 2–4 over the register pass (3b), with or without split operands.
template <bool kSplit>
void launch_register_form(const GatedDeltaInput& in, int64_t T, const int* table, int nc, int nk, int nv, int n_seq,
                          const ChunkScratch& x, float* states, float* out, cudaStream_t s) {
  allow_smem(wu_kernel<true, kSplit>, kWuSmem<kSplit>);
  wu_kernel<true, kSplit><<<dim3(nc, nv), kWuThreads, kWuSmem<kSplit>, s>>>(
      x.kn, x.kn_lo, in.v, in.stride, in.g, in.beta, T, table, nc, nk, nv, x.gcum, x.W, x.U);
  STAVE_CUDA_LAUNCHED();
  g_profiler.mark(2, s);
  allow_smem(state_registers_kernel<kSplit>, kRegSmem<kSplit>);
  state_registers_kernel<kSplit><<<dim3(nv, kD / kRegCols, static_cast<unsigned>(n_seq)), kRegThreads,
                                   kRegSmem<kSplit>, s>>>(x.kn, x.kn_lo, x.gcum, x.W, x.U, T, table, nc, nk, nv,
                                                          states, x.Sc, x.Sc_lo, x.vnew, x.vnew_lo);
  STAVE_CUDA_LAUNCHED();
  g_profiler.mark(3, s);
  allow_smem(out_kernel<true, kSplit>, kOutSmem<true, kSplit>);
  out_kernel<true, kSplit><<<dim3(nc, nv), kOutThreads, kOutSmem<true, kSplit>, s>>>(
      x.qn, x.kn, x.qn_lo, x.kn_lo, x.gcum, x.Sc, x.Sc_lo, x.vnew, x.vnew_lo, T, table, nc, nk, nv, out);
  STAVE_CUDA_LAUNCHED();
}

// Steps 2–4 over the shared-memory pass (3a).
void launch_shared_form(const GatedDeltaInput& in, int64_t T, const int* table, int nc, int nk, int nv, int n_seq,
                        const ChunkScratch& x, float* states, float* out, cudaStream_t s) {
  allow_smem(wu_kernel<false, false>, kWuSmem<false>);
  wu_kernel<false, false><<<dim3(nc, nv), kWuThreads, kWuSmem<false>, s>>>(
      x.kn, nullptr, in.v, in.stride, in.g, in.beta, T, table, nc, nk, nv, x.gcum, x.W, x.U);
  STAVE_CUDA_LAUNCHED();
  g_profiler.mark(2, s);
  allow_smem(state_kernel, kStateSmem);
  state_kernel<<<dim3(nv, kD / kBV, static_cast<unsigned>(n_seq)), kStateThreads, kStateSmem, s>>>(
      x.kn, x.gcum, x.W, x.U, T, table, nc, nk, nv, states, x.Sc, x.vnew);
  STAVE_CUDA_LAUNCHED();
  g_profiler.mark(3, s);
  allow_smem(out_kernel<false, false>, kOutSmem<false, false>);
  out_kernel<false, false><<<dim3(nc, nv), kOutThreads, kOutSmem<false, false>, s>>>(
      x.qn, x.kn, nullptr, nullptr, x.gcum, x.Sc, nullptr, x.vnew, nullptr, T, table, nc, nk, nv, out);
  STAVE_CUDA_LAUNCHED();
}

}  // namespace

bool gated_delta_chunk_applies(const GatedDeltaDims& dims, int64_t tokens, int64_t sequences) {
  if (delta_choice_from_env() == DeltaChoice::kRecurrent) return false;
  return dims.d_k == kD && dims.d_v == kD && dims.n_k_heads > 0 && dims.n_v_heads % dims.n_k_heads == 0 &&
         tokens > sequences;
}

void gated_delta_rule_chunked(const GatedDeltaDims& dims, const GatedDeltaInput& in, std::span<const int64_t> starts,
                              float* states, float* out, cudaStream_t s) {
  const int64_t T = in.tokens;
  if (T <= 0) return;
  if (dims.d_k != kD || dims.d_v != kD || dims.n_k_heads <= 0 || dims.n_v_heads % dims.n_k_heads != 0)
    throw Error(ErrorKind::kInternal, "chunked gated delta rule: needs d_k = d_v = 128 and n_v a multiple of n_k");
  const int64_t n_seq = static_cast<int64_t>(starts.size()) - 1;
  if (n_seq < 1 || n_seq > 65535 || starts.front() != 0 || starts.back() != T || T >= (int64_t{1} << 31))
    throw Error(ErrorKind::kInternal, "chunked gated delta rule: bad sequence offsets for " + std::to_string(T) +
                                          " tokens");
  const int nk = static_cast<int>(dims.n_k_heads), nv = static_cast<int>(dims.n_v_heads);
  // Chunks of 64 from each sequence's first row; the table only for several sequences.
  std::vector<int> t0s, lens, first{0};
  for (int64_t b = 0; b < n_seq; ++b) {
    if (starts[b + 1] < starts[b])
      throw Error(ErrorKind::kInternal, "chunked gated delta rule: sequence offsets go down");
    for (int64_t t = starts[b]; t < starts[b + 1]; t += kC) {
      t0s.push_back(static_cast<int>(t));
      lens.push_back(static_cast<int>(std::min<int64_t>(kC, starts[b + 1] - t)));
    }
    first.push_back(static_cast<int>(t0s.size()));
  }
  const int nc = static_cast<int>(t0s.size());
  const DeltaChoice choice = delta_choice_from_env();
  const bool split = choice == DeltaChoice::kSplit;
  const size_t halves = split ? 2 : 1;
  const size_t per_chunk = static_cast<size_t>(nc) * nv;
  const size_t qk = static_cast<size_t>(T) * nk * kD;
  Scratch scratch(2 * halves * Scratch::round_up(qk * sizeof(bf16)) + Scratch::round_up(per_chunk * kC * sizeof(float)) +
                      Scratch::round_up(per_chunk * kC * kD * sizeof(bf16)) +
                      Scratch::round_up(per_chunk * kC * kD * sizeof(float)) +
                      halves * Scratch::round_up(per_chunk * kD * kD * sizeof(bf16)) +
                      halves * Scratch::round_up(per_chunk * kC * kD * sizeof(bf16)) +
                      Scratch::round_up((2 * nc + n_seq + 1) * sizeof(int)),
                  s);
  ChunkScratch x;
  x.qn = scratch.take<bf16>(qk);
  x.kn = scratch.take<bf16>(qk);
  x.gcum = scratch.take<float>(per_chunk * kC);
  x.W = scratch.take<bf16>(per_chunk * kC * kD);
  x.U = scratch.take<float>(per_chunk * kC * kD);
  x.Sc = scratch.take<bf16>(per_chunk * kD * kD);
  x.vnew = scratch.take<bf16>(per_chunk * kC * kD);
  if (split) {
    x.qn_lo = scratch.take<bf16>(qk);
    x.kn_lo = scratch.take<bf16>(qk);
    x.Sc_lo = scratch.take<bf16>(per_chunk * kD * kD);
    x.vnew_lo = scratch.take<bf16>(per_chunk * kC * kD);
  }
  int* table = nullptr;
  if (n_seq > 1) {
    std::vector<int> host = t0s;
    host.insert(host.end(), lens.begin(), lens.end());
    host.insert(host.end(), first.begin(), first.end());
    table = scratch.take<int>(host.size());
    // From pageable memory: staged before the call returns, so `host` may go.
    STAVE_CUDA_CHECK(cudaMemcpyAsync(table, host.data(), host.size() * sizeof(int), cudaMemcpyHostToDevice, s));
  }

  g_profiler.mark(0, s);
  const int64_t warps = 2 * T * nk;
  qk_norm_kernel<<<static_cast<unsigned>((warps * 32 + 255) / 256), 256, 0, s>>>(
      in.q, in.k, in.stride, T, nk, 1.0f / std::sqrt(static_cast<float>(kD)), x.qn, x.kn, x.qn_lo, x.kn_lo);
  STAVE_CUDA_LAUNCHED();
  g_profiler.mark(1, s);
  const int seqs = static_cast<int>(n_seq);
  if (split)
    launch_register_form<true>(in, T, table, nc, nk, nv, seqs, x, states, out, s);
  else if (choice == DeltaChoice::kChunkShared)
    launch_shared_form(in, T, table, nc, nk, nv, seqs, x, states, out, s);
  else
    launch_register_form<false>(in, T, table, nc, nk, nv, seqs, x, states, out, s);
  g_profiler.mark(4, s);
  g_profiler.collect();
}

}  // namespace stave::cuda::dev
