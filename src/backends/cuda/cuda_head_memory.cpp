// The joint head's L-row work on the GPU (ops/head_memory.h), fast precision: the hidden
// LayerNorm and the memory projection run once per decision with the [L, width] memory left on
// the device; each routing / decoder attention then projects its keys and values there, attends
// there and sends back only its [rows, width] output. Before this, every layer moved the memory
// to the GPU and its keys and values back (24 MB per layer at 2048 tokens) and attended on the
// CPU. The weights stay resident (CudaBackend::resident_matrix). Hidden states lent in device
// memory (a device backbone's, HiddenRows::device) are read where they are: only the few span
// rows the head averages come down, the [L, hidden] rows make no round trip through the host.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_ops.h"
#include "ops/reference.h"
#include "stave/errors.h"

namespace stave::cuda {

class CudaHeadMemory final : public HeadMemory {
 public:
  CudaHeadMemory(const CudaBackend& backend, const HeadMemorySpec& spec, HiddenRows hidden, int64_t L)
      : b_(backend), spec_(spec), hidden_(hidden), L_(L) {
    const int64_t H = spec.hidden_size, W = spec.width;
    std::lock_guard lock(b_.mutex_);
    GpuContext& ctx = *b_.ctx_;
    const float* gamma = b_.resident_matrix(spec.hidden_norm.weight, nullptr, 1, H).first;
    const float* beta = b_.resident_matrix(spec.hidden_norm.bias, nullptr, 1, H).first;
    const float* wm = b_.resident_matrix(spec.memory_projection, nullptr, W, H).first;
    memory_.resize(static_cast<size_t>(L * W) * sizeof(float));
    // The normalised hidden states in row chunks (a 64k-token record is 1.3 GB at H = 5120);
    // host rows go up chunk by chunk.
    const int64_t chunk = std::clamp<int64_t>((int64_t{64} << 20) / (H * static_cast<int64_t>(sizeof(float))), 1, L);
    DeviceBuffer rows;
    rows.reserve(static_cast<size_t>(std::min(chunk, L) * H) * sizeof(float));
    for (int64_t r0 = 0; r0 < L; r0 += chunk) {
      const int64_t n = std::min(chunk, L - r0);
      const float* source = hidden.device ? hidden.device + r0 * H : rows.as<float>();
      if (!hidden.device) {
        ctx.synchronize();  // the previous chunk's kernels are done with `rows`
        rows.upload(hidden.host + r0 * H, static_cast<size_t>(n * H) * sizeof(float));
      }
      dev::layer_norm(source, n, H, gamma, beta, spec.hidden_norm.eps, rows.as<float>(), ctx.stream());
      dev::matmul_nt(ctx, rows.as<float>(), n, H, wm, W, nullptr, memory_.as<float>() + r0 * W);
    }
    ctx.synchronize();
  }

  // The few span rows the head averages: normalised on the host (the reference LayerNorm), from
  // the host rows, or from those rows brought down from the device.
  void normed_hidden_rows(int64_t begin, int64_t end, float* out) const override {
    const int64_t H = spec_.hidden_size;
    const float* rows = hidden_.host ? hidden_.host + begin * H : nullptr;
    std::vector<float> fetched;
    if (!rows) {
      fetched.resize(static_cast<size_t>((end - begin) * H));
      std::lock_guard lock(b_.mutex_);
      GpuContext& ctx = *b_.ctx_;
      STAVE_CUDA_CHECK(cudaMemcpyAsync(fetched.data(), hidden_.device + begin * H, fetched.size() * sizeof(float),
                                       cudaMemcpyDeviceToHost, ctx.stream()));
      ctx.synchronize();
      rows = fetched.data();
    }
    ref::layer_norm(rows, end - begin, H, spec_.hidden_norm.weight, spec_.hidden_norm.bias, spec_.hidden_norm.eps,
                    out);
  }

  void attend(size_t a, const float* query, int64_t rows, float* out) const override {
    if (rows <= 0) return;
    const HeadMemoryAttention& at = spec_.attentions.at(a);
    const ref::MultiheadAttentionWeights& w = at.attention;
    const int64_t E = w.embed_dim, L = L_;
    if (E != spec_.width || w.heads <= 0 || E % w.heads != 0)
      throw Error(ErrorKind::kInvalidModel, "head memory: attention width " + std::to_string(E) +
                                                " does not fit the memory's " + std::to_string(spec_.width));
    std::lock_guard lock(b_.mutex_);
    GpuContext& ctx = *b_.ctx_;
    const size_t row_bytes = static_cast<size_t>(E) * sizeof(float);
    const float* source = memory_.as<float>();
    if (at.normalise_memory) {
      const float* gamma = b_.resident_matrix(at.memory_norm.weight, nullptr, 1, E).first;
      const float* beta = b_.resident_matrix(at.memory_norm.bias, nullptr, 1, E).first;
      normed_.reserve(L * row_bytes);
      dev::layer_norm(source, L, E, gamma, beta, at.memory_norm.eps, normed_.as<float>(), ctx.stream());
      source = normed_.as<float>();
    }
    const auto [wq, bq] = b_.resident_matrix(w.in_proj_weight, w.in_proj_bias, E, E);
    const auto [wk, bk] = b_.resident_matrix(w.in_proj_weight + E * E, w.in_proj_bias + E, E, E);
    const auto [wv, bv] = b_.resident_matrix(w.in_proj_weight + 2 * E * E, w.in_proj_bias + 2 * E, E, E);
    const auto [wo, bo] = b_.resident_matrix(w.out_proj_weight, w.out_proj_bias, E, E);
    keys_.reserve(L * row_bytes);
    values_.reserve(L * row_bytes);
    dev::matmul_nt(ctx, source, L, E, wk, E, bk, keys_.as<float>());
    dev::matmul_nt(ctx, source, L, E, wv, E, bv, values_.as<float>());

    ctx.synchronize();  // query_ may still be read by a previous attention's kernels
    query_.upload(query, rows * row_bytes);
    projected_.reserve(rows * row_bytes);
    context_.reserve(rows * row_bytes);
    result_.reserve(rows * row_bytes);
    dev::matmul_nt(ctx, query_.as<float>(), rows, E, wq, E, bq, projected_.as<float>());
    AttentionShape shape;
    shape.n_q_heads = shape.n_kv_heads = w.heads;
    shape.head_dim = w.head_dim();
    shape.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));  // as ref::mha_attend
    dev::attention_full(ctx, shape, projected_.as<float>(), rows, keys_.as<float>(), values_.as<float>(), L,
                        context_.as<float>(), b_.options_.attention_score_bytes);
    dev::matmul_nt(ctx, context_.as<float>(), rows, E, wo, E, bo, result_.as<float>());
    ctx.synchronize();
    result_.download(out, rows * row_bytes);
  }

 private:
  const CudaBackend& b_;
  HeadMemorySpec spec_;
  HiddenRows hidden_;
  int64_t L_;
  DeviceBuffer memory_;  // [L, W]
  // Per-attention scratch, reused: the normalised memory, keys and values [L, W]; the queries,
  // their projections, the attention's context and output [rows, W].
  mutable DeviceBuffer normed_, keys_, values_, query_, projected_, context_, result_;
};

std::unique_ptr<HeadMemory> CudaBackend::head_memory(const HeadMemorySpec& spec, HiddenRows hidden,
                                                     int64_t L) const {
  if (precision_ == Precision::kExact || !options_.keep_matmul_weights) return Backend::head_memory(spec, hidden, L);
  if (L <= 0 || hidden.empty()) throw Error(ErrorKind::kInternal, "head memory: no hidden states");
  return std::make_unique<CudaHeadMemory>(*this, spec, hidden, L);
}

}  // namespace stave::cuda
