#include "ops/reference.h"

#include <cstring>
#include <vector>

#include "ops/torch_cpu_order.h"
#include "ops/torch_linear_order.h"
#include "formats/mxfp4.h"
#include "util/bf16.h"

namespace stave::ref {

void weight_row_f32(const LinearWeight& w, int64_t r, float* out) {
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r) * w.row_bytes();
  switch (w.format) {
    case WeightFormat::kF32: std::memcpy(out, row, static_cast<size_t>(w.in) * 4); break;
    case WeightFormat::kBF16:
      for (int64_t i = 0; i < w.in; ++i) {
        uint16_t h;
        std::memcpy(&h, row + 2 * i, 2);
        out[i] = bf16_to_f32(h);
      }
      break;
    case WeightFormat::kF16:
      for (int64_t i = 0; i < w.in; ++i) {
        uint16_t h;
        std::memcpy(&h, row + 2 * i, 2);
        out[i] = f16_to_f32(h);
      }
      break;
    case WeightFormat::kMXFP4:
      mxfp4::dequantize_row(row, w.scales + static_cast<size_t>(r) * (w.in / mxfp4::kBlock), w.in, out);
      break;
  }
}

void weight_rows_f32(const LinearWeight& w, std::span<const int32_t> ids, float* out) {
  const int64_t L = static_cast<int64_t>(ids.size());
#pragma omp parallel for schedule(static) if (L > 256)
  for (int64_t t = 0; t < L; ++t) weight_row_f32(w, ids[t], out + t * w.in);
}

void linear(const LinearWeight& w, const float* x, int64_t M, float* y) {
  const int64_t K = w.in, N = w.out;
  const float* xin = x;
  std::vector<float> xq;
  if (w.format == WeightFormat::kMXFP4 && w.quantize_input) {
    xq.resize(static_cast<size_t>(M * K));
    for (int64_t m = 0; m < M; ++m) mxfp4::qdq_row(x + m * K, K, xq.data() + m * K, w.input_scale_mode);
    xin = xq.data();
  }
  // F.linear → MKL sgemm: per output one FMA chain (blocked by 384 in k), or for a few rows MKL's
  // sixteen-lane kernel (torch_linear_order.h; which one is a property of the shape); the bias is
  // added to the finished sum.
  const bool few_rows = torch_order::linear_uses_few_rows(M, N, K);
#pragma omp parallel
  {
    std::vector<float> wrow(static_cast<size_t>(K));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      weight_row_f32(w, n, wrow.data());
      for (int64_t m = 0; m < M; ++m) {
        const float* xr = xin + m * K;
        const float acc = few_rows ? torch_order::gemm_dot_few_rows(xr, wrow.data(), K)
                                   : torch_order::gemm_dot(xr, 1, wrow.data(), 1, K);
        y[m * N + n] = w.bias ? acc + w.bias[n] : acc;
      }
    }
  }
}

// Qwen3_5RMSNorm: (x · rsqrt(x.pow(2).mean(-1) + eps)) · (1 + w), every step rounded to fp32.
void rms_norm_zero_centered(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* y) {
  std::vector<float> scale(static_cast<size_t>(dim));
  for (int64_t i = 0; i < dim; ++i) scale[i] = 1.0f + w[i];
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const float mean = torch_order::row_sum_squares(xr, dim) / static_cast<float>(dim);
    const float inv = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] * inv) * scale[i];
  }
}

// The plain RMSNorm (vision/Llama style): (x · rsqrt(mean(x²) + eps)) · w.
void rms_norm(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const float mean = torch_order::row_sum_squares(xr, dim) / static_cast<float>(dim);
    const float inv = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] * inv) * w[i];
  }
}

void conv_patch_embed(const LinearWeight& w, int64_t channels, const float* x, int64_t rows, float* y) {
  const int64_t K = w.in, taps = K / channels;
  std::vector<float> W(static_cast<size_t>(w.out * K));
  for (int64_t n = 0; n < w.out; ++n) weight_row_f32(w, n, W.data() + n * K);
#pragma omp parallel for schedule(static) if (rows * w.out * K >= (int64_t{1} << 22))
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * K;
    for (int64_t n = 0; n < w.out; ++n) {
      const float* wr = W.data() + n * K;
      float acc = 0.0f;
      for (int64_t t = 0; t < taps; ++t)
        for (int64_t c = 0; c < channels; ++c) acc = std::fma(xr[c * taps + t], wr[c * taps + t], acc);
      y[r * w.out + n] = w.bias ? acc + w.bias[n] : acc;
    }
  }
}

namespace {
// One row, outside the OpenMP region (an outlined region would not inherit the clones' ISA).
STAVE_FMA_CLONES void layer_norm_row(const float* x, int64_t dim, const float* gamma, const float* beta, float eps,
                                     float* y) {
  torch_order::aten_layer_norm_row(x, dim, gamma, beta, eps, y);
}
}  // namespace

void layer_norm(const float* x, int64_t rows, int64_t dim, const float* gamma, const float* beta, float eps, float* y) {
  // Rows are independent: threads change nothing in any row's arithmetic (the head normalises
  // all L backbone states here, 10M values at 2048 tokens of the 27B).
#pragma omp parallel for schedule(static) if (rows * dim >= (int64_t{1} << 18))
  for (int64_t r = 0; r < rows; ++r) {
    layer_norm_row(x + r * dim, dim, gamma, beta, eps, y + r * dim);
  }
}

// ATen's _vec_softmax_lastdim (AVX-512 kernel): max, exp(x − max), vec::reduce_all sum over
// 16 lanes (element j in lane j mod 16, lanes folded pairwise 8, 4, 2, 1), then x · (1 / sum).
void softmax_inplace(float* x, int64_t n) {
  if (n <= 0) return;
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  for (int64_t i = 0; i < n; ++i) x[i] = torch_order::sleef_expf(x[i] - mx);  // Vectorized<float>::exp
  const float inv = 1.0f / torch_order::lane_tree_sum(x, n);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace stave::ref
