// Values of the chat-template interpreter: JSON data (None, bool, int, float, str, list, dict,
// as Python sees them), plus Jinja's undefined, namespace() objects and macros. Python's
// semantics where a template can see them: truthiness, str(), ==, ordering, repr and
// json.dumps (Hugging Face's tojson: ensure_ascii=False, keys in insertion order).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace stave::jinja {

using Json = nlohmann::ordered_json;
struct Stmt;

struct Namespace;

struct Value {
  enum class Kind { kUndefined, kData, kNamespace, kMacro };
  Kind kind = Kind::kUndefined;
  Json data;                          // kData
  std::shared_ptr<Namespace> ns;      // kNamespace (shared: set ns.x changes it everywhere)
  const Stmt* macro = nullptr;        // kMacro
  std::string name;                   // kUndefined: what was looked up (for messages)

  Value() = default;
  Value(Json j) : kind(Kind::kData), data(std::move(j)) {}  // NOLINT: implicit on purpose
  static Value undefined(std::string what) {
    Value v;
    v.name = std::move(what);
    return v;
  }
  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_data() const { return kind == Kind::kData; }
  bool is_string() const { return is_data() && data.is_string(); }
  bool is_none() const { return is_data() && data.is_null(); }
  bool is_number() const { return is_data() && data.is_number(); }
  bool is_int() const { return is_data() && (data.is_number_integer()); }
  bool is_list() const { return is_data() && data.is_array(); }
  bool is_dict() const { return is_data() && data.is_object(); }
};

struct Namespace {
  std::map<std::string, Value> attrs;
};

// A description for messages: "undefined value 'x'", "int", "list", ...
std::string type_name(const Value& v);

bool truthy(const Value& v);
// Python str(v): None, True, 1, 1.5, the string itself, ['a', 1], {'k': 'v'}; undefined is "".
std::string to_str(const Value& v);
// Python repr of JSON data.
std::string repr(const Json& j);
// json.dumps(j, ensure_ascii=False, indent=indent) with Python's separators and float spelling.
std::string to_json(const Json& j, std::optional<int> indent = std::nullopt);

// Python ==: 1 == 1.0 == True, containers element-wise; undefined equals only undefined.
bool equals(const Value& a, const Value& b);
// Python <: numbers with numbers, strings by code point, lists lexicographically; anything
// else is stave::Error(kInvalidRequest).
bool less(const Value& a, const Value& b);

// UTF-8 strings as Python sees them: sequences of code points.
std::u32string to_u32(std::string_view s);
std::string to_utf8(std::u32string_view s);

}  // namespace stave::jinja
