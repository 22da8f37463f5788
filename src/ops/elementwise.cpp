#include "ops/elementwise.h"

#include <cmath>

#include "ops/reference.h"
#include "ops/torch_cpu_order.h"

namespace stave::ref {

// fp32 as torch: act_fn(gate) * up, and attn_output * sigmoid(gate).
// The n elements are the whole contiguous tensor torch applies the activation to (the exact
// path runs a sequence in one step), which decides where ATen's vector code applies.
void silu_mul(const float* gate, const float* up, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = torch_order::silu(gate[i], torch_order::aten_vectorized(i, n, n)) * up[i];
}

void sigmoid_mul(float* x, const float* gate, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * torch_order::sigmoid(gate[i], torch_order::aten_vectorized(i, n, n));
}

}  // namespace stave::ref
