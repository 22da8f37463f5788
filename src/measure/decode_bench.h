// `stave bench-decode`: generation speed of one release as a language model, per prompt length
// (like llama-bench's `-p N -n M` pairs): time to first token (prefill of N random tokens + the
// lm_head + the first pick) and decode tokens/s after it, greedy with eos ignored so every run
// decodes exactly `new_tokens` (ids only: GenerationOptions::detokenize off). Batch 1 is one LanguageModel::generate; a batch B > 1 is B
// requests (different random prompts of the same length) submitted together to a
// GenerationScheduler bounded at B, so they decode in shared decode_batch steps (continuous
// batching as `stave serve` runs it).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "measure/stats.h"
#include "stave/options.h"

namespace stave::measure {

struct DecodeBenchOptions {
  std::string model;
  std::vector<int64_t> prompt_tokens{128, 512};
  int64_t new_tokens = 128;
  std::vector<int64_t> batches{1};  // concurrent requests per run
  int repeat = 3;
  int warmup = 1;
  int threads = 0;  // 0: all cores
  Precision precision = Precision::kFast;
  std::string device = "cpu";
  double fp8_cache_gib = 0;  // EngineOptions::fp8_cache_gib
  uint64_t seed = 1;  // of the random prompt ids
  std::function<void(const std::string&)> log;
};

struct DecodeLengthResult {
  int64_t prompt_tokens = 0;
  int64_t batch = 1;
  int64_t new_tokens = 0;
  int repeat = 0;
  Summary ttft_ms;              // call to the first picked token (every request of every run)
  // Batch 1: (new_tokens − 1) / (last token − first token). Batch B: all B requests' tokens
  // after their first, B · (new_tokens − 1), over the time from the earliest first token to the
  // latest last one (aggregate decode throughput of the batch).
  Summary decode_tokens_per_s;
  Summary inter_token_ms;       // every gap between consecutive tokens of every timed run
};

struct DecodeReport {
  std::string model, precision, device;
  int threads = 0;
  int64_t vocab = 0;
  double load_ms = 0;
  std::vector<DecodeLengthResult> results;
};

// Throws stave::Error for a bad model or option (new_tokens < 2, a prompt length < 1, …).
DecodeReport run_decode_bench(const DecodeBenchOptions& options);

std::string markdown_table(const DecodeReport& report);
nlohmann::ordered_json to_json(const DecodeReport& report);

}  // namespace stave::measure
