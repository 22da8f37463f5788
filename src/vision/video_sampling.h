// The frame arithmetic of transformers' Qwen3VLVideoProcessor and Qwen3VLProcessor (5.x),
// without pixels: which frames are sampled, the size they are resized to, and the timestamps
// the prompt shows for each temporal group. docs/vision.md §6 has the rules and their source.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "vision/preprocess.h"

namespace stave {

// The processor assumes 24 fps when a video has no frame rate (a list of frames).
inline constexpr double kAssumedVideoFps = 24.0;

// Qwen3VLVideoProcessor.sample_frames: with fps sampling, n = int(total / video_fps * fps)
// clamped to min_frames ... min(max_frames, total); with num_frames, that count; then
// np.linspace(0, total - 1, n).round() (ties to even). Without do_sample_frames every frame.
// Throws kInvalidRequest when total is 0.
std::vector<int64_t> sample_frame_indices(int64_t total_frames, std::optional<double> video_fps,
                                          const VideoProcessorConfig& config);

// The video smart_resize (budget over t̄·h̄·w̄; sides below `factor` scaled up first).
// Throws kInvalidRequest "t:N must be larger than temporal_factor:T" and the aspect-ratio
// error with the reference's texts.
ResizedSize video_smart_resize(int64_t num_frames, int64_t height, int64_t width, int64_t temporal_factor,
                               int64_t factor, int64_t min_pixels, int64_t max_pixels);

// The resize target of a clip of `num_frames` frames of height x width under `config`
// (cap_pixels_per_frame applied when set).
ResizedSize video_resize_target(int64_t num_frames, int64_t height, int64_t width, const VideoProcessorConfig& config);

// Qwen3VLProcessor._calculate_timestamps: indices padded to a multiple of temporal_patch_size
// with the last one, idx / fps, then the mean of each group's first and last time.
std::vector<double> temporal_group_timestamps(const std::vector<int64_t>& indices, double video_fps,
                                              int64_t temporal_patch_size);

// f"<{ts:.1f} seconds>"
std::string timestamp_text(double seconds);

}  // namespace stave
