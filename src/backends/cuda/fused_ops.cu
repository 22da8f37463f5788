// Fast-precision element-wise kernels and the fused ops of a decoder layer (backend.h's
// add_rms_norm_zero_centered and head_norm_rope). Memory-bound: each kernel reads and writes its
// tensors once, in fp32, with 16-byte loads where the pointers allow, and 32-bit index
// arithmetic inside a row (64-bit division per element was a large share of the old kernels).
// The exact kernels stay in elementwise_ops.cu; add_rms_norm_exact here is bit-identical to
// add_inplace followed by elementwise_ops.cu's rms_norm_zero_centered (same block size, same
// per-thread order, same fp64 reduction), so exact precision fuses too.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "backends/cuda/activations.cuh"
#include "backends/cuda/block_reduce.cuh"
#include "backends/cuda/row_groups.cuh"
#include "backends/cuda/device_ops.h"
#include "stave/errors.h"

namespace stave::cuda::dev {
namespace {

constexpr int kThreads = 256;

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Threads for n elements: one per float4 of the aligned body plus one per tail element.
struct VecSplit {
  int64_t n4 = 0, tail = 0;
  unsigned blocks() const { return static_cast<unsigned>((n4 + tail + kThreads - 1) / kThreads); }
};
VecSplit vec_split(int64_t n, bool aligned) {
  VecSplit v;
  v.n4 = aligned ? n / 4 : 0;
  v.tail = n - 4 * v.n4;
  return v;
}

__global__ void silu_mul_fast_kernel(const float* gate, const float* up, int64_t n4, int64_t tail, float* y) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n4) {
    const float4 g = reinterpret_cast<const float4*>(gate)[i], u = reinterpret_cast<const float4*>(up)[i];
    reinterpret_cast<float4*>(y)[i] = make_float4(silu_f(g.x) * u.x, silu_f(g.y) * u.y, silu_f(g.z) * u.z,
                                                  silu_f(g.w) * u.w);
  } else if (i < n4 + tail) {
    const int64_t e = 4 * n4 + (i - n4);
    y[e] = silu_f(gate[e]) * up[e];
  }
}

__global__ void sigmoid_mul_fast_kernel(float* x, const float* gate, int64_t n4, int64_t tail) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n4) {
    const float4 g = reinterpret_cast<const float4*>(gate)[i];
    float4 v = reinterpret_cast<float4*>(x)[i];
    v = make_float4(v.x * sigmoid_f(g.x), v.y * sigmoid_f(g.y), v.z * sigmoid_f(g.z), v.w * sigmoid_f(g.w));
    reinterpret_cast<float4*>(x)[i] = v;
  } else if (i < n4 + tail) {
    const int64_t e = 4 * n4 + (i - n4);
    x[e] = x[e] * sigmoid_f(gate[e]);
  }
}

// The residual add is one fp32 rounding per element in every precision: this kernel is exact.
__global__ void add_vec_kernel(float* h, const float* y, int64_t n4, int64_t tail) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n4) {
    float4 a = reinterpret_cast<float4*>(h)[i];
    const float4 b = reinterpret_cast<const float4*>(y)[i];
    a.x = __fadd_rn(a.x, b.x);
    a.y = __fadd_rn(a.y, b.y);
    a.z = __fadd_rn(a.z, b.z);
    a.w = __fadd_rn(a.w, b.w);
    reinterpret_cast<float4*>(h)[i] = a;
  } else if (i < n4 + tail) {
    const int64_t e = 4 * n4 + (i - n4);
    h[e] = __fadd_rn(h[e], y[e]);
  }
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float block_sum_f(float v) {
  __shared__ float part[32];
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) part[warp] = v;
  __syncthreads();
  float total = 0.0f;
  const int warps = (blockDim.x + 31) >> 5;
  for (int i = 0; i < warps; ++i) total += part[i];
  __syncthreads();
  return total;
}

// h += y (kAdd); x = rms_norm_zero_centered(h): one block per row, float4 when kVec (dim % 4 == 0
// and the pointers 16-byte aligned). The second pass re-reads the thread's own h (cache hits),
// so x may alias h when there is no add.
template <bool kVec, bool kAdd>
__global__ void add_rms_norm_fast_kernel(float* h, const float* y, int dim, const float* w, float eps, float* x) {
  const int64_t off = static_cast<int64_t>(blockIdx.x) * dim;
  float* hr = h + off;
  const float* yr = kAdd ? y + off : nullptr;
  float* xr = x + off;
  float ss = 0.0f;
  if constexpr (kVec) {
    const int n4 = dim / 4;
    for (int i = threadIdx.x; i < n4; i += blockDim.x) {
      float4 a = reinterpret_cast<float4*>(hr)[i];
      if constexpr (kAdd) {
        const float4 b = reinterpret_cast<const float4*>(yr)[i];
        a.x += b.x;
        a.y += b.y;
        a.z += b.z;
        a.w += b.w;
        reinterpret_cast<float4*>(hr)[i] = a;
      }
      ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
    }
  } else {
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
      float a = hr[i];
      if constexpr (kAdd) {
        a += yr[i];
        hr[i] = a;
      }
      ss += a * a;
    }
  }
  ss = block_sum_f(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
  if constexpr (kVec) {
    const int n4 = dim / 4;
    for (int i = threadIdx.x; i < n4; i += blockDim.x) {
      const float4 a = reinterpret_cast<const float4*>(hr)[i], s = reinterpret_cast<const float4*>(w)[i];
      reinterpret_cast<float4*>(xr)[i] = make_float4((a.x * inv) * (1.0f + s.x), (a.y * inv) * (1.0f + s.y),
                                                     (a.z * inv) * (1.0f + s.z), (a.w * inv) * (1.0f + s.w));
    }
  } else {
    for (int i = threadIdx.x; i < dim; i += blockDim.x) xr[i] = (hr[i] * inv) * (1.0f + w[i]);
  }
}

// The grouped form of the same (row_groups.cuh: the layout and sum of the FP8 quantization's
// kAddNorm / kNorm prologue, so that the fused and the standalone norm write the same bits):
// one block per row, each thread kG groups of 8 values held in registers. x may alias h
// without the add (every value is read before the block's sum).
template <int kG, bool kAdd>
__global__ void __launch_bounds__(kRowGroupThreads) add_rms_norm_groups_kernel(float* h, const float* y, int64_t dim,
                                                                              const float* w, float eps, float* x) {
  const int64_t off = static_cast<int64_t>(blockIdx.x) * dim, groups = dim / 8;
  float v[kG][8];
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    const int64_t g = threadIdx.x + static_cast<int64_t>(j) * blockDim.x;
#pragma unroll
    for (int i = 0; i < 8; ++i) v[j][i] = 0.0f;
    if (g < groups) {
      load8(h + off + 8 * g, v[j]);
      if constexpr (kAdd) {
        float u[8];
        load8(y + off + 8 * g, u);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[j][i] = __fadd_rn(v[j][i], u[i]);
        store8(h + off + 8 * g, v[j]);
      }
    }
  }
  __shared__ float part[32];
  const float ss = row_sum_squares<kG>(v, part);
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    const int64_t g = threadIdx.x + static_cast<int64_t>(j) * blockDim.x;
    if (g >= groups) continue;
    float w8[8];
    load8(w + 8 * g, w8);
    rms_norm_zc_group8(v[j], w8, ss, dim, eps);
    store8(x + off + 8 * g, v[j]);
  }
}

// Exact: add_kernel then rms_norm_zc_kernel (elementwise_ops.cu) in one pass, same arithmetic.
__global__ void add_rms_norm_exact_kernel(float* h, const float* y, int64_t dim, const float* w, float eps,
                                          float* x) {
  float* xr_h = h + blockIdx.x * dim;
  const float* yr = y + blockIdx.x * dim;
  float* out = x + blockIdx.x * dim;
  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    xr_h[i] += yr[i];
    ss += static_cast<double>(xr_h[i]) * xr_h[i];
  }
  ss = block_sum(ss);
  const float inv = 1.0f / sqrtf(static_cast<float>(ss / dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) out[i] = __fmul_rn(__fmul_rn(xr_h[i], inv), 1.0f + w[i]);
}

// One warp per row of dim (the Gated DeltaNet's v heads of 128): w · x · rsqrt(mean x² + eps) · silu(z).
__global__ void gated_rms_norm_fast_kernel(const float* x, const float* z, int64_t rows, int dim, const float* w,
                                           float eps, float* y) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int lane = threadIdx.x & 31;
  const float* xr = x + r * dim;
  const float* zr = z + r * dim;
  float* yr = y + r * dim;
  float ss = 0.0f;
  for (int i = lane; i < dim; i += 32) ss += xr[i] * xr[i];
  ss = warp_sum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
  for (int i = lane; i < dim; i += 32) yr[i] = (w[i] * (xr[i] * inv)) * silu_f(zr[i]);
}

// The grouped form for heads of 8 · lanes values (lanes a power of two ≤ 32; the Gated
// DeltaNet's 128: 16 lanes): one thread per 8 consecutive values, the head's lanes neighbours
// in a warp. gated_norm_group8 is the FP8 quantization's prologue too, so that the fused output
// projection quantizes the very values this kernel writes.
__global__ void gated_rms_norm_groups_kernel(const float* x, const float* z, int64_t groups, int lanes, const float* w,
                                             float eps, float* y) {
  const int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  float v[8] = {}, u[8] = {}, w8[8] = {};
  if (g < groups) {  // threads past the end join the shuffles with zeros
    load8(x + 8 * g, v);
    load8(z + 8 * g, u);
    load8(w + (8 * g) % (8 * lanes), w8);
  }
  gated_norm_group8(v, u, w8, lanes, eps);
  if (g < groups) store8(y + 8 * g, v);
}

// Depthwise causal conv + SiLU: x (channel) along blockIdx.x·threads, tokens along y (strided
// by gridDim.y); the taps reach back into the history for the first kernel−1 tokens.
__global__ void conv1d_silu_fast_kernel(const float* x, int tokens, int channels, const float* weight, int kernel,
                                        const float* history, float* y) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const int H = kernel - 1;
  const float* wc = weight + static_cast<int64_t>(c) * kernel;
  for (int t = blockIdx.y; t < tokens; t += gridDim.y) {
    float acc = 0.0f;
    for (int j = 0; j < kernel; ++j) {
      const int s = t - H + j;
      const float in = s < 0 ? history[static_cast<int64_t>(H + s) * channels + c]
                             : x[static_cast<int64_t>(s) * channels + c];
      acc = fmaf(wc[j], in, acc);
    }
    y[static_cast<int64_t>(t) * channels + c] = silu_f(acc);
  }
}

// The same conv for the Qwen3.5 kernel of 4 taps: each thread walks kRun consecutive tokens of
// one channel with the taps' inputs in registers, so every input is read once (the form above
// reads each kernel times) and the weights once per run. Same fmaf order: the same bits.
constexpr int kConvTaps = 4, kConvRun = 16;
__global__ void conv1d_silu_run_kernel(const float* x, int tokens, int channels, const float* weight,
                                       const float* history, float* y) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const int t0 = blockIdx.y * kConvRun, t1 = min(t0 + kConvRun, tokens);
  constexpr int H = kConvTaps - 1;
  float w[kConvTaps], win[kConvTaps];
#pragma unroll
  for (int j = 0; j < kConvTaps; ++j) w[j] = weight[static_cast<int64_t>(c) * kConvTaps + j];
#pragma unroll
  for (int j = 0; j < H; ++j) {  // inputs of tokens t0 − 3 … t0 − 1
    const int s = t0 - H + j;
    win[j] = s < 0 ? history[static_cast<int64_t>(H + s) * channels + c] : x[static_cast<int64_t>(s) * channels + c];
  }
  // The run's inputs, all loaded before the first store: a loop that loads and stores in turn
  // waits for each load (a store to y may alias the next load of x). On an H100, 2026-12-07, 10,240
  // channels × 2048 tokens: 83.5 → 70.5 µs.
  float run[kConvRun];
#pragma unroll
  for (int i = 0; i < kConvRun; ++i)
    if (t0 + i < t1) run[i] = x[static_cast<int64_t>(t0 + i) * channels + c];
#pragma unroll
  for (int i = 0; i < kConvRun; ++i) {
    if (t0 + i >= t1) break;
    win[H] = run[i];
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < kConvTaps; ++j) acc = fmaf(w[j], win[j], acc);
    y[static_cast<int64_t>(t0 + i) * channels + c] = silu_f(acc);
#pragma unroll
    for (int j = 0; j < H; ++j) win[j] = win[j + 1];
  }
}

// The new history (the last kernel−1 inputs), after the conv has read the old one.
__global__ void conv1d_history_fast_kernel(const float* x, int tokens, int channels, int H, float* history) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  for (int r = 0; r < H; ++r) {
    const int s = tokens - H + r;
    history[static_cast<int64_t>(r) * channels + c] =
        s < 0 ? history[static_cast<int64_t>(H + s) * channels + c] : x[static_cast<int64_t>(s) * channels + c];
  }
}

// Per-head norm + RoPE, one warp per (token, head) row; the normed row goes through shared
// memory so each rotated pair can be read whatever lanes hold it. With a gate, x rows are
// [q | gate] of 2·d and the gate half is copied out. y may alias x when gate == nullptr: all
// reads of x precede the warp's first write of y.
__global__ void head_norm_rope_kernel(const float* x, int64_t rows, int heads, int d, const float* w, float eps,
                                      int half, const float* cos, const float* sin, float* y, float* gate) {
  extern __shared__ float rowbuf[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + warp;
  if (r >= rows) return;
  float* s = rowbuf + warp * d;
  const float* xr = x + r * (gate ? 2 * d : d);
  float ss = 0.0f;
  for (int i = lane; i < d; i += 32) {
    const float v = xr[i];
    s[i] = v;
    ss += v * v;
  }
  if (gate)
    for (int i = lane; i < d; i += 32) gate[r * d + i] = xr[d + i];
  ss = warp_sum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  for (int i = lane; i < d; i += 32) s[i] = __fmul_rn(__fmul_rn(s[i], inv), 1.0f + w[i]);
  __syncwarp();
  const int64_t t = r / heads;
  const float* c = cos + t * half;
  const float* sn = sin + t * half;
  float* yr = y + r * d;
  for (int i = lane; i < d; i += 32) {
    float v = s[i];
    if (i < half) {
      v = __fsub_rn(__fmul_rn(s[i], c[i]), __fmul_rn(s[i + half], sn[i]));
    } else if (i < 2 * half) {
      const int f = i - half;
      v = __fadd_rn(__fmul_rn(s[i], c[f]), __fmul_rn(s[f], sn[f]));
    }
    yr[i] = v;
  }
}

template <bool kAdd>
void launch_norm_fast(float* h, const float* y, int64_t rows, int64_t dim, const float* w, float eps, float* x,
                      cudaStream_t s, bool grouped) {
  if (dim > INT32_MAX) throw Error(ErrorKind::kInternal, "rms_norm: a row of " + std::to_string(dim) + " values");
  const unsigned grid = static_cast<unsigned>(rows);
  const RowGroupLayout layout = row_group_layout(dim);
  if (grouped && dim % 8 == 0 && layout.groups > 0 && aligned16(h) && (!kAdd || aligned16(y)) && aligned16(x) &&
      aligned16(w)) {
    with_row_groups(layout, [&](auto g) {
      add_rms_norm_groups_kernel<decltype(g)::value, kAdd><<<grid, layout.threads, 0, s>>>(h, y, dim, w, eps, x);
    });
    return;
  }
  const int threads = dim >= 2048 ? 256 : 128;
  const int d = static_cast<int>(dim);
  if (dim % 4 == 0 && aligned16(h) && (!kAdd || aligned16(y)) && aligned16(x) && aligned16(w))
    add_rms_norm_fast_kernel<true, kAdd><<<grid, threads, 0, s>>>(h, y, d, w, eps, x);
  else
    add_rms_norm_fast_kernel<false, kAdd><<<grid, threads, 0, s>>>(h, y, d, w, eps, x);
}

}  // namespace

void silu_mul_fast(const float* gate, const float* up, int64_t n, float* y, cudaStream_t s) {
  if (n <= 0) return;
  const VecSplit v = vec_split(n, aligned16(gate) && aligned16(up) && aligned16(y));
  silu_mul_fast_kernel<<<v.blocks(), kThreads, 0, s>>>(gate, up, v.n4, v.tail, y);
  STAVE_CUDA_LAUNCHED();
}

void sigmoid_mul_fast(float* x, const float* gate, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  const VecSplit v = vec_split(n, aligned16(x) && aligned16(gate));
  sigmoid_mul_fast_kernel<<<v.blocks(), kThreads, 0, s>>>(x, gate, v.n4, v.tail);
  STAVE_CUDA_LAUNCHED();
}

void add_inplace_vec(float* h, const float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  const VecSplit v = vec_split(n, aligned16(h) && aligned16(y));
  add_vec_kernel<<<v.blocks(), kThreads, 0, s>>>(h, y, v.n4, v.tail);
  STAVE_CUDA_LAUNCHED();
}

void add_rms_norm_zero_centered(float* h, const float* y, int64_t rows, int64_t dim, const float* w, float eps,
                                float* x, bool exact, cudaStream_t s, bool grouped) {
  if (rows <= 0 || dim <= 0) return;
  if (exact) {
    // The block size of rms_norm_zc_kernel: part of the reduction order.
    add_rms_norm_exact_kernel<<<static_cast<unsigned>(rows), dim >= 1024 ? 512 : 128, 0, s>>>(h, y, dim, w, eps, x);
  } else {
    launch_norm_fast<true>(h, y, rows, dim, w, eps, x, s, grouped);
  }
  STAVE_CUDA_LAUNCHED();
}

void rms_norm_zero_centered_fast(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* y,
                                 cudaStream_t s, bool grouped) {
  if (rows <= 0 || dim <= 0) return;
  // Without the add the kernel only reads its first argument.
  launch_norm_fast<false>(const_cast<float*>(x), nullptr, rows, dim, w, eps, y, s, grouped);
  STAVE_CUDA_LAUNCHED();
}

void gated_rms_norm_fast(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps,
                         float* y, cudaStream_t s, bool grouped) {
  if (rows <= 0) return;
  if (grouped && gated_norm_groups_apply(dim, dim, w) && aligned16(x) && aligned16(z) && aligned16(y)) {
    const int64_t groups = rows * dim / 8;
    gated_rms_norm_groups_kernel<<<static_cast<unsigned>((groups + kThreads - 1) / kThreads), kThreads, 0, s>>>(
        x, z, groups, static_cast<int>(dim / 8), w, eps, y);
    STAVE_CUDA_LAUNCHED();
    return;
  }
  constexpr int kWarps = kThreads / 32;
  gated_rms_norm_fast_kernel<<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kThreads, 0, s>>>(
      x, z, rows, static_cast<int>(dim), w, eps, y);
  STAVE_CUDA_LAUNCHED();
}

void causal_conv1d_silu_fast(const float* x, int64_t tokens, int64_t channels, const float* weight, int64_t kernel,
                             float* history, float* y, cudaStream_t s) {
  if (tokens <= 0) return;
  if (tokens > INT32_MAX || channels > INT32_MAX / 16)
    throw Error(ErrorKind::kInternal, "causal_conv1d: " + std::to_string(tokens) + " tokens of " +
                                          std::to_string(channels) + " channels");
  const unsigned cx = static_cast<unsigned>((channels + kThreads - 1) / kThreads);
  const int64_t runs = (tokens + kConvRun - 1) / kConvRun;
  if (kernel == kConvTaps && runs <= 65535) {
    conv1d_silu_run_kernel<<<dim3(cx, static_cast<unsigned>(runs)), kThreads, 0, s>>>(
        x, static_cast<int>(tokens), static_cast<int>(channels), weight, history, y);
  } else {
    const dim3 grid(cx, static_cast<unsigned>(std::min<int64_t>(tokens, 65535)));
    conv1d_silu_fast_kernel<<<grid, kThreads, 0, s>>>(x, static_cast<int>(tokens), static_cast<int>(channels), weight,
                                                      static_cast<int>(kernel), history, y);
  }
  STAVE_CUDA_LAUNCHED();
  conv1d_history_fast_kernel<<<cx, kThreads, 0, s>>>(x, static_cast<int>(tokens), static_cast<int>(channels),
                                                     static_cast<int>(kernel - 1), history);
  STAVE_CUDA_LAUNCHED();
}

void head_norm_rope(const float* x, int64_t tokens, int64_t heads, int64_t head_dim, const float* w, float eps,
                    int64_t rotary_dim, const float* cos, const float* sin, float* y, float* gate, cudaStream_t s) {
  const int64_t rows = tokens * heads;
  if (rows <= 0) return;
  if (head_dim > 1024 || rotary_dim > head_dim || rotary_dim < 0)
    throw Error(ErrorKind::kInternal, "head_norm_rope: head_dim " + std::to_string(head_dim) + ", rotary_dim " +
                                          std::to_string(rotary_dim));
  constexpr int kWarps = kThreads / 32;
  const size_t smem = static_cast<size_t>(kWarps) * static_cast<size_t>(head_dim) * sizeof(float);
  head_norm_rope_kernel<<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kThreads, smem, s>>>(
      x, rows, static_cast<int>(heads), static_cast<int>(head_dim), w, eps, static_cast<int>(rotary_dim / 2), cos,
      sin, y, gate);
  STAVE_CUDA_LAUNCHED();
}

}  // namespace stave::cuda::dev
