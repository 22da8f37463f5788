#include "vision/image_decode.h"

#include <cstring>

#include "stave/errors.h"
#include "vision/decoders.h"

namespace stave {

const char* image_format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kWebp: return "WebP";
  }
  return "?";
}

const char* image_format_content_type(ImageFormat f) {
  switch (f) {
    case ImageFormat::kPng: return "image/png";
    case ImageFormat::kJpeg: return "image/jpeg";
    case ImageFormat::kWebp: return "image/webp";
  }
  return "?";
}

ImageFormat sniff_image_format(std::string_view b, const std::string& label) {
  static constexpr unsigned char kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (b.size() >= 8 && std::memcmp(b.data(), kPng, 8) == 0) return ImageFormat::kPng;
  if (b.size() >= 3 && static_cast<unsigned char>(b[0]) == 0xFF && static_cast<unsigned char>(b[1]) == 0xD8 &&
      static_cast<unsigned char>(b[2]) == 0xFF)
    return ImageFormat::kJpeg;
  if (b.size() >= 12 && b.substr(0, 4) == "RIFF" && b.substr(8, 4) == "WEBP") return ImageFormat::kWebp;
  if (b.empty()) throw Error(ErrorKind::kInvalidRequest, label + ": image data is empty");
  throw Error(ErrorKind::kInvalidRequest, label + ": data is not a PNG, JPEG or WebP image");
}

ImageFormat content_type_format(std::string_view content_type, const std::string& label) {
  std::string t(content_type.substr(0, content_type.find(';')));
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.pop_back();
  size_t start = t.find_first_not_of(" \t");
  t = start == std::string::npos ? std::string() : t.substr(start);
  std::string lower = t;
  for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (lower == "image/png") return ImageFormat::kPng;
  if (lower == "image/jpeg" || lower == "image/jpg") return ImageFormat::kJpeg;
  if (lower == "image/webp") return ImageFormat::kWebp;
  throw Error(ErrorKind::kInvalidRequest,
              label + ": unsupported content type '" + t + "' (expected image/png, image/jpeg or image/webp)");
}

RgbImage decode_image(std::string_view content_type, std::string_view bytes, const std::string& label,
                      const ImageDecodeOptions& options) {
  const ImageFormat actual = sniff_image_format(bytes, label);
  if (!content_type.empty()) {
    const ImageFormat declared = content_type_format(content_type, label);
    if (declared != actual)
      throw Error(ErrorKind::kInvalidRequest, label + ": declared content type " +
                                                  image_format_content_type(declared) + " but the data is a " +
                                                  image_format_name(actual) + " image (" +
                                                  image_format_content_type(actual) + ")");
  }
  vision_detail::DecodedPicture pic;
  switch (actual) {
    case ImageFormat::kPng: pic = vision_detail::decode_png(bytes, label, options); break;
    case ImageFormat::kJpeg: pic = vision_detail::decode_jpeg(bytes, label, options); break;
    case ImageFormat::kWebp: pic = vision_detail::decode_webp(bytes, label, options); break;
  }
  if (options.apply_exif_orientation && !pic.exif.empty()) {
    const int orientation = vision_detail::exif_orientation(pic.exif);
    if (orientation >= 2 && orientation <= 8) return vision_detail::apply_orientation(pic.image, orientation);
  }
  return std::move(pic.image);
}

namespace vision_detail {

void check_dimensions(int64_t width, int64_t height, const std::string& label, const ImageDecodeOptions& options) {
  if (width <= 0 || height <= 0)
    throw Error(ErrorKind::kInvalidRequest, label + ": image has zero width or height");
  // Both are at most 2^31 in every format we read, so the product cannot overflow int64.
  if (width * height > options.max_pixels)
    throw Error(ErrorKind::kRequestTooLarge, label + ": image is " + std::to_string(width) + "x" +
                                                 std::to_string(height) + " = " + std::to_string(width * height) +
                                                 " pixels; the limit is " + std::to_string(options.max_pixels));
}

}  // namespace vision_detail
}  // namespace stave
