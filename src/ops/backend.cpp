#include "ops/backend.h"

#include "ops/reference.h"

namespace stave {

void Backend::linear(const LinearWeight& w, const float* x, int64_t M, float* y) const { ref::linear(w, x, M, y); }

const Backend& reference_backend() {
  static const Backend backend;
  return backend;
}

// Until the vectorized CPU backend lands, every precision uses the reference kernels.
const Backend& cpu_backend(Precision precision) {
  (void)precision;
  return reference_backend();
}

}  // namespace stave
