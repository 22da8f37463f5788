// Picks the next token from one position's logits: penalties (repetition, presence,
// frequency), then greedy argmax (temperature 0) or sampling from the softmax at the
// temperature restricted by top-k, top-p and min-p, with a seeded generator.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "stave/language_model.h"

namespace stave {

class Sampler {
 public:
  // Checks the options (Error kInvalidRequest naming the one out of range).
  explicit Sampler(const SamplingOptions& options);

  // logits [vocab] are modified (penalties, temperature). `prompt` and `generated` are the ids
  // so far (repetition_penalty looks at both, presence/frequency at the generated ones).
  int32_t pick(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> generated);

  bool greedy() const { return options_.temperature == 0.0; }

 private:
  void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt,
                       std::span<const int32_t> generated) const;
  int32_t sample(std::span<const float> logits);

  SamplingOptions options_;
  std::mt19937_64 rng_;
  std::vector<int32_t> order_;  // scratch: candidate ids sorted by logit
  std::vector<double> probs_;   // scratch: unnormalized probabilities
};

// The first index of the largest value (torch.argmax's tie rule).
int32_t argmax(std::span<const float> logits);

}  // namespace stave
