// Limits checked on JSON text from files before any parser builds a tree of it: a Hugging Face
// folder comes from strangers, and a document nested a million levels deep would overflow the
// stack of every recursive walk over it (rendering, validation) long before memory runs out.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace stave {

// Deeper than any configuration stave reads (config.json nests 4 levels, tokenizer.json 6).
inline constexpr size_t kMaxJsonDepth = 64;

// Throws stave::Error(kInvalidModel) "LABEL: JSON nesting deeper than N levels (at byte B)"
// when brackets outside strings nest deeper than `max_depth`. Does not validate the JSON.
void check_json_depth(std::string_view text, const std::string& label, size_t max_depth = kMaxJsonDepth);

}  // namespace stave
