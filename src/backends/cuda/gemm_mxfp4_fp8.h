// The fused MXFP4 × FP8 GEMM for Hopper (docs/cuda_fp8_gemm.md): the FP8 path's product
// (linear_fp8.h) with the weight read as stored — packed E2M1 codes and E8M0 block bytes,
// 4.25 bits per weight — and expanded to E4M3 tile by tile in shared memory inside the
// kernel, never as a whole-matrix pass. The expanded bytes are those of the per-product
// expansion (E2M1 · 2^(e − 127 − R_w), clamped as there), so the operands equal the cuBLASLt
// path's; only the order and the promotion of the fp32 accumulation differ.
//
// Tiles of 128 × 128 outputs, K in steps of 128: one producer warp issues the TMA loads of the
// activation tile (E4M3, 128-byte swizzle), the weight's code bytes and block bytes into a
// 4-stage ring; two consumer warp groups expand the weight tile of step k+1 while the
// warp-group MMAs of step k run, each over 64 rows (wgmma m64n128k32 E4M3), and add each step's
// partial sums into fp32 registers (the promotion cuBLASLt makes with fast accumulation off:
// Hopper's FP8 MMA keeps fewer bits than fp32 inside a step; STAVE_CUDA_FP8_ACCUM=fast keeps
// the tensor cores' accumulator instead, as cuBLASLt's FAST_ACCUM does). Epilogue:
// · 2^R_a[m] · 2^R_w[n] (+ bias[n]), fp32 out.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/device_ops.h"
#include "backends/cuda/linear_fp8.h"  // Fp8Accum

namespace stave::cuda::dev {

// Whether the fused kernel takes w's product: w on the FP8 path (w.fp8), N % 128 == 0,
// K % 512 == 0 (the block bytes' rows a multiple of 16 bytes for TMA), and the driver's tensor
// map encoder found.
bool mxfp4_fp8_gemm_applies(const DeviceLinear& w);

// y[M, N] = (xq · Ŵᵀ)[m, n] · x_scale[m] · 2^R_w[n] (+ bias[n]) with xq the E4M3 activation
// [Mp ≥ M rows, K] (16-byte aligned, rows past M ignored), x_scale [M] its row scales, Ŵ the
// Which kernel mxfp4_fp8_gemm runs (STAVE_CUDA_FUSED_KERNEL, read with STAVE_CUDA_FP8_ACCUM as a
// context makes its first FP8 product): unset or "smem", the weight tile expanded into shared
// memory, both MMA operands from there; "registers", mxfp4_fp8_gemm_rs; anything else an Error
// naming the variable.
enum class FusedKernel { kSharedMemory, kRegisters };
FusedKernel fused_kernel_from_env();

// E4M3 expansion of w. y 8-byte aligned. accum: how the MMAs' sums reach fp32 (Fp8Accum);
// which: which of the two kernels runs.
void mxfp4_fp8_gemm(const DeviceLinear& w, const uint8_t* xq, const float* x_scale, int64_t M, int64_t Mp,
                    const float* bias, float* y, Fp8Accum accum, FusedKernel which, cudaStream_t s);

// The same product with the weight as wgmma's register operand (gemm_mxfp4_fp8_rs.cu): each of
// the two consumer warp groups takes 64 weight rows, reads their E2M1 codes from the step's
// code tile (TMA, 64-byte swizzle) and expands them straight into wgmma's A registers (the
// layout of rs_fragment.h), the activation tile being the B operand in shared memory. No
// expanded tile is written to shared memory, and the warp groups need no barrier between them:
// each releases a stage once its MMAs over it are done. Same operands as above, so the same
// products; the output tile comes out transposed (weight rows × tokens) and is stored so.
void mxfp4_fp8_gemm_rs(const DeviceLinear& w, const uint8_t* xq, const float* x_scale, int64_t M, int64_t Mp,
                       const float* bias, float* y, Fp8Accum accum, cudaStream_t s);

}  // namespace stave::cuda::dev
