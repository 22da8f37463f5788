// Fast-precision activations in fp32, shared by the element-wise kernels (fused_ops.cu) and the
// FP8 path's fused SiLU·up quantization (linear_fp8.cu), so both round the same way.
#pragma once
#include <cuda_runtime.h>

namespace stave::cuda {

__device__ __forceinline__ float silu_f(float g) { return g / (1.0f + expf(-g)); }
__device__ __forceinline__ float sigmoid_f(float g) { return 1.0f / (1.0f + expf(-g)); }

}  // namespace stave::cuda
