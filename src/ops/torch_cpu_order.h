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

// SLEEF's expf (u10, FMA build), which ATen's AVX2 Vectorized<float>::exp() calls: the kernels
// of sigmoid and silu use it for the elements their vectorized loop covers.
inline float sleef_expf(float d) {
  auto pow2i = [](int q) {
    const int32_t bits = (q + 0x7f) << 23;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
  };
  const float R_LN2f = 1.442695040888963407359924681001892137426645954152985934135449406931f;
  const float L2Uf = 0.693145751953125f, L2Lf = 1.428606765330187045e-06f;
  const int q = static_cast<int>(std::nearbyint(d * R_LN2f));
  float s = std::fma(static_cast<float>(q), -L2Uf, d);
  s = std::fma(static_cast<float>(q), -L2Lf, s);
  float u = 0.000198527617612853646278381f;
  u = std::fma(u, s, 0.00139304355252534151077271f);
  u = std::fma(u, s, 0.00833336077630519866943359f);
  u = std::fma(u, s, 0.0416664853692054748535156f);
  u = std::fma(u, s, 0.166666671633720397949219f);
  u = std::fma(u, s, 0.5f);
  u = 1.0f + std::fma(s * s, u, s);
  u = u * pow2i(q >> 1) * pow2i(q - (q >> 1));
  if (d < -104.0f) u = 0.0f;
  if (d > 100.0f) u = HUGE_VALF;
  return u;
}

// Whether ATen's element-wise loop computes element `f` of an iteration of `numel` elements in
// rows of `row_len` contiguous floats with its vector code (else with the scalar std:: code):
// at::parallel_for cuts [0, numel) into ⌈numel / ⌈numel / 32768⌉⌉-sized ranges (16 threads on
// the reference machine, grain 32768), each range runs row segment by row segment, and
// vectorized_loop covers a segment in steps of 16 (two AVX2 vectors), leaving the rest scalar.
inline bool aten_vectorized(int64_t f, int64_t row_len, int64_t numel) {
  constexpr int64_t kGrain = 32768, kThreads = 16, kStep = 16;
  int64_t begin = 0, end = numel;
  if (numel > kGrain) {
    const int64_t tasks = std::min<int64_t>(kThreads, (numel + kGrain - 1) / kGrain);
    const int64_t chunk = (numel + tasks - 1) / tasks;
    begin = f / chunk * chunk;
    end = std::min(numel, begin + chunk);
  }
  const int64_t row = f / row_len;
  const int64_t seg_begin = std::max(begin, row * row_len), seg_end = std::min(end, (row + 1) * row_len);
  const int64_t len = seg_end - seg_begin;
  return f - seg_begin < len - len % kStep;
}

// torch.sigmoid / F.silu on fp32 CPU: 1 / (1 + exp(−x)) and x / (1 + exp(−x)), with SLEEF's exp
// where the kernel is vectorized and libm's where it is not (see aten_vectorized).
inline float sigmoid(float x, bool vectorized) {
  return 1.0f / (1.0f + (vectorized ? sleef_expf(-x) : std::exp(-x)));
}
inline float silu(float x, bool vectorized) { return x / (1.0f + (vectorized ? sleef_expf(-x) : std::exp(-x))); }

// F.softplus (beta 1, threshold 20): x > 20 ? x : log1p(exp(x)). ATen's vectorized kernel uses
// SLEEF's expf and log1pf; log1pf is approximated here by the correctly rounded log1p, which
// agrees with it on 99.75% of probe inputs (docs/numerics.md). The scalar remainder uses libm.
inline float softplus(float x, bool vectorized) {
  if (x > 20.0f) return x;
  if (!vectorized) return std::log1p(std::exp(x));
  return static_cast<float>(std::log1p(static_cast<double>(sleef_expf(x))));
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
