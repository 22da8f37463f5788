#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/reference.h"

namespace stave::ref {

// Scores, the running max/sum and the weighted sum of values are kept in double and the output
// rounded once, so the reference stays within an fp32 rounding of exact softmax attention
// (eager HF computes a rounded fp32 softmax; both are that close to the exact value).
void attention_causal(const AttentionShape& shape, const float* q, int64_t tokens, int64_t q_pos0, const float* k,
                      const float* v, float* out) {
  const int64_t nq = shape.n_q_heads, nkv = shape.n_kv_heads, d = shape.head_dim;
  const int64_t group = nq / nkv;
  const int64_t kv_stride = nkv * d;
  // Threads only pay off past tiny problems (and cost a lot on a busy machine).
  const int64_t work = tokens * (q_pos0 + tokens) * nq * d;
#pragma omp parallel if (work >= (int64_t{1} << 22))
  {
    std::vector<double> score(kAttentionKeyTile), acc(d);
#pragma omp for collapse(2) schedule(dynamic, 4)
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t h = 0; h < nq; ++h) {
        const float* qr = q + (t * nq + h) * d;
        const int64_t kvh = h / group;
        const int64_t n_keys = q_pos0 + t + 1;
        double running_max = -std::numeric_limits<double>::infinity();
        double running_sum = 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j0 = 0; j0 < n_keys; j0 += kAttentionKeyTile) {
          const int64_t n = std::min(kAttentionKeyTile, n_keys - j0);
          double tile_max = running_max;
          for (int64_t j = 0; j < n; ++j) {
            const float* kr = k + (j0 + j) * kv_stride + kvh * d;
            double s = 0.0;
            for (int64_t i = 0; i < d; ++i) s += static_cast<double>(qr[i]) * kr[i];
            score[j] = s * shape.scale;
            tile_max = std::max(tile_max, score[j]);
          }
          // Rescale what was accumulated under the old maximum (exp(−inf) = 0 on the first tile).
          const double correction = std::exp(running_max - tile_max);
          running_sum *= correction;
          for (int64_t i = 0; i < d; ++i) acc[i] *= correction;
          for (int64_t j = 0; j < n; ++j) {
            const double p = std::exp(score[j] - tile_max);
            running_sum += p;
            const float* vr = v + (j0 + j) * kv_stride + kvh * d;
            for (int64_t i = 0; i < d; ++i) acc[i] += p * vr[i];
          }
          running_max = tile_max;
        }
        float* o = out + (t * nq + h) * d;
        for (int64_t i = 0; i < d; ++i) o[i] = static_cast<float>(acc[i] / running_sum);
      }
  }
}

void attention_dense(const AttentionShape& shape, const float* q, int64_t q_stride, int64_t q_rows, const float* k,
                     const float* v, int64_t kv_stride, int64_t kv_rows, float* out, int64_t out_stride) {
  const int64_t H = shape.n_q_heads, D = shape.head_dim, group = shape.n_q_heads / shape.n_kv_heads;
#pragma omp parallel for collapse(2) schedule(static) if (q_rows * kv_rows * H * D > (1 << 16))
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t qi = 0; qi < q_rows; ++qi) {
      std::vector<float> p(static_cast<size_t>(kv_rows));
      const float* qr = q + qi * q_stride + h * D;
      const int64_t kvh = h / group;
      for (int64_t kj = 0; kj < kv_rows; ++kj) {
        const float* kr = k + kj * kv_stride + kvh * D;
        float acc = 0.0f;
        for (int64_t d = 0; d < D; ++d) acc += qr[d] * kr[d];
        p[kj] = acc * shape.scale;
      }
      softmax_inplace(p.data(), kv_rows);
      float* o = out + qi * out_stride + h * D;
      std::fill(o, o + D, 0.0f);
      for (int64_t kj = 0; kj < kv_rows; ++kj) {
        const float* vv = v + kj * kv_stride + kvh * D;
        const float pw = p[kj];
        for (int64_t d = 0; d < D; ++d) o[d] += pw * vv[d];
      }
    }
  }
}

}  // namespace stave::ref
