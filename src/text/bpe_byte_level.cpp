#include "text/bpe_byte_level.h"

#include "text/tokenizer_unicode.h"

namespace stave::tok {
namespace {

struct Tables {
  std::array<char32_t, 256> to_unicode{};
  std::array<int16_t, 324> from_unicode{};  // all spellings are below U+0100 + 68
  Tables() {
    from_unicode.fill(-1);
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      to_unicode[size_t(b)] = printable(b) ? char32_t(b) : next++;
      from_unicode[size_t(to_unicode[size_t(b)])] = int16_t(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_unicode(uint8_t b) { return tables().to_unicode[b]; }

int byte_from_unicode(char32_t cp) {
  const auto& t = tables().from_unicode;
  return cp < t.size() ? t[cp] : -1;
}

void append_byte_level(std::string_view bytes, std::string& out) {
  for (unsigned char b : bytes) append_utf8(byte_to_unicode(b), out);
}

std::string byte_level_token_bytes(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    size_t len = 0;
    const int b = byte_from_unicode(decode_utf8_at(token, i, len));
    if (b < 0) return std::string(token);
    bytes.push_back(char(b));
    i += len;
  }
  return bytes;
}

}  // namespace stave::tok
