// Where fast precision's FP8 products take their E4M3 weights from (linear_fp8.h): expanded
// from the packed MXFP4 per product (N·K bytes written and read again each time; the weights stay
// at 4.25 bits), or expanded once at upload and kept beside the packed weight (N·K more bytes
// resident, no per-product pass; the same bytes, so the same products).
#pragma once
#include <cstdint>

namespace stave::cuda {

enum class Fp8Weights { kExpandPerProduct, kResident };

// A backend's budget for kept E4M3 copies (Fp8Weights::kResident): weights are kept in upload
// order while the copies' total stays within limit_bytes (< 0: no limit, only device memory);
// a weight whose copy would pass the limit expands per product, as without kResident (said once
// on stderr). The backend updates it under its lock as it uploads weights.
struct Fp8Cache {
  int64_t limit_bytes = -1;
  int64_t used_bytes = 0;  // the kept copies' bytes
  int64_t kept = 0;        // weights kept
  int64_t over = 0;        // weights the limit left to per-product expansion
};

// STAVE_CUDA_FP8_WEIGHTS: unset or "expand" → kExpandPerProduct, "resident" → kResident;
// anything else is an Error naming the variable.
Fp8Weights fp8_weights_from_env();

}  // namespace stave::cuda
