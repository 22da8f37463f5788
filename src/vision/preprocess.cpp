#include "vision/preprocess.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "stave/errors.h"
#include "text/python_json.h"

namespace stave {

ResizedSize smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels, int64_t max_pixels) {
  if (height <= 0 || width <= 0 || factor <= 0)
    throw Error(ErrorKind::kInvalidRequest, "image has zero width or height");
  const double ratio = static_cast<double>(std::max(height, width)) / static_cast<double>(std::min(height, width));
  if (ratio > 200)
    throw Error(ErrorKind::kInvalidRequest,
                "absolute aspect ratio must be smaller than 200, got " + python_float_repr(ratio));
  const double f = static_cast<double>(factor);
  // Python's round() on a float: nearest, ties to even (the default FP rounding mode).
  int64_t h_bar = static_cast<int64_t>(std::nearbyint(static_cast<double>(height) / f)) * factor;
  int64_t w_bar = static_cast<int64_t>(std::nearbyint(static_cast<double>(width) / f)) * factor;
  const double hw = static_cast<double>(height) * static_cast<double>(width);
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(hw / static_cast<double>(max_pixels));
    h_bar = std::max(factor, static_cast<int64_t>(std::floor(static_cast<double>(height) / beta / f)) * factor);
    w_bar = std::max(factor, static_cast<int64_t>(std::floor(static_cast<double>(width) / beta / f)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / hw);
    h_bar = static_cast<int64_t>(std::ceil(static_cast<double>(height) * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(static_cast<double>(width) * beta / f)) * factor;
  }
  return {h_bar, w_bar};
}

ResampleFilter resample_filter_from_pil(int pil_id) {
  switch (pil_id) {
    case 2: return ResampleFilter::kBilinear;
    case 3: return ResampleFilter::kBicubic;
    case 1: return ResampleFilter::kBicubic;  // LANCZOS: torchvision warns and uses BICUBIC
    default:
      throw Error(ErrorKind::kUnsupported, "image processor resample " + std::to_string(pil_id) +
                                               " is not supported (2 bilinear and 3 bicubic are)");
  }
}

namespace {

// ATen's antialiased filters (Pillow's): bicubic with a = -0.5 (Keys), and the triangle.
double filter_value(ResampleFilter filter, double x) {
  x = std::abs(x);
  if (filter == ResampleFilter::kBilinear) return x < 1.0 ? 1.0 - x : 0.0;
  constexpr double a = -0.5;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
  return 0.0;
}

// The int16 weights of one axis, as ATen's _compute_index_ranges_int16_weights makes them.
struct AxisWeights {
  std::vector<int64_t> first;   // first input index per output
  std::vector<int64_t> count;   // number of taps per output
  std::vector<int16_t> w;       // [out, taps] fixed point
  int64_t taps = 0;
  unsigned precision = 0;
};

AxisWeights axis_weights(int64_t in, int64_t out, ResampleFilter filter) {
  const int interp_size = filter == ResampleFilter::kBicubic ? 4 : 2;
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double support = scale >= 1.0 ? (interp_size * 0.5) * scale : interp_size * 0.5;
  const int64_t taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;

  AxisWeights a;
  a.taps = taps;
  a.first.resize(out);
  a.count.resize(out);
  std::vector<double> wd(static_cast<size_t>(out * taps), 0.0);
  double wt_max = 0.0;
  for (int64_t i = 0; i < out; ++i) {
    const double center = scale * (static_cast<double>(i) + 0.5);
    const int64_t xmin = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
    int64_t xsize = std::min(static_cast<int64_t>(center + support + 0.5), in) - xmin;
    xsize = std::clamp(xsize, int64_t{0}, taps);
    double* w = wd.data() + i * taps;
    double total = 0.0;
    for (int64_t j = 0; j < xsize; ++j) {
      w[j] = filter_value(filter, (static_cast<double>(j + xmin) - center + 0.5) * invscale);
      total += w[j];
    }
    if (total != 0.0) {
      for (int64_t j = 0; j < xsize; ++j) {
        w[j] /= total;
        wt_max = std::max(wt_max, w[j]);
      }
    }
    a.first[i] = xmin;
    a.count[i] = xsize;
  }
  unsigned p = 0;
  for (p = 0; p < 22; ++p) {
    const int next = static_cast<int>(0.5 + wt_max * static_cast<double>(1 << (p + 1)));
    if (next >= (1 << 15)) break;
  }
  a.precision = p;
  a.w.resize(wd.size());
  for (size_t k = 0; k < wd.size(); ++k) {
    const double v = wd[k] * static_cast<double>(1 << p);
    a.w[k] = static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
  }
  return a;
}

inline uint8_t fixed_to_u8(int acc, unsigned precision) {
  return static_cast<uint8_t>(std::clamp(acc >> precision, 0, 255));
}

RgbImage resize_width(const RgbImage& in, int64_t out_w, ResampleFilter filter) {
  const AxisWeights a = axis_weights(in.width, out_w, filter);
  RgbImage out;
  out.width = out_w;
  out.height = in.height;
  out.rgb.resize(static_cast<size_t>(out_w * in.height * 3));
  const int round = 1 << (a.precision - 1);
  for (int64_t y = 0; y < in.height; ++y) {
    const uint8_t* row = in.rgb.data() + y * in.width * 3;
    uint8_t* dst = out.rgb.data() + y * out_w * 3;
    for (int64_t x = 0; x < out_w; ++x) {
      const int16_t* w = a.w.data() + x * a.taps;
      for (int c = 0; c < 3; ++c) {
        int acc = round;
        for (int64_t j = 0; j < a.count[x]; ++j) acc += row[(a.first[x] + j) * 3 + c] * w[j];
        dst[x * 3 + c] = fixed_to_u8(acc, a.precision);
      }
    }
  }
  return out;
}

RgbImage resize_height(const RgbImage& in, int64_t out_h, ResampleFilter filter) {
  const AxisWeights a = axis_weights(in.height, out_h, filter);
  RgbImage out;
  out.width = in.width;
  out.height = out_h;
  out.rgb.resize(static_cast<size_t>(in.width * out_h * 3));
  const int round = 1 << (a.precision - 1);
  const int64_t stride = in.width * 3;
  for (int64_t y = 0; y < out_h; ++y) {
    const int16_t* w = a.w.data() + y * a.taps;
    const uint8_t* src = in.rgb.data() + a.first[y] * stride;
    uint8_t* dst = out.rgb.data() + y * stride;
    for (int64_t k = 0; k < stride; ++k) {
      int acc = round;
      for (int64_t j = 0; j < a.count[y]; ++j) acc += src[j * stride + k] * w[j];
      dst[k] = fixed_to_u8(acc, a.precision);
    }
  }
  return out;
}

}  // namespace

RgbImage resize_antialias_u8(const RgbImage& in, int64_t out_h, int64_t out_w, ResampleFilter filter) {
  if (out_h <= 0 || out_w <= 0) throw Error(ErrorKind::kInternal, "resize to an empty size");
  if (out_h == in.height && out_w == in.width) return in;
  // ATen resamples the contiguous dimension (width) first, then height; each pass rounds to uint8.
  if (out_w != in.width && out_h != in.height) return resize_height(resize_width(in, out_w, filter), out_h, filter);
  if (out_w != in.width) return resize_width(in, out_w, filter);
  return resize_height(in, out_h, filter);
}

int64_t merged_token_count(const std::array<int64_t, 3>& g, int64_t merge_size) {
  return g[0] * g[1] * g[2] / (merge_size * merge_size);
}

VisionPatches patchify_frames(const std::vector<const RgbImage*>& frames, const ImageProcessorConfig& cfg) {
  if (frames.empty()) throw Error(ErrorKind::kInternal, "patchify_frames: no frames");
  const int64_t P = cfg.patch_size, M = cfg.merge_size, T = cfg.temporal_patch_size, C = 3;
  const int64_t H = frames[0]->height, W = frames[0]->width;
  for (const RgbImage* f : frames)
    if (f->height != H || f->width != W) throw Error(ErrorKind::kInternal, "patchify_frames: frames differ in size");
  if (H % (P * M) != 0 || W % (P * M) != 0)
    throw Error(ErrorKind::kInvalidRequest, "image of " + std::to_string(W) + "x" + std::to_string(H) +
                                                " is not a multiple of patch_size*merge_size = " +
                                                std::to_string(P * M));

  // Per-channel affine map of a uint8 sample, in fp32 as the torchvision backend computes it:
  // rescale and normalize fused into (x - mean/r) / (std/r) when both are on.
  float sub[3], div[3], mul = 1.0f;
  enum { kFused, kRescale, kNormalize, kNone } mode;
  for (int c = 0; c < 3; ++c) {
    if (cfg.do_rescale && cfg.do_normalize) {
      const double inv = 1.0 / cfg.rescale_factor;
      sub[c] = static_cast<float>(static_cast<float>(cfg.image_mean[c]) * static_cast<float>(inv));
      div[c] = static_cast<float>(static_cast<float>(cfg.image_std[c]) * static_cast<float>(inv));
    } else {
      sub[c] = static_cast<float>(cfg.image_mean[c]);
      div[c] = static_cast<float>(cfg.image_std[c]);
    }
  }
  mode = cfg.do_rescale && cfg.do_normalize ? kFused : cfg.do_rescale ? kRescale : cfg.do_normalize ? kNormalize : kNone;
  mul = static_cast<float>(cfg.rescale_factor);
  float lut[3][256];
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) {
      const float x = static_cast<float>(v);
      switch (mode) {
        case kFused:
        case kNormalize: lut[c][v] = (x - sub[c]) / div[c]; break;
        case kRescale: lut[c][v] = x * mul; break;
        case kNone: lut[c][v] = x; break;
      }
    }

  // Frames padded to a multiple of T by repeating the last one.
  std::vector<const RgbImage*> padded = frames;
  while (padded.size() % static_cast<size_t>(T) != 0) padded.push_back(frames.back());

  VisionPatches out;
  const int64_t gt = static_cast<int64_t>(padded.size()) / T, gh = H / P, gw = W / P;
  out.grid_thw = {gt, gh, gw};
  out.rows = gt * gh * gw;
  out.row_size = C * T * P * P;
  out.pixel_values.resize(static_cast<size_t>(out.rows * out.row_size));
  float* dst = out.pixel_values.data();
  for (int64_t t = 0; t < gt; ++t)
    for (int64_t bh = 0; bh < gh / M; ++bh)
      for (int64_t bw = 0; bw < gw / M; ++bw)
        for (int64_t mh = 0; mh < M; ++mh)
          for (int64_t mw = 0; mw < M; ++mw) {
            const int64_t y0 = (bh * M + mh) * P, x0 = (bw * M + mw) * P;
            for (int64_t c = 0; c < C; ++c)
              for (int64_t tt = 0; tt < T; ++tt) {
                const RgbImage& f = *padded[static_cast<size_t>(t * T + tt)];
                for (int64_t py = 0; py < P; ++py) {
                  const uint8_t* src = f.pixel(y0 + py, x0);
                  for (int64_t px = 0; px < P; ++px) *dst++ = lut[c][src[px * 3 + c]];
                }
              }
          }
  return out;
}

VisionPatches preprocess_image(const RgbImage& image, const ImageProcessorConfig& cfg) {
  if (!cfg.do_resize) return patchify_frames({&image}, cfg);
  const ResizedSize sz = smart_resize(image.height, image.width, cfg.patch_size * cfg.merge_size, cfg.min_pixels,
                                      cfg.max_pixels);
  const RgbImage resized = resize_antialias_u8(image, sz.height, sz.width, resample_filter_from_pil(cfg.resample));
  return patchify_frames({&resized}, cfg);
}

}  // namespace stave
