// json.dumps(v, ensure_ascii=False, separators=(",", ":"), sort_keys=True), byte for byte.
#include "text/python_json.h"

#include <algorithm>
#include <cmath>

namespace stave {

void append_python_json_string(std::string& out, std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  out.push_back('"');
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 15]);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

namespace {

void append_float(std::string& out, double v) {
  // json.dumps spells the non-finite values as JavaScript does (allow_nan=True); the parser
  // never produces them.
  if (std::isnan(v)) out += "NaN";
  else if (std::isinf(v)) out += v > 0 ? "Infinity" : "-Infinity";
  else out += python_float_repr(v);
}

// Recursion depth is the tree's depth, which parse_json bounds (JsonParseLimits::max_depth).
void append_value(std::string& out, const JsonValue& v) {
  switch (v.kind()) {
    case JsonValue::Kind::kNull: out += "null"; break;
    case JsonValue::Kind::kBool: out += v.as_bool() ? "true" : "false"; break;
    case JsonValue::Kind::kInteger: out += v.as_string(); break;
    case JsonValue::Kind::kFloat: append_float(out, v.as_double()); break;
    case JsonValue::Kind::kString: append_python_json_string(out, v.as_string()); break;
    case JsonValue::Kind::kArray: {
      out.push_back('[');
      bool first = true;
      for (const auto& item : v.items()) {
        if (!first) out.push_back(',');
        first = false;
        append_value(out, item);
      }
      out.push_back(']');
      break;
    }
    case JsonValue::Kind::kObject: {
      // sort_keys: Python compares str by code point; for UTF-8 that is byte order, which is
      // what std::string's comparison (char_traits<char>, as unsigned char) gives.
      std::vector<const JsonValue::Member*> sorted;
      sorted.reserve(v.members().size());
      for (const auto& m : v.members()) sorted.push_back(&m);
      std::stable_sort(sorted.begin(), sorted.end(),
                       [](const JsonValue::Member* a, const JsonValue::Member* b) { return a->first < b->first; });
      out.push_back('{');
      bool first = true;
      for (const auto* m : sorted) {
        if (!first) out.push_back(',');
        first = false;
        append_python_json_string(out, m->first);
        out.push_back(':');
        append_value(out, m->second);
      }
      out.push_back('}');
      break;
    }
  }
}

}  // namespace


std::string python_json_dumps(const JsonValue& v) {
  std::string out;
  append_value(out, v);
  return out;
}

std::string clef_render(const JsonValue& v) {
  if (v.is_string()) return v.as_string();
  return python_json_dumps(v);
}

}  // namespace stave
