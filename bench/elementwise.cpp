// The element-wise ops of one decoder layer at Clef-27B shapes (hidden 5120, MLP 17408, GDN 48
// v heads of 128 and a conv over 10240 channels, attention 24 query / 4 KV heads of 256 with a
// 64-wide rotary part) for one 2048-token prefill step, on a backend picked by
// STAVE_BENCH_DEVICE (default cuda; skipped where it is unavailable) in fast and exact
// precision. Each fused op runs beside the composition it replaces (`…/composed`), so one run
// shows what the fusion saves. Time per op includes the wait for the device (backend
// synchronize); Bytes/s counts each tensor the op must read or write once.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "ops/backend.h"

namespace {

using stave::Backend;
using stave::Precision;
using stave::Tensor;

constexpr int64_t kTokens = 2048, kHidden = 5120, kMlp = 17408, kVHeads = 48, kDv = 128, kConv = 10240,
                  kConvKernel = 4, kQHeads = 24, kKvHeads = 4, kHeadDim = 256, kRotary = 64;

std::string device() {
  const char* d = std::getenv("STAVE_BENCH_DEVICE");
  return d && *d ? d : "cuda";
}

// Deterministic values in [-1, 1) without a slow generator.
std::vector<float> noise(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : v) {
    z ^= z << 13;
    z ^= z >> 7;
    z ^= z << 17;
    x = static_cast<float>(z >> 40) / 8388608.0f - 1.0f;
  }
  return v;
}

// Runs op on the backend until the benchmark is satisfied; bytes = the op's compulsory traffic.
void run(benchmark::State& state, Precision precision, int64_t bytes,
         const std::function<std::function<void()>(const Backend&)>& setup) {
  const std::string why = stave::backend_unavailable_reason(device());
  if (!why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  const auto backend = stave::make_backend(device(), precision);
  const std::function<void()> op = setup(*backend);
  op();
  backend->synchronize();
  for (auto _ : state) {
    op();
    backend->synchronize();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

Tensor dev(const Backend& be, int64_t n, uint64_t seed) { return be.to_device(Tensor::host(noise(n, seed))); }
float* f(const Tensor& t) { return t.data<float>(); }

void register_all(Precision p, const char* tag) {
  const std::string pre = std::string(tag) + "/";
  auto add = [&](const std::string& name, int64_t bytes, std::function<std::function<void()>(const Backend&)> setup) {
    benchmark::RegisterBenchmark((pre + name).c_str(),
                                 [p, bytes, setup](benchmark::State& s) { run(s, p, bytes, setup); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  };
  const int64_t nh = kTokens * kHidden, ni = kTokens * kMlp, nq = kTokens * kQHeads * kHeadDim;
  const int64_t nk = kTokens * kKvHeads * kHeadDim, nv = kTokens * kVHeads * kDv, nc = kTokens * kConv;
  const int64_t B = sizeof(float);

  // Decoder layer: the residual add and the post-attention norm (read h, y; write h, x).
  add("add_rms_norm", 4 * nh * B, [=](const Backend& be) {
    Tensor h = dev(be, nh, 1), y = dev(be, nh, 2), w = dev(be, kHidden, 3), x = be.empty({nh});
    return std::function<void()>([&be, h, y, w, x] { be.add_rms_norm_zero_centered(f(h), f(y), kTokens, kHidden, f(w), 1e-6f, f(x)); });
  });
  add("add_rms_norm/composed", 4 * nh * B, [=](const Backend& be) {
    Tensor h = dev(be, nh, 1), y = dev(be, nh, 2), w = dev(be, kHidden, 3), x = be.empty({nh});
    return std::function<void()>([&be, h, y, w, x] {
      be.add_inplace(f(h), f(y), kTokens * kHidden);
      be.rms_norm_zero_centered(f(h), kTokens, kHidden, f(w), 1e-6f, f(x));
    });
  });
  add("rms_norm", 2 * nh * B, [=](const Backend& be) {
    Tensor h = dev(be, nh, 1), w = dev(be, kHidden, 3), x = be.empty({nh});
    return std::function<void()>([&be, h, w, x] { be.rms_norm_zero_centered(f(h), kTokens, kHidden, f(w), 1e-6f, f(x)); });
  });
  add("add_inplace", 3 * nh * B, [=](const Backend& be) {
    Tensor h = dev(be, nh, 1), y = dev(be, nh, 2);
    return std::function<void()>([&be, h, y] { be.add_inplace(f(h), f(y), kTokens * kHidden); });
  });
  // MLP: SiLU(gate) · up over [2048, 17408].
  add("silu_mul", 3 * ni * B, [=](const Backend& be) {
    Tensor g = dev(be, ni, 4), u = dev(be, ni, 5);
    return std::function<void()>([&be, g, u] { be.silu_mul(f(g), f(u), kTokens * kMlp, f(g)); });
  });
  // Full attention: the query path (split [q | gate], norm, RoPE) and the keys' norm + RoPE.
  add("head_norm_rope/q", 3 * nq * B, [=](const Backend& be) {
    Tensor qg = dev(be, 2 * nq, 6), w = dev(be, kHeadDim, 7), c = dev(be, kTokens * kRotary / 2, 8),
           s = dev(be, kTokens * kRotary / 2, 9), q = be.empty({nq}), g = be.empty({nq});
    return std::function<void()>([&be, qg, w, c, s, q, g] {
      be.head_norm_rope(f(qg), kTokens, kQHeads, kHeadDim, f(w), 1e-6f, kRotary, f(c), f(s), f(q), f(g));
    });
  });
  add("head_norm_rope/q/composed", 3 * nq * B, [=](const Backend& be) {
    Tensor qg = dev(be, 2 * nq, 6), w = dev(be, kHeadDim, 7), c = dev(be, kTokens * kRotary / 2, 8),
           s = dev(be, kTokens * kRotary / 2, 9), q = be.empty({nq}), g = be.empty({nq});
    return std::function<void()>([&be, qg, w, c, s, q, g] {
      be.split_query_gate(f(qg), kTokens * kQHeads, kHeadDim, f(q), f(g));
      be.rms_norm_zero_centered(f(q), kTokens * kQHeads, kHeadDim, f(w), 1e-6f, f(q));
      be.apply_rope(f(q), kTokens, kQHeads, kHeadDim, kRotary, f(c), f(s));
    });
  });
  add("head_norm_rope/k", 2 * nk * B, [=](const Backend& be) {
    Tensor k = dev(be, nk, 10), w = dev(be, kHeadDim, 7), c = dev(be, kTokens * kRotary / 2, 8),
           s = dev(be, kTokens * kRotary / 2, 9);
    return std::function<void()>([&be, k, w, c, s] {
      be.head_norm_rope(f(k), kTokens, kKvHeads, kHeadDim, f(w), 1e-6f, kRotary, f(c), f(s), f(k), nullptr);
    });
  });
  add("sigmoid_mul", 3 * nq * B, [=](const Backend& be) {
    Tensor o = dev(be, nq, 11), g = dev(be, nq, 12);
    return std::function<void()>([&be, o, g] { be.sigmoid_mul(f(o), f(g), kTokens * kQHeads * kHeadDim); });
  });
  // Gated DeltaNet: conv + SiLU, gates, the gated norm.
  add("causal_conv1d_silu", 2 * nc * B, [=](const Backend& be) {
    Tensor x = dev(be, nc, 13), w = dev(be, kConv * kConvKernel, 14), hist = dev(be, (kConvKernel - 1) * kConv, 15),
           y = be.empty({nc});
    return std::function<void()>([&be, x, w, hist, y] {
      be.causal_conv1d_silu(f(x), kTokens, kConv, f(w), kConvKernel, f(hist), f(y));
    });
  });
  add("gdn_gates", 4 * kTokens * kVHeads * B, [=](const Backend& be) {
    Tensor a = dev(be, kTokens * kVHeads, 16), b = dev(be, kTokens * kVHeads, 17), al = dev(be, kVHeads, 18),
           dt = dev(be, kVHeads, 19), g = be.empty({kTokens * kVHeads}), beta = be.empty({kTokens * kVHeads});
    return std::function<void()>([&be, a, b, al, dt, g, beta] {
      be.gdn_gates(f(a), f(b), f(al), f(dt), kTokens, kVHeads, f(g), f(beta));
    });
  });
  add("gated_rms_norm", 3 * nv * B, [=](const Backend& be) {
    Tensor x = dev(be, nv, 20), z = dev(be, nv, 21), w = dev(be, kDv, 22), y = be.empty({nv});
    return std::function<void()>([&be, x, z, w, y] {
      be.gated_rms_norm(f(x), f(z), kTokens * kVHeads, kDv, f(w), 1e-6f, f(y));
    });
  });
}

const bool registered = [] {
  register_all(Precision::kFast, "fast");
  register_all(Precision::kExact, "exact");
  return true;
}();

}  // namespace
