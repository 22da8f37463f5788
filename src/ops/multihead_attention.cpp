#include "ops/multihead_attention.h"

#include <algorithm>
#include <cmath>

#include "ops/head_ops.h"
#include "ops/reference.h"
#include "stave/errors.h"

namespace stave::ref {
namespace {

void check_shape(const MultiheadAttentionWeights& w) {
  if (w.embed_dim <= 0 || w.heads <= 0 || w.embed_dim % w.heads != 0)
    throw Error(ErrorKind::kInvalidModel, "multihead attention: embed_dim " + std::to_string(w.embed_dim) +
                                              " is not divisible into " + std::to_string(w.heads) + " heads");
}

// Row block `block` (0 = q, 1 = k, 2 = v) of the packed input projection.
void project_block(const MultiheadAttentionWeights& w, int block, const float* x, int64_t rows, float* y) {
  const int64_t E = w.embed_dim;
  matmul_nt(x, rows, E, w.in_proj_weight + block * E * E, E, w.in_proj_bias + block * E, y);
}

}  // namespace

ProjectedKeyValues mha_project_key_values(const MultiheadAttentionWeights& w, const float* key, const float* value,
                                          int64_t rows) {
  check_shape(w);
  ProjectedKeyValues kv;
  kv.rows = rows;
  kv.keys.resize(static_cast<size_t>(rows * w.embed_dim));
  kv.values.resize(static_cast<size_t>(rows * w.embed_dim));
  project_block(w, 1, key, rows, kv.keys.data());
  project_block(w, 2, value, rows, kv.values.data());
  return kv;
}

void mha_context(const MultiheadAttentionWeights& w, const float* q, int64_t query_rows, const ProjectedKeyValues& kv,
                 float* context) {
  check_shape(w);
  if (kv.rows <= 0) throw Error(ErrorKind::kInternal, "multihead attention over an empty key set");
  const int64_t E = w.embed_dim, d = w.head_dim(), Nk = kv.rows;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // The joint head's field self-attention has a few rows, keys and heads: its work is far below
  // what waking the thread team costs, which on a GPU host whose cores are busy elsewhere was
  // 12–18 ms per call (the head's "decoder: self-attention" stage). Each (row, head) is computed
  // the same way on any thread, so the clause changes no value.
#pragma omp parallel if (query_rows * w.heads * Nk * d >= (int64_t{1} << 18))
  {
    std::vector<float> scores(static_cast<size_t>(Nk));
    std::vector<double> acc(static_cast<size_t>(d));
#pragma omp for collapse(2) schedule(static)
    for (int64_t i = 0; i < query_rows; ++i) {
      for (int64_t h = 0; h < w.heads; ++h) {
        const float* qi = q + i * E + h * d;
        for (int64_t j = 0; j < Nk; ++j) {
          const float* kj = kv.keys.data() + j * E + h * d;
          float dot = 0.0f;
          for (int64_t c = 0; c < d; ++c) dot += qi[c] * kj[c];
          scores[j] = dot * scale;
        }
        softmax_inplace(scores.data(), Nk);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < Nk; ++j) {
          const float* vj = kv.values.data() + j * E + h * d;
          const double p = scores[j];
          for (int64_t c = 0; c < d; ++c) acc[c] += p * vj[c];
        }
        float* ci = context + i * E + h * d;
        for (int64_t c = 0; c < d; ++c) ci[c] = static_cast<float>(acc[c]);
      }
    }
  }
}

void mha_attend(const MultiheadAttentionWeights& w, const float* query, int64_t query_rows,
                const ProjectedKeyValues& kv, float* out) {
  check_shape(w);
  const int64_t E = w.embed_dim;
  std::vector<float> q(static_cast<size_t>(query_rows * E));
  project_block(w, 0, query, query_rows, q.data());
  std::vector<float> context(static_cast<size_t>(query_rows * E));
  mha_context(w, q.data(), query_rows, kv, context.data());
  matmul_nt(context.data(), query_rows, E, w.out_proj_weight, E, w.out_proj_bias, out);
}

void multihead_attention(const MultiheadAttentionWeights& w, const float* query, int64_t query_rows, const float* key,
                         const float* value, int64_t key_rows, float* out) {
  mha_attend(w, query, query_rows, mha_project_key_values(w, key, value, key_rows), out);
}

}  // namespace stave::ref
