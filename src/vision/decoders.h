// The per-format decoders behind decode_image (src/vision/image_decode.h). Each one checks
// the header dimensions against the limit before decoding pixels, converts to RGB with PIL's
// rules, and returns the EXIF block it found (raw TIFF data, without the "Exif\0\0" prefix)
// so that the caller can apply the orientation.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "vision/image_decode.h"

namespace stave::vision_detail {

struct DecodedPicture {
  RgbImage image;
  std::string exif;  // TIFF-structured EXIF data, "" if none
};

DecodedPicture decode_png(std::string_view bytes, const std::string& label, const ImageDecodeOptions& options);
DecodedPicture decode_jpeg(std::string_view bytes, const std::string& label, const ImageDecodeOptions& options);
DecodedPicture decode_webp(std::string_view bytes, const std::string& label, const ImageDecodeOptions& options);

// Throws kRequestTooLarge when width * height exceeds the limit, kInvalidRequest for a zero
// dimension.
void check_dimensions(int64_t width, int64_t height, const std::string& label, const ImageDecodeOptions& options);

// EXIF Orientation (tag 0x0112 of IFD0) from TIFF-structured data; 1 when absent or invalid.
int exif_orientation(std::string_view tiff);

// PIL's Image.transpose for orientations 2..8 (what ImageOps.exif_transpose does).
RgbImage apply_orientation(const RgbImage& in, int orientation);

}  // namespace stave::vision_detail
