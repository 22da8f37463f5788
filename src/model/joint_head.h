// Clef's joint schema head in fp32 (Cloudflare's Clef release code): from the backbone's
// final-normed hidden states of every position to one logit per option of every question.
// Every dimension comes from the release's joint_head_config.json.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/release.h"
#include "model/head_lexical.h"
#include "model/joint_head_weights.h"
#include "ops/backend.h"
#include "ops/head_memory.h"
#include "util/token_span.h"

namespace stave {

// One question as the head reads it (the encoder's EncodedQuestion, src/decide, without the
// protocol's types): spans into the record, and the names its errors use.
struct HeadQuestion {
  std::string id;
  int type = 0;  // row of the head's type table: 0 noul, 1 choice, 2 score
  Span question_span;
  std::vector<Span> option_spans;
  std::vector<std::string> option_ids;
};

class JointHead {
 public:
  // Reads joint_head.safetensors to fp32 once and binds the lm_head rows in place: the release
  // must outlive the head. Throws stave::Error(kInvalidModel) naming what does not fit (a
  // missing or mis-shaped tensor, a head hidden_size that is not the backbone's).
  // `backend` runs the work over all L rows (its head_memory: hidden LayerNorm, memory
  // projection, the memory attentions) and the head's products (matmul_nt); it must outlive the
  // head. The reference backend (exact precision) keeps every op in the reference's order.
  explicit JointHead(const Release& release, const Backend& backend = reference_backend());
  // The same from parts (tests, synthetic heads). `output_embedding.dim()` must equal
  // config.hidden_size.
  JointHead(const JointHeadConfig& config, const TensorStore& head_tensors, OutputEmbeddingTable output_embedding,
            const Backend& backend = reference_backend());

  const JointHeadConfig& config() const { return weights_.config; }
  const JointHeadWeights& weights() const { return weights_; }

  // hidden: [L, hidden_size] final-normed backbone output of the whole record (media tokens
  // included), in host memory or lent in the head backend's device memory (HiddenRows);
  // input_ids: the record's L ids; questions: in request order, option spans in the
  // reference's option order. Returns per question the fp32 logits in option order.
  // Throws stave::Error(kInvalidRequest) for spans out of range or empty, a question without
  // options, option ids and spans of different counts, or ids outside the vocabulary.
  std::vector<std::vector<float>> forward(HiddenRows hidden, int64_t L, const std::vector<int32_t>& input_ids,
                                          const std::vector<HeadQuestion>& questions) const;

 private:
  // Views of the weights for the backend's head memory (the L-row work).
  HeadMemorySpec memory_spec() const;

  JointHeadWeights weights_;
  OutputEmbeddingTable output_embedding_;
  const Backend* backend_;
};

}  // namespace stave
