#include "model/text_layers/full_attention_layer.h"

#include <algorithm>
#include <cmath>

#include "stave/errors.h"

namespace stave {

FullAttentionLayer::FullAttentionLayer(const TensorStore& store, const AttentionTensorNames& names, const TextConfig& config,
                                       const quant::QuantPlan* plan, const Backend& backend) {
  const int64_t H = config.hidden_size, d = config.head_dim;
  const int64_t nq = config.num_attention_heads, nkv = config.num_key_value_heads;
  if (nkv <= 0 || nq % nkv != 0)
    throw Error(ErrorKind::kInvalidModel, "num_attention_heads (" + std::to_string(nq) +
                                              ") must be a multiple of num_key_value_heads (" + std::to_string(nkv) + ")");
  // HF's scaling = head_dim ** -0.5 (a Python double), rounded to fp32 where it meets the scores.
  shape_ = {nq, nkv, d, static_cast<float>(std::pow(static_cast<double>(d), -0.5))};
  hidden_ = H;
  rotary_dim_ = config.rotary_dim();
  eps_ = static_cast<float>(config.rms_norm_eps);
  q_proj_ = bind_linear(store, names.q_proj, 2 * nq * d, H, plan);
  k_proj_ = bind_linear(store, names.k_proj, nkv * d, H, plan);
  v_proj_ = bind_linear(store, names.v_proj, nkv * d, H, plan);
  o_proj_ = bind_linear(store, names.o_proj, H, nq * d, plan);
  for (const LinearWeight* w : {&q_proj_, &k_proj_, &v_proj_, &o_proj_}) backend.prepare(*w);
  q_norm_ = backend.to_device(Tensor::host(read_f32(store, names.q_norm, d)));
  k_norm_ = backend.to_device(Tensor::host(read_f32(store, names.k_norm, d)));
}

FullAttentionLayer::State FullAttentionLayer::new_state(const Backend& backend, int64_t max_tokens) const {
  const int64_t kv_width = shape_.n_kv_heads * shape_.head_dim;
  State c;
  c.k = backend.empty({max_tokens, kv_width});
  c.v = backend.empty({max_tokens, kv_width});
  c.capacity = max_tokens;
  return c;
}

void FullAttentionLayer::grow(const Backend& backend, State& cache, int64_t min_tokens) const {
  // Geometric growth: a decode loop appends one token at a time.
  const int64_t capacity = std::max(min_tokens, 2 * cache.capacity);
  const int64_t kv_width = shape_.n_kv_heads * shape_.head_dim;
  Tensor k = backend.empty({capacity, kv_width}), v = backend.empty({capacity, kv_width});
  if (cache.length > 0) {
    backend.copy(cache.k.rows(0, cache.length), k);
    backend.copy(cache.v.rows(0, cache.length), v);
  }
  cache.k = std::move(k);
  cache.v = std::move(v);
  cache.capacity = capacity;
}

void FullAttentionLayer::forward(const Backend& backend, const LayerInput& x, const TokenBatch& batch,
                                 std::span<State* const> states, float* y) const {
  const int64_t T = batch.rows, d = shape_.head_dim, nq = shape_.n_q_heads, nkv = shape_.n_kv_heads;
  const int64_t q_width = nq * d, kv_width = nkv * d;
  if (batch.slices.size() != states.size())
    throw Error(ErrorKind::kInternal, "an attention step of " + std::to_string(batch.slices.size()) +
                                          " sequences on " + std::to_string(states.size()) + " caches");
  for (size_t s = 0; s < batch.slices.size(); ++s) {
    const SequenceSlice& q = batch.slices[s];
    State& c = *states[s];
    if (q.begin != c.length)
      throw Error(ErrorKind::kInternal, "attention rows at " + std::to_string(q.begin) + " (+" +
                                            std::to_string(q.tokens) + ") do not continue their cache (length " +
                                            std::to_string(c.length) + ")");
    if (c.length + q.tokens > c.capacity) grow(backend, c, c.length + q.tokens);
  }

  // Query and gate are interleaved per head: head h owns [q_h (d) | gate_h (d)]. New keys and
  // values of one sequence go straight into its cache rows; packed sequences are projected
  // together and then copied into their caches. The three projections share their input.
  const Tensor qg = backend.empty({T, 2 * q_width});
  const bool one = batch.slices.size() == 1;
  Tensor K, V;
  if (one) {
    const State& c = *states.front();
    K = c.k.rows(c.length, T);
    V = c.v.rows(c.length, T);
  } else {
    K = backend.empty({T, kv_width});
    V = backend.empty({T, kv_width});
  }
  const Backend::LinearOutput outs[] = {
      {q_proj_, qg.data<float>()}, {k_proj_, K.data<float>()}, {v_proj_, V.data<float>()}};
  x.project(backend, T, outs);
  // q = rope(norm(query halves)), gate = the gate halves: one op (split_query_gate, the
  // per-head norm and RoPE composed by default).
  const Tensor q = backend.empty({T, q_width}), gate = backend.empty({T, q_width});
  backend.head_norm_rope(qg.data<float>(), T, nq, d, q_norm_.data<float>(), eps_, rotary_dim_, batch.rope_cos,
                         batch.rope_sin, q.data<float>(), gate.data<float>());
  backend.head_norm_rope(K.data<float>(), T, nkv, d, k_norm_.data<float>(), eps_, rotary_dim_, batch.rope_cos,
                         batch.rope_sin, K.data<float>(), nullptr);
  if (!one)
    for (size_t s = 0; s < batch.slices.size(); ++s) {
      const SequenceSlice& sl = batch.slices[s];
      if (sl.tokens == 0) continue;
      State& c = *states[s];
      backend.copy(K.rows(sl.row0, sl.tokens), c.k.rows(c.length, sl.tokens));
      backend.copy(V.rows(sl.row0, sl.tokens), c.v.rows(c.length, sl.tokens));
    }

  // Each sequence attends to its own keys; the output overwrites qg (large enough).
  float* o = qg.data<float>();
  for (size_t s = 0; s < batch.slices.size(); ++s) {
    const SequenceSlice& sl = batch.slices[s];
    State& c = *states[s];
    if (sl.tokens > 0)
      backend.attention_causal(shape_, q.data<float>() + sl.row0 * q_width, sl.tokens, sl.begin, c.k.data<float>(),
                               c.v.data<float>(), o + sl.row0 * q_width);
    c.length += sl.tokens;
  }
  backend.sigmoid_mul_linear(o_proj_, o, gate.data<float>(), T, y);
}

}  // namespace stave
