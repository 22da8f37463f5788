#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/pretokenize_regex.h"

#include <pcre2.h>

#include <optional>

#include "stave/errors.h"
#include "text/pretokenize_unicode16.h"
#include "text/tokenizer_unicode.h"

namespace stave::tok {
namespace {

// Oniguruma's classes, spelled for a PCRE2 character class body.
constexpr const char* kSpaceBody = R"(\t\n\x0B\f\r\x{85}\p{Z})";  // White_Space (stable since 6.3)
constexpr const char* kHexBody = "0-9a-fA-F";                      // Oniguruma \h is a hex digit

// \p{L}, \p{M}, \p{N} or \p{Nd}, with the Unicode 16 code points PCRE2 10.42 lacks when
// `aligned`.
std::string unicode_class_body(UnicodeClass c, bool aligned) {
  static const char* const names[] = {"L", "M", "N", "Nd"};
  std::string body = "\\p{";
  body += names[int(c)];
  body += '}';
  if (aligned) body += unicode16_additions(c);
  return body;
}

// The general categories whose Unicode version is aligned; other property names pass through.
std::optional<UnicodeClass> aligned_class(std::string_view name) {
  if (name == "L" || name == "Letter") return UnicodeClass::kLetter;
  if (name == "M" || name == "Mark" || name == "Combining_Mark") return UnicodeClass::kMark;
  if (name == "N" || name == "Number") return UnicodeClass::kNumber;
  if (name == "Nd" || name == "Decimal_Number") return UnicodeClass::kDecimalNumber;
  return std::nullopt;
}

[[noreturn]] void refuse(std::string_view pattern, const std::string& why) {
  throw Error(ErrorKind::kUnsupported,
              "pre_tokenizer Split regex /" + std::string(pattern) + "/: " + why + " is not supported");
}

// Appends a class body inside a class, or a whole (possibly negated) class outside one.
void append_class(std::string& out, const char* body, bool in_class, bool negated) {
  if (!in_class) out += negated ? "[^" : "[";
  out += body;
  if (!in_class) out += ']';
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof(buf)) < 0) return "error " + std::to_string(code);
  return reinterpret_cast<const char*>(buf);
}

// Per-thread match state: match data for the whole-match offsets and a JIT stack large enough
// for long inputs (the default 32 KiB machine stack is not).
struct MatchScratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  MatchScratch() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    if (data == nullptr || context == nullptr || stack == nullptr)
      throw Error(ErrorKind::kInternal, "out of memory for PCRE2 match state");
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchScratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

}  // namespace

std::string translate_oniguruma_pattern(std::string_view p, bool align_unicode, bool* uses_aligned_class) {
  if (uses_aligned_class != nullptr) *uses_aligned_class = false;
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  size_t class_start = 0;  // index just after '[' or '[^'
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      if (i + 1 >= p.size()) refuse(p, "a trailing backslash");
      const char e = p[++i];
      switch (e) {
        case 's': append_class(out, kSpaceBody, in_class, false); break;
        case 'h': append_class(out, kHexBody, in_class, false); break;
        case 'd': append_class(out, unicode_class_body(UnicodeClass::kDecimalNumber, align_unicode).c_str(), in_class, false);
          if (uses_aligned_class != nullptr) *uses_aligned_class = true;
          break;
        case 'S':
        case 'H':
        case 'D':
          if (in_class) refuse(p, std::string("\\") + e + " inside a character class");
          append_class(out,
                       e == 'S'   ? kSpaceBody
                       : e == 'H' ? kHexBody
                                  : unicode_class_body(UnicodeClass::kDecimalNumber, align_unicode).c_str(),
                       false, true);
          if (e == 'D' && uses_aligned_class != nullptr) *uses_aligned_class = true;
          break;
        case 'w':
        case 'W':
          // Oniguruma's \w is Alphabetic + Mark + Decimal_Number + Connector_Punctuation, which
          // PCRE2 cannot spell exactly.
          refuse(p, std::string("\\") + e);
        case 'p':
        case 'P': {
          // \p{Name}, \p{^Name}, \P{Name}: the classes HF patterns use get Unicode 16 data.
          const size_t close = p.find('}', i + 1);
          if (i + 1 >= p.size() || p[i + 1] != '{' || close == std::string_view::npos) {
            out += '\\';
            out += e;
            break;
          }
          std::string_view name = p.substr(i + 2, close - i - 2);
          bool negated = e == 'P';
          if (!name.empty() && name[0] == '^') {
            negated = !negated;
            name.remove_prefix(1);
          }
          const std::optional<UnicodeClass> cls = aligned_class(name);
          if (!cls) {
            out.append(p.substr(i - 1, close - i + 2));  // another property: as written
          } else if (negated && in_class) {
            refuse(p, "a negated \\p{" + std::string(name) + "} inside a character class");
          } else {
            append_class(out, unicode_class_body(*cls, align_unicode).c_str(), in_class, negated);
            if (uses_aligned_class != nullptr) *uses_aligned_class = true;
          }
          i = close;
          break;
        }
        case 'b':
        case 'B':
          if (in_class) {  // backspace inside a class in both dialects
            out += '\\';
            out += e;
            break;
          }
          refuse(p, std::string("\\") + e + " (word boundary)");
        case 'K':
          refuse(p, "\\K");
        default:
          out += '\\';
          out += e;
      }
      continue;
    }
    if (in_class) {
      if (c == ']' && i > class_start) {
        in_class = false;
      } else if (c == '[') {
        refuse(p, i + 1 < p.size() && p[i + 1] == ':' ? "a POSIX bracket class" : "a nested character class");
      } else if (c == '&' && i + 1 < p.size() && p[i + 1] == '&') {
        refuse(p, "class intersection (&&)");
      }
      out += c;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      class_start = i + 1;
      continue;
    }
    if (c == '(' && i + 1 < p.size() && p[i + 1] == '?') {
      // Option letters: Ruby's (?m) is PCRE2's (?s); refuse rather than guess.
      for (size_t k = i + 2; k < p.size() && p[k] != ')' && p[k] != ':'; ++k) {
        if (p[k] == 'm') refuse(p, "the (?m) option");
        if (!(p[k] == 'i' || p[k] == 'x' || p[k] == '-')) break;
      }
    }
    out += c;
  }
  if (in_class) refuse(p, "an unterminated character class");
  return out;
}

namespace {

// Compiles with JIT when it can; throws stave::Error(kUnsupported) naming the pattern.
pcre2_code* compile(std::string_view original, const std::string& compiled, uint32_t options, bool& jit) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(), options, &err,
                                   &err_offset, nullptr);
  if (code == nullptr)
    throw Error(ErrorKind::kUnsupported, "pre_tokenizer Split pattern /" + std::string(original) +
                                             "/ does not compile with PCRE2: " + pcre2_message(err) + " at offset " +
                                             std::to_string(err_offset));
  uint32_t min_length = 0;
  pcre2_pattern_info(code, PCRE2_INFO_MINLENGTH, &min_length);
  if (min_length == 0) {
    pcre2_code_free(code);
    refuse(original, "a pattern that can match the empty string");
  }
  jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return code;
}

// Whether `text` holds a code point whose class PCRE2 and Oniguruma see differently. They all
// take three or four UTF-8 bytes, so most text is passed over a byte at a time.
bool has_unicode16_addition(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < text.size();) {
    if (p[i] < 0xE0) {
      ++i;
      continue;
    }
    size_t len = 0;
    const char32_t cp = decode_utf8_at(text, i, len);
    if (cp >= kFirstAddition && is_unicode16_addition(cp)) return true;
    i += len;
  }
  return false;
}

}  // namespace

SplitRegex::SplitRegex(std::string_view pattern, bool is_regex) {
  if (!is_regex) {
    code_ = compile(pattern, std::string(pattern), PCRE2_UTF | PCRE2_LITERAL, jit_);
    return;
  }
  // Ruby syntax: ^ and $ are line anchors.
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE;
  bool uses_aligned_class = false;
  const std::string plain = translate_oniguruma_pattern(pattern, false, &uses_aligned_class);
  code_ = compile(pattern, plain, options, jit_);
  if (uses_aligned_class) {
    try {
      aligned_code_ = compile(pattern, translate_oniguruma_pattern(pattern, true, nullptr), options, aligned_jit_);
    } catch (...) {
      pcre2_code_free(static_cast<pcre2_code*>(code_));
      throw;
    }
  }
}

SplitRegex::~SplitRegex() {
  if (code_ != nullptr) pcre2_code_free(static_cast<pcre2_code*>(code_));
  if (aligned_code_ != nullptr) pcre2_code_free(static_cast<pcre2_code*>(aligned_code_));
}

SplitRegex::SplitRegex(SplitRegex&& other) noexcept
    : code_(other.code_), aligned_code_(other.aligned_code_), jit_(other.jit_), aligned_jit_(other.aligned_jit_) {
  other.code_ = nullptr;
  other.aligned_code_ = nullptr;
}

void SplitRegex::split(std::string_view text, size_t base, std::vector<std::pair<size_t, size_t>>& out) const {
  // The Unicode 16 classes are slower to match; they only matter when such a code point is here.
  const bool aligned = aligned_code_ != nullptr && has_unicode16_addition(text);
  const auto* code = static_cast<const pcre2_code*>(aligned ? aligned_code_ : code_);
  const bool jit = aligned ? aligned_jit_ : jit_;
  MatchScratch& s = scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  size_t prev = 0;  // end of the last match: where the next gap starts
  size_t pos = 0;   // where the next search starts
  while (pos < n) {
    const int rc = jit ? pcre2_jit_match(code, subject, n, pos, 0, s.data, s.context)
                        : pcre2_match(code, subject, n, pos, PCRE2_NO_UTF_CHECK, s.data, s.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0)
      throw Error(ErrorKind::kRequestTooLarge, "pre-tokenizer regex failed on a " + std::to_string(n) +
                                                   "-byte piece: " + pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
    const size_t begin = ov[0];
    const size_t end = ov[1];
    if (begin > prev) out.emplace_back(base + prev, base + begin);
    if (end > begin) {
      out.emplace_back(base + begin, base + end);
      pos = end;
    } else {
      // Cannot happen for patterns with a minimum length; step over one character anyway.
      pos = begin + 1;
      while (pos < n && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
    }
    prev = end;
  }
  if (prev < n) out.emplace_back(base + prev, base + n);
}

}  // namespace stave::tok
