// The CPU linear kernels on Clef-27B shapes (Qwen3.5-27B's config: hidden 5120, MLP 17408,
// GDN in_proj_qkv / out_proj, full-attention q/k/v/o), at M = 1 (decode), 64 and 512 (prefill):
// MXFP4 W4A4, bf16 and fp32 weights through stave::cpu::linear at the active ISA level
// (STAVE_CPU_ISA lowers it), and ref::linear on the W4A4 weight as the baseline (M = 1 and 64
// only: at M = 512 the scalar reference takes minutes per iteration on small machines).
// w4a4_int8 / w4a4_bf16 run the two AVX-512 W4A4 kernels directly (VNNI int8 block dots vs
// vdpbf16ps on bf16-expanded operands; skipped below level avx512), on the Clef-9B shapes too
// (hidden 4096, MLP 12288), so the dispatch threshold in kernels.h can be checked. w4a4_vnni
// runs the register-blocked VNNI prefill kernel (linear_w4a4_vnni_avx512) at the same M values,
// w4a4_maddubs its AVX2 analogue (linear_w4a4_maddubs_avx2, vpmaddubsw; level avx2 and above),
// and w4a4_tile_avx2 the AVX2 W4A4 kernel it replaces from kW4A4MaddubsMinRows rows (the
// w4a4_gemm tile: one 32-block dot per row and column, rescaled per 8-lane partial).
// w4a4_amx_bf16 / w4a4_int8_amx run the two AMX W4A4 kernels directly (tdpbf16ps on the
// bf16-expanded operands, dispatched at level amx, vs the earlier tdpbssd kernel with a
// per-block rescale; skipped below level amx), also at M = 2048 like w4a4_bf16, so the three
// W4A4 prefill kernels compare on one table (FLOP/s = GFLOP/s × 1e9).
// The lm_head slice (32768 of the vocabulary × 4096) measures the decode step's largest read.
// Counters: FLOP/s = 2·M·N·K per second; WeightB/s = bytes of stored weight read per second.
//
// Built with -DSTAVE_CUDA=ON, also the GPU's fast-precision MXFP4 W4A4 linear layers on the
// Clef-27B shapes at M = 512, 2048, 8192 (cuda_*; GPU time by CUDA events): cuda_bf16 (weights
// expanded to BF16, cuBLAS BF16) and cuda_fp8 (weights expanded to FP8 E4M3, activations
// quantized to E4M3, cuBLASLt FP8) count the expansion and the activation quantization;
// cuda_bf16_gemm / cuda_fp8_gemm time the product alone on the operands the full call left;
// cuda_fp8_epilogue is cuda_fp8 with the row scales applied by a kernel after the GEMM.
// Decode (M = 1, 4, 8, 16) on the six Clef-27B shapes: cuda_decode_small_m runs the small-M
// kernel that reads the packed MXFP4 weight directly (linear_small_m.h; the engine's default at
// M ≤ 4), cuda_decode_today the expansion path (FP8 or BF16 expansion per call, the small-M
// kernel switched off while it runs); time in µs and WeightB/s =
// bytes of packed weight (codes + scales) per second: the decode floor is the GPU's memory
// bandwidth (H200 ≈ 4.3 TB/s).
// Only those: --benchmark_filter=cuda_
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/cpu_linear.h"
#include "backends/cpu/linear/kernels.h"
#include "ops/reference.h"
#include "formats/mxfp4.h"
#include "util/bf16.h"
#include "util/scoped_env.h"
#ifdef STAVE_BENCH_CUDA
#include <cuda_runtime_api.h>

#include "backends/cuda/device_ops.h"
#include "backends/cuda/linear_fp8.h"
#include "backends/cuda/linear_small_m.h"
#include "stave/errors.h"
#endif

namespace {

using stave::LinearWeight;
using stave::WeightFormat;

struct Shape {
  const char* name;
  int64_t out, in;
};
constexpr Shape kShapes[] = {
    {"mlp_up_5120x17408", 17408, 5120},  // gate_proj / up_proj: 5120 -> 17408
    {"mlp_down_17408x5120", 5120, 17408},
    {"gdn_in_proj_qkv", 10240, 5120},
    {"gdn_out_proj", 5120, 6144},
    {"attn_q_proj", 12288, 5120},
    {"attn_kv_proj", 1024, 5120},
    {"attn_o_proj", 5120, 6144},
    {"9b_mlp_up_4096x12288", 12288, 4096},
    {"9b_mlp_down_12288x4096", 4096, 12288},
    {"lm_head_slice_32768x4096", 32768, 4096},  // 1/8 of the 9B lm_head's vocabulary (bf16: 256 MiB)
};

enum class Kernel {
  kW4A4, kBF16, kF32, kRef, kW4A4Int8, kW4A4Bf16, kBf16Split, kW4A4AmxBf16, kW4A4Int8Amx, kW4A4Vnni,
  kW4A4Maddubs, kW4A4TileAvx2
};

bool avx2_kernel(Kernel k) { return k == Kernel::kW4A4Maddubs || k == Kernel::kW4A4TileAvx2; }

bool amx_kernel(Kernel k) { return k == Kernel::kW4A4AmxBf16 || k == Kernel::kW4A4Int8Amx; }

// Deterministic pseudo-random N(0, ~0.05)-ish values without a slow generator.
inline float noise(uint64_t i) {
  uint64_t z = i * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (static_cast<float>(z >> 40) / 16777216.0f - 0.5f) * 0.1f;
}

// One weight at a time is kept (fp32 27B MLP weights are 356 MB).
struct Weight {
  Shape shape{};
  Kernel kind{};
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<uint8_t> codes, scales;
  LinearWeight w;
};

Weight& weight_for(const Shape& s, Kernel k) {
  static std::unique_ptr<Weight> cur;
  const Kernel storage = k == Kernel::kRef || k == Kernel::kW4A4Int8 || k == Kernel::kW4A4Bf16 ||
                                 k == Kernel::kW4A4Vnni || amx_kernel(k) || avx2_kernel(k)
                             ? Kernel::kW4A4
                         : k == Kernel::kBf16Split                                          ? Kernel::kBF16
                                                                                             : k;
  if (cur && cur->shape.out == s.out && cur->shape.in == s.in && cur->kind == storage) return *cur;
  cur.reset();
  cur = std::make_unique<Weight>();
  Weight& t = *cur;
  t.shape = s;
  t.kind = storage;
  const int64_t n = s.out * s.in;
  t.w.name = s.name;
  t.w.out = s.out;
  t.w.in = s.in;
  if (storage == Kernel::kF32) {
    t.f32.resize(n);
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) t.f32[i] = noise(i);
    t.w.format = WeightFormat::kF32;
    t.w.data = t.f32.data();
  } else if (storage == Kernel::kBF16) {
    t.bf16.resize(n);
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) t.bf16[i] = stave::f32_to_bf16(noise(i));
    t.w.format = WeightFormat::kBF16;
    t.w.data = t.bf16.data();
  } else {
    t.codes.resize(n / 2);
    t.scales.resize(n / 32);
#pragma omp parallel for
    for (int64_t b = 0; b < n / 32; ++b) {
      float v[32];
      uint8_t c[32];
      for (int i = 0; i < 32; ++i) v[i] = noise(b * 32 + i);
      t.scales[b] = stave::mxfp4::export_scale_byte(stave::mxfp4::quantize_block(v, 32, c));
      for (int j = 0; j < 16; ++j) t.codes[b * 16 + j] = static_cast<uint8_t>(c[2 * j] | (c[2 * j + 1] << 4));
    }
    t.w.format = WeightFormat::kMXFP4;
    t.w.data = t.codes.data();
    t.w.scales = t.scales.data();
    t.w.quantize_input = true;
  }
  return t;
}

void BM_Linear(benchmark::State& state, Shape s, Kernel k) {
  const int64_t M = state.range(0);
  const bool direct =
      k == Kernel::kW4A4Int8 || k == Kernel::kW4A4Bf16 || k == Kernel::kBf16Split || k == Kernel::kW4A4Vnni;
  if (direct && stave::cpu::active_isa() < stave::cpu::Isa::kAvx512) {
    state.SkipWithError("needs level avx512");
    return;
  }
  if (avx2_kernel(k) && stave::cpu::active_isa() < stave::cpu::Isa::kAvx2) {
    state.SkipWithError("needs level avx2");
    return;
  }
  if (amx_kernel(k) && stave::cpu::active_isa() < stave::cpu::Isa::kAmx) {
    state.SkipWithError("needs level amx");
    return;
  }
  if (k == Kernel::kW4A4Int8Amx && M < 16) {
    state.SkipWithError("the AMX-INT8 kernel takes M >= 16");
    return;
  }
  Weight& t = weight_for(s, k);
  std::vector<float> x(M * s.in), y(M * s.out);
  for (int64_t i = 0; i < M * s.in; ++i) x[i] = noise(i + 12345) * 20.0f;
  for (auto _ : state) {
    if (k == Kernel::kRef)
      stave::ref::linear(t.w, x.data(), M, y.data());
    else if (k == Kernel::kW4A4Int8)
      stave::cpu::kern::linear_w4a4_int8_avx512(t.w, x.data(), M, y.data());
    else if (k == Kernel::kW4A4Bf16)
      stave::cpu::kern::linear_w4a4_bf16_avx512(t.w, x.data(), M, y.data());
    else if (k == Kernel::kW4A4Vnni)
      stave::cpu::kern::linear_w4a4_vnni_avx512(t.w, x.data(), M, y.data());
    else if (k == Kernel::kW4A4Maddubs)
      stave::cpu::kern::linear_w4a4_maddubs_avx2(t.w, x.data(), M, y.data());
    else if (k == Kernel::kW4A4TileAvx2)
      stave::cpu::kern::linear_w4a4_tile_avx2(t.w, x.data(), M, y.data());
    else if (k == Kernel::kBf16Split)
      stave::cpu::kern::linear_bf16_split_avx512(t.w, x.data(), M, y.data());
    else if (k == Kernel::kW4A4AmxBf16)
      stave::cpu::kern::linear_w4a4_amx_bf16(t.w, x.data(), M, y.data());
    else if (k == Kernel::kW4A4Int8Amx)
      stave::cpu::kern::linear_w4a4_int8_amx(t.w, x.data(), M, y.data());
    else
      stave::cpu::linear(t.w, x.data(), M, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * M * s.out * s.in;
  const double bytes = static_cast<double>(t.w.row_bytes()) * s.out + (t.w.scales ? s.out * (s.in / 32) : 0);
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["WeightB/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(k == Kernel::kRef ? "ref" : stave::cpu::isa_name(stave::cpu::active_isa()));
}

bool direct_kernel(Kernel k) {
  return k == Kernel::kW4A4Int8 || k == Kernel::kW4A4Bf16 || k == Kernel::kBf16Split || k == Kernel::kW4A4Vnni ||
         amx_kernel(k) || avx2_kernel(k);
}

int register_all() {
  const std::pair<Kernel, const char*> kernels[] = {
      {Kernel::kW4A4, "w4a4"},           {Kernel::kRef, "ref"},           {Kernel::kBF16, "bf16"},
      {Kernel::kF32, "f32"},             {Kernel::kW4A4Int8, "w4a4_int8"}, {Kernel::kW4A4Bf16, "w4a4_bf16"},
      {Kernel::kBf16Split, "bf16_split"}, {Kernel::kW4A4AmxBf16, "w4a4_amx_bf16"},
      {Kernel::kW4A4Int8Amx, "w4a4_int8_amx"}, {Kernel::kW4A4Vnni, "w4a4_vnni"},
      {Kernel::kW4A4Maddubs, "w4a4_maddubs"}, {Kernel::kW4A4TileAvx2, "w4a4_tile_avx2"}};
  // Shape-major (ref reads the W4A4 weight) so each weight is built once for all its M values.
  for (const Shape& s : kShapes)
    for (auto [k, kname] : kernels) {
      auto* b = benchmark::RegisterBenchmark((std::string(kname) + "/" + s.name).c_str(),
                                             [s, k = k](benchmark::State& st) { BM_Linear(st, s, k); });
      b->Arg(1)->Arg(64);
      if (k == Kernel::kBF16) b->Arg(32);
      if (k == Kernel::kBF16 || k == Kernel::kW4A4) b->Arg(2)->Arg(8);  // decode rows (M ≤ kGemvMaxRows)
      if (direct_kernel(k)) b->Arg(8)->Arg(16)->Arg(32);
      if (k != Kernel::kRef) b->Arg(512);
      if (amx_kernel(k) || k == Kernel::kW4A4Bf16 || k == Kernel::kW4A4Vnni) b->Arg(2048);
      if (avx2_kernel(k)) b->Arg(4)->Arg(6);  // around kW4A4MaddubsMinRows
      b->Unit(benchmark::kMillisecond)->UseRealTime();
    }
  std::printf("cpu isa: detected %s, active %s\n", stave::cpu::isa_name(stave::cpu::detected_isa()),
              stave::cpu::isa_name(stave::cpu::active_isa()));
  return 0;
}
const int registered = register_all();

#ifdef STAVE_BENCH_CUDA
// --- the GPU's MXFP4 W4A4 linear layers (fast precision) ---

enum class GpuKernel { kBf16, kFp8, kFp8Epilogue, kBf16Gemm, kFp8Gemm, kFp8Resident, kFp8Fused, kFp8FusedGemm, kSmallM, kToday };

struct GpuState {
  stave::cuda::GpuContext ctx{/*exact=*/false};
  int64_t out = 0, in = 0;
  stave::cuda::Fp8Weights keep = stave::cuda::Fp8Weights::kExpandPerProduct;
  std::unique_ptr<stave::cuda::DeviceLinear> w;
  stave::cuda::DeviceBuffer x, y;
};

GpuState& gpu_for(const Shape& s, int64_t M, stave::cuda::Fp8Weights keep) {
  static GpuState& g = *new GpuState;  // never destroyed: no CUDA calls after the runtime's teardown
  if (!g.w || g.out != s.out || g.in != s.in || g.keep != keep) {
    g.w.reset();
    Weight& t = weight_for(s, Kernel::kW4A4);
    g.w = std::make_unique<stave::cuda::DeviceLinear>(stave::cuda::upload_linear(t.w, /*fp8_check=*/true, keep));
    g.out = s.out;
    g.in = s.in;
    g.keep = keep;
  }
  const size_t xb = static_cast<size_t>(M * s.in) * sizeof(float), yb = static_cast<size_t>(M * s.out) * sizeof(float);
  if (g.x.bytes() < xb) {
    std::vector<float> x(static_cast<size_t>(M * s.in));
    for (size_t i = 0; i < x.size(); ++i) x[i] = noise(i + 12345) * 20.0f;
    g.x.upload(x.data(), xb);
  }
  g.y.reserve(yb);
  return g;
}

// The BF16 product alone, on the BF16 weight and activation the last BF16 linear call left in
// the context's scratch (as linear_ops.cu lays them out).
void bf16_gemm_only(GpuState& g, int64_t M) {
  const float one = 1.0f, zero = 0.0f;
  const int N = static_cast<int>(g.out), K = static_cast<int>(g.in);
  if (cublasGemmEx(g.ctx.blas(), CUBLAS_OP_T, CUBLAS_OP_N, N, static_cast<int>(M), K, &one,
                   g.ctx.scratch_w().as<void>(), CUDA_R_16BF, K, g.ctx.scratch_x().as<void>(), CUDA_R_16BF, K, &zero,
                   g.y.as<void>(), CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
    throw stave::Error(stave::ErrorKind::kInternal, "bench: cublasGemmEx failed");
}

void BM_GpuLinear(benchmark::State& state, Shape s, GpuKernel k) {
  namespace cu = stave::cuda;
  if (!cu::device_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t M = state.range(0);
  // Today's path = the per-call expansion (FP8 or BF16): the small-M kernel, which the engine
  // takes by default at M ≤ 4, is switched off for this case while it runs.
  std::optional<stave::ScopedEnv> expansion_only;
  if (k == GpuKernel::kToday) expansion_only.emplace("STAVE_CUDA_SMALL_M", "off");
  // cuda_fp8_resident: the FP8 path over the weight's E4M3 copy kept at upload (no expansion).
  GpuState& g = gpu_for(s, M, k == GpuKernel::kFp8Resident ? cu::Fp8Weights::kResident : cu::Fp8Weights::kExpandPerProduct);
  const bool fused = k == GpuKernel::kFp8Fused || k == GpuKernel::kFp8FusedGemm;
  const bool fp8 = k == GpuKernel::kFp8 || k == GpuKernel::kFp8Epilogue || k == GpuKernel::kFp8Gemm ||
                   k == GpuKernel::kFp8Resident || fused;
  g.ctx.set_linear_path(!fp8                           ? cu::LinearPath::kBf16
                        : k == GpuKernel::kFp8Epilogue ? cu::LinearPath::kFp8EpilogueScales
                        : fused                        ? cu::LinearPath::kFp8Fused
                                                       : cu::LinearPath::kFp8);
  if (k == GpuKernel::kToday) g.ctx.set_linear_path(cu::linear_path_from_env());
  if (k == GpuKernel::kSmallM && !cu::dev::linear_small_m_supports(g.ctx, *g.w, M)) {
    state.SkipWithError("the small-M kernel does not support this weight or M");
    return;
  }
  if (fp8 && !cu::dev::linear_fp8_applies(g.ctx, *g.w)) {
    state.SkipWithError("FP8 path does not apply to this weight");
    return;
  }
  const float* x = g.x.as<float>();
  float* y = g.y.as<float>();
  auto full = [&] { cu::dev::linear(g.ctx, *g.w, x, M, y); };
  auto once = [&] {
    if (k == GpuKernel::kSmallM) cu::dev::linear_small_m(g.ctx, *g.w, x, M, y);
    else if (k == GpuKernel::kBf16Gemm) bf16_gemm_only(g, M);
    else if (k == GpuKernel::kFp8Gemm || k == GpuKernel::kFp8FusedGemm) cu::dev::linear_fp8_gemm_only(g.ctx, *g.w, M, y);
    else full();
  };
  const cu::LinearFp8Stats st0 = cu::linear_fp8_stats();
  full();  // scratch sized and filled, plans made
  once();
  g.ctx.synchronize();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  constexpr int kReps = 5;
  for (auto _ : state) {
    cudaEventRecord(start, g.ctx.stream());
    for (int r = 0; r < kReps; ++r) once();
    cudaEventRecord(stop, g.ctx.stream());
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3 / kReps);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * M * s.out * s.in, benchmark::Counter::kIsIterationInvariantRate);
  const double weight_bytes = static_cast<double>(s.out) * s.in / 2 + static_cast<double>(s.out) * s.in / 32;
  state.counters["WeightB/s"] = benchmark::Counter(weight_bytes, benchmark::Counter::kIsIterationInvariantRate);
  const cu::LinearFp8Stats st = cu::linear_fp8_stats();
  state.counters["rounded_act_blocks"] =
      static_cast<double>(st.activation_blocks_rounded - st0.activation_blocks_rounded);
  state.counters["weights_bf16_fallback"] = static_cast<double>(st.weights_out_of_range);
  if (k == GpuKernel::kSmallM || k == GpuKernel::kToday) {
    state.SetLabel(k == GpuKernel::kSmallM ? "small-M kernel"
                   : st.gemms_scaled_in_gemm + st.gemms_scaled_after > st0.gemms_scaled_in_gemm + st0.gemms_scaled_after
                       ? "today: fp8"
                       : "today: bf16");
    return;
  }
  state.SetLabel(!fp8 ? "bf16"
                 : st.gemms_fused > st0.gemms_fused                   ? "fused MXFP4 GEMM"
                 : st.gemms_scaled_in_gemm > st0.gemms_scaled_in_gemm ? "fp8, scales in GEMM"
                                                                      : "fp8, scales after GEMM");
}

int register_gpu() {
  const Shape clef[] = {kShapes[0], kShapes[1], kShapes[2], kShapes[3], kShapes[4], kShapes[5]};
  const std::pair<GpuKernel, const char*> kernels[] = {{GpuKernel::kBf16, "cuda_bf16"},
                                                       {GpuKernel::kFp8, "cuda_fp8"},
                                                       {GpuKernel::kFp8Epilogue, "cuda_fp8_epilogue"},
                                                       {GpuKernel::kBf16Gemm, "cuda_bf16_gemm"},
                                                       {GpuKernel::kFp8Gemm, "cuda_fp8_gemm"},
                                                       {GpuKernel::kFp8Resident, "cuda_fp8_resident"},
                                                       {GpuKernel::kFp8Fused, "cuda_fp8_fused"},
                                                       {GpuKernel::kFp8FusedGemm, "cuda_fp8_fused_gemm"}};
  for (const Shape& s : clef)
    for (auto [k, kname] : kernels)
      benchmark::RegisterBenchmark((std::string(kname) + "/" + s.name).c_str(),
                                   [s, k = k](benchmark::State& st) { BM_GpuLinear(st, s, k); })
          ->Arg(512)
          ->Arg(2048)
          ->Arg(8192)
          ->Unit(benchmark::kMillisecond)
          ->UseManualTime();
  // Decode: the small-M kernel beside today's path.
  const std::pair<GpuKernel, const char*> decode[] = {{GpuKernel::kSmallM, "cuda_decode_small_m"},
                                                      {GpuKernel::kToday, "cuda_decode_today"}};
  for (const Shape& s : clef)
    for (auto [k, kname] : decode)
      benchmark::RegisterBenchmark((std::string(kname) + "/" + s.name).c_str(),
                                   [s, k = k](benchmark::State& st) { BM_GpuLinear(st, s, k); })
          ->Arg(1)
          ->Arg(4)
          ->Arg(8)
          ->Arg(16)
          ->Unit(benchmark::kMicrosecond)
          ->UseManualTime();
  return 0;
}
const int registered_gpu = register_gpu();
#endif

}  // namespace
