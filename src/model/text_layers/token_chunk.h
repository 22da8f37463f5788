// A run of consecutive tokens that a decoder layer processes in one step of the layer-major
// prefill. Layers carry their per-sequence state (conv history, delta-rule state, KV cache)
// from one chunk to the next, so a sequence may be cut anywhere.
#pragma once
#include <cstdint>

namespace stave {

struct TokenChunk {
  int64_t begin = 0;                // index of the first token in the sequence
  int64_t tokens = 0;
  const float* rope_cos = nullptr;  // [tokens, rotary_dim/2] rows for these tokens
  const float* rope_sin = nullptr;
};

}  // namespace stave
