#include "ops/head_ops.h"

#include "ops/torch_cpu_order.h"

#include <algorithm>
#include <cmath>

#include "ops/reference.h"

namespace stave::ref {

void matmul_nt(const float* x, int64_t M, int64_t K, const float* w, int64_t N, const float* bias, float* y) {
  constexpr int kLanes = 8;
#pragma omp parallel for collapse(2) schedule(static) if (M * N * K > (1 << 16))
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      const float* xr = x + m * K;
      const float* wr = w + n * K;
      float lanes[kLanes] = {};
      int64_t k = 0;
      for (; k + kLanes <= K; k += kLanes)
        for (int l = 0; l < kLanes; ++l) lanes[l] += xr[k + l] * wr[k + l];
      float acc = 0.0f;
      for (; k < K; ++k) acc += xr[k] * wr[k];
      for (int l = 0; l < kLanes; ++l) acc += lanes[l];
      y[m * N + n] = acc + (bias ? bias[n] : 0.0f);
    }
  }
}

// F.gelu / nn.GELU() on fp32 CPU tensors: oneDNN's eltwise_gelu_erf for more than one element
// (ATen's gelu_out_cpu routes contiguous tensors there), ATen's scalar kernel for one.
STAVE_FMA_CLONES void gelu_erf_inplace(float* x, int64_t n) {
  if (n == 1) {
    x[0] = torch_order::gelu_erf(x[0], false);
    return;
  }
  for (int64_t i = 0; i < n; ++i) x[i] = torch_order::onednn_gelu_erf(x[i]);
}

void mean_rows(const float* x, int64_t dim, int64_t begin, int64_t end, float* out) {
  const double count = static_cast<double>(end - begin);
  for (int64_t c = 0; c < dim; ++c) {
    double s = 0.0;
    for (int64_t r = begin; r < end; ++r) s += x[r * dim + c];
    out[c] = static_cast<float>(s / count);
  }
}

void l2_normalize_inplace(float* x, int64_t n, float eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float norm = std::max(static_cast<float>(std::sqrt(ss)), eps);
  for (int64_t i = 0; i < n; ++i) x[i] /= norm;
}

float dot(const float* a, const float* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(s);
}

}  // namespace stave::ref
