// The Split pre-tokenizer (behavior Isolated): every regex match and every gap between matches
// becomes its own piece. Hugging Face runs these patterns with Oniguruma; stave compiles them
// with PCRE2 (UTF + UCP + JIT) after translating the escapes whose meaning differs.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stave::tok {

// Rewrites an Oniguruma (Ruby syntax) pattern into a PCRE2 pattern with the same matches:
// `\s` `\S` `\h` `\H` become explicit classes with Oniguruma's meaning (PCRE2's \s adds
// U+180E, its \h is horizontal space), and `\p{L}` `\p{M}` `\p{N}` `\p{Nd}` (`\d`) gain the
// code points Unicode 15-16 added (pretokenize_unicode16.h). Throws stave::Error(kUnsupported)
// for what it cannot translate faithfully (`\w`, `\b`, nested classes, ...).
// With `align_unicode` false the classes are PCRE2's own (enough for text without any of the
// added code points, and faster); `uses_aligned_class` tells whether the two spellings differ.
std::string translate_oniguruma_pattern(std::string_view pattern, bool align_unicode = true,
                                        bool* uses_aligned_class = nullptr);

class SplitRegex {
 public:
  // `pattern` in Oniguruma syntax when `is_regex`, else a literal string. Throws
  // stave::Error(kUnsupported) when PCRE2 refuses it or when it can match the empty string.
  SplitRegex(std::string_view pattern, bool is_regex);
  ~SplitRegex();
  SplitRegex(SplitRegex&& other) noexcept;
  SplitRegex& operator=(SplitRegex&&) = delete;
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  // Appends the Isolated pieces of `text` (valid UTF-8) as [begin, end) byte offsets relative
  // to `text`, plus `base`. Thread-safe.
  void split(std::string_view text, size_t base, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  void* code_ = nullptr;          // pcre2_code*, PCRE2's own Unicode classes
  void* aligned_code_ = nullptr;  // pcre2_code* with Oniguruma's Unicode 16 classes, or null
  bool jit_ = false;
  bool aligned_jit_ = false;
};

}  // namespace stave::tok
