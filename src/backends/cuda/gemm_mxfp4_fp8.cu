// The fused MXFP4 × FP8 GEMM for Hopper: the scheme is in gemm_mxfp4_fp8.h.
#include <cuda.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>

#include "backends/cuda/e2m1_e4m3.h"
#include "backends/cuda/gemm_mxfp4_fp8.h"
#include "backends/cuda/hopper.cuh"
#include "backends/cuda/mxfp4_tiles.cuh"
#include "backends/cuda/quantize_fp8.h"
#include "backends/cuda/tensor_map.h"
#include "stave/errors.h"
#include "util/env_choice.h"

namespace stave::cuda {
namespace {

namespace hp = hopper;

constexpr int kBM = 128, kBN = 128, kBK = 128, kStages = 4;
constexpr int kConsumers = 256;            // two warp groups of 64 output rows each
constexpr int kThreads = kConsumers + 32;  // and one producer warp

// Shared memory (Mxfp4Ring::Layout): the ring, then the expanded weight tiles.
using Ring = Mxfp4Ring<kBM, kBN, kStages>;
constexpr int kABytes = Ring::kXBytes;       // E4M3 activation tile, swizzled by TMA
constexpr int kCodeBytes = Ring::kCodeBytes;  // packed E2M1 codes, rows of 64 bytes
constexpr int kScaleBytes = Ring::kScaleBytes;  // block bytes: rows of 16 (4 used per step)
constexpr int kWBytes = kBN * kBK;           // the expanded E4M3 weight tile, swizzled here
constexpr int kWBuffers = 3;                 // expanded tiles: one being read by MMAs, one written, one spare
constexpr int kExtraBytes = kWBuffers * kWBytes;
using Layout = Ring::Layout<kExtraBytes>;
constexpr int kSmemBytes = Layout::kBytes;

// One step's weight tile for consumer thread t: row t / 2, half t % 2 (blocks 2h, 2h + 1 of
// the step's four), written as E4M3 in the swizzled layout wgmma reads.
__device__ __forceinline__ void expand_step(const uint8_t* codes, const uint8_t* scales, const uint2* luts,
                                            int row_exp, int t, uint8_t* out) {
  // scales: row r's four block bytes of this step at r · 16 (the caller adds the step's offset)
  const int r = t >> 1, h = t & 1;
#pragma unroll
  for (int b = 0; b < 2; ++b) {
    const uint4 c = *reinterpret_cast<const uint4*>(codes + r * (kBK / 2) + h * 32 + b * 16);
    const int d = block_shift(scales[r * 16 + 2 * h + b], row_exp);
    uint4 lo, hi;
    e2m1_block_to_e4m3(c, luts[d - kMinShift], lo, hi);
    const int chunk = 4 * h + 2 * b;  // 16 weights per chunk: this block is chunks chunk, chunk + 1
    *reinterpret_cast<uint4*>(out + hp::sw128_offset(r, chunk)) = lo;
    *reinterpret_cast<uint4*>(out + hp::sw128_offset(r, chunk + 1)) = hi;
  }
}

// How the MMAs' sums reach fp32 (dev::Fp8Accum): kStep, each K step's four MMAs start from
// zero and their sum is added into fp32 registers after the step (cuBLASLt's default promotion);
// kWhole, the MMAs accumulate over the whole K in the tensor cores' own accumulator (cuBLASLt's
// FAST_ACCUM), so step k's MMAs run on while step k + 1 is expanded and issued; kBlock, every
// MMA (one MX block of K on both sides) starts from zero and is added into fp32 registers on
// its own (while one warp group adds, the other's MMA runs). In kBlock every block's sum is exact: its 32 products are E2M1 · E2M1
// values times one power of two, multiples of a quarter of it below 36 in magnitude, so the sum
// needs 13 significant bits, within the ≈ 14 that Hopper's FP8 MMA keeps (DeepSeek-V3 report,
// §3.3.2); the sums over blocks are fp32 additions in K order, as on the CPU.
template <Fp8Accum kAccum>
__global__ void __launch_bounds__(kThreads, 1)
    mxfp4_fp8_gemm_kernel(const __grid_constant__ CUtensorMap tm_x, const __grid_constant__ CUtensorMap tm_codes,
                          const __grid_constant__ CUtensorMap tm_scales, const int* __restrict__ row_exp,
                          const float* __restrict__ x_scale, const float* __restrict__ w_scale,
                          const float* __restrict__ bias, float* __restrict__ y, int M, int N, int K) {
  extern __shared__ uint8_t smem_raw[];
  const typename Ring::Smem sm = Ring::carve<kExtraBytes>(smem_raw);
  // The consumers' pointers from the base and the layout's offsets rather than sm's fields: with
  // the fields, ptxas keeps them in registers and the step form spills (4 bytes).
  uint8_t* s_x = sm.x;
  uint8_t* s_codes = sm.x + Layout::kOffCodes;
  uint8_t* s_scales = sm.x + Layout::kOffScales;
  uint8_t* s_w = sm.x + Layout::kOffExtra;
  uint2* luts = reinterpret_cast<uint2*>(sm.x + Layout::kOffLut);
  uint64_t* full = reinterpret_cast<uint64_t*>(sm.x + Layout::kOffBars);
  uint64_t* empty = full + kStages;

  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;
  const int steps = K / kBK;

  Ring::start(tid, kConsumers, sm, &tm_x, &tm_codes, &tm_scales);

  if (tid >= kConsumers) {  // the producer warp: one lane issues every load
    if (tid == kConsumers) Ring::produce(&tm_x, &tm_codes, &tm_scales, sm, steps, m0, n0);
    return;
  }

  // Consumers. Warp group g computes output rows m0 + 64 g … + 63; every consumer thread also
  // expands its half of one weight row per step.
  const int g = tid >> 7, warp = tid >> 5, lane = tid & 31;
  const int my_row_exp = row_exp[n0 + (tid >> 1)];
  constexpr bool kPromote = kAccum != Fp8Accum::kWhole;
  float acc[64], sum[64];
  if constexpr (kPromote) {
#pragma unroll
    for (int i = 0; i < 64; ++i) sum[i] = 0.0f;
  }

  auto expand = [&](int k) {
    const int st = k % kStages;
    hp::mbar_wait(full + st, static_cast<uint32_t>((k / kStages) & 1));
    expand_step(s_codes + st * kCodeBytes, s_scales + st * kScaleBytes + Ring::scale_offset(0, k), luts, my_row_exp,
                tid, s_w + (k % kWBuffers) * kWBytes);
    hp::fence_proxy_async();  // the expanded tile, written by st.shared, is read by wgmma
  };
  auto issue = [&](int k, bool first) {
    const uint32_t a = hp::smem_u32(s_x + (k % kStages) * kABytes + g * 64 * kBK);
    const uint32_t b = hp::smem_u32(s_w + (k % kWBuffers) * kWBytes);
#pragma unroll
    for (int i = 0; i < 64; ++i) hp::fence_operand(acc[i]);
    hp::wgmma_fence();
#pragma unroll
    for (int s = 0; s < kBK / 32; ++s)
      hp::wgmma_m64n128k32_e4m3(acc, hp::sw128_desc(a + 32 * s), hp::sw128_desc(b + 32 * s), !(first && s == 0));
    hp::wgmma_commit();
#pragma unroll
    for (int i = 0; i < 64; ++i) hp::fence_operand(acc[i]);
  };

  expand(0);
  hp::named_barrier(1, kConsumers);
  if constexpr (kAccum == Fp8Accum::kBlock) {
    // One block's MMA into acc from zero, then its sum added into sum. While one warp group adds,
    // the other's MMA runs, so the tensor cores stay fed from two groups in turn.
    auto block = [&](uint32_t da, uint32_t db) {
#pragma unroll
      for (int i = 0; i < 64; ++i) hp::fence_operand(acc[i]);
      hp::wgmma_fence();
      hp::wgmma_m64n128k32_e4m3(acc, hp::sw128_desc(da), hp::sw128_desc(db), false);
      hp::wgmma_commit();
    };
    auto add = [&] {
      hp::wgmma_wait_all();
#pragma unroll
      for (int i = 0; i < 64; ++i) {
        hp::fence_operand(acc[i]);
        sum[i] += acc[i];
      }
    };
    for (int k = 0; k < steps; ++k) {
      const uint32_t a = hp::smem_u32(s_x + (k % kStages) * kABytes + g * 64 * kBK);
      const uint32_t b = hp::smem_u32(s_w + (k % kWBuffers) * kWBytes);
      block(a, b);
      // Tile (k + 1) % 3 was last read by step k − 2's MMAs, done in every thread before the
      // barrier that ended step k − 1.
      if (k + 1 < steps) expand(k + 1);
      add();
#pragma unroll
      for (int s = 1; s < kBK / 32; ++s) {
        block(a + 32 * s, b + 32 * s);
        add();
      }
      hp::mbar_arrive(empty + k % kStages);  // this step's activation tile is no longer read
      hp::named_barrier(1, kConsumers);      // step k + 1's tile is expanded before its MMAs
    }
  } else {
    for (int k = 0; k < steps; ++k) {
      issue(k, kPromote || k == 0);
      if constexpr (kPromote) {
        if (k + 1 < steps) expand(k + 1);  // overlaps the MMAs in flight
        hp::wgmma_wait_all();
#pragma unroll
        for (int i = 0; i < 64; ++i) hp::fence_operand(acc[i]);
        hp::mbar_arrive(empty + k % kStages);  // this step's activation tile is no longer read
#pragma unroll
        for (int i = 0; i < 64; ++i) sum[i] += acc[i];
      } else {
        hp::wgmma_wait<1>();  // step k - 1's MMAs are done, step k's run on
        if (k > 0) hp::mbar_arrive(empty + (k - 1) % kStages);
        // Tile (k + 1) % 3 was last read by step k − 2's MMAs, done in every thread before the
        // barrier that ended step k − 1.
        if (k + 1 < steps) expand(k + 1);
      }
      // Every thread's expansion of step k + 1 is done before any MMA of it, and (promoting) every
      // group's MMAs of step k before any thread expands over their tile.
      hp::named_barrier(1, kConsumers);
    }
    if constexpr (!kPromote) {
      hp::wgmma_wait_all();
#pragma unroll
      for (int i = 0; i < 64; ++i) {
        hp::fence_operand(acc[i]);
        sum[i] = acc[i];
      }
    }
  }

  // Epilogue: the row and column scales (powers of two: exact) and the bias.
  const int r0 = m0 + g * 64 + (warp & 3) * 16 + (lane >> 2), r1 = r0 + 8;
  const float a0 = r0 < M ? x_scale[r0] : 0.0f, a1 = r1 < M ? x_scale[r1] : 0.0f;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int col = n0 + j * 8 + (lane & 3) * 2;
    const float w0 = w_scale[col], w1 = w_scale[col + 1];
    const float b0 = bias ? bias[col] : 0.0f, b1 = bias ? bias[col + 1] : 0.0f;
    if (r0 < M)
      *reinterpret_cast<float2*>(y + static_cast<int64_t>(r0) * N + col) =
          make_float2(sum[4 * j] * a0 * w0 + b0, sum[4 * j + 1] * a0 * w1 + b1);
    if (r1 < M)
      *reinterpret_cast<float2*>(y + static_cast<int64_t>(r1) * N + col) =
          make_float2(sum[4 * j + 2] * a1 * w0 + b0, sum[4 * j + 3] * a1 * w1 + b1);
  }
}

}  // namespace

namespace dev {

bool mxfp4_fp8_gemm_applies(const DeviceLinear& w) {
  return w.fp8 && w.out % kBN == 0 && w.in % 512 == 0 && tensor_maps_available();
}

FusedKernel fused_kernel_from_env() {
  return env_choice<FusedKernel>("STAVE_CUDA_FUSED_KERNEL",
                                 {{"smem", FusedKernel::kSharedMemory}, {"registers", FusedKernel::kRegisters}});
}

void mxfp4_fp8_gemm(const DeviceLinear& w, const uint8_t* xq, const float* x_scale, int64_t M, int64_t Mp,
                    const float* bias, float* y, Fp8Accum accum, FusedKernel which, cudaStream_t s) {
  if (M <= 0) return;
  if (which == FusedKernel::kRegisters) return mxfp4_fp8_gemm_rs(w, xq, x_scale, M, Mp, bias, y, accum, s);
  static std::once_flag attr;
  Ring::launch(mxfp4_fp8_gemm_kernel<Fp8Accum::kStep>, mxfp4_fp8_gemm_kernel<Fp8Accum::kWhole>,
               mxfp4_fp8_gemm_kernel<Fp8Accum::kBlock>, attr, kThreads, kSmemBytes, CU_TENSOR_MAP_SWIZZLE_NONE, w, xq,
               x_scale, M, Mp, bias, y, accum, s);
}

}  // namespace dev
}  // namespace stave::cuda
