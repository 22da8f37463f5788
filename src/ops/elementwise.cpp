#include "ops/elementwise.h"

#include <cmath>

namespace stave::ref {

// Evaluated in double and rounded once, like the other reference ops of the text model.
void silu_mul(const float* gate, const float* up, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    y[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void sigmoid_mul(float* x, const float* gate, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(x[i] / (1.0 + std::exp(-static_cast<double>(gate[i]))));
}

}  // namespace stave::ref
