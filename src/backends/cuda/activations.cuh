// Fast-precision activations in fp32, shared by the element-wise kernels (fused_ops.cu) and the
// FP8 path's fused input quantization (quantize_fp8.cu), so both round the same way.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace stave::cuda {

__device__ __forceinline__ float silu_f(float g) { return g / (1.0f + expf(-g)); }
__device__ __forceinline__ float sigmoid_f(float g) { return 1.0f / (1.0f + expf(-g)); }

// Eight consecutive floats from (store8: to) a 16-byte aligned address.
__device__ __forceinline__ void load8(const float* p, float (&v)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

__device__ __forceinline__ void store8(float* p, const float (&v)[8]) {
  reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

// The gated RMSNorm of one head held as 8 consecutive values per lane by `lanes` neighbouring
// lanes (a power of two ≤ 32, the head 8 · lanes values, starting at a lane multiple of lanes):
// v = w ⊙ v / sqrt(mean v² + eps) ⊙ silu(z). Every lane of the warp must call it (shuffles).
// One function for the standalone kernel (fused_ops.cu) and the FP8 quantization's prologue
// (quantize_fp8.cu), each rounding pinned, so that both give the same bits.
__device__ __forceinline__ void gated_norm_group8(float (&v)[8], const float (&z)[8], const float (&w)[8], int lanes,
                                                  float eps) {
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) ss = __fmaf_rn(v[i], v[i], ss);
  for (int o = 1; o < lanes; o <<= 1) ss = __fadd_rn(ss, __shfl_xor_sync(0xffffffffu, ss, o));
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(8 * lanes)), eps)));
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = __fmul_rn(__fmul_rn(w[i], __fmul_rn(v[i], inv)), silu_f(z[i]));
}

// Whether gated_norm_group8 takes heads of `head` values (8 · lanes, lanes a power of two ≤ 32)
// in rows of k, with w 16-byte aligned.
inline bool gated_norm_groups_apply(int64_t head, int64_t k, const float* w) {
  const int64_t lanes = head / 8;
  return head % 8 == 0 && lanes >= 1 && lanes <= 32 && (lanes & (lanes - 1)) == 0 && k % head == 0 &&
         reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

}  // namespace stave::cuda
