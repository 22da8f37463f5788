// The small-M MXFP4 W4A4 kernel (src/backends/cuda/linear_small_m.h) against ref::linear,
// dispatched by dev::linear with STAVE_CUDA_SMALL_M=mxfp4 (a call counter proves it ran): M = 1,
// 2, 5, 8, 16 on random shapes (one and two rows per warp, a missing last row, one chunk per
// lane or several, bias or not, scale bytes down to 0) and the Clef shapes 5120→17408 and
// 17408→5120 at M = 1 and 8 (the reference on a slice of output rows at each end, to keep it
// fast). Also: the switch off or exact precision keeps today's path; an unknown value is an
// Error naming the variable.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/device_buffer.h"
#include "backends/cuda/linear_small_m.h"
#include "cuda_linear_test_util.h"
#include "formats/linear_weight.h"
#include "ops/reference.h"
#include "stave/errors.h"
#include "test_env.h"

namespace stave {
namespace {

using test::make_mxfp4;
using test::Mxfp4Weight;
using test::run_linear;
using test::scaled_diff;

constexpr const char* kVar = "STAVE_CUDA_SMALL_M";

// STAVE_CUDA_SMALL_M set (or unset, nullptr) for one scope.
struct ScopedSwitch : test::ScopedEnv {
  explicit ScopedSwitch(const char* value) : test::ScopedEnv(kVar, value) {}
};

// Output rows [r0, r0 + n) of w as a weight of its own (same storage).
LinearWeight row_slice(const LinearWeight& w, int64_t r0, int64_t n) {
  LinearWeight s = w;
  s.out = n;
  s.data = static_cast<const uint8_t*>(w.data) + r0 * static_cast<int64_t>(w.row_bytes());
  s.scales = w.scales + r0 * (w.in / 32);
  if (w.bias) s.bias = w.bias + r0;
  return s;
}

// Exact products, fp32 sums in another order than the reference's: a few fp32 roundings of the
// largest partial sums (K ≤ 17408).
constexpr double kTol = 5e-5;

// Compares rows [r0, r0 + n) of the GPU's y [M, N] with ref::linear on that slice of w.
void expect_rows_match(const Mxfp4Weight& h, const std::vector<float>& x, int64_t M, const std::vector<float>& got,
                       int64_t r0, int64_t n) {
  const int64_t N = h.w.out;
  std::vector<float> want(static_cast<size_t>(M * n)), part(static_cast<size_t>(M * n));
  ref::linear(row_slice(h.w, r0, n), x.data(), M, want.data());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < n; ++j) part[m * n + j] = got[m * N + r0 + j];
  const double diff = scaled_diff(part, want);
  EXPECT_LE(diff, kTol) << "rows " << r0 << " … " << r0 + n - 1;
  std::printf("small-M M %lld N %lld K %lld rows %lld+%lld: scaled diff %.3g\n", static_cast<long long>(M),
              static_cast<long long>(N), static_cast<long long>(h.w.in), static_cast<long long>(r0),
              static_cast<long long>(n), diff);
}

struct Shape {
  int64_t M, N, K;
};

void check_shape(std::mt19937& rng, const Shape& s, bool bias, int64_t slice, int lo = 110, int hi = 135) {
  SCOPED_TRACE(::testing::Message() << "M " << s.M << " N " << s.N << " K " << s.K << " bias " << bias);
  const Mxfp4Weight h = make_mxfp4(rng, s.N, s.K, lo, hi, bias, "small_m_test");
  const auto x = test::random_floats(rng, static_cast<size_t>(s.M * s.K), -3.0f, 3.0f);
  cuda::GpuContext ctx(/*exact=*/false);
  // No FP8 check: the kernel reads only the packed weight (and the wide random scale ranges
  // here would have the check name the weight on stderr).
  const cuda::DeviceLinear d = cuda::upload_linear(h.w, /*fp8_check=*/false);
  ASSERT_TRUE(cuda::dev::linear_small_m_applies(ctx, d, s.M));
  const int64_t before = cuda::linear_small_m_calls();
  const auto got = run_linear(ctx, d, x, s.M);
  EXPECT_EQ(cuda::linear_small_m_calls(), before + 1);
  if (slice >= s.N) {
    expect_rows_match(h, x, s.M, got, 0, s.N);
  } else {
    expect_rows_match(h, x, s.M, got, 0, slice);
    expect_rows_match(h, x, s.M, got, s.N - slice, slice);
  }
}

TEST(CudaLinearSmallM, RandomShapesEveryM) {
  STAVE_REQUIRE_GPU();
  const ScopedSwitch on("mxfp4");
  std::mt19937 rng(24);
  // N = 4227: two rows per warp for M ≤ 8 (N ≥ 4224), the last warp missing its second row;
  // K = 1056: 33 chunks, lane 0 takes two; K = 32: one chunk, 31 idle lanes.
  const Shape shapes[] = {{1, 1, 32},     {1, 96, 1056},  {2, 7, 64},     {2, 4227, 64},  {5, 300, 256},
                          {5, 4227, 96},  {8, 64, 4096},  {8, 4227, 160}, {16, 33, 1056}, {16, 4227, 64},
                          {1, 4224, 128}, {16, 130, 32}};
  bool bias = false;
  for (const Shape& s : shapes) {
    check_shape(rng, s, bias, s.N);
    bias = !bias;
  }
}

TEST(CudaLinearSmallM, ScaleByteExtremes) {
  STAVE_REQUIRE_GPU();
  const ScopedSwitch on("mxfp4");
  std::mt19937 rng(25);
  // Scale bytes 0 (2^-127, a subnormal scale) … 140: tiny blocks beside ordinary ones.
  check_shape(rng, {3, 40, 512}, true, 40, 0, 140);
}

TEST(CudaLinearSmallM, ClefShapes) {
  STAVE_REQUIRE_GPU();
  const ScopedSwitch on("mxfp4");
  std::mt19937 rng(26);
  for (const Shape s : {Shape{1, 17408, 5120}, {8, 17408, 5120}, {1, 5120, 17408}, {8, 5120, 17408}})
    check_shape(rng, s, s.M == 8, /*slice=*/192, 118, 130);
}

TEST(CudaLinearSmallM, OffExactAndLargeMKeepTodaysPath) {
  STAVE_REQUIRE_GPU();
  std::mt19937 rng(27);
  const Mxfp4Weight h = make_mxfp4(rng, 64, 128, 120, 130, false, "small_m_test");
  const cuda::DeviceLinear d = cuda::upload_linear(h.w, true);
  cuda::GpuContext fast(false), exact(true);
  {
    // Unset: the default bound (kSmallMDefaultMax rows), fast precision only.
    const ScopedSwitch unset(nullptr);
    EXPECT_TRUE(cuda::dev::linear_small_m_applies(fast, d, 1));
    EXPECT_TRUE(cuda::dev::linear_small_m_applies(fast, d, cuda::kSmallMDefaultMax));
    EXPECT_FALSE(cuda::dev::linear_small_m_applies(fast, d, cuda::kSmallMDefaultMax + 1));
    EXPECT_FALSE(cuda::dev::linear_small_m_applies(exact, d, 1));
  }
  {
    const ScopedSwitch off("off");
    EXPECT_FALSE(cuda::dev::linear_small_m_applies(fast, d, 1));
  }
  const ScopedSwitch on("mxfp4");
  EXPECT_TRUE(cuda::dev::linear_small_m_applies(fast, d, cuda::kSmallMMax));
  EXPECT_FALSE(cuda::dev::linear_small_m_applies(fast, d, cuda::kSmallMMax + 1));
  EXPECT_FALSE(cuda::dev::linear_small_m_applies(exact, d, 1));
  const int64_t M = 4;
  const auto x = test::random_floats(rng, static_cast<size_t>(M * 128), -2.0f, 2.0f);
  std::vector<float> want(static_cast<size_t>(M * 64));
  ref::linear(h.w, x.data(), M, want.data());
  const int64_t before = cuda::linear_small_m_calls();
  EXPECT_LE(scaled_diff(run_linear(exact, d, x, M), want), 1e-5);
  EXPECT_EQ(cuda::linear_small_m_calls(), before);
}

TEST(CudaLinearSmallM, UnknownSwitchValueNamesTheVariable) {
  const ScopedSwitch bad("int4");
  try {
    cuda::small_m_path_from_env();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(kVar), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stave
