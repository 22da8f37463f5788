// Image decoding: every PNG colour type and bit depth against PIL's conversion rules computed
// from the raw samples; JPEG against stb_image (an independent decoder) and the CMYK rule;
// lossless WebP exactly; EXIF orientation against compositions of plain rotations; the
// content-type check, the pixel limit (from headers, before decoding), and truncated or
// mutated files (an error, never a crash).
#include <png.h>
#include <webp/encode.h>
#include <zlib.h>

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>

#include <jpeglib.h>

#include <gtest/gtest.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

#include "stave/errors.h"
#include "test_vision_util.h"
#include "vision/image_decode.h"

namespace stave {
namespace {

// ---------- writers (test-only; libpng/libjpeg errors abort the test binary) ----------

void png_abort(png_structp, png_const_charp msg) {
  std::fprintf(stderr, "libpng write error: %s\n", msg);
  std::abort();
}
void png_append(png_structp png, png_bytep data, size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), n);
}
void png_noflush(png_structp) {}

struct PngSpec {
  int width = 0, height = 0, color_type = PNG_COLOR_TYPE_RGB, bit_depth = 8;
  int interlace = PNG_INTERLACE_NONE;
  std::vector<png_color> palette;
  std::string exif;
  std::vector<std::vector<uint8_t>> rows;  // packed, as PNG stores them
};

std::string write_png(const PngSpec& s) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, png_abort, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(png, &out, png_append, png_noflush);
  png_set_benign_errors(png, 1);  // palette indices past the palette are written on purpose
  png_set_IHDR(png, info, s.width, s.height, s.bit_depth, s.color_type, s.interlace, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!s.palette.empty()) png_set_PLTE(png, info, s.palette.data(), static_cast<int>(s.palette.size()));
  if (!s.exif.empty())
    png_set_eXIf_1(png, info, static_cast<png_uint_32>(s.exif.size()),
                   reinterpret_cast<png_bytep>(const_cast<char*>(s.exif.data())));
  std::vector<png_bytep> rows;
  for (const auto& r : s.rows) rows.push_back(const_cast<png_bytep>(r.data()));
  png_set_rows(png, info, rows.data());
  png_write_png(png, info, PNG_TRANSFORM_IDENTITY, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

int channels_of(int color_type) {
  switch (color_type) {
    case PNG_COLOR_TYPE_GRAY: return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA: return 2;
    case PNG_COLOR_TYPE_RGB: return 3;
    case PNG_COLOR_TYPE_RGB_ALPHA: return 4;
    default: return 1;  // palette
  }
}

// Random samples packed into PNG rows; `sample(y, x, c)` reads them back.
struct RawImage {
  PngSpec spec;
  std::vector<std::vector<uint32_t>> samples;  // [y][x*ch + c]
};

RawImage random_png(int w, int h, int color_type, int depth, std::mt19937& rng, int palette_size = 0) {
  RawImage r;
  r.spec.width = w;
  r.spec.height = h;
  r.spec.color_type = color_type;
  r.spec.bit_depth = depth;
  const int ch = channels_of(color_type);
  const uint32_t maxv = depth == 16 ? 65535u : (1u << depth) - 1;
  for (int i = 0; i < palette_size; ++i)
    r.spec.palette.push_back({static_cast<png_byte>(rng()), static_cast<png_byte>(rng()), static_cast<png_byte>(rng())});
  for (int y = 0; y < h; ++y) {
    std::vector<uint32_t> s(static_cast<size_t>(w * ch));
    for (auto& v : s) {
      // 16-bit grey: mostly small values so that both sides of the 255 clip are exercised.
      if (depth == 16 && color_type == PNG_COLOR_TYPE_GRAY) v = rng() % 3 ? rng() % 300 : rng() % 65536;
      else v = rng() % (maxv + 1);
    }
    std::vector<uint8_t> packed;
    if (depth == 16) {
      for (uint32_t v : s) {
        packed.push_back(static_cast<uint8_t>(v >> 8));
        packed.push_back(static_cast<uint8_t>(v));
      }
    } else if (depth == 8) {
      for (uint32_t v : s) packed.push_back(static_cast<uint8_t>(v));
    } else {
      packed.assign((s.size() * depth + 7) / 8, 0);
      for (size_t i = 0; i < s.size(); ++i) packed[i * depth / 8] |= static_cast<uint8_t>(s[i] << (8 - depth - (i * depth) % 8));
    }
    r.samples.push_back(s);
    r.spec.rows.push_back(packed);
  }
  return r;
}

// PIL's Image.open + convert("RGB") for each PNG mode (Pillow's PngImagePlugin modes and its
// Convert.c/Unpack.c): the expected RGB of one pixel.
std::array<uint8_t, 3> pil_rgb(const RawImage& r, int y, int x) {
  const auto& s = r.samples[y];
  const int d = r.spec.bit_depth;
  auto eight = [&](uint32_t v) -> uint8_t { return static_cast<uint8_t>(d == 16 ? v >> 8 : v); };
  switch (r.spec.color_type) {
    case PNG_COLOR_TYPE_GRAY: {
      uint32_t v = s[x];
      uint8_t g = d == 16 ? static_cast<uint8_t>(std::min<uint32_t>(v, 255))  // I;16 -> RGB clips
                          : static_cast<uint8_t>(v * (255 / ((1u << d) - 1)));
      return {g, g, g};
    }
    case PNG_COLOR_TYPE_GRAY_ALPHA: return {eight(s[2 * x]), eight(s[2 * x]), eight(s[2 * x])};
    case PNG_COLOR_TYPE_RGB: return {eight(s[3 * x]), eight(s[3 * x + 1]), eight(s[3 * x + 2])};
    case PNG_COLOR_TYPE_RGB_ALPHA: return {eight(s[4 * x]), eight(s[4 * x + 1]), eight(s[4 * x + 2])};
    case PNG_COLOR_TYPE_PALETTE: {
      uint32_t i = s[x];
      if (i < r.spec.palette.size()) return {r.spec.palette[i].red, r.spec.palette[i].green, r.spec.palette[i].blue};
      return {static_cast<uint8_t>(i), static_cast<uint8_t>(i), static_cast<uint8_t>(i)};  // PIL's grey ramp
    }
  }
  return {0, 0, 0};
}

struct PngCase {
  int color_type, depth, palette_size;
};

TEST(ImageDecodePng, EveryColourTypeAndDepthFollowsPil) {
  std::mt19937 rng(11);
  const PngCase cases[] = {
      {PNG_COLOR_TYPE_GRAY, 1, 0},      {PNG_COLOR_TYPE_GRAY, 2, 0},      {PNG_COLOR_TYPE_GRAY, 4, 0},
      {PNG_COLOR_TYPE_GRAY, 8, 0},      {PNG_COLOR_TYPE_GRAY, 16, 0},     {PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0},
      {PNG_COLOR_TYPE_GRAY_ALPHA, 16, 0}, {PNG_COLOR_TYPE_RGB, 8, 0},     {PNG_COLOR_TYPE_RGB, 16, 0},
      {PNG_COLOR_TYPE_RGB_ALPHA, 8, 0}, {PNG_COLOR_TYPE_RGB_ALPHA, 16, 0}, {PNG_COLOR_TYPE_PALETTE, 1, 2},
      {PNG_COLOR_TYPE_PALETTE, 2, 3},   {PNG_COLOR_TYPE_PALETTE, 4, 16},  {PNG_COLOR_TYPE_PALETTE, 8, 200},
  };
  for (const PngCase& c : cases) {
    for (int interlace : {PNG_INTERLACE_NONE, PNG_INTERLACE_ADAM7}) {
      SCOPED_TRACE("color_type " + std::to_string(c.color_type) + " depth " + std::to_string(c.depth) +
                   " interlace " + std::to_string(interlace));
      RawImage raw = random_png(13, 7, c.color_type, c.depth, rng, c.palette_size);
      raw.spec.interlace = interlace;
      const std::string bytes = write_png(raw.spec);
      RgbImage img = decode_image("image/png", bytes, "image 1");
      ASSERT_EQ(img.width, 13);
      ASSERT_EQ(img.height, 7);
      for (int y = 0; y < 7; ++y)
        for (int x = 0; x < 13; ++x) {
          const auto want = pil_rgb(raw, y, x);
          for (int k = 0; k < 3; ++k) ASSERT_EQ(img.pixel(y, x)[k], want[k]) << "at " << y << "," << x;
        }
      // An independent decoder agrees wherever PIL's rule is the plain one (stb_image keeps
      // the high byte of 16-bit grey instead of clipping).
      if (!(c.color_type == PNG_COLOR_TYPE_GRAY && c.depth == 16)) {
        int w = 0, h = 0, n = 0;
        unsigned char* stb = stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()),
                                                   static_cast<int>(bytes.size()), &w, &h, &n, 3);
        ASSERT_NE(stb, nullptr);
        if (c.color_type != PNG_COLOR_TYPE_PALETTE || c.palette_size == (1 << c.depth)) {
          EXPECT_EQ(0, std::memcmp(stb, img.rgb.data(), img.rgb.size()));
        }
        stbi_image_free(stb);
      }
    }
  }
}

TEST(ImageDecodePng, FixtureImagesDecodeWithTheirSizes) {
  STAVE_REQUIRE_FIXTURE("public/cases/018-image-two/request.json");
  auto images = test::case_images("018-image-two");
  ASSERT_EQ(images.size(), 2u);
  RgbImage a = decode_image(images[0].first, images[0].second, "image 1");
  RgbImage b = decode_image(images[1].first, images[1].second, "image 2");
  EXPECT_EQ(a.width, 100);
  EXPECT_EQ(a.height, 70);
  EXPECT_EQ(b.width, 37);
  EXPECT_EQ(b.height, 130);
}

// ---------- EXIF orientation ----------

std::string exif_with_orientation(int orientation, bool big_endian) {
  std::string t = big_endian ? std::string("MM\0\x2a\0\0\0\x08", 8) : std::string("II\x2a\0\x08\0\0\0", 8);
  auto u16 = [&](uint32_t v) {
    if (big_endian) {
      t.push_back(static_cast<char>(v >> 8));
      t.push_back(static_cast<char>(v));
    } else {
      t.push_back(static_cast<char>(v));
      t.push_back(static_cast<char>(v >> 8));
    }
  };
  auto u32 = [&](uint32_t v) {
    if (big_endian) {
      u16(v >> 16);
      u16(v & 0xFFFF);
    } else {
      u16(v & 0xFFFF);
      u16(v >> 16);
    }
  };
  u16(2);  // entries
  u16(0x010F);  // Make, ASCII, 4 bytes inline
  u16(2);
  u32(4);
  t.append("ABC\0", 4);
  u16(0x0112);
  u16(3);
  u32(1);
  u16(static_cast<uint32_t>(orientation));
  u16(0);
  u32(0);  // next IFD
  return t;
}

RgbImage rot90cw(const RgbImage& in) {
  RgbImage o;
  o.width = in.height;
  o.height = in.width;
  o.rgb.resize(in.rgb.size());
  for (int64_t y = 0; y < in.height; ++y)
    for (int64_t x = 0; x < in.width; ++x)  // (y, x) moves to (x, H-1-y)
      std::memcpy(o.rgb.data() + (x * o.width + (in.height - 1 - y)) * 3, in.pixel(y, x), 3);
  return o;
}
RgbImage flip_h(const RgbImage& in) {
  RgbImage o = in;
  for (int64_t y = 0; y < in.height; ++y)
    for (int64_t x = 0; x < in.width; ++x) std::memcpy(o.rgb.data() + (y * in.width + x) * 3, in.pixel(y, in.width - 1 - x), 3);
  return o;
}
RgbImage flip_v(const RgbImage& in) { return flip_h(rot90cw(rot90cw(in))); }

TEST(ImageDecodeExif, OrientationsMatchPilTransposes) {
  std::mt19937 rng(3);
  RawImage raw = random_png(5, 3, PNG_COLOR_TYPE_RGB, 8, rng);
  const RgbImage upright = decode_image("image/png", write_png(raw.spec), "image");
  std::function<RgbImage(const RgbImage&)> expected[9];
  expected[1] = [](const RgbImage& i) { return i; };
  expected[2] = [](const RgbImage& i) { return flip_h(i); };                     // FLIP_LEFT_RIGHT
  expected[3] = [](const RgbImage& i) { return rot90cw(rot90cw(i)); };           // ROTATE_180
  expected[4] = [](const RgbImage& i) { return flip_v(i); };                     // FLIP_TOP_BOTTOM
  expected[5] = [](const RgbImage& i) { return flip_h(rot90cw(i)); };            // TRANSPOSE
  expected[6] = [](const RgbImage& i) { return rot90cw(i); };                    // ROTATE_270
  expected[7] = [](const RgbImage& i) { return flip_v(rot90cw(i)); };            // TRANSVERSE
  expected[8] = [](const RgbImage& i) { return rot90cw(rot90cw(rot90cw(i))); };  // ROTATE_90
  for (int o = 1; o <= 8; ++o) {
    for (bool be : {false, true}) {
      SCOPED_TRACE("orientation " + std::to_string(o) + (be ? " MM" : " II"));
      raw.spec.exif = exif_with_orientation(o, be);
      ImageDecodeOptions on;
      on.apply_exif_orientation = true;
      RgbImage got = decode_image("image/png", write_png(raw.spec), "image", on);
      RgbImage want = expected[o](upright);
      EXPECT_EQ(got.width, want.width);
      EXPECT_EQ(got.height, want.height);
      EXPECT_EQ(got.rgb, want.rgb);
    }
  }
  ImageDecodeOptions off;  // the default, as the reference
  raw.spec.exif = exif_with_orientation(6, false);
  EXPECT_EQ(decode_image("image/png", write_png(raw.spec), "image", off).rgb, upright.rgb);
}

// ---------- JPEG ----------

std::string write_jpeg(int w, int h, int components, J_COLOR_SPACE in_space, const std::vector<uint8_t>& pixels,
                       int quality, const std::string& exif = "") {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* mem = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &mem, &size);
  c.image_width = w;
  c.image_height = h;
  c.input_components = components;
  c.in_color_space = in_space;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  jpeg_start_compress(&c, TRUE);
  if (!exif.empty()) {
    std::string app1 = std::string("Exif\0\0", 6) + exif;
    jpeg_write_marker(&c, JPEG_APP0 + 1, reinterpret_cast<const JOCTET*>(app1.data()), app1.size());
  }
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(pixels.data() + static_cast<size_t>(c.next_scanline) * w * components);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string out(reinterpret_cast<const char*>(mem), size);
  std::free(mem);
  return out;
}

std::vector<uint8_t> smooth_rgb(int w, int h) {
  std::vector<uint8_t> p(static_cast<size_t>(w * h * 3));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      p[(y * w + x) * 3 + 0] = static_cast<uint8_t>(x * 255 / w);
      p[(y * w + x) * 3 + 1] = static_cast<uint8_t>(y * 255 / h);
      p[(y * w + x) * 3 + 2] = static_cast<uint8_t>(128 + 100 * std::sin(x * 0.2 + y * 0.1));
    }
  return p;
}

TEST(ImageDecodeJpeg, AgreesWithAnIndependentDecoder) {
  const int w = 61, h = 37;
  const std::string bytes = write_jpeg(w, h, 3, JCS_RGB, smooth_rgb(w, h), 90);
  RgbImage img = decode_image("image/jpeg", bytes, "image");
  ASSERT_EQ(img.width, w);
  ASSERT_EQ(img.height, h);
  int sw = 0, sh = 0, n = 0;
  unsigned char* stb = stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()),
                                             static_cast<int>(bytes.size()), &sw, &sh, &n, 3);
  ASSERT_NE(stb, nullptr);
  double sum = 0;
  int worst = 0;
  for (size_t i = 0; i < img.rgb.size(); ++i) {
    const int d = std::abs(int(stb[i]) - int(img.rgb[i]));
    sum += d;
    worst = std::max(worst, d);
  }
  stbi_image_free(stb);
  EXPECT_LT(sum / img.rgb.size(), 1.0);  // IDCT/upsampling implementations differ slightly
  EXPECT_LE(worst, 12);
}

TEST(ImageDecodeJpeg, GreyIsReplicated) {
  const int w = 20, h = 10;
  std::vector<uint8_t> g(w * h);
  for (int i = 0; i < w * h; ++i) g[i] = static_cast<uint8_t>(i * 7);
  RgbImage img = decode_image("image/jpeg", write_jpeg(w, h, 1, JCS_GRAYSCALE, g, 95), "image");
  for (int i = 0; i < w * h; ++i) {
    EXPECT_EQ(img.rgb[3 * i], img.rgb[3 * i + 1]);
    EXPECT_EQ(img.rgb[3 * i], img.rgb[3 * i + 2]);
  }
}

TEST(ImageDecodeJpeg, CmykFollowsPilInvertedConvention) {
  // Constant 8x8-aligned patches at quality 100 decode to the written values; PIL reads
  // 4-component JPEGs as "CMYK;I" (inverted) and converts with cmyk2rgb.
  const int w = 16, h = 8;
  const uint8_t patches[2][4] = {{10, 200, 90, 30}, {250, 5, 128, 220}};
  std::vector<uint8_t> px(w * h * 4);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) std::memcpy(&px[(y * w + x) * 4], patches[x / 8], 4);
  RgbImage img = decode_image("image/jpeg", write_jpeg(w, h, 4, JCS_CMYK, px, 100), "image");
  for (int p = 0; p < 2; ++p) {
    const int c = 255 - patches[p][0], m = 255 - patches[p][1], yy = 255 - patches[p][2];
    const int nk = patches[p][3];  // 255 - (255 - k)
    auto muldiv = [](int a, int b) { return (a * b + 127) / 255; };  // a*b/255 rounded (PIL's MULDIV255)
    const int want[3] = {nk - muldiv(c, nk), nk - muldiv(m, nk), nk - muldiv(yy, nk)};
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(img.pixel(4, p * 8 + 4)[k], std::clamp(want[k], 0, 255), 1) << p << k;
  }
}

TEST(ImageDecodeJpeg, ExifOrientationIsApplied) {
  const int w = 24, h = 16;
  const std::vector<uint8_t> px = smooth_rgb(w, h);
  RgbImage plain = decode_image("image/jpeg", write_jpeg(w, h, 3, JCS_RGB, px, 95), "image");
  ImageDecodeOptions on;
  on.apply_exif_orientation = true;
  const std::string rotated = write_jpeg(w, h, 3, JCS_RGB, px, 95, exif_with_orientation(6, true));
  RgbImage turned = decode_image("image/jpeg", rotated, "image", on);
  EXPECT_EQ(turned.rgb, rot90cw(plain).rgb);
  EXPECT_EQ(decode_image("image/jpeg", rotated, "image").rgb, plain.rgb);  // default: ignored, as the reference
  EXPECT_EQ(turned.width, h);
}

// ---------- WebP ----------

TEST(ImageDecodeWebp, LosslessIsExactAndAlphaIsDropped) {
  std::mt19937 rng(5);
  const int w = 23, h = 11;
  std::vector<uint8_t> rgba(w * h * 4);
  for (auto& v : rgba) v = static_cast<uint8_t>(rng());
  for (int i = 0; i < w * h; ++i) rgba[4 * i + 3] = static_cast<uint8_t>(1 + rng() % 255);  // no invisible pixels
  uint8_t* out = nullptr;
  size_t n = WebPEncodeLosslessRGBA(rgba.data(), w, h, w * 4, &out);
  ASSERT_GT(n, 0u);
  std::string bytes(reinterpret_cast<char*>(out), n);
  WebPFree(out);
  RgbImage img = decode_image("image/webp", bytes, "image");
  ASSERT_EQ(img.width, w);
  ASSERT_EQ(img.height, h);
  for (int i = 0; i < w * h; ++i)
    for (int k = 0; k < 3; ++k) ASSERT_EQ(img.rgb[3 * i + k], rgba[4 * i + k]) << i;
}

TEST(ImageDecodeWebp, LossyDecodesCloseToSource) {
  const int w = 40, h = 30;
  const std::vector<uint8_t> px = smooth_rgb(w, h);
  uint8_t* out = nullptr;
  size_t n = WebPEncodeRGB(px.data(), w, h, w * 3, 95, &out);
  ASSERT_GT(n, 0u);
  std::string bytes(reinterpret_cast<char*>(out), n);
  WebPFree(out);
  RgbImage img = decode_image("image/webp", bytes, "image");
  double sum = 0;
  for (size_t i = 0; i < px.size(); ++i) sum += std::abs(int(px[i]) - int(img.rgb[i]));
  EXPECT_LT(sum / px.size(), 4.0);
}

// ---------- content type, limits, hostile input ----------

std::string small_png() {
  std::mt19937 rng(1);
  return write_png(random_png(9, 6, PNG_COLOR_TYPE_RGB, 8, rng).spec);
}
std::string small_jpeg() { return write_jpeg(33, 17, 3, JCS_RGB, smooth_rgb(33, 17), 80); }
std::string small_webp(bool lossless) {
  const std::vector<uint8_t> px = smooth_rgb(21, 14);
  uint8_t* out = nullptr;
  size_t n = lossless ? WebPEncodeLosslessRGB(px.data(), 21, 14, 21 * 3, &out)
                      : WebPEncodeRGB(px.data(), 21, 14, 21 * 3, 80, &out);
  std::string s(reinterpret_cast<char*>(out), n);
  WebPFree(out);
  return s;
}

ErrorKind kind_of(const std::function<void()>& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no stave::Error thrown";
  return ErrorKind::kInternal;
}

TEST(ImageDecode, ContentTypeMustMatchTheData) {
  std::string msg;
  EXPECT_EQ(kind_of([&] { decode_image("image/jpeg", small_png(), "image 2"); }, &msg), ErrorKind::kInvalidRequest);
  EXPECT_NE(msg.find("image 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("image/jpeg"), std::string::npos) << msg;
  EXPECT_NE(msg.find("PNG"), std::string::npos) << msg;
  EXPECT_EQ(kind_of([&] { decode_image("image/webp", small_jpeg(), "image"); }), ErrorKind::kInvalidRequest);
  EXPECT_EQ(kind_of([&] { decode_image("image/gif", small_png(), "image"); }), ErrorKind::kInvalidRequest);
  EXPECT_EQ(kind_of([&] { decode_image("image/png", "GIF89a....", "image"); }), ErrorKind::kInvalidRequest);
  EXPECT_EQ(kind_of([&] { decode_image("image/png", "", "image"); }), ErrorKind::kInvalidRequest);
  EXPECT_NO_THROW(decode_image("IMAGE/PNG; charset=binary", small_png(), "image"));
  EXPECT_NO_THROW(decode_image("image/jpg", small_jpeg(), "image"));
  EXPECT_NO_THROW(decode_image("", small_webp(true), "image"));  // no declared type: sniffed
}

TEST(ImageDecode, PixelLimitIsCheckedFromTheHeader) {
  ImageDecodeOptions tight;
  tight.max_pixels = 9 * 6 - 1;
  EXPECT_EQ(kind_of([&] { decode_image("image/png", small_png(), "image", tight); }), ErrorKind::kRequestTooLarge);
  tight.max_pixels = 9 * 6;
  EXPECT_NO_THROW(decode_image("image/png", small_png(), "image", tight));

  // Headers claiming far more than 16 MP are refused before any pixel is decoded.
  std::string png = small_png();  // IHDR width at 16, height at 20, CRC after the data
  auto set_be32 = [](std::string& s, size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>(v >> (24 - 8 * i));
  };
  set_be32(png, 16, 5000);
  set_be32(png, 20, 4000);
  uint32_t crc = static_cast<uint32_t>(::crc32(0, reinterpret_cast<const Bytef*>(png.data() + 12), 17));
  set_be32(png, 29, crc);
  EXPECT_EQ(kind_of([&] { decode_image("image/png", png, "image"); }), ErrorKind::kRequestTooLarge);

  std::string jpg = small_jpeg();
  for (size_t i = 2; i + 9 < jpg.size(); ++i) {
    if (static_cast<unsigned char>(jpg[i]) == 0xFF && static_cast<unsigned char>(jpg[i + 1]) == 0xC0) {
      jpg[i + 5] = static_cast<char>(5000 >> 8);  // height
      jpg[i + 6] = static_cast<char>(5000 & 0xFF);
      jpg[i + 7] = static_cast<char>(4000 >> 8);  // width
      jpg[i + 8] = static_cast<char>(4000 & 0xFF);
      break;
    }
  }
  EXPECT_EQ(kind_of([&] { decode_image("image/jpeg", jpg, "image"); }), ErrorKind::kRequestTooLarge);

  std::string webp = small_webp(true);  // VP8L: 0x2f then 14-bit width-1, 14-bit height-1
  ASSERT_EQ(webp.substr(12, 4), "VP8L");
  const uint32_t bits = (16383u) | (16383u << 14);
  for (int i = 0; i < 4; ++i) webp[21 + i] = static_cast<char>((bits >> (8 * i)) & 0xFF);
  EXPECT_EQ(kind_of([&] { decode_image("image/webp", webp, "image"); }), ErrorKind::kRequestTooLarge);
}

// Every prefix of a valid file either decodes (the image data was complete) or is a
// stave::Error; mutated files likewise. Nothing may crash, hang or throw anything else.
void fuzz_file(const std::string& type, const std::string& good, uint32_t seed) {
  const RgbImage ref = decode_image(type, good, "image");
  for (size_t len = 0; len < good.size(); len += std::max<size_t>(1, good.size() / 97)) {
    try {
      RgbImage img = decode_image(type, good.substr(0, len), "image");
      EXPECT_EQ(img.width, ref.width);
    } catch (const Error&) {
    }
  }
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 300; ++trial) {
    std::string bad = good;
    const int flips = 1 + rng() % 4;
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] = static_cast<char>(rng());
    try {
      RgbImage img = decode_image(type, bad, "image");
      EXPECT_EQ(img.rgb.size(), static_cast<size_t>(img.width * img.height * 3));
    } catch (const Error&) {
    }
  }
}

TEST(ImageDecode, TruncatedAndMutatedFilesAreErrorsNotCrashes) {
  fuzz_file("image/png", small_png(), 1);
  fuzz_file("image/jpeg", small_jpeg(), 2);
  fuzz_file("image/webp", small_webp(true), 3);
  fuzz_file("image/webp", small_webp(false), 4);
}

TEST(ImageDecode, TruncatedImageDataIsRefused) {
  const std::string jpg = small_jpeg();
  EXPECT_EQ(kind_of([&] { decode_image("image/jpeg", jpg.substr(0, jpg.size() / 2), "image"); }),
            ErrorKind::kInvalidRequest);
  const std::string png = small_png();
  EXPECT_EQ(kind_of([&] { decode_image("image/png", png.substr(0, png.size() - 20), "image"); }),
            ErrorKind::kInvalidRequest);
  // A JPEG that only lacks its final EOI marker still has all its pixels.
  EXPECT_NO_THROW(decode_image("image/jpeg", jpg.substr(0, jpg.size() - 2), "image"));
}

}  // namespace
}  // namespace stave
