// Synthetic SystemOne requests of an exact encoded length, for `stave bench`: the schema
// (K questions: noul, choice, score in turn) and an optional image are fixed, and the state
// text is grown or cut word by word until the encoder's length is exactly the target.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace stave::measure {

struct ImageSize {
  int width = 0, height = 0;
};
// "WxH" → ImageSize; throws stave::Error(kInvalidRequest) naming the text otherwise.
ImageSize parse_image_size(const std::string& text);

struct SyntheticRequestSpec {
  int64_t tokens = 512;               // encoded length of the whole request (media included)
  int questions = 3;                  // noul, choice, score, noul, ...
  std::optional<ImageSize> image;     // one PNG of this size
};

struct SyntheticRequest {
  std::string json;                   // the request body
  int64_t tokens = 0;                 // its encoded length (== spec.tokens)
  int64_t fixed_tokens = 0;           // length with an empty state (prompt, schema, media)
  int64_t state_tokens = 0;
};

// The encoded length of a request body (the caller's tokenizer and media encoder).
using EncodedLength = std::function<int64_t(const std::string& request_json)>;

// Throws stave::Error(kInvalidRequest) when the target is below the fixed part's length, or
// (never seen with the Qwen3 tokenizer) when no state text hits the target exactly.
SyntheticRequest synthesize_request(const SyntheticRequestSpec& spec, const EncodedLength& measure);

// The request with an empty state (exposed for tests): schema of `questions` fields and the image.
std::string request_json(const SyntheticRequestSpec& spec, const std::string& state);

// A deterministic text of `words` words (a support-ticket log, so activations look like text).
std::string state_text(int64_t words);

}  // namespace stave::measure
