#include "formats/name_match.h"

#include <fnmatch.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "stave/errors.h"

namespace stave::quant {

struct NamePattern::Regex {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  std::string where;
  ~Regex() {
    if (context) pcre2_match_context_free(context);
    if (code) pcre2_code_free(code);
  }
};

// A layer name is short: a pattern from a config file that needs more backtracking than this
// on one is refused rather than left to run for seconds per layer.
constexpr uint32_t kRegexMatchLimit = 100000;

bool glob_match(const std::string& pattern, const std::string& name) {
  // Without FNM_PATHNAME / FNM_PERIOD, POSIX fnmatch has Python fnmatch's semantics.
  return ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

NamePattern::NamePattern(const std::string& pattern, const std::string& where) : text_(pattern) {
  if (pattern.rfind("re:", 0) == 0) {
    kind_ = Kind::kRegex;
    body_ = pattern.substr(3);
    int err = 0;
    PCRE2_SIZE offset = 0;
    regex_ = std::make_unique<Regex>();
    regex_->where = where;
    // Python's re.match anchors at the start only; a regex may match a prefix of the name.
    regex_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(body_.data()), body_.size(),
                                 PCRE2_ANCHORED | PCRE2_UTF, &err, &offset, nullptr);
    if (!regex_->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw Error(ErrorKind::kInvalidModel, where + ": regex \"" + body_ + "\" does not compile (" +
                                                reinterpret_cast<const char*>(msg) + " at offset " +
                                                std::to_string(offset) + ")");
    }
    regex_->context = pcre2_match_context_create(nullptr);
    if (!regex_->context) throw Error(ErrorKind::kInternal, "out of memory for a regex match context");
    pcre2_set_match_limit(regex_->context, kRegexMatchLimit);
    pcre2_set_depth_limit(regex_->context, kRegexMatchLimit);
  } else if (pattern.find('*') != std::string::npos) {
    kind_ = Kind::kGlob;
    body_ = pattern;
  } else {
    kind_ = Kind::kExact;
    body_ = pattern;
  }
}

NamePattern::~NamePattern() = default;
NamePattern::NamePattern(NamePattern&&) noexcept = default;
NamePattern& NamePattern::operator=(NamePattern&&) noexcept = default;

bool NamePattern::matches(const std::string& name) const {
  switch (kind_) {
    case Kind::kExact: return name == body_;
    case Kind::kGlob: return glob_match(body_, name);
    case Kind::kRegex: {
      pcre2_match_data* md = pcre2_match_data_create_from_pattern(regex_->code, nullptr);
      int rc = pcre2_match(regex_->code, reinterpret_cast<PCRE2_SPTR>(name.data()), name.size(), 0, 0, md,
                           regex_->context);
      pcre2_match_data_free(md);
      if (rc >= 0) return true;
      if (rc == PCRE2_ERROR_NOMATCH) return false;
      // Anything else (the match limit above all) is not a "no": refusing beats a silent guess.
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw Error(ErrorKind::kInvalidModel, regex_->where + ": regex \"" + body_ + "\" cannot be matched against \"" +
                                                name + "\" (" + reinterpret_cast<const char*>(msg) + ")");
    }
  }
  return false;
}

}  // namespace stave::quant
