#include "backends/staged_backend.h"

namespace stave {

StagedBackend::StagedBackend(std::shared_ptr<const Backend> inner) : inner_(std::move(inner)) {}

template <class F>
void StagedBackend::timed(const char* stage, F&& f) const {
  std::lock_guard lock(mutex_);
  if (!timer_) timer_ = std::make_unique<StageTimer>(nullptr, [this] { inner_->synchronize(); });
  timer_->enter(stage);
  f();
  timer_->enter(nullptr);
}

void StagedBackend::report() const {
  std::lock_guard lock(mutex_);
  if (!timer_) return;
  timer_->report((std::string(inner_->name()) + " stages").c_str(), -1);
  timer_.reset();
}

Tensor StagedBackend::empty(Tensor::Shape shape, DType dtype) const { return inner_->empty(std::move(shape), dtype); }
void StagedBackend::fill_zero(const Tensor& t) const { timed("copies", [&] { inner_->fill_zero(t); }); }
void StagedBackend::embedding_rows(const LinearWeight& table, std::span<const int32_t> ids, const Tensor& h) const {
  timed("copies", [&] { inner_->embedding_rows(table, ids, h); });
}

void StagedBackend::copy_from_host(const void* host, const Tensor& dst) const {
  timed("copies", [&] { inner_->copy_from_host(host, dst); });
}
void StagedBackend::copy_to_host(const Tensor& src, void* host) const {
  timed("copies", [&] { inner_->copy_to_host(src, host); });
  report();
}
void StagedBackend::copy(const Tensor& src, const Tensor& dst) const {
  timed("copies", [&] { inner_->copy(src, dst); });
}
void StagedBackend::synchronize() const {
  inner_->synchronize();
  report();
}

Tensor StagedBackend::host_staging(Tensor::Shape shape, DType dtype) const {
  return inner_->host_staging(std::move(shape), dtype);
}

Tensor StagedBackend::to_host(const Tensor& t) const {
  Tensor out;
  timed("copies", [&] { out = inner_->to_host(t); });
  report();
  return out;
}

void StagedBackend::linear(const LinearWeight& w, const float* x, int64_t M, float* y) const {
  timed("linear", [&] { inner_->linear(w, x, M, y); });
}
void StagedBackend::linear_shared_input(const float* x, int64_t M, std::span<const LinearOutput> outs) const {
  timed("linear", [&] { inner_->linear_shared_input(x, M, outs); });
}
// Counted as linear: on CUDA's FP8 path the product is part of the down projection's input
// quantization (elsewhere the composition's silu_mul is in this stage too).
void StagedBackend::silu_mul_linear(const LinearWeight& w, float* gate, const float* up, int64_t M, float* y) const {
  timed("linear", [&] { inner_->silu_mul_linear(w, gate, up, M, y); });
}
void StagedBackend::rms_norm_zero_centered(const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                                           float* y) const {
  timed("norms+elementwise", [&] { inner_->rms_norm_zero_centered(x, rows, dim, w, eps, y); });
}
void StagedBackend::gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w,
                                   float eps, float* y) const {
  timed("norms+elementwise", [&] { inner_->gated_rms_norm(x, z, rows, dim, w, eps, y); });
}
void StagedBackend::silu_mul(const float* gate, const float* up, int64_t n, float* y) const {
  timed("norms+elementwise", [&] { inner_->silu_mul(gate, up, n, y); });
}
// The projections that form their input inside the products count as linear work (their
// element-wise part is inside the quantization); where the inner backend composes them, the
// composition runs through this profiler's own ops, each in its stage.
void StagedBackend::add_rms_norm_linear_shared(float* h, const float* y, int64_t rows, int64_t dim, const float* w,
                                               float eps, float* x, std::span<const LinearOutput> outs) const {
  if (!inner_->forms_input_in_products()) return Backend::add_rms_norm_linear_shared(h, y, rows, dim, w, eps, x, outs);
  timed("linear", [&] { inner_->add_rms_norm_linear_shared(h, y, rows, dim, w, eps, x, outs); });
}

void StagedBackend::sigmoid_mul_linear(const LinearWeight& w, float* x, const float* gate, int64_t M, float* y) const {
  if (!inner_->forms_input_in_products()) return Backend::sigmoid_mul_linear(w, x, gate, M, y);
  timed("linear", [&] { inner_->sigmoid_mul_linear(w, x, gate, M, y); });
}

void StagedBackend::gated_rms_norm_linear(const LinearWeight& w, const float* x, const float* z, int64_t dim,
                                          const float* norm_w, float eps, float* scratch, int64_t M,
                                          float* y) const {
  if (!inner_->forms_input_in_products())
    return Backend::gated_rms_norm_linear(w, x, z, dim, norm_w, eps, scratch, M, y);
  timed("linear", [&] { inner_->gated_rms_norm_linear(w, x, z, dim, norm_w, eps, scratch, M, y); });
}

void StagedBackend::sigmoid_mul(float* x, const float* gate, int64_t n) const {
  timed("norms+elementwise", [&] { inner_->sigmoid_mul(x, gate, n); });
}
void StagedBackend::add_inplace(float* h, const float* y, int64_t n) const {
  timed("norms+elementwise", [&] { inner_->add_inplace(h, y, n); });
}
void StagedBackend::split_query_gate(const float* qg, int64_t rows, int64_t d, float* q, float* gate) const {
  timed("norms+elementwise", [&] { inner_->split_query_gate(qg, rows, d, q, gate); });
}
void StagedBackend::add_rms_norm_zero_centered(float* h, const float* y, int64_t rows, int64_t dim, const float* w,
                                               float eps, float* x) const {
  timed("norms+elementwise", [&] { inner_->add_rms_norm_zero_centered(h, y, rows, dim, w, eps, x); });
}
void StagedBackend::head_norm_rope(const float* x, int64_t tokens, int64_t heads, int64_t head_dim, const float* w,
                                   float eps, int64_t rotary_dim, const float* cos, const float* sin, float* y,
                                   float* gate) const {
  timed("norms+elementwise",
        [&] { inner_->head_norm_rope(x, tokens, heads, head_dim, w, eps, rotary_dim, cos, sin, y, gate); });
}
void StagedBackend::causal_conv1d_silu(const float* x, int64_t tokens, int64_t channels, const float* weight,
                                       int64_t kernel, float* history, float* y) const {
  timed("gdn conv+gates", [&] { inner_->causal_conv1d_silu(x, tokens, channels, weight, kernel, history, y); });
}
void StagedBackend::gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t tokens,
                              int64_t n_v, float* g, float* beta) const {
  timed("gdn conv+gates", [&] { inner_->gdn_gates(a, b, A_log, dt_bias, tokens, n_v, g, beta); });
}
void StagedBackend::gated_delta_rule(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                                     float* out) const {
  timed("gdn delta rule", [&] { inner_->gated_delta_rule(dims, in, state, out); });
}
void StagedBackend::gated_delta_rule_recurrent(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                                               float* out) const {
  timed("gdn delta rule", [&] { inner_->gated_delta_rule_recurrent(dims, in, state, out); });
}
void StagedBackend::gated_delta_rule_packed(const GatedDeltaDims& dims, const GatedDeltaInput& in,
                                            std::span<const int64_t> starts, std::span<float* const> states,
                                            float* out) const {
  timed("gdn delta rule", [&] { inner_->gated_delta_rule_packed(dims, in, starts, states, out); });
}
void StagedBackend::apply_rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                               const float* cos, const float* sin) const {
  timed("norms+elementwise", [&] { inner_->apply_rope(x, tokens, heads, head_dim, rotary_dim, cos, sin); });
}
void StagedBackend::attention_causal(const AttentionShape& shape, const float* q, int64_t tokens, int64_t q_pos0,
                                     const float* k, const float* v, float* out) const {
  timed("attention", [&] { inner_->attention_causal(shape, q, tokens, q_pos0, k, v, out); });
}
void StagedBackend::attention_dense(const AttentionShape& shape, const float* q, int64_t q_stride, int64_t q_rows,
                                    const float* k, const float* v, int64_t kv_stride, int64_t kv_rows, float* out,
                                    int64_t out_stride) const {
  timed("head+vision", [&] {
    inner_->attention_dense(shape, q, q_stride, q_rows, k, v, kv_stride, kv_rows, out, out_stride);
  });
}
void StagedBackend::matmul_nt(const float* x, int64_t M, int64_t K, const float* w, int64_t N, const float* bias,
                              float* y) const {
  timed("head+vision", [&] { inner_->matmul_nt(x, M, K, w, N, bias, y); });
}
void StagedBackend::gelu_tanh_inplace(float* x, int64_t n) const {
  timed("head+vision", [&] { inner_->gelu_tanh_inplace(x, n); });
}
void StagedBackend::patch_embed(const LinearWeight& w, int64_t channels, const float* x, int64_t rows,
                                float* y) const {
  timed("head+vision", [&] { inner_->patch_embed(w, channels, x, rows, y); });
}
std::unique_ptr<HeadMemory> StagedBackend::head_memory(const HeadMemorySpec& spec, HiddenRows hidden,
                                                       int64_t L) const {
  return inner_->head_memory(spec, hidden, L);
}

}  // namespace stave
