// Decoding + resizing against the reference processor on more images than the fixtures have:
// tests/data/alt/pixel_u8.safetensors holds, for each image of tests/data/alt/images (JPEG,
// RGBA/grey/palette PNG, WebP, 1x1, extreme aspect ratios) and two processor configs (the
// fixture's and the alt release's), the resized 8-bit pixels in pixel_values order and the
// grid, or the processor's error text (made by transformers 5.17 + PIL + torchvision; see
// tests/data/alt/README.md).
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "stave/errors.h"
#include "test_vision_util.h"
#include "vision/image_decode.h"
#include "vision/preprocess.h"

namespace stave {
namespace {

const std::string kDataDir = std::string(STAVE_SOURCE_DIR) + "/tests/data/alt";

std::string content_type_for(const std::string& file) {
  if (file.ends_with(".png")) return "image/png";
  if (file.ends_with(".jpg")) return "image/jpeg";
  if (file.ends_with(".webp")) return "image/webp";
  return "";
}

ImageProcessorConfig alt_processor_config() {
  ImageProcessorConfig c;  // the alt preset of stave synth: same as Qwen3.5 but 2048..131072 pixels
  c.min_pixels = 2048;
  c.max_pixels = 131072;
  return c;
}

TEST(ImageReferenceData, ResizedPixelsGridsAndErrorsMatchTheProcessor) {
  if (!std::filesystem::exists(kDataDir + "/pixel_u8.safetensors")) GTEST_SKIP() << "no tests/data/alt";
  STAVE_REQUIRE_FIXTURE("public/model-bf16/processor_config.json");
  SafetensorsFile ref(kDataDir + "/pixel_u8.safetensors");
  int checked = 0;
  for (const auto& [key, processor] : std::vector<std::pair<std::string, ImageProcessorConfig>>{
           {"fixture", test::fixture_processor_config()}, {"alt", alt_processor_config()}}) {
    for (const auto& entry : std::filesystem::directory_iterator(kDataDir + "/images")) {
      const std::string file = entry.path().filename().string();
      const std::string prefix = key + "/" + file + "/";
      SCOPED_TRACE(prefix);
      const std::string bytes = read_file(entry.path().string());
      RgbImage img = decode_image(content_type_for(file), bytes, "image");

      if (const TensorRef* err = ref.find(prefix + "error")) {
        const std::string want(reinterpret_cast<const char*>(err->data), err->nbytes);
        try {
          smart_resize(img.height, img.width, processor.patch_size * processor.merge_size, processor.min_pixels,
                       processor.max_pixels);
          ADD_FAILURE() << "expected the error: " << want;
        } catch (const Error& e) {
          EXPECT_EQ(std::string(e.what()), want);
        }
        ++checked;
        continue;
      }
      const TensorRef* grid = ref.find(prefix + "grid");
      const TensorRef* u8 = ref.find(prefix + "u8");
      ASSERT_TRUE(grid && u8) << "missing reference entries";
      int64_t g[3];
      std::memcpy(g, grid->data, sizeof g);

      const ResizedSize sz = smart_resize(img.height, img.width, processor.patch_size * processor.merge_size,
                                          processor.min_pixels, processor.max_pixels);
      const RgbImage resized =
          resize_antialias_u8(img, sz.height, sz.width, resample_filter_from_pil(processor.resample));
      ImageProcessorConfig raw = processor;
      raw.do_rescale = raw.do_normalize = false;  // keep the uint8 values
      const VisionPatches p = patchify_frames({&resized}, raw);
      EXPECT_EQ(p.grid_thw[0], g[0]);
      EXPECT_EQ(p.grid_thw[1], g[1]);
      EXPECT_EQ(p.grid_thw[2], g[2]);
      ASSERT_EQ(p.pixel_values.size(), u8->nbytes);
      size_t differ = 0;
      int worst = 0;
      for (size_t i = 0; i < u8->nbytes; ++i) {
        const int d = std::abs(static_cast<int>(p.pixel_values[i]) - static_cast<int>(u8->data[i]));
        if (d) ++differ;
        worst = std::max(worst, d);
      }
      EXPECT_EQ(differ, 0u) << "of " << u8->nbytes << " values, max |Δ| = " << worst;

      // The normalized values are those bytes through the fused (x - 127.5) / 127.5 (checked
      // bit-exactly on the fixtures' pixel_values); (u8/255 - 0.5)/0.5 agrees to an ulp.
      const VisionPatches full = preprocess_image(img, processor);
      ASSERT_EQ(full.pixel_values.size(), u8->nbytes);
      for (size_t i = 0; i < u8->nbytes; i += 97)
        ASSERT_NEAR(full.pixel_values[i], (static_cast<float>(u8->data[i]) / 255.0f - 0.5f) / 0.5f, 1e-6) << i;
      ++checked;
    }
  }
  EXPECT_GE(checked, 18);
}

}  // namespace
}  // namespace stave
