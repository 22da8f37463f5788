// Interleaved M-RoPE: cos/sin tables and the rotation against a direct transcription of the
// spec (qwen35.md §3.4) on non-trivial 3-row positions, and the text-only reduction to
// ordinary partial RoPE.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ops/backend.h"
#include "ops/rope.h"

namespace stave {
namespace {

TEST(OpsRope, AxisOfEachFrequencyFollowsTheSpec) {
  RopeSpec spec{64, 1e7, {11, 11, 10}};
  for (int64_t i = 0; i < 32; ++i) {
    // T: {0,3,…,30}, H: {1,4,…,31}, W: {2,5,…,29}  (spec §3.4)
    const int want = i % 3 == 0 ? 0 : i % 3 == 1 ? 1 : 2;
    EXPECT_EQ(spec.axis_of(i), want) << i;
  }
  RopeSpec tiny{8, 1e4, {2, 1, 1}};  // fixture model: 4 frequencies
  EXPECT_EQ(tiny.axis_of(0), 0);
  EXPECT_EQ(tiny.axis_of(1), 1);
  EXPECT_EQ(tiny.axis_of(2), 2);
  EXPECT_EQ(tiny.axis_of(3), 0);
  RopeSpec short_w{12, 1e4, {3, 2, 1}};  // sections shorter than 3·s: later slots fall back to T
  EXPECT_EQ(short_w.axis_of(4), 1);
  EXPECT_EQ(short_w.axis_of(5), 0);  // 5 % 3 == 2 but 5 >= 3·s_W
  EXPECT_EQ(short_w.axis_of(7), 0);  // 7 % 3 == 1 but 7 >= 3·s_H
}

TEST(OpsRope, RotationMatchesDirectFormulaOnThreeRowPositions) {
  const int64_t head_dim = 32, heads = 3, tokens = 9, rot = 24, half = rot / 2;
  const RopeSpec spec{rot, 1e4, {5, 4, 3}};
  // Positions as an image block would get them: T constant, H/W varying.
  std::vector<int32_t> pt(tokens), ph(tokens), pw(tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    pt[t] = 7 + static_cast<int32_t>(t / 6);
    ph[t] = 7 + static_cast<int32_t>((t % 6) / 3) + 40;
    pw[t] = 7 + static_cast<int32_t>(t % 3) + 900;
  }
  std::vector<float> cos(tokens * half), sin(tokens * half);
  ref::mrope_cos_sin(spec, pt.data(), ph.data(), pw.data(), tokens, cos.data(), sin.data());

  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(tokens * heads * head_dim);
  for (auto& v : x) v = nd(rng);
  std::vector<float> y = x;
  reference_backend().apply_rope(y.data(), tokens, heads, head_dim, rot, cos.data(), sin.data());

  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      const float* in = &x[(t * heads + h) * head_dim];
      const float* out = &y[(t * heads + h) * head_dim];
      for (int64_t i = 0; i < half; ++i) {
        // Spec: H if i%3==1 and i<3·s_H; W if i%3==2 and i<3·s_W; T otherwise.
        const int32_t p = (i % 3 == 1 && i < 3 * 4) ? ph[t] : (i % 3 == 2 && i < 3 * 3) ? pw[t] : pt[t];
        // The angle is an fp32 product of fp32 operands (spec), so it carries fp32 rounding
        // (~1e-4 rad at φ≈900); a wrong axis would be off by whole radians.
        const float inv_freq = static_cast<float>(std::pow(1e4, -2.0 * static_cast<double>(i) / rot));
        const double phi = static_cast<float>(p) * inv_freq;
        const double a = in[i], b = in[i + half];
        EXPECT_NEAR(out[i], a * std::cos(phi) - b * std::sin(phi), 1e-4) << t << "," << h << "," << i;
        EXPECT_NEAR(out[i + half], b * std::cos(phi) + a * std::sin(phi), 1e-4) << t << "," << h << "," << i;
      }
      for (int64_t i = rot; i < head_dim; ++i) EXPECT_EQ(out[i], in[i]);  // pass-through dims
    }
}

TEST(OpsRope, TextPositionsGiveOrdinaryPartialRope) {
  const RopeSpec spec{8, 1e4, {2, 1, 1}};
  const int64_t tokens = 50;
  std::vector<int32_t> pos(tokens);
  for (int64_t t = 0; t < tokens; ++t) pos[t] = static_cast<int32_t>(t);
  std::vector<float> cos(tokens * 4), sin(tokens * 4);
  ref::mrope_cos_sin(spec, pos.data(), pos.data(), pos.data(), tokens, cos.data(), sin.data());
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < 4; ++i) {
      const double phi = t * std::pow(1e4, -i / 4.0);  // θ^(−2i/rot)
      EXPECT_NEAR(cos[t * 4 + i], std::cos(phi), 1e-5);
      EXPECT_NEAR(sin[t * 4 + i], std::sin(phi), 1e-5);
    }
}

}  // namespace
}  // namespace stave
