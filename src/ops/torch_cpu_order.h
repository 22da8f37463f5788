// The operation order of the reference (PyTorch 2.11 on x86-64 CPU, fp32: the fixtures' run, see
// docs/numerics.md), reproduced in portable scalar code so that `--precision exact` rounds like
// it does. Each helper names the PyTorch/MKL routine whose order it follows; the probes that
// established them are described in docs/numerics.md. No ISA-specific code: results are the same
// on every x86-64 (the FMAs are explicit std::fma calls, never contracted by the compiler).
#pragma once
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

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

// torch.exp on fp32 CPU tensors. ATen's exp kernel calls vml::vexp, which with MKL is
// vmsExp(n, x, y, VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE); on the reference machine (MKL
// 2024.2, AVX-512) that runs Intel's AVX-512 HA single-precision exp kernel, the algorithm of
// __svml_expf16_ha (the same kernel is in numpy/SVML, linux/avx512/svml_z0_exp_s_ha.s):
//   N = x·log2(e) rounded toward −∞ to 5 fractional bits (an FMA with the shifter 1.5·2^18 in
//       round-to-zero mode: the exact product x·fl(log2 e), floored),  j = 32·N mod 32,
//   R = (x − N·ln2_hi) − N·ln2_lo   (two FMAs, ln2_hi = fl(ln 2)),
//   p = (R + Tlr[j]) + R²·(c2 + c3·R),   exp(x) = 2^⌊N⌋·Th[j] + 2^⌊N⌋·Th[j]·p   (one FMA),
// with Th[j] = 2^(j/32) rounded to float and Tlr[j] = (2^(j/32) − Th[j]) / Th[j] rounded to
// float. Inputs with |x| ≥ 87.33654 (and ±inf) take the kernel's scalar callout, which evaluates
// exp in double and rounds once (here: std::exp in double, rounded to float).
// Established on the reference machine's own results (tools/reference/probe_exp.py: 3.8M pairs,
// uniform in [−24, 0.5] and random bit patterns in (−104, 89), position in the tensor, size and
// thread count irrelevant): bit-identical on all of them, where glibc's expf, libmvec and SLEEF
// are not (torch.exp differs from the correctly rounded exp on 1.07% / 0.42% of the two sets; the
// kernel's error is at most 0.572 ulp). Below the callout threshold this scalar form is bit-equal
// to a transcription of the vector kernel (its round-to-zero FMA emulated with fesetround) on every
// float. tests/data/torch_exp_probe.bin holds a sample of the probe pairs.
inline float exp(float x) {
  constexpr uint32_t kTh[32] = {
      0x3F800000, 0x3F82CD87, 0x3F85AAC3, 0x3F88980F, 0x3F8B95C2, 0x3F8EA43A, 0x3F91C3D3, 0x3F94F4F0,
      0x3F9837F0, 0x3F9B8D3A, 0x3F9EF532, 0x3FA27043, 0x3FA5FED7, 0x3FA9A15B, 0x3FAD583F, 0x3FB123F6,
      0x3FB504F3, 0x3FB8FBAF, 0x3FBD08A4, 0x3FC12C4D, 0x3FC5672A, 0x3FC9B9BE, 0x3FCE248C, 0x3FD2A81E,
      0x3FD744FD, 0x3FDBFBB8, 0x3FE0CCDF, 0x3FE5B907, 0x3FEAC0C7, 0x3FEFE4BA, 0x3FF5257D, 0x3FFA83B3};
  constexpr uint32_t kTlr[32] = {
      0x00000000, 0xB34A3A0A, 0x3346CB6A, 0xB36ED17E, 0xB24E0611, 0xB3517DD9, 0x334B2482, 0xB31586DE,
      0x33092801, 0xB2E6F467, 0x331B85F2, 0x3099B6F1, 0xB3051AA8, 0xB2E2A0DA, 0xB2006C56, 0xB3365942,
      0x329302AE, 0x32C595DC, 0xB302E5A2, 0xB28E10A1, 0x31B3D0E5, 0xB31A472B, 0x31D1DAF2, 0xB305BF64,
      0xB27CE182, 0xB2F26443, 0xB1B4B0DA, 0xB1DA8A8F, 0xB1D290BE, 0xB2D5B899, 0x31B0A147, 0xB2156AFC};
  constexpr float kLog2e = std::bit_cast<float>(0x3FB8AA3Bu);     // 1.44269502
  constexpr float kLn2Hi = std::bit_cast<float>(0x3F317218u);     // 0.693147182
  constexpr float kLn2Lo = std::bit_cast<float>(0xB102E308u);     // −1.90465421e−9
  constexpr float kC2 = std::bit_cast<float>(0x3F0000F6u);        // 0.500014663
  constexpr float kC3 = std::bit_cast<float>(0x3E2AABF3u);        // 0.166671559
  constexpr float kCallout = std::bit_cast<float>(0x42AEAC4Fu);   // 87.3365402
  if (!(std::fabs(x) < kCallout)) {
    if (std::isnan(x)) return x + x;
    const double e = std::exp(static_cast<double>(x));
    if (e > static_cast<double>(std::numeric_limits<float>::max()))  // rounds to FLT_MAX or overflows
      return e < 0x1.ffffffp127 ? std::numeric_limits<float>::max() : std::numeric_limits<float>::infinity();
    return static_cast<float>(e);
  }
  // ⌊32·x·fl(log2 e)⌋: the product of two floats is exact in double, the scaling by 32 too.
  const int n = static_cast<int>(std::floor(static_cast<double>(x) * static_cast<double>(kLog2e) * 32.0));
  const float N = static_cast<float>(n) * 0.03125f;
  const int j = n & 31;
  float r = std::fma(-N, kLn2Hi, x);
  r = std::fma(-N, kLn2Lo, r);
  const float scaled = std::ldexp(std::bit_cast<float>(kTh[j]), n >> 5);  // 2^⌊N⌋·Th[j], a normal float
  const float r2 = r * r;
  const float p23 = std::fma(r, kC3, kC2);
  const float rt = r + std::bit_cast<float>(kTlr[j]);
  const float p = std::fma(p23, r2, rt);
  return std::fma(p, scaled, scaled);
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

// SLEEF's log1pf (u10, FMA build: xlog1pf in sleefsimdsp.c with df.h's FMA double-float ops),
// which ATen's Vectorized<float>::log1p() calls. A scalar transcription: e = ⌊log2((1 + d)/0.75)⌋,
// m = d·2^−e + (2^−e − 1), x = m / (2 + m) in double-float, then
// log1p = e·ln2 + 2x + x³·(c1 + c2·x² + c3·x⁴), the sums kept as (hi, lo) pairs until the end.
inline float sleef_log1pf(float d) {
  if (std::isnan(d) || d < -1.0f) return std::numeric_limits<float>::quiet_NaN();
  if (d == -1.0f) return -std::numeric_limits<float>::infinity();
  if (d > 1e38f) return std::numeric_limits<float>::infinity();
  if (d == 0.0f) return d;  // keeps −0
  float dp1 = d + 1.0f;
  const bool tiny = dp1 < std::numeric_limits<float>::min();
  if (tiny) dp1 *= 18446744073709551616.0f;  // 2^64, as vilogb2k needs a normal input
  int e = static_cast<int>((std::bit_cast<uint32_t>(dp1 * (1.0f / 0.75f)) >> 23) & 0xff) - 0x7f;
  const float t = std::bit_cast<float>(std::bit_cast<uint32_t>(1.0f) + static_cast<uint32_t>(-e << 23));
  const float m = std::fma(d, t, t - 1.0f);
  if (tiny) e -= 64;
  const float fe = static_cast<float>(e);
  // s = (ln2_hi, ln2_lo) · e  (dfmul_vf2_vf2_vf)
  constexpr float kLn2Hi = 0.69314718246459960938f, kLn2Lo = -1.904654323148236017e-09f;
  float sx = kLn2Hi * fe;
  float sy = std::fma(kLn2Lo, fe, std::fma(kLn2Hi, fe, -sx));
  // x = (m, 0) / (2 + m)  (dfadd_vf2_vf_vf, dfdiv_vf2_vf2_vf2)
  const float dx = 2.0f + m;
  const float dy = (2.0f - dx) + m;
  const float rec = 1.0f / dx;
  const float qx = m * rec;
  const float u = std::fma(rec, m, -qx);
  float qy = std::fma(-dy, rec, std::fma(-dx, rec, 1.0f));
  qy = std::fma(qx, qy, std::fma(0.0f, rec, u));
  const float x2 = qx * qx;
  float poly = std::fma(0.3027294874f, x2, 0.3996108174f);
  poly = std::fma(poly, x2, 0.6666694880f);
  // s += 2x  (dfadd_vf2_vf2_vf2), then s += x²·x·poly  (dfadd_vf2_vf2_vf)
  const float ax = 2.0f * qx, ay = 2.0f * qy;
  float rx = sx + ax;
  float ry = (((sx - rx) + ax) + sy) + ay;
  const float w = (x2 * qx) * poly;
  const float rx2 = rx + w;
  const float ry2 = ((rx - rx2) + w) + ry;
  return rx2 + ry2;
}

// F.softplus (beta 1, threshold 20): x > 20 ? x : log1p(exp(x)). ATen's vectorized kernel (AVX2
// dispatch) uses SLEEF's expf and log1pf; the scalar remainder uses libm (see aten_vectorized).
inline float softplus(float x, bool vectorized) {
  if (x > 20.0f) return x;
  if (!vectorized) return std::log1p(std::exp(x));
  return sleef_log1pf(sleef_expf(x));
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
