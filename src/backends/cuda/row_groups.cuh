// Rows held by one block as groups of 8 consecutive values per thread (group tid + j · blockDim
// for j < kG), the layout of the FP8 path's register quantization (quantize_fp8.cu). The fast
// RMSNorm (fused_ops.cu) uses the same layout and the same sum, so that the norm fused into the
// quantization writes and quantizes exactly the values the standalone norm writes.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace stave::cuda {

constexpr int kRowGroupThreads = 512;  // threads per row at most

// Groups per thread (1, 2, 4 or 8) and threads (a multiple of 32) for rows of k values (k % 8
// == 0); groups == 0 where a row is longer than 8 · 8 · kRowGroupThreads values.
struct RowGroupLayout {
  int groups = 0;
  unsigned threads = 0;
};
inline RowGroupLayout row_group_layout(int64_t k) {
  const int64_t n = k / 8;
  for (int g = 1; g <= 8; g *= 2)
    if (n <= int64_t{g} * kRowGroupThreads) return {g, static_cast<unsigned>(((n + g - 1) / g + 31) / 32 * 32)};
  return {};
}

// Calls launch(std::integral_constant<int, groups>{}) for a layout's groups (1, 2, 4 or 8), so
// that a kernel templated on them is launched with the layout's instance.
template <class Launch>
void with_row_groups(const RowGroupLayout& layout, Launch&& launch) {
  switch (layout.groups) {
    case 1: launch(std::integral_constant<int, 1>{}); break;
    case 2: launch(std::integral_constant<int, 2>{}); break;
    case 4: launch(std::integral_constant<int, 4>{}); break;
    default: launch(std::integral_constant<int, 8>{}); break;
  }
}

// The sum of squares of the row a block holds in v (zeros past its end), every rounding pinned:
// each thread's values in order, the warp's butterfly, then the warps' partials in order (part:
// 32 floats of shared memory). Every thread of the block must call it; all get the same sum.
template <int kG>
__device__ __forceinline__ float row_sum_squares(const float (&v)[kG][8], float* part) {
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < kG; ++j)
#pragma unroll
    for (int i = 0; i < 8; ++i) ss = __fmaf_rn(v[j][i], v[j][i], ss);
  for (int o = 16; o > 0; o >>= 1) ss = __fadd_rn(ss, __shfl_xor_sync(0xffffffffu, ss, o));
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total = __fadd_rn(total, part[w]);
  return total;
}

// x = h / sqrt(ss / k + eps) · (1 + w) for 8 values (the zero-centred RMSNorm), rounding pinned.
__device__ __forceinline__ void rms_norm_zc_group8(float (&v)[8], const float (&w)[8], float ss, int64_t k,
                                                   float eps) {
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(k)), eps)));
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = __fmul_rn(__fmul_rn(v[i], inv), __fadd_rn(1.0f, w[i]));
}

}  // namespace stave::cuda
