#include "util/bf16.h"

#include <cmath>

namespace stave {

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    // zero or subnormal: mant * 2^-24
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (mant << 13));
  return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t f32_to_f16(float f) {
  uint32_t b = f32_bits(f);
  uint32_t sign = (b >> 16) & 0x8000u;
  float a = std::fabs(f);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00u);
  if (a >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a < 6.103515625e-05f) {  // subnormal half: round a / 2^-24 to nearest even
    float q = std::nearbyint(a * 16777216.0f);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(q));
  }
  uint32_t ab = f32_bits(a);
  uint32_t rounded = ab + 0xfffu + ((ab >> 13) & 1u);
  return static_cast<uint16_t>(sign | (((rounded >> 13) - (112u << 10)) & 0x7fffu));
}

}  // namespace stave
