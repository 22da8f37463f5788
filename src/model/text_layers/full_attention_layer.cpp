#include "model/text_layers/full_attention_layer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "stave/errors.h"

namespace stave {

FullAttentionLayer::FullAttentionLayer(const TensorStore& store, const std::string& prefix, const TextConfig& config,
                                       const quant::QuantPlan* plan) {
  const int64_t H = config.hidden_size, d = config.head_dim;
  const int64_t nq = config.num_attention_heads, nkv = config.num_key_value_heads;
  if (nkv <= 0 || nq % nkv != 0)
    throw Error(ErrorKind::kInvalidModel, "num_attention_heads (" + std::to_string(nq) +
                                              ") must be a multiple of num_key_value_heads (" + std::to_string(nkv) + ")");
  // HF's scaling = head_dim ** -0.5 (a Python double), rounded to fp32 where it meets the scores.
  shape_ = {nq, nkv, d, static_cast<float>(std::pow(static_cast<double>(d), -0.5))};
  rotary_dim_ = config.rotary_dim();
  eps_ = static_cast<float>(config.rms_norm_eps);
  q_proj_ = bind_linear(store, prefix + "q_proj", 2 * nq * d, H, plan);
  k_proj_ = bind_linear(store, prefix + "k_proj", nkv * d, H, plan);
  v_proj_ = bind_linear(store, prefix + "v_proj", nkv * d, H, plan);
  o_proj_ = bind_linear(store, prefix + "o_proj", H, nq * d, plan);
  q_norm_ = read_f32(store, prefix + "q_norm.weight", d);
  k_norm_ = read_f32(store, prefix + "k_norm.weight", d);
}

FullAttentionLayer::State FullAttentionLayer::new_state(int64_t max_tokens) const {
  State s;
  const size_t n = static_cast<size_t>(max_tokens * shape_.n_kv_heads * shape_.head_dim);
  s.k.assign(n, 0.0f);
  s.v.assign(n, 0.0f);
  s.capacity = max_tokens;
  return s;
}

void FullAttentionLayer::grow(State& state, int64_t min_tokens) const {
  // Geometric growth: a decode loop appends one token at a time.
  const int64_t capacity = std::max(min_tokens, 2 * state.capacity);
  const size_t n = static_cast<size_t>(capacity * shape_.n_kv_heads * shape_.head_dim);
  state.k.resize(n, 0.0f);
  state.v.resize(n, 0.0f);
  state.capacity = capacity;
}

void FullAttentionLayer::forward(const Backend& backend, const float* x, const TokenChunk& chunk, State& state,
                                 float* y) const {
  const int64_t T = chunk.tokens, d = shape_.head_dim, nq = shape_.n_q_heads;
  const int64_t q_width = nq * d, kv_width = shape_.n_kv_heads * d;
  if (chunk.begin != state.length)
    throw Error(ErrorKind::kInternal, "attention chunk at " + std::to_string(chunk.begin) + " (+" + std::to_string(T) +
                                          ") does not continue its cache (length " + std::to_string(state.length) + ")");
  if (state.length + T > state.capacity) grow(state, state.length + T);

  // Query and gate are interleaved per head: head h owns [q_h (d) | gate_h (d)].
  std::vector<float> qg(T * 2 * q_width);
  backend.linear(q_proj_, x, T, qg.data());
  std::vector<float> q(T * q_width), gate(T * q_width);
  for (int64_t r = 0; r < T * nq; ++r) {
    std::memcpy(&q[r * d], &qg[r * 2 * d], d * sizeof(float));
    std::memcpy(&gate[r * d], &qg[r * 2 * d + d], d * sizeof(float));
  }

  // New keys and values go straight into the cache rows of these tokens.
  float* k = state.k.data() + chunk.begin * kv_width;
  float* v = state.v.data() + chunk.begin * kv_width;
  backend.linear(k_proj_, x, T, k);
  backend.linear(v_proj_, x, T, v);

  backend.rms_norm_zero_centered(q.data(), T * nq, d, q_norm_.data(), eps_, q.data());
  backend.rms_norm_zero_centered(k, T * shape_.n_kv_heads, d, k_norm_.data(), eps_, k);
  backend.apply_rope(q.data(), T, nq, d, rotary_dim_, chunk.rope_cos, chunk.rope_sin);
  backend.apply_rope(k, T, shape_.n_kv_heads, d, rotary_dim_, chunk.rope_cos, chunk.rope_sin);
  state.length += T;

  // Attention output overwrites qg (large enough) to save a buffer.
  float* o = qg.data();
  backend.attention_causal(shape_, q.data(), T, chunk.begin, state.k.data(), state.v.data(), o);
  backend.sigmoid_mul(o, gate.data(), T * q_width);
  backend.linear(o_proj_, o, T, y);
}

}  // namespace stave
