// Entry points of the CPU linear kernels, one set per instruction-set level (the files in
// ../avx2, ../avx512 and ../amx are compiled with that ISA's flags; generic.cpp with none).
// cpu_linear.cpp picks one at run time from active_isa(); tests call the quantizers directly.
#pragma once
#include <cstdint>
#include <vector>

#include "model/linear_weight.h"
#include "quant/mxfp4.h"

namespace stave::cpu::kern {

// A row-major activation quantized to MXFP4 for the W4A4 product, in the form the integer
// kernels consume. codes are 2·E2M1 (exact integers in [-12, 12]) in natural column order, so
// a 32-block dot with the weight's 2·E2M1 codes is an exact int32 (|Σ| ≤ 32·144 = 4608).
struct QuantizedActivations {
  int64_t rows = 0, k = 0, blocks = 0;  // blocks = k / 32
  int64_t padded_rows = 0;              // rows rounded up (AMX tiles read 32 rows at a time)
  std::vector<int8_t> codes;            // [padded_rows][k]; padding rows are zero
  // [padded_rows][blocks]: 2^(e - 2) with e the block's scale exponent. The −2 undoes the two
  // factors of 2 in (2·E2M1_x)(2·E2M1_w), so a block contributes Σ codes·codes · scale · 2^e_w.
  std::vector<float> scales;
  // [padded_rows][blocks]: 12 · Σ codes of the block. The AVX2/VNNI kernels multiply unsigned
  // weight codes (2·E2M1 + 12 ∈ [0, 24]) by signed activation codes, so they subtract this.
  std::vector<int32_t> offsets;

  void resize(int64_t m, int64_t kk, int64_t row_multiple);
};

// Quantize M rows of K values (K a multiple of 32) exactly as mxfp4::quantize_block does.
void quantize_activations_generic(const float* x, int64_t M, int64_t K, mxfp4::ScaleMode mode,
                                  int64_t row_multiple, QuantizedActivations& q);
void quantize_activations_avx2(const float* x, int64_t M, int64_t K, mxfp4::ScaleMode mode,
                               int64_t row_multiple, QuantizedActivations& q);
void quantize_activations_avx512(const float* x, int64_t M, int64_t K, mxfp4::ScaleMode mode,
                                 int64_t row_multiple, QuantizedActivations& q);

// y[M, out] = x · Wᵀ (+ bias) for every weight format. M ≥ 1, shapes already checked.
void linear_generic(const LinearWeight& w, const float* x, int64_t M, float* y);
void linear_avx2(const LinearWeight& w, const float* x, int64_t M, float* y);
void linear_avx512(const LinearWeight& w, const float* x, int64_t M, float* y);
// Handles what AMX is worth using for (W4A4 with M ≥ 16) and returns true; false otherwise
// (the caller then uses the AVX-512 kernel).
bool linear_amx(const LinearWeight& w, const float* x, int64_t M, float* y);

// 2^(b − 127) for an E8M0 byte b (byte 255, NaN in the format, gives +inf like exp2_int(128)).
const float* e8m0_table();

}  // namespace stave::cpu::kern
