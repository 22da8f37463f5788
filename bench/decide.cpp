// Decision latency through the public Engine at a given prompt length (batch 1): the state is
// padded with a repeated sentence until the request encodes to about N tokens.
//   STAVE_BENCH_MODEL=RELEASE [STAVE_BENCH_DEVICE=cuda] [STAVE_BENCH_PRECISION=fast]
//   [STAVE_BENCH_FP8_CACHE_GIB=N (EngineOptions::fp8_cache_gib)]
//     ./build/bench/bench_decide --benchmark_filter='Decide/512'
// Counters: tokens (exact input length), backbone_ms and head_ms per decision (Engine timings),
// prefill_tok_s = tokens / backbone time.
// DecideBatch/B/N: B such requests through Engine::decide_batch (one packed prefill on a GPU);
// counters per batch: tokens (all B), backbone_ms, decisions_s and prefill_tok_s (all tokens /
// backbone time) — the throughput side, where Decide is the latency side.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#ifdef STAVE_BENCH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "stave/engine.h"

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

const stave::Engine* engine() {
  static std::unique_ptr<stave::Engine> e = [] {
    std::unique_ptr<stave::Engine> out;
    const std::string model = env_or("STAVE_BENCH_MODEL", "");
    if (model.empty()) return out;
    stave::EngineOptions o;
    o.model = model;
    o.device = env_or("STAVE_BENCH_DEVICE", "cpu");
    o.fp8_cache_gib = std::stod(env_or("STAVE_BENCH_FP8_CACHE_GIB", "0"));
    o.precision = *stave::parse_precision(env_or("STAVE_BENCH_PRECISION", "fast"));
    out = stave::Engine::load(o);
    return out;
  }();
  return e.get();
}

std::string request(int repeats) {
  std::string state;
  for (int i = 0; i < repeats; ++i) state += "Our checkout started returning errors and orders are blocked. ";
  nlohmann::ordered_json r;
  r["model"] = "clef";
  r["state"] = state;
  r["questions"]["department"] = {{"type", "choice"},
                                  {"instructions", "Which team should handle the message?"},
                                  {"criteria", {{"billing", "Payments or invoices"}, {"technical", "Bugs or outages"}}}};
  r["questions"]["urgency"] = {{"type", "score"}, {"criteria", {"Can wait", "This week", "Today"}}};
  r["questions"]["outage"] = {{"type", "noul"}, {"instructions", "Is a service down?"}};
  return r.dump();
}

// The request whose encoding is closest to `target` tokens (two probes: the length is affine in
// the repeat count).
std::string request_with_tokens(const stave::Engine& e, int64_t target) {
  const int64_t t1 = e.decide(request(1)).usage.input_tokens, t2 = e.decide(request(11)).usage.input_tokens;
  const double per = static_cast<double>(t2 - t1) / 10.0;
  const int reps = std::max(1, static_cast<int>(1 + (static_cast<double>(target - t1) / per) + 0.5));
  return request(reps);
}

// Device memory in use (total − free, GiB) where the engine runs on a GPU: the weights, the
// memory pool's retained blocks (freed blocks stay in the pool, so this is the high-water mark
// of the decisions so far) and the context; −1 on the CPU.
double gpu_used_gib(const stave::Engine& e) {
#ifdef STAVE_BENCH_CUDA
  if (env_or("STAVE_BENCH_DEVICE", "cpu") == "cuda") {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) return static_cast<double>(total - free) / (1u << 30);
  }
#endif
  (void)e;
  return -1.0;
}

void BM_Decide(benchmark::State& state) {
  const stave::Engine* e = engine();
  if (!e) {
    state.SkipWithError("set STAVE_BENCH_MODEL to a release folder");
    return;
  }
  const std::string req = request_with_tokens(*e, state.range(0));
  stave::Decision warm = e->decide(req);  // warm-up: scratch allocation, cuBLAS heuristics
  double backbone = 0, head = 0;
  int64_t n = 0;
  for (auto _ : state) {
    const stave::Decision d = e->decide(req);
    backbone += d.timings.backbone_ms;
    head += d.timings.head_ms;
    ++n;
  }
  state.counters["tokens"] = static_cast<double>(warm.usage.input_tokens);
  state.counters["backbone_ms"] = backbone / static_cast<double>(n);
  state.counters["head_ms"] = head / static_cast<double>(n);
  state.counters["prefill_tok_s"] = static_cast<double>(warm.usage.input_tokens) * n / (backbone / 1000.0);
  state.counters["gpu_used_GiB"] = gpu_used_gib(*e);
}
BENCHMARK(BM_Decide)->Name("Decide")->Arg(512)->Arg(2048)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime()
    ->Iterations(5)->Repetitions(3)->ReportAggregatesOnly(true);

void BM_DecideBatch(benchmark::State& state) {
  const stave::Engine* e = engine();
  if (!e) {
    state.SkipWithError("set STAVE_BENCH_MODEL to a release folder");
    return;
  }
  const int64_t batch = state.range(0);
  const std::string req = request_with_tokens(*e, state.range(1));
  const std::vector<stave::Request> requests(static_cast<size_t>(batch), stave::Request::parse(req));
  const auto warm = e->decide_batch(requests);  // warm-up: scratch grown to the batch
  int64_t tokens = 0;
  for (const auto& d : warm) tokens += d.usage.input_tokens;
  double backbone = 0;
  int64_t n = 0;
  for (auto _ : state) {
    const auto d = e->decide_batch(requests);
    backbone += d.front().timings.backbone_ms;
    ++n;
  }
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["backbone_ms"] = backbone / static_cast<double>(n);
  state.counters["decisions_s"] = benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["prefill_tok_s"] = static_cast<double>(tokens) * n / (backbone / 1000.0);
  state.counters["gpu_used_GiB"] = gpu_used_gib(*e);
}
BENCHMARK(BM_DecideBatch)->Name("DecideBatch")->ArgNames({"batch", "tokens"})
    ->Args({4, 512})->Args({16, 512})->Args({2, 2048})->Args({4, 2048})->Args({8, 2048})
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3)->Repetitions(2)->ReportAggregatesOnly(true);

}  // namespace
