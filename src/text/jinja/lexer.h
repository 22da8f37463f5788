// Jinja lexing with Hugging Face's environment settings (trim_blocks, lstrip_blocks, no
// keep_trailing_newline): the template becomes text pieces and tags with whitespace control
// applied, and a tag's inside becomes expression tokens.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stave::jinja {

struct Piece {
  enum class Type { kText, kOutput, kStatement };
  Type type;
  std::string text;  // the text, or the tag's inside without delimiters and -/+ markers
  int line = 1;
};

// Throws stave::Error(kInvalidModel) for an unterminated tag or comment, naming the line.
std::vector<Piece> lex_template(std::string_view source);

struct Token {
  enum class Type { kName, kString, kInt, kFloat, kOp, kEnd };
  Type type;
  std::string text;  // name, operator, or the unescaped string
  int64_t int_value = 0;
  double float_value = 0.0;
};

// Throws stave::Error(kInvalidModel) for a character or literal it cannot read.
std::vector<Token> lex_expression(std::string_view text, int line);

}  // namespace stave::jinja
