// The chunked gated delta rule, step 4 (gated_delta_chunk.cu has the algorithm): the outputs
// per (chunk, head) from the chunk's starting state and the intra-chunk scores.
#include <cuda_bf16.h>
#include <cuda_pipeline.h>
#include <mma.h>

#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gated_delta_chunk_device.cuh"
#include "backends/cuda/gated_delta_chunk_launch.h"
#include "stave/errors.h"

namespace stave::cuda::dev::delta_chunk {
namespace {

// 4. Output per (chunk = blockIdx.x, v head = blockIdx.y); 256 threads.
// kT: S_c and v_new arrive transposed (the register pass's layout, S_cᵀ [d_v][d_k] and v_newᵀ
// [d_v][64]); their tiles then load as column-major B operands.
// kSplit (with kT only): q̂, k̂, S_cᵀ and v_newᵀ come with their lo halves (the *_lo arrays), P
// and q̂ exp(G) are split in shared memory, every product is three. Shared memory grows from
// ~94 to ~173 KiB: one block per SM, so the split form runs 16 warps per block (8 plain) to keep
// more loads and products in flight.
// kInterDone (after the register pass's kWholeOut): out already holds (q̂ exp(G)) S_c, so the
// kernel neither loads S_c nor forms that product; it adds P v_new to out. Without S_c's buffers
// the split form fits two blocks of 8 warps per SM.
template <bool kSplit, bool kInterDone = false>
constexpr int kOutThreads = kSplit && !kInterDone ? 512 : 256;
constexpr int kLdVt = kC + 8;  // v_newᵀ: BF16 [128][72]
template <bool kT>
constexpr int kKvElems = kT && kD * kLdVt > kC * kLdB ? kD * kLdVt : kC * kLdB;  // k̂, then v_new(ᵀ)
// The layout (in BF16 elements): Qs [64][kLdB], KV, QK (fp32), P [64][kLdT], Ss [128][kLdB],
// G; with kSplit each BF16 array has its lo half right after it.
template <bool kT, bool kSplit, bool kInterDone = false>
struct OutLayout {
  static constexpr int kHalves = kSplit ? 2 : 1;
  static constexpr int kSsHalves = kInterDone ? 0 : kHalves;
  static constexpr size_t kv = static_cast<size_t>(kHalves) * kC * kLdB;
  static constexpr size_t qk = kv + static_cast<size_t>(kHalves) * kKvElems<kT>;
  static constexpr size_t p = qk + kC * kLdA * sizeof(float) / sizeof(bf16);
  static constexpr size_t ss = p + static_cast<size_t>(kHalves) * kC * kLdT;
  static constexpr size_t g = ss + static_cast<size_t>(kSsHalves) * kD * kLdB;
  static constexpr size_t bytes = g * sizeof(bf16) + kC * sizeof(float);
};
template <bool kT, bool kSplit, bool kInterDone = false>
constexpr size_t kOutSmem = OutLayout<kT, kSplit, kInterDone>::bytes;
static_assert(kC * kLdO * sizeof(float) <= 2 * kC * kLdB * sizeof(bf16), "O's staging fits over Qs and KV");
static_assert(kOutSmem<true, true> <= 227 * 1024, "the split output kernel fits one SM's shared memory");
static_assert(2 * (kOutSmem<true, true, true> + 1024) <= 228 * 1024, "without S_c, two split blocks per SM");

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

template <bool kT, bool kSplit, bool kInterDone>
__global__ void __launch_bounds__(kOutThreads<kSplit, kInterDone>) out_kernel(const bf16* qn, const bf16* kn, const bf16* qn_lo,
                                                          const bf16* kn_lo, const float* gcum, const bf16* Sc,
                                                          const bf16* Sc_lo, const bf16* vnew, const bf16* vnew_lo,
                                                          int64_t tokens, const int* table, int nc, int n_k, int n_v,
                                                          float* out) {
  static_assert(!kSplit || kT, "split operands come with the register pass's transposed layout");
  static_assert(!kInterDone || kT, "the inter-chunk part comes from the register pass");
  using L = OutLayout<kT, kSplit, kInterDone>;
  constexpr int kThreads = kOutThreads<kSplit, kInterDone>;
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
  fetch_rows<kThreads>(qn, t0, len, n_k, kh, Qs, tid);
  fetch_rows<kThreads>(kn, t0, len, n_k, kh, KV, tid);
  if constexpr (kSplit) {
    fetch_rows<kThreads>(qn_lo, t0, len, n_k, kh, Ql, tid);
    fetch_rows<kThreads>(kn_lo, t0, len, n_k, kh, KVl, tid);
  }
  for (int e = tid; e < (kInterDone ? 0 : kD * kD / 8); e += kThreads) {
    const int r = e / (kD / 8), c = e % (kD / 8);
    copy16(Ss + r * kLdB + 8 * c, Sc + slot * kD * kD + r * kD + 8 * c);
    if constexpr (kSplit) copy16(Sl + r * kLdB + 8 * c, Sc_lo + slot * kD * kD + r * kD + 8 * c);
  }
  __pipeline_commit();
  if (tid < kC) gc[tid] = gcum[slot * kC + tid];
  // With kInterDone the output rows already hold the pass's part: each thread's float4s of them
  // are loaded here, all at once, and stay in registers until its own part is added at the end
  // (a loop that loads and stores in turn waits for each load: a store may alias the next load;
  // on an H100, 2026-12-07: 0.101 → 0.089 ms per 27B layer at 2048 tokens, 0.366 → 0.331 at 8192).
  const int64_t row_stride = static_cast<int64_t>(n_v) * kD;
  const bool inter_early = kInterDone && aligned16(out, row_stride);
  constexpr int kSteps = kC * kD / 4 / kThreads;
  static_assert(kC * kD / 4 % kThreads == 0, "the chunk's float4s split evenly over the threads");
  const auto inter_at = [&](int e) {
    return reinterpret_cast<float4*>(out + (t0 + e / (kD / 4)) * row_stride + static_cast<int64_t>(h) * kD +
                                     4 * (e % (kD / 4)));
  };
  float4 inter[kInterDone ? kSteps : 1];
  if constexpr (kInterDone) {
    if (inter_early) {
#pragma unroll
      for (int i = 0; i < kSteps; ++i) {
        const int e = tid + i * kThreads;
        if (e < len * kD / 4) inter[i] = __ldcg(inter_at(e));
      }
    }
  }
  __pipeline_wait_prior(0);
  __syncthreads();
  // P = q̂ k̂ᵀ ⊙ causal (diagonal included) ⊙ exp(Gᵢ − Gⱼ) in BF16 (and its lo half), each tile
  // by the warp that formed it; P's blocks above the diagonal are not read (the products below).
  const int lane = tid % 32;
  lower_tiles_xyt<kThreads, kSplit>(Qs, Ql, KV, KVl, QK, warp, [&](int ti, int tj) {
#pragma unroll
    for (int q = lane; q < 16 * 16; q += 32) {
      const int i = 16 * ti + q / 16, j = 16 * tj + q % 16;
      const float x = j <= i ? QK[i * kLdA + j] * __expf(gc[i] - gc[j]) : 0.0f;
      P[i * kLdT + j] = __float2bfloat16(x);
      if constexpr (kSplit) Pl[i * kLdT + j] = __float2bfloat16(x - __bfloat162float(P[i * kLdT + j]));
    }
  });
  __syncthreads();
  const bf16* vn = vnew + slot * kC * kD;
  if constexpr (kT) {
    for (int e = tid; e < kD * kC / 8; e += kThreads) {
      const int r = e / (kC / 8), c = e % (kC / 8);
      copy16(KV + r * kLdVt + 8 * c, vn + r * kC + 8 * c);
      if constexpr (kSplit) copy16(KVl + r * kLdVt + 8 * c, vnew_lo + slot * kC * kD + r * kC + 8 * c);
    }
  } else {
    for (int e = tid; e < kC * kD / 8; e += kThreads) {
      const int r = e / (kD / 8), c = e % (kD / 8);
      copy16(KV + r * kLdB + 8 * c, vn + r * kD + 8 * c);
    }
  }
  __pipeline_commit();
  for (int e = tid; e < (kInterDone ? 0 : kC * kD / 2); e += kThreads) {
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
  // acc += A's block (rows ti, columns kk) · B's block (kk, tn), with the lo halves if split.
  const auto block_product = [&](FragC& acc, const bf16* A, const bf16* Al, int lda, const bf16* B, const bf16* Bl,
                                 int ldb, int ti, int kk, int tn) {
    FragA a;
    wmma::load_matrix_sync(a, A + ti * 16 * lda + kk * 16, lda);
    if constexpr (kSplit) {
      FragA al;
      wmma::load_matrix_sync(al, Al + ti * 16 * lda + kk * 16, lda);
      mma3_b_block<kT>(acc, a, al, B, Bl, ldb, kk, tn);
    } else {
      mma_b_block<kT>(acc, a, B, ldb, kk, tn);
    }
  };
  // Each warp takes one column of tiles tn and kPerWarp row blocks ti, chosen so that every warp
  // has the same number of P blocks (row block ti has ti + 1): all four with 8 warps, ti and 3 − ti
  // with 16.
  constexpr int kWarps = kThreads / 32, kPerWarp = (kC / 16) * (kD / 16) / kWarps;
  static_assert(kWarps % (kD / 16) == 0 && (kPerWarp == 4 || kPerWarp == 2), "the tile split");
  const int tn = warp % (kD / 16), first = warp / (kD / 16);
  const auto row_block = [&](int j) { return kPerWarp == 4 ? j : (j == 0 ? first : kC / 16 - 1 - first); };
  FragC acc[kPerWarp];
#pragma unroll
  for (int j = 0; j < kPerWarp; ++j) {
    const int ti = row_block(j);
    wmma::fill_fragment(acc[j], 0.0f);
    // kT: S_cᵀ and v_newᵀ, i.e. S_c and v_new column-major.
    if constexpr (!kInterDone)
      for (int kk = 0; kk < kD / 16; ++kk) block_product(acc[j], Qs, Ql, kLdB, Ss, Sl, kLdB, ti, kk, tn);
    for (int kk = 0; kk <= ti; ++kk) block_product(acc[j], P, Pl, kLdT, KV, KVl, kT ? kLdVt : kLdB, ti, kk, tn);
  }
  __syncthreads();  // O overwrites Qs and KV
#pragma unroll
  for (int j = 0; j < kPerWarp; ++j) {
    const int ti = row_block(j);
    wmma::store_matrix_sync(O + ti * 16 * kLdO + tn * 16, acc[j], kLdO, wmma::mem_row_major);
  }
  __syncthreads();
  if (inter_early) {
    // The sums of the pass, loaded at the start, plus this kernel's part.
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      const int e = tid + i * kThreads;
      if (e >= len * kD / 4) break;
      const float4 o = *reinterpret_cast<const float4*>(O + (e / (kD / 4)) * kLdO + 4 * (e % (kD / 4)));
      *inter_at(e) = make_float4(inter[i].x + o.x, inter[i].y + o.y, inter[i].z + o.z, inter[i].w + o.w);
    }
  } else if (aligned16(out, row_stride)) {
    for (int e = tid; e < len * kD / 4; e += kThreads) {
      const int r = e / (kD / 4), c = 4 * (e % (kD / 4));
      *reinterpret_cast<float4*>(out + (t0 + r) * row_stride + static_cast<int64_t>(h) * kD + c) =
          *reinterpret_cast<const float4*>(O + r * kLdO + c);
    }
  } else {
    for (int e = tid; e < len * kD; e += kThreads) {
      float& dst = out[(t0 + e / kD) * row_stride + static_cast<int64_t>(h) * kD + e % kD];
      if constexpr (kInterDone)
        dst += O[(e / kD) * kLdO + e % kD];
      else
        dst = O[(e / kD) * kLdO + e % kD];
    }
  }
}

}  // namespace

namespace {
template <bool kT, bool kSplit, bool kInterDone = false>
void launch_out(const ChunkGrid& g, const ChunkScratch& x, float* out, cudaStream_t s) {
  constexpr size_t smem = kOutSmem<kT, kSplit, kInterDone>;
  allow_smem(out_kernel<kT, kSplit, kInterDone>, smem);
  out_kernel<kT, kSplit, kInterDone><<<dim3(g.nc, g.nv), kOutThreads<kSplit, kInterDone>, smem, s>>>(
      x.qn, x.kn, x.qn_lo, x.kn_lo, x.gcum, x.Sc, x.Sc_lo, x.vnew, x.vnew_lo, g.tokens, g.table, g.nc, g.nk, g.nv,
      out);
  STAVE_CUDA_LAUNCHED();
}
}  // namespace

void launch_output(const ChunkGrid& g, const ChunkScratch& x, bool transposed, bool split, bool inter_done,
                   float* out, cudaStream_t s) {
  if ((split || inter_done) && !transposed)
    throw Error(ErrorKind::kInternal, "chunked gated delta rule: split operands and the register pass's inter-chunk "
                                      "output come with v_new transposed");
  if (inter_done && split)
    launch_out<true, true, true>(g, x, out, s);
  else if (inter_done)
    launch_out<true, false, true>(g, x, out, s);
  else if (split)
    launch_out<true, true>(g, x, out, s);
  else if (transposed)
    launch_out<true, false>(g, x, out, s);
  else
    launch_out<false, false>(g, x, out, s);
}

}  // namespace stave::cuda::dev::delta_chunk
