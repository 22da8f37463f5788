// E2M1 codes to E4M3 bytes with one power-of-two shift per MX block, the fused MXFP4 GEMM's
// expansion (gemm_mxfp4_fp8.cu): host and device, so the CPU tests check it against an
// independent E4M3 encoder for every code and shift.
//
// A block with shift d (E2M1 · 2^d, d in [kMinShift, kMaxShift]) has an eight-byte table: byte c
// = E4M3(E2M1(c) · 2^d) for the magnitudes c = 0 … 7. One byte_perm maps four codes'
// magnitudes (nibbles, low first) to four bytes; the signs move from bit 3 of each nibble to bit
// 7 of each byte.
#pragma once
#include <cuda_fp8.h>
#include <vector_types.h>

#include <math.h>

#include <cstdint>

#include "backends/cuda/quantize_fp8.h"  // kMinShift, kMaxShift

#if defined(__CUDACC__)
#define STAVE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define STAVE_HOST_DEVICE inline
#endif

namespace stave::cuda {

// The shift of an MX block with exponent byte `block_byte` in a row whose reference exponent is
// row_exp (E2M1 · 2^shift, the bytes of the FP8 path's expansion): clamped to [kMinShift,
// kMaxShift], where only all-zero blocks, whose bytes are 0 under any shift, fall outside.
STAVE_HOST_DEVICE int block_shift(int block_byte, int row_exp) {
  const int d = block_byte - 127 - row_exp;
  return d < kMinShift ? kMinShift : (d > kMaxShift ? kMaxShift : d);
}

// __byte_perm's default mode: byte n of the result is byte ((s >> 4n) & 7) of {y, x}.
STAVE_HOST_DEVICE uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, y, s);
#else
  const uint64_t v = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n) r |= static_cast<uint32_t>((v >> (8 * ((s >> (4 * n)) & 7))) & 0xFF) << (8 * n);
  return r;
#endif
}

// The table of shift d: bytes 0 … 3 in .x, 4 … 7 in .y.
STAVE_HOST_DEVICE uint2 e4m3_shift_table(int d) {
  const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  uint32_t w[2] = {0, 0};
  for (int c = 0; c < 8; ++c)
    w[c / 4] |= static_cast<uint32_t>(__nv_cvt_float_to_fp8(ldexpf(mag[c], d), __NV_SATFINITE, __NV_E4M3))
                << (8 * (c % 4));
  return make_uint2(w[0], w[1]);
}

// Eight codes (one word, low nibble first) to eight E4M3 bytes (.x the first four).
STAVE_HOST_DEVICE uint2 e2m1x8_to_e4m3(uint32_t w, uint2 table) {
  const uint32_t mag_lo = byte_perm(table.x, table.y, w & 0x7777u);
  const uint32_t mag_hi = byte_perm(table.x, table.y, (w >> 16) & 0x7777u);
  // Bytes [b0, b0, b1, b1] of each half word: the sign of nibble 2i is bit 3 of byte 2i, that of
  // nibble 2i + 1 bit 7 of byte 2i + 1.
  const uint32_t y_lo = byte_perm(w, 0, 0x1100), y_hi = byte_perm(w, 0, 0x3322);
  const uint32_t s_lo = ((y_lo << 4) & 0x00800080u) | (y_lo & 0x80008000u);
  const uint32_t s_hi = ((y_hi << 4) & 0x00800080u) | (y_hi & 0x80008000u);
  return make_uint2(mag_lo | s_lo, mag_hi | s_hi);
}

// Four codes (the low 16 bits of w, low nibble first) to four E4M3 bytes: e2m1x8_to_e4m3(w).x.
STAVE_HOST_DEVICE uint32_t e2m1x4_to_e4m3(uint32_t w, uint2 table) {
  const uint32_t mag = byte_perm(table.x, table.y, w & 0x7777u);
  const uint32_t y = byte_perm(w, 0, 0x1100);
  return mag | ((y << 4) & 0x00800080u) | (y & 0x80008000u);
}

// One MX block's 16 code bytes (32 weights) to its 32 E4M3 bytes: weights 0 … 15 in lo,
// 16 … 31 in hi.
STAVE_HOST_DEVICE void e2m1_block_to_e4m3(uint4 codes, uint2 table, uint4& lo, uint4& hi) {
  const uint2 w0 = e2m1x8_to_e4m3(codes.x, table), w1 = e2m1x8_to_e4m3(codes.y, table);
  const uint2 w2 = e2m1x8_to_e4m3(codes.z, table), w3 = e2m1x8_to_e4m3(codes.w, table);
  lo = make_uint4(w0.x, w0.y, w1.x, w1.y);
  hi = make_uint4(w2.x, w2.y, w3.x, w3.y);
}

}  // namespace stave::cuda
