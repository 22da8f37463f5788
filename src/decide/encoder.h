// encode_record of the reference: a request becomes token ids plus the spans the joint head
// reads. Each segment is tokenized on its own (as the release code does).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "decide/request.h"
#include "text/tokenizer.h"
#include "util/token_span.h"
#include "vision/encoded_media.h"

namespace stave {

inline constexpr int64_t kDefaultMaxLength = 16384;

struct EncodedQuestion {
  std::string id;
  QuestionType type;
  Span question_span;
  std::vector<Span> option_spans;
  std::vector<std::string> option_ids;
};

struct EncodedRequest {
  std::vector<int32_t> input_ids;
  std::vector<EncodedQuestion> questions;
  std::optional<EncodedMedia> media;
  int64_t state_tokens = 0;            // state tokens kept
  int64_t truncated_state_tokens = 0;  // state tokens cut to fit max_length
};

struct EncodeOptions {
  int64_t max_length = kDefaultMaxLength;
  std::optional<int64_t> max_state_tokens;
};

// Media tokens (the processor's expansion of the image placeholders) are produced by a
// callback so that the encoder does not depend on the vision code. It returns the ids of
// "<|vision_start|><|image_pad|>...<|vision_end|>" x n + "\n" and fills `media`.
struct MediaEncoder {
  virtual ~MediaEncoder() = default;
  virtual std::vector<int32_t> encode_media(const DecisionRequest& request, EncodedMedia* media) const = 0;
};

// Throws stave::Error(kInvalidRequest) with the reference's texts ("schema requires N tokens
// before state; maximum is M"). A request with images and no `media` encoder is refused.
EncodedRequest encode_request(const DecisionRequest& request, const Tokenizer& tokenizer,
                              const EncodeOptions& options = {}, const MediaEncoder* media = nullptr);

}  // namespace stave
