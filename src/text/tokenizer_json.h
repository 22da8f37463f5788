// Reads a Hugging Face tokenizer.json into plain settings, checking every field that changes the
// ids of `tokenizer(text, add_special_tokens=False)`. What stave does not implement is refused
// with stave::Error(kUnsupported) naming the field, never ignored.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stave::tok {

struct AddedTokenSpec {
  int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;  // HF's default for a token given without the flag
  bool special = false;
};

// One Split pre-tokenizer with behavior Isolated and invert false: the pattern is a regex (in
// Oniguruma syntax, as HF runs it) or a literal string.
struct SplitSpec {
  std::string pattern;
  bool is_regex = true;
};

struct BpeSpec {
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
  bool ignore_merges = false;
};

struct TokenizerSpec {
  std::vector<AddedTokenSpec> added_tokens;
  bool nfc = false;                 // normalizer: NFC, or none
  std::vector<SplitSpec> splits;    // applied in order, each on every piece of the previous
  BpeSpec bpe;                      // always byte-level (ByteLevel pre-tokenizer and decoder)
};

// Limits on a tokenizer.json, refused with stave::Error(kInvalidModel) while reading, before
// anything is sized by them (Qwen3's: 11 MB, 151,643 vocabulary entries, 151,387 merges,
// tokens of at most 256 bytes, 26 added tokens).
inline constexpr size_t kMaxTokenizerBytes = size_t{64} << 20;
inline constexpr size_t kMaxVocab = size_t{1} << 20;      // entries, and every id is below it
inline constexpr size_t kMaxMerges = size_t{1} << 20;
inline constexpr size_t kMaxTokenBytes = 1024;            // one vocabulary or added token
inline constexpr size_t kMaxAddedTokens = size_t{1} << 16;

// The regex that ByteLevel(use_regex=true) applies (GPT-2's).
extern const char* const kGpt2SplitPattern;

// Throws stave::Error(kInvalidModel) for malformed JSON or missing fields and
// stave::Error(kUnsupported) for types and options stave does not implement; `label` (a path)
// starts every message.
TokenizerSpec parse_tokenizer_json(const std::string& json_text, const std::string& label);

}  // namespace stave::tok
