// Which kernel runs fast-precision attention on the GPU (exact precision always takes the fp64
// cuBLAS products): the BF16 flash kernel (attention_flash_bf16.cu, on warp-group MMA in
// attention_flash_wgmma.cu for head dims 128/256; causal, head dims 64/128/256), the 3xTF32
// flash kernel (attention_flash.cu; head dims 16/32/64/128/256) or the chunked cuBLAS products
// (attention_gemm.cu; any shape).
#pragma once

namespace stave::cuda {

enum class AttentionKernel {
  kAuto,       // causal with ≥ kFlashBf16MinTokens queries: BF16 flash where it applies; otherwise
               // (and non-causal) 3xTF32 flash where its grid fills the GPU (flash_attention_pays),
               // else cuBLAS
  kFlash,      // 3xTF32 flash wherever it applies (tests: every shape through the kernel)
  kGemm,       // the cuBLAS products only (benchmarks measure each in one run)
  kFlashBf16,  // BF16 flash wherever it applies (causal, any token count), else as kAuto
};

// STAVE_CUDA_ATTENTION: unset or "auto" → kAuto, "flash" → kFlash, "gemm" → kGemm, "bf16" →
// kFlashBf16; anything else is an Error naming the variable.
AttentionKernel attention_kernel_from_env();

}  // namespace stave::cuda
