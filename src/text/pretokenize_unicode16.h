// Hugging Face runs pre-tokenizer regexes with Oniguruma 6.9.10, whose Unicode tables are 16.0;
// Debian 12's PCRE2 10.42 knows Unicode 14.0. Letters, marks and numbers added since then
// would split differently. These are the code points to add to PCRE2's classes so that both
// engines agree (PCRE2's classes are subsets of Oniguruma's, so a union is exact).
#pragma once

namespace stave::tok {

enum class UnicodeClass { kLetter, kMark, kNumber, kDecimalNumber };

// The missing code points as the body of a PCRE2 character class ("\x{..}-\x{..}...").
const char* unicode16_additions(UnicodeClass c);

}  // namespace stave::tok
