// torch_order::cos / sin (torch.cos / torch.sin on fp32 CPU = MKL VML HA = Intel's svml cosf16 /
// sinf16 AVX-512 kernels, both their main path and the large-argument path) against triples
// (x, torch.cos(x), torch.sin(x)) that tools/reference/probe_cos_sin.py recorded on the reference
// machine: 4000 each of uniform |x| ≤ 10000, random bit patterns with |x| ≤ 10000, RoPE angles
// fl(pos · inv_freq) and random bit patterns with 10000 < |x| < 1e6.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "ops/torch_cpu_order.h"
#include "test_util.h"

namespace stave {
namespace {

namespace to = ref::torch_order;

std::vector<float> load_triples() {
  return test::read_floats(std::string(STAVE_SOURCE_DIR) + "/tests/data/torch_cos_sin_probe.bin");
}

TEST(TorchCosSin, MatchesReferenceProbesBitForBit) {
  const std::vector<float> v = load_triples();
  ASSERT_EQ(v.size(), 3u * 16000u) << "tests/data/torch_cos_sin_probe.bin missing or short";
  int64_t cos_mismatch = 0, sin_mismatch = 0, large = 0, differs_from_double = 0;
  for (size_t i = 0; i < v.size(); i += 3) {
    const float x = v[i], c = v[i + 1], s = v[i + 2];
    const float gc = to::cos(x), gs = to::sin(x);
    if (std::bit_cast<uint32_t>(gc) != std::bit_cast<uint32_t>(c) && ++cos_mismatch <= 5)
      ADD_FAILURE() << std::hexfloat << "cos x=" << x << " torch=" << c << " got=" << gc;
    if (std::bit_cast<uint32_t>(gs) != std::bit_cast<uint32_t>(s) && ++sin_mismatch <= 5)
      ADD_FAILURE() << std::hexfloat << "sin x=" << x << " torch=" << s << " got=" << gs;
    large += std::fabs(x) > 10000.0f;
    differs_from_double += static_cast<float>(std::cos(static_cast<double>(x))) != c;
    differs_from_double += static_cast<float>(std::sin(static_cast<double>(x))) != s;
  }
  EXPECT_EQ(cos_mismatch, 0);
  EXPECT_EQ(sin_mismatch, 0);
  EXPECT_GE(large, 4000);  // the large-argument path is exercised
  // The sample discriminates: hundreds of its values are not the correctly rounded cos/sin.
  EXPECT_GE(differs_from_double, 800);
}

TEST(TorchCosSin, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(to::cos(0.0f), 1.0f);
  EXPECT_EQ(to::sin(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(to::sin(-0.0f)));
  EXPECT_TRUE(std::isnan(to::cos(inf)));
  EXPECT_TRUE(std::isnan(to::sin(-inf)));
  EXPECT_TRUE(std::isnan(to::cos(std::numeric_limits<float>::quiet_NaN())));
  // Faithful on a sweep through both paths (the kernels are within 0.6 ulp).
  for (float x = -2e6f; x < 2e6f; x += 977.25f) {
    const double c = std::cos(static_cast<double>(x)), s = std::sin(static_cast<double>(x));
    EXPECT_LE(std::fabs(to::cos(x) - c), std::ldexp(1.0, std::ilogb(c) - 23) + 1e-30) << x;
    EXPECT_LE(std::fabs(to::sin(x) - s), std::ldexp(1.0, std::ilogb(s) - 23) + 1e-30) << x;
  }
}

}  // namespace
}  // namespace stave
