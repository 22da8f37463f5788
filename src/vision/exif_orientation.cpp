// EXIF Orientation and PIL's transposes: what `PIL.ImageOps.exif_transpose` does to a still
// image (transformers' load_image calls it before convert("RGB")).
#include <cstring>

#include "vision/decoders.h"

namespace stave::vision_detail {
namespace {

struct TiffReader {
  std::string_view d;
  bool little = true;
  bool ok(size_t off, size_t n) const { return off <= d.size() && n <= d.size() - off; }
  uint32_t u16(size_t off) const {
    const auto* p = reinterpret_cast<const unsigned char*>(d.data() + off);
    return little ? (p[0] | p[1] << 8) : (p[0] << 8 | p[1]);
  }
  uint32_t u32(size_t off) const {
    const auto* p = reinterpret_cast<const unsigned char*>(d.data() + off);
    return little ? (uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24)
                  : (uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]));
  }
};

}  // namespace

int exif_orientation(std::string_view tiff) {
  if (tiff.size() >= 6 && std::memcmp(tiff.data(), "Exif\0\0", 6) == 0) tiff.remove_prefix(6);
  TiffReader r{tiff};
  if (!r.ok(0, 8)) return 1;
  if (tiff.substr(0, 4) == std::string_view("II\x2a\x00", 4)) r.little = true;
  else if (tiff.substr(0, 4) == std::string_view("MM\x00\x2a", 4)) r.little = false;
  else return 1;
  const size_t ifd = r.u32(4);
  if (!r.ok(ifd, 2)) return 1;
  const uint32_t entries = r.u16(ifd);
  for (uint32_t i = 0; i < entries; ++i) {
    const size_t e = ifd + 2 + static_cast<size_t>(i) * 12;
    if (!r.ok(e, 12)) return 1;
    if (r.u16(e) != 0x0112) continue;
    const uint32_t type = r.u16(e + 2), count = r.u32(e + 4);
    if (count < 1) return 1;
    if (type == 3) return static_cast<int>(r.u16(e + 8));  // SHORT, stored in the value field
    if (type == 4) {                                       // LONG
      const uint32_t v = r.u32(e + 8);
      return v <= 8 ? static_cast<int>(v) : 1;
    }
    return 1;
  }
  return 1;
}

RgbImage apply_orientation(const RgbImage& in, int orientation) {
  const int64_t W = in.width, H = in.height;
  const bool swap = orientation >= 5;
  RgbImage out;
  out.width = swap ? H : W;
  out.height = swap ? W : H;
  out.rgb.resize(in.rgb.size());
  for (int64_t y = 0; y < out.height; ++y) {
    for (int64_t x = 0; x < out.width; ++x) {
      int64_t sy = y, sx = x;
      switch (orientation) {
        case 2: sx = W - 1 - x; break;                      // FLIP_LEFT_RIGHT
        case 3: sy = H - 1 - y; sx = W - 1 - x; break;      // ROTATE_180
        case 4: sy = H - 1 - y; break;                      // FLIP_TOP_BOTTOM
        case 5: sy = x; sx = y; break;                      // TRANSPOSE
        case 6: sy = H - 1 - x; sx = y; break;              // ROTATE_270 (90° clockwise)
        case 7: sy = H - 1 - x; sx = W - 1 - y; break;      // TRANSVERSE
        case 8: sy = x; sx = W - 1 - y; break;              // ROTATE_90 (counter-clockwise)
        default: break;
      }
      std::memcpy(out.rgb.data() + (y * out.width + x) * 3, in.pixel(sy, sx), 3);
    }
  }
  return out;
}

}  // namespace stave::vision_detail
