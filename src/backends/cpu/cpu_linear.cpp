#include "backends/cpu/cpu_linear.h"

#include "ops/reference.h"

namespace stave::cpu {

// Placeholder until the vectorized kernels land: the reference product.
void linear(const LinearWeight& w, const float* x, int64_t M, float* y) { ref::linear(w, x, M, y); }

}  // namespace stave::cpu
