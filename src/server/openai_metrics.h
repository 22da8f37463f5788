// Prometheus metrics of the generation endpoints (/v1/chat/completions, /v1/completions), in
// the same exposition as server/metrics.h: time to first token, inter-token latency, decode
// tokens per second, the decode and prefill batch sizes, and token counters. Thread-safe.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "server/metrics.h"

namespace stave::server {

class GenerationMetrics {
 public:
  GenerationMetrics();
  // Arrival to the first generated token (queue wait and prefill included).
  void observe_first_token(double seconds);
  // Between two consecutive generated tokens of one request.
  void observe_inter_token(double seconds);
  // One generated token, counted as it is picked (so stave_generated_tokens_total grows while a
  // generation runs, and stops when it stops).
  void count_token() { completion_tokens_.fetch_add(1, std::memory_order_relaxed); }
  // A generation that ended (finished, or stopped with its client gone): its prompt and the
  // decode rate after the first token (tokens − 1 over the time since it).
  void observe_generation(int64_t prompt_tokens, int64_t completion_tokens, double decode_seconds);
  // One decode step of the generation scheduler and how many sequences it advanced together.
  void observe_decode_step(int64_t batch);
  // One prefill pass of the generation scheduler and how many prompts it ran together (packed).
  void observe_prefill(int64_t prompts);
  void render(std::string& out) const;

 private:
  mutable std::mutex mutex_;
  Histogram ttft_, itl_, tps_, batch_, prefill_batch_;
  uint64_t prompt_tokens_ = 0, generations_ = 0;
  std::atomic<uint64_t> completion_tokens_{0};
};

// The generation admission gauges (server.cpp's second AdmissionQueue): requests waiting for a
// slot, holding one, and the bounds (--max-queue, --max-decode-batch).
void render_generation_gauges(std::string& out, int64_t queued, int64_t running, int64_t capacity, int64_t slots);

}  // namespace stave::server
