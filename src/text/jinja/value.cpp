#include "text/jinja/value.h"

#include <cmath>

#include "stave/errors.h"
#include "text/python_json.h"

namespace stave::jinja {
namespace {

std::string int_str(const Json& j) {
  return j.is_number_unsigned() ? std::to_string(j.get<uint64_t>()) : std::to_string(j.get<int64_t>());
}

std::string python_str_repr(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(q)) out += std::string("\\") + q;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else out += static_cast<char>(c);
  }
  out += q;
  return out;
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return python_float_repr(d);
}

void dump(const Json& j, std::optional<int> indent, int depth, std::string& out) {
  const std::string item_sep = indent ? "," : ", ";
  auto newline = [&](int d) {
    if (!indent) return;
    out += '\n';
    out.append(static_cast<size_t>(*indent * d), ' ');
  };
  switch (j.type()) {
    case Json::value_t::null: out += "null"; return;
    case Json::value_t::boolean: out += j.get<bool>() ? "true" : "false"; return;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: out += int_str(j); return;
    case Json::value_t::number_float: out += float_json(j.get<double>()); return;
    case Json::value_t::string: append_python_json_string(out, j.get_ref<const std::string&>()); return;
    case Json::value_t::array: {
      if (j.empty()) { out += "[]"; return; }
      out += '[';
      bool first = true;
      for (const Json& e : j) {
        if (!first) out += item_sep;
        first = false;
        newline(depth + 1);
        dump(e, indent, depth + 1, out);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Json::value_t::object: {
      if (j.empty()) { out += "{}"; return; }
      out += '{';
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) out += item_sep;
        first = false;
        newline(depth + 1);
        append_python_json_string(out, it.key());
        out += ": ";
        dump(it.value(), indent, depth + 1, out);
      }
      newline(depth);
      out += '}';
      return;
    }
    default: throw Error(ErrorKind::kInvalidRequest, "tojson: a value that JSON cannot hold");
  }
}

double num(const Json& j) { return j.is_boolean() ? (j.get<bool>() ? 1.0 : 0.0) : j.get<double>(); }
bool numeric(const Json& j) { return j.is_number() || j.is_boolean(); }

bool json_equal(const Json& a, const Json& b) {
  if (numeric(a) && numeric(b)) {
    if ((a.is_number_integer() || a.is_boolean()) && (b.is_number_integer() || b.is_boolean())) {
      auto iv = [](const Json& j) -> int64_t {
        if (j.is_boolean()) return j.get<bool>() ? 1 : 0;
        return j.is_number_unsigned() ? static_cast<int64_t>(j.get<uint64_t>()) : j.get<int64_t>();
      };
      return iv(a) == iv(b);
    }
    return num(a) == num(b);
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!json_equal(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto o = b.find(it.key());
      if (o == b.end() || !json_equal(it.value(), *o)) return false;
    }
    return true;
  }
  return a == b;
}

bool json_less(const Json& a, const Json& b) {
  if (numeric(a) && numeric(b)) return num(a) < num(b);
  if (a.is_string() && b.is_string()) return to_u32(a.get_ref<const std::string&>()) < to_u32(b.get_ref<const std::string&>());
  if (a.is_array() && b.is_array()) {
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (json_less(a[i], b[i])) return true;
      if (json_less(b[i], a[i])) return false;
    }
    return a.size() < b.size();
  }
  throw Error(ErrorKind::kInvalidRequest, std::string("chat template: '<' not supported between ") + a.type_name() +
                                              " and " + b.type_name());
}

}  // namespace

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return "undefined value '" + v.name + "'";
    case Value::Kind::kNamespace: return "namespace";
    case Value::Kind::kMacro: return "macro";
    case Value::Kind::kData: break;
  }
  switch (v.data.type()) {
    case Json::value_t::null: return "None";
    case Json::value_t::boolean: return "bool";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "int";
    case Json::value_t::number_float: return "float";
    case Json::value_t::string: return "str";
    case Json::value_t::array: return "list";
    case Json::value_t::object: return "dict";
    default: return "value";
  }
}

bool truthy(const Value& v) {
  if (v.kind == Value::Kind::kUndefined) return false;
  if (v.kind != Value::Kind::kData) return true;
  const Json& j = v.data;
  switch (j.type()) {
    case Json::value_t::null: return false;
    case Json::value_t::boolean: return j.get<bool>();
    case Json::value_t::number_integer: return j.get<int64_t>() != 0;
    case Json::value_t::number_unsigned: return j.get<uint64_t>() != 0;
    case Json::value_t::number_float: return j.get<double>() != 0.0;
    case Json::value_t::string: return !j.get_ref<const std::string&>().empty();  // json::empty() is false for strings
    case Json::value_t::array:
    case Json::value_t::object: return !j.empty();
    default: return false;
  }
}

std::string repr(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "None";
    case Json::value_t::boolean: return j.get<bool>() ? "True" : "False";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return int_str(j);
    case Json::value_t::number_float: return python_float_repr(j.get<double>());
    case Json::value_t::string: return python_str_repr(j.get_ref<const std::string&>());
    case Json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < j.size(); ++i) out += (i ? ", " : "") + repr(j[i]);
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        out += (first ? "" : ", ") + python_str_repr(it.key()) + ": " + repr(it.value());
        first = false;
      }
      return out + "}";
    }
    default: return "?";
  }
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNamespace: return "<Namespace>";
    case Value::Kind::kMacro: return "<Macro>";
    case Value::Kind::kData: break;
  }
  if (v.data.is_string()) return v.data.get<std::string>();
  return repr(v.data);
}

std::string to_json(const Json& j, std::optional<int> indent) {
  std::string out;
  dump(j, indent, 0, out);
  return out;
}

bool equals(const Value& a, const Value& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kUndefined: return true;
    case Value::Kind::kNamespace: return a.ns == b.ns;
    case Value::Kind::kMacro: return a.macro == b.macro;
    case Value::Kind::kData: return json_equal(a.data, b.data);
  }
  return false;
}

bool less(const Value& a, const Value& b) {
  if (!a.is_data() || !b.is_data())
    throw Error(ErrorKind::kInvalidRequest, "chat template: '<' not supported between " + type_name(a) + " and " +
                                                type_name(b));
  return json_less(a.data, b.data);
}

std::u32string to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out += cp;
    i += static_cast<size_t>(n);
  }
  return out;
}

std::string to_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

}  // namespace stave::jinja
