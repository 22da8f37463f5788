// `stave bench`: decision latency, prefill throughput and memory of one release, per prompt
// length, on synthetic requests of exactly that many tokens (like llama-bench's -p N).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "measure/stats.h"
#include "measure/synthetic_request.h"
#include "stave/options.h"

namespace stave::measure {

struct BenchOptions {
  std::string model;
  std::vector<int64_t> prompt_tokens{256, 512, 2048};
  int questions = 1;  // the Clef prompt with one question is 137 tokens: the shortest request
  int repeat = 5;
  int warmup = 1;
  int threads = 0;  // 0: all cores
  // Decisions per timed run. Above 1 they go through Engine::decide_batch (one packed prefill
  // on a GPU, one after another on the CPU): the throughput side, where batch 1 is latency.
  int batch = 1;
  Precision precision = Precision::kFast;
  std::string device = "cpu";  // where the backbone (and in fast mode the head's products) run
  double fp8_cache_gib = 0;    // EngineOptions::fp8_cache_gib
  std::optional<ImageSize> image;
  std::function<void(const std::string&)> log;  // progress lines (stderr in the CLI)
};

struct LengthResult {
  int64_t prompt_tokens = 0;   // encoded length of the request (== the target)
  int64_t image_tokens = 0;
  int repeat = 0;
  int batch = 1;  // decisions per run; the times below are per run (per batch)
  Summary total_ms, backbone_ms, head_ms, encode_ms, vision_ms;
  double prefill_tokens_per_s = 0;   // batch · prompt_tokens / p50(backbone + vision)
  double decision_tokens_per_s = 0;  // batch · prompt_tokens / p50(total)
  uint64_t peak_rss_bytes = 0;       // process peak so far (after this length)
  uint64_t weights_resident_bytes = 0;
};

struct BenchReport {
  std::string model, model_name, weight_format;
  int64_t num_layers = 0, hidden_size = 0;
  bool synthetic = false;
  double load_ms = 0;
  uint64_t weights_mapped_bytes = 0;       // file mappings of the release in this process
  uint64_t weights_resident_after_load = 0;
  int threads = 0;
  std::string precision, isa, backend;
  std::string image;  // "WxH" or ""
  int questions = 0;
  std::vector<LengthResult> results;
};

// Throws stave::Error for a bad model or option.
BenchReport run_bench(const BenchOptions& options);

// The requests run_bench times: per length of o.prompt_tokens, one of exactly that many tokens
// (o.questions questions, o.image) by the tokenizer of the release in `dir`, with its image
// tokens. The release is opened only for its tokenizer and configs, then closed.
struct BenchRequest {
  SyntheticRequest request;
  int64_t image_tokens = 0;
};
std::vector<BenchRequest> bench_requests(const BenchOptions& o, const std::string& dir);

// "128,512,2048" → {128, 512, 2048}; throws stave::Error(kInvalidRequest) naming the option
// (`option`, e.g. "--prompt-tokens") and the bad item.
std::vector<int64_t> parse_token_list(const std::string& text, const std::string& option = "--prompt-tokens");

std::string markdown_table(const BenchReport& report);
nlohmann::ordered_json to_json(const BenchReport& report);

}  // namespace stave::measure
