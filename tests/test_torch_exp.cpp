// torch_order::exp (torch.exp on fp32 CPU = MKL VML vsExp, HA, AVX-512 kernel) against pairs
// (x, torch.exp(x)) that tools/reference/probe_exp.py recorded on the reference machine.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "ops/torch_cpu_order.h"
#include "test_util.h"

namespace stave {
namespace {

namespace to = ref::torch_order;

std::vector<float> load_pairs() {
  return test::read_floats(std::string(STAVE_SOURCE_DIR) + "/tests/data/torch_exp_probe.bin");
}

TEST(TorchExp, MatchesReferenceProbesBitForBit) {
  const std::vector<float> v = load_pairs();
  ASSERT_GE(v.size(), 2u * 19000u) << "tests/data/torch_exp_probe.bin missing or short";
  int64_t mismatches = 0, differs_from_double = 0;
  for (size_t i = 0; i + 1 < v.size(); i += 2) {
    const float x = v[i], want = v[i + 1], got = to::exp(x);
    if (std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(want)) {
      if (++mismatches <= 10) ADD_FAILURE() << std::hexfloat << "x=" << x << " torch=" << want << " got=" << got;
    }
    if (static_cast<float>(std::exp(static_cast<double>(x))) != want) ++differs_from_double;
  }
  EXPECT_EQ(mismatches, 0);
  // The sample is chosen to discriminate: 8000 of its pairs are not the correctly rounded exp.
  EXPECT_GE(differs_from_double, 7900);
}

TEST(TorchExp, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(to::exp(0.0f), 1.0f);
  EXPECT_EQ(to::exp(-0.0f), 1.0f);
  EXPECT_EQ(to::exp(-inf), 0.0f);
  EXPECT_EQ(to::exp(inf), inf);
  EXPECT_EQ(to::exp(89.0f), inf);
  EXPECT_EQ(to::exp(-110.0f), 0.0f);
  EXPECT_TRUE(std::isnan(to::exp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(to::exp(std::numeric_limits<float>::denorm_min()), 1.0f);
  EXPECT_EQ(to::exp(-std::numeric_limits<float>::denorm_min()), 1.0f);
  // Faithful everywhere on a sweep (the kernel's error is at most 0.572 ulp).
  for (float x = -87.0f; x < 88.0f; x += 0.01234f) {
    const double e = std::exp(static_cast<double>(x)), got = to::exp(x);
    EXPECT_LE(std::abs(got - e), 0.58 * std::ldexp(1.0, std::ilogb(static_cast<float>(e)) - 23)) << x;
  }
}

}  // namespace
}  // namespace stave
