// The operation order of the reference (PyTorch 2.11 on x86-64 CPU, fp32: the fixtures' run, see
// docs/numerics.md), reproduced in portable scalar code so that `--precision exact` rounds like
// it does. Each helper names the PyTorch/MKL routine whose order it follows; the probes that
// established them are described in docs/numerics.md. No ISA-specific code: results are the same
// on every x86-64 (the FMAs are explicit std::fma calls, never contracted by the compiler).
#pragma once
#include <array>
#include <cmath>
#include <cstdint>

namespace stave::ref::torch_order {

// Reductions over a contiguous row (sum, mean, pow(2).mean, (x*x).sum): ATen's SumKernel
// cascade_sum → vectorized_inner_sum with 8-float vectors (the reduction kernels are dispatched
// at AVX2 width even on AVX-512 machines): vectors of 8 summed by row_sum (4-way ILP, cascaded in
// multi_row_sum's 4 levels), then the scalar tail from 0, then the 8 lanes in order.
// `f(i)` yields element i (so x² can be summed without a temporary, as x.pow(2) rounds it first).
template <class F>
float row_sum(F f, int64_t n);

inline float row_sum(const float* x, int64_t n) {
  return row_sum([x](int64_t i) { return x[i]; }, n);
}
inline float row_sum_squares(const float* x, int64_t n) {
  return row_sum([x](int64_t i) { return x[i] * x[i]; }, n);
}

// Σ_k a[k·sa]·b[k·sb] as MKL's sgemm accumulates one output on this machine class: an FMA chain
// from 0 over blocks of 384 k, the block sums added in order (K ≤ 384: one plain FMA chain).
inline float gemm_dot(const float* a, int64_t sa, const float* b, int64_t sb, int64_t K) {
  constexpr int64_t kBlock = 384;
  float total = 0.0f;
  for (int64_t k0 = 0; k0 < K; k0 += kBlock) {
    const int64_t k1 = k0 + kBlock < K ? k0 + kBlock : K;
    float acc = 0.0f;
    for (int64_t k = k0; k < k1; ++k) acc = std::fma(a[k * sa], b[k * sb], acc);
    total = k0 == 0 ? acc : total + acc;
  }
  return total;
}

// vec::reduce_all(+) over a row with 16-float vectors (the AVX-512 softmax kernel): element j
// accumulates in lane j mod 16 (the first vector loaded, the rest added in order), then the lanes
// fold pairwise (l += l + 8, l += l + 4, l += l + 2, l += l + 1).
inline float lane_tree_sum(const float* x, int64_t n) {
  constexpr int W = 16;
  float acc[W] = {};
  if (n < W) {
    for (int64_t i = 0; i < n; ++i) acc[i] = x[i];
  } else {
    for (int l = 0; l < W; ++l) acc[l] = x[l];
    int64_t i = W;
    for (; i < n - (n % W); i += W)
      for (int l = 0; l < W; ++l) acc[l] += x[i + l];
    for (int l = 0; i + l < n; ++l) acc[l] += x[i + l];
  }
  for (int w = W / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

// ---- implementation

namespace detail {
constexpr int kLanes = 8;
using Vec = std::array<float, kLanes>;
inline void add(Vec& a, const Vec& b) {
  for (int i = 0; i < kLanes; ++i) a[i] += b[i];
}
inline int64_t ceil_log2(int64_t x) {
  int64_t r = 0;
  while ((int64_t{1} << r) < x) ++r;
  return r;
}
}  // namespace detail

template <class F>
float row_sum(F f, int64_t n) {
  using detail::Vec;
  using detail::kLanes;
  auto load = [&](int64_t v) {
    Vec r;
    for (int l = 0; l < kLanes; ++l) r[l] = f(v * kLanes + l);
    return r;
  };
  const int64_t nvec = n / kLanes, size_ilp = nvec / 4;
  // multi_row_sum over size_ilp rows of 4 vectors, 4 cascade levels
  constexpr int kLevels = 4;
  const int64_t level_power = std::max<int64_t>(4, detail::ceil_log2(size_ilp) / kLevels);
  const int64_t level_step = int64_t{1} << level_power, level_mask = level_step - 1;
  Vec acc[kLevels][4] = {};
  int64_t i = 0;
  for (; i + level_step <= size_ilp;) {
    for (int64_t j = 0; j < level_step; ++j, ++i)
      for (int k = 0; k < 4; ++k) detail::add(acc[0][k], load(i * 4 + k));
    for (int j = 1; j < kLevels; ++j) {
      for (int k = 0; k < 4; ++k) {
        detail::add(acc[j][k], acc[j - 1][k]);
        acc[j - 1][k] = Vec{};
      }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < size_ilp; ++i)
    for (int k = 0; k < 4; ++k) detail::add(acc[0][k], load(i * 4 + k));
  for (int j = 1; j < kLevels; ++j)
    for (int k = 0; k < 4; ++k) detail::add(acc[0][k], acc[j][k]);
  // row_sum: leftover vectors into partial 0, then partials 1..3
  for (int64_t v = size_ilp * 4; v < nvec; ++v) detail::add(acc[0][0], load(v));
  for (int k = 1; k < 4; ++k) detail::add(acc[0][0], acc[0][k]);
  // vectorized_inner_sum: scalar tail from 0, then the lanes in order
  float total = 0.0f;
  for (int64_t k = nvec * kLanes; k < n; ++k) total += f(k);
  for (int l = 0; l < kLanes; ++l) total += acc[0][0][l];
  return total;
}

}  // namespace stave::ref::torch_order
