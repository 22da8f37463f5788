#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <vector>

#include "backends/cuda/device_ops.h"

namespace stave::cuda {
namespace {

// Device copies of an op's arguments, freed at scope end.
struct Staged {
  std::vector<DeviceBuffer> bufs;
  float* in(const float* host, int64_t n) {
    bufs.emplace_back();
    bufs.back().upload(host, static_cast<size_t>(n) * sizeof(float));
    return bufs.back().as<float>();
  }
  float* out(int64_t n) {
    bufs.emplace_back(static_cast<size_t>(n) * sizeof(float));
    return bufs.back().as<float>();
  }
};

void to_host(float* host, const float* dev, int64_t n) {
  if (n > 0) STAVE_CUDA_CHECK(cudaMemcpy(host, dev, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost));
}

}  // namespace

CudaBackend::CudaBackend(Precision precision, CudaBackendOptions options)
    : precision_(precision),
      options_(options),
      ctx_(std::make_unique<GpuContext>(precision == Precision::kExact,
                                        options.attention_kernel.value_or(attention_kernel_from_env()))),
      matmul_x_(std::make_unique<DeviceBuffer>()),
      matmul_y_(std::make_unique<DeviceBuffer>()) {}
CudaBackend::~CudaBackend() = default;

const DeviceLinear& CudaBackend::resident(const LinearWeight& w) const {
  const auto key = std::make_tuple(w.data, static_cast<const void*>(w.scales), static_cast<const void*>(w.bias), w.out,
                                   w.in, static_cast<int>(w.format), w.quantize_input,
                                   static_cast<int>(w.input_scale_mode));
  auto it = weights_.find(key);
  if (it == weights_.end()) it = weights_.emplace(key, std::make_unique<DeviceLinear>(upload_linear(w))).first;
  return *it->second;
}

void CudaBackend::linear(const LinearWeight& w, const float* x, int64_t M, float* y) const {
  std::lock_guard lock(mutex_);
  const DeviceLinear& d = resident(w);
  Staged st;
  float* dx = st.in(x, M * w.in);
  float* dy = st.out(M * w.out);
  dev::linear(*ctx_, d, dx, M, dy);
  ctx_->synchronize();
  to_host(y, dy, M * w.out);
}

void CudaBackend::rms_norm_zero_centered(const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                                         float* y) const {
  std::lock_guard lock(mutex_);
  Staged st;
  float* dx = st.in(x, rows * dim);
  dev::rms_norm_zero_centered(dx, rows, dim, st.in(w, dim), eps, dx, ctx_->stream());
  ctx_->synchronize();
  to_host(y, dx, rows * dim);
}

void CudaBackend::gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps,
                                 float* y) const {
  std::lock_guard lock(mutex_);
  Staged st;
  float* dy = st.out(rows * dim);
  dev::gated_rms_norm(st.in(x, rows * dim), st.in(z, rows * dim), rows, dim, st.in(w, dim), eps, dy,
                      ctx_->stream());
  ctx_->synchronize();
  to_host(y, dy, rows * dim);
}

void CudaBackend::silu_mul(const float* gate, const float* up, int64_t n, float* y) const {
  std::lock_guard lock(mutex_);
  Staged st;
  float* dy = st.out(n);
  dev::silu_mul(st.in(gate, n), st.in(up, n), n, dy, ctx_->stream());
  ctx_->synchronize();
  to_host(y, dy, n);
}

void CudaBackend::sigmoid_mul(float* x, const float* gate, int64_t n) const {
  std::lock_guard lock(mutex_);
  Staged st;
  float* dx = st.in(x, n);
  dev::sigmoid_mul(dx, st.in(gate, n), n, ctx_->stream());
  ctx_->synchronize();
  to_host(x, dx, n);
}

void CudaBackend::causal_conv1d_silu(const float* x, int64_t tokens, int64_t channels, const float* weight,
                                     int64_t kernel, float* history, float* y) const {
  std::lock_guard lock(mutex_);
  Staged st;
  float* dh = st.in(history, (kernel - 1) * channels);
  float* dy = st.out(tokens * channels);
  dev::causal_conv1d_silu(st.in(x, tokens * channels), tokens, channels, st.in(weight, channels * kernel), kernel, dh,
                          dy, ctx_->stream());
  ctx_->synchronize();
  to_host(y, dy, tokens * channels);
  to_host(history, dh, (kernel - 1) * channels);
}

void CudaBackend::gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t tokens,
                            int64_t n_v, float* g, float* beta) const {
  std::lock_guard lock(mutex_);
  Staged st;
  float* dg = st.out(tokens * n_v);
  float* db = st.out(tokens * n_v);
  dev::gdn_gates(st.in(a, tokens * n_v), st.in(b, tokens * n_v), st.in(A_log, n_v), st.in(dt_bias, n_v), tokens, n_v,
                 dg, db, ctx_->stream());
  ctx_->synchronize();
  to_host(g, dg, tokens * n_v);
  to_host(beta, db, tokens * n_v);
}

void CudaBackend::gated_delta_rule(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                                   float* out) const {
  std::lock_guard lock(mutex_);
  const int64_t T = in.tokens;
  if (T <= 0) return;
  Staged st;
  // q, k and v may be three views of one row layout: copy the span they cover once.
  const float* base = std::min({in.q, in.k, in.v});
  const float* end = std::max({in.q + dims.n_k_heads * dims.d_k, in.k + dims.n_k_heads * dims.d_k,
                               in.v + dims.n_v_heads * dims.d_v});
  const int64_t span = (T - 1) * in.stride + (end - base);
  float* dbase = st.in(base, span);
  GatedDeltaInput din = in;
  din.q = dbase + (in.q - base);
  din.k = dbase + (in.k - base);
  din.v = dbase + (in.v - base);
  din.g = st.in(in.g, T * dims.n_v_heads);
  din.beta = st.in(in.beta, T * dims.n_v_heads);
  float* ds = st.in(state, dims.state_floats());
  float* dout = st.out(T * dims.n_v_heads * dims.d_v);
  DeviceBuffer scratch;
  dev::gated_delta_rule(dims, din, ds, dout, scratch, precision_ == Precision::kExact, ctx_->stream());
  ctx_->synchronize();
  to_host(out, dout, T * dims.n_v_heads * dims.d_v);
  to_host(state, ds, dims.state_floats());
}

void CudaBackend::gated_delta_rule_recurrent(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                                             float* out) const {
  gated_delta_rule(dims, in, state, out);
}

void CudaBackend::apply_rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                             const float* cos, const float* sin) const {
  std::lock_guard lock(mutex_);
  Staged st;
  const int64_t half = rotary_dim / 2;
  float* dx = st.in(x, tokens * heads * head_dim);
  dev::apply_rope(dx, tokens, heads, head_dim, rotary_dim, st.in(cos, tokens * half), st.in(sin, tokens * half),
                  ctx_->stream());
  ctx_->synchronize();
  to_host(x, dx, tokens * heads * head_dim);
}

void CudaBackend::attention_causal(const AttentionShape& shape, const float* q, int64_t tokens, int64_t q_pos0,
                                   const float* k, const float* v, float* out) const {
  std::lock_guard lock(mutex_);
  Staged st;
  const int64_t n_keys = q_pos0 + tokens, kvw = shape.n_kv_heads * shape.head_dim;
  const int64_t qw = shape.n_q_heads * shape.head_dim;
  float* dout = st.out(tokens * qw);
  dev::attention_causal(*ctx_, shape, st.in(q, tokens * qw), tokens, q_pos0, st.in(k, n_keys * kvw),
                        st.in(v, n_keys * kvw), dout, options_.attention_score_bytes);
  ctx_->synchronize();
  to_host(out, dout, tokens * qw);
}

std::pair<const float*, const float*> CudaBackend::resident_matrix(const float* w, const float* bias, int64_t N,
                                                                  int64_t K) const {
  const auto key = std::make_tuple(w, bias, N, K);
  auto it = matmul_weights_.find(key);
  if (it == matmul_weights_.end()) {
    auto dwb = std::make_unique<DeviceBuffer>(), dbb = std::make_unique<DeviceBuffer>();
    dwb->upload(w, static_cast<size_t>(N * K) * sizeof(float));
    if (bias) dbb->upload(bias, static_cast<size_t>(N) * sizeof(float));
    it = matmul_weights_.emplace(key, std::make_pair(std::move(dwb), std::move(dbb))).first;
  }
  return {it->second.first->as<float>(), bias ? it->second.second->as<float>() : nullptr};
}

void CudaBackend::matmul_nt(const float* x, int64_t M, int64_t K, const float* w, int64_t N, const float* bias,
                            float* y) const {
  if (M <= 0 || N <= 0) return;
  std::lock_guard lock(mutex_);
  Staged st;
  const float* dw;
  const float* db = nullptr;
  if (options_.keep_matmul_weights) {
    std::tie(dw, db) = resident_matrix(w, bias, N, K);
  } else {
    dw = st.in(w, N * K);
    if (bias) db = st.in(bias, N);
  }
  matmul_x_->upload(x, static_cast<size_t>(M * K) * sizeof(float));
  matmul_y_->reserve(static_cast<size_t>(M * N) * sizeof(float));
  dev::matmul_nt(*ctx_, matmul_x_->as<float>(), M, K, dw, N, db, matmul_y_->as<float>());
  ctx_->synchronize();
  to_host(y, matmul_y_->as<float>(), M * N);
}

}  // namespace stave::cuda
