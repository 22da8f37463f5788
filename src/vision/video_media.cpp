#include "vision/video_media.h"

#include "stave/errors.h"
#include "vision/video_sampling.h"

namespace stave {
namespace {

// Resizes one full-size frame to the clip's target as soon as it is decoded.
struct FrameResizer {
  ResizedSize target{};
  ResampleFilter filter = ResampleFilter::kBicubic;
  bool resize = true;
  RgbImage operator()(RgbImage in) const {
    if (!resize) return in;
    return resize_antialias_u8(in, target.height, target.width, filter);
  }
};

FrameResizer make_resizer(int64_t n, int64_t height, int64_t width, const VideoProcessorConfig& c) {
  FrameResizer r;
  r.resize = c.frame.do_resize;
  r.filter = resample_filter_from_pil(c.frame.resample);
  if (r.resize) r.target = video_resize_target(n, height, width, c);
  return r;
}

std::vector<RgbImage> file_frames(const VideoInput& v, const VideoProcessorConfig& c, const std::string& label,
                                  const VideoPrepareOptions& o, std::vector<int64_t>* indices, double* fps) {
  const VideoInfo info = probe_video(v.content_type, v.data, label, o.decode);
  *indices = sample_frame_indices(info.total_frames, info.fps, c);
  *fps = info.fps.value_or(kAssumedVideoFps);
  const FrameResizer resizer = make_resizer(static_cast<int64_t>(indices->size()), info.height, info.width, c);
  return decode_video_frames(v.data, label, *indices, o.decode, resizer);
}

std::vector<RgbImage> list_frames(const VideoInput& v, const VideoProcessorConfig& c, const std::string& label,
                                  const VideoPrepareOptions& o, std::vector<int64_t>* indices, double* fps) {
  const int64_t total = static_cast<int64_t>(v.frames.size());
  *indices = sample_frame_indices(total, std::nullopt, c);
  *fps = kAssumedVideoFps;
  std::vector<bool> wanted(v.frames.size(), false);
  for (int64_t i : *indices) wanted[static_cast<size_t>(i)] = true;
  // Every frame is decoded (the processor stacks them all, so all must have one size); the
  // sampled ones are kept, resized.
  std::vector<RgbImage> kept(v.frames.size());
  int64_t height = 0, width = 0;
  FrameResizer resizer;
  for (size_t i = 0; i < v.frames.size(); ++i) {
    const std::string frame_label = label + " frame " + std::to_string(i);
    RgbImage img = decode_image(v.frames[i].content_type, v.frames[i].data, frame_label, o.image);
    if (i == 0) {
      height = img.height;
      width = img.width;
      resizer = make_resizer(static_cast<int64_t>(indices->size()), height, width, c);
    } else if (img.height != height || img.width != width) {
      throw Error(ErrorKind::kInvalidRequest, frame_label + " is " + std::to_string(img.width) + "x" +
                                                  std::to_string(img.height) + " but frame 0 is " +
                                                  std::to_string(width) + "x" + std::to_string(height) +
                                                  " (the frames of a video must have one size)");
    }
    if (wanted[i]) kept[i] = resizer(std::move(img));
  }
  std::vector<RgbImage> out;
  out.reserve(indices->size());
  for (int64_t i : *indices) out.push_back(kept[static_cast<size_t>(i)]);
  return out;
}

}  // namespace

std::vector<RgbImage> sampled_video_frames(const VideoInput& v, const VideoProcessorConfig& c, const std::string& label,
                                           const VideoPrepareOptions& o, std::vector<int64_t>* indices, double* fps) {
  if (v.frames.empty() && v.data.empty()) throw Error(ErrorKind::kInvalidRequest, label + ": the video is empty");
  return v.frames.empty() ? file_frames(v, c, label, o, indices, fps) : list_frames(v, c, label, o, indices, fps);
}

PreparedVideo prepare_video(const VideoInput& v, const VideoProcessorConfig& c, const std::string& label,
                            const VideoPrepareOptions& o) {
  PreparedVideo p;
  try {
    const std::vector<RgbImage> frames = sampled_video_frames(v, c, label, o, &p.indices, &p.fps);
    std::vector<const RgbImage*> ptrs;
    for (const auto& f : frames) ptrs.push_back(&f);
    p.patches = patchify_frames(ptrs, c.frame);
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind(label, 0) == 0) throw;
    throw Error(e.kind(), label + ": " + what);
  }
  p.timestamps = temporal_group_timestamps(p.indices, p.fps, c.frame.temporal_patch_size);
  return p;
}

}  // namespace stave
