// The CPU's fast linear layer (stave::cpu::linear) against its oracles, at every instruction-set
// level this machine has (capped by STAVE_CPU_ISA): ref::linear, and an exact double-precision
// sum over the oracle's own operands (mxfp4::qdq_row for the W4A4 activation,
// ref::weight_row_f32 for the weight). The activation quantizers of the W4A4 kernels are held
// bit for bit to mxfp4::quantize_block. The AMX-BF16 kernel (bf16 weights, M ≥ 16, level amx)
// has its own bound (activation split into bf16 hi + lo), an exact-integer test, and runs its
// driver (linear/bf16_tile_gemm.h) with emulated tiles on CPUs without AMX. The AVX-512-BF16
// W4A4 kernel is tested directly at every M (it is no longer dispatched); the register-blocked
// VNNI W4A4 kernel directly and through the dispatch from 16 rows (asserted by its counter),
// and its AVX2 analogue (vpmaddubsw, level avx2) the same way.
// The AMX-BF16 W4A4 kernel (MXFP4, M ≥ 16, level amx): its operand expansions bit for bit, its
// driver (linear/w4a4_tile_gemm.h) with emulated tiles on any CPU with AVX-512, and the real
// kernel directly and through the dispatch (counter) on the Clef shapes where AMX exists.
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/cpu_linear.h"
#include "backends/cpu/linear/bf16_tile_gemm.h"
#include "backends/cpu/linear/kernels.h"
#include "backends/cpu/linear/w4a4_tile_gemm.h"
#include "ops/reference.h"
#include "formats/mxfp4.h"
#include "stave/errors.h"
#include "test_env.h"
#include "util/bf16.h"

namespace stave {
namespace {

using cpu::Isa;

// Levels to test: every level up to the one in force when the suite starts (the detected
// level, lowered by STAVE_CPU_ISA), so `STAVE_CPU_ISA=avx2 stave_tests` skips AVX-512 and AMX.
std::vector<Isa> levels() {
  std::vector<Isa> out;
  for (int l = 0; l <= static_cast<int>(cpu::active_isa()); ++l) out.push_back(static_cast<Isa>(l));
  return out;
}

enum class Kind { kF32, kBF16, kF16, kW4A16, kW4A4Even, kW4A4Floor, kW4A4Ceil };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kF32: return "f32";
    case Kind::kBF16: return "bf16";
    case Kind::kF16: return "f16";
    case Kind::kW4A16: return "mxfp4-w4a16";
    case Kind::kW4A4Even: return "mxfp4-w4a4-even";
    case Kind::kW4A4Floor: return "mxfp4-w4a4-floor";
    case Kind::kW4A4Ceil: return "mxfp4-w4a4-ceil";
  }
  return "?";
}
bool is_w4a4(Kind k) { return k >= Kind::kW4A4Even; }

// A weight of the given kind built from random values, owning its storage.
struct TestWeight {
  std::vector<float> f32;
  std::vector<uint16_t> half;
  std::vector<uint8_t> codes, scales;
  std::vector<float> bias;
  LinearWeight w;
};

TestWeight make_weight(Kind kind, int64_t out, int64_t in, bool with_bias, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 0.05f);
  TestWeight t;
  std::vector<float> v(static_cast<size_t>(out * in));
  for (auto& f : v) f = nd(rng);
  t.w.name = std::string("test.") + kind_name(kind);
  t.w.out = out;
  t.w.in = in;
  switch (kind) {
    case Kind::kF32:
      t.f32 = v;
      t.w.format = WeightFormat::kF32;
      t.w.data = t.f32.data();
      break;
    case Kind::kBF16:
    case Kind::kF16:
      t.half.resize(v.size());
      for (size_t i = 0; i < v.size(); ++i) t.half[i] = kind == Kind::kBF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
      t.w.format = kind == Kind::kBF16 ? WeightFormat::kBF16 : WeightFormat::kF16;
      t.w.data = t.half.data();
      break;
    default: {
      // Quark weight export: quantize each 32-block, pack (low nibble = even column).
      t.codes.assign(static_cast<size_t>(out * in / 2), 0);
      t.scales.assign(static_cast<size_t>(out * in / 32), 0);
      for (int64_t r = 0; r < out; ++r)
        for (int64_t b = 0; b < in / 32; ++b) {
          uint8_t c[32];
          int e = mxfp4::quantize_block(v.data() + r * in + b * 32, 32, c);
          t.scales[r * (in / 32) + b] = mxfp4::export_scale_byte(e);
          for (int j = 0; j < 16; ++j) t.codes[r * (in / 2) + b * 16 + j] = static_cast<uint8_t>(c[2 * j] | (c[2 * j + 1] << 4));
        }
      t.w.format = WeightFormat::kMXFP4;
      t.w.data = t.codes.data();
      t.w.scales = t.scales.data();
      t.w.quantize_input = is_w4a4(kind);
      t.w.input_scale_mode = kind == Kind::kW4A4Floor  ? mxfp4::ScaleMode::kFloor
                             : kind == Kind::kW4A4Ceil ? mxfp4::ScaleMode::kCeil
                                                       : mxfp4::ScaleMode::kEven;
    }
  }
  if (with_bias) {
    t.bias.resize(static_cast<size_t>(out));
    for (auto& b : t.bias) b = nd(rng);
    t.w.bias = t.bias.data();
  }
  return t;
}

std::vector<float> random_activation(int64_t M, int64_t K, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> outlier(0, 99);
  std::vector<float> x(static_cast<size_t>(M * K));
  for (auto& f : x) f = nd(rng) * (outlier(rng) == 0 ? 20.0f : 1.0f);  // some blocks with a large amax
  return x;
}

// The hi / lo split as defined in kernels.h (SplitActivations), in scalar code.
void split_reference(float x, uint16_t& hi, uint16_t& lo) {
  hi = f32_to_bf16(x);
  if (std::isfinite(x) && std::isinf(bf16_to_f32(hi))) hi = static_cast<uint16_t>(f32_bits(x) >> 16);
  const float r = x - bf16_to_f32(hi);
  lo = std::isnan(r) ? 0 : f32_to_bf16(r);
}

// Compares y with ref::linear and with the exact sum. The bounds (u = 2^-24, S = Σ|x_k·w_k|
// over the operands the oracle multiplies, b = bias):
//  - every product the kernels form is exact in fp32 or exact integer (E2M1·E2M1 in W4A4), so
//    the only error is the rounding of the fp32 accumulation: at most (terms summed in one
//    chain + reduction depth) · u · (S + |b|). W4A4 chains hold one term per 32-block (block
//    sums are exact integers): K/32 + 48. Float kernels chain K/8 terms per lane (generic and
//    AVX2; AVX-512 K/16) plus the per-512-column chunk adds: K/8 + K/512 + 48.
//  - ref::linear itself is within K·u·(S + |b|) of exact, so kernel vs ref is within the sum.
//  - The AMX-BF16 path (split_bf16) multiplies the split activation hi + lo (split_reference;
//    |x − hi − lo| ≤ 2^-16·|x|) exactly and sums 2·Kp terms (Kp = K rounded up to 32) plus the
//    bias in one fp32 chain. Against the exact sum over hi + lo it is held to
//    min((2·Kp + 2)·u·(S + |b|)·(1 + 2^-7), 4e-6·(S + |b|)): the first is rigorous but grows
//    with K; the second is ~6× the largest accumulation error seen with emulated tiles (6e-7·S), and ~5× below what
//    an activation that lost its lo half would give (~2^-10·S/√K at K = 3072). Against the
//    exact sum over x add 2^-16·S; against ref::linear add (K + 2)·u·(S + |b|) more.
//  - The AVX-512-BF16 W4A4 kernel (w4a4_bf16) multiplies the same QDQ'd operands exactly (as
//    bf16) but chains all K products per output in fp32 (no exact block sums): K + 48 terms.
void check_against_oracles(const TestWeight& t, Kind kind, const float* x, int64_t M, const std::vector<float>& y,
                           const std::string& where, bool split_bf16 = false, bool w4a4_bf16 = false) {
  const LinearWeight& w = t.w;
  const int64_t K = w.in, N = w.out;
  std::vector<float> yref(static_cast<size_t>(M * N));
  ref::linear(w, x, M, yref.data());
  std::vector<float> xin(x, x + M * K), xsplit;
  if (is_w4a4(kind))
    for (int64_t m = 0; m < M; ++m) mxfp4::qdq_row(x + m * K, K, xin.data() + m * K, w.input_scale_mode);
  if (split_bf16) {
    xsplit.resize(xin.size());
    for (size_t i = 0; i < xin.size(); ++i) {
      uint16_t hi, lo;
      split_reference(xin[i], hi, lo);
      xsplit[i] = bf16_to_f32(hi) + bf16_to_f32(lo);  // exact in fp32 for finite x
    }
  }
  std::vector<float> wrow(static_cast<size_t>(K));
  const double u = std::ldexp(1.0, -24);
  const double chain = w4a4_bf16 ? K + 48.0 : is_w4a4(kind) ? K / 32.0 + 48 : K / 8.0 + K / 512.0 + 48;
  int failures = 0;
  for (int64_t n = 0; n < N && failures < 5; ++n) {
    ref::weight_row_f32(w, n, wrow.data());
    const double b = w.bias ? w.bias[n] : 0.0;
    for (int64_t m = 0; m < M && failures < 5; ++m) {
      double exact = b, s = std::fabs(b), exact_split = b;
      for (int64_t k = 0; k < K; ++k) {
        double p = static_cast<double>(xin[m * K + k]) * wrow[k];
        exact += p;
        s += std::fabs(p);
        if (split_bf16) exact_split += static_cast<double>(xsplit[m * K + k]) * wrow[k];
      }
      const double got = y[m * N + n];
      double tol_exact = chain * u * s + 1e-37;
      double tol_ref = (chain + K + 2) * u * s + 1e-37;
      bool ok = true;
      std::string split_msg;
      if (split_bf16) {
        const double kp = std::ceil(K / 32.0) * 32.0;
        const double tol_split = std::min((2 * kp + 2) * u * s * (1 + 1.0 / 128), 4e-6 * s) + 1e-37;
        tol_exact = tol_split + std::ldexp(s, -16);
        tol_ref = tol_exact + (K + 2) * u * s;
        ok = std::fabs(got - exact_split) <= tol_split;
        split_msg = ", exact over hi+lo " + std::to_string(exact_split) + " (tol " + std::to_string(tol_split) + ")";
      }
      if (!ok || !(std::fabs(got - exact) <= tol_exact) || !(std::fabs(got - yref[m * N + n]) <= tol_ref)) {
        ++failures;
        ADD_FAILURE() << where << " y[" << m << "," << n << "] = " << got << ", exact " << exact << " (tol "
                      << tol_exact << "), ref " << yref[m * N + n] << " (tol " << tol_ref << ")" << split_msg;
      }
    }
  }
}

// Whether cpu::linear at this level takes the AMX-BF16 kernel (the dispatch rule under test).
bool takes_amx_bf16(Isa isa, Kind kind, int64_t M) { return isa == Isa::kAmx && kind == Kind::kBF16 && M >= 16; }
// The AVX-512-BF16 hi + lo kernel for bf16 weights and the AVX-512-BF16 W4A4 kernel are not
// dispatched (kernels.h says why).
bool takes_bf16_split(Isa, Kind, int64_t) { return false; }
bool takes_w4a4_bf16(Isa, Kind, int64_t) { return false; }
// Whether it takes the register-blocked VNNI W4A4 kernel (level avx512 from kW4A4VnniMinRows; at
// amx the same below kW4A4AmxBf16MinRows, from where the AMX kernels take over).
bool takes_w4a4_vnni(Isa isa, Kind kind, int64_t M) {
  const bool level = isa == Isa::kAvx512 || (isa == Isa::kAmx && M < cpu::kern::kW4A4AmxBf16MinRows);
  return level && is_w4a4(kind) && M >= cpu::kern::kW4A4VnniMinRows;
}
// Whether it takes the register-blocked AVX2 W4A4 kernel (level avx2 only: avx512 and amx have
// their own prefill kernels).
bool takes_w4a4_maddubs(Isa isa, Kind kind, int64_t M) {
  return isa == Isa::kAvx2 && is_w4a4(kind) && M >= cpu::kern::kW4A4MaddubsMinRows;
}
// Whether it takes the AMX-BF16 W4A4 kernel (level amx; same numerics as the AVX-512-BF16 one).
bool takes_w4a4_amx_bf16(Isa isa, Kind kind, int64_t M) {
  return isa == Isa::kAmx && is_w4a4(kind) && M >= cpu::kern::kW4A4AmxBf16MinRows &&
         cpu::kern::w4a4_amx_bf16_enabled();
}

TEST(CpuFeatures, ParsesAndClampsLevels) {
  EXPECT_EQ(cpu::parse_isa("generic"), Isa::kGeneric);
  EXPECT_EQ(cpu::parse_isa("avx2"), Isa::kAvx2);
  EXPECT_EQ(cpu::parse_isa("avx512"), Isa::kAvx512);
  EXPECT_EQ(cpu::parse_isa("amx"), Isa::kAmx);
  EXPECT_THROW(cpu::parse_isa("sse9"), Error);
  {
    cpu::ScopedIsa all(Isa::kAmx);  // never above what the CPU has
    EXPECT_EQ(cpu::active_isa(), cpu::detected_isa());
  }
  {
    cpu::ScopedIsa low(Isa::kGeneric);
    EXPECT_EQ(cpu::active_isa(), Isa::kGeneric);
  }
  std::printf("[ CPU ISA  ] detected %s, testing up to %s\n", cpu::isa_name(cpu::detected_isa()),
              cpu::isa_name(cpu::active_isa()));
}

TEST(CpuLinear, MatchesReferenceEveryFormatAndLevel) {
  const int64_t Ms[] = {1, 2, 7, 16, 33, 64, 130};
  const int64_t Ns[] = {53, 7, 100, 150};          // none a multiple of the 48-row tiles
  const int64_t Ks[] = {32, 544, 96, 2080, 1056};  // multiples of 32 up to a few thousand
  const Kind kinds[] = {Kind::kF32,      Kind::kBF16,      Kind::kF16,     Kind::kW4A16,
                        Kind::kW4A4Even, Kind::kW4A4Floor, Kind::kW4A4Ceil};
  std::mt19937 rng(1234);
  int cases = 0;
  for (size_t mi = 0; mi < std::size(Ms); ++mi)
    for (Kind kind : kinds) {
      const int64_t M = Ms[mi], N = Ns[(mi + static_cast<int>(kind)) % std::size(Ns)];
      const int64_t K = Ks[(mi * 3 + static_cast<int>(kind)) % std::size(Ks)];
      const bool bias = (mi + static_cast<int>(kind)) % 2 == 0;
      TestWeight t = make_weight(kind, N, K, bias, rng);
      std::vector<float> x = random_activation(M, K, rng);
      for (Isa isa : levels()) {
        cpu::ScopedIsa scoped(isa);
        std::vector<float> y(static_cast<size_t>(M * N), NAN);
        const bool amx = takes_amx_bf16(isa, kind, M);
        const std::string where = std::string(cpu::isa_name(isa)) + " " + kind_name(kind) + " M=" + std::to_string(M) +
                                  " N=" + std::to_string(N) + " K=" + std::to_string(K) + (bias ? " +bias" : "");
        const bool w4a4_bf16 = takes_w4a4_bf16(isa, kind, M), split = takes_bf16_split(isa, kind, M);
        const uint64_t before = cpu::kern::amx_bf16_calls(), before_w4a4 = cpu::kern::w4a4_bf16_calls();
        const uint64_t before_split = cpu::kern::bf16_split_calls();
        const bool w4a4_amx = takes_w4a4_amx_bf16(isa, kind, M);
        const uint64_t before_w4a4_amx = cpu::kern::w4a4_amx_bf16_calls();
        const uint64_t before_vnni = cpu::kern::w4a4_vnni_calls();
        const uint64_t before_maddubs = cpu::kern::w4a4_maddubs_calls();
        // STAVE_TEST_TRACE=1 names each case before it runs, so a crash (seen once at level amx on
        // an AMX host, 2026-12-05) shows which level, format and shape it was.
        if (std::getenv("STAVE_TEST_TRACE")) std::fprintf(stderr, "[ trace ] %s\n", where.c_str());
        cpu::linear(t.w, x.data(), M, y.data());
        EXPECT_EQ(cpu::kern::w4a4_vnni_calls() - before_vnni, takes_w4a4_vnni(isa, kind, M) ? 1u : 0u) << where;
        EXPECT_EQ(cpu::kern::w4a4_maddubs_calls() - before_maddubs, takes_w4a4_maddubs(isa, kind, M) ? 1u : 0u)
            << where;
        EXPECT_EQ(cpu::kern::amx_bf16_calls() - before, amx ? 1u : 0u) << where;
        EXPECT_EQ(cpu::kern::w4a4_bf16_calls() - before_w4a4, w4a4_bf16 ? 1u : 0u) << where;
        EXPECT_EQ(cpu::kern::bf16_split_calls() - before_split, split ? 1u : 0u) << where;
        EXPECT_EQ(cpu::kern::w4a4_amx_bf16_calls() - before_w4a4_amx, w4a4_amx ? 1u : 0u) << where;
        check_against_oracles(t, kind, x.data(), M, y, where, amx || split, w4a4_bf16 || w4a4_amx);
        ++cases;
      }
    }
  EXPECT_GE(cases, 49);
}

TEST(CpuLinear, FloatWeightsWithKNotAMultipleOfTheVectorWidth) {
  std::mt19937 rng(7);
  for (Kind kind : {Kind::kF32, Kind::kBF16, Kind::kF16})
    for (int64_t K : {1, 37, 531}) {
      TestWeight t = make_weight(kind, 19, K, true, rng);
      std::vector<float> x = random_activation(5, K, rng);
      for (Isa isa : levels()) {
        cpu::ScopedIsa scoped(isa);
        std::vector<float> y(5 * 19, NAN);
        const uint64_t before = cpu::kern::amx_bf16_calls();
        cpu::linear(t.w, x.data(), 5, y.data());
        EXPECT_EQ(cpu::kern::amx_bf16_calls(), before) << "M = 5 is below the AMX threshold";
        check_against_oracles(t, kind, x.data(), 5, y,
                              std::string(cpu::isa_name(isa)) + " " + kind_name(kind) + " K=" + std::to_string(K));
      }
    }
}

TEST(CpuLinear, LargeShapeW4A4AndBf16) {
  // One prefill-sized product per path (AMX engages at M >= 16 on CPUs that have it).
  std::mt19937 rng(99);
  for (Kind kind : {Kind::kW4A4Even, Kind::kBF16}) {
    TestWeight t = make_weight(kind, 97, 3072, false, rng);
    std::vector<float> x = random_activation(70, 3072, rng);
    for (Isa isa : levels()) {
      cpu::ScopedIsa scoped(isa);
      std::vector<float> y(70 * 97, NAN);
      const bool amx = takes_amx_bf16(isa, kind, 70), w4a4_bf16 = takes_w4a4_bf16(isa, kind, 70);
      const bool split = takes_bf16_split(isa, kind, 70);
      const uint64_t before = cpu::kern::amx_bf16_calls(), before_w4a4 = cpu::kern::w4a4_bf16_calls();
      const uint64_t before_split = cpu::kern::bf16_split_calls();
      const bool w4a4_amx = takes_w4a4_amx_bf16(isa, kind, 70);
      const uint64_t before_w4a4_amx = cpu::kern::w4a4_amx_bf16_calls();
      const uint64_t before_vnni = cpu::kern::w4a4_vnni_calls();
      const uint64_t before_maddubs = cpu::kern::w4a4_maddubs_calls();
      cpu::linear(t.w, x.data(), 70, y.data());
      EXPECT_EQ(cpu::kern::w4a4_vnni_calls() - before_vnni, takes_w4a4_vnni(isa, kind, 70) ? 1u : 0u)
          << cpu::isa_name(isa) << " " << kind_name(kind);
      EXPECT_EQ(cpu::kern::w4a4_maddubs_calls() - before_maddubs, takes_w4a4_maddubs(isa, kind, 70) ? 1u : 0u)
          << cpu::isa_name(isa) << " " << kind_name(kind);
      EXPECT_EQ(cpu::kern::amx_bf16_calls() - before, amx ? 1u : 0u) << cpu::isa_name(isa) << " " << kind_name(kind);
      EXPECT_EQ(cpu::kern::w4a4_bf16_calls() - before_w4a4, w4a4_bf16 ? 1u : 0u) << cpu::isa_name(isa);
      EXPECT_EQ(cpu::kern::bf16_split_calls() - before_split, split ? 1u : 0u) << cpu::isa_name(isa);
      EXPECT_EQ(cpu::kern::w4a4_amx_bf16_calls() - before_w4a4_amx, w4a4_amx ? 1u : 0u) << cpu::isa_name(isa);
      check_against_oracles(t, kind, x.data(), 70, y, std::string(cpu::isa_name(isa)) + " " + kind_name(kind),
                            amx || split, w4a4_bf16 || w4a4_amx);
    }
  }
}

// Decode shapes (M = 1, 2, 5, 8) at the Clef input widths: 4096 (9B hidden: every projection
// from the residual stream and the lm_head), 12288 (9B down_proj), 5120 (27B hidden). Output
// features are cut to a few hundred so the double-precision oracle stays fast; N is not a
// multiple of any micro-tile. BF16 weights must take the streaming kernel (bf16_gemv.h) at
// avx2 and above (amx included: below 16 rows it runs the avx512 one), and never at generic;
// W4A4 weights the VNNI decode kernel (linear_w4a4_gemv_avx512) at avx512 and above.
TEST(CpuLinear, DecodeRowsOnClefWidthsTakeTheStreamingKernel) {
  std::mt19937 rng(2024);
  const int64_t shapes[][2] = {{301, 4096}, {67, 12288}, {130, 5120}};
  for (const auto& s : shapes)
    for (Kind kind : {Kind::kBF16, Kind::kW4A4Even}) {
      TestWeight t = make_weight(kind, s[0], s[1], kind == Kind::kBF16, rng);
      for (int64_t M : {1, 2, 5, 8}) {
        std::vector<float> x = random_activation(M, s[1], rng);
        for (Isa isa : levels()) {
          cpu::ScopedIsa scoped(isa);
          std::vector<float> y(static_cast<size_t>(M * s[0]), NAN);
          const std::string where = std::string(cpu::isa_name(isa)) + " " + kind_name(kind) + " M=" + std::to_string(M) +
                                    " N=" + std::to_string(s[0]) + " K=" + std::to_string(s[1]);
          const uint64_t before = cpu::kern::bf16_gemv_calls(), before_w4a4 = cpu::kern::w4a4_gemv_calls();
          cpu::linear(t.w, x.data(), M, y.data());
          const bool gemv = kind == Kind::kBF16 && isa >= Isa::kAvx2;
          const bool w4a4_gemv = kind == Kind::kW4A4Even && isa >= Isa::kAvx512;
          EXPECT_EQ(cpu::kern::bf16_gemv_calls() - before, gemv ? 1u : 0u) << where;
          EXPECT_EQ(cpu::kern::w4a4_gemv_calls() - before_w4a4, w4a4_gemv ? 1u : 0u) << where;
          check_against_oracles(t, kind, x.data(), M, y, where);
        }
      }
    }
}

// The W4A4 decode kernel forms 2^(byte − 127) from the scale byte by a shift, with byte 0
// (2^-127, subnormal) patched in: weight scale bytes 252, 1 and 0 against tiny activations,
// K = 320 (10 blocks: a partial group of two at the end).
TEST(CpuLinear, W4A4DecodeExtremeWeightScales) {
  if (cpu::active_isa() < Isa::kAvx512) GTEST_SKIP() << "no AVX-512 VNNI on this CPU (or STAVE_CPU_ISA below avx512)";
  std::mt19937 rng(31);
  const int64_t N = 70, K = 320;
  TestWeight t = make_weight(Kind::kW4A4Even, N, K, true, rng);
  for (int64_t r = 0; r < N; ++r) {
    t.scales[r * (K / 32)] = r % 3 == 0 ? 252 : r % 3 == 1 ? 1 : 0;
    t.scales[r * (K / 32) + 9] = r % 2 == 0 ? 0 : 100;  // the partial group's last block
  }
  for (int64_t M : {1, 3, 8}) {
    std::vector<float> x = random_activation(M, K, rng);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < 32; ++k) {
        x[m * K + k] = std::ldexp(x[m * K + k], -120);
        // Against 2^-127 (byte 0) these give terms near 1: a lost subnormal scale would show.
        x[m * K + 9 * 32 + k] = std::ldexp(x[m * K + 9 * 32 + k], 120);
      }
    std::vector<float> y(static_cast<size_t>(M * N), NAN);
    const uint64_t before = cpu::kern::w4a4_gemv_calls();
    cpu::linear(t.w, x.data(), M, y.data());
    EXPECT_EQ(cpu::kern::w4a4_gemv_calls(), before + 1);
    check_against_oracles(t, Kind::kW4A4Even, x.data(), M, y, "decode extreme scales M=" + std::to_string(M));
  }
}

// At M = 1 the decode kernels read one weight row at a time with several accumulators along K
// (4 chunks of 2L columns for BF16, 2 groups of four blocks for W4A4) when the activation row
// fits kGemvSingleRowMaxActivationBytes, and finish the chunks that do not fill the unroll one
// by one: every remainder, the BF16 column tail past the last chunk and W4A4 partial groups;
// K = 12288 (the 9B down_proj) is too wide and must take the multi-row tile. Dispatch asserted.
TEST(CpuLinear, SingleRowDecodeCoversEveryUnrollRemainder) {
  std::mt19937 rng(77);
  const int64_t N = 37;
  for (int64_t K : {32, 64, 96, 160, 224, 288, 416, 480, 544, 4096 + 96, 4096 + 128 + 32, 131, 4096 + 49, 12288})
    for (Kind kind : {Kind::kBF16, Kind::kW4A4Even}) {
      if (kind == Kind::kW4A4Even && K % 32 != 0) continue;  // MXFP4 rows are whole 32-blocks
      TestWeight t = make_weight(kind, N, K, true, rng);
      std::vector<float> x = random_activation(1, K, rng);
      for (Isa isa : levels()) {
        cpu::ScopedIsa scoped(isa);
        std::vector<float> y(N, NAN);
        const std::string where = std::string(cpu::isa_name(isa)) + " " + kind_name(kind) + " M=1 K=" + std::to_string(K);
        const uint64_t before = cpu::kern::bf16_gemv_calls(), before_w4a4 = cpu::kern::w4a4_gemv_calls();
        const uint64_t before_single = cpu::kern::gemv_single_row_calls();
        cpu::linear(t.w, x.data(), 1, y.data());
        const bool gemv = kind == Kind::kBF16 && isa >= Isa::kAvx2;
        const bool w4a4_gemv = kind == Kind::kW4A4Even && isa >= Isa::kAvx512;
        // The activation row as each kernel reads it: fp32 (BF16), 2 bytes per column grouped (W4A4).
        const bool single = (gemv && 4 * K <= cpu::kern::kGemvSingleRowMaxActivationBytes) ||
                            (w4a4_gemv && 2 * K <= cpu::kern::kGemvSingleRowMaxActivationBytes);
        EXPECT_EQ(cpu::kern::bf16_gemv_calls() - before, gemv ? 1u : 0u) << where;
        EXPECT_EQ(cpu::kern::w4a4_gemv_calls() - before_w4a4, w4a4_gemv ? 1u : 0u) << where;
        EXPECT_EQ(cpu::kern::gemv_single_row_calls() - before_single, single ? 1u : 0u) << where;
        if (K == 4096 + 96) {  // a Clef hidden width
          EXPECT_TRUE(single || !(gemv || w4a4_gemv)) << where;
        }
        if (K == 12288) {
          EXPECT_FALSE(single) << where;
        }
        check_against_oracles(t, kind, x.data(), 1, y, where);
      }
    }
}

TEST(CpuLinear, ZeroRowsIsANoOpAndBadShapesAreErrors) {
  std::mt19937 rng(3);
  TestWeight t = make_weight(Kind::kW4A4Even, 8, 64, true, rng);
  for (Isa isa : levels()) {
    cpu::ScopedIsa scoped(isa);
    float sentinel = 42.0f;
    EXPECT_NO_THROW(cpu::linear(t.w, nullptr, 0, &sentinel));
    EXPECT_EQ(sentinel, 42.0f);
  }
  LinearWeight bad = t.w;
  bad.in = 48;  // not a whole number of MXFP4 blocks
  std::vector<float> x(48), y(8);
  EXPECT_THROW(cpu::linear(bad, x.data(), 1, y.data()), Error);
  LinearWeight unbound = t.w;
  unbound.data = nullptr;
  EXPECT_THROW(cpu::linear(unbound, x.data(), 1, y.data()), Error);
}

// Values that probe every rounding decision of the quantizer: zeros of both signs, exact ties
// of the E2M1 grid at random scales, huge and subnormal magnitudes, and plain random blocks.
std::vector<float> quantizer_probe(std::mt19937& rng, int64_t rows, int64_t K) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 9), ex(-60, 60);
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 0.5f, 1.5f, 3.0f, 6.0f, 4.0f};
  std::vector<float> x(static_cast<size_t>(rows * K));
  for (int64_t b = 0; b < rows * K / 32; ++b) {
    float* xb = x.data() + b * 32;
    const int kind = pick(rng);
    const float scale = std::ldexp(1.0f, ex(rng));
    for (int i = 0; i < 32; ++i) {
      float v;
      switch (kind) {
        case 0: v = i % 3 == 0 ? -0.0f : 0.0f; break;                                   // all-zero block
        case 1: v = (i == 0 ? 6.0f : ties[i % 12] * (i % 2 ? -1.0f : 1.0f)) * scale; break;  // ties, amax 6
        case 2: v = (i == 0 ? 7.0f : ties[i % 12] * (i % 2 ? -1.0f : 1.0f)) * scale; break;  // ties, amax 7
        case 3: v = nd(rng) * 1e37f * (i == 5 ? 30.0f : 1.0f); break;                      // huge, up to ~FLT_MAX
        case 4: v = i == 1 ? FLT_MAX : (i == 2 ? -FLT_MAX : nd(rng)); break;
        case 5: v = nd(rng) * 1e-40f; break;                                              // subnormal
        case 6: v = nd(rng) * 1e-30f * (i % 4 == 0 ? 0.0f : 1.0f); break;                 // tiny, zeros
        default: v = nd(rng) * scale; break;
      }
      xb[i] = v;
    }
  }
  return x;
}

TEST(CpuLinear, ActivationQuantizersAreBitExact) {
  using Quantizer = void (*)(const float*, int64_t, int64_t, mxfp4::ScaleMode, int64_t, cpu::kern::QuantizedActivations&);
  std::vector<std::pair<const char*, Quantizer>> quantizers = {{"generic", cpu::kern::quantize_activations_generic}};
  if (cpu::active_isa() >= Isa::kAvx2) quantizers.push_back({"avx2", cpu::kern::quantize_activations_avx2});
  if (cpu::active_isa() >= Isa::kAvx512) quantizers.push_back({"avx512", cpu::kern::quantize_activations_avx512});
  std::mt19937 rng(2024);
  const int64_t rows = 9, K = 32 * 40;
  std::vector<float> x = quantizer_probe(rng, rows, K);
  for (auto mode : {mxfp4::ScaleMode::kEven, mxfp4::ScaleMode::kFloor, mxfp4::ScaleMode::kCeil})
    for (auto [name, quantize] : quantizers) {
      cpu::kern::QuantizedActivations q;
      quantize(x.data(), rows, K, mode, 32, q);
      ASSERT_EQ(q.padded_rows, 32);
      int bad = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t b = 0; b < K / 32 && bad < 5; ++b) {
          uint8_t codes[32];
          const int e = mxfp4::quantize_block(x.data() + r * K + b * 32, 32, codes, mode);
          int32_t sum = 0;
          bool same = f32_bits(q.scales[r * q.blocks + b]) == f32_bits(mxfp4::exp2_int(e - 2));
          for (int i = 0; i < 32; ++i) {
            same = same && q.codes[r * K + b * 32 + i] == mxfp4::kE2M1Doubled[codes[i]];
            sum += mxfp4::kE2M1Doubled[codes[i]];
          }
          same = same && q.offsets[r * q.blocks + b] == 12 * sum;
          if (!same) {
            ++bad;
            ADD_FAILURE() << name << " mode " << static_cast<int>(mode) << " row " << r << " block " << b;
          }
        }
      for (int64_t i = rows * K; i < q.padded_rows * K; ++i) ASSERT_EQ(q.codes[i], 0) << name << " padding";
    }
}

// ---- AVX-512-BF16 W4A4 (MXFP4 W4A4, fast precision, level avx512) --------------------------

// The kernel called directly at every M (it is correct for any M), and cpu::linear at level
// avx512 asserted not to take it (the VNNI kernel from kW4A4VnniMinRows rows instead). Random
// shapes (N not a multiple of the 64-column strips, K not of the 256-column chunks) and the Clef
// shapes' K (5120 hidden 27B, 4096 hidden 9B, 17408 MLP 27B) with N kept small for the oracle.
TEST(CpuLinear, W4A4Bf16MatchesReference) {
  if (cpu::active_isa() < Isa::kAvx512) GTEST_SKIP() << "no AVX-512-BF16 on this CPU (or STAVE_CPU_ISA below avx512)";
  cpu::ScopedIsa scoped(Isa::kAvx512);
  struct Case {
    int64_t M, N, K;
    Kind kind;
    bool bias;
  };
  const Case cases[] = {
      {1, 53, 544, Kind::kW4A4Even, true},      {7, 150, 2080, Kind::kW4A4Floor, false},
      {64, 100, 96, Kind::kW4A4Ceil, true},     {300, 67, 544, Kind::kW4A4Even, false},
      {16, 64, 32, Kind::kW4A4Even, true},      {1, 40, 17408, Kind::kW4A4Even, false},
      {7, 33, 17408, Kind::kW4A4Even, true},    {64, 20, 17408, Kind::kW4A4Even, false},
      {300, 70, 4096, Kind::kW4A4Even, true},   {64, 130, 5120, Kind::kW4A4Even, false},
      {7, 129, 4096, Kind::kW4A4Even, false},   {1, 65, 5120, Kind::kW4A4Even, true},
  };
  std::mt19937 rng(27);
  for (const Case& c : cases) {
    TestWeight t = make_weight(c.kind, c.N, c.K, c.bias, rng);
    std::vector<float> x = random_activation(c.M, c.K, rng);
    const std::string where = std::string(kind_name(c.kind)) + " M=" + std::to_string(c.M) + " N=" +
                              std::to_string(c.N) + " K=" + std::to_string(c.K) + (c.bias ? " +bias" : "");
    std::vector<float> y(static_cast<size_t>(c.M * c.N), NAN);
    uint64_t before = cpu::kern::w4a4_bf16_calls();
    ASSERT_TRUE(cpu::kern::linear_w4a4_bf16_avx512(t.w, x.data(), c.M, y.data())) << where;
    EXPECT_EQ(cpu::kern::w4a4_bf16_calls(), before + 1) << where;
    check_against_oracles(t, c.kind, x.data(), c.M, y, "direct " + where, false, true);

    std::fill(y.begin(), y.end(), NAN);
    const bool vnni = c.M >= cpu::kern::kW4A4VnniMinRows;
    before = cpu::kern::w4a4_bf16_calls();
    const uint64_t before_vnni = cpu::kern::w4a4_vnni_calls();
    cpu::linear(t.w, x.data(), c.M, y.data());
    ASSERT_EQ(cpu::kern::w4a4_bf16_calls(), before) << "cpu::linear took the AVX-512-BF16 W4A4 kernel, " << where;
    ASSERT_EQ(cpu::kern::w4a4_vnni_calls() - before_vnni, vnni ? 1u : 0u)
        << "cpu::linear " << (vnni ? "did not take" : "took") << " the VNNI W4A4 kernel, " << where;
    check_against_oracles(t, c.kind, x.data(), c.M, y, "dispatched " + where);
  }
}

// Scale bytes at the ends of E8M0's range (the kernel expands those blocks by fp32
// multiplication below 2, where the exponent add would leave the normal range): 252 (2^125, the
// largest the exponent add takes; 253 and up overflow fp32 already for E2M1 = 6), 1 and 0
// (whose products are denormal or lost, but must not become garbage) on the first block of the
// rows, with that activation block scaled by 2^-120 so the products stay finite.
TEST(CpuLinear, W4A4Bf16ExtremeWeightScales) {
  if (cpu::active_isa() < Isa::kAvx512) GTEST_SKIP() << "no AVX-512-BF16 on this CPU (or STAVE_CPU_ISA below avx512)";
  std::mt19937 rng(29);
  const int64_t M = 20, N = 70, K = 320;
  TestWeight t = make_weight(Kind::kW4A4Even, N, K, true, rng);
  for (int64_t r = 0; r < N; ++r)
    t.scales[r * (K / 32)] = r % 3 == 0 ? 252 : r % 3 == 1 ? 1 : 0;
  std::vector<float> x = random_activation(M, K, rng);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < 32; ++k) x[m * K + k] = std::ldexp(x[m * K + k], -120);
  std::vector<float> y(static_cast<size_t>(M * N), NAN);
  ASSERT_TRUE(cpu::kern::linear_w4a4_bf16_avx512(t.w, x.data(), M, y.data()));
  check_against_oracles(t, Kind::kW4A4Even, x.data(), M, y, "extreme scales", false, true);
}

TEST(CpuLinear, W4A4Bf16TakesOnlyW4A4) {
  if (cpu::active_isa() < Isa::kAvx512) GTEST_SKIP() << "no AVX-512-BF16 on this CPU (or STAVE_CPU_ISA below avx512)";
  std::mt19937 rng(28);
  std::vector<float> x = random_activation(40, 64, rng), y(40 * 9, NAN);
  const uint64_t before = cpu::kern::w4a4_bf16_calls();
  for (Kind kind : {Kind::kBF16, Kind::kW4A16, Kind::kF32}) {
    TestWeight t = make_weight(kind, 9, 64, false, rng);
    EXPECT_FALSE(cpu::kern::linear_w4a4_bf16_avx512(t.w, x.data(), 40, y.data())) << kind_name(kind);
    cpu::ScopedIsa scoped(Isa::kAvx512);
    cpu::linear(t.w, x.data(), 40, y.data());
  }
  EXPECT_EQ(cpu::kern::w4a4_bf16_calls(), before);
  TestWeight t = make_weight(Kind::kW4A4Even, 9, 64, false, rng);
  for (Isa isa : levels()) {
    cpu::ScopedIsa scoped(isa);
    const uint64_t at = cpu::kern::w4a4_bf16_calls();
    cpu::linear(t.w, x.data(), 40, y.data());  // avx512: the VNNI kernel; amx: AMX W4A4
    EXPECT_EQ(cpu::kern::w4a4_bf16_calls(), at) << cpu::isa_name(isa) << ": not dispatched";
  }
}

// ---- AVX-512 VNNI W4A4 prefill kernel (MXFP4 W4A4, fast precision, level avx512) -----------

// linear_w4a4_vnni_avx512 held to the int8 W4A4 bound (exact block dots, K/32 fp32 terms):
// through cpu::linear at level avx512 from kW4A4VnniMinRows rows, with the dispatch asserted by
// its counter, and called directly below that (it is correct for any M). Ragged M (one 16-row
// group short, several, a partial 32-row tile), N not a multiple of the 48-column strips or
// 6-column tiles, K not a multiple of the 128-deep quads or 256-deep chunks (17, 65, 3 blocks),
// and the Clef widths: 4096 -> 12288 (9B MLP up), 12288 -> 4096 (9B down), 5120 and 17408
// (27B), with N cut to a few hundred so the double-precision oracle stays fast.
TEST(CpuLinear, W4A4VnniMatchesReference) {
  if (cpu::active_isa() < Isa::kAvx512) GTEST_SKIP() << "no AVX-512 VNNI on this CPU (or STAVE_CPU_ISA below avx512)";
  cpu::ScopedIsa scoped(Isa::kAvx512);
  struct Case {
    int64_t M, N, K;
    Kind kind;
    bool bias;
  };
  const Case cases[] = {
      {1, 53, 544, Kind::kW4A4Even, true},      {7, 150, 2080, Kind::kW4A4Floor, false},
      {64, 100, 96, Kind::kW4A4Ceil, true},     {300, 67, 544, Kind::kW4A4Even, false},
      {16, 64, 32, Kind::kW4A4Even, true},      {33, 49, 4096, Kind::kW4A4Even, true},
      {100, 97, 5120, Kind::kW4A4Even, false},  {47, 20, 17408, Kind::kW4A4Even, true},
      {33, 770, 4096, Kind::kW4A4Even, false},  {100, 100, 12288, Kind::kW4A4Even, true},
      {16, 1500, 4096, Kind::kW4A4Floor, true}, {65, 150, 12288, Kind::kW4A4Ceil, false},
  };
  std::mt19937 rng(270);
  for (const Case& c : cases) {
    TestWeight t = make_weight(c.kind, c.N, c.K, c.bias, rng);
    std::vector<float> x = random_activation(c.M, c.K, rng);
    const bool dispatched = c.M >= cpu::kern::kW4A4VnniMinRows;
    const std::string where = std::string(dispatched ? "dispatched " : "direct ") + kind_name(c.kind) +
                              " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
                              (c.bias ? " +bias" : "");
    std::vector<float> y(static_cast<size_t>(c.M * c.N), NAN);
    const uint64_t before = cpu::kern::w4a4_vnni_calls();
    if (dispatched)
      cpu::linear(t.w, x.data(), c.M, y.data());
    else
      ASSERT_TRUE(cpu::kern::linear_w4a4_vnni_avx512(t.w, x.data(), c.M, y.data())) << where;
    ASSERT_EQ(cpu::kern::w4a4_vnni_calls(), before + 1) << "the VNNI W4A4 kernel did not run: " << where;
    check_against_oracles(t, c.kind, x.data(), c.M, y, where);
  }
}

// Scale bytes at the ends of E8M0's range on the first block (252, 1, 0: the scale product is
// then near fp32's range ends, 0's weight scale subnormal) against activations scaled by 2^-120
// there, and on the last block of a partial quad (K = 320: 10 blocks) 0 or 100 against
// activations scaled by 2^120, so a lost subnormal scale would show.
struct ExtremeScaleCase {
  static constexpr int64_t M = 40, N = 70, K = 320;
  TestWeight t;
  std::vector<float> x;
};
ExtremeScaleCase extreme_scale_case(uint32_t seed) {
  using C = ExtremeScaleCase;
  std::mt19937 rng(seed);
  ExtremeScaleCase c{make_weight(Kind::kW4A4Even, C::N, C::K, true, rng), {}};
  for (int64_t r = 0; r < C::N; ++r) {
    c.t.scales[r * (C::K / 32)] = r % 3 == 0 ? 252 : r % 3 == 1 ? 1 : 0;
    c.t.scales[r * (C::K / 32) + 9] = r % 2 == 0 ? 0 : 100;
  }
  c.x = random_activation(C::M, C::K, rng);
  for (int64_t m = 0; m < C::M; ++m)
    for (int64_t k = 0; k < 32; ++k) {
      c.x[m * C::K + k] = std::ldexp(c.x[m * C::K + k], -120);
      c.x[m * C::K + 9 * 32 + k] = std::ldexp(c.x[m * C::K + 9 * 32 + k], 120);
    }
  return c;
}

TEST(CpuLinear, W4A4VnniExtremeWeightScales) {
  if (cpu::active_isa() < Isa::kAvx512) GTEST_SKIP() << "no AVX-512 VNNI on this CPU (or STAVE_CPU_ISA below avx512)";
  ExtremeScaleCase c = extreme_scale_case(271);
  std::vector<float> y(static_cast<size_t>(c.M * c.N), NAN);
  ASSERT_TRUE(cpu::kern::linear_w4a4_vnni_avx512(c.t.w, c.x.data(), c.M, y.data()));
  check_against_oracles(c.t, Kind::kW4A4Even, c.x.data(), c.M, y, "vnni extreme scales");
}

// The kernel rescales a micro-tile's block dots by integer shifts when its exponents spread at
// most 18 binades over a 256-deep K chunk, and by cvt + scale product + FMA otherwise; the two
// must give the same bits. Row 20's block 10 is 2^30 larger, so in the 40-row call its 32-row
// tile (rows 0..31) takes the plain path on the second chunk after the shift path on the first,
// while rows 0..31 but 20 computed alone take the shift path there. Column 8's block 3 scale is
// 25 binades up (its 6-column tile takes the plain path on the first chunk in every call); row
// 5's first block is all zeros (scale 2^-129, left out of the exponent range). Each row computed
// alone must match its row of the 40-row call bit for bit, and the 40-row call the oracles.
TEST(CpuLinear, W4A4VnniShiftAndPlainRescaleAgree) {
  if (cpu::active_isa() < Isa::kAvx512) GTEST_SKIP() << "no AVX-512 VNNI on this CPU (or STAVE_CPU_ISA below avx512)";
  std::mt19937 rng(273);
  const int64_t M = 40, N = 70, K = 544, blocks = K / 32;
  TestWeight t = make_weight(Kind::kW4A4Even, N, K, true, rng);
  t.scales[8 * blocks + 3] = static_cast<uint8_t>(t.scales[8 * blocks + 3] + 25);
  std::vector<float> x = random_activation(M, K, rng);
  for (int64_t k = 10 * 32; k < 11 * 32; ++k) x[20 * K + k] = std::ldexp(x[20 * K + k], 30);
  for (int64_t k = 0; k < 32; ++k) x[5 * K + k] = 0.0f;  // an all-zero block (scale 2^-129)
  std::vector<float> y(static_cast<size_t>(M * N), NAN), one(static_cast<size_t>(N), NAN);
  ASSERT_TRUE(cpu::kern::linear_w4a4_vnni_avx512(t.w, x.data(), M, y.data()));
  check_against_oracles(t, Kind::kW4A4Even, x.data(), M, y, "vnni shift/plain");
  for (int64_t m = 0; m < M; ++m) {
    ASSERT_TRUE(cpu::kern::linear_w4a4_vnni_avx512(t.w, x.data() + m * K, 1, one.data()));
    for (int64_t n = 0; n < N; ++n)
      ASSERT_EQ(std::bit_cast<uint32_t>(one[n]), std::bit_cast<uint32_t>(y[m * N + n]))
          << "row " << m << " column " << n << ": alone " << one[n] << ", in the 40-row call " << y[m * N + n];
  }
}

TEST(CpuLinear, W4A4VnniTakesOnlyW4A4) {
  if (cpu::active_isa() < Isa::kAvx512) GTEST_SKIP() << "no AVX-512 VNNI on this CPU (or STAVE_CPU_ISA below avx512)";
  std::mt19937 rng(272);
  std::vector<float> x = random_activation(40, 64, rng), y(40 * 9, NAN);
  const uint64_t before = cpu::kern::w4a4_vnni_calls();
  for (Kind kind : {Kind::kBF16, Kind::kW4A16, Kind::kF32}) {
    TestWeight t = make_weight(kind, 9, 64, false, rng);
    EXPECT_FALSE(cpu::kern::linear_w4a4_vnni_avx512(t.w, x.data(), 40, y.data())) << kind_name(kind);
    cpu::ScopedIsa scoped(Isa::kAvx512);
    cpu::linear(t.w, x.data(), 40, y.data());
  }
  EXPECT_EQ(cpu::kern::w4a4_vnni_calls(), before);
  TestWeight t = make_weight(Kind::kW4A4Even, 9, 64, false, rng);
  static_assert(cpu::kern::kW4A4VnniMinRows <= 16, "16 rows must reach the kernel at level avx512");
  static_assert(cpu::kern::kW4A4AmxBf16MinRows > 40, "40 rows must stay below the AMX-BF16 kernel at level amx");
  std::vector<float> x64 = random_activation(64, 64, rng), y64(64 * 9, NAN);
  for (Isa isa : levels())
    for (int64_t M : {15, 16, 40, 64}) {
      cpu::ScopedIsa scoped(isa);
      const uint64_t at = cpu::kern::w4a4_vnni_calls();
      cpu::linear(t.w, x64.data(), M, y64.data());  // amx: AMX-BF16 from kW4A4AmxBf16MinRows rows, VNNI below
      EXPECT_EQ(cpu::kern::w4a4_vnni_calls() - at, takes_w4a4_vnni(isa, Kind::kW4A4Even, M) ? 1u : 0u)
          << cpu::isa_name(isa) << " M=" << M
          << ": level avx512 takes it from kW4A4VnniMinRows rows; level amx below kW4A4AmxBf16MinRows";
    }
}

// ---- AVX2 W4A4 prefill kernel (MXFP4 W4A4, fast precision, level avx2) --------------------

// linear_w4a4_maddubs_avx2 held to the int8 W4A4 bound (exact block dots, K/32 fp32 terms):
// through cpu::linear at level avx2 from kW4A4MaddubsMinRows rows, with the dispatch asserted by
// its counter, and called directly below that (it is correct for any M). Ragged M (a partial
// 8-row group, an odd number of groups for the 2-group tile), N not a multiple of the 48-column
// strips or 6-column tiles, K not a multiple of the 128-deep quads or 256-deep chunks (17, 65,
// 3, 1 blocks), and the Clef widths: 4096 -> 12288 (9B MLP up), 12288 -> 4096 (9B down), 5120
// and 17408 (27B), with N cut to a few hundred so the double-precision oracle stays fast.
TEST(CpuLinear, W4A4MaddubsMatchesReference) {
  if (cpu::active_isa() < Isa::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU (or STAVE_CPU_ISA below avx2)";
  cpu::ScopedIsa scoped(Isa::kAvx2);
  struct Case {
    int64_t M, N, K;
    Kind kind;
    bool bias;
  };
  const Case cases[] = {
      {1, 53, 544, Kind::kW4A4Even, true},      {7, 150, 2080, Kind::kW4A4Floor, false},
      {64, 100, 96, Kind::kW4A4Ceil, true},     {300, 67, 544, Kind::kW4A4Even, false},
      {16, 64, 32, Kind::kW4A4Even, true},      {33, 49, 4096, Kind::kW4A4Even, true},
      {100, 97, 5120, Kind::kW4A4Even, false},  {47, 20, 17408, Kind::kW4A4Even, true},
      {25, 770, 4096, Kind::kW4A4Even, false},  {100, 100, 12288, Kind::kW4A4Even, true},
      {16, 1500, 4096, Kind::kW4A4Floor, true}, {65, 150, 12288, Kind::kW4A4Ceil, false},
      {9, 13, 160, Kind::kW4A4Even, true},
  };
  std::mt19937 rng(370);
  for (const Case& c : cases) {
    TestWeight t = make_weight(c.kind, c.N, c.K, c.bias, rng);
    std::vector<float> x = random_activation(c.M, c.K, rng);
    const bool dispatched = c.M >= cpu::kern::kW4A4MaddubsMinRows;
    const std::string where = std::string(dispatched ? "dispatched " : "direct ") + kind_name(c.kind) +
                              " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
                              (c.bias ? " +bias" : "");
    std::vector<float> y(static_cast<size_t>(c.M * c.N), NAN);
    const uint64_t before = cpu::kern::w4a4_maddubs_calls();
    if (dispatched)
      cpu::linear(t.w, x.data(), c.M, y.data());
    else
      ASSERT_TRUE(cpu::kern::linear_w4a4_maddubs_avx2(t.w, x.data(), c.M, y.data())) << where;
    ASSERT_EQ(cpu::kern::w4a4_maddubs_calls(), before + 1) << "the AVX2 W4A4 kernel did not run: " << where;
    check_against_oracles(t, c.kind, x.data(), c.M, y, where);
  }
}

// The int16 accumulators at their bound: every code ±6 (doubled ±12) in weight and activation,
// signs chosen so a row's products are all positive (|block dot| = 32·144 = 4608, each int16
// half 16·144 = 2304 plus its −6·Σx start) or its activation codes all one sign (the largest
// |−6·Σx| = 2304 with products of both signs); a wrap or a saturation changes the result by
// far more than the bound.
TEST(CpuLinear, W4A4MaddubsLargestCodes) {
  if (cpu::active_isa() < Isa::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU (or STAVE_CPU_ISA below avx2)";
  const int64_t M = 24, N = 14, K = 256;
  std::mt19937 rng(373);
  TestWeight t = make_weight(Kind::kW4A4Even, N, K, false, rng);
  // Weight row n: code 7 (+6) or 15 (−6) per column by the pattern of row n % 4; scale 2^0.
  auto wsign = [](int64_t n, int64_t k) { return n % 4 == 0 ? 1 : n % 4 == 1 ? -1 : (k % 2 == 0) == (n % 4 == 2) ? 1 : -1; };
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; k += 2) {
      const uint8_t lo = wsign(n, k) > 0 ? 7 : 15, hi = wsign(n, k + 1) > 0 ? 7 : 15;
      t.codes[n * (K / 2) + k / 2] = static_cast<uint8_t>(lo | (hi << 4));
    }
    for (int64_t b = 0; b < K / 32; ++b) t.scales[n * (K / 32) + b] = 127;
  }
  // Activation row m: ±6 everywhere (a block's amax 6 → scale 2^0, codes ±6), signs as row m % 4.
  std::vector<float> x(static_cast<size_t>(M * K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) x[m * K + k] = 6.0f * static_cast<float>(wsign(m, k));
  std::vector<float> y(static_cast<size_t>(M * N), NAN);
  ASSERT_TRUE(cpu::kern::linear_w4a4_maddubs_avx2(t.w, x.data(), M, y.data()));
  check_against_oracles(t, Kind::kW4A4Even, x.data(), M, y, "maddubs largest codes");
  EXPECT_EQ(y[0], 36.0f * K) << "all +6 times all +6";
  EXPECT_EQ(y[1 * N + 0], -36.0f * K) << "all -6 times all +6";
}

// Scale bytes at the ends of E8M0's range, as W4A4VnniExtremeWeightScales.
TEST(CpuLinear, W4A4MaddubsExtremeWeightScales) {
  if (cpu::active_isa() < Isa::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU (or STAVE_CPU_ISA below avx2)";
  ExtremeScaleCase c = extreme_scale_case(371);
  std::vector<float> y(static_cast<size_t>(c.M * c.N), NAN);
  ASSERT_TRUE(cpu::kern::linear_w4a4_maddubs_avx2(c.t.w, c.x.data(), c.M, y.data()));
  check_against_oracles(c.t, Kind::kW4A4Even, c.x.data(), c.M, y, "maddubs extreme scales");
}

TEST(CpuLinear, W4A4MaddubsTakesOnlyW4A4) {
  if (cpu::active_isa() < Isa::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU (or STAVE_CPU_ISA below avx2)";
  std::mt19937 rng(372);
  std::vector<float> x = random_activation(40, 64, rng), y(40 * 9, NAN);
  const uint64_t before = cpu::kern::w4a4_maddubs_calls();
  for (Kind kind : {Kind::kBF16, Kind::kW4A16, Kind::kF32}) {
    TestWeight t = make_weight(kind, 9, 64, false, rng);
    EXPECT_FALSE(cpu::kern::linear_w4a4_maddubs_avx2(t.w, x.data(), 40, y.data())) << kind_name(kind);
    cpu::ScopedIsa scoped(Isa::kAvx2);
    cpu::linear(t.w, x.data(), 40, y.data());
  }
  EXPECT_EQ(cpu::kern::w4a4_maddubs_calls(), before);
  TestWeight t = make_weight(Kind::kW4A4Even, 9, 64, false, rng);
  static_assert(cpu::kern::kW4A4MaddubsMinRows <= 16, "prefill (16 rows) must reach the kernel at level avx2");
  for (Isa isa : levels())
    for (int64_t M : {cpu::kern::kW4A4MaddubsMinRows - 1, cpu::kern::kW4A4MaddubsMinRows, int64_t{40}}) {
      cpu::ScopedIsa scoped(isa);
      const uint64_t at = cpu::kern::w4a4_maddubs_calls();
      cpu::linear(t.w, x.data(), M, y.data());
      EXPECT_EQ(cpu::kern::w4a4_maddubs_calls() - at, isa == Isa::kAvx2 && M >= cpu::kern::kW4A4MaddubsMinRows ? 1u : 0u)
          << cpu::isa_name(isa) << " M=" << M << ": only level avx2 takes it, from kW4A4MaddubsMinRows rows";
    }
}

// The AVX-512-BF16 hi + lo kernel for bf16 weights, called directly at every M and held to the
// AMX-BF16 bound (same numerics); any K (odd, below 32, Clef sizes). cpu::linear must not take
// it (not dispatched; kernels.h).
TEST(CpuLinear, Bf16SplitDpMatchesReference) {
  if (cpu::active_isa() < Isa::kAvx512) GTEST_SKIP() << "no AVX-512-BF16 on this CPU (or STAVE_CPU_ISA below avx512)";
  cpu::ScopedIsa scoped(Isa::kAvx512);
  struct Case {
    int64_t M, N, K;
    bool bias;
  };
  const Case cases[] = {{1, 53, 77, true},    {7, 150, 1000, false}, {64, 100, 33, true},  {300, 67, 544, false},
                        {32, 64, 15, true},   {64, 20, 5120, false}, {33, 40, 4096, true}, {7, 33, 17408, false},
                        {300, 9, 4096, true}, {40, 130, 257, false}};
  std::mt19937 rng(31);
  for (const Case& c : cases) {
    TestWeight t = make_weight(Kind::kBF16, c.N, c.K, c.bias, rng);
    std::vector<float> x = random_activation(c.M, c.K, rng);
    const std::string where = "bf16 M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" +
                              std::to_string(c.K) + (c.bias ? " +bias" : "");
    std::vector<float> y(static_cast<size_t>(c.M * c.N), NAN);
    uint64_t before = cpu::kern::bf16_split_calls();
    ASSERT_TRUE(cpu::kern::linear_bf16_split_avx512(t.w, x.data(), c.M, y.data())) << where;
    EXPECT_EQ(cpu::kern::bf16_split_calls(), before + 1) << where;
    check_against_oracles(t, Kind::kBF16, x.data(), c.M, y, "direct " + where, true);

    before = cpu::kern::bf16_split_calls();
    cpu::linear(t.w, x.data(), c.M, y.data());
    ASSERT_EQ(cpu::kern::bf16_split_calls(), before) << "cpu::linear took the hi + lo kernel, " << where;
  }
}

// ---- AMX-BF16 (bf16 weights, M >= 16, level amx) ------------------------------------------

// Element (row r, column k, part 0 = hi / 1 = lo) of a SplitActivations, from the layout comment.
uint16_t split_at(const cpu::kern::SplitActivations& s, int64_t r, int64_t k, int part) {
  return s.block(r / 32, k / 32)[part * 1024 + ((r % 32) / 16) * 512 + ((k % 32) / 2) * 32 + (r % 16) * 2 + k % 2];
}

TEST(CpuLinear, Bf16SplitMatchesItsDefinition) {
  if (cpu::active_isa() < Isa::kAvx512) GTEST_SKIP() << "the split needs AVX-512 (BF16)";
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-90, 90);
  for (auto [M, K] : {std::pair<int64_t, int64_t>{37, 77}, {16, 32}, {1, 1}, {64, 1000}, {33, 15}}) {
    std::vector<float> x(static_cast<size_t>(M * K));
    for (size_t i = 0; i < x.size(); ++i) {
      switch (i % 13) {
        case 0: x[i] = 0.0f; break;
        case 1: x[i] = -0.0f; break;
        case 2: x[i] = FLT_MAX * (i % 2 ? -1.0f : 1.0f); break;                     // rounds to inf: truncated
        case 3: x[i] = f32_from_bits(0x3f808000u | (i % 4 == 3 ? 0x80000000u : 0)); break;  // exact bf16 tie
        case 4: x[i] = f32_from_bits(0x3f818000u); break;                           // tie, odd: rounds up
        case 5: x[i] = i % 3 ? INFINITY : -INFINITY; break;
        case 6: x[i] = NAN; break;
        case 7: x[i] = f32_from_bits(0x7f7f8000u); break;                           // bf16 max + half ulp
        default: x[i] = nd(rng) * std::ldexp(1.0f, ex(rng)); break;                 // normal, residual normal
      }
    }
    cpu::kern::SplitActivations s;
    cpu::kern::split_activations_bf16_avx512(x.data(), M, K, s);
    ASSERT_EQ(s.padded_rows, (M + 31) / 32 * 32);
    ASSERT_EQ(s.ksteps, (K + 31) / 32);
    int bad = 0;
    for (int64_t r = 0; r < s.padded_rows && bad < 5; ++r)
      for (int64_t k = 0; k < s.ksteps * 32 && bad < 5; ++k) {
        uint16_t hi = 0, lo = 0;
        if (r < M && k < K) split_reference(x[r * K + k], hi, lo);
        const uint16_t ghi = split_at(s, r, k, 0), glo = split_at(s, r, k, 1);
        const bool nan = r < M && k < K && std::isnan(x[r * K + k]);
        const bool same = nan ? std::isnan(bf16_to_f32(ghi)) && glo == 0 : ghi == hi && glo == lo;
        if (!same) {
          ++bad;
          ADD_FAILURE() << "M=" << M << " K=" << K << " [" << r << "," << k << "] x=" << (r < M && k < K ? x[r * K + k] : 0.0f)
                        << " hi " << ghi << " (want " << hi << ") lo " << glo << " (want " << lo << ")";
        }
      }
    // Finite inputs: hi + lo is within 2^-16 of x.
    for (int64_t r = 0; r < M; ++r)
      for (int64_t k = 0; k < K; ++k) {
        const float v = x[r * K + k];
        if (!std::isfinite(v)) continue;
        const double sum = static_cast<double>(bf16_to_f32(split_at(s, r, k, 0))) + bf16_to_f32(split_at(s, r, k, 1));
        ASSERT_LE(std::fabs(sum - v), std::ldexp(std::fabs(v), -16)) << v;
      }
  }
}

// tdpbf16ps in scalar code (Intel SDM): C[m][n] += A[m][2k]·B[k][2n] + A[m][2k+1]·B[k][2n+1] in
// fp32, in k order, with denormal inputs read as zero and denormal results flushed to zero.
struct EmulatedBf16Tiles {
  float c[4][16][16];
  float a[2][16][32];
  float b[2][16][32];
  static float daz(uint16_t h) { return (h & 0x7f80u) == 0 ? 0.0f : bf16_to_f32(h); }
  void zero_c() { std::memset(c, 0, sizeof c); }
  void load_c(const float* p) { std::memcpy(c, p, sizeof c); }
  void store_c(float* p) const { std::memcpy(p, c, sizeof c); }
  void load_a(const uint16_t* p, int64_t stride) {
    for (int t = 0; t < 2; ++t)
      for (int r = 0; r < 16; ++r) {
        const uint16_t* row = reinterpret_cast<const uint16_t*>(reinterpret_cast<const char*>(p) + (16 * t + r) * stride);
        for (int e = 0; e < 32; ++e) a[t][r][e] = daz(row[e]);
      }
  }
  void load_b(const uint16_t* p) {
    for (int t = 0; t < 2; ++t)
      for (int r = 0; r < 16; ++r)
        for (int e = 0; e < 32; ++e) b[t][r][e] = daz(p[t * 512 + r * 32 + e]);
  }
  void dp() {
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j)
        for (int m = 0; m < 16; ++m)
          for (int k = 0; k < 16; ++k)
            for (int n = 0; n < 16; ++n) {
              float v = c[2 * i + j][m][n];
              v += a[i][m][2 * k] * b[j][k][2 * n];
              v += a[i][m][2 * k + 1] * b[j][k][2 * n + 1];
              c[2 * i + j][m][n] = std::fpclassify(v) == FP_SUBNORMAL ? 0.0f : v;
            }
  }
};

// The AMX-BF16 product through a given entry point, on the shapes that exercise its edges:
// M padding (16, 17, 33, 64, 130 rows), weight-row edges (N = 1, 15, 33, 200), K tails and
// several K chunks (32, 96, 512, 1000), with and without bias.
template <class Linear>
void bf16_grid(Linear&& run, const std::string& label) {
  std::mt19937 rng(4242);
  int cases = 0;
  for (int64_t M : {16, 17, 33, 64, 130})
    for (int64_t N : {1, 15, 33, 200})
      for (int64_t K : {32, 96, 512, 1000})
        for (bool bias : {false, true}) {
          TestWeight t = make_weight(Kind::kBF16, N, K, bias, rng);
          std::vector<float> x = random_activation(M, K, rng);
          std::vector<float> y(static_cast<size_t>(M * N), NAN);
          run(t.w, x.data(), M, y.data());
          check_against_oracles(t, Kind::kBF16, x.data(), M, y,
                                label + " M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" +
                                    std::to_string(K) + (bias ? " +bias" : ""),
                                true);
          ++cases;
        }
  EXPECT_EQ(cases, 160);
}

// Integer data make every product and partial sum exact in fp32 (|x| ≤ 2^12 so hi + lo = x,
// |w| ≤ 4, K ≤ 1000: |Σ| < 2^24), so the result must equal the exact sum bit for bit: any
// layout, pairing, edge or lo-half mistake shows.
template <class Linear>
void bf16_integer_exact(Linear&& run, const std::string& label) {
  std::mt19937 rng(77);
  std::uniform_int_distribution<int> xi(-4096, 4096), wi(-4, 4), bi(-8, 8);
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{16, 1, 32}, {17, 15, 96}, {33, 33, 1000},
                         {130, 200, 512}, {64, 47, 300}})
    for (bool bias : {false, true}) {
      std::vector<uint16_t> wq(static_cast<size_t>(N * K));
      for (auto& v : wq) v = f32_to_bf16(static_cast<float>(wi(rng)));
      std::vector<float> b(static_cast<size_t>(N)), x(static_cast<size_t>(M * K));
      for (auto& v : b) v = static_cast<float>(bi(rng));
      for (auto& v : x) v = static_cast<float>(xi(rng));
      LinearWeight w;
      w.name = "test.bf16-int";
      w.out = N;
      w.in = K;
      w.format = WeightFormat::kBF16;
      w.data = wq.data();
      if (bias) w.bias = b.data();
      std::vector<float> y(static_cast<size_t>(M * N), NAN);
      run(w, x.data(), M, y.data());
      int bad = 0;
      for (int64_t m = 0; m < M && bad < 5; ++m)
        for (int64_t n = 0; n < N && bad < 5; ++n) {
          double exact = bias ? b[n] : 0.0;
          for (int64_t k = 0; k < K; ++k) exact += static_cast<double>(x[m * K + k]) * bf16_to_f32(wq[n * K + k]);
          if (y[m * N + n] != exact) {
            ++bad;
            ADD_FAILURE() << label << " M=" << M << " N=" << N << " K=" << K << (bias ? " +bias" : "") << " y[" << m
                          << "," << n << "] = " << y[m * N + n] << ", exact " << exact;
          }
        }
    }
}

// The AMX-BF16 driver with the tiles emulated in scalar code: checks the loops, layouts and
// edges of linear/bf16_tile_gemm.h on any CPU with AVX-512 (the split uses it).
void emulated_amx_bf16(const LinearWeight& w, const float* x, int64_t M, float* y) {
  cpu::kern::SplitActivations s;
  cpu::kern::split_activations_bf16_avx512(x, M, w.in, s);
  cpu::kern::bf16_tile_gemm<EmulatedBf16Tiles>(w, s, M, y);
}

TEST(CpuLinear, AmxBf16DriverWithEmulatedTiles) {
  if (cpu::active_isa() < Isa::kAvx512) GTEST_SKIP() << "the split needs AVX-512 (BF16)";
  bf16_grid(emulated_amx_bf16, "emulated amx-bf16");
  bf16_integer_exact(emulated_amx_bf16, "emulated amx-bf16");
}

// The real kernel, reached through cpu::linear at level amx (the counter proves the dispatch).
TEST(CpuLinear, AmxBf16MatchesReference) {
  if (cpu::active_isa() < Isa::kAmx) GTEST_SKIP() << "no AMX on this CPU (or STAVE_CPU_ISA below amx)";
  cpu::ScopedIsa scoped(Isa::kAmx);
  auto through_dispatch = [](const LinearWeight& w, const float* x, int64_t M, float* y) {
    const uint64_t before = cpu::kern::amx_bf16_calls();
    cpu::linear(w, x, M, y);
    ASSERT_EQ(cpu::kern::amx_bf16_calls(), before + 1) << "cpu::linear did not take the AMX-BF16 kernel";
  };
  bf16_grid(through_dispatch, "amx-bf16");
  bf16_integer_exact(through_dispatch, "amx-bf16");
}

TEST(CpuLinear, AmxBf16TakesOnlyBf16WithSixteenRowsOrMore) {
  // linear_amx_bf16 refuses before touching the tile unit, so this runs on any CPU.
  std::mt19937 rng(8);
  TestWeight bf = make_weight(Kind::kBF16, 9, 64, true, rng);
  TestWeight f32 = make_weight(Kind::kF32, 9, 64, true, rng);
  TestWeight f16 = make_weight(Kind::kF16, 9, 64, true, rng);
  TestWeight w4a16 = make_weight(Kind::kW4A16, 9, 64, true, rng);
  std::vector<float> x = random_activation(20, 64, rng), y(20 * 9, NAN);
  const uint64_t before = cpu::kern::amx_bf16_calls();
  EXPECT_FALSE(cpu::kern::linear_amx_bf16(bf.w, x.data(), 15, y.data()));
  EXPECT_FALSE(cpu::kern::linear_amx_bf16(f32.w, x.data(), 20, y.data()));
  EXPECT_FALSE(cpu::kern::linear_amx_bf16(f16.w, x.data(), 20, y.data()));
  EXPECT_FALSE(cpu::kern::linear_amx_bf16(w4a16.w, x.data(), 20, y.data()));
  EXPECT_EQ(cpu::kern::amx_bf16_calls(), before);
  for (float v : y) EXPECT_TRUE(std::isnan(v));  // nothing written
  if (cpu::active_isa() >= Isa::kAmx) {
    cpu::ScopedIsa scoped(Isa::kAmx);
    cpu::linear(bf.w, x.data(), 15, y.data());  // M = 15: the AVX-512 kernel
    EXPECT_EQ(cpu::kern::amx_bf16_calls(), before);
    cpu::linear(f32.w, x.data(), 20, y.data());
    EXPECT_EQ(cpu::kern::amx_bf16_calls(), before);
    cpu::linear(bf.w, x.data(), 16, y.data());
    EXPECT_EQ(cpu::kern::amx_bf16_calls(), before + 1);
  }
  for (Isa isa : levels()) {
    if (isa == Isa::kAmx) continue;
    cpu::ScopedIsa scoped(isa);
    const uint64_t at = cpu::kern::amx_bf16_calls();
    cpu::linear(bf.w, x.data(), 20, y.data());
    EXPECT_EQ(cpu::kern::amx_bf16_calls(), at) << cpu::isa_name(isa);
  }
}

// Integer data are exact on every path (fp32 FMA too), so every level must agree bit for bit.
TEST(CpuLinear, Bf16IntegerDataExactAtEveryLevel) {
  for (Isa isa : levels()) {
    cpu::ScopedIsa scoped(isa);
    bf16_integer_exact([](const LinearWeight& w, const float* x, int64_t M, float* y) { cpu::linear(w, x, M, y); },
                       cpu::isa_name(isa));
  }
}

// ---- AMX-BF16 W4A4 (MXFP4 W4A4, fast precision, M >= 16, level amx) ---------------------

// The two operand expansions of the AMX-BF16 W4A4 kernel, held bit for bit to their
// definitions (kernels.h): the activation in VNNI B-tile blocks equals mxfp4::qdq_row (zeros in
// the padding rows), and each weight A tile holds the weight's values (ref::weight_row_f32)
// row-major, rows ≥ N zero. Scale bytes 2 and 252 (the ends of the exponent-add path) and 253
// (the fp32 path) are included.
TEST(CpuLinear, W4A4AmxOperandExpansionsMatchTheirDefinitions) {
  if (cpu::active_isa() < Isa::kAvx512) GTEST_SKIP() << "the expansions need AVX-512 (BF16)";
  std::mt19937 rng(31);
  const int64_t M = 37, N = 41, K = 96;
  TestWeight t = make_weight(Kind::kW4A4Even, N, K, false, rng);
  for (int64_t r = 0; r < N; r += 5) t.scales[r * (K / 32) + r % 3] = r % 15 == 0 ? 2 : r % 15 == 5 ? 252 : 253;
  std::vector<float> x = random_activation(M, K, rng);
  cpu::kern::QuantizedActivations q;
  cpu::kern::quantize_activations_avx512(x.data(), M, K, t.w.input_scale_mode, 32, q);
  ASSERT_EQ(q.padded_rows, 64);
  std::vector<uint16_t> act(static_cast<size_t>(q.padded_rows * K), 0xffff);
  cpu::kern::activations_to_bf16_avx512(q, act.data());
  std::vector<float> want(static_cast<size_t>(K));
  for (int64_t r = 0; r < q.padded_rows; ++r) {
    if (r < M) mxfp4::qdq_row(x.data() + r * K, K, want.data(), t.w.input_scale_mode);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t at = ((r / 32) * (K / 32) + k / 32) * 1024 + ((r % 32) / 16) * 512 + ((k % 32) / 2) * 32 +
                         (r % 16) * 2 + k % 2;
      ASSERT_EQ(f32_bits(bf16_to_f32(act[at])), f32_bits(r < M ? want[k] : 0.0f)) << "activation [" << r << "," << k << "]";
    }
  }
  std::vector<std::vector<float>> rows(static_cast<size_t>(N), std::vector<float>(static_cast<size_t>(K)));
  for (int64_t n = 0; n < N; ++n) ref::weight_row_f32(t.w, n, rows[n].data());
  uint16_t tile[512];
  for (int64_t n0 = 0; n0 < N; n0 += 16)
    for (int64_t kb = 0; kb < K / 32; ++kb) {
      cpu::kern::expand_mxfp4_bf16_rows_avx512(t.w, n0, kb, tile);
      for (int64_t l = 0; l < 16; ++l)
        for (int64_t c = 0; c < 32; ++c) {
          const float v = n0 + l < N ? rows[n0 + l][kb * 32 + c] : 0.0f;
          ASSERT_EQ(tile[l * 32 + c], static_cast<uint16_t>(f32_bits(v) >> 16))
              << "weight row " << n0 + l << " column " << kb * 32 + c << " (value " << v << ")";
          ASSERT_EQ(f32_bits(v) & 0xffffu, 0u) << "not a bf16 number: " << v;
        }
    }
}

// The AMX-BF16 W4A4 path as the kernel runs it (quantize, expand the activation, the tile
// driver of linear/w4a4_tile_gemm.h) with the tiles emulated in scalar code (EmulatedBf16Tiles).
void emulated_w4a4_amx_bf16(const LinearWeight& w, const float* x, int64_t M, float* y) {
  cpu::kern::QuantizedActivations q;
  cpu::kern::quantize_activations_avx512(x, M, w.in, w.input_scale_mode, 32, q);
  std::vector<uint16_t> act(static_cast<size_t>(q.padded_rows * w.in));
  cpu::kern::activations_to_bf16_avx512(q, act.data());
  cpu::kern::w4a4_tile_gemm<EmulatedBf16Tiles>(w, act.data(), q.padded_rows, M, y);
}

// The shapes that exercise the driver's edges: M padding (1, 16, 17, 33, 64, 100 rows), weight
// blocks past N (N = 1, 15, 33, 53, 300: task groups of 2..8 blocks), one or several 512-column K
// chunks (32, 96, 544, 1056, 4096, 5120), with and without bias, every input scale mode.
struct W4A4AmxCase {
  int64_t M, N, K;
  Kind kind;
  bool bias;
};
constexpr W4A4AmxCase kW4A4AmxGrid[] = {
    {16, 1, 32, Kind::kW4A4Even, true},     {17, 15, 96, Kind::kW4A4Floor, false},
    {33, 33, 544, Kind::kW4A4Ceil, true},   {64, 53, 1056, Kind::kW4A4Even, false},
    {100, 300, 96, Kind::kW4A4Even, true},  {1, 70, 544, Kind::kW4A4Even, false},
    {100, 40, 5120, Kind::kW4A4Even, true}, {64, 33, 4096, Kind::kW4A4Floor, false},
    {7, 300, 1056, Kind::kW4A4Ceil, true},  {48, 200, 32, Kind::kW4A4Even, false},
};

template <class Linear>
void w4a4_amx_grid(Linear&& run, const std::string& label) {
  std::mt19937 rng(4343);
  for (const W4A4AmxCase& c : kW4A4AmxGrid) {
    TestWeight t = make_weight(c.kind, c.N, c.K, c.bias, rng);
    std::vector<float> x = random_activation(c.M, c.K, rng);
    std::vector<float> y(static_cast<size_t>(c.M * c.N), NAN);
    const std::string where = label + " " + kind_name(c.kind) + " M=" + std::to_string(c.M) + " N=" +
                              std::to_string(c.N) + " K=" + std::to_string(c.K) + (c.bias ? " +bias" : "");
    run(t.w, x.data(), c.M, y.data());
    check_against_oracles(t, c.kind, x.data(), c.M, y, where, false, true);
  }
}

// The driver's task plan covers every weight block and activation block exactly once for any
// thread count (the emulated grid runs with this machine's threads only), and keeps M unsplit
// when the weight groups alone fill the threads (each M split expands the weight again).
TEST(CpuLinear, W4A4AmxTilePlanCoversTheOutput) {
  for (int64_t threads : {1, 2, 3, 7, 16, 64})
    for (int64_t N : {1, 15, 33, 300, 1024, 4096, 5120, 6144, 10240, 12288, 17408})
      for (int64_t M : {1, 16, 33, 100, 513, 2048}) {
        const int64_t padded = (M + 31) / 32 * 32;
        const auto p = cpu::kern::w4a4_tile_plan(N, padded, threads);
        const std::string where = "threads=" + std::to_string(threads) + " N=" + std::to_string(N) + " M=" +
                                  std::to_string(M);
        ASSERT_EQ(p.nblocks, (N + 31) / 32) << where;
        ASSERT_EQ(p.mblocks, padded / 32) << where;
        ASSERT_TRUE(p.ng >= 1 && p.ng <= cpu::kern::kW4A4TileNgMax && p.mg >= 1 && p.mg <= cpu::kern::kW4A4TileMgMax)
            << where;
        ASSERT_EQ(p.ngroups, (p.nblocks + p.ng - 1) / p.ng) << where;  // every block in exactly one group
        ASSERT_EQ(p.mgroups, (p.mblocks + p.mg - 1) / p.mg) << where;
        if (p.ngroups >= threads) {
          const int64_t unsplit = (p.mblocks + cpu::kern::kW4A4TileMgMax - 1) / cpu::kern::kW4A4TileMgMax;
          ASSERT_EQ(p.mgroups, unsplit) << where;
        }
      }
}

TEST(CpuLinear, W4A4AmxBf16DriverWithEmulatedTiles) {
  if (cpu::active_isa() < Isa::kAvx512) GTEST_SKIP() << "the operand expansions need AVX-512 (BF16)";
  w4a4_amx_grid(emulated_w4a4_amx_bf16, "emulated amx-bf16 w4a4");
}

// Scale bytes 252, 1 and 0 on the first block of the rows (as W4A4Bf16ExtremeWeightScales):
// terms that tdpbf16ps reads as zero (denormal bf16) are far below the bound; nothing is garbage.
template <class Linear>
void w4a4_extreme_scales(Linear&& run, const std::string& label) {
  std::mt19937 rng(29);
  const int64_t M = 20, N = 70, K = 320;
  TestWeight t = make_weight(Kind::kW4A4Even, N, K, true, rng);
  for (int64_t r = 0; r < N; ++r) t.scales[r * (K / 32)] = r % 3 == 0 ? 252 : r % 3 == 1 ? 1 : 0;
  std::vector<float> x = random_activation(M, K, rng);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < 32; ++k) x[m * K + k] = std::ldexp(x[m * K + k], -120);
  std::vector<float> y(static_cast<size_t>(M * N), NAN);
  run(t.w, x.data(), M, y.data());
  check_against_oracles(t, Kind::kW4A4Even, x.data(), M, y, label + " extreme scales", false, true);
}

TEST(CpuLinear, W4A4AmxBf16ExtremeWeightScalesEmulated) {
  if (cpu::active_isa() < Isa::kAvx512) GTEST_SKIP() << "the operand expansions need AVX-512 (BF16)";
  w4a4_extreme_scales(emulated_w4a4_amx_bf16, "emulated amx-bf16 w4a4");
}

// The real kernel on the AMX host: the grid, extreme scales and the Clef shapes (hidden 4096 /
// 5120 → 1024, M = 64, 100, 513), each through cpu::linear at level amx with the dispatch
// asserted by the kernel's counter (it must run from kW4A4AmxBf16MinRows rows, and not below).
// Of the Clef shapes, rows 0..31 and the last 32..40 rows are checked (the oracles are scalar and
// rows are independent: the first activation block, and the last blocks including M = 100's and
// 513's partial one), so the test stays within seconds.
// The AMX-BF16 W4A4 kernel is the default; STAVE_CPU_W4A4_AMX=int8 picks the AMX-INT8 one.
TEST(CpuLinear, W4A4AmxKernelChoiceIsReadFromTheEnvironment) {
  {
    test::ScopedEnv e("STAVE_CPU_W4A4_AMX", "");
    EXPECT_TRUE(cpu::kern::w4a4_amx_bf16_enabled());
  }
  {
    test::ScopedEnv e("STAVE_CPU_W4A4_AMX", "int8");
    EXPECT_FALSE(cpu::kern::w4a4_amx_bf16_enabled());
  }
  {
    test::ScopedEnv e("STAVE_CPU_W4A4_AMX", "bf16");
    EXPECT_TRUE(cpu::kern::w4a4_amx_bf16_enabled());
  }
  test::ScopedEnv e("STAVE_CPU_W4A4_AMX", "fp8");
  try {
    cpu::kern::w4a4_amx_bf16_enabled();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("STAVE_CPU_W4A4_AMX"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("fp8"), std::string::npos) << err.what();
  }
}

TEST(CpuLinear, W4A4AmxBf16MatchesReference) {
  if (cpu::active_isa() < Isa::kAmx) GTEST_SKIP() << "no AMX on this CPU (or STAVE_CPU_ISA below amx)";
  cpu::ScopedIsa scoped(Isa::kAmx);
  test::ScopedEnv by_default("STAVE_CPU_W4A4_AMX", "");  // the default kernel at level amx
  auto through_dispatch = [](const LinearWeight& w, const float* x, int64_t M, float* y) {
    const uint64_t before = cpu::kern::w4a4_amx_bf16_calls();
    cpu::linear(w, x, M, y);
    const bool expect = M >= cpu::kern::kW4A4AmxBf16MinRows;
    ASSERT_EQ(cpu::kern::w4a4_amx_bf16_calls() - before, expect ? 1u : 0u)
        << "cpu::linear " << (expect ? "did not take" : "took") << " the AMX-BF16 W4A4 kernel at M = " << M;
  };
  auto direct = [](const LinearWeight& w, const float* x, int64_t M, float* y) {
    const uint64_t before = cpu::kern::w4a4_amx_bf16_calls();
    ASSERT_TRUE(cpu::kern::linear_w4a4_amx_bf16(w, x, M, y));
    ASSERT_EQ(cpu::kern::w4a4_amx_bf16_calls(), before + 1);
  };
  w4a4_amx_grid(direct, "amx-bf16 w4a4 direct");
  w4a4_amx_grid(through_dispatch, "amx-bf16 w4a4 dispatched");
  w4a4_extreme_scales(direct, "amx-bf16 w4a4");
  std::mt19937 rng(513);
  for (int64_t K : {4096, 5120})
    for (int64_t M : {64, 100, 513}) {
      TestWeight t = make_weight(Kind::kW4A4Even, 1024, K, K == 5120, rng);
      std::vector<float> x = random_activation(M, K, rng);
      std::vector<float> y(static_cast<size_t>(M * 1024), NAN);
      through_dispatch(t.w, x.data(), M, y.data());
      const std::string where = "amx-bf16 w4a4 Clef " + std::to_string(K) + "->1024 M=" + std::to_string(M);
      const int64_t tail = std::max<int64_t>(32, M - 40);
      for (auto [r0, rows] : {std::pair<int64_t, int64_t>{0, 32}, {tail, M - tail}}) {
        std::vector<float> part(y.begin() + r0 * 1024, y.begin() + (r0 + rows) * 1024);
        check_against_oracles(t, Kind::kW4A4Even, x.data() + r0 * K, rows, part,
                              where + " rows " + std::to_string(r0) + "..", false, true);
      }
    }
}

// The AMX-INT8 W4A4 kernel (what linear_amx runs for W4A4 with STAVE_CPU_W4A4_AMX=int8), called
// directly with its own bound (exact block sums: the W4A4 chain of check_against_oracles).
TEST(CpuLinear, W4A4Int8AmxMatchesReference) {
  if (cpu::active_isa() < Isa::kAmx) GTEST_SKIP() << "no AMX on this CPU (or STAVE_CPU_ISA below amx)";
  std::mt19937 rng(515);
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{16, 33, 96}, {70, 97, 3072}, {33, 300, 544}}) {
    TestWeight t = make_weight(Kind::kW4A4Even, N, K, true, rng);
    std::vector<float> x = random_activation(M, K, rng);
    std::vector<float> y(static_cast<size_t>(M * N), NAN);
    ASSERT_TRUE(cpu::kern::linear_w4a4_int8_amx(t.w, x.data(), M, y.data()));
    check_against_oracles(t, Kind::kW4A4Even, x.data(), M, y, "amx-int8 w4a4 M=" + std::to_string(M));
  }
}

// Both AMX W4A4 entry points refuse other formats (and the int8 one M < 16) before touching the
// tile unit, so this runs on any CPU; below level amx cpu::linear never reaches them.
TEST(CpuLinear, W4A4AmxTakesOnlyW4A4) {
  std::mt19937 rng(516);
  std::vector<float> x = random_activation(40, 64, rng), y(40 * 9, NAN);
  const uint64_t before = cpu::kern::w4a4_amx_bf16_calls();
  for (Kind kind : {Kind::kBF16, Kind::kW4A16, Kind::kF32, Kind::kF16}) {
    TestWeight t = make_weight(kind, 9, 64, false, rng);
    EXPECT_FALSE(cpu::kern::linear_w4a4_amx_bf16(t.w, x.data(), 40, y.data())) << kind_name(kind);
    EXPECT_FALSE(cpu::kern::linear_w4a4_int8_amx(t.w, x.data(), 40, y.data())) << kind_name(kind);
  }
  TestWeight t = make_weight(Kind::kW4A4Even, 9, 64, false, rng);
  EXPECT_FALSE(cpu::kern::linear_w4a4_amx_bf16(t.w, x.data(), 0, y.data()));
  EXPECT_FALSE(cpu::kern::linear_w4a4_int8_amx(t.w, x.data(), 15, y.data()));
  EXPECT_EQ(cpu::kern::w4a4_amx_bf16_calls(), before);
  for (float v : y) EXPECT_TRUE(std::isnan(v));  // nothing written
  for (Isa isa : levels()) {
    if (isa == Isa::kAmx) continue;
    cpu::ScopedIsa scoped(isa);
    cpu::linear(t.w, x.data(), 40, y.data());
    EXPECT_EQ(cpu::kern::w4a4_amx_bf16_calls(), before) << cpu::isa_name(isa);
  }
}

}  // namespace
}  // namespace stave
