// WebP through libwebp with its default decoding options (fancy upsampling, no dithering), as
// PIL's WebP plugin uses them; the RGB samples are the same whether PIL asks for RGB or RGBA,
// and alpha is dropped by convert("RGB"). Animated WebP is refused (PIL would show the first
// frame composited on the canvas; stave does not implement that).
#include <webp/decode.h>

#include <cstring>

#include "stave/errors.h"
#include "vision/decoders.h"

namespace stave::vision_detail {
namespace {

uint32_t le32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return uint32_t(u[0]) | uint32_t(u[1]) << 8 | uint32_t(u[2]) << 16 | uint32_t(u[3]) << 24;
}

// The EXIF chunk of an extended (VP8X) WebP, "" if none.
std::string find_exif_chunk(std::string_view b) {
  size_t pos = 12;
  while (pos + 8 <= b.size()) {
    const std::string_view fourcc = b.substr(pos, 4);
    const uint64_t size = le32(b.data() + pos + 4);
    if (size > b.size() - pos - 8) break;
    if (fourcc == "EXIF") return std::string(b.substr(pos + 8, size));
    pos += 8 + size + (size & 1);
  }
  return {};
}

const char* status_text(VP8StatusCode s) {
  switch (s) {
    case VP8_STATUS_OK: return "ok";
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "file is truncated";
  }
  return "unknown error";
}

}  // namespace

DecodedPicture decode_webp(std::string_view bytes, const std::string& label, const ImageDecodeOptions& options) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) throw Error(ErrorKind::kInternal, "libwebp version mismatch");
  VP8StatusCode st = WebPGetFeatures(data, bytes.size(), &config.input);
  if (st != VP8_STATUS_OK)
    throw Error(ErrorKind::kInvalidRequest, label + ": corrupt WebP (header: " + status_text(st) + ")");
  if (config.input.has_animation)
    throw Error(ErrorKind::kUnsupported, label + ": animated WebP is not supported");
  check_dimensions(config.input.width, config.input.height, label, options);

  DecodedPicture pic;
  pic.image.width = config.input.width;
  pic.image.height = config.input.height;
  pic.image.rgb.resize(static_cast<size_t>(pic.image.width) * pic.image.height * 3);
  config.output.colorspace = MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = pic.image.rgb.data();
  config.output.u.RGBA.stride = static_cast<int>(pic.image.width * 3);
  config.output.u.RGBA.size = pic.image.rgb.size();
  st = WebPDecode(data, bytes.size(), &config);
  WebPFreeDecBuffer(&config.output);  // frees nothing external; required by the API contract
  if (st != VP8_STATUS_OK)
    throw Error(ErrorKind::kInvalidRequest, label + ": corrupt WebP (image data: " + status_text(st) + ")");
  if (options.apply_exif_orientation) pic.exif = find_exif_chunk(bytes);
  return pic;
}

}  // namespace stave::vision_detail
