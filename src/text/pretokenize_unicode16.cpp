#include "text/pretokenize_unicode16.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <span>

namespace stave::tok {
namespace {

struct Range {
  char32_t first, last;
};

// Generated once from Oniguruma's src/unicode_property_data.c at commit 94877ac5 (6.9.10,
// Unicode 16.0; the copy onig_sys 69.9 builds into HF tokenizers): per class, the code points
// in Oniguruma's table that PCRE2 10.42's \p{..} does not match. PCRE2 matches no code point
// outside Oniguruma's table for these classes, so the union is exact.
constexpr Range kLetter[] = {
    {0x1C89, 0x1C8A}, {0xA7CB, 0xA7CD}, {0xA7DA, 0xA7DC}, {0x105C0, 0x105F3}, {0x10D4A, 0x10D65},
    {0x10D6F, 0x10D85}, {0x10EC2, 0x10EC4}, {0x1123F, 0x11240}, {0x11380, 0x11389},
    {0x1138B, 0x1138B}, {0x1138E, 0x1138E}, {0x11390, 0x113B5}, {0x113B7, 0x113B7},
    {0x113D1, 0x113D1}, {0x113D3, 0x113D3}, {0x11BC0, 0x11BE0}, {0x11F02, 0x11F02},
    {0x11F04, 0x11F10}, {0x11F12, 0x11F33}, {0x1342F, 0x1342F}, {0x13441, 0x13446},
    {0x13460, 0x143FA}, {0x16100, 0x1611D}, {0x16D40, 0x16D6C}, {0x18CFF, 0x18CFF},
    {0x1B132, 0x1B132}, {0x1B155, 0x1B155}, {0x1DF25, 0x1DF2A}, {0x1E030, 0x1E06D},
    {0x1E4D0, 0x1E4EB}, {0x1E5D0, 0x1E5ED}, {0x1E5F0, 0x1E5F0}, {0x2B739, 0x2B739},
    {0x2EBF0, 0x2EE5D}, {0x31350, 0x323AF},
};
constexpr Range kMark[] = {
    {0x897, 0x897}, {0xCF3, 0xCF3}, {0xECE, 0xECE}, {0x10D69, 0x10D6D}, {0x10EFC, 0x10EFF},
    {0x11241, 0x11241}, {0x113B8, 0x113C0}, {0x113C2, 0x113C2}, {0x113C5, 0x113C5},
    {0x113C7, 0x113CA}, {0x113CC, 0x113D0}, {0x113D2, 0x113D2}, {0x113E1, 0x113E2},
    {0x11F00, 0x11F01}, {0x11F03, 0x11F03}, {0x11F34, 0x11F3A}, {0x11F3E, 0x11F42},
    {0x11F5A, 0x11F5A}, {0x13440, 0x13440}, {0x13447, 0x13455}, {0x1611E, 0x1612F},
    {0x1E08F, 0x1E08F}, {0x1E4EC, 0x1E4EF}, {0x1E5EE, 0x1E5EF},
};
constexpr Range kNumber[] = {
    {0x10D40, 0x10D49}, {0x116D0, 0x116E3}, {0x11BF0, 0x11BF9}, {0x11F50, 0x11F59},
    {0x16130, 0x16139}, {0x16D70, 0x16D79}, {0x1CCF0, 0x1CCF9}, {0x1D2C0, 0x1D2D3},
    {0x1E4F0, 0x1E4F9}, {0x1E5F1, 0x1E5FA},
};
constexpr Range kDecimalNumber[] = {
    {0x10D40, 0x10D49}, {0x116D0, 0x116E3}, {0x11BF0, 0x11BF9}, {0x11F50, 0x11F59},
    {0x16130, 0x16139}, {0x16D70, 0x16D79}, {0x1CCF0, 0x1CCF9}, {0x1E4F0, 0x1E4F9},
    {0x1E5F1, 0x1E5FA},
};

std::span<const Range> ranges_of(UnicodeClass c) {
  switch (c) {
    case UnicodeClass::kLetter: return kLetter;                // 9272 code points
    case UnicodeClass::kMark: return kMark;                    // 93
    case UnicodeClass::kNumber: return kNumber;                // 120
    case UnicodeClass::kDecimalNumber: return kDecimalNumber;  // 100
  }
  return {};
}

bool in(std::span<const Range> ranges, char32_t cp) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](char32_t v, const Range& r) { return v < r.first; });
  return it != ranges.begin() && cp <= std::prev(it)->last;
}

}  // namespace

std::string unicode16_additions(UnicodeClass c) {
  std::string body;
  char buf[40];
  for (const Range& r : ranges_of(c)) {
    if (r.first == r.last)
      std::snprintf(buf, sizeof(buf), "\\x{%X}", unsigned(r.first));
    else
      std::snprintf(buf, sizeof(buf), "\\x{%X}-\\x{%X}", unsigned(r.first), unsigned(r.last));
    body += buf;
  }
  return body;
}

bool is_unicode16_addition(char32_t cp) {
  if (cp < kFirstAddition) return false;
  return in(kLetter, cp) || in(kMark, cp) || in(kNumber, cp) || in(kDecimalNumber, cp);
}

}  // namespace stave::tok
