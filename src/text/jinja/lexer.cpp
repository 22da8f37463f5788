#include "text/jinja/lexer.h"

#include <cctype>
#include <cstdlib>

#include "stave/errors.h"
#include "text/jinja/value.h"

namespace stave::jinja {
namespace {

[[noreturn]] void syntax_error(int line, const std::string& what) {
  throw Error(ErrorKind::kInvalidModel, "chat template line " + std::to_string(line) + ": " + what);
}

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

int count_lines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// The end of a tag's inside: the position of `close` ("}}" or "%}") outside string literals.
size_t find_close(std::string_view src, size_t from, std::string_view close) {
  char quote = 0;
  for (size_t i = from; i + 1 < src.size() + 1; ++i) {
    const char c = src[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
      continue;
    }
    if (c == '\'' || c == '"') quote = c;
    else if (src.compare(i, close.size(), close) == 0) return i;
  }
  return std::string_view::npos;
}

struct RawTag {
  Piece piece;
  bool is_comment = false;
  bool strip_before = false, strip_after = false;  // '-' markers
  bool keep_before = false, keep_after = false;    // '+' markers
};

}  // namespace

std::vector<Piece> lex_template(std::string_view original) {
  // Jinja normalizes every newline (\r\n, \r) of the template to \n (newline_sequence).
  std::string normalized;
  normalized.reserve(original.size());
  for (size_t i = 0; i < original.size(); ++i) {
    if (original[i] == '\r') {
      normalized += '\n';
      if (i + 1 < original.size() && original[i + 1] == '\n') ++i;
    } else {
      normalized += original[i];
    }
  }
  std::string_view source = normalized;
  // keep_trailing_newline=False: one trailing newline of the source is not output.
  if (source.ends_with("\n")) source.remove_suffix(1);

  std::vector<Piece> texts;   // texts[i] precedes tags[i]; one more text than tags
  std::vector<RawTag> tags;
  std::vector<bool> text_at_line_start;
  size_t pos = 0;
  int line = 1;
  for (;;) {
    size_t open = std::string_view::npos;
    for (size_t i = pos; i + 1 < source.size(); ++i)
      if (source[i] == '{' && (source[i + 1] == '{' || source[i + 1] == '%' || source[i + 1] == '#')) {
        open = i;
        break;
      }
    const std::string_view text = source.substr(pos, open == std::string_view::npos ? std::string_view::npos : open - pos);
    texts.push_back({Piece::Type::kText, std::string(text), line});
    text_at_line_start.push_back(pos == 0 || source[pos - 1] == '\n');
    line += count_lines(text);
    if (open == std::string_view::npos) break;

    RawTag tag;
    const char kind = source[open + 1];
    size_t inner = open + 2;
    if (inner < source.size() && source[inner] == '-') tag.strip_before = true, ++inner;
    else if (inner < source.size() && source[inner] == '+') tag.keep_before = true, ++inner;
    const std::string_view close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t end = kind == '#' ? source.find(close, inner) : find_close(source, inner, close);
    if (end == std::string_view::npos)
      syntax_error(line, kind == '#' ? "unterminated comment" : std::string("unterminated tag '") + source[open] + kind + "'");
    size_t inner_end = end;
    if (inner_end > inner && source[inner_end - 1] == '-') tag.strip_after = true, --inner_end;
    else if (inner_end > inner && source[inner_end - 1] == '+') tag.keep_after = true, --inner_end;
    tag.piece.type = kind == '{' ? Piece::Type::kOutput : Piece::Type::kStatement;
    tag.piece.text = std::string(source.substr(inner, inner_end - inner));
    tag.piece.line = line;
    tag.is_comment = kind == '#';
    line += count_lines(source.substr(open, end + 2 - open));
    tags.push_back(std::move(tag));
    pos = end + 2;
  }

  // Whitespace control, then trim_blocks / lstrip_blocks for block tags and comments.
  for (size_t i = 0; i < tags.size(); ++i) {
    const RawTag& tag = tags[i];
    const bool block = tag.piece.type == Piece::Type::kStatement;
    std::string& before = texts[i].text;
    if (tag.strip_before) {
      while (!before.empty() && is_ws(before.back())) before.pop_back();
    } else if (block && !tag.keep_before) {
      const size_t nl = before.find_last_of('\n');
      const size_t from = nl == std::string::npos ? 0 : nl + 1;
      const bool line_start = nl != std::string::npos || text_at_line_start[i];
      if (line_start && before.find_first_not_of(" \t", from) == std::string::npos) before.resize(from);
    }
    std::string& after = texts[i + 1].text;
    if (tag.strip_after) {
      size_t k = 0;
      while (k < after.size() && is_ws(after[k])) ++k;
      after.erase(0, k);
    } else if (block && !tag.keep_after) {
      if (after.starts_with("\n")) after.erase(0, 1);
    }
  }
  std::vector<Piece> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!texts[i].text.empty()) out.push_back(std::move(texts[i]));
    if (i < tags.size() && !tags[i].is_comment) out.push_back(std::move(tags[i].piece));
  }
  return out;
}

namespace {

std::string unescape(std::string_view s, int line) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '0': out += '\0'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '\n': break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        if (i + n >= s.size()) syntax_error(line, "truncated \\" + std::string(1, c) + " escape");
        const std::string hex(s.substr(i + 1, n));
        char* end = nullptr;
        const unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
        if (hex.size() != n || end != hex.c_str() + n) syntax_error(line, "bad \\" + std::string(1, c) + " escape");
        out += to_utf8(std::u32string(1, static_cast<char32_t>(cp)));
        i += n;
        break;
      }
      default: out += '\\'; out += c;  // Python keeps unknown escapes as written
    }
  }
  return out;
}

}  // namespace

std::vector<Token> lex_expression(std::string_view s, int line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (is_ws(c)) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Token::Type::kName, std::string(s.substr(i, j - i))});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        is_float = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          is_float = true;
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        }
      }
      std::string lit;
      for (size_t k = i; k < j; ++k)
        if (s[k] != '_') lit += s[k];
      Token t{is_float ? Token::Type::kFloat : Token::Type::kInt, lit};
      if (is_float) t.float_value = std::strtod(lit.c_str(), nullptr);
      else t.int_value = std::strtoll(lit.c_str(), nullptr, 10);
      out.push_back(std::move(t));
      i = j;
      continue;
    }
    if (c == '\'' || c == '"') {
      size_t j = i + 1;
      while (j < s.size() && s[j] != c) j += s[j] == '\\' ? 2 : 1;
      if (j >= s.size()) syntax_error(line, "unterminated string literal");
      out.push_back({Token::Type::kString, unescape(s.substr(i + 1, j - i - 1), line)});
      i = j + 1;
      continue;
    }
    static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                       "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", "="};
    bool matched = false;
    for (const char* op : kOps) {
      const std::string_view o(op);
      if (s.compare(i, o.size(), o) == 0) {
        out.push_back({Token::Type::kOp, std::string(o)});
        i += o.size();
        matched = true;
        break;
      }
    }
    if (!matched) syntax_error(line, std::string("unexpected character '") + c + "'");
  }
  out.push_back({Token::Type::kEnd, ""});
  return out;
}

}  // namespace stave::jinja
