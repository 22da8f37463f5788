// Continuous batching of text generation: one loop owns the language model's backbone for
// generation and advances every running request by one token per iteration in ONE
// Backbone::decode_batch step, so requests share the linear layers' weight reads (the decode
// limit on a GPU is weight bandwidth). Each iteration
//   (a) admits waiting requests while fewer than `max_batch` run, at most `prefill_tokens` prompt
//       tokens per iteration so a burst of long prompts does not stall the running ones for long
//       (the first waiting request is always admitted). The prompts admitted together are
//       prefilled in ONE packed pass (Backbone::prefill_batch: the linear layers read their
//       weights once for all of them, each prompt fills its own SequenceState); one admitted
//       alone takes Backbone::prefill. Each request is checked first (Backbone::check_extend), so
//       one the backbone refuses (an id outside the vocabulary, too long) fails alone; if the
//       packed pass itself fails, each of its requests is prefilled again alone;
//   (b) runs one decode_batch step over all running sequences, each at its own position;
//   (c) gives each sequence its logits: its own sampler picks the token, which streams to its
//       caller; sequences that finished (stop token, stop string, max tokens) or whose client
//       cancelled leave, the others keep going. New requests join between steps.
// A request's tokens are what it gets generating alone (GenerationSequence is shared with
// LanguageModel::generate; decode_batch rows equal decode_step's — tests/test_generation_scheduler.cpp).
//
// Callers block in generate() on their own thread, which runs the request's callbacks (on_token,
// on_logprobs, on_text): a slow client (a stream that waits on its socket) delays only itself,
// never the shared step. The scheduler calls the backbone over whatever backend the model runs on.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "stave/language_model.h"

namespace stave {

struct SchedulerOptions {
  int64_t max_batch = 32;        // sequences decoded together at most (≥ 1); more wait
  int64_t prefill_tokens = 8192; // prompt tokens prefilled per iteration (past the first request)
  // Called on the loop's thread after each decode step with the number of sequences it advanced
  // (metrics); must not block.
  std::function<void(int64_t batch)> on_step;
  // Called on the loop's thread after each prefill pass with the number of prompts it ran
  // together (> 1: a packed Backbone::prefill_batch) and their tokens; must not block.
  std::function<void(int64_t sequences, int64_t tokens)> on_prefill;
};

class GenerationScheduler {
 public:
  // `model` must outlive the scheduler. Starts the loop's thread.
  GenerationScheduler(std::shared_ptr<const LanguageModel> model, SchedulerOptions options = {});
  // Stops the loop; requests still running or waiting end with stave::Error(kInternal).
  ~GenerationScheduler();
  GenerationScheduler(const GenerationScheduler&) = delete;
  GenerationScheduler& operator=(const GenerationScheduler&) = delete;

  // As LanguageModel::generate (same checks, results, callbacks and cancellation — throws
  // stave::DecisionCancelled once options.cancel is set), with the model's work done by the loop
  // together with the other requests. Blocks; callable from any number of threads.
  Generation generate(std::span<const int32_t> prompt_ids, const GenerationOptions& options,
                      const TextCallback& on_text = {});

  int64_t running() const;  // sequences in the decode batch now
  int64_t waiting() const;  // submitted, not yet prefilled
  const SchedulerOptions& options() const { return options_; }

  struct Request;

 private:
  void loop();
  // (a): prefills `admitted` (moved from waiting); the ones that go on join `running_`.
  void admit(std::vector<std::shared_ptr<Request>>& admitted);
  // The prefill of `batch` (checked requests with fresh states): packed when there are several,
  // each alone again if that fails. Returns each one's last hidden row [n, hidden]; a request
  // whose own prefill failed is failed and removed from `batch` (its row with it).
  std::vector<float> prefill(std::vector<std::shared_ptr<Request>>& batch);
  // (c) for `batch` and its last hidden rows [n, hidden]: each request's pick. Those that ended
  // (finished, or failed with the error) leave `batch` and are returned, to be completed once
  // running() no longer counts them.
  using Ended = std::vector<std::pair<std::shared_ptr<Request>, std::exception_ptr>>;
  Ended pick(std::vector<std::shared_ptr<Request>>& batch, const std::vector<float>& hidden);
  static void complete(Ended& ended);
  // (b) + (c): one decode_batch step over `running_`, then each sequence's pick.
  void step();
  // Drops cancelled sequences from `running_`.
  void drop_cancelled();

  std::shared_ptr<const LanguageModel> model_;
  SchedulerOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable work_;  // a request arrived, or stop
  std::deque<std::shared_ptr<Request>> waiting_;
  bool stop_ = false;
  std::vector<std::shared_ptr<Request>> running_;  // the loop's own
  std::atomic<int64_t> running_count_{0};
  std::thread thread_;
};

}  // namespace stave
