// (bench/decide.cpp is the CUDA one.) One decision end to end (Engine::decide: encode, backbone prefill, joint head), exact vs fast,
// on the public fixture model (BF16 and MXFP4) and on a larger random release written at start
// by the synth code, at a few prompt lengths (the docs example with its state repeated).
//   ninja -C build bench_decide_cpu && ./build/bench/bench_decide_cpu
// Environment: STAVE_BENCH_PRESET (synth preset, default "tiny"; e.g. clef-flash-9b),
// STAVE_BENCH_LAYERS (its layer count, default the preset's), STAVE_BENCH_THREADS (OpenMP
// threads, default all), STAVE_FIXTURES (fixture folder).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "stave/engine.h"
#include "synth/synth_release.h"
#include "util/mapped_file.h"

namespace {
namespace fs = std::filesystem;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string fixtures_dir() { return env_or("STAVE_FIXTURES", STAVE_DEFAULT_FIXTURES); }

// The synth release, written once per run into a temporary folder (removed at exit).
const std::string& synth_dir() {
  static const std::string dir = [] {
    const std::string preset = env_or("STAVE_BENCH_PRESET", "tiny");
    const std::string out = (fs::temp_directory_path() / ("stave-bench-decide-" + preset)).string();
    fs::remove_all(out);
    stave::synth::SynthOptions o;
    o.preset = preset;
    if (const std::string l = env_or("STAVE_BENCH_LAYERS", ""); !l.empty()) o.layers = std::stoi(l);
    o.out = out;
    o.seed = 7;
    o.tokenizer = fixtures_dir() + "/public/model-bf16/tokenizer.json";
    stave::synth::synth_release(o);
    std::atexit([] { fs::remove_all(synth_dir()); });
    return out;
  }();
  return dir;
}

enum Model { kFixtureBf16, kFixtureMxfp4, kSynth };

const stave::Engine& engine(Model model, stave::Precision precision) {
  static std::map<std::pair<int, int>, std::unique_ptr<stave::Engine>> cache;
  auto& e = cache[{model, static_cast<int>(precision)}];
  if (!e) {
    stave::EngineOptions o;
    o.model = model == kFixtureBf16    ? fixtures_dir() + "/public/model-bf16"
              : model == kFixtureMxfp4 ? fixtures_dir() + "/public/model-mxfp4"
                                       : synth_dir();
    o.precision = precision;
    if (const std::string t = env_or("STAVE_BENCH_THREADS", ""); !t.empty()) o.threads = std::stoi(t);
    e = stave::Engine::load(o);
  }
  return *e;
}

// The docs example (three questions) with its state repeated to about `words` words
// (≈ 1.3 tokens a word).
std::string request_of_about(int64_t words) {
  auto r = nlohmann::ordered_json::parse(
      stave::read_file(fixtures_dir() + "/public/cases/000-docs-example/request.json"));
  const std::string sentence = r["state"].get<std::string>() + " ";
  std::string state;
  for (int64_t w = 0; w < words; w += 11) state += sentence;  // 11 words a sentence
  r["state"] = state;
  return r.dump();
}

void BM_Decide(benchmark::State& st, Model model, stave::Precision precision) {
  const stave::Engine& e = engine(model, precision);
  const std::string request = request_of_about(st.range(0));
  stave::DecideOptions o;
  o.max_length = 32768;
  int64_t tokens = 0;
  for (auto _ : st) {
    const stave::Decision d = e.decide(request, o);
    tokens = d.usage.input_tokens;
    benchmark::DoNotOptimize(d.json.data());
  }
  st.counters["tokens"] = static_cast<double>(tokens);
  st.counters["tok/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
}

void lengths(benchmark::internal::Benchmark* b) {
  for (int64_t words : {100, 1000, 4000}) b->Arg(words);
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_Decide, fixture_bf16_exact, kFixtureBf16, stave::Precision::kExact)->Apply(lengths);
BENCHMARK_CAPTURE(BM_Decide, fixture_bf16_fast, kFixtureBf16, stave::Precision::kFast)->Apply(lengths);
BENCHMARK_CAPTURE(BM_Decide, fixture_mxfp4_exact, kFixtureMxfp4, stave::Precision::kExact)->Apply(lengths);
BENCHMARK_CAPTURE(BM_Decide, fixture_mxfp4_fast, kFixtureMxfp4, stave::Precision::kFast)->Apply(lengths);
BENCHMARK_CAPTURE(BM_Decide, synth_exact, kSynth, stave::Precision::kExact)->Apply(lengths);
BENCHMARK_CAPTURE(BM_Decide, synth_fast, kSynth, stave::Precision::kFast)->Apply(lengths);

}  // namespace
