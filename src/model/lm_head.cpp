#include "model/lm_head.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "formats/tensor_names.h"
#include "formats/quark_config.h"
#include "stave/errors.h"

namespace stave {
namespace {

LinearWeight bind_lm_head(const Release& release) {
  const TextConfig& t = release.config.text;
  if (!release.weights.contains(kLmHead + ".weight")) {
    if (!t.tie_word_embeddings)
      throw Error(ErrorKind::kInvalidModel, release.dir + " has no lm_head.weight (and tie_word_embeddings is false): "
                                                          "it cannot be used as a language model");
    // Tied: the embedding table read as a linear; it is never an MXFP4 W4A4 layer.
    return bind_linear(release.weights, kEmbedTokens, t.vocab_size, t.hidden_size, false);
  }
  const std::optional<quant::QuantPlan> plan = quant::QuantPlan::from_model_config(release.config);
  return bind_linear(release.weights, kLmHead, t.vocab_size, t.hidden_size, plan ? &*plan : nullptr);
}

}  // namespace

LmHead::LmHead(const Release& release) : weight_(bind_lm_head(release)) {}

void LmHead::logits(const Backend& backend, const float* hidden, int64_t rows, float* out) const {
  if (rows <= 0) return;
  if (backend.device() == Device::kCpu) {
    backend.linear(weight_, hidden, rows, out);
    return;
  }
  // A device backend: the rows go up and the logits come back; the weight stays resident there
  // after the first call (a Clef lm_head is 2.5 GB of BF16: streaming it from host memory for
  // every generated token is what a device keeps from happening).
  const Tensor x = backend.empty({rows, weight_.in}), y = backend.empty({rows, weight_.out});
  backend.copy_from_host(hidden, x);
  backend.linear(weight_, x.data<float>(), rows, y.data<float>());
  backend.copy_to_host(y, out);
}

double token_nll(const float* logits, int64_t n, int64_t target) {
  float mx = logits[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, logits[i]);
  // exp in float (each term within an ulp; terms ≤ 1), summed in double.
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(logits[i] - mx);
  return static_cast<double>(mx) + std::log(sum) - static_cast<double>(logits[target]);
}

std::vector<double> LmHead::nll(const Backend& backend, const float* hidden, int64_t rows,
                                std::span<const int32_t> targets, int64_t row_block) const {
  if (row_block < 1) throw Error(ErrorKind::kInternal, "nll: row_block must be positive");
  if (static_cast<int64_t>(targets.size()) != rows)
    throw Error(ErrorKind::kInternal, "nll: " + std::to_string(targets.size()) + " targets for " +
                                          std::to_string(rows) + " positions");
  const int64_t V = vocab(), H = weight_.in;
  for (int64_t t = 0; t < rows; ++t)
    if (targets[t] < 0 || targets[t] >= V)
      throw Error(ErrorKind::kInvalidRequest, "token id " + std::to_string(targets[t]) + " at position " +
                                                  std::to_string(t + 1) + " is outside the vocabulary [0, " +
                                                  std::to_string(V) + ")");
  std::vector<double> out(static_cast<size_t>(rows));
  std::vector<float> block(static_cast<size_t>(std::min(rows, row_block) * V));
  for (int64_t r0 = 0; r0 < rows; r0 += row_block) {
    const int64_t n = std::min(row_block, rows - r0);
    logits(backend, hidden + r0 * H, n, block.data());
    for (int64_t r = 0; r < n; ++r) out[r0 + r] = token_nll(block.data() + r * V, V, targets[r0 + r]);
  }
  return out;
}

}  // namespace stave
