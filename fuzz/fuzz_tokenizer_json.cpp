// tokenizer.json loading on arbitrary bytes: parse_tokenizer_json (the streaming reader, every
// field check and limit) and, when the file is accepted, building the tokenizer (vocabulary,
// merge ranks, added-token matcher, Split regexes) and encoding with it: a fixed sample and the
// input itself. Loading must either succeed or throw stave::Error; a loaded tokenizer must give
// ids inside its vocabulary that decode without an error.
// Seeds: fuzz/corpus/fuzz_tokenizer_json/ (Qwen3's tokenizer.json cut down to a few hundred
// tokens by fuzz/tools/trim_tokenizer.py, and variants of it).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "stave/errors.h"
#include "text/tokenizer.h"

namespace {

void encode_checked(const stave::Tokenizer& tok, std::string_view text) {
  try {
    const std::vector<int32_t> ids = tok.encode(text);
    for (int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    (void)tok.decode(ids);
  } catch (const stave::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<stave::Tokenizer> tok;
  try {
    tok = stave::Tokenizer::from_json(text, "fuzz tokenizer.json");
  } catch (const stave::Error&) {
    return 0;
  }
  encode_checked(*tok, "Hello, world! It's 2026: caf\xc3\xa9 e\xcc\x81 \xe4\xbd\xa0\xe5\xa5\xbd <|im_start|>user\n  123456\n");
  encode_checked(*tok, std::string_view(text).substr(0, 512));
  return 0;
}
