// The CPU's fast linear layer: y[M, w.out] = x[M, w.in] · Wᵀ (+ bias) for every weight format
// a release stores (fp32, bf16, f16, Quark MXFP4 with or without W4A4 activation quantization).
// Multithreaded (OpenMP) and dispatched at run time to the best kernel this CPU has
// (dispatch in this folder; ISA-specific kernels in avx2/, avx512/, amx/). Its oracle is
// ref::linear (src/ops/reference.h): tests compare the two on random shapes.
#pragma once
#include <cstdint>

#include "model/linear_weight.h"

namespace stave::cpu {

void linear(const LinearWeight& w, const float* x, int64_t M, float* y);

}  // namespace stave::cpu
