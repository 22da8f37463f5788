// A profiling aid: a Backend that forwards every op to another one and charges its wall-clock
// time (after waiting for the device) to a stage — linear, norms+elementwise, gdn conv+gates,
// gdn delta rule, attention, copies — and prints the totals to stderr whenever results come back
// to the host or a forward ends waiting for the device (the end of a forward, a prefill or a
// decode step). make_backend wraps its
// backend in one when STAVE_STAGES (or the older STAVE_CUDA_STAGES) is set. Waiting after every
// op makes a profiled run slower than a plain one; compare stages, not totals.
#pragma once
#include <memory>
#include <mutex>

#include "ops/backend.h"
#include "util/stage_timer.h"

namespace stave {

class StagedBackend : public Backend {
 public:
  explicit StagedBackend(std::shared_ptr<const Backend> inner);
  const char* name() const override { return inner_->name(); }

  Device device() const override { return inner_->device(); }
  Tensor empty(Tensor::Shape shape, DType dtype = DType::kF32) const override;
  void fill_zero(const Tensor& t) const override;
  void copy_from_host(const void* host, const Tensor& dst) const override;
  void copy_to_host(const Tensor& src, void* host) const override;
  void copy(const Tensor& src, const Tensor& dst) const override;
  Tensor to_host(const Tensor& t) const override;
  Tensor host_staging(Tensor::Shape shape, DType dtype = DType::kF32) const override;
  // Reports too: a forward whose hidden states stay on the device ends with it, not with a copy
  // to the host.
  void synchronize() const override;
  void prepare(const LinearWeight& w) const override { inner_->prepare(w); }
  void embedding_rows(const LinearWeight& table, std::span<const int32_t> ids, const Tensor& h) const override;
  void prepare_embedding(const LinearWeight& table) const override { inner_->prepare_embedding(table); }
  int64_t preferred_step_tokens() const override { return inner_->preferred_step_tokens(); }

  void linear(const LinearWeight& w, const float* x, int64_t M, float* y) const override;
  void linear_shared_input(const float* x, int64_t M, std::span<const LinearOutput> outs) const override;
  void silu_mul_linear(const LinearWeight& w, float* gate, const float* up, int64_t M, float* y) const override;
  void rms_norm_zero_centered(const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                              float* y) const override;
  void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps,
                      float* y) const override;
  void silu_mul(const float* gate, const float* up, int64_t n, float* y) const override;
  void sigmoid_mul(float* x, const float* gate, int64_t n) const override;
  void add_rms_norm_linear_shared(float* h, const float* y, int64_t rows, int64_t dim, const float* w, float eps,
                                  float* x, std::span<const LinearOutput> outs) const override;
  bool forms_input_in_products() const override { return inner_->forms_input_in_products(); }
  void sigmoid_mul_linear(const LinearWeight& w, float* x, const float* gate, int64_t M, float* y) const override;
  void gated_rms_norm_linear(const LinearWeight& w, const float* x, const float* z, int64_t dim, const float* norm_w,
                             float eps, float* scratch, int64_t M, float* y) const override;
  void add_inplace(float* h, const float* y, int64_t n) const override;
  void split_query_gate(const float* qg, int64_t rows, int64_t d, float* q, float* gate) const override;
  void add_rms_norm_zero_centered(float* h, const float* y, int64_t rows, int64_t dim, const float* w, float eps,
                                  float* x) const override;
  void head_norm_rope(const float* x, int64_t tokens, int64_t heads, int64_t head_dim, const float* w, float eps,
                      int64_t rotary_dim, const float* cos, const float* sin, float* y, float* gate) const override;
  void causal_conv1d_silu(const float* x, int64_t tokens, int64_t channels, const float* weight, int64_t kernel,
                          float* history, float* y) const override;
  void gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t tokens,
                 int64_t n_v, float* g, float* beta) const override;
  void gated_delta_rule(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                        float* out) const override;
  void gated_delta_rule_recurrent(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                                  float* out) const override;
  void gated_delta_rule_packed(const GatedDeltaDims& dims, const GatedDeltaInput& in, std::span<const int64_t> starts,
                               std::span<float* const> states, float* out) const override;
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
  void patch_embed(const LinearWeight& w, int64_t channels, const float* x, int64_t rows, float* y) const override;
  std::unique_ptr<HeadMemory> head_memory(const HeadMemorySpec& spec, HiddenRows hidden,
                                          int64_t L) const override;

 private:
  // Runs f charged to `stage`.
  template <class F>
  void timed(const char* stage, F&& f) const;
  void report() const;

  std::shared_ptr<const Backend> inner_;
  mutable std::mutex mutex_;
  mutable std::unique_ptr<StageTimer> timer_;
};

}  // namespace stave
