// Fast-precision MXFP4 W4A4 linear layers on FP8 tensor cores (linear_fp8.cu).
//
// Every E2M1 value times 2^d is exactly an FP8 E4M3 value for d in [−8, 6]. So:
// - weights: at upload, one reference exponent R_w per output row (the row's largest block
//   exponent − 6); the weight takes this path only if every row's non-zero blocks lie within
//   14 binades of it (else BF16 products, counted in linear_fp8_stats). Per product the packed
//   weight is expanded to E4M3 [N, K] = E2M1 · 2^(e − R_w) in scratch, exactly; or, with
//   Fp8Weights::kResident, once at upload into DeviceLinear::fp8_weight (the same bytes).
// - activations: the bit-exact MXFP4 quantization of each row, written as E4M3 with one
//   R_a per row (the row's largest block exponent − 6). A block more than 14 binades below the
//   row's largest is rounded to E4M3's subnormal grid (counted): each value then moves by at
//   most 2^(R_a − 10), i.e. 2^−18 of the row's largest |value| (≥ 4 · 2^(R_a + 6)).
// - product: cuBLASLt E4M3 × E4M3 (the "TN" layout Hopper requires), fp32 accumulation, the
//   row scales 2^R_a[m] · 2^R_w[n] applied in the GEMM (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F)
//   or, where cuBLASLt offers no such algorithm, by a kernel after an unscaled fp32 GEMM.
// cuBLASLt's FP8 kernels need N and K multiples of 16 (K is, MXFP4 blocks are 32): other N
// take the BF16 path. M is padded to a multiple of 16 with zero rows (scratch output, copied).
#pragma once
#include <cstdint>

#include "backends/cuda/device_ops.h"

namespace stave::cuda {

// Sets w.fp8 and its row exponents and scales (upload_linear, fast precision), and with
// kResident w.fp8_weight where `cache` (if given) has room for it.
void prepare_fp8_weight(DeviceLinear& w, Fp8Weights keep = Fp8Weights::kExpandPerProduct, Fp8Cache* cache = nullptr);

struct LinearFp8Stats {
  int64_t weights_fp8 = 0;              // MXFP4 W4A4 weights uploaded that fit (fp8_check)
  int64_t weights_fp8_resident = 0;     // … of them kept resident as E4M3 (Fp8Weights::kResident)
  int64_t weights_fp8_not_kept = 0;     // … asked to be kept, but device memory ran short
  int64_t weights_fp8_over_limit = 0;   // … asked to be kept, but past their backend's Fp8Cache limit
  int64_t weights_out_of_range = 0;     // … that do not: BF16 products
  uint64_t activation_blocks_rounded = 0;  // activation blocks below their row's FP8 range
  int64_t gemms_scaled_in_gemm = 0, gemms_scaled_after = 0;
  int64_t gemms_copied = 0;             // … scaled in the GEMM into scratch and copied (y unaligned)
  int64_t gemms_fused = 0;              // products by the fused MXFP4 GEMM (LinearPath::kFp8Fused)
  int64_t plans_fit_tile = 0;           // cuBLASLt plans given a row-fitting tile (STAVE_CUDA_FP8_CLUSTER=fit)
};
// Process-wide counters; waits for the device (the activation counter lives there).
LinearFp8Stats linear_fp8_stats();

// How a packed weight is expanded to E4M3 (the same bytes either way). STAVE_CUDA_EXPAND_KERNEL:
// unset or "perm" → kPerm (e2m1_e4m3.h's byte tables, one byte_perm per four weights, as the
// fused GEMM expands its tiles: 68 PTX instructions per 16 weights against 140, for an expansion
// that shares the GPU with the GEMMs; the default since 2026-12-07 10:30, 0.4 / 1.0 ms off the
// 27B's backbone at 512 / 2048 tokens on an H100), "float" → kFloat (per weight a float table, a
// multiply and a conversion); anything else is an Error naming the variable.
// Read at each expansion.
enum class ExpandKernel { kFloat, kPerm };
ExpandKernel expand_kernel_from_env();

// How FP8 products carry their sums into fp32. STAVE_CUDA_FP8_ACCUM: unset or "promote" →
// kStep (every K step of 128, cuBLASLt's default), "fast" → kWhole (the tensor cores' own
// accumulator over the whole K: cuBLASLt's FAST_ACCUM), "block" → kBlock (every MX block of 32 on
// its own, which makes each block's sum exact: the fused MXFP4 GEMM only; cuBLASLt promotes per
// step); anything else is an Error naming the variable.
enum class Fp8Accum { kStep, kWhole, kBlock };
Fp8Accum fp8_accum_from_env();

namespace dev {

// True when the FP8 path applies to this call (fast precision, ctx's path, w.fp8, N % 16 == 0).
bool linear_fp8_applies(const GpuContext& ctx, const DeviceLinear& w);
// y[M, N] = x · Wᵀ (+ bias) on the FP8 path; caller checked linear_fp8_applies. False (nothing
// done) where cuBLASLt has no FP8 algorithm for the shape: the caller takes the BF16 path.
bool linear_fp8(GpuContext& ctx, const DeviceLinear& w, const float* x, int64_t M, float* y);
// The activation side alone (tests): rows of x [M, K] (K % 32 == 0) quantized bit-exactly as
// mxfp4::qdq_row and written as E4M3 xq [M, K] with 2^R_a per row in row_scale [M]. `form`:
// 0 the one the path picks for K by default, 1 the register form (K ≤ 32,768, x 16-byte
// aligned), 2 the two-pass warp form, 3 the staged form (K ≤ 32,768, x 16-byte aligned; rows
// through shared memory, STAVE_CUDA_QUANT_ROWS=staged).
void quantize_rows_fp8(const float* x, int64_t M, int64_t K, mxfp4::ScaleMode mode, uint8_t* xq, float* row_scale,
                       int form, cudaStream_t s);
// linear_fp8 in two steps, so that products over the same input quantize it once: the first
// writes x's E4M3 rows and row scales into ctx's scratch for w's K and scale mode; the second
// runs w's product on whatever the last quantization left there (the caller keeps K, the scale
// mode and M the same, and runs nothing else that writes ctx.scratch_x() in between). Both
// return false (nothing done) where cuBLASLt has no FP8 algorithm for the shape.
bool linear_fp8_quantize_input(GpuContext& ctx, const DeviceLinear& w, const float* x, int64_t M);
bool linear_fp8_quantized(GpuContext& ctx, const DeviceLinear& w, int64_t M, float* y);
// Whether cuBLASLt has an FP8 algorithm for w's product over M rows (made and kept on first ask).
bool linear_fp8_has_plan(GpuContext& ctx, const DeviceLinear& w, int64_t M);
// The first step for the input `pro` forms from x (and pro.aux) [M, w.in]. False (nothing done)
// where the register form does not take the shape (K > 32,768, pointers not 16-byte aligned, a
// gated norm's heads not 8 · 2^k ≤ 256 values dividing K) or cuBLASLt has no FP8 algorithm.
bool linear_fp8_quantize_formed_input(GpuContext& ctx, const DeviceLinear& w, const float* x, const RowPrologue& pro,
                                      int64_t M);
// Tests and benchmarks: weights the expansion ahead (STAVE_CUDA_EXPAND_AHEAD) found ready and
// expanded on the main stream, in ctx so far ({0, 0} without the switch).
struct ExpandAheadCounts {
  int64_t hits = 0, misses = 0;
};
ExpandAheadCounts expand_ahead_counts(GpuContext& ctx);
// w's E4M3 expansion [rows, cols] into out on stream s by `kernel` (tests compare the forms).
void expand_fp8(const Fp8Source& w, uint8_t* out, cudaStream_t s, ExpandKernel kernel);
// Benchmarks: the last linear_fp8 call's GEMM (and scale epilogue) alone, on the operands it
// left in ctx's scratch (same w and M); no bias.
void linear_fp8_gemm_only(GpuContext& ctx, const DeviceLinear& w, int64_t M, float* y);

}  // namespace dev
}  // namespace stave::cuda
