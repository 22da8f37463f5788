#include "model/head_lexical.h"

#include <vector>

#include "formats/tensor_names.h"
#include "ops/reference.h"
#include "stave/errors.h"

namespace stave {

OutputEmbeddingTable::OutputEmbeddingTable(LinearWeight rows) : rows_(std::move(rows)) {}

OutputEmbeddingTable OutputEmbeddingTable::bind(const Release& release) {
  const TextConfig& t = release.config.text;
  std::string prefix = kLmHead;
  if (!release.weights.contains(kLmHead + ".weight") && t.tie_word_embeddings)
    prefix = kEmbedTokens;
  // The lm_head is a table here, not a W4A4 linear: no activation quantization applies.
  return OutputEmbeddingTable(bind_linear(release.weights, prefix, t.vocab_size, t.hidden_size,
                                          /*quantize_input_if_mxfp4=*/false));
}

void OutputEmbeddingTable::mean_rows(const int32_t* ids, int64_t count, float* out) const {
  if (count <= 0) throw Error(ErrorKind::kInternal, "mean of an empty set of output-embedding rows");
  const int64_t D = dim();
  std::vector<double> sum(static_cast<size_t>(D), 0.0);
  std::vector<float> row(static_cast<size_t>(D));
  for (int64_t t = 0; t < count; ++t) {
    const int64_t id = ids[t];
    if (id < 0 || id >= vocab())
      throw Error(ErrorKind::kInvalidRequest, "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                                  std::to_string(vocab()) + ") of " + rows_.name);
    ref::weight_row_f32(rows_, id, row.data());
    for (int64_t c = 0; c < D; ++c) sum[c] += row[c];
  }
  for (int64_t c = 0; c < D; ++c) out[c] = static_cast<float>(sum[c] / static_cast<double>(count));
}

}  // namespace stave
