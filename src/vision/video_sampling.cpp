#include "vision/video_sampling.h"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdio>

#include "stave/errors.h"
#include "text/python_json.h"

namespace stave {
namespace {

// Python's round() / numpy's round(): half to even (the default floating-point rounding mode).
double round_half_even(double v) { return std::nearbyint(v); }

}  // namespace

std::vector<int64_t> sample_frame_indices(int64_t total, std::optional<double> video_fps,
                                          const VideoProcessorConfig& c) {
  if (total <= 0) throw Error(ErrorKind::kInvalidRequest, "the video has no frames");
  std::vector<int64_t> out;
  if (!c.do_sample_frames) {
    for (int64_t i = 0; i < total; ++i) out.push_back(i);
    return out;
  }
  int64_t n = 0;
  if (c.num_frames > 0) {
    n = c.num_frames;
  } else {
    const double vfps = video_fps.value_or(kAssumedVideoFps);
    const double want = static_cast<double>(total) / vfps * c.fps;
    n = want >= 9.0e18 ? INT64_MAX : static_cast<int64_t>(want);  // int() truncates
    n = std::min({std::max(n, c.min_frames), c.max_frames, total});
  }
  // np.linspace(0, total - 1, n): i * step, the last one exactly total - 1.
  out.resize(static_cast<size_t>(n));
  const double stop = static_cast<double>(total - 1);
  if (n == 1) {
    out[0] = 0;
    return out;
  }
  const double step = stop / static_cast<double>(n - 1);
  for (int64_t i = 0; i < n; ++i) {
    double y = static_cast<double>(i) * step;
    if (i == n - 1) y = stop;
    out[static_cast<size_t>(i)] = static_cast<int64_t>(round_half_even(y));
  }
  return out;
}

ResizedSize video_smart_resize(int64_t num_frames, int64_t height_in, int64_t width_in, int64_t temporal_factor,
                               int64_t factor, int64_t min_pixels, int64_t max_pixels) {
  if (num_frames < temporal_factor)
    throw Error(ErrorKind::kInvalidRequest, "t:" + std::to_string(num_frames) + " must be larger than temporal_factor:" +
                                                std::to_string(temporal_factor));
  if (height_in <= 0 || width_in <= 0) throw Error(ErrorKind::kInvalidRequest, "the video frames are empty");
  double height = static_cast<double>(height_in), width = static_cast<double>(width_in);
  const double f = static_cast<double>(factor);
  if (height < f || width < f) {
    const double scale = std::max(f / height, f / width);
    height = std::trunc(height * scale);  // int()
    width = std::trunc(width * scale);
  }
  const double ratio = std::max(height, width) / std::min(height, width);
  if (ratio > 200)
    throw Error(ErrorKind::kInvalidRequest, "absolute aspect ratio must be smaller than 200, got " + python_float_repr(ratio));
  double h_bar = round_half_even(height / f) * f;
  double w_bar = round_half_even(width / f) * f;
  const double tf = static_cast<double>(temporal_factor);
  const double t_bar = round_half_even(static_cast<double>(num_frames) / tf) * tf;
  const double n = static_cast<double>(num_frames);
  if (t_bar * h_bar * w_bar > static_cast<double>(max_pixels)) {
    const double beta = std::sqrt((n * height * width) / static_cast<double>(max_pixels));
    h_bar = std::max(f, std::floor(height / beta / f) * f);
    w_bar = std::max(f, std::floor(width / beta / f) * f);
  } else if (t_bar * h_bar * w_bar < static_cast<double>(min_pixels)) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (n * height * width));
    h_bar = std::ceil(height * beta / f) * f;
    w_bar = std::ceil(width * beta / f) * f;
  }
  return {static_cast<int64_t>(h_bar), static_cast<int64_t>(w_bar)};
}

ResizedSize video_resize_target(int64_t num_frames, int64_t height, int64_t width, const VideoProcessorConfig& c) {
  const int64_t factor = c.frame.patch_size * c.frame.merge_size;
  int64_t max_pixels = c.frame.max_pixels;
  if (c.cap_pixels_per_frame && num_frames > 0) {
    const int64_t frame_cap = 768 * factor * factor;
    const int64_t per_frame = std::max(std::min(frame_cap, c.frame.max_pixels / num_frames),
                                       static_cast<int64_t>(static_cast<double>(c.frame.min_pixels) * 1.05));
    max_pixels = per_frame * num_frames;
  }
  return video_smart_resize(num_frames, height, width, c.frame.temporal_patch_size, factor, c.frame.min_pixels,
                            max_pixels);
}

std::vector<double> temporal_group_timestamps(const std::vector<int64_t>& indices_in, double video_fps,
                                              int64_t merge) {
  std::vector<int64_t> indices = indices_in;
  if (indices.empty()) return {};
  while (indices.size() % static_cast<size_t>(merge) != 0) indices.push_back(indices.back());
  std::vector<double> ts;
  ts.reserve(indices.size());
  for (int64_t i : indices) ts.push_back(static_cast<double>(i) / video_fps);
  std::vector<double> out;
  for (size_t i = 0; i < ts.size(); i += static_cast<size_t>(merge))
    out.push_back((ts[i] + ts[i + static_cast<size_t>(merge) - 1]) / 2);
  return out;
}

std::string timestamp_text(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "<%.1f seconds>", seconds);
  return buf;
}

}  // namespace stave
