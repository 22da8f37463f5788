// AWQ (src/quantize/awq.h) on synthetic activations with LLM-like outlier channels: the folded
// weights compute the same function, the W4A4 quantized MLP gets closer to the float one on
// held-out tokens, the clip search clips what costs nothing, and the edits reach the release.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "test_temp.h"
#include "io/release.h"
#include "io/tensor_store.h"
#include "formats/linear_weight.h"
#include "model/model_check.h"
#include "formats/tensor_names.h"
#include "quantize/awq.h"
#include "quantize/quantize_release.h"
#include "test_util.h"
#include "util/bf16.h"

namespace stave::quantize {
namespace {
namespace fs = std::filesystem;

struct SyntheticMlp {
  int64_t H = 64, I = 96;
  MlpWeights w;
  std::vector<float> chan_scale;  // per-channel magnitude of the residual stream (outliers)
};

SyntheticMlp make_mlp(uint32_t seed) {
  SyntheticMlp m;
  std::mt19937 rng(seed);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  m.w.hidden = m.H;
  m.w.inter = m.I;
  auto fill = [&](std::vector<float>& v, size_t n, float sd) {
    v.resize(n);
    for (auto& x : v) x = round_to_bf16(n01(rng) * sd);
  };
  fill(m.w.gate, m.I * m.H, 1.0f / std::sqrt(float(m.H)));
  fill(m.w.up, m.I * m.H, 1.0f / std::sqrt(float(m.H)));
  fill(m.w.down, m.H * m.I, 1.0f / std::sqrt(float(m.I)));
  fill(m.w.norm, m.H, 0.2f);
  m.chan_scale.assign(m.H, 1.0f);
  m.chan_scale[3] = 30.0f;  // a few channels carry most of the magnitude, as in real LLMs
  m.chan_scale[17] = 12.0f;
  m.chan_scale[40] = 50.0f;
  m.chan_scale[41] = 0.05f;
  return m;
}

std::vector<float> residual_rows(const SyntheticMlp& m, int64_t T, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> h(T * m.H);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < m.H; ++c) h[t * m.H + c] = round_to_bf16(n01(rng) * m.chan_scale[c]);
  return h;
}

// Qwen3.5's zero-centred RMSNorm: x / sqrt(mean(x²) + eps) · (1 + w).
std::vector<float> rms_norm_zc(const std::vector<float>& h, int64_t T, int64_t H, const std::vector<float>& w) {
  std::vector<float> y(h.size());
  for (int64_t t = 0; t < T; ++t) {
    double ss = 0;
    for (int64_t c = 0; c < H; ++c) ss += double(h[t * H + c]) * h[t * H + c];
    float r = 1.0f / std::sqrt(float(ss / H) + 1e-6f);
    for (int64_t c = 0; c < H; ++c) y[t * H + c] = h[t * H + c] * r * (1.0f + w[c]);
  }
  return y;
}

std::vector<float> edited(const std::vector<float>& W, int64_t N, int64_t K, const LinearEdit& e) {
  std::vector<float> out(W);
  for (int64_t r = 0; r < N; ++r) apply_linear_edit_row(e, r, K, out.data() + r * K, true);
  return out;
}

// y = x · Wᵀ with optional MXFP4 QDQ of the input rows and of the weight rows (W4A4).
std::vector<float> linear(const std::vector<float>& x, int64_t T, int64_t K, const std::vector<float>& W, int64_t N,
                          bool w4a4) {
  std::vector<float> xq(x), wq(W);
  if (w4a4) {
    for (int64_t t = 0; t < T; ++t) mxfp4::qdq_row(x.data() + t * K, K, xq.data() + t * K);
    for (int64_t n = 0; n < N; ++n) mxfp4::qdq_row(W.data() + n * K, K, wq.data() + n * K);
  }
  std::vector<float> y(T * N);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double(xq[t * K + k]) * wq[n * K + k];
      y[t * N + n] = float(acc);
    }
  return y;
}

std::vector<float> mlp(const std::vector<float>& x, int64_t T, int64_t H, int64_t I, const std::vector<float>& g,
                       const std::vector<float>& u, const std::vector<float>& d, bool w4a4) {
  std::vector<float> a = linear(x, T, H, g, I, w4a4), b = linear(x, T, H, u, I, w4a4);
  for (size_t i = 0; i < a.size(); ++i) a[i] = a[i] / (1.0f + std::exp(-a[i])) * b[i];
  return linear(a, T, I, d, H, w4a4);
}

double mse(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return s / double(a.size());
}

TEST(Awq, FoldedScalesComputeTheSameMlp) {
  SyntheticMlp m = make_mlp(1);
  const int64_t T = 128;
  std::vector<float> h = residual_rows(m, T, 2);
  std::vector<float> x = rms_norm_zc(h, T, m.H, m.w.norm);
  AwqOptions o;
  o.clip = false;
  MlpAwqResult r = awq_mlp(m.w, x.data(), T, o);
  ASSERT_TRUE(r.smoothed_gate_up && r.smoothed_down);
  ASSERT_EQ(r.norm.size(), size_t(m.H));
  // Scales that do something (the outliers make the search pick a non-zero ratio).
  EXPECT_GT(r.ratio_gate_up + r.ratio_down, 0.0f);
  // Float MLP with the folded norm and weights = the original float MLP (up to bf16 rounding).
  std::vector<float> x2 = rms_norm_zc(h, T, m.H, r.norm);
  std::vector<float> y0 = mlp(x, T, m.H, m.I, m.w.gate, m.w.up, m.w.down, false);
  std::vector<float> y1 = mlp(x2, T, m.H, m.I, edited(m.w.gate, m.I, m.H, r.gate), edited(m.w.up, m.I, m.H, r.up),
                              edited(m.w.down, m.H, m.I, r.down), false);
  double ref = 0;
  for (float v : y0) ref += double(v) * v;
  ref /= double(y0.size());
  EXPECT_LT(mse(y0, y1), 1e-3 * ref) << "folding is not an equivalence";
  // w' = (w + 1)/s - 1, exactly as specified (bf16 steps).
  for (int64_t c = 0; c < m.H; ++c)
    EXPECT_EQ(r.norm[c], round_to_bf16(round_to_bf16(round_to_bf16(m.w.norm[c] + 1.0f) / r.s_gate_up[c]) - 1.0f));
  EXPECT_LE(r.loss_gate_up_best, r.loss_gate_up_plain);
  EXPECT_LE(r.loss_down_best, r.loss_down_plain);
}

TEST(Awq, ReducesW4A4ErrorOnHeldOutTokens) {
  SyntheticMlp m = make_mlp(3);
  const int64_t T = 256;
  std::vector<float> h_cal = residual_rows(m, T, 4), h_test = residual_rows(m, T, 5);
  std::vector<float> x_cal = rms_norm_zc(h_cal, T, m.H, m.w.norm);
  std::vector<float> x_test = rms_norm_zc(h_test, T, m.H, m.w.norm);
  std::vector<float> y_ref = mlp(x_test, T, m.H, m.I, m.w.gate, m.w.up, m.w.down, false);
  double plain = mse(y_ref, mlp(x_test, T, m.H, m.I, m.w.gate, m.w.up, m.w.down, true));

  for (bool w4a4_search : {true, false}) {
    AwqOptions o;
    o.quantize_inputs = w4a4_search;
    MlpAwqResult r = awq_mlp(m.w, x_cal.data(), T, o);
    std::vector<float> x_awq = rms_norm_zc(h_test, T, m.H, r.norm);
    double awq = mse(y_ref, mlp(x_awq, T, m.H, m.I, edited(m.w.gate, m.I, m.H, r.gate), edited(m.w.up, m.I, m.H, r.up),
                                edited(m.w.down, m.H, m.I, r.down), true));
    EXPECT_LT(awq, 0.8 * plain) << "search " << (w4a4_search ? "W4A4" : "W4A16") << ": AWQ " << awq << " vs plain "
                                << plain;
    // Clipping only ever shrinks the per-group maxima, never below max_shrink.
    for (const LinearEdit* e : {&r.gate, &r.up, &r.down}) EXPECT_FALSE(e->clip_max.empty());
  }
}

TEST(Awq, ClipSearchClipsAnOutlierWeightWhoseInputIsZero) {
  // One group: w[0] = 10 is an outlier, but its input channel is always 0, so clipping it costs
  // nothing while the smaller scale resolves the other weights better.
  const int64_t K = 32, T = 64;
  std::vector<float> w(K);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& v : w) v = round_to_bf16(u(rng) * 0.9f);
  w[0] = 10.0f;
  std::vector<float> x(T * K);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 1; k < K; ++k) x[t * K + k] = u(rng);
  AwqOptions o;
  std::vector<float> clip = awq_clip(w.data(), 1, K, x.data(), T, o);
  ASSERT_EQ(clip.size(), 1u);
  EXPECT_LT(clip[0], 10.0f);
  EXPECT_GE(clip[0], 10.0f * 0.55f - 1e-3f);  // 10 shrink steps of 5%: at most 45% off
  // Inputs on every channel: clipping the big weight now hurts, so it is kept.
  for (int64_t t = 0; t < T; ++t) x[t * K] = 5.0f * u(rng);
  clip = awq_clip(w.data(), 1, K, x.data(), T, o);
  EXPECT_EQ(clip[0], 10.0f);
}

// Synthetic MLP inputs for a real model's layers (the fixture's weights).
class SyntheticSource : public MlpInputSource {
 public:
  SyntheticSource(int64_t layers, int64_t hidden, int64_t tokens) : layers_(layers), hidden_(hidden), tokens_(tokens) {}
  void for_each_layer(const std::function<void(int64_t, const float*, int64_t)>& fn) override {
    std::mt19937 rng(11);
    std::normal_distribution<float> n01(0.0f, 1.0f);
    for (int64_t l = 0; l < layers_; ++l) {
      std::vector<float> x(tokens_ * hidden_);
      for (int64_t t = 0; t < tokens_; ++t)
        for (int64_t c = 0; c < hidden_; ++c) x[t * hidden_ + c] = n01(rng) * (c % 13 == 0 ? 20.0f : 1.0f);
      fn(l, x.data(), tokens_);
    }
  }

 private:
  int64_t layers_, hidden_, tokens_;
};

TEST(Awq, EditsAreFoldedIntoTheWrittenRelease) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  const std::string in = test::fixture("public/model-bf16");
  auto release = open_release(in);
  const ModelConfig& cfg = release->config;
  LinearSelection sel = select_linears(cfg, {"re:model\\.language_model\\.layers\\.1\\.mlp\\."});
  std::set<std::string> quantized(sel.quantized.begin(), sel.quantized.end());
  SyntheticSource source(cfg.text.num_hidden_layers, cfg.text.hidden_size, 96);
  std::vector<AwqLayerReport> report;
  WeightEdits edits = compute_awq(cfg, release->weights, source, quantized, AwqOptions{}, &report);
  EXPECT_EQ(report.size(), size_t(cfg.text.num_hidden_layers) - 1);  // layer 1's MLP is excluded
  EXPECT_FALSE(edits.tensors.count("model.language_model.layers.1.post_attention_layernorm.weight"));
  ASSERT_TRUE(edits.tensors.count("model.language_model.layers.0.post_attention_layernorm.weight"));

  QuantizeOptions o;
  o.in_dir = in;
  o.out_dir = (fs::path(stave::test::temp_dir()) / "stave-awq-release").string();
  fs::remove_all(o.out_dir);
  o.exclude = {"re:model\\.language_model\\.layers\\.1\\.mlp\\."};
  o.edits = &edits;
  quantize_release(o);
  auto out = open_release(o.out_dir);
  EXPECT_NO_THROW(check_release_loadable(*out));

  // The norm is the folded one, stored as BF16.
  const std::string norm = "model.language_model.layers.0.post_attention_layernorm.weight";
  EXPECT_EQ(out->weights.get(norm).dtype, DType::kBF16);
  EXPECT_EQ(read_f32(out->weights, norm, cfg.text.hidden_size), edits.tensors.at(norm));
  // gate_proj's codes are the MXFP4 quantization of the smoothed and clipped weight.
  const int64_t H = cfg.text.hidden_size, I = cfg.text.intermediate_size;
  const std::string gate = "model.language_model.layers.0.mlp.gate_proj";
  std::vector<float> w = read_f32(release->weights, gate + ".weight", I * H);
  w = edited(w, I, H, edits.linears.at(gate));
  LinearWeight q = bind_linear(out->weights, gate, I, H);
  std::vector<float> row(H), want(H);
  for (int64_t r = 0; r < I; ++r) {
    mxfp4::dequantize_row(static_cast<const uint8_t*>(q.data) + r * H / 2, q.scales + r * H / 32, H, row.data());
    mxfp4::qdq_row(w.data() + r * H, H, want.data());
    ASSERT_EQ(row, want) << "row " << r;
  }
  // Layer 1's MLP stays BF16 and unchanged.
  const std::string down1 = "model.language_model.layers.1.mlp.down_proj.weight";
  EXPECT_EQ(read_f32(out->weights, down1, H * I), read_f32(release->weights, down1, H * I));
}

}  // namespace
}  // namespace stave::quantize
