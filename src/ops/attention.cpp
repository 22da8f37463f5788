#include "ops/attention.h"

#include "ops/reference.h"
#include "ops/torch_cpu_order.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/reference.h"

namespace stave::ref {

// HF eager attention in fp32 with torch's CPU orders: scores = (q·k as an MKL FMA chain) · scale,
// softmax(dim=-1, float32) as ATen's vectorized last-dim softmax (max; exp(x − max); a 16-lane
// sum, lanes folded pairwise; times 1/sum), then weights @ v as an FMA chain over the keys.
// Masked keys contribute exact zeros in the reference, so they are simply left out here.
void attention_causal(const AttentionShape& shape, const float* q, int64_t tokens, int64_t q_pos0, const float* k,
                      const float* v, float* out) {
  const int64_t nq = shape.n_q_heads, nkv = shape.n_kv_heads, d = shape.head_dim;
  const int64_t group = nq / nkv;
  const int64_t kv_stride = nkv * d;
  const float scale = shape.scale;
  const int64_t work = tokens * (q_pos0 + tokens) * nq * d;
#pragma omp parallel if (work >= (int64_t{1} << 22))
  {
    std::vector<float> p;
#pragma omp for collapse(2) schedule(dynamic, 4)
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t h = 0; h < nq; ++h) {
        const float* qr = q + (t * nq + h) * d;
        const int64_t kvh = h / group;
        const int64_t n_keys = q_pos0 + t + 1;
        p.resize(static_cast<size_t>(n_keys));
        for (int64_t j = 0; j < n_keys; ++j)
          p[j] = torch_order::gemm_dot(qr, 1, k + j * kv_stride + kvh * d, 1, d) * scale;
        softmax_inplace(p.data(), n_keys);
        float* o = out + (t * nq + h) * d;
        for (int64_t i = 0; i < d; ++i) o[i] = torch_order::gemm_dot(p.data(), 1, v + kvh * d + i, kv_stride, n_keys);
      }
  }
}

// HF eager attention without a mask (the vision tower), in the same torch CPU orders as
// attention_causal: scores as MKL FMA chains times the scale, ATen's softmax, weights @ v as
// FMA chains over the keys.
void attention_dense(const AttentionShape& shape, const float* q, int64_t q_stride, int64_t q_rows, const float* k,
                     const float* v, int64_t kv_stride, int64_t kv_rows, float* out, int64_t out_stride) {
  const int64_t H = shape.n_q_heads, D = shape.head_dim, group = shape.n_q_heads / shape.n_kv_heads;
#pragma omp parallel for collapse(2) schedule(static) if (q_rows * kv_rows * H * D > (1 << 16))
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t qi = 0; qi < q_rows; ++qi) {
      std::vector<float> p(static_cast<size_t>(kv_rows));
      const float* qr = q + qi * q_stride + h * D;
      const int64_t kvh = h / group;
      for (int64_t kj = 0; kj < kv_rows; ++kj)
        p[kj] = torch_order::gemm_dot(qr, 1, k + kj * kv_stride + kvh * D, 1, D) * shape.scale;
      softmax_inplace(p.data(), kv_rows);
      float* o = out + qi * out_stride + h * D;
      for (int64_t d = 0; d < D; ++d)
        o[d] = torch_order::gemm_dot(p.data(), 1, v + kvh * D + d, kv_stride, kv_rows);
    }
  }
}

}  // namespace stave::ref
