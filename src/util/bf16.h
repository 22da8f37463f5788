// bfloat16 <-> float32. bf16 is the upper half of an IEEE float32, so widening is exact;
// narrowing rounds to nearest even, as torch's .to(torch.bfloat16) does.
#pragma once
#include <cstdint>
#include <cstring>

namespace stave {

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN, keep sign
  }
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

// Round a float to the nearest bf16 value and back (what a bf16 store does to it).
inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// IEEE half -> float (for F16 tensors in checkpoints).
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

inline uint32_t f32_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
inline float f32_from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

}  // namespace stave
