#include "ops/conv1d.h"

#include <cmath>

#include "ops/torch_cpu_order.h"
#include <vector>

namespace stave::ref {

void causal_conv1d_silu(const float* x, int64_t tokens, int64_t channels, const float* weight, int64_t kernel,
                        float* history, float* y) {
  const int64_t H = kernel - 1;  // history length
#pragma omp parallel for schedule(static) if (tokens * channels * kernel >= (int64_t{1} << 20))
  for (int64_t c = 0; c < channels; ++c) {
    const float* w = weight + c * kernel;
    // Input of (possibly historical) token s, s in [-H, tokens).
    auto in = [&](int64_t s) { return s < 0 ? history[(H + s) * channels + c] : x[s * channels + c]; };
    for (int64_t t = 0; t < tokens; ++t) {
      // F.conv1d (depthwise): one FMA chain over the taps from 0 (a zero-padded tap adds +0,
      // so a zero history equals torch's padding); then silu in fp32
      float acc = 0.0f;
      for (int64_t j = 0; j < kernel; ++j) acc = std::fma(w[j], in(t - H + j), acc);
      // silu over the [channels, tokens] conv output: rows of `tokens` per channel
      y[t * channels + c] = torch_order::silu(acc, torch_order::aten_vectorized(c * tokens + t, tokens, channels * tokens));
    }
    // New history: inputs of tokens tokens-H .. tokens-1 (read before overwriting: when
    // tokens < H the oldest entries come from the old history, which shifts left).
    float last[64];
    std::vector<float> big;
    float* keep = last;
    if (H > 64) {
      big.resize(static_cast<size_t>(H));
      keep = big.data();
    }
    for (int64_t r = 0; r < H; ++r) keep[r] = in(tokens - H + r);
    for (int64_t r = 0; r < H; ++r) history[r * channels + c] = keep[r];
  }
}

}  // namespace stave::ref
