// Matching layer names against the patterns Quark configs and `stave quantize --exclude` use:
// an exact name, a `re:`-prefixed regex (matched from the start of the name, like Python's
// re.match), or an fnmatch glob when the pattern contains `*` (Quark's exclude and
// layer_quant_config syntax).
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace stave::quant {

class NamePattern {
 public:
  // Throws stave::Error(kInvalidModel) naming `where` when a regex does not compile.
  NamePattern(const std::string& pattern, const std::string& where);
  ~NamePattern();
  NamePattern(NamePattern&&) noexcept;
  NamePattern& operator=(NamePattern&&) noexcept;

  bool matches(const std::string& name) const;
  const std::string& text() const { return text_; }

 private:
  enum class Kind { kExact, kGlob, kRegex };
  std::string text_;
  Kind kind_ = Kind::kExact;
  std::string body_;        // the glob or regex without its prefix
  struct Regex;
  std::unique_ptr<Regex> regex_;
};

// fnmatch.fnmatch on POSIX: `*` and `?` also match '.', `[...]` / `[!...]` classes, case-sensitive.
bool glob_match(const std::string& pattern, const std::string& name);

}  // namespace stave::quant
