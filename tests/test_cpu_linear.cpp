// The CPU's fast linear layer (stave::cpu::linear) against its oracles, at every instruction-set
// level this machine has (capped by STAVE_CPU_ISA): ref::linear, and an exact double-precision
// sum over the oracle's own operands (mxfp4::qdq_row for the W4A4 activation,
// ref::weight_row_f32 for the weight). The activation quantizers of the W4A4 kernels are held
// bit for bit to mxfp4::quantize_block.
#include <cfloat>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/cpu_linear.h"
#include "backends/cpu/linear/kernels.h"
#include "ops/reference.h"
#include "quant/mxfp4.h"
#include "stave/errors.h"
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

// Compares y with ref::linear and with the exact sum. The bounds (u = 2^-24, S = Σ|x_k·w_k|
// over the operands the oracle multiplies, b = bias):
//  - every product the kernels form is exact in fp32 or exact integer (E2M1·E2M1 in W4A4), so
//    the only error is the rounding of the fp32 accumulation: at most (terms summed in one
//    chain + reduction depth) · u · (S + |b|). W4A4 chains hold one term per 32-block (block
//    sums are exact integers): K/32 + 48. Float kernels chain K/8 terms per lane (generic and
//    AVX2; AVX-512 K/16) plus the per-512-column chunk adds: K/8 + K/512 + 48.
//  - ref::linear itself is within K·u·(S + |b|) of exact, so kernel vs ref is within the sum.
void check_against_oracles(const TestWeight& t, Kind kind, const float* x, int64_t M, const std::vector<float>& y,
                           const std::string& where) {
  const LinearWeight& w = t.w;
  const int64_t K = w.in, N = w.out;
  std::vector<float> yref(static_cast<size_t>(M * N));
  ref::linear(w, x, M, yref.data());
  std::vector<float> xin(x, x + M * K);
  if (is_w4a4(kind))
    for (int64_t m = 0; m < M; ++m) mxfp4::qdq_row(x + m * K, K, xin.data() + m * K, w.input_scale_mode);
  std::vector<float> wrow(static_cast<size_t>(K));
  const double u = std::ldexp(1.0, -24);
  const double chain = is_w4a4(kind) ? K / 32.0 + 48 : K / 8.0 + K / 512.0 + 48;
  int failures = 0;
  for (int64_t n = 0; n < N && failures < 5; ++n) {
    ref::weight_row_f32(w, n, wrow.data());
    const double b = w.bias ? w.bias[n] : 0.0;
    for (int64_t m = 0; m < M && failures < 5; ++m) {
      double exact = b, s = std::fabs(b);
      for (int64_t k = 0; k < K; ++k) {
        double p = static_cast<double>(xin[m * K + k]) * wrow[k];
        exact += p;
        s += std::fabs(p);
      }
      const double got = y[m * N + n];
      const double tol_exact = chain * u * s + 1e-37;
      const double tol_ref = (chain + K + 2) * u * s + 1e-37;
      if (!(std::fabs(got - exact) <= tol_exact) || !(std::fabs(got - yref[m * N + n]) <= tol_ref)) {
        ++failures;
        ADD_FAILURE() << where << " y[" << m << "," << n << "] = " << got << ", exact " << exact << " (tol "
                      << tol_exact << "), ref " << yref[m * N + n] << " (tol " << tol_ref << ")";
      }
    }
  }
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
        cpu::linear(t.w, x.data(), M, y.data());
        check_against_oracles(t, kind, x.data(), M, y,
                              std::string(cpu::isa_name(isa)) + " " + kind_name(kind) + " M=" + std::to_string(M) +
                                  " N=" + std::to_string(N) + " K=" + std::to_string(K) + (bias ? " +bias" : ""));
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
        cpu::linear(t.w, x.data(), 5, y.data());
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
      cpu::linear(t.w, x.data(), 70, y.data());
      check_against_oracles(t, kind, x.data(), 70, y, std::string(cpu::isa_name(isa)) + " " + kind_name(kind));
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

}  // namespace
}  // namespace stave
