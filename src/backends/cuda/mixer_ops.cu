// The token mixers: the gated delta rule (per-token recurrence, state carried in double in
// registers) and causal GQA attention with an online softmax (no L×L score matrix).
#include <cmath>

#include "backends/cuda/device_ops.h"
#include "stave/errors.h"

namespace stave::cuda::dev {
namespace {

constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// HF l2norm (eps 1e-6) of q (scaled by d_k^{-1/2}) and k per token and k head, in double.
// One warp per (token, k head); out [tokens, n_k, d_k] doubles each.
__global__ void l2norm_qk_kernel(const float* q, const float* k, int64_t stride, int64_t tokens, int64_t n_k,
                                 int64_t d_k, double q_scale, double* qn, double* kn) {
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (warp >= 2 * tokens * n_k) return;
  const bool is_k = warp >= tokens * n_k;
  const int64_t th = is_k ? warp - tokens * n_k : warp;
  const int64_t t = th / n_k, h = th % n_k;
  const float* x = (is_k ? k : q) + t * stride + h * d_k;
  double ss = 0.0;
  for (int64_t i = lane; i < d_k; i += 32) ss += static_cast<double>(x[i]) * x[i];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const double inv = (is_k ? 1.0 : q_scale) / sqrt(ss + 1e-6);
  double* y = (is_k ? kn : qn) + th * d_k;
  for (int64_t i = lane; i < d_k; i += 32) y[i] = x[i] * inv;
}

// Block = 32 state columns × 4 row parts (128 threads); grid (n_v, ceil(d_v/32)). Thread
// (col, part) holds S[part·R .. part·R+R-1, col] in double registers; the 4 parts of a column
// are adjacent lanes, so the column sums are two shuffles. q̂/k̂ of kTile tokens are staged in
// shared memory per step.
constexpr int kParts = 4;
constexpr int kTile = 8;

template <int R>
__global__ void __launch_bounds__(128) gdr_kernel(const double* qn, const double* kn, const float* v, int64_t stride,
                                                  const float* g, const float* beta, int64_t tokens, int64_t n_k,
                                                  int64_t n_v, int64_t dk, int64_t d_v, float* state, float* out) {
  constexpr int dkp = R * kParts;  // d_k padded with zero rows
  __shared__ double sq[kTile][dkp], sk[kTile][dkp];
  const int h = blockIdx.x;
  const int part = threadIdx.x % kParts;
  const int64_t col = blockIdx.y * 32 + threadIdx.x / kParts;
  const bool valid = col < d_v;
  const int64_t kh = h / (n_v / n_k);
  float* st = state + static_cast<int64_t>(h) * dk * d_v;
  double S[R];
#pragma unroll
  for (int r = 0; r < R; ++r) S[r] = valid && part * R + r < dk ? st[(part * R + r) * d_v + col] : 0.0;

  for (int64_t t0 = 0; t0 < tokens; t0 += kTile) {
    const int n = static_cast<int>((tokens - t0 < kTile ? tokens - t0 : kTile));
    __syncthreads();
    for (int i = threadIdx.x; i < n * dkp; i += blockDim.x) {
      const int tt = i / dkp, a = i % dkp;
      sq[tt][a] = a < dk ? qn[((t0 + tt) * n_k + kh) * dk + a] : 0.0;
      sk[tt][a] = a < dk ? kn[((t0 + tt) * n_k + kh) * dk + a] : 0.0;
    }
    __syncthreads();
    for (int tt = 0; tt < n; ++tt) {
      const int64_t t = t0 + tt;
      const double alpha = exp(static_cast<double>(g[t * n_v + h]));
      const double b = beta[t * n_v + h];
      // Four independent partial sums: the per-token chain is latency-bound, not throughput-bound.
      double kvp[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
      for (int r = 0; r < R; ++r) {
        S[r] *= alpha;
        kvp[r % 4] += S[r] * sk[tt][part * R + r];
      }
      double kv = (kvp[0] + kvp[1]) + (kvp[2] + kvp[3]);
      kv += __shfl_xor_sync(0xffffffffu, kv, 1);
      kv += __shfl_xor_sync(0xffffffffu, kv, 2);
      const double vj = valid ? static_cast<double>(v[t * stride + h * d_v + col]) : 0.0;
      const double e = (vj - kv) * b;
      double op[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
      for (int r = 0; r < R; ++r) {
        S[r] += sk[tt][part * R + r] * e;
        op[r % 4] += S[r] * sq[tt][part * R + r];
      }
      double o = (op[0] + op[1]) + (op[2] + op[3]);
      o += __shfl_xor_sync(0xffffffffu, o, 1);
      o += __shfl_xor_sync(0xffffffffu, o, 2);
      if (valid && part == 0) out[t * n_v * d_v + h * d_v + col] = static_cast<float>(o);
    }
  }
  if (valid)
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (part * R + r < dk) st[(part * R + r) * d_v + col] = static_cast<float>(S[r]);
}

// One warp per (query token, q head); keys in tiles of 32 (lane j scores key j of the tile),
// each lane accumulates output dims lane, lane+32, ... (16-byte key loads when d % 4 == 0). Acc = double (exact) or float (fast).
constexpr int kMaxDimsPerLane = 16;  // head_dim ≤ 512

template <class Acc>
__global__ void attention_kernel(const float* q, int64_t tokens, int64_t q_pos0, const float* k, const float* v,
                                 int64_t n_q, int64_t n_kv, int64_t d, float scale, float* out) {
  extern __shared__ float sq_all[];
  const int warp_in_block = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + warp_in_block;
  if (w >= tokens * n_q) return;
  const int64_t t = w / n_q, h = w % n_q, kvh = h / (n_q / n_kv);
  const int64_t kv_stride = n_kv * d;
  float* sq = sq_all + warp_in_block * d;
  const float* qr = q + (t * n_q + h) * d;
  for (int64_t i = lane; i < d; i += 32) sq[i] = qr[i];
  __syncwarp();
  const int per_lane = static_cast<int>((d + 31) / 32);
  Acc acc[kMaxDimsPerLane];
#pragma unroll
  for (int m = 0; m < kMaxDimsPerLane; ++m) acc[m] = 0;
  const int64_t n_keys = q_pos0 + t + 1;
  Acc running_max = -INFINITY, running_sum = 0;
  for (int64_t j0 = 0; j0 < n_keys; j0 += 32) {
    const int64_t j = j0 + lane;
    Acc s = -INFINITY;
    if (j < n_keys) {
      const float* kr = k + j * kv_stride + kvh * d;
      Acc dot = 0;
      if (d % 4 == 0) {
        for (int64_t i = 0; i < d; i += 4) {
          const float4 kk = *reinterpret_cast<const float4*>(kr + i);
          dot += static_cast<Acc>(sq[i]) * kk.x + static_cast<Acc>(sq[i + 1]) * kk.y +
                 static_cast<Acc>(sq[i + 2]) * kk.z + static_cast<Acc>(sq[i + 3]) * kk.w;
        }
      } else {
        for (int64_t i = 0; i < d; ++i) dot += static_cast<Acc>(sq[i]) * kr[i];
      }
      s = dot * static_cast<Acc>(scale);
    }
    Acc tile_max = s;
    for (int o = 16; o > 0; o >>= 1) tile_max = max(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
    tile_max = max(tile_max, running_max);
    const Acc correction = exp(running_max - tile_max);
    const Acc p = j < n_keys ? exp(s - tile_max) : Acc(0);
    Acc psum = p;
    for (int o = 16; o > 0; o >>= 1) psum += __shfl_xor_sync(0xffffffffu, psum, o);
    running_sum = running_sum * correction + psum;
#pragma unroll
    for (int m = 0; m < kMaxDimsPerLane; ++m) acc[m] *= correction;
    const int n = static_cast<int>((n_keys - j0 < 32 ? n_keys - j0 : 32));
    for (int jj = 0; jj < n; ++jj) {
      const Acc pj = __shfl_sync(0xffffffffu, p, jj);
      const float* vr = v + (j0 + jj) * kv_stride + kvh * d;
#pragma unroll
      for (int m = 0; m < kMaxDimsPerLane; ++m)
        if (m < per_lane && lane + 32 * m < d) acc[m] += pj * vr[lane + 32 * m];
    }
    running_max = tile_max;
  }
  float* o = out + (t * n_q + h) * d;
#pragma unroll
  for (int m = 0; m < kMaxDimsPerLane; ++m)
    if (m < per_lane && lane + 32 * m < d) o[lane + 32 * m] = static_cast<float>(acc[m] / running_sum);
}

}  // namespace

void gated_delta_rule(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state, float* out,
                      DeviceBuffer& qk_scratch, cudaStream_t s) {
  const int64_t T = in.tokens, nk = dims.n_k_heads, dk = dims.d_k;
  if (T <= 0) return;
  if (dims.n_k_heads <= 0 || dims.n_v_heads % dims.n_k_heads != 0)
    throw Error(ErrorKind::kInvalidModel, "Gated DeltaNet: n_v_heads must be a multiple of n_k_heads");
  qk_scratch.reserve(static_cast<size_t>(2 * T * nk * dk) * sizeof(double));
  double* qn = qk_scratch.as<double>();
  double* kn = qn + T * nk * dk;
  l2norm_qk_kernel<<<blocks_for(2 * T * nk * 32), kThreads, 0, s>>>(in.q, in.k, in.stride, T, nk, dk,
                                                                    1.0 / std::sqrt(static_cast<double>(dk)), qn, kn);
  STAVE_CUDA_LAUNCHED();
  const dim3 grid(static_cast<unsigned>(dims.n_v_heads), static_cast<unsigned>((dims.d_v + 31) / 32));
  // Rows per thread: the smallest supported R with 4·R ≥ d_k (extra rows are zero).
  int R = 1;
  while (R * kParts < dk) R *= 2;
#define STAVE_GDR(RR)                                                                                              \
  case RR:                                                                                                         \
    gdr_kernel<RR><<<grid, 128, 0, s>>>(qn, kn, in.v, in.stride, in.g, in.beta, T, nk, dims.n_v_heads, dk,       \
                                        dims.d_v, state, out);                                                     \
    break;
  switch (R) {
    STAVE_GDR(1)
    STAVE_GDR(2)
    STAVE_GDR(4)
    STAVE_GDR(8)
    STAVE_GDR(16)
    STAVE_GDR(32)
    default:
      throw Error(ErrorKind::kUnsupported,
                  "CUDA Gated DeltaNet: key head dim " + std::to_string(dk) + " is over 128");
  }
#undef STAVE_GDR
  STAVE_CUDA_LAUNCHED();
}

void attention_causal(const AttentionShape& shape, const float* q, int64_t tokens, int64_t q_pos0, const float* k,
                      const float* v, float* out, bool exact, cudaStream_t s) {
  if (tokens <= 0) return;
  const int64_t d = shape.head_dim;
  if (d <= 0 || d > 32 * kMaxDimsPerLane)
    throw Error(ErrorKind::kUnsupported, "CUDA attention: head_dim " + std::to_string(d) + " is over 512");
  if (shape.n_kv_heads <= 0 || shape.n_q_heads % shape.n_kv_heads != 0)
    throw Error(ErrorKind::kInvalidModel, "attention: n_q_heads must be a multiple of n_kv_heads");
  constexpr int warps = 4;
  const int64_t rows = tokens * shape.n_q_heads;
  const unsigned blocks = static_cast<unsigned>((rows + warps - 1) / warps);
  const size_t smem = static_cast<size_t>(warps * d) * sizeof(float);
  if (exact)
    attention_kernel<double><<<blocks, warps * 32, smem, s>>>(q, tokens, q_pos0, k, v, shape.n_q_heads,
                                                              shape.n_kv_heads, d, shape.scale, out);
  else
    attention_kernel<float><<<blocks, warps * 32, smem, s>>>(q, tokens, q_pos0, k, v, shape.n_q_heads,
                                                             shape.n_kv_heads, d, shape.scale, out);
  STAVE_CUDA_LAUNCHED();
}

}  // namespace stave::cuda::dev
