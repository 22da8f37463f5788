// Parses a chat template into statements (text, output, if, for, set, macro, break,
// continue, generation). Anything else is stave::Error naming the construct and its line.
#pragma once
#include <string_view>

#include "text/jinja/ast.h"

namespace stave::jinja {

Body parse_template(std::string_view source);

}  // namespace stave::jinja
