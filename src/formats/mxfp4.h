// OCP MXFP4 with AMD Quark's numerics (OCP Microscaling Formats v1.0): E2M1 elements, one
// E8M0 scale per 32 values, Quark's "even" scale and round-half-to-even element rounding.
// These scalar functions are the oracle for every fast MXFP4 kernel.
#pragma once
#include <cstddef>
#include <cstdint>

namespace stave::mxfp4 {

inline constexpr int kBlock = 32;

// E2M1 code (0..15) -> value. Code 8 is -0.
inline constexpr float kE2M1Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
// 2 x E2M1 as exact integers in [-12, 12] (what integer dot products use).
inline constexpr int8_t kE2M1Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

enum class ScaleMode { kEven, kFloor, kCeil };

// Shared scale exponent e (scale = 2^e, e in [-127, 127]) of a block with the given amax.
int scale_exponent(float amax, ScaleMode mode = ScaleMode::kEven);

// 2^e as float (2^-127 is a subnormal).
float exp2_int(int e);

// Quark's element quantizer: v (already divided by the scale) rounded half-to-even onto the
// E2M1 grid, saturating at +-6, +0 for anything that rounds to zero. Returns the code (never 8).
uint8_t quantize_e2m1(float v);

// Quantizes one block of n <= 32 values (a short tail block is padded with zeros as Quark
// does): writes n codes and returns the scale exponent.
int quantize_block(const float* x, int n, uint8_t* codes, ScaleMode mode = ScaleMode::kEven);

// Quantize-dequantize a row of k values in place-or-copy, block by block (the W4A4 activation
// path: "QDQ the activation per 32-block along K").
void qdq_row(const float* x, int64_t k, float* out, ScaleMode mode = ScaleMode::kEven);

// The byte Quark writes for a weight block's scale: clamp(round(log2(max(s, 2^-126)))) + 127.
uint8_t export_scale_byte(int scale_exponent);

// Decodes one packed row: codes [k/2] (low nibble = even column), scale bytes [k/32] -> k floats.
void dequantize_row(const uint8_t* packed, const uint8_t* scale_bytes, int64_t k, float* out);

}  // namespace stave::mxfp4
