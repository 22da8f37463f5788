// The chunked gated delta rule, steps 1 and 2 (gated_delta_chunk.cu has the algorithm): q̂ and k̂
// by L2 norm, then per (chunk, head) the UT transform's W and U with (I + A)⁻¹ by blocks.
#include <cuda_bf16.h>
#include <cuda_pipeline.h>
#include <mma.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gated_delta_chunk_device.cuh"
#include "backends/cuda/gated_delta_chunk_launch.h"
#include "stave/errors.h"

namespace stave::cuda::dev::delta_chunk {
namespace {

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

// T = (I + A)⁻¹ for the strictly lower A [64][kLdA] (fp32), by 16 × 16 blocks so that all
// kThreads threads work and the longest chain is short (one thread per column of the whole
// matrix was a chain of 2,016 dependent FMAs on half the threads):
//   1. the diagonal blocks T_dd = (I + A_dd)⁻¹, thread (d, c) column c of block d by forward
//      substitution (rows above c come out 0);
//   2. the blocks below by distance i − j = 1, 2, 3: T_ij = −T_ii · X, X = Σ_{k=j}^{i−1} A_ik T_kj
//      (the T_kj all nearer the diagonal), through X in `scratch` (≥ 3 · 256 floats).
// Blocks above the diagonal are set to 0. Tf [64][64]. Ends with the block synchronized.
constexpr int kTb = 16;  // block of the inverse
template <int kThreads>
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
  for (int e = tid; e < kC * kC; e += kThreads) {
    const int r = e / kC, c = e % kC;
    if (c / kTb > r / kTb) Tf[e] = 0.0f;
  }
  __syncthreads();
  // Each thread forms 4 neighbouring columns of a row (kQuad): one load of A's or T_ii's value
  // serves all four, T's and X's four come as one float4, and the four sums are independent
  // chains (Nsight Compute, 2026-12-07: one column per thread, each FMA waiting on its two
  // shared loads, took a fifth of the transform's samples). Every sum keeps its order (k, then
  // n or m), so the values are those of one column per thread.
  constexpr int kQuad = 4;
  for (int dist = 1; dist < kN; ++dist) {
    const int blocks = kN - dist;  // (i, j) = (b + dist, b)
    for (int e = tid; e < blocks * kTb * kTb / kQuad; e += kThreads) {
      const int b = e / (kTb * kTb / kQuad), r = (e / (kTb / kQuad)) % kTb, c = kQuad * (e % (kTb / kQuad));
      const int i = b + dist, j = b;
      float x[kQuad] = {};
      for (int k = j; k < i; ++k) {
        const float* a = Af + (i * kTb + r) * kLdA + k * kTb;
        const float* t = Tf + (k * kTb) * kC + j * kTb + c;
#pragma unroll
        for (int n = 0; n < kTb; ++n) {
          const float an = a[n];
          const float4 tn = *reinterpret_cast<const float4*>(t + n * kC);
          x[0] += an * tn.x;
          x[1] += an * tn.y;
          x[2] += an * tn.z;
          x[3] += an * tn.w;
        }
      }
      *reinterpret_cast<float4*>(scratch + b * kTb * kTb + r * kTb + c) = make_float4(x[0], x[1], x[2], x[3]);
    }
    __syncthreads();
    for (int e = tid; e < blocks * kTb * kTb / kQuad; e += kThreads) {
      const int b = e / (kTb * kTb / kQuad), r = (e / (kTb / kQuad)) % kTb, c = kQuad * (e % (kTb / kQuad));
      const int i = b + dist, j = b;
      const float* tii = Tf + (i * kTb + r) * kC + i * kTb;
      const float* x = scratch + b * kTb * kTb + c;
      float y[kQuad] = {};
#pragma unroll
      for (int m = 0; m < kTb; ++m) {
        const float tm = tii[m];
        const float4 xm = *reinterpret_cast<const float4*>(x + m * kTb);
        y[0] += tm * xm.x;
        y[1] += tm * xm.y;
        y[2] += tm * xm.z;
        y[3] += tm * xm.w;
      }
      *reinterpret_cast<float4*>(Tf + (i * kTb + r) * kC + j * kTb + c) = make_float4(-y[0], -y[1], -y[2], -y[3]);
    }
    __syncthreads();
  }
}

// 2. W and U per (chunk = blockIdx.x, v head = blockIdx.y); kThreads threads (256 by default since
// 2026-12-07, 0.214 → 0.172 ms per 27B layer at 2048 tokens on an H100; 128 with
// STAVE_CUDA_DELTA_WU=narrow). Also writes G.
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
static_assert((kWuThreadsWide / 32) * 16 * kLdWst * sizeof(float) <= kC * kC * sizeof(float), "W's staging fits over Tf");

// kUt: U goes out transposed, [d_v][64] per (chunk, head), for the register pass (3b).
// kSplit: k̂ comes with its lo half (kn_lo); β v, T and β k̂ exp(G) are split in shared memory
// and every product is three; W still goes out as one BF16 array.
template <bool kUt, bool kSplit, int kThreads>
__global__ void __launch_bounds__(kThreads) wu_kernel(const bf16* kn, const bf16* kn_lo, const float* v,
                                                        int64_t stride, const float* g, const float* beta,
                                                        int64_t tokens, const int* table, int nc, int n_k, int n_v,
                                                        float* gcum, float* gexp, float* gdec, bf16* W, float* U) {
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

  fetch_rows<kThreads>(kn, t0, len, n_k, kh, Ks, tid);
  if constexpr (kSplit) fetch_rows<kThreads>(kn_lo, t0, len, n_k, kh, Kl, tid);
  __pipeline_commit();
  // v's rows, where they are 16-byte aligned (the packed projection's): every load of this
  // thread issued here, before the first barrier, so that they are in flight together with the
  // k̂ copies and β, g (one round trip to memory instead of one per step of a loop; on an H100,
  // 2026-12-07: 0.169 → 0.162 ms per 27B layer at 2048 tokens, 0.641 → 0.609 at 8192).
  const bool v_aligned = aligned16(v, stride);
  constexpr int kVSteps = kC * kD / 4 / kThreads;
  static_assert(kC * kD / 4 % kThreads == 0, "v's float4s split evenly over the threads");
  float4 vx[kVSteps];
  if (v_aligned) {
#pragma unroll
    for (int i = 0; i < kVSteps; ++i) {
      const int e = tid + i * kThreads, r = e / (kD / 4), a = 4 * (e % (kD / 4));
      vx[i] = r < len ? __ldg(reinterpret_cast<const float4*>(v + (t0 + r) * stride + static_cast<int64_t>(h) * kD + a))
                      : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
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
  // β v in BF16 (rows past len are 0, as is β there).
  if (v_aligned) {
#pragma unroll
    for (int i = 0; i < kVSteps; ++i) {
      const int e = tid + i * kThreads, r = e / (kD / 4), a = 4 * (e % (kD / 4));
      const float b = bt[r];
      const float4 x = make_float4(vx[i].x * b, vx[i].y * b, vx[i].z * b, vx[i].w * b);
      store_bf16x4(Vs + r * kLdB + a, x);
      if constexpr (kSplit) store_bf16x4(Vl + r * kLdB + a, bf16_residue4(x));
    }
  } else {
    for (int e = tid; e < kC * kD; e += kThreads) {
      const int r = e / kD, a = e % kD;
      const float x = r < len ? v[(t0 + r) * stride + static_cast<int64_t>(h) * kD + a] * bt[r] : 0.0f;
      Vs[r * kLdB + a] = __float2bfloat16(x);
      if constexpr (kSplit) Vl[r * kLdB + a] = __float2bfloat16(x - __bfloat162float(Vs[r * kLdB + a]));
    }
  }
  __pipeline_wait_prior(0);
  __syncthreads();
  if (tid < kC) {
    gcum[slot * kC + tid] = gc[tid];
    // The pass's factors, the same expressions as it formed them (__expf of G and of G_last − G,
    // G_last the chunk's last row): the same bits.
    if (gexp) {
      gexp[slot * kC + tid] = ex[tid];
      gdec[slot * kC + tid] = __expf(gc[len - 1] - gc[tid]);
    }
  }
  // A = strictly-lower β k̂ k̂ᵀ ⊙ exp(Gᵢ − Gⱼ), each tile by the warp that formed it (Nsight
  // Compute, 2026-12-07: the pass over the whole matrix behind its own barrier took 14 % of the
  // kernel's samples). Tiles above the diagonal are not read (invert_unit_lower).
  const int lane = tid % 32;
  lower_tiles_xyt<kThreads, kSplit>(Ks, Kl, Ks, Kl, Af, warp, [&](int ti, int tj) {
#pragma unroll
    for (int q = lane; q < 16 * 16; q += 32) {
      const int i = 16 * ti + q / 16, j = 16 * tj + q % 16;
      float& a = Af[i * kLdA + j];
      a = j < i ? bt[i] * a * __expf(gc[i] - gc[j]) : 0.0f;
    }
  });
  __syncthreads();
  invert_unit_lower<kThreads>(Af, Tf, X, tid);  // ends synchronized: Af is free for Tb
  for (int e = tid; e < kC * kC / 2; e += kThreads) {
    const float2 t = reinterpret_cast<const float2*>(Tf)[e];
    const int at = (2 * e / kC) * kLdT + 2 * e % kC;
    if constexpr (kSplit) {
      split_bf16x2(t.x, t.y, *reinterpret_cast<__nv_bfloat162*>(Tb + at), *reinterpret_cast<__nv_bfloat162*>(Tl + at));
    } else {
      *reinterpret_cast<__nv_bfloat162*>(Tb + at) = __floats2bfloat162_rn(t.x, t.y);
    }
  }
  for (int e = tid; e < kC * kD / 2; e += kThreads) {
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
  // Each warp takes whole columns of tiles tn (W's and U's), two row blocks at a time, k step by
  // k step: each B block of k̂ and β v is loaded once for the row blocks that use it (24 loads of
  // K's and V's blocks per column where one tile at a time took 40; all four row blocks at once
  // would hold 130 registers, one block per SM). Every tile still sums its k steps in order, so
  // the values are those of one tile at a time.
  constexpr int kRowBlocks = kC / 16, kPair = 2;
  for (int tn = warp; tn < kD / 16; tn += kThreads / 32) {
#pragma unroll
    for (int t0b = 0; t0b < kRowBlocks; t0b += kPair) {
      FragC w[kPair], u[kPair];
#pragma unroll
      for (int p = 0; p < kPair; ++p) {
        wmma::fill_fragment(w[p], 0.0f);
        wmma::fill_fragment(u[p], 0.0f);
      }
#pragma unroll
      for (int kk = 0; kk < t0b + kPair; ++kk) {
        FragB bk, bv;
        wmma::load_matrix_sync(bk, Ks + kk * 16 * kLdB + tn * 16, kLdB);
        wmma::load_matrix_sync(bv, Vs + kk * 16 * kLdB + tn * 16, kLdB);
        if constexpr (kSplit) {
          FragB bkl, bvl;
          wmma::load_matrix_sync(bkl, Kl + kk * 16 * kLdB + tn * 16, kLdB);
          wmma::load_matrix_sync(bvl, Vl + kk * 16 * kLdB + tn * 16, kLdB);
#pragma unroll
          for (int p = 0; p < kPair; ++p) {
            const int ti = t0b + p;
            if (kk > ti) continue;  // T's blocks above the diagonal are 0
            FragA a, al;
            wmma::load_matrix_sync(a, Tb + ti * 16 * kLdT + kk * 16, kLdT);
            wmma::load_matrix_sync(al, Tl + ti * 16 * kLdT + kk * 16, kLdT);
            mma3(w[p], a, al, bk, bkl);
            mma3(u[p], a, al, bv, bvl);
          }
        } else {
#pragma unroll
          for (int p = 0; p < kPair; ++p) {
            const int ti = t0b + p;
            if (kk > ti) continue;
            FragA a;
            wmma::load_matrix_sync(a, Tb + ti * 16 * kLdT + kk * 16, kLdT);
            wmma::mma_sync(w[p], a, bk, w[p]);
            wmma::mma_sync(u[p], a, bv, u[p]);
          }
        }
      }
#pragma unroll
      for (int p = 0; p < kPair; ++p) {
        const int ti = t0b + p;
        wmma::store_matrix_sync(Wst, w[p], kLdWst, wmma::mem_row_major);
        if constexpr (kUt)
          wmma::store_matrix_sync(Uc + tn * 16 * kC + ti * 16, u[p], kC, wmma::mem_col_major);
        else
          wmma::store_matrix_sync(Uc + ti * 16 * kD + tn * 16, u[p], kD, wmma::mem_row_major);
        __syncwarp();
        // 16 rows of 16: lane l writes row l / 2, columns 8 (l % 2) … +7, as four BF16 pairs.
        const int r = lane / 2, c0 = 8 * (lane % 2);
        __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(Wc + (ti * 16 + r) * kD + tn * 16 + c0);
#pragma unroll
        for (int q = 0; q < 4; ++q)
          dst[q] = __floats2bfloat162_rn(Wst[r * kLdWst + c0 + 2 * q], Wst[r * kLdWst + c0 + 2 * q + 1]);
        __syncwarp();
      }
    }
  }
}

}  // namespace

void launch_qk_norm(const GatedDeltaInput& in, const ChunkGrid& g, const ChunkScratch& x, cudaStream_t s) {
  const int64_t warps = 2 * g.tokens * g.nk;
  qk_norm_kernel<<<static_cast<unsigned>((warps * 32 + 255) / 256), 256, 0, s>>>(
      in.q, in.k, in.stride, g.tokens, g.nk, 1.0f / std::sqrt(static_cast<float>(kD)), x.qn, x.kn, x.qn_lo, x.kn_lo);
  STAVE_CUDA_LAUNCHED();
}

namespace {
template <bool kUt, bool kSplit, int kThreads>
void launch_wu(const GatedDeltaInput& in, const ChunkGrid& g, const ChunkScratch& x, cudaStream_t s) {
  allow_smem(wu_kernel<kUt, kSplit, kThreads>, kWuSmem<kSplit>);
  wu_kernel<kUt, kSplit, kThreads><<<dim3(g.nc, g.nv), kThreads, kWuSmem<kSplit>, s>>>(
      x.kn, x.kn_lo, in.v, in.stride, in.g, in.beta, g.tokens, g.table, g.nc, g.nk, g.nv, x.gcum, x.gexp, x.gdec, x.W,
      x.U);
  STAVE_CUDA_LAUNCHED();
}
template <bool kUt, bool kSplit>
void launch_wu(const GatedDeltaInput& in, const ChunkGrid& g, const ChunkScratch& x, bool wide, cudaStream_t s) {
  if (wide)
    launch_wu<kUt, kSplit, kWuThreadsWide>(in, g, x, s);
  else
    launch_wu<kUt, kSplit, kWuThreads>(in, g, x, s);
}
}  // namespace

void launch_transform(const GatedDeltaInput& in, const ChunkGrid& g, const ChunkScratch& x, bool u_transposed,
                      bool split, bool wide, cudaStream_t s) {
  if (split && !u_transposed)
    throw Error(ErrorKind::kInternal, "chunked gated delta rule: split operands come with U transposed");
  if (split)
    launch_wu<true, true>(in, g, x, wide, s);
  else if (u_transposed)
    launch_wu<true, false>(in, g, x, wide, s);
  else
    launch_wu<false, false>(in, g, x, wide, s);
}

}  // namespace stave::cuda::dev::delta_chunk
