// The fast CPU backend (`--precision fast`): vectorized, multithreaded kernels for every op the
// model runs. Numerics are fp32 accumulation over the stored weights (bf16 / MXFP4) with a fast
// exp, so results differ from the reference backend by rounding only; tests hold the two
// together (tests/test_cpu_backend_ops.cpp per op, tests/test_decide_fast.cpp per decision).
//
// Threads: OpenMP, as many as omp_set_num_threads gave (EngineOptions::threads). Each op runs
// single-threaded below a work threshold, where waking threads costs more than it saves.
// Leaf kernels: op_kernels.h (one table per ISA, chosen at run time); linear: cpu_linear.h.
//
// Peak working memory of an op call beyond its inputs and outputs (per thread; f = 4 bytes):
//   attention_causal / attention_dense: (R·64 + R·d + 2R + 64·d) f with R = 32·(n_q/n_kv) rows
//     per block — independent of the sequence length (9B: d 256, R 128 → 230 KB);
//   gated_delta_rule: 64·(4·d_k + 2·d_v + 130) + 64·d_k + d_k + d_v f per thread, independent of
//     the token count (9B: d_k = d_v = 128 → 264 KB); the state is updated in place;
//   causal_conv1d_silu: kernel·channels f (the transposed weight).
#pragma once
#include "ops/backend.h"

namespace stave::cpu {

class CpuBackend : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  // Steps of 256 tokens keep the temporaries in cache-sized pieces.
  int64_t preferred_step_tokens() const override { return 256; }
  void linear(const LinearWeight& w, const float* x, int64_t M, float* y) const override;
  void rms_norm_zero_centered(const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                              float* y) const override;
  void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps,
                      float* y) const override;
  void silu_mul(const float* gate, const float* up, int64_t n, float* y) const override;
  void add_inplace(float* h, const float* y, int64_t n) const override;
  void split_query_gate(const float* qg, int64_t rows, int64_t d, float* q, float* gate) const override;
  void add_rms_norm_zero_centered(float* h, const float* y, int64_t rows, int64_t dim, const float* w, float eps,
                                  float* x) const override;
  void sigmoid_mul(float* x, const float* gate, int64_t n) const override;
  void causal_conv1d_silu(const float* x, int64_t tokens, int64_t channels, const float* weight, int64_t kernel,
                          float* history, float* y) const override;
  void gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t tokens,
                 int64_t n_v, float* g, float* beta) const override;
  void gated_delta_rule(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                        float* out) const override;
  void gated_delta_rule_recurrent(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                                  float* out) const override;
  void apply_rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim, const float* cos,
                  const float* sin) const override;
  void attention_causal(const AttentionShape& shape, const float* q, int64_t tokens, int64_t q_pos0, const float* k,
                        const float* v, float* out) const override;
  void attention_dense(const AttentionShape& shape, const float* q, int64_t q_stride, int64_t q_rows, const float* k,
                       const float* v, int64_t kv_stride, int64_t kv_rows, float* out,
                       int64_t out_stride) const override;
  void matmul_nt(const float* x, int64_t M, int64_t K, const float* w, int64_t N, const float* bias,
                 float* y) const override;
  void gelu_tanh_inplace(float* x, int64_t n) const override;
  // The fast path computes the patch embedding as the linear it is.
  void patch_embed(const LinearWeight& w, int64_t, const float* x, int64_t rows, float* y) const override {
    linear(w, x, rows, y);
  }
};

const Backend& fast_backend();

}  // namespace stave::cpu
