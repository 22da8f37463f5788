// Rotary position embedding of the Qwen3.5 text model (transformers' Qwen3.5): partial rotary on
// the leading `rotary_dim` dims of each head, rotate_half pairing (i, i + rotary_dim/2), and
// interleaved M-RoPE: frequency i takes its position from axis T, H or W by `i mod 3`.
#pragma once
#include <array>
#include <cstdint>

namespace stave {

struct RopeSpec {
  int64_t rotary_dim = 0;                    // even; rotary_dim/2 frequencies
  double theta = 1e7;
  std::array<int64_t, 3> mrope_section{};    // frequencies read from T, H, W
  int64_t half() const { return rotary_dim / 2; }
  // Axis (0 T, 1 H, 2 W) of frequency i: H if i%3==1 and i < 3·s_H, W if i%3==2 and i < 3·s_W, else T.
  int axis_of(int64_t i) const;
};

namespace ref {

// cos/sin [tokens, half]: for token t and frequency i, φ = pos_axis(i)[t] · inv_freq_i with
// inv_freq_i = 1 / θ^(2i/rotary_dim), all in fp32 as HF computes them.
// pos_t, pos_h, pos_w: [tokens] each (the three rows of M-RoPE position ids).
void mrope_cos_sin(const RopeSpec& spec, const int32_t* pos_t, const int32_t* pos_h, const int32_t* pos_w,
                   int64_t tokens, float* cos, float* sin);

// x: [tokens, heads, head_dim], rotated in place on dims [0, rotary_dim):
//   x'[i]      = x[i]·cos_i − x[i+half]·sin_i
//   x'[i+half] = x[i+half]·cos_i + x[i]·sin_i          (i < half; token t's cos/sin row)
void apply_rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim, const float* cos,
                const float* sin);

}  // namespace ref
}  // namespace stave
