// The fused MXFP4 × FP8 GEMM with the weight as wgmma's register operand: the scheme is in
// gemm_mxfp4_fp8.h (mxfp4_fp8_gemm_rs), the fragment layout in rs_fragment.h.
#include <cuda.h>

#include <cstdint>
#include <mutex>

#include "backends/cuda/e2m1_e4m3.h"
#include "backends/cuda/gemm_mxfp4_fp8.h"
#include "backends/cuda/hopper.cuh"
#include "backends/cuda/mxfp4_tiles.cuh"
#include "backends/cuda/quantize_fp8.h"
#include "backends/cuda/rs_fragment.h"
#include "backends/cuda/tensor_map.h"
#include "stave/errors.h"

namespace stave::cuda {
namespace {

namespace hp = hopper;

// Tiles: 128 tokens (the MMAs' N) × 128 weight rows (two warp groups of 64, the MMAs' M), K in
// steps of 128 (four MX blocks, four k32 MMAs).
constexpr int kTokens = 128, kRows = 128, kBK = 128, kStages = 4;
constexpr int kConsumers = 256;
// And a producer warp group, of which one thread issues the loads: a whole group, so that it can
// hand registers to the consumers (setmaxnreg), which keep 64 sums, 64 accumulators and two K
// steps' A registers each (a launch of 384 threads allows 168 per thread; 40 + 2 × 232 fit).
constexpr int kThreads = kConsumers + 128;
constexpr int kProducerRegs = 40, kConsumerRegs = 232;

using Ring = Mxfp4Ring<kTokens, kRows, kStages>;
constexpr int kXBytes = Ring::kXBytes;          // E4M3 activation tile, 128-byte swizzle
constexpr int kCodeBytes = Ring::kCodeBytes;    // E2M1 codes, rows of 64 bytes, 64-byte swizzle
constexpr int kScaleBytes = Ring::kScaleBytes;  // block bytes: the aligned 16 holding the step's 4
constexpr int kSmemBytes = Ring::Layout<0>::kBytes;  // the ring alone (no expanded tiles)

using Frag = uint32_t[4][4];  // one K step's A registers: [MX block s][register j]

template <Fp8Accum kAccum>
__global__ void __launch_bounds__(kThreads, 1)
    mxfp4_fp8_gemm_rs_kernel(const __grid_constant__ CUtensorMap tm_x, const __grid_constant__ CUtensorMap tm_codes,
                             const __grid_constant__ CUtensorMap tm_scales, const int* __restrict__ row_exp,
                             const float* __restrict__ x_scale, const float* __restrict__ w_scale,
                             const float* __restrict__ bias, float* __restrict__ y, int M, int N, int K) {
  extern __shared__ uint8_t smem_raw[];
  const typename Ring::Smem sm = Ring::carve<0>(smem_raw);
  uint8_t* s_x = sm.x;
  uint8_t* s_codes = sm.codes;
  uint8_t* s_scales = sm.scales;
  const uint2* luts = sm.luts;
  uint64_t* full = sm.full;
  uint64_t* empty = sm.empty;

  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * kTokens, n0 = blockIdx.y * kRows;
  const int steps = K / kBK;

  Ring::start(tid, kConsumers, sm, &tm_x, &tm_codes, &tm_scales);

  if (tid >= kConsumers) {  // the producer warp group: one thread issues every load
    hp::setmaxnreg_dec<kProducerRegs>();
    if (tid == kConsumers) Ring::produce(&tm_x, &tm_codes, &tm_scales, sm, steps, m0, n0);
    return;
  }

  hp::setmaxnreg_inc<kConsumerRegs>();
  // Consumers: warp group g owns weight rows 64 g … 64 g + 63 of the tile; this thread's
  // registers j = 0, 2 come from row ra, j = 1, 3 from row rb (rs_fragment.h).
  const int g = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int ra = 64 * g + rs::a_row(warp, lane, 0), rb = 64 * g + rs::a_row(warp, lane, 1);
  const int ea = row_exp[n0 + ra], eb = row_exp[n0 + rb];
  float acc[64], sum[64];
  Frag f0, f1;

  // Step k's A registers: wait for its stage, then per MX block s the two rows' chunks, their
  // shifts' tables and four conversions of four codes each.
  auto expand = [&](int k, Frag& f) {
    const int st = k % kStages;
    hp::mbar_wait(full + st, static_cast<uint32_t>((k / kStages) & 1));
    const uint8_t* codes = s_codes + st * kCodeBytes;
    const uint8_t* sc = s_scales + st * kScaleBytes;
    const uint32_t sa = *reinterpret_cast<const uint32_t*>(sc + Ring::scale_offset(ra, k));
    const uint32_t sb = *reinterpret_cast<const uint32_t*>(sc + Ring::scale_offset(rb, k));
#pragma unroll
    for (int s = 0; s < kBK / 32; ++s) {
      const uint4 ca = *reinterpret_cast<const uint4*>(codes + rs::code_chunk_offset(ra, s));
      const uint4 cb = *reinterpret_cast<const uint4*>(codes + rs::code_chunk_offset(rb, s));
      const uint2 ta = luts[block_shift(static_cast<int>((sa >> (8 * s)) & 0xFFu), ea) - kMinShift];
      const uint2 tb = luts[block_shift(static_cast<int>((sb >> (8 * s)) & 0xFFu), eb) - kMinShift];
      f[s][0] = e2m1x4_to_e4m3(rs::a_codes(ca, lane, 0), ta);
      f[s][1] = e2m1x4_to_e4m3(rs::a_codes(cb, lane, 1), tb);
      f[s][2] = e2m1x4_to_e4m3(rs::a_codes(ca, lane, 2), ta);
      f[s][3] = e2m1x4_to_e4m3(rs::a_codes(cb, lane, 3), tb);
    }
  };
  auto fence_acc = [&] {
#pragma unroll
    for (int i = 0; i < 64; ++i) hp::fence_operand(acc[i]);
  };
  // Keeps f's registers where the MMAs read them until a wait has covered those MMAs.
  auto fence_frag = [&](Frag& f) {
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
      for (int j = 0; j < 4; ++j) hp::fence_operand(f[s][j]);
  };
  auto b_desc = [&](int k, int s) { return hp::sw128_desc(hp::smem_u32(s_x + (k % kStages) * kXBytes) + 32 * s); };
  // Step k's four MMAs into acc (from zero when `zero` is set).
  auto issue = [&](int k, Frag& f, bool zero) {
    fence_frag(f);
    fence_acc();
    hp::wgmma_fence();
#pragma unroll
    for (int s = 0; s < kBK / 32; ++s) hp::wgmma_m64n128k32_e4m3_rs(acc, f[s], b_desc(k, s), !(zero && s == 0));
    hp::wgmma_commit();
    fence_acc();
  };
  auto release = [&](int k) { hp::mbar_arrive(empty + k % kStages); };

  // One K step with `cur` holding its registers; `next` receives step k + 1's while the MMAs
  // run. The two register sets alternate, so the steps go in pairs.
  auto step = [&](int k, Frag& cur, Frag& next) {
    if constexpr (kAccum == Fp8Accum::kStep) {
      issue(k, cur, true);
      if (k + 1 < steps) expand(k + 1, next);
      hp::wgmma_wait_all();
      fence_acc();
      fence_frag(cur);
      release(k);
#pragma unroll
      for (int i = 0; i < 64; ++i) sum[i] += acc[i];
    } else if constexpr (kAccum == Fp8Accum::kWhole) {
      issue(k, cur, k == 0);
      hp::wgmma_wait<1>();  // step k − 1's MMAs are done: its stage and registers (next) are free
      fence_frag(next);
      if (k > 0) release(k - 1);
      if (k + 1 < steps) expand(k + 1, next);
    } else {  // kBlock: every MX block's MMA from zero, added into sum on its own
#pragma unroll
      for (int s = 0; s < kBK / 32; ++s) {
        fence_frag(cur);
        fence_acc();
        hp::wgmma_fence();
        hp::wgmma_m64n128k32_e4m3_rs(acc, cur[s], b_desc(k, s), false);
        hp::wgmma_commit();
        if (s == 0 && k + 1 < steps) expand(k + 1, next);
        hp::wgmma_wait_all();
        fence_acc();
#pragma unroll
        for (int i = 0; i < 64; ++i) sum[i] += acc[i];
      }
      fence_frag(cur);
      release(k);
    }
  };

  if constexpr (kAccum != Fp8Accum::kWhole) {
#pragma unroll
    for (int i = 0; i < 64; ++i) sum[i] = 0.0f;
  }
  expand(0, f0);
  for (int k = 0; k < steps; k += 2) {
    step(k, f0, f1);
    if (k + 1 < steps) step(k + 1, f1, f0);
  }
  if constexpr (kAccum == Fp8Accum::kWhole) {
    hp::wgmma_wait_all();
    fence_acc();
#pragma unroll
    for (int i = 0; i < 64; ++i) sum[i] = acc[i];
  }

  // Epilogue: the tile is D[weight row][token]: sum[4 j + c] is row ra, token 8 j + 2 (lane % 4)
  // + c, sum[4 j + 2 + c] row rb. Row and column scales (powers of two: exact), bias.
  const int na = n0 + ra, nb = n0 + rb;
  const float wa = w_scale[na], wb = w_scale[nb];
  const float ba = bias ? bias[na] : 0.0f, bb = bias ? bias[nb] : 0.0f;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int m = m0 + 8 * j + 2 * (lane & 3) + c;
      if (m < M) {
        const float xs = x_scale[m];
        y[static_cast<int64_t>(m) * N + na] = sum[4 * j + c] * xs * wa + ba;
        y[static_cast<int64_t>(m) * N + nb] = sum[4 * j + 2 + c] * xs * wb + bb;
      }
    }
  }
}

}  // namespace

namespace dev {

void mxfp4_fp8_gemm_rs(const DeviceLinear& w, const uint8_t* xq, const float* x_scale, int64_t M, int64_t Mp,
                       const float* bias, float* y, Fp8Accum accum, cudaStream_t s) {
  if (M <= 0) return;
  if (!mxfp4_fp8_gemm_applies(w))
    throw Error(ErrorKind::kInternal, "mxfp4_fp8_gemm_rs: weight " + w.name + " is not one the fused kernels take");
  static std::once_flag attr;
  Ring::launch(mxfp4_fp8_gemm_rs_kernel<Fp8Accum::kStep>, mxfp4_fp8_gemm_rs_kernel<Fp8Accum::kWhole>,
               mxfp4_fp8_gemm_rs_kernel<Fp8Accum::kBlock>, attr, kThreads, kSmemBytes, CU_TENSOR_MAP_SWIZZLE_64B, w, xq,
               x_scale, M, Mp, bias, y, accum, s);
}

}  // namespace dev
}  // namespace stave::cuda
