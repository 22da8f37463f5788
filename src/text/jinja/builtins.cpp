#include "text/jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <set>

#include <utf8proc.h>

#include "stave/errors.h"

namespace stave::jinja {
namespace {

[[noreturn]] void type_error(const std::string& what) {
  throw Error(ErrorKind::kInvalidRequest, "chat template: " + what);
}
[[noreturn]] void unsupported(const std::string& what) {
  throw Error(ErrorKind::kUnsupported, "chat template: unsupported " + what +
                                           " (stave renders the subset Hugging Face chat templates use)");
}

void need_undefined_ok(const Value& v, const std::string& where) {
  if (v.is_undefined()) type_error("'" + v.name + "' is undefined (in " + where + ")");
}

const std::string& str_of(const Value& v, const std::string& where) {
  if (!v.is_string()) type_error(where + " needs a string, got " + type_name(v));
  return v.data.get_ref<const std::string&>();
}

int64_t int_of(const Value& v, const std::string& where) {
  if (v.is_data() && v.data.is_boolean()) return v.data.get<bool>() ? 1 : 0;
  if (!v.is_int()) type_error(where + " needs an integer, got " + type_name(v));
  return v.data.get<int64_t>();
}

const Value* kwarg(const Kwargs& kw, const std::string& name) {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

// Positional argument i, else keyword `name`, else null.
const Value* arg(const Args& a, size_t i, const Kwargs& kw, const std::string& name) {
  if (i < a.size()) return &a[i];
  return kwarg(kw, name);
}

void check_kwargs(const Kwargs& kw, std::initializer_list<const char*> allowed, const std::string& where) {
  for (const auto& [k, v] : kw) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || k == a;
    if (!ok) unsupported("argument '" + k + "' of " + where);
  }
}

bool is_py_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Python str.strip / lstrip / rstrip (chars: None → whitespace).
std::string py_strip(const std::string& s, const Value* chars, bool left, bool right) {
  const std::u32string u = to_u32(s);
  std::u32string set;
  const bool ws = chars == nullptr || chars->is_none();
  if (!ws) set = to_u32(str_of(*chars, "strip"));
  auto drop = [&](char32_t c) { return ws ? is_py_space(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && drop(u[b])) ++b;
  if (right)
    while (e > b && drop(u[e - 1])) --e;
  return to_utf8(std::u32string_view(u).substr(b, e - b));
}

Json py_split(const std::string& s, const Value* sep, int64_t maxsplit, bool from_right) {
  Json out = Json::array();
  if (sep == nullptr || sep->is_none()) {
    const std::u32string u = to_u32(s);
    std::vector<std::u32string> parts;
    if (!from_right) {
      size_t i = 0;
      while (i < u.size()) {
        while (i < u.size() && is_py_space(u[i])) ++i;
        if (i == u.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
          size_t e = u.size();
          while (e > i && is_py_space(u[e - 1])) --e;
          parts.push_back(u.substr(i, e - i));
          break;
        }
        size_t j = i;
        while (j < u.size() && !is_py_space(u[j])) ++j;
        parts.push_back(u.substr(i, j - i));
        i = j;
      }
    } else {
      if (maxsplit >= 0) unsupported("rsplit() with maxsplit and no separator");
      return py_split(s, sep, -1, false);
    }
    for (auto& p : parts) out.push_back(to_utf8(p));
    return out;
  }
  const std::string& d = str_of(*sep, "split");
  if (d.empty()) type_error("split(): empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t start = 0;
    for (;;) {
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) break;
      const size_t at = s.find(d, start);
      if (at == std::string::npos) break;
      parts.push_back(s.substr(start, at - start));
      start = at + d.size();
    }
    parts.push_back(s.substr(start));
  } else {
    size_t end = s.size();
    std::vector<std::string> rev;
    for (;;) {
      if (maxsplit >= 0 && static_cast<int64_t>(rev.size()) == maxsplit) break;
      if (end < d.size()) break;
      const size_t at = s.rfind(d, end - d.size());
      if (at == std::string::npos) break;
      rev.push_back(s.substr(at + d.size(), end - at - d.size()));
      end = at;
    }
    rev.push_back(s.substr(0, end));
    parts.assign(rev.rbegin(), rev.rend());
  }
  for (auto& p : parts) out.push_back(p);
  return out;
}

std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) unsupported("replace() with an empty search string");
  std::string out;
  size_t start = 0;
  int64_t n = 0;
  for (;;) {
    if (count >= 0 && n == count) break;
    const size_t at = s.find(from, start);
    if (at == std::string::npos) break;
    out += s.substr(start, at - start) + to;
    start = at + from.size();
    ++n;
  }
  return out + s.substr(start);
}

// 0 lower, 1 upper, 2 capitalize, 3 title: Python's str methods on code points (utf8proc's
// simple case mappings; Python's few special full mappings such as ß → SS are not applied).
std::string case_map(const std::string& s, int mode) {
  std::u32string u = to_u32(s);
  bool word_start = true;
  for (size_t i = 0; i < u.size(); ++i) {
    const auto c = static_cast<utf8proc_int32_t>(u[i]);
    utf8proc_int32_t r = c;
    if (mode == 0) r = utf8proc_tolower(c);
    else if (mode == 1) r = utf8proc_toupper(c);
    else if (mode == 2) r = i == 0 ? utf8proc_totitle(c) : utf8proc_tolower(c);
    else {
      r = word_start ? utf8proc_totitle(c) : utf8proc_tolower(c);
      const utf8proc_category_t cat = utf8proc_category(c);
      word_start = !(cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT ||
                     cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_LO);
    }
    u[i] = static_cast<char32_t>(r);
  }
  return to_utf8(u);
}

bool prefix_match(const std::string& s, const Value& p, bool suffix, const std::string& where) {
  auto one = [&](const std::string& x) { return suffix ? s.ends_with(x) : s.starts_with(x); };
  if (p.is_list()) {
    for (const Json& e : p.data) {
      if (!e.is_string()) type_error(where + " needs strings");
      if (one(e.get<std::string>())) return true;
    }
    return false;
  }
  return one(str_of(p, where));
}

int64_t length_of(const Value& v) {
  if (v.is_string()) return static_cast<int64_t>(to_u32(v.data.get_ref<const std::string&>()).size());
  if (v.is_list() || v.is_dict()) return static_cast<int64_t>(v.data.size());
  if (v.is_undefined()) return 0;
  type_error("length of " + type_name(v));
}

Json to_list(const Value& v) {
  Json out = Json::array();
  for (const Value& e : iterate(v)) {
    if (!e.is_data()) unsupported("a list of " + type_name(e));
    out.push_back(e.data);
  }
  return out;
}

}  // namespace

std::vector<Value> iterate(const Value& v) {
  std::vector<Value> out;
  if (v.is_undefined()) return out;
  if (v.is_list()) {
    for (const Json& e : v.data) out.emplace_back(e);
  } else if (v.is_dict()) {
    for (auto it = v.data.begin(); it != v.data.end(); ++it) out.emplace_back(Json(it.key()));
  } else if (v.is_string()) {
    for (char32_t c : to_u32(v.data.get_ref<const std::string&>())) out.emplace_back(Json(to_utf8(std::u32string(1, c))));
  } else {
    type_error(type_name(v) + " is not iterable");
  }
  return out;
}

Value get_item(const Value& obj, const Value& key) {
  need_undefined_ok(obj, "an item access");
  if (obj.is_list() || obj.is_string()) {
    if (!key.is_int()) {
      if (key.is_string()) return Value::undefined(to_str(key));
      type_error("list indices must be integers, got " + type_name(key));
    }
    int64_t i = key.data.get<int64_t>();
    if (obj.is_list()) {
      const auto n = static_cast<int64_t>(obj.data.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("index " + std::to_string(key.data.get<int64_t>()));
      return Value(obj.data[static_cast<size_t>(i)]);
    }
    const std::u32string u = to_u32(obj.data.get_ref<const std::string&>());
    const auto n = static_cast<int64_t>(u.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("index " + std::to_string(key.data.get<int64_t>()));
    return Value(Json(to_utf8(u.substr(static_cast<size_t>(i), 1))));
  }
  if (obj.is_dict()) {
    if (!key.is_string()) return Value::undefined(key.is_data() ? repr(key.data) : "key");
    const auto it = obj.data.find(key.data.get_ref<const std::string&>());
    if (it == obj.data.end()) return Value::undefined(key.data.get<std::string>());
    return Value(*it);
  }
  if (obj.kind == Value::Kind::kNamespace && key.is_string()) return get_attr(obj, key.data.get<std::string>());
  return Value::undefined(key.is_data() ? to_str(key) : "item");
}

Value get_attr(const Value& obj, const std::string& name) {
  need_undefined_ok(obj, "attribute '" + name + "'");
  if (obj.is_dict()) {
    const auto it = obj.data.find(name);
    if (it == obj.data.end()) return Value::undefined(name);
    return Value(*it);
  }
  if (obj.kind == Value::Kind::kNamespace) {
    const auto it = obj.ns->attrs.find(name);
    if (it == obj.ns->attrs.end()) return Value::undefined(name);
    return it->second;
  }
  return Value::undefined(name);
}

Value call_method(const Value& obj, const std::string& name, const Args& a, const Kwargs& kw) {
  if (obj.is_undefined()) type_error("'" + obj.name + "' is undefined (calling ." + name + "())");
  const std::string where = type_name(obj) + "." + name + "()";
  if (obj.is_string()) {
    const std::string& s = obj.data.get_ref<const std::string&>();
    if (name == "startswith" || name == "endswith") {
      if (a.size() != 1) unsupported(where + " with start/end arguments");
      return Value(Json(prefix_match(s, a[0], name == "endswith", where)));
    }
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const Value* chars = arg(a, 0, kw, "chars");
      return Value(Json(py_strip(s, chars, name != "rstrip", name != "lstrip")));
    }
    if (name == "split" || name == "rsplit") {
      check_kwargs(kw, {"sep", "maxsplit"}, where);
      const Value* sep = arg(a, 0, kw, "sep");
      const Value* mx = arg(a, 1, kw, "maxsplit");
      return Value(py_split(s, sep, mx ? int_of(*mx, where) : -1, name == "rsplit"));
    }
    if (name == "lower") return Value(Json(case_map(s, 0)));
    if (name == "upper") return Value(Json(case_map(s, 1)));
    if (name == "capitalize") return Value(Json(case_map(s, 2)));
    if (name == "title") return Value(Json(case_map(s, 3)));
    if (name == "replace") {
      if (a.size() < 2) type_error(where + " needs two arguments");
      return Value(Json(py_replace(s, str_of(a[0], where), str_of(a[1], where), a.size() > 2 ? int_of(a[2], where) : -1)));
    }
    if (name == "find" || name == "rfind" || name == "count") {
      if (a.size() != 1) unsupported(where + " with start/end arguments");
      const std::string& sub = str_of(a[0], where);
      if (name == "count") {
        if (sub.empty()) return Value(Json(static_cast<int64_t>(to_u32(s).size() + 1)));
        int64_t n = 0;
        for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
        return Value(Json(n));
      }
      const size_t at = name == "find" ? s.find(sub) : s.rfind(sub);
      if (at == std::string::npos) return Value(Json(-1));
      return Value(Json(static_cast<int64_t>(to_u32(s.substr(0, at)).size())));
    }
    if (name == "join") {
      if (a.size() != 1) type_error(where + " needs one argument");
      std::string out;
      bool first = true;
      for (const Value& e : iterate(a[0])) {
        if (!first) out += s;
        first = false;
        out += str_of(e, where);
      }
      return Value(Json(out));
    }
    if (name == "isdigit" || name == "isspace" || name == "isalpha") {
      if (s.empty()) return Value(Json(false));
      for (char32_t c : to_u32(s)) {
        const bool ok = name == "isspace" ? is_py_space(c)
                        : name == "isdigit" ? (c >= '0' && c <= '9')
                                            : (c < 0x80 && std::isalpha(static_cast<int>(c)));
        if (!ok) return Value(Json(false));
      }
      return Value(Json(true));
    }
  } else if (obj.is_dict()) {
    if (name == "cycle" || name == "changed") unsupported("loop." + name + "()");
    if (name == "items") {
      Json out = Json::array();
      for (auto it = obj.data.begin(); it != obj.data.end(); ++it) out.push_back(Json::array({it.key(), it.value()}));
      return Value(out);
    }
    if (name == "keys" || name == "values") {
      Json out = Json::array();
      for (auto it = obj.data.begin(); it != obj.data.end(); ++it) out.push_back(name == "keys" ? Json(it.key()) : it.value());
      return Value(out);
    }
    if (name == "get") {
      if (a.empty()) type_error(where + " needs a key");
      Value v = get_item(obj, a[0]);
      if (v.is_undefined()) return a.size() > 1 ? a[1] : Value(Json(nullptr));
      return v;
    }
  }
  // A method Python has but stave does not implement is unsupported; one the type does not
  // have at all is the request's (or template's) error, as in Jinja.
  static const std::set<std::string> list_methods = {"append", "clear", "copy", "count", "extend", "index",
                                                     "insert", "pop", "remove", "reverse", "sort"};
  static const std::set<std::string> dict_methods = {"clear", "copy", "fromkeys", "get", "items", "keys",
                                                     "pop", "popitem", "setdefault", "update", "values"};
  if (obj.is_string() || (obj.is_list() && list_methods.count(name)) || (obj.is_dict() && dict_methods.count(name)))
    unsupported("method " + where);
  type_error(type_name(obj) + " has no method '" + name + "'");
}

bool apply_test(const std::string& name, const Value& v, const Args& a) {
  auto need = [&](size_t n) {
    if (a.size() != n) type_error("test '" + name + "' takes " + std::to_string(n) + " argument(s)");
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_data() && v.data.is_number();
  if (name == "integer") return v.is_data() && v.data.is_number_integer();
  if (name == "float") return v.is_data() && v.data.is_number_float();
  if (name == "boolean") return v.is_data() && v.data.is_boolean();
  if (name == "true") return v.is_data() && v.data.is_boolean() && v.data.get<bool>();
  if (name == "false") return v.is_data() && v.data.is_boolean() && !v.data.get<bool>();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "callable") return v.kind == Value::Kind::kMacro;
  if (name == "odd" || name == "even") {
    const int64_t i = int_of(v, "test '" + name + "'");
    return (i % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    need(1);
    const int64_t d = int_of(a[0], "divisibleby");
    if (d == 0) type_error("divisibleby 0");
    return int_of(v, "divisibleby") % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==" || name == "sameas") {
    need(1);
    return equals(v, a[0]);
  }
  if (name == "ne" || name == "!=") {
    need(1);
    return !equals(v, a[0]);
  }
  if (name == "lt" || name == "lessthan" || name == "<") { need(1); return less(v, a[0]); }
  if (name == "gt" || name == "greaterthan" || name == ">") { need(1); return less(a[0], v); }
  if (name == "le" || name == "<=") { need(1); return !less(a[0], v); }
  if (name == "ge" || name == ">=") { need(1); return !less(v, a[0]); }
  if (name == "in") {
    need(1);
    for (const Value& e : iterate(a[0]))
      if (equals(e, v)) return true;
    if (a[0].is_string() && v.is_string())
      return a[0].data.get_ref<const std::string&>().find(v.data.get_ref<const std::string&>()) != std::string::npos;
    return false;
  }
  if (name == "lower" || name == "upper") {
    const std::string& s = str_of(v, "test '" + name + "'");
    return s == case_map(s, name == "lower" ? 0 : 1);
  }
  unsupported("test 'is " + name + "'");
}

Value apply_filter(const std::string& name, const Value& v, const Args& a, const Kwargs& kw) {
  const std::string where = "filter '" + name + "'";
  if (name == "default" || name == "d") {
    const Value* def = arg(a, 0, kw, "default_value");
    const Value* boolean = arg(a, 1, kw, "boolean");
    const bool use = v.is_undefined() || (boolean && truthy(*boolean) && !truthy(v));
    return use ? (def ? *def : Value(Json(""))) : v;
  }
  if (name == "safe") return v;
  need_undefined_ok(v, where);
  if (name == "length" || name == "count") return Value(Json(length_of(v)));
  if (name == "tojson") {
    check_kwargs(kw, {"indent", "sort_keys", "ensure_ascii"}, where);
    if (const Value* ea = kwarg(kw, "ensure_ascii"); ea && truthy(*ea)) unsupported("tojson(ensure_ascii=true)");
    const Value* ind = arg(a, 0, kw, "indent");
    std::optional<int> indent;
    if (ind && !ind->is_none()) indent = static_cast<int>(int_of(*ind, where));
    if (!v.is_data()) type_error("tojson of " + type_name(v));
    if (const Value* sk = kwarg(kw, "sort_keys"); sk && truthy(*sk)) {
      const nlohmann::json sorted = nlohmann::json::parse(v.data.dump());  // std::map keys: sorted by bytes = code points
      return Value(Json(to_json(Json::parse(sorted.dump()), indent)));
    }
    return Value(Json(to_json(v.data, indent)));
  }
  if (name == "string") return Value(Json(to_str(v)));
  if (name == "trim") return Value(Json(py_strip(to_str(v), arg(a, 0, kw, "chars"), true, true)));
  if (name == "lower") return Value(Json(case_map(to_str(v), 0)));
  if (name == "upper") return Value(Json(case_map(to_str(v), 1)));
  if (name == "capitalize") return Value(Json(case_map(to_str(v), 2)));
  if (name == "title") return Value(Json(case_map(to_str(v), 3)));
  if (name == "replace") {
    if (a.size() < 2) type_error(where + " needs two arguments");
    return Value(Json(py_replace(to_str(v), str_of(a[0], where), str_of(a[1], where), a.size() > 2 ? int_of(a[2], where) : -1)));
  }
  if (name == "first" || name == "last") {
    const std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined(name + " of an empty sequence");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value(to_list(v));
  if (name == "reverse") {
    if (v.is_string()) {
      std::u32string u = to_u32(v.data.get_ref<const std::string&>());
      std::reverse(u.begin(), u.end());
      return Value(Json(to_utf8(u)));
    }
    Json l = to_list(v);
    std::reverse(l.begin(), l.end());
    return Value(l);
  }
  if (name == "items") {
    if (!v.is_dict()) type_error(where + " needs a dict, got " + type_name(v));
    return call_method(v, "items", {}, {});
  }
  if (name == "join") {
    check_kwargs(kw, {"d", "attribute"}, where);
    const Value* sep = arg(a, 0, kw, "d");
    const Value* attr = arg(a, 1, kw, "attribute");
    std::string out;
    bool first = true;
    for (const Value& e : iterate(v)) {
      if (!first && sep) out += to_str(*sep);
      first = false;
      out += to_str(attr ? get_attr(e, to_str(*attr)) : e);
    }
    return Value(Json(out));
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    const bool by_attr = name.ends_with("attr");
    const bool keep_if = name == "selectattr" || name == "select";
    size_t k = 0;
    std::string attr;
    if (by_attr) {
      if (a.empty()) type_error(where + " needs an attribute name");
      attr = str_of(a[k++], where);
    }
    std::string test;
    if (k < a.size()) test = str_of(a[k++], where);
    const Args test_args(a.begin() + static_cast<std::ptrdiff_t>(k), a.end());
    Json out = Json::array();
    for (const Value& e : iterate(v)) {
      const Value x = by_attr ? get_attr(e, attr) : e;
      const bool pass = test.empty() ? truthy(x) : apply_test(test, x, test_args);
      if (pass == keep_if) out.push_back(e.data);
    }
    return Value(out);
  }
  if (name == "map") {
    Json out = Json::array();
    if (const Value* attr = kwarg(kw, "attribute")) {
      const Value* def = kwarg(kw, "default");
      for (const Value& e : iterate(v)) {
        Value x = get_attr(e, to_str(*attr));
        if (x.is_undefined() && def) x = *def;
        if (!x.is_data()) type_error(where + ": item has no attribute '" + to_str(*attr) + "'");
        out.push_back(x.data);
      }
      return Value(out);
    }
    if (a.empty()) type_error(where + " needs a filter name or attribute=");
    const std::string f = str_of(a[0], where);
    const Args rest(a.begin() + 1, a.end());
    for (const Value& e : iterate(v)) {
      const Value x = apply_filter(f, e, rest, {});
      out.push_back(x.data);
    }
    return Value(out);
  }
  if (name == "unique") {
    Json out = Json::array();
    std::vector<Value> seen;
    for (const Value& e : iterate(v)) {
      bool dup = false;
      for (const Value& s : seen) dup = dup || equals(s, e);
      if (!dup) {
        seen.push_back(e);
        out.push_back(e.data);
      }
    }
    return Value(out);
  }
  if (name == "sort" || name == "dictsort") {
    check_kwargs(kw, {"reverse", "attribute", "case_sensitive", "by"}, where);
    if (const Value* cs = kwarg(kw, "case_sensitive"); cs && !truthy(*cs)) unsupported(where + " with case_sensitive=false");
    const Value* rev = arg(a, 0, kw, "reverse");
    std::vector<Value> items;
    if (name == "dictsort") {
      if (!v.is_dict()) type_error(where + " needs a dict");
      for (auto it = v.data.begin(); it != v.data.end(); ++it) items.emplace_back(Json::array({it.key(), it.value()}));
    } else {
      items = iterate(v);
    }
    const Value* attr = kwarg(kw, "attribute");
    auto key = [&](const Value& e) {
      if (name == "dictsort") return get_item(e, Value(Json(0)));
      return attr ? get_attr(e, to_str(*attr)) : e;
    };
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) { return less(key(x), key(y)); });
    if (rev && truthy(*rev)) std::reverse(items.begin(), items.end());
    Json out = Json::array();
    for (const Value& e : items) out.push_back(e.data);
    return Value(out);
  }
  if (name == "int") {
    if (v.is_int()) return v;
    if (v.is_data() && v.data.is_number_float()) return Value(Json(static_cast<int64_t>(v.data.get<double>())));
    if (v.is_data() && v.data.is_boolean()) return Value(Json(v.data.get<bool>() ? 1 : 0));
    if (v.is_string()) {
      try {
        size_t used = 0;
        const std::string s = py_strip(v.data.get<std::string>(), nullptr, true, true);
        const int64_t i = std::stoll(s, &used);
        if (used == s.size()) return Value(Json(i));
      } catch (const std::exception&) {
      }
    }
    return a.empty() ? Value(Json(0)) : a[0];
  }
  if (name == "float") {
    if (v.is_data() && (v.data.is_number() || v.data.is_boolean())) return Value(Json(v.data.is_boolean() ? (v.data.get<bool>() ? 1.0 : 0.0) : v.data.get<double>()));
    if (v.is_string()) {
      try {
        size_t used = 0;
        const std::string s = py_strip(v.data.get<std::string>(), nullptr, true, true);
        const double d = std::stod(s, &used);
        if (used == s.size()) return Value(Json(d));
      } catch (const std::exception&) {
      }
    }
    return a.empty() ? Value(Json(0.0)) : a[0];
  }
  if (name == "abs") {
    if (v.is_int()) return Value(Json(std::llabs(v.data.get<int64_t>())));
    if (v.is_number()) return Value(Json(std::fabs(v.data.get<double>())));
    type_error(where + " needs a number");
  }
  unsupported(where);
}

bool is_global_function(const std::string& name) {
  static const std::set<std::string> names = {"namespace", "raise_exception", "range", "dict", "strftime_now"};
  return names.count(name) > 0;
}

Value call_global(const std::string& name, const Args& a, const Kwargs& kw) {
  if (name == "raise_exception") {
    throw Error(ErrorKind::kInvalidRequest, "chat template: " + (a.empty() ? std::string("raise_exception()") : to_str(a[0])));
  }
  if (name == "namespace") {
    Value v;
    v.kind = Value::Kind::kNamespace;
    v.ns = std::make_shared<Namespace>();
    for (const Value& init : a) {
      if (!init.is_dict()) type_error("namespace() takes a dict or keyword arguments");
      for (auto it = init.data.begin(); it != init.data.end(); ++it) v.ns->attrs[it.key()] = Value(it.value());
    }
    for (const auto& [k, x] : kw) v.ns->attrs[k] = x;
    return v;
  }
  if (name == "dict") {
    Json out = Json::object();
    for (const auto& [k, x] : kw) {
      if (!x.is_data()) type_error("dict() of " + type_name(x));
      out[k] = x.data;
    }
    return Value(out);
  }
  if (name == "range") {
    if (a.empty() || a.size() > 3) type_error("range() takes 1 to 3 integers");
    int64_t start = 0, stop, step = 1;
    if (a.size() == 1) stop = int_of(a[0], "range");
    else {
      start = int_of(a[0], "range");
      stop = int_of(a[1], "range");
      if (a.size() == 3) step = int_of(a[2], "range");
    }
    if (step == 0) type_error("range() step must not be zero");
    Json out = Json::array();
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      out.push_back(i);
      if (out.size() > 1'000'000) type_error("range() too large");
    }
    return Value(out);
  }
  if (name == "strftime_now") {
    if (a.size() != 1) type_error("strftime_now() takes a format");
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof buf, str_of(a[0], "strftime_now").c_str(), &tm);
    return Value(Json(std::string(buf, n)));
  }
  unsupported("function '" + name + "()'");
}

}  // namespace stave::jinja
