#include "export/qwen35_gguf.h"

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/gguf_writer.h"
#include "io/release.h"
#include "formats/mxfp4.h"
#include "formats/quark_export.h"
#include "formats/tensor_names.h"
#include "stave/errors.h"
#include "util/bf16.h"
#include "util/mapped_file.h"

namespace stave::gguf {
namespace {

// One exported tensor: where its values come from and how they are rearranged.
struct Plan {
  std::string gguf_name;
  std::string source;               // release tensor (logical name, ".weight" for linears)
  std::vector<int64_t> ne;          // ggml order
  TensorType type = TensorType::kF32;
  std::vector<int64_t> row_perm;    // new row -> old row (empty: identity)
  std::vector<int64_t> unit_perm;   // new column unit -> old unit (empty: identity)
  int64_t unit = 0;                 // columns per unit
  enum class Value { kCopy, kPlusOne, kNegExp } value = Value::kCopy;
};

// V heads grouped by K head [k][r][d] → tiled [r][k][d] (llama.cpp's _reorder_v_heads), as a
// permutation new index → old index over n_v·d entries.
std::vector<int64_t> v_head_perm(int64_t n_k, int64_t n_v, int64_t d) {
  const int64_t per_k = n_v / n_k;
  std::vector<int64_t> perm(static_cast<size_t>(n_v * d));
  for (int64_t r = 0; r < per_k; ++r)
    for (int64_t k = 0; k < n_k; ++k)
      for (int64_t e = 0; e < d; ++e) perm[static_cast<size_t>((r * n_k + k) * d + e)] = (k * per_k + r) * d + e;
  return perm;
}

std::vector<int64_t> offset_perm(int64_t prefix, const std::vector<int64_t>& tail) {
  std::vector<int64_t> p(static_cast<size_t>(prefix));
  for (int64_t i = 0; i < prefix; ++i) p[static_cast<size_t>(i)] = i;
  for (int64_t v : tail) p.push_back(prefix + v);
  return p;
}

float value_at(const TensorRef& t, int64_t i) {
  switch (t.dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, t.data + 4 * i, 4);
      return f;
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      return bf16_to_f32(h);
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      return f16_to_f32(h);
    }
    default:
      throw Error(ErrorKind::kUnsupported, t.name + ": dtype " + std::string(dtype_name(t.dtype)) + " cannot be exported");
  }
}

struct Exporter {
  const Release& rel;
  bool mxfp4 = false;

  bool quantized(const std::string& source) const {
    const std::string scale = source.substr(0, source.size() - 7) + ".weight_scale";
    return mxfp4 && rel.weights.contains(scale);
  }

  // Writes rows of a 2-D weight [rows, cols] in the GGUF type of the plan.
  void produce_matrix(const Plan& p, const Writer::WriteFn& write) const {
    const int64_t cols = p.ne[0], rows = p.ne.size() > 1 ? p.ne[1] : 1;
    auto src_col = [&](int64_t c) {  // new column -> old column
      if (p.unit_perm.empty()) return c;
      return p.unit_perm[static_cast<size_t>(c / p.unit)] * p.unit + c % p.unit;
    };
    auto src_row = [&](int64_t r) { return p.row_perm.empty() ? r : p.row_perm[static_cast<size_t>(r)]; };
    if (p.type == TensorType::kMXFP4) {
      const TensorRef& codes = rel.weights.get(p.source);
      const TensorRef& scales = rel.weights.get(p.source.substr(0, p.source.size() - 7) + ".weight_scale");
      const int64_t nb = cols / 32;
      const bool block_perm = p.unit_perm.empty() || p.unit % 32 == 0;
      std::vector<uint8_t> out(static_cast<size_t>(nb * kMxfp4BlockBytes));
      std::vector<float> deq(static_cast<size_t>(cols)), perm(static_cast<size_t>(cols));
      std::vector<uint8_t> rq_codes(static_cast<size_t>(cols / 2)), rq_scales(static_cast<size_t>(nb));
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t o = src_row(r);
        const uint8_t* crow = codes.data + o * (cols / 2);
        const uint8_t* srow = scales.data + o * nb;
        if (block_perm) {
          for (int64_t b = 0; b < nb; ++b) {
            const int64_t ob = src_col(b * 32) / 32;
            quark_block_to_gguf(crow + ob * 16, srow[ob], out.data() + b * kMxfp4BlockBytes);
          }
        } else {
          // A column unit smaller than a block (tiny shapes only): the permuted row mixes
          // blocks, so it is requantized — exact for the values, not for the bytes.
          mxfp4::dequantize_row(crow, srow, cols, deq.data());
          for (int64_t c = 0; c < cols; ++c) perm[static_cast<size_t>(c)] = deq[static_cast<size_t>(src_col(c))];
          quark::quantize_row_mxfp4(perm.data(), cols, rq_codes.data(), rq_scales.data());
          for (int64_t b = 0; b < nb; ++b)
            quark_block_to_gguf(rq_codes.data() + b * 16, rq_scales[static_cast<size_t>(b)], out.data() + b * kMxfp4BlockBytes);
        }
        write(out.data(), out.size());
      }
      return;
    }
    const TensorRef& t = rel.weights.get(p.source);
    if (p.type == TensorType::kBF16 && t.dtype == DType::kBF16) {
      std::vector<uint8_t> row(static_cast<size_t>(cols * 2));
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* s = t.data + src_row(r) * cols * 2;
        if (p.unit_perm.empty()) {
          write(s, row.size());
          continue;
        }
        for (int64_t c = 0; c < cols; ++c) std::memcpy(&row[static_cast<size_t>(2 * c)], s + 2 * src_col(c), 2);
        write(row.data(), row.size());
      }
      return;
    }
    // F32 output (1-D parameters, norms, conv1d) with the converter's value transforms.
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t o = src_row(r);
      for (int64_t c = 0; c < cols; ++c) {
        float v = value_at(t, o * cols + src_col(c));
        if (p.value == Plan::Value::kPlusOne) v += 1.0f;
        else if (p.value == Plan::Value::kNegExp) v = -std::exp(v);
        row[static_cast<size_t>(c)] = v;
      }
      write(row.data(), row.size() * 4);
    }
  }
};

struct Vocab {
  std::vector<std::string> tokens, merges;
  std::vector<int32_t> types;
};

// tokenizer.json (byte-level BPE) → GGUF "gpt2" vocabulary of exactly n_rows tokens.
Vocab read_vocab(const std::string& path, int64_t n_rows) {
  auto j = nlohmann::json::parse(read_file(path), nullptr, false);
  if (j.is_discarded() || !j.contains("model") || !j["model"].contains("vocab"))
    throw Error(ErrorKind::kInvalidModel, path + ": not a BPE tokenizer.json");
  Vocab v;
  v.tokens.assign(static_cast<size_t>(n_rows), "");
  v.types.assign(static_cast<size_t>(n_rows), 0);
  auto place = [&](int64_t id, const std::string& s, int32_t type) {
    if (id < 0 || id >= n_rows)
      throw Error(ErrorKind::kInvalidModel, path + ": token id " + std::to_string(id) + " is outside the embedding's " +
                                                std::to_string(n_rows) + " rows");
    v.tokens[static_cast<size_t>(id)] = s;
    v.types[static_cast<size_t>(id)] = type;
  };
  for (auto it = j["model"]["vocab"].begin(); it != j["model"]["vocab"].end(); ++it) place(it.value().get<int64_t>(), it.key(), 1);
  if (j.contains("added_tokens"))
    for (const auto& a : j["added_tokens"]) place(a["id"].get<int64_t>(), a["content"].get<std::string>(), a.value("special", false) ? 3 : 4);
  for (int64_t i = 0; i < n_rows; ++i)
    if (v.types[static_cast<size_t>(i)] == 0) {  // rows past the tokenizer: padding, as the converter names them
      v.tokens[static_cast<size_t>(i)] = "[PAD" + std::to_string(i) + "]";
      v.types[static_cast<size_t>(i)] = 5;
    }
  for (const auto& m : j["model"].value("merges", nlohmann::json::array()))
    v.merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  return v;
}

// The plans read the tensors of the one tensor table (formats/tensor_names), each in the table's
// shape, and leave none of the backbone's out: a name spelled differently here is an error.
void check_plans_against_table(const std::vector<Plan>& plans, const ModelConfig& config) {
  std::map<std::string, const ExpectedTensor*> table;
  const std::vector<ExpectedTensor> expected = expected_backbone_tensors(config);
  for (const ExpectedTensor& e : expected) table[e.name] = &e;
  for (const Plan& p : plans) {
    auto it = table.find(p.source);
    if (it == table.end())
      throw Error(ErrorKind::kInternal, "GGUF export reads " + p.source + ", which the tensor table does not list");
    int64_t plan_elems = 1, table_elems = 1;
    for (int64_t n : p.ne) plan_elems *= n;
    for (int64_t n : it->second->shape) table_elems *= n;
    if (plan_elems != table_elems)
      throw Error(ErrorKind::kInternal, "GGUF export sizes " + p.source + " as " + std::to_string(plan_elems) +
                                            " values; the tensor table as " + std::to_string(table_elems));
    table.erase(it);
  }
  for (const auto& [name, e] : table)
    if (e->role != TensorRole::kLmHead)  // lm_head is optional (tied embeddings)
      throw Error(ErrorKind::kInternal, "GGUF export leaves out " + name + " of the tensor table");
}

}  // namespace

void quark_block_to_gguf(const uint8_t q[16], uint8_t scale, uint8_t out[17]) {
  auto code = [&](int i) { return (i % 2 == 0) ? (q[i / 2] & 0x0F) : (q[i / 2] >> 4); };
  out[0] = scale;  // E8M0 in both: 2^(e-127) (ggml's table is doubled and its scale halved)
  for (int j = 0; j < 16; ++j) out[1 + j] = static_cast<uint8_t>(code(j) | (code(j + 16) << 4));
}

ExportSummary export_qwen35_gguf(const ExportOptions& o) {
  if (o.out.empty()) throw Error(ErrorKind::kInvalidRequest, "--out is required");
  auto release = open_release(o.model);
  const Release& rel = *release;
  const TextConfig& t = rel.config.text;
  const int64_t H = t.hidden_size, d = t.head_dim, nk = t.linear_num_key_heads, nv = t.linear_num_value_heads;
  const int64_t dk = t.linear_key_head_dim, dv = t.linear_value_head_dim;
  if (dk != dv)
    throw Error(ErrorKind::kUnsupported, "llama.cpp's qwen35 needs linear_key_head_dim == linear_value_head_dim (here " +
                                             std::to_string(dk) + " and " + std::to_string(dv) + ")");
  if (nk <= 0 || nv % nk != 0) throw Error(ErrorKind::kUnsupported, "linear_num_value_heads must be a multiple of linear_num_key_heads");
  // llama.cpp derives the layer pattern from full_attention_interval: check ours fits it.
  int64_t interval = 0;
  for (size_t i = 0; i < t.layer_types.size(); ++i)
    if (t.layer_types[i] == LayerType::kFullAttention) {
      interval = static_cast<int64_t>(i) + 1;
      break;
    }
  if (interval == 0) interval = static_cast<int64_t>(t.layer_types.size()) + 1;
  for (size_t i = 0; i < t.layer_types.size(); ++i)
    if ((t.layer_types[i] == LayerType::kFullAttention) != ((static_cast<int64_t>(i) + 1) % interval == 0))
      throw Error(ErrorKind::kUnsupported, "llama.cpp's qwen35 needs every n-th layer to be full attention; layer " +
                                               std::to_string(i) + " breaks the pattern");

  Exporter ex{rel, !rel.config.quantization_config_json.empty()};
  std::vector<Plan> plans;
  auto weight = [&](const std::string& gguf, const std::string& src, int64_t rows, int64_t cols,
                    std::vector<int64_t> row_perm = {}, std::vector<int64_t> unit_perm = {}, int64_t unit = 0) {
    Plan p{gguf, src, {cols, rows}, TensorType::kBF16, std::move(row_perm), std::move(unit_perm), unit};
    if (ex.quantized(src)) p.type = TensorType::kMXFP4;
    else if (rel.weights.get(src).dtype != DType::kBF16) p.type = TensorType::kF32;
    plans.push_back(std::move(p));
  };
  auto vec = [&](const std::string& gguf, const std::string& src, int64_t n, Plan::Value v = Plan::Value::kCopy,
                 std::vector<int64_t> perm = {}) {
    Plan p{gguf, src, {n}, TensorType::kF32, {}, std::move(perm), 1, v};
    plans.push_back(std::move(p));
  };

  weight("token_embd.weight", kTextPrefix + "embed_tokens.weight", t.vocab_size, H);
  const auto vperm_rows = v_head_perm(nk, nv, dv);
  const auto vperm_heads = v_head_perm(nk, nv, 1);
  for (int64_t l = 0; l < t.num_hidden_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".", s = text_layer_prefix(l);
    vec(b + "attn_norm.weight", s + "input_layernorm.weight", H, Plan::Value::kPlusOne);
    vec(b + "post_attention_norm.weight", s + "post_attention_layernorm.weight", H, Plan::Value::kPlusOne);
    if (t.layer_types[static_cast<size_t>(l)] == LayerType::kLinearAttention) {
      const std::string a = s + "linear_attn.";
      const int64_t conv = t.linear_conv_dim();
      const auto qkv_perm = offset_perm(2 * t.linear_key_dim(), vperm_rows);
      weight(b + "attn_qkv.weight", a + "in_proj_qkv.weight", conv, H, qkv_perm);
      weight(b + "attn_gate.weight", a + "in_proj_z.weight", t.linear_value_dim(), H, vperm_rows);
      weight(b + "ssm_beta.weight", a + "in_proj_b.weight", nv, H, vperm_heads);
      weight(b + "ssm_alpha.weight", a + "in_proj_a.weight", nv, H, vperm_heads);
      Plan c;
      c.gguf_name = b + "ssm_conv1d.weight";
      c.source = a + "conv1d.weight";
      c.ne = {t.linear_conv_kernel_dim, conv};
      c.type = TensorType::kF32;
      c.row_perm = qkv_perm;
      plans.push_back(c);
      vec(b + "ssm_a", a + "A_log", nv, Plan::Value::kNegExp, vperm_heads);
      vec(b + "ssm_dt.bias", a + "dt_bias", nv, Plan::Value::kCopy, vperm_heads);
      vec(b + "ssm_norm.weight", a + "norm.weight", dv);
      weight(b + "ssm_out.weight", a + "out_proj.weight", H, t.linear_value_dim(), {}, vperm_heads, dv);
    } else {
      const std::string a = s + "self_attn.";
      weight(b + "attn_q.weight", a + "q_proj.weight", 2 * t.num_attention_heads * d, H);
      weight(b + "attn_k.weight", a + "k_proj.weight", t.num_key_value_heads * d, H);
      weight(b + "attn_v.weight", a + "v_proj.weight", t.num_key_value_heads * d, H);
      weight(b + "attn_output.weight", a + "o_proj.weight", H, t.num_attention_heads * d);
      vec(b + "attn_q_norm.weight", a + "q_norm.weight", d, Plan::Value::kPlusOne);
      vec(b + "attn_k_norm.weight", a + "k_norm.weight", d, Plan::Value::kPlusOne);
    }
    weight(b + "ffn_gate.weight", s + "mlp.gate_proj.weight", t.intermediate_size, H);
    weight(b + "ffn_up.weight", s + "mlp.up_proj.weight", t.intermediate_size, H);
    weight(b + "ffn_down.weight", s + "mlp.down_proj.weight", H, t.intermediate_size);
  }
  vec("output_norm.weight", kTextPrefix + "norm.weight", H, Plan::Value::kPlusOne);
  if (rel.weights.contains("lm_head.weight")) weight("output.weight", "lm_head.weight", t.vocab_size, H);
  check_plans_against_table(plans, rel.config);

  Writer w;
  w.add_string("general.architecture", "qwen35");
  w.add_string("general.name", rel.dir.substr(rel.dir.find_last_of('/') + 1));
  w.add_string("general.source", "stave export-gguf");
  const std::string k = "qwen35.";
  w.add_u32(k + "context_length", static_cast<uint32_t>(t.max_position_embeddings));
  w.add_u32(k + "embedding_length", static_cast<uint32_t>(H));
  w.add_u32(k + "feed_forward_length", static_cast<uint32_t>(t.intermediate_size));
  w.add_u32(k + "block_count", static_cast<uint32_t>(t.num_hidden_layers));
  w.add_u32(k + "attention.head_count", static_cast<uint32_t>(t.num_attention_heads));
  w.add_u32(k + "attention.head_count_kv", static_cast<uint32_t>(t.num_key_value_heads));
  w.add_u32(k + "attention.key_length", static_cast<uint32_t>(d));
  w.add_u32(k + "attention.value_length", static_cast<uint32_t>(d));
  w.add_f32(k + "attention.layer_norm_rms_epsilon", static_cast<float>(t.rms_norm_eps));
  w.add_f32(k + "rope.freq_base", static_cast<float>(t.rope_theta));
  w.add_u32(k + "rope.dimension_count", static_cast<uint32_t>(t.rotary_dim()));
  w.add_i32_array(k + "rope.dimension_sections", {static_cast<int32_t>(t.mrope_section[0]), static_cast<int32_t>(t.mrope_section[1]),
                                                  static_cast<int32_t>(t.mrope_section[2]), 0});
  w.add_u32(k + "ssm.conv_kernel", static_cast<uint32_t>(t.linear_conv_kernel_dim));
  w.add_u32(k + "ssm.state_size", static_cast<uint32_t>(dk));
  w.add_u32(k + "ssm.group_count", static_cast<uint32_t>(nk));
  w.add_u32(k + "ssm.time_step_rank", static_cast<uint32_t>(nv));
  w.add_u32(k + "ssm.inner_size", static_cast<uint32_t>(t.linear_value_dim()));
  w.add_u32(k + "full_attention_interval", static_cast<uint32_t>(interval));
  Vocab vocab = read_vocab(rel.tokenizer_path, t.vocab_size);
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "qwen2");  // the Qwen3 tokenizer Clef releases ship
  w.add_string_array("tokenizer.ggml.tokens", vocab.tokens);
  w.add_i32_array("tokenizer.ggml.token_type", vocab.types);
  w.add_string_array("tokenizer.ggml.merges", vocab.merges);
  for (int32_t id = 0; id < static_cast<int32_t>(vocab.tokens.size()); ++id) {
    if (vocab.tokens[static_cast<size_t>(id)] == "<|im_end|>") w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(id));
    if (vocab.tokens[static_cast<size_t>(id)] == "<|endoftext|>") w.add_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(id));
  }
  w.add_bool("tokenizer.ggml.add_bos_token", false);

  for (const auto& p : plans) w.add_tensor(p.gguf_name, p.ne, p.type);
  uint64_t done = 0, all = 0;
  for (const auto& ti : w.tensors()) all += ti.nbytes;
  w.write(o.out, [&](size_t i, const Writer::WriteFn& write) {
    ex.produce_matrix(plans[i], [&](const void* p, size_t n) {
      write(p, n);
      done += n;
      if (o.progress) o.progress(done, all);
    });
  });
  return {plans.size(), all, ex.mxfp4 ? "mxfp4" : "bf16"};
}

}  // namespace stave::gguf
