// The gated delta rule of one Gated DeltaNet layer, fast precision, one sequence (prefill), on
// Clef-27B (n_k 16, n_v 48, d 128) and Clef-9B (n_k 16, n_v 32) shapes.
// - cuda (skips without a GPU), 2048 and 8192 tokens: Backend::gated_delta_rule (the BF16
//   tensor-core chunk form, src/backends/cuda/gated_delta_chunk.cu: split operands by default,
//   STAVE_CUDA_DELTA=chunk-bf16 for plain ones) beside Backend::gated_delta_rule_recurrent (the
//   per-token fp32 recurrence it replaces).
// - cpu, 512 and 2048 tokens, all threads: the fp32 chunk form, with gates g drawn from a mild
//   range [-0.5, 0] and a steep one [-6, -1]. Steep gates drive e^γ (γ the in-chunk cumulative
//   gate) far below the normal fp32 range: the case where denormal operands cost most.
// With CUDA, the chunk form's rows add each kernel's share (qk_norm_ms, wu_ms, state_ms, out_ms:
// CUDA events between the kernels, per call; gated_delta_chunk.h's profile).
// Counters: ms_per_call (wall time per call, synchronised); TFLOP/s = the chunk form's useful
// matmul FLOPs (per token and v head d·(5·64 + 6·d): k̂k̂ᵀ, W and U, W·S, Kᵀv_new, q̂k̂ᵀ, q̂·S,
// P·v_new) per second, the same count for both kernels so the two compare directly.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/registry.h"
#ifdef STAVE_BENCH_CUDA
#include "backends/cuda/gated_delta_chunk.h"
#endif
#include "ops/backend.h"
#include "ops/gated_delta_net.h"

namespace {

using stave::Backend;
using stave::GatedDeltaDims;
using stave::GatedDeltaInput;
using stave::Tensor;

struct Model {
  const char* name;
  GatedDeltaDims dims;
};
constexpr Model kModels[] = {{"27b", {16, 48, 128, 128}}, {"9b", {16, 32, 128, 128}}};

std::vector<float> uniform(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

void BM_GatedDelta(benchmark::State& state, const Model& m, const char* device, bool chunked, bool steep) {
  const std::string why = stave::backend_unavailable_reason(device);
  if (!why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  const auto be = stave::make_backend(device, stave::Precision::kFast);
  const GatedDeltaDims d = m.dims;
  const int64_t T = state.range(0);
  const int64_t stride = 2 * d.n_k_heads * d.d_k + d.n_v_heads * d.d_v;  // the conv output row [q | k | v]
  std::mt19937 rng(1);
  auto up = [&](const std::vector<float>& v) {
    Tensor t = be->empty({static_cast<int64_t>(v.size())});
    be->copy_from_host(v.data(), t);
    return t;
  };
  const Tensor row = up(uniform(rng, T * stride, -1.0f, 1.0f));
  const Tensor g = up(steep ? uniform(rng, T * d.n_v_heads, -6.0f, -1.0f) : uniform(rng, T * d.n_v_heads, -0.5f, 0.0f));
  const Tensor beta = up(uniform(rng, T * d.n_v_heads, 0.0f, 1.0f));
  const Tensor st = up(std::vector<float>(static_cast<size_t>(d.state_floats()), 0.0f));
  const Tensor out = be->empty({T * d.n_v_heads * d.d_v});
  GatedDeltaInput in;
  in.tokens = T;
  in.q = row.data<float>();
  in.k = in.q + d.n_k_heads * d.d_k;
  in.v = in.q + 2 * d.n_k_heads * d.d_k;
  in.stride = stride;
  in.g = g.data<float>();
  in.beta = beta.data<float>();
  auto call = [&] {
    if (chunked)
      be->gated_delta_rule(d, in, st.data<float>(), out.data<float>());
    else
      be->gated_delta_rule_recurrent(d, in, st.data<float>(), out.data<float>());
    be->synchronize();
  };
  call();  // warm-up: kernel loading, scratch pools
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) call();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double calls = static_cast<double>(state.iterations());
#ifdef STAVE_BENCH_CUDA
  if (chunked && std::string(device) == "cuda") {  // the kernels' split, a few calls more
    namespace dev = stave::cuda::dev;
    dev::gated_delta_chunk_profile(true);
    for (int i = 0; i < 5; ++i) call();
    const dev::GatedDeltaChunkProfile p = dev::gated_delta_chunk_profile_read();
    dev::gated_delta_chunk_profile(false);
    if (p.calls > 0) {
      state.counters["qk_norm_ms"] = p.qk_norm_ms / p.calls;
      state.counters["wu_ms"] = p.wu_ms / p.calls;
      state.counters["state_ms"] = p.state_ms / p.calls;
      state.counters["out_ms"] = p.out_ms / p.calls;
    }
  }
#endif
  const double flops = static_cast<double>(T) * d.n_v_heads * d.d_k * (5.0 * stave::kGatedDeltaChunk + 6.0 * d.d_v);
  state.counters["ms_per_call"] = 1e3 * seconds / calls;
  state.counters["TFLOP/s"] = flops * calls / seconds * 1e-12;
}

const bool registered = [] {
  auto add = [](const std::string& name, int64_t short_len, int64_t long_len, auto fn) {
    benchmark::RegisterBenchmark(name.c_str(), fn)
        ->Arg(short_len)
        ->Arg(long_len)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  };
  for (const Model& m : kModels)
    for (bool chunked : {true, false})
      add(std::string("gated_delta_") + m.name + (chunked ? "_chunk" : "_recurrent_fp32"), 2048, 8192,
          [&m, chunked](benchmark::State& s) { BM_GatedDelta(s, m, "cuda", chunked, false); });
  for (const Model& m : kModels)
    for (bool steep : {false, true})
      add(std::string("gated_delta_") + m.name + "_cpu_chunk_fp32" + (steep ? "_steep" : "_mild"), 512, 2048,
          [&m, steep](benchmark::State& s) { BM_GatedDelta(s, m, "cpu", true, steep); });
  return true;
}();

}  // namespace
