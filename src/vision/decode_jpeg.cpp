// JPEG through libjpeg-turbo with PIL's settings (its JpegDecode leaves libjpeg's defaults:
// islow IDCT, fancy upsampling), converted to RGB as PIL's JpegImagePlugin + convert("RGB"):
//   1 component -> grey replicated; 3 components -> libjpeg's RGB;
//   4 components (CMYK or YCCK) -> libjpeg's CMYK, inverted ("CMYK;I": PIL assumes Adobe's
//   inverted convention for every 4-component JPEG), then PIL's cmyk2rgb.
// A file that ends before its image data does is refused like PIL's "image file is
// truncated"; a baseline file that only lacks its final EOI marker is decoded.
// libjpeg reports errors through error_exit, which longjmps back into the small C-style
// functions below; they own no C++ object, so no destructor is skipped.
#include <cstddef>
#include <cstdio>  // jpeglib.h needs FILE
#include <csetjmp>
#include <cstring>
#include <memory>
#include <vector>

#include <jpeglib.h>
#include <jerror.h>

#include "stave/errors.h"
#include "vision/decoders.h"

namespace stave::vision_detail {
namespace {

struct JpegContext {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr err;
  jpeg_progress_mgr progress;
  std::jmp_buf jmp;
  int max_scans;
  bool created;
  bool in_trailer;     // all scanlines read: a missing EOI is harmless now
  bool eof_seen;       // the input ended (libjpeg inserted a fake EOI)
  char message[JMSG_LENGTH_MAX];
};

JpegContext* context_of(j_common_ptr cinfo) {
  return reinterpret_cast<JpegContext*>(reinterpret_cast<char*>(cinfo) - offsetof(JpegContext, cinfo));
}

void jpeg_on_error(j_common_ptr cinfo) {
  JpegContext* ctx = context_of(cinfo);
  (*cinfo->err->format_message)(cinfo, ctx->message);
  std::longjmp(ctx->jmp, 1);
}

void jpeg_on_message(j_common_ptr cinfo, int level) {
  // level -1 is a warning. libjpeg pads a file that ends early with grey; PIL refuses it
  // ("image file is truncated"), so an end of input that loses image data is an error here:
  //  - single-scan files: the end itself may only cut the EOI marker (all entropy data read);
  //    data is missing when the entropy decoder then runs into that fake EOI (JWRN_HIT_MARKER);
  //  - multi-scan (progressive) files: the whole input is absorbed up front, so an end before
  //    the trailer means scans are missing.
  // Other warnings (corrupt entropy data) are decoded through, as PIL does.
  if (level != -1) return;
  JpegContext* ctx = context_of(cinfo);
  if (ctx->in_trailer) return;
  const int code = cinfo->err->msg_code;
  bool truncated = false;
  if (code == JWRN_JPEG_EOF) {
    if (jpeg_has_multiple_scans(&ctx->cinfo)) truncated = true;
    else ctx->eof_seen = true;
  } else if (code == JWRN_HIT_MARKER && ctx->eof_seen) {
    truncated = true;
  }
  if (truncated) {
    std::snprintf(ctx->message, sizeof ctx->message, "file is truncated");
    std::longjmp(ctx->jmp, 1);
  }
}

void jpeg_on_output(j_common_ptr) {}

void jpeg_on_progress(j_common_ptr cinfo) {
  JpegContext* ctx = context_of(cinfo);
  if (ctx->cinfo.input_scan_number > ctx->max_scans) {
    std::snprintf(ctx->message, sizeof ctx->message, "more than %d progressive scans", ctx->max_scans);
    std::longjmp(ctx->jmp, 1);
  }
}

bool jpeg_read_header_c(JpegContext* ctx, const unsigned char* data, unsigned long size) {
  if (setjmp(ctx->jmp)) return false;
  jpeg_create_decompress(&ctx->cinfo);
  ctx->created = true;
  ctx->cinfo.progress = &ctx->progress;
  jpeg_mem_src(&ctx->cinfo, data, size);
  jpeg_save_markers(&ctx->cinfo, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(&ctx->cinfo, TRUE);
  return true;
}

bool jpeg_decode_c(JpegContext* ctx, J_COLOR_SPACE out_space, unsigned char* out, size_t stride) {
  if (setjmp(ctx->jmp)) return false;
  ctx->cinfo.out_color_space = out_space;
  jpeg_start_decompress(&ctx->cinfo);
  while (ctx->cinfo.output_scanline < ctx->cinfo.output_height) {
    JSAMPROW row = out + static_cast<size_t>(ctx->cinfo.output_scanline) * stride;
    jpeg_read_scanlines(&ctx->cinfo, &row, 1);
  }
  return true;
}

// Reads what follows the image (EOI); failures are ignored by the caller.
bool jpeg_finish_c(JpegContext* ctx) {
  if (setjmp(ctx->jmp)) return false;
  ctx->in_trailer = true;
  jpeg_finish_decompress(&ctx->cinfo);
  return true;
}

struct JpegGuard {
  JpegContext* ctx;
  ~JpegGuard() {
    if (ctx->created) jpeg_destroy_decompress(&ctx->cinfo);
  }
};

inline unsigned char clip8(int v) { return static_cast<unsigned char>(v < 0 ? 0 : v > 255 ? 255 : v); }
// PIL's MULDIV255: a * b / 255 rounded, in integers.
inline int muldiv255(int a, int b) {
  const int tmp = a * b + 128;
  return ((tmp >> 8) + tmp) >> 8;
}

}  // namespace

DecodedPicture decode_jpeg(std::string_view bytes, const std::string& label, const ImageDecodeOptions& options) {
  auto ctx = std::make_unique<JpegContext>();
  std::memset(ctx.get(), 0, sizeof(JpegContext));
  ctx->cinfo.err = jpeg_std_error(&ctx->err);
  ctx->err.error_exit = jpeg_on_error;
  ctx->err.emit_message = jpeg_on_message;
  ctx->err.output_message = jpeg_on_output;
  ctx->progress.progress_monitor = jpeg_on_progress;
  ctx->max_scans = options.max_jpeg_scans;
  JpegGuard guard{ctx.get()};
  auto fail = [&](const char* what) {
    return Error(ErrorKind::kInvalidRequest,
                 label + ": corrupt JPEG (" + std::string(what) + ": " + ctx->message + ")");
  };

  if (!jpeg_read_header_c(ctx.get(), reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<unsigned long>(bytes.size())))
    throw fail("header");
  const jpeg_decompress_struct& ci = ctx->cinfo;
  check_dimensions(ci.image_width, ci.image_height, label, options);

  J_COLOR_SPACE out_space;
  switch (ci.num_components) {
    case 1: out_space = JCS_GRAYSCALE; break;
    case 3: out_space = JCS_RGB; break;
    case 4:
      if (ci.jpeg_color_space != JCS_CMYK && ci.jpeg_color_space != JCS_YCCK)
        throw Error(ErrorKind::kUnsupported, label + ": 4-component JPEG that is neither CMYK nor YCCK");
      out_space = JCS_CMYK;
      break;
    default:
      throw Error(ErrorKind::kUnsupported,
                  label + ": JPEG with " + std::to_string(ci.num_components) + " components is not supported");
  }
  const size_t W = ci.image_width, H = ci.image_height;
  const size_t channels = static_cast<size_t>(ci.num_components);
  std::vector<unsigned char> raw(W * H * channels);
  if (!jpeg_decode_c(ctx.get(), out_space, raw.data(), W * channels)) throw fail("image data");
  if (ci.output_width != W || ci.output_height != H || static_cast<size_t>(ci.output_components) != channels)
    throw Error(ErrorKind::kInternal, label + ": libjpeg output size differs from the header");
  DecodedPicture pic;
  // Saved markers live in libjpeg's image pool, which jpeg_finish_decompress frees: read the
  // EXIF block first.
  for (jpeg_saved_marker_ptr m = ci.marker_list; m; m = m->next) {
    if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && std::memcmp(m->data, "Exif\0\0", 6) == 0) {
      pic.exif.assign(reinterpret_cast<const char*>(m->data) + 6, m->data_length - 6);
      break;
    }
  }
  jpeg_finish_c(ctx.get());

  pic.image.width = static_cast<int64_t>(W);
  pic.image.height = static_cast<int64_t>(H);
  if (channels == 3) {
    pic.image.rgb = std::move(raw);
  } else {
    pic.image.rgb.resize(W * H * 3);
    unsigned char* out = pic.image.rgb.data();
    const unsigned char* in = raw.data();
    if (channels == 1) {
      for (size_t i = 0; i < W * H; ++i) out[3 * i] = out[3 * i + 1] = out[3 * i + 2] = in[i];
    } else {
      for (size_t i = 0; i < W * H; ++i) {
        const unsigned char* p = in + 4 * i;
        // "CMYK;I": PIL stores 255 - v; cmyk2rgb then uses nk = 255 - K' = K.
        const int c = 255 - p[0], m = 255 - p[1], y = 255 - p[2], nk = p[3];
        out[3 * i] = clip8(nk - muldiv255(c, nk));
        out[3 * i + 1] = clip8(nk - muldiv255(m, nk));
        out[3 * i + 2] = clip8(nk - muldiv255(y, nk));
      }
    }
  }

  return pic;
}

}  // namespace stave::vision_detail
