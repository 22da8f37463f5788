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

// The kernel's work per key tile. kLean: the softmax of flash_softmax.cuh's softmax_tile_fma
// (the scale inside each score's exponential FMA, no masks on tiles a warp group sees whole), the
// output rescaled only where a row's max moved, the next tiles' copies issued after this tile's
// MMAs; kPlain: softmax_tile, as the mma.sync kernels (each score scaled, then masked, then
// shifted; the output rescaled every tile), the copies issued first. kDefault:
// STAVE_CUDA_FLASH_TILE, unset or "plain" → kPlain, "lean" → kLean, anything else an Error naming
// the variable (read at each call). kLean is built and not yet run on a GPU (2026-12-07): the
// default until its op test and its timing beside kPlain have run.
enum class FlashTile { kDefault, kLean, kPlain };
FlashTile flash_tile_from_env();

// flash_attention_bf16's contract on its BF16 copies: q [tokens, nq·d], k and v [≥ q_pos0 +
// tokens, nkv·d], 16-byte aligned; out [tokens, nq·d] fp32.
void flash_wgmma(cudaStream_t stream, const AttentionShape& shape, const __nv_bfloat16* q, int64_t tokens,
                 int64_t q_pos0, const __nv_bfloat16* k, const __nv_bfloat16* v, float* out,
                 FlashTile tile = FlashTile::kDefault);

}  // namespace stave::cuda::dev
