// The fast CPU backend (`--precision fast`): vectorized, multithreaded kernels for every op the
// model runs. Numerics are fp32 accumulation over the stored weights (bf16 / MXFP4), so results
// differ from the reference backend by rounding only; tests hold the two together.
#pragma once
#include "ops/backend.h"

namespace stave::cpu {

class CpuBackend : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  void linear(const LinearWeight& w, const float* x, int64_t M, float* y) const override;
};

const Backend& fast_backend();

}  // namespace stave::cpu
