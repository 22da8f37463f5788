// Fast-precision causal attention on the GPU at the Clef models' shapes, each kernel side by side
// in one run: the BF16 flash kernel (attention_flash_bf16.cu), the 3xTF32 flash kernel
// (attention_flash.cu) and the chunked cuBLAS products (attention_gemm.cu), through
// dev::attention_causal with the kernel pinned (the same dispatch the backend uses); and the BF16
// kernel with 128 query rows per block (bf16_flash128_*, called directly) and on warp-group MMA
// (bf16_wgmma_*, attention_flash_wgmma.cu) beside its default 64. Prefill from
// position 0: 27B 24 query / 4 KV heads, 9B 16 / 4, head_dim 256, at 2048 and 8192 tokens.
// Reports ms per call (CUDA events around one call, GPU time) and TFLOP/s of the causal work,
// 4·d·heads·Σᵢ(i + 1) (two products, a multiply-add counted as 2). The 27B has 16 attention
// layers: 16 × ms is its attention stage in the prefill profile.
// Built with -DSTAVE_CUDA=ON: cmake --build build-cuda --target bench_cuda_attention.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/attention_flash_bf16.h"
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/device_ops.h"
#include "ops/attention.h"

namespace {

using stave::AttentionShape;
using stave::cuda::AttentionKernel;

std::vector<float> random_floats(int64_t n, float lo, float hi, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t x = seed;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;  // a cheap LCG: the values only need to be ordinary
    f = lo + (hi - lo) * static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
  }
  return v;
}

// bf16 kDefault: through dev::attention_causal with `kernel`; otherwise the BF16 kernel directly in that form.
using stave::cuda::dev::FlashBf16Kernel;
void BM_AttentionCausal(benchmark::State& state, AttentionKernel kernel, int64_t n_q_heads,
                        FlashBf16Kernel bf16 = FlashBf16Kernel::kDefault) {
  if (!stave::cuda::device_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t tokens = state.range(0);
  const AttentionShape shape{n_q_heads, 4, 256, 0.0625f};
  const int64_t qn = tokens * shape.n_q_heads * shape.head_dim, kn = tokens * shape.n_kv_heads * shape.head_dim;
  stave::cuda::DeviceBuffer q, k, v, out;
  q.upload(random_floats(qn, -2, 2, 1).data(), static_cast<size_t>(qn) * sizeof(float));
  k.upload(random_floats(kn, -2, 2, 2).data(), static_cast<size_t>(kn) * sizeof(float));
  v.upload(random_floats(kn, -1, 1, 3).data(), static_cast<size_t>(kn) * sizeof(float));
  out.reserve(static_cast<size_t>(qn) * sizeof(float));
  stave::cuda::GpuContext ctx(/*exact=*/false, kernel);
  auto call = [&] {
    if (bf16 != FlashBf16Kernel::kDefault)
      stave::cuda::dev::flash_attention_bf16(ctx.stream(), shape, q.as<float>(), tokens, 0, k.as<float>(),
                                             v.as<float>(), out.as<float>(), bf16);
    else
      stave::cuda::dev::attention_causal(ctx, shape, q.as<float>(), tokens, 0, k.as<float>(), v.as<float>(),
                                         out.as<float>());
  };
  call();  // first call: shared-memory attributes, cuBLAS workspace, the score buffer
  ctx.synchronize();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  double total_ms = 0;
  for (auto _ : state) {
    cudaEventRecord(start, ctx.stream());
    call();
    cudaEventRecord(stop, ctx.stream());
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    total_ms += ms;
    state.SetIterationTime(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  const double ms = total_ms / static_cast<double>(state.iterations());
  const double flops = 4.0 * static_cast<double>(shape.head_dim * shape.n_q_heads) *
                       (static_cast<double>(tokens) * static_cast<double>(tokens + 1) / 2.0);
  state.counters["ms"] = ms;
  state.counters["TFLOP/s"] = flops / (ms * 1e-3) / 1e12;
  state.counters["ms_16_layers"] = 16 * ms;
}

}  // namespace

BENCHMARK_CAPTURE(BM_AttentionCausal, bf16_flash_27b, AttentionKernel::kFlashBf16, 24)
    ->Arg(512)->Arg(2048)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AttentionCausal, bf16_flash128_27b, AttentionKernel::kFlashBf16, 24, FlashBf16Kernel::kMma128)
    ->Arg(2048)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AttentionCausal, bf16_wgmma_27b, AttentionKernel::kFlashBf16, 24, FlashBf16Kernel::kWgmma)
    ->Arg(512)->Arg(2048)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AttentionCausal, tf32_flash_27b, AttentionKernel::kFlash, 24)
    ->Arg(2048)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AttentionCausal, cublas_27b, AttentionKernel::kGemm, 24)
    ->Arg(2048)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AttentionCausal, bf16_flash_9b, AttentionKernel::kFlashBf16, 16)
    ->Arg(2048)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AttentionCausal, bf16_flash128_9b, AttentionKernel::kFlashBf16, 16, FlashBf16Kernel::kMma128)
    ->Arg(2048)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AttentionCausal, bf16_wgmma_9b, AttentionKernel::kFlashBf16, 16, FlashBf16Kernel::kWgmma)
    ->Arg(2048)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AttentionCausal, tf32_flash_9b, AttentionKernel::kFlash, 16)
    ->Arg(2048)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);
