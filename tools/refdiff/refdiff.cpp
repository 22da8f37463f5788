// stave_refdiff: finds the first op where the exact path parts from the reference. It reads a
// per-module dump of the reference (tools/reference/dump_intermediates.py, detail-<variant>.
// safetensors) and, for every decoder layer and every op of it, feeds stave's reference op the
// reference's own input of that op and compares the result with the reference's output. A
// chained comparison (stave's own layer outputs) drifts by amplification; this one isolates
// each op. Developer tooling, not part of the product.
//
// usage: stave_refdiff MODEL_DIR DETAIL.safetensors CASE_NAME [CASE_DIR]
//   MODEL_DIR: the release the dump was made from (e.g. a fixture release's model-bf16 folder)
//   CASE_DIR:  the fixture case (for input_ids); defaults to MODEL_DIR/../cases/CASE_NAME
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/release.h"
#include "io/safetensors.h"
#include "model/backbone.h"
#include "formats/linear_weight.h"
#include "ops/backend.h"
#include "ops/conv1d.h"
#include "ops/elementwise.h"
#include "ops/gated_delta_net.h"
#include "ops/head_ops.h"
#include "ops/reference.h"
#include "ops/rope.h"
#include "ops/torch_cpu_order.h"
#include "stave/errors.h"
#include "vision/vision_embeddings.h"

namespace stave {
namespace {

// A host tensor's values (refdiff runs on the reference backend, in host memory).
std::vector<float> host_values(const stave::Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

namespace fs = std::filesystem;

class Dump {
 public:
  Dump(const std::string& path, std::string prefix) : file_(path), prefix_(std::move(prefix)) {}
  bool has(const std::string& key) const { return file_.find(prefix_ + key) != nullptr; }
  std::vector<float> get(const std::string& key) const {
    const TensorRef* t = file_.find(prefix_ + key);
    if (!t) throw Error(ErrorKind::kInvalidRequest, "dump has no " + prefix_ + key);
    if (t->dtype != DType::kF32) throw Error(ErrorKind::kInvalidRequest, prefix_ + key + " is not F32");
    std::vector<float> v(static_cast<size_t>(t->numel()));
    std::memcpy(v.data(), t->data, t->nbytes);
    return v;
  }

 private:
  SafetensorsFile file_;
  std::string prefix_;
};

// One comparison line: max |Δ|, how many elements differ at all, the first differing row.
void report(const std::string& what, const std::vector<float>& got, const std::vector<float>& want, int64_t row) {
  if (got.size() != want.size()) {
    std::printf("  %-44s size %zu vs %zu\n", what.c_str(), got.size(), want.size());
    return;
  }
  double worst = 0;
  int64_t differ = 0, first = -1;
  std::string some;  // the first differing flat indices, for locating vector/scalar splits
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (got[i] != want[i]) {
      if (differ < 6) {
        some += ' ';
        some += std::to_string(i);
      }
      ++differ;
      if (first < 0) first = static_cast<int64_t>(i) / row;
    }
    worst = std::max(worst, d);
  }
  std::printf("  %-44s max|Δ| %.3g  differ %lld/%zu  first row %lld%s%s\n", what.c_str(), worst,
              static_cast<long long>(differ), got.size(), static_cast<long long>(first), differ ? "  at" : "",
              some.c_str());
}

// [C, L] (torch's conv layout) -> [L, C].
std::vector<float> transpose(const std::vector<float>& x, int64_t C, int64_t L) {
  std::vector<float> y(x.size());
  for (int64_t c = 0; c < C; ++c)
    for (int64_t t = 0; t < L; ++t) y[t * C + c] = x[c * L + t];
  return y;
}

// The vision tower op by op (fixture image cases; one image per dump for the attention check).
void compare_vision(const Release& release, const Dump& dump, const nlohmann::json& media) {
  const VisionConfig& vc = release.config.vision;
  const TensorStore& store = release.weights;
  const Backend& be = reference_backend();
  const std::string vp = "model.visual.";
  const int64_t E = vc.hidden_size, I = vc.intermediate_size, M = vc.spatial_merge_size, D = E / vc.num_heads;
  const auto g = media["image_grid_thw"][0];
  const std::array<int64_t, 3> grid{g[0].get<int64_t>(), g[1].get<int64_t>(), g[2].get<int64_t>()};
  const int64_t n = grid[0] * grid[1] * grid[2];
  std::printf("vision tower: %lld patches\n", static_cast<long long>(n));
  auto with_bias = [&](const std::string& name, int64_t out, int64_t in, std::vector<float>& bias) {
    LinearWeight w = bind_linear(store, name, out, in, false);
    bias = read_f32(store, name + ".bias", out);
    w.bias = bias.data();
    return w;
  };
  auto lin = [&](const std::string& mod, const std::string& weight, int64_t out, int64_t in) {
    std::vector<float> bias;
    const LinearWeight w = with_bias(weight, out, in, bias);
    const auto x = dump.get(mod + "#0/in0");
    std::vector<float> y(static_cast<size_t>(x.size() / in * out));
    be.linear(w, x.data(), static_cast<int64_t>(x.size()) / in, y.data());
    report(mod.substr(vp.size()), y, dump.get(mod + "#0/out"), out);
  };
  auto ln = [&](const std::string& mod, const std::string& weight) {
    const auto x = dump.get(mod + "#0/in0");
    const auto w = read_f32(store, weight + ".weight", E), b = read_f32(store, weight + ".bias", E);
    std::vector<float> y(x.size());
    ref::layer_norm(x.data(), static_cast<int64_t>(x.size()) / E, E, w.data(), b.data(), 1e-6f, y.data());
    report(mod.substr(vp.size()), y, dump.get(mod + "#0/out"), E);
  };
  {  // Conv3d patch embedding as a linear over [C, T, P, P] rows
    const int64_t in = vc.in_channels * vc.temporal_patch_size * vc.patch_size * vc.patch_size;
    const TensorRef& t = store.get(vp + "patch_embed.proj.weight");
    LinearWeight w;
    w.name = "patch";
    w.out = E;
    w.in = in;
    w.data = t.data;
    w.format = t.dtype == DType::kBF16 ? WeightFormat::kBF16 : WeightFormat::kF32;
    auto bias = read_f32(store, vp + "patch_embed.proj.bias", E);
    w.bias = bias.data();
    const auto x = dump.get(vp + "patch_embed.proj#0/in0");
    std::vector<float> y(static_cast<size_t>(n * E));
    be.patch_embed(w, vc.in_channels, x.data(), n, y.data());
    report("patch_embed.proj (Conv3d)", y, dump.get(vp + "patch_embed.proj#0/out"), E);
    // + interpolated position embeddings = the first block's input
    const auto table = read_f32(store, vp + "pos_embed.weight", vc.num_position_embeddings * E);
    const int64_t side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(vc.num_position_embeddings))));
    const auto pe = interpolated_position_embeddings(table, side, E, grid, M);
    auto x0 = dump.get(vp + "patch_embed#0/out");
    for (size_t k = 0; k < x0.size(); ++k) x0[k] += pe[k];
    report("patch_embed + pos_embed", x0, dump.get(vp + "blocks.0#0/in0"), E);
  }
  const RotaryTables rt = vision_rotary(grid, M, D, vc.rope_theta);
  for (int64_t i = 0; i < vc.depth; ++i) {
    const std::string b = vp + "blocks." + std::to_string(i);
    if (!dump.has(b + "#0/in0")) break;
    ln(b + ".norm1", b + ".norm1");
    ln(b + ".norm2", b + ".norm2");
    lin(b + ".attn.qkv", b + ".attn.qkv", 3 * E, E);
    lin(b + ".attn.proj", b + ".attn.proj", E, E);
    lin(b + ".mlp.linear_fc1", b + ".mlp.linear_fc1", I, E);
    lin(b + ".mlp.linear_fc2", b + ".mlp.linear_fc2", E, I);
    {
      auto x = dump.get(b + ".mlp.act_fn#0/in0");
      be.gelu_tanh_inplace(x.data(), static_cast<int64_t>(x.size()));
      report("blocks." + std::to_string(i) + ".mlp.act_fn (gelu tanh)", x, dump.get(b + ".mlp.act_fn#0/out"), I);
    }
    {  // rotary + dense attention on the reference's qkv, vs the proj input
      auto qkv = dump.get(b + ".attn.qkv#0/out");
      const int64_t H = vc.num_heads, half = D / 2;
      std::vector<float> r(static_cast<size_t>(D));
      for (int64_t p = 0; p < n; ++p)
        for (int64_t part = 0; part < 2; ++part)
          for (int64_t h = 0; h < H; ++h) {
            float* v = qkv.data() + p * 3 * E + part * E + h * D;
            for (int64_t k = 0; k < D; ++k) {
              const float rot = k < half ? -v[k + half] : v[k - half];
              r[k] = v[k] * rt.cos[p * D + k] + rot * rt.sin[p * D + k];
            }
            std::copy(r.begin(), r.end(), v);
          }
      AttentionShape shape{H, H, D, static_cast<float>(std::pow(static_cast<double>(D), -0.5))};
      std::vector<float> ctx(static_cast<size_t>(n * E));
      be.attention_dense(shape, qkv.data(), 3 * E, n, qkv.data() + E, qkv.data() + 2 * E, 3 * E, n, ctx.data(), E);
      report("blocks." + std::to_string(i) + ".attn core (rope+softmax)", ctx, dump.get(b + ".attn.proj#0/in0"), E);
    }
  }
  ln(vp + "merger.norm", vp + "merger.norm");
  lin(vp + "merger.linear_fc1", vp + "merger.linear_fc1", E * M * M, E * M * M);
  lin(vp + "merger.linear_fc2", vp + "merger.linear_fc2", vc.out_hidden_size, E * M * M);
  {
    auto x = dump.get(vp + "merger.act_fn#0/in0");
    ref::gelu_erf_inplace(x.data(), static_cast<int64_t>(x.size()));
    report("merger.act_fn (gelu erf)", x, dump.get(vp + "merger.act_fn#0/out"), E * M * M);
  }
}

int run(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: stave_refdiff MODEL_DIR DETAIL.safetensors CASE_NAME [CASE_DIR]\n");
    return 2;
  }
  const std::string model_dir = argv[1], case_name = argv[3];
  const fs::path case_dir = argc > 4 ? fs::path(argv[4]) : fs::path(model_dir) / ".." / "cases" / case_name;
  auto release = open_release(model_dir);
  const TextConfig& tc = release->config.text;
  const TensorStore& store = release->weights;
  const Backend& be = reference_backend();
  Dump dump(argv[2], case_name + "/");

  nlohmann::json expected;
  std::ifstream(case_dir / "expected-bf16.json") >> expected;
  std::vector<int32_t> ids = expected["input_ids"].get<std::vector<int32_t>>();
  const int64_t L = static_cast<int64_t>(ids.size()), H = tc.hidden_size;
  const float eps = static_cast<float>(tc.rms_norm_eps);
  Backbone backbone(*release, be);
  Backbone::Sequence seq0 = backbone.start(ids);  // RoPE tables (text positions)
  if (expected.contains("media"))
    std::printf("note: this tool uses text positions (arange); the full-attention layer, RoPE and whole-layer\n"
                "      lines are not meaningful for an image case (its M-RoPE positions differ)\n");
  const std::string lp = "model.language_model.layers.";
  const std::string wp = "model.language_model.layers.";  // checkpoint names
  std::printf("%s: %lld tokens, %lld layers\n", case_name.c_str(), static_cast<long long>(L),
              static_cast<long long>(backbone.num_layers()));

  for (int64_t i = 0; i < backbone.num_layers(); ++i) {
    const std::string m = lp + std::to_string(i);
    const std::string w = wp + std::to_string(i) + ".";
    if (!dump.has(m + "#0/in0")) continue;
    const bool linear = tc.layer_types[i] == LayerType::kLinearAttention;
    std::printf("layer %lld (%s)\n", static_cast<long long>(i), linear ? "gated deltanet" : "full attention");
    {  // the whole layer on the reference's input
      Backbone::Sequence seq = backbone.start(ids);
      seq.h = Tensor::host(dump.get(m + "#0/in0"), {L, H});
      backbone.run_layer(i, seq);
      report("layer", host_values(seq.h), dump.get(m + "#0/out"), H);
    }
    auto norm_check = [&](const std::string& mod, const std::string& weight, int64_t dim) {
      const auto in = dump.get(mod + "#0/in0");
      const auto wt = read_f32(store, weight, dim);
      std::vector<float> y(in.size());
      be.rms_norm_zero_centered(in.data(), static_cast<int64_t>(in.size()) / dim, dim, wt.data(), eps, y.data());
      report(mod.substr(lp.size()), y, dump.get(mod + "#0/out"), dim);
    };
    auto linear_check = [&](const std::string& mod, const std::string& weight, int64_t out, int64_t in_dim) {
      const auto x = dump.get(mod + "#0/in0");
      const LinearWeight lw = bind_linear(store, weight, out, in_dim);
      std::vector<float> y(static_cast<size_t>(x.size() / in_dim * out));
      be.linear(lw, x.data(), static_cast<int64_t>(x.size()) / in_dim, y.data());
      report(mod.substr(lp.size()), y, dump.get(mod + "#0/out"), out);
      return y;
    };
    norm_check(m + ".input_layernorm", w + "input_layernorm.weight", H);
    norm_check(m + ".post_attention_layernorm", w + "post_attention_layernorm.weight", H);
    const int64_t inter = tc.intermediate_size;
    linear_check(m + ".mlp.gate_proj", w + "mlp.gate_proj", inter, H);
    linear_check(m + ".mlp.up_proj", w + "mlp.up_proj", inter, H);
    linear_check(m + ".mlp.down_proj", w + "mlp.down_proj", H, inter);
    {
      const auto g = dump.get(m + ".mlp.gate_proj#0/out"), u = dump.get(m + ".mlp.up_proj#0/out");
      std::vector<float> y(g.size());
      be.silu_mul(g.data(), u.data(), static_cast<int64_t>(g.size()), y.data());
      report("mlp silu(gate)·up", y, dump.get(m + ".mlp.down_proj#0/in0"), inter);
    }
    if (linear) {
      const std::string a = m + ".linear_attn";
      const std::string aw = w + "linear_attn.";
      const int64_t conv_dim = tc.linear_conv_dim(), vdim = tc.linear_value_dim();
      const int64_t nv = tc.linear_num_value_heads;
      const int64_t dk = tc.linear_key_head_dim, dv = tc.linear_value_head_dim, K = tc.linear_conv_kernel_dim;
      const auto qkv = linear_check(a + ".in_proj_qkv", aw + "in_proj_qkv", conv_dim, H);
      linear_check(a + ".in_proj_z", aw + "in_proj_z", vdim, H);
      linear_check(a + ".in_proj_a", aw + "in_proj_a", nv, H);
      linear_check(a + ".in_proj_b", aw + "in_proj_b", nv, H);
      linear_check(a + ".out_proj", aw + "out_proj", H, vdim);
      // Which gdr#/conv# call is this layer's: the index among linear-attention layers.
      int64_t n = 0;
      for (int64_t j = 0; j < i; ++j) n += tc.layer_types[j] == LayerType::kLinearAttention;
      const std::string cn = "conv#" + std::to_string(n), gn = "gdr#" + std::to_string(n);
      if (dump.has(cn + "/in0")) {
        const auto x = transpose(dump.get(cn + "/in0"), conv_dim, L);
        const auto wt = read_f32(store, aw + "conv1d.weight", conv_dim * K);
        std::vector<float> hist(static_cast<size_t>((K - 1) * conv_dim), 0.0f), y(x.size());
        be.causal_conv1d_silu(x.data(), L, conv_dim, wt.data(), K, hist.data(), y.data());
        report("conv1d+silu", y, transpose(dump.get(cn + "/out"), conv_dim, L), conv_dim);
        report("  (its input vs in_proj_qkv)", x, qkv, conv_dim);
      }
      if (dump.has(gn + "/g")) {
        const auto av = dump.get(a + ".in_proj_a#0/out"), bv = dump.get(a + ".in_proj_b#0/out");
        const auto A_log = read_f32(store, aw + "A_log", nv), dt = read_f32(store, aw + "dt_bias", nv);
        std::vector<float> g(av.size()), beta(av.size());
        be.gdn_gates(av.data(), bv.data(), A_log.data(), dt.data(), L, nv, g.data(), beta.data());
        report("gates g", g, dump.get(gn + "/g"), nv);
        report("gates beta", beta, dump.get(gn + "/beta"), nv);
        // The rule on the reference's q, k (repeated to the v heads), v, g, beta.
        const auto q = dump.get(gn + "/in0"), k = dump.get(gn + "/in1"), v = dump.get(gn + "/in2");
        const int64_t hq = static_cast<int64_t>(q.size()) / (L * dk);  // heads after repeat_interleave
        const int64_t row = 2 * hq * dk + nv * dv;
        std::vector<float> packed(static_cast<size_t>(L * row));
        for (int64_t t = 0; t < L; ++t) {
          std::memcpy(&packed[t * row], &q[t * hq * dk], hq * dk * sizeof(float));
          std::memcpy(&packed[t * row + hq * dk], &k[t * hq * dk], hq * dk * sizeof(float));
          std::memcpy(&packed[t * row + 2 * hq * dk], &v[t * nv * dv], nv * dv * sizeof(float));
        }
        const auto gr = dump.get(gn + "/g"), br = dump.get(gn + "/beta");
        GatedDeltaInput in{L, packed.data(), packed.data() + hq * dk, packed.data() + 2 * hq * dk, row, gr.data(),
                           br.data()};
        GatedDeltaDims dims{hq, nv, dk, dv};
        std::vector<float> state(static_cast<size_t>(dims.state_floats()), 0.0f), out(static_cast<size_t>(L * nv * dv));
        be.gated_delta_rule(dims, in, state.data(), out.data());
        report("gated delta rule (chunked)", out, dump.get(gn + "/out"), nv * dv);
      }
      {  // gated RMSNorm per v head
        const auto x = dump.get(a + ".norm#0/in0"), z = dump.get(a + ".norm#0/in1");
        const auto wt = read_f32(store, aw + "norm.weight", dv);
        std::vector<float> y(x.size());
        be.gated_rms_norm(x.data(), z.data(), static_cast<int64_t>(x.size()) / dv, dv, wt.data(), eps, y.data());
        report("gated rms norm", y, dump.get(a + ".norm#0/out"), dv);
      }
    } else {
      const std::string a = m + ".self_attn";
      const std::string aw = w + "self_attn.";
      const int64_t d = tc.head_dim, nq = tc.num_attention_heads, nkv = tc.num_key_value_heads;
      linear_check(a + ".q_proj", aw + "q_proj", 2 * nq * d, H);
      linear_check(a + ".k_proj", aw + "k_proj", nkv * d, H);
      linear_check(a + ".v_proj", aw + "v_proj", nkv * d, H);
      linear_check(a + ".o_proj", aw + "o_proj", H, nq * d);
      norm_check(a + ".q_norm", aw + "q_norm.weight", d);
      norm_check(a + ".k_norm", aw + "k_norm.weight", d);
      // rope + causal attention + sigmoid gate on the reference's normed q, k and its v.
      auto q = dump.get(a + ".q_norm#0/out"), k = dump.get(a + ".k_norm#0/out");
      const auto v = dump.get(a + ".v_proj#0/out"), qg_ref = dump.get(a + ".q_proj#0/out");
      be.apply_rope(q.data(), L, nq, d, tc.rotary_dim(), seq0.cos.data<float>(), seq0.sin.data<float>());
      be.apply_rope(k.data(), L, nkv, d, tc.rotary_dim(), seq0.cos.data<float>(), seq0.sin.data<float>());
      const AttentionShape shape{nq, nkv, d, static_cast<float>(std::pow(static_cast<double>(d), -0.5))};
      std::vector<float> o(static_cast<size_t>(L * nq * d)), gate(o.size());
      be.attention_causal(shape, q.data(), L, 0, k.data(), v.data(), o.data());
      for (int64_t r = 0; r < L * nq; ++r) std::memcpy(&gate[r * d], &qg_ref[r * 2 * d + d], d * sizeof(float));
      const auto want = dump.get(a + ".o_proj#0/in0");
      be.sigmoid_mul(o.data(), gate.data(), static_cast<int64_t>(o.size()));
      report("rope+attention+sigmoid gate", o, want, nq * d);
      // With the rope and eager-attention wrappers of dump_intermediates.py the two halves are
      // checked apart: RoPE on the reference's q/k, attention on its rotated q/k/v.
      int64_t n_attn = 0;
      for (int64_t j = 0; j < i; ++j) n_attn += tc.layer_types[j] == LayerType::kFullAttention;
      // The vision blocks call the same eager attention first (one call per block and image).
      const int64_t vision_calls = dump.has("model.visual#0/in0") ? release->config.vision.depth : 0;
      const std::string rp = "rope#" + std::to_string(n_attn), ap = "attn#" + std::to_string(n_attn + vision_calls);
      // [1, H, L, d] -> [L, H, d]
      auto token_major = [&](const std::vector<float>& x, int64_t heads) {
        if (static_cast<int64_t>(x.size()) != L * heads * d)
          throw Error(ErrorKind::kInvalidRequest, "dump tensor of " + std::to_string(x.size()) + " floats, expected " +
                                                      std::to_string(L * heads * d) + " (a different call?)");
        std::vector<float> y(x.size());
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t t = 0; t < L; ++t) std::memcpy(&y[(t * heads + h) * d], &x[(h * L + t) * d], d * sizeof(float));
        return y;
      };
      if (dump.has(rp + "/cos")) {
        const int64_t half = tc.rotary_dim() / 2;
        const auto cr = dump.get(rp + "/cos"), sr = dump.get(rp + "/sin");  // [L, rotary_dim] = cat(f, f)
        std::vector<float> c_ours(static_cast<size_t>(L * half)), c_ref(c_ours.size()), s_ref(c_ours.size());
        for (int64_t t = 0; t < L; ++t)
          for (int64_t f = 0; f < half; ++f) {
            c_ref[t * half + f] = cr[t * 2 * half + f];
            s_ref[t * half + f] = sr[t * 2 * half + f];
          }
        report("rope cos table (torch.cos: MKL VML)", host_values(seq0.cos), c_ref, half);
        report("rope sin table (torch.sin: MKL VML)", host_values(seq0.sin), s_ref, half);
        auto rq = token_major(dump.get(rp + "/q"), nq), rk = token_major(dump.get(rp + "/k"), nkv);
        be.apply_rope(rq.data(), L, nq, d, tc.rotary_dim(), c_ref.data(), s_ref.data());
        be.apply_rope(rk.data(), L, nkv, d, tc.rotary_dim(), c_ref.data(), s_ref.data());
        report("rope on the reference's tables", rq, token_major(dump.get(rp + "/q_out"), nq), nq * d);
      }
      if (dump.has(ap + "/out")) {
        const auto aq = token_major(dump.get(ap + "/q"), nq), ak = token_major(dump.get(ap + "/k"), nkv),
                   av = token_major(dump.get(ap + "/v"), nkv);
        std::vector<float> ao(static_cast<size_t>(L * nq * d));
        be.attention_causal(shape, aq.data(), L, 0, ak.data(), av.data(), ao.data());
        report("eager attention on the reference's q/k/v", ao, dump.get(ap + "/out"), nq * d);
      }
    }
  }
  if (dump.has("model.visual#0/in0") && expected.contains("media")) compare_vision(*release, dump, expected["media"]);
  if (dump.has("model.language_model.norm#0/in0")) {
    const auto in = dump.get("model.language_model.norm#0/in0");
    const auto wt = read_f32(store, "model.language_model.norm.weight", H);
    std::vector<float> y(in.size());
    be.rms_norm_zero_centered(in.data(), L, H, wt.data(), eps, y.data());
    report("final norm", y, dump.get("model.language_model.norm#0/out"), H);
  }
  return 0;
}

}  // namespace
}  // namespace stave

int main(int argc, char** argv) {
  try {
    return stave::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stave_refdiff: %s\n", e.what());
    return 2;
  }
}
