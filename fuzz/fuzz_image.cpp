// libFuzzer target: image bytes -> decode_image -> preprocess_image. Any input must give an
// RgbImage / VisionPatches or a stave::Error; a crash, sanitizer report, leak, hang or other
// exception is a finding. The first byte picks the declared content type (mostly "sniff") so
// that the content-type check is fuzzed too; the pixel limit is lowered to keep runs fast.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/model_config.h"
#include "stave/errors.h"
#include "vision/image_decode.h"
#include "vision/preprocess.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const char* const kTypes[] = {"", "", "", "", "image/png", "image/jpeg", "image/webp", "image/gif"};
  const char* type = kTypes[data[0] & 7];
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);

  stave::ImageDecodeOptions options;
  options.max_pixels = 1 << 20;
  options.max_jpeg_scans = 100;
  stave::ImageProcessorConfig processor;  // Clef's release: 64² .. 256² pixels, patch 16, merge 2
  processor.min_pixels = 4096;
  processor.max_pixels = 65536;
  try {
    stave::RgbImage image = stave::decode_image(type, bytes, "image 1", options);
    if (image.rgb.size() != static_cast<size_t>(image.width * image.height * 3)) __builtin_trap();
    stave::VisionPatches p = stave::preprocess_image(image, processor);
    if (p.pixel_values.size() != static_cast<size_t>(p.rows * p.row_size)) __builtin_trap();
  } catch (const stave::Error&) {
  }
  return 0;
}
