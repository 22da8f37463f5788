// A small interpreter of the Jinja subset that Hugging Face chat templates use, with HF's
// environment semantics (trim_blocks, lstrip_blocks, loop controls, `tojson` as json.dumps with
// ensure_ascii=False, `raise_exception`, `strftime_now`, and the `{% generation %}` block).
//
// Supported: text, {{ }}, {# #}, whitespace control (-, +), if/elif/else, for (tuple targets,
// `if` filter, else, loop.* incl. previtem/nextitem), break/continue, set (names, tuples,
// namespace attributes, set blocks), macros with defaults and keyword arguments, literals
// (lists, dicts, tuples), Python operators, slicing, attribute/item access, the common
// filters, tests, and str/dict methods (see builtins.cpp). Anything else is an Error naming the
// construct (kUnsupported), never silently different output; raise_exception is kInvalidRequest
// with the template's message.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "text/jinja/value.h"

namespace stave::jinja {

struct Stmt;

class Template {
 public:
  // Parses `source` (a syntax error is Error kInvalidModel naming the line).
  explicit Template(std::string_view source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with the variables of `context` (a JSON object: messages, tools, …).
  std::string render(const Json& context) const;

 private:
  struct Parsed;
  std::unique_ptr<Parsed> parsed_;
};

}  // namespace stave::jinja
