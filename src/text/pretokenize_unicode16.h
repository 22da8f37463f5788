// Hugging Face runs pre-tokenizer regexes with Oniguruma 6.9.10, whose Unicode tables are 16.0;
// Debian 12's PCRE2 10.42 knows Unicode 14.0. Letters, marks and numbers added since then
// would split differently. These are the code points to add to PCRE2's classes so that both
// engines agree (PCRE2's classes are subsets of Oniguruma's, so a union is exact).
#pragma once
#include <string>

namespace stave::tok {

enum class UnicodeClass { kLetter, kMark, kNumber, kDecimalNumber };

// The smallest code point in any of the additions (all need three or four UTF-8 bytes).
inline constexpr char32_t kFirstAddition = 0x897;

// The missing code points as the body of a PCRE2 character class ("\x{..}-\x{..}...").
std::string unicode16_additions(UnicodeClass c);

// Whether `cp` is one of the added code points of any class: text without any of them splits
// the same with or without the additions, and the plain classes are faster.
bool is_unicode16_addition(char32_t cp);

}  // namespace stave::tok
