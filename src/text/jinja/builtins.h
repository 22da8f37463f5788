// Jinja's filters, tests, global functions and the Python str/dict methods that chat templates
// call, over jinja::Value. Each throws stave::Error(kUnsupported) for a name it does not know
// and kInvalidRequest for arguments of the wrong type, naming the filter/test/method.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace stave::jinja {

using Args = std::vector<Value>;
using Kwargs = std::vector<std::pair<std::string, Value>>;

// `apply_filter_by_name` is how map('name') and selectattr(…, 'test') reach the tables.
Value apply_filter(const std::string& name, const Value& v, const Args& args, const Kwargs& kwargs);
bool apply_test(const std::string& name, const Value& v, const Args& args);
// A method of a str / dict / list value (obj.name(args)).
Value call_method(const Value& obj, const std::string& name, const Args& args, const Kwargs& kwargs);
// A global function other than macros: namespace, raise_exception, range, dict, strftime_now.
bool is_global_function(const std::string& name);
Value call_global(const std::string& name, const Args& args, const Kwargs& kwargs);

// Iteration as a for loop sees it: list items, dict keys, str characters; undefined is empty.
std::vector<Value> iterate(const Value& v);
// Python item access (negative indices, missing → undefined).
Value get_item(const Value& obj, const Value& key);
// Jinja attribute access: dict keys, namespace attributes; missing → undefined.
Value get_attr(const Value& obj, const std::string& name);

}  // namespace stave::jinja
