// GPT-2's bytes_to_unicode table: every byte is spelled as one printable code point, so that a
// byte-level BPE vocabulary is made of ordinary strings. Printable Latin-1 bytes keep their own
// code point; the other 68 bytes get U+0100 + n in byte order.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace stave::tok {

// The code point that spells byte `b`.
char32_t byte_to_unicode(uint8_t b);

// The byte a code point spells, or -1 when the code point is not in the table.
int byte_from_unicode(char32_t cp);

// Appends the byte-level spelling of `bytes` (each byte as the UTF-8 of its code point).
void append_byte_level(std::string_view bytes, std::string& out);

// Decodes one vocabulary token as HF's ByteLevel decoder does: when every code point is in the
// table, the bytes they spell; otherwise the token's own UTF-8 bytes.
std::string byte_level_token_bytes(std::string_view token);

}  // namespace stave::tok
