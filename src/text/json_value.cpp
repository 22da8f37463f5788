// The ordered JSON value and its parser. nlohmann's SAX parser does the lexing and the
// checks it already has (grammar, UTF-8, surrogate pairs, number overflow, trailing data);
// this file builds the tree with Python's rules for key order, duplicates and integers.
#include "text/json_value.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "stave/errors.h"

namespace stave {

// ---------------------------------------------------------------------------------------------
// JsonValue

JsonValue::~JsonValue() {
  // Children that have children of their own are moved onto a work list and taken apart there,
  // so the recursion of the implicit destructors is at most two levels deep.
  auto has_children = [](const JsonValue& v) { return !v.items_.empty() || !v.members_.empty(); };
  bool deep = false;
  for (const auto& item : items_) deep = deep || has_children(item);
  for (const auto& member : members_) deep = deep || has_children(member.second);
  if (!deep) return;
  std::vector<JsonValue> pending;
  auto take_children = [&](JsonValue& v) {
    for (auto& item : v.items_)
      if (has_children(item)) pending.push_back(std::move(item));
    for (auto& member : v.members_)
      if (has_children(member.second)) pending.push_back(std::move(member.second));
  };
  take_children(*this);
  while (!pending.empty()) {
    JsonValue v = std::move(pending.back());
    pending.pop_back();
    take_children(v);
  }  // v now holds only leaves and emptied shells
}

JsonValue JsonValue::boolean(bool b) {
  JsonValue v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}

JsonValue JsonValue::integer(std::string digits) {
  // Canonical form: no leading zeros, no "-0" (Python's int(-0) prints "0").
  bool negative = !digits.empty() && digits[0] == '-';
  size_t first = negative ? 1 : 0;
  size_t nonzero = digits.find_first_not_of('0', first);
  if (nonzero == std::string::npos) {
    digits = "0";
  } else if (nonzero > first) {
    digits.erase(first, nonzero - first);
  }
  JsonValue v;
  v.kind_ = Kind::kInteger;
  v.num_ = std::strtod(digits.c_str(), nullptr);  // as_double(); may be inf for huge values
  v.str_ = std::move(digits);
  return v;
}

JsonValue JsonValue::floating(double d) {
  JsonValue v;
  v.kind_ = Kind::kFloat;
  v.num_ = d;
  return v;
}

JsonValue JsonValue::string(std::string s) {
  JsonValue v;
  v.kind_ = Kind::kString;
  v.str_ = std::move(s);
  return v;
}

JsonValue JsonValue::array(std::vector<JsonValue> items) {
  JsonValue v;
  v.kind_ = Kind::kArray;
  v.items_ = std::move(items);
  return v;
}

JsonValue JsonValue::object(std::vector<Member> members) {
  JsonValue v;
  v.kind_ = Kind::kObject;
  v.members_ = std::move(members);
  return v;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& m : members_)
    if (m.first == key) return &m.second;
  return nullptr;
}

bool JsonValue::truthy() const {
  switch (kind_) {
    case Kind::kNull: return false;
    case Kind::kBool: return bool_;
    case Kind::kInteger: return str_ != "0";
    case Kind::kFloat: return num_ != 0.0;
    case Kind::kString: return !str_.empty();
    case Kind::kArray: return !items_.empty();
    case Kind::kObject: return !members_.empty();
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Parser

namespace {

// Integers this long are past what strtod keeps finite (nlohmann then reports "number
// overflow"); they are swapped for a same-length float placeholder before parsing and
// restored in the SAX handler.
constexpr size_t kLongIntegerDigits = 300;

// Makes text safe to put in an error message that will itself be JSON: invalid UTF-8 bytes
// become \xNN.
std::string printable(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; ok && k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (ok && len > 1) {
      static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      static const char* kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      i += 1;
    }
  }
  return out;
}

// What a pass over the raw text finds before nlohmann parses it. Number tokens are counted in
// text order, which is the order of the SAX number callbacks for any text that parses.
struct Prescan {
  struct LongInteger {
    size_t ordinal;      // which number token (0-based)
    size_t position;     // 1-based byte position of its first character
    std::string digits;  // the literal, sign included
  };
  std::vector<LongInteger> long_integers;
  size_t first_too_deep = 0;  // 1-based byte position of the first bracket past max_depth; 0: none
};

bool is_json_integer(std::string_view tok) {
  size_t i = !tok.empty() && tok[0] == '-' ? 1 : 0;
  if (i >= tok.size()) return false;
  if (tok[i] == '0') return tok.size() == i + 1;
  for (; i < tok.size(); ++i)
    if (tok[i] < '0' || tok[i] > '9') return false;
  return true;
}

Prescan prescan(std::string_view text, size_t max_depth) {
  Prescan out;
  size_t depth = 0, ordinal = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth && out.first_too_deep == 0) out.first_too_deep = i + 1;
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t start = i;
      while (i + 1 < text.size() && std::string_view("0123456789+-.eE").find(text[i + 1]) != std::string_view::npos) ++i;
      std::string_view tok = text.substr(start, i - start + 1);
      size_t ndigits = tok.size() - (tok[0] == '-' ? 1 : 0);
      if (ndigits > kLongIntegerDigits && is_json_integer(tok))
        out.long_integers.push_back({ordinal, start + 1, std::string(tok)});
      ++ordinal;
    }
  }
  return out;
}

// Same length as the integer, so byte positions in nlohmann's messages stay right.
std::string placeholder_for(const std::string& integer) {
  bool negative = integer[0] == '-';
  size_t ndigits = integer.size() - (negative ? 1 : 0);
  return std::string(negative ? "-" : "") + "1e" + std::string(ndigits - 2, '0');
}

class TreeBuilder : public nlohmann::json_sax<nlohmann::json> {
 public:
  TreeBuilder(const Prescan& scan, size_t max_depth, size_t max_values)
      : scan_(scan), max_depth_(max_depth), max_values_(max_values) {}

  JsonValue take_root() { return std::move(root_); }
  // Set when a callback refused the input (nlohmann then returns false without a message).
  const std::optional<Error>& error() const { return error_; }
  bool too_many_values() const { return too_many_values_; }

  bool null() override { return add(JsonValue::null()); }
  bool boolean(bool b) override { return add(JsonValue::boolean(b)); }
  bool number_integer(number_integer_t v) override {
    ++ordinal_;
    return add(JsonValue::integer(std::to_string(v)));
  }
  bool number_unsigned(number_unsigned_t v) override {
    ++ordinal_;
    return add(JsonValue::integer(std::to_string(v)));
  }
  bool number_float(number_float_t v, const string_t& raw) override {
    size_t ordinal = ordinal_++;
    if (next_long_ < scan_.long_integers.size() && scan_.long_integers[next_long_].ordinal == ordinal) {
      const auto& big = scan_.long_integers[next_long_++];
      if (raw != placeholder_for(big.digits)) {
        error_ = Error(ErrorKind::kInternal, "JSON prescan lost track of number tokens at byte " + std::to_string(big.position));
        return false;
      }
      size_t ndigits = big.digits.size() - (big.digits[0] == '-' ? 1 : 0);
      if (ndigits > kPythonIntMaxStrDigits) {
        return refuse(big.position, "integer with " + std::to_string(ndigits) + " digits exceeds the limit of " +
                                        std::to_string(kPythonIntMaxStrDigits) + " digits (as Python's json)");
      }
      return add(JsonValue::integer(big.digits));
    }
    // An integer literal too large for 64 bits arrives here with its exact spelling.
    if (is_json_integer(raw)) return add(JsonValue::integer(raw));
    return add(JsonValue::floating(v));
  }
  bool string(string_t& s) override { return add(JsonValue::string(std::move(s))); }
  bool binary(binary_t&) override { return false; }  // never produced by the text parser

  bool start_object(std::size_t) override { return open(JsonValue::object()); }
  bool start_array(std::size_t) override { return open(JsonValue::array()); }
  bool key(string_t& k) override {
    stack_.back().key = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    std::string what = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ..." ->
    // "syntax error ... (line 1, column 2)"
    if (what.rfind("[json.exception.", 0) == 0) {
      size_t close_bracket = what.find("] ");
      if (close_bracket != std::string::npos) what.erase(0, close_bracket + 2);
    }
    if (what.rfind("parse error at ", 0) == 0) {
      size_t colon = what.find(": ");
      if (colon != std::string::npos) what = what.substr(colon + 2) + " (" + what.substr(15, colon - 15) + ")";
    }
    error_ = Error(ErrorKind::kInvalidRequest, "invalid JSON at byte " + std::to_string(position) + ": " + printable(what));
    return false;
  }

 private:
  struct Frame {
    JsonValue value;
    std::string key;                                   // objects: the key being read
    std::unordered_map<std::string, size_t> index;     // objects: key -> member, once large
  };

  bool refuse(size_t position, const std::string& what) {
    error_ = Error(ErrorKind::kInvalidRequest, "invalid JSON at byte " + std::to_string(position) + ": " + what);
    return false;
  }

  bool open(JsonValue container) {
    if (values_ + stack_.size() >= max_values_) {  // counted when closed; refused before it is built
      too_many_values_ = true;
      return false;
    }
    if (stack_.size() >= max_depth_) {
      return refuse(scan_.first_too_deep, "nesting deeper than " + std::to_string(max_depth_) + " levels");
    }
    stack_.push_back(Frame{std::move(container), {}, {}});
    return true;
  }

  bool close() {
    JsonValue done = std::move(stack_.back().value);
    stack_.pop_back();
    return add(std::move(done));
  }

  bool add(JsonValue v) {
    if (++values_ > max_values_) {
      too_many_values_ = true;
      return false;
    }
    if (stack_.empty()) {
      root_ = std::move(v);
      return true;
    }
    Frame& f = stack_.back();
    if (f.value.is_array()) {
      f.value.items().push_back(std::move(v));
      return true;
    }
    // Python's dict: a repeated key keeps its first position and takes the last value.
    auto& members = f.value.members();
    constexpr size_t kIndexFrom = 16;
    if (members.size() < kIndexFrom) {
      for (auto& m : members) {
        if (m.first == f.key) {
          m.second = std::move(v);
          return true;
        }
      }
    } else {
      if (f.index.empty())
        for (size_t i = 0; i < members.size(); ++i) f.index.emplace(members[i].first, i);
      auto [it, inserted] = f.index.emplace(f.key, members.size());
      if (!inserted) {
        members[it->second].second = std::move(v);
        return true;
      }
    }
    members.emplace_back(std::move(f.key), std::move(v));
    return true;
  }

  const Prescan& scan_;
  size_t max_depth_;
  size_t max_values_ = SIZE_MAX;
  size_t values_ = 0;
  bool too_many_values_ = false;
  size_t ordinal_ = 0;
  size_t next_long_ = 0;
  std::vector<Frame> stack_;
  JsonValue root_;
  std::optional<Error> error_;
};

}  // namespace

JsonValue parse_json(std::string_view text, const JsonParseLimits& limits) {
  if (text.size() > limits.max_bytes) {
    throw Error(ErrorKind::kRequestTooLarge, "JSON text of " + std::to_string(text.size()) +
                                                 " bytes is larger than the limit of " +
                                                 std::to_string(limits.max_bytes) + " bytes");
  }
  Prescan scan = prescan(text, limits.max_depth);
  std::string patched;
  if (!scan.long_integers.empty()) {
    patched.assign(text);
    for (const auto& big : scan.long_integers)
      patched.replace(big.position - 1, big.digits.size(), placeholder_for(big.digits));
    text = patched;
  }
  TreeBuilder builder(scan, limits.max_depth, limits.max_values);
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(text.begin(), text.end(), &builder, nlohmann::json::input_format_t::json,
                                   /*strict=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kInvalidRequest, std::string("invalid JSON: ") + printable(e.what()));
  }
  if (!ok) {
    if (builder.too_many_values()) throw JsonValueLimitError(limits.max_values);
    if (builder.error()) throw *builder.error();
    throw Error(ErrorKind::kInvalidRequest, "invalid JSON");
  }
  return builder.take_root();
}

}  // namespace stave
