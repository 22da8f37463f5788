// The BF16 flash attention on Hopper's warp-group MMA (attention_flash_wgmma.cu): the kernel
// behind FlashBf16Kernel::kWgmma, on the BF16 copies flash_attention_bf16 makes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/attention.h"

namespace stave::cuda::dev {

// head_dim 128 or 256 (the kernel's MMA shapes); other sizes keep the mma.sync kernel.
bool flash_wgmma_supports(int64_t head_dim);

// flash_attention_bf16's contract on its BF16 copies: q [tokens, nq·d], k and v [≥ q_pos0 +
// tokens, nkv·d], 16-byte aligned; out [tokens, nq·d] fp32.
void flash_wgmma(cudaStream_t stream, const AttentionShape& shape, const __nv_bfloat16* q, int64_t tokens,
                 int64_t q_pos0, const __nv_bfloat16* k, const __nv_bfloat16* v, float* out);

}  // namespace stave::cuda::dev
