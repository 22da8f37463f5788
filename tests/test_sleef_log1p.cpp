// torch_order::sleef_log1pf (the transcription of SLEEF's u10 log1pf that ATen's vectorized
// softplus calls): its documented accuracy (1.0 ulp) over the inputs softplus feeds it, its special
// values, and that it is the SLEEF algorithm rather than a correctly rounded log1p (the two differ
// on a small fraction of inputs). Bit-equality with torch itself rests on the fixtures' hidden
// states (test_backbone.cpp: the BF16 GDN gates go through it).
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "ops/torch_cpu_order.h"

namespace stave {
namespace {

namespace to = ref::torch_order;

double ulp_of(float v) { return std::ldexp(1.0, std::ilogb(v) - 23); }

TEST(SleefLog1p, WithinOneUlpOnSoftplusInputs) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> x(-30.0f, 20.0f);
  int differs = 0;
  for (int i = 0; i < 200000; ++i) {
    const float e = to::sleef_expf(x(rng));  // what softplus passes to log1pf
    const double want = std::log1p(static_cast<double>(e));
    const float got = to::sleef_log1pf(e);
    ASSERT_LE(std::abs(got - want), 1.0 * ulp_of(static_cast<float>(want))) << std::hexfloat << e;
    if (got != static_cast<float>(want)) ++differs;
  }
  EXPECT_GT(differs, 0) << "no input differs from the correctly rounded log1p: not SLEEF's algorithm";
  EXPECT_LT(differs, 200000 / 50);
}

TEST(SleefLog1p, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(to::sleef_log1pf(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(to::sleef_log1pf(-0.0f)));
  EXPECT_EQ(to::sleef_log1pf(-1.0f), -inf);
  EXPECT_TRUE(std::isnan(to::sleef_log1pf(-2.0f)));
  EXPECT_EQ(to::sleef_log1pf(inf), inf);
  EXPECT_NEAR(to::sleef_log1pf(1.0f), std::log(2.0f), 1e-7f);
  EXPECT_NEAR(to::sleef_log1pf(1e30f), std::log(1e30), 1e-5);
  // Close to −1 (1 + d subnormal-free but tiny) and tiny d.
  EXPECT_NEAR(to::sleef_log1pf(-0.999999f), std::log1p(static_cast<double>(-0.999999f)), 1e-5);
  EXPECT_NEAR(to::sleef_log1pf(1e-30f), 1e-30f, 1e-37f);
  // softplus: threshold and the two paths.
  EXPECT_EQ(to::softplus(25.0f, true), 25.0f);
  EXPECT_NEAR(to::softplus(0.0f, true), std::log(2.0f), 1e-7f);
  EXPECT_NEAR(to::softplus(-5.0f, false), std::log1p(std::exp(-5.0)), 1e-9);
}

}  // namespace
}  // namespace stave
