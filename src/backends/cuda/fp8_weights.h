// Where fast precision's FP8 products take their E4M3 weights from (linear_fp8.h): expanded
// from the packed MXFP4 per product (N·K bytes written and read again each time; the weights stay
// at 4.25 bits), or expanded once at upload and kept beside the packed weight (N·K more bytes
// resident, no per-product pass; the same bytes, so the same products).
#pragma once

namespace stave::cuda {

enum class Fp8Weights { kExpandPerProduct, kResident };

// STAVE_CUDA_FP8_WEIGHTS: unset or "expand" → kExpandPerProduct, "resident" → kResident;
// anything else is an Error naming the variable.
Fp8Weights fp8_weights_from_env();

}  // namespace stave::cuda
