// The fp64 block sum of the exact norm kernels: warp shuffles, then one partial per warp summed
// in warp order by every thread. elementwise_ops.cu's rms_norm_zero_centered and fused_ops.cu's
// exact add + norm reduce through this one function, which is what keeps the fused kernel
// bit-identical to the two ops it replaces.
#pragma once

namespace stave::cuda::dev {
namespace {

__device__ inline double block_sum(double v) {
  __shared__ double part[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) part[warp] = v;
  __syncthreads();
  double total = 0.0;
  const int warps = (blockDim.x + 31) >> 5;
  for (int i = 0; i < warps; ++i) total += part[i];
  __syncthreads();  // part[] is reused by the next call
  return total;
}

}  // namespace
}  // namespace stave::cuda::dev
