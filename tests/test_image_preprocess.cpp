// The image processor against the reference's pixel_values (fixtures 017, 018), and
// smart_resize / resize against values fixed by the spec and by independent computation.
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "stave/errors.h"
#include "test_vision_util.h"
#include "vision/image_decode.h"
#include "vision/preprocess.h"

namespace stave {
namespace {

// All images of a case preprocessed and concatenated, as the processor's pixel_values.
struct CaseProcessed {
  std::vector<float> pixel_values;
  std::vector<std::array<int64_t, 3>> grids;
};

CaseProcessed process_case(const std::string& name) {
  const ImageProcessorConfig cfg = test::fixture_processor_config();
  CaseProcessed out;
  int i = 0;
  for (const auto& [type, bytes] : test::case_images(name)) {
    RgbImage img = decode_image(type, bytes, "image " + std::to_string(++i));
    VisionPatches p = preprocess_image(img, cfg);
    out.pixel_values.insert(out.pixel_values.end(), p.pixel_values.begin(), p.pixel_values.end());
    out.grids.push_back(p.grid_thw);
  }
  return out;
}

class PixelValuesFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(PixelValuesFixture, MatchesReferenceProcessor) {
  const std::string name = GetParam();
  STAVE_REQUIRE_FIXTURE("public/cases/" + name + "/pixel_values.safetensors");
  CaseProcessed got = process_case(name);

  // Grids as the reference reported them.
  nlohmann::json expected = test::read_json(test::fixture("public/cases/" + name + "/expected-bf16.json"));
  const auto& grids = expected["media"]["image_grid_thw"];
  ASSERT_EQ(grids.size(), got.grids.size());
  for (size_t i = 0; i < grids.size(); ++i)
    for (int k = 0; k < 3; ++k) EXPECT_EQ(grids[i][k].get<int64_t>(), got.grids[i][k]) << "image " << i;

  SafetensorsFile f(test::fixture("public/cases/" + name + "/pixel_values.safetensors"));
  const TensorRef* t = f.find("pixel_values");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->dtype, DType::kF32);
  ASSERT_EQ(t->shape.size(), 2u);
  ASSERT_EQ(static_cast<size_t>(t->numel()), got.pixel_values.size());
  std::vector<float> ref(got.pixel_values.size());
  std::memcpy(ref.data(), t->data, ref.size() * 4);
  double max_diff = 0;
  size_t mismatches = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = std::abs(static_cast<double>(ref[i]) - got.pixel_values[i]);
    max_diff = std::max(max_diff, d);
    if (d > 1e-5) ++mismatches;
  }
  EXPECT_LE(max_diff, 1e-5) << mismatches << " of " << ref.size() << " values differ";
  EXPECT_EQ(mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Cases, PixelValuesFixture, ::testing::Values("017-image-one", "018-image-two"));

// Examples of qwen35.md §4.1 (Qwen3.5's 256²..4096² pixel budget, factor 32).
TEST(SmartResize, SpecExamples) {
  struct Case {
    int64_t h, w, gh, gw;
  } cases[] = {{480, 640, 30, 40}, {224, 224, 16, 16}, {100, 3000, 6, 188}, {1080, 1920, 68, 120},
               {4000, 6000, 208, 312}};
  for (const auto& c : cases) {
    ResizedSize s = smart_resize(c.h, c.w, 32, 65536, 16777216);
    EXPECT_EQ(s.height / 16, c.gh) << c.h << "x" << c.w;
    EXPECT_EQ(s.width / 16, c.gw) << c.h << "x" << c.w;
  }
}

TEST(SmartResize, RoundsHalfToEvenLikePython) {
  // 48/32 = 1.5 -> 2, 80/32 = 2.5 -> 2 (Python round), 112/32 = 3.5 -> 4.
  EXPECT_EQ(smart_resize(48, 1024, 32, 1, 1 << 30).height, 64);
  EXPECT_EQ(smart_resize(80, 1024, 32, 1, 1 << 30).height, 64);
  EXPECT_EQ(smart_resize(112, 1024, 32, 1, 1 << 30).height, 128);
}

TEST(SmartResize, RefusesExtremeAspectRatioWithPythonText) {
  try {
    smart_resize(10, 2011, 32, 4096, 65536);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest);
    EXPECT_STREQ(e.what(), "absolute aspect ratio must be smaller than 200, got 201.1");
  }
  EXPECT_NO_THROW(smart_resize(10, 2000, 32, 4096, 65536));
}

TEST(SmartResize, TinyImageGrowsToMinPixels) {
  ResizedSize s = smart_resize(1, 1, 32, 4096, 65536);
  EXPECT_EQ(s.height, 64);
  EXPECT_EQ(s.width, 64);
}

TEST(SmartResize, MaxBranchKeepsAtLeastOneFactor) {
  ResizedSize s = smart_resize(40, 7000, 32, 4096, 65536);  // floor would give 0 rows
  EXPECT_EQ(s.height, 32);
  EXPECT_GT(s.width, 0);
  EXPECT_EQ(s.width % 32, 0);
}

// An independent float implementation of the antialiased separable filter (Pillow's
// definition, computed in double without fixed point): the uint8 kernel must be within one
// level of it per pass (two passes -> allow 2), and exact on constant images.
std::vector<double> reference_resize_1d(const std::vector<double>& in, int64_t out, bool bicubic) {
  const int64_t n = static_cast<int64_t>(in.size());
  const double scale = static_cast<double>(n) / out;
  const double fs = scale >= 1 ? scale : 1.0;
  const double support = (bicubic ? 2.0 : 1.0) * fs;
  auto filt = [&](double x) {
    x = std::abs(x);
    if (!bicubic) return x < 1 ? 1 - x : 0.0;
    const double a = -0.5;
    if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0.0;
  };
  std::vector<double> o(out);
  for (int64_t i = 0; i < out; ++i) {
    const double c = (i + 0.5) * scale;
    double acc = 0, tot = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double d = (j + 0.5 - c) / fs;
      if (std::abs(j + 0.5 - c) >= support) continue;
      const double w = filt(d);
      acc += w * in[j];
      tot += w;
    }
    o[i] = acc / tot;
  }
  return o;
}

TEST(ResizeAntialias, CloseToFloatDefinitionAndExactOnConstants) {
  std::mt19937 rng(7);
  for (ResampleFilter f : {ResampleFilter::kBicubic, ResampleFilter::kBilinear}) {
    for (auto [ih, iw, oh, ow] : std::vector<std::array<int64_t, 4>>{{13, 17, 32, 64}, {70, 100, 64, 96},
                                                                      {130, 37, 128, 32}, {9, 200, 31, 7}}) {
      RgbImage img;
      img.width = iw;
      img.height = ih;
      img.rgb.resize(iw * ih * 3);
      for (auto& v : img.rgb) v = static_cast<uint8_t>(rng() % 256);
      RgbImage got = resize_antialias_u8(img, oh, ow, f);
      ASSERT_EQ(got.width, ow);
      ASSERT_EQ(got.height, oh);
      for (int c = 0; c < 3; ++c) {
        // horizontal then vertical, both in double
        std::vector<std::vector<double>> tmp(ih);
        for (int64_t y = 0; y < ih; ++y) {
          std::vector<double> row(iw);
          for (int64_t x = 0; x < iw; ++x) row[x] = img.rgb[(y * iw + x) * 3 + c];
          tmp[y] = ow == iw ? row : reference_resize_1d(row, ow, f == ResampleFilter::kBicubic);
        }
        for (int64_t x = 0; x < ow; ++x) {
          std::vector<double> col(ih);
          for (int64_t y = 0; y < ih; ++y) col[y] = std::clamp(tmp[y][x], 0.0, 255.0);
          std::vector<double> r = oh == ih ? col : reference_resize_1d(col, oh, f == ResampleFilter::kBicubic);
          for (int64_t y = 0; y < oh; ++y)
            ASSERT_LE(std::abs(std::clamp(r[y], 0.0, 255.0) - got.rgb[(y * ow + x) * 3 + c]), 2.0)
                << ih << "x" << iw << "->" << oh << "x" << ow << " at " << y << "," << x;
        }
      }
      std::fill(img.rgb.begin(), img.rgb.end(), 200);
      RgbImage flat = resize_antialias_u8(img, oh, ow, f);
      for (uint8_t v : flat.rgb) ASSERT_EQ(v, 200);
    }
  }
}

TEST(Patchify, MergeBlockMajorOrderAndTemporalDuplicate) {
  // A 64x64 image whose pixel (y, x) encodes its position; check where each lands (spec §4.1).
  ImageProcessorConfig cfg;
  cfg.do_rescale = false;
  cfg.do_normalize = false;
  RgbImage img;
  img.width = img.height = 64;
  img.rgb.resize(64 * 64 * 3);
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 64; ++x) {
      img.rgb[(y * 64 + x) * 3 + 0] = static_cast<uint8_t>(y);
      img.rgb[(y * 64 + x) * 3 + 1] = static_cast<uint8_t>(x);
      img.rgb[(y * 64 + x) * 3 + 2] = static_cast<uint8_t>(y ^ x);
    }
  VisionPatches p = patchify_frames({&img}, cfg);
  EXPECT_EQ(p.grid_thw, (std::array<int64_t, 3>{1, 4, 4}));
  ASSERT_EQ(p.rows, 16);
  ASSERT_EQ(p.row_size, 3 * 2 * 16 * 16);
  for (int64_t r = 0; r < p.rows; ++r) {
    const int64_t bh = r / 8, bw = (r / 4) % 2, mh = (r / 2) % 2, mw = r % 2;
    const int64_t y0 = (bh * 2 + mh) * 16, x0 = (bw * 2 + mw) * 16;
    for (int c = 0; c < 3; ++c)
      for (int t = 0; t < 2; ++t)
        for (int py = 0; py < 16; ++py)
          for (int px = 0; px < 16; ++px) {
            const float v = p.pixel_values[r * p.row_size + ((c * 2 + t) * 16 + py) * 16 + px];
            const int y = static_cast<int>(y0 + py), x = static_cast<int>(x0 + px);
            const int want = c == 0 ? y : c == 1 ? x : (y ^ x);
            ASSERT_EQ(v, static_cast<float>(want)) << "row " << r << " c " << c << " t " << t;
          }
  }
}

}  // namespace
}  // namespace stave
