#include "vision/vision_tower.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "ops/head_ops.h"
#include "ops/reference.h"
#include "stave/errors.h"
#include "vision/vision_embeddings.h"

namespace stave {
namespace {

const std::string kPrefix = "model.visual.";

// The Conv3d weight [E, C, T, P, P] is a linear [E, C*T*P*P] (stride = kernel, no padding).
LinearWeight bind_patch_embed(const TensorStore& store, int64_t E, const VisionConfig& v) {
  const TensorRef& t = store.get(kPrefix + "patch_embed.proj.weight");
  const std::vector<int64_t> want = {E, v.in_channels, v.temporal_patch_size, v.patch_size, v.patch_size};
  if (t.shape != want)
    throw Error(ErrorKind::kInvalidModel, t.name + " has shape " + t.shape_string() + ", expected [" +
                                              std::to_string(E) + ", " + std::to_string(v.in_channels) + ", " +
                                              std::to_string(v.temporal_patch_size) + ", " +
                                              std::to_string(v.patch_size) + ", " + std::to_string(v.patch_size) + "]");
  LinearWeight w;
  w.name = kPrefix + "patch_embed.proj";
  w.out = E;
  w.in = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size;
  w.data = t.data;
  switch (t.dtype) {
    case DType::kBF16: w.format = WeightFormat::kBF16; break;
    case DType::kF32: w.format = WeightFormat::kF32; break;
    case DType::kF16: w.format = WeightFormat::kF16; break;
    default:
      throw Error(ErrorKind::kUnsupported, t.name + " has dtype " + std::string(dtype_name(t.dtype)) +
                                               ", expected BF16, F16 or F32");
  }
  return w;
}


}  // namespace

VisionTower::VisionTower(const ModelConfig& config, const TensorStore& w, const Backend& backend)
    : config_(config.vision), backend_(backend) {
  const VisionConfig& v = config_;
  if (!v.present) throw Error(ErrorKind::kInvalidModel, "config.json has no vision_config");
  const int64_t E = v.hidden_size, I = v.intermediate_size, M = v.spatial_merge_size;
  if (v.num_heads <= 0 || E % v.num_heads != 0)
    throw Error(ErrorKind::kInvalidModel, "vision hidden_size " + std::to_string(E) + " is not divisible by num_heads " +
                                              std::to_string(v.num_heads));
  if (v.hidden_act != "gelu_pytorch_tanh" && v.hidden_act != "gelu")
    throw Error(ErrorKind::kUnsupported, "vision hidden_act '" + v.hidden_act + "' is not supported");
  head_dim_ = E / v.num_heads;
  side_ = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(v.num_position_embeddings))));
  if (side_ * side_ != v.num_position_embeddings)
    throw Error(ErrorKind::kInvalidModel, "vision num_position_embeddings " +
                                              std::to_string(v.num_position_embeddings) + " is not a square");
  patch_dim_ = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size;

  patch_ = bind_patch_embed(w, E, v);
  patch_b_ = read_f32(w, kPrefix + "patch_embed.proj.bias", E);
  patch_.bias = patch_b_.data();
  pos_table_ = read_f32(w, kPrefix + "pos_embed.weight", v.num_position_embeddings * E);

  blocks_.resize(static_cast<size_t>(v.depth));
  for (int64_t i = 0; i < v.depth; ++i) {
    Block& b = blocks_[i];
    const std::string p = kPrefix + "blocks." + std::to_string(i) + ".";
    b.norm1_w = read_f32(w, p + "norm1.weight", E);
    b.norm1_b = read_f32(w, p + "norm1.bias", E);
    b.norm2_w = read_f32(w, p + "norm2.weight", E);
    b.norm2_b = read_f32(w, p + "norm2.bias", E);
    // Vision linears are never quantized; bind them as stored and never quantize activations.
    b.qkv = bind_linear(w, p + "attn.qkv", 3 * E, E, false);
    b.proj = bind_linear(w, p + "attn.proj", E, E, false);
    b.fc1 = bind_linear(w, p + "mlp.linear_fc1", I, E, false);
    b.fc2 = bind_linear(w, p + "mlp.linear_fc2", E, I, false);
    b.qkv_b = read_f32(w, p + "attn.qkv.bias", 3 * E);
    b.proj_b = read_f32(w, p + "attn.proj.bias", E);
    b.fc1_b = read_f32(w, p + "mlp.linear_fc1.bias", I);
    b.fc2_b = read_f32(w, p + "mlp.linear_fc2.bias", E);
    b.qkv.bias = b.qkv_b.data();
    b.proj.bias = b.proj_b.data();
    b.fc1.bias = b.fc1_b.data();
    b.fc2.bias = b.fc2_b.data();
  }
  const int64_t ME = E * M * M;
  merger_norm_w_ = read_f32(w, kPrefix + "merger.norm.weight", E);
  merger_norm_b_ = read_f32(w, kPrefix + "merger.norm.bias", E);
  merger_fc1_ = bind_linear(w, kPrefix + "merger.linear_fc1", ME, ME, false);
  merger_fc2_ = bind_linear(w, kPrefix + "merger.linear_fc2", v.out_hidden_size, ME, false);
  merger_fc1_b_ = read_f32(w, kPrefix + "merger.linear_fc1.bias", ME);
  merger_fc2_b_ = read_f32(w, kPrefix + "merger.linear_fc2.bias", v.out_hidden_size);
  merger_fc1_.bias = merger_fc1_b_.data();
  merger_fc2_.bias = merger_fc2_b_.data();
  for (const LinearWeight* lw : {&merger_fc1_, &merger_fc2_})
    if (lw->format == WeightFormat::kMXFP4)
      throw Error(ErrorKind::kUnsupported, lw->name + " is quantized; vision weights must be BF16");
  for (const Block& b : blocks_)
    for (const LinearWeight* lw : {&b.qkv, &b.proj, &b.fc1, &b.fc2})
      if (lw->format == WeightFormat::kMXFP4)
        throw Error(ErrorKind::kUnsupported, lw->name + " is quantized; vision weights must be BF16");
}

// Full attention of every segment (one temporal group of one item) with itself.
void VisionTower::attention(const Block& b, const float* x, int64_t n, const std::vector<int64_t>& segments,
                            const float* cos, const float* sin, float* out) const {
  const int64_t E = config_.hidden_size, H = config_.num_heads, D = head_dim_, half = D / 2;
  std::vector<float> qkv(static_cast<size_t>(n * 3 * E));
  backend_.linear(b.qkv, x, n, qkv.data());
  // Rotary on q and k (rows are [q | k | v], each H heads of D), fp32, rotate_half.
  std::vector<float> r(static_cast<size_t>(D));
  for (int64_t i = 0; i < n; ++i) {
    const float* c = cos + i * D;
    const float* s = sin + i * D;
    for (int64_t part = 0; part < 2; ++part) {
      for (int64_t h = 0; h < H; ++h) {
        float* v = qkv.data() + i * 3 * E + part * E + h * D;
        for (int64_t k = 0; k < D; ++k) {
          const float rot = k < half ? -v[k + half] : v[k - half];
          r[k] = v[k] * c[k] + rot * s[k];
        }
        std::copy(r.begin(), r.end(), v);
      }
    }
  }
  // HF: self.scale = head_dim ** -0.5 (a Python double), rounded to fp32 where it meets the scores.
  const float scale = static_cast<float>(std::pow(static_cast<double>(D), -0.5));
  std::vector<float> ctx(static_cast<size_t>(n * E));
  AttentionShape shape;
  shape.n_q_heads = shape.n_kv_heads = H;
  shape.head_dim = D;
  shape.scale = scale;
  int64_t start = 0;
  for (int64_t len : segments) {
    const float* rows = qkv.data() + start * 3 * E;
    backend_.attention_dense(shape, rows, 3 * E, len, rows + E, rows + 2 * E, 3 * E, len, ctx.data() + start * E, E);
    start += len;
  }
  backend_.linear(b.proj, ctx.data(), n, out);
}

VisionTower::Output VisionTower::forward(const float* pixel_values, int64_t rows,
                                         const std::vector<std::array<int64_t, 3>>& grids) const {
  const VisionConfig& v = config_;
  const int64_t E = v.hidden_size, M = v.spatial_merge_size;
  int64_t n = 0;
  std::vector<int64_t> segments;
  for (const auto& g : grids) {
    if (g[0] < 1 || g[1] < M || g[2] < M || g[1] % M != 0 || g[2] % M != 0)
      throw Error(ErrorKind::kInternal, "vision grid (" + std::to_string(g[0]) + ", " + std::to_string(g[1]) + ", " +
                                            std::to_string(g[2]) + ") is not a positive multiple of the merge size");
    n += g[0] * g[1] * g[2];
    for (int64_t t = 0; t < g[0]; ++t) segments.push_back(g[1] * g[2]);
  }
  if (n != rows)
    throw Error(ErrorKind::kInternal, "pixel_values has " + std::to_string(rows) + " rows, the grids need " +
                                          std::to_string(n));

  // Patch embedding + position embeddings; rotary tables for the whole sequence.
  std::vector<float> x(static_cast<size_t>(n * E));
  backend_.patch_embed(patch_, v.in_channels, pixel_values, n, x.data());
  std::vector<float> cos, sin;
  cos.reserve(static_cast<size_t>(n * head_dim_));
  sin.reserve(cos.capacity());
  int64_t row = 0;
  for (const auto& g : grids) {
    const std::vector<float> pe = interpolated_position_embeddings(pos_table_, side_, E, g, M);
    for (size_t k = 0; k < pe.size(); ++k) x[row * E + k] += pe[k];
    row += g[0] * g[1] * g[2];
    RotaryTables rt = vision_rotary(g, M, head_dim_, v.rope_theta);
    cos.insert(cos.end(), rt.cos.begin(), rt.cos.end());
    sin.insert(sin.end(), rt.sin.begin(), rt.sin.end());
  }

  const bool tanh_gelu = v.hidden_act == "gelu_pytorch_tanh";
  std::vector<float> normed(x.size()), tmp(x.size());
  std::vector<float> mid(static_cast<size_t>(n * v.intermediate_size));
  for (const Block& b : blocks_) {
    ref::layer_norm(x.data(), n, E, b.norm1_w.data(), b.norm1_b.data(), 1e-6f, normed.data());
    attention(b, normed.data(), n, segments, cos.data(), sin.data(), tmp.data());
    for (size_t k = 0; k < x.size(); ++k) x[k] += tmp[k];
    ref::layer_norm(x.data(), n, E, b.norm2_w.data(), b.norm2_b.data(), 1e-6f, normed.data());
    backend_.linear(b.fc1, normed.data(), n, mid.data());
    if (tanh_gelu)
      backend_.gelu_tanh_inplace(mid.data(), static_cast<int64_t>(mid.size()));
    else
      ref::gelu_erf_inplace(mid.data(), static_cast<int64_t>(mid.size()));
    backend_.linear(b.fc2, mid.data(), n, tmp.data());
    for (size_t k = 0; k < x.size(); ++k) x[k] += tmp[k];
  }

  Output out;
  out.last_hidden_state = x;
  // Merger: LayerNorm per patch, then each run of merge² consecutive patches (one block) is
  // one row of merge²·E.
  ref::layer_norm(x.data(), n, E, merger_norm_w_.data(), merger_norm_b_.data(), 1e-6f, normed.data());
  const int64_t groups = n / (M * M), ME = E * M * M;
  std::vector<float> h1(static_cast<size_t>(groups * ME));
  backend_.linear(merger_fc1_, normed.data(), groups, h1.data());
  ref::gelu_erf_inplace(h1.data(), static_cast<int64_t>(h1.size()));
  out.merged.resize(static_cast<size_t>(groups * v.out_hidden_size));
  backend_.linear(merger_fc2_, h1.data(), groups, out.merged.data());
  return out;
}

}  // namespace stave
