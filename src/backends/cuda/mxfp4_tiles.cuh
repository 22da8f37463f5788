// What the two fused MXFP4 GEMM kernels (gemm_mxfp4_fp8.cu, gemm_mxfp4_fp8_rs.cu) share: their
// shared-memory layout, start (shift tables, barriers), the producer's loop, which fills a ring of stages with one K
// step's activation tile, code tile and block bytes each, and their launch.
#pragma once
#include <cstdint>
#include <mutex>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_ops.h"
#include "backends/cuda/e2m1_e4m3.h"
#include "backends/cuda/hopper.cuh"
#include "backends/cuda/linear_fp8.h"    // Fp8Accum
#include "backends/cuda/quantize_fp8.h"  // kMinShift, kMaxShift
#include "backends/cuda/tensor_map.h"

namespace stave::cuda {

// Stage sizes and layout of one K step of 128: the activation tile [tokens][128 bytes], the code
// tile [rows][64 bytes], the block bytes [rows][16 bytes] (the aligned 16 holding the step's 4).
template <int kTokens, int kRows, int kStages>
struct Mxfp4Ring {
  static constexpr int kBK = 128;
  static constexpr int kXBytes = kTokens * kBK;
  static constexpr int kCodeBytes = kRows * kBK / 2;
  static constexpr int kScaleBytes = kRows * 16;
  static constexpr uint32_t kStageTx = kXBytes + kCodeBytes + kScaleBytes;

  // Shared memory, each part 1024-byte aligned (the 128-byte swizzle's period; the sizes above
  // are multiples of it): the ring's stages (activation tiles, code tiles, block bytes), then
  // kExtraBytes of the kernel's own, the 15 shift tables and the `full` and `empty` barriers.
  template <int kExtraBytes>
  struct Layout {
    static constexpr int kOffCodes = kStages * kXBytes;
    static constexpr int kOffScales = kOffCodes + kStages * kCodeBytes;
    static constexpr int kOffExtra = kOffScales + kStages * kScaleBytes;
    static constexpr int kOffLut = kOffExtra + kExtraBytes;
    static constexpr int kOffBars = kOffLut + 128;
    static constexpr int kBytes = kOffBars + 2 * kStages * 8 + 1024;  // + alignment slack
  };
  struct Smem {
    uint8_t *x, *codes, *scales, *extra;
    uint2* luts;
    uint64_t *full, *empty;
  };
  // The parts of Layout<kExtraBytes> in the kernel's dynamic shared memory `raw`.
  template <int kExtraBytes>
  static __device__ __forceinline__ Smem carve(uint8_t* raw) {
    using L = Layout<kExtraBytes>;
    uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t{1023});
    uint64_t* full = reinterpret_cast<uint64_t*>(base + L::kOffBars);
    return {base, base + L::kOffCodes, base + L::kOffScales, base + L::kOffExtra,
            reinterpret_cast<uint2*>(base + L::kOffLut), full, full + kStages};
  }

  // The kernel's start, by every thread of the block: the 15 shift tables (e2m1_e4m3.h; table i
  // for shift i + kMinShift) into `luts` by the first threads; the ring's barriers (`full`: the
  // producer's one arrival and the loads' bytes; `empty`: one arrival per consumer thread) and
  // the tensor maps' prefetch by the producer, thread `consumers` (the consumers are the threads
  // before it); then a block barrier.
  static __device__ __forceinline__ void start(int tid, int consumers, const Smem& sm, const CUtensorMap* tm_x,
                                               const CUtensorMap* tm_codes, const CUtensorMap* tm_scales) {
    if (tid < kMaxShift - kMinShift + 1) sm.luts[tid] = e4m3_shift_table(tid + kMinShift);
    if (tid == consumers) {
      for (int s = 0; s < kStages; ++s) {
        hopper::mbar_init(sm.full + s, 1);
        hopper::mbar_init(sm.empty + s, static_cast<uint32_t>(consumers));
      }
      hopper::mbar_init_fence();
      hopper::prefetch_tensor_map(tm_x);
      hopper::prefetch_tensor_map(tm_codes);
      hopper::prefetch_tensor_map(tm_scales);
    }
    __syncthreads();
  }

  // One thread issues every load: step k into stage k % kStages once the consumers have released
  // the step that used it before (`empty`), completing on `full`.
  static __device__ __forceinline__ void produce(const CUtensorMap* tm_x, const CUtensorMap* tm_codes,
                                                 const CUtensorMap* tm_scales, const Smem& sm, int steps, int m0,
                                                 int n0) {
    for (int k = 0; k < steps; ++k) {
      const int st = k % kStages;
      uint64_t* full = sm.full + st;
      if (k >= kStages) hopper::mbar_wait(sm.empty + st, static_cast<uint32_t>((k / kStages - 1) & 1));
      hopper::mbar_arrive_expect_tx(full, kStageTx);
      hopper::tma_load_2d(tm_x, sm.x + st * kXBytes, k * kBK, m0, full);
      hopper::tma_load_2d(tm_codes, sm.codes + st * kCodeBytes, k * (kBK / 2), n0, full);
      // A tile load's box starts 16-byte aligned in global memory (an unaligned start is an
      // illegal instruction): the 16 block bytes holding this step's four, which sit at (k % 4) · 4.
      hopper::tma_load_2d(tm_scales, sm.scales + st * kScaleBytes, (k * (kBK / 32)) & ~15, n0, full);
    }
  }
  // The launch of one of a kernel's three forms (by accum: step, whole, block) over w's product:
  // the tensor maps (the activation tile under the 128-byte swizzle, the code tile under
  // `code_swizzle`, the block bytes), a grid of kTokens × kRows tiles, `threads` threads and
  // `smem` bytes of shared memory, allowed once per kernel family through `attr`.
  template <class Kernel>
  static void launch(Kernel step, Kernel whole, Kernel block, std::once_flag& attr, int threads, int smem,
                     CUtensorMapSwizzle code_swizzle, const DeviceLinear& w, const uint8_t* xq, const float* x_scale,
                     int64_t M, int64_t Mp, const float* bias, float* y, Fp8Accum accum, cudaStream_t s) {
    const int64_t N = w.out, K = w.in;
    std::call_once(attr, [&] {
      for (Kernel k : {step, whole, block})
        STAVE_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    });
    const CUtensorMap tm_x = byte_map(xq, Mp, K, kBK, kTokens, CU_TENSOR_MAP_SWIZZLE_128B);
    const CUtensorMap tm_codes = cached_byte_map(w.data.as<void>(), N, K / 2, kBK / 2, kRows, code_swizzle);
    const CUtensorMap tm_scales =
        cached_byte_map(w.scales.as<void>(), N, K / 32, 16, kRows, CU_TENSOR_MAP_SWIZZLE_NONE);
    const dim3 grid(static_cast<unsigned>((M + kTokens - 1) / kTokens), static_cast<unsigned>(N / kRows));
    const Kernel kernel = accum == Fp8Accum::kBlock ? block : accum == Fp8Accum::kWhole ? whole : step;
    kernel<<<grid, threads, smem, s>>>(tm_x, tm_codes, tm_scales, w.fp8_row_exp.as<int>(), x_scale,
                                       w.fp8_row_scale.as<float>(), bias, y, static_cast<int>(M), static_cast<int>(N),
                                       static_cast<int>(K));
    STAVE_CUDA_LAUNCHED();
  }

  // Where step k's four block bytes of row r are within its stage's block-byte tile.
  static __device__ __forceinline__ int scale_offset(int r, int k) { return r * 16 + (k % 4) * (kBK / 32); }
};

}  // namespace stave::cuda
