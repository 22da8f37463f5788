#include "engine/release_encoder.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "stave/errors.h"
#include "text/tokenizer.h"
#include "util/mapped_file.h"
#include "decide/media_tokens.h"

namespace stave {
namespace fs = std::filesystem;

ReleaseEncoder::ReleaseEncoder(const std::string& release_dir) : dir_(release_dir) {
  const fs::path d(dir_);
  for (const char* name : {"config.json", "tokenizer.json"})
    if (!fs::exists(d / name)) throw Error(ErrorKind::kInvalidModel, "model folder " + dir_ + " has no " + name);
  config_ = parse_model_config(read_file((d / "config.json").string()), (d / "config.json").string());
  tokenizer_ = Tokenizer::from_file((d / "tokenizer.json").string());
}

ReleaseEncoder::~ReleaseEncoder() = default;

EncodedRequest ReleaseEncoder::encode(const DecisionRequest& request, const EncodeOptions& options) const {
  std::unique_ptr<PreparedMedia> media;
  if (!request.images.empty() || !request.videos.empty()) {
    // Media need the processor config (either published layout) to expand their tokens.
    const fs::path d(dir_);
    ImageProcessorConfig processor;
    for (const char* name : {"preprocessor_config.json", "processor_config.json"})
      if (fs::exists(d / name)) {
        processor = parse_image_processor_config(read_file((d / name).string()), (d / name).string());
        break;
      }
    VideoProcessorConfig video = default_video_processor_config(processor);
    for (const char* name : {"video_preprocessor_config.json", "processor_config.json"})
      if (fs::exists(d / name)) {
        VideoProcessorConfig v = parse_video_processor_config(read_file((d / name).string()), (d / name).string());
        if (v.present) {
          video = v;
          break;
        }
      }
    if (!config_.vision.present || !processor.present)
      throw Error(ErrorKind::kUnsupported,
                  std::string("this model has no vision tower or processor config; ") +
                      (request.images.empty() ? "videos" : "images") + " are not accepted");
    media = std::make_unique<PreparedMedia>(request.images, request.videos, processor, video,
                                            media_token_ids(*tokenizer_, config_));
  }
  return encode_request(request, *tokenizer_, options, media.get());
}

std::string encoded_request_json(const EncodedRequest& e) {
  nlohmann::ordered_json out;
  out["input_ids"] = e.input_ids;
  auto questions = nlohmann::ordered_json::array();
  for (const auto& q : e.questions) {
    nlohmann::ordered_json j;
    j["id"] = q.id;
    j["type"] = static_cast<int>(q.type);
    j["question_span"] = {q.question_span.first, q.question_span.second};
    auto spans = nlohmann::ordered_json::array();
    for (const auto& s : q.option_spans) spans.push_back({s.first, s.second});
    j["option_spans"] = std::move(spans);
    j["option_ids"] = q.option_ids;
    questions.push_back(std::move(j));
  }
  out["questions"] = std::move(questions);
  if (e.media) {
    nlohmann::ordered_json m;
    auto grids = nlohmann::ordered_json::array();
    for (const auto& g : e.media->image_grid_thw) grids.push_back({g[0], g[1], g[2]});
    m["image_grid_thw"] = std::move(grids);
    if (!e.media->video_grid_thw.empty()) {
      auto vgrids = nlohmann::ordered_json::array();
      for (const auto& g : e.media->video_grid_thw) vgrids.push_back({g[0], g[1], g[2]});
      m["video_grid_thw"] = std::move(vgrids);
    }
    m["mm_token_type_ids"] = e.media->mm_token_type_ids;
    m["token_offset"] = e.media->token_offset;
    out["media"] = std::move(m);
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
}

}  // namespace stave
