// The language-model head: the untied lm_head [vocab, hidden] (BF16 in Clef releases; the
// embedding when the config ties them) applied to the backbone's final-normed hidden states,
// and what is computed from its logits: next-token negative log-likelihoods (perplexity) and
// the logits of one position (generation). Logits over the whole vocabulary are formed a block
// of rows at a time, so scoring L positions never holds [L, vocab] floats.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "io/release.h"
#include "formats/linear_weight.h"
#include "ops/backend.h"

namespace stave {

class LmHead {
 public:
  // Binds lm_head.weight of the release (or the token embedding when tie_word_embeddings is
  // set and there is no lm_head); the release must outlive the head.
  explicit LmHead(const Release& release);

  int64_t vocab() const { return weight_.out; }
  int64_t hidden() const { return weight_.in; }

  // logits[rows, vocab] = hidden[rows, hidden] · Wᵀ on `backend` (exact: the reference's
  // fp32 linear; fast: the backend's bf16 kernels). `hidden` and `out` are host memory on every
  // backend; a device backend copies the rows up and the logits back.
  void logits(const Backend& backend, const float* hidden, int64_t rows, float* out) const;

  // nll[t] = −log softmax(logits(hidden row t))[targets[t]] for t < rows (natural log), with the
  // log-sum-exp in double. Every target must be in [0, vocab) (else Error kInvalidRequest).
  // Logits are formed `row_block` rows at a time (memory: row_block × vocab floats).
  std::vector<double> nll(const Backend& backend, const float* hidden, int64_t rows, std::span<const int32_t> targets,
                          int64_t row_block = 64) const;

 private:
  LinearWeight weight_;
};

// −log softmax(logits)[target] of one row of n logits, the log-sum-exp accumulated in double.
double token_nll(const float* logits, int64_t n, int64_t target);

}  // namespace stave
