#include "server/openai_metrics.h"

#include <algorithm>

#include <fmt/format.h>

namespace stave::server {

GenerationMetrics::GenerationMetrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}),
      tps_({1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000}),
      batch_({1, 2, 4, 8, 16, 32, 64, 128, 256}),
      prefill_batch_({1, 2, 4, 8, 16, 32, 64, 128, 256}) {}

void GenerationMetrics::observe_first_token(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ttft_.observe(seconds);
}

void GenerationMetrics::observe_inter_token(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  itl_.observe(seconds);
}

void GenerationMetrics::observe_generation(int64_t prompt_tokens, int64_t completion_tokens, double decode_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++generations_;
  prompt_tokens_ += static_cast<uint64_t>(std::max<int64_t>(0, prompt_tokens));
  if (completion_tokens > 1 && decode_seconds > 0) tps_.observe(static_cast<double>(completion_tokens - 1) / decode_seconds);
}

void GenerationMetrics::observe_decode_step(int64_t batch) {
  std::lock_guard<std::mutex> lock(mutex_);
  batch_.observe(static_cast<double>(batch));
}

void GenerationMetrics::observe_prefill(int64_t prompts) {
  std::lock_guard<std::mutex> lock(mutex_);
  prefill_batch_.observe(static_cast<double>(prompts));
}

void GenerationMetrics::render(std::string& out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  out += "# HELP stave_generations_total Generations run by /v1/chat/completions and /v1/completions.\n";
  out += "# TYPE stave_generations_total counter\n";
  out += fmt::format("stave_generations_total {}\n", generations_);
  out += "# HELP stave_generation_prompt_tokens_total Prompt tokens of generations.\n";
  out += "# TYPE stave_generation_prompt_tokens_total counter\n";
  out += fmt::format("stave_generation_prompt_tokens_total {}\n", prompt_tokens_);
  out += "# HELP stave_generated_tokens_total Tokens generated.\n";
  out += "# TYPE stave_generated_tokens_total counter\n";
  out += fmt::format("stave_generated_tokens_total {}\n", completion_tokens_.load(std::memory_order_relaxed));
  out += "# HELP stave_time_to_first_token_seconds Arrival to the first generated token (queue and prefill included).\n";
  out += "# TYPE stave_time_to_first_token_seconds histogram\n";
  ttft_.render(out, "stave_time_to_first_token_seconds");
  out += "# HELP stave_inter_token_latency_seconds Time between consecutive generated tokens.\n";
  out += "# TYPE stave_inter_token_latency_seconds histogram\n";
  itl_.render(out, "stave_inter_token_latency_seconds");
  out += "# HELP stave_generation_tokens_per_second Decode rate of a generation after its first token.\n";
  out += "# TYPE stave_generation_tokens_per_second histogram\n";
  tps_.render(out, "stave_generation_tokens_per_second");
  out += "# HELP stave_generation_decode_batch Sequences advanced together by one decode step (continuous batching).\n";
  out += "# TYPE stave_generation_decode_batch histogram\n";
  batch_.render(out, "stave_generation_decode_batch");
  out += "# HELP stave_generation_prefill_batch Prompts prefilled together by one packed prefill pass (continuous batching).\n";
  out += "# TYPE stave_generation_prefill_batch histogram\n";
  prefill_batch_.render(out, "stave_generation_prefill_batch");
}

void render_generation_gauges(std::string& out, int64_t queued, int64_t running, int64_t capacity, int64_t slots) {
  auto gauge = [&](const char* name, const char* help, int64_t v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, v);
  };
  gauge("stave_generation_queue_depth", "Generation requests waiting for a slot.", queued);
  gauge("stave_generation_queue_capacity", "Generation requests that may wait (--max-queue).", capacity);
  gauge("stave_generation_requests_running", "Generation requests holding a slot (prefilling, decoding or streaming).", running);
  gauge("stave_generation_slots", "Generation requests admitted at once (--max-decode-batch).", slots);
}

}  // namespace stave::server
