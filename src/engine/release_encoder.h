// The reference's encode_record for a release, without its weights: what `stave encode` prints
// and the Python module's `encode` returns (input ids, the spans the joint head reads, and for
// images the media fields). Loads config.json, tokenizer.json and the processor config only.
#pragma once
#include <memory>
#include <string>

#include "decide/encoder.h"
#include "decide/request.h"
#include "io/model_config.h"

namespace stave {

class Tokenizer;

class ReleaseEncoder {
 public:
  // `release_dir`: a resolved release folder (resolve_model_path). Throws stave::Error naming a
  // missing or broken file.
  explicit ReleaseEncoder(const std::string& release_dir);
  ~ReleaseEncoder();
  ReleaseEncoder(const ReleaseEncoder&) = delete;
  ReleaseEncoder& operator=(const ReleaseEncoder&) = delete;

  // Throws stave::Error (kInvalidRequest / kUnsupported) for a request it cannot encode.
  EncodedRequest encode(const DecisionRequest& request, const EncodeOptions& options) const;

 private:
  std::string dir_;
  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

// The JSON `stave encode` prints: {"input_ids", "questions": [{id, type, question_span,
// option_spans, option_ids}], "media"?: {image_grid_thw, mm_token_type_ids, token_offset}}.
std::string encoded_request_json(const EncodedRequest& encoded);

}  // namespace stave
