// Gated DeltaNet ops: the chunked form against the per-token recurrence (the spec's oracle),
// the recurrence against a direct transcription of the spec's formula, the short convolution
// and the gated RMSNorm against direct formulas, all on random inputs.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ops/backend.h"
#include "ops/conv1d.h"
#include "ops/gated_delta_net.h"

namespace stave {
namespace {

std::vector<float> randn(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

struct GdnProblem {
  GatedDeltaDims dims;
  int64_t tokens;
  std::vector<float> qkv, g, beta, state0;
  GatedDeltaInput input() const {
    GatedDeltaInput in;
    const int64_t kd = dims.n_k_heads * dims.d_k;
    in.tokens = tokens;
    in.q = qkv.data();
    in.k = qkv.data() + kd;
    in.v = qkv.data() + 2 * kd;
    in.stride = 2 * kd + dims.n_v_heads * dims.d_v;
    in.g = g.data();
    in.beta = beta.data();
    return in;
  }
};

// Random q/k/v rows [q | k | v], gates from random a/b through gdn_gates (decays from mild to
// near-total), and a random initial state.
GdnProblem make_problem(GatedDeltaDims dims, int64_t tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  GdnProblem p{dims, tokens, {}, {}, {}, {}};
  const int64_t stride = 2 * dims.n_k_heads * dims.d_k + dims.n_v_heads * dims.d_v;
  p.qkv = randn(static_cast<size_t>(tokens * stride), rng);
  const int64_t nv = dims.n_v_heads;
  std::uniform_real_distribution<float> alog(std::log(0.5f), std::log(8.0f));
  std::vector<float> A_log(nv), dt_bias = randn(nv, rng, 0.5f);
  for (auto& x : A_log) x = alog(rng);
  const auto a = randn(static_cast<size_t>(tokens * nv), rng, 2.0f);
  const auto b = randn(static_cast<size_t>(tokens * nv), rng, 2.0f);
  p.g.resize(a.size());
  p.beta.resize(a.size());
  ref::gdn_gates(a.data(), b.data(), A_log.data(), dt_bias.data(), tokens, nv, p.g.data(), p.beta.data());
  p.state0 = randn(static_cast<size_t>(dims.state_floats()), rng, 0.3f);
  return p;
}

TEST(OpsGatedDeltaNet, ChunkedMatchesRecurrent) {
  const GatedDeltaDims shapes[] = {{2, 6, 16, 8}, {1, 1, 8, 8}, {2, 4, 32, 16}};
  for (const auto& dims : shapes)
    for (int64_t T : {1, 5, 63, 64, 65, 130, 200}) {
      SCOPED_TRACE(testing::Message() << "T=" << T << " nk=" << dims.n_k_heads << " nv=" << dims.n_v_heads);
      GdnProblem p = make_problem(dims, T, static_cast<uint32_t>(T * 7 + dims.d_k));
      const int64_t out_n = T * dims.n_v_heads * dims.d_v;
      std::vector<float> s_rec = p.state0, s_chk = p.state0, o_rec(out_n), o_chk(out_n);
      ref::gated_delta_rule_recurrent(p.dims, p.input(), s_rec.data(), o_rec.data());
      ref::gated_delta_rule_chunked(p.dims, p.input(), s_chk.data(), o_chk.data());
      EXPECT_LE(max_abs_diff(o_chk, o_rec), 2e-5f);
      EXPECT_LE(max_abs_diff(s_chk, s_rec), 2e-5f);
      // Other chunk sizes are the same computation.
      for (int64_t C : {1, 7, 16}) {
        std::vector<float> s = p.state0, o(out_n);
        ref::gated_delta_rule_chunked(p.dims, p.input(), s.data(), o.data(), C);
        EXPECT_LE(max_abs_diff(o, o_rec), 2e-5f) << "chunk " << C;
      }
    }
}

TEST(OpsGatedDeltaNet, ChunkedContinuesFromCarriedState) {
  const GatedDeltaDims dims{2, 6, 16, 8};
  GdnProblem p = make_problem(dims, 200, 99);
  const int64_t out_n = 200 * dims.n_v_heads * dims.d_v;
  std::vector<float> s_one = p.state0, o_one(out_n);
  ref::gated_delta_rule_recurrent(dims, p.input(), s_one.data(), o_one.data());
  // 130 + 70 tokens, the state carried between the calls.
  std::vector<float> s = p.state0, o(out_n);
  GatedDeltaInput first = p.input(), second = p.input();
  first.tokens = 130;
  second.tokens = 70;
  second.q += 130 * second.stride;
  second.k += 130 * second.stride;
  second.v += 130 * second.stride;
  second.g += 130 * dims.n_v_heads;
  second.beta += 130 * dims.n_v_heads;
  reference_backend().gated_delta_rule(dims, first, s.data(), o.data());
  reference_backend().gated_delta_rule(dims, second, s.data(), o.data() + 130 * dims.n_v_heads * dims.d_v);
  EXPECT_LE(max_abs_diff(o, o_one), 2e-5f);
  EXPECT_LE(max_abs_diff(s, s_one), 2e-5f);
}

// The spec's recurrence written out in double with the explicit matrix form
//   S_t = α_t (I − β_t k̂ k̂ᵀ) S_{t−1} + β_t k̂ v_tᵀ,  o_t = S_tᵀ q̂ (q̂ scaled by d_k^{-1/2}).
TEST(OpsGatedDeltaNet, RecurrentMatchesSpecFormula) {
  const GatedDeltaDims dims{2, 6, 8, 4};
  const int64_t T = 40, dk = dims.d_k, dv = dims.d_v, nv = dims.n_v_heads, r = nv / dims.n_k_heads;
  GdnProblem p = make_problem(dims, T, 5);
  const GatedDeltaInput in = p.input();
  std::vector<float> s = p.state0, o(T * nv * dv);
  ref::gated_delta_rule_recurrent(dims, in, s.data(), o.data());
  float worst = 0.0f;
  for (int64_t h = 0; h < nv; ++h) {
    std::vector<double> S(p.state0.begin() + h * dk * dv, p.state0.begin() + (h + 1) * dk * dv);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> q(dk), k(dk);
      double nq = 0, nk = 0;
      for (int64_t i = 0; i < dk; ++i) {
        q[i] = in.q[t * in.stride + (h / r) * dk + i];
        k[i] = in.k[t * in.stride + (h / r) * dk + i];
        nq += q[i] * q[i];
        nk += k[i] * k[i];
      }
      for (int64_t i = 0; i < dk; ++i) {
        q[i] /= std::sqrt(nq + 1e-6) * std::sqrt(static_cast<double>(dk));
        k[i] /= std::sqrt(nk + 1e-6);
      }
      const double alpha = std::exp(static_cast<double>(in.g[t * nv + h])), beta = in.beta[t * nv + h];
      std::vector<double> next(dk * dv);
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t j = 0; j < dv; ++j) {
          double projected = 0;  // ((I − β k kᵀ) S)_{ij}
          for (int64_t m = 0; m < dk; ++m) projected += ((i == m) - beta * k[i] * k[m]) * S[m * dv + j];
          next[i * dv + j] = alpha * projected + beta * k[i] * in.v[t * in.stride + h * dv + j];
        }
      S = next;
      for (int64_t j = 0; j < dv; ++j) {
        double acc = 0;
        for (int64_t i = 0; i < dk; ++i) acc += S[i * dv + j] * q[i];
        worst = std::max(worst, static_cast<float>(std::abs(acc - o[(t * nv + h) * dv + j])));
      }
    }
    for (int64_t i = 0; i < dk * dv; ++i)
      worst = std::max(worst, static_cast<float>(std::abs(S[i] - s[h * dk * dv + i])));
  }
  EXPECT_LE(worst, 1e-5f);
}

TEST(OpsGatedDeltaNet, GatesFollowTheSpec) {
  const float a[] = {-3.0f, 0.5f, 25.0f}, b[] = {-2.0f, 0.0f, 4.0f};
  const float A_log[] = {0.3f, -1.0f, 2.0f}, dt_bias[] = {0.1f, -0.2f, 0.0f};
  float g[3], beta[3];
  ref::gdn_gates(a, b, A_log, dt_bias, 1, 3, g, beta);
  for (int h = 0; h < 3; ++h) {
    const double x = static_cast<double>(a[h]) + dt_bias[h];
    const double sp = x > 20 ? x : std::log1p(std::exp(x));
    EXPECT_NEAR(g[h], -std::exp(static_cast<double>(A_log[h])) * sp, 1e-5 * std::abs(g[h]));
    EXPECT_NEAR(beta[h], 1.0 / (1.0 + std::exp(-static_cast<double>(b[h]))), 1e-7);
  }
}

TEST(OpsConv1d, CausalDepthwiseWithCarriedHistory) {
  std::mt19937 rng(3);
  for (int64_t K : {2, 4}) {
    const int64_t C = 10, T = 23;
    const auto x = randn(T * C, rng), w = randn(C * K, rng);
    // Direct formula with zero history.
    std::vector<float> want(T * C);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < K; ++j) {
          const int64_t s = t - (K - 1) + j;
          if (s >= 0) acc += static_cast<double>(w[c * K + j]) * x[s * C + c];
        }
        want[t * C + c] = static_cast<float>(acc / (1.0 + std::exp(-acc)));
      }
    // In pieces of 1, 2, 7 and 13 tokens (pieces shorter than the history included).
    std::vector<float> hist((K - 1) * C, 0.0f), y(T * C);
    int64_t t0 = 0;
    for (int64_t n : {1, 2, 7, 13}) {
      reference_backend().causal_conv1d_silu(x.data() + t0 * C, n, C, w.data(), K, hist.data(), y.data() + t0 * C);
      t0 += n;
    }
    ASSERT_EQ(t0, T);
    EXPECT_LE(max_abs_diff(y, want), 1e-5f) << "K=" << K;
    // The history holds the last K-1 pre-conv inputs.
    for (int64_t r = 0; r < K - 1; ++r)
      for (int64_t c = 0; c < C; ++c) EXPECT_EQ(hist[r * C + c], x[(T - (K - 1) + r) * C + c]);
  }
}

TEST(OpsGatedDeltaNet, GatedRmsNormPerHeadWithSiluGate) {
  std::mt19937 rng(4);
  const int64_t rows = 12, d = 16;
  const auto x = randn(rows * d, rng, 2.0f), z = randn(rows * d, rng), w = randn(d, rng);
  std::vector<float> y(rows * d);
  reference_backend().gated_rms_norm(x.data(), z.data(), rows, d, w.data(), 1e-6f, y.data());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(x[r * d + i]) * x[r * d + i];
    const double inv = 1.0 / std::sqrt(ss / d + 1e-6);
    for (int64_t i = 0; i < d; ++i) {
      const double zz = z[r * d + i];
      const double want = w[i] * x[r * d + i] * inv * zz / (1.0 + std::exp(-zz));
      EXPECT_NEAR(y[r * d + i], want, 1e-5 * (1 + std::abs(want)));
    }
  }
}

}  // namespace
}  // namespace stave
