// The syntax tree of a parsed chat template: expressions and statements (the subset of Jinja
// that Hugging Face chat templates use; the parser refuses the rest by name).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace stave::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // literal
    kName,      // name
    kAttr,      // args[0].name
    kItem,      // args[0][args[1]]
    kSlice,     // args[0][args[1]:args[2]:args[3]] (null entries: omitted)
    kCall,      // args[0](args[1..], kwargs)
    kFilter,    // args[0] | name(args[1..], kwargs)
    kTest,      // args[0] is [not] name(args[1..])
    kUnary,     // name ("not", "-", "+") args[0]
    kBinary,    // args[0] name args[1]: + - * / // % ** ~ and or in "not in"
    kCompare,   // args[0] ops[0] args[1] ops[1] args[2] … (== != < > <= >=)
    kCond,      // args[0] if args[1] else args[2] (args[2] may be null)
    kList,      // [args…]
    kTuple,     // (args…)
    kDict,      // {kwargs as key/value pairs, keys in args}
  };
  Kind kind;
  int line = 0;
  Json literal;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue, kScope };
  Kind kind;
  int line = 0;
  std::string text;                                   // kText
  ExprPtr expr;                                       // kOutput, kSet value, kFor iterable
  std::vector<std::pair<ExprPtr, Body>> branches;     // kIf: (condition, body)…
  Body else_body;                                     // kIf, kFor
  std::vector<std::string> targets;                   // kFor loop variables, kSet names (tuple)
  ExprPtr filter;                                     // kFor … if filter
  Body body;                                          // kFor, kSetBlock, kMacro, kScope
  std::string name, attr;                             // kSet target name[.attr], kMacro name
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro (default may be null)
};

}  // namespace stave::jinja
