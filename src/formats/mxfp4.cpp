#include "formats/mxfp4.h"

#include <algorithm>
#include <cmath>

#include "util/bf16.h"

namespace stave::mxfp4 {

float exp2_int(int e) { return std::ldexp(1.0f, e); }

int scale_exponent(float amax, ScaleMode mode) {
  if (std::isnan(amax)) return 127;  // Quark asserts no NaN; saturate rather than emit a NaN scale
  if (mode == ScaleMode::kEven) {
    // Quark even_round: round amax to one mantissa bit (upper half and ties go up), then
    // take the power of two below it and subtract emax(E2M1) = 2.
    float value;
    if (amax == 0.0f) {
      value = 0x1p-126f;
    } else {
      uint32_t b = (f32_bits(amax) + 0x00200000u) & 0xFF800000u;
      value = f32_from_bits(b);
    }
    if (std::isinf(value)) return 127;
    if (value == 0.0f) return -127;  // a subnormal amax can round down to 0: log2(0) = -inf -> clamp
    int e = std::ilogb(value) - 2;  // floor(log2(value)) for a power of two (normal or not)
    return std::clamp(e, -127, 127);
  }
  if (amax == 0.0f) return -23;  // Quark: a zero scale is replaced by eps = 2^-23
  int fl = std::ilogb(amax);         // floor(log2(amax)) for normals and subnormals
  if (mode == ScaleMode::kFloor) return std::clamp(fl - 2, -127, 127);
  bool exact = std::ldexp(1.0f, fl) == amax;
  return std::clamp((exact ? fl : fl + 1) - 2, -127, 127);
}

uint8_t quantize_e2m1(float v) {
  // Quark fake_quantize_element for ebits=2, mbits=1, max_norm=6, round half to even: |v| onto
  // the grid {0, .5, 1, 1.5, 2, 3, 4, 6}, saturating at 6. The code is the number of the grid's
  // midpoints below |v|; a value exactly on a midpoint goes to the even neighbour (0.25 → 0,
  // 0.75 → 1, 1.25 → 1, 1.75 → 2, 2.5 → 2, 3.5 → 4, 5 → 4), hence > or ≥ per midpoint. NaN
  // compares false everywhere (code 0), anything that rounds to zero is +0. Equal to the
  // divide-and-nearbyint form for every float (checked over all 2^32 bit patterns).
  const float a = std::fabs(v);
  const unsigned code = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
  return static_cast<uint8_t>(code == 0 ? 0 : code | ((f32_bits(v) >> 31) << 3));
}

int quantize_block(const float* x, int n, uint8_t* codes, ScaleMode mode) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  int e = scale_exponent(amax, mode);
  // 2^-e is exactly representable for e in [-127, 127], so x * 2^-e equals Quark's x / 2^e.
  float inv = std::ldexp(1.0f, -e);
  for (int i = 0; i < n; ++i) codes[i] = quantize_e2m1(x[i] * inv);
  return e;
}

void qdq_row(const float* x, int64_t k, float* out, ScaleMode mode) {
  uint8_t codes[kBlock];
  for (int64_t b = 0; b < k; b += kBlock) {
    int n = static_cast<int>(std::min<int64_t>(kBlock, k - b));
    int e = quantize_block(x + b, n, codes, mode);
    float s = exp2_int(e);
    for (int i = 0; i < n; ++i) out[b + i] = kE2M1Values[codes[i]] * s;
  }
}

uint8_t export_scale_byte(int scale_exponent) {
  int e = std::max(scale_exponent, -126);  // safe_log2 clamps the scale to 2^-126
  e = std::clamp(e, -127, 127);
  return static_cast<uint8_t>(e + 127);
}

void dequantize_row(const uint8_t* packed, const uint8_t* scale_bytes, int64_t k, float* out) {
  for (int64_t b = 0; b < k / kBlock; ++b) {
    float s = exp2_int(static_cast<int>(scale_bytes[b]) - 127);
    const uint8_t* p = packed + b * (kBlock / 2);
    float* o = out + b * kBlock;
    for (int j = 0; j < kBlock / 2; ++j) {
      o[2 * j] = kE2M1Values[p[j] & 0x0f] * s;
      o[2 * j + 1] = kE2M1Values[p[j] >> 4] * s;
    }
  }
}

}  // namespace stave::mxfp4
