// One request's generation, token by token, whoever runs the model for it: the request's checks
// and budget, its sampler (own settings and seed), stop tokens and stop strings, streamed text
// and logprobs. LanguageModel::generate drives one alone (prefill, then decode_step);
// GenerationScheduler drives many through shared decode_batch steps. Both go through this class,
// so a request's tokens, text and finish reason depend only on the logits it is given.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/language_model_impl.h"
#include "generate/completion_text.h"
#include "generate/sampler.h"

namespace stave {

class GenerationSequence {
 public:
  // Runs a callback of the request (on_token, on_logprobs, on_text): at once when generating
  // alone; on the request's own thread when a scheduler runs the model.
  using Deliver = std::function<void(std::function<void()>)>;

  // Checks the request (a non-empty prompt inside the context, max_tokens ≥ 0, logprobs in
  // range, the sampling settings): stave::Error kInvalidRequest / kRequestTooLarge otherwise.
  // `options` (its callbacks) must outlive the sequence.
  GenerationSequence(const LanguageModel::Impl& model, std::span<const int32_t> prompt, const GenerationOptions& options,
                     const TextCallback& on_text);

  const std::vector<int32_t>& prompt() const { return g_.prompt_token_ids; }
  // Room the KV caches reserve up front: the prompt and a modest completion (they grow past it).
  int64_t expected_tokens() const;
  // True once the generation has ended (a budget of 0 tokens ends before the prefill).
  bool ended() const { return ended_; }
  // The id the next decode step feeds (the last one picked).
  int32_t last_token() const { return g_.completion_token_ids.back(); }
  // The client's cancel flag is set.
  bool cancelled() const;

  // Picks the next token from the model's logits at the last position (modified: penalties,
  // temperature), hands out its callbacks through `deliver` and returns true when the generation
  // has ended (a stop token, a stop string or the token budget).
  bool take(std::span<float> logits, const Deliver& deliver);
  // Releases the text held back and returns the result.
  Generation finish(const Deliver& deliver);

 private:
  const LanguageModel::Impl& m_;
  const GenerationOptions& options_;
  const TextCallback& on_text_;
  Sampler sampler_;
  std::vector<int32_t> stop_ids_;
  int64_t max_tokens_ = 0;
  Generation g_;
  CompletionText text_;
  std::vector<int32_t> visible_;  // generated ids whose text counts (a stop token's does not)
  std::vector<float> raw_;        // with logprobs: the step's logits before the sampler changes them
  bool ended_ = false;
};

}  // namespace stave
