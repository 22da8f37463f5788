#include "decide/media_tokens.h"

#include "stave/errors.h"
#include "vision/video_sampling.h"

namespace stave {
namespace {

int32_t special_id(const Tokenizer& tok, const char* text, int64_t config_id, const char* config_key) {
  std::optional<int32_t> id = tok.token_to_id(text);
  if (!id) {
    if (config_id >= 0) return static_cast<int32_t>(config_id);
    throw Error(ErrorKind::kInvalidModel, std::string("tokenizer has no ") + text + " token and config.json no " +
                                              config_key);
  }
  if (config_id >= 0 && *id != config_id)
    throw Error(ErrorKind::kInvalidModel, std::string("config.json ") + config_key + " is " +
                                              std::to_string(config_id) + " but the tokenizer's " + text + " is " +
                                              std::to_string(*id));
  return *id;
}

}  // namespace

MediaTokenIds media_token_ids(const Tokenizer& tokenizer, const ModelConfig& config) {
  MediaTokenIds ids;
  ids.vision_start = special_id(tokenizer, "<|vision_start|>", config.vision_start_token_id, "vision_start_token_id");
  ids.vision_end = special_id(tokenizer, "<|vision_end|>", config.vision_end_token_id, "vision_end_token_id");
  ids.image_pad = special_id(tokenizer, "<|image_pad|>", config.image_token_id, "image_token_id");
  if (tokenizer.token_to_id("<|video_pad|>") || config.video_token_id >= 0)
    ids.video_pad = special_id(tokenizer, "<|video_pad|>", config.video_token_id, "video_token_id");
  ids.tokenizer = &tokenizer;
  ids.newline = tokenizer.encode("\n");
  return ids;
}

std::vector<int32_t> media_segment_ids(const std::vector<std::array<int64_t, 3>>& grids, const MediaTokenIds& ids,
                                       int64_t merge_size, EncodedMedia* media) {
  return media_segment_ids(grids, {}, ids, merge_size, media);
}

std::vector<int32_t> media_segment_ids(const std::vector<std::array<int64_t, 3>>& grids,
                                       const std::vector<VideoSegment>& videos, const MediaTokenIds& ids,
                                       int64_t merge_size, EncodedMedia* media) {
  std::vector<int32_t> out;
  std::vector<int32_t> types;
  media->image_grid_thw.clear();
  media->video_grid_thw.clear();
  for (const auto& g : grids) {
    const int64_t n = merged_token_count(g, merge_size);
    out.push_back(ids.vision_start);
    types.push_back(0);
    out.insert(out.end(), static_cast<size_t>(n), ids.image_pad);
    types.insert(types.end(), static_cast<size_t>(n), 1);
    out.push_back(ids.vision_end);
    types.push_back(0);
    media->image_grid_thw.push_back(g);
  }
  for (const VideoSegment& v : videos) {
    if (ids.video_pad < 0 || !ids.tokenizer)
      throw Error(ErrorKind::kUnsupported, "this model's tokenizer has no <|video_pad|> token; videos are not accepted");
    if (static_cast<int64_t>(v.timestamps.size()) != v.grid[0])
      throw Error(ErrorKind::kInternal, "a video has " + std::to_string(v.timestamps.size()) +
                                            " timestamps for " + std::to_string(v.grid[0]) + " temporal groups");
    const int64_t per_group = v.grid[1] * v.grid[2] / (merge_size * merge_size);
    // The prompt holds "<|vision_start|><|video_pad|><|vision_end|>" per video and the processor
    // replaces the pad alone with the groups below, so each video keeps an outer start and end.
    out.push_back(ids.vision_start);
    types.push_back(0);
    for (double ts : v.timestamps) {
      const std::vector<int32_t> text = ids.tokenizer->encode(timestamp_text(ts));
      out.insert(out.end(), text.begin(), text.end());
      types.insert(types.end(), text.size(), 0);
      out.push_back(ids.vision_start);
      types.push_back(0);
      out.insert(out.end(), static_cast<size_t>(per_group), ids.video_pad);
      types.insert(types.end(), static_cast<size_t>(per_group), 2);
      out.push_back(ids.vision_end);
      types.push_back(0);
    }
    out.push_back(ids.vision_end);
    types.push_back(0);
    media->video_grid_thw.push_back(v.grid);
  }
  out.insert(out.end(), ids.newline.begin(), ids.newline.end());
  types.insert(types.end(), ids.newline.size(), 0);
  media->mm_token_type_ids = std::move(types);
  return out;
}

PreparedMedia::PreparedMedia(const std::vector<ImageInput>& images, const ImageProcessorConfig& processor,
                             MediaTokenIds ids, const ImageDecodeOptions& decode)
    : ids_(std::move(ids)), merge_size_(processor.merge_size) {
  images_.reserve(images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    const std::string label = "image " + std::to_string(i + 1);
    RgbImage rgb = decode_image(images[i].content_type, images[i].data, label, decode);
    try {
      images_.push_back(preprocess_image(rgb, processor));
    } catch (const Error& e) {
      throw Error(e.kind(), label + ": " + e.what());
    }
  }
}

PreparedMedia::PreparedMedia(const std::vector<ImageInput>& images, const std::vector<VideoInput>& videos,
                             const ImageProcessorConfig& processor, const VideoProcessorConfig& video_processor,
                             MediaTokenIds ids, const VideoPrepareOptions& options)
    : PreparedMedia(images, processor, std::move(ids), options.image) {
  if (!videos.empty() && !video_processor.present)
    throw Error(ErrorKind::kUnsupported, "this model has no video processor config; videos are not accepted");
  if (!videos.empty() && ids_.video_pad < 0)
    throw Error(ErrorKind::kUnsupported, "this model's tokenizer has no <|video_pad|> token; videos are not accepted");
  videos_.reserve(videos.size());
  for (size_t i = 0; i < videos.size(); ++i)
    videos_.push_back(prepare_video(videos[i], video_processor, "video " + std::to_string(i + 1), options));
}

std::vector<std::array<int64_t, 3>> PreparedMedia::video_grids() const {
  std::vector<std::array<int64_t, 3>> g;
  for (const auto& v : videos_) g.push_back(v.patches.grid_thw);
  return g;
}

std::vector<std::array<int64_t, 3>> PreparedMedia::grids() const {
  std::vector<std::array<int64_t, 3>> g;
  for (const auto& p : images_) g.push_back(p.grid_thw);
  return g;
}

std::vector<int32_t> PreparedMedia::encode_media(const DecisionRequest& request, EncodedMedia* media) const {
  if (request.images.size() != images_.size())
    throw Error(ErrorKind::kInternal, "PreparedMedia was built for " + std::to_string(images_.size()) +
                                          " images, the request has " + std::to_string(request.images.size()));
  if (request.videos.size() != videos_.size())
    throw Error(ErrorKind::kInternal, "PreparedMedia was built for " + std::to_string(videos_.size()) +
                                          " videos, the request has " + std::to_string(request.videos.size()));
  std::vector<VideoSegment> segs;
  for (const auto& v : videos_) segs.push_back({v.patches.grid_thw, v.timestamps});
  return media_segment_ids(grids(), segs, ids_, merge_size_, media);
}

}  // namespace stave
