// The FP8 path of fast-precision MXFP4 W4A4 linear layers (src/backends/cuda/linear_fp8.h)
// against ref::linear: both ways of applying the row scales (in cuBLASLt's GEMM, after it), ragged
// M, a Clef shape, and each fallback — a weight whose block exponents do not fit one row
// reference (BF16 products, counted), activation blocks below their row's FP8 range (rounded,
// counted), all-zero blocks with any exponent (ignored), N not a multiple of 16 (BF16 path).
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/device_buffer.h"
#include "backends/cuda/gemm_mxfp4_fp8.h"
#include "backends/cuda/linear_fp8.h"
#include "cuda_linear_test_util.h"
#include "formats/linear_weight.h"
#include "formats/mxfp4.h"
#include "ops/reference.h"
#include "test_env.h"

namespace stave {
namespace {

using test::make_mxfp4;
using test::Mxfp4Weight;
using test::run_linear;
using test::scaled_diff;


// Hopper's FP8 tensor cores accumulate a K step with fewer than fp32's bits before cuBLASLt
// promotes the partial sums (DeepSeek-V3 report §3.3.2): the op suite's cuda fast linear bound.
constexpr double kTol = 5e-4;

TEST(CudaLinearFp8, BothScaleModesRaggedAndClefShapes) {
  STAVE_REQUIRE_GPU();
  // M = 1 would take the small-M kernel by default (linear_small_m.h): this test is the FP8 path's.
  const test::ScopedEnv no_small_m("STAVE_CUDA_SMALL_M", "off");
  std::mt19937 rng(5);
  struct Shape {
    int64_t M, N, K;
  };
  for (auto path : {cuda::LinearPath::kFp8, cuda::LinearPath::kFp8EpilogueScales})
    for (const Shape s : {Shape{1, 128, 256}, {7, 128, 256}, {100, 256, 512}, {513, 128, 256}, {32, 512, 256},
                          {64, 1024, 5120}}) {
      if (s.K == 5120 && path == cuda::LinearPath::kFp8EpilogueScales) continue;  // CPU reference time
      const bool bias = s.M % 2 == 1;
      SCOPED_TRACE(::testing::Message() << "path " << static_cast<int>(path) << " M " << s.M << " N " << s.N
                                        << " K " << s.K << " bias " << bias);
      const Mxfp4Weight h = make_mxfp4(rng, s.N, s.K, 118, 130, bias, "fp8_test");
      const auto x = test::random_floats(rng, s.M * s.K, -2.0f, 2.0f);
      cuda::GpuContext ctx(/*exact=*/false);
      ctx.set_linear_path(path);
      const cuda::DeviceLinear d = cuda::upload_linear(h.w, /*fp8_check=*/true);
      ASSERT_TRUE(d.fp8);
      ASSERT_TRUE(cuda::dev::linear_fp8_applies(ctx, d));
      const auto before = cuda::linear_fp8_stats();
      const auto got = run_linear(ctx, d, x, s.M);
      const auto after = cuda::linear_fp8_stats();
      std::vector<float> want(static_cast<size_t>(s.M * s.N));
      ref::linear(h.w, x.data(), s.M, want.data());
      const double diff = scaled_diff(got, want);
      EXPECT_LE(diff, kTol);
      RecordProperty("scaled_diff", std::to_string(diff));
      EXPECT_EQ(after.activation_blocks_rounded, before.activation_blocks_rounded);  // inputs span 2^5
      if (path == cuda::LinearPath::kFp8EpilogueScales)
        EXPECT_EQ(after.gemms_scaled_after, before.gemms_scaled_after + 1);
      else
        EXPECT_EQ(after.gemms_scaled_in_gemm + after.gemms_scaled_after,
                  before.gemms_scaled_in_gemm + before.gemms_scaled_after + 1);
      std::printf("fp8 path %d M %lld N %lld K %lld: scaled diff %.3g, scales %s\n", static_cast<int>(path),
                  static_cast<long long>(s.M), static_cast<long long>(s.N), static_cast<long long>(s.K), diff,
                  after.gemms_scaled_in_gemm > before.gemms_scaled_in_gemm ? "in the GEMM" : "after");
    }
}

// STAVE_CUDA_FP8_CLUSTER=fit (the default, also unset): from 512 to 1,023 padded rows, a product
// whose rows 128-row tiles pad more than a 176- or 136-row tile would runs with that tile
// (plans_fit_tile counts it); rows that 128 divides, fewer than 512 and 1,024 or more keep the
// heuristic's. At the 27B's GDN z shape (6144 × 5120, whose heuristic tile at 528 rows is 128 ×
// 128 on an H100), its products stay within the FP8 path's bound of the "pairs" rule's (the
// reference is too slow on the CPU here: the small shapes above hold the path to it).
TEST(CudaLinearFp8, FitTilesGiveTheSameProductsWithinTheBound) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(31);
  const int64_t N = 6144, K = 5120;
  const Mxfp4Weight h = make_mxfp4(rng, N, K, 118, 130, false, "fit_tile");
  const cuda::DeviceLinear d = cuda::upload_linear(h.w, /*fp8_check=*/true);
  ASSERT_TRUE(d.fp8);
  cuda::GpuContext pairs(/*exact=*/false), fit(/*exact=*/false);
  pairs.set_linear_path(cuda::LinearPath::kFp8);
  fit.set_linear_path(cuda::LinearPath::kFp8);
  for (const auto& [M, fits] : std::vector<std::pair<int64_t, bool>>{{516, true}, {700, true}, {512, false}, {1040, false}, {300, false}}) {
    SCOPED_TRACE(::testing::Message() << "M " << M);
    const auto x = test::random_floats(rng, M * K, -2.0f, 2.0f);
    std::vector<float> want;
    {
      const test::ScopedEnv rule("STAVE_CUDA_FP8_CLUSTER", "pairs");  // read at a context's first FP8 product
      want = run_linear(pairs, d, x, M);
    }
    const test::ScopedEnv rule("STAVE_CUDA_FP8_CLUSTER", nullptr);  // the default: fit
    const auto before = cuda::linear_fp8_stats();
    const auto got = run_linear(fit, d, x, M);
    const auto after = cuda::linear_fp8_stats();
    EXPECT_LE(scaled_diff(got, want), kTol);
    EXPECT_EQ(after.plans_fit_tile - before.plans_fit_tile, fits ? 1 : 0);
  }
}

TEST(CudaLinearFp8, WideWeightRowsTakeBf16Products) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(6);
  const int64_t M = 33, N = 64, K = 256;
  Mxfp4Weight h = make_mxfp4(rng, N, K, 120, 126, false, "fp8_test");
  h.scales[5 * (K / 32) + 3] = 100;  // row 5: 26 binades
  h.codes[(5 * (K / 32) + 3) * 16] = 0x11;  // a non-zero code in that block
  const auto before = cuda::linear_fp8_stats();
  const cuda::DeviceLinear d = cuda::upload_linear(h.w, true);
  EXPECT_FALSE(d.fp8);
  EXPECT_EQ(cuda::linear_fp8_stats().weights_out_of_range, before.weights_out_of_range + 1);
  cuda::GpuContext ctx(false);
  EXPECT_FALSE(cuda::dev::linear_fp8_applies(ctx, d));
  const auto x = test::random_floats(rng, M * K, -2.0f, 2.0f);
  std::vector<float> want(M * N);
  ref::linear(h.w, x.data(), M, want.data());
  EXPECT_LE(scaled_diff(run_linear(ctx, d, x, M), want), 1e-4);
}

TEST(CudaLinearFp8, ZeroBlocksIgnoredNarrowNFallsBack) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(7);
  const int64_t M = 20, K = 128;
  for (int64_t N : {48, 40}) {
    Mxfp4Weight h = make_mxfp4(rng, N, K, 122, 128, true, "fp8_test");
    // Every row's block 1: ±0 codes with exponent byte 0 (1 in row 0), far below the others:
    // the row still fits, since only blocks with a non-zero code count.
    for (int64_t r = 0; r < N; ++r) {
      for (int j = 0; j < 16; ++j) h.codes[(r * (K / 32) + 1) * 16 + j] = (j % 2) ? 0x88 : 0x00;
      h.scales[r * (K / 32) + 1] = r == 0 ? 1 : 0;
    }
    const cuda::DeviceLinear d = cuda::upload_linear(h.w, true);
    EXPECT_TRUE(d.fp8);
    cuda::GpuContext ctx(false);
    ctx.set_linear_path(cuda::LinearPath::kFp8);  // whatever STAVE_CUDA_LINEAR says
    EXPECT_EQ(cuda::dev::linear_fp8_applies(ctx, d), N % 16 == 0) << N;
    const auto x = test::random_floats(rng, M * K, -2.0f, 2.0f);
    std::vector<float> want(M * N);
    ref::linear(h.w, x.data(), M, want.data());
    EXPECT_LE(scaled_diff(run_linear(ctx, d, x, M), want), kTol) << N;
  }
}

TEST(CudaLinearFp8, TinyActivationBlocksAreRoundedAndCounted) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(8);
  const int64_t M = 16, N = 32, K = 128;
  const Mxfp4Weight h = make_mxfp4(rng, N, K, 124, 128, false, "fp8_test");
  auto x = test::random_floats(rng, M * K, -2.0f, 2.0f);
  for (int64_t i = 0; i < 32; ++i) x[3 * K + 64 + i] *= 0x1p-20f;  // row 3, block 2: 20 binades down
  const cuda::DeviceLinear d = cuda::upload_linear(h.w, true);
  cuda::GpuContext ctx(false);
  ctx.set_linear_path(cuda::LinearPath::kFp8);
  ASSERT_TRUE(cuda::dev::linear_fp8_applies(ctx, d));
  const auto before = cuda::linear_fp8_stats();
  const auto got = run_linear(ctx, d, x, M);
  EXPECT_EQ(cuda::linear_fp8_stats().activation_blocks_rounded, before.activation_blocks_rounded + 1);
  std::vector<float> want(M * N);
  ref::linear(h.w, x.data(), M, want.data());
  EXPECT_LE(scaled_diff(got, want), kTol);  // the rounded block moved y by < 2^-18 of the row's scale
}

// An E4M3 byte's value (no NaN: the path saturates).
float e4m3_value(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const float mag = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
  return (b & 0x80) ? -mag : mag;
}

// Rows whose MX blocks span 12 binades (within E4M3's reach of the row's largest block), with a
// zero block, values on E2M1 rounding ties and a NaN-free spread of magnitudes.
std::vector<float> quantization_rows(std::mt19937& rng, int64_t M, int64_t K) {
  std::vector<float> x(static_cast<size_t>(M * K));
  std::uniform_int_distribution<int> binade(-6, 6);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t b = 0; b < K / 32; ++b) {
      const float scale = std::ldexp(1.0f, binade(rng));
      for (int64_t i = 0; i < 32; ++i) {
        float v = u(rng) * scale;
        if (b % 7 == 3) v = 0.0f;                                          // an all-zero block
        if (b % 5 == 1 && i % 4 == 0) v = (0.25f + 0.5f * (i % 8)) * scale;  // E2M1 ties
        x[static_cast<size_t>(r * K + b * 32 + i)] = v;
      }
    }
  return x;
}

// The FP8 path's activations are mxfp4::qdq_row's values exactly: E4M3 byte × 2^R_a per row, for
// every kernel form (the register one at every K the Clef shapes have, the warp one beyond it,
// at each G: 96 and 4096 take 1, 5120 and 6144 2, 12288 4, 17408 and 32768 8; the staged one up
// to 32,768) and every scale mode; the forms write the same bytes.
TEST(CudaLinearFp8, ActivationQuantizationIsQdqRowBitForBit) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(11);
  for (const int64_t K : {int64_t{96}, int64_t{4096}, int64_t{5120}, int64_t{6144}, int64_t{12288}, int64_t{17408},
                          int64_t{32768}, int64_t{40960}})
    for (const auto mode : {mxfp4::ScaleMode::kEven, mxfp4::ScaleMode::kFloor, mxfp4::ScaleMode::kCeil}) {
      const int64_t M = K > 20000 ? 3 : 5;
      SCOPED_TRACE(::testing::Message() << "K " << K << " mode " << static_cast<int>(mode));
      const auto x = quantization_rows(rng, M, K);
      std::vector<float> want(x.size());
      for (int64_t r = 0; r < M; ++r) mxfp4::qdq_row(x.data() + r * K, K, want.data() + r * K, mode);
      cuda::DeviceBuffer dx, dq(static_cast<size_t>(M * K)), ds(static_cast<size_t>(M) * sizeof(float));
      dx.upload(x.data(), x.size() * sizeof(float));
      std::vector<std::vector<uint8_t>> bytes;
      for (int form : {1, 2, 3}) {
        if ((form == 1 || form == 3) && K > 32768) continue;
        STAVE_CUDA_CHECK(cudaMemset(dq.as<void>(), 0x7f, dq.bytes()));  // poison: E4M3 NaN
        cuda::dev::quantize_rows_fp8(dx.as<float>(), M, K, mode, dq.as<uint8_t>(), ds.as<float>(), form, nullptr);
        STAVE_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<uint8_t> q(static_cast<size_t>(M * K));
        std::vector<float> scale(static_cast<size_t>(M));
        dq.download(q.data(), q.size());
        ds.download(scale.data(), scale.size() * sizeof(float));
        int64_t wrong = 0, first = -1;
        for (int64_t i = 0; i < M * K; ++i) {
          const float got = e4m3_value(q[i]) * scale[i / K];
          if (got != want[i] || q[i] == 0x7f) {
            if (first < 0) first = i;
            ++wrong;
          }
        }
        EXPECT_EQ(wrong, 0) << "form " << form << ": first at " << first << " (x " << x[first] << ", want "
                            << want[first] << ", byte " << int(q[first]) << ", row scale " << scale[first / K] << ")";
        bytes.push_back(std::move(q));
      }
      for (size_t f = 1; f < bytes.size(); ++f) EXPECT_TRUE(bytes[f] == bytes[0]) << "form " << f + 1 << "'s bytes differ";
    }
}

// Products over one input (linear_shared_input) are bit-identical to separate dev::linear calls,
// whichever path each weight takes: FP8 weights of one K and scale mode share a quantization
// (N 128 then 64; 48 then 112), a narrow N (BF16 path, which writes the scratch) and another
// scale mode in between make it quantize again, and at M ≤ 4
// every weight takes the small-M kernel.
TEST(CudaLinearFp8, SharedInputEqualsSeparateProducts) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(12);
  const int64_t K = 256;
  std::vector<Mxfp4Weight> hs;
  for (const int64_t N : {128, 64, 40, 96, 48, 112}) hs.push_back(make_mxfp4(rng, N, K, 118, 130, N == 64, "shared"));
  hs[3].w.input_scale_mode = mxfp4::ScaleMode::kFloor;
  std::vector<cuda::DeviceLinear> ds;
  for (const auto& h : hs) ds.push_back(cuda::upload_linear(h.w, true));
  for (const int64_t M : {int64_t{3}, int64_t{70}, int64_t{513}}) {
    SCOPED_TRACE(::testing::Message() << "M " << M);
    cuda::GpuContext ctx(false);
    ctx.set_linear_path(cuda::LinearPath::kFp8);
    const auto x = test::random_floats(rng, M * K, -2.0f, 2.0f);
    std::vector<std::vector<float>> want;
    for (const auto& d : ds) want.push_back(run_linear(ctx, d, x, M));
    cuda::DeviceBuffer dx;
    dx.upload(x.data(), x.size() * sizeof(float));
    std::vector<cuda::DeviceBuffer> dy;
    std::vector<cuda::dev::SharedProduct> products;
    for (const auto& d : ds) {
      dy.emplace_back(static_cast<size_t>(M * d.out) * sizeof(float));
      STAVE_CUDA_CHECK(cudaMemset(dy.back().as<void>(), 0xff, dy.back().bytes()));
    }
    for (size_t i = 0; i < ds.size(); ++i) products.push_back({&ds[i], dy[i].as<float>()});
    STAVE_CUDA_CHECK(cudaDeviceSynchronize());
    const auto before = cuda::linear_fp8_stats();
    cuda::dev::linear_shared_input(ctx, dx.as<float>(), M, products);
    ctx.synchronize();
    const auto after = cuda::linear_fp8_stats();
    if (M > 4) {  // five FP8 products (N = 40 takes BF16), on three quantizations of x
      EXPECT_EQ(after.gemms_scaled_in_gemm + after.gemms_scaled_after,
                before.gemms_scaled_in_gemm + before.gemms_scaled_after + 5);
    }
    for (size_t i = 0; i < ds.size(); ++i) {
      std::vector<float> got(want[i].size());
      dy[i].download(got.data(), got.size() * sizeof(float));
      EXPECT_EQ(std::memcmp(got.data(), want[i].data(), got.size() * sizeof(float)), 0) << "weight " << i;
      std::vector<float> ref_y(want[i].size());
      ref::linear(hs[i].w, x.data(), M, ref_y.data());
      EXPECT_LE(scaled_diff(got, ref_y), kTol) << "weight " << i;
    }
  }
}

// SwiGLU's down projection with silu(gate) ⊙ up formed inside the quantization: bit-identical to
// silu_mul_fast followed by the product, at a register width of each kind (K 256: 1 group per
// thread, 17408: 8, the 27B's intermediate size) and with the staged rows (STAVE_CUDA_QUANT_ROWS,
// 17408); not taken at M ≤ 4 (small-M kernel), in exact precision, or for K beyond the register
// form (the caller composes); gate and up not written.
TEST(CudaLinearFp8, SiluMulLinearEqualsComposition) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(13);
  for (const int64_t K : {int64_t{256}, int64_t{17408}, int64_t{40960}}) {
    const int64_t N = K > 1000 ? 64 : 128;
    const Mxfp4Weight h = make_mxfp4(rng, N, K, 118, 130, true, "down");
    const cuda::DeviceLinear d = cuda::upload_linear(h.w, true);
    for (const int64_t M : {int64_t{3}, int64_t{37}, int64_t{300}})
      for (const char* rows : {"registers", "staged"}) {
        SCOPED_TRACE(::testing::Message() << "K " << K << " M " << M << " rows " << rows);
        const test::ScopedEnv form("STAVE_CUDA_QUANT_ROWS", rows);  // read when ctx makes its FP8 state
        cuda::GpuContext ctx(false);
        ctx.set_linear_path(cuda::LinearPath::kFp8);
        const auto g = test::random_floats(rng, M * K, -6.0f, 6.0f), u = test::random_floats(rng, M * K, -3.0f, 3.0f);
        cuda::DeviceBuffer dg, du, dp(static_cast<size_t>(M * K) * sizeof(float)),
            dy(static_cast<size_t>(M * N) * sizeof(float));
        dg.upload(g.data(), g.size() * sizeof(float));
        du.upload(u.data(), u.size() * sizeof(float));
        STAVE_CUDA_CHECK(cudaMemset(dy.as<void>(), 0xff, dy.bytes()));
        const bool fused = cuda::dev::silu_mul_linear_fused(ctx, d, dg.as<float>(), du.as<float>(), M, dy.as<float>());
        EXPECT_EQ(fused, M > 4 && K <= 32768);
        // The composition, as CudaBackend's fallback runs it.
        cuda::dev::silu_mul_fast(dg.as<float>(), du.as<float>(), M * K, dp.as<float>(), ctx.stream());
        std::vector<float> product(static_cast<size_t>(M * K));
        ctx.synchronize();
        dp.download(product.data(), product.size() * sizeof(float));
        const auto want = run_linear(ctx, d, product, M);
        std::vector<float> gate_after(g.size());
        dg.download(gate_after.data(), gate_after.size() * sizeof(float));
        EXPECT_TRUE(gate_after == g) << "gate was written";
        if (!fused) continue;
        std::vector<float> got(static_cast<size_t>(M * N));
        dy.download(got.data(), got.size() * sizeof(float));
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
      }
  }
  cuda::GpuContext exact(true);
  std::mt19937 r2(14);
  const Mxfp4Weight h = make_mxfp4(r2, 64, 256, 118, 130, false, "down");
  const cuda::DeviceLinear d = cuda::upload_linear(h.w, false);
  cuda::DeviceBuffer b(static_cast<size_t>(64 * 256) * sizeof(float));
  EXPECT_FALSE(cuda::dev::silu_mul_linear_fused(exact, d, b.as<float>(), b.as<float>(), 64, b.as<float>()));
}

TEST(CudaLinearFp8, PathFromEnvironment) {
  {
    const test::ScopedEnv e("STAVE_CUDA_LINEAR", "bf16");
    EXPECT_EQ(cuda::linear_path_from_env(), cuda::LinearPath::kBf16);
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_LINEAR", "fp8-epilogue");
    EXPECT_EQ(cuda::linear_path_from_env(), cuda::LinearPath::kFp8EpilogueScales);
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_LINEAR", "fp8-fused");
    EXPECT_EQ(cuda::linear_path_from_env(), cuda::LinearPath::kFp8Fused);
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_LINEAR", "int4");
    EXPECT_THROW(cuda::linear_path_from_env(), Error);
  }
  const test::ScopedEnv e("STAVE_CUDA_LINEAR", nullptr);
  EXPECT_EQ(cuda::linear_path_from_env(), cuda::LinearPath::kFp8);
}

// Fp8Weights::kResident keeps the bytes a product's expansion writes, so products over the kept
// copy equal those over a fresh expansion bit for bit; a weight off the FP8 path keeps nothing.
TEST(CudaLinearFp8, ResidentWeightsGiveTheSameProducts) {
  STAVE_REQUIRE_GPU();
  const test::ScopedEnv no_small_m("STAVE_CUDA_SMALL_M", "off");
  const test::ScopedEnv no_ahead("STAVE_CUDA_EXPAND_AHEAD", "off");  // the expansion in ctx's scratch
  std::mt19937 rng(12);
  struct Shape {
    int64_t M, N, K;
  };
  for (const Shape s : {Shape{7, 128, 256}, {513, 256, 512}, {64, 1024, 5120}}) {
    SCOPED_TRACE(::testing::Message() << "M " << s.M << " N " << s.N << " K " << s.K);
    const Mxfp4Weight h = make_mxfp4(rng, s.N, s.K, 118, 130, /*bias=*/true, "fp8_resident");
    const auto x = test::random_floats(rng, s.M * s.K, -2.0f, 2.0f);
    cuda::GpuContext ctx(false);
    ctx.set_linear_path(cuda::LinearPath::kFp8);
    const auto before = cuda::linear_fp8_stats();
    const cuda::DeviceLinear per = cuda::upload_linear(h.w, true);
    const cuda::DeviceLinear kept = cuda::upload_linear(h.w, true, cuda::Fp8Weights::kResident);
    EXPECT_EQ(per.fp8_weight.bytes(), 0u);
    ASSERT_EQ(kept.fp8_weight.bytes(), static_cast<size_t>(s.N * s.K));
    EXPECT_EQ(cuda::linear_fp8_stats().weights_fp8_resident, before.weights_fp8_resident + 1);

    const auto fresh = run_linear(ctx, per, x, s.M);
    std::vector<uint8_t> expanded(static_cast<size_t>(s.N * s.K)), resident(expanded.size());
    STAVE_CUDA_CHECK(cudaMemcpy(expanded.data(), ctx.scratch_w().as<void>(), expanded.size(), cudaMemcpyDeviceToHost));
    kept.fp8_weight.download(resident.data(), resident.size());
    EXPECT_EQ(std::memcmp(expanded.data(), resident.data(), expanded.size()), 0);

    const auto got = run_linear(ctx, kept, x, s.M);
    ASSERT_EQ(got.size(), fresh.size());
    EXPECT_EQ(std::memcmp(got.data(), fresh.data(), got.size() * sizeof(float)), 0);
    std::vector<float> want(static_cast<size_t>(s.M * s.N));
    ref::linear(h.w, x.data(), s.M, want.data());
    EXPECT_LE(scaled_diff(got, want), kTol);
  }
  // Off the FP8 path (26 binades in one row): nothing kept, BF16 products as before.
  Mxfp4Weight wide = make_mxfp4(rng, 64, 256, 120, 126, false, "fp8_resident_wide");
  wide.scales[5 * (256 / 32) + 3] = 100;
  wide.codes[(5 * (256 / 32) + 3) * 16] = 0x11;
  const cuda::DeviceLinear d = cuda::upload_linear(wide.w, true, cuda::Fp8Weights::kResident);
  EXPECT_FALSE(d.fp8);
  EXPECT_EQ(d.fp8_weight.bytes(), 0u);
}

// The two expansion kernels (STAVE_CUDA_EXPAND_KERNEL) write the same E4M3 bytes: over rows whose
// blocks take every shift from kMinShift to kMaxShift, all-zero blocks with exponents far outside
// the row's range, and shapes whose chunk count is not a multiple of the launch's blocks.
TEST(CudaLinearFp8, ExpandKernelsWriteTheSameBytes) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(23);
  for (const auto& [N, K] : std::vector<std::pair<int64_t, int64_t>>{{64, 512}, {257, 96}, {1024, 5120}, {3, 32}}) {
    SCOPED_TRACE(::testing::Message() << "N " << N << " K " << K);
    Mxfp4Weight h = make_mxfp4(rng, N, K, 127 - 7, 127 + 7, false, "expand_kernels");  // 14 binades
    for (int64_t b = 0; b < N * K / 32; b += 7) {  // all-zero blocks far below and above the range
      h.scales[b] = static_cast<uint8_t>(b % 2 ? 3 : 250);
      for (int j = 0; j < 16; ++j) h.codes[b * 16 + j] = (j % 2) ? 0x88 : 0x00;  // ±0
    }
    const cuda::DeviceLinear d = cuda::upload_linear(h.w, true);
    ASSERT_TRUE(d.fp8);
    cuda::DeviceBuffer a(static_cast<size_t>(N * K)), b(static_cast<size_t>(N * K));
    cuda::dev::expand_fp8(*d.fp8_source, a.as<uint8_t>(), nullptr, cuda::ExpandKernel::kFloat);
    cuda::dev::expand_fp8(*d.fp8_source, b.as<uint8_t>(), nullptr, cuda::ExpandKernel::kPerm);
    STAVE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint8_t> fa(static_cast<size_t>(N * K)), fb(fa.size());
    a.download(fa.data(), fa.size());
    b.download(fb.data(), fb.size());
    size_t first = fa.size();
    for (size_t i = 0; i < fa.size(); ++i)
      if (fa[i] != fb[i]) {
        first = i;
        break;
      }
    EXPECT_EQ(first, fa.size()) << "first differing byte (row " << first / K << ", column " << first % K << ")";
  }
}

// STAVE_CUDA_EXPAND_DEPTH=D expands up to D weights ahead in D + 1 buffers: the same bytes, so
// the same products bit for bit at every depth, over more weights than buffers; once the order is
// learned (two rounds), a round finds every weight ready.
TEST(CudaLinearFp8, ExpandAheadDepthGivesTheSameProducts) {
  STAVE_REQUIRE_GPU();
  const test::ScopedEnv no_small_m("STAVE_CUDA_SMALL_M", "off");
  std::mt19937 rng(22);
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{256, 512}, {1024, 256}, {128, 1024},
                                                           {512, 512}, {384, 256},  {256, 768}};
  std::vector<Mxfp4Weight> hosts;
  std::vector<cuda::DeviceLinear> weights;
  for (const auto& [N, K] : shapes) {
    hosts.push_back(make_mxfp4(rng, N, K, 118, 130, false, "ahead_depth"));
    weights.push_back(cuda::upload_linear(hosts.back().w, true));
    ASSERT_TRUE(weights.back().fp8);
  }
  const int64_t M = 96;
  std::vector<std::vector<float>> x, want;
  for (const auto& [N, K] : shapes) x.push_back(test::random_floats(rng, M * K, -2.0f, 2.0f));
  cuda::GpuContext plain(false);
  plain.set_linear_path(cuda::LinearPath::kFp8);
  {
    const test::ScopedEnv off("STAVE_CUDA_EXPAND_AHEAD", "off");
    for (size_t i = 0; i < shapes.size(); ++i) want.push_back(run_linear(plain, weights[i], x[i], M));
  }
  for (const char* depth : {"1", "2", "3", "4", "8"}) {
    SCOPED_TRACE(::testing::Message() << "depth " << depth);
    const test::ScopedEnv ahead("STAVE_CUDA_EXPAND_AHEAD", "on");
    const test::ScopedEnv d("STAVE_CUDA_EXPAND_DEPTH", depth);  // read with the context's first product
    cuda::GpuContext ctx(false);
    ctx.set_linear_path(cuda::LinearPath::kFp8);
    auto round = [&] {
      for (size_t i = 0; i < shapes.size(); ++i) {
        const auto got = run_linear(ctx, weights[i], x[i], M);
        ASSERT_EQ(got.size(), want[i].size());
        EXPECT_EQ(std::memcmp(got.data(), want[i].data(), got.size() * sizeof(float)), 0) << "weight " << i;
      }
    };
    round();
    round();
    const auto learned = cuda::dev::expand_ahead_counts(ctx);
    round();
    const auto after = cuda::dev::expand_ahead_counts(ctx);
    EXPECT_EQ(after.misses, learned.misses);
    EXPECT_EQ(after.hits, learned.hits + static_cast<int64_t>(shapes.size()));
    for (size_t i : {5u, 0u, 3u, 1u}) {  // another order: misses, the same bytes
      const auto got = run_linear(ctx, weights[i], x[i], M);
      EXPECT_EQ(std::memcmp(got.data(), want[i].data(), got.size() * sizeof(float)), 0) << "weight " << i;
    }
  }
}

// An Fp8Cache keeps copies in upload order while they fit its limit: with room for exactly two
// of three equal weights, the first two are kept and the third expands per product (counted),
// and its products are those of the same weight kept. No limit keeps all.
TEST(CudaLinearFp8, CacheLimitKeepsWeightsInUploadOrder) {
  STAVE_REQUIRE_GPU();
  const test::ScopedEnv no_small_m("STAVE_CUDA_SMALL_M", "off");
  const test::ScopedEnv no_ahead("STAVE_CUDA_EXPAND_AHEAD", "off");
  std::mt19937 rng(21);
  const int64_t M = 40, N = 256, K = 512;
  std::vector<Mxfp4Weight> hs;
  for (int i = 0; i < 3; ++i) hs.push_back(make_mxfp4(rng, N, K, 118, 130, /*bias=*/false, "fp8_cache"));
  const auto x = test::random_floats(rng, M * K, -2.0f, 2.0f);
  cuda::GpuContext ctx(false);
  ctx.set_linear_path(cuda::LinearPath::kFp8);

  cuda::Fp8Cache cache;
  cache.limit_bytes = 2 * N * K + N * K / 2;  // two copies and half of a third
  const auto before = cuda::linear_fp8_stats();
  std::vector<cuda::DeviceLinear> ds;
  for (const auto& h : hs) ds.push_back(cuda::upload_linear(h.w, true, cuda::Fp8Weights::kResident, &cache));
  EXPECT_EQ(ds[0].fp8_weight.bytes(), static_cast<size_t>(N * K));
  EXPECT_EQ(ds[1].fp8_weight.bytes(), static_cast<size_t>(N * K));
  EXPECT_EQ(ds[2].fp8_weight.bytes(), 0u);
  EXPECT_TRUE(ds[2].fp8);  // still on the FP8 path, expanded per product
  EXPECT_EQ(cache.kept, 2);
  EXPECT_EQ(cache.over, 1);
  EXPECT_EQ(cache.used_bytes, 2 * N * K);
  const auto after = cuda::linear_fp8_stats();
  EXPECT_EQ(after.weights_fp8_resident, before.weights_fp8_resident + 2);
  EXPECT_EQ(after.weights_fp8_over_limit, before.weights_fp8_over_limit + 1);

  // The third weight's products over a per-product expansion equal those over its kept copy.
  const cuda::DeviceLinear kept = cuda::upload_linear(hs[2].w, true, cuda::Fp8Weights::kResident);
  ASSERT_EQ(kept.fp8_weight.bytes(), static_cast<size_t>(N * K));
  const auto per = run_linear(ctx, ds[2], x, M);
  const auto from_copy = run_linear(ctx, kept, x, M);
  ASSERT_EQ(per.size(), from_copy.size());
  EXPECT_EQ(std::memcmp(per.data(), from_copy.data(), per.size() * sizeof(float)), 0);

  cuda::Fp8Cache unlimited;  // limit_bytes < 0
  for (const auto& h : hs)
    EXPECT_EQ(cuda::upload_linear(h.w, true, cuda::Fp8Weights::kResident, &unlimited).fp8_weight.bytes(),
              static_cast<size_t>(N * K));
  EXPECT_EQ(unlimited.kept, 3);
  EXPECT_EQ(unlimited.over, 0);
}

// A product of M rows (M not a multiple of 16) is written straight into the caller's output,
// no copy through scratch, and each row equals the same row of the product over the input with
// zero rows added up to the next multiple of 16 (the plan, its algorithm and each row's sums are
// the same), bit for bit.
TEST(CudaLinearFp8, RaggedRowsGoStraightToTheOutput) {
  STAVE_REQUIRE_GPU();
  const test::ScopedEnv no_small_m("STAVE_CUDA_SMALL_M", "off");
  std::mt19937 rng(5);
  const Mxfp4Weight h = make_mxfp4(rng, 1024, 512, 118, 130, /*bias=*/true, "ragged");
  const cuda::DeviceLinear d = cuda::upload_linear(h.w, true);
  ASSERT_TRUE(d.fp8);
  cuda::GpuContext ctx(false);
  ctx.set_linear_path(cuda::LinearPath::kFp8);
  for (const int64_t M : {int64_t{7}, int64_t{77}, int64_t{513}, int64_t{2046}}) {
    SCOPED_TRACE(::testing::Message() << "M " << M);
    const int64_t Mp = (M + 15) / 16 * 16;
    auto x = test::random_floats(rng, M * d.in, -2.0f, 2.0f);
    const auto before = cuda::linear_fp8_stats();
    const auto got = run_linear(ctx, d, x, M);
    const auto after = cuda::linear_fp8_stats();
    EXPECT_EQ(after.gemms_copied, before.gemms_copied);
    EXPECT_EQ(after.gemms_scaled_in_gemm, before.gemms_scaled_in_gemm + 1);
    x.resize(static_cast<size_t>(Mp * d.in), 0.0f);
    const auto padded = run_linear(ctx, d, x, Mp);
    ASSERT_EQ(got.size(), static_cast<size_t>(M * d.out));
    EXPECT_EQ(std::memcmp(got.data(), padded.data(), got.size() * sizeof(float)), 0);
  }
}

// STAVE_CUDA_EXPAND_AHEAD=on expands the next weight on a side stream while this one's product
// runs: the same bytes, so the same products bit for bit, in the order it learned (hits) and in
// one it did not (misses: expanded on the main stream), and with a weight freed and another
// uploaded since (never read from its stale expansion). One weight ahead (depth 1, whose hits
// and misses are counted below; ExpandAheadDepthGivesTheSameProducts takes the deeper forms).
TEST(CudaLinearFp8, ExpandAheadGivesTheSameProducts) {
  STAVE_REQUIRE_GPU();
  const test::ScopedEnv no_small_m("STAVE_CUDA_SMALL_M", "off");
  const test::ScopedEnv depth("STAVE_CUDA_EXPAND_DEPTH", "1");  // read at a context's first FP8 product
  std::mt19937 rng(21);
  struct Shape {
    int64_t N, K;
  };
  const std::vector<Shape> shapes = {{256, 512}, {1024, 256}, {128, 1024}, {512, 512}};
  std::vector<Mxfp4Weight> hosts;
  std::vector<cuda::DeviceLinear> weights;
  for (size_t i = 0; i < shapes.size(); ++i) {
    hosts.push_back(make_mxfp4(rng, shapes[i].N, shapes[i].K, 118, 130, i % 2 == 0, "ahead"));
    weights.push_back(cuda::upload_linear(hosts.back().w, true));
    ASSERT_TRUE(weights.back().fp8);
  }
  const int64_t M = 200;
  std::vector<std::vector<float>> x;
  for (const Shape s : shapes) x.push_back(test::random_floats(rng, M * s.K, -2.0f, 2.0f));
  std::vector<std::vector<float>> want;
  cuda::GpuContext plain(false);
  plain.set_linear_path(cuda::LinearPath::kFp8);
  {
    const test::ScopedEnv off("STAVE_CUDA_EXPAND_AHEAD", "off");  // read at the context's first product
    for (size_t i = 0; i < shapes.size(); ++i) want.push_back(run_linear(plain, weights[i], x[i], M));
  }
  ASSERT_EQ(cuda::dev::expand_ahead_counts(plain).misses, 0);

  const test::ScopedEnv ahead("STAVE_CUDA_EXPAND_AHEAD", "on");
  cuda::GpuContext ctx(false);
  ctx.set_linear_path(cuda::LinearPath::kFp8);
  auto check = [&](size_t i) {
    SCOPED_TRACE(::testing::Message() << "weight " << i);
    const auto got = run_linear(ctx, weights[i], x[i], M);
    ASSERT_EQ(got.size(), want[i].size());
    EXPECT_EQ(std::memcmp(got.data(), want[i].data(), got.size() * sizeof(float)), 0);
  };
  for (int round = 0; round < 3; ++round)
    for (size_t i = 0; i < shapes.size(); ++i) check(i);
  // Misses: the first round, and the second round's first weight (the last one's successor is
  // learned only when the second round starts); every later product finds its weight ready.
  const auto learned = cuda::dev::expand_ahead_counts(ctx);
  const int64_t n = static_cast<int64_t>(shapes.size());
  EXPECT_EQ(learned.misses, n + 1);
  EXPECT_EQ(learned.hits, 2 * n - 1);
  for (size_t i : {3u, 1u, 2u, 0u, 2u}) check(i);  // another order: misses, same bytes
  EXPECT_GT(cuda::dev::expand_ahead_counts(ctx).misses, learned.misses);
  // Weight 1 freed and a different one uploaded in its place: its product is its own.
  weights[1] = cuda::DeviceLinear();
  hosts[1] = make_mxfp4(rng, shapes[1].N, shapes[1].K, 118, 130, false, "ahead_new");
  weights[1] = cuda::upload_linear(hosts[1].w, true);
  want[1] = run_linear(plain, weights[1], x[1], M);
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < shapes.size(); ++i) check(i);
  std::vector<float> ref_out(static_cast<size_t>(M * shapes[1].N));
  ref::linear(hosts[1].w, x[1].data(), M, ref_out.data());
  EXPECT_LE(scaled_diff(run_linear(ctx, weights[1], x[1], M), ref_out), kTol);
}

// One product of weight d (uploaded from h) over x [M, d.in] on the fused path: its output, how
// many products the fused kernel ran for it, ref::linear's, and (with_cublaslt) the cuBLASLt FP8
// path's. STAVE_CUDA_FP8_ACCUM is read as the contexts make their first FP8 product.
struct FusedRun {
  std::vector<float> got, want, cublaslt;
  int64_t fused_gemms = 0;
};
FusedRun run_fused(const Mxfp4Weight& h, const cuda::DeviceLinear& d, const std::vector<float>& x, int64_t M,
                   bool with_cublaslt) {
  FusedRun r;
  cuda::GpuContext fused(false);
  fused.set_linear_path(cuda::LinearPath::kFp8Fused);
  const auto before = cuda::linear_fp8_stats();
  r.got = run_linear(fused, d, x, M);
  r.fused_gemms = cuda::linear_fp8_stats().gemms_fused - before.gemms_fused;
  if (with_cublaslt) {
    cuda::GpuContext lt(false);
    lt.set_linear_path(cuda::LinearPath::kFp8);
    r.cublaslt = run_linear(lt, d, x, M);
  }
  r.want.resize(static_cast<size_t>(M * d.out));
  ref::linear(h.w, x.data(), M, r.want.data());
  return r;
}

// The fused kernels (STAVE_CUDA_FUSED_KERNEL): the weight tile expanded into shared memory, and
// the weight expanded into wgmma's register operand. Each fused test runs both.
constexpr const char* kFusedKernels[] = {"smem", "registers"};

// The fused MXFP4 GEMM (gemm_mxfp4_fp8.h, LinearPath::kFp8Fused) against ref::linear and the
// cuBLASLt FP8 path: ragged M (one row, a partial last tile, several tiles), long K, block
// exponents over the whole 14-binade range (every shift table), all-zero blocks with any
// exponent, bias; shapes it does not take (N % 128, K % 512) fall back to cuBLASLt.
TEST(CudaLinearFp8, FusedGemmMatchesReferenceAndCublasLt) {
  STAVE_REQUIRE_GPU();
  const test::ScopedEnv no_small_m("STAVE_CUDA_SMALL_M", "off");
  for (const char* kernel : kFusedKernels) {
    SCOPED_TRACE(kernel);
    const test::ScopedEnv which("STAVE_CUDA_FUSED_KERNEL", kernel);
    std::mt19937 rng(13);
    struct Case {
      int64_t M, N, K;
      int lo, hi;
    };
    for (const Case c : {Case{1, 128, 512, 118, 130}, {77, 256, 1024, 116, 130}, {128, 128, 512, 120, 127},
                         {200, 384, 2048, 116, 130}, {300, 1024, 5120, 118, 130}, {33, 256, 17408, 117, 131}}) {
      const bool bias = c.M % 2 == 1;
      SCOPED_TRACE(::testing::Message() << "M " << c.M << " N " << c.N << " K " << c.K << " exponents " << c.lo << "…"
                                        << c.hi << " bias " << bias);
      Mxfp4Weight h = make_mxfp4(rng, c.N, c.K, c.lo, c.hi, bias, "fp8_fused");
      // Row 3's block 1: all ±0 codes under exponent byte 0 (ignored by the row reference).
      for (int j = 0; j < 16; ++j) h.codes[(3 * (c.K / 32) + 1) * 16 + j] = (j % 2) ? 0x88 : 0x00;
      h.scales[3 * (c.K / 32) + 1] = 0;
      const auto x = test::random_floats(rng, c.M * c.K, -2.0f, 2.0f);
      const cuda::DeviceLinear d = cuda::upload_linear(h.w, true);
      ASSERT_TRUE(d.fp8);
      ASSERT_TRUE(cuda::dev::mxfp4_fp8_gemm_applies(d));
      const FusedRun r = run_fused(h, d, x, c.M, /*with_cublaslt=*/true);
      EXPECT_EQ(r.fused_gemms, 1);
      const double diff = scaled_diff(r.got, r.want), diff_lt = scaled_diff(r.got, r.cublaslt);
      EXPECT_LE(diff, kTol);
      EXPECT_LE(diff_lt, kTol);
      std::printf("fused (%s) M %lld N %lld K %lld: scaled diff %.3g against the reference, %.3g against cuBLASLt\n",
                  kernel, static_cast<long long>(c.M), static_cast<long long>(c.N), static_cast<long long>(c.K), diff,
                  diff_lt);
    }
    // STAVE_CUDA_FP8_ACCUM=block (every MX block's sum on its own): within the default bound.
    {
      const test::ScopedEnv block("STAVE_CUDA_FP8_ACCUM", "block");
      for (const Case c : {Case{77, 256, 1024, 116, 130}, {33, 256, 17408, 117, 131}, {300, 1024, 5120, 118, 130}}) {
        SCOPED_TRACE(::testing::Message() << "block accumulation M " << c.M << " N " << c.N << " K " << c.K);
        const Mxfp4Weight h = make_mxfp4(rng, c.N, c.K, c.lo, c.hi, true, "fp8_fused_block");
        const auto x = test::random_floats(rng, c.M * c.K, -2.0f, 2.0f);
        const FusedRun r = run_fused(h, cuda::upload_linear(h.w, true), x, c.M, /*with_cublaslt=*/false);
        EXPECT_LE(scaled_diff(r.got, r.want), kTol);
      }
    }
    // STAVE_CUDA_FP8_ACCUM=fast: the kernel without promotion (the MMAs' own accumulator over the
    // whole K), beside cuBLASLt's FAST_ACCUM. Fewer bits: a looser bound, which a wrong layout
    // (errors of the order of the outputs) still fails by far.
    {
      const test::ScopedEnv fast("STAVE_CUDA_FP8_ACCUM", "fast");
      for (const Case c : {Case{77, 256, 1024, 116, 130}, {33, 256, 17408, 117, 131}}) {
        SCOPED_TRACE(::testing::Message() << "fast accumulation M " << c.M << " N " << c.N << " K " << c.K);
        const Mxfp4Weight h = make_mxfp4(rng, c.N, c.K, c.lo, c.hi, true, "fp8_fused_fast");
        const auto x = test::random_floats(rng, c.M * c.K, -2.0f, 2.0f);
        const FusedRun r = run_fused(h, cuda::upload_linear(h.w, true), x, c.M, /*with_cublaslt=*/true);
        EXPECT_EQ(r.fused_gemms, 1);
        const double diff = scaled_diff(r.got, r.want), diff_lt = scaled_diff(r.cublaslt, r.want);
        EXPECT_LE(diff, 4e-3);
        EXPECT_LE(diff_lt, 4e-3);
        std::printf("fused (%s), fast accumulation, K %lld: scaled diff %.3g (cuBLASLt FAST_ACCUM %.3g)\n",
                    kernel, static_cast<long long>(c.K), diff, diff_lt);
      }
    }
    for (const Case c : {Case{40, 144, 512, 120, 127}, {40, 128, 256, 120, 127}}) {
      SCOPED_TRACE(::testing::Message() << "fallback N " << c.N << " K " << c.K);
      const Mxfp4Weight h = make_mxfp4(rng, c.N, c.K, c.lo, c.hi, true, "fp8_fused_fallback");
      const cuda::DeviceLinear d = cuda::upload_linear(h.w, true);
      EXPECT_FALSE(cuda::dev::mxfp4_fp8_gemm_applies(d));
      const auto x = test::random_floats(rng, c.M * c.K, -2.0f, 2.0f);
      const FusedRun r = run_fused(h, d, x, c.M, /*with_cublaslt=*/false);
      EXPECT_EQ(r.fused_gemms, 0);
      EXPECT_LE(scaled_diff(r.got, r.want), kTol);
    }
  }
}

// STAVE_CUDA_FP8_ACCUM=block: every MX block's 32 products summed by one MMA from zero, which
// the kernel's note argues is exact (13 significant bits needed), then fp32 additions in K
// order. If so, the product equals, bit for bit, this host model: each block's dot product of
// the QDQ'd activation and the dequantized weight in double (exact), rounded to fp32 (exact),
// added in fp32 block by block, then the bias.
TEST(CudaLinearFp8, FusedGemmBlockSumsAreExact) {
  STAVE_REQUIRE_GPU();
  const test::ScopedEnv no_small_m("STAVE_CUDA_SMALL_M", "off");
  const test::ScopedEnv block("STAVE_CUDA_FP8_ACCUM", "block");
  for (const char* kernel : kFusedKernels) {
    SCOPED_TRACE(kernel);
    const test::ScopedEnv which("STAVE_CUDA_FUSED_KERNEL", kernel);
    std::mt19937 rng(14);
    const int64_t M = 77, N = 256, K = 5120;
    const Mxfp4Weight h = make_mxfp4(rng, N, K, 116, 130, /*bias=*/true, "fp8_fused_block");
    const auto x = test::random_floats(rng, M * K, -2.0f, 2.0f);
    const cuda::DeviceLinear d = cuda::upload_linear(h.w, true);
    ASSERT_TRUE(cuda::dev::mxfp4_fp8_gemm_applies(d));
    cuda::GpuContext ctx(false);
    ctx.set_linear_path(cuda::LinearPath::kFp8Fused);
    const auto got = run_linear(ctx, d, x, M);

    std::vector<float> xq(static_cast<size_t>(M * K)), wv(static_cast<size_t>(N * K));
    for (int64_t m = 0; m < M; ++m) mxfp4::qdq_row(x.data() + m * K, K, xq.data() + m * K);
    for (int64_t n = 0; n < N; ++n)
      mxfp4::dequantize_row(h.codes.data() + n * (K / 2), h.scales.data() + n * (K / 32), K, wv.data() + n * K);
    int64_t differ = 0;
    double worst = 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        float sum = 0.0f;
        for (int64_t b = 0; b < K / 32; ++b) {
          double dot = 0;
          for (int64_t i = b * 32; i < b * 32 + 32; ++i) dot += static_cast<double>(xq[m * K + i]) * wv[n * K + i];
          ASSERT_EQ(static_cast<double>(static_cast<float>(dot)), dot);  // the block's sum fits fp32
          sum += static_cast<float>(dot);
        }
        const float want = sum + h.bias[n];
        const float have = got[m * N + n];
        if (std::memcmp(&want, &have, sizeof(float)) != 0) {
          ++differ;
          worst = std::max(worst, std::fabs(static_cast<double>(want) - have) / std::max(1.0f, std::fabs(want)));
        }
      }
    std::printf("block sums (%s): %lld of %lld outputs differ from the exact-block model (worst relative %.3g)\n",
                kernel, static_cast<long long>(differ), static_cast<long long>(M * N), worst);
    EXPECT_EQ(differ, 0);
  }
}

TEST(CudaLinearFp8, Fp8WeightsFromEnvironment) {
  {
    const test::ScopedEnv e("STAVE_CUDA_FP8_WEIGHTS", "resident");
    EXPECT_EQ(cuda::fp8_weights_from_env(), cuda::Fp8Weights::kResident);
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_FP8_WEIGHTS", "always");
    EXPECT_THROW(cuda::fp8_weights_from_env(), Error);
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_FP8_ACCUM", "block");
    EXPECT_EQ(cuda::fp8_accum_from_env(), cuda::Fp8Accum::kBlock);
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_FP8_ACCUM", "exact");
    EXPECT_THROW(cuda::fp8_accum_from_env(), Error);
  }
  const test::ScopedEnv e("STAVE_CUDA_FP8_WEIGHTS", nullptr);
  EXPECT_EQ(cuda::fp8_weights_from_env(), cuda::Fp8Weights::kExpandPerProduct);
}

}  // namespace
}  // namespace stave
