// PNG through libpng, converted to RGB exactly as PIL's PngImagePlugin + convert("RGB"):
//   grey 1/2/4 bit -> v * 255 / (2^d - 1); grey 8 -> v; grey 16 -> min(v, 255) (PIL's I;16 -> RGB
//   clips); grey+alpha -> grey (16-bit: high byte); RGB/RGBA 16-bit -> high byte; alpha and
//   tRNS dropped; palette indices looked up, an index past the palette gives PIL's grey ramp
//   (i, i, i); no gamma.
// libpng reports errors by longjmp, so every libpng call sits in a small function below that
// owns no C++ object: a longjmp out of libpng lands in that function's setjmp and skips no
// destructor. Buffers are allocated by the C++ caller before the call.
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "stave/errors.h"
#include "vision/decoders.h"

namespace stave::vision_detail {
namespace {

struct PngContext {
  const unsigned char* data;
  size_t size;
  size_t pos;
  char message[256];
};

void png_read_from_memory(png_structp png, png_bytep out, size_t n) {
  auto* ctx = static_cast<PngContext*>(png_get_io_ptr(png));
  if (n > ctx->size - ctx->pos) png_error(png, "file is truncated");
  std::memcpy(out, ctx->data + ctx->pos, n);
  ctx->pos += n;
}

void png_on_error(png_structp png, png_const_charp msg) {
  auto* ctx = static_cast<PngContext*>(png_get_error_ptr(png));
  std::snprintf(ctx->message, sizeof ctx->message, "%s", msg ? msg : "unknown error");
  png_longjmp(png, 1);
}

void png_on_warning(png_structp, png_const_charp) {}

struct PngHeader {
  png_uint_32 width, height;
  int bit_depth, color_type;
  size_t rowbytes;
};

// Reads the chunks up to the first IDAT. No C++ objects here.
bool png_read_header_c(png_structp png, png_infop info, png_uint_32 max_dim, PngHeader* h) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_user_limits(png, max_dim, max_dim);
  png_set_chunk_malloc_max(png, 8u << 20);
  png_set_crc_action(png, PNG_CRC_DEFAULT, PNG_CRC_ERROR_QUIT);
  // Text and colour-profile chunks are never used: skip them unparsed (no decompression).
  static const png_byte kSkip[] = {'t', 'E', 'X', 't', 0, 'z', 'T', 'X', 't', 0, 'i', 'T', 'X', 't', 0,
                                   'i', 'C', 'C', 'P', 0, 's', 'P', 'L', 'T', 0};
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, kSkip, 5);
  png_read_info(png, info);
  int interlace = 0, compression = 0, filter = 0;
  png_get_IHDR(png, info, &h->width, &h->height, &h->bit_depth, &h->color_type, &interlace, &compression, &filter);
  return true;
}

// Sets up the transforms (after the size check: libpng allocates row buffers here).
bool png_setup_c(png_structp png, png_infop info, PngHeader* h) {
  if (setjmp(png_jmpbuf(png))) return false;
  // 16-bit colour keeps its high byte in PIL ("RGB;16B", "RGBA;16B", "LA;16B" unpackers);
  // only 16-bit grey needs the whole value (it is clipped, not scaled).
  if (h->bit_depth == 16 && h->color_type != PNG_COLOR_TYPE_GRAY) png_set_strip_16(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  h->rowbytes = png_get_rowbytes(png, info);
  return true;
}

bool png_read_rows_c(png_structp png, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  return true;
}

// Chunks after the image (an eXIf may sit there). PIL stops quietly at a broken or missing
// trailer, so a failure here only means "no more metadata".
bool png_read_end_c(png_structp png, png_infop end_info) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_end(png, end_info);
  return true;
}

bool png_get_exif_c(png_structp png, png_infop info, png_bytep* exif, png_uint_32* size) {
  if (setjmp(png_jmpbuf(png))) return false;
#ifdef PNG_eXIf_SUPPORTED
  return png_get_eXIf_1(png, info, size, exif) != 0;
#else
  return false;
#endif
}

class PngReader {
 public:
  explicit PngReader(PngContext* ctx) {
    png_ = png_create_read_struct(PNG_LIBPNG_VER_STRING, ctx, png_on_error, png_on_warning);
    if (png_) info_ = png_create_info_struct(png_);
    if (png_) end_ = png_create_info_struct(png_);
    if (png_) png_set_read_fn(png_, ctx, png_read_from_memory);
  }
  ~PngReader() { png_destroy_read_struct(png_ ? &png_ : nullptr, info_ ? &info_ : nullptr, end_ ? &end_ : nullptr); }
  PngReader(const PngReader&) = delete;
  PngReader& operator=(const PngReader&) = delete;
  bool ok() const { return png_ && info_ && end_; }
  png_structp png() const { return png_; }
  png_infop info() const { return info_; }
  png_infop end() const { return end_; }

 private:
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
  png_infop end_ = nullptr;
};

// One decoded row to RGB.
void convert_row(const PngHeader& h, const png_color* palette, int num_palette, const unsigned char* in,
                 unsigned char* out) {
  const png_uint_32 W = h.width;
  switch (h.color_type) {
    case PNG_COLOR_TYPE_GRAY:
      if (h.bit_depth == 16) {
        for (png_uint_32 x = 0; x < W; ++x) {
          const unsigned v = in[2 * x] ? 255u : in[2 * x + 1];  // big-endian; clip at 255
          out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = static_cast<unsigned char>(v);
        }
      } else if (h.bit_depth == 8) {
        for (png_uint_32 x = 0; x < W; ++x) out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = in[x];
      } else {
        const int d = h.bit_depth, per_byte = 8 / d;
        const unsigned mask = (1u << d) - 1, scale = 255u / mask;
        for (png_uint_32 x = 0; x < W; ++x) {
          const int shift = 8 - d * (1 + static_cast<int>(x % per_byte));
          const unsigned v = ((in[x / per_byte] >> shift) & mask) * scale;
          out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = static_cast<unsigned char>(v);
        }
      }
      break;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      for (png_uint_32 x = 0; x < W; ++x) out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = in[2 * x];
      break;
    case PNG_COLOR_TYPE_RGB: std::memcpy(out, in, static_cast<size_t>(W) * 3); break;
    case PNG_COLOR_TYPE_RGB_ALPHA:
      for (png_uint_32 x = 0; x < W; ++x) std::memcpy(out + 3 * x, in + 4 * x, 3);
      break;
    case PNG_COLOR_TYPE_PALETTE: {
      const int d = h.bit_depth, per_byte = 8 / d;
      const unsigned mask = (1u << d) - 1;
      for (png_uint_32 x = 0; x < W; ++x) {
        const int shift = 8 - d * (1 + static_cast<int>(x % per_byte));
        const unsigned idx = (in[x / per_byte] >> shift) & mask;
        if (static_cast<int>(idx) < num_palette) {
          out[3 * x] = palette[idx].red;
          out[3 * x + 1] = palette[idx].green;
          out[3 * x + 2] = palette[idx].blue;
        } else {
          out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = static_cast<unsigned char>(idx);
        }
      }
      break;
    }
    default: break;
  }
}

}  // namespace

DecodedPicture decode_png(std::string_view bytes, const std::string& label, const ImageDecodeOptions& options) {
  PngContext ctx{reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), 0, {0}};
  PngReader r(&ctx);
  if (!r.ok()) throw Error(ErrorKind::kInternal, label + ": libpng could not allocate its state");
  auto fail = [&](const char* what) {
    return Error(ErrorKind::kInvalidRequest, label + ": corrupt PNG (" + std::string(what) + ": " + ctx.message + ")");
  };

  // libpng's own dimension limit stops absurd headers early; the pixel limit is checked next,
  // before libpng allocates any row buffer.
  const int64_t max_dim = std::clamp<int64_t>(options.max_pixels, 1, 0x7fffffff);
  PngHeader h{};
  if (!png_read_header_c(r.png(), r.info(), static_cast<png_uint_32>(max_dim), &h)) {
    if (std::strstr(ctx.message, "IHDR"))
      throw Error(ErrorKind::kInvalidRequest, label + ": PNG header is invalid or its dimensions exceed the " +
                                                  std::to_string(options.max_pixels) + "-pixel limit (" +
                                                  ctx.message + ")");
    throw fail("header");
  }
  check_dimensions(h.width, h.height, label, options);
  if (!png_setup_c(r.png(), r.info(), &h)) throw fail("setup");

  png_colorp palette = nullptr;
  int num_palette = 0;
  if (h.color_type == PNG_COLOR_TYPE_PALETTE) {
    if (png_get_PLTE(r.png(), r.info(), &palette, &num_palette) == 0) throw fail("palette");
  }

  std::vector<unsigned char> raw(h.rowbytes * h.height);
  std::vector<png_bytep> rows(h.height);
  for (png_uint_32 y = 0; y < h.height; ++y) rows[y] = raw.data() + static_cast<size_t>(y) * h.rowbytes;
  if (!png_read_rows_c(r.png(), rows.data())) throw fail("image data");

  DecodedPicture pic;
  pic.image.width = h.width;
  pic.image.height = h.height;
  pic.image.rgb.resize(static_cast<size_t>(h.width) * h.height * 3);
  for (png_uint_32 y = 0; y < h.height; ++y)
    convert_row(h, palette, num_palette, rows[y], pic.image.rgb.data() + static_cast<size_t>(y) * h.width * 3);
  raw.clear();
  raw.shrink_to_fit();

  if (options.apply_exif_orientation) {
    png_bytep exif = nullptr;
    png_uint_32 exif_size = 0;
    if (png_get_exif_c(r.png(), r.info(), &exif, &exif_size) && exif && exif_size) {
      pic.exif.assign(reinterpret_cast<const char*>(exif), exif_size);
    } else if (png_read_end_c(r.png(), r.end()) && png_get_exif_c(r.png(), r.end(), &exif, &exif_size) && exif &&
               exif_size) {
      pic.exif.assign(reinterpret_cast<const char*>(exif), exif_size);
    }
  }
  return pic;
}

}  // namespace stave::vision_detail
