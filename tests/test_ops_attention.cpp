// Tiled causal attention (online softmax over key tiles) against a naive implementation that
// builds the full score matrix, on random inputs: several lengths around the tile size, GQA
// ratios, and queries that continue a cache (q_pos0 > 0).
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ops/attention.h"
#include "ops/backend.h"

namespace stave {
namespace {

// softmax(q kᵀ·scale + causal mask) v with the whole [tokens, keys] matrix, in double.
std::vector<float> naive_attention(const AttentionShape& s, const std::vector<float>& q, int64_t tokens, int64_t pos0,
                                   const std::vector<float>& k, const std::vector<float>& v) {
  const int64_t keys = pos0 + tokens, d = s.head_dim, group = s.n_q_heads / s.n_kv_heads;
  std::vector<float> out(tokens * s.n_q_heads * d);
  for (int64_t h = 0; h < s.n_q_heads; ++h) {
    const int64_t kvh = h / group;
    std::vector<double> scores(tokens * keys);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += double(q[(t * s.n_q_heads + h) * d + i]) * k[(j * s.n_kv_heads + kvh) * d + i];
        scores[t * keys + j] = j <= pos0 + t ? dot * s.scale : -INFINITY;
      }
    for (int64_t t = 0; t < tokens; ++t) {
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < keys; ++j) mx = std::max(mx, scores[t * keys + j]);
      for (int64_t j = 0; j < keys; ++j) sum += std::exp(scores[t * keys + j] - mx);
      for (int64_t i = 0; i < d; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < keys; ++j)
          acc += std::exp(scores[t * keys + j] - mx) / sum * v[(j * s.n_kv_heads + kvh) * d + i];
        out[(t * s.n_q_heads + h) * d + i] = static_cast<float>(acc);
      }
    }
  }
  return out;
}

TEST(OpsAttention, TiledMatchesFullMatrix) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  struct Case { int64_t nq, nkv, d, tokens, pos0; };
  const Case cases[] = {{4, 2, 32, 1, 0},   {4, 2, 32, 63, 0},  {4, 2, 32, 64, 0},  {6, 2, 16, 65, 0},
                        {6, 3, 8, 200, 0},  {4, 1, 32, 30, 100}, {4, 4, 16, 1, 150}, {8, 2, 24, 70, 59}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "nq=" << c.nq << " nkv=" << c.nkv << " d=" << c.d << " T=" << c.tokens
                                    << " pos0=" << c.pos0);
    AttentionShape s{c.nq, c.nkv, c.d, 1.0f / std::sqrt(static_cast<float>(c.d))};
    const int64_t keys = c.pos0 + c.tokens;
    std::vector<float> q(c.tokens * c.nq * c.d), k(keys * c.nkv * c.d), v(keys * c.nkv * c.d);
    for (auto& x : q) x = 3.0f * nd(rng);  // peaked softmaxes exercise the running-max rescale
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    std::vector<float> out(q.size());
    reference_backend().attention_causal(s, q.data(), c.tokens, c.pos0, k.data(), v.data(), out.data());
    const auto want = naive_attention(s, q, c.tokens, c.pos0, k, v);
    float worst = 0;
    for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(out[i] - want[i]));
    // The reference rounds in fp32 in torch's order (docs/numerics.md); the oracle is float64.
    EXPECT_LE(worst, 4e-6f);
  }
}

// A query attends to exactly its causal prefix: changing a later key/value changes nothing.
TEST(OpsAttention, IgnoresFutureKeys) {
  std::mt19937 rng(12);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  AttentionShape s{2, 1, 8, 0.35f};
  const int64_t T = 90;
  std::vector<float> q(T * 2 * 8), k(T * 8), v(T * 8);
  for (auto* buf : {&q, &k, &v})
    for (auto& x : *buf) x = nd(rng);
  std::vector<float> a(q.size()), b(q.size());
  reference_backend().attention_causal(s, q.data(), T, 0, k.data(), v.data(), a.data());
  k[80 * 8 + 3] += 5.0f;
  v[80 * 8 + 1] -= 5.0f;
  reference_backend().attention_causal(s, q.data(), T, 0, k.data(), v.data(), b.data());
  for (int64_t i = 0; i < 80 * 2 * 8; ++i) ASSERT_EQ(a[i], b[i]) << i;
  EXPECT_NE(a[80 * 2 * 8], b[80 * 2 * 8]);
}

}  // namespace
}  // namespace stave
