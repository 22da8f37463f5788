// LanguageModel's insides, shared by the files of src/engine that run generation (the model,
// the per-request generation and the continuous-batching scheduler).
#pragma once
#include <omp.h>

#include <memory>
#include <string>
#include <vector>

#include "generate/chat_template.h"
#include "io/release.h"
#include "model/backbone.h"
#include "model/lm_head.h"
#include "ops/backend.h"
#include "stave/language_model.h"
#include "text/tokenizer.h"

namespace stave {

struct LanguageModel::Impl {
  EngineOptions options;
  std::unique_ptr<Release> release;
  std::unique_ptr<Tokenizer> tokenizer;
  // The backbone's backend (cpu or cuda: the same model code); outlives the backbone.
  std::shared_ptr<const Backend> device_backend;
  const Backend* backend = nullptr;
  // The lm_head's product (vocab outputs per row) runs on the vectorized fp32 kernels in both
  // precisions: exact in blocks of fewer than 16 rows, where the CPU linear is fp32 FMA and
  // differs from the reference's MKL sum only by rounding order (docs/lm.md has the measured
  // NLL difference); fast in blocks of 64 (bf16 weights may take the AMX hi/lo split there).
  const Backend* head_backend = nullptr;
  int64_t head_rows = 64;
  std::unique_ptr<Backbone> backbone;
  std::unique_ptr<LmHead> lm_head;
  std::unique_ptr<ChatTemplate> chat_template;  // null when the release has none
  std::string chat_template_error;
  std::vector<int32_t> eos;

  // An id the lm_head can pick that no token has (padded rows): it adds no text.
  bool textless(int32_t id) const;

  void set_threads() const {
    if (options.threads > 0 && omp_get_max_threads() != options.threads) omp_set_num_threads(options.threads);
  }
  // Logits of the last row of `hidden` [rows, H].
  std::vector<float> last_logits(const std::vector<float>& hidden) const {
    const int64_t H = backbone->hidden_size();
    const int64_t rows = static_cast<int64_t>(hidden.size()) / H;
    std::vector<float> logits(static_cast<size_t>(lm_head->vocab()));
    lm_head->logits(*head_backend, hidden.data() + (rows - 1) * H, 1, logits.data());
    return logits;
  }
};

}  // namespace stave
