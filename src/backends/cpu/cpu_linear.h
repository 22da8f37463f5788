// The CPU's fast linear layer: y[M, w.out] = x[M, w.in] · Wᵀ (+ bias) for every weight format
// a release stores (fp32, bf16, f16, Quark MXFP4 with or without W4A4 activation quantization).
// Multithreaded (OpenMP) and dispatched at run time to the best kernel this CPU has
// (cpu_features.h: generic / avx2 / avx512 / amx, lowered by STAVE_CPU_ISA). Shared tiling
// drivers live in linear/, ISA-specific kernels in avx2/, avx512/, amx/. Weights are used in
// place from the mapped checkpoint (no repacked copy is kept). Its oracle is ref::linear
// (src/ops/reference.h): tests/test_cpu_linear.cpp compares the two on random shapes.
//
// Numerics: fp32 / bf16 / f16 / W4A16 weights are widened exactly to fp32 and multiplied with
// fp32 FMA, so results differ from ref::linear by summation order only. W4A4 quantizes the
// activation bit-exactly like mxfp4::quantize_block and forms exact integer 32-block dots;
// again only the fp32 accumulation across blocks differs (at level avx512 with M ≥ 16,
// kern::kW4A4VnniMinRows, the register-blocked VNNI kernel avx512/linear_w4a4_vnni_avx512.cpp;
// the vdpbf16ps kernel, one fp32 chain of K exact products, is kept but not dispatched). The
// exception: bf16 weights with
// M ≥ 16 at level amx (amx/linear_amx.cpp) run with the activation split into bf16 hi + lo
// (~16 significant bits, ≤ 2^-16 relative per term; denormals flushed) and one fp32 chain of
// 2·K terms per output.
#pragma once
#include <cstdint>

#include "formats/linear_weight.h"

namespace stave::cpu {

// Throws stave::Error for an unbound weight or an MXFP4 in_features that is not a multiple of
// 32. M == 0 does nothing.
void linear(const LinearWeight& w, const float* x, int64_t M, float* y);

}  // namespace stave::cpu
