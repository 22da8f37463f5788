// encode_record of the reference: a request becomes token ids plus the spans the joint head
// reads. Each segment is tokenized on its own (../shared/spec/clef-decision.md §4).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "decide/request.h"
#include "text/tokenizer.h"

namespace stave {

inline constexpr int64_t kDefaultMaxLength = 16384;

using Span = std::pair<int64_t, int64_t>;  // half-open [start, end) token indices

struct EncodedQuestion {
  std::string id;
  QuestionType type;
  Span question_span;
  std::vector<Span> option_spans;
  std::vector<std::string> option_ids;
};

// One image's place in the sequence (filled by the media path, src/vision).
struct EncodedMedia {
  std::vector<std::array<int64_t, 3>> image_grid_thw;  // per image, in patch units
  std::vector<std::array<int64_t, 3>> video_grid_thw;  // per video (t = temporal groups)
  std::vector<int32_t> mm_token_type_ids;              // over the media segment: 0 text, 1 image, 2 video
  int64_t token_offset = 0;                            // prefix length: where media starts
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
