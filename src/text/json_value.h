// A JSON value that keeps what Python's json.loads keeps and the Clef encoder needs: object
// key order (request order decides question order), and the literal spelling of numbers
// (integers of any size stay exact; floats are re-rendered from their double value).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stave/errors.h"

namespace stave {

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kInteger, kFloat, kString, kArray, kObject };
  using Member = std::pair<std::string, JsonValue>;

  JsonValue() = default;  // null
  // Destruction walks the tree with an explicit stack, so a deep tree cannot overflow the call
  // stack; copies and the other recursive helpers are bounded by the parser's depth limit.
  ~JsonValue();
  JsonValue(const JsonValue&) = default;
  JsonValue(JsonValue&&) noexcept = default;
  JsonValue& operator=(const JsonValue&) = default;
  JsonValue& operator=(JsonValue&&) noexcept = default;
  static JsonValue null() { return JsonValue(); }
  static JsonValue boolean(bool b);
  static JsonValue integer(std::string digits);      // canonical decimal digits, optional '-'
  static JsonValue floating(double v);
  static JsonValue string(std::string s);            // UTF-8
  static JsonValue array(std::vector<JsonValue> items = {});
  static JsonValue object(std::vector<Member> members = {});

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_number() const { return kind_ == Kind::kInteger || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  bool as_bool() const { return bool_; }
  const std::string& as_string() const { return str_; }       // string text, or integer digits
  double as_double() const { return num_; }                    // float value (integers: converted)
  const std::vector<JsonValue>& items() const { return items_; }
  std::vector<JsonValue>& items() { return items_; }
  const std::vector<Member>& members() const { return members_; }
  std::vector<Member>& members() { return members_; }

  // Object lookup (first match; the parser already merged duplicates as Python does).
  const JsonValue* find(std::string_view key) const;
  // Python truthiness: null/false/0/0.0/""/[]/{} are falsy.
  bool truthy() const;

 private:
  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  double num_ = 0.0;
  std::string str_;
  std::vector<JsonValue> items_;
  std::vector<Member> members_;
};

// parse_json's error when a document has more values than JsonParseLimits::max_values.
class JsonValueLimitError : public Error {
 public:
  explicit JsonValueLimitError(size_t limit)
      : Error(ErrorKind::kRequestTooLarge,
              "the JSON document has more than " + std::to_string(limit) + " values (the limit)") {}
};

struct JsonParseLimits {
  size_t max_depth = 128;        // nested arrays/objects; the document itself is depth 0
  size_t max_bytes = 64u << 20;  // over it: stave::Error(kRequestTooLarge)
  // Values (scalars, arrays and objects) in the document; over it: kRequestTooLarge, raised as
  // the tree is built, so a body of millions of tiny values never becomes millions of nodes.
  size_t max_values = SIZE_MAX;
};

// Python (3.11+) refuses to convert integer literals with more digits than this
// (sys.get_int_max_str_digits()), so json.loads fails on them; parse_json refuses them too.
inline constexpr size_t kPythonIntMaxStrDigits = 4300;

// Parses JSON text like Python's json.loads (duplicate keys: the first key's position, the
// last value). Rejects what Python would turn into non-finite floats (NaN, Infinity, 1e400),
// invalid UTF-8, lone surrogates, trailing data, integers longer than Python converts, and
// depth beyond the limit, with a stave::Error(kInvalidRequest) whose message gives the byte
// position ("invalid JSON at byte N: ..."); text over max_bytes is kRequestTooLarge.
JsonValue parse_json(std::string_view text, const JsonParseLimits& limits = {});

}  // namespace stave
