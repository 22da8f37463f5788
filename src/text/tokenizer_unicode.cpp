#include "text/tokenizer_unicode.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <utf8proc.h>

#include "stave/errors.h"
#include "text/tokenizer_nfc_unicode9.h"

namespace stave::tok {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 with `bad_len` set to the length of the
// maximal prefix of a valid sequence (at least 1), as Unicode's "maximal subpart" practice and
// Rust's Utf8Chunks define it.
size_t valid_sequence_length(std::string_view s, size_t i, size_t& bad_len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  const unsigned char b0 = p[i];
  if (b0 < 0x80) return 1;
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    bad_len = 1;
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= n) {
      bad_len = k;
      return 0;
    }
    const unsigned char b = p[i + k];
    const bool ok = (k == 1) ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      bad_len = k;
      return 0;
    }
  }
  return need + 1;
}

}  // namespace

size_t find_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    // ASCII runs are the common case: skip eight bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    size_t bad = 0;
    const size_t len = valid_sequence_length(s, i, bad);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

void require_utf8(std::string_view s, const char* what) {
  const size_t bad = find_invalid_utf8(s);
  if (bad != std::string_view::npos)
    throw Error(ErrorKind::kInvalidRequest,
                std::string(what) + " is not valid UTF-8 (bad byte at offset " + std::to_string(bad) + ")");
}

char32_t decode_utf8_at(std::string_view s, size_t i, size_t& len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  if (p[0] < 0x80) {
    len = 1;
    return p[0];
  }
  if (p[0] < 0xE0) {
    len = 2;
    return (char32_t(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (p[0] < 0xF0) {
    len = 3;
    return (char32_t(p[0] & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  len = 4;
  return (char32_t(p[0] & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) | (char32_t(p[2] & 0x3F) << 6) |
         (p[3] & 0x3F);
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

bool is_white_space(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool is_word_char(char32_t cp) {
  if (cp < 0x80)
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  if (cp == 0x200C || cp == 0x200D) return true;  // Join_Control
  // Other_Alphabetic symbols (circled and squared Latin letters) are Alphabetic but So.
  if ((cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) || (cp >= 0x1F150 && cp <= 0x1F169) ||
      (cp >= 0x1F170 && cp <= 0x1F189))
    return true;
  switch (utf8proc_category(utf8proc_int32_t(cp))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

namespace {

constexpr utf8proc_option_t kNfcOptions = utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE);

// Code points that NFC never touches and that never interact with a neighbour: combining class
// 0, NFC of the character alone is itself, and never a non-initial character of any canonical
// decomposition (so nothing composes with a preceding character); and every code point that
// HF's Unicode 9.0 normalization does not know (tokenizer_nfc_unicode9.h). A string made of such
// characters is in NFC (the Unicode quick-check rule), and a string can be normalized in pieces
// cut just before any of them. utf8proc itself decides membership, once per process.
class InertTable {
 public:
  InertTable() : not_inert_((0x110000 + 63) / 64, 0) {
    utf8proc_int32_t buf[32];
    for (char32_t cp = 0; cp < 0x110000; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) {
        mark(cp);
        continue;
      }
      // HF's Unicode 9.0 tables do not know it: a plain starter for HF, so inert here too.
      if (!hf_nfc_knows(cp)) continue;
      // Most code points have no canonical decomposition (none in the table, or only a
      // compatibility one, which NFC ignores): they are inert unless they combine (ccc != 0)
      // or some other character's decomposition marks them below.
      const utf8proc_property_t* prop = utf8proc_get_property(utf8proc_int32_t(cp));
      const bool hangul_syllable = cp >= 0xAC00 && cp <= 0xD7A3;  // decomposed algorithmically
      if (!hangul_syllable && (prop->decomp_seqindex == UINT16_MAX || prop->decomp_type != 0)) {
        if (prop->combining_class != 0) mark(cp);
        continue;
      }
      int boundclass = 0;
      const utf8proc_ssize_t n =
          utf8proc_decompose_char(utf8proc_int32_t(cp), buf, 32, kNfcOptions, &boundclass);
      if (n < 1 || n > 32) {
        mark(cp);
        continue;
      }
      for (utf8proc_ssize_t k = 1; k < n; ++k) mark(char32_t(buf[k]));
      if (utf8proc_get_property(utf8proc_int32_t(cp))->combining_class != 0) mark(cp);
      const utf8proc_ssize_t m = utf8proc_normalize_utf32(buf, n, kNfcOptions);
      if (m != 1 || buf[0] != utf8proc_int32_t(cp)) mark(cp);
    }
  }
  bool inert(char32_t cp) const { return !((not_inert_[cp >> 6] >> (cp & 63)) & 1); }

 private:
  void mark(char32_t cp) { not_inert_[cp >> 6] |= uint64_t(1) << (cp & 63); }
  std::vector<uint64_t> not_inert_;
};

const InertTable& inert_table() {
  static const InertTable table;
  return table;
}

void append_nfc_utf8proc(std::string_view s, std::string& out) {
  utf8proc_uint8_t* dst = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          utf8proc_ssize_t(s.size()), &dst, kNfcOptions);
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(dst, &std::free);
  if (n < 0)
    throw Error(ErrorKind::kInvalidRequest, std::string("NFC normalization failed: ") + utf8proc_errmsg(n));
  out.append(reinterpret_cast<const char*>(dst), size_t(n));
}

}  // namespace

void prepare_nfc() { inert_table(); }

bool nfc_inert(char32_t cp) { return cp < 0x80 || (cp < 0x110000 && inert_table().inert(cp)); }

void append_nfc(std::string_view s, std::string& out) {
  const InertTable& table = inert_table();
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t done = 0;        // s[0, done) is already in `out`
  size_t last_inert = 0;  // start of the latest inert character: a safe place to cut
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      last_inert = i++;
      continue;
    }
    size_t len = 0;
    const char32_t cp = decode_utf8_at(s, i, len);
    if (table.inert(cp)) {
      last_inert = i;
      i += len;
      continue;
    }
    // Normalize from the inert character before this one (it may compose with what follows)
    // up to the next inert character. A character HF's tables do not know stays out: for HF
    // it is a plain starter, while utf8proc might reorder or compose it.
    size_t begin = std::max(last_inert, done);
    if (begin < i) {
      size_t before_len = 0;
      if (!hf_nfc_knows(decode_utf8_at(s, begin, before_len))) begin = i;
    }
    size_t end = i + len;
    while (end < n) {
      if (p[end] < 0x80) break;
      const char32_t next = decode_utf8_at(s, end, len);
      if (table.inert(next)) break;
      end += len;
    }
    out.append(s.data() + done, begin - done);
    append_nfc_utf8proc(s.substr(begin, end - begin), out);
    done = end;
    last_inert = end;
    i = end;
  }
  out.append(s.data() + done, n - done);
}

std::string to_nfc_full(std::string_view s) {
  std::string out;
  append_nfc_utf8proc(s, out);
  return out;
}

std::string to_nfc(std::string_view s) {
  std::string out;
  append_nfc(s, out);
  return out;
}

void append_utf8_lossy(std::string_view bytes, std::string& out) {
  size_t i = 0;
  const size_t n = bytes.size();
  while (i < n) {
    size_t bad = 0;
    const size_t len = valid_sequence_length(bytes, i, bad);
    if (len > 0) {
      out.append(bytes.data() + i, len);
      i += len;
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD
      i += bad;
    }
  }
}

}  // namespace stave::tok
