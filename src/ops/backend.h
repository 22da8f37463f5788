// The kernels a model runs on. The model code (src/model) is written against this interface;
// the reference backend is plain fp32 loops (the oracle and `--precision exact`), the CPU
// backend (src/backends/cpu) overrides ops with vectorized, multithreaded kernels, and the
// CUDA backend lives apart (src/backends/cuda). An op a backend does not override falls back
// to the reference implementation.
#pragma once
#include <cstdint>

#include "model/linear_weight.h"
#include "stave/options.h"

namespace stave {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const { return "reference"; }

  // y[M, w.out] = x[M, w.in] · Wᵀ (+ bias); W4A4 activation quantization for MXFP4 weights.
  virtual void linear(const LinearWeight& w, const float* x, int64_t M, float* y) const;
};

// fp32 reference kernels (never changes numerics; the oracle).
const Backend& reference_backend();
// The fastest backend this CPU supports for `precision` (exact -> reference).
const Backend& cpu_backend(Precision precision);

}  // namespace stave
