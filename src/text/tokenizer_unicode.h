// The Unicode pieces the tokenizer needs: strict UTF-8 validation, NFC through utf8proc, the
// character classes that Hugging Face's added-token matching uses (Rust regex `\s` and `\w`),
// and Rust's `String::from_utf8_lossy` for decoding.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace stave::tok {

// Offset of the first byte that is not part of valid UTF-8 (overlongs, surrogates and code
// points past U+10FFFF are invalid), or npos when `s` is valid.
size_t find_invalid_utf8(std::string_view s);

// Throws stave::Error(kInvalidRequest) naming `what` and the byte offset when `s` is not UTF-8.
void require_utf8(std::string_view s, const char* what);

// Decodes the code point starting at s[i] of valid UTF-8 and sets `len` to its byte length.
char32_t decode_utf8_at(std::string_view s, size_t i, size_t& len);
void append_utf8(char32_t cp, std::string& out);

// Unicode White_Space (Rust regex `\s`, Oniguruma `\s`).
bool is_white_space(char32_t cp);
// Rust regex `\w`: Alphabetic, Mark, Decimal_Number, Connector_Punctuation, Join_Control.
bool is_word_char(char32_t cp);

// A code point that NFC leaves alone whatever surrounds it: combining class 0, its own NFC, and
// never a non-initial character of a canonical decomposition (so it never composes with what
// precedes it). Text made of these is already NFC, and NFC can work piecewise between them.
// Most text (ASCII, precomposed Latin, CJK, kana, Hangul syllables, emoji) is inert.
bool nfc_inert(char32_t cp);
// Builds the inert table now (about 0.1 s, once per process) rather than on the first encode.
void prepare_nfc();
// Appends NFC(s) (valid UTF-8 in, valid UTF-8 out). Only the stretches around non-inert code
// points go through utf8proc.
void append_nfc(std::string_view s, std::string& out);
std::string to_nfc(std::string_view s);
// NFC of the whole string through utf8proc (the oracle for append_nfc's piecewise work).
std::string to_nfc_full(std::string_view s);

// Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes one U+FFFD.
void append_utf8_lossy(std::string_view bytes, std::string& out);

}  // namespace stave::tok
