// Which kernel runs fast-precision attention on the GPU (exact precision always takes the fp64
// cuBLAS products): the fused flash kernel (attention_flash.cu; head dims 16/32/64/128/256) or
// the chunked cuBLAS products (attention_gemm.cu; any shape).
#pragma once

namespace stave::cuda {

enum class AttentionKernel {
  kAuto,   // flash where it applies and its grid fills the GPU (flash_attention_pays), else cuBLAS
  kFlash,  // flash wherever it applies (tests: every shape through the kernel)
  kGemm,   // the cuBLAS products only (benchmarks measure both in one run)
};

// STAVE_CUDA_ATTENTION: unset or "auto" → kAuto, "flash" → kFlash, "gemm" → kGemm; anything
// else is an Error naming the variable.
AttentionKernel attention_kernel_from_env();

}  // namespace stave::cuda
