// Fast-precision causal attention on BF16 tensor cores (attention_flash_bf16.cu): q, k and v are
// rounded to bf16 once (a conversion pass into a stream-ordered scratch), the products run as
// mma.sync m16n8k16 bf16 with fp32 accumulation, softmax online in fp32, out in fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/attention.h"

namespace stave::cuda::dev {

// Fewest queries for which AttentionKernel::kAuto takes this kernel: below it (decode, a short
// extension of a long state) one block per 64 queries and head leaves most of the GPU idle and
// the earlier paths (3xTF32 flash or chunked cuBLAS, as attention_gemm.cu picks) stay.
constexpr int64_t kFlashBf16MinTokens = 16;

// head_dim 64, 128 or 256, 16-byte aligned pointers, keys ≤ 65535 · 64 (query tiles on the grid's y).
bool flash_attention_bf16_supports(const AttentionShape& shape, const float* q, const float* k, const float* v,
                                   const float* out, int64_t keys);

// Which kernel runs the products (the same algorithm and precision; the sums' order within a
// 16-wide step differs between the mma.sync and wgmma forms):
enum class FlashBf16Kernel {
  kDefault,  // the backend's: STAVE_CUDA_FLASH_BF16, unset or "wgmma" → kWgmma (the default since
             // 2026-12-07: 1.26× / 1.40× at 2048 / 8192 tokens on an H200), "mma" → kMma64
  kMma64,    // mma.sync, 64 queries per block (4 warps)
  kMma128,   // mma.sync, 128 queries per block (8 warps; the same bits as kMma64)
  kWgmma,    // warp-group MMA, 128 queries per block (attention_flash_wgmma.cu); head_dim 128 or
             // 256, other head dims take kMma64. (FlashAttention-3's overlap inside a warp group,
             // each tile's softmax under the last tile's P V, measured slower on an H100 on
             // 2026-12-07: 2.90 against 2.55 ms at 8192 tokens; removed.)
};

// ref::attention_causal's contract: q [tokens, nq·d] at positions q_pos0 …, k and v
// [≥ q_pos0 + tokens, nkv·d] from position 0, out [tokens, nq·d] fp32.
void flash_attention_bf16(cudaStream_t stream, const AttentionShape& shape, const float* q, int64_t tokens,
                          int64_t q_pos0, const float* k, const float* v, float* out,
                          FlashBf16Kernel kernel = FlashBf16Kernel::kDefault);

}  // namespace stave::cuda::dev
