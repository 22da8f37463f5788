// The operation order of the reference (PyTorch 2.11 on x86-64 CPU, fp32: the fixtures' run, see
// docs/numerics.md), reproduced in portable scalar code so that `--precision exact` rounds like
// it does. Each helper names the PyTorch/MKL routine whose order it follows; the probes that
// established them are described in docs/numerics.md. No ISA-specific code: results are the same
// on every x86-64 (the FMAs are explicit std::fma calls, never contracted by the compiler).
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

// The torch-order kernels round like the reference because every fused step is an explicit
// std::fma and nothing else is contracted (the project builds in ISO C++ mode, so GCC's
// -ffp-contract defaults to off). Without FMA in the target ISA each std::fma is a libm call;
// STAVE_FMA_CLONES gives a hot caller a second, FMA-ISA clone picked at load time. The results
// are the same bits on both clones (fma is correctly rounded either way); only speed differs.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__FMA__)
#define STAVE_FMA_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define STAVE_FMA_CLONES
#endif
// Helpers a STAVE_FMA_CLONES caller must compile into itself (an out-of-line copy keeps the
// default ISA).
#if defined(__GNUC__)
#define STAVE_INLINE_INTO_CALLER inline __attribute__((always_inline))
#else
#define STAVE_INLINE_INTO_CALLER inline
#endif

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

// torch.cos / torch.sin on fp32 CPU tensors (the RoPE tables). ATen hands both to MKL VML
// (vmsCos / vmsSin, VML_HA), whose AVX-512 kernels are Intel's __svml_cosf16_ha /
// __svml_sinf16_ha (numpy/SVML, linux/avx512/svml_z0_{cos,sin}_s_ha.s). For |x| <= 10000:
//   sin: N = fl(fl(|x|·(1/π)) + 1.5·2^23) − 1.5·2^23 (one float FMA: |x|/π to the nearest integer),
//   cos: N = (the same of fl(|x| + fl(π/2))) − 0.5 (cos x = sin(|x| + π/2)),
//   r = (|x| − N·π1) − N·π2 in double (two FMAs, π1 + π2 ≈ π to ~85 bits),
//   sin r ≈ r + r·(r²·(C1 + r²(C2 + r²(C3 + r²·C4)))) in double (Horner FMAs), rounded once to float,
//   sign: the parity of N (the low bit of the shifted sum), and for sin the sign of x.
// The degree-9 minimax polynomial's error (~1e-8 relative) is what makes these differ from the
// correctly rounded cos/sin on a few % of inputs (up to ~0.6 ulp): the double-rounded value is
// not torch's. |x| > 10000 (RoPE angles past 10000 tokens) takes the kernels' large-argument
// path, all in float (svml_sin_large; cos is the same with the table index moved a quarter turn):
//   Payne–Hanek: the 24-bit significand times a 96-bit window of 2/π's bits picked by the exponent
//       (⌊2^(e−56)·2/π⌋ mod 2^96, e the biased exponent), in 16×16-bit partial products whose
//       lowest ones the kernel skips (carries from them are lost: transcribed as is), keeps the
//       64 bits of x/(2π) mod 1 below the point, split into three floats carrying the sign of x;
//   N = that fraction to the nearest 1/256 (shifter 1.5·2^15), the rest times 2π (a float pair,
//       with an FMA for the product's error) is r = R + E, |R| <= π/256;
//   sin(Nπ/128 + r) from a 256-entry table S = Sh + Sl, C = Ch + Cl (sin and cos of Nπ/128,
//       Ch a power of two): (Sh + Ch·R + Cl·R, with both sums' errors) + [(C − Sh·R)·E + Sl +
//       Sh·R²(B2 + B4·R²)] + [(C − Sh·R)·R³(A3 + A5·R²)], float Horner steps.
// Established on the reference machine's torch (tools/reference/probe_cos_sin.py, the recorded
// inputs with 10000 < |x| < 1e6: 20770 random bit patterns, 2316 of 250000 RoPE angles):
// bit-identical on all of them, where the double value rounded once differs on ~1%.
namespace detail {
inline float svml_sin_core(float ax, float n, uint32_t sign) {
  constexpr double kPi1 = std::bit_cast<double>(0x400921fb54440000ull);
  constexpr double kPi2 = std::bit_cast<double>(0x3d968c234c4c6629ull);
  constexpr double kC1 = std::bit_cast<double>(0xbfc55554bc836587ull);
  constexpr double kC2 = std::bit_cast<double>(0x3f8110ed3804ca96ull);
  constexpr double kC3 = std::bit_cast<double>(0xbf29f6ffeea73463ull);
  constexpr double kC4 = std::bit_cast<double>(0x3ec5dbdf0e4c7deeull);
  const double N = n;
  double r = std::fma(-N, kPi1, static_cast<double>(ax));
  r = std::fma(-N, kPi2, r);
  const double r2 = r * r;
  double p = std::fma(r2, kC4, kC3);
  p = std::fma(p, r2, kC2);
  p = std::fma(p, r2, kC1);
  const double q = p * r2;
  const float res = static_cast<float>(std::fma(r, q, r));
  return std::bit_cast<float>(std::bit_cast<uint32_t>(res) ^ sign);
}
constexpr float kSvmlInvPi = std::bit_cast<float>(0x3ea2f983u);   // fl(1/π)
constexpr float kSvmlShifter = std::bit_cast<float>(0x4b400000u); // 1.5·2^23
constexpr float kSvmlLarge = 10000.0f;

// The large path's two tables (__svml_ssin_ha_reduction_data_internal and the first 4096 bytes
// of __svml_ssin_ha_data_internal; the cos kernel's copies are the same, its data table rotated
// by 64 entries), built once from 2/π's bits and the kernel's quarter wave of (Sh, Sl). The rest
// follows by symmetry; Ch is |cos| rounded to a power of two on a log scale (up from a mantissa
// of fl(√2)), Cl = fl(cos − Ch). Rebuilt this way they are the kernel's tables word for word.
struct SvmlLargeTables {
  uint32_t red[256][3];                      // [e]: ⌊2^(e−56)·2/π⌋ mod 2^96, high word first
  float cl[256], sh[256], sl[256], ch[256];  // [j]: the table at Nπ/128 = jπ/128
};
inline const SvmlLargeTables& svml_large_tables() {
  static const SvmlLargeTables t = [] {
    // 2/π's first 224 bits after the point (the kernel's window for e = 254 ends at bit 198).
    constexpr uint32_t kTwoOverPi[7] = {0xa2f9836e, 0x4e441529, 0xfc2757d1, 0xf534ddc0,
                                        0xdb629599, 0x3c439041, 0xfe5163ab};
    // sin(jπ/128) for j = 0..64 as fl(sin) and fl(sin − fl(sin)), from the kernel's table.
    constexpr uint32_t kQuarter[65][2] = {
        {0x00000000, 0x00000000}, {0x3cc90ab0, 0xb005c998}, {0x3d48fb30, 0xb0ef227f}, {0x3d96a905, 0xb1531e61},
        {0x3dc8bd36, 0xb07592f5}, {0x3dfab273, 0xb11568cf}, {0x3e164083, 0x31e8e614}, {0x3e2f10a2, 0x311167f9},
        {0x3e47c5c2, 0xb0e5967d}, {0x3e605c13, 0x31a7e4f6}, {0x3e78cfcc, 0xb11bd41d}, {0x3e888e93, 0x312c7d9e},
        {0x3e94a031, 0x326d59f0}, {0x3ea09ae5, 0xb23e89a0}, {0x3eac7cd4, 0xb2254e02}, {0x3eb8442a, 0xb2705ba6},
        {0x3ec3ef15, 0x31d5d52c}, {0x3ecf7bca, 0x316a3b63}, {0x3edae880, 0x321e15cc}, {0x3ee63375, 0xb1d9c774},
        {0x3ef15aea, 0xb1ff2139}, {0x3efc5d27, 0xb180eca9}, {0x3f039c3d, 0xb25ba002}, {0x3f08f59b, 0xb2be4b4e},
        {0x3f0e39da, 0xb24a32e7}, {0x3f13682a, 0x32cdd12e}, {0x3f187fc0, 0xb1c7a3f3}, {0x3f1d7fd1, 0x3292050c},
        {0x3f226799, 0x322123bb}, {0x3f273656, 0xb2038343}, {0x3f2beb4a, 0xb2b73136}, {0x3f3085bb, 0xb2ae2d32},
        {0x3f3504f3, 0x324fe77a}, {0x3f396842, 0xb2810007}, {0x3f3daef9, 0x319aabec}, {0x3f41d870, 0x32bff977},
        {0x3f45e403, 0x32b15174}, {0x3f49d112, 0x32992640}, {0x3f4d9f02, 0x327e70e8}, {0x3f514d3d, 0x300c4f04},
        {0x3f54db31, 0x3290ea1a}, {0x3f584853, 0xb27d5fc0}, {0x3f5b941a, 0x32232dc8}, {0x3f5ebe05, 0x32c6f953},
        {0x3f61c598, 0xb2e7f425}, {0x3f64aa59, 0x311a08fa}, {0x3f676bd8, 0xb2bc3389}, {0x3f6a09a7, 0xb2eb236c},
        {0x3f6c835e, 0x32f328d4}, {0x3f6ed89e, 0xb29333dc}, {0x3f710908, 0x321ed0dd}, {0x3f731447, 0x32c48e11},
        {0x3f74fa0b, 0xb2939d22}, {0x3f76ba07, 0x326d092c}, {0x3f7853f8, 0xb20db9e5}, {0x3f79c79d, 0x32c64e59},
        {0x3f7b14be, 0x32ff75cb}, {0x3f7c3b28, 0xb231d68b}, {0x3f7d3aac, 0xb0f75ae9}, {0x3f7e1324, 0xb2f1e603},
        {0x3f7ec46d, 0x31f44949}, {0x3f7f4e6d, 0x32d01884}, {0x3f7fb10f, 0x31de5b5f}, {0x3f7fec43, 0x3084cd0d},
        {0x3f800000, 0x00000000}};
    SvmlLargeTables r{};
    auto bit = [&](int k) -> uint32_t {  // bit k after the point of 2/π (k <= 0: the integer part, 0)
      return k < 1 ? 0u : (kTwoOverPi[(k - 1) >> 5] >> (31 - ((k - 1) & 31))) & 1u;
    };
    for (int e = 0; e < 256; ++e)
      for (int w = 0; w < 3; ++w) {
        uint32_t v = 0;
        for (int b = 0; b < 32; ++b) v = (v << 1) | bit(e - 56 - 95 + 32 * w + b);
        r.red[e][w] = v;
      }
    auto sin_pair = [&](int j, float& hi, float& lo) {  // sin(jπ/128), j mod 256
      const int k = j & 127;
      const int q = k <= 64 ? k : 128 - k;
      hi = std::bit_cast<float>(kQuarter[q][0]);
      lo = std::bit_cast<float>(kQuarter[q][1]);
      if (j & 128) hi = -hi, lo = -lo;
      if (hi == 0.0f) hi = 0.0f;  // the table's zeros are +0
      if (lo == 0.0f) lo = 0.0f;
    };
    constexpr float kHalfSqrt2 = std::bit_cast<float>(0x3f3504f3u);  // fl(√2)/2
    for (int j = 0; j < 256; ++j) {
      sin_pair(j, r.sh[j], r.sl[j]);
      float c, cl;
      sin_pair(j + 64, c, cl);
      float ch = 0.0f;
      if (c != 0.0f) {
        int ex;
        const float m = std::frexp(std::fabs(c), &ex);  // m in [0.5, 1)
        ch = std::copysign(std::ldexp(1.0f, m >= kHalfSqrt2 ? ex : ex - 1), c);
      }
      r.ch[j] = ch;
      r.cl[j] = (c - ch) + cl;  // c − ch is exact (Sterbenz): one rounding
    }
    return r;
  }();
  return t;
}

// __svml_sinf16_ha's large-argument path for a finite x (quarter = 0), or __svml_cosf16_ha's
// (quarter = 64: the cos kernel's table is the sin table at N + 64). Every step a float op.
inline float svml_sin_large(float x, uint32_t quarter) {
  const SvmlLargeTables& tab = svml_large_tables();
  const uint32_t ux = std::bit_cast<uint32_t>(x);
  const uint32_t* red = tab.red[(ux >> 23) & 0xff];
  // The kernel's long multiplication, 16-bit limbs: significand m = M1:M0, window a5:...:a0.
  const uint32_t m = (ux & 0x007fffffu) | 0x00800000u;
  const uint32_t M1 = m >> 16, M0 = m & 0xffff;
  const uint32_t a5 = red[0] >> 16, a4 = red[0] & 0xffff, a3 = red[1] >> 16, a2 = red[1] & 0xffff;
  const uint32_t a1 = red[2] >> 16, a0 = red[2] & 0xffff;
  const uint32_t s1 = a1 * M1 + ((a1 * M0) >> 16) + ((a2 * M0) & 0xffff) + ((a0 * M1) >> 16);
  const uint32_t s2 = a2 * M1 + ((a2 * M0) >> 16) + ((a3 * M0) & 0xffff) + (s1 >> 16);
  const uint32_t s3 = a3 * M1 + ((a3 * M0) >> 16) + ((a4 * M0) & 0xffff) + (s2 >> 16);
  const uint32_t s4 = a4 * M1 + ((a4 * M0) >> 16) + ((a5 * M0) & 0xffff) + (s3 >> 16);
  const uint32_t hi = (s4 << 16) + (s3 & 0xffff);  // x/(2π) mod 1: bits 2^−1..2^−32
  const uint32_t lo = (s2 << 16) + (s1 & 0xffff);  //                 bits 2^−33..2^−64
  // Three floats with the sign of x: ±1.f (bits 1-23), ±2^−23·(1.f) and ±2^−46·(1.f) (bits
  // 24-46 and 47-64), the implicit leading ones taken off the last two by a subtraction.
  const uint32_t sign = ux & 0x80000000u;
  const uint32_t k23 = sign ^ 0x34000000u, k46 = sign ^ 0x28800000u;  // ±2^−23, ±2^−46
  const float fhi = std::bit_cast<float>((sign ^ 0x3f800000u) | (hi >> 9));
  const float fmid =
      std::bit_cast<float>(((hi & 0x1ff) << 14) | (lo >> 18) | k23) - std::bit_cast<float>(k23);
  const float flo = std::bit_cast<float>(((lo & 0x3ffff) << 5) | k46) - std::bit_cast<float>(k46);
  constexpr float kShifter = std::bit_cast<float>(0x47400000u);  // 1.5·2^15: rounds to 2^−8
  const float t = fhi + kShifter;
  const float h = fhi - (t - kShifter);
  const uint32_t j = ((std::bit_cast<uint32_t>(t) & 0xff) + quarter) & 0xff;
  const float rh = fmid + h;
  const float rl = (fmid + (h - rh)) + flo;
  // r = (rh + rl)·2π, 2π = kTwoPiHi + kTwoPiLo.
  constexpr float kTwoPiHi = std::bit_cast<float>(0x40c90fdbu);  // fl(2π)
  constexpr float kTwoPiLo = std::bit_cast<float>(0xb43bbd2eu);  // 2π − fl(2π)
  const float R = rh * kTwoPiHi;
  const float E = std::fma(kTwoPiHi, rl, std::fma(kTwoPiLo, rh, std::fma(rh, kTwoPiHi, -R)));
  constexpr float kA3 = std::bit_cast<float>(0xbe2aaaabu);  // sin r − r ≈ r³(A3 + A5·r²)
  constexpr float kA5 = std::bit_cast<float>(0x3c08885cu);
  constexpr float kB2 = std::bit_cast<float>(0xbf000000u);  // cos r − 1 ≈ r²(B2 + B4·r²)
  constexpr float kB4 = std::bit_cast<float>(0x3d2aaa7cu);
  const float Sh = tab.sh[j], Sl = tab.sl[j], Ch = tab.ch[j], Cl = tab.cl[j];
  const float R2 = R * R;
  const float t1 = std::fma(Ch, R, Sh);
  const float e1 = std::fma(Ch, R, Sh - t1);
  const float res_hi = std::fma(R, Cl, t1);
  const float e2 = std::fma(Cl, R, t1 - res_hi);
  const float corr = e2 + e1;
  const float d = std::fma(-Sh, R, Cl + Ch);  // C − S·r: the derivative at Nπ/128
  const float pol_s = std::fma(d, R * (R2 * std::fma(kA5, R2, kA3)), corr);
  const float pol_c = std::fma(Sh, R2 * std::fma(kB4, R2, kB2), std::fma(d, E, Sl));
  return res_hi + (pol_c + pol_s);
}
}  // namespace detail

inline float cos(float x) {
  const float ax = std::fabs(x);
  if (!(ax <= detail::kSvmlLarge)) {
    if (std::isnan(x) || std::isinf(x)) return std::numeric_limits<float>::quiet_NaN();
    return detail::svml_sin_large(x, 64);
  }
  constexpr float kHalfPi = std::bit_cast<float>(0x3fc90fdbu);  // fl(π/2)
  const float t = std::fma(ax + kHalfPi, detail::kSvmlInvPi, detail::kSvmlShifter);
  const uint32_t sign = std::bit_cast<uint32_t>(t) << 31;
  const float n = (t - detail::kSvmlShifter) - 0.5f;
  return detail::svml_sin_core(ax, n, sign);
}

inline float sin(float x) {
  const float ax = std::fabs(x);
  if (!(ax <= detail::kSvmlLarge)) {
    if (std::isnan(x) || std::isinf(x)) return std::numeric_limits<float>::quiet_NaN();
    return detail::svml_sin_large(x, 0);
  }
  const float t = std::fma(ax, detail::kSvmlInvPi, detail::kSvmlShifter);
  const uint32_t sign = (std::bit_cast<uint32_t>(t) << 31) ^ (std::bit_cast<uint32_t>(x) & 0x80000000u);
  const float n = t - detail::kSvmlShifter;
  return detail::svml_sin_core(ax, n, sign);
}

// Whether ATen's element-wise loop computes element `f` of an iteration of `numel` elements in
// rows of `row_len` contiguous floats with its vector code (else with the scalar std:: code):
// at::parallel_for cuts [0, numel) into ⌈numel / tasks⌉-sized ranges (tasks = min(16 threads,
// ⌈numel / grain⌉)), each range runs row segment by row segment, and vectorized_loop covers a
// segment in steps of two vectors, leaving the rest scalar.
// `step` is 16 for kernels registered at AVX2 width (REGISTER_DISPATCH) and 32 for those with an
// AVX-512 kernel (ALSO_REGISTER_AVX512_DISPATCH: sigmoid, softplus); `grain` is the kernel's
// parallel grain (GeLU uses numel / threads above 16384 elements).
inline bool aten_vectorized(int64_t f, int64_t row_len, int64_t numel, int64_t kStep = 16,
                            int64_t kGrain = 32768) {
  constexpr int64_t kThreads = 16;
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

// ---- SLEEF tanhf (u10, FMA build) and ATen's vectorized erf

namespace detail {
// SLEEF's double-float helpers (df.h, ENABLE_FMA_SP branch), scalar.
struct F2 {
  float x, y;
};
inline F2 df_add2(F2 x, float y) {  // dfadd2_vf2_vf2_vf
  F2 r;
  r.x = x.x + y;
  const float v = r.x - x.x;
  r.y = (x.x - (r.x - v)) + (y - v);
  r.y = r.y + x.y;
  return r;
}
inline F2 df_add2(F2 x, F2 y) {  // dfadd2_vf2_vf2_vf2
  F2 r;
  r.x = x.x + y.x;
  const float v = r.x - x.x;
  r.y = (x.x - (r.x - v)) + (y.x - v);
  r.y = r.y + (x.y + y.y);
  return r;
}
inline F2 df_add(float x, F2 y) {  // dfadd_vf2_vf_vf2
  F2 r;
  r.x = x + y.x;
  r.y = ((x - r.x) + y.x) + y.y;
  return r;
}
inline F2 df_add(F2 x, F2 y) {  // dfadd_vf2_vf2_vf2 (|x| >= |y|)
  F2 r;
  r.x = x.x + y.x;
  r.y = (((x.x - r.x) + y.x) + x.y) + y.y;
  return r;
}
inline F2 df_mul(F2 x, float y) {  // dfmul_vf2_vf2_vf
  F2 r;
  r.x = x.x * y;
  r.y = std::fma(x.y, y, std::fma(x.x, y, -r.x));
  return r;
}
inline F2 df_mul(F2 x, F2 y) {  // dfmul_vf2_vf2_vf2
  F2 r;
  r.x = x.x * y.x;
  r.y = std::fma(x.x, y.y, std::fma(x.y, y.x, std::fma(x.x, y.x, -r.x)));
  return r;
}
inline F2 df_squ(F2 x) {  // dfsqu_vf2_vf2
  F2 r;
  r.x = x.x * x.x;
  r.y = std::fma(x.x + x.x, x.y, std::fma(x.x, x.x, -r.x));
  return r;
}
inline F2 df_rec(F2 d) {  // dfrec_vf2_vf2
  F2 q;
  q.x = 1.0f / d.x;
  q.y = q.x * std::fma(-d.y, q.x, std::fma(-d.x, q.x, 1.0f));
  return q;
}
inline F2 df_div(F2 n, F2 d) {  // dfdiv_vf2_vf2_vf2
  const float t = 1.0f / d.x;
  F2 q;
  q.x = n.x * t;
  const float u = std::fma(t, n.x, -q.x);
  q.y = std::fma(-d.y, t, std::fma(-d.x, t, 1.0f));
  q.y = std::fma(q.x, q.y, std::fma(n.y, t, u));
  return q;
}
inline float ldexp2(float d, int e) {  // vldexp2_vf_vf_vi2: d · 2^(e>>1) · 2^(e − (e>>1))
  auto pow2i = [](int q) { return std::bit_cast<float>(static_cast<uint32_t>(q + 0x7f) << 23); };
  return d * pow2i(e >> 1) * pow2i(e - (e >> 1));
}
// expk2f: e^d in double-float.
inline F2 expk2f(F2 d) {
  constexpr float R_LN2f = 1.442695040888963407359924681001892137426645954152985934135449406931f;
  constexpr float L2Uf = 0.693145751953125f, L2Lf = 1.428606765330187045e-06f;
  const float u0 = (d.x + d.y) * R_LN2f;
  const int q = static_cast<int>(std::nearbyint(u0));
  F2 s = df_add2(d, static_cast<float>(q) * -L2Uf);
  s = df_add2(s, static_cast<float>(q) * -L2Lf);
  float u = 0.1980960224e-3f;
  u = std::fma(u, s.x, 0.1394256484e-2f);
  u = std::fma(u, s.x, 0.8333456703e-2f);
  u = std::fma(u, s.x, 0.4166637361e-1f);
  F2 t = df_add2(df_mul(s, u), 0.166666659414234244790680580464e+0f);
  t = df_add2(df_mul(s, t), 0.5f);
  t = df_add2(s, df_mul(df_squ(s), t));
  t = df_add(1.0f, t);
  t.x = ldexp2(t.x, q);
  t.y = ldexp2(t.y, q);
  if (d.x < -104.0f) t = {0.0f, 0.0f};
  return t;
}
}  // namespace detail

// SLEEF's tanhf (u10; xtanhf in sleefsimdsp.c), which ATen's Vectorized<float>::tanh() calls:
// (e^|x| − e^−|x|) / (e^|x| + e^−|x|) in double-float, 1 beyond |x| > 8.664339742, sign of x.
inline float sleef_tanhf(float x) {
  if (std::isnan(x)) return x;
  const float a = std::fabs(x);
  detail::F2 d = detail::expk2f({a, 0.0f});
  const detail::F2 e = detail::df_rec(d);
  d = detail::df_div(detail::df_add(d, detail::F2{-e.x, -e.y}), detail::df_add(d, e));
  float y = d.x + d.y;
  if (a > 8.664339742f || std::isnan(y)) y = 1.0f;
  return std::copysign(y, x);
}

// ATen's Vectorized<float>::erf() (vec256/vec512_float.h): Abramowitz–Stegun 7.1.26 with FMAs,
// t = 1 / (p·|x| + 1), erf = sign(x) · (1 − r(t)·t·exp(−x²)), exp from SLEEF. About 1e-7 off the
// true erf; F.gelu's vector loop uses it, its scalar remainder std::erf.
inline float aten_vec_erf(float x) {
  const float ax = std::fabs(x);
  const float t = 1.0f / std::fma(0.3275911f, ax, 1.0f);
  float r = std::fma(1.061405429f, t, -1.453152027f);
  r = std::fma(r, t, 1.421413741f);
  r = std::fma(r, t, -0.284496736f);
  r = std::fma(r, t, 0.254829592f);
  const float e = sleef_expf(-(x * x));
  const float v = std::fma(-e * t, r, 1.0f);
  return std::signbit(x) ? -v : v;
}

// F.gelu(x) (erf form) on a contiguous fp32 CPU tensor of more than one element: ATen hands it
// to oneDNN (gelu_out_cpu → eltwise_gelu_erf), whose AVX-512 JIT kernel (oneDNN 3.x,
// jit_uni_eltwise_injector gelu_erf_minimax_approx_compute_vector_fwd) evaluates erf(x/√2) by a
// degree-5 minimax polynomial in |x| chosen from 24 intervals by the top bits of |x|, then
// y = (x · (1 + sign(x)·p)) · 0.5. Coefficients from oneDNN's gelu_erf_minimax_polynomial table.
inline float onednn_gelu_erf(float x) {
  static constexpr uint32_t kPol[6][25] = {
      {0xa6f2cb94, 0x32827792, 0x3381cc0c, 0x34523d4a, 0x351ac44d, 0x35f36d88, 0x36ee8229, 0x37b8a3bb, 0x3867a213,
       0x3940033b, 0x3a2a5a1d, 0x3ae35863, 0x3b7828f2, 0x3c08b14b, 0x3c515ed3, 0xbb503236, 0xbd8d8e5e, 0xbe8abcd9,
       0xbf0c19a2, 0xbeccb328, 0x3e176ced, 0x3f470d99, 0x3f7abb28, 0x3f800000, 0x00000000},
      {0x3f4c422a, 0x3f4c421f, 0x3f4c4207, 0x3f4c41cb, 0x3f4c413b, 0x3f4c3fad, 0x3f4c3a2f, 0x3f4c2d40, 0x3f4c146a,
       0x3f4bc341, 0x3f4ad08c, 0x3f48f8cf, 0x3f45fac7, 0x3f404e07, 0x3f3b980f, 0x3f48dff3, 0x3f78b21b, 0x3fbb0704,
       0x40019c32, 0x3fe536d6, 0x3f81331e, 0x3e6c8684, 0x3c98f936, 0x00000000, 0x3f800000},
      {0xb62173f4, 0x3735e4cf, 0x37f2ff89, 0x388c23be, 0x3917535c, 0x39ab2ab0, 0x3a60fadb, 0x3af9b960, 0x3b6e5491,
       0x3c0a4ec5, 0x3ca5aa8c, 0x3d2138d9, 0x3d8737d4, 0x3ddfb660, 0x3e0f27ab, 0x3d94004b, 0xbe0efdeb, 0xbf1d96c3,
       0xbf89db58, 0xbf6d9897, 0xbef69fb8, 0xbdc4f8a8, 0xbbde6422, 0x00000000, 0x00000000},
      {0xbe081a19, 0xbe084570, 0xbe08639b, 0xbe089837, 0xbe08f409, 0xbe09ab95, 0xbe0b66d0, 0xbe0e400a, 0xbe124df8,
       0xbe1bde02, 0xbe2f19c9, 0xbe4931bf, 0xbe685fbc, 0xbe89c95f, 0xbe96cbca, 0xbe8044aa, 0xbe0550f2, 0x3dcfd6a1,
       0x3e94c826, 0x3e79345f, 0x3decec91, 0x3ca46568, 0x3aa1e00a, 0x00000000, 0x00000000},
      {0xba3d61db, 0x39f097a3, 0x3a5845dc, 0x3ab1fa35, 0x3b0cefb8, 0x3b653ab6, 0x3bcae527, 0x3c221712, 0x3c6c5840,
       0x3cc0a703, 0x3d1dcc19, 0x3d63656d, 0x3d955907, 0x3dbf9910, 0x3dd53f69, 0x3db7dcef, 0x3d639ebe, 0xba6ede48,
       0xbd22be69, 0xbd041cf1, 0xbc64f5ab, 0xbb097a32, 0xb8ebf380, 0x00000000, 0x00000000},
      {0x3cb7d80c, 0x3c9b6050, 0x3c978d11, 0x3c92e850, 0x3c8d058b, 0x3c848454, 0x3c6cd623, 0x3c4c824b, 0x3c2a7935,
       0x3be0b390, 0x3b0651ac, 0xbb232f53, 0xbbd42fa0, 0xbc2c5366, 0xbc492c9e, 0xbc2a7aa6, 0xbbd55d04, 0xba823a76,
       0x3b102aa8, 0x3ae25a7e, 0x3a31f792, 0x38b84375, 0x3689bb5a, 0x00000000, 0x00000000}};
  const uint32_t abs_bits = std::bit_cast<uint32_t>(x) & 0x7fffffffu;
  const float ax = std::bit_cast<float>(abs_bits);
  // (|x| bits + idx_bias) >> 21 (arithmetic), clamped to [1, 24]; 23 (erf = 1) beyond rbound.
  int32_t idx = static_cast<int32_t>(abs_bits + 0xc21fffffu) >> 21;
  idx = std::clamp<int32_t>(idx, 1, 24);
  if (std::bit_cast<float>(0x40b15ceeu) < ax) idx = 23;
  float p = std::bit_cast<float>(kPol[5][idx]);
  for (int d = 4; d >= 0; --d) p = std::fma(p, ax, std::bit_cast<float>(kPol[d][idx]));
  p = std::bit_cast<float>(std::bit_cast<uint32_t>(p) ^ (std::bit_cast<uint32_t>(x) & 0x80000000u));
  return (x * (p + 1.0f)) * 0.5f;
}

// F.gelu(x) (erf form) on ATen's own kernel (a one-element tensor): x · 0.5 · (1 + erf(x · √½)).
inline float gelu_erf(float x, bool vectorized) {
  const float k = static_cast<float>(0.70710678118654752440);  // M_SQRT1_2
  return x * 0.5f * (1.0f + (vectorized ? aten_vec_erf(x * k) : std::erf(x * k)));
}

// F.gelu(x, approximate="tanh") (ATen's GeluKernel; oneDNN is not used for the tanh form):
// 0.5 · x · (1 + tanh(β (x + κ x³))), x³ = (x·x)·x; tanh from SLEEF on the vector branch,
// std::tanh on the scalar one.
// GCC builds ATen with floating-point contraction, so x + κ·x³ is one FMA (bit-exact on the
// reference's vision MLP activations only so).
inline float gelu_tanh(float x, bool vectorized) {
  const float kBeta = static_cast<float>(1.41421356237309504880 * 1.12837916709551257390 * 0.5);
  const float kKappa = 0.044715f;
  const float cube = x * x * x;
  const float inner = kBeta * std::fma(kKappa, cube, x);
  return 0.5f * x * (1.0f + (vectorized ? sleef_tanhf(inner) : std::tanh(inner)));
}

// ---- LayerNorm (ATen layer_norm_kernel.cpp + moments_utils.h, AVX2 dispatch, GCC -O2 with
// floating-point contraction: every a·b + c of the kernel is one FMA)

// RowwiseMoments: Welford per 8-float lane over chunks of 16 vectors, chunk results combined by
// a cascade (AddMomentsVec), the scalar tail by plain Welford, then the 8 lanes folded into the
// tail's moments in lane order. Returns the mean and the biased variance.
STAVE_INLINE_INTO_CALLER void aten_rowwise_moments(const float* X, int64_t N, float& mean, float& var) {
  constexpr int W = 8;
  constexpr int64_t kChunk = 16;
  using Lanes = std::array<float, W>;
  const int64_t n = N / W, m = (n + kChunk - 1) / kChunk;
  int64_t depth = 1;  // utils::CeilLog2 (1 for m <= 2)
  if (m > 2) {
    depth = 0;
    for (uint64_t v = static_cast<uint64_t>(m - 1); v; v >>= 1) ++depth;
  }
  std::array<int64_t, 64> m0s{};
  std::array<Lanes, 64> m1s{}, m2s{};
  auto add = [](int64_t m0_add, const Lanes& m1a, const Lanes& m2a, int64_t& m0, Lanes& m1, Lanes& m2) {
    const int64_t total = m0 + m0_add;
    const float c = total == 0 ? 0.0f : static_cast<float>(m0_add) / static_cast<float>(total);
    for (int l = 0; l < W; ++l) {
      const float d = m1a[l] - m1[l];
      m1[l] = std::fma(c, d, m1[l]);
      m2[l] = m2[l] + std::fma(d * d * c, static_cast<float>(m0), m2a[l]);
    }
    m0 = total;
  };
  for (int64_t i = 0; i < m; ++i) {
    const float* P = X + i * kChunk * W;
    const int64_t rows = std::min(kChunk, n - i * kChunk);
    Lanes a1{}, a2{};
    for (int64_t j = 0; j < rows; ++j) {
      const float c = 1.0f / static_cast<float>(j + 1);
      for (int l = 0; l < W; ++l) {
        const float x = P[j * W + l];
        const float d = x - a1[l];
        a1[l] = std::fma(d, c, a1[l]);
        a2[l] = std::fma(d, x - a1[l], a2[l]);
      }
    }
    add(rows, a1, a2, m0s[0], m1s[0], m2s[0]);
    int64_t mask = i + 1;
    for (int64_t j = 1; j < depth && (mask & 1) == 0; ++j) {
      add(m0s[j - 1], m1s[j - 1], m2s[j - 1], m0s[j], m1s[j], m2s[j]);
      m0s[j - 1] = 0;
      m1s[j - 1] = Lanes{};
      m2s[j - 1] = Lanes{};
      mask >>= 1;
    }
  }
  for (int64_t i = 1; i < depth; ++i) add(m0s[i], m1s[i], m2s[i], m0s[0], m1s[0], m2s[0]);
  int64_t m0 = 0;
  float m1 = 0.0f, m2 = 0.0f;
  for (int64_t i = n * W; i < N; ++i) {
    const float x = X[i];
    const float d = x - m1;
    ++m0;
    m1 += d / static_cast<float>(m0);
    m2 = std::fma(d, x - m1, m2);
  }
  for (int l = 0; l < W; ++l) {
    const int64_t total = m0 + n;
    const float c = total == 0 ? 0.0f : static_cast<float>(n) / static_cast<float>(total);
    const float d = m1s[0][l] - m1;
    m1 = std::fma(c, d, m1);
    m2 = m2 + std::fma(d * d * c, static_cast<float>(m0), m2s[0][l]);
    m0 = total;
  }
  mean = m1;
  var = m2 / static_cast<float>(N);
}

// One row of F.layer_norm: rstd = 1/√(var + eps), y = fma((x − mean)·rstd, γ, β).
STAVE_INLINE_INTO_CALLER void aten_layer_norm_row(const float* x, int64_t N, const float* gamma, const float* beta, float eps,
                                float* y) {
  float mean, var;
  aten_rowwise_moments(x, N, mean, var);
  const float rstd = 1.0f / std::sqrt(var + eps);
  for (int64_t j = 0; j < N; ++j)
    y[j] = std::fma((x[j] - mean) * rstd, gamma ? gamma[j] : 1.0f, beta ? beta[j] : 0.0f);
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
