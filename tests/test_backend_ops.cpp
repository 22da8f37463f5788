// One op suite over every backend (CTranslate2's ops_test, llama.cpp's test-backend-ops): each
// op of the text model is written once here and instantiated for every backend this build
// knows — the reference kernels (cpu/exact), the vectorized CPU backend (cpu/fast) and CUDA in
// both precisions (skipped without a GPU). Inputs go into the backend's memory, outputs come
// back poisoned-first (tests/backend_ops_util.h), and are compared with the fp32 ref:: oracle
// under a tolerance per backend and precision. The packed multi-sequence delta rule and the
// decode-shaped calls (one token, keys before the queries) are covered like any other op.
#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend_ops_util.h"
#include "test_env.h"
#include "backends/registry.h"
#include "formats/mxfp4.h"
#include "ops/attention.h"
#include "ops/conv1d.h"
#include "ops/elementwise.h"
#include "ops/gated_delta_net.h"
#include "ops/reference.h"
#include "ops/rope.h"
#include "stave/errors.h"
#include "util/bf16.h"

namespace stave {
namespace {

struct BackendCase {
  std::string device;
  Precision precision;
  // Tolerances (max |Δ| / max(1, max |want|)) per kind of op.
  double elementwise, delta_rule, attention, linear;
};

// What CTest's test names show for a case (instead of its bytes).
void PrintTo(const BackendCase& c, std::ostream* os) {
  *os << c.device << (c.precision == Precision::kExact ? " exact" : " fast");
}

std::string case_name(const ::testing::TestParamInfo<BackendCase>& i) {
  return i.param.device + (i.param.precision == Precision::kExact ? "_exact" : "_fast");
}

class BackendOps : public ::testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override {
    const std::string why = backend_unavailable_reason(GetParam().device);
    if (!why.empty()) GTEST_SKIP() << why;
    backend_ = make_backend(GetParam().device, GetParam().precision);
  }
  const Backend& be() const { return *backend_; }
  test::HostOps ops() const { return test::HostOps(*backend_); }
  // The reference backend is the oracle itself: its results must be identical.
  bool is_oracle() const { return GetParam().device == "cpu" && GetParam().precision == Precision::kExact; }
  std::shared_ptr<const Backend> backend_;
};

std::vector<float> rnd(std::mt19937& rng, int64_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

double scaled_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0.0, scale = 1.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) && !(std::isnan(a[i]) && std::isnan(b[i]))) return INFINITY;
    m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return m / scale;
}

TEST_P(BackendOps, MemoryRoundTripsAndViews) {
  std::mt19937 rng(1);
  const auto v = rnd(rng, 6 * 5);
  const Tensor t = be().to_device(Tensor::host(v, {6, 5}));
  EXPECT_EQ(t.device(), be().device());
  std::vector<float> back(v.size());
  be().copy_to_host(t, back.data());
  EXPECT_EQ(back, v);
  // rows() views share memory; copy() moves rows within the backend.
  const Tensor z = be().zeros({6, 5});
  be().copy(t.rows(1, 2), z.rows(3, 2));
  const Tensor host = be().to_host(z);
  ASSERT_EQ(host.device(), Device::kCpu);
  const float* h = host.data<float>();
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c = 0; c < 5; ++c)
      EXPECT_EQ(h[r * 5 + c], (r == 3 || r == 4) ? v[static_cast<size_t>((r - 2) * 5 + c)] : 0.0f) << r << "," << c;
  EXPECT_THROW(be().copy(t, z.rows(0, 1)), Error);  // too small a destination
  EXPECT_THROW((void)t.data<int32_t>(), Error);     // wrong element type
}

// Staging buffers (page-locked and reused on CUDA): a copy to the device holds the values the
// buffer had when it was made, however soon the buffer is written again or handed out anew.
TEST_P(BackendOps, HostStagingCopiesBeforeReuse) {
  std::mt19937 rng(2);
  for (int round = 0; round < 3; ++round) {
    const int64_t rows = 1 + 700 * round, cols = 257;
    const auto v = rnd(rng, rows * cols);
    std::vector<float> back(v.size());
    Tensor staged = be().host_staging({rows, cols});
    ASSERT_EQ(staged.device(), Device::kCpu);
    ASSERT_EQ(staged.numel(), rows * cols);
    std::memcpy(staged.data<float>(), v.data(), v.size() * sizeof(float));
    const Tensor t = be().to_device(staged);
    if (be().device() != Device::kCpu) {
      std::fill_n(staged.data<float>(), staged.numel(), -7.0f);  // written again at once
      staged = Tensor();  // and back in the pool: the next round may take it
    }
    be().copy_to_host(t, back.data());
    EXPECT_EQ(back, v) << "round " << round;
  }
}

TEST_P(BackendOps, NormsAndElementwise) {
  std::mt19937 rng(3);
  const auto o = ops();
  const double tol = GetParam().elementwise;
  for (auto [rows, dim] : {std::pair<int64_t, int64_t>{1, 8}, {33, 128}, {7, 5120}}) {
    SCOPED_TRACE(::testing::Message() << rows << "x" << dim);
    const int64_t n = rows * dim;
    const auto x = rnd(rng, n, -3, 3), z = rnd(rng, n, -3, 3), w = rnd(rng, dim);
    std::vector<float> want(n), got(n);
    ref::rms_norm_zero_centered(x.data(), rows, dim, w.data(), 1e-6f, want.data());
    o.rms_norm_zero_centered(x.data(), rows, dim, w.data(), 1e-6f, got.data());
    EXPECT_LE(scaled_diff(got, want), tol) << "rms_norm_zero_centered";
    ref::gated_rms_norm(x.data(), z.data(), rows, dim, w.data(), 1e-6f, want.data());
    o.gated_rms_norm(x.data(), z.data(), rows, dim, w.data(), 1e-6f, got.data());
    EXPECT_LE(scaled_diff(got, want), tol) << "gated_rms_norm";
    ref::silu_mul(x.data(), z.data(), n, want.data());
    o.silu_mul(x.data(), z.data(), n, got.data());
    EXPECT_LE(scaled_diff(got, want), tol) << "silu_mul";
    want = x;
    got = x;
    ref::sigmoid_mul(want.data(), z.data(), n);
    o.sigmoid_mul(got.data(), z.data(), n);
    EXPECT_LE(scaled_diff(got, want), tol) << "sigmoid_mul";
    // The residual add is one fp32 rounding per element everywhere: identical results.
    want = x;
    got = x;
    for (int64_t i = 0; i < n; ++i) want[i] += z[i];
    o.add_inplace(got.data(), z.data(), n);
    EXPECT_EQ(got, want) << "add_inplace";
  }
}

TEST_P(BackendOps, SplitQueryGate) {
  std::mt19937 rng(4);
  const int64_t rows = 13, d = 24;
  const auto qg = rnd(rng, rows * 2 * d);
  std::vector<float> q(rows * d), g(rows * d);
  ops().split_query_gate(qg.data(), rows, d, q.data(), g.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < d; ++i) {
      ASSERT_EQ(q[r * d + i], qg[r * 2 * d + i]);
      ASSERT_EQ(g[r * d + i], qg[r * 2 * d + d + i]);
    }
}

// The rows of an embedding table, widened to fp32 bit for bit as ref::weight_row_f32 reads them:
// BF16, F16 and F32 tables, a width the 16-byte form takes (40) and one it does not (36),
// repeated ids, the first and last row, and no ids at all.
TEST_P(BackendOps, EmbeddingRowsAreTheTableRows) {
  std::mt19937 rng(12);
  const int64_t vocab = 50;
  for (const WeightFormat format : {WeightFormat::kBF16, WeightFormat::kF16, WeightFormat::kF32})
    for (const int64_t dim : {40, 36}) {
      SCOPED_TRACE(::testing::Message() << "format " << static_cast<int>(format) << ", dim " << dim);
      const std::vector<float> values = rnd(rng, vocab * dim);
      std::vector<uint16_t> half(values.size());
      for (size_t i = 0; i < values.size(); ++i)
        half[i] = format == WeightFormat::kBF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
      LinearWeight table;
      table.name = "embed";
      table.out = vocab;
      table.in = dim;
      table.format = format;
      table.data = format == WeightFormat::kF32 ? static_cast<const void*>(values.data()) : half.data();
      be().prepare_embedding(table);
      for (const std::vector<int32_t>& ids :
           {std::vector<int32_t>{3, 0, 49, 3, 17, 17, 8}, std::vector<int32_t>{49}, std::vector<int32_t>{}}) {
        const int64_t L = static_cast<int64_t>(ids.size());
        const Tensor h = be().empty({L, dim});
        be().embedding_rows(table, ids, h);
        std::vector<float> got(static_cast<size_t>(L * dim), -7.0f), want(got.size());
        be().copy_to_host(h, got.data());
        for (int64_t t = 0; t < L; ++t) ref::weight_row_f32(table, ids[t], want.data() + t * dim);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << L << " ids";
      }
    }
}

// Calls of 2 and 1 tokens are shorter than the history; 40 and 100 cross several runs of 16
// tokens (CUDA's 4-tap kernel); a 3-tap conv takes the general form.
TEST_P(BackendOps, Conv1dCarriesHistoryAcrossCalls) {
  std::mt19937 rng(5);
  const auto o = ops();
  const int64_t channels = 70;
  for (const int64_t kernel : {4, 3}) {
    const auto w = rnd(rng, channels * kernel);
    std::vector<float> h_ref = rnd(rng, (kernel - 1) * channels), h_got = h_ref;
    for (int64_t tokens : {5, 2, 1, 40, 100}) {
      const auto x = rnd(rng, tokens * channels);
      std::vector<float> want(tokens * channels), got(tokens * channels);
      ref::causal_conv1d_silu(x.data(), tokens, channels, w.data(), kernel, h_ref.data(), want.data());
      o.causal_conv1d_silu(x.data(), tokens, channels, w.data(), kernel, h_got.data(), got.data());
      EXPECT_LE(scaled_diff(got, want), GetParam().elementwise) << "kernel " << kernel << ", tokens " << tokens;
      EXPECT_EQ(h_got, h_ref) << "kernel " << kernel << ", history after " << tokens << " tokens";
    }
  }
}

TEST_P(BackendOps, GdnGates) {
  std::mt19937 rng(6);
  const int64_t tokens = 45, nv = 12;
  const auto a = rnd(rng, tokens * nv, -30, 30), b = rnd(rng, tokens * nv, -5, 5);
  const auto A_log = rnd(rng, nv), dt = rnd(rng, nv);
  std::vector<float> g(tokens * nv), beta(tokens * nv), gg(tokens * nv), gb(tokens * nv);
  ref::gdn_gates(a.data(), b.data(), A_log.data(), dt.data(), tokens, nv, g.data(), beta.data());
  ops().gdn_gates(a.data(), b.data(), A_log.data(), dt.data(), tokens, nv, gg.data(), gb.data());
  EXPECT_LE(scaled_diff(gg, g), GetParam().elementwise);
  EXPECT_LE(scaled_diff(gb, beta), GetParam().elementwise);
}

// q, k, v rows of `tokens` tokens in one [tokens, stride] layout, as the model's conv output.
struct DeltaCase {
  GatedDeltaDims dims;
  int64_t tokens = 0;
  std::vector<float> row, g, beta;
  GatedDeltaInput in;
  DeltaCase(std::mt19937& rng, GatedDeltaDims d, int64_t T) : dims(d), tokens(T) {
    const int64_t stride = 2 * d.n_k_heads * d.d_k + d.n_v_heads * d.d_v;
    row = rnd(rng, T * stride);
    g = rnd(rng, T * d.n_v_heads, -2.0f, 0.0f);
    beta = rnd(rng, T * d.n_v_heads, 0.0f, 1.0f);
    in.tokens = T;
    in.q = row.data();
    in.k = row.data() + d.n_k_heads * d.d_k;
    in.v = row.data() + 2 * d.n_k_heads * d.d_k;
    in.stride = stride;
    in.g = g.data();
    in.beta = beta.data();
  }
};

TEST_P(BackendOps, GatedDeltaRuleBothForms) {
  std::mt19937 rng(7);
  const auto o = ops();
  for (GatedDeltaDims dims : {GatedDeltaDims{1, 1, 16, 16}, GatedDeltaDims{2, 4, 32, 40}, GatedDeltaDims{1, 3, 24, 8},
                              GatedDeltaDims{2, 6, 128, 128}})
    for (int64_t tokens : {1, 9, 70, 130})
      for (auto form : {test::HostOps::DeltaForm::kChunked, test::HostOps::DeltaForm::kRecurrent}) {
        const bool chunked = form == test::HostOps::DeltaForm::kChunked;
        SCOPED_TRACE(::testing::Message() << "dk " << dims.d_k << " dv " << dims.d_v << " tokens " << tokens
                                          << (chunked ? " chunked" : " recurrent"));
        DeltaCase c(rng, dims, tokens);
        std::vector<float> s_ref = rnd(rng, dims.state_floats(), -0.5f, 0.5f), s_got = s_ref;
        std::vector<float> want(tokens * dims.n_v_heads * dims.d_v), got(want.size());
        if (chunked)
          ref::gated_delta_rule_chunked(dims, c.in, s_ref.data(), want.data());
        else
          ref::gated_delta_rule_recurrent(dims, c.in, s_ref.data(), want.data());
        o.gated_delta_rule(form, dims, c.in, c.row, {}, s_got.data(), got.data());
        EXPECT_LE(scaled_diff(got, want), GetParam().delta_rule);
        EXPECT_LE(scaled_diff(s_got, s_ref), GetParam().delta_rule);
      }
}

// Steep gates (g in [-8, -2]): within a chunk the decays e^γ fall far below the fp32 normal range,
// where the fast CPU backend flushes denormals; the results still match the reference.
TEST_P(BackendOps, GatedDeltaRuleSteepGates) {
  std::mt19937 rng(17);
  const GatedDeltaDims dims{2, 6, 128, 128};
  for (auto form : {test::HostOps::DeltaForm::kChunked, test::HostOps::DeltaForm::kRecurrent}) {
    const bool chunked = form == test::HostOps::DeltaForm::kChunked;
    SCOPED_TRACE(chunked ? "chunked" : "recurrent");
    DeltaCase c(rng, dims, 130);
    c.g = rnd(rng, 130 * dims.n_v_heads, -8.0f, -2.0f);
    c.in.g = c.g.data();
    std::vector<float> s_ref = rnd(rng, dims.state_floats(), -0.5f, 0.5f), s_got = s_ref;
    std::vector<float> want(130 * dims.n_v_heads * dims.d_v), got(want.size());
    if (chunked)
      ref::gated_delta_rule_chunked(dims, c.in, s_ref.data(), want.data());
    else
      ref::gated_delta_rule_recurrent(dims, c.in, s_ref.data(), want.data());
    ops().gated_delta_rule(form, dims, c.in, c.row, {}, s_got.data(), got.data());
    EXPECT_LE(scaled_diff(got, want), GetParam().delta_rule);
    EXPECT_LE(scaled_diff(s_got, s_ref), GetParam().delta_rule);
  }
}

// Several sequences in one call, each with its own state: equal to each sequence alone (one
// token by the recurrence, more by the chunked form, as the model calls them).
void expect_packed_sequences_stay_apart(const test::HostOps& o, double tol, std::mt19937& rng, GatedDeltaDims dims,
                                        const std::vector<int64_t>& lengths) {
  std::vector<int64_t> starts{0};
  for (int64_t L : lengths) starts.push_back(starts.back() + L);
  DeltaCase all(rng, dims, starts.back());
  const int64_t S = dims.state_floats(), n_seq = static_cast<int64_t>(lengths.size());
  std::vector<float> states = rnd(rng, n_seq * S, -0.5f, 0.5f), s_ref = states;
  std::vector<float> want(all.tokens * dims.n_v_heads * dims.d_v), got(want.size());
  for (int64_t b = 0; b < n_seq; ++b) {
    const int64_t r0 = starts[b], n = lengths[b];
    if (n == 0) continue;
    GatedDeltaInput one = all.in;
    one.tokens = n;
    one.q += r0 * one.stride;
    one.k += r0 * one.stride;
    one.v += r0 * one.stride;
    one.g += r0 * dims.n_v_heads;
    one.beta += r0 * dims.n_v_heads;
    float* out = want.data() + r0 * dims.n_v_heads * dims.d_v;
    if (n == 1)
      ref::gated_delta_rule_recurrent(dims, one, s_ref.data() + b * S, out);
    else
      ref::gated_delta_rule_chunked(dims, one, s_ref.data() + b * S, out);
  }
  o.gated_delta_rule(test::HostOps::DeltaForm::kChunked, dims, all.in, all.row, starts, states.data(), got.data());
  EXPECT_LE(scaled_diff(got, want), tol);
  EXPECT_LE(scaled_diff(states, s_ref), tol);
}

TEST_P(BackendOps, GatedDeltaRulePackedSequencesStayApart) {
  std::mt19937 rng(8);
  expect_packed_sequences_stay_apart(ops(), GetParam().delta_rule, rng, GatedDeltaDims{2, 4, 32, 40}, {5, 1, 0, 70, 64});
}

// The model's head dim (128, n_v > n_k): CUDA fast runs its tensor-core chunk kernels here —
// sequences of one token, one shorter than a chunk, exactly one chunk, and several chunks with
// a partial last one, side by side.
TEST_P(BackendOps, GatedDeltaRulePackedSequencesAtHeadDim128) {
  std::mt19937 rng(10);
  expect_packed_sequences_stay_apart(ops(), GetParam().delta_rule, rng, GatedDeltaDims{2, 6, 128, 128},
                                     {5, 1, 0, 130, 64, 33});
}

// CUDA fast's chunk form with split operands (the default; STAVE_CUDA_DELTA=chunk-split: BF16
// hi + lo pairs, three products each): near fp32 (~50× tighter than the bound of the plain BF16
// form, STAVE_CUDA_DELTA=chunk-bf16) on the model's head dim, single and packed sequences and
// steep gates; and clearly closer than the plain form on the same inputs, so a split that
// silently fell back to one BF16 product fails here.
TEST_P(BackendOps, GatedDeltaRuleSplitOperands) {
  if (GetParam().device != "cuda" || GetParam().precision != Precision::kFast)
    GTEST_SKIP() << "the split-operand chunk form is CUDA fast precision's";
  constexpr double kSplitTol = 1e-4;
  const GatedDeltaDims dims{2, 6, 128, 128};
  std::mt19937 rng(23);
  for (int64_t tokens : {9, 70, 130, 300})
    for (float g_lo : {-2.0f, -8.0f}) {
      SCOPED_TRACE(::testing::Message() << "tokens " << tokens << " gates from " << g_lo);
      DeltaCase c(rng, dims, tokens);
      c.g = rnd(rng, tokens * dims.n_v_heads, g_lo, g_lo == -8.0f ? -2.0f : 0.0f);
      c.in.g = c.g.data();
      const std::vector<float> s0 = rnd(rng, dims.state_floats(), -0.5f, 0.5f);
      std::vector<float> s_ref = s0, want(tokens * dims.n_v_heads * dims.d_v);
      ref::gated_delta_rule_chunked(dims, c.in, s_ref.data(), want.data());
      // Plain BF16 operands and split operands (the default).
      const char* forms[] = {"chunk-bf16", "chunk-split"};
      double err[2];
      for (int f = 0; f < 2; ++f) {
        const test::ScopedEnv e("STAVE_CUDA_DELTA", forms[f]);
        std::vector<float> s_got = s0, got(want.size());
        ops().gated_delta_rule(test::HostOps::DeltaForm::kChunked, dims, c.in, c.row, {}, s_got.data(), got.data());
        err[f] = std::max(scaled_diff(got, want), scaled_diff(s_got, s_ref));
        RecordProperty(std::string(forms[f]) + "_" + std::to_string(tokens) + (g_lo < -2.0f ? "_steep" : ""),
                       std::to_string(err[f]));
      }
      EXPECT_LE(err[1], kSplitTol) << "plain BF16 form: " << err[0];
      EXPECT_LT(err[1] * 5, err[0]) << "split " << err[1] << " is not clearly closer than plain BF16 " << err[0];
    }
  // Packed sequences: up to 1.2e-4 measured on an H100 (2026-12-06; single sequences above
  // ≤ 2e-5, the plain form ~1e-3), so twice the single-sequence bound here.
  const test::ScopedEnv e("STAVE_CUDA_DELTA", "chunk-split");
  std::mt19937 packed_rng(29);
  expect_packed_sequences_stay_apart(ops(), 2 * kSplitTol, packed_rng, dims, {5, 1, 0, 130, 64, 33});
}

TEST_P(BackendOps, Rope) {
  std::mt19937 rng(9);
  const int64_t tokens = 19, heads = 3, d = 64, rot = 32;
  const auto cos = rnd(rng, tokens * rot / 2), sin = rnd(rng, tokens * rot / 2);
  std::vector<float> want = rnd(rng, tokens * heads * d), got = want;
  ref::apply_rope(want.data(), tokens, heads, d, rot, cos.data(), sin.data());
  ops().apply_rope(got.data(), tokens, heads, d, rot, cos.data(), sin.data());
  EXPECT_LE(scaled_diff(got, want), GetParam().elementwise);
}

// The fused residual add + norm against its composition: the sum is one fp32 rounding per
// element everywhere (identical h), the norm within the element-wise tolerance; in exact
// precision the fused op equals this backend's own add_inplace + rms_norm_zero_centered bit for bit.
TEST_P(BackendOps, AddRmsNormIsTheAddThenTheNorm) {
  std::mt19937 rng(21);
  const auto o = ops();
  for (auto [rows, dim] : {std::pair<int64_t, int64_t>{1, 8}, {3, 5}, {33, 128}, {7, 5120}, {4, 5121}, {2, 1030}}) {
    SCOPED_TRACE(::testing::Message() << rows << "x" << dim);
    const int64_t n = rows * dim;
    const auto h0 = rnd(rng, n, -3, 3), y = rnd(rng, n, -3, 3), w = rnd(rng, dim);
    std::vector<float> h_want = h0, x_want(n);
    for (int64_t i = 0; i < n; ++i) h_want[i] += y[i];
    ref::rms_norm_zero_centered(h_want.data(), rows, dim, w.data(), 1e-6f, x_want.data());
    std::vector<float> h_got = h0, x_got(n);
    o.add_rms_norm_zero_centered(h_got.data(), y.data(), rows, dim, w.data(), 1e-6f, x_got.data());
    EXPECT_EQ(h_got, h_want) << "the residual sum";
    EXPECT_LE(scaled_diff(x_got, x_want), GetParam().elementwise) << "the norm";
    // The plain norm on the same odd shapes, in place (the final norm's call).
    const Tensor X = be().to_device(Tensor::host(h_want)), W = be().to_device(Tensor::host(w));
    be().rms_norm_zero_centered(X.data<float>(), rows, dim, W.data<float>(), 1e-6f, X.data<float>());
    std::vector<float> inplace(static_cast<size_t>(n));
    be().copy_to_host(X, inplace.data());
    EXPECT_LE(scaled_diff(inplace, x_want), GetParam().elementwise) << "rms_norm_zero_centered in place";
    if (GetParam().precision == Precision::kExact) {
      std::vector<float> h_own = h0, x_own(n);
      o.add_inplace(h_own.data(), y.data(), n);
      o.rms_norm_zero_centered(h_own.data(), rows, dim, w.data(), 1e-6f, x_own.data());
      EXPECT_EQ(x_got, x_own) << "exact precision: the fused op is the composition, bit for bit";
    }
  }
}

// The attention's query path (split [q | gate], per-head norm, RoPE) and key path (norm + RoPE
// in place) against the reference composition; partial and odd rotary widths, odd head dims.
TEST_P(BackendOps, HeadNormRopeIsSplitNormRope) {
  std::mt19937 rng(22);
  const auto o = ops();
  struct Shape {
    int64_t tokens, heads, d, rot;
  };
  for (const Shape sh : {Shape{19, 3, 64, 32}, Shape{7, 5, 256, 64}, Shape{1, 24, 256, 64}, Shape{5, 2, 40, 20},
                         Shape{3, 3, 33, 16}, Shape{4, 1, 24, 24}}) {
    SCOPED_TRACE(::testing::Message() << sh.tokens << " tokens x " << sh.heads << " heads of " << sh.d << ", rotary "
                                      << sh.rot);
    const int64_t rows = sh.tokens * sh.heads, n = rows * sh.d, half = sh.rot / 2;
    const auto w = rnd(rng, sh.d), cos = rnd(rng, sh.tokens * half), sin = rnd(rng, sh.tokens * half);
    for (bool gated : {true, false}) {
      SCOPED_TRACE(gated ? "with the gate" : "in place");
      const auto x = rnd(rng, gated ? 2 * n : n, -3, 3);
      std::vector<float> want(n), gate_want(gated ? n : 0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < sh.d; ++i) {
          want[r * sh.d + i] = x[r * (gated ? 2 : 1) * sh.d + i];
          if (gated) gate_want[r * sh.d + i] = x[r * 2 * sh.d + sh.d + i];
        }
      ref::rms_norm_zero_centered(want.data(), rows, sh.d, w.data(), 1e-6f, want.data());
      ref::apply_rope(want.data(), sh.tokens, sh.heads, sh.d, sh.rot, cos.data(), sin.data());
      std::vector<float> got(n), gate_got(gated ? n : 0);
      o.head_norm_rope(x.data(), sh.tokens, sh.heads, sh.d, w.data(), 1e-6f, sh.rot, cos.data(), sin.data(),
                       got.data(), gated ? gate_got.data() : nullptr);
      EXPECT_LE(scaled_diff(got, want), GetParam().elementwise);
      EXPECT_EQ(gate_got, gate_want);
      if (GetParam().precision == Precision::kExact) {
        std::vector<float> own(n), gate_own(gated ? n : 0);
        if (gated) {
          o.split_query_gate(x.data(), rows, sh.d, own.data(), gate_own.data());
        } else {
          own = x;
        }
        o.rms_norm_zero_centered(own.data(), rows, sh.d, w.data(), 1e-6f, own.data());
        o.apply_rope(own.data(), sh.tokens, sh.heads, sh.d, sh.rot, cos.data(), sin.data());
        EXPECT_EQ(got, own) << "exact precision: the fused op is the composition, bit for bit";
      }
    }
  }
}

// Sizes that are not a multiple of 4 and pointers off 16-byte alignment (the vectorized
// kernels' scalar tails).
TEST_P(BackendOps, ElementwiseOddSizesAndOffsets) {
  std::mt19937 rng(23);
  const double tol = GetParam().elementwise;
  for (int64_t n : {1, 3, 7, 4099}) {
    for (int64_t offset : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << n << " values at offset " << offset);
      const auto a = rnd(rng, n + offset, -4, 4), b = rnd(rng, n + offset, -4, 4);
      const Tensor A = be().to_device(Tensor::host(a)), B = be().to_device(Tensor::host(b));
      const Tensor Y = be().empty({n + offset});
      float* pa = A.data<float>() + offset;
      const float* pb = B.data<float>() + offset;
      std::vector<float> want(n), got(n + offset);
      ref::silu_mul(a.data() + offset, b.data() + offset, n, want.data());
      be().silu_mul(pa, pb, n, Y.data<float>() + offset);
      be().copy_to_host(Y, got.data());
      EXPECT_LE(scaled_diff(std::vector<float>(got.begin() + offset, got.end()), want), tol) << "silu_mul";
      want.assign(a.begin() + offset, a.end());
      for (int64_t i = 0; i < n; ++i) want[i] += b[offset + i];
      be().add_inplace(pa, pb, n);
      be().copy_to_host(A, got.data());
      EXPECT_EQ(std::vector<float>(got.begin() + offset, got.end()), want) << "add_inplace";
      ref::sigmoid_mul(want.data(), b.data() + offset, n);
      be().sigmoid_mul(pa, pb, n);
      be().copy_to_host(A, got.data());
      EXPECT_LE(scaled_diff(std::vector<float>(got.begin() + offset, got.end()), want), tol) << "sigmoid_mul";
    }
  }
}

// Prefill shapes and decode shapes (one query after many keys), GQA ratios, head dims.
TEST_P(BackendOps, AttentionCausalPrefillAndDecode) {
  std::mt19937 rng(10);
  const auto o = ops();
  for (AttentionShape s : {AttentionShape{4, 2, 64, 0.125f}, AttentionShape{6, 1, 256, 0.0625f},
                           AttentionShape{3, 3, 18, 0.25f}, AttentionShape{8, 2, 128, 0.0884f}})
    for (auto [tokens, pos0] : {std::pair<int64_t, int64_t>{1, 0}, {37, 0}, {20, 45}, {1, 200}, {130, 3}}) {
      SCOPED_TRACE(::testing::Message() << "heads " << s.n_q_heads << "/" << s.n_kv_heads << " d " << s.head_dim
                                        << " tokens " << tokens << " pos0 " << pos0);
      const int64_t keys = pos0 + tokens;
      const auto q = rnd(rng, tokens * s.n_q_heads * s.head_dim, -2, 2);
      const auto k = rnd(rng, keys * s.n_kv_heads * s.head_dim, -2, 2);
      const auto v = rnd(rng, keys * s.n_kv_heads * s.head_dim);
      std::vector<float> want(q.size()), got(q.size());
      ref::attention_causal(s, q.data(), tokens, pos0, k.data(), v.data(), want.data());
      o.attention_causal(s, q.data(), tokens, pos0, k.data(), v.data(), got.data());
      EXPECT_LE(scaled_diff(got, want), GetParam().attention);
    }
}

// A linear weight in host memory, as a mapped checkpoint holds it.
struct HostWeight {
  std::vector<uint8_t> bytes, scales;
  std::vector<float> bias;
  LinearWeight w;
};

HostWeight make_weight(std::mt19937& rng, WeightFormat f, int64_t out, int64_t in, bool w4a4, bool bias) {
  HostWeight h;
  h.w.name = "test";
  h.w.out = out;
  h.w.in = in;
  h.w.format = f;
  h.w.quantize_input = w4a4;
  if (f == WeightFormat::kMXFP4) {
    h.bytes.resize(out * in / 2);
    h.scales.resize(out * in / 32);
    for (auto& b : h.bytes) b = static_cast<uint8_t>(rng());
    for (auto& s : h.scales) s = static_cast<uint8_t>(std::uniform_int_distribution<int>(118, 130)(rng));
    h.w.scales = h.scales.data();
  } else if (f == WeightFormat::kBF16) {
    const auto v = rnd(rng, out * in, -0.1f, 0.1f);
    h.bytes.resize(out * in * 2);
    for (int64_t i = 0; i < out * in; ++i) {
      const uint16_t b = f32_to_bf16(v[i]);
      std::memcpy(&h.bytes[2 * i], &b, 2);
    }
  } else {
    const auto v = rnd(rng, out * in, -0.1f, 0.1f);
    h.bytes.resize(out * in * 4);
    std::memcpy(h.bytes.data(), v.data(), h.bytes.size());
  }
  h.w.data = h.bytes.data();
  if (bias) {
    h.bias = rnd(rng, out);
    h.w.bias = h.bias.data();
  }
  return h;
}

// Products over one input equal separate linear calls bit for bit, whatever path each weight
// takes: CUDA fast quantizes the input once for the FP8 weights of one K and scale mode (N 128
// then 64), and again after a narrow N (BF16 path), a BF16 weight or another scale mode. M = 3
// takes CUDA's small-M kernel.
TEST_P(BackendOps, LinearSharedInputEqualsLinear) {
  std::mt19937 rng(21);
  const int64_t K = 256;
  const auto be = make_backend(GetParam().device, GetParam().precision);
  std::vector<HostWeight> hs;
  hs.push_back(make_weight(rng, WeightFormat::kMXFP4, 128, K, true, false));
  hs.push_back(make_weight(rng, WeightFormat::kMXFP4, 64, K, true, true));
  hs.push_back(make_weight(rng, WeightFormat::kMXFP4, 40, K, true, false));
  hs.push_back(make_weight(rng, WeightFormat::kBF16, 64, K, false, false));
  hs.push_back(make_weight(rng, WeightFormat::kMXFP4, 96, K, true, false));
  hs.back().w.input_scale_mode = mxfp4::ScaleMode::kFloor;
  hs.push_back(make_weight(rng, WeightFormat::kMXFP4, 48, K, true, false));
  std::vector<const LinearWeight*> ws;
  for (const HostWeight& h : hs) ws.push_back(&h.w);
  const test::HostOps o(*be);
  for (const int64_t M : {int64_t{3}, int64_t{70}}) {
    SCOPED_TRACE(::testing::Message() << "M " << M);
    const auto x = rnd(rng, M * K, -2.0f, 2.0f);
    std::vector<std::vector<float>> got;
    o.linear_shared_input(ws, x.data(), M, got);
    for (size_t i = 0; i < hs.size(); ++i) {
      std::vector<float> want(static_cast<size_t>(M * hs[i].w.out));
      o.linear(hs[i].w, x.data(), M, want.data());
      EXPECT_EQ(got[i], want) << "weight " << i;
    }
  }
}

// The residual add and the norm before the products over it equal add_rms_norm_zero_centered (or
// rms_norm_zero_centered) followed by linear_shared_input, h and every product bit for bit (CUDA
// fast forms the norm inside the first product's FP8 quantization). Two weight sets: all FP8
// (the norm is never written on CUDA), and one with a BF16 weight between (it reads the norm).
TEST_P(BackendOps, AddRmsNormLinearSharedEqualsComposition) {
  std::mt19937 rng(25);
  const auto be = make_backend(GetParam().device, GetParam().precision);
  const test::HostOps o(*be);
  for (const int64_t K : {int64_t{256}, int64_t{5120}}) {
    std::vector<HostWeight> hs;
    hs.push_back(make_weight(rng, WeightFormat::kMXFP4, 64, K, true, false));
    hs.push_back(make_weight(rng, WeightFormat::kMXFP4, 48, K, true, true));
    hs.push_back(make_weight(rng, WeightFormat::kBF16, 32, K, false, false));
    hs.push_back(make_weight(rng, WeightFormat::kMXFP4, 32, K, true, false));
    const auto nw = rnd(rng, K, -0.5f, 0.5f);
    for (const bool mixed : {false, true})
      for (const bool add : {true, false})
        for (const int64_t M : {int64_t{3}, int64_t{37}}) {
          SCOPED_TRACE(::testing::Message() << "K " << K << " mixed " << mixed << " add " << add << " M " << M);
          std::vector<const LinearWeight*> ws{&hs[0].w, &hs[1].w};
          if (mixed) ws.insert(ws.end(), {&hs[2].w, &hs[3].w});
          const auto h0 = rnd(rng, M * K, -3.0f, 3.0f), y = rnd(rng, M * K, -1.0f, 1.0f);
          std::vector<float> h_want = h0, h_got = h0, x(static_cast<size_t>(M * K));
          if (add)
            o.add_rms_norm_zero_centered(h_want.data(), y.data(), M, K, nw.data(), 1e-6f, x.data());
          else
            o.rms_norm_zero_centered(h_want.data(), M, K, nw.data(), 1e-6f, x.data());
          std::vector<std::vector<float>> want, got;
          o.linear_shared_input(ws, x.data(), M, want);
          o.add_rms_norm_linear_shared(h_got.data(), add ? y.data() : nullptr, M, nw.data(), 1e-6f, ws, got);
          EXPECT_EQ(h_got, h_want);
          for (size_t i = 0; i < ws.size(); ++i) EXPECT_EQ(got[i], want[i]) << "weight " << i;
        }
  }
}

// SwiGLU's down projection equals silu_mul followed by linear bit for bit (CUDA fast forms the
// product inside its FP8 input quantization; elsewhere it is that composition).
TEST_P(BackendOps, SiluMulLinearEqualsComposition) {
  std::mt19937 rng(22);
  const auto be = make_backend(GetParam().device, GetParam().precision);
  const test::HostOps o(*be);
  for (const WeightFormat fmt : {WeightFormat::kMXFP4, WeightFormat::kBF16}) {
    const HostWeight h = make_weight(rng, fmt, 64, 256, fmt == WeightFormat::kMXFP4, true);
    for (const int64_t M : {int64_t{2}, int64_t{37}}) {
      SCOPED_TRACE(::testing::Message() << "format " << static_cast<int>(fmt) << " M " << M);
      const auto g = rnd(rng, M * 256, -6.0f, 6.0f), u = rnd(rng, M * 256, -3.0f, 3.0f);
      std::vector<float> product(g.size()), want(static_cast<size_t>(M * 64)), got(want.size());
      o.silu_mul(g.data(), u.data(), M * 256, product.data());
      o.linear(h.w, product.data(), M, want.data());
      o.silu_mul_linear(h.w, g.data(), u.data(), M, got.data());
      EXPECT_EQ(got, want);
    }
  }
}

// The attention's output gate and the Gated DeltaNet's gated RMSNorm before their projections:
// the fused ops give the composition's bits on every device (CUDA's fast FP8 path forms the
// row inside the quantization). 96-value heads are not a power of two of 8-value groups: the
// fused CUDA form refuses them and the composition runs.
TEST_P(BackendOps, SigmoidMulLinearEqualsComposition) {
  std::mt19937 rng(23);
  const auto be = make_backend(GetParam().device, GetParam().precision);
  const test::HostOps o(*be);
  for (const WeightFormat fmt : {WeightFormat::kMXFP4, WeightFormat::kBF16}) {
    const HostWeight h = make_weight(rng, fmt, 64, 512, fmt == WeightFormat::kMXFP4, true);
    for (const int64_t M : {int64_t{2}, int64_t{37}}) {
      SCOPED_TRACE(::testing::Message() << "format " << static_cast<int>(fmt) << " M " << M);
      auto x = rnd(rng, M * 512, -4.0f, 4.0f);
      const auto g = rnd(rng, M * 512, -6.0f, 6.0f);
      std::vector<float> want(static_cast<size_t>(M * 64)), got(want.size());
      o.sigmoid_mul_linear(h.w, x.data(), g.data(), M, got.data());
      o.sigmoid_mul(x.data(), g.data(), M * 512);
      o.linear(h.w, x.data(), M, want.data());
      EXPECT_EQ(got, want);
    }
  }
}

TEST_P(BackendOps, GatedRmsNormLinearEqualsComposition) {
  std::mt19937 rng(24);
  const auto be = make_backend(GetParam().device, GetParam().precision);
  const test::HostOps o(*be);
  for (const int64_t dim : {int64_t{128}, int64_t{64}, int64_t{96}}) {
    const int64_t k = dim == 96 ? 288 : 384;  // whole heads of dim, k % 32 == 0
    const HostWeight h = make_weight(rng, WeightFormat::kMXFP4, 48, k, true, false);
    const auto nw = rnd(rng, dim, 0.5f, 1.5f);
    for (const int64_t M : {int64_t{3}, int64_t{37}}) {
      SCOPED_TRACE(::testing::Message() << "dim " << dim << " M " << M);
      const auto x = rnd(rng, M * k, -3.0f, 3.0f), z = rnd(rng, M * k, -4.0f, 4.0f);
      std::vector<float> normed(static_cast<size_t>(M * k)), want(static_cast<size_t>(M * 48)), got(want.size());
      o.gated_rms_norm(x.data(), z.data(), M * k / dim, dim, nw.data(), 1e-6f, normed.data());
      o.linear(h.w, normed.data(), M, want.data());
      o.gated_rms_norm_linear(h.w, x.data(), z.data(), dim, nw.data(), 1e-6f, M, got.data());
      EXPECT_EQ(got, want);
    }
  }
}

TEST_P(BackendOps, LinearEveryFormat) {
  std::mt19937 rng(11);
  struct Case {
    WeightFormat f;
    bool w4a4;
  };
  for (const Case c : {Case{WeightFormat::kMXFP4, true}, Case{WeightFormat::kMXFP4, false},
                       Case{WeightFormat::kBF16, false}, Case{WeightFormat::kF32, false}})
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 64, 64}, {17, 96, 160}, {130, 200, 512}})
      for (bool bias : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "format " << static_cast<int>(c.f) << " w4a4 " << c.w4a4 << " M " << M
                                          << " N " << N << " K " << K << " bias " << bias);
        // A fresh backend per weight: a device backend keeps weights resident by address, and
        // these test weights are freed and reallocated (often at the same address).
        const auto fresh = make_backend(GetParam().device, GetParam().precision);
        const HostWeight h = make_weight(rng, c.f, N, K, c.w4a4, bias);
        const auto x = rnd(rng, M * K, -2.0f, 2.0f);
        std::vector<float> want(M * N), got(M * N);
        ref::linear(h.w, x.data(), M, want.data());
        test::HostOps(*fresh).linear(h.w, x.data(), M, got.data());
        EXPECT_LE(scaled_diff(got, want), GetParam().linear);
      }
  // MXFP4 W4A4 where CUDA fast precision takes its FP8 path (N, K multiples of 16): ragged M
  // (padded to 16 rows there) and a Clef shape (5120 -> 1024, 64 tokens).
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 128, 256}, {7, 128, 256}, {100, 128, 256},
                         {513, 128, 256}, {64, 1024, 5120}}) {
    SCOPED_TRACE(::testing::Message() << "MXFP4 W4A4 M " << M << " N " << N << " K " << K);
    const auto fresh = make_backend(GetParam().device, GetParam().precision);
    const HostWeight h = make_weight(rng, WeightFormat::kMXFP4, N, K, true, M % 2 == 1);
    const auto x = rnd(rng, M * K, -2.0f, 2.0f);
    std::vector<float> want(M * N), got(M * N);
    ref::linear(h.w, x.data(), M, want.data());
    test::HostOps(*fresh).linear(h.w, x.data(), M, got.data());
    EXPECT_LE(scaled_diff(got, want), GetParam().linear);
  }
}

// Tolerances: the reference backend is the oracle (identical); the fast CPU kernels accumulate
// in fp32 with a polynomial exp; CUDA exact accumulates in fp64 (the delta rule's chunked form
// differs from its recurrence by the oracle's own rounding), CUDA fast in fp32 on tensor cores.
// CUDA fast attention of ≥ 16 queries runs on BF16 tensor cores (attention_flash_bf16.cu): q, k,
// v and p rounded to bf16 (relative error ≤ u = 2⁻⁹ each), fp32 sums. Here |q|, |k| ≤ 2, so a
// score's error has rms scale·√(d·E[q²]E[k²]·2/3)·u ≈ 1.1·u ≈ 2e-3 (scale = 1/√d-ish), and an
// output's error Σ p(δs·(v − o) + δp·v + p·δv) is at most a few u for |v| ≤ 1: ~2e-3 on the
// worst rows (few keys), ≤ 1e-2 with a 2× margin over the largest of some 10⁵ outputs.
// CUDA fast's delta rule at d_k = d_v = 128 runs the chunk form on BF16 tensor cores: its
// operands (q̂, k̂, (I + A)⁻¹, W, the chunk states S_c and v_new) are rounded to BF16, 2⁻⁹ relative
// each. The errors have random signs and the fp32 sums average them: a host model of the
// kernels with exact BF16 rounding lands at ~2e-4 (outputs) and ~1e-3 (states, which sum 64
// rounded updates per chunk) on these cases. 5e-3 leaves 5× room and still fails a kernel that
// drops the diagonal of the intra-chunk term (1.4e-2 to 2.3e-2 in that model).
// CUDA fast's MXFP4 W4A4 linear layers take FP8 E4M3 products (linear_fp8.h): the operands are
// the exact QDQ values, but Hopper's FP8 tensor cores sum a K step with fewer bits than fp32
// before cuBLASLt promotes the partial sums (DeepSeek-V3 report §3.3.2); an earlier FP8 trial
// measured 1.0–1.3e-4 on these shapes (docs/benchmarks.md), hence 5e-4 for cuda fast linear.
INSTANTIATE_TEST_SUITE_P(
    Devices, BackendOps,
    ::testing::Values(BackendCase{"cpu", Precision::kExact, 0.0, 0.0, 0.0, 0.0},
                      BackendCase{"cpu", Precision::kFast, 3e-6, 5e-5, 1e-5, 1e-4},
                      BackendCase{"cuda", Precision::kExact, 1e-6, 2e-5, 1e-6, 1e-5},
                      BackendCase{"cuda", Precision::kFast, 2e-6, 5e-3, 1e-2, 5e-4}),
    case_name);

}  // namespace
}  // namespace stave
