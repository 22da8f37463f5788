// The joint head's L-row work on the GPU (ops/head_memory.h), fast precision: the hidden
// LayerNorm and the memory projection run once per decision with the [L, width] memory left on
// the device; each routing / decoder attention then attends there (with few queries folded into
// the key and value projections, dev::attention_folded; otherwise projecting the memory's keys
// and values) and sends back only its [rows, width] output. Before this, every layer moved the memory
// to the GPU and its keys and values back (24 MB per layer at 2048 tokens) and attended on the
// CPU. The weights stay resident (CudaBackend::resident_matrix). Hidden states lent in device
// memory (a device backbone's, HiddenRows::device) are read where they are: only the few span
// rows the head averages come down, the [L, hidden] rows make no round trip through the host.
#include <algorithm>
#include <cmath>
#include <span>
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
    memory_ = b_.empty({L, W});
    // The normalised hidden states in row chunks (a 64k-token record is 1.3 GB at H = 5120);
    // host rows go up chunk by chunk into `rows`, each copy ordered on the stream after the
    // kernels that read the chunk before.
    const int64_t chunk = std::clamp<int64_t>((int64_t{64} << 20) / (H * static_cast<int64_t>(sizeof(float))), 1, L);
    const Tensor rows = b_.empty({std::min(chunk, L), H});
    for (int64_t r0 = 0; r0 < L; r0 += chunk) {
      const int64_t n = std::min(chunk, L - r0);
      const float* source = hidden.device ? hidden.device + r0 * H : rows.data<float>();
      if (!hidden.device)
        STAVE_CUDA_CHECK(cudaMemcpyAsync(rows.data<float>(), hidden.host + r0 * H,
                                         static_cast<size_t>(n * H) * sizeof(float), cudaMemcpyHostToDevice,
                                         ctx.stream()));
      dev::layer_norm(source, n, H, gamma, beta, spec.hidden_norm.eps, rows.data<float>(), ctx.stream());
      dev::matmul_nt(ctx, rows.data<float>(), n, H, wm, W, nullptr, memory_.data<float>() + r0 * W);
    }
    // Page-locked host rows (to_host's) are read by the copies when they run, not before they return.
    if (!hidden.device) ctx.synchronize();
    // `rows` goes back to the stream's pool here, ordered after the kernels that read it.
  }

  int64_t hidden_size() const override { return spec_.hidden_size; }

  // The few span rows the head averages: normalised on the host (the reference LayerNorm), from
  // the host rows, or from those rows brought down from the device.
  void normed_hidden_rows(int64_t begin, int64_t end, float* out) const override {
    const Span one{begin, end};
    normed_hidden_spans(std::span(&one, 1), out);
  }

  // All spans' rows in one transfer: gathered on the device (stream-ordered copies), brought down
  // at once, then normalised together (ref::layer_norm is row by row, so the bits are the same).
  void normed_hidden_spans(std::span<const Span> spans, float* out) const override {
    const int64_t H = spec_.hidden_size;
    int64_t rows = 0;
    for (const Span& s : spans) rows += s.second - s.first;
    if (rows <= 0) return;
    std::vector<float> gathered;
    const float* source = nullptr;
    if (hidden_.host && spans.size() == 1) {
      source = hidden_.host + spans[0].first * H;
    } else if (hidden_.host) {
      gathered.resize(static_cast<size_t>(rows * H));
      float* at = gathered.data();
      for (const Span& s : spans) at = std::copy(hidden_.host + s.first * H, hidden_.host + s.second * H, at);
      source = gathered.data();
    } else {
      gathered.resize(static_cast<size_t>(rows * H));
      std::lock_guard lock(b_.mutex_);
      GpuContext& ctx = *b_.ctx_;
      const size_t row_bytes = static_cast<size_t>(H) * sizeof(float);
      if (spans.size() == 1) {
        STAVE_CUDA_CHECK(cudaMemcpyAsync(gathered.data(), hidden_.device + spans[0].first * H, rows * row_bytes,
                                         cudaMemcpyDeviceToHost, ctx.stream()));
      } else {
        const Tensor staged = b_.empty({rows, H});
        float* at = staged.data<float>();
        for (const Span& s : spans) {
          const int64_t n = s.second - s.first;
          STAVE_CUDA_CHECK(cudaMemcpyAsync(at, hidden_.device + s.first * H, n * row_bytes, cudaMemcpyDeviceToDevice,
                                           ctx.stream()));
          at += n * H;
        }
        STAVE_CUDA_CHECK(cudaMemcpyAsync(gathered.data(), staged.data<float>(), rows * row_bytes,
                                         cudaMemcpyDeviceToHost, ctx.stream()));
      }
      ctx.synchronize();
      source = gathered.data();
    }
    ref::layer_norm(source, rows, H, spec_.hidden_norm.weight, spec_.hidden_norm.bias, spec_.hidden_norm.eps, out);
  }

  void attend(size_t a, const float* in_query, int64_t rows, float* out) const override {
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
    const float* source = memory_.data<float>();
    if (at.normalise_memory) {
      const float* gamma = b_.resident_matrix(at.memory_norm.weight, nullptr, 1, E).first;
      const float* beta = b_.resident_matrix(at.memory_norm.bias, nullptr, 1, E).first;
      if (normed_.empty()) normed_ = b_.empty({L, E});
      dev::layer_norm(source, L, E, gamma, beta, at.memory_norm.eps, normed_.data<float>(), ctx.stream());
      source = normed_.data<float>();
    }
    const auto [wq, bq] = b_.resident_matrix(w.in_proj_weight, w.in_proj_bias, E, E);
    const auto [wk, bk] = b_.resident_matrix(w.in_proj_weight + E * E, w.in_proj_bias + E, E, E);
    const auto [wv, bv] = b_.resident_matrix(w.in_proj_weight + 2 * E * E, w.in_proj_bias + 2 * E, E, E);
    const auto [wo, bo] = b_.resident_matrix(w.out_proj_weight, w.out_proj_bias, E, E);

    // The query rows, their projections, the attention's context and output [rows, E]: from the
    // stream's pool (no device-wide wait); the pageable query is staged before the copy returns.
    const Tensor query = b_.empty({rows, E}), projected = b_.empty({rows, E}), context = b_.empty({rows, E}),
                 result = b_.empty({rows, E});
    STAVE_CUDA_CHECK(cudaMemcpyAsync(query.data<float>(), in_query, rows * row_bytes, cudaMemcpyHostToDevice,
                                     ctx.stream()));
    dev::matmul_nt(ctx, query.data<float>(), rows, E, wq, E, bq, projected.data<float>());
    const float scale = 1.0f / std::sqrt(static_cast<float>(w.head_dim()));  // as ref::mha_attend
    if (dev::attention_folded_pays(w.heads, E, rows, L, b_.options_.attention_score_bytes)) {
      // Few queries (the head's usual case): the queries folded into the key projection, the
      // memory's keys and values never formed (dev::attention_folded).
      const Tensor folded = b_.empty({w.heads * rows, E}), scores = b_.empty({w.heads * rows, L}),
                   mixed = b_.empty({w.heads * rows, E});
      dev::attention_folded(ctx, w.heads, E, projected.data<float>(), rows, source, L, wk, wv, bv, scale,
                            folded.data<float>(), scores.data<float>(), mixed.data<float>(), context.data<float>());
    } else {
      if (keys_.empty()) keys_ = b_.empty({L, E});
      if (values_.empty()) values_ = b_.empty({L, E});
      dev::matmul_nt(ctx, source, L, E, wk, E, bk, keys_.data<float>());
      dev::matmul_nt(ctx, source, L, E, wv, E, bv, values_.data<float>());
      AttentionShape shape;
      shape.n_q_heads = shape.n_kv_heads = w.heads;
      shape.head_dim = w.head_dim();
      shape.scale = scale;
      dev::attention_full(ctx, shape, projected.data<float>(), rows, keys_.data<float>(), values_.data<float>(), L,
                          context.data<float>(), b_.options_.attention_score_bytes);
    }
    dev::matmul_nt(ctx, context.data<float>(), rows, E, wo, E, bo, result.data<float>());
    STAVE_CUDA_CHECK(cudaMemcpyAsync(out, result.data<float>(), rows * row_bytes, cudaMemcpyDeviceToHost,
                                     ctx.stream()));
    ctx.synchronize();
  }

 private:
  const CudaBackend& b_;
  HeadMemorySpec spec_;
  HiddenRows hidden_;
  int64_t L_;
  // From the backend's stream-ordered pool (CudaBackend::empty), as the backbone's tensors: a
  // decision's head allocates and frees them without a device-wide wait. Before, they were
  // cudaMalloc'd for each decision and cudaFree'd (which waits for the whole device) after it.
  Tensor memory_;  // [L, W]
  // Per-attention scratch, reused: the normalised memory, and the keys and values [L, W] where
  // an attention has too many queries to fold them into the projections.
  mutable Tensor normed_, keys_, values_;
};

std::unique_ptr<HeadMemory> CudaBackend::head_memory(const HeadMemorySpec& spec, HiddenRows hidden,
                                                     int64_t L) const {
  if (precision_ == Precision::kExact || !options_.keep_matmul_weights) return Backend::head_memory(spec, hidden, L);
  if (L <= 0 || hidden.empty()) throw Error(ErrorKind::kInternal, "head memory: no hidden states");
  return std::make_unique<CudaHeadMemory>(*this, spec, hidden, L);
}

}  // namespace stave::cuda
