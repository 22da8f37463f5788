// The summation order of F.linear (fp32 CPU: ATen addmm/mm → MKL sgemm, x [M, K] row-major times
// w [N, K]ᵀ) on the reference machine, per output, by the kernel MKL picks for the shape. Found with
// tools/reference/probe_sum_order.py (FPRev: ±2^40 pairs reveal the summation tree) and checked bit
// for bit on random data (probe_small_linear.py, probe_linear_paths.py); the data of those runs is
// summarised in tests/test_torch_linear_order.cpp. The bias, when there is one, is added to the
// finished sum (ATen fills C with it and MKL adds each k-block's sum to C).
#pragma once

#include <cstdint>

#include "ops/torch_cpu_order.h"

namespace stave::ref::torch_order {

// MKL's kernel for a few rows: sixteen k-lanes (lane l sums k ≡ l mod 16 in an FMA chain over the
// full 16-wide blocks); the zmm then folds by 128-bit quarters in order, q_r = ((l_r + l_{r+4}) +
// l_{r+8}) + l_{r+12}, and the xmm pairwise, (q_0 + q_1) + (q_2 + q_3); the k beyond the last full
// block continue that sum as an FMA chain.
inline float gemm_dot_few_rows(const float* a, const float* b, int64_t K) {
  float lane[16] = {};
  const int64_t full = K - K % 16;
  for (int64_t k = 0; k < full; k += 16)
    for (int l = 0; l < 16; ++l) lane[l] = std::fma(a[k + l], b[k + l], lane[l]);
  float q[4];
  for (int r = 0; r < 4; ++r) q[r] = ((lane[r] + lane[r + 4]) + lane[r + 8]) + lane[r + 12];
  float s = (q[0] + q[1]) + (q[2] + q[3]);
  for (int64_t k = full; k < K; ++k) s = std::fma(a[k], b[k], s);
  return s;
}

// Whether MKL runs F.linear of this shape with the few-rows kernel: 2 ≤ M ≤ a limit that grows
// with K, as mapped on the reference machine (see linear_few_rows_limit's table).
int64_t linear_few_rows_limit(int64_t N, int64_t K);
inline bool linear_uses_few_rows(int64_t M, int64_t N, int64_t K) {
  return M >= 2 && M <= linear_few_rows_limit(N, K);
}

}  // namespace stave::ref::torch_order
