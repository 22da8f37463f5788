// MXFP4 W4A4 on AMX-BF16 (tdpbf16ps), fast precision, level amx, M ≥ kW4A4AmxBf16MinRows
// (linear_amx dispatches it; exact precision runs the reference backend and never gets here):
//  1. the activation is quantized once per call to MXFP4 (quantize_activations_avx512, bit-exact
//     with mxfp4::quantize_block; rows padded to 32) and stored as bf16 (exact) in the VNNI
//     layout of tdpbf16ps's B operand (pairs of K), one 2 KiB block per 32 rows × 32 columns;
//  2. linear/w4a4_tile_gemm.h expands the weight per task and K chunk from packed MXFP4 into
//     row-major bf16 A tiles, reused for every activation block of the task, and accumulates the
//     exact products in fp32 C tiles across all of K (no per-block rescale).
// The driver's header describes the layouts, the blocking and the numerics; the tests run the
// same driver with the tiles emulated in scalar code (tests/test_cpu_linear.cpp).
#include <memory>

#include "backends/cpu/amx/amx_bf16_tiles.h"
#include "backends/cpu/linear/kernels.h"
#include "backends/cpu/linear/w4a4_tile_gemm.h"

namespace stave::cpu::kern {

bool linear_w4a4_amx_bf16(const LinearWeight& w, const float* x, int64_t M, float* y) {
  if (w.format != WeightFormat::kMXFP4 || !w.quantize_input || M < 1) return false;
  QuantizedActivations q;
  quantize_activations_avx512(x, M, w.in, w.input_scale_mode, 32, q);
  std::unique_ptr<uint16_t[]> act(new uint16_t[static_cast<size_t>(q.padded_rows * w.in)]);
  activations_to_bf16_avx512(q, act.get());
  w4a4_tile_gemm<AmxBf16Tiles>(w, act.get(), q.padded_rows, M, y);
  count_w4a4_amx_bf16_call();
  return true;
}

}  // namespace stave::cpu::kern
