// A half-open range [start, end) of token indices: the spans of questions and options that the
// encoder (src/decide) produces and the joint head (src/model) reads.
#pragma once
#include <cstdint>
#include <utility>

namespace stave {

using Span = std::pair<int64_t, int64_t>;

}  // namespace stave
