// The FP8 path of fast-precision MXFP4 W4A4 linear layers (src/backends/cuda/linear_fp8.h)
// against ref::linear: both ways of applying the row scales (in cuBLASLt's GEMM, after it), ragged
// M, a Clef shape, and each fallback — a weight whose block exponents do not fit one row
// reference (BF16 products, counted), activation blocks below their row's FP8 range (rounded,
// counted), all-zero blocks with any exponent (ignored), N not a multiple of 16 (BF16 path).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/device_buffer.h"
#include "backends/cuda/linear_fp8.h"
#include "cuda_linear_test_util.h"
#include "formats/linear_weight.h"
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
    const test::ScopedEnv e("STAVE_CUDA_LINEAR", "int4");
    EXPECT_THROW(cuda::linear_path_from_env(), Error);
  }
  const test::ScopedEnv e("STAVE_CUDA_LINEAR", nullptr);
  EXPECT_EQ(cuda::linear_path_from_env(), cuda::LinearPath::kFp8);
}

}  // namespace
}  // namespace stave
