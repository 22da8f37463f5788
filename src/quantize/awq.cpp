#include "quantize/awq.h"

#include <algorithm>
#include <cmath>

#include "formats/linear_weight.h"
#include "formats/tensor_names.h"
#include "stave/errors.h"
#include "util/bf16.h"

namespace stave::quantize {
namespace {

constexpr int64_t kChunk = 64;  // tokens per step of the loss computations (bounds temporaries)
constexpr int64_t kParallelWork = int64_t{1} << 20;  // below this many multiply-adds, threads cost more than they save

inline float bf(float v, bool on) { return on ? round_to_bf16(v) : v; }

inline float dot(const float* a, const float* b, int64_t n) {
  // Eight partial sums let the compiler vectorize without reassociating a single sum.
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Y[t, n] = sum_k X[t, k] W[n, k]   (X [T, K], W [N, K], Y [T, N])
void matmul_nt(const float* X, int64_t T, int64_t K, const float* W, int64_t N, float* Y) {
#pragma omp parallel for schedule(static) collapse(2) if (T * N * K >= kParallelWork)
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) Y[t * N + n] = dot(X + t * K, W + n * K, K);
}

inline float silu(float v) { return v / (1.0f + std::exp(-v)); }

// mean |x| per channel over the tokens (Quark: inp.abs().view(-1, C).mean(0), in the model dtype).
std::vector<float> channel_mean_abs(const float* x, int64_t T, int64_t C, bool bf16) {
  std::vector<double> acc(static_cast<size_t>(C), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < C; ++c) acc[c] += std::fabs(x[t * C + c]);
  std::vector<float> out(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) out[c] = bf(static_cast<float>(acc[c] / static_cast<double>(T)), bf16);
  return out;
}

// s = clamp(x_mean^ratio, min 1e-4) / sqrt(max(s)·min(s)), each step in the model dtype.
std::vector<float> smoothing_scales(const std::vector<float>& x_mean, double ratio, bool bf16) {
  std::vector<float> s(x_mean.size());
  const float floor_v = bf(1e-4f, bf16);
  for (size_t c = 0; c < s.size(); ++c)
    s[c] = std::max(bf(static_cast<float>(std::pow(static_cast<double>(x_mean[c]), ratio)), bf16), floor_v);
  auto [mn, mx] = std::minmax_element(s.begin(), s.end());
  const float denom = bf(std::sqrt(bf(*mx * *mn, bf16)), bf16);
  for (auto& v : s) v = bf(v / denom, bf16);
  return s;
}

// The weight the search multiplies with: Q(W·s) (deployed form, inputs x/s) or, for the
// W4A16 search as Quark's hooks do it, Q(W·s)/s (inputs x unchanged).
std::vector<float> fake_quant_scaled(const std::vector<float>& W, int64_t N, int64_t K, const std::vector<float>& s,
                                     bool divide_back, const AwqOptions& o, bool bf16) {
  std::vector<float> out(W.size());
#pragma omp parallel if (N * K >= kParallelWork / 16)
  {
    std::vector<float> tmp(static_cast<size_t>(K));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < N; ++r) {
      for (int64_t c = 0; c < K; ++c) tmp[c] = bf(W[r * K + c] * s[c], bf16);
      mxfp4::qdq_row(tmp.data(), K, out.data() + r * K, o.scale_mode);
      if (divide_back)
        for (int64_t c = 0; c < K; ++c) out[r * K + c] = bf(out[r * K + c] / s[c], bf16);
    }
  }
  return out;
}

// Rows [t0, t0 + n) of x as the quantized module sees them: x/s, MXFP4 QDQ'd when W4A4.
void module_input(const float* x, int64_t t0, int64_t n, int64_t K, const std::vector<float>* s, const AwqOptions& o,
                  bool bf16, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + (t0 + t) * K;
    float* orow = out + t * K;
    for (int64_t c = 0; c < K; ++c) orow[c] = s ? bf(xr[c] / (*s)[c], bf16) : xr[c];
    if (o.quantize_inputs) mxfp4::qdq_row(orow, K, orow, o.scale_mode);
  }
}

// The ratio search shared by both pairs: `loss(s, divide_back)` gives the output MSE.
template <class LossFn>
std::pair<double, std::vector<float>> search_ratio(const std::vector<float>& x_mean, const AwqOptions& o, bool bf16,
                                                   LossFn loss, double* plain_loss, float* best_ratio) {
  double best = INFINITY;
  std::vector<float> best_s;
  for (int i = 0; i < o.n_grid; ++i) {
    double ratio = static_cast<double>(i) / o.n_grid;
    std::vector<float> s = smoothing_scales(x_mean, ratio, bf16);
    double l = loss(s);
    if (i == 0) *plain_loss = l;
    if (l < best) {  // strict, first minimum wins (as Quark)
      best = l;
      best_s = s;
      *best_ratio = static_cast<float>(ratio);
    }
  }
  if (best_s.empty())
    throw Error(ErrorKind::kInvalidModel, "AWQ: the smoothing loss is not finite (NaN or Inf in the activations?)");
  return {best, best_s};
}

}  // namespace

std::vector<float> awq_clip(const float* w, int64_t out, int64_t in, const float* x, int64_t tokens,
                            const AwqOptions& o) {
  const int64_t G = in / mxfp4::kBlock;
  std::vector<float> clip(static_cast<size_t>(out * G));
  // Quark: n = min(tokens, 512); input_feat[:, 0::tokens // n] (which may keep up to 2n - 1 tokens).
  const int64_t n_sample = std::min(tokens, o.clip_sample_tokens);
  const int64_t stride = std::max<int64_t>(1, tokens / std::max<int64_t>(n_sample, 1));
  std::vector<int64_t> picked;
  for (int64_t t = 0; t < tokens; t += stride) picked.push_back(t);
  const int64_t S = static_cast<int64_t>(picked.size());
  std::vector<float> xs(static_cast<size_t>(S * in)), xq(static_cast<size_t>(S * in));
  for (int64_t i = 0; i < S; ++i) std::copy(x + picked[i] * in, x + (picked[i] + 1) * in, xs.begin() + i * in);
  for (int64_t i = 0; i < S; ++i) {
    if (o.quantize_inputs) mxfp4::qdq_row(xs.data() + i * in, in, xq.data() + i * in, o.scale_mode);
    else std::copy(xs.begin() + i * in, xs.begin() + (i + 1) * in, xq.begin() + i * in);
  }
  const int steps = static_cast<int>(o.clip_max_shrink * o.clip_n_grid);
#pragma omp parallel if (out * in * S * steps >= kParallelWork)
  {
    std::vector<double> org(static_cast<size_t>(S));
    float cur[mxfp4::kBlock], q[mxfp4::kBlock];
#pragma omp for schedule(dynamic, 4)
    for (int64_t r = 0; r < out; ++r) {
      for (int64_t g = 0; g < G; ++g) {
        const float* wg = w + r * in + g * mxfp4::kBlock;
        float org_max = 0;
        for (int j = 0; j < mxfp4::kBlock; ++j) org_max = std::max(org_max, std::fabs(wg[j]));
        for (int64_t t = 0; t < S; ++t) org[t] = dot(xs.data() + t * in + g * mxfp4::kBlock, wg, mxfp4::kBlock);
        float best = org_max;
        double min_err = 1e9;
        for (int i = 0; i < steps; ++i) {
          const float mv = round_to_bf16(org_max * static_cast<float>(1.0 - static_cast<double>(i) / o.clip_n_grid));
          for (int j = 0; j < mxfp4::kBlock; ++j) cur[j] = std::clamp(wg[j], -mv, mv);
          mxfp4::qdq_row(cur, mxfp4::kBlock, q, o.scale_mode);
          double err = 0;
          for (int64_t t = 0; t < S; ++t) {
            double d = dot(xq.data() + t * in + g * mxfp4::kBlock, q, mxfp4::kBlock) - org[t];
            err += d * d;
          }
          err /= static_cast<double>(S);
          if (err < min_err) {
            min_err = err;
            best = mv;
          }
        }
        clip[r * G + g] = best;
      }
    }
  }
  return clip;
}

MlpAwqResult awq_mlp(const MlpWeights& w, const float* x_in, int64_t T, const AwqOptions& o, MlpQuantized quantized) {
  const int64_t H = w.hidden, I = w.inter;
  const bool b = w.bf16;
  if (T <= 0) throw Error(ErrorKind::kInvalidRequest, "AWQ needs at least one calibration token");
  MlpAwqResult res;

  // The calibration inputs as the bf16 model holds them, and down_proj's inputs (float weights).
  std::vector<float> X(x_in, x_in + T * H);
  if (b)
    for (auto& v : X) v = round_to_bf16(v);
  std::vector<float> h(static_cast<size_t>(T * I)), u(static_cast<size_t>(T * I));
  matmul_nt(X.data(), T, H, w.gate.data(), I, h.data());
  matmul_nt(X.data(), T, H, w.up.data(), I, u.data());
  for (size_t i = 0; i < h.size(); ++i) h[i] = bf(bf(silu(bf(h[i], b)), b) * bf(u[i], b), b);
  u = {};

  // The float output of down_proj, which is also the MLP's output: the reference of both losses.
  std::vector<float> y0(static_cast<size_t>(T * H));
  matmul_nt(h.data(), T, I, w.down.data(), H, y0.data());

  // Pair 1: post_attention_layernorm -> gate_proj + up_proj, judged on the MLP's output.
  // W4A4: QDQ(x/s) against Q(W·s) (the deployed form); W4A16: x against Q(W·s)/s (Quark's hooks).
  if (quantized.gate && quantized.up) {
    const std::vector<float> x_mean = channel_mean_abs(X.data(), T, H, b);
    auto loss = [&](const std::vector<float>& s) {
      std::vector<float> gq = fake_quant_scaled(w.gate, I, H, s, !o.quantize_inputs, o, b);
      std::vector<float> uq = fake_quant_scaled(w.up, I, H, s, !o.quantize_inputs, o, b);
      double sum = 0;
      std::vector<float> xin(static_cast<size_t>(kChunk * H)), g(static_cast<size_t>(kChunk * I)),
          uu(static_cast<size_t>(kChunk * I)), y(static_cast<size_t>(kChunk * H));
      for (int64_t t0 = 0; t0 < T; t0 += kChunk) {
        const int64_t n = std::min(kChunk, T - t0);
        module_input(X.data(), t0, n, H, o.quantize_inputs ? &s : nullptr, o, b, xin.data());
        matmul_nt(xin.data(), n, H, gq.data(), I, g.data());
        matmul_nt(xin.data(), n, H, uq.data(), I, uu.data());
        for (int64_t i = 0; i < n * I; ++i) g[i] = bf(bf(silu(bf(g[i], b)), b) * bf(uu[i], b), b);
        matmul_nt(g.data(), n, I, w.down.data(), H, y.data());  // down_proj stays float, as in Quark's search
        for (int64_t i = 0; i < n * H; ++i) {
          double d = static_cast<double>(bf(y[i], b)) - y0[t0 * H + i];
          sum += d * d;
        }
      }
      return sum / static_cast<double>(T * H);
    };
    auto [best, s1] = search_ratio(x_mean, o, b, loss, &res.loss_gate_up_plain, &res.ratio_gate_up);
    res.loss_gate_up_best = best;
    res.s_gate_up = s1;
    res.smoothed_gate_up = true;
    res.norm.resize(static_cast<size_t>(H));
    for (int64_t c = 0; c < H; ++c) res.norm[c] = bf(bf(bf(w.norm[c] + 1.0f, b) / s1[c], b) - 1.0f, b);
    res.gate.col_mul = s1;
    res.up.col_mul = s1;
  }

  // Pair 2: up_proj -> down_proj, judged on down_proj's output (h from the float weights).
  if (quantized.down) {
    const std::vector<float> h_mean = channel_mean_abs(h.data(), T, I, b);
    auto loss = [&](const std::vector<float>& s) {
      std::vector<float> dq = fake_quant_scaled(w.down, H, I, s, !o.quantize_inputs, o, b);
      double sum = 0;
      std::vector<float> hin(static_cast<size_t>(kChunk * I)), y(static_cast<size_t>(kChunk * H));
      for (int64_t t0 = 0; t0 < T; t0 += kChunk) {
        const int64_t n = std::min(kChunk, T - t0);
        module_input(h.data(), t0, n, I, o.quantize_inputs ? &s : nullptr, o, b, hin.data());
        matmul_nt(hin.data(), n, I, dq.data(), H, y.data());
        for (int64_t i = 0; i < n * H; ++i) {
          double d = static_cast<double>(bf(y[i], b)) - y0[t0 * H + i];
          sum += d * d;
        }
      }
      return sum / static_cast<double>(T * H);
    };
    auto [best, s2] = search_ratio(h_mean, o, b, loss, &res.loss_down_plain, &res.ratio_down);
    res.loss_down_best = best;
    res.s_down = s2;
    res.smoothed_down = true;
    res.up.row_div = s2;
    res.down.col_mul = s2;
  }

  if (!o.clip) return res;
  // Clip search on the smoothed weights with the inputs divided by the scales (Quark divides
  // its cached input features in place when it applies the scales).
  auto edited = [&](const std::vector<float>& W, int64_t N, int64_t K, const LinearEdit& e) {
    std::vector<float> out(W);
    for (int64_t r = 0; r < N; ++r) apply_linear_edit_row(e, r, K, out.data() + r * K, b);
    return out;
  };
  auto divided = [&](const std::vector<float>& v, int64_t K, const std::vector<float>& s) {
    std::vector<float> out(v);
    if (!s.empty())
      for (size_t i = 0; i < out.size(); ++i) out[i] = bf(out[i] / s[i % static_cast<size_t>(K)], b);
    return out;
  };
  if (quantized.gate || quantized.up) {
    std::vector<float> xs = divided(X, H, res.s_gate_up);
    if (quantized.gate) {
      std::vector<float> gw = edited(w.gate, I, H, res.gate);
      res.gate.clip_max = awq_clip(gw.data(), I, H, xs.data(), T, o);
    }
    if (quantized.up) {
      std::vector<float> uw = edited(w.up, I, H, res.up);
      res.up.clip_max = awq_clip(uw.data(), I, H, xs.data(), T, o);
    }
  }
  if (quantized.down) {
    std::vector<float> hs = divided(h, I, res.s_down);
    std::vector<float> dw = edited(w.down, H, I, res.down);
    res.down.clip_max = awq_clip(dw.data(), H, I, hs.data(), T, o);
  }
  return res;
}

WeightEdits compute_awq(const ModelConfig& config, const TensorStore& weights, MlpInputSource& source,
                        const std::set<std::string>& quantized, const AwqOptions& options,
                        std::vector<AwqLayerReport>* report) {
  const TextConfig& t = config.text;
  const int64_t H = t.hidden_size, I = t.intermediate_size;
  WeightEdits edits;
  int64_t expected_layer = 0;
  source.for_each_layer([&](int64_t layer, const float* x, int64_t tokens) {
    if (layer != expected_layer || layer >= t.num_hidden_layers)
      throw Error(ErrorKind::kInternal, "AWQ: calibration source yielded layer " + std::to_string(layer) +
                                            ", expected " + std::to_string(expected_layer));
    ++expected_layer;
    const MlpTensorNames names = mlp_tensor_names(layer);
    const std::string &gate = names.gate, &up = names.up, &down = names.down, &norm = names.norm;
    MlpQuantized q{quantized.count(gate) > 0, quantized.count(up) > 0, quantized.count(down) > 0};
    if (!q.gate && !q.up && !q.down) return;
    MlpWeights w;
    w.hidden = H;
    w.inter = I;
    w.gate = read_f32(weights, gate + ".weight", I * H);
    w.up = read_f32(weights, up + ".weight", I * H);
    w.down = read_f32(weights, down + ".weight", H * I);
    w.norm = read_f32(weights, norm, H);
    w.bf16 = weights.get(gate + ".weight").dtype == DType::kBF16;
    MlpAwqResult r = awq_mlp(w, x, tokens, options, q);
    auto keep = [&](const std::string& name, LinearEdit& e) {
      if (!e.col_mul.empty() || !e.row_div.empty() || !e.clip_max.empty()) edits.linears[name] = std::move(e);
    };
    keep(gate, r.gate);
    keep(up, r.up);
    keep(down, r.down);
    if (!r.norm.empty()) edits.tensors[norm] = std::move(r.norm);
    if (report)
      report->push_back({layer, r.ratio_gate_up, r.ratio_down, r.loss_gate_up_plain, r.loss_gate_up_best,
                         r.loss_down_plain, r.loss_down_best});
  });
  if (expected_layer != t.num_hidden_layers)
    throw Error(ErrorKind::kInternal, "AWQ: calibration source yielded " + std::to_string(expected_layer) + " of " +
                                          std::to_string(t.num_hidden_layers) + " layers");
  return edits;
}

}  // namespace stave::quantize
