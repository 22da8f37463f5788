#include "model/joint_head.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>

#include "ops/head_memory.h"
#include "ops/head_ops.h"
#include "ops/multihead_attention.h"
#include "ops/reference.h"
#include "stave/errors.h"
#include "util/stage_timer.h"

namespace stave {
namespace {

using Matrix = std::vector<float>;  // row-major [rows, cols]

Matrix zeros(int64_t rows, int64_t cols) { return Matrix(static_cast<size_t>(rows * cols), 0.0f); }

void add_inplace(Matrix& x, const Matrix& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

std::string span_text(const Span& s) {
  return "[" + std::to_string(s.first) + ", " + std::to_string(s.second) + ")";
}

void check_span(const Span& s, int64_t L, const std::string& what) {
  if (s.first < 0 || s.second > L)
    throw Error(ErrorKind::kInvalidRequest,
                what + " span " + span_text(s) + " is outside the sequence of " + std::to_string(L) + " tokens");
  if (s.first >= s.second) throw Error(ErrorKind::kInvalidRequest, what + " span " + span_text(s) + " is empty");
}

void check_inputs(int64_t L, const std::vector<int32_t>& input_ids, const std::vector<HeadQuestion>& questions) {
  if (L <= 0) throw Error(ErrorKind::kInvalidRequest, "joint head: the record has no tokens");
  if (static_cast<int64_t>(input_ids.size()) != L)
    throw Error(ErrorKind::kInvalidRequest, "joint head: " + std::to_string(input_ids.size()) +
                                                " input ids for hidden states of " + std::to_string(L) + " rows");
  if (questions.empty()) throw Error(ErrorKind::kInvalidRequest, "joint head: the record has no questions");
  for (const HeadQuestion& q : questions) {
    const int type = q.type;
    if (type < 0 || type > 2)
      throw Error(ErrorKind::kInvalidRequest, "question " + q.id + ": unknown type " + std::to_string(type));
    check_span(q.question_span, L, "question " + q.id + ": question");
    if (q.option_spans.empty()) throw Error(ErrorKind::kInvalidRequest, "question " + q.id + " has no options");
    if (q.option_spans.size() != q.option_ids.size())
      throw Error(ErrorKind::kInvalidRequest, "question " + q.id + " has " + std::to_string(q.option_spans.size()) +
                                                  " option spans but " + std::to_string(q.option_ids.size()) +
                                                  " option ids");
    for (size_t j = 0; j < q.option_spans.size(); ++j)
      check_span(q.option_spans[j], L, "question " + q.id + ": option " + q.option_ids[j]);
  }
}

// y[rows, out] = x · Wᵀ + b on `backend`: the reference backend keeps ref::matmul_nt (exact
// precision), a fast backend uses its own product kernels.
void apply_linear(const Backend& backend, const HeadLinear& l, const float* x, int64_t rows, float* y) {
  backend.matmul_nt(x, rows, l.in, l.weight.data(), l.out, l.bias.empty() ? nullptr : l.bias.data(), y);
}

// x ← x + FFN(norm(x)) with FFN = out(GELU(in(·))): the feed-forward block shared by the
// routing layers (feedforward.0/.3) and the decoder layers (linear1/linear2).
void feedforward_residual(const Backend& backend, Matrix& x, int64_t rows, const HeadLayerNorm& norm,
                          const HeadLinear& in, const HeadLinear& out) {
  Matrix normed(x.size());
  norm.apply(x.data(), rows, normed.data());
  Matrix inner = zeros(rows, in.out);
  apply_linear(backend, in, normed.data(), rows, inner.data());
  ref::gelu_erf_inplace(inner.data(), static_cast<int64_t>(inner.size()));
  Matrix y = zeros(rows, out.out);
  apply_linear(backend, out, inner.data(), rows, y.data());
  add_inplace(x, y);
}

// x ← x + MHA(norm(x)) over the rows themselves (the decoder layers' field self-attention). The
// input and output projections run through the backend, whose GPU form keeps their weights
// resident (before, the host read the 16 MB of fp32 weights per layer on every decision); the
// rows × rows attention between them stays on the host. q, k and v come out of one product
// (project_key_values): each output value is the same dot product as the per-block projections'
// (ref::mha_attend), so the reference backend's bits do not change.
void self_attention_residual(const Backend& backend, Matrix& x, int64_t rows, const HeadLayerNorm& norm,
                             const ref::MultiheadAttentionWeights& mha) {
  const int64_t E = mha.embed_dim;
  Matrix normed(x.size());
  norm.apply(x.data(), rows, normed.data());
  Matrix q = zeros(rows, E);
  const ref::ProjectedKeyValues kv = project_key_values(backend, mha, normed.data(), rows, q.data());
  Matrix context = zeros(rows, E);
  ref::mha_context(mha, q.data(), rows, kv, context.data());
  Matrix y = zeros(rows, E);
  backend.matmul_nt(context.data(), rows, E, mha.out_proj_weight, E, mha.out_proj_bias, y.data());
  add_inplace(x, y);
}

// x ← x + MHA_a(norm(x), memory): attention `a` of the head memory.
void memory_attention_residual(Matrix& x, int64_t rows, const HeadLayerNorm& norm, const HeadMemory& memory,
                               size_t a) {
  Matrix normed(x.size());
  norm.apply(x.data(), rows, normed.data());
  Matrix y(x.size());
  memory.attend(a, normed.data(), rows, y.data());
  add_inplace(x, y);
}

LayerNormView view_of(const HeadLayerNorm& n) {
  return LayerNormView{n.weight.data(), n.bias.data(), n.dim(), HeadLayerNorm::kEps};
}

float capped_scale(float log_scale) {
  // exp(min(param, ln 100)): the reference clamps in the parameter's fp32 before exp.
  return std::exp(std::min(log_scale, static_cast<float>(std::log(100.0))));
}

}  // namespace

JointHead::JointHead(const Release& release, const Backend& backend)
    : JointHead(release.head_config, release.head, OutputEmbeddingTable::bind(release), backend) {
  if (release.head_config.hidden_size != release.config.text.hidden_size)
    throw Error(ErrorKind::kInvalidModel, "joint_head_config.json hidden_size " +
                                              std::to_string(release.head_config.hidden_size) +
                                              " differs from the backbone's hidden_size " +
                                              std::to_string(release.config.text.hidden_size));
}

JointHead::JointHead(const JointHeadConfig& config, const TensorStore& head_tensors,
                     OutputEmbeddingTable output_embedding, const Backend& backend)
    : weights_(load_joint_head_weights(config, head_tensors)),
      output_embedding_(std::move(output_embedding)),
      backend_(&backend) {
  if (output_embedding_.dim() != config.hidden_size)
    throw Error(ErrorKind::kInvalidModel, "the output embedding rows have " + std::to_string(output_embedding_.dim()) +
                                              " values, the joint head expects hidden_size " +
                                              std::to_string(config.hidden_size));
}

HeadMemorySpec JointHead::memory_spec() const {
  const JointHeadWeights& w = weights_;
  HeadMemorySpec spec;
  spec.hidden_size = w.config.hidden_size;
  spec.width = w.config.width;
  spec.hidden_norm = view_of(w.hidden_norm);
  spec.memory_projection = w.memory_projection.weight.data();
  for (const EvidenceRoutingLayerWeights& layer : w.evidence_layers)
    spec.attentions.push_back({true, view_of(layer.memory_norm), layer.attention.view(w.config.width, w.config.heads)});
  for (const FieldDecoderLayerWeights& layer : w.layers)
    spec.attentions.push_back({false, LayerNormView{}, layer.cross_attn.view(w.config.width, w.config.heads)});
  return spec;
}

std::vector<std::vector<float>> JointHead::forward(HiddenRows hidden, int64_t L, const std::vector<int32_t>& input_ids,
                                                   const std::vector<HeadQuestion>& questions) const {
  check_inputs(L, input_ids, questions);
  if (hidden.empty()) throw Error(ErrorKind::kInternal, "joint head: no hidden states");
  const JointHeadWeights& w = weights_;
  const int64_t H = w.config.hidden_size, W = w.config.width, heads = w.config.heads;
  const int64_t Q = static_cast<int64_t>(questions.size());

  StageTimer stages("STAVE_HEAD_STAGES");  // profiling aid, see util/stage_timer.h

  // 1. LayerNorm over the backbone states and the memory over all tokens (both held by the
  //    backend's head memory).
  stages.enter("memory");
  const std::unique_ptr<HeadMemory> memory = backend_->head_memory(memory_spec(), hidden, L);

  // 2-4. The global vector (the last normed row), question vectors, option context and lexical
  //      vectors (span means), from the rows of every span brought in at once.
  stages.enter("span rows");
  std::vector<int64_t> first_option(static_cast<size_t>(Q) + 1, 0);  // option rows of question i
  for (int64_t i = 0; i < Q; ++i)
    first_option[i + 1] = first_option[i] + static_cast<int64_t>(questions[i].option_spans.size());
  const int64_t N = first_option[Q];
  Matrix question_vectors = zeros(Q, H), context = zeros(N, H), lexical = zeros(N, H);
  std::vector<int64_t> question_of(static_cast<size_t>(N));
  // The spans whose rows come in: the global row, then each question's span and its options'.
  // Every span but the global row has a mean: its first row in span_rows, where the mean goes and
  // (an option) where its output-embedding mean goes.
  struct SpanMean {
    Span span;
    int64_t row;
    float* mean;
    float* lexical;
  };
  std::vector<Span> spans{{L - 1, L}};
  std::vector<SpanMean> means;
  int64_t span_row_count = 1;
  const auto add_span = [&](const Span& s, float* mean, float* lexical_mean) {
    spans.push_back(s);
    means.push_back({s, span_row_count, mean, lexical_mean});
    span_row_count += s.second - s.first;
  };
  for (int64_t i = 0; i < Q; ++i) {
    add_span(questions[i].question_span, question_vectors.data() + i * H, nullptr);
    for (size_t j = 0; j < questions[i].option_spans.size(); ++j) {
      const int64_t n = first_option[i] + static_cast<int64_t>(j);
      question_of[n] = i;
      add_span(questions[i].option_spans[j], context.data() + n * H, lexical.data() + n * H);
    }
  }
  std::vector<float> span_rows(static_cast<size_t>(span_row_count * H));
  memory->normed_hidden_spans(spans, span_rows.data());
  stages.enter("span means");
  const float* global = span_rows.data();
  // Each mean writes its own rows, so threads change no value.
  std::exception_ptr failed;
#pragma omp parallel for schedule(dynamic) if (means.size() > 4)
  for (size_t t = 0; t < means.size(); ++t) {
    try {
      const SpanMean& m = means[t];
      const int64_t count = m.span.second - m.span.first;
      ref::mean_rows(span_rows.data() + m.row * H, H, 0, count, m.mean);
      if (m.lexical) output_embedding_.mean_rows(input_ids.data() + m.span.first, count, m.lexical);
    } catch (...) {
#pragma omp critical(joint_head_span_means)
      if (!failed) failed = std::current_exception();
    }
  }
  if (failed) std::rethrow_exception(failed);

  // 5. Option queries R = W_oc·c + W_ol·ℓ + W_oq·q (all questions' options stacked).
  stages.enter("option queries");
  Matrix routed = zeros(N, W), lexical_projected = zeros(N, W), question_part = zeros(Q, W);
  apply_linear(*backend_, w.option_context_projection, context.data(), N, routed.data());
  apply_linear(*backend_, w.option_lexical_projection, lexical.data(), N, lexical_projected.data());
  apply_linear(*backend_, w.option_question_projection, question_vectors.data(), Q, question_part.data());
  for (int64_t n = 0; n < N; ++n) {
    const float* qp = question_part.data() + question_of[n] * W;
    for (int64_t c = 0; c < W; ++c) {
      float& r = routed[n * W + c];
      r = (r + lexical_projected[n * W + c]) + qp[c];
    }
  }

  // 6. Evidence routing: every option attends to the layer's normalised memory.
  size_t memory_attention = 0;  // the head memory's attentions, in spec order
  for (const EvidenceRoutingLayerWeights& layer : w.evidence_layers) {
    stages.enter("routing: memory attention");
    memory_attention_residual(routed, N, layer.query_norm, *memory, memory_attention++);
    stages.enter("routing: feed-forward");
    feedforward_residual(*backend_, routed, N, layer.feedforward_norm, layer.feedforward_in, layer.feedforward_out);
  }
  stages.enter("option summary and fields");

  // 7. Option summary per question: softmax_j(<R_ij, b_i> / sqrt(W)) weighted sum of R_ij.
  Matrix base = zeros(Q, W), summary = zeros(Q, W);
  apply_linear(*backend_, w.question_projection, question_vectors.data(), Q, base.data());
  const float inv_sqrt_width = 1.0f / std::sqrt(static_cast<float>(W));
  for (int64_t i = 0; i < Q; ++i) {
    const int64_t n0 = first_option[i], count = first_option[i + 1] - n0;
    std::vector<float> weights(static_cast<size_t>(count));
    for (int64_t j = 0; j < count; ++j)
      weights[j] = ref::dot(routed.data() + (n0 + j) * W, base.data() + i * W, W) * inv_sqrt_width;
    ref::softmax_inplace(weights.data(), count);
    for (int64_t c = 0; c < W; ++c) {
      double s = 0.0;
      for (int64_t j = 0; j < count; ++j) s += static_cast<double>(weights[j]) * routed[(n0 + j) * W + c];
      summary[i * W + c] = static_cast<float>(s);
    }
  }

  // 8. Fields F_i = b_i + LN(s_i) + W_g·g + T[type_i].
  w.option_summary_norm.apply(summary.data(), Q, summary.data());
  Matrix global_part = zeros(1, W);
  apply_linear(*backend_, w.global_projection, global, 1, global_part.data());
  Matrix fields = zeros(Q, W);
  for (int64_t i = 0; i < Q; ++i) {
    const float* type_row = w.type_embedding.data() + static_cast<int64_t>(questions[i].type) * W;
    for (int64_t c = 0; c < W; ++c)
      fields[i * W + c] = ((base[i * W + c] + summary[i * W + c]) + global_part[c]) + type_row[c];
  }

  // 9. Pre-norm decoder layers: fields attend to each other, then to the raw memory.
  for (const FieldDecoderLayerWeights& layer : w.layers) {
    stages.enter("decoder: self-attention");
    self_attention_residual(*backend_, fields, Q, layer.norm1, layer.self_attn.view(W, heads));

    stages.enter("decoder: memory attention");
    memory_attention_residual(fields, Q, layer.norm2, *memory, memory_attention++);
    stages.enter("decoder: feed-forward");
    feedforward_residual(*backend_, fields, Q, layer.norm3, layer.linear1, layer.linear2);
  }
  w.field_norm.apply(fields.data(), Q, fields.data());

  // 10. Scoring: lexical prior + gated (scaled cosine + residual scorer).
  stages.enter("scoring");
  const float prior_scale = capped_scale(w.prior_logit_scale);
  const float joint_scale = capped_scale(w.joint_logit_scale);
  const float gate = ref::sigmoid(w.residual_gate);
  Matrix options = zeros(N, W);
  w.option_norm.apply(routed.data(), N, options.data());

  std::vector<std::vector<float>> logits(static_cast<size_t>(Q));
  std::vector<float> anchor(static_cast<size_t>(H)), lexical_anchor(static_cast<size_t>(H));
  std::vector<float> field_unit(static_cast<size_t>(W)), option_unit(static_cast<size_t>(W));
  for (int64_t i = 0; i < Q; ++i) {
    const int64_t n0 = first_option[i], count = first_option[i + 1] - n0;
    const float* field = fields.data() + i * W;
    for (int64_t c = 0; c < H; ++c) anchor[c] = question_vectors[i * H + c] + global[c];
    ref::l2_normalize_inplace(anchor.data(), H, 1e-12f);
    std::copy(field, field + W, field_unit.begin());
    ref::l2_normalize_inplace(field_unit.data(), W, 1e-8f);

    Matrix features = zeros(count, 4 * W);
    for (int64_t j = 0; j < count; ++j) {
      const float* option = options.data() + (n0 + j) * W;
      float* f = features.data() + j * 4 * W;
      for (int64_t c = 0; c < W; ++c) {
        f[c] = field[c];
        f[W + c] = option[c];
        f[2 * W + c] = field[c] * option[c];
        f[3 * W + c] = std::fabs(field[c] - option[c]);
      }
    }
    Matrix hidden_scores = zeros(count, W), residual = zeros(count, 1);
    apply_linear(*backend_, w.residual_in, features.data(), count, hidden_scores.data());
    ref::gelu_erf_inplace(hidden_scores.data(), count * W);
    apply_linear(*backend_, w.residual_out, hidden_scores.data(), count, residual.data());

    std::vector<float>& out = logits[i];
    out.resize(static_cast<size_t>(count));
    for (int64_t j = 0; j < count; ++j) {
      const float* lex = lexical.data() + (n0 + j) * H;
      std::copy(lex, lex + H, lexical_anchor.begin());
      ref::l2_normalize_inplace(lexical_anchor.data(), H, 1e-12f);
      const float prior = prior_scale * ref::dot(lexical_anchor.data(), anchor.data(), H);

      const float* option = options.data() + (n0 + j) * W;
      std::copy(option, option + W, option_unit.begin());
      ref::l2_normalize_inplace(option_unit.data(), W, 1e-8f);
      const float cosine = ref::dot(field_unit.data(), option_unit.data(), W);

      out[j] = prior + gate * (joint_scale * cosine + residual[j]);
    }
  }
  stages.report("joint head stages", L);
  return logits;
}

}  // namespace stave
