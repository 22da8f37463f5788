// Every CUDA op against its fp32 reference op (src/ops, src/formats/mxfp4) on random shapes.
// Outputs are poisoned (NaN) before each GPU call so an unwritten element fails.
#include <cstring>
#include <limits>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/device_buffer.h"
#include "cuda_test_util.h"
#include "ops/attention.h"
#include "ops/conv1d.h"
#include "ops/elementwise.h"
#include "ops/gated_delta_net.h"
#include "ops/backend.h"
#include "ops/head_memory.h"
#include "ops/head_ops.h"
#include "ops/reference.h"
#include "ops/rope.h"
#include "formats/mxfp4.h"
#include "util/bf16.h"

namespace stave {
namespace {

using test::max_abs_diff;
using test::random_floats;
using test::rel_error;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> poisoned(size_t n) { return std::vector<float>(n, kNaN); }

// MXFP4 activation QDQ must be bit-exact with the scalar oracle, every scale mode, values
// spread over many binades (with zeros, ties and tails shorter than a block).
TEST(CudaOps, Mxfp4QdqBitExact) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(1);
  for (auto mode : {mxfp4::ScaleMode::kEven, mxfp4::ScaleMode::kFloor, mxfp4::ScaleMode::kCeil})
    for (int64_t k : {32, 96, 50, 7}) {
      const int64_t rows = 37;
      std::vector<float> x(rows * k);
      std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
      std::uniform_int_distribution<int> ex(-140, 100), pick(0, 9);
      for (float& v : x) {
        const int p = pick(rng);
        if (p == 0) v = 0.0f;
        else if (p == 1) v = 0.25f * std::uniform_int_distribution<int>(-24, 24)(rng);  // grid ties
        else v = std::ldexp(mant(rng), p == 2 ? ex(rng) : std::uniform_int_distribution<int>(-8, 8)(rng));
      }
      std::vector<float> want(x.size()), got = poisoned(x.size());
      for (int64_t r = 0; r < rows; ++r) mxfp4::qdq_row(x.data() + r * k, k, want.data() + r * k, mode);
      cuda::DeviceBuffer dx;
      dx.upload(x.data(), x.size() * 4);
      cuda::dev::mxfp4_qdq(dx.as<float>(), rows, k, mode, dx.as<float>(), nullptr);
      dx.download(got.data(), got.size() * 4);
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << "k " << k << " i " << i << " x " << x[i];
    }
}

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
    const auto v = random_floats(rng, out * in, -0.1f, 0.1f);
    h.bytes.resize(out * in * 2);
    for (int64_t i = 0; i < out * in; ++i) {
      const uint16_t b = f32_to_bf16(v[i]);
      std::memcpy(&h.bytes[2 * i], &b, 2);
    }
  } else {
    const auto v = random_floats(rng, out * in, -0.1f, 0.1f);
    h.bytes.resize(out * in * 4);
    std::memcpy(h.bytes.data(), v.data(), h.bytes.size());
  }
  h.w.data = h.bytes.data();
  if (bias) {
    h.bias = random_floats(rng, out);
    h.w.bias = h.bias.data();
  }
  return h;
}

TEST(CudaOps, LinearAllFormatsBothPrecisions) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(2);
  struct Case {
    WeightFormat f;
    bool w4a4;
    double fast_tol;  // fast: W4A4 products are exact; other activations are BF16 hi + lo
  };
  for (const Case c : {Case{WeightFormat::kMXFP4, true, 3e-5}, Case{WeightFormat::kMXFP4, false, 1e-4},
                       Case{WeightFormat::kBF16, false, 1e-4}, Case{WeightFormat::kF32, false, 3e-5}})
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 64, 64}, {17, 96, 160}, {130, 200, 512}})
      for (bool bias : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "format " << static_cast<int>(c.f) << " w4a4 " << c.w4a4 << " M " << M
                                          << " N " << N << " K " << K << " bias " << bias);
        // Fresh backends: the weight cache trusts host memory not to change under a pointer,
        // and these test weights are freed and reallocated (often at the same address).
        const cuda::CudaBackend exact(Precision::kExact), fast(Precision::kFast);
        HostWeight h = make_weight(rng, c.f, N, K, c.w4a4, bias);
        const auto x = random_floats(rng, M * K, -2.0f, 2.0f);
        std::vector<float> want(M * N), got = poisoned(M * N), got_fast = poisoned(M * N);
        ref::linear(h.w, x.data(), M, want.data());
        exact.linear(h.w, x.data(), M, got.data());
        fast.linear(h.w, x.data(), M, got_fast.data());
        EXPECT_LT(rel_error(got, want), 1e-5);  // fp64 accumulation vs the oracle's fp32
        EXPECT_LT(rel_error(got_fast, want), c.fast_tol);
      }
}

TEST(CudaOps, NormsAndElementwise) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(3);
  const cuda::CudaBackend gpu(Precision::kExact);
  for (auto [rows, dim] : {std::pair<int64_t, int64_t>{1, 8}, {33, 128}, {7, 5120}}) {
    const auto x = random_floats(rng, rows * dim, -3, 3), z = random_floats(rng, rows * dim, -3, 3);
    const auto w = random_floats(rng, dim);
    std::vector<float> want(rows * dim), got = poisoned(rows * dim);
    ref::rms_norm_zero_centered(x.data(), rows, dim, w.data(), 1e-6f, want.data());
    gpu.rms_norm_zero_centered(x.data(), rows, dim, w.data(), 1e-6f, got.data());
    EXPECT_LE(rel_error(got, want), 1e-6) << "rms_norm_zero_centered " << rows << "x" << dim;
    ref::gated_rms_norm(x.data(), z.data(), rows, dim, w.data(), 1e-6f, want.data());
    got = poisoned(rows * dim);
    gpu.gated_rms_norm(x.data(), z.data(), rows, dim, w.data(), 1e-6f, got.data());
    EXPECT_LE(rel_error(got, want), 1e-6) << "gated_rms_norm";
    ref::silu_mul(x.data(), z.data(), rows * dim, want.data());
    got = poisoned(rows * dim);
    gpu.silu_mul(x.data(), z.data(), rows * dim, got.data());
    EXPECT_LE(rel_error(got, want), 1e-6) << "silu_mul";
    want = x;
    got = x;
    ref::sigmoid_mul(want.data(), z.data(), rows * dim);
    gpu.sigmoid_mul(got.data(), z.data(), rows * dim);
    EXPECT_LE(rel_error(got, want), 1e-6) << "sigmoid_mul";
  }
}

TEST(CudaOps, Conv1dCarriesHistory) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(4);
  const cuda::CudaBackend gpu(Precision::kExact);
  const int64_t channels = 70, kernel = 4;
  const auto w = random_floats(rng, channels * kernel);
  std::vector<float> h_ref = random_floats(rng, (kernel - 1) * channels), h_gpu = h_ref;
  for (int64_t tokens : {5, 2, 1, 40}) {  // 2 and 1 are shorter than the history
    const auto x = random_floats(rng, tokens * channels);
    std::vector<float> want(tokens * channels), got = poisoned(tokens * channels);
    ref::causal_conv1d_silu(x.data(), tokens, channels, w.data(), kernel, h_ref.data(), want.data());
    gpu.causal_conv1d_silu(x.data(), tokens, channels, w.data(), kernel, h_gpu.data(), got.data());
    EXPECT_LE(rel_error(got, want), 1e-6) << "tokens " << tokens;
    EXPECT_EQ(h_gpu, h_ref) << "history after " << tokens << " tokens";
  }
}

TEST(CudaOps, GdnGates) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(5);
  const cuda::CudaBackend gpu(Precision::kExact);
  const int64_t tokens = 45, nv = 12;
  const auto a = random_floats(rng, tokens * nv, -30, 30), b = random_floats(rng, tokens * nv, -5, 5);
  const auto A_log = random_floats(rng, nv), dt = random_floats(rng, nv);
  std::vector<float> g(tokens * nv), beta(tokens * nv), gg = poisoned(tokens * nv), gb = poisoned(tokens * nv);
  ref::gdn_gates(a.data(), b.data(), A_log.data(), dt.data(), tokens, nv, g.data(), beta.data());
  gpu.gdn_gates(a.data(), b.data(), A_log.data(), dt.data(), tokens, nv, gg.data(), gb.data());
  EXPECT_LE(rel_error(gg, g), 1e-7);
  EXPECT_LE(rel_error(gb, beta), 1e-7);
}

TEST(CudaOps, GatedDeltaRuleMatchesRecurrence) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(6);
  const cuda::CudaBackend gpu(Precision::kExact), fast(Precision::kFast);
  for (GatedDeltaDims dims : {GatedDeltaDims{1, 1, 16, 16}, GatedDeltaDims{2, 4, 32, 40}, GatedDeltaDims{1, 3, 24, 8}, GatedDeltaDims{2, 6, 128, 128}})
    for (int64_t tokens : {1, 9, 70}) {
      SCOPED_TRACE(::testing::Message() << "dk " << dims.d_k << " dv " << dims.d_v << " tokens " << tokens);
      const int64_t stride = 2 * dims.n_k_heads * dims.d_k + dims.n_v_heads * dims.d_v;
      const auto row = random_floats(rng, tokens * stride);
      const auto g = random_floats(rng, tokens * dims.n_v_heads, -2.0f, 0.0f);
      const auto beta = random_floats(rng, tokens * dims.n_v_heads, 0.0f, 1.0f);
      GatedDeltaInput in;
      in.tokens = tokens;
      in.q = row.data();
      in.k = row.data() + dims.n_k_heads * dims.d_k;
      in.v = row.data() + 2 * dims.n_k_heads * dims.d_k;
      in.stride = stride;
      in.g = g.data();
      in.beta = beta.data();
      std::vector<float> s_ref = random_floats(rng, dims.state_floats(), -0.5f, 0.5f), s_gpu = s_ref,
                         s_fast = s_ref;
      std::vector<float> want(tokens * dims.n_v_heads * dims.d_v), got = poisoned(want.size()),
                         got_fast = poisoned(want.size());
      ref::gated_delta_rule_recurrent(dims, in, s_ref.data(), want.data());
      gpu.gated_delta_rule(dims, in, s_gpu.data(), got.data());
      fast.gated_delta_rule(dims, in, s_fast.data(), got_fast.data());
      EXPECT_LE(rel_error(got, want), 1e-6);
      EXPECT_LE(rel_error(s_gpu, s_ref), 1e-6);
      EXPECT_LE(rel_error(got_fast, want), 2e-5);  // fp32 state, fp32 sums
      EXPECT_LE(rel_error(s_fast, s_ref), 2e-5);
    }
}

TEST(CudaOps, Rope) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(7);
  const cuda::CudaBackend gpu(Precision::kExact);
  const int64_t tokens = 19, heads = 3, d = 64, rot = 32;
  const auto cos = random_floats(rng, tokens * rot / 2), sin = random_floats(rng, tokens * rot / 2);
  std::vector<float> want = random_floats(rng, tokens * heads * d), got = want;
  ref::apply_rope(want.data(), tokens, heads, d, rot, cos.data(), sin.data());
  gpu.apply_rope(got.data(), tokens, heads, d, rot, cos.data(), sin.data());
  EXPECT_LE(max_abs_diff(got, want), 1e-6);
}

TEST(CudaOps, AttentionCausalGqa) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(8);
  // A score budget of a few rows: many query chunks, each seeing a different number of keys.
  cuda::CudaBackendOptions small;
  small.attention_score_bytes = 3 * 8 * 1024;
  // Fast precision: fast and fast_chunked pin the flash kernel (wherever the head dim allows:
  // all but 18 here, which falls back), fast_gemm the chunked cuBLAS form; both stay covered
  // whatever the automatic choice would be for these small grids.
  small.attention_kernel = cuda::AttentionKernel::kFlash;
  cuda::CudaBackendOptions flash;
  flash.attention_kernel = cuda::AttentionKernel::kFlash;
  cuda::CudaBackendOptions gemm = small;
  gemm.attention_kernel = cuda::AttentionKernel::kGemm;
  const cuda::CudaBackend fast_gemm(Precision::kFast, gemm);
  const cuda::CudaBackend exact(Precision::kExact), fast(Precision::kFast, flash);
  const cuda::CudaBackend exact_chunked(Precision::kExact, small), fast_chunked(Precision::kFast, small);
  for (AttentionShape s : {AttentionShape{4, 2, 64, 0.125f}, AttentionShape{6, 1, 256, 0.0625f},
                           AttentionShape{3, 3, 18, 0.25f}, AttentionShape{24, 4, 256, 0.0625f},
                           AttentionShape{8, 2, 128, 0.0884f}, AttentionShape{2, 1, 16, 0.25f}})
    for (auto [tokens, pos0] : {std::pair<int64_t, int64_t>{1, 0}, {37, 0}, {20, 45}, {130, 3}, {257, 0}}) {
      SCOPED_TRACE(::testing::Message() << "heads " << s.n_q_heads << "/" << s.n_kv_heads << " d " << s.head_dim
                                        << " tokens " << tokens << " pos0 " << pos0);
      const int64_t keys = pos0 + tokens;
      const auto q = random_floats(rng, tokens * s.n_q_heads * s.head_dim, -2, 2);
      const auto k = random_floats(rng, keys * s.n_kv_heads * s.head_dim, -2, 2);
      const auto v = random_floats(rng, keys * s.n_kv_heads * s.head_dim);
      std::vector<float> want(q.size());
      ref::attention_causal(s, q.data(), tokens, pos0, k.data(), v.data(), want.data());
      for (const auto* b : {&exact, &fast, &exact_chunked, &fast_chunked, &fast_gemm}) {
        const bool is_exact = b == &exact || b == &exact_chunked;
        SCOPED_TRACE(::testing::Message() << (is_exact ? "exact" : "fast")
                                          << (b == &exact || b == &fast ? "" : b == &fast_gemm ? " gemm" : " chunked"));
        std::vector<float> got = poisoned(q.size());
        b->attention_causal(s, q.data(), tokens, pos0, k.data(), v.data(), got.data());
        EXPECT_LE(rel_error(got, want), is_exact ? 1e-6 : 1e-5);
      }
    }
}

// The joint head's fp32 products (ref::matmul_nt), with the weights staged per call and with
// them resident (keyed by address and shape: a second call with other inputs must reuse the
// weight, and another bias pointer must not be served the first one's).
TEST(CudaOps, MatmulNtBothPrecisionsAndResidentWeights) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(10);
  cuda::CudaBackendOptions keep;
  keep.keep_matmul_weights = true;
  for (Precision p : {Precision::kExact, Precision::kFast}) {
    const cuda::CudaBackend staged(p), resident(p, keep);
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 64, 96}, {37, 130, 200}, {300, 1024, 512}}) {
      SCOPED_TRACE(::testing::Message() << (p == Precision::kExact ? "exact" : "fast") << " M " << M << " N " << N
                                        << " K " << K);
      const auto w = random_floats(rng, N * K, -0.1f, 0.1f);
      const auto b1 = random_floats(rng, N), b2 = random_floats(rng, N);
      for (int call = 0; call < 2; ++call)
        for (const float* bias : {static_cast<const float*>(nullptr), b1.data(), b2.data()}) {
          const auto x = random_floats(rng, M * K, -2.0f, 2.0f);
          std::vector<float> want(M * N), a = poisoned(M * N), r = poisoned(M * N);
          ref::matmul_nt(x.data(), M, K, w.data(), N, bias, want.data());
          staged.matmul_nt(x.data(), M, K, w.data(), N, bias, a.data());
          resident.matmul_nt(x.data(), M, K, w.data(), N, bias, r.data());
          const double tol = p == Precision::kExact ? 1e-6 : 1e-5;
          EXPECT_LE(rel_error(a, want), tol);
          EXPECT_LE(rel_error(r, want), tol);
        }
    }
  }
}

// The joint head's L-row work (ops/head_memory.h) on the GPU against the host oracle: the
// normalised hidden rows, and every attention (routing layers over the normalised memory,
// decoder layers over the raw one), asked in and out of order and twice, over memories from one
// row to several score chunks long.
TEST(CudaOps, HeadMemoryMatchesHost) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(11);
  cuda::CudaBackendOptions keep;
  keep.keep_matmul_weights = true;
  keep.attention_score_bytes = 4 * 1024;  // a few score rows: the queries run in many chunks
  const cuda::CudaBackend gpu(Precision::kFast, keep);
  for (auto [H, W, heads] : {std::tuple<int64_t, int64_t, int64_t>{96, 64, 4}, {200, 48, 3}, {1024, 128, 8}}) {
    const auto ln_w = random_floats(rng, H, 0.5f, 1.5f), ln_b = random_floats(rng, H, -0.2f, 0.2f);
    const auto proj = random_floats(rng, W * H, -0.1f, 0.1f);
    struct Owned {
      std::vector<float> norm_w, norm_b, in_w, in_b, out_w, out_b;
    };
    std::vector<Owned> owned(4);
    HeadMemorySpec spec;
    spec.hidden_size = H;
    spec.width = W;
    spec.hidden_norm = {ln_w.data(), ln_b.data(), H, 1e-5f};
    spec.memory_projection = proj.data();
    for (size_t a = 0; a < owned.size(); ++a) {
      Owned& o = owned[a];
      o.norm_w = random_floats(rng, W, 0.5f, 1.5f);
      o.norm_b = random_floats(rng, W, -0.2f, 0.2f);
      o.in_w = random_floats(rng, 3 * W * W, -0.2f, 0.2f);
      o.in_b = random_floats(rng, 3 * W, -0.1f, 0.1f);
      o.out_w = random_floats(rng, W * W, -0.2f, 0.2f);
      o.out_b = random_floats(rng, W, -0.1f, 0.1f);
      HeadMemoryAttention at;
      at.normalise_memory = a < 2;  // two routing layers, then two decoder layers
      at.memory_norm = {o.norm_w.data(), o.norm_b.data(), W, 1e-5f};
      at.attention = {W, heads, o.in_w.data(), o.in_b.data(), o.out_w.data(), o.out_b.data()};
      spec.attentions.push_back(at);
    }
    for (int64_t L : {int64_t{1}, int64_t{37}, int64_t{300}}) {
      SCOPED_TRACE(::testing::Message() << "H " << H << " W " << W << " heads " << heads << " L " << L);
      const auto hidden = random_floats(rng, L * H, -3.0f, 3.0f);
      const auto host = host_head_memory(reference_backend(), spec, hidden.data(), L);
      const auto dev = gpu.head_memory(spec, hidden.data(), L);
      const int64_t begin = L / 3, end = L;
      std::vector<float> want((end - begin) * H), got = poisoned((end - begin) * H);
      host->normed_hidden_rows(begin, end, want.data());
      dev->normed_hidden_rows(begin, end, got.data());
      EXPECT_LE(rel_error(got, want), 1e-6);
      for (size_t a : {size_t{0}, size_t{2}, size_t{1}, size_t{3}, size_t{0}})
        for (int64_t rows : {int64_t{1}, int64_t{13}}) {
          SCOPED_TRACE(::testing::Message() << "attention " << a << " rows " << rows);
          const auto query = random_floats(rng, rows * W, -2.0f, 2.0f);
          std::vector<float> w(rows * W), g = poisoned(rows * W);
          host->attend(a, query.data(), rows, w.data());
          dev->attend(a, query.data(), rows, g.data());
          EXPECT_LE(rel_error(g, w), 1e-5);
        }
    }
  }
}

// The non-causal attention the head memory uses, alone (all queries see all keys).
TEST(CudaOps, AttentionFullMatchesReference) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(12);
  for (auto [heads, d, rows, keys] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 16, 1, 1}, {4, 16, 7, 300},
                                      {8, 32, 40, 65}, {8, 128, 70, 100}, {3, 20, 5, 33}}) {
    SCOPED_TRACE(::testing::Message() << "heads " << heads << " d " << d << " rows " << rows << " keys " << keys);
    const int64_t E = heads * d;
    const auto q = random_floats(rng, rows * E, -2, 2), k = random_floats(rng, keys * E, -2, 2),
               v = random_floats(rng, keys * E);
    std::vector<float> want(rows * E);
    AttentionShape shape;
    shape.n_q_heads = shape.n_kv_heads = heads;
    shape.head_dim = d;
    shape.scale = 1.0f / std::sqrt(static_cast<float>(d));
    ref::attention_dense(shape, q.data(), E, rows, k.data(), v.data(), E, keys, want.data(), E);
    cuda::DeviceBuffer dq, dk, dv, dout;
    dq.upload(q.data(), q.size() * sizeof(float));
    dk.upload(k.data(), k.size() * sizeof(float));
    dv.upload(v.data(), v.size() * sizeof(float));
    dout.reserve(want.size() * sizeof(float));
    for (auto [kernel, budget] : {std::pair{cuda::AttentionKernel::kFlash, cuda::dev::kAttentionScoreBytes},
                                  std::pair{cuda::AttentionKernel::kGemm, size_t{1024}},
                                  std::pair{cuda::AttentionKernel::kGemm, cuda::dev::kAttentionScoreBytes}}) {
      SCOPED_TRACE(::testing::Message() << (kernel == cuda::AttentionKernel::kFlash ? "flash" : "gemm") << " budget "
                                        << budget);
      cuda::GpuContext ctx(/*exact=*/false, kernel);
      cuda::dev::attention_full(ctx, shape, dq.as<float>(), rows, dk.as<float>(), dv.as<float>(), keys,
                                dout.as<float>(), budget);
      ctx.synchronize();
      std::vector<float> got = poisoned(want.size());
      dout.download(got.data(), got.size() * sizeof(float));
      EXPECT_LE(rel_error(got, want), 1e-5);
    }
  }
}

}  // namespace
}  // namespace stave
