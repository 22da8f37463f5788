// fp32 reference implementations of the basic ops: the oracles that every fast kernel is
// tested against, and the `--precision exact` path. Plain loops; correctness over speed.
// Row-major everywhere: a [rows, dim] matrix is rows consecutive vectors of dim floats.
#pragma once
#include <cmath>
#include <cstdint>
#include <span>

#include "formats/linear_weight.h"

namespace stave::ref {

// y[M, w.out] = x[M, w.in] · Wᵀ (+ bias), fp32 accumulation. For an MXFP4 weight with
// quantize_input, each row of x is MXFP4 quantize-dequantized first (Quark W4A4).
void linear(const LinearWeight& w, const float* x, int64_t M, float* y);

// Dequantizes/widens row r of W into out[w.in].
void weight_row_f32(const LinearWeight& w, int64_t r, float* out);
// out[t] = row ids[t] of w in fp32 (weight_row_f32 for each id; the rows split over the host's
// threads for more than 256 ids): an embedding table's rows, read on the host.
void weight_rows_f32(const LinearWeight& w, std::span<const int32_t> ids, float* out);

// y = x / sqrt(mean(x²) + eps) · (1 + w)   (Qwen3.5's zero-centred RMSNorm; y may alias x)
void rms_norm_zero_centered(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* y);
// y = x / sqrt(mean(x²) + eps) · w          (plain RMSNorm)
void rms_norm(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* y);
// PyTorch LayerNorm (biased variance); gamma/beta may be null.
void layer_norm(const float* x, int64_t rows, int64_t dim, const float* gamma, const float* beta, float eps, float* y);

void softmax_inplace(float* x, int64_t n);

// nn.Conv3d with kernel = stride (the vision patch embedding) as oneDNN computes it on the
// reference machine: per output one FMA chain over the kernel taps (T, P, P) with the input
// channels innermost (channels-last), the bias added after. x rows are [channels, taps] as
// PyTorch lays them out; w is [out, channels·taps] in the same order.
void conv_patch_embed(const LinearWeight& w, int64_t channels, const float* x, int64_t rows, float* y);

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
// torch.nn.functional.softplus with beta 1, threshold 20.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace stave::ref
