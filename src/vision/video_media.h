// One request video to what the vision tower and the prompt need, as transformers'
// Qwen3VLVideoProcessor + Qwen3VLProcessor do it: sample frames (fps rule), resize every frame
// to the video smart_resize target with the image path's resampling, normalise and patchify
// with temporal patch 2, and the timestamp of each temporal group for the prompt.
// A file goes through FFmpeg (video_decode.h); a list of images is decoded with the image
// decoders and has no frame rate (the processor then assumes 24 fps).
#pragma once
#include <string>
#include <vector>

#include "io/model_config.h"
#include "vision/image_decode.h"
#include "vision/preprocess.h"
#include "vision/video_bytes.h"
#include "vision/video_decode.h"

namespace stave {

struct PreparedVideo {
  VisionPatches patches;            // pixel_values_videos rows of this video, video_grid_thw
  std::vector<int64_t> indices;     // sampled frame indices
  double fps = 0;                   // the frame rate the timestamps use
  std::vector<double> timestamps;   // one per temporal group, seconds
};

struct VideoPrepareOptions {
  VideoDecodeLimits decode;
  ImageDecodeOptions image;  // for frame lists
};

// `label` names the video in errors ("video 1"). Throws stave::Error.
PreparedVideo prepare_video(const VideoInput& video, const VideoProcessorConfig& config, const std::string& label,
                            const VideoPrepareOptions& options = {});

// The sampled, resized (not yet normalised) frames of a video: the step both paths share,
// exposed for tests that compare frame lists with containers.
std::vector<RgbImage> sampled_video_frames(const VideoInput& video, const VideoProcessorConfig& config,
                                           const std::string& label, const VideoPrepareOptions& options,
                                           std::vector<int64_t>* indices, double* fps);

}  // namespace stave
