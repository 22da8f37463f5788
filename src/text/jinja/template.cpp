#include "text/jinja/template.h"

#include <cmath>
#include <unordered_map>

#include "stave/errors.h"
#include "text/jinja/ast.h"
#include "text/jinja/builtins.h"
#include "text/jinja/parser.h"

namespace stave::jinja {

struct Template::Parsed {
  Body body;
};

namespace {

[[noreturn]] void runtime_error(int line, const std::string& what) {
  throw Error(ErrorKind::kInvalidRequest, "chat template line " + std::to_string(line) + ": " + what);
}

constexpr int kMaxDepth = 64;  // macro recursion

// Python arithmetic on JSON numbers (bool counts as int).
bool is_intlike(const Value& v) { return v.is_data() && (v.data.is_number_integer() || v.data.is_boolean()); }
int64_t as_int(const Value& v) {
  return v.data.is_boolean() ? (v.data.get<bool>() ? 1 : 0) : v.data.get<int64_t>();
}
bool is_numlike(const Value& v) { return v.is_data() && (v.data.is_number() || v.data.is_boolean()); }
double as_double(const Value& v) { return v.data.is_boolean() ? (v.data.get<bool>() ? 1.0 : 0.0) : v.data.get<double>(); }

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

class Renderer {
 public:
  explicit Renderer(const Json& context) {
    frames_.emplace_back();
    if (!context.is_object()) throw Error(ErrorKind::kInternal, "chat template context must be a JSON object");
    for (auto it = context.begin(); it != context.end(); ++it) frames_[0][it.key()] = Value(it.value());
  }

  std::string run(const Body& body) {
    std::string out;
    if (exec(body, out) != Flow::kNormal) runtime_error(0, "break/continue outside a loop");
    return out;
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Frame = std::unordered_map<std::string, Value>;

  Flow exec(const Body& body, std::string& out) {
    for (const auto& s : body) {
      const Flow f = exec_one(*s, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow exec_one(const Stmt& s, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::kText: out += s.text; return Flow::kNormal;
      case Stmt::Kind::kOutput: out += to_str(eval(*s.expr)); return Flow::kNormal;
      case Stmt::Kind::kIf:
        for (const auto& [cond, body] : s.branches)
          if (truthy(eval(*cond))) return exec(body, out);
        return exec(s.else_body, out);
      case Stmt::Kind::kFor: exec_for(s, out); return Flow::kNormal;
      case Stmt::Kind::kSet: exec_set(s, eval(*s.expr)); return Flow::kNormal;
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        if (exec(s.body, captured) != Flow::kNormal) runtime_error(s.line, "break/continue inside {% set %} block");
        frames_.back()[s.name] = Value(Json(captured));
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro: {
        Value m;
        m.kind = Value::Kind::kMacro;
        m.macro = &s;
        frames_.back()[s.name] = m;
        return Flow::kNormal;
      }
      case Stmt::Kind::kBreak:
        if (loops_ == 0) runtime_error(s.line, "{% break %} outside a loop");
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        if (loops_ == 0) runtime_error(s.line, "{% continue %} outside a loop");
        return Flow::kContinue;
      case Stmt::Kind::kScope: return exec(s.body, out);
    }
    return Flow::kNormal;
  }

  void exec_set(const Stmt& s, Value v) {
    if (!s.attr.empty()) {
      Value target = lookup(s.name);
      if (target.kind != Value::Kind::kNamespace)
        runtime_error(s.line, "cannot assign attribute '" + s.attr + "' on " + type_name(target) +
                                  " (only namespace() objects take {% set x.attr = … %})");
      target.ns->attrs[s.attr] = std::move(v);
      return;
    }
    if (s.targets.size() == 1) {
      frames_.back()[s.targets[0]] = std::move(v);
      return;
    }
    const std::vector<Value> items = iterate(v);
    if (items.size() != s.targets.size())
      runtime_error(s.line, "cannot unpack " + std::to_string(items.size()) + " values into " +
                                std::to_string(s.targets.size()) + " names");
    for (size_t i = 0; i < items.size(); ++i) frames_.back()[s.targets[i]] = items[i];
  }

  void bind_targets(const Stmt& s, Frame& f, const Value& item) {
    if (s.targets.size() == 1) {
      f[s.targets[0]] = item;
      return;
    }
    const std::vector<Value> parts = iterate(item);
    if (parts.size() != s.targets.size())
      runtime_error(s.line, "cannot unpack " + std::to_string(parts.size()) + " values into " +
                                std::to_string(s.targets.size()) + " loop variables");
    for (size_t i = 0; i < parts.size(); ++i) f[s.targets[i]] = parts[i];
  }

  void exec_for(const Stmt& s, std::string& out) {
    const Value seq = eval(*s.expr);
    if (seq.is_none()) runtime_error(s.line, "'NoneType' object is not iterable");
    if (!seq.is_undefined() && !seq.is_data()) runtime_error(s.line, type_name(seq) + " is not iterable");
    std::vector<Value> items = iterate(seq);
    if (s.filter) {  // the loop filter runs first: loop.* counts the kept items
      std::vector<Value> kept;
      for (const Value& item : items) {
        frames_.emplace_back();
        bind_targets(s, frames_.back(), item);
        const bool keep = truthy(eval(*s.filter));
        frames_.pop_back();
        if (keep) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      exec(s.else_body, out);
      return;
    }
    const auto n = static_cast<int64_t>(items.size());
    ++loops_;
    for (int64_t i = 0; i < n; ++i) {
      frames_.emplace_back();  // fresh per iteration: assignments do not outlive it (Jinja scoping)
      Json loop = {{"index", i + 1},      {"index0", i},         {"revindex", n - i}, {"revindex0", n - i - 1},
                   {"first", i == 0},     {"last", i == n - 1},  {"length", n},       {"depth", 1},
                   {"depth0", 0}};
      if (i > 0 && items[i - 1].is_data()) loop["previtem"] = items[i - 1].data;
      if (i + 1 < n && items[i + 1].is_data()) loop["nextitem"] = items[i + 1].data;
      frames_.back()["loop"] = Value(std::move(loop));
      bind_targets(s, frames_.back(), items[i]);
      const Flow f = exec(s.body, out);
      frames_.pop_back();
      if (f == Flow::kBreak) break;
    }
    --loops_;
  }

  Value lookup(const std::string& name) const {
    for (size_t i = frames_.size(); i-- > barrier_;) {
      const auto it = frames_[i].find(name);
      if (it != frames_[i].end()) return it->second;
    }
    const auto it = frames_[0].find(name);
    if (it != frames_[0].end()) return it->second;
    return Value::undefined(name);
  }

  std::vector<Value> eval_args(const Expr& e, size_t from) {
    std::vector<Value> out;
    for (size_t i = from; i < e.args.size(); ++i) out.push_back(eval(*e.args[i]));
    return out;
  }
  Kwargs eval_kwargs(const Expr& e) {
    Kwargs out;
    for (const auto& [k, v] : e.kwargs) out.emplace_back(k, eval(*v));
    return out;
  }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return Value(e.literal);
      case Expr::Kind::kName: return lookup(e.name);
      case Expr::Kind::kAttr: {
        const Value obj = eval(*e.args[0]);
        if (obj.is_undefined()) runtime_error(e.line, "'" + obj.name + "' is undefined (reading ." + e.name + ")");
        return get_attr(obj, e.name);
      }
      case Expr::Kind::kItem: {
        const Value obj = eval(*e.args[0]);
        if (obj.is_undefined()) runtime_error(e.line, "'" + obj.name + "' is undefined (reading an item)");
        return get_item(obj, eval(*e.args[1]));
      }
      case Expr::Kind::kSlice: return slice(e);
      case Expr::Kind::kCall: return call(e);
      case Expr::Kind::kFilter: return apply_filter(e.name, eval(*e.args[0]), eval_args(e, 1), eval_kwargs(e));
      case Expr::Kind::kTest: {
        const Value v = eval(*e.args[0]);
        return Value(Json(apply_test(e.name, v, eval_args(e, 1)) != e.negated));
      }
      case Expr::Kind::kUnary: {
        const Value v = eval(*e.args[0]);
        if (e.name == "not") return Value(Json(!truthy(v)));
        if (is_intlike(v)) return Value(Json(e.name == "-" ? -as_int(v) : as_int(v)));
        if (is_numlike(v)) return Value(Json(e.name == "-" ? -as_double(v) : as_double(v)));
        runtime_error(e.line, "bad operand type for unary " + e.name + ": " + type_name(v));
      }
      case Expr::Kind::kBinary: return binary(e);
      case Expr::Kind::kCompare: {
        Value left = eval(*e.args[0]);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.args[i + 1]);
          const std::string& op = e.ops[i];
          bool r;
          if (op == "==") r = equals(left, right);
          else if (op == "!=") r = !equals(left, right);
          else if (op == "<") r = less(left, right);
          else if (op == ">") r = less(right, left);
          else if (op == "<=") r = !less(right, left);
          else r = !less(left, right);
          if (!r) return Value(Json(false));
          left = std::move(right);
        }
        return Value(Json(true));
      }
      case Expr::Kind::kCond:
        if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : Value::undefined("conditional without else");
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        Json out = Json::array();
        for (const auto& a : e.args) {
          const Value v = eval(*a);
          if (!v.is_data()) runtime_error(e.line, "a list cannot hold " + type_name(v));
          out.push_back(v.data);
        }
        return Value(out);
      }
      case Expr::Kind::kDict: {
        Json out = Json::object();
        for (size_t i = 0; i < e.args.size(); ++i) {
          const Value k = eval(*e.args[i]);
          const Value v = eval(*e.kwargs[i].second);
          if (!k.is_string()) runtime_error(e.line, "dict keys must be strings here, got " + type_name(k));
          if (!v.is_data()) runtime_error(e.line, "a dict cannot hold " + type_name(v));
          out[k.data.get<std::string>()] = v.data;
        }
        return Value(out);
      }
    }
    runtime_error(e.line, "unknown expression");
  }

  Value slice(const Expr& e) {
    const Value obj = eval(*e.args[0]);
    if (obj.is_undefined()) runtime_error(e.line, "'" + obj.name + "' is undefined (slicing)");
    auto part = [&](int k, bool& given) -> int64_t {
      given = false;
      if (!e.args[k]) return 0;
      const Value v = eval(*e.args[k]);
      if (v.is_none()) return 0;
      if (!is_intlike(v)) runtime_error(e.line, "slice indices must be integers, got " + type_name(v));
      given = true;
      return as_int(v);
    };
    bool has_start, has_stop, has_step;
    const int64_t start0 = part(1, has_start), stop0 = part(2, has_stop);
    int64_t step = part(3, has_step);
    if (!has_step) step = 1;
    if (step == 0) runtime_error(e.line, "slice step cannot be zero");
    std::vector<int64_t> idx;
    auto pick = [&](int64_t n) {
      // Python's slice.indices
      auto clamp = [&](int64_t v, bool given, bool is_start) -> int64_t {
        if (!given) return step > 0 ? (is_start ? 0 : n) : (is_start ? n - 1 : -1);
        if (v < 0) v += n;
        if (step > 0) return std::clamp<int64_t>(v, 0, n);
        return std::clamp<int64_t>(v, -1, n - 1);
      };
      const int64_t a = clamp(start0, has_start, true), b = clamp(stop0, has_stop, false);
      for (int64_t i = a; step > 0 ? i < b : i > b; i += step) idx.push_back(i);
    };
    if (obj.is_list()) {
      pick(static_cast<int64_t>(obj.data.size()));
      Json out = Json::array();
      for (int64_t i : idx) out.push_back(obj.data[static_cast<size_t>(i)]);
      return Value(out);
    }
    if (obj.is_string()) {
      const std::u32string u = to_u32(obj.data.get_ref<const std::string&>());
      pick(static_cast<int64_t>(u.size()));
      std::u32string out;
      for (int64_t i : idx) out += u[static_cast<size_t>(i)];
      return Value(Json(to_utf8(out)));
    }
    runtime_error(e.line, type_name(obj) + " cannot be sliced");
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value a = eval(*e.args[0]);
      return truthy(a) ? eval(*e.args[1]) : a;
    }
    if (op == "or") {
      Value a = eval(*e.args[0]);
      return truthy(a) ? a : eval(*e.args[1]);
    }
    const Value a = eval(*e.args[0]);
    const Value b = eval(*e.args[1]);
    if (op == "~") return Value(Json(to_str(a) + to_str(b)));
    if (op == "in" || op == "not in") {
      bool found = false;
      if (b.is_string()) {
        if (!a.is_string()) runtime_error(e.line, "'in <string>' requires a string on the left, got " + type_name(a));
        found = b.data.get_ref<const std::string&>().find(a.data.get_ref<const std::string&>()) != std::string::npos;
      } else if (b.is_dict()) {
        found = a.is_string() && b.data.contains(a.data.get<std::string>());
      } else if (b.is_list()) {
        for (const Json& x : b.data) found = found || equals(a, Value(x));
      } else if (!b.is_undefined()) {
        runtime_error(e.line, "argument of type " + type_name(b) + " is not iterable");
      }
      return Value(Json(found != (op == "not in")));
    }
    if (a.is_undefined() || b.is_undefined())
      runtime_error(e.line, "'" + (a.is_undefined() ? a.name : b.name) + "' is undefined (operator " + op + ")");
    if (op == "+") {
      if (a.is_string() && b.is_string()) return Value(Json(a.data.get<std::string>() + b.data.get<std::string>()));
      if (a.is_list() && b.is_list()) {
        Json out = a.data;
        for (const Json& x : b.data) out.push_back(x);
        return Value(out);
      }
    }
    if (op == "%" && a.is_string())
      throw Error(ErrorKind::kUnsupported, "chat template line " + std::to_string(e.line) +
                                               ": unsupported Jinja construct 'str % value' (printf-style formatting)");
    if (op == "*" && (a.is_string() || a.is_list()) && is_intlike(b)) return repeat(a, as_int(b));
    if (op == "*" && (b.is_string() || b.is_list()) && is_intlike(a)) return repeat(b, as_int(a));
    if (!is_numlike(a) || !is_numlike(b))
      runtime_error(e.line, "unsupported operand types for " + op + ": " + type_name(a) + " and " + type_name(b));
    const bool ints = is_intlike(a) && is_intlike(b);
    if (op == "/") {
      if (as_double(b) == 0.0) runtime_error(e.line, "division by zero");
      return Value(Json(as_double(a) / as_double(b)));
    }
    if (ints) {
      const int64_t x = as_int(a), y = as_int(b);
      if (op == "+") return Value(Json(x + y));
      if (op == "-") return Value(Json(x - y));
      if (op == "*") return Value(Json(x * y));
      if (op == "//" || op == "%") {
        if (y == 0) runtime_error(e.line, "integer division or modulo by zero");
        const int64_t q = floor_div(x, y);
        return Value(Json(op == "//" ? q : x - q * y));
      }
      if (op == "**" && y >= 0) {
        int64_t r = 1;
        for (int64_t i = 0; i < y; ++i) r *= x;
        return Value(Json(r));
      }
    }
    const double x = as_double(a), y = as_double(b);
    if (op == "+") return Value(Json(x + y));
    if (op == "-") return Value(Json(x - y));
    if (op == "*") return Value(Json(x * y));
    if (op == "**") return Value(Json(std::pow(x, y)));
    if (y == 0.0) runtime_error(e.line, "float division or modulo by zero");
    const double q = std::floor(x / y);
    return Value(Json(op == "//" ? q : x - q * y));
  }

  static Value repeat(const Value& v, int64_t n) {
    if (v.is_string()) {
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += v.data.get_ref<const std::string&>();
      return Value(Json(out));
    }
    Json out = Json::array();
    for (int64_t i = 0; i < n; ++i)
      for (const Json& x : v.data) out.push_back(x);
    return Value(out);
  }

  Value call(const Expr& e) {
    const Expr& callee = *e.args[0];
    if (callee.kind == Expr::Kind::kAttr) {
      const Value obj = eval(*callee.args[0]);
      if (obj.kind == Value::Kind::kNamespace) runtime_error(e.line, "namespace attributes are not callable");
      return call_method(obj, callee.name, eval_args(e, 1), eval_kwargs(e));
    }
    if (callee.kind != Expr::Kind::kName) runtime_error(e.line, "this expression is not callable");
    const Value f = lookup(callee.name);
    if (f.kind == Value::Kind::kMacro) return call_macro(*f.macro, e);
    if (f.is_undefined() && is_global_function(callee.name))
      return call_global(callee.name, eval_args(e, 1), eval_kwargs(e));
    if (f.is_undefined()) {
      if (callee.name == "caller" || callee.name == "cycler" || callee.name == "joiner" || callee.name == "lipsum")
        throw Error(ErrorKind::kUnsupported, "chat template line " + std::to_string(e.line) +
                                                 ": unsupported Jinja construct '" + callee.name + "()'");
      runtime_error(e.line, "'" + callee.name + "' is undefined (called as a function)");
    }
    runtime_error(e.line, "'" + callee.name + "' (" + type_name(f) + ") is not callable");
  }

  Value call_macro(const Stmt& m, const Expr& e) {
    if (depth_ >= kMaxDepth) runtime_error(e.line, "macro recursion deeper than " + std::to_string(kMaxDepth));
    const std::vector<Value> args = eval_args(e, 1);
    const Kwargs kwargs = eval_kwargs(e);
    if (args.size() > m.params.size())
      runtime_error(e.line, "macro '" + m.name + "' takes " + std::to_string(m.params.size()) + " arguments, got " +
                                std::to_string(args.size()));
    Frame frame;
    for (const auto& [k, v] : kwargs) {
      bool known = false;
      for (size_t i = 0; i < m.params.size(); ++i)
        if (m.params[i].first == k) {
          if (i < args.size()) runtime_error(e.line, "macro '" + m.name + "' got '" + k + "' twice");
          known = true;
        }
      if (!known) runtime_error(e.line, "macro '" + m.name + "' has no argument '" + k + "'");
      frame[k] = v;
    }
    for (size_t i = 0; i < args.size(); ++i) frame[m.params[i].first] = args[i];
    // The macro sees the template's top level and its own arguments, not the caller's locals.
    const size_t saved_barrier = barrier_;
    const int saved_loops = loops_;
    frames_.push_back(std::move(frame));
    barrier_ = frames_.size() - 1;
    loops_ = 0;
    ++depth_;
    for (const auto& [name, def] : m.params)
      if (!frames_.back().count(name))
        frames_.back()[name] = def ? eval(*def) : Value::undefined(name);
    std::string out;
    const Flow f = exec(m.body, out);
    --depth_;
    frames_.pop_back();
    barrier_ = saved_barrier;
    loops_ = saved_loops;
    if (f != Flow::kNormal) runtime_error(m.line, "break/continue outside a loop in macro '" + m.name + "'");
    return Value(Json(out));
  }

  std::vector<Frame> frames_;
  size_t barrier_ = 1;  // frames below it (except frame 0) are invisible: a macro's caller
  int loops_ = 0;
  int depth_ = 0;
};

}  // namespace

Template::Template(std::string_view source) : parsed_(std::make_unique<Parsed>()) {
  parsed_->body = parse_template(source);
}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const Json& context) const { return Renderer(context).run(parsed_->body); }

}  // namespace stave::jinja
