#include "ops/elementwise.h"

#include <cmath>

#include "ops/reference.h"

namespace stave::ref {

// fp32 as torch: act_fn(gate) * up, and attn_output * sigmoid(gate).
void silu_mul(const float* gate, const float* up, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = silu(gate[i]) * up[i];
}

void sigmoid_mul(float* x, const float* gate, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * sigmoid(gate[i]);
}

}  // namespace stave::ref
