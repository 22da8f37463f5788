// This machine's fp32 FMA peak (AVX2+FMA, 256-bit), the denominator of "fraction of peak" in
// docs/benchmarks.md: 12 independent accumulator chains per thread hide the FMA latency, so the
// loop is bound by FMA throughput only. Counter "FLOP/s" = 2 flops per lane per FMA.
#include <immintrin.h>
#include <omp.h>

#include <benchmark/benchmark.h>

namespace {

constexpr int kChains = 12;
constexpr long kIters = 1 << 22;

__attribute__((target("avx2,fma"))) float fma_chains(long iters, float seed) {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(seed + static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}

void BM_Fp32FmaPeak(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  float sink = 0;
  for (auto _ : state) {
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += fma_chains(kIters, static_cast<float>(omp_get_thread_num()));
  }
  benchmark::DoNotOptimize(sink);
  const double flops = 2.0 * 8 * kChains * static_cast<double>(kIters) * threads;
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Fp32FmaPeak)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
