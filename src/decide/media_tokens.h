// The media segment of a Clef prompt (as the release code builds it): the processor's text
// "<|vision_start|><|image_pad|><|vision_end|>" x n_images + "\n" with each <|image_pad|>
// expanded to that image's merged-patch count t*h*w/merge², and the EncodedMedia the backbone
// needs (grids, mm_token_type_ids). Images are decoded and preprocessed once, here, and kept
// for the vision tower.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "decide/encoder.h"
#include "decide/request.h"
#include "io/model_config.h"
#include "text/tokenizer.h"
#include "vision/image_decode.h"
#include "vision/preprocess.h"
#include "vision/video_media.h"

namespace stave {

struct MediaTokenIds {
  int32_t vision_start = -1;
  int32_t vision_end = -1;
  int32_t image_pad = -1;
  int32_t video_pad = -1;        // -1 when neither the tokenizer nor config.json has one
  std::vector<int32_t> newline;  // tokenizer("\n")
  const Tokenizer* tokenizer = nullptr;  // for the videos' "<t seconds>" texts (outlives this)
};

// One video's place in the media segment: its grid and the timestamp of each temporal group.
struct VideoSegment {
  std::array<int64_t, 3> grid{};
  std::vector<double> timestamps;  // grid[0] of them
};

// The ids from the tokenizer, checked against config.json's image_token_id /
// vision_start_token_id / vision_end_token_id where the config gives them (a disagreement is
// a broken release: kInvalidModel naming both ids).
MediaTokenIds media_token_ids(const Tokenizer& tokenizer, const ModelConfig& config);

// The media segment ids for items with these grids; fills media->image_grid_thw and
// media->mm_token_type_ids (token_offset is the caller's: encode_request sets it).
std::vector<int32_t> media_segment_ids(const std::vector<std::array<int64_t, 3>>& grids, const MediaTokenIds& ids,
                                       int64_t merge_size, EncodedMedia* media);
// With videos after the images (the processor's text lists all images, then all videos): each
// video is "<{ts:.1f} seconds>" + <|vision_start|> + <|video_pad|> x h*w/merge² + <|vision_end|>
// per temporal group (Qwen3VLProcessor replaces the whole <|vision_start|><|video_pad|><|vision_end|>),
// video_pad tokens typed 2. Fills media->video_grid_thw.
std::vector<int32_t> media_segment_ids(const std::vector<std::array<int64_t, 3>>& image_grids,
                                       const std::vector<VideoSegment>& videos, const MediaTokenIds& ids,
                                       int64_t merge_size, EncodedMedia* media);

// Decodes and preprocesses the images of one request (errors name "image N", 1-based), then
// answers encode_request's MediaEncoder call from the prepared grids. One object per request.
class PreparedMedia : public MediaEncoder {
 public:
  PreparedMedia(const std::vector<ImageInput>& images, const ImageProcessorConfig& processor, MediaTokenIds ids,
                const ImageDecodeOptions& decode = {});
  // Images and videos (errors name "video N", 1-based).
  PreparedMedia(const std::vector<ImageInput>& images, const std::vector<VideoInput>& videos,
                const ImageProcessorConfig& processor, const VideoProcessorConfig& video_processor, MediaTokenIds ids,
                const VideoPrepareOptions& options = {});

  std::vector<int32_t> encode_media(const DecisionRequest& request, EncodedMedia* media) const override;

  const std::vector<VisionPatches>& images() const { return images_; }
  const std::vector<PreparedVideo>& videos() const { return videos_; }
  std::vector<std::array<int64_t, 3>> grids() const;        // images
  std::vector<std::array<int64_t, 3>> video_grids() const;
  int64_t merge_size() const { return merge_size_; }

 private:
  std::vector<VisionPatches> images_;
  std::vector<PreparedVideo> videos_;
  MediaTokenIds ids_;
  int64_t merge_size_ = 2;
};

}  // namespace stave
