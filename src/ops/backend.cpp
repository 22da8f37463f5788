#include "ops/backend.h"

#include <cstring>

#include "stave/errors.h"

#include "ops/torch_cpu_order.h"


#include "ops/conv1d.h"
#include "ops/elementwise.h"
#include "ops/head_ops.h"
#include "ops/reference.h"
#include "ops/rope.h"

namespace stave {

Tensor Backend::empty(Tensor::Shape shape, DType dtype) const { return Tensor::host_empty(std::move(shape), dtype); }

Tensor Backend::zeros(Tensor::Shape shape, DType dtype) const {
  Tensor t = empty(std::move(shape), dtype);
  fill_zero(t);
  return t;
}

void Backend::fill_zero(const Tensor& t) const {
  if (t.bytes()) std::memset(t.raw(), 0, t.bytes());
}

void Backend::copy_from_host(const void* host, const Tensor& dst) const {
  if (dst.bytes()) std::memcpy(dst.raw(), host, dst.bytes());
}

void Backend::copy_to_host(const Tensor& src, void* host) const {
  if (src.bytes()) std::memcpy(host, src.raw(), src.bytes());
}

void Backend::copy(const Tensor& src, const Tensor& dst) const {
  if (src.bytes() > dst.bytes())
    throw Error(ErrorKind::kInternal, "copy of " + src.describe() + " into the smaller " + dst.describe());
  if (src.bytes()) std::memmove(dst.raw(), src.raw(), src.bytes());
}

Tensor Backend::to_device(const Tensor& host) const {
  if (host.device() != Device::kCpu)
    throw Error(ErrorKind::kInternal, "to_device takes a host tensor, not " + host.describe());
  if (device() == Device::kCpu) return host;
  Tensor t = empty(host.shape(), host.dtype());
  copy_from_host(host.raw(), t);
  return t;
}

void Backend::check_embedding_out(const LinearWeight& table, int64_t ids, const Tensor& h) {
  if (h.numel() != ids * table.in || h.dtype() != DType::kF32)
    throw Error(ErrorKind::kInternal, "embedding rows of " + std::to_string(ids) + " ids into " + h.describe());
}

void Backend::embedding_rows(const LinearWeight& table, std::span<const int32_t> ids, const Tensor& h) const {
  const int64_t L = static_cast<int64_t>(ids.size()), H = table.in;
  check_embedding_out(table, L, h);
  if (L == 0) return;
  const Tensor rows = h.device() == Device::kCpu ? h : host_staging({L, H});
  float* out = rows.data<float>();
  ref::weight_rows_f32(table, ids, out);
  if (rows.raw() != h.raw()) copy_from_host(out, h);
}

Tensor Backend::host_staging(Tensor::Shape shape, DType dtype) const { return Tensor::host_empty(std::move(shape), dtype); }

Tensor Backend::to_host(const Tensor& t) const {
  if (t.device() != device())
    throw Error(ErrorKind::kInternal, std::string("to_host on the ") + name() + " backend of " + t.describe());
  return t;  // host memory already
}

void Backend::add_inplace(float* h, const float* y, int64_t n) const {
  for (int64_t i = 0; i < n; ++i) h[i] += y[i];
}

void Backend::split_query_gate(const float* qg, int64_t rows, int64_t d, float* q, float* gate) const {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(q + r * d, qg + r * 2 * d, static_cast<size_t>(d) * sizeof(float));
    std::memcpy(gate + r * d, qg + r * 2 * d + d, static_cast<size_t>(d) * sizeof(float));
  }
}

void Backend::add_rms_norm_zero_centered(float* h, const float* y, int64_t rows, int64_t dim, const float* w,
                                         float eps, float* x) const {
  add_inplace(h, y, rows * dim);
  rms_norm_zero_centered(h, rows, dim, w, eps, x);
}

void Backend::head_norm_rope(const float* x, int64_t tokens, int64_t heads, int64_t head_dim, const float* w,
                             float eps, int64_t rotary_dim, const float* cos, const float* sin, float* y,
                             float* gate) const {
  const int64_t rows = tokens * heads;
  if (gate) {
    split_query_gate(x, rows, head_dim, y, gate);
    x = y;
  }
  rms_norm_zero_centered(x, rows, head_dim, w, eps, y);
  apply_rope(y, tokens, heads, head_dim, rotary_dim, cos, sin);
}

void Backend::gated_delta_rule_packed(const GatedDeltaDims& dims, const GatedDeltaInput& in,
                                      std::span<const int64_t> starts, std::span<float* const> states,
                                      float* out) const {
  if (states.size() + 1 != starts.size())
    throw Error(ErrorKind::kInternal, "packed delta rule: " + std::to_string(states.size()) + " states for " +
                                          std::to_string(starts.size()) + " row offsets");
  for (size_t b = 0; b + 1 < starts.size(); ++b) {
    const int64_t r0 = starts[b], n = starts[b + 1] - r0;
    if (n <= 0) continue;
    GatedDeltaInput one = in;
    one.tokens = n;
    one.q = in.q + r0 * in.stride;
    one.k = in.k + r0 * in.stride;
    one.v = in.v + r0 * in.stride;
    one.g = in.g + r0 * dims.n_v_heads;
    one.beta = in.beta + r0 * dims.n_v_heads;
    float* state = states[b];
    float* o = out + r0 * dims.n_v_heads * dims.d_v;
    // One token takes the per-token recurrence, as HF does.
    if (n == 1)
      gated_delta_rule_recurrent(dims, one, state, o);
    else
      gated_delta_rule(dims, one, state, o);
  }
}

void Backend::linear(const LinearWeight& w, const float* x, int64_t M, float* y) const { ref::linear(w, x, M, y); }

void Backend::silu_mul_linear(const LinearWeight& w, float* gate, const float* up, int64_t M, float* y) const {
  silu_mul(gate, up, M * w.in, gate);
  linear(w, gate, M, y);
}

void Backend::add_rms_norm_linear_shared(float* h, const float* y, int64_t rows, int64_t dim, const float* w,
                                         float eps, float* x, std::span<const LinearOutput> outs) const {
  if (y)
    add_rms_norm_zero_centered(h, y, rows, dim, w, eps, x);
  else
    rms_norm_zero_centered(h, rows, dim, w, eps, x);
  linear_shared_input(x, rows, outs);
}

void Backend::sigmoid_mul_linear(const LinearWeight& w, float* x, const float* gate, int64_t M, float* y) const {
  sigmoid_mul(x, gate, M * w.in);
  linear(w, x, M, y);
}

void Backend::gated_rms_norm_linear(const LinearWeight& w, const float* x, const float* z, int64_t dim,
                                    const float* norm_w, float eps, float* scratch, int64_t M, float* y) const {
  if (dim <= 0 || (M * w.in) % dim != 0)
    throw Error(ErrorKind::kInternal, "gated_rms_norm_linear: rows of " + std::to_string(w.in) +
                                          " values are not whole heads of " + std::to_string(dim));
  gated_rms_norm(x, z, M * w.in / dim, dim, norm_w, eps, scratch);
  linear(w, scratch, M, y);
}

void Backend::linear_shared_input(const float* x, int64_t M, std::span<const LinearOutput> outs) const {
  for (const LinearOutput& o : outs) linear(o.w, x, M, o.y);
}

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

std::unique_ptr<HeadMemory> Backend::head_memory(const HeadMemorySpec& spec, HiddenRows hidden, int64_t L) const {
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


}  // namespace stave
