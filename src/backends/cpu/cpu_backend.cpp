#include "backends/cpu/cpu_backend.h"

#include "backends/cpu/cpu_linear.h"

namespace stave::cpu {

void CpuBackend::linear(const LinearWeight& w, const float* x, int64_t M, float* y) const {
  cpu::linear(w, x, M, y);
}

const Backend& fast_backend() {
  static const CpuBackend backend;
  return backend;
}

}  // namespace stave::cpu
