// The fast CPU backend against its oracles: every op CpuBackend overrides is compared with the
// reference backend (the fp32/double ref:: kernels) on random shapes — odd sizes and vector
// tails, one token and many, several delta-rule chunks, GQA ratios, multi-tile attention —
// with explicit tolerances. The fast kernels accumulate in fp32 and use a polynomial exp, so
// the bounds are a few fp32 ulps scaled by the size of the values, far below what a wrong
// index, a missed tail or a broken online softmax would give (those are O(1)).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "backends/registry.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/flush_denormals.h"
#include "backends/cpu/op_kernels.h"
#include "ops/backend.h"
#include "ops/head_ops.h"
#include "ops/reference.h"

namespace stave {
namespace {

const Backend& fast() { return cpu_backend(Precision::kFast); }
const Backend& exact() { return reference_backend(); }

std::vector<float> randn(int64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

// max |a − b| / max(1, max |b|): absolute for values of order one, relative for large ones.
double scaled_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0.0, scale = 1.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return m / scale;
}

TEST(CpuBackendOps, IsTheFastBackend) {
  EXPECT_STREQ(fast().name(), "cpu");
  EXPECT_STREQ(exact().name(), "reference");
  const char* isa = cpu::op_kernels().isa;
  std::printf("[ cpu ops ] kernel table: %s\n", isa);
}

TEST(CpuBackendOps, RmsNormZeroCentered) {
  std::mt19937 rng(1);
  for (int64_t rows : {1, 3, 17, 300})
    for (int64_t dim : {1, 7, 32, 33, 256, 1000}) {
      SCOPED_TRACE(testing::Message() << rows << "x" << dim);
      const auto x = randn(rows * dim, rng, 3.0f), w = randn(dim, rng, 0.5f);
      std::vector<float> want(x.size()), got(x.size()), inplace = x;
      exact().rms_norm_zero_centered(x.data(), rows, dim, w.data(), 1e-6f, want.data());
      fast().rms_norm_zero_centered(x.data(), rows, dim, w.data(), 1e-6f, got.data());
      fast().rms_norm_zero_centered(inplace.data(), rows, dim, w.data(), 1e-6f, inplace.data());
      EXPECT_LE(scaled_diff(got, want), 2e-6);
      EXPECT_LE(scaled_diff(inplace, want), 2e-6);
    }
}

// The residual add, the query/gate split and the fused add + RMSNorm: run over the team in blocks
// (sizes below reach the parallel path), the same bits as the reference's add and copies, and the
// fused op the same bits as the fast add followed by the fast norm.
TEST(CpuBackendOps, ResidualAddSplitQueryGateAndAddNorm) {
  std::mt19937 rng(11);
  for (int64_t rows : {1, 5, 300})
    for (int64_t dim : {7, 256, 1000}) {
      SCOPED_TRACE(testing::Message() << rows << "x" << dim);
      const int64_t n = rows * dim;
      const auto h0 = randn(n, rng, 3.0f), y = randn(n, rng, 2.0f), w = randn(dim, rng, 0.5f);
      std::vector<float> he = h0, hf = h0;
      exact().add_inplace(he.data(), y.data(), n);
      fast().add_inplace(hf.data(), y.data(), n);
      EXPECT_EQ(hf, he);

      const auto qg = randn(2 * n, rng);
      std::vector<float> qe(n), ge(n), qf(n), gf(n);
      exact().split_query_gate(qg.data(), rows, dim, qe.data(), ge.data());
      fast().split_query_gate(qg.data(), rows, dim, qf.data(), gf.data());
      EXPECT_EQ(qf, qe);
      EXPECT_EQ(gf, ge);

      std::vector<float> h_fused = h0, x_fused(n), h_apart = h0, x_apart(n), h_ref = h0, x_ref(n);
      fast().add_rms_norm_zero_centered(h_fused.data(), y.data(), rows, dim, w.data(), 1e-6f, x_fused.data());
      fast().add_inplace(h_apart.data(), y.data(), n);
      fast().rms_norm_zero_centered(h_apart.data(), rows, dim, w.data(), 1e-6f, x_apart.data());
      exact().add_rms_norm_zero_centered(h_ref.data(), y.data(), rows, dim, w.data(), 1e-6f, x_ref.data());
      EXPECT_EQ(h_fused, h_ref);
      EXPECT_EQ(x_fused, x_apart);
      EXPECT_LE(scaled_diff(x_fused, x_ref), 2e-6);
    }
}

TEST(CpuBackendOps, GatedRmsNorm) {
  std::mt19937 rng(2);
  for (int64_t rows : {1, 6, 50, 777})
    for (int64_t dim : {1, 5, 16, 128, 129}) {
      SCOPED_TRACE(testing::Message() << rows << "x" << dim);
      const auto x = randn(rows * dim, rng), z = randn(rows * dim, rng, 4.0f), w = randn(dim, rng);
      std::vector<float> want(x.size()), got(x.size());
      exact().gated_rms_norm(x.data(), z.data(), rows, dim, w.data(), 1e-6f, want.data());
      fast().gated_rms_norm(x.data(), z.data(), rows, dim, w.data(), 1e-6f, got.data());
      EXPECT_LE(scaled_diff(got, want), 3e-6);
    }
}

TEST(CpuBackendOps, SiluMulAndSigmoidMul) {
  std::mt19937 rng(3);
  for (int64_t n : {1, 7, 8, 9, 100, 16385, 70001}) {
    SCOPED_TRACE(n);
    auto gate = randn(n, rng, 6.0f);
    gate[0] = -120.0f;  // far tails: exp clamps, the results stay finite and ~0 / ~x
    if (n > 1) gate[1] = 95.0f;
    const auto up = randn(n, rng, 2.0f);
    std::vector<float> want(n), got(n);
    exact().silu_mul(gate.data(), up.data(), n, want.data());
    fast().silu_mul(gate.data(), up.data(), n, got.data());
    EXPECT_LE(scaled_diff(got, want), 3e-6);
    auto got_alias = gate;  // y may alias gate
    fast().silu_mul(got_alias.data(), up.data(), n, got_alias.data());
    EXPECT_LE(scaled_diff(got_alias, want), 3e-6);

    std::vector<float> xs = up, xf = up;
    exact().sigmoid_mul(xs.data(), gate.data(), n);
    fast().sigmoid_mul(xf.data(), gate.data(), n);
    EXPECT_LE(scaled_diff(xf, xs), 3e-6);
  }
}

// Fast ops flush fp32 denormals on every thread they run on (backends/cpu/flush_denormals.h: on
// Intel cores a denormal operand costs a microcode assist per vector operation) and give the
// calling thread its floating-point state back, so exact ops after them keep IEEE denormals.
#if defined(__x86_64__) || defined(__i386__)
TEST(CpuBackendOps, FastOpsFlushDenormalsAndRestoreTheCaller) {
  if (!cpu::flush_denormals_enabled()) GTEST_SKIP() << "STAVE_CPU_DENORMALS=keep";
  const float tiny = 1e-40f;  // a denormal
  ASSERT_EQ(std::fpclassify(tiny), FP_SUBNORMAL);
  // The control bits (rounding, masks, FTZ, DAZ); bits 0-5 are sticky exception flags, which the
  // exact op below may raise (a denormal operand) and which say nothing about the mode.
  const auto control = [] { return _mm_getcsr() & ~0x3Fu; };
  const unsigned before = control();
  for (int64_t n : {9, 70001}) {  // the calling thread alone, and a parallel team
    SCOPED_TRACE(n);
    const std::vector<float> gate(static_cast<size_t>(n), 40.0f);  // sigmoid(40) is 1.0f
    std::vector<float> xf(static_cast<size_t>(n), tiny), xe = xf;
    fast().sigmoid_mul(xf.data(), gate.data(), n);
    EXPECT_EQ(control(), before) << "the caller's MXCSR control bits changed";
    exact().sigmoid_mul(xe.data(), gate.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(xf[i], 0.0f) << "fast, element " << i << ": the denormal was not flushed";
      ASSERT_EQ(xe[i], tiny) << "exact, element " << i << ": IEEE keeps the denormal";
    }
  }
}
#endif

TEST(CpuBackendOps, GeluTanh) {
  std::mt19937 rng(4);
  for (int64_t n : {1, 13, 4099, 40000}) {
    auto x = randn(n, rng, 5.0f);
    std::vector<float> want = x, got = x;
    exact().gelu_tanh_inplace(want.data(), n);
    fast().gelu_tanh_inplace(got.data(), n);
    EXPECT_LE(scaled_diff(got, want), 3e-6) << n;
  }
}

TEST(CpuBackendOps, CausalConv1dSiluWholeAndInPieces) {
  std::mt19937 rng(5);
  for (int64_t kernel : {1, 2, 4})
    for (int64_t channels : {1, 7, 33, 200})
      for (int64_t tokens : {1, 2, 3, 5, 70, 600}) {
        SCOPED_TRACE(testing::Message() << "K=" << kernel << " C=" << channels << " T=" << tokens);
        const auto x = randn(tokens * channels, rng), w = randn(channels * kernel, rng, 0.7f);
        const auto hist0 = randn((kernel - 1) * channels, rng);
        std::vector<float> h_ref = hist0, h_fast = hist0, y_ref(x.size()), y_fast(x.size());
        exact().causal_conv1d_silu(x.data(), tokens, channels, w.data(), kernel, h_ref.data(), y_ref.data());
        fast().causal_conv1d_silu(x.data(), tokens, channels, w.data(), kernel, h_fast.data(), y_fast.data());
        EXPECT_LE(scaled_diff(y_fast, y_ref), 3e-6);
        EXPECT_EQ(h_fast, h_ref);  // the history is copied, not computed
        // Fed one token, then the rest: the carried history joins the pieces.
        std::vector<float> h_p = hist0, y_p(x.size());
        fast().causal_conv1d_silu(x.data(), 1, channels, w.data(), kernel, h_p.data(), y_p.data());
        fast().causal_conv1d_silu(x.data() + channels, tokens - 1, channels, w.data(), kernel, h_p.data(),
                                  y_p.data() + channels);
        EXPECT_LE(scaled_diff(y_p, y_ref), 3e-6);
        EXPECT_EQ(h_p, h_ref);
      }
}

TEST(CpuBackendOps, GdnGates) {
  std::mt19937 rng(6);
  for (int64_t tokens : {1, 9, 300})
    for (int64_t nv : {1, 6, 32}) {
      const auto a = randn(tokens * nv, rng, 8.0f), b = randn(tokens * nv, rng, 8.0f);
      const auto A_log = randn(nv, rng), dt = randn(nv, rng);
      std::vector<float> g0(a.size()), b0(a.size()), g1(a.size()), b1(a.size());
      exact().gdn_gates(a.data(), b.data(), A_log.data(), dt.data(), tokens, nv, g0.data(), b0.data());
      fast().gdn_gates(a.data(), b.data(), A_log.data(), dt.data(), tokens, nv, g1.data(), b1.data());
      EXPECT_LE(scaled_diff(g1, g0), 2e-6);
      EXPECT_LE(scaled_diff(b1, b0), 2e-6);
    }
}

struct DeltaProblem {
  GatedDeltaDims dims;
  int64_t tokens = 0;
  std::vector<float> qkv, g, beta, state0;
  GatedDeltaInput input() const {
    const int64_t kd = dims.n_k_heads * dims.d_k;
    GatedDeltaInput in;
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

// Gates from random a/b through the reference gdn_gates (decays from mild to near-total).
DeltaProblem delta_problem(GatedDeltaDims dims, int64_t tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  DeltaProblem p;
  p.dims = dims;
  p.tokens = tokens;
  const int64_t stride = 2 * dims.n_k_heads * dims.d_k + dims.n_v_heads * dims.d_v;
  p.qkv = randn(tokens * stride, rng);
  const int64_t nv = dims.n_v_heads;
  std::uniform_real_distribution<float> alog(std::log(0.5f), std::log(8.0f));
  std::vector<float> A_log(static_cast<size_t>(nv));
  for (auto& x : A_log) x = alog(rng);
  const auto dt = randn(nv, rng, 0.5f), a = randn(tokens * nv, rng, 2.0f), b = randn(tokens * nv, rng, 2.0f);
  p.g.resize(a.size());
  p.beta.resize(a.size());
  ref::gdn_gates(a.data(), b.data(), A_log.data(), dt.data(), tokens, nv, p.g.data(), p.beta.data());
  p.state0 = randn(dims.state_floats(), rng, 0.3f);
  return p;
}

const GatedDeltaDims kDeltaShapes[] = {
    {1, 1, 8, 8}, {2, 6, 16, 16}, {2, 4, 32, 16}, {1, 3, 13, 7}, {4, 16, 64, 48}};

TEST(CpuBackendOps, GatedDeltaRuleChunked) {
  for (const auto& dims : kDeltaShapes)
    for (int64_t T : {1, 2, 5, 63, 64, 65, 130, 257}) {
      SCOPED_TRACE(testing::Message() << "T=" << T << " nk=" << dims.n_k_heads << " nv=" << dims.n_v_heads
                                      << " dk=" << dims.d_k << " dv=" << dims.d_v);
      const DeltaProblem p = delta_problem(dims, T, static_cast<uint32_t>(T * 31 + dims.d_k));
      const int64_t out_n = T * dims.n_v_heads * dims.d_v;
      std::vector<float> s0 = p.state0, s1 = p.state0, o0(out_n), o1(out_n);
      exact().gated_delta_rule(p.dims, p.input(), s0.data(), o0.data());
      fast().gated_delta_rule(p.dims, p.input(), s1.data(), o1.data());
      // The exact rule is fp32 in torch's op order (docs/numerics.md: cumsum, exp of decay
      // differences, MKL-ordered triangular solve), no longer double: both sides now carry fp32
      // rounding through up to 4 chunks, measured up to 2.6e-5 of the largest value.
      EXPECT_LE(scaled_diff(o1, o0), 5e-5);
      EXPECT_LE(scaled_diff(s1, s0), 5e-5);
    }
}

TEST(CpuBackendOps, GatedDeltaRuleRecurrent) {
  for (const auto& dims : kDeltaShapes)
    for (int64_t T : {1, 3, 40}) {
      SCOPED_TRACE(testing::Message() << "T=" << T << " nv=" << dims.n_v_heads << " dk=" << dims.d_k);
      const DeltaProblem p = delta_problem(dims, T, static_cast<uint32_t>(T * 17 + dims.d_v));
      const int64_t out_n = T * dims.n_v_heads * dims.d_v;
      std::vector<float> s0 = p.state0, s1 = p.state0, o0(out_n), o1(out_n);
      exact().gated_delta_rule_recurrent(p.dims, p.input(), s0.data(), o0.data());
      fast().gated_delta_rule_recurrent(p.dims, p.input(), s1.data(), o1.data());
      EXPECT_LE(scaled_diff(o1, o0), 2e-5);
      EXPECT_LE(scaled_diff(s1, s0), 2e-5);
    }
}

// The chunked fast kernel fed in pieces (prefill chunks of the backbone) equals one call.
TEST(CpuBackendOps, GatedDeltaRuleInPieces) {
  const GatedDeltaDims dims{2, 4, 32, 16};
  const DeltaProblem p = delta_problem(dims, 150, 99);
  const int64_t row = dims.n_v_heads * dims.d_v;
  std::vector<float> s0 = p.state0, s1 = p.state0, o0(150 * row), o1(150 * row);
  exact().gated_delta_rule(dims, p.input(), s0.data(), o0.data());
  for (int64_t t0 = 0; t0 < 150; t0 += 70) {
    GatedDeltaInput in = p.input();
    in.tokens = std::min<int64_t>(70, 150 - t0);
    in.q += t0 * in.stride;
    in.k += t0 * in.stride;
    in.v += t0 * in.stride;
    in.g += t0 * dims.n_v_heads;
    in.beta += t0 * dims.n_v_heads;
    fast().gated_delta_rule(dims, in, s1.data(), o1.data() + t0 * row);
  }
  EXPECT_LE(scaled_diff(o1, o0), 2e-5);
  EXPECT_LE(scaled_diff(s1, s0), 2e-5);
}

TEST(CpuBackendOps, Rope) {
  std::mt19937 rng(7);
  for (int64_t tokens : {1, 5, 600})
    for (int64_t heads : {1, 3})
      for (auto [head_dim, rotary] : {std::pair<int64_t, int64_t>{8, 4}, {64, 64}, {256, 64}, {30, 10}}) {
        const int64_t half = rotary / 2;
        auto x = randn(tokens * heads * head_dim, rng);
        std::vector<float> cos(static_cast<size_t>(tokens * half)), sin(cos.size());
        const auto phi = randn(tokens * half, rng, 3.0f);
        for (size_t i = 0; i < cos.size(); ++i) cos[i] = std::cos(phi[i]), sin[i] = std::sin(phi[i]);
        std::vector<float> want = x, got = x;
        exact().apply_rope(want.data(), tokens, heads, head_dim, rotary, cos.data(), sin.data());
        fast().apply_rope(got.data(), tokens, heads, head_dim, rotary, cos.data(), sin.data());
        EXPECT_LE(scaled_diff(got, want), 1e-6);
      }
}

struct AttentionCase {
  int64_t nq, nkv, d, tokens, q_pos0;
};

TEST(CpuBackendOps, AttentionCausal) {
  const AttentionCase cases[] = {
      {1, 1, 8, 1, 0},    {4, 2, 32, 1, 0},    {4, 2, 32, 5, 0},    {8, 2, 33, 31, 0},  {6, 3, 16, 32, 0},
      {6, 3, 16, 33, 0},  {16, 4, 64, 100, 0}, {4, 1, 128, 70, 0},  {4, 2, 32, 40, 17}, {2, 2, 24, 1, 300},
      {8, 2, 32, 300, 0}, {4, 4, 7, 129, 64},  {16, 2, 256, 65, 0},
  };
  std::mt19937 rng(8);
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::Message() << "nq=" << c.nq << " nkv=" << c.nkv << " d=" << c.d << " T=" << c.tokens
                                    << " p0=" << c.q_pos0);
    AttentionShape s;
    s.n_q_heads = c.nq;
    s.n_kv_heads = c.nkv;
    s.head_dim = c.d;
    s.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    const int64_t keys = c.q_pos0 + c.tokens;
    // Scaled so some rows are peaked (large scores) and some flat.
    const auto q = randn(c.tokens * c.nq * c.d, rng, 2.0f);
    const auto k = randn(keys * c.nkv * c.d, rng, 1.5f), v = randn(keys * c.nkv * c.d, rng);
    std::vector<float> want(q.size()), got(q.size());
    exact().attention_causal(s, q.data(), c.tokens, c.q_pos0, k.data(), v.data(), want.data());
    fast().attention_causal(s, q.data(), c.tokens, c.q_pos0, k.data(), v.data(), got.data());
    EXPECT_LE(scaled_diff(got, want), 1e-5);
  }
}

// Many tokens: several key tiles and query blocks on every thread, against the reference.
TEST(CpuBackendOps, AttentionCausalLong) {
  std::mt19937 rng(9);
  AttentionShape s{8, 2, 64, 0.125f};
  const int64_t T = 1000;
  const auto q = randn(T * 8 * 64, rng), k = randn(T * 2 * 64, rng), v = randn(T * 2 * 64, rng);
  std::vector<float> want(q.size()), got(q.size());
  exact().attention_causal(s, q.data(), T, 0, k.data(), v.data(), want.data());
  fast().attention_causal(s, q.data(), T, 0, k.data(), v.data(), got.data());
  EXPECT_LE(scaled_diff(got, want), 1e-5);
}

// The vision tower's layout: rows [q | k | v] of 3E floats, output rows of E.
TEST(CpuBackendOps, AttentionDenseStrided) {
  std::mt19937 rng(10);
  for (auto [heads, d, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 8, 1}, {2, 16, 7}, {4, 32, 64},
                             {3, 20, 100}, {16, 72, 260}}) {
    SCOPED_TRACE(testing::Message() << heads << " heads of " << d << ", " << n << " rows");
    const int64_t E = heads * d;
    const auto qkv = randn(n * 3 * E, rng, 1.5f);
    AttentionShape s{heads, heads, d, 1.0f / std::sqrt(static_cast<float>(d))};
    std::vector<float> want(static_cast<size_t>(n * E)), got(want.size());
    exact().attention_dense(s, qkv.data(), 3 * E, n, qkv.data() + E, qkv.data() + 2 * E, 3 * E, n, want.data(), E);
    fast().attention_dense(s, qkv.data(), 3 * E, n, qkv.data() + E, qkv.data() + 2 * E, 3 * E, n, got.data(), E);
    EXPECT_LE(scaled_diff(got, want), 1e-5);
  }
  // Fewer queries than keys, GQA.
  AttentionShape s{6, 2, 16, 0.25f};
  const auto q = randn(3 * 96, rng), kv = randn(50 * 2 * 32, rng);
  std::vector<float> want(3 * 96), got(3 * 96);
  exact().attention_dense(s, q.data(), 96, 3, kv.data(), kv.data() + 32, 64, 50, want.data(), 96);
  fast().attention_dense(s, q.data(), 96, 3, kv.data(), kv.data() + 32, 64, 50, got.data(), 96);
  EXPECT_LE(scaled_diff(got, want), 1e-5);
}

TEST(CpuBackendOps, MatmulNt) {
  std::mt19937 rng(11);
  for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {3, 17, 5}, {40, 64, 33}, {129, 96, 70}}) {
    const auto x = randn(M * K, rng), w = randn(N * K, rng, 0.2f), b = randn(N, rng);
    std::vector<float> want(static_cast<size_t>(M * N)), got(want.size()), nobias(want.size());
    exact().matmul_nt(x.data(), M, K, w.data(), N, b.data(), want.data());
    fast().matmul_nt(x.data(), M, K, w.data(), N, b.data(), got.data());
    EXPECT_LE(scaled_diff(got, want), 1e-5) << M << "x" << K << "x" << N;
    fast().matmul_nt(x.data(), M, K, w.data(), N, nullptr, nobias.data());
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) nobias[m * N + n] += b[n];
    EXPECT_LE(scaled_diff(nobias, want), 1e-5);
  }
}

// Every kernel table this CPU can run (not only the dispatched one) agrees with the reference.
TEST(CpuBackendOps, EveryRunnableIsaTable) {
  std::vector<const cpu::OpKernels*> tables = {&cpu::op_kernels_generic()};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) tables.push_back(&cpu::op_kernels_avx2());
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    tables.push_back(&cpu::op_kernels_avx512());
  std::mt19937 rng(12);
  const GatedDeltaDims dims{2, 4, 32, 24};
  const DeltaProblem p = delta_problem(dims, 100, 5);
  std::vector<float> s_ref = p.state0, o_ref(100 * 4 * 24);
  ref::gated_delta_rule_chunked(dims, p.input(), s_ref.data(), o_ref.data());
  AttentionShape as{4, 2, 40, 0.15f};
  const auto q = randn(90 * 4 * 40, rng), k = randn(90 * 2 * 40, rng), v = randn(90 * 2 * 40, rng);
  std::vector<float> a_ref(q.size());
  ref::attention_causal(as, q.data(), 90, 0, k.data(), v.data(), a_ref.data());
  const auto x = randn(5 * 77, rng), w = randn(77, rng);
  std::vector<float> n_ref(x.size());
  ref::rms_norm_zero_centered(x.data(), 5, 77, w.data(), 1e-6f, n_ref.data());
  for (const cpu::OpKernels* t : tables) {
    SCOPED_TRACE(t->isa);
    std::vector<float> s = p.state0, o(o_ref.size());
    std::vector<float> scratch(cpu::gated_delta_scratch_floats(dims, kGatedDeltaChunk));
    for (int64_t h = 0; h < dims.n_v_heads; ++h)
      t->gated_delta_head(dims, p.input(), h, kGatedDeltaChunk, s.data() + h * 32 * 24, o.data(), scratch.data());
    EXPECT_LE(scaled_diff(o, o_ref), 2e-5);
    EXPECT_LE(scaled_diff(s, s_ref), 2e-5);

    std::vector<float> a(q.size());
    std::vector<const float*> qr;
    std::vector<float*> orow;
    std::vector<int64_t> nk;
    for (int64_t tok = 0; tok < 90; ++tok)
      for (int64_t h = 0; h < 4; ++h) {
        qr.push_back(q.data() + (tok * 4 + h) * 40);
        orow.push_back(a.data() + (tok * 4 + h) * 40);
        nk.push_back(tok + 1);
      }
    for (int64_t kvh = 0; kvh < 2; ++kvh) {
      // Rows of kv head kvh: q heads 2·kvh and 2·kvh + 1 of every token.
      std::vector<const float*> qh;
      std::vector<float*> oh;
      std::vector<int64_t> nh;
      for (size_t r = 0; r < qr.size(); ++r)
        if (static_cast<int64_t>(r % 4) / 2 == kvh) qh.push_back(qr[r]), oh.push_back(orow[r]), nh.push_back(nk[r]);
      cpu::AttentionRows rows;
      rows.rows = static_cast<int64_t>(qh.size());
      rows.q_rows = qh.data();
      rows.out_rows = oh.data();
      rows.n_keys = nh.data();
      rows.k = k.data() + kvh * 40;
      rows.v = v.data() + kvh * 40;
      rows.kv_stride = 80;
      rows.head_dim = 40;
      rows.scale = 0.15f;
      std::vector<float> sc(cpu::attention_scratch_floats(rows.rows, 40));
      t->attention_rows(rows, sc.data());
    }
    EXPECT_LE(scaled_diff(a, a_ref), 1e-5);

    std::vector<float> n(x.size());
    t->rms_norm_rows(x.data(), 5, 77, w.data(), 1.0f, 1e-6f, n.data());
    EXPECT_LE(scaled_diff(n, n_ref), 2e-6);
  }
}

}  // namespace
}  // namespace stave
