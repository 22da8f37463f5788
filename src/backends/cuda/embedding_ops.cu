// The embedding lookup on the GPU (CudaBackend::embedding_rows): each token's row of a table in
// its stored format (the resident table, or the rows the host gathered), widened to fp32. Exact
// (BF16, F16 and F32 values are fp32 values), so the rows equal the host's ref::weight_row_f32
// bit for bit.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_ops.h"

namespace stave::cuda::dev {
namespace {

constexpr int kThreads = 256;

__device__ inline float widen(uint16_t v, bool bf16) {
  return bf16 ? __uint_as_float(static_cast<uint32_t>(v) << 16) : __half2float(__ushort_as_half(v));
}

// One block per row (row ids[t] of the table, or row t where ids is null); 16-byte loads of 8 half-width values (in % 8 == 0: rows 16-byte aligned).
__global__ void gather_16bit_x8_kernel(const uint16_t* table, int64_t in, const int32_t* ids, bool bf16, float* h) {
  const int64_t t = blockIdx.x;
  const uint4* src = reinterpret_cast<const uint4*>(table + (ids ? static_cast<int64_t>(ids[t]) : t) * in);
  float4* dst = reinterpret_cast<float4*>(h + t * in);
  for (int64_t e = threadIdx.x; e < in / 8; e += blockDim.x) {
    const uint4 v = src[e];
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    float f[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = widen(static_cast<uint16_t>(w[i] & 0xffffu), bf16);
      f[2 * i + 1] = widen(static_cast<uint16_t>(w[i] >> 16), bf16);
    }
    dst[2 * e] = make_float4(f[0], f[1], f[2], f[3]);
    dst[2 * e + 1] = make_float4(f[4], f[5], f[6], f[7]);
  }
}

// Any width: one value per thread step.
__global__ void gather_16bit_kernel(const uint16_t* table, int64_t in, const int32_t* ids, bool bf16, float* h) {
  const int64_t t = blockIdx.x;
  const uint16_t* src = table + (ids ? static_cast<int64_t>(ids[t]) : t) * in;
  for (int64_t e = threadIdx.x; e < in; e += blockDim.x) h[t * in + e] = widen(src[e], bf16);
}

__global__ void gather_f32_kernel(const float* table, int64_t in, const int32_t* ids, float* h) {
  const int64_t t = blockIdx.x;
  const float* src = table + (ids ? static_cast<int64_t>(ids[t]) : t) * in;
  for (int64_t e = threadIdx.x; e < in; e += blockDim.x) h[t * in + e] = src[e];
}

}  // namespace

bool embedding_rows(const void* table, WeightFormat format, int64_t in, const int32_t* ids, int64_t L, float* h,
                    cudaStream_t s) {
  if (L <= 0) return true;
  if (L > INT32_MAX) return false;
  const unsigned blocks = static_cast<unsigned>(L);
  switch (format) {
    case WeightFormat::kBF16:
    case WeightFormat::kF16: {
      const bool bf16 = format == WeightFormat::kBF16;
      const auto* t = static_cast<const uint16_t*>(table);
      if (in % 8 == 0 && reinterpret_cast<uintptr_t>(table) % 16 == 0)
        gather_16bit_x8_kernel<<<blocks, kThreads, 0, s>>>(t, in, ids, bf16, h);
      else
        gather_16bit_kernel<<<blocks, kThreads, 0, s>>>(t, in, ids, bf16, h);
      break;
    }
    case WeightFormat::kF32:
      gather_f32_kernel<<<blocks, kThreads, 0, s>>>(static_cast<const float*>(table), in, ids, h);
      break;
    default:
      return false;
  }
  STAVE_CUDA_LAUNCHED();
  return true;
}

}  // namespace stave::cuda::dev
