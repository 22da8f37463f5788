// Hugging Face `tokenizers` byte-level BPE, loaded from tokenizer.json, giving the same ids as
// `tokenizer(text, add_special_tokens=False)`: added tokens matched in the raw text first, then
// the normalizer (NFC), the Split pre-tokenizer regex exactly as the file gives it, byte-level
// mapping and BPE with merge ranks. Where HF's libraries carry their own Unicode data, stave
// follows it: the regex classes are Oniguruma's (Unicode 16), NFC is unicode-normalization's
// (Unicode 9 tables). The post_processor is not applied (it adds nothing without special
// tokens); tokenizer_config.json is not read.
//
// Parts: tokenizer_json* (reading and refusing), tokenizer_added_tokens (added-token matching),
// tokenizer_unicode / tokenizer_nfc_unicode9 (UTF-8, NFC), pretokenize_* (Split regex on PCRE2),
// bpe_* (byte table, merge ranks, word cache, model).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stave {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Loads tokenizer.json (`path` may also be a folder holding one); throws
  // stave::Error(kInvalidModel / kUnsupported) naming the field that is missing or unsupported.
  static std::unique_ptr<Tokenizer> from_file(const std::string& path);
  static std::unique_ptr<Tokenizer> from_json(const std::string& json_text, const std::string& label);

  // Thread-safe. `text` must be valid UTF-8 (else stave::Error kInvalidRequest).
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // HF's ByteLevel decoding (invalid UTF-8 becomes U+FFFD); added tokens print as their content.
  // An id that no token has is stave::Error(kInvalidRequest).
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // One id's bytes before UTF-8 repair (a byte-level token may hold part of a character); an
  // added token: its content. The default decodes the id alone.
  virtual std::string token_bytes(int32_t id) const { return decode({id}); }
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  // Whether some token (vocabulary or added) has this id. A model's lm_head is often wider than
  // the tokenizer (rows padded to a round size): such ids have no token and no text.
  virtual bool has_token(int32_t id) const { return id >= 0 && id < vocab_size(); }
  // Number of ids (vocabulary + added tokens): the largest id + 1.
  virtual int32_t vocab_size() const = 0;

  // The pieces that BPE sees, as UTF-8 text, in order: added tokens (as their own pieces), and
  // the rest after normalization and every pre-tokenizer split. For tests and debugging.
  virtual std::vector<std::string> pre_tokenize(std::string_view text) const = 0;
};

}  // namespace stave
