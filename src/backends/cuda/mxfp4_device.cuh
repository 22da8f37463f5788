// Device functions of the MXFP4 activation quantization (src/formats/mxfp4), bit for bit: the
// block scale exponent and the E2M1 rounding. Shared by the BF16 / fp64 path (linear_ops.cu) and
// the FP8 path (linear_fp8.cu, quantize_fp8.cu); each .cu gets its own copy of the table.
#pragma once
#include <cuda_runtime.h>

namespace stave::cuda {
namespace {

__constant__ float kE2M1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// mxfp4::scale_exponent, bit for bit (mode: 0 even, 1 floor, 2 ceil).
__device__ int scale_exponent(float amax, int mode) {
  if (isnan(amax)) return 127;
  if (mode == 0) {  // even
    float value;
    if (amax == 0.0f) {
      value = 0x1p-126f;
    } else {
      const unsigned b = (__float_as_uint(amax) + 0x00200000u) & 0xFF800000u;
      value = __uint_as_float(b);
    }
    if (isinf(value)) return 127;
    if (value == 0.0f) return -127;
    const int e = ilogbf(value) - 2;
    return max(-127, min(127, e));
  }
  if (amax == 0.0f) return -23;
  const int fl = ilogbf(amax);
  if (mode == 1) return max(-127, min(127, fl - 2));
  const bool exact = ldexpf(1.0f, fl) == amax;
  return max(-127, min(127, (exact ? fl : fl + 1) - 2));
}

// mxfp4::quantize_e2m1 then the value back (times 1): the E2M1 grid value with sign, +0 for 0.
__device__ float e2m1_round(float v) {
  const float a = fabsf(v);
  if (isnan(a)) return 0.0f;
  float q;
  if (a >= 6.0f) {
    q = 6.0f;
  } else {
    // a / step as a product by the power of two 1 / step: the same correctly rounded value.
    const float step = a < 2.0f ? 0.5f : (a < 4.0f ? 1.0f : 2.0f);
    const float inv_step = a < 2.0f ? 2.0f : (a < 4.0f ? 1.0f : 0.5f);
    q = __fmul_rn(rintf(__fmul_rn(a, inv_step)), step);
    if (q > 6.0f) q = 6.0f;
  }
  if (q == 0.0f) return 0.0f;
  return (__float_as_uint(v) >> 31) ? -q : q;
}

}  // namespace
}  // namespace stave::cuda
