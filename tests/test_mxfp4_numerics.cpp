// MXFP4 numerics against the reference vectors (Quark "even" scale, RNE E2M1), bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <gtest/gtest.h>

#include "formats/mxfp4.h"
#include "test_util.h"
#include "util/bf16.h"

namespace stave {
namespace {

TEST(Mxfp4Numerics, QdqVectorsBitExact) {
  STAVE_REQUIRE_FIXTURE("public/mxfp4/qdq-vectors.json");
  // The file is Python's json.dump output: an overflowing dequantized value (2 x 2^127) is
  // written as the non-standard literal Infinity, which we turn into the string "inf".
  std::string text = read_file(test::fixture("public/mxfp4/qdq-vectors.json"));
  for (size_t p = text.find("Infinity"); p != std::string::npos; p = text.find("Infinity", p))
    text.replace(p, 8, "\"inf\"");
  auto j = nlohmann::json::parse(text);
  ASSERT_GT(j["blocks"].size(), 0u);
  int checked = 0;
  for (const auto& b : j["blocks"]) {
    std::vector<float> x;
    for (const auto& bits : b["input_bits"]) x.push_back(f32_from_bits(bits.get<uint32_t>()));
    std::vector<uint8_t> codes(x.size());
    int e = mxfp4::quantize_block(x.data(), static_cast<int>(x.size()), codes.data());
    EXPECT_EQ(e, b["scale_exponent"].get<int>()) << "block " << checked;
    std::vector<float> dq(x.size());
    mxfp4::qdq_row(x.data(), static_cast<int64_t>(x.size()), dq.data());
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(codes[i], b["codes"][i].get<int>()) << "block " << checked << " element " << i;
      const auto& d = b["dequant"][i];
      float want = d.is_string() ? (d.get<std::string>()[0] == '-' ? -INFINITY : INFINITY) : d.get<float>();
      EXPECT_EQ(f32_bits(dq[i]), f32_bits(want)) << "block " << checked << " element " << i;
    }
    ++checked;
  }
}

TEST(Mxfp4Numerics, TieTableRoundsHalfToEven) {
  // spec §1.5: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5.0->4
  const float in[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 7.0f, -0.2f};
  const float out[] = {0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f, 6.0f, 0.0f};
  for (size_t i = 0; i < sizeof in / sizeof in[0]; ++i) {
    uint8_t c = mxfp4::quantize_e2m1(in[i]);
    EXPECT_EQ(mxfp4::kE2M1Values[c], out[i]) << in[i];
    EXPECT_NE(c, 8) << "Quark never emits -0";
  }
}

// Quark's element quantizer as its definition reads: divide by the grid step, round to nearest
// even, multiply back, saturate at 6, then look the value up in the grid.
uint8_t e2m1_by_definition(float v) {
  const float a = std::fabs(v);
  if (std::isnan(a)) return 0;
  float q = 6.0f;
  if (a < 6.0f) {
    const float step = a < 2.0f ? 0.5f : (a < 4.0f ? 1.0f : 2.0f);
    q = std::min(std::nearbyint(a / step) * step, 6.0f);
  }
  if (q == 0.0f) return 0;
  uint8_t code = 0;
  for (uint8_t c = 0; c < 8; ++c)
    if (mxfp4::kE2M1Values[c] == q) code = c;
  return static_cast<uint8_t>(code | (std::signbit(v) ? 8 : 0));
}

TEST(Mxfp4Numerics, ElementQuantizerEqualsItsDefinition) {
  // Every midpoint and its neighbours, both signs.
  for (float t : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f})
    for (float v : {std::nextafter(t, 0.0f), t, std::nextafter(t, 8.0f)})
      for (float s : {1.0f, -1.0f}) EXPECT_EQ(mxfp4::quantize_e2m1(s * v), e2m1_by_definition(s * v)) << s * v;
  // Every 97th bit pattern from 0 to 8 (both signs), then a stride through all floats
  // (subnormals, huge values, infinities, NaNs).
  int64_t checked = 0;
  for (uint32_t b = 0; b <= f32_bits(8.0f); b += 97)
    for (uint32_t sign : {0u, 0x80000000u}) {
      const float v = f32_from_bits(b | sign);
      ASSERT_EQ(mxfp4::quantize_e2m1(v), e2m1_by_definition(v)) << v;
      ++checked;
    }
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 65521) {
    const float v = f32_from_bits(static_cast<uint32_t>(b));
    ASSERT_EQ(mxfp4::quantize_e2m1(v), e2m1_by_definition(v)) << std::hex << b;
    ++checked;
  }
  EXPECT_GT(checked, 2'000'000);
}

TEST(Mxfp4Numerics, ExportScaleByteOfZeroBlockIsOne) {
  float zeros[32] = {};
  uint8_t codes[32];
  int e = mxfp4::quantize_block(zeros, 32, codes);
  EXPECT_EQ(e, -127);
  EXPECT_EQ(mxfp4::export_scale_byte(e), 1);
}

}  // namespace
}  // namespace stave
