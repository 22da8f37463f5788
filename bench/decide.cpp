// Decision latency through the public Engine at a given prompt length (batch 1): a request of
// exactly N tokens, as `stave bench` builds them (measure::bench_requests: three questions,
// the state grown word by word; since 2026-12-07 11:30, before which the state was a repeated
// sentence and Decide/512 ran 516 tokens, 2048 2046 and 8192 8196: 516 pad to 640 rows in the
// FP8 products' 128-row tiles where 512 fill four, 9 ms of the 27B's backbone on an H100).
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

#ifdef STAVE_BENCH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "measure/bench_run.h"
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

// A request of exactly `target` tokens by the release's tokenizer, three questions (noul, choice,
// score), as `stave bench` builds them.
std::string request_with_tokens(int64_t target) {
  stave::measure::BenchOptions o;
  o.prompt_tokens = {target};
  o.questions = 3;
  return stave::measure::bench_requests(o, env_or("STAVE_BENCH_MODEL", "")).front().request.json;
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
  const std::string req = request_with_tokens(state.range(0));
  stave::Decision warm = e->decide(req);  // warm-up: scratch allocation, cuBLAS heuristics
  if (warm.usage.input_tokens != state.range(0)) {
    state.SkipWithError("the engine read another length than the request was built to");
    return;
  }
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
  const std::string req = request_with_tokens(state.range(1));
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
