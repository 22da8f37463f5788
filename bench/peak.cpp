// Peak rates of this CPU, all cores (one OpenMP thread each), so docs/benchmarks.md can say what
// fraction of peak the linear kernels reach: fp32 FMA (AVX2, AVX-512), int8 multiply-add
// (AVX2 vpmaddubsw+vpaddw, AVX-512 VNNI vpdpbusd), AVX-512-BF16 vdpbf16ps, AMX int8 (tdpbssd) and bf16 (tdpbf16ps), and
// read bandwidth from memory (what bounds M = 1). A MAC counts as 2 ops. Each kernel runs
// independent register chains so throughput, not latency, is measured. Instruction sets the CPU
// lacks are skipped (state.SkipWithError). Bench files get no ISA flags, so the kernels use
// per-function target attributes and run only after a run-time check.
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_features.h"

namespace {

using stave::cpu::Isa;
constexpr int64_t kIters = 1 << 20;

__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(1.0f + i * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  return _mm256_cvtss_f32(s);
}

// Lane sums through memory: GCC 12's _mm512_reduce_add_* warn of an uninitialized __Y.
template <class Lane, class Vector>
Lane sum_lanes(const Vector& v) {
  static_assert(sizeof(Vector) == 16 * sizeof(Lane), "16 lanes");
  Lane lanes[16];
  std::memcpy(lanes, &v, sizeof v);
  Lane sum = 0;
  for (Lane x : lanes) sum += x;
  return sum;
}

__attribute__((target("avx512f"))) float fma_avx512(int64_t iters) {
  __m512 a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_ps(1.0f + i * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  __m512 s = a[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, a[i]);
  return sum_lanes<float>(s);
}

// 9 independent vpmaddubsw + vpaddw per iteration, in assembly: with intrinsics on constant
// operands GCC hoisted the (loop-invariant) vpmaddubsw out of the loop, so the loop timed only
// vpaddw (~1.2× the real rate on Zen 4); operands u, s ∈ {1, 2, 3} bytes in ymm13..15.
__attribute__((target("avx2"))) int int8_avx2(int64_t iters) {
  asm volatile(
      "vpcmpeqb %%ymm0, %%ymm0, %%ymm0\n vpabsb %%ymm0, %%ymm13\n vpaddb %%ymm13, %%ymm13, %%ymm14\n"
      "vpaddb %%ymm14, %%ymm13, %%ymm15\n"
      "vpxor %%ymm0, %%ymm0, %%ymm0\n vpxor %%ymm1, %%ymm1, %%ymm1\n vpxor %%ymm2, %%ymm2, %%ymm2\n"
      "vpxor %%ymm3, %%ymm3, %%ymm3\n vpxor %%ymm4, %%ymm4, %%ymm4\n vpxor %%ymm5, %%ymm5, %%ymm5\n"
      "vpxor %%ymm6, %%ymm6, %%ymm6\n vpxor %%ymm7, %%ymm7, %%ymm7\n vpxor %%ymm8, %%ymm8, %%ymm8\n"
      "1:\n"
      "vpmaddubsw %%ymm13, %%ymm13, %%ymm9\n vpaddw %%ymm9, %%ymm0, %%ymm0\n"
      "vpmaddubsw %%ymm14, %%ymm13, %%ymm10\n vpaddw %%ymm10, %%ymm1, %%ymm1\n"
      "vpmaddubsw %%ymm15, %%ymm13, %%ymm11\n vpaddw %%ymm11, %%ymm2, %%ymm2\n"
      "vpmaddubsw %%ymm13, %%ymm14, %%ymm12\n vpaddw %%ymm12, %%ymm3, %%ymm3\n"
      "vpmaddubsw %%ymm14, %%ymm14, %%ymm9\n vpaddw %%ymm9, %%ymm4, %%ymm4\n"
      "vpmaddubsw %%ymm15, %%ymm14, %%ymm10\n vpaddw %%ymm10, %%ymm5, %%ymm5\n"
      "vpmaddubsw %%ymm13, %%ymm15, %%ymm11\n vpaddw %%ymm11, %%ymm6, %%ymm6\n"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm12\n vpaddw %%ymm12, %%ymm7, %%ymm7\n"
      "vpmaddubsw %%ymm15, %%ymm15, %%ymm9\n vpaddw %%ymm9, %%ymm8, %%ymm8\n"
      "dec %0\n jnz 1b\n vzeroupper\n"
      : "+r"(iters)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
        "xmm13", "xmm14", "xmm15", "cc");
  return static_cast<int>(iters);
}

__attribute__((target("avx512f,avx512vnni"))) int int8_vnni(int64_t iters) {
  __m512i a[16];
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_epi32(i);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) a[i] = _mm512_dpbusd_epi32(a[i], u, s);
  __m512i t = a[0];
  for (int i = 1; i < 16; ++i) t = _mm512_add_epi32(t, a[i]);
  return sum_lanes<int32_t>(t);
}

__attribute__((target("avx512f,avx512bf16"))) float bf16_dp(int64_t iters) {
  __m512 a[16];
  const __m512bh u = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(-1e-3f));
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_ps(1.0f + i * 1e-3f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) a[i] = _mm512_dpbf16_ps(a[i], u, u);
  __m512 t = a[0];
  for (int i = 1; i < 16; ++i) t = _mm512_add_ps(t, a[i]);
  return sum_lanes<float>(t);
}

struct alignas(64) TileConfig {
  uint8_t palette_id = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// 4 independent C tiles (16×16 int32 / fp32), A and B tiles of 16 rows × 64 bytes.
__attribute__((target("amx-tile,amx-int8,amx-bf16"))) int amx_loop(int64_t iters, bool bf16) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  _tile_loadconfig(&cfg);
  alignas(64) static thread_local uint8_t buf[16 * 64 * 4];
  std::memset(buf, 1, sizeof buf);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, buf, 64);
  _tile_loadd(5, buf + 1024, 64);
  _tile_loadd(6, buf + 2048, 64);
  _tile_loadd(7, buf + 3072, 64);
  if (bf16) {
    for (int64_t it = 0; it < iters; ++it) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  } else {
    for (int64_t it = 0; it < iters; ++it) {
      _tile_dpbssd(0, 4, 6);
      _tile_dpbssd(1, 4, 7);
      _tile_dpbssd(2, 5, 6);
      _tile_dpbssd(3, 5, 7);
    }
  }
  _tile_stored(0, buf, 64);
  _tile_release();
  return buf[0];
}

template <class F>
void run_all_threads(benchmark::State& state, Isa need, double ops_per_iter_per_thread, F body) {
  if (stave::cpu::active_isa() < need) {
    state.SkipWithError("instruction set not available");
    return;
  }
  const int threads = omp_get_max_threads();
  for (auto _ : state) {
    double sink = 0;
#pragma omp parallel reduction(+ : sink)
    sink += body();
    benchmark::DoNotOptimize(sink);
  }
  state.counters["threads"] = threads;
  state.counters["OP/s"] = benchmark::Counter(ops_per_iter_per_thread * threads, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Fp32FmaAvx2(benchmark::State& st) {
  run_all_threads(st, Isa::kAvx2, 2.0 * 8 * 12 * kIters, [] { return fma_avx2(kIters); });
}
void BM_Fp32FmaAvx512(benchmark::State& st) {
  run_all_threads(st, Isa::kAvx512, 2.0 * 16 * 16 * kIters, [] { return fma_avx512(kIters); });
}
void BM_Int8MaddubsAvx2(benchmark::State& st) {
  run_all_threads(st, Isa::kAvx2, 2.0 * 32 * 9 * kIters, [] { return int8_avx2(kIters); });
}
void BM_Int8VnniAvx512(benchmark::State& st) {
  run_all_threads(st, Isa::kAvx512, 2.0 * 64 * 16 * kIters, [] { return int8_vnni(kIters); });
}
void BM_Bf16DpAvx512(benchmark::State& st) {  // 32 bf16 MACs per vdpbf16ps
  run_all_threads(st, Isa::kAvx512, 2.0 * 32 * 16 * kIters, [] { return bf16_dp(kIters); });
}
void BM_AmxInt8(benchmark::State& st) {
  const int64_t it = kIters / 16;
  run_all_threads(st, Isa::kAmx, 2.0 * 4 * 16 * 16 * 64 * it, [it] { return amx_loop(it, false); });
}
void BM_AmxBf16(benchmark::State& st) {
  const int64_t it = kIters / 16;
  run_all_threads(st, Isa::kAmx, 2.0 * 4 * 16 * 16 * 32 * it, [it] { return amx_loop(it, true); });
}

// Read bandwidth: sum of a 1 GiB array (far beyond the caches), split over the threads.
void BM_MemoryRead(benchmark::State& state) {
  static std::vector<uint64_t> data;
  const int64_t n = (int64_t{1} << 30) / 8;
  if (data.empty()) {
    data.resize(n);
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) data[i] = i;
  }
  for (auto _ : state) {
    uint64_t s = 0;
#pragma omp parallel for reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += data[i];
    benchmark::DoNotOptimize(s);
  }
  state.counters["B/s"] = benchmark::Counter(static_cast<double>(n) * 8, benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_Fp32FmaAvx2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Fp32FmaAvx512)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Int8MaddubsAvx2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Int8VnniAvx512)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Bf16DpAvx512)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AmxInt8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AmxBf16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemoryRead)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
