#include "ops/backend.h"

#include "ops/torch_cpu_order.h"

#include "backends/cpu/cpu_backend.h"

#include "ops/conv1d.h"
#include "ops/elementwise.h"
#include "ops/head_ops.h"
#include "ops/reference.h"
#include "ops/rope.h"

namespace stave {

void Backend::linear(const LinearWeight& w, const float* x, int64_t M, float* y) const { ref::linear(w, x, M, y); }

void Backend::rms_norm_zero_centered(const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                                     float* y) const {
  ref::rms_norm_zero_centered(x, rows, dim, w, eps, y);
}

void Backend::gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps,
                             float* y) const {
  ref::gated_rms_norm(x, z, rows, dim, w, eps, y);
}

void Backend::silu_mul(const float* gate, const float* up, int64_t n, float* y) const {
  ref::silu_mul(gate, up, n, y);
}

void Backend::sigmoid_mul(float* x, const float* gate, int64_t n) const { ref::sigmoid_mul(x, gate, n); }

void Backend::causal_conv1d_silu(const float* x, int64_t tokens, int64_t channels, const float* weight,
                                 int64_t kernel, float* history, float* y) const {
  ref::causal_conv1d_silu(x, tokens, channels, weight, kernel, history, y);
}

void Backend::gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t tokens,
                        int64_t n_v, float* g, float* beta) const {
  ref::gdn_gates(a, b, A_log, dt_bias, tokens, n_v, g, beta);
}

void Backend::gated_delta_rule(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                               float* out) const {
  ref::gated_delta_rule_chunked(dims, in, state, out);
}

void Backend::gated_delta_rule_recurrent(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                                         float* out) const {
  ref::gated_delta_rule_recurrent(dims, in, state, out);
}

void Backend::apply_rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                         const float* cos, const float* sin) const {
  ref::apply_rope(x, tokens, heads, head_dim, rotary_dim, cos, sin);
}

void Backend::attention_causal(const AttentionShape& shape, const float* q, int64_t tokens, int64_t q_pos0,
                               const float* k, const float* v, float* out) const {
  ref::attention_causal(shape, q, tokens, q_pos0, k, v, out);
}

void Backend::attention_dense(const AttentionShape& shape, const float* q, int64_t q_stride, int64_t q_rows,
                              const float* k, const float* v, int64_t kv_stride, int64_t kv_rows, float* out,
                              int64_t out_stride) const {
  ref::attention_dense(shape, q, q_stride, q_rows, k, v, kv_stride, kv_rows, out, out_stride);
}

std::unique_ptr<HeadMemory> Backend::head_memory(const HeadMemorySpec& spec, const float* hidden, int64_t L) const {
  return host_head_memory(*this, spec, hidden, L);
}

void Backend::matmul_nt(const float* x, int64_t M, int64_t K, const float* w, int64_t N, const float* bias,
                        float* y) const {
  ref::matmul_nt(x, M, K, w, N, bias, y);
}

// ATen's GeluKernel (tanh form, AVX2 dispatch): SLEEF tanh on the vectorized elements, std::tanh
// on the rest; above 16384 elements its parallel grain is numel / threads.
void Backend::gelu_tanh_inplace(float* x, int64_t n) const {
  const int64_t grain = n > 16384 ? n / 16 : 32768;
  for (int64_t i = 0; i < n; ++i)
    x[i] = ref::torch_order::gelu_tanh(x[i], ref::torch_order::aten_vectorized(i, n, n, 16, grain));
}

void Backend::patch_embed(const LinearWeight& w, int64_t channels, const float* x, int64_t rows, float* y) const {
  ref::conv_patch_embed(w, channels, x, rows, y);
}

const Backend& reference_backend() {
  static const Backend backend;
  return backend;
}

// Until the vectorized CPU backend lands, every precision uses the reference kernels.
const Backend& cpu_backend(Precision precision) {
  return precision == Precision::kExact ? reference_backend() : cpu::fast_backend();
}

}  // namespace stave
