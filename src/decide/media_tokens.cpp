#include "decide/media_tokens.h"

#include "stave/errors.h"

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
  ids.newline = tokenizer.encode("\n");
  return ids;
}

std::vector<int32_t> media_segment_ids(const std::vector<std::array<int64_t, 3>>& grids, const MediaTokenIds& ids,
                                       int64_t merge_size, EncodedMedia* media) {
  std::vector<int32_t> out;
  std::vector<int32_t> types;
  media->image_grid_thw.clear();
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

std::vector<std::array<int64_t, 3>> PreparedMedia::grids() const {
  std::vector<std::array<int64_t, 3>> g;
  for (const auto& p : images_) g.push_back(p.grid_thw);
  return g;
}

std::vector<int32_t> PreparedMedia::encode_media(const DecisionRequest& request, EncodedMedia* media) const {
  if (request.images.size() != images_.size())
    throw Error(ErrorKind::kInternal, "PreparedMedia was built for " + std::to_string(images_.size()) +
                                          " images, the request has " + std::to_string(request.images.size()));
  return media_segment_ids(grids(), ids_, merge_size_, media);
}

}  // namespace stave
