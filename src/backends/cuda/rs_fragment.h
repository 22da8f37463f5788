// The register-source fused GEMM's weight fragments (gemm_mxfp4_fp8_rs.cu): where a thread finds
// its E2M1 codes in a K step's code tile, and which of them make each register of wgmma's A
// operand. Host and device, so the CPU tests check the index arithmetic.
#pragma once
#include <vector_types.h>

#include <cstdint>

#include "backends/cuda/e2m1_e4m3.h"  // STAVE_HOST_DEVICE

namespace stave::cuda::rs {

constexpr int kRowBytes = 64;  // one K step of 128 weights: 64 code bytes per row

// The step's code tile [rows][64 bytes] as TMA's 64-byte swizzle lays it in shared memory
// (CU_TENSOR_MAP_SWIZZLE_64B: bits 4–5 of the byte offset XOR bits 7–8, from a 512-byte aligned
// base): the 16-byte chunk of row r holding MX block s of the step (weights 32 s … 32 s + 31).
// Eight consecutive rows' chunk s then fall in eight different 16-byte bank groups.
STAVE_HOST_DEVICE int code_chunk_offset(int r, int s) { return r * kRowBytes + ((s ^ ((r >> 1) & 3)) << 4); }

// wgmma's A operand for 8-bit types, m64 × k32 (CUTLASS's ALayout_64x32, the mma.m16n8k32 A
// fragment on each warp's 16 rows): thread `lane` of warp `warp` in the warp group holds in
// register j (0 … 3), byte b, row a_row(warp, lane, j) and k = a_k(lane, j) + b.
STAVE_HOST_DEVICE int a_row(int warp, int lane, int j) { return 16 * warp + lane / 4 + 8 * (j & 1); }
STAVE_HOST_DEVICE int a_k(int lane, int j) { return 4 * (lane % 4) + 16 * (j >> 1); }

// Register j's four codes from its row's 16-byte block chunk (low nibble the even weight), in
// the low 16 bits: the half of word k / 8 that holds k … k + 3.
STAVE_HOST_DEVICE uint32_t a_codes(uint4 chunk, int lane, int j) {
  const int k = a_k(lane, j), word = k / 8;
  const uint32_t w = word == 0 ? chunk.x : word == 1 ? chunk.y : word == 2 ? chunk.z : chunk.w;
  return (w >> (16 * ((k / 4) & 1))) & 0xFFFFu;
}

}  // namespace stave::cuda::rs
