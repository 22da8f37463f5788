// Runs a backend's ops on host data: every input goes into the backend's memory, the op runs
// there, and the outputs (poisoned with NaN first, so an unwritten element fails) come back.
// On a CPU backend the copies are memcpy; on CUDA they are real uploads and downloads. The op
// suite (tests/test_backend_ops.cpp) and the CUDA-only tests call ops through this.
#pragma once
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "ops/backend.h"

namespace stave::test {

class HostOps {
 public:
  explicit HostOps(const Backend& be) : be_(be) {}
  const Backend& backend() const { return be_; }

  Tensor up(const float* p, int64_t n) const {
    Tensor t = be_.empty({n});
    be_.copy_from_host(p, t);
    return t;
  }
  Tensor up(const std::vector<float>& v) const { return up(v.data(), static_cast<int64_t>(v.size())); }
  Tensor poisoned(int64_t n) const {
    return up(std::vector<float>(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN()));
  }
  void down(const Tensor& t, float* p) const { be_.copy_to_host(t, p); }
  static float* f(const Tensor& t) { return t.data<float>(); }

  void linear(const LinearWeight& w, const float* x, int64_t M, float* y) const {
    const Tensor X = up(x, M * w.in), Y = poisoned(M * w.out);
    be_.linear(w, f(X), M, f(Y));
    down(Y, y);
  }
  // Backend::linear_shared_input: ys[i] [M, ws[i]->out] for one x [M, K].
  void linear_shared_input(std::span<const LinearWeight* const> ws, const float* x, int64_t M,
                           std::vector<std::vector<float>>& ys) const {
    const Tensor X = up(x, M * ws.front()->in);
    std::vector<Tensor> Y;
    std::vector<Backend::LinearOutput> outs;
    for (const LinearWeight* w : ws) Y.push_back(poisoned(M * w->out));
    for (size_t i = 0; i < ws.size(); ++i) outs.push_back({*ws[i], f(Y[i])});
    be_.linear_shared_input(f(X), M, outs);
    ys.assign(ws.size(), {});
    for (size_t i = 0; i < ws.size(); ++i) {
      ys[i].resize(static_cast<size_t>(M * ws[i]->out));
      down(Y[i], ys[i].data());
    }
  }
  // Backend::add_rms_norm_linear_shared (y null: no add): h updated, ys[i] [M, ws[i]->out]; x is
  // the backend's scratch (not returned: the fused path may leave it unwritten).
  void add_rms_norm_linear_shared(float* h, const float* y, int64_t M, const float* nw, float eps,
                                  std::span<const LinearWeight* const> ws, std::vector<std::vector<float>>& ys) const {
    const int64_t dim = ws.front()->in;
    const Tensor H = up(h, M * dim), W = up(nw, dim), X = poisoned(M * dim);
    const Tensor Y = y ? up(y, M * dim) : Tensor();
    std::vector<Tensor> outs_t;
    std::vector<Backend::LinearOutput> outs;
    for (const LinearWeight* w : ws) outs_t.push_back(poisoned(M * w->out));
    for (size_t i = 0; i < ws.size(); ++i) outs.push_back({*ws[i], f(outs_t[i])});
    be_.add_rms_norm_linear_shared(f(H), y ? f(Y) : nullptr, M, dim, f(W), eps, f(X), outs);
    down(H, h);
    ys.assign(ws.size(), {});
    for (size_t i = 0; i < ws.size(); ++i) {
      ys[i].resize(static_cast<size_t>(M * ws[i]->out));
      down(outs_t[i], ys[i].data());
    }
  }
  // Backend::silu_mul_linear (gate is scratch in the backend's memory; the host copy is kept).
  void silu_mul_linear(const LinearWeight& w, const float* gate, const float* upv, int64_t M, float* y) const {
    const Tensor G = up(gate, M * w.in), U = up(upv, M * w.in), Y = poisoned(M * w.out);
    be_.silu_mul_linear(w, f(G), f(U), M, f(Y));
    down(Y, y);
  }
  // Backend::sigmoid_mul_linear (x is scratch in the backend's memory; the host copy is kept).
  void sigmoid_mul_linear(const LinearWeight& w, const float* x, const float* gate, int64_t M, float* y) const {
    const Tensor X = up(x, M * w.in), G = up(gate, M * w.in), Y = poisoned(M * w.out);
    be_.sigmoid_mul_linear(w, f(X), f(G), M, f(Y));
    down(Y, y);
  }
  // Backend::gated_rms_norm_linear (with its scratch in the backend's memory).
  void gated_rms_norm_linear(const LinearWeight& w, const float* x, const float* z, int64_t dim, const float* nw,
                             float eps, int64_t M, float* y) const {
    const Tensor X = up(x, M * w.in), Z = up(z, M * w.in), W = up(nw, dim), S = poisoned(M * w.in),
                 Y = poisoned(M * w.out);
    be_.gated_rms_norm_linear(w, f(X), f(Z), dim, f(W), eps, f(S), M, f(Y));
    down(Y, y);
  }
  void rms_norm_zero_centered(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* y) const {
    const Tensor X = up(x, rows * dim), W = up(w, dim), Y = poisoned(rows * dim);
    be_.rms_norm_zero_centered(f(X), rows, dim, f(W), eps, f(Y));
    down(Y, y);
  }
  void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps,
                      float* y) const {
    const Tensor X = up(x, rows * dim), Z = up(z, rows * dim), W = up(w, dim), Y = poisoned(rows * dim);
    be_.gated_rms_norm(f(X), f(Z), rows, dim, f(W), eps, f(Y));
    down(Y, y);
  }
  void silu_mul(const float* gate, const float* upv, int64_t n, float* y) const {
    const Tensor G = up(gate, n), U = up(upv, n), Y = poisoned(n);
    be_.silu_mul(f(G), f(U), n, f(Y));
    down(Y, y);
  }
  void sigmoid_mul(float* x, const float* gate, int64_t n) const {
    const Tensor X = up(x, n), G = up(gate, n);
    be_.sigmoid_mul(f(X), f(G), n);
    down(X, x);
  }
  void add_inplace(float* h, const float* y, int64_t n) const {
    const Tensor H = up(h, n), Y = up(y, n);
    be_.add_inplace(f(H), f(Y), n);
    down(H, h);
  }
  void split_query_gate(const float* qg, int64_t rows, int64_t d, float* q, float* gate) const {
    const Tensor QG = up(qg, rows * 2 * d), Q = poisoned(rows * d), G = poisoned(rows * d);
    be_.split_query_gate(f(QG), rows, d, f(Q), f(G));
    down(Q, q);
    down(G, gate);
  }
  void add_rms_norm_zero_centered(float* h, const float* y, int64_t rows, int64_t dim, const float* w, float eps,
                                  float* x) const {
    const Tensor H = up(h, rows * dim), Y = up(y, rows * dim), W = up(w, dim), X = poisoned(rows * dim);
    be_.add_rms_norm_zero_centered(f(H), f(Y), rows, dim, f(W), eps, f(X));
    down(H, h);
    down(X, x);
  }
  // With a gate: x holds tokens·heads rows of [q | gate] (2·head_dim each); without, y = x in place.
  void head_norm_rope(const float* x, int64_t tokens, int64_t heads, int64_t head_dim, const float* w, float eps,
                      int64_t rotary_dim, const float* cos, const float* sin, float* y, float* gate) const {
    const int64_t n = tokens * heads * head_dim, half = rotary_dim / 2;
    const Tensor X = up(x, gate ? 2 * n : n), W = up(w, head_dim), C = up(cos, tokens * half), S = up(sin, tokens * half);
    const Tensor Y = gate ? poisoned(n) : X, G = poisoned(gate ? n : 1);
    be_.head_norm_rope(f(X), tokens, heads, head_dim, f(W), eps, rotary_dim, f(C), f(S), f(Y), gate ? f(G) : nullptr);
    down(Y, y);
    if (gate) down(G, gate);
  }
  void causal_conv1d_silu(const float* x, int64_t tokens, int64_t channels, const float* weight, int64_t kernel,
                          float* history, float* y) const {
    const Tensor X = up(x, tokens * channels), W = up(weight, channels * kernel);
    const Tensor Hs = up(history, (kernel - 1) * channels), Y = poisoned(tokens * channels);
    be_.causal_conv1d_silu(f(X), tokens, channels, f(W), kernel, f(Hs), f(Y));
    down(Y, y);
    down(Hs, history);
  }
  void gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t tokens, int64_t n_v,
                 float* g, float* beta) const {
    const Tensor A = up(a, tokens * n_v), B = up(b, tokens * n_v), AL = up(A_log, n_v), DT = up(dt_bias, n_v);
    const Tensor G = poisoned(tokens * n_v), BE = poisoned(tokens * n_v);
    be_.gdn_gates(f(A), f(B), f(AL), f(DT), tokens, n_v, f(G), f(BE));
    down(G, g);
    down(BE, beta);
  }
  enum class DeltaForm { kChunked, kRecurrent };
  // `row` holds in's q, k and v ([tokens, stride] from row.data()); `states` one block per
  // sequence; `starts` empty for one sequence (then the chunked or recurrent form runs).
  void gated_delta_rule(DeltaForm form, const GatedDeltaDims& dims, const GatedDeltaInput& in,
                        const std::vector<float>& row, std::span<const int64_t> starts, float* states,
                        float* out) const {
    const int64_t T = in.tokens, n_seq = starts.empty() ? 1 : static_cast<int64_t>(starts.size()) - 1;
    const Tensor R = up(row), G = up(in.g, T * dims.n_v_heads), B = up(in.beta, T * dims.n_v_heads);
    const Tensor S = up(states, n_seq * dims.state_floats()), O = poisoned(T * dims.n_v_heads * dims.d_v);
    GatedDeltaInput d = in;
    d.q = f(R) + (in.q - row.data());
    d.k = f(R) + (in.k - row.data());
    d.v = f(R) + (in.v - row.data());
    d.g = f(G);
    d.beta = f(B);
    if (!starts.empty()) {
      // One state per sequence, as the model keeps them: pointers into the uploaded block.
      std::vector<float*> per_sequence;
      for (int64_t b = 0; b < n_seq; ++b) per_sequence.push_back(f(S) + b * dims.state_floats());
      be_.gated_delta_rule_packed(dims, d, starts, per_sequence, f(O));
    }
    else if (form == DeltaForm::kChunked)
      be_.gated_delta_rule(dims, d, f(S), f(O));
    else
      be_.gated_delta_rule_recurrent(dims, d, f(S), f(O));
    down(O, out);
    down(S, states);
  }
  void apply_rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim, const float* cos,
                  const float* sin) const {
    const int64_t half = rotary_dim / 2;
    const Tensor X = up(x, tokens * heads * head_dim), C = up(cos, tokens * half), S = up(sin, tokens * half);
    be_.apply_rope(f(X), tokens, heads, head_dim, rotary_dim, f(C), f(S));
    down(X, x);
  }
  void attention_causal(const AttentionShape& s, const float* q, int64_t tokens, int64_t q_pos0, const float* k,
                        const float* v, float* out) const {
    const int64_t keys = q_pos0 + tokens, kvw = s.n_kv_heads * s.head_dim, qw = s.n_q_heads * s.head_dim;
    const Tensor Q = up(q, tokens * qw), K = up(k, keys * kvw), V = up(v, keys * kvw), O = poisoned(tokens * qw);
    be_.attention_causal(s, f(Q), tokens, q_pos0, f(K), f(V), f(O));
    down(O, out);
  }

 private:
  const Backend& be_;
};

}  // namespace stave::test
