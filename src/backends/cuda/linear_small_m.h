// Small-M MXFP4 W4A4 linear layers on the GPU (linear_small_m.cu): decode steps, where M (the
// running sequences) is small and the product costs far less than expanding the whole packed
// weight to BF16/FP8 in scratch, which today's paths (linear_ops.cu, linear_fp8.cu) do per call.
//
// The activations are MXFP4-QDQ'd bit-exactly by the device quantizer's functions
// (mxfp4_device.cuh, as dev::mxfp4_qdq), stored lane-interleaved so that each warp's activation
// loads are 512 contiguous bytes, then
// each warp streams R packed weight rows straight from the resident weight (16-byte loads of
// E2M1 codes, one E8M0 scale byte per 32), decodes them in registers and accumulates Σ w·x per
// scale block in fp32 for all M activation rows (each product of two E2M1·2^e values is exact
// in fp32; only the summation order differs from ref::linear), scales by the block's power of
// two, reduces over the warp by shuffles, adds the bias. y fp32.
//
// Fast precision only (exact precision keeps its fp64 path), M ≤ kSmallMMax.
// Expected (docs/benchmarks.md, "Decode linear layers"): near the memory bandwidth at M = 1
// (≈ 3–4 TB/s of packed weight, the decode instructions near the SM's issue limit), falling
// with M as the activation loads from L1 (4M/R bytes per weight) take over: ≈ 2 TB/s at M = 4,
// ≈ 1 at 8, ≈ 0.3 at 16 (one row per warp there). bench_linear's cuda_decode_* cases measure it
// against today's path; they decide where the bound kSmallMMax should sit.
// Dispatch (STAVE_CUDA_SMALL_M, read per call): unset or empty = the default, the kernel for
// M ≤ kSmallMDefaultMax (measured on an H100, 2026-12-05, docs/benchmarks.md: at M = 1 and 4 it
// beats today's expansion path on all six 27B shapes, 1.5–4.3×; at M = 8 it loses on four of
// them); "mxfp4" = up to kSmallMMax; "off" = never (today's path); anything else is an Error
// naming the variable.
#pragma once
#include <cstdint>

#include "backends/cuda/device_ops.h"

namespace stave::cuda {

constexpr int64_t kSmallMMax = 16;
constexpr int64_t kSmallMDefaultMax = 4;

enum class SmallMPath { kOff, kDefault, kMxfp4 };
SmallMPath small_m_path_from_env();

// Calls of dev::linear_small_m in this process (tests check dispatch).
int64_t linear_small_m_calls();

namespace dev {

// Whether the kernel can compute this call (fast precision, MXFP4 W4A4, 1 ≤ M ≤ kSmallMMax).
bool linear_small_m_supports(const GpuContext& ctx, const DeviceLinear& w, int64_t M);
// … and STAVE_CUDA_SMALL_M's path takes it at this M (dev::linear's dispatch).
bool linear_small_m_applies(const GpuContext& ctx, const DeviceLinear& w, int64_t M);
// y[M, N] = QDQ(x) · Wᵀ (+ bias); throws unless linear_small_m_supports. Uses ctx's scratch_x.
void linear_small_m(GpuContext& ctx, const DeviceLinear& w, const float* x, int64_t M, float* y);

}  // namespace dev
}  // namespace stave::cuda
