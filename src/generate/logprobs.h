// Log-probabilities of one decode step: the log-softmax of the model's raw logits over the full
// vocabulary (log-sum-exp in double), the picked token's value and the most likely tokens.
#pragma once
#include <cstdint>
#include <span>

#include "stave/language_model.h"

namespace stave {

// The log-probabilities that `logits` [vocab] give: `chosen`'s and the `top_n` largest (most
// likely first; on a tie the lower id first; one pass, for top_n up to a few tens). top_n is
// clamped to the vocabulary. A value below kLogprobFloor (−inf included) reads as
// kLogprobFloor, so that every value is a finite JSON number.
StepLogprobs step_logprobs(std::span<const float> logits, int32_t chosen, int64_t top_n);

inline constexpr double kLogprobFloor = -9999.0;  // vLLM's floor for the same reason

}  // namespace stave
