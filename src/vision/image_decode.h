// Image bytes (PNG, JPEG, WebP) to 8-bit RGB, the way the reference gets its pixels:
// transformers' `load_image` opens the bytes with PIL, applies `ImageOps.exif_transpose` and
// `convert("RGB")` (alpha dropped, not composited; palette looked up; grey replicated; 16-bit
// grey clipped at 255; 16-bit colour truncated to the high byte; CMYK JPEG via PIL's Adobe
// inversion and cmyk2rgb). See docs/vision.md for each rule and where it comes from.
//
// Every failure a request can cause is a stave::Error naming the image and what is wrong:
// a declared content type that the bytes contradict, an unknown format, a size over the pixel
// limit (checked from the header, before any pixel is decoded), truncated or corrupt data.
// Decoder errors never crash or leak: libpng/libjpeg report through setjmp/longjmp inside
// plain C-style functions that hold no C++ objects (src/vision/decode_*.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stave {

// One decoded picture (a still image, or later one video frame): rows top to bottom,
// 3 bytes per pixel (R, G, B).
struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> rgb;  // height * width * 3

  const uint8_t* pixel(int64_t y, int64_t x) const { return rgb.data() + (y * width + x) * 3; }
};

enum class ImageFormat { kPng, kJpeg, kWebp };
const char* image_format_name(ImageFormat f);          // "PNG", "JPEG", "WebP"
const char* image_format_content_type(ImageFormat f);  // "image/png", ...

// Workers AI's limit: 16.00 MP accepted, 16.38 MP refused.
inline constexpr int64_t kDefaultMaxImagePixels = 16'000'000;

struct ImageDecodeOptions {
  int64_t max_pixels = kDefaultMaxImagePixels;  // width * height, from the header
  // PIL's ImageOps.exif_transpose (EXIF Orientation 2..8 from JPEG APP1, PNG eXIf, WebP EXIF).
  // Off by default: Cloudflare's release code opens request images with PIL and only calls
  // convert("RGB"), so the reference ignores EXIF orientation.
  bool apply_exif_orientation = false;
  // A progressive JPEG with more scans than this is refused (a hostile file could otherwise
  // take minutes of CPU; libjpeg-turbo's djpeg recommends a similar cap).
  int max_jpeg_scans = 1000;
};

// The format named by the magic bytes. Throws kInvalidRequest
// "<label>: data is not a PNG, JPEG or WebP image" for anything else.
ImageFormat sniff_image_format(std::string_view bytes, const std::string& label);

// The format a content type names ("image/png", "image/jpeg" (also "image/jpg"),
// "image/webp"; case-insensitive, parameters after ';' ignored). Throws kInvalidRequest for
// any other type.
ImageFormat content_type_format(std::string_view content_type, const std::string& label);

// Decodes `bytes`. `content_type` must agree with the magic bytes (an empty content type
// means "sniff"). `label` names the image in errors, e.g. "image 2".
RgbImage decode_image(std::string_view content_type, std::string_view bytes, const std::string& label,
                      const ImageDecodeOptions& options = {});

}  // namespace stave
