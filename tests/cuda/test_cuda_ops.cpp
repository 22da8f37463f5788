// What only the CUDA backend has, against the fp32 reference ops: the MXFP4 activation QDQ
// kernel, each attention kernel choice and score budget, and the head's host-memory products.
// The text model's ops run for every backend in tests/test_backend_ops.cpp.
// Outputs are poisoned (NaN) before each GPU call so an unwritten element fails.
#include <cstring>
#include <limits>

#include "backends/cuda/attention_flash_bf16.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/device_buffer.h"
#include "backend_ops_util.h"
#include "cuda_test_util.h"
#include "test_env.h"
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
        test::HostOps(*b).attention_causal(s, q.data(), tokens, pos0, k.data(), v.data(), got.data());
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
// row to several score chunks long; the hidden states given in host memory and lent in device
// memory by another backend (as a device backbone lends them). Both attention forms: with the
// default score budget, 1 and 13 queries fold into the projections (heads · rows < width,
// dev::attention_folded) and 40 do not; with a 4 KB budget only the shortest memories fold and
// the rest project the memory's keys and values and run in many score chunks.
TEST(CudaOps, HeadMemoryMatchesHost) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(11);
  cuda::CudaBackendOptions keep;
  keep.keep_matmul_weights = true;
  const cuda::CudaBackend folding(Precision::kFast, keep);
  keep.attention_score_bytes = 4 * 1024;  // a few score rows: the queries run in many chunks
  const cuda::CudaBackend gpu(Precision::kFast, keep);
  const cuda::CudaBackend lender(Precision::kFast);
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
    std::unique_ptr<HeadMemory> previous, previous_host;
    for (auto [L, on_device] : {std::pair<int64_t, bool>{1, false}, {37, false}, {300, false}, {1, true},
                                {37, true}, {300, true}}) {
      SCOPED_TRACE(::testing::Message() << "H " << H << " W " << W << " heads " << heads << " L " << L
                                        << (on_device ? " lent on the device" : " in host memory"));
      const auto hidden = random_floats(rng, L * H, -3.0f, 3.0f);
      auto host = host_head_memory(reference_backend(), spec, hidden.data(), L);
      Tensor staged = Tensor::host_empty({L, H});
      std::copy(hidden.begin(), hidden.end(), staged.data<float>());
      const Tensor lent = lender.to_device(staged);
      lender.synchronize();
      auto dev = gpu.head_memory(spec, on_device ? HiddenRows::on_device(lent.data<float>()) : hidden.data(), L);
      const auto folded =
          folding.head_memory(spec, on_device ? HiddenRows::on_device(lent.data<float>()) : hidden.data(), L);
      const int64_t begin = L / 3, end = L;
      std::vector<float> want((end - begin) * H), got = poisoned((end - begin) * H);
      host->normed_hidden_rows(begin, end, want.data());
      dev->normed_hidden_rows(begin, end, got.data());
      EXPECT_LE(rel_error(got, want), 1e-6);
      for (size_t a : {size_t{0}, size_t{2}, size_t{1}, size_t{3}, size_t{0}})
        for (int64_t rows : {int64_t{1}, int64_t{13}, int64_t{40}}) {
          SCOPED_TRACE(::testing::Message() << "attention " << a << " rows " << rows);
          const auto query = random_floats(rng, rows * W, -2.0f, 2.0f);
          std::vector<float> w(rows * W), g = poisoned(rows * W), f = poisoned(rows * W);
          host->attend(a, query.data(), rows, w.data());
          dev->attend(a, query.data(), rows, g.data());
          folded->attend(a, query.data(), rows, f.data());
          EXPECT_LE(rel_error(g, w), 1e-5);
          EXPECT_LE(rel_error(f, w), 1e-5) << "default score budget";
        }
      // Two memories of one backend alive together (two decisions' heads): the one made before
      // still answers from its own rows after the newer one has attended.
      if (previous) {
        SCOPED_TRACE("the previous memory, after this one");
        const int64_t rows = 5;
        const auto query = random_floats(rng, rows * W, -2.0f, 2.0f);
        std::vector<float> w(rows * W), g = poisoned(rows * W);
        previous_host->attend(1, query.data(), rows, w.data());
        previous->attend(1, query.data(), rows, g.data());
        EXPECT_LE(rel_error(g, w), 1e-5);
      }
      previous = std::move(dev);
      previous_host = std::move(host);
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


// The BF16 flash kernel pinned, so every shape goes through it (decode too, which the automatic
// choice leaves to the older paths): the 27B's and 9B's heads (24/4 and 16/4 of 256), GQA with
// d 64 and 128, token counts off the 64-row tile, continuations after cached keys (q_pos0 > 0),
// a key tile holding a single key, and sequences long enough that most of a warp group's key
// tiles are seen whole (the warp-group MMA kernel's lean form skips their masks). bf16 inputs with
// fp32 sums: rms relative error about 3e-3 (the derivation is at the tolerances of
// tests/test_backend_ops.cpp).
TEST(CudaOps, AttentionCausalFlashBf16) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(21);
  cuda::CudaBackendOptions bf16;
  bf16.attention_kernel = cuda::AttentionKernel::kFlashBf16;
  const cuda::CudaBackend fast(Precision::kFast, bf16);
  for (AttentionShape s : {AttentionShape{24, 4, 256, 0.0625f}, AttentionShape{16, 4, 256, 0.0625f},
                           AttentionShape{4, 2, 64, 0.125f}, AttentionShape{8, 2, 128, 0.0884f}})
    for (auto [tokens, pos0] : {std::pair<int64_t, int64_t>{1, 0}, {1, 300}, {37, 0}, {20, 45}, {130, 3},
                                {64, 64}, {257, 0}, {100, 129}, {700, 0}, {300, 1000}})
    {
      SCOPED_TRACE(::testing::Message() << "heads " << s.n_q_heads << "/" << s.n_kv_heads << " d " << s.head_dim
                                        << " tokens " << tokens << " pos0 " << pos0);
      const int64_t keys = pos0 + tokens;
      const auto q = random_floats(rng, tokens * s.n_q_heads * s.head_dim, -2, 2);
      const auto k = random_floats(rng, keys * s.n_kv_heads * s.head_dim, -2, 2);
      const auto v = random_floats(rng, keys * s.n_kv_heads * s.head_dim);
      std::vector<float> want(q.size());
      ref::attention_causal(s, q.data(), tokens, pos0, k.data(), v.data(), want.data());
      std::vector<float> got = poisoned(q.size());
      test::HostOps(fast).attention_causal(s, q.data(), tokens, pos0, k.data(), v.data(), got.data());
      const double err = rel_error(got, want);
      EXPECT_LE(err, 1e-2);
      // Not the fp32 result by accident: bf16 rounding leaves a visible error.
      EXPECT_GT(err, 1e-5);
      // Each form of the kernel called directly. The 128-row mma.sync blocks run the same products
      // in the same order per query row as the 64-row ones: the same bits. The warp-group MMA
      // kernel (head dims 128 and 256; 64 falls back to the 64-row blocks) makes the same
      // roundings with the sums inside a 16-wide step in another order.
      cuda::DeviceBuffer dq, dk, dv, dout;
      dq.upload(q.data(), q.size() * sizeof(float));
      dk.upload(k.data(), k.size() * sizeof(float));
      dv.upload(v.data(), v.size() * sizeof(float));
      cuda::GpuContext ctx(/*exact=*/false);
      auto run = [&](cuda::dev::FlashBf16Kernel form, const char* tile = "lean") {
        const test::ScopedEnv env("STAVE_CUDA_FLASH_TILE", tile);  // read at each call
        dout.upload(poisoned(q.size()).data(), q.size() * sizeof(float));
        cuda::dev::flash_attention_bf16(ctx.stream(), s, dq.as<float>(), tokens, pos0, dk.as<float>(),
                                        dv.as<float>(), dout.as<float>(), form);
        ctx.synchronize();
        std::vector<float> y(q.size());
        dout.download(y.data(), y.size() * sizeof(float));
        return y;
      };
      const std::vector<float> got64 = run(cuda::dev::FlashBf16Kernel::kMma64);
      const std::vector<float> got128 = run(cuda::dev::FlashBf16Kernel::kMma128);
      const std::vector<float> got_wg = run(cuda::dev::FlashBf16Kernel::kWgmma);
      const std::vector<float> got_wg_plain = run(cuda::dev::FlashBf16Kernel::kWgmma, "plain");
      for (const auto* y : {&got64, &got_wg}) {
        const double e = rel_error(*y, want);
        EXPECT_LE(e, 1e-2) << (y == &got64 ? "mma.sync" : "wgmma");
        EXPECT_GT(e, 1e-5) << (y == &got64 ? "mma.sync" : "wgmma");
      }
      EXPECT_EQ(got128, got64) << "128-row blocks";
      if (s.head_dim == 64) {
        EXPECT_EQ(got_wg, got64) << "head dim 64 takes the 64-row blocks";
        EXPECT_EQ(got_wg_plain, got64) << "head dim 64 takes the 64-row blocks";
      } else {
        // The two tile forms differ by the rounding of s · scale inside the FMA: a probability
        // moves by about 1e-7 of itself, and P's BF16 rounding flips for a few of them, each by one
        // BF16 step (2^-8 of it). Far below the 3e-3 both carry against the fp32 reference; a
        // wrong mask, max or rescale moves whole rows (errors of order 1).
        const double between = rel_error(got_wg, got_wg_plain);
        EXPECT_LE(between, 3e-4) << "the lean tile form against the plain one";
        EXPECT_LE(rel_error(got_wg_plain, want), 1e-2) << "wgmma, plain tile form";
      }
    }
}

}  // namespace
}  // namespace stave
