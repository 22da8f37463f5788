// fp32 building blocks of the joint schema head (Clef release code) that
// src/ops/reference.h does not already have. Plain loops: these are the oracle path.
// Row-major everywhere: a [rows, dim] matrix is rows consecutive vectors of dim floats.
#pragma once
#include <cstdint>

namespace stave::ref {

// y[M, N] = x[M, K] · Wᵀ (+ bias) for an fp32 weight W [N, K] (PyTorch's nn.Linear layout).
// fp32 products, fp32 accumulation in 8 interleaved partial sums. `y` must not alias `x`.
void matmul_nt(const float* x, int64_t M, int64_t K, const float* w, int64_t N, const float* bias, float* y);

// x ← GELU(x), exact erf form (nn.GELU() and activation="gelu").
void gelu_erf_inplace(float* x, int64_t n);

// out[dim] = mean of rows [begin, end) of x (sum in double, then divided). Needs end > begin.
void mean_rows(const float* x, int64_t dim, int64_t begin, int64_t end, float* out);

// F.normalize(x, dim=-1, eps): x / max(‖x‖₂, eps), in place.
void l2_normalize_inplace(float* x, int64_t n, float eps);

// ⟨a, b⟩ with a double accumulator.
float dot(const float* a, const float* b, int64_t n);

}  // namespace stave::ref
