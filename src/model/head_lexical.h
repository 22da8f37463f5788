// The output-embedding table the joint head reads its lexical option vectors from
// (Clef release code): the untied lm_head [vocab, H], used only as rows
// to gather, never multiplied. Rows are widened (F32/BF16/F16) or dequantized exactly (Quark
// MXFP4 codes + E8M0 scales) one at a time, so nothing of size [L, vocab] is ever formed.
#pragma once
#include <cstdint>

#include "io/release.h"
#include "formats/linear_weight.h"

namespace stave {

class OutputEmbeddingTable {
 public:
  OutputEmbeddingTable() = default;
  // `rows` views a [vocab, dim] weight (rows.out = vocab, rows.in = dim); its storage must
  // outlive the table.
  explicit OutputEmbeddingTable(LinearWeight rows);

  // lm_head.weight of the release (embed_tokens when the config ties them and there is no
  // lm_head). The release must outlive the table.
  static OutputEmbeddingTable bind(const Release& release);

  int64_t vocab() const { return rows_.out; }
  int64_t dim() const { return rows_.in; }
  const LinearWeight& weight() const { return rows_; }

  // out[dim] = mean of the rows of ids[0..count) (count >= 1; every id must be in
  // [0, vocab), else stave::Error(kInvalidRequest)). Sums in double, divides once.
  void mean_rows(const int32_t* ids, int64_t count, float* out) const;

 private:
  LinearWeight rows_;
};

}  // namespace stave
