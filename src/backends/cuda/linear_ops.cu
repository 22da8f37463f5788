// Linear layers on the GPU: weights resident in their stored format, MXFP4 activation QDQ
// bit-exact with src/formats/mxfp4, products on cuBLAS (BF16 tensor cores in fast mode, DGEMM in
// exact mode). MXFP4 weights are expanded to a BF16 (or fp64) scratch tile per call.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "backends/cuda/device_ops.h"
#include "backends/cuda/linear_fp8.h"
#include "backends/cuda/linear_small_m.h"
#include "backends/cuda/mxfp4_device.cuh"
#include "stave/errors.h"

namespace stave::cuda {
namespace {

constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

template <class Out>
__device__ Out to_out(float v);
template <>
__device__ float to_out<float>(float v) { return v; }
template <>
__device__ double to_out<double>(float v) { return v; }
template <>
__device__ __nv_bfloat16 to_out<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// One warp per 32-value block (a short tail block is padded with zeros, as Quark does).
template <class Out>
__global__ void qdq_kernel(const float* x, int64_t rows, int64_t k, int mode, Out* out) {
  const int64_t blocks_per_row = (k + 31) / 32;
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (warp >= rows * blocks_per_row) return;
  const int64_t r = warp / blocks_per_row, col = (warp % blocks_per_row) * 32 + lane;
  const bool valid = col < k;
  const float v = valid ? x[r * k + col] : 0.0f;
  float amax = fabsf(v);
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, amax, o);
    amax = amax < other ? other : amax;
  }
  const int e = scale_exponent(amax, mode);
  const float inv = ldexpf(1.0f, -e), s = ldexpf(1.0f, e);
  const float q = e2m1_round(__fmul_rn(v, inv));
  if (valid) out[r * k + col] = to_out<Out>(__fmul_rn(q, s));
}

template <class Out>
__global__ void convert_kernel(const float* x, int64_t n, Out* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = to_out<Out>(x[i]);
}

// Packed MXFP4 rows [N, K/2] + E8M0 scales [N, K/32] -> Out [N, K]; one thread per byte.
template <class Out>
__global__ void dequant_mxfp4_kernel(const uint8_t* codes, const uint8_t* scales, int64_t N, int64_t K, Out* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t half = K / 2;
  if (i >= N * half) return;
  const int64_t r = i / half, j = i % half;
  const float s = ldexpf(1.0f, static_cast<int>(scales[r * (K / 32) + j / 16]) - 127);
  const uint8_t b = codes[i];
  out[r * K + 2 * j] = to_out<Out>(__fmul_rn(kE2M1[b & 0x0f], s));
  out[r * K + 2 * j + 1] = to_out<Out>(__fmul_rn(kE2M1[b >> 4], s));
}

// The same to BF16 for the fast path, one thread per 8 code bytes (16 weights, half a scale
// block): one 8-byte load, two 16-byte stores. E2M1 × 2^(e−127) is exact in BF16 whenever it
// is a normal fp32 (the BF16 rounding of a product of two exact values is then exact too).
// The E2M1 table lives in shared memory: lanes look up different codes, which the constant
// cache would serialise (up to 16 ways per lookup) but 16 shared-memory banks serve at once.
__global__ void dequant_mxfp4_bf16x16_kernel(const uint8_t* codes, const uint8_t* scales, int64_t n_chunks,
                                             int64_t K, __nv_bfloat16* out) {
  __shared__ float table[16];
  if (threadIdx.x < 16) table[threadIdx.x] = kE2M1[threadIdx.x];
  __syncthreads();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n_chunks) return;
  const int64_t chunks_per_row = K / 16;
  const int64_t r = i / chunks_per_row, c = i % chunks_per_row;
  // 2^(e − 127) as ldexpf(1, e − 127) gives it: the exponent field for e ≥ 1 (e = 255 is +inf,
  // as ldexpf), the subnormal 2^-127 for e = 0.
  const uint32_t e = scales[r * (K / 32) + c / 2];
  const float s = e == 0 ? 0x1p-127f : __uint_as_float(e << 23);
  const uint2 packed = *reinterpret_cast<const uint2*>(codes + r * (K / 2) + c * 8);
  __align__(16) __nv_bfloat16 v[16];
#pragma unroll
  for (int b = 0; b < 8; ++b) {
    const uint32_t word = b < 4 ? packed.x : packed.y;
    const uint32_t byte = (word >> (8 * (b % 4))) & 0xffu;
    v[2 * b] = __float2bfloat16_rn(__fmul_rn(table[byte & 0x0f], s));
    v[2 * b + 1] = __float2bfloat16_rn(__fmul_rn(table[byte >> 4], s));
  }
  uint4* dst = reinterpret_cast<uint4*>(out + r * K + c * 16);
  dst[0] = *reinterpret_cast<const uint4*>(v);
  dst[1] = *reinterpret_cast<const uint4*>(v + 8);
}

template <class Out>
__global__ void widen_16_kernel(const uint16_t* w, int64_t n, bool is_bf16, Out* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const uint16_t h = w[i];
  const float v = is_bf16 ? __uint_as_float(static_cast<unsigned>(h) << 16)
                          : __half2float(__ushort_as_half(h));
  out[i] = static_cast<Out>(v);
}

// x ≈ hi + lo with both in BF16 (16 significant bits together): two BF16 products then carry
// an fp32 activation almost exactly, as the CPU's fp32 × BF16 kernels do.
__global__ void split_bf16_kernel(const float* x, int64_t n, __nv_bfloat16* hi, __nv_bfloat16* lo) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const __nv_bfloat16 h = __float2bfloat16_rn(x[i]);
  hi[i] = h;
  lo[i] = __float2bfloat16_rn(x[i] - __bfloat162float(h));
}

__global__ void finish_double_kernel(const double* acc, int64_t M, int64_t N, const float* bias, float* y) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= M * N) return;
  const float a = static_cast<float>(acc[i]);
  y[i] = bias ? a + bias[i % N] : a;
}

__global__ void add_bias_kernel(float* y, int64_t M, int64_t N, const float* bias) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < M * N) y[i] += bias[i % N];
}

int mode_code(mxfp4::ScaleMode m) {
  return m == mxfp4::ScaleMode::kEven ? 0 : (m == mxfp4::ScaleMode::kFloor ? 1 : 2);
}

template <class Out>
void launch_qdq(const float* x, int64_t rows, int64_t k, mxfp4::ScaleMode mode, Out* out, cudaStream_t s) {
  const int64_t threads = rows * ((k + 31) / 32) * 32;
  qdq_kernel<Out><<<blocks_for(threads), kThreads, 0, s>>>(x, rows, k, mode_code(mode), out);
  STAVE_CUDA_LAUNCHED();
}

// Writes W [N, K] as Out into `dst` (scratch) from its stored format.
template <class Out>
void expand_weight(const DeviceLinear& w, Out* dst, cudaStream_t s) {
  const int64_t n = w.out * w.in;
  switch (w.format) {
    case WeightFormat::kMXFP4:
      if constexpr (std::is_same_v<Out, __nv_bfloat16>) {
        // in % 32 == 0 (upload_linear checks), so rows split into whole 16-weight chunks and
        // cudaMalloc's alignment keeps every 8-byte load and 16-byte store aligned.
        dequant_mxfp4_bf16x16_kernel<<<blocks_for(n / 16), kThreads, 0, s>>>(w.data.as<uint8_t>(),
                                                                             w.scales.as<uint8_t>(), n / 16, w.in, dst);
      } else {
        dequant_mxfp4_kernel<Out><<<blocks_for(n / 2), kThreads, 0, s>>>(w.data.as<uint8_t>(),
                                                                         w.scales.as<uint8_t>(), w.out, w.in, dst);
      }
      break;
    case WeightFormat::kBF16:
    case WeightFormat::kF16:
      widen_16_kernel<Out><<<blocks_for(n), kThreads, 0, s>>>(w.data.as<uint16_t>(), n,
                                                              w.format == WeightFormat::kBF16, dst);
      break;
    case WeightFormat::kF32: convert_kernel<Out><<<blocks_for(n), kThreads, 0, s>>>(w.data.as<float>(), n, dst); break;
  }
  STAVE_CUDA_LAUNCHED();
}

// Exact mode: W, x and y as fp64 copies in the context's scratch (grown to size), and the
// product y = fp32(x·Wᵀ accumulated in fp64) (+ bias) on cuBLAS DGEMM. Column-major view:
// y[M,N] row-major is yᵀ (N×M, ld N) = Wᵀᵀ·xᵀ with W row-major [N,K].
struct WideOperands {
  double *w, *x, *y;
};
WideOperands wide_operands(GpuContext& ctx, int64_t M, int64_t N, int64_t K) {
  ctx.scratch_w().reserve(static_cast<size_t>(N * K) * sizeof(double));
  ctx.scratch_x().reserve(static_cast<size_t>(M * K) * sizeof(double));
  ctx.scratch_y().reserve(static_cast<size_t>(M * N) * sizeof(double));
  return {ctx.scratch_w().as<double>(), ctx.scratch_x().as<double>(), ctx.scratch_y().as<double>()};
}
void wide_product(GpuContext& ctx, const WideOperands& d, int64_t M, int64_t N, int64_t K, const float* bias,
                  float* y) {
  const double one = 1.0, zero = 0.0;
  STAVE_CUBLAS_CHECK(cublasDgemm(ctx.blas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                                 static_cast<int>(K), &one, d.w, static_cast<int>(K), d.x, static_cast<int>(K), &zero,
                                 d.y, static_cast<int>(N)));
  finish_double_kernel<<<blocks_for(M * N), kThreads, 0, ctx.stream()>>>(d.y, M, N, bias, y);
  STAVE_CUDA_LAUNCHED();
}

}  // namespace

bool device_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

DeviceLinear upload_linear(const LinearWeight& w, bool fp8_check, Fp8Weights keep, Fp8Cache* cache) {
  DeviceLinear d;
  d.name = w.name;
  d.out = w.out;
  d.in = w.in;
  d.format = w.format;
  d.quantize_input = w.format == WeightFormat::kMXFP4 && w.quantize_input;
  d.input_scale_mode = w.input_scale_mode;
  if (w.format == WeightFormat::kMXFP4 && w.in % 32 != 0)
    throw Error(ErrorKind::kInvalidModel, w.name + ": MXFP4 in-features " + std::to_string(w.in) +
                                              " is not a multiple of 32");
  d.data.upload(w.data, static_cast<size_t>(w.out) * w.row_bytes());
  if (w.format == WeightFormat::kMXFP4) d.scales.upload(w.scales, static_cast<size_t>(w.out * (w.in / 32)));
  if (w.bias) d.bias.upload(w.bias, static_cast<size_t>(w.out) * sizeof(float));
  if (fp8_check) prepare_fp8_weight(d, keep, cache);
  return d;
}

GpuContext::GpuContext(bool exact, AttentionKernel attention)
    : exact_(exact), attention_(attention), linear_path_(exact ? LinearPath::kBf16 : linear_path_from_env()) {
  // The highest priority: a side stream's blocks (the expansion ahead, expand_ahead.h) yield to it.
  int least = 0, greatest = 0;
  STAVE_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  STAVE_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest));
  STAVE_CUBLAS_CHECK(cublasCreate(&blas_));
  STAVE_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
  // Exact mode must not let cuBLAS pick TF32 or reduced-precision reductions.
  STAVE_CUBLAS_CHECK(cublasSetMathMode(blas_, exact ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH));
}

GpuContext::~GpuContext() {
  if (blas_) cublasDestroy(blas_);
  if (stream_) cudaStreamDestroy(stream_);
}

void GpuContext::synchronize() const { STAVE_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

namespace dev {

void mxfp4_qdq(const float* x, int64_t rows, int64_t k, mxfp4::ScaleMode mode, float* out, cudaStream_t s) {
  if (rows <= 0 || k <= 0) return;
  launch_qdq<float>(x, rows, k, mode, out, s);
}

void linear(GpuContext& ctx, const DeviceLinear& w, const float* x, int64_t M, float* y) {
  if (M <= 0) return;
  const int64_t K = w.in, N = w.out;
  cudaStream_t s = ctx.stream();
  const float* bias = w.bias.bytes() ? w.bias.as<float>() : nullptr;
  // Column-major view: y[M,N] row-major is yᵀ (N×M, ld N) = Wᵀᵀ·xᵀ with W row-major [N,K].
  if (ctx.exact()) {
    const WideOperands d = wide_operands(ctx, M, N, K);
    expand_weight<double>(w, d.w, s);
    if (w.quantize_input)
      launch_qdq<double>(x, M, K, w.input_scale_mode, d.x, s);
    else {
      convert_kernel<double><<<blocks_for(M * K), kThreads, 0, s>>>(x, M * K, d.x);
      STAVE_CUDA_LAUNCHED();
    }
    wide_product(ctx, d, M, N, K, bias, y);
    return;
  }
  if (linear_small_m_applies(ctx, w, M)) {  // M ≤ 4 by default; STAVE_CUDA_SMALL_M (linear_small_m.h)
    linear_small_m(ctx, w, x, M, y);
    return;
  }
  if (linear_fp8_applies(ctx, w) && linear_fp8(ctx, w, x, M, y)) return;
  const float one = 1.0f, zero = 0.0f;
  if (w.format == WeightFormat::kF32 || w.format == WeightFormat::kF16) {
    const float* wf = w.data.as<float>();
    if (w.format == WeightFormat::kF16) {
      ctx.scratch_w().reserve(static_cast<size_t>(N * K) * sizeof(float));
      expand_weight<float>(w, ctx.scratch_w().as<float>(), s);
      wf = ctx.scratch_w().as<float>();
    }
    STAVE_CUBLAS_CHECK(cublasSgemm(ctx.blas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                                   static_cast<int>(K), &one, wf, static_cast<int>(K), x, static_cast<int>(K), &zero, y,
                                   static_cast<int>(N)));
  } else {
    // BF16 tensor cores: BF16 weights as stored, MXFP4 expanded exactly to BF16.
    const __nv_bfloat16* wb = w.data.as<__nv_bfloat16>();
    if (w.format == WeightFormat::kMXFP4) {
      ctx.scratch_w().reserve(static_cast<size_t>(N * K) * 2);
      expand_weight<__nv_bfloat16>(w, ctx.scratch_w().as<__nv_bfloat16>(), s);
      wb = ctx.scratch_w().as<__nv_bfloat16>();
    }
    // A W4A4 activation is exact in BF16 after its QDQ: one product. Any other activation is
    // split into BF16 hi + lo: two products (BF16 alone loses too much on small models).
    ctx.scratch_x().reserve(static_cast<size_t>(M * K) * 2 * 2);
    __nv_bfloat16* xb = ctx.scratch_x().as<__nv_bfloat16>();
    __nv_bfloat16* xlo = xb + M * K;
    if (w.quantize_input)
      launch_qdq<__nv_bfloat16>(x, M, K, w.input_scale_mode, xb, s);
    else {
      split_bf16_kernel<<<blocks_for(M * K), kThreads, 0, s>>>(x, M * K, xb, xlo);
      STAVE_CUDA_LAUNCHED();
    }
    auto gemm = [&](const __nv_bfloat16* xp, const float* beta) {
      STAVE_CUBLAS_CHECK(cublasGemmEx(ctx.blas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                                      static_cast<int>(K), &one, wb, CUDA_R_16BF, static_cast<int>(K), xp,
                                      CUDA_R_16BF, static_cast<int>(K), beta, y, CUDA_R_32F, static_cast<int>(N),
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    gemm(xb, &zero);
    if (!w.quantize_input) gemm(xlo, &one);
  }
  if (bias) {
    add_bias(y, M, N, bias, s);
  }
}

namespace {

// Whether linear() takes the FP8 path for w at M rows (its order: the small-M kernel first).
bool takes_fp8_path(const GpuContext& ctx, const DeviceLinear& w, int64_t M) {
  return !linear_small_m_applies(ctx, w, M) && linear_fp8_applies(ctx, w);
}

}  // namespace

namespace {

// The products of linear_shared_input. quantized_for: the weight whose FP8 quantization of x is
// in ctx's scratch (it serves weights of the same K and scale mode until another path writes
// the scratch), or null.
void shared_products(GpuContext& ctx, const float* x, int64_t M, std::span<const SharedProduct> products,
                     const DeviceLinear* quantized_for) {
  for (const SharedProduct& p : products) {
    const DeviceLinear& w = *p.w;
    if (takes_fp8_path(ctx, w, M)) {
      const bool reuse =
          quantized_for && quantized_for->in == w.in && quantized_for->input_scale_mode == w.input_scale_mode;
      if ((reuse || linear_fp8_quantize_input(ctx, w, x, M)) && linear_fp8_quantized(ctx, w, M, p.y)) {
        quantized_for = &w;
        continue;
      }
    }
    linear(ctx, w, x, M, p.y);
    quantized_for = nullptr;
  }
}

}  // namespace

void linear_shared_input(GpuContext& ctx, const float* x, int64_t M, std::span<const SharedProduct> products) {
  if (M <= 0) return;
  shared_products(ctx, x, M, products, nullptr);
}

bool add_rms_norm_shared_fused(GpuContext& ctx, float* h, const float* y, int64_t M, int64_t dim, const float* w,
                               float eps, float* x, std::span<const SharedProduct> products) {
  if (M <= 0 || products.empty()) return false;
  const DeviceLinear& first = *products.front().w;
  if (first.in != dim || !takes_fp8_path(ctx, first, M)) return false;
  // x is written unless every product takes the quantization made here.
  bool all = true;
  for (const SharedProduct& p : products)
    all = all && takes_fp8_path(ctx, *p.w, M) && p.w->in == first.in &&
          p.w->input_scale_mode == first.input_scale_mode && linear_fp8_has_plan(ctx, *p.w, M);
  RowPrologue pro{y ? Prologue::kAddNorm : Prologue::kNorm, y, w, 0, eps, h, all ? nullptr : x};
  if (!linear_fp8_quantize_formed_input(ctx, first, h, pro, M)) return false;
  shared_products(ctx, x, M, products, &first);
  return true;
}

bool formed_linear_fused(GpuContext& ctx, const DeviceLinear& w, const float* x, const RowPrologue& pro, int64_t M,
                         float* y) {
  if (M <= 0 || !takes_fp8_path(ctx, w, M)) return false;
  return linear_fp8_quantize_formed_input(ctx, w, x, pro, M) && linear_fp8_quantized(ctx, w, M, y);
}

bool silu_mul_linear_fused(GpuContext& ctx, const DeviceLinear& w, const float* gate, const float* up, int64_t M,
                           float* y) {
  return formed_linear_fused(ctx, w, gate, {Prologue::kSiluUp, up}, M, y);
}

void add_bias(float* y, int64_t M, int64_t N, const float* bias, cudaStream_t s) {
  if (M * N <= 0) return;
  add_bias_kernel<<<blocks_for(M * N), kThreads, 0, s>>>(y, M, N, bias);
  STAVE_CUDA_LAUNCHED();
}

void matmul_nt(GpuContext& ctx, const float* x, int64_t M, int64_t K, const float* w, int64_t N, const float* bias,
               float* y) {
  if (M <= 0 || N <= 0) return;
  cudaStream_t s = ctx.stream();
  if (ctx.exact()) {
    const WideOperands d = wide_operands(ctx, M, N, K);
    convert_kernel<double><<<blocks_for(N * K), kThreads, 0, s>>>(w, N * K, d.w);
    convert_kernel<double><<<blocks_for(M * K), kThreads, 0, s>>>(x, M * K, d.x);
    STAVE_CUDA_LAUNCHED();
    wide_product(ctx, d, M, N, K, bias, y);
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  STAVE_CUBLAS_CHECK(cublasSgemm(ctx.blas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                                 static_cast<int>(K), &one, w, static_cast<int>(K), x, static_cast<int>(K), &zero, y,
                                 static_cast<int>(N)));
  if (bias) {
    add_bias(y, M, N, bias, s);
  }
}

}  // namespace dev
}  // namespace stave::cuda
