// Norms, element-wise ops, conv1d, gates, RoPE: memory-bound kernels, evaluated in double where
// the reference op is (so exact mode stays within an fp32 rounding of the oracle).
#include <cmath>

#include "backends/cuda/block_reduce.cuh"
#include "backends/cuda/device_ops.h"
#include "stave/errors.h"

namespace stave::cuda::dev {
namespace {

constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void rms_norm_zc_kernel(const float* x, int64_t dim, const float* w, float eps, float* y) {
  const float* xr = x + blockIdx.x * dim;
  float* yr = y + blockIdx.x * dim;
  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss += static_cast<double>(xr[i]) * xr[i];
  ss = block_sum(ss);
  const float inv = 1.0f / sqrtf(static_cast<float>(ss / dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = __fmul_rn(__fmul_rn(xr[i], inv), 1.0f + w[i]);
}

// Two passes over the row (mean, then the centred second moment), both summed in double.
__global__ void layer_norm_kernel(const float* x, int64_t dim, const float* gamma, const float* beta, float eps,
                                  float* y) {
  const float* xr = x + blockIdx.x * dim;
  float* yr = y + blockIdx.x * dim;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += xr[i];
  const double mean = block_sum(sum) / static_cast<double>(dim);
  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const double c = xr[i] - mean;
    ss += c * c;
  }
  const double var = block_sum(ss) / static_cast<double>(dim);
  const float meanf = static_cast<float>(mean);
  const float rstd = static_cast<float>(1.0 / sqrt(var + eps));
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = fmaf((xr[i] - meanf) * rstd, gamma[i], beta[i]);
}

__global__ void gated_rms_norm_kernel(const float* x, const float* z, int64_t dim, const float* w, float eps,
                                      float* y) {
  const float* xr = x + blockIdx.x * dim;
  const float* zr = z + blockIdx.x * dim;
  float* yr = y + blockIdx.x * dim;
  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss += static_cast<double>(xr[i]) * xr[i];
  ss = block_sum(ss);
  const double inv = 1.0 / sqrt(ss / static_cast<double>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const double zz = zr[i];
    yr[i] = static_cast<float>(w[i] * (xr[i] * inv) * (zz / (1.0 + exp(-zz))));
  }
}

__global__ void silu_mul_kernel(const float* gate, const float* up, int64_t n, float* y) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const double g = gate[i];
  y[i] = static_cast<float>(g / (1.0 + exp(-g)) * up[i]);
}

__global__ void sigmoid_mul_kernel(float* x, const float* gate, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  x[i] = static_cast<float>(x[i] / (1.0 + exp(-static_cast<double>(gate[i]))));
}

__global__ void add_kernel(float* h, const float* y, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) h[i] += y[i];
}

// One thread per (token, channel); reads the old history, which a second kernel then replaces.
__global__ void conv1d_silu_kernel(const float* x, int64_t tokens, int64_t channels, const float* weight,
                                   int64_t kernel, const float* history, float* y) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= tokens * channels) return;
  const int64_t t = i / channels, c = i % channels, H = kernel - 1;
  const float* w = weight + c * kernel;
  double acc = 0.0;
  for (int64_t j = 0; j < kernel; ++j) {
    const int64_t s = t - H + j;
    const float in = s < 0 ? history[(H + s) * channels + c] : x[s * channels + c];
    acc += static_cast<double>(w[j]) * in;
  }
  y[i] = static_cast<float>(acc / (1.0 + exp(-acc)));
}

__global__ void conv1d_history_kernel(const float* x, int64_t tokens, int64_t channels, int64_t H, float* history) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  // Shift left by `tokens` (oldest entries first, so reads precede the writes that replace them).
  for (int64_t r = 0; r < H; ++r) {
    const int64_t s = tokens - H + r;
    history[r * channels + c] = s < 0 ? history[(H + s) * channels + c] : x[s * channels + c];
  }
}

__global__ void gdn_gates_kernel(const float* a, const float* b, const float* A_log, const float* dt_bias,
                                 int64_t total, int64_t n_v, float* g, float* beta) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const int64_t h = i % n_v;
  const double x = static_cast<double>(a[i]) + dt_bias[h];
  const double sp = x > 20.0 ? x : log1p(exp(x));
  g[i] = static_cast<float>(-exp(static_cast<double>(A_log[h])) * sp);
  beta[i] = static_cast<float>(1.0 / (1.0 + exp(-static_cast<double>(b[i]))));
}

__global__ void rope_kernel(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t half, const float* cos,
                            const float* sin) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= tokens * heads * half) return;
  const int64_t f = i % half, th = i / half, t = th / heads;
  float* v = x + th * head_dim;
  const double a = v[f], b = v[f + half];
  const double c = cos[t * half + f], s = sin[t * half + f];
  v[f] = static_cast<float>(__dsub_rn(__dmul_rn(a, c), __dmul_rn(b, s)));
  v[f + half] = static_cast<float>(__dadd_rn(__dmul_rn(b, c), __dmul_rn(a, s)));
}

__global__ void split_qg_kernel(const float* qg, int64_t rows, int64_t d, float* q, float* gate) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= rows * d) return;
  const int64_t r = i / d, j = i % d;
  q[i] = qg[r * 2 * d + j];
  gate[i] = qg[r * 2 * d + d + j];
}

}  // namespace

void rms_norm_zero_centered(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* y,
                            cudaStream_t s) {
  if (rows <= 0) return;
  rms_norm_zc_kernel<<<static_cast<unsigned>(rows), dim >= 1024 ? 512 : 128, 0, s>>>(x, dim, w, eps, y);
  STAVE_CUDA_LAUNCHED();
}

void layer_norm(const float* x, int64_t rows, int64_t dim, const float* gamma, const float* beta, float eps, float* y,
                cudaStream_t s) {
  if (rows <= 0) return;
  layer_norm_kernel<<<static_cast<unsigned>(rows), dim >= 1024 ? 512 : 128, 0, s>>>(x, dim, gamma, beta, eps, y);
  STAVE_CUDA_LAUNCHED();
}

void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps, float* y,
                    cudaStream_t s) {
  if (rows <= 0) return;
  gated_rms_norm_kernel<<<static_cast<unsigned>(rows), 128, 0, s>>>(x, z, dim, w, eps, y);
  STAVE_CUDA_LAUNCHED();
}

void silu_mul(const float* gate, const float* up, int64_t n, float* y, cudaStream_t s) {
  if (n <= 0) return;
  silu_mul_kernel<<<blocks_for(n), kThreads, 0, s>>>(gate, up, n, y);
  STAVE_CUDA_LAUNCHED();
}

void sigmoid_mul(float* x, const float* gate, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  sigmoid_mul_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, gate, n);
  STAVE_CUDA_LAUNCHED();
}

void add_inplace(float* h, const float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, s>>>(h, y, n);
  STAVE_CUDA_LAUNCHED();
}

void causal_conv1d_silu(const float* x, int64_t tokens, int64_t channels, const float* weight, int64_t kernel,
                        float* history, float* y, cudaStream_t s) {
  if (tokens <= 0) return;
  conv1d_silu_kernel<<<blocks_for(tokens * channels), kThreads, 0, s>>>(x, tokens, channels, weight, kernel, history,
                                                                       y);
  STAVE_CUDA_LAUNCHED();
  conv1d_history_kernel<<<blocks_for(channels), kThreads, 0, s>>>(x, tokens, channels, kernel - 1, history);
  STAVE_CUDA_LAUNCHED();
}

void gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t tokens, int64_t n_v,
               float* g, float* beta, cudaStream_t s) {
  if (tokens <= 0) return;
  gdn_gates_kernel<<<blocks_for(tokens * n_v), kThreads, 0, s>>>(a, b, A_log, dt_bias, tokens * n_v, n_v, g, beta);
  STAVE_CUDA_LAUNCHED();
}

void apply_rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim, const float* cos,
                const float* sin, cudaStream_t s) {
  const int64_t half = rotary_dim / 2;
  if (tokens <= 0 || half <= 0) return;
  rope_kernel<<<blocks_for(tokens * heads * half), kThreads, 0, s>>>(x, tokens, heads, head_dim, half, cos, sin);
  STAVE_CUDA_LAUNCHED();
}

void split_query_gate(const float* qg, int64_t rows, int64_t d, float* q, float* gate, cudaStream_t s) {
  if (rows <= 0) return;
  split_qg_kernel<<<blocks_for(rows * d), kThreads, 0, s>>>(qg, rows, d, q, gate);
  STAVE_CUDA_LAUNCHED();
}

}  // namespace stave::cuda::dev
