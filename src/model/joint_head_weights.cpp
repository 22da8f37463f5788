#include "model/joint_head_weights.h"

#include <map>
#include <string>

#include "formats/linear_weight.h"
#include "formats/tensor_names.h"
#include "ops/head_ops.h"
#include "ops/reference.h"
#include "stave/errors.h"

namespace stave {

void HeadLinear::apply(const float* x, int64_t rows, float* y) const {
  ref::matmul_nt(x, rows, in, weight.data(), out, bias.empty() ? nullptr : bias.data(), y);
}

void HeadLayerNorm::apply(const float* x, int64_t rows, float* y) const {
  ref::layer_norm(x, rows, dim(), weight.data(), bias.data(), kEps, y);
}

ref::MultiheadAttentionWeights HeadAttention::view(int64_t embed_dim, int64_t heads) const {
  ref::MultiheadAttentionWeights w;
  w.embed_dim = embed_dim;
  w.heads = heads;
  w.in_proj_weight = in_proj_weight.data();
  w.in_proj_bias = in_proj_bias.data();
  w.out_proj_weight = out_proj_weight.data();
  w.out_proj_bias = out_proj_bias.data();
  return w;
}

namespace {

void check_config(const JointHeadConfig& c) {
  auto positive = [&](int64_t v, const char* field) {
    if (v <= 0)
      throw Error(ErrorKind::kInvalidModel,
                  std::string("joint_head_config.json: ") + field + " must be positive, got " + std::to_string(v));
  };
  positive(c.hidden_size, "hidden_size");
  positive(c.width, "width");
  positive(c.heads, "heads");
  positive(c.feedforward, "feedforward");
  if (c.routing_layers < 0 || c.layers < 0)
    throw Error(ErrorKind::kInvalidModel, "joint_head_config.json: layer counts must not be negative");
  if (c.width % c.heads != 0)
    throw Error(ErrorKind::kInvalidModel, "joint_head_config.json: width " + std::to_string(c.width) +
                                              " is not divisible by heads " + std::to_string(c.heads));
}

// Reads the tensors named by expected_head_tensors, checking shapes exactly.
class HeadTensorReader {
 public:
  HeadTensorReader(const JointHeadConfig& config, const TensorStore& store) : store_(store) {
    for (const ExpectedTensor& t : expected_head_tensors(config)) expected_[t.name] = t.shape;
  }

  std::vector<float> read(const std::string& name) const {
    auto it = expected_.find(name);
    if (it == expected_.end()) throw Error(ErrorKind::kInternal, "joint head: " + name + " is not a head tensor");
    const TensorRef* t = store_.find(name);
    if (!t) throw Error(ErrorKind::kInvalidModel, "joint_head.safetensors has no tensor " + name);
    if (t->shape != it->second) {
      TensorRef want;
      want.shape = it->second;
      throw Error(ErrorKind::kInvalidModel, "joint_head.safetensors: " + name + " has shape " + t->shape_string() +
                                                ", expected " + want.shape_string());
    }
    return read_f32(*t, t->numel());
  }

  HeadLinear linear(const std::string& prefix, int64_t out, int64_t in, bool has_bias) const {
    HeadLinear l;
    l.out = out;
    l.in = in;
    l.weight = read(prefix + ".weight");
    if (has_bias) l.bias = read(prefix + ".bias");
    return l;
  }

  HeadLayerNorm layer_norm(const std::string& prefix) const {
    return HeadLayerNorm{read(prefix + ".weight"), read(prefix + ".bias")};
  }

  HeadAttention attention(const std::string& prefix) const {
    return HeadAttention{read(prefix + "in_proj_weight"), read(prefix + "in_proj_bias"),
                         read(prefix + "out_proj.weight"), read(prefix + "out_proj.bias")};
  }

  float scalar(const std::string& name) const { return read(name).at(0); }

 private:
  const TensorStore& store_;
  std::map<std::string, std::vector<int64_t>> expected_;
};

}  // namespace

JointHeadWeights load_joint_head_weights(const JointHeadConfig& config, const TensorStore& head) {
  check_config(config);
  const HeadTensorReader r(config, head);
  const int64_t H = config.hidden_size, W = config.width, F = config.feedforward;
  JointHeadWeights w;
  w.config = config;
  w.hidden_norm = r.layer_norm("hidden_norm");
  w.memory_projection = r.linear("memory_projection", W, H, false);
  w.question_projection = r.linear("question_projection", W, H, false);
  w.option_question_projection = r.linear("option_question_projection", W, H, false);
  w.global_projection = r.linear("global_projection", W, H, false);
  w.option_context_projection = r.linear("option_context_projection", W, H, false);
  w.option_lexical_projection = r.linear("option_lexical_projection", W, H, false);
  w.type_embedding = r.read("type_embedding.weight");
  for (int64_t l = 0; l < config.routing_layers; ++l) {
    const std::string p = "evidence_layers." + std::to_string(l) + ".";
    EvidenceRoutingLayerWeights e;
    e.query_norm = r.layer_norm(p + "query_norm");
    e.memory_norm = r.layer_norm(p + "memory_norm");
    e.attention = r.attention(p + "attention.");
    e.feedforward_norm = r.layer_norm(p + "feedforward_norm");
    e.feedforward_in = r.linear(p + "feedforward.0", F, W, true);
    e.feedforward_out = r.linear(p + "feedforward.3", W, F, true);
    w.evidence_layers.push_back(std::move(e));
  }
  w.option_summary_norm = r.layer_norm("option_summary_norm");
  for (int64_t l = 0; l < config.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    FieldDecoderLayerWeights d;
    d.self_attn = r.attention(p + "self_attn.");
    d.cross_attn = r.attention(p + "multihead_attn.");
    d.linear1 = r.linear(p + "linear1", F, W, true);
    d.linear2 = r.linear(p + "linear2", W, F, true);
    d.norm1 = r.layer_norm(p + "norm1");
    d.norm2 = r.layer_norm(p + "norm2");
    d.norm3 = r.layer_norm(p + "norm3");
    w.layers.push_back(std::move(d));
  }
  w.field_norm = r.layer_norm("field_norm");
  w.option_norm = r.layer_norm("option_norm");
  w.residual_in = r.linear("residual_scorer.0", W, 4 * W, true);
  w.residual_out = r.linear("residual_scorer.3", 1, W, true);
  w.prior_logit_scale = r.scalar("prior_logit_scale");
  w.joint_logit_scale = r.scalar("joint_logit_scale");
  w.residual_gate = r.scalar("residual_gate");
  return w;
}

}  // namespace stave
