// A Clef release used as a plain language model: the Qwen3.5 backbone plus its untied lm_head
// over the full vocabulary. Perplexity of token windows, and (chat) generation.
//
//   auto lm = stave::LanguageModel::load({.model = "EliovpAI/clef-MXFP4", .precision = stave::Precision::kExact});
//   stave::Perplexity p = lm->perplexity(windows);   // windows: token-id arrays
//   std::cout << p.ppl << "\n";
//
// Everything here runs the CPU backbone; methods are const and thread-safe (each call keeps its
// own sequence state).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stave/errors.h"
#include "stave/options.h"

namespace stave {

// One scored window of N tokens: the N − 1 next-token predictions (positions 1 … N − 1, each
// given every token before it), natural-log NLL.
struct PerplexityWindow {
  int64_t tokens = 0;        // N, the window's length
  double mean_nll = 0.0;     // mean of nll
  double ppl = 0.0;          // exp(mean_nll)
  std::vector<double> nll;   // N − 1 values: nll[i] = −log p(token i+1 | tokens 0 … i)
};

struct Perplexity {
  std::vector<PerplexityWindow> windows;
  double mean_nll = 0.0;     // over every predicted token of every window (token-weighted)
  double ppl = 0.0;          // exp(mean_nll)
};

// Sampling; temperature 0 is greedy (argmax, the lowest id on a tie).
struct SamplingOptions {
  double temperature = 1.0;
  double top_p = 1.0;                // nucleus: the smallest set of top tokens with mass ≥ top_p
  int64_t top_k = 0;                 // 0: off
  double min_p = 0.0;                // drop tokens with p < min_p · p_max
  double repetition_penalty = 1.0;   // HF/CTRL: logits of seen tokens (prompt + output) ÷ (or ×, if < 0) it
  double presence_penalty = 0.0;     // OpenAI: − presence_penalty for each token generated at least once
  double frequency_penalty = 0.0;    // OpenAI: − frequency_penalty × its count among generated tokens
  std::optional<uint64_t> seed;      // fixed seed: the same output for the same input
};

// Log-probabilities of one generated token's step: the model's own distribution, i.e. the
// log-softmax of the raw logits over the full vocabulary — before repetition / presence /
// frequency penalties, temperature, top-k, top-p and min-p (what vLLM reports by default, its
// logprobs mode "raw_logprobs"). Natural log; a value below −9999 (−inf) reads as −9999.
struct TokenLogprob {
  int32_t id = 0;
  double logprob = 0.0;
};
struct StepLogprobs {
  int32_t id = 0;                 // the token picked at this step
  double logprob = 0.0;           // its log-probability
  std::vector<TokenLogprob> top;  // the most likely tokens, most likely first (ties: lower id first)
};
inline constexpr int64_t kMaxTopLogprobs = 20;

struct GenerationOptions {
  int64_t max_tokens = 256;          // new tokens at most (finish_reason "length")
  SamplingOptions sampling;
  std::vector<std::string> stop;     // stop strings: generation ends before the first one (not in text)
  std::vector<int32_t> stop_token_ids;  // besides the model's eos ids (generation_config.json, else <|im_end|>)
  bool ignore_eos = false;
  // false: ids only — no detokenization (Generation::text stays empty, on_text is not called,
  // `stop` must be empty), e.g. for timing the model alone (stave bench-decode). (An id the
  // lm_head picks that no token has — padded rows — adds no text either way.)
  bool detokenize = true;
  // Set (by another thread) to stop: checked between decode steps; generate then throws
  // stave::DecisionCancelled. The server sets it when the client goes away.
  const std::atomic<bool>* cancel = nullptr;
  // Called with each generated id as it is picked (before its text is released), e.g. for
  // inter-token latency.
  std::function<void(int32_t)> on_token;
  // ≥ 0: Generation::logprobs holds each generated token's StepLogprobs with this many most
  // likely tokens (0 … kMaxTopLogprobs; else Error kInvalidRequest); −1: none.
  int64_t logprobs = -1;
  // With logprobs ≥ 0: called with each step's log-probabilities right after on_token (before
  // that token's text is released), e.g. to stream them beside the text.
  std::function<void(const StepLogprobs&)> on_logprobs;
};

struct Generation {
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> completion_token_ids;  // generated ids; an eos / stop token that ended it is included
                                              // (as HF generate and vLLM report it), its text is not
  std::string text;                           // detokenized completion, cut before a stop string
  std::string finish_reason;                  // "stop" (eos, stop token or stop string) or "length"
  std::vector<StepLogprobs> logprobs;         // one per completion token when options.logprobs ≥ 0
};

// Receives the completion text as it grows, in pieces that are whole UTF-8 (a token that ends
// inside a multi-byte character is held back until the character completes).
using TextCallback = std::function<void(std::string_view piece)>;

class GenerationScheduler;

class LanguageModel {
 public:
  // options.model, precision, threads and device ("cpu", or "cuda" in builds with CUDA) are used.
  static std::unique_ptr<LanguageModel> load(const EngineOptions& options);
  ~LanguageModel();
  LanguageModel(const LanguageModel&) = delete;
  LanguageModel& operator=(const LanguageModel&) = delete;

  // Scores each window from its own start (no context carried between windows). Every window
  // needs at least 2 tokens and ids in [0, vocab); else stave::Error(kInvalidRequest).
  Perplexity perplexity(std::span<const std::vector<int32_t>> windows) const;

  // The release tokenizer (HF semantics, no special tokens added) and its decoding. An id of the
  // model's vocabulary that no token has (the lm_head's rows are padded past the tokenizer's) has
  // no text, as in Hugging Face's decode; an id outside the vocabulary is stave::Error.
  std::vector<int32_t> tokenize(std::string_view text) const;
  std::string detokenize(const std::vector<int32_t>& ids) const;
  // One token alone: its text (a piece of a multi-byte character shows as U+FFFD; a special
  // token as its content) and its exact bytes (the byte-level bytes; a special token: its content).
  std::string token_text(int32_t id) const;
  std::string token_bytes(int32_t id) const;

  // The evaluation protocol of the model card: non-overlapping windows of `ctx` tokens from
  // the start of `ids`, at most `max_windows` of them (a last, shorter piece is dropped).
  static std::vector<std::vector<int32_t>> split_windows(std::span<const int32_t> ids, int64_t ctx,
                                                         int64_t max_windows);

  // The release's chat_template.jinja rendered for an OpenAI chat body (or {"messages": [...]}):
  // messages, tools, add_generation_prompt (default true), chat_template_kwargs.
  std::string render_chat(std::string_view request_json) const;

  // Continues prompt_ids. on_text (optional) receives the completion text as it is decided.
  Generation generate(std::span<const int32_t> prompt_ids, const GenerationOptions& options,
                      const TextCallback& on_text = {}) const;
  // render_chat, tokenize, generate.
  Generation chat(std::string_view request_json, const GenerationOptions& options,
                  const TextCallback& on_text = {}) const;

  // The ids that end generation by default: generation_config.json's eos_token_id (one or a
  // list) when present, else the chat template's end-of-turn token <|im_end|>.
  const std::vector<int32_t>& eos_token_ids() const;
  int64_t vocab_size() const;

  struct Impl;

 private:
  friend class GenerationScheduler;  // runs the backbone and lm_head for many requests at once
  explicit LanguageModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The request's own sampling settings (an OpenAI chat body: max_tokens / max_completion_tokens,
// temperature, top_p, top_k, min_p, seed, stop, presence_penalty, frequency_penalty,
// repetition_penalty) on top of `defaults`. A field of the wrong type is an Error naming it.
GenerationOptions generation_options_from_request(std::string_view request_json, GenerationOptions defaults = {});

}  // namespace stave
