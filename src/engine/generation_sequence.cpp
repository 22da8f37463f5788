#include "engine/generation_sequence.h"

#include <algorithm>

#include "generate/logprobs.h"

namespace stave {

GenerationSequence::GenerationSequence(const LanguageModel::Impl& model, std::span<const int32_t> prompt,
                                       const GenerationOptions& options, const TextCallback& on_text)
    : m_(model), options_(options), on_text_(on_text), sampler_(options.sampling), text_(options.stop) {
  if (prompt.empty()) throw Error(ErrorKind::kInvalidRequest, "the prompt is empty");
  if (options.max_tokens < 0) throw Error(ErrorKind::kInvalidRequest, "max_tokens must not be negative");
  if (options.logprobs < -1 || options.logprobs > kMaxTopLogprobs)
    throw Error(ErrorKind::kInvalidRequest, "logprobs must be -1 (none) or 0 … " + std::to_string(kMaxTopLogprobs) +
                                                ", got " + std::to_string(options.logprobs));
  if (!options.detokenize && !options.stop.empty())
    throw Error(ErrorKind::kInvalidRequest, "stop strings need the text: they cannot be used without detokenizing");
  stop_ids_ = options.ignore_eos ? std::vector<int32_t>{} : m_.eos;
  stop_ids_.insert(stop_ids_.end(), options.stop_token_ids.begin(), options.stop_token_ids.end());
  g_.prompt_token_ids.assign(prompt.begin(), prompt.end());
  g_.finish_reason = "length";
  // The context ends at max_position_embeddings: generation stops there ("length").
  const int64_t prompt_len = static_cast<int64_t>(prompt.size());
  const int64_t context = m_.backbone->config().max_position_embeddings;
  if (prompt_len >= context)
    throw Error(ErrorKind::kRequestTooLarge, "the prompt has " + std::to_string(prompt_len) +
                                                 " tokens; the model's context is " + std::to_string(context));
  max_tokens_ = std::min(options.max_tokens, context - prompt_len);
  ended_ = max_tokens_ == 0;
}

int64_t GenerationSequence::expected_tokens() const {
  return static_cast<int64_t>(g_.prompt_token_ids.size()) + std::min<int64_t>(max_tokens_, 256);
}

bool GenerationSequence::cancelled() const {
  return options_.cancel && options_.cancel->load(std::memory_order_relaxed);
}

bool GenerationSequence::take(std::span<float> logits, const Deliver& deliver) {
  if (options_.logprobs >= 0) raw_.assign(logits.begin(), logits.end());
  const int32_t id = sampler_.pick(logits, g_.prompt_token_ids, g_.completion_token_ids);
  g_.completion_token_ids.push_back(id);
  if (options_.on_token) deliver([this, id] { options_.on_token(id); });
  if (options_.logprobs >= 0) {
    g_.logprobs.push_back(step_logprobs(raw_, id, options_.logprobs));
    if (options_.on_logprobs) deliver([this, step = g_.logprobs.back()] { options_.on_logprobs(step); });
  }
  if (std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end()) {
    g_.finish_reason = "stop";
    return ended_ = true;
  }
  if (!options_.detokenize) return ended_ = static_cast<int64_t>(g_.completion_token_ids.size()) >= max_tokens_;
  if (!m_.textless(id)) visible_.push_back(id);  // a padded row's id is kept among the ids, adds no text
  if (text_.update(m_.tokenizer->decode(visible_))) {
    g_.finish_reason = "stop";
    return ended_ = true;
  }
  std::string piece = text_.take_ready(false);
  if (!piece.empty() && on_text_) deliver([this, piece = std::move(piece)] { on_text_(piece); });
  return ended_ = static_cast<int64_t>(g_.completion_token_ids.size()) >= max_tokens_;
}

Generation GenerationSequence::finish(const Deliver& deliver) {
  std::string piece = text_.take_ready(true);
  if (!piece.empty() && on_text_) deliver([this, piece = std::move(piece)] { on_text_(piece); });
  g_.text = text_.text();
  return std::move(g_);
}

}  // namespace stave
