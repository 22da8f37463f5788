// Element-wise gates of the Qwen3.5 text model.
#pragma once
#include <cstdint>

namespace stave::ref {

// SwiGLU: y = silu(gate) ⊙ up   (the MLP between gate/up and down projections; y may alias either)
void silu_mul(const float* gate, const float* up, int64_t n, float* y);

// x ← x ⊙ sigmoid(gate)          (the full-attention output gate)
void sigmoid_mul(float* x, const float* gate, int64_t n);

}  // namespace stave::ref
