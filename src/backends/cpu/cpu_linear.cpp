#include "backends/cpu/cpu_linear.h"

#include <string>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/linear/kernels.h"
#include "stave/errors.h"

namespace stave::cpu {
namespace {

void check(const LinearWeight& w, const float* x, int64_t M, const float* y) {
  const std::string what = "linear '" + w.name + "'";
  if (M < 0) throw Error(ErrorKind::kInternal, what + ": negative row count " + std::to_string(M));
  if (w.out <= 0 || w.in <= 0)
    throw Error(ErrorKind::kInvalidModel, what + ": empty shape [" + std::to_string(w.out) + ", " +
                                              std::to_string(w.in) + "]");
  if (!w.data) throw Error(ErrorKind::kInternal, what + ": weight is not bound");
  if (M > 0 && (!x || !y)) throw Error(ErrorKind::kInternal, what + ": null input or output");
  if (w.format == WeightFormat::kMXFP4) {
    if (w.in % mxfp4::kBlock != 0)
      throw Error(ErrorKind::kInvalidModel,
                  what + ": MXFP4 weight with in_features " + std::to_string(w.in) + " not a multiple of 32");
    if (!w.scales) throw Error(ErrorKind::kInvalidModel, what + ": MXFP4 weight without weight_scale");
  }
}

}  // namespace

void linear(const LinearWeight& w, const float* x, int64_t M, float* y) {
  check(w, x, M, y);
  if (M == 0) return;
  switch (active_isa()) {
    case Isa::kAmx:
      if (kern::linear_amx(w, x, M, y)) return;
      [[fallthrough]];
    case Isa::kAvx512: kern::linear_avx512(w, x, M, y); return;
    case Isa::kAvx2: kern::linear_avx2(w, x, M, y); return;
    case Isa::kGeneric: kern::linear_generic(w, x, M, y); return;
  }
}

}  // namespace stave::cpu
