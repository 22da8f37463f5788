// The Gated DeltaNet token mixer: the gated delta rule as a per-token recurrence, the state
// carried in registers (causal attention is in attention_gemm.cu).
#include <cmath>
#include <type_traits>

#include "backends/cuda/device_ops.h"
#include "stave/errors.h"

namespace stave::cuda::dev {
namespace {

constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// HF l2norm (eps 1e-6) of q (scaled by d_k^{-1/2}) and k per token and k head, in Acc.
// One warp per (token, k head); out [tokens, n_k, d_k] Acc each.
template <class Acc>
__global__ void l2norm_qk_kernel(const float* q, const float* k, int64_t stride, int64_t tokens, int64_t n_k,
                                 int64_t d_k, Acc q_scale, Acc* qn, Acc* kn) {
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (warp >= 2 * tokens * n_k) return;
  const bool is_k = warp >= tokens * n_k;
  const int64_t th = is_k ? warp - tokens * n_k : warp;
  const int64_t t = th / n_k, h = th % n_k;
  const float* x = (is_k ? k : q) + t * stride + h * d_k;
  Acc ss = 0;
  for (int64_t i = lane; i < d_k; i += 32) ss += static_cast<Acc>(x[i]) * x[i];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const Acc inv = (is_k ? Acc(1) : q_scale) / sqrt(ss + Acc(1e-6));
  Acc* y = (is_k ? kn : qn) + th * d_k;
  for (int64_t i = lane; i < d_k; i += 32) y[i] = x[i] * inv;
}

__device__ inline float exp_acc(float x) { return expf(x); }
__device__ inline double exp_acc(double x) { return exp(x); }

// Block = 32 state columns × kParts row parts (256 threads); grid (n_v, ceil(d_v/32)). Thread
// (col, part) holds R rows of column col of S in registers: rows (i·kParts + part)·4 + j for
// i < R/4, j < 4, so the parts of a column read consecutive shared-memory words (no bank
// conflicts; the 4 columns of a warp read the same words, a broadcast) and each read is a
// 16-byte vector for fp32. The parts of a column are adjacent lanes: column sums are three
// shuffles. Everything a token needs (q̂, k̂, its v columns, α = exp(g), β) is staged in shared
// memory for kTile tokens at a time, so the per-token chain touches no global memory.
// Acc = double (exact) or float (fast).
constexpr int kParts = 8;
constexpr int kTile = 16;

template <class Acc, int R>
__device__ inline void load_rows(const Acc* row, int part, Acc (&out)[R]) {
#pragma unroll
  for (int i = 0; i < R / 4; ++i) {
    const Acc* p = row + (i * kParts + part) * 4;
    if constexpr (std::is_same_v<Acc, float>) {
      const float4 v = *reinterpret_cast<const float4*>(p);
      out[4 * i] = v.x, out[4 * i + 1] = v.y, out[4 * i + 2] = v.z, out[4 * i + 3] = v.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) out[4 * i + j] = p[j];
    }
  }
}

// Packed sequences (batched prefill): grid.z = sequence, whose tokens are [starts[z],
// starts[z + 1]) and whose state is the z-th [n_v, d_k, d_v] block of `state`; starts ==
// nullptr is one sequence of `tokens`. The sequences' recurrences run side by side.
template <class Acc, int R>
__global__ void __launch_bounds__(32 * kParts) gdr_kernel(const Acc* qn, const Acc* kn, const float* v, int64_t stride,
                                                          const float* g, const float* beta, int64_t tokens,
                                                          const int64_t* starts, int64_t n_k, int64_t n_v, int64_t dk,
                                                          int64_t d_v, float* state, float* out) {
  static_assert(R % 4 == 0, "rows per thread come in fours");
  constexpr int dkp = R * kParts;  // d_k padded with zero rows
  __shared__ __align__(16) Acc sq[kTile][dkp];
  __shared__ __align__(16) Acc sk[kTile][dkp];
  __shared__ Acc sv[kTile][32], salpha[kTile], sbeta[kTile];
  const int h = blockIdx.x;
  const int part = threadIdx.x % kParts;
  const int c = threadIdx.x / kParts;  // column within the block's 32
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * 32;
  const int64_t col = col0 + c;
  const bool valid = col < d_v;
  const int64_t kh = h / (n_v / n_k);
  const int64_t t_begin = starts ? starts[blockIdx.z] : 0, t_end = starts ? starts[blockIdx.z + 1] : tokens;
  float* st = state + (static_cast<int64_t>(blockIdx.z) * n_v + h) * dk * d_v;
  auto row_of = [part](int r) { return ((r / 4) * kParts + part) * 4 + r % 4; };
  Acc S[R];
#pragma unroll
  for (int r = 0; r < R; ++r) S[r] = valid && row_of(r) < dk ? st[row_of(r) * d_v + col] : Acc(0);

  for (int64_t t0 = t_begin; t0 < t_end; t0 += kTile) {
    const int n = static_cast<int>((t_end - t0 < kTile ? t_end - t0 : kTile));
    __syncthreads();
    for (int i = threadIdx.x; i < n * dkp; i += blockDim.x) {
      const int tt = i / dkp, a = i % dkp;
      sq[tt][a] = a < dk ? qn[((t0 + tt) * n_k + kh) * dk + a] : Acc(0);
      sk[tt][a] = a < dk ? kn[((t0 + tt) * n_k + kh) * dk + a] : Acc(0);
    }
    for (int i = threadIdx.x; i < n * 32; i += blockDim.x) {
      const int tt = i / 32, cc = i % 32;
      sv[tt][cc] = col0 + cc < d_v ? static_cast<Acc>(v[(t0 + tt) * stride + h * d_v + col0 + cc]) : Acc(0);
    }
    if (threadIdx.x < n) {
      salpha[threadIdx.x] = exp_acc(static_cast<Acc>(g[(t0 + threadIdx.x) * n_v + h]));
      sbeta[threadIdx.x] = beta[(t0 + threadIdx.x) * n_v + h];
    }
    __syncthreads();
    for (int tt = 0; tt < n; ++tt) {
      const Acc alpha = salpha[tt], b = sbeta[tt];
      Acc kr[R], qr[R];
      load_rows<Acc, R>(sk[tt], part, kr);
      load_rows<Acc, R>(sq[tt], part, qr);
      // Independent partial sums: the per-token chain is latency-bound, not throughput-bound.
      Acc kvp[4] = {0, 0, 0, 0};
#pragma unroll
      for (int r = 0; r < R; ++r) {
        S[r] *= alpha;
        kvp[r % 4] += S[r] * kr[r];
      }
      Acc kv = (kvp[0] + kvp[1]) + (kvp[2] + kvp[3]);
#pragma unroll
      for (int o = 1; o < kParts; o <<= 1) kv += __shfl_xor_sync(0xffffffffu, kv, o);
      const Acc e = (sv[tt][c] - kv) * b;
      Acc op[4] = {0, 0, 0, 0};
#pragma unroll
      for (int r = 0; r < R; ++r) {
        S[r] += kr[r] * e;
        op[r % 4] += S[r] * qr[r];
      }
      Acc o = (op[0] + op[1]) + (op[2] + op[3]);
#pragma unroll
      for (int w = 1; w < kParts; w <<= 1) o += __shfl_xor_sync(0xffffffffu, o, w);
      if (valid && part == 0) out[(t0 + tt) * n_v * d_v + h * d_v + col] = static_cast<float>(o);
    }
  }
  if (valid)
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (row_of(r) < dk) st[row_of(r) * d_v + col] = static_cast<float>(S[r]);
}

template <class Acc>
void run_gated_delta_rule(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state, float* out,
                          DeviceBuffer& qk_scratch, const int64_t* starts, int64_t sequences, cudaStream_t s) {
  const int64_t T = in.tokens, nk = dims.n_k_heads, dk = dims.d_k;
  qk_scratch.reserve(static_cast<size_t>(2 * T * nk * dk) * sizeof(Acc));
  Acc* qn = qk_scratch.as<Acc>();
  Acc* kn = qn + T * nk * dk;
  l2norm_qk_kernel<Acc><<<blocks_for(2 * T * nk * 32), kThreads, 0, s>>>(
      in.q, in.k, in.stride, T, nk, dk, static_cast<Acc>(1.0 / std::sqrt(static_cast<double>(dk))), qn, kn);
  STAVE_CUDA_LAUNCHED();
  const dim3 grid(static_cast<unsigned>(dims.n_v_heads), static_cast<unsigned>((dims.d_v + 31) / 32),
                  static_cast<unsigned>(sequences));
  // Rows per thread: the smallest supported R with kParts·R ≥ d_k (extra rows are zero).
  int R = 4;
  while (R * kParts < dk) R *= 2;
#define STAVE_GDR(RR)                                                                                         \
  case RR:                                                                                                    \
    gdr_kernel<Acc, RR><<<grid, 32 * kParts, 0, s>>>(qn, kn, in.v, in.stride, in.g, in.beta, T, starts, nk,  \
                                                     dims.n_v_heads, dk, dims.d_v, state, out);               \
    break;
  switch (R) {
    STAVE_GDR(4)
    STAVE_GDR(8)
    STAVE_GDR(16)
    default:
      throw Error(ErrorKind::kUnsupported,
                  "CUDA Gated DeltaNet: key head dim " + std::to_string(dk) + " is over 128");
  }
#undef STAVE_GDR
  STAVE_CUDA_LAUNCHED();
}

}  // namespace

void gated_delta_rule(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state, float* out,
                      DeviceBuffer& qk_scratch, bool exact, cudaStream_t s, const int64_t* starts,
                      int64_t sequences) {
  if (in.tokens <= 0) return;
  if (dims.n_k_heads <= 0 || dims.n_v_heads % dims.n_k_heads != 0)
    throw Error(ErrorKind::kInvalidModel, "Gated DeltaNet: n_v_heads must be a multiple of n_k_heads");
  if (sequences < 1 || sequences > 65535 || (sequences > 1 && !starts))
    throw Error(ErrorKind::kInternal, "Gated DeltaNet: packed sequences need their starts (1 to 65535 of them)");
  if (exact)
    run_gated_delta_rule<double>(dims, in, state, out, qk_scratch, starts, sequences, s);
  else
    run_gated_delta_rule<float>(dims, in, state, out, qk_scratch, starts, sequences, s);
}

}  // namespace stave::cuda::dev
