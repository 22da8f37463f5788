// Portable kernels (no ISA flags): the "generic" level, used on CPUs without AVX2 and as a
// second, simple implementation of the blocked drivers that tests hold against ref::linear.
#include <cstring>

#include "backends/cpu/linear/float_gemm.h"
#include "backends/cpu/linear/kernels.h"
#include "backends/cpu/linear/w4a4_gemm.h"
#include "ops/reference.h"
#include "formats/mxfp4.h"
#include "util/bf16.h"

namespace stave::cpu::kern {
namespace {

struct GenericFloat {
  static constexpr int MR = 4, NR = 4;
  static constexpr int L = 8;  // independent partial sums per dot, so the compiler can vectorize

  template <int R, int C>
  static void tile(const float* const* x, const float* const* w, int64_t kc, float* acc) {
    float s[R][C][L] = {};
    int64_t k = 0;
    for (; k + L <= kc; k += L)
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j)
          for (int l = 0; l < L; ++l) s[i][j][l] += x[i][k + l] * w[j][k + l];
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) {
        float a = 0.0f;
        for (int l = 0; l < L; ++l) a += s[i][j][l];
        for (int64_t kk = k; kk < kc; ++kk) a += x[i][kk] * w[j][kk];
        acc[i * C + j] = a;
      }
  }

  static void widen(const LinearWeight& w, int64_t n0, int64_t rows, int64_t k0, int64_t kc, float* dst,
                    int64_t ld) {
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = static_cast<const uint8_t*>(w.data) + (n0 + r) * w.row_bytes();
      float* d = dst + r * ld;
      switch (w.format) {
        case WeightFormat::kF32: std::memcpy(d, row + k0 * 4, static_cast<size_t>(kc) * 4); break;
        case WeightFormat::kBF16:
          for (int64_t i = 0; i < kc; ++i) {
            uint16_t h;
            std::memcpy(&h, row + 2 * (k0 + i), 2);
            d[i] = bf16_to_f32(h);
          }
          break;
        case WeightFormat::kF16:
          for (int64_t i = 0; i < kc; ++i) {
            uint16_t h;
            std::memcpy(&h, row + 2 * (k0 + i), 2);
            d[i] = f16_to_f32(h);
          }
          break;
        case WeightFormat::kMXFP4:  // k0 and kc are multiples of 32 (KC is, and K is)
          mxfp4::dequantize_row(row + k0 / 2, w.scales + (n0 + r) * (w.in / mxfp4::kBlock) + k0 / mxfp4::kBlock,
                                kc, d);
          break;
      }
    }
  }
};

struct GenericW4A4 {
  static constexpr int MR = 4, NR = 4;

  template <int R, int C>
  static void tile(const QuantizedActivations& q, const int64_t* rows, const uint8_t* const* wc,
                   const uint8_t* const* ws, int64_t b0, int64_t nb, float* acc) {
    const float* e8m0 = e8m0_table();
    float a[R * C] = {};
    for (int64_t b = b0; b < b0 + nb; ++b) {
      int8_t wd[C][mxfp4::kBlock];
      for (int j = 0; j < C; ++j)
        for (int t = 0; t < mxfp4::kBlock / 2; ++t) {
          uint8_t byte = wc[j][b * 16 + t];
          wd[j][2 * t] = mxfp4::kE2M1Doubled[byte & 0x0f];
          wd[j][2 * t + 1] = mxfp4::kE2M1Doubled[byte >> 4];
        }
      for (int i = 0; i < R; ++i) {
        const int8_t* xc = q.codes.data() + rows[i] * q.k + b * mxfp4::kBlock;
        const float xs = q.scales[rows[i] * q.blocks + b];
        for (int j = 0; j < C; ++j) {
          int32_t dot = 0;
          for (int t = 0; t < mxfp4::kBlock; ++t) dot += int32_t{xc[t]} * wd[j][t];
          a[i * C + j] += static_cast<float>(dot) * (xs * e8m0[ws[j][b]]);
        }
      }
    }
    for (int t = 0; t < R * C; ++t) acc[t] = a[t];
  }
};

}  // namespace

void quantize_activations_generic(const float* x, int64_t M, int64_t K, mxfp4::ScaleMode mode, int64_t row_multiple,
                                  QuantizedActivations& q) {
  q.resize(M, K, row_multiple);
  // One task per 32-block (a few tens of ns each), so a single decode row is split too.
#pragma omp parallel for schedule(static) if (M * q.blocks >= 256)
  for (int64_t mb = 0; mb < M * q.blocks; ++mb) {
    const int64_t m = mb / q.blocks, b = mb % q.blocks;
    uint8_t codes[mxfp4::kBlock];
    int e = mxfp4::quantize_block(x + m * K + b * mxfp4::kBlock, mxfp4::kBlock, codes, mode);
    int8_t* out = q.codes.data() + m * K + b * mxfp4::kBlock;
    int32_t sum = 0;
    for (int t = 0; t < mxfp4::kBlock; ++t) {
      out[t] = mxfp4::kE2M1Doubled[codes[t]];
      sum += out[t];
    }
    q.scales[m * q.blocks + b] = mxfp4::exp2_int(e - 2);
    q.offsets[m * q.blocks + b] = 12 * sum;
  }
}

void linear_generic(const LinearWeight& w, const float* x, int64_t M, float* y) {
  if (w.format == WeightFormat::kMXFP4 && w.quantize_input) {
    QuantizedActivations q;
    quantize_activations_generic(x, M, w.in, w.input_scale_mode, 1, q);
    w4a4_gemm<GenericW4A4>(w, q, y);
    return;
  }
  float_gemm<GenericFloat>(w, x, M, y);
}

}  // namespace stave::cpu::kern
