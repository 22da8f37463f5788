#include "text/jinja/parser.h"

#include <set>

#include "stave/errors.h"
#include "text/jinja/lexer.h"

namespace stave::jinja {
namespace {

[[noreturn]] void fail(int line, const std::string& what, ErrorKind kind = ErrorKind::kInvalidModel) {
  throw Error(kind, "chat template line " + std::to_string(line) + ": " + what);
}

[[noreturn]] void unsupported(int line, const std::string& construct) {
  fail(line, "unsupported Jinja construct " + construct + " (stave renders the subset Hugging Face chat templates use)",
       ErrorKind::kUnsupported);
}

ExprPtr node(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

// Recursive descent over one tag's tokens, with Jinja's precedence.
class ExprParser {
 public:
  static constexpr int kMaxNesting = 128;
  static constexpr size_t kMaxTokens = 4096;  // per tag: bounds the depth of operator chains too
  ExprParser(std::vector<Token> tokens, int line) : t_(std::move(tokens)), line_(line) {
    if (t_.size() > kMaxTokens) fail(line_, "a tag of more than " + std::to_string(kMaxTokens) + " tokens");
  }

  const Token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool at_end() const { return peek().type == Token::Type::kEnd; }
  bool is_op(const char* op, size_t k = 0) const { return peek(k).type == Token::Type::kOp && peek(k).text == op; }
  bool is_name(const char* n, size_t k = 0) const { return peek(k).type == Token::Type::kName && peek(k).text == n; }
  Token next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool accept_name(const char* n) {
    if (!is_name(n)) return false;
    ++i_;
    return true;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(line_, std::string("expected '") + op + "', found " + describe(peek()));
  }
  std::string expect_name() {
    if (peek().type != Token::Type::kName) fail(line_, "expected a name, found " + describe(peek()));
    return next().text;
  }
  void expect_end() {
    if (!at_end()) fail(line_, "unexpected " + describe(peek()));
  }
  static std::string describe(const Token& t) {
    if (t.type == Token::Type::kEnd) return "end of tag";
    if (t.type == Token::Type::kString) return "string '" + t.text + "'";
    return "'" + t.text + "'";
  }

  ExprPtr expression(bool with_cond = true) {
    // Nesting is bounded so that a hostile template is an error, not a stack overflow.
    if (++depth_ > kMaxNesting) fail(line_, "expression nested deeper than " + std::to_string(kMaxNesting));
    ExprPtr e = expression_body(with_cond);
    --depth_;
    return e;
  }

  ExprPtr expression_body(bool with_cond) {
    ExprPtr e = parse_or();
    if (!with_cond) return e;
    while (is_name("if")) {
      ++i_;
      auto c = node(Expr::Kind::kCond, line_);
      c->args.push_back(std::move(e));
      c->args.push_back(parse_or());
      c->args.push_back(accept_name("else") ? expression() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  // A comma-separated list without brackets becomes a tuple (for `set a = 1, 2` and `for`).
  ExprPtr tuple_or_expression() {
    ExprPtr first = expression();
    if (!is_op(",")) return first;
    auto t = node(Expr::Kind::kTuple, line_);
    t->args.push_back(std::move(first));
    while (accept_op(",")) {
      if (at_end()) break;
      t->args.push_back(expression());
    }
    return t;
  }

 private:
  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b) {
    auto e = node(Expr::Kind::kBinary, line_);
    e->name = op;
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }
  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (accept_name("or")) e = binary("or", std::move(e), parse_and());
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (accept_name("and")) e = binary("and", std::move(e), parse_not());
    return e;
  }
  ExprPtr parse_not() {
    if (depth_ > kMaxNesting) fail(line_, "expression nested deeper than " + std::to_string(kMaxNesting));
    if (accept_name("not")) {
      ++depth_;
      auto e = node(Expr::Kind::kUnary, line_);
      e->name = "not";
      e->args.push_back(parse_not());
      --depth_;
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr e = parse_math1();
    bool chain = false;  // e is a comparison chain built here (a < b < c)
    for (;;) {
      if (is_name("in")) {
        ++i_;
        e = binary("in", std::move(e), parse_math1());
        chain = false;
      } else if (is_name("not") && is_name("in", 1)) {
        i_ += 2;
        e = binary("not in", std::move(e), parse_math1());
        chain = false;
      } else if (peek().type == Token::Type::kOp && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                                     peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
        const std::string op = next().text;
        if (!chain) {
          auto c = node(Expr::Kind::kCompare, line_);
          c->args.push_back(std::move(e));
          e = std::move(c);
          chain = true;
        }
        e->ops.push_back(op);
        e->args.push_back(parse_math1());
      } else {
        return e;
      }
    }
  }
  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = next().text;
      e = binary(op, std::move(e), parse_concat());
    }
    return e;
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (accept_op("~")) e = binary("~", std::move(e), parse_math2());
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = next().text;
      e = binary(op, std::move(e), parse_pow());
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary();
    while (accept_op("**")) e = binary("**", std::move(e), parse_unary());
    return e;
  }
  ExprPtr parse_unary(bool with_filter = true) {
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      if (++depth_ > kMaxNesting) fail(line_, "expression nested deeper than " + std::to_string(kMaxNesting));
      e = node(Expr::Kind::kUnary, line_);
      e->name = next().text;
      e->args.push_back(parse_unary(false));
      --depth_;
    } else {
      e = postfix(primary());
    }
    if (with_filter) return filters(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token t = next();
    switch (t.type) {
      case Token::Type::kName: {
        if (t.text == "true" || t.text == "True") return literal(true);
        if (t.text == "false" || t.text == "False") return literal(false);
        if (t.text == "none" || t.text == "None") return literal(nullptr);
        auto e = node(Expr::Kind::kName, line_);
        e->name = t.text;
        return e;
      }
      case Token::Type::kString: {
        std::string s = t.text;
        while (peek().type == Token::Type::kString) s += next().text;  // adjacent literals concatenate
        return literal(s);
      }
      case Token::Type::kInt: return literal(t.int_value);
      case Token::Type::kFloat: return literal(t.float_value);
      case Token::Type::kOp:
        if (t.text == "(") {
          if (accept_op(")")) return node(Expr::Kind::kTuple, line_);
          ExprPtr e = expression();
          if (is_op(",")) {
            auto tup = node(Expr::Kind::kTuple, line_);
            tup->args.push_back(std::move(e));
            while (accept_op(",")) {
              if (is_op(")")) break;
              tup->args.push_back(expression());
            }
            e = std::move(tup);
          }
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          auto e = node(Expr::Kind::kList, line_);
          while (!accept_op("]")) {
            if (!e->args.empty()) expect_op(",");
            if (accept_op("]")) break;
            e->args.push_back(expression());
          }
          return e;
        }
        if (t.text == "{") {
          auto e = node(Expr::Kind::kDict, line_);
          bool first = true;
          while (!accept_op("}")) {
            if (!first) expect_op(",");
            first = false;
            if (accept_op("}")) break;
            e->args.push_back(expression());
            expect_op(":");
            e->kwargs.emplace_back("", expression());
          }
          return e;
        }
        break;
      default: break;
    }
    fail(line_, "unexpected " + describe(t));
  }

  ExprPtr literal(Json v) {
    auto e = node(Expr::Kind::kLiteral, line_);
    e->literal = std::move(v);
    return e;
  }

  // Arguments after e.args' leading operand (the callee, the filtered or tested value).
  void call_args(Expr& e) {
    const size_t base = e.args.size();
    while (!accept_op(")")) {
      if (e.args.size() > base || !e.kwargs.empty()) {
        expect_op(",");
        if (accept_op(")")) break;
      }
      if (is_op("*") || is_op("**")) unsupported(line_, "'*args' / '**kwargs' in a call");
      if (peek().type == Token::Type::kName && is_op("=", 1)) {
        std::string key = next().text;
        ++i_;
        e.kwargs.emplace_back(std::move(key), expression());
      } else {
        if (!e.kwargs.empty()) fail(line_, "positional argument after a keyword argument");
        e.args.push_back(expression());
      }
    }
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (accept_op(".")) {
        const Token t = next();
        if (t.type == Token::Type::kInt) {
          auto item = node(Expr::Kind::kItem, line_);
          item->args.push_back(std::move(e));
          item->args.push_back(literal(t.int_value));
          e = std::move(item);
          continue;
        }
        if (t.type != Token::Type::kName) fail(line_, "expected an attribute name after '.', found " + describe(t));
        auto a = node(Expr::Kind::kAttr, line_);
        a->name = t.text;
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (accept_op("[")) {
        e = subscript(std::move(e));
      } else if (accept_op("(")) {
        auto c = node(Expr::Kind::kCall, line_);
        c->args.push_back(std::move(e));
        call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr obj) {
    ExprPtr parts[3];
    int colons = 0;
    if (!is_op(":")) parts[0] = expression();
    while (accept_op(":")) {
      if (++colons > 2) fail(line_, "a slice has at most two ':'");
      if (!is_op(":") && !is_op("]")) parts[colons] = expression();
    }
    expect_op("]");
    if (colons == 0) {
      auto e = node(Expr::Kind::kItem, line_);
      e->args.push_back(std::move(obj));
      e->args.push_back(std::move(parts[0]));
      return e;
    }
    auto e = node(Expr::Kind::kSlice, line_);
    e->args.push_back(std::move(obj));
    for (auto& p : parts) e->args.push_back(std::move(p));
    return e;
  }

  ExprPtr filters(ExprPtr e) {
    for (;;) {
      if (accept_op("|")) {
        auto f = node(Expr::Kind::kFilter, line_);
        f->name = expect_name();
        while (accept_op(".")) {
          f->name += '.';
          f->name += expect_name();
        }
        f->args.push_back(std::move(e));
        if (accept_op("(")) call_args(*f);
        e = std::move(f);
      } else if (accept_name("is")) {
        auto t = node(Expr::Kind::kTest, line_);
        t->negated = accept_name("not");
        t->name = expect_name();
        t->args.push_back(std::move(e));
        if (accept_op("(")) {
          call_args(*t);
        } else if (starts_test_argument()) {
          t->args.push_back(postfix(primary()));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }
  bool starts_test_argument() const {
    const Token& t = peek();
    if (t.type == Token::Type::kString || t.type == Token::Type::kInt || t.type == Token::Type::kFloat) return true;
    if (t.type == Token::Type::kOp) return t.text == "[" || t.text == "{";
    if (t.type != Token::Type::kName) return false;
    static const std::set<std::string> stop = {"else", "or", "and", "if", "not", "in", "is"};
    return !stop.count(t.text);
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int line_;
  int depth_ = 0;
};

class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Piece> pieces) : p_(std::move(pieces)) {}

  Body parse_all() {
    std::string end;
    Body b = body({}, end);
    return b;
  }

 private:
  static std::string keyword_of(const Piece& p) {
    size_t i = 0;
    while (i < p.text.size() && (p.text[i] == ' ' || p.text[i] == '\t' || p.text[i] == '\n' || p.text[i] == '\r')) ++i;
    size_t j = i;
    while (j < p.text.size() && (std::isalnum(static_cast<unsigned char>(p.text[j])) || p.text[j] == '_')) ++j;
    return p.text.substr(i, j - i);
  }

  // Statements until one of `ends` (the keyword that ended it goes to `end`, its piece stays current).
  Body body(const std::set<std::string>& ends, std::string& end) {
    static constexpr int kMaxBlocks = 128;
    if (++depth_ > kMaxBlocks)
      fail(i_ < p_.size() ? p_[i_].line : 0, "blocks nested deeper than " + std::to_string(kMaxBlocks));
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    Body out;
    while (i_ < p_.size()) {
      const Piece& piece = p_[i_];
      if (piece.type == Piece::Type::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->text = piece.text;
        s->line = piece.line;
        out.push_back(std::move(s));
        ++i_;
        continue;
      }
      if (piece.type == Piece::Type::kOutput) {
        ExprParser ep(lex_expression(piece.text, piece.line), piece.line);
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = piece.line;
        s->expr = ep.expression();
        ep.expect_end();
        out.push_back(std::move(s));
        ++i_;
        continue;
      }
      const std::string kw = keyword_of(piece);
      if (ends.count(kw)) {
        end = kw;
        return out;
      }
      out.push_back(statement(kw, piece));
    }
    if (!ends.empty()) {
      std::string want;
      for (const auto& e : ends) want += (want.empty() ? "" : " / ") + e;
      fail(p_.empty() ? 1 : p_.back().line, "the template ends inside a block (expected {% " + want + " %})");
    }
    return out;
  }

  ExprParser tag_parser(const Piece& piece) {
    ExprParser ep(lex_expression(piece.text, piece.line), piece.line);
    ep.next();  // the keyword
    return ep;
  }

  std::unique_ptr<Stmt> statement(const std::string& kw, const Piece& piece) {
    const int line = piece.line;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (kw == "if") return if_statement(piece);
    if (kw == "for") return for_statement(piece);
    if (kw == "set") return set_statement(piece);
    if (kw == "macro") return macro_statement(piece);
    if (kw == "break" || kw == "continue") {
      tag_parser(piece).expect_end();
      s->kind = kw == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      ++i_;
      return s;
    }
    if (kw == "generation") {  // Hugging Face's AssistantTracker: renders its body as is
      tag_parser(piece).expect_end();
      ++i_;
      s->kind = Stmt::Kind::kScope;
      std::string end;
      s->body = body({"endgeneration"}, end);
      ++i_;
      return s;
    }
    if (kw.empty()) fail(line, "empty or malformed {% %} tag");
    static const std::set<std::string> known = {"elif", "else", "endif", "endfor", "endset", "endmacro", "endgeneration"};
    if (known.count(kw)) fail(line, "{% " + kw + " %} without its opening block");
    unsupported(line, "'{% " + kw + " %}'");
  }

  std::unique_ptr<Stmt> if_statement(const Piece& first) {
    auto s = std::make_unique<Stmt>();
    s->kind = Stmt::Kind::kIf;
    s->line = first.line;
    ExprParser ep = tag_parser(first);
    ExprPtr cond = ep.expression();
    ep.expect_end();
    ++i_;
    for (;;) {
      std::string end;
      Body b = body({"elif", "else", "endif"}, end);
      s->branches.emplace_back(std::move(cond), std::move(b));
      const Piece& p = p_[i_];
      if (end == "elif") {
        ExprParser e2 = tag_parser(p);
        cond = e2.expression();
        e2.expect_end();
        ++i_;
        continue;
      }
      if (end == "else") {
        tag_parser(p).expect_end();
        ++i_;
        s->else_body = body({"endif"}, end);
      }
      tag_parser(p_[i_]).expect_end();
      ++i_;
      return s;
    }
  }

  std::unique_ptr<Stmt> for_statement(const Piece& piece) {
    auto s = std::make_unique<Stmt>();
    s->kind = Stmt::Kind::kFor;
    s->line = piece.line;
    ExprParser ep = tag_parser(piece);
    const bool paren = ep.accept_op("(");
    do {
      s->targets.push_back(ep.expect_name());
    } while (ep.accept_op(","));
    if (paren) ep.expect_op(")");
    if (!ep.accept_name("in")) fail(piece.line, "expected 'in' in the for loop");
    s->expr = ep.expression(false);
    if (ep.accept_name("if")) s->filter = ep.expression(false);
    if (ep.is_name("recursive")) unsupported(piece.line, "'recursive' loops");
    ep.expect_end();
    ++i_;
    std::string end;
    s->body = body({"else", "endfor"}, end);
    if (end == "else") {
      tag_parser(p_[i_]).expect_end();
      ++i_;
      s->else_body = body({"endfor"}, end);
    }
    tag_parser(p_[i_]).expect_end();
    ++i_;
    return s;
  }

  std::unique_ptr<Stmt> set_statement(const Piece& piece) {
    auto s = std::make_unique<Stmt>();
    s->line = piece.line;
    ExprParser ep = tag_parser(piece);
    s->name = ep.expect_name();
    if (ep.accept_op(".")) {
      s->attr = ep.expect_name();
    } else {
      s->targets.push_back(s->name);
      while (ep.accept_op(",")) s->targets.push_back(ep.expect_name());
    }
    if (ep.accept_op("=")) {
      s->kind = Stmt::Kind::kSet;
      s->expr = ep.tuple_or_expression();
      ep.expect_end();
      ++i_;
      return s;
    }
    if (ep.accept_op("|")) unsupported(piece.line, "filters on a {% set %} block");
    ep.expect_end();
    if (!s->attr.empty() || s->targets.size() != 1) fail(piece.line, "a {% set %} block assigns one plain name");
    ++i_;
    s->kind = Stmt::Kind::kSetBlock;
    std::string end;
    s->body = body({"endset"}, end);
    tag_parser(p_[i_]).expect_end();
    ++i_;
    return s;
  }

  std::unique_ptr<Stmt> macro_statement(const Piece& piece) {
    auto s = std::make_unique<Stmt>();
    s->kind = Stmt::Kind::kMacro;
    s->line = piece.line;
    ExprParser ep = tag_parser(piece);
    s->name = ep.expect_name();
    ep.expect_op("(");
    while (!ep.accept_op(")")) {
      if (!s->params.empty()) ep.expect_op(",");
      if (ep.accept_op(")")) break;
      std::string name = ep.expect_name();
      ExprPtr def;
      if (ep.accept_op("=")) def = ep.expression();
      s->params.emplace_back(std::move(name), std::move(def));
    }
    ep.expect_end();
    ++i_;
    std::string end;
    s->body = body({"endmacro"}, end);
    tag_parser(p_[i_]).expect_end();
    ++i_;
    return s;
  }

  std::vector<Piece> p_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return TemplateParser(lex_template(source)).parse_all(); }

}  // namespace stave::jinja
