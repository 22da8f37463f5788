// The FP8 path's activation side (quantize_fp8.cu): rows of activations quantized bit-exactly as
// mxfp4::qdq_row and written as E4M3 with one power-of-two scale per row (the scheme is in
// linear_fp8.h), optionally formed from the element-wise op before the projection as they are
// loaded (dev::RowPrologue). Used by linear_fp8.cu; not a public header.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/device_ops.h"
#include "formats/mxfp4.h"

namespace stave::cuda {

// E2M1 · 2^d is exact in E4M3 for d in [kMinShift, kMaxShift]: the reference exponent of a row is
// its largest block exponent − kMaxShift.
constexpr int kMaxShift = 6, kMinShift = -8;

// The scale-exponent rounding of mxfp4::ScaleMode as the kernels take it (0 even, 1 floor, 2 ceil).
inline int mode_code(mxfp4::ScaleMode m) {
  return m == mxfp4::ScaleMode::kEven ? 0 : (m == mxfp4::ScaleMode::kFloor ? 1 : 2);
}

// Rows of K values (x [M, K], K % 32 == 0) into E4M3 xq [Mp, K] + 2^R_a per row in row_scale
// [Mp]; rows M … Mp − 1 are zeros with scale 1. form 0: the register form where the row fits
// 8 · 8 · 512 values and x is 16-byte aligned, else the two-pass warp form; 2: the warp form.
// staged (form 0): rows of 16,416 to 32,768 values through shared memory instead of registers
// (the same bytes; STAVE_CUDA_QUANT_ROWS).
void launch_quantize_rows_fp8(const float* x, int64_t M, int64_t Mp, int64_t K, int mode, uint8_t* xq,
                              float* row_scale, cudaStream_t s, int form = 0, bool staged = false);
// The register form with the row formed by `pro` as it is loaded (x and pro's operands [M, K]):
// true, or false with nothing launched where that form does not take the shape (K % 32 ≠ 0, K
// beyond 32,768, an operand not 16-byte aligned, a gated norm's heads not 8 · 2^k ≤ 256 values
// dividing K). staged: as launch_quantize_rows_fp8's, for the element-wise prologues (plain, SiLU
// ⊙ up, sigmoid gate).
bool launch_quantize_formed(const float* x, const dev::RowPrologue& pro, int64_t M, int64_t Mp, int64_t K, int mode,
                            uint8_t* xq, float* row_scale, cudaStream_t s, bool staged = false);
// Activation blocks so far that lay more than 14 binades below their row's largest (rounded to
// E4M3's subnormals); waits for the device.
uint64_t activation_blocks_rounded();

}  // namespace stave::cuda
