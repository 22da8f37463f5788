// The chunked gated delta rule, step 3 (gated_delta_chunk.cu has the algorithm): the sequential
// pass over the chunks per (sequence, head, state columns), the state in shared memory (3a) or in
// registers (3b, the default).
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

// 3a. The sequential pass with the state in shared memory (STAVE_CUDA_DELTA=chunk-shared): block
// (v head, 32 state columns, sequence); 256 threads. Chunk i+1's
// k̂ rows and G are copied into the second of two buffers (cp.async) as soon as chunk i starts,
// its W and U slice once chunk i's v_new is formed, so both copies overlap the chunk's products
// and the chain of chunks waits on memory as little as the pass allows. (Asking L2 for chunk
// i+2's operands when chunk i starts was tried: no faster, 2026-12-05.)
// The decay of the update is applied to v_new's rows (Kdᵀ v_new = k̂ᵀ (exp(G_last − G) ⊙ v_new)),
// so k̂ is copied as stored.
constexpr int kStateThreads = 256;  // 8 warps: one v_new tile, two state tiles each
// Padded shared-memory rows, as kLdB and kLdF (gated_delta_chunk_device.cuh).
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
// kHalves = 2 (STAVE_CUDA_DELTA_STATE=halves) splits d_k between two warps per 16 columns: each
// keeps S's 64 rows of its half, forms its half of Sᵀ Wᵀ (v_newᵀ's sum over d_k), and the two
// halves meet through shared memory (over the chunk's W buffer, read by then) before both run
// the update of their rows. Twice the warps, each with half the chain of products per chunk.
// kOut (STAVE_CUDA_DELTA_STATE=whole-out, the default since 2026-12-07) also forms the chunk's inter-chunk output
// O_interᵀ = S_cᵀ (q̂ exp(G))ᵀ from the state it holds (the same A fragments as Sᵀ Wᵀ, q̂ copied
// like W) and writes it into the caller's output rows, so S_c never goes out and the output
// kernel adds only the intra-chunk part. Its q̂ buffers need the shared memory of a whole SM, so
// each block takes 64 state columns (four warps; 96 blocks for the 27B's 48 heads, as many SMs
// as two blocks of 32 columns per SM fill) and reads each chunk's W, k̂ and q̂ once per four warps.
template <bool kOut>
constexpr int kColGroups = kOut ? 4 : 2;  // warps (16 state columns each) per d_k half
template <bool kOut>
constexpr int kRegCols = 16 * kColGroups<kOut>;  // 32: 192 blocks for the 27B's 48 heads; 64: 96
template <int kHalves, bool kOut = false>
constexpr int kRegThreads = 32 * kColGroups<kOut> * kHalves;
// Split operands: k̂'s lo half comes double-buffered beside it (two more buffers); the A
// operands (−Sᵀ, the scaled v_newᵀ) split straight from the accumulators; S_cᵀ and v_newᵀ go out
// as hi and lo arrays.
// With kPrefetchU (whole-out, whole-prefetch, halves) Uᵀ comes through shared memory too, where
// the pass without it (whole) reads it from global memory as each chunk starts: each warp (of the first d_k half) copies
// its own 16 columns of the next chunk
// (cp.async, one buffer: the copy starts once the warp holds the current chunk's in registers),
// so the chunk's first products do not wait on a global load. Rows of kLdU floats: a half warp's
// float2 reads (columns g, rows 2t) fall on 32 different banks (kLdU, gated_delta_chunk_device.cuh).
template <bool kOut>
constexpr size_t kRegUBytes = kRegCols<kOut> * kLdU * sizeof(float);
// Buffers of [64][kLdW] BF16: W and k̂ double-buffered (and k̂'s lo half), with kOut q̂ (and its
// lo half) too.
template <bool kSplit, bool kOut>
constexpr int kRegBufs = (kSplit ? 3 : 2) * 2 + (kOut ? (kSplit ? 4 : 2) : 0);
template <bool kSplit, bool kPrefetchU, bool kOut = false>
constexpr size_t kRegSmem = kRegBufs<kSplit, kOut> * kC * kLdW * sizeof(bf16) + 2 * kC * sizeof(float) +
                            (kPrefetchU ? kRegUBytes<kOut> : 0);
// Two blocks per SM (228 KiB, 1 KiB of it reserved per block): 192 blocks for the 27B's 48 heads
// then run in one wave on 132 SMs. With kOut one block of 64 columns per SM.
static_assert(2 * (kRegSmem<true, true> + 1024) <= 228 * 1024, "the split register pass must fit two blocks per SM");
static_assert(kRegSmem<true, true, true> + 1024 <= 228 * 1024, "the split pass with the output must fit one SM");

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

// acc (kC / 8 n8 tiles over a chunk's 64 rows) += A · Bᵀ for one k16 step: B's rows in Bs
// (BF16 [64][kLdW]) at columns col … col + 15, as W's rows give Sᵀ Wᵀ and q̂'s give Sᵀ q̂ᵀ. For
// each pair of row tiles n, n + 1 the matrices (rows 8n…, col…), (8n…, col + 8…), (8n + 8…,
// col…), (8n + 8…, col + 8…); all loads issued before the products, so their latencies overlap.
// With kSplit al · B too, and with kLoB A · B's lo half (Bl, same layout) as well; small terms
// first.
template <bool kSplit, bool kLoB>
__device__ inline void rows_product(float (&acc)[kC / 8][4], const uint32_t (&a)[4], const uint32_t (&al)[4],
                                    const bf16* Bs, const bf16* Bl, int col, int lane) {
  const int m = lane / 8, r = lane % 8;
  uint32_t b[kC / 16][4], bl[kC / 16][4];
#pragma unroll
  for (int p = 0; p < kC / 16; ++p) {
    const int at = (16 * p + 8 * (m / 2) + r) * kLdW + col + 8 * (m % 2);
    ldmatrix_x4(b[p], Bs + at);
    if constexpr (kLoB) ldmatrix_x4(bl[p], Bl + at);
  }
#pragma unroll
  for (int p = 0; p < kC / 16; ++p) {
    if constexpr (kSplit) {
      mma_bf16(acc[2 * p], al, b[p][0], b[p][1]);
      mma_bf16(acc[2 * p + 1], al, b[p][2], b[p][3]);
      if constexpr (kLoB) {
        mma_bf16(acc[2 * p], a, bl[p][0], bl[p][1]);
        mma_bf16(acc[2 * p + 1], a, bl[p][2], bl[p][3]);
      }
    }
    mma_bf16(acc[2 * p], a, b[p][0], b[p][1]);
    mma_bf16(acc[2 * p + 1], a, b[p][2], b[p][3]);
  }
}

// Starts chunk ci's W (BF16 [64][128]), k̂ rows (zero past len; with kn_lo its lo half into Kl
// too) and G into one buffer set.
// With qn, q̂'s rows into Qb (and with qn_lo its lo half into Ql).
template <int kThreads>
__device__ inline void fetch_chunk_wkg(const bf16* W, const bf16* kn, const bf16* kn_lo, const float* gcum,
                                       int64_t slot, int64_t t0, int len, int n_k, int kh, bf16* Wb, bf16* Kb,
                                       bf16* Kl, float* gc, int tid, const bf16* qn = nullptr,
                                       const bf16* qn_lo = nullptr, bf16* Qb = nullptr, bf16* Ql = nullptr) {
  const bf16* w = W + slot * kC * kD;
  for (int e = tid; e < kC * kD / 8; e += kThreads) {
    const int r = e / (kD / 8), c = e % (kD / 8);
    copy16(Wb + r * kLdW + 8 * c, w + r * kD + 8 * c);
  }
  if (qn) fetch_rows<kThreads>(qn, t0, len, n_k, kh, Qb, tid);
  if (qn_lo) fetch_rows<kThreads>(qn_lo, t0, len, n_k, kh, Ql, tid);
  if (kn_lo) fetch_rows<kThreads>(kn_lo, t0, len, n_k, kh, Kl, tid);
  fetch_kg<kThreads>(kn, gcum, slot, t0, len, n_k, kh, Kb, gc, tid);  // commits W's copy with them
}

// kOut: this warp's 16 columns of the chunk's inter-chunk output, O_interᵀ = Sᵀ q̂ᵀ (s: Sᵀ at the
// chunk's start over all of d_k, kD / 8 accumulator tiles), each row then scaled by exp(G) and
// written to out (the caller's output at this head and the warp's first column, rows row_stride
// floats apart) for the chunk's len rows. The A fragments come from the accumulators as in
// Sᵀ Wᵀ, the B fragments from q̂'s rows in Qb as W's come from Wb; with kSplit three products
// each (q̂'s lo half in Ql). exp(G) scales the fp32 sums, where the output kernel splits
// q̂ exp(G) again.
template <bool kSplit>
__device__ inline void inter_output(const float (&s)[kD / 8][4], const bf16* Qb, const bf16* Ql, const float* gc,
                                    int64_t t0, int len, float* out, int64_t row_stride, int lane) {
  const int g = lane / 4, t = lane % 4;
  float o[kC / 8][4];
#pragma unroll
  for (int n = 0; n < kC / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) o[n][i] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    uint32_t a[4], al[4];
    accumulators_as_a_pair<kSplit>(a, al, s[2 * kk], s[2 * kk + 1], 1.0f);
    rows_product<kSplit, kSplit>(o, a, al, Qb, Ql, 16 * kk, lane);
  }
  // Element i of tile n is (column g + 8·(i / 2), row 8n + 2t + i % 2).
#pragma unroll
  for (int n = 0; n < kC / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = 8 * n + 2 * t + i % 2;
      if (row < len) out[(t0 + row) * row_stride + g + 8 * (i / 2)] = o[n][i] * __expf(gc[row]);
    }
}

template <bool kSplit, int kHalves, bool kPrefetchU, bool kOut>
__global__ void __launch_bounds__(kRegThreads<kHalves, kOut>) state_registers_kernel(
    const bf16* kn, const bf16* kn_lo, const float* gcum, const bf16* W, const float* Ut, int64_t tokens,
    const int* table, int nc, int n_k, int n_v, float* states, bf16* Sct, bf16* Sct_lo, bf16* vnt, bf16* vnt_lo,
    const bf16* qn, const bf16* qn_lo, float* out) {
  static_assert(kHalves == 1 || kHalves == 2, "d_k whole or in two halves");
  static_assert(kHalves == 1 || !kOut, "the output product is formed with d_k whole");
  static_assert(kHalves == 1 || kColGroups<kOut> == 2, "the halves' exchange pairs warp w with w ^ 2");
  constexpr int kThreads = kRegThreads<kHalves, kOut>;
  constexpr int kKTiles = kD / 8 / kHalves;  // this warp's n8 tiles of Sᵀ over d_k
  constexpr int kKSteps = kD / 16 / kHalves; // its k16 steps of Sᵀ Wᵀ
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kKBufs = kSplit ? 4 : 2;
  bf16* Wbuf = reinterpret_cast<bf16*>(smem);                   // 2 × [64][kLdW] W (chunk parity)
  bf16* Kbuf = Wbuf + 2 * kC * kLdW;                            // 2 × [64][kLdW] k̂
  bf16* Klbuf = Kbuf + 2 * kC * kLdW;                           // 2 × [64][kLdW] k̂'s lo half (split)
  bf16* Qbuf = Kbuf + kKBufs * kC * kLdW;                       // 2 × [64][kLdW] q̂ (kOut)
  bf16* Qlbuf = Qbuf + 2 * kC * kLdW;                           // 2 × [64][kLdW] q̂'s lo half (kOut, split)
  float* gbuf = reinterpret_cast<float*>(Wbuf + kRegBufs<kSplit, kOut> * kC * kLdW);  // 2 × [64] G
  const int h = blockIdx.x, b = blockIdx.z, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;                          // the mma fragments' row group and column pair
  const int cw = warp % kColGroups<kOut>;                        // column group
  const int half_k = kHalves == 1 ? 0 : warp / kColGroups<kOut>; // d_k half
  const int col0 = blockIdx.y * kRegCols<kOut> + cw * 16;       // this warp's first state column
  const int k0 = half_k * (kD / kHalves);                        // its first row of d_k
  const bool owns_u = kHalves == 1 || half_k == 0;              // starts v_newᵀ from Uᵀ (the other half from 0)
  float* Ub = gbuf + 2 * kC + cw * 16 * kLdU;                   // [16][kLdU] this column group's Uᵀ
  const int kh = h / (n_v / n_k);
  const bf16* klo = kSplit ? kn_lo : nullptr;
  const bf16* qhi = kOut ? qn : nullptr;
  const bf16* qlo = kOut && kSplit ? qn_lo : nullptr;
  float* st = states + (static_cast<int64_t>(b) * n_v + h) * kD * kD;  // [d_k][d_v]
  // Sᵀ: kKTiles n8 tiles over this warp's d_k rows; element i of tile j is (column col0 + g + 8·(i / 2),
  // row k0 + 8j + 2t + i % 2).
  float s[kKTiles][4];
  load_state_fragment(s, st, k0, col0, g, t);
  const int c_begin = table ? table[2 * nc + b] : 0, c_end = table ? table[2 * nc + b + 1] : nc;
  if (c_begin < c_end) {
    int64_t t0;
    int len;
    chunk_rows(table, nc, tokens, c_begin, t0, len);
    fetch_chunk_wkg<kThreads>(W, kn, klo, gcum, static_cast<int64_t>(c_begin) * n_v + h, t0, len, n_k, kh, Wbuf,
                              Kbuf, Klbuf, gbuf, tid, qhi, qlo, Qbuf, Qlbuf);
    if (kPrefetchU && owns_u) fetch_u_warp(Ut, static_cast<int64_t>(c_begin) * n_v + h, col0, Ub, lane);
  }
  for (int ci = c_begin; ci < c_end; ++ci) {
    const int64_t slot = static_cast<int64_t>(ci) * n_v + h;
    const int parity = (ci - c_begin) & 1;
    bf16* Wb = Wbuf + parity * kC * kLdW;
    const bf16* Kb = Kbuf + parity * kC * kLdW;
    const bf16* Kl = Klbuf + parity * kC * kLdW;
    const float* gc = gbuf + parity * kC;
    int64_t t0;
    int len;
    chunk_rows(table, nc, tokens, ci, t0, len);
    __pipeline_wait_prior(0);
    __syncthreads();  // chunk ci's W, k̂, G and Uᵀ are in place; every warp is done with chunk ci − 1's buffers
    if (ci + 1 < c_end) {
      int64_t next_t0;
      int next_len;
      chunk_rows(table, nc, tokens, ci + 1, next_t0, next_len);
      fetch_chunk_wkg<kThreads>(W, kn, klo, gcum, slot + n_v, next_t0, next_len, n_k, kh,
                                Wbuf + (parity ^ 1) * kC * kLdW, Kbuf + (parity ^ 1) * kC * kLdW,
                                Klbuf + (parity ^ 1) * kC * kLdW, gbuf + (parity ^ 1) * kC, tid, qhi, qlo,
                                Qbuf + (parity ^ 1) * kC * kLdW, Qlbuf + (parity ^ 1) * kC * kLdW);
    }
    // v_newᵀ starts as Uᵀ (or 0 for the second d_k half): 8 n8 tiles over the chunk's 64 rows;
    // element i of tile n is (column col0 + g + 8·(i / 2), row 8n + 2t + i % 2).
    float v[kC / 8][4];
#pragma unroll
    for (int n = 0; n < kC / 8; ++n)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float2 x = make_float2(0.0f, 0.0f);
        if (owns_u)
          x = kPrefetchU ? *reinterpret_cast<const float2*>(Ub + (g + 8 * half) * kLdU + 8 * n + 2 * t)
                         : *reinterpret_cast<const float2*>(Ut + slot * kD * kC + (col0 + g + 8 * half) * kC + 8 * n + 2 * t);
        v[n][2 * half] = x.x;
        v[n][2 * half + 1] = x.y;
      }
    // S_cᵀ out (BF16; not with kOut), and v_newᵀ −= Sᵀ Wᵀ over this warp's d_k rows in k16 steps.
    bf16* sct = kOut ? nullptr : Sct + slot * kD * kD;
    bf16* sct_lo = kSplit && !kOut ? Sct_lo + slot * kD * kD : nullptr;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      uint32_t a[4], al[4];
      accumulators_as_a_pair<kSplit>(a, al, s[2 * kk], s[2 * kk + 1], -1.0f);
#pragma unroll
      for (int jj = 0; jj < (kOut ? 0 : 2); ++jj)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int64_t at = (col0 + g + 8 * half) * kD + k0 + 16 * kk + 8 * jj + 2 * t;
          const float x0 = s[2 * kk + jj][2 * half], x1 = s[2 * kk + jj][2 * half + 1];
          if constexpr (kSplit)
            pack_bf16_split(x0, x1, *reinterpret_cast<uint32_t*>(sct + at), *reinterpret_cast<uint32_t*>(sct_lo + at));
          else
            *reinterpret_cast<uint32_t*>(sct + at) = pack_bf16(x0, x1);
        }
      rows_product<kSplit, false>(v, a, al, Wb, nullptr, k0 + 16 * kk, lane);  // B = Wᵀ (W stays one array)
    }
    if constexpr (kOut) inter_output<kSplit>(s, Qbuf + parity * kC * kLdW, Qlbuf + parity * kC * kLdW, gc, t0, len,
                                             out + static_cast<int64_t>(h) * kD + col0, static_cast<int64_t>(n_v) * kD,
                                             lane);
    if constexpr (kHalves == 2) {
      // The two halves of the sum meet over this chunk's W buffer, which every warp has read once
      // all are past the first barrier: each writes its partial sums in fragment order, then adds
      // the other's. first + second in that order on both warps, so both hold the same v_newᵀ.
      float* X = reinterpret_cast<float*>(Wb);  // [4 warps][8 · 4 · 32] fp32, 16 KiB of the 17 KiB buffer
      static_assert(4 * (kC / 8) * 4 * 32 * sizeof(float) <= kC * kLdW * sizeof(bf16), "partials fit in W's buffer");
      __syncthreads();
#pragma unroll
      for (int n = 0; n < kC / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) X[(warp * (kC / 8) * 4 + n * 4 + i) * 32 + lane] = v[n][i];
      __syncthreads();
      const float* other = X + (warp ^ 2) * (kC / 8) * 4 * 32;
#pragma unroll
      for (int n = 0; n < kC / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) v[n][i] += other[(n * 4 + i) * 32 + lane];
    }
    if (kPrefetchU && owns_u) {
      __syncwarp();  // every lane has read its part of Uᵀ: the next chunk's may come into Ub
      if (ci + 1 < c_end) fetch_u_warp(Ut, slot + n_v, col0, Ub, lane);
    }
    // v_newᵀ out (BF16; with two halves each warp writes its half of the rows), then its columns
    // scaled by exp(G_last − G) for the update.
    const float g_last = gc[len - 1];
    bf16* vt = vnt + slot * kD * kC;
    bf16* vt_lo = kSplit ? vnt_lo + slot * kD * kC : nullptr;
    store_vnew_then_scale<kSplit, kHalves>(v, gc, g_last, vt, vt_lo, col0, g, t, half_k);
    // Sᵀ ← exp(G_last) Sᵀ + (scaled v_new)ᵀ k̂ over the chunk's rows in k16 steps (this warp's d_k rows).
    const float decay = __expf(g_last);
#pragma unroll
    for (int j = 0; j < kKTiles; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[j][i] *= decay;
#pragma unroll
    for (int kt = 0; kt < kC / 16; ++kt) {
      uint32_t a[4], al[4];
      accumulators_as_a_pair<kSplit>(a, al, v[2 * kt], v[2 * kt + 1], 1.0f);
      // B = k̂ (rows × d_k), transposed by ldmatrix: for each pair of d_k tiles j, j + 1 the
      // matrices (rows 16kt…, d_k 8j…), (16kt + 8…, 8j…), (16kt…, 8j + 8…), (16kt + 8…, 8j + 8…);
      // loads first, in groups of four (two with split operands: their lo halves come too).
      const int m = lane / 8, r = lane % 8;
      constexpr int kGroup = kSplit ? 2 : 4;
#pragma unroll
      for (int q = 0; q < kKTiles / 2 / kGroup; ++q) {
        uint32_t bk[kGroup][4], bl[kGroup][4];
#pragma unroll
        for (int p = 0; p < kGroup; ++p) {
          const int at = (16 * kt + 8 * (m % 2) + r) * kLdW + k0 + 8 * (2 * (kGroup * q + p) + m / 2);
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
  store_state_fragment(s, st, k0, col0, g, t);
}

}  // namespace

void launch_state_shared(const ChunkGrid& g, const ChunkScratch& x, float* states, cudaStream_t s) {
  allow_smem(state_kernel, kStateSmem);
  state_kernel<<<dim3(g.nv, kD / kBV, static_cast<unsigned>(g.n_seq)), kStateThreads, kStateSmem, s>>>(
      x.kn, x.gcum, x.W, x.U, g.tokens, g.table, g.nc, g.nk, g.nv, states, x.Sc, x.vnew);
  STAVE_CUDA_LAUNCHED();
}

namespace {
template <bool kSplit, int kHalves, bool kPrefetchU, bool kOut>
void launch_registers(const ChunkGrid& g, const ChunkScratch& x, float* states, float* out, cudaStream_t s) {
  constexpr size_t smem = kRegSmem<kSplit, kPrefetchU, kOut>;
  allow_smem(state_registers_kernel<kSplit, kHalves, kPrefetchU, kOut>, smem);
  state_registers_kernel<kSplit, kHalves, kPrefetchU, kOut>
      <<<dim3(g.nv, kD / kRegCols<kOut>, static_cast<unsigned>(g.n_seq)), kRegThreads<kHalves, kOut>, smem, s>>>(
          x.kn, x.kn_lo, x.gcum, x.W, x.U, g.tokens, g.table, g.nc, g.nk, g.nv, states, x.Sc, x.Sc_lo, x.vnew,
          x.vnew_lo, x.qn, x.qn_lo, out);
  STAVE_CUDA_LAUNCHED();
}
template <bool kSplit>
void launch_registers(const ChunkGrid& g, const ChunkScratch& x, StatePass pass, float* states, float* out,
                      cudaStream_t s) {
  switch (pass) {
    case StatePass::kWhole:
      return launch_registers<kSplit, 1, false, false>(g, x, states, out, s);
    case StatePass::kWholePrefetch:
      return launch_registers<kSplit, 1, true, false>(g, x, states, out, s);
    case StatePass::kHalves:
      return launch_registers<kSplit, 2, true, false>(g, x, states, out, s);
    case StatePass::kWholeOut:
      return launch_registers<kSplit, 1, true, true>(g, x, states, out, s);
    case StatePass::kWgmma:
    case StatePass::kWgmmaTma:
      throw Error(ErrorKind::kInternal, "gated delta rule: the wgmma pass has its own launch (launch_state_wgmma)");
  }
}
}  // namespace

void launch_state_registers(const ChunkGrid& g, const ChunkScratch& x, bool split, StatePass pass, float* states,
                            float* out, cudaStream_t s) {
  if (split)
    launch_registers<true>(g, x, pass, states, out, s);
  else
    launch_registers<false>(g, x, pass, states, out, s);
}

}  // namespace stave::cuda::dev::delta_chunk
